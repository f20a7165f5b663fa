// SPDX-License-Identifier: GPL-2.0
//! Mistakes the abstractions refuse at build time.
//!
//! The harness builds this module once as is (it must build) and once per mistake, each
//! switched on by a `--cfg` (scenario `compile-fail`); each of those builds must fail, for the
//! reason given:
//!
//! - `past_end`: a constant offset one register past the end of an `Io<16>` (the
//!   `build_error` link error of `Io`'s build-time bounds check);
//! - `iomap_unbound`: mapping a BAR of a device kept beyond probe (an `ARef<pci::Device>`,
//!   whose context is `Normal`: it may no longer be bound), rustc's E0599;
//! - `access_unbound`: `Devres::access` with a device that is not known to be bound, E0308;
//! - `irq_raw`: an interrupt vector made from a raw number, which could be another device's
//!   (only the device's bus hands out `IrqVector`s; the constructor is `unsafe`), E0133;
//! - `opp_outlives_table`: an `Opp` kept after its `Table` was dropped (the OPP core frees the
//!   table's OPPs with it), E0505; arm64 and riscv64, which build the OPP abstractions;
//! - `dma_unbound`: DMA memory allocated for a device kept beyond probe (an
//!   `ARef<pci::Device>`, which may no longer be bound; the memory would outlive the binding),
//!   E0308;
//! - `dma_kept_past_binding`: a worker keeps DMA memory beyond the guard of its `Devres`, which
//!   is all that holds off its release when the binding ends, E0597;
//! - `revoke_in_guard`: `Revocable::revoke` called while a guard of the same revocable is held
//!   (the grace period would wait for this thread's own read-side section, or on a kernel whose
//!   sections do not count, end and leave the guard dangling): `revoke` is `unsafe`, E0133;
//! - `spawn_in_module`: a closure of this module spawned on a system workqueue, which nothing
//!   cancels or waits for, so it could run after the module was unloaded: `try_spawn` is
//!   `unsafe` (its caller vouches that the code stays loaded), E0133;
//! - `config_past_end`: a config space read at offset 0x100 of the conventional 256 bytes
//!   (the `build_error` link error of `ConfigSpace`'s build-time bounds check);
//! - `config_unbound`: config space of a device kept beyond probe (an `ARef<pci::Device>`,
//!   which may no longer be bound), E0599;
//! - `present_unbound`: `is_present` on a device kept beyond probe (an `ARef<pci::Device>`: its
//!   VF's PF reference and its host bridge may be gone once unbound), E0599;
//! - `warns`: an unused variable: a warning fails the build, and fails every rebuild of the
//!   same source (make would find the objects up to date and print nothing).

#![forbid(unsafe_code)]

use kernel::{c_str, dev_info, devres::Devres, pci, prelude::*, types::ARef};

/// The window this module maps.
const SIZE: usize = 16;

#[cfg(not(past_end))]
const OFFSET: usize = SIZE - 4;
#[cfg(past_end)]
const OFFSET: usize = SIZE;

/// A config space offset: the last dword of the conventional 256 bytes, or one past them.
#[cfg(not(config_past_end))]
const CONFIG_OFFSET: usize = 0xfc;
#[cfg(config_past_end)]
const CONFIG_OFFSET: usize = 0x100;

struct CompileFail;

kernel::pci_device_table!(IDS, (), [(pci::DeviceId::from_id(0x1b36, 0x0005), ())]);

/// What a worker would keep: the device, and the mapping.
struct Kept {
    pdev: ARef<pci::Device>,
    bar: Devres<pci::Bar<SIZE>>,
}

impl Kept {
    /// Runs after probe, when the device may have been unbound.
    fn later(&self) -> Result {
        #[cfg(iomap_unbound)]
        let _again = self.pdev.iomap_region(0, c_str!("compile_fail"))?;
        #[cfg(access_unbound)]
        let _ = self.bar.access(self.pdev.as_ref())?;
        #[cfg(dma_unbound)]
        let _dma =
            kernel::dma::CoherentAllocation::<u8>::alloc(self.pdev.as_ref(), 16, GFP_KERNEL)?;
        #[cfg(revoke_in_guard)]
        {
            let r = KBox::pin_init(kernel::revocable::Revocable::new(1u32), GFP_KERNEL)?;
            let guard = r.try_access().ok_or(ENXIO)?;
            r.revoke();
            dev_info!(self.pdev, "still {}\n", *guard);
        }
        #[cfg(spawn_in_module)]
        kernel::workqueue::system().try_spawn(GFP_KERNEL, || pr_info!("after unload?\n"))?;
        #[cfg(config_unbound)]
        let _id = self.pdev.config_space().read16(0);
        #[cfg(present_unbound)]
        let _here = self.pdev.is_present();
        #[cfg(warns)]
        let unused = 0;
        dev_info!(self.pdev, "kept {}\n", self.bar.try_access().is_some());
        Ok(())
    }
}

/// Drops an OPP table while one of its OPPs is still held.
#[cfg(opp_outlives_table)]
fn opp_outlives_table(dev: &kernel::device::Device) -> Result {
    let table = kernel::opp::Table::from_of(dev)?;
    let opp = table.find_freq_ceil(kernel::clk::Hertz(0))?;
    drop(table);
    dev_info!(dev, "lowest {:?}\n", opp.freq());
    Ok(())
}

/// A worker's read of DMA memory, through a reference kept beyond the guard that holds off the
/// memory's release at unbind.
#[cfg(dma_kept_past_binding)]
fn dma_kept_past_binding(dma: &Devres<kernel::dma::CoherentAllocation<u8>>) -> Result<u8> {
    let kept = {
        let guard = dma.try_access().ok_or(ENXIO)?;
        &*guard
    };
    kept.read(0)
}

impl pci::Driver for CompileFail {
    type IdInfo = ();
    const ID_TABLE: pci::IdTable<()> = IDS;
    type Data = KBox<Kept>;

    fn probe(pdev: &pci::Device<pci::Core>, _info: &()) -> Result<Self::Data> {
        pdev.enable_device_mem()?;
        let bar = pdev.iomap_region_sized::<SIZE>(0, c_str!("compile_fail"))?;
        let io = bar.access(pdev.as_ref())?;
        dev_info!(pdev, "register {:#x} = {:#x}\n", OFFSET, io.readl(OFFSET));
        dev_info!(
            pdev,
            "config {:#x} = {:#x}\n",
            CONFIG_OFFSET,
            pdev.config_space().read32(CONFIG_OFFSET)
        );
        let kept = Kept {
            pdev: pdev.into(),
            bar,
        };
        kept.later()?;
        #[cfg(irq_raw)]
        let _vector = kernel::irq::IrqVector::new(pdev.as_ref(), 5);
        #[cfg(opp_outlives_table)]
        opp_outlives_table(pdev.as_ref())?;
        #[cfg(dma_kept_past_binding)]
        dma_kept_past_binding(&kernel::dma::CoherentAllocation::<u8>::alloc(
            pdev.as_ref(),
            16,
            GFP_KERNEL,
        )?)?;
        Ok(KBox::new(kept, GFP_KERNEL)?)
    }
}

kernel::module_pci_driver! {
    type: CompileFail,
    name: "compile_fail",
    license: "GPL",
}
