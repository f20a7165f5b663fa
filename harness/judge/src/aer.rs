//! Error recovery (`DriverExpect::aer`): each uncorrectable AER error the kernel reports, our
//! driver's error handlers' lines (guest-kernel/driver/README.md) and the AER core's outcome,
//! held to what the scenario expects of it, in order.
//!
//! The kernel's lines are its word on what happened (which error, whether recovery succeeded);
//! the driver's `# mmio` and `# dma start` lines inside an episode are backed by the device's
//! logs (the accounting and the DMA oracle), so a re-initialisation the driver claims is one the
//! device saw.

use crate::console::{strip_timestamp, timestamp};
use crate::driver::driver_text;
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

/// Judges the boot's error recovery against `want`; a summary for the verdict.
pub fn judge(lines: &[String], want: &[AerEnd]) -> Result<String, String> {
    let int_enable = format!("# mmio w bar0 {:#x} ", regmap::reg::INT_ENABLE);
    let mut episodes: Vec<Episode> = Vec::new();
    let mut open: Option<Episode> = None;
    // Set once the driver let go, until its binding ends.
    let mut let_go = false;
    for line in lines {
        let text = strip_timestamp(line);
        let fatal = text.contains(FATAL);
        if fatal || text.contains(NON_FATAL) {
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
        if d.starts_with("event remove_begin") {
            let_go = false;
        }
        if let_go && (d.starts_with("# mmio") || d.starts_with("# dma start")) {
            return Err(format!(
                "AER: the driver let the device go, then touched it before its binding ended: `{d}`"
            ));
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
                let_go = answer() == "Disconnect";
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
        return Ok(String::new());
    }
    let times: Vec<String> = episodes
        .iter()
        .zip(&ends)
        .map(|(e, end)| match e.took_ms {
            Some(ms) => format!("{end:?} in {ms:.1} ms"),
            None => format!("{end:?}"),
        })
        .collect();
    Ok(format!(
        ", AER: {} uncorrectable errors, each as expected ({})",
        ends.len(),
        times.join(", ")
    ))
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
        judge(&console(&refs), want)
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
            format!("pcieport 0000:00:01.0: {NON_FATAL} from 0000:00:01.0"),
            format!("{DRV}event aer_detected channel=Normal errors=4 answer=Disconnect"),
            format!("pcieport 0000:00:01.0: {FAILED}"),
        ];
        assert!(judged(&l, &[AerEnd::Disconnected]).is_ok());
        l.push(format!("{DRV}# mmio r bar0 0x0 4 0x70726967"));
        let e = judged(&l, &[AerEnd::Disconnected]).unwrap_err();
        assert!(e.contains("touched it before its binding ended"), "{e}");
        // Its binding's end may touch it again.
        l.insert(3, format!("{DRV}event remove_begin"));
        assert!(judged(&l, &[AerEnd::Disconnected]).is_ok());
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
