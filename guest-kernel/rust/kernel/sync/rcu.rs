// SPDX-License-Identifier: GPL-2.0

//! RCU (read-copy-update) read-side critical sections.
//!
//! C header: [`include/linux/rcupdate.h`](srctree/include/linux/rcupdate.h)

use crate::bindings;
use core::marker::PhantomData;

/// Enters a read-side critical section, as `rcu_read_lock()` does.
///
/// Where C's `rcu_read_lock()` is only a compiler barrier (RCU not preemptible, no preempt
/// count, no lockdep map to tell), do the same inline: the C helpers cost two out-of-line calls
/// per critical section, measured at a fifth of a `pci-testdev` register read under QEMU TCG.
#[cfg(not(any(CONFIG_PREEMPT_RCU, CONFIG_PREEMPT_COUNT, CONFIG_DEBUG_LOCK_ALLOC)))]
#[inline(always)]
fn enter() {
    core::sync::atomic::compiler_fence(core::sync::atomic::Ordering::SeqCst);
}

/// Leaves a read-side critical section, as `rcu_read_unlock()` does.
#[cfg(not(any(CONFIG_PREEMPT_RCU, CONFIG_PREEMPT_COUNT, CONFIG_DEBUG_LOCK_ALLOC)))]
#[inline(always)]
fn leave() {
    core::sync::atomic::compiler_fence(core::sync::atomic::Ordering::SeqCst);
}

#[cfg(any(CONFIG_PREEMPT_RCU, CONFIG_PREEMPT_COUNT, CONFIG_DEBUG_LOCK_ALLOC))]
#[inline]
fn enter() {
    // SAFETY: `rcu_read_lock()` may be called from any context.
    unsafe { bindings::rcu_read_lock() };
}

#[cfg(any(CONFIG_PREEMPT_RCU, CONFIG_PREEMPT_COUNT, CONFIG_DEBUG_LOCK_ALLOC))]
#[inline]
fn leave() {
    // SAFETY: Only called by `Guard::drop`, in the context that entered (see there).
    unsafe { bindings::rcu_read_unlock() };
}

/// An RCU read-side critical section, held for as long as the guard lives.
///
/// Readers that found an object through an RCU-protected path may use it until the guard is
/// dropped; an updater's [`synchronize`] waits for every guard that existed when it was called.
///
/// The guard is not [`Send`]: `rcu_read_unlock()` must run in the context that called
/// `rcu_read_lock()`. The code holding it must not sleep.
///
/// # Invariants
///
/// The context owning a `Guard` has entered a critical section once for it (`rcu_read_lock()`)
/// and has not yet left it (`rcu_read_unlock()`).
///
/// # Examples
///
/// ```
/// use kernel::sync::rcu;
///
/// let guard = rcu::read_lock();
/// // RCU-protected data may be read here.
/// drop(guard);
/// ```
pub struct Guard {
    _not_send: PhantomData<*mut ()>,
}

impl Guard {
    /// Enters an RCU read-side critical section.
    ///
    /// # Examples
    ///
    /// ```
    /// let _guard = kernel::sync::rcu::Guard::new();
    /// ```
    #[inline]
    #[allow(clippy::new_without_default)]
    pub fn new() -> Self {
        // The matching `leave` is in `Drop`, in this context since `Guard` is not `Send`.
        enter();
        // INVARIANT: The critical section was just entered for this guard.
        Self {
            _not_send: PhantomData,
        }
    }

    /// Leaves the critical section now; the same as dropping the guard.
    ///
    /// # Examples
    ///
    /// ```
    /// let guard = kernel::sync::rcu::read_lock();
    /// guard.unlock();
    /// ```
    #[inline]
    pub fn unlock(self) {}
}

impl Drop for Guard {
    #[inline]
    fn drop(&mut self) {
        // By the type invariant, this context holds the critical section entered for this guard,
        // and leaves it exactly once because `drop` runs once.
        leave();
    }
}

/// Enters an RCU read-side critical section; it ends when the returned guard is dropped.
///
/// # Examples
///
/// ```
/// use kernel::sync::rcu;
///
/// {
///     let _outer = rcu::read_lock();
///     // Critical sections nest.
///     let _inner = rcu::read_lock();
/// }
/// ```
#[inline]
pub fn read_lock() -> Guard {
    Guard::new()
}

/// Waits until every RCU read-side critical section that had begun when it was called has ended.
///
/// Might sleep: it must not be called while holding a [`Guard`] or in atomic context.
///
/// # Examples
///
/// ```
/// // No readers here, so this only waits for a grace period.
/// kernel::sync::rcu::synchronize();
/// ```
#[inline]
pub fn synchronize() {
    // SAFETY: `synchronize_rcu()` has no preconditions besides being allowed to sleep, which
    // this function's documentation passes on to the caller (and `might_sleep` checks it).
    unsafe { bindings::synchronize_rcu() };
}
