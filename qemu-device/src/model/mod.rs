//! The device model: a pure state machine. No I/O, no threads, no clock: the transport passes
//! the time of each access in, and reads back what the interrupt lines should be.

pub mod bar0;
pub mod config;
mod crc32;
pub mod dma;
pub mod fault;
mod log;

pub use bar0::Registers;
pub use config::ConfigSpace;
pub use crc32::crc32;
pub use dma::{Allowed, DmaSpace, GuestMemory};
pub use fault::{FaultKind, FaultState, Strike};
pub use log::{Access, AccessLog, Class, Counters, Kind, Region};

use serde::{Deserialize, Serialize};

pub const BAR0_SIZE: u64 = regmap::BAR0_SIZE as u64;
pub const BAR2_SIZE: u64 = regmap::BAR2_SIZE as u64;
/// About 50 MB of log; the oldest entries go first (counted in `log_overflow`).
pub const DEFAULT_LOG_CAPACITY: usize = 1 << 20;

/// Fault knobs, set from the host. None of them is touched by any reset.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Knobs {
    /// Surprise removal: every read returns all-ones, writes drop, no interrupts.
    pub all_ones: bool,
    /// Every operation completes with ERROR (code ERR_FORCED).
    pub force_error: bool,
    /// The transport delays each BAR access by this much; the model only reports it.
    pub latency_ns: u64,
    /// Operations stay BUSY until the knob is cleared.
    pub stuck_busy: bool,
    /// Interrupts are latched in INT_STATUS but never reach the line.
    pub drop_irqs: bool,
    /// MAGIC and VERSION read wrong, so a driver's probe must fail.
    pub wrong_id: bool,
    /// MAGIC reads right, VERSION a major this register map is not (2): only a driver that
    /// checks the version refuses the device.
    pub wrong_version: bool,
    /// Every this many microseconds the device sets INT_STATUS's SOFT bit by itself, as a
    /// write of SOFT to INT_RAISE would (not an access: not logged); 0: never.
    pub irq_every_us: u64,
    /// Interrupts ignore INT_ENABLE: any latched source raises one, so a driver's RESET (which
    /// clears INT_ENABLE) no longer silences the device while its binding ends.
    pub irq_ignore_enable: bool,
    /// CAPS reads STREAM: a driver keeps a DMA from the device running while bound.
    pub stream: bool,
    /// A DMA opcode runs this many microseconds after its doorbell, on the device's own clock
    /// (the transport's ticker), or sooner when a write reaches the device meanwhile: the
    /// engine finishes the DMA before it takes the write. 0: at the doorbell, synchronously.
    #[serde(default)]
    pub dma_delay_us: u64,
    /// PMCSR's No_Soft_Reset bit: the function keeps its registers from D3hot to D0. Off (the
    /// default), a D3hot to D0 transition resets it as DEVICE_RESET does.
    pub no_soft_reset: bool,
}

/// The largest `latency_ns` the device accepts: 100 ms per access. Larger values are refused,
/// so that a typo cannot stall every guest access for hours.
pub const MAX_LATENCY_NS: u64 = 100_000_000;

/// The shortest `irq_every_us` the device accepts: a software interrupt every 100 µs.
pub const MIN_IRQ_EVERY_US: u64 = 100;

/// The longest `dma_delay_us` the device accepts: five seconds, longer than a driver waits for
/// an interrupt (about one), so that a DMA can time out and still be in flight afterwards.
pub const MAX_DMA_DELAY_US: u64 = 5_000_000;

impl Knobs {
    /// Whether the device can take these knobs; the reason when not.
    pub fn check(&self) -> Result<(), String> {
        if self.dma_delay_us > MAX_DMA_DELAY_US {
            return Err(format!(
                "dma_delay_us {} is above the limit of {MAX_DMA_DELAY_US}",
                self.dma_delay_us
            ));
        }
        if self.irq_every_us != 0 && self.irq_every_us < MIN_IRQ_EVERY_US {
            return Err(format!(
                "irq_every_us {} is below the limit of {MIN_IRQ_EVERY_US} (0 turns it off)",
                self.irq_every_us
            ));
        }
        if self.latency_ns > MAX_LATENCY_NS {
            return Err(format!(
                "latency_ns {} is above the limit of {MAX_LATENCY_NS} (100 ms per access)",
                self.latency_ns
            ));
        }
        Ok(())
    }
}

/// Why an access was refused. The model has logged and counted it already.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AccessError {
    OutOfRange,
}

impl std::fmt::Display for AccessError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("access past the end of the region")
    }
}

impl std::error::Error for AccessError {}

/// A snapshot for the control socket's `state` command.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct State {
    pub registers: Registers,
    pub command: u16,
    pub intx_line: bool,
    pub msi_enabled: bool,
    pub knobs: Knobs,
    pub next_seq: u64,
}

#[derive(Clone)]
pub struct Model {
    config: ConfigSpace,
    regs: Registers,
    window: Vec<u8>,
    knobs: Knobs,
    /// Whether (INT_STATUS & INT_ENABLE) != 0 after the last update; edges raise interrupts.
    irq_condition: bool,
    /// The interrupt line: set on an undropped rising edge, cleared when the condition falls.
    irq_line: bool,
    /// Undropped rising edges since creation; no reset touches it.
    irq_edges: u64,
    log: AccessLog,
    counters: Counters,
    fault: FaultState,
    dma: DmaSpace,
    /// The time of the access being handled (or the last one): when a DMA ran.
    now_ns: u64,
    /// What `clear_knobs` goes back to: the server's start-up knobs (its `--dma-delay-us`).
    default_knobs: Knobs,
    /// A `hang` fault struck: the function answers nothing on its BARs until a reset.
    hung: bool,
}

impl Default for Model {
    fn default() -> Self {
        Self::new()
    }
}

impl Model {
    pub fn new() -> Self {
        Self::with_log_capacity(DEFAULT_LOG_CAPACITY)
    }

    pub fn with_log_capacity(capacity: usize) -> Self {
        Self {
            config: ConfigSpace::new(),
            regs: Registers::default(),
            window: vec![0; BAR2_SIZE as usize],
            knobs: Knobs::default(),
            irq_condition: false,
            irq_line: false,
            irq_edges: 0,
            log: AccessLog::new(capacity),
            counters: Counters::default(),
            fault: FaultState::default(),
            dma: DmaSpace::default(),
            now_ns: 0,
            default_knobs: Knobs::default(),
            hung: false,
        }
    }

    /// Reads `data.len()` bytes of `region` at `offset`, at time `now_ns`.
    pub fn read(
        &mut self,
        region: Region,
        offset: u64,
        data: &mut [u8],
        now_ns: u64,
    ) -> Result<(), AccessError> {
        self.now_ns = now_ns;
        data.fill(0);
        let fault = self.strike(region, offset, data.len(), Kind::Read);
        let class = if !in_range(region, offset, data.len()) {
            Class::OutOfRange
        } else if self.knobs.all_ones {
            data.fill(0xff);
            Class::Removed
        } else if self.hung && region != Region::Config {
            data.fill(0xff);
            Class::Hung
        } else {
            let class = match region {
                Region::Config => {
                    let line = self.irq_line;
                    self.config.read(offset as usize, data, line);
                    Class::Ok
                }
                Region::Bar0 => self.bar0_read(offset, data),
                Region::Bar2 => {
                    let o = offset as usize;
                    data.copy_from_slice(&self.window[o..o + data.len()]);
                    Class::Ok
                }
            };
            if fault == Some(FaultKind::Error) {
                data.iter_mut().for_each(|b| *b = !*b);
                Class::Corrupted
            } else {
                class
            }
        };
        self.record(now_ns, region, offset, data, Kind::Read, class, fault)
    }

    /// Writes `data` to `region` at `offset`, at time `now_ns`.
    pub fn write(
        &mut self,
        region: Region,
        offset: u64,
        data: &[u8],
        now_ns: u64,
    ) -> Result<(), AccessError> {
        self.now_ns = now_ns;
        // The DMA engine finishes a delayed DMA before it takes a write.
        if self.dma_due_ns().is_some() && !self.knobs.stuck_busy && !self.silent() {
            self.regs.waited = true;
            self.complete_op();
            self.regs.waited = false;
        }
        let fault = self.strike(region, offset, data.len(), Kind::Write);
        let class = if !in_range(region, offset, data.len()) {
            Class::OutOfRange
        } else if fault == Some(FaultKind::Error) {
            Class::Corrupted
        } else if self.knobs.all_ones {
            Class::Removed
        } else if self.hung && region != Region::Config {
            Class::Hung
        } else {
            match region {
                Region::Config => {
                    let before = self.config.power_state();
                    let flr = self.config.write(offset as usize, data);
                    self.power_transition(before, now_ns);
                    if flr {
                        self.device_reset(now_ns);
                    }
                    Class::Ok
                }
                Region::Bar0 => self.bar0_write(offset, data),
                Region::Bar2 => {
                    let o = offset as usize;
                    self.window[o..o + data.len()].copy_from_slice(data);
                    Class::Ok
                }
            }
        };
        self.record(now_ns, region, offset, data, Kind::Write, class, fault)
    }

    fn bar0_read(&mut self, offset: u64, data: &mut [u8]) -> Class {
        let size = data.len();
        match size {
            1 | 2 | 4 | 8 if !offset.is_multiple_of(size as u64) => Class::Unaligned,
            4 => match self.reg_read(offset) {
                Some(v) => {
                    data.copy_from_slice(&v.to_le_bytes());
                    Class::Ok
                }
                None => Class::Undefined,
            },
            8 => {
                let lo = self.reg_read(offset).unwrap_or(0);
                let hi = self.reg_read(offset + 4).unwrap_or(0);
                data[..4].copy_from_slice(&lo.to_le_bytes());
                data[4..].copy_from_slice(&hi.to_le_bytes());
                Class::Wide
            }
            1 | 2 => {
                let word = self.reg_read(offset & !3).unwrap_or(0).to_le_bytes();
                let at = (offset & 3) as usize;
                data.copy_from_slice(&word[at..at + size]);
                Class::Narrow
            }
            _ => Class::BadSize,
        }
    }

    fn bar0_write(&mut self, offset: u64, data: &[u8]) -> Class {
        let size = data.len();
        match size {
            1 | 2 | 4 | 8 if !offset.is_multiple_of(size as u64) => Class::Unaligned,
            4 => match self.reg_write(offset, le32(data)) {
                bar0::WriteOutcome::Done => Class::Ok,
                bar0::WriteOutcome::ReadOnly => Class::ReadOnly,
                bar0::WriteOutcome::Undefined => Class::Undefined,
            },
            8 => {
                self.reg_write(offset, le32(&data[..4]));
                self.reg_write(offset + 4, le32(&data[4..]));
                Class::Wide
            }
            1 | 2 => Class::Narrow,
            _ => Class::BadSize,
        }
    }

    /// Counts a BAR access inside its region for the armed fault; the kind, if it strikes this
    /// one. A vanishing device is gone from this very access on.
    fn strike(&mut self, region: Region, offset: u64, len: usize, kind: Kind) -> Option<FaultKind> {
        if region == Region::Config || !in_range(region, offset, len) {
            return None;
        }
        let kind = self.fault.count(self.log.next_seq(), kind == Kind::Write)?;
        match kind {
            FaultKind::Vanish => self.knobs.all_ones = true,
            FaultKind::Hang => {
                // A hung function knows: it records an internal error in its AER capability.
                self.hung = true;
                self.config.uncorrectable(config::AER_UNCOR_INTERNAL);
            }
            _ => {}
        }
        self.update_irq();
        Some(kind)
    }

    #[allow(clippy::too_many_arguments)]
    fn record(
        &mut self,
        time_ns: u64,
        region: Region,
        offset: u64,
        data: &[u8],
        kind: Kind,
        class: Class,
        fault: Option<FaultKind>,
    ) -> Result<(), AccessError> {
        self.counters.count(region, kind, class);
        let value = (data.len() <= 8).then(|| {
            let mut b = [0u8; 8];
            b[..data.len()].copy_from_slice(data);
            u64::from_le_bytes(b)
        });
        let overflow = self.log.push(Access {
            seq: 0,
            time_ns,
            region,
            offset,
            size: data.len().try_into().unwrap_or(u32::MAX),
            value,
            kind,
            class,
            fault,
        });
        self.counters.log_overflow += u64::from(overflow);
        match class {
            Class::OutOfRange => Err(AccessError::OutOfRange),
            _ => Ok(()),
        }
    }

    /// The device raises SOFT by itself (the `irq_every_us` knob's tick): INT_STATUS latches
    /// it and, if enabled, a rising edge interrupts, exactly as after a write to INT_RAISE.
    pub fn raise_soft(&mut self) {
        self.regs.int_status |= bar0::INT_SOFT;
        self.update_irq();
    }

    /// Recomputes the interrupt line after any state change.
    fn update_irq(&mut self) {
        let enabled = if self.knobs.irq_ignore_enable {
            bar0::INT_ALL
        } else {
            self.regs.int_enable
        };
        let cond = self.regs.int_status & enabled != 0 && !self.silent();
        if cond && !self.irq_condition {
            if self.knobs.drop_irqs {
                self.counters.irqs_dropped += 1;
            } else {
                self.counters.irqs_raised += 1;
                self.regs.irq_count = self.regs.irq_count.wrapping_add(1);
                self.irq_edges += 1;
                self.irq_line = true;
            }
        }
        if !cond {
            self.irq_line = false;
        }
        self.irq_condition = cond;
    }

    /// Gone (`all_ones`) or hung: no interrupt, no DMA.
    fn silent(&self) -> bool {
        self.knobs.all_ones || self.hung
    }

    /// RESET register: BAR0 registers and the BAR2 window back to power-on; config space,
    /// knobs, log and counters stay.
    fn soft_reset(&mut self) {
        self.regs = Registers::default();
        self.window.fill(0);
        self.irq_condition = false;
        self.irq_line = false;
        self.counters.resets += 1;
    }

    /// A config write moved PMCSR's power state from `before`: logged; from D3hot to D0
    /// without No_Soft_Reset, the function comes back reset (registers, window and config
    /// space at their power-on values, as DEVICE_RESET leaves them, but logged as a power-up).
    fn power_transition(&mut self, before: u8, now_ns: u64) {
        let after = self.config.power_state();
        if after == before {
            return;
        }
        let lost = before == 3 && after == 0 && !self.knobs.no_soft_reset;
        if lost {
            self.soft_reset();
            self.config = self.config.reset();
            self.config.set_no_soft_reset(false);
        }
        // The access being handled is the next one logged.
        let seq = self.log.next_seq();
        self.dma.power(seq, now_ns, before, after, lost);
    }

    /// vfio-user DEVICE_RESET (a bus reset QEMU passes on), or the guest's function-level reset
    /// (Device Control's FLR bit), at time `now_ns`: also config space but for AER's sticky
    /// registers; logged.
    pub fn device_reset(&mut self, now_ns: u64) {
        // The one thing that brings a hung function back (besides the host's `clear_fault`).
        self.hung = false;
        self.soft_reset();
        self.config = self.config.reset();
        self.config.set_no_soft_reset(self.knobs.no_soft_reset);
        let seq = self.log.next_seq();
        self.dma.reset(seq, now_ns);
    }

    /// Arms one fault at the `at`-th BAR access (or write, with `writes`) from now (1: the next
    /// one), replacing any armed one and forgetting the last strike.
    pub fn arm_fault(&mut self, kind: FaultKind, at: u64, writes: bool) -> Result<(), String> {
        if at == 0 {
            return Err("a fault strikes at access 1 or later (`at` counts from 1)".into());
        }
        self.fault = FaultState {
            armed: Some((kind, at)),
            writes,
            ..FaultState::default()
        };
        Ok(())
    }

    pub fn fault(&self) -> &FaultState {
        &self.fault
    }

    /// Disarms the fault and undoes what a strike left: a vanished or hung device answers
    /// again.
    pub fn clear_fault(&mut self) {
        if matches!(self.fault.struck, Some(s) if s.kind == FaultKind::Vanish) {
            self.knobs.all_ones = false;
        }
        self.hung = false;
        self.update_irq();
        self.fault = FaultState::default();
    }

    pub fn knobs(&self) -> &Knobs {
        &self.knobs
    }

    /// Replaces the knobs, unless `Knobs::check` refuses them (then nothing changes).
    /// Clearing stuck-busy completes the operation in flight.
    /// Sets the knobs and makes them the ones `clear_knobs` goes back to.
    pub fn set_default_knobs(&mut self, knobs: Knobs) -> Result<(), String> {
        self.set_knobs(knobs.clone())?;
        self.default_knobs = knobs;
        Ok(())
    }

    pub fn default_knobs(&self) -> &Knobs {
        &self.default_knobs
    }

    /// The device's own clock: runs a delayed DMA whose time has come (`dma_delay_us`).
    /// Returns whether anything changed (the transport then signals interrupts).
    pub fn tick(&mut self, now_ns: u64) -> bool {
        match self.regs.pending.as_ref().and_then(|op| op.due_ns) {
            // A device that is gone or hung moves nothing.
            Some(due) if now_ns >= due && !self.knobs.stuck_busy && !self.silent() => {
                self.now_ns = now_ns;
                self.complete_op();
                true
            }
            _ => false,
        }
    }

    /// When the delayed DMA in flight is due, if one is.
    pub fn dma_due_ns(&self) -> Option<u64> {
        self.regs.pending.as_ref().and_then(|op| op.due_ns)
    }

    pub fn set_knobs(&mut self, knobs: Knobs) -> Result<(), String> {
        knobs.check()?;
        self.config.set_no_soft_reset(knobs.no_soft_reset);
        self.knobs = knobs;
        // Clearing stuck_busy completes the operation in flight; a delayed DMA keeps its time.
        let delayed = self.dma_due_ns().is_some();
        if !self.knobs.stuck_busy && !delayed {
            self.complete_op();
        }
        self.update_irq();
        Ok(())
    }

    /// The INTx pin: the interrupt line unless the command register disables INTx.
    pub fn intx_asserted(&self) -> bool {
        self.irq_line && self.config.command() & config::CMD_INTX_DISABLE == 0
    }

    /// Counts undropped interrupts since creation; an MSI transport sends a message whenever
    /// it grows.
    pub fn irq_edges(&self) -> u64 {
        self.irq_edges
    }

    pub fn msi_enabled(&self) -> bool {
        self.config.msi_control() & config::MSI_ENABLE != 0
    }

    /// Config space as the device holds it.
    pub fn config(&self) -> &ConfigSpace {
        &self.config
    }

    pub fn registers(&self) -> &Registers {
        &self.regs
    }

    pub fn window(&self) -> &[u8] {
        &self.window
    }

    /// QEMU mapped guest memory for the device (vfio-user DMA_MAP).
    pub fn dma_map(
        &mut self,
        iova: u64,
        size: u64,
        memory: Option<std::sync::Arc<dyn GuestMemory>>,
        allowed: Allowed,
    ) {
        let seq = self.log.next_seq();
        self.dma.map(seq, iova, size, memory, allowed);
    }

    /// QEMU unmapped guest memory (vfio-user DMA_UNMAP).
    pub fn dma_unmap(&mut self, iova: u64, size: u64) {
        let seq = self.log.next_seq();
        self.dma.unmap(seq, iova, size);
    }

    /// The DMA engine's windows and log.
    pub fn dma(&self) -> &DmaSpace {
        &self.dma
    }

    pub fn log(&self) -> &AccessLog {
        &self.log
    }

    pub fn clear_log(&mut self) {
        self.log.clear();
    }

    pub fn counters(&self) -> &Counters {
        &self.counters
    }

    pub fn reset_counters(&mut self) {
        self.counters = Counters::default();
    }

    pub fn state(&self) -> State {
        State {
            registers: self.regs.clone(),
            command: self.config.command(),
            intx_line: self.intx_asserted(),
            msi_enabled: self.msi_enabled(),
            knobs: self.knobs.clone(),
            next_seq: self.log.next_seq(),
        }
    }
}

fn region_size(region: Region) -> u64 {
    match region {
        Region::Config => config::CONFIG_SIZE as u64,
        Region::Bar0 => BAR0_SIZE,
        Region::Bar2 => BAR2_SIZE,
    }
}

fn in_range(region: Region, offset: u64, len: usize) -> bool {
    offset
        .checked_add(len as u64)
        .is_some_and(|end| end <= region_size(region))
}

fn le32(b: &[u8]) -> u32 {
    u32::from_le_bytes([b[0], b[1], b[2], b[3]])
}

#[cfg(test)]
mod tests;
