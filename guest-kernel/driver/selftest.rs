// SPDX-License-Identifier: GPL-2.0

//! What the self-test expects of the device, free of any kernel API: its patterns, the CRC-32 the
//! device computes, how an operation's outcome reads and how long an interrupt may take. Shared by
//! the driver of both kernel lines: `driver-mainline` builds with a copy of this file beside its
//! sources, so the two API generations run the very same test.

use core::fmt;

/// Software interrupts the self-test raises.
pub(crate) const SOFT_IRQS: u32 = 10;
/// How long the driver waits for an interrupt before it calls it lost: long
/// enough for an MSI through vfio-user on a loaded TCG host (with 100 ms, a
/// DONE interrupt once came about 230 ms late on arm64, both host CPUs busy).
pub(crate) const IRQ_WAIT_MS: i64 = 1000;
/// Interrupts one run of the INTx handler takes, at most, before it leaves the pin masked.
pub(crate) const INTX_ROUNDS: usize = 8;

/// SCRATCH's patterns, each unlike the one before it and the first unlike the register's reset
/// value (0): a write the device dropped reads back as the previous value and fails its step
/// (the removal-point sweep found the dropped first write of 0 passing).
pub(crate) const SCRATCH_PATTERNS: [u32; 5] = [!0, 0, 0xa5a5_5a5a, 0x5a5a_a5a5, 0x1234_5678];

/// Bytes each DMA of the self-test moves.
pub(crate) const DMA_LEN: usize = 1024;

/// The self-test's byte at `i`: neighbours differ, so a shifted or partial copy shows.
pub(crate) fn pattern(i: usize) -> u8 {
    (i * 7 + 3) as u8
}

/// CRC-32 (IEEE 802.3, as the device computes it) of `len` bytes of value `byte`.
pub(crate) fn crc32_of_repeated(byte: u8, len: usize) -> u32 {
    crc32((0..len).map(|_| byte))
}

/// CRC-32 (IEEE 802.3, as the device computes it) of `bytes`.
pub(crate) fn crc32(bytes: impl IntoIterator<Item = u8>) -> u32 {
    let mut crc = !0u32;
    for byte in bytes {
        crc ^= u32::from(byte);
        for _ in 0..8 {
            crc = if crc & 1 != 0 {
                (crc >> 1) ^ 0xedb8_8320
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

/// What an operation ended with: STATUS, RESULT, and whether its interrupt arrived.
pub(crate) struct Outcome {
    pub(crate) status: u32,
    pub(crate) result: u32,
    pub(crate) interrupted: bool,
}

impl Outcome {
    /// The step's detail; says first when the interrupt never came.
    pub(crate) fn detail(&self, want: u32) -> Detail {
        let lost = if self.interrupted {
            ""
        } else {
            "no interrupt within 1 s; "
        };
        Detail(lost, self.status, self.result, want)
    }
}

/// A step's detail: `[lost; ]status=… crc=… want=…`.
pub(crate) struct Detail(&'static str, u32, u32, u32);

impl fmt::Display for Detail {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}status={:#x} crc={:#x} want={:#x}",
            self.0, self.1, self.2, self.3
        )
    }
}

/// A DMA parameter the device does not hold as written (a write it dropped).
pub(crate) struct Mismatch {
    pub(crate) what: &'static str,
    pub(crate) held: u64,
    pub(crate) want: u64,
}

impl fmt::Display for Mismatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "the device holds {} {:#x}, not {:#x}",
            self.what, self.held, self.want
        )
    }
}
