//! The source tree of a kernel line, unpacked once into the cache, and the build trees over
//! it, each held by this process (the build directory exclusively, the source tree shared).

use super::flavor::{Flavor, Kernel};
use super::overlay::Overlay;
use crate::arch::Arch;
use crate::host::process::run;
use crate::Paths;
use anyhow::{Context, Result};
use std::path::{Path, PathBuf};
use std::process::Command;
use vocab::line::Line;

/// The source tarball and the package version that keys it. The LTS source is a host
/// package (provisioned with the rest); mainline's is fetched into the cache once, from
/// trixie-backports through a private apt state.
pub(super) fn source(line: Line, paths: &Paths) -> Result<(PathBuf, String)> {
    let tarball = |root: &Path| root.join(format!("usr/src/{}.tar.xz", line.package()));
    let key = |v: &str| v.trim().replace(['~', ':', '+'], "_");
    match line {
        Line::Lts => {
            let v = run(Command::new("dpkg-query").args(["-W", "-f=${Version}", line.package()]))
                .with_context(|| format!("asking dpkg for the {} version", line.package()))?;
            Ok((tarball(Path::new("/")), key(&v)))
        }
        Line::Mainline => {
            let dir = paths.cache.join("apt/linux-mainline");
            let (root, version) = (dir.join("root"), dir.join("version"));
            if let (true, Ok(v)) = (tarball(&root).exists(), std::fs::read_to_string(&version)) {
                return Ok((tarball(&root), key(&v)));
            }
            eprintln!(
                "kernel: fetching {} from trixie-backports (about 170 MB)",
                line.package()
            );
            let apt = crate::host::apt::PrivateApt::new(&dir, "amd64", &["trixie-backports"])?;
            let deb = apt.download_one(line.package())?;
            let v = run(Command::new("dpkg-deb").arg("-f").arg(&deb).arg("Version"))?;
            let _ = std::fs::remove_dir_all(&root);
            crate::host::apt::extract(&deb, &root)?;
            std::fs::remove_file(&deb)?;
            std::fs::write(&version, v.trim())?;
            Ok((tarball(&root), key(&v)))
        }
    }
}

/// One build tree (an arch and flavour) held for this process: the build
/// directory exclusively, the source tree it reads shared. Arches build at
/// once; the overlay is only rewritten when no build reads the tree.
pub struct Tree {
    pub arch: Arch,
    pub clang: bool,
    pub src: PathBuf,
    pub build: PathBuf,
    _source: std::fs::File,
    _build: std::fs::File,
}

/// Unpacks the pristine source tree if it is not yet (the first minute of a
/// cold start, which provisioning overlaps with building bindgen).
pub fn unpack_source(paths: &Paths, line: Line) -> Result<()> {
    let (tarball, version) = source(line, paths)?;
    let base = tree_base(paths, &version);
    // Unpacked once, marked last: no lock needed to see it (a build would
    // hold the tree shared, and this must not wait for one).
    if base.join("src/.unpacked").exists() {
        return Ok(());
    }
    std::fs::create_dir_all(&base)?;
    let _exclusive = lock_file(&base.join("src.lock"), true, "the kernel source tree")?;
    unpack(&base, &base.join("src"), &tarball, line.package())
}

/// Where the source tree, its pristine copies and the build trees live.
pub(super) fn tree_base(paths: &Paths, version: &str) -> PathBuf {
    // `linux/`, not the `kernel/` of revisions before per-tree locks: a
    // bench baseline of such a revision keeps its own tree and builds in
    // the same cache, and neither rewrites the other's overlay or config.
    paths.cache.join("linux").join(version)
}

/// Takes `arch`'s build tree for `flavor`, the source tree unpacked and our
/// overlay applied first. Waits (saying so) while another build holds it.
pub fn lock(paths: &Paths, arch: Arch, flavor: &Flavor) -> Result<Tree> {
    if let Some(dir) = &flavor.src {
        return lock_user_tree(paths, arch, flavor, dir);
    }
    let (tarball, version) = source(flavor.line, paths)?;
    let base = tree_base(paths, &version);
    std::fs::create_dir_all(&base)?;
    let src = base.join("src");
    let overlay = Overlay {
        src: src.clone(),
        orig: base.join("orig"),
        manifest: base.join("overlay-manifest"),
    };
    // Our overlay goes over the LTS tree only: mainline is built as upstream has it.
    let guest = match flavor.line {
        Line::Lts => flavor.guest(&paths.root),
        Line::Mainline => paths.root.join("guest-kernel/mainline-overlay"),
    };
    // Shared while the tree is as we want it: other arches build from it.
    let as_wanted = || -> Result<Option<std::fs::File>> {
        let shared = lock_file(&base.join("src.lock"), false, "the kernel source tree")?;
        let ready = src.join(".unpacked").exists() && overlay.apply(&guest, false)? == 0;
        Ok(ready.then_some(shared))
    };
    let source = loop {
        if let Some(shared) = as_wanted()? {
            break shared;
        }
        // One writer at a time, and it looks again first: the tree may be
        // as wanted by now, laid by the writer before it (whose builds then
        // hold it shared, and an exclusive lock would wait them out).
        let _writer = lock_file(
            &base.join("src.writer.lock"),
            true,
            "the kernel source tree",
        )?;
        if let Some(shared) = as_wanted()? {
            break shared;
        }
        let _exclusive = lock_file(&base.join("src.lock"), true, "the kernel source tree")?;
        unpack(&base, &src, &tarball, flavor.line.package())?;
        overlay.apply(&guest, true)?;
    };
    let build = base.join("build").join(format!("{arch}-{}", flavor.name()));
    std::fs::create_dir_all(&build)?;
    let build_lock = lock_file(
        &build.with_extension("lock"),
        true,
        &format!("the {arch} build tree"),
    )?;
    Ok(Tree {
        arch,
        clang: flavor.clang(arch),
        src,
        build,
        _source: source,
        _build: build_lock,
    })
}

/// Takes `arch`'s build tree of the user's tree at `dir` (`--kernel-src`), which is read, never
/// written: no overlay, no unpacking; its locks live beside its build directories.
fn lock_user_tree(paths: &Paths, arch: Arch, flavor: &Flavor, dir: &Path) -> Result<Tree> {
    let base = super::user_tree::base(paths, dir);
    std::fs::create_dir_all(&base)?;
    let source = lock_file(&base.join("src.lock"), false, "the kernel source tree")?;
    let build = base.join("build").join(format!("{arch}-{}", flavor.name()));
    std::fs::create_dir_all(&build)?;
    let build_lock = lock_file(
        &build.with_extension("lock"),
        true,
        &format!("the {arch} build tree"),
    )?;
    Ok(Tree {
        arch,
        clang: flavor.clang(arch),
        src: dir.to_path_buf(),
        build,
        _source: source,
        _build: build_lock,
    })
}

/// Takes the build tree of `kernel` again (e.g. for modules built later
/// against it), the source tree shared, as it is.
pub fn relock(kernel: &Kernel) -> Result<Tree> {
    // `<base>/build/<arch>-<flavour>`: the locks are the base's.
    let base = kernel
        .build
        .parent()
        .and_then(Path::parent)
        .context("the kernel build tree has no base")?;
    let source = lock_file(&base.join("src.lock"), false, "the kernel source tree")?;
    let build = lock_file(
        &kernel.build.with_extension("lock"),
        true,
        &format!("the {} build tree", kernel.arch),
    )?;
    Ok(Tree {
        arch: kernel.arch,
        clang: kernel.clang,
        src: kernel.src.clone(),
        build: kernel.build.clone(),
        _source: source,
        _build: build,
    })
}

/// Opens `path` and locks it (`exclusive` or shared), saying what it waits for.
pub(super) fn lock_file(path: &Path, exclusive: bool, what: &str) -> Result<std::fs::File> {
    let f = std::fs::File::create(path).with_context(|| format!("creating {}", path.display()))?;
    let got = if exclusive {
        f.try_lock()
    } else {
        f.try_lock_shared()
    };
    if got.is_err() {
        eprintln!("kernel: waiting for {what} (another build holds it)");
        if exclusive {
            f.lock()?;
        } else {
            f.lock_shared()?;
        }
    }
    Ok(f)
}

/// Unpacks the pristine `tarball` (whose top folder is `top`) into `src`, once.
pub(super) fn unpack(base: &Path, src: &Path, tarball: &Path, top: &str) -> Result<()> {
    if src.join(".unpacked").exists() {
        return Ok(());
    }
    eprintln!(
        "kernel: unpacking {} into {} (about a minute)",
        tarball.display(),
        src.display()
    );
    let tmp = base.join("unpack.tmp");
    let _ = std::fs::remove_dir_all(&tmp);
    let _ = std::fs::remove_dir_all(src);
    std::fs::create_dir_all(&tmp)?;
    run(Command::new("tar")
        .arg("-xf")
        .arg(tarball)
        .arg("-C")
        .arg(&tmp))?;
    std::fs::rename(tmp.join(top), src)?;
    std::fs::remove_dir_all(&tmp)?;
    std::fs::write(src.join(".unpacked"), "")?;
    Ok(())
}
