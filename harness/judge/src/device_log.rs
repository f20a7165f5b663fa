//! Our device's logs as the judge reads them: its access log (the device model's own types),
//! its DMA log, the server's end, and the accesses the guest says it made (`# mmio`).

use std::process::ExitStatus;

/// QEMU's id for the device, so hot-unplug can name it.
pub const QEMU_ID: &str = "pcirig";

/// Whether a QMP event says QEMU finished unplugging our device.
pub fn deleted(event: &serde_json::Value) -> bool {
    event["event"] == "DEVICE_DELETED" && event["data"]["device"] == QEMU_ID
}

/// A line of the device's DMA log.
pub use qemu_device::model::dma::{
    Direction as DmaDirection, Event as DmaEvent, Outcome as DmaOutcome,
};
/// The device's access-log entry and its parts: the device model's own types.
pub use qemu_device::model::{Access, Class, Kind, Region};

pub struct Stopped {
    /// The exit status if the server was already gone when asked to stop.
    pub died: Option<ExitStatus>,
    pub status: ExitStatus,
    pub log: Vec<Access>,
    /// The device's DMA log: QEMU's maps and unmaps, and every DMA.
    pub dma: Vec<DmaEvent>,
}

/// Each server's access log, in attach order.
pub fn access_logs(device: &[Stopped]) -> Vec<&[Access]> {
    device.iter().map(|d| &d.log[..]).collect()
}

/// An MMIO access the guest says it made: `# mmio r|w bar0|bar2 OFFSET SIZE VALUE`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Claimed {
    pub kind: Kind,
    /// As the guest wrote it: a region the device does not have matches nothing.
    pub region: String,
    pub offset: u64,
    pub size: u32,
    pub value: u64,
}

impl Claimed {
    /// Whether `a` is this access: same kind, place, size and value.
    pub fn is(&self, a: &Access) -> bool {
        a.kind == self.kind
            && a.region.name() == self.region
            && a.offset == self.offset
            && a.size == self.size
            && a.value == Some(self.value)
    }
}

fn number(s: &str) -> Option<u64> {
    match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(hex) => u64::from_str_radix(hex, 16).ok(),
        None => s.parse().ok(),
    }
}

pub fn parse_claim(line: &str) -> Option<Claimed> {
    let mut w = line.trim_end().strip_prefix("# mmio ")?.split_whitespace();
    let kind = match w.next()? {
        "r" => Kind::Read,
        "w" => Kind::Write,
        _ => return None,
    };
    Some(Claimed {
        kind,
        region: w.next()?.to_string(),
        offset: number(w.next()?)?,
        size: number(w.next()?)? as u32,
        value: number(w.next()?)?,
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
        class: Class::Ok,
        fault: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_guest_claims() {
        let c = parse_claim("# mmio w bar0 0x8 4 0xA5A55A5A").unwrap();
        assert_eq!(
            c,
            Claimed {
                kind: Kind::Write,
                region: "bar0".into(),
                offset: 8,
                size: 4,
                value: 0xa5a5_5a5a
            }
        );
        assert_eq!(parse_claim("# mmio x bar0 0x8 4 0x1"), None);
        assert_eq!(parse_claim("ok 1 mmio"), None);
    }
}
