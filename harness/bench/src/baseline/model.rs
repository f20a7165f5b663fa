//! The words of the comparison: the two sides, what a figure measures, a timed run.

use super::reports::{Counts, KernelBuild};
use rig::arch::Arch;
use serde::Serialize;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Side {
    Head,
    Baseline,
}

impl Side {
    pub fn name(self) -> &'static str {
        match self {
            Side::Head => "head",
            Side::Baseline => "baseline",
        }
    }

    pub(super) fn other(self) -> Side {
        match self {
            Side::Head => Side::Baseline,
            Side::Baseline => Side::Head,
        }
    }
}

/// Which of a `boot` run's two walls.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Wall {
    /// `cargo xtask test …` spawned to its exit.
    Command,
    /// The boot's `duration_s` in the run's report.json.
    Scenario,
}

/// What a figure measures.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Key {
    Boot(Arch, Wall),
    Edit(Arch),
    Matrix,
    /// Head's matrix of the baseline's scenarios against the baseline's.
    SameMatrix,
    Cold,
}

impl Wall {
    pub(super) fn name(self) -> &'static str {
        match self {
            Wall::Command => "command",
            Wall::Scenario => "scenario wall",
        }
    }
}

impl Key {
    pub fn name(self) -> String {
        match self {
            Key::Boot(a, w) => format!("boot {a} alone ({})", w.name()),
            Key::Edit(a) => format!("edit → verdict {a}"),
            Key::Matrix => "warm matrix".into(),
            Key::SameMatrix => "warm matrix, the baseline's scenarios".into(),
            Key::Cold => "cold (fresh clone, empty cache)".into(),
        }
    }
}

/// One command spawned and timed.
#[derive(Clone, Debug, Serialize)]
pub struct Run {
    pub n: usize,
    /// The figure's value: the command's wall, or the scenario's duration.
    pub value_s: f64,
    pub exit_ok: bool,
    /// From the run's report.json (none when it printed no `report:` line).
    pub counts: Option<Counts>,
    /// It exited 0 and its report holds no failed verdict.
    pub all_passed: bool,
    /// The run folder it wrote.
    pub run_dir: Option<String>,
    pub log: String,
    /// The kernels it built (a cold run: every line's, 6.12's and mainline's, each apart).
    pub kernels: Vec<KernelBuild>,
}
