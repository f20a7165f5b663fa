//! How a boot is judged. A verdict never rests on the guest's word alone:
//! besides the runner's KTAP, the kernel's own lines, the absence of any
//! splat and a clean poweroff all have to agree.

pub mod accounting;
pub mod acks;
mod checks;
pub mod config;
pub mod console;
pub mod device_log;
pub mod dma;
pub mod dma_core;
pub mod dma_lines;
pub mod driver;
mod driver_rules;
mod evidence;
pub mod figures;
mod gates;
pub mod known;
pub mod ktap;
pub mod kunit;
pub mod oracle;
pub mod phases;
pub mod platform;
pub mod requests;
pub mod rules;
pub mod sweep;
pub mod sweep_table;

use crate::accounting::Accounted;
#[cfg(test)]
use crate::device_log::Access;
use crate::device_log::Stopped;
use crate::figures::GuestFigures;
pub use evidence::{seal, unseal, Console, Sealed, ServerLogs};
pub use rules::{weaken, Rule};
use serde::Serialize;
use vocab::scenario::{Check, Scenario};
pub use vocab::verdict::Cause;
use vocab::verdict::{Timings, Verdict};

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

/// Judges one boot; `device` is what the device server left, when attached.
/// The findings carry the boot's phases, whatever the verdict.
pub fn judge(s: &Scenario, c: &Console, device: &[Stopped]) -> Judgement {
    let mut j = verdict(s, c, device);
    j.findings.phases = Some(c.phases.clone()).filter(|p| !p.is_empty());
    j
}

/// `judge` but for the phases.
fn verdict(s: &Scenario, c: &Console, device: &[Stopped]) -> Judgement {
    judged(s, c, device).unwrap_or_else(|f| Judgement::fail(f.cause, f.reason))
}

/// Why a gate or a rule failed a boot: the verdict's cause and reason.
pub(crate) struct Failed {
    cause: Cause,
    reason: String,
}

impl Failed {
    pub(crate) fn new(cause: Cause, reason: String) -> Self {
        Failed { cause, reason }
    }
}

/// The gates, the scenario's rules, the last gate: a pass, or the first failure.
fn judged(s: &Scenario, c: &Console, device: &[Stopped]) -> Result<Judgement, Failed> {
    let known_findings = gates::boot(s, c, device)?;
    if matches!(s.check, Check::Kunit | Check::KunitMainline) {
        return Ok(checks::judge_kunit(c, matches!(s.check, Check::Kunit)));
    }
    let text: Vec<&str> = c
        .lines
        .iter()
        .map(|l| console::strip_timestamp(l))
        .collect();
    let runner = gates::runner(s, c, &text)?;
    let mut findings = Findings {
        guest_checks: Some(runner.passed),
        ..Findings::default()
    };
    let mut timings = Timings::new();
    let mut backed = checks::scenario_rules(s, c, device, &text, &mut findings, &mut timings)?;
    gates::nothing_forged(c)?;
    for name in &known_findings {
        backed.push_str(&format!("; known finding, judged apart: {name}"));
    }
    findings.known = known_findings.iter().map(|n| n.to_string()).collect();
    Ok(Judgement {
        verdict: Verdict::Pass,
        cause: None,
        reason: format!(
            "{}/{} guest checks ok, {} kernel lines seen{backed}, powered off after {:.1} s",
            runner.passed,
            runner.planned.unwrap_or(runner.passed),
            s.kernel_lines.len(),
            c.elapsed.as_secs_f64()
        ),
        timings,
        findings,
    })
}

/// A device log entry for unit tests (its time is its number).
#[cfg(test)]
pub(crate) fn test_access(
    seq: u64,
    region: &str,
    offset: u64,
    size: u32,
    value: u64,
    kind: &str,
) -> Access {
    Access {
        seq,
        time_ns: seq,
        region: region.parse().unwrap(),
        offset,
        size,
        value: Some(value),
        kind: kind.parse().unwrap(),
        class: crate::device_log::Class::Ok,
        fault: None,
    }
}

#[cfg(test)]
mod tests;
