//! Kernel warnings are verdicts: a line the kernel prints at warning level
//! or above (`<0>`..`<4>`) that names our device or the port above it fails
//! the boot, with the line as the reason. Splats are only the loudest of
//! them; the PCI, PM, AER, DMA and driver cores say most of what goes wrong
//! in one line (`can't enable device`, `Runtime PM usage count underflow`,
//! `AER: device recovery failed`, `disabling already-disabled device`).
//!
//! Three shapes are judged elsewhere and pass here: the driver's own step
//! and event lines, and the driver core's echo of a probe that failed (the
//! driver rules hold each to the scenario's expectations); and the AER
//! core's report of an error the boot caused on purpose (the host injected
//! it, or a sweep's fault struck), which the AER rules count. The DMA core's
//! trace events are printed at warning level but are a record, judged by
//! `dma_core`.

use crate::console::{self, Origin};
use vocab::scenario::{Check, Scenario};

/// How the kernel names our device when it enumerates it.
const OUR_ID: &str = "[7072:0001]";

/// The BDFs of our device and of the port above it, as the kernel's
/// enumeration lines name them.
fn ours(texts: &[&str]) -> Vec<String> {
    let mut devices: Vec<&str> = texts
        .iter()
        .filter(|t| t.contains(OUR_ID))
        .filter_map(|t| t.strip_prefix("pci ")?.split(": ").next())
        .collect();
    devices.sort();
    devices.dedup();
    let mut out: Vec<String> = devices.iter().map(|d| d.to_string()).collect();
    for d in devices {
        // 0000:01:00.0 sits on bus 01: the bridge to it is its port.
        let Some(bus) = d.split(':').nth(1) else {
            continue;
        };
        let bridge = format!("PCI bridge to [bus {bus}");
        out.extend(
            texts
                .iter()
                .filter(|t| t.contains(&bridge))
                .filter_map(|t| t.strip_prefix("pci ")?.split(": ").next())
                .map(str::to_string),
        );
    }
    out.sort();
    out.dedup();
    out
}

/// The kernel's level of a console line, when the kernel printed it.
fn level(line: &str) -> Option<u32> {
    if console::origin(line) != Origin::Kernel {
        return None;
    }
    let n: u32 = line.strip_prefix('<')?.split_once('>')?.0.parse().ok()?;
    Some(n & 7)
}

/// Whether `text` is one of the DMA core's trace events (`dma_map_page:
/// BDF …`, `dma_sync_single_for_cpu: BDF …`).
fn dma_trace(text: &str) -> bool {
    text.split_once(": ")
        .is_some_and(|(name, _)| name.starts_with("dma_") && !name.contains(' '))
}

/// Whether the boot caused AER reports on purpose.
fn errors_injected(s: &Scenario, texts: &[&str]) -> bool {
    matches!(s.check, Check::Sweep(_))
        || s.script_name() == vocab::scenario::MODULE_SWEEP.name
        || texts.iter().any(|t| t.starts_with("pcirig: host aer "))
}

/// Whether `text` (naming `bdf` as `{driver} {bdf}: …`) is a shape another
/// rule judges.
fn judged_elsewhere(text: &str, bdf: &str, aer: bool) -> bool {
    let Some((who, rest)) = text.split_once(&format!(" {bdf}: ")) else {
        return false;
    };
    let driver_line = rest.starts_with("step ")
        || rest.starts_with("event ")
        || (rest.starts_with("probe with driver ") && rest.contains(" failed with error -"));
    let aer_report = who == "pcieport"
        && (rest.starts_with("PCIe Bus Error: ")
            || rest.starts_with("  device [")
            || rest.starts_with("   [")
            || rest.starts_with("AER:   TLP Header: "));
    (driver_line && who != "pcieport") || (aer && aer_report)
}

/// The first warning about our device no rule expects, if any.
pub fn unexpected(s: &Scenario, lines: &[String]) -> Option<String> {
    let texts: Vec<&str> = lines.iter().map(|l| console::strip_timestamp(l)).collect();
    let ours = ours(&texts);
    if ours.is_empty() {
        return None;
    }
    let aer = errors_injected(s, &texts);
    lines.iter().zip(&texts).find_map(|(line, text)| {
        if level(line)? > 4 || dma_trace(text) {
            return None;
        }
        let bdf = ours.iter().find(|b| text.contains(&format!(" {b}: ")))?;
        (!judged_elsewhere(text, bdf, aer)).then(|| line.trim_end().to_string())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn boot(extra: &[&str]) -> Vec<String> {
        let mut l: Vec<String> = [
            "<6>[    1.7] pci 0000:00:01.0: PCI bridge to [bus 01]",
            "<6>[    1.8] pci 0000:01:00.0: [7072:0001] type 00 class 0xff0000 PCIe Endpoint",
            "<4>[    2.0] dma_map_page: 0000:01:00.0 dir=TO_DEVICE dma_addr=652c00 size=1024",
            "<3>[    2.1] pci_rig 0000:01:00.0: step identify FAIL magic 0xbad0bad",
            "<3>[    2.2] pci_rig 0000:01:00.0: probe with driver pci_rig failed with error -5",
            "<4>[    2.3] pci_rig 0000:01:00.0: event worker_hung accesses=385",
            "<4>[    2.4] ACPI: IRQ 4 override to edge(!), high(!)",
            "<6>[    2.5] pci_rig 0000:01:00.0: a line at info level",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        l.extend(extra.iter().map(|s| s.to_string()));
        l
    }

    #[test]
    fn our_device_and_its_port_are_found() {
        let lines = boot(&[]);
        let texts: Vec<&str> = lines.iter().map(|l| console::strip_timestamp(l)).collect();
        assert_eq!(ours(&texts), vec!["0000:00:01.0", "0000:01:00.0"]);
    }

    #[test]
    fn a_warning_about_our_device_fails_unless_judged_elsewhere() {
        let s = &vocab::scenario::PROBE;
        assert_eq!(unexpected(s, &boot(&[])), None);
        let bad = "<3>[    3.0] pci_rig 0000:01:00.0: Runtime PM usage count underflow!";
        assert_eq!(unexpected(s, &boot(&[bad])).as_deref(), Some(bad));
        let port = "<4>[    3.0] pcieport 0000:00:01.0: can't change power state from D3cold to D0";
        assert_eq!(unexpected(s, &boot(&[port])).as_deref(), Some(port));
        // Another device's warning is not ours to judge.
        let other = "<3>[    3.0] virtio-pci 0000:00:02.0: something failed";
        assert_eq!(unexpected(s, &boot(&[other])), None);
    }

    #[test]
    fn an_aer_report_passes_only_where_the_boot_caused_it() {
        let report = "<3>[    3.0] pcieport 0000:00:01.0: PCIe Bus Error: severity=Uncorrectable (Fatal), type=Transaction Layer, (Receiver ID)";
        let asked = "pcirig: host aer rp0 POISON_TLP";
        let s = &vocab::scenario::PROBE;
        assert_eq!(unexpected(s, &boot(&[report])).as_deref(), Some(report));
        assert_eq!(unexpected(s, &boot(&[asked, report])), None);
        // The port's own failure to recover is never a report of the error.
        let failed = "<3>[    3.1] pcieport 0000:00:01.0: AER: device recovery failed";
        assert_eq!(
            unexpected(s, &boot(&[asked, report, failed])).as_deref(),
            Some(failed)
        );
    }
}
