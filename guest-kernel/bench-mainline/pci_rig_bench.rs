// SPDX-License-Identifier: GPL-2.0

//! Figures seen from the guest, for `cargo xtask bench` and the `bench` scenario, on upstream
//! Linux 7.3's Rust abstractions (the port of `guest-kernel/bench/pci_rig_bench.rs`, whose
//! `bench …` lines it prints alike). It judges nothing: the host reads its `bench …` lines.
//!
//! - **MMIO**: a side-effect-free register read four ways, on our device (every access trapped
//!   and forwarded to the vfio-user server) and on QEMU's in-process `pci-testdev`, in the same
//!   boot. BAR0 is mapped once (a PCI region can be requested only once) and turned into a
//!   revocable handle, [`pci::DevresBar`] (`Bar::into_devres`). Then:
//!   - `raw`: reads through a plain `&pci::Bar`, what a 7.3 driver that holds its
//!     `pci::Bar<'bound, SIZE>` directly reads through: the reference is taken once, before the
//!     timed loops, with `DevresBar::access`, so no revocation check, no RCU and no device
//!     comparison is in any timed read; the read itself is the same `readl` as through a `Bar`
//!     held in driver data.
//!   - `devres`: a `DevresBar::try_access` per read (an RCU read-side section and a load of the
//!     revocable's flag around each read).
//!   - `guard`: one `try_access` guard for the whole timed loop, every read through it.
//!   - `access`: `DevresBar::access` with the bound device at hand (a device comparison, no
//!     RCU) per read.
//!
//!   They take turns batch by batch, so drift hits them alike.
//!   `bench mmio dev=NAME reads=N raw_ns=A devres_ns=B guard_ns=C access_ns=D` gives per-read
//!   medians.
//! - **Window**: our BAR2's read throughput, through a `pci::Bar` held directly (no RCU
//!   section around the 16 Ki reads): `bench window bytes=B ns=T kib_per_s=R`.
//! - **Interrupt round trip**: from a write of SOFT to INT_RAISE to our hard-IRQ handler, in the
//!   mode the platform gave (MSI; INTx when booted with `pci=nomsi`):
//!   `bench irq mode=msi|intx samples=N median_ns=T lost=L` (lost: no interrupt within 1 s).
//!   On 7.3 the vectors and the handler's registration are scoped values borrowing the bound
//!   device, so they are freed when this measurement ends (in probe), not at the first unbind.
//! - **Unbind**: each probe of our device ties K values to the binding with `Devres` (7.3's
//!   `Devres`: each one's devres release revokes it with its own RCU grace period), and maybe
//!   starts a worker busy with the device ([`UNBIND_CASES`], one case per probe, in turn). A
//!   stopwatch tied first (`devres::register`) is released last (devres is last in, first out)
//!   and prints `bench unbind k=K worker=busy|idle remove_ns=R total_ns=T`: `unbind()`'s own
//!   time, and the time from `unbind()`'s start to the release of the last `Devres`.
//! - **Revoke each**: what K values cost if each waits for its own RCU grace period
//!   (`Revocable::revoke`): `bench revoke_each k=K ns=T`.
//! - **DMA**: our device's DMA engine moving its whole window (64 KiB) to and from a coherent
//!   buffer (`dma::Coherent<[u8]>`), the doorbell to STATUS no longer BUSY (polled: no
//!   interrupt), against the CPU copying the same bytes out of that buffer: `bench dma
//!   dir=to_device|from_device bytes=B ns=T cpu_ns=C` (medians); and allocating and freeing a
//!   coherent buffer of one page: `bench dma_alloc bytes=B samples=N median_ns=T`. The CPU copy
//!   is 7.3's `Io::copy_to_slice` on the buffer, one `memcpy` (6.12's read byte by byte).
//!
//! `unsafe` is denied but for two calls that 7.3 offers only as `unsafe`, each with its own
//! `SAFETY` comment: setting the DMA mask, and registering the interrupt handler.
//!
//! 7.3's `pci::Vendor` cannot be made from a raw vendor ID outside the PCI abstraction, and our
//! device's vendor (0x7072) has no name there, so our device is matched by its class (0xff0000,
//! "other") and probe refuses (`ENODEV`) any such device that is not ours.

#![deny(unsafe_code)]

use core::sync::atomic::{AtomicBool, AtomicI64, AtomicUsize, Ordering};
use kernel::{
    device::{self, Bound, Core},
    devres::{self, Devres},
    dma::{Coherent, Device as _, DmaMask},
    io::Io,
    irq::{self, IrqReturn},
    new_work, pci,
    prelude::*,
    revocable::Revocable,
    sync::{new_condvar, new_mutex, Arc, CondVar, Mutex, SetOnce},
    time::{msecs_to_jiffies, Instant, Monotonic},
    workqueue::{self, Work, WorkItem},
};

/// Our device's register map: the driver's generated `regs.rs`, which the harness copies into
/// this module's build directory (qemu-device/REGISTERS.md). SCRATCH is read because reading
/// it has no side effect.
mod regs;

use regs::{
    reg::{
        CMD, DMA_ADDR_HI, DMA_ADDR_LO, INT_ACK, INT_ENABLE, INT_RAISE, INT_STATUS, OP_LENGTH,
        OP_OFFSET, SCRATCH, STATUS,
    },
    BAR2_SIZE, DEVICE_ID, INT_SOFT, OP_DMA_FROM_DEVICE, OP_DMA_TO_DEVICE, STATUS_BUSY, STATUS_DONE,
    VENDOR_ID,
};

/// BAR0 of both devices (ours and pci-testdev) is 4 KiB.
const BAR_SIZE: usize = 0x1000;
const SAMPLES: usize = 101;
const BATCH: usize = 32;
/// Our device's BAR2 window.
const WINDOW: usize = BAR2_SIZE;
/// How long one round trip may take before it counts as lost: long, since a busy host can
/// stall a TCG vCPU for milliseconds (10 ms lost 1 to 5 of 101 while kernels built beside).
const IRQ_TIMEOUT_NS: i64 = 1_000_000_000;

/// `(K, busy worker)` for the probes of our device, in turn.
const UNBIND_CASES: [(usize, bool); 6] = [
    (1, false),
    (16, false),
    (64, false),
    (1, true),
    (16, true),
    (64, true),
];

/// Probes of our device so far: picks the unbind case; the first also runs the MMIO figures.
static PROBES: AtomicUsize = AtomicUsize::new(0);

/// BAR0 as a revocable handle.
type Bar0 = pci::DevresBar<BAR_SIZE>;

/// Our device's class code (qemu-device/REGISTERS.md): base class 0xff "other", subclass and
/// prog-if 0. Not `pci::Class::OTHERS`, which 7.3 makes 0x00ff00 out of the 16-bit
/// `PCI_CLASS_OTHERS` (0xff, a base class alone).
const CLASS_OTHER: u32 = 0xff_0000;

/// Which device an id-table entry is.
struct Target {
    name: &'static str,
    ours: bool,
}

kernel::pci_device_table!(
    IDS,
    Target,
    [
        // First: the table is matched in order, and pci-testdev's class is "other" too.
        (
            pci::DeviceId::from_id(pci::Vendor::REDHAT, 0x0005),
            Target {
                name: "pci-testdev",
                ours: false
            }
        ),
        // Ours, by class: probe checks vendor and device (see the module's documentation).
        (
            pci::DeviceId::from_class(CLASS_OTHER, pci::ClassMask::Full.as_raw()),
            Target {
                name: "pci-rig",
                ours: true
            }
        ),
    ]
);

/// Nanoseconds of the monotonic clock since `origin`.
fn ns_since(origin: Instant<Monotonic>) -> i64 {
    origin.elapsed().as_nanos()
}

/// Runs `batch` and returns its time per read, in ns.
fn per_read(batch: impl FnOnce() -> Result) -> Result<i64> {
    let start = Instant::<Monotonic>::now();
    batch()?;
    Ok(ns_since(start) / BATCH as i64)
}

fn median(mut v: KVec<i64>) -> i64 {
    // Selection, not a sort, as in the 6.12 port (whose objtool does not
    // know that a sort's `panic_on_ord_violation` never returns).
    let mid = v.len() / 2;
    *v.select_nth_unstable(mid).1
}

/// Per-read medians, in ns, of reading register `REG` the four ways (see the module's
/// documentation): through a `&pci::Bar` taken once, `try_access` per read, one guard, and
/// `access` per read.
fn time_mmio<const REG: usize>(dev: &device::Device<Bound>, bar: &Bar0) -> Result<[i64; 4]> {
    // The baseline: a plain `&pci::Bar`, as a driver holding its `Bar` directly has. Taking it
    // is outside every timed loop, so the timed reads check nothing.
    let raw: &pci::Bar<'_, BAR_SIZE> = bar.access(dev)?;
    let mut samples = [
        KVec::with_capacity(SAMPLES, GFP_KERNEL)?,
        KVec::with_capacity(SAMPLES, GFP_KERNEL)?,
        KVec::with_capacity(SAMPLES, GFP_KERNEL)?,
        KVec::with_capacity(SAMPLES, GFP_KERNEL)?,
    ];
    for sample in 0..SAMPLES {
        for turn in 0..4 {
            let way = (sample + turn) % 4;
            let ns = match way {
                0 => per_read(|| {
                    for _ in 0..BATCH {
                        raw.read32(REG);
                    }
                    Ok(())
                })?,
                1 => per_read(|| {
                    for _ in 0..BATCH {
                        bar.try_access().ok_or(ENXIO)?.read32(REG);
                    }
                    Ok(())
                })?,
                2 => per_read(|| {
                    let io = bar.try_access().ok_or(ENXIO)?;
                    for _ in 0..BATCH {
                        io.read32(REG);
                    }
                    Ok(())
                })?,
                _ => per_read(|| {
                    for _ in 0..BATCH {
                        bar.access(dev)?.read32(REG);
                    }
                    Ok(())
                })?,
            };
            samples[way].push(ns, GFP_KERNEL)?;
        }
    }
    let [a, b, c, d] = samples;
    Ok([median(a), median(b), median(c), median(d)])
}

/// Reads the whole BAR2 window once and prints its throughput.
fn time_window(pdev: &pci::Device<Bound>) -> Result {
    let window = pdev.iomap_region_sized::<WINDOW>(2, c"pci_rig_bench")?;
    let start = Instant::<Monotonic>::now();
    for offset in (0..WINDOW).step_by(4) {
        window.try_read32(offset)?;
    }
    let ns = ns_since(start).max(1);
    dev_info!(
        pdev,
        "bench window bytes={} ns={} kib_per_s={}\n",
        WINDOW,
        ns,
        WINDOW as i64 * 1_000_000_000 / 1024 / ns
    );
    Ok(())
}

/// Samples of each DMA figure.
const DMA_SAMPLES: usize = 11;

/// DMA throughput both ways over the whole window, against a CPU copy of as many bytes out of
/// the same coherent buffer; then the cost of a one-page coherent allocation and its free.
fn time_dma(pdev: &pci::Device<Core<'_>>, io: &pci::Bar<'_, BAR_SIZE>) -> Result {
    #[allow(unsafe_code)]
    // SAFETY: Nothing allocates or maps DMA memory for this device concurrently: we are in its
    // first probe (the driver core holds the device lock), nothing of ours runs beside it (the
    // busy reader starts later, and never touches DMA), and this module allocates DMA memory
    // only below, after this call returned.
    unsafe { pdev.dma_set_mask_and_coherent(DmaMask::new::<32>()) }?;
    let bound: &pci::Device<Bound> = pdev;
    let dev: &device::Device<Bound> = bound.as_ref();
    let buf = Coherent::<u8>::zeroed_slice(dev, WINDOW, GFP_KERNEL)?;
    let iova = buf.dma_address();
    let mut copy = KVec::from_elem(0u8, WINDOW, GFP_KERNEL)?;
    for (op, dir) in [
        (OP_DMA_TO_DEVICE, "to_device"),
        (OP_DMA_FROM_DEVICE, "from_device"),
    ] {
        let (mut dma, mut cpu) = (KVec::new(), KVec::new());
        for _ in 0..DMA_SAMPLES {
            io.write32(iova as u32, DMA_ADDR_LO);
            io.write32((iova >> 32) as u32, DMA_ADDR_HI);
            io.write32(0, OP_OFFSET);
            io.write32(WINDOW as u32, OP_LENGTH);
            let start = Instant::<Monotonic>::now();
            io.write32(op, CMD);
            let mut status = io.read32(STATUS);
            while status & STATUS_BUSY != 0 {
                status = io.read32(STATUS);
            }
            let ns = ns_since(start);
            if status != STATUS_DONE {
                dev_info!(pdev, "bench dma_failed dir={} status={:#x}\n", dir, status);
                return Err(EIO);
            }
            dma.push(ns, GFP_KERNEL)?;
            let start = Instant::<Monotonic>::now();
            (&buf).copy_to_slice(&mut copy);
            cpu.push(ns_since(start), GFP_KERNEL)?;
        }
        dev_info!(
            pdev,
            "bench dma dir={} bytes={} ns={} cpu_ns={}\n",
            dir,
            WINDOW,
            median(dma),
            median(cpu)
        );
    }
    drop(buf);
    let mut alloc = KVec::new();
    for _ in 0..SAMPLES {
        let start = Instant::<Monotonic>::now();
        drop(Coherent::<u8>::zeroed_slice(dev, 4096, GFP_KERNEL)?);
        alloc.push(ns_since(start), GFP_KERNEL)?;
    }
    dev_info!(
        pdev,
        "bench dma_alloc bytes=4096 samples={} median_ns={}\n",
        SAMPLES,
        median(alloc)
    );
    Ok(())
}

/// Time to revoke `k` revocables one by one, each waiting for its own grace period.
fn time_revoke_each(k: usize) -> Result<i64> {
    let mut all = KVec::with_capacity(k, GFP_KERNEL)?;
    for i in 0..k {
        all.push(KBox::pin_init(Revocable::new(i), GFP_KERNEL)?, GFP_KERNEL)?;
    }
    let start = Instant::<Monotonic>::now();
    for r in &all {
        r.revoke();
    }
    Ok(ns_since(start))
}

/// When `unbind()` started and ended, in ns since `origin`; and the K `Devres` values of the
/// binding.
struct RemoveTimes {
    origin: Instant<Monotonic>,
    start: AtomicI64,
    end: AtomicI64,
    /// 7.3's `Devres` is owned by whoever made it, and dropping it first revokes it without a
    /// grace period and takes it off the device. To have each released by devres at unbind (a
    /// grace period each), they are kept here: the stopwatch, released last, holds the last
    /// reference, and drops them only after it has printed, when devres has revoked them all.
    values: SetOnce<KVec<Devres<usize>>>,
}

/// Tied to the binding before anything else, so released after everything else.
struct Stopwatch {
    k: usize,
    busy: bool,
    times: Arc<RemoveTimes>,
}

impl Drop for Stopwatch {
    fn drop(&mut self) {
        let start = self.times.start.load(Ordering::Relaxed);
        pr_info!(
            "bench unbind k={} worker={} remove_ns={} total_ns={}\n",
            self.k,
            if self.busy { "busy" } else { "idle" },
            self.times.end.load(Ordering::Relaxed) - start,
            ns_since(self.times.origin) - start
        );
    }
}

/// Reads SCRATCH in bursts of `BATCH` (about a millisecond on our device) until stopped or
/// refused.
#[pin_data]
struct Reader {
    bar: Arc<Bar0>,
    stop: AtomicBool,
    #[pin]
    done: Mutex<bool>,
    #[pin]
    wake: CondVar,
    #[pin]
    work: Work<Reader>,
}

kernel::impl_has_work! {
    impl HasWork<Self> for Reader { self.work }
}

impl Reader {
    fn start(bar: Arc<Bar0>) -> Result<Arc<Self>> {
        let r = Arc::pin_init(
            pin_init!(Reader {
                bar,
                stop: AtomicBool::new(false),
                done <- new_mutex!(false),
                wake <- new_condvar!(),
                work <- new_work!("pci_rig_bench::Reader"),
            }),
            GFP_KERNEL,
        )?;
        let _ = workqueue::system_long().enqueue(r.clone());
        Ok(r)
    }

    /// Stops the reader and waits until it has stopped.
    fn stop(&self) {
        self.stop.store(true, Ordering::SeqCst);
        let mut done = self.done.lock();
        self.wake.notify_all();
        while !*done {
            self.wake.wait(&mut done);
        }
    }
}

impl WorkItem for Reader {
    type Pointer = Arc<Reader>;

    fn run(this: Arc<Reader>) {
        while !this.stop.load(Ordering::SeqCst) {
            let Some(io) = this.bar.try_access() else {
                break;
            };
            for _ in 0..BATCH {
                io.read32(SCRATCH);
            }
            drop(io);
            let mut done = this.done.lock();
            let _ = this
                .wake
                .wait_interruptible_timeout(&mut done, msecs_to_jiffies(1));
        }
        *this.done.lock() = true;
        // `unbind()` waits for this. All that runs here after it is dropping `this`, which may
        // be the last reference if the driver data went first (dropping the reader and its BAR
        // handle here). Nothing waits for that (7.3's Rust workqueue has no flush or cancel), as
        // in the 6.12 module; in practice it ends long before the unbind's devres release (a
        // grace period per `Devres`) does, let alone the module's unloading.
        this.wake.notify_all();
    }
}

/// Per-device data: for our device, the clock `unbind()` sets and the busy reader, if any.
struct Held {
    times: Option<Arc<RemoveTimes>>,
    reader: Option<Arc<Reader>>,
}

/// Our device: unbind case, MMIO and window figures on the first probe, then the K values.
fn probe_ours(pdev: &pci::Device<Core<'_>>, name: &str) -> Result<Held> {
    let bound: &pci::Device<Bound> = pdev;
    let dev: &device::Device<Bound> = bound.as_ref();
    let n = PROBES.fetch_add(1, Ordering::Relaxed);
    let (k, busy) = UNBIND_CASES[n % UNBIND_CASES.len()];
    let times = Arc::new(
        RemoveTimes {
            origin: Instant::now(),
            start: AtomicI64::new(0),
            end: AtomicI64::new(0),
            values: SetOnce::new(),
        },
        GFP_KERNEL,
    )?;
    devres::register(
        dev,
        Stopwatch {
            k,
            busy,
            times: times.clone(),
        },
        GFP_KERNEL,
    )?;
    let bar = Arc::new(
        bound
            .iomap_region_sized::<BAR_SIZE>(0, c"pci_rig_bench")?
            .into_devres()?,
        GFP_KERNEL,
    )?;
    if n == 0 {
        report_mmio(bound, name, time_mmio::<SCRATCH>(dev, &bar)?);
        let io = bar.access(dev)?;
        time_irq(bound, io)?;
        time_window(bound)?;
        time_dma(pdev, io)?;
        for k in [1, 16, 64] {
            dev_info!(
                pdev,
                "bench revoke_each k={} ns={}\n",
                k,
                time_revoke_each(k)?
            );
        }
    }
    let mut values = KVec::with_capacity(k, GFP_KERNEL)?;
    for i in 0..k {
        values.push(Devres::new(dev, i)?, GFP_KERNEL)?;
    }
    if !times.values.populate(values) {
        return Err(EBUSY);
    }
    let reader = if busy {
        Some(Reader::start(bar)?)
    } else {
        None
    };
    Ok(Held {
        times: Some(times),
        reader,
    })
}

/// Takes our device's interrupt in hard-IRQ context: acknowledges it and stamps the time (ns
/// since `origin`).
struct RoundTrip<'a> {
    bar: &'a pci::Bar<'a, BAR_SIZE>,
    origin: Instant<Monotonic>,
    handled: AtomicUsize,
    at_ns: AtomicI64,
}

impl irq::Handler for RoundTrip<'_> {
    fn handle(&self) -> IrqReturn {
        let status = self.bar.read32(INT_STATUS);
        if status == 0 || status == u32::MAX {
            return IrqReturn::None;
        }
        self.at_ns.store(ns_since(self.origin), Ordering::Relaxed);
        self.bar.write32(status, INT_ACK);
        self.handled.fetch_add(1, Ordering::Release);
        IrqReturn::Handled
    }
}

/// Interrupt round trip: from the INT_RAISE write to the hard handler, `SAMPLES` times, in
/// whichever mode the platform gave (MSI, or INTx with `pci=nomsi`). Prints
/// `bench irq mode=M samples=N median_ns=T lost=L`. The handler and the vectors are freed
/// before this returns.
fn time_irq(pdev: &pci::Device<Bound>, io: &pci::Bar<'_, BAR_SIZE>) -> Result {
    let vectors = pdev.alloc_irq_vectors(
        1,
        1,
        pci::IrqTypes::default()
            .with(pci::IrqType::Msi)
            .with(pci::IrqType::Intx),
    )?;
    let msi = matches!(vectors.irq_type(), pci::IrqType::Msi);
    let flags = if msi {
        irq::Flags::TRIGGER_NONE
    } else {
        irq::Flags::SHARED
    };
    let handler = RoundTrip {
        bar: io,
        origin: Instant::now(),
        handled: AtomicUsize::new(0),
        at_ns: AtomicI64::new(0),
    };
    #[allow(unsafe_code)]
    // SAFETY: The registration is pinned in the box below, which is dropped (freeing the
    // interrupt, waiting for a running handler) at the latest when this function returns; it is
    // never forgotten.
    let registration = unsafe {
        irq::Registration::new(
            vectors.index(0)?.into(),
            flags,
            c"pci_rig_bench",
            Ok::<_, Error>(handler),
        )
    };
    let registration = KBox::pin_init(registration, GFP_KERNEL)?;
    let trip = registration.handler();
    io.write32(INT_SOFT, INT_ENABLE);
    let mut samples = KVec::with_capacity(SAMPLES, GFP_KERNEL)?;
    let mut lost = 0;
    for _ in 0..SAMPLES {
        let before = trip.handled.load(Ordering::Acquire);
        let start = ns_since(trip.origin);
        io.write32(INT_SOFT, INT_RAISE);
        while trip.handled.load(Ordering::Acquire) == before {
            if ns_since(trip.origin) - start > IRQ_TIMEOUT_NS {
                break;
            }
            core::hint::spin_loop();
        }
        if trip.handled.load(Ordering::Acquire) == before {
            lost += 1;
        } else {
            samples.push(trip.at_ns.load(Ordering::Relaxed) - start, GFP_KERNEL)?;
        }
    }
    io.write32(0, INT_ENABLE);
    drop(registration);
    drop(vectors);
    let n = samples.len();
    let median_ns = if n == 0 { -1 } else { median(samples) };
    dev_info!(
        pdev,
        "bench irq mode={} samples={} median_ns={} lost={}\n",
        if msi { "msi" } else { "intx" },
        n,
        median_ns,
        lost
    );
    Ok(())
}

fn report_mmio(pdev: &pci::Device<Bound>, name: &str, [raw, devres, guard, access]: [i64; 4]) {
    dev_info!(
        pdev,
        "bench mmio dev={} reads={} raw_ns={} devres_ns={} guard_ns={} access_ns={}\n",
        name,
        SAMPLES * BATCH,
        raw,
        devres,
        guard,
        access
    );
}

/// pci-testdev: the MMIO figures, on a BAR0 mapping dropped again before probe returns.
fn probe_testdev(pdev: &pci::Device<Bound>, name: &str) -> Result<Held> {
    let bar = pdev
        .iomap_region_sized::<BAR_SIZE>(0, c"pci_rig_bench")?
        .into_devres()?;
    // pci-testdev's first register reads back without side effects.
    report_mmio(pdev, name, time_mmio::<0>(pdev.as_ref(), &bar)?);
    Ok(Held {
        times: None,
        reader: None,
    })
}

fn probe_any(pdev: &pci::Device<Core<'_>>, target: Option<&Target>) -> Result<Held> {
    let target = target.ok_or(ENODEV)?;
    if target.ours
        && (u32::from(pdev.vendor_id().as_raw()) != VENDOR_ID
            || u32::from(pdev.device_id()) != DEVICE_ID)
    {
        // Another device of class "other": not ours.
        return Err(ENODEV);
    }
    pdev.enable_device_mem()?;
    // MSI messages are memory writes by the device: it must be a bus master.
    pdev.set_master();
    if target.ours {
        probe_ours(pdev, target.name)
    } else {
        probe_testdev(pdev, target.name)
    }
}

struct Bench;

impl pci::Driver for Bench {
    type IdInfo = Target;
    type Data<'bound> = Held;
    const ID_TABLE: pci::IdTable<Target> = &IDS;

    fn probe<'bound>(
        pdev: &'bound pci::Device<Core<'_>>,
        target: Option<&'bound Target>,
    ) -> impl PinInit<Held, Error> + 'bound {
        probe_any(pdev, target)
    }

    fn unbind<'bound>(_pdev: &'bound pci::Device<Core<'_>>, held: Pin<&Held>) {
        if let Some(times) = &held.times {
            times.start.store(ns_since(times.origin), Ordering::Relaxed);
            if let Some(reader) = &held.reader {
                reader.stop();
            }
            times.end.store(ns_since(times.origin), Ordering::Relaxed);
        }
    }
}

kernel::module_pci_driver! {
    type: Bench,
    name: "pci_rig_bench",
    authors: ["pci-rig"],
    description: "MMIO and unbind figures for pci-rig's device, against pci-testdev",
    license: "GPL",
}
