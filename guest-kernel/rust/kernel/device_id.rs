// SPDX-License-Identifier: GPL-2.0

//! Device id tables, built at compile time.
//!
//! A bus matches devices against a table of C id structures that ends in an all-zero entry. Here
//! such a table is a `static` computed entirely by the compiler (so it lands in read-only data),
//! and every entry's `driver_data` holds the entry's index, so that the bus can hand the driver
//! the Rust value ("id info") that goes with the matched entry: no pointers or byte offsets to
//! compute at run time.
//!
//! C header: [`include/linux/mod_devicetable.h`](srctree/include/linux/mod_devicetable.h)

use core::mem::MaybeUninit;

/// A Rust type with the same layout as a bus's C device id structure.
///
/// # Safety
///
/// Implementers must guarantee that:
/// - `Self` has the layout of the bus's C id structure (e.g. `#[repr(transparent)]` over it), so
///   that an array of `Self` is an array of C ids;
/// - the all-zero bit pattern is a valid `Self` and is the bus's end-of-table sentinel;
/// - at byte offset [`RawDeviceId::DRIVER_DATA_OFFSET`] there is a field of type `usize` (or an
///   integer of the same size) that the bus does not interpret and passes back, in the matched
///   id, to the probe function.
///
/// # Examples
///
/// ```
/// use kernel::device_id::RawDeviceId;
///
/// #[repr(C)]
/// #[derive(Clone, Copy)]
/// struct MyId {
///     key: u32,
///     data: usize,
/// }
///
/// // SAFETY: `MyId` is `repr(C)`, all-zero is a valid (sentinel) value, and `data` is a `usize`.
/// unsafe impl RawDeviceId for MyId {
///     const DRIVER_DATA_OFFSET: usize = core::mem::offset_of!(MyId, data);
/// }
/// ```
pub unsafe trait RawDeviceId: Sized {
    /// Byte offset of the `driver_data` field that stores the entry's index.
    const DRIVER_DATA_OFFSET: usize;

    /// Returns the index stored in an id of a table built by [`IdArray::new`].
    ///
    /// # Examples
    ///
    /// ```
    /// # use kernel::device_id::{IdArray, RawDeviceId};
    /// # #[repr(C)] #[derive(Clone, Copy)] struct MyId { key: u32, data: usize }
    /// # // SAFETY: `MyId` is `repr(C)`, all-zero is valid, `data` is a `usize`.
    /// # unsafe impl RawDeviceId for MyId {
    /// #     const DRIVER_DATA_OFFSET: usize = core::mem::offset_of!(MyId, data);
    /// # }
    /// static IDS: IdArray<MyId, 2> = IdArray::new([MyId { key: 7, data: 0 }, MyId { key: 9, data: 0 }]);
    /// assert_eq!(IDS.ids()[1].index(), 1);
    /// ```
    fn index(&self) -> usize {
        // SAFETY: By the trait's safety requirements there is a `usize`-sized integer at this
        // offset inside `self`; it may not be aligned for `usize` in theory, so read unaligned.
        unsafe {
            core::ptr::from_ref(self)
                .cast::<u8>()
                .add(Self::DRIVER_DATA_OFFSET)
                .cast::<usize>()
                .read_unaligned()
        }
    }
}

/// A sentinel-terminated array of `N` device ids, laid out as the C bus expects.
///
/// # Invariants
///
/// `ids[i]` stores `i` in its `driver_data` field, and `sentinel` is all zeroes, right after the
/// last id (`#[repr(C)]`, and `[T; N]` has no trailing padding).
///
/// # Examples
///
/// ```
/// use kernel::device_id::{IdArray, RawDeviceId};
///
/// #[repr(C)]
/// #[derive(Clone, Copy)]
/// struct MyId {
///     key: u32,
///     data: usize,
/// }
///
/// // SAFETY: `MyId` is `repr(C)`, all-zero is a valid (sentinel) value, and `data` is a `usize`.
/// unsafe impl RawDeviceId for MyId {
///     const DRIVER_DATA_OFFSET: usize = core::mem::offset_of!(MyId, data);
/// }
///
/// static IDS: IdArray<MyId, 2> = IdArray::new([
///     MyId { key: 7, data: 99 },
///     MyId { key: 9, data: 99 },
/// ]);
///
/// // SAFETY: `IdArray<MyId, 2>` is three `MyId`s in a row.
/// let raw = unsafe { &*IDS.as_ptr().cast::<[MyId; 3]>() };
/// assert_eq!((raw[0].key, raw[0].data), (7, 0));
/// assert_eq!((raw[1].key, raw[1].data), (9, 1));
/// assert_eq!((raw[2].key, raw[2].data), (0, 0)); // the sentinel
/// ```
#[repr(C)]
pub struct IdArray<T: RawDeviceId, const N: usize> {
    ids: [T; N],
    sentinel: MaybeUninit<T>,
}

impl<T: RawDeviceId, const N: usize> IdArray<T, N> {
    /// Builds the array, storing each entry's index in its `driver_data` (whatever was there is
    /// overwritten) and appending the zeroed sentinel. Meant to be evaluated at compile time.
    ///
    /// # Examples
    ///
    /// See [`IdArray`].
    ///
    /// ```
    /// # use kernel::device_id::{IdArray, RawDeviceId};
    /// # #[repr(C)] #[derive(Clone, Copy)] struct MyId { key: u32, data: usize }
    /// # // SAFETY: `MyId` is `repr(C)`, all-zero is valid, `data` is a `usize`.
    /// # unsafe impl RawDeviceId for MyId {
    /// #     const DRIVER_DATA_OFFSET: usize = core::mem::offset_of!(MyId, data);
    /// # }
    /// const EMPTY: IdArray<MyId, 0> = IdArray::new([]);
    /// assert_eq!(EMPTY.ids().len(), 0);
    /// ```
    // Writing through pointers in a `const fn` needs Rust 1.83 (the kernel's minimum is 1.78);
    // this tree is built with the distribution's 1.96.
    #[allow(clippy::incompatible_msrv)]
    pub const fn new(ids: [T; N]) -> Self {
        let mut ids = ids;
        let mut i = 0;
        while i < N {
            let entry: *mut T = &mut ids[i];
            // SAFETY: By the safety requirements of `RawDeviceId`, `entry` points to a `T` that
            // has a `usize`-sized integer field at `DRIVER_DATA_OFFSET`, inside the object.
            unsafe {
                entry
                    .cast::<u8>()
                    .add(T::DRIVER_DATA_OFFSET)
                    .cast::<usize>()
                    .write_unaligned(i)
            };
            i += 1;
        }
        // INVARIANT: Each entry got its index; the sentinel is zeroed.
        Self {
            ids,
            sentinel: MaybeUninit::zeroed(),
        }
    }

    /// Returns a pointer to the first id, for the C side: the array ends in the zero sentinel.
    ///
    /// The pointer is derived from the whole array, so it may be used to read the sentinel.
    ///
    /// # Examples
    ///
    /// ```
    /// # use kernel::device_id::{IdArray, RawDeviceId};
    /// # #[repr(C)] #[derive(Clone, Copy)] struct MyId { key: u32, data: usize }
    /// # // SAFETY: `MyId` is `repr(C)`, all-zero is valid, `data` is a `usize`.
    /// # unsafe impl RawDeviceId for MyId {
    /// #     const DRIVER_DATA_OFFSET: usize = core::mem::offset_of!(MyId, data);
    /// # }
    /// static IDS: IdArray<MyId, 0> = IdArray::new([]);
    /// // SAFETY: The array has at least its sentinel.
    /// assert_eq!(unsafe { (*IDS.as_ptr()).key }, 0);
    /// ```
    pub const fn as_ptr(&self) -> *const T {
        core::ptr::from_ref(self).cast::<T>()
    }

    /// Returns the ids, without the sentinel.
    ///
    /// # Examples
    ///
    /// ```
    /// # use kernel::device_id::{IdArray, RawDeviceId};
    /// # #[repr(C)] #[derive(Clone, Copy)] struct MyId { key: u32, data: usize }
    /// # // SAFETY: `MyId` is `repr(C)`, all-zero is valid, `data` is a `usize`.
    /// # unsafe impl RawDeviceId for MyId {
    /// #     const DRIVER_DATA_OFFSET: usize = core::mem::offset_of!(MyId, data);
    /// # }
    /// static IDS: IdArray<MyId, 1> = IdArray::new([MyId { key: 3, data: 0 }]);
    /// assert_eq!(IDS.ids()[0].key, 3);
    /// ```
    pub const fn ids(&self) -> &[T] {
        &self.ids
    }
}

/// A bus-independent view of an id table: the C ids and the info value of each entry.
///
/// Drivers name their table with this type (through a bus alias such as `pci::IdTable`); bus
/// macros such as [`pci_device_table!`](crate::pci_device_table) build it.
///
/// # Invariants
///
/// `raw` points to an [`IdArray`] (derived from all of it, sentinel included), `ids` is that
/// array's `ids` field, and `info` has the same length.
///
/// # Examples
///
/// ```
/// use kernel::device_id::{IdArray, IdTable, RawDeviceId};
///
/// #[repr(C)]
/// #[derive(Clone, Copy)]
/// struct MyId {
///     key: u32,
///     data: usize,
/// }
///
/// // SAFETY: `MyId` is `repr(C)`, all-zero is a valid (sentinel) value, and `data` is a `usize`.
/// unsafe impl RawDeviceId for MyId {
///     const DRIVER_DATA_OFFSET: usize = core::mem::offset_of!(MyId, data);
/// }
///
/// static IDS: IdArray<MyId, 2> =
///     IdArray::new([MyId { key: 7, data: 0 }, MyId { key: 9, data: 0 }]);
/// static INFO: [&str; 2] = ["seven", "nine"];
/// const TABLE: IdTable<MyId, &str> = IdTable::new(&IDS, &INFO);
///
/// // What a bus does in probe with the id it matched:
/// let matched: &MyId = &TABLE.ids()[1];
/// assert_eq!(TABLE.info(matched.index()), Some(&"nine"));
/// assert_eq!(TABLE.info(2), None);
/// ```
pub struct IdTable<T: RawDeviceId + 'static, U: 'static> {
    raw: *const T,
    ids: &'static [T],
    info: &'static [U],
}

impl<T: RawDeviceId + 'static, U: 'static> IdTable<T, U> {
    /// Pairs an id array with the info of each entry.
    ///
    /// # Examples
    ///
    /// See [`IdTable`].
    ///
    /// ```
    /// # use kernel::device_id::{IdArray, IdTable, RawDeviceId};
    /// # #[repr(C)] #[derive(Clone, Copy)] struct MyId { key: u32, data: usize }
    /// # // SAFETY: `MyId` is `repr(C)`, all-zero is valid, `data` is a `usize`.
    /// # unsafe impl RawDeviceId for MyId {
    /// #     const DRIVER_DATA_OFFSET: usize = core::mem::offset_of!(MyId, data);
    /// # }
    /// static IDS: IdArray<MyId, 1> = IdArray::new([MyId { key: 1, data: 0 }]);
    /// const TABLE: IdTable<MyId, u32> = IdTable::new(&IDS, &[10]);
    /// assert_eq!(TABLE.info(0), Some(&10));
    /// ```
    pub const fn new<const N: usize>(ids: &'static IdArray<T, N>, info: &'static [U; N]) -> Self {
        // INVARIANT: `raw` comes from the whole `IdArray`, `ids.ids` is its `ids` field, and
        // both `ids.ids` and `info` have `N` entries.
        Self {
            raw: ids.as_ptr(),
            ids: &ids.ids,
            info,
        }
    }

    /// Returns a pointer to the sentinel-terminated C array, for the bus's driver structure.
    ///
    /// # Examples
    ///
    /// ```
    /// # use kernel::device_id::{IdArray, IdTable, RawDeviceId};
    /// # #[repr(C)] #[derive(Clone, Copy)] struct MyId { key: u32, data: usize }
    /// # // SAFETY: `MyId` is `repr(C)`, all-zero is valid, `data` is a `usize`.
    /// # unsafe impl RawDeviceId for MyId {
    /// #     const DRIVER_DATA_OFFSET: usize = core::mem::offset_of!(MyId, data);
    /// # }
    /// static IDS: IdArray<MyId, 1> = IdArray::new([MyId { key: 1, data: 0 }]);
    /// const TABLE: IdTable<MyId, ()> = IdTable::new(&IDS, &[()]);
    /// assert_eq!(TABLE.as_ptr(), IDS.as_ptr());
    /// // SAFETY: The pointer covers the whole array: the entry and the sentinel after it.
    /// let sentinel = unsafe { &*TABLE.as_ptr().add(1) };
    /// assert_eq!((sentinel.key, sentinel.data), (0, 0));
    /// ```
    pub const fn as_ptr(&self) -> *const T {
        self.raw
    }

    /// Returns the index of the entry `id` points to, or [`None`] if it points to no entry of
    /// this table (null, the sentinel, or an id elsewhere, e.g. a copy).
    ///
    /// Buses use it on the id the C side matched: only an entry of the table says which info
    /// goes with it.
    ///
    /// # Examples
    ///
    /// ```
    /// # use kernel::device_id::{IdArray, IdTable, RawDeviceId};
    /// # #[repr(C)] #[derive(Clone, Copy)] struct MyId { key: u32, data: usize }
    /// # // SAFETY: `MyId` is `repr(C)`, all-zero is valid, `data` is a `usize`.
    /// # unsafe impl RawDeviceId for MyId {
    /// #     const DRIVER_DATA_OFFSET: usize = core::mem::offset_of!(MyId, data);
    /// # }
    /// static IDS: IdArray<MyId, 2> =
    ///     IdArray::new([MyId { key: 1, data: 0 }, MyId { key: 2, data: 0 }]);
    /// const TABLE: IdTable<MyId, ()> = IdTable::new(&IDS, &[(), ()]);
    /// assert_eq!(TABLE.index_of(&TABLE.ids()[1]), Some(1));
    /// assert_eq!(TABLE.index_of(TABLE.as_ptr().wrapping_add(2)), None); // the sentinel
    /// let copy = TABLE.ids()[0];
    /// assert_eq!(TABLE.index_of(&copy), None);
    /// assert_eq!(TABLE.index_of(core::ptr::null()), None);
    /// // Not on an entry's boundary: not an entry.
    /// assert_eq!(TABLE.index_of(TABLE.as_ptr().cast::<u8>().wrapping_add(1).cast()), None);
    /// ```
    pub fn index_of(&self, id: *const T) -> Option<usize> {
        let size = core::mem::size_of::<T>();
        // Addresses only: `id` may point anywhere, and is not dereferenced.
        let offset = (id as usize).checked_sub(self.raw as usize)?;
        if size == 0 || offset % size != 0 || offset / size >= self.ids.len() {
            return None;
        }
        Some(offset / size)
    }

    /// Returns the ids, without the sentinel.
    ///
    /// # Examples
    ///
    /// ```
    /// # use kernel::device_id::{IdArray, IdTable, RawDeviceId};
    /// # #[repr(C)] #[derive(Clone, Copy)] struct MyId { key: u32, data: usize }
    /// # // SAFETY: `MyId` is `repr(C)`, all-zero is valid, `data` is a `usize`.
    /// # unsafe impl RawDeviceId for MyId {
    /// #     const DRIVER_DATA_OFFSET: usize = core::mem::offset_of!(MyId, data);
    /// # }
    /// static IDS: IdArray<MyId, 1> = IdArray::new([MyId { key: 1, data: 0 }]);
    /// const TABLE: IdTable<MyId, ()> = IdTable::new(&IDS, &[()]);
    /// assert_eq!(TABLE.ids().len(), 1);
    /// ```
    pub const fn ids(&self) -> &'static [T] {
        self.ids
    }

    /// Returns the info of the entry at `index` (as stored in a matched id), or [`None`] if
    /// there is no such entry.
    ///
    /// # Examples
    ///
    /// See [`IdTable`].
    ///
    /// ```
    /// # use kernel::device_id::{IdArray, IdTable, RawDeviceId};
    /// # #[repr(C)] #[derive(Clone, Copy)] struct MyId { key: u32, data: usize }
    /// # // SAFETY: `MyId` is `repr(C)`, all-zero is valid, `data` is a `usize`.
    /// # unsafe impl RawDeviceId for MyId {
    /// #     const DRIVER_DATA_OFFSET: usize = core::mem::offset_of!(MyId, data);
    /// # }
    /// static IDS: IdArray<MyId, 1> = IdArray::new([MyId { key: 1, data: 0 }]);
    /// const TABLE: IdTable<MyId, char> = IdTable::new(&IDS, &['a']);
    /// assert_eq!(TABLE.info(0), Some(&'a'));
    /// assert_eq!(TABLE.info(usize::MAX), None);
    /// ```
    pub fn info(&self, index: usize) -> Option<&'static U> {
        self.info.get(index)
    }
}

/// Builds an [`IdTable`] constant named `$table` from `(id, info)` pairs, for bus macros.
///
/// The ids go into a `static` [`IdArray`] (read-only data); in a loadable module it is also
/// exported as `__mod_$bus__$table_device_table`, the symbol `modpost` turns into module aliases.
///
/// # Examples
///
/// ```
/// use kernel::device_id::RawDeviceId;
///
/// #[repr(C)]
/// #[derive(Clone, Copy)]
/// struct MyId {
///     key: u32,
///     data: usize,
/// }
///
/// // SAFETY: `MyId` is `repr(C)`, all-zero is a valid (sentinel) value, and `data` is a `usize`.
/// unsafe impl RawDeviceId for MyId {
///     const DRIVER_DATA_OFFSET: usize = core::mem::offset_of!(MyId, data);
/// }
///
/// kernel::define_id_table!(TABLE, "my", MyId, u8, [
///     (MyId { key: 1, data: 0 }, 10),
///     (MyId { key: 2, data: 0 }, 20),
/// ]);
///
/// assert_eq!(TABLE.ids().len(), 2);
/// assert_eq!(TABLE.info(TABLE.ids()[1].index()), Some(&20));
/// ```
#[macro_export]
macro_rules! define_id_table {
    ($table:ident, $bus:literal, $id_ty:ty, $info_ty:ty, [ $( ($id:expr, $info:expr) ),* $(,)? ]) => {
        const $table: $crate::device_id::IdTable<$id_ty, $info_ty> = {
            const N: usize = {
                let entries: &[&str] = &[$(::core::stringify!($id)),*];
                entries.len()
            };
            #[cfg_attr(
                MODULE,
                export_name = ::core::concat!(
                    "__mod_", $bus, "__", ::core::stringify!($table), "_device_table"
                )
            )]
            static IDS: $crate::device_id::IdArray<$id_ty, N> =
                $crate::device_id::IdArray::new([$($id),*]);
            static INFO: [$info_ty; N] = [$($info),*];
            $crate::device_id::IdTable::new(&IDS, &INFO)
        };
    };
}
