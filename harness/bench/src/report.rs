//! What a bench run reports: its figures, typed (bench.json is their serialisation), and the
//! goals they are held against.

use crate::baseline;
use rig::judge::figures::Mmio;
use rig::scenario;
use serde::Serialize;

/// The goals the figures are reported against.
pub const GOAL_DEVRES_RATIO: f64 = 1.05;
pub const GOAL_ACCESS_RATIO: f64 = 1.01;
pub const GOAL_EDIT_S: f64 = 12.0;
pub const GOAL_MATRIX_S: f64 = 90.0;
/// The MMIO oracle may slow a boot by at most this much (issue 14).
pub const GOAL_ORACLE_RATIO: f64 = 1.5;

/// The scenario the oracle's cost is measured on: the driver bound, its
/// worker busy, unbound, then the settle.
pub const ORACLE_SCENARIO: &scenario::Scenario = &scenario::UNBIND;

/// Wall times of repeated runs of one command.
#[derive(Debug, Serialize)]
pub struct Timed {
    pub command: String,
    pub runs_s: Vec<f64>,
    pub median_s: f64,
    pub goal_s: f64,
    /// Whether every run ended with all its verdicts passing.
    pub all_passed: bool,
    pub logs: Vec<String>,
}

#[derive(Debug, Serialize)]
pub struct BootTimes {
    pub arch: String,
    pub runs_s: Vec<f64>,
    pub median_s: f64,
}

#[derive(Debug, Serialize)]
pub struct MmioRow {
    #[serde(flatten)]
    pub mmio: Mmio,
    pub b_over_a: f64,
    pub c_over_a: f64,
    pub d_over_a: f64,
}

#[derive(Debug, Serialize)]
pub struct UnbindRow {
    pub k: u32,
    pub worker: &'static str,
    pub runs: usize,
    pub remove_ns: i64,
    pub total_ns: i64,
}

#[derive(Debug, Serialize)]
pub struct RevokeRow {
    pub k: u32,
    pub ns: i64,
}

/// Boot→verdict of [`ORACLE_SCENARIO`] on one arch with and without the
/// MMIO oracle (passing runs only).
#[derive(Debug, Serialize)]
pub struct OracleCost {
    pub arch: String,
    pub scenario: String,
    pub with_s: Vec<f64>,
    pub without_s: Vec<f64>,
    pub median_with_s: f64,
    pub median_without_s: f64,
    /// `median_with_s / median_without_s`.
    pub ratio: f64,
}

/// One arch's guest figures: medians over its `bench` boots.
#[derive(Debug, Serialize)]
pub struct GuestRow {
    pub arch: String,
    pub boots: usize,
    pub mmio: Vec<MmioRow>,
    pub unbind: Vec<UnbindRow>,
    pub revoke_each: Vec<RevokeRow>,
    pub window_kib_per_s: Option<f64>,
    /// Interrupt round trip, per mode: MSI from `bench`, INTx from `bench-intx` boots.
    pub irq: Vec<IrqRow>,
    /// DMA throughput per direction against a CPU copy of as many bytes (medians over boots).
    pub dma: Vec<DmaRow>,
    /// A one-page coherent allocation and its free, median over boots.
    pub dma_alloc_ns: Option<f64>,
}

/// DMA of our device's window one way, against the CPU copying as many bytes.
#[derive(Debug, Serialize)]
pub struct DmaRow {
    pub dir: String,
    pub bytes: u64,
    pub kib_per_s: f64,
    pub cpu_kib_per_s: f64,
}

/// Median interrupt round trip (INT_RAISE write to the hard handler) over boots.
#[derive(Debug, Serialize)]
pub struct IrqRow {
    pub mode: String,
    pub boots: usize,
    pub median_ns: i64,
}

#[derive(Debug, Serialize)]
pub struct Report {
    pub run_id: String,
    pub commit: String,
    pub cpus: usize,
    pub edit_verdict: Option<Timed>,
    pub warm_matrix: Option<Timed>,
    pub boot: Vec<BootTimes>,
    pub guest: Vec<GuestRow>,
    pub goals: Goals,
    pub oracle_cost: Vec<OracleCost>,
    /// The removal-point sweep's points per minute, per arch.
    pub sweep: Vec<SweepPace>,
    /// `--baseline REV`: head against REV, interleaved (the head-only
    /// figures above are then not measured).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub baseline: Option<baseline::Comparison>,
}

/// The removal-point sweep's pace on one arch: `sweep_pace_points()` in one boot.
#[derive(Debug, Serialize)]
pub struct SweepPace {
    pub arch: String,
    pub points: usize,
    /// The boot's scenario phase (its points, each a faulted and a clean binding).
    pub scenario_s: f64,
    pub boot_s: f64,
    pub points_per_min: f64,
    pub passed: bool,
}

#[derive(Debug, Serialize)]
pub struct Goals {
    pub devres_ratio_on_pci_testdev: f64,
    pub access_ratio_on_pci_testdev: f64,
    pub edit_verdict_s: f64,
    pub warm_matrix_s: f64,
    pub oracle_ratio: f64,
}
