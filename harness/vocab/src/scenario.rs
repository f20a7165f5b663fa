//! The scenario catalog: every scenario is one value, holding its name,
//! what it is about, its timeout, its guest script, the machine it needs
//! and how it is judged (`judge`). docs/scenarios.md's scenario table is checked
//! against it.

use crate::arch::Arch;
use crate::line::Line;
use crate::verdict::Cause;
use crate::verdict::Splat;
use std::time::Duration;

/// One scenario's guest script, `images/scenarios/NAME.sh`, built in.
macro_rules! script {
    ($name:literal) => {
        include_str!(concat!("../../../images/scenarios/", $name, ".sh"))
    };
}

pub struct Scenario {
    pub name: &'static str,
    pub about: &'static str,
    pub timeout: Duration,
    /// The guest's part (`images/scenarios/NAME.sh`), run by `images/init`.
    pub script: &'static str,
    /// The scenario whose script this one runs, under that one's name (a scenario of another
    /// kernel line, [`on_mainline`]); `None`: its own, `NAME` being its name.
    pub script_of: Option<&'static str>,
    /// Added to the kernel command line besides `pcirig.scenario=NAME`.
    pub cmdline: &'static str,
    /// Lines the kernel itself must print (checked after timestamp stripping).
    pub kernel_lines: &'static [&'static str],
    pub machine: Machine,
    /// QEMU's own devices to add (`-device NAME` each), e.g. pci-testdev.
    pub stock_devices: &'static [&'static str],
    pub check: Check,
    /// The kernel line it boots: ours on 6.12, or mainline with upstream's abstractions.
    pub line: Line,
    /// Booted behind a strict vIOMMU wherever the rig has one ([`Arch::has_viommu`]), whatever
    /// the run's DMA path: its DMA checks need the IOMMU's witness of every unmap.
    pub iommu: bool,
}

/// What the machine holds besides QEMU's defaults.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Machine {
    /// No device of ours.
    Bare,
    /// Our device server, attached behind a PCIe root port.
    Device,
    /// Our device, which the guest has the host unplug through `Slot`.
    Hotplug(Slot),
    /// No device of ours: one of QEMU's own (a scenario's `stock_devices`) behind the root
    /// port, unplugged through `Slot` likewise.
    StockHotplug(Slot),
    /// The device a foreign module's id table names (`--module`): our device server, or QEMU's
    /// pci-testdev, behind the root port `rp0` either way; unplugged through `Slot`, if any.
    Module(Option<Slot>),
    /// No device of ours; QEMU's device tree edited for the scenario
    /// (`dt`): device-tree machines only.
    DeviceTree(crate::devicetree::Edit),
}

/// Who ejects a hot-unplugged device.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Slot {
    /// Native PCIe hotplug (pciehp); on x86_64 q35's ACPI hotplug of the
    /// root port is switched off for it.
    Pciehp,
    /// q35's ACPI PCI hotplug (acpiphp): x86_64 only.
    Acpi,
}

const ALL_ARCHES: &[Arch] = &[Arch::X86_64, Arch::Arm64, Arch::Riscv64];

impl Machine {
    pub fn has_device(self) -> bool {
        matches!(self, Machine::Device | Machine::Hotplug(_))
    }

    /// The architectures whose machine can do it; elsewhere it is skipped.
    pub fn arches(self) -> &'static [Arch] {
        match self {
            Machine::Hotplug(Slot::Acpi)
            | Machine::StockHotplug(Slot::Acpi)
            | Machine::Module(Some(Slot::Acpi)) => &[Arch::X86_64],
            // x86_64's q35 describes its devices in ACPI: no device tree.
            Machine::DeviceTree(_) => &[Arch::Arm64, Arch::Riscv64],
            _ => ALL_ARCHES,
        }
    }

    /// Why the machine is not on the other arches, for a skip's note
    /// (empty, or starting with `: `).
    pub fn skip_reason(self) -> &'static str {
        match self {
            Machine::DeviceTree(_) => {
                ": x86_64's q35 describes its devices in ACPI, there is no device tree to add the node to"
            }
            _ => "",
        }
    }

    /// QEMU arguments the machine needs on `arch`.
    pub fn qemu_args(self, arch: Arch) -> &'static [&'static str] {
        match (self, arch) {
            (
                Machine::Hotplug(Slot::Pciehp)
                | Machine::StockHotplug(Slot::Pciehp)
                | Machine::Module(Some(Slot::Pciehp)),
                Arch::X86_64,
            ) => &[
                "-global",
                "ICH9-LPC.acpi-pci-hotplug-with-bridge-support=off",
            ],
            _ => &[],
        }
    }
}

/// What decides a scenario beyond the checks every boot gets.
#[derive(Clone, Copy, Debug)]
pub enum Check {
    /// The guest-side runner's KTAP.
    Runner,
    /// KUnit's KTAP: every suite complete and passing.
    Kunit,
    /// As `Kunit`, on the mainline line: upstream's doctests ran, none pinned to our count.
    KunitMainline,
    /// The runner's KTAP, and the MMIO oracle's view of pci-testdev's BAR0 holds exactly the
    /// accesses upstream's `rust_driver_pci` makes (it reports none itself): so many bindings'
    /// probes and unbinds, in order, and nothing more.
    UpstreamPci { bindings: usize },
    /// A module pci-rig did not write (`--module`), judged without its lines (`judge::foreign`):
    /// the runner's KTAP, and by the device's log and the MMIO oracle, nothing touched the
    /// device outside the bindings the host marked, each ended binding left bus mastering and
    /// MSI off, and every DMA hit a live mapping. `ours_only`: it needs our device (its fault
    /// knobs); skipped for a module of pci-testdev.
    Module { ours_only: bool },
    /// Broken guests on purpose (`SELFTEST_CASES`).
    SelfTest,
    /// The runner's KTAP, and the device's log holds exactly the `# mmio`
    /// accesses user space reports.
    UserSpace,
    /// No boot: the abstractions refuse mistakes at build time.
    CompileFail,
    /// No boot: our driver's `.ko` keeps its PCI id table in read-only data,
    /// ending in a zero sentinel.
    IdTable,
    /// The runner's KTAP, and every figure `pci_rig_bench` promises
    /// (`figures::GuestFigures`); their summary goes into the note.
    Bench,
    /// The runner's KTAP, and our driver did what it says, by its lines and
    /// the device's log.
    Driver(DriverExpect),
    /// The runner's KTAP and `pcirig_platform`'s lines (`dt::judge_platform`).
    Platform,
    /// The runner's KTAP and `rcpufreq_dt`'s and the clock's lines
    /// (`dt::judge_cpufreq`).
    Cpufreq,
    /// The runner's KTAP and every point of the removal-point sweep
    /// (`judge::sweep`), the run's points of these kinds given on
    /// `pcirig.points=`.
    Sweep(crate::sweep::Sample),
}

impl Scenario {
    /// The name of the script the guest runs (`pcirig.scenario=`).
    pub fn script_name(&self) -> &'static str {
        self.script_of.unwrap_or(self.name)
    }

    /// Whether our driver must be built for this scenario.
    pub fn needs_driver(&self) -> bool {
        matches!(
            self.check,
            Check::Driver(_) | Check::IdTable | Check::Bench | Check::SelfTest | Check::Sweep(_)
        )
    }

    /// What our driver must have done, if it is judged.
    pub fn driver(&self) -> Option<&DriverExpect> {
        match &self.check {
            Check::Driver(want) => Some(want),
            _ => None,
        }
    }

    /// A guest-side script judged by the common checks only.
    pub const fn runner(name: &'static str, script: &'static str, timeout: Duration) -> Self {
        Scenario {
            name,
            about: "",
            timeout,
            script,
            script_of: None,
            cmdline: "",
            kernel_lines: &[],
            machine: Machine::Bare,
            stock_devices: &[],
            check: Check::Runner,
            line: Line::Lts,
            iommu: false,
        }
    }

    /// This scenario with our device attached, judged by `check`.
    const fn with_device(self, check: Check) -> Self {
        Scenario {
            machine: Machine::Device,
            check,
            ..self
        }
    }
}

/// A guest that loads our driver with our device attached, in `machine`.
const fn driver_scenario(
    name: &'static str,
    about: &'static str,
    script: &'static str,
    machine: Machine,
    want: DriverExpect,
) -> Scenario {
    Scenario {
        about,
        machine,
        check: Check::Driver(want),
        ..Scenario::runner(name, script, Duration::from_secs(180))
    }
}

/// Expectations on the driver (guest-kernel/driver) for one boot. Always:
/// every probe either passes the whole self-test (`driver::STEPS`) or is
/// refused at identification, and the device's access log holds exactly
/// what the driver reports, binding by binding (`accounting`).
#[derive(Clone, Copy, Debug)]
pub struct DriverExpect {
    /// Probes that passed every self-test step and bound.
    pub probes: usize,
    /// Bindings that ended (remove(), the worker joined, the kept handle refused).
    pub removes: usize,
    /// Probes refused at identification, in order, by what was wrong
    /// (`step identify FAIL magic|version …`).
    pub refused: &'static [&'static str],
    /// The first binding ended with the worker busy: it stopped by itself
    /// for `stop`'s reason, at the right time, and was joined.
    pub busy_unbind: bool,
    /// The guest stayed up `SETTLE_S` after the first and after the last
    /// binding ended, so a late device access would be in the log.
    pub settle: bool,
    /// QMP DEVICE_DELETED events for our device.
    pub unplugs: usize,
    /// Why the worker stops.
    pub stop: WorkerStop,
    /// How every probe that bound takes interrupts (`event irq_mode msi|intx`).
    pub irq_mode: IrqMode,
    /// The device raised software interrupts by itself while bound (`irq_every_us`): each
    /// binding handled at least `STORM_IRQS` beyond its self-test's.
    pub storm: bool,
    /// The guest printed the driver's line of /proc/interrupts (`pcirig:
    /// interrupts …`), which must agree with `irq_mode`: an MSI domain's
    /// name for MSI, none for INTx.
    pub interrupts_listed: bool,
    /// Every binding that bound made its self-test's DMAs (the device's log holds them). Off
    /// only in the judge's unit tests of other rules, whose consoles have no DMA.
    pub dma: bool,
    /// The device offered its receive stream: every binding that bound started it, ran at least
    /// `STREAM_ROUNDS` DMAs from the device and stopped it.
    pub stream: bool,
    /// How the binding came out of each uncorrectable AER error, in order (`judge/aer.rs`).
    pub aer: &'static [AerEnd],
    /// The guest went down with a binding alive, whose shutdown must have stopped the device
    /// (`judge/shutdown.rs`; checked wherever a shutdown ran, required here).
    pub shutdown: bool,
    /// System sleep cycles the binding went through (`judge/pm.rs`): each the driver's sleep,
    /// the device into D3hot and back, its registers set up again before its next operation.
    pub sleeps: usize,
    /// Runtime suspends user space caused (`judge/pm.rs`), at least: each the driver's
    /// runtime suspend, the device into D3hot and back, set up again as for `sleeps`; the
    /// driver's own resumes on access come on top.
    pub runtime_sleeps: usize,
}

/// How a binding came out of one uncorrectable AER error.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AerEnd {
    /// Non-fatal: the driver could go on; its MMIO checked, no reset, I/O resumed.
    Recovered,
    /// Fatal: the link was frozen and reset; the driver re-initialised the device, proved it
    /// with an operation and a DMA, and resumed.
    Reset,
    /// The driver let go (its limit of errors): the AER core reports the recovery failed, and
    /// the driver touches the device no more until its binding ends.
    Disconnected,
}

impl DriverExpect {
    /// One binding, still bound at poweroff.
    pub const BOUND: DriverExpect = DriverExpect {
        probes: 1,
        removes: 0,
        refused: &[],
        busy_unbind: false,
        settle: false,
        unplugs: 0,
        stop: WorkerStop::Refused,
        irq_mode: IrqMode::Msi,
        storm: false,
        interrupts_listed: false,
        dma: true,
        stream: false,
        aer: &[],
        shutdown: false,
        sleeps: 0,
        runtime_sleeps: 0,
    };

    /// One binding that ended with its worker busy; the guest then settled.
    pub const ENDED_BUSY: DriverExpect = DriverExpect {
        removes: 1,
        busy_unbind: true,
        settle: true,
        ..DriverExpect::BOUND
    };
}

/// Why the driver's worker stops, as it prints it (`reason=…`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WorkerStop {
    /// The binding's end refused its access, once remove() returned.
    Refused,
    /// The device read all-ones (it is gone), before remove().
    Gone,
}

/// How the driver takes its interrupts, as it prints it (`irq_mode …`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IrqMode {
    Msi,
    Intx,
}

impl IrqMode {
    pub fn name(self) -> &'static str {
        match self {
            IrqMode::Msi => "msi",
            IrqMode::Intx => "intx",
        }
    }
}

/// Software interrupts a binding must have handled, beyond its self-test's, when the device
/// raised them by itself.
pub const STORM_IRQS: usize = 50;

pub const BOOT: Scenario = Scenario {
    about: "boots, loads and unloads the rust_minimal sample, powers off",
    kernel_lines: &[
        "rust_minimal: Rust minimal sample (init)",
        "rust_minimal: Rust minimal sample (exit)",
    ],
    ..Scenario::runner("boot", script!("boot"), Duration::from_secs(120))
};

/// `boot` on the mainline line (Linux 7.x as upstream has it).
pub const MAINLINE_BOOT: Scenario = Scenario {
    name: "mainline-boot",
    about: "Linux 7.x (mainline, no overlay) boots, loads and unloads the rust_minimal sample, powers off",
    script: script!("mainline-boot"),
    line: Line::Mainline,
    ..BOOT
};

/// Upstream's own Rust doctests under KUnit on the mainline line.
pub const MAINLINE_KUNIT: Scenario = Scenario {
    about: "Linux 7.x: upstream's kernel-crate doc examples run as KUnit tests, all passing",
    cmdline: "kunit.enable=1",
    stock_devices: &["pci-testdev"],
    check: Check::KunitMainline,
    line: Line::Mainline,
    ..Scenario::runner(
        "mainline-kunit",
        script!("mainline-kunit"),
        Duration::from_secs(300),
    )
};

/// Upstream's `rust_driver_pci` sample on pci-testdev, on the mainline line.
pub const MAINLINE_PCI: Scenario = Scenario {
    about: "Linux 7.x: upstream's rust_driver_pci, rust_dma and rust_driver_auxiliary samples on pci-testdev, one after the other: probe, unbind, bind again, rmmod",
    stock_devices: &["pci-testdev"],
    kernel_lines: &[
        "pci-testdev data-match count: 1",
        "pci-testdev config space read16 vendor ID: 1b36",
        "Probe DMA test driver.",
        "Unload DMA test driver.",
        "Connected to auxiliary device with index 0.",
    ],
    check: Check::UpstreamPci { bindings: 2 },
    line: Line::Mainline,
    ..Scenario::runner("mainline-pci", script!("mainline-pci"), Duration::from_secs(120))
};

/// Upstream's `rust_driver_pci` on a pci-testdev the host hot-unplugs, on the mainline line.
pub const MAINLINE_UNPLUG: Scenario = Scenario {
    about: "Linux 7.x: upstream's rust_driver_pci bound to a pci-testdev behind rp0, then device_del, pciehp removing it; the sample's binding ends as the device goes, and its BAR is never touched after",
    // The device under test carries the id the host's `unplug` deletes.
    stock_devices: &["pci-testdev,bus=rp0,id=pcirig"],
    machine: Machine::StockHotplug(Slot::Pciehp),
    check: Check::UpstreamPci { bindings: 1 },
    line: Line::Mainline,
    ..Scenario::runner(
        "mainline-unplug",
        script!("mainline-unplug"),
        Duration::from_secs(120),
    )
};

/// `s` on the mainline line, as `name`: the same guest part, machine and judge, our driver
/// being `guest-kernel/driver-mainline` (the same driver against upstream's 7.x API).
const fn on_mainline(name: &'static str, about: &'static str, s: Scenario) -> Scenario {
    Scenario {
        name,
        about,
        script_of: Some(s.name),
        line: Line::Mainline,
        ..s
    }
}

/// Our driver's scenarios on the mainline line (`driver-mainline`), judged as on 6.12.
pub const MAINLINE_PROBE: Scenario = on_mainline(
    "mainline-probe",
    "the mainline line, our driver against upstream's API (`driver-mainline`): as probe",
    PROBE,
);
pub const MAINLINE_UNBIND: Scenario = on_mainline(
    "mainline-unbind",
    "the mainline line, `driver-mainline`: as unbind (the worker on `Bar::into_devres`, refused once the binding ended)",
    UNBIND,
);
pub const MAINLINE_DMA: Scenario = on_mainline(
    "mainline-dma",
    "the mainline line, `driver-mainline`: as dma (rebind, the DMA self-test on upstream's coherent and scatter-gather DMA)",
    DMA,
);
pub const MAINLINE_DMA_UNBIND: Scenario = on_mainline(
    "mainline-dma-unbind",
    "the mainline line, `driver-mainline`: as dma-unbind",
    DMA_UNBIND,
);
pub const MAINLINE_HOTUNPLUG: Scenario = on_mainline(
    "mainline-hotunplug-pciehp",
    "the mainline line, `driver-mainline`: as hotunplug-pciehp",
    HOTUNPLUG,
);
pub const MAINLINE_DMA_SURPRISE: Scenario = on_mainline(
    "mainline-dma-surprise",
    "the mainline line, `driver-mainline`: as dma-surprise (the device vanishes mid-stream, then device_del)",
    DMA_SURPRISE,
);
pub const MAINLINE_IRQ_INTX: Scenario = on_mainline(
    "mainline-irq-intx",
    "the mainline line, `driver-mainline`: as irq-intx (MSI off, the shared INTx pin)",
    IRQ_INTX,
);
/// `bench` on the mainline line (`guest-kernel/bench-mainline`): the figures of the two API
/// generations' table; not in the default run, as `bench`'s INTx twin is not.
pub const MAINLINE_BENCH: Scenario = on_mainline(
    "mainline-bench",
    "the mainline line: the bench module's port to upstream's API (`bench-mainline`), every figure comes out",
    BENCH,
);
pub const MAINLINE_PROBE_ERROR: Scenario = on_mainline(
    "mainline-probe-error",
    "the mainline line, `driver-mainline`: as probe-error",
    PROBE_ERROR,
);

pub const KUNIT: Scenario = Scenario {
    about: "runs the kernel crate's doc examples (ours included) as KUnit tests",
    cmdline: "kunit.enable=1",
    // The pci module's doc examples bind QEMU's own test device; the irq
    // module's bind `edu`, which raises interrupts when told to, and the dma
    // module's, which copies to and from memory. `edu` masks the addresses it
    // uses to 28 bits by default, below the guest memory of arm64 and riscv64.
    // The pci module's config space examples bind `e1000e`, a PCI Express function with
    // extended capabilities (no driver of the kernel's claims it).
    stock_devices: &["pci-testdev", "edu,dma_mask=0xffffffff", "e1000e"],
    check: Check::Kunit,
    ..Scenario::runner("kunit", script!("kunit"), Duration::from_secs(300))
};

/// Boots broken and lying guests on purpose (`SELFTEST_CASES`); passes iff
/// the harness judges each one failed for the right reason. Its cases have
/// their own scripts.
pub const HARNESS_SELFTEST: Scenario = Scenario {
    about: "hanging, panicking, warning and lying guests are each judged fail for the right reason",
    // The lying guests use our device and driver.
    machine: Machine::Device,
    check: Check::SelfTest,
    ..Scenario::runner("harness-selftest", "", Duration::from_secs(120))
};

pub const COMPILE_FAIL: Scenario = Scenario {
    about: "mistakes the abstractions must refuse fail to build, each for its reason; the module without them builds",
    check: Check::CompileFail,
    ..Scenario::runner("compile-fail", "", Duration::from_secs(600))
};

pub const ID_TABLE: Scenario = Scenario {
    about: "the driver's .ko keeps its PCI id table in read-only data, ending in a zero sentinel",
    check: Check::IdTable,
    ..Scenario::runner("id-table", "", Duration::from_secs(60))
};

/// Registers read and written from the guest through the BARs, no driver;
/// every access the guest reports must be in the device's own log.
pub const DEVICE: Scenario = Scenario {
    about: "guest pokes BAR0/BAR2 per REGISTERS.md; the device log must show every access in order",
    machine: Machine::Device,
    check: Check::UserSpace,
    ..Scenario::runner("device", script!("device"), Duration::from_secs(180))
};

/// The device's INTx through the kernel's generic INTx driver (uio), no
/// driver of ours; accesses checked against the device log as in `device`.
pub const INTX: Scenario = Scenario {
    about: "uio_pci_generic takes the device; each raised interrupt shows once in /proc/interrupts and IRQ_COUNT",
    ..Scenario::runner("intx", script!("intx"), Duration::from_secs(180))
}
.with_device(Check::UserSpace);

pub const PROBE: Scenario = driver_scenario(
    "probe",
    "insmod pci_rig: identify and every self-test step pass, the device is bound",
    script!("probe"),
    Machine::Device,
    DriverExpect {
        interrupts_listed: true,
        ..DriverExpect::BOUND
    },
);
pub const PROBE_DIRTY: Scenario = driver_scenario(
    "probe-dirty",
    "insmod pci_rig on a device user space left with an interrupt counted in IRQ_COUNT: probe starts from a RESET, every self-test step passes (irq_count: the device's count equals the interrupts the driver handled)",
    script!("probe-dirty"),
    Machine::Device,
    DriverExpect::BOUND,
);
pub const MMIO: Scenario = driver_scenario(
    "mmio",
    "the device's log holds exactly the MMIO accesses the driver reports, in order, with their values; none reported means fail",
    script!("mmio"),
    Machine::Device,
    DriverExpect::BOUND,
);
pub const UNBIND: Scenario = driver_scenario(
    "unbind",
    "sysfs unbind: remove runs once, the worker is refused once the binding ended, every device access accounted for, a kept handle is refused",
    script!("unbind"),
    Machine::Device,
    DriverExpect {
        interrupts_listed: true,
        ..DriverExpect::ENDED_BUSY
    },
);
pub const REBIND: Scenario = driver_scenario(
    "rebind",
    "unbind then bind again: a second clean probe; rmmod; every binding accounted for",
    script!("rebind"),
    Machine::Device,
    DriverExpect {
        probes: 2,
        removes: 2,
        settle: true,
        ..DriverExpect::BOUND
    },
);
pub const MODULES: Scenario = Scenario {
    timeout: Duration::from_secs(600),
    ..driver_scenario(
        "modules",
        "insmod/rmmod 50 times with the device present; no leaked region in /proc/iomem",
        script!("modules"),
        Machine::Device,
        DriverExpect {
            probes: 50,
            removes: 50,
            settle: true,
            ..DriverExpect::BOUND
        },
    )
};
/// One device fault per point of `sweep::Plan` (a seeded sample by default).
pub const SWEEP: Scenario = Scenario {
    about: "a device fault (vanish, error, aer, unplug, die) struck at one of probe's accesses or at remove()'s RESET, one point per binding: each binding ends cleanly whatever probe made of it, the next clean one binds",
    machine: Machine::Hotplug(Slot::Pciehp),
    check: Check::Sweep(crate::sweep::SAMPLE),
    // Plus `sweep::budget` for the run's points.
    ..Scenario::runner("sweep", script!("sweep"), Duration::from_secs(120))
};
/// The sweep's unplug and die points with q35's ACPI PCI hotplug: acpiphp ejects the device
/// tens of milliseconds after device_del, not pciehp's 5 s.
pub const SWEEP_ACPI: Scenario = Scenario {
    about: "x86_64 only: the sweep's unplug and die points with q35's ACPI PCI hotplug, acpiphp ejecting the device within milliseconds of device_del",
    machine: Machine::Hotplug(Slot::Acpi),
    check: Check::Sweep(crate::sweep::SAMPLE_ACPI),
    ..Scenario::runner("sweep-acpi", script!("sweep-acpi"), Duration::from_secs(120))
};
/// Behind the IOMMU: the device runs the slow DMA after the driver gave up on it, and only the
/// IOMMU's unmap orders that DMA against the memory's release when nothing else of the driver's
/// follows.
pub const PROBE_ERROR: Scenario = Scenario {
    iommu: true,
    ..driver_scenario(
    "probe-error",
    "wrong identification, then a wrong major version only, then lost interrupts, then a DMA slower than the driver waits (device knobs): probe refuses each cleanly, BAR released, the slow DMA stopped before its memory is freed (DMA oracle); cleared: the driver binds",
    script!("probe-error"),
    Machine::Device,
    DriverExpect {
        refused: &["magic", "version", "interrupt", "interrupt"],
        ..DriverExpect::BOUND
    },
)
};

/// Bindings that end (sysfs unbind, then pciehp hot-unplug) while the device
/// raises interrupts by itself.
pub const IRQ_UNBIND: Scenario = driver_scenario(
    "irq-unbind",
    "unbind, then bind and hot-unplug, while the device raises an interrupt every 2 ms: no handler runs after its binding ended, no device access after it, no splat",
    script!("irq-unbind"),
    Machine::Hotplug(Slot::Pciehp),
    DriverExpect {
        probes: 2,
        removes: 2,
        unplugs: 1,
        storm: true,
        ..DriverExpect::ENDED_BUSY
    },
);

/// `unbind`'s steps with MSI switched off on the kernel command line: the
/// driver falls back to its INTx pin, shared, masked by the hard half.
pub const IRQ_INTX: Scenario = Scenario {
    cmdline: "pci=nomsi",
    ..driver_scenario(
        "irq-intx",
        "as unbind, with MSI off (pci=nomsi): the driver takes INTx, every operation's and software interrupt handled once and counted by the device",
        script!("irq-intx"),
        Machine::Device,
        DriverExpect {
            irq_mode: IrqMode::Intx,
            interrupts_listed: true,
            ..DriverExpect::ENDED_BUSY
        },
    )
};

const HOTUNPLUG_EXPECT: DriverExpect = DriverExpect {
    probes: 2,
    unplugs: 1,
    ..DriverExpect::ENDED_BUSY
};

pub const HOTUNPLUG: Scenario = driver_scenario(
    "hotunplug-pciehp",
    "QMP device_del while the worker is busy (native PCIe hotplug): remove once, the worker refused, every device access accounted for; device_add: probes again",
    script!("hotunplug-pciehp"),
    Machine::Hotplug(Slot::Pciehp),
    HOTUNPLUG_EXPECT,
);

/// The same with ACPI hotplug (q35's default for its root ports): acpiphp
/// ejects the device.
pub const HOTUNPLUG_ACPI: Scenario = driver_scenario(
    "hotunplug-acpi",
    "as hotunplug-pciehp, with q35's ACPI PCI hotplug (acpiphp) doing the eject",
    script!("hotunplug-acpi"),
    Machine::Hotplug(Slot::Acpi),
    HOTUNPLUG_EXPECT,
);

const SURPRISE_EXPECT: DriverExpect = DriverExpect {
    unplugs: 1,
    stop: WorkerStop::Gone,
    ..DriverExpect::ENDED_BUSY
};

pub const DMA: Scenario = Scenario {
    name: "dma",
    about: "rebind, each probe with the driver's DMA self-test: every DMA in the device's log inside a mapping the driver had live, with its data, none after",
    script: script!("dma"),
    ..REBIND
};
pub const DMA_UNBIND: Scenario = driver_scenario(
    "dma-unbind",
    "sysfs unbind while the driver keeps a DMA from the device running (the stream): none reaches its buffer after it was freed",
    script!("dma-unbind"),
    Machine::Device,
    DriverExpect {
        stream: true,
        ..DriverExpect::ENDED_BUSY
    },
);
pub const DMA_ERROR: Scenario = driver_scenario(
    "dma-error",
    "the stream's DMAs fail while the device stays (force_error): the driver reads the status and stops the stream, claims no data the device never moved, and its binding ends cleanly at unbind",
    script!("dma-error"),
    Machine::Device,
    DriverExpect {
        stream: true,
        removes: 1,
        ..DriverExpect::BOUND
    },
);
/// The guest reboots with the stream running and a DMA in flight.
pub const SHUTDOWN: Scenario = Scenario {
    kernel_lines: &["reboot: Restarting system"],
    ..driver_scenario(
        "shutdown",
        "the guest reboots while the driver keeps a DMA from the device running and one is in flight: the driver's shutdown stops the device (RESET), the adapter turns bus mastering off, and nothing of the binding's reaches the device after",
        script!("shutdown"),
        Machine::Device,
        DriverExpect {
            stream: true,
            shutdown: true,
            ..DriverExpect::BOUND
        },
    )
};
/// System sleep, three cycles, with the binding alive.
pub const PM: Scenario = driver_scenario(
    "pm",
    "three system sleeps (s2idle through pm_test's platform level) with the worker busy: the driver's sleep stops the device, the PCI core puts it into D3hot and back; it comes back without its registers, and the driver's wake sets it up again before using it; nothing reaches it in D3hot; then unbind",
    script!("pm"),
    Machine::Device,
    DriverExpect {
        sleeps: 3,
        ..DriverExpect::ENDED_BUSY
    },
);
/// System sleep, fifty cycles in one boot: a soak (`--soak`, `--debug`), not the default run.
pub const PM_SOAK: Scenario = driver_scenario(
    "pm-soak",
    "as pm, fifty system sleeps in one boot without delay: each cycle judged as pm's; in the debug flavour kmemleak then finds nothing the cycles leaked",
    script!("pm-soak"),
    Machine::Device,
    DriverExpect {
        sleeps: 50,
        ..DriverExpect::ENDED_BUSY
    },
);

/// Runtime PM: the device sleeps when idle and wakes on access, while the system runs.
pub const RPM: Scenario = driver_scenario(
    "rpm",
    "runtime PM with the binding alive: user space allows it, the driver's runtime suspend stops the device and the PCI core puts it into D3hot when idle; the driver's heartbeat wakes it (resume on access), user space wakes it, and the unbind ends the binding while it sleeps; each time back without its registers, set up again before use; nothing reaches it in D3hot",
    script!("rpm"),
    Machine::Device,
    DriverExpect {
        runtime_sleeps: 3,
        ..DriverExpect::ENDED_BUSY
    },
);

pub const DMA_SURPRISE: Scenario = driver_scenario(
    "dma-surprise",
    "the device vanishes while the stream runs, then device_del: the stream and the worker stop by themselves, no DMA after",
    script!("dma-surprise"),
    Machine::Hotplug(Slot::Pciehp),
    DriverExpect {
        stream: true,
        ..SURPRISE_EXPECT
    },
);

pub const SURPRISE: Scenario = driver_scenario(
    "surprise",
    "the device reads all-ones while the worker is busy: it gives up by itself; then device_del: remove once, no Oops",
    script!("surprise"),
    Machine::Hotplug(Slot::Pciehp),
    SURPRISE_EXPECT,
);

/// The same with ACPI hotplug removing the device (x86_64): together with
/// `hotunplug-acpi`, the device going away without Linux 6.12's pciehp, whose
/// unplug path lockdep reports in debug kernels.
pub const SURPRISE_ACPI: Scenario = driver_scenario(
    "surprise-acpi",
    "as surprise, with q35's ACPI PCI hotplug (acpiphp) doing the eject",
    script!("surprise-acpi"),
    Machine::Hotplug(Slot::Acpi),
    SURPRISE_EXPECT,
);

pub const AER: Scenario = Scenario {
    kernel_lines: &[
        "AER: Correctable error message received",
        "AER: Uncorrectable (Non-Fatal) error message received",
        "AER: Uncorrectable (Fatal) error message received",
        "AER: device recovery successful",
        "AER: device recovery failed",
    ],
    ..driver_scenario(
        "aer",
        "AER errors injected at the device's root port while the worker runs, recovered by the driver's error handlers: a correctable one (logged, nothing else), a non-fatal one (no reset), a fatal one (the link reset, the driver re-initialises the device, an operation and a DMA prove it), another non-fatal one, then one past the driver's limit: it lets go, touches the device no more, and unbinds cleanly",
        script!("aer"),
        Machine::Device,
        DriverExpect {
            removes: 1,
            stream: true,
            aer: &[
                AerEnd::Recovered,
                AerEnd::Reset,
                AerEnd::Recovered,
                AerEnd::Disconnected,
            ],
            ..DriverExpect::BOUND
        },
    )
};

/// Figures, not a verdict on them (`cargo xtask bench` reports them): it
/// fails only when the module's figures are missing or malformed.
pub const BENCH: Scenario = Scenario {
    about:
        "pci_rig_bench: MMIO read raw / through Devres / under one guard on our device and pci-testdev, BAR2 throughput, unbind cost with K Devres values",
    stock_devices: &["pci-testdev"],
    ..Scenario::runner("bench", script!("bench"), Duration::from_secs(180))
}
.with_device(Check::Bench);

/// `bench` as `cargo xtask bench` boots it: 5 rebinds of each unbind case
/// for medians, where the default run's smoke test does one.
pub const BENCH_FULL: Scenario = Scenario {
    cmdline: "pcirig.bench_rounds=30",
    ..BENCH
};

/// `bench` with MSI off (`pci=nomsi`), for the INTx interrupt round trip of
/// `cargo xtask bench`.
pub const BENCH_INTX: Scenario = Scenario {
    name: "bench-intx",
    about: "as bench, booted with pci=nomsi: the interrupt round trip on INTx",
    script: script!("bench-intx"),
    cmdline: "pci=nomsi",
    ..BENCH
};

/// One guest of `harness-selftest`: judged as `scenario`, it must fail
/// with `cause` and a reason containing `says`.
pub struct SelfTestCase {
    pub scenario: Scenario,
    pub cause: Cause,
    pub says: &'static str,
    /// The start of a console line the guest must print, proving the
    /// set-up that makes the case mean something ran (else the case fails).
    pub set_up: Option<&'static str>,
}

const fn broken(
    name: &'static str,
    script: &'static str,
    secs: u64,
    cause: Cause,
    says: &'static str,
) -> SelfTestCase {
    SelfTestCase {
        scenario: Scenario::runner(name, script, Duration::from_secs(secs)),
        cause,
        says,
        set_up: None,
    }
}

/// The guests `harness-selftest` boots: three broken, six lying (each
/// lie told from a user-space script, the driver unchanged); a guest whose
/// machine an arch has not (`Machine::arches`) is left out there.
pub const SELFTEST_CASES: &[SelfTestCase] = &[
    broken(
        "selftest-hang",
        script!("selftest-hang"),
        10,
        Cause::Timeout,
        "timeout after 10 s",
    ),
    broken(
        "selftest-panic",
        script!("selftest-panic"),
        60,
        Cause::Splat(Splat::Panic),
        "panic",
    ),
    broken(
        "selftest-warning",
        script!("selftest-warning"),
        60,
        Cause::Splat(Splat::Warning),
        "WARNING",
    ),
    SelfTestCase {
        scenario: Scenario {
            name: "selftest-lie-mmio",
            script: script!("selftest-lie-mmio"),
            ..MMIO
        },
        cause: Cause::Device,
        says:
            "the driver reported write bar0 0x8 size 4 value 0xdeadbeef, which the device never saw",
        set_up: None,
    },
    SelfTestCase {
        scenario: Scenario {
            name: "selftest-lie-unbind",
            script: script!("selftest-lie-unbind"),
            ..UNBIND
        },
        cause: Cause::Device,
        says: "the device saw 1 access nothing the guest reported accounts for",
        set_up: None,
    },
    SelfTestCase {
        scenario: Scenario {
            name: "selftest-dma-after-unbind",
            script: script!("selftest-dma-after-unbind"),
            ..UNBIND
        },
        cause: Cause::Device,
        says: "fell outside every mapping the driver had live then (none: unmapped, freed, or its binding had ended)",
        set_up: None,
    },
    SelfTestCase {
        scenario: Scenario {
            name: "selftest-platform-late",
            script: script!("selftest-platform-late"),
            ..PLATFORM
        },
        cause: Cause::Checks,
        says: "MMIO oracle (inside QEMU): the node's window",
        set_up: None,
    },
    SelfTestCase {
        scenario: Scenario {
            name: "selftest-oracle-unplug",
            script: script!("selftest-oracle-unplug"),
            cmdline: "pcirig.prearm=devmem",
            ..HOTUNPLUG
        },
        // The same devmem load ran before arming (`pcirig.prearm`): the
        // oracle sees the read after the unplug only if arming made QEMU
        // translate that code anew.
        cause: Cause::Device,
        says: "MMIO oracle (inside QEMU): binding 2",
        set_up: Some("pcirig: devmem ran before arming"),
    },
    SelfTestCase {
        scenario: Scenario {
            name: "selftest-lie-kunit",
            script: script!("selftest-lie-kunit"),
            ..KUNIT
        },
        cause: Cause::Checks,
        says: "KUnit-looking lines not printed by the kernel",
        set_up: None,
    },
];

/// What `cargo xtask test --iommu` runs without `--scenario`: the scenarios that do DMA.
pub const IOMMU: &[&Scenario] = &[&DMA, &DMA_UNBIND, &DMA_SURPRISE, &SWEEP];

/// Scenarios that fail today on a finding in upstream's code or its toolchain (docs/kernel-lines.md, "Two
/// kernel lines"), run by name only (`--scenario`), so that the default run stays a gate.
pub const FINDINGS: &[&Scenario] = &[
    &MAINLINE_ENABLE_LEAK,
    &MAINLINE_SPAWN_UNLOAD,
    &MAINLINE_SHUTDOWN,
];

/// 7.x's Rust `pci::Driver` has no shutdown: a driver cannot stop its device when the system
/// goes down, and the PCI core clears bus mastering only for kexec.
pub const MAINLINE_SHUTDOWN: Scenario = on_mainline(
    "mainline-shutdown",
    "Linux 7.x, `driver-mainline`: as shutdown; upstream's pci::Driver has no shutdown, so the stream's DMA goes on while the guest reboots",
    SHUTDOWN,
);

/// 7.x's `Queue::try_spawn` is safe and its Rust workqueue has no cancel or flush: a module
/// can go while a closure it spawned still runs (guest-kernel/findings-mainline).
pub const MAINLINE_SPAWN_UNLOAD: Scenario = Scenario {
    about: "Linux 7.x: a module spawns a closure with the safe `Queue::try_spawn` and is unloaded while it sleeps; nothing in the API waits for it, and the guest must survive the closure's end",
    line: Line::Mainline,
    ..Scenario::runner(
        "mainline-spawn-unload",
        script!("mainline-spawn-unload"),
        Duration::from_secs(60),
    )
};

/// Upstream's `rust_driver_pci` leaves its device enabled, bus mastering on, after unbind: 7.x's
/// Rust PCI API enables (`enable_device_mem`, `set_master`) with no way back (docs/kernel-lines.md).
pub const MAINLINE_ENABLE_LEAK: Scenario = Scenario {
    about: "Linux 7.x: after upstream's rust_driver_pci is unbound, pci-testdev is disabled again (enable count 0, Bus Master Enable off), and a second binding adds nothing",
    stock_devices: &["pci-testdev"],
    line: Line::Mainline,
    ..Scenario::runner(
        "mainline-enable-leak",
        script!("mainline-enable-leak"),
        Duration::from_secs(120),
    )
};

/// A foreign module (`--module DIR`) through probe, unbind and rebind.
pub const MODULE_PROBE: Scenario = Scenario {
    about: "a module pci-rig did not write (`--module`), on the device its id table names (ours or pci-testdev): loaded, bound, unbound, bound again, unloaded; nothing touches the device outside the bindings the host marked",
    machine: Machine::Module(None),
    check: Check::Module { ours_only: false },
    ..Scenario::runner(
        "module-probe",
        script!("module-probe"),
        Duration::from_secs(120),
    )
};

/// A foreign module's device hot-unplugged under it (pciehp).
pub const MODULE_UNPLUG: Scenario = Scenario {
    about: "a foreign module (`--module`) bound to its device behind rp0, then device_del: pciehp ends the binding as the device goes, nothing touches it after, the module unloads",
    machine: Machine::Module(Some(Slot::Pciehp)),
    check: Check::Module { ours_only: false },
    ..Scenario::runner(
        "module-unplug",
        script!("module-unplug"),
        Duration::from_secs(120),
    )
};

/// A foreign module's device stops answering, then goes.
pub const MODULE_SURPRISE: Scenario = Scenario {
    about: "a foreign module (`--module`) bound to our device, which starts answering all-ones (gone, as far as reads tell) before device_del; the guest lives on and the module unloads (our device only: pci-testdev has no such knob)",
    machine: Machine::Module(Some(Slot::Pciehp)),
    check: Check::Module { ours_only: true },
    ..Scenario::runner(
        "module-surprise",
        script!("module-surprise"),
        Duration::from_secs(120),
    )
};

/// The removal-point sweep for a foreign module on our device.
pub const MODULE_SWEEP: Scenario = Scenario {
    about: "a foreign module (`--module`) on our device through the removal-point sweep: a vanish and an error fault at each of its first accesses (`sweep::foreign`), each binding ending cleanly in its marked window, a clean binding after each",
    machine: Machine::Module(None),
    check: Check::Module { ours_only: true },
    ..Scenario::runner(
        "module-sweep",
        script!("module-sweep"),
        Duration::from_secs(120),
    )
};

/// The foreign-module scenarios on the mainline line: the same guest parts and judge.
pub const MAINLINE_MODULE_PROBE: Scenario = on_mainline(
    "mainline-module-probe",
    "the mainline line: as module-probe, the module built against Linux 7.x",
    MODULE_PROBE,
);
pub const MAINLINE_MODULE_UNPLUG: Scenario = on_mainline(
    "mainline-module-unplug",
    "the mainline line: as module-unplug",
    MODULE_UNPLUG,
);
pub const MAINLINE_MODULE_SWEEP: Scenario = on_mainline(
    "mainline-module-sweep",
    "the mainline line: as module-sweep",
    MODULE_SWEEP,
);
pub const MAINLINE_MODULE_SURPRISE: Scenario = on_mainline(
    "mainline-module-surprise",
    "the mainline line: as module-surprise",
    MODULE_SURPRISE,
);

/// What `cargo xtask test --module DIR` runs (each line's by `--kernel`): run with a module
/// only, since it is the user's.
pub const FOREIGN: &[&Scenario] = &[
    &MODULE_PROBE,
    &MODULE_UNPLUG,
    &MODULE_SURPRISE,
    &MODULE_SWEEP,
    &MAINLINE_MODULE_PROBE,
    &MAINLINE_MODULE_UNPLUG,
    &MAINLINE_MODULE_SURPRISE,
    &MAINLINE_MODULE_SWEEP,
];

/// What `cargo xtask test` runs, in this order.
pub const ALL: &[&Scenario] = &[
    &BOOT,
    &KUNIT,
    &COMPILE_FAIL,
    &ID_TABLE,
    &DEVICE,
    &INTX,
    &PROBE,
    &PROBE_DIRTY,
    &MMIO,
    &UNBIND,
    &REBIND,
    &MODULES,
    &SWEEP,
    &SWEEP_ACPI,
    &DMA,
    &DMA_UNBIND,
    &DMA_SURPRISE,
    &DMA_ERROR,
    &SHUTDOWN,
    &MAINLINE_BOOT,
    &MAINLINE_KUNIT,
    &MAINLINE_PCI,
    &MAINLINE_UNPLUG,
    &MAINLINE_PROBE,
    &MAINLINE_UNBIND,
    &MAINLINE_DMA,
    &MAINLINE_DMA_UNBIND,
    &MAINLINE_HOTUNPLUG,
    &MAINLINE_DMA_SURPRISE,
    &MAINLINE_IRQ_INTX,
    &MAINLINE_PROBE_ERROR,
    &PROBE_ERROR,
    &IRQ_INTX,
    &IRQ_UNBIND,
    &HOTUNPLUG,
    &HOTUNPLUG_ACPI,
    &SURPRISE,
    &SURPRISE_ACPI,
    &AER,
    &PM,
    &RPM,
    &MODULE_PROBE,
    &BENCH,
    &PLATFORM,
    &CPUFREQ,
    &HARNESS_SELFTEST,
];

/// A platform driver bound by device-tree `compatible` (issue 17).
pub const PLATFORM: Scenario = Scenario {
    about: "pcirig_platform binds a device-tree node by compatible, maps its MMIO window (Devres<IoMem>), unbind, bind again, rmmod",
    machine: Machine::DeviceTree(crate::devicetree::Edit::Platform),
    check: Check::Platform,
    ..Scenario::runner("platform", script!("platform"), Duration::from_secs(120))
};

/// A Rust cpufreq-dt driver on the platform bus, with a settable clock and
/// an OPP table in the device tree (issue 17).
pub const CPUFREQ: Scenario = Scenario {
    about: "rcpufreq_dt: the policy lists the OPP table, each frequency set through the userspace governor reaches scaling_cur_freq and the clock, rmmod unregisters",
    machine: Machine::DeviceTree(crate::devicetree::Edit::Cpufreq),
    check: Check::Cpufreq,
    ..Scenario::runner("cpufreq", script!("cpufreq"), Duration::from_secs(120))
};

/// What `cargo xtask test --soak` repeats: the device going away under a
/// busy driver.
pub const SOAK: &[&Scenario] = &[
    &HOTUNPLUG,
    &HOTUNPLUG_ACPI,
    &SURPRISE,
    &SURPRISE_ACPI,
    &IRQ_UNBIND,
    &PM_SOAK,
    &RPM,
];

/// What `--debug` runs unless one scenario is asked for: the checkers
/// (KASAN, lockdep, PROVE_RCU, atomic-sleep, kmemleak, full preemption)
/// watching every path that ends a binding or frees what it held, on both
/// kernel lines (the mainline ones where `--kernel` includes 7).
pub const DEBUG: &[&Scenario] = &[
    &KUNIT,
    &CPUFREQ,
    &PLATFORM,
    &UNBIND,
    &REBIND,
    &MODULES,
    &IRQ_UNBIND,
    &DMA_UNBIND,
    &HOTUNPLUG,
    &HOTUNPLUG_ACPI,
    &SURPRISE,
    &SURPRISE_ACPI,
    &SWEEP,
    &PM,
    &RPM,
    &MAINLINE_UNBIND,
    &MAINLINE_DMA_UNBIND,
    &MAINLINE_HOTUNPLUG,
    &MAINLINE_DMA_SURPRISE,
    &MAINLINE_UNPLUG,
];

pub fn find(name: &str) -> Result<&'static Scenario, String> {
    let known = || {
        let foreign = FOREIGN
            .iter()
            .filter(|s| !ALL.iter().any(|a| a.name == s.name));
        ALL.iter()
            .chain(FINDINGS)
            .chain(BY_NAME)
            .chain(foreign)
            .copied()
            .chain(crate::matrix::scenarios())
    };
    known().find(|s| s.name == name).ok_or_else(|| {
        let names: Vec<&str> = known().map(|s| s.name).collect();
        format!("unknown scenario `{name}`; valid: {}", names.join(", "))
    })
}

/// Scenarios outside the default run, run by name (`--scenario`): figures, not verdicts
/// (`cargo xtask bench` boots its own), and soaks (`--soak`, `--debug` run them too).
pub const BY_NAME: &[&Scenario] = &[&MAINLINE_BENCH, &PM_SOAK];

/// Every guest script a boot may run, by scenario name: what the initramfs
/// carries under `scenarios/`.
pub fn scripts() -> Vec<(&'static str, &'static str)> {
    let mut all: Vec<(&str, &str)> = ALL
        .iter()
        .copied()
        .chain(SELFTEST_CASES.iter().map(|c| &c.scenario))
        .chain([&BENCH_INTX])
        .chain(BY_NAME.iter().copied())
        .chain(FINDINGS.iter().copied())
        .chain(FOREIGN.iter().copied())
        .filter(|s| !s.script.is_empty())
        .map(|s| (s.script_name(), s.script))
        .collect();
    all.sort();
    all.dedup();
    all
}

/// Every script a guest image carries: the files' (`scripts`) and the fault × state matrix's
/// cells', generated from its table.
pub fn image_scripts() -> Vec<(&'static str, &'static str)> {
    let mut all = scripts();
    all.extend(
        crate::matrix::scenarios()
            .iter()
            .map(|s| (s.name, s.script)),
    );
    all
}

#[cfg(test)]
// Tests may read the checkout's files; the crate itself may not.
#[allow(clippy::disallowed_methods)]
mod tests {
    use super::*;
    use std::path::Path;

    fn repo() -> &'static Path {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .ancestors()
            .nth(2)
            .unwrap()
    }

    #[test]
    fn unknown_scenarios_name_the_valid_ones() {
        assert!(find("boot").is_ok());
        let e = find("nope").err().unwrap();
        assert!(
            e.starts_with("unknown scenario `nope`; valid: boot, kunit,"),
            "{e}"
        );
        for s in ALL {
            assert!(e.contains(s.name), "{e} lacks {}", s.name);
        }
    }

    #[test]
    fn every_script_file_is_a_scenarios_own_and_every_boot_has_one() {
        let dir = repo().join("images/scenarios");
        let mut files: Vec<String> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        files.sort();
        let scripts = scripts();
        let mut named: Vec<String> = scripts.iter().map(|(n, _)| format!("{n}.sh")).collect();
        named.sort();
        assert_eq!(files, named, "images/scenarios against the catalog");
        for (name, text) in scripts {
            let file = std::fs::read_to_string(dir.join(format!("{name}.sh"))).unwrap();
            assert_eq!(file, text, "{name} carries another scenario's script");
        }
        // Only these boot no script of their own.
        let none: Vec<&str> = ALL
            .iter()
            .filter(|s| s.script.is_empty())
            .map(|s| s.name)
            .collect();
        assert_eq!(none, ["compile-fail", "id-table", "harness-selftest"]);
    }

    #[test]
    fn a_scenario_run_under_another_ones_script_runs_that_ones_on_the_other_line() {
        let borrowed: Vec<&Scenario> = ALL
            .iter()
            .chain(BY_NAME)
            .copied()
            .filter(|s| s.script_of.is_some())
            .collect();
        assert!(
            borrowed.len() >= 8,
            "the mainline variants of our driver's scenarios"
        );
        for s in borrowed {
            let own = find(s.script_name()).unwrap();
            assert_eq!(
                own.script, s.script,
                "{} runs {}'s script",
                s.name, own.name
            );
            assert!(own.script_of.is_none() && own.line != s.line, "{}", s.name);
            assert!(own.needs_driver() && s.needs_driver(), "{}", s.name);
        }
    }

    #[test]
    fn readme_lists_the_catalog_in_order_and_where_each_runs() {
        let readme = std::fs::read_to_string(repo().join("docs/scenarios.md")).unwrap();
        let rows: Vec<(&str, &str)> = readme
            .lines()
            .skip_while(|l| *l != "| name | what passes |")
            .skip(2)
            .take_while(|l| l.starts_with("| `"))
            .filter_map(|l| l.strip_prefix("| `"))
            .filter_map(|l| l.split_once("` | "))
            .collect();
        let names: Vec<&str> = rows.iter().map(|(n, _)| *n).collect();
        let want: Vec<&str> = ALL.iter().map(|s| s.name).collect();
        assert_eq!(names, want, "docs/scenarios.md's table against the catalog");
        for (s, (_, text)) in ALL.iter().zip(&rows) {
            let x86_only = s.machine.arches() == [Arch::X86_64];
            assert_eq!(
                text.starts_with("x86_64 only"),
                x86_only,
                "docs/scenarios.md's row for {} must start with `x86_64 only` iff it runs there alone",
                s.name
            );
        }
    }

    #[test]
    fn acpi_hotplug_is_x86_only_and_pciehp_switches_acpi_off_there() {
        assert_eq!(HOTUNPLUG_ACPI.machine.arches(), [Arch::X86_64]);
        assert_eq!(SURPRISE.machine.arches().len(), 3);
        assert!(HOTUNPLUG.machine.qemu_args(Arch::X86_64)[1].contains("hotplug"));
        assert!(HOTUNPLUG.machine.qemu_args(Arch::Arm64).is_empty());
        assert!(HOTUNPLUG_ACPI.machine.qemu_args(Arch::X86_64).is_empty());
    }
}
