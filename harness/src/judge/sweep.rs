//! The removal-point sweep, point by point (`sweep`, `images/scenarios/sweep.sh`). Each point
//! makes two bindings: the faulted one and, the fault cleared, a clean one. Per point, by the
//! driver's lines and the device's own log:
//! - the fault struck where it was asked: probe's N-th device access of the faulted binding
//!   (the device's count, not the driver's), or remove()'s RESET for `wN`;
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
use serde::Serialize;

/// The longest a faulted probe may take: one lost interrupt's wait (the driver's
/// `IRQ_WAIT_MS`, 1 s) plus a clean probe's time on a loaded TCG host.
pub const PROBE_LIMIT_MS: f64 = 5000.0;

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
    list.split(',')
        .filter(|p| !p.is_empty())
        .map(str::parse)
        .collect()
}

/// Each point judged, in order; `Err` names the first point that failed, with its access
/// number and the driver's lines around it, and how to replay it alone.
pub fn judge(
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
                "point {point} (binding {}): {why}; replay it alone: cargo xtask test --sweep-point {point}",
                2 * i + 1
            )
        };
        let probe = &probes[2 * i];
        let log = servers.get(probe.server).copied().unwrap_or_default();
        let next = probes.get(2 * i + 1).map_or(u64::MAX, |p| p.first);
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
        match point.at {
            At::Probe(n) => {
                let nth = log
                    .iter()
                    .filter(|a| a.region != Region::Config && (probe.first..=hit.seq).contains(&a.seq))
                    .count() as u64;
                if nth != n || hit.seq > probe.last {
                    return Err(fail(format!(
                        "the fault struck {what}, probe's access {nth}{}, not its access {n}",
                        if hit.seq > probe.last { " (after probe)" } else { "" }
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
        if let Some(ms) = probe_ms.filter(|&ms| ms > PROBE_LIMIT_MS) {
            return Err(fail(format!(
                "probe took {ms:.0} ms with the fault struck at {what}, more than the {PROBE_LIMIT_MS:.0} ms a lost interrupt allows: the driver waited on a gone device"
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

/// An access as `r|w REGISTER` (BAR0) or `r|w bar2+OFFSET`.
fn describe(a: &Access) -> String {
    let rw = if a.kind == Kind::Read { "r" } else { "w" };
    let name = regmap::REGISTERS
        .iter()
        .find(|r| a.region == Region::Bar0 && r.offset == a.offset)
        .map_or_else(|| format!("{}+{:#x}", a.region, a.offset), |r| r.name.to_string());
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
                "{:<12} {:<22} struck {:<18} probe {}",
                r.point,
                r.outcome,
                r.struck,
                r.probe_ms.map_or("-".into(), |ms| format!("{ms:.0} ms"))
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}
