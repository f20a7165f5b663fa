//! Where one boot's time went: the points a boot passes (QEMU started, the
//! console's first byte, the kernel's `Run /init as init process`, the
//! scenario's start line, the oracle's arming, `pcirig: done`, QEMU's exit),
//! each by the host's clock (ms since QEMU was spawned, taken as the line
//! came off the console) and, where the line carries one, by the guest's
//! printk stamp; and the durations between them.

use crate::console;
use crate::requests::{GuestRequest, HostAction, DONE};
use serde::{Deserialize, Serialize};

/// The line `images/init` prints once the host answered its arming request.
pub const ARMED: &str = "pcirig: oracle armed";

/// What `images/init` prints before the scenario (`pcirig: scenario NAME on
/// ARCH, kernel …`).
pub const SCENARIO: &str = "pcirig: scenario ";

/// Defines `Phases` (every field an `Option<f64>` in ms, left out of JSON
/// when `None`) and the list of its fields, written once.
macro_rules! phases {
    ($($(#[doc = $doc:literal])* $name:ident,)*) => {
        /// One boot's phases, in milliseconds. `*_at_ms`: host clock since
        /// QEMU was spawned, when the line arrived; `*_stamp_ms`: the line's
        /// printk stamp (guest clock since the kernel started; only kernel
        /// lines and lines written to /dev/kmsg have one); the rest are
        /// durations derived from the host clock (`Phases::derive`). A point
        /// the boot never reached, and every duration that needs it, is
        /// `None`.
        #[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
        pub struct Phases {
            $(
                $(#[doc = $doc])*
                #[serde(default, skip_serializing_if = "Option::is_none")]
                pub $name: Option<f64>,
            )*
        }

        impl Phases {
            /// Every field by name, in declaration order.
            pub fn fields(&self) -> Vec<(&'static str, Option<f64>)> {
                vec![$((stringify!($name), self.$name)),*]
            }

            /// Every field, to be written, in the order of `fields`.
            pub fn fields_mut(&mut self) -> Vec<&mut Option<f64>> {
                vec![$(&mut self.$name),*]
            }
        }
    };
}

phases! {
    /// The first byte on the serial console.
    first_byte_at_ms,
    /// The kernel's `Run /init as init process`.
    run_init_at_ms,
    run_init_stamp_ms,
    /// `pcirig: scenario NAME on ARCH, kernel …`.
    scenario_at_ms,
    scenario_stamp_ms,
    /// `pcirig: host arm-oracle`: the guest asks for the MMIO oracle.
    arm_asked_at_ms,
    arm_asked_stamp_ms,
    /// `pcirig: oracle armed`: the guest got the host's answer.
    armed_at_ms,
    armed_stamp_ms,
    /// `pcirig: done`.
    done_at_ms,
    done_stamp_ms,
    /// QEMU exited (or was killed at the timeout).
    exit_at_ms,
    /// The CPU time QEMU used, user and system, all its threads: what a
    /// boot costs a busy host, where `exit_at_ms` is what it costs a
    /// waiting user.
    qemu_cpu_ms,
    /// QEMU's start to the first console byte: firmware, the kernel's
    /// decompression and early setup until its console speaks.
    to_first_byte_ms,
    /// The first console byte to `Run /init`: the kernel booting.
    kernel_ms,
    /// `Run /init` to the scenario's start line: init's own setup.
    init_to_scenario_ms,
    /// The arming request to the guest's `oracle armed`.
    arming_ms,
    /// The scenario itself: from the later of its start line and the
    /// oracle's arming (init prints the start line, then asks for the
    /// oracle) to `pcirig: done`.
    scenario_ms,
    /// `pcirig: done` to QEMU's exit: poweroff.
    poweroff_ms,
}

/// `b - a`, when both were reached.
fn between(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    Some(round(b? - a?))
}

/// To the microsecond: enough for either clock, and readable JSON.
fn round(ms: f64) -> f64 {
    (ms * 1000.0).round() / 1000.0
}

impl Phases {
    /// The durations, from the points.
    pub fn derive(&mut self) {
        self.to_first_byte_ms = self.first_byte_at_ms.map(round);
        self.kernel_ms = between(self.first_byte_at_ms, self.run_init_at_ms);
        self.init_to_scenario_ms = between(self.run_init_at_ms, self.scenario_at_ms);
        self.arming_ms = between(self.arm_asked_at_ms, self.armed_at_ms);
        let scenario_start = match (self.scenario_at_ms, self.armed_at_ms) {
            (Some(s), Some(a)) => Some(s.max(a)),
            (s, _) => s,
        };
        self.scenario_ms = between(scenario_start, self.done_at_ms);
        self.poweroff_ms = between(self.done_at_ms, self.exit_at_ms);
    }

    pub fn is_empty(&self) -> bool {
        *self == Phases::default()
    }
}

/// Notes the points of one boot as its console goes by (`Guest::run` feeds
/// it); the first line of each kind counts.
#[derive(Debug, Default)]
pub struct Recorder {
    phases: Phases,
}

/// Sets a point not set yet.
fn first(slot: &mut Option<f64>, ms: Option<f64>) {
    if slot.is_none() {
        *slot = ms.map(round);
    }
}

impl Recorder {
    /// The console's first byte arrived `at_ms` after QEMU was spawned.
    pub fn first_byte(&mut self, at_ms: f64) {
        first(&mut self.phases.first_byte_at_ms, Some(at_ms));
    }

    /// A whole console line (as the guest meant it, printk stamp and all)
    /// arrived `at_ms` after QEMU was spawned.
    pub fn line(&mut self, at_ms: f64, line: &str) {
        let text = console::strip_timestamp(line);
        let stamp = console::timestamp(line).map(|s| s * 1000.0);
        let p = &mut self.phases;
        let (at, stamped) = if text.starts_with("Run ") && text.ends_with(" as init process") {
            (&mut p.run_init_at_ms, &mut p.run_init_stamp_ms)
        } else if text.starts_with(SCENARIO) {
            (&mut p.scenario_at_ms, &mut p.scenario_stamp_ms)
        } else if GuestRequest::parse(text) == Some(Ok(GuestRequest::Host(HostAction::ArmOracle))) {
            (&mut p.arm_asked_at_ms, &mut p.arm_asked_stamp_ms)
        } else if text == ARMED {
            (&mut p.armed_at_ms, &mut p.armed_stamp_ms)
        } else if text == DONE {
            (&mut p.done_at_ms, &mut p.done_stamp_ms)
        } else {
            return;
        };
        // A point's stamp belongs to the line that set its time, or none.
        if at.is_none() {
            first(stamped, stamp);
        }
        first(at, Some(at_ms));
    }

    /// QEMU used `ms` of CPU time in all.
    pub fn cpu(&mut self, ms: f64) {
        first(&mut self.phases.qemu_cpu_ms, Some(ms));
    }

    /// QEMU exited `at_ms` after it was spawned: the points and the
    /// durations between them.
    pub fn finish(mut self, at_ms: f64) -> Phases {
        first(&mut self.phases.exit_at_ms, Some(at_ms));
        self.phases.derive();
        self.phases
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Feeds `(host ms, line)` pairs, the first byte at `first_byte`.
    fn record(first_byte: Option<f64>, lines: &[(f64, &str)], exit: f64) -> Phases {
        let mut r = Recorder::default();
        if let Some(ms) = first_byte {
            r.first_byte(ms);
        }
        for (at, line) in lines {
            r.line(*at, line);
        }
        r.finish(exit)
    }

    /// An arm64 boot with our device, as `images/init` prints it: the
    /// start line, then the arming.
    const BOOT: &[(f64, &str)] = &[
        (
            310.0,
            "[    0.000000] Booting Linux on physical CPU 0x0000000000 [0x000f0510]",
        ),
        (1400.5, "[    1.012345] Freeing unused kernel memory: 1024K"),
        (1402.25, "[    1.013500] Run /init as init process"),
        (1500.0, "KTAP version 1"),
        (
            1610.0,
            "pcirig: scenario unbind on aarch64, kernel 6.12.0-pcirig",
        ),
        (1620.0, "pcirig: host arm-oracle"),
        (1790.0, "pcirig: oracle armed"),
        (
            2000.0,
            "[    1.700000] pci_rig 0000:01:00.0: event probe_done",
        ),
        (3790.0, "pcirig: done"),
        (3795.0, "[    2.900000] reboot: Power down"),
    ];

    #[test]
    fn points_come_from_their_lines_with_their_arrival_times() {
        let p = record(Some(300.0), BOOT, 3900.0);
        assert_eq!(p.first_byte_at_ms, Some(300.0));
        assert_eq!(p.run_init_at_ms, Some(1402.25));
        assert_eq!(
            p.run_init_stamp_ms,
            Some(1013.5),
            "the kernel's stamp, in ms"
        );
        assert_eq!(p.scenario_at_ms, Some(1610.0));
        assert_eq!(
            p.scenario_stamp_ms, None,
            "init prints through the tty: no stamp"
        );
        assert_eq!(p.arm_asked_at_ms, Some(1620.0));
        assert_eq!(p.armed_at_ms, Some(1790.0));
        assert_eq!(p.done_at_ms, Some(3790.0));
        assert_eq!(p.done_stamp_ms, None);
        assert_eq!(p.exit_at_ms, Some(3900.0));
    }

    #[test]
    fn durations_tile_the_boot() {
        let p = record(Some(300.0), BOOT, 3900.0);
        assert_eq!(p.to_first_byte_ms, Some(300.0));
        assert_eq!(p.kernel_ms, Some(1102.25));
        assert_eq!(p.init_to_scenario_ms, Some(207.75));
        assert_eq!(p.arming_ms, Some(170.0));
        assert_eq!(
            p.scenario_ms,
            Some(2000.0),
            "from the arming, not the start line"
        );
        assert_eq!(p.poweroff_ms, Some(110.0));
        // Only the 10 ms between the start line and the arming request
        // belong to no phase.
        let sum: f64 = [
            p.to_first_byte_ms,
            p.kernel_ms,
            p.init_to_scenario_ms,
            p.arming_ms,
            p.scenario_ms,
            p.poweroff_ms,
        ]
        .iter()
        .map(|d| d.unwrap())
        .sum();
        assert_eq!(sum + 10.0, p.exit_at_ms.unwrap());
    }

    #[test]
    fn the_scenario_starts_at_its_line_when_armed_before_it() {
        // Were init to arm first, then print the start line.
        let p = record(
            Some(100.0),
            &[
                (1000.0, "[    0.9] Run /init as init process"),
                (1010.0, "pcirig: host arm-oracle"),
                (1200.0, "pcirig: oracle armed"),
                (1210.0, "pcirig: scenario probe on x86_64, kernel 6.12.0"),
                (1710.0, "pcirig: done"),
            ],
            1800.0,
        );
        assert_eq!(p.init_to_scenario_ms, Some(210.0));
        assert_eq!(p.arming_ms, Some(190.0));
        assert_eq!(p.scenario_ms, Some(500.0));
    }

    #[test]
    fn stamps_come_from_lines_that_carry_one() {
        // A mark written to /dev/kmsg carries the kernel's stamp.
        let p = record(None, &[(50.0, "[    2.345678] pcirig: done")], 60.0);
        assert_eq!(p.done_at_ms, Some(50.0));
        assert_eq!(p.done_stamp_ms, Some(2345.678));
    }

    #[test]
    fn absent_points_stay_absent() {
        // No device (no arming), and a boot that hung after init started.
        let p = record(
            Some(300.0),
            &[
                (1000.0, "[    0.9] Run /init as init process"),
                (1100.0, "pcirig: scenario boot on riscv64, kernel 6.12.0"),
                (1200.0, "pcirig: hang"),
            ],
            60000.0,
        );
        assert_eq!(p.arm_asked_at_ms, None);
        assert_eq!(p.armed_at_ms, None);
        assert_eq!(p.arming_ms, None);
        assert_eq!(p.done_at_ms, None);
        assert_eq!(p.scenario_ms, None);
        assert_eq!(p.poweroff_ms, None);
        assert_eq!(p.init_to_scenario_ms, Some(100.0));
        let json = serde_json::to_value(&p).unwrap();
        for absent in [
            "armed_at_ms",
            "arming_ms",
            "done_at_ms",
            "scenario_ms",
            "poweroff_ms",
        ] {
            assert!(json.get(absent).is_none(), "{absent} in {json}");
        }
        assert_eq!(json["exit_at_ms"], 60000.0);
        // Nothing at all reached but the exit: no first byte, no kernel.
        let silent = record(None, &[], 5.0);
        assert_eq!(silent.to_first_byte_ms, None);
        assert_eq!(silent.kernel_ms, None);
        assert_eq!(
            silent.fields().iter().filter(|(_, v)| v.is_some()).count(),
            1
        );
    }

    #[test]
    fn the_first_line_of_each_kind_counts() {
        let p = record(
            Some(1.0),
            &[
                (10.0, "[    0.5] Run /init as init process"),
                (20.0, "[    0.6] Run /sbin/init as init process"),
                (30.0, "pcirig: done"),
                (40.0, "[    0.7] pcirig: done"),
                (45.0, "pcirig: doned"),
            ],
            50.0,
        );
        assert_eq!(p.run_init_at_ms, Some(10.0));
        assert_eq!(p.run_init_stamp_ms, Some(500.0));
        assert_eq!(p.done_at_ms, Some(30.0));
        assert_eq!(
            p.done_stamp_ms, None,
            "the stamp of a later line is not this point's"
        );
        let mut r = Recorder::default();
        r.first_byte(7.0);
        r.first_byte(9.0);
        assert_eq!(r.finish(10.0).first_byte_at_ms, Some(7.0));
    }

    #[test]
    fn json_round_trips_and_lists_every_field_once() {
        let p = record(Some(300.0), BOOT, 3900.0);
        let back: Phases = serde_json::from_str(&serde_json::to_string(&p).unwrap()).unwrap();
        assert_eq!(back, p);
        let names: Vec<&str> = p.fields().iter().map(|(n, _)| *n).collect();
        assert_eq!(names.len(), 19);
        assert_eq!(names.first(), Some(&"first_byte_at_ms"));
        assert_eq!(names.last(), Some(&"poweroff_ms"));
        let mut q = Phases::default();
        for slot in q.fields_mut() {
            *slot = Some(1.0);
        }
        assert!(q.fields().iter().all(|(_, v)| *v == Some(1.0)));
    }
}
