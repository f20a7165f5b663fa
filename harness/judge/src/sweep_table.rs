//! What each sweep point may end in. Our driver's probe makes a fixed sequence of device
//! accesses (`guest-kernel/driver/pci_rig.rs`: `identify`, probe's reset and interrupt enable,
//! `selftest`, `dma_selftest`, CAPS; the interrupt thread's INT_STATUS read and INT_ACK in
//! their place after each doorbell). The table is that sequence written down once, each access
//! with what the driver does with it (`Role`); from the role and the register map follow the
//! outcomes a point of each fault kind may end in at that access (`Table::allowed`).
//! `judge::sweep` holds every point's outcome against it, having checked that the device's log
//! shows the access the table expects at that place.

use crate::device_log::Kind;
use qemu_device::model::FaultKind;
use regmap::reg;
use std::fmt;
use vocab::sweep::{At, Point};

/// The error a refused probe returns, as the kernel reports it (`probe with driver pci_rig
/// failed with error -N`; nothing for ENODEV).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Errno {
    /// Not our device (MAGIC).
    Enodev,
    /// Our device, another register map (VERSION's major).
    Enotsupp,
    /// A self-test step failed.
    Eio,
}

impl Errno {
    pub fn number(self) -> i64 {
        match self {
            Errno::Enodev => 19,
            Errno::Enotsupp => 524,
            Errno::Eio => 5,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Errno::Enodev => "ENODEV",
            Errno::Enotsupp => "ENOTSUPP",
            Errno::Eio => "EIO",
        }
    }
}

/// An outcome a point may end in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Every step passed and probe returned the binding.
    Bound,
    /// The steps so far passed but `step`, which failed, and probe returned `errno`.
    Refused { step: &'static str, errno: Errno },
    /// A `wN` point: bound, struck while the binding ended.
    Removed,
}

impl fmt::Display for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Outcome::Bound => f.write_str("bound"),
            Outcome::Refused { step, errno } => {
                write!(f, "refused at {step} with {}", errno.name())
            }
            Outcome::Removed => f.write_str("removed"),
        }
    }
}

/// What the driver does with one access, which decides what a fault there must lead to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// `identify`'s reads: any other value refuses the device with this error.
    Identity(Errno),
    /// A read whose value its step compares with what it must be.
    Compared,
    /// The interrupt thread's INT_STATUS read: the waiter takes the interrupt only if the bits
    /// read include the source it waits for.
    Status,
    /// A doorbell (CMD, INT_RAISE): its step waits for the interrupt it raises.
    Doorbell,
    /// The interrupt thread's INT_ACK: a dropped one leaves its source latched, so the next
    /// doorbell raises no interrupt (nothing if none follows).
    Ack,
    /// A SCRATCH pattern: the step exists to see a write the device dropped, so each pattern
    /// must differ from what the register held.
    Pattern,
    /// A parameter this step depends on: a dropped write shows there, unless the register
    /// already held the value written (the device's log says).
    Param(&'static str),
    /// A write the device's operation ignores, or a read no step compares.
    Unused,
    /// Probe's RESET: the device comes to every probe reset already (the binding before ended
    /// with remove()'s RESET, or the device is fresh), so a dropped one changes nothing.
    Reset,
    /// CAPS: a corrupted or all-ones value can only turn the optional stream off.
    Optional,
}

impl Role {
    /// What the access is for, as a failure names it.
    fn why(self) -> String {
        match self {
            Role::Identity(e) => format!("identification: any other value is {}", e.name()),
            Role::Compared => "a read the step compares".into(),
            Role::Status => "the interrupt thread's read of what interrupted".into(),
            Role::Doorbell => "a doorbell whose interrupt the step waits for".into(),
            Role::Ack => "the interrupt thread's ack: a dropped one leaves the source latched, and the next doorbell raises no interrupt".into(),
            Role::Pattern => "a self-test pattern, which must differ from what the register held so that a dropped write shows".into(),
            Role::Param(step) => format!("a parameter of `{step}`: a dropped write shows there unless the register held the value already"),
            Role::Unused => "an access whose value nothing uses".into(),
            Role::Reset => "probe's reset of a device that comes to probe reset".into(),
            Role::Optional => "CAPS, which can only turn the optional stream off".into(),
        }
    }

    /// Whether a device that no longer answers (all-ones, writes dropped, no interrupts)
    /// shows at this access.
    fn notices_a_gone_device(self) -> bool {
        matches!(
            self,
            Role::Identity(_) | Role::Compared | Role::Status | Role::Doorbell
        )
    }
}

/// One of probe's device accesses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Entry {
    /// Its BAR0 offset.
    pub offset: u64,
    pub kind: Kind,
    /// The self-test step it belongs to (whose line follows it); `None` for probe's own
    /// accesses between steps (its RESET and INT_ENABLE; CAPS).
    pub step: Option<&'static str>,
    pub role: Role,
}

impl Entry {
    /// Its register's name.
    pub fn register(&self) -> &'static str {
        regmap::REGISTERS
            .iter()
            .find(|r| r.offset == self.offset)
            .map_or("an undefined offset", |r| r.name)
    }
}

impl fmt::Display for Entry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let rw = if self.kind == Kind::Read { "r" } else { "w" };
        let step = self
            .step
            .map_or("probe() between steps".into(), |s| format!("step {s}"));
        write!(f, "{rw} {} in {step}, {}", self.register(), self.role.why())
    }
}

/// Probe's accesses in order, written as the driver's functions make them.
#[derive(Default)]
struct Builder {
    entries: Vec<Entry>,
    step: Option<&'static str>,
}

impl Builder {
    fn step(&mut self, step: Option<&'static str>) -> &mut Self {
        self.step = step;
        self
    }

    fn access(&mut self, offset: u64, kind: Kind, role: Role) -> &mut Self {
        self.entries.push(Entry {
            offset,
            kind,
            step: self.step,
            role,
        });
        self
    }

    fn read(&mut self, offset: u64, role: Role) -> &mut Self {
        self.access(offset, Kind::Read, role)
    }

    fn write(&mut self, offset: u64, role: Role) -> &mut Self {
        self.access(offset, Kind::Write, role)
    }

    /// The interrupt thread's run for one interrupt (MSI: one round).
    fn interrupt(&mut self) -> &mut Self {
        self.read(reg::INT_STATUS, Role::Status)
            .write(reg::INT_ACK, Role::Ack)
    }

    /// `operate()`: OP_OFFSET, OP_LENGTH, OP_ARG (each with its role for this operation), the
    /// doorbell, the interrupt, STATUS, then RESULT.
    fn operate(&mut self, params: [Role; 3], result: Role) -> &mut Self {
        self.write(reg::OP_OFFSET, params[0])
            .write(reg::OP_LENGTH, params[1])
            .write(reg::OP_ARG, params[2])
            .write(reg::CMD, Role::Doorbell)
            .interrupt()
            .read(reg::STATUS, Role::Compared)
            .read(reg::RESULT, result)
    }

    /// `dma()`: the address and range written, each read back and compared, the doorbell, the
    /// interrupt, STATUS and RESULT.
    fn dma(&mut self, step: &'static str) -> &mut Self {
        let params = [
            reg::DMA_ADDR_LO,
            reg::DMA_ADDR_HI,
            reg::OP_OFFSET,
            reg::OP_LENGTH,
        ];
        for offset in params {
            self.write(offset, Role::Param(step));
        }
        for offset in params {
            self.read(offset, Role::Compared);
        }
        self.write(reg::CMD, Role::Doorbell)
            .interrupt()
            .read(reg::STATUS, Role::Compared)
            .read(reg::RESULT, Role::Compared)
    }
}

/// The table: probe's accesses, from 1.
pub struct Table {
    entries: Vec<Entry>,
}

impl Default for Table {
    fn default() -> Self {
        Self::new()
    }
}

impl Table {
    /// Written from `pci_rig.rs`'s probe; `tests` hold it to `PROBE_ACCESSES` and the steps.
    pub fn new() -> Table {
        use Role::*;
        let mut b = Builder::default();
        b.step(Some("identify"))
            .read(reg::MAGIC, Identity(Errno::Enodev))
            .read(reg::VERSION, Identity(Errno::Enotsupp));
        // Interrupts are enabled once: if that write is lost, fill's interrupt never comes.
        b.step(None)
            .write(reg::RESET, Reset)
            .write(reg::INT_ENABLE, Param("fill"));
        b.step(Some("scratch"));
        for _ in 0..5 {
            b.write(reg::SCRATCH, Pattern).read(reg::SCRATCH, Compared);
        }
        b.step(Some("counter"))
            .read(reg::COUNTER, Compared)
            .read(reg::COUNTER, Compared);
        b.step(Some("fill"))
            .operate([Param("fill"), Param("fill"), Param("fill")], Compared);
        // CRC32 and INVERT ignore OP_ARG.
        b.step(Some("crc32"))
            .operate([Param("crc32"), Param("crc32"), Unused], Compared);
        b.step(Some("invert"))
            .operate([Param("invert"), Param("invert"), Unused], Compared);
        // A bad opcode is refused before its range is looked at; its RESULT is not compared.
        b.step(Some("bad_opcode"))
            .operate([Unused, Unused, Unused], Unused);
        // The checked read inside BAR0 (the two outside it reach no device).
        b.step(Some("try_access_bounds"))
            .read(reg::SCRATCH, Compared);
        b.step(Some("irq"));
        for _ in 0..10 {
            b.write(reg::INT_RAISE, Doorbell).interrupt();
        }
        b.step(Some("irq_count")).read(reg::IRQ_COUNT, Compared);
        b.step(Some("dma_mask")).read(reg::DMA_BITS, Compared);
        b.step(Some("dma_to_device")).dma("dma_to_device");
        // The device inverts what it got (OP_ARG ignored), then a DMA from the device.
        b.step(Some("dma_from_device"))
            .operate(
                [Param("dma_from_device"), Param("dma_from_device"), Unused],
                Compared,
            )
            .dma("dma_from_device");
        b.step(Some("dma_stream")).dma("dma_stream");
        b.step(None).read(reg::CAPS, Optional);
        Table { entries: b.entries }
    }

    /// Probe's `n`-th access (from 1).
    pub fn entry(&self, n: u64) -> Option<&Entry> {
        self.entries.get(usize::try_from(n).ok()?.checked_sub(1)?)
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The outcomes `point` may end in. `held`: the struck access is a write of the value its
    /// register already held (by the device's log), so that losing it changes nothing.
    pub fn allowed(&self, point: Point, held: bool) -> Vec<Outcome> {
        let n = match point.at {
            At::Write(_) => return vec![Outcome::Removed],
            At::Probe(n) => n,
        };
        let Some(entry) = self.entry(n) else {
            return Vec::new();
        };
        let refused_here = |e: &Entry| match e.role {
            Role::Identity(errno) => Outcome::Refused {
                step: "identify",
                errno,
            },
            _ => Outcome::Refused {
                step: e.step.unwrap_or("probe"),
                errno: Errno::Eio,
            },
        };
        // Accesses from `n` on (the struck one included).
        let from = |n: u64| self.entries.iter().skip(n as usize - 1);
        match point.kind {
            // The host's doing, not the device's: AER recovery and the hot removal take the
            // device lock, which probe holds, so they come after probe, which binds.
            FaultKind::Aer | FaultKind::Unplug => vec![Outcome::Bound],
            // The device answers all-ones from this access on (a death after QEMU's wait; a
            // hung function on its BARs, which are all probe reads): the first access that
            // notices refuses; none after CAPS does.
            FaultKind::Vanish | FaultKind::Die | FaultKind::Hang => vec![from(n)
                .find(|e| e.role.notices_a_gone_device())
                .map_or(Outcome::Bound, refused_here)],
            // This access alone: a read's bits inverted, a write dropped.
            FaultKind::Error => vec![match entry.role {
                Role::Identity(_)
                | Role::Compared
                | Role::Status
                | Role::Doorbell
                | Role::Pattern => refused_here(entry),
                Role::Ack => from(n + 1)
                    .find(|e| e.role == Role::Doorbell)
                    .map_or(Outcome::Bound, refused_here),
                Role::Param(_) if held => Outcome::Bound,
                Role::Param(step) => Outcome::Refused {
                    step,
                    errno: Errno::Eio,
                },
                Role::Unused | Role::Reset | Role::Optional => Outcome::Bound,
            }],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::driver::STEPS;
    use vocab::sweep::PROBE_ACCESSES;

    fn p(s: &str) -> Point {
        s.parse().unwrap()
    }

    fn allowed(t: &Table, point: &str, held: bool) -> Vec<String> {
        t.allowed(p(point), held)
            .iter()
            .map(|o| o.to_string())
            .collect()
    }

    #[test]
    fn the_table_is_probes_accesses_and_steps_in_order() {
        let t = Table::new();
        assert_eq!(t.len() as u64, PROBE_ACCESSES);
        let mut steps: Vec<&str> = t.entries.iter().filter_map(|e| e.step).collect();
        steps.dedup();
        let mut want = STEPS.to_vec();
        want.dedup();
        assert_eq!(steps, want);
        // Every step a refusal may name is one the driver reports.
        for e in &t.entries {
            if let Role::Param(s) = e.role {
                assert!(STEPS.contains(&s), "{e}");
            }
        }
        let e = |n| t.entry(n).unwrap().to_string();
        assert!(e(1).starts_with("r MAGIC in step identify"), "{}", e(1));
        assert!(e(5).starts_with("w SCRATCH in step scratch"), "{}", e(5));
        assert!(e(49).starts_with("r SCRATCH in step try_access_bounds"));
        assert!(e(80).starts_with("r IRQ_COUNT in step irq_count"));
        assert!(e(129).starts_with("r CAPS in probe() between steps"));
        assert!(t.entry(0).is_none() && t.entry(130).is_none());
    }

    #[test]
    fn each_kind_ends_where_its_fault_shows() {
        let t = Table::new();
        for (point, want) in [
            ("error:1", "refused at identify with ENODEV"),
            ("error:2", "refused at identify with ENOTSUPP"),
            ("vanish:2", "refused at identify with ENOTSUPP"),
            ("error:3", "bound"),
            ("error:4", "refused at fill with EIO"),
            ("vanish:4", "refused at scratch with EIO"),
            ("error:5", "refused at scratch with EIO"),
            ("error:22", "refused at crc32 with EIO"),
            ("error:27", "bound"),
            ("error:48", "bound"),
            ("vanish:48", "refused at try_access_bounds with EIO"),
            ("error:49", "refused at try_access_bounds with EIO"),
            ("error:79", "refused at dma_to_device with EIO"),
            ("vanish:79", "refused at irq_count with EIO"),
            ("die:81", "refused at dma_mask with EIO"),
            ("error:126", "bound"),
            ("vanish:129", "bound"),
            ("error:129", "bound"),
            ("aer:49", "bound"),
            ("unplug:1", "bound"),
            ("error:w1", "removed"),
        ] {
            assert_eq!(allowed(&t, point, false), [want], "{point}");
        }
        // A parameter write: lost, it shows at its step unless the register held it already.
        assert_eq!(allowed(&t, "error:18", false), ["refused at fill with EIO"]);
        assert_eq!(allowed(&t, "error:26", true), ["bound"]);
        assert_eq!(
            allowed(&t, "error:85", false),
            ["refused at dma_to_device with EIO"]
        );
        // A pattern must show whatever the register held.
        assert_eq!(
            allowed(&t, "error:5", true),
            ["refused at scratch with EIO"]
        );
    }

    #[test]
    fn every_point_has_an_allowed_outcome() {
        let t = Table::new();
        for point in vocab::sweep::every() {
            for held in [false, true] {
                assert!(!t.allowed(point, held).is_empty(), "{point}");
            }
        }
    }

    #[test]
    fn the_sweeps_dma_phase_starts_where_the_dma_self_test_does() {
        let t = Table::new();
        let step = |n| t.entry(n).and_then(|e| e.step).unwrap_or("");
        assert!(
            step(vocab::sweep::DMA_FROM).starts_with("dma"),
            "{}",
            step(vocab::sweep::DMA_FROM)
        );
        assert!(!step(vocab::sweep::DMA_FROM - 1).starts_with("dma"));
    }
}
