use super::*;
use crate::device_log::{Access, Stopped};
use crate::driver;
use crate::driver_rules::*;
use vocab::scenario::{DriverExpect, IrqMode};

/// `judge_driver`'s summary alone.
#[test]
fn each_binding_moves_its_self_test_dmas_and_a_stream_runs_where_offered() {
    let report = |lines: &[&str]| {
        driver::report(
            &lines
                .iter()
                .map(|l| format!("pci_rig 0000:01:00.0: {l}"))
                .collect::<Vec<_>>(),
        )
    };
    let moved = |n| dma::DmaFindings {
        moved: n,
        ..Default::default()
    };
    let none = report(&[]);
    assert!(dma_expected(&none, &moved(6), 2, false).is_ok());
    let e = dma_expected(&none, &moved(5), 2, false).unwrap_err();
    assert!(
        e.contains("the device made 5 DMAs, but 2 bindings bound"),
        "{e}"
    );
    let streamed = report(&[
        "event stream_started",
        "event stream_stopped rounds=12 remove",
    ]);
    let e = dma_expected(&streamed, &moved(15), 1, false).unwrap_err();
    assert!(
        e.contains("started 1 streams, but the device offered none"),
        "{e}"
    );
    let ok = dma_expected(&streamed, &moved(15), 1, true).unwrap();
    assert!(ok.contains("[12] rounds"), "{ok}");
    let e = dma_expected(&none, &moved(15), 1, true).unwrap_err();
    assert!(e.contains("0 started and 0 stopped"), "{e}");
    let short = report(&[
        "event stream_started",
        "event stream_stopped rounds=4 status=0xffffffff",
    ]);
    let e = dma_expected(&short, &moved(7), 1, true).unwrap_err();
    assert!(e.contains("the stream ran [4] rounds"), "{e}");
    // Rounds the driver counted but the device never logged.
    let e = dma_expected(&streamed, &moved(8), 1, true).unwrap_err();
    assert!(e.contains("(5 DMAs in the device's log"), "{e}");
}

/// The driver's judge, without the self-test DMA count: these consoles have no DMA (the
/// DMA rules have their own tests, in `dma`'s and below).
fn judged(want: &DriverExpect, c: &Console, device: &[Stopped]) -> Result<String, String> {
    let want = DriverExpect {
        dma: false,
        ..*want
    };
    judge_driver(&want, c, device).map(|(summary, _)| summary)
}
use crate::console::Splat;
use std::os::unix::process::ExitStatusExt;
use std::time::Duration;
use vocab::scenario::*;

fn console(lines: &[&str], timed_out: bool) -> Console {
    Console {
        lines: lines.iter().map(|s| s.to_string()).collect(),
        timed_out,
        exit: Some(ExitStatusExt::from_raw(0)),
        host_failures: vec![],
        injected_ns: vec![],
        marks: vec![],
        oracle: None,
        elapsed: Duration::from_millis(1500),
        arch: vocab::arch::Arch::Arm64,
        syslog: false,
        events: vec![],
        phases: Default::default(),
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

/// `lines` as a console that was asked for syslog prefixes.
fn syslog_console(lines: &[&str]) -> Console {
    Console {
        syslog: true,
        ..console(lines, false)
    }
}

fn as_strs(v: &[String]) -> Vec<&str> {
    v.iter().map(String::as_str).collect()
}

/// The kernel's lines of `GOOD` with its `<6>` prefix.
fn marked(lines: &[&str]) -> Vec<String> {
    lines
        .iter()
        .map(|l| {
            if l.starts_with('[') {
                format!("<6>{l}")
            } else {
                l.to_string()
            }
        })
        .collect()
}

#[test]
fn under_syslog_prefixes_only_the_kernels_lines_count() {
    let good = marked(GOOD);
    let j = judge(&BOOT, &syslog_console(&as_strs(&good)), &[]);
    assert_eq!(j.verdict, Verdict::Pass, "{}", j.reason);
    // Asked for prefixes, none came: nothing could be told apart.
    let j = judge(&BOOT, &syslog_console(GOOD), &[]);
    assert_eq!(j.cause, Some(Cause::Checks));
    assert!(
        j.reason.contains("no console line carries its <N> prefix"),
        "{}",
        j.reason
    );
    // A driver line written to /dev/kmsg (LOG_USER: <14>), or to the console.
    for forged in [
        "<14>[    0.7] pci_rig 0000:01:00.0: event worker_gave_up reason=Gone accesses=9",
        "pci_rig 0000:01:00.0: event worker_gave_up reason=Gone accesses=9",
        "<12>[    0.7] rcpufreq-dt: target_index 1 ok",
    ] {
        let mut lines = good.clone();
        lines.insert(7, forged.to_string());
        let j = judge(&BOOT, &syslog_console(&as_strs(&lines)), &[]);
        assert_eq!(j.cause, Some(Cause::Checks), "{forged}: {}", j.reason);
        assert!(
            j.reason.contains("that the kernel did not print"),
            "{}",
            j.reason
        );
        assert!(j.reason.contains(forged), "{}", j.reason);
    }
    // A line the kernel must print counts only when the kernel printed it.
    let aer = |prefix: &str| {
        let mut lines = good.clone();
        for want in AER.kernel_lines {
            lines.insert(
                1,
                format!("{prefix}[    0.2] pcieport 0000:00:01.0: {want}"),
            );
        }
        lines
    };
    let wants_aer = Scenario {
        kernel_lines: AER.kernel_lines,
        ..BOOT
    };
    let by = |prefix| judge(&wants_aer, &syslog_console(&as_strs(&aer(prefix))), &[]);
    let j = by("<14>");
    assert!(
        j.reason.starts_with("the kernel never printed `AER:"),
        "{}",
        j.reason
    );
    let j = by("<3>");
    assert_eq!(j.verdict, Verdict::Pass, "{}", j.reason);
}

#[test]
fn a_known_finding_is_named_and_hides_no_other_report() {
    let pciehp = Scenario {
        machine: Machine::Hotplug(Slot::Pciehp),
        ..BOOT
    };
    let mut lines: Vec<&str> = GOOD.to_vec();
    let at = lines.len() - 2;
    lines.splice(at..at, known::tests::PCIEHP_REPORT.iter().copied());
    let j = judge(&pciehp, &console(&lines, false), &[]);
    assert_eq!(j.verdict, Verdict::Pass, "{}", j.reason);
    assert!(
        j.reason
            .contains("known finding, judged apart: Linux's pciehp lockdep report"),
        "{}",
        j.reason
    );
    assert_eq!(j.findings.known.len(), 1);
    // On a machine without pciehp's unplug, the same report fails.
    let j = judge(&BOOT, &console(&lines, false), &[]);
    assert_eq!(j.cause, Some(Cause::Splat(Splat::Lockdep)), "{}", j.reason);
    // Another report after it still fails the boot.
    lines.insert(
        lines.len() - 2,
        "[    2.0] WARNING: CPU: 1 PID: 9 at drivers/pci/x.c:1 f+0x1/0x2",
    );
    let j = judge(&pciehp, &console(&lines, false), &[]);
    assert_eq!(j.cause, Some(Cause::Splat(Splat::Warning)), "{}", j.reason);
}

#[test]
fn a_clean_boot_passes() {
    let j = judge(&BOOT, &console(GOOD, false), &[]);
    assert_eq!(j.verdict, Verdict::Pass, "{}", j.reason);
    assert!(j.reason.starts_with("2/2 guest checks ok"), "{}", j.reason);
}

#[test]
fn findings_carry_the_phases_whatever_the_verdict() {
    let mut r = phases::Recorder::default();
    r.first_byte(200.0);
    r.line(900.0, "[    0.6] Run /init as init process");
    let phases = r.finish(1000.0);
    for timed_out in [false, true] {
        let c = Console {
            phases: phases.clone(),
            ..console(GOOD, timed_out)
        };
        let j = judge(&BOOT, &c, &[]);
        assert_eq!(j.verdict == Verdict::Pass, !timed_out, "{}", j.reason);
        assert_eq!(j.findings.phases.as_ref(), Some(&phases));
        assert_eq!(j.findings.phases.unwrap().kernel_ms, Some(700.0));
    }
    let none = judge(&BOOT, &console(GOOD, false), &[]);
    assert_eq!(none.findings.phases, None, "nothing recorded, nothing said");
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
        "x: bench mmio dev=pci-testdev reads=3232 raw_ns=200 devres_ns=204 guard_ns=200 access_ns=201",
        "x: bench mmio dev=pci-rig reads=3232 raw_ns=70000 devres_ns=70100 guard_ns=70000 access_ns=70000",
        "x: bench window bytes=65536 ns=1000000000 kib_per_s=64",
        "x: bench irq mode=msi samples=101 median_ns=40000 lost=0",
        "x: bench dma dir=to_device bytes=65536 ns=2000000 cpu_ns=50000",
        "x: bench dma dir=from_device bytes=65536 ns=2000000 cpu_ns=50000",
        "x: bench dma_alloc bytes=4096 samples=101 median_ns=3000",
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
fn an_unplug_the_guest_asked_for_must_be_one_qemu_did() {
    let mut lines = GOOD.to_vec();
    lines.insert(2, "pcirig: host unplug");
    let j = judge(&BOOT, &console(&lines, false), &[]);
    assert_eq!(j.cause, Some(Cause::Host), "{}", j.reason);
    assert!(
        j.reason
            .contains("asked for 1 unplugs of our device, QEMU reported DEVICE_DELETED 0 times"),
        "{}",
        j.reason
    );
    let mut c = console(&lines, false);
    c.events = vec![serde_json::json!({"event": "DEVICE_DELETED", "data": {"device": "pcirig"}})];
    let j = judge(&BOOT, &c, &[]);
    assert_eq!(j.verdict, Verdict::Pass, "{}", j.reason);
}

#[test]
fn a_timeout_fails_with_the_last_lines() {
    let j = judge(&BOOT, &console(&GOOD[..4], true), &[]);
    assert_eq!(j.cause, Some(Cause::Timeout));
    assert!(j.reason.starts_with("timeout after 120 s without powering off (last line: rust_minimal: Rust minimal sample (init))"), "{}", j.reason);
}

#[test]
fn a_console_with_dropped_messages_fails_even_when_everything_else_passed() {
    assert_eq!(
        judge(&BOOT, &console(GOOD, false), &[]).verdict,
        Verdict::Pass
    );
    let mut lines = GOOD.to_vec();
    lines.insert(5, "** 3 printk messages dropped **");
    let j = judge(&BOOT, &console(&lines, false), &[]);
    assert_eq!(j.cause, Some(Cause::Checks));
    assert!(
        j.reason
            .starts_with("the kernel dropped 3 console messages"),
        "{}",
        j.reason
    );
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
    c.host_failures = vec![r#"device request {"cmd":"set_knobs","nope":1}: device refused"#.into()];
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
        "[    1.0] KTAP version 1",
        "[    1.0] 1..1",
        "[    1.0]     # Subtest: rust_doctests_kernel",
        "[    1.0]     1..2",
        "[    1.0]     ok 1 rust_doctest_kernel_revocable_rs_0",
        "[    1.0]     ok 2 rust_doctest_kernel_io_rs_0",
        "[    1.0] ok 1 rust_doctests_kernel",
        "pcirig: done",
    ];
    let j = judge(&KUNIT, &console(&few, false), &[]);
    assert_eq!(j.cause, Some(Cause::Checks));
    assert!(
        j.reason.contains("module io: 1 doctests ran, 40 expected"),
        "{}",
        j.reason
    );
    let j = judge(&KUNIT, &console(&few[7..], false), &[]);
    assert!(j.reason.contains("no suites"), "{}", j.reason);
}

fn access(seq: u64, offset: u64, value: u64, kind: &str) -> Access {
    crate::device_log::test_access(seq, "bar0", offset, 4, value, kind)
}

const MAGIC_READ: &str = "# mmio r bar0 0x0 4 0x70726967";

/// A probe that passes every self-test step, reporting one MMIO access
/// (the MAGIC read); the device saw `magic_read()`.
fn probe() -> Vec<String> {
    let mut texts = vec![
        "event probe_begin".to_string(),
        "event irq_mode msi".into(),
        MAGIC_READ.into(),
    ];
    texts.extend(driver::STEPS.iter().map(|s| format!("step {s} ok x=1")));
    texts.push("event probe_done".into());
    texts
}

fn magic_read(seq: u64) -> Access {
    access(seq, 0, 0x7072_6967, "read")
}

/// `[ S ] pci_rig 0000:01:00.0: TEXT`, or `[ S ] TEXT` for the guest's
/// own `pcirig:` marks.
fn at(secs: f64, text: &str) -> String {
    if text.starts_with("pcirig:") {
        format!("[{secs:12.6}] {text}")
    } else {
        format!("[{secs:12.6}] pci_rig 0000:01:00.0: {text}")
    }
}

/// An unbind with the worker busy, then the guest up 1.1 s longer.
fn unbind_console() -> Vec<String> {
    let mut lines: Vec<String> = probe().iter().map(|t| at(1.0, t)).collect();
    lines.extend([
        "pcirig: interrupts  25:  12  0  PCI-MSI-0000:01:00.0   0-edge      pci_rig".into(),
        at(2.0, "event remove_begin"),
        at(2.0, "# mmio w bar0 0x50 4 0x1"),
        at(2.001, "event remove_done"),
        at(2.002, "event worker_gave_up reason=Refused accesses=2"),
        at(2.003, "event worker_stopped reason=Refused accesses=2"),
        at(2.003, "event kept_handle refused"),
        at(3.103, "pcirig: settled"),
    ]);
    lines
}

fn unbind_log() -> Vec<Access> {
    vec![
        magic_read(1),
        magic_read(2),
        access(3, 0x50, 1, "write"),
        magic_read(4),
    ]
}

fn replaced(lines: &[String], from: &str, to: &str) -> Vec<String> {
    let i = lines
        .iter()
        .position(|l| l.ends_with(from))
        .unwrap_or_else(|| panic!("no line ending in {from}"));
    let mut out = lines.to_vec();
    out[i] = out[i].replace(from, to);
    out
}

fn without(lines: &[String], text: &str) -> Vec<String> {
    let i = lines.iter().position(|l| l.ends_with(text)).unwrap();
    let mut out = lines.to_vec();
    out.remove(i);
    out
}

fn judge_unbind(lines: &[String], log: &[Access]) -> Result<String, String> {
    judged(
        UNBIND.driver().unwrap(),
        &console_of(lines, vec![]),
        &stopped(log),
    )
}

#[test]
fn unbind_passes_with_a_refused_worker_an_exact_device_log_and_a_settled_guest() {
    let ok = judge_unbind(&unbind_console(), &unbind_log()).unwrap();
    assert!(
        ok.contains("worker gave up once remove() returned: reason=Refused accesses=2")
            && ok.contains(
                "exactly the 2 MMIO accesses the driver reported in 1 bindings, and 2 worker reads"
            )
            && ok.contains("in the 1.1 s the guest stayed up"),
        "{ok}"
    );
}

#[test]
fn unbind_fails_on_a_late_access_a_missing_one_or_a_short_settle() {
    let (lines, log) = (unbind_console(), unbind_log());
    let mut late = log.clone();
    late.push(magic_read(5));
    let e = judge_unbind(&lines, &late).unwrap_err();
    assert!(
        e.contains("1 access nothing the guest reported accounts for"),
        "{e}"
    );
    // The driver's word alone is not enough: its accesses must be in the log.
    let e = judge_unbind(&lines, &log[1..]).unwrap_err();
    assert!(e.contains("binding 1"), "{e}");
    let short = replaced(
        &lines,
        "[    3.103000] pcirig: settled",
        "[    2.503000] pcirig: settled",
    );
    let e = judge_unbind(&short, &log).unwrap_err();
    assert!(
        e.contains("settled only 0.50 s after the first binding ended"),
        "{e}"
    );
    let e = judge_unbind(&without(&lines, "pcirig: settled"), &log).unwrap_err();
    assert!(e.contains("never printed `pcirig: settled`"), "{e}");
}

#[test]
fn the_guest_must_settle_after_the_last_binding_too() {
    let stop = |t: f64| at(t, "event worker_stopped reason=Refused accesses=3");
    // rebind before this change: a settle after the first binding only,
    // the second ended just before poweroff.
    let mut lines = vec![stop(2.0), at(3.2, "pcirig: settled"), stop(4.0)];
    let e = settled(&lines).unwrap_err();
    assert!(
        e.contains("never printed `pcirig: settled` after the last binding ended"),
        "{e}"
    );
    lines.push(at(4.3, "pcirig: settled"));
    let e = settled(&lines).unwrap_err();
    assert!(
        e.contains("settled only 0.30 s after the last binding ended"),
        "{e}"
    );
    lines.push(at(5.2, "pcirig: settled"));
    // The first mark after the end counts: still 0.30 s.
    assert!(settled(&lines).is_err());
    lines.remove(3);
    assert!((settled(&lines).unwrap() - 1.2).abs() < 1e-9);
}

#[test]
fn after_injected_errors_the_worker_must_keep_reading_magic() {
    let c = |injected_ns: Vec<u64>| Console {
        injected_ns,
        ..console_of(&unbind_console(), vec![])
    };
    let device = stopped(&unbind_log());
    assert_eq!(after_injections(&c(vec![]), &device, false).unwrap(), "");
    // The log's times are its sequence numbers: MAGIC reads #2 and #4 came after each.
    assert_eq!(
        after_injections(&c(vec![1, 3]), &device, false).unwrap(),
        ", 1 MAGIC reads after the last of 2 injected errors"
    );
    let e = after_injections(&c(vec![4]), &device, false).unwrap_err();
    assert!(e.contains("the device saw no MAGIC read"), "{e}");
    // None between the first two: the worker went quiet after the first.
    let e = after_injections(&c(vec![2, 3, 3]), &device, false).unwrap_err();
    assert!(e.contains("after injected error 1 of 3"), "{e}");
    // Let go at the last: only the ones before count.
    assert!(after_injections(&c(vec![1, 4]), &device, true).is_ok());
    assert!(after_injections(&c(vec![4, 5]), &device, true).is_err());
    // A read of MAGIC from a hung device (all-ones) shows the worker at work; any other
    // value, or another register, does not.
    let hung = |offset: u64, value: u64| {
        let mut log = unbind_log();
        log[3] = access(4, offset, value, "read");
        stopped(&log)
    };
    assert!(after_injections(&c(vec![3]), &hung(0, 0xffff_ffff), false).is_ok());
    assert!(after_injections(&c(vec![3]), &hung(0, 0x1234), false).is_err());
    assert!(after_injections(&c(vec![3]), &hung(8, 0xffff_ffff), false).is_err());
}

#[test]
fn the_interrupt_type_is_the_kernels_word() {
    let listed = |l: &str| vec![format!("pcirig: interrupts {l}")];
    let msi_x86 = " 25:  12  0  PCI-MSI-0000:01:00.0   0-edge      pci_rig";
    let msi_arm = " 16:  14  0  GICv2m-PCI-MSI-0000:01:00.0   0 Edge      pci_rig";
    let intx = " 16:  40  0  IO-APIC  16-fasteoi   pci_rig";
    let intx_riscv = " 11:  15  0  APLIC-MSI-d000000.interrupt-controller  33 Level   -fasteoi   pciehp, pci_rig";
    assert!(listed_as(&listed(intx_riscv), IrqMode::Intx).is_ok());
    assert!(listed_as(&listed(intx_riscv), IrqMode::Msi).is_err());
    assert!(listed_as(&listed(msi_x86), IrqMode::Msi).is_ok());
    assert!(listed_as(&listed(msi_arm), IrqMode::Msi).is_ok());
    assert!(listed_as(&listed(intx), IrqMode::Intx).is_ok());
    // The driver says msi, the kernel's table says a pin (or the reverse).
    let e = listed_as(&listed(intx), IrqMode::Msi).unwrap_err();
    assert!(
        e.contains("lists the driver's interrupt as `16:  40  0  IO-APIC"),
        "{e}"
    );
    assert!(listed_as(&listed(msi_x86), IrqMode::Intx).is_err());
    let e = listed_as(&[], IrqMode::Msi).unwrap_err();
    assert!(e.contains("never listed"), "{e}");
}

#[test]
fn the_storm_is_counted_per_binding() {
    let soft = |t: f64| at(t, "event irq status=0x4 handled=1");
    let mut lines = vec![at(1.0, "event probe_begin")];
    lines.extend((0..30).map(|i| soft(1.0 + f64::from(i) / 100.0)));
    lines.push(at(2.0, "event probe_begin"));
    lines.extend((0..3).map(|i| soft(2.0 + f64::from(i) / 100.0)));
    lines.push(at(3.0, "event irq status=0x1 handled=1"));
    // 33 in all would pass a sum over two bindings of at least 2 × 10;
    // the second binding had 3.
    assert_eq!(soft_irqs_per_binding(&lines), [30, 3]);
    assert_eq!(soft_irqs_per_binding(&lines[..1]), [0]);
}

#[test]
fn a_worker_that_gave_up_in_a_binding_that_went_on_fails() {
    let mut lines = unbind_console();
    let gave_up = lines
        .iter()
        .position(|l| l.contains("worker_gave_up"))
        .unwrap();
    // A second binding's worker, never joined: it gave up while bound.
    lines.insert(
        gave_up + 1,
        at(2.003, "event worker_gave_up reason=Gone accesses=0"),
    );
    let e = judge_unbind(&lines, &unbind_log()).unwrap_err();
    assert!(
        e.contains("a worker gave up while its binding went on"),
        "{e}"
    );
}

#[test]
fn unbind_fails_when_the_worker_stops_wrongly_or_the_handle_is_kept() {
    let (lines, log) = (unbind_console(), unbind_log());
    let gave_up = lines
        .iter()
        .position(|l| l.contains("worker_gave_up"))
        .unwrap();
    let began = lines
        .iter()
        .position(|l| l.contains("remove_begin"))
        .unwrap();
    let mut early = lines.clone();
    early.swap(gave_up, began);
    let e = judge_unbind(&early, &log).unwrap_err();
    assert!(e.contains("at the wrong time"), "{e}");
    let gone = replaced(
        &lines,
        "worker_gave_up reason=Refused accesses=2",
        "worker_gave_up reason=Gone accesses=2",
    );
    let e = judge_unbind(&gone, &log).unwrap_err();
    assert!(
        e.contains("did not stop by itself with reason=Refused"),
        "{e}"
    );
    let kept = replaced(
        &lines,
        "kept_handle refused",
        "kept_handle STILL_ACCESSIBLE",
    );
    let e = judge_unbind(&kept, &log).unwrap_err();
    assert!(e.contains("kept across each of the 1 unbinds"), "{e}");
    let e = judge_unbind(&without(&lines, "kept_handle refused"), &log).unwrap_err();
    assert!(e.contains("kept across"), "{e}");
}

#[test]
fn every_probe_needs_every_self_test_step() {
    let (lines, log) = (unbind_console(), unbind_log());
    let e = judge_unbind(&without(&lines, "step crc32 ok x=1"), &log).unwrap_err();
    assert!(e.contains("probe 1: self-test steps"), "{e}");
    let failed = replaced(&lines, "step invert ok x=1", "step invert FAIL status=0x6");
    let e = judge_unbind(&failed, &log).unwrap_err();
    assert!(
        e.contains("self-test steps failed: invert (status=0x6)"),
        "{e}"
    );
}

#[test]
fn mmio_fails_without_claims_and_with_an_unreported_access() {
    let want = *MMIO.driver().unwrap();
    let lines: Vec<String> = probe().iter().map(|t| at(1.0, t)).collect();
    let log = [magic_read(1), magic_read(2), magic_read(3)];
    let mmio =
        |lines: &[String], log: &[Access]| judged(&want, &console_of(lines, vec![]), &stopped(log));
    let ok = mmio(&lines, &log).unwrap();
    assert!(
        ok.contains("exactly the 1 MMIO accesses the driver reported"),
        "{ok}"
    );
    let e = mmio(&without(&lines, MAGIC_READ), &log).unwrap_err();
    assert!(e.contains("reported no MMIO access during probe"), "{e}");
    let mut extra = log.to_vec();
    extra.insert(0, access(9, 0x8, 0, "read"));
    let e = mmio(&lines, &extra).unwrap_err();
    assert!(
        e.contains("the device's next access was #9 read bar0 0x8"),
        "{e}"
    );
}

#[test]
fn probe_error_needs_every_refusal_then_a_clean_probe() {
    let want = *PROBE_ERROR.driver().unwrap();
    let refusal = |what: &str, value: &str| {
        vec![
            at(1.0, "event probe_begin"),
            at(1.0, MAGIC_READ),
            at(1.0, &format!("step identify FAIL {what} {value}, …")),
        ]
    };
    let mut lines = refusal("magic", "0xbad0bad");
    lines[1] = at(1.0, "# mmio r bar0 0x0 4 0xbad0bad");
    let mut version = refusal("version", "0x20000");
    version.insert(2, at(1.0, "# mmio r bar0 0x4 4 0x20000"));
    lines.extend(version);
    lines.extend([
        at(2.0, "event probe_begin"),
        at(2.0, MAGIC_READ),
        at(2.0, "step identify ok x=1"),
        at(2.0, "step scratch FAIL no interrupt within 1 s; status=0x2"),
        at(2.5, "event probe_begin"),
        at(2.5, MAGIC_READ),
        at(2.5, "step identify ok x=1"),
        at(2.5, "step scratch FAIL no interrupt within 1 s; status=0x1"),
    ]);
    lines.extend(probe().iter().map(|t| at(3.0, t)));
    let log = [
        access(1, 0, 0x0bad_0bad, "read"),
        magic_read(2),
        access(3, 4, 0x2_0000, "read"),
        magic_read(4),
        magic_read(5),
        magic_read(6),
    ];
    let judge_it = |lines: &[String]| judged(&want, &console_of(lines, vec![]), &stopped(&log));
    let ok = judge_it(&lines).unwrap();
    assert!(
        ok.contains("4 refused (magic, version, interrupt, interrupt)"),
        "{ok}"
    );
    let only_magic = [&lines[..3], &lines[7..]].concat();
    let log = [access(1, 0, 0x0bad_0bad, "read"), magic_read(2)];
    let e = judged(&want, &console_of(&only_magic, vec![]), &stopped(&log)).unwrap_err();
    assert!(
        e.contains(
            r#"refused the device for ["magic", "interrupt", "interrupt"], expected ["magic", "version", "interrupt", "interrupt"]"#
        ),
        "{e}"
    );
}

#[test]
fn surprise_needs_the_worker_to_give_up_and_qemu_to_delete_the_device() {
    let mut lines: Vec<String> = probe().iter().map(|t| at(1.0, t)).collect();
    lines.extend([
        at(1.5, "event worker_gave_up reason=Gone accesses=1"),
        at(2.0, "event remove_begin"),
        at(2.0, "# mmio w bar0 0x50 4 0x1"),
        at(2.0, "event remove_done"),
        at(2.1, "event worker_stopped reason=Gone accesses=1"),
        at(2.1, "event kept_handle refused"),
        at(3.2, "pcirig: settled"),
    ]);
    let log = [
        magic_read(1),
        access(2, 0, 0xffff_ffff, "read"),
        access(3, 0x50, 1, "write"),
    ];
    let deleted = serde_json::json!({"event": "DEVICE_DELETED", "data": {"device": "pcirig"}});
    let want = *SURPRISE.driver().unwrap();
    let ok = judged(
        &want,
        &console_of(&lines, vec![deleted.clone()]),
        &stopped(&log),
    );
    assert!(ok
        .unwrap()
        .contains("worker gave up before remove(): reason=Gone"));

    let e = judged(&want, &console_of(&lines, vec![]), &stopped(&log)).unwrap_err();
    assert!(e.contains("DEVICE_DELETED"), "{e}");

    let refused = replaced(
        &lines,
        "reason=Gone accesses=1",
        "reason=Refused accesses=1",
    );
    let e = judged(&want, &console_of(&refused, vec![deleted]), &stopped(&log)).unwrap_err();
    assert!(e.contains("did not stop by itself with reason=Gone"), "{e}");
}

#[test]
fn device_needs_user_space_reports_matching_the_log_exactly() {
    let runner = [
        "KTAP version 1",
        "1..1",
        MAGIC_READ,
        "ok 1 magic",
        "pcirig: done",
    ];
    let mut log = vec![magic_read(1)];
    let j = judge(&DEVICE, &console(&runner, false), &stopped(&log));
    assert_eq!(j.verdict, Verdict::Pass, "{}", j.reason);
    log.push(access(2, 0x8, 0, "write"));
    let j = judge(&DEVICE, &console(&runner, false), &stopped(&log));
    assert_eq!(j.cause, Some(Cause::Device));
    assert!(
        j.reason.contains("1 access nothing the guest reported"),
        "{}",
        j.reason
    );
    let j = judge(
        &DEVICE,
        &console(&[runner[0], runner[1], runner[3], runner[4]], false),
        &stopped(&[]),
    );
    assert!(
        j.reason.contains("expected MMIO reports from user space"),
        "{}",
        j.reason
    );
}

pub(crate) fn console_of(lines: &[String], events: Vec<serde_json::Value>) -> Console {
    Console {
        lines: lines.to_vec(),
        timed_out: false,
        exit: Some(ExitStatusExt::from_raw(0)),
        host_failures: vec![],
        injected_ns: vec![],
        marks: vec![],
        oracle: None,
        elapsed: Duration::ZERO,
        arch: vocab::arch::Arch::Arm64,
        syslog: false,
        events,
        phases: Default::default(),
    }
}

fn stopped(log: &[Access]) -> Vec<Stopped> {
    use std::os::unix::process::ExitStatusExt;
    vec![Stopped {
        died: None,
        status: std::process::ExitStatus::from_raw(0),
        log: log.to_vec(),
        dma: Vec::new(),
    }]
}

#[test]
fn a_server_that_failed_is_a_death_one_that_saw_qemu_hang_up_is_not() {
    use std::os::unix::process::ExitStatusExt;
    let runner = ["KTAP version 1", "1..1", "ok 1 find_dev", "pcirig: done"];
    let s = Scenario {
        machine: Machine::Device,
        ..Scenario::runner("device-ish", "", Duration::from_secs(60))
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
