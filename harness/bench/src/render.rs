//! How a bench run reads: the printed table, each figure beside its goal, and the picture.

use crate::baseline;
use crate::report::{OracleCost, Report, UnbindRow};
use crate::report::{GOAL_ACCESS_RATIO, GOAL_DEVRES_RATIO, GOAL_ORACLE_RATIO, ORACLE_SCENARIO};
use crate::svg::{self, Bar, Panel};
use std::fmt::Write as _;

pub(crate) fn met(value: f64, goal: f64) -> &'static str {
    if value <= goal {
        "met"
    } else {
        "missed"
    }
}

pub(crate) fn ms(ns: i64) -> String {
    let ms = ns as f64 / 1e6;
    if ms >= 100.0 {
        format!("{ms:.0}")
    } else {
        format!("{ms:.1}")
    }
}

pub(crate) fn ns_text(ns: i64) -> String {
    if ns >= 10_000 {
        format!("{:.1} µs", ns as f64 / 1e3)
    } else {
        format!("{ns} ns")
    }
}

/// The printed table: one line per figure, with its goal where it has one;
/// with `--baseline`, the comparison's table.
pub fn table(r: &Report) -> String {
    if let Some(c) = &r.baseline {
        return format!(
            "bench {} (commit {}, {} CPUs)\n{}",
            r.run_id,
            r.commit,
            r.cpus,
            baseline::table(c)
        );
    }
    let mut t = format!(
        "bench {} (commit {}, {} CPUs)\n{:<44} {:<58} {}\n",
        r.run_id, r.commit, r.cpus, "figure", "value", "goal"
    );
    let mut row = |what: String, value: String, goal: String| {
        let _ = writeln!(t, "{what:<44} {value:<58} {goal}");
    };
    if let Some(e) = &r.edit_verdict {
        let runs: Vec<String> = e.runs_s.iter().map(|s| format!("{s:.1}")).collect();
        row(
            format!("edit→verdict (median of {})", e.runs_s.len()),
            format!("{:.1} s (runs {})", e.median_s, runs.join(", ")),
            format!("≤ {} s: {}", e.goal_s, met(e.median_s, e.goal_s)),
        );
    }
    if let Some(m) = &r.warm_matrix {
        row(
            "warm matrix (cargo xtask test)".into(),
            format!(
                "{:.1} s{}",
                m.median_s,
                if m.all_passed {
                    ""
                } else {
                    " (a verdict failed)"
                }
            ),
            format!("≤ {} s: {}", m.goal_s, met(m.median_s, m.goal_s)),
        );
    }
    for b in &r.boot {
        row(
            format!("boot→verdict {} (median of {})", b.arch, b.runs_s.len()),
            format!("{:.2} s", b.median_s),
            String::new(),
        );
    }
    for p in &r.sweep {
        row(
            format!("sweep pace {} ({} points, one boot)", p.arch, p.points),
            format!(
                "{:.0} points/min ({:.1} s of scenario, {:.1} s boot){}",
                p.points_per_min,
                p.scenario_s,
                p.boot_s,
                if p.passed { "" } else { " (FAILED)" }
            ),
            String::new(),
        );
    }
    for c in &r.oracle_cost {
        row(
            format!(
                "MMIO oracle cost {} {} (median of {}/{})",
                c.arch,
                c.scenario,
                c.with_s.len(),
                c.without_s.len()
            ),
            format!(
                "{:.2}×: {:.2} s with, {:.2} s without",
                c.ratio, c.median_with_s, c.median_without_s
            ),
            format!(
                "≤ {GOAL_ORACLE_RATIO}×: {}",
                met(c.ratio, GOAL_ORACLE_RATIO)
            ),
        );
    }
    for g in &r.guest {
        for m in &g.mmio {
            row(
                format!("MMIO read {} {}", g.arch, m.mmio.device),
                format!(
                    "raw {}, b/a {:.3}, c/a {:.3}, d/a {:.3}",
                    ns_text(m.mmio.raw_ns),
                    m.b_over_a,
                    m.c_over_a,
                    m.d_over_a
                ),
                if m.mmio.device == "pci-testdev" {
                    format!(
                        "b/a ≤ {GOAL_DEVRES_RATIO}: {}; d/a ≤ {GOAL_ACCESS_RATIO}: {}",
                        met(m.b_over_a, GOAL_DEVRES_RATIO),
                        met(m.d_over_a, GOAL_ACCESS_RATIO)
                    )
                } else {
                    String::new()
                },
            );
        }
        if !g.irq.is_empty() {
            let trips: Vec<String> = g
                .irq
                .iter()
                .map(|t| format!("{} {}", t.mode, ns_text(t.median_ns)))
                .collect();
            row(
                format!("interrupt round trip {}", g.arch),
                trips.join(", "),
                String::new(),
            );
        }
        for worker in ["idle", "busy"] {
            let rows: Vec<&UnbindRow> = g.unbind.iter().filter(|u| u.worker == worker).collect();
            if rows.is_empty() {
                continue;
            }
            let total: Vec<String> = rows.iter().map(|u| ms(u.total_ns)).collect();
            let remove: Vec<String> = rows
                .iter()
                .map(|u| format!("{:.1}", u.remove_ns as f64 / 1e3))
                .collect();
            row(
                format!("unbind {} k=1/16/64, worker {worker}", g.arch),
                format!(
                    "total {} ms; remove() {} µs",
                    total.join("/"),
                    remove.join("/")
                ),
                String::new(),
            );
        }
        if !g.revoke_each.is_empty() {
            let each: Vec<String> = g.revoke_each.iter().map(|r| ms(r.ns)).collect();
            row(
                format!("revoke one by one {} k=1/16/64", g.arch),
                format!("{} ms", each.join("/")),
                String::new(),
            );
        }
        for d in &g.dma {
            row(
                format!("DMA {} {} ({} KiB)", d.dir, g.arch, d.bytes / 1024),
                format!("{:.0} KiB/s", d.kib_per_s),
                format!("CPU copy {:.0} KiB/s", d.cpu_kib_per_s),
            );
        }
        if let Some(ns) = g.dma_alloc_ns {
            row(
                format!("coherent alloc+free {} (4 KiB)", g.arch),
                format!("{:.1} µs", ns / 1e3),
                String::new(),
            );
        }
    }
    t
}

/// The picture: turnaround, MMIO cost and ratios, unbind cost; with
/// `--baseline`, head against the baseline per figure and the goals' ratios.
pub fn picture(r: &Report) -> String {
    let mut panels = r
        .baseline
        .as_ref()
        .map(baseline::panels)
        .unwrap_or_default();
    let bar = |label: String, value: f64, text: String, series: usize| Bar {
        label,
        value,
        text,
        series,
    };
    let mut turnaround = Vec::new();
    if let Some(e) = &r.edit_verdict {
        for (i, s) in e.runs_s.iter().enumerate() {
            turnaround.push(bar(
                format!("edit→verdict run {}", i + 1),
                *s,
                format!("{s:.1} s"),
                0,
            ));
        }
        turnaround.push(bar(
            "edit→verdict median".into(),
            e.median_s,
            format!("{:.1} s", e.median_s),
            1,
        ));
    }
    for b in &r.boot {
        turnaround.push(bar(
            format!("boot→verdict {}", b.arch),
            b.median_s,
            format!("{:.2} s", b.median_s),
            2,
        ));
    }
    if !turnaround.is_empty() {
        panels.push(Panel {
            title: "Turnaround (goal: edit→verdict ≤ 12 s)".into(),
            unit: "s".into(),
            bars: turnaround,
            goal: r
                .edit_verdict
                .as_ref()
                .map(|e| (e.goal_s, format!("{} s", e.goal_s))),
            log: false,
        });
    }
    if let Some(m) = &r.warm_matrix {
        panels.push(Panel {
            title: format!("Warm matrix: {}", m.command),
            unit: "s".into(),
            bars: vec![bar(
                "wall time".into(),
                m.median_s,
                format!("{:.1} s", m.median_s),
                1,
            )],
            goal: Some((m.goal_s, format!("goal {} s", m.goal_s))),
            log: false,
        });
    }
    if !r.oracle_cost.is_empty() {
        panels.push(oracle_panel(&r.oracle_cost));
    }
    let mut cost = Vec::new();
    let mut overhead = Vec::new();
    for g in &r.guest {
        for m in &g.mmio {
            for (way, ns, series) in [
                ("raw", m.mmio.raw_ns, 0),
                ("Devres per read", m.mmio.devres_ns, 1),
                ("one guard", m.mmio.guard_ns, 2),
                ("Devres::access per read", m.mmio.access_ns, 3),
            ] {
                cost.push(bar(
                    format!("{} {} {way}", g.arch, m.mmio.device),
                    ns as f64,
                    ns_text(ns),
                    series,
                ));
            }
            for (name, ratio, series) in [
                ("b", m.b_over_a, 1),
                ("c", m.c_over_a, 2),
                ("d", m.d_over_a, 3),
            ] {
                let percent = (ratio - 1.0) * 100.0;
                overhead.push(bar(
                    format!("{} {} {name}/a", g.arch, m.mmio.device),
                    percent.max(0.0),
                    format!("{percent:+.1} %"),
                    series,
                ));
            }
        }
    }
    if !cost.is_empty() {
        panels.push(Panel {
            title: "MMIO register read, ns per read (median)".into(),
            unit: "ns".into(),
            bars: cost,
            goal: None,
            log: true,
        });
        panels.push(Panel {
            title: "MMIO overhead over raw Io: b = try_access per read, c = one guard for the \
                    loop, d = Devres::access per read"
                .into(),
            unit: "%".into(),
            bars: overhead,
            goal: Some((
                (GOAL_DEVRES_RATIO - 1.0) * 100.0,
                format!("b/a goal {GOAL_DEVRES_RATIO}"),
            )),
            log: false,
        });
    }
    let mut unbind = Vec::new();
    for g in &r.guest {
        for u in &g.unbind {
            unbind.push(bar(
                format!("{} unbind k={} worker {}", g.arch, u.k, u.worker),
                u.total_ns as f64 / 1e6,
                format!("{} ms", ms(u.total_ns)),
                usize::from(u.worker == "busy"),
            ));
        }
        for e in &g.revoke_each {
            unbind.push(bar(
                format!("{} revoke one by one k={}", g.arch, e.k),
                e.ns as f64 / 1e6,
                format!("{} ms", ms(e.ns)),
                3,
            ));
        }
    }
    let dma: Vec<Bar> = r
        .guest
        .iter()
        .flat_map(|g| {
            g.dma.iter().flat_map(move |d| {
                [
                    bar(
                        format!("{} DMA {}", g.arch, d.dir),
                        d.kib_per_s,
                        format!("{:.0} KiB/s", d.kib_per_s),
                        0,
                    ),
                    bar(
                        format!("{} CPU copy ({})", g.arch, d.dir),
                        d.cpu_kib_per_s,
                        format!("{:.0} KiB/s", d.cpu_kib_per_s),
                        1,
                    ),
                ]
            })
        })
        .collect();
    if !dma.is_empty() {
        panels.push(Panel {
            title: "DMA of the 64 KiB window vs the CPU copying as many bytes".into(),
            unit: "KiB/s".into(),
            bars: dma,
            goal: None,
            log: true,
        });
    }
    if !unbind.is_empty() {
        panels.push(Panel {
            title: "Unbind: remove() start → last Devres released, vs a grace period per resource"
                .into(),
            unit: "ms".into(),
            bars: unbind,
            goal: None,
            log: true,
        });
    }
    svg::render(
        "pci-rig bench",
        &format!(
            "run {}, commit {}, {} CPUs, TCG",
            r.run_id, r.commit, r.cpus
        ),
        &panels,
    )
}

/// The oracle's cost per arch: boot→verdict with it over without.
pub(crate) fn oracle_panel(costs: &[OracleCost]) -> Panel {
    Panel {
        title: format!(
            "MMIO oracle: boot→verdict with the plugin / without ({})",
            ORACLE_SCENARIO.name
        ),
        unit: "×".into(),
        bars: costs
            .iter()
            .map(|c| Bar {
                label: format!("{} with / without", c.arch),
                value: c.ratio,
                text: format!(
                    "{:.2}× ({:.2} s / {:.2} s)",
                    c.ratio, c.median_with_s, c.median_without_s
                ),
                series: 4,
            })
            .collect(),
        goal: Some((GOAL_ORACLE_RATIO, format!("goal {GOAL_ORACLE_RATIO}×"))),
        log: false,
    }
}
