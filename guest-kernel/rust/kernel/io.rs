// SPDX-License-Identifier: GPL-2.0

//! Memory-mapped I/O.
//!
//! C header: [`include/asm-generic/io.h`](srctree/include/asm-generic/io.h)

use crate::{bindings, build_assert, error::code::EINVAL, error::Result};

/// The address and length of a mapped I/O region, checked against a minimum length `SIZE`.
///
/// Bus abstractions create it after mapping a region and wrap it in their own type, which derefs
/// to [`Io`].
///
/// # Invariants
///
/// `maxsize >= SIZE`, and `addr + maxsize` does not overflow.
///
/// # Examples
///
/// ```
/// use kernel::io::IoRaw;
///
/// assert!(IoRaw::<16>::new(0x1000, 16).is_ok());
/// assert_eq!(IoRaw::<16>::new(0x1000, 8).err(), Some(EINVAL));
/// assert_eq!(IoRaw::<16>::new(0x1000, 64)?.maxsize(), 64);
/// # Ok::<(), Error>(())
/// ```
#[derive(Clone, Copy)]
pub struct IoRaw<const SIZE: usize = 0> {
    addr: usize,
    maxsize: usize,
}

impl<const SIZE: usize> IoRaw<SIZE> {
    /// Describes `maxsize` bytes at `addr`; fails with `EINVAL` if `maxsize < SIZE` or the
    /// region wraps around the address space.
    ///
    /// # Examples
    ///
    /// ```
    /// assert!(kernel::io::IoRaw::<0>::new(usize::MAX, 2).is_err());
    /// ```
    pub fn new(addr: usize, maxsize: usize) -> Result<Self> {
        if maxsize < SIZE || addr.checked_add(maxsize).is_none() {
            return Err(EINVAL);
        }
        // INVARIANT: Both were just checked.
        Ok(Self { addr, maxsize })
    }

    /// Returns the start address.
    ///
    /// # Examples
    ///
    /// ```
    /// assert_eq!(kernel::io::IoRaw::<4>::new(0x40, 4)?.addr(), 0x40);
    /// # Ok::<(), Error>(())
    /// ```
    pub fn addr(&self) -> usize {
        self.addr
    }

    /// Returns the length in bytes known at run time (at least `SIZE`).
    ///
    /// # Examples
    ///
    /// ```
    /// assert_eq!(kernel::io::IoRaw::<4>::new(0x40, 8)?.maxsize(), 8);
    /// # Ok::<(), Error>(())
    /// ```
    pub fn maxsize(&self) -> usize {
        self.maxsize
    }
}

/// Access to a memory-mapped I/O region of at least `SIZE` bytes.
///
/// The accessors take a byte offset from the start of the region. Those without `try_` check the
/// offset when the kernel is built: it must be known to the compiler (a constant, after
/// inlining), aligned to the access size, and the access must end within `SIZE`; otherwise the
/// build fails with a `build_error` link error. The `try_` ones check at run time against the
/// region's real length and return `EINVAL` for an offset that is out of bounds or unaligned.
///
/// The `_relaxed` variants do not order the access against normal memory accesses (like C's
/// `readl_relaxed()`). 64-bit accessors exist on 64-bit kernels only.
///
/// # Invariants
///
/// `self.0.addr()` is the start of a mapping of at least `self.0.maxsize()` bytes of I/O memory
/// (or memory that may be accessed like it) that stays valid as long as `self`.
///
/// # Examples
///
/// Ordinary memory stands in for a device here: the accessors work on it too.
///
/// ```
/// use kernel::io::{Io, IoRaw};
///
/// let mut buf = KBox::new([0u32; 4], GFP_KERNEL)?;
/// let raw = IoRaw::<16>::new(buf.as_mut_ptr() as usize, 16)?;
/// // SAFETY: `buf` is 16 bytes of memory that outlives `io`.
/// let io = unsafe { Io::from_raw(&raw) };
/// io.writel(0x1234_5678, 4);
/// assert_eq!(io.readl(4), 0x1234_5678);
/// assert_eq!(io.readw(4), 0x5678); // little-endian bus order
/// assert_eq!(io.try_readl(16), Err(EINVAL)); // past the end
/// assert_eq!(io.try_readl(2), Err(EINVAL)); // unaligned
/// // A region whose length is no multiple of the access: the whole access must fit.
/// let raw6 = IoRaw::<0>::new(buf.as_mut_ptr() as usize, 6)?;
/// // SAFETY: `buf` is 16 bytes, more than the region's 6, and outlives `io6`.
/// let io6 = unsafe { Io::from_raw(&raw6) };
/// assert_eq!(io6.try_readw(4), Ok(0x5678));
/// assert_eq!(io6.try_readl(4), Err(EINVAL)); // would end at 8
/// # drop(buf);
/// # Ok::<(), Error>(())
/// ```
///
/// A constant offset past `SIZE` does not build:
///
/// ```ignore
/// io.readl(16); // error: `build_error` / undefined symbol `rust_build_error`
/// ```
#[repr(transparent)]
pub struct Io<const SIZE: usize = 0>(IoRaw<SIZE>);

macro_rules! io_accessors {
    ($(#[$attr:meta])* $read:ident, $try_read:ident, $write:ident, $try_write:ident,
     $c_read:ident, $c_write:ident, $ty:ty) => {
        /// Reads at `offset`, checked when building; see [`Io`].
        ///
        /// # Examples
        ///
        /// ```
        /// # use kernel::io::{Io, IoRaw};
        /// let mut buf = KBox::new([0u64; 2], GFP_KERNEL)?;
        /// let raw = IoRaw::<16>::new(buf.as_mut_ptr() as usize, 16)?;
        /// // SAFETY: `buf` is 16 bytes of memory that outlives `io`.
        /// let io = unsafe { Io::from_raw(&raw) };
        #[doc = concat!("assert_eq!(io.", stringify!($read), "(8), 0);")]
        /// # drop(buf);
        /// # Ok::<(), Error>(())
        /// ```
        $(#[$attr])*
        // Always inlined, so that a constant `offset` reaches the build-time check as one.
        #[inline(always)]
        pub fn $read(&self, offset: usize) -> $ty {
            let addr = self.io_addr_assert::<$ty>(offset);
            // SAFETY: `addr` is inside the mapping (checked at build time), which is valid by the
            // type invariants.
            unsafe { bindings::$c_read(addr as *const crate::ffi::c_void) }
        }

        /// Reads at `offset`, checked at run time; `EINVAL` if out of bounds or unaligned.
        ///
        /// # Examples
        ///
        /// ```
        /// # use kernel::io::{Io, IoRaw};
        /// let mut buf = KBox::new([0u64; 2], GFP_KERNEL)?;
        /// let raw = IoRaw::<0>::new(buf.as_mut_ptr() as usize, 16)?;
        /// // SAFETY: `buf` is 16 bytes of memory that outlives `io`.
        /// let io = unsafe { Io::from_raw(&raw) };
        #[doc = concat!("assert_eq!(io.", stringify!($try_read), "(8), Ok(0));")]
        #[doc = concat!("assert_eq!(io.", stringify!($try_read), "(16), Err(EINVAL));")]
        /// // The last aligned offsets of the address space: `offset + size` would overflow.
        #[doc = concat!("let last = usize::MAX - (core::mem::size_of::<", stringify!($ty), ">() - 1);")]
        #[doc = concat!("assert_eq!(io.", stringify!($try_read), "(last), Err(EINVAL));")]
        #[doc = concat!("assert_eq!(io.", stringify!($try_read), "(usize::MAX), Err(EINVAL));")]
        /// # drop(buf);
        /// # Ok::<(), Error>(())
        /// ```
        $(#[$attr])*
        #[inline]
        pub fn $try_read(&self, offset: usize) -> Result<$ty> {
            let addr = self.io_addr::<$ty>(offset)?;
            // SAFETY: `addr` is inside the mapping (checked above), which is valid by the type
            // invariants.
            Ok(unsafe { bindings::$c_read(addr as *const crate::ffi::c_void) })
        }

        /// Writes `value` at `offset`, checked when building; see [`Io`].
        ///
        /// # Examples
        ///
        /// ```
        /// # use kernel::io::{Io, IoRaw};
        /// let mut buf = KBox::new([0u64; 2], GFP_KERNEL)?;
        /// let raw = IoRaw::<16>::new(buf.as_mut_ptr() as usize, 16)?;
        /// // SAFETY: `buf` is 16 bytes of memory that outlives `io`.
        /// let io = unsafe { Io::from_raw(&raw) };
        #[doc = concat!("io.", stringify!($write), "(1, 8);")]
        #[doc = concat!("assert_eq!(io.", stringify!($try_read), "(8), Ok(1));")]
        /// # drop(buf);
        /// # Ok::<(), Error>(())
        /// ```
        $(#[$attr])*
        // Always inlined, so that a constant `offset` reaches the build-time check as one.
        #[inline(always)]
        pub fn $write(&self, value: $ty, offset: usize) {
            let addr = self.io_addr_assert::<$ty>(offset);
            // SAFETY: `addr` is inside the mapping (checked at build time), which is valid by the
            // type invariants.
            unsafe { bindings::$c_write(value, addr as *mut crate::ffi::c_void) }
        }

        /// Writes `value` at `offset`, checked at run time; `EINVAL` if out of bounds or
        /// unaligned.
        ///
        /// # Examples
        ///
        /// ```
        /// # use kernel::io::{Io, IoRaw};
        /// let mut buf = KBox::new([0u64; 2], GFP_KERNEL)?;
        /// let raw = IoRaw::<0>::new(buf.as_mut_ptr() as usize, 16)?;
        /// // SAFETY: `buf` is 16 bytes of memory that outlives `io`.
        /// let io = unsafe { Io::from_raw(&raw) };
        #[doc = concat!("assert_eq!(io.", stringify!($try_write), "(1, 8), Ok(()));")]
        #[doc = concat!("assert_eq!(io.", stringify!($try_read), "(8), Ok(1));")]
        #[doc = concat!("assert_eq!(io.", stringify!($try_write), "(1, 1 << 20), Err(EINVAL));")]
        #[doc = concat!("let last = usize::MAX - (core::mem::size_of::<", stringify!($ty), ">() - 1);")]
        #[doc = concat!("assert_eq!(io.", stringify!($try_write), "(1, last), Err(EINVAL));")]
        /// # drop(buf);
        /// # Ok::<(), Error>(())
        /// ```
        $(#[$attr])*
        #[inline]
        pub fn $try_write(&self, value: $ty, offset: usize) -> Result {
            let addr = self.io_addr::<$ty>(offset)?;
            // SAFETY: `addr` is inside the mapping (checked above), which is valid by the type
            // invariants.
            unsafe { bindings::$c_write(value, addr as *mut crate::ffi::c_void) };
            Ok(())
        }
    };
}

impl<const SIZE: usize> Io<SIZE> {
    /// Views a raw region as [`Io`].
    ///
    /// # Safety
    ///
    /// `raw.addr()` must be the start of a mapping of at least `raw.maxsize()` bytes of I/O
    /// memory, or of memory that may be accessed with `readl()` and friends, valid for as long as
    /// the returned reference.
    ///
    /// # Examples
    ///
    /// ```
    /// use kernel::io::{Io, IoRaw};
    ///
    /// let mut buf = KBox::new(0u8, GFP_KERNEL)?;
    /// let raw = IoRaw::<1>::new(&mut *buf as *mut u8 as usize, 1)?;
    /// // SAFETY: `buf` is one byte that outlives `io`.
    /// let io: &Io<1> = unsafe { Io::from_raw(&raw) };
    /// io.writeb(9, 0);
    /// assert_eq!(*buf, 9);
    /// # Ok::<(), Error>(())
    /// ```
    pub unsafe fn from_raw(raw: &IoRaw<SIZE>) -> &Self {
        // SAFETY: `Io` is a transparent wrapper of `IoRaw`; the invariant is the caller's promise.
        unsafe { &*core::ptr::from_ref(raw).cast::<Self>() }
    }

    /// Returns the start address of the region.
    ///
    /// # Examples
    ///
    /// ```
    /// # use kernel::io::{Io, IoRaw};
    /// let mut buf = KBox::new(0u32, GFP_KERNEL)?;
    /// let raw = IoRaw::<4>::new(&mut *buf as *mut u32 as usize, 4)?;
    /// // SAFETY: `buf` is four bytes that outlive `io`.
    /// let io = unsafe { Io::from_raw(&raw) };
    /// assert_eq!(io.addr(), &*buf as *const u32 as usize);
    /// # Ok::<(), Error>(())
    /// ```
    pub fn addr(&self) -> usize {
        self.0.addr()
    }

    /// Returns the length of the region in bytes, as known at run time (at least `SIZE`).
    ///
    /// # Examples
    ///
    /// ```
    /// # use kernel::io::{Io, IoRaw};
    /// let mut buf = KBox::new([0u8; 8], GFP_KERNEL)?;
    /// let raw = IoRaw::<4>::new(buf.as_mut_ptr() as usize, 8)?;
    /// // SAFETY: `buf` is eight bytes that outlive `io`.
    /// let io = unsafe { Io::from_raw(&raw) };
    /// assert_eq!(io.maxsize(), 8);
    /// # Ok::<(), Error>(())
    /// ```
    pub fn maxsize(&self) -> usize {
        self.0.maxsize()
    }

    #[inline]
    const fn offset_valid<U>(offset: usize, size: usize) -> bool {
        let width = core::mem::size_of::<U>();
        match offset.checked_add(width) {
            Some(end) => end <= size && offset % width == 0,
            None => false,
        }
    }

    #[inline]
    fn io_addr<U>(&self, offset: usize) -> Result<usize> {
        if !Self::offset_valid::<U>(offset, self.maxsize()) {
            return Err(EINVAL);
        }
        // No overflow: by the invariants of `IoRaw`, `addr + maxsize` does not overflow.
        Ok(self.addr() + offset)
    }

    #[inline(always)]
    fn io_addr_assert<U>(&self, offset: usize) -> usize {
        build_assert!(
            Self::offset_valid::<U>(offset, SIZE),
            "I/O offset out of bounds or unaligned for Io<SIZE>"
        );
        // No overflow: `offset < SIZE <= maxsize` and `addr + maxsize` does not overflow.
        self.addr() + offset
    }

    io_accessors!(readb, try_readb, writeb, try_writeb, readb, writeb, u8);
    io_accessors!(readw, try_readw, writew, try_writew, readw, writew, u16);
    io_accessors!(readl, try_readl, writel, try_writel, readl, writel, u32);
    io_accessors!(
        #[cfg(CONFIG_64BIT)]
        readq,
        try_readq,
        writeq,
        try_writeq,
        readq,
        writeq,
        u64
    );
    io_accessors!(
        readb_relaxed,
        try_readb_relaxed,
        writeb_relaxed,
        try_writeb_relaxed,
        readb_relaxed,
        writeb_relaxed,
        u8
    );
    io_accessors!(
        readw_relaxed,
        try_readw_relaxed,
        writew_relaxed,
        try_writew_relaxed,
        readw_relaxed,
        writew_relaxed,
        u16
    );
    io_accessors!(
        readl_relaxed,
        try_readl_relaxed,
        writel_relaxed,
        try_writel_relaxed,
        readl_relaxed,
        writel_relaxed,
        u32
    );
    io_accessors!(
        #[cfg(CONFIG_64BIT)]
        readq_relaxed,
        try_readq_relaxed,
        writeq_relaxed,
        try_writeq_relaxed,
        readq_relaxed,
        writeq_relaxed,
        u64
    );
}
