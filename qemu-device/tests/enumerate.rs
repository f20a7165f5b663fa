//! An independent look at our config space: virtio-drivers' PCI enumerator, run over a bus
//! whose slot 3 is the model, must see what REGISTERS.md documents.

use qemu_device::model::{Knobs, Model, Region};
use std::cell::RefCell;
use std::rc::Rc;
use virtio_drivers::transport::pci::bus::{
    BarInfo, Command, ConfigurationAccess, DeviceFunction, HeaderType, MemoryBarType, PciRoot,
};

const SLOT: u8 = 3;

/// A one-device bus: every other function reads all-ones, as on real hardware.
struct ModelCam(Rc<RefCell<Model>>);

impl ModelCam {
    fn ours(df: DeviceFunction) -> bool {
        (df.bus, df.device, df.function) == (0, SLOT, 0)
    }
}

impl ConfigurationAccess for ModelCam {
    fn read_word(&self, df: DeviceFunction, offset: u8) -> u32 {
        if !Self::ours(df) {
            return u32::MAX;
        }
        let mut b = [0u8; 4];
        self.0
            .borrow_mut()
            .read(Region::Config, offset.into(), &mut b, 0)
            .unwrap();
        u32::from_le_bytes(b)
    }

    fn write_word(&mut self, df: DeviceFunction, offset: u8, data: u32) {
        if Self::ours(df) {
            self.0
                .borrow_mut()
                .write(Region::Config, offset.into(), &data.to_le_bytes(), 0)
                .unwrap();
        }
    }

    unsafe fn unsafe_clone(&self) -> Self {
        ModelCam(self.0.clone())
    }
}

#[test]
fn enumerator_sees_the_documented_device() {
    let model = Rc::new(RefCell::new(Model::new()));
    let mut root = PciRoot::new(ModelCam(model.clone()));

    let found: Vec<_> = root.enumerate_bus(0).collect();
    assert_eq!(found.len(), 1, "{found:?}");
    let (df, info) = found[0].clone();
    assert_eq!((df.device, df.function), (SLOT, 0));
    assert_eq!((info.vendor_id, info.device_id), (0x7072, 0x0001));
    assert_eq!(
        (info.class, info.subclass, info.prog_if),
        (0xff, 0x00, 0x00)
    );
    assert_eq!(info.revision, 0x01);
    assert_eq!(info.header_type, HeaderType::Standard);

    let bars = root.bars(df).unwrap();
    let mem32 = |size| {
        Some(BarInfo::Memory {
            address_type: MemoryBarType::Width32,
            prefetchable: false,
            address: 0,
            size,
        })
    };
    assert_eq!(bars, [mem32(4096), None, mem32(65536), None, None, None]);

    let caps: Vec<_> = root.capabilities(df).map(|c| (c.offset, c.id)).collect();
    assert_eq!(
        caps,
        [(0x40, 0x05), (0x50, 0x01), (0x60, 0x10)],
        "MSI, power-management and PCI Express capabilities"
    );

    // Program the BARs like firmware and turn decoding on; the values stick.
    root.set_bar_32(df, 0, 0xfe00_0000);
    root.set_bar_32(df, 2, 0xfe01_0000);
    root.set_command(df, Command::MEMORY_SPACE | Command::BUS_MASTER);
    let bars = root.bars(df).unwrap();
    let addr = |i: usize| bars[i].as_ref().unwrap().memory_address_size().unwrap();
    assert_eq!(addr(0), (0xfe00_0000, 4096));
    assert_eq!(addr(2), (0xfe01_0000, 65536));
    let (_, command) = root.get_status_command(df);
    assert_eq!(command, Command::MEMORY_SPACE | Command::BUS_MASTER);
}

#[test]
fn surprise_removal_empties_the_slot() {
    let model = Rc::new(RefCell::new(Model::new()));
    model
        .borrow_mut()
        .set_knobs(Knobs {
            all_ones: true,
            ..Knobs::default()
        })
        .unwrap();
    let root = PciRoot::new(ModelCam(model));
    assert_eq!(root.enumerate_bus(0).count(), 0);
}
