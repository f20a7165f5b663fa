// SPDX-License-Identifier: GPL-2.0

//! Interrupt handlers tied to a device's binding.
//!
//! A driver hands a handler to [`request`] or [`request_threaded`] (PCI drivers usually go
//! through [`pci::Device::request_irq`](crate::pci::Device::request_irq) or
//! [`pci::Device::request_threaded_irq`](crate::pci::Device::request_threaded_irq)). The registration then
//! belongs to the binding: when the binding ends, the interrupt is freed (`free_irq()`, which
//! waits for a handler that is running) *before* the binding's [`Devres`](crate::devres::Devres)
//! values stop being accessible. So a handler only ever runs while the device is bound, and it
//! is handed the device as [`Device<Bound>`]: it reaches its BAR with
//! [`Devres::access`](crate::devres::Devres::access), with no RCU and no way to find it revoked.
//!
//! C header: [`include/linux/interrupt.h`](srctree/include/linux/interrupt.h)
//!
//! # Examples
//!
//! A driver for QEMU's `edu` device (1234:11e8; this test expects one, with its MSI or INTx):
//! probe raises an interrupt through the device's INT_RAISE register (0x60), the threaded
//! handler reads the status (0x24), acknowledges it (0x64) and counts it; remove raises one
//! more, which is handled before the unbind completes. The handler records whether the BAR was
//! ever refused to it; the test thread asserts.
//!
//! ```
//! use core::sync::atomic::{AtomicPtr, AtomicU32, Ordering};
//! use kernel::{
//!     c_str, device::{Bound, Device}, devres::Devres, driver::Registration,
//!     irq::{self, IrqReturn}, pci, sync::Arc, types::ForeignOwnable,
//! };
//!
//! const RAISE: usize = 0x60;
//! const STATUS: usize = 0x24;
//! const ACK: usize = 0x64;
//!
//! struct Counter {
//!     bar: Arc<Devres<pci::Bar<0x100>>>,
//!     handled: AtomicU32,
//!     refused: AtomicU32,
//! }
//!
//! impl irq::ThreadedHandler for Counter {
//!     fn handle_threaded(&self, dev: &Device<Bound>) -> IrqReturn {
//!         let Ok(io) = self.bar.access(dev) else {
//!             self.refused.fetch_add(1, Ordering::SeqCst);
//!             return IrqReturn::None;
//!         };
//!         let status = io.readl(STATUS);
//!         if status == 0 {
//!             return IrqReturn::None;
//!         }
//!         io.writel(status, ACK);
//!         self.handled.fetch_add(1, Ordering::SeqCst);
//!         IrqReturn::Handled
//!     }
//! }
//!
//! static COUNTER: AtomicPtr<core::ffi::c_void> = AtomicPtr::new(core::ptr::null_mut());
//!
//! struct Edu;
//! kernel::pci_device_table!(EDU_IDS, (), [(pci::DeviceId::from_id(0x1234, 0x11e8), ())]);
//! impl pci::Driver for Edu {
//!     type IdInfo = ();
//!     const ID_TABLE: pci::IdTable<()> = EDU_IDS;
//!     type Data = Arc<Counter>;
//!     fn probe(pdev: &pci::Device<pci::Core>, _info: &()) -> Result<Arc<Counter>> {
//!         pdev.enable_device_mem()?;
//!         pdev.set_master();
//!         pdev.alloc_irq_vectors(1, 1, pci::IrqTypes::MSI | pci::IrqTypes::INTX)?;
//!         let bar = Arc::new(pdev.iomap_region_sized::<0x100>(0, c_str!("rust_doctest_irq"))?,
//!                            GFP_KERNEL)?;
//!         let counter = Arc::new(
//!             Counter { bar, handled: AtomicU32::new(0), refused: AtomicU32::new(0) },
//!             GFP_KERNEL,
//!         )?;
//!         // edu's interrupt is level-triggered on INTx: keep it masked until acknowledged.
//!         let flags = if pdev.msi_enabled() { irq::Flags::NONE } else { irq::Flags::ONESHOT };
//!         pdev.request_threaded_irq(0, flags, c_str!("rust_doctest_irq"), counter.clone())?;
//!         counter.bar.access(pdev.as_ref())?.writel(1, RAISE);
//!         COUNTER.store(counter.clone().into_foreign().cast_mut(), Ordering::SeqCst);
//!         Ok(counter)
//!     }
//!     fn remove(pdev: &pci::Device<pci::Core>, counter: &Arc<Counter>) {
//!         if let Ok(io) = counter.bar.access(pdev.as_ref()) {
//!             io.writel(2, RAISE);
//!         }
//!     }
//! }
//!
//! // SAFETY: Built-in code has no module of its own; null is what it uses.
//! static MODULE: ThisModule = unsafe { ThisModule::from_ptr(core::ptr::null_mut()) };
//!
//! let reg = KBox::pin_init(
//!     Registration::<pci::Adapter<Edu>>::new(c_str!("rust_doctest_irq"), &MODULE),
//!     GFP_KERNEL,
//! )?;
//! // SAFETY: The probe stored this reference with `into_foreign`; taken back only here.
//! let counter = unsafe {
//!     Arc::<Counter>::from_foreign(COUNTER.swap(core::ptr::null_mut(), Ordering::SeqCst))
//! };
//! // The first interrupt is handled within a second.
//! for _ in 0..1000 {
//!     if counter.handled.load(Ordering::SeqCst) > 0 {
//!         break;
//!     }
//!     // SAFETY: The test runs in process context, where `msleep` may sleep.
//!     unsafe { kernel::bindings::msleep(1) };
//! }
//! assert_eq!(counter.handled.load(Ordering::SeqCst), 1);
//! drop(reg); // unbinds: remove() raises one more, handled before the interrupt is freed
//! assert_eq!(counter.refused.load(Ordering::SeqCst), 0);
//! # Ok::<(), Error>(())
//! ```

use crate::{
    alloc::{flags::GFP_KERNEL, KBox},
    bindings,
    device::{Bound, Device},
    devres::Node,
    error::{to_result, Result},
    ffi::{c_int, c_ulong, c_void},
    str::CStr,
    sync::Arc,
    types::ARef,
};

/// An interrupt number of a bound device, handed out by the device's bus
/// ([`pci::Device::irq_vector`](crate::pci::Device::irq_vector),
/// [`platform::Device::irq`](crate::platform::Device::irq)) and borrowing the device: it can only
/// be requested for that device, during the binding it was handed out in, so the registration is
/// freed (when that binding ends) before the bus frees the vector.
///
/// # Invariants
///
/// `irq` is an interrupt of `dev` that stays allocated at least until the current binding of
/// `dev` has ended and freed its interrupts.
///
/// # Examples
///
/// ```
/// fn number(v: &kernel::irq::IrqVector<'_>) -> u32 {
///     v.irq()
/// }
/// ```
#[derive(Clone, Copy)]
pub struct IrqVector<'a> {
    dev: &'a Device<Bound>,
    irq: u32,
}

impl<'a> IrqVector<'a> {
    /// Wraps a raw interrupt number; for buses, which know what belongs to a device.
    ///
    /// # Safety
    ///
    /// `irq` must be an interrupt of `dev` that stays allocated at least until the current
    /// binding of `dev` has ended and freed its interrupts: a handler registered on it is freed
    /// only then.
    pub unsafe fn new(dev: &'a Device<Bound>, irq: u32) -> Self {
        // INVARIANT: By the safety requirements.
        Self { dev, irq }
    }

    /// The Linux interrupt number.
    pub fn irq(&self) -> u32 {
        self.irq
    }

    /// The device it belongs to.
    pub fn device(&self) -> &'a Device<Bound> {
        self.dev
    }
}

/// What a handler says about an interrupt.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IrqReturn {
    /// It was not this device's (the line may be shared).
    None,
    /// It was handled.
    Handled,
}

/// What the first (hard-IRQ) half of a threaded handler says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ThreadedIrqReturn {
    /// It was not this device's.
    None,
    /// It was handled entirely here.
    Handled,
    /// Run [`ThreadedHandler::handle_threaded`].
    WakeThread,
}

impl IrqReturn {
    fn raw(self) -> bindings::irqreturn_t {
        match self {
            Self::None => bindings::irqreturn_IRQ_NONE,
            Self::Handled => bindings::irqreturn_IRQ_HANDLED,
        }
    }
}

impl ThreadedIrqReturn {
    fn raw(self) -> bindings::irqreturn_t {
        match self {
            Self::None => bindings::irqreturn_IRQ_NONE,
            Self::Handled => bindings::irqreturn_IRQ_HANDLED,
            Self::WakeThread => bindings::irqreturn_IRQ_WAKE_THREAD,
        }
    }
}

/// Flags for requesting an interrupt (C's `IRQF_*`).
///
/// # Examples
///
/// ```
/// let shared = kernel::irq::Flags::SHARED;
/// # let _ = shared;
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Flags(c_ulong);

impl Flags {
    /// No flags: the line is this device's alone (MSI).
    pub const NONE: Flags = Flags(0);
    /// The line may be shared with other devices (INTx): handlers must say
    /// [`IrqReturn::None`] to interrupts that are not theirs.
    pub const SHARED: Flags = Flags(bindings::IRQF_SHARED as c_ulong);
    /// Keep the line masked until the threaded half has run (for a level interrupt whose
    /// source the hard half cannot silence; not possible on a line shared with handlers that
    /// do not ask for it too).
    pub const ONESHOT: Flags = Flags(bindings::IRQF_ONESHOT as c_ulong);
}

impl core::ops::BitOr for Flags {
    type Output = Flags;

    fn bitor(self, other: Flags) -> Flags {
        Flags(self.0 | other.0)
    }
}

/// An interrupt handler that runs in hard-IRQ context: it must not sleep.
pub trait Handler: Send + Sync + 'static {
    /// Handles an interrupt of `dev`, which is bound while this runs.
    fn handle(&self, dev: &Device<Bound>) -> IrqReturn;
}

/// A threaded interrupt handler: a hard-IRQ half and a half that runs in a kernel thread and may
/// sleep. For a level-triggered line the hard half must silence the source before it wakes the
/// thread (e.g. mask the device's INTx), or the request must ask for [`Flags::ONESHOT`].
pub trait ThreadedHandler: Send + Sync + 'static {
    /// The hard-IRQ half; by default it wakes the thread.
    fn handle(&self, _dev: &Device<Bound>) -> ThreadedIrqReturn {
        ThreadedIrqReturn::WakeThread
    }

    /// The threaded half; `dev` is bound while this runs.
    fn handle_threaded(&self, dev: &Device<Bound>) -> IrqReturn;
}

/// What `free_irq()` needs back, plus the handler to drop after it: the data of the devres entry
/// of one registration.
///
/// # Invariants
///
/// `cookie` is a pointer made by `KBox::into_raw` of an `Action<T>` for which `drop_action` is
/// `drop_action::<T>`; `irq` was requested with `cookie` as its `dev_id`.
#[repr(C)]
#[derive(Clone, Copy)]
struct Registered {
    irq: u32,
    cookie: *mut c_void,
    drop_action: unsafe fn(*mut c_void),
}

/// The handler with the device it is for: the `dev_id` of the interrupt.
struct Action<T> {
    dev: ARef<Device>,
    handler: Arc<T>,
}

/// The handler behind `cookie` and its device, bound.
///
/// # Safety
///
/// `cookie` must be the `dev_id` of a live registration made for `T`, and the caller one of that
/// registration's handlers: registrations are freed before their binding ends, so the device is
/// bound while a handler runs.
unsafe fn action<'a, T>(cookie: *mut c_void) -> (&'a T, &'a Device<Bound>) {
    // SAFETY: By the safety requirements `cookie` is a live `Action<T>`.
    let action = unsafe { &*cookie.cast::<Action<T>>() };
    // SAFETY: The device is valid (the action holds a reference) and bound (see above).
    let dev = unsafe { Device::from_raw(action.dev.as_raw()) };
    (&*action.handler, dev)
}

/// Drops the `Action<T>` behind `cookie`.
///
/// # Safety
///
/// `cookie` must come from `KBox::into_raw` of an `Action<T>`, not dropped yet, and no handler
/// may use it any more.
unsafe fn drop_action<T>(cookie: *mut c_void) {
    // SAFETY: By the safety requirements.
    drop(unsafe { KBox::from_raw(cookie.cast::<Action<T>>()) });
}

/// # Safety
///
/// `cookie` must be the `dev_id` of a live registration made by [`request`] for `T`.
unsafe extern "C" fn hard_trampoline<T: Handler>(
    _irq: c_int,
    cookie: *mut c_void,
) -> bindings::irqreturn_t {
    // SAFETY: The IRQ core calls this with the registration's `dev_id`, as its handler.
    let (handler, dev) = unsafe { action::<T>(cookie) };
    handler.handle(dev).raw()
}

/// # Safety
///
/// As for [`hard_trampoline`], for a registration made by [`request_threaded`].
unsafe extern "C" fn first_half<T: ThreadedHandler>(
    _irq: c_int,
    cookie: *mut c_void,
) -> bindings::irqreturn_t {
    // SAFETY: The IRQ core calls this with the registration's `dev_id`, as its handler.
    let (handler, dev) = unsafe { action::<T>(cookie) };
    handler.handle(dev).raw()
}

/// # Safety
///
/// As for [`first_half`].
unsafe extern "C" fn second_half<T: ThreadedHandler>(
    _irq: c_int,
    cookie: *mut c_void,
) -> bindings::irqreturn_t {
    // SAFETY: The IRQ core calls this with the registration's `dev_id`, as its handler.
    let (handler, dev) = unsafe { action::<T>(cookie) };
    handler.handle_threaded(dev).raw()
}

/// The devres release function of a registration: frees the interrupt, then the handler.
///
/// # Safety
///
/// `res` must be the data area of an entry made by [`register`], and the driver core must have
/// taken the entry off the device's list.
unsafe extern "C" fn release(_dev: *mut bindings::device, res: *mut c_void) {
    // SAFETY: By the safety requirements `res` holds a `Registered` (its invariants hold).
    let node = unsafe { *res.cast::<Registered>() };
    // SAFETY: `node.irq` was requested with `node.cookie`; `free_irq` waits for running handlers,
    // after which none uses the action.
    unsafe { bindings::free_irq(node.irq, node.cookie) };
    // SAFETY: Made by `KBox::into_raw` for this `drop_action`; no handler uses it any more.
    unsafe { (node.drop_action)(node.cookie) };
}

/// Frees every interrupt registered during the current binding of `dev`, waiting for running
/// handlers. The binding's end calls it before anything of the binding is refused.
pub(crate) fn free_all(dev: &Device) {
    // SAFETY: `dev` is valid; `release` is only used for entries made by `register`, so with no
    // match function `devres_release` takes the newest of them off the list and releases it.
    while unsafe {
        bindings::devres_release(dev.as_raw(), Some(release), None, core::ptr::null_mut())
    } == 0
    {}
}

/// Requests `vector` for `handler` and ties the registration to the binding of its device.
///
/// # Safety
///
/// `hard` and `thread` must be the trampolines of `T`'s kind (they are called with the
/// `Action<T>` as `dev_id`).
unsafe fn register<T: Send + Sync + 'static>(
    vector: IrqVector<'_>,
    flags: c_ulong,
    name: &'static CStr,
    handler: Arc<T>,
    hard: bindings::irq_handler_t,
    thread: bindings::irq_handler_t,
) -> Result {
    let (dev, irq) = (vector.dev, vector.irq);
    let action = KBox::new(
        Action {
            dev: ARef::from(&**dev),
            handler,
        },
        GFP_KERNEL,
    )?;
    let entry = Node::<Registered>::alloc(release, c"rust_irq", GFP_KERNEL)?;
    let cookie = KBox::into_raw(action).cast::<c_void>();
    // SAFETY: The trampolines match `T` (the caller's promise) and `cookie` is an `Action<T>`
    // that lives until `release` (or the failure path below) drops it; `name` is static. `irq`
    // is `dev`'s and stays allocated until the binding's interrupts are freed (the vector's
    // invariant), which frees this one.
    let ret = unsafe {
        bindings::request_threaded_irq(irq, hard, thread, flags, name.as_char_ptr(), cookie)
    };
    if let Err(e) = to_result(ret) {
        // SAFETY: The request failed, so no handler uses `cookie`.
        unsafe { drop_action::<T>(cookie) };
        entry.free();
        return Err(e);
    }
    // SAFETY: Once added, `release` reads the `Registered`, frees the interrupt and drops the
    // action (the `Registered` invariants hold).
    unsafe {
        entry.add(
            dev,
            Registered {
                irq,
                cookie,
                drop_action: drop_action::<T>,
            },
        )
    };
    Ok(())
}

/// Requests `vector` for a hard-IRQ `handler` until the binding of its device ends.
///
/// # Examples
///
/// ```
/// use core::sync::atomic::{AtomicU32, Ordering};
/// use kernel::{device::{Bound, Device}, irq::{self, IrqReturn}, sync::Arc};
///
/// struct Count(AtomicU32);
/// impl irq::Handler for Count {
///     fn handle(&self, _dev: &Device<Bound>) -> IrqReturn {
///         self.0.fetch_add(1, Ordering::Relaxed);
///         IrqReturn::Handled
///     }
/// }
///
/// fn wire(vector: irq::IrqVector<'_>) -> Result<Arc<Count>> {
///     let count = Arc::new(Count(AtomicU32::new(0)), GFP_KERNEL)?;
///     irq::request(vector, irq::Flags::NONE, kernel::c_str!("my_driver"), count.clone())?;
///     Ok(count)
/// }
/// ```
pub fn request<T: Handler>(
    vector: IrqVector<'_>,
    flags: Flags,
    name: &'static CStr,
    handler: Arc<T>,
) -> Result {
    // SAFETY: The hard trampoline is `T`'s; there is no thread.
    unsafe {
        register(
            vector,
            flags.0,
            name,
            handler,
            Some(hard_trampoline::<T>),
            None,
        )
    }
}

/// Requests `vector` for a threaded `handler` until the binding of its device ends.
///
/// # Examples
///
/// See the [module documentation](self).
///
/// ```
/// use kernel::{device::{Bound, Device}, irq::{self, IrqReturn}, sync::Arc};
///
/// struct Slow;
/// impl irq::ThreadedHandler for Slow {
///     fn handle_threaded(&self, _dev: &Device<Bound>) -> IrqReturn {
///         IrqReturn::Handled // may sleep here
///     }
/// }
///
/// fn wire(vector: irq::IrqVector<'_>) -> Result {
///     irq::request_threaded(vector, irq::Flags::ONESHOT, kernel::c_str!("my_driver"),
///                           Arc::new(Slow, GFP_KERNEL)?)
/// }
/// ```
pub fn request_threaded<T: ThreadedHandler>(
    vector: IrqVector<'_>,
    flags: Flags,
    name: &'static CStr,
    handler: Arc<T>,
) -> Result {
    // SAFETY: Both halves are `T`'s.
    unsafe {
        register(
            vector,
            flags.0,
            name,
            handler,
            Some(first_half::<T>),
            Some(second_half::<T>),
        )
    }
}
