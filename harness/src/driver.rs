//! What our guest driver (guest-kernel/driver) says on the console, in the
//! line format of guest-kernel/driver/README.md, and the checks that hold
//! it against the device's access log.

use crate::console::{strip_timestamp, timestamp};
use crate::device::{self, Access, Claimed};

/// The driver's lines, in console order.
#[derive(Debug, Default)]
pub struct Report {
    /// `event NAME …` lines: the name and the rest.
    pub events: Vec<(String, String)>,
    /// `step NAME ok|FAIL …` lines.
    pub steps: Vec<(String, bool)>,
}

/// The text after `pci_rig <bdf>: `, if the line is the driver's.
pub fn driver_text(line: &str) -> Option<&str> {
    let l = strip_timestamp(line);
    let rest = l.strip_prefix("pci_rig ")?;
    Some(rest.split_once(": ")?.1)
}

/// Whether `line` is the driver's `event NAME …`.
pub fn is_event(line: &str, name: &str) -> bool {
    driver_text(line)
        .and_then(|t| t.strip_prefix("event "))
        .is_some_and(|t| t.split(' ').next() == Some(name))
}

/// The index of the first `event NAME` line.
pub fn event_at(lines: &[String], name: &str) -> Option<usize> {
    lines.iter().position(|l| is_event(l, name))
}

pub fn report(lines: &[String]) -> Report {
    let mut r = Report::default();
    for line in lines {
        let Some(text) = driver_text(line) else {
            continue;
        };
        if let Some(ev) = text.strip_prefix("event ") {
            let (name, rest) = ev.split_once(' ').unwrap_or((ev, ""));
            r.events.push((name.to_string(), rest.to_string()));
        } else if let Some(st) = text.strip_prefix("step ") {
            let mut w = st.split_whitespace();
            if let (Some(name), Some(result)) = (w.next(), w.next()) {
                r.steps.push((name.to_string(), result == "ok"));
            }
        }
    }
    r
}

impl Report {
    pub fn count(&self, event: &str) -> usize {
        self.events.iter().filter(|(e, _)| e == event).count()
    }

    pub fn event(&self, event: &str) -> Option<&str> {
        self.events
            .iter()
            .find(|(e, _)| e == event)
            .map(|(_, rest)| rest.as_str())
    }

    pub fn failed_steps(&self) -> Vec<&str> {
        self.steps
            .iter()
            .filter(|(_, ok)| !ok)
            .map(|(n, _)| n.as_str())
            .collect()
    }
}

/// Milliseconds from each `event FROM` to the `event TO` that follows it, by
/// the guest's printk stamps: `remove_begin` to `remove_done` is remove()
/// itself; to `worker_stopped`, the whole unbind up to the worker's joining.
pub fn between_ms(lines: &[String], from: &str, to: &str) -> Vec<f64> {
    let mut began = None;
    let mut took = Vec::new();
    for line in lines {
        if is_event(line, from) {
            began = timestamp(line);
        } else if is_event(line, to) {
            if let (Some(b), Some(d)) = (began.take(), timestamp(line)) {
                took.push((d - b) * 1000.0);
            }
        }
    }
    took
}

/// The MMIO accesses the driver reports (`# mmio …` after its prefix).
pub fn claims(lines: &[String]) -> Vec<Claimed> {
    lines
        .iter()
        .filter_map(|l| device::parse_claim(driver_text(l)?))
        .collect()
}

/// The register the worker reads (MAGIC), without reporting each read.
const WORKER_READS: u64 = 0x0;

/// Checks that the device saw nothing the driver does not account for,
/// during its first binding (`log`) up to the worker's joining at the
/// binding's release (`event worker_stopped … accesses=N`): every BAR access
/// is one the driver reported (`# mmio`), in order, or one of the worker's N
/// MAGIC reads. N is the worker's count when it stopped, refused or gone, so
/// no access can come after. Returns N.
pub fn account_for_accesses(lines: &[String], log: &[Access]) -> Result<u64, String> {
    let joined =
        event_at(lines, "worker_stopped").ok_or("the driver never printed worker_stopped")?;
    let counted: u64 = driver_text(&lines[joined])
        .and_then(|t| {
            t.split_once("accesses=")?
                .1
                .split_whitespace()
                .next()?
                .parse()
                .ok()
        })
        .ok_or_else(|| format!("no accesses=N in `{}`", lines[joined]))?;
    let claims = claims(&lines[..joined]);
    let mut next = claims.iter().peekable();
    let mut worker = 0;
    for a in log.iter().filter(|a| a.region != "config") {
        if next.peek().is_some_and(|c| c.is(a)) {
            next.next();
        } else if a.kind == "read" && a.region == "bar0" && a.offset == WORKER_READS {
            worker += 1;
        } else {
            return Err(format!(
                "the device saw an access the driver did not make: {a:?}"
            ));
        }
    }
    if let Some(c) = next.next() {
        return Err(format!(
            "the driver reported {c:?}, which the device never saw"
        ));
    }
    if worker != counted {
        return Err(format!(
            "the device saw {worker} MAGIC reads besides the reported ones, the worker counted {counted}"
        ));
    }
    Ok(counted)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    fn access(seq: u64, region: &str, offset: u64, value: u64, kind: &str) -> Access {
        Access {
            seq,
            time_ns: seq,
            region: region.into(),
            offset,
            size: 4,
            value: Some(value),
            kind: kind.into(),
            class: "ok".into(),
        }
    }

    const CONSOLE: &[&str] = &[
        "[    1.0] pci_rig 0000:01:00.0: event probe_begin",
        "[    1.0] pci_rig 0000:01:00.0: # mmio r bar0 0x0 4 0x70726967",
        "[    1.0] pci_rig 0000:01:00.0: step identify ok magic=0x70726967 version=0x10000",
        "[    1.1] pci_rig 0000:01:00.0: step scratch FAIL wrote=0x0 read=0x1",
        "[    1.2] pci_rig 0000:01:00.0: event probe_done",
        "[    2.0] pci_rig 0000:01:00.0: event remove_begin",
        "[    2.0] pci_rig 0000:01:00.0: # mmio w bar0 0x50 4 0x1",
        "[  2.004] pci_rig 0000:01:00.0: event remove_done",
        "[    2.1] pci_rig 0000:01:00.0: event worker_stopped reason=Refused accesses=2",
        "[    2.0] pci 0000:01:00.0: something else # mmio r bar0 0x0 4 0x0",
    ];

    #[test]
    fn reads_events_steps_and_claims() {
        let r = report(&lines(CONSOLE));
        assert_eq!(r.count("probe_done"), 1);
        assert_eq!(r.event("worker_stopped"), Some("reason=Refused accesses=2"));
        assert_eq!(r.failed_steps(), ["scratch"]);
        let c = claims(&lines(CONSOLE));
        assert_eq!(c.len(), 2, "only the driver's own lines count: {c:?}");
        assert_eq!((c[1].kind, c[1].offset, c[1].value), ("write", 0x50, 1));
        let took = between_ms(&lines(CONSOLE), "remove_begin", "remove_done");
        assert_eq!(took.len(), 1);
        assert!((took[0] - 4.0).abs() < 1e-6, "{took:?}");
        let unbind = between_ms(&lines(CONSOLE), "remove_begin", "worker_stopped");
        assert!((unbind[0] - 100.0).abs() < 1e-6, "{unbind:?}");
        assert!(
            between_ms(&lines(&CONSOLE[..7]), "remove_begin", "remove_done").is_empty(),
            "no remove_done yet"
        );
    }

    /// The driver is safe code only: the compiler enforces it through
    /// `#![forbid(unsafe_code)]`, and no `unsafe` may appear even in a comment
    /// that could hide a later edit.
    #[test]
    fn the_driver_forbids_unsafe_code() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../guest-kernel/driver");
        let src = std::fs::read_to_string(dir.join("pci_rig.rs")).unwrap();
        assert!(src.contains("#![forbid(unsafe_code)]"));
        let uses: Vec<&str> = src
            .lines()
            .filter(|l| l.contains("unsafe") && !l.contains("forbid(unsafe_code)"))
            .collect();
        assert!(uses.is_empty(), "{uses:?}");
    }

    #[test]
    fn every_device_access_is_reported_or_counted_by_the_worker() {
        let console = lines(CONSOLE);
        let magic = |seq| access(seq, "bar0", 0, 0x7072_6967, "read");
        let log = vec![
            magic(1),
            magic(2),
            access(3, "config", 4, 0, "write"),
            access(4, "bar0", 0x50, 1, "write"),
            magic(5),
        ];
        assert_eq!(account_for_accesses(&console, &log), Ok(2));

        let mut late = log.clone();
        late.push(magic(6));
        let e = account_for_accesses(&console, &late).unwrap_err();
        assert!(
            e.contains("3 MAGIC reads") && e.contains("counted 2"),
            "{e}"
        );

        let mut stray = log.clone();
        stray.push(access(6, "bar0", 0x8, 0, "write"));
        let e = account_for_accesses(&console, &stray).unwrap_err();
        assert!(e.contains("did not make"), "{e}");

        let e = account_for_accesses(&console, &log[..3]).unwrap_err();
        assert!(e.contains("never saw"), "{e}");

        let e = account_for_accesses(&lines(&CONSOLE[..8]), &log).unwrap_err();
        assert!(e.contains("never printed worker_stopped"), "{e}");
    }
}
