//! BAR0: the register file and the operation it runs over the BAR2 window.
//! Offsets and values come from the register table (`regmap`), which also generates
//! REGISTERS.md's tables; the behaviour is this file's.

use super::config::CMD_MASTER;
use super::crc32::crc32;
use super::dma::{Direction, Event, Outcome, Refused};
use super::Model;
use serde::{Deserialize, Serialize};

pub use regmap::reg::*;
pub use regmap::{
    DMA_ADDRESS_BITS, DMA_MAX_LENGTH, ERR_BAD_OPCODE, ERR_BAD_RANGE, ERR_DMA_FAULT, ERR_DMA_MASK,
    ERR_FORCED, ERR_NO_BUS_MASTER, INT_ALL, INT_DONE, INT_ERROR, INT_SOFT, MAGIC_VALUE, OP_CRC32,
    OP_DMA_CRC32, OP_DMA_FROM_DEVICE, OP_DMA_TO_DEVICE, OP_FILL, OP_INVERT, RESET_KEY, STATUS_BUSY,
    STATUS_CODE_SHIFT, STATUS_DONE, STATUS_ERROR, VERSION_VALUE, WRONG_MAGIC_VALUE,
    WRONG_MAJOR_VALUE, WRONG_VERSION_VALUE,
};

/// The register file. Every field resets to zero.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Registers {
    pub scratch: u32,
    pub counter: u32,
    pub cmd: u32,
    pub status: u32,
    pub op_offset: u32,
    pub op_length: u32,
    pub op_arg: u32,
    pub result: u32,
    pub int_status: u32,
    pub int_enable: u32,
    pub irq_count: u32,
    pub dma_addr_lo: u32,
    pub dma_addr_hi: u32,
    /// The operation latched by the doorbell while BUSY.
    #[serde(skip)]
    pub(super) pending: Option<Op>,
    /// Set while a write waits for the delayed DMA it completes (the DMA log says so).
    #[serde(skip)]
    pub(super) waited: bool,
}

/// Operation parameters, latched when the doorbell rings so later register writes cannot
/// change an operation in flight.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Op {
    opcode: u32,
    offset: u32,
    length: u32,
    arg: u32,
    dma_addr: u64,
    /// The access log's number of the CMD write that rang the doorbell.
    seq: u64,
    /// A delayed DMA (`dma_delay_us`): when the device's clock runs it.
    pub(super) due_ns: Option<u64>,
}

/// Whether `opcode` moves data to or from guest memory.
fn is_dma(opcode: u32) -> bool {
    matches!(opcode, OP_DMA_TO_DEVICE | OP_DMA_FROM_DEVICE | OP_DMA_CRC32)
}

/// What a 32-bit register write did.
pub(super) enum WriteOutcome {
    Done,
    ReadOnly,
    Undefined,
}

impl Model {
    /// A 32-bit register read, with its side effects; `None` for offsets with no register.
    pub(super) fn reg_read(&mut self, offset: u64) -> Option<u32> {
        let r = &mut self.regs;
        Some(match offset {
            MAGIC if self.knobs.wrong_id => WRONG_MAGIC_VALUE,
            MAGIC => MAGIC_VALUE,
            VERSION if self.knobs.wrong_id => WRONG_VERSION_VALUE,
            VERSION if self.knobs.wrong_version => WRONG_MAJOR_VALUE,
            VERSION => VERSION_VALUE,
            SCRATCH => r.scratch,
            COUNTER => {
                let v = r.counter;
                r.counter = v.wrapping_add(1);
                v
            }
            CMD => r.cmd,
            STATUS => r.status,
            OP_OFFSET => r.op_offset,
            OP_LENGTH => r.op_length,
            OP_ARG => r.op_arg,
            RESULT => r.result,
            INT_STATUS => r.int_status,
            INT_ENABLE => r.int_enable,
            INT_RAISE | INT_ACK | RESET => 0,
            IRQ_COUNT => r.irq_count,
            DMA_ADDR_LO => r.dma_addr_lo,
            DMA_ADDR_HI => r.dma_addr_hi,
            DMA_BITS => DMA_ADDRESS_BITS,
            CAPS if self.knobs.stream => regmap::CAP_STREAM,
            CAPS => 0,
            _ => return None,
        })
    }

    /// A 32-bit register write, with its side effects.
    pub(super) fn reg_write(&mut self, offset: u64, v: u32) -> WriteOutcome {
        let r = &mut self.regs;
        match offset {
            MAGIC | VERSION | COUNTER | STATUS | RESULT | INT_STATUS | IRQ_COUNT | DMA_BITS
            | CAPS => return WriteOutcome::ReadOnly,
            SCRATCH => r.scratch = v,
            OP_OFFSET => r.op_offset = v,
            OP_LENGTH => r.op_length = v,
            OP_ARG => r.op_arg = v,
            DMA_ADDR_LO => r.dma_addr_lo = v,
            DMA_ADDR_HI => r.dma_addr_hi = v,
            INT_ENABLE => r.int_enable = v & INT_ALL,
            INT_RAISE => r.int_status |= v & INT_ALL,
            INT_ACK => r.int_status &= !v,
            CMD => self.doorbell(v),
            RESET if v == RESET_KEY => self.soft_reset(),
            RESET => {}
            _ => return WriteOutcome::Undefined,
        }
        self.update_irq();
        WriteOutcome::Done
    }

    fn doorbell(&mut self, opcode: u32) {
        let r = &mut self.regs;
        r.cmd = opcode;
        if r.status & STATUS_BUSY != 0 {
            self.counters.doorbell_busy += 1;
            return;
        }
        self.counters.commands += 1;
        r.pending = Some(Op {
            opcode,
            offset: r.op_offset,
            length: r.op_length,
            arg: r.op_arg,
            dma_addr: u64::from(r.dma_addr_hi) << 32 | u64::from(r.dma_addr_lo),
            seq: self.log.next_seq(),
            due_ns: (is_dma(opcode) && self.knobs.dma_delay_us > 0)
                .then(|| self.now_ns + self.knobs.dma_delay_us * 1000),
        });
        r.status = STATUS_BUSY;
        let delayed = r.pending.as_ref().is_some_and(|op| op.due_ns.is_some());
        if !self.knobs.stuck_busy && !delayed {
            self.complete_op();
        }
    }

    /// Finishes the latched operation, if any: status, RESULT and interrupt status.
    pub(super) fn complete_op(&mut self) {
        let Some(op) = self.regs.pending.take() else {
            return;
        };
        let outcome = self.run_op(op);
        let r = &mut self.regs;
        match outcome {
            Ok(result) => {
                r.result = result;
                r.status = STATUS_DONE;
                r.int_status |= INT_DONE;
            }
            Err(code) => {
                r.status = STATUS_DONE | STATUS_ERROR | (code << STATUS_CODE_SHIFT);
                r.int_status |= INT_DONE | INT_ERROR;
                self.counters.command_errors += 1;
            }
        }
        self.update_irq();
    }

    /// Runs an operation; the result is the CRC-32 of the window's range afterwards (of the
    /// guest memory read, for OP_DMA_CRC32). Errors in REGISTERS.md's order: BAD_OPCODE,
    /// BAD_RANGE, the DMA engine's (NO_BUS_MASTER, DMA_MASK, DMA_FAULT), then FORCED (a
    /// malformed request is reported as such even while errors are forced).
    fn run_op(&mut self, op: Op) -> Result<u32, u32> {
        if !matches!(
            op.opcode,
            OP_CRC32 | OP_FILL | OP_INVERT | OP_DMA_TO_DEVICE | OP_DMA_FROM_DEVICE | OP_DMA_CRC32
        ) {
            return Err(ERR_BAD_OPCODE);
        }
        let start = if op.opcode == OP_DMA_CRC32 {
            0
        } else {
            op.offset as usize
        };
        let end = start
            .checked_add(op.length as usize)
            .filter(|&end| end <= self.window.len())
            .ok_or(ERR_BAD_RANGE)?;
        if is_dma(op.opcode) {
            return self.run_dma(op, start..end);
        }
        if self.knobs.force_error {
            return Err(ERR_FORCED);
        }
        let range = &mut self.window[start..end];
        match op.opcode {
            OP_CRC32 => {}
            OP_FILL => range.fill(op.arg as u8),
            OP_INVERT => range.iter_mut().for_each(|b| *b = !*b),
            _ => unreachable!("opcode checked above"),
        }
        Ok(crc32(range))
    }

    /// Runs a DMA opcode between guest memory at `op.dma_addr` and the window's `range`, and
    /// logs it whatever its outcome.
    fn run_dma(&mut self, op: Op, range: std::ops::Range<usize>) -> Result<u32, u32> {
        let dir = if op.opcode == OP_DMA_FROM_DEVICE {
            Direction::FromDevice
        } else {
            Direction::ToDevice
        };
        let len = op.length as usize;
        let last = op.dma_addr.checked_add(op.length.saturating_sub(1).into());
        let outcome = if self.config.command() & CMD_MASTER == 0 {
            Err((Outcome::NoBusMaster, ERR_NO_BUS_MASTER))
        } else if last.is_none_or(|last| last >> DMA_ADDRESS_BITS != 0) {
            Err((Outcome::Mask, ERR_DMA_MASK))
        } else if self.knobs.force_error {
            Err((Outcome::Forced, ERR_FORCED))
        } else {
            let mut bytes = vec![0; len];
            let moved = match dir {
                Direction::ToDevice => self.dma.read(op.dma_addr, &mut bytes),
                Direction::FromDevice => {
                    bytes.copy_from_slice(&self.window[range.clone()]);
                    self.dma.write(op.dma_addr, &bytes)
                }
            };
            if let Err(refused) = moved {
                // An IOMMU's permission fault looks to the device as any other: an error it
                // reports as a DMA fault; the log tells them apart.
                let outcome = match refused {
                    Refused::Unmapped => Outcome::Fault,
                    Refused::Denied => Outcome::Denied,
                };
                Err((outcome, ERR_DMA_FAULT))
            } else {
                if op.opcode == OP_DMA_TO_DEVICE {
                    self.window[range.clone()].copy_from_slice(&bytes);
                }
                Ok(crc32(&bytes))
            }
        };
        self.dma.record(Event::Dma {
            seq: op.seq,
            before: self.log.next_seq(),
            waited: self.regs.waited,
            time_ns: self.now_ns,
            iova: op.dma_addr,
            len: op.length,
            dir,
            crc_only: op.opcode == OP_DMA_CRC32,
            outcome: outcome.map_or_else(|(o, _)| o, |_| Outcome::Ok),
            crc: outcome.ok(),
        });
        match outcome {
            Ok(moved) if op.opcode == OP_DMA_CRC32 => Ok(moved),
            Ok(_) => Ok(crc32(&self.window[range])),
            Err((_, code)) => Err(code),
        }
    }
}
