//! A figure's runs on both sides: median and range, the ratio head/baseline, the goals.

use super::model::{Key, Run, Side, Wall};
use rig::arch::Arch;
use rig::judge::figures::median;
use serde::Serialize;

/// Median, smallest and largest of a side's runs.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Stats {
    pub median_s: f64,
    pub min_s: f64,
    pub max_s: f64,
}

impl Stats {
    pub fn of(values: &[f64]) -> Option<Stats> {
        Some(Stats {
            median_s: median(values.to_vec())?,
            min_s: values.iter().copied().fold(f64::INFINITY, f64::min),
            max_s: values.iter().copied().fold(f64::NEG_INFINITY, f64::max),
        })
    }
}

/// `a / b`: the medians' ratio, and its range: the best pairing (a's
/// fastest over b's slowest) and the worst (a's slowest over b's fastest).
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Ratio {
    pub value: f64,
    pub min: f64,
    pub max: f64,
}

pub fn ratio(a: Stats, b: Stats) -> Option<Ratio> {
    (b.min_s > 0.0).then(|| Ratio {
        value: a.median_s / b.median_s,
        min: a.min_s / b.max_s,
        max: a.max_s / b.min_s,
    })
}

/// One side's runs of a figure.
#[derive(Debug, Default, Serialize)]
pub struct Runs {
    pub runs_s: Vec<f64>,
    pub stats: Option<Stats>,
    /// Every run's verdicts passed.
    pub all_passed: bool,
    pub runs: Vec<Run>,
}

impl Runs {
    pub(super) fn finish(&mut self) {
        self.runs_s = self.runs.iter().map(|r| r.value_s).collect();
        self.stats = Stats::of(&self.runs_s);
        self.all_passed = self.runs.iter().all(|r| r.all_passed);
    }
}

/// A figure measured on both sides, and head/baseline.
#[derive(Debug, Serialize)]
pub struct Figure {
    pub name: String,
    #[serde(skip)]
    pub key: Key,
    pub command: String,
    pub head: Runs,
    pub baseline: Runs,
    /// Head over baseline, with its range.
    pub ratio: Option<Ratio>,
}

impl Figure {
    pub(super) fn new(key: Key, command: String) -> Figure {
        Figure {
            name: key.name(),
            key,
            command,
            head: Runs::default(),
            baseline: Runs::default(),
            ratio: None,
        }
    }

    pub fn side(&self, side: Side) -> &Runs {
        match side {
            Side::Head => &self.head,
            Side::Baseline => &self.baseline,
        }
    }

    pub(super) fn side_mut(&mut self, side: Side) -> &mut Runs {
        match side {
            Side::Head => &mut self.head,
            Side::Baseline => &mut self.baseline,
        }
    }

    /// Statistics and the ratio, once every run is in.
    pub(super) fn finish(&mut self) {
        self.head.finish();
        self.baseline.finish();
        self.ratio = self
            .head
            .stats
            .zip(self.baseline.stats)
            .and_then(|(h, b)| ratio(h, b));
    }
}

/// A ratio issue 22 sets a goal for, from figures of the same run.
#[derive(Debug, Serialize)]
pub struct Goal {
    pub name: String,
    /// The chart's label.
    #[serde(skip)]
    pub short: String,
    /// `head/baseline`, or the side both figures are of.
    pub of: String,
    pub ratio: Ratio,
    pub goal: f64,
    pub met: bool,
}

/// The goals' ratios; one whose figures are missing is left out.
pub fn goals(figures: &[Figure]) -> Vec<Goal> {
    let find = |k: Key| figures.iter().find(|f| f.key == k);
    let mut out = Vec::new();
    let mut push = |name: String, short: String, of: &str, r: Option<Ratio>, goal: f64| {
        if let Some(ratio) = r {
            out.push(Goal {
                name,
                short: format!("{short}, {of}"),
                of: of.into(),
                ratio,
                goal,
                met: ratio.value <= goal,
            });
        }
    };
    for (k, short, goal) in [
        (Key::Matrix, "warm matrix", 0.5),
        (Key::SameMatrix, "warm matrix, same scenarios", 0.5),
        (Key::Edit(Arch::X86_64), "edit x86_64", 0.5),
        (Key::Cold, "cold", 0.65),
    ] {
        push(
            k.name(),
            short.into(),
            "head/baseline",
            find(k).and_then(|f| f.ratio),
            goal,
        );
    }
    // Two figures of one side: their medians' ratio and its range.
    let within = |num: Key, den: Key, side: Side| {
        let stats = |k: Key| find(k).and_then(|f| f.side(side).stats);
        stats(num).zip(stats(den)).and_then(|(n, d)| ratio(n, d))
    };
    for side in [Side::Head, Side::Baseline] {
        for wall in [Wall::Scenario, Wall::Command] {
            let boot = Key::Boot(Arch::X86_64, wall);
            push(
                format!("{} / {}", Key::Edit(Arch::X86_64).name(), boot.name()),
                format!("edit / boot x86_64 ({})", wall.name()),
                side.name(),
                within(Key::Edit(Arch::X86_64), boot, side),
                1.5,
            );
        }
        for wall in [Wall::Scenario, Wall::Command] {
            let (x86, arm) = (Key::Boot(Arch::X86_64, wall), Key::Boot(Arch::Arm64, wall));
            push(
                format!("{} / {}", x86.name(), arm.name()),
                format!("boot x86_64 / arm64 ({})", wall.name()),
                side.name(),
                within(x86, arm, side),
                1.5,
            );
        }
    }
    out
}

#[derive(Debug, Serialize)]
pub struct Comparison {
    pub baseline_rev: String,
    pub baseline_sha: String,
    /// Where the baseline ran: its worktree.
    pub baseline_tree: String,
    /// `git describe --always --dirty` of the checkout.
    pub head: String,
    pub head_sha: String,
    pub warm_up: Vec<WarmUp>,
    pub figures: Vec<Figure>,
    pub goals: Vec<Goal>,
    /// Measurements that could not be taken (the bench then fails).
    pub missing: Vec<String>,
}

/// An untimed run, for the record.
#[derive(Debug, Serialize)]
pub struct WarmUp {
    pub side: Side,
    pub command: String,
    pub run: Run,
}
