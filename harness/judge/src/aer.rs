//! Error recovery (`DriverExpect::aer`): each uncorrectable AER error the kernel reports, our
//! driver's error handlers' lines (guest-kernel/driver/README.md) and the AER core's outcome,
//! held to what the scenario expects of it, in order.
//!
//! The kernel's lines are its word on what happened (which error, whether recovery succeeded);
//! the driver's `# mmio` and `# dma start` lines inside an episode are backed by the device's
//! logs (the accounting and the DMA oracle), so a re-initialisation the driver claims is one the
//! device saw.

use crate::accounting::{binding_claim, ClaimSeqs};
use crate::console::{strip_timestamp, timestamp};
use crate::device_log::{Access, Class, DmaEvent, DmaOutcome, Kind, Region, Stopped};
use crate::driver::{driver_text, Actor};
use vocab::scenario::AerEnd;

const NON_FATAL: &str = "AER: Uncorrectable (Non-Fatal) error message received";
const FATAL: &str = "AER: Uncorrectable (Fatal) error message received";
const SUCCESSFUL: &str = "AER: device recovery successful";
const FAILED: &str = "AER: device recovery failed";

/// One uncorrectable error, from the kernel's report of it to its outcome.
#[derive(Debug, Default)]
struct Episode {
    fatal: bool,
    /// `event aer_detected`: the channel state and the driver's answer.
    detected: Option<(String, String)>,
    mmio_enabled: Option<String>,
    reinit: Option<bool>,
    slot_reset: Option<String>,
    resumed: bool,
    /// INT_ENABLE written after `aer_detected` (interrupts on again after a reset).
    interrupts_enabled: bool,
    /// A DMA started after `aer_detected`.
    dma_started: bool,
    /// The AER core's outcome: recovery successful or failed.
    recovered: Option<bool>,
    /// Milliseconds from the kernel's report to its outcome, by the printk stamps.
    took_ms: Option<f64>,
    began: Option<f64>,
}

impl Episode {
    /// What this episode was, or why it fits none of the expected shapes.
    fn end(&self) -> Result<AerEnd, String> {
        let detected = self
            .detected
            .as_ref()
            .map(|(c, a)| (c.as_str(), a.as_str()));
        let Some((channel, answer)) = detected else {
            return Err("the driver's error_detected never ran".into());
        };
        match (answer, self.recovered) {
            ("Disconnect", Some(false)) if !self.resumed => Ok(AerEnd::Disconnected),
            ("CanRecover", Some(true))
                if !self.fatal
                    && channel == "Normal"
                    && self.mmio_enabled.as_deref() == Some("Recovered")
                    && self.slot_reset.is_none()
                    && self.resumed =>
            {
                Ok(AerEnd::Recovered)
            }
            ("NeedReset", Some(true))
                if self.fatal
                    && channel == "Frozen"
                    && self.reinit == Some(true)
                    && self.interrupts_enabled
                    && self.dma_started
                    && self.slot_reset.as_deref() == Some("Recovered")
                    && self.resumed =>
            {
                Ok(AerEnd::Reset)
            }
            _ => Err(format!("{self:?}")),
        }
    }
}

/// The value of `key=` in an event's text.
fn field<'a>(text: &'a str, key: &str) -> Option<&'a str> {
    text.split_whitespace()
        .find_map(|w| w.strip_prefix(key)?.strip_prefix('='))
}

/// Judges the boot's error recovery against `want`, by the console and by the device's logs;
/// a summary for the verdict.
pub fn judge(
    lines: &[String],
    history: &[Actor],
    seqs: &ClaimSeqs,
    device: &[Stopped],
    want: &[AerEnd],
) -> Result<String, String> {
    let (mut summary, let_gos) = judge_console(lines, want)?;
    if device_left_alone(&let_gos, history, seqs, device)? > 0 {
        summary.push_str(
            "; each time the driver let go, the device saw its RESET and nothing more of the binding's until its end",
        );
    }
    for hang in hangs_ended_by_reset(device)? {
        summary.push_str(&format!("; {hang}"));
    }
    let resets = device_resets(device)?;
    // Function resets outside recovery (`pci_reset_function`), each the driver's prepare, its
    // setting up again and its done, in order.
    let function_resets = function_resets(lines)?;
    let want_resets = want.iter().filter(|e| **e == AerEnd::Reset).count() + function_resets;
    if resets != want_resets {
        return Err(format!(
            "AER: the device logged {resets} resets while bound and used again, the recoveries and function resets expected {want_resets}"
        ));
    }
    if function_resets > 0 {
        summary.push_str(&format!(
            "; {function_resets} function resets, each prepared for and set up again after"
        ));
    }
    if resets == 0 {
        return Ok(summary);
    }
    Ok(format!(
        "{summary}; the device saw each of the {resets} resets, then interrupts enabled again before the next operation and a DMA that moved its data"
    ))
}

/// The function resets the driver went through outside error recovery: `reset_prepare`, then
/// `reset_reinit ok`, then `reset_done`, each in that order.
fn function_resets(lines: &[String]) -> Result<usize, String> {
    let mut done = 0;
    let mut step = 0;
    for d in lines.iter().filter_map(|l| driver_text(l)) {
        let want = [
            "event reset_prepare",
            "event reset_reinit",
            "event reset_done",
        ];
        let Some(at) = want.iter().position(|w| d.starts_with(w)) else {
            continue;
        };
        if at != step || (at == 1 && !d.starts_with("event reset_reinit ok")) {
            return Err(format!(
                "a function reset: `{d}` where `{}` was due",
                want[step]
            ));
        }
        step = (step + 1) % want.len();
        done += usize::from(step == 0);
    }
    if step != 0 {
        return Err(format!(
            "a function reset never ended: `{}` never came",
            [
                "event reset_prepare",
                "event reset_reinit ok",
                "event reset_done"
            ][step]
        ));
    }
    Ok(done)
}

/// The device's witness that each hang (a `hang` fault: its BARs answer nothing until a reset)
/// ended the only way it can, in a whole-device reset, after which MAGIC read right again: the
/// recovery went through the device, not around it; and that the internal error the device
/// recorded for it in its AER capability was read and cleared (our driver's `error_detected`
/// reads and clears it; the PCI core's restore of config space after the reset clears it too).
/// A summary of each.
fn hangs_ended_by_reset(device: &[Stopped]) -> Result<Vec<String>, String> {
    let hang = Some(qemu_device::model::FaultKind::Hang);
    let mut seen = Vec::new();
    for server in device {
        for strike in server.log.iter().filter(|a| a.fault == hang) {
            let reset = server.dma.iter().find_map(|e| match e {
                DmaEvent::Reset { seq, .. } if *seq > strike.seq => Some(*seq),
                _ => None,
            });
            let Some(reset) = reset else {
                return Err(format!(
                    "AER: the device hung at access #{} and no reset brought it back",
                    strike.seq
                ));
            };
            let aer_status = qemu_device::model::config::AER_UNCOR_STATUS as u64;
            let internal = u64::from(qemu_device::model::config::AER_UNCOR_INTERNAL);
            let status = |kind: Kind| {
                server.log.iter().find(|a| {
                    a.seq > strike.seq
                        && a.region == Region::Config
                        && a.kind == kind
                        && a.offset == aer_status
                        && a.value.is_some_and(|v| v & internal != 0)
                })
            };
            let (Some(read), Some(cleared)) = (status(Kind::Read), status(Kind::Write)) else {
                return Err(format!(
                    "AER: the device hung at access #{} and recorded an internal error in its AER capability, which nothing read and cleared",
                    strike.seq
                ));
            };
            let unanswered = server
                .log
                .iter()
                .filter(|a| a.seq >= strike.seq && a.seq < reset && a.class == Class::Hung)
                .count();
            let magic = server.log.iter().find(|a| {
                a.seq > reset
                    && a.kind == Kind::Read
                    && a.region == Region::Bar0
                    && a.offset == regmap::reg::MAGIC
                    && a.value == Some(u64::from(regmap::MAGIC_VALUE))
            });
            let Some(magic) = magic else {
                return Err(format!(
                    "AER: the device hung at access #{}; after its reset (before access #{reset}) MAGIC never read right again",
                    strike.seq
                ));
            };
            seen.push(format!(
                "the device hung at access #{} ({unanswered} accesses unanswered), its AER record of it read at #{} and cleared at #{}, was reset before #{reset} and read MAGIC again at #{}",
                strike.seq, read.seq, cleared.seq, magic.seq
            ));
        }
    }
    Ok(seen)
}

/// The device's own witness of reset recoveries: each whole-device reset it logged once a
/// driver had turned interrupts on (the one at power-on comes before) and after which the
/// device was used again (QEMU also resets a device it unplugs or powers off, which nothing
/// uses after) must be followed in its access log by an INT_ENABLE write turning sources on
/// before the next doorbell, and by a DMA that moved its data before any later reset. Returns
/// how many there were.
pub fn device_resets(device: &[Stopped]) -> Result<usize, String> {
    let mut n = 0;
    for server in device {
        let bar0_write = |a: &&Access, offset: u64| {
            a.region == Region::Bar0 && a.kind == Kind::Write && a.offset == offset
        };
        let enables =
            |a: &&Access| bar0_write(a, regmap::reg::INT_ENABLE) && a.value.is_some_and(|v| v != 0);
        let Some(first) = server.log.iter().find(enables) else {
            continue;
        };
        let resets: Vec<u64> = server
            .dma
            .iter()
            .filter_map(|e| match e {
                DmaEvent::Reset { seq, .. } if *seq > first.seq => Some(*seq),
                _ => None,
            })
            .collect();
        for (i, &at) in resets.iter().enumerate() {
            let until = resets.get(i + 1).copied().unwrap_or(u64::MAX);
            if set_up_again(server, at, until)
                .map_err(|e| format!("AER: after the device's reset before access #{at}, {e}"))?
            {
                n += 1;
            }
        }
    }
    Ok(n)
}

/// After the device lost its registers before access `at` (a reset, a power-up from D3hot),
/// up to access `until`: whether the driver started an operation again and, if it did, that
/// it turned interrupts on before that doorbell and that a DMA moved data. Read only, or not
/// used at all: nothing to judge (`false`).
pub(crate) fn set_up_again(server: &Stopped, at: u64, until: u64) -> Result<bool, String> {
    let bar0_write = |a: &&Access, offset: u64| {
        a.region == Region::Bar0 && a.kind == Kind::Write && a.offset == offset
    };
    let enables =
        |a: &&Access| bar0_write(a, regmap::reg::INT_ENABLE) && a.value.is_some_and(|v| v != 0);
    let mut after = server.log.iter().filter(|a| a.seq >= at && a.seq < until);
    let enabled = after.clone().find(enables).map(|a| a.seq);
    let doorbell = after
        .find(|a| bar0_write(a, regmap::reg::CMD))
        .map(|a| a.seq);
    match (enabled, doorbell) {
        (_, None) => return Ok(false),
        (Some(e), Some(d)) if e < d => {}
        (e, Some(d)) => {
            return Err(format!(
                "the doorbell #{d} came with its interrupts still off (INT_ENABLE turned on again: {e:?}): the driver did not re-initialise the device"
            ))
        }
    }
    let moved = server.dma.iter().any(|e| {
        matches!(e, DmaEvent::Dma { seq, outcome: DmaOutcome::Ok, .. } if *seq >= at && *seq < until)
    });
    if !moved {
        return Err("no DMA moved data".into());
    }
    Ok(true)
}

/// Where a driver let its device go: the binding (from 1) and the index, among that binding's
/// `# mmio` reports, of the RESET that stopped the device.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LetGo {
    pub binding: usize,
    pub reset: usize,
}

/// The console's part of [`judge`]: a summary, and where the driver let go.
fn judge_console(lines: &[String], want: &[AerEnd]) -> Result<(String, Vec<LetGo>), String> {
    let int_enable = format!("# mmio w bar0 {:#x} ", regmap::reg::INT_ENABLE);
    let mut episodes: Vec<Episode> = Vec::new();
    let mut open: Option<Episode> = None;
    // Set once the driver let go, until its binding ends; then whether it stopped the device.
    let mut let_go = false;
    let mut stopped = false;
    let mut let_gos = Vec::new();
    // The binding (from 1) and its `# mmio` reports so far.
    let (mut binding, mut reports) = (0, 0);
    let reset = format!(
        "# mmio w bar0 {:#x} 4 {:#x}",
        regmap::reg::RESET,
        regmap::RESET_KEY
    );
    for line in lines {
        let text = strip_timestamp(line);
        let fatal = text.contains(FATAL);
        if fatal || text.contains(NON_FATAL) {
            // Not a race: the AER core recovers one error at a time, and aer.sh waits for each
            // outcome before it injects the next.
            if let Some(e) = open.take() {
                return Err(format!(
                    "AER: an uncorrectable error was reported before the last one's recovery ended ({e:?})"
                ));
            }
            open = Some(Episode {
                fatal,
                began: timestamp(line),
                ..Episode::default()
            });
            continue;
        }
        if text.contains(SUCCESSFUL) || text.contains(FAILED) {
            let Some(mut e) = open.take() else {
                return Err(format!(
                    "AER: `{text}` with no uncorrectable error before it"
                ));
            };
            e.recovered = Some(text.contains(SUCCESSFUL));
            e.took_ms = e.began.zip(timestamp(line)).map(|(b, d)| (d - b) * 1000.0);
            episodes.push(e);
            continue;
        }
        let Some(d) = driver_text(line) else { continue };
        if d.starts_with("event probe_begin") {
            (binding, reports) = (binding + 1, 0);
        }
        if d.starts_with("event remove_begin") {
            let_go = false;
        }
        if let_go && !stopped && d == reset {
            // Letting go, it stops the device first: the device's log must hold nothing of
            // the binding's after this until its end (`device_left_alone`).
            stopped = true;
            let_gos.push(LetGo {
                binding,
                reset: reports,
            });
        } else if let_go && (d.starts_with("# mmio") || d.starts_with("# dma start")) {
            return Err(format!(
                "AER: the driver let the device go, then touched it before its binding ended: `{d}`"
            ));
        }
        if d.starts_with("# mmio") {
            reports += 1;
        }
        let Some(event) = d.strip_prefix("event aer_") else {
            if let Some(e) = open.as_mut().filter(|e| e.detected.is_some()) {
                e.interrupts_enabled |= d.starts_with(&int_enable);
                e.dma_started |= d.starts_with("# dma start");
            }
            continue;
        };
        let Some(e) = open.as_mut() else {
            return Err(format!(
                "AER: the driver's `event aer_{event}` with no uncorrectable error being recovered"
            ));
        };
        let answer = || field(event, "answer").unwrap_or("").to_string();
        match event.split(' ').next().unwrap_or("") {
            "detected" => {
                let channel = field(event, "channel").unwrap_or("").to_string();
                (let_go, stopped) = (answer() == "Disconnect", false);
                e.detected = Some((channel, answer()));
            }
            "mmio_enabled" => e.mmio_enabled = Some(answer()),
            "reinit" => e.reinit = Some(event.starts_with("reinit ok")),
            "slot_reset" => e.slot_reset = Some(answer()),
            "resume" => e.resumed = true,
            other => return Err(format!("AER: an unknown driver line `event aer_{other}`")),
        }
    }
    if let Some(e) = open {
        return Err(format!(
            "AER: an uncorrectable error's recovery never ended ({e:?})"
        ));
    }
    let disconnects = episodes
        .iter()
        .filter(|e| e.detected.as_ref().is_some_and(|(_, a)| a == "Disconnect"))
        .count();
    if let_gos.len() != disconnects {
        return Err(format!(
            "AER: the driver let the device go {disconnects} times and stopped it (RESET) right after {} times",
            let_gos.len()
        ));
    }
    let ends = episodes
        .iter()
        .enumerate()
        .map(|(i, e)| {
            e.end()
                .map_err(|why| format!("AER: uncorrectable error {}: {why}", i + 1))
        })
        .collect::<Result<Vec<_>, _>>()?;
    if ends != want {
        return Err(format!(
            "AER: the binding came out of the uncorrectable errors as {ends:?}, expected {want:?}"
        ));
    }
    if ends.is_empty() {
        return Ok((String::new(), let_gos));
    }
    let times: Vec<String> = episodes
        .iter()
        .zip(&ends)
        .map(|(e, end)| match e.took_ms {
            Some(ms) => format!("{end:?} in {ms:.1} ms"),
            None => format!("{end:?}"),
        })
        .collect();
    Ok((
        format!(
            ", AER: {} uncorrectable errors, each as expected ({})",
            ends.len(),
            times.join(", ")
        ),
        let_gos,
    ))
}

/// The device's witness that a driver which let it go left it alone: nothing in its log after
/// the RESET that stopped it until the binding's next report (its end). The worker's reads,
/// which the driver does not report, would be there. Returns how many were checked.
fn device_left_alone(
    let_gos: &[LetGo],
    history: &[Actor],
    seqs: &ClaimSeqs,
    device: &[Stopped],
) -> Result<usize, String> {
    for g in let_gos {
        let claim = |i: usize| binding_claim(history, seqs, g.binding, i);
        let Some((server, reset)) = claim(g.reset) else {
            return Err(format!(
                "AER: binding {}'s RESET when it let go is not in the device's log",
                g.binding
            ));
        };
        let next = claim(g.reset + 1).map_or(u64::MAX, |(_, s)| s);
        if let Some(a) = device[server]
            .log
            .iter()
            .find(|a| a.seq > reset && a.seq < next && a.region != Region::Config)
        {
            return Err(format!(
                "AER: binding {} let the device go (its RESET, access #{reset}), yet the device saw access #{} ({} {} {:#x}) before the binding's next report: something of the driver's still used it",
                g.binding, a.seq, a.kind, a.region, a.offset
            ));
        }
    }
    Ok(let_gos.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn console(lines: &[&str]) -> Vec<String> {
        lines
            .iter()
            .enumerate()
            .map(|(i, l)| format!("<6>[    3.{:06}] {l}", i * 1000))
            .collect()
    }

    const DRV: &str = "pci_rig 0000:01:00.0: ";

    fn fatal_episode(reinit: &[&str]) -> Vec<String> {
        let mut l = vec![format!("pcieport 0000:00:01.0: {FATAL} from 0000:00:01.0")];
        l.push(format!(
            "{DRV}event aer_detected channel=Frozen errors=1 answer=NeedReset"
        ));
        l.push("pcieport 0000:00:01.0: AER: Root Port link has been reset (0)".into());
        l.extend(reinit.iter().map(|r| format!("{DRV}{r}")));
        l.push(format!("{DRV}event aer_slot_reset answer=Recovered"));
        l.push(format!("{DRV}event aer_resume"));
        l.push(format!("pcieport 0000:00:01.0: {SUCCESSFUL}"));
        l
    }

    const REINIT: &[&str] = &[
        "# mmio w bar0 0x34 4 0x7",
        "# dma start to_device 0x1000 0x400 0x5d3de8ed",
        "event aer_reinit ok",
    ];

    fn judged(lines: &[String], want: &[AerEnd]) -> Result<String, String> {
        let refs: Vec<&str> = lines.iter().map(String::as_str).collect();
        judge_console(&console(&refs), want).map(|(summary, _)| summary)
    }

    #[test]
    fn a_function_reset_is_prepared_for_and_set_up_again_after() {
        let lines = |events: &[&str]| -> Vec<String> {
            console(
                &events
                    .iter()
                    .map(|e| format!("{DRV}{e}"))
                    .collect::<Vec<_>>()
                    .iter()
                    .map(String::as_str)
                    .collect::<Vec<_>>(),
            )
        };
        let whole = [
            "event reset_prepare",
            "event reset_reinit ok",
            "event reset_done",
        ];
        assert_eq!(function_resets(&lines(&whole)).unwrap(), 1);
        assert_eq!(function_resets(&lines(&[])).unwrap(), 0);
        let e = function_resets(&lines(&[whole[0], whole[2]])).unwrap_err();
        assert!(
            e.contains("`event reset_done` where `event reset_reinit` was due"),
            "{e}"
        );
        let e = function_resets(&lines(&[
            whole[0],
            "event reset_reinit FAIL fill=false dma=None",
        ]))
        .unwrap_err();
        assert!(e.contains("reset_reinit FAIL"), "{e}");
        let e = function_resets(&lines(&whole[..2])).unwrap_err();
        assert!(e.contains("never ended"), "{e}");
    }

    #[test]
    fn a_hang_must_end_in_a_reset_after_which_magic_reads_right() {
        use crate::device_log::test_access;
        use std::os::unix::process::ExitStatusExt;
        let magic = u64::from(regmap::MAGIC_VALUE);
        let server = |log: Vec<Access>, dma: Vec<DmaEvent>| Stopped {
            died: None,
            status: std::process::ExitStatus::from_raw(0),
            log,
            dma,
        };
        let status = qemu_device::model::config::AER_UNCOR_STATUS as u64;
        let internal = u64::from(qemu_device::model::config::AER_UNCOR_INTERNAL);
        let mut log = vec![
            test_access(1, "bar0", 0, 4, magic, "read"),
            test_access(2, "bar0", 0, 4, u64::from(u32::MAX), "read"),
            test_access(3, "bar0", 0, 4, u64::from(u32::MAX), "read"),
            test_access(5, "bar0", 0, 4, magic, "read"),
            test_access(6, "config", status, 4, internal, "read"),
            test_access(7, "config", status, 4, internal, "write"),
        ];
        log[1].fault = Some(qemu_device::model::FaultKind::Hang);
        log[1].class = Class::Hung;
        log[2].class = Class::Hung;
        let reset = DmaEvent::Reset { seq: 4, time_ns: 4 };
        let ok = hangs_ended_by_reset(&[server(log.clone(), vec![reset.clone()])]).unwrap();
        assert_eq!(
            ok,
            ["the device hung at access #2 (2 accesses unanswered), its AER record of it read at #6 and cleared at #7, was reset before #4 and read MAGIC again at #5"]
        );
        let e =
            hangs_ended_by_reset(&[server(log[..5].to_vec(), vec![reset.clone()])]).unwrap_err();
        assert!(e.contains("which nothing read and cleared"), "{e}");
        let e = hangs_ended_by_reset(&[server(log.clone(), vec![])]).unwrap_err();
        assert!(e.contains("no reset brought it back"), "{e}");
        let no_magic: Vec<Access> = log.iter().filter(|a| a.seq != 5).cloned().collect();
        let e = hangs_ended_by_reset(&[server(no_magic, vec![reset])]).unwrap_err();
        assert!(e.contains("MAGIC never read right again"), "{e}");
        log[1].fault = None;
        assert!(hangs_ended_by_reset(&[server(log, vec![])])
            .unwrap()
            .is_empty());
    }

    #[test]
    fn a_fatal_error_recovered_with_reinit_passes_and_without_fails() {
        let ok = judged(&fatal_episode(REINIT), &[AerEnd::Reset]).unwrap();
        assert!(
            ok.contains("1 uncorrectable errors, each as expected (Reset in"),
            "{ok}"
        );
        // No INT_ENABLE write after the reset: the device's interrupts stay off.
        let e = judged(&fatal_episode(&REINIT[1..]), &[AerEnd::Reset]).unwrap_err();
        assert!(e.contains("interrupts_enabled: false"), "{e}");
        // Recovered, but expected to be let go.
        let e = judged(&fatal_episode(REINIT), &[AerEnd::Disconnected]).unwrap_err();
        assert!(
            e.contains("came out of the uncorrectable errors as [Reset]"),
            "{e}"
        );
    }

    #[test]
    fn a_driver_that_lets_go_must_not_touch_the_device_again() {
        let mut l = vec![
            format!("{DRV}event probe_begin"),
            format!("pcieport 0000:00:01.0: {NON_FATAL} from 0000:00:01.0"),
            format!("{DRV}event aer_detected channel=Normal errors=4 answer=Disconnect"),
            format!("{DRV}# mmio w bar0 0x50 4 0x1"),
            format!("pcieport 0000:00:01.0: {FAILED}"),
        ];
        let refs: Vec<&str> = l.iter().map(String::as_str).collect();
        let (_, let_gos) = judge_console(&console(&refs), &[AerEnd::Disconnected]).unwrap();
        assert_eq!(
            let_gos,
            [LetGo {
                binding: 1,
                reset: 0
            }]
        );
        l.push(format!("{DRV}# mmio r bar0 0x0 4 0x70726967"));
        let e = judged(&l, &[AerEnd::Disconnected]).unwrap_err();
        assert!(e.contains("touched it before its binding ended"), "{e}");
        // Its binding's end may touch it again.
        l.insert(5, format!("{DRV}event remove_begin"));
        assert!(judged(&l, &[AerEnd::Disconnected]).is_ok());
        // Letting go without stopping the device first.
        l.remove(3);
        let e = judged(&l, &[AerEnd::Disconnected]).unwrap_err();
        assert!(e.contains("stopped it (RESET) right after 0 times"), "{e}");
    }

    #[test]
    fn handlers_without_an_error_or_an_error_without_an_end_fail() {
        let stray = vec![format!("{DRV}event aer_resume")];
        assert!(judged(&stray, &[])
            .unwrap_err()
            .contains("no uncorrectable error"));
        let unended = vec![format!("pcieport 0000:00:01.0: {NON_FATAL}")];
        assert!(judged(&unended, &[]).unwrap_err().contains("never ended"));
        assert_eq!(judged(&[], &[]).unwrap(), "");
    }
}
