// SPDX-License-Identifier: GPL-2.0

//! Open Firmware (device tree) ids: the `compatible` strings a driver matches device-tree nodes
//! by.
//!
//! A table of them is built at compile time with [`of_device_table!`](crate::of_device_table) on
//! the generic [`device_id`](crate::device_id) machinery, as PCI's is; buses such as
//! [`platform`](crate::platform) take it.
//!
//! C header: [`include/linux/mod_devicetable.h`](srctree/include/linux/mod_devicetable.h)

use crate::{bindings, device_id::RawDeviceId, str::CStr};

/// A device-tree id: an entry of a driver's OF match table (C's `struct of_device_id`), matching
/// nodes whose `compatible` property lists its string.
///
/// The table stores each entry's index in `data`, so `data` cannot be set here.
///
/// # Examples
///
/// ```
/// use kernel::{c_str, of::DeviceId};
///
/// let id = DeviceId::new(c_str!("pci-rig,platform-demo"));
/// assert_eq!(id.compatible(), b"pci-rig,platform-demo");
/// ```
#[repr(transparent)]
#[derive(Clone, Copy)]
pub struct DeviceId(bindings::of_device_id);

impl DeviceId {
    /// An id matching nodes compatible with `compatible`, which must be shorter than the C
    /// field (127 bytes and the NUL); a longer one fails the build when used in a table.
    ///
    /// # Examples
    ///
    /// ```
    /// let id = kernel::of::DeviceId::new(kernel::c_str!("vendor,device"));
    /// assert_eq!(id.compatible().len(), 13);
    /// ```
    pub const fn new(compatible: &'static CStr) -> Self {
        let src = compatible.as_bytes_with_nul();
        // SAFETY: `struct of_device_id` is plain data (arrays of chars and a pointer); all zeroes
        // is a valid value of it.
        let mut id: bindings::of_device_id = unsafe { core::mem::zeroed() };
        assert!(
            src.len() <= id.compatible.len(),
            "compatible string too long"
        );
        let mut i = 0;
        while i < src.len() {
            // Lossless: a byte in `c_char`, whichever sign it has.
            id.compatible[i] = src[i] as _;
            i += 1;
        }
        Self(id)
    }

    /// Returns the compatible string this id matches, without its NUL.
    ///
    /// # Examples
    ///
    /// ```
    /// let id = kernel::of::DeviceId::new(kernel::c_str!("a,b"));
    /// assert_eq!(id.compatible(), b"a,b");
    /// ```
    pub fn compatible(&self) -> &[u8] {
        let all = &self.0.compatible;
        let len = all.iter().position(|&c| c == 0).unwrap_or(all.len());
        // SAFETY: `c_char` and `u8` have the same size and alignment, and `len` is within
        // `all`.
        unsafe { core::slice::from_raw_parts(all.as_ptr().cast::<u8>(), len) }
    }
}

// SAFETY: `DeviceId` is a transparent wrapper of `struct of_device_id`; all zeroes is the end of
// an OF match table; `data` is a pointer (the size of `usize`) that the OF core only hands back
// in the matched id, never dereferences.
unsafe impl RawDeviceId for DeviceId {
    const DRIVER_DATA_OFFSET: usize = core::mem::offset_of!(bindings::of_device_id, data);
}

// SAFETY: The only pointer inside, `data`, holds an index (see `RawDeviceId`) and is never
// dereferenced; the rest is plain bytes. Tables of ids live in `static`s.
unsafe impl Sync for DeviceId {}

/// An OF match table with info of type `U` per entry.
pub type IdTable<U> = crate::device_id::IdTable<DeviceId, U>;

/// Declares an OF match table constant `$table` with info of type `$info_ty` per entry.
///
/// The entries are `(of::DeviceId, info)` pairs. The ids go into read-only data, ending in a zero
/// entry; in a module they are exported as `__mod_of__$table_device_table`, from which `modpost`
/// makes `of:N*T*C<compatible>` module aliases.
///
/// # Examples
///
/// ```
/// use kernel::{c_str, of};
///
/// kernel::of_device_table!(IDS, u32, [
///     (of::DeviceId::new(c_str!("pci-rig,one")), 1),
///     (of::DeviceId::new(c_str!("pci-rig,two")), 2),
/// ]);
///
/// assert_eq!(IDS.ids().len(), 2);
/// assert_eq!(IDS.ids()[1].compatible(), b"pci-rig,two");
/// assert_eq!(IDS.info(1), Some(&2));
/// ```
#[macro_export]
macro_rules! of_device_table {
    ($table:ident, $info_ty:ty, [ $($entries:tt)* ]) => {
        $crate::define_id_table!($table, "of", $crate::of::DeviceId, $info_ty, [ $($entries)* ]);
    };
}
