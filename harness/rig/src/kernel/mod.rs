//! The guest kernel: Debian's pristine linux-source unpacked once into the
//! cache, our overlay (guest-kernel/rust, guest-kernel/patches) laid over it
//! file by file, and one out-of-tree build directory per arch and flavour.
//!
//! Incremental builds stay incremental because a file of the tree is only
//! rewritten when its content changes; files the overlay no longer touches
//! go back to their pristine content.

pub mod build_errors;
mod digest;
mod flavor;
pub mod kconfig;
mod layouts;
mod make;
pub mod modcheck;
pub mod module;
mod overlay;
mod replay;
mod tree;
pub mod user_tree;

use crate::host::provision::Toolchain;
use crate::Paths;
use anyhow::{Context, Result};
pub use flavor::{Flavor, Kernel};
use make::*;
use std::time::Instant;
pub use tree::*;
pub use vocab::line::{Line, MAINLINE_PACKAGE};

/// Builds (or brings up to date) the kernel and its in-tree modules in
/// `tree`, which this process holds.
pub fn build(paths: &Paths, tc: &Toolchain, tree: &Tree, flavor: &Flavor) -> Result<Kernel> {
    let (arch, clang, src, build) = (tree.arch, tree.clang, tree.src.clone(), tree.build.clone());
    if flavor.line == Line::Mainline {
        crate::host::provision::ensure_mainline_packages(arch)?;
    }
    configure(paths, tc, &src, &build, arch, flavor)?;
    let started = Instant::now();
    let log = build.join("pci-rig-make.log");
    let mut cmd = make(tc, &src, &build, (arch, clang, flavor.line));
    // Rust code is linted as it builds; the files we lay over the tree must
    // build without a warning (upstream's own are not ours to judge).
    cmd.arg("CLIPPY=1").args(arch.make_targets());
    // A no-op make still takes seconds to walk the tree; skip it when nothing
    // it reads has changed since it last succeeded.
    let stamp = build.join("pci-rig-built");
    let guest = flavor.guest(&paths.root);
    let mut inputs = build_inputs(&guest, &build, arch, clang, &cmd, flavor.line)?;
    if let Some(dir) = &flavor.src {
        inputs.push_str(&user_tree::state(dir)?);
    }
    if std::fs::read_to_string(&stamp).ok().as_deref() == Some(&inputs)
        && build.join(arch.kernel_image()).exists()
    {
        eprintln!(
            "kernel {arch}: unchanged since its last build ({})",
            build.display()
        );
        return Ok(Kernel {
            arch,
            clang,
            line: flavor.line,
            src,
            build,
        });
    }
    let _ = std::fs::remove_file(&stamp);
    run_make(cmd, &log, &format!("kernel {arch}"))?;
    // A user's tree has no overlay of ours.
    let ours = match flavor.src {
        Some(_) => String::new(),
        None => std::fs::read_to_string(src.parent().unwrap().join("overlay-manifest"))?,
    };
    refuse_our_warnings(&log, &ours, &src, &format!("kernel {arch}"))?;
    let checked = Instant::now();
    // As make runs bindgen: its libclang, and the rustfmt it formats with.
    let env = [
        (
            "LIBCLANG_PATH".to_string(),
            flavor.line.libclang().to_string(),
        ),
        ("RUSTFMT".to_string(), "/usr/bin/rustfmt".to_string()),
    ];
    let (asserted, now) = layouts::check(&build, &env)
        .with_context(|| format!("kernel {arch}: checking bindgen's layouts"))?;
    eprintln!(
        "kernel {arch}: {asserted} bindgen layouts (sizes, alignments, offsets) agree with the C compiler's ({})",
        if now {
            format!("{:.1} s", checked.elapsed().as_secs_f64())
        } else {
            "as at the last check: the same bindings, commands and headers".to_string()
        }
    );
    std::fs::write(&stamp, inputs)?;
    eprintln!(
        "kernel {arch}: up to date in {:.1} s, {} objects ({})",
        started.elapsed().as_secs_f64(),
        objects(&build)?,
        build.display()
    );
    Ok(Kernel {
        arch,
        clang,
        line: flavor.line,
        src,
        build,
    })
}

#[cfg(test)]
mod tests {
    use super::overlay::Overlay;
    use super::*;
    use crate::arch::Arch;
    use std::path::Path;
    use std::process::Command;
    use std::time::Duration;

    fn tree() -> (tempdir::Dir, Overlay) {
        let d = tempdir::Dir::new();
        let src = d.path().join("src");
        std::fs::create_dir_all(src.join("rust/kernel")).unwrap();
        std::fs::write(src.join("rust/kernel/lib.rs"), "mod a;\n").unwrap();
        std::fs::write(src.join("untouched.c"), "int x;\n").unwrap();
        let o = Overlay {
            src,
            orig: d.path().join("orig"),
            manifest: d.path().join("manifest"),
        };
        (d, o)
    }

    mod tempdir {
        pub struct Dir(std::path::PathBuf);
        impl Dir {
            pub fn new() -> Self {
                use std::sync::atomic::{AtomicU32, Ordering};
                static N: AtomicU32 = AtomicU32::new(0);
                let p = std::env::temp_dir().join(format!(
                    "pci-rig-test-{}-{}",
                    std::process::id(),
                    N.fetch_add(1, Ordering::SeqCst)
                ));
                std::fs::create_dir_all(&p).unwrap();
                Dir(p)
            }
            pub fn path(&self) -> &std::path::Path {
                &self.0
            }
        }
        impl Drop for Dir {
            fn drop(&mut self) {
                let _ = std::fs::remove_dir_all(&self.0);
            }
        }
    }

    #[test]
    fn a_warning_fails_every_build_of_the_same_source() {
        let d = tempdir::Dir::new();
        let dir = d.path();
        std::fs::write(dir.join("w.c"), "int f(void) { int unused; return 0; }\n").unwrap();
        std::fs::write(dir.join("Makefile"), "w.o: w.c\n\tcc -Wall -c w.c -o w.o\n").unwrap();
        let log = dir.join("make.log");
        let build = || {
            let mut make = Command::new("make");
            make.arg("-C").arg(dir);
            run_make(make, &log, "w").unwrap();
            refuse_our_warnings(&log, "w.c\n", dir, "w").map_err(|e| format!("{e:#}"))
        };
        let first = build().unwrap_err();
        assert!(
            first.contains("w.c:1:") && first.contains("unused"),
            "{first}"
        );
        // Make's objects are up to date now, yet the same source fails again.
        let again = build().unwrap_err();
        assert_eq!(first, again);
        std::fs::write(dir.join("w.c"), "int f(void) { return 0; }\n").unwrap();
        assert_eq!(build(), Ok(()));
        assert_eq!(build(), Ok(()), "a clean build stays clean and up to date");
    }

    #[test]
    fn warnings_in_files_not_ours_pass() {
        let d = tempdir::Dir::new();
        let log = d.path().join("make.log");
        std::fs::write(&log, "drivers/x.c:3:5: warning: unused variable 'y'\n").unwrap();
        assert!(refuse_our_warnings(&log, "rust/kernel/io.rs\n\n", d.path(), "k").is_ok());
        let e = refuse_our_warnings(&log, "drivers/x.c\n", d.path(), "k").unwrap_err();
        assert!(format!("{e:#}").contains("marking"), "x.c is absent: {e:#}");
    }

    #[test]
    fn config_hz_reads_the_number_not_the_choice() {
        let config =
            "# CONFIG_HZ_100 is not set\nCONFIG_HZ_250=y\nCONFIG_HZ=250\nCONFIG_HZ_PERIODIC=y\n";
        assert_eq!(super::flavor::config_hz(config), Some(250));
        assert_eq!(super::flavor::config_hz("CONFIG_HZ_250=y\n"), None);
    }

    #[test]
    fn fnv_1a_matches_its_reference_vectors() {
        let hash = |s: &str| {
            let mut h = digest::Fnv::default();
            h.write(s.as_bytes());
            h.0
        };
        assert_eq!(hash(""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(hash("a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(hash("foobar"), 0x8594_4171_f739_67e8);
    }

    #[test]
    fn build_inputs_change_with_the_overlay_config_and_command() {
        let d = tempdir::Dir::new();
        let paths = Paths {
            root: d.path().join("checkout"),
            cache: d.path().join("cache"),
        };
        let build = d.path().join("build");
        std::fs::create_dir_all(paths.root.join("guest-kernel/rust/kernel")).unwrap();
        std::fs::create_dir_all(&build).unwrap();
        let pci = paths.root.join("guest-kernel/rust/kernel/pci.rs");
        std::fs::write(&pci, "// v1\n").unwrap();
        std::fs::write(build.join(".config"), "CONFIG_PCI=y\n").unwrap();
        let guest = paths.root.join("guest-kernel");
        let inputs_of = |line| {
            build_inputs(&guest, &build, Arch::X86_64, false, &make_with("V=0"), line).unwrap()
        };
        let inputs = || inputs_of(Line::Lts);
        let mainline = inputs_of(Line::Mainline);
        let first = inputs();
        assert_eq!(inputs(), first, "nothing changed");
        std::fs::write(&pci, "// v2\n").unwrap();
        let second = inputs();
        assert_ne!(second, first, "an overlay file changed");
        assert_eq!(
            inputs_of(Line::Mainline),
            mainline,
            "mainline reads no overlay"
        );
        std::fs::write(build.join(".config"), "CONFIG_PCI=n\n").unwrap();
        let third = inputs();
        assert_ne!(third, second, ".config changed");
        let other = build_inputs(
            &guest,
            &build,
            Arch::X86_64,
            false,
            &make_with("W=1"),
            Line::Lts,
        )
        .unwrap();
        assert_ne!(other, third, "the command line changed");
    }

    fn make_with(arg: &str) -> Command {
        let mut c = Command::new("make");
        c.arg("CLIPPY=1").arg(arg);
        c
    }

    #[test]
    fn overlay_adds_patches_and_restores_files() {
        let (d, o) = tree();
        let guest = d.path().join("guest");
        std::fs::create_dir_all(guest.join("rust/kernel")).unwrap();
        std::fs::create_dir_all(guest.join("patches")).unwrap();
        std::fs::write(guest.join("rust/kernel/pci.rs"), "// pci\n").unwrap();
        std::fs::write(
            guest.join("patches/0001-lib.patch"),
            "--- a/rust/kernel/lib.rs\n+++ b/rust/kernel/lib.rs\n@@ -1 +1,2 @@\n mod a;\n+mod pci;\n",
        )
        .unwrap();
        o.apply(&guest, true).unwrap();
        let read = |p: &str| std::fs::read_to_string(o.src.join(p)).ok();
        assert_eq!(read("rust/kernel/pci.rs").as_deref(), Some("// pci\n"));
        assert_eq!(
            read("rust/kernel/lib.rs").as_deref(),
            Some("mod a;\nmod pci;\n")
        );

        // Applying again changes nothing, so mtimes survive.
        let before = std::fs::metadata(o.src.join("rust/kernel/lib.rs"))
            .unwrap()
            .modified()
            .unwrap();
        std::thread::sleep(Duration::from_millis(20));
        o.apply(&guest, true).unwrap();
        let after = std::fs::metadata(o.src.join("rust/kernel/lib.rs"))
            .unwrap()
            .modified()
            .unwrap();
        assert_eq!(before, after);

        // Dropping the overlay restores the pristine tree.
        std::fs::remove_dir_all(&guest).unwrap();
        o.apply(&guest, true).unwrap();
        assert_eq!(read("rust/kernel/pci.rs"), None);
        assert_eq!(read("rust/kernel/lib.rs").as_deref(), Some("mod a;\n"));
        assert_eq!(read("untouched.c").as_deref(), Some("int x;\n"));
    }

    /// Writes `guest`'s patch `name`: after lib.rs's line `after`, `added`.
    fn lib_patch(guest: &Path, name: &str, after: &str, added: &str) {
        std::fs::create_dir_all(guest.join("patches")).unwrap();
        std::fs::write(
            guest.join("patches").join(name),
            format!(
                "--- a/rust/kernel/lib.rs\n+++ b/rust/kernel/lib.rs\n@@ -1 +1,2 @@\n {after}\n+{added}\n"
            ),
        )
        .unwrap();
    }

    #[test]
    fn a_patch_that_does_not_apply_names_itself() {
        let (d, o) = tree();
        let guest = d.path().join("guest");
        lib_patch(&guest, "0001-bad.patch", "mod zzz;", "mod pci;");
        let err = format!("{:#}", o.apply(&guest, true).unwrap_err());
        assert!(err.contains("0001-bad.patch does not apply"), "{err}");
    }

    #[test]
    fn a_patch_runs_once_per_content_it_applies_to() {
        let (d, o) = tree();
        let guest = d.path().join("guest");
        lib_patch(&guest, "0001-lib.patch", "mod a;", "mod pci;");
        o.apply(&guest, true).unwrap();
        let memos = || std::fs::read_dir(o.patch_memo()).unwrap().count();
        assert_eq!(memos(), 1);
        // What the memo holds is what the next check lays: doctor it and
        // the tree follows (no `patch` ran).
        let kept = std::fs::read_dir(o.patch_memo())
            .unwrap()
            .next()
            .unwrap()
            .unwrap()
            .path()
            .join("rust/kernel/lib.rs");
        std::fs::write(&kept, "mod a;\nmod doctored;\n").unwrap();
        o.apply(&guest, true).unwrap();
        let lib = || std::fs::read_to_string(o.src.join("rust/kernel/lib.rs")).unwrap();
        assert_eq!(lib(), "mod a;\nmod doctored;\n");
        // A changed patch is a new input: it runs.
        lib_patch(&guest, "0001-lib.patch", "mod a;", "mod pcie;");
        o.apply(&guest, true).unwrap();
        assert_eq!(lib(), "mod a;\nmod pcie;\n");
        assert_eq!(memos(), 2);
    }
}
