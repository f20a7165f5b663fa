// SPDX-License-Identifier: GPL-2.0

//! Objects whose access can be revoked at run time.
//!
//! A [`Revocable`] hands out short-lived access to the value it wraps until it is revoked; from
//! then on every attempt to access it fails, and the value is dropped once the accesses that were
//! already in progress have ended. Readers are tracked with RCU, so access is cheap and never
//! blocks.

use crate::prelude::*;
use crate::{
    bindings,
    init::{self, PinInit},
    sync::rcu,
};
use core::{
    cell::UnsafeCell,
    marker::PhantomPinned,
    mem::MaybeUninit,
    ops::Deref,
    sync::atomic::{AtomicBool, Ordering},
};

/// A value that can be revoked.
///
/// [`Revocable::try_access`] returns a guard that dereferences to the value, or [`None`] once
/// [`Revocable::revoke`] has begun. `revoke()` waits (with `synchronize_rcu()`) until the guards
/// handed out before it have been dropped, then drops the value. Dropping a `Revocable` that was
/// never revoked drops the value too; either way it is dropped exactly once.
///
/// The value is pinned: it is dropped in place and never moved.
///
/// # Invariants
///
/// - `data` is initialised while `available` is `true`, and also after `available` became `false`
///   until the [`Revocable::revoke`] call that cleared it has dropped it.
/// - `available` goes from `true` to `false` at most once, and only the context that made that
///   change drops `data`.
/// - A reader only dereferences `data` inside an RCU read-side critical section in which it saw
///   `available == true`.
///
/// # Examples
///
/// ```
/// use kernel::revocable::Revocable;
///
/// let r = KBox::pin_init(Revocable::new(42u32), GFP_KERNEL)?;
/// assert_eq!(r.try_access().map(|v| *v), Some(42));
/// // SAFETY: The guard above is gone; this thread holds none.
/// assert!(unsafe { r.revoke() });
/// assert!(r.try_access().is_none());
/// # Ok::<(), Error>(())
/// ```
///
/// Revoking waits for the grace period: a reader that holds a guard while `revoke()` runs sees
/// the value alive until it lets go. The reader is a work item pinned to the CPU the test thread
/// is not on (the rig's guests have two); it takes a guard and keeps it (without sleeping, as RCU
/// readers must) for 100 ms, noting the drops so far just before it lets go, while the test
/// thread revokes. A `revoke()` that did not wait would be seen by it. Should the test thread
/// have moved to the reader's CPU meanwhile (then the two cannot overlap), the round is tried
/// again; the test asserts that one round overlapped.
///
/// ```
/// use core::sync::atomic::{AtomicU32, Ordering};
/// use kernel::{
///     new_condvar, new_spinlock,
///     revocable::Revocable,
///     sync::{Arc, CondVar, SpinLock},
///     time::{ktime_ms_delta, Ktime},
///     workqueue,
/// };
///
/// static DROPS: AtomicU32 = AtomicU32::new(0);
///
/// struct Counted;
///
/// impl Drop for Counted {
///     fn drop(&mut self) {
///         DROPS.fetch_add(1, Ordering::SeqCst);
///     }
/// }
///
/// /// What the reader saw: it held a guard, the drops by the time it let go, it is done.
/// #[derive(Clone, Copy, Default)]
/// struct Seen {
///     held: bool,
///     drops_at_release: Option<u32>,
///     done: bool,
/// }
///
/// #[pin_data]
/// struct Shared {
///     #[pin]
///     res: Revocable<Counted>,
///     #[pin]
///     seen: SpinLock<Seen>,
///     #[pin]
///     cv: CondVar,
/// }
///
/// let mut overlapped = 0;
/// for _round in 0..5 {
///     DROPS.store(0, Ordering::SeqCst);
///     let shared = Arc::pin_init(
///         pin_init!(Shared {
///             res <- Revocable::new(Counted),
///             seen <- new_spinlock!(Seen::default()),
///             cv <- new_condvar!(),
///         }),
///         GFP_KERNEL,
///     )?;
///     let s = shared.clone();
///     let other = (workqueue::current_cpu() + 1) % 2;
///     let work = move || {
///         if let Some(guard) = s.res.try_access() {
///             s.seen.lock().held = true;
///             s.cv.notify_all();
///             let start = Ktime::ktime_get();
///             while ktime_ms_delta(Ktime::ktime_get(), start) < 100 {
///                 core::hint::spin_loop();
///             }
///             s.seen.lock().drops_at_release = Some(DROPS.load(Ordering::SeqCst));
///             drop(guard);
///         }
///         s.seen.lock().done = true;
///         s.cv.notify_all();
///     };
///     // SAFETY: A doctest is built in: its code stays loaded until the work has run.
///     unsafe { workqueue::system().try_spawn_on(other, GFP_KERNEL, work) }?;
///     let mut seen = shared.seen.lock();
///     while !seen.held && !seen.done {
///         shared.cv.wait(&mut seen);
///     }
///     // The reader holds its guard right now, as `revoke()` begins.
///     let holding = seen.held && seen.drops_at_release.is_none();
///     drop(seen);
///     // SAFETY: This thread holds no guard (the reader's is another thread's).
///     assert!(unsafe { shared.res.revoke() });
///     assert_eq!(DROPS.load(Ordering::SeqCst), 1);
///     let mut seen = shared.seen.lock();
///     while !seen.done {
///         shared.cv.wait(&mut seen);
///     }
///     if seen.held {
///         // Not dropped before the reader let go.
///         assert_eq!(seen.drops_at_release, Some(0));
///     }
///     drop(seen);
///     assert!(shared.res.try_access().is_none());
///     // Revoking again does nothing.
///     // SAFETY: This thread holds no guard.
///     assert!(!unsafe { shared.res.revoke() });
///     drop(shared);
///     assert_eq!(DROPS.load(Ordering::SeqCst), 1);
///     if holding {
///         overlapped += 1;
///         break;
///     }
/// }
/// assert_eq!(overlapped, 1);
/// # Ok::<(), Error>(())
/// ```
#[pin_data(PinnedDrop)]
pub struct Revocable<T> {
    available: AtomicBool,
    #[pin]
    data: RevocableData<T>,
}

/// The storage of a [`Revocable`]: maybe-initialised, pinned, shared between threads.
struct RevocableData<T> {
    value: UnsafeCell<MaybeUninit<T>>,
    _pin: PhantomPinned,
}

// SAFETY: A `Revocable<T>` may be moved to another thread only as a whole, which moves the `T`
// (dropped there, possibly); this is fine when `T: Send`.
unsafe impl<T: Send> Send for Revocable<T> {}

// SAFETY: Sharing a `Revocable<T>` gives other threads `&T` (through guards), which needs
// `T: Sync`, and lets any of them call `revoke()` and so drop the `T` there, which needs
// `T: Send`.
unsafe impl<T: Sync + Send> Sync for Revocable<T> {}

impl<T> Revocable<T> {
    /// Creates a new, available revocable from an initialiser of the value.
    ///
    /// # Examples
    ///
    /// ```
    /// use kernel::revocable::Revocable;
    ///
    /// let r = KBox::pin_init(Revocable::new(KVec::<u8>::new()), GFP_KERNEL)?;
    /// assert_eq!(r.try_access().map(|v| v.len()), Some(0));
    /// # Ok::<(), Error>(())
    /// ```
    pub fn new(data: impl PinInit<T>) -> impl PinInit<Self> {
        pin_init!(Self {
            available: AtomicBool::new(true),
            data <- RevocableData::new(data),
        })
    }

    /// Returns a guard giving access to the value, or [`None`] if it has been revoked.
    ///
    /// The guard holds an RCU read-side critical section: keep it short and do not sleep while
    /// holding it. [`Revocable::revoke`] waits for it.
    ///
    /// # Examples
    ///
    /// ```
    /// use kernel::revocable::Revocable;
    ///
    /// let r = KBox::pin_init(Revocable::new(7u8), GFP_KERNEL)?;
    /// if let Some(v) = r.try_access() {
    ///     assert_eq!(*v, 7);
    /// }
    /// # Ok::<(), Error>(())
    /// ```
    #[inline]
    pub fn try_access(&self) -> Option<RevocableGuard<'_, T>> {
        self.try_access_in(rcu::read_lock())
    }

    /// Runs `f` on the value inside one RCU read-side critical section and returns its result,
    /// or [`None`] if the value has been revoked.
    ///
    /// The access ends with the call: no guard outlives it, so none can be kept across a sleep
    /// by accident, and `f` cannot return a reference into the value. `f` itself must not
    /// sleep (it runs in the critical section).
    ///
    /// # Examples
    ///
    /// ```
    /// use kernel::revocable::Revocable;
    ///
    /// let v = KBox::pin_init(Revocable::new(7u32), GFP_KERNEL)?;
    /// assert_eq!(v.try_access_with(|x| *x + 1), Some(8));
    /// // SAFETY: No guard of `v` is held.
    /// unsafe { v.revoke() };
    /// assert_eq!(v.try_access_with(|x| *x + 1), None);
    /// # Ok::<(), Error>(())
    /// ```
    #[inline]
    pub fn try_access_with<R>(&self, f: impl FnOnce(&T) -> R) -> Option<R> {
        self.try_access().map(|guard| f(&guard))
    }

    /// Like [`Revocable::try_access`], in a critical section the caller already entered (and may
    /// have used to check more conditions).
    #[inline]
    pub(crate) fn try_access_in(&self, rcu: rcu::Guard) -> Option<RevocableGuard<'_, T>> {
        // Relaxed suffices (and spares a fence per access on arm64 and riscv64): the value was
        // initialised before this revocable could be shared, and whatever shared it synchronised;
        // ordering against `revoke()` comes from RCU, whose grace period waits for a reader that
        // still saw `true`.
        if self.available.load(Ordering::Relaxed) {
            // INVARIANT: `available` was seen `true` inside the critical section held by `rcu`.
            Some(RevocableGuard {
                data: self.data.value.get().cast::<T>(),
                _rcu: rcu,
                _lifetime: core::marker::PhantomData,
            })
        } else {
            None
        }
    }

    /// Returns a reference to the value, valid as long as the given RCU guard, or [`None`] if it
    /// has been revoked.
    ///
    /// Useful to access several revocables under one critical section.
    ///
    /// # Examples
    ///
    /// ```
    /// use kernel::{revocable::Revocable, sync::rcu};
    ///
    /// let a = KBox::pin_init(Revocable::new(1u32), GFP_KERNEL)?;
    /// let b = KBox::pin_init(Revocable::new(2u32), GFP_KERNEL)?;
    /// // SAFETY: No guard is held yet.
    /// unsafe { b.revoke() };
    /// let guard = rcu::read_lock();
    /// assert_eq!(a.try_access_with_guard(&guard), Some(&1));
    /// assert_eq!(b.try_access_with_guard(&guard), None);
    /// # Ok::<(), Error>(())
    /// ```
    #[inline]
    pub fn try_access_with_guard<'a>(&'a self, _guard: &'a rcu::Guard) -> Option<&'a T> {
        // Relaxed: see `try_access_in`.
        if self.available.load(Ordering::Relaxed) {
            // SAFETY: `available` was `true` inside the critical section `_guard` holds, so by
            // the type invariants `data` is initialised and a `revoke()` that clears `available`
            // from now on waits for this critical section to end before dropping it; the
            // returned reference cannot outlive `_guard`.
            Some(unsafe { &*self.data.value.get().cast::<T>() })
        } else {
            None
        }
    }

    /// Revokes access: new accesses fail from now on; then waits for the accesses in progress to
    /// end and drops the value. Returns `true` if this call revoked it, `false` if it was already
    /// revoked (and then does nothing).
    ///
    /// Might sleep (it waits for an RCU grace period), and says so to the kernel's sleep checks
    /// (`might_sleep()`) even when it has nothing to do. Debug kernels (lockdep, `PROVE_RCU`,
    /// atomic-sleep checks) report a call made inside an RCU read-side critical section.
    ///
    /// # Safety
    ///
    /// The calling thread must hold no guard of any revocable (no [`RevocableGuard`], no
    /// [`rcu::Guard`] that a [`Revocable::try_access_with_guard`] reference borrows): a guard is
    /// an RCU read-side critical section, in which sleeping is not allowed, and the grace period
    /// would wait for the very section the thread is in. With a guard of this revocable the
    /// outcome is worse than a deadlock: on a kernel whose read-side sections do not count
    /// (`PREEMPT_NONE`), the grace period may end, the value is dropped, and the guard still
    /// dereferences it. Safe code cannot tell whether its thread holds a guard, so the caller
    /// says so.
    ///
    /// # Examples
    ///
    /// ```
    /// use core::sync::atomic::{AtomicU32, Ordering};
    /// use kernel::revocable::Revocable;
    ///
    /// static DROPS: AtomicU32 = AtomicU32::new(0);
    /// struct Counted;
    /// impl Drop for Counted {
    ///     fn drop(&mut self) {
    ///         DROPS.fetch_add(1, Ordering::SeqCst);
    ///     }
    /// }
    ///
    /// let r = KBox::pin_init(Revocable::new(Counted), GFP_KERNEL)?;
    /// // SAFETY: This thread holds no guard, here and below.
    /// assert!(unsafe { r.revoke() });
    /// assert_eq!(DROPS.load(Ordering::SeqCst), 1);
    /// // SAFETY: As above.
    /// assert!(!unsafe { r.revoke() });
    /// drop(r);
    /// // Dropped exactly once although revoked twice and then dropped.
    /// assert_eq!(DROPS.load(Ordering::SeqCst), 1);
    ///
    /// // Dropping an unrevoked one drops the value, once.
    /// drop(KBox::pin_init(Revocable::new(Counted), GFP_KERNEL)?);
    /// assert_eq!(DROPS.load(Ordering::SeqCst), 2);
    /// # Ok::<(), Error>(())
    /// ```
    pub unsafe fn revoke(&self) -> bool {
        // SAFETY: `might_sleep()` only checks the calling context.
        unsafe { bindings::might_sleep() };
        if self.available.swap(false, Ordering::AcqRel) {
            // Every reader that saw `available == true` did so inside a critical section that
            // began before the swap; wait for all of them.
            rcu::synchronize();
            // SAFETY: This context changed `available` to `false` (only one can), so by the type
            // invariants it alone drops `data`, which is still initialised; new readers see
            // `false` and old ones are gone after the grace period. `data` is pinned, dropping
            // it in place is allowed.
            unsafe { core::ptr::drop_in_place(self.data.value.get().cast::<T>()) };
            true
        } else {
            false
        }
    }

    /// Returns the value without any check or critical section.
    ///
    /// # Safety
    ///
    /// The caller must guarantee that the value is not revoked before the returned reference's
    /// lifetime ends (and so was not revoked yet).
    #[inline]
    pub(crate) unsafe fn access_unchecked(&self) -> &T {
        // SAFETY: By the safety requirements the value is available, so by the type invariants
        // initialised, and stays so while the reference lives.
        unsafe { &*self.data.value.get().cast::<T>() }
    }

    /// Revokes access and drops the value without waiting for readers.
    ///
    /// Returns `true` if this call revoked it, `false` if it was already revoked.
    ///
    /// # Safety
    ///
    /// No guard of this revocable and no reference from
    /// [`Revocable::try_access_with_guard`] may exist, and none may be created concurrently.
    ///
    /// # Examples
    ///
    /// ```
    /// use kernel::revocable::Revocable;
    ///
    /// let r = KBox::pin_init(Revocable::new(3u8), GFP_KERNEL)?;
    /// // SAFETY: No one else can reach `r`, and no guard of it exists.
    /// assert!(unsafe { r.revoke_nosync() });
    /// assert!(r.try_access().is_none());
    /// # Ok::<(), Error>(())
    /// ```
    pub unsafe fn revoke_nosync(&self) -> bool {
        if self.available.swap(false, Ordering::AcqRel) {
            // SAFETY: As in `revoke`, this context alone drops `data`; the caller guarantees
            // there are no readers to wait for.
            unsafe { core::ptr::drop_in_place(self.data.value.get().cast::<T>()) };
            true
        } else {
            false
        }
    }
}

impl<T: Unpin> Revocable<T> {
    /// Revokes access and moves the value out (it may move: `T` is [`Unpin`]) without waiting
    /// for readers; [`None`] if it was already revoked.
    ///
    /// # Safety
    ///
    /// As for [`Revocable::revoke_nosync`].
    pub(crate) unsafe fn take_nosync(&self) -> Option<T> {
        if self.available.swap(false, Ordering::AcqRel) {
            // SAFETY: As in `revoke`, this context alone owns `data`, which is initialised; the
            // caller guarantees there are no readers. `available` is now `false`, so nothing
            // drops or reads it again; moving it out of its pinned place is allowed for `Unpin`.
            Some(unsafe { self.data.value.get().cast::<T>().read() })
        } else {
            None
        }
    }
}

#[pinned_drop]
impl<T> PinnedDrop for Revocable<T> {
    fn drop(self: core::pin::Pin<&mut Self>) {
        // `&mut self`: no guard exists (guards borrow `self`), so no grace period is needed.
        if self.available.load(Ordering::Relaxed) {
            // SAFETY: `available` is `true`, so `data` is initialised, and nothing else can
            // reach it any more; it is dropped in place as the pinning requires.
            unsafe { core::ptr::drop_in_place(self.data.value.get().cast::<T>()) };
        }
    }
}

impl<T> RevocableData<T> {
    fn new(data: impl PinInit<T>) -> impl PinInit<Self> {
        let init = move |slot: *mut Self| {
            // SAFETY: `slot` is valid for writes; `value` is a `MaybeUninit` inside an
            // `UnsafeCell`, so the pointer to it is a valid place for a `T`, which is pinned
            // there because `Self` is `!Unpin` and pinned by the caller.
            unsafe {
                data.__pinned_init(UnsafeCell::raw_get(core::ptr::addr_of!((*slot).value)).cast())
            }
        };
        // SAFETY: The closure initialises the only field that needs it (`_pin` is a ZST) and
        // returns `Err` without anything to clean up if `data` fails.
        unsafe { init::pin_init_from_closure(init) }
    }
}

/// Access to the value of a [`Revocable`], valid while the guard lives.
///
/// Holds an RCU read-side critical section, so it is not [`Send`] and must not be held across a
/// sleep.
///
/// # Invariants
///
/// `data` points to the initialised value of a revocable that `_rcu`'s critical section saw as
/// available, so it stays valid until `_rcu` is dropped.
///
/// # Examples
///
/// ```
/// use kernel::revocable::{Revocable, RevocableGuard};
///
/// let r = KBox::pin_init(Revocable::new(5i32), GFP_KERNEL)?;
/// let guard: RevocableGuard<'_, i32> = r.try_access().ok_or(ENXIO)?;
/// assert_eq!(*guard + 1, 6);
/// # Ok::<(), Error>(())
/// ```
pub struct RevocableGuard<'a, T> {
    data: *const T,
    _rcu: rcu::Guard,
    _lifetime: core::marker::PhantomData<&'a T>,
}

impl<T> Deref for RevocableGuard<'_, T> {
    type Target = T;

    #[inline]
    fn deref(&self) -> &T {
        // SAFETY: By the type invariant, `data` is valid while `self` (and so `_rcu`) lives.
        unsafe { &*self.data }
    }
}
