//! `cargo xtask mutate`: the rig measuring itself. Each mutant is one small,
//! realistic bug (a wrong ack, a step left out, a wrong order at unbind) in a
//! module of ours, written as data in `harness/mutants.toml`: the file, the
//! exact text and what replaces it, the scenarios that should catch it, the
//! class of bug. Each is laid into a scratch copy of `guest-kernel`'s module
//! sources under the run's folder (the working tree is never written), built
//! and booted through the same board as `cargo xtask test`, and judged:
//! caught (a named scenario failed, for a reason other than the build),
//! survived (all passed: a blind spot of the rig, named), or unviable (it did
//! not build, or built with a warning: counted apart, never as caught).

use crate::arch::Arch;
use crate::run::{self, report::Outcome, TestOptions};
use crate::scenario::{self, Scenario};
use crate::verdict::Verdict;
use crate::Paths;
use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

pub mod device;
pub mod generate;

/// The catalog, relative to the checkout.
pub const CATALOG: &str = "harness/mutants.toml";

/// The module folders of `guest-kernel` a mutant may change (the out-of-tree
/// modules; the kernel overlay's mutants need a kernel build of their own).
pub const MODULE_DIRS: &[&str] = &["driver", "driver-mainline", "bench", "platform", "foreign"];

/// The folders of `guest-kernel` laid over the 6.12 tree: a mutant there (of the
/// abstractions) costs an incremental kernel build, in the cache's build tree, and the
/// modules' builds against it; the next build of the checkout's overlay undoes it.
pub const KERNEL_DIRS: &[&str] = &["rust", "patches"];

/// One hand-written mutant.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Mutant {
    /// Stable and unique: `--only NAME` runs it again.
    pub name: String,
    /// The class of bug, e.g. "wrong ack", "missing step", "order at unbind".
    pub class: String,
    /// Relative to the checkout, under `guest-kernel/<one of MODULE_DIRS>/`.
    pub file: String,
    /// Exact text, found exactly once in `file`.
    pub find: String,
    pub replace: String,
    /// The scenarios that should catch it.
    pub scenarios: Vec<String>,
    /// What a real author would have meant, and what the bug does.
    pub why: String,
    /// A known blind spot: why no scenario can catch it today. Such a mutant is expected to
    /// survive; if it is caught, the catalog (and docs/mutate.md) must say so.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub survives: Option<String>,
    /// Where `find` starts in `file` (bytes), when it is not unique there: a generated
    /// mutant's (`generate.rs`). The catalog's are found by their text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub at: Option<usize>,
    /// Only the debug flavour's checkers (atomic-sleep, PROVE_RCU, lockdep, KASAN, kmemleak)
    /// can see it: it runs under `--debug` only, and is expected caught there.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub debug: bool,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Catalog {
    mutant: Vec<Mutant>,
}

/// Reads and checks the catalog: names unique, scenarios known, each
/// mutant's file one of the module folders' and its text there exactly once.
pub fn catalog(root: &Path) -> Result<Vec<Mutant>> {
    let path = root.join(CATALOG);
    let text =
        std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
    let c: Catalog =
        toml::from_str(&text).with_context(|| format!("parsing {}", path.display()))?;
    for (i, m) in c.mutant.iter().enumerate() {
        let at = || format!("{}: mutant `{}`", CATALOG, m.name);
        if c.mutant[..i].iter().any(|o| o.name == m.name) {
            bail!("{}: the name is used twice", at());
        }
        if m.scenarios.is_empty() {
            bail!("{}: names no scenario that should catch it", at());
        }
        for s in &m.scenarios {
            scenario::find(s).map_err(|e| anyhow::anyhow!("{}: {e}", at()))?;
        }
        if !device::is_device(&m.file) && !is_kernel(&m.file) {
            module_dir(&m.file).with_context(at)?;
        }
        let source = std::fs::read_to_string(root.join(&m.file))
            .with_context(|| format!("{}: reading {}", at(), m.file))?;
        let n = source.matches(&m.find).count();
        if n != 1 {
            bail!(
                "{}: its `find` text occurs {n} times in {} (it must occur exactly once: quote more of the line around it)",
                at(),
                m.file
            );
        }
        if m.find == m.replace {
            bail!("{}: `replace` is its `find`: no change", at());
        }
    }
    Ok(c.mutant)
}

/// The module folder under `guest-kernel/` that `file` is in.
fn module_dir(file: &str) -> Result<&str> {
    let rest = file
        .strip_prefix("guest-kernel/")
        .context("the file must be under guest-kernel/")?;
    let dir = rest.split('/').next().unwrap_or("");
    MODULE_DIRS
        .iter()
        .copied()
        .find(|d| *d == dir)
        .with_context(|| {
            format!(
                "{file} is not in a module folder this command can rebuild alone ({})",
                MODULE_DIRS.join(", ")
            )
        })
}

/// Whether `file` is in the kernel overlay (`KERNEL_DIRS`): an abstraction's.
pub fn is_kernel(file: &str) -> bool {
    file.strip_prefix("guest-kernel/")
        .and_then(|rest| rest.split('/').next())
        .is_some_and(|dir| KERNEL_DIRS.contains(&dir))
}

/// Where a mutant was laid: the scratch copy the next build reads.
pub enum Laid {
    /// A copy of `guest-kernel`'s module folders (a module mutant's).
    Modules(PathBuf),
    /// A copy of `guest-kernel`'s module and overlay folders, the overlay mutated (an
    /// abstraction mutant's): the kernel is built from it, then the modules against it.
    Kernel(PathBuf),
    /// A workspace of the device's crates (a device mutant's).
    Device(PathBuf),
}

/// Copies what `m` changes from `root` into `scratch` (`guest-kernel`'s module folders, or
/// the device's crates) and lays `m` over its file.
pub fn lay(root: &Path, scratch: &Path, m: &Mutant) -> Result<Laid> {
    let (laid, file) = if device::is_device(&m.file) {
        let ws = device::lay_crates(root, scratch)?;
        (Laid::Device(ws.clone()), ws.join(&m.file))
    } else {
        let guest = scratch.join("guest-kernel");
        let kernel = is_kernel(&m.file);
        let extra: &[&str] = if kernel { KERNEL_DIRS } else { &[] };
        for dir in MODULE_DIRS.iter().chain(extra) {
            copy_dir(&root.join("guest-kernel").join(dir), &guest.join(dir))?;
        }
        let laid = if kernel {
            Laid::Kernel(guest)
        } else {
            Laid::Modules(guest)
        };
        (laid, scratch.join(&m.file))
    };
    edit(&file, m)?;
    Ok(laid)
}

/// Lays `m`'s change over `file`, a copy of its file.
fn edit(file: &Path, m: &Mutant) -> Result<()> {
    let source = std::fs::read_to_string(file)?;
    let mutated = match m.at {
        None => source.replacen(&m.find, &m.replace, 1),
        Some(at) if source.get(at..at + m.find.len()) == Some(m.find.as_str()) => {
            format!("{}{}{}", &source[..at], m.replace, &source[at + m.find.len()..])
        }
        Some(at) => bail!(
            "{}: mutant `{}` expects `{}` at byte {at}, the file has changed since it was generated: generate again",
            m.file,
            m.name,
            m.find
        ),
    };
    std::fs::write(file, mutated)?;
    Ok(())
}

pub(crate) fn copy_dir(from: &Path, to: &Path) -> Result<()> {
    std::fs::create_dir_all(to)?;
    for e in std::fs::read_dir(from).with_context(|| format!("reading {}", from.display()))? {
        let e = e?;
        let (src, dst) = (e.path(), to.join(e.file_name()));
        if e.file_type()?.is_dir() {
            copy_dir(&src, &dst)?;
        } else {
            std::fs::copy(&src, &dst).with_context(|| format!("copying {}", src.display()))?;
        }
    }
    Ok(())
}

/// What became of a mutant.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "fate", rename_all = "snake_case")]
pub enum Fate {
    /// A named scenario failed: the first one's name and reason.
    Caught { scenario: String, reason: String },
    /// Every named scenario passed.
    Survived { passed: Vec<String> },
    /// It did not build (or built with a warning).
    Unviable { why: String },
    /// The rig could not boot it for a reason no mutant of ours causes: the kernel or the
    /// image did not build. No evidence either way, and never the catalog's expectation.
    NoVerdict { why: String },
}

/// How a failed kernel or image build fails every scenario (`run`'s words): not the mutant's
/// doing, since mutants change modules and the device, never the kernel.
const KERNEL_NOT_BUILT: &str = "kernel or image build failed";

/// How the build of a mutant's module fails every scenario that needs it
/// (`run`'s words).
const NOT_BUILT: &[&str] = &[
    "the driver did not build",
    "the platform modules did not build",
];

/// A mutant's fate from its scenarios' outcomes.
pub fn fate(outcomes: &[Outcome]) -> Fate {
    let unbuilt = |o: &&Outcome| NOT_BUILT.iter().any(|n| o.reason.starts_with(n));
    if let Some(o) = outcomes.iter().find(unbuilt) {
        return Fate::Unviable {
            why: o.reason.lines().take(6).collect::<Vec<_>>().join("\n"),
        };
    }
    if let Some(o) = outcomes
        .iter()
        .find(|o| o.reason.starts_with(KERNEL_NOT_BUILT))
    {
        return Fate::NoVerdict {
            why: headline(&o.reason),
        };
    }
    match outcomes.iter().find(|o| o.verdict == Verdict::Fail) {
        Some(o) => Fate::Caught {
            scenario: format!("{} {}", o.arch, o.scenario),
            reason: headline(&o.reason),
        },
        None => Fate::Survived {
            passed: outcomes
                .iter()
                .filter(|o| o.verdict == Verdict::Pass)
                .map(|o| format!("{} {}", o.arch, o.scenario))
                .collect(),
        },
    }
}

/// A reason's first line, with the next one when the first only announces it
/// ("guest checks failed or skipped:").
fn headline(reason: &str) -> String {
    let mut lines = reason.lines().map(str::trim).filter(|l| !l.is_empty());
    let first = lines.next().unwrap_or("").to_string();
    match lines.next() {
        Some(next) if first.ends_with(':') => format!("{first} {next}"),
        _ => first,
    }
}

/// One mutant's line in `mutate.json`.
#[derive(Serialize)]
pub struct Judged {
    #[serde(flatten)]
    pub mutant: Mutant,
    #[serde(flatten)]
    pub fate: Fate,
    pub duration_s: f64,
}

/// Caught, survived and unviable counts, and the score: caught over caught
/// and survived (unviable ones are no evidence either way).
pub fn score(judged: &[Judged]) -> (usize, usize, usize, f64) {
    let count = |f: fn(&Fate) -> bool| judged.iter().filter(|j| f(&j.fate)).count();
    let caught = count(|f| matches!(f, Fate::Caught { .. }));
    let survived = count(|f| matches!(f, Fate::Survived { .. }));
    let unviable = count(|f| matches!(f, Fate::Unviable { .. }));
    let viable = caught + survived;
    let score = if viable == 0 {
        0.0
    } else {
        caught as f64 / viable as f64
    };
    (caught, survived, unviable, score)
}

pub struct MutateOptions {
    pub arch: Arch,
    /// Run only these (by name).
    pub only: Vec<String>,
    /// Run a seeded sample of this many.
    pub sample: Option<(usize, u64)>,
    pub jobs: usize,
    /// Boot the clean modules first through every scenario the mutants name.
    pub clean_first: bool,
    /// The generated mutants of this module source (relative to the checkout), instead of
    /// the catalog.
    pub generate: Option<String>,
    /// Which scenarios ran each line (a run's coverage): a generated mutant runs against
    /// those that ran its lines.
    pub reach: Option<crate::run::coverage::Reach>,
    /// How the guests' DMA reaches the device (`--iommu`, `--bounce`).
    pub dma_path: run::DmaPath,
    /// Boot the debug flavour (`--debug`); the catalog's `debug` mutants run only then.
    pub debug: bool,
}

/// The mutants to pick from: the catalog, or the generated set of `opts.generate`.
pub fn all(root: &Path, opts: &MutateOptions) -> Result<Vec<Mutant>> {
    match &opts.generate {
        Some(file) => generate::generate(root, file, opts.reach.as_ref()),
        None => catalog(root),
    }
}

/// The mutants `opts` picks from `all`, in catalog order.
pub fn pick(all: Vec<Mutant>, opts: &MutateOptions) -> Result<Vec<Mutant>> {
    for name in &opts.only {
        if !all.iter().any(|m| &m.name == name) {
            let names: Vec<&str> = all.iter().map(|m| m.name.as_str()).collect();
            bail!(
                "no mutant `{name}` in {}; its mutants: {}",
                opts.generate.as_deref().unwrap_or(CATALOG),
                names.join(", ")
            );
        }
    }
    let mut chosen: Vec<Mutant> = all
        .into_iter()
        .filter(|m| opts.only.is_empty() || opts.only.contains(&m.name))
        .collect();
    // A sample is drawn from the mutants that run on the arch and flavour.
    if opts.sample.is_some() {
        chosen.retain(|m| runs_on(m, opts.arch) && (opts.debug || !m.debug));
    }
    if let Some((n, seed)) = opts.sample {
        // A small xorshift over the seed: the same seed picks the same mutants, in catalog order.
        let mut x = seed | 1;
        let mut keyed: Vec<(u64, usize)> = (0..chosen.len())
            .map(|i| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                (x, i)
            })
            .collect();
        keyed.sort_unstable();
        let mut kept: Vec<usize> = keyed.iter().take(n).map(|(_, i)| *i).collect();
        kept.sort_unstable();
        chosen = kept.into_iter().map(|i| chosen[i].clone()).collect();
    }
    Ok(chosen)
}

fn scenarios_of(m: &Mutant) -> Vec<&'static Scenario> {
    m.scenarios
        .iter()
        .filter_map(|s| scenario::find(s).ok())
        .collect()
}

/// The options of one boot round: `scenarios` on `opts.arch`, modules from `laid` (or the
/// checkout at `root`).
fn test_options(
    root: &Path,
    opts: &MutateOptions,
    scenarios: Vec<&'static Scenario>,
    laid: Option<Laid>,
) -> TestOptions {
    let guest = match &laid {
        Some(Laid::Modules(m) | Laid::Kernel(m)) => m.clone(),
        _ => root.join("guest-kernel"),
    };
    let overlay = match &laid {
        Some(Laid::Kernel(m)) => Some(m.clone()),
        _ => None,
    };
    let foreign = scenarios
        .iter()
        .any(|s| matches!(s.check, scenario::Check::Module { .. }))
        .then(|| guest.join(crate::run::foreign::EXAMPLE));
    let (modules, device) = match laid {
        Some(Laid::Modules(m) | Laid::Kernel(m)) => (Some(m), None),
        Some(Laid::Device(server)) => (None, Some(server)),
        None => (None, None),
    };
    TestOptions {
        arches: vec![opts.arch],
        mainline_arches: vec![opts.arch],
        scenarios,
        flavor: crate::kernel::Flavor {
            extra: if opts.debug {
                vec!["debug".into()]
            } else {
                Vec::new()
            },
            overlay,
            ..Default::default()
        },
        unit_tests: false,
        repeat: 1,
        jobs: opts.jobs,
        sweep: crate::sweep::Plan::Sample(1),
        modules,
        device,
        dma_path: opts.dma_path,
        foreign,
        kernel_src: None,
        coverage_bar: false,
        matrix_sample: None,
    }
}

/// Whether one of the scenarios `m` names runs on `arch`.
fn runs_on(m: &Mutant, arch: Arch) -> bool {
    scenarios_of(m)
        .iter()
        .any(|s| s.machine.arches().contains(&arch))
}

/// `cargo xtask mutate`. Returns whether every mutant met the catalog's expectation.
pub fn mutate(paths: &Paths, opts: &MutateOptions) -> Result<bool> {
    let (mutants, elsewhere): (Vec<Mutant>, Vec<Mutant>) = pick(all(&paths.root, opts)?, opts)?
        .into_iter()
        .partition(|m| runs_on(m, opts.arch));
    let (debug_only, mutants): (Vec<Mutant>, Vec<Mutant>) =
        mutants.into_iter().partition(|m| m.debug && !opts.debug);
    if !debug_only.is_empty() {
        let names: Vec<&str> = debug_only.iter().map(|m| m.name.as_str()).collect();
        eprintln!(
            "mutate: {} mutants not run: only the debug flavour can catch them, run with --debug ({})",
            debug_only.len(),
            names.join(", ")
        );
    }
    if !elsewhere.is_empty() {
        let names: Vec<&str> = elsewhere.iter().map(|m| m.name.as_str()).collect();
        eprintln!(
            "mutate: {} mutants not run: none of their scenarios runs on {} ({})",
            elsewhere.len(),
            opts.arch,
            names.join(", ")
        );
    }
    let dir = run::new_run_dir(paths)?;
    eprintln!(
        "mutate: {} mutants on {}; results in {}",
        mutants.len(),
        opts.arch,
        dir.display()
    );
    if opts.clean_first {
        let mut all: Vec<&'static Scenario> = Vec::new();
        for s in mutants.iter().flat_map(scenarios_of) {
            if !all.iter().any(|a| a.name == s.name) {
                all.push(s);
            }
        }
        let clean = dir.join("clean");
        std::fs::create_dir_all(&clean)?;
        let outcomes = run::scenarios(paths, &test_options(&paths.root, opts, all, None), &clean)?;
        if let Some(o) = outcomes.iter().find(|o| o.verdict == Verdict::Fail) {
            bail!(
                "the clean tree fails {} {} already, so no mutant can be judged by it: {}",
                o.arch,
                o.scenario,
                o.reason.lines().next().unwrap_or("")
            );
        }
    }
    // The abstractions' mutants last: each rebuilds the kernel, which the next build of the
    // checkout's overlay (a module mutant's, say) rebuilds again.
    let mut mutants = mutants;
    mutants.sort_by_key(|m| is_kernel(&m.file));
    let mut judged = Vec::new();
    for m in &mutants {
        let scratch = dir.join("mutants").join(m.name.replace(['/', ':'], "_"));
        let t = std::time::Instant::now();
        let laid = match lay(&paths.root, &scratch, m)? {
            Laid::Device(ws) => match device::build(paths, &ws)? {
                device::Built::Server(server) => Ok(Laid::Device(server)),
                device::Built::Unviable(why) => Err(Fate::Unviable { why }),
                device::Built::TestsFailed(reason) => Err(Fate::Caught {
                    scenario: "unit tests (qemu-device)".into(),
                    reason,
                }),
            },
            modules => Ok(modules),
        };
        let fate = match laid {
            Ok(laid) => {
                let outcomes = run::scenarios(
                    paths,
                    &test_options(&paths.root, opts, scenarios_of(m), Some(laid)),
                    &scratch,
                )?;
                match fate(&outcomes) {
                    // The kernel is what a kernel mutant changed: not building is its own.
                    Fate::NoVerdict { why } if is_kernel(&m.file) => Fate::Unviable { why },
                    f => f,
                }
            }
            Err(fate) => fate,
        };
        eprintln!("mutate: {}: {}", m.name, describe(&fate));
        judged.push(Judged {
            mutant: m.clone(),
            fate,
            duration_s: t.elapsed().as_secs_f64(),
        });
    }
    let json = dir.join("mutate.json");
    let (caught, survived, unviable, score) = score(&judged);
    std::fs::write(
        &json,
        serde_json::to_string_pretty(&serde_json::json!({
            "arch": opts.arch.name(),
            "caught": caught,
            "survived": survived,
            "unviable": unviable,
            "score": score,
            "mutants": judged,
        }))?,
    )?;
    println!("\n{}", table(&judged));
    println!(
        "score: {caught} caught of {} viable ({:.0} %), {survived} survived, {unviable} unviable; report: {}",
        caught + survived,
        100.0 * score,
        json.display()
    );
    std::fs::write(dir.join("junit.xml"), junit(&judged, opts.arch, &dir))?;
    let unexpected = unexpected(&judged);
    for u in &unexpected {
        println!("mutate: {u}");
    }
    Ok(unexpected.is_empty())
}

/// Every mutant whose fate is not the catalog's expectation: caught, unless it is a known
/// survivor (`survives`). A rule that stops catching, a mutant that no longer builds, and a
/// blind spot that closed all show here.
pub fn unexpected(judged: &[Judged]) -> Vec<String> {
    judged.iter().filter_map(surprise).collect()
}

/// Why `j`'s fate is not the catalog's expectation, if it is not.
fn surprise(j: &Judged) -> Option<String> {
    let name = &j.mutant.name;
    if j.mutant.at.is_some() {
        // A generated mutant has no expectation: its fate is only counted.
        return None;
    }
    match (&j.fate, &j.mutant.survives) {
        (Fate::Caught { .. }, None) | (Fate::Survived { .. }, Some(_)) => None,
        (Fate::Unviable { .. }, _) => Some(format!(
            "{name} did not build: fix its `find`/`replace` in {CATALOG}"
        )),
        (Fate::NoVerdict { why }, _) => Some(format!(
            "{name} got no verdict ({why}): the tree itself does not build; fix it and run the mutant again"
        )),
        (Fate::Survived { .. }, None) => Some(format!(
            "{name} survived, but the catalog expects it caught: a rule stopped catching it"
        )),
        (Fate::Caught { scenario, .. }, Some(_)) => Some(format!(
            "{name} was caught by {scenario}, but the catalog lists it as a known survivor: drop its `survives` (and its line in docs/mutate.md)"
        )),
    }
}

/// One JUnit case per mutant: it passes when its fate is the catalog's.
fn junit(judged: &[Judged], arch: Arch, dir: &Path) -> String {
    let cases: Vec<Outcome> = judged
        .iter()
        .map(|j| {
            let surprise = surprise(j);
            Outcome {
                arch: arch.to_string(),
                scenario: format!("mutant {}", j.mutant.name),
                verdict: if surprise.is_some() {
                    Verdict::Fail
                } else {
                    Verdict::Pass
                },
                duration_s: j.duration_s,
                log: dir
                    .join("mutants")
                    .join(&j.mutant.name)
                    .display()
                    .to_string(),
                reason: surprise.unwrap_or_else(|| describe(&j.fate)),
                timings: Default::default(),
                findings: Default::default(),
            }
        })
        .collect();
    run::report::to_junit(&cases)
}

fn describe(f: &Fate) -> String {
    match f {
        Fate::Caught { scenario, reason } => format!("caught by {scenario}: {reason}"),
        Fate::Survived { passed } => format!("SURVIVED ({} passed)", passed.join(", ")),
        Fate::Unviable { why } => format!("unviable: {}", why.lines().next().unwrap_or("")),
        Fate::NoVerdict { why } => format!("no verdict: {why}"),
    }
}

/// One line per mutant: name, class, fate, by what.
pub fn table(judged: &[Judged]) -> String {
    let mut out = format!("{:<30} {:<22} {:<9} by\n", "mutant", "class", "fate");
    for j in judged {
        let (fate, by) = match &j.fate {
            Fate::Caught { scenario, reason } => {
                let reason: String = reason.chars().take(90).collect();
                ("caught", format!("{scenario}: {reason}"))
            }
            Fate::Survived { passed } => ("SURVIVED", format!("passed {}", passed.join(", "))),
            Fate::Unviable { .. } => ("unviable", String::new()),
            Fate::NoVerdict { why } => ("no verdict", why.clone()),
        };
        out.push_str(&format!(
            "{:<30} {:<22} {:<9} {by}\n",
            j.mutant.name, j.mutant.class, fate
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn outcome(scenario: &str, verdict: Verdict, reason: &str) -> Outcome {
        Outcome {
            arch: "x86_64".into(),
            scenario: scenario.into(),
            verdict,
            duration_s: 1.0,
            log: String::new(),
            reason: reason.into(),
            timings: Default::default(),
            findings: Default::default(),
        }
    }

    #[test]
    fn the_catalog_parses_and_every_mutant_applies_once() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"))
            .ancestors()
            .nth(2)
            .unwrap();
        let all = catalog(root).unwrap();
        assert!(all.len() >= 10, "{} mutants", all.len());
        let scratch = std::env::temp_dir().join(format!("pci-rig-mutate-{}", std::process::id()));
        let m = &all[0];
        let Laid::Modules(guest) = lay(root, &scratch, m).unwrap() else {
            panic!("the catalog's first mutant is a module's")
        };
        let laid = std::fs::read_to_string(scratch.join(&m.file)).unwrap();
        assert!(laid.contains(&m.replace) && guest.join("driver/Kbuild").exists());
        // The working tree is untouched.
        let ours = std::fs::read_to_string(root.join(&m.file)).unwrap();
        assert!(ours.contains(&m.find));
        std::fs::remove_dir_all(&scratch).unwrap();
    }

    #[test]
    fn a_mutant_outside_the_module_folders_or_not_found_once_is_refused() {
        assert!(module_dir("guest-kernel/driver/pci_rig.rs").is_ok());
        let e = module_dir("guest-kernel/rust/kernel/io.rs").unwrap_err();
        assert!(format!("{e:#}").contains("not in a module folder"), "{e:#}");
        assert!(module_dir("harness/rig/src/lib.rs").is_err());
        // The overlay's files are the abstractions' mutants, built into the kernel.
        assert!(is_kernel("guest-kernel/rust/kernel/io.rs"));
        assert!(is_kernel("guest-kernel/patches/0008-rust-dma.patch"));
        assert!(!is_kernel("guest-kernel/driver/pci_rig.rs"));
        assert!(!is_kernel("guest-kernel/rustc/x.rs"));
    }

    #[test]
    fn an_abstraction_mutant_lays_the_overlay_and_the_modules() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"))
            .ancestors()
            .nth(2)
            .unwrap();
        let all = catalog(root).unwrap();
        let m = all.iter().find(|m| is_kernel(&m.file)).unwrap();
        let scratch = std::env::temp_dir().join(format!("pci-rig-mutate-k-{}", std::process::id()));
        let Laid::Kernel(guest) = lay(root, &scratch, m).unwrap() else {
            panic!("{} is an abstraction's mutant", m.name)
        };
        let laid = std::fs::read_to_string(scratch.join(&m.file)).unwrap();
        assert!(laid.contains(&m.replace));
        assert!(guest.join("patches").is_dir() && guest.join("driver/Kbuild").exists());
        let mutate = MutateOptions {
            arch: Arch::X86_64,
            only: vec![],
            sample: None,
            jobs: 1,
            clean_first: false,
            generate: None,
            reach: None,
            dma_path: run::DmaPath::Direct,
            debug: false,
        };
        let opts = test_options(root, &mutate, vec![], Some(Laid::Kernel(guest.clone())));
        assert_eq!(opts.flavor.overlay.as_deref(), Some(guest.as_path()));
        assert_eq!(opts.modules.as_deref(), Some(guest.as_path()));
        std::fs::remove_dir_all(&scratch).unwrap();
    }

    #[test]
    fn fates_follow_the_outcomes() {
        let built_not = outcome(
            "probe",
            Verdict::Fail,
            "the driver did not build: error[E0308]",
        );
        assert!(matches!(fate(&[built_not]), Fate::Unviable { .. }));
        let platform_not = outcome(
            "cpufreq",
            Verdict::Fail,
            "the platform modules did not build; the platform and cpufreq scenarios will fail",
        );
        assert!(matches!(fate(&[platform_not]), Fate::Unviable { .. }));
        // The kernel did not build: the tree's fault, not the mutant's catch.
        let kernel_not = outcome(
            "dma",
            Verdict::Fail,
            "kernel or image build failed: kernel x86_64 built with 1 warning(s) in our files",
        );
        assert!(matches!(fate(&[kernel_not]), Fate::NoVerdict { .. }));
        let caught = fate(&[
            outcome("probe", Verdict::Pass, "ok"),
            outcome("unbind", Verdict::Fail, "binding 1: INT_ACK write #9\nmore"),
        ]);
        assert_eq!(
            caught,
            Fate::Caught {
                scenario: "x86_64 unbind".into(),
                reason: "binding 1: INT_ACK write #9".into()
            }
        );
        let announced = fate(&[outcome(
            "probe",
            Verdict::Fail,
            "guest checks failed or skipped:\n  not ok 3 irq # no interrupt\nmore",
        )]);
        assert_eq!(
            announced,
            Fate::Caught {
                scenario: "x86_64 probe".into(),
                reason: "guest checks failed or skipped: not ok 3 irq # no interrupt".into()
            }
        );
        let survived = fate(&[outcome("probe", Verdict::Pass, "ok")]);
        assert_eq!(
            survived,
            Fate::Survived {
                passed: vec!["x86_64 probe".into()]
            }
        );
    }

    #[test]
    fn only_fates_against_the_catalog_are_unexpected() {
        let judged = |fate: Fate, survives: Option<&str>| Judged {
            mutant: Mutant {
                name: "m".into(),
                class: String::new(),
                file: String::new(),
                find: String::new(),
                replace: String::new(),
                scenarios: vec![],
                why: String::new(),
                survives: survives.map(str::to_string),
                at: None,
                debug: false,
            },
            fate,
            duration_s: 0.0,
        };
        let caught = || Fate::Caught {
            scenario: "x86_64 probe".into(),
            reason: String::new(),
        };
        let survived = || Fate::Survived { passed: vec![] };
        assert!(unexpected(&[judged(caught(), None)]).is_empty());
        assert!(unexpected(&[judged(survived(), Some("blind"))]).is_empty());
        let e = unexpected(&[judged(survived(), None)]);
        assert!(e[0].contains("a rule stopped catching it"), "{e:?}");
        let e = unexpected(&[judged(caught(), Some("blind"))]);
        assert!(e[0].contains("known survivor"), "{e:?}");
        let e = unexpected(&[judged(Fate::Unviable { why: String::new() }, None)]);
        assert!(e[0].contains("did not build"), "{e:?}");
        // JUnit: one case per mutant, failed only where the fate surprised.
        let x = junit(
            &[judged(caught(), None), judged(survived(), None)],
            Arch::X86_64,
            Path::new("/r"),
        );
        assert!(x.contains("tests=\"2\" failures=\"1\""), "{x}");
        assert!(x.contains("a rule stopped catching it"), "{x}");
    }

    #[test]
    fn a_seeded_sample_is_the_same_for_the_same_seed() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"))
            .ancestors()
            .nth(2)
            .unwrap();
        let opts = |seed| MutateOptions {
            arch: Arch::X86_64,
            only: vec![],
            sample: Some((3, seed)),
            jobs: 1,
            clean_first: false,
            generate: None,
            reach: None,
            dma_path: Default::default(),
            debug: false,
        };
        let names = |seed| -> Vec<String> {
            pick(catalog(root).unwrap(), &opts(seed))
                .unwrap()
                .into_iter()
                .map(|m| m.name)
                .collect()
        };
        assert_eq!(names(7).len(), 3);
        assert_eq!(names(7), names(7));
        let only = MutateOptions {
            only: vec!["no-such".into()],
            ..opts(1)
        };
        assert!(pick(catalog(root).unwrap(), &only).is_err());
    }

    #[test]
    fn a_sample_draws_debug_only_mutants_only_under_debug() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"))
            .ancestors()
            .nth(2)
            .unwrap();
        let opts = |seed, debug| MutateOptions {
            arch: Arch::X86_64,
            only: vec![],
            sample: Some((60, seed)),
            jobs: 1,
            clean_first: false,
            generate: None,
            reach: None,
            dma_path: Default::default(),
            debug,
        };
        let drawn = |debug| -> Vec<Mutant> {
            (0..20)
                .flat_map(|seed| pick(catalog(root).unwrap(), &opts(seed, debug)).unwrap())
                .collect()
        };
        assert!(catalog(root).unwrap().iter().any(|m| m.debug));
        assert!(!drawn(false).iter().any(|m| m.debug));
        assert!(drawn(true).iter().any(|m| m.debug));
    }
}
