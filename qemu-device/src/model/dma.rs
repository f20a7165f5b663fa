//! The DMA engine's side of guest memory: the windows QEMU mapped for the device (vfio-user
//! DMA_MAP/DMA_UNMAP), each backed by memory the transport mapped from QEMU's file descriptor,
//! and the log of every map, unmap and DMA: the host's record of what the device did to memory.

use serde::{Deserialize, Serialize};
use std::fmt::Debug;
use std::sync::Arc;

/// Guest memory the device can reach, addressed from 0 to `size()`: the transport's mapping of
/// QEMU's file descriptor, or a vector in tests.
pub trait GuestMemory: Send + Sync + Debug {
    fn size(&self) -> u64;
    /// Copies `buf.len()` bytes from `offset`; the caller keeps inside `size()`.
    fn read(&self, offset: u64, buf: &mut [u8]);
    /// Copies `data` to `offset`; the caller keeps inside `size()`.
    fn write(&self, offset: u64, data: &[u8]);
}

/// Which way a DMA moved data.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Direction {
    /// The device read guest memory.
    ToDevice,
    /// The device wrote guest memory.
    FromDevice,
}

/// Which way the device may move data in a window: the read/write flags of QEMU's DMA_MAP.
/// Behind a vIOMMU they are the guest's mapping permissions (QEMU 11 passes a device-read-only
/// mapping as read-only; a device-write-only one it passes as both, so only a write to a
/// read-only window is refused); without one, all of RAM is both.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Allowed {
    #[default]
    ReadWrite,
    /// The device may only read guest memory there.
    Read,
    /// The device may only write guest memory there.
    Write,
}

impl Allowed {
    pub fn is_read_write(&self) -> bool {
        *self == Allowed::ReadWrite
    }

    fn permits(self, dir: Direction) -> bool {
        match (self, dir) {
            (Allowed::ReadWrite, _) => true,
            (Allowed::Read, d) => d == Direction::ToDevice,
            (Allowed::Write, d) => d == Direction::FromDevice,
        }
    }
}

/// How a DMA ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// The data moved.
    Ok,
    /// Refused: Bus Master Enable was clear. Nothing moved.
    NoBusMaster,
    /// Refused: the range reaches past the engine's address bits. Nothing moved.
    Mask,
    /// Refused: part of the range is not mapped guest memory. Nothing moved.
    Fault,
    /// Refused: the range is mapped, but part of it not for this direction (a write to a
    /// read-only window, a read of a write-only one). Nothing moved.
    Denied,
    /// Refused: the force_error knob. Nothing moved.
    Forced,
}

/// One line of the DMA log (`--dma-log`, JSON lines).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum Event {
    /// QEMU mapped guest memory for the device. `seq` is the access log's next number then:
    /// the map happened before that access.
    Map {
        seq: u64,
        iova: u64,
        size: u64,
        /// Whether QEMU passed memory the device can reach (a file descriptor).
        memory: bool,
        #[serde(default, skip_serializing_if = "Allowed::is_read_write")]
        allowed: Allowed,
    },
    /// QEMU unmapped `[iova, iova + size)`; `windows` is how many mapped windows went.
    Unmap {
        seq: u64,
        iova: u64,
        size: u64,
        windows: usize,
    },
    /// The device was reset as a whole (vfio-user DEVICE_RESET: a function-level reset, or a
    /// bus reset QEMU passed on), before access `seq`: every register back to its power-on
    /// value, config space included; an operation in flight dropped.
    Reset { seq: u64, time_ns: u64 },
    /// The function's power state changed (a PMCSR write, before access `seq`): `from` and
    /// `to` are 0 (D0) to 3 (D3hot); `lost`: from D3hot to D0 without No_Soft_Reset, so every
    /// register went back to its power-on value, config space included.
    Power {
        seq: u64,
        time_ns: u64,
        from: u8,
        to: u8,
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        lost: bool,
    },
    /// The engine ran a DMA opcode. `seq` is the access log's number of the CMD write that
    /// started it; `before`, the number of the first access not yet logged when it ran: it ran
    /// after every access numbered lower (at the doorbell, `before == seq`; delayed, later).
    /// `waited`: access `before` is a write that reached the device while the delayed DMA was
    /// in flight, and the engine finished the DMA first: the DMA came after the guest issued
    /// that write.
    Dma {
        seq: u64,
        #[serde(default)]
        before: u64,
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        waited: bool,
        time_ns: u64,
        iova: u64,
        len: u32,
        dir: Direction,
        /// OP_DMA_CRC32: the bytes were only read and summed, BAR2 untouched.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        crc_only: bool,
        outcome: Outcome,
        /// CRC-32 of the bytes moved (read for `to_device`, written for `from_device`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        crc: Option<u32>,
    },
}

#[derive(Clone, Debug)]
struct Window {
    iova: u64,
    size: u64,
    allowed: Allowed,
    memory: Arc<dyn GuestMemory>,
}

/// Why the engine could not move a DMA's bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refused {
    /// Part of the range is in no window.
    Unmapped,
    /// Part of it is in a window that does not allow the direction.
    Denied,
}

/// The windows QEMU mapped, and the log.
#[derive(Clone, Debug, Default)]
pub struct DmaSpace {
    windows: Vec<Window>,
    log: Vec<Event>,
}

impl DmaSpace {
    /// Records a DMA_MAP; `memory` is `None` when QEMU passed no file descriptor (guest RAM
    /// not shareable): logged, but the device cannot reach it.
    pub fn map(
        &mut self,
        seq: u64,
        iova: u64,
        size: u64,
        memory: Option<Arc<dyn GuestMemory>>,
        allowed: Allowed,
    ) {
        self.log.push(Event::Map {
            seq,
            iova,
            size,
            memory: memory.is_some(),
            allowed,
        });
        if let Some(memory) = memory {
            let size = size.min(memory.size());
            self.windows.retain(|w| !overlaps(w, iova, size));
            self.windows.push(Window {
                iova,
                size,
                allowed,
                memory,
            });
        }
    }

    /// Records a whole-device reset (the windows stay: QEMU's, not the device's).
    pub fn reset(&mut self, seq: u64, time_ns: u64) {
        self.log.push(Event::Reset { seq, time_ns });
    }

    /// Records a power-state change.
    pub fn power(&mut self, seq: u64, time_ns: u64, from: u8, to: u8, lost: bool) {
        self.log.push(Event::Power {
            seq,
            time_ns,
            from,
            to,
            lost,
        });
    }

    /// Records a DMA_UNMAP: every window overlapping the range goes.
    pub fn unmap(&mut self, seq: u64, iova: u64, size: u64) {
        let before = self.windows.len();
        self.windows.retain(|w| !overlaps(w, iova, size));
        self.log.push(Event::Unmap {
            seq,
            iova,
            size,
            windows: before - self.windows.len(),
        });
    }

    /// The pieces of `[iova, iova + len)`, in order, each a window and an offset in it, if
    /// every byte is in a window that allows `dir`.
    fn pieces(
        &self,
        iova: u64,
        len: usize,
        dir: Direction,
    ) -> Result<Vec<(&Window, u64, usize)>, Refused> {
        let mut out = Vec::new();
        let (mut at, mut left) = (iova, len as u64);
        while left > 0 {
            let w = self
                .windows
                .iter()
                .find(|w| at >= w.iova && at - w.iova < w.size)
                .ok_or(Refused::Unmapped)?;
            let n = left.min(w.size - (at - w.iova));
            out.push((w, at - w.iova, n as usize));
            at = at.checked_add(n).ok_or(Refused::Unmapped)?;
            left -= n;
        }
        if out.iter().any(|(w, _, _)| !w.allowed.permits(dir)) {
            return Err(Refused::Denied);
        }
        Ok(out)
    }

    /// Reads guest memory at `iova` (the device reading: `to_device`); nothing is read if
    /// part of it is not mapped for reading.
    pub fn read(&self, iova: u64, buf: &mut [u8]) -> Result<(), Refused> {
        let mut done = 0;
        for (w, off, n) in self.pieces(iova, buf.len(), Direction::ToDevice)? {
            w.memory.read(off, &mut buf[done..done + n]);
            done += n;
        }
        Ok(())
    }

    /// Writes guest memory at `iova` (`from_device`); nothing is written if part of it is not
    /// mapped for writing.
    pub fn write(&self, iova: u64, data: &[u8]) -> Result<(), Refused> {
        let mut done = 0;
        for (w, off, n) in self.pieces(iova, data.len(), Direction::FromDevice)? {
            w.memory.write(off, &data[done..done + n]);
            done += n;
        }
        Ok(())
    }

    pub(super) fn record(&mut self, e: Event) {
        self.log.push(e);
    }

    /// Every map, unmap and DMA so far, oldest first.
    pub fn log(&self) -> &[Event] {
        &self.log
    }

    /// The mapped windows as `(iova, size)`, in mapping order.
    pub fn windows(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        self.windows.iter().map(|w| (w.iova, w.size))
    }
}

fn overlaps(w: &Window, iova: u64, size: u64) -> bool {
    iova < w.iova.saturating_add(w.size) && w.iova < iova.saturating_add(size)
}

/// Guest memory in a vector, for tests and fuzzing.
#[derive(Debug)]
pub struct VecMemory(pub std::sync::Mutex<Vec<u8>>);

impl VecMemory {
    pub fn new(len: usize) -> Arc<Self> {
        Arc::new(Self(std::sync::Mutex::new(vec![0; len])))
    }

    pub fn bytes(&self) -> Vec<u8> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

impl GuestMemory for VecMemory {
    fn size(&self) -> u64 {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).len() as u64
    }

    fn read(&self, offset: u64, buf: &mut [u8]) {
        let m = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let o = offset as usize;
        buf.copy_from_slice(&m[o..o + buf.len()]);
    }

    fn write(&self, offset: u64, data: &[u8]) {
        let mut m = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let o = offset as usize;
        m[o..o + data.len()].copy_from_slice(data);
    }
}
