// SPDX-License-Identifier: GPL-2.0

//! Clocks of the common clock framework, as a consumer sees them.
//!
//! [`Clk::get`] looks a device's clock up (by its `clock-names` entry, or the first one) and
//! puts it back when dropped; [`Clk::prepare_enable`] turns it into an [`EnabledClk`] that
//! disables it again when dropped, so enables and disables always pair up.
//!
//! C header: [`include/linux/clk.h`](srctree/include/linux/clk.h)

use crate::{
    bindings,
    device::Device,
    error::{from_err_ptr, to_result, Result},
    str::CStr,
    types::ARef,
};
use core::{ops::Deref, ptr::NonNull};

/// A clock rate in hertz.
///
/// # Examples
///
/// ```
/// use kernel::clk::Hertz;
/// let rate = Hertz::from_khz(1_200_000);
/// assert_eq!(rate.as_hz(), 1_200_000_000);
/// assert_eq!(rate.as_khz(), 1_200_000);
/// assert_eq!(Hertz(999).as_khz(), 0);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Hertz(pub u64);

impl Hertz {
    /// A rate of `khz` kilohertz.
    ///
    /// # Examples
    ///
    /// ```
    /// assert_eq!(kernel::clk::Hertz::from_khz(2).0, 2000);
    /// ```
    pub const fn from_khz(khz: u64) -> Self {
        Self(khz * 1000)
    }

    /// The rate in hertz.
    ///
    /// # Examples
    ///
    /// ```
    /// assert_eq!(kernel::clk::Hertz(5).as_hz(), 5);
    /// ```
    pub const fn as_hz(self) -> u64 {
        self.0
    }

    /// The rate in whole kilohertz (rounded down), the unit of cpufreq.
    ///
    /// # Examples
    ///
    /// ```
    /// assert_eq!(kernel::clk::Hertz(1999).as_khz(), 1);
    /// ```
    pub const fn as_khz(self) -> u64 {
        self.0 / 1000
    }
}

/// A clock a consumer looked up; put back when dropped.
///
/// # Invariants
///
/// `clk` was returned by a successful `clk_get` for `_dev` and is put back only in `drop`. It
/// is not null (the framework's "no clock" is never handed out here).
///
/// # Examples
///
/// ```
/// use kernel::{clk::{Clk, Hertz}, device::Device};
///
/// fn double(dev: &Device) -> Result<Hertz> {
///     let clk = Clk::get(dev, None)?;
///     clk.set_rate(Hertz(clk.rate().as_hz() * 2))?;
///     Ok(clk.rate())
/// }
/// ```
pub struct Clk {
    clk: NonNull<bindings::clk>,
    /// The consumer device: the handle names it (`dev_name`, kept by pointer) until put.
    _dev: ARef<Device>,
}

// SAFETY: The clock framework does its own locking; a `struct clk` handle may be used and put
// from any thread.
unsafe impl Send for Clk {}

// SAFETY: As above: every method goes through functions that take the framework's locks.
unsafe impl Sync for Clk {}

impl Clk {
    /// Looks up the clock of `dev` named `name` in its `clock-names`, or its first clock if
    /// `name` is `None`. Errors are the framework's: `ENOENT` for no such clock, `EPROBE_DEFER`
    /// while its provider has not registered.
    ///
    /// # Examples
    ///
    /// ```
    /// fn uart_clock(dev: &kernel::device::Device) -> Result<kernel::clk::Clk> {
    ///     kernel::clk::Clk::get(dev, Some(kernel::c_str!("uartclk")))
    /// }
    /// ```
    pub fn get(dev: &Device, name: Option<&CStr>) -> Result<Self> {
        let con_id = name.map_or(core::ptr::null(), |n| n.as_char_ptr());
        // SAFETY: `dev` is a valid device and `con_id` null or a NUL-terminated string, which
        // `clk_get` only reads during the call.
        let clk = from_err_ptr(unsafe { bindings::clk_get(dev.as_raw(), con_id) })?;
        // INVARIANT: `clk_get` succeeded; it returns null only for the optional "no clock",
        // which plain `clk_get` does not.
        let clk = NonNull::new(clk).ok_or(crate::error::code::ENOENT)?;
        Ok(Self {
            clk,
            _dev: dev.into(),
        })
    }

    /// The clock's current rate (0 if the framework does not know it).
    ///
    /// # Examples
    ///
    /// ```
    /// fn mhz(clk: &kernel::clk::Clk) -> u64 {
    ///     clk.rate().as_hz() / 1_000_000
    /// }
    /// ```
    pub fn rate(&self) -> Hertz {
        // SAFETY: By the type invariant `self.clk` is a clock we hold.
        Hertz(unsafe { bindings::clk_get_rate(self.clk.as_ptr()) } as u64)
    }

    /// Asks for `rate`; the provider may round it. Errors are the provider's (e.g. `EINVAL`
    /// for a rate it cannot run at), or `EINVAL` for a rate that does not fit `unsigned long`.
    ///
    /// # Examples
    ///
    /// ```
    /// use kernel::clk::{Clk, Hertz};
    /// fn slow_down(clk: &Clk) -> Result {
    ///     clk.set_rate(Hertz::from_khz(100_000))
    /// }
    /// ```
    pub fn set_rate(&self, rate: Hertz) -> Result {
        let rate = crate::ffi::c_ulong::try_from(rate.0).map_err(|_| crate::error::code::EINVAL)?;
        // SAFETY: By the type invariant `self.clk` is a clock we hold.
        to_result(unsafe { bindings::clk_set_rate(self.clk.as_ptr(), rate) })
    }

    /// The rate the clock would run at if asked for `rate`, without changing it.
    ///
    /// # Examples
    ///
    /// ```
    /// use kernel::clk::{Clk, Hertz};
    /// fn supported(clk: &Clk, rate: Hertz) -> bool {
    ///     clk.round_rate(rate) == Ok(rate)
    /// }
    /// ```
    pub fn round_rate(&self, rate: Hertz) -> Result<Hertz> {
        let rate = crate::ffi::c_ulong::try_from(rate.0).map_err(|_| crate::error::code::EINVAL)?;
        // SAFETY: By the type invariant `self.clk` is a clock we hold.
        let rounded = unsafe { bindings::clk_round_rate(self.clk.as_ptr(), rate) };
        if rounded < 0 {
            // A negative errno: in range for `c_int`.
            return Err(crate::error::Error::from_errno(
                rounded as crate::ffi::c_int,
            ));
        }
        // Not negative: lossless.
        Ok(Hertz(rounded as u64))
    }

    /// Prepares and enables the clock; it stays enabled until the returned [`EnabledClk`] is
    /// dropped.
    ///
    /// # Examples
    ///
    /// ```
    /// use kernel::clk::{Clk, EnabledClk};
    /// fn run(clk: Clk) -> Result<EnabledClk> {
    ///     clk.prepare_enable()
    /// }
    /// ```
    pub fn prepare_enable(self) -> Result<EnabledClk> {
        // SAFETY: By the type invariant `self.clk` is a clock we hold.
        to_result(unsafe { bindings::clk_prepare_enable(self.clk.as_ptr()) })?;
        // INVARIANT: Just enabled, once.
        Ok(EnabledClk(self))
    }

    /// The C `struct clk` pointer, e.g. for a `struct cpufreq_policy`.
    pub(crate) fn as_raw(&self) -> *mut bindings::clk {
        self.clk.as_ptr()
    }
}

impl Drop for Clk {
    fn drop(&mut self) {
        // SAFETY: By the type invariant `self.clk` came from `clk_get` and is put back once, here.
        unsafe { bindings::clk_put(self.clk.as_ptr()) }
    }
}

/// A clock prepared and enabled by [`Clk::prepare_enable`]; disabled and unprepared (then put
/// back) when dropped. Derefs to [`Clk`].
///
/// # Invariants
///
/// The clock was enabled once by `clk_prepare_enable` for this object.
///
/// # Examples
///
/// ```
/// use kernel::clk::{EnabledClk, Hertz};
/// fn current(clk: &EnabledClk) -> Hertz {
///     clk.rate()
/// }
/// ```
pub struct EnabledClk(Clk);

impl Deref for EnabledClk {
    type Target = Clk;

    fn deref(&self) -> &Clk {
        &self.0
    }
}

impl Drop for EnabledClk {
    fn drop(&mut self) {
        // SAFETY: By the type invariant the clock was enabled once for us; disabled once here.
        unsafe { bindings::clk_disable_unprepare(self.0.as_raw()) }
    }
}
