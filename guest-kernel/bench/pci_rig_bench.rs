// SPDX-License-Identifier: GPL-2.0

//! MMIO cost, seen from the guest: a register read on our device (every access trapped and
//! forwarded to the vfio-user server) against the same read on QEMU's in-process `pci-testdev`,
//! in the same boot, plus our BAR2 window's read throughput. Figures only: it judges nothing.
//!
//! Prints, per device, `bench <name> reads=N median_ns=M min_ns=L` (each sample times a batch
//! of reads, so the clock's own cost is spread), and for our device
//! `bench window bytes=B ns=T kib_per_s=R`.

#![forbid(unsafe_code)]

use kernel::{c_str, dev_info, devres::Devres, pci, prelude::*, time::Ktime};

const BAR_SIZE: usize = 0x1000;
const SAMPLES: usize = 101;
const BATCH: usize = 16;
/// Our device's BAR2 window.
const WINDOW: usize = 0x1_0000;

/// Which device an id-table entry is, and the register to read on it.
struct Target {
    name: &'static str,
    /// A register whose read has no side effect (our SCRATCH; testdev's first word).
    register: usize,
    has_window: bool,
}

kernel::pci_device_table!(
    IDS,
    Target,
    [
        (
            pci::DeviceId::from_id(0x7072, 0x0001),
            Target { name: "pci-rig", register: 0x8, has_window: true }
        ),
        (
            pci::DeviceId::from_id(0x1b36, 0x0005),
            Target { name: "pci-testdev", register: 0x0, has_window: false }
        ),
    ]
);

struct Bench;

/// Nanoseconds per read, median and minimum over `SAMPLES` batches.
fn time_reads(io: &pci::Bar<BAR_SIZE>, register: usize) -> Result<(i64, i64)> {
    let mut per_read = KVec::with_capacity(SAMPLES, GFP_KERNEL)?;
    for _ in 0..SAMPLES {
        let start = Ktime::ktime_get();
        for _ in 0..BATCH {
            io.try_readl(register)?;
        }
        per_read.push((Ktime::ktime_get() - start).to_ns() / BATCH as i64, GFP_KERNEL)?;
    }
    per_read.sort_unstable();
    Ok((per_read[SAMPLES / 2], per_read[0]))
}

impl pci::Driver for Bench {
    type IdInfo = Target;
    const ID_TABLE: pci::IdTable<Target> = IDS;
    type Data = ();

    fn probe(pdev: &pci::Device, target: &Target) -> Result {
        pdev.enable_device_mem()?;
        let bar0: Devres<pci::Bar<BAR_SIZE>> =
            pdev.iomap_region_sized::<BAR_SIZE>(0, c_str!("pci_rig_bench"))?;
        let io = bar0.try_access().ok_or(ENXIO)?;
        let (median, min) = time_reads(&io, target.register)?;
        dev_info!(
            pdev,
            "bench {} reads={} median_ns={} min_ns={}\n",
            target.name,
            SAMPLES * BATCH,
            median,
            min
        );
        if target.has_window {
            let bar2: Devres<pci::Bar<WINDOW>> =
                pdev.iomap_region_sized::<WINDOW>(2, c_str!("pci_rig_bench"))?;
            let window = bar2.try_access().ok_or(ENXIO)?;
            let start = Ktime::ktime_get();
            for offset in (0..WINDOW).step_by(4) {
                window.try_readl(offset)?;
            }
            let ns = (Ktime::ktime_get() - start).to_ns().max(1);
            dev_info!(
                pdev,
                "bench window bytes={} ns={} kib_per_s={}\n",
                WINDOW,
                ns,
                WINDOW as i64 * 1_000_000_000 / 1024 / ns
            );
        }
        Ok(())
    }
}

kernel::module_pci_driver! {
    type: Bench,
    name: "pci_rig_bench",
    author: "pci-rig",
    description: "MMIO round-trip figures for pci-rig's device against pci-testdev",
    license: "GPL",
}
