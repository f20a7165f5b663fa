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

use crate::edit::{Restore, EDITED};
use crate::svg::{Bar, Panel};
use anyhow::{bail, Context, Result};
use rig::arch::Arch;
use rig::judge::figures::median;
use rig::Paths;
use serde::Serialize;
use std::fmt::Write as _;
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

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Side {
    Head,
    Baseline,
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

impl Side {
    pub fn name(self) -> &'static str {
        match self {
            Side::Head => "head",
            Side::Baseline => "baseline",
        }
    }

    fn other(self) -> Side {
        match self {
            Side::Head => Side::Baseline,
            Side::Baseline => Side::Head,
        }
    }
}

/// Which of a `boot` run's two walls.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Wall {
    /// `cargo xtask test …` spawned to its exit.
    Command,
    /// The boot's `duration_s` in the run's report.json.
    Scenario,
}

/// What a figure measures.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Key {
    Boot(Arch, Wall),
    Edit(Arch),
    Matrix,
    /// Head's matrix of the baseline's scenarios against the baseline's.
    SameMatrix,
    Cold,
}

impl Wall {
    fn name(self) -> &'static str {
        match self {
            Wall::Command => "command",
            Wall::Scenario => "scenario wall",
        }
    }
}

impl Key {
    pub fn name(self) -> String {
        match self {
            Key::Boot(a, w) => format!("boot {a} alone ({})", w.name()),
            Key::Edit(a) => format!("edit → verdict {a}"),
            Key::Matrix => "warm matrix".into(),
            Key::SameMatrix => "warm matrix, the baseline's scenarios".into(),
            Key::Cold => "cold (fresh clone, empty cache)".into(),
        }
    }
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

/// Median, smallest and largest of a side's runs.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Stats {
    pub median_s: f64,
    pub min_s: f64,
    pub max_s: f64,
}

impl Stats {
    pub fn of(values: &[f64]) -> Option<Stats> {
        Some(Stats {
            median_s: median(values.to_vec())?,
            min_s: values.iter().copied().fold(f64::INFINITY, f64::min),
            max_s: values.iter().copied().fold(f64::NEG_INFINITY, f64::max),
        })
    }
}

/// `a / b`: the medians' ratio, and its range: the best pairing (a's
/// fastest over b's slowest) and the worst (a's slowest over b's fastest).
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Ratio {
    pub value: f64,
    pub min: f64,
    pub max: f64,
}

pub fn ratio(a: Stats, b: Stats) -> Option<Ratio> {
    (b.min_s > 0.0).then(|| Ratio {
        value: a.median_s / b.median_s,
        min: a.min_s / b.max_s,
        max: a.max_s / b.min_s,
    })
}

/// A run's verdicts, counted from its report.json.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Counts {
    pub pass: usize,
    pub fail: usize,
    pub skip: usize,
}

/// One command spawned and timed.
#[derive(Clone, Debug, Serialize)]
pub struct Run {
    pub n: usize,
    /// The figure's value: the command's wall, or the scenario's duration.
    pub value_s: f64,
    pub exit_ok: bool,
    /// From the run's report.json (none when it printed no `report:` line).
    pub counts: Option<Counts>,
    /// It exited 0 and its report holds no failed verdict.
    pub all_passed: bool,
    /// The run folder it wrote.
    pub run_dir: Option<String>,
    pub log: String,
    /// The kernels it built (a cold run: every line's, 6.12's and mainline's, each apart).
    pub kernels: Vec<KernelBuild>,
}

/// One kernel build of a run, from its log's `kernel ARCH: up to date in …` line.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct KernelBuild {
    pub arch: String,
    /// The tree, `<version>/<arch>-<flavour>` (the version names the kernel line).
    pub tree: String,
    pub seconds: f64,
    pub objects: usize,
}

/// The kernel builds a `cargo xtask test` log reports (a kernel found up to date is not one).
pub fn kernel_builds(log: &str) -> Vec<KernelBuild> {
    log.lines()
        .filter_map(|l| {
            let rest = l.trim().strip_prefix("kernel ")?;
            let (arch, rest) = rest.split_once(": up to date in ")?;
            let (seconds, rest) = rest.split_once(" s, ")?;
            let (objects, rest) = rest.split_once(" objects (")?;
            let dir = Path::new(rest.strip_suffix(')')?);
            let tree = dir.parent()?.parent()?.file_name()?.to_string_lossy();
            Some(KernelBuild {
                arch: arch.to_string(),
                tree: format!("{tree}/{}", dir.file_name()?.to_string_lossy()),
                seconds: seconds.parse().ok()?,
                objects: objects.parse().ok()?,
            })
        })
        .collect()
}

/// One side's runs of a figure.
#[derive(Debug, Default, Serialize)]
pub struct Runs {
    pub runs_s: Vec<f64>,
    pub stats: Option<Stats>,
    /// Every run's verdicts passed.
    pub all_passed: bool,
    pub runs: Vec<Run>,
}

impl Runs {
    fn finish(&mut self) {
        self.runs_s = self.runs.iter().map(|r| r.value_s).collect();
        self.stats = Stats::of(&self.runs_s);
        self.all_passed = self.runs.iter().all(|r| r.all_passed);
    }
}

/// A figure measured on both sides, and head/baseline.
#[derive(Debug, Serialize)]
pub struct Figure {
    pub name: String,
    #[serde(skip)]
    pub key: Key,
    pub command: String,
    pub head: Runs,
    pub baseline: Runs,
    /// Head over baseline, with its range.
    pub ratio: Option<Ratio>,
}

impl Figure {
    fn new(key: Key, command: String) -> Figure {
        Figure {
            name: key.name(),
            key,
            command,
            head: Runs::default(),
            baseline: Runs::default(),
            ratio: None,
        }
    }

    pub fn side(&self, side: Side) -> &Runs {
        match side {
            Side::Head => &self.head,
            Side::Baseline => &self.baseline,
        }
    }

    fn side_mut(&mut self, side: Side) -> &mut Runs {
        match side {
            Side::Head => &mut self.head,
            Side::Baseline => &mut self.baseline,
        }
    }

    /// Statistics and the ratio, once every run is in.
    fn finish(&mut self) {
        self.head.finish();
        self.baseline.finish();
        self.ratio = self
            .head
            .stats
            .zip(self.baseline.stats)
            .and_then(|(h, b)| ratio(h, b));
    }
}

/// A ratio issue 22 sets a goal for, from figures of the same run.
#[derive(Debug, Serialize)]
pub struct Goal {
    pub name: String,
    /// The chart's label.
    #[serde(skip)]
    pub short: String,
    /// `head/baseline`, or the side both figures are of.
    pub of: String,
    pub ratio: Ratio,
    pub goal: f64,
    pub met: bool,
}

/// The goals' ratios; one whose figures are missing is left out.
pub fn goals(figures: &[Figure]) -> Vec<Goal> {
    let find = |k: Key| figures.iter().find(|f| f.key == k);
    let mut out = Vec::new();
    let mut push = |name: String, short: String, of: &str, r: Option<Ratio>, goal: f64| {
        if let Some(ratio) = r {
            out.push(Goal {
                name,
                short: format!("{short}, {of}"),
                of: of.into(),
                ratio,
                goal,
                met: ratio.value <= goal,
            });
        }
    };
    for (k, short, goal) in [
        (Key::Matrix, "warm matrix", 0.5),
        (Key::SameMatrix, "warm matrix, same scenarios", 0.5),
        (Key::Edit(Arch::X86_64), "edit x86_64", 0.5),
        (Key::Cold, "cold", 0.65),
    ] {
        push(
            k.name(),
            short.into(),
            "head/baseline",
            find(k).and_then(|f| f.ratio),
            goal,
        );
    }
    // Two figures of one side: their medians' ratio and its range.
    let within = |num: Key, den: Key, side: Side| {
        let stats = |k: Key| find(k).and_then(|f| f.side(side).stats);
        stats(num).zip(stats(den)).and_then(|(n, d)| ratio(n, d))
    };
    for side in [Side::Head, Side::Baseline] {
        for wall in [Wall::Scenario, Wall::Command] {
            let boot = Key::Boot(Arch::X86_64, wall);
            push(
                format!("{} / {}", Key::Edit(Arch::X86_64).name(), boot.name()),
                format!("edit / boot x86_64 ({})", wall.name()),
                side.name(),
                within(Key::Edit(Arch::X86_64), boot, side),
                1.5,
            );
        }
        for wall in [Wall::Scenario, Wall::Command] {
            let (x86, arm) = (Key::Boot(Arch::X86_64, wall), Key::Boot(Arch::Arm64, wall));
            push(
                format!("{} / {}", x86.name(), arm.name()),
                format!("boot x86_64 / arm64 ({})", wall.name()),
                side.name(),
                within(x86, arm, side),
                1.5,
            );
        }
    }
    out
}

/// An untimed run, for the record.
#[derive(Debug, Serialize)]
pub struct WarmUp {
    pub side: Side,
    pub command: String,
    pub run: Run,
}

#[derive(Debug, Serialize)]
pub struct Comparison {
    pub baseline_rev: String,
    pub baseline_sha: String,
    /// Where the baseline ran: its worktree.
    pub baseline_tree: String,
    /// `git describe --always --dirty` of the checkout.
    pub head: String,
    pub head_sha: String,
    pub warm_up: Vec<WarmUp>,
    pub figures: Vec<Figure>,
    pub goals: Vec<Goal>,
    /// Measurements that could not be taken (the bench then fails).
    pub missing: Vec<String>,
}

/// The run folder a `cargo xtask test` printed last (`report: …/report.json`).
pub fn report_of(output: &str) -> Option<PathBuf> {
    output
        .lines()
        .rev()
        .find_map(|l| l.trim_end().strip_prefix("report: "))
        .and_then(|p| Path::new(p.trim()).parent().map(Path::to_path_buf))
}

fn results(report: &str) -> Vec<serde_json::Value> {
    serde_json::from_str::<serde_json::Value>(report)
        .ok()
        .and_then(|v| v["results"].as_array().cloned())
        .unwrap_or_default()
}

/// The verdicts of a report.json's text; `None` if it is not one.
pub fn counts(report: &str) -> Option<Counts> {
    let v: serde_json::Value = serde_json::from_str(report).ok()?;
    let mut c = Counts::default();
    for r in v["results"].as_array()? {
        match r["verdict"].as_str() {
            Some("pass") => c.pass += 1,
            Some("fail") => c.fail += 1,
            Some("skip") => c.skip += 1,
            _ => {}
        }
    }
    Some(c)
}

/// The scenarios a report.json's text holds, by name, each once, in the
/// order of their first result (the host's `cargo test` is none).
pub fn scenario_names(report: &str) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    for r in results(report) {
        if let (Some(arch), Some(name)) = (r["arch"].as_str(), r["scenario"].as_str()) {
            if arch != "host" && !names.iter().any(|n| n == name) {
                names.push(name.to_string());
            }
        }
    }
    names
}

/// The duration a report.json's text gives `scenario` on `arch`.
pub fn scenario_wall(report: &str, arch: Arch, scenario: &str) -> Option<f64> {
    results(report).iter().find_map(|r| {
        (r["arch"] == arch.name() && r["scenario"] == scenario)
            .then(|| r["duration_s"].as_f64())
            .flatten()
    })
}

fn git(dir: &Path, args: &[&str]) -> Result<String> {
    let out = Command::new("git")
        .args(args)
        .current_dir(dir)
        .stdin(Stdio::null())
        .output()
        .context("running git")?;
    if !out.status.success() {
        bail!(
            "git {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// A detached worktree of `sha` under the results, reused when it is
/// there at that commit and clean; stale worktrees pruned first.
fn worktree(paths: &Paths, sha: &str) -> Result<PathBuf> {
    let dir = paths
        .results()
        .join("bench")
        .join(format!("baseline-{}", &sha[..12.min(sha.len())]));
    git(&paths.root, &["worktree", "prune"])?;
    if dir.exists() {
        let at = git(&dir, &["rev-parse", "HEAD"]).ok();
        let clean = git(&dir, &["status", "--porcelain", "--untracked-files=no"])
            .is_ok_and(|s| s.is_empty());
        if at.as_deref() == Some(sha) && clean {
            return Ok(dir);
        }
        eprintln!(
            "bench: {} is not a clean worktree of {sha}; making it again",
            dir.display()
        );
        let path = dir.display().to_string();
        let _ = git(&paths.root, &["worktree", "remove", "--force", &path]);
        if dir.exists() {
            std::fs::remove_dir_all(&dir).with_context(|| format!("removing {}", dir.display()))?;
        }
        git(&paths.root, &["worktree", "prune"])?;
    }
    let path = dir.display().to_string();
    git(&paths.root, &["worktree", "add", "--detach", &path, sha])?;
    Ok(dir)
}

/// A cold run's folder (clone and cache), removed when dropped unless kept.
struct Scratch {
    path: PathBuf,
    keep: bool,
}

impl Drop for Scratch {
    fn drop(&mut self) {
        if self.keep {
            eprintln!("bench: kept {}", self.path.display());
        } else if let Err(e) = std::fs::remove_dir_all(&self.path) {
            eprintln!("bench: could not remove {}: {e}", self.path.display());
        }
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

/// Seconds, with fewer decimals as they grow.
fn secs(s: f64) -> String {
    if s < 10.0 {
        format!("{s:.2} s")
    } else if s < 100.0 {
        format!("{s:.1} s")
    } else {
        format!("{s:.0} s")
    }
}

fn ratio_text(r: &Ratio) -> String {
    format!("{:.2} ({:.2}-{:.2})", r.value, r.min, r.max)
}

/// A side's cell: median (min-max), and FAILED when a verdict did not pass.
fn runs_text(r: &Runs) -> String {
    match r.stats {
        None => "-".into(),
        Some(s) => format!(
            "{} ({}-{}){}",
            secs(s.median_s),
            secs(s.min_s).trim_end_matches(" s"),
            secs(s.max_s).trim_end_matches(" s"),
            if r.all_passed { "" } else { " FAILED" }
        ),
    }
}

/// The comparison as a table: each figure's runs, medians, ranges and
/// ratio, then the goals, then what failed or is missing.
pub fn table(c: &Comparison) -> String {
    let short = &c.baseline_sha[..7.min(c.baseline_sha.len())];
    let mut t = format!(
        "head {} against {} ({}), interleaved; medians (min-max); ratio head/baseline \
         (best-worst pairing)\n",
        c.head, c.baseline_rev, c.baseline_sha
    );
    for w in &c.warm_up {
        let _ = writeln!(
            t,
            "untimed {}: {} {}{}",
            w.side.name(),
            w.command,
            secs(w.run.value_s),
            if w.run.all_passed { "" } else { " FAILED" }
        );
    }
    let _ = writeln!(
        t,
        "{:<40} {:>8} {:>26} {:>26} {:>20}",
        "figure",
        "runs b/h",
        format!("baseline {short}"),
        "head",
        "head/baseline"
    );
    for f in &c.figures {
        let _ = writeln!(
            t,
            "{:<40} {:>8} {:>26} {:>26} {:>20}",
            f.name,
            format!("{}/{}", f.baseline.runs.len(), f.head.runs.len()),
            runs_text(&f.baseline),
            runs_text(&f.head),
            f.ratio.as_ref().map_or_else(|| "-".into(), ratio_text)
        );
    }
    for f in c.figures.iter().filter(|f| f.key == Key::Cold) {
        for side in [Side::Baseline, Side::Head] {
            for r in &f.side(side).runs {
                let built: Vec<String> = r
                    .kernels
                    .iter()
                    .map(|k| format!("{} {} ({} objects)", k.tree, secs(k.seconds), k.objects))
                    .collect();
                let _ = writeln!(
                    t,
                    "cold run {} {}: kernels built: {}",
                    side.name(),
                    r.n,
                    if built.is_empty() {
                        "none reported".into()
                    } else {
                        built.join(", ")
                    }
                );
            }
        }
    }
    for g in &c.goals {
        let _ = writeln!(
            t,
            "goal, {}: {} = {} ≤ {}: {}",
            g.of,
            g.name,
            ratio_text(&g.ratio),
            g.goal,
            if g.met { "met" } else { "NOT met" }
        );
    }
    let failed: Vec<String> = c
        .figures
        .iter()
        .flat_map(|f| {
            [Side::Head, Side::Baseline].into_iter().flat_map(move |s| {
                f.side(s)
                    .runs
                    .iter()
                    .filter(|r| !r.all_passed)
                    .map(move |r| format!("{} {} run {}: {}", s.name(), f.name, r.n, r.log))
            })
        })
        .collect();
    for f in failed {
        let _ = writeln!(t, "!!! not all verdicts passed (timed all the same): {f}");
    }
    for m in &c.missing {
        let _ = writeln!(t, "!!! not measured: {m}");
    }
    t
}

/// The chart's panels: each figure's medians side by side with the ratio
/// beside the head's bar, then the goals' ratios.
pub fn panels(c: &Comparison) -> Vec<Panel> {
    let short = &c.baseline_sha[..7.min(c.baseline_sha.len())];
    let mut bars = Vec::new();
    for f in &c.figures {
        for side in [Side::Baseline, Side::Head] {
            let Some(s) = f.side(side).stats else {
                continue;
            };
            let failed = if f.side(side).all_passed {
                ""
            } else {
                ", FAILED"
            };
            let text = match (side, &f.ratio) {
                (Side::Head, Some(r)) => {
                    format!("{}{failed}   ×{}", secs(s.median_s), ratio_text(r))
                }
                _ => format!("{}{failed}", secs(s.median_s)),
            };
            bars.push(Bar {
                label: format!(
                    "{} ({})",
                    f.name,
                    if side == Side::Head { "head" } else { short }
                ),
                value: s.median_s,
                text,
                series: usize::from(side == Side::Head),
            });
        }
    }
    let goals = c
        .goals
        .iter()
        .map(|g| Bar {
            label: g.short.clone(),
            value: g.ratio.value,
            text: format!(
                "{}, goal ≤ {}: {}",
                ratio_text(&g.ratio),
                g.goal,
                if g.met { "met" } else { "not met" }
            ),
            series: if g.met { 2 } else { 3 },
        })
        .collect::<Vec<_>>();
    let mut out = vec![Panel {
        title: format!(
            "head {} against {short}: medians of interleaved runs, × = head/baseline",
            c.head
        ),
        unit: "s".into(),
        bars,
        goal: None,
        log: true,
    }];
    if !goals.is_empty() {
        out.push(Panel {
            title: "issue 22's ratios (best-worst pairing), each against its own goal".into(),
            unit: "×".into(),
            bars: goals,
            goal: None,
            log: false,
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_two_sides_edits_differ_as_the_runs_do() {
        let head = edit_note("r1", Side::Head);
        assert_ne!(head, edit_note("r1", Side::Baseline));
        assert_ne!(head, edit_note("r2", Side::Head));
    }

    fn run(n: usize, s: f64, ok: bool) -> Run {
        Run {
            n,
            value_s: s,
            exit_ok: ok,
            counts: None,
            all_passed: ok,
            run_dir: None,
            log: format!("run-{n}.log"),
            kernels: Vec::new(),
        }
    }

    #[test]
    fn kernel_builds_are_read_from_a_log_each_tree_apart() {
        let log = "\
kernel x86_64: configuring (base + x86_64)
kernel x86_64: unchanged since its last build (/c/linux/6.12.118-1_deb12u1/build/x86_64-base)
kernel arm64: up to date in 252.4 s, 681 objects (/c/linux/6.12.118-1_deb12u1/build/arm64-base)
kernel x86_64: up to date in 224.0 s, 977 objects (/c/linux/7.3.4-1_bpo13_1/build/x86_64-base)
kernel riscv64: up to date in soon s, 1 objects (/c/linux/x/build/riscv64-base)
";
        let k = kernel_builds(log);
        assert_eq!(k.len(), 2, "{k:?}");
        assert_eq!(
            (
                k[0].arch.as_str(),
                k[0].tree.as_str(),
                k[0].seconds,
                k[0].objects
            ),
            ("arm64", "6.12.118-1_deb12u1/arm64-base", 252.4, 681)
        );
        assert_eq!(k[1].tree, "7.3.4-1_bpo13_1/x86_64-base");
    }

    fn figure(key: Key, head: &[f64], base: &[f64]) -> Figure {
        let mut f = Figure::new(key, "cargo xtask test".into());
        for (i, &s) in head.iter().enumerate() {
            f.head.runs.push(run(i + 1, s, true));
        }
        for (i, &s) in base.iter().enumerate() {
            f.baseline.runs.push(run(i + 1, s, true));
        }
        f.finish();
        f
    }

    fn opts(arches: &[Arch], boot: usize, edit: usize, matrix: usize, cold: usize) -> Options {
        Options {
            rev: "512677d".into(),
            arches: arches.to_vec(),
            boot_runs: boot,
            edit_runs: edit,
            matrix_runs: matrix,
            cold_runs: cold,
            keep: false,
        }
    }

    #[test]
    fn statistics_are_median_and_range() {
        let s = Stats::of(&[3.0, 1.0, 2.0]).unwrap();
        assert_eq!((s.median_s, s.min_s, s.max_s), (2.0, 1.0, 3.0));
        let s = Stats::of(&[4.0, 1.0, 2.0, 10.0]).unwrap();
        assert_eq!((s.median_s, s.min_s, s.max_s), (3.0, 1.0, 10.0));
        assert_eq!(Stats::of(&[]), None);
    }

    #[test]
    fn ratios_are_medians_over_medians_with_the_extreme_pairings() {
        let f = figure(Key::Matrix, &[100.0, 120.0, 110.0], &[200.0, 250.0, 220.0]);
        let r = f.ratio.unwrap();
        assert_eq!(r.value, 0.5);
        assert_eq!(
            r.min,
            100.0 / 250.0,
            "head's best over the baseline's worst"
        );
        assert_eq!(
            r.max,
            120.0 / 200.0,
            "head's worst over the baseline's best"
        );
        assert!(figure(Key::Cold, &[1.0], &[]).ratio.is_none(), "one side");
        let zero = Stats::of(&[0.0]).unwrap();
        assert!(ratio(Stats::of(&[1.0]).unwrap(), zero).is_none());
    }

    #[test]
    fn a_failed_run_marks_its_side_and_the_table() {
        let mut f = figure(Key::Edit(Arch::X86_64), &[1.0], &[2.0, 3.0]);
        f.baseline.runs.push(run(3, 4.0, false));
        f.finish();
        assert!(f.head.all_passed);
        assert!(!f.baseline.all_passed);
        assert_eq!(f.baseline.runs_s, [2.0, 3.0, 4.0], "still timed");
        let c = comparison(vec![f]);
        let t = table(&c);
        assert!(t.contains("3.00 s (2.00-4.00) FAILED"), "{t}");
        assert!(t.contains("  3/1  "), "runs, the baseline's first: {t}");
        assert!(
            t.contains("!!! not all verdicts passed (timed all the same): baseline edit → verdict x86_64 run 3: run-3.log"),
            "{t}"
        );
    }

    #[test]
    fn sides_take_turns() {
        assert_eq!(
            interleaved(2, Side::Head),
            [
                (1, Side::Head),
                (1, Side::Baseline),
                (2, Side::Head),
                (2, Side::Baseline)
            ]
        );
        assert_eq!(
            interleaved(1, Side::Baseline),
            [(1, Side::Baseline), (1, Side::Head)]
        );
        assert!(interleaved(0, Side::Head).is_empty());
    }

    #[test]
    fn the_plan_interleaves_every_figure() {
        let p = plan(&opts(&Arch::ALL, 2, 1, 2, 1));
        let steps: Vec<(Step, usize, Side)> = p.iter().map(|p| (p.step, p.n, p.side)).collect();
        use Side::{Baseline as B, Head as H};
        let x = Arch::X86_64;
        let a = Arch::Arm64;
        let r = Arch::Riscv64;
        assert_eq!(
            steps,
            [
                (Step::WarmUp, 1, H),
                (Step::WarmUp, 1, B),
                (Step::EditWarmUp(x), 1, H),
                (Step::EditWarmUp(x), 1, B),
                (Step::EditWarmUp(a), 1, H),
                (Step::EditWarmUp(a), 1, B),
                (Step::Boot(x), 1, H),
                (Step::Boot(x), 1, B),
                (Step::Boot(a), 1, H),
                (Step::Boot(a), 1, B),
                (Step::Boot(r), 1, H),
                (Step::Boot(r), 1, B),
                (Step::Boot(x), 2, H),
                (Step::Boot(x), 2, B),
                (Step::Boot(a), 2, H),
                (Step::Boot(a), 2, B),
                (Step::Boot(r), 2, H),
                (Step::Boot(r), 2, B),
                (Step::Edit(x), 1, H),
                (Step::Edit(x), 1, B),
                (Step::Edit(a), 1, H),
                (Step::Edit(a), 1, B),
                (Step::MatrixWarmUp, 1, H),
                (Step::MatrixWarmUp, 1, B),
                (Step::Matrix, 1, H),
                (Step::Matrix, 1, B),
                (Step::SameMatrix, 1, H),
                (Step::Matrix, 2, H),
                (Step::Matrix, 2, B),
                (Step::SameMatrix, 2, H),
                (Step::Cold, 1, B),
                (Step::Cold, 1, H),
            ]
        );
        // One arch, no matrix: its warm-up boots that arch alone; riscv64 has
        // no edit loop (nor its warm-up); no matrix warm-up.
        let p = plan(&opts(&[Arch::Riscv64], 1, 3, 0, 0));
        assert_eq!(
            p.iter().map(|p| p.step).collect::<Vec<_>>(),
            [Step::WarmUp, Step::WarmUp, Step::Boot(r), Step::Boot(r)]
        );
        let p = plan(&opts(&[x, a], 1, 0, 0, 0));
        assert!(
            p.iter()
                .all(|p| !matches!(p.step, Step::Edit(_) | Step::EditWarmUp(_))),
            "no edit runs, no edit warm-up"
        );
    }

    #[test]
    fn each_step_runs_cargo_xtask_test_as_a_user_would() {
        let one = opts(&[Arch::Arm64], 1, 1, 0, 0);
        let all = opts(&[Arch::Arm64], 1, 1, 1, 0);
        let line = |s: Step, o: &Options| args(s, o, &[]).join(" ");
        assert_eq!(
            line(Step::WarmUp, &one),
            "test --arch arm64 --scenario boot --no-unit-tests"
        );
        assert_eq!(
            line(Step::WarmUp, &all),
            "test --arch all --scenario boot --no-unit-tests",
            "the matrix boots every arch"
        );
        assert_eq!(
            line(Step::Boot(Arch::X86_64), &one),
            "test --arch x86_64 --scenario boot"
        );
        assert_eq!(
            line(Step::Edit(Arch::Arm64), &one),
            "test --arch arm64 --scenario probe"
        );
        assert_eq!(
            line(Step::EditWarmUp(Arch::X86_64), &one),
            "test --arch x86_64 --scenario probe"
        );
        for s in [Step::Matrix, Step::MatrixWarmUp, Step::Cold] {
            assert_eq!(line(s, &one), "test");
        }
        let same = ["boot".to_string(), "probe".to_string()];
        assert_eq!(
            args(Step::SameMatrix, &all, &same).join(" "),
            "test --unit-tests --scenario boot,probe",
            "the baseline's scenarios, with the unit tests its matrix ran"
        );
    }

    #[test]
    fn a_reports_scenarios_are_named_once_without_the_host() {
        let report = r#"{"results": [
            {"arch": "host", "scenario": "cargo-test", "verdict": "pass"},
            {"arch": "x86_64", "scenario": "modules", "verdict": "pass"},
            {"arch": "arm64", "scenario": "boot", "verdict": "pass"},
            {"arch": "arm64", "scenario": "modules", "verdict": "fail"},
            {"arch": "riscv64", "scenario": "platform", "verdict": "skip"}
        ]}"#;
        assert_eq!(scenario_names(report), ["modules", "boot", "platform"]);
        assert!(scenario_names("not json").is_empty());
    }

    #[test]
    fn the_run_folder_is_the_last_report_line() {
        let out = "test: results in /x\nreport: /t/pci-rig/1/report.json\n\nreport: /t/pci-rig/2/report.json\n";
        assert_eq!(report_of(out), Some(PathBuf::from("/t/pci-rig/2")));
        assert_eq!(
            report_of("report: /a b/r/report.json\r\n"),
            Some(PathBuf::from("/a b/r"))
        );
        assert_eq!(report_of("no report here\n  report: /x/report.json"), None);
        assert_eq!(report_of(""), None);
    }

    #[test]
    fn reports_give_counts_and_the_boots_duration() {
        let r = r#"{"results":[
            {"arch":"x86_64","scenario":"unit tests","verdict":"pass","duration_s":9.0},
            {"arch":"arm64","scenario":"boot","verdict":"fail","duration_s":0.9},
            {"arch":"x86_64","scenario":"boot","verdict":"pass","duration_s":1.25},
            {"arch":"riscv64","scenario":"boot","verdict":"skip","duration_s":0.0}]}"#;
        assert_eq!(
            counts(r),
            Some(Counts {
                pass: 2,
                fail: 1,
                skip: 1
            })
        );
        assert_eq!(scenario_wall(r, Arch::X86_64, "boot"), Some(1.25));
        assert_eq!(scenario_wall(r, Arch::Arm64, "boot"), Some(0.9));
        assert_eq!(scenario_wall(r, Arch::X86_64, "probe"), None);
        assert_eq!(counts("not json"), None);
        assert_eq!(scenario_wall("{}", Arch::X86_64, "boot"), None);
    }

    fn all_figures() -> Vec<Figure> {
        let x = Arch::X86_64;
        let a = Arch::Arm64;
        vec![
            figure(Key::Matrix, &[60.0], &[100.0]),
            figure(Key::SameMatrix, &[45.0], &[100.0]),
            figure(Key::Edit(x), &[4.0, 5.0], &[10.0]),
            figure(Key::Boot(x, Wall::Command), &[2.0], &[3.0]),
            figure(Key::Boot(x, Wall::Scenario), &[1.2, 1.4], &[2.0]),
            figure(Key::Boot(a, Wall::Command), &[2.0], &[1.0]),
            figure(Key::Boot(a, Wall::Scenario), &[1.0], &[1.0]),
        ]
    }

    #[test]
    fn goals_say_met_or_not_from_the_same_run() {
        let g = goals(&all_figures());
        let by = |name: &str, of: &str| {
            g.iter()
                .find(|g| g.name == name && g.of == of)
                .unwrap_or_else(|| panic!("no goal {name} ({of}) in {g:?}"))
        };
        let m = by("warm matrix", "head/baseline");
        assert!(!m.met && (m.ratio.value - 0.6).abs() < 1e-9, "0.6 > 0.5");
        let same = by("warm matrix, the baseline's scenarios", "head/baseline");
        assert!(
            same.met && (same.ratio.value - 0.45).abs() < 1e-9,
            "0.45 ≤ 0.5"
        );
        let e = by("edit → verdict x86_64", "head/baseline");
        assert!(e.met && (e.ratio.value - 0.45).abs() < 1e-9, "4.5/10 ≤ 0.5");
        assert_eq!(e.goal, 0.5);
        let eb = by(
            "edit → verdict x86_64 / boot x86_64 alone (scenario wall)",
            "head",
        );
        assert!(!eb.met, "4.5 / 1.3 > 1.5");
        assert!((eb.ratio.value - 4.5 / 1.3).abs() < 1e-9);
        assert!((eb.ratio.min - 4.0 / 1.4).abs() < 1e-9);
        assert!((eb.ratio.max - 5.0 / 1.2).abs() < 1e-9);
        let base = by(
            "edit → verdict x86_64 / boot x86_64 alone (command)",
            "baseline",
        );
        assert!(!base.met && (base.ratio.value - 10.0 / 3.0).abs() < 1e-9);
        let xa = by(
            "boot x86_64 alone (scenario wall) / boot arm64 alone (scenario wall)",
            "head",
        );
        assert!(xa.met && (xa.ratio.value - 1.3).abs() < 1e-9, "1.3 ≤ 1.5");
        let xa = by(
            "boot x86_64 alone (scenario wall) / boot arm64 alone (scenario wall)",
            "baseline",
        );
        assert!(!xa.met, "2.0 > 1.5");
        let xa = by(
            "boot x86_64 alone (command) / boot arm64 alone (command)",
            "head",
        );
        assert!(
            xa.met && xa.ratio.value == 1.0,
            "exactly on the goal is met"
        );
        assert!(
            g.iter().all(|g| !g.name.starts_with("cold")),
            "no cold run, no cold goal"
        );
        let cold = goals(&[figure(Key::Cold, &[650.0], &[1000.0])]);
        assert_eq!(cold.len(), 1);
        assert!(cold[0].met && cold[0].goal == 0.65, "0.65 ≤ 0.65");
        let cold = goals(&[figure(Key::Cold, &[651.0], &[1000.0])]);
        assert!(!cold[0].met);
    }

    fn comparison(figures: Vec<Figure>) -> Comparison {
        Comparison {
            baseline_rev: "512677d".into(),
            baseline_sha: "512677d3f311e6f970f61567beacf1bf7f34091e".into(),
            baseline_tree: "/t/baseline-512677d3f311".into(),
            head: "abc1234-dirty".into(),
            head_sha: "abc1234".into(),
            warm_up: vec![],
            goals: goals(&figures),
            figures,
            missing: vec![],
        }
    }

    #[test]
    fn the_table_names_both_sides_every_figure_and_goal() {
        let mut c = comparison(all_figures());
        c.missing.push("head boot x86_64 run 1: no duration".into());
        let t = table(&c);
        assert!(t.contains("baseline 512677d"), "{t}");
        let matrix = t.lines().find(|l| l.starts_with("warm matrix")).unwrap();
        assert!(
            matrix.contains("1/1") && matrix.contains("100 s (100-100)"),
            "{matrix}"
        );
        assert!(matrix.contains("60.0 s (60.0-60.0)"), "{matrix}");
        assert!(matrix.ends_with("0.60 (0.60-0.60)"), "{matrix}");
        assert!(
            t.contains("goal, head/baseline: warm matrix = 0.60 (0.60-0.60) ≤ 0.5: NOT met"),
            "{t}"
        );
        assert!(
            t.contains("goal, head/baseline: edit → verdict x86_64 = 0.45 (0.40-0.50) ≤ 0.5: met"),
            "{t}"
        );
        assert_eq!(t.matches("goal, ").count(), c.goals.len());
        assert!(
            t.contains("!!! not measured: head boot x86_64 run 1"),
            "{t}"
        );
        assert!(!t.contains("FAILED"), "{t}");
    }

    #[test]
    fn the_chart_has_both_sides_per_figure_and_the_ratio_beside() {
        let c = comparison(all_figures());
        let p = panels(&c);
        assert_eq!(p.len(), 2);
        assert_eq!(p[0].bars.len(), 2 * c.figures.len());
        let head = p[0]
            .bars
            .iter()
            .find(|b| b.label == "warm matrix (head)")
            .unwrap();
        assert_eq!(head.value, 60.0);
        assert!(head.text.contains("×0.60 (0.60-0.60)"), "{}", head.text);
        let base = p[0]
            .bars
            .iter()
            .find(|b| b.label == "warm matrix (512677d)")
            .unwrap();
        assert_eq!((base.value, base.series), (100.0, 0));
        assert_eq!(p[1].bars.len(), c.goals.len());
        assert!(p[1].bars.iter().any(|b| b.text.ends_with("not met")));
        let svg = crate::svg::render("t", "s", &p);
        assert!(svg.contains("×0.60") && !svg.contains("NaN"));
    }
}
