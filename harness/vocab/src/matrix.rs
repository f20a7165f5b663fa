//! The fault × state matrix: each device fault or host action crossed with
//! each state the driver can be in when it strikes. One table: a cell's
//! guest script, the kernel lines it must see and what the judge expects of
//! the driver (`DriverExpect`: AER outcomes, sleeps, the stream) all come
//! from its state and its fault, never written per cell.
//!
//! A cell is a scenario named `matrix-STATE-FAULT`: the driver binds with its
//! worker busy, the guest brings it into STATE and waits for the evidence
//! that it is there (the worker reading again, the stream's rounds), then
//! FAULT strikes, the guest waits for the evidence that the driver came
//! through (the recovery, the wake, the worker reading again), and the
//! binding ends with an unbind. `cargo xtask test --matrix` runs every cell;
//! the default run draws a seeded sample per arch (`sample`).

use crate::arch::Arch;
use crate::scenario::{AerEnd, Check, DriverExpect, Machine, Scenario};
use std::sync::OnceLock;
use std::time::Duration;

/// What the driver is doing when the fault strikes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum State {
    /// Bound, its worker reading the device.
    Idle,
    /// The device's receive stream running: a DMA from the device in flight.
    Streaming,
    /// Just after a function reset (sysfs `reset`: FLR), set up again.
    AfterReset,
    /// Just after a system sleep and wake (s2idle through pm_test).
    AfterSleep,
    /// Just after a runtime suspend and the resume user space asked for.
    AfterRuntimeResume,
    /// Just after a fatal error recovered (its link reset): a second one is the second reset
    /// of the binding.
    AfterFatal,
    /// Runtime-suspended: the device in D3hot, the driver's runtime suspend done.
    RuntimeSuspended,
    /// The device stopped answering (the `hang` fault: its BARs read all-ones, its config
    /// space still answers), and the worker saw it.
    Hung,
}

/// What strikes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    /// A correctable AER error at the root port: logged, nothing else.
    Correctable,
    /// An uncorrectable non-fatal one: recovered without a reset.
    NonFatal,
    /// An uncorrectable fatal one: the link reset, the device set up again.
    Fatal,
    /// A function reset outside error recovery (sysfs `reset`).
    FunctionReset,
    /// A system sleep and wake.
    SystemSleep,
    /// A runtime suspend, then the resume user space asks for.
    RuntimeSuspend,
}

pub const STATES: [State; 8] = [
    State::Idle,
    State::Streaming,
    State::AfterReset,
    State::AfterSleep,
    State::AfterRuntimeResume,
    State::AfterFatal,
    State::RuntimeSuspended,
    State::Hung,
];

pub const FAULTS: [Fault; 6] = [
    Fault::Correctable,
    Fault::NonFatal,
    Fault::Fatal,
    Fault::FunctionReset,
    Fault::SystemSleep,
    Fault::RuntimeSuspend,
];

impl State {
    pub fn name(self) -> &'static str {
        match self {
            State::Idle => "idle",
            State::Streaming => "streaming",
            State::AfterReset => "after-reset",
            State::AfterSleep => "after-sleep",
            State::AfterRuntimeResume => "after-runtime-resume",
            State::AfterFatal => "after-fatal",
            State::RuntimeSuspended => "runtime-suspended",
            State::Hung => "hung",
        }
    }

    /// The guest's part that brings the binding into this state, and waits
    /// for the evidence that it is there.
    fn script(self) -> &'static str {
        match self {
            State::Idle => "",
            State::Streaming => {
                "check stream_ran wait_for 100 logged 11 \"# dma received\"\n"
            }
            State::AfterReset => {
                "clear_log\n\
                 check state_reset put \"$dev/reset\" 1\n\
                 check state_reset_done wait_for 100 logged 1 \"event reset_done\"\n\
                 check state_worker_reading wait_for 100 logged 1 \"event worker_reading\"\n"
            }
            State::AfterSleep => "check state_sleep system_sleep\n",
            State::AfterRuntimeResume => {
                "check state_rpm_allow put \"$dev/power/control\" auto\n\
                 check state_rpm_suspended wait_for 100 rpm_is suspended\n\
                 check state_rpm_wake put \"$dev/power/control\" on\n\
                 check state_rpm_awake rpm_is active\n"
            }
            State::AfterFatal => {
                "clear_log\n\
                 host aer rp0 MALF_TLP\n\
                 check state_fatal_recovered wait_for 100 logged 1 \"AER: device recovery successful\"\n\
                 check state_worker_reading wait_for 100 logged 1 \"event worker_reading\"\n"
            }
            State::RuntimeSuspended => {
                "check state_rpm_allow put \"$dev/power/control\" auto\n\
                 check state_rpm_suspended wait_for 100 rpm_is suspended\n"
            }
            State::Hung => {
                "check state_hang_armed arm hang 1\n\
                 check state_worker_saw_hang wait_for 100 logged 1 \"event worker_hung\"\n"
            }
        }
    }
}

impl Fault {
    pub fn name(self) -> &'static str {
        match self {
            Fault::Correctable => "correctable",
            Fault::NonFatal => "nonfatal",
            Fault::Fatal => "fatal",
            Fault::FunctionReset => "function-reset",
            Fault::SystemSleep => "sleep",
            Fault::RuntimeSuspend => "runtime-suspend",
        }
    }

    /// The guest's part that strikes, and waits for the driver to come
    /// through.
    fn script(self) -> &'static str {
        match self {
            Fault::Correctable => {
                "clear_log\n\
                 host aer rp0 RCVR\n\
                 check correctable_logged wait_for 100 logged 1 \"AER: Correctable error message received\"\n"
            }
            Fault::NonFatal => {
                "clear_log\n\
                 host aer rp0 POISON_TLP\n\
                 check nonfatal_recovered wait_for 100 logged 1 \"AER: device recovery successful\"\n\
                 check nonfatal_worker_reading wait_for 100 logged 1 \"event worker_reading\"\n"
            }
            Fault::Fatal => {
                "clear_log\n\
                 host aer rp0 MALF_TLP\n\
                 check fatal_recovered wait_for 100 logged 1 \"AER: device recovery successful\"\n\
                 check fatal_worker_reading wait_for 100 logged 1 \"event worker_reading\"\n"
            }
            Fault::FunctionReset => {
                "clear_log\n\
                 check function_reset put \"$dev/reset\" 1\n\
                 check reset_done wait_for 100 logged 1 \"event reset_done\"\n\
                 check reset_worker_reading wait_for 100 logged 1 \"event worker_reading\"\n"
            }
            Fault::SystemSleep => "check sleep system_sleep\n",
            Fault::RuntimeSuspend => {
                "check rpm_allow put \"$dev/power/control\" auto\n\
                 check rpm_suspended wait_for 100 rpm_is suspended\n\
                 check rpm_wake put \"$dev/power/control\" on\n\
                 check rpm_awake rpm_is active\n"
            }
        }
    }
}

const CORRECTABLE: &str = "AER: Correctable error message received";
const NON_FATAL: &str = "AER: Uncorrectable (Non-Fatal) error message received";
const FATAL: &str = "AER: Uncorrectable (Fatal) error message received";
const RECOVERED: &str = "AER: device recovery successful";

/// One cell: a state and the fault that strikes in it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Cell {
    pub state: State,
    pub fault: Fault,
}

/// The guest's first part: the device, the stream when the state wants it,
/// the binding with its worker reading.
const PROLOGUE: &str = "\
rpm_is() { read -r s < \"$dev/power/runtime_status\"; [ \"$s\" = \"$1\" ]; }
check device_present find_dev
check insmod_pci_rig insmod /lib/modules/pci_rig.ko
check bound bound_to pci_rig
check worker_reading wait_for 100 logged 1 \"event worker_reading\"
";

/// Set before a system sleep: s2idle through every device phase, back after 1 s.
const PM_TEST: &str = "\
check pm_test_platform put /sys/power/pm_test platform
check pm_test_delay put /sys/module/suspend/parameters/pm_test_delay 1
";

/// The binding ends with an unbind; the guest stays up to see nothing come after.
const EPILOGUE: &str = "\
check still_bound bound_to pci_rig
check unbind unbind_dev pci_rig
check unbound unbound
settle
";

impl Cell {
    /// Whether the cell is in the matrix: a hung device is judged only through the error
    /// recovery that must bring it back (an uncorrectable error: `mmio_enabled` finds it
    /// not answering and asks for the reset); a runtime-suspended one only through what
    /// wakes it by itself (a function reset: the PCI core resumes it first).
    pub fn applies(self) -> bool {
        match self.state {
            // Not a non-fatal error on a hung device, yet: 6.12 answers `mmio_enabled`'s
            // NeedReset on a link that was not frozen with `slot_reset` and no reset
            // (pcie/err.c), the device stays hung and the driver lets go from `slot_reset`;
            // the judge knows letting go only from `error_detected` and a hang only ended by
            // a reset (docs/matrix.md; issue 58's M1).
            State::Hung => self.fault == Fault::Fatal,
            State::RuntimeSuspended => self.fault == Fault::FunctionReset,
            _ => true,
        }
    }

    /// How the binding comes out of each uncorrectable error, in order, as the AER rules
    /// count it: a hung device is brought back by the fatal error's link reset.
    fn aer(self) -> &'static [AerEnd] {
        use AerEnd::{Recovered, Reset};
        match (self.state, self.fault) {
            (State::Hung, _) => &[Reset],
            (State::AfterFatal, Fault::NonFatal) => &[Reset, Recovered],
            (State::AfterFatal, Fault::Fatal) => &[Reset, Reset],
            (State::AfterFatal, _) => &[Reset],
            (_, Fault::NonFatal) => &[Recovered],
            (_, Fault::Fatal) => &[Reset],
            _ => &[],
        }
    }

    /// The lines the kernel must print.
    fn kernel_lines(self) -> &'static [&'static str] {
        let fatal_first = self.state == State::AfterFatal;
        match (fatal_first, self.fault) {
            (false, Fault::Correctable) => &[CORRECTABLE],
            (false, Fault::NonFatal) => &[NON_FATAL, RECOVERED],
            (_, Fault::Fatal) => &[FATAL, RECOVERED],
            (true, Fault::Correctable) => &[FATAL, RECOVERED, CORRECTABLE],
            (true, Fault::NonFatal) => &[FATAL, NON_FATAL, RECOVERED],
            (true, _) => &[FATAL, RECOVERED],
            (false, _) => &[],
        }
    }

    pub fn name(self) -> String {
        format!("matrix-{}-{}", self.state.name(), self.fault.name())
    }

    /// What the judge expects of the driver: one binding ended at unbind with
    /// its worker busy, plus what the state and the fault bring.
    pub fn expect(self) -> DriverExpect {
        let sleeps = |s| usize::from(s);
        DriverExpect {
            stream: self.state == State::Streaming,
            aer: self.aer(),
            sleeps: sleeps(self.state == State::AfterSleep)
                + sleeps(self.fault == Fault::SystemSleep),
            runtime_sleeps: sleeps(matches!(
                self.state,
                State::AfterRuntimeResume | State::RuntimeSuspended
            )) + sleeps(self.fault == Fault::RuntimeSuspend),
            ..DriverExpect::ENDED_BUSY
        }
    }

    /// The cell's guest script, from its state's and its fault's parts.
    pub fn script(self) -> String {
        let mut s = format!(
            "# {}: generated from the fault x state table (harness/vocab/src/matrix.rs).\n",
            self.name()
        );
        if self.state == State::Streaming {
            s.push_str(
                "check stream_offered device_sync '{\"cmd\":\"set_knobs\",\"stream\":true}'\n",
            );
        }
        s.push_str(PROLOGUE);
        if self.state == State::AfterSleep || self.fault == Fault::SystemSleep {
            s.push_str(PM_TEST);
        }
        s.push_str(self.state.script());
        s.push_str(self.fault.script());
        s.push_str(EPILOGUE);
        s
    }

    fn scenario(self) -> Scenario {
        let leak = |s: String| -> &'static str { Box::leak(s.into_boxed_str()) };
        let about = leak(format!(
            "fault x state cell: {:?} strikes with the driver {:?}",
            self.fault, self.state
        ));
        Scenario {
            about,
            kernel_lines: self.kernel_lines(),
            machine: Machine::Device,
            check: Check::Driver(self.expect()),
            ..Scenario::runner(
                leak(self.name()),
                leak(self.script()),
                Duration::from_secs(180),
            )
        }
    }
}

/// Every cell, state-major.
pub fn cells() -> Vec<Cell> {
    STATES
        .iter()
        .flat_map(|&state| FAULTS.iter().map(move |&fault| Cell { state, fault }))
        .filter(|c| c.applies())
        .collect()
}

/// Every cell as a scenario, made once.
pub fn scenarios() -> &'static [Scenario] {
    static ALL: OnceLock<Vec<Scenario>> = OnceLock::new();
    ALL.get_or_init(|| cells().into_iter().map(Cell::scenario).collect())
}

/// The cells one run draws on `arch`: `n` of them, from `seed` (the run prints it; the same
/// seed draws the same cells).
pub fn sample(seed: u64, arch: Arch, n: usize) -> Vec<&'static Scenario> {
    let all = scenarios();
    let mut x = (seed ^ (arch as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15)) | 1;
    let mut keyed: Vec<(u64, usize)> = (0..all.len())
        .map(|i| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x, i)
        })
        .collect();
    keyed.sort_unstable();
    let mut picked: Vec<usize> = keyed.iter().take(n).map(|(_, i)| *i).collect();
    picked.sort_unstable();
    picked.into_iter().map(|i| &all[i]).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_cell_has_a_name_a_script_and_expectations_from_the_table() {
        let all = scenarios();
        assert_eq!(all.len(), cells().len());
        assert_eq!(all.len(), 5 * FAULTS.len() + FAULTS.len() + 1 + 1);
        let twice = Cell {
            state: State::AfterFatal,
            fault: Fault::Fatal,
        };
        assert_eq!(twice.expect().aer, &[AerEnd::Reset, AerEnd::Reset]);
        let hung = Cell {
            state: State::Hung,
            fault: Fault::Fatal,
        };
        assert_eq!(hung.expect().aer, &[AerEnd::Reset]);
        assert_eq!(hung.kernel_lines(), &[FATAL, RECOVERED]);
        assert!(hung.script().contains("arm hang 1"));
        let mut names: Vec<&str> = all.iter().map(|s| s.name).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), all.len(), "names are unique");
        let cell = Cell {
            state: State::AfterSleep,
            fault: Fault::Fatal,
        };
        let want = cell.expect();
        assert_eq!(want.sleeps, 1);
        assert_eq!(want.aer, &[AerEnd::Reset]);
        assert!(!want.stream);
        let script = cell.script();
        assert!(script.contains("system_sleep") && script.contains("MALF_TLP"));
        assert!(script.contains("pm_test_platform"));
        // Each check's name is unique in its script: the KTAP names tell them apart.
        for s in all {
            let mut checks: Vec<&str> = s
                .script
                .lines()
                .filter_map(|l| l.strip_prefix("check "))
                .map(|l| l.split_whitespace().next().unwrap())
                .collect();
            let n = checks.len();
            checks.sort();
            checks.dedup();
            assert_eq!(checks.len(), n, "{}", s.name);
        }
    }

    #[test]
    fn a_sample_is_seeded_per_arch() {
        let a = sample(7, Arch::X86_64, 2);
        assert_eq!(a.len(), 2);
        let names = |v: &[&Scenario]| v.iter().map(|s| s.name).collect::<Vec<_>>();
        assert_eq!(names(&a), names(&sample(7, Arch::X86_64, 2)));
        let differ = (0..20).any(|seed| names(&sample(seed, Arch::X86_64, 2)) != names(&a));
        assert!(differ);
    }
}
