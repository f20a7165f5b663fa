//! What a boot leaves for the judge: the console as the guest meant it, how the boot ended,
//! QEMU's events, what the host did and failed to do for the guest, the MMIO oracle's log and
//! where the time went. The rig gathers it; the judge only reads it.

use crate::phases::Phases;
use std::process::ExitStatus;
use std::time::Duration;
use vocab::arch::Arch;

/// What a boot left behind.
pub struct Console {
    /// The console's lines as the guest meant them (`console::Untangle`);
    /// serial.log has them as they came.
    pub lines: Vec<String>,
    pub timed_out: bool,
    pub exit: Option<ExitStatus>,
    pub elapsed: Duration,
    /// The machine that booted.
    pub arch: Arch,
    /// The kernel was asked to start each record with its syslog prefix
    /// (`console_msg_format=syslog`), which tells its lines from user
    /// space's (`console::origin`).
    pub syslog: bool,
    /// QMP events (DEVICE_DELETED, SHUTDOWN, …) seen during the boot.
    pub events: Vec<serde_json::Value>,
    /// When the host injected each AER error the guest asked for (the host's
    /// CLOCK_MONOTONIC in ns, the clock of the device's access log); filled
    /// in by the caller of `Guest::run`.
    pub injected_ns: Vec<u64>,
    /// What the host failed to do for the guest (a host action that failed, a device request
    /// the server refused), each with its reason; filled in by the caller of `Guest::run`.
    pub host_failures: Vec<String>,
    /// The MMIO oracle's log (`oracle`), when the plugin watched this boot:
    /// what it saw, or why it could not be read; filled in by the caller.
    pub oracle: Option<Result<crate::oracle::Log, String>>,
    /// Where the boot's time went, by the host's clock and the guest's
    /// printk stamps (`judge::phases`).
    pub phases: Phases,
}

