//! The comparison as a table and as the chart's panels.

use super::model::{Key, Side};
use super::stats::{Comparison, Ratio, Runs};
use crate::svg::{Bar, Panel};
use std::fmt::Write as _;

/// Seconds, with fewer decimals as they grow.
pub(super) fn secs(s: f64) -> String {
    if s < 10.0 {
        format!("{s:.2} s")
    } else if s < 100.0 {
        format!("{s:.1} s")
    } else {
        format!("{s:.0} s")
    }
}

pub(super) fn ratio_text(r: &Ratio) -> String {
    format!("{:.2} ({:.2}-{:.2})", r.value, r.min, r.max)
}

/// A side's cell: median (min-max), and FAILED when a verdict did not pass.
pub(super) fn runs_text(r: &Runs) -> String {
    match r.stats {
        None => "-".into(),
        Some(s) => format!(
            "{} ({}-{}){}",
            secs(s.median_s),
            secs(s.min_s).trim_end_matches(" s"),
            secs(s.max_s).trim_end_matches(" s"),
            if r.all_passed { "" } else { " FAILED" }
        ),
    }
}

/// The comparison as a table: each figure's runs, medians, ranges and
/// ratio, then the goals, then what failed or is missing.
pub fn table(c: &Comparison) -> String {
    let short = &c.baseline_sha[..7.min(c.baseline_sha.len())];
    let mut t = format!(
        "head {} against {} ({}), interleaved; medians (min-max); ratio head/baseline \
         (best-worst pairing)\n",
        c.head, c.baseline_rev, c.baseline_sha
    );
    for w in &c.warm_up {
        let _ = writeln!(
            t,
            "untimed {}: {} {}{}",
            w.side.name(),
            w.command,
            secs(w.run.value_s),
            if w.run.all_passed { "" } else { " FAILED" }
        );
    }
    let _ = writeln!(
        t,
        "{:<40} {:>8} {:>26} {:>26} {:>20}",
        "figure",
        "runs b/h",
        format!("baseline {short}"),
        "head",
        "head/baseline"
    );
    for f in &c.figures {
        let _ = writeln!(
            t,
            "{:<40} {:>8} {:>26} {:>26} {:>20}",
            f.name,
            format!("{}/{}", f.baseline.runs.len(), f.head.runs.len()),
            runs_text(&f.baseline),
            runs_text(&f.head),
            f.ratio.as_ref().map_or_else(|| "-".into(), ratio_text)
        );
    }
    for f in c.figures.iter().filter(|f| f.key == Key::Cold) {
        for side in [Side::Baseline, Side::Head] {
            for r in &f.side(side).runs {
                let built: Vec<String> = r
                    .kernels
                    .iter()
                    .map(|k| format!("{} {} ({} objects)", k.tree, secs(k.seconds), k.objects))
                    .collect();
                let _ = writeln!(
                    t,
                    "cold run {} {}: kernels built: {}",
                    side.name(),
                    r.n,
                    if built.is_empty() {
                        "none reported".into()
                    } else {
                        built.join(", ")
                    }
                );
            }
        }
    }
    for g in &c.goals {
        let _ = writeln!(
            t,
            "goal, {}: {} = {} ≤ {}: {}",
            g.of,
            g.name,
            ratio_text(&g.ratio),
            g.goal,
            if g.met { "met" } else { "NOT met" }
        );
    }
    let failed: Vec<String> = c
        .figures
        .iter()
        .flat_map(|f| {
            [Side::Head, Side::Baseline].into_iter().flat_map(move |s| {
                f.side(s)
                    .runs
                    .iter()
                    .filter(|r| !r.all_passed)
                    .map(move |r| format!("{} {} run {}: {}", s.name(), f.name, r.n, r.log))
            })
        })
        .collect();
    for f in failed {
        let _ = writeln!(t, "!!! not all verdicts passed (timed all the same): {f}");
    }
    for m in &c.missing {
        let _ = writeln!(t, "!!! not measured: {m}");
    }
    t
}

/// The chart's panels: each figure's medians side by side with the ratio
/// beside the head's bar, then the goals' ratios.
pub fn panels(c: &Comparison) -> Vec<Panel> {
    let short = &c.baseline_sha[..7.min(c.baseline_sha.len())];
    let mut bars = Vec::new();
    for f in &c.figures {
        for side in [Side::Baseline, Side::Head] {
            let Some(s) = f.side(side).stats else {
                continue;
            };
            let failed = if f.side(side).all_passed {
                ""
            } else {
                ", FAILED"
            };
            let text = match (side, &f.ratio) {
                (Side::Head, Some(r)) => {
                    format!("{}{failed}   ×{}", secs(s.median_s), ratio_text(r))
                }
                _ => format!("{}{failed}", secs(s.median_s)),
            };
            bars.push(Bar {
                label: format!(
                    "{} ({})",
                    f.name,
                    if side == Side::Head { "head" } else { short }
                ),
                value: s.median_s,
                text,
                series: usize::from(side == Side::Head),
            });
        }
    }
    let goals = c
        .goals
        .iter()
        .map(|g| Bar {
            label: g.short.clone(),
            value: g.ratio.value,
            text: format!(
                "{}, goal ≤ {}: {}",
                ratio_text(&g.ratio),
                g.goal,
                if g.met { "met" } else { "not met" }
            ),
            series: if g.met { 2 } else { 3 },
        })
        .collect::<Vec<_>>();
    let mut out = vec![Panel {
        title: format!(
            "head {} against {short}: medians of interleaved runs, × = head/baseline",
            c.head
        ),
        unit: "s".into(),
        bars,
        goal: None,
        log: true,
    }];
    if !goals.is_empty() {
        out.push(Panel {
            title: "issue 22's ratios (best-worst pairing), each against its own goal".into(),
            unit: "×".into(),
            bars: goals,
            goal: None,
            log: false,
        });
    }
    out
}
