// SPDX-License-Identifier: GPL-2.0

//! PCI devices and drivers.
//!
//! A driver implements [`Driver`] (its id table, the info attached to each entry, its per-device
//! data, `probe` and `remove`) and declares its module with
//! [`module_pci_driver!`](crate::module_pci_driver), or keeps a
//! [`driver::Registration`](crate::driver::Registration) of [`Adapter`] itself. It needs no
//! `unsafe`: BARs are mapped as [`Devres`]`<`[`Bar`]`>`, which stop being accessible when the
//! device is unbound.
//!
//! C header: [`include/linux/pci.h`](srctree/include/linux/pci.h)
//!
//! # Examples
//!
//! A driver for QEMU's `pci-testdev` (1b36:0005). Registering it binds the device if there is
//! one (start QEMU with `-device pci-testdev`; this test expects it). Its probe gets the info of
//! the entry that matched and a `&Device<Core>`, maps BAR 0 and keeps it; unbinding revokes the
//! mapping, and the region is free again for the next bind. A mapping kept from the first binding
//! is refused in the second. Probe only records what it saw: the test thread asserts (a failed
//! assert in a bus callback would not fail the test).
//!
//! ```
//! use core::sync::atomic::{AtomicPtr, AtomicU32, Ordering};
//! use kernel::{
//!     c_str,
//!     devres::Devres,
//!     driver::Registration,
//!     pci::{self, Bar},
//!     sync::Arc,
//!     types::ForeignOwnable,
//! };
//!
//! static PROBED_INFO: AtomicU32 = AtomicU32::new(0);
//! static REMOVED: AtomicU32 = AtomicU32::new(0);
//! // Bit `n` set: check `n` of a bus callback failed.
//! static FAILED: AtomicU32 = AtomicU32::new(0);
//! // The probe leaves a reference to its BAR here so the test can try it after unbind.
//! static STASH: AtomicPtr<core::ffi::c_void> = AtomicPtr::new(core::ptr::null_mut());
//!
//! fn check(n: u32, ok: bool) {
//!     if !ok {
//!         FAILED.fetch_or(1 << n, Ordering::SeqCst);
//!     }
//! }
//!
//! struct TestDriver;
//!
//! kernel::pci_device_table!(TEST_TABLE, u32, [
//!     (pci::DeviceId::from_id(0x1af4, 0x7fff), 1), // no such device
//!     (pci::DeviceId::from_id(0x1b36, 0x0005), 2), // pci-testdev
//! ]);
//!
//! impl pci::Driver for TestDriver {
//!     type IdInfo = u32;
//!     const ID_TABLE: pci::IdTable<u32> = TEST_TABLE;
//!     type Data = Arc<Devres<Bar<16>>>;
//!
//!     fn probe(pdev: &pci::Device<pci::Core>, info: &u32) -> Result<Self::Data> {
//!         kernel::dev_info!(pdev, "probe {:04x}:{:04x} info {}\n",
//!                           pdev.vendor_id(), pdev.device_id(), info);
//!         PROBED_INFO.store(*info, Ordering::SeqCst);
//!         pdev.enable_device_mem()?;
//!         pdev.set_master();
//!         // BAR 1 is an I/O port BAR, and BAR 0 is smaller than 64 KiB: both refused.
//!         check(0, pdev.iomap_region(1, c_str!("rust_doctest_pci")).err() == Some(EINVAL));
//!         check(1, pdev.iomap_region_sized::<0x10000>(0, c_str!("rust_doctest_pci")).err()
//!                  == Some(EINVAL));
//!         // Map, drop, map again: dropping the `Devres` released the region at once.
//!         drop(pdev.iomap_region(0, c_str!("rust_doctest_pci"))?);
//!         let bar = Arc::new(pdev.iomap_region_sized::<16>(0, c_str!("rust_doctest_pci"))?,
//!                            GFP_KERNEL)?;
//!         let io = bar.access(pdev.as_ref())?; // no RCU: the device is bound while `pdev` is borrowed
//!         check(2, io.maxsize() >= 16);
//!         let _ = io.readl(0); // a build-time checked access
//!         check(3, io.try_readl(io.maxsize()) == Err(EINVAL));
//!         check(6, pdev.is_present()); // answers config space
//!         let old = STASH.swap(bar.clone().into_foreign().cast_mut(), Ordering::SeqCst);
//!         if !old.is_null() {
//!             // SAFETY: The first binding stored this reference with `Arc::into_foreign`.
//!             let old = unsafe { Arc::<Devres<Bar<16>>>::from_foreign(old) };
//!             // A mapping of the first binding: refused although the device is bound again.
//!             check(4, old.access(pdev.as_ref()).err() == Some(ENXIO) && old.try_access().is_none());
//!         }
//!         Ok(bar)
//!     }
//!
//!     fn remove(pdev: &pci::Device<pci::Core>, data: &Self::Data) {
//!         check(5, data.access(pdev.as_ref()).is_ok());
//!         kernel::dev_dbg!(pdev, "remove\n");
//!         REMOVED.fetch_add(1, Ordering::SeqCst);
//!     }
//! }
//!
//! // SAFETY: Built-in code has no module of its own; null is what it uses.
//! static MODULE: ThisModule = unsafe { ThisModule::from_ptr(core::ptr::null_mut()) };
//!
//! for round in 1..=2 {
//!     let reg = KBox::pin_init(
//!         Registration::<pci::Adapter<TestDriver>>::new(c_str!("rust_doctest_pci"), &MODULE),
//!         GFP_KERNEL,
//!     )?;
//!     // Probing is synchronous: the entry that matched gave its info.
//!     assert_eq!(PROBED_INFO.swap(0, Ordering::SeqCst), 2);
//!     drop(reg); // unbinds
//!     assert_eq!(REMOVED.load(Ordering::SeqCst), round);
//!     assert_eq!(FAILED.load(Ordering::SeqCst), 0);
//! }
//! // SAFETY: The second probe stored a reference made by `Arc::into_foreign`, taken back here.
//! let bar = unsafe {
//!     Arc::<Devres<Bar<16>>>::from_foreign(STASH.swap(core::ptr::null_mut(), Ordering::SeqCst))
//! };
//! // Unbinding revoked the mapping although a reference to it survives.
//! assert!(bar.try_access().is_none());
//! # Ok::<(), Error>(())
//! ```
//!
//! A probe that fails: the driver core gets its errno, and what it set up is undone. A BAR kept
//! beyond the failed probe is revoked, and its region is free again for the next probe.
//!
//! ```
//! use core::sync::atomic::{AtomicBool, AtomicPtr, AtomicU32, Ordering};
//! use kernel::{
//!     c_str,
//!     devres::Devres,
//!     driver::Registration,
//!     pci::{self, Bar},
//!     sync::Arc,
//!     types::ForeignOwnable,
//! };
//!
//! static PROBES: AtomicU32 = AtomicU32::new(0);
//! static BUSY_ERRNO: AtomicBool = AtomicBool::new(false);
//! static STASH: AtomicPtr<core::ffi::c_void> = AtomicPtr::new(core::ptr::null_mut());
//!
//! struct Failing;
//!
//! kernel::pci_device_table!(FAILING_IDS, (), [(pci::DeviceId::from_id(0x1b36, 0x0005), ())]);
//!
//! impl pci::Driver for Failing {
//!     type IdInfo = ();
//!     const ID_TABLE: pci::IdTable<()> = FAILING_IDS;
//!     type Data = ();
//!
//!     fn probe(pdev: &pci::Device<pci::Core>, _info: &()) -> Result {
//!         PROBES.fetch_add(1, Ordering::SeqCst);
//!         pdev.enable_device_mem()?;
//!         let bar = pdev.iomap_region_sized::<16>(0, c_str!("rust_doctest_pci_fail"))?;
//!         // The region is taken: the C errno comes back unchanged.
//!         let again = pdev.iomap_region(0, c_str!("rust_doctest_pci_fail"));
//!         BUSY_ERRNO.store(again.err() == Some(EBUSY), Ordering::SeqCst);
//!         let bar = Arc::new(bar, GFP_KERNEL)?;
//!         STASH.store(bar.into_foreign().cast_mut(), Ordering::SeqCst);
//!         Err(ENODEV)
//!     }
//! }
//!
//! // SAFETY: Built-in code has no module of its own; null is what it uses.
//! static MODULE: ThisModule = unsafe { ThisModule::from_ptr(core::ptr::null_mut()) };
//!
//! for round in 1..=2 {
//!     // The failed probe does not fail the registration.
//!     let reg = KBox::pin_init(
//!         Registration::<pci::Adapter<Failing>>::new(c_str!("rust_doctest_pci_fail"), &MODULE),
//!         GFP_KERNEL,
//!     )?;
//!     // The second round could map BAR 0 again: the first released it.
//!     assert_eq!(PROBES.load(Ordering::SeqCst), round);
//!     assert!(BUSY_ERRNO.swap(false, Ordering::SeqCst));
//!     // SAFETY: The probe stored a reference made by `Arc::into_foreign`, taken back only here.
//!     let bar = unsafe {
//!         Arc::<Devres<Bar<16>>>::from_foreign(STASH.swap(core::ptr::null_mut(), Ordering::SeqCst))
//!     };
//!     assert!(bar.try_access().is_none());
//!     drop(reg);
//! }
//! # Ok::<(), Error>(())
//! ```
//!
//! Unbinding waits for the binding's grace period: a work item on the other CPU (see the
//! grace-period example of [`Revocable`](crate::revocable::Revocable)) that holds a `Devres`
//! through `try_access()` while the device is unbound still sees the value alive until it lets
//! go, and the unbind does not return before the value is dropped.
//!
//! ```
//! use core::sync::atomic::{AtomicPtr, AtomicU32, Ordering};
//! use kernel::{
//!     c_str, devres::Devres, driver::Registration, new_condvar, new_spinlock, pci,
//!     sync::{Arc, CondVar, SpinLock},
//!     time::{ktime_ms_delta, Ktime},
//!     types::ForeignOwnable,
//!     workqueue,
//! };
//!
//! static DROPS: AtomicU32 = AtomicU32::new(0);
//! static STASH: AtomicPtr<core::ffi::c_void> = AtomicPtr::new(core::ptr::null_mut());
//!
//! struct Counted;
//! impl Drop for Counted {
//!     fn drop(&mut self) {
//!         DROPS.fetch_add(1, Ordering::SeqCst);
//!     }
//! }
//!
//! struct Keeper;
//! kernel::pci_device_table!(KEEPER_IDS, (), [(pci::DeviceId::from_id(0x1b36, 0x0005), ())]);
//! impl pci::Driver for Keeper {
//!     type IdInfo = ();
//!     const ID_TABLE: pci::IdTable<()> = KEEPER_IDS;
//!     type Data = ();
//!     fn probe(pdev: &pci::Device<pci::Core>, _info: &()) -> Result {
//!         let kept = Arc::new(Devres::new(pdev.as_ref(), Counted, GFP_KERNEL)?, GFP_KERNEL)?;
//!         STASH.store(kept.into_foreign().cast_mut(), Ordering::SeqCst);
//!         Ok(())
//!     }
//! }
//!
//! /// What the reader saw: it held access, the drops by the time it let go, it is done.
//! #[derive(Clone, Copy, Default)]
//! struct Seen {
//!     held: bool,
//!     drops_at_release: Option<u32>,
//!     done: bool,
//! }
//!
//! #[pin_data]
//! struct Shared {
//!     #[pin]
//!     seen: SpinLock<Seen>,
//!     #[pin]
//!     cv: CondVar,
//! }
//!
//! // SAFETY: Built-in code has no module of its own; null is what it uses.
//! static MODULE: ThisModule = unsafe { ThisModule::from_ptr(core::ptr::null_mut()) };
//!
//! let mut overlapped = 0;
//! for _round in 0..5 {
//!     DROPS.store(0, Ordering::SeqCst);
//!     let reg = KBox::pin_init(
//!         Registration::<pci::Adapter<Keeper>>::new(c_str!("rust_doctest_pci_grace"), &MODULE),
//!         GFP_KERNEL,
//!     )?;
//!     // SAFETY: The probe stored this reference with `into_foreign`; taken back only here.
//!     let kept = unsafe {
//!         Arc::<Devres<Counted>>::from_foreign(STASH.swap(core::ptr::null_mut(), Ordering::SeqCst))
//!     };
//!     let shared = Arc::pin_init(
//!         pin_init!(Shared { seen <- new_spinlock!(Seen::default()), cv <- new_condvar!() }),
//!         GFP_KERNEL,
//!     )?;
//!     let (s, k) = (shared.clone(), kept.clone());
//!     let other = (workqueue::current_cpu() + 1) % 2;
//!     let work = move || {
//!         if let Some(guard) = k.try_access() {
//!             s.seen.lock().held = true;
//!             s.cv.notify_all();
//!             let start = Ktime::ktime_get();
//!             while ktime_ms_delta(Ktime::ktime_get(), start) < 100 {
//!                 core::hint::spin_loop();
//!             }
//!             s.seen.lock().drops_at_release = Some(DROPS.load(Ordering::SeqCst));
//!             drop(guard);
//!         }
//!         s.seen.lock().done = true;
//!         s.cv.notify_all();
//!     };
//!     // SAFETY: A doctest is built in: its code stays loaded until the work has run.
//!     unsafe { workqueue::system().try_spawn_on(other, GFP_KERNEL, work) }?;
//!     let mut seen = shared.seen.lock();
//!     while !seen.held && !seen.done {
//!         shared.cv.wait(&mut seen);
//!     }
//!     // The reader holds access right now, as the unbind begins.
//!     let holding = seen.held && seen.drops_at_release.is_none();
//!     drop(seen);
//!     drop(reg); // unbinds: the binding ends, one grace period, then the release drops `Counted`
//!     assert_eq!(DROPS.load(Ordering::SeqCst), 1);
//!     let mut seen = shared.seen.lock();
//!     while !seen.done {
//!         shared.cv.wait(&mut seen);
//!     }
//!     if seen.held {
//!         // Not dropped before the reader let go.
//!         assert_eq!(seen.drops_at_release, Some(0));
//!     }
//!     drop(seen);
//!     assert!(kept.try_access().is_none());
//!     if holding {
//!         overlapped += 1;
//!         break;
//!     }
//! }
//! assert_eq!(overlapped, 1);
//! # Ok::<(), Error>(())
//! ```
//!
//! A device bound through `driver_override` to a driver none of whose entries describes it: the
//! PCI core matches it with a catch-all id, which carries no info of ours, so the bind is refused
//! with `ENODEV` and probe never runs (it would otherwise get some other entry's info).
//!
//! ```
//! use core::sync::atomic::{AtomicU32, Ordering};
//! use kernel::{bindings, c_str, driver::Registration, pci};
//!
//! static PROBES: AtomicU32 = AtomicU32::new(0);
//!
//! struct Other;
//!
//! kernel::pci_device_table!(OTHER_IDS, u32, [(pci::DeviceId::from_id(0x1af4, 0x7ffe), 7)]);
//!
//! impl pci::Driver for Other {
//!     type IdInfo = u32;
//!     const ID_TABLE: pci::IdTable<u32> = OTHER_IDS;
//!     type Data = ();
//!
//!     fn probe(_pdev: &pci::Device<pci::Core>, _info: &u32) -> Result {
//!         PROBES.fetch_add(1, Ordering::SeqCst);
//!         Ok(())
//!     }
//! }
//!
//! // SAFETY: Built-in code has no module of its own; null is what it uses.
//! static MODULE: ThisModule = unsafe { ThisModule::from_ptr(core::ptr::null_mut()) };
//!
//! let name = c_str!("rust_doctest_pci_override");
//! // SAFETY: Looks up pci-testdev and takes a reference to it, put back below.
//! let testdev = unsafe {
//!     bindings::pci_get_device(0x1b36, 0x0005, core::ptr::null_mut())
//! };
//! assert!(!testdev.is_null());
//! // SAFETY: `testdev` is a valid `pci_dev` we hold a reference to; `s` is NUL-terminated.
//! let set = |s: &kernel::str::CStr| unsafe {
//!     bindings::__device_set_driver_override(
//!         core::ptr::addr_of_mut!((*testdev).dev),
//!         s.as_char_ptr(),
//!         s.len(),
//!     )
//! };
//! assert_eq!(set(name), 0);
//! let reg = KBox::pin_init(Registration::<pci::Adapter<Other>>::new(name, &MODULE), GFP_KERNEL)?;
//! assert_eq!(PROBES.load(Ordering::SeqCst), 0);
//! drop(reg);
//! assert_eq!(set(c_str!("")), 0); // clears the override
//! // SAFETY: Puts back the reference taken above.
//! unsafe { bindings::pci_dev_put(testdev) };
//! # Ok::<(), Error>(())
//! ```

use crate::{
    alloc::flags::GFP_KERNEL,
    bindings,
    device::{self, DeviceContext},
    device_id::{self, RawDeviceId},
    devres::Devres,
    driver,
    error::{
        code::{EBUSY, EINVAL, ENODEV, ENOMEM},
        to_result, Result,
    },
    ffi::{c_int, c_void},
    io::{Io, IoRaw},
    irq::IrqVector,
    str::CStr,
    types::{ARef, Opaque},
    ThisModule,
};
use core::{marker::PhantomData, ops::Deref, ptr::NonNull};

pub use crate::device::{Bound, Core, Normal};

mod config;
mod pm;
pub use config::{
    Capabilities, Capability, ConfigSpace, Conventional, ExtCapabilities, ExtCapability, Extended,
    Size,
};
pub use pm::RuntimeActive;

/// Matches any vendor, device, subvendor or subdevice (C's `PCI_ANY_ID`).
///
/// # Examples
///
/// ```
/// assert_eq!(kernel::pci::DeviceId::from_class(0, 0).device(), kernel::pci::ANY_ID);
/// ```
pub const ANY_ID: u32 = !0;

/// Number of standard BARs (C's `PCI_STD_NUM_BARS`); BAR indices are `0..STD_NUM_BARS`.
///
/// # Examples
///
/// ```
/// assert_eq!(kernel::pci::STD_NUM_BARS, kernel::bindings::PCI_STD_NUM_BARS);
/// ```
pub const STD_NUM_BARS: u32 = 6;

/// A PCI device id: an entry of a driver's id table (C's `struct pci_device_id`).
///
/// Build tables of them with [`pci_device_table!`](crate::pci_device_table); the table stores each
/// entry's index in `driver_data`, so `driver_data` cannot be set here.
///
/// # Examples
///
/// ```
/// use kernel::pci::DeviceId;
///
/// let id = DeviceId::from_id(0x1b36, 0x0005);
/// assert_eq!((id.vendor(), id.device()), (0x1b36, 0x0005));
/// let class = DeviceId::from_class(0x0c0330, 0xffffff); // xHCI controllers
/// assert_eq!(class.vendor(), kernel::pci::ANY_ID);
/// ```
#[repr(transparent)]
#[derive(Clone, Copy)]
pub struct DeviceId(bindings::pci_device_id);

impl DeviceId {
    /// Matches vendor and device, any subsystem ids and class.
    ///
    /// # Examples
    ///
    /// ```
    /// let id = kernel::pci::DeviceId::from_id(0x8086, 0x10d3);
    /// assert_eq!(id.device(), 0x10d3);
    /// ```
    pub const fn from_id(vendor: u32, device: u32) -> Self {
        Self(bindings::pci_device_id {
            vendor,
            device,
            subvendor: ANY_ID,
            subdevice: ANY_ID,
            class: 0,
            class_mask: 0,
            driver_data: 0,
            override_only: 0,
        })
    }

    /// Matches any device whose class code, masked with `class_mask`, equals `class`.
    ///
    /// # Examples
    ///
    /// ```
    /// let id = kernel::pci::DeviceId::from_class(0xff0000, 0xff0000); // class "other"
    /// assert_eq!(id.class(), (0xff0000, 0xff0000));
    /// ```
    pub const fn from_class(class: u32, class_mask: u32) -> Self {
        Self(bindings::pci_device_id {
            vendor: ANY_ID,
            device: ANY_ID,
            subvendor: ANY_ID,
            subdevice: ANY_ID,
            class,
            class_mask,
            driver_data: 0,
            override_only: 0,
        })
    }

    /// Returns the vendor id to match ([`ANY_ID`] for any).
    ///
    /// # Examples
    ///
    /// ```
    /// assert_eq!(kernel::pci::DeviceId::from_id(1, 2).vendor(), 1);
    /// ```
    pub const fn vendor(&self) -> u32 {
        self.0.vendor
    }

    /// Returns the device id to match ([`ANY_ID`] for any).
    ///
    /// # Examples
    ///
    /// ```
    /// assert_eq!(kernel::pci::DeviceId::from_id(1, 2).device(), 2);
    /// ```
    pub const fn device(&self) -> u32 {
        self.0.device
    }

    /// Returns the class and class mask to match.
    ///
    /// # Examples
    ///
    /// ```
    /// assert_eq!(kernel::pci::DeviceId::from_id(1, 2).class(), (0, 0));
    /// ```
    pub const fn class(&self) -> (u32, u32) {
        (self.0.class, self.0.class_mask)
    }
}

// SAFETY: `DeviceId` is a transparent wrapper of `struct pci_device_id`; all zeroes is the end of
// a PCI id table; `driver_data` is a `kernel_ulong_t` (the size of `usize`) that the PCI core only
// copies, and passes in the matched id to probe.
unsafe impl RawDeviceId for DeviceId {
    const DRIVER_DATA_OFFSET: usize = core::mem::offset_of!(bindings::pci_device_id, driver_data);
}

/// A PCI driver's id table with info of type `U` per entry.
pub type IdTable<U> = device_id::IdTable<DeviceId, U>;

/// Declares a PCI id table constant `$table` with info of type `$info_ty` per entry.
///
/// The entries are `(DeviceId, info)` pairs. The ids go into read-only data, ending in a zero
/// entry; in a module they are exported as `__mod_pci__$table_device_table` for `modpost`, which
/// makes module aliases from them.
///
/// # Examples
///
/// ```
/// use kernel::pci::DeviceId;
///
/// kernel::pci_device_table!(IDS, &'static str, [
///     (DeviceId::from_id(0x1b36, 0x0005), "testdev"),
///     (DeviceId::from_class(0xff0000, 0xff0000), "other"),
/// ]);
///
/// assert_eq!(IDS.ids().len(), 2);
/// assert_eq!(IDS.info(1), Some(&"other"));
/// ```
#[macro_export]
macro_rules! pci_device_table {
    ($table:ident, $info_ty:ty, [ $($entries:tt)* ]) => {
        $crate::define_id_table!($table, "pci", $crate::pci::DeviceId, $info_ty, [ $($entries)* ]);
    };
}

/// A PCI driver.
///
/// # Examples
///
/// See the [module documentation](self).
///
/// ```
/// use kernel::pci;
///
/// struct Nop;
///
/// kernel::pci_device_table!(NOP_IDS, (), [(pci::DeviceId::from_id(0xffff, 0xfffe), ())]);
///
/// impl pci::Driver for Nop {
///     type IdInfo = ();
///     const ID_TABLE: pci::IdTable<()> = NOP_IDS;
///     type Data = ();
///
///     fn probe(_pdev: &pci::Device<pci::Core>, _info: &()) -> Result {
///         Ok(())
///     }
/// }
/// ```
pub trait Driver {
    /// The info attached to each id table entry, passed to [`Driver::probe`].
    type IdInfo: 'static;

    /// The ids this driver binds to.
    const ID_TABLE: IdTable<Self::IdInfo>;

    /// The per-device data returned by probe, dropped after [`Driver::remove`].
    type Data: Send + Sync + 'static;

    /// Binds the driver to `pdev`, which matched the entry whose info is `info`.
    ///
    /// Returning an error fails the bind with that error's errno; what was set up through
    /// [`Devres`] or [`Device::enable_device_mem`] is undone.
    fn probe(pdev: &Device<Core>, info: &Self::IdInfo) -> Result<Self::Data>;

    /// Unbinds the driver from `pdev` (the device may already be gone); `data` is dropped after
    /// this returns, then the binding's interrupts are freed, its [`Devres`] values revoked,
    /// bus mastering turned off, and its DMA memory given back (see [`dma`](crate::dma)).
    fn remove(pdev: &Device<Core>, data: &Self::Data) {
        let _ = (pdev, data);
    }

    /// Whether the PCI core may recover the device from errors with this driver's handlers
    /// below (C's `pci_error_handlers`). Without them, an uncorrectable error the AER core
    /// cannot recover from ends in "can't recover (no error_detected callback)".
    ///
    /// Every handler runs on a bound device under its device lock, as probe and remove do
    /// (hence `&Device<Core>`), never during probe or remove, with the data probe returned.
    /// The PCI core calls them in this order: [`Driver::error_detected`], then, if every
    /// driver below the failing link answered [`Detected::CanRecover`],
    /// [`Driver::mmio_enabled`]; if one asked for a reset (or the link is frozen), the core
    /// resets the device ([`Driver::reset_prepare`] before, [`Driver::reset_done`] after, for
    /// a bus reset) and calls [`Driver::slot_reset`]; last, if all went well,
    /// [`Driver::resume`]. After a reset the device's registers are back at their power-on
    /// values; its config space is put back as probe left it before [`Driver::slot_reset`]
    /// runs (the AER core's slot and bus resets restore nothing themselves).
    const ERROR_RECOVERY: bool = false;

    /// An error was reported on the device's link, now in `channel` state: may the device
    /// recover as it is, does it need a reset, or must the driver let go? The driver must not
    /// touch the device while `channel` is [`Channel::Frozen`] (reads return all ones).
    fn error_detected(pdev: &Device<Core>, data: &Self::Data, channel: Channel) -> Detected {
        let _ = (pdev, data, channel);
        Detected::Disconnect
    }

    /// The device's MMIO works again (no reset happened): is it recovered?
    fn mmio_enabled(pdev: &Device<Core>, data: &Self::Data) -> MmioEnabled {
        let _ = (pdev, data);
        MmioEnabled::Recovered
    }

    /// The device was reset (registers at power-on values): the driver re-initialises what it
    /// needs; is it recovered?
    fn slot_reset(pdev: &Device<Core>, data: &Self::Data) -> SlotReset {
        let _ = (pdev, data);
        SlotReset::Recovered
    }

    /// Recovery is over: the driver may start I/O again.
    fn resume(pdev: &Device<Core>, data: &Self::Data) {
        let _ = (pdev, data);
    }

    /// The device is about to be reset (a function-level or bus reset): stop using it.
    fn reset_prepare(pdev: &Device<Core>, data: &Self::Data) {
        let _ = (pdev, data);
    }

    /// The device was reset (registers at power-on values, config space restored).
    fn reset_done(pdev: &Device<Core>, data: &Self::Data) {
        let _ = (pdev, data);
    }

    /// The system is going down (power-off, reboot, kexec): stop the device. Bus mastering is
    /// turned off after this returns, whatever the driver did, so that no DMA reaches memory
    /// the next kernel (or the firmware) owns.
    fn shutdown(pdev: &Device<Core>, data: &Self::Data) {
        let _ = (pdev, data);
    }

    /// Whether the driver takes part in system sleep with [`Driver::sleep`] and
    /// [`Driver::wake`] (C's `dev_pm_ops`, for suspend and each phase of hibernation).
    ///
    /// Both run on a bound device under its device lock (hence `&Device<Core>`), never during
    /// probe or remove, with the data probe returned. After [`Driver::sleep`] returns, the PCI
    /// core saves the device's config space and puts it into D3hot, where it answers config
    /// space only; before [`Driver::wake`], it brings it back to D0 and restores config space.
    /// Without them, the PCI core leaves the device powered while the system sleeps. A device
    /// that runtime PM put to sleep before the system went down may stay asleep through it (the
    /// PM core's direct-complete): then neither runs, and [`Driver::runtime_resume`] does when
    /// the device is next used.
    ///
    /// # Examples
    ///
    /// A driver that counts its device's sleeps; one whose device loses its registers in D3hot
    /// sets them up again in `wake` before it uses the device.
    ///
    /// ```
    /// use core::sync::atomic::{AtomicU32, Ordering};
    /// use kernel::pci;
    ///
    /// struct Counted;
    ///
    /// kernel::pci_device_table!(IDS, (), [(pci::DeviceId::from_id(0xffff, 0xfffd), ())]);
    ///
    /// impl pci::Driver for Counted {
    ///     type IdInfo = ();
    ///     const ID_TABLE: pci::IdTable<()> = IDS;
    ///     type Data = KBox<AtomicU32>;
    ///
    ///     fn probe(_pdev: &pci::Device<pci::Core>, _info: &()) -> Result<KBox<AtomicU32>> {
    ///         Ok(KBox::new(AtomicU32::new(0), GFP_KERNEL)?)
    ///     }
    ///
    ///     const SLEEP: bool = true;
    ///
    ///     fn sleep(_pdev: &pci::Device<pci::Core>, sleeps: &KBox<AtomicU32>) -> Result {
    ///         sleeps.fetch_add(1, Ordering::Relaxed);
    ///         Ok(())
    ///     }
    ///
    ///     fn wake(pdev: &pci::Device<pci::Core>, sleeps: &KBox<AtomicU32>) -> Result {
    ///         kernel::dev_info!(pdev, "awake after {} sleeps\n", sleeps.load(Ordering::Relaxed));
    ///         Ok(())
    ///     }
    /// }
    /// ```
    const SLEEP: bool = false;

    /// The system is going to sleep: stop using the device (no access, no DMA, no interrupt
    /// wanted) until [`Driver::wake`]. An error aborts the system's suspend.
    fn sleep(pdev: &Device<Core>, data: &Self::Data) -> Result {
        let _ = (pdev, data);
        Ok(())
    }

    /// The system woke: the device is in D0 again, its config space as it was. Its own
    /// registers may be at their power-on values (a device without No_Soft_Reset loses them
    /// in D3hot): the driver sets up again what it needs, then may use the device.
    fn wake(pdev: &Device<Core>, data: &Self::Data) -> Result {
        let _ = (pdev, data);
        Ok(())
    }

    /// Runtime PM: `Some(ms)` lets the device sleep (D3hot) while the system runs, `ms`
    /// milliseconds after its last use, with [`Driver::runtime_suspend`] and
    /// [`Driver::runtime_resume`]; `None` (the default) keeps it powered while bound.
    ///
    /// The PCI core holds a runtime PM reference on a device while a driver binds it; with
    /// `Some`, the adapter gives it back once probe succeeded and takes it again before remove
    /// (for which the PCI core wakes the device). The device sleeps once unused for `ms` and
    /// user space allows it (`power/control` set to `auto`; the PCI core starts at `on`). Code
    /// that needs the device awake holds a [`RuntimeActive`] from [`Device::runtime_active`].
    ///
    /// Both callbacks run on a bound device, never during probe or remove (the PCI core holds
    /// the device awake around them), but not under its device lock: they get a
    /// `&Device<Bound>`, and may run beside the driver's other code.
    ///
    /// # Examples
    ///
    /// Binds QEMU's `pci-testdev` with a driver that sleeps as soon as it is idle: it sleeps
    /// once allowed, wakes for a [`RuntimeActive`], sleeps again once that is dropped, and is
    /// woken for remove when unbound asleep; the runtime PM usage count ends where it began.
    /// Every callback is lent the one value probe returned (never a copy rebuilt for the call).
    ///
    /// ```
    /// use core::ptr::{null_mut, NonNull};
    /// use core::sync::atomic::{AtomicBool, AtomicPtr, AtomicU32, AtomicUsize, Ordering::SeqCst};
    /// use kernel::{bindings, c_str, driver::Registration, pci, types::ARef};
    ///
    /// static DATA_AT: AtomicUsize = AtomicUsize::new(0);
    /// static COPIED: AtomicBool = AtomicBool::new(false);
    /// /// Notes where a callback found the driver's data: always in one place.
    /// fn lent(data: &KBox<u32>) {
    ///     let at = core::ptr::from_ref(data) as usize;
    ///     if DATA_AT.compare_exchange(0, at, SeqCst, SeqCst).is_err_and(|first| first != at) {
    ///         COPIED.store(true, SeqCst);
    ///     }
    /// }
    /// static SUSPENDS: AtomicU32 = AtomicU32::new(0);
    /// static REENTRY_REFUSED: AtomicBool = AtomicBool::new(false);
    /// static RESUMES: AtomicU32 = AtomicU32::new(0);
    /// static AWAKE_AT_REMOVE: AtomicBool = AtomicBool::new(false);
    /// static KEPT: AtomicPtr<pci::Device> = AtomicPtr::new(null_mut());
    ///
    /// struct Sleepy;
    /// kernel::pci_device_table!(SLEEPY_IDS, (), [(pci::DeviceId::from_id(0x1b36, 0x0005), ())]);
    /// impl pci::Driver for Sleepy {
    ///     type IdInfo = ();
    ///     const ID_TABLE: pci::IdTable<()> = SLEEPY_IDS;
    ///     type Data = KBox<u32>;
    ///     const AUTOSUSPEND_DELAY_MS: Option<u32> = Some(0);
    ///
    ///     fn probe(pdev: &pci::Device<pci::Core>, _info: &()) -> Result<KBox<u32>> {
    ///         KEPT.store(ARef::into_raw(ARef::from(pdev)).as_ptr(), SeqCst);
    ///         Ok(KBox::new(7, GFP_KERNEL)?)
    ///     }
    ///
    ///     fn remove(_pdev: &pci::Device<pci::Core>, data: &KBox<u32>) {
    ///         lent(data);
    ///         // Each suspend was followed by a resume.
    ///         let awake = RESUMES.load(SeqCst) == SUSPENDS.load(SeqCst);
    ///         AWAKE_AT_REMOVE.store(awake, SeqCst);
    ///     }
    ///
    ///     fn runtime_suspend(_pdev: &pci::Device<pci::Bound>, data: &KBox<u32>) -> Result {
    ///         lent(data);
    ///         SUSPENDS.fetch_add(1, SeqCst);
    ///         Ok(())
    ///     }
    ///
    ///     fn runtime_resume(pdev: &pci::Device<pci::Bound>, data: &KBox<u32>) -> Result {
    ///         lent(data);
    ///         // Waking the device from its own resume would wait for itself: refused.
    ///         let deadlock = Error::from_errno(-(bindings::EDEADLK as i32));
    ///         if pdev.runtime_active().err() == Some(deadlock) {
    ///             REENTRY_REFUSED.store(true, SeqCst);
    ///         }
    ///         RESUMES.fetch_add(1, SeqCst);
    ///         Ok(())
    ///     }
    /// }
    ///
    /// /// Waits up to two seconds for the `n`-th suspend.
    /// fn suspended(n: u32) -> bool {
    ///     for _ in 0..200 {
    ///         if SUSPENDS.load(SeqCst) >= n {
    ///             return true;
    ///         }
    ///         // SAFETY: This context may sleep.
    ///         unsafe { bindings::msleep(10) };
    ///     }
    ///     false
    /// }
    ///
    /// // SAFETY: Built-in code has no module of its own; null is what it uses.
    /// static MODULE: ThisModule = unsafe { ThisModule::from_ptr(core::ptr::null_mut()) };
    ///
    /// let reg = KBox::pin_init(
    ///     Registration::<pci::Adapter<Sleepy>>::new(c_str!("rust_doctest_pci_rpm"), &MODULE),
    ///     GFP_KERNEL,
    /// )?;
    /// let kept = NonNull::new(KEPT.swap(null_mut(), SeqCst)).ok_or(ENODEV)?;
    /// // SAFETY: probe stored a reference made by `ARef::into_raw`, taken back only here.
    /// let pdev = unsafe { ARef::<pci::Device>::from_raw(kept) };
    /// let dev: &kernel::device::Device = (*pdev).as_ref();
    /// let usage = || {
    ///     // SAFETY: `dev` is valid; the count is an `atomic_t`, read once.
    ///     unsafe { core::ptr::read_volatile(&(*dev.as_raw()).power.usage_count) }.counter
    /// };
    /// let before = usage();
    /// // The PCI core starts every device with runtime PM forbidden (`power/control` is `on`).
    /// assert_eq!(SUSPENDS.load(SeqCst), 0);
    /// // SAFETY: `dev` is valid. What user space's `auto` does.
    /// unsafe { bindings::pm_runtime_allow(dev.as_raw()) };
    /// assert!(suspended(1));
    /// {
    ///     let _awake = pdev.runtime_active()?;
    ///     assert_eq!((SUSPENDS.load(SeqCst), RESUMES.load(SeqCst)), (1, 1));
    /// }
    /// assert!(suspended(2));
    /// // Unbound asleep: the PCI core wakes the device before remove runs.
    /// drop(reg);
    /// assert!(AWAKE_AT_REMOVE.load(SeqCst));
    /// assert!(RESUMES.load(SeqCst) >= 2);
    /// assert!(!COPIED.load(SeqCst));
    /// assert!(REENTRY_REFUSED.load(SeqCst));
    /// // SAFETY: `dev` is valid. Back to `on`, as the device was found.
    /// unsafe { bindings::pm_runtime_forbid(dev.as_raw()) };
    /// assert_eq!(usage(), before);
    /// # Ok::<(), Error>(())
    /// ```
    const AUTOSUSPEND_DELAY_MS: Option<u32> = None;

    /// The device is idle and goes to sleep: stop using it (no access, no DMA, no interrupt
    /// wanted) until [`Driver::runtime_resume`]. After this returns, the PCI core saves its
    /// config space and puts it into D3hot. An error keeps it awake: `EBUSY` or `EAGAIN` for a
    /// later try; any other is kept by the PM core (`runtime_error`), and every later
    /// [`Device::runtime_active`] fails until the device's runtime PM status is set anew.
    fn runtime_suspend(pdev: &Device<Bound>, data: &Self::Data) -> Result {
        let _ = (pdev, data);
        Ok(())
    }

    /// The device is wanted again: it is back in D0 with its config space restored, its own
    /// registers possibly at their power-on values; set up again what is needed. An error
    /// leaves it in an error state where every later [`Device::runtime_active`] fails.
    fn runtime_resume(pdev: &Device<Bound>, data: &Self::Data) -> Result {
        let _ = (pdev, data);
        Ok(())
    }
}

/// The state of a device's link after an error (C's `pci_channel_state_t`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Channel {
    /// I/O still works.
    Normal,
    /// I/O is blocked until the link is reset: reads return all ones, writes are dropped.
    Frozen,
    /// The device is gone for good.
    PermanentFailure,
}

impl Channel {
    fn from_raw(state: bindings::pci_channel_state_t) -> Self {
        match state {
            bindings::pci_channel_io_normal => Channel::Normal,
            bindings::pci_channel_io_frozen => Channel::Frozen,
            _ => Channel::PermanentFailure,
        }
    }
}

/// What a driver answers [`Driver::error_detected`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Detected {
    /// The device can go on once its MMIO is enabled again ([`Driver::mmio_enabled`] follows).
    CanRecover,
    /// The device needs a reset ([`Driver::slot_reset`] follows).
    NeedReset,
    /// The driver gives up on the device: the core unbinds it.
    Disconnect,
}

/// What a driver answers [`Driver::mmio_enabled`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MmioEnabled {
    /// The device works again.
    Recovered,
    /// It still needs a reset ([`Driver::slot_reset`] follows).
    NeedReset,
    /// The driver gives up on the device.
    Disconnect,
}

/// What a driver answers [`Driver::slot_reset`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SlotReset {
    /// The device works again after its reset.
    Recovered,
    /// The driver gives up on the device.
    Disconnect,
}

impl Detected {
    fn to_raw(self) -> bindings::pci_ers_result_t {
        match self {
            Detected::CanRecover => bindings::pci_ers_result_PCI_ERS_RESULT_CAN_RECOVER,
            Detected::NeedReset => bindings::pci_ers_result_PCI_ERS_RESULT_NEED_RESET,
            Detected::Disconnect => bindings::pci_ers_result_PCI_ERS_RESULT_DISCONNECT,
        }
    }
}

impl MmioEnabled {
    fn to_raw(self) -> bindings::pci_ers_result_t {
        match self {
            MmioEnabled::Recovered => bindings::pci_ers_result_PCI_ERS_RESULT_RECOVERED,
            MmioEnabled::NeedReset => bindings::pci_ers_result_PCI_ERS_RESULT_NEED_RESET,
            MmioEnabled::Disconnect => bindings::pci_ers_result_PCI_ERS_RESULT_DISCONNECT,
        }
    }
}

impl SlotReset {
    fn to_raw(self) -> bindings::pci_ers_result_t {
        match self {
            SlotReset::Recovered => bindings::pci_ers_result_PCI_ERS_RESULT_RECOVERED,
            SlotReset::Disconnect => bindings::pci_ers_result_PCI_ERS_RESULT_DISCONNECT,
        }
    }
}

/// Registers a [`Driver`] with the PCI core: the [`driver::RegistrationOps`] of PCI.
///
/// # Examples
///
/// ```
/// # fn f<T: kernel::pci::Driver + 'static>(module: &'static ThisModule) -> Result {
/// use kernel::{driver::Registration, pci};
/// let _reg = KBox::pin_init(
///     Registration::<pci::Adapter<T>>::new(kernel::c_str!("my_driver"), module),
///     GFP_KERNEL,
/// )?;
/// # Ok(()) }
/// ```
pub struct Adapter<T: Driver>(PhantomData<T>);

// SAFETY: `register` leaves the driver registered only when `__pci_register_driver` succeeds, and
// `pci_unregister_driver` unbinds all devices and removes the driver, after which the PCI core no
// longer uses it.
unsafe impl<T: Driver + 'static> driver::RegistrationOps for Adapter<T> {
    type RegType = bindings::pci_driver;

    unsafe fn register(
        reg: &Opaque<bindings::pci_driver>,
        name: &'static CStr,
        module: &'static ThisModule,
    ) -> Result {
        let pdrv = reg.get();
        // SAFETY: `pdrv` is valid, zeroed and not registered (the caller's promise), so we may
        // fill it in; the id table is a `'static` sentinel-terminated array of
        // `pci_device_id` (`DeviceId` is transparent); `name` is `'static`.
        unsafe {
            (*pdrv).name = name.as_char_ptr();
            (*pdrv).probe = Some(Self::probe_callback);
            (*pdrv).remove = Some(Self::remove_callback);
            (*pdrv).shutdown = Some(Self::shutdown_callback);
            if T::ERROR_RECOVERY {
                (*pdrv).err_handler = &Self::ERROR_HANDLERS;
            }
            if T::SLEEP || T::AUTOSUSPEND_DELAY_MS.is_some() {
                (*pdrv).driver.pm = &Self::PM_OPS;
            }
            (*pdrv).id_table = T::ID_TABLE.as_ptr().cast();
        }
        // SAFETY: `pdrv` is filled in and pinned; `module` is this code's module.
        to_result(unsafe {
            bindings::__pci_register_driver(pdrv, module.as_ptr(), name.as_char_ptr())
        })
    }

    unsafe fn unregister(reg: &Opaque<bindings::pci_driver>) {
        // SAFETY: The caller promises that `reg` was registered and not unregistered since.
        unsafe { bindings::pci_unregister_driver(reg.get()) }
    }
}

impl<T: Driver + 'static> Adapter<T> {
    /// The error handlers the PCI core calls for `T` (a promoted constant: `'static`).
    const ERROR_HANDLERS: bindings::pci_error_handlers = bindings::pci_error_handlers {
        error_detected: Some(Self::error_detected_callback),
        mmio_enabled: Some(Self::mmio_enabled_callback),
        slot_reset: Some(Self::slot_reset_callback),
        reset_prepare: Some(Self::reset_prepare_callback),
        reset_done: Some(Self::reset_done_callback),
        resume: Some(Self::resume_callback),
        cor_error_detected: None,
    };

    /// Runs `f` with the bound device `pdev` and its driver's data, for a callback the PCI core
    /// makes on a bound device besides probe and remove.
    ///
    /// # Safety
    ///
    /// `pdev` must be a valid `pci_dev` bound to this driver (its probe succeeded, its remove
    /// has not run), whose device lock the caller holds for the whole call.
    unsafe fn with_bound<R>(
        pdev: *mut bindings::pci_dev,
        f: impl FnOnce(&Device<Core>, &T::Data) -> R,
    ) -> R {
        // SAFETY: `pdev` is valid and its device lock held (the safety requirements), which is
        // what `Core` promises for the reference's lifetime, this call.
        let dev = unsafe { Device::<Core>::from_raw(pdev) };
        // SAFETY: The device is bound to us, so drvdata holds what `probe_in_binding` returned for
        // this binding; the device lock keeps `remove_callback` from taking it back meanwhile.
        unsafe {
            crate::devres::with_binding_data::<T::Data, R>(
                bindings::pci_get_drvdata(pdev),
                |data| f(dev, data),
            )
        }
    }

    extern "C" fn error_detected_callback(
        pdev: *mut bindings::pci_dev,
        state: bindings::pci_channel_state_t,
    ) -> bindings::pci_ers_result_t {
        // SAFETY: The AER core calls error handlers on a bound device, under its device lock.
        unsafe {
            Self::with_bound(pdev, |dev, data| {
                T::error_detected(dev, data, Channel::from_raw(state))
            })
        }
        .to_raw()
    }

    extern "C" fn mmio_enabled_callback(
        pdev: *mut bindings::pci_dev,
    ) -> bindings::pci_ers_result_t {
        // SAFETY: As for `error_detected_callback`.
        unsafe { Self::with_bound(pdev, T::mmio_enabled) }.to_raw()
    }

    extern "C" fn slot_reset_callback(pdev: *mut bindings::pci_dev) -> bindings::pci_ers_result_t {
        // A slot or bus reset (the AER core's, for a frozen link) leaves config space at its
        // power-on values and restores nothing: put back what probe left, so that the driver
        // finds its BARs decoding, bus mastering and MSI as before, and keep it for next time.
        // SAFETY: `pdev` is valid, under its device lock (the AER core's).
        unsafe {
            bindings::pci_restore_state(pdev);
            bindings::pci_save_state(pdev);
        }
        // SAFETY: As for `error_detected_callback`.
        unsafe { Self::with_bound(pdev, T::slot_reset) }.to_raw()
    }

    extern "C" fn resume_callback(pdev: *mut bindings::pci_dev) {
        // SAFETY: As for `error_detected_callback`.
        unsafe { Self::with_bound(pdev, T::resume) }
    }

    extern "C" fn reset_prepare_callback(pdev: *mut bindings::pci_dev) {
        // SAFETY: The PCI core calls it (`pci_dev_save_and_disable`) only with a driver bound,
        // under the device lock (`pci_dev_lock`, `pci_bus_lock`).
        unsafe { Self::with_bound(pdev, T::reset_prepare) }
    }

    extern "C" fn reset_done_callback(pdev: *mut bindings::pci_dev) {
        // SAFETY: As for `reset_prepare_callback` (`pci_dev_restore`).
        unsafe { Self::with_bound(pdev, T::reset_done) }
    }

    extern "C" fn shutdown_callback(pdev: *mut bindings::pci_dev) {
        // SAFETY: `device_shutdown` calls the bus's shutdown under the device lock, and the PCI
        // bus calls the driver's only while it is bound.
        unsafe { Self::with_bound(pdev, T::shutdown) };
        // SAFETY: `pdev` is valid and its device lock held, as above.
        unsafe { quiesce(pdev) };
    }

    /// The info for the id the PCI core matched `pdev` with.
    ///
    /// An id of our table gives its own entry's. Any other id is a dynamic one (`new_id`, whose
    /// `driver_data` is ignored) or `driver_override`'s catch-all: they give the info of the first
    /// entry of our table that matches the device itself, and none if no entry does.
    fn id_info(
        pdev: &Device<Core>,
        id: *const bindings::pci_device_id,
    ) -> Option<&'static T::IdInfo> {
        let table = T::ID_TABLE;
        let index = table.index_of(id.cast()).or_else(|| {
            // SAFETY: The table is a sentinel-terminated array of `pci_device_id` (`DeviceId` is
            // transparent) and `pdev` a valid device; the result is null or points into the table.
            let own = unsafe { bindings::pci_match_id(table.as_ptr().cast(), pdev.as_raw()) };
            table.index_of(own.cast())
        })?;
        table.info(index)
    }

    extern "C" fn probe_callback(
        pdev: *mut bindings::pci_dev,
        id: *const bindings::pci_device_id,
    ) -> c_int {
        // SAFETY: The PCI core calls probe with a valid device, under its device lock; the device
        // stays bound to us until `remove_callback` (or not at all if we fail), and the
        // reference lives only during this call.
        let dev = unsafe { Device::<Core>::from_raw(pdev) };
        let Some(info) = Self::id_info(dev, id) else {
            return ENODEV.to_errno();
        };
        match crate::devres::probe_in_binding(dev.as_ref(), || T::probe(dev, info)) {
            Ok(data) => {
                // SAFETY: `pdev` is valid; drvdata is ours while bound and is taken back in
                // `remove_callback`.
                unsafe { bindings::pci_set_drvdata(pdev, data.cast_mut()) };
                if T::ERROR_RECOVERY {
                    // The config space as probe left it (bus mastering, MSI), which
                    // `slot_reset_callback` restores after a reset.
                    // SAFETY: `pdev` is valid, under its device lock.
                    unsafe { bindings::pci_save_state(pdev) };
                }
                if let Some(ms) = T::AUTOSUSPEND_DELAY_MS {
                    let dev = dev.as_ref().as_raw();
                    // The device may sleep from now on: drvdata is set. Gives back the usage
                    // count `local_pci_probe` took; `remove_callback` takes it again.
                    // SAFETY: `dev` is valid, under its device lock; the count is the PCI
                    // core's, held since before probe.
                    unsafe {
                        bindings::pm_runtime_set_autosuspend_delay(
                            dev,
                            ms.try_into().unwrap_or(i32::MAX),
                        );
                        bindings::pm_runtime_use_autosuspend(dev);
                        bindings::pm_runtime_put_noidle(dev);
                    }
                }
                0
            }
            Err(errno) => {
                // SAFETY: The PCI core calls probe with a valid device, under its device lock.
                unsafe { quiesce(pdev) };
                errno
            }
        }
    }

    extern "C" fn remove_callback(pdev: *mut bindings::pci_dev) {
        // SAFETY: The PCI core calls remove with a valid device bound to this driver, under its
        // device lock; the binding ends only below, after the reference's last use.
        let dev = unsafe { Device::<Core>::from_raw(pdev) };
        if T::AUTOSUSPEND_DELAY_MS.is_some() {
            // The usage count `probe_callback` gave back; the PCI core woke the device and
            // holds its own count across remove, and gives back `local_pci_probe`'s after it.
            // SAFETY: `dev` is valid, under its device lock.
            unsafe { bindings::pm_runtime_get_noresume(dev.as_ref().as_raw()) };
        }
        // SAFETY: `pdev` is valid; `probe_callback` succeeded (else there is no remove), so
        // drvdata holds what `probe_in_binding` returned for this binding, taken back only here.
        unsafe {
            crate::devres::remove_binding::<T::Data>(
                dev.as_ref(),
                bindings::pci_get_drvdata(pdev),
                |data| T::remove(dev, data),
            )
        };
        if T::AUTOSUSPEND_DELAY_MS.is_some() {
            // SAFETY: `dev` is valid, under its device lock; probe turned autosuspend on.
            unsafe { bindings::pm_runtime_dont_use_autosuspend(dev.as_ref().as_raw()) };
        }
        // SAFETY: The PCI core calls remove with a valid device, under its device lock.
        unsafe { quiesce(pdev) };
    }
}

/// Declares a module that registers one PCI [`Driver`].
///
/// Takes the fields of [`module!`](crate::prelude::module), where `type` is the driver.
///
/// # Examples
///
/// ```ignore
/// kernel::module_pci_driver! {
///     type: MyDriver,
///     name: "my_pci_driver",
///     author: "Someone",
///     description: "Drives my device",
///     license: "GPL",
/// }
/// ```
#[macro_export]
macro_rules! module_pci_driver {
    (type: $type:ty, $($f:tt)*) => {
        $crate::module_driver!($crate::pci::Adapter<$type>, { type: $type, $($f)* });
    };
}

/// A PCI device (C's `struct pci_dev`), in a [`DeviceContext`]: [`Normal`] (the default),
/// [`Bound`] or [`Core`], as for [`device::Device`].
///
/// A driver's [`Driver::probe`] and [`Driver::remove`] get a `&Device<Core>`: it can enable the
/// device and map its BARs. Kept beyond the callback (an [`ARef<Device>`]), the device is only
/// `Normal`: it can be named and printed, and no longer mapped.
///
/// # Invariants
///
/// A `Device` is a valid `struct pci_dev`, reference-counted: `pci_dev_get` keeps it alive until
/// the matching `pci_dev_put`. A `&Device<Ctx>` also keeps the promise of `Ctx` for its borrow.
///
/// # Examples
///
/// ```
/// fn describe(pdev: &kernel::pci::Device) {
///     kernel::dev_info!(pdev, "{:04x}:{:04x}\n", pdev.vendor_id(), pdev.device_id());
/// }
/// ```
#[repr(transparent)]
pub struct Device<Ctx: DeviceContext = Normal>(Opaque<bindings::pci_dev>, PhantomData<Ctx>);

// SAFETY: A `struct pci_dev` may be used and released from any thread.
unsafe impl Send for Device {}

// SAFETY: The methods taking `&self` use C functions that do their own locking, or read fields
// fixed at enumeration.
unsafe impl Sync for Device {}

// SAFETY: `pci_dev_get`/`pci_dev_put` count references of the embedded `struct device`, which
// keeps the `pci_dev` alive.
unsafe impl crate::types::AlwaysRefCounted for Device {
    fn inc_ref(&self) {
        // SAFETY: `&self` shows the count is not zero.
        unsafe { bindings::pci_dev_get(self.as_raw()) };
    }

    unsafe fn dec_ref(obj: NonNull<Self>) {
        // SAFETY: The caller gives up one reference it owns.
        unsafe { bindings::pci_dev_put(obj.cast().as_ptr()) }
    }
}

crate::driver::bus_device_contexts!(Device, bindings::pci_dev);

/// Disables the device on unbind; registered by [`Device::enable_device_mem`].
///
/// # Safety
///
/// `pdev` must be a `struct pci_dev` that was enabled once for this call.
unsafe extern "C" fn disable_device_action(pdev: *mut c_void) {
    // SAFETY: By the safety requirements, `pdev` is a valid, enabled `pci_dev`.
    unsafe { bindings::pci_disable_device(pdev.cast()) }
}

impl<Ctx: DeviceContext> Device<Ctx> {
    /// The PCI device that `dev` is, if it is one (in the same context).
    ///
    /// # Examples
    ///
    /// ```
    /// use kernel::{device, pci};
    /// fn vendor(dev: &device::Device<device::Bound>) -> Option<u16> {
    ///     pci::Device::from_device(dev).map(|p| p.vendor_id())
    /// }
    /// ```
    pub fn from_device(dev: &device::Device<Ctx>) -> Option<&Self> {
        // SAFETY: `dev` is valid; `bus` is set when the device is added and not changed.
        let bus = unsafe { (*dev.as_raw()).bus };
        if !core::ptr::eq(bus, core::ptr::addr_of!(bindings::pci_bus_type)) {
            return None;
        }
        // SAFETY: A device on the PCI bus is the `dev` field of a `struct pci_dev`, valid as long
        // as `dev` and in its context.
        Some(unsafe {
            Self::from_raw(crate::container_of!(dev.as_raw(), bindings::pci_dev, dev).cast_mut())
        })
    }
}

impl Device {
    /// Returns the vendor id.
    ///
    /// # Examples
    ///
    /// ```
    /// fn is_redhat(pdev: &kernel::pci::Device) -> bool {
    ///     pdev.vendor_id() == 0x1b36
    /// }
    /// ```
    pub fn vendor_id(&self) -> u16 {
        // SAFETY: `self` is a valid `pci_dev`; `vendor` is set at enumeration and not changed.
        unsafe { (*self.as_raw()).vendor }
    }

    /// Returns the device id.
    ///
    /// # Examples
    ///
    /// ```
    /// fn is_testdev(pdev: &kernel::pci::Device) -> bool {
    ///     pdev.device_id() == 0x0005
    /// }
    /// ```
    pub fn device_id(&self) -> u16 {
        // SAFETY: `self` is a valid `pci_dev`; `device` is set at enumeration and not changed.
        unsafe { (*self.as_raw()).device }
    }

    fn check_bar(bar: u32) -> Result<c_int> {
        if bar < STD_NUM_BARS {
            // Cannot truncate: `bar < 6`.
            Ok(bar as c_int)
        } else {
            Err(EINVAL)
        }
    }

    /// Returns the length of BAR `bar` in bytes (0 if it is not implemented); `EINVAL` if `bar`
    /// is not 0 to 5.
    ///
    /// # Examples
    ///
    /// ```
    /// fn bar0_len(pdev: &kernel::pci::Device) -> Result<u64> {
    ///     pdev.resource_len(0)
    /// }
    /// ```
    pub fn resource_len(&self, bar: u32) -> Result<u64> {
        let bar = Self::check_bar(bar)?;
        // SAFETY: `self` is a valid `pci_dev` and `bar` a valid resource index.
        let len = unsafe { bindings::pci_resource_len(self.as_raw(), bar) };
        // `resource_size_t` is `u64` or, on some 32-bit configurations, `u32`.
        #[allow(clippy::useless_conversion)]
        Ok(len.into())
    }

    fn is_mem_bar(&self, bar: c_int) -> bool {
        // SAFETY: `self` is a valid `pci_dev` and `bar` a valid resource index.
        let flags = unsafe { bindings::pci_resource_flags(self.as_raw(), bar) };
        // Lossless: the flag fits in any `c_ulong`.
        flags & (bindings::IORESOURCE_MEM as crate::ffi::c_ulong) != 0
    }
}

impl Device<Bound> {
    /// Whether the device still answers a config read of its vendor ID (and the PCI core has
    /// not marked it disconnected). A BAR read of all-ones means the device is gone or hung;
    /// this tells the two apart: a hung function still answers config space, a removed one
    /// does not. Reads config space, without sleeping: callable from any context.
    ///
    /// Only while bound: `pci_device_is_present` follows a virtual function's reference to its
    /// physical one (dropped when the VF is removed) and calls its host bridge's config
    /// accessors (gone with a removable bridge), and config space may be another driver's
    /// once the binding ended. A worker that holds only a [`Devres`] asks through
    /// [`Devres::try_access_bound`].
    ///
    /// # Examples
    ///
    /// ```
    /// fn gone(pdev: &kernel::pci::Device<kernel::device::Bound>, magic: u32) -> bool {
    ///     magic == u32::MAX && !pdev.is_present()
    /// }
    /// ```
    pub fn is_present(&self) -> bool {
        // SAFETY: `self` is a valid, bound `pci_dev`, so its PF, bus and host bridge are alive;
        // the function reads config space under the PCI core's spinlock, without sleeping.
        unsafe { bindings::pci_device_is_present(self.as_raw()) }
    }

    /// Requests and maps memory BAR `bar`, which must be at least `SIZE` bytes, under `name`.
    ///
    /// The mapping is revoked when the device is unbound; accessors with constant offsets are
    /// checked against `SIZE` at build time. Errors: `EINVAL` for a bad index, an I/O port BAR or
    /// a BAR smaller than `SIZE`; `ENOMEM` for an unimplemented BAR or a failed mapping; the
    /// PCI core's errno (e.g. `EBUSY`) if the region is taken.
    ///
    /// # Examples
    ///
    /// ```
    /// use kernel::{devres::Devres, pci::{Bar, Bound, Device}};
    ///
    /// fn map(pdev: &Device<Bound>) -> Result<Devres<Bar<0x1000>>> {
    ///     pdev.iomap_region_sized::<0x1000>(0, kernel::c_str!("my_driver"))
    /// }
    /// ```
    pub fn iomap_region_sized<const SIZE: usize>(
        &self,
        bar: u32,
        name: &'static CStr,
    ) -> Result<Devres<Bar<SIZE>>> {
        let bar = Bar::<SIZE>::new(self, bar, name)?;
        Devres::new(self.as_ref(), bar, GFP_KERNEL)
    }

    /// Requests and maps memory BAR `bar` of any size; offsets are then checked at run time
    /// (the `try_` accessors). See [`Device::iomap_region_sized`].
    ///
    /// # Examples
    ///
    /// ```
    /// use kernel::pci::{Bound, Device};
    ///
    /// fn first_word(pdev: &Device<Bound>) -> Result<u32> {
    ///     let bar = pdev.iomap_region(0, kernel::c_str!("my_driver"))?;
    ///     bar.access(pdev.as_ref())?.try_readl(0)
    /// }
    /// ```
    pub fn iomap_region(&self, bar: u32, name: &'static CStr) -> Result<Devres<Bar>> {
        self.iomap_region_sized::<0>(bar, name)
    }
}

/// Kinds of interrupt vectors to allocate (C's `PCI_IRQ_*`); combine with `|`, most preferred
/// first is the kernel's choice: MSI-X, then MSI, then INTx.
///
/// # Examples
///
/// ```
/// use kernel::pci::IrqTypes;
/// let either = IrqTypes::MSI | IrqTypes::INTX;
/// # let _ = either;
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IrqTypes(u32);

impl IrqTypes {
    /// The legacy pin interrupt (INTx), possibly shared.
    pub const INTX: IrqTypes = IrqTypes(bindings::PCI_IRQ_INTX);
    /// Message-signalled interrupts.
    pub const MSI: IrqTypes = IrqTypes(bindings::PCI_IRQ_MSI);
    /// MSI-X.
    pub const MSIX: IrqTypes = IrqTypes(bindings::PCI_IRQ_MSIX);
}

impl core::ops::BitOr for IrqTypes {
    type Output = IrqTypes;

    fn bitor(self, other: IrqTypes) -> IrqTypes {
        IrqTypes(self.0 | other.0)
    }
}

/// The devres release function of a binding's interrupt vectors: frees them. Made by
/// [`Device::alloc_irq_vectors`]; its presence on the device's list is what refuses a second
/// allocation in the same binding.
///
/// # Safety
///
/// `res` must be the data area of an entry made by `alloc_irq_vectors`, whose vectors the
/// binding's interrupts no longer use (they were freed when the binding ended).
unsafe extern "C" fn free_irq_vectors(_dev: *mut bindings::device, res: *mut c_void) {
    // SAFETY: By the safety requirements `res` holds the `pci_dev` whose vectors were allocated.
    unsafe { bindings::pci_free_irq_vectors(*res.cast::<*mut bindings::pci_dev>()) }
}

impl Device<Core> {
    /// Allocates between `min` and `max` interrupt vectors of the given kinds; returns how many.
    /// Once per binding (`EBUSY` after that), in probe or remove (where the device lock is
    /// held, and not from an interrupt handler). They are freed when the binding ends, after the
    /// interrupts requested on them.
    ///
    /// # Examples
    ///
    /// See [`irq`](crate::irq).
    ///
    /// ```
    /// use kernel::pci::{Core, Device, IrqTypes};
    /// fn one_vector(pdev: &Device<Core>) -> Result<u32> {
    ///     pdev.alloc_irq_vectors(1, 1, IrqTypes::MSI | IrqTypes::INTX)
    /// }
    /// ```
    pub fn alloc_irq_vectors(&self, min: u32, max: u32, types: IrqTypes) -> Result<u32> {
        let dev = self.as_ref();
        // SAFETY: `dev` is valid; with no match function `devres_find` returns any entry
        // released by `free_irq_vectors`, which only `alloc_irq_vectors` makes.
        let allocated = unsafe {
            bindings::devres_find(
                dev.as_raw(),
                Some(free_irq_vectors),
                None,
                core::ptr::null_mut(),
            )
        };
        if !allocated.is_null() {
            return Err(EBUSY);
        }
        let entry = crate::devres::Node::<*mut bindings::pci_dev>::alloc(
            free_irq_vectors,
            c"rust_pci_irq_vectors",
            GFP_KERNEL,
        )?;
        // SAFETY: `self` is a valid `pci_dev`; the device lock is held (`Core`), and none were
        // allocated in this binding.
        let n = unsafe { bindings::pci_alloc_irq_vectors(self.as_raw(), min, max, types.0) };
        if let Err(e) = to_result(n) {
            entry.free();
            return Err(e);
        }
        // SAFETY: `free_irq_vectors` reads the `pci_dev` and frees its vectors, once, when the
        // binding ends (devres releases after the binding's interrupts were freed).
        unsafe { entry.add(dev, self.as_raw()) };
        // Cannot wrap: `n` is positive.
        Ok(n as u32)
    }
}

impl Device<Bound> {
    /// For a shared INTx handler's hard half: whether this device asserts INTx; if so, masks it
    /// (command register) so the threaded half can run with the line unmasked for the others.
    ///
    /// # Examples
    ///
    /// ```
    /// fn mine(pdev: &kernel::pci::Device<kernel::pci::Bound>) -> bool {
    ///     pdev.check_and_mask_intx()
    /// }
    /// ```
    pub fn check_and_mask_intx(&self) -> bool {
        // SAFETY: `self` is a valid `pci_dev`; the function takes its own lock, from any context.
        unsafe { bindings::pci_check_and_mask_intx(self.as_raw()) }
    }

    /// Unmasks this device's INTx (after [`Device::check_and_mask_intx`]), unless it still
    /// asserts it; returns whether it unmasked.
    ///
    /// # Examples
    ///
    /// ```
    /// fn done(pdev: &kernel::pci::Device<kernel::pci::Bound>) {
    ///     pdev.check_and_unmask_intx();
    /// }
    /// ```
    pub fn check_and_unmask_intx(&self) -> bool {
        // SAFETY: `self` is a valid `pci_dev`; the function takes its own lock.
        unsafe { bindings::pci_check_and_unmask_intx(self.as_raw()) }
    }

    /// Whether the allocated vectors are MSI (else INTx).
    ///
    /// # Examples
    ///
    /// ```
    /// fn mode(pdev: &kernel::pci::Device<kernel::pci::Bound>) -> &'static str {
    ///     if pdev.msi_enabled() { "msi" } else { "intx" }
    /// }
    /// ```
    pub fn msi_enabled(&self) -> bool {
        // SAFETY: `self` is a valid `pci_dev`; the PCI core sets the bit when enabling MSI.
        unsafe { (*self.as_raw()).msi_enabled() != 0 }
    }

    /// Returns vector `index` (of those [`Device::alloc_irq_vectors`] allocated, or the INTx
    /// line as vector 0), borrowing this device: a handler can only be requested on it for this
    /// device, during this binding.
    ///
    /// # Examples
    ///
    /// ```
    /// fn first(pdev: &kernel::pci::Device<kernel::pci::Bound>) -> Result<u32> {
    ///     Ok(pdev.irq_vector(0)?.irq())
    /// }
    /// ```
    pub fn irq_vector(&self, index: u32) -> Result<IrqVector<'_>> {
        // SAFETY: `self` is a valid `pci_dev`.
        let irq = unsafe { bindings::pci_irq_vector(self.as_raw(), index) };
        to_result(irq)?;
        // SAFETY: `irq` is this device's: a vector `alloc_irq_vectors` allocated, freed only
        // after the binding's interrupts, or its INTx line, which lasts as long as the device.
        // Cannot wrap: `irq` is not negative.
        Ok(unsafe { IrqVector::new(self.as_ref(), irq as u32) })
    }

    /// Requests vector `index` for a hard-IRQ `handler` until the binding ends (see
    /// [`irq::request`](crate::irq::request)).
    ///
    /// # Examples
    ///
    /// ```
    /// use kernel::{device::{Bound, Device}, irq::{self, IrqReturn}, pci, sync::Arc};
    /// struct Quiet;
    /// impl irq::Handler for Quiet {
    ///     fn handle(&self, _dev: &Device<Bound>) -> IrqReturn {
    ///         IrqReturn::None
    ///     }
    /// }
    /// fn wire(pdev: &pci::Device<pci::Bound>) -> Result {
    ///     pdev.request_irq(0, irq::Flags::SHARED, kernel::c_str!("quiet"), Arc::new(Quiet, GFP_KERNEL)?)
    /// }
    /// ```
    pub fn request_irq<T: crate::irq::Handler>(
        &self,
        index: u32,
        flags: crate::irq::Flags,
        name: &'static CStr,
        handler: crate::sync::Arc<T>,
    ) -> Result {
        crate::irq::request(self.irq_vector(index)?, flags, name, handler)
    }

    /// Requests vector `index` for a threaded `handler` until the binding ends (see
    /// [`irq::request_threaded`](crate::irq::request_threaded)).
    ///
    /// # Examples
    ///
    /// See [`irq`](crate::irq).
    ///
    /// ```
    /// use kernel::{device::{Bound, Device}, irq::{self, IrqReturn}, pci, sync::Arc};
    /// struct Slow;
    /// impl irq::ThreadedHandler for Slow {
    ///     fn handle_threaded(&self, _dev: &Device<Bound>) -> IrqReturn {
    ///         IrqReturn::Handled
    ///     }
    /// }
    /// fn wire(pdev: &pci::Device<pci::Bound>) -> Result {
    ///     pdev.request_threaded_irq(0, irq::Flags::NONE, kernel::c_str!("slow"), Arc::new(Slow, GFP_KERNEL)?)
    /// }
    /// ```
    pub fn request_threaded_irq<T: crate::irq::ThreadedHandler>(
        &self,
        index: u32,
        flags: crate::irq::Flags,
        name: &'static CStr,
        handler: crate::sync::Arc<T>,
    ) -> Result {
        crate::irq::request_threaded(self.irq_vector(index)?, flags, name, handler)
    }
}

impl Device<Core> {
    /// Enables the device's memory space; it is disabled again when the device is unbound.
    ///
    /// # Examples
    ///
    /// ```
    /// fn start(pdev: &kernel::pci::Device<kernel::pci::Core>) -> Result {
    ///     pdev.enable_device_mem()?;
    ///     pdev.set_master();
    ///     Ok(())
    /// }
    /// ```
    pub fn enable_device_mem(&self) -> Result {
        // SAFETY: `self` is a valid `pci_dev`.
        to_result(unsafe { bindings::pci_enable_device_mem(self.as_raw()) })?;
        // SAFETY: The device is valid and was just enabled once; the action disables it once,
        // on unbind, while the device is still valid. On failure the helper runs the action
        // right away.
        to_result(unsafe {
            bindings::devm_add_action_or_reset(
                self.as_ref().as_raw(),
                Some(disable_device_action),
                self.as_raw().cast(),
            )
        })
    }

    /// Enables bus mastering (DMA) for the device; disabling the device turns it off again.
    ///
    /// # Examples
    ///
    /// See [`Device::enable_device_mem`].
    ///
    /// ```
    /// fn dma_on(pdev: &kernel::pci::Device<kernel::pci::Core>) {
    ///     pdev.set_master();
    /// }
    /// ```
    pub fn set_master(&self) {
        // SAFETY: `self` is a valid `pci_dev`.
        unsafe { bindings::pci_set_master(self.as_raw()) };
    }

    /// Disables bus mastering: the device can no longer reach memory. The PCI adapter also does
    /// it when the binding ends, before the binding's DMA memory is given back (see
    /// [`dma`](crate::dma)).
    ///
    /// # Examples
    ///
    /// ```
    /// fn dma_off(pdev: &kernel::pci::Device<kernel::pci::Core>) {
    ///     pdev.clear_master();
    /// }
    /// ```
    pub fn clear_master(&self) {
        // SAFETY: `self` is a valid `pci_dev`.
        unsafe { bindings::pci_clear_master(self.as_raw()) };
    }

    /// Sets the mask of the bus addresses the device can reach with streaming DMA mappings
    /// (see [`device::Device::dma_set_mask`]).
    ///
    /// # Examples
    ///
    /// ```
    /// use kernel::{dma::DmaMask, pci};
    /// fn narrow(pdev: &pci::Device<pci::Core>) -> Result {
    ///     pdev.dma_set_mask(DmaMask::new::<32>())
    /// }
    /// ```
    pub fn dma_set_mask(&self, mask: crate::dma::DmaMask) -> Result {
        self.as_ref().dma_set_mask(mask)
    }

    /// Sets the mask of the bus addresses the device can reach with streaming mappings and
    /// coherent allocations (see [`device::Device::dma_set_mask_and_coherent`]).
    ///
    /// # Examples
    ///
    /// ```
    /// use kernel::{dma::DmaMask, pci};
    /// fn edu(pdev: &pci::Device<pci::Core>) -> Result {
    ///     pdev.dma_set_mask_and_coherent(DmaMask::new::<28>())
    /// }
    /// ```
    pub fn dma_set_mask_and_coherent(&self, mask: crate::dma::DmaMask) -> Result {
        self.as_ref().dma_set_mask_and_coherent(mask)
    }
}

/// Turns bus mastering off once a binding has ended in a bus callback (its interrupts freed, its
/// `Devres` values refused): the devres releases that follow give the binding's DMA memory back
/// (see [`dma`](crate::dma)), which the device must no longer reach. Whoever turned it on: the
/// driver, or user space through config space behind the PCI core's back.
///
/// # Safety
///
/// `pdev` must be a valid `pci_dev` whose device lock the caller holds.
unsafe fn quiesce(pdev: *mut bindings::pci_dev) {
    // SAFETY: `pdev` is valid; the device lock (which `pci_set_master` callers hold too) keeps
    // another binding from beginning meanwhile.
    unsafe { bindings::pci_clear_master(pdev) };
}

/// A requested and mapped memory BAR of at least `SIZE` bytes; derefs to [`Io`]`<SIZE>`.
///
/// Unmaps and releases the region when dropped. Drivers get it inside a [`Devres`] from
/// [`Device::iomap_region_sized`], so it cannot outlive the driver's binding.
///
/// # Invariants
///
/// `io` describes the mapping of BAR `num` of `pdev` made by `pci_iomap`, whose region this
/// object requested; both stay until `drop`.
///
/// # Examples
///
/// ```
/// use kernel::{devres::Devres, pci::Bar};
///
/// fn ring_doorbell(bar: &Devres<Bar<0x1000>>) -> Result {
///     let io = bar.try_access().ok_or(ENXIO)?;
///     io.writel(1, 0x40);
///     Ok(())
/// }
/// ```
pub struct Bar<const SIZE: usize = 0> {
    pdev: ARef<Device>,
    io: IoRaw<SIZE>,
    num: c_int,
}

impl<const SIZE: usize> Bar<SIZE> {
    fn new(pdev: &Device<Bound>, num: u32, name: &'static CStr) -> Result<Self> {
        let num = Device::check_bar(num)?;
        if !pdev.is_mem_bar(num) {
            return Err(EINVAL);
        }
        // SAFETY: `pdev` is a valid `pci_dev` and `num` a valid resource index.
        let len = unsafe { bindings::pci_resource_len(pdev.as_raw(), num) };
        if len == 0 {
            return Err(ENOMEM);
        }
        let len = usize::try_from(len).map_err(|_| EINVAL)?;
        // SAFETY: `pdev` is valid; `name` is `'static`, as the resource keeps the pointer.
        to_result(unsafe { bindings::pci_request_region(pdev.as_raw(), num, name.as_char_ptr()) })?;
        // SAFETY: `pdev` is valid and the region is ours.
        let addr = unsafe { bindings::pci_iomap(pdev.as_raw(), num, 0) };
        if addr.is_null() {
            // SAFETY: The region was requested just above.
            unsafe { bindings::pci_release_region(pdev.as_raw(), num) };
            return Err(ENOMEM);
        }
        match IoRaw::new(addr as usize, len) {
            // INVARIANT: `io` describes the mapping just made of the region just requested.
            Ok(io) => Ok(Self {
                pdev: pdev.into(),
                io,
                num,
            }),
            Err(err) => {
                // SAFETY: The mapping and the region were made just above.
                unsafe {
                    bindings::pci_iounmap(pdev.as_raw(), addr);
                    bindings::pci_release_region(pdev.as_raw(), num);
                }
                Err(err)
            }
        }
    }

    /// Returns the BAR's index.
    ///
    /// # Examples
    ///
    /// ```
    /// fn which(bar: &kernel::pci::Bar<4>) -> u32 {
    ///     bar.index()
    /// }
    /// ```
    pub fn index(&self) -> u32 {
        // Cannot wrap: `num` is 0 to 5.
        self.num as u32
    }
}

impl<const SIZE: usize> Drop for Bar<SIZE> {
    fn drop(&mut self) {
        // SAFETY: By the type invariant the mapping and the region are ours and still there.
        unsafe {
            bindings::pci_iounmap(self.pdev.as_raw(), self.io.addr() as *mut c_void);
            bindings::pci_release_region(self.pdev.as_raw(), self.num);
        }
    }
}

impl<const SIZE: usize> Deref for Bar<SIZE> {
    type Target = Io<SIZE>;

    #[inline]
    fn deref(&self) -> &Io<SIZE> {
        // SAFETY: By the type invariant `io` is a mapping of `maxsize` bytes valid while `self`.
        unsafe { Io::from_raw(&self.io) }
    }
}
