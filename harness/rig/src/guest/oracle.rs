//! The MMIO oracle's plugin (`qemu-plugin/`, `mmio-oracle`) in a boot: the windows it watches,
//! its `-plugin` argument, arming it while the guest waits, QEMU's refusal of it, and reading
//! its log back for the judge (`judge::oracle`).

use crate::arch::Arch;
use anyhow::{bail, Context, Result};
use judge::oracle::{armed_in, Log, LOG};
use std::path::Path;
use std::time::{Duration, Instant};

/// The file whose creation arms the plugin (`arm=`), in a boot's folder.
pub const ARM: &str = "oracle.arm";

/// The guest's request to arm the oracle (`pcirig: host arm-oracle`,
/// printed by images/init before the scenario runs) and the line the host
/// answers on the console once the plugin's log says it is armed; the
/// kernel command line's `pcirig.oracle=late` tells the guest to ask.
pub const ARM_ACTION: &str = "arm-oracle";
pub const ARMED_ACK: &str = "pcirig-oracle-armed";
pub const CMDLINE: &str = "pcirig.oracle=late";

/// The PCI memory windows of each machine profile (`arch::machine_args`),
/// as the guest kernel reports its root bus resources: every BAR lands in
/// one of them.
pub fn windows(arch: Arch) -> &'static [(u64, u64)] {
    match arch {
        // q35 with 512 MiB: below the ECAM, from the ECAM's end to the
        // IOAPIC, and the 64-bit window.
        Arch::X86_64 => &[
            (0x2000_0000, 0x9000_0000),
            (0xc000_0000, 0x3ec0_0000),
            (0x1_0000_0000, 0x8_0000_0000),
        ],
        Arch::Arm64 => &[(0x1000_0000, 0x2eff_0000), (0x80_0000_0000, 0x80_0000_0000)],
        Arch::Riscv64 => &[(0x4000_0000, 0x4000_0000), (0x4_0000_0000, 0x4_0000_0000)],
    }
}

/// QEMU's `-plugin` argument: watch `windows` (start, length), log to
/// `out`, armed once the file `arm` exists.
pub fn plugin_arg(so: &Path, windows: &[(u64, u64)], out: &Path, arm: &Path) -> String {
    let mut a = so.display().to_string();
    for (start, len) in windows {
        a.push_str(&format!(",watch={start:#x}+{len:#x}"));
    }
    a.push_str(&format!(",out={},arm={}", out.display(), arm.display()));
    a
}

/// Arms the plugin of a running boot: creates its arm file, then waits
/// for its `armed` record, calling `nudge` every 50 ms meanwhile (a vCPU
/// asks QEMU for the reset when it goes idle or wakes up, so the host wakes
/// one: a byte on the console raises an interrupt). Fails after `timeout`.
pub fn arm(dir: &Path, timeout: Duration, mut nudge: impl FnMut() -> Result<()>) -> Result<()> {
    let log = dir.join(LOG);
    std::fs::write(dir.join(ARM), "armed by the harness\n")
        .with_context(|| format!("creating {}", dir.join(ARM).display()))?;
    let start = Instant::now();
    let mut nudged = start;
    loop {
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        if armed_in(&text) {
            return Ok(());
        }
        if start.elapsed() > timeout {
            bail!(
                "the MMIO oracle did not say it was armed (no `armed` record in {}) within {timeout:?} of the request",
                log.display()
            );
        }
        if nudged.elapsed() >= Duration::from_millis(50) {
            nudge()?;
            nudged = Instant::now();
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// What QEMU says when it does not take the plugin (its `Could not load
/// plugin` line about ours, and ours), as our error; `None` when it said
/// neither (another plugin's refusal is QEMU's own error).
pub fn refused(qemu_stderr: &str) -> Option<String> {
    let why: Vec<&str> = qemu_stderr
        .lines()
        .filter(|l| {
            l.contains("mmio-oracle:")
                || (l.contains("Could not load plugin") && l.contains("libmmio_oracle.so"))
        })
        .collect();
    (!why.is_empty()).then(|| format!("QEMU refused the MMIO oracle plugin: {}", why.join("; ")))
}

/// Reads the plugin's log of a boot.
pub fn read(path: &Path) -> Result<Log, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("no oracle log {}: {e}", path.display()))?;
    Log::parse(&text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn qemus_refusal_becomes_our_error() {
        let e = refused(
            "mmio-oracle: no out=PATH given\nqemu-system-x86_64: Could not load plugin /t/libmmio_oracle.so: qemu_plugin_install returned error code 1\n",
        )
        .unwrap();
        assert!(
            e.starts_with("QEMU refused the MMIO oracle plugin: mmio-oracle: no out=PATH given; "),
            "{e}"
        );
        assert!(refused("qemu-system-x86_64: terminating on signal 15\n").is_none());
        // Every boot loads vcpu-yield too: its refusal is not the oracle's.
        assert!(refused(
            "vcpu-yield: takes no arguments\nqemu-system-x86_64: Could not load plugin /t/libvcpu_yield.so: qemu_plugin_install returned error code 1\n"
        )
        .is_none());
    }

    #[test]
    fn watches_each_machines_pci_windows() {
        let a = plugin_arg(
            Path::new("/p/lib.so"),
            windows(Arch::Riscv64),
            Path::new("/b/oracle.jsonl"),
            Path::new("/b/oracle.arm"),
        );
        assert_eq!(
            a,
            "/p/lib.so,watch=0x40000000+0x40000000,watch=0x400000000+0x400000000,out=/b/oracle.jsonl,arm=/b/oracle.arm"
        );
        for arch in Arch::ALL {
            assert!(!windows(arch).is_empty());
        }
    }
}
