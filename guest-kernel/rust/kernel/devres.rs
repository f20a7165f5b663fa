// SPDX-License-Identifier: GPL-2.0

//! Resources tied to a device's binding to its driver ("device resource management").
//!
//! C header: [`include/linux/device/devres.h`](srctree/include/linux/device/devres.h)

use crate::prelude::*;
use crate::{
    alloc::{flags::GFP_KERNEL, Flags},
    bindings,
    device::{Bound, Device},
    error::{
        code::{EINVAL, ENODEV, ENOMEM, ENXIO},
        Result,
    },
    ffi::{c_int, c_void},
    init::InPlaceInit,
    revocable::{Revocable, RevocableGuard},
    sync::{rcu, Arc},
    types::{ARef, ForeignOwnable, Opaque},
};
use core::sync::atomic::{AtomicBool, AtomicPtr, AtomicUsize, Ordering};

/// State of one binding of a device to a driver, shared by the [`Devres`] made during it.
///
/// Bus adapters call [`binding_begin`] before a driver's probe and [`binding_end`] after its
/// remove (or failed probe); a bus that hands out [`Device<Bound>`] must do so, since a
/// [`Devres`] can only be made within a binding. Ending the binding refuses access to every `Devres` of the binding
/// at once and waits for one RCU grace period; the devres release functions that run next drop
/// their values without waiting again. So unbinding costs one grace period, not one per
/// resource.
///
/// # Invariants
///
/// `synced` is set only after `bound` was cleared and a grace period elapsed since;
/// `dma_held` counts the live [`DmaHold`]s made in this binding; `runtime_task` is the task
/// running one of this binding's runtime PM callbacks (see [`in_runtime_callback`]), else null.
struct Binding {
    bound: AtomicBool,
    synced: AtomicBool,
    dma_held: AtomicUsize,
    runtime_task: AtomicPtr<bindings::task_struct>,
}

/// Devres release function of the node that keeps the [`Binding`] of a device.
///
/// # Safety
///
/// `res` must be the data area of a node made by [`binding_begin`].
unsafe extern "C" fn binding_release(_dev: *mut bindings::device, res: *mut c_void) {
    // SAFETY: The node holds a reference made by `Arc::into_foreign`; the driver core removed
    // the node from the list, so this is the only place that takes it back.
    drop(unsafe { Arc::<Binding>::from_foreign(*res.cast::<*const c_void>()) });
}

/// Devres match function that takes a new reference to a [`Binding`], under the devres lock.
///
/// # Safety
///
/// `res` must be the data area of a node made by [`binding_begin`], and `data` must point to an
/// `Option<Arc<Binding>>`.
unsafe extern "C" fn binding_match(
    _dev: *mut bindings::device,
    res: *mut c_void,
    data: *mut c_void,
) -> c_int {
    // SAFETY: The node is on the device's list (we are called under its devres lock), so its
    // reference is alive while we clone it.
    let binding: Arc<Binding> =
        unsafe { Arc::<Binding>::borrow(*res.cast::<*const c_void>()) }.into();
    // SAFETY: By the safety requirements `data` points to an `Option<Arc<Binding>>`.
    unsafe { *data.cast::<Option<Arc<Binding>>>() = Some(binding) };
    1
}

/// Returns the current binding of `dev`, if a bus adapter began one.
fn find_binding(dev: &Device) -> Option<Arc<Binding>> {
    let mut found: Option<Arc<Binding>> = None;
    // SAFETY: `dev` is valid; `binding_match` only looks at nodes released by `binding_release`,
    // which `binding_begin` made, and writes to `found`, which outlives the call.
    unsafe {
        bindings::devres_find(
            dev.as_raw(),
            Some(binding_release),
            Some(binding_match),
            core::ptr::from_mut(&mut found).cast(),
        )
    };
    found
}

/// Begins a binding of `dev` to a driver; bus adapters call it right before the driver's probe.
pub(crate) fn binding_begin(dev: &Device) -> Result {
    let binding = Arc::new(
        Binding {
            bound: AtomicBool::new(true),
            synced: AtomicBool::new(false),
            dma_held: AtomicUsize::new(0),
            runtime_task: AtomicPtr::new(core::ptr::null_mut()),
        },
        GFP_KERNEL,
    )?;
    let node = Node::<*const c_void>::alloc(binding_release, c"rust_devres_binding", GFP_KERNEL)?;
    // SAFETY: `binding_release` takes back the `Arc<Binding>` stored by `into_foreign`.
    unsafe { node.add(dev, binding.into_foreign()) };
    Ok(())
}

/// A devres entry, not yet added to a device, that will hold one `D` (plain data, e.g. a
/// pointer whose owner the entry becomes).
pub(crate) struct Node<D: Copy> {
    entry: *mut c_void,
    _data: core::marker::PhantomData<D>,
}

impl<D: Copy> Node<D> {
    /// Allocates an entry that `release` will release.
    pub(crate) fn alloc(
        release: unsafe extern "C" fn(*mut bindings::device, *mut c_void),
        name: &'static core::ffi::CStr,
        flags: Flags,
    ) -> Result<Self> {
        // SAFETY: The size is that of the `D` the entry holds; the name is static.
        let entry = unsafe {
            bindings::__devres_alloc_node(
                Some(release),
                core::mem::size_of::<D>(),
                flags.as_raw(),
                bindings::NUMA_NO_NODE,
                name.as_ptr().cast(),
            )
        };
        if entry.is_null() {
            return Err(ENOMEM);
        }
        Ok(Self {
            entry,
            _data: core::marker::PhantomData,
        })
    }

    /// Stores `data` in the entry and adds the entry to `dev`, which from then on owns what
    /// `data` owns.
    ///
    /// # Safety
    ///
    /// The entry's release function must read a `D` and take over what it owns.
    pub(crate) unsafe fn add(self, dev: &Device, data: D) {
        // SAFETY: The entry is new, has room for a `D` (the devres data area is aligned for any
        // type) and is on no list yet; `dev` is valid since we hold a reference to it.
        unsafe {
            self.entry.cast::<D>().write(data);
            bindings::devres_add(dev.as_raw(), self.entry);
        }
    }

    /// Frees the entry without adding it (nothing was stored in it).
    pub(crate) fn free(self) {
        // SAFETY: The entry was allocated by `alloc` and never added to a device.
        unsafe { bindings::devres_free(self.entry) };
    }
}

/// One piece of DMA memory (a coherent allocation, a streaming mapping), counted in the binding
/// it was made in for as long as the memory lives: held as the memory's last field, so that it
/// is let go only after the memory was given back.
pub(crate) struct DmaHold(Arc<Binding>);

impl DmaHold {
    /// Counts one more piece in `dev`'s current binding; `ENODEV` outside one.
    pub(crate) fn new(dev: &Device<Bound>) -> Result<Self> {
        let binding = find_binding(dev).ok_or(ENODEV)?;
        binding.dma_held.fetch_add(1, Ordering::AcqRel);
        Ok(Self(binding))
    }
}

impl Drop for DmaHold {
    fn drop(&mut self) {
        self.0.dma_held.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Whether `dev`'s current binding still holds DMA memory (see [`DmaHold`]).
pub(crate) fn dma_held(dev: &Device) -> bool {
    find_binding(dev).is_some_and(|b| b.dma_held.load(Ordering::Acquire) > 0)
}

/// Runs `f`, a runtime PM callback of `dev`'s current binding, noting that the current task
/// runs it. The PM core runs one such callback of a device at a time.
pub(crate) fn in_runtime_callback<R>(dev: &Device, f: impl FnOnce() -> R) -> R {
    let binding = find_binding(dev);
    // SAFETY: `get_current` always returns the running task.
    let me = unsafe { bindings::get_current() };
    if let Some(b) = &binding {
        b.runtime_task.store(me, Ordering::Relaxed);
    }
    let result = f();
    if let Some(b) = &binding {
        b.runtime_task.store(core::ptr::null_mut(), Ordering::Relaxed);
    }
    result
}

/// Whether the current task is inside a runtime PM callback of `dev`'s current binding, where
/// waiting for the device's runtime PM would wait for itself. (Relaxed: only the current task's
/// own stores can make it equal to the current task.)
pub(crate) fn runtime_callback_running_here(dev: &Device) -> bool {
    // SAFETY: `get_current` always returns the running task.
    let me = unsafe { bindings::get_current() };
    find_binding(dev).is_some_and(|b| b.runtime_task.load(Ordering::Relaxed) == me)
}

/// Ends the current binding of `dev`: its interrupts are freed first (see [`irq`](crate::irq)),
/// then no [`Devres`] of it gives access any more once this returns, and accesses that were in
/// progress have ended. Bus adapters call it after the driver's remove, or after its probe
/// failed. Might sleep.
pub(crate) fn binding_end(dev: &Device) {
    // Handlers get the device as bound: free their interrupts (waiting for running ones) first.
    crate::irq::free_all(dev);
    if let Some(binding) = find_binding(dev) {
        if binding.bound.swap(false, Ordering::Relaxed) {
            rcu::synchronize();
            // INVARIANT: `bound` was cleared and a grace period elapsed.
            binding.synced.store(true, Ordering::Release);
        }
    }
}

/// What every bus adapter's probe callback does around the driver's probe: begins a binding of
/// `dev`, runs `probe`, and returns its data as a pointer for the bus's drvdata, or ends the
/// binding again (undoing what probe set up) and returns the errno for the C side.
///
/// The data is moved into a box of its own, which drvdata points to: callbacks that run at once
/// (runtime PM beside error recovery, say) then share one `&D` to one value, where rebuilding a
/// `D` from a foreign pointer per callback would make two owners of the same data.
pub(crate) fn probe_in_binding<D: Send + Sync>(
    dev: &Device,
    probe: impl FnOnce() -> Result<D>,
) -> core::result::Result<*const c_void, c_int> {
    binding_begin(dev).map_err(|e| e.to_errno())?;
    match probe().and_then(|data| Ok(KBox::new(data, GFP_KERNEL)?)) {
        Ok(data) => Ok(KBox::into_raw(data).cast_const().cast()),
        Err(err) => {
            binding_end(dev);
            Err(err.to_errno())
        }
    }
}

/// What every bus adapter's remove callback does: takes back the driver's data from `drvdata`,
/// runs `remove` with it, drops it, then ends the binding (one grace period for all of its
/// [`Devres`]; their release functions follow).
///
/// # Safety
///
/// `drvdata` must be the pointer [`probe_in_binding`] returned for the current binding of
/// `dev`, not taken back since.
pub(crate) unsafe fn remove_binding<D>(
    dev: &Device,
    drvdata: *mut c_void,
    remove: impl FnOnce(&D),
) {
    // SAFETY: By the safety requirements `drvdata` came from `KBox::<D>::into_raw` and is taken
    // back only here, after every other callback's borrow ended.
    let data = unsafe { KBox::from_raw(drvdata.cast::<D>()) };
    remove(&data);
    drop(data);
    binding_end(dev);
}

/// What a bus adapter's other callbacks on a bound device (error recovery, shutdown) do: lends
/// the driver's data in `drvdata` to `f`, leaving it where it is.
///
/// # Safety
///
/// `drvdata` must be the pointer [`probe_in_binding`] returned for the current binding, not taken
/// back, and must stay so for the whole call (the caller holds the device lock, which
/// [`remove_binding`]'s caller needs too, or, as runtime PM, otherwise keeps remove from
/// beginning until it returns).
pub(crate) unsafe fn with_binding_data<D: Sync, R>(
    drvdata: *mut c_void,
    f: impl FnOnce(&D) -> R,
) -> R {
    // SAFETY: By the safety requirements `drvdata` points to the `D` in the box that
    // `probe_in_binding` made, which nobody takes back or changes during this call: shared
    // references to it (`D: Sync`) may coexist.
    f(unsafe { &*drvdata.cast::<D>() })
}

/// Decides which of a [`Devres`]'s drop and its devres release drops the value, and lets the
/// other wait for that destructor.
///
/// Claiming is one atomic compare-exchange: a side that wins takes no lock and does not sleep
/// (beyond what the value's destructor does), so a `Devres` may be dropped under a spinlock or
/// in a hard-IRQ handler when nothing races it. Only the losing side sleeps, until the winner's
/// destructor has finished; unless the winner is its own task (the value's destructor dropped
/// the last handle to its own `Devres`), which would wait for itself forever.
///
/// # Invariants
///
/// `claimant` is null until a side claims the value, then that side's task, for good; `done` is
/// initialised, and completed only after the claimant's destructor returned.
#[pin_data]
struct DropOnce {
    claimant: AtomicPtr<bindings::task_struct>,
    #[pin]
    done: Opaque<bindings::completion>,
}

// SAFETY: `claimant` is atomic and a `struct completion` is made to be completed and waited for
// from any thread (its wait queue has its own lock).
unsafe impl Send for DropOnce {}

// SAFETY: As above: every access through `&DropOnce` is atomic or takes the completion's lock.
unsafe impl Sync for DropOnce {}

impl DropOnce {
    fn new() -> impl PinInit<Self> {
        pin_init!(Self {
            claimant: AtomicPtr::new(core::ptr::null_mut()),
            // SAFETY: `init_completion` initialises the completion in place, whatever it held.
            done <- Opaque::ffi_init(|slot| unsafe { bindings::init_completion(slot) }),
        })
    }

    /// Runs `drop_value` if this side claims the value first; otherwise waits until the side
    /// that did has finished its `drop_value`, unless that side is the current task.
    fn drop_once(&self, drop_value: impl FnOnce()) {
        // SAFETY: Reading the current task has no preconditions.
        let me = unsafe { bindings::get_current() };
        match self.claimant.compare_exchange(
            core::ptr::null_mut(),
            me,
            Ordering::AcqRel,
            Ordering::Acquire,
        ) {
            Ok(_) => {
                drop_value();
                // SAFETY: `done` is initialised (type invariant); `complete_all` takes only a
                // raw spinlock. INVARIANT: the claimant's destructor has returned.
                unsafe { bindings::complete_all(self.done.get()) };
            }
            // This task claimed it: the value's destructor is running below us (waiting would
            // be for ourselves), or `Devres::take_with` took the value before this drop.
            Err(claimant) if claimant == me => {}
            // SAFETY: `done` is initialised; the claimant completes it once its destructor has
            // returned, so the wait ends.
            Err(_) => unsafe { bindings::wait_for_completion(self.done.get()) },
        }
    }
}

#[pin_data]
struct DevresInner<T> {
    dev: ARef<Device>,
    binding: Arc<Binding>,
    #[pin]
    data: Revocable<T>,
    #[pin]
    dropped: DropOnce,
}

/// The release function of a devres entry holding a `DevresInner<T>`.
type ReleaseFn = unsafe extern "C" fn(*mut bindings::device, *mut c_void);

/// A value that lives at most as long as a device stays bound to its driver.
///
/// The value is revoked (dropped, after in-flight accesses end) when the device is unbound, or
/// when the `Devres` is dropped, whichever comes first; neither returns before the value's
/// destructor has finished, even when they race. Until then [`Devres::access`] (with the bound
/// device at hand) and [`Devres::try_access`] (from anywhere) give access to it. This is how a
/// driver keeps, say, a mapped BAR that it can no longer touch once the device is gone.
///
/// A `Devres` can only be made for a bound device ([`Device<Bound>`]), and belongs to that one
/// binding: once it ends, the value is gone, even if the device is bound again later.
///
/// On unbind, access to all `Devres` of the binding is refused after the driver's `remove`, with
/// a single RCU grace period for all of them, and the devres release functions then drop the
/// values without waiting again. Dropping the `Devres` first removes its devres entry and drops
/// the value without waiting at all: owning the `Devres` means no access is in flight. Nor does
/// such a drop take a sleeping lock: when nothing races it, a `Devres` may be dropped under a
/// spinlock or in a hard-IRQ handler (as long as the value's own destructor does not sleep).
/// The one case where a side does not wait for the other's destructor is when that destructor
/// is its caller: a value that holds the last handle to its own `Devres`.
///
/// # Invariants
///
/// `node_data` is the foreign pointer (a reference to `inner` made by `Arc::into_foreign`) held by
/// a devres entry of `inner.dev` whose release function is `release`, until that entry is removed
/// by `drop` or released; `inner.binding` is the binding during which it was made.
///
/// # Examples
///
/// A `Devres` goes to another thread (a work item, say) whenever its value could: `T: Send` is
/// enough, the value need not be `Sync`.
///
/// ```
/// fn handed_over<T: Send>() {}
/// handed_over::<kernel::devres::Devres<core::cell::Cell<u32>>>();
/// ```
///
/// A driver (see [`pci`](crate::pci)) usually gets one from a bus, e.g.
/// `pdev.iomap_region_sized::<SIZE>(0, c_str!("name"))`, and then:
///
/// ```
/// # use kernel::{devres::Devres, pci::Bar};
/// fn read_id(bar: &Devres<Bar<16>>) -> Result<u32> {
///     let io = bar.try_access().ok_or(ENXIO)?;
///     Ok(io.readl(0))
/// }
/// ```
///
/// A work item drops a `Devres` while the device is being unbound (on `pci-testdev`): whichever
/// side gets to the value first drops it, once, and neither the unbind nor the work item's drop
/// returns before that destructor has finished. The value sleeps while it is dropped, so the
/// other side runs meanwhile whatever CPU it is on. Rounds alternate who goes first: the work
/// item (a `Trigger` released first at unbind lets it go and waits until its drop has begun), or
/// the unbind (the work item waits until the release's drop has begun). Results are recorded
/// where they are seen and asserted by the test thread.
///
/// ```
/// use core::sync::atomic::{AtomicBool, AtomicPtr, AtomicU32, Ordering};
/// use kernel::{
///     c_str, devres::Devres, driver::Registration, new_condvar, new_mutex, pci,
///     sync::{Arc, CondVar, Mutex},
///     time::{ktime_ms_delta, msecs_to_jiffies, Ktime},
///     types::ForeignOwnable,
///     workqueue,
/// };
///
/// static DROPS: AtomicU32 = AtomicU32::new(0);
/// static WORKER_FIRST: AtomicBool = AtomicBool::new(false);
/// static SHARED: AtomicPtr<core::ffi::c_void> = AtomicPtr::new(core::ptr::null_mut());
/// static STASH: AtomicPtr<core::ffi::c_void> = AtomicPtr::new(core::ptr::null_mut());
///
/// #[derive(Default)]
/// struct State {
///     go: bool,
///     in_drop: bool,
///     drops_seen_by_worker: Option<u32>,
/// }
///
/// #[pin_data]
/// struct Shared {
///     #[pin]
///     state: Mutex<State>,
///     #[pin]
///     cv: CondVar,
/// }
///
/// impl Shared {
///     fn update(&self, f: impl FnOnce(&mut State)) {
///         f(&mut self.state.lock());
///         self.cv.notify_all();
///     }
///     fn wait_until(&self, f: impl Fn(&State) -> bool) {
///         let mut s = self.state.lock();
///         while !f(&s) {
///             self.cv.wait(&mut s);
///         }
///     }
///     fn sleep_ms(&self, ms: i64) {
///         let start = Ktime::ktime_get();
///         let mut s = self.state.lock();
///         while ktime_ms_delta(Ktime::ktime_get(), start) < ms {
///             let _ = self.cv.wait_interruptible_timeout(&mut s, msecs_to_jiffies(1));
///         }
///     }
/// }
///
/// fn shared() -> Arc<Shared> {
///     // SAFETY: The test thread keeps the reference in `SHARED` alive for the whole round.
///     unsafe { Arc::<Shared>::borrow(SHARED.load(Ordering::SeqCst)) }.into()
/// }
///
/// /// Sleeps 5 ms while it is dropped.
/// struct Slow(Arc<Shared>);
/// impl Drop for Slow {
///     fn drop(&mut self) {
///         self.0.update(|s| s.in_drop = true);
///         self.0.sleep_ms(5);
///         DROPS.fetch_add(1, Ordering::SeqCst);
///     }
/// }
///
/// /// Released at unbind before `Slow`'s entry (devres is last in, first out).
/// struct Trigger(Arc<Shared>);
/// impl Drop for Trigger {
///     fn drop(&mut self) {
///         self.0.update(|s| s.go = true);
///         if WORKER_FIRST.load(Ordering::SeqCst) {
///             self.0.wait_until(|s| s.in_drop);
///         }
///     }
/// }
///
/// struct Racer;
/// kernel::pci_device_table!(RACER_IDS, (), [(pci::DeviceId::from_id(0x1b36, 0x0005), ())]);
/// impl pci::Driver for Racer {
///     type IdInfo = ();
///     const ID_TABLE: pci::IdTable<()> = RACER_IDS;
///     type Data = ();
///     fn probe(pdev: &pci::Device<pci::Core>, _info: &()) -> Result {
///         let slow = KBox::new(Devres::new(pdev.as_ref(), Slow(shared()), GFP_KERNEL)?, GFP_KERNEL)?;
///         STASH.store(slow.into_foreign().cast_mut(), Ordering::SeqCst);
///         Devres::new_foreign_owned(pdev.as_ref(), Trigger(shared()), GFP_KERNEL)
///     }
/// }
///
/// // SAFETY: Built-in code has no module of its own; null is what it uses.
/// static MODULE: ThisModule = unsafe { ThisModule::from_ptr(core::ptr::null_mut()) };
///
/// for round in 0..6u32 {
///     let worker_first = round % 2 == 0;
///     WORKER_FIRST.store(worker_first, Ordering::SeqCst);
///     DROPS.store(0, Ordering::SeqCst);
///     let sh = Arc::pin_init(
///         pin_init!(Shared { state <- new_mutex!(State::default()), cv <- new_condvar!() }),
///         GFP_KERNEL,
///     )?;
///     SHARED.store(sh.clone().into_foreign().cast_mut(), Ordering::SeqCst);
///     let reg = KBox::pin_init(
///         Registration::<pci::Adapter<Racer>>::new(c_str!("rust_doctest_devres_race"), &MODULE),
///         GFP_KERNEL,
///     )?;
///     let w = sh.clone();
///     let work = move || {
///         w.wait_until(|s| s.go);
///         if !worker_first {
///             w.wait_until(|s| s.in_drop);
///         }
///         // SAFETY: The probe stored this reference with `into_foreign`; taken back only here.
///         drop(unsafe {
///             KBox::<Devres<Slow>>::from_foreign(STASH.swap(core::ptr::null_mut(), Ordering::SeqCst))
///         });
///         w.update(|s| s.drops_seen_by_worker = Some(DROPS.load(Ordering::SeqCst)));
///     };
///     // SAFETY: A doctest is built in: its code stays loaded until the work has run.
///     unsafe { workqueue::system().try_spawn(GFP_KERNEL, work) }?;
///     drop(reg); // unbinds, racing the work item's drop
///     // The unbind returned after the value was dropped (the round shows in a failure).
///     assert_eq!((round, DROPS.load(Ordering::SeqCst)), (round, 1));
///     sh.wait_until(|s| s.drops_seen_by_worker.is_some());
///     // So did the work item's drop.
///     assert_eq!((round, sh.state.lock().drops_seen_by_worker), (round, Some(1)));
///     assert_eq!(DROPS.load(Ordering::SeqCst), 1);
///     // SAFETY: Stored above with `into_foreign`; nothing uses it any more.
///     drop(unsafe { Arc::<Shared>::from_foreign(SHARED.swap(core::ptr::null_mut(), Ordering::SeqCst)) });
/// }
/// # Ok::<(), Error>(())
/// ```
///
/// Dropping a `Devres` takes no sleeping lock when nothing races it, so it may be done under a
/// spinlock (with `CONFIG_DEBUG_ATOMIC_SLEEP`, a sleeping lock here is reported); and a value
/// that holds the last handle to its own `Devres` is dropped at unbind without the release
/// waiting for itself (the unbind below ends within a bounded wait, in a work item so that a
/// hang fails the test instead of stopping it).
///
/// ```
/// use core::sync::atomic::{AtomicBool, AtomicPtr, Ordering};
/// use kernel::{c_str, devres::Devres, driver::Registration, new_spinlock, pci, sync::Arc, workqueue};
///
/// /// Holds (as a raw `Arc`) the handle to its own `Devres`.
/// struct Cycle(AtomicPtr<Devres<Cycle>>);
/// impl Drop for Cycle {
///     fn drop(&mut self) {
///         let me = self.0.swap(core::ptr::null_mut(), Ordering::SeqCst);
///         if !me.is_null() {
///             // SAFETY: Stored by the probe with `Arc::into_raw`; taken back only here. It is
///             // the last handle: this drops the `Devres` from within its own value's drop.
///             drop(unsafe { Arc::from_raw(me) });
///         }
///     }
/// }
///
/// static UNBOUND: AtomicBool = AtomicBool::new(false);
///
/// struct Holder;
/// kernel::pci_device_table!(HOLDER_IDS, (), [(pci::DeviceId::from_id(0x1b36, 0x0005), ())]);
/// impl pci::Driver for Holder {
///     type IdInfo = ();
///     const ID_TABLE: pci::IdTable<()> = HOLDER_IDS;
///     type Data = ();
///     fn probe(pdev: &pci::Device<pci::Core>, _info: &()) -> Result {
///         // Uncontended: dropped under a spinlock without sleeping.
///         let plain = Devres::new(pdev.as_ref(), 7u32, GFP_KERNEL)?;
///         let lock = KBox::pin_init(new_spinlock!(()), GFP_KERNEL)?;
///         let guard = lock.lock();
///         drop(plain);
///         drop(guard);
///         // The value keeps its own `Devres` alive; ours is dropped.
///         let cycle = Arc::new(
///             Devres::new(pdev.as_ref(), Cycle(AtomicPtr::new(core::ptr::null_mut())), GFP_KERNEL)?,
///             GFP_KERNEL,
///         )?;
///         let me = Arc::into_raw(cycle.clone()).cast_mut();
///         cycle.access(pdev.as_ref())?.0.store(me, Ordering::SeqCst);
///         Ok(())
///     }
/// }
///
/// // SAFETY: Built-in code has no module of its own; null is what it uses.
/// static MODULE: ThisModule = unsafe { ThisModule::from_ptr(core::ptr::null_mut()) };
///
/// let reg = KBox::pin_init(
///     Registration::<pci::Adapter<Holder>>::new(c_str!("rust_doctest_devres_cycle"), &MODULE),
///     GFP_KERNEL,
/// )?;
/// let work = move || {
///     drop(reg); // unbinds: the release drops `Cycle`, which drops its own `Devres`
///     UNBOUND.store(true, Ordering::SeqCst);
/// };
/// // SAFETY: A doctest is built in: its code stays loaded until the work has run.
/// unsafe { workqueue::system().try_spawn(GFP_KERNEL, work) }?;
/// for _ in 0..2000 {
///     if UNBOUND.load(Ordering::SeqCst) {
///         break;
///     }
///     // SAFETY: The test runs in process context, where `msleep` may sleep.
///     unsafe { kernel::bindings::msleep(1) };
/// }
/// // Within two seconds: the release did not wait for itself.
/// assert!(UNBOUND.load(Ordering::SeqCst));
/// # Ok::<(), Error>(())
/// ```
pub struct Devres<T: Send + 'static> {
    inner: Arc<DevresInner<T>>,
    node_data: usize,
    release: ReleaseFn,
}

// SAFETY: The `Devres` is the only way to the value: its holder alone reads it (through
// `access`/`try_access*`, which borrow the `Devres`). The other holder of `inner`, the devres
// entry, only revokes it on the unbinding thread (atomics, a grace period, and dropping the
// value there, which `T: Send` allows), and never makes a `&T`. So handing the `Devres` to
// another thread needs `T: Send`, not `T: Sync`. (Sharing it, `&Devres<T>` on several threads,
// gives `&T` to each: its auto `Sync` asks `T: Send + Sync` through `Arc<DevresInner<T>>`.)
unsafe impl<T: Send + 'static> Send for Devres<T> {}

/// The devres release function: the device is being unbound (or released).
///
/// # Safety
///
/// `res` must be the data area of a devres entry made by [`Devres::register`] for this `T`.
unsafe extern "C" fn devres_release<T: Send + 'static>(
    _dev: *mut bindings::device,
    res: *mut c_void,
) {
    // SAFETY: By the safety requirements, `res` holds the pointer written by `register`, made by
    // `Arc::into_foreign`; the driver core removed the entry from the device's list before calling
    // this, so no one else will take this reference again.
    let inner = unsafe { Arc::<DevresInner<T>>::from_foreign(*res.cast::<*const c_void>()) };
    inner.dropped.drop_once(|| {
        if inner.binding.synced.load(Ordering::Acquire) {
            // SAFETY: Every access to `inner.data` goes through `Devres::try_access*`, which
            // checks `binding.bound` in the same RCU critical section, or `Devres::access`,
            // which needs the binding alive; `synced` means `bound` was cleared and a grace
            // period has elapsed since, so no access is in progress or can start.
            unsafe { inner.data.revoke_nosync() };
        } else {
            // SAFETY: The driver core calls release functions from the device's unbind or
            // release, in process context outside any RCU read-side critical section: this
            // thread holds no guard.
            unsafe { inner.data.revoke() };
        }
    });
}

/// Matches a devres entry made by [`Devres::register`] against a foreign pointer.
///
/// # Safety
///
/// `res` must be the data area of a devres entry whose release function is `devres_release`.
unsafe extern "C" fn devres_match(
    _dev: *mut bindings::device,
    res: *mut c_void,
    data: *mut c_void,
) -> c_int {
    // SAFETY: By the safety requirements `res` starts with a pointer written by `register`.
    let stored = unsafe { *res.cast::<*const c_void>() };
    c_int::from(core::ptr::eq(stored, data.cast_const()))
}

impl<T: Send + 'static> Devres<T> {
    /// Adds a devres entry for `data` to `dev`; returns the value's state, the entry's foreign
    /// pointer (a reference to that state) and the entry's release function.
    fn register(
        dev: &Device<Bound>,
        data: T,
        flags: Flags,
    ) -> Result<(Arc<DevresInner<T>>, *const c_void, ReleaseFn)> {
        // A bound device has a binding that has not ended; `ENODEV` if its bus keeps none.
        let binding = find_binding(dev).ok_or(ENODEV)?;
        if !binding.bound.load(Ordering::Relaxed) {
            return Err(ENODEV);
        }
        let inner = Arc::pin_init(
            pin_init!(DevresInner {
                dev: ARef::from(&**dev),
                binding,
                data <- Revocable::new(data),
                dropped <- DropOnce::new(),
            }),
            flags,
        )?;
        let release: ReleaseFn = devres_release::<T>;
        let node = Node::<*const c_void>::alloc(release, c"rust_devres", flags)?;
        let node_data = inner.clone().into_foreign();
        // SAFETY: `release` takes back the `Arc<DevresInner<T>>` reference stored by
        // `into_foreign`.
        unsafe { node.add(dev, node_data) };
        Ok((inner, node_data, release))
    }

    /// Ties `data` to the current binding of `dev`: it is dropped when that binding ends or
    /// when the returned object is dropped, whichever is first.
    ///
    /// # Examples
    ///
    /// ```
    /// # use kernel::{devres::Devres, device::{Bound, Device}};
    /// fn keep(dev: &Device<Bound>) -> Result<Devres<KVec<u8>>> {
    ///     Devres::new(dev, KVec::with_capacity(64, GFP_KERNEL)?, GFP_KERNEL)
    /// }
    /// ```
    pub fn new(dev: &Device<Bound>, data: T, flags: Flags) -> Result<Self> {
        let (inner, node_data, release) = Self::register(dev, data, flags)?;
        // INVARIANT: `register` added the entry holding `node_data`, released by `release`.
        Ok(Self {
            inner,
            node_data: node_data as usize,
            release,
        })
    }

    /// Like [`Devres::new`], but leaves ownership to the device: the value is dropped when the
    /// binding ends, and there is no handle to access it.
    ///
    /// # Examples
    ///
    /// ```
    /// # use kernel::{devres::Devres, device::{Bound, Device}};
    /// fn log_on_unbind(dev: &Device<Bound>) -> Result {
    ///     struct Bye;
    ///     impl Drop for Bye {
    ///         fn drop(&mut self) {
    ///             pr_info!("unbound\n");
    ///         }
    ///     }
    ///     Devres::new_foreign_owned(dev, Bye, GFP_KERNEL)
    /// }
    /// ```
    pub fn new_foreign_owned(dev: &Device<Bound>, data: T, flags: Flags) -> Result {
        // Only the devres entry keeps a reference; ours is dropped here.
        Self::register(dev, data, flags).map(|_| ())
    }

    /// Returns the value, given the device it belongs to, bound: no RCU, no atomic
    /// read-modify-write, as cheap as a field access and a comparison.
    ///
    /// `EINVAL` if `dev` is not the device of this `Devres`; `ENXIO` if the binding this
    /// `Devres` was made in has ended (the device was unbound and bound again since).
    ///
    /// # Examples
    ///
    /// ```
    /// # use kernel::{devres::Devres, device::{Bound, Device}};
    /// fn len(dev: &Device<Bound>, v: &Devres<KVec<u8>>) -> Result<usize> {
    ///     Ok(v.access(dev)?.len())
    /// }
    /// ```
    ///
    /// Another device, even a bound one, is refused: a driver bound to two devices (QEMU's
    /// `pci-testdev` and `edu`; this test expects both) tries, in its second probe, the value
    /// of the first.
    ///
    /// ```
    /// use core::sync::atomic::{AtomicPtr, AtomicU32, Ordering};
    /// use kernel::{c_str, devres::Devres, driver::Registration, pci, sync::Arc};
    /// use kernel::types::ForeignOwnable;
    ///
    /// static FIRST: AtomicPtr<core::ffi::c_void> = AtomicPtr::new(core::ptr::null_mut());
    /// // Bit 0: the second probe got its own value; bit 1: the first's was refused (EINVAL).
    /// static SEEN: AtomicU32 = AtomicU32::new(0);
    ///
    /// struct Two;
    /// kernel::pci_device_table!(IDS, (), [
    ///     (pci::DeviceId::from_id(0x1b36, 0x0005), ()),
    ///     (pci::DeviceId::from_id(0x1234, 0x11e8), ()),
    /// ]);
    /// impl pci::Driver for Two {
    ///     type IdInfo = ();
    ///     const ID_TABLE: pci::IdTable<()> = IDS;
    ///     type Data = Arc<Devres<u32>>;
    ///
    ///     fn probe(pdev: &pci::Device<pci::Core>, _info: &()) -> Result<Self::Data> {
    ///         let own = Arc::new(Devres::new(pdev.as_ref(), 7u32, GFP_KERNEL)?, GFP_KERNEL)?;
    ///         let first = FIRST.load(Ordering::SeqCst);
    ///         if first.is_null() {
    ///             FIRST.store(own.clone().into_foreign().cast_mut(), Ordering::SeqCst);
    ///         } else {
    ///             // SAFETY: The first probe stored it with `into_foreign`; taken back only
    ///             // after the registration is gone.
    ///             let other = unsafe { <Arc<Devres<u32>> as ForeignOwnable>::borrow(first) };
    ///             if own.access(pdev.as_ref()) == Ok(&7) {
    ///                 SEEN.fetch_or(1, Ordering::SeqCst);
    ///             }
    ///             if other.access(pdev.as_ref()).err() == Some(EINVAL) {
    ///                 SEEN.fetch_or(2, Ordering::SeqCst);
    ///             }
    ///         }
    ///         Ok(own)
    ///     }
    /// }
    ///
    /// // SAFETY: Built-in code has no module of its own; null is what it uses.
    /// static MODULE: ThisModule = unsafe { ThisModule::from_ptr(core::ptr::null_mut()) };
    ///
    /// let reg = KBox::pin_init(
    ///     Registration::<pci::Adapter<Two>>::new(c_str!("rust_doctest_devres_two"), &MODULE),
    ///     GFP_KERNEL,
    /// )?;
    /// drop(reg);
    /// // SAFETY: The first probe stored it with `into_foreign`; taken back only here.
    /// drop(unsafe {
    ///     <Arc<Devres<u32>> as ForeignOwnable>::from_foreign(FIRST.swap(
    ///         core::ptr::null_mut(),
    ///         Ordering::SeqCst,
    ///     ))
    /// });
    /// assert_eq!(SEEN.load(Ordering::SeqCst), 3);
    /// # Ok::<(), Error>(())
    /// ```
    #[inline]
    pub fn access<'a>(&'a self, dev: &'a Device<Bound>) -> Result<&'a T> {
        if !core::ptr::eq(dev.as_raw(), self.inner.dev.as_raw()) {
            return Err(EINVAL);
        }
        // Relaxed: our binding is either the one `dev` guarantees for `'a`, which cannot end
        // before `'a` does, or one that ended before the current binding began, which the
        // driver core's device lock ordered before this.
        if !self.inner.binding.bound.load(Ordering::Relaxed) {
            return Err(ENXIO);
        }
        // SAFETY: The binding this `Devres` was made in is the current one and lasts at least
        // for `'a`, so the release function (which runs after it ended) cannot revoke the value
        // during `'a`; nor can `drop`, since `self` is borrowed for `'a`. So the value is
        // available for `'a`.
        Ok(unsafe { self.inner.data.access_unchecked() })
    }

    /// Returns a guard giving access to the value, or [`None`] once it has been revoked.
    ///
    /// For code that only holds the `Devres` (a worker, say): the guard holds an RCU read-side
    /// critical section, so do not sleep while holding it. With the bound device at hand,
    /// [`Devres::access`] is cheaper.
    ///
    /// # Examples
    ///
    /// ```
    /// # use kernel::devres::Devres;
    /// fn len(v: &Devres<KVec<u8>>) -> Option<usize> {
    ///     v.try_access().map(|v| v.len())
    /// }
    /// ```
    #[inline]
    pub fn try_access(&self) -> Option<RevocableGuard<'_, T>> {
        let rcu = rcu::read_lock();
        if !self.inner.binding.bound.load(Ordering::Relaxed) {
            return None;
        }
        self.inner.data.try_access_in(rcu)
    }

    /// Runs `f` on the value inside one RCU read-side critical section and returns its result,
    /// or [`None`] once the value has been revoked: as [`Devres::try_access`], with an access
    /// that ends with the call (no guard to keep across a sleep; `f` itself must not sleep).
    ///
    /// # Examples
    ///
    /// ```
    /// # use kernel::devres::Devres;
    /// fn len(v: &Devres<KVec<u8>>) -> Option<usize> {
    ///     v.try_access_with(|v| v.len())
    /// }
    /// ```
    #[inline]
    pub fn try_access_with<R>(&self, f: impl FnOnce(&T) -> R) -> Option<R> {
        self.try_access().map(|guard| f(&guard))
    }

    /// As [`Devres::try_access`], and the access also shows the device bound: for code that
    /// holds only the `Devres` (a worker, say) and needs what a bound device alone offers
    /// ([`pci::Device::is_present`](crate::pci::Device::is_present), its config space) while
    /// it uses the value. [`None`] once the value has been revoked, as there.
    ///
    /// # Examples
    ///
    /// ```
    /// # use kernel::{devres::Devres, pci};
    /// fn gone(bar: &Devres<u32>) -> Option<bool> {
    ///     let guard = bar.try_access_bound()?;
    ///     let pdev = pci::Device::from_device(guard.device())?;
    ///     Some(*guard == u32::MAX && !pdev.is_present())
    /// }
    /// ```
    #[inline]
    pub fn try_access_bound(&self) -> Option<BoundGuard<'_, T>> {
        Some(BoundGuard {
            guard: self.try_access()?,
            dev: &self.inner.dev,
        })
    }

    /// Returns a reference to the value valid for the given RCU guard, or [`None`] once it has
    /// been revoked.
    ///
    /// # Examples
    ///
    /// ```
    /// # use kernel::{devres::Devres, sync::rcu};
    /// fn both(a: &Devres<u32>, b: &Devres<u32>) -> Option<u32> {
    ///     let guard = rcu::read_lock();
    ///     Some(*a.try_access_with_guard(&guard)? + *b.try_access_with_guard(&guard)?)
    /// }
    /// ```
    #[inline]
    pub fn try_access_with_guard<'a>(&'a self, guard: &'a rcu::Guard) -> Option<&'a T> {
        if !self.inner.binding.bound.load(Ordering::Relaxed) {
            return None;
        }
        self.inner.data.try_access_with_guard(guard)
    }

    /// Returns the device the value is tied to.
    ///
    /// # Examples
    ///
    /// ```
    /// # use kernel::devres::Devres;
    /// fn say(v: &Devres<u32>) {
    ///     kernel::dev_info!(v.device(), "still here\n");
    /// }
    /// ```
    pub fn device(&self) -> &Device {
        &self.inner.dev
    }
}

/// An access to a [`Devres`]'s value that also shows its device bound (see
/// [`Devres::try_access_bound`]).
///
/// # Invariants
///
/// `guard` was taken while the binding that `dev`'s `Devres` was made in was current (its
/// `bound` seen set inside `guard`'s RCU read-side section).
pub struct BoundGuard<'a, T> {
    guard: RevocableGuard<'a, T>,
    dev: &'a Device,
}

impl<T> core::ops::Deref for BoundGuard<'_, T> {
    type Target = T;

    #[inline]
    fn deref(&self) -> &T {
        &self.guard
    }
}

impl<T> BoundGuard<'_, T> {
    /// The device, bound for as long as this access lasts (the returned reference cannot
    /// outlive it).
    #[inline]
    pub fn device(&self) -> &Device<Bound> {
        // SAFETY: By the type invariant the binding was current inside `guard`'s RCU read-side
        // section, which lasts as long as `self`. `binding_end` clears `bound` and then waits
        // for a grace period before the adapter lets the unbind go on, so the binding cannot
        // end while `self` lives: `dev` is bound for the returned lifetime.
        unsafe { Device::from_raw(self.dev.as_raw()) }
    }
}

impl<T: Send + 'static> Devres<T> {
    /// Takes our entry off the device, so that none of ours is left behind (its release, if it
    /// runs meanwhile, has lost the claim and waits). Called once, by the side that claimed the
    /// value in `drop_once`.
    fn remove_entry(&self) {
        // SAFETY: The device is valid (we hold a reference); `release` is the release function
        // the entry was made with, so `devres_match` only looks at our entries. `devres_remove`
        // takes the entry off the list under the devres spinlock, or returns null if the
        // release path took it first.
        let node = unsafe {
            bindings::devres_remove(
                self.inner.dev.as_raw(),
                Some(self.release),
                Some(devres_match),
                self.node_data as *mut c_void,
            )
        };
        if !node.is_null() {
            // SAFETY: The entry is ours again (off the list) and holds the `node_data`
            // reference, which we take back; the entry is then freed without calling its
            // release function.
            unsafe {
                drop(Arc::<DevresInner<T>>::from_foreign(
                    self.node_data as *const c_void,
                ));
                bindings::devres_free(node);
            }
        }
    }

    /// Ends the value's tie to the binding early, as dropping the `Devres` would, but hands the
    /// value to `f` instead of dropping it; `f` runs where the destructor would (an unbind
    /// racing this waits until `f` has returned). `None` if the binding ended first: the value
    /// was dropped then, and `f` does not run.
    ///
    /// For abstractions whose value must be undone in a particular way (a DMA mapping giving its
    /// buffer back): `f` must leave nothing of the value that needs the binding.
    pub(crate) fn take_with<R>(self, f: impl FnOnce(T) -> R) -> Option<R>
    where
        T: Unpin,
    {
        let mut out = None;
        self.inner.dropped.drop_once(|| {
            // SAFETY: We own the `Devres`, so no guard of its revocable exists (guards borrow
            // `self`) and none can be made: no access is in flight.
            if let Some(value) = unsafe { self.inner.data.take_nosync() } {
                out = Some(f(value));
            }
            self.remove_entry();
        });
        // Our drop below finds the value claimed by this task, and does nothing more.
        out
    }
}

impl<T: Send + 'static> Drop for Devres<T> {
    fn drop(&mut self) {
        // Whichever of this drop and the entry's release claims the value first drops it; the
        // other waits until that destructor has finished.
        self.inner.dropped.drop_once(|| {
            // SAFETY: We own the `Devres`, so no guard of its revocable exists (guards borrow
            // `self`) and none can be made: no access is in flight.
            unsafe { self.inner.data.revoke_nosync() };
            self.remove_entry();
        });
    }
}
