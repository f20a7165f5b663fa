//! A module pci-rig did not write (`--module`): judged without a line of its own. The guest
//! has the host mark each binding's window: `begin` before it loads or binds the module,
//! `ended` once the unbind, the unload or the removal has returned (`mark` in images/init; the
//! guest waits for the host's answer, and the device's writes are not posted, so everything
//! the binding did lies before its `ended` and nothing of the next one before its `begin`).
//! The host's clock is the device log's and the MMIO oracle's, so each access they saw falls
//! inside a window or outside all of them. Held:
//! - the marks: `begin` and `ended` alternate, from `begin`, every window closed;
//! - our device's log: no BAR access outside a window, bus mastering and MSI off at every
//!   window's end (the config writes it saw), every DMA inside a window and one the device
//!   could make (mapped, for its direction, bus master on);
//! - the MMIO oracle (either device: it sees accesses to a device that is gone too): no access
//!   to the device's BARs, by the kernel's own resource lines, outside a window.

use crate::config;
use crate::device_log::{DmaEvent, DmaOutcome, Region, Stopped};
use crate::evidence::Console;
use crate::oracle::{self, Bar, Log};

/// The marks' names (`images/scenarios/module-*.sh`).
pub const BEGIN: &str = "begin";
pub const ENDED: &str = "ended";

/// A binding's window on the host's clock: from its `begin` mark to its `ended` one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Window {
    pub begin_ns: u64,
    pub end_ns: u64,
}

/// The bindings' windows from the boot's marks.
pub fn windows(c: &Console) -> Result<Vec<Window>, String> {
    let mut out = Vec::new();
    let mut open = None;
    for (i, m) in c.marks.iter().enumerate() {
        match (m.name.as_str(), open) {
            (BEGIN, None) => open = Some(m.ns),
            (ENDED, Some(begin_ns)) => {
                out.push(Window {
                    begin_ns,
                    end_ns: m.ns,
                });
                open = None;
            }
            (name, _) => {
                return Err(format!(
                    "the guest's mark #{} is `{name}` where `{}` was due: the scenario's marks must alternate begin, ended",
                    i + 1,
                    if open.is_some() { ENDED } else { BEGIN }
                ))
            }
        }
    }
    if open.is_some() || out.is_empty() {
        return Err(format!(
            "the guest marked {} bindings' windows and left {} open: the scenario did not run to its end",
            out.len(),
            usize::from(open.is_some())
        ));
    }
    Ok(out)
}

/// Where `ns` falls: inside window `i`, or after how many windows ended (none open).
fn place(windows: &[Window], ns: u64) -> Result<usize, usize> {
    match windows
        .iter()
        .position(|w| (w.begin_ns..=w.end_ns).contains(&ns))
    {
        Some(i) => Ok(i),
        None => Err(windows.iter().filter(|w| w.end_ns < ns).count()),
    }
}

/// What an access outside every window is called: before the first binding, or after `n` ended.
fn outside(n: usize) -> String {
    match n {
        0 => "before the first binding began".to_string(),
        n => format!("after binding {n} ended"),
    }
}

/// Holds the device servers' logs and the oracle's to the windows; the summary for the verdict.
pub fn judge(c: &Console, device: &[Stopped]) -> Result<String, String> {
    let windows = windows(c)?;
    let mut summary = match windows.len() {
        1 => ", 1 binding marked".to_string(),
        n => format!(", {n} bindings marked"),
    };
    let mut bar_accesses = 0;
    for (server, d) in device.iter().enumerate() {
        for a in d.log.iter().filter(|a| a.region != Region::Config) {
            bar_accesses += 1;
            if let Err(n) = place(&windows, a.time_ns) {
                return Err(format!(
                    "the device (server {server}) saw {} {} of {} at 0x{:x} (access #{}) {}: nothing may touch the device outside a binding",
                    a.size,
                    if a.kind == crate::device_log::Kind::Write { "byte write" } else { "byte read" },
                    a.region.name(),
                    a.offset,
                    a.seq,
                    outside(n)
                ));
            }
        }
        for (i, w) in windows.iter().enumerate() {
            // A server attached after this window ended (a replug) says nothing of it.
            if d.log.first().is_some_and(|a| a.time_ns > w.end_ns) {
                continue;
            }
            if let Some(on) = config::on_at(&d.log, w.end_ns) {
                return Err(format!(
                    "binding {} ended with {on} in the device's config space: a binding's end must disable the device (bus mastering off) and free its MSI vectors",
                    i + 1
                ));
            }
        }
        let (mut dmas, mut excused) = (0, 0);
        for e in &d.dma {
            let DmaEvent::Dma {
                seq,
                time_ns,
                outcome,
                iova,
                len,
                ..
            } = e
            else {
                continue;
            };
            dmas += 1;
            let w = match place(&windows, *time_ns) {
                Ok(w) => windows[w],
                Err(n) => {
                    return Err(format!(
                        "the device ran a DMA of {len} bytes at 0x{iova:x} (started by access #{seq}) {}: a binding's end must stop the device's DMA",
                        outside(n)
                    ))
                }
            };
            // A fault the scenario struck in this binding before the doorbell (a dropped write
            // of the DMA's address, say) excuses what the device then refused: the driver
            // could not know.
            let struck = d.log.iter().any(|a| {
                a.fault.is_some() && a.seq <= *seq && (w.begin_ns..=w.end_ns).contains(&a.time_ns)
            });
            if struck && *outcome != DmaOutcome::Ok {
                excused += 1;
                continue;
            }
            // `Forced`: the device refused it on the scenario's orders (a knob), not the driver's.
            if !matches!(outcome, DmaOutcome::Ok | DmaOutcome::Forced) {
                return Err(format!(
                    "the device's DMA of {len} bytes at 0x{iova:x} (started by access #{seq}) was refused: {outcome:?} (Fault: not in guest memory mapped for the device; Denied: mapped for the other direction; NoBusMaster: bus mastering off)"
                ));
            }
        }
        if dmas > 0 {
            summary.push_str(&format!(", {dmas} DMAs inside them"));
        }
        if excused > 0 {
            summary.push_str(&format!(
                " ({excused} refused after a fault the scenario struck in their binding)"
            ));
        }
    }
    if !device.is_empty() {
        summary.push_str(&format!(
            ", the device's {bar_accesses} BAR accesses inside them, bus mastering and MSI off at each end"
        ));
    }
    if device.is_empty() {
        summary.push_str(&noted_master(&c.lines));
    }
    match &c.oracle {
        None => summary.push_str("; the MMIO oracle did not watch"),
        Some(Err(e)) => return Err(format!("MMIO oracle: {e}")),
        Some(Ok(log)) => summary.push_str(&held_by_oracle(log, &oracle::bars(&c.lines), &windows)?),
    }
    Ok(summary)
}

/// What the guest's `pcirig: command N` lines (the kernel's read of COMMAND after a binding
/// ended) say of bus mastering, for a device without a config log of its own (pci-testdev):
/// noted, not judged, since the witness is the guest's kernel, not the device.
fn noted_master(lines: &[String]) -> String {
    let commands: Vec<u16> = lines
        .iter()
        .filter_map(|l| {
            crate::console::strip_timestamp(l)
                .strip_prefix("pcirig: command ")?
                .trim()
                .parse()
                .ok()
        })
        .collect();
    let on = commands.iter().filter(|&&c| c & 0x4 != 0).count();
    match (commands.len(), on) {
        (0, _) => String::new(),
        (n, 0) => format!("; bus mastering off after each of {n} unbinds, by the kernel's read (noted: the device keeps no config log)"),
        (n, on) => format!("; note: bus mastering still on after {on} of {n} unbinds, by the kernel's read of COMMAND (not judged: the device keeps no config log)"),
    }
}

/// The oracle's accesses to the device's BARs, each inside a window.
fn held_by_oracle(log: &Log, bars: &[Bar], windows: &[Window]) -> Result<String, String> {
    if !log.complete {
        return Err("MMIO oracle: its log is cut short (QEMU did not exit normally)".into());
    }
    if log.armed.is_none() {
        return Err("MMIO oracle: never armed, so it saw nothing of the bindings".into());
    }
    if bars.is_empty() {
        return Err("the kernel never placed the device's BARs (no `pci 0000:01:00.0: BAR` line): the oracle cannot tell its accesses".into());
    }
    let mut n = 0;
    for s in &log.seen {
        let Some(bar) = bars.iter().find(|b| (b.start..b.end).contains(&s.addr)) else {
            continue;
        };
        n += 1;
        if let Err(k) = place(windows, s.ns) {
            return Err(format!(
                "MMIO oracle (inside QEMU): a {}-byte {:?} of {} at 0x{:x} (pc 0x{:x}) {}: nothing may touch the device outside a binding",
                s.size,
                s.kind,
                bar.region.name(),
                s.addr - bar.start,
                s.pc,
                outside(k)
            ));
        }
    }
    Ok(format!(
        "; the MMIO oracle saw {n} accesses to its BARs, all inside them"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device_log::test_access as access;
    use crate::requests::Mark;
    use std::os::unix::process::ExitStatusExt;
    use std::process::ExitStatus;

    /// A boot whose marks are at these times (begin, ended, begin, ended, …).
    fn console(marks: &[u64]) -> Console {
        Console {
            lines: vec![],
            timed_out: false,
            exit: Some(ExitStatus::from_raw(0)),
            elapsed: std::time::Duration::ZERO,
            arch: vocab::arch::Arch::X86_64,
            syslog: true,
            events: vec![],
            injected_ns: vec![],
            marks: marks
                .iter()
                .enumerate()
                .map(|(i, &ns)| Mark {
                    name: [BEGIN, ENDED][i % 2].to_string(),
                    ns,
                })
                .collect(),
            host_failures: vec![],
            oracle: None,
            phases: Default::default(),
        }
    }

    fn server(log: Vec<crate::device_log::Access>, dma: Vec<DmaEvent>) -> Vec<Stopped> {
        vec![Stopped {
            died: None,
            status: ExitStatus::from_raw(0),
            log,
            dma,
        }]
    }

    /// A binding from 10 to 20: bus mastering and MSI on at 11, a BAR read at 12, both off
    /// at 13 and 14; `extra` added.
    fn binding(extra: &[crate::device_log::Access]) -> Vec<crate::device_log::Access> {
        let mut log = vec![
            access(11, "config", 4, 2, 0x6, "write"),
            access(12, "bar0", 0, 4, 0x7072_6967, "read"),
            access(13, "config", 4, 2, 0x2, "write"),
        ];
        log.extend_from_slice(extra);
        log
    }

    fn dma(time_ns: u64, outcome: DmaOutcome) -> DmaEvent {
        DmaEvent::Dma {
            seq: 12,
            before: 12,
            waited: false,
            time_ns,
            iova: 0x1000,
            len: 64,
            dir: crate::device_log::DmaDirection::ToDevice,
            crc_only: true,
            outcome,
            crc: None,
        }
    }

    #[test]
    fn a_binding_that_stayed_inside_its_window_passes() {
        let s = judge(
            &console(&[10, 20]),
            &server(binding(&[]), vec![dma(12, DmaOutcome::Ok)]),
        )
        .unwrap();
        assert!(
            s.contains("1 binding marked, 1 DMAs inside them, the device's 1 BAR accesses"),
            "{s}"
        );
    }

    #[test]
    fn the_marks_must_alternate_and_close() {
        let mut c = console(&[10, 20]);
        c.marks[1].name = BEGIN.into();
        let e = judge(&c, &server(vec![], vec![])).unwrap_err();
        assert!(
            e.contains("mark #2 is `begin` where `ended` was due"),
            "{e}"
        );
        let e = judge(&console(&[10]), &server(vec![], vec![])).unwrap_err();
        assert!(
            e.contains("marked 0 bindings' windows and left 1 open"),
            "{e}"
        );
    }

    #[test]
    fn a_bar_access_after_the_binding_ended_fails_naming_it() {
        let late = access(25, "bar0", 0xc, 4, 0, "read");
        let e = judge(&console(&[10, 20]), &server(binding(&[late]), vec![])).unwrap_err();
        assert!(
            e.contains("4 byte read of bar0 at 0xc (access #25) after binding 1 ended"),
            "{e}"
        );
        // Between two bindings too; and before the first.
        let e = judge(
            &console(&[10, 20, 30, 40]),
            &server(vec![access(25, "bar0", 0, 4, 0, "write")], vec![]),
        )
        .unwrap_err();
        assert!(e.contains("after binding 1 ended"), "{e}");
        let e = judge(
            &console(&[10, 20]),
            &server(vec![access(5, "bar2", 0, 1, 0, "read")], vec![]),
        )
        .unwrap_err();
        assert!(e.contains("before the first binding began"), "{e}");
    }

    #[test]
    fn bus_mastering_left_on_at_the_end_fails() {
        let log = vec![access(11, "config", 4, 2, 0x6, "write")];
        let e = judge(&console(&[10, 20]), &server(log, vec![])).unwrap_err();
        assert!(
            e.contains("binding 1 ended with bus mastering on (command 0x6"),
            "{e}"
        );
    }

    #[test]
    fn a_dma_after_the_end_or_refused_fails() {
        let e = judge(
            &console(&[10, 20]),
            &server(binding(&[]), vec![dma(21, DmaOutcome::Ok)]),
        )
        .unwrap_err();
        assert!(
            e.contains(
                "ran a DMA of 64 bytes at 0x1000 (started by access #12) after binding 1 ended"
            ),
            "{e}"
        );
        let e = judge(
            &console(&[10, 20]),
            &server(binding(&[]), vec![dma(15, DmaOutcome::Fault)]),
        )
        .unwrap_err();
        assert!(e.contains("was refused: Fault"), "{e}");
        // Unless a fault the scenario struck in the binding, before the doorbell, explains it.
        let mut struck = access(12, "bar0", 0x60, 4, 0, "write");
        struck.fault = Some(qemu_device::model::FaultKind::Error);
        let s = judge(
            &console(&[10, 20]),
            &server(vec![struck], vec![dma(15, DmaOutcome::Fault)]),
        )
        .unwrap();
        assert!(
            s.contains("1 refused after a fault the scenario struck"),
            "{s}"
        );
    }

    #[test]
    fn bus_mastering_the_kernel_read_is_noted_for_a_device_without_a_config_log() {
        let lines = |cs: &[&str]| -> Vec<String> {
            cs.iter().map(|c| format!("pcirig: command {c}")).collect()
        };
        assert!(noted_master(&lines(&["2", "0"])).contains("off after each of 2 unbinds"));
        assert!(noted_master(&lines(&["6", "2"])).contains("still on after 1 of 2 unbinds"));
        assert_eq!(noted_master(&[]), "");
    }

    #[test]
    fn the_oracle_sees_what_the_device_cannot() {
        let text = "{\"plugin\":\"mmio-oracle\",\"api\":7}\n{\"armed\":{\"seq\":1,\"flushed\":true}}\n\
            {\"seq\":2,\"ns\":15,\"vcpu\":0,\"pc\":1,\"vaddr\":2,\"addr\":4026531840,\"size\":4,\"kind\":\"read\",\"value\":0,\"io\":true}\n\
            {\"seq\":3,\"ns\":25,\"vcpu\":0,\"pc\":7,\"vaddr\":2,\"addr\":4026531852,\"size\":4,\"kind\":\"read\",\"value\":0,\"io\":true}\n\
            {\"end\":{\"records\":3}}\n";
        let log = Log::parse(text).unwrap();
        let bars = [Bar {
            region: Region::Bar0,
            start: 0xf000_0000,
            end: 0xf000_1000,
        }];
        let windows = [Window {
            begin_ns: 10,
            end_ns: 20,
        }];
        let e = held_by_oracle(&log, &bars, &windows).unwrap_err();
        assert!(
            e.contains("a 4-byte Read of bar0 at 0xc (pc 0x7) after binding 1 ended"),
            "{e}"
        );
        let ok = held_by_oracle(
            &log,
            &bars,
            &[Window {
                begin_ns: 10,
                end_ns: 30,
            }],
        )
        .unwrap();
        assert!(
            ok.contains("saw 2 accesses to its BARs, all inside them"),
            "{ok}"
        );
    }
}
