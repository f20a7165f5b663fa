//! System sleep and runtime PM: each cycle the binding went through, by the device's own logs
//! and the MMIO oracle. The device logs every power-state change (its PMCSR, written by the PCI
//! core); a cycle is the driver's `pm_sleep` (runtime: `rpm_suspend`), the device from D0 to
//! D3hot and back, and the driver's `pm_reinit ok` and `pm_wake` (`rpm_reinit ok`,
//! `rpm_resume`). Held:
//! - the device saw D3hot then D0, once per cycle, in that order, and nothing else; for system
//!   sleep as many cycles as the scenario slept, for runtime PM at least as many as user space
//!   caused (more are the driver's own resumes on access);
//! - while it was in D3hot nothing touched its BARs: not in its log, and not in the oracle's,
//!   which sees the accesses QEMU no longer passes on (it unmaps the BARs in D3hot);
//! - the device came back without its registers (no No_Soft_Reset), and before the driver's
//!   next operation it turned interrupts on again, and a DMA moved data (`aer::set_up_again`).

use crate::console::strip_timestamp;
use crate::device_log::{DmaEvent, Kind, Region, Stopped};
use crate::driver;
use crate::evidence::Console;
use crate::oracle;

/// One stay in D3hot, by the device's log: from the access numbered `from_seq` (the first
/// after the PMCSR write to D3hot) to `to_seq`, and on the host's clock.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Asleep {
    from_seq: u64,
    to_seq: u64,
    from_ns: u64,
    to_ns: u64,
    lost: bool,
}

/// The device's stays in D3hot, server by server.
fn stays(server: &Stopped) -> Result<Vec<Asleep>, String> {
    let mut out = Vec::new();
    let mut open: Option<(u64, u64)> = None;
    for e in &server.dma {
        let DmaEvent::Power {
            seq,
            time_ns,
            from,
            to,
            lost,
        } = *e
        else {
            continue;
        };
        match (from, to, open) {
            (0, 3, None) => open = Some((seq, time_ns)),
            (3, 0, Some((from_seq, from_ns))) => {
                out.push(Asleep {
                    from_seq,
                    to_seq: seq,
                    from_ns,
                    to_ns: time_ns,
                    lost,
                });
                open = None;
            }
            _ => {
                return Err(format!(
                    "PM: the device went from D{from} to D{to} before access #{seq}, out of order (D0, D3hot, D0 is a cycle)"
                ))
            }
        }
    }
    if open.is_some() {
        return Err("PM: the device was left in D3hot".into());
    }
    Ok(out)
}

/// The power cycles a scenario puts the binding through.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cycles {
    /// This many system sleeps.
    System(usize),
    /// Runtime PM: at least this many stays in D3hot (user space's); the driver's own resumes
    /// on access add more.
    Runtime(usize),
}

impl Cycles {
    /// The driver's lines for going to sleep, setting the device up again, and waking.
    fn events(self) -> (&'static str, &'static str, &'static str) {
        match self {
            Cycles::System(_) => ("pm_sleep", "event pm_reinit ok", "pm_wake"),
            Cycles::Runtime(_) => ("rpm_suspend", "event rpm_reinit ok", "rpm_resume"),
        }
    }
}

/// Judges the boot's power cycles; the summary.
pub fn judge(c: &Console, device: &[Stopped], want: Cycles) -> Result<String, String> {
    let (sleep, reinit, wake) = want.events();
    let events = |name: &str| c.lines.iter().filter(|l| driver::is_event(l, name)).count();
    let (slept, woke) = (events(sleep), events(wake));
    let reinit_ok = c
        .lines
        .iter()
        .filter(|l| strip_timestamp(l).contains(reinit))
        .count();
    let cycles = match want {
        Cycles::System(n) => n,
        Cycles::Runtime(_) => slept,
    };
    if (slept, reinit_ok, woke) != (cycles, cycles, cycles) {
        return Err(format!(
            "PM: the driver went to sleep {slept} times, set the device up again {reinit_ok} times and woke {woke} times; {cycles} sleep cycles want each {cycles}"
        ));
    }
    let mut all = Vec::new();
    for server in device {
        let asleep = stays(server)?;
        for a in &asleep {
            if let Some(x) = server
                .log
                .iter()
                .find(|x| x.region != Region::Config && (a.from_seq..a.to_seq).contains(&x.seq))
            {
                return Err(format!(
                    "PM: access #{} ({} {} 0x{:x}) reached the device while it was in D3hot (from #{} to #{})",
                    x.seq,
                    x.kind.name(),
                    x.region.name(),
                    x.offset,
                    a.from_seq,
                    a.to_seq
                ));
            }
            if a.lost {
                let until = asleep
                    .iter()
                    .map(|b| b.from_seq)
                    .find(|&s| s > a.to_seq)
                    .unwrap_or(u64::MAX);
                let used = crate::aer::set_up_again(server, a.to_seq, until).map_err(|e| {
                    format!(
                        "PM: after the device came back from D3hot without its registers (before access #{}), {e}",
                        a.to_seq
                    )
                })?;
                if !used {
                    return Err(format!(
                        "PM: after the device came back from D3hot (before access #{}), the driver never started an operation on it again",
                        a.to_seq
                    ));
                }
            }
            // After a system sleep the binding goes on: its worker reads MAGIC again before the
            // next sleep or the binding's end (a binding alive in name only fails). The guest
            // waits for that read's `worker_reading` line before either (init's `system_sleep`).
            if matches!(want, Cycles::System(_)) {
                let until = asleep
                    .iter()
                    .map(|b| b.from_seq)
                    .find(|&s| s > a.to_seq)
                    .unwrap_or(u64::MAX);
                let read = server.log.iter().any(|x| {
                    (a.to_seq..until).contains(&x.seq)
                        && x.region == Region::Bar0
                        && x.kind == Kind::Read
                        && x.offset == regmap::reg::MAGIC
                        && x.value == Some(u64::from(regmap::MAGIC_VALUE))
                });
                if !read {
                    return Err(format!(
                        "PM: after the device came back from D3hot (before access #{}), nothing read MAGIC from it again before {}: the worker stopped using it",
                        a.to_seq,
                        if until == u64::MAX { "the end".to_string() } else { format!("its next sleep (#{until})") }
                    ));
                }
            }
        }
        all.extend(asleep);
    }
    // A boot may go through both kinds (a fault x state cell: a system sleep after a runtime
    // resume): the device's stays are the two kinds' together.
    let other = match want {
        Cycles::System(_) => events("rpm_suspend"),
        Cycles::Runtime(_) => events("pm_sleep"),
    };
    if all.len() != cycles + other {
        let also = match (want, other) {
            (_, 0) => String::new(),
            (Cycles::System(_), n) => format!(" and its rpm_suspend {n}"),
            (Cycles::Runtime(_), n) => format!(" and its pm_sleep {n}"),
        };
        return Err(format!(
            "PM: the device was put into D3hot {} times, the driver's {sleep} says {cycles}{also}",
            all.len()
        ));
    }
    if let Cycles::Runtime(least) = want {
        // rpm.sh waits for the heartbeat's stay (a second rpm_suspend) before user space's
        // second: the count does not rest on how long it slept.
        if cycles < least {
            return Err(format!(
                "PM: runtime PM put the device into D3hot {cycles} times, the scenario's user space alone wants at least {least}"
            ));
        }
    }
    let kind = match want {
        Cycles::System(_) => "sleep cycles",
        Cycles::Runtime(_) => "runtime suspends",
    };
    let mut summary = format!(
        ", {cycles} {kind}: each the driver's {sleep}, the device in D3hot and back in D0 ({} of them without its registers), then interrupts on before its next operation and a DMA that moved data{}",
        all.iter().filter(|a| a.lost).count(),
        if matches!(want, Cycles::System(_)) {
            ", and MAGIC read again"
        } else {
            ""
        }
    );
    match &c.oracle {
        Some(Ok(log)) => {
            let bars = oracle::bars(&c.lines);
            let seen = log
                .seen
                .iter()
                .filter(|s| bars.iter().any(|b| (b.start..b.end).contains(&s.addr)));
            // One clock: the server stamps a power event while the vCPU waits on its PMCSR
            // write, so what the driver does after the wake is stamped after `to_ns`.
            for s in seen {
                if let Some(a) = all.iter().find(|a| (a.from_ns..a.to_ns).contains(&s.ns)) {
                    return Err(format!(
                        "PM: MMIO oracle (inside QEMU): a {}-byte {} at 0x{:x} (pc 0x{:x}) while the device was in D3hot (its accesses #{} to #{}): QEMU answered it, the device never saw it",
                        s.size,
                        s.kind.name(),
                        s.addr,
                        s.pc,
                        a.from_seq,
                        a.to_seq
                    ));
                }
            }
            summary.push_str("; the MMIO oracle saw nothing reach its BARs while it was in D3hot");
        }
        Some(Err(e)) => return Err(format!("MMIO oracle: {e}")),
        None => {}
    }
    Ok(summary)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device_log::test_access as access;
    use std::os::unix::process::ExitStatusExt;
    use std::process::ExitStatus;

    fn power(seq: u64, from: u8, to: u8, lost: bool) -> DmaEvent {
        DmaEvent::Power {
            seq,
            time_ns: seq,
            from,
            to,
            lost,
        }
    }

    fn server(log: Vec<crate::device_log::Access>, dma: Vec<DmaEvent>) -> Stopped {
        Stopped {
            died: None,
            status: ExitStatus::from_raw(0),
            log,
            dma,
        }
    }

    #[test]
    fn stays_pair_d3hot_with_d0() {
        let s = server(vec![], vec![power(5, 0, 3, false), power(9, 3, 0, true)]);
        assert_eq!(
            stays(&s).unwrap(),
            [Asleep {
                from_seq: 5,
                to_seq: 9,
                from_ns: 5,
                to_ns: 9,
                lost: true
            }]
        );
        let e = stays(&server(vec![], vec![power(5, 3, 0, false)])).unwrap_err();
        assert!(e.contains("out of order"), "{e}");
        let e = stays(&server(vec![], vec![power(5, 0, 3, false)])).unwrap_err();
        assert!(e.contains("left in D3hot"), "{e}");
    }

    #[test]
    fn an_access_in_d3hot_fails() {
        let log = vec![access(6, "bar0", 0, 4, 0, "read")];
        let s = server(log, vec![power(5, 0, 3, false), power(9, 3, 0, false)]);
        let c = Console {
            lines: vec![
                "pci_rig 0000:01:00.0: event pm_sleep".into(),
                "pci_rig 0000:01:00.0: event pm_reinit ok".into(),
                "pci_rig 0000:01:00.0: event pm_wake".into(),
            ],
            ..crate::tests::console_of(&[], vec![])
        };
        let e = judge(&c, &[s], Cycles::System(1)).unwrap_err();
        assert!(
            e.contains("access #6 (read bar0 0x0) reached the device while it was in D3hot"),
            "{e}"
        );
    }

    fn runtime_console(cycles: usize) -> Console {
        let mut lines = Vec::new();
        for _ in 0..cycles {
            lines.push("pci_rig 0000:01:00.0: event rpm_suspend".to_string());
            lines.push("pci_rig 0000:01:00.0: event rpm_reinit ok".to_string());
            lines.push("pci_rig 0000:01:00.0: event rpm_resume".to_string());
        }
        Console {
            lines,
            ..crate::tests::console_of(&[], vec![])
        }
    }

    #[test]
    fn runtime_suspends_are_counted_by_the_device() {
        // Two stays the driver reports, but the device saw one: a lie or a lost power event.
        let s = server(vec![], vec![power(5, 0, 3, false), power(9, 3, 0, false)]);
        let e = judge(&runtime_console(2), &[s], Cycles::Runtime(1)).unwrap_err();
        assert!(e.contains("put into D3hot 1 times"), "{e}");
        // Fewer stays than user space caused: runtime PM never reached the device.
        let s = server(vec![], vec![power(5, 0, 3, false), power(9, 3, 0, false)]);
        let e = judge(&runtime_console(1), &[s], Cycles::Runtime(2)).unwrap_err();
        assert!(e.contains("at least 2"), "{e}");
        let s = server(vec![], vec![power(5, 0, 3, false), power(9, 3, 0, false)]);
        let ok = judge(&runtime_console(1), &[s], Cycles::Runtime(1)).unwrap();
        assert!(ok.contains("1 runtime suspends"), "{ok}");
    }

    #[test]
    fn a_runtime_resume_that_skips_the_setup_fails() {
        // Back from D3hot without its registers, the device's next doorbell comes with
        // interrupts still off.
        let log = vec![access(10, "bar0", 0x10, 4, 1, "write")];
        let s = server(log, vec![power(5, 0, 3, false), power(9, 3, 0, true)]);
        let e = judge(&runtime_console(1), &[s], Cycles::Runtime(1)).unwrap_err();
        assert!(e.contains("without its registers"), "{e}");
    }
}
