//! BAR0: the register file and the operation it runs over the BAR2 window.
//! Offsets and values come from the register table (`regmap`), which also generates
//! REGISTERS.md's tables; the behaviour is this file's.

use super::crc32::crc32;
use super::Model;
use serde::{Deserialize, Serialize};

pub use regmap::reg::*;
pub use regmap::{
    ERR_BAD_OPCODE, ERR_BAD_RANGE, ERR_FORCED, INT_ALL, INT_DONE, INT_ERROR, INT_SOFT, MAGIC_VALUE,
    OP_CRC32, OP_FILL, OP_INVERT, RESET_KEY, STATUS_BUSY, STATUS_CODE_SHIFT, STATUS_DONE,
    STATUS_ERROR, VERSION_VALUE, WRONG_MAGIC_VALUE, WRONG_MAJOR_VALUE, WRONG_VERSION_VALUE,
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
    /// The operation latched by the doorbell while BUSY.
    #[serde(skip)]
    pub(super) pending: Option<Op>,
}

/// Operation parameters, latched when the doorbell rings so later register writes cannot
/// change an operation in flight.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Op {
    opcode: u32,
    offset: u32,
    length: u32,
    arg: u32,
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
            _ => return None,
        })
    }

    /// A 32-bit register write, with its side effects.
    pub(super) fn reg_write(&mut self, offset: u64, v: u32) -> WriteOutcome {
        let r = &mut self.regs;
        match offset {
            MAGIC | VERSION | COUNTER | STATUS | RESULT | INT_STATUS | IRQ_COUNT => {
                return WriteOutcome::ReadOnly
            }
            SCRATCH => r.scratch = v,
            OP_OFFSET => r.op_offset = v,
            OP_LENGTH => r.op_length = v,
            OP_ARG => r.op_arg = v,
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
        });
        r.status = STATUS_BUSY;
        if !self.knobs.stuck_busy {
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

    /// Runs an operation on the window; the result is the CRC-32 of the range afterwards.
    /// Errors in REGISTERS.md's order: BAD_OPCODE, then BAD_RANGE, then FORCED (a malformed
    /// request is reported as such even while errors are forced).
    fn run_op(&mut self, op: Op) -> Result<u32, u32> {
        if !matches!(op.opcode, OP_CRC32 | OP_FILL | OP_INVERT) {
            return Err(ERR_BAD_OPCODE);
        }
        let start = op.offset as usize;
        let range = start
            .checked_add(op.length as usize)
            .and_then(|end| self.window.get_mut(start..end))
            .ok_or(ERR_BAD_RANGE)?;
        if self.knobs.force_error {
            return Err(ERR_FORCED);
        }
        match op.opcode {
            OP_CRC32 => {}
            OP_FILL => range.fill(op.arg as u8),
            OP_INVERT => range.iter_mut().for_each(|b| *b = !*b),
            _ => unreachable!("opcode checked above"),
        }
        Ok(crc32(range))
    }
}
