//! Our driver's rules, over its lines and the device's logs: each binding's self-test steps,
//! its accesses accounted for, its interrupts, its DMA (the DMA oracle and the DMA core's
//! record), the worker's end, and the scenario's expectations (`DriverExpect`).

use crate::accounting;
use crate::device_log::{self as device, Stopped};
use crate::evidence::Console;
use crate::judgement::Accounting;
use crate::requests::SETTLED;
use crate::rules::{rule_on, Rule};
use crate::{acks, config, console, dma, dma_core, driver, oracle, sweep};
use vocab::scenario::{DriverExpect, IrqMode, WorkerStop, STORM_IRQS};

/// Software interrupts each probe's self-test raises (`step irq`).
pub(crate) const SELFTEST_SOFT_IRQS: usize = 10;

/// The driver's lines of /proc/interrupts the guest printed (`pcirig:
/// interrupts …`) agree with `mode`: the kernel names a PCI MSI domain
/// (`PCI-MSI-<bdf>`, `GICv2m-PCI-MSI-<bdf>`) for MSI, and an interrupt
/// controller's pin for INTx (`IO-APIC`, `GIC-0`, and on riscv64 the APLIC,
/// which forwards its wires as MSIs: `APLIC-MSI-… Level`, not a PCI MSI).
/// Not the driver's word: the kernel's own table.
pub(crate) fn listed_as(lines: &[String], mode: IrqMode) -> Result<(), String> {
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
pub(crate) fn soft_irqs_per_binding(lines: &[String]) -> Vec<usize> {
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

/// After each error the host injected (AER), the driver's worker read MAGIC again before the
/// next one, by the device's own log and the host's clock: a binding that survived in name only
/// (its worker gone quiet) fails. `let_go_last`: the driver was expected to let the device go at
/// the last one, after which its worker must not read (`aer::device_left_alone`). Empty when
/// nothing was injected.
pub(crate) fn after_injections(
    c: &Console,
    device: &[Stopped],
    let_go_last: bool,
) -> Result<String, String> {
    let mut injected = c.injected_ns.clone();
    injected.sort_unstable();
    let n = injected.len();
    if n == 0 {
        return Ok(String::new());
    }
    let reads = |from: u64, to: u64| {
        device
            .iter()
            .flat_map(|d| &d.log)
            .filter(|a| {
                a.time_ns > from
                    && a.time_ns < to
                    && a.kind == device::Kind::Read
                    && a.region == device::Region::Bar0
                    && a.offset == regmap::reg::MAGIC
                    // Read right, or all-ones from a hung device: aer.sh hangs it right after
                    // the correctable error (which pauses nothing) and waits for the worker's
                    // read that finds the hang, the one read that window is sure to hold.
                    // After each recovery the guest waits for the worker's `worker_reading`.
                    && (a.value == Some(u64::from(regmap::MAGIC_VALUE))
                        || a.value == Some(u64::from(u32::MAX)))
            })
            .count()
    };
    let checked = if let_go_last { n - 1 } else { n };
    for i in 0..checked {
        let to = injected.get(i + 1).copied().unwrap_or(u64::MAX);
        if reads(injected[i], to) == 0 {
            return Err(format!(
                "after injected error {} of {n} the device saw no MAGIC read before {}: the worker stopped using it",
                i + 1,
                if i + 1 == n { "the end" } else { "the next" }
            ));
        }
    }
    Ok(if let_go_last {
        format!(", MAGIC reads after each of the first {checked} of {n} injected errors (the driver let go at the last)")
    } else {
        format!(
            ", {} MAGIC reads after the last of {n} injected errors",
            reads(injected[n - 1], u64::MAX)
        )
    })
}

/// DMAs each binding that bound made in its self-test (to the device, back, a streaming sum).
pub(crate) const SELFTEST_DMAS: usize = 3;

/// Stream DMAs each binding must have made, at least, where the device offered its stream.
pub const STREAM_ROUNDS: usize = 10;

/// Every binding that bound moved its self-test's DMAs (the oracle checked each); where the
/// device offered its stream, each started it, kept it running and stopped it, and the oracle
/// saw its DMAs; elsewhere none started one.
pub(crate) fn dma_expected(
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
    // The stream scenarios wait for STREAM_ROUNDS `# dma received` lines before they stop it
    // (aer's `sleep 1` at no DMA delay only: some 20 times as many rounds).
    if rounds.iter().any(|&n| n < STREAM_ROUNDS) || streamed < probes * STREAM_ROUNDS {
        return Err(format!(
            "the stream ran {rounds:?} rounds ({streamed} DMAs in the device's log beyond the self-tests'), expected at least {STREAM_ROUNDS} per binding"
        ));
    }
    Ok(format!(", the stream {rounds:?} rounds"))
}

/// The DMA core's record against the driver's `# dma` lines, when the boot asked for it
/// (`dma_core::CMDLINE`); a summary when the driver mapped anything.
pub(crate) fn dma_core_agrees(lines: &[String]) -> Result<String, String> {
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

pub(crate) fn judge_driver(
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
        // irq-unbind.sh waits for these lines before it ends each binding: not a rate.
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
    let n = accounting::account(&history, &device::access_logs(device))?;
    // Before the DMA rules: a binding whose shutdown never ran leaves its stream unstopped,
    // which those would report less to the point.
    let shut_down = crate::shutdown::judge(lines, &history, &n.seqs, device, want.shutdown)?;
    let quiesced = config::quiesced(&n.ended, &device::access_logs(device))?;
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
        true => config::quiesced(&failed_ends, &device::access_logs(device))?,
        false => 0,
    };
    if rule_on(Rule::InterruptsOff) {
        acks::interrupts_off_at_end(&n.probes, &n.ended, &device::access_logs(device))?;
    }
    let irq_counts = acks::irq_count_is_acks(&n.probes, &device::access_logs(device))?;
    let acks = match rule_on(Rule::AckValues) {
        true => acks::acks_are_status_read(&history, &n.seqs, &device::access_logs(device))?,
        false => 0,
    };
    let seen = oracle::of_boot(c.oracle.as_ref(), &c.lines, &history, device)?;
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
    let let_go_last = want.aer.last() == Some(&vocab::scenario::AerEnd::Disconnected);
    let survived = after_injections(c, device, let_go_last)?;
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
        let after = acks::acks_after_reset(&n.probes, &n.ended, &device::access_logs(device));
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
    summary.push_str(&shut_down);
    summary.push_str(&crate::aer::judge(
        lines, &history, &n.seqs, device, want.aer,
    )?);
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
        // Ordered by cause, not by timing: a refusal comes only once the binding ended, after
        // remove() returned; a worker that found the device gone, surprise.sh waits for before
        // it asks for the unplug.
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

/// How long the guest must stay up after the first and after the last
/// binding ended, watching for late device accesses (its `pcirig: settled`
/// mark, written to /dev/kmsg so that it carries a printk stamp). A late
/// access of a binding in between would land in the next binding, whose
/// accesses are accounted for one by one.
pub(crate) const SETTLE_S: f64 = 1.0;

/// The guest stayed up `SETTLE_S` after the first binding ended and, before
/// powering off, after the last; returns the shorter of the two.
pub(crate) fn settled(lines: &[String]) -> Result<f64, String> {
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
        // Not the scheduler's to break: `settle` sleeps 1.2 s from when the unbind (or the
        // removal) returned, and the binding's release prints worker_stopped before either does.
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
pub(crate) fn judge_sweep(
    scenario: &str,
    c: &Console,
    device: &[Stopped],
) -> Result<(String, Accounting, Vec<sweep::PointResult>), String> {
    let lines = &c.lines[..];
    let r = driver::report(lines);
    let history = driver::history(lines)?;
    let points = sweep::points(lines)?;
    let n = accounting::account(&history, &device::access_logs(device))?;
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
    let quiesced = config::quiesced(&n.ended, &device::access_logs(device))?;
    if rule_on(Rule::InterruptsOff) {
        acks::interrupts_off_at_end(&n.probes, &n.ended, &device::access_logs(device))?;
    }
    let irq_counts = acks::irq_count_is_acks(&n.probes, &device::access_logs(device))?;
    let acks = match rule_on(Rule::AckValues) {
        true => acks::acks_are_status_read(&history, &n.seqs, &device::access_logs(device))?,
        false => 0,
    };
    let seen = oracle::of_boot(c.oracle.as_ref(), &c.lines, &history, device)?;
    let dma = dma::check(&history, &n, device, dma::behind_iommu(&c.lines))?;
    let seen = format!("{seen}{}{}", dma.summary(), dma_core_agrees(lines)?);
    let results = sweep::judge(
        scenario,
        &points,
        &history,
        &n.probes,
        &device::access_logs(device),
        lines,
    )?;
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
