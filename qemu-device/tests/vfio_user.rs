//! The transport end to end over a real vfio-user socket, with the vfio_user crate's client
//! standing in for QEMU (including its INTx automask/unmask dance).

use qemu_device::control::lock;
use qemu_device::model::{bar0::*, Kind, Model, Region};
use qemu_device::transport::{self, Device};
use std::fs::File;
use std::io::Read;
use std::os::fd::{AsRawFd, FromRawFd};
use std::sync::{Arc, Mutex};
use vfio_bindings::bindings::vfio::*;
use vfio_user::Client;

fn eventfd() -> File {
    // SAFETY: eventfd returns a new descriptor we own, or -1 (checked).
    let fd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
    assert!(fd >= 0);
    // SAFETY: fd is a fresh, owned descriptor.
    unsafe { File::from_raw_fd(fd) }
}

/// How many signals the eventfd collected since the last look (0 if none).
fn take(fd: &File) -> u64 {
    let mut b = [0u8; 8];
    match (&*fd).read(&mut b) {
        Ok(8) => u64::from_ne_bytes(b),
        _ => 0,
    }
}

struct Rig {
    client: Client,
    device: Arc<Mutex<Device>>,
    _dir: TempDir,
}

struct TempDir(std::path::PathBuf);
impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn rig(name: &str) -> Rig {
    let dir = std::env::temp_dir().join(format!("qd-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let sock = dir.join("vfio-user.sock");
    let server = transport::bind(&sock).unwrap();
    let device = Arc::new(Mutex::new(Device::new(Model::new())));
    let d = device.clone();
    std::thread::spawn(move || transport::run(&server, d));
    Rig {
        client: Client::new(&sock).unwrap(),
        device,
        _dir: TempDir(dir),
    }
}

impl Rig {
    fn r32(&mut self, region: u32, off: u64) -> u32 {
        let mut b = [0u8; 4];
        self.client.region_read(region, off, &mut b).unwrap();
        u32::from_le_bytes(b)
    }

    fn w32(&mut self, region: u32, off: u64, v: u32) {
        self.client
            .region_write(region, off, &v.to_le_bytes())
            .unwrap();
    }

    fn bar0(&mut self, off: u64) -> u32 {
        self.r32(VFIO_PCI_BAR0_REGION_INDEX, off)
    }

    fn set_bar0(&mut self, off: u64, v: u32) {
        self.w32(VFIO_PCI_BAR0_REGION_INDEX, off, v)
    }

    fn set_irq_fd(&mut self, index: u32, fd: &File) {
        let flags = VFIO_IRQ_SET_DATA_EVENTFD | VFIO_IRQ_SET_ACTION_TRIGGER;
        self.client
            .set_irqs(index, flags, 0, 1, &[fd.as_raw_fd()])
            .unwrap();
    }

    fn unmask_intx(&mut self) {
        let flags = VFIO_IRQ_SET_DATA_NONE | VFIO_IRQ_SET_ACTION_UNMASK;
        self.client
            .set_irqs(VFIO_PCI_INTX_IRQ_INDEX, flags, 0, 1, &[])
            .unwrap();
    }
}

#[test]
fn regions_as_qemu_sees_them() {
    let mut r = rig("regions");
    let sizes: Vec<u64> = (0..VFIO_PCI_NUM_REGIONS)
        .map(|i| r.client.region(i).map_or(0, |reg| reg.size))
        .collect();
    assert_eq!(sizes, [4096, 0, 65536, 0, 0, 0, 0, 4096, 0]);
    // (Client::resettable() is inverted in vfio_user 0.1.7, so it is not asserted here.)
    assert_eq!(r.r32(VFIO_PCI_CONFIG_REGION_INDEX, 0), 0x0001_7072);
    let mut all = [0u8; 256];
    r.client
        .region_read(VFIO_PCI_CONFIG_REGION_INDEX, 0, &mut all)
        .unwrap();
    assert_eq!(all[0x0b], 0xff, "class");
    let msi = r.client.get_irq_info(VFIO_PCI_MSI_IRQ_INDEX).unwrap();
    assert_eq!(msi.count, 1);
}

#[test]
fn registers_and_operation_over_the_socket() {
    let mut r = rig("regs");
    assert_eq!(r.bar0(MAGIC), MAGIC_VALUE);
    r.set_bar0(SCRATCH, 0xfeed_f00d);
    assert_eq!(r.bar0(SCRATCH), 0xfeed_f00d);
    assert_eq!([r.bar0(COUNTER), r.bar0(COUNTER)], [0, 1]);
    r.client
        .region_write(VFIO_PCI_BAR2_REGION_INDEX, 0x40, b"123456789")
        .unwrap();
    r.set_bar0(OP_OFFSET, 0x40);
    r.set_bar0(OP_LENGTH, 9);
    r.set_bar0(CMD, OP_CRC32);
    assert_eq!(r.bar0(STATUS), STATUS_DONE);
    assert_eq!(r.bar0(RESULT), 0xcbf4_3926);
    // Odd accesses answer like any other.
    let mut b = [0u8; 2];
    r.client
        .region_read(VFIO_PCI_BAR0_REGION_INDEX, 0x7, &mut b)
        .unwrap();
    r.client
        .region_write(VFIO_PCI_BAR0_REGION_INDEX, 0xffc, &[1, 2, 3])
        .unwrap();
    assert_eq!(r.bar0(SCRATCH), 0xfeed_f00d);

    let d = lock(&r.device);
    let bar0: Vec<_> = d
        .model
        .log()
        .since(0)
        .filter(|a| a.region == Region::Bar0)
        .map(|a| (a.kind, a.offset, a.value))
        .collect();
    assert_eq!(bar0[0], (Kind::Read, MAGIC, Some(u64::from(MAGIC_VALUE))));
    assert_eq!(bar0[1], (Kind::Write, SCRATCH, Some(0xfeed_f00d)));
    assert_eq!(bar0.len(), 13);
    let c = d.model.counters();
    assert_eq!((c.unaligned, c.bad_size), (1, 1));
    assert!(d
        .model
        .log()
        .since(0)
        .zip(d.model.log().since(1))
        .all(|(a, b)| a.time_ns <= b.time_ns && a.seq + 1 == b.seq));
}

#[test]
fn intx_is_level_triggered_through_automask() {
    let mut r = rig("intx");
    let fd = eventfd();
    r.set_irq_fd(VFIO_PCI_INTX_IRQ_INDEX, &fd);
    r.set_bar0(INT_ENABLE, INT_ALL);
    assert_eq!(take(&fd), 0);
    r.set_bar0(INT_RAISE, INT_SOFT);
    assert_eq!(take(&fd), 1, "raise signals");
    assert_eq!(lock(&r.device).irq_mode(), "intx");
    // Still asserted but masked: nothing new until QEMU unmasks, then it fires again.
    r.set_bar0(SCRATCH, 1);
    assert_eq!(take(&fd), 0);
    r.unmask_intx();
    assert_eq!(take(&fd), 1, "still asserted at unmask");
    r.set_bar0(INT_ACK, INT_SOFT);
    r.unmask_intx();
    assert_eq!(take(&fd), 0, "acked: line low");
    // The operation's completion interrupts too.
    r.set_bar0(OP_LENGTH, 4);
    r.set_bar0(CMD, OP_FILL);
    assert_eq!(take(&fd), 1);
}

#[test]
fn msi_sends_one_message_per_edge() {
    let mut r = rig("msi");
    let intx = eventfd();
    let msi = eventfd();
    r.set_irq_fd(VFIO_PCI_INTX_IRQ_INDEX, &intx);
    r.set_irq_fd(VFIO_PCI_MSI_IRQ_INDEX, &msi);
    assert_eq!(lock(&r.device).irq_mode(), "msi");
    r.set_bar0(INT_ENABLE, INT_ALL);
    for _ in 0..3 {
        r.set_bar0(INT_RAISE, INT_SOFT);
        r.set_bar0(INT_RAISE, INT_SOFT);
        r.set_bar0(INT_ACK, INT_ALL);
    }
    assert_eq!(take(&msi), 3);
    assert_eq!(take(&intx), 0);
    // Tear MSI down: back to INTx.
    let flags = VFIO_IRQ_SET_DATA_NONE | VFIO_IRQ_SET_ACTION_TRIGGER;
    r.client
        .set_irqs(VFIO_PCI_MSI_IRQ_INDEX, flags, 0, 0, &[])
        .unwrap();
    r.set_bar0(INT_RAISE, INT_SOFT);
    assert_eq!((take(&msi), take(&intx)), (0, 1));
}

#[test]
fn knob_change_from_control_delivers_pending_interrupt() {
    let mut r = rig("knob");
    let fd = eventfd();
    r.set_irq_fd(VFIO_PCI_INTX_IRQ_INDEX, &fd);
    r.set_bar0(INT_ENABLE, INT_DONE);
    qemu_device::control::handle_line(
        &mut lock(&r.device).model,
        r#"{"cmd":"set_knobs","stuck_busy":true}"#,
    );
    r.set_bar0(CMD, OP_CRC32);
    assert_eq!(r.bar0(STATUS), STATUS_BUSY);
    assert_eq!(take(&fd), 0);
    {
        use qemu_device::control::Target;
        let mut d = lock(&r.device);
        qemu_device::control::handle_line(d.model(), r#"{"cmd":"clear_knobs"}"#);
        d.changed();
    }
    assert_eq!(take(&fd), 1);
    assert_eq!(r.bar0(STATUS), STATUS_DONE);
}

#[test]
fn device_reset_over_the_socket() {
    let mut r = rig("reset");
    r.set_bar0(SCRATCH, 3);
    r.w32(VFIO_PCI_CONFIG_REGION_INDEX, 0x04, 0x2);
    r.client.reset().unwrap();
    assert_eq!(r.bar0(SCRATCH), 0);
    assert_eq!(r.r32(VFIO_PCI_CONFIG_REGION_INDEX, 0x04) & 0xffff, 0);
}

#[test]
fn latency_knob_delays_bar_accesses() {
    let mut r = rig("latency");
    lock(&r.device)
        .model
        .set_knobs(qemu_device::model::Knobs {
            latency_ns: 20_000_000,
            ..Default::default()
        })
        .unwrap();
    let t = std::time::Instant::now();
    r.bar0(MAGIC);
    assert!(t.elapsed() >= std::time::Duration::from_millis(20));
    let t = std::time::Instant::now();
    r.r32(VFIO_PCI_CONFIG_REGION_INDEX, 0);
    assert!(
        t.elapsed() < std::time::Duration::from_millis(20),
        "config is not delayed"
    );
}
