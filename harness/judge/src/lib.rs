//! How a boot is judged. A verdict never rests on the guest's word alone:
//! besides the runner's KTAP, the kernel's own lines, the absence of any
//! splat and a clean poweroff all have to agree.

pub mod accounting;
pub mod acks;
pub mod config;
pub mod console;
pub mod device_log;
pub mod dma;
pub mod dma_core;
pub mod dma_lines;
pub mod driver;
mod evidence;
pub mod figures;
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

use crate::device_log::{self as device, Access, Stopped};
use crate::figures::GuestFigures;
use accounting::Accounted;
use console::Origin;
pub use evidence::{seal, unseal, Console, Sealed, ServerLogs};
use ktap::Line;
use requests::{GuestRequest, HostAction, DONE, SETTLED};
use rules::rule_on;
pub use rules::{weaken, Rule};
use serde::Serialize;
use vocab::scenario::{Check, DriverExpect, IrqMode, Scenario, WorkerStop, STORM_IRQS};
pub use vocab::verdict::Cause;
use vocab::verdict::{Timings, Verdict};

/// Software interrupts each probe's self-test raises (`step irq`).
const SELFTEST_SOFT_IRQS: usize = 10;

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
    let text: Vec<&str> = c
        .lines
        .iter()
        .map(|l| console::strip_timestamp(l))
        .collect();
    // Every report fails the boot, but one Linux itself makes on this
    // scenario's path (`known`), which is named in the verdict instead.
    let mut known_findings: Vec<&str> = Vec::new();
    for (kind, line, excerpt) in console::splats(&c.lines) {
        match known::known(s, kind, &excerpt) {
            Some(k) => known_findings.push(k.name),
            None => {
                return Judgement::fail(
                    Cause::Splat(kind),
                    format!("{}: {line}\n{excerpt}", kind.name()),
                )
            }
        }
    }
    // Every rule below reads the console as the whole story: one with holes proves nothing.
    let dropped = console::dropped_messages(&c.lines);
    if dropped > 0 {
        return Judgement::fail(
            Cause::Checks,
            format!(
                "the kernel dropped {dropped} console messages (`printk messages dropped`): \
                 the console is not the whole story, so no verdict can rest on it; the guest \
                 printed faster than its serial port drains"
            ),
        );
    }
    if !c.host_failures.is_empty() {
        return Judgement::fail(
            Cause::Host,
            format!(
                "the host failed the guest's requests:\n{}",
                c.host_failures.join("\n")
            ),
        );
    }
    // The sweep's unplug points: the host unplugs when their fault strikes.
    let struck_unplugs = match s.check {
        Check::Sweep(_) => sweep::points(&c.lines)
            .unwrap_or_default()
            .iter()
            .filter(|p| p.kind == qemu_device::model::FaultKind::Unplug)
            .count(),
        _ => 0,
    };
    let asked = requests::in_console(&c.lines)
        .filter(|r| *r == Ok(GuestRequest::Host(HostAction::Unplug)))
        .count()
        + struck_unplugs;
    let deleted = c.events.iter().filter(|e| device::deleted(e)).count();
    if deleted != asked && !c.timed_out {
        return Judgement::fail(
            Cause::Host,
            format!(
                "the guest asked for {asked} unplugs of our device, QEMU reported DEVICE_DELETED {deleted} times"
            ),
        );
    }
    // A server ends by itself, cleanly, when QEMU hangs up (the guest powered
    // off, or its device was unplugged), which may come before the harness
    // stops it; only a failed exit is a death.
    if let Some(status) = device
        .iter()
        .filter_map(|d| d.died)
        .find(|st| !st.success())
    {
        return Judgement::fail(
            Cause::Device,
            format!("the device server died during the boot ({status}); see device-stderr.log"),
        );
    }
    if c.timed_out {
        let last = c.lines.len().saturating_sub(8);
        return Judgement::fail(
            Cause::Timeout,
            format!(
                "timeout after {} s without powering off (last line: {})\n{}",
                s.timeout.as_secs(),
                c.lines
                    .last()
                    .map_or("none", |l| console::strip_timestamp(l)),
                c.lines[last..].join("\n")
            ),
        );
    }
    match c.exit {
        Some(status) if status.success() => {}
        Some(status) => {
            return Judgement::fail(
                Cause::Host,
                format!("QEMU exited with a failure ({status}); see qemu-stderr.log"),
            )
        }
        None => return Judgement::fail(Cause::Host, "QEMU's exit status is unknown".into()),
    }
    if c.syslog && !c.lines.iter().any(|l| console::origin(l) == Origin::Kernel) {
        return Judgement::fail(
            Cause::Checks,
            "the kernel was asked to mark its lines (console_msg_format=syslog), but no console line carries its <N> prefix: kernel lines cannot be told from user space's".into(),
        );
    }
    if matches!(s.check, Check::Kunit | Check::KunitMainline) {
        return judge_kunit(c, matches!(s.check, Check::Kunit));
    }
    let mut plan = None;
    let mut results = Vec::new();
    for l in &text {
        match ktap::parse_line(l) {
            Some(Line::Plan { depth: 0, count }) => plan = Some(count),
            Some(Line::Result(r)) if r.depth == 0 => results.push(r),
            _ => {}
        }
    }
    // Every check of the runner must pass: a skipped one proved nothing.
    let failed: Vec<String> = results
        .iter()
        .filter(|r| !r.ok || r.skip)
        .map(|r| {
            let verdict = if r.ok { "ok" } else { "not ok" };
            format!("{verdict} {} {} # {}", r.number, r.name, r.directive)
        })
        .collect();
    if !failed.is_empty() {
        return Judgement::fail(
            Cause::Checks,
            format!("guest checks failed or skipped:\n{}", failed.join("\n")),
        );
    }
    if let Some(n) = plan {
        if results.len() != n {
            return Judgement::fail(
                Cause::Checks,
                format!("guest planned {n} checks but reported {}", results.len()),
            );
        }
    }
    // Only the kernel's own lines count: user space can write any text.
    let kernel_text: Vec<&str> = c
        .lines
        .iter()
        .filter(|l| !c.syslog || console::origin(l) == Origin::Kernel)
        .map(|l| console::strip_timestamp(l))
        .collect();
    for want in s.kernel_lines {
        if !kernel_text.iter().any(|l| l.contains(want)) {
            return Judgement::fail(Cause::Checks, format!("the kernel never printed `{want}`"));
        }
    }
    if !text.contains(&DONE) {
        return Judgement::fail(
            Cause::Unfinished,
            "the guest stopped before its scenario finished".into(),
        );
    }
    let mut backed = String::new();
    let mut findings = Findings {
        guest_checks: Some(results.len()),
        ..Findings::default()
    };
    if matches!(s.check, Check::UserSpace) {
        match account_user_space(c, device) {
            Ok((summary, n)) => {
                backed = summary;
                findings.accounted = Some(n);
            }
            Err(e) => return Judgement::fail(Cause::Device, e),
        }
    }
    if matches!(s.check, Check::Bench) {
        match GuestFigures::parse(&text).and_then(|g| g.check_complete().map(|()| g)) {
            Ok(g) => {
                backed.push_str(&format!("; {}", g.summary()));
                findings.figures = Some(g);
            }
            Err(e) => return Judgement::fail(Cause::Checks, e),
        }
    }
    let platform = match s.check {
        Check::Platform => Some(judge_platform(c, &text)),
        Check::UpstreamPci { bindings } => Some(match &c.oracle {
            None => Err("the MMIO oracle did not watch this boot".to_string()),
            Some(Err(e)) => Err(format!("MMIO oracle: {e}")),
            Some(Ok(log)) => oracle::sample::judge(log, &text, bindings),
        }),
        Check::Cpufreq => Some(crate::platform::judge_cpufreq(&text)),
        _ => None,
    };
    match platform {
        Some(Ok(summary)) => backed.push_str(&summary),
        Some(Err(e)) => return Judgement::fail(Cause::Checks, e),
        None => {}
    }
    if matches!(s.check, Check::Sweep(_)) {
        match judge_sweep(s.name, c, device) {
            Ok((summary, n, points)) => {
                backed.push_str(&summary);
                findings.accounted = Some(n);
                findings.sweep = points;
            }
            Err(e) => return Judgement::fail(Cause::Device, e),
        }
    }
    let mut timings = Timings::new();
    if let Some(want) = s.driver() {
        match judge_driver(want, c, device) {
            Ok((summary, n)) => {
                backed.push_str(&summary);
                findings.accounted = Some(n);
            }
            Err(e) => return Judgement::fail(Cause::Device, e),
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
    // Last, so that a lie the device log or the oracle also catches is
    // judged by them: this catches what they cannot, e.g. a forged `event`.
    if let Some(forged) = forged_module_line(c) {
        return Judgement::fail(
            Cause::Checks,
            format!("a line in the format of our kernel modules that the kernel did not print (written by user space: {:?}): `{forged}`", console::origin(forged)),
        );
    }
    for name in &known_findings {
        backed.push_str(&format!("; known finding, judged apart: {name}"));
    }
    findings.known = known_findings.iter().map(|n| n.to_string()).collect();
    Judgement {
        verdict: Verdict::Pass,
        cause: None,
        reason: format!(
            "{}/{} guest checks ok, {} kernel lines seen{backed}, powered off after {:.1} s",
            results.len(),
            plan.unwrap_or(results.len()),
            s.kernel_lines.len(),
            c.elapsed.as_secs_f64()
        ),
        timings,
        findings,
    }
}

/// The first line in one of our kernel modules' formats (the driver's
/// `pci_rig <bdf>: …`, `pcirig_platform …`, `rcpufreq-dt: …`) that does not
/// carry the kernel's syslog prefix, when the console was asked for them.
fn forged_module_line(c: &Console) -> Option<&str> {
    if !c.syslog {
        return None;
    }
    c.lines
        .iter()
        .filter(|l| console::origin(l) != Origin::Kernel)
        .find(|l| {
            let text = console::strip_timestamp(l);
            driver::driver_text(l).is_some()
                || text.starts_with("pcirig_platform ")
                || text.starts_with("rcpufreq-dt: ")
        })
        .map(String::as_str)
}

/// The driver's lines of /proc/interrupts the guest printed (`pcirig:
/// interrupts …`) agree with `mode`: the kernel names a PCI MSI domain
/// (`PCI-MSI-<bdf>`, `GICv2m-PCI-MSI-<bdf>`) for MSI, and an interrupt
/// controller's pin for INTx (`IO-APIC`, `GIC-0`, and on riscv64 the APLIC,
/// which forwards its wires as MSIs: `APLIC-MSI-… Level`, not a PCI MSI).
/// Not the driver's word: the kernel's own table.
fn listed_as(lines: &[String], mode: IrqMode) -> Result<(), String> {
    let listed: Vec<&str> = lines
        .iter()
        .filter_map(|l| console::strip_timestamp(l).strip_prefix("pcirig: interrupts "))
        .collect();
    if listed.is_empty() {
        return Err("the guest never listed the driver's line of /proc/interrupts".into());
    }
    let msi = mode == IrqMode::Msi;
    match listed.iter().find(|l| l.contains("PCI-MSI") != msi) {
        Some(l) => Err(format!(
            "/proc/interrupts lists the driver's interrupt as `{}`, not {}",
            l.trim(),
            mode.name()
        )),
        None => Ok(()),
    }
}

/// The software interrupts (`event irq status=0x4 …`) the driver handled in
/// each binding, in order (a binding runs from one `probe_begin` to the next).
fn soft_irqs_per_binding(lines: &[String]) -> Vec<usize> {
    let mut counts = Vec::new();
    for line in lines {
        if driver::is_event(line, "probe_begin") {
            counts.push(0);
        } else if driver::is_event(line, "irq") {
            let soft = driver::driver_text(line)
                .and_then(|t| t.strip_prefix("event irq "))
                .is_some_and(|rest| rest.starts_with("status=0x4 "));
            if let (true, Some(n)) = (soft, counts.last_mut()) {
                *n += 1;
            }
        }
    }
    counts
}

/// After the host injected errors (AER), the driver's worker kept reading
/// MAGIC, by the device's own log and the host's clock: a binding that
/// survived in name only (its worker gone quiet) fails. Empty when nothing
/// was injected.
fn after_injections(c: &Console, device: &[Stopped]) -> Result<String, String> {
    let Some(&last) = c.injected_ns.iter().max() else {
        return Ok(String::new());
    };
    let reads = device
        .iter()
        .flat_map(|d| &d.log)
        .filter(|a| {
            a.time_ns > last
                && a.kind == device::Kind::Read
                && a.region == device::Region::Bar0
                && a.offset == regmap::reg::MAGIC
                && a.value == Some(u64::from(regmap::MAGIC_VALUE))
        })
        .count();
    if reads == 0 {
        return Err(format!(
            "after the last of {} injected errors the device saw no MAGIC read: the worker stopped using it",
            c.injected_ns.len()
        ));
    }
    Ok(format!(
        ", {reads} MAGIC reads after the last of {} injected errors",
        c.injected_ns.len()
    ))
}

/// DMAs each binding that bound made in its self-test (to the device, back, a streaming sum).
const SELFTEST_DMAS: usize = 3;

/// Stream DMAs each binding must have made, at least, where the device offered its stream.
pub const STREAM_ROUNDS: usize = 10;

/// Every binding that bound moved its self-test's DMAs (the oracle checked each); where the
/// device offered its stream, each started it, kept it running and stopped it, and the oracle
/// saw its DMAs; elsewhere none started one.
fn dma_expected(
    r: &driver::Report,
    dma: &dma::DmaFindings,
    probes: usize,
    stream: bool,
) -> Result<String, String> {
    let least = probes * SELFTEST_DMAS;
    if dma.moved < least {
        return Err(format!(
            "the device made {} DMAs, but {probes} bindings bound, each after {SELFTEST_DMAS} DMAs of its self-test",
            dma.moved
        ));
    }
    let (started, stopped) = (r.count("stream_started"), r.count("stream_stopped"));
    if !stream {
        return match started {
            0 => Ok(String::new()),
            n => Err(format!(
                "the driver started {n} streams, but the device offered none"
            )),
        };
    }
    let rounds: Vec<usize> = r
        .all("stream_stopped")
        .iter()
        .filter_map(|s| {
            s.strip_prefix("rounds=")?
                .split_whitespace()
                .next()?
                .parse()
                .ok()
        })
        .collect();
    if started != probes || stopped != probes || rounds.len() != probes {
        return Err(format!(
            "the device offered its stream: each of the {probes} bindings must start and stop it, {started} started and {stopped} stopped"
        ));
    }
    let streamed = dma.moved - least;
    if rounds.iter().any(|&n| n < STREAM_ROUNDS) || streamed < probes * STREAM_ROUNDS {
        return Err(format!(
            "the stream ran {rounds:?} rounds ({streamed} DMAs in the device's log beyond the self-tests'), expected at least {STREAM_ROUNDS} per binding"
        ));
    }
    Ok(format!(", the stream {rounds:?} rounds"))
}

/// The DMA core's record against the driver's `# dma` lines, when the boot asked for it
/// (`dma_core::CMDLINE`); a summary when the driver mapped anything.
fn dma_core_agrees(lines: &[String]) -> Result<String, String> {
    if !dma_core::traced(lines) || !rule_on(Rule::DmaCore) {
        return Ok(String::new());
    }
    let a = dma_core::agrees(lines)?;
    Ok(if a.mappings > 0 {
        a.summary()
    } else {
        String::new()
    })
}

/// The servers' access logs, in attach order.
fn logs(device: &[Stopped]) -> Vec<&[Access]> {
    device.iter().map(|d| &d.log[..]).collect()
}

/// User space alone touched the device (no driver of ours): every access it
/// reports is the device's next one, and the device saw nothing else.
fn account_user_space(c: &Console, device: &[Stopped]) -> Result<(String, Accounting), String> {
    let history = driver::history(&c.lines)?;
    let n = accounting::account(&history, &logs(device))?;
    let seen = oracle_check(c, &history, device)?;
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
fn judge_platform(c: &Console, text: &[&str]) -> Result<String, String> {
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

/// The MMIO oracle's side (`oracle::judge`), when it watched the boot.
fn oracle_check(
    c: &Console,
    history: &[driver::Actor],
    device: &[Stopped],
) -> Result<String, String> {
    match &c.oracle {
        None => Ok(String::new()),
        Some(Err(e)) => Err(format!("MMIO oracle: {e}")),
        Some(Ok(log)) => oracle::judge(log, &c.lines, history, &logs(device)),
    }
}

/// How long the guest must stay up after the first and after the last
/// binding ended, watching for late device accesses (its `pcirig: settled`
/// mark, written to /dev/kmsg so that it carries a printk stamp). A late
/// access of a binding in between would land in the next binding, whose
/// accesses are accounted for one by one.
const SETTLE_S: f64 = 1.0;

/// The guest stayed up `SETTLE_S` after the first binding ended and, before
/// powering off, after the last; returns the shorter of the two.
fn settled(lines: &[String]) -> Result<f64, String> {
    let ends: Vec<usize> = lines
        .iter()
        .enumerate()
        .filter(|(_, l)| driver::is_event(l, "worker_stopped"))
        .map(|(i, _)| i)
        .collect();
    let (Some(&first), Some(&last)) = (ends.first(), ends.last()) else {
        return Err("the first binding never ended (no worker_stopped)".into());
    };
    let mut shortest = f64::INFINITY;
    for (which, ended) in [("first", first), ("last", last)] {
        let t0 = console::timestamp(&lines[ended]).ok_or(format!(
            "the {which} binding's worker_stopped has no printk stamp"
        ))?;
        let mark = lines[ended..]
            .iter()
            .find(|l| console::strip_timestamp(l) == SETTLED)
            .ok_or(format!(
                "the guest never printed `{SETTLED}` after the {which} binding ended"
            ))?;
        let t1 = console::timestamp(mark).ok_or(format!("`{SETTLED}` has no printk stamp"))?;
        if t1 - t0 < SETTLE_S {
            return Err(format!(
                "the guest settled only {:.2} s after the {which} binding ended ({t0:.3} s to {t1:.3} s), less than {SETTLE_S} s",
                t1 - t0
            ));
        }
        shortest = shortest.min(t1 - t0);
    }
    Ok(shortest)
}

/// The driver did what `want` says, and the device log agrees.
/// The sweep's boot: every binding accounted for as in any driver boot, each one that bound
/// ended with its worker joined and its kept handle refused, then each point (`sweep::judge`).
fn judge_sweep(
    scenario: &str,
    c: &Console,
    device: &[Stopped],
) -> Result<(String, Accounting, Vec<sweep::PointResult>), String> {
    let lines = &c.lines[..];
    let r = driver::report(lines);
    let history = driver::history(lines)?;
    let points = sweep::points(lines)?;
    let n = accounting::account(&history, &logs(device))?;
    let bound = r.count("probe_done");
    for event in ["remove_begin", "remove_done", "worker_stopped"] {
        if r.count(event) != bound {
            return Err(format!(
                "driver printed `event {event}` {} times, expected once per binding that bound ({bound})",
                r.count(event)
            ));
        }
    }
    let kept = r.all("kept_handle");
    if kept.len() != bound || kept.iter().any(|k| *k != "refused") {
        return Err(format!(
            "a handle kept across each of the {bound} unbinds must be refused: {kept:?}"
        ));
    }
    let quiesced = config::quiesced(&n.ended, &logs(device))?;
    if rule_on(Rule::InterruptsOff) {
        acks::interrupts_off_at_end(&n.probes, &n.ended, &logs(device))?;
    }
    let irq_counts = acks::irq_count_is_acks(&n.probes, &logs(device))?;
    let acks = match rule_on(Rule::AckValues) {
        true => acks::acks_are_status_read(&history, &n.seqs, &logs(device))?,
        false => 0,
    };
    let seen = oracle_check(c, &history, device)?;
    let dma = dma::check(&history, &n, device, dma::behind_iommu(&c.lines))?;
    let seen = format!("{seen}{}{}", dma.summary(), dma_core_agrees(lines)?);
    let results = sweep::judge(scenario, &points, &history, &n.probes, &logs(device), lines)?;
    let aer = points
        .iter()
        .filter(|p| p.kind == qemu_device::model::FaultKind::Aer)
        .count();
    if c.injected_ns.len() != aer {
        return Err(format!(
            "the host injected {} AER errors for the {aer} aer points: it must inject one when each strikes",
            c.injected_ns.len()
        ));
    }
    let mut outcomes: Vec<&str> = results.iter().map(|p| p.outcome.as_str()).collect();
    outcomes.sort();
    outcomes.dedup();
    let slowest = results
        .iter()
        .filter_map(|p| p.probe_ms)
        .fold(0.0, f64::max);
    let summary = format!(
        ", sweep: {} points ({}), each struck where asked by the device's log, each faulted binding ended cleanly and the next clean one bound with all {} accesses; outcomes: {}; slowest faulted probe {slowest:.0} ms; {} bindings accounted for ({} accesses, {} worker reads, {} reported after their device server died, which only the MMIO oracle saw), {quiesced} ended with bus mastering and MSI off, {irq_counts} IRQ_COUNT reads equal to the acks, {acks} INT_ACK writes each equal to the INT_STATUS read before it{seen}",
        results.len(),
        vocab::sweep::cmdline(&points)
            .trim_start_matches("pcirig.points=")
            .replace(',', " "),
        vocab::sweep::PROBE_ACCESSES,
        outcomes.join(", "),
        n.bindings,
        n.driver,
        n.worker,
        n.unwitnessed
    );
    Ok((summary, Accounting { accesses: n, dma }, results))
}

fn judge_driver(
    want: &DriverExpect,
    c: &Console,
    device: &[Stopped],
) -> Result<(String, Accounting), String> {
    let lines = &c.lines[..];
    let r = driver::report(lines);
    let history = driver::history(lines)?;
    let mut probes = 0;
    let mut refused = Vec::new();
    // The binding numbers of the probes that failed (from 1, as the accounting counts them).
    let mut failed = Vec::new();
    let bindings = history.iter().filter_map(|a| match a {
        driver::Actor::Driver(b) => Some(b),
        driver::Actor::User(_) => None,
    });
    for (k, b) in bindings.enumerate() {
        match b.end().map_err(|e| format!("probe {}: {e}", k + 1))? {
            driver::ProbeEnd::Bound => probes += 1,
            driver::ProbeEnd::Refused(what) => {
                refused.push(what);
                failed.push(k + 1);
            }
        }
    }
    if probes != want.probes {
        return Err(format!(
            "the driver bound {probes} times with every self-test step, expected {}",
            want.probes
        ));
    }
    if refused != want.refused {
        return Err(format!(
            "the driver refused the device for {refused:?}, expected {:?}",
            want.refused
        ));
    }
    if want.storm {
        let per_binding = soft_irqs_per_binding(lines);
        let least = SELFTEST_SOFT_IRQS + STORM_IRQS;
        if per_binding.len() != probes || per_binding.iter().any(|&n| n < least) {
            return Err(format!(
                "the driver handled {per_binding:?} software interrupts in its {probes} bindings, expected at least {least} in each: the device's own interrupts did not come"
            ));
        }
    }
    if want.interrupts_listed {
        listed_as(lines, want.irq_mode)?;
    }
    let modes = r.all("irq_mode");
    if modes.len() < probes || modes.iter().any(|m| *m != want.irq_mode.name()) {
        return Err(format!(
            "the driver took its interrupts as {modes:?}, expected {} in every probe",
            want.irq_mode.name()
        ));
    }
    for event in ["remove_begin", "remove_done", "worker_stopped"] {
        if r.count(event) != want.removes {
            return Err(format!(
                "driver printed `event {event}` {} times, expected {}",
                r.count(event),
                want.removes
            ));
        }
    }
    let kept = r.all("kept_handle");
    if kept.len() != want.removes || kept.iter().any(|k| *k != "refused") {
        return Err(format!(
            "a handle kept across each of the {} unbinds must be refused: {kept:?}",
            want.removes
        ));
    }
    let n = accounting::account(&history, &logs(device))?;
    let quiesced = config::quiesced(&n.ended, &logs(device))?;
    // A failed probe ends its binding too: what it enabled must be off again after it.
    let failed_ends: Vec<accounting::Ended> = n
        .probes
        .iter()
        .filter(|p| failed.contains(&p.binding))
        .map(|p| accounting::Ended {
            binding: p.binding,
            server: p.server,
            last: p.last,
        })
        .collect();
    let quiesced_failed = match rule_on(Rule::FailedProbeQuiesced) {
        true => config::quiesced(&failed_ends, &logs(device))?,
        false => 0,
    };
    if rule_on(Rule::InterruptsOff) {
        acks::interrupts_off_at_end(&n.probes, &n.ended, &logs(device))?;
    }
    let irq_counts = acks::irq_count_is_acks(&n.probes, &logs(device))?;
    let acks = match rule_on(Rule::AckValues) {
        true => acks::acks_are_status_read(&history, &n.seqs, &logs(device))?,
        false => 0,
    };
    let seen = oracle_check(c, &history, device)?;
    let dma = dma::check(&history, &n, device, dma::behind_iommu(&c.lines))?;
    let seen = format!(
        "{seen}{}{}{}",
        dma.summary(),
        dma_core_agrees(lines)?,
        dma_expected(&r, &dma, if want.dma { probes } else { 0 }, want.stream)?
    );
    // A worker that gave up in a binding that never ended left a bound
    // driver that no longer uses its device.
    if r.count("worker_gave_up") > r.count("worker_stopped") {
        return Err(format!(
            "a worker gave up while its binding went on (still bound at poweroff): {:?}",
            r.all("worker_gave_up")
        ));
    }
    let survived = after_injections(c, device)?;
    let refusals = if refused.is_empty() {
        String::new()
    } else {
        format!(", {} refused ({})", refused.len(), refused.join(", "))
    };
    let user = if n.user == 0 {
        String::new()
    } else {
        format!(", {} from user space", n.user)
    };
    let mut summary = format!(
        ", driver: {probes} probes with all {} steps{refusals}, {} removes; the device log holds exactly the {} MMIO accesses the driver reported in {} bindings{user}, and {} worker reads",
        driver::STEPS.len(),
        want.removes,
        n.driver,
        n.bindings,
        n.worker
    );
    if want.storm {
        let after = acks::acks_after_reset(&n.probes, &n.ended, &logs(device));
        summary.push_str(&format!(
            ", interrupts handled after remove()'s RESET, while each binding ended: {after:?}"
        ));
    }
    if irq_counts > 0 {
        summary.push_str(&format!(
            ", each of the {irq_counts} IRQ_COUNT reads equal to the INT_ACK writes the device saw"
        ));
    }
    if acks > 0 {
        summary.push_str(&format!(
            ", each of the {acks} INT_ACK writes equal to the INT_STATUS bits the binding read before it"
        ));
    }
    if quiesced > 0 {
        summary.push_str(&format!(
            ", each of the {quiesced} bindings that ended left the device with bus mastering and MSI off (its config log) and its interrupt sources off (INT_ENABLE 0 or a RESET, its BAR log)"
        ));
    }
    if quiesced_failed > 0 {
        summary.push_str(&format!(
            ", each of the {quiesced_failed} failed probes left bus mastering and MSI off"
        ));
    }
    summary.push_str(&seen);
    summary.push_str(&survived);
    let deleted = c.events.iter().filter(|e| device::deleted(e)).count();
    if deleted != want.unplugs {
        return Err(format!(
            "QEMU reported DEVICE_DELETED for `{}` {deleted} times, expected {}",
            device::QEMU_ID,
            want.unplugs
        ));
    }
    if want.unplugs > 0 {
        summary.push_str(&format!(", {deleted} DEVICE_DELETED"));
    }
    if want.busy_unbind {
        let reason = format!("reason={:?} ", want.stop);
        let gave_up = r.event("worker_gave_up").unwrap_or("");
        if !gave_up.starts_with(&reason) {
            return Err(format!(
                "the worker did not stop by itself with {reason}: `{gave_up}`"
            ));
        }
        let at = |event| driver::event_at(lines, event);
        let (gave, began, done) = (at("worker_gave_up"), at("remove_begin"), at("remove_done"));
        let when = match want.stop {
            WorkerStop::Gone if gave < began => "before remove()",
            WorkerStop::Refused if gave > done => "once remove() returned",
            _ => return Err(format!("the worker stopped with {reason}at the wrong time: line {gave:?}, remove() lines {began:?} to {done:?}")),
        };
        let joined = r.event("worker_stopped").unwrap_or("");
        if joined != gave_up {
            return Err(format!(
                "the binding's release saw the worker stop differently: `{joined}` against `{gave_up}`"
            ));
        }
        summary.push_str(&format!(", worker gave up {when}: {gave_up}"));
    }
    if want.settle {
        let s = settled(lines)?;
        summary.push_str(&format!(
            ", no device access in the {s:.1} s the guest stayed up after the first and after the last binding ended"
        ));
    }
    Ok((summary, Accounting { accesses: n, dma }))
}

/// KUnit's rules (`kunit::judge`).
/// `ours`: the 6.12 line, whose modules of ours must each run exactly their doctests.
fn judge_kunit(c: &Console, ours: bool) -> Judgement {
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
mod tests {
    use super::*;

    /// `judge_driver`'s summary alone.
    #[test]
    fn each_binding_moves_its_self_test_dmas_and_a_stream_runs_where_offered() {
        let report = |lines: &[&str]| {
            driver::report(
                &lines
                    .iter()
                    .map(|l| format!("pci_rig 0000:01:00.0: {l}"))
                    .collect::<Vec<_>>(),
            )
        };
        let moved = |n| dma::DmaFindings {
            moved: n,
            ..Default::default()
        };
        let none = report(&[]);
        assert!(dma_expected(&none, &moved(6), 2, false).is_ok());
        let e = dma_expected(&none, &moved(5), 2, false).unwrap_err();
        assert!(
            e.contains("the device made 5 DMAs, but 2 bindings bound"),
            "{e}"
        );
        let streamed = report(&[
            "event stream_started",
            "event stream_stopped rounds=12 remove",
        ]);
        let e = dma_expected(&streamed, &moved(15), 1, false).unwrap_err();
        assert!(
            e.contains("started 1 streams, but the device offered none"),
            "{e}"
        );
        let ok = dma_expected(&streamed, &moved(15), 1, true).unwrap();
        assert!(ok.contains("[12] rounds"), "{ok}");
        let e = dma_expected(&none, &moved(15), 1, true).unwrap_err();
        assert!(e.contains("0 started and 0 stopped"), "{e}");
        let short = report(&[
            "event stream_started",
            "event stream_stopped rounds=4 status=0xffffffff",
        ]);
        let e = dma_expected(&short, &moved(7), 1, true).unwrap_err();
        assert!(e.contains("the stream ran [4] rounds"), "{e}");
        // Rounds the driver counted but the device never logged.
        let e = dma_expected(&streamed, &moved(8), 1, true).unwrap_err();
        assert!(e.contains("(5 DMAs in the device's log"), "{e}");
    }

    /// The driver's judge, without the self-test DMA count: these consoles have no DMA (the
    /// DMA rules have their own tests, in `dma`'s and below).
    fn judged(want: &DriverExpect, c: &Console, device: &[Stopped]) -> Result<String, String> {
        let want = DriverExpect {
            dma: false,
            ..*want
        };
        judge_driver(&want, c, device).map(|(summary, _)| summary)
    }
    use crate::console::Splat;
    use std::os::unix::process::ExitStatusExt;
    use std::time::Duration;
    use vocab::scenario::*;

    fn console(lines: &[&str], timed_out: bool) -> Console {
        Console {
            lines: lines.iter().map(|s| s.to_string()).collect(),
            timed_out,
            exit: Some(ExitStatusExt::from_raw(0)),
            host_failures: vec![],
            injected_ns: vec![],
            oracle: None,
            elapsed: Duration::from_millis(1500),
            arch: vocab::arch::Arch::Arm64,
            syslog: false,
            events: vec![],
            phases: Default::default(),
        }
    }

    const GOOD: &[&str] = &[
        "[    0.1] Linux version 6.12",
        "KTAP version 1",
        "1..2",
        "[    0.5] rust_minimal: Rust minimal sample (init)",
        "ok 1 insmod_rust_minimal",
        "[    0.6] rust_minimal: My numbers are [72, 108, 200]",
        "[    0.6] rust_minimal: Rust minimal sample (exit)",
        "ok 2 rmmod_rust_minimal",
        "pcirig: done",
    ];

    /// `lines` as a console that was asked for syslog prefixes.
    fn syslog_console(lines: &[&str]) -> Console {
        Console {
            syslog: true,
            ..console(lines, false)
        }
    }

    fn as_strs(v: &[String]) -> Vec<&str> {
        v.iter().map(String::as_str).collect()
    }

    /// The kernel's lines of `GOOD` with its `<6>` prefix.
    fn marked(lines: &[&str]) -> Vec<String> {
        lines
            .iter()
            .map(|l| {
                if l.starts_with('[') {
                    format!("<6>{l}")
                } else {
                    l.to_string()
                }
            })
            .collect()
    }

    #[test]
    fn under_syslog_prefixes_only_the_kernels_lines_count() {
        let good = marked(GOOD);
        let j = judge(&BOOT, &syslog_console(&as_strs(&good)), &[]);
        assert_eq!(j.verdict, Verdict::Pass, "{}", j.reason);
        // Asked for prefixes, none came: nothing could be told apart.
        let j = judge(&BOOT, &syslog_console(GOOD), &[]);
        assert_eq!(j.cause, Some(Cause::Checks));
        assert!(
            j.reason.contains("no console line carries its <N> prefix"),
            "{}",
            j.reason
        );
        // A driver line written to /dev/kmsg (LOG_USER: <14>), or to the console.
        for forged in [
            "<14>[    0.7] pci_rig 0000:01:00.0: event worker_gave_up reason=Gone accesses=9",
            "pci_rig 0000:01:00.0: event worker_gave_up reason=Gone accesses=9",
            "<12>[    0.7] rcpufreq-dt: target_index 1 ok",
        ] {
            let mut lines = good.clone();
            lines.insert(7, forged.to_string());
            let j = judge(&BOOT, &syslog_console(&as_strs(&lines)), &[]);
            assert_eq!(j.cause, Some(Cause::Checks), "{forged}: {}", j.reason);
            assert!(
                j.reason.contains("that the kernel did not print"),
                "{}",
                j.reason
            );
            assert!(j.reason.contains(forged), "{}", j.reason);
        }
        // A line the kernel must print counts only when the kernel printed it.
        let aer = |prefix: &str| {
            let mut lines = good.clone();
            for want in AER.kernel_lines {
                lines.insert(
                    1,
                    format!("{prefix}[    0.2] pcieport 0000:00:01.0: {want}"),
                );
            }
            lines
        };
        let wants_aer = Scenario {
            kernel_lines: AER.kernel_lines,
            ..BOOT
        };
        let by = |prefix| judge(&wants_aer, &syslog_console(&as_strs(&aer(prefix))), &[]);
        let j = by("<14>");
        assert!(
            j.reason.starts_with("the kernel never printed `AER:"),
            "{}",
            j.reason
        );
        let j = by("<3>");
        assert_eq!(j.verdict, Verdict::Pass, "{}", j.reason);
    }

    #[test]
    fn a_known_finding_is_named_and_hides_no_other_report() {
        let pciehp = Scenario {
            machine: Machine::Hotplug(Slot::Pciehp),
            ..BOOT
        };
        let mut lines: Vec<&str> = GOOD.to_vec();
        let at = lines.len() - 2;
        lines.splice(at..at, known::tests::PCIEHP_REPORT.iter().copied());
        let j = judge(&pciehp, &console(&lines, false), &[]);
        assert_eq!(j.verdict, Verdict::Pass, "{}", j.reason);
        assert!(
            j.reason
                .contains("known finding, judged apart: Linux 6.12's pciehp lockdep report"),
            "{}",
            j.reason
        );
        assert_eq!(j.findings.known.len(), 1);
        // On a machine without pciehp's unplug, the same report fails.
        let j = judge(&BOOT, &console(&lines, false), &[]);
        assert_eq!(j.cause, Some(Cause::Splat(Splat::Lockdep)), "{}", j.reason);
        // Another report after it still fails the boot.
        lines.insert(
            lines.len() - 2,
            "[    2.0] WARNING: CPU: 1 PID: 9 at drivers/pci/x.c:1 f+0x1/0x2",
        );
        let j = judge(&pciehp, &console(&lines, false), &[]);
        assert_eq!(j.cause, Some(Cause::Splat(Splat::Warning)), "{}", j.reason);
    }

    #[test]
    fn a_clean_boot_passes() {
        let j = judge(&BOOT, &console(GOOD, false), &[]);
        assert_eq!(j.verdict, Verdict::Pass, "{}", j.reason);
        assert!(j.reason.starts_with("2/2 guest checks ok"), "{}", j.reason);
    }

    #[test]
    fn findings_carry_the_phases_whatever_the_verdict() {
        let mut r = phases::Recorder::default();
        r.first_byte(200.0);
        r.line(900.0, "[    0.6] Run /init as init process");
        let phases = r.finish(1000.0);
        for timed_out in [false, true] {
            let c = Console {
                phases: phases.clone(),
                ..console(GOOD, timed_out)
            };
            let j = judge(&BOOT, &c, &[]);
            assert_eq!(j.verdict == Verdict::Pass, !timed_out, "{}", j.reason);
            assert_eq!(j.findings.phases.as_ref(), Some(&phases));
            assert_eq!(j.findings.phases.unwrap().kernel_ms, Some(700.0));
        }
        let none = judge(&BOOT, &console(GOOD, false), &[]);
        assert_eq!(none.findings.phases, None, "nothing recorded, nothing said");
    }

    #[test]
    fn bench_fails_without_its_figures_and_passes_with_them() {
        let runner = [
            "KTAP version 1",
            "1..1",
            "ok 1 insmod_bench",
            "pcirig: done",
        ];
        let j = judge(&BENCH, &console(&runner, false), &[]);
        assert_eq!(j.cause, Some(Cause::Checks));
        assert!(
            j.reason
                .starts_with("bench lines missing: mmio dev=pci-testdev, mmio dev=pci-rig, window"),
            "{}",
            j.reason
        );
        let mut lines = runner.to_vec();
        let figures = [
            "x: bench mmio dev=pci-testdev reads=3232 raw_ns=200 devres_ns=204 guard_ns=200 access_ns=201",
            "x: bench mmio dev=pci-rig reads=3232 raw_ns=70000 devres_ns=70100 guard_ns=70000 access_ns=70000",
            "x: bench window bytes=65536 ns=1000000000 kib_per_s=64",
            "x: bench irq mode=msi samples=101 median_ns=40000 lost=0",
            "x: bench dma dir=to_device bytes=65536 ns=2000000 cpu_ns=50000",
            "x: bench dma dir=from_device bytes=65536 ns=2000000 cpu_ns=50000",
            "x: bench dma_alloc bytes=4096 samples=101 median_ns=3000",
            "x: bench revoke_each k=1 ns=1",
            "x: bench revoke_each k=16 ns=16",
            "x: bench revoke_each k=64 ns=64",
            "x: bench unbind k=1 worker=idle remove_ns=1 total_ns=1000000",
            "x: bench unbind k=16 worker=idle remove_ns=1 total_ns=1000000",
            "x: bench unbind k=64 worker=idle remove_ns=1 total_ns=1000000",
            "x: bench unbind k=1 worker=busy remove_ns=1 total_ns=2000000",
            "x: bench unbind k=16 worker=busy remove_ns=1 total_ns=2000000",
            "x: bench unbind k=64 worker=busy remove_ns=1 total_ns=2000000",
        ];
        lines.splice(3..3, figures);
        let j = judge(&BENCH, &console(&lines, false), &[]);
        assert_eq!(j.verdict, Verdict::Pass, "{}", j.reason);
        assert!(
            j.reason.contains("pci-testdev read 200 ns raw, b/a 1.02"),
            "{}",
            j.reason
        );
        lines[4] = "x: bench mmio dev=pci-rig reads=3232 raw_ns=seventy devres_ns=1 guard_ns=1";
        let j = judge(&BENCH, &console(&lines, false), &[]);
        assert!(
            j.reason.starts_with("raw_ns= is not a number"),
            "{}",
            j.reason
        );
    }

    #[test]
    fn an_unplug_the_guest_asked_for_must_be_one_qemu_did() {
        let mut lines = GOOD.to_vec();
        lines.insert(2, "pcirig: host unplug");
        let j = judge(&BOOT, &console(&lines, false), &[]);
        assert_eq!(j.cause, Some(Cause::Host), "{}", j.reason);
        assert!(
            j.reason.contains(
                "asked for 1 unplugs of our device, QEMU reported DEVICE_DELETED 0 times"
            ),
            "{}",
            j.reason
        );
        let mut c = console(&lines, false);
        c.events =
            vec![serde_json::json!({"event": "DEVICE_DELETED", "data": {"device": "pcirig"}})];
        let j = judge(&BOOT, &c, &[]);
        assert_eq!(j.verdict, Verdict::Pass, "{}", j.reason);
    }

    #[test]
    fn a_timeout_fails_with_the_last_lines() {
        let j = judge(&BOOT, &console(&GOOD[..4], true), &[]);
        assert_eq!(j.cause, Some(Cause::Timeout));
        assert!(j.reason.starts_with("timeout after 120 s without powering off (last line: rust_minimal: Rust minimal sample (init))"), "{}", j.reason);
    }

    #[test]
    fn a_console_with_dropped_messages_fails_even_when_everything_else_passed() {
        assert_eq!(
            judge(&BOOT, &console(GOOD, false), &[]).verdict,
            Verdict::Pass
        );
        let mut lines = GOOD.to_vec();
        lines.insert(5, "** 3 printk messages dropped **");
        let j = judge(&BOOT, &console(&lines, false), &[]);
        assert_eq!(j.cause, Some(Cause::Checks));
        assert!(
            j.reason
                .starts_with("the kernel dropped 3 console messages"),
            "{}",
            j.reason
        );
    }

    #[test]
    fn a_splat_fails_even_when_everything_else_passed() {
        let mut lines = GOOD.to_vec();
        lines.insert(
            5,
            "[    0.55] WARNING: CPU: 0 PID: 1 at lib/x.c:1 f+0x0/0x1",
        );
        let j = judge(&BOOT, &console(&lines, false), &[]);
        assert_eq!(j.cause, Some(Cause::Splat(Splat::Warning)));
        assert!(
            j.reason
                .starts_with("WARNING: WARNING: CPU: 0 PID: 1 at lib/x.c:1"),
            "{}",
            j.reason
        );
    }

    #[test]
    fn failed_missing_and_unfinished_checks_fail() {
        let mut bad = GOOD.to_vec();
        bad[7] = "not ok 2 rmmod_rust_minimal # rmmod: can't unload";
        assert_eq!(
            judge(&BOOT, &console(&bad, false), &[]).cause,
            Some(Cause::Checks)
        );

        let mut short = GOOD.to_vec();
        short.remove(7);
        let j = judge(&BOOT, &console(&short, false), &[]);
        assert!(
            j.reason.contains("planned 2 checks but reported 1"),
            "{}",
            j.reason
        );

        let mut no_exit = GOOD.to_vec();
        no_exit.remove(6);
        let j = judge(&BOOT, &console(&no_exit, false), &[]);
        assert!(j.reason.contains("(exit)"), "{}", j.reason);

        let j = judge(&BOOT, &console(&GOOD[..8], false), &[]);
        assert_eq!(j.cause, Some(Cause::Unfinished));
    }

    #[test]
    fn a_failed_host_action_a_refused_request_or_a_failed_qemu_fails_the_boot() {
        let mut c = console(GOOD, false);
        c.host_failures = vec!["host unplug: QMP device_del: Device 'pcirig' not found".into()];
        let j = judge(&BOOT, &c, &[]);
        assert_eq!(j.cause, Some(Cause::Host));
        assert!(
            j.reason.contains("Device 'pcirig' not found"),
            "{}",
            j.reason
        );

        let mut c = console(GOOD, false);
        c.host_failures =
            vec![r#"device request {"cmd":"set_knobs","nope":1}: device refused"#.into()];
        assert_eq!(judge(&BOOT, &c, &[]).cause, Some(Cause::Host));

        let mut c = console(GOOD, false);
        c.exit = Some(ExitStatusExt::from_raw(1 << 8));
        let j = judge(&BOOT, &c, &[]);
        assert_eq!(j.cause, Some(Cause::Host));
        assert!(
            j.reason
                .contains("QEMU exited with a failure (exit status: 1)"),
            "{}",
            j.reason
        );
        c.exit = None;
        assert_eq!(judge(&BOOT, &c, &[]).cause, Some(Cause::Host));
    }

    #[test]
    fn a_failing_check_that_says_skip_fails_and_a_skipped_check_fails_too() {
        let mut bad = GOOD.to_vec();
        bad[7] = "not ok 2 rmmod_rust_minimal # skipping: rmmod: can't unload";
        let j = judge(&BOOT, &console(&bad, false), &[]);
        assert_eq!(j.cause, Some(Cause::Checks), "{}", j.reason);
        bad[7] = "ok 2 rmmod_rust_minimal # SKIP not tried";
        let j = judge(&BOOT, &console(&bad, false), &[]);
        assert_eq!(j.cause, Some(Cause::Checks), "{}", j.reason);
        assert!(
            j.reason
                .contains("ok 2 rmmod_rust_minimal # SKIP not tried"),
            "{}",
            j.reason
        );
    }

    #[test]
    fn kunit_boots_are_judged_by_kunits_rules() {
        // Complete and passing, but without most of our modules' doctests.
        let few = [
            "[    1.0] KTAP version 1",
            "[    1.0] 1..1",
            "[    1.0]     # Subtest: rust_doctests_kernel",
            "[    1.0]     1..2",
            "[    1.0]     ok 1 rust_doctest_kernel_revocable_rs_0",
            "[    1.0]     ok 2 rust_doctest_kernel_io_rs_0",
            "[    1.0] ok 1 rust_doctests_kernel",
            "pcirig: done",
        ];
        let j = judge(&KUNIT, &console(&few, false), &[]);
        assert_eq!(j.cause, Some(Cause::Checks));
        assert!(
            j.reason.contains("module io: 1 doctests ran, 40 expected"),
            "{}",
            j.reason
        );
        let j = judge(&KUNIT, &console(&few[7..], false), &[]);
        assert!(j.reason.contains("no suites"), "{}", j.reason);
    }

    fn access(seq: u64, offset: u64, value: u64, kind: &str) -> Access {
        super::test_access(seq, "bar0", offset, 4, value, kind)
    }

    const MAGIC_READ: &str = "# mmio r bar0 0x0 4 0x70726967";

    /// A probe that passes every self-test step, reporting one MMIO access
    /// (the MAGIC read); the device saw `magic_read()`.
    fn probe() -> Vec<String> {
        let mut texts = vec![
            "event probe_begin".to_string(),
            "event irq_mode msi".into(),
            MAGIC_READ.into(),
        ];
        texts.extend(driver::STEPS.iter().map(|s| format!("step {s} ok x=1")));
        texts.push("event probe_done".into());
        texts
    }

    fn magic_read(seq: u64) -> Access {
        access(seq, 0, 0x7072_6967, "read")
    }

    /// `[ S ] pci_rig 0000:01:00.0: TEXT`, or `[ S ] TEXT` for the guest's
    /// own `pcirig:` marks.
    fn at(secs: f64, text: &str) -> String {
        if text.starts_with("pcirig:") {
            format!("[{secs:12.6}] {text}")
        } else {
            format!("[{secs:12.6}] pci_rig 0000:01:00.0: {text}")
        }
    }

    /// An unbind with the worker busy, then the guest up 1.1 s longer.
    fn unbind_console() -> Vec<String> {
        let mut lines: Vec<String> = probe().iter().map(|t| at(1.0, t)).collect();
        lines.extend([
            "pcirig: interrupts  25:  12  0  PCI-MSI-0000:01:00.0   0-edge      pci_rig".into(),
            at(2.0, "event remove_begin"),
            at(2.0, "# mmio w bar0 0x50 4 0x1"),
            at(2.001, "event remove_done"),
            at(2.002, "event worker_gave_up reason=Refused accesses=2"),
            at(2.003, "event worker_stopped reason=Refused accesses=2"),
            at(2.003, "event kept_handle refused"),
            at(3.103, "pcirig: settled"),
        ]);
        lines
    }

    fn unbind_log() -> Vec<Access> {
        vec![
            magic_read(1),
            magic_read(2),
            access(3, 0x50, 1, "write"),
            magic_read(4),
        ]
    }

    fn replaced(lines: &[String], from: &str, to: &str) -> Vec<String> {
        let i = lines
            .iter()
            .position(|l| l.ends_with(from))
            .unwrap_or_else(|| panic!("no line ending in {from}"));
        let mut out = lines.to_vec();
        out[i] = out[i].replace(from, to);
        out
    }

    fn without(lines: &[String], text: &str) -> Vec<String> {
        let i = lines.iter().position(|l| l.ends_with(text)).unwrap();
        let mut out = lines.to_vec();
        out.remove(i);
        out
    }

    fn judge_unbind(lines: &[String], log: &[Access]) -> Result<String, String> {
        judged(
            UNBIND.driver().unwrap(),
            &console_of(lines, vec![]),
            &stopped(log),
        )
    }

    #[test]
    fn unbind_passes_with_a_refused_worker_an_exact_device_log_and_a_settled_guest() {
        let ok = judge_unbind(&unbind_console(), &unbind_log()).unwrap();
        assert!(
            ok.contains("worker gave up once remove() returned: reason=Refused accesses=2")
                && ok.contains(
                    "exactly the 2 MMIO accesses the driver reported in 1 bindings, and 2 worker reads"
                )
                && ok.contains("in the 1.1 s the guest stayed up"),
            "{ok}"
        );
    }

    #[test]
    fn unbind_fails_on_a_late_access_a_missing_one_or_a_short_settle() {
        let (lines, log) = (unbind_console(), unbind_log());
        let mut late = log.clone();
        late.push(magic_read(5));
        let e = judge_unbind(&lines, &late).unwrap_err();
        assert!(
            e.contains("1 access nothing the guest reported accounts for"),
            "{e}"
        );
        // The driver's word alone is not enough: its accesses must be in the log.
        let e = judge_unbind(&lines, &log[1..]).unwrap_err();
        assert!(e.contains("binding 1"), "{e}");
        let short = replaced(
            &lines,
            "[    3.103000] pcirig: settled",
            "[    2.503000] pcirig: settled",
        );
        let e = judge_unbind(&short, &log).unwrap_err();
        assert!(
            e.contains("settled only 0.50 s after the first binding ended"),
            "{e}"
        );
        let e = judge_unbind(&without(&lines, "pcirig: settled"), &log).unwrap_err();
        assert!(e.contains("never printed `pcirig: settled`"), "{e}");
    }

    #[test]
    fn the_guest_must_settle_after_the_last_binding_too() {
        let stop = |t: f64| at(t, "event worker_stopped reason=Refused accesses=3");
        // rebind before this change: a settle after the first binding only,
        // the second ended just before poweroff.
        let mut lines = vec![stop(2.0), at(3.2, "pcirig: settled"), stop(4.0)];
        let e = settled(&lines).unwrap_err();
        assert!(
            e.contains("never printed `pcirig: settled` after the last binding ended"),
            "{e}"
        );
        lines.push(at(4.3, "pcirig: settled"));
        let e = settled(&lines).unwrap_err();
        assert!(
            e.contains("settled only 0.30 s after the last binding ended"),
            "{e}"
        );
        lines.push(at(5.2, "pcirig: settled"));
        // The first mark after the end counts: still 0.30 s.
        assert!(settled(&lines).is_err());
        lines.remove(3);
        assert!((settled(&lines).unwrap() - 1.2).abs() < 1e-9);
    }

    #[test]
    fn after_injected_errors_the_worker_must_keep_reading_magic() {
        let c = |injected_ns: Vec<u64>| Console {
            injected_ns,
            ..console_of(&unbind_console(), vec![])
        };
        let device = stopped(&unbind_log());
        assert_eq!(after_injections(&c(vec![]), &device).unwrap(), "");
        // The log's times are its sequence numbers: MAGIC read #4 came after.
        assert_eq!(
            after_injections(&c(vec![1, 3]), &device).unwrap(),
            ", 1 MAGIC reads after the last of 2 injected errors"
        );
        let e = after_injections(&c(vec![4]), &device).unwrap_err();
        assert!(e.contains("the device saw no MAGIC read"), "{e}");
    }

    #[test]
    fn the_interrupt_type_is_the_kernels_word() {
        let listed = |l: &str| vec![format!("pcirig: interrupts {l}")];
        let msi_x86 = " 25:  12  0  PCI-MSI-0000:01:00.0   0-edge      pci_rig";
        let msi_arm = " 16:  14  0  GICv2m-PCI-MSI-0000:01:00.0   0 Edge      pci_rig";
        let intx = " 16:  40  0  IO-APIC  16-fasteoi   pci_rig";
        let intx_riscv = " 11:  15  0  APLIC-MSI-d000000.interrupt-controller  33 Level   -fasteoi   pciehp, pci_rig";
        assert!(listed_as(&listed(intx_riscv), IrqMode::Intx).is_ok());
        assert!(listed_as(&listed(intx_riscv), IrqMode::Msi).is_err());
        assert!(listed_as(&listed(msi_x86), IrqMode::Msi).is_ok());
        assert!(listed_as(&listed(msi_arm), IrqMode::Msi).is_ok());
        assert!(listed_as(&listed(intx), IrqMode::Intx).is_ok());
        // The driver says msi, the kernel's table says a pin (or the reverse).
        let e = listed_as(&listed(intx), IrqMode::Msi).unwrap_err();
        assert!(
            e.contains("lists the driver's interrupt as `16:  40  0  IO-APIC"),
            "{e}"
        );
        assert!(listed_as(&listed(msi_x86), IrqMode::Intx).is_err());
        let e = listed_as(&[], IrqMode::Msi).unwrap_err();
        assert!(e.contains("never listed"), "{e}");
    }

    #[test]
    fn the_storm_is_counted_per_binding() {
        let soft = |t: f64| at(t, "event irq status=0x4 handled=1");
        let mut lines = vec![at(1.0, "event probe_begin")];
        lines.extend((0..30).map(|i| soft(1.0 + f64::from(i) / 100.0)));
        lines.push(at(2.0, "event probe_begin"));
        lines.extend((0..3).map(|i| soft(2.0 + f64::from(i) / 100.0)));
        lines.push(at(3.0, "event irq status=0x1 handled=1"));
        // 33 in all would pass a sum over two bindings of at least 2 × 10;
        // the second binding had 3.
        assert_eq!(soft_irqs_per_binding(&lines), [30, 3]);
        assert_eq!(soft_irqs_per_binding(&lines[..1]), [0]);
    }

    #[test]
    fn a_worker_that_gave_up_in_a_binding_that_went_on_fails() {
        let mut lines = unbind_console();
        let gave_up = lines
            .iter()
            .position(|l| l.contains("worker_gave_up"))
            .unwrap();
        // A second binding's worker, never joined: it gave up while bound.
        lines.insert(
            gave_up + 1,
            at(2.003, "event worker_gave_up reason=Gone accesses=0"),
        );
        let e = judge_unbind(&lines, &unbind_log()).unwrap_err();
        assert!(
            e.contains("a worker gave up while its binding went on"),
            "{e}"
        );
    }

    #[test]
    fn unbind_fails_when_the_worker_stops_wrongly_or_the_handle_is_kept() {
        let (lines, log) = (unbind_console(), unbind_log());
        let gave_up = lines
            .iter()
            .position(|l| l.contains("worker_gave_up"))
            .unwrap();
        let began = lines
            .iter()
            .position(|l| l.contains("remove_begin"))
            .unwrap();
        let mut early = lines.clone();
        early.swap(gave_up, began);
        let e = judge_unbind(&early, &log).unwrap_err();
        assert!(e.contains("at the wrong time"), "{e}");
        let gone = replaced(
            &lines,
            "worker_gave_up reason=Refused accesses=2",
            "worker_gave_up reason=Gone accesses=2",
        );
        let e = judge_unbind(&gone, &log).unwrap_err();
        assert!(
            e.contains("did not stop by itself with reason=Refused"),
            "{e}"
        );
        let kept = replaced(
            &lines,
            "kept_handle refused",
            "kept_handle STILL_ACCESSIBLE",
        );
        let e = judge_unbind(&kept, &log).unwrap_err();
        assert!(e.contains("kept across each of the 1 unbinds"), "{e}");
        let e = judge_unbind(&without(&lines, "kept_handle refused"), &log).unwrap_err();
        assert!(e.contains("kept across"), "{e}");
    }

    #[test]
    fn every_probe_needs_every_self_test_step() {
        let (lines, log) = (unbind_console(), unbind_log());
        let e = judge_unbind(&without(&lines, "step crc32 ok x=1"), &log).unwrap_err();
        assert!(e.contains("probe 1: self-test steps"), "{e}");
        let failed = replaced(&lines, "step invert ok x=1", "step invert FAIL status=0x6");
        let e = judge_unbind(&failed, &log).unwrap_err();
        assert!(
            e.contains("self-test steps failed: invert (status=0x6)"),
            "{e}"
        );
    }

    #[test]
    fn mmio_fails_without_claims_and_with_an_unreported_access() {
        let want = *MMIO.driver().unwrap();
        let lines: Vec<String> = probe().iter().map(|t| at(1.0, t)).collect();
        let log = [magic_read(1), magic_read(2), magic_read(3)];
        let mmio = |lines: &[String], log: &[Access]| {
            judged(&want, &console_of(lines, vec![]), &stopped(log))
        };
        let ok = mmio(&lines, &log).unwrap();
        assert!(
            ok.contains("exactly the 1 MMIO accesses the driver reported"),
            "{ok}"
        );
        let e = mmio(&without(&lines, MAGIC_READ), &log).unwrap_err();
        assert!(e.contains("reported no MMIO access during probe"), "{e}");
        let mut extra = log.to_vec();
        extra.insert(0, access(9, 0x8, 0, "read"));
        let e = mmio(&lines, &extra).unwrap_err();
        assert!(
            e.contains("the device's next access was #9 read bar0 0x8"),
            "{e}"
        );
    }

    #[test]
    fn probe_error_needs_every_refusal_then_a_clean_probe() {
        let want = *PROBE_ERROR.driver().unwrap();
        let refusal = |what: &str, value: &str| {
            vec![
                at(1.0, "event probe_begin"),
                at(1.0, MAGIC_READ),
                at(1.0, &format!("step identify FAIL {what} {value}, …")),
            ]
        };
        let mut lines = refusal("magic", "0xbad0bad");
        lines[1] = at(1.0, "# mmio r bar0 0x0 4 0xbad0bad");
        let mut version = refusal("version", "0x20000");
        version.insert(2, at(1.0, "# mmio r bar0 0x4 4 0x20000"));
        lines.extend(version);
        lines.extend([
            at(2.0, "event probe_begin"),
            at(2.0, MAGIC_READ),
            at(2.0, "step identify ok x=1"),
            at(2.0, "step scratch FAIL no interrupt within 1 s; status=0x2"),
        ]);
        lines.extend(probe().iter().map(|t| at(3.0, t)));
        let log = [
            access(1, 0, 0x0bad_0bad, "read"),
            magic_read(2),
            access(3, 4, 0x2_0000, "read"),
            magic_read(4),
            magic_read(5),
        ];
        let judge_it = |lines: &[String]| judged(&want, &console_of(lines, vec![]), &stopped(&log));
        let ok = judge_it(&lines).unwrap();
        assert!(ok.contains("3 refused (magic, version, interrupt)"), "{ok}");
        let only_magic = [&lines[..3], &lines[7..]].concat();
        let log = [access(1, 0, 0x0bad_0bad, "read"), magic_read(2)];
        let e = judged(&want, &console_of(&only_magic, vec![]), &stopped(&log)).unwrap_err();
        assert!(
            e.contains(
                r#"refused the device for ["magic", "interrupt"], expected ["magic", "version", "interrupt"]"#
            ),
            "{e}"
        );
    }

    #[test]
    fn surprise_needs_the_worker_to_give_up_and_qemu_to_delete_the_device() {
        let mut lines: Vec<String> = probe().iter().map(|t| at(1.0, t)).collect();
        lines.extend([
            at(1.5, "event worker_gave_up reason=Gone accesses=1"),
            at(2.0, "event remove_begin"),
            at(2.0, "# mmio w bar0 0x50 4 0x1"),
            at(2.0, "event remove_done"),
            at(2.1, "event worker_stopped reason=Gone accesses=1"),
            at(2.1, "event kept_handle refused"),
            at(3.2, "pcirig: settled"),
        ]);
        let log = [
            magic_read(1),
            access(2, 0, 0xffff_ffff, "read"),
            access(3, 0x50, 1, "write"),
        ];
        let deleted = serde_json::json!({"event": "DEVICE_DELETED", "data": {"device": "pcirig"}});
        let want = *SURPRISE.driver().unwrap();
        let ok = judged(
            &want,
            &console_of(&lines, vec![deleted.clone()]),
            &stopped(&log),
        );
        assert!(ok
            .unwrap()
            .contains("worker gave up before remove(): reason=Gone"));

        let e = judged(&want, &console_of(&lines, vec![]), &stopped(&log)).unwrap_err();
        assert!(e.contains("DEVICE_DELETED"), "{e}");

        let refused = replaced(
            &lines,
            "reason=Gone accesses=1",
            "reason=Refused accesses=1",
        );
        let e = judged(&want, &console_of(&refused, vec![deleted]), &stopped(&log)).unwrap_err();
        assert!(e.contains("did not stop by itself with reason=Gone"), "{e}");
    }

    #[test]
    fn device_needs_user_space_reports_matching_the_log_exactly() {
        let runner = [
            "KTAP version 1",
            "1..1",
            MAGIC_READ,
            "ok 1 magic",
            "pcirig: done",
        ];
        let mut log = vec![magic_read(1)];
        let j = judge(&DEVICE, &console(&runner, false), &stopped(&log));
        assert_eq!(j.verdict, Verdict::Pass, "{}", j.reason);
        log.push(access(2, 0x8, 0, "write"));
        let j = judge(&DEVICE, &console(&runner, false), &stopped(&log));
        assert_eq!(j.cause, Some(Cause::Device));
        assert!(
            j.reason.contains("1 access nothing the guest reported"),
            "{}",
            j.reason
        );
        let j = judge(
            &DEVICE,
            &console(&[runner[0], runner[1], runner[3], runner[4]], false),
            &stopped(&[]),
        );
        assert!(
            j.reason.contains("expected MMIO reports from user space"),
            "{}",
            j.reason
        );
    }

    fn console_of(lines: &[String], events: Vec<serde_json::Value>) -> Console {
        Console {
            lines: lines.to_vec(),
            timed_out: false,
            exit: Some(ExitStatusExt::from_raw(0)),
            host_failures: vec![],
            injected_ns: vec![],
            oracle: None,
            elapsed: Duration::ZERO,
            arch: vocab::arch::Arch::Arm64,
            syslog: false,
            events,
            phases: Default::default(),
        }
    }

    fn stopped(log: &[Access]) -> Vec<Stopped> {
        use std::os::unix::process::ExitStatusExt;
        vec![Stopped {
            died: None,
            status: std::process::ExitStatus::from_raw(0),
            log: log.to_vec(),
            dma: Vec::new(),
        }]
    }

    #[test]
    fn a_server_that_failed_is_a_death_one_that_saw_qemu_hang_up_is_not() {
        use std::os::unix::process::ExitStatusExt;
        let runner = ["KTAP version 1", "1..1", "ok 1 find_dev", "pcirig: done"];
        let s = Scenario {
            machine: Machine::Device,
            ..Scenario::runner("device-ish", "", Duration::from_secs(60))
        };
        let mut servers = stopped(&[]);
        servers[0].died = Some(std::process::ExitStatus::from_raw(0));
        let j = judge(&s, &console(&runner, false), &servers);
        assert_eq!(j.verdict, Verdict::Pass, "{}", j.reason);
        servers.push(stopped(&[]).remove(0));
        servers[1].died = Some(std::process::ExitStatus::from_raw(1 << 8));
        let j = judge(&s, &console(&runner, false), &servers);
        assert_eq!(j.cause, Some(Cause::Device), "{}", j.reason);
        assert!(j.reason.contains("exit status: 1"), "{}", j.reason);
    }
}
