// SPDX-License-Identifier: GPL-2.0

//! Operating performance points (OPP): the frequencies (and voltages) a device may run at, read
//! from its device-tree `operating-points-v2` table.
//!
//! A [`Table`] adds a device's (or a set of CPUs') OPPs from the device tree and removes them
//! when dropped; through it a driver finds OPPs by frequency and sets the device's rate, which
//! the OPP core applies to the device's clock.
//!
//! C header: [`include/linux/pm_opp.h`](srctree/include/linux/pm_opp.h)

use crate::{
    bindings,
    clk::Hertz,
    cpufreq::{OwnedCpumask, Policy},
    device::Device,
    error::{code::EINVAL, from_err_ptr, to_result, Result},
    types::ARef,
};
use core::{marker::PhantomData, ptr::NonNull};

/// One operating point of a [`Table`], reference-counted by the OPP core; it borrows the table,
/// because the OPP core frees a table's static OPPs with the table, references or not (so
/// `dev_pm_opp_put` after the table's removal would use freed memory).
///
/// # Invariants
///
/// `opp` is a valid `struct dev_pm_opp` of the table borrowed for `'a`, this object holds one
/// reference to (from a `find` function), put back in `drop`.
///
/// # Examples
///
/// ```
/// use kernel::{clk::Hertz, opp::Table};
/// fn lowest(table: &Table) -> Result<Hertz> {
///     Ok(table.find_freq_ceil(Hertz(0))?.freq())
/// }
/// ```
pub struct Opp<'a> {
    opp: NonNull<bindings::dev_pm_opp>,
    _table: PhantomData<&'a Table>,
}

impl Opp<'_> {
    /// The OPP's frequency.
    ///
    /// # Examples
    ///
    /// ```
    /// fn khz(opp: &kernel::opp::Opp<'_>) -> u64 {
    ///     opp.freq().as_khz()
    /// }
    /// ```
    pub fn freq(&self) -> Hertz {
        // SAFETY: By the type invariant `self.opp` is a valid OPP we hold a reference to.
        Hertz(unsafe { bindings::dev_pm_opp_get_freq_indexed(self.opp.as_ptr(), 0) } as u64)
    }

    /// The OPP's voltage in microvolts (0 if the table gives none).
    ///
    /// # Examples
    ///
    /// ```
    /// fn uv(opp: &kernel::opp::Opp<'_>) -> u64 {
    ///     opp.voltage_uv()
    /// }
    /// ```
    pub fn voltage_uv(&self) -> u64 {
        // SAFETY: By the type invariant `self.opp` is a valid OPP we hold a reference to.
        unsafe { bindings::dev_pm_opp_get_voltage(self.opp.as_ptr()) as u64 }
    }
}

impl Drop for Opp<'_> {
    fn drop(&mut self) {
        // SAFETY: By the type invariant we hold one reference, given back once, here.
        unsafe { bindings::dev_pm_opp_put(self.opp.as_ptr()) }
    }
}

/// Which OPPs a [`Table`] added, so that it removes the same.
enum Added {
    /// `dev_pm_opp_of_add_table` for the table's device.
    Device,
    /// `dev_pm_opp_of_cpumask_add_table` for these CPUs.
    Cpus(OwnedCpumask),
}

/// A device's OPP table, added from its device-tree node; removed when dropped.
///
/// # Invariants
///
/// The OPPs of `dev` (or of the CPUs in `added`, `dev` being one of them) were added from the
/// device tree for this object and are removed only in `drop`.
///
/// # Examples
///
/// ```
/// use kernel::{clk::Hertz, device::Device, opp::Table};
///
/// fn go_fastest(dev: &Device) -> Result<Hertz> {
///     let table = Table::from_of(dev)?;
///     let fastest = table.find_freq_floor(Hertz(u64::MAX))?.freq();
///     table.set_rate(fastest)?;
///     Ok(fastest)
/// }
/// ```
pub struct Table {
    dev: ARef<Device>,
    added: Added,
}

// SAFETY: The OPP core takes its own locks; the table may be used and dropped from any thread.
unsafe impl Send for Table {}

// SAFETY: As above.
unsafe impl Sync for Table {}

impl Table {
    /// Adds `dev`'s OPPs from its `operating-points-v2` table. Errors are the OPP core's
    /// (`ENODEV` if the node has no table).
    ///
    /// # Examples
    ///
    /// See [`Table`].
    ///
    /// ```
    /// fn count(dev: &kernel::device::Device) -> Result<u32> {
    ///     kernel::opp::Table::from_of(dev)?.count()
    /// }
    /// ```
    pub fn from_of(dev: &Device) -> Result<Self> {
        // SAFETY: `dev` is a valid device.
        to_result(unsafe { bindings::dev_pm_opp_of_add_table(dev.as_raw()) })?;
        // INVARIANT: The OPPs were just added for this object.
        Ok(Self {
            dev: dev.into(),
            added: Added::Device,
        })
    }

    /// Adds the OPPs of the policy's CPUs (which share one table when their nodes say
    /// `opp-shared`); queries then go through the device of the policy's own CPU.
    ///
    /// Taken from the policy, the device is always one of those CPUs': a device outside the set
    /// would find OPPs in a table this object neither added nor removes, which another owner
    /// could free under an [`Opp`] borrowed from this one. (Upstream's `from_of_cpumask` takes
    /// the device and the mask apart, unchecked, and holds a reference to the device's table.)
    ///
    /// # Examples
    ///
    /// ```
    /// use kernel::{cpufreq::Policy, opp::Table};
    /// fn for_policy(policy: &Policy) -> Result<Table> {
    ///     Table::from_of_policy(policy)
    /// }
    /// ```
    pub fn from_of_policy(policy: &Policy) -> Result<Self> {
        let dev = policy.cpu_device()?;
        // Copied first: nothing to undo if the copy fails.
        let cpus = OwnedCpumask::copy_of(policy.cpus(), crate::alloc::flags::GFP_KERNEL)?;
        // SAFETY: `cpus` is a valid mask.
        to_result(unsafe { bindings::dev_pm_opp_of_cpumask_add_table(cpus.as_raw()) })?;
        // INVARIANT: The OPPs of exactly these CPUs were just added for this object; `dev` is
        // the device of the policy's CPU, one of them.
        Ok(Self {
            dev,
            added: Added::Cpus(cpus),
        })
    }

    /// The number of available OPPs.
    ///
    /// # Examples
    ///
    /// ```
    /// fn any(table: &kernel::opp::Table) -> bool {
    ///     table.count().is_ok_and(|n| n > 0)
    /// }
    /// ```
    pub fn count(&self) -> Result<u32> {
        // SAFETY: `self.dev` is a valid device with an OPP table (type invariant).
        let n = unsafe { bindings::dev_pm_opp_get_opp_count(self.dev.as_raw()) };
        to_result(n)?;
        // Not negative: lossless.
        Ok(n as u32)
    }

    fn found(&self, opp: *mut bindings::dev_pm_opp) -> Result<Opp<'_>> {
        let opp = NonNull::new(from_err_ptr(opp)?).ok_or(crate::error::code::ERANGE)?;
        // INVARIANT: A successful `find` on this table returns a valid OPP of it with a
        // reference for the caller.
        Ok(Opp {
            opp,
            _table: PhantomData,
        })
    }

    fn c_freq(freq: Hertz) -> Result<crate::ffi::c_ulong> {
        crate::ffi::c_ulong::try_from(freq.0).or(Err(EINVAL))
    }

    /// The available OPP with the lowest frequency at or above `freq`; `ERANGE` if none.
    ///
    /// # Examples
    ///
    /// ```
    /// use kernel::{clk::Hertz, opp::Table};
    /// fn at_least(table: &Table, khz: u64) -> Result<Hertz> {
    ///     Ok(table.find_freq_ceil(Hertz::from_khz(khz))?.freq())
    /// }
    /// ```
    pub fn find_freq_ceil(&self, freq: Hertz) -> Result<Opp<'_>> {
        let mut f = Self::c_freq(freq)?;
        // SAFETY: `self.dev` is a valid device; `f` is valid for writes during the call.
        self.found(unsafe { bindings::dev_pm_opp_find_freq_ceil(self.dev.as_raw(), &mut f) })
    }

    /// The available OPP with the highest frequency at or below `freq`; `ERANGE` if none.
    ///
    /// # Examples
    ///
    /// ```
    /// use kernel::{clk::Hertz, opp::Table};
    /// fn at_most(table: &Table, khz: u64) -> Result<Hertz> {
    ///     Ok(table.find_freq_floor(Hertz::from_khz(khz))?.freq())
    /// }
    /// ```
    pub fn find_freq_floor(&self, freq: Hertz) -> Result<Opp<'_>> {
        let mut f = Self::c_freq(freq)?;
        // SAFETY: `self.dev` is a valid device; `f` is valid for writes during the call.
        self.found(unsafe { bindings::dev_pm_opp_find_freq_floor(self.dev.as_raw(), &mut f) })
    }

    /// The available OPP of exactly `freq`; `ERANGE` if there is none.
    ///
    /// # Examples
    ///
    /// ```
    /// use kernel::{clk::Hertz, opp::Table};
    /// fn listed(table: &Table, freq: Hertz) -> bool {
    ///     table.find_freq_exact(freq).is_ok()
    /// }
    /// ```
    pub fn find_freq_exact(&self, freq: Hertz) -> Result<Opp<'_>> {
        let f = Self::c_freq(freq)?;
        // SAFETY: `self.dev` is a valid device.
        self.found(unsafe { bindings::dev_pm_opp_find_freq_exact(self.dev.as_raw(), f, true) })
    }

    /// The frequencies of all available OPPs, lowest first.
    ///
    /// # Examples
    ///
    /// ```
    /// fn khz(table: &kernel::opp::Table) -> Result<KVec<u64>> {
    ///     let mut v = KVec::new();
    ///     for f in table.freqs()? {
    ///         v.push(f.as_khz(), GFP_KERNEL)?;
    ///     }
    ///     Ok(v)
    /// }
    /// ```
    pub fn freqs(&self) -> Result<crate::alloc::KVec<Hertz>> {
        let mut all = crate::alloc::KVec::new();
        let mut next = Hertz(0);
        loop {
            match self.find_freq_ceil(next) {
                Ok(opp) => {
                    let f = opp.freq();
                    all.push(f, crate::alloc::flags::GFP_KERNEL)?;
                    next = Hertz(f.0 + 1);
                }
                Err(e) if e == crate::error::code::ERANGE => return Ok(all),
                Err(e) => return Err(e),
            }
        }
    }

    /// Moves the device to the OPP of `freq` (rounded up to one of the table's): the OPP core
    /// sets the device's clock (and regulators, if any) to it.
    ///
    /// # Examples
    ///
    /// ```
    /// use kernel::{clk::Hertz, opp::Table};
    /// fn slowest(table: &Table) -> Result {
    ///     table.set_rate(Hertz(0))
    /// }
    /// ```
    pub fn set_rate(&self, freq: Hertz) -> Result {
        let f = Self::c_freq(freq)?;
        // SAFETY: `self.dev` is a valid device with an OPP table.
        to_result(unsafe { bindings::dev_pm_opp_set_rate(self.dev.as_raw(), f) })
    }

    /// The longest time a change between two of the table's OPPs takes, in nanoseconds, as the
    /// table says (0 if it does not).
    ///
    /// # Examples
    ///
    /// ```
    /// fn latency(table: &kernel::opp::Table) -> u64 {
    ///     table.max_transition_latency_ns()
    /// }
    /// ```
    pub fn max_transition_latency_ns(&self) -> u64 {
        // SAFETY: `self.dev` is a valid device.
        unsafe { bindings::dev_pm_opp_get_max_transition_latency(self.dev.as_raw()) as u64 }
    }
}

impl Drop for Table {
    fn drop(&mut self) {
        match &self.added {
            // SAFETY: By the type invariant the OPPs were added for this object, removed once.
            Added::Device => unsafe { bindings::dev_pm_opp_of_remove_table(self.dev.as_raw()) },
            // SAFETY: As above, for the same CPUs.
            Added::Cpus(mask) => unsafe {
                bindings::dev_pm_opp_of_cpumask_remove_table(mask.as_raw())
            },
        }
    }
}
