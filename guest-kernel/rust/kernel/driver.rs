// SPDX-License-Identifier: GPL-2.0

//! Generic support for drivers of the device/driver core.
//!
//! A bus abstraction (for example [`pci`](crate::pci)) implements [`RegistrationOps`] for a type
//! that knows how to register its C driver structure; drivers then hold a [`Registration`], which
//! registers when it is created and unregisters when it is dropped, so a driver cannot forget to
//! unregister. [`module_driver!`](crate::module_driver) turns one such registration into a whole
//! module.
//!
//! C header: [`include/linux/device/driver.h`](srctree/include/linux/device/driver.h)

use crate::prelude::*;
use crate::{
    alloc::{flags::GFP_KERNEL, KBox},
    error::Result,
    init::{self, InPlaceInit, PinInit},
    str::CStr,
    types::Opaque,
    ThisModule,
};
use core::pin::Pin;

/// Registers and unregisters one bus's C driver structure.
///
/// # Safety
///
/// Implementers must make [`RegistrationOps::register`] leave `reg` registered with the bus only
/// when it returns `Ok`, and [`RegistrationOps::unregister`] undo a successful `register` so that
/// the bus no longer uses `reg` once it returns.
///
/// # Examples
///
/// A made-up bus whose C driver structure is a counter:
///
/// ```
/// use kernel::{driver::RegistrationOps, prelude::*, types::Opaque};
///
/// struct CountingBus;
///
/// // SAFETY: `register` and `unregister` only count; nothing keeps a pointer to `reg`.
/// unsafe impl RegistrationOps for CountingBus {
///     type RegType = u32;
///
///     unsafe fn register(
///         reg: &Opaque<u32>,
///         _name: &'static CStr,
///         _module: &'static ThisModule,
///     ) -> Result {
///         // SAFETY: `reg` is valid and pinned; this example owns it.
///         unsafe { *reg.get() += 1 };
///         Ok(())
///     }
///
///     unsafe fn unregister(reg: &Opaque<u32>) {
///         // SAFETY: As above.
///         unsafe { *reg.get() -= 1 };
///     }
/// }
/// ```
pub unsafe trait RegistrationOps {
    /// The bus's C driver structure (e.g. `struct pci_driver`).
    type RegType;

    /// Fills in and registers `reg`, which was zeroed by the caller.
    ///
    /// # Safety
    ///
    /// `reg` must be pinned, zeroed before the call and not registered; if this returns `Ok`,
    /// [`RegistrationOps::unregister`] must be called before `reg` is freed.
    unsafe fn register(
        reg: &Opaque<Self::RegType>,
        name: &'static CStr,
        module: &'static ThisModule,
    ) -> Result;

    /// Unregisters `reg`.
    ///
    /// # Safety
    ///
    /// `reg` must have been registered by a successful [`RegistrationOps::register`] and not
    /// unregistered since.
    unsafe fn unregister(reg: &Opaque<Self::RegType>);
}

/// A driver registered with its bus for as long as this object lives.
///
/// # Invariants
///
/// `reg` is registered with the bus by `T::register` and is unregistered only in `drop`.
///
/// # Examples
///
/// ```
/// use kernel::{
///     driver::{Registration, RegistrationOps},
///     prelude::*,
///     types::Opaque,
/// };
///
/// struct CountingBus;
///
/// // SAFETY: `register` and `unregister` only count; nothing keeps a pointer to `reg`.
/// unsafe impl RegistrationOps for CountingBus {
///     type RegType = u32;
///
///     unsafe fn register(_: &Opaque<u32>, _: &'static CStr, _: &'static ThisModule) -> Result {
///         REGISTERED.fetch_add(1, core::sync::atomic::Ordering::SeqCst);
///         Ok(())
///     }
///
///     unsafe fn unregister(_: &Opaque<u32>) {
///         REGISTERED.fetch_sub(1, core::sync::atomic::Ordering::SeqCst);
///     }
/// }
///
/// static REGISTERED: core::sync::atomic::AtomicU32 = core::sync::atomic::AtomicU32::new(0);
/// // SAFETY: A null module is what built-in code uses.
/// static MODULE: ThisModule = unsafe { ThisModule::from_ptr(core::ptr::null_mut()) };
///
/// let reg = KBox::pin_init(
///     Registration::<CountingBus>::new(kernel::c_str!("counting"), &MODULE),
///     GFP_KERNEL,
/// )?;
/// assert_eq!(REGISTERED.load(core::sync::atomic::Ordering::SeqCst), 1);
/// drop(reg);
/// assert_eq!(REGISTERED.load(core::sync::atomic::Ordering::SeqCst), 0);
/// # Ok::<(), Error>(())
/// ```
#[pin_data(PinnedDrop)]
pub struct Registration<T: RegistrationOps> {
    #[pin]
    reg: Opaque<T::RegType>,
}

// SAFETY: `Registration` has no `&self` methods; sharing it shares nothing.
unsafe impl<T: RegistrationOps> Sync for Registration<T> {}

// SAFETY: Registering and unregistering a C driver may be done from any thread.
unsafe impl<T: RegistrationOps> Send for Registration<T> {}

impl<T: RegistrationOps> Registration<T> {
    /// Returns an initialiser that registers the driver under `name` for `module`; it fails with
    /// the bus's error if registering fails.
    ///
    /// # Examples
    ///
    /// See [`Registration`].
    ///
    /// ```
    /// # fn f<T: kernel::driver::RegistrationOps>(module: &'static ThisModule) -> Result {
    /// use kernel::driver::Registration;
    /// let _reg = KBox::pin_init(Registration::<T>::new(kernel::c_str!("mine"), module), GFP_KERNEL)?;
    /// # Ok(()) }
    /// ```
    pub fn new(
        name: &'static CStr,
        module: &'static ThisModule,
    ) -> impl PinInit<Self, crate::error::Error> {
        let init = move |slot: *mut Self| {
            // SAFETY: `slot` is valid for writes; `reg` is an `Opaque`, which may hold any bytes.
            let reg = unsafe { &*core::ptr::addr_of!((*slot).reg) };
            // SAFETY: `reg.get()` is valid for writing one `RegType`.
            unsafe { core::ptr::write_bytes(reg.get(), 0, 1) };
            // SAFETY: `reg` is pinned (inside the pinned `slot`), zeroed and not registered; on
            // success `Registration::drop` unregisters it before it is freed.
            unsafe { T::register(reg, name, module) }
        };
        // SAFETY: On `Ok` the closure has initialised the only field (`reg`), as the invariant
        // requires; on `Err` nothing was registered, so there is nothing to clean up.
        unsafe { init::pin_init_from_closure(init) }
    }
}

#[pinned_drop]
impl<T: RegistrationOps> PinnedDrop for Registration<T> {
    fn drop(self: Pin<&mut Self>) {
        // SAFETY: By the type invariant `reg` is registered and has not been unregistered.
        unsafe { T::unregister(&self.reg) };
    }
}

/// A module whose only job is to keep one driver registered.
///
/// Used by [`module_driver!`](crate::module_driver); the driver is unregistered when the module
/// is unloaded.
///
/// # Examples
///
/// ```
/// # fn f<T: kernel::driver::RegistrationOps>(module: &'static ThisModule) -> Result {
/// let m = kernel::driver::Module::<T>::new(kernel::c_str!("mine"), module)?;
/// drop(m); // unregisters
/// # Ok(()) }
/// ```
pub struct Module<T: RegistrationOps> {
    _driver: Pin<KBox<Registration<T>>>,
}

impl<T: RegistrationOps> Module<T> {
    /// Registers the driver under `name` for `module`.
    ///
    /// # Examples
    ///
    /// See [`Module`].
    ///
    /// ```
    /// # fn f<T: kernel::driver::RegistrationOps>(module: &'static ThisModule) -> Result {
    /// let _m = kernel::driver::Module::<T>::new(kernel::c_str!("mine"), module)?;
    /// # Ok(()) }
    /// ```
    pub fn new(name: &'static CStr, module: &'static ThisModule) -> Result<Self> {
        Ok(Self {
            _driver: KBox::try_pin_init(Registration::new(name, module), GFP_KERNEL)?,
        })
    }
}

/// Declares a module that registers a single driver of some bus.
///
/// Meant for bus macros such as [`module_pci_driver!`](crate::module_pci_driver): they pass the
/// registration type of their bus (`$ops`) and the module fields, where `type` names the driver.
/// The fields are those of [`module!`](crate::prelude::module) (the `type` one is replaced).
///
/// # Examples
///
/// ```ignore
/// kernel::module_driver!(kernel::pci::Adapter<MyDriver>, {
///     type: MyDriver,
///     name: "my_driver",
///     license: "GPL",
/// });
/// ```
#[macro_export]
macro_rules! module_driver {
    ($ops:ty, { type: $type:ty, name: $name:tt, $($f:tt)* }) => {
        struct __DriverModule($crate::driver::Module<$ops>);

        impl $crate::Module for __DriverModule {
            fn init(module: &'static $crate::ThisModule) -> $crate::error::Result<Self> {
                Ok(Self($crate::driver::Module::new($crate::c_str!($name), module)?))
            }
        }

        $crate::prelude::module! {
            type: __DriverModule,
            name: $name,
            $($f)*
        }
    };
}

/// Implements what every bus's device type shares, for `$dev`, a `#[repr(transparent)]` wrapper
/// `$dev<Ctx>(Opaque<$raw>, PhantomData<Ctx>)` of a C bus device `$raw` that embeds its
/// `struct device` as `dev`, whose module imports `device`, `Bound`, `Core`, `DeviceContext`,
/// `ARef` and `Deref`:
///
/// - `as_raw` and the unsafe `from_raw` (borrowing a C device in a context);
/// - `AsRef<device::Device<Ctx>>`, to the embedded `struct device` in the same context;
/// - `Deref` from `Core` to `Bound` and from `Bound` to `Normal`;
/// - `From<&$dev<Core>>` and `From<&$dev<Bound>>` for `ARef<$dev>`: a reference kept beyond the
///   borrow is only `Normal`.
///
/// Used by [`pci`](crate::pci) and [`platform`](crate::platform).
macro_rules! bus_device_contexts {
    ($dev:ident, $raw:ty) => {
        impl<Ctx: DeviceContext> $dev<Ctx> {
            #[inline]
            fn as_raw(&self) -> *mut $raw {
                self.0.get()
            }

            /// Borrows a C bus device in context `Ctx`.
            ///
            /// # Safety
            ///
            /// `raw` must be a valid device for `'a`, and what `Ctx` promises must hold for all
            /// of `'a`.
            #[inline]
            unsafe fn from_raw<'a>(raw: *mut $raw) -> &'a Self {
                // SAFETY: `Self` is a transparent wrapper of the C device (the `PhantomData` is a
                // ZST); the caller guarantees validity and the context for `'a`.
                unsafe { &*raw.cast() }
            }
        }

        impl<Ctx: DeviceContext> AsRef<device::Device<Ctx>> for $dev<Ctx> {
            #[inline]
            fn as_ref(&self) -> &device::Device<Ctx> {
                // SAFETY: `self` is a valid bus device, whose `dev` is a valid `struct device`
                // living as long as it, in the same context.
                unsafe { device::Device::from_raw(core::ptr::addr_of_mut!((*self.as_raw()).dev)) }
            }
        }

        impl Deref for $dev<Core> {
            type Target = $dev<Bound>;

            #[inline]
            fn deref(&self) -> &$dev<Bound> {
                // SAFETY: A `Core` device is bound for the borrow, which is all `Bound` promises.
                unsafe { $dev::from_raw(self.as_raw()) }
            }
        }

        impl Deref for $dev<Bound> {
            type Target = $dev;

            #[inline]
            fn deref(&self) -> &$dev {
                // SAFETY: `Normal` promises only a valid device, which `self` is.
                unsafe { $dev::from_raw(self.as_raw()) }
            }
        }

        /// A reference kept beyond a callback: only `Normal`.
        impl From<&$dev<Core>> for ARef<$dev> {
            fn from(dev: &$dev<Core>) -> Self {
                ARef::from(&***dev)
            }
        }

        /// A reference kept beyond the borrow: only `Normal`.
        impl From<&$dev<Bound>> for ARef<$dev> {
            fn from(dev: &$dev<Bound>) -> Self {
                ARef::from(&**dev)
            }
        }
    };
}
pub(crate) use bus_device_contexts;
