//! Running the chosen scenarios: every target (an arch's kernel of one line) on one board, up
//! to `--jobs` boots at once, in `schedule`'s order.

use super::boot::{selftest_verdict, Rig, SelfTestPart, TimedPart};
use super::*;
use crate::arch::Arch;
use crate::guest::device::{self};
use crate::host::provision::Toolchain;
use crate::judge::Judgement;
use crate::kernel::{self, Flavor};
use crate::scenario::{self, Check, Scenario};
use crate::Paths;
use anyhow::{bail, Context, Result};
use report::{Outcome, Verdict};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::Instant;

/// The host programs the boots use, built by cargo beside the kernels and modules.
pub(super) struct HostBins {
    /// The device server, when a scenario has our device.
    device: Option<PathBuf>,
    /// The MMIO oracle's plugin, when a scenario's device is watched.
    oracle: Option<PathBuf>,
    /// The `vcpu-yield` plugin, when the run's vCPUs outnumber the CPUs.
    vcpu_yield: Option<PathBuf>,
    /// The `tcg-coverage` plugin, unless PCI_RIG_COVERAGE=off.
    coverage: Option<PathBuf>,
}

/// `boots_at_once`: the most guests the run boots at the same time.
pub(super) fn host_bins(
    paths: &Paths,
    opts: &TestOptions,
    boots_at_once: usize,
) -> Result<HostBins> {
    let device = match &opts.device {
        _ if !opts.scenarios.iter().any(|s| {
            s.machine.has_device() || matches!(s.machine, scenario::Machine::Module(_))
        }) =>
        {
            None
        }
        Some(server) => Some(server.clone()),
        None => Some(device::build_server(paths)?),
    };
    // PCI_RIG_ORACLE=off boots without the plugin (to measure what it costs).
    let oracle_off = std::env::var("PCI_RIG_ORACLE").is_ok_and(|v| v == "off");
    let watched = opts.scenarios.iter().any(|s| {
        s.machine.has_device()
            || s.machine == scenario::Machine::DeviceTree(crate::guest::dt::Edit::Platform)
            || matches!(s.check, Check::UpstreamPci { .. } | Check::Module { .. })
    });
    // vcpu-yield pays only where vCPUs outnumber the host's CPUs: a boot
    // alone pays for its translation callbacks and gains nothing (`probe`
    // alone on x86_64, 6 interleaved pairs: 1.49 s without, 1.62 s with).
    // PCI_RIG_VCPU_YIELD=off boots without it (to measure what it saves).
    let cpus = std::thread::available_parallelism().map_or(1, usize::from);
    let oversubscribed = boots_at_once * crate::arch::VCPUS > cpus;
    let yield_off = std::env::var("PCI_RIG_VCPU_YIELD").is_ok_and(|v| v == "off");
    let plugins = crate::host::plugins::build(paths)?;
    // PCI_RIG_COVERAGE=off boots without it (to measure what it costs).
    let coverage_off = std::env::var("PCI_RIG_COVERAGE").is_ok_and(|v| v == "off");
    Ok(HostBins {
        coverage: (!coverage_off).then_some(plugins.coverage),
        device,
        oracle: (watched && !oracle_off).then_some(plugins.oracle),
        vcpu_yield: (oversubscribed && !yield_off).then_some(plugins.vcpu_yield),
    })
}

/// A user's tree's own module the `module-*` scenarios run without `--module`: upstream's Rust
/// PCI sample.
const USER_TREE_SAMPLE: &str = "samples/rust/rust_driver_pci.ko";

/// Where a run boots: an arch's kernel of one line (each builds its own).
pub(super) struct Target {
    arch: Arch,
    flavor: Flavor,
    scenarios: Vec<&'static Scenario>,
}

/// Each kernel line's chosen scenarios on its arches (`opts.arches` for the 6.12 line's,
/// `opts.mainline_arches` for mainline's): the 6.12 line's targets first.
pub(super) fn targets(opts: &TestOptions) -> Vec<Target> {
    let mut out = Vec::new();
    for (line, arches) in [
        (kernel::Line::Lts, &opts.arches),
        (kernel::Line::Mainline, &opts.mainline_arches),
    ] {
        let chosen: Vec<&'static Scenario> = opts
            .scenarios
            .iter()
            .copied()
            .filter(|s| s.line == line)
            .collect();
        if chosen.is_empty() {
            continue;
        }
        for &arch in arches {
            let mut scenarios = chosen.clone();
            if let (Some((seed, n)), kernel::Line::Lts) = (opts.matrix_sample, line) {
                scenarios.extend(crate::matrix::sample(seed, arch, n));
            }
            out.push(Target {
                arch,
                flavor: Flavor {
                    line,
                    // A user's tree replaces the mainline line's package.
                    src: match line {
                        kernel::Line::Mainline => opts.kernel_src.clone(),
                        kernel::Line::Lts => None,
                    },
                    ..opts.flavor.clone()
                },
                scenarios,
            });
        }
    }
    out
}

/// Runs the chosen scenarios on the chosen arches of each kernel line, logs under `dir`; a
/// verdict for each run (the unit tests are the caller's), in line and arch order. Up to
/// `opts.jobs` jobs go at once, from any arch and line, all from one board: a boot is one TCG
/// process, and much of a hot-plug scenario is waiting. Longest first (by the previous run's
/// times), so that no long boot starts last; a target's kernel and image are built by the
/// first job that needs them, and a job of a target not yet built never holds a worker while
/// another has work ready (so one line's kernel builds while the other's guests boot).
/// harness-selftest's guests are jobs of their own.
pub fn scenarios(paths: &Paths, opts: &TestOptions, dir: &Path) -> Result<Vec<Outcome>> {
    let targets = targets(opts);
    if targets.is_empty() {
        return Ok(Vec::new());
    }
    let mut arches: Vec<Arch> = targets.iter().map(|t| t.arch).collect();
    arches.sort();
    arches.dedup();
    let tc = setup(paths, &arches).context("provisioning")?;
    // Target-major, as reported.
    let runs: Vec<(usize, &Scenario, usize)> = targets
        .iter()
        .enumerate()
        .flat_map(|(a, t)| {
            t.scenarios
                .iter()
                .flat_map(move |&s| (1..=opts.repeat).map(move |i| (a, s, i)))
        })
        .collect();
    let history = report::previous_durations(&paths.results(), dir);
    let target_arches: Vec<Arch> = targets.iter().map(|t| t.arch).collect();
    let jobs = schedule::jobs(&runs, &target_arches, &history);
    let boots_at_once = opts.jobs.clamp(1, jobs.len().max(1));
    let host = OnceLock::new();
    let runner = Runner {
        paths,
        tc: &tc,
        host: &host,
        opts,
        dir,
    };
    let board = schedule::Board::new(jobs, targets.len());
    let prepared: Vec<OnceLock<Result<Prepared>>> =
        targets.iter().map(|_| Default::default()).collect();
    let done: Vec<OnceLock<Outcome>> = runs.iter().map(|_| Default::default()).collect();
    let parts: Vec<Vec<OnceLock<TimedPart>>> = runs
        .iter()
        .map(|(_, s, _)| schedule::parts(s).map(|_| Default::default()).collect())
        .collect();
    std::thread::scope(|scope| {
        // While the first kernels and modules build (the edit loop's module, above all).
        scope.spawn(|| {
            let built = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                host_bins(paths, opts, boots_at_once)
            }));
            // Set even when the build panicked: every boot waits for it.
            let _ = host.set(match built {
                Ok(r) => r.map_err(|e| format!("{e:#}")),
                Err(_) => Err("building the device server or the oracle panicked".into()),
            });
        });
        for _ in 0..opts.jobs.clamp(1, board.len().max(1)) {
            scope.spawn(|| {
                while let Some(task) = board.next() {
                    match task {
                        schedule::Task::Prepare(a) => {
                            // Ready even if the build panics: no worker
                            // then waits for this arch forever.
                            let _ready = schedule::ReadyOnDrop(&board, a);
                            let t = &targets[a];
                            let with_driver = t.scenarios.iter().any(|s| s.needs_driver());
                            let _ = prepared[a].set(prepare(
                                paths,
                                &tc,
                                t.arch,
                                &t.flavor,
                                dir,
                                with_driver,
                                Sources {
                                    guest: opts.modules.as_deref(),
                                    foreign: match (&opts.foreign, &t.flavor.src) {
                                        (Some(dir), _) => Some(ForeignSource::Dir(dir)),
                                        (None, Some(_)) => {
                                            Some(ForeignSource::InTree(USER_TREE_SAMPLE))
                                        }
                                        (None, None) => None,
                                    },
                                },
                            ));
                        }
                        schedule::Task::Run(job) => {
                            let (a, s, i) = runs[job.run];
                            let arch = targets[a].arch;
                            let panicked: Result<Prepared> = Err(anyhow::anyhow!(
                                "building the {arch} kernel or image panicked"
                            ));
                            let p = prepared[a].get().unwrap_or(&panicked);
                            match job.part {
                                None => {
                                    let _ = done[job.run].set(runner.run(arch, p, s, i));
                                }
                                Some(k) => {
                                    let part = runner.selftest_part(arch, p, s, i, k);
                                    let _ = parts[job.run][k].set(part);
                                }
                            }
                        }
                    }
                }
            });
        }
    });
    if let Some(Err(e)) = host.get() {
        bail!("{e}");
    }
    Ok(runs
        .iter()
        .zip(done)
        .zip(parts)
        .filter_map(|((&(a, s, i), done), parts)| {
            done.into_inner().or_else(|| {
                let parts: Vec<TimedPart> =
                    parts.into_iter().filter_map(OnceLock::into_inner).collect();
                (!parts.is_empty()).then(|| runner.selftest_outcome(targets[a].arch, s, i, parts))
            })
        })
        .collect())
}

/// What every run of one `scenarios` call shares.
pub(super) struct Runner<'a> {
    paths: &'a Paths,
    tc: &'a Toolchain,
    /// Set once cargo built them; each boot waits for it.
    host: &'a OnceLock<std::result::Result<HostBins, String>>,
    opts: &'a TestOptions,
    dir: &'a Path,
}

impl Runner<'_> {
    /// The folder of one run's logs.
    fn log_dir(&self, arch: Arch, s: &Scenario, i: usize) -> PathBuf {
        if self.opts.repeat == 1 {
            self.dir.join(format!("{arch}-{}", s.name))
        } else {
            self.dir.join(format!("{arch}-{}-{i:03}", s.name))
        }
    }

    /// Guest `k` of harness-selftest, as a job of its own; with the time
    /// it started and ended, for the run's duration.
    fn selftest_part(
        &self,
        arch: Arch,
        prepared: &Result<Prepared>,
        s: &Scenario,
        i: usize,
        k: usize,
    ) -> TimedPart {
        let t = Instant::now();
        let case = &scenario::SELFTEST_CASES[k];
        let result = match (prepared, self.host.wait()) {
            (Err(e), _) => Err(format!("kernel or image build failed: {e:#}")),
            (_, Err(e)) => Err(e.clone()),
            (Ok(p), _) if s.needs_driver() && p.driver.is_err() => Err(format!(
                "the driver did not build: {}",
                p.driver.as_ref().err().map_or("", String::as_str)
            )),
            (Ok(p), Ok(host)) => Rig {
                paths: self.paths,
                tc: self.tc,
                p,
                device: host.device.as_deref(),
                oracle: host.oracle.as_deref(),
                vcpu_yield: host.vcpu_yield.as_deref(),
                coverage: host.coverage.as_deref(),
                sweep: &self.opts.sweep,
                dma_path: self.opts.dma_path,
            }
            .selftest_case(case, &self.log_dir(arch, s, i))
            .unwrap_or_else(|e| Err(format!("{}: could not run: {e:#}", case.scenario.name))),
        };
        (result, t, Instant::now())
    }

    /// harness-selftest's outcome from its guests' jobs, printed.
    fn selftest_outcome(
        &self,
        arch: Arch,
        s: &Scenario,
        i: usize,
        parts: Vec<TimedPart>,
    ) -> Outcome {
        // Its guests' boots summed: they run as separate jobs, interleaved with others, so the
        // span from the first start to the last end says nothing (and the next run's
        // schedule estimates each guest from this).
        let duration_s = parts.iter().map(|p| (p.2 - p.1).as_secs_f64()).sum();
        let results: Vec<SelfTestPart> = parts.into_iter().map(|p| p.0).collect();
        let (verdict, reason) = if results.len() == scenario::SELFTEST_CASES.len() {
            selftest_verdict(&results)
        } else {
            (Verdict::Fail, "not every selftest guest ran".to_string())
        };
        self.outcome(arch, s, i, Judgement::plain(verdict, reason), duration_s)
    }

    /// One run of one scenario on one arch, printed as it ends.
    fn run(&self, arch: Arch, prepared: &Result<Prepared>, s: &Scenario, i: usize) -> Outcome {
        let log = self.log_dir(arch, s, i);
        let t = Instant::now();
        let judgement = match (prepared, self.host.wait()) {
            (_, Err(e)) => Judgement::plain(Verdict::Fail, e.clone()),
            (Ok(p), Ok(host)) => Rig {
                paths: self.paths,
                tc: self.tc,
                p,
                device: host.device.as_deref(),
                oracle: host.oracle.as_deref(),
                vcpu_yield: host.vcpu_yield.as_deref(),
                coverage: host.coverage.as_deref(),
                sweep: &self.opts.sweep,
                dma_path: self.opts.dma_path,
            }
            .run_scenario(s, &log),
            (Err(e), _) => Judgement::plain(
                Verdict::Fail,
                format!("kernel or image build failed: {e:#}"),
            ),
        };
        self.outcome(arch, s, i, judgement, t.elapsed().as_secs_f64())
    }

    /// A run's outcome, printed as it ends.
    fn outcome(
        &self,
        arch: Arch,
        s: &Scenario,
        i: usize,
        j: Judgement,
        duration_s: f64,
    ) -> Outcome {
        let Judgement {
            verdict,
            reason,
            timings,
            findings,
            ..
        } = j;
        let log = self.log_dir(arch, s, i);
        eprintln!(
            "test: {arch} {}{}: {:?} in {duration_s:.1} s — {}",
            s.name,
            if self.opts.repeat == 1 {
                String::new()
            } else {
                format!(" ({i}/{})", self.opts.repeat)
            },
            verdict,
            reason.lines().next().unwrap_or("")
        );
        if verdict == Verdict::Fail {
            eprintln!("{reason}\n(logs: {})", log.display());
        }
        let log = log
            .strip_prefix(&self.paths.root)
            .unwrap_or(&log)
            .display()
            .to_string();
        Outcome {
            arch: arch.to_string(),
            scenario: s.name.to_string(),
            verdict,
            duration_s,
            log,
            reason,
            timings,
            findings,
        }
    }
}
