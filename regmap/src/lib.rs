//! The register map of pci-rig's device, written down once.
//!
//! [`REGISTERS`] is BAR0's register table (name, offset, access, reset value, behaviour) and the
//! constant groups in [`GROUPS`] are the values that go with it (identity, MAGIC/VERSION, STATUS
//! bits, opcodes, error codes, interrupt bits, the RESET key). Every item is also a Rust
//! constant here ([`reg::MAGIC`], [`STATUS_DONE`], …), which the device model uses directly.
//!
//! Everyone else gets a generated file (see [`gen`]): the guest driver's `regs.rs`, the guest
//! scripts' `images/regs.sh`, and the tables of `qemu-device/REGISTERS.md` between marker
//! comments. `cargo xtask regs` rewrites them; `cargo test -p regmap` fails when one drifts.
//! No dependencies, so that any crate of the workspace can use it.

pub mod gen;

/// How software may access a register.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    /// Reads return the value; writes are ignored (counted as `read_only`).
    Ro,
    /// Reads and writes.
    Rw,
    /// Writes act; reads return 0.
    Wo,
}

impl Access {
    pub fn name(self) -> &'static str {
        match self {
            Access::Ro => "RO",
            Access::Rw => "RW",
            Access::Wo => "WO",
        }
    }
}

/// One 32-bit BAR0 register.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Register {
    pub name: &'static str,
    /// Byte offset into BAR0 (4-byte aligned).
    pub offset: u64,
    pub access: Access,
    /// The value after any reset; `None` for write-only registers (they read 0).
    pub reset: Option<u32>,
    /// What it does, one line of Markdown (REGISTERS.md's "Behaviour" column).
    pub behaviour: &'static str,
}

/// A named value of the register map.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Const {
    pub name: &'static str,
    pub value: u32,
    /// One line of Markdown.
    pub doc: &'static str,
}

/// What a group of constants measures, which decides its type in the driver.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unit {
    /// A register value or bit field (`u32`).
    Value,
    /// A size in bytes (`usize` in the driver).
    Bytes,
}

/// Constants that belong together (one table in REGISTERS.md at most).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Group {
    /// Short identifier, used in generated comments.
    pub name: &'static str,
    pub doc: &'static str,
    pub unit: Unit,
    pub consts: &'static [Const],
}

macro_rules! registers {
    ($($name:ident = $off:literal, $access:ident, $reset:expr, $behaviour:literal;)*) => {
        /// BAR0 register offsets, in bytes.
        pub mod reg {
            $(pub const $name: u64 = $off;)*
        }
        /// BAR0's registers in offset order. Every other offset is undefined.
        pub const REGISTERS: &[Register] = &[$(Register {
            name: stringify!($name),
            offset: reg::$name,
            access: Access::$access,
            reset: $reset,
            behaviour: $behaviour,
        }),*];
    };
}

macro_rules! group {
    ($group:ident, $unit:ident, $doc:literal, $($(#[doc = $d:literal])+ $name:ident = $v:expr;)*) => {
        $($(#[doc = $d])+ pub const $name: u32 = $v;)*
        #[doc = $doc]
        pub const $group: Group = Group {
            name: stringify!($group),
            doc: $doc,
            unit: Unit::$unit,
            consts: &[$(Const { name: stringify!($name), value: $name, doc: concat!($($d),+) }),*],
        };
    };
}

registers! {
    MAGIC = 0x000, Ro, Some(MAGIC_VALUE),
        "\"prig\" read as a big-endian word. **wrong_id knob:** reads `0x0bad0bad`.";
    VERSION = 0x004, Ro, Some(VERSION_VALUE),
        "Major (31:16) = 1, minor (15:0) = 0. A driver must refuse a major it does not know. **wrong_id knob:** reads `0xffff0000`.";
    SCRATCH = 0x008, Rw, Some(0), "Holds what was written. No side effects.";
    COUNTER = 0x00c, Ro, Some(0),
        "**Read side effect:** returns its value, then increments (wrapping). Consecutive reads return 0, 1, 2, … — proof that each read reached the device.";
    CMD = 0x010, Rw, Some(0),
        "Doorbell. Writing an opcode starts an operation (see below); reads return the last value written.";
    STATUS = 0x014, Ro, Some(0),
        "Bit 0 BUSY, bit 1 DONE, bit 2 ERROR, bits 15:8 error code. See \"Operations\".";
    OP_OFFSET = 0x018, Rw, Some(0), "Byte offset into BAR2 of the operation's range.";
    OP_LENGTH = 0x01c, Rw, Some(0), "Length in bytes of the range (0 allowed).";
    OP_ARG = 0x020, Rw, Some(0), "Argument: FILL uses bits 7:0.";
    RESULT = 0x024, Ro, Some(0),
        "CRC-32 of the operation's range **after** the operation; unchanged by a failed one.";
    INT_STATUS = 0x030, Ro, Some(0),
        "Latched interrupt sources: bit 0 DONE, bit 1 ERROR, bit 2 SOFT. Set by the device / INT_RAISE, cleared only by INT_ACK or reset.";
    INT_ENABLE = 0x034, Rw, Some(0), "Enables sources (same bits). Bits 31:3 read 0.";
    INT_RAISE = 0x038, Wo, None,
        "Writing 1s sets those INT_STATUS bits (bits 2:0; others ignored). Software interrupt: write `0x4`.";
    INT_ACK = 0x03c, Wo, None, "Writing 1s clears those INT_STATUS bits.";
    IRQ_COUNT = 0x040, Ro, Some(0),
        "Number of interrupts the device raised (rising edges that reached the line; see \"Interrupts\"). Wraps.";
    RESET = 0x050, Wo, None,
        "Writing `0x00000001` resets the device: every BAR0 register to its reset value, the BAR2 window to zeros, the interrupt line low, an operation in flight abandoned. Other values do nothing. Config space, knobs, access log and counters are kept.";
    DMA_ADDR_LO = 0x060, Rw, Some(0),
        "Bits 31:0 of the bus address (IOVA) a DMA operation starts at. See \"DMA\".";
    DMA_ADDR_HI = 0x064, Rw, Some(0), "Bits 63:32 of that bus address.";
    DMA_BITS = 0x068, Ro, Some(DMA_ADDRESS_BITS),
        "How many address bits the DMA engine drives: the DMA mask a driver sets. A range past it fails with DMA_MASK.";
    CAPS = 0x06c, Ro, Some(0),
        "Optional features: bit 0 STREAM (the `stream` knob): the device offers a continuous receive stream, and a driver keeps a DMA from the device running while bound.";
}

group! {
    IDENTITY, Value, "The device's PCI identity (config space).",
    /// PCI vendor ID: ASCII "pr", unassigned in pci.ids.
    VENDOR_ID = 0x7072;
    /// PCI device ID.
    DEVICE_ID = 0x0001;
}

group! {
    SIZES, Bytes, "BAR sizes.",
    /// BAR0, the registers: 4 KiB.
    BAR0_SIZE = 0x1000;
    /// BAR2, the memory window: 64 KiB.
    BAR2_SIZE = 0x1_0000;
}

group! {
    IDENT_VALUES, Value, "What MAGIC and VERSION read.",
    /// MAGIC: "prig" read as a big-endian word.
    MAGIC_VALUE = 0x7072_6967;
    /// VERSION: major 1, minor 0.
    VERSION_VALUE = 0x0001_0000;
    /// VERSION's major is its bits 31:16.
    VERSION_MAJOR_SHIFT = 16;
    /// MAGIC while the wrong_id knob is set.
    WRONG_MAGIC_VALUE = 0x0bad_0bad;
    /// VERSION while the wrong_id knob is set.
    WRONG_VERSION_VALUE = 0xffff_0000;
    /// VERSION while the wrong_version knob is set: major 2, minor 0.
    WRONG_MAJOR_VALUE = 0x0002_0000;
    /// The only value a write to RESET acts on.
    RESET_KEY = 1;
}

group! {
    STATUS_BITS, Value, "STATUS bits.",
    /// An operation is running.
    STATUS_BUSY = 1 << 0;
    /// The last operation completed.
    STATUS_DONE = 1 << 1;
    /// The last operation failed; the code is in bits 15:8.
    STATUS_ERROR = 1 << 2;
    /// Where the error code starts.
    STATUS_CODE_SHIFT = 8;
    /// The error code's width, once shifted down.
    STATUS_CODE_MASK = 0xff;
}

group! {
    OPCODES, Value, "Operations, written to CMD.",
    /// None; RESULT = CRC-32 of the range.
    OP_CRC32 = 1;
    /// Every byte := OP_ARG & 0xff.
    OP_FILL = 2;
    /// Every byte := !byte.
    OP_INVERT = 3;
    /// DMA from guest memory at DMA_ADDR into the range; RESULT = CRC-32 of the range.
    OP_DMA_TO_DEVICE = 4;
    /// DMA from the range into guest memory at DMA_ADDR; RESULT = CRC-32 of the range.
    OP_DMA_FROM_DEVICE = 5;
    /// DMA-read OP_LENGTH bytes of guest memory at DMA_ADDR; RESULT = their CRC-32 (OP_OFFSET unused).
    OP_DMA_CRC32 = 6;
}

group! {
    ERRORS, Value, "Error codes, in STATUS bits 15:8.",
    /// Opcode not in the table.
    ERR_BAD_OPCODE = 1;
    /// OP_OFFSET + OP_LENGTH > 65536.
    ERR_BAD_RANGE = 2;
    /// The force_error knob is set.
    ERR_FORCED = 3;
    /// A DMA opcode while the command register's Bus Master Enable is clear.
    ERR_NO_BUS_MASTER = 4;
    /// The DMA range reaches past DMA_BITS address bits.
    ERR_DMA_MASK = 5;
    /// Part of the DMA range is not guest memory QEMU mapped for the device (a master abort).
    ERR_DMA_FAULT = 6;
}

group! {
    CAPS_BITS, Value, "CAPS bits.",
    /// A continuous receive stream is offered (the `stream` knob).
    CAP_STREAM = 1 << 0;
}

group! {
    DMA, Value, "The DMA engine.",
    /// Address bits the engine drives (DMA_BITS reads it): a 32-bit DMA mask.
    DMA_ADDRESS_BITS = 32;
    /// The longest DMA, in bytes: BAR2's size, also for OP_DMA_CRC32.
    DMA_MAX_LENGTH = 0x1_0000;
}

group! {
    INT_BITS, Value, "INT_STATUS / INT_ENABLE / INT_RAISE / INT_ACK bits.",
    /// An operation completed.
    INT_DONE = 1 << 0;
    /// An operation failed.
    INT_ERROR = 1 << 1;
    /// Software interrupt (INT_RAISE, or the irq_every_us knob).
    INT_SOFT = 1 << 2;
    /// Every source bit the device implements.
    INT_ALL = INT_DONE | INT_ERROR | INT_SOFT;
}

/// Every constant group, in the order the generated files list them.
pub const GROUPS: &[Group] = &[
    IDENTITY,
    SIZES,
    IDENT_VALUES,
    STATUS_BITS,
    OPCODES,
    ERRORS,
    INT_BITS,
    DMA,
    CAPS_BITS,
];

/// The register at `offset`, if there is one.
pub fn register_at(offset: u64) -> Option<&'static Register> {
    REGISTERS.iter().find(|r| r.offset == offset)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn registers_are_aligned_ordered_and_inside_bar0() {
        for w in REGISTERS.windows(2) {
            assert!(w[0].offset < w[1].offset, "{} / {}", w[0].name, w[1].name);
        }
        for r in REGISTERS {
            assert_eq!(r.offset % 4, 0, "{} is not 4-byte aligned", r.name);
            assert!(
                r.offset + 4 <= u64::from(BAR0_SIZE),
                "{} is past BAR0",
                r.name
            );
            assert_eq!(r.reset.is_none(), r.access == Access::Wo, "{}", r.name);
            assert!(
                !r.behaviour.contains('|'),
                "{}'s behaviour breaks the table",
                r.name
            );
        }
        assert_eq!(register_at(reg::STATUS).map(|r| r.name), Some("STATUS"));
        assert_eq!(register_at(0x100), None);
    }

    #[test]
    fn names_are_unique() {
        let mut seen = HashSet::new();
        let names = REGISTERS
            .iter()
            .map(|r| r.name)
            .chain(GROUPS.iter().flat_map(|g| g.consts.iter().map(|c| c.name)));
        for n in names {
            assert!(seen.insert(n), "{n} is defined twice");
        }
    }

    #[test]
    fn codes_fit_their_fields() {
        for c in ERRORS.consts {
            assert_eq!(c.value & !STATUS_CODE_MASK, 0, "{}", c.name);
        }
        assert_eq!(INT_ALL, 0x7);
        assert_eq!(MAGIC_VALUE.to_be_bytes(), *b"prig");
        assert_eq!(VERSION_VALUE >> VERSION_MAJOR_SHIFT, 1);
        assert_eq!(WRONG_MAJOR_VALUE >> VERSION_MAJOR_SHIFT, 2);
    }
}
