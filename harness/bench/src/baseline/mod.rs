//! `cargo xtask bench --baseline REV`: the checkout (head) and an older
//! revision measured side by side in one run, interleaved run by run (head,
//! baseline, head, …) so that a shared machine's drift hits both alike.
//! Each side is run as a user runs it: `cargo xtask test …` spawned in its
//! own tree (the baseline in a detached git worktree with its own target
//! dir), timed to its exit, both on the same cache. Absolute times drift
//! between machines; the ratios head/baseline are the figures.
//!
//! What it measures, in this order, after one untimed warm-up per side:
//! `boot` alone per arch (the command's wall and the scenario's own
//! duration from report.json), edit→verdict on x86_64 and arm64 (`probe`
//! after an edit of the side's driver), the warm matrix (after one untimed
//! matrix per side; after each round, head's matrix of only the scenarios
//! the baseline's has, the same boots) and, when asked, the cold run (a
//! fresh clone, an empty cache). It fails only when a measurement could not be taken; a missed
//! goal or a failed verdict is reported, never an error.

mod git;
mod model;
mod render;
mod reports;
mod stats;
#[cfg(test)]
mod tests;

use crate::edit::{Restore, EDITED};
use anyhow::{Context, Result};
use git::*;
use model::*;
pub(crate) use render::{panels, table};
use reports::*;
use rig::arch::Arch;
use rig::Paths;
pub use stats::Comparison;
use stats::*;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

pub struct Options {
    /// The baseline: any git revision of this repository.
    pub rev: String,
    pub arches: Vec<Arch>,
    /// `boot` runs alone, per side and arch.
    pub boot_runs: usize,
    /// Edit→verdict runs per side, on x86_64 and arm64 (those of `arches`).
    pub edit_runs: usize,
    /// Warm matrix runs per side (0: none).
    pub matrix_runs: usize,
    /// Cold runs per side: a fresh clone, an empty cache (0: none).
    pub cold_runs: usize,
    /// Keep the cold runs' clones and caches.
    pub keep: bool,
}

/// The comment each edit run appends to a side's driver. The run id makes
/// each edit new to the module's build cache, whatever an earlier bench
/// left built; the side makes the two sides' edits differ, since both
/// build their module in the same copy of the shared cache: with a
/// baseline whose driver is head's, the second side would otherwise get
/// the module the first one just built (it took 1.3 s against head's 2.5).
fn edit_note(run_id: &str, side: Side) -> String {
    format!("cargo xtask bench --baseline, {run_id}, {}", side.name())
}

/// One command of the bench, timed or not.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    /// Untimed, first: each side's cargo builds and kernels exist.
    WarmUp,
    /// Untimed, on each arch of the edit loop: `probe`'s modules exist (a
    /// `boot` needs none), so that an edit rebuilds only what it touches.
    EditWarmUp(Arch),
    Boot(Arch),
    Edit(Arch),
    /// Untimed: the driver as committed built again after the edits, the
    /// test binaries built, and a full run for the scheduler to order the
    /// next one by (its longest-first order reads the newest run's times).
    MatrixWarmUp,
    Matrix,
    /// Head only, after each round of the matrix: the scenarios the
    /// baseline's matrix warm-up ran (by name), with the unit tests, so the
    /// same boots as the baseline's matrix; its baseline figure is the
    /// baseline's matrix.
    SameMatrix,
    Cold,
}

/// A step of the plan: which, the how-manieth, on which side.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Planned {
    pub step: Step,
    pub n: usize,
    pub side: Side,
}

/// `runs` rounds of both sides, `first` first in each round.
pub fn interleaved(runs: usize, first: Side) -> Vec<(usize, Side)> {
    (1..=runs)
        .flat_map(|n| [(n, first), (n, first.other())])
        .collect()
}

/// Every command the bench runs, in order: sides in turns within each
/// figure (head first; the cold runs baseline first), the arches of a
/// round next to each other.
pub fn plan(opts: &Options) -> Vec<Planned> {
    let mut out = Vec::new();
    let rounds = |out: &mut Vec<Planned>, step: Step, runs: usize, first: Side| {
        out.extend(
            interleaved(runs, first)
                .into_iter()
                .map(|(n, side)| Planned { step, n, side }),
        );
    };
    let per_arch =
        |out: &mut Vec<Planned>, step: fn(Arch) -> Step, runs: usize, arches: &[Arch]| {
            for n in 1..=runs {
                for &a in arches {
                    out.extend([Side::Head, Side::Baseline].map(|side| Planned {
                        step: step(a),
                        n,
                        side,
                    }));
                }
            }
        };
    rounds(&mut out, Step::WarmUp, 1, Side::Head);
    let edited = edit_arches(&opts.arches);
    per_arch(
        &mut out,
        Step::EditWarmUp,
        usize::from(opts.edit_runs > 0),
        &edited,
    );
    per_arch(&mut out, Step::Boot, opts.boot_runs, &opts.arches);
    per_arch(&mut out, Step::Edit, opts.edit_runs, &edited);
    if opts.matrix_runs > 0 {
        rounds(&mut out, Step::MatrixWarmUp, 1, Side::Head);
        for (n, side) in interleaved(opts.matrix_runs, Side::Head) {
            out.push(Planned {
                step: Step::Matrix,
                n,
                side,
            });
            if side == Side::Baseline {
                out.push(Planned {
                    step: Step::SameMatrix,
                    n,
                    side: Side::Head,
                });
            }
        }
    }
    rounds(&mut out, Step::Cold, opts.cold_runs, Side::Baseline);
    out
}

/// The arches the edit→verdict loop runs on: x86_64 and arm64, if asked.
fn edit_arches(arches: &[Arch]) -> Vec<Arch> {
    [Arch::X86_64, Arch::Arm64]
        .into_iter()
        .filter(|a| arches.contains(a))
        .collect()
}

/// `cargo xtask` arguments of a step; `same`: the baseline's scenarios,
/// for [`Step::SameMatrix`].
pub fn args(step: Step, opts: &Options, same: &[String]) -> Vec<String> {
    let v = |s: &[&str]| s.iter().map(|s| s.to_string()).collect();
    match step {
        Step::WarmUp => {
            // The matrix boots every arch: warm them all for it.
            let arch = match opts.arches.as_slice() {
                [one] if opts.matrix_runs == 0 => one.to_string(),
                _ => "all".into(),
            };
            v(&[
                "test",
                "--arch",
                &arch,
                "--scenario",
                "boot",
                "--no-unit-tests",
            ])
        }
        Step::Boot(a) => v(&["test", "--arch", a.name(), "--scenario", "boot"]),
        Step::EditWarmUp(a) | Step::Edit(a) => {
            v(&["test", "--arch", a.name(), "--scenario", "probe"])
        }
        Step::MatrixWarmUp | Step::Matrix | Step::Cold => v(&["test"]),
        Step::SameMatrix => v(&["test", "--unit-tests", "--scenario", &same.join(",")]),
    }
}

/// Where a command runs.
struct Place<'a> {
    root: &'a Path,
    cache: &'a Path,
    /// A tree of its own: its own target dir (CARGO_TARGET_DIR unset).
    own_target: bool,
    /// A cold run: CI=true.
    ci: bool,
}

struct Bench<'a> {
    paths: &'a Paths,
    opts: &'a Options,
    dir: &'a Path,
    run_id: &'a str,
    baseline_tree: PathBuf,
    baseline_sha: String,
    head_sha: String,
}

impl Bench<'_> {
    /// `cargo xtask ARGS` at `place`, output into `log`, timed to its exit.
    fn spawn(&self, place: &Place, args: &[String], log: &Path, n: usize) -> Result<Run> {
        let out =
            std::fs::File::create(log).with_context(|| format!("creating {}", log.display()))?;
        let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
        let mut cmd = Command::new(cargo);
        cmd.arg("xtask")
            .args(args)
            .current_dir(place.root)
            .env("PCI_RIG_CACHE", place.cache)
            .stdin(Stdio::null())
            .stdout(out.try_clone()?)
            .stderr(out);
        if place.own_target {
            cmd.env_remove("CARGO_TARGET_DIR");
        }
        if place.ci {
            cmd.env("CI", "true");
        }
        let started = Instant::now();
        let status = cmd
            .status()
            .with_context(|| format!("running cargo xtask in {}", place.root.display()))?;
        let wall = started.elapsed().as_secs_f64();
        let text = std::fs::read_to_string(log).unwrap_or_default();
        let run_dir = report_of(&text);
        let counts = run_dir
            .as_ref()
            .and_then(|d| std::fs::read_to_string(d.join("report.json")).ok())
            .and_then(|r| counts(&r));
        Ok(Run {
            n,
            value_s: wall,
            exit_ok: status.success(),
            counts,
            all_passed: status.success() && counts.is_none_or(|c| c.fail == 0),
            run_dir: run_dir.map(|d| d.display().to_string()),
            log: log.display().to_string(),
            kernels: kernel_builds(&text),
        })
    }

    fn tree(&self, side: Side) -> &Path {
        match side {
            Side::Head => &self.paths.root,
            Side::Baseline => &self.baseline_tree,
        }
    }

    /// Runs one step of the plan.
    fn step(&self, p: &Planned, same: &[String]) -> Result<Run> {
        let args = args(p.step, self.opts, same);
        let arch = match p.step {
            Step::Boot(a) | Step::Edit(a) | Step::EditWarmUp(a) => format!("-{a}"),
            _ => String::new(),
        };
        let log = self.dir.join(format!(
            "{}{arch}-{}-{}.log",
            step_name(p.step),
            p.n,
            p.side.name()
        ));
        let mut place = Place {
            root: self.tree(p.side),
            cache: &self.paths.cache,
            own_target: p.side == Side::Baseline,
            ci: false,
        };
        let run = match p.step {
            Step::Edit(_) => {
                let edited = place.root.join(EDITED);
                let restore = Restore::take(&edited)?;
                restore.edit(&edit_note(self.run_id, p.side), p.n)?;
                self.spawn(&place, &args, &log, p.n)?
                // `restore` puts the file back here, or on any error above.
            }
            Step::Cold => {
                let rev = match p.side {
                    Side::Head => &self.head_sha,
                    Side::Baseline => &self.baseline_sha,
                };
                let scratch = Scratch {
                    path: std::env::temp_dir().join(format!(
                        "pci-rig-cold-{}-{}-{}",
                        self.run_id,
                        p.side.name(),
                        p.n
                    )),
                    keep: self.opts.keep,
                };
                let clone = scratch.path.join("clone");
                let cache = scratch.path.join("cache");
                std::fs::create_dir_all(&cache)
                    .with_context(|| format!("creating {}", cache.display()))?;
                let src = self.paths.root.display().to_string();
                let dst = clone.display().to_string();
                git(
                    &scratch.path,
                    &["clone", "--quiet", "--no-checkout", &src, &dst],
                )?;
                git(&clone, &["checkout", "--quiet", "--detach", rev])?;
                place.root = &clone;
                place.cache = &cache;
                place.own_target = true;
                place.ci = true;
                self.spawn(&place, &args, &log, p.n)?
            }
            _ => self.spawn(&place, &args, &log, p.n)?,
        };
        let command = format!("cargo xtask {}", args.join(" "));
        let what = match p.step {
            Step::WarmUp | Step::EditWarmUp(_) | Step::MatrixWarmUp => "untimed",
            _ => "timed",
        };
        eprintln!(
            "bench: {} {command} ({} {}): {:.1} s",
            p.side.name(),
            what,
            p.n,
            run.value_s
        );
        if !run.all_passed {
            eprintln!(
                "bench: !!! {} {command} ({} {}): NOT ALL PASSED: exit {}, {}; timed all the \
                 same and marked; see {}",
                p.side.name(),
                what,
                p.n,
                if run.exit_ok { "0" } else { "non-zero" },
                run.counts.map_or_else(
                    || "no report".to_string(),
                    |c| format!("{} pass, {} fail, {} skip", c.pass, c.fail, c.skip)
                ),
                run.log
            );
        }
        Ok(run)
    }
}

/// The scenarios of the baseline's matrix run `run` that head has too; the
/// others are named on stderr (head's matrix of them is then less).
fn baseline_scenarios(run: &Run) -> Vec<String> {
    let Some(report) = run
        .run_dir
        .as_ref()
        .and_then(|d| std::fs::read_to_string(Path::new(d).join("report.json")).ok())
    else {
        return Vec::new();
    };
    let (known, unknown): (Vec<String>, Vec<String>) = scenario_names(&report)
        .into_iter()
        .partition(|n| rig::scenario::find(n).is_ok());
    if !unknown.is_empty() {
        eprintln!(
            "bench: head has none of the baseline's scenarios {}: its matrix of the \
             baseline's scenarios leaves them out",
            unknown.join(", ")
        );
    }
    known
}

fn step_name(step: Step) -> &'static str {
    match step {
        Step::WarmUp => "warm-up",
        Step::EditWarmUp(_) => "edit-warm-up",
        Step::Boot(_) => "boot",
        Step::Edit(_) => "edit",
        Step::MatrixWarmUp => "matrix-warm-up",
        Step::Matrix => "matrix",
        Step::SameMatrix => "same-matrix",
        Step::Cold => "cold",
    }
}

/// Measures both sides into `dir` (each command's log) and returns the
/// comparison. Errors only when a command could not be run at all.
pub fn compare(paths: &Paths, opts: &Options, dir: &Path, run_id: &str) -> Result<Comparison> {
    let baseline_sha = git(
        &paths.root,
        &["rev-parse", "--verify", &format!("{}^{{commit}}", opts.rev)],
    )
    .with_context(|| format!("--baseline {}: not a revision of this repository", opts.rev))?;
    let head = git(&paths.root, &["describe", "--always", "--dirty"])?;
    let head_sha = git(&paths.root, &["rev-parse", "HEAD"])?;
    let bench = Bench {
        paths,
        opts,
        dir,
        run_id,
        baseline_tree: worktree(paths, &baseline_sha)?,
        baseline_sha,
        head_sha,
    };
    eprintln!(
        "bench: head {head} (the checkout as it is) against {} ({}) in {}, on the cache {}",
        opts.rev,
        bench.baseline_sha,
        bench.baseline_tree.display(),
        paths.cache.display()
    );
    eprintln!(
        "bench: the figures are of a warm cache: each side first runs `cargo xtask {}` \
         untimed, so that its cargo builds and kernels exist (and `probe` on the edit loop's \
         arches, for its modules)",
        args(Step::WarmUp, opts, &[]).join(" ")
    );
    if opts.cold_runs > 0 && head.ends_with("-dirty") {
        eprintln!(
            "bench: warning: the checkout has uncommitted changes; the cold run measures HEAD \
             as committed ({})",
            bench.head_sha
        );
    }
    let mut figures: Vec<Figure> = Vec::new();
    let mut warm_up = Vec::new();
    let mut missing = Vec::new();
    // The baseline's scenarios that head has too, once its matrix warm-up ran.
    let mut same: Vec<String> = Vec::new();
    for p in plan(opts) {
        if p.step == Step::SameMatrix && same.is_empty() {
            let what = format!(
                "head's matrix of the baseline's scenarios, run {}: the baseline's matrix \
                 warm-up left no report to take them from",
                p.n
            );
            eprintln!("bench: !!! {what}");
            missing.push(what);
            continue;
        }
        let run = bench.step(&p, &same)?;
        let command = format!("cargo xtask {}", args(p.step, opts, &same).join(" "));
        let mut record = |key: Key, run: Run| {
            let i = match figures.iter().position(|f| f.key == key) {
                Some(i) => i,
                None => {
                    figures.push(Figure::new(key, command.clone()));
                    figures.len() - 1
                }
            };
            figures[i].side_mut(p.side).runs.push(run);
        };
        match p.step {
            Step::WarmUp | Step::EditWarmUp(_) | Step::MatrixWarmUp => {
                if p.step == Step::MatrixWarmUp && p.side == Side::Baseline {
                    same = baseline_scenarios(&run);
                }
                warm_up.push(WarmUp {
                    side: p.side,
                    command,
                    run,
                })
            }
            Step::Boot(a) => {
                let wall = run
                    .run_dir
                    .as_ref()
                    .and_then(|d| std::fs::read_to_string(Path::new(d).join("report.json")).ok())
                    .and_then(|r| scenario_wall(&r, a, "boot"));
                if wall.is_none() {
                    let what = format!(
                        "{} boot {a} run {}: no duration for the boot in its report (see {})",
                        p.side.name(),
                        p.n,
                        run.log
                    );
                    eprintln!("bench: !!! {what}");
                    missing.push(what);
                }
                record(Key::Boot(a, Wall::Command), run.clone());
                if let Some(s) = wall {
                    record(Key::Boot(a, Wall::Scenario), Run { value_s: s, ..run });
                }
            }
            Step::Edit(a) => record(Key::Edit(a), run),
            Step::Matrix => {
                if p.side == Side::Baseline {
                    record(Key::SameMatrix, run.clone());
                }
                record(Key::Matrix, run)
            }
            Step::SameMatrix => record(Key::SameMatrix, run),
            Step::Cold => record(Key::Cold, run),
        }
    }
    for f in &mut figures {
        if f.key == Key::SameMatrix {
            f.command = format!(
                "head: cargo xtask {}; baseline: cargo xtask test",
                args(Step::SameMatrix, opts, &same).join(" ")
            );
        }
        f.finish();
    }
    // Boot, edit, matrix, cold; within each, arches (and a boot's two
    // walls) in the order they ran.
    let rank = |k: &Key| match k {
        Key::Boot(..) => 0,
        Key::Edit(_) => 1,
        Key::Matrix | Key::SameMatrix => 2,
        Key::Cold => 3,
    };
    figures.sort_by_key(|f| rank(&f.key));
    let goals = goals(&figures);
    Ok(Comparison {
        baseline_rev: opts.rev.clone(),
        baseline_sha: bench.baseline_sha,
        baseline_tree: bench.baseline_tree.display().to_string(),
        head,
        head_sha: bench.head_sha,
        warm_up,
        figures,
        goals,
        missing,
    })
}
