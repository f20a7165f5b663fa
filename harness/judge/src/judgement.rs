//! What judging a boot comes to: the verdict with its reason, what was timed, and the typed
//! findings the report and `bench` read; and a gate's or a rule's failure on the way.

use crate::accounting::Accounted;
use crate::figures::GuestFigures;
use crate::{dma, phases, sweep};
use serde::Serialize;
use vocab::verdict::{Cause, Timings, Verdict};

pub struct Judgement {
    pub verdict: Verdict,
    pub cause: Option<Cause>,
    pub reason: String,
    /// What a passing boot measured on the way (`remove_ms`, `unbind_ms`).
    pub timings: Timings,
    /// What the judge established, typed, for report.json and `bench`.
    pub findings: Findings,
}

/// What judging a boot established, beyond its verdict: read by the
/// report and `cargo xtask bench`, which need not parse the logs again.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Findings {
    /// Guest checks (KTAP results) that passed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub guest_checks: Option<usize>,
    /// How the device's log (and the MMIO oracle's) was accounted for, and its DMA log.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub accounted: Option<Accounting>,
    /// `bench`'s figures.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub figures: Option<GuestFigures>,
    /// Where the boot's time went (`phases`), whatever the verdict.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub phases: Option<phases::Phases>,
    /// Reports of Linux's own that this boot made and `known` excused.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub known: Vec<String>,
    /// The removal-point sweep's points, each with its outcome.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub sweep: Vec<sweep::PointResult>,
}

/// What the accounting matched and the DMA oracle counted in a boot with our device.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Accounting {
    #[serde(flatten)]
    pub accesses: Accounted,
    pub dma: dma::DmaFindings,
}

impl Findings {
    pub fn is_empty(&self) -> bool {
        *self == Findings::default()
    }
}

impl Judgement {
    pub fn fail(cause: Cause, reason: String) -> Self {
        Judgement {
            verdict: Verdict::Fail,
            cause: Some(cause),
            reason,
            timings: Timings::new(),
            findings: Findings::default(),
        }
    }

    /// A verdict reached without judging a boot (no boot, or a skip).
    pub fn plain(verdict: Verdict, reason: String) -> Self {
        Judgement {
            verdict,
            cause: None,
            reason,
            timings: Timings::new(),
            findings: Findings::default(),
        }
    }
}

/// Why a gate or a rule failed a boot: the verdict's cause and reason.
pub(crate) struct Failed {
    pub(crate) cause: Cause,
    pub(crate) reason: String,
}

impl Failed {
    pub(crate) fn new(cause: Cause, reason: String) -> Self {
        Failed { cause, reason }
    }
}
