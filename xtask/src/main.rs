//! `cargo xtask`: the command line of pci-rig. It parses arguments and calls
//! the harness; all the work lives there.

use anyhow::Result;
use clap::{Parser, Subcommand};
use rig::arch::Arch;
use rig::kernel::{Flavor, Line};
use rig::scenario;
use rig::{run, Paths};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Parser)]
#[command(
    name = "cargo xtask",
    about = "pci-rig: build, boot and judge Rust PCI drivers under QEMU"
)]
struct Cli {
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Install or find everything the rig needs (host packages, bindgen, QEMU, busybox).
    Setup {
        #[arg(long, default_value = "all", value_parser = parse_arches)]
        arch: Arches,
    },
    /// Build the guest kernel (with the overlay) and initramfs.
    Build {
        #[arg(long, default_value = "all", value_parser = parse_arches)]
        arch: Arches,
        /// Build the debug flavour (KASAN where Rust allows it, lockdep,
        /// PROVE_RCU, kmemleak).
        #[arg(long)]
        debug: bool,
        /// The kernel line: 6.12 (ours) or 7 (mainline, upstream's abstractions).
        #[arg(long, default_value = "6.12", value_parser = parse_line)]
        kernel: Line,
    },
    /// Boot a guest to an interactive busybox shell on this terminal.
    Run {
        #[arg(long, default_value = "x86_64", value_parser = parse_arch)]
        arch: Arch,
        /// Boot the debug flavour.
        #[arg(long)]
        debug: bool,
    },
    /// Run the workspace's tests (unless one scenario is asked for), then
    /// boot scenarios and judge them.
    Test {
        /// x86_64, arm64, riscv64 or all.
        #[arg(long, default_value = "all", value_parser = parse_arches)]
        arch: Arches,
        /// One scenario by name, or several separated by commas (default: all).
        #[arg(long, value_parser = parse_scenarios)]
        scenario: Option<Scenarios>,
        /// Boot the debug flavour (KASAN on arm64 and riscv64, lockdep,
        /// PROVE_RCU, atomic-sleep checks, CONFIG_PREEMPT, a kmemleak scan
        /// before each guest powers off); without --scenario, its own set.
        #[arg(long)]
        debug: bool,
        /// Kernel lines: 6.12 (ours), 7 (mainline, upstream's abstractions) or all; by
        /// default 6.12 on every arch asked for and 7 on x86_64 alone (its scenarios are
        /// the `mainline-*` ones).
        #[arg(long, value_parser = ["6.12", "7", "all"])]
        kernel: Option<String>,
        /// Boot behind a strict guest IOMMU (x86_64: QEMU's intel-iommu; arm64:
        /// virtio-iommu), so QEMU maps the device exactly what the guest maps, when it maps
        /// it; without --scenario, the DMA scenarios.
        #[arg(long, conflicts_with = "bounce")]
        iommu: bool,
        /// Bounce every streaming DMA mapping through swiotlb (`swiotlb=force`): the device
        /// reaches a copy, not the buffer; without --scenario, the DMA scenarios.
        #[arg(long)]
        bounce: bool,
        /// Skip `cargo test --workspace` (skipped anyway with --scenario).
        #[arg(long)]
        no_unit_tests: bool,
        /// Run `cargo test --workspace` with --scenario too.
        #[arg(long, requires = "scenario", conflicts_with = "no_unit_tests")]
        unit_tests: bool,
        /// Run each scenario N times.
        #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
        repeat: u32,
        /// Soak: the hot-unplug scenarios, irq-unbind and the power-management ones (rpm, and
        /// pm-soak's fifty system sleeps) only, 100 times each (or --repeat times), without the
        /// unit tests; not part of the default run.
        #[arg(long, conflicts_with = "scenario")]
        soak: bool,
        /// Every cell of the fault × state matrix (harness/vocab/src/matrix.rs) instead of the
        /// default run's seeded sample of them.
        #[arg(long, conflicts_with_all = ["scenario", "soak"])]
        matrix: bool,
        /// Boots at once, from any arch (default: three times the CPUs; much
        /// of a boot is waiting).
        #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
        jobs: Option<u32>,
        /// The removal-point sweep at every point (each fault kind at each of probe's
        /// accesses and at remove()'s RESET) instead of the default seeded sample.
        #[arg(long, conflicts_with_all = ["sweep_point", "sweep_seed"])]
        sweep: bool,
        /// Sweep only this point, KIND:N (probe's N-th access) or KIND:wN (the N-th write
        /// after probe); may be given more than once. Runs the `sweep` scenario alone unless
        /// --scenario says otherwise.
        #[arg(long, value_name = "KIND:N", value_parser = parse_point)]
        sweep_point: Vec<rig::sweep::Point>,
        /// The seed of the sampled sweep (default: new each run, printed).
        #[arg(long, value_name = "SEED", conflicts_with = "sweep_point")]
        sweep_seed: Option<u64>,
        /// A PCI driver module pci-rig did not write: DIR holds its Kbuild (or Makefile,
        /// `obj-m := NAME.o`) and sources. It is built against each kernel asked for and run,
        /// on the device its id table names (ours or QEMU's pci-testdev), through the
        /// `module-*` scenarios (by default all of them, on the 6.12 line unless --kernel
        /// says otherwise), judged without its lines (docs/foreign.md).
        #[arg(long, value_name = "DIR")]
        module: Option<PathBuf>,
        /// A Linux source tree of yours (a git checkout or an unpacked source, never written
        /// to), built out of tree into the cache with the mainline line's config fragments
        /// and booted on the arches asked for through what fits it: mainline-boot,
        /// mainline-kunit where it has Rust, and the mainline-module-* scenarios with
        /// --module's module or, without one, the tree's own Rust PCI sample
        /// (docs/foreign.md).
        #[arg(long, value_name = "DIR", conflicts_with = "kernel")]
        kernel_src: Option<PathBuf>,
    },
    /// Plant each mutant of harness/mutants.toml (a small realistic bug in one of our
    /// modules) in a scratch copy, build it, boot the scenarios it names and say whether the
    /// rig caught it; writes target/pci-rig/<run-id>/mutate.json and the score.
    Mutate {
        /// One arch (the mutants' scenarios run there).
        #[arg(long, default_value = "x86_64", value_parser = parse_arch)]
        arch: Arch,
        /// Only these mutants, by name (comma list).
        #[arg(long, value_delimiter = ',')]
        only: Vec<String>,
        /// A seeded sample of N mutants (with --seed; default seed: new each run, printed).
        #[arg(long, value_name = "N")]
        sample: Option<usize>,
        #[arg(long, requires = "sample")]
        seed: Option<u64>,
        /// Boots at once (default: three times the CPUs).
        #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
        jobs: Option<u32>,
        /// Do not boot the clean tree through the mutants' scenarios first.
        #[arg(long)]
        no_clean: bool,
        /// Instead of the catalog, the mutants a Rust parser's operators make of this module
        /// source (e.g. guest-kernel/driver/pci_rig.rs): negated comparisons, constant
        /// conditions, calls left out, errors ignored, DMA directions swapped, off-by-ones.
        #[arg(long, value_name = "FILE")]
        generate: Option<String>,
        /// With --generate: run each mutant against the scenarios whose boots ran its lines
        /// in this run of `cargo xtask test` (its coverage.reach.json; default: the latest
        /// run that has one), not against a hand-picked list.
        #[arg(long, value_name = "RUN", requires = "generate")]
        reach: Option<PathBuf>,
        /// Switch these judge rules off (comma list: ack-values, interrupts-off,
        /// failed-probe-quiesced, dma-core), to see which mutants only they catch: a
        /// weakened judge, for measuring the rig, never for a verdict.
        #[arg(long, value_delimiter = ',', value_parser = rig::judge::Rule::parse)]
        weaken: Vec<rig::judge::Rule>,
        /// Boot the mutants behind a strict vIOMMU (as `test --iommu`).
        #[arg(long, conflicts_with = "bounce")]
        iommu: bool,
        /// Boot the mutants with every streaming mapping bounced (as `test --bounce`).
        #[arg(long)]
        bounce: bool,
        /// Boot the debug flavour (as `test --debug`); the catalog's mutants that only its
        /// checkers can catch (`debug = true`) run only then.
        #[arg(long)]
        debug: bool,
        /// List the mutants (the catalog, or the generated set) and exit.
        #[arg(long)]
        list: bool,
    },
    /// Measure turnaround, MMIO and unbind cost side by side; writes
    /// target/pci-rig/bench/<run-id>/bench.json and bench.svg.
    Bench {
        /// x86_64, arm64, riscv64 or all.
        #[arg(long, default_value = "all", value_parser = parse_arches)]
        arch: Arches,
        /// Boots of the `boot` and `bench` scenarios per arch.
        #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..))]
        guest_runs: u32,
        /// Edit→verdict runs (0 skips them).
        #[arg(long, default_value_t = 5)]
        edit_runs: u32,
        /// Skip timing the whole `cargo xtask test` (the longest part).
        #[arg(long)]
        no_matrix: bool,
        /// Measure this checkout (head) against revision REV instead, interleaved run by
        /// run, each side's `cargo xtask test` timed as a user runs it (REV in a git
        /// worktree with its own target dir, the same cache): `boot` alone per arch
        /// (--guest-runs), edit→verdict on x86_64 and arm64 (--edit-runs), the warm matrix
        /// (--matrix-runs, unless --no-matrix; with each round, head's matrix of the
        /// baseline's scenarios alone), the cold run (--cold); into bench.json's
        /// `baseline`. The head-only figures are not measured then.
        #[arg(long, value_name = "REV")]
        baseline: Option<String>,
        /// With --baseline: warm matrix runs per side.
        #[arg(long, default_value_t = 1, requires = "baseline", value_parser = clap::value_parser!(u32).range(1..))]
        matrix_runs: u32,
        /// With --baseline: also the cold run, per side a fresh clone of its revision and an
        /// empty cache, CI=true `cargo xtask test` (the head's as committed).
        #[arg(long, requires = "baseline")]
        cold: bool,
        /// Cold runs per side, with --cold (baseline first, then in turns).
        #[arg(long, default_value_t = 1, requires = "cold", value_parser = clap::value_parser!(u32).range(1..))]
        cold_runs: u32,
        /// Keep the cold runs' clones and caches (in the temp dir).
        #[arg(long, requires = "cold")]
        keep: bool,
    },
    /// Regenerate the files made from the register table (regmap/src/lib.rs): the driver's
    /// regs.rs, images/regs.sh and REGISTERS.md's tables.
    Regs {
        /// Only report the files that are out of date (exit 1 if any).
        #[arg(long)]
        check: bool,
    },
    /// Judge a boot again from the evidence it left in its folder (console.log, evidence.json,
    /// the device's and the oracle's logs), e.g. after changing a rule: exit 0 on a pass.
    Judge {
        /// A boot's folder, e.g. target/pci-rig/latest/x86_64-probe.
        dir: PathBuf,
    },
    /// A run's coverage again, from its folder alone: the table, the lcov
    /// tracefile and the bar's verdict; `--drop` leaves scenarios out, as a run
    /// without them would have been.
    Coverage {
        /// A run's folder, e.g. target/pci-rig/latest (with --write-bar, one or more: the bar
        /// is what every one of them reached).
        #[arg(required = true, num_args = 1..)]
        runs: Vec<PathBuf>,
        /// Scenarios to leave out (comma-separated).
        #[arg(long, value_delimiter = ',')]
        drop: Vec<String>,
        /// Write the bar (harness/coverage/bar.toml) from this run.
        #[arg(long)]
        write_bar: bool,
    },
}

/// `--arch`: one architecture or `all`.
#[derive(Clone)]
struct Arches(Vec<Arch>);

fn parse_arches(s: &str) -> Result<Arches, String> {
    if s == "all" {
        Ok(Arches(Arch::ALL.to_vec()))
    } else {
        Ok(Arches(vec![s.parse()?]))
    }
}

fn parse_arch(s: &str) -> Result<Arch, String> {
    s.parse()
}

fn parse_point(s: &str) -> Result<rig::sweep::Point, String> {
    s.parse()
}

/// Scenarios named on the command line, in their order.
#[derive(Clone)]
struct Scenarios(Vec<&'static scenario::Scenario>);

fn parse_scenarios(s: &str) -> Result<Scenarios, String> {
    let mut out: Vec<&'static scenario::Scenario> = Vec::new();
    for name in s.split(',') {
        let found = scenario::find(name)?;
        if out.iter().any(|o| o.name == found.name) {
            return Err(format!(
                "scenario `{name}` is named twice; --repeat N runs each scenario N times"
            ));
        }
        out.push(found);
    }
    Ok(Scenarios(out))
}

/// A sweep sample seeded from the clock: it changes from run to run, and is printed.
fn sweep_sample_now() -> rig::sweep::Plan {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    rig::sweep::Plan::Sample(nanos % 1_000_000)
}

fn flavor(debug: bool) -> Flavor {
    Flavor {
        line: Line::Lts,
        src: None,
        overlay: None,
        extra: if debug {
            vec!["debug".into()]
        } else {
            Vec::new()
        },
    }
}

/// The DMA path `--iommu`/`--bounce` ask for, if every one of `arches` can run it.
fn dma_path(iommu: bool, bounce: bool, arches: &[Arch]) -> anyhow::Result<run::DmaPath> {
    let path = match (iommu, bounce) {
        (true, _) => run::DmaPath::Iommu,
        (_, true) => run::DmaPath::Bounce,
        _ => run::DmaPath::Direct,
    };
    if let Some((a, why)) = arches.iter().find_map(|&a| Some((a, path.unsupported(a)?))) {
        anyhow::bail!("--iommu on {a}: {why}");
    }
    Ok(path)
}

/// Cells of the fault × state matrix the default run draws on each arch.
const MATRIX_CELLS_PER_ARCH: usize = 2;

fn parse_line(s: &str) -> Result<Line, String> {
    match s {
        "6.12" => Ok(Line::Lts),
        "7" => Ok(Line::Mainline),
        _ => Err(format!("{s:?} is no kernel line; one of: 6.12, 7")),
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run_cli(cli) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(2)
        }
    }
}

fn run_cli(cli: Cli) -> Result<bool> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("xtask lives in the workspace")
        .to_path_buf();
    let paths = Paths::new(root)?;
    match cli.command {
        Cmd::Setup { arch } => {
            run::setup(&paths, &arch.0)?;
        }
        Cmd::Build {
            arch,
            debug,
            kernel,
        } => {
            let tc = run::setup(&paths, &arch.0)?;
            let out = run::new_run_dir(&paths)?;
            let flavor = Flavor {
                line: kernel,
                ..flavor(debug)
            };
            for a in arch.0 {
                let p = run::prepare(
                    &paths,
                    &tc,
                    a,
                    &flavor,
                    &out,
                    kernel == Line::Lts,
                    run::Sources::default(),
                )?;
                eprintln!("build: {a}: {} + {}", p.image.display(), p.initrd.display());
            }
        }
        Cmd::Run { arch, debug } => run::interactive(&paths, arch, &flavor(debug))?,
        Cmd::Test {
            arch,
            scenario,
            debug,
            kernel,
            iommu,
            bounce,
            no_unit_tests,
            unit_tests,
            repeat,
            soak,
            matrix,
            jobs,
            sweep,
            sweep_point,
            sweep_seed,
            module,
            kernel_src,
        } => {
            let plan = match (sweep, sweep_seed) {
                _ if !sweep_point.is_empty() => rig::sweep::Plan::Points(sweep_point),
                (true, _) => rig::sweep::Plan::All,
                (false, Some(seed)) => rig::sweep::Plan::Sample(seed),
                (false, None) => sweep_sample_now(),
            };
            let only_sweep = sweep || matches!(plan, rig::sweep::Plan::Points(_));
            let scenario = match scenario {
                None if only_sweep => Some(vec![&scenario::SWEEP]),
                s => s.map(|s| s.0),
            };
            let dma_path = dma_path(iommu, bounce, &arch.0)?;
            let dir_of = |flag: &str, dir: PathBuf| {
                anyhow::Context::with_context(dir.canonicalize(), || {
                    format!("{flag} {}: no such directory", dir.display())
                })
            };
            let module = module.map(|d| dir_of("--module", d)).transpose()?;
            if let Some(dir) = &module {
                rig::run::foreign::module_name(dir)?;
            }
            let kernel_src = kernel_src.map(|d| dir_of("--kernel-src", d)).transpose()?;
            let tree = match &kernel_src {
                Some(dir) => {
                    let version = rig::kernel::user_tree::check(dir)?;
                    eprintln!("test: --kernel-src {}: Linux {version}", dir.display());
                    Some(rig::kernel::user_tree::has(dir))
                }
                None => None,
            };
            // A user's tree is booted as the mainline line; a module alone, on 6.12 unless
            // --kernel says otherwise.
            let kernel = match (kernel, &module, &tree) {
                (_, _, Some(_)) => Some("7".to_string()),
                (None, Some(_), None) => Some("6.12".to_string()),
                (k, ..) => k,
            };
            let scenario = match (scenario, &module, &tree) {
                (None, None, None) => None,
                (Some(s), ..) => Some(s),
                (None, ..) => {
                    let lines = match kernel.as_deref() {
                        Some("6.12") => vec![Line::Lts],
                        Some("7") => vec![Line::Mainline],
                        _ => vec![Line::Lts, Line::Mainline],
                    };
                    let (run, left) =
                        rig::run::foreign::chosen(module.is_some(), tree.as_ref(), &lines);
                    for why in left {
                        eprintln!("test: not run: {why}");
                    }
                    Some(run)
                }
            };
            let asked = scenario.is_some();
            let scenarios = match (soak, scenario) {
                _ if matrix => rig::matrix::scenarios().iter().collect(),
                (true, _) => scenario::SOAK.to_vec(),
                (false, Some(s)) => s,
                (false, None) if dma_path != run::DmaPath::Direct => scenario::IOMMU.to_vec(),
                (false, None) if debug => scenario::DEBUG.to_vec(),
                (false, None) => scenario::ALL.to_vec(),
            };
            let repeat = if soak && repeat == 1 { 100 } else { repeat };
            let x86_only: Vec<Arch> = arch
                .0
                .iter()
                .copied()
                .filter(|&a| a == Arch::X86_64)
                .collect();
            let (arches, mainline_arches) = match kernel.as_deref() {
                Some("6.12") => (arch.0, Vec::new()),
                Some("7") => (Vec::new(), arch.0),
                Some(_) => (arch.0.clone(), arch.0),
                None => (arch.0, x86_only),
            };
            // Without --module, the module-* scenarios run our C driver for the device.
            let foreign = module.or_else(|| {
                scenarios
                    .iter()
                    .any(|s| matches!(s.check, scenario::Check::Module { .. }))
                    .then(|| {
                        paths
                            .root
                            .join("guest-kernel")
                            .join(rig::run::foreign::EXAMPLE)
                    })
            });
            // The bar was written from the default run: three arches, both lines, every scenario.
            let coverage_bar = !asked
                && !soak
                && !debug
                && repeat == 1
                && dma_path == run::DmaPath::Direct
                && kernel.is_none()
                && arches.len() == Arch::ALL.len();
            // The default run draws cells of the matrix on each arch, from the sweep's seed.
            let matrix_sample = match &plan {
                rig::sweep::Plan::Sample(seed) if !asked && !soak && !matrix && !debug => {
                    Some((*seed, MATRIX_CELLS_PER_ARCH))
                }
                _ => None,
            };
            let opts = run::TestOptions {
                matrix_sample,
                coverage_bar,
                arches,
                mainline_arches,
                scenarios,
                flavor: flavor(debug),
                unit_tests: unit_tests || (!no_unit_tests && !soak && !asked),
                repeat: repeat as usize,
                jobs: jobs.map_or_else(
                    // Three per CPU: on two cores the default run took 154.8-158.4 s
                    // with 4 jobs, 140.0-148.7 s with 6 (docs/cost.md).
                    || 3 * std::thread::available_parallelism().map_or(1, usize::from),
                    |j| j as usize,
                ),
                sweep: plan,
                modules: None,
                device: None,
                dma_path,
                foreign,
                kernel_src,
            };
            return run::test(&paths, &opts);
        }
        Cmd::Bench {
            arch,
            guest_runs,
            edit_runs,
            no_matrix,
            baseline: Some(rev),
            matrix_runs,
            cold,
            cold_runs,
            keep,
        } => {
            let opts = bench::baseline::Options {
                rev,
                arches: arch.0,
                boot_runs: guest_runs as usize,
                edit_runs: edit_runs as usize,
                matrix_runs: if no_matrix { 0 } else { matrix_runs as usize },
                cold_runs: if cold { cold_runs as usize } else { 0 },
                keep,
            };
            return bench::against_baseline(&paths, &opts);
        }
        Cmd::Bench {
            arch,
            guest_runs,
            edit_runs,
            no_matrix,
            ..
        } => {
            let opts = bench::BenchOptions {
                arches: arch.0,
                guest_runs: guest_runs as usize,
                edit_runs: edit_runs as usize,
                matrix: !no_matrix,
            };
            return bench::bench(&paths, &opts);
        }
        Cmd::Mutate {
            arch,
            only,
            sample,
            seed,
            jobs,
            no_clean,
            generate,
            reach,
            weaken,
            iommu,
            bounce,
            debug,
            list,
        } => {
            let dma_path = dma_path(iommu, bounce, &[arch])?;
            if !weaken.is_empty() {
                eprintln!("mutate: the judge is weakened ({weaken:?} off): these fates measure the rig without those rules, they are no verdicts");
                rig::judge::weaken(weaken).map_err(anyhow::Error::msg)?;
            }
            let opts = rig::mutate::MutateOptions {
                arch,
                only,
                sample: None,
                jobs: jobs.map_or_else(
                    || 3 * std::thread::available_parallelism().map_or(1, usize::from),
                    |j| j as usize,
                ),
                clean_first: !no_clean,
                reach: match (&generate, reach) {
                    (Some(_), Some(run)) => Some(rig::run::coverage::read_reach(&run)?),
                    (Some(_), None) => rig::run::coverage::latest_reach(&paths.results()),
                    (None, _) => None,
                },
                generate,
                dma_path,
                debug,
            };
            if list {
                for m in rig::mutate::all(&paths.root, &opts)? {
                    match m.at {
                        Some(_) => println!("{:<56} {}", m.name, m.why),
                        None => println!(
                            "{:<28} {:<22} {} ({})",
                            m.name,
                            m.class,
                            m.file,
                            m.scenarios.join(", ")
                        ),
                    }
                }
                return Ok(true);
            }
            let sample = sample.map(|n| {
                let seed = seed.unwrap_or_else(|| {
                    std::time::SystemTime::now()
                        .duration_since(std::time::UNIX_EPOCH)
                        .map_or(0, |d| d.as_nanos() as u64 % 1_000_000)
                });
                eprintln!(
                    "mutate: sample of {n}, seed {seed} (replay: --sample {n} --seed {seed})"
                );
                (n, seed)
            });
            let opts = rig::mutate::MutateOptions { sample, ..opts };
            return rig::mutate::mutate(&paths, &opts);
        }
        Cmd::Coverage {
            runs,
            drop,
            write_bar,
        } => {
            return run::coverage::replay(&paths.root, &runs, &drop, write_bar);
        }
        Cmd::Judge { dir } => {
            let j = run::rejudge(&dir)?;
            println!("{:?}: {}", j.verdict, j.reason);
            return Ok(j.verdict != rig::verdict::Verdict::Fail);
        }
        Cmd::Regs { check } => {
            let gen = if check {
                regmap::gen::drift(&paths.root)
            } else {
                regmap::gen::write(&paths.root)
                    .map(|w| w.iter().map(|p| format!("wrote {p}")).collect())
            };
            let lines = gen.map_err(anyhow::Error::msg)?;
            for l in &lines {
                println!("{l}");
            }
            if lines.is_empty() {
                println!("the generated register files are current");
            }
            return Ok(!check || lines.is_empty());
        }
    }
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::parse_scenarios;

    #[test]
    fn scenarios_are_a_comma_list_each_named_once() {
        let names =
            |s: &str| parse_scenarios(s).map(|v| v.0.iter().map(|s| s.name).collect::<Vec<_>>());
        assert_eq!(names("probe"), Ok(vec!["probe"]));
        assert_eq!(names("modules,boot"), Ok(vec!["modules", "boot"]));
        let twice = names("boot,probe,boot").unwrap_err();
        assert!(twice.contains("`boot` is named twice"), "{twice}");
        let unknown = names("boot,nope").unwrap_err();
        assert!(unknown.contains("unknown scenario `nope`"), "{unknown}");
        assert!(names("boot,").is_err(), "an empty name is no scenario");
    }
}
