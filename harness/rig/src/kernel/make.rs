//! One build directory's make: its `.config` from the fragments, the command, its log, and
//! the digest of what a build reads, which lets an unchanged build skip make.

use super::digest::{walk, Fnv};
use super::flavor::Flavor;
use super::{build_errors, kconfig};
use crate::arch::Arch;
use crate::host::process::run;
use crate::host::provision::Toolchain;
use crate::Paths;
use anyhow::{bail, Context, Result};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use vocab::line::Line;

/// The `make` invocation for one arch's build directory.
pub fn make(
    tc: &Toolchain,
    src: &Path,
    build: &Path,
    (arch, clang, line): (Arch, bool, Line),
) -> Command {
    let mut c = Command::new("make");
    c.env("LIBCLANG_PATH", line.libclang());
    c.arg("-C")
        .arg(src)
        .arg(format!("O={}", build.display()))
        .arg(format!("ARCH={}", arch.kernel_arch()))
        .args(arch.make_vars(clang, line.llvm()))
        // rustup's toolchain comes first on PATH but has no rust-src: the
        // kernel must use Debian's rustc-web everywhere.
        .args([
            "RUSTC=/usr/bin/rustc",
            "HOSTRUSTC=/usr/bin/rustc",
            "RUSTDOC=/usr/bin/rustdoc",
            "RUSTFMT=/usr/bin/rustfmt",
            "CLIPPY_DRIVER=/usr/bin/clippy-driver",
        ])
        .arg(format!("BINDGEN={}", tc.bindgen.display()))
        .arg(format!(
            "-j{}",
            std::thread::available_parallelism().map_or(2, |n| n.get())
        ))
        .env_remove("RUSTUP_TOOLCHAIN")
        .env_remove("CARGO_TARGET_DIR")
        .env_remove("RUSTFLAGS");
    c
}

/// Writes `.config` from tinyconfig plus the fragments when they changed,
/// then checks that every option they ask for is really set.
pub(super) fn configure(
    paths: &Paths,
    tc: &Toolchain,
    src: &Path,
    build: &Path,
    arch: Arch,
    flavor: &Flavor,
) -> Result<()> {
    let configs = paths.root.join("guest-kernel/configs");
    // A line may have its own fragment for an arch (mainline/arm64: without the options that
    // come with our overlay); else the arch's is shared.
    let own_arch = format!("mainline/{arch}");
    let arch_fragment = match flavor.line {
        Line::Mainline if configs.join(format!("{own_arch}.config")).exists() => own_arch,
        _ => arch.name().to_string(),
    };
    let mut names = vec![flavor.line.base_fragment().to_string(), arch_fragment];
    for extra in &flavor.extra {
        names.push(extra.clone());
        // A flavour may ask more of one arch (e.g. KASAN where Rust allows it).
        let per_arch = format!("{extra}-{arch}");
        if configs.join(format!("{per_arch}.config")).exists() {
            names.push(per_arch);
        }
    }
    let mut merged = String::new();
    let mut wanted = Vec::new();
    for n in &names {
        let file = configs.join(format!("{n}.config"));
        let text = std::fs::read_to_string(&file)
            .with_context(|| format!("reading config fragment {}", file.display()))?;
        wanted.extend(kconfig::parse(&text, &format!("{n}.config")));
        merged.push_str(&format!("# --- {n}.config\n{text}\n"));
    }
    let stamp = build.join("pci-rig-fragments");
    let dot = build.join(".config");
    if std::fs::read_to_string(&stamp).ok().as_deref() != Some(&merged) || !dot.exists() {
        eprintln!("kernel {arch}: configuring ({})", names.join(" + "));
        std::fs::create_dir_all(build)?;
        run(make(tc, src, build, (arch, flavor.clang(arch), flavor.line)).arg("tinyconfig"))?;
        std::fs::OpenOptions::new()
            .append(true)
            .open(&dot)?
            .write_all(merged.as_bytes())?;
        run(make(tc, src, build, (arch, flavor.clang(arch), flavor.line)).arg("olddefconfig"))?;
        std::fs::write(&stamp, &merged)?;
    }
    let unmet = kconfig::unmet(&wanted, &std::fs::read_to_string(&dot)?);
    if !unmet.is_empty() && flavor.src.is_some() {
        // A user's tree may lack what ours have: the scenarios that need it say so.
        eprintln!(
            "kernel {arch}: this tree's config drops options the fragments ask for (not in this tree, or their dependencies unmet); the scenarios that need them will fail:\n  {}",
            unmet.join("\n  ")
        );
    } else if !unmet.is_empty() {
        // Force a fresh configure next time, the fragments must change first.
        let _ = std::fs::remove_file(&stamp);
        bail!(
            "kernel {arch}: the merged config drops options the fragments ask for (unmet dependencies?):\n  {}",
            unmet.join("\n  ")
        );
    }
    Ok(())
}

/// Runs make for `targets`, logging everything to `log` and printing a
/// progress line now and then. A failure shows the compiler's message.
pub fn run_make(mut cmd: Command, log: &Path, what: &str) -> Result<()> {
    let (reader, writer) = std::io::pipe()?;
    cmd.stdin(Stdio::null())
        .stdout(writer.try_clone()?)
        .stderr(writer);
    let mut child = cmd.spawn().context("starting make")?;
    drop(cmd); // closes our copies of the pipe's write end
    let mut file = std::fs::File::create(log)?;
    let started = Instant::now();
    let mut last_report = Instant::now();
    let mut count = 0usize;
    let mut text = String::new();
    for line in BufReader::new(reader).lines() {
        let line = line.unwrap_or_default();
        writeln!(file, "{line}")?;
        count += 1;
        if last_report.elapsed() > Duration::from_secs(20) {
            eprintln!(
                "  {what}: {:>4}s, {count} lines, {}",
                started.elapsed().as_secs(),
                line.trim()
            );
            last_report = Instant::now();
        }
        text.push_str(&line);
        text.push('\n');
    }
    let status = child.wait()?;
    if !status.success() {
        let summary =
            build_errors::summarize(&text).unwrap_or_else(|| crate::host::process::tail(&text, 20));
        bail!("{what} failed; full log: {}\n{summary}", log.display());
    }
    Ok(())
}

/// How many objects the config compiled: the members of `vmlinux.a` (a
/// thin archive: `ar t` lists them) and the modules of `modules.order`;
/// objects of options since switched off stay in the tree but not there.
pub(super) fn objects(build: &Path) -> Result<usize> {
    let members = run(Command::new("ar").arg("t").arg(build.join("vmlinux.a")))
        .context("listing vmlinux.a")?;
    let modules = std::fs::read_to_string(build.join("modules.order")).unwrap_or_default();
    Ok(members.lines().count() + modules.lines().count())
}

/// Fails when make's `log` shows a warning in one of `ours` (paths relative
/// to `src`, one per line). A warned file then gets a new mtime: make
/// would otherwise find its objects up to date next time, print nothing,
/// and the same source would pass on a rerun.
pub(super) fn refuse_our_warnings(log: &Path, ours: &str, src: &Path, what: &str) -> Result<()> {
    let warnings: Vec<String> = build_errors::warnings(&std::fs::read_to_string(log)?)
        .into_iter()
        .filter(|w| ours.lines().any(|f| !f.is_empty() && w.contains(f)))
        .collect();
    if warnings.is_empty() {
        return Ok(());
    }
    for rel in ours.lines().filter(|f| !f.is_empty()) {
        if warnings.iter().any(|w| w.contains(rel)) {
            compile_again(&src.join(rel))?;
        }
    }
    bail!(
        "{what} built with {} warning(s) in our files; fix them:\n{}\nfull log: {}",
        warnings.len(),
        warnings.join("\n"),
        log.display()
    )
}

/// Makes `file` newer than anything built from it, so make compiles it again.
pub(super) fn compile_again(file: &Path) -> Result<()> {
    std::fs::File::options()
        .write(true)
        .open(file)
        .and_then(|f| f.set_modified(std::time::SystemTime::now()))
        .with_context(|| format!("marking {} to be compiled again", file.display()))
}

/// A digest of what a kernel build reads that can change between runs: our
/// overlay and patches (the pristine tree is keyed by its version), the
/// merged `.config`, the make command line, and the identity (size, mtime)
/// of the compilers it runs.
pub(super) fn build_inputs(
    guest: &Path,
    build: &Path,
    arch: Arch,
    clang: bool,
    cmd: &Command,
    line: Line,
) -> Result<String> {
    let mut h = Fnv::default();
    // Our overlay is read by LTS builds only.
    let overlay: &[&str] = match line {
        Line::Lts => &["rust", "patches"],
        Line::Mainline => &[],
    };
    for dir in overlay {
        let mut files = walk(&guest.join(dir))?;
        files.sort();
        for f in files {
            h.write(f.strip_prefix(guest)?.as_os_str().as_encoded_bytes());
            h.write(&std::fs::read(&f)?);
        }
    }
    h.write(&std::fs::read(build.join(".config"))?);
    h.write(format!("{cmd:?}").as_bytes());
    let mut tools = vec![
        PathBuf::from("/usr/bin/rustc"),
        PathBuf::from("/usr/bin/clippy-driver"),
    ];
    let var = |name: &str| {
        arch.make_vars(clang, line.llvm())
            .iter()
            .find_map(|v| v.strip_prefix(name).map(str::to_string))
    };
    tools.push(match (var("LLVM="), var("CROSS_COMPILE=")) {
        (Some(llvm), _) => PathBuf::from(format!("{llvm}clang")),
        (None, Some(cross)) => on_path(&format!("{cross}gcc")),
        (None, None) => on_path("gcc"),
    });
    for t in tools {
        let m = std::fs::metadata(&t);
        let id = m.map_or_else(
            |_| "missing".to_string(),
            |m| format!("{} {:?}", m.len(), m.modified().ok()),
        );
        h.write(format!("{} {id}", t.display()).as_bytes());
    }
    Ok(format!("{:016x}\n", h.0))
}

/// `name` as found on `PATH` (or itself, if it is not there).
pub(super) fn on_path(name: &str) -> PathBuf {
    std::env::var_os("PATH")
        .iter()
        .flat_map(std::env::split_paths)
        .map(|d| d.join(name))
        .find(|p| p.exists())
        .unwrap_or_else(|| PathBuf::from(name))
}
