//! Out-of-tree modules (our driver, the bench, platform and compile-fail
//! modules), each built by Kbuild in its own copy under the kernel's build
//! directory.

use super::{build_errors, make, run_make, walk, Kernel};
use crate::host::provision::Toolchain;
use anyhow::{bail, Context, Result};
use std::path::{Path, PathBuf};

/// Builds the out-of-tree module in `dir` (a Kbuild file and its sources)
/// against `kernel`. Kbuild writes objects next to the sources, so it builds
/// in a copy under the build directory, refreshed file by file (unchanged
/// files keep their mtimes and are not rebuilt). `shared` files, kept in
/// another module's directory, are copied in beside the sources (the bench
/// module's `regs.rs` is the driver's). Returns the `.ko`.
pub fn build_external(
    tc: &Toolchain,
    kernel: &Kernel,
    dir: &Path,
    name: &str,
    shared: &[PathBuf],
) -> Result<PathBuf> {
    build_module_copy(tc, kernel, dir, shared, name, name, &[])
}

/// Builds the out-of-tree module `name` from `dir` in a copy called `label`
/// (one per variant, so each keeps its objects and `pci-rig-make.log`),
/// with extra make variables. Returns the `.ko`.
pub fn build_module_copy(
    tc: &Toolchain,
    kernel: &Kernel,
    dir: &Path,
    shared: &[PathBuf],
    label: &str,
    name: &str,
    vars: &[&str],
) -> Result<PathBuf> {
    let copy = kernel.build.join("pci-rig-external").join(label);
    std::fs::create_dir_all(&copy)?;
    let mut files = Vec::new();
    for file in walk(dir)? {
        files.push((copy.join(file.strip_prefix(dir)?), file));
    }
    for file in shared {
        let name = file
            .file_name()
            .context("a shared module file has no name")?;
        files.push((copy.join(name), file.clone()));
    }
    for (to, file) in files {
        let bytes = std::fs::read(&file).with_context(|| format!("reading {}", file.display()))?;
        if std::fs::read(&to).ok().as_ref() != Some(&bytes) {
            std::fs::create_dir_all(to.parent().unwrap())?;
            std::fs::write(&to, bytes)?;
        }
    }
    // Make reuses objects only from a build that ended clean: one that
    // warned, failed or was cut short may have left objects whose warnings
    // make would not print again.
    let clean = copy.join("pci-rig-clean");
    if !clean.exists() {
        discard_objects(&copy)?;
    }
    let _ = std::fs::remove_file(&clean);
    let mut cmd = make(tc, &kernel.src, &kernel.build, kernel.arch);
    // Our modules are linted as they build, and must build without a warning.
    cmd.arg(format!("M={}", copy.display()))
        .arg("CLIPPY=1")
        .args(vars)
        .arg("modules");
    let log = copy.join("pci-rig-make.log");
    let what = format!("module {label} ({})", kernel.arch);
    run_make(cmd, &log, &what)?;
    // Named by the file the user edits, not by its copy.
    let warnings: Vec<String> = build_errors::warnings(&std::fs::read_to_string(&log)?)
        .iter()
        .map(|w| {
            let w = shared.iter().fold(w.clone(), |w, f| {
                let name = f.file_name().unwrap_or_default();
                w.replace(&*copy.join(name).to_string_lossy(), &f.to_string_lossy())
            });
            w.replace(&*copy.to_string_lossy(), &dir.to_string_lossy())
        })
        .collect();
    if !warnings.is_empty() {
        // A refused build leaves no module.
        discard_objects(&copy)?;
        bail!(
            "{what} built with {} warning(s); fix them:\n{}\nfull log: {}",
            warnings.len(),
            warnings.join("\n"),
            log.display()
        );
    }
    std::fs::write(&clean, "")?;
    Ok(copy.join(format!("{name}.ko")))
}

/// Removes the objects and modules a build left in `dir`.
fn discard_objects(dir: &Path) -> Result<()> {
    for file in walk(dir)? {
        if file.extension().is_some_and(|e| e == "o" || e == "ko") {
            std::fs::remove_file(&file)?;
        }
    }
    Ok(())
}
