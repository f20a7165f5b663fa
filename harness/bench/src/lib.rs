//! `cargo xtask bench`: the figures a rig is chosen by, measured side by side
//! in one run (absolute times drift on shared machines), written to
//! `target/pci-rig/bench/<run-id>/` as `bench.json` and `bench.svg` and
//! printed as a table. It never judges a number; it fails only when a
//! measurement could not be taken.
//!
//! 1. Guest figures, `--guest-runs` boots per arch of `boot` (boot→verdict)
//!    and `bench` (`figures::GuestFigures`: MMIO three ways, unbind cost).
//! 2. Edit→verdict: a real edit of the driver's source, then
//!    `cargo xtask test --arch A --scenario mmio`, timed to its exit.
//! 3. Warm matrix: `cargo xtask test` (the CI command) on a warm cache.
//!
//! With the guest figures: the MMIO oracle's cost, boot→verdict of
//! [`ORACLE_SCENARIO`] with and without the plugin (`PCI_RIG_ORACLE=off`),
//! `--guest-runs` of each per arch, taken in turns.
//!
//! With `--baseline REV`, instead: the checkout against revision REV,
//! interleaved, each side's `cargo xtask test` timed as a user runs it
//! ([`baseline`]), into bench.json's `baseline` section, the table and the
//! chart.

pub mod baseline;
mod render;
pub mod report;
use render::{picture, table};
pub use report::*;
mod edit;
pub use rig::judge::figures;
pub mod svg;

use anyhow::{bail, Context, Result};
use edit::{Restore, EDITED};
use figures::{median, GuestFigures, Mmio, KS};
use rig::arch::Arch;
use rig::kernel::Flavor;
use rig::run::report::Verdict;
use rig::run::{self, TestOptions};
use rig::scenario;
use rig::Paths;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Instant;

pub struct BenchOptions {
    pub arches: Vec<Arch>,
    /// Boots of `boot` and of `bench` per arch.
    pub guest_runs: usize,
    /// Edit→verdict runs (0: skip).
    pub edit_runs: usize,
    /// Time the whole `cargo xtask test`.
    pub matrix: bool,
}

/// One arch's oracle cost from its runs; `None` when either side has no
/// passing run (nothing to compare).
pub fn oracle_cost_row(arch: &str, with_s: &[f64], without_s: &[f64]) -> Option<OracleCost> {
    let median_with_s = median(with_s.to_vec())?;
    let median_without_s = median(without_s.to_vec()).filter(|s| *s > 0.0)?;
    Some(OracleCost {
        arch: arch.to_string(),
        scenario: ORACLE_SCENARIO.name.to_string(),
        with_s: with_s.to_vec(),
        without_s: without_s.to_vec(),
        median_with_s,
        median_without_s,
        ratio: median_with_s / median_without_s,
    })
}

/// The DMA rows of `boots`, per direction.
fn dma_rows(boots: &[GuestFigures]) -> Vec<DmaRow> {
    figures::DMA_DIRS
        .iter()
        .filter_map(|&dir| {
            let all: Vec<&figures::Dma> = boots
                .iter()
                .flat_map(|b| b.dma.iter().filter(|d| d.dir == dir))
                .collect();
            let bytes = all.first()?.bytes;
            let rate = |ns: i64| bytes as f64 * 1e9 / 1024.0 / ns.max(1) as f64;
            Some(DmaRow {
                dir: dir.to_string(),
                bytes,
                kib_per_s: median(all.iter().map(|d| rate(d.ns)).collect())?,
                cpu_kib_per_s: median(all.iter().map(|d| rate(d.cpu_ns)).collect())?,
            })
        })
        .collect()
}

/// The interrupt round trip of each mode seen in `boots`.
pub fn irq_rows(boots: &[GuestFigures]) -> Vec<IrqRow> {
    let mut modes: Vec<&str> = boots
        .iter()
        .filter_map(|b| b.irq.as_ref().map(|t| t.mode.as_str()))
        .collect();
    modes.sort_unstable();
    modes.dedup();
    modes
        .into_iter()
        .filter_map(|mode| {
            let ns: Vec<f64> = boots
                .iter()
                .filter_map(|b| b.irq.as_ref().filter(|t| t.mode == mode))
                .map(|t| t.median_ns as f64)
                .collect();
            Some(IrqRow {
                mode: mode.to_string(),
                boots: ns.len(),
                median_ns: median(ns)? as i64,
            })
        })
        .collect()
}

/// The points the bench times: every eighth of `sweep::every()` but `die`'s (each waits QEMU's
/// 5 s and an unplug: `sweep-acpi` has them), so every other kind, refusals at most steps,
/// lost-interrupt waits and remove()'s RESET are in the mix. Few enough that the kernel prints
/// the command line carrying them whole (a printk record holds about 1000 characters, and the
/// judge reads the points back from it): every fifth, 104 points, did not fit.
pub fn sweep_pace_points() -> Vec<rig::sweep::Point> {
    rig::sweep::every()
        .into_iter()
        .step_by(8)
        .filter(|p| p.kind != qemu_device::model::FaultKind::Die)
        .collect()
}

/// Points per minute of the sweep boot's scenario phase.
pub fn sweep_pace(arch: &str, points: usize, o: &run::report::Outcome) -> Option<SweepPace> {
    let scenario_s = o.findings.phases.as_ref()?.scenario_ms? / 1000.0;
    Some(SweepPace {
        arch: arch.to_string(),
        points,
        scenario_s,
        boot_s: o.duration_s,
        points_per_min: points as f64 * 60.0 / scenario_s,
        passed: o.verdict == Verdict::Pass,
    })
}

/// Medians over the `bench` boots of one arch.
pub fn guest_row(arch: &str, boots: &[GuestFigures]) -> GuestRow {
    let mmio = figures::DEVICES
        .iter()
        .filter_map(|d| {
            let of = |f: fn(&Mmio) -> i64| {
                median(
                    boots
                        .iter()
                        .flat_map(|b| b.mmio.iter().filter(|m| m.device == *d).map(f))
                        .map(|v| v as f64)
                        .collect(),
                )
            };
            let reads = boots
                .iter()
                .flat_map(|b| &b.mmio)
                .find(|m| m.device == *d)?
                .reads;
            let mmio = Mmio {
                device: d.to_string(),
                reads,
                raw_ns: of(|m| m.raw_ns)? as i64,
                devres_ns: of(|m| m.devres_ns)? as i64,
                guard_ns: of(|m| m.guard_ns)? as i64,
                access_ns: of(|m| m.access_ns)? as i64,
            };
            Some(MmioRow {
                b_over_a: mmio.devres_ratio(),
                c_over_a: mmio.guard_ratio(),
                d_over_a: mmio.access_ratio(),
                mmio,
            })
        })
        .collect();
    let pooled = GuestFigures {
        unbind: boots.iter().flat_map(|b| b.unbind.clone()).collect(),
        ..GuestFigures::default()
    };
    let mut unbind = Vec::new();
    for busy in [false, true] {
        for k in KS {
            if let Some((remove_ns, total_ns)) = pooled.unbind_median(k, busy) {
                unbind.push(UnbindRow {
                    k,
                    worker: if busy { "busy" } else { "idle" },
                    runs: pooled
                        .unbind
                        .iter()
                        .filter(|u| u.k == k && u.busy == busy)
                        .count(),
                    remove_ns,
                    total_ns,
                });
            }
        }
    }
    let revoke_each = KS
        .iter()
        .filter_map(|&k| {
            let ns = median(
                boots
                    .iter()
                    .flat_map(|b| {
                        b.revoke_each
                            .iter()
                            .filter(|r| r.k == k)
                            .map(|r| r.ns as f64)
                    })
                    .collect(),
            )?;
            Some(RevokeRow { k, ns: ns as i64 })
        })
        .collect();
    GuestRow {
        arch: arch.to_string(),
        boots: boots.len(),
        mmio,
        unbind,
        revoke_each,
        irq: Vec::new(),
        dma: dma_rows(boots),
        dma_alloc_ns: median(
            boots
                .iter()
                .filter_map(|b| b.dma_alloc.as_ref().map(|a| a.median_ns as f64))
                .collect(),
        ),
        window_kib_per_s: median(
            boots
                .iter()
                .filter_map(|b| b.window.as_ref().map(|w| w.kib_per_s as f64))
                .collect(),
        ),
    }
}

/// Runs `cargo ARGS` in the checkout as a user would, output into `log`; its
/// wall time and whether it exited successfully.
fn cargo(paths: &Paths, args: &[&str], log: &Path) -> Result<(f64, bool)> {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let out = std::fs::File::create(log).with_context(|| format!("creating {}", log.display()))?;
    let started = Instant::now();
    let status = Command::new(cargo)
        .args(args)
        .current_dir(&paths.root)
        .stdin(Stdio::null())
        .stdout(out.try_clone()?)
        .stderr(out)
        .status()
        .context("running cargo")?;
    Ok((started.elapsed().as_secs_f64(), status.success()))
}

fn timed(
    paths: &Paths,
    dir: &Path,
    name: &str,
    args: &[&str],
    runs: usize,
    goal_s: f64,
    before: impl Fn(usize) -> Result<()>,
) -> Result<Timed> {
    let command = format!("cargo xtask {}", args.join(" "));
    let mut t = Timed {
        command: command.clone(),
        runs_s: Vec::new(),
        median_s: 0.0,
        goal_s,
        all_passed: true,
        logs: Vec::new(),
    };
    for i in 1..=runs {
        before(i)?;
        let log = dir.join(format!("{name}-{i}.log"));
        let xtask: Vec<&str> = std::iter::once("xtask")
            .chain(args.iter().copied())
            .collect();
        let (s, ok) = cargo(paths, &xtask, &log)?;
        eprintln!(
            "bench: {command} ({i}/{runs}): {s:.1} s{}",
            if ok { "" } else { " — FAILED, see the log" }
        );
        t.runs_s.push(s);
        t.all_passed &= ok;
        t.logs.push(rel(paths, &log));
    }
    t.median_s = median(t.runs_s.clone()).unwrap_or(0.0);
    Ok(t)
}

fn rel(paths: &Paths, p: &Path) -> String {
    p.strip_prefix(&paths.root)
        .unwrap_or(p)
        .display()
        .to_string()
}

/// The edit→verdict loop: each run appends a different comment line to the
/// driver (so it really rebuilds: the line names the bench's run, new to the
/// module's build cache), then times the mmio scenario.
fn edit_verdict(paths: &Paths, dir: &Path, run_id: &str, arch: Arch, runs: usize) -> Result<Timed> {
    let restore = Restore::take(&paths.root.join(EDITED))?;
    let arch = arch.to_string();
    timed(
        paths,
        dir,
        "edit-verdict",
        &["test", "--arch", &arch, "--scenario", "mmio"],
        runs,
        GOAL_EDIT_S,
        |i| restore.edit(&format!("cargo xtask bench, {run_id}"), i),
    )
}

fn commit(paths: &Paths) -> String {
    Command::new("git")
        .args(["describe", "--always", "--dirty"])
        .current_dir(&paths.root)
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map_or_else(
            || "unknown".into(),
            |o| String::from_utf8_lossy(&o.stdout).trim().to_string(),
        )
}

/// Sets `PCI_RIG_ORACLE` for the runs that follow and puts the caller's
/// value back when dropped.
struct OracleSwitch {
    before: Option<std::ffi::OsString>,
}

impl OracleSwitch {
    const VAR: &'static str = "PCI_RIG_ORACLE";

    /// Only while no other thread runs: `run::scenarios` has joined its own.
    fn set(on: bool) -> OracleSwitch {
        let before = std::env::var_os(Self::VAR);
        std::env::set_var(Self::VAR, if on { "on" } else { "off" });
        OracleSwitch { before }
    }
}

impl Drop for OracleSwitch {
    fn drop(&mut self) {
        match &self.before {
            Some(v) => std::env::set_var(Self::VAR, v),
            None => std::env::remove_var(Self::VAR),
        }
    }
}

/// Whether a passing run's verdict says the oracle watched it (its summary
/// names what the plugin saw).
pub fn oracle_watched(reason: &str) -> bool {
    reason.contains("the MMIO oracle saw")
}

/// Boot→verdict of [`ORACLE_SCENARIO`] with and without the oracle, `runs`
/// of each per arch, in turns (with, without, with, …) so that a machine
/// getting busier mid-way weighs on both sides. Returns the rows and
/// whether every run passed with the oracle as asked.
fn oracle_cost(
    paths: &Paths,
    dir: &Path,
    arches: &[Arch],
    runs: usize,
) -> Result<(Vec<OracleCost>, bool)> {
    let mut times: Vec<[Vec<f64>; 2]> = arches.iter().map(|_| Default::default()).collect();
    let mut ok = true;
    for i in 1..=runs {
        for on in [true, false] {
            let _switch = OracleSwitch::set(on);
            let side = if on { "with" } else { "without" };
            let sub = dir.join(format!("oracle-{side}-{i}"));
            std::fs::create_dir_all(&sub)?;
            let outcomes = run::scenarios(
                paths,
                &TestOptions {
                    arches: arches.to_vec(),
                    mainline_arches: Vec::new(),
                    scenarios: vec![ORACLE_SCENARIO],
                    flavor: Flavor::default(),
                    unit_tests: false,
                    repeat: 1,
                    jobs: 1,
                    sweep: rig::sweep::Plan::All,
                    modules: None,
                    device: None,
                    dma_path: Default::default(),
                    foreign: None,
                    kernel_src: None,
                    coverage_bar: false,
                    matrix_sample: None,
                },
                &sub,
            )?;
            for o in outcomes {
                let Some(a) = arches.iter().position(|a| a.to_string() == o.arch) else {
                    continue;
                };
                if o.verdict != Verdict::Pass {
                    eprintln!(
                        "bench: {} {} {side} the oracle failed: {}",
                        o.arch,
                        o.scenario,
                        o.reason.lines().next().unwrap_or("")
                    );
                    ok = false;
                } else if oracle_watched(&o.reason) != on {
                    eprintln!(
                        "bench: {} {} was to run {side} the oracle; its verdict says otherwise",
                        o.arch, o.scenario
                    );
                    ok = false;
                } else {
                    times[a][usize::from(!on)].push(o.duration_s);
                }
            }
        }
    }
    let rows = arches
        .iter()
        .zip(&times)
        .filter_map(|(arch, [with, without])| oracle_cost_row(&arch.to_string(), with, without))
        .collect::<Vec<_>>();
    ok &= rows.len() == arches.len();
    Ok((rows, ok))
}

/// `cargo xtask bench --baseline REV` ([`baseline::compare`]): head
/// against REV instead of the head-only figures, into bench.json's
/// `baseline`, the chart and the table. Returns whether every measurement
/// was taken; a missed goal or a failed verdict does not fail it.
pub fn against_baseline(paths: &Paths, opts: &baseline::Options) -> Result<bool> {
    let run_id = run::run_id();
    let dir = paths.results().join("bench").join(&run_id);
    std::fs::create_dir_all(&dir)?;
    eprintln!("bench: results in {}", dir.display());
    let comparison = baseline::compare(paths, opts, &dir, &run_id)?;
    let complete = comparison.missing.is_empty();
    let report = Report {
        run_id,
        commit: commit(paths),
        cpus: std::thread::available_parallelism().map_or(1, usize::from),
        edit_verdict: None,
        warm_matrix: None,
        boot: Vec::new(),
        guest: Vec::new(),
        goals: goals(),
        oracle_cost: Vec::new(),
        sweep: Vec::new(),
        baseline: Some(comparison),
    };
    write(&dir, &report)?;
    Ok(complete)
}

fn goals() -> Goals {
    Goals {
        devres_ratio_on_pci_testdev: GOAL_DEVRES_RATIO,
        access_ratio_on_pci_testdev: GOAL_ACCESS_RATIO,
        edit_verdict_s: GOAL_EDIT_S,
        warm_matrix_s: GOAL_MATRIX_S,
        oracle_ratio: GOAL_ORACLE_RATIO,
    }
}

/// bench.json, bench.svg and the table.
fn write(dir: &Path, report: &Report) -> Result<()> {
    std::fs::write(
        dir.join("bench.json"),
        serde_json::to_string_pretty(report)? + "\n",
    )?;
    std::fs::write(dir.join("bench.svg"), picture(report))?;
    println!("\n{}", table(report));
    println!("bench: {}", dir.join("bench.json").display());
    println!("bench: {}", dir.join("bench.svg").display());
    Ok(())
}

/// `cargo xtask bench`. Returns whether every measurement was taken.
pub fn bench(paths: &Paths, opts: &BenchOptions) -> Result<bool> {
    let run_id = run::run_id();
    let dir = paths.results().join("bench").join(&run_id);
    std::fs::create_dir_all(&dir)?;
    eprintln!("bench: results in {}", dir.display());

    // Guest figures first: the boots also warm the cache for what follows.
    let (boot, mut guest, mut ok) = guest_figures(paths, &dir, opts)?;
    let (mainline, measured) = mainline_figures(paths, &dir, opts)?;
    guest.extend(mainline);
    ok &= measured;
    let (oracle_cost, measured) = oracle_cost(paths, &dir, &opts.arches, opts.guest_runs)?;
    ok &= measured;
    let (sweep, measured) = sweep_figures(paths, &dir, &opts.arches)?;
    ok &= measured;

    let edit_arch = if opts.arches.contains(&Arch::X86_64) {
        Arch::X86_64
    } else {
        opts.arches[0]
    };
    let edit_verdict = if opts.edit_runs > 0 {
        let t = edit_verdict(paths, &dir, &run_id, edit_arch, opts.edit_runs)?;
        ok &= t.all_passed;
        Some(t)
    } else {
        None
    };
    let warm_matrix = if opts.matrix {
        let t = warm_matrix(paths, &dir, &opts.arches)?;
        ok &= t.all_passed;
        Some(t)
    } else {
        None
    };

    let report = Report {
        run_id,
        commit: commit(paths),
        cpus: std::thread::available_parallelism().map_or(1, usize::from),
        edit_verdict,
        warm_matrix,
        boot,
        guest,
        goals: goals(),
        oracle_cost,
        sweep,
        baseline: None,
    };
    write(&dir, &report)?;
    Ok(ok)
}

/// The options of the bench's own boots: one at a time (figures from a machine running
/// nothing else), no unit tests.
fn bench_boots(
    arches: Vec<Arch>,
    mainline_arches: Vec<Arch>,
    scenarios: Vec<&'static scenario::Scenario>,
    repeat: usize,
    sweep: rig::sweep::Plan,
) -> TestOptions {
    TestOptions {
        arches,
        mainline_arches,
        scenarios,
        flavor: Flavor::default(),
        unit_tests: false,
        repeat,
        jobs: 1,
        sweep,
        modules: None,
        device: None,
        dma_path: Default::default(),
        foreign: None,
        kernel_src: None,
        coverage_bar: false,
        matrix_sample: None,
    }
}

/// The figures of each passing boot of `name` on `arch` (the judge's findings); the others
/// are said and left out.
fn passing_figures(outcomes: &[run::report::Outcome], arch: &str, name: &str) -> Vec<GuestFigures> {
    outcomes
        .iter()
        .filter(|o| o.arch == arch && o.scenario == name)
        .filter_map(|o| match (&o.findings.figures, o.verdict) {
            (Some(g), Verdict::Pass) => Some(g.clone()),
            _ => {
                eprintln!(
                    "bench: {arch} {name} boot failed: {}",
                    o.reason.lines().next().unwrap_or("")
                );
                None
            }
        })
        .collect()
}

/// `boot`'s walls and the guest figures (`bench`, `bench-intx`) per arch, on the 6.12 line;
/// whether every run passed.
fn guest_figures(
    paths: &Paths,
    dir: &Path,
    opts: &BenchOptions,
) -> Result<(Vec<BootTimes>, Vec<GuestRow>, bool)> {
    let scenarios = vec![
        &scenario::BOOT,
        &scenario::BENCH_FULL,
        &scenario::BENCH_INTX,
    ];
    let boots = bench_boots(
        opts.arches.clone(),
        Vec::new(),
        scenarios,
        opts.guest_runs,
        rig::sweep::Plan::All,
    );
    let outcomes = run::scenarios(paths, &boots, dir)?;
    let (mut boot, mut guest, mut ok) = (Vec::new(), Vec::new(), true);
    for arch in &opts.arches {
        let arch = arch.to_string();
        let runs_s: Vec<f64> = outcomes
            .iter()
            .filter(|o| o.arch == arch && o.scenario == "boot" && o.verdict == Verdict::Pass)
            .map(|o| o.duration_s)
            .collect();
        let boots = passing_figures(&outcomes, &arch, "bench");
        let intx_boots = passing_figures(&outcomes, &arch, "bench-intx");
        ok &= runs_s.len() == opts.guest_runs
            && boots.len() == opts.guest_runs
            && intx_boots.len() == opts.guest_runs;
        boot.push(BootTimes {
            arch: arch.clone(),
            median_s: median(runs_s.clone()).unwrap_or(0.0),
            runs_s,
        });
        let mut row = guest_row(&arch, &boots);
        row.irq = irq_rows(&[&boots[..], &intx_boots[..]].concat());
        guest.push(row);
    }
    Ok((boot, guest, ok))
}

/// The same figures on the mainline line, from the bench module's port to upstream's API
/// (docs/kernel-lines.md, "One driver, two API generations"): rows `ARCH 7.x`.
fn mainline_figures(
    paths: &Paths,
    dir: &Path,
    opts: &BenchOptions,
) -> Result<(Vec<GuestRow>, bool)> {
    let sub = dir.join("mainline");
    std::fs::create_dir_all(&sub)?;
    let boots = bench_boots(
        Vec::new(),
        opts.arches.clone(),
        vec![&scenario::MAINLINE_BENCH],
        opts.guest_runs,
        rig::sweep::Plan::All,
    );
    let outcomes = run::scenarios(paths, &boots, &sub)?;
    let (mut rows, mut ok) = (Vec::new(), true);
    for arch in &opts.arches {
        let boots = passing_figures(&outcomes, &arch.to_string(), scenario::MAINLINE_BENCH.name);
        ok &= boots.len() == opts.guest_runs;
        let mut row = guest_row(&format!("{arch} 7.x"), &boots);
        row.irq = irq_rows(&boots);
        rows.push(row);
    }
    Ok((rows, ok))
}

/// The removal-point sweep's pace per arch (`sweep_pace_points()` in one boot); whether each
/// boot passed.
fn sweep_figures(paths: &Paths, dir: &Path, arches: &[Arch]) -> Result<(Vec<SweepPace>, bool)> {
    let points = sweep_pace_points();
    let sub = dir.join("sweep");
    std::fs::create_dir_all(&sub)?;
    let boots = bench_boots(
        arches.to_vec(),
        Vec::new(),
        vec![&scenario::SWEEP],
        1,
        rig::sweep::Plan::Points(points.clone()),
    );
    let outcomes = run::scenarios(paths, &boots, &sub)?;
    let sweep: Vec<SweepPace> = outcomes
        .iter()
        .filter_map(|o| sweep_pace(&o.arch, points.len(), o))
        .collect();
    let ok = sweep.len() == arches.len() && sweep.iter().all(|p| p.passed);
    Ok((sweep, ok))
}

/// The whole `cargo xtask test` on `arches`, warm (the workspace's test binaries too, not
/// only the kernels), timed once.
fn warm_matrix(paths: &Paths, dir: &Path, arches: &[Arch]) -> Result<Timed> {
    let arch_arg = match arches {
        [one] => one.to_string(),
        _ => "all".to_string(),
    };
    let (_, built) = cargo(
        paths,
        &["test", "--workspace", "--no-run"],
        &dir.join("warmup.log"),
    )?;
    if !built {
        bail!(
            "cargo test --workspace --no-run failed; see {}",
            dir.join("warmup.log").display()
        );
    }
    timed(
        paths,
        dir,
        "warm-matrix",
        &["test", "--arch", &arch_arg],
        1,
        GOAL_MATRIX_S,
        |_| Ok(()),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    #[test]
    fn the_sweep_pace_is_points_per_minute_of_the_scenario_phase() {
        let mut o = run::report::Outcome {
            arch: "arm64".into(),
            scenario: "sweep".into(),
            verdict: Verdict::Pass,
            duration_s: 50.0,
            log: String::new(),
            reason: String::new(),
            timings: Default::default(),
            findings: Default::default(),
        };
        assert!(sweep_pace("arm64", 33, &o).is_none(), "no phases, no pace");
        o.findings.phases = Some(rig::judge::phases::Phases {
            scenario_ms: Some(44_000.0),
            ..Default::default()
        });
        let p = sweep_pace("arm64", 33, &o).unwrap();
        assert_eq!(
            (p.points_per_min, p.scenario_s, p.passed),
            (45.0, 44.0, true)
        );
        let points = sweep_pace_points();
        assert_eq!(points.len(), 65);
        assert!(rig::sweep::cmdline(&points).len() <= rig::sweep::CMDLINE_MAX);
        assert!(points
            .iter()
            .all(|p| p.kind != qemu_device::model::FaultKind::Die));
    }
    use figures::{IrqTrip, RevokeEach, Unbind};

    fn boot(raw: i64, devres: i64, total_ms: i64) -> GuestFigures {
        let mmio = |device: &str, scale: i64| Mmio {
            device: device.into(),
            reads: 3232,
            raw_ns: raw * scale,
            devres_ns: devres * scale,
            guard_ns: raw * scale,
            access_ns: raw * scale,
        };
        GuestFigures {
            mmio: vec![mmio("pci-testdev", 1), mmio("pci-rig", 300)],
            window: None,
            unbind: KS
                .iter()
                .flat_map(|&k| {
                    [false, true].map(|busy| Unbind {
                        k,
                        busy,
                        remove_ns: 1000,
                        total_ns: total_ms * 1_000_000,
                    })
                })
                .collect(),
            revoke_each: KS
                .map(|k| RevokeEach {
                    k,
                    ns: i64::from(k) * 10_000_000,
                })
                .to_vec(),
            dma: Vec::new(),
            dma_alloc: None,
            irq: Some(IrqTrip {
                mode: "msi".into(),
                samples: 101,
                median_ns: total_ms * 1000,
                lost: 0,
            }),
        }
    }

    #[test]
    fn interrupt_round_trips_are_medians_per_mode() {
        let mut intx = boot(200, 200, 90);
        intx.irq.as_mut().unwrap().mode = "intx".into();
        let rows = irq_rows(&[
            boot(200, 200, 10),
            boot(200, 200, 30),
            boot(200, 200, 20),
            intx,
        ]);
        let got: Vec<(&str, usize, i64)> = rows
            .iter()
            .map(|r| (r.mode.as_str(), r.boots, r.median_ns))
            .collect();
        assert_eq!(got, vec![("intx", 1, 90_000), ("msi", 3, 20_000)]);
        let mut row = guest_row("x86_64", &[boot(200, 205, 10)]);
        row.irq = rows;
        let t = table(&report(vec![row], vec![10.0]));
        assert!(
            t.contains("interrupt round trip x86_64") && t.contains("intx 90.0 µs, msi 20.0 µs"),
            "{t}"
        );
    }

    fn report(guest: Vec<GuestRow>, edit: Vec<f64>) -> Report {
        Report {
            run_id: "r".into(),
            commit: "c".into(),
            cpus: 2,
            edit_verdict: Some(Timed {
                command: "cargo xtask test --arch x86_64 --scenario mmio".into(),
                median_s: median(edit.clone()).unwrap(),
                runs_s: edit,
                goal_s: GOAL_EDIT_S,
                all_passed: true,
                logs: vec![],
            }),
            warm_matrix: None,
            boot: vec![],
            guest,
            goals: Goals {
                devres_ratio_on_pci_testdev: GOAL_DEVRES_RATIO,
                access_ratio_on_pci_testdev: GOAL_ACCESS_RATIO,
                edit_verdict_s: GOAL_EDIT_S,
                warm_matrix_s: GOAL_MATRIX_S,
                oracle_ratio: GOAL_ORACLE_RATIO,
            },
            oracle_cost: vec![],
            sweep: vec![],
            baseline: None,
        }
    }

    #[test]
    fn guest_rows_take_medians_over_boots() {
        let row = guest_row(
            "x86_64",
            &[boot(200, 300, 10), boot(220, 220, 30), boot(210, 215, 20)],
        );
        let t = &row.mmio[0];
        assert_eq!(
            (t.mmio.device.as_str(), t.mmio.raw_ns, t.mmio.devres_ns),
            ("pci-testdev", 210, 220)
        );
        assert!((t.b_over_a - 220.0 / 210.0).abs() < 1e-9);
        assert_eq!(row.unbind.len(), 6);
        assert_eq!(
            (row.unbind[0].runs, row.unbind[0].total_ns),
            (3, 20_000_000)
        );
        assert_eq!(row.revoke_each[2].ns, 640_000_000);
        assert_eq!(row.window_kib_per_s, None);
    }

    #[test]
    fn the_table_says_which_goals_were_met() {
        let fast = report(
            vec![guest_row("x86_64", &[boot(200, 205, 10)])],
            vec![9.0, 11.0, 10.0],
        );
        let t = table(&fast);
        assert!(
            t.contains("10.0 s (runs 9.0, 11.0, 10.0)") && t.contains("≤ 12 s: met"),
            "{t}"
        );
        assert!(
            t.contains("b/a 1.025") && t.contains("b/a ≤ 1.05: met"),
            "{t}"
        );
        assert!(
            t.contains("revoke one by one x86_64 k=1/16/64") && t.contains("10.0/160/640 ms"),
            "{t}"
        );
        let slow = report(vec![guest_row("x86_64", &[boot(200, 280, 10)])], vec![13.0]);
        let t = table(&slow);
        assert!(
            t.contains("≤ 12 s: missed") && t.contains("b/a ≤ 1.05: missed"),
            "{t}"
        );
    }

    #[test]
    fn the_picture_has_a_bar_per_figure() {
        let r = report(vec![guest_row("x86_64", &[boot(200, 205, 10)])], vec![10.0]);
        let svg = picture(&r);
        // edit run + median; 2 devices x 4 ways; 2 devices x 3 ratios; 6 unbind + 3 revoke.
        assert_eq!(svg.matches("<rect x=").count(), 2 + 8 + 6 + 9, "{svg}");
        assert!(svg.contains("+2.5 %"), "{svg}");
    }

    #[test]
    fn oracle_cost_rows_compare_medians() {
        let c = oracle_cost_row("x86_64", &[9.0, 6.0, 7.0], &[5.0, 4.0]).unwrap();
        assert_eq!((c.median_with_s, c.median_without_s), (7.0, 4.5));
        assert!((c.ratio - 7.0 / 4.5).abs() < 1e-9);
        assert_eq!(c.scenario, "unbind");
        assert_eq!((c.with_s.len(), c.without_s.len()), (3, 2));
        assert!(
            oracle_cost_row("x86_64", &[], &[4.0]).is_none(),
            "no run with"
        );
        assert!(
            oracle_cost_row("x86_64", &[4.0], &[]).is_none(),
            "no run without"
        );
        assert!(
            oracle_cost_row("x86_64", &[4.0], &[0.0]).is_none(),
            "nothing to divide by"
        );
    }

    #[test]
    fn oracle_cost_rows_say_whether_the_goal_was_met() {
        let mut r = report(vec![], vec![10.0]);
        r.oracle_cost = vec![
            oracle_cost_row("x86_64", &[6.0], &[4.0]).unwrap(),
            oracle_cost_row("arm64", &[9.0], &[4.0]).unwrap(),
        ];
        let t = table(&r);
        let line = |arch: &str| {
            t.lines()
                .find(|l| l.starts_with(&format!("MMIO oracle cost {arch} unbind (median of 1/1)")))
                .unwrap_or_else(|| panic!("no {arch} row in {t}"))
                .to_string()
        };
        let x86 = line("x86_64");
        assert!(
            x86.contains("1.50×: 6.00 s with, 4.00 s without") && x86.contains("≤ 1.5×: met"),
            "{x86}"
        );
        let arm = line("arm64");
        assert!(
            arm.contains("2.25×: 9.00 s with") && arm.contains("≤ 1.5×: missed"),
            "{arm}"
        );
        let svg = picture(&r);
        // edit run + median, and one ratio bar per arch.
        assert_eq!(svg.matches("<rect x=").count(), 2 + 2, "{svg}");
        assert!(
            svg.contains("2.25× (9.00 s / 4.00 s)") && svg.contains("goal 1.5×"),
            "{svg}"
        );
    }

    /// A file of its own under the temp dir, removed when dropped.
    struct TempFile(PathBuf);

    impl TempFile {
        fn new(name: &str, content: &[u8]) -> TempFile {
            let path =
                std::env::temp_dir().join(format!("pci-rig-bench-{}-{name}", std::process::id()));
            std::fs::write(&path, content).unwrap();
            TempFile(path)
        }

        fn read(&self) -> Vec<u8> {
            std::fs::read(&self.0).unwrap()
        }
    }

    impl Drop for TempFile {
        fn drop(&mut self) {
            let _ = std::fs::remove_file(&self.0);
        }
    }

    #[test]
    fn an_edit_adds_a_comment_line_per_run() {
        assert_eq!(
            edit::edited(b"fn a() {}\n", "b", 3),
            b"fn a() {}\n// b: edit 3\n"
        );
        assert_eq!(
            edit::edited(b"fn a() {}", "b", 1),
            b"fn a() {}\n// b: edit 1\n",
            "a last line without its newline is not joined to the comment"
        );
        assert_ne!(edit::edited(b"x\n", "b", 1), edit::edited(b"x\n", "b", 2));
    }

    #[test]
    fn the_guard_restores_the_file_byte_for_byte() {
        // No newline at the end, a CR, a byte that is not UTF-8.
        let original = b"line one\r\nline two \xff".to_vec();
        let f = TempFile::new("restore", &original);
        {
            let guard = Restore::take(&f.0).unwrap();
            guard.edit("test", 1).unwrap();
            assert_ne!(f.read(), original, "edited while the guard lives");
            guard.edit("test", 2).unwrap();
            assert!(f.read().ends_with(b"// test: edit 2\n"));
        }
        assert_eq!(f.read(), original);
    }

    #[test]
    fn the_guard_restores_on_an_error_and_on_a_panic() {
        let original = b"fn probe() {}\n".to_vec();
        let f = TempFile::new("restore-error", &original);
        let failing = || -> Result<()> {
            let guard = Restore::take(&f.0)?;
            guard.edit("test", 1)?;
            bail!("the command could not run");
        };
        assert!(failing().is_err());
        assert_eq!(f.read(), original);
        let panicked = std::panic::catch_unwind(|| {
            let guard = Restore::take(&f.0).unwrap();
            guard.edit("test", 1).unwrap();
            panic!("mid-run");
        });
        assert!(panicked.is_err());
        assert_eq!(f.read(), original);
        assert!(
            Restore::take(Path::new("/nonexistent/pci-rig/driver.rs")).is_err(),
            "nothing to restore, no guard"
        );
    }

    #[test]
    fn a_baseline_report_writes_its_section_table_and_chart() {
        let mut r = report(vec![], vec![10.0]);
        r.edit_verdict = None;
        assert!(!serde_json::to_string(&r).unwrap().contains("\"baseline\""));
        r.baseline = Some(baseline::Comparison {
            baseline_rev: "512677d".into(),
            baseline_sha: "512677d3f311".into(),
            baseline_tree: "/t".into(),
            head: "abc".into(),
            head_sha: "abc".into(),
            warm_up: vec![],
            figures: vec![],
            goals: vec![],
            missing: vec![],
        });
        let json: serde_json::Value = serde_json::to_value(&r).unwrap();
        assert_eq!(json["baseline"]["baseline_rev"], "512677d");
        assert!(
            table(&r).contains("head abc against 512677d"),
            "{}",
            table(&r)
        );
        assert!(picture(&r).contains("head abc against 512677"));
    }

    #[test]
    fn a_verdict_tells_whether_the_oracle_watched() {
        assert!(oracle_watched(
            "…; the MMIO oracle saw 216 accesses to our BARs (bar0 0xfe610000) …"
        ));
        assert!(!oracle_watched(
            "…; the device log holds exactly the 81 MMIO accesses …"
        ));
    }
}
