//! How a boot is judged. A verdict never rests on the guest's word alone:
//! besides the runner's KTAP, the kernel's own lines, the absence of any
//! splat and a clean poweroff all have to agree.

pub mod accounting;
pub mod acks;
pub mod aer;
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
pub mod foreign;
mod gates;
mod judgement;
pub mod known;
pub mod ktap;
pub mod kunit;
pub mod oracle;
pub mod phases;
pub mod platform;
pub mod pm;
pub mod requests;
pub mod rules;
pub mod shutdown;
pub mod sweep;
pub mod sweep_table;
pub mod warnings;

use crate::device_log::Stopped;
pub use evidence::{seal, unseal, Console, Sealed, ServerLogs};
use judgement::Failed;
pub use judgement::{Accounting, Findings, Judgement};
pub use rules::{weaken, Rule};
use vocab::scenario::{Check, Scenario};
pub use vocab::verdict::Cause;
use vocab::verdict::{Timings, Verdict};

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

/// The gates, the scenario's rules, the last gate: a pass, or the first failure.
fn judged(s: &Scenario, c: &Console, device: &[Stopped]) -> Result<Judgement, Failed> {
    let known_findings = gates::boot(s, c, device)?;
    let warned = rules::rule_on(Rule::DeviceWarnings)
        .then(|| warnings::unexpected(s, &c.lines))
        .flatten();
    if let Some(line) = warned {
        return Err(Failed::new(
            Cause::Checks,
            format!("the kernel warned about our device, and no rule expects it: {line}"),
        ));
    }
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

#[cfg(test)]
mod tests;
