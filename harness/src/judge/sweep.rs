//! The removal-point sweep, point by point (`sweep`, `images/scenarios/sweep.sh`). Each point
//! makes two bindings: the faulted one and, the device back (the fault cleared, or a fresh one
//! plugged in), a clean one. Per point, by the driver's lines and the device's own log:
//! - the fault of the point's kind struck where it was asked: probe's N-th device access of
//!   the faulted binding (the device's count, not the driver's), or remove()'s RESET for `wN`;
//! - the faulted probe bound, or refused cleanly: its steps so far in order, each passed but
//!   the last, which failed; and it took no longer than a lost interrupt's wait allows;
//! - the clean binding bound with every step, in exactly `PROBE_ACCESSES` accesses.
//!
//! The boot's other rules (no splat, every guest check, each binding's end, the accounting,
//! config space, the MMIO oracle) are `judge::judge_sweep`'s, as for any driver boot.

use crate::guest::console::{strip_timestamp, timestamp};
use crate::guest::device::{Access, Kind, Region};
use crate::judge::accounting::Probe;
use crate::judge::driver::{self, Actor, Binding, ProbeEnd, STEPS};
use crate::sweep::{At, Point, PROBE_ACCESSES};
use qemu_device::model::FaultKind;
use serde::Serialize;

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
    crate::sweep::parse_list(list)
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
        results.push(PointResult {
            point: point.to_string(),
            outcome,
            struck: what,
            probe_ms,
        });
    }
    Ok(results)
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
    use crate::bench::svg::escape;
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
    let kinds = crate::sweep::KINDS;
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::guest::device::Claimed;
    use crate::judge::driver::Step;
    use regmap::reg::{MAGIC, RESET, SCRATCH};

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
                ..crate::judge::test_access(seq, "bar0", SCRATCH, 4, 0, "read")
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
            crate::sweep::KINDS.len() * (PROBE_ACCESSES as usize + 1) + 3,
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
}
