//! The guest went down (poweroff or reboot) with a binding alive: the kernel called our
//! driver's shutdown (`event shutdown_begin` … `event shutdown_done`), which stops the device
//! with a RESET; the PCI adapter then turns bus mastering off. By the device's own logs:
//! nothing of the binding's reached the device after that RESET (the worker's reads, a stream
//! round, a doorbell), and its config log turned bus mastering off after it, so no DMA can reach
//! memory the next kernel or the firmware owns.

use crate::accounting::{binding_claim, ClaimSeqs};
use crate::device_log::{DmaEvent, DmaOutcome, Kind, Region, Stopped};
use crate::driver::{driver_text, Actor};

/// Where a binding's shutdown stopped the device: the binding (from 1) and the index, among its
/// `# mmio` reports, of the RESET.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Stop {
    binding: usize,
    reset: usize,
}

/// The shutdowns on the console, each with its RESET, or why one is malformed.
fn stops(lines: &[String]) -> Result<Vec<Stop>, String> {
    let reset = format!(
        "# mmio w bar0 {:#x} 4 {:#x}",
        regmap::reg::RESET,
        regmap::RESET_KEY
    );
    let (mut binding, mut reports) = (0, 0);
    let mut open: Option<Option<usize>> = None;
    let mut out = Vec::new();
    for d in lines.iter().filter_map(|l| driver_text(l)) {
        if d.starts_with("event probe_begin") {
            (binding, reports) = (binding + 1, 0);
        } else if d.starts_with("event shutdown_begin") {
            open = Some(None);
        } else if d.starts_with("event shutdown_done") {
            match open.take() {
                Some(Some(reset)) => out.push(Stop { binding, reset }),
                Some(None) => {
                    return Err(format!(
                        "binding {binding}'s shutdown did not stop the device (no RESET between shutdown_begin and shutdown_done)"
                    ))
                }
                None => return Err("`event shutdown_done` without its begin".into()),
            }
        }
        if d.starts_with("# mmio") {
            if let Some(slot @ None) = open.as_mut() {
                if d == reset {
                    *slot = Some(reports);
                }
            }
            reports += 1;
        }
    }
    if open.is_some() {
        return Err(format!("binding {binding}'s shutdown never finished"));
    }
    Ok(out)
}

/// Judges each shutdown of a live binding; `required`: the scenario is about one, so there must
/// be one. A summary for the verdict.
pub fn judge(
    lines: &[String],
    history: &[Actor],
    seqs: &ClaimSeqs,
    device: &[Stopped],
    required: bool,
) -> Result<String, String> {
    let stops = stops(lines)?;
    if required && stops.is_empty() {
        return Err(format!(
            "the guest went down with the driver bound, and no shutdown of the driver's ran: {}",
            left_running(device)
        ));
    }
    for s in &stops {
        let Some((server, reset)) = binding_claim(history, seqs, s.binding, s.reset) else {
            return Err(format!(
                "binding {}'s shutdown RESET is not in the device's log",
                s.binding
            ));
        };
        let log = &device[server].log;
        if let Some(a) = log
            .iter()
            .find(|a| a.seq > reset && a.region != Region::Config)
        {
            return Err(format!(
                "binding {}'s shutdown stopped the device (its RESET, access #{reset}), yet the device saw access #{} ({} {} {:#x}) after it",
                s.binding, a.seq, a.kind, a.region, a.offset
            ));
        }
        let master_off = log.iter().any(|a| {
            a.seq > reset
                && a.region == Region::Config
                && a.kind == Kind::Write
                && a.offset <= 4
                && 4 - a.offset < u64::from(a.size)
                && a.value
                    .is_some_and(|v| (v >> (8 * (4 - a.offset))) & 0x4 == 0)
        });
        if !master_off {
            return Err(format!(
                "binding {}'s shutdown: after its RESET (access #{reset}) the device's config log never turned bus mastering off",
                s.binding
            ));
        }
    }
    Ok(match stops.len() {
        0 => String::new(),
        n => format!(
            ", {n} shutdowns of a live binding each stopped the device (its RESET the last access of the binding's, bus mastering off after it)"
        ),
    })
}

/// What the device's logs say of a device nobody stopped: whether bus mastering was still on
/// at the end, and the last DMA it ran.
fn left_running(device: &[Stopped]) -> String {
    let Some(server) = device.last() else {
        return "no device log".into();
    };
    let master = server
        .log
        .iter()
        .filter(|a| {
            a.region == Region::Config
                && a.kind == Kind::Write
                && a.offset <= 4
                && 4 - a.offset < u64::from(a.size)
        })
        .filter_map(|a| a.value.map(|v| (v >> (8 * (4 - a.offset))) & 0x4 != 0))
        .next_back()
        .unwrap_or(false);
    let last_dma = server.dma.iter().rev().find_map(|e| match e {
        DmaEvent::Dma {
            seq,
            outcome: DmaOutcome::Ok,
            ..
        } => Some(*seq),
        _ => None,
    });
    format!(
        "bus mastering was {} at the end of the device's log, its last DMA started at access {}",
        if master { "still on" } else { "off" },
        last_dma.map_or("(none)".to_string(), |s| format!("#{s}"))
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(l: &[&str]) -> Vec<String> {
        l.iter()
            .map(|t| format!("<6>[    1.000000] pci_rig 0000:01:00.0: {t}"))
            .collect()
    }

    #[test]
    fn a_shutdown_must_stop_the_device_between_its_lines() {
        let ok = lines(&[
            "event probe_begin",
            "# mmio r bar0 0x0 4 0x70726967",
            "event probe_done",
            "event shutdown_begin",
            "# mmio w bar0 0x50 4 0x1",
            "event shutdown_done",
        ]);
        assert_eq!(
            stops(&ok).unwrap(),
            [Stop {
                binding: 1,
                reset: 1
            }]
        );
        let mut no_reset = ok.clone();
        no_reset.remove(4);
        assert!(stops(&no_reset)
            .unwrap_err()
            .contains("did not stop the device"));
        assert!(stops(&ok[..5]).unwrap_err().contains("never finished"));
    }
}
