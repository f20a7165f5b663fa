// SPDX-License-Identifier: GPL-2.0
//! Io<SIZE> bounds, checked at build time.
//!
//! Maps a 16-byte window of BAR0 and reads the register at `OFFSET`. The
//! harness builds this twice (scenario `compile-fail`): as is, `OFFSET` is
//! the last 32-bit register and the module builds; with `--cfg past_end` it
//! is one register past the end, and the build must fail with the
//! `build_error` link error instead of producing a module.

#![forbid(unsafe_code)]

use kernel::{c_str, dev_info, devres::Devres, pci, prelude::*};

/// The window this module maps.
const SIZE: usize = 16;

#[cfg(not(past_end))]
const OFFSET: usize = SIZE - 4;
#[cfg(past_end)]
const OFFSET: usize = SIZE;

struct IoBounds;

kernel::pci_device_table!(
    IDS,
    (),
    [(pci::DeviceId::from_id(0x1b36, 0x0005), ())]
);

impl pci::Driver for IoBounds {
    type IdInfo = ();
    const ID_TABLE: pci::IdTable<()> = IDS;
    type Data = KBox<Devres<pci::Bar<SIZE>>>;

    fn probe(pdev: &pci::Device, _info: &()) -> Result<Self::Data> {
        pdev.enable_device_mem()?;
        let bar = pdev.iomap_region_sized::<SIZE>(0, c_str!("io_bounds"))?;
        if let Some(io) = bar.try_access() {
            dev_info!(pdev, "register {:#x} = {:#x}\n", OFFSET, io.readl(OFFSET));
        }
        Ok(KBox::new(bar, GFP_KERNEL)?)
    }
}

kernel::module_pci_driver! {
    type: IoBounds,
    name: "io_bounds",
    license: "GPL",
}
