//! The boot scenarios and how each is judged. A verdict never rests on the
//! guest's word alone: besides the runner's KTAP, the kernel's own lines,
//! the absence of any splat and a clean poweroff all have to agree.

use crate::arch::Arch;
use crate::console::{self, Splat};
use crate::device::{self, Access, Claimed, Stopped};
use crate::driver;
use crate::figures::GuestFigures;
use crate::ktap::{self, Line};
use crate::kunit;
use crate::qemu::Console;
use crate::report::{Timings, Verdict};
use std::time::Duration;

pub struct Scenario {
    pub name: &'static str,
    pub about: &'static str,
    pub timeout: Duration,
    /// Added to the kernel command line besides `pcirig.scenario=NAME`.
    pub cmdline: &'static str,
    /// Lines the kernel itself must print (checked after timestamp stripping).
    pub kernel_lines: &'static [&'static str],
    pub kind: Kind,
    /// Whether our device server is attached for this boot.
    pub device: bool,
    /// More QEMU arguments for this boot (e.g. a stock device to bind).
    pub qemu_args: &'static [&'static str],
    /// More still, on x86_64 only (q35's ACPI hotplug switch).
    pub x86_qemu_args: &'static [&'static str],
    /// The architectures it applies to (empty: all); elsewhere it is skipped.
    pub only_on: &'static [Arch],
    /// What our driver must have done, judged from its lines and the device log.
    pub driver: Option<DriverExpect>,
}

/// Expectations on the driver (guest-kernel/driver) for one boot.
#[derive(Clone, Copy, Debug)]
pub struct DriverExpect {
    pub probes: usize,
    pub removes: usize,
    /// Probes refused because identification was wrong (`step identify FAIL`).
    pub refused: usize,
    /// Every `# mmio` access the driver reports must be in the device log.
    pub mmio: bool,
    /// The first binding ended: the worker stopped by itself for `stop`'s
    /// reason, and was joined; every BAR access in the device log is one the
    /// driver reported or one of the reads its worker counted when it
    /// stopped, so none came after; the kept handle was refused.
    pub unbind: bool,
    /// QMP DEVICE_DELETED events for our device.
    pub unplugs: usize,
    /// Why the worker stops.
    pub stop: WorkerStop,
}

/// Why the driver's worker stops, as it prints it (`reason=…`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WorkerStop {
    /// The binding's end refused its access, once remove() returned.
    Refused,
    /// The device read all-ones (it is gone), before remove().
    Gone,
}

const fn driver(
    probes: usize,
    removes: usize,
    refused: usize,
    mmio: bool,
    unbind: bool,
) -> Option<DriverExpect> {
    Some(DriverExpect {
        probes,
        removes,
        refused,
        mmio,
        unbind,
        unplugs: 0,
        stop: WorkerStop::Refused,
    })
}

impl Scenario {
    /// Whether our driver must be built for this scenario.
    pub fn needs_driver(&self) -> bool {
        self.driver.is_some() || matches!(self.kind, Kind::IdTable | Kind::Bench)
    }

    /// A guest-side script judged by the common checks only.
    pub const fn plain(name: &'static str, timeout: Duration) -> Self {
        Scenario {
            name,
            about: "",
            timeout,
            cmdline: "",
            kernel_lines: &[],
            kind: Kind::Runner,
            device: false,
            qemu_args: &[],
            x86_qemu_args: &[],
            only_on: &[],
            driver: None,
        }
    }
}

/// What decides a scenario beyond the checks every boot gets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// The guest-side runner's KTAP.
    Runner,
    /// KUnit's KTAP: every suite complete and passing.
    Kunit,
    /// Broken guests on purpose (see `run::selftest`).
    SelfTest,
    /// The runner's KTAP, and every `# mmio` access it reports must appear
    /// in the device's access log.
    Device,
    /// No boot: `Io<SIZE>` must refuse, at build time, a constant offset
    /// past its end, and accept one inside.
    CompileFail,
    /// No boot: our driver's `.ko` keeps its PCI id table in read-only data,
    /// ending in a zero sentinel.
    IdTable,
    /// The runner's KTAP, and every figure `pci_rig_bench` promises
    /// (`figures::GuestFigures`); their summary goes into the note.
    Bench,
}

pub const BOOT: Scenario = Scenario {
    name: "boot",
    about: "boots, loads and unloads the rust_minimal sample, powers off",
    timeout: Duration::from_secs(120),
    cmdline: "",
    kernel_lines: &[
        "rust_minimal: Rust minimal sample (init)",
        "rust_minimal: Rust minimal sample (exit)",
    ],
    kind: Kind::Runner,
    device: false,
    qemu_args: &[],
    x86_qemu_args: &[],
    only_on: &[],
    driver: None,
};

pub const KUNIT: Scenario = Scenario {
    name: "kunit",
    about: "runs the kernel crate's doc examples (ours included) as KUnit tests",
    timeout: Duration::from_secs(300),
    cmdline: "kunit.enable=1",
    kernel_lines: &[],
    kind: Kind::Kunit,
    device: false,
    // The pci module's doc examples bind QEMU's own test device.
    qemu_args: &["-device", "pci-testdev"],
    x86_qemu_args: &[],
    only_on: &[],
    driver: None,
};

/// Boots broken guests on purpose; passes iff the harness judges each one
/// failed for the right reason.
pub const HARNESS_SELFTEST: Scenario = Scenario {
    name: "harness-selftest",
    about: "a hanging, a panicking and a warning guest are each judged fail",
    timeout: Duration::from_secs(120),
    cmdline: "",
    kernel_lines: &[],
    kind: Kind::SelfTest,
    device: false,
    qemu_args: &[],
    x86_qemu_args: &[],
    only_on: &[],
    driver: None,
};

pub const COMPILE_FAIL: Scenario = Scenario {
    name: "compile-fail",
    about: "a module reading past the end of its Io<SIZE> must not build; in range it must",
    kind: Kind::CompileFail,
    ..Scenario::plain("compile-fail", Duration::from_secs(600))
};

pub const ID_TABLE: Scenario = Scenario {
    name: "id-table",
    about: "the driver's .ko keeps its PCI id table in read-only data, ending in a zero sentinel",
    kind: Kind::IdTable,
    ..Scenario::plain("id-table", Duration::from_secs(60))
};

/// Registers read and written from the guest through the BARs, no driver;
/// every access the guest reports must be in the device's own log.
pub const DEVICE: Scenario = Scenario {
    name: "device",
    about: "guest pokes BAR0/BAR2 per REGISTERS.md; the device log must show every access in order",
    timeout: Duration::from_secs(180),
    cmdline: "",
    kernel_lines: &[],
    kind: Kind::Device,
    device: true,
    qemu_args: &[],
    x86_qemu_args: &[],
    only_on: &[],
    driver: None,
};

/// The device's INTx through the kernel's generic INTx driver (uio), no
/// driver of ours; accesses checked against the device log as in `device`.
pub const INTX: Scenario = Scenario {
    name: "intx",
    about: "uio_pci_generic takes the device; each raised interrupt shows once in /proc/interrupts and IRQ_COUNT",
    kind: Kind::Device,
    device: true,
    ..Scenario::plain("intx", Duration::from_secs(180))
};

const fn driver_scenario(
    name: &'static str,
    about: &'static str,
    timeout: u64,
    expect: Option<DriverExpect>,
) -> Scenario {
    Scenario {
        name,
        about,
        timeout: Duration::from_secs(timeout),
        cmdline: "",
        kernel_lines: &[],
        kind: Kind::Runner,
        device: true,
        qemu_args: &[],
        x86_qemu_args: &[],
        only_on: &[],
        driver: expect,
    }
}

pub const PROBE: Scenario = driver_scenario(
    "probe",
    "insmod pci_rig: identify and every self-test step pass, the device is bound",
    180,
    driver(1, 0, 0, false, false),
);
pub const MMIO: Scenario = driver_scenario(
    "mmio",
    "every MMIO access the driver reports is in the device's log, in order, with its value",
    180,
    driver(1, 0, 0, true, false),
);
pub const UNBIND: Scenario = driver_scenario(
    "unbind",
    "sysfs unbind: remove runs once, the worker is refused once the binding ended, every device access accounted for, a kept handle is refused",
    180,
    driver(1, 1, 0, true, true),
);
pub const REBIND: Scenario = driver_scenario(
    "rebind",
    "unbind then bind again: a second clean probe",
    180,
    driver(2, 1, 0, true, false),
);
pub const MODULES: Scenario = driver_scenario(
    "modules",
    "insmod/rmmod 50 times with the device present; no leaked region in /proc/iomem",
    600,
    driver(50, 50, 0, false, false),
);
pub const PROBE_ERROR: Scenario = driver_scenario(
    "probe-error",
    "wrong identification (device knob): probe fails cleanly, BAR released; cleared: the driver binds",
    180,
    driver(1, 0, 1, false, false),
);

pub const HOTUNPLUG: Scenario = Scenario {
    x86_qemu_args: &["-global", "ICH9-LPC.acpi-pci-hotplug-with-bridge-support=off"],
    ..driver_scenario(
        "hotunplug-pciehp",
        "QMP device_del while the worker is busy (native PCIe hotplug): remove once, the worker refused, every device access accounted for; device_add: probes again",
        180,
        Some(DriverExpect {
            probes: 2,
            removes: 1,
            refused: 0,
            mmio: true,
            unbind: true,
            unplugs: 1,
            stop: WorkerStop::Refused,
        }),
    )
};

/// The same with ACPI hotplug (q35's default for its root ports): acpiphp
/// ejects the device.
pub const HOTUNPLUG_ACPI: Scenario = Scenario {
    name: "hotunplug-acpi",
    about: "as hotunplug-pciehp, with q35's ACPI PCI hotplug (acpiphp) doing the eject",
    x86_qemu_args: &[],
    only_on: &[Arch::X86_64],
    ..HOTUNPLUG
};

pub const SURPRISE: Scenario = Scenario {
    x86_qemu_args: HOTUNPLUG.x86_qemu_args,
    ..driver_scenario(
        "surprise",
        "the device reads all-ones while the worker is busy: it gives up by itself; then device_del: remove once, no Oops",
        180,
        Some(DriverExpect {
            probes: 1,
            removes: 1,
            refused: 0,
            mmio: true,
            unbind: true,
            unplugs: 1,
            stop: WorkerStop::Gone,
        }),
    )
};

/// The same with ACPI hotplug removing the device (x86_64): together with
/// `hotunplug-acpi`, the device going away without Linux 6.12's pciehp, whose
/// unplug path lockdep reports in debug kernels.
pub const SURPRISE_ACPI: Scenario = Scenario {
    name: "surprise-acpi",
    about: "as surprise, with q35's ACPI PCI hotplug (acpiphp) doing the eject",
    x86_qemu_args: &[],
    only_on: &[Arch::X86_64],
    ..SURPRISE
};

pub const ALL: &[&Scenario] = &[
    &BOOT,
    &KUNIT,
    &COMPILE_FAIL,
    &ID_TABLE,
    &DEVICE,
    &INTX,
    &PROBE,
    &MMIO,
    &UNBIND,
    &REBIND,
    &MODULES,
    &PROBE_ERROR,
    &HOTUNPLUG,
    &HOTUNPLUG_ACPI,
    &SURPRISE,
    &SURPRISE_ACPI,
    &AER,
    &BENCH,
    &HARNESS_SELFTEST,
];

pub const AER: Scenario = Scenario {
    kernel_lines: &[
        "AER: Correctable error message received",
        "AER: Uncorrectable (Non-Fatal) error message received",
    ],
    ..driver_scenario(
        "aer",
        "correctable, then uncorrectable non-fatal AER errors injected at the device's root port: the guest survives, the driver stays bound",
        180,
        driver(1, 0, 0, true, false),
    )
};

/// Figures, not a verdict on them (`cargo xtask bench` reports them): it
/// fails only when the module's figures are missing or malformed.
pub const BENCH: Scenario = Scenario {
    name: "bench",
    about:
        "pci_rig_bench: MMIO read raw / through Devres / under one guard on our device and pci-testdev, BAR2 throughput, unbind cost with K Devres values",
    kind: Kind::Bench,
    device: true,
    qemu_args: &["-device", "pci-testdev"],
    ..Scenario::plain("bench", Duration::from_secs(180))
};

/// `bench` as `cargo xtask bench` boots it: 5 rebinds of each unbind case
/// for medians, where the default run's smoke test does one.
pub const BENCH_FULL: Scenario = Scenario {
    cmdline: "pcirig.bench_rounds=30",
    ..BENCH
};

/// What `cargo xtask test --soak` repeats: the device going away under a
/// busy driver.
pub const SOAK: &[&Scenario] = &[&HOTUNPLUG, &HOTUNPLUG_ACPI, &SURPRISE, &SURPRISE_ACPI];

pub fn find(name: &str) -> Result<&'static Scenario, String> {
    ALL.iter().copied().find(|s| s.name == name).ok_or_else(|| {
        let names: Vec<&str> = ALL.iter().map(|s| s.name).collect();
        format!("unknown scenario `{name}`; valid: {}", names.join(", "))
    })
}

/// Why a boot failed, for callers that check the harness itself.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cause {
    Splat(Splat),
    Timeout,
    Checks,
    Unfinished,
    /// The device server died, or its log contradicts the guest.
    Device,
    /// The host could not do what the guest asked (a host action failed, the device refused
    /// a request), or QEMU itself exited with a failure.
    Host,
}

pub struct Judgement {
    pub verdict: Verdict,
    pub cause: Option<Cause>,
    pub reason: String,
    /// What a passing boot measured on the way (`remove_ms`, `unbind_ms`).
    pub timings: Timings,
}

impl Judgement {
    fn fail(cause: Cause, reason: String) -> Self {
        Judgement {
            verdict: Verdict::Fail,
            cause: Some(cause),
            reason,
            timings: Timings::new(),
        }
    }
}

const DONE: &str = "pcirig: done";

/// Judges one boot; `device` is what the device server left, when attached.
pub fn judge(s: &Scenario, c: &Console, device: &[Stopped]) -> Judgement {
    let text: Vec<&str> = c
        .lines
        .iter()
        .map(|l| console::strip_timestamp(l))
        .collect();
    if let Some((kind, line, excerpt)) = console::first_splat(&c.lines) {
        return Judgement::fail(
            Cause::Splat(kind),
            format!("{}: {line}\n{excerpt}", kind.name()),
        );
    }
    if !c.host_failures.is_empty() {
        return Judgement::fail(
            Cause::Host,
            format!(
                "the host failed the guest's requests:\n{}",
                c.host_failures.join("\n")
            ),
        );
    }
    // A server ends by itself, cleanly, when QEMU hangs up (the guest powered
    // off, or its device was unplugged), which may come before the harness
    // stops it; only a failed exit is a death.
    if let Some(status) = device
        .iter()
        .filter_map(|d| d.died)
        .find(|st| !st.success())
    {
        return Judgement::fail(
            Cause::Device,
            format!("the device server died during the boot ({status}); see device-stderr.log"),
        );
    }
    if c.timed_out {
        let last = c.lines.len().saturating_sub(8);
        return Judgement::fail(
            Cause::Timeout,
            format!(
                "timeout after {} s without powering off (last line: {})\n{}",
                s.timeout.as_secs(),
                c.lines
                    .last()
                    .map_or("none", |l| console::strip_timestamp(l)),
                c.lines[last..].join("\n")
            ),
        );
    }
    match c.exit {
        Some(status) if status.success() => {}
        Some(status) => {
            return Judgement::fail(
                Cause::Host,
                format!("QEMU exited with a failure ({status}); see qemu-stderr.log"),
            )
        }
        None => return Judgement::fail(Cause::Host, "QEMU's exit status is unknown".into()),
    }
    if s.kind == Kind::Kunit {
        return judge_kunit(c);
    }
    let mut plan = None;
    let mut results = Vec::new();
    for l in &text {
        match ktap::parse_line(l) {
            Some(Line::Plan { depth: 0, count }) => plan = Some(count),
            Some(Line::Result(r)) if r.depth == 0 => results.push(r),
            _ => {}
        }
    }
    // Every check of the runner must pass: a skipped one proved nothing.
    let failed: Vec<String> = results
        .iter()
        .filter(|r| !r.ok || r.skip)
        .map(|r| {
            let verdict = if r.ok { "ok" } else { "not ok" };
            format!("{verdict} {} {} # {}", r.number, r.name, r.directive)
        })
        .collect();
    if !failed.is_empty() {
        return Judgement::fail(
            Cause::Checks,
            format!("guest checks failed or skipped:\n{}", failed.join("\n")),
        );
    }
    if let Some(n) = plan {
        if results.len() != n {
            return Judgement::fail(
                Cause::Checks,
                format!("guest planned {n} checks but reported {}", results.len()),
            );
        }
    }
    for want in s.kernel_lines {
        if !text.iter().any(|l| l.contains(want)) {
            return Judgement::fail(Cause::Checks, format!("the kernel never printed `{want}`"));
        }
    }
    if !text.contains(&DONE) {
        return Judgement::fail(
            Cause::Unfinished,
            "the guest stopped before its scenario finished".into(),
        );
    }
    let mut backed = String::new();
    if s.kind == Kind::Device {
        let claims: Vec<Claimed> = text.iter().filter_map(|l| device::parse_claim(l)).collect();
        let log: Vec<Access> = device.iter().flat_map(|d| d.log.iter().cloned()).collect();
        let log = &log[..];
        if claims.is_empty() {
            return Judgement::fail(Cause::Checks, "the guest reported no MMIO accesses".into());
        }
        if let Err(e) = device::match_claims(&claims, log) {
            return Judgement::fail(Cause::Device, e);
        }
        let bar = log.iter().filter(|a| a.region != "config").count();
        backed = format!(
            ", all {} reported MMIO accesses found in order in the device log ({bar} BAR accesses logged)",
            claims.len()
        );
    }
    if s.kind == Kind::Bench {
        match GuestFigures::parse(&text).and_then(|g| g.check_complete().map(|()| g)) {
            Ok(g) => backed.push_str(&format!("; {}", g.summary())),
            Err(e) => return Judgement::fail(Cause::Checks, e),
        }
    }
    let mut timings = Timings::new();
    if let Some(want) = s.driver {
        match judge_driver(&want, c, device) {
            Ok(summary) => backed.push_str(&summary),
            Err(e) => return Judgement::fail(Cause::Device, e),
        }
        // The first unbind is the one unbind and unplug scenarios are about.
        let first = |to| {
            driver::between_ms(&c.lines, "remove_begin", to)
                .first()
                .copied()
        };
        if let Some(ms) = first("remove_done") {
            backed.push_str(&format!(", remove() took {ms:.1} ms"));
            timings.insert("remove_ms", ms);
        }
        if let Some(ms) = first("worker_stopped") {
            backed.push_str(&format!(
                ", the worker joined {ms:.1} ms after remove() began"
            ));
            timings.insert("unbind_ms", ms);
        }
    }
    Judgement {
        verdict: Verdict::Pass,
        cause: None,
        reason: format!(
            "{}/{} guest checks ok, {} kernel lines seen{backed}, powered off after {:.1} s",
            results.len(),
            plan.unwrap_or(results.len()),
            s.kernel_lines.len(),
            c.elapsed.as_secs_f64()
        ),
        timings,
    }
}

/// The driver did what `want` says, and the device log agrees.
fn judge_driver(want: &DriverExpect, c: &Console, device: &[Stopped]) -> Result<String, String> {
    let lines = &c.lines[..];
    // Servers in attach order: their logs end to end are the device's history.
    let log: Vec<Access> = device.iter().flat_map(|d| d.log.iter().cloned()).collect();
    let log = &log[..];
    let r = driver::report(lines);
    let counts = [
        ("probe_done", want.probes),
        ("remove_done", want.removes),
        ("remove_begin", want.removes),
    ];
    for (event, n) in counts {
        if r.count(event) != n {
            return Err(format!(
                "driver printed `event {event}` {} times, expected {n}",
                r.count(event)
            ));
        }
    }
    let refused = r
        .steps
        .iter()
        .filter(|(n, ok)| n == "identify" && !ok)
        .count();
    if refused != want.refused {
        return Err(format!(
            "driver refused identification {refused} times, expected {}",
            want.refused
        ));
    }
    let failed: Vec<&str> = r
        .failed_steps()
        .into_iter()
        .filter(|n| *n != "identify")
        .collect();
    if !failed.is_empty() {
        return Err(format!(
            "driver self-test steps failed: {}",
            failed.join(", ")
        ));
    }
    let claims = driver::claims(lines);
    let mut summary = format!(
        ", driver: {} probes, {} removes, {} steps ok",
        want.probes,
        want.removes,
        r.steps.len() - refused
    );
    if want.mmio {
        device::match_claims(&claims, log)?;
        summary.push_str(&format!(
            ", all {} driver MMIO accesses in the device log",
            claims.len()
        ));
    }
    let deleted = c.events.iter().filter(|e| device::deleted(e)).count();
    if deleted != want.unplugs {
        return Err(format!(
            "QEMU reported DEVICE_DELETED for `{}` {deleted} times, expected {}",
            device::QEMU_ID,
            want.unplugs
        ));
    }
    if want.unplugs > 0 {
        summary.push_str(&format!(", {deleted} DEVICE_DELETED"));
    }
    if want.unbind {
        let reason = format!("reason={:?} ", want.stop);
        let gave_up = r.event("worker_gave_up").unwrap_or("");
        if !gave_up.starts_with(&reason) {
            return Err(format!(
                "the worker did not stop by itself with {reason}: `{gave_up}`"
            ));
        }
        let at = |event| driver::event_at(lines, event);
        let (gave, began, done) = (at("worker_gave_up"), at("remove_begin"), at("remove_done"));
        let when = match want.stop {
            WorkerStop::Gone if gave < began => "before remove()",
            WorkerStop::Refused if gave > done => "once remove() returned",
            _ => return Err(format!("the worker stopped with {reason}at the wrong time: line {gave:?}, remove() lines {began:?} to {done:?}")),
        };
        let joined = r.event("worker_stopped").unwrap_or("");
        if joined != gave_up {
            return Err(format!(
                "the binding's release saw the worker stop differently: `{joined}` against `{gave_up}`"
            ));
        }
        // The first binding lasted while the first server was attached.
        let first = device.first().map_or(&[][..], |d| &d.log[..]);
        let counted = driver::account_for_accesses(lines, first)?;
        if r.event("kept_handle") != Some("refused") {
            return Err(format!(
                "a handle kept across unbind was not refused: {:?}",
                r.event("kept_handle")
            ));
        }
        summary.push_str(&format!(
            ", worker gave up {when}: {gave_up}, every BAR access reported or among the worker's {counted}, kept handle refused"
        ));
    }
    Ok(summary)
}

/// KUnit's rules (`kunit::judge`).
fn judge_kunit(c: &Console) -> Judgement {
    match kunit::judge(&c.lines, kunit::EXPECTED_SKIPS) {
        Ok(summary) => Judgement {
            verdict: Verdict::Pass,
            cause: None,
            reason: summary,
            timings: Timings::new(),
        },
        Err(e) => Judgement::fail(Cause::Checks, e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::process::ExitStatusExt;

    fn console(lines: &[&str], timed_out: bool) -> Console {
        Console {
            lines: lines.iter().map(|s| s.to_string()).collect(),
            timed_out,
            exit: Some(ExitStatusExt::from_raw(0)),
            host_failures: vec![],
            elapsed: Duration::from_millis(1500),
            events: vec![],
        }
    }

    const GOOD: &[&str] = &[
        "[    0.1] Linux version 6.12",
        "KTAP version 1",
        "1..2",
        "[    0.5] rust_minimal: Rust minimal sample (init)",
        "ok 1 insmod_rust_minimal",
        "[    0.6] rust_minimal: My numbers are [72, 108, 200]",
        "[    0.6] rust_minimal: Rust minimal sample (exit)",
        "ok 2 rmmod_rust_minimal",
        "pcirig: done",
    ];

    #[test]
    fn a_clean_boot_passes() {
        let j = judge(&BOOT, &console(GOOD, false), &[]);
        assert_eq!(j.verdict, Verdict::Pass, "{}", j.reason);
        assert!(j.reason.starts_with("2/2 guest checks ok"), "{}", j.reason);
    }

    #[test]
    fn bench_fails_without_its_figures_and_passes_with_them() {
        let runner = [
            "KTAP version 1",
            "1..1",
            "ok 1 insmod_bench",
            "pcirig: done",
        ];
        let j = judge(&BENCH, &console(&runner, false), &[]);
        assert_eq!(j.cause, Some(Cause::Checks));
        assert!(
            j.reason
                .starts_with("bench lines missing: mmio dev=pci-testdev, mmio dev=pci-rig, window"),
            "{}",
            j.reason
        );
        let mut lines = runner.to_vec();
        let figures = [
            "x: bench mmio dev=pci-testdev reads=3232 raw_ns=200 devres_ns=204 guard_ns=200",
            "x: bench mmio dev=pci-rig reads=3232 raw_ns=70000 devres_ns=70100 guard_ns=70000",
            "x: bench window bytes=65536 ns=1000000000 kib_per_s=64",
            "x: bench revoke_each k=1 ns=1",
            "x: bench revoke_each k=16 ns=16",
            "x: bench revoke_each k=64 ns=64",
            "x: bench unbind k=1 worker=idle remove_ns=1 total_ns=1000000",
            "x: bench unbind k=16 worker=idle remove_ns=1 total_ns=1000000",
            "x: bench unbind k=64 worker=idle remove_ns=1 total_ns=1000000",
            "x: bench unbind k=1 worker=busy remove_ns=1 total_ns=2000000",
            "x: bench unbind k=16 worker=busy remove_ns=1 total_ns=2000000",
            "x: bench unbind k=64 worker=busy remove_ns=1 total_ns=2000000",
        ];
        lines.splice(3..3, figures);
        let j = judge(&BENCH, &console(&lines, false), &[]);
        assert_eq!(j.verdict, Verdict::Pass, "{}", j.reason);
        assert!(
            j.reason.contains("pci-testdev read 200 ns raw, b/a 1.02"),
            "{}",
            j.reason
        );
        lines[4] = "x: bench mmio dev=pci-rig reads=3232 raw_ns=seventy devres_ns=1 guard_ns=1";
        let j = judge(&BENCH, &console(&lines, false), &[]);
        assert!(
            j.reason.starts_with("raw_ns= is not a number"),
            "{}",
            j.reason
        );
    }

    #[test]
    fn a_timeout_fails_with_the_last_lines() {
        let j = judge(&BOOT, &console(&GOOD[..4], true), &[]);
        assert_eq!(j.cause, Some(Cause::Timeout));
        assert!(j.reason.starts_with("timeout after 120 s without powering off (last line: rust_minimal: Rust minimal sample (init))"), "{}", j.reason);
    }

    #[test]
    fn a_splat_fails_even_when_everything_else_passed() {
        let mut lines = GOOD.to_vec();
        lines.insert(
            5,
            "[    0.55] WARNING: CPU: 0 PID: 1 at lib/x.c:1 f+0x0/0x1",
        );
        let j = judge(&BOOT, &console(&lines, false), &[]);
        assert_eq!(j.cause, Some(Cause::Splat(Splat::Warning)));
        assert!(
            j.reason
                .starts_with("WARNING: WARNING: CPU: 0 PID: 1 at lib/x.c:1"),
            "{}",
            j.reason
        );
    }

    #[test]
    fn failed_missing_and_unfinished_checks_fail() {
        let mut bad = GOOD.to_vec();
        bad[7] = "not ok 2 rmmod_rust_minimal # rmmod: can't unload";
        assert_eq!(
            judge(&BOOT, &console(&bad, false), &[]).cause,
            Some(Cause::Checks)
        );

        let mut short = GOOD.to_vec();
        short.remove(7);
        let j = judge(&BOOT, &console(&short, false), &[]);
        assert!(
            j.reason.contains("planned 2 checks but reported 1"),
            "{}",
            j.reason
        );

        let mut no_exit = GOOD.to_vec();
        no_exit.remove(6);
        let j = judge(&BOOT, &console(&no_exit, false), &[]);
        assert!(j.reason.contains("(exit)"), "{}", j.reason);

        let j = judge(&BOOT, &console(&GOOD[..8], false), &[]);
        assert_eq!(j.cause, Some(Cause::Unfinished));
    }

    #[test]
    fn a_failed_host_action_a_refused_request_or_a_failed_qemu_fails_the_boot() {
        let mut c = console(GOOD, false);
        c.host_failures = vec!["host unplug: QMP device_del: Device 'pcirig' not found".into()];
        let j = judge(&BOOT, &c, &[]);
        assert_eq!(j.cause, Some(Cause::Host));
        assert!(
            j.reason.contains("Device 'pcirig' not found"),
            "{}",
            j.reason
        );

        let mut c = console(GOOD, false);
        c.host_failures =
            vec![r#"device request {"cmd":"set_knobs","nope":1}: device refused"#.into()];
        assert_eq!(judge(&BOOT, &c, &[]).cause, Some(Cause::Host));

        let mut c = console(GOOD, false);
        c.exit = Some(ExitStatusExt::from_raw(1 << 8));
        let j = judge(&BOOT, &c, &[]);
        assert_eq!(j.cause, Some(Cause::Host));
        assert!(
            j.reason
                .contains("QEMU exited with a failure (exit status: 1)"),
            "{}",
            j.reason
        );
        c.exit = None;
        assert_eq!(judge(&BOOT, &c, &[]).cause, Some(Cause::Host));
    }

    #[test]
    fn a_failing_check_that_says_skip_fails_and_a_skipped_check_fails_too() {
        let mut bad = GOOD.to_vec();
        bad[7] = "not ok 2 rmmod_rust_minimal # skipping: rmmod: can't unload";
        let j = judge(&BOOT, &console(&bad, false), &[]);
        assert_eq!(j.cause, Some(Cause::Checks), "{}", j.reason);
        bad[7] = "ok 2 rmmod_rust_minimal # SKIP not tried";
        let j = judge(&BOOT, &console(&bad, false), &[]);
        assert_eq!(j.cause, Some(Cause::Checks), "{}", j.reason);
        assert!(
            j.reason
                .contains("ok 2 rmmod_rust_minimal # SKIP not tried"),
            "{}",
            j.reason
        );
    }

    #[test]
    fn kunit_boots_are_judged_by_kunits_rules() {
        // Complete and passing, but without most of our modules' doctests.
        let few = [
            "KTAP version 1",
            "1..1",
            "    # Subtest: rust_doctests_kernel",
            "    1..2",
            "    ok 1 rust_doctest_kernel_revocable_rs_0",
            "    ok 2 rust_doctest_kernel_io_rs_0",
            "ok 1 rust_doctests_kernel",
            "pcirig: done",
        ];
        let j = judge(&KUNIT, &console(&few, false), &[]);
        assert_eq!(j.cause, Some(Cause::Checks));
        assert!(
            j.reason
                .contains("module io: 1 doctests ran, at least 12 expected"),
            "{}",
            j.reason
        );
        let j = judge(&KUNIT, &console(&few[7..], false), &[]);
        assert!(j.reason.contains("no suites"), "{}", j.reason);
    }

    fn access(seq: u64, offset: u64, value: u64, kind: &str) -> Access {
        Access {
            seq,
            time_ns: seq,
            region: "bar0".into(),
            offset,
            size: 4,
            value: Some(value),
            kind: kind.into(),
            class: "ok".into(),
        }
    }

    #[test]
    fn unbind_needs_a_refused_worker_an_accounted_device_log_and_a_refused_handle() {
        let lines = driver_lines(&[
            "event probe_begin",
            "# mmio r bar0 0x0 4 0x70726967",
            "step identify ok magic=0x70726967",
            "event probe_done",
            "event remove_begin",
            "# mmio w bar0 0x50 4 0x1",
            "event remove_done",
            "event worker_gave_up reason=Refused accesses=2",
            "event worker_stopped reason=Refused accesses=2",
            "event kept_handle refused",
        ]);
        let want = UNBIND.driver.unwrap();
        let judge_driver = |want: &DriverExpect, lines: &[String], log: &[Access]| {
            judge_driver(want, &console_of(lines, vec![]), &stopped(log))
        };
        // The worker's reads may go on until the binding ends, after remove().
        let log = vec![
            access(1, 0, 0x7072_6967, "read"),
            access(2, 0, 0x7072_6967, "read"),
            access(3, 0x50, 1, "write"),
            access(4, 0, 0x7072_6967, "read"),
        ];
        let ok = judge_driver(&want, &lines, &log).unwrap();
        assert!(
            ok.contains("worker gave up once remove() returned: reason=Refused accesses=2")
                && ok.contains("among the worker's 2"),
            "{ok}"
        );

        let mut late = log.clone();
        late.push(access(5, 0, 0x7072_6967, "read"));
        let e = judge_driver(&want, &lines, &late).unwrap_err();
        assert!(e.contains("3 MAGIC reads"), "{e}");

        let mut early = lines.clone();
        early.swap(4, 7);
        let e = judge_driver(&want, &early, &log).unwrap_err();
        assert!(e.contains("at the wrong time"), "{e}");

        let mut gone = lines.clone();
        gone[7] = "pci_rig 0000:01:00.0: event worker_gave_up reason=Gone accesses=2".into();
        let e = judge_driver(&want, &gone, &log).unwrap_err();
        assert!(
            e.contains("did not stop by itself with reason=Refused"),
            "{e}"
        );

        let mut leaked = lines.clone();
        leaked.pop();
        assert!(judge_driver(&want, &leaked, &log)
            .unwrap_err()
            .contains("kept across unbind"));

        // The driver's word alone is not enough: its accesses must be in the log.
        assert!(judge_driver(&want, &lines, &log[2..])
            .unwrap_err()
            .contains("not in the device log"));
    }

    /// Console lines from our driver's device.
    fn driver_lines(texts: &[&str]) -> Vec<String> {
        texts
            .iter()
            .map(|t| format!("pci_rig 0000:01:00.0: {t}"))
            .collect()
    }

    fn console_of(lines: &[String], events: Vec<serde_json::Value>) -> Console {
        Console {
            lines: lines.to_vec(),
            timed_out: false,
            exit: Some(ExitStatusExt::from_raw(0)),
            host_failures: vec![],
            elapsed: Duration::ZERO,
            events,
        }
    }

    fn stopped(log: &[Access]) -> Vec<Stopped> {
        use std::os::unix::process::ExitStatusExt;
        vec![Stopped {
            died: None,
            status: std::process::ExitStatus::from_raw(0),
            log: log.to_vec(),
        }]
    }

    #[test]
    fn a_server_that_failed_is_a_death_one_that_saw_qemu_hang_up_is_not() {
        use std::os::unix::process::ExitStatusExt;
        let runner = ["KTAP version 1", "1..1", "ok 1 find_dev", "pcirig: done"];
        let s = Scenario {
            device: true,
            ..Scenario::plain("device-ish", Duration::from_secs(60))
        };
        let mut servers = stopped(&[]);
        servers[0].died = Some(std::process::ExitStatus::from_raw(0));
        let j = judge(&s, &console(&runner, false), &servers);
        assert_eq!(j.verdict, Verdict::Pass, "{}", j.reason);
        servers.push(stopped(&[]).remove(0));
        servers[1].died = Some(std::process::ExitStatus::from_raw(1 << 8));
        let j = judge(&s, &console(&runner, false), &servers);
        assert_eq!(j.cause, Some(Cause::Device), "{}", j.reason);
        assert!(j.reason.contains("exit status: 1"), "{}", j.reason);
    }

    #[test]
    fn surprise_needs_the_worker_to_give_up_and_qemu_to_delete_the_device() {
        let lines = driver_lines(&[
            "event probe_begin",
            "# mmio r bar0 0x0 4 0x70726967",
            "step identify ok magic=0x70726967",
            "event probe_done",
            "event worker_gave_up reason=Gone accesses=1",
            "event remove_begin",
            "# mmio w bar0 0x50 4 0x1",
            "event remove_done",
            "event worker_stopped reason=Gone accesses=1",
            "event kept_handle refused",
        ]);
        let log = [
            access(1, 0, 0x7072_6967, "read"),
            access(2, 0, 0xffff_ffff, "read"),
            access(3, 0x50, 1, "write"),
        ];
        let deleted = serde_json::json!({"event": "DEVICE_DELETED", "data": {"device": "pcirig"}});
        let want = SURPRISE.driver.unwrap();
        let ok = judge_driver(
            &want,
            &console_of(&lines, vec![deleted.clone()]),
            &stopped(&log),
        );
        assert!(ok
            .unwrap()
            .contains("worker gave up before remove(): reason=Gone"));

        let e = judge_driver(&want, &console_of(&lines, vec![]), &stopped(&log)).unwrap_err();
        assert!(e.contains("DEVICE_DELETED"), "{e}");

        let mut refused = lines.clone();
        refused[4] = "pci_rig 0000:01:00.0: event worker_gave_up reason=Refused accesses=1".into();
        let e =
            judge_driver(&want, &console_of(&refused, vec![deleted]), &stopped(&log)).unwrap_err();
        assert!(e.contains("did not stop by itself with reason=Gone"), "{e}");
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
}
