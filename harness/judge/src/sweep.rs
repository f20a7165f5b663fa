//! The removal-point sweep, point by point (`sweep`, `images/scenarios/sweep.sh`). Each point
//! makes two bindings: the faulted one and, the device back (the fault cleared, or a fresh one
//! plugged in), a clean one. Per point, by the driver's lines and the device's own log:
//! - the fault of the point's kind struck where it was asked: probe's N-th device access of
//!   the faulted binding (the device's count, not the driver's), or remove()'s RESET for `wN`;
//! - the faulted probe bound, or refused cleanly: its steps so far in order, each passed but
//!   the last, which failed; and it took no longer than a lost interrupt's wait allows;
//! - the clean binding bound with every step, in exactly `PROBE_ACCESSES` accesses;
//! - the faulted binding ended in an outcome `sweep_table` allows for the point's kind at the
//!   struck access (which must be the access the table has there), its error as the kernel
//!   reported it.
//!
//! The boot's other rules (no splat, every guest check, each binding's end, the accounting,
//! config space, the MMIO oracle) are `judge::judge_sweep`'s, as for any driver boot.

use crate::accounting::Probe;
use crate::console::{strip_timestamp, timestamp};
use crate::device_log::{Access, Class, Kind, Region};
use crate::driver::{self, Actor, Binding, ProbeEnd, STEPS};
use crate::sweep_table::{Errno, Outcome, Table};
use qemu_device::model::FaultKind;
use serde::Serialize;
use vocab::sweep::{At, Point, PROBE_ACCESSES};

/// The longest a faulted probe may take: one lost interrupt's wait (the driver's
/// `IRQ_WAIT_MS`, 1 s) plus a clean probe's time on a loaded TCG host.
pub const PROBE_LIMIT_MS: f64 = 5000.0;

/// What QEMU waits for a vfio-user server's answer (`vfio-user-pci`'s `x-msg-timeout`, whose
/// default the rig keeps) before it gives the guest all-ones: a `die` point's struck access
/// takes that long.
pub const QEMU_MSG_TIMEOUT_MS: f64 = 5000.0;

/// One point's outcome, for report.json and the chart.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PointResult {
    pub point: String,
    /// `bound`, `refused at STEP`, or `removed` (a `wN` point: bound, struck while it ended).
    pub outcome: String,
    /// The struck access in the device's log: its number and what it was, e.g. `#812 w RESET`.
    pub struck: String,
    /// The faulted probe's time, from `probe_begin` to its last line.
    pub probe_ms: Option<f64>,
}

/// The points of the kernel command line's `pcirig.points=`.
pub fn points(lines: &[String]) -> Result<Vec<Point>, String> {
    let line = lines
        .iter()
        .map(|l| strip_timestamp(l))
        .find(|l| l.starts_with("Kernel command line:"))
        .ok_or("the kernel never printed its command line")?;
    let list = line
        .split_whitespace()
        .find_map(|w| w.strip_prefix("pcirig.points="))
        .ok_or("no pcirig.points= on the kernel command line")?;
    vocab::sweep::parse_list(list)
}

/// Each point judged, in order; `Err` names the first point that failed, with its access
/// number and the driver's lines around it, and how to replay it alone.
pub fn judge(
    scenario: &str,
    points: &[Point],
    history: &[Actor],
    probes: &[Probe],
    servers: &[&[Access]],
    lines: &[String],
) -> Result<Vec<PointResult>, String> {
    let bindings: Vec<&Binding> = history
        .iter()
        .filter_map(|a| match a {
            Actor::Driver(b) => Some(b),
            Actor::User(_) => None,
        })
        .collect();
    if bindings.len() != 2 * points.len() || probes.len() != bindings.len() {
        return Err(format!(
            "{} points should make {} bindings (a faulted and a clean one each); the driver made {} ({} with accesses in the device's log)",
            points.len(),
            2 * points.len(),
            bindings.len(),
            probes.len()
        ));
    }
    let durations = probe_durations(lines);
    let said = probe_errors(lines);
    let table = Table::new();
    let mut results = Vec::new();
    for (i, point) in points.iter().enumerate() {
        let (faulted, clean) = (bindings[2 * i], bindings[2 * i + 1]);
        let fail = |why: String| {
            format!(
                "point {point} (binding {}): {why}; replay it alone: cargo xtask test --scenario {scenario} --sweep-point {point}{}",
                2 * i + 1,
                around(lines, point)
            )
        };
        let probe = &probes[2 * i];
        let log = servers.get(probe.server).copied().unwrap_or_default();
        // The clean binding's first access, unless it is on a fresh device (after an unplug).
        let next = probes
            .get(2 * i + 1)
            .filter(|p| p.server == probe.server)
            .map_or(u64::MAX, |p| p.first);
        let struck = log
            .iter()
            .filter(|a| a.fault.is_some() && (probe.first..next).contains(&a.seq))
            .collect::<Vec<_>>();
        let [hit] = struck[..] else {
            return Err(fail(format!(
                "the device struck {} times in this binding, expected once",
                struck.len()
            )));
        };
        let what = format!("#{} {}", hit.seq, describe(hit));
        if hit.fault != Some(point.kind) {
            return Err(fail(format!(
                "the device's strike at {what} was {:?}, not {}",
                hit.fault, point.kind
            )));
        }
        match point.at {
            At::Probe(n) => {
                let nth = log
                    .iter()
                    .filter(|a| {
                        a.region != Region::Config && (probe.first..=hit.seq).contains(&a.seq)
                    })
                    .count() as u64;
                if nth != n || hit.seq > probe.last {
                    return Err(fail(format!(
                        "the fault struck {what}, probe's access {nth}{}, not its access {n}",
                        if hit.seq > probe.last {
                            " (after probe)"
                        } else {
                            ""
                        }
                    )));
                }
            }
            At::Write(_) => {
                let reset = hit.kind == Kind::Write && hit.offset == regmap::reg::RESET;
                if !reset || hit.seq <= probe.last {
                    return Err(fail(format!(
                        "the fault struck {what}, not remove()'s RESET"
                    )));
                }
            }
        }
        let outcome = match (faulted.end(), point.at) {
            (Ok(ProbeEnd::Bound), At::Write(_)) => "removed".to_string(),
            (Ok(ProbeEnd::Bound), At::Probe(_)) => "bound".to_string(),
            (_, At::Write(_)) => {
                return Err(fail("probe did not bind before the fault was armed".into()))
            }
            _ => refused_at(faulted).map_err(|e| fail(format!("{e}; the struck access {what}")))?,
        };
        let probe_ms = durations.get(2 * i).copied().flatten();
        let limit = match point.kind {
            FaultKind::Die => PROBE_LIMIT_MS + QEMU_MSG_TIMEOUT_MS,
            _ => PROBE_LIMIT_MS,
        };
        if let Some(ms) = probe_ms.filter(|&ms| ms > limit) {
            return Err(fail(format!(
                "probe took {ms:.0} ms with the fault struck at {what}, more than the {limit:.0} ms a lost interrupt (and for `die`, QEMU's wait for the dead server) allows: the driver waited on a gone device"
            )));
        }
        match clean.end() {
            Ok(ProbeEnd::Bound) if clean.probe_claims.len() as u64 == PROBE_ACCESSES => {}
            Ok(ProbeEnd::Bound) => {
                return Err(fail(format!(
                    "the clean probe after it made {} device accesses; the sweep covers {PROBE_ACCESSES} (sweep::PROBE_ACCESSES): update it with the driver",
                    clean.probe_claims.len()
                )))
            }
            other => {
                return Err(fail(format!(
                    "the next clean probe did not bind: {other:?}"
                )))
            }
        }
        let said = said.get(2 * i).copied().unwrap_or(Said::Unknown);
        allowed_outcome(&table, point, hit, log, probe.first, &outcome, said).map_err(fail)?;
        results.push(PointResult {
            point: point.to_string(),
            outcome,
            struck: what,
            probe_ms,
        });
    }
    Ok(results)
}

/// What the kernel said of a probe once it returned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Said {
    /// `probe with driver pci_rig failed with error -N`: N.
    Error(i64),
    /// Nothing before the next probe began: it bound, or returned ENODEV or ENXIO, which the
    /// kernel does not report.
    Nothing,
    /// The console ends first: not known.
    Unknown,
}

/// How the kernel reports a probe that returned an error (`call_driver_probe`, dev_err).
const PROBE_FAILED: &str = "probe with driver pci_rig failed with error ";

/// What the kernel said of each probe, in probe order (`event probe_begin`).
fn probe_errors(lines: &[String]) -> Vec<Said> {
    let mut out: Vec<Said> = Vec::new();
    for line in lines {
        if driver::is_event(line, "probe_begin") {
            if let Some(last @ Said::Unknown) = out.last_mut() {
                *last = Said::Nothing;
            }
            out.push(Said::Unknown);
        } else if let Some((_, n)) = strip_timestamp(line).split_once(PROBE_FAILED) {
            if let (Some(last), Ok(n)) = (out.last_mut(), n.trim().parse::<i64>()) {
                *last = Said::Error(-n);
            }
        }
    }
    out
}

/// What register `hit` (a write) held just before it, by the device's log: the last write to
/// it that took effect since `first` (the binding's first access), else its reset value, after
/// a RESET that took effect or at the binding's start (the device comes to probe reset).
fn held_before(log: &[Access], first: u64, hit: &Access) -> Option<u64> {
    let reset = || {
        regmap::REGISTERS
            .iter()
            .find(|r| r.offset == hit.offset)
            .and_then(|r| r.reset)
            .map(u64::from)
    };
    let writes = log.iter().rev().filter(|a| {
        (first..hit.seq).contains(&a.seq)
            && a.region == Region::Bar0
            && a.kind == Kind::Write
            && a.class == Class::Ok
    });
    for a in writes {
        if a.offset == hit.offset {
            return a.value;
        }
        if a.offset == regmap::reg::RESET && a.value == Some(regmap::RESET_KEY.into()) {
            return reset();
        }
    }
    reset()
}

/// `outcome` as seen, with the error the kernel reported for a refusal.
fn seen(outcome: &str, said: Said) -> String {
    let errno = match said {
        _ if !outcome.starts_with("refused") => String::new(),
        Said::Error(n) => match [Errno::Eio, Errno::Enodev, Errno::Enotsupp]
            .into_iter()
            .find(|e| e.number() == n)
        {
            Some(e) => format!(" with {}", e.name()),
            None => format!(" with error -{n}"),
        },
        Said::Nothing => " with ENODEV or ENXIO (the kernel reported no error)".into(),
        Said::Unknown => String::new(),
    };
    format!("{outcome}{errno}")
}

/// The point's outcome held against `sweep_table`: the struck access is the one the table
/// has at that place, and the faulted binding ended in an outcome the table allows there.
fn allowed_outcome(
    table: &Table,
    point: &Point,
    hit: &Access,
    log: &[Access],
    first: u64,
    outcome: &str,
    said: Said,
) -> Result<(), String> {
    let what = format!("#{} {}", hit.seq, describe(hit));
    let (held, place) = match point.at {
        At::Write(_) => (false, "remove()'s RESET".to_string()),
        At::Probe(n) => {
            let entry = table
                .entry(n)
                .ok_or_else(|| format!("the sweep's table has no access {n}"))?;
            // By register: a driver whose accesses moved has another register at almost
            // every place.
            if hit.region != Region::Bar0 || hit.offset != entry.offset {
                return Err(format!(
                    "the fault struck {what}, but the sweep's table (judge::sweep_table) has probe's access {n} as {entry}: the driver's accesses changed, write the table again from its probe"
                ));
            }
            let held = point.kind == FaultKind::Error
                && hit.kind == Kind::Write
                && held_before(log, first, hit) == hit.value;
            (held, format!("probe's access {n}: {entry}"))
        }
    };
    let allowed = table.allowed(*point, held);
    let ok = allowed.iter().any(|a| match a {
        Outcome::Bound => outcome == "bound",
        Outcome::Removed => outcome == "removed",
        Outcome::Refused { step, errno } => {
            outcome.strip_prefix("refused at ") == Some(*step)
                && match said {
                    Said::Error(n) => n == errno.number(),
                    Said::Nothing => *errno == Errno::Enodev,
                    Said::Unknown => true,
                }
        }
    });
    if ok {
        return Ok(());
    }
    let kind = point.kind.to_string();
    let article = if kind.starts_with(['a', 'e', 'i', 'o', 'u']) {
        "an"
    } else {
        "a"
    };
    Err(format!(
        "ended {}, which {article} `{kind}` fault at {what} may not end in ({place}{}); allowed: {}",
        seen(outcome, said),
        if held {
            "; the register held the value written already"
        } else {
            ""
        },
        allowed
            .iter()
            .map(|a| a.to_string())
            .collect::<Vec<_>>()
            .join(" or ")
    ))
}

/// `refused at STEP` for a probe whose steps are `STEPS`' first ones, each passed but the
/// last, which failed (identification, a self-test step, or a lost interrupt).
fn refused_at(b: &Binding) -> Result<String, String> {
    let names: Vec<&str> = b.steps.iter().map(|s| s.name.as_str()).collect();
    match &b.steps[..] {
        [done @ .., last]
            if !b.probed && !last.ok && done.iter().all(|s| s.ok) && STEPS.starts_with(&names) =>
        {
            Ok(format!("refused at {}", last.name))
        }
        [] => Err("probe refused the device without a failed step".into()),
        _ => Err(format!(
            "probe's steps are no clean refusal: {:?}",
            b.steps
                .iter()
                .map(|s| format!("{} {}", s.name, if s.ok { "ok" } else { "FAIL" }))
                .collect::<Vec<_>>()
        )),
    }
}

/// The driver's lines of the point's faulted binding (its `# mmio` reports left out), at most
/// `AROUND` of them from the last, after the guest's `pcirig: point P` mark: where it was.
fn around(lines: &[String], point: &Point) -> String {
    const AROUND: usize = 6;
    let mark = format!("pcirig: point {point}");
    let Some(start) = lines.iter().position(|l| strip_timestamp(l) == mark) else {
        return String::new();
    };
    let mut said: Vec<&str> = Vec::new();
    for l in &lines[start + 1..] {
        let Some(text) = driver::driver_text(l) else {
            continue;
        };
        if text.starts_with("# mmio") {
            continue;
        }
        said.push(text);
        if text.starts_with("event probe_done") || text.contains(" FAIL ") {
            break;
        }
    }
    let from = said.len().saturating_sub(AROUND);
    format!(
        "\nthe driver's last lines of that probe:\n  {}",
        said[from..].join("\n  ")
    )
}

/// An access as `r|w REGISTER` (BAR0) or `r|w bar2+OFFSET`.
fn describe(a: &Access) -> String {
    let rw = if a.kind == Kind::Read { "r" } else { "w" };
    let name = regmap::REGISTERS
        .iter()
        .find(|r| a.region == Region::Bar0 && r.offset == a.offset)
        .map_or_else(
            || format!("{}+{:#x}", a.region, a.offset),
            |r| r.name.to_string(),
        );
    format!("{rw} {name}")
}

/// Each probe's time, in probe order: from `event probe_begin` to its last line (probe_done,
/// or the step that failed).
fn probe_durations(lines: &[String]) -> Vec<Option<f64>> {
    let mut out = Vec::new();
    let mut began: Option<Option<f64>> = None;
    for line in lines {
        let Some(text) = driver::driver_text(line) else {
            continue;
        };
        if text.starts_with("event probe_begin") {
            began = Some(timestamp(line));
        } else if text.starts_with("event probe_done") || text.contains(" FAIL ") {
            if let Some(b) = began.take() {
                out.push(b.zip(timestamp(line)).map(|(b, e)| (e - b) * 1000.0));
            }
        }
    }
    out
}

/// The points as a table, one line each.
pub fn table(results: &[PointResult]) -> String {
    results
        .iter()
        .map(|r| {
            format!(
                "{:<12} {:<30} struck {:<18} probe {}",
                r.point,
                r.outcome,
                r.struck,
                r.probe_ms.map_or("-".into(), |ms| format!("{ms:.0} ms"))
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// A colour of hue `h` (degrees) at 60 % saturation and 48 % lightness, as `#rrggbb` (which
/// every SVG viewer reads; not all read `hsl()`).
fn hue(h: usize) -> String {
    let (s, l) = (0.60, 0.48);
    let c = (1.0 - f64::abs(2.0 * l - 1.0)) * s;
    let x = c * (1.0 - f64::abs((h as f64 / 60.0) % 2.0 - 1.0));
    let (r, g, b) = match h / 60 {
        0 => (c, x, 0.0),
        1 => (x, c, 0.0),
        2 => (0.0, c, x),
        3 => (0.0, x, c),
        4 => (x, 0.0, c),
        _ => (c, 0.0, x),
    };
    let m = l - c / 2.0;
    let byte = |v: f64| ((v + m) * 255.0).round() as u8;
    format!("#{:02x}{:02x}{:02x}", byte(r), byte(g), byte(b))
}

/// The points as one SVG: access along x (probe's 1 to `PROBE_ACCESSES`, then remove()'s
/// RESET), one row per fault kind, each swept cell coloured by its outcome (its title says
/// the point, the outcome and the struck access); a legend below.
pub fn chart(title: &str, results: &[PointResult]) -> String {
    use std::fmt::Write as _;
    const CELL: u64 = 10;
    const LEFT: u64 = 70;
    const TOP: u64 = 40;
    let columns = PROBE_ACCESSES + 1;
    let mut outcomes: Vec<&str> = results.iter().map(|r| r.outcome.as_str()).collect();
    outcomes.sort();
    outcomes.dedup();
    // Bound is always green; the others by their place in the legend (as many as the driver
    // has steps, all told apart).
    let colour = |o: &str| match outcomes
        .iter()
        .filter(|x| **x != "bound")
        .position(|x| *x == o)
    {
        None => "#5aa05a".to_string(),
        // Hues a golden angle apart, green's (80 to 160 degrees) left to `bound`.
        Some(i) => hue((160 + (i * 137) % 280) % 360),
    };
    let kinds = vocab::sweep::KINDS;
    let width = LEFT + columns * CELL + 20;
    let legend_top = TOP + kinds.len() as u64 * (CELL + 6) + 30;
    let height = legend_top + outcomes.len() as u64 * 16 + 10;
    let mut svg = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{width}\" height=\"{height}\" font-family=\"sans-serif\" font-size=\"11\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n<text x=\"{LEFT}\" y=\"16\" font-size=\"13\">{}</text>\n<text x=\"{LEFT}\" y=\"32\" fill=\"#555\">probe's device accesses 1 to {PROBE_ACCESSES}, then remove()'s RESET (w1); grey: not swept this run</text>\n",
        escape(title)
    );
    for (row, kind) in kinds.iter().enumerate() {
        let y = TOP + row as u64 * (CELL + 6);
        let _ = writeln!(
            svg,
            "<text x=\"{}\" y=\"{}\" text-anchor=\"end\">{kind}</text>",
            LEFT - 6,
            y + CELL - 1
        );
        for col in 0..columns {
            let at = if col < PROBE_ACCESSES {
                At::Probe(col + 1)
            } else {
                At::Write(1)
            };
            let point = Point { kind: *kind, at }.to_string();
            let x = LEFT + col * CELL;
            let (fill, tip) = match results.iter().find(|r| r.point == point) {
                Some(r) => (
                    colour(&r.outcome),
                    format!("{point}: {}, struck {}", r.outcome, r.struck),
                ),
                None => ("#e4e4e4".to_string(), format!("{point}: not swept")),
            };
            let _ = writeln!(
                svg,
                "<rect x=\"{x}\" y=\"{y}\" width=\"{}\" height=\"{CELL}\" fill=\"{fill}\"><title>{}</title></rect>",
                CELL - 1,
                escape(&tip)
            );
        }
    }
    for (i, o) in outcomes.iter().enumerate() {
        let y = legend_top + i as u64 * 16;
        let _ = writeln!(
            svg,
            "<rect x=\"{LEFT}\" y=\"{}\" width=\"10\" height=\"10\" fill=\"{}\"/><text x=\"{}\" y=\"{y}\">{} ({})</text>",
            y - 9,
            colour(o),
            LEFT + 16,
            escape(o),
            results.iter().filter(|r| r.outcome == *o).count()
        );
    }
    svg.push_str("</svg>\n");
    svg
}

/// `s` as SVG text: the five characters XML reserves, escaped.
fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device_log::Claimed;
    use crate::driver::Step;
    use regmap::reg::{self, MAGIC, RESET, SCRATCH};

    fn binding(steps: &[(&str, bool)], probed: bool, claims: usize) -> Binding {
        let claim = Claimed {
            kind: Kind::Read,
            region: "bar0".into(),
            offset: MAGIC,
            size: 4,
            value: 0,
        };
        Binding {
            steps: steps
                .iter()
                .map(|&(name, ok)| Step {
                    name: name.into(),
                    ok,
                    detail: String::new(),
                })
                .collect(),
            probe_claims: vec![claim; claims],
            probed,
            later_claims: Vec::new(),
            worker_reads: probed.then_some(0),
            worker_gone: false,
            dma: Vec::new(),
        }
    }

    fn clean() -> Binding {
        let steps: Vec<(&str, bool)> = STEPS.iter().map(|&s| (s, true)).collect();
        binding(&steps, true, PROBE_ACCESSES as usize)
    }

    /// A device log of `n` BAR0 reads of SCRATCH, with `fault` at `struck` (a seq).
    fn log(n: u64, struck: u64, fault: FaultKind) -> Vec<Access> {
        (1..=n)
            .map(|seq| Access {
                fault: (seq == struck).then_some(fault),
                ..crate::device_log::test_access(seq, "bar0", SCRATCH, 4, 0, "read")
            })
            .collect()
    }

    fn probes(faulted: (u64, u64), clean: (u64, u64)) -> Vec<Probe> {
        [faulted, clean]
            .iter()
            .enumerate()
            .map(|(i, &(first, last))| Probe {
                binding: i + 1,
                server: 0,
                first,
                last,
            })
            .collect()
    }

    fn run(
        point: &str,
        faulted: Binding,
        clean: Binding,
        log: &[Access],
        p: &[Probe],
    ) -> Result<Vec<PointResult>, String> {
        let history = [Actor::Driver(faulted), Actor::Driver(clean)];
        judge("sweep", &[point.parse().unwrap()], &history, p, &[log], &[])
    }

    const REFUSED_AT_SCRATCH: &[(&str, bool)] = &[("identify", true), ("scratch", false)];

    #[test]
    fn a_point_struck_where_asked_refused_cleanly_then_bound_passes() {
        let log = log(90, 5, FaultKind::Vanish);
        let faulted = binding(REFUSED_AT_SCRATCH, false, 10);
        let r = run(
            "vanish:5",
            faulted,
            clean(),
            &log,
            &probes((1, 10), (11, 90)),
        )
        .unwrap();
        assert_eq!(r[0].outcome, "refused at scratch");
        assert_eq!(r[0].struck, "#5 r SCRATCH");
    }

    #[test]
    fn a_strike_elsewhere_or_none_fails_naming_the_point_and_its_replay() {
        let faulted = || binding(REFUSED_AT_SCRATCH, false, 10);
        let p = probes((1, 10), (11, 90));
        let e = run(
            "vanish:5",
            faulted(),
            clean(),
            &log(90, 6, FaultKind::Vanish),
            &p,
        )
        .unwrap_err();
        assert!(e.contains("probe's access 6, not its access 5"), "{e}");
        assert!(e.contains("--scenario sweep --sweep-point vanish:5"), "{e}");
        let e = run(
            "vanish:5",
            faulted(),
            clean(),
            &log(90, 0, FaultKind::Vanish),
            &p,
        )
        .unwrap_err();
        assert!(e.contains("struck 0 times"), "{e}");
        let e = run(
            "error:5",
            faulted(),
            clean(),
            &log(90, 5, FaultKind::Vanish),
            &p,
        )
        .unwrap_err();
        assert!(e.contains("was Some(Vanish), not error"), "{e}");
        let e = run(
            "vanish:5",
            faulted(),
            clean(),
            &log(90, 12, FaultKind::Vanish),
            &p,
        )
        .unwrap_err();
        assert!(
            e.contains("struck 0 times"),
            "a strike in the next binding is not this one's: {e}"
        );
    }

    #[test]
    fn an_unclean_refusal_or_a_failed_clean_probe_fails() {
        let log = log(90, 5, FaultKind::Error);
        let p = probes((1, 10), (11, 90));
        let skipped = binding(&[("identify", true), ("counter", false)], false, 10);
        let e = run("error:5", skipped, clean(), &log, &p).unwrap_err();
        assert!(e.contains("no clean refusal"), "{e}");
        let silent = binding(&[], false, 10);
        let e = run("error:5", silent, clean(), &log, &p).unwrap_err();
        assert!(e.contains("without a failed step"), "{e}");
        let faulted = || binding(REFUSED_AT_SCRATCH, false, 10);
        let short = {
            let mut b = clean();
            b.probe_claims.pop();
            b
        };
        let e = run("error:5", faulted(), short, &log, &p).unwrap_err();
        assert!(e.contains("made 128 device accesses"), "{e}");
        let refused = binding(REFUSED_AT_SCRATCH, false, 80);
        let e = run("error:5", faulted(), refused, &log, &p).unwrap_err();
        assert!(e.contains("the next clean probe did not bind"), "{e}");
    }

    #[test]
    fn a_remove_point_must_strike_removes_reset() {
        let mut log = log(170, 85, FaultKind::Vanish);
        log[84].kind = Kind::Write;
        log[84].offset = RESET;
        let p = probes((1, 80), (90, 170));
        let r = run("vanish:w1", clean(), clean(), &log, &p).unwrap();
        assert_eq!(
            (r[0].outcome.as_str(), r[0].struck.as_str()),
            ("removed", "#85 w RESET")
        );
        log[84].offset = SCRATCH;
        let e = run("vanish:w1", clean(), clean(), &log, &p).unwrap_err();
        assert!(e.contains("not remove()'s RESET"), "{e}");
    }

    #[test]
    fn a_faulted_probe_that_waits_too_long_fails() {
        let log = log(90, 5, FaultKind::Vanish);
        let lines: Vec<String> = [
            "[    1.000000] pci_rig 0000:01:00.0: event probe_begin",
            "[    7.000000] pci_rig 0000:01:00.0: step scratch FAIL wrote=0x0 read=0xffffffff",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let history = [
            Actor::Driver(binding(REFUSED_AT_SCRATCH, false, 10)),
            Actor::Driver(clean()),
        ];
        let e = judge(
            "sweep",
            &["vanish:5".parse().unwrap()],
            &history,
            &probes((1, 10), (11, 90)),
            &[&log],
            &lines,
        )
        .unwrap_err();
        assert!(e.contains("probe took 6000 ms"), "{e}");
        assert!(
            !e.contains("the driver's last lines"),
            "no `pcirig: point` mark, no lines: {e}"
        );
        let mut marked = lines.clone();
        marked.insert(0, "[    0.900000] pcirig: point vanish:5".into());
        let history = [
            Actor::Driver(binding(REFUSED_AT_SCRATCH, false, 10)),
            Actor::Driver(clean()),
        ];
        let e = judge(
            "sweep",
            &["vanish:5".parse().unwrap()],
            &history,
            &probes((1, 10), (11, 90)),
            &[&log],
            &marked,
        )
        .unwrap_err();
        assert!(
            e.ends_with("the driver's last lines of that probe:\n  event probe_begin\n  step scratch FAIL wrote=0x0 read=0xffffffff"),
            "{e}"
        );
        // A die point's struck access waits QEMU's 5 s more.
        let mut died = log.clone();
        died[4].fault = Some(FaultKind::Die);
        let history = [
            Actor::Driver(binding(REFUSED_AT_SCRATCH, false, 10)),
            Actor::Driver(clean()),
        ];
        let r = judge(
            "sweep",
            &["die:5".parse().unwrap()],
            &history,
            &probes((1, 10), (11, 90)),
            &[&died],
            &lines,
        )
        .unwrap();
        assert_eq!(r[0].probe_ms, Some(6000.0));
    }

    #[test]
    fn the_chart_colours_each_swept_cell_by_its_outcome() {
        let r = |point: &str, outcome: &str| PointResult {
            point: point.into(),
            outcome: outcome.into(),
            struck: "#1 r MAGIC".into(),
            probe_ms: None,
        };
        let svg = chart(
            "x86_64",
            &[
                r("vanish:1", "refused at identify"),
                r("error:w1", "removed"),
                r("vanish:2", "bound"),
            ],
        );
        assert!(svg.contains("<title>vanish:1: refused at identify, struck #1 r MAGIC</title>"));
        assert!(svg.contains("<title>error:3: not swept</title>"));
        assert!(svg.contains("removed (1)"));
        let cells = svg.matches("<rect x=").count();
        assert_eq!(
            cells,
            vocab::sweep::KINDS.len() * (PROBE_ACCESSES as usize + 1) + 3,
            "every cell and 3 legend keys"
        );
        assert!(
            svg.contains("fill=\"#5aa05a\"><title>vanish:2: bound"),
            "bound keeps its colour"
        );
    }

    #[test]
    fn hues_are_hex_colours() {
        assert_eq!(hue(0), "#c43131");
        assert_eq!(hue(120), "#31c431");
        assert_eq!(hue(240), "#3131c4");
    }

    #[test]
    fn the_points_are_read_from_the_kernel_command_line() {
        let lines = vec![
            "[    0.000000] Kernel command line: console=ttyS0 pcirig.points=vanish:3-4,error:w1"
                .to_string(),
        ];
        let p = points(&lines).unwrap();
        assert_eq!(
            p.iter().map(|p| p.to_string()).collect::<Vec<_>>(),
            ["vanish:3", "vanish:4", "error:w1"]
        );
        assert!(points(&[]).is_err());
    }

    /// One line of a probe as our driver prints it: an access it reports (the device's log
    /// holds the same), or any other line of the driver's or the kernel's about it.
    #[derive(Clone, Debug)]
    enum Ln {
        Mmio(Kind, u64, u64),
        Text(String),
    }

    /// Lines of a probe, built in the order `pci_rig.rs` prints them.
    #[derive(Default)]
    struct Transcript(Vec<Ln>);

    impl Transcript {
        fn r(&mut self, offset: u64, value: u64) -> &mut Self {
            self.0.push(Ln::Mmio(Kind::Read, offset, value));
            self
        }

        fn w(&mut self, offset: u64, value: u64) -> &mut Self {
            self.0.push(Ln::Mmio(Kind::Write, offset, value));
            self
        }

        fn say(&mut self, text: &str) -> &mut Self {
            self.0.push(Ln::Text(text.into()));
            self
        }

        /// The interrupt thread's run: INT_STATUS read, acked, reported.
        fn irq(&mut self, status: u64, handled: &mut u32) -> &mut Self {
            *handled += 1;
            self.r(reg::INT_STATUS, status)
                .w(reg::INT_ACK, status)
                .say(&format!("event irq status={status:#x} handled={handled}"))
        }

        /// `operate()`: parameters (opcode, length, argument), doorbell, interrupt, STATUS and
        /// RESULT (what the device answers: INT_STATUS, STATUS, RESULT).
        fn operate(
            &mut self,
            (op, len, arg): (u64, u64, u64),
            (irq, status, result): (u64, u64, u64),
            handled: &mut u32,
        ) -> &mut Self {
            self.w(reg::OP_OFFSET, 0)
                .w(reg::OP_LENGTH, len)
                .w(reg::OP_ARG, arg)
                .w(reg::CMD, op)
                .irq(irq, handled)
                .r(reg::STATUS, status)
                .r(reg::RESULT, result)
        }

        /// `dma()`: address and range written and read back, announced, doorbell, interrupt.
        fn dma(&mut self, op: (u64, &str), iova: u64, crc: u64, handled: &mut u32) -> &mut Self {
            self.w(reg::DMA_ADDR_LO, iova)
                .w(reg::DMA_ADDR_HI, 0)
                .w(reg::OP_OFFSET, 0)
                .w(reg::OP_LENGTH, 0x400)
                .r(reg::DMA_ADDR_LO, iova)
                .r(reg::DMA_ADDR_HI, 0)
                .r(reg::OP_OFFSET, 0)
                .r(reg::OP_LENGTH, 0x400);
            let announced = match op.1 {
                "from_device" => "-".to_string(),
                _ => format!("{crc:#x}"),
            };
            self.say(&format!("# dma start {} {iova:#x} 0x400 {announced}", op.1))
                .w(reg::CMD, op.0)
                .irq(0x1, handled)
                .r(reg::STATUS, 0x2)
                .r(reg::RESULT, crc)
        }

        /// Probe's `n`-th access (from 1).
        fn access(&mut self, n: u64) -> &mut Ln {
            self.0
                .iter_mut()
                .filter(|l| matches!(l, Ln::Mmio(..)))
                .nth(n as usize - 1)
                .unwrap()
        }

        /// Probe's `n`-th access now answers (or writes) `value`.
        fn set(&mut self, n: u64, value: u64) -> &mut Self {
            if let Ln::Mmio(_, _, v) = self.access(n) {
                *v = value;
            }
            self
        }

        /// The driver's line that starts with `prefix` now says `text`.
        fn retell(&mut self, prefix: &str, text: &str) -> &mut Self {
            let line = self
                .0
                .iter_mut()
                .find(|l| matches!(l, Ln::Text(t) if t.starts_with(prefix)))
                .unwrap();
            *line = Ln::Text(text.into());
            self
        }

        /// Probe stops after its `n`-th access: `fail` is the step that failed, and the kernel
        /// reports `errno` (nothing for ENODEV).
        fn refuse(&mut self, n: u64, fail: &str, errno: Option<i64>) -> &mut Self {
            let mut accesses = 0;
            let end = self
                .0
                .iter()
                .position(|l| {
                    accesses += u64::from(matches!(l, Ln::Mmio(..)));
                    accesses == n
                })
                .unwrap();
            self.0.truncate(end + 1);
            self.say(fail);
            if let Some(e) = errno {
                self.say(&format!("{PROBE_FAILED}{e}"));
            }
            self
        }
    }

    /// SCRATCH's patterns today (`selftest.rs`), and before the sweep's first finding, when a
    /// dropped first write of 0 read back the register's reset value.
    const PATTERNS: [u64; 5] = [0xffff_ffff, 0, 0xa5a5_5a5a, 0x5a5a_a5a5, 0x1234_5678];
    const OLD_PATTERNS: [u64; 5] = [0, 0xffff_ffff, 0xa5a5_5a5a, 0x5a5a_a5a5, 0x1234_5678];

    /// A probe that binds, every line as the clean driver prints it (129 accesses).
    fn bound_probe(patterns: [u64; 5]) -> Transcript {
        let mut t = Transcript::default();
        let mut handled = 0;
        let h = &mut handled;
        t.say("event irq_mode msi")
            .r(reg::MAGIC, 0x7072_6967)
            .r(reg::VERSION, 0x1_0000)
            .say("step identify ok magic=0x70726967 version=0x10000")
            .w(reg::RESET, 1)
            .w(reg::INT_ENABLE, 7);
        for p in patterns {
            t.w(reg::SCRATCH, p)
                .r(reg::SCRATCH, p)
                .say(&format!("step scratch ok wrote={p:#x} read={p:#x}"));
        }
        t.r(reg::COUNTER, 0)
            .r(reg::COUNTER, 1)
            .say("step counter ok 0 then 1");
        let (filled, inverted) = (0x1c3a_fd2a, 0x62d4_e1a9);
        t.operate((2, 0x40, 0x5a), (1, 2, filled), h)
            .say("step fill ok status=0x2 crc=0x1c3afd2a want=0x1c3afd2a")
            .operate((1, 0x40, 0), (1, 2, filled), h)
            .say("step crc32 ok status=0x2 crc=0x1c3afd2a want=0x1c3afd2a")
            .operate((3, 0x40, 0), (1, 2, inverted), h)
            .say("step invert ok status=0x2 crc=0x62d4e1a9 want=0x62d4e1a9")
            .operate((0x63, 0, 0), (3, 0x106, inverted), h)
            .say("step bad_opcode ok status=0x106 crc=0x62d4e1a9 want=0x0")
            .r(reg::SCRATCH, 0x1234_5678)
            .say("step try_access_bounds ok past_end=Some(EINVAL) unaligned=Some(EINVAL) inside=Some(305419896) want=0x12345678");
        for _ in 0..10 {
            t.w(reg::INT_RAISE, 4).irq(4, h);
        }
        let (sent, back) = (0x8b1f_0c3e, 0x74e0_f3c1);
        t.say("step irq ok 10 software interrupts, each handled")
            .r(reg::IRQ_COUNT, 14)
            .say("step irq_count ok device=14 driver=14")
            .r(reg::DMA_BITS, 32)
            .say("step dma_mask ok bits=32 None")
            .say("# dma map 1 coherent 0xfffff000 0x800")
            .dma((4, "to_device"), 0xffff_f000, sent, h)
            .say("step dma_to_device ok status=0x2 crc=0x8b1f0c3e want=0x8b1f0c3e")
            .operate((3, 0x400, 0), (1, 2, back), h)
            .dma((5, "from_device"), 0xffff_f400, back, h)
            .say("# dma received 0xfffff400 0x400 0x74e0f3c1")
            .say("step dma_from_device ok status=0x2 crc=0x74e0f3c1 want=0x74e0f3c1 received=0x74e0f3c1")
            .say("# dma map 2 to_device 0xffffe000 0x400")
            .dma((6, "crc32"), 0xffff_e000, sent, h)
            .say("# dma unmap 2")
            .say("step dma_stream ok status=0x2 crc=0x8b1f0c3e want=0x8b1f0c3e")
            .r(reg::CAPS, 0)
            .say("event probe_done");
        t
    }

    /// A sweep boot of one point, console and device log alike: `point`'s faulted binding
    /// (`faulted`, struck at its `struck`-th access), unbound if it bound, then a clean binding.
    fn boot(point: &str, faulted: &Transcript, struck: u64) -> (Vec<String>, Vec<Access>) {
        let kind = point.parse::<Point>().unwrap().kind;
        // The serial console's shape: syslog level (5 notice, 6 info, 3 error, 12 a user's
        // `/dev/kmsg` line), printk stamp, then the text.
        let mut lines: Vec<(u8, String)> = vec![
            (
                5,
                format!("Kernel command line: console=ttyS0 panic=-1 pcirig.points={point}"),
            ),
            (12, format!("pcirig: point {point}")),
        ];
        let driver = |text: &str| {
            let level = if text.contains(" FAIL ") || text.starts_with(PROBE_FAILED) {
                3
            } else {
                6
            };
            (level, format!("pci_rig 0000:01:00.0: {text}"))
        };
        let mut log: Vec<Access> = Vec::new();
        let access = |log: &mut Vec<Access>, kind: Kind, offset: u64, value: u64| {
            let rw = if kind == Kind::Read { "read" } else { "write" };
            let seq = log.len() as u64 + 1;
            log.push(crate::device_log::test_access(
                seq, "bar0", offset, 4, value, rw,
            ));
        };
        let clean = bound_probe(PATTERNS);
        for (k, t) in [faulted, &clean].into_iter().enumerate() {
            lines.push(driver("event probe_begin"));
            let mut n = 0;
            for l in &t.0 {
                match l {
                    Ln::Mmio(rw, offset, value) => {
                        n += 1;
                        let r = if *rw == Kind::Read { "r" } else { "w" };
                        lines.push(driver(&format!("# mmio {r} bar0 {offset:#x} 4 {value:#x}")));
                        access(&mut log, *rw, *offset, *value);
                        if k == 0 && n == struck {
                            let a = log.last_mut().unwrap();
                            a.fault = Some(kind);
                            a.class = Class::Corrupted;
                        }
                    }
                    Ln::Text(text) => lines.push(driver(text)),
                }
            }
            if lines.last().unwrap().1.ends_with("event probe_done") {
                // rmmod: the worker read MAGIC twice, remove() reset the device.
                access(&mut log, Kind::Read, reg::MAGIC, 0x7072_6967);
                access(&mut log, Kind::Write, RESET, 1);
                access(&mut log, Kind::Read, reg::MAGIC, 0x7072_6967);
                for text in [
                    "event remove_begin",
                    "# mmio w bar0 0x50 4 0x1",
                    "# dma unmap 1",
                    "event remove_done",
                    "event kept_handle refused",
                    "event worker_stopped reason=Refused accesses=2",
                ] {
                    lines.push(driver(text));
                }
            }
        }
        // printk stamps, a tenth of a millisecond apart.
        let lines = lines
            .iter()
            .enumerate()
            .map(|(i, (level, l))| format!("<{level}>[{:12.6}] {l}", 1.0 + i as f64 * 1e-4))
            .collect();
        (lines, log)
    }

    /// `boot`'s point judged as `judge_sweep` does: history, accounting, then the points.
    fn judged(point: &str, faulted: &Transcript, struck: u64) -> Result<Vec<PointResult>, String> {
        let (lines, log) = boot(point, faulted, struck);
        let history = driver::history(&lines)?;
        let n = crate::accounting::account(&history, &[&log])?;
        let points = self::points(&lines)?;
        judge("sweep", &points, &history, &n.probes, &[&log], &lines)
    }

    #[test]
    fn the_fixture_is_a_clean_probe_of_129_accesses() {
        let t = bound_probe(PATTERNS);
        let n = t.0.iter().filter(|l| matches!(l, Ln::Mmio(..))).count();
        assert_eq!(n as u64, PROBE_ACCESSES);
        // Access by access the table's registers and directions.
        let table = Table::new();
        for (i, l) in t.0.iter().filter(|l| matches!(l, Ln::Mmio(..))).enumerate() {
            let Ln::Mmio(kind, offset, _) = l else {
                unreachable!()
            };
            let e = table.entry(i as u64 + 1).unwrap();
            assert_eq!(
                (e.kind, e.offset),
                (*kind, *offset),
                "access {}: {e}",
                i + 1
            );
        }
    }

    #[test]
    fn the_sweeps_first_finding_a_dropped_first_scratch_write_fails_if_it_comes_back() {
        // Today's driver: the first pattern, all-ones, dropped; the register still holds 0.
        let mut today = bound_probe(PATTERNS);
        today
            .set(6, 0)
            .refuse(6, "step scratch FAIL wrote=0xffffffff read=0x0", Some(-5));
        let r = judged("error:5", &today, 5).unwrap();
        assert_eq!(
            (r[0].outcome.as_str(), r[0].struck.as_str()),
            ("refused at scratch", "#5 w SCRATCH")
        );
        // The driver before 07892f4: its first pattern was SCRATCH's reset value, 0, so the
        // dropped write read back right and the device bound.
        let old = bound_probe(OLD_PATTERNS);
        let e = judged("error:5", &old, 5).unwrap_err();
        assert!(e.starts_with("point error:5 (binding 1): ended bound, which an `error` fault at #5 w SCRATCH may not end in (probe's access 5: w SCRATCH in step scratch, a self-test pattern"), "{e}");
        assert!(
            e.contains("; allowed: refused at scratch with EIO; replay it alone: cargo xtask test --scenario sweep --sweep-point error:5"),
            "{e}"
        );
    }

    #[test]
    fn the_sweeps_second_finding_an_unchecked_corrupted_read_fails_if_it_comes_back() {
        let corrupted = !0x1234_5678u32 as u64;
        let mut today = bound_probe(PATTERNS);
        today.set(49, corrupted).refuse(
            49,
            "step try_access_bounds FAIL past_end=Some(EINVAL) unaligned=Some(EINVAL) inside=Some(3989547399) want=0x12345678",
            Some(-5),
        );
        let r = judged("error:49", &today, 49).unwrap();
        assert_eq!(r[0].outcome, "refused at try_access_bounds");
        // The driver before 07892f4 only checked that the read inside BAR0 succeeded.
        let mut old = bound_probe(OLD_PATTERNS);
        old.set(49, corrupted).retell(
            "step try_access_bounds",
            "step try_access_bounds ok past_end=Some(EINVAL) unaligned=Some(EINVAL) inside_ok=true",
        );
        let e = judged("error:49", &old, 49).unwrap_err();
        assert!(e.starts_with("point error:49 (binding 1): ended bound, which an `error` fault at #49 r SCRATCH may not end in (probe's access 49: r SCRATCH in step try_access_bounds, a read the step compares); allowed: refused at try_access_bounds with EIO"), "{e}");
    }

    #[test]
    fn identify_refuses_a_corrupted_magic_with_enodev_which_the_kernel_does_not_report() {
        let refused = |errno| {
            let mut t = bound_probe(PATTERNS);
            t.set(1, 0x8f8d_9698).refuse(
                1,
                "step identify FAIL magic 0x8f8d9698, expected 0x70726967",
                errno,
            );
            t
        };
        let r = judged("error:1", &refused(None), 1).unwrap();
        assert_eq!(r[0].outcome, "refused at identify");
        let e = judged("error:1", &refused(Some(-5)), 1).unwrap_err();
        assert!(
            e.contains("ended refused at identify with EIO, which an `error` fault at #1 r MAGIC may not end in")
                && e.contains("allowed: refused at identify with ENODEV"),
            "{e}"
        );
        // A refusal at scratch the kernel did not report returned ENODEV, not EIO.
        let mut silent = bound_probe(PATTERNS);
        silent
            .set(6, 0)
            .refuse(6, "step scratch FAIL wrote=0xffffffff read=0x0", None);
        let e = judged("error:5", &silent, 5).unwrap_err();
        assert!(
            e.contains(
                "ended refused at scratch with ENODEV or ENXIO (the kernel reported no error)"
            ),
            "{e}"
        );
    }

    #[test]
    fn a_dropped_parameter_binds_only_where_the_register_held_it_already() {
        // crc32's OP_LENGTH, 64 as fill's was: nothing changes.
        let r = judged("error:26", &bound_probe(PATTERNS), 26).unwrap();
        assert_eq!(r[0].outcome, "bound");
        // fill's OP_LENGTH, 64 over the reset value 0: a driver that binds missed it.
        let e = judged("error:18", &bound_probe(PATTERNS), 18).unwrap_err();
        assert!(
            e.contains("ended bound, which an `error` fault at #18 w OP_LENGTH may not end in")
                && e.contains("allowed: refused at fill with EIO"),
            "{e}"
        );
        // The last ack of probe: no doorbell after it, so nothing shows.
        let r = judged("error:126", &bound_probe(PATTERNS), 126).unwrap();
        assert_eq!(r[0].outcome, "bound");
    }

    #[test]
    fn a_vanished_device_must_refuse_where_it_first_shows() {
        // bad_opcode does not compare its RESULT: the checked read after it is where it shows.
        let mut gone = bound_probe(PATTERNS);
        for n in 48..=49 {
            gone.set(n, 0xffff_ffff);
        }
        gone.refuse(
            49,
            "step try_access_bounds FAIL past_end=Some(EINVAL) unaligned=Some(EINVAL) inside=Some(4294967295) want=0x12345678",
            Some(-5),
        );
        assert_eq!(
            judged("vanish:48", &gone, 48).unwrap()[0].outcome,
            "refused at try_access_bounds"
        );
        // A driver that noticed none of the all-ones answers would bind.
        let mut blind = bound_probe(PATTERNS);
        for n in 48..=129 {
            if let Ln::Mmio(Kind::Read, ..) = blind.access(n) {
                blind.set(n, 0xffff_ffff);
            }
        }
        let e = judged("vanish:48", &blind, 48).unwrap_err();
        assert!(
            e.contains("ended bound, which a `vanish` fault at #48 r RESULT may not end in")
                && e.contains("allowed: refused at try_access_bounds with EIO"),
            "{e}"
        );
    }

    #[test]
    fn a_strike_where_the_table_has_another_register_says_the_table_is_stale() {
        // A driver that made one more access before SCRATCH's first write.
        let mut moved = bound_probe(PATTERNS);
        moved.0.insert(6, Ln::Mmio(Kind::Read, reg::COUNTER, 0));
        let e = judged("error:5", &moved, 5).unwrap_err();
        assert!(
            e.contains("the fault struck #5 r COUNTER, but the sweep's table (judge::sweep_table) has probe's access 5 as w SCRATCH"),
            "{e}"
        );
    }
}
