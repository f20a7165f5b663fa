// SPDX-License-Identifier: GPL-2.0

//! CPU frequency scaling drivers.
//!
//! A driver implements [`Driver`]: `init` sets a [`Policy`] up (which CPUs it covers, its
//! frequency table and clock, how long a change takes) and returns the policy's data;
//! `target_index` moves the policy's CPUs to an entry of its table; `exit` ends it. The
//! registration is the generic [`driver::Registration`] of [`Adapter`], so a cpufreq driver is
//! registered like a bus driver: while the object lives. The cpufreq core reads the current
//! frequency from the policy's clock, checks limits against the table, and lists the table in
//! `scaling_available_frequencies`.
//!
//! C header: [`include/linux/cpufreq.h`](srctree/include/linux/cpufreq.h)
//!
//! # Examples
//!
//! A frequency table, as a driver builds it from its OPPs:
//!
//! ```
//! use kernel::cpufreq::FreqTable;
//!
//! let table = FreqTable::new(&[400_000, 800_000, 1_200_000])?;
//! assert_eq!(table.len(), 3);
//! assert_eq!(table.freq_khz(1), Some(800_000));
//! assert_eq!(table.freq_khz(3), None);
//! assert_eq!(FreqTable::new(&[]).err(), Some(EINVAL));
//! # Ok::<(), Error>(())
//! ```

use crate::{
    alloc::Flags,
    bindings,
    clk::Clk,
    device::Device,
    driver,
    error::{code::EINVAL, to_result, Result},
    ffi::{c_int, c_uint},
    prelude::*,
    str::CStr,
    types::{ARef, Opaque},
    ThisModule,
};
use core::marker::PhantomData;

/// The frequency that ends a C frequency table (`CPUFREQ_TABLE_END`, `~1u`).
const TABLE_END: c_uint = !1;

/// A set of CPUs (C's `struct cpumask`), as the kernel allocates it: `cpumask_size()` bytes,
/// which with `CONFIG_CPUMASK_OFFSTACK` is less than a `struct cpumask`; so it is only ever
/// handed to C's cpumask functions, never read or copied as a struct (see [`OwnedCpumask`]).
///
/// # Invariants
///
/// A `&Cpumask` points to a valid mask of at least `cpumask_size()` bytes.
///
/// # Examples
///
/// ```
/// fn how_many(policy: &kernel::cpufreq::Policy) -> u32 {
///     policy.cpus().weight()
/// }
/// ```
#[repr(transparent)]
pub struct Cpumask(Opaque<bindings::cpumask>);

impl Cpumask {
    /// Wraps a mask the kernel made.
    ///
    /// # Safety
    ///
    /// `ptr` must point to a valid mask (`cpumask_size()` bytes, not necessarily a whole
    /// `struct cpumask`) for `'a`.
    pub unsafe fn from_raw<'a>(ptr: *mut bindings::cpumask) -> &'a Self {
        // SAFETY: `Cpumask` is a transparent wrapper; the caller guarantees validity.
        unsafe { &*ptr.cast() }
    }

    pub(crate) fn as_raw(&self) -> *mut bindings::cpumask {
        self.0.get()
    }

    /// The number of CPUs in the set.
    ///
    /// # Examples
    ///
    /// See [`Cpumask`].
    ///
    /// ```
    /// fn single(mask: &kernel::cpufreq::Cpumask) -> bool {
    ///     mask.weight() == 1
    /// }
    /// ```
    pub fn weight(&self) -> u32 {
        // SAFETY: By the type invariant the mask is valid.
        unsafe { bindings::cpumask_weight(self.as_raw()) }
    }
}

/// A copy of a [`Cpumask`] that this object owns, as large as the kernel makes masks
/// (`cpumask_size()`): with `CONFIG_CPUMASK_OFFSTACK` that is only `nr_cpu_ids` bits, far less
/// than a `struct cpumask` (`NR_CPUS` bits), so a mask is never read or copied as a whole struct.
///
/// # Invariants
///
/// `bits` holds at least `cpumask_size()` bytes, initialised: a valid mask for the cpumask
/// functions.
///
/// # Examples
///
/// ```
/// use kernel::cpufreq::OwnedCpumask;
/// fn same_count(policy: &kernel::cpufreq::Policy) -> Result<bool> {
///     let copy = OwnedCpumask::copy_of(policy.cpus(), GFP_KERNEL)?;
///     Ok(copy.weight() == policy.cpus().weight())
/// }
/// ```
///
/// The copy holds exactly the kernel's mask size, and the same CPUs as the online mask; no more
/// is read from it (on arm64 here, `NR_CPUS` is 512 and masks are allocated off-stack: the copy
/// is 8 bytes where a `struct cpumask` is 64).
///
/// ```
/// use kernel::{bindings, cpufreq::OwnedCpumask};
/// // SAFETY: `__cpu_online_mask` is the kernel's online mask, valid for as long as it runs.
/// let online =
///     unsafe { kernel::cpufreq::Cpumask::from_raw(core::ptr::addr_of_mut!(bindings::__cpu_online_mask)) };
/// let copy = OwnedCpumask::copy_of(online, GFP_KERNEL)?;
/// // SAFETY: `cpumask_size` has no preconditions.
/// let size = unsafe { bindings::cpumask_size() } as usize;
/// assert_eq!(copy.size_bytes(), size);
/// if cfg!(CONFIG_CPUMASK_OFFSTACK) {
///     assert!(size < core::mem::size_of::<bindings::cpumask>());
/// }
/// assert_eq!(copy.weight(), online.weight());
/// # Ok::<(), Error>(())
/// ```
pub struct OwnedCpumask {
    bits: KVec<core::ffi::c_ulong>,
}

impl OwnedCpumask {
    /// Copies `mask` (through `cpumask_copy`, which reads only the kernel's mask size).
    pub fn copy_of(mask: &Cpumask, flags: Flags) -> Result<Self> {
        // SAFETY: `cpumask_size` has no preconditions.
        let bytes = unsafe { bindings::cpumask_size() } as usize;
        let words = bytes.div_ceil(core::mem::size_of::<core::ffi::c_ulong>());
        let mut bits = KVec::from_elem(0, words, flags)?;
        // SAFETY: `bits` has room for `cpumask_size()` bytes, all `cpumask_copy` writes; `mask`
        // is valid by its type invariant.
        unsafe { bindings::cpumask_copy(bits.as_mut_ptr().cast(), mask.as_raw()) };
        // INVARIANT: `bits` holds `cpumask_size()` initialised bytes.
        Ok(Self { bits })
    }

    /// The copy's size in bytes: the kernel's mask size.
    pub fn size_bytes(&self) -> usize {
        self.bits.len() * core::mem::size_of::<core::ffi::c_ulong>()
    }
}

impl core::ops::Deref for OwnedCpumask {
    type Target = Cpumask;

    fn deref(&self) -> &Cpumask {
        // SAFETY: By the type invariant `bits` is a valid mask, borrowed for as long as `self`.
        unsafe { Cpumask::from_raw(self.bits.as_ptr().cast_mut().cast()) }
    }
}

// SAFETY: The copy is plain bits this object owns; any thread may read or drop it.
unsafe impl Send for OwnedCpumask {}

// SAFETY: As above; reads through `&self` do not change it.
unsafe impl Sync for OwnedCpumask {}

/// A frequency table (C's `struct cpufreq_frequency_table` array, ending in
/// `CPUFREQ_TABLE_END`), owned by Rust.
///
/// # Invariants
///
/// `entries` holds at least one frequency and ends with exactly one `CPUFREQ_TABLE_END` entry.
///
/// # Examples
///
/// See the [module documentation](self).
///
/// ```
/// let t = kernel::cpufreq::FreqTable::new(&[1000])?;
/// assert_eq!(t.freq_khz(0), Some(1000));
/// # Ok::<(), Error>(())
/// ```
pub struct FreqTable {
    entries: KVec<bindings::cpufreq_frequency_table>,
}

// SAFETY: Plain data owned by the object.
unsafe impl Send for FreqTable {}

// SAFETY: Plain data; `&self` methods only read it.
unsafe impl Sync for FreqTable {}

impl FreqTable {
    /// A table of these frequencies in kHz, in this order; `EINVAL` if there are none or one is
    /// 0 or does not fit C's `unsigned int`.
    ///
    /// # Examples
    ///
    /// See the [module documentation](self).
    ///
    /// ```
    /// assert_eq!(kernel::cpufreq::FreqTable::new(&[0]).err(), Some(EINVAL));
    /// ```
    pub fn new(khz: &[u64]) -> Result<Self> {
        if khz.is_empty() {
            return Err(EINVAL);
        }
        let mut entries = KVec::with_capacity(khz.len() + 1, GFP_KERNEL)?;
        for (i, &f) in khz.iter().enumerate() {
            let frequency = c_uint::try_from(f).map_err(|_| EINVAL)?;
            if frequency == 0 || frequency == TABLE_END {
                return Err(EINVAL);
            }
            entries.push(
                bindings::cpufreq_frequency_table {
                    flags: 0,
                    driver_data: c_uint::try_from(i).map_err(|_| EINVAL)?,
                    frequency,
                },
                GFP_KERNEL,
            )?;
        }
        entries.push(
            bindings::cpufreq_frequency_table {
                flags: 0,
                driver_data: 0,
                frequency: TABLE_END,
            },
            GFP_KERNEL,
        )?;
        // INVARIANT: At least one frequency, then the end marker.
        Ok(Self { entries })
    }

    /// The number of frequencies (the end marker not counted).
    ///
    /// # Examples
    ///
    /// ```
    /// assert_eq!(kernel::cpufreq::FreqTable::new(&[1, 2])?.len(), 2);
    /// # Ok::<(), Error>(())
    /// ```
    pub fn len(&self) -> usize {
        self.entries.len() - 1
    }

    /// Whether the table is empty: never, a table has at least one frequency.
    ///
    /// # Examples
    ///
    /// ```
    /// assert!(!kernel::cpufreq::FreqTable::new(&[1])?.is_empty());
    /// # Ok::<(), Error>(())
    /// ```
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The frequency of entry `index`, in kHz.
    ///
    /// # Examples
    ///
    /// See the [module documentation](self).
    ///
    /// ```
    /// assert_eq!(kernel::cpufreq::FreqTable::new(&[7])?.freq_khz(0), Some(7));
    /// # Ok::<(), Error>(())
    /// ```
    pub fn freq_khz(&self, index: usize) -> Option<u32> {
        self.entries[..self.len()].get(index).map(|e| e.frequency)
    }

    fn as_raw(&self) -> *mut bindings::cpufreq_frequency_table {
        self.entries.as_ptr().cast_mut()
    }
}

/// A cpufreq policy: a group of CPUs that change frequency together (C's
/// `struct cpufreq_policy`).
///
/// Drivers get a `&mut Policy` in [`Driver::init`] and a `&Policy` in the other callbacks.
///
/// # Invariants
///
/// A `&Policy` points to a valid `struct cpufreq_policy`; the cpufreq core holds the policy's
/// lock for writing while a driver callback runs. A `&mut Policy` exists only in `init`, before
/// the policy is active; lockless readers (e.g. `cpufreq_quick_get`) may read it during the
/// other callbacks, which therefore get `&Policy`.
///
/// # Examples
///
/// ```
/// fn describe(policy: &kernel::cpufreq::Policy) -> (u32, u32) {
///     (policy.cpu(), policy.cur_khz())
/// }
/// ```
#[repr(transparent)]
pub struct Policy(Opaque<bindings::cpufreq_policy>);

impl Policy {
    /// For `init`, the one callback that may change the policy.
    ///
    /// # Safety
    ///
    /// `ptr` must be a valid policy that nothing else reads or writes for `'a` (the core has
    /// not published it yet while `init` runs).
    unsafe fn from_raw_mut<'a>(ptr: *mut bindings::cpufreq_policy) -> &'a mut Self {
        // SAFETY: `Policy` is a transparent wrapper; the caller guarantees validity and
        // exclusive use.
        unsafe { &mut *ptr.cast() }
    }

    /// For the other callbacks, which run while sysfs readers and the governor may read the
    /// policy: shared access only.
    ///
    /// # Safety
    ///
    /// `ptr` must be a valid policy for `'a`.
    unsafe fn from_raw<'a>(ptr: *mut bindings::cpufreq_policy) -> &'a Self {
        // SAFETY: `Policy` is a transparent wrapper over `Opaque`, which C may change under a
        // shared reference; the caller guarantees validity.
        unsafe { &*ptr.cast() }
    }

    fn as_raw(&self) -> *mut bindings::cpufreq_policy {
        self.0.get()
    }

    /// The CPU that manages the policy.
    ///
    /// # Examples
    ///
    /// See [`Policy`].
    ///
    /// ```
    /// fn first(policy: &kernel::cpufreq::Policy) -> bool {
    ///     policy.cpu() == 0
    /// }
    /// ```
    pub fn cpu(&self) -> u32 {
        // SAFETY: By the type invariant the policy is valid; `cpu` is set before `init`.
        unsafe { (*self.as_raw()).cpu }
    }

    /// The frequency the core last knew the policy at, in kHz (0 before the first read).
    ///
    /// # Examples
    ///
    /// See [`Policy`].
    ///
    /// ```
    /// fn running(policy: &kernel::cpufreq::Policy) -> bool {
    ///     policy.cur_khz() > 0
    /// }
    /// ```
    pub fn cur_khz(&self) -> u32 {
        // SAFETY: By the type invariant the policy is valid and locked.
        unsafe { (*self.as_raw()).cur }
    }

    /// The CPUs the policy covers (online ones).
    ///
    /// # Examples
    ///
    /// See [`Cpumask`].
    ///
    /// ```
    /// fn shared(policy: &kernel::cpufreq::Policy) -> bool {
    ///     policy.cpus().weight() > 1
    /// }
    /// ```
    pub fn cpus(&self) -> &Cpumask {
        // SAFETY: By the type invariant the policy is valid; its mask lives as long as it.
        unsafe { Cpumask::from_raw(bindings::cpufreq_policy_cpus(self.as_raw())) }
    }

    /// The device of the policy's CPU.
    ///
    /// # Examples
    ///
    /// ```
    /// fn name_it(policy: &kernel::cpufreq::Policy) -> Result {
    ///     kernel::dev_info!(&*policy.cpu_device()?, "policy\n");
    ///     Ok(())
    /// }
    /// ```
    pub fn cpu_device(&self) -> Result<ARef<Device>> {
        // SAFETY: Any CPU number may be asked; the result is null or a CPU device, which is
        // never freed while the CPU is present (it is: it is in a policy).
        let dev = unsafe { bindings::get_cpu_device(self.cpu()) };
        if dev.is_null() {
            return Err(ENODEV);
        }
        // SAFETY: `dev` is a valid device; `get_device` takes a reference for the `ARef`.
        Ok(unsafe { Device::get_device(dev) })
    }

    /// Extends the policy to every CPU that shares `cpu_dev`'s OPP table (`opp-shared` in the
    /// device tree); CPUs that do not share keep a policy each.
    ///
    /// # Examples
    ///
    /// ```
    /// fn init(policy: &mut kernel::cpufreq::Policy) -> Result {
    ///     let dev = policy.cpu_device()?;
    ///     policy.share_opp_cpus(&dev)
    /// }
    /// ```
    pub fn share_opp_cpus(&mut self, cpu_dev: &Device) -> Result {
        // SAFETY: `cpu_dev` is a valid device and the policy's mask valid and ours to write
        // (`&mut self`: inside `init`).
        let ret = unsafe {
            bindings::dev_pm_opp_of_get_sharing_cpus(
                cpu_dev.as_raw(),
                bindings::cpufreq_policy_cpus(self.as_raw()),
            )
        };
        // `ENOENT`: the table is not shared; the policy keeps its one CPU.
        if ret == ENOENT.to_errno() {
            return Ok(());
        }
        to_result(ret)
    }

    /// Sets how long a frequency change takes, in nanoseconds (`None`: unknown, which the core
    /// treats as too slow for dynamic governors).
    ///
    /// # Examples
    ///
    /// ```
    /// fn fast(policy: &mut kernel::cpufreq::Policy) {
    ///     policy.set_transition_latency_ns(Some(100_000));
    /// }
    /// ```
    pub fn set_transition_latency_ns(&mut self, ns: Option<u32>) {
        // `CPUFREQ_ETERNAL` is -1 as an `unsigned int`.
        let ns = ns.unwrap_or(c_uint::MAX);
        // SAFETY: By the type invariant the policy is valid; `&mut self`: inside `init`.
        unsafe { (*self.as_raw()).cpuinfo.transition_latency = ns };
    }
}

/// What [`Driver::init`] hands the policy: its frequency table and clock (kept by the policy
/// until `exit`) and the driver's data for it.
///
/// # Examples
///
/// ```
/// use kernel::{clk::Clk, cpufreq::{FreqTable, PolicySetup}};
/// fn setup(clk: Clk) -> Result<PolicySetup<()>> {
///     Ok(PolicySetup { freq_table: FreqTable::new(&[500_000, 1_000_000])?, clk, data: () })
/// }
/// ```
pub struct PolicySetup<D> {
    /// The frequencies the policy may run at; `target_index` gets an index into it.
    pub freq_table: FreqTable,
    /// The clock the policy's current frequency is read from.
    pub clk: Clk,
    /// The driver's data for this policy, passed to every callback.
    pub data: D,
}

/// A cpufreq driver.
///
/// # Examples
///
/// ```
/// use kernel::{clk::Clk, cpufreq::{self, FreqTable, Policy, PolicySetup}};
///
/// struct Fixed;
///
/// impl cpufreq::Driver for Fixed {
///     type Data = ();
///
///     fn init(policy: &mut Policy) -> Result<PolicySetup<()>> {
///         let cpu_dev = policy.cpu_device()?;
///         let clk = Clk::get(&cpu_dev, None)?;
///         let khz = clk.rate().as_khz();
///         Ok(PolicySetup { freq_table: FreqTable::new(&[khz])?, clk, data: () })
///     }
///
///     fn target_index(_policy: &Policy, _data: &(), _index: usize) -> Result {
///         Ok(())
///     }
/// }
/// ```
pub trait Driver: 'static {
    /// The driver's data per policy.
    type Data: Send + Sync;

    /// Sets up `policy`: which CPUs it covers, its table, clock and latency.
    fn init(policy: &mut Policy) -> Result<PolicySetup<Self::Data>>;

    /// Moves the policy to entry `index` of its frequency table.
    fn target_index(policy: &Policy, data: &Self::Data, index: usize) -> Result;

    /// Ends the policy; `data` is dropped when this returns, then the table and the clock.
    fn exit(policy: &Policy, data: Self::Data) {
        let _ = (policy, data);
    }
}

/// What a policy keeps from [`Driver::init`] until `exit`, in its `driver_data`.
struct Kept<D> {
    data: D,
    freq_table: FreqTable,
    _clk: Clk,
}

/// Registers a cpufreq [`Driver`]: the [`driver::RegistrationOps`] of cpufreq (at most one
/// cpufreq driver is registered at a time; a second gets `EEXIST`).
///
/// # Examples
///
/// ```
/// # fn f<T: kernel::cpufreq::Driver>(module: &'static ThisModule) -> Result {
/// use kernel::{cpufreq, driver::Registration};
/// let _reg = KBox::pin_init(
///     Registration::<cpufreq::Adapter<T>>::new(kernel::c_str!("my-cpufreq"), module),
///     GFP_KERNEL,
/// )?;
/// # Ok(()) }
/// ```
pub struct Adapter<T: Driver>(PhantomData<T>);

// SAFETY: `register` leaves the driver registered only when `cpufreq_register_driver` succeeds,
// and `cpufreq_unregister_driver` ends every policy (calling `exit`) and removes the driver,
// after which the core no longer uses it.
unsafe impl<T: Driver> driver::RegistrationOps for Adapter<T> {
    type RegType = bindings::cpufreq_driver;

    unsafe fn register(
        reg: &Opaque<bindings::cpufreq_driver>,
        name: &'static CStr,
        _module: &'static ThisModule,
    ) -> Result {
        let drv = reg.get();
        let name = name.as_bytes_with_nul();
        // SAFETY: `drv` is valid, zeroed and not registered (the caller's promise), so we may
        // fill it in; `cpufreq_generic_attr` is a static, NULL-terminated array of the core's.
        unsafe {
            if name.len() > (*drv).name.len() {
                return Err(EINVAL);
            }
            for (to, &from) in (*drv).name.iter_mut().zip(name) {
                // Lossless: a byte in `c_char`, whichever sign it has.
                *to = from as _;
            }
            (*drv).flags = bindings::CPUFREQ_NEED_INITIAL_FREQ_CHECK;
            (*drv).init = Some(Self::init_callback);
            (*drv).exit = Some(Self::exit_callback);
            (*drv).verify = Some(bindings::cpufreq_generic_frequency_table_verify);
            (*drv).target_index = Some(Self::target_index_callback);
            (*drv).get = Some(bindings::cpufreq_generic_get);
            (*drv).attr = core::ptr::addr_of_mut!(bindings::cpufreq_generic_attr).cast();
        }
        // SAFETY: `drv` is filled in and pinned.
        to_result(unsafe { bindings::cpufreq_register_driver(drv) })
    }

    unsafe fn unregister(reg: &Opaque<bindings::cpufreq_driver>) {
        // SAFETY: The caller promises that `reg` was registered and not unregistered since.
        unsafe { bindings::cpufreq_unregister_driver(reg.get()) }
    }
}

impl<T: Driver> Adapter<T> {
    extern "C" fn init_callback(policy: *mut bindings::cpufreq_policy) -> c_int {
        // SAFETY: The core calls `init` with a valid policy it holds the lock of for writing,
        // during the call only, before any governor or cpufreq user reads it (it is not yet
        // active), so this is the only access.
        let p = unsafe { Policy::from_raw_mut(policy) };
        let setup = match T::init(p) {
            Ok(s) => s,
            Err(e) => return e.to_errno(),
        };
        let table = setup.freq_table.as_raw();
        let clk = setup.clk.as_raw();
        let kept = match KBox::new(
            Kept {
                data: setup.data,
                freq_table: setup.freq_table,
                _clk: setup.clk,
            },
            GFP_KERNEL,
        ) {
            Ok(k) => k,
            Err(e) => return Error::from(e).to_errno(),
        };
        // SAFETY: The policy is valid and ours to write during `init`; the table and clock are
        // owned by `kept` (a heap object, so they do not move), which the policy keeps in
        // `driver_data` until `exit_callback` takes it back and drops it.
        unsafe {
            (*policy).freq_table = table;
            (*policy).clk = clk;
            (*policy).driver_data = KBox::into_raw(kept).cast();
        }
        0
    }

    extern "C" fn exit_callback(policy: *mut bindings::cpufreq_policy) {
        // SAFETY: The core calls `exit` once per successful `init`, with the policy locked;
        // `driver_data` holds the `Kept` stored there by `init_callback`, taken back only here.
        let kept = unsafe { KBox::from_raw((*policy).driver_data.cast::<Kept<T::Data>>()) };
        // SAFETY: The core no longer uses the table or clock once `exit` runs; clear both
        // before their owner is dropped.
        unsafe {
            (*policy).driver_data = core::ptr::null_mut();
            (*policy).freq_table = core::ptr::null_mut();
            (*policy).clk = core::ptr::null_mut();
        }
        // SAFETY: As for `init_callback`.
        let p = unsafe { Policy::from_raw(policy) };
        let Kept {
            data,
            freq_table,
            _clk: clk,
        } = KBox::into_inner(kept);
        T::exit(p, data);
        drop(freq_table);
        drop(clk);
    }

    extern "C" fn target_index_callback(
        policy: *mut bindings::cpufreq_policy,
        index: c_uint,
    ) -> c_int {
        // SAFETY: The core calls `target_index` with a valid, locked policy whose `init`
        // succeeded, so `driver_data` holds our `Kept`, alive until `exit`.
        let (p, kept) = unsafe {
            (
                Policy::from_raw(policy),
                &*(*policy).driver_data.cast::<Kept<T::Data>>(),
            )
        };
        let index = index as usize;
        if kept.freq_table.freq_khz(index).is_none() {
            return EINVAL.to_errno();
        }
        match T::target_index(p, &kept.data, index) {
            Ok(()) => 0,
            Err(e) => e.to_errno(),
        }
    }
}
