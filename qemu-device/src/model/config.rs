//! PCI configuration space: a standard type-0 header, MSI, power-management and PCI Express
//! capabilities, and in the extended space Advanced Error Reporting.
//!
//! Every byte has a write mask, as in real hardware: bits outside the mask keep their value;
//! status bytes clear where a 1 is written (RW1C). BAR sizing falls out of this for free: the
//! low bits of a BAR are read-only zeros, so writing all-ones reads back the size mask.

use super::{BAR0_SIZE, BAR2_SIZE};

/// Our vendor id: unassigned in pci.ids (see REGISTERS.md).
pub const VENDOR_ID: u16 = regmap::VENDOR_ID as u16;
/// Our one device.
pub const DEVICE_ID: u16 = regmap::DEVICE_ID as u16;
/// Revision of this register map.
pub const REVISION: u8 = 0x01;
/// Base class 0xff ("device does not fit any defined class"), subclass 0, prog-if 0.
pub const CLASS_CODE: u32 = 0xff_00_00;
/// PCI Express: 4 KiB, the extended space from 0x100.
pub const CONFIG_SIZE: usize = 4096;
/// Where the MSI capability lives.
pub const MSI_CAP: usize = 0x40;
/// Where the power-management capability lives (after MSI in the list).
pub const PM_CAP: usize = 0x50;
/// Its control/status register (PMCSR): bits 1:0 the power state, bit 3 No_Soft_Reset.
pub const PMCSR: usize = PM_CAP + 4;
/// PMCSR's power-state field.
pub const PM_STATE_MASK: u16 = 0x3;
/// PMCSR's No_Soft_Reset bit: the function keeps its state across D3hot to D0.
pub const PM_NO_SOFT_RESET: u16 = 1 << 3;
/// Where the PCI Express capability lives (last in the list): version 2, an endpoint.
pub const PCIE_CAP: usize = 0x60;
/// Its Device Control register; bit 15 (Initiate Function Level Reset) resets the function.
pub const DEVCTL: usize = PCIE_CAP + 8;
pub const DEVCTL_FLR: u16 = 1 << 15;
/// Its Device Status register: bits 0 to 3 the errors detected (RW1C).
pub const DEVSTA: usize = PCIE_CAP + 10;
/// Where the AER extended capability lives: the first and only one.
pub const AER_CAP: usize = 0x100;
/// AER registers, from the capability (PCIe base spec, 7.8.4).
pub const AER_UNCOR_STATUS: usize = AER_CAP + 0x04;
pub const AER_UNCOR_MASK: usize = AER_CAP + 0x08;
pub const AER_UNCOR_SEVER: usize = AER_CAP + 0x0c;
pub const AER_COR_STATUS: usize = AER_CAP + 0x10;
pub const AER_COR_MASK: usize = AER_CAP + 0x14;
pub const AER_CAP_CTL: usize = AER_CAP + 0x18;
/// The AER capability's length (no TLP prefix log): its registers are sticky, a reset keeps
/// them (only a power-on clears them).
const AER_LEN: usize = 0x2c;
/// Uncorrectable Internal Error: the function's own failure (our `hang` fault sets it).
pub const AER_UNCOR_INTERNAL: u32 = 1 << 22;
/// The uncorrectable errors the capability implements (data link protocol to internal error).
const AER_UNCOR_ALL: u32 = 0x007f_f030;
/// The spec's default severities: data link protocol, surprise down, flow control, receiver
/// overflow, malformed TLP and internal error are fatal.
const AER_UNCOR_SEVER_DEFAULT: u32 = 0x0046_2030;
/// The correctable errors it implements (receiver error to header log overflow).
const AER_COR_ALL: u32 = 0x0000_f1c1;
/// Advisory non-fatal errors are masked by default.
const AER_COR_MASK_DEFAULT: u32 = 1 << 13;
/// Device Status: fatal and non-fatal error detected.
const DEVSTA_FATAL: u16 = 1 << 2;
const DEVSTA_NONFATAL: u16 = 1 << 1;

/// Command register bits the device implements.
pub const CMD_MEMORY: u16 = 1 << 1;
pub const CMD_MASTER: u16 = 1 << 2;
pub const CMD_PARITY: u16 = 1 << 6;
pub const CMD_SERR: u16 = 1 << 8;
pub const CMD_INTX_DISABLE: u16 = 1 << 10;
/// Status register bits.
pub const STATUS_INTX: u16 = 1 << 3;
pub const STATUS_CAP_LIST: u16 = 1 << 4;
/// MSI message control: enable bit.
pub const MSI_ENABLE: u16 = 1 << 0;

#[derive(Clone)]
pub struct ConfigSpace {
    bytes: Box<[u8; CONFIG_SIZE]>,
    wmask: Box<[u8; CONFIG_SIZE]>,
    /// Bits a written 1 clears (status registers).
    w1c: Box<[u8; CONFIG_SIZE]>,
}

impl Default for ConfigSpace {
    fn default() -> Self {
        Self::new()
    }
}

impl ConfigSpace {
    /// Power-on state.
    pub fn new() -> Self {
        let mut c = Self {
            bytes: Box::new([0; CONFIG_SIZE]),
            wmask: Box::new([0; CONFIG_SIZE]),
            w1c: Box::new([0; CONFIG_SIZE]),
        };
        c.set16(0x00, VENDOR_ID);
        c.set16(0x02, DEVICE_ID);
        c.set16(0x06, STATUS_CAP_LIST);
        c.set32(0x08, (CLASS_CODE << 8) | u32::from(REVISION));
        // BAR0 and BAR2: 32-bit, non-prefetchable memory; type bits are all zero.
        c.mask32(0x10, !(BAR0_SIZE as u32 - 1));
        c.mask32(0x18, !(BAR2_SIZE as u32 - 1));
        c.set16(0x2c, VENDOR_ID);
        c.set16(0x2e, DEVICE_ID);
        c.bytes[0x34] = MSI_CAP as u8;
        c.bytes[0x3d] = 1; // INTA#
        c.mask16(
            0x04,
            CMD_MEMORY | CMD_MASTER | CMD_PARITY | CMD_SERR | CMD_INTX_DISABLE,
        );
        c.wmask[0x0c] = 0xff; // cache line size
        c.wmask[0x0d] = 0xff; // latency timer
        c.wmask[0x3c] = 0xff; // interrupt line
                              // MSI: 64-bit address, one vector, no per-vector masking.
        c.bytes[MSI_CAP] = 0x05;
        c.set16(MSI_CAP + 2, 1 << 7);
        c.mask16(MSI_CAP + 2, MSI_ENABLE | (0x7 << 4));
        c.mask32(MSI_CAP + 4, 0xffff_fffc);
        c.mask32(MSI_CAP + 8, 0xffff_ffff);
        c.mask16(MSI_CAP + 12, 0xffff);
        // Power management, version 3 (PCI PM 1.2): D0 and D3hot only (no D1, D2, PME).
        c.bytes[MSI_CAP + 1] = PM_CAP as u8;
        c.bytes[PM_CAP] = 0x01;
        c.set16(PM_CAP + 2, 0x0003);
        c.mask16(PMCSR, PM_STATE_MASK);
        // PCI Express, version 2, an endpoint: role-based error reporting and FLR; a 2.5 GT/s
        // x1 link without ASPM.
        c.bytes[PM_CAP + 1] = PCIE_CAP as u8;
        c.bytes[PCIE_CAP] = 0x10;
        c.set16(PCIE_CAP + 2, 0x0002);
        c.set32(PCIE_CAP + 4, 1 << 15 | 1 << 28);
        // Error reporting enables, relaxed ordering, payload size, no snoop, read request
        // size; the FLR bit reads 0.
        c.mask16(DEVCTL, 0x7cff | DEVCTL_FLR);
        c.set16(DEVCTL, 0x2810);
        c.w1c[DEVSTA] = 0x0f;
        c.set32(PCIE_CAP + 12, 0x0000_0011);
        c.mask16(PCIE_CAP + 16, 0x00c3);
        c.set16(PCIE_CAP + 18, 0x0011);
        c.set32(PCIE_CAP + 0x2c, 0x0000_0002);
        c.set16(PCIE_CAP + 0x30, 0x0001);
        c.mask16(PCIE_CAP + 0x30, 0x000f);
        // AER, version 2, the last extended capability.
        c.set32(AER_CAP, 0x0002_0001);
        c.w1c[AER_UNCOR_STATUS..AER_UNCOR_STATUS + 4].copy_from_slice(&AER_UNCOR_ALL.to_le_bytes());
        c.mask32(AER_UNCOR_MASK, AER_UNCOR_ALL);
        c.mask32(AER_UNCOR_SEVER, AER_UNCOR_ALL);
        c.set32(AER_UNCOR_SEVER, AER_UNCOR_SEVER_DEFAULT);
        c.w1c[AER_COR_STATUS..AER_COR_STATUS + 4].copy_from_slice(&AER_COR_ALL.to_le_bytes());
        c.mask32(AER_COR_MASK, AER_COR_ALL);
        c.set32(AER_COR_MASK, AER_COR_MASK_DEFAULT);
        c
    }

    /// After a reset (function-level, bus, or D3hot to D0): power-on values but for the AER
    /// capability's sticky registers, which a reset keeps so that error handling can read them.
    pub fn reset(&self) -> Self {
        let mut c = Self::new();
        let aer = AER_CAP..AER_CAP + AER_LEN;
        c.bytes[aer.clone()].copy_from_slice(&self.bytes[aer]);
        c
    }

    /// The function detected an uncorrectable error (`bits` of AER's uncorrectable status): it
    /// records it in the status register, points the first error pointer at it if none was
    /// pending, and flags Device Status by the error's severity.
    pub fn uncorrectable(&mut self, bits: u32) {
        let pending = self.get32(AER_UNCOR_STATUS);
        if pending & AER_UNCOR_ALL == 0 {
            let first = bits.trailing_zeros().min(31) as u8;
            self.bytes[AER_CAP_CTL] = (self.bytes[AER_CAP_CTL] & !0x1f) | first;
        }
        self.set32(AER_UNCOR_STATUS, pending | bits);
        let fatal = bits & self.get32(AER_UNCOR_SEVER) != 0;
        let flag = if fatal { DEVSTA_FATAL } else { DEVSTA_NONFATAL };
        self.set16(DEVSTA, self.get16(DEVSTA) | flag);
    }

    /// The power state PMCSR holds: 0 (D0) to 3 (D3hot).
    pub fn power_state(&self) -> u8 {
        (self.get16(PMCSR) & PM_STATE_MASK) as u8
    }

    /// Sets or clears PMCSR's No_Soft_Reset bit (read-only to the guest).
    pub fn set_no_soft_reset(&mut self, on: bool) {
        let v = self.get16(PMCSR) & !PM_NO_SOFT_RESET;
        self.set16(PMCSR, v | if on { PM_NO_SOFT_RESET } else { 0 });
    }

    /// Reads `data.len()` bytes at `offset`; the caller checks bounds.
    /// `intx` is the device's interrupt status, shown in the status register.
    pub fn read(&self, offset: usize, data: &mut [u8], intx: bool) {
        data.copy_from_slice(&self.bytes[offset..offset + data.len()]);
        if intx && (offset..offset + data.len()).contains(&0x06) {
            data[0x06 - offset] |= STATUS_INTX as u8;
        }
    }

    /// Writes `data` at `offset`, honouring the write and write-1-to-clear masks; the caller
    /// checks bounds. A power state the function does not support (D1, D2) is ignored, as PCI
    /// PM has it. Returns whether the write initiated a function-level reset (the caller
    /// carries it out; the bit reads 0).
    pub fn write(&mut self, offset: usize, data: &[u8]) -> bool {
        let state = self.power_state();
        for (i, &b) in data.iter().enumerate() {
            let (m, c) = (self.wmask[offset + i], self.w1c[offset + i]);
            let old = &mut self.bytes[offset + i];
            *old = ((*old & !m) | (b & m)) & !(b & c);
        }
        if matches!(self.power_state(), 1 | 2) {
            self.bytes[PMCSR] = (self.bytes[PMCSR] & !(PM_STATE_MASK as u8)) | state;
        }
        let flr = self.get16(DEVCTL) & DEVCTL_FLR != 0;
        self.set16(DEVCTL, self.get16(DEVCTL) & !DEVCTL_FLR);
        flr
    }

    pub fn command(&self) -> u16 {
        self.get16(0x04)
    }

    pub fn msi_control(&self) -> u16 {
        self.get16(MSI_CAP + 2)
    }

    fn get16(&self, off: usize) -> u16 {
        u16::from_le_bytes([self.bytes[off], self.bytes[off + 1]])
    }

    pub fn get32(&self, off: usize) -> u32 {
        u32::from_le_bytes(self.bytes[off..off + 4].try_into().unwrap_or_default())
    }

    fn set16(&mut self, off: usize, v: u16) {
        self.bytes[off..off + 2].copy_from_slice(&v.to_le_bytes());
    }

    fn set32(&mut self, off: usize, v: u32) {
        self.bytes[off..off + 4].copy_from_slice(&v.to_le_bytes());
    }

    fn mask16(&mut self, off: usize, m: u16) {
        self.wmask[off..off + 2].copy_from_slice(&m.to_le_bytes());
    }

    fn mask32(&mut self, off: usize, m: u32) {
        self.wmask[off..off + 4].copy_from_slice(&m.to_le_bytes());
    }
}
