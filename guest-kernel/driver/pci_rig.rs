// SPDX-License-Identifier: GPL-2.0

//! Driver for pci-rig's emulated PCI device (`qemu-device/REGISTERS.md`), written only against
//! the safe abstractions of `guest-kernel/rust`: safe code only, enforced below.
//!
//! Probe checks the device's identity, runs an MMIO self-test and starts a worker that keeps
//! reading the device until access is refused or the device reads all-ones. Nobody tells the
//! worker to stop: when the binding ends (unbind, hot-unplug) its next `try_access` is refused,
//! and the binding's release waits for it. Everything the driver does is reported on the console
//! in the line format of `README.md` beside this file, so the harness can hold it against the
//! device's own access log.

#![forbid(unsafe_code)]

use core::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use kernel::{
    c_str, dev_err, dev_info,
    devres::Devres,
    new_condvar, new_mutex, new_work, pci,
    pci::Bar,
    prelude::*,
    sync::{Arc, CondVar, Mutex},
    time::msecs_to_jiffies,
    workqueue::{self, Work, WorkItem},
};

/// BAR0 holds 4 KiB of 32-bit registers.
const BAR0_SIZE: usize = 0x1000;

/// BAR0 register offsets.
mod reg {
    pub(crate) const MAGIC: usize = 0x000;
    pub(crate) const VERSION: usize = 0x004;
    pub(crate) const SCRATCH: usize = 0x008;
    pub(crate) const COUNTER: usize = 0x00c;
    pub(crate) const CMD: usize = 0x010;
    pub(crate) const STATUS: usize = 0x014;
    pub(crate) const OP_OFFSET: usize = 0x018;
    pub(crate) const OP_LENGTH: usize = 0x01c;
    pub(crate) const OP_ARG: usize = 0x020;
    pub(crate) const RESULT: usize = 0x024;
    pub(crate) const RESET: usize = 0x050;
}

const MAGIC: u32 = 0x7072_6967;
const STATUS_BUSY: u32 = 1 << 0;
const STATUS_DONE: u32 = 1 << 1;
const STATUS_ERROR: u32 = 1 << 2;
const OP_CRC32: u32 = 1;
const OP_FILL: u32 = 2;
const OP_INVERT: u32 = 3;
const ERR_BAD_OPCODE: u32 = 1;

type Regs = Bar<BAR0_SIZE>;

/// What an id-table entry tells probe: the register-map major version the device must have.
struct Expect {
    major: u32,
}

kernel::pci_device_table!(
    IDS,
    Expect,
    [(pci::DeviceId::from_id(0x7072, 0x0001), Expect { major: 1 }),]
);

/// Reads a register and reports the access as `# mmio r bar0 OFFSET 4 VALUE`. A macro, not a
/// function, so the offset stays a constant and `readl` checks it at build time.
macro_rules! rd {
    ($pdev:expr, $io:expr, $off:expr) => {{
        let v = $io.readl($off);
        dev_info!($pdev, "# mmio r bar0 {:#x} 4 {:#x}\n", $off, v);
        v
    }};
}

/// Writes a register and reports it as `# mmio w bar0 OFFSET 4 VALUE`.
macro_rules! wr {
    ($pdev:expr, $io:expr, $val:expr, $off:expr) => {{
        let v: u32 = $val;
        $io.writel(v, $off);
        dev_info!($pdev, "# mmio w bar0 {:#x} 4 {:#x}\n", $off, v);
    }};
}

/// Reports one self-test step: `step NAME ok` or `step NAME FAIL why`.
fn step(pdev: &pci::Device, name: &str, ok: bool, detail: core::fmt::Arguments<'_>) -> Result {
    if ok {
        dev_info!(pdev, "step {} ok {}\n", name, detail);
        Ok(())
    } else {
        dev_err!(pdev, "step {} FAIL {}\n", name, detail);
        Err(EIO)
    }
}

/// CRC-32 (IEEE 802.3, as the device computes it) of `len` bytes of value `byte`.
fn crc32_of_repeated(byte: u8, len: usize) -> u32 {
    let mut crc = !0u32;
    for _ in 0..len {
        crc ^= u32::from(byte);
        for _ in 0..8 {
            crc = if crc & 1 != 0 {
                (crc >> 1) ^ 0xedb8_8320
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

/// Refuses a device that is not ours or speaks another register map.
fn identify(pdev: &pci::Device, io: &Regs, expect: &Expect) -> Result {
    let magic = rd!(pdev, io, reg::MAGIC);
    if magic != MAGIC {
        dev_err!(
            pdev,
            "step identify FAIL magic {:#x}, expected {:#x}\n",
            magic,
            MAGIC
        );
        return Err(ENODEV);
    }
    let version = rd!(pdev, io, reg::VERSION);
    if version >> 16 != expect.major {
        dev_err!(
            pdev,
            "step identify FAIL version {:#x}, this driver speaks major {}\n",
            version,
            expect.major
        );
        return Err(ENOTSUPP);
    }
    step(
        pdev,
        "identify",
        true,
        format_args!("magic={:#x} version={:#x}", magic, version),
    )
}

/// Starts an operation over BAR2 and waits for it; returns STATUS and RESULT.
fn operate(pdev: &pci::Device, io: &Regs, op: u32, offset: u32, len: u32, arg: u32) -> (u32, u32) {
    wr!(pdev, io, offset, reg::OP_OFFSET);
    wr!(pdev, io, len, reg::OP_LENGTH);
    wr!(pdev, io, arg, reg::OP_ARG);
    wr!(pdev, io, op, reg::CMD);
    let mut status = rd!(pdev, io, reg::STATUS);
    // The device completes at once unless a knob keeps it busy; do not wait for ever.
    for _ in 0..100 {
        if status & STATUS_BUSY == 0 {
            break;
        }
        status = rd!(pdev, io, reg::STATUS);
    }
    (status, rd!(pdev, io, reg::RESULT))
}

/// The MMIO self-test of REGISTERS.md, one reported step at a time.
fn selftest(pdev: &pci::Device, io: &Regs) -> Result {
    for pattern in [0, !0, 0xa5a5_5a5a, 0x5a5a_a5a5, 0x1234_5678] {
        wr!(pdev, io, pattern, reg::SCRATCH);
        let back = rd!(pdev, io, reg::SCRATCH);
        step(
            pdev,
            "scratch",
            back == pattern,
            format_args!("wrote={:#x} read={:#x}", pattern, back),
        )?;
    }

    let first = rd!(pdev, io, reg::COUNTER);
    let second = rd!(pdev, io, reg::COUNTER);
    step(
        pdev,
        "counter",
        second == first.wrapping_add(1),
        format_args!("{} then {}", first, second),
    )?;

    let len = 64;
    let (status, result) = operate(pdev, io, OP_FILL, 0, len as u32, 0x5a);
    let want = crc32_of_repeated(0x5a, len);
    step(
        pdev,
        "fill",
        status == STATUS_DONE && result == want,
        format_args!("status={:#x} crc={:#x} want={:#x}", status, result, want),
    )?;
    let (status, result) = operate(pdev, io, OP_CRC32, 0, len as u32, 0);
    step(
        pdev,
        "crc32",
        status == STATUS_DONE && result == want,
        format_args!("status={:#x} crc={:#x} want={:#x}", status, result, want),
    )?;
    let (status, result) = operate(pdev, io, OP_INVERT, 0, len as u32, 0);
    let want = crc32_of_repeated(!0x5a, len);
    step(
        pdev,
        "invert",
        status == STATUS_DONE && result == want,
        format_args!("status={:#x} crc={:#x} want={:#x}", status, result, want),
    )?;

    let (status, _) = operate(pdev, io, 0x63, 0, 0, 0);
    let refused = status & STATUS_ERROR != 0 && (status >> 8) & 0xff == ERR_BAD_OPCODE;
    step(
        pdev,
        "bad_opcode",
        refused,
        format_args!("status={:#x}", status),
    )?;

    // Offsets only known at run time go through the checked accessors.
    let past_end = io.try_readl(BAR0_SIZE);
    let unaligned = io.try_readl(reg::SCRATCH + 2);
    let inside = io.try_readl(reg::SCRATCH);
    step(
        pdev,
        "try_access_bounds",
        past_end == Err(EINVAL) && unaligned == Err(EINVAL) && inside.is_ok(),
        format_args!(
            "past_end={:?} unaligned={:?} inside_ok={}",
            past_end.err(),
            unaligned.err(),
            inside.is_ok()
        ),
    )?;
    if let Ok(v) = inside {
        dev_info!(pdev, "# mmio r bar0 {:#x} 4 {:#x}\n", reg::SCRATCH, v);
    }
    Ok(())
}

/// Why the worker stopped.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Stop {
    /// `try_access` refused: the binding is gone.
    Refused,
    /// MAGIC read all-ones: the device went away under us (surprise removal).
    Gone,
}

/// Keeps reading MAGIC through the `Devres` handle, about once a millisecond, until refused
/// access or the device answers all-ones (it is gone: a PCI read from a device that is not there
/// completes with all bits set).
#[pin_data]
struct Worker {
    bar: Arc<Devres<Regs>>,
    accesses: AtomicU64,
    /// Set once, before the worker is queued.
    started: AtomicBool,
    #[pin]
    stopped: Mutex<Option<Stop>>,
    #[pin]
    wake: CondVar,
    #[pin]
    work: Work<Worker>,
}

kernel::impl_has_work! {
    impl HasWork<Self> for Worker { self.work }
}

impl Worker {
    fn new(bar: Arc<Devres<Regs>>) -> Result<Arc<Self>> {
        Arc::pin_init(
            pin_init!(Worker {
                bar,
                accesses: AtomicU64::new(0),
                started: AtomicBool::new(false),
                stopped <- new_mutex!(None),
                wake <- new_condvar!(),
                work <- new_work!("pci_rig::Worker"),
            }),
            GFP_KERNEL,
        )
    }

    fn start(self: &Arc<Self>) {
        self.started.store(true, Ordering::SeqCst);
        // A long-running item: the long queue keeps it off the shared per-CPU workers.
        let _ = workqueue::system_long().enqueue(self.clone());
    }

    /// Waits until the worker has stopped by itself and returns why; `None` if it never started.
    /// It stops within a millisecond of its access being refused, so call this once the binding
    /// has ended (or the device is gone).
    fn join(&self) -> Option<Stop> {
        if !self.started.load(Ordering::SeqCst) {
            return None;
        }
        let mut stopped = self.stopped.lock();
        loop {
            if let Some(why) = *stopped {
                return Some(why);
            }
            self.wake.wait(&mut stopped);
        }
    }
}

impl WorkItem for Worker {
    type Pointer = Arc<Worker>;

    fn run(this: Arc<Worker>) {
        let why = loop {
            match this.bar.try_access() {
                Some(io) => {
                    let magic = io.readl(reg::MAGIC);
                    this.accesses.fetch_add(1, Ordering::Relaxed);
                    if magic == u32::MAX {
                        break Stop::Gone;
                    }
                }
                None => break Stop::Refused,
            }
            let mut guard = this.stopped.lock();
            let _ = this
                .wake
                .wait_interruptible_timeout(&mut guard, msecs_to_jiffies(1));
        };
        dev_info!(
            this.bar.device(),
            "event worker_gave_up reason={:?} accesses={}\n",
            why,
            this.accesses.load(Ordering::Relaxed)
        );
        *this.stopped.lock() = Some(why);
        // Last act: after this only the return (no sleep, `WorkerJoin` still holds a reference,
        // so this drop is not the last) runs in module text. On these non-preemptible kernels the
        // module cannot be freed before this CPU schedules again, which is after the return.
        this.wake.notify_all();
    }
}

/// Tied to the binding, so dropped after it ended: waits for the worker, whose access is
/// refused from then on, so that nothing of the driver runs once the unbind is over.
struct WorkerJoin(Arc<Worker>);

impl Drop for WorkerJoin {
    fn drop(&mut self) {
        if let Some(why) = self.0.join() {
            dev_info!(
                self.0.bar.device(),
                "event worker_stopped reason={:?} accesses={}\n",
                why,
                self.0.accesses.load(Ordering::Relaxed)
            );
        }
    }
}

/// Registered before BAR0 is mapped, so devres (last in, first out) drops it after the mapping
/// is revoked at unbind: it then proves that a handle kept across the unbind is refused.
struct KeptHandle {
    bar: Arc<Mutex<Option<Arc<Devres<Regs>>>>>,
}

impl Drop for KeptHandle {
    fn drop(&mut self) {
        if let Some(bar) = self.bar.lock().take() {
            let refused = bar.try_access().is_none();
            dev_info!(
                bar.device(),
                "event kept_handle {}\n",
                if refused {
                    "refused"
                } else {
                    "STILL_ACCESSIBLE"
                }
            );
        }
    }
}

/// Per-device data.
struct PciRig {
    bar: Arc<Devres<Regs>>,
}

impl pci::Driver for PciRig {
    type IdInfo = Expect;
    const ID_TABLE: pci::IdTable<Expect> = IDS;
    type Data = KBox<PciRig>;

    fn probe(pdev: &pci::Device<pci::Core>, expect: &Expect) -> Result<KBox<PciRig>> {
        dev_info!(pdev, "event probe_begin\n");
        pdev.enable_device_mem()?;
        pdev.set_master();
        let kept = Arc::pin_init(new_mutex!(None), GFP_KERNEL)?;
        Devres::new_foreign_owned(pdev.as_ref(), KeptHandle { bar: kept.clone() }, GFP_KERNEL)?;
        let bar = Arc::new(
            pdev.iomap_region_sized::<BAR0_SIZE>(0, c_str!("pci_rig"))?,
            GFP_KERNEL,
        )?;
        // The device is bound while probe runs: no RCU guard needed.
        let io = bar.access(pdev.as_ref())?;
        identify(pdev, io, expect)?;
        selftest(pdev, io)?;
        *kept.lock() = Some(bar.clone());
        // Joined before it starts, so that a failed probe never leaves it running.
        let worker = Worker::new(bar.clone())?;
        Devres::new_foreign_owned(pdev.as_ref(), WorkerJoin(worker.clone()), GFP_KERNEL)?;
        worker.start();
        dev_info!(pdev, "event probe_done\n");
        Ok(KBox::new(PciRig { bar }, GFP_KERNEL)?)
    }

    /// The worker is not told: the binding ends after this returns, which refuses its access.
    fn remove(pdev: &pci::Device<pci::Core>, this: &KBox<PciRig>) {
        dev_info!(pdev, "event remove_begin\n");
        // Quiesce: a reset drops any pending interrupt and operation.
        if let Ok(io) = this.bar.access(pdev.as_ref()) {
            wr!(pdev, io, 1, reg::RESET);
        }
        dev_info!(pdev, "event remove_done\n");
    }
}

kernel::module_pci_driver! {
    type: PciRig,
    name: "pci_rig",
    author: "pci-rig",
    description: "Driver for pci-rig's emulated PCI device",
    license: "GPL",
}
