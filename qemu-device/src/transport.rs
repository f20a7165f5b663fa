//! The vfio-user transport: hands QEMU's region accesses to the model and turns the model's
//! interrupt state into eventfd signals. Everything device-like lives in the model.

use crate::control::{lock, Target};
use crate::model::{FaultKind, GuestMemory, Model, Region, BAR0_SIZE, BAR2_SIZE};
use std::fs::File;
use std::io::{self, Write};
use std::os::fd::AsRawFd;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use vfio_bindings::bindings::vfio::*;
use vfio_user::{DmaMapFlags, DmaUnmapFlags, IrqInfo, Server, ServerBackend, ServerRegion};

/// The model plus what the transport needs to deliver its interrupts.
pub struct Device {
    pub model: Model,
    intx: Option<File>,
    /// VFIO INTx is automasked: after one signal, wait for QEMU's UNMASK (sent at the guest's
    /// next BAR access) before signalling again.
    intx_masked: bool,
    msi: Option<File>,
    /// The model's edge count the last MSI was sent for.
    msi_sent: u64,
    /// Held only so QEMU's error/request notifiers have a live eventfd; never signalled.
    _err: Option<File>,
    _req: Option<File>,
}

impl Device {
    pub fn new(model: Model) -> Self {
        Self {
            model,
            intx: None,
            intx_masked: false,
            msi: None,
            msi_sent: 0,
            _err: None,
            _req: None,
        }
    }

    /// Signals QEMU if the model's interrupt state calls for it. Runs after every change.
    pub fn sync_irqs(&mut self) {
        let edges = self.model.irq_edges();
        if let Some(fd) = &self.msi {
            if edges != self.msi_sent {
                signal(fd);
            }
        } else if let Some(fd) = &self.intx {
            if !self.intx_masked && self.model.intx_asserted() {
                signal(fd);
                self.intx_masked = true;
            }
        }
        // Edges seen while MSI was off are INTx's business, not a late MSI.
        self.msi_sent = edges;
    }

    /// Which interrupt mode QEMU set up, for logs and the control socket.
    pub fn irq_mode(&self) -> &'static str {
        match (&self.msi, &self.intx) {
            (Some(_), _) => "msi",
            (None, Some(_)) => "intx",
            _ => "none",
        }
    }

    fn set_irqs(&mut self, index: u32, flags: u32, start: u32, count: u32, fds: Vec<File>) {
        let action = flags & VFIO_IRQ_SET_ACTION_TYPE_MASK;
        let data = flags & VFIO_IRQ_SET_DATA_TYPE_MASK;
        log::debug!("set_irqs index {index} flags {flags:#x} start {start} count {count}");
        match (index, action) {
            (VFIO_PCI_INTX_IRQ_INDEX, VFIO_IRQ_SET_ACTION_UNMASK) => self.intx_masked = false,
            (VFIO_PCI_INTX_IRQ_INDEX, VFIO_IRQ_SET_ACTION_MASK) => self.intx_masked = true,
            (_, VFIO_IRQ_SET_ACTION_TRIGGER) if data == VFIO_IRQ_SET_DATA_EVENTFD => {
                let fd = fds.into_iter().next();
                match index {
                    VFIO_PCI_INTX_IRQ_INDEX => {
                        self.intx = fd;
                        self.intx_masked = false;
                    }
                    VFIO_PCI_MSI_IRQ_INDEX => self.msi = fd,
                    VFIO_PCI_ERR_IRQ_INDEX => self._err = fd,
                    VFIO_PCI_REQ_IRQ_INDEX => self._req = fd,
                    _ => {}
                }
            }
            // DATA_NONE with count 0 tears the index down; with a count it fires it once.
            (_, VFIO_IRQ_SET_ACTION_TRIGGER) if count == 0 => match index {
                VFIO_PCI_INTX_IRQ_INDEX => self.intx = None,
                VFIO_PCI_MSI_IRQ_INDEX => self.msi = None,
                VFIO_PCI_ERR_IRQ_INDEX => self._err = None,
                VFIO_PCI_REQ_IRQ_INDEX => self._req = None,
                _ => {}
            },
            (_, VFIO_IRQ_SET_ACTION_TRIGGER) => {
                let fd = match index {
                    VFIO_PCI_INTX_IRQ_INDEX => &self.intx,
                    VFIO_PCI_MSI_IRQ_INDEX => &self.msi,
                    _ => &None,
                };
                if let Some(fd) = fd {
                    signal(fd);
                }
            }
            _ => log::warn!("set_irqs: ignoring index {index} flags {flags:#x}"),
        }
        self.sync_irqs();
    }
}

impl Target for Device {
    fn model(&mut self) -> &mut Model {
        &mut self.model
    }

    fn changed(&mut self) {
        self.sync_irqs();
    }
}

/// Runs the `irq_every_us` knob: while it is on, the device raises SOFT by itself once per
/// period (and signals QEMU as after any change); while it is off, it looks again every 10 ms.
pub fn tick_soft_irqs(device: &Mutex<Device>) {
    loop {
        let every = lock(device).model.knobs().irq_every_us;
        std::thread::sleep(Duration::from_micros(if every == 0 {
            10_000
        } else {
            every
        }));
        let mut d = lock(device);
        if d.model.knobs().irq_every_us != 0 {
            d.model.raise_soft();
            d.sync_irqs();
        }
    }
}

/// The device's own clock for delayed DMAs (`dma_delay_us`): sleeps until the one in flight
/// is due (or 2 ms while none is), runs it, and signals QEMU as after any change.
pub fn tick_dma(device: &Mutex<Device>) {
    loop {
        let due = lock(device).model.dma_due_ns();
        let wait_ns = due.map_or(2_000_000, |d| d.saturating_sub(monotonic_ns()).max(50_000));
        std::thread::sleep(Duration::from_nanos(wait_ns));
        let mut d = lock(device);
        if d.model.tick(monotonic_ns()) {
            d.sync_irqs();
        }
    }
}

/// A `die` fault struck: the access is never answered. The process stops as on SIGTERM (the
/// binary's signal thread writes the access log, the struck access in it, and exits).
fn die() -> ! {
    log::warn!("a die fault struck: exiting without answering");
    // SAFETY: kill only sends a signal; getpid cannot fail.
    unsafe { libc::kill(libc::getpid(), libc::SIGTERM) };
    loop {
        std::thread::sleep(Duration::from_secs(3600));
    }
}

fn signal(fd: &File) {
    // An eventfd takes an 8-byte count. It can only fail if the counter would overflow,
    // and then QEMU has a signal pending anyway.
    let _ = (&*fd).write(&1u64.to_ne_bytes());
}

/// CLOCK_MONOTONIC in ns: comparable with other processes' monotonic timestamps.
pub fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime only writes the timespec we pass, which outlives the call.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Guest memory QEMU shared with the device: `size` bytes of its file descriptor at `offset`,
/// mapped shared, so the device's reads and writes are the guest's RAM.
///
/// # Invariants
///
/// `base` points at a live `MAP_SHARED` mapping of `map_len` bytes, `skip + len <= map_len`,
/// unmapped only in `drop`.
#[derive(Debug)]
struct MappedMemory {
    base: *mut u8,
    map_len: usize,
    /// Bytes from `base` to the region's first byte (mmap wants a page-aligned file offset).
    skip: usize,
    len: u64,
}

// SAFETY: The mapping is plain memory owned by this value; nothing about it is thread-bound.
unsafe impl Send for MappedMemory {}
// SAFETY: Reads and writes copy through raw pointers; the guest writes the same memory
// concurrently anyway (it is shared with another process), so no Rust reference to it exists.
unsafe impl Sync for MappedMemory {}

impl MappedMemory {
    fn new(fd: &File, offset: u64, size: u64) -> io::Result<Self> {
        // SAFETY: sysconf has no preconditions.
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) } as u64;
        let aligned = offset - offset % page;
        let skip = (offset - aligned) as usize;
        let map_len = usize::try_from(size)
            .ok()
            .and_then(|s| s.checked_add(skip))
            .ok_or_else(|| io::Error::other(format!("DMA_MAP size {size:#x} too large")))?;
        // SAFETY: A fresh shared mapping of QEMU's file; the kernel picks the address, so no
        // existing memory is replaced. The result is checked below.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                map_len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd.as_raw_fd(),
                aligned as libc::off_t,
            )
        };
        if base == libc::MAP_FAILED {
            let e = io::Error::last_os_error();
            return Err(io::Error::other(format!(
                "DMA_MAP: cannot map {size:#x} bytes of QEMU's memory at offset {offset:#x}: {e}"
            )));
        }
        Ok(Self {
            base: base.cast(),
            map_len,
            skip,
            len: size,
        })
    }
}

impl GuestMemory for MappedMemory {
    fn size(&self) -> u64 {
        self.len
    }

    fn read(&self, offset: u64, buf: &mut [u8]) {
        assert!(
            offset + buf.len() as u64 <= self.len,
            "read past the mapping"
        );
        // SAFETY: In bounds (checked above, and the type invariant); `buf` is ours.
        unsafe {
            std::ptr::copy_nonoverlapping(
                self.base.add(self.skip + offset as usize),
                buf.as_mut_ptr(),
                buf.len(),
            )
        };
    }

    fn write(&self, offset: u64, data: &[u8]) {
        assert!(
            offset + data.len() as u64 <= self.len,
            "write past the mapping"
        );
        // SAFETY: In bounds (checked above, and the type invariant); no reference into the
        // mapping exists.
        unsafe {
            std::ptr::copy_nonoverlapping(
                data.as_ptr(),
                self.base.add(self.skip + offset as usize),
                data.len(),
            )
        };
    }
}

impl Drop for MappedMemory {
    fn drop(&mut self) {
        // SAFETY: The mapping is ours (type invariant) and no copy is running (`&mut self`).
        unsafe { libc::munmap(self.base.cast(), self.map_len) };
    }
}

fn region_of(index: u32) -> io::Result<Region> {
    match index {
        VFIO_PCI_BAR0_REGION_INDEX => Ok(Region::Bar0),
        VFIO_PCI_BAR2_REGION_INDEX => Ok(Region::Bar2),
        VFIO_PCI_CONFIG_REGION_INDEX => Ok(Region::Config),
        _ => Err(io::Error::from(io::ErrorKind::InvalidInput)),
    }
}

/// The crate's backend: the shared device behind a lock the control socket shares too.
pub struct Backend(pub Arc<Mutex<Device>>);

impl Backend {
    fn access(
        &mut self,
        index: u32,
        f: impl FnOnce(&mut Model, Region, u64) -> Result<(), crate::model::AccessError>,
    ) -> io::Result<()> {
        let region = region_of(index)?;
        let (result, latency, dies) = {
            let mut d = lock(&self.0);
            let seq = d.model.log().next_seq();
            let result = f(&mut d.model, region, monotonic_ns());
            d.sync_irqs();
            let latency = match region {
                Region::Config => 0,
                _ => d.model.knobs().latency_ns,
            };
            let dies = matches!(d.model.fault().struck,
                Some(s) if s.kind == FaultKind::Die && s.seq == seq);
            (result, latency, dies)
        };
        if dies {
            die();
        }
        // Sleep without the lock, so the control socket stays responsive.
        if latency > 0 {
            std::thread::sleep(Duration::from_nanos(latency));
        }
        result.map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))
    }
}

impl ServerBackend for Backend {
    fn region_read(&mut self, region: u32, offset: u64, data: &mut [u8]) -> io::Result<()> {
        self.access(region, |m, r, now| m.read(r, offset, data, now))
    }

    fn region_write(&mut self, region: u32, offset: u64, data: &[u8]) -> io::Result<()> {
        self.access(region, |m, r, now| m.write(r, offset, data, now))
    }

    fn dma_map(
        &mut self,
        flags: DmaMapFlags,
        offset: u64,
        address: u64,
        size: u64,
        fd: Option<File>,
    ) -> io::Result<()> {
        let memory = match fd {
            Some(fd) => {
                Some(Arc::new(MappedMemory::new(&fd, offset, size)?) as Arc<dyn GuestMemory>)
            }
            None => {
                log::warn!(
                    "DMA_MAP {address:#x}+{size:#x} without a file descriptor: the device cannot \
                     reach that memory (start QEMU with a shared memory backend: \
                     -object memory-backend-memfd,share=on)"
                );
                None
            }
        };
        let allowed = match (
            flags.contains(DmaMapFlags::READ),
            flags.contains(DmaMapFlags::WRITE),
        ) {
            (true, false) => crate::model::Allowed::Read,
            (false, true) => crate::model::Allowed::Write,
            // Neither: no direction to refuse by; a mapping the device cannot use at all is
            // not a thing QEMU sends.
            _ => crate::model::Allowed::ReadWrite,
        };
        log::debug!("dma_map {address:#x}+{size:#x} offset {offset:#x} {allowed:?}");
        lock(&self.0).model.dma_map(address, size, memory, allowed);
        Ok(())
    }

    fn dma_unmap(&mut self, _flags: DmaUnmapFlags, address: u64, size: u64) -> io::Result<()> {
        log::debug!("dma_unmap {address:#x}+{size:#x}");
        lock(&self.0).model.dma_unmap(address, size);
        Ok(())
    }

    fn reset(&mut self) -> io::Result<()> {
        let mut d = lock(&self.0);
        d.model.device_reset(monotonic_ns());
        d.intx_masked = false;
        d.sync_irqs();
        Ok(())
    }

    fn set_irqs(
        &mut self,
        index: u32,
        flags: u32,
        start: u32,
        count: u32,
        fds: Vec<File>,
    ) -> io::Result<()> {
        lock(&self.0).set_irqs(index, flags, start, count, fds);
        Ok(())
    }
}

fn region(index: u32, size: u64) -> ServerRegion {
    let flags = if size > 0 {
        VFIO_REGION_INFO_FLAG_READ | VFIO_REGION_INFO_FLAG_WRITE
    } else {
        0
    };
    ServerRegion {
        region_info: vfio_region_info {
            argsz: std::mem::size_of::<vfio_region_info>() as u32,
            flags,
            index,
            cap_offset: 0,
            size,
            offset: 0,
        },
        sparse_areas: Vec::new(),
        mmap_fd: None,
    }
}

/// All nine VFIO PCI regions, in index order (the crate looks them up by position).
pub fn regions() -> Vec<ServerRegion> {
    (0..VFIO_PCI_NUM_REGIONS)
        .map(|i| {
            let size = match i {
                VFIO_PCI_BAR0_REGION_INDEX => BAR0_SIZE,
                VFIO_PCI_BAR2_REGION_INDEX => BAR2_SIZE,
                VFIO_PCI_CONFIG_REGION_INDEX => crate::model::config::CONFIG_SIZE as u64,
                _ => 0,
            };
            region(i, size)
        })
        .collect()
}

/// All five VFIO PCI interrupt indices: INTx, one MSI vector, no MSI-X, and error/request
/// notifiers so QEMU can wire its own (we never signal them).
pub fn irqs() -> Vec<IrqInfo> {
    let info = |index, flags, count| IrqInfo {
        index,
        flags,
        count,
    };
    vec![
        info(
            VFIO_PCI_INTX_IRQ_INDEX,
            VFIO_IRQ_INFO_EVENTFD | VFIO_IRQ_INFO_MASKABLE | VFIO_IRQ_INFO_AUTOMASKED,
            1,
        ),
        info(
            VFIO_PCI_MSI_IRQ_INDEX,
            VFIO_IRQ_INFO_EVENTFD | VFIO_IRQ_INFO_NORESIZE,
            1,
        ),
        info(VFIO_PCI_MSIX_IRQ_INDEX, 0, 0),
        info(VFIO_PCI_ERR_IRQ_INDEX, VFIO_IRQ_INFO_EVENTFD, 1),
        info(VFIO_PCI_REQ_IRQ_INDEX, VFIO_IRQ_INFO_EVENTFD, 1),
    ]
}

/// Binds the vfio-user socket (it must not exist yet).
pub fn bind(path: &Path) -> Result<Server, vfio_user::Error> {
    Server::new(path, true, irqs(), regions())
}

/// Serves one client until it disconnects.
pub fn run(server: &Server, device: Arc<Mutex<Device>>) -> Result<(), vfio_user::Error> {
    server.run(&mut Backend(device))
}
