// SPDX-License-Identifier: GPL-2.0

//! Driver for pci-rig's emulated PCI device (`qemu-device/REGISTERS.md`) on upstream Linux 7.3's
//! Rust API: the port of `guest-kernel/driver/pci_rig.rs`, with the same device accesses and the
//! same console lines (`guest-kernel/driver/README.md`).
//!
//! Probe checks the device's identity, runs an MMIO and DMA self-test and starts a worker that
//! keeps reading the device until access is refused or the device reads all-ones. Nobody tells
//! the worker to stop: when the binding ends (unbind, hot-unplug) its next `try_access` is
//! refused, and the binding's release waits for it. Everything the driver does is reported on
//! the console, so the harness can hold it against the device's own access log.
//!
//! # How a binding ends under 7.3
//!
//! 1. [`pci::Driver::unbind`]: the receive stream stops, RESET quiesces the device, bus mastering
//!    goes off (7.3's PCI core leaves it on), and only then is the DMA buffer freed;
//! 2. the driver data is dropped: [`Interrupts`] first, whose `free_irq()` waits for a running
//!    handler, then the MSI vectors are freed;
//! 3. devres releases, latest first: BAR0's revocation (an RCU grace period, then the unmap),
//!    then [`Epilogue`], registered before BAR0 was mapped: it joins the worker, which its
//!    refused access stopped, and tries the handle kept across the unbind.
//!
//! So, as in the original, the interrupt is freed before the BAR is revoked (2 before 3), the
//! worker is joined after its access is refused (3), and the DMA buffer is freed only after the
//! device is reset (1).
//!
//! # Unsafe code
//!
//! The original forbids unsafe code; 7.3 makes that impossible: registering an interrupt handler
//! (`irq::ThreadedRegistration::new`) and setting a DMA mask (`dma_set_mask_and_coherent`) are
//! `unsafe fn`s, and an `IrqVector` borrows its `IrqVectorRegistration`, so no safe code keeps a
//! handler registered past probe. Unsafe code is denied but in [`set_dma_mask`] and
//! [`Interrupts::request`], each with its safety argument.

#![deny(unsafe_code)]

use kernel::{
    device::{Bound, Core, Device},
    devres,
    dma::{self, Coherent, CoherentBox, DataDirection, DmaAddress, DmaMask},
    fmt,
    io::{io_project, Io},
    irq::{self, IrqRequest, IrqReturn, ThreadedIrqReturn, ThreadedRegistration},
    new_condvar, new_mutex, new_work, pci,
    prelude::*,
    scatterlist::{Owned, SGTable},
    sync::{
        atomic::{Atomic, Relaxed},
        Arc, Completion, CondVar, Mutex, SetOnce,
    },
    time::{delay::fsleep, msecs_to_jiffies, Delta, Instant, Monotonic},
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
    crc32, crc32_of_repeated, pattern, Detail, Mismatch, Outcome, DMA_LEN, INTX_ROUNDS,
    IRQ_WAIT_MS, SCRATCH_PATTERNS, SOFT_IRQS,
};

// 7.3 formats through a `Display` of its own (`kernel::fmt`); the shared types have core's.
impl fmt::Display for Detail {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        core::fmt::Display::fmt(self, f)
    }
}

impl fmt::Display for Mismatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        core::fmt::Display::fmt(self, f)
    }
}

/// The pause between two rounds of the receive stream. 7.3's serial consoles print from a thread
/// of their own (nbcon), so printk no longer waits for the port as 6.12's does (which paces the
/// original): unpaced, the stream's 17 lines a round outran the console and records were dropped.
const STREAM_PACE: Delta = Delta::from_millis(10);

/// The device's class code (`REGISTERS.md`): base class 0xff, "fits no defined class".
const CLASS_CODE: u32 = 0xff_0000;

/// Config space: COMMAND, with STATUS in the upper half of the same dword (`pci_regs.h`).
const PCI_COMMAND: usize = 0x04;
const PCI_COMMAND_MASTER: u16 = 1 << 2;
const PCI_COMMAND_INTX_DISABLE: u16 = 1 << 10;
const PCI_STATUS_INTERRUPT: u16 = 1 << 3;

type Regs<'a> = pci::Bar<'a, BAR0_SIZE>;
/// BAR0 as a devres resource: revoked when the binding ends, so a `'static` holder is refused.
type DevresRegs = pci::DevresBar<BAR0_SIZE>;

/// What an id-table entry tells probe: the register-map major version the device must have.
struct Expect {
    major: u32,
}

// 7.3 builds a `pci::Vendor` only from the PCI SIG's list (its raw constructor is private), which
// lacks pci-rig's unassigned vendor ID: match the device's class, and let probe refuse quietly
// any other vendor or device of that class.
kernel::pci_device_table!(
    IDS,
    Expect,
    [(
        pci::DeviceId::from_class(CLASS_CODE, 0xff_ffff),
        Expect { major: 1 }
    ),]
);

/// Reads a register and reports the access as `# mmio r bar0 OFFSET 4 VALUE`, both under the
/// reports lock of `$sh` (probe and the interrupt thread both report, and the console must list
/// the accesses in the order the device saw them). A macro, not a function, so the offset stays
/// a constant and `read32` checks it at build time.
macro_rules! rd {
    ($sh:expr, $io:expr, $off:expr) => {{
        let _report = $sh.reports.lock();
        let v = $io.read32($off);
        dev_info!($sh.pdev, "# mmio r bar0 {:#x} 4 {:#x}\n", $off, v);
        v
    }};
}

/// Writes a register and reports it as `# mmio w bar0 OFFSET 4 VALUE`, like [`rd!`].
macro_rules! wr {
    ($sh:expr, $io:expr, $val:expr, $off:expr) => {{
        let _report = $sh.reports.lock();
        let v: u32 = $val;
        $io.write32(v, $off);
        dev_info!($sh.pdev, "# mmio w bar0 {:#x} 4 {:#x}\n", $off, v);
    }};
}

/// Reports one self-test step: `step NAME ok DETAIL`, or `step NAME FAIL DETAIL` and `EIO`.
fn step(pdev: &pci::Device<Bound>, name: &str, ok: bool, detail: fmt::Arguments<'_>) -> Result {
    if ok {
        dev_info!(pdev, "step {} ok {}\n", name, detail);
        Ok(())
    } else {
        dev_err!(pdev, "step {} FAIL {}\n", name, detail);
        Err(EIO)
    }
}

/// Sets the DMA mask the device states.
#[allow(unsafe_code)]
fn set_dma_mask(pdev: &pci::Device<Core<'_>>, mask: DmaMask) -> Result {
    // SAFETY: Called once, from probe, before the binding allocates or maps any DMA memory; no
    // DMA primitive of this device runs concurrently (the interrupt handler allocates none and
    // the worker has not started).
    unsafe { dma::Device::dma_set_mask_and_coherent(pdev, mask) }
}

/// A DMA mapping or allocation, reported as `# dma map ID …` when made and `# dma unmap ID`
/// just before it ends (when dropped), so the harness knows what the device may reach at any
/// moment.
struct Reported<'bound, T> {
    reports: Arc<Mutex<()>>,
    pdev: &'bound pci::Device<Bound>,
    id: u32,
    inner: T,
}

impl<'bound, T> Reported<'bound, T> {
    fn new(
        sh: &Shared<'bound>,
        id: u32,
        kind: &str,
        (iova, len): (DmaAddress, u64),
        inner: T,
    ) -> Self {
        let _report = sh.reports.lock();
        dev_info!(
            sh.pdev,
            "# dma map {} {} {:#x} {:#x}\n",
            id,
            kind,
            iova,
            len
        );
        Self {
            reports: sh.reports.clone(),
            pdev: sh.pdev,
            id,
            inner,
        }
    }
}

impl<T> Drop for Reported<'_, T> {
    fn drop(&mut self) {
        let _report = self.reports.lock();
        dev_info!(self.pdev, "# dma unmap {}\n", self.id);
    }
}

/// The coherent buffer of a binding that bound, and its receive stream.
struct DmaState<'bound> {
    buf: Reported<'bound, Coherent<[u8]>>,
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

/// `pci_check_and_mask_intx()` (`mask`) or `pci_check_and_unmask_intx()`, which 7.3's Rust does
/// not bind: the same PCI 2.3 dance on config space (one COMMAND+STATUS dword read, a COMMAND
/// write only if the disable bit changes). Masks only while the device has an interrupt pending,
/// unmasks only while it has none; `false` if it did neither. Unlike the C helpers the read and
/// the write are two `pci_lock` sections: the hard half sets the bit only where it read it clear
/// and the thread clears it only where it read it set, so they lose none of each other's writes,
/// and unbind waits for both to be done before its own COMMAND write (bus mastering off).
fn check_and_set_intx_mask(pdev: &pci::Device<Bound>, mask: bool) -> bool {
    let config = pdev.config_space();
    let dword = config.read32(PCI_COMMAND);
    let pending = (dword >> 16) as u16 & PCI_STATUS_INTERRUPT != 0;
    if pending != mask {
        return false;
    }
    let cmd = dword as u16;
    let new = if mask {
        cmd | PCI_COMMAND_INTX_DISABLE
    } else {
        cmd & !PCI_COMMAND_INTX_DISABLE
    };
    if new != cmd {
        config.write16(new, PCI_COMMAND);
    }
    true
}

/// Bus mastering of a binding: on from probe; off at [`BusMaster::clear`] or, at the latest,
/// when dropped (7.3's PCI core never turns it off, failed probe or unbind).
struct BusMaster<'bound> {
    pdev: &'bound pci::Device<Bound>,
    on: Atomic<bool>,
}

impl<'bound> BusMaster<'bound> {
    fn enable(pdev: &'bound pci::Device<Core<'_>>) -> Self {
        pdev.set_master();
        Self {
            pdev,
            on: Atomic::new(true),
        }
    }

    /// `pci_clear_master()`, which 7.3's Rust does not bind: clears COMMAND's bus-master bit.
    fn clear(&self) {
        if self.on.xchg(false, Relaxed) {
            let config = self.pdev.config_space();
            let cmd = config.read16(PCI_COMMAND);
            if cmd & PCI_COMMAND_MASTER != 0 {
                config.write16(cmd & !PCI_COMMAND_MASTER, PCI_COMMAND);
            }
        }
    }
}

impl Drop for BusMaster<'_> {
    fn drop(&mut self) {
        self.clear();
    }
}

/// State shared by probe, unbind and the interrupt handler of one binding.
#[pin_data]
struct Shared<'bound> {
    pdev: &'bound pci::Device<Bound>,
    /// BAR0: reached directly (`access`) by probe, unbind and the handler, which all run while
    /// the device is bound.
    bar: Arc<DevresRegs>,
    /// Held across each reported access and its report (shared with what reports its end).
    reports: Arc<Mutex<()>>,
    /// Before `dma`, so that where probe fails after the DMA self-test, bus mastering is off
    /// before the buffer is freed.
    master: BusMaster<'bound>,
    /// The DMA self-test's coherent buffer from the end of probe, and the receive stream.
    #[pin]
    dma: Mutex<Option<DmaState<'bound>>>,
    #[pin]
    irq: Mutex<IrqState>,
    #[pin]
    irq_seen: CondVar,
    /// INTx (shared, masked by the hard half) rather than MSI.
    intx: bool,
}

impl<'bound> Shared<'bound> {
    fn new(
        pdev: &'bound pci::Device<Bound>,
        bar: Arc<DevresRegs>,
        master: BusMaster<'bound>,
        intx: bool,
    ) -> Result<Arc<Self>> {
        let reports = Arc::pin_init(new_mutex!(()), GFP_KERNEL)?;
        Arc::pin_init(
            pin_init!(Shared {
                pdev,
                bar,
                reports,
                master,
                dma <- new_mutex!(None),
                irq <- new_mutex!(IrqState::default()),
                irq_seen <- new_condvar!(),
                intx,
            }),
            GFP_KERNEL,
        )
    }

    fn handled(&self) -> u32 {
        self.irq.lock().handled
    }

    /// Refuses a device that is not ours or speaks another register map.
    fn identify(&self, io: &Regs<'_>, expect: &Expect) -> Result {
        let magic = rd!(self, io, reg::MAGIC);
        if magic != MAGIC_VALUE {
            dev_err!(
                self.pdev,
                "step identify FAIL magic {:#x}, expected {:#x}\n",
                magic,
                MAGIC_VALUE
            );
            return Err(ENODEV);
        }
        let version = rd!(self, io, reg::VERSION);
        if version >> VERSION_MAJOR_SHIFT != expect.major {
            dev_err!(
                self.pdev,
                "step identify FAIL version {:#x}, this driver speaks major {}\n",
                version,
                expect.major
            );
            return Err(ENOTSUPP);
        }
        step(
            self.pdev,
            "identify",
            true,
            fmt!("magic={:#x} version={:#x}", magic, version),
        )
    }

    /// Starts an operation over BAR2 and waits for its interrupt (DONE, with ERROR on failure),
    /// not polling STATUS; then reads STATUS and RESULT.
    fn operate(&self, io: &Regs<'_>, op: u32, offset: u32, len: u32, arg: u32) -> Outcome {
        let before = self.handled();
        self.ring(io, op, offset, len, arg);
        let interrupted = self.wait_interrupt(before, INT_DONE);
        Outcome {
            status: rd!(self, io, reg::STATUS),
            result: rd!(self, io, reg::RESULT),
            interrupted,
        }
    }

    /// Sets up an operation and rings the doorbell, without waiting for it.
    fn ring(&self, io: &Regs<'_>, op: u32, offset: u32, len: u32, arg: u32) {
        wr!(self, io, offset, reg::OP_OFFSET);
        wr!(self, io, len, reg::OP_LENGTH);
        wr!(self, io, arg, reg::OP_ARG);
        wr!(self, io, op, reg::CMD);
    }

    /// The MMIO self-test of REGISTERS.md, one reported step at a time.
    fn selftest(&self, io: &Regs<'_>) -> Result {
        let pdev = self.pdev;
        for pattern in SCRATCH_PATTERNS {
            wr!(self, io, pattern, reg::SCRATCH);
            let back = rd!(self, io, reg::SCRATCH);
            step(
                pdev,
                "scratch",
                back == pattern,
                fmt!("wrote={:#x} read={:#x}", pattern, back),
            )?;
        }

        let first = rd!(self, io, reg::COUNTER);
        let second = rd!(self, io, reg::COUNTER);
        step(
            pdev,
            "counter",
            second == first.wrapping_add(1),
            fmt!("{} then {}", first, second),
        )?;

        let len = 64;
        let want = crc32_of_repeated(0x5a, len);
        let o = self.operate(io, OP_FILL, 0, len as u32, 0x5a);
        let ok = o.interrupted && o.status == STATUS_DONE && o.result == want;
        step(pdev, "fill", ok, fmt!("{}", o.detail(want)))?;
        let o = self.operate(io, OP_CRC32, 0, len as u32, 0);
        let ok = o.interrupted && o.status == STATUS_DONE && o.result == want;
        step(pdev, "crc32", ok, fmt!("{}", o.detail(want)))?;
        let want = crc32_of_repeated(!0x5a, len);
        let o = self.operate(io, OP_INVERT, 0, len as u32, 0);
        let ok = o.interrupted && o.status == STATUS_DONE && o.result == want;
        step(pdev, "invert", ok, fmt!("{}", o.detail(want)))?;

        let o = self.operate(io, 0x63, 0, 0, 0);
        let refused = o.status & STATUS_ERROR != 0
            && (o.status >> STATUS_CODE_SHIFT) & STATUS_CODE_MASK == ERR_BAD_OPCODE;
        step(
            pdev,
            "bad_opcode",
            o.interrupted && refused,
            fmt!("{}", o.detail(0)),
        )?;

        // Offsets only known at run time go through the checked accessors.
        let past_end = io.try_read32(BAR0_SIZE);
        let unaligned = io.try_read32(reg::SCRATCH + 2);
        let report = self.reports.lock();
        let inside = io.try_read32(reg::SCRATCH);
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
            fmt!(
                "past_end={:?} unaligned={:?} inside={:?} want={:#x}",
                past_end.err(),
                unaligned.err(),
                inside.ok(),
                left
            ),
        )?;

        // Software interrupts, each handled once, then the device's own count of interrupts
        // raised since the reset at probe (operations' and these) against the handler's.
        for i in 0..SOFT_IRQS {
            let before = self.handled();
            wr!(self, io, INT_SOFT, reg::INT_RAISE);
            if !self.wait_interrupt(before, INT_SOFT) {
                return step(
                    pdev,
                    "irq",
                    false,
                    fmt!("no interrupt within 1 s; software interrupt {}", i + 1),
                );
            }
        }
        step(
            pdev,
            "irq",
            true,
            fmt!("{} software interrupts, each handled", SOFT_IRQS),
        )?;
        let device = rd!(self, io, reg::IRQ_COUNT);
        let driver = self.handled();
        step(
            pdev,
            "irq_count",
            device == driver,
            fmt!("device={} driver={}", device, driver),
        )
    }

    /// Sets up a DMA over BAR2's first `DMA_LEN` bytes and guest memory at `iova`, reads every
    /// parameter back (a write the device dropped must not send the DMA elsewhere, or make it
    /// longer), announces it (`# dma start OP IOVA LEN CRC`) and rings the doorbell, without
    /// waiting. On a mismatch no DMA is started.
    fn dma_start(
        &self,
        io: &Regs<'_>,
        (opcode, op): (u32, &str),
        iova: DmaAddress,
        crc: Option<u32>,
    ) -> core::result::Result<(), Mismatch> {
        wr!(self, io, iova as u32, reg::DMA_ADDR_LO);
        wr!(self, io, (iova >> 32) as u32, reg::DMA_ADDR_HI);
        wr!(self, io, 0, reg::OP_OFFSET);
        wr!(self, io, DMA_LEN as u32, reg::OP_LENGTH);
        let lo = rd!(self, io, reg::DMA_ADDR_LO);
        let hi = rd!(self, io, reg::DMA_ADDR_HI);
        let offset = rd!(self, io, reg::OP_OFFSET);
        let len = rd!(self, io, reg::OP_LENGTH);
        for (what, held, want) in [
            ("DMA address", (u64::from(hi) << 32) | u64::from(lo), iova),
            ("offset", offset.into(), 0),
            ("length", len.into(), DMA_LEN as u64),
        ] {
            if held != want {
                return Err(Mismatch { what, held, want });
            }
        }
        let report = self.reports.lock();
        match crc {
            Some(crc) => dev_info!(
                self.pdev,
                "# dma start {} {:#x} {:#x} {:#x}\n",
                op,
                iova,
                DMA_LEN,
                crc
            ),
            None => dev_info!(
                self.pdev,
                "# dma start {} {:#x} {:#x} -\n",
                op,
                iova,
                DMA_LEN
            ),
        }
        drop(report);
        wr!(self, io, opcode, reg::CMD);
        Ok(())
    }

    /// A DMA as [`Shared::dma_start`], waited for like any operation.
    fn dma(
        &self,
        io: &Regs<'_>,
        step_name: &str,
        op: (u32, &str),
        iova: DmaAddress,
        crc: Option<u32>,
    ) -> Result<Outcome> {
        let before = self.handled();
        if let Err(mismatch) = self.dma_start(io, op, iova, crc) {
            step(self.pdev, step_name, false, fmt!("{}", mismatch))?;
        }
        let interrupted = self.wait_interrupt(before, INT_DONE);
        let o = Outcome {
            status: rd!(self, io, reg::STATUS),
            result: rd!(self, io, reg::RESULT),
            interrupted,
        };
        if !interrupted {
            // The DMA may still be in flight: stop the device before the caller gives its
            // memory back (the device is done with it once the reset is taken).
            wr!(self, io, RESET_KEY, reg::RESET);
        }
        Ok(o)
    }

    /// Reports what a DMA from the device left in the second half of `mem`, at `iova`
    /// (`# dma received …`); its CRC.
    fn received(&self, mem: &Coherent<[u8]>, iova: DmaAddress) -> Result<u32> {
        let mut bytes = KVec::from_elem(0u8, DMA_LEN, GFP_KERNEL)?;
        io_project!(mem, [try: DMA_LEN..2 * DMA_LEN]).copy_to_slice(&mut bytes);
        let crc = crc32(bytes.iter().copied());
        let _report = self.reports.lock();
        dev_info!(
            self.pdev,
            "# dma received {:#x} {:#x} {:#x}\n",
            iova,
            DMA_LEN,
            crc
        );
        Ok(crc)
    }

    /// The DMA self-test: the mask the device states, then a coherent buffer to the device and
    /// back (inverted by the device in between), then a streaming mapping the device sums.
    /// Returns the coherent buffer, kept for the binding.
    fn dma_selftest(
        &self,
        pdev: &pci::Device<Core<'_>>,
        io: &Regs<'_>,
    ) -> Result<Reported<'bound, Coherent<[u8]>>> {
        let bits = rd!(self, io, reg::DMA_BITS);
        let set = DmaMask::try_new(bits).and_then(|mask| set_dma_mask(pdev, mask));
        step(
            self.pdev,
            "dma_mask",
            set.is_ok(),
            fmt!("bits={} {:?}", bits, set.err()),
        )?;
        let dev: &Device<Bound> = pdev.as_ref();

        let mut bytes = VVec::with_capacity(DMA_LEN, GFP_KERNEL)?;
        for i in 0..DMA_LEN {
            bytes.push(pattern(i), GFP_KERNEL)?;
        }
        let sent = crc32(bytes.iter().copied());
        let inverted = crc32(bytes.iter().map(|b| !b));

        // Filled while the CPU alone owns it, then handed to the device.
        let mut staged = CoherentBox::<[u8]>::zeroed_slice(dev, 2 * DMA_LEN, GFP_KERNEL)?;
        staged[..DMA_LEN].copy_from_slice(&bytes);
        let alloc: Coherent<[u8]> = staged.into();
        let iova = alloc.dma_address();
        let at = (iova, alloc.size() as u64);
        let coherent = Reported::new(self, 1, "coherent", at, alloc);

        let o = self.dma(
            io,
            "dma_to_device",
            (OP_DMA_TO_DEVICE, "to_device"),
            iova,
            Some(sent),
        )?;
        let ok = o.interrupted && o.status == STATUS_DONE && o.result == sent;
        step(self.pdev, "dma_to_device", ok, fmt!("{}", o.detail(sent)))?;

        // The device inverts what it got, then writes it into the buffer's second half.
        let o = self.operate(io, OP_INVERT, 0, DMA_LEN as u32, 0);
        let inverted_ok = o.interrupted && o.status == STATUS_DONE && o.result == inverted;
        let back = iova + DMA_LEN as DmaAddress;
        let o = if inverted_ok {
            self.dma(
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
            Some(self.received(&coherent.inner, back)?)
        } else {
            None
        };
        step(
            self.pdev,
            "dma_from_device",
            got == Some(inverted) && o.result == inverted,
            fmt!("{} received={:#x}", o.detail(inverted), got.unwrap_or(0)),
        )?;

        // A streaming mapping of the pattern, which the device sums where it lies; the device
        // takes one address, so the mapping must be one segment.
        let map = KBox::pin_init(
            SGTable::<Owned<VVec<u8>>>::new(dev, bytes, DataDirection::ToDevice, GFP_KERNEL),
            GFP_KERNEL,
        )?;
        let segments = map.iter().count();
        let Some(segment) = map.iter().next().filter(|_| segments == 1) else {
            dev_err!(
                self.pdev,
                "step dma_stream FAIL the mapping has {} segments, the device takes one\n",
                segments
            );
            return Err(EIO);
        };
        let handle = segment.dma_address();
        let at = (handle, segment.dma_len());
        let stream = Reported::new(self, 2, "to_device", at, map);
        let o = self.dma(
            io,
            "dma_stream",
            (OP_DMA_CRC32, "crc32"),
            handle,
            Some(sent),
        )?;
        drop(stream);
        let ok = o.interrupted && o.status == STATUS_DONE && o.result == sent;
        step(self.pdev, "dma_stream", ok, fmt!("{}", o.detail(sent)))?;
        Ok(coherent)
    }

    /// The receive stream's next round, after a DONE: holds what the last DMA from the device
    /// wrote against the STATUS the device gave it (`# dma received …`, for the harness to
    /// check) and starts the next; stops at a failed one or a device that is gone.
    fn stream_next(&self, io: &Regs<'_>) {
        if self
            .dma
            .lock()
            .as_ref()
            .is_some_and(|d| d.streaming && d.rounds > 0)
        {
            fsleep(STREAM_PACE);
        }
        let mut dma = self.dma.lock();
        let Some(d) = (*dma).as_mut().filter(|d| d.streaming) else {
            return;
        };
        let back = d.buf.inner.dma_address() + DMA_LEN as DmaAddress;
        if d.rounds > 0 {
            let status = rd!(self, io, reg::STATUS);
            if status != STATUS_DONE || self.received(&d.buf.inner, back).is_err() {
                d.streaming = false;
                dev_info!(
                    self.pdev,
                    "event stream_stopped rounds={} status={:#x}\n",
                    d.rounds,
                    status
                );
                return;
            }
        }
        let op = (OP_DMA_FROM_DEVICE, "from_device");
        if let Err(mismatch) = self.dma_start(io, op, back, None) {
            d.streaming = false;
            dev_info!(
                self.pdev,
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
        let start = Instant::<Monotonic>::now();
        let mut irq = self.irq.lock();
        while irq.handled == before || irq.last & sources == 0 {
            if start.elapsed().as_millis() >= IRQ_WAIT_MS {
                return false;
            }
            let _ = self
                .irq_seen
                .wait_interruptible_timeout(&mut irq, msecs_to_jiffies(1));
        }
        true
    }

    /// The interrupt thread: reads and acknowledges INT_STATUS through the BAR (the device is
    /// bound while the handler is registered, so no RCU guard), counts and reports each
    /// interrupt. On INTx it unmasks the pin before it tells a waiter, so that the next interrupt
    /// finds it open; should one have latched since (the pin still asserted, so left masked), it
    /// is handled in the same run.
    fn handle_threaded(&self) -> IrqReturn {
        let io = match self.bar.access(self.pdev.as_ref()) {
            Ok(io) => io,
            Err(e) => {
                // Cannot happen: `access` fails only for another device. Reported so the
                // harness fails the boot if it ever does.
                dev_err!(self.pdev, "event irq_refused {:?}\n", e);
                return IrqReturn::None;
            }
        };
        let mut ret = IrqReturn::None;
        // Told to waiters only once the pin is open again.
        let (mut handled, mut seen) = (self.handled(), 0);
        for _ in 0..INTX_ROUNDS {
            let status = rd!(self, io, reg::INT_STATUS);
            // 0: not ours; all-ones: the device is gone.
            let ours = status != 0 && status != u32::MAX;
            if ours {
                wr!(self, io, status, reg::INT_ACK);
                handled += 1;
                seen |= status;
                dev_info!(
                    self.pdev,
                    "event irq status={:#x} handled={}\n",
                    status,
                    handled
                );
                ret = IrqReturn::Handled;
            }
            let unmasked = !self.intx || check_and_set_intx_mask(self.pdev, false);
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
            self.stream_next(io);
        }
        ret
    }
}

/// The interrupt handler: the binding's [`Shared`] state.
struct Handler<'bound>(Arc<Shared<'bound>>);

impl irq::ThreadedHandler for Handler<'_> {
    /// MSI is this device's alone; on a shared INTx line, mask ours (if it is ours) so that the
    /// thread can run with the line open to the others.
    fn handle(&self) -> ThreadedIrqReturn {
        let sh = &self.0;
        if !sh.intx || check_and_set_intx_mask(sh.pdev, true) {
            ThreadedIrqReturn::WakeThread
        } else {
            ThreadedIrqReturn::None
        }
    }

    fn handle_threaded(&self) -> IrqReturn {
        self.0.handle_threaded()
    }
}

/// The binding's interrupt: the handler's registration and the vectors it was requested on.
struct Interrupts<'bound> {
    /// Declared first, so dropped first: `free_irq()` (which waits for a running handler) before
    /// the vectors are freed.
    handler: Pin<KBox<ThreadedRegistration<'bound, Handler<'bound>>>>,
    /// Held only to be dropped: that frees the vectors (and turns MSI off).
    _vectors: pci::IrqVectorRegistration<'bound>,
}

impl<'bound> Interrupts<'bound> {
    /// Registers `sh`'s handler on the first of `vectors`.
    #[allow(unsafe_code)]
    fn request(
        vectors: pci::IrqVectorRegistration<'bound>,
        flags: irq::Flags,
        sh: Arc<Shared<'bound>>,
    ) -> Result<Self> {
        let request: IrqRequest<'_> = vectors.index(0)?.into();
        // SAFETY:
        // - The lifetime: an `IrqRequest` holds only the IRQ number; its lifetime stands for
        //   "while the vectors are allocated", which `Self` guarantees for `'bound` by owning
        //   them, dropped after the handler (field order), and never handing either out.
        // - `ThreadedRegistration::new`: the registration is pinned in a box that `Self` owns
        //   and drops; nothing forgets it.
        let handler = KBox::pin_init(
            unsafe {
                ThreadedRegistration::new(
                    core::mem::transmute::<IrqRequest<'_>, IrqRequest<'bound>>(request),
                    flags,
                    c"pci_rig",
                    Ok::<_, Error>(Handler(sh)),
                )
            },
            GFP_KERNEL,
        )?;
        Ok(Self {
            handler,
            _vectors: vectors,
        })
    }

    /// Waits for a running handler (hard half and thread) to be done.
    fn synchronize(&self) {
        self.handler.synchronize();
    }
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
    bar: Arc<DevresRegs>,
    accesses: Atomic<u64>,
    stopped: SetOnce<Stop>,
    /// Completed as the run's last act, for [`Epilogue`] to wait on: 7.3 binds no
    /// `cancel_work_sync()` or `flush_work()`.
    #[pin]
    done: Completion,
    #[pin]
    work: Work<Worker>,
}

kernel::impl_has_work! {
    impl HasWork<Self> for Worker { self.work }
}

impl Worker {
    fn new(bar: Arc<DevresRegs>) -> Result<Arc<Self>> {
        Arc::pin_init(
            pin_init!(Worker {
                bar,
                accesses: Atomic::new(0),
                stopped: SetOnce::new(),
                done <- Completion::new(),
                work <- new_work!("pci_rig::Worker"),
            }),
            GFP_KERNEL,
        )
    }
}

impl WorkItem for Worker {
    type Pointer = Arc<Worker>;

    fn run(this: Arc<Worker>) {
        let why = loop {
            // The read under the guard, the sleep after it.
            match this.bar.try_access_with(|io| io.read32(reg::MAGIC)) {
                Some(magic) => {
                    // The first read is reported: scenarios wait for it before they end the
                    // binding, as for the 6.12 driver.
                    if this.accesses.fetch_add(1, Relaxed) == 0 {
                        dev_info!(
                            this.bar.device(),
                            "event worker_reading magic={:#x} accesses=1\n",
                            magic
                        );
                    }
                    if magic == u32::MAX {
                        break Stop::Gone;
                    }
                }
                None => break Stop::Refused,
            }
            fsleep(Delta::from_millis(1));
        };
        dev_info!(
            this.bar.device(),
            "event worker_gave_up reason={:?} accesses={}\n",
            why,
            this.accesses.load(Relaxed)
        );
        this.stopped.populate(why);
        this.done.complete_all();
    }
}

/// What ends a binding after BAR0's revocation: registered with devres before BAR0 is mapped,
/// so released after it (devres releases latest first), at unbind and after a failed probe. It
/// joins the worker (its access is refused from then on), so that nothing of the driver touches
/// the device once the unbind is over, then proves that a handle kept across the unbind is
/// refused.
#[derive(Default)]
struct Epilogue {
    worker: SetOnce<Arc<Worker>>,
    kept: SetOnce<Arc<DevresRegs>>,
}

impl Drop for Epilogue {
    fn drop(&mut self) {
        if let Some(worker) = self.worker.as_ref() {
            worker.done.wait_for_completion();
            if let Some(why) = worker.stopped.as_ref() {
                dev_info!(
                    worker.bar.device(),
                    "event worker_stopped reason={:?} accesses={}\n",
                    why,
                    worker.accesses.load(Relaxed)
                );
            }
        }
        if let Some(bar) = self.kept.as_ref() {
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

/// Per-device data. Dropped after [`pci::Driver::unbind`], before devres releases: the
/// interrupt first (it uses the BAR), then the shared state.
struct PciRig<'bound> {
    irq: Interrupts<'bound>,
    sh: Arc<Shared<'bound>>,
}

/// The driver; its per-device data is [`PciRig`].
struct PciRigDriver;

impl pci::Driver for PciRigDriver {
    type IdInfo = Expect;
    type Data<'bound> = PciRig<'bound>;
    const ID_TABLE: pci::IdTable<Expect> = &IDS;

    fn probe<'bound>(
        pdev: &'bound pci::Device<Core<'_>>,
        info: Option<&'bound Expect>,
    ) -> impl PinInit<PciRig<'bound>, Error> + 'bound {
        // The table matches by class (see `IDS`): refuse any other device before a word.
        let ours = u32::from(pdev.vendor_id().as_raw()) == VENDOR_ID
            && u32::from(pdev.device_id()) == DEVICE_ID;
        let Some(expect) = info.filter(|_| ours) else {
            return Err(ENODEV);
        };
        dev_info!(pdev, "event probe_begin\n");
        pdev.enable_device_mem()?;
        let master = BusMaster::enable(pdev);
        // MSI where the platform has it, else the INTx pin.
        let types = pci::IrqTypes::default()
            .with(pci::IrqType::Msi)
            .with(pci::IrqType::Intx);
        let vectors = pdev.alloc_irq_vectors(1, 1, types)?;
        let intx = matches!(vectors.irq_type(), pci::IrqType::Intx);
        dev_info!(
            pdev,
            "event irq_mode {}\n",
            if intx { "intx" } else { "msi" }
        );
        let epilogue = Arc::new(Epilogue::default(), GFP_KERNEL)?;
        devres::register(pdev.as_ref(), epilogue.clone(), GFP_KERNEL)?;
        let bar = pdev.iomap_region_sized::<BAR0_SIZE>(0, c"pci_rig")?;
        let bar = Arc::new(bar.into_devres()?, GFP_KERNEL)?;
        let sh = Shared::new(pdev, bar.clone(), master, intx)?;
        // The device is bound while probe runs: direct access, no RCU guard.
        let io = bar.access(pdev.as_ref())?;
        sh.identify(io, expect)?;
        // Start quiet: nothing latched or counted by an earlier binding.
        wr!(sh, io, RESET_KEY, reg::RESET);
        let flags = if intx {
            irq::Flags::SHARED
        } else {
            irq::Flags::TRIGGER_NONE
        };
        let irq = Interrupts::request(vectors, flags, sh.clone())?;
        wr!(sh, io, INT_DONE | INT_ERROR | INT_SOFT, reg::INT_ENABLE);
        sh.selftest(io)?;
        let buf = sh.dma_selftest(pdev, io)?;
        // All-ones is a device that is gone, not one offering everything.
        let caps = rd!(sh, io, reg::CAPS);
        let streaming = caps != u32::MAX && caps & CAP_STREAM != 0;
        epilogue.kept.populate(bar.clone());
        let worker = Worker::new(bar.clone())?;
        // A long-running item: the long queue keeps it off the shared per-CPU workers. Joined
        // from the moment it runs: nothing between the two can fail.
        workqueue::system_long()
            .enqueue(worker.clone())
            .map_err(|_| EBUSY)?;
        epilogue.worker.populate(worker);
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
            sh.stream_next(io);
        }
        Ok(PciRig { irq, sh })
    }

    /// The worker is not told: the binding ends after this returns, which first frees the
    /// interrupt (waiting for a running handler), then refuses the worker's access.
    fn unbind<'bound>(pdev: &'bound pci::Device<Core<'_>>, this: Pin<&PciRig<'bound>>) {
        let sh = &this.sh;
        dev_info!(pdev, "event remove_begin\n");
        // The DMA buffer first: once taken, no stream round starts (a running one ends before
        // the lock is ours).
        let dma = sh.dma.lock().take();
        if let Some(d) = dma.as_ref().filter(|d| d.streaming) {
            dev_info!(pdev, "event stream_stopped rounds={} remove\n", d.rounds);
        }
        // Quiesce: a reset drops any pending interrupt and operation, and disables interrupts.
        if let Ok(io) = sh.bar.access(pdev.as_ref()) {
            wr!(sh, io, RESET_KEY, reg::RESET);
        }
        // Bus mastering off, which the original's PCI core did after this and 7.3's does not do
        // at all. A handler still running from before the reset may rewrite COMMAND (INTx
        // masking): wait for it first; a later one finds nothing pending and writes nothing.
        this.irq.synchronize();
        sh.master.clear();
        // Freed only now, when the device can no longer reach it.
        drop(dma);
        dev_info!(pdev, "event remove_done\n");
    }
}

kernel::module_pci_driver! {
    type: PciRigDriver,
    name: "pci_rig",
    authors: ["pci-rig"],
    description: "Driver for pci-rig's emulated PCI device",
    license: "GPL",
}
