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

/// How long each remove() took, from the guest's stamps on its
/// `remove_begin` and the `remove_done` that follows, in milliseconds.
pub fn remove_ms(lines: &[String]) -> Vec<f64> {
    let mut began = None;
    let mut took = Vec::new();
    for line in lines {
        match driver_text(line) {
            Some(t) if t.starts_with("event remove_begin") => began = timestamp(line),
            Some(t) if t.starts_with("event remove_done") => {
                if let (Some(b), Some(d)) = (began.take(), timestamp(line)) {
                    took.push((d - b) * 1000.0);
                }
            }
            _ => {}
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

/// BAR accesses the device saw after the driver's last reported access
/// before `remove_done` — there must be none once remove() has returned.
pub fn accesses_after_remove<'a>(
    lines: &[String],
    log: &'a [Access],
) -> Result<Vec<&'a Access>, String> {
    let done = lines
        .iter()
        .position(|l| driver_text(l).is_some_and(|t| t.starts_with("event remove_done")))
        .ok_or("the driver never printed remove_done")?;
    let last = claims(&lines[..done])
        .pop()
        .ok_or("the driver reported no access before remove_done")?;
    // The last matching entry in the log is that access (remove's reset write).
    let at = log
        .iter()
        .rposition(|a| {
            a.kind == last.kind
                && a.region == last.region
                && a.offset == last.offset
                && a.value == Some(last.value)
        })
        .ok_or_else(|| {
            format!(
                "the driver's last access before remove_done ({last:?}) is not in the device log"
            )
        })?;
    Ok(log[at + 1..]
        .iter()
        .filter(|a| a.region != "config")
        .collect())
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
        "[    2.0] pci_rig 0000:01:00.0: event worker_stopped reason=Asked accesses=812",
        "[    2.0] pci_rig 0000:01:00.0: # mmio w bar0 0x50 4 0x1",
        "[  2.004] pci_rig 0000:01:00.0: event remove_done",
        "[    2.0] pci 0000:01:00.0: something else # mmio r bar0 0x0 4 0x0",
    ];

    #[test]
    fn reads_events_steps_and_claims() {
        let r = report(&lines(CONSOLE));
        assert_eq!(r.count("probe_done"), 1);
        assert_eq!(r.event("worker_stopped"), Some("reason=Asked accesses=812"));
        assert_eq!(r.failed_steps(), ["scratch"]);
        let c = claims(&lines(CONSOLE));
        assert_eq!(c.len(), 2, "only the driver's own lines count: {c:?}");
        assert_eq!((c[1].kind, c[1].offset, c[1].value), ("write", 0x50, 1));
        let took = remove_ms(&lines(CONSOLE));
        assert_eq!(took.len(), 1);
        assert!((took[0] - 4.0).abs() < 1e-6, "{took:?}");
        assert!(
            remove_ms(&lines(&CONSOLE[..8])).is_empty(),
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
    fn finds_accesses_after_remove() {
        let quiet = vec![
            access(1, "bar0", 0, 0x7072_6967, "read"),
            access(2, "bar0", 0x50, 1, "write"),
            access(3, "config", 4, 0, "write"),
        ];
        assert!(accesses_after_remove(&lines(CONSOLE), &quiet)
            .unwrap()
            .is_empty());
        let mut late = quiet.clone();
        late.push(access(4, "bar0", 0, 0x7072_6967, "read"));
        assert_eq!(
            accesses_after_remove(&lines(CONSOLE), &late).unwrap().len(),
            1
        );
        assert!(accesses_after_remove(&lines(CONSOLE), &quiet[..1]).is_err());
    }
}
