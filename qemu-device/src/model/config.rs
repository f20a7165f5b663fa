//! PCI configuration space: a standard type-0 header plus an MSI and a power-management
//! capability.
//!
//! Every byte has a write mask, as in real hardware: bits outside the mask keep their value.
//! BAR sizing falls out of this for free: the low bits of a BAR are read-only zeros, so writing
//! all-ones reads back the size mask.

use super::{BAR0_SIZE, BAR2_SIZE};

/// Our vendor id: unassigned in pci.ids (see REGISTERS.md).
pub const VENDOR_ID: u16 = regmap::VENDOR_ID as u16;
/// Our one device.
pub const DEVICE_ID: u16 = regmap::DEVICE_ID as u16;
/// Revision of this register map.
pub const REVISION: u8 = 0x01;
/// Base class 0xff ("device does not fit any defined class"), subclass 0, prog-if 0.
pub const CLASS_CODE: u32 = 0xff_00_00;
/// Conventional PCI: 256 bytes.
pub const CONFIG_SIZE: usize = 256;
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
    bytes: [u8; CONFIG_SIZE],
    wmask: [u8; CONFIG_SIZE],
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
            bytes: [0; CONFIG_SIZE],
            wmask: [0; CONFIG_SIZE],
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
        c
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

    /// Writes `data` at `offset`, honouring the write mask; the caller checks bounds. A power
    /// state the function does not support (D1, D2) is ignored, as PCI PM has it.
    pub fn write(&mut self, offset: usize, data: &[u8]) {
        let state = self.power_state();
        for (i, &b) in data.iter().enumerate() {
            let m = self.wmask[offset + i];
            let old = &mut self.bytes[offset + i];
            *old = (*old & !m) | (b & m);
        }
        if matches!(self.power_state(), 1 | 2) {
            self.bytes[PMCSR] = (self.bytes[PMCSR] & !(PM_STATE_MASK as u8)) | state;
        }
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
