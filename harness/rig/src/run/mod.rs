//! The commands: setup, build, an interactive boot, and `test`, which runs
//! the workspace's unit tests and then every chosen scenario on every chosen
//! arch, writing report.json and junit.xml into a fresh run folder.

mod boot;
mod cargo_checks;
pub mod coverage;
mod evidence;
pub mod foreign;
mod host_actions;
mod prepare;
pub mod report;
mod runner;
mod schedule;

pub use boot::DmaPath;
use boot::Rig;
use cargo_checks::cargo_test;
pub use cargo_checks::PURE_CRATES;
pub use evidence::{rejudge, CONSOLE_LOG, EVIDENCE};
pub use prepare::{prepare, setup, ForeignSource, Prepared, Sources};
pub use runner::scenarios;

use crate::arch::Arch;
use crate::guest::device::{self, DeviceServer};
use crate::guest::qemu;
use crate::host::provision::{self};
use crate::judge::{self};
use crate::kernel::{self, Flavor};
use crate::scenario::{Check, Scenario};
use crate::Paths;
use anyhow::{bail, Context, Result};
use report::{Outcome, Verdict};
use std::path::PathBuf;
use std::time::{Duration, SystemTime};

/// `cargo xtask run`: boots to a shell on this terminal, with our device
/// attached (its control socket is printed, for poking knobs by hand).
pub fn interactive(paths: &Paths, arch: Arch, flavor: &Flavor) -> Result<()> {
    let tc = provision::ensure(paths, &[arch], || {
        kernel::unpack_source(paths, kernel::Line::Lts)
    })?;
    let run_dir = new_run_dir(paths)?;
    let p = prepare(paths, &tc, arch, flavor, &run_dir, true, Sources::default())?;
    let bin = device::build_server(paths)?;
    let dir = qemu::boot_dir(&run_dir.join(format!("{arch}-shell")))?;
    let server = DeviceServer::start(&bin, &dir, &qemu::socket_dir(&dir)?, 0)?;
    eprintln!(
        "run: booting {arch}; Ctrl-A X quits QEMU (logs: {})",
        dir.display()
    );
    eprintln!("run: device control socket: {}", server.control.display());
    let rig = Rig {
        paths,
        tc: &tc,
        p: &p,
        device: None,
        oracle: None,
        vcpu_yield: None,
        coverage: None,
        sweep: &crate::sweep::Plan::All,
        dma_path: DmaPath::Direct,
    };
    let mut g = rig.guest(&Scenario::runner("shell", "", Duration::MAX), &dir);
    g.extra_args = vec!["-device".into(), server.qemu_device()];
    g.interactive()?;
    server.stop()?;
    Ok(())
}

/// A UTC timestamp plus the pid: unique even for two runs started in the
/// same second.
pub fn run_id() -> String {
    let secs = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let (days, rem) = ((secs / 86400) as i64, secs % 86400);
    // Howard Hinnant's days-to-civil.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}{m:02}{d:02}-{:02}{:02}{:02}-{}",
        rem / 3600,
        rem / 60 % 60,
        rem % 60,
        std::process::id()
    )
}

/// Makes `target/pci-rig/<run-id>` and points `target/pci-rig/latest` at it.
pub fn new_run_dir(paths: &Paths) -> Result<PathBuf> {
    let id = run_id();
    let dir = paths.results().join(&id);
    std::fs::create_dir_all(&dir)?;
    let tmp = paths
        .results()
        .join(format!(".latest-{}", std::process::id()));
    let _ = std::fs::remove_file(&tmp);
    std::os::unix::fs::symlink(&id, &tmp)?;
    std::fs::rename(&tmp, paths.results().join("latest"))?;
    Ok(dir)
}

#[derive(Clone)]
pub struct TestOptions {
    /// Where the 6.12 line's scenarios run.
    pub arches: Vec<Arch>,
    /// Where the mainline line's scenarios (`Scenario::line`) run: by default x86_64 alone.
    pub mainline_arches: Vec<Arch>,
    pub scenarios: Vec<&'static Scenario>,
    pub flavor: Flavor,
    pub unit_tests: bool,
    /// Runs of each scenario (soak: many).
    pub repeat: usize,
    /// Arches run at once.
    pub jobs: usize,
    /// The `sweep` scenario's points.
    pub sweep: crate::sweep::Plan,
    /// Build the out-of-tree modules (driver, bench, platform) from this copy of
    /// `guest-kernel` instead (`cargo xtask mutate`'s mutants).
    pub modules: Option<PathBuf>,
    /// Boot this device server instead of building `qemu-device` (a device mutant's).
    pub device: Option<PathBuf>,
    pub dma_path: DmaPath,
    /// A module pci-rig did not write (`--module DIR`), for the `module-*` scenarios.
    pub foreign: Option<PathBuf>,
    /// A kernel tree of the user's (`--kernel-src DIR`): the mainline line's scenarios boot
    /// it instead of `MAINLINE_PACKAGE`; without `foreign`, its own Rust PCI sample is the
    /// `module-*` scenarios' module.
    pub kernel_src: Option<PathBuf>,
    /// Hold the run's coverage to the committed bar (`coverage::BAR`): the
    /// default run's, which the bar was written from.
    pub coverage_bar: bool,
    /// A seeded sample of the fault × state matrix's cells on each arch of the 6.12 line:
    /// (seed, cells per arch).
    pub matrix_sample: Option<(u64, usize)>,
}

/// `cargo xtask test`. Returns whether every verdict passed.
pub fn test(paths: &Paths, opts: &TestOptions) -> Result<bool> {
    let dir = new_run_dir(paths)?;
    eprintln!("test: results in {}", dir.display());
    for s in &opts.scenarios {
        let Check::Sweep(sample) = s.check else {
            continue;
        };
        for &arch in opts
            .arches
            .iter()
            .filter(|a| s.machine.arches().contains(a))
        {
            let points = opts.sweep.points(arch, sample);
            let line = crate::sweep::cmdline(&points);
            if line.len() > crate::sweep::CMDLINE_MAX {
                bail!(
                    "{arch} {}: {} points make a kernel command line of {} characters, more than the {} the kernel prints whole (the judge reads the points back from it): ask for fewer, or for neighbouring ones, which go as runs (KIND:A-B)",
                    s.name,
                    points.len(),
                    line.len(),
                    crate::sweep::CMDLINE_MAX
                );
            }
            eprintln!(
                "test: {arch} {}: {} points ({}; replay: cargo xtask test --arch {arch} --scenario {} {})",
                s.name,
                points.len(),
                crate::sweep::cmdline(&points),
                s.name,
                opts.sweep.replay()
            );
        }
    }
    if opts.scenarios.iter().any(|s| s.machine.has_device()) {
        let seed = match &opts.sweep {
            crate::sweep::Plan::Sample(seed) => seed.to_string(),
            _ => "0 (the sweep's points were named)".to_string(),
        };
        eprintln!(
            "test: each boot's device runs a DMA 100-999 µs after its doorbell, drawn from seed {seed} with the arch and scenario (`--sweep-seed` replays it)"
        );
    }
    if let Some((seed, n)) = opts.matrix_sample {
        for &arch in &opts.arches {
            let cells: Vec<&str> = crate::matrix::sample(seed, arch, n)
                .iter()
                .map(|s| s.name)
                .collect();
            eprintln!(
                "test: {arch}: fault x state cells {} (of {}; drawn from seed {seed}: `--sweep-seed {seed}` draws them again, `--matrix` runs them all)",
                cells.join(", "),
                crate::matrix::scenarios().len()
            );
        }
    }
    // x86_64's boots pass the host's TSC frequency, measured over 50 ms:
    // measured beside the builds, not before the first boot.
    if opts.arches.contains(&Arch::X86_64) {
        std::thread::spawn(crate::host::tsc::host_tsc_khz);
    }
    // The unit tests run beside the guests: neither waits for the other.
    let (unit, boots) = std::thread::scope(|scope| {
        let unit = opts
            .unit_tests
            .then(|| scope.spawn(|| cargo_test(paths, &dir)));
        let boots = scenarios(paths, opts, &dir);
        (unit.map(|t| t.join().expect("cargo test's thread")), boots)
    });
    let mut results: Vec<Outcome> = unit.into_iter().collect();
    results.extend(boots?);
    match coverage::tally(&paths.root, &results) {
        Ok(tally) if tally.boots > 0 => {
            coverage::write(&dir, &paths.root, &tally)?;
            println!("\n{}", coverage::table(&tally));
            println!("coverage: {}", dir.join(coverage::LCOV).display());
            if opts.coverage_bar {
                let held = coverage::bar_tally(&paths.root, &results)?;
                let (verdict, reason) = coverage::judge_bar(&paths.root, &held);
                eprintln!(
                    "test: coverage-bar: {verdict:?} — {}",
                    reason.lines().next().unwrap_or("")
                );
                results.push(Outcome {
                    arch: "all".into(),
                    scenario: "coverage-bar".into(),
                    verdict,
                    duration_s: 0.0,
                    log: dir
                        .strip_prefix(&paths.root)
                        .unwrap_or(&dir)
                        .display()
                        .to_string(),
                    reason,
                    timings: Default::default(),
                    findings: Default::default(),
                });
            }
        }
        Ok(_) => {}
        Err(e) => eprintln!("test: no coverage for this run: {e:#}"),
    }
    report::write_files(&dir, &results)?;
    if dir.join(coverage::SUMMARY).is_file() {
        coverage::add_to_report(&dir)?;
    }
    for o in results.iter().filter(|o| !o.findings.sweep.is_empty()) {
        let chart = paths.root.join(&o.log).join("sweep.svg");
        let title = format!(
            "{} {}: {} points",
            o.arch,
            o.scenario,
            o.findings.sweep.len()
        );
        std::fs::write(&chart, judge::sweep::chart(&title, &o.findings.sweep))
            .with_context(|| format!("writing {}", chart.display()))?;
        println!(
            "\n{title} (chart: {})\n{}",
            chart.display(),
            judge::sweep::table(&o.findings.sweep)
        );
    }
    if opts.repeat == 1 {
        println!("\n{}", report::table(&results));
    } else {
        println!("\n{}", report::table(&report::per_scenario(&results)));
    }
    let phases = report::phase_summary(&results);
    if !phases.is_empty() {
        println!(
            "\nwhere the passing boots' time went (medians):\n{}",
            report::phase_table(&phases)
        );
    }
    println!("report: {}", dir.join("report.json").display());
    Ok(results.iter().all(|r| r.verdict != Verdict::Fail))
}
