// SPDX-License-Identifier: GPL-2.0

//! Direct memory access (DMA): memory a device reads and writes by itself.
//!
//! A driver first says which bus addresses its device can reach ([`DmaMask`],
//! [`Device::dma_set_mask_and_coherent`]), then gets memory the device may use:
//!
//! - a [`CoherentAllocation`], which the CPU and the device see alike at any time (descriptor
//!   rings, status blocks), or
//! - a streaming [`Mapping`] of a buffer the driver allocated, used in one [`Direction`] and
//!   handed back and forth with [`Mapping::sync_for_cpu`] and [`Mapping::sync_for_device`]
//!   (data buffers).
//!
//! Both come inside a [`Devres`]: they belong to the binding they were made in. The CPU reaches
//! them through [`Devres::access`] (with the bound device at hand: in probe, remove or an
//! interrupt handler) or [`Devres::try_access`], by value and with volatile accesses, never as
//! a `&[T]` or `&mut [T]`: the device may write the memory at any time, which a Rust reference
//! would have to promise does not happen.
//!
//! # When the memory is given back
//!
//! At the latest when the binding ends, and then only after the device can no longer reach it
//! and no CPU code still uses it. For a PCI device, unbinding goes:
//!
//! 1. the driver's `remove`, then its data is dropped (the driver tells its device to stop);
//! 2. the binding's interrupts are freed (`free_irq()` waits for a running handler), then no
//!    [`Devres`] of the binding gives access any more, after one RCU grace period;
//! 3. the PCI adapter turns bus mastering off ([`pci::Device::clear_master`]), so the device can
//!    no longer reach memory whatever the driver did or forgot in 1;
//! 4. the driver core runs the binding's devres releases, latest first: the allocations and
//!    mappings are freed and unmapped here, then the device is disabled (if the driver enabled
//!    it with [`pci::Device::enable_device_mem`]).
//!
//! So an interrupt handler, which reaches the memory through the `Devres` with the
//! [`Device<Bound>`] it is handed, cannot run against freed memory: it runs only before 2, and
//! the memory is freed in 4. A failed probe takes 2 to 4 as well.
//!
//! A driver may also drop its `Devres` earlier (or end a mapping with [`Mapping::unmap`], which
//! gives its buffer back): the CPU can then no longer reach the memory through it (that needs
//! the `Devres` itself, so no access is in flight), and the memory is freed or unmapped at once. Whether the *device* still uses it is beyond what the CPU side can check:
//! the driver must first have told its device to stop using that memory (or turned bus
//! mastering off). A device writing to memory that was given back is a device-side fault,
//! which pci-rig's DMA oracle judges from outside the guest.
//!
//! Do not drop them with interrupts disabled (in a hard-IRQ handler, under an IRQ-disabling
//! spinlock): `dma_free_attrs()` warns when called so.
//!
//! C header: [`include/linux/dma-mapping.h`](srctree/include/linux/dma-mapping.h)
//!
//! # Examples
//!
//! A driver for QEMU's `edu` device (1234:11e8; this test expects one), which copies between
//! memory and its own 4 KiB buffer (at 0x40000 in its address space) when told to: source at
//! 0x80, destination at 0x88, length at 0x90, command at 0x98 (bit 0 runs, bit 1 set copies from
//! its buffer to memory; bit 0 clears when done, about 100 ms later). `edu` masks the addresses
//! it uses to 28 bits by default; guest memory of arm64 and riscv64 lies above that, so the
//! kunit scenario starts it with a 32-bit mask, and probe says so too.
//!
//! Probe sends a pattern from a streaming mapping to the device, fetches it back into a coherent
//! allocation and into a second streaming mapping (then unmapped early, its buffer taken back),
//! and compares; it records what it saw, and the
//! test thread asserts. A value tied to the binding after the allocation is released right
//! before it, and records whether bus mastering was off by then.
//!
//! ```
//! use core::sync::atomic::{AtomicPtr, AtomicU32, Ordering};
//! use kernel::{
//!     bindings, c_str,
//!     devres::Devres,
//!     dma::{CoherentAllocation, Direction, DmaMask, Mapping},
//!     driver::Registration,
//!     io::Io,
//!     pci,
//!     sync::Arc,
//!     types::ForeignOwnable,
//! };
//!
//! const SRC: usize = 0x80;
//! const DST: usize = 0x88;
//! const LEN: usize = 0x90;
//! const CMD: usize = 0x98;
//! const RUN: u64 = 1;
//! const TO_MEMORY: u64 = 2;
//! const EDU_BUFFER: u64 = 0x40000;
//! const SIZE: usize = 4096;
//!
//! // Bit `n` set: check `n` of probe failed.
//! static FAILED: AtomicU32 = AtomicU32::new(0);
//! // 1: bus mastering was on when the witness was released, 2: it was off.
//! static MASTER_AT_RELEASE: AtomicU32 = AtomicU32::new(0);
//! static STASH: AtomicPtr<core::ffi::c_void> = AtomicPtr::new(core::ptr::null_mut());
//! static KEPT_MAPPING: AtomicPtr<core::ffi::c_void> = AtomicPtr::new(core::ptr::null_mut());
//!
//! fn check(n: u32, ok: bool) {
//!     if !ok {
//!         FAILED.fetch_or(1 << n, Ordering::SeqCst);
//!     }
//! }
//!
//! fn pattern(i: usize) -> u8 {
//!     (i % 251) as u8
//! }
//!
//! /// Runs one copy of `edu`'s and waits for it (up to two seconds).
//! fn copy(io: &Io<0x100>, src: u64, dst: u64, cmd: u64) -> Result {
//!     io.writeq(src, SRC);
//!     io.writeq(dst, DST);
//!     io.writeq(SIZE as u64, LEN);
//!     io.writeq(cmd | RUN, CMD);
//!     for _ in 0..2000 {
//!         if io.readq(CMD) & RUN == 0 {
//!             return Ok(());
//!         }
//!         // SAFETY: Probe runs in process context, where `msleep` may sleep.
//!         unsafe { bindings::msleep(1) };
//!     }
//!     Err(EIO)
//! }
//!
//! /// Released at unbind right before the allocation made before it: records bus mastering.
//! struct Witness;
//! impl Drop for Witness {
//!     fn drop(&mut self) {
//!         // SAFETY: Looks up edu and takes a reference to it, put back below.
//!         let edu = unsafe { bindings::pci_get_device(0x1234, 0x11e8, core::ptr::null_mut()) };
//!         if edu.is_null() {
//!             return;
//!         }
//!         let mut cmd = 0u16;
//!         // SAFETY: `edu` is a valid device we hold a reference to; `cmd` outlives the call.
//!         unsafe { bindings::pci_read_config_word(edu, bindings::PCI_COMMAND as i32, &mut cmd) };
//!         // SAFETY: Puts back the reference taken above.
//!         unsafe { bindings::pci_dev_put(edu) };
//!         let on = u32::from(cmd) & bindings::PCI_COMMAND_MASTER != 0;
//!         MASTER_AT_RELEASE.store(if on { 1 } else { 2 }, Ordering::SeqCst);
//!     }
//! }
//!
//! struct Edu;
//! kernel::pci_device_table!(EDU_IDS, (), [(pci::DeviceId::from_id(0x1234, 0x11e8), ())]);
//! impl pci::Driver for Edu {
//!     type IdInfo = ();
//!     const ID_TABLE: pci::IdTable<()> = EDU_IDS;
//!     type Data = Arc<Devres<CoherentAllocation<u8>>>;
//!
//!     fn probe(pdev: &pci::Device<pci::Core>, _info: &()) -> Result<Self::Data> {
//!         pdev.enable_device_mem()?;
//!         pdev.set_master();
//!         pdev.dma_set_mask_and_coherent(DmaMask::new::<32>())?;
//!         let dev = pdev.as_ref();
//!         let bar = pdev.iomap_region_sized::<0x100>(0, c_str!("rust_doctest_dma"))?;
//!         let io = bar.access(dev)?;
//!
//!         // Memory to device, from a streaming mapping the CPU filled.
//!         let mut data = KVec::with_capacity(SIZE, GFP_KERNEL)?;
//!         for i in 0..SIZE {
//!             data.push(pattern(i), GFP_KERNEL)?;
//!         }
//!         let out = Mapping::new(dev, data, Direction::ToDevice, GFP_KERNEL)?;
//!         copy(io, out.access(dev)?.dma_handle(), EDU_BUFFER, 0)?;
//!
//!         // Device to memory: a coherent allocation, filled first so that a copy shows.
//!         let back = CoherentAllocation::<u8>::alloc(dev, SIZE, GFP_KERNEL)?;
//!         let coherent = back.access(dev)?;
//!         coherent.fill(0xff);
//!         copy(io, EDU_BUFFER, coherent.dma_handle(), TO_MEMORY)?;
//!         let mut seen = KVec::from_elem(0u8, SIZE, GFP_KERNEL)?;
//!         coherent.copy_to_slice(0, &mut seen)?;
//!         check(0, seen.iter().enumerate().all(|(i, b)| *b == pattern(i)));
//!         check(1, coherent.read(SIZE - 1)? == pattern(SIZE - 1));
//!         check(4, coherent.dma_handle() + SIZE as u64 <= 1 << 32);
//!         check(5, coherent.read(SIZE) == Err(EINVAL)
//!                  && coherent.copy_from_slice(SIZE - 1, &[0, 0]) == Err(EINVAL)
//!                  && coherent.copy_to_slice(usize::MAX, &mut [0]) == Err(EINVAL));
//!
//!         // Device to memory again, into a streaming mapping, read after syncing for the CPU.
//!         let rx = Mapping::new(dev, KVec::from_elem(0u8, SIZE, GFP_KERNEL)?,
//!                               Direction::FromDevice, GFP_KERNEL)?;
//!         let streaming = rx.access(dev)?;
//!         copy(io, EDU_BUFFER, streaming.dma_handle(), TO_MEMORY)?;
//!         let mut seen = KVec::from_elem(0u8, SIZE, GFP_KERNEL)?;
//!         streaming.copy_to_slice(0, &mut seen)?;
//!         check(2, seen.iter().enumerate().all(|(i, b)| *b == pattern(i)));
//!         // The CPU does not write into memory only the device writes.
//!         check(3, streaming.write(0, 1) == Err(EPERM) && streaming.fill(0) == Err(EPERM));
//!         check(6, streaming.read(SIZE) == Err(EINVAL) && streaming.len() == SIZE);
//!         // Ended early: the buffer comes back, with what the device wrote.
//!         let buf = Mapping::unmap(rx).ok_or(ENXIO)?;
//!         check(7, buf.iter().enumerate().all(|(i, b)| *b == pattern(i)));
//!
//!         // A mapping kept beyond the binding, for the test thread to try to end.
//!         let kept = KBox::new(Mapping::new(dev, KVec::from_elem(7u8, 64, GFP_KERNEL)?,
//!                                           Direction::ToDevice, GFP_KERNEL)?, GFP_KERNEL)?;
//!         KEPT_MAPPING.store(kept.into_foreign().cast_mut(), Ordering::SeqCst);
//!         Devres::new_foreign_owned(dev, Witness, GFP_KERNEL)?;
//!         let back = Arc::new(back, GFP_KERNEL)?;
//!         STASH.store(back.clone().into_foreign().cast_mut(), Ordering::SeqCst);
//!         Ok(back)
//!     }
//! }
//!
//! // SAFETY: Built-in code has no module of its own; null is what it uses.
//! static MODULE: ThisModule = unsafe { ThisModule::from_ptr(core::ptr::null_mut()) };
//!
//! let reg = KBox::pin_init(
//!     Registration::<pci::Adapter<Edu>>::new(c_str!("rust_doctest_dma"), &MODULE),
//!     GFP_KERNEL,
//! )?;
//! // SAFETY: The probe stored this reference with `into_foreign`; taken back only here.
//! let back = unsafe {
//!     Arc::<Devres<CoherentAllocation<u8>>>::from_foreign(
//!         STASH.swap(core::ptr::null_mut(), Ordering::SeqCst),
//!     )
//! };
//! assert_eq!(FAILED.load(Ordering::SeqCst), 0);
//! assert_eq!(back.try_access().map(|b| b.read(7)), Some(Ok(pattern(7))));
//! drop(reg); // unbinds
//! // Bus mastering was off before the allocation was freed, which the CPU can no longer reach.
//! assert_eq!(MASTER_AT_RELEASE.load(Ordering::SeqCst), 2);
//! assert!(back.try_access().is_none());
//! // SAFETY: The probe stored this box with `into_foreign`; taken back only here.
//! let kept = unsafe {
//!     KBox::<Devres<Mapping>>::from_foreign(KEPT_MAPPING.swap(core::ptr::null_mut(), Ordering::SeqCst))
//! };
//! // The binding ended first: the buffer went with it.
//! assert!(Mapping::unmap(KBox::into_inner(kept)).is_none());
//! # Ok::<(), Error>(())
//! ```

use crate::{
    alloc::{Flags, KVec},
    bindings,
    device::{Bound, Core, Device},
    devres::{dma_held, Devres, DmaHold},
    error::{
        code::{EBUSY, EINVAL, ENOMEM, EPERM},
        to_result, Result,
    },
    ffi::c_void,
    types::{ARef, AsBytes, FromBytes},
};
use core::{marker::PhantomData, ptr::NonNull};

#[cfg(doc)]
use crate::pci;

/// The bus addresses a device can reach: all that fit in its low `n` bits.
///
/// # Invariants
///
/// The value is `2^n - 1` for some `n` from 0 to 64.
///
/// # Examples
///
/// ```
/// use kernel::dma::DmaMask;
///
/// assert_eq!(DmaMask::new::<28>().value(), 0x0fff_ffff);
/// assert_eq!(DmaMask::new::<64>().value(), u64::MAX);
/// assert_eq!(DmaMask::try_new(32)?.value(), 0xffff_ffff);
/// assert_eq!(DmaMask::try_new(65).err(), Some(EINVAL));
/// # Ok::<(), Error>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DmaMask(u64);

impl DmaMask {
    const fn bits(n: u32) -> u64 {
        if n >= 64 {
            u64::MAX
        } else {
            (1u64 << n) - 1
        }
    }

    /// The mask of the low `N` bits; `N` above 64 fails the build.
    ///
    /// # Examples
    ///
    /// ```
    /// const EDU: kernel::dma::DmaMask = kernel::dma::DmaMask::new::<28>();
    /// assert_eq!(EDU.value(), (1 << 28) - 1);
    /// ```
    #[inline]
    pub const fn new<const N: u32>() -> Self {
        const { assert!(N <= 64, "a DMA mask has at most 64 bits") };
        // INVARIANT: `N <= 64`, checked at build time.
        Self(Self::bits(N))
    }

    /// The mask of the low `bits` bits; `EINVAL` above 64.
    ///
    /// # Examples
    ///
    /// ```
    /// use kernel::dma::DmaMask;
    /// assert_eq!(DmaMask::try_new(0)?.value(), 0);
    /// assert!(DmaMask::try_new(100).is_err());
    /// # Ok::<(), Error>(())
    /// ```
    #[inline]
    pub const fn try_new(bits: u32) -> Result<Self> {
        if bits > 64 {
            return Err(EINVAL);
        }
        // INVARIANT: `bits <= 64`, checked just above.
        Ok(Self(Self::bits(bits)))
    }

    /// The mask as C takes it.
    ///
    /// # Examples
    ///
    /// ```
    /// assert_eq!(kernel::dma::DmaMask::new::<1>().value(), 1);
    /// ```
    #[inline]
    pub const fn value(&self) -> u64 {
        self.0
    }
}

impl Device<Core> {
    /// Sets the mask of the addresses the device can reach with streaming mappings; `EIO` if
    /// the platform cannot map within it, `EBUSY` while the binding holds DMA memory (a
    /// [`CoherentAllocation`] or a [`Mapping`] not yet given back): a new mask does not move what
    /// is already mapped, so a narrower one would leave live addresses the device cannot reach.
    /// Set it first, then allocate.
    ///
    /// Only in probe or remove (`Core`): the mask is a plain field that mapping functions read
    /// without a lock. Under the device lock no other binding of the device allocates; the
    /// binding's own interrupt handlers or workers that map at the same time see the old mask
    /// or the new one (a single 64-bit store), never a mix.
    ///
    /// # Examples
    ///
    /// ```
    /// use kernel::{device::{Core, Device}, dma::DmaMask};
    /// fn narrow(dev: &Device<Core>) -> Result {
    ///     dev.dma_set_mask(DmaMask::new::<32>())
    /// }
    /// ```
    pub fn dma_set_mask(&self, mask: DmaMask) -> Result {
        if dma_held(self) {
            return Err(EBUSY);
        }
        // SAFETY: `self` is a valid device, in probe or remove (see above).
        to_result(unsafe { bindings::dma_set_mask(self.as_raw(), mask.value()) })
    }

    /// Sets the mask of streaming mappings and of coherent allocations alike; see
    /// [`Device::dma_set_mask`] (`EBUSY` while the binding holds DMA memory).
    ///
    /// # Examples
    ///
    /// ```
    /// use kernel::{device::{Core, Device}, dma::DmaMask};
    /// fn edu(dev: &Device<Core>) -> Result {
    ///     dev.dma_set_mask_and_coherent(DmaMask::new::<28>())
    /// }
    /// ```
    pub fn dma_set_mask_and_coherent(&self, mask: DmaMask) -> Result {
        if dma_held(self) {
            return Err(EBUSY);
        }
        // SAFETY: `self` is a valid device, in probe or remove (see `dma_set_mask`).
        to_result(unsafe { bindings::dma_set_mask_and_coherent(self.as_raw(), mask.value()) })
    }
}

/// Plain data the CPU and a device can share: every bit pattern is a valid value (the device
/// may write anything) and values have no padding (all of it reaches the device). The integer
/// types and arrays of them.
///
/// # Examples
///
/// ```
/// fn plain<T: kernel::dma::Plain>() {}
/// plain::<u32>();
/// plain::<[u8; 16]>();
/// ```
pub trait Plain: AsBytes + FromBytes + Copy + Send + Sync + 'static {}

impl<T: AsBytes + FromBytes + Copy + Send + Sync + 'static> Plain for T {}

/// Checks that `count` elements from `offset` lie within `len`.
fn check_range(offset: usize, count: usize, len: usize) -> Result {
    match offset.checked_add(count) {
        Some(end) if end <= len => Ok(()),
        _ => Err(EINVAL),
    }
}

/// `count` elements of type `T` that the CPU and the device see alike at any time
/// (`dma_alloc_coherent()`), zeroed when allocated.
///
/// Made by [`CoherentAllocation::alloc`] inside a [`Devres`], so it is freed at the latest when
/// the binding ends, after the device's interrupts were freed and its bus mastering turned off
/// (see the [module documentation](self)). Every CPU access is a volatile access of whole
/// elements: one the device writes at the same time is read whole or not at all if it is no
/// wider than the machine word (`u8` to `u64` on 64-bit), and may tear if it is wider (an
/// array). Order accesses with the device by its registers, as with any memory it shares
/// (MMIO writes are ordered after earlier memory writes, MMIO reads before later memory reads).
///
/// # Invariants
///
/// `cpu_addr` is the kernel address, aligned for `T`, and `dma_handle` the bus address of
/// `count * size_of::<T>()` (non-zero) bytes that `dma_alloc_attrs` allocated for `dev`; they
/// stay allocated until `drop`.
///
/// # Examples
///
/// ```
/// use kernel::{device::{Bound, Device}, devres::Devres, dma::CoherentAllocation};
///
/// /// A ring of 64 descriptors of four words each.
/// fn ring(dev: &Device<Bound>) -> Result<Devres<CoherentAllocation<[u32; 4]>>> {
///     let ring = CoherentAllocation::alloc(dev, 64, GFP_KERNEL)?;
///     ring.access(dev)?.write(0, [1, 2, 3, 4])?;
///     Ok(ring)
/// }
/// ```
pub struct CoherentAllocation<T: Plain> {
    dev: ARef<Device>,
    cpu_addr: NonNull<T>,
    dma_handle: bindings::dma_addr_t,
    count: usize,
    _t: PhantomData<T>,
    // Last: let go once the memory is freed.
    _held: DmaHold,
}

// SAFETY: The memory is owned by the allocation and freed with `dev`, from any thread; `T` is
// `Send`.
unsafe impl<T: Plain> Send for CoherentAllocation<T> {}

// SAFETY: Every access through `&self` is a volatile access of a whole `T`, which any bit
// pattern makes valid: concurrent ones (from CPUs or the device) cannot make an invalid value.
unsafe impl<T: Plain> Sync for CoherentAllocation<T> {}

impl<T: Plain> CoherentAllocation<T> {
    /// Allocates `count` zeroed elements for `dev`, tied to its current binding.
    ///
    /// `EINVAL` for zero elements (or a zero-sized `T`), `ENOMEM` if the size overflows or no
    /// memory the device can reach is free.
    ///
    /// # Examples
    ///
    /// ```
    /// use kernel::{device::{Bound, Device}, devres::Devres, dma::CoherentAllocation};
    /// fn status(dev: &Device<Bound>) -> Result<Devres<CoherentAllocation<u32>>> {
    ///     CoherentAllocation::<u32>::alloc(dev, 16, GFP_KERNEL)
    /// }
    /// ```
    pub fn alloc(dev: &Device<Bound>, count: usize, gfp: Flags) -> Result<Devres<Self>> {
        let size = count.checked_mul(core::mem::size_of::<T>()).ok_or(ENOMEM)?;
        if size == 0 {
            return Err(EINVAL);
        }
        // Counted before the memory exists, so a mask never changes under it.
        let held = DmaHold::new(dev)?;
        let mut dma_handle: bindings::dma_addr_t = 0;
        // SAFETY: `dev` is a valid device, bound; `dma_handle` outlives the call. The memory
        // is freed in `drop` (or just below), with the same size and handle.
        let cpu_addr = unsafe {
            bindings::dma_alloc_attrs(
                dev.as_raw(),
                size,
                &mut dma_handle,
                (gfp | crate::alloc::flags::__GFP_ZERO).as_raw(),
                0,
            )
        };
        let Some(cpu_addr) = NonNull::new(cpu_addr.cast::<T>()) else {
            return Err(ENOMEM);
        };
        if cpu_addr.as_ptr().align_offset(core::mem::align_of::<T>()) != 0 {
            // Cannot happen (allocations are page aligned); refused rather than assumed.
            // SAFETY: Allocated just above with this size and handle, not used since.
            unsafe {
                bindings::dma_free_attrs(
                    dev.as_raw(),
                    size,
                    cpu_addr.as_ptr().cast(),
                    dma_handle,
                    0,
                )
            };
            return Err(EINVAL);
        }
        // INVARIANT: Allocated above for `dev`: `size` bytes, aligned for `T`.
        let alloc = Self {
            dev: ARef::from(&**dev),
            cpu_addr,
            dma_handle,
            count,
            _t: PhantomData,
            _held: held,
        };
        Devres::new(dev, alloc, gfp)
    }

    /// The bus address of the first element: what to give the device.
    ///
    /// # Examples
    ///
    /// ```
    /// fn base(ring: &kernel::dma::CoherentAllocation<u32>) -> (u32, u32) {
    ///     let addr = ring.dma_handle();
    ///     (addr as u32, (addr >> 32) as u32)
    /// }
    /// ```
    #[inline]
    pub fn dma_handle(&self) -> u64 {
        // `dma_addr_t` is `u64`, or `u32` on some 32-bit configurations.
        #[allow(clippy::useless_conversion)]
        u64::from(self.dma_handle)
    }

    /// The number of elements.
    ///
    /// # Examples
    ///
    /// ```
    /// fn last(ring: &kernel::dma::CoherentAllocation<u32>) -> usize {
    ///     ring.count() - 1
    /// }
    /// ```
    #[inline]
    pub fn count(&self) -> usize {
        self.count
    }

    /// The size in bytes.
    ///
    /// # Examples
    ///
    /// ```
    /// fn bytes(ring: &kernel::dma::CoherentAllocation<[u32; 4]>) -> usize {
    ///     ring.size() // 16 per element
    /// }
    /// ```
    #[inline]
    pub fn size(&self) -> usize {
        // Cannot overflow: checked when allocated.
        self.count * core::mem::size_of::<T>()
    }

    /// A pointer to element `i`, which must be below `count`.
    #[inline]
    fn element(&self, i: usize) -> *mut T {
        // SAFETY: `i < count`, so the result is within the allocation (type invariant).
        unsafe { self.cpu_addr.as_ptr().add(i) }
    }

    /// Reads element `i`; `EINVAL` past the end.
    ///
    /// # Examples
    ///
    /// ```
    /// fn status(words: &kernel::dma::CoherentAllocation<u32>) -> Result<u32> {
    ///     words.read(0)
    /// }
    /// ```
    #[inline]
    pub fn read(&self, i: usize) -> Result<T> {
        check_range(i, 1, self.count)?;
        // SAFETY: Within the allocation, aligned (type invariant), initialised (zeroed when
        // allocated, then only written whole `T`s, by the CPU or the device: any bit pattern
        // is a valid `T`).
        Ok(unsafe { self.element(i).read_volatile() })
    }

    /// Writes `value` to element `i`; `EINVAL` past the end.
    ///
    /// # Examples
    ///
    /// ```
    /// fn clear(words: &kernel::dma::CoherentAllocation<u32>) -> Result {
    ///     words.write(0, 0)
    /// }
    /// ```
    #[inline]
    pub fn write(&self, i: usize, value: T) -> Result {
        check_range(i, 1, self.count)?;
        // SAFETY: Within the allocation and aligned (type invariant); no reference to the
        // memory exists, only volatile accesses like this one.
        unsafe { self.element(i).write_volatile(value) };
        Ok(())
    }

    /// Reads `dst.len()` elements from `offset` into `dst`; `EINVAL` past the end.
    ///
    /// # Examples
    ///
    /// ```
    /// fn header(buf: &kernel::dma::CoherentAllocation<u8>) -> Result<[u8; 4]> {
    ///     let mut h = [0; 4];
    ///     buf.copy_to_slice(0, &mut h)?;
    ///     Ok(h)
    /// }
    /// ```
    pub fn copy_to_slice(&self, offset: usize, dst: &mut [T]) -> Result {
        check_range(offset, dst.len(), self.count)?;
        for (i, d) in dst.iter_mut().enumerate() {
            // SAFETY: As in `read`: `offset + i < count`.
            *d = unsafe { self.element(offset + i).read_volatile() };
        }
        Ok(())
    }

    /// Writes `src` to the elements from `offset`; `EINVAL` past the end.
    ///
    /// # Examples
    ///
    /// ```
    /// fn header(buf: &kernel::dma::CoherentAllocation<u8>) -> Result {
    ///     buf.copy_from_slice(0, b"edu!")
    /// }
    /// ```
    pub fn copy_from_slice(&self, offset: usize, src: &[T]) -> Result {
        check_range(offset, src.len(), self.count)?;
        for (i, s) in src.iter().enumerate() {
            // SAFETY: As in `write`: `offset + i < count`.
            unsafe { self.element(offset + i).write_volatile(*s) };
        }
        Ok(())
    }

    /// Writes `value` to every element.
    ///
    /// # Examples
    ///
    /// ```
    /// fn poison(buf: &kernel::dma::CoherentAllocation<u8>) {
    ///     buf.fill(0xa5);
    /// }
    /// ```
    pub fn fill(&self, value: T) {
        for i in 0..self.count {
            // SAFETY: As in `write`: `i < count`.
            unsafe { self.element(i).write_volatile(value) };
        }
    }
}

impl<T: Plain> Drop for CoherentAllocation<T> {
    fn drop(&mut self) {
        // SAFETY: By the type invariant the memory was allocated for `dev` with this size and
        // handle and not freed yet; no reference into it exists (only volatile accesses
        // through `&self`, which have ended since we are dropped).
        unsafe {
            bindings::dma_free_attrs(
                self.dev.as_raw(),
                self.size(),
                self.cpu_addr.as_ptr().cast::<c_void>(),
                self.dma_handle,
                0,
            )
        };
    }
}

/// Which way the data of a streaming [`Mapping`] goes.
///
/// # Examples
///
/// ```
/// use kernel::dma::Direction;
/// let rx = Direction::FromDevice;
/// assert!(rx != Direction::ToDevice && rx != Direction::Bidirectional);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Direction {
    /// The CPU writes, the device reads (a packet to send).
    ToDevice,
    /// The device writes, the CPU reads (a packet received); the CPU cannot write.
    FromDevice,
    /// Both read and write.
    Bidirectional,
}

impl Direction {
    fn raw(self) -> bindings::dma_data_direction {
        match self {
            Self::ToDevice => bindings::dma_data_direction_DMA_TO_DEVICE,
            Self::FromDevice => bindings::dma_data_direction_DMA_FROM_DEVICE,
            Self::Bidirectional => bindings::dma_data_direction_DMA_BIDIRECTIONAL,
        }
    }
}

/// A byte buffer of the driver's, mapped for its device in one [`Direction`]
/// (`dma_map_single()`): a streaming mapping.
///
/// The device's view and the CPU's may differ (caches, a bounce buffer) until synced: the
/// accessors sync the range they touch (for the CPU before reading, for the device after
/// writing); a driver that lets the device use the buffer in between syncs it as the DMA API
/// says ([`Mapping::sync_for_device`] before the device uses it, [`Mapping::sync_for_cpu`]
/// after). The CPU does not write into a [`Direction::FromDevice`] mapping (`EPERM`): the
/// device would not see it, and a sync for the CPU may overwrite it.
///
/// Made by [`Mapping::new`] inside a [`Devres`], so it is unmapped at the latest when the
/// binding ends, after the device's interrupts were freed and its bus mastering turned off
/// (see the [module documentation](self)); the buffer is freed with it. [`Mapping::unmap`]
/// ends it earlier and gives the buffer back. Accesses are volatile,
/// as for a [`CoherentAllocation`].
///
/// # Invariants
///
/// `cpu_addr` is the start of `buf`'s `len` (non-zero) initialised bytes, mapped for `dev` in
/// `dir` by `dma_map_single_attrs` at `dma_handle`, until `drop` or `into_buffer`; `buf` is not
/// touched through a reference meanwhile.
///
/// # Examples
///
/// ```
/// use kernel::{device::{Bound, Device}, devres::Devres, dma::{Direction, Mapping}};
///
/// fn send(dev: &Device<Bound>, packet: &[u8]) -> Result<Devres<Mapping>> {
///     let mut buf = KVec::with_capacity(packet.len(), GFP_KERNEL)?;
///     buf.extend_from_slice(packet, GFP_KERNEL)?;
///     Mapping::new(dev, buf, Direction::ToDevice, GFP_KERNEL)
/// }
/// ```
pub struct Mapping {
    dev: ARef<Device>,
    // Owns the memory; only reached through `cpu_addr` while mapped.
    buf: KVec<u8>,
    cpu_addr: NonNull<u8>,
    len: usize,
    dma_handle: bindings::dma_addr_t,
    dir: Direction,
    // Last: let go once the buffer is unmapped.
    held: DmaHold,
}

// SAFETY: The buffer is owned by the mapping and unmapped with `dev`, from any thread.
unsafe impl Send for Mapping {}

// SAFETY: Every access through `&self` is a volatile byte access or a sync, which the DMA API
// allows from any thread.
unsafe impl Sync for Mapping {}

// Nothing of a mapping relies on its place (`ARef`, which is not `Unpin` only because the
// device it points to is pinned, moves like a pointer): `Mapping::unmap` moves it out of its
// `Devres`.
impl Unpin for Mapping {}

impl Mapping {
    /// Maps `buf` (its `len()` bytes) for `dev` in direction `dir`, tied to the device's current
    /// binding.
    ///
    /// `EINVAL` for an empty buffer; `ENOMEM` if it cannot be mapped where the device can reach
    /// it (the buffer is then freed).
    ///
    /// # Examples
    ///
    /// ```
    /// use kernel::{device::{Bound, Device}, devres::Devres, dma::{Direction, Mapping}};
    /// fn rx(dev: &Device<Bound>) -> Result<Devres<Mapping>> {
    ///     Mapping::new(dev, KVec::from_elem(0, 1500, GFP_KERNEL)?, Direction::FromDevice, GFP_KERNEL)
    /// }
    /// ```
    pub fn new(
        dev: &Device<Bound>,
        mut buf: KVec<u8>,
        dir: Direction,
        gfp: Flags,
    ) -> Result<Devres<Self>> {
        let len = buf.len();
        if len == 0 {
            return Err(EINVAL);
        }
        // A non-empty `KVec` points to its `kmalloc` allocation, in the linear map.
        let cpu_addr = NonNull::new(buf.as_mut_ptr()).ok_or(EINVAL)?;
        // Counted before the mapping exists, so a mask never changes under it.
        let held = DmaHold::new(dev)?;
        // SAFETY: `dev` is a valid device, bound; `cpu_addr` is `len` bytes of `kmalloc`
        // memory, which we own and keep until the mapping is undone in `drop`.
        let dma_handle = unsafe {
            bindings::dma_map_single_attrs(
                dev.as_raw(),
                cpu_addr.as_ptr().cast(),
                len,
                dir.raw(),
                0,
            )
        };
        // SAFETY: `dev` is valid; `dma_handle` is what mapping returned.
        if unsafe { bindings::dma_mapping_error(dev.as_raw(), dma_handle) } != 0 {
            return Err(ENOMEM);
        }
        // INVARIANT: `buf`'s `len` bytes were mapped just above, and are moved (not touched)
        // into the mapping.
        let mapping = Self {
            dev: ARef::from(&**dev),
            buf,
            cpu_addr,
            len,
            dma_handle,
            dir,
            held,
        };
        Devres::new(dev, mapping, gfp)
    }

    /// The bus address of the first byte: what to give the device.
    ///
    /// # Examples
    ///
    /// ```
    /// fn addr(m: &kernel::dma::Mapping) -> u64 {
    ///     m.dma_handle()
    /// }
    /// ```
    #[inline]
    pub fn dma_handle(&self) -> u64 {
        // `dma_addr_t` is `u64`, or `u32` on some 32-bit configurations.
        #[allow(clippy::useless_conversion)]
        u64::from(self.dma_handle)
    }

    /// The length in bytes.
    ///
    /// # Examples
    ///
    /// ```
    /// fn words(m: &kernel::dma::Mapping) -> usize {
    ///     m.len() / 4
    /// }
    /// ```
    #[inline]
    pub fn len(&self) -> usize {
        self.len
    }

    /// Always `false`: a mapping is never empty.
    ///
    /// # Examples
    ///
    /// ```
    /// fn any(m: &kernel::dma::Mapping) -> bool {
    ///     !m.is_empty()
    /// }
    /// ```
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The direction it was mapped in.
    ///
    /// # Examples
    ///
    /// ```
    /// use kernel::dma::{Direction, Mapping};
    /// fn writable(m: &Mapping) -> bool {
    ///     m.direction() != Direction::FromDevice
    /// }
    /// ```
    #[inline]
    pub fn direction(&self) -> Direction {
        self.dir
    }

    fn sync_range_for_cpu(&self, offset: usize, len: usize) {
        // SAFETY: `dev` is valid; the range lies within the mapping (checked by the callers),
        // which is mapped in `dir` (type invariant).
        unsafe {
            bindings::dma_sync_single_for_cpu(
                self.dev.as_raw(),
                self.dma_handle + offset as bindings::dma_addr_t,
                len,
                self.dir.raw(),
            )
        }
    }

    fn sync_range_for_device(&self, offset: usize, len: usize) {
        // SAFETY: As in `sync_range_for_cpu`.
        unsafe {
            bindings::dma_sync_single_for_device(
                self.dev.as_raw(),
                self.dma_handle + offset as bindings::dma_addr_t,
                len,
                self.dir.raw(),
            )
        }
    }

    /// Makes what the device wrote visible to the CPU (after the device used the buffer).
    ///
    /// # Examples
    ///
    /// ```
    /// fn received(m: &kernel::dma::Mapping) {
    ///     m.sync_for_cpu();
    /// }
    /// ```
    pub fn sync_for_cpu(&self) {
        self.sync_range_for_cpu(0, self.len);
    }

    /// Makes what the CPU wrote visible to the device (before the device uses the buffer).
    ///
    /// # Examples
    ///
    /// ```
    /// fn before_rx(m: &kernel::dma::Mapping) {
    ///     m.sync_for_device();
    /// }
    /// ```
    pub fn sync_for_device(&self) {
        self.sync_range_for_device(0, self.len);
    }

    fn writable(&self) -> Result {
        if self.dir == Direction::FromDevice {
            return Err(EPERM);
        }
        Ok(())
    }

    /// Reads byte `i` (synced for the CPU first); `EINVAL` past the end.
    ///
    /// # Examples
    ///
    /// ```
    /// fn first(m: &kernel::dma::Mapping) -> Result<u8> {
    ///     m.read(0)
    /// }
    /// ```
    pub fn read(&self, i: usize) -> Result<u8> {
        let mut b = [0u8];
        self.copy_to_slice(i, &mut b)?;
        Ok(b[0])
    }

    /// Writes byte `i` (then synced for the device); `EINVAL` past the end, `EPERM` for a
    /// [`Direction::FromDevice`] mapping.
    ///
    /// # Examples
    ///
    /// ```
    /// fn mark(m: &kernel::dma::Mapping) -> Result {
    ///     m.write(0, 0x80)
    /// }
    /// ```
    pub fn write(&self, i: usize, value: u8) -> Result {
        self.copy_from_slice(i, &[value])
    }

    /// Reads `dst.len()` bytes from `offset` (synced for the CPU first); `EINVAL` past the
    /// end.
    ///
    /// # Examples
    ///
    /// ```
    /// fn header(m: &kernel::dma::Mapping) -> Result<[u8; 14]> {
    ///     let mut h = [0; 14];
    ///     m.copy_to_slice(0, &mut h)?;
    ///     Ok(h)
    /// }
    /// ```
    pub fn copy_to_slice(&self, offset: usize, dst: &mut [u8]) -> Result {
        check_range(offset, dst.len(), self.len)?;
        if dst.is_empty() {
            return Ok(());
        }
        self.sync_range_for_cpu(offset, dst.len());
        for (i, d) in dst.iter_mut().enumerate() {
            // SAFETY: `offset + i < len`: within the buffer (type invariant), initialised, and
            // not referenced: only volatile accesses like this one reach it.
            *d = unsafe { self.cpu_addr.as_ptr().add(offset + i).read_volatile() };
        }
        Ok(())
    }

    /// Writes `src` from `offset` (then synced for the device); `EINVAL` past the end, `EPERM`
    /// for a [`Direction::FromDevice`] mapping.
    ///
    /// # Examples
    ///
    /// ```
    /// fn header(m: &kernel::dma::Mapping) -> Result {
    ///     m.copy_from_slice(0, &[0xff; 6])
    /// }
    /// ```
    pub fn copy_from_slice(&self, offset: usize, src: &[u8]) -> Result {
        self.writable()?;
        check_range(offset, src.len(), self.len)?;
        if src.is_empty() {
            return Ok(());
        }
        for (i, s) in src.iter().enumerate() {
            // SAFETY: As in `copy_to_slice`.
            unsafe { self.cpu_addr.as_ptr().add(offset + i).write_volatile(*s) };
        }
        self.sync_range_for_device(offset, src.len());
        Ok(())
    }

    /// Writes `value` to every byte (then synced for the device); `EPERM` for a
    /// [`Direction::FromDevice`] mapping.
    ///
    /// # Examples
    ///
    /// ```
    /// fn pad(m: &kernel::dma::Mapping) -> Result {
    ///     m.fill(0)
    /// }
    /// ```
    pub fn fill(&self, value: u8) -> Result {
        self.writable()?;
        for i in 0..self.len {
            // SAFETY: As in `copy_to_slice`: `i < len`.
            unsafe { self.cpu_addr.as_ptr().add(i).write_volatile(value) };
        }
        self.sync_range_for_device(0, self.len);
        Ok(())
    }
}

impl Mapping {
    /// Ends the mapping now and gives the buffer back, synced for the CPU: what the device
    /// wrote is in it. [`None`] if the binding ended first (the buffer went with it).
    ///
    /// As for dropping the `Devres`, the device must be done with the buffer. An unbind racing
    /// this waits until the buffer is unmapped.
    ///
    /// # Examples
    ///
    /// ```
    /// use kernel::{devres::Devres, dma::Mapping};
    /// fn received(rx: Devres<Mapping>) -> Result<KVec<u8>> {
    ///     Mapping::unmap(rx).ok_or(ENXIO)
    /// }
    /// ```
    pub fn unmap(mapping: Devres<Mapping>) -> Option<KVec<u8>> {
        mapping.take_with(Mapping::into_buffer)
    }

    /// Unmaps the buffer (which syncs it for the CPU) and returns it.
    fn into_buffer(self) -> KVec<u8> {
        let this = core::mem::ManuallyDrop::new(self);
        this.unmap_now();
        // SAFETY: `this` is neither dropped nor used again: each of these fields is moved out
        // once, and the others need no drop.
        let (dev, buf, held) = unsafe {
            (
                core::ptr::read(&this.dev),
                core::ptr::read(&this.buf),
                core::ptr::read(&this.held),
            )
        };
        drop(dev);
        // The mapping is undone: the binding no longer holds it.
        drop(held);
        buf
    }

    /// Undoes the mapping; called once, by `drop` or `into_buffer`.
    fn unmap_now(&self) {
        // SAFETY: By the type invariant the buffer is mapped for `dev` at `dma_handle`, `len`
        // bytes in `dir`, and not unmapped yet (our callers run once, at the end of the
        // mapping); the buffer itself is freed or handed back after this.
        unsafe {
            bindings::dma_unmap_page_attrs(
                self.dev.as_raw(),
                self.dma_handle,
                self.len,
                self.dir.raw(),
                0,
            )
        };
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        self.unmap_now();
    }
}
