//! KUnit results from the console: suites, their tests, and a summary per
//! kernel-crate module for the doc examples (`rust_doctest_kernel_<module>_rs_<n>`).

use crate::console::strip_timestamp;
use crate::ktap::{self, Line, TestResult};
use std::collections::BTreeMap;

#[derive(Debug, Default)]
pub struct Suite {
    pub name: String,
    /// The number of tests the suite announced.
    pub planned: Option<usize>,
    pub tests: Vec<TestResult>,
    /// The suite's own result line, once printed.
    pub ok: Option<bool>,
}

impl Suite {
    pub fn failed(&self) -> impl Iterator<Item = &TestResult> {
        self.tests.iter().filter(|t| !t.ok && !t.skip)
    }
}

/// Collects every suite printed on the console, in order.
pub fn suites(lines: &[String]) -> Vec<Suite> {
    let mut out: Vec<Suite> = Vec::new();
    let mut current: Option<Suite> = None;
    for raw in lines {
        let line = strip_timestamp(raw);
        if let Some(name) = line.trim_start().strip_prefix("# Subtest: ") {
            if line.starts_with("    ") {
                out.extend(current.take());
                current = Some(Suite {
                    name: name.trim().to_string(),
                    ..Suite::default()
                });
            }
            continue;
        }
        match (ktap::parse_line(line), current.as_mut()) {
            (Some(Line::Plan { depth: 1, count }), Some(s)) => s.planned = Some(count),
            (Some(Line::Result(r)), Some(s)) if r.depth == 1 => s.tests.push(r),
            (Some(Line::Result(r)), Some(s)) if r.depth == 0 && r.name == s.name => {
                s.ok = Some(r.ok);
                out.extend(current.take());
            }
            _ => {}
        }
    }
    out.extend(current);
    out
}

/// The kernel-crate module a doctest belongs to, e.g.
/// `rust_doctest_kernel_sync_revocable_rs_3` → `sync_revocable`.
pub fn doctest_module(test: &str) -> Option<&str> {
    let rest = test.strip_prefix("rust_doctest_kernel_")?;
    let (module, n) = rest.rsplit_once("_rs_")?;
    n.chars().all(|c| c.is_ascii_digit()).then_some(module)
}

/// Passed / total doctests per module.
pub fn per_module(suite: &Suite) -> BTreeMap<String, (usize, usize)> {
    let mut m: BTreeMap<String, (usize, usize)> = BTreeMap::new();
    for t in &suite.tests {
        let key = doctest_module(&t.name).unwrap_or(&t.name).to_string();
        let e = m.entry(key).or_default();
        e.0 += usize::from(t.ok);
        e.1 += 1;
    }
    m
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
ok 1 insmod_rust_minimal
";

    #[test]
    fn collects_suites_tests_and_results() {
        let s = suites(&lines(RUN));
        assert_eq!(s.len(), 2);
        assert_eq!(s[0].name, "rust_doctests_kernel");
        assert_eq!(s[0].planned, Some(3));
        assert_eq!(s[0].tests.len(), 3);
        assert_eq!(s[0].ok, Some(false));
        assert_eq!(
            s[0].failed().map(|t| t.name.as_str()).collect::<Vec<_>>(),
            ["rust_doctest_kernel_sync_arc_rs_0"]
        );
        // The second suite never finished: one of two tests, no result line.
        assert_eq!(
            (s[1].planned, s[1].tests.len(), s[1].ok),
            (Some(2), 1, None)
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
}
