// SPDX-License-Identifier: GPL-2.0

//! Figures seen from the guest, for `cargo xtask bench` and the `bench` scenario. It judges
//! nothing: the host reads its `bench …` lines.
//!
//! - **MMIO**: a side-effect-free register read four ways, on our device (every access trapped
//!   and forwarded to the vfio-user server) and on QEMU's in-process `pci-testdev`, in the same
//!   boot: `raw` through an `Io` with no `Devres` in the way, `devres` with a `try_access` per
//!   read, `guard` with one guard for the whole timed loop, `access` with `Devres::access` (the
//!   bound device at hand, no RCU) per read. They take turns batch by batch, so drift hits them
//!   alike. `bench mmio dev=NAME reads=N raw_ns=A devres_ns=B guard_ns=C access_ns=D` gives
//!   per-read medians.
//! - **Window**: our BAR2's read throughput, `bench window bytes=B ns=T kib_per_s=R`.
//! - **Interrupt round trip**: from a write of SOFT to INT_RAISE to our hard-IRQ handler, in the
//!   mode the platform gave (MSI; INTx when booted with `pci=nomsi`):
//!   `bench irq mode=msi|intx samples=N median_ns=T lost=L` (lost: no interrupt within 1 s).
//!   The interrupt stays requested until the first unbind, whose figure includes freeing it.
//! - **Unbind**: each probe of our device ties K values to the binding with `Devres`, and maybe
//!   starts a worker busy with the device ([`UNBIND_CASES`], one case per probe, in turn). A
//!   stopwatch tied first is released last (devres is last in, first out) and prints
//!   `bench unbind k=K worker=busy|idle remove_ns=R total_ns=T`: `remove()`'s own time, and the
//!   time from `remove()`'s start to the release of the last `Devres`.
//! - **Revoke each**: what K values cost if each waits for its own RCU grace period, as
//!   `Devres` would without the binding's shared one: `bench revoke_each k=K ns=T`.
//! - **DMA**: our device's DMA engine moving its whole window (64 KiB) to and from a coherent
//!   buffer, the doorbell to STATUS no longer BUSY (polled: no interrupt), against the CPU
//!   copying the same bytes out of that buffer: `bench dma dir=to_device|from_device bytes=B
//!   ns=T cpu_ns=C` (medians); and allocating and freeing a coherent buffer of one page:
//!   `bench dma_alloc bytes=B samples=N median_ns=T`. The DMA oracle does not judge this module
//!   (it reports no mappings); the `dma` scenarios judge the driver's DMA.

#![deny(unsafe_code)]

use core::sync::atomic::{AtomicBool, AtomicI64, AtomicUsize, Ordering};
use kernel::{
    c_str, dev_info, device,
    devres::Devres,
    dma::{CoherentAllocation, DmaMask},
    io::{Io, IoRaw},
    irq::{self, IrqReturn},
    new_condvar, new_mutex, new_work, pci,
    prelude::*,
    revocable::Revocable,
    sync::{Arc, CondVar, Mutex},
    time::{msecs_to_jiffies, Ktime},
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

/// Which device an id-table entry is.
struct Target {
    name: &'static str,
    ours: bool,
}

kernel::pci_device_table!(
    IDS,
    Target,
    [
        (
            pci::DeviceId::from_id(VENDOR_ID, DEVICE_ID),
            Target {
                name: "pci-rig",
                ours: true
            }
        ),
        (
            pci::DeviceId::from_id(0x1b36, 0x0005),
            Target {
                name: "pci-testdev",
                ours: false
            }
        ),
    ]
);

fn now_ns() -> i64 {
    Ktime::ktime_get().to_ns()
}

/// Runs `batch` and returns its time per read, in ns.
fn per_read(batch: impl FnOnce() -> Result) -> Result<i64> {
    let start = now_ns();
    batch()?;
    Ok((now_ns() - start) / BATCH as i64)
}

fn median(mut v: KVec<i64>) -> i64 {
    // Selection, not a sort: at -O2 a sort's small-sort path calls core's
    // `panic_on_ord_violation`, which 6.12's objtool does not know never
    // returns (it warns that the sort falls through into the next function).
    let mid = v.len() / 2;
    *v.select_nth_unstable(mid).1
}

/// Per-read medians, in ns, of reading register `REG` raw, through `try_access` per read, and
/// under one guard.
fn time_mmio<const REG: usize>(
    pdev: &pci::Device<pci::Bound>,
    bar: &Devres<pci::Bar<BAR_SIZE>>,
) -> Result<[i64; 4]> {
    let raw = {
        let io = bar.try_access().ok_or(ENXIO)?;
        IoRaw::<BAR_SIZE>::new(io.addr(), io.maxsize())?
    };
    // The baseline: what a read costs with no revocation check at all. Never do this in a driver.
    #[allow(unsafe_code)]
    // SAFETY: `raw` describes the live mapping behind `bar`, which stays mapped until it is
    // revoked: by dropping `bar` (our caller owns it beyond this call), or by ending the binding,
    // which happens only after probe returns (the driver core holds the device lock meanwhile).
    let raw: &Io<BAR_SIZE> = unsafe { Io::from_raw(&raw) };
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
                        raw.readl(REG);
                    }
                    Ok(())
                })?,
                1 => per_read(|| {
                    for _ in 0..BATCH {
                        bar.try_access().ok_or(ENXIO)?.readl(REG);
                    }
                    Ok(())
                })?,
                2 => per_read(|| {
                    let io = bar.try_access().ok_or(ENXIO)?;
                    for _ in 0..BATCH {
                        io.readl(REG);
                    }
                    Ok(())
                })?,
                _ => per_read(|| {
                    for _ in 0..BATCH {
                        bar.access(pdev.as_ref())?.readl(REG);
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
fn time_window(pdev: &pci::Device<pci::Bound>) -> Result {
    let bar2: Devres<pci::Bar<WINDOW>> =
        pdev.iomap_region_sized::<WINDOW>(2, c_str!("pci_rig_bench"))?;
    let window = bar2.try_access().ok_or(ENXIO)?;
    let start = now_ns();
    for offset in (0..WINDOW).step_by(4) {
        window.try_readl(offset)?;
    }
    let ns = (now_ns() - start).max(1);
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
fn time_dma(pdev: &pci::Device<pci::Core>, bar: &Devres<pci::Bar<BAR_SIZE>>) -> Result {
    pdev.as_ref()
        .dma_set_mask_and_coherent(DmaMask::new::<32>())?;
    let dev: &device::Device<device::Bound> = pdev.as_ref();
    let io = bar.access(dev)?;
    let buf = CoherentAllocation::<u8>::alloc(dev, WINDOW, GFP_KERNEL)?;
    let mem = buf.access(dev)?;
    let iova = mem.dma_handle();
    let mut copy = KVec::from_elem(0u8, WINDOW, GFP_KERNEL)?;
    for (op, dir) in [
        (OP_DMA_TO_DEVICE, "to_device"),
        (OP_DMA_FROM_DEVICE, "from_device"),
    ] {
        let (mut dma, mut cpu) = (KVec::new(), KVec::new());
        for _ in 0..DMA_SAMPLES {
            io.writel(iova as u32, DMA_ADDR_LO);
            io.writel((iova >> 32) as u32, DMA_ADDR_HI);
            io.writel(0, OP_OFFSET);
            io.writel(WINDOW as u32, OP_LENGTH);
            let start = now_ns();
            io.writel(op, CMD);
            let mut status = io.readl(STATUS);
            while status & STATUS_BUSY != 0 {
                status = io.readl(STATUS);
            }
            let ns = now_ns() - start;
            if status != STATUS_DONE {
                dev_info!(pdev, "bench dma_failed dir={} status={:#x}\n", dir, status);
                return Err(EIO);
            }
            dma.push(ns, GFP_KERNEL)?;
            let start = now_ns();
            mem.copy_to_slice(0, &mut copy)?;
            cpu.push(now_ns() - start, GFP_KERNEL)?;
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
        let start = now_ns();
        drop(CoherentAllocation::<u8>::alloc(dev, 4096, GFP_KERNEL)?);
        alloc.push(now_ns() - start, GFP_KERNEL)?;
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
    let start = now_ns();
    for r in &all {
        #[allow(unsafe_code)]
        // SAFETY: No guard of any revocable is held in this function.
        let _ = unsafe { r.revoke() };
    }
    Ok(now_ns() - start)
}

/// When `remove()` started and ended, in ns of the monotonic clock.
struct RemoveTimes {
    start: AtomicI64,
    end: AtomicI64,
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
            now_ns() - start
        );
    }
}

/// Reads SCRATCH in bursts of `BATCH` (about a millisecond on our device) until stopped or
/// refused.
#[pin_data]
struct Reader {
    bar: Arc<Devres<pci::Bar<BAR_SIZE>>>,
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
    fn start(bar: Arc<Devres<pci::Bar<BAR_SIZE>>>) -> Result<Arc<Self>> {
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

    /// Stops the reader and waits until its run has returned: not only until it said so (the
    /// rest of its run is module code, which unload could free under it on a preemptible
    /// kernel), but until the workqueue is done with it.
    fn stop(self: &Arc<Self>) {
        self.stop.store(true, Ordering::SeqCst);
        let mut done = self.done.lock();
        self.wake.notify_all();
        while !*done {
            self.wake.wait(&mut done);
        }
        drop(done);
        workqueue::cancel_sync(self);
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
                io.readl(SCRATCH);
            }
            drop(io);
            let mut done = this.done.lock();
            let _ = this
                .wake
                .wait_interruptible_timeout(&mut done, msecs_to_jiffies(1));
        }
        *this.done.lock() = true;
        // `remove()` still holds a reference, so nothing of ours is dropped after this; and it
        // waits for this run to return (`stop`) before the module can go.
        this.wake.notify_all();
    }
}

/// Per-device data: for our device, the clock `remove()` sets and the busy reader, if any.
struct Bound {
    times: Option<Arc<RemoveTimes>>,
    reader: Option<Arc<Reader>>,
}

/// Our device: unbind case, MMIO and window figures on the first probe, then the K values.
fn probe_ours(pdev: &pci::Device<pci::Core>, name: &str) -> Result<Bound> {
    let n = PROBES.fetch_add(1, Ordering::Relaxed);
    let (k, busy) = UNBIND_CASES[n % UNBIND_CASES.len()];
    let times = Arc::new(
        RemoveTimes {
            start: AtomicI64::new(0),
            end: AtomicI64::new(0),
        },
        GFP_KERNEL,
    )?;
    Devres::new_foreign_owned(
        pdev.as_ref(),
        Stopwatch {
            k,
            busy,
            times: times.clone(),
        },
        GFP_KERNEL,
    )?;
    let bar = Arc::new(
        pdev.iomap_region_sized::<BAR_SIZE>(0, c_str!("pci_rig_bench"))?,
        GFP_KERNEL,
    )?;
    if n == 0 {
        report_mmio(pdev, name, time_mmio::<SCRATCH>(pdev, &bar)?);
        time_irq(pdev, &bar)?;
        time_window(pdev)?;
        time_dma(pdev, &bar)?;
        for k in [1, 16, 64] {
            dev_info!(
                pdev,
                "bench revoke_each k={} ns={}\n",
                k,
                time_revoke_each(k)?
            );
        }
    }
    for i in 0..k {
        Devres::new_foreign_owned(pdev.as_ref(), i, GFP_KERNEL)?;
    }
    let reader = if busy {
        Some(Reader::start(bar)?)
    } else {
        None
    };
    Ok(Bound {
        times: Some(times),
        reader,
    })
}

/// Takes our device's interrupt in hard-IRQ context: acknowledges it and stamps the time.
struct RoundTrip {
    bar: Arc<Devres<pci::Bar<BAR_SIZE>>>,
    handled: AtomicUsize,
    at_ns: AtomicI64,
}

impl irq::Handler for RoundTrip {
    fn handle(&self, dev: &device::Device<device::Bound>) -> IrqReturn {
        let Ok(io) = self.bar.access(dev) else {
            return IrqReturn::None;
        };
        let status = io.readl(INT_STATUS);
        if status == 0 || status == u32::MAX {
            return IrqReturn::None;
        }
        self.at_ns.store(now_ns(), Ordering::Relaxed);
        io.writel(status, INT_ACK);
        self.handled.fetch_add(1, Ordering::Release);
        IrqReturn::Handled
    }
}

/// Interrupt round trip: from the INT_RAISE write to the hard handler, `SAMPLES` times, in
/// whichever mode the platform gave (MSI, or INTx with `pci=nomsi`). Prints
/// `bench irq mode=M samples=N median_ns=T lost=L`.
fn time_irq(pdev: &pci::Device<pci::Core>, bar: &Arc<Devres<pci::Bar<BAR_SIZE>>>) -> Result {
    pdev.alloc_irq_vectors(1, 1, pci::IrqTypes::MSI | pci::IrqTypes::INTX)?;
    let msi = pdev.msi_enabled();
    let trip = Arc::new(
        RoundTrip {
            bar: bar.clone(),
            handled: AtomicUsize::new(0),
            at_ns: AtomicI64::new(0),
        },
        GFP_KERNEL,
    )?;
    let flags = if msi {
        irq::Flags::NONE
    } else {
        irq::Flags::SHARED
    };
    pdev.request_irq(0, flags, c_str!("pci_rig_bench"), trip.clone())?;
    let io = bar.access(pdev.as_ref())?;
    io.writel(INT_SOFT, INT_ENABLE);
    let mut samples = KVec::with_capacity(SAMPLES, GFP_KERNEL)?;
    let mut lost = 0;
    for _ in 0..SAMPLES {
        let before = trip.handled.load(Ordering::Acquire);
        let start = now_ns();
        io.writel(INT_SOFT, INT_RAISE);
        while trip.handled.load(Ordering::Acquire) == before {
            if now_ns() - start > IRQ_TIMEOUT_NS {
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
    io.writel(0, INT_ENABLE);
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

fn report_mmio(pdev: &pci::Device, name: &str, [raw, devres, guard, access]: [i64; 4]) {
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

struct Bench;

impl pci::Driver for Bench {
    type IdInfo = Target;
    const ID_TABLE: pci::IdTable<Target> = IDS;
    type Data = KBox<Bound>;

    fn probe(pdev: &pci::Device<pci::Core>, target: &Target) -> Result<KBox<Bound>> {
        pdev.enable_device_mem()?;
        // MSI messages are memory writes by the device: it must be a bus master.
        pdev.set_master();
        let bound = if target.ours {
            probe_ours(pdev, target.name)?
        } else {
            let bar = pdev.iomap_region_sized::<BAR_SIZE>(0, c_str!("pci_rig_bench"))?;
            // pci-testdev's first register reads back without side effects.
            report_mmio(pdev, target.name, time_mmio::<0>(pdev, &bar)?);
            Bound {
                times: None,
                reader: None,
            }
        };
        Ok(KBox::new(bound, GFP_KERNEL)?)
    }

    fn remove(_pdev: &pci::Device<pci::Core>, bound: &KBox<Bound>) {
        if let Some(times) = &bound.times {
            times.start.store(now_ns(), Ordering::Relaxed);
            if let Some(reader) = &bound.reader {
                reader.stop();
            }
            times.end.store(now_ns(), Ordering::Relaxed);
        }
    }
}

kernel::module_pci_driver! {
    type: Bench,
    name: "pci_rig_bench",
    author: "pci-rig",
    description: "MMIO and unbind figures for pci-rig's device, against pci-testdev",
    license: "GPL",
}
