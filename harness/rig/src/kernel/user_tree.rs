//! A kernel tree of the user's (`cargo xtask test --kernel-src DIR`): built as it is, with the
//! mainline line's config fragments and toolchain, out of tree into the cache. The tree is
//! never written to. Its build directories are keyed by its path, so a rebuild after an edit
//! is make's incremental one; whether make must run at all is keyed by its state (a git
//! checkout's commit and a digest of its uncommitted changes; an unpacked tree's names, sizes
//! and mtimes).

use super::digest::{walk, Fnv};
use crate::Paths;
use anyhow::{bail, Context, Result};
use std::path::{Path, PathBuf};
use std::process::Command;

/// Where the build directories of the tree at `dir` live: `linux/tree-NAME-HASH` in the
/// cache, by its path.
pub fn base(paths: &Paths, dir: &Path) -> PathBuf {
    let mut h = Fnv::default();
    h.write(dir.as_os_str().as_encoded_bytes());
    let name = dir
        .file_name()
        .map_or("tree".into(), |n| n.to_string_lossy().into_owned());
    paths
        .cache
        .join("linux")
        .join(format!("tree-{name}-{:08x}", h.0 as u32))
}

/// Checks that `dir` is a kernel tree Kbuild can build out of tree: its top Makefile names a
/// version, and it was never configured in place (Kbuild refuses O= over such a tree).
pub fn check(dir: &Path) -> Result<String> {
    let makefile = std::fs::read_to_string(dir.join("Makefile")).with_context(|| {
        format!(
            "--kernel-src {}: no Makefile there; give the top of a Linux source tree",
            dir.display()
        )
    })?;
    let field = |name: &str| {
        makefile.lines().find_map(|l| {
            let (k, v) = l.split_once('=')?;
            (k.trim() == name).then(|| v.trim().to_string())
        })
    };
    let (Some(version), Some(patchlevel)) = (field("VERSION"), field("PATCHLEVEL")) else {
        bail!(
            "--kernel-src {}: its Makefile names no VERSION and PATCHLEVEL: not a Linux source tree",
            dir.display()
        );
    };
    for built in [".config", "include/config/auto.conf"] {
        if dir.join(built).exists() {
            bail!(
                "--kernel-src {}: it holds {built}, so it was configured or built in place, and Kbuild refuses to build it out of tree; run `make mrproper` there (or give a clean checkout)",
                dir.display()
            );
        }
    }
    Ok(format!(
        "{version}.{patchlevel}{}",
        field("SUBLEVEL").map_or(String::new(), |s| format!(".{s}"))
    ))
}

/// What the tree has that the rig's scenarios need, by its files.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Has {
    /// Rust support (`rust/kernel/lib.rs`).
    pub rust: bool,
    /// Rust PCI abstractions (`rust/kernel/pci.rs` or `rust/kernel/pci/`).
    pub rust_pci: bool,
    /// Upstream's Rust PCI sample, `samples/rust/rust_driver_pci.rs`.
    pub pci_sample: bool,
    /// KUnit's parser, `tools/testing/kunit/kunit.py`.
    pub kunit_py: bool,
}

pub fn has(dir: &Path) -> Has {
    let rust = dir.join("rust/kernel/lib.rs").exists();
    Has {
        rust,
        rust_pci: rust
            && (dir.join("rust/kernel/pci.rs").exists() || dir.join("rust/kernel/pci").is_dir()),
        pci_sample: dir.join("samples/rust/rust_driver_pci.rs").exists(),
        kunit_py: dir.join("tools/testing/kunit/kunit.py").exists(),
    }
}

/// A digest of the tree's state: what make would read that can change between runs.
pub fn state(dir: &Path) -> Result<String> {
    let mut h = Fnv::default();
    let git = |args: &[&str]| -> Option<Vec<u8>> {
        let out = Command::new("git")
            .arg("-C")
            .arg(dir)
            .args(args)
            .output()
            .ok()?;
        out.status.success().then_some(out.stdout)
    };
    // Only the tree's own repository counts, not one it was unpacked into.
    let own = git(&["rev-parse", "--show-toplevel"]).is_some_and(|top| {
        Path::new(String::from_utf8_lossy(&top).trim())
            .canonicalize()
            .ok()
            == dir.canonicalize().ok()
    });
    match git(&["rev-parse", "HEAD"]).filter(|_| own) {
        // A git checkout: its commit, its uncommitted changes, and its untracked files' names
        // and contents.
        Some(commit) => {
            h.write(&commit);
            h.write(&git(&["diff", "HEAD", "--binary"]).context("git diff in the kernel tree")?);
            let untracked = git(&["ls-files", "--others", "--exclude-standard", "-z"])
                .context("git ls-files in the kernel tree")?;
            for name in untracked.split(|&b| b == 0).filter(|n| !n.is_empty()) {
                h.write(name);
                h.write(
                    &std::fs::read(dir.join(String::from_utf8_lossy(name).as_ref()))
                        .unwrap_or_default(),
                );
            }
            Ok(format!(
                "git {}{:016x}",
                String::from_utf8_lossy(&commit).trim(),
                h.0
            ))
        }
        // An unpacked tree: every file's name, size and mtime.
        None => {
            let mut files = walk(dir)?;
            files.sort();
            for f in files {
                let m = std::fs::metadata(&f)?;
                h.write(f.as_os_str().as_encoded_bytes());
                h.write(&m.len().to_le_bytes());
                let mtime = m.modified()?.duration_since(std::time::UNIX_EPOCH)?;
                h.write(&mtime.as_nanos().to_le_bytes());
            }
            Ok(format!("files {:016x}", h.0))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("pci-rig-tree-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn a_tree_is_checked_before_any_build() {
        let d = scratch("check");
        let e = check(&d).unwrap_err().to_string();
        assert!(e.contains("no Makefile there"), "{e}");
        std::fs::write(d.join("Makefile"), "all:\n").unwrap();
        let e = check(&d).unwrap_err().to_string();
        assert!(e.contains("names no VERSION"), "{e}");
        std::fs::write(
            d.join("Makefile"),
            "VERSION = 7\nPATCHLEVEL = 3\nSUBLEVEL = 4\n",
        )
        .unwrap();
        assert_eq!(check(&d).unwrap(), "7.3.4");
        std::fs::write(d.join(".config"), "").unwrap();
        let e = check(&d).unwrap_err().to_string();
        assert!(e.contains("run `make mrproper` there"), "{e}");
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn an_unpacked_trees_state_changes_with_a_file() {
        let d = scratch("state");
        std::fs::write(d.join("a.c"), "int a;\n").unwrap();
        let before = state(&d).unwrap();
        assert!(before.starts_with("files "), "{before}");
        assert_eq!(state(&d).unwrap(), before);
        std::fs::write(d.join("a.c"), "int a, b;\n").unwrap();
        assert_ne!(state(&d).unwrap(), before);
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn what_a_tree_has_is_read_from_its_files() {
        let d = scratch("has");
        assert!(!has(&d).rust);
        std::fs::create_dir_all(d.join("rust/kernel/pci")).unwrap();
        std::fs::write(d.join("rust/kernel/lib.rs"), "").unwrap();
        let h = has(&d);
        assert!(
            h.rust && h.rust_pci && !h.pci_sample && !h.kunit_py,
            "{h:?}"
        );
        std::fs::remove_dir_all(&d).unwrap();
    }
}
