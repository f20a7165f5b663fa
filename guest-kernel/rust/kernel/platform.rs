// SPDX-License-Identifier: GPL-2.0

//! Platform devices and drivers, matched by device-tree `compatible` strings.
//!
//! The second bus on the same driver core as [`pci`](crate::pci): a driver implements [`Driver`]
//! (its OF match table, the info attached to each entry, its per-device data, `probe` and
//! `remove`) and declares its module with [`module_platform_driver!`](crate::module_platform_driver),
//! or keeps a [`driver::Registration`](crate::driver::Registration) of [`Adapter`] itself. Probe
//! gets a `&Device<Core>`; a memory resource of the device is mapped only on a
//! `&Device<Bound>`, as a [`Devres`]`<`[`IoMem`]`>` that is revoked when the binding ends. A
//! driver needs no `unsafe`.
//!
//! C header: [`include/linux/platform_device.h`](srctree/include/linux/platform_device.h)
//!
//! # Examples
//!
//! A driver whose table matches no node: registering and dropping the registration goes through
//! the platform bus (`__platform_driver_register`, `platform_driver_unregister`) and never
//! probes.
//!
//! ```
//! use core::sync::atomic::{AtomicU32, Ordering};
//! use kernel::{c_str, driver::Registration, of, platform};
//!
//! static PROBES: AtomicU32 = AtomicU32::new(0);
//!
//! struct Nobody;
//!
//! kernel::of_device_table!(NOBODY_IDS, (), [
//!     (of::DeviceId::new(c_str!("pci-rig,no-such-node")), ()),
//! ]);
//!
//! impl platform::Driver for Nobody {
//!     type IdInfo = ();
//!     const OF_ID_TABLE: of::IdTable<()> = NOBODY_IDS;
//!     type Data = ();
//!
//!     fn probe(_pdev: &platform::Device<platform::Core>, _info: &()) -> Result {
//!         PROBES.fetch_add(1, Ordering::SeqCst);
//!         Ok(())
//!     }
//! }
//!
//! // SAFETY: Built-in code has no module of its own; null is what it uses.
//! static MODULE: ThisModule = unsafe { ThisModule::from_ptr(core::ptr::null_mut()) };
//!
//! for _ in 0..2 {
//!     let reg = KBox::pin_init(
//!         Registration::<platform::Adapter<Nobody>>::new(c_str!("rust_doctest_platform"), &MODULE),
//!         GFP_KERNEL,
//!     )?;
//!     drop(reg);
//! }
//! assert_eq!(PROBES.load(Ordering::SeqCst), 0);
//! # Ok::<(), Error>(())
//! ```

use crate::{
    alloc::flags::GFP_KERNEL,
    bindings,
    device::{self, DeviceContext},
    devres::Devres,
    driver,
    error::{
        code::{EBUSY, EINVAL, ENODEV, ENOMEM},
        to_result, Result,
    },
    ffi::c_int,
    io::{Io, IoRaw},
    irq::IrqVector,
    of,
    str::CStr,
    types::{ARef, Opaque},
    ThisModule,
};
use core::{marker::PhantomData, ops::Deref, ptr::NonNull};

pub use crate::device::{Bound, Core, Normal};

/// A platform driver, matching device-tree nodes by `compatible`.
///
/// # Examples
///
/// See the [module documentation](self).
///
/// ```
/// use kernel::{c_str, of, platform};
///
/// struct Nop;
///
/// kernel::of_device_table!(NOP_IDS, u8, [(of::DeviceId::new(c_str!("pci-rig,nop")), 7)]);
///
/// impl platform::Driver for Nop {
///     type IdInfo = u8;
///     const OF_ID_TABLE: of::IdTable<u8> = NOP_IDS;
///     type Data = ();
///
///     fn probe(pdev: &platform::Device<platform::Core>, info: &u8) -> Result {
///         kernel::dev_info!(pdev, "matched entry with info {}\n", info);
///         Ok(())
///     }
/// }
/// ```
pub trait Driver {
    /// The info attached to each OF table entry, passed to [`Driver::probe`].
    type IdInfo: 'static;

    /// The device-tree ids this driver binds to.
    const OF_ID_TABLE: of::IdTable<Self::IdInfo>;

    /// The per-device data returned by probe, dropped after [`Driver::remove`].
    type Data: Send + Sync + 'static;

    /// Binds the driver to `pdev`, whose node matched the entry whose info is `info`.
    ///
    /// Returning an error fails the bind with that error's errno; what was set up through
    /// [`Devres`] is undone.
    fn probe(pdev: &Device<Core>, info: &Self::IdInfo) -> Result<Self::Data>;

    /// Unbinds the driver from `pdev`; `data` is dropped after this returns, then the device's
    /// [`Devres`] values are revoked.
    fn remove(pdev: &Device<Core>, data: &Self::Data) {
        let _ = (pdev, data);
    }
}

/// Registers a [`Driver`] with the platform bus: the [`driver::RegistrationOps`] of platform.
///
/// # Examples
///
/// ```
/// # fn f<T: kernel::platform::Driver + 'static>(module: &'static ThisModule) -> Result {
/// use kernel::{driver::Registration, platform};
/// let _reg = KBox::pin_init(
///     Registration::<platform::Adapter<T>>::new(kernel::c_str!("my_driver"), module),
///     GFP_KERNEL,
/// )?;
/// # Ok(()) }
/// ```
pub struct Adapter<T: Driver>(PhantomData<T>);

// SAFETY: `register` leaves the driver registered only when `__platform_driver_register`
// succeeds, and `platform_driver_unregister` unbinds all devices and removes the driver, after
// which the driver core no longer uses it.
unsafe impl<T: Driver + 'static> driver::RegistrationOps for Adapter<T> {
    type RegType = bindings::platform_driver;

    unsafe fn register(
        reg: &Opaque<bindings::platform_driver>,
        name: &'static CStr,
        module: &'static ThisModule,
    ) -> Result {
        let pdrv = reg.get();
        // SAFETY: `pdrv` is valid, zeroed and not registered (the caller's promise), so we may
        // fill it in; the OF table is a `'static` sentinel-terminated array of `of_device_id`
        // (`of::DeviceId` is transparent); `name` is `'static`.
        unsafe {
            (*pdrv).driver.name = name.as_char_ptr();
            (*pdrv).probe = Some(Self::probe_callback);
            (*pdrv).__bindgen_anon_1.remove = Some(Self::remove_callback);
            (*pdrv).driver.of_match_table = T::OF_ID_TABLE.as_ptr().cast();
        }
        // SAFETY: `pdrv` is filled in and pinned; `module` is this code's module.
        to_result(unsafe { bindings::__platform_driver_register(pdrv, module.as_ptr()) })
    }

    unsafe fn unregister(reg: &Opaque<bindings::platform_driver>) {
        // SAFETY: The caller promises that `reg` was registered and not unregistered since.
        unsafe { bindings::platform_driver_unregister(reg.get()) }
    }
}

impl<T: Driver + 'static> Adapter<T> {
    /// The info of the first entry of our table that matches `pdev`'s node, if any (a device
    /// bound through `driver_override` may match none: then there is no info to give).
    fn id_info(pdev: &Device<Core>) -> Option<&'static T::IdInfo> {
        let table = T::OF_ID_TABLE;
        // SAFETY: The table is a sentinel-terminated array of `of_device_id` (`of::DeviceId` is
        // transparent) and `pdev` a valid device; the result is null or points into the table.
        let id =
            unsafe { bindings::of_match_device(table.as_ptr().cast(), pdev.as_ref().as_raw()) };
        table.info(table.index_of(id.cast())?)
    }

    extern "C" fn probe_callback(pdev: *mut bindings::platform_device) -> c_int {
        // SAFETY: The driver core calls probe with a valid device, under its device lock; the
        // device stays bound to us until `remove_callback` (or not at all if we fail), and the
        // reference lives only during this call.
        let dev = unsafe { Device::<Core>::from_raw(pdev) };
        let Some(info) = Self::id_info(dev) else {
            return ENODEV.to_errno();
        };
        match crate::devres::probe_in_binding(dev.as_ref(), || T::probe(dev, info)) {
            Ok(data) => {
                // SAFETY: `pdev` is valid; drvdata is ours while bound and is taken back in
                // `remove_callback`.
                unsafe { bindings::platform_set_drvdata(pdev, data.cast_mut()) };
                0
            }
            Err(errno) => errno,
        }
    }

    extern "C" fn remove_callback(pdev: *mut bindings::platform_device) {
        // SAFETY: The driver core calls remove with a valid device bound to this driver, under
        // its device lock; the binding ends only below, after the reference's last use.
        let dev = unsafe { Device::<Core>::from_raw(pdev) };
        // SAFETY: `pdev` is valid; `probe_callback` succeeded (else there is no remove), so
        // drvdata holds what `probe_in_binding` returned for this binding, taken back only here.
        unsafe {
            crate::devres::remove_binding::<T::Data>(
                dev.as_ref(),
                bindings::platform_get_drvdata(pdev),
                |data| T::remove(dev, data),
            )
        };
    }
}

/// Declares a module that registers one platform [`Driver`].
///
/// Takes the fields of [`module!`](crate::prelude::module), where `type` is the driver.
///
/// # Examples
///
/// ```ignore
/// kernel::module_platform_driver! {
///     type: MyDriver,
///     name: "my_platform_driver",
///     author: "Someone",
///     description: "Drives my device-tree node",
///     license: "GPL",
/// }
/// ```
#[macro_export]
macro_rules! module_platform_driver {
    (type: $type:ty, $($f:tt)*) => {
        $crate::module_driver!($crate::platform::Adapter<$type>, { type: $type, $($f)* });
    };
}

/// A platform device (C's `struct platform_device`), in a [`DeviceContext`]: [`Normal`] (the
/// default), [`Bound`] or [`Core`], as for [`device::Device`].
///
/// A driver's [`Driver::probe`] and [`Driver::remove`] get a `&Device<Core>`; a `&Device<Bound>`
/// (what `Core` derefs to) can map the device's memory resources. Kept beyond the callback (an
/// [`ARef<Device>`]) the device is only `Normal`: it can be named and printed, not mapped.
///
/// # Invariants
///
/// A `Device` is a valid `struct platform_device`, reference-counted through its embedded
/// `struct device`. A `&Device<Ctx>` also keeps the promise of `Ctx` for its borrow.
///
/// # Examples
///
/// ```
/// fn describe(pdev: &kernel::platform::Device) {
///     kernel::dev_info!(pdev, "{} memory resource(s)\n", pdev.num_resources());
/// }
/// ```
#[repr(transparent)]
pub struct Device<Ctx: DeviceContext = Normal>(Opaque<bindings::platform_device>, PhantomData<Ctx>);

// SAFETY: A `struct platform_device` may be used and released from any thread.
unsafe impl Send for Device {}

// SAFETY: The methods taking `&self` read fields fixed when the device was added, or call C
// functions that do their own locking.
unsafe impl Sync for Device {}

// SAFETY: `get_device`/`platform_device_put` count references of the embedded `struct device`,
// which keeps the `platform_device` alive.
unsafe impl crate::types::AlwaysRefCounted for Device {
    fn inc_ref(&self) {
        // SAFETY: `&self` shows the count is not zero.
        unsafe { bindings::get_device(self.as_ref().as_raw()) };
    }

    unsafe fn dec_ref(obj: NonNull<Self>) {
        // SAFETY: The caller gives up one reference it owns.
        unsafe { bindings::platform_device_put(obj.cast().as_ptr()) }
    }
}

crate::driver::bus_device_contexts!(Device, bindings::platform_device);

impl Device {
    /// Returns how many resources (memory, interrupts, ...) the device has.
    ///
    /// # Examples
    ///
    /// ```
    /// fn has_any(pdev: &kernel::platform::Device) -> bool {
    ///     pdev.num_resources() > 0
    /// }
    /// ```
    pub fn num_resources(&self) -> u32 {
        // SAFETY: `self` is a valid `platform_device`; `num_resources` is set when it is made.
        unsafe { (*self.as_raw()).num_resources }
    }

    /// Returns the start and length of the device's memory resource `index` (counting memory
    /// resources only), or `ENODEV` if it has no such resource.
    ///
    /// # Examples
    ///
    /// ```
    /// fn first_window(pdev: &kernel::platform::Device) -> Result<(u64, u64)> {
    ///     pdev.mem_resource(0)
    /// }
    /// ```
    pub fn mem_resource(&self, index: u32) -> Result<(u64, u64)> {
        // SAFETY: `self` is a valid `platform_device`; the result is null or points to one of
        // its resources, which live as long as it.
        let res = unsafe {
            bindings::platform_get_resource(self.as_raw(), bindings::IORESOURCE_MEM, index)
        };
        if res.is_null() {
            return Err(ENODEV);
        }
        // SAFETY: `res` is a valid resource of the device, see above.
        let (start, len) = unsafe { ((*res).start, bindings::resource_size(res)) };
        // `resource_size_t` is `u64` or, on some 32-bit configurations, `u32`.
        #[allow(clippy::useless_conversion)]
        Ok((start.into(), len.into()))
    }
}

impl Device<Bound> {
    /// Requests and maps memory resource `index`, which must be at least `SIZE` bytes, under
    /// `name`; revoked when the binding ends.
    ///
    /// Accessors with constant offsets are checked against `SIZE` at build time. Errors: `ENODEV`
    /// if there is no such resource, `EINVAL` if it is smaller than `SIZE`, `EBUSY` if the
    /// region is taken, `ENOMEM` if it cannot be mapped.
    ///
    /// # Examples
    ///
    /// ```
    /// use kernel::{devres::Devres, platform::{Bound, Device, IoMem}};
    ///
    /// fn map(pdev: &Device<Bound>) -> Result<Devres<IoMem<0x100>>> {
    ///     pdev.ioremap_resource_sized::<0x100>(0, kernel::c_str!("my_driver"))
    /// }
    /// ```
    pub fn ioremap_resource_sized<const SIZE: usize>(
        &self,
        index: u32,
        name: &'static CStr,
    ) -> Result<Devres<IoMem<SIZE>>> {
        let (start, len) = self.mem_resource(index)?;
        let io = IoMem::<SIZE>::new(start, len, name)?;
        Devres::new(self.as_ref(), io, GFP_KERNEL)
    }

    /// Requests and maps memory resource `index` of any size; offsets are then checked at run
    /// time (the `try_` accessors). See [`Device::ioremap_resource_sized`].
    ///
    /// # Examples
    ///
    /// ```
    /// use kernel::platform::{Bound, Device};
    ///
    /// fn first_word(pdev: &Device<Bound>) -> Result<u32> {
    ///     let io = pdev.ioremap_resource(0, kernel::c_str!("my_driver"))?;
    ///     io.access(pdev.as_ref())?.try_readl(0)
    /// }
    /// ```
    pub fn ioremap_resource(&self, index: u32, name: &'static CStr) -> Result<Devres<IoMem>> {
        self.ioremap_resource_sized::<0>(index, name)
    }

    /// Returns interrupt `index` of the device (its device-tree `interrupts`, mapped by the
    /// platform core), borrowing this device: a handler can only be requested on it for this
    /// device, during this binding. `ENXIO` (or the core's error) if there is none.
    ///
    /// # Examples
    ///
    /// ```
    /// use kernel::{device::{Bound, Device}, irq::{self, IrqReturn}, platform, sync::Arc};
    /// struct Tick;
    /// impl irq::Handler for Tick {
    ///     fn handle(&self, _dev: &Device<Bound>) -> IrqReturn {
    ///         IrqReturn::Handled
    ///     }
    /// }
    /// fn wire(pdev: &platform::Device<platform::Bound>) -> Result {
    ///     irq::request(pdev.irq(0)?, irq::Flags::NONE, kernel::c_str!("tick"), Arc::new(Tick, GFP_KERNEL)?)
    /// }
    /// ```
    pub fn irq(&self, index: u32) -> Result<IrqVector<'_>> {
        // SAFETY: `self` is a valid `platform_device`.
        let irq = unsafe { bindings::platform_get_irq(self.as_raw(), index) };
        to_result(irq)?;
        // SAFETY: `irq` is this device's interrupt, mapped by the platform core for as long as
        // the device exists, so past the end of this binding. Cannot wrap: `irq` is positive.
        Ok(unsafe { IrqVector::new(self.as_ref(), irq as u32) })
    }
}

/// A requested and mapped memory region of at least `SIZE` bytes; derefs to [`Io`]`<SIZE>`.
///
/// Unmaps and releases the region when dropped. Drivers get it inside a [`Devres`] from
/// [`Device::ioremap_resource_sized`], so it cannot outlive the driver's binding.
///
/// # Invariants
///
/// `io` describes the mapping of the physical range `start..start + len` made by `ioremap`, a
/// range this object requested; both stay until `drop`.
///
/// # Examples
///
/// ```
/// use kernel::{devres::Devres, platform::IoMem};
///
/// fn read_id(regs: &Devres<IoMem<8>>) -> Result<u32> {
///     Ok(regs.try_access().ok_or(ENXIO)?.readl(4))
/// }
/// ```
pub struct IoMem<const SIZE: usize = 0> {
    io: IoRaw<SIZE>,
    start: bindings::resource_size_t,
    len: bindings::resource_size_t,
}

impl<const SIZE: usize> IoMem<SIZE> {
    // `resource_size_t` is `u64` or, on some 32-bit configurations, `u32`.
    #[allow(clippy::useless_conversion)]
    fn new(start: u64, len: u64, name: &'static CStr) -> Result<Self> {
        let size = usize::try_from(len).map_err(|_| EINVAL)?;
        if size < SIZE {
            return Err(EINVAL);
        }
        let start: bindings::resource_size_t = start.try_into().map_err(|_| EINVAL)?;
        let len: bindings::resource_size_t = len.try_into().map_err(|_| EINVAL)?;
        // SAFETY: `name` is `'static`, as the resource keeps the pointer.
        let res = unsafe { bindings::request_mem_region(start, len, name.as_char_ptr()) };
        if res.is_null() {
            return Err(EBUSY);
        }
        // SAFETY: The range was requested just above; nothing else maps it for a driver.
        let addr = unsafe { bindings::ioremap(start, size) };
        if addr.is_null() {
            // SAFETY: The region was requested just above.
            unsafe { bindings::release_mem_region(start, len) };
            return Err(ENOMEM);
        }
        match IoRaw::new(addr as usize, size) {
            // INVARIANT: `io` describes the mapping just made of the region just requested.
            Ok(io) => Ok(Self { io, start, len }),
            Err(err) => {
                // SAFETY: The mapping and the region were made just above.
                unsafe {
                    bindings::iounmap(addr);
                    bindings::release_mem_region(start, len);
                }
                Err(err)
            }
        }
    }

    /// Returns the physical address the region starts at.
    ///
    /// # Examples
    ///
    /// ```
    /// fn at(regs: &kernel::platform::IoMem<4>) -> u64 {
    ///     regs.start()
    /// }
    /// ```
    pub fn start(&self) -> u64 {
        // `resource_size_t` is `u64` or, on some 32-bit configurations, `u32`.
        #[allow(clippy::useless_conversion)]
        self.start.into()
    }
}

impl<const SIZE: usize> Drop for IoMem<SIZE> {
    fn drop(&mut self) {
        // SAFETY: By the type invariant the mapping and the region are ours and still there.
        unsafe {
            bindings::iounmap(self.io.addr() as *mut core::ffi::c_void);
            bindings::release_mem_region(self.start, self.len);
        }
    }
}

impl<const SIZE: usize> Deref for IoMem<SIZE> {
    type Target = Io<SIZE>;

    #[inline]
    fn deref(&self) -> &Io<SIZE> {
        // SAFETY: By the type invariant `io` is a mapping of `maxsize` bytes valid while `self`.
        unsafe { Io::from_raw(&self.io) }
    }
}
