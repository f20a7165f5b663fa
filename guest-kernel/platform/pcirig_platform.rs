// SPDX-License-Identifier: GPL-2.0

//! A tiny platform driver for pci-rig's `platform` scenario, safe code only.
//!
//! It binds the device-tree node the harness adds (compatible `pci-rig,platform-demo`, placed on
//! one of QEMU virt's unused virtio-mmio transports, see `harness/rig/src/guest/dt.rs`), maps the node's
//! memory resource through `platform::Device<Bound>` and checks that the transport answers with
//! the magic value its id-table entry expects. Its lines (`event …`) are what the harness judges.

#![forbid(unsafe_code)]

use kernel::{
    c_str, dev_info, devres::Devres, of, platform, platform::IoMem, prelude::*, sync::Arc,
};

/// The registers the driver reads: virtio-mmio's first four (MagicValue, Version, DeviceID,
/// VendorID). A transport is 0x200 bytes; the driver asks for its first 0x10.
const REGS: usize = 0x10;
const MAGIC: usize = 0x0;
const VERSION: usize = 0x4;
const DEVICE_ID: usize = 0x8;
const VENDOR_ID: usize = 0xc;

/// What an id-table entry tells probe: the magic value the node's registers must hold.
struct Expect {
    magic: u32,
}

kernel::of_device_table!(
    IDS,
    Expect,
    [(
        of::DeviceId::new(c_str!("pci-rig,platform-demo")),
        // "virt", as virtio-mmio's MagicValue register reads.
        Expect { magic: 0x7472_6976 }
    )]
);

struct PcirigPlatform;

impl platform::Driver for PcirigPlatform {
    type IdInfo = Expect;
    const OF_ID_TABLE: of::IdTable<Expect> = IDS;
    type Data = Arc<Devres<IoMem<REGS>>>;

    fn probe(pdev: &platform::Device<platform::Core>, info: &Expect) -> Result<Self::Data> {
        let regs = pdev.ioremap_resource_sized::<REGS>(0, c_str!("pcirig_platform"))?;
        let io = regs.access(pdev.as_ref())?;
        let magic = io.readl(MAGIC);
        if magic != info.magic {
            dev_info!(
                pdev,
                "event probe_refused magic={:#x} expected={:#x}\n",
                magic,
                info.magic
            );
            return Err(ENODEV);
        }
        dev_info!(
            pdev,
            "event probe magic={:#x} version={} device_id={} vendor={:#x} at={:#x}\n",
            magic,
            io.readl(VERSION),
            io.readl(DEVICE_ID),
            io.readl(VENDOR_ID),
            io.start()
        );
        Ok(Arc::new(regs, GFP_KERNEL)?)
    }

    fn remove(pdev: &platform::Device<platform::Core>, regs: &Self::Data) {
        // The binding has not ended yet: the mapping is still there.
        let magic = regs.access(pdev.as_ref()).map_or(0, |io| io.readl(MAGIC));
        dev_info!(pdev, "event remove magic={:#x}\n", magic);
    }
}

kernel::module_platform_driver! {
    type: PcirigPlatform,
    name: "pcirig_platform",
    author: "pci-rig",
    description: "Binds pci-rig's device-tree demo node and reads its registers",
    license: "GPL",
}
