// SPDX-License-Identifier: GPL-2.0

//! Power management for PCI drivers: the PM core's callbacks for a [`Driver`]'s system sleep
//! ([`Driver::SLEEP`]) and runtime PM ([`Driver::AUTOSUSPEND_DELAY_MS`]), and the reference
//! ([`RuntimeActive`]) that keeps a device awake while code uses it.
//!
//! System sleep's callbacks run under the device lock (`&Device<Core>`); runtime PM's do not
//! (`&Device<Bound>`). Between a driver's sleep and its wake the PCI core saves config space,
//! puts the device into D3hot, brings it back to D0 and restores config space.
//!
//! C header: [`include/linux/pm_runtime.h`](srctree/include/linux/pm_runtime.h)

use super::{Adapter, Bound, Device, Driver};
use crate::{
    bindings, device,
    error::{to_result, Error, Result},
    ffi::c_int,
};

/// A runtime PM reference: the device is awake (D0, its driver's [`Driver::runtime_resume`]
/// done) for as long as this lives; dropping it marks the device busy now and lets it sleep
/// once unused for its autosuspend delay.
///
/// # Invariants
///
/// Holds one runtime PM usage count of `dev`, taken by a successful resume.
#[must_use = "the device may sleep again as soon as this is dropped"]
pub struct RuntimeActive<'a> {
    dev: &'a device::Device,
}

impl Drop for RuntimeActive<'_> {
    fn drop(&mut self) {
        let dev = self.dev.as_raw();
        // SAFETY: `dev` is valid for the borrow, and we give back the usage count we hold (the
        // type invariant).
        unsafe {
            bindings::pm_runtime_mark_last_busy(dev);
            bindings::pm_runtime_put_autosuspend(dev);
        }
    }
}

impl Device {
    /// Wakes the device if runtime PM put it to sleep (its driver's
    /// [`Driver::runtime_resume`] runs first) and keeps it awake while the returned
    /// reference lives.
    ///
    /// Any device may be asked, bound or not: on a device whose driver has no runtime PM it
    /// only counts. Errors are runtime PM's: `EACCES` while it is disabled for the device (as
    /// during a system sleep's late phases), `EINVAL` once a runtime callback failed (the PM
    /// core keeps that error), or the errno of a failed resume. `EDEADLK` when called from the
    /// device's own [`Driver::runtime_suspend`] or [`Driver::runtime_resume`], which would wait
    /// for itself.
    ///
    /// Might sleep: it waits for a transition under way, and a resume runs the driver's
    /// [`Driver::runtime_resume`] in the calling thread, so do not hold a lock that callback
    /// takes, nor call it from anything the runtime callbacks wait for (a work item they
    /// cancel, the interrupt thread): use [`Device::runtime_active_if_awake`] there.
    ///
    /// # Examples
    ///
    /// ```
    /// use kernel::{io::Io, pci::{Bound, Device}};
    ///
    /// // Reads a register of a device whose driver lets it sleep when idle.
    /// fn read_awake(pdev: &Device<Bound>, io: &Io<0x100>) -> Result<u32> {
    ///     let _awake = pdev.runtime_active()?;
    ///     Ok(io.readl(0))
    /// }
    /// ```
    pub fn runtime_active(&self) -> Result<RuntimeActive<'_>> {
        let dev: &device::Device = self.as_ref();
        if crate::devres::runtime_callback_running_here(dev) {
            return Err(Error::from_errno(-(bindings::EDEADLK as c_int)));
        }
        // SAFETY: `dev` is a valid device; on success we hold one usage count, which
        // `RuntimeActive` gives back (its invariant).
        to_result(unsafe { bindings::pm_runtime_resume_and_get(dev.as_raw()) })?;
        Ok(RuntimeActive { dev })
    }

    /// Keeps the device awake while the returned reference lives, if it is awake now; never
    /// waits and never wakes it. `None` while it sleeps, is going to sleep or waking, or
    /// runtime PM is disabled for it. For code that must not wait for the device's runtime
    /// PM (see [`Device::runtime_active`]). Does not sleep.
    ///
    /// # Examples
    ///
    /// ```
    /// use kernel::{io::Io, pci::{Bound, Device}};
    ///
    /// // Reads a register if the device is awake, from where waking it could deadlock.
    /// fn peek(pdev: &Device<Bound>, io: &Io<0x100>) -> Option<u32> {
    ///     let _awake = pdev.runtime_active_if_awake()?;
    ///     Some(io.readl(0))
    /// }
    /// ```
    pub fn runtime_active_if_awake(&self) -> Option<RuntimeActive<'_>> {
        let dev: &device::Device = self.as_ref();
        // SAFETY: `dev` is a valid device; the call takes the device's runtime PM lock and never
        // waits. It returns 1 only when it took a usage count, which `RuntimeActive` gives back
        // (its invariant).
        (unsafe { bindings::pm_runtime_get_if_active(dev.as_raw()) } > 0)
            .then_some(RuntimeActive { dev })
    }
}

impl<T: Driver + 'static> Adapter<T> {
    /// The PM callbacks the PM core calls for `T`. System sleep: suspend, and the freeze and
    /// power-off phases of hibernation, put it to sleep; resume, thaw and restore wake it.
    /// Runtime PM: runtime suspend and resume (no idle callback: the PCI core then suspends).
    pub(super) const PM_OPS: bindings::dev_pm_ops = {
        // SAFETY: All-zeroes is a valid `dev_pm_ops`: every callback absent.
        let mut ops: bindings::dev_pm_ops = unsafe { core::mem::zeroed() };
        if T::SLEEP {
            ops.suspend = Some(Self::sleep_callback);
            ops.freeze = Some(Self::sleep_callback);
            ops.poweroff = Some(Self::sleep_callback);
            ops.resume = Some(Self::wake_callback);
            ops.thaw = Some(Self::wake_callback);
            ops.restore = Some(Self::wake_callback);
        }
        if T::AUTOSUSPEND_DELAY_MS.is_some() {
            ops.runtime_suspend = Some(Self::runtime_suspend_callback);
            ops.runtime_resume = Some(Self::runtime_resume_callback);
        }
        ops
    };

    /// The `pci_dev` of a `device` the PCI core hands a PCI driver's PM callbacks.
    ///
    /// # Safety
    ///
    /// `dev` must be the `device` embedded in a `pci_dev`.
    unsafe fn pci_dev_of(dev: *mut bindings::device) -> *mut bindings::pci_dev {
        // SAFETY: `dev` is the `dev` field of a `pci_dev` (the caller's promise).
        unsafe { crate::container_of!(dev, bindings::pci_dev, dev) }.cast_mut()
    }

    extern "C" fn sleep_callback(dev: *mut bindings::device) -> c_int {
        // SAFETY: The PCI core calls a driver's `dev_pm_ops` (`pci_pm_suspend` and the like)
        // only while the driver is bound, with the `device` of its `pci_dev`, and the PM core
        // holds the device lock around the suspend, freeze and power-off callbacks.
        let result = unsafe { Self::with_bound(Self::pci_dev_of(dev), T::sleep) };
        match result {
            Ok(()) => 0,
            Err(e) => e.to_errno(),
        }
    }

    extern "C" fn wake_callback(dev: *mut bindings::device) -> c_int {
        // SAFETY: As for `sleep_callback`: resume, thaw and restore run likewise, bound, under
        // the device lock.
        let result = unsafe { Self::with_bound(Self::pci_dev_of(dev), T::wake) };
        match result {
            Ok(()) => 0,
            Err(e) => e.to_errno(),
        }
    }

    extern "C" fn runtime_suspend_callback(dev: *mut bindings::device) -> c_int {
        // SAFETY: `pci_pm_runtime_suspend` calls the driver's only while `pci_dev->driver` is
        // set, which is from before probe to after remove; around probe and remove the PCI
        // core holds the device awake (a usage count, and `pm_runtime_barrier` before remove
        // waits for a callback under way), so this runs while the device is bound, its
        // drvdata set.
        let result =
            unsafe { Self::with_bound_unlocked(Self::pci_dev_of(dev), T::runtime_suspend) };
        match result {
            Ok(()) => 0,
            Err(e) => e.to_errno(),
        }
    }

    extern "C" fn runtime_resume_callback(dev: *mut bindings::device) -> c_int {
        // SAFETY: As for `runtime_suspend_callback` (`pci_pm_runtime_resume`).
        let result = unsafe { Self::with_bound_unlocked(Self::pci_dev_of(dev), T::runtime_resume) };
        match result {
            Ok(()) => 0,
            Err(e) => e.to_errno(),
        }
    }

    /// Runs `f` with the bound device `pdev` and its driver's data, for a callback made without
    /// the device lock (runtime PM).
    ///
    /// # Safety
    ///
    /// `pdev` must be a valid `pci_dev` bound to this driver (its probe succeeded, its remove
    /// has not run), and stay so for the whole call.
    unsafe fn with_bound_unlocked<R>(
        pdev: *mut bindings::pci_dev,
        f: impl FnOnce(&Device<Bound>, &T::Data) -> R,
    ) -> R {
        // SAFETY: `pdev` is valid and bound for the call (the safety requirements), which is
        // what `Bound` promises for the reference's lifetime, this call.
        let dev = unsafe { Device::<Bound>::from_raw(pdev) };
        // Noted, so that `runtime_active` from inside the callback refuses instead of waiting
        // for the transition this very callback is part of.
        crate::devres::in_runtime_callback(dev.as_ref(), || {
            // SAFETY: The device is bound to us, so drvdata holds what `probe_in_binding`
            // returned for this binding, and `remove_callback` does not take it back during the
            // call.
            unsafe {
                crate::devres::with_binding_data::<T::Data, R>(
                    bindings::pci_get_drvdata(pdev),
                    |data| f(dev, data),
                )
            }
        })
    }
}
