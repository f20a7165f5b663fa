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

use core::sync::atomic::{AtomicU64, Ordering};
use kernel::{
    c_str, dev_err, dev_info, dev_warn,
    device::{Bound, Device},
    devres::Devres,
    dma::{CoherentAllocation, Direction, DmaMask, Mapping},
    irq::{self, IrqReturn, ThreadedIrqReturn},
    new_condvar, new_mutex, new_work, pci,
    pci::Bar,
    prelude::*,
    sync::{Arc, CondVar, Mutex},
    time::{ktime_ms_delta, msecs_to_jiffies, Ktime},
    types::ARef,
    workqueue::{self, Work, WorkItem},
};

mod regs;
mod selftest;

use regs::{
    reg, BAR0_SIZE, CAP_STREAM, DEVICE_ID, ERR_BAD_OPCODE, INT_DONE, INT_ERROR, INT_SOFT,
    MAGIC_VALUE, OP_CRC32, OP_DMA_CRC32, OP_DMA_FROM_DEVICE, OP_DMA_TO_DEVICE, OP_FILL, OP_INVERT,
    RESET_KEY, STATUS_CODE_MASK, STATUS_CODE_SHIFT, STATUS_DONE, STATUS_ERROR, VENDOR_ID,
    VERSION_MAJOR_SHIFT,
};
use selftest::{
    crc32, crc32_of_repeated, pattern, Mismatch, Outcome, DMA_LEN, INTX_ROUNDS, IRQ_WAIT_MS,
    SCRATCH_PATTERNS, SOFT_IRQS,
};

type Regs = Bar<BAR0_SIZE>;

/// What an id-table entry tells probe: the register-map major version the device must have.
struct Expect {
    major: u32,
}

kernel::pci_device_table!(
    IDS,
    Expect,
    [(
        pci::DeviceId::from_id(VENDOR_ID, DEVICE_ID),
        Expect { major: 1 }
    ),]
);

/// Reads a register and reports the access as `# mmio r bar0 OFFSET 4 VALUE`, both under the
/// reports lock of `$sh` (probe and the interrupt thread both report, and the console must list
/// the accesses in the order the device saw them). A macro, not a function, so the offset stays
/// a constant and `readl` checks it at build time.
macro_rules! rd {
    ($sh:expr, $pdev:expr, $io:expr, $off:expr) => {{
        let _report = $sh.reports.lock();
        let v = $io.readl($off);
        dev_info!($pdev, "# mmio r bar0 {:#x} 4 {:#x}\n", $off, v);
        v
    }};
}

/// Writes a register and reports it as `# mmio w bar0 OFFSET 4 VALUE`, like [`rd!`].
macro_rules! wr {
    ($sh:expr, $pdev:expr, $io:expr, $val:expr, $off:expr) => {{
        let _report = $sh.reports.lock();
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

/// Refuses a device that is not ours or speaks another register map.
fn identify(sh: &Shared, pdev: &pci::Device, io: &Regs, expect: &Expect) -> Result {
    let magic = rd!(sh, pdev, io, reg::MAGIC);
    if magic != MAGIC_VALUE {
        dev_err!(
            pdev,
            "step identify FAIL magic {:#x}, expected {:#x}\n",
            magic,
            MAGIC_VALUE
        );
        return Err(ENODEV);
    }
    let version = rd!(sh, pdev, io, reg::VERSION);
    if version >> VERSION_MAJOR_SHIFT != expect.major {
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

/// Starts an operation over BAR2 and waits for its interrupt (DONE, with ERROR on failure), not
/// polling STATUS; then reads STATUS and RESULT.
fn operate(
    sh: &Shared,
    pdev: &pci::Device,
    io: &Regs,
    op: u32,
    offset: u32,
    len: u32,
    arg: u32,
) -> Outcome {
    let before = sh.handled();
    ring(sh, pdev, io, op, offset, len, arg);
    let interrupted = sh.wait_interrupt(before, INT_DONE);
    Outcome {
        status: rd!(sh, pdev, io, reg::STATUS),
        result: rd!(sh, pdev, io, reg::RESULT),
        interrupted,
    }
}

/// Sets up an operation and rings the doorbell, without waiting for it.
fn ring(sh: &Shared, pdev: &pci::Device, io: &Regs, op: u32, offset: u32, len: u32, arg: u32) {
    wr!(sh, pdev, io, offset, reg::OP_OFFSET);
    wr!(sh, pdev, io, len, reg::OP_LENGTH);
    wr!(sh, pdev, io, arg, reg::OP_ARG);
    wr!(sh, pdev, io, op, reg::CMD);
}

/// The MMIO self-test of REGISTERS.md, one reported step at a time.
fn selftest(sh: &Shared, pdev: &pci::Device, io: &Regs) -> Result {
    for pattern in SCRATCH_PATTERNS {
        wr!(sh, pdev, io, pattern, reg::SCRATCH);
        let back = rd!(sh, pdev, io, reg::SCRATCH);
        step(
            pdev,
            "scratch",
            back == pattern,
            format_args!("wrote={:#x} read={:#x}", pattern, back),
        )?;
    }

    let first = rd!(sh, pdev, io, reg::COUNTER);
    let second = rd!(sh, pdev, io, reg::COUNTER);
    step(
        pdev,
        "counter",
        second == first.wrapping_add(1),
        format_args!("{} then {}", first, second),
    )?;

    let len = 64;
    let want = crc32_of_repeated(0x5a, len);
    let o = operate(sh, pdev, io, OP_FILL, 0, len as u32, 0x5a);
    let ok = o.interrupted && o.status == STATUS_DONE && o.result == want;
    step(pdev, "fill", ok, format_args!("{}", o.detail(want)))?;
    let o = operate(sh, pdev, io, OP_CRC32, 0, len as u32, 0);
    let ok = o.interrupted && o.status == STATUS_DONE && o.result == want;
    step(pdev, "crc32", ok, format_args!("{}", o.detail(want)))?;
    let want = crc32_of_repeated(!0x5a, len);
    let o = operate(sh, pdev, io, OP_INVERT, 0, len as u32, 0);
    let ok = o.interrupted && o.status == STATUS_DONE && o.result == want;
    step(pdev, "invert", ok, format_args!("{}", o.detail(want)))?;

    let o = operate(sh, pdev, io, 0x63, 0, 0, 0);
    let refused = o.status & STATUS_ERROR != 0
        && (o.status >> STATUS_CODE_SHIFT) & STATUS_CODE_MASK == ERR_BAD_OPCODE;
    step(
        pdev,
        "bad_opcode",
        o.interrupted && refused,
        format_args!("{}", o.detail(0)),
    )?;

    // Offsets only known at run time go through the checked accessors.
    let past_end = io.try_readl(BAR0_SIZE);
    let unaligned = io.try_readl(reg::SCRATCH + 2);
    let report = sh.reports.lock();
    let inside = io.try_readl(reg::SCRATCH);
    if let Ok(v) = inside {
        dev_info!(pdev, "# mmio r bar0 {:#x} 4 {:#x}\n", reg::SCRATCH, v);
    }
    drop(report);
    // Inside, the checked read must also answer what the scratch step left there.
    let left = SCRATCH_PATTERNS[SCRATCH_PATTERNS.len() - 1];
    step(
        pdev,
        "try_access_bounds",
        past_end == Err(EINVAL) && unaligned == Err(EINVAL) && inside == Ok(left),
        format_args!(
            "past_end={:?} unaligned={:?} inside={:?} want={:#x}",
            past_end.err(),
            unaligned.err(),
            inside.ok(),
            left
        ),
    )?;

    // Software interrupts, each handled once, then the device's own count of interrupts raised
    // since the reset at probe (operations' and these) against the handler's.
    for i in 0..SOFT_IRQS {
        let before = sh.handled();
        wr!(sh, pdev, io, INT_SOFT, reg::INT_RAISE);
        if !sh.wait_interrupt(before, INT_SOFT) {
            return step(
                pdev,
                "irq",
                false,
                format_args!("no interrupt within 1 s; software interrupt {}", i + 1),
            );
        }
    }
    step(
        pdev,
        "irq",
        true,
        format_args!("{} software interrupts, each handled", SOFT_IRQS),
    )?;
    let device = rd!(sh, pdev, io, reg::IRQ_COUNT);
    let driver = sh.handled();
    step(
        pdev,
        "irq_count",
        device == driver,
        format_args!("device={} driver={}", device, driver),
    )
}

/// A DMA mapping or allocation, reported as `# dma map ID …` when made and `# dma unmap ID`
/// just before it ends (dropped here, or at the latest when the binding ends), so the harness
/// knows what the device may reach at any moment.
struct Reported<T: Send + 'static> {
    reports: Arc<Mutex<()>>,
    id: u32,
    inner: Devres<T>,
}

impl<T: Send + 'static> Reported<T> {
    fn new(
        sh: &Shared,
        pdev: &pci::Device,
        id: u32,
        kind: &str,
        (iova, len): (u64, usize),
        inner: Devres<T>,
    ) -> Self {
        let _report = sh.reports.lock();
        dev_info!(pdev, "# dma map {} {} {:#x} {:#x}\n", id, kind, iova, len);
        Self {
            reports: sh.reports.clone(),
            id,
            inner,
        }
    }
}

impl<T: Send + 'static> Drop for Reported<T> {
    fn drop(&mut self) {
        let _report = self.reports.lock();
        dev_info!(self.inner.device(), "# dma unmap {}\n", self.id);
    }
}

/// Sets up a DMA over BAR2's first `DMA_LEN` bytes and guest memory at `iova`, reads every
/// parameter back (a write the device dropped must not send the DMA elsewhere, or make it
/// longer), announces it (`# dma start OP IOVA LEN CRC`) and rings the doorbell, without
/// waiting. On a mismatch no DMA is started.
fn dma_start(
    sh: &Shared,
    pdev: &pci::Device,
    io: &Regs,
    (opcode, op): (u32, &str),
    iova: u64,
    crc: Option<u32>,
) -> core::result::Result<(), Mismatch> {
    wr!(sh, pdev, io, iova as u32, reg::DMA_ADDR_LO);
    wr!(sh, pdev, io, (iova >> 32) as u32, reg::DMA_ADDR_HI);
    wr!(sh, pdev, io, 0, reg::OP_OFFSET);
    wr!(sh, pdev, io, DMA_LEN as u32, reg::OP_LENGTH);
    let lo = rd!(sh, pdev, io, reg::DMA_ADDR_LO);
    let hi = rd!(sh, pdev, io, reg::DMA_ADDR_HI);
    let offset = rd!(sh, pdev, io, reg::OP_OFFSET);
    let len = rd!(sh, pdev, io, reg::OP_LENGTH);
    for (what, held, want) in [
        ("DMA address", (u64::from(hi) << 32) | u64::from(lo), iova),
        ("offset", offset.into(), 0),
        ("length", len.into(), DMA_LEN as u64),
    ] {
        if held != want {
            return Err(Mismatch { what, held, want });
        }
    }
    let report = sh.reports.lock();
    match crc {
        Some(crc) => dev_info!(
            pdev,
            "# dma start {} {:#x} {:#x} {:#x}\n",
            op,
            iova,
            DMA_LEN,
            crc
        ),
        None => dev_info!(pdev, "# dma start {} {:#x} {:#x} -\n", op, iova, DMA_LEN),
    }
    drop(report);
    wr!(sh, pdev, io, opcode, reg::CMD);
    Ok(())
}

/// A DMA as [`dma_start`], waited for like any operation.
fn dma(
    sh: &Shared,
    pdev: &pci::Device,
    io: &Regs,
    step_name: &str,
    op: (u32, &str),
    iova: u64,
    crc: Option<u32>,
) -> Result<Outcome> {
    let before = sh.handled();
    if let Err(mismatch) = dma_start(sh, pdev, io, op, iova, crc) {
        step(pdev, step_name, false, format_args!("{}", mismatch))?;
    }
    let interrupted = sh.wait_interrupt(before, INT_DONE);
    let o = Outcome {
        status: rd!(sh, pdev, io, reg::STATUS),
        result: rd!(sh, pdev, io, reg::RESULT),
        interrupted,
    };
    if !interrupted {
        // The DMA may still be in flight: stop the device before the caller gives its memory
        // back (the device is done with it once the reset is taken).
        wr!(sh, pdev, io, RESET_KEY, reg::RESET);
    }
    Ok(o)
}

/// Reports what a DMA from the device left at `iova` in `mem` (`# dma received …`); its CRC.
fn received(
    sh: &Shared,
    pdev: &pci::Device,
    mem: &CoherentAllocation<u8>,
    offset: usize,
    iova: u64,
) -> Result<u32> {
    let mut bytes = KVec::from_elem(0u8, DMA_LEN, GFP_KERNEL)?;
    mem.copy_to_slice(offset, &mut bytes)?;
    let crc = crc32(bytes.iter().copied());
    let _report = sh.reports.lock();
    dev_info!(
        pdev,
        "# dma received {:#x} {:#x} {:#x}\n",
        iova,
        DMA_LEN,
        crc
    );
    Ok(crc)
}

/// The DMA self-test: the mask the device states, then a coherent buffer to the device and
/// back (inverted by the device in between), then a streaming mapping the device sums. Returns
/// the coherent buffer, kept for the binding.
fn dma_selftest(
    sh: &Shared,
    pdev: &pci::Device<pci::Core>,
    io: &Regs,
) -> Result<Reported<CoherentAllocation<u8>>> {
    let bits = rd!(sh, pdev, io, reg::DMA_BITS);
    let set = DmaMask::try_new(bits).and_then(|m| pdev.as_ref().dma_set_mask_and_coherent(m));
    step(
        pdev,
        "dma_mask",
        set.is_ok(),
        format_args!("bits={} {:?}", bits, set.err()),
    )?;
    let dev: &Device<Bound> = pdev.as_ref();

    let mut bytes = KVec::with_capacity(DMA_LEN, GFP_KERNEL)?;
    for i in 0..DMA_LEN {
        bytes.push(pattern(i), GFP_KERNEL)?;
    }
    let sent = crc32(bytes.iter().copied());
    let inverted = crc32(bytes.iter().map(|b| !b));

    let alloc = CoherentAllocation::<u8>::alloc(dev, 2 * DMA_LEN, GFP_KERNEL)?;
    let at = alloc
        .access(dev)
        .map(|mem| (mem.dma_handle(), mem.size()))?;
    let coherent = Reported::new(sh, pdev, 1, "coherent", at, alloc);
    let mem = coherent.inner.access(dev)?;
    let iova = mem.dma_handle();
    mem.copy_from_slice(0, &bytes)?;

    let o = dma(
        sh,
        pdev,
        io,
        "dma_to_device",
        (OP_DMA_TO_DEVICE, "to_device"),
        iova,
        Some(sent),
    )?;
    let ok = o.interrupted && o.status == STATUS_DONE && o.result == sent;
    step(
        pdev,
        "dma_to_device",
        ok,
        format_args!("{}", o.detail(sent)),
    )?;

    // The device inverts what it got, then writes it into the buffer's second half.
    let o = operate(sh, pdev, io, OP_INVERT, 0, DMA_LEN as u32, 0);
    let inverted_ok = o.interrupted && o.status == STATUS_DONE && o.result == inverted;
    let back = iova + DMA_LEN as u64;
    let o = if inverted_ok {
        dma(
            sh,
            pdev,
            io,
            "dma_from_device",
            (OP_DMA_FROM_DEVICE, "from_device"),
            back,
            None,
        )?
    } else {
        o
    };
    let got = if inverted_ok && o.interrupted && o.status == STATUS_DONE {
        Some(received(sh, pdev, mem, DMA_LEN, back)?)
    } else {
        None
    };
    step(
        pdev,
        "dma_from_device",
        got == Some(inverted) && o.result == inverted,
        format_args!("{} received={:#x}", o.detail(inverted), got.unwrap_or(0)),
    )?;

    // A streaming mapping of the pattern, which the device sums where it lies.
    let map = Mapping::new(dev, bytes, Direction::ToDevice, GFP_KERNEL)?;
    let at = map.access(dev).map(|m| (m.dma_handle(), m.len()))?;
    let handle = at.0;
    let stream = Reported::new(sh, pdev, 2, "to_device", at, map);
    let o = dma(
        sh,
        pdev,
        io,
        "dma_stream",
        (OP_DMA_CRC32, "crc32"),
        handle,
        Some(sent),
    )?;
    drop(stream);
    let ok = o.interrupted && o.status == STATUS_DONE && o.result == sent;
    step(pdev, "dma_stream", ok, format_args!("{}", o.detail(sent)))?;
    Ok(coherent)
}

/// The coherent buffer of a binding that bound, and its receive stream.
struct DmaState {
    buf: Reported<CoherentAllocation<u8>>,
    /// The device offers a stream (CAPS.STREAM) and it has not stopped.
    streaming: bool,
    /// Stream DMAs started.
    rounds: u64,
}

/// What the interrupt handler has seen.
#[derive(Default)]
struct IrqState {
    /// Interrupts handled (INT_STATUS had a source set, acknowledged), counted when the run of
    /// the handler that handled them is done.
    handled: u32,
    /// The sources handled in the last run of the handler.
    last: u32,
}

/// State shared by probe, remove and the interrupt handler of one binding.
#[pin_data]
struct Shared {
    bar: Arc<Devres<Regs>>,
    /// Held across each reported access and its report (shared with what reports its end).
    reports: Arc<Mutex<()>>,
    /// The DMA self-test's coherent buffer from the end of probe, and the receive stream.
    #[pin]
    dma: Mutex<Option<DmaState>>,
    #[pin]
    irq: Mutex<IrqState>,
    #[pin]
    irq_seen: CondVar,
    /// Held across each run of the interrupt thread; `true` once shutdown stopped the device,
    /// after which the thread leaves it alone.
    #[pin]
    shut_down: Mutex<bool>,
    /// Held across each run of the interrupt thread; `true` while runtime PM has the device
    /// asleep: the thread leaves it alone.
    #[pin]
    asleep: Mutex<bool>,
    /// Held across each run of the interrupt thread; `true` while the device is being reset
    /// (from an error on a frozen link until `slot_reset`, from `reset_prepare` until
    /// `reset_done`): the thread leaves it alone, whose reads QEMU would answer itself.
    #[pin]
    in_reset: Mutex<bool>,
    /// INTx (shared, masked by the hard half) rather than MSI.
    intx: bool,
}

impl Shared {
    fn new(bar: Arc<Devres<Regs>>, intx: bool) -> Result<Arc<Self>> {
        let reports = Arc::pin_init(new_mutex!(()), GFP_KERNEL)?;
        Arc::pin_init(
            pin_init!(Shared {
                bar,
                reports,
                dma <- new_mutex!(None),
                irq <- new_mutex!(IrqState::default()),
                irq_seen <- new_condvar!(),
                shut_down <- new_mutex!(false),
                asleep <- new_mutex!(false),
                in_reset <- new_mutex!(false),
                intx,
            }),
            GFP_KERNEL,
        )
    }

    fn handled(&self) -> u32 {
        self.irq.lock().handled
    }

    /// The receive stream's next round, after a DONE: holds what the last DMA from the device
    /// wrote against the STATUS the device gave it (`# dma received …`, for the harness to
    /// check) and starts the next; stops at a failed one or a device that is gone.
    fn stream_next(&self, dev: &Device<Bound>, io: &Regs) {
        let Some(pdev) = pci::Device::from_device(dev) else {
            return;
        };
        let mut dma = self.dma.lock();
        let Some(d) = dma.as_mut().filter(|d| d.streaming) else {
            return;
        };
        let Ok(mem) = d.buf.inner.access(dev) else {
            return;
        };
        let back = mem.dma_handle() + DMA_LEN as u64;
        if d.rounds > 0 {
            let status = rd!(self, pdev, io, reg::STATUS);
            if status != STATUS_DONE || received(self, pdev, mem, DMA_LEN, back).is_err() {
                d.streaming = false;
                dev_info!(
                    pdev,
                    "event stream_stopped rounds={} status={:#x}\n",
                    d.rounds,
                    status
                );
                return;
            }
        }
        let op = (OP_DMA_FROM_DEVICE, "from_device");
        if let Err(mismatch) = dma_start(self, pdev, io, op, back, None) {
            d.streaming = false;
            dev_info!(
                pdev,
                "event stream_stopped rounds={} {}\n",
                d.rounds,
                mismatch
            );
            return;
        }
        d.rounds += 1;
    }

    /// Waits until an interrupt with a source in `sources` is handled after the `before`-th;
    /// `false` if none came within `IRQ_WAIT_MS` (it was lost).
    fn wait_interrupt(&self, before: u32, sources: u32) -> bool {
        let start = Ktime::ktime_get();
        let mut irq = self.irq.lock();
        while irq.handled == before || irq.last & sources == 0 {
            if ktime_ms_delta(Ktime::ktime_get(), start) >= IRQ_WAIT_MS {
                return false;
            }
            let _ = self
                .irq_seen
                .wait_interruptible_timeout(&mut irq, msecs_to_jiffies(1));
        }
        true
    }
}

impl irq::ThreadedHandler for Shared {
    /// MSI is this device's alone; on a shared INTx line, mask ours (if it is ours) so that the
    /// thread can run with the line open to the others.
    fn handle(&self, dev: &Device<Bound>) -> ThreadedIrqReturn {
        if !self.intx {
            return ThreadedIrqReturn::WakeThread;
        }
        match pci::Device::from_device(dev) {
            Some(pdev) if pdev.check_and_mask_intx() => ThreadedIrqReturn::WakeThread,
            _ => ThreadedIrqReturn::None,
        }
    }

    /// Reads and acknowledges INT_STATUS through the BAR (the device is bound while this runs,
    /// so no RCU guard), counts and reports each interrupt. On INTx it unmasks the pin before it
    /// tells a waiter, so that the next interrupt finds it open; should one have latched since
    /// (the pin still asserted, so left masked), it is handled in the same run.
    fn handle_threaded(&self, dev: &Device<Bound>) -> IrqReturn {
        let shut_down = self.shut_down.lock();
        let asleep = self.asleep.lock();
        let in_reset = self.in_reset.lock();
        if *shut_down || *asleep || *in_reset {
            return IrqReturn::None;
        }
        let io = match self.bar.access(dev) {
            Ok(io) => io,
            Err(e) => {
                // Cannot happen: interrupts are freed before the binding ends. Reported so the
                // harness fails the boot if it ever does.
                dev_err!(dev, "event irq_refused {:?}\n", e);
                return IrqReturn::None;
            }
        };
        let mut ret = IrqReturn::None;
        // Told to waiters only once the pin is open again.
        let (mut handled, mut seen) = (self.handled(), 0);
        for _ in 0..INTX_ROUNDS {
            let status = rd!(self, dev, io, reg::INT_STATUS);
            // 0: not ours; all-ones: the device is gone.
            let ours = status != 0 && status != u32::MAX;
            if ours {
                wr!(self, dev, io, status, reg::INT_ACK);
                handled += 1;
                seen |= status;
                dev_info!(dev, "event irq status={:#x} handled={}\n", status, handled);
                ret = IrqReturn::Handled;
            }
            let unmasked = match pci::Device::from_device(dev) {
                Some(pdev) if self.intx => pdev.check_and_unmask_intx(),
                _ => true,
            };
            if unmasked || !ours {
                break;
            }
        }
        if seen != 0 {
            *self.irq.lock() = IrqState {
                handled,
                last: seen,
            };
            self.irq_seen.notify_all();
        }
        if seen & INT_DONE != 0 {
            self.stream_next(dev, io);
        }
        ret
    }
}

/// Why the worker stopped.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Stop {
    /// `try_access` refused: the binding is gone.
    Refused,
    /// MAGIC read all-ones and config space did not answer either: the device went away under
    /// us (surprise removal).
    Gone,
}

/// Keeps reading MAGIC through the `Devres` handle, about once a millisecond, until refused
/// access or the device answers all-ones (it is gone: a PCI read from a device that is not there
/// completes with all bits set). All-ones from a device that still answers config space is a
/// hung function, not a removed one: the worker then reads nothing until error recovery (a
/// reset) hands the device back. While runtime PM has put the device to sleep it reads nothing,
/// but every `HEARTBEAT_TICKS` it wakes the device for one read (resume on access).
#[pin_data]
struct Worker {
    bar: Arc<Devres<Regs>>,
    /// To wake the device (runtime PM) for a heartbeat.
    pdev: ARef<pci::Device>,
    accesses: AtomicU64,
    /// Held across each read.
    #[pin]
    paused: Mutex<Hold>,
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

/// Why the worker must not read the device now.
#[derive(Clone, Copy, Default)]
struct Hold {
    /// Error recovery, system sleep or shutdown has the device: the link may be frozen, the
    /// device in reset or in D3hot. The worker waits, reading nothing.
    paused: bool,
    /// Runtime PM put the device to sleep: the worker reads nothing but its heartbeat.
    suspended: bool,
    /// The device read all-ones but answers config space: hung. The worker reads nothing until
    /// the next [`Worker::pause`]`(false)` (error recovery's `resume`: the device was reset and
    /// set up again).
    hung: bool,
    /// Not read yet, or held off (paused, or waiting out a hang) since the last read: the next
    /// read is reported (`worker_reading`), so that user space can wait for the worker to use
    /// the device (again). Set by every pause, however short, not only by one the worker saw.
    report_read: bool,
}

/// Worker ticks (about a millisecond each) between heartbeats while the device sleeps.
const HEARTBEAT_TICKS: u32 = 30;

impl Worker {
    fn new(bar: Arc<Devres<Regs>>, pdev: ARef<pci::Device>) -> Result<Arc<Self>> {
        Arc::pin_init(
            pin_init!(Worker {
                bar,
                pdev,
                accesses: AtomicU64::new(0),
                paused <- new_mutex!(Hold {
                    report_read: true,
                    ..Hold::default()
                }),
                stopped <- new_mutex!(None),
                wake <- new_condvar!(),
                work <- new_work!("pci_rig::Worker"),
            }),
            GFP_KERNEL,
        )
    }

    /// Pauses (or resumes) the worker's reads; returns once no read is in flight. Resuming
    /// also ends a wait for a hung device: whoever resumes has set the device up again.
    fn pause(&self, paused: bool) {
        let mut hold = self.paused.lock();
        hold.paused = paused;
        hold.hung &= paused;
        hold.report_read |= paused;
    }

    /// Tells the worker that runtime PM put the device to sleep (or woke it); returns once no
    /// read is in flight.
    fn suspend(&self, suspended: bool) {
        self.paused.lock().suspended = suspended;
    }

    /// Wakes the sleeping device for one read and lets it sleep again: the runtime PM
    /// reference resumes it (the driver's `runtime_resume` sets it up and lets the worker read
    /// again) and, dropped, lets it sleep once idle for the autosuspend delay.
    fn heartbeat(&self) {
        let Ok(_awake) = self.pdev.runtime_active() else {
            return;
        };
        let hold = self.paused.lock();
        if let Some(io) = self.bar.try_access().filter(|_| !hold.paused) {
            let _ = io.readl(reg::MAGIC);
            self.accesses.fetch_add(1, Ordering::Relaxed);
        }
    }

    fn start(self: &Arc<Self>) {
        // A long-running item: the long queue keeps it off the shared per-CPU workers.
        let _ = workqueue::system_long().enqueue(self.clone());
    }

    /// Waits until the worker's run has returned (or takes it off the queue if it never began)
    /// and returns why it stopped; `None` if it never ran. It stops within a millisecond of its
    /// access being refused, so call this once the binding has ended (or the device is gone).
    fn join(self: &Arc<Self>) -> Option<Stop> {
        workqueue::cancel_sync(self);
        *self.stopped.lock()
    }
}

impl WorkItem for Worker {
    type Pointer = Arc<Worker>;

    fn run(this: Arc<Worker>) {
        let mut asleep_ticks = 0u32;
        let why = loop {
            let mut paused = this.paused.lock();
            let hold = *paused;
            // Decided under `try_access`'s RCU guard, which ends with this statement: waking
            // the device (the heartbeat) sleeps, and must not happen inside it.
            let asleep = match this.bar.try_access_bound() {
                // Paused, or waiting out a hang, it still notices the binding's end.
                Some(_) if hold.paused || hold.hung => false,
                Some(_) if hold.suspended => true,
                Some(io) => {
                    let magic = io.readl(reg::MAGIC);
                    let accesses = this.accesses.fetch_add(1, Ordering::Relaxed) + 1;
                    if core::mem::take(&mut paused.report_read) {
                        dev_info!(
                            this.bar.device(),
                            "event worker_reading magic={:#x} accesses={}\n",
                            magic,
                            accesses
                        );
                    }
                    // A config read, which does not sleep; under the lock, so that a recovery
                    // cannot begin and end between it and `hung`.
                    if magic == u32::MAX && !present(io.device()) {
                        break Stop::Gone;
                    }
                    if magic == u32::MAX {
                        paused.hung = true;
                        paused.report_read = true;
                        dev_warn!(
                            this.bar.device(),
                            "event worker_hung accesses={}\n",
                            accesses
                        );
                    }
                    false
                }
                None => break Stop::Refused,
            };
            // Not under the lock either: waking the device runs `runtime_resume`, which takes it.
            drop(paused);
            if asleep {
                asleep_ticks += 1;
                if asleep_ticks % HEARTBEAT_TICKS == 0 {
                    this.heartbeat();
                    continue;
                }
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
    }
}

/// Whether the bound device still answers config space (a hung one does; a removed one does
/// not).
fn present(dev: &kernel::device::Device<kernel::device::Bound>) -> bool {
    pci::Device::from_device(dev).is_some_and(|pdev| pdev.is_present())
}

/// Tied to the binding, so dropped after it ended: waits until the worker's run has returned
/// (its access is refused from then on), so that nothing of the driver runs once the unbind is
/// over, whatever the preemption model.
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
    sh: Arc<Shared>,
    worker: Arc<Worker>,
    /// Uncorrectable errors reported in this binding; at `MAX_ERRORS` the driver gives up.
    errors: AtomicU64,
}

/// Uncorrectable errors a binding recovers from; at the next one the driver lets go.
const MAX_ERRORS: u64 = 3;

impl PciRig {
    /// After a reset (every register at its power-on value): interrupts on again, then one
    /// operation and one DMA from the binding's coherent buffer, each answered by its interrupt.
    /// Reports `event EVENT ok|FAIL …` (`aer_reinit` after an error's reset, `reset_reinit`
    /// after a function reset, `pm_reinit` after system sleep, `rpm_reinit` after runtime PM's);
    /// whether the device works.
    fn reinit(&self, pdev: &pci::Device<pci::Bound>, event: &str) -> bool {
        let sh = &self.sh;
        let Ok(io) = sh.bar.access(pdev.as_ref()) else {
            return false;
        };
        wr!(
            sh,
            pdev,
            io,
            INT_DONE | INT_ERROR | INT_SOFT,
            reg::INT_ENABLE
        );
        let len = 64;
        let want = crc32_of_repeated(0x3c, len);
        let o = operate(sh, pdev, io, OP_FILL, 0, len as u32, 0x3c);
        let fill = o.interrupted && o.status == STATUS_DONE && o.result == want;
        // The buffer taken out of its lock for the DMA, not held under it: the interrupt thread
        // takes that lock for a stream round once it has told a waiter, so a waiter holding it
        // kept the thread from handling the very interrupt it waited for (a lost interrupt
        // after resume, one boot in a few under load). Whoever holds the buffer frees it only
        // once the DMA is over (`dma` resets the device if no interrupt came), remove() too.
        let taken = sh.dma.lock().take();
        let mem = taken
            .as_ref()
            .and_then(|d| d.buf.inner.access(pdev.as_ref()).ok());
        let moved = mem.map(|mem| -> Result<bool> {
            let mut bytes = KVec::from_elem(0u8, DMA_LEN, GFP_KERNEL)?;
            mem.copy_to_slice(0, &mut bytes)?;
            let sent = crc32(bytes.iter().copied());
            let op = (OP_DMA_TO_DEVICE, "to_device");
            let o = dma(sh, pdev, io, event, op, mem.dma_handle(), Some(sent))?;
            Ok(o.interrupted && o.status == STATUS_DONE && o.result == sent)
        });
        *sh.dma.lock() = taken;
        let moved = moved.map(|m| m.unwrap_or(false));
        let ok = fill && moved == Some(true);
        if ok {
            dev_info!(pdev, "event {} ok\n", event);
        } else {
            dev_err!(pdev, "event {} FAIL fill={} dma={:?}\n", event, fill, moved);
        }
        ok
    }
}

/// Ends the receive stream if it runs: under the lock the interrupt thread takes for a round,
/// so none starts after this; a DMA in flight still lands in the buffer, which is freed only at
/// remove() (or is dropped by the device's reset).
fn stop_stream(dma: &mut Option<DmaState>, pdev: &pci::Device, why: &str) {
    if let Some(d) = dma.as_mut().filter(|d| d.streaming) {
        d.streaming = false;
        dev_info!(pdev, "event stream_stopped rounds={} {}\n", d.rounds, why);
    }
}

/// The uncorrectable errors the device itself recorded (its AER capability's status register),
/// cleared once read (the register is write-1-to-clear and survives resets); 0 when it has
/// none or no AER capability. The AER core reads a device's record only when the error message
/// names it; ours come from the root port.
fn take_device_errors(pdev: &pci::Device<pci::Bound>) -> u32 {
    let Ok(cs) = pdev.config_space_extended() else {
        return 0;
    };
    let aer = cs.ext_capabilities().find_map(|c| match c {
        pci::ExtCapability::Aer(at) => Some(usize::from(at)),
        _ => None,
    });
    let Some(status) = aer.map(|at| at + AER_UNCOR_STATUS) else {
        return 0;
    };
    let errors = cs.try_read32(status).unwrap_or(0);
    if errors != 0 && errors != u32::MAX {
        let _ = cs.try_write32(errors, status);
    }
    errors
}

/// The AER capability's Uncorrectable Error Status register, from the capability.
const AER_UNCOR_STATUS: usize = 4;

impl pci::Driver for PciRig {
    type IdInfo = Expect;
    const ID_TABLE: pci::IdTable<Expect> = IDS;
    type Data = KBox<PciRig>;

    fn probe(pdev: &pci::Device<pci::Core>, expect: &Expect) -> Result<KBox<PciRig>> {
        dev_info!(pdev, "event probe_begin\n");
        pdev.enable_device_mem()?;
        pdev.set_master();
        // MSI where the platform has it, else the INTx pin (freed when the binding ends).
        pdev.alloc_irq_vectors(1, 1, pci::IrqTypes::MSI | pci::IrqTypes::INTX)?;
        let intx = !pdev.msi_enabled();
        dev_info!(
            pdev,
            "event irq_mode {}\n",
            if intx { "intx" } else { "msi" }
        );
        let kept = Arc::pin_init(new_mutex!(None), GFP_KERNEL)?;
        Devres::new_foreign_owned(pdev.as_ref(), KeptHandle { bar: kept.clone() }, GFP_KERNEL)?;
        let bar = Arc::new(
            pdev.iomap_region_sized::<BAR0_SIZE>(0, c_str!("pci_rig"))?,
            GFP_KERNEL,
        )?;
        let sh = Shared::new(bar.clone(), intx)?;
        // The device is bound while probe runs: no RCU guard needed.
        let io = bar.access(pdev.as_ref())?;
        identify(&sh, pdev, io, expect)?;
        // Start quiet: nothing latched or counted by an earlier binding.
        wr!(sh, pdev, io, RESET_KEY, reg::RESET);
        let flags = if intx {
            irq::Flags::SHARED
        } else {
            irq::Flags::NONE
        };
        pdev.request_threaded_irq(0, flags, c_str!("pci_rig"), sh.clone())?;
        wr!(
            sh,
            pdev,
            io,
            INT_DONE | INT_ERROR | INT_SOFT,
            reg::INT_ENABLE
        );
        selftest(&sh, pdev, io)?;
        let buf = dma_selftest(&sh, pdev, io)?;
        // All-ones is a device that is gone, not one offering everything.
        let caps = rd!(sh, pdev, io, reg::CAPS);
        let streaming = caps != u32::MAX && caps & CAP_STREAM != 0;
        // Nothing fails after the worker starts.
        let worker = Worker::new(bar.clone(), pdev.into())?;
        let this = KBox::new(
            PciRig {
                sh: sh.clone(),
                worker: worker.clone(),
                errors: AtomicU64::new(0),
            },
            GFP_KERNEL,
        )?;
        *kept.lock() = Some(bar.clone());
        // Joined before it starts, so that a failed probe never leaves it running.
        Devres::new_foreign_owned(pdev.as_ref(), WorkerJoin(worker.clone()), GFP_KERNEL)?;
        worker.start();
        dev_info!(pdev, "event probe_done\n");
        // The stream after probe_done: from the worker's start on, its unreported reads
        // interleave with the stream's reports, which the harness accounts for only after that
        // line. Stored only now, so that no DONE before this starts a round.
        *sh.dma.lock() = Some(DmaState {
            buf,
            streaming,
            rounds: 0,
        });
        if streaming {
            dev_info!(pdev, "event stream_started\n");
            sh.stream_next(pdev.as_ref(), io);
        }
        Ok(this)
    }

    /// The worker is not told: the binding ends after this returns, which first frees the
    /// interrupt (waiting for a running handler), then refuses the worker's access.
    fn remove(pdev: &pci::Device<pci::Core>, this: &KBox<PciRig>) {
        dev_info!(pdev, "event remove_begin\n");
        // The DMA buffer first: once taken, no stream round starts (a running one ends before
        // the lock is ours).
        let dma = this.sh.dma.lock().take();
        if let Some(d) = dma.as_ref().filter(|d| d.streaming) {
            dev_info!(pdev, "event stream_stopped rounds={} remove\n", d.rounds);
        }
        // Quiesce: a reset drops any pending interrupt and operation, and disables interrupts.
        if let Ok(io) = this.sh.bar.access(pdev.as_ref()) {
            wr!(this.sh, pdev, io, RESET_KEY, reg::RESET);
        }
        // Freed only now, when the device can no longer start a DMA into it.
        drop(dma);
        dev_info!(pdev, "event remove_done\n");
    }

    const ERROR_RECOVERY: bool = true;

    /// Stops the worker's reads, then answers: a normal link can go on once MMIO is back, a
    /// frozen one needs a reset; past `MAX_ERRORS` uncorrectable errors in one binding the
    /// driver lets go (the worker stays paused until the binding ends).
    fn error_detected(
        pdev: &pci::Device<pci::Core>,
        this: &KBox<PciRig>,
        channel: pci::Channel,
    ) -> pci::Detected {
        this.worker.pause(true);
        // Dropped, not resumed after recovery: a reset loses the round in flight.
        stop_stream(&mut this.sh.dma.lock(), pdev, "aer");
        let errors = this.errors.fetch_add(1, Ordering::Relaxed) + 1;
        let answer = match channel {
            _ if errors > MAX_ERRORS => pci::Detected::Disconnect,
            pci::Channel::Normal => pci::Detected::CanRecover,
            pci::Channel::Frozen => pci::Detected::NeedReset,
            pci::Channel::PermanentFailure => pci::Detected::Disconnect,
        };
        dev_info!(
            pdev,
            "event aer_detected channel={:?} errors={} answer={:?} device_errors={:#x}\n",
            channel,
            errors,
            answer,
            take_device_errors(pdev)
        );
        if answer == pci::Detected::Disconnect {
            // Letting go: the device is stopped (no operation, no interrupt, no DMA) and left
            // alone until the binding ends.
            if let Ok(io) = this.sh.bar.access(pdev.as_ref()) {
                wr!(this.sh, pdev, io, RESET_KEY, reg::RESET);
            }
        }
        if channel == pci::Channel::Frozen {
            // Once a running interrupt thread is done; none reads the device until its reset.
            *this.sh.in_reset.lock() = true;
        }
        answer
    }

    /// No reset happened: the device must still be ours.
    fn mmio_enabled(pdev: &pci::Device<pci::Core>, this: &KBox<PciRig>) -> pci::MmioEnabled {
        let magic = match this.sh.bar.access(pdev.as_ref()) {
            Ok(io) => rd!(this.sh, pdev, io, reg::MAGIC),
            Err(_) => u32::MAX,
        };
        let answer = if magic == MAGIC_VALUE {
            pci::MmioEnabled::Recovered
        } else {
            pci::MmioEnabled::NeedReset
        };
        dev_info!(pdev, "event aer_mmio_enabled answer={:?}\n", answer);
        answer
    }

    /// A reset of the function outside error recovery (`pci_reset_function`: sysfs `reset`, a
    /// function-level reset where the device has one) is coming: the worker stops reading.
    fn reset_prepare(pdev: &pci::Device<pci::Core>, this: &KBox<PciRig>) {
        this.worker.pause(true);
        stop_stream(&mut this.sh.dma.lock(), pdev, "reset");
        // Once a running interrupt thread is done; none reads the device until reset_done.
        *this.sh.in_reset.lock() = true;
        dev_info!(pdev, "event reset_prepare\n");
    }

    /// The function was reset (the PCI core restored its config space): everything the driver
    /// set up in it is gone. Set up again, then the worker reads on.
    fn reset_done(pdev: &pci::Device<pci::Core>, this: &KBox<PciRig>) {
        // The reset is over: the interrupt thread may read the device again (`reinit` waits
        // for it).
        *this.sh.in_reset.lock() = false;
        this.reinit(pdev, "reset_reinit");
        this.worker.pause(false);
        dev_info!(pdev, "event reset_done\n");
    }

    /// The device was reset: everything the driver set up in it is gone.
    fn slot_reset(pdev: &pci::Device<pci::Core>, this: &KBox<PciRig>) -> pci::SlotReset {
        // The link was reset: the interrupt thread may read the device again (`reinit` waits
        // for it).
        *this.sh.in_reset.lock() = false;
        // 6.12 calls this without a reset when `mmio_enabled` asked for one on a link that
        // was not frozen (pcie/err.c resets only a frozen channel's bridge): a device that
        // stopped answering still does not, and setting it up again would only fail. Let go.
        let answering = match this.sh.bar.access(pdev.as_ref()) {
            Ok(io) => rd!(this.sh, pdev, io, reg::MAGIC) == MAGIC_VALUE,
            Err(_) => false,
        };
        let answer = if answering && this.reinit(pdev, "aer_reinit") {
            pci::SlotReset::Recovered
        } else {
            pci::SlotReset::Disconnect
        };
        dev_info!(pdev, "event aer_slot_reset answer={:?}\n", answer);
        answer
    }

    fn resume(pdev: &pci::Device<pci::Core>, this: &KBox<PciRig>) {
        this.worker.pause(false);
        dev_info!(pdev, "event aer_resume\n");
    }

    /// The system goes down with the binding alive: the worker paused, the stream stopped and
    /// the device reset (a DMA in flight finishes first, into memory still ours), so that
    /// nothing of the driver's reaches the device after this; the adapter then turns bus
    /// mastering off.
    fn shutdown(pdev: &pci::Device<pci::Core>, this: &KBox<PciRig>) {
        dev_info!(pdev, "event shutdown_begin\n");
        this.worker.pause(true);
        // Once a running interrupt thread is done; none touches the device after this.
        *this.sh.shut_down.lock() = true;
        // Under the lock the interrupt thread takes for a round: none starts after this.
        let mut dma = this.sh.dma.lock();
        stop_stream(&mut dma, pdev, "shutdown");
        if let Ok(io) = this.sh.bar.access(pdev.as_ref()) {
            wr!(this.sh, pdev, io, RESET_KEY, reg::RESET);
        }
        drop(dma);
        dev_info!(pdev, "event shutdown_done\n");
    }

    const SLEEP: bool = true;

    /// The system goes to sleep: the worker paused, the stream stopped and the device reset
    /// (a DMA in flight finishes first), so that nothing of the driver's reaches it while it is
    /// in D3hot.
    fn sleep(pdev: &pci::Device<pci::Core>, this: &KBox<PciRig>) -> Result {
        this.worker.pause(true);
        let mut dma = this.sh.dma.lock();
        stop_stream(&mut dma, pdev, "sleep");
        if let Ok(io) = this.sh.bar.access(pdev.as_ref()) {
            wr!(this.sh, pdev, io, RESET_KEY, reg::RESET);
        }
        drop(dma);
        dev_info!(pdev, "event pm_sleep\n");
        Ok(())
    }

    /// The system woke: the device may have lost every register in D3hot, so interrupts go on
    /// again and an operation and a DMA prove it works before the worker reads again.
    fn wake(pdev: &pci::Device<pci::Core>, this: &KBox<PciRig>) -> Result {
        if !this.reinit(pdev, "pm_reinit") {
            return Err(EIO);
        }
        this.worker.pause(false);
        dev_info!(pdev, "event pm_wake\n");
        Ok(())
    }

    /// Idle for this long (nobody holds the device awake, and the worker reads without a
    /// runtime PM reference), the device may sleep, if user space allows it.
    const AUTOSUSPEND_DELAY_MS: Option<u32> = Some(50);

    /// The device goes to sleep: the worker down to its heartbeat, the stream stopped, the
    /// device reset and the interrupt thread kept off it (it is not under the device lock:
    /// interrupts stay on).
    fn runtime_suspend(pdev: &pci::Device<pci::Bound>, this: &KBox<PciRig>) -> Result {
        this.worker.suspend(true);
        let mut dma = this.sh.dma.lock();
        if let Some(d) = dma.as_mut().filter(|d| d.streaming) {
            d.streaming = false;
            dev_info!(pdev, "event stream_stopped rounds={} rpm\n", d.rounds);
        }
        if let Ok(io) = this.sh.bar.access(pdev.as_ref()) {
            wr!(this.sh, pdev, io, RESET_KEY, reg::RESET);
        }
        drop(dma);
        // Once a running interrupt thread is done.
        *this.sh.asleep.lock() = true;
        dev_info!(pdev, "event rpm_suspend\n");
        Ok(())
    }

    /// The device is wanted again (the worker's heartbeat, an unbind, user space): it lost its
    /// registers in D3hot, so interrupts go on again and an operation and a DMA prove it works
    /// before the worker reads again.
    fn runtime_resume(pdev: &pci::Device<pci::Bound>, this: &KBox<PciRig>) -> Result {
        *this.sh.asleep.lock() = false;
        if !this.reinit(pdev, "rpm_reinit") {
            return Err(EIO);
        }
        this.worker.suspend(false);
        dev_info!(pdev, "event rpm_resume\n");
        Ok(())
    }
}

kernel::module_pci_driver! {
    type: PciRig,
    name: "pci_rig",
    author: "pci-rig",
    description: "Driver for pci-rig's emulated PCI device",
    license: "GPL",
}
