// SPDX-License-Identifier: GPL-2.0

//! Resources tied to a device's binding to its driver ("device resource management").
//!
//! C header: [`include/linux/device/devres.h`](srctree/include/linux/device/devres.h)

use crate::prelude::*;
use crate::{
    alloc::{flags::GFP_KERNEL, Flags},
    bindings,
    device::Device,
    error::{code::ENOMEM, Result},
    ffi::{c_int, c_void},
    init::InPlaceInit,
    revocable::{Revocable, RevocableGuard},
    sync::{rcu, Arc},
    types::{ARef, ForeignOwnable},
};
use core::sync::atomic::{AtomicBool, Ordering};

/// State of one binding of a device to a driver, shared by the [`Devres`] made during it.
///
/// Bus adapters call [`binding_begin`] before a driver's probe and [`binding_end`] after its
/// remove (or failed probe). Ending the binding refuses access to every `Devres` of the binding
/// at once and waits for one RCU grace period; the devres release functions that run next drop
/// their values without waiting again. So unbinding costs one grace period, not one per
/// resource.
///
/// # Invariants
///
/// `synced` is set only after `bound` was cleared and a grace period elapsed since.
struct Binding {
    bound: AtomicBool,
    synced: AtomicBool,
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
        },
        GFP_KERNEL,
    )?;
    let node = PointerNode::alloc(binding_release, c"rust_devres_binding", GFP_KERNEL)?;
    // SAFETY: `binding_release` takes back the `Arc<Binding>` stored by `into_foreign`.
    unsafe { node.add(dev, binding.into_foreign()) };
    Ok(())
}

/// A devres entry, not yet added to a device, whose contents are one pointer.
struct PointerNode(*mut c_void);

impl PointerNode {
    /// Allocates an entry that `release` will release.
    fn alloc(
        release: unsafe extern "C" fn(*mut bindings::device, *mut c_void),
        name: &'static core::ffi::CStr,
        flags: Flags,
    ) -> Result<Self> {
        // SAFETY: The size is that of the one pointer the entry holds; the name is static.
        let node = unsafe {
            bindings::__devres_alloc_node(
                Some(release),
                core::mem::size_of::<*const c_void>(),
                flags.as_raw(),
                bindings::NUMA_NO_NODE,
                name.as_ptr().cast(),
            )
        };
        if node.is_null() {
            return Err(ENOMEM);
        }
        Ok(Self(node))
    }

    /// Stores `ptr` in the entry and adds the entry to `dev`, which from then on owns `ptr`.
    ///
    /// # Safety
    ///
    /// The entry's release function must take over `ptr` as the owner it is handed from.
    unsafe fn add(self, dev: &Device, ptr: *const c_void) {
        // SAFETY: The entry is new, has room for one pointer and is on no list yet; `dev` is
        // valid since we hold a reference to it.
        unsafe {
            self.0.cast::<*const c_void>().write(ptr);
            bindings::devres_add(dev.as_raw(), self.0);
        }
    }
}

/// Ends the current binding of `dev`: no [`Devres`] of it gives access any more once this
/// returns, and accesses that were in progress have ended. Bus adapters call it after the
/// driver's remove, or after its probe failed. Might sleep.
pub(crate) fn binding_end(dev: &Device) {
    if let Some(binding) = find_binding(dev) {
        if binding.bound.swap(false, Ordering::Relaxed) {
            rcu::synchronize();
            // INVARIANT: `bound` was cleared and a grace period elapsed.
            binding.synced.store(true, Ordering::Release);
        }
    }
}

#[pin_data]
struct DevresInner<T> {
    dev: ARef<Device>,
    binding: Option<Arc<Binding>>,
    #[pin]
    data: Revocable<T>,
}

impl<T> DevresInner<T> {
    /// Whether the binding (if any) still allows access; call inside an RCU critical section.
    #[inline]
    fn bound(&self) -> bool {
        self.binding
            .as_ref()
            .map_or(true, |b| b.bound.load(Ordering::Relaxed))
    }
}

/// A value that lives at most as long as a device stays bound to its driver.
///
/// The value is revoked (dropped, after in-flight accesses end) when the device is unbound, or
/// when the `Devres` is dropped, whichever comes first. Until then [`Devres::try_access`] gives
/// access to it; afterwards it returns [`None`]. This is how a driver keeps, say, a mapped BAR
/// that it can no longer touch once the device is gone.
///
/// On unbind the driver core calls a devres release function registered here, which revokes the
/// value. When the bus adapter tracks the binding (PCI does), access to all `Devres` of the
/// device was already refused after the driver's `remove`, with a single RCU grace period for
/// all of them, and the values are dropped in the usual devres order without waiting again;
/// otherwise each revocation waits for its own grace period. Dropping the `Devres` first removes
/// that devres entry and drops the value without waiting at all: owning the `Devres` means no
/// access is in flight.
///
/// # Invariants
///
/// `node` is the address of the devres entry of `inner.dev` that holds `foreign` (a reference to
/// `inner` made by `Arc::into_foreign`), while that entry is registered; the entry's release
/// function is `devres_release::<T>`.
///
/// # Examples
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
pub struct Devres<T: Send + 'static> {
    inner: Arc<DevresInner<T>>,
    foreign: usize,
}

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
    match &inner.binding {
        Some(binding) if binding.synced.load(Ordering::Acquire) => {
            // SAFETY: Every access to `inner.data` goes through `Devres::try_access*`, which
            // checks `binding.bound` in the same RCU critical section; `synced` means `bound`
            // was cleared and a grace period has elapsed since, so no access is in progress or
            // can start.
            unsafe { inner.data.revoke_nosync() };
        }
        _ => inner.data.revoke(),
    }
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
    fn register(dev: &Device, data: T, flags: Flags) -> Result<(Arc<DevresInner<T>>, usize)> {
        let inner = Arc::pin_init(
            pin_init!(DevresInner {
                dev: dev.into(),
                binding: find_binding(dev),
                data <- Revocable::new(data),
            }),
            flags,
        )?;
        let node = PointerNode::alloc(devres_release::<T>, c"rust_devres", flags)?;
        let foreign = inner.clone().into_foreign();
        // SAFETY: `devres_release::<T>` takes back the `Arc<DevresInner<T>>` reference stored by
        // `into_foreign`.
        unsafe { node.add(dev, foreign) };
        Ok((inner, foreign as usize))
    }

    /// Ties `data` to the binding of `dev`: it is dropped on unbind or when the returned object
    /// is dropped, whichever is first.
    ///
    /// Should be called while `dev` is bound (e.g. in probe); if it never gets bound, the value
    /// lives until the device is released or the `Devres` is dropped.
    ///
    /// # Examples
    ///
    /// ```
    /// # use kernel::{devres::Devres, device::Device};
    /// fn keep(dev: &Device) -> Result<Devres<KVec<u8>>> {
    ///     Devres::new(dev, KVec::with_capacity(64, GFP_KERNEL)?, GFP_KERNEL)
    /// }
    /// ```
    pub fn new(dev: &Device, data: T, flags: Flags) -> Result<Self> {
        let (inner, foreign) = Self::register(dev, data, flags)?;
        // INVARIANT: `register` added the entry holding `foreign` to `dev`.
        Ok(Self { inner, foreign })
    }

    /// Like [`Devres::new`], but leaves ownership to the device: the value is dropped when the
    /// device is unbound (or released), and there is no handle to access it.
    ///
    /// # Examples
    ///
    /// ```
    /// # use kernel::{devres::Devres, device::Device};
    /// fn log_on_unbind(dev: &Device) -> Result {
    ///     struct Bye;
    ///     impl Drop for Bye {
    ///         fn drop(&mut self) {
    ///             pr_info!("unbound\n");
    ///         }
    ///     }
    ///     Devres::new_foreign_owned(dev, Bye, GFP_KERNEL)
    /// }
    /// ```
    pub fn new_foreign_owned(dev: &Device, data: T, flags: Flags) -> Result {
        // Only the devres entry keeps a reference; ours is dropped here.
        Self::register(dev, data, flags).map(|_| ())
    }

    /// Returns a guard giving access to the value, or [`None`] once it has been revoked.
    ///
    /// The guard holds an RCU read-side critical section: do not sleep while holding it.
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
        if !self.inner.bound() {
            return None;
        }
        self.inner.data.try_access_in(rcu)
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
        if !self.inner.bound() {
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

impl<T: Send + 'static> Drop for Devres<T> {
    fn drop(&mut self) {
        // SAFETY: The device is valid (we hold a reference), and the entries with release function
        // `devres_release::<T>` are ours, so `devres_match` may look at them. `devres_remove`
        // takes the entry off the device's list under its devres lock and returns it, or returns
        // null if the release path took it first.
        let node = unsafe {
            bindings::devres_remove(
                self.inner.dev.as_raw(),
                Some(devres_release::<T>),
                Some(devres_match),
                self.foreign as *mut c_void,
            )
        };
        if node.is_null() {
            // The release path owns the entry's reference and revokes, waiting for readers; ours
            // goes away with `self.inner`.
            return;
        }
        // SAFETY: The entry is ours again (off the list) and holds the `foreign` reference, which
        // we take back; the entry is then freed without calling its release function.
        unsafe {
            drop(Arc::<DevresInner<T>>::from_foreign(
                self.foreign as *const c_void,
            ));
            bindings::devres_free(node);
        }
        // SAFETY: We own the `Devres`, so no guard of its revocable exists (guards borrow
        // `self`), and with the entry gone nothing else can reach the value.
        unsafe { self.inner.data.revoke_nosync() };
    }
}
