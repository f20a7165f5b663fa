//! What a boot leaves for the judge: the console as the guest meant it, how the boot ended,
//! QEMU's events, what the host did and failed to do for the guest, the MMIO oracle's log and
//! where the time went. The rig gathers it; the judge only reads it.

use crate::device_log::{Access, DmaEvent, Stopped};
use crate::oracle::{HostArmed, Log};
use crate::phases::Phases;
use serde::{Deserialize, Serialize};
use std::os::unix::process::ExitStatusExt;
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
    /// The moments the guest had the host write down, in order; filled in by the caller of
    /// `Guest::run`.
    pub marks: Vec<crate::requests::Mark>,
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

/// A boot's evidence at rest: what the console and the device servers' logs do not say
/// themselves (`evidence.json` in each boot's folder, beside `console.log`, the lines as
/// the guest meant them). [`unseal`] gives the judge back exactly what it had, so a boot can
/// be judged again later, and the judge's tests read real boots (`tests/fixtures/`).
#[derive(Debug, Serialize, Deserialize)]
pub struct Sealed {
    /// The scenario judged.
    pub scenario: String,
    pub arch: String,
    pub timed_out: bool,
    /// QEMU's wait status, raw (`None`: it was not reaped).
    pub exit: Option<i32>,
    pub elapsed_ms: u64,
    pub syslog: bool,
    pub events: Vec<serde_json::Value>,
    pub injected_ns: Vec<u64>,
    #[serde(default)]
    pub marks: Vec<crate::requests::Mark>,
    pub host_failures: Vec<String>,
    /// The MMIO oracle, when it watched: what the host knew when it armed it, or why its log
    /// could not be read (the log itself is `oracle.jsonl`).
    pub oracle: Option<Result<Option<HostArmed>, String>>,
    pub phases: Phases,
    /// Each device server in attach order: the folder of its logs (relative to the boot's),
    /// and how it ended (raw wait statuses).
    pub servers: Vec<SealedServer>,
}

#[derive(Debug, Serialize, Deserialize)]
pub struct SealedServer {
    pub dir: String,
    pub died: Option<i32>,
    pub status: i32,
}

/// Seals `c` and the servers' ends; `dirs` names each server's folder, relative to the boot's.
pub fn seal(scenario: &str, c: &Console, device: &[Stopped], dirs: &[String]) -> Sealed {
    Sealed {
        scenario: scenario.to_string(),
        arch: c.arch.name().to_string(),
        timed_out: c.timed_out,
        exit: c.exit.map(|e| e.into_raw()),
        elapsed_ms: c.elapsed.as_millis() as u64,
        syslog: c.syslog,
        events: c.events.clone(),
        injected_ns: c.injected_ns.clone(),
        marks: c.marks.clone(),
        host_failures: c.host_failures.clone(),
        oracle: c
            .oracle
            .as_ref()
            .map(|o| o.as_ref().map(|log| log.host.clone()).map_err(Clone::clone)),
        phases: c.phases.clone(),
        servers: device
            .iter()
            .zip(dirs)
            .map(|(s, dir)| SealedServer {
                dir: dir.clone(),
                died: s.died.map(|e| e.into_raw()),
                status: s.status.into_raw(),
            })
            .collect(),
    }
}

/// The texts of one device server's logs: its access log and its DMA log (JSON lines).
pub struct ServerLogs<'a> {
    pub access: &'a str,
    pub dma: &'a str,
}

/// The judge's evidence back from `sealed`, the console's lines (`console.log`), each server's
/// logs (in `sealed.servers`' order) and the oracle's log (`oracle.jsonl`), when it watched.
pub fn unseal(
    sealed: &Sealed,
    console: &str,
    servers: &[ServerLogs<'_>],
    oracle: Option<&str>,
) -> Result<(Console, Vec<Stopped>), String> {
    if servers.len() != sealed.servers.len() {
        return Err(format!(
            "{} device servers attached, {} servers' logs given",
            sealed.servers.len(),
            servers.len()
        ));
    }
    let arch: Arch = sealed.arch.parse()?;
    let oracle = match (&sealed.oracle, oracle) {
        (None, _) => None,
        (Some(Err(why)), _) => Some(Err(why.clone())),
        (Some(Ok(_)), None) => return Err("the oracle watched, but no oracle log was given".into()),
        (Some(Ok(host)), Some(text)) => Some(Log::parse(text).map(|mut log| {
            log.host = host.clone();
            log
        })),
    };
    let c = Console {
        lines: console.lines().map(str::to_string).collect(),
        timed_out: sealed.timed_out,
        exit: sealed.exit.map(ExitStatus::from_raw),
        elapsed: Duration::from_millis(sealed.elapsed_ms),
        arch,
        syslog: sealed.syslog,
        events: sealed.events.clone(),
        injected_ns: sealed.injected_ns.clone(),
        marks: sealed.marks.clone(),
        host_failures: sealed.host_failures.clone(),
        oracle,
        phases: sealed.phases.clone(),
    };
    let stopped = sealed
        .servers
        .iter()
        .zip(servers)
        .map(|(s, logs)| {
            Ok(Stopped {
                died: s.died.map(ExitStatus::from_raw),
                status: ExitStatus::from_raw(s.status),
                log: json_lines::<Access>(logs.access, &s.dir)?,
                dma: json_lines::<DmaEvent>(logs.dma, &s.dir)?,
            })
        })
        .collect::<Result<Vec<_>, String>>()?;
    Ok((c, stopped))
}

fn json_lines<T: serde::de::DeserializeOwned>(text: &str, dir: &str) -> Result<Vec<T>, String> {
    text.lines()
        .enumerate()
        .map(|(i, l)| {
            serde_json::from_str(l).map_err(|e| format!("{dir}: log line {}: {e}", i + 1))
        })
        .collect()
}
