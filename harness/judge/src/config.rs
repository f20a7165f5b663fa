//! Config space at each binding's end, by the device's own log: between a
//! binding's last BAR access and the device's next one (or the end of its
//! log), the device must at some moment have had bus mastering and MSI both
//! off. That is what the binding's device-managed resources undo when it
//! ends (`pci::Device::enable_device_mem`'s disable clears bus mastering,
//! the freed vectors disable MSI): the driver never prints it, the device
//! sees the PCI core's config writes.
//!
//! The state is the device's config space as the log's writes left it
//! (reads change nothing; the device model starts from zeroes in the
//! command register and the MSI control word).

use crate::accounting::Ended;
use crate::device_log::{Access, Kind, Region};
use qemu_device::model::config::{CMD_MASTER, MSI_CAP, MSI_ENABLE};

/// The command register's offset.
const COMMAND: usize = 0x04;
/// The MSI capability's Message Control word.
const MSI_CONTROL: usize = MSI_CAP + 2;

/// Config space as a log's writes leave it.
struct Shadow([u8; 256]);

impl Shadow {
    fn write(&mut self, a: &Access) {
        let Some(value) = a.value else { return };
        for i in 0..u64::from(a.size.min(8)) {
            if let Some(b) = self.0.get_mut((a.offset + i) as usize) {
                *b = (value >> (8 * i)) as u8;
            }
        }
    }

    fn word(&self, at: usize) -> u16 {
        u16::from_le_bytes([self.0[at], self.0[at + 1]])
    }

    fn master(&self) -> bool {
        self.word(COMMAND) & CMD_MASTER != 0
    }

    fn msi(&self) -> bool {
        self.word(MSI_CONTROL) & MSI_ENABLE != 0
    }

    fn quiet(&self) -> bool {
        !self.master() && !self.msi()
    }
}

/// What of bus mastering and MSI the config writes `log` saw before `ns` (the host's clock)
/// left on, with the registers' values; `None`: both off.
pub fn on_at(log: &[Access], ns: u64) -> Option<String> {
    let mut shadow = Shadow([0; 256]);
    for a in log
        .iter()
        .take_while(|a| a.time_ns < ns)
        .filter(|a| a.region == Region::Config && a.kind == Kind::Write)
    {
        shadow.write(a);
    }
    let on: Vec<&str> = [("bus mastering", shadow.master()), ("MSI", shadow.msi())]
        .iter()
        .filter(|(_, on)| *on)
        .map(|(what, _)| *what)
        .collect();
    (!on.is_empty()).then(|| {
        format!(
            "{} on (command 0x{:x}, MSI control 0x{:x})",
            on.join(" and "),
            shadow.word(COMMAND),
            shadow.word(MSI_CONTROL)
        )
    })
}

/// Checks every ended binding (`servers`: each device server's whole log,
/// in attach order); returns how many were checked.
pub fn quiesced(ended: &[Ended], servers: &[&[Access]]) -> Result<usize, String> {
    for e in ended {
        let log = servers.get(e.server).copied().unwrap_or_default();
        // A server that died (a `die` fault) logged nothing after: what the
        // binding's end wrote never reached a device.
        if log.last().is_some_and(crate::accounting::died_at) {
            continue;
        }
        let mut shadow = Shadow([0; 256]);
        let mut quiet = false;
        let mut until = None;
        for a in log {
            let config = a.region == Region::Config;
            if a.seq > e.last && !config {
                until = Some(a);
                break;
            }
            if config && a.kind == Kind::Write {
                shadow.write(a);
            }
            quiet |= a.seq >= e.last && shadow.quiet();
        }
        if !quiet {
            let left = [("bus mastering", shadow.master()), ("MSI", shadow.msi())]
                .iter()
                .filter(|(_, on)| *on)
                .map(|(what, _)| *what)
                .collect::<Vec<_>>()
                .join(" and ");
            return Err(format!(
                "binding {}: from its last access (#{}) to {} the device's config space never had bus mastering and MSI both off ({left} on; command 0x{:x}, MSI control 0x{:x}): a binding's end must disable the device and free its MSI vectors",
                e.binding,
                e.last,
                until.map_or("the end of its log".to_string(), |a| format!(
                    "the next BAR access (#{})",
                    a.seq
                )),
                shadow.word(COMMAND),
                shadow.word(MSI_CONTROL),
            ));
        }
    }
    Ok(ended.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::device_log::test_access as access;

    /// Probe: memory and bus mastering on, MSI on; a BAR read; then what
    /// the binding's end writes (`tail`), then a BAR read by the next one.
    fn log(tail: &[(u64, u32, u64)]) -> Vec<Access> {
        let mut l = vec![
            access(1, "config", 4, 2, 0x6, "write"),
            access(2, "config", 0x42, 2, 0x81, "write"),
            access(3, "bar0", 0, 4, 0x7072_6967, "read"),
        ];
        for (i, &(offset, size, value)) in tail.iter().enumerate() {
            l.push(access(4 + i as u64, "config", offset, size, value, "write"));
        }
        l.push(access(
            4 + tail.len() as u64,
            "bar0",
            0,
            4,
            0x7072_6967,
            "read",
        ));
        l
    }

    fn ended(last: u64) -> [Ended; 1] {
        [Ended {
            binding: 1,
            server: 0,
            last,
        }]
    }

    #[test]
    fn a_binding_end_that_turns_off_mastering_and_msi_passes() {
        // Linux 6.12's order: MSI off, INTx back on, bus mastering off;
        // then the next probe turns both on again.
        let l = log(&[
            (0x42, 2, 0x80),
            (4, 2, 0x406),
            (4, 2, 0x6),
            (4, 2, 0x2),
            (4, 2, 0x6),
            (0x42, 2, 0x81),
        ]);
        assert_eq!(quiesced(&ended(3), &[&l]), Ok(1));
        // Both off by the end of the log (the last binding, then poweroff).
        let mut last = log(&[(0x42, 2, 0x80), (4, 2, 0x2)]);
        last.pop();
        assert_eq!(quiesced(&ended(3), &[&last]), Ok(1));
    }

    #[test]
    fn a_device_left_mastering_or_with_msi_on_fails() {
        // The disable never came (user space kept the device enabled).
        let l = log(&[(0x42, 2, 0x80)]);
        let e = quiesced(&ended(3), &[&l]).unwrap_err();
        assert!(
            e.contains("binding 1: from its last access (#3) to the next BAR access (#5)"),
            "{e}"
        );
        assert!(
            e.contains("(bus mastering on; command 0x6, MSI control 0x80)"),
            "{e}"
        );
        // MSI never freed, and nothing after the end at all.
        let mut l = log(&[(4, 2, 0x2)]);
        l.pop();
        let e = quiesced(&ended(3), &[&l]).unwrap_err();
        assert!(e.contains("to the end of its log"), "{e}");
        assert!(e.contains("(MSI on;"), "{e}");
        // Each off, but never both at once: MSI on again before mastering
        // went off.
        let l = log(&[(0x42, 2, 0x80), (0x42, 2, 0x81), (4, 2, 0x2)]);
        assert!(quiesced(&ended(3), &[&l]).is_err());
    }

    #[test]
    fn the_state_before_the_binding_ended_does_not_count() {
        // Both off during probe (before #3), never after it.
        let mut l = vec![access(1, "config", 4, 2, 0x0, "write")];
        l.extend(log(&[]).into_iter().map(|mut a| {
            a.seq += 1;
            a
        }));
        let e = quiesced(&ended(4), &[&l]).unwrap_err();
        assert!(e.contains("bus mastering and MSI on"), "{e}");
    }
}
