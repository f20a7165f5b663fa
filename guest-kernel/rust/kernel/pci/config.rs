// SPDX-License-Identifier: GPL-2.0

//! A bound PCI device's configuration space: reads and writes typed by their width, bounded by
//! the space's size, and walks of its capability lists.
//!
//! [`Device::config_space`] gives the conventional 256 bytes every function has,
//! [`Device::config_space_extended`] the 4096 bytes of a PCI Express function (refused with
//! `ENOTSUPP` where the platform or the device has fewer). Both borrow a `Device<Bound>`, so a
//! driver reaches config space only while it is bound to the device, as it reaches its BARs.
//! Offsets known at build time are checked at build time (inside the space, aligned to the
//! access); offsets computed at run time go through the `try_` accessors, checked at run time.
//!
//! Accesses go through the PCI core (`pci_read_config_*`, `pci_write_config_*`), which
//! serialises them with its own and blocks them while the device is being reset. A read of a
//! device that is gone returns all ones, as the bus would.
//!
//! C header: [`include/linux/pci.h`](srctree/include/linux/pci.h)
//!
//! # Examples
//!
//! Binds QEMU's `e1000e` (8086:10d3), a PCI Express function (this test expects one, and no
//! other driver for it): its IDs through config space, its standard capabilities (power
//! management, MSI, PCI Express, MSI-X) and its extended ones (AER first), then `edu`
//! (1234:11e8), a conventional function with MSI only, whose extended space is refused. Probe
//! records what it saw; the test thread asserts.
//!
//! ```
//! use core::sync::atomic::{AtomicU32, Ordering};
//! use kernel::{
//!     c_str,
//!     driver::Registration,
//!     pci::{self, Capability, ExtCapability},
//! };
//!
//! // Bit `n` set: check `n` of a probe failed.
//! static FAILED: AtomicU32 = AtomicU32::new(0);
//! // Bit 0: e1000e probed; bit 1: edu.
//! static PROBED: AtomicU32 = AtomicU32::new(0);
//!
//! fn check(n: u32, ok: bool) {
//!     if !ok {
//!         FAILED.fetch_or(1 << n, Ordering::SeqCst);
//!     }
//! }
//!
//! struct Probe;
//! kernel::pci_device_table!(IDS, bool, [
//!     (pci::DeviceId::from_id(0x8086, 0x10d3), true),
//!     (pci::DeviceId::from_id(0x1234, 0x11e8), false),
//! ]);
//!
//! impl pci::Driver for Probe {
//!     type IdInfo = bool;
//!     const ID_TABLE: pci::IdTable<bool> = IDS;
//!     type Data = ();
//!
//!     fn probe(pdev: &pci::Device<pci::Core>, express: &bool) -> Result {
//!         PROBED.fetch_or(if *express { 1 } else { 2 }, Ordering::SeqCst);
//!         let cs = pdev.config_space();
//!         check(0, cs.read16(0) == pdev.vendor_id() && cs.read16(2) == pdev.device_id());
//!         check(1, cs.read32(0) == u32::from(pdev.vendor_id()) | u32::from(pdev.device_id()) << 16);
//!         // Run-time offsets: checked then.
//!         check(2, cs.try_read32(0x100) == Err(EINVAL) && cs.try_read16(1) == Err(EINVAL)
//!                  && cs.try_read8(0xff).is_ok());
//!         let caps: KVec<Capability> = {
//!             let mut v = KVec::new();
//!             for c in cs.capabilities() {
//!                 v.push(c, GFP_KERNEL)?;
//!             }
//!             v
//!         };
//!         let has = |f: fn(&Capability) -> bool| caps.iter().any(f);
//!         check(3, has(|c| matches!(c, Capability::Msi(_))));
//!         if *express {
//!             check(4, has(|c| matches!(c, Capability::PciExpress(_)))
//!                      && has(|c| matches!(c, Capability::PowerManagement(_)))
//!                      && has(|c| matches!(c, Capability::MsiX(_))));
//!             let ext = pdev.config_space_extended()?;
//!             check(5, matches!(ext.ext_capabilities().next(), Some(ExtCapability::Aer(0x100))));
//!             check(6, ext.try_read32(0xffc).is_ok() && ext.try_read32(0x1000) == Err(EINVAL));
//!             // The same capability found from either view.
//!             check(7, ext.capabilities().count() == caps.len());
//!         } else {
//!             check(8, pdev.config_space_extended().err() == Some(ENOTSUPP)
//!                      && caps.len() == 1);
//!         }
//!         // A write, read back: the cache line size register is read-write.
//!         let line = cs.read8(0x0c);
//!         cs.write8(0x10, 0x0c);
//!         check(9, cs.read8(0x0c) == 0x10);
//!         cs.write8(line, 0x0c);
//!         Ok(())
//!     }
//! }
//!
//! // SAFETY: Built-in code has no module of its own; null is what it uses.
//! static MODULE: ThisModule = unsafe { ThisModule::from_ptr(core::ptr::null_mut()) };
//!
//! let reg = KBox::pin_init(
//!     Registration::<pci::Adapter<Probe>>::new(c_str!("rust_doctest_config"), &MODULE),
//!     GFP_KERNEL,
//! )?;
//! drop(reg);
//! assert_eq!(PROBED.load(Ordering::SeqCst), 3);
//! assert_eq!(FAILED.load(Ordering::SeqCst), 0);
//! # Ok::<(), Error>(())
//! ```

use super::Device;
use crate::{
    bindings, build_assert,
    device::Bound,
    error::{code::*, Result},
};
use core::marker::PhantomData;

/// The size of a configuration space.
pub trait Size {
    /// Its size in bytes.
    const BYTES: usize;
}

/// The conventional configuration space: 256 bytes, which every PCI function has.
pub enum Conventional {}

/// A PCI Express function's extended configuration space: 4096 bytes.
pub enum Extended {}

impl Size for Conventional {
    const BYTES: usize = 256;
}

impl Size for Extended {
    const BYTES: usize = 4096;
}

/// The configuration space of a bound PCI device, `S::BYTES` bytes of it.
///
/// # Invariants
///
/// `pdev` is bound for `'a`, and its configuration space has at least `S::BYTES` bytes.
pub struct ConfigSpace<'a, S: Size> {
    pdev: &'a Device<Bound>,
    _size: PhantomData<S>,
}

/// Whether an access of `width` bytes at `offset` lies inside `size` bytes, aligned. Inlined
/// into other crates too, so that a constant offset reaches the build-time check as one.
#[inline(always)]
const fn valid(offset: usize, width: usize, size: usize) -> bool {
    match offset.checked_add(width) {
        Some(end) => end <= size && offset % width == 0,
        None => false,
    }
}

macro_rules! config_accessors {
    ($read:ident, $try_read:ident, $write:ident, $try_write:ident, $c_read:ident, $c_write:ident,
     $ty:ty) => {
        #[doc = concat!("Reads a `", stringify!($ty), "` at `offset`, checked at build time.")]
        #[inline(always)]
        pub fn $read(&self, offset: usize) -> $ty {
            build_assert!(
                valid(offset, core::mem::size_of::<$ty>(), S::BYTES),
                "config space offset out of bounds or unaligned"
            );
            let mut v: $ty = 0;
            // SAFETY: `pdev` is a valid `pci_dev` (the type invariants) and `offset` lies inside
            // its config space (checked above); `v` outlives the call. On failure the PCI core
            // sets `v` to all ones, as a read of a missing device does.
            unsafe { bindings::$c_read(self.pdev.as_raw(), offset as i32, &mut v) };
            v
        }

        #[doc = concat!("Reads a `", stringify!($ty), "` at `offset`, checked at run time: ")]
        #[doc = "`EINVAL` outside the space or unaligned."]
        pub fn $try_read(&self, offset: usize) -> Result<$ty> {
            if !valid(offset, core::mem::size_of::<$ty>(), S::BYTES) {
                return Err(EINVAL);
            }
            let mut v: $ty = 0;
            // SAFETY: As for the build-time checked read; `offset` checked above.
            unsafe { bindings::$c_read(self.pdev.as_raw(), offset as i32, &mut v) };
            Ok(v)
        }

        #[doc = concat!("Writes a `", stringify!($ty), "` at `offset`, checked at build time.")]
        #[inline(always)]
        pub fn $write(&self, value: $ty, offset: usize) {
            build_assert!(
                valid(offset, core::mem::size_of::<$ty>(), S::BYTES),
                "config space offset out of bounds or unaligned"
            );
            // SAFETY: `pdev` is a valid `pci_dev` and `offset` lies inside its config space.
            unsafe { bindings::$c_write(self.pdev.as_raw(), offset as i32, value) };
        }

        #[doc = concat!("Writes a `", stringify!($ty), "` at `offset`, checked at run time: ")]
        #[doc = "`EINVAL` outside the space or unaligned."]
        pub fn $try_write(&self, value: $ty, offset: usize) -> Result {
            if !valid(offset, core::mem::size_of::<$ty>(), S::BYTES) {
                return Err(EINVAL);
            }
            // SAFETY: As for the build-time checked write; `offset` checked above.
            unsafe { bindings::$c_write(self.pdev.as_raw(), offset as i32, value) };
            Ok(())
        }
    };
}

impl<'a, S: Size> ConfigSpace<'a, S> {
    config_accessors!(
        read8,
        try_read8,
        write8,
        try_write8,
        pci_read_config_byte,
        pci_write_config_byte,
        u8
    );
    config_accessors!(
        read16,
        try_read16,
        write16,
        try_write16,
        pci_read_config_word,
        pci_write_config_word,
        u16
    );
    config_accessors!(
        read32,
        try_read32,
        write32,
        try_write32,
        pci_read_config_dword,
        pci_write_config_dword,
        u32
    );

    /// The capabilities of the standard list (in the first 256 bytes), in list order.
    pub fn capabilities(&self) -> Capabilities<'a> {
        // Status bit 4: the function has a capability list.
        let listed = self.read16(0x06) & (1 << 4) != 0;
        Capabilities {
            space: ConfigSpace {
                pdev: self.pdev,
                _size: PhantomData,
            },
            next: if listed { self.read8(0x34) & !3 } else { 0 },
            // As the PCI core: at most 48 entries, so that a looping list ends.
            left: 48,
        }
    }
}

impl<'a> ConfigSpace<'a, Extended> {
    /// The extended capabilities (from offset 0x100), in list order.
    pub fn ext_capabilities(&self) -> ExtCapabilities<'a> {
        ExtCapabilities {
            space: ConfigSpace {
                pdev: self.pdev,
                _size: PhantomData,
            },
            next: 0x100,
            // As the PCI core: at most (4096 - 256) / 8 entries, so that a looping list ends.
            left: (4096 - 256) / 8,
        }
    }
}

/// A capability of the standard list, with its offset in config space.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Capability {
    /// Power management (C's `PCI_CAP_ID_PM`).
    PowerManagement(u8),
    /// Message signalled interrupts (`PCI_CAP_ID_MSI`).
    Msi(u8),
    /// PCI Express (`PCI_CAP_ID_EXP`).
    PciExpress(u8),
    /// MSI-X (`PCI_CAP_ID_MSIX`).
    MsiX(u8),
    /// Any other, by its id.
    Other {
        /// The capability id.
        id: u8,
        /// Its offset.
        at: u8,
    },
}

impl Capability {
    fn new(id: u8, at: u8) -> Self {
        match u32::from(id) {
            bindings::PCI_CAP_ID_PM => Capability::PowerManagement(at),
            bindings::PCI_CAP_ID_MSI => Capability::Msi(at),
            bindings::PCI_CAP_ID_EXP => Capability::PciExpress(at),
            bindings::PCI_CAP_ID_MSIX => Capability::MsiX(at),
            _ => Capability::Other { id, at },
        }
    }
}

/// An extended capability, with its offset in config space.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExtCapability {
    /// Advanced Error Reporting (C's `PCI_EXT_CAP_ID_ERR`).
    Aer(u16),
    /// Any other, by its id and version.
    Other {
        /// The capability id.
        id: u16,
        /// Its version.
        version: u8,
        /// Its offset.
        at: u16,
    },
}

/// The standard capability list of a [`ConfigSpace`]; see [`ConfigSpace::capabilities`].
pub struct Capabilities<'a> {
    space: ConfigSpace<'a, Conventional>,
    next: u8,
    left: usize,
}

impl Iterator for Capabilities<'_> {
    type Item = Capability;

    fn next(&mut self) -> Option<Capability> {
        // Entries live past the 64-byte header.
        if self.next < 0x40 || self.left == 0 {
            return None;
        }
        self.left -= 1;
        let at = self.next;
        let id = self.space.try_read8(usize::from(at)).ok()?;
        if id == 0xff {
            // A device that is gone reads all ones.
            return None;
        }
        self.next = self.space.try_read8(usize::from(at) + 1).ok()? & !3;
        Some(Capability::new(id, at))
    }
}

/// The extended capability list of a [`ConfigSpace`]`<`[`Extended`]`>`; see
/// [`ConfigSpace::ext_capabilities`].
pub struct ExtCapabilities<'a> {
    space: ConfigSpace<'a, Extended>,
    next: u16,
    left: usize,
}

impl Iterator for ExtCapabilities<'_> {
    type Item = ExtCapability;

    fn next(&mut self) -> Option<ExtCapability> {
        if self.next < 0x100 || self.left == 0 {
            return None;
        }
        self.left -= 1;
        let at = self.next;
        let header = self.space.try_read32(usize::from(at)).ok()?;
        // No capability at all (0), or a device that is gone (all ones).
        if header == 0 || header == u32::MAX {
            return None;
        }
        self.next = (header >> 20) as u16 & !3;
        let id = header as u16;
        Some(match u32::from(id) {
            bindings::PCI_EXT_CAP_ID_ERR => ExtCapability::Aer(at),
            _ => ExtCapability::Other {
                id,
                version: ((header >> 16) & 0xf) as u8,
                at,
            },
        })
    }
}

impl Device<Bound> {
    /// The conventional configuration space (256 bytes), for as long as the device is bound.
    pub fn config_space(&self) -> ConfigSpace<'_, Conventional> {
        // INVARIANT: `self` is bound for the borrow; every function has 256 bytes.
        ConfigSpace {
            pdev: self,
            _size: PhantomData,
        }
    }

    /// The extended configuration space (4096 bytes) of a PCI Express function; `ENOTSUPP` if
    /// the device or the platform gives access to less.
    pub fn config_space_extended(&self) -> Result<ConfigSpace<'_, Extended>> {
        // SAFETY: `self` is a valid `pci_dev`; `cfg_size` is fixed at enumeration.
        let size = unsafe { (*self.as_raw()).cfg_size };
        if usize::try_from(size).map_or(true, |s| s < Extended::BYTES) {
            return Err(ENOTSUPP);
        }
        // INVARIANT: bound for the borrow; `cfg_size` covers the extended space.
        Ok(ConfigSpace {
            pdev: self,
            _size: PhantomData,
        })
    }
}
