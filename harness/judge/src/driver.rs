//! What our guest driver (guest-kernel/driver) says on the console, in the
//! line format of guest-kernel/driver/README.md, and the checks that hold
//! it against the device's access log.

use crate::console::{strip_timestamp, timestamp};
use crate::device_log::{self as device, Claimed};

/// The driver's lines, in console order.
#[derive(Debug, Default)]
pub struct Report {
    /// `event NAME …` lines: the name and the rest.
    pub events: Vec<(String, String)>,
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

    /// The rest of every `event NAME` line, in order.
    pub fn all(&self, event: &str) -> Vec<&str> {
        self.events
            .iter()
            .filter(|(e, _)| e == event)
            .map(|(_, rest)| rest.as_str())
            .collect()
    }
}

/// One `step NAME ok|FAIL DETAIL` line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Step {
    pub name: String,
    pub ok: bool,
    pub detail: String,
}

/// The self-test every successful probe reports, step by step, in order
/// (guest-kernel/driver/README.md).
pub const STEPS: &[&str] = &[
    "identify",
    "scratch",
    "scratch",
    "scratch",
    "scratch",
    "scratch",
    "counter",
    "fill",
    "crc32",
    "invert",
    "bad_opcode",
    "try_access_bounds",
    "irq",
    "irq_count",
    "dma_mask",
    "dma_to_device",
    "dma_from_device",
    "dma_stream",
];

/// How a step's detail starts when the interrupt it waited for never came.
pub const LOST_INTERRUPT: &str = "no interrupt within";

/// One probe of our driver and what it said until the next probe: from
/// `event probe_begin` on.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Binding {
    pub steps: Vec<Step>,
    /// The `# mmio` accesses before `event probe_done` (all of them when
    /// probe failed): made before the worker starts.
    pub probe_claims: Vec<Claimed>,
    /// Probe succeeded (`event probe_done`), so the worker runs.
    pub probed: bool,
    /// The `# mmio` accesses after `event probe_done` (remove()'s).
    pub later_claims: Vec<Claimed>,
    /// `event worker_stopped … accesses=N`: the binding ended and its worker,
    /// joined, had read MAGIC N times (reads it does not report one by one).
    pub worker_reads: Option<u64>,
    /// It stopped because its last read was all-ones (`reason=Gone`).
    pub worker_gone: bool,
    /// The `# dma` lines, each with the number of `# mmio` reports before it.
    pub dma: Vec<(usize, super::dma_lines::Line)>,
}

impl Binding {
    /// Its reports in console order: probe's, then the later ones.
    pub fn claims(&self) -> impl Iterator<Item = &Claimed> {
        self.probe_claims.iter().chain(&self.later_claims)
    }
}

/// How a probe ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ProbeEnd {
    /// Every step of `STEPS` passed, in order, and probe_done followed.
    Bound,
    /// `step identify FAIL WHAT …` (WHAT: `magic` or `version`) and nothing more; or
    /// `interrupt`: a step failed because its interrupt never came (it was lost).
    Refused(String),
}

impl Binding {
    /// How this probe ended, or why its steps are not a complete self-test
    /// nor a clean refusal.
    pub fn end(&self) -> Result<ProbeEnd, String> {
        let names: Vec<&str> = self.steps.iter().map(|s| s.name.as_str()).collect();
        let failed: Vec<String> = self
            .steps
            .iter()
            .filter(|s| !s.ok)
            .map(|s| format!("{} ({})", s.name, s.detail))
            .collect();
        match &self.steps[..] {
            [only] if !self.probed && only.name == "identify" && !only.ok => {
                let what = only.detail.split_whitespace().next().unwrap_or("");
                Ok(ProbeEnd::Refused(what.to_string()))
            }
            // Identified, then an interrupt never came: the steps so far in order, all ok
            // but the last, which says so.
            [done @ .., last]
                if !self.probed
                    && !last.ok
                    && last.detail.starts_with(LOST_INTERRUPT)
                    && done.iter().all(|s| s.ok)
                    && STEPS.starts_with(&names) =>
            {
                Ok(ProbeEnd::Refused("interrupt".into()))
            }
            _ if !failed.is_empty() => {
                Err(format!("self-test steps failed: {}", failed.join(", ")))
            }
            _ if names != STEPS => Err(format!("self-test steps {names:?}, expected {STEPS:?}")),
            _ if !self.probed => Err("every step passed but probe never printed probe_done".into()),
            _ => Ok(ProbeEnd::Bound),
        }
    }
}

/// Who made the device accesses the guest reports, in console order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Actor {
    /// Our driver, during one binding.
    Driver(Binding),
    /// User space (`# mmio …` with no driver prefix, e.g. devmem in a script).
    User(Claimed),
}

/// The console read as a history of who touched the device.
pub fn history(lines: &[String]) -> Result<Vec<Actor>, String> {
    let mut out = Vec::new();
    let mut current: Option<usize> = None;
    for line in lines {
        let Some(text) = driver_text(line) else {
            if let Some(c) = device::parse_claim(strip_timestamp(line)) {
                out.push(Actor::User(c));
            }
            continue;
        };
        if is_event(line, "probe_begin") {
            current = Some(out.len());
            out.push(Actor::Driver(Binding::default()));
            continue;
        }
        let binding = match current.map(|i| &mut out[i]) {
            Some(Actor::Driver(b)) => b,
            _ if text.starts_with("# mmio ")
                || text.starts_with("# dma ")
                || text.starts_with("step ") =>
            {
                return Err(format!("a driver line outside any probe: `{line}`"))
            }
            _ => continue,
        };
        if let Some(line) = super::dma_lines::parse(text) {
            let at = binding.probe_claims.len() + binding.later_claims.len();
            binding.dma.push((at, line?));
        } else if let Some(c) = device::parse_claim(text) {
            if binding.probed {
                binding.later_claims.push(c);
            } else {
                binding.probe_claims.push(c);
            }
        } else if let Some(step) = text.strip_prefix("step ") {
            let mut w = step.splitn(3, ' ');
            let (name, result) = (w.next().unwrap_or(""), w.next().unwrap_or(""));
            binding.steps.push(Step {
                name: name.to_string(),
                ok: result == "ok",
                detail: w.next().unwrap_or("").to_string(),
            });
        } else if is_event(line, "irq_refused") {
            return Err(format!(
                "the interrupt handler was refused the BAR, so it ran after its binding ended: `{line}`"
            ));
        } else if is_event(line, "stream_started") && !binding.probed {
            // Its rounds report from the interrupt handler, which may run after the worker
            // started: those reports would race the worker's unreported reads.
            return Err(format!(
                "the driver started its stream before probe_done, where no worker read may fall between its reports: `{line}`"
            ));
        } else if is_event(line, "probe_done") {
            binding.probed = true;
        } else if is_event(line, "worker_stopped") {
            let n = text
                .split_once("accesses=")
                .and_then(|(_, n)| n.split_whitespace().next()?.parse().ok())
                .ok_or_else(|| format!("no accesses=N in `{line}`"))?;
            binding.worker_reads = Some(n);
            binding.worker_gone = text.contains("reason=Gone");
        }
    }
    Ok(out)
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

#[cfg(test)]
// Tests may read the checkout's files; the crate itself may not.
#[allow(clippy::disallowed_methods)]
mod tests {
    use super::*;

    fn lines(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
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
        "# mmio r bar0 0x4 4 0x10000",
    ];

    #[test]
    fn reads_events_bindings_and_user_space_accesses() {
        let r = report(&lines(CONSOLE));
        assert_eq!(r.count("probe_done"), 1);
        assert_eq!(r.event("worker_stopped"), Some("reason=Refused accesses=2"));
        let h = history(&lines(CONSOLE)).unwrap();
        assert_eq!(h.len(), 2, "one binding, one user-space access: {h:?}");
        let Actor::Driver(b) = &h[0] else { panic!() };
        assert_eq!(b.probe_claims.len(), 1);
        assert_eq!(
            (b.later_claims[0].kind, b.later_claims[0].offset),
            (crate::device_log::Kind::Write, 0x50)
        );
        assert!(b.probed);
        assert_eq!(b.worker_reads, Some(2));
        assert_eq!(b.steps[1].detail, "wrote=0x0 read=0x1");
        assert!(matches!(&h[1], Actor::User(c) if c.offset == 4));
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

    #[test]
    fn the_stream_starts_only_after_probe_done() {
        let after: Vec<&str> = [
            &CONSOLE[..5],
            &["[    1.2] pci_rig 0000:01:00.0: event stream_started"][..],
            &CONSOLE[5..],
        ]
        .concat();
        assert!(history(&lines(&after)).is_ok());
        // Before it: the stream's reports from the interrupt handler may fall after the
        // worker's first reads, yet would be held against the device's log as probe's.
        let before: Vec<&str> = [
            &CONSOLE[..4],
            &["[    1.2] pci_rig 0000:01:00.0: event stream_started"][..],
            &CONSOLE[4..],
        ]
        .concat();
        let e = history(&lines(&before)).unwrap_err();
        assert!(e.contains("started its stream before probe_done"), "{e}");
    }

    fn binding(steps: &[(&str, bool, &str)], probed: bool) -> Binding {
        Binding {
            steps: steps
                .iter()
                .map(|&(name, ok, detail)| Step {
                    name: name.into(),
                    ok,
                    detail: detail.into(),
                })
                .collect(),
            probed,
            ..Binding::default()
        }
    }

    #[test]
    fn a_probe_binds_only_with_every_step() {
        let all: Vec<(&str, bool, &str)> = STEPS.iter().map(|&n| (n, true, "")).collect();
        assert_eq!(binding(&all, true).end(), Ok(ProbeEnd::Bound));
        // A step left out, one failed, one repeated, or no probe_done.
        let e = binding(&all[..all.len() - 1], true).end().unwrap_err();
        assert!(e.contains("expected [\"identify\", \"scratch\""), "{e}");
        let mut failed = all.clone();
        failed[7] = ("fill", false, "status=0x6");
        let e = binding(&failed, true).end().unwrap_err();
        assert!(
            e.contains("self-test steps failed: fill (status=0x6)"),
            "{e}"
        );
        let mut twice = all.clone();
        twice.push(("counter", true, ""));
        assert!(binding(&twice, true).end().is_err());
        let e = binding(&all, false).end().unwrap_err();
        assert!(e.contains("never printed probe_done"), "{e}");
    }

    #[test]
    fn a_refusal_is_identify_failing_alone() {
        let refused = |detail| binding(&[("identify", false, detail)], false).end();
        assert_eq!(
            refused("magic 0xbad0bad, expected 0x70726967"),
            Ok(ProbeEnd::Refused("magic".into()))
        );
        assert_eq!(
            refused("version 0x20000, this driver speaks major 1"),
            Ok(ProbeEnd::Refused("version".into()))
        );
        // Refused, yet bound; or failing later than identify.
        assert!(binding(&[("identify", false, "magic 0x0")], true)
            .end()
            .is_err());
        let e = binding(&[("identify", true, ""), ("scratch", false, "x")], false)
            .end()
            .unwrap_err();
        assert!(e.contains("scratch (x)"), "{e}");
    }

    #[test]
    fn a_lost_interrupt_refuses_only_as_the_last_step_after_clean_ones() {
        let lost = "no interrupt within 1 s; status=0x2 crc=0x0 want=0xeaab849";
        let ok = |n: &'static str| (n, true, "");
        let steps = [ok("identify"), ok("scratch"), ("scratch", false, lost)];
        assert_eq!(
            binding(&steps, false).end(),
            Ok(ProbeEnd::Refused("interrupt".into()))
        );
        // Any other failure, a failure before the last step, steps out of order, or a probe
        // that bound anyway is no clean refusal.
        let other = [ok("identify"), ("scratch", false, "wrote=0x0 read=0x1")];
        assert!(binding(&other, false).end().is_err());
        let early = [ok("identify"), ("scratch", false, lost), ok("scratch")];
        assert!(binding(&early, false).end().is_err());
        let disorder = [ok("scratch"), ("identify", false, lost)];
        assert!(binding(&disorder, false).end().is_err());
        assert!(binding(&steps, true).end().is_err());
    }

    #[test]
    fn a_handler_refused_the_bar_fails_the_boot() {
        let e = history(&lines(&[
            "pci_rig 0000:01:00.0: event probe_begin",
            "pci_rig 0000:01:00.0: event irq_refused ENXIO",
        ]))
        .unwrap_err();
        assert!(e.contains("ran after its binding ended"), "{e}");
    }

    #[test]
    fn driver_lines_outside_a_probe_are_an_error() {
        let e = history(&lines(&["pci_rig 0000:01:00.0: # mmio r bar0 0x0 4 0x1"])).unwrap_err();
        assert!(e.contains("outside any probe"), "{e}");
        let e = history(&lines(&[
            "pci_rig 0000:01:00.0: event probe_begin",
            "pci_rig 0000:01:00.0: event worker_stopped reason=Refused",
        ]))
        .unwrap_err();
        assert!(e.contains("no accesses=N"), "{e}");
    }

    /// The driver is safe code only: the compiler enforces it through
    /// `#![forbid(unsafe_code)]`, and no `unsafe` may appear even in a comment
    /// that could hide a later edit.
    #[test]
    fn the_driver_forbids_unsafe_code() {
        let dir =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../guest-kernel/driver");
        let src = std::fs::read_to_string(dir.join("pci_rig.rs")).unwrap();
        assert!(src.contains("#![forbid(unsafe_code)]"));
        // regs.rs is generated (regmap), a module of the driver's crate.
        let regs = std::fs::read_to_string(dir.join("regs.rs")).unwrap();
        let uses: Vec<&str> = src
            .lines()
            .chain(regs.lines())
            .filter(|l| l.contains("unsafe") && !l.contains("forbid(unsafe_code)"))
            .collect();
        assert!(uses.is_empty(), "{uses:?}");
    }
}
