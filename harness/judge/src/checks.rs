//! The scenario's own rules, by its check: user space's accesses against the device's log,
//! the bench's figures, the platform and cpufreq modules, upstream's PCI sample, the sweep, our
//! driver (`driver_rules`), and KUnit.

use crate::device_log::{self as device, Stopped};
use crate::driver_rules::{judge_driver, judge_sweep};
use crate::evidence::Console;
use crate::figures::GuestFigures;
use crate::judgement::{Accounting, Failed, Findings, Judgement};
use crate::{accounting, dma, driver, kunit, oracle, platform};
use vocab::scenario::{Check, Scenario};
use vocab::verdict::{Cause, Timings, Verdict};

/// The rules of `s`'s check over the boot (`text`: its console without printk stamps): the
/// summary they add to the verdict's reason; what they established goes into `findings` and
/// `timings`.
pub(crate) fn scenario_rules(
    s: &Scenario,
    c: &Console,
    device: &[Stopped],
    text: &[&str],
    findings: &mut Findings,
    timings: &mut Timings,
) -> Result<String, Failed> {
    let mut backed = String::new();
    if matches!(s.check, Check::UserSpace) {
        match account_user_space(c, device) {
            Ok((summary, n)) => {
                backed = summary;
                findings.accounted = Some(n);
            }
            Err(e) => return Err(Failed::new(Cause::Device, e)),
        }
    }
    if matches!(s.check, Check::Bench) {
        match GuestFigures::parse(text).and_then(|g| g.check_complete().map(|()| g)) {
            Ok(g) => {
                backed.push_str(&format!("; {}", g.summary()));
                findings.figures = Some(g);
            }
            Err(e) => return Err(Failed::new(Cause::Checks, e)),
        }
    }
    let platform = match s.check {
        Check::Platform => Some(judge_platform(c, text)),
        Check::UpstreamPci { bindings } => Some(match &c.oracle {
            None => Err("the MMIO oracle did not watch this boot".to_string()),
            Some(Err(e)) => Err(format!("MMIO oracle: {e}")),
            Some(Ok(log)) => oracle::sample::judge(log, text, bindings),
        }),
        Check::Cpufreq => Some(crate::platform::judge_cpufreq(text)),
        _ => None,
    };
    match platform {
        Some(Ok(summary)) => backed.push_str(&summary),
        Some(Err(e)) => return Err(Failed::new(Cause::Checks, e)),
        None => {}
    }
    if matches!(s.check, Check::Module { .. }) {
        match crate::foreign::judge(c, device) {
            Ok(summary) => backed.push_str(&summary),
            Err(e) => return Err(Failed::new(Cause::Device, e)),
        }
    }
    if matches!(s.check, Check::Sweep(_)) {
        match judge_sweep(s.name, c, device) {
            Ok((summary, n, points)) => {
                backed.push_str(&summary);
                findings.accounted = Some(n);
                findings.sweep = points;
            }
            Err(e) => return Err(Failed::new(Cause::Device, e)),
        }
    }
    if s.iommu && c.arch.has_viommu() && !dma::behind_iommu(&c.lines) {
        return Err(Failed::new(
            Cause::Checks,
            format!(
                "{} boots behind the vIOMMU on {}, and the guest put no device into an IOMMU group: its DMA checks would lack the IOMMU's witness",
                s.name,
                c.arch.name()
            ),
        ));
    }
    if let Some(want) = s.driver() {
        match judge_driver(want, c, device) {
            Ok((summary, n)) => {
                backed.push_str(&summary);
                findings.accounted = Some(n);
            }
            Err(e) => return Err(Failed::new(Cause::Device, e)),
        }
        let cycles = match (want.sleeps, want.runtime_sleeps) {
            (0, 0) => None,
            (0, n) => Some(crate::pm::Cycles::Runtime(n)),
            (n, _) => Some(crate::pm::Cycles::System(n)),
        };
        if let Some(cycles) = cycles {
            match crate::pm::judge(c, device, cycles) {
                Ok(summary) => backed.push_str(&summary),
                Err(e) => return Err(Failed::new(Cause::Device, e)),
            }
        }
        // The first unbind is the one unbind and unplug scenarios are about.
        let first = |to| {
            driver::between_ms(&c.lines, "remove_begin", to)
                .first()
                .copied()
        };
        if let Some(ms) = first("remove_done") {
            backed.push_str(&format!(", remove() took {ms:.1} ms"));
            timings.insert("remove_ms", ms);
        }
        if let Some(ms) = first("worker_stopped") {
            backed.push_str(&format!(
                ", the worker joined {ms:.1} ms after remove() began"
            ));
            timings.insert("unbind_ms", ms);
        }
    }
    Ok(backed)
}

/// User space alone touched the device (no driver of ours): every access it
/// reports is the device's next one, and the device saw nothing else.
pub(crate) fn account_user_space(
    c: &Console,
    device: &[Stopped],
) -> Result<(String, Accounting), String> {
    let history = driver::history(&c.lines)?;
    let n = accounting::account(&history, &device::access_logs(device))?;
    let seen = oracle::of_boot(c.oracle.as_ref(), &c.lines, &history, device)?;
    let dma = dma::check(&history, &n, device, dma::behind_iommu(&c.lines))?;
    let seen = format!("{seen}{}", dma.summary());
    if n.user == 0 || n.bindings > 0 {
        return Err(format!(
            "expected MMIO reports from user space only, got {} from user space and {} driver bindings",
            n.user, n.bindings
        ));
    }
    let summary = format!(
        ", the device log holds exactly the {} reported MMIO accesses, in order{seen}",
        n.user
    );
    Ok((summary, Accounting { accesses: n, dma }))
}

/// `platform`: the kernel's lines (`platform::judge_platform`), then the MMIO
/// oracle's view of the node's window, when it was loaded.
pub(crate) fn judge_platform(c: &Console, text: &[&str]) -> Result<String, String> {
    let mut summary = platform::judge_platform(text)?;
    match &c.oracle {
        None => {}
        Some(Err(e)) => return Err(format!("MMIO oracle: {e}")),
        Some(Ok(log)) => {
            let window = (platform::window(text)?, vocab::devicetree::DEMO_WINDOW_LEN);
            let reads = platform::platform_reads(text)?;
            summary.push_str(&oracle::judge_window(log, &c.lines, window, &reads)?);
        }
    }
    Ok(summary)
}

/// KUnit's rules (`kunit::judge`).
/// `ours`: the 6.12 line, whose modules of ours must each run exactly their doctests.
pub(crate) fn judge_kunit(c: &Console, ours: bool) -> Judgement {
    match kunit::judge(&c.lines, kunit::EXPECTED_SKIPS, c.arch, ours) {
        Ok(summary) => Judgement {
            verdict: Verdict::Pass,
            cause: None,
            reason: summary,
            timings: Timings::new(),
            findings: Findings::default(),
        },
        Err(e) => Judgement::fail(Cause::Checks, e),
    }
}
