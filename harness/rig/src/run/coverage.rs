//! Coverage in a run (the `coverage` crate does the mapping): what the
//! `tcg-coverage` plugin watches in each boot and what its record is read
//! against, then the run's tally as an lcov tracefile, a table and the
//! committed bar's verdict.

use super::report::{Outcome, Verdict};
use crate::arch::Arch;
use crate::kernel::Kernel;
use anyhow::{Context, Result};
use coverage::{Bar, Manifest, Tally};
use object::{Object, ObjectSymbol};
use std::path::{Path, PathBuf};

/// The committed bar, relative to the repository.
pub const BAR: &str = "harness/coverage/bar.toml";
/// The run's tracefile and summary, in its folder.
pub const LCOV: &str = "coverage.lcov";
pub const SUMMARY: &str = "coverage.json";
/// Which scenarios ran each line (`cargo xtask mutate --generate` runs a
/// mutant against them), in the run's folder.
pub const REACH: &str = "coverage.reach.json";

/// What a boot of one prepared kernel watches.
#[derive(Debug, Clone)]
pub struct Watch {
    /// The guest virtual ranges the plugin instruments: the module area and
    /// the kernel crate's text in vmlinux.
    pub ranges: Vec<(u64, u64)>,
    pub manifest: Manifest,
}

/// A module the image carries: its `.ko`, and the folder its sources came
/// from when it was built outside the kernel tree.
pub struct Module<'a> {
    pub ko: &'a Path,
    pub sources: Option<&'a Path>,
}

/// The watch for `kernel` with `modules` in its image. `root` is the
/// repository, `guest` the `guest-kernel` the modules were built from (a
/// mutant's copy, perhaps): files of either are named as in the repository.
/// Each module is copied into `keep` (in the run's folder), so that the run can be read
/// again after they were rebuilt.
pub fn watch(
    kernel: &Kernel,
    (root, guest): (&Path, &Path),
    modules: &[Module],
    keep: &Path,
) -> Result<Watch> {
    let vmlinux = kernel.build.join("vmlinux");
    let bytes =
        std::fs::read(&vmlinux).with_context(|| format!("reading {}", vmlinux.display()))?;
    let ranges = ranges(kernel.arch, &bytes).with_context(|| vmlinux.display().to_string())?;
    let mut manifest = Manifest::default();
    manifest
        .images
        .push(("vmlinux".into(), vmlinux, Manifest::digest(&bytes)));
    std::fs::create_dir_all(keep)?;
    let repo_name = |p: &Path| -> String {
        match p.strip_prefix(guest) {
            Ok(rel) => format!("guest-kernel/{}", rel.display()),
            Err(_) => p.strip_prefix(root).unwrap_or(p).display().to_string(),
        }
    };
    for m in modules {
        let name =
            m.ko.file_stem()
                .map(|s| s.to_string_lossy().replace('-', "_"))
                .unwrap_or_default();
        let ko = std::fs::read(m.ko).with_context(|| format!("reading {}", m.ko.display()))?;
        let kept = keep.join(format!("{name}.ko"));
        std::fs::write(&kept, &ko)?;
        manifest.images.push((name, kept, Manifest::digest(&ko)));
        // Kbuild builds each of ours in a copy: its files are named by the
        // folder they were copied from (the driver's, for a shared one).
        let (Some(sources), Some(copy)) = (m.sources, m.ko.parent()) else {
            continue;
        };
        for entry in std::fs::read_dir(copy)?.flatten() {
            let file = entry.file_name();
            let is_source = Path::new(&file)
                .extension()
                .is_some_and(|e| e == "rs" || e == "c" || e == "h");
            let from = [sources.join(&file), guest.join("driver").join(&file)]
                .into_iter()
                .find(|f| f.is_file());
            if let (true, Some(from)) = (is_source, from) {
                manifest
                    .maps
                    .push((copy.join(&file).display().to_string(), repo_name(&from)));
            }
        }
    }
    // The kernel crate: our overlay's files by their names in the repository,
    // the tree's own under linux/.
    let overlay = guest.join("rust");
    for file in walk(&overlay) {
        let rel = file.strip_prefix(&overlay).unwrap_or(&file);
        manifest.maps.push((
            kernel.src.join("rust").join(rel).display().to_string(),
            repo_name(&file),
        ));
    }
    for dir in ["rust", "samples"] {
        manifest.maps.push((
            format!("{}/", kernel.src.join(dir).display()),
            format!("linux/{dir}/"),
        ));
    }
    Ok(Watch { ranges, manifest })
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.is_dir() {
            out.extend(walk(&path));
        } else {
            out.push(path);
        }
    }
    out.sort();
    out
}

/// The ranges the plugin watches on `arch`: where modules load, and the
/// kernel crate's code in vmlinux (one object file, so one stretch).
pub fn ranges(arch: Arch, vmlinux: &[u8]) -> Result<Vec<(u64, u64)>> {
    let file = object::File::parse(vmlinux)?;
    let symbol = |name: &str| {
        file.symbols()
            .find(|s| s.name() == Ok(name))
            .map(|s| s.address())
            .with_context(|| format!("vmlinux has no symbol {name}"))
    };
    const TWO_GIB: u64 = 2 << 30;
    let modules = match arch {
        // MODULES_VADDR..MODULES_END without KASLR (arch/x86/include/asm/pgtable_64_types.h).
        Arch::X86_64 => (0xffff_ffff_a000_0000, 0xffff_ffff_ff00_0000),
        // Within 2 GiB below the kernel's end, where both place modules.
        Arch::Arm64 | Arch::Riscv64 => (symbol("_end")? - TWO_GIB, symbol("_stext")?),
    };
    let mut crate_text = (u64::MAX, 0);
    for s in file.symbols() {
        if s.kind() == object::SymbolKind::Text
            && s.size() > 0
            && coverage::run::in_kernel_crate(&coverage::image::demangle(s.name().unwrap_or("")))
        {
            crate_text = (
                crate_text.0.min(s.address()),
                crate_text.1.max(s.address() + s.size()),
            );
        }
    }
    let mut out = vec![modules];
    if crate_text.0 < crate_text.1 {
        out.push(crate_text);
    }
    Ok(out)
}

/// QEMU's `-plugin` argument.
pub fn plugin_arg(so: &Path, ranges: &[(u64, u64)], out: &Path) -> String {
    let mut arg = so.display().to_string();
    for (start, end) in ranges {
        arg.push_str(&format!(",range={start:#x}+{:#x}", end - start));
    }
    arg.push_str(&format!(",out={}", out.display()));
    arg
}

/// The files the bar holds and the table shows first: the drivers and the
/// PCI abstractions under them.
pub fn watched(file: &str) -> bool {
    const UNDER_TEST: &[&str] = &[
        "guest-kernel/driver/",
        "guest-kernel/driver-mainline/",
        "guest-kernel/foreign/",
        "guest-kernel/rust/kernel/pci",
        "guest-kernel/rust/kernel/dma.rs",
        "guest-kernel/rust/kernel/devres.rs",
        "guest-kernel/rust/kernel/irq.rs",
    ];
    UNDER_TEST.iter().any(|p| file.starts_with(p))
}

/// The run's tally over the boots of `results`.
pub fn tally(root: &Path, results: &[Outcome]) -> Result<Tally> {
    let dirs: Vec<PathBuf> = results
        .iter()
        .filter(|o| o.verdict != Verdict::Skip)
        .map(|o| root.join(&o.log))
        .collect();
    coverage::run::tally(&dirs, super::CONSOLE_LOG)
}

/// Whether a boot's folder is of a scenario every default run boots the same way: not a
/// cell of the matrix nor a sweep, which a run's seed draws (another seed, other lines).
fn fixed(dir: &Path) -> bool {
    let name = ::coverage::run::scenario_of(dir);
    !name.starts_with("matrix-")
        && crate::scenario::find(&name)
            .is_ok_and(|s| !matches!(s.check, crate::scenario::Check::Sweep(_)))
}

/// The tally the bar is held to: the run's boots of scenarios every default run boots the
/// same way (`fixed`), so that no seed moves it.
pub fn bar_tally(root: &Path, results: &[Outcome]) -> Result<Tally> {
    let dirs: Vec<PathBuf> = results
        .iter()
        .filter(|o| o.verdict != Verdict::Skip)
        .map(|o| root.join(&o.log))
        .filter(|d| fixed(d))
        .collect();
    coverage::run::tally(&dirs, super::CONSOLE_LOG)
}

/// Per file: lines and functions reached, then each watched file's
/// functions no boot ran.
pub fn table(tally: &Tally) -> String {
    let mut out = format!(
        "coverage over {} boots (lines and functions run at least once):\n{:<52} {:>13} {:>11}\n",
        tally.boots, "file", "lines", "functions"
    );
    let mut files: Vec<(&String, &coverage::tally::File)> = tally.files.iter().collect();
    files.sort_by_key(|(name, _)| (!watched(name), name.as_str()));
    for (name, f) in &files {
        if !watched(name) && !name.starts_with("guest-kernel/") {
            continue;
        }
        out.push_str(&format!(
            "{:<52} {:>5}/{:<5} {:>3}% {:>4}/{:<4}\n",
            name,
            f.lines_hit(),
            f.lines.len(),
            percent(f.lines_hit(), f.lines.len()),
            f.functions_hit(),
            f.functions.len()
        ));
    }
    for (name, f) in files.iter().filter(|(n, _)| watched(n)) {
        let missed = f.unreached_functions();
        if !missed.is_empty() {
            out.push_str(&format!("{name}: no boot ran\n"));
            for (fun, line) in missed {
                out.push_str(&format!("    {line:>5}  {fun}\n"));
            }
        }
    }
    out
}

fn percent(a: usize, b: usize) -> usize {
    (a * 100).checked_div(b).unwrap_or(0)
}

/// Writes the tracefile and summary into `dir`.
pub fn write(dir: &Path, root: &Path, tally: &Tally) -> Result<()> {
    let lcov = coverage::lcov::write(tally, "pci-rig", &root.display().to_string());
    std::fs::write(dir.join(LCOV), lcov)?;
    let summary: serde_json::Map<String, serde_json::Value> = tally
        .files
        .iter()
        .map(|(name, f)| {
            (
                name.clone(),
                serde_json::json!({
                    "lines": f.lines.len(),
                    "lines_hit": f.lines_hit(),
                    "functions": f.functions.len(),
                    "functions_hit": f.functions_hit(),
                    "unreached_functions": f.unreached_functions().iter().map(|(n, _)| *n).collect::<Vec<_>>(),
                }),
            )
        })
        .collect();
    // Every measured line, with the scenarios that ran it (none: measured, never run); a line
    // with no code is absent.
    let mut reach: Reach = Reach::new();
    for (name, f) in &tally.files {
        let ran = tally.reach.get(name);
        let lines = f
            .lines
            .keys()
            .map(|l| (*l, ran.and_then(|r| r.get(l)).cloned().unwrap_or_default()))
            .collect();
        reach.insert(name.clone(), lines);
    }
    std::fs::write(dir.join(REACH), serde_json::to_string(&reach)?)?;
    std::fs::write(
        dir.join(SUMMARY),
        serde_json::to_string_pretty(&serde_json::json!({"boots": tally.boots, "files": summary}))?,
    )?;
    Ok(())
}

/// Adds the per-file summary (`SUMMARY`) to the run's report.json, as its `coverage`.
pub fn add_to_report(dir: &Path) -> Result<()> {
    let report = dir.join("report.json");
    let mut json: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&report)?)?;
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join(SUMMARY))?)?;
    json["coverage"] = summary;
    std::fs::write(&report, serde_json::to_string_pretty(&json)?)?;
    Ok(())
}

/// The bar's verdict on `tally`: pass, or fail naming what is no longer
/// reached.
pub fn judge_bar(root: &Path, tally: &Tally) -> (Verdict, String) {
    let text = match std::fs::read_to_string(root.join(BAR)) {
        Ok(t) => t,
        Err(e) => return (Verdict::Fail, format!("no coverage bar to hold ({BAR}: {e}); write one with `cargo xtask coverage RUN --write-bar`")),
    };
    let bar = match Bar::parse(&text) {
        Ok(b) => b,
        Err(e) => return (Verdict::Fail, format!("{BAR} does not parse: {e:#}")),
    };
    let short = bar.shortfalls(tally);
    if short.is_empty() {
        let lines: usize = bar.files.values().map(|f| f.lines).sum();
        let functions: usize = bar.files.values().map(|f| f.functions.len()).sum();
        (
            Verdict::Pass,
            format!(
                "{} files at or above the bar ({lines} lines, {functions} functions reached) over {} boots",
                bar.files.len(),
                tally.boots
            ),
        )
    } else {
        (
            Verdict::Fail,
            format!("below the coverage bar ({BAR}):\n{}", short.join("\n")),
        )
    }
}

/// `cargo xtask coverage RUN…`: each run's coverage from its folder, without the boots of
/// the scenarios in `drop`; the bar's verdict on each, or the bar written from all of them
/// (`write_bar`: what every run reached). Returns whether the bar holds.
pub fn replay(root: &Path, runs: &[PathBuf], drop: &[String], write_bar: bool) -> Result<bool> {
    if runs.len() > 1 && !write_bar {
        anyhow::bail!("several runs are read together only to write the bar (--write-bar)");
    }
    let mut bar: Option<Bar> = None;
    let mut holds = true;
    for run in runs {
        let (_, tally) = replay_one(root, run, drop)?;
        if write_bar {
            let this = Bar::of(&tally, &watched);
            bar = Some(match bar {
                Some(b) => b.meet(&this),
                None => this,
            });
        } else {
            let (verdict, reason) = judge_bar(root, &tally);
            println!("{verdict:?}: {reason}");
            holds &= verdict != Verdict::Fail;
        }
    }
    if let Some(bar) = bar {
        let text = format!(
            "# The coverage bar: per file under test, the lines the default run reaches at least\n\
             # and each function it reaches. Written by `cargo xtask coverage RUN… --write-bar`\n\
             # from default runs (`cargo xtask test`): what every one of them reached.\n{}",
            bar.to_toml()
        );
        std::fs::write(root.join(BAR), text)?;
        println!(
            "wrote {BAR}: {} files, from {} runs",
            bar.files.len(),
            runs.len()
        );
    }
    Ok(holds)
}

/// One run's tally without `drop`'s boots, written into its folder and shown; and the part
/// the bar is held to (`fixed` boots only).
fn replay_one(root: &Path, run: &Path, drop: &[String]) -> Result<(Tally, Tally)> {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(run)
        .with_context(|| format!("reading the run folder {}", run.display()))?
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.join(::coverage::MANIFEST).is_file())
        .collect();
    dirs.sort();
    let before = dirs.len();
    if before == 0 {
        anyhow::bail!(
            "{} holds no boot measured for coverage (no {} in its folders)",
            run.display(),
            ::coverage::MANIFEST
        );
    }
    dirs.retain(|d| !drop.contains(&::coverage::run::scenario_of(d)));
    if !drop.is_empty() {
        println!(
            "coverage: {} of {before} boots, without {}",
            dirs.len(),
            drop.join(", ")
        );
    }
    let tally = ::coverage::run::tally(&dirs, super::CONSOLE_LOG)?;
    write(run, root, &tally)?;
    println!("{}", table(&tally));
    let fixed: Vec<PathBuf> = dirs.into_iter().filter(|d| fixed(d)).collect();
    let held = ::coverage::run::tally(&fixed, super::CONSOLE_LOG)?;
    Ok((tally, held))
}

/// The reach a run wrote (`REACH` in its folder): file, line, scenarios.
pub type Reach = std::collections::BTreeMap<
    String,
    std::collections::BTreeMap<u32, std::collections::BTreeSet<String>>,
>;

pub fn read_reach(run: &Path) -> Result<Reach> {
    let path = run.join(REACH);
    let text = std::fs::read_to_string(&path).with_context(|| {
        format!(
            "reading {}: a run of `cargo xtask test` writes it (coverage)",
            path.display()
        )
    })?;
    Ok(serde_json::from_str(&text)?)
}

/// The reach of the newest run under `results` that wrote one, said.
pub fn latest_reach(results: &Path) -> Option<Reach> {
    let mut runs: Vec<PathBuf> = std::fs::read_dir(results)
        .ok()?
        .flatten()
        .map(|e| e.path())
        .filter(|p| !p.is_symlink() && p.join(REACH).is_file())
        .collect();
    runs.sort();
    let run = runs.pop()?;
    match read_reach(&run) {
        Ok(r) => {
            eprintln!(
                "mutate: each mutant runs against the scenarios that ran its lines in {}",
                run.display()
            );
            Some(r)
        }
        Err(e) => {
            eprintln!("mutate: {e:#}; the hand-picked scenarios instead");
            None
        }
    }
}
