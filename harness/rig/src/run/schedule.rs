//! The order `cargo xtask test` runs its jobs in, and the board its workers
//! take them from.
//!
//! Longest first: with fewer workers than jobs, a long job started last is
//! what the whole run waits for (longest-processing-time scheduling). How
//! long a job takes is what it took in the previous run, else its timeout
//! (the long ones have long timeouts). A worker never waits for an arch's
//! kernel while another arch has a job ready: it takes that job, or builds
//! an arch nobody builds yet.

use crate::arch::Arch;
use crate::scenario::{Check, Scenario, SELFTEST_CASES};
use std::collections::BTreeMap;
use std::ops::Range;
use std::sync::{Condvar, Mutex};

/// One unit of work: a run of a scenario (by its index in the run list),
/// or one guest of harness-selftest's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Job {
    pub run: usize,
    /// The selftest case, when the run is split into its guests.
    pub part: Option<usize>,
    /// The arch's index.
    pub arch: usize,
}

/// The parts a run splits into: harness-selftest's guests, or none.
pub fn parts(s: &Scenario) -> Range<usize> {
    match s.check {
        Check::SelfTest => 0..SELFTEST_CASES.len(),
        _ => 0..0,
    }
}

/// Seconds one job is expected to take: the previous run's time for its
/// scenario on its arch (a selftest guest: its share), else its timeout.
fn estimate(
    s: &Scenario,
    arch: Arch,
    part: Option<usize>,
    history: &BTreeMap<(String, String), f64>,
) -> f64 {
    let n = parts(s).len().max(1) as f64;
    match (history.get(&(arch.to_string(), s.name.to_string())), part) {
        (Some(&secs), None) => secs,
        (Some(&secs), Some(_)) => secs / n,
        (None, None) => s.timeout.as_secs_f64(),
        (None, Some(k)) => SELFTEST_CASES[k].scenario.timeout.as_secs_f64(),
    }
}

/// Every job of `runs` (arch index, scenario, repetition), longest first;
/// ties keep the run list's order.
pub fn jobs(
    runs: &[(usize, &Scenario, usize)],
    arches: &[Arch],
    history: &BTreeMap<(String, String), f64>,
) -> Vec<Job> {
    let mut jobs: Vec<(f64, Job)> = Vec::new();
    for (run, &(arch, s, _)) in runs.iter().enumerate() {
        let parts = parts(s);
        let split: Vec<Option<usize>> = if parts.is_empty() {
            vec![None]
        } else {
            parts.map(Some).collect()
        };
        for part in split {
            let secs = estimate(s, arches[arch], part, history);
            jobs.push((secs, Job { run, part, arch }));
        }
    }
    jobs.sort_by(|a, b| b.0.total_cmp(&a.0));
    jobs.into_iter().map(|(_, j)| j).collect()
}

/// What a worker does next.
#[derive(Debug, PartialEq, Eq)]
pub enum Task {
    /// Build arch `n`'s kernel and image, then call `Board::ready(n)`.
    Prepare(usize),
    Run(Job),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ArchState {
    Waiting,
    Preparing,
    Ready,
}

struct State {
    pending: Vec<Job>,
    arches: Vec<ArchState>,
}

/// The jobs not yet taken and each arch's build state, shared by the workers.
pub struct Board {
    state: Mutex<State>,
    changed: Condvar,
    len: usize,
}

impl Board {
    pub fn new(jobs: Vec<Job>, arches: usize) -> Board {
        Board {
            len: jobs.len(),
            state: Mutex::new(State {
                pending: jobs,
                arches: vec![ArchState::Waiting; arches],
            }),
            changed: Condvar::new(),
        }
    }

    /// How many jobs there were.
    pub fn len(&self) -> usize {
        self.len
    }

    /// The next task, in order: the first pending job whose arch is built,
    /// else building the arch of the first pending job nobody builds yet;
    /// waits while only arches being built have jobs left. `None`: no
    /// jobs left.
    pub fn next(&self) -> Option<Task> {
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            if st.pending.is_empty() {
                return None;
            }
            if let Some(i) = st
                .pending
                .iter()
                .position(|j| st.arches[j.arch] == ArchState::Ready)
            {
                return Some(Task::Run(st.pending.remove(i)));
            }
            if let Some(a) = st
                .pending
                .iter()
                .map(|j| j.arch)
                .find(|&a| st.arches[a] == ArchState::Waiting)
            {
                st.arches[a] = ArchState::Preparing;
                return Some(Task::Prepare(a));
            }
            st = self.changed.wait(st).unwrap_or_else(|e| e.into_inner());
        }
    }

    /// Arch `a` is built (or failed to: its jobs then fail fast).
    pub fn ready(&self, a: usize) {
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        st.arches[a] = ArchState::Ready;
        self.changed.notify_all();
    }
}

/// Marks an arch ready when dropped: after its build, also one that
/// panicked (its jobs then fail fast instead of waiting).
pub struct ReadyOnDrop<'a>(pub &'a Board, pub usize);

impl Drop for ReadyOnDrop<'_> {
    fn drop(&mut self) {
        self.0.ready(self.1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::{BOOT, HARNESS_SELFTEST, MODULES, PROBE};

    fn history(entries: &[(&str, &str, f64)]) -> BTreeMap<(String, String), f64> {
        entries
            .iter()
            .map(|&(a, s, secs)| ((a.to_string(), s.to_string()), secs))
            .collect()
    }

    #[test]
    fn the_longest_jobs_go_first_by_the_previous_run() {
        let arches = [Arch::X86_64, Arch::Arm64];
        let runs = [(0, &BOOT, 1), (0, &PROBE, 1), (1, &BOOT, 1), (1, &PROBE, 1)];
        let h = history(&[
            ("x86_64", "boot", 4.0),
            ("x86_64", "probe", 9.0),
            ("arm64", "boot", 2.0),
            ("arm64", "probe", 30.0),
        ]);
        let order: Vec<usize> = jobs(&runs, &arches, &h).iter().map(|j| j.run).collect();
        assert_eq!(order, [3, 1, 0, 2]);
    }

    #[test]
    fn without_history_the_timeout_ranks_and_selftest_splits_into_its_guests() {
        let arches = [Arch::X86_64];
        let runs = [(0, &BOOT, 1), (0, &MODULES, 1), (0, &HARNESS_SELFTEST, 1)];
        let js = jobs(&runs, &arches, &BTreeMap::new());
        assert_eq!(js.len(), 2 + SELFTEST_CASES.len());
        assert_eq!(js[0].run, 1, "modules (600 s timeout) first: {js:?}");
        let mut cases: Vec<usize> = js.iter().filter_map(|j| j.part).collect();
        cases.sort();
        assert_eq!(cases, (0..SELFTEST_CASES.len()).collect::<Vec<_>>());
        assert!(js.iter().filter(|j| j.part.is_some()).all(|j| j.run == 2));
    }

    #[test]
    fn a_worker_builds_an_arch_nobody_builds_rather_than_wait() {
        let job = |run, arch| Job {
            run,
            part: None,
            arch,
        };
        let b = Board::new(vec![job(0, 0), job(1, 0), job(2, 1)], 2);
        assert_eq!(b.next(), Some(Task::Prepare(0)));
        // Arch 0 is being built: the next worker builds arch 1, not wait.
        assert_eq!(b.next(), Some(Task::Prepare(1)));
        b.ready(1);
        assert_eq!(b.next(), Some(Task::Run(job(2, 1))));
        b.ready(0);
        assert_eq!(b.next(), Some(Task::Run(job(0, 0))));
        assert_eq!(b.next(), Some(Task::Run(job(1, 0))));
        assert_eq!(b.next(), None);
    }

    #[test]
    fn a_worker_waits_while_only_arches_being_built_have_jobs() {
        let job = Job {
            run: 0,
            part: None,
            arch: 0,
        };
        let b = Board::new(vec![job], 1);
        assert_eq!(b.next(), Some(Task::Prepare(0)));
        std::thread::scope(|s| {
            let waiter = s.spawn(|| b.next());
            std::thread::sleep(std::time::Duration::from_millis(50));
            assert!(!waiter.is_finished(), "it must wait for the build");
            b.ready(0);
            assert_eq!(waiter.join().unwrap(), Some(Task::Run(job)));
        });
        assert_eq!(b.next(), None);
    }

    #[test]
    fn an_arch_whose_build_panicked_is_ready_all_the_same() {
        let job = Job {
            run: 0,
            part: None,
            arch: 0,
        };
        let b = Board::new(vec![job, job], 1);
        assert_eq!(b.next(), Some(Task::Prepare(0)));
        let built = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let _ready = ReadyOnDrop(&b, 0);
            panic!("the build");
        }));
        assert!(built.is_err());
        assert_eq!(b.next(), Some(Task::Run(job)), "not a wait forever");
    }
}
