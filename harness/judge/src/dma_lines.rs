//! The driver's `# dma` lines (guest-kernel/driver/README.md), the language alone: what each
//! says, parsed. The DMA oracle (`dma.rs`) and the DMA core's record (`dma_core.rs`) judge
//! them; the history (`driver.rs`) collects them per binding.
//!
//! - `# dma map ID KIND IOVA LEN`: a mapping began (KIND `coherent`, `bidirectional`,
//!   `to_device` or `from_device`);
//! - `# dma unmap ID`: it ends (printed before the unmap or free);
//! - `# dma start OP IOVA LEN CRC`: the driver's next doorbell starts a DMA (OP `to_device`,
//!   `from_device` or `crc32`; CRC the CRC-32 of the bytes it put there, `-` for `from_device`);
//! - `# dma received IOVA LEN CRC`: what the driver found there after a `from_device` DMA.

use crate::device_log::DmaDirection;

/// One `# dma` line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Line {
    Map {
        id: u64,
        kind: MapKind,
        iova: u64,
        len: u64,
    },
    Unmap {
        id: u64,
    },
    Start {
        op: Op,
        iova: u64,
        len: u64,
        crc: Option<u32>,
    },
    Received {
        iova: u64,
        len: u64,
        crc: u32,
    },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MapKind {
    Coherent,
    Bidirectional,
    ToDevice,
    FromDevice,
}

impl MapKind {
    /// Whether the device may move data this way in such a mapping.
    pub(crate) fn allows(self, dir: DmaDirection) -> bool {
        match self {
            MapKind::Coherent | MapKind::Bidirectional => true,
            MapKind::ToDevice => dir == DmaDirection::ToDevice,
            MapKind::FromDevice => dir == DmaDirection::FromDevice,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    ToDevice,
    FromDevice,
    Crc32,
}

impl Op {
    /// The device's opcode for it.
    pub(crate) fn opcode(self) -> u64 {
        u64::from(match self {
            Op::ToDevice => regmap::OP_DMA_TO_DEVICE,
            Op::FromDevice => regmap::OP_DMA_FROM_DEVICE,
            Op::Crc32 => regmap::OP_DMA_CRC32,
        })
    }
}

fn number(s: &str) -> Option<u64> {
    match s.strip_prefix("0x") {
        Some(hex) => u64::from_str_radix(hex, 16).ok(),
        None => s.parse().ok(),
    }
}

/// Parses the text of a `# dma …` line; `None` if it is not one, an error if it is one but
/// malformed (a driver that prints a broken line must not pass unseen).
pub fn parse(text: &str) -> Option<Result<Line, String>> {
    let rest = text.trim_end().strip_prefix("# dma ")?;
    let w: Vec<&str> = rest.split_whitespace().collect();
    let n = |i: usize| w.get(i).and_then(|s| number(s));
    let line = match w.first().copied() {
        Some("map") if w.len() == 5 => (|| {
            let kind = match w[2] {
                "coherent" => MapKind::Coherent,
                "bidirectional" => MapKind::Bidirectional,
                "to_device" => MapKind::ToDevice,
                "from_device" => MapKind::FromDevice,
                _ => return None,
            };
            Some(Line::Map {
                id: n(1)?,
                kind,
                iova: n(3)?,
                len: n(4)?,
            })
        })(),
        Some("unmap") if w.len() == 2 => n(1).map(|id| Line::Unmap { id }),
        Some("start") if w.len() == 5 => (|| {
            let op = match w[1] {
                "to_device" => Op::ToDevice,
                "from_device" => Op::FromDevice,
                "crc32" => Op::Crc32,
                _ => return None,
            };
            let crc = match w[4] {
                "-" if op == Op::FromDevice => None,
                s if op != Op::FromDevice => Some(u32::try_from(number(s)?).ok()?),
                _ => return None,
            };
            Some(Line::Start {
                op,
                iova: n(2)?,
                len: n(3)?,
                crc,
            })
        })(),
        Some("received") if w.len() == 4 => (|| {
            Some(Line::Received {
                iova: n(1)?,
                len: n(2)?,
                crc: u32::try_from(n(3)?).ok()?,
            })
        })(),
        _ => None,
    };
    Some(line.ok_or_else(|| format!("a malformed DMA line: `{text}`")))
}
