//! `cargo xtask bench --baseline REV`: the checkout (head) and an older
//! revision measured side by side, interleaved run by run (head, baseline,
//! head, …) so that a shared machine's drift hits both alike. Each side is
//! run as a user runs it: `cargo xtask test …` in its own tree (the
//! baseline in a git worktree with its own target dir), timed to its exit,
//! both on the same cache. Absolute times drift between machines; the
//! ratios head/baseline are the figures.

use super::figures::median;
use super::svg::{self, Bar, Panel};
use super::Restore;
use crate::arch::Arch;
use crate::Paths;
use anyhow::{bail, Context, Result};
use serde::Serialize;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

pub struct Options {
    pub rev: String,
    pub arches: Vec<Arch>,
    /// `boot` runs alone, per side and arch.
    pub boot_runs: usize,
    /// Edit→verdict runs per side, on x86_64 and arm64.
    pub edit_runs: usize,
    /// Warm matrix runs per side (0: none).
    pub matrix_runs: usize,
    /// Also a cold run per side: a fresh clone, an empty cache.
    pub cold: bool,
}

/// One side's runs of one figure.
#[derive(Debug, Default, Serialize)]
pub struct Runs {
    pub runs_s: Vec<f64>,
    pub median_s: f64,
    pub min_s: f64,
    pub max_s: f64,
    /// Every run exited 0 (all its verdicts passed).
    pub all_passed: bool,
    pub logs: Vec<String>,
}

impl Runs {
    fn push(&mut self, s: f64, ok: bool, log: String) {
        if self.runs_s.is_empty() {
            self.all_passed = true;
        }
        self.runs_s.push(s);
        self.all_passed &= ok;
        self.logs.push(log);
        self.median_s = median(self.runs_s.clone()).unwrap_or(0.0);
        self.min_s = self.runs_s.iter().copied().fold(f64::INFINITY, f64::min);
        self.max_s = self.runs_s.iter().copied().fold(0.0, f64::max);
    }
}

/// A figure measured on both sides, and head/baseline.
#[derive(Debug, Default, Serialize)]
pub struct Figure {
    pub name: String,
    pub head: Runs,
    pub baseline: Runs,
    /// Median over median.
    pub ratio: f64,
    /// The best and the worst pairing: head's fastest over the baseline's
    /// slowest, head's slowest over the baseline's fastest.
    pub ratio_min: f64,
    pub ratio_max: f64,
}

impl Figure {
    fn new(name: String) -> Figure {
        Figure {
            name,
            ..Default::default()
        }
    }

    fn side(&mut self, side: Side) -> &mut Runs {
        match side {
            Side::Head => &mut self.head,
            Side::Baseline => &mut self.baseline,
        }
    }

    /// Fills in the ratios once both sides have runs.
    fn finish(&mut self) {
        let (h, b) = (&self.head, &self.baseline);
        if h.runs_s.is_empty() || b.runs_s.is_empty() || b.median_s <= 0.0 {
            return;
        }
        self.ratio = h.median_s / b.median_s;
        self.ratio_min = h.min_s / b.max_s;
        self.ratio_max = h.max_s / b.min_s;
    }
}

/// A ratio issue 22 sets a goal for, from figures of the same run.
#[derive(Debug, Serialize)]
pub struct Goal {
    pub name: String,
    pub value: f64,
    pub goal: f64,
    pub met: bool,
}

#[derive(Debug, Serialize)]
pub struct Comparison {
    pub baseline_rev: String,
    pub baseline_sha: String,
    pub head: String,
    pub figures: Vec<Figure>,
    pub goals: Vec<Goal>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Side {
    Head,
    Baseline,
}

impl Side {
    fn name(self) -> &'static str {
        match self {
            Side::Head => "head",
            Side::Baseline => "baseline",
        }
    }
}

/// The order of `runs` runs of a figure: head and baseline in turns.
pub fn interleaved(runs: usize) -> Vec<(usize, Side)> {
    (1..=runs)
        .flat_map(|i| [(i, Side::Head), (i, Side::Baseline)])
        .collect()
}

/// The run folder a `cargo xtask test` printed last (`report: …/report.json`).
pub fn report_of(output: &str) -> Option<PathBuf> {
    output
        .lines()
        .rev()
        .find_map(|l| l.strip_prefix("report: "))
        .and_then(|p| Path::new(p.trim()).parent().map(Path::to_path_buf))
}

/// The duration the report in `run` gives `scenario` on `arch`.
fn scenario_wall(run: &Path, arch: Arch, scenario: &str) -> Option<f64> {
    let text = std::fs::read_to_string(run.join("report.json")).ok()?;
    let v: serde_json::Value = serde_json::from_str(&text).ok()?;
    v["results"].as_array()?.iter().find_map(|r| {
        (r["arch"] == arch.name() && r["scenario"] == scenario)
            .then(|| r["duration_s"].as_f64())
            .flatten()
    })
}

/// The goals' ratios from the figures by name; those whose figures are
/// missing are left out.
pub fn goals(figures: &[Figure]) -> Vec<Goal> {
    let get = |name: &str| figures.iter().find(|f| f.name == name && f.ratio > 0.0);
    let mut out = Vec::new();
    let mut goal = |name: &str, value: Option<f64>, goal: f64| {
        if let Some(value) = value {
            out.push(Goal {
                name: name.into(),
                value,
                goal,
                met: value <= goal,
            });
        }
    };
    goal(
        "warm matrix, head / baseline",
        get("warm matrix").map(|f| f.ratio),
        0.5,
    );
    goal(
        "edit → verdict x86_64, head / baseline",
        get("edit → verdict x86_64").map(|f| f.ratio),
        0.5,
    );
    let head = |name: &str| get(name).map(|f| f.head.median_s);
    goal(
        "edit → verdict x86_64 / boot x86_64 alone (command), head",
        head("edit → verdict x86_64")
            .zip(head("boot x86_64 (command)"))
            .map(|(e, b)| e / b),
        1.5,
    );
    goal(
        "boot x86_64 / arm64 alone (scenario wall), head",
        head("boot x86_64 (scenario)")
            .zip(head("boot arm64 (scenario)"))
            .map(|(x, a)| x / a),
        1.5,
    );
    goal("cold, head / baseline", get("cold").map(|f| f.ratio), 0.65);
    out
}

/// Where each side runs: the checkout, and a worktree of the baseline.
struct Trees {
    head: PathBuf,
    baseline: PathBuf,
    cache: PathBuf,
    logs: PathBuf,
}

impl Trees {
    fn root(&self, side: Side) -> &Path {
        match side {
            Side::Head => &self.head,
            Side::Baseline => &self.baseline,
        }
    }

    /// `cargo xtask ARGS` in `side`'s tree on the shared cache: wall
    /// seconds, whether it passed, its log and the run folder it wrote.
    fn xtask(
        &self,
        side: Side,
        root: &Path,
        cache: &Path,
        args: &[&str],
        name: &str,
    ) -> Result<(f64, bool, String, Option<PathBuf>)> {
        let log = self.logs.join(format!("{name}-{}.log", side.name()));
        let out = std::fs::File::create(&log)?;
        let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
        let started = Instant::now();
        let status = Command::new(cargo)
            .arg("xtask")
            .args(args)
            .current_dir(root)
            .env("PCI_RIG_CACHE", cache)
            .env_remove("CARGO_TARGET_DIR")
            .stdin(Stdio::null())
            .stdout(out.try_clone()?)
            .stderr(out)
            .status()
            .with_context(|| format!("running cargo xtask in {}", root.display()))?;
        let secs = started.elapsed().as_secs_f64();
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        eprintln!(
            "bench: {} cargo xtask {}: {secs:.1} s{}",
            side.name(),
            args.join(" "),
            if status.success() {
                ""
            } else {
                " — FAILED, see its log"
            }
        );
        Ok((
            secs,
            status.success(),
            log.display().to_string(),
            report_of(&text),
        ))
    }
}

fn git(dir: &Path, args: &[&str]) -> Result<String> {
    let out = Command::new("git")
        .args(args)
        .current_dir(dir)
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

/// A detached worktree of `sha` under the results, reused when it is there.
fn worktree(paths: &Paths, sha: &str) -> Result<PathBuf> {
    let dir = paths
        .results()
        .join("bench")
        .join(format!("baseline-{}", &sha[..12.min(sha.len())]));
    if dir.exists() && git(&dir, &["rev-parse", "HEAD"]).ok().as_deref() == Some(sha) {
        return Ok(dir);
    }
    let _ = std::fs::remove_dir_all(&dir);
    git(&paths.root, &["worktree", "prune"])?;
    let path = dir.display().to_string();
    git(&paths.root, &["worktree", "add", "--detach", &path, sha])?;
    Ok(dir)
}

/// Measures both sides, writes `baseline.json` and `baseline.svg` into
/// `dir` and prints the table. Fails only when a command could not run.
pub fn compare(paths: &Paths, opts: &Options, dir: &Path) -> Result<Comparison> {
    let sha = git(
        &paths.root,
        &["rev-parse", &format!("{}^{{commit}}", opts.rev)],
    )
    .with_context(|| format!("--baseline {}: not a revision of this repository", opts.rev))?;
    let head = git(&paths.root, &["describe", "--always", "--dirty"])?;
    let trees = Trees {
        head: paths.root.clone(),
        baseline: worktree(paths, &sha)?,
        cache: paths.cache.clone(),
        logs: dir.to_path_buf(),
    };
    eprintln!(
        "bench: head {head} against {} ({sha}) in {}",
        opts.rev,
        trees.baseline.display()
    );
    let mut figures: Vec<Figure> = Vec::new();
    let mut figure = |name: &str| -> usize {
        figures
            .iter()
            .position(|f| f.name == name)
            .unwrap_or_else(|| {
                figures.push(Figure::new(name.to_string()));
                figures.len() - 1
            })
    };
    let mut runs: Vec<(usize, Side, f64, bool, String)> = Vec::new();
    // Warm-up, untimed: each side's builds (cargo, kernels, modules) exist.
    let arch_arg = match opts.arches.as_slice() {
        [one] => one.to_string(),
        _ => "all".to_string(),
    };
    for side in [Side::Head, Side::Baseline] {
        let root = trees.root(side).to_path_buf();
        trees.xtask(
            side,
            &root,
            &trees.cache,
            &["test", "--arch", &arch_arg, "--scenario", "probe"],
            "warm-up",
        )?;
    }
    for (i, side) in interleaved(opts.boot_runs) {
        for &arch in &opts.arches {
            let root = trees.root(side).to_path_buf();
            let a = arch.to_string();
            let (s, ok, log, run) = trees.xtask(
                side,
                &root,
                &trees.cache,
                &["test", "--arch", &a, "--scenario", "boot"],
                &format!("boot-{a}-{i}"),
            )?;
            runs.push((
                figure(&format!("boot {a} (command)")),
                side,
                s,
                ok,
                log.clone(),
            ));
            if let Some(wall) = run.and_then(|r| scenario_wall(&r, arch, "boot")) {
                runs.push((figure(&format!("boot {a} (scenario)")), side, wall, ok, log));
            }
        }
    }
    let edited: Vec<Arch> = [Arch::X86_64, Arch::Arm64]
        .into_iter()
        .filter(|a| opts.arches.contains(a))
        .collect();
    for (i, side) in interleaved(opts.edit_runs) {
        for &arch in &edited {
            let root = trees.root(side).to_path_buf();
            let path = root.join(super::EDITED);
            let original =
                std::fs::read(&path).with_context(|| format!("reading {}", path.display()))?;
            let _restore = Restore {
                path: path.clone(),
                original: original.clone(),
            };
            let mut text = original.clone();
            text.extend_from_slice(
                format!("// cargo xtask bench --baseline: edit {i}\n").as_bytes(),
            );
            std::fs::write(&path, text)?;
            let a = arch.to_string();
            let (s, ok, log, _) = trees.xtask(
                side,
                &root,
                &trees.cache,
                &["test", "--arch", &a, "--scenario", "probe"],
                &format!("edit-{a}-{i}"),
            )?;
            runs.push((figure(&format!("edit → verdict {a}")), side, s, ok, log));
        }
    }
    for (i, side) in interleaved(opts.matrix_runs) {
        let root = trees.root(side).to_path_buf();
        let (s, ok, log, _) =
            trees.xtask(side, &root, &trees.cache, &["test"], &format!("matrix-{i}"))?;
        runs.push((figure("warm matrix"), side, s, ok, log));
    }
    if opts.cold {
        for (i, side) in interleaved(1) {
            let rev = match side {
                Side::Head => git(&paths.root, &["rev-parse", "HEAD"])?,
                Side::Baseline => sha.clone(),
            };
            if side == Side::Head && head.ends_with("-dirty") {
                eprintln!("bench: the checkout has uncommitted changes; the cold run measures HEAD as committed");
            }
            let fresh = dir.join(format!("cold-{}", side.name()));
            let _ = std::fs::remove_dir_all(&fresh);
            let clone = fresh.join("clone");
            let src = paths.root.display().to_string();
            git(dir, &["clone", "-q", &src, &clone.display().to_string()])?;
            git(&clone, &["checkout", "-q", "--detach", &rev])?;
            let (s, ok, log, _) = trees.xtask(
                side,
                &clone,
                &fresh.join("cache"),
                &["test"],
                &format!("cold-{i}"),
            )?;
            runs.push((figure("cold"), side, s, ok, log));
            std::fs::remove_dir_all(&fresh)?;
        }
    }
    for (f, side, s, ok, log) in runs {
        figures[f].side(side).push(s, ok, log);
    }
    for f in &mut figures {
        f.finish();
    }
    let goals = goals(&figures);
    let c = Comparison {
        baseline_rev: opts.rev.clone(),
        baseline_sha: sha,
        head,
        figures,
        goals,
    };
    std::fs::write(dir.join("baseline.json"), serde_json::to_string_pretty(&c)?)?;
    std::fs::write(dir.join("baseline.svg"), picture(&c))?;
    println!("{}", table(&c));
    Ok(c)
}

/// The comparison as a table: each figure's medians, ranges and ratio,
/// then the goals.
pub fn table(c: &Comparison) -> String {
    let mut t = format!(
        "{:<34} {:>22} {:>22} {:>18}\n",
        "figure",
        format!(
            "baseline {}",
            &c.baseline_sha[..7.min(c.baseline_sha.len())]
        ),
        format!("head {}", c.head),
        "head/baseline"
    );
    let runs = |r: &Runs| {
        format!(
            "{:.2} s ({:.2}-{:.2}){}",
            r.median_s,
            r.min_s,
            r.max_s,
            if r.all_passed { "" } else { " FAILED" }
        )
    };
    for f in &c.figures {
        let _ = writeln!(
            t,
            "{:<34} {:>22} {:>22} {:>18}",
            f.name,
            runs(&f.baseline),
            runs(&f.head),
            format!("{:.2} ({:.2}-{:.2})", f.ratio, f.ratio_min, f.ratio_max)
        );
    }
    for g in &c.goals {
        let _ = writeln!(
            t,
            "goal: {} = {:.2} (≤ {}: {})",
            g.name,
            g.value,
            g.goal,
            if g.met { "met" } else { "not met" }
        );
    }
    t
}

/// One panel: each figure's medians side by side, the ratio in the label.
pub fn picture(c: &Comparison) -> String {
    let bars = c
        .figures
        .iter()
        .flat_map(|f| {
            [(Side::Baseline, &f.baseline), (Side::Head, &f.head)].map(|(side, r)| Bar {
                label: format!("{} ({})", f.name, side.name()),
                value: r.median_s,
                text: format!(
                    "{:.2} s{}",
                    r.median_s,
                    if side == Side::Head {
                        format!(", ×{:.2}", f.ratio)
                    } else {
                        String::new()
                    }
                ),
                series: usize::from(side == Side::Head),
            })
        })
        .collect();
    svg::render(
        "pci-rig: head against a baseline",
        &format!("head {} against {}", c.head, c.baseline_sha),
        &[Panel {
            title: "medians, interleaved runs".into(),
            unit: "s".into(),
            bars,
            goal: None,
            log: true,
        }],
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn figure(name: &str, head: &[f64], base: &[f64]) -> Figure {
        let mut f = Figure::new(name.into());
        for &s in head {
            f.head.push(s, true, String::new());
        }
        for &s in base {
            f.baseline.push(s, true, String::new());
        }
        f.finish();
        f
    }

    #[test]
    fn ratios_are_medians_over_medians_with_the_extreme_pairings() {
        let f = figure(
            "warm matrix",
            &[100.0, 120.0, 110.0],
            &[200.0, 250.0, 220.0],
        );
        assert_eq!(f.head.median_s, 110.0);
        assert_eq!(f.baseline.median_s, 220.0);
        assert_eq!(f.ratio, 0.5);
        assert_eq!(f.ratio_min, 100.0 / 250.0);
        assert_eq!(f.ratio_max, 120.0 / 200.0);
        let one_sided = figure("cold", &[1.0], &[]);
        assert_eq!(one_sided.ratio, 0.0, "no baseline run, no ratio");
    }

    #[test]
    fn a_failed_run_marks_its_side() {
        let mut r = Runs::default();
        r.push(1.0, true, String::new());
        assert!(r.all_passed);
        r.push(2.0, false, String::new());
        assert!(!r.all_passed);
        r.push(3.0, true, String::new());
        assert!(!r.all_passed, "a later pass does not clear it");
    }

    #[test]
    fn runs_take_turns() {
        assert_eq!(
            interleaved(2),
            [
                (1, Side::Head),
                (1, Side::Baseline),
                (2, Side::Head),
                (2, Side::Baseline)
            ]
        );
        assert!(interleaved(0).is_empty());
    }

    #[test]
    fn the_run_folder_is_the_last_report_line() {
        let out = "test: results in /x\nreport: /t/pci-rig/1/report.json\n\nreport: /t/pci-rig/2/report.json\n";
        assert_eq!(report_of(out), Some(PathBuf::from("/t/pci-rig/2")));
        assert_eq!(report_of("no report here"), None);
    }

    #[test]
    fn goals_say_met_or_not_from_the_same_run() {
        let figs = [
            figure("warm matrix", &[60.0], &[100.0]),
            figure("edit → verdict x86_64", &[4.0], &[5.0]),
            figure("boot x86_64 (command)", &[2.0], &[3.0]),
            figure("boot x86_64 (scenario)", &[1.2], &[2.0]),
            figure("boot arm64 (scenario)", &[1.0], &[1.0]),
        ];
        let g = goals(&figs);
        let by = |n: &str| g.iter().find(|g| g.name.starts_with(n)).unwrap();
        assert!(!by("warm matrix").met, "0.6 > 0.5");
        assert!((by("warm matrix").value - 0.6).abs() < 1e-9);
        assert!(!by("edit → verdict x86_64, head").met);
        assert!(!by("edit → verdict x86_64 / boot").met, "4 / 2 = 2 > 1.5");
        assert!(by("boot x86_64 / arm64").met, "1.2 ≤ 1.5");
        assert!(
            g.iter().all(|g| !g.name.starts_with("cold")),
            "no cold run, no cold goal"
        );
    }

    #[test]
    fn the_table_names_both_sides_and_every_goal() {
        let c = Comparison {
            baseline_rev: "512677d".into(),
            baseline_sha: "512677d0123".into(),
            head: "abc1234".into(),
            figures: vec![figure("warm matrix", &[60.0], &[100.0])],
            goals: goals(&[figure("warm matrix", &[40.0], &[100.0])]),
        };
        let t = table(&c);
        assert!(t.contains("baseline 512677d"), "{t}");
        assert!(t.contains("0.60 (0.60-0.60)"), "{t}");
        assert!(
            t.contains("goal: warm matrix, head / baseline = 0.40 (≤ 0.5: met)"),
            "{t}"
        );
        assert!(picture(&c).contains("<svg"));
    }
}
