// SPDX-License-Identifier: GPL-2.0

// @generated from regmap/src/lib.rs by `cargo xtask regs`: edit the table there, not this file.

//! The register map of pci-rig's device (`qemu-device/REGISTERS.md`).
//!
//! Not every user needs every name.

#![allow(dead_code)]

/// BAR0 register offsets, in bytes.
pub(crate) mod reg {
    /// RO. "prig" read as a big-endian word. **wrong_id knob:** reads `0x0bad0bad`.
    pub(crate) const MAGIC: usize = 0x000;

    /// RO. Major (31:16) = 1, minor (15:0) = 0. A driver must refuse a major it does not know. **wrong_id knob:** reads `0xffff0000`.
    pub(crate) const VERSION: usize = 0x004;

    /// RW. Holds what was written. No side effects.
    pub(crate) const SCRATCH: usize = 0x008;

    /// RO. **Read side effect:** returns its value, then increments (wrapping). Consecutive reads return 0, 1, 2, … — proof that each read reached the device.
    pub(crate) const COUNTER: usize = 0x00c;

    /// RW. Doorbell. Writing an opcode starts an operation (see below); reads return the last value written.
    pub(crate) const CMD: usize = 0x010;

    /// RO. Bit 0 BUSY, bit 1 DONE, bit 2 ERROR, bits 15:8 error code. See "Operations".
    pub(crate) const STATUS: usize = 0x014;

    /// RW. Byte offset into BAR2 of the operation's range.
    pub(crate) const OP_OFFSET: usize = 0x018;

    /// RW. Length in bytes of the range (0 allowed).
    pub(crate) const OP_LENGTH: usize = 0x01c;

    /// RW. Argument: FILL uses bits 7:0.
    pub(crate) const OP_ARG: usize = 0x020;

    /// RO. CRC-32 of the operation's range **after** the operation; unchanged by a failed one.
    pub(crate) const RESULT: usize = 0x024;

    /// RO. Latched interrupt sources: bit 0 DONE, bit 1 ERROR, bit 2 SOFT. Set by the device / INT_RAISE, cleared only by INT_ACK or reset.
    pub(crate) const INT_STATUS: usize = 0x030;

    /// RW. Enables sources (same bits). Bits 31:3 read 0.
    pub(crate) const INT_ENABLE: usize = 0x034;

    /// WO. Writing 1s sets those INT_STATUS bits (bits 2:0; others ignored). Software interrupt: write `0x4`.
    pub(crate) const INT_RAISE: usize = 0x038;

    /// WO. Writing 1s clears those INT_STATUS bits.
    pub(crate) const INT_ACK: usize = 0x03c;

    /// RO. Number of interrupts the device raised (rising edges that reached the line; see "Interrupts"). Wraps.
    pub(crate) const IRQ_COUNT: usize = 0x040;

    /// WO. Writing `0x00000001` resets the device: every BAR0 register to its reset value, the BAR2 window to zeros, the interrupt line low, an operation in flight abandoned. Other values do nothing. Config space, knobs, access log and counters are kept.
    pub(crate) const RESET: usize = 0x050;

    /// RW. Bits 31:0 of the bus address (IOVA) a DMA operation starts at. See "DMA".
    pub(crate) const DMA_ADDR_LO: usize = 0x060;

    /// RW. Bits 63:32 of that bus address.
    pub(crate) const DMA_ADDR_HI: usize = 0x064;

    /// RO. How many address bits the DMA engine drives: the DMA mask a driver sets. A range past it fails with DMA_MASK.
    pub(crate) const DMA_BITS: usize = 0x068;

    /// RO. Optional features: bit 0 STREAM (the `stream` knob): the device offers a continuous receive stream, and a driver keeps a DMA from the device running while bound.
    pub(crate) const CAPS: usize = 0x06c;
}

// The device's PCI identity (config space).

/// PCI vendor ID: ASCII "pr", unassigned in pci.ids.
pub(crate) const VENDOR_ID: u32 = 0x7072;

/// PCI device ID.
pub(crate) const DEVICE_ID: u32 = 0x1;

// BAR sizes.

/// BAR0, the registers: 4 KiB.
pub(crate) const BAR0_SIZE: usize = 0x1000;

/// BAR2, the memory window: 64 KiB.
pub(crate) const BAR2_SIZE: usize = 0x10000;

// What MAGIC and VERSION read.

/// MAGIC: "prig" read as a big-endian word.
pub(crate) const MAGIC_VALUE: u32 = 0x70726967;

/// VERSION: major 1, minor 0.
pub(crate) const VERSION_VALUE: u32 = 0x10000;

/// VERSION's major is its bits 31:16.
pub(crate) const VERSION_MAJOR_SHIFT: u32 = 0x10;

/// MAGIC while the wrong_id knob is set.
pub(crate) const WRONG_MAGIC_VALUE: u32 = 0xbad0bad;

/// VERSION while the wrong_id knob is set.
pub(crate) const WRONG_VERSION_VALUE: u32 = 0xffff0000;

/// VERSION while the wrong_version knob is set: major 2, minor 0.
pub(crate) const WRONG_MAJOR_VALUE: u32 = 0x20000;

/// The only value a write to RESET acts on.
pub(crate) const RESET_KEY: u32 = 0x1;

// STATUS bits.

/// An operation is running.
pub(crate) const STATUS_BUSY: u32 = 0x1;

/// The last operation completed.
pub(crate) const STATUS_DONE: u32 = 0x2;

/// The last operation failed; the code is in bits 15:8.
pub(crate) const STATUS_ERROR: u32 = 0x4;

/// Where the error code starts.
pub(crate) const STATUS_CODE_SHIFT: u32 = 0x8;

/// The error code's width, once shifted down.
pub(crate) const STATUS_CODE_MASK: u32 = 0xff;

// Operations, written to CMD.

/// None; RESULT = CRC-32 of the range.
pub(crate) const OP_CRC32: u32 = 0x1;

/// Every byte := OP_ARG & 0xff.
pub(crate) const OP_FILL: u32 = 0x2;

/// Every byte := !byte.
pub(crate) const OP_INVERT: u32 = 0x3;

/// DMA from guest memory at DMA_ADDR into the range; RESULT = CRC-32 of the range.
pub(crate) const OP_DMA_TO_DEVICE: u32 = 0x4;

/// DMA from the range into guest memory at DMA_ADDR; RESULT = CRC-32 of the range.
pub(crate) const OP_DMA_FROM_DEVICE: u32 = 0x5;

/// DMA-read OP_LENGTH bytes of guest memory at DMA_ADDR; RESULT = their CRC-32 (OP_OFFSET unused).
pub(crate) const OP_DMA_CRC32: u32 = 0x6;

// Error codes, in STATUS bits 15:8.

/// Opcode not in the table.
pub(crate) const ERR_BAD_OPCODE: u32 = 0x1;

/// OP_OFFSET + OP_LENGTH > 65536.
pub(crate) const ERR_BAD_RANGE: u32 = 0x2;

/// The force_error knob is set.
pub(crate) const ERR_FORCED: u32 = 0x3;

/// A DMA opcode while the command register's Bus Master Enable is clear.
pub(crate) const ERR_NO_BUS_MASTER: u32 = 0x4;

/// The DMA range reaches past DMA_BITS address bits.
pub(crate) const ERR_DMA_MASK: u32 = 0x5;

/// Part of the DMA range is not guest memory QEMU mapped for the device (a master abort).
pub(crate) const ERR_DMA_FAULT: u32 = 0x6;

// INT_STATUS / INT_ENABLE / INT_RAISE / INT_ACK bits.

/// An operation completed.
pub(crate) const INT_DONE: u32 = 0x1;

/// An operation failed.
pub(crate) const INT_ERROR: u32 = 0x2;

/// Software interrupt (INT_RAISE, or the irq_every_us knob).
pub(crate) const INT_SOFT: u32 = 0x4;

/// Every source bit the device implements.
pub(crate) const INT_ALL: u32 = 0x7;

// The DMA engine.

/// Address bits the engine drives (DMA_BITS reads it): a 32-bit DMA mask.
pub(crate) const DMA_ADDRESS_BITS: u32 = 0x20;

/// The longest DMA, in bytes: BAR2's size, also for OP_DMA_CRC32.
pub(crate) const DMA_MAX_LENGTH: u32 = 0x10000;

// CAPS bits.

/// A continuous receive stream is offered (the `stream` knob).
pub(crate) const CAP_STREAM: u32 = 0x1;
