//! KUnit results from the console: suites, their tests, and a summary per
//! kernel-crate module for the doc examples (`rust_doctest_kernel_<module>_rs_<n>`);
//! and the rules a KUnit boot is judged by (`judge`).

use crate::console::{origin, strip_timestamp, timestamp, Origin};
use crate::ktap::{self, Line, TestResult};
use std::collections::BTreeMap;
use vocab::arch::Arch;

#[derive(Debug, Default)]
pub struct Suite {
    pub name: String,
    /// The number of tests the suite announced.
    pub planned: Option<usize>,
    pub tests: Vec<TestResult>,
    /// Where each test's source is (`# NAME.location: FILE:LINE`), by test name.
    pub locations: BTreeMap<String, String>,
    /// The suite's own result line, once printed.
    pub result: Option<TestResult>,
}

impl Suite {
    pub fn failed(&self) -> impl Iterator<Item = &TestResult> {
        self.tests.iter().filter(|t| !t.ok)
    }

    pub fn location(&self, test: &str) -> &str {
        self.locations.get(test).map_or("", String::as_str)
    }
}

/// What KUnit printed: the top-level plan (`1..N`, the number of suites)
/// and every suite, in order.
#[derive(Debug, Default)]
pub struct Run {
    pub planned: Option<usize>,
    pub suites: Vec<Suite>,
    /// Lines that look like KUnit's but the kernel did not print: without
    /// its syslog prefix (written to /dev/kmsg, which stamps them too, or to
    /// the console), or, on a console without prefixes, without a printk
    /// stamp. They count for nothing.
    pub foreign: Vec<String>,
}

/// Whether a console line (stamp stripped) looks like KUnit output.
fn looks_like_kunit(line: &str) -> bool {
    line.trim_start().starts_with("# Subtest:") || ktap::parse_line(line).is_some()
}

/// Collects the top-level plan and every suite the kernel printed on the
/// console: lines with its syslog prefix, or on a console that has none
/// (the judge fails a boot that asked for them and shows none), lines with a
/// printk stamp.
pub fn run(lines: &[String]) -> Run {
    let mut out = Run::default();
    let mut current: Option<Suite> = None;
    let marked = lines.iter().any(|l| origin(l) != Origin::Unmarked);
    let by_kernel = |raw: &str| {
        if marked {
            origin(raw) == Origin::Kernel
        } else {
            timestamp(raw).is_some()
        }
    };
    for raw in lines {
        let line = strip_timestamp(raw);
        if !by_kernel(raw) {
            if looks_like_kunit(line) {
                out.foreign.push(raw.clone());
            }
            continue;
        }
        if let Some(name) = line.trim_start().strip_prefix("# Subtest: ") {
            if line.starts_with("    ") {
                out.suites.extend(current.take());
                current = Some(Suite {
                    name: name.trim().to_string(),
                    ..Suite::default()
                });
            }
            continue;
        }
        if let (Some(s), Some((test, at))) = (
            current.as_mut(),
            line.trim_start()
                .strip_prefix("# ")
                .and_then(|l| l.split_once(".location: ")),
        ) {
            s.locations.insert(test.to_string(), at.trim().to_string());
            continue;
        }
        match (ktap::parse_line(line), current.as_mut()) {
            (Some(Line::Plan { depth: 0, count }), None) if out.suites.is_empty() => {
                out.planned.get_or_insert(count);
            }
            (Some(Line::Plan { depth: 1, count }), Some(s)) => s.planned = Some(count),
            (Some(Line::Result(r)), Some(s)) if r.depth == 1 => s.tests.push(r),
            (Some(Line::Result(r)), Some(s)) if r.depth == 0 && r.name == s.name => {
                s.result = Some(r);
                out.suites.extend(current.take());
            }
            _ => {}
        }
    }
    out.suites.extend(current);
    out
}

/// Collects every suite printed on the console, in order.
pub fn suites(lines: &[String]) -> Vec<Suite> {
    run(lines).suites
}

/// A test that may skip, and why (it is reported, never hidden).
pub struct ExpectedSkip {
    /// The test's source location as KUnit prints it.
    pub location: &'static str,
    pub why: &'static str,
}

/// Tests allowed to skip, each only with a diagnosed cause: none. The one
/// once listed, `current!().group_leader().pid()` (task.rs:52), read
/// `task_struct` fields at the wrong offsets because bindgen dropped the
/// alignment of an empty struct before them (docs/defects.md, "Bindgen drops the
/// alignment of empty structs"); the build now checks every layout and the
/// test runs.
pub const EXPECTED_SKIPS: &[ExpectedSkip] = &[];

/// How many doctests each of our modules runs, exactly, on the arches that
/// build it: a module whose doc examples went missing fails, and so does
/// one that gained examples this table does not know of (update it with
/// them: the judge's count is then a fact, not a floor). Counted from a real
/// run's console: every module of the kernel crate we wrote or patched
/// (`device`: printing and contexts; `workqueue`: `try_spawn_on`,
/// `cancel_sync`), the module being the test name's
/// `rust_doctest_kernel_<module>_rs_<n>`.
pub const DOCTESTS: &[(&str, usize, &[Arch])] = &[
    ("io", 40, &Arch::ALL),
    ("revocable", 9, &Arch::ALL),
    ("devres", 13, &Arch::ALL),
    ("pci", 40, &Arch::ALL),
    ("pci_config", 1, &Arch::ALL),
    ("pci_pm", 2, &Arch::ALL),
    ("dma", 33, &Arch::ALL),
    ("irq", 5, &Arch::ALL),
    ("driver", 5, &Arch::ALL),
    ("device_id", 13, &Arch::ALL),
    ("sync_rcu", 5, &Arch::ALL),
    ("device", 13, &Arch::ALL),
    ("workqueue", 7, &Arch::ALL),
    // Built where a device tree is (guest-kernel/configs: arm64, riscv64).
    ("of", 4, &DEVICE_TREE),
    ("platform", 11, &DEVICE_TREE),
    ("clk", 11, &DEVICE_TREE),
    ("opp", 13, &DEVICE_TREE),
    ("cpufreq", 20, &DEVICE_TREE),
];

/// The arches whose kernels build the device-tree modules.
const DEVICE_TREE: [Arch; 2] = [Arch::Arm64, Arch::Riscv64];

/// `DOCTESTS` for one arch.
pub fn doctests(arch: Arch) -> impl Iterator<Item = (&'static str, usize)> {
    DOCTESTS
        .iter()
        .filter(move |(_, _, on)| on.contains(&arch))
        .map(|&(m, n, _)| (m, n))
}

/// Judges a KUnit boot: the plan matches the suites seen, every suite ran
/// all it announced and says `ok`, every test passed (a skip only where
/// expected), and each of our modules ran exactly its number of doctests.
/// Returns a summary, or every problem found.
pub fn judge(
    lines: &[String],
    expected_skips: &[ExpectedSkip],
    arch: Arch,
    ours: bool,
) -> Result<String, String> {
    let run = run(lines);
    if run.suites.is_empty() {
        return Err(
            "KUnit printed no suites (is CONFIG_KUNIT set and kunit.enable=1 passed?)".into(),
        );
    }
    let mut problems = Vec::new();
    if let Some(first) = run.foreign.first() {
        problems.push(format!(
            "{} KUnit-looking lines not printed by the kernel (not its syslog prefix, or no printk stamp), the first: `{first}`",
            run.foreign.len()
        ));
    }
    match run.planned {
        Some(n) if n == run.suites.len() => {}
        Some(n) => problems.push(format!(
            "KUnit planned {n} suites, {} were seen",
            run.suites.len()
        )),
        None => problems.push("KUnit printed no top-level plan (1..N)".into()),
    }
    let mut skipped = Vec::new();
    for s in &run.suites {
        problems.extend(
            s.failed()
                .map(|t| format!("{}: not ok {} {}", s.name, t.number, t.name)),
        );
        for t in s.tests.iter().filter(|t| t.skip) {
            let at = s.location(&t.name);
            match expected_skips.iter().find(|e| e.location == at) {
                Some(e) => skipped.push(format!("{} ({at}: {})", t.name, e.why)),
                None => problems.push(format!(
                    "{}: {} skipped, which is not expected ({at}): {}",
                    s.name, t.name, t.directive
                )),
            }
        }
        if s.planned != Some(s.tests.len()) {
            problems.push(format!(
                "{}: planned {:?} tests, {} ran",
                s.name,
                s.planned,
                s.tests.len()
            ));
        }
        match &s.result {
            None => problems.push(format!("{}: never finished", s.name)),
            Some(r) if !r.ok => problems.push(format!("{}: the suite says not ok", s.name)),
            Some(r) if r.skip => problems.push(format!(
                "{}: the suite was skipped: {}",
                s.name, r.directive
            )),
            Some(_) => {}
        }
    }
    let counts: BTreeMap<String, (usize, usize)> =
        run.suites
            .iter()
            .flat_map(per_module)
            .fold(BTreeMap::new(), |mut m, (k, (ok, n))| {
                let e = m.entry(k).or_insert((0, 0));
                *e = (e.0 + ok, e.1 + n);
                m
            });
    if !ours
        && !run
            .suites
            .iter()
            .any(|s| s.name == "rust_doctests_kernel" && !s.tests.is_empty())
    {
        problems.push("the kernel crate's doctests (rust_doctests_kernel) did not run".into());
    }
    for (module, n) in doctests(arch).filter(|_| ours) {
        let ran = counts.get(module).map_or(0, |c| c.1);
        if ran != n {
            problems.push(format!(
                "module {module}: {ran} doctests ran, {n} expected (harness/judge/src/kunit.rs DOCTESTS)"
            ));
        }
    }
    if !problems.is_empty() {
        return Err(format!("KUnit failures:\n{}", problems.join("\n")));
    }
    let total: usize = run.suites.iter().map(|s| s.tests.len()).sum();
    let modules: Vec<String> = counts
        .iter()
        .map(|(m, (ok, n))| format!("{m} {ok}/{n}"))
        .collect();
    let skips = if skipped.is_empty() {
        String::new()
    } else {
        format!(
            "; {} skipped as expected: {}",
            skipped.len(),
            skipped.join(", ")
        )
    };
    Ok(format!(
        "{total} KUnit tests in {} suite{} (as planned) passed{skips}; per module: {}",
        run.suites.len(),
        if run.suites.len() == 1 { "" } else { "s" },
        modules.join(", ")
    ))
}

/// The kernel-crate module a doctest belongs to, e.g.
/// `rust_doctest_kernel_sync_revocable_rs_3` → `sync_revocable`.
pub fn doctest_module(test: &str) -> Option<&str> {
    let rest = test.strip_prefix("rust_doctest_kernel_")?;
    let (module, n) = rest.rsplit_once("_rs_")?;
    n.chars().all(|c| c.is_ascii_digit()).then_some(module)
}

/// Passed (not skipped) / total doctests per module.
pub fn per_module(suite: &Suite) -> BTreeMap<String, (usize, usize)> {
    let mut m: BTreeMap<String, (usize, usize)> = BTreeMap::new();
    for t in &suite.tests {
        let key = doctest_module(&t.name).unwrap_or(&t.name).to_string();
        let e = m.entry(key).or_default();
        e.0 += usize::from(t.ok && !t.skip);
        e.1 += 1;
    }
    m
}

/// What the kernel's own KTAP parser (`tools/testing/kunit/kunit.py parse`) made of a log:
/// its closing line, `Testing complete. Ran N tests: passed: P[, failed: F][, skipped: S]…`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct KunitPy {
    pub ran: usize,
    pub passed: usize,
}

impl KunitPy {
    /// Reads kunit.py's output; `None` without its closing line.
    pub fn parse(output: &str) -> Option<KunitPy> {
        let line = output
            .lines()
            .rev()
            .find_map(|l| l.split_once("Testing complete. Ran ").map(|(_, r)| r))?;
        let (ran, rest) = line.split_once(" tests")?;
        let passed = rest
            .split_once("passed: ")?
            .1
            .split(|c: char| !c.is_ascii_digit())
            .next()?;
        Some(KunitPy {
            ran: ran.trim().parse().ok()?,
            passed: passed.parse().ok()?,
        })
    }
}

/// Holds our reading of a KUnit log against the kernel's own parser's: as many tests ran, as
/// many passed. A summary, or the disagreement.
pub fn agrees(lines: &[String], theirs: &KunitPy) -> Result<String, String> {
    let run = run(lines);
    let ran: usize = run.suites.iter().map(|s| s.tests.len()).sum();
    let passed = run
        .suites
        .iter()
        .flat_map(|s| &s.tests)
        .filter(|t| t.ok && !t.skip)
        .count();
    if (ran, passed) != (theirs.ran, theirs.passed) {
        return Err(format!(
            "our KTAP reading ({ran} tests, {passed} passed) and the kernel's kunit.py parse of the same log ({} tests, {} passed) disagree",
            theirs.ran, theirs.passed
        ));
    }
    Ok(format!(
        "; the kernel's kunit.py parse of the same log agrees ({ran} tests, {passed} passed)"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(s: &str) -> Vec<String> {
        s.lines().map(String::from).collect()
    }

    const RUN: &str = "[    1.0] KTAP version 1
[    1.0] 1..2
[    1.0]     KTAP version 1
[    1.0]     # Subtest: rust_doctests_kernel
[    1.0]     # speed: normal
[    1.0]     1..3
[    1.1]     # rust_doctest_kernel_revocable_rs_0.location: rust/kernel/revocable.rs:30
[    1.1]     ok 1 rust_doctest_kernel_revocable_rs_0
[    1.1]     ok 2 rust_doctest_kernel_revocable_rs_1
[    1.2]     not ok 3 rust_doctest_kernel_sync_arc_rs_0
[    1.3] # rust_doctests_kernel: pass:2 fail:1 skip:0 total:3
[    1.3] not ok 1 rust_doctests_kernel
[    1.3]     KTAP version 1
[    1.3]     # Subtest: other
[    1.3]     1..2
[    1.3]     ok 1 a
[    1.4] ok 1 insmod_rust_minimal
";

    #[test]
    fn collects_suites_tests_and_results() {
        let s = suites(&lines(RUN));
        assert_eq!(s.len(), 2);
        assert_eq!(s[0].name, "rust_doctests_kernel");
        assert_eq!(s[0].planned, Some(3));
        assert_eq!(s[0].tests.len(), 3);
        assert_eq!(s[0].result.as_ref().map(|r| r.ok), Some(false));
        assert_eq!(
            s[0].location("rust_doctest_kernel_revocable_rs_0"),
            "rust/kernel/revocable.rs:30"
        );
        assert_eq!(run(&lines(RUN)).planned, Some(2));
        assert_eq!(
            s[0].failed().map(|t| t.name.as_str()).collect::<Vec<_>>(),
            ["rust_doctest_kernel_sync_arc_rs_0"]
        );
        // The second suite never finished: one of two tests, no result line.
        assert_eq!(
            (s[1].planned, s[1].tests.len(), s[1].result.is_none()),
            (Some(2), 1, true)
        );
    }

    #[test]
    fn groups_doctests_by_module() {
        assert_eq!(
            doctest_module("rust_doctest_kernel_sync_revocable_rs_12"),
            Some("sync_revocable")
        );
        assert_eq!(doctest_module("rust_doctest_kernel_pci_rs_x"), None);
        assert_eq!(doctest_module("kunit_test"), None);
        let s = suites(&lines(RUN));
        let m = per_module(&s[0]);
        assert_eq!(m["revocable"], (2, 2));
        assert_eq!(m["sync_arc"], (0, 1));
    }

    /// A passing KUnit console: the doctest suite with every module at its
    /// count (plus one test of task.rs, at line 52), and a second suite;
    /// every line with a printk stamp.
    fn passing() -> Vec<String> {
        unstamped()
            .iter()
            .map(|l| format!("[    1.000000] {l}"))
            .collect()
    }

    fn unstamped() -> Vec<String> {
        unstamped_with(doctests(Arch::Arm64))
    }

    /// As `unstamped`, with `counts` doctests per module.
    fn unstamped_with(counts: impl Iterator<Item = (&'static str, usize)>) -> Vec<String> {
        let mut tests = Vec::new();
        for (module, n) in counts.chain([("task", 1)]) {
            for i in 0..n {
                let name = format!("rust_doctest_kernel_{module}_rs_{i}");
                let file = module.replace('_', "/");
                tests.push((name, format!("rust/kernel/{file}.rs:{}", 52 + i)));
            }
        }
        let mut out = vec![
            "KTAP version 1".to_string(),
            "1..2".into(),
            "    KTAP version 1".into(),
            "    # Subtest: rust_doctests_kernel".into(),
            format!("    1..{}", tests.len()),
        ];
        for (i, (name, at)) in tests.iter().enumerate() {
            out.push(format!("    # {name}.location: {at}"));
            out.push(format!("    ok {} {name}", i + 1));
        }
        out.extend(
            [
                "ok 1 rust_doctests_kernel",
                "    KTAP version 1",
                "    # Subtest: other",
                "    1..1",
                "    ok 1 a",
                "ok 2 other",
            ]
            .map(String::from),
        );
        out
    }

    /// Replaces the line whose text (stamp stripped) is `from` by `to`, stamped.
    fn replace(lines: &[String], from: &str, to: &str) -> Vec<String> {
        let at = lines
            .iter()
            .position(|l| strip_timestamp(l) == from)
            .unwrap_or_else(|| panic!("no line {from}"));
        let mut out = lines.to_vec();
        out[at] = format!("[    1.000000] {to}");
        out
    }

    fn without(lines: &[String], text: &str) -> Vec<String> {
        lines
            .iter()
            .filter(|l| strip_timestamp(l) != text)
            .cloned()
            .collect()
    }

    #[test]
    fn kunit_pys_summary_is_read_and_held_against_ours() {
        let out = "[19:59:11] ====\n[19:59:11] Testing complete. Ran 344 tests: passed: 344\n";
        assert_eq!(
            KunitPy::parse(out),
            Some(KunitPy {
                ran: 344,
                passed: 344
            })
        );
        let failed = "Testing complete. Ran 359 tests: passed: 358, failed: 1";
        assert_eq!(
            KunitPy::parse(failed).map(|k| (k.ran, k.passed)),
            Some((359, 358))
        );
        assert_eq!(KunitPy::parse("no summary"), None);
        let log = passing();
        let ours: usize = run(&log).suites.iter().map(|s| s.tests.len()).sum();
        let same = KunitPy {
            ran: ours,
            passed: ours,
        };
        assert!(agrees(&log, &same).unwrap().contains("agrees"));
        let e = agrees(
            &log,
            &KunitPy {
                ran: ours + 1,
                passed: ours,
            },
        )
        .unwrap_err();
        assert!(e.contains("disagree"), "{e}");
    }

    #[test]
    fn on_mainline_no_count_is_pinned_but_the_doctests_must_run() {
        // Upstream's doctests, other counts than ours: passes unpinned, not pinned.
        let few: Vec<String> = unstamped_with([("io", 3)].into_iter())
            .iter()
            .map(|l| format!("[    1.000000] {l}"))
            .collect();
        judge(&few, EXPECTED_SKIPS, Arch::X86_64, false).unwrap();
        let e = judge(&few, EXPECTED_SKIPS, Arch::X86_64, true).unwrap_err();
        assert!(e.contains("module io: 3 doctests ran, 40 expected"), "{e}");
        // Without the kernel crate's doctests suite at all, it fails.
        let renamed: Vec<String> = few
            .iter()
            .map(|l| l.replace("rust_doctests_kernel", "some_other_suite"))
            .collect();
        let e = judge(&renamed, EXPECTED_SKIPS, Arch::X86_64, false).unwrap_err();
        assert!(e.contains("(rust_doctests_kernel) did not run"), "{e}");
    }

    #[test]
    fn a_complete_passing_run_passes() {
        let ok = judge(&passing(), EXPECTED_SKIPS, Arch::Arm64, true).unwrap();
        assert!(ok.contains("in 2 suites (as planned) passed"), "{ok}");
        assert!(
            ok.contains("io 40/40") && ok.contains("sync_rcu 5/5"),
            "{ok}"
        );
    }

    #[test]
    fn a_failing_test_or_a_short_suite_fails() {
        let log = replace(&passing(), "    ok 1 a", "    not ok 1 a");
        let e = judge(&log, EXPECTED_SKIPS, Arch::Arm64, true).unwrap_err();
        assert!(e.contains("other: not ok 1 a"), "{e}");
        let log = replace(&passing(), "    1..1", "    1..2");
        let e = judge(&log, EXPECTED_SKIPS, Arch::Arm64, true).unwrap_err();
        assert!(e.contains("other: planned Some(2) tests, 1 ran"), "{e}");
        let log = without(&passing(), "ok 2 other");
        let e = judge(&log, EXPECTED_SKIPS, Arch::Arm64, true).unwrap_err();
        assert!(e.contains("other: never finished"), "{e}");
    }

    #[test]
    fn kunit_lines_printed_by_user_space_fail() {
        // A fake suite, echoed by a guest script: no printk stamps.
        let mut log = passing();
        log.extend(unstamped()[2..5].iter().cloned());
        log.push("    ok 1 rust_doctest_kernel_io_rs_0".into());
        let e = judge(&log, EXPECTED_SKIPS, Arch::Arm64, true).unwrap_err();
        assert!(
            e.contains("3 KUnit-looking lines not printed by the kernel (not its syslog prefix, or no printk stamp), the first: `    # Subtest: rust_doctests_kernel`"),
            "{e}"
        );
        // A whole fake run, with no real one: nothing the kernel printed.
        let e = judge(&unstamped(), EXPECTED_SKIPS, Arch::Arm64, true).unwrap_err();
        assert!(e.contains("KUnit printed no suites"), "{e}");
    }

    #[test]
    fn with_syslog_prefixes_only_the_kernels_kunit_lines_count() {
        let marked: Vec<String> = unstamped()
            .iter()
            .map(|l| format!("<6>[    1.000000] {l}"))
            .collect();
        judge(&marked, EXPECTED_SKIPS, Arch::Arm64, true).unwrap();
        // The same suite again, written to /dev/kmsg: stamped, but LOG_USER.
        let mut log = marked.clone();
        log.extend(
            unstamped()[2..5]
                .iter()
                .map(|l| format!("<14>[    2.000000] {l}")),
        );
        let e = judge(&log, EXPECTED_SKIPS, Arch::Arm64, true).unwrap_err();
        assert!(
            e.contains("KUnit-looking lines not printed by the kernel (not its syslog prefix, or no printk stamp), the first: `<14>"),
            "{e}"
        );
        // Only such lines: the kernel printed no suite.
        let kmsg: Vec<String> = unstamped()
            .iter()
            .map(|l| format!("<14>[    1.000000] {l}"))
            .collect();
        let e = judge(&kmsg, EXPECTED_SKIPS, Arch::Arm64, true).unwrap_err();
        assert!(e.contains("KUnit printed no suites"), "{e}");
    }

    #[test]
    fn the_plan_must_match_the_suites_seen() {
        let log = replace(&passing(), "1..2", "1..3");
        let e = judge(&log, EXPECTED_SKIPS, Arch::Arm64, true).unwrap_err();
        assert!(e.contains("KUnit planned 3 suites, 2 were seen"), "{e}");
        // A suite that vanished whole: the plan still says two.
        let log = passing();
        let e = judge(&log[..log.len() - 5], EXPECTED_SKIPS, Arch::Arm64, true).unwrap_err();
        assert!(e.contains("KUnit planned 2 suites, 1 were seen"), "{e}");
        let log = without(&passing(), "1..2");
        let e = judge(&log, EXPECTED_SKIPS, Arch::Arm64, true).unwrap_err();
        assert!(e.contains("no top-level plan"), "{e}");
    }

    #[test]
    fn a_suite_that_says_not_ok_fails_even_with_passing_tests() {
        let log = replace(&passing(), "ok 2 other", "not ok 2 other");
        let e = judge(&log, EXPECTED_SKIPS, Arch::Arm64, true).unwrap_err();
        assert!(e.contains("other: the suite says not ok"), "{e}");
    }

    #[test]
    fn a_skip_fails_unless_expected_and_is_reported() {
        let log = replace(&passing(), "    ok 1 a", "    ok 1 a # SKIP no hardware");
        let e = judge(&log, EXPECTED_SKIPS, Arch::Arm64, true).unwrap_err();
        assert!(e.contains("other: a skipped, which is not expected"), "{e}");
        let log = passing();
        let task = log
            .iter()
            .map(|l| strip_timestamp(l))
            .find(|l| l.contains("ok ") && l.ends_with("rust_doctest_kernel_task_rs_0"))
            .unwrap();
        let log = replace(&log, task, &format!("{task} # SKIP excluded"));
        let expected = [ExpectedSkip {
            location: "rust/kernel/task.rs:52",
            why: "a diagnosed cause",
        }];
        let ok = judge(&log, &expected, Arch::Arm64, true).unwrap();
        assert!(
            ok.contains(
                "1 skipped as expected: rust_doctest_kernel_task_rs_0 (rust/kernel/task.rs:52"
            ),
            "{ok}"
        );
        assert!(ok.contains("task 0/1"), "a skip is not a pass: {ok}");
        let e = judge(&log, EXPECTED_SKIPS, Arch::Arm64, true).unwrap_err();
        assert!(e.contains("rust_doctest_kernel_task_rs_0 skipped"), "{e}");
    }

    /// `log` without the doctests whose name contains `name`, the doctest
    /// suite's plan shrunk to match (so that only the count can notice).
    fn without_tests(log: Vec<String>, name: &str) -> Vec<String> {
        let (gone, log): (Vec<String>, Vec<String>) =
            log.into_iter().partition(|l| l.contains(name));
        let dropped = gone
            .iter()
            .filter(|l| strip_timestamp(l).trim_start().starts_with("ok "))
            .count();
        let plan = log
            .iter()
            .map(|l| strip_timestamp(l))
            .find(|l| l.starts_with("    1..") && *l != "    1..1")
            .unwrap();
        let planned: usize = plan[7..].parse().unwrap();
        replace(&log, plan, &format!("    1..{}", planned - dropped))
    }

    #[test]
    fn the_device_tree_modules_are_required_where_they_are_built() {
        // Without the device-tree modules' doctests: x86_64 passes, arm64 does not.
        let log = without_tests(passing(), "rust_doctest_kernel_clk_rs_");
        judge(&log, EXPECTED_SKIPS, Arch::X86_64, true).unwrap();
        let e = judge(&log, EXPECTED_SKIPS, Arch::Arm64, true).unwrap_err();
        assert!(e.contains("module clk: 0 doctests ran, 11 expected"), "{e}");
        let e = judge(&log, EXPECTED_SKIPS, Arch::Riscv64, true).unwrap_err();
        assert!(e.contains("module clk: 0 doctests ran"), "{e}");
    }

    #[test]
    fn each_of_our_modules_needs_its_doctests() {
        for (module, n) in doctests(Arch::Arm64) {
            // Drop the module's last doctest and renumber nothing: the suite's plan
            // shrinks with it, so only the count can notice.
            let last = format!("rust_doctest_kernel_{module}_rs_{}", n - 1);
            let log = without_tests(passing(), &last);
            let e = judge(&log, EXPECTED_SKIPS, Arch::Arm64, true).unwrap_err();
            assert!(
                e.contains(&format!(
                    "module {module}: {} doctests ran, {n} expected",
                    n - 1
                )),
                "{e}"
            );
        }
    }

    #[test]
    fn a_module_with_more_doctests_than_counted_fails_too() {
        // One more devres example than the table says: an example added without
        // its count, or a count that was only ever a floor.
        let n = doctests(Arch::Arm64)
            .find(|(m, _)| *m == "devres")
            .unwrap()
            .1;
        let counts = doctests(Arch::Arm64).map(|(m, c)| (m, if m == "devres" { c + 1 } else { c }));
        let log: Vec<String> = unstamped_with(counts)
            .iter()
            .map(|l| format!("[    1.000000] {l}"))
            .collect();
        let e = judge(&log, EXPECTED_SKIPS, Arch::Arm64, true).unwrap_err();
        assert!(
            e.contains(&format!(
                "module devres: {} doctests ran, {n} expected",
                n + 1
            )),
            "{e}"
        );
    }
}
