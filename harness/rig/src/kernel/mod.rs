//! The guest kernel: Debian's pristine linux-source unpacked once into the
//! cache, our overlay (guest-kernel/rust, guest-kernel/patches) laid over it
//! file by file, and one out-of-tree build directory per arch and flavour.
//!
//! Incremental builds stay incremental because a file of the tree is only
//! rewritten when its content changes; files the overlay no longer touches
//! go back to their pristine content.

pub mod build_errors;
pub mod kconfig;
mod layouts;
pub mod modcheck;
pub mod module;
mod replay;

use crate::arch::Arch;
use crate::host::process::run;
use crate::host::provision::Toolchain;
use crate::Paths;
use anyhow::{bail, Context, Result};
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
pub use vocab::line::{Line, MAINLINE_PACKAGE};

/// The source tarball and the package version that keys it. The LTS source is a host
/// package (provisioned with the rest); mainline's is fetched into the cache once, from
/// trixie-backports through a private apt state.
fn source(line: Line, paths: &Paths) -> Result<(PathBuf, String)> {
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

/// Which config fragments go over tinyconfig besides base and the arch's.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Flavor {
    /// Names under guest-kernel/configs/ without `.config`, e.g. `debug`.
    pub extra: Vec<String>,
    /// The kernel line.
    pub line: Line,
}

impl Flavor {
    /// Whether `arch` is built with clang (LLVM=): riscv64 always (Rust on
    /// 6.12 needs it there); arm64 in the debug flavour, because Linux 6.12
    /// allows KASAN beside Rust only in clang-built kernels.
    pub fn clang(&self, arch: Arch) -> bool {
        match arch {
            Arch::Riscv64 => true,
            Arch::Arm64 => self.extra.iter().any(|e| e == "debug"),
            Arch::X86_64 => false,
        }
    }

    /// How many times its timeouts a scenario gets on this flavour: the
    /// debug kernels (KASAN, lockdep, kmemleak's scan at the end) boot and
    /// run several times slower under TCG (riscv64's surprise took 180 s).
    pub fn slowdown(&self) -> u32 {
        if self.extra.iter().any(|e| e == "debug") {
            3
        } else {
            1
        }
    }

    pub fn name(&self) -> String {
        if self.extra.is_empty() {
            "base".into()
        } else {
            self.extra.join("+")
        }
    }
}

/// A finished kernel build.
#[derive(Clone, Debug)]
pub struct Kernel {
    pub arch: Arch,
    /// Built with clang ([`Flavor::clang`]): every make on it must say so.
    pub clang: bool,
    pub line: Line,
    pub src: PathBuf,
    pub build: PathBuf,
}

impl Kernel {
    pub fn image(&self) -> PathBuf {
        self.build.join(self.arch.kernel_image())
    }

    /// A module built in-tree, by its path relative to the build dir.
    pub fn module(&self, rel: &str) -> PathBuf {
        self.build.join(rel)
    }

    /// Its timer ticks per second (`CONFIG_HZ` of its .config), if the config says.
    pub fn hz(&self) -> Option<u32> {
        config_hz(&std::fs::read_to_string(self.build.join(".config")).ok()?)
    }
}

/// `CONFIG_HZ=N` of a .config.
fn config_hz(config: &str) -> Option<u32> {
    config
        .lines()
        .find_map(|l| l.strip_prefix("CONFIG_HZ=")?.trim().parse().ok())
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
fn tree_base(paths: &Paths, version: &str) -> PathBuf {
    // `linux/`, not the `kernel/` of revisions before per-tree locks: a
    // bench baseline of such a revision keeps its own tree and builds in
    // the same cache, and neither rewrites the other's overlay or config.
    paths.cache.join("linux").join(version)
}

/// Takes `arch`'s build tree for `flavor`, the source tree unpacked and our
/// overlay applied first. Waits (saying so) while another build holds it.
pub fn lock(paths: &Paths, arch: Arch, flavor: &Flavor) -> Result<Tree> {
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
        Line::Lts => paths.root.join("guest-kernel"),
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

/// Takes the build tree of `kernel` again (e.g. for modules built later
/// against it), the source tree shared, as it is.
pub fn relock(kernel: &Kernel) -> Result<Tree> {
    let base = kernel
        .src
        .parent()
        .context("the kernel source has no parent")?;
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
fn lock_file(path: &Path, exclusive: bool, what: &str) -> Result<std::fs::File> {
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
fn unpack(base: &Path, src: &Path, tarball: &Path, top: &str) -> Result<()> {
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

/// Lays guest-kernel/ over the tree, remembering pristine contents.
struct Overlay {
    src: PathBuf,
    /// Pristine copies of every file we ever changed; `X.absent` marks a
    /// file that did not exist in the pristine tree.
    orig: PathBuf,
    manifest: PathBuf,
}

impl Overlay {
    fn pristine(&self, rel: &str) -> Result<Option<Vec<u8>>> {
        let saved = self.orig.join(rel);
        if saved.exists() {
            return Ok(Some(std::fs::read(saved)?));
        }
        if self.orig.join(format!("{rel}.absent")).exists() {
            return Ok(None);
        }
        Ok(std::fs::read(self.src.join(rel)).ok())
    }

    fn save_pristine(&self, rel: &str) -> Result<()> {
        let saved = self.orig.join(rel);
        let absent = self.orig.join(format!("{rel}.absent"));
        if saved.exists() || absent.exists() {
            return Ok(());
        }
        std::fs::create_dir_all(saved.parent().unwrap())?;
        match std::fs::read(self.src.join(rel)) {
            Ok(bytes) => std::fs::write(saved, bytes)?,
            Err(_) => std::fs::write(absent, "")?,
        }
        Ok(())
    }

    /// Lays the overlay over the tree when `write`; returns how many files
    /// differ from it (were rewritten, when `write`).
    fn apply(&self, guest: &Path, write: bool) -> Result<usize> {
        let mut want: BTreeMap<String, Option<Vec<u8>>> = BTreeMap::new();
        // Whole files laid over rust/.
        let rust = guest.join("rust");
        for file in walk(&rust)? {
            let rel = format!("rust/{}", file.strip_prefix(&rust)?.display());
            want.insert(rel, Some(std::fs::read(&file)?));
        }
        // Patches, in name order, each over the result of the ones before.
        let mut patches: Vec<PathBuf> = walk(&guest.join("patches"))?
            .into_iter()
            .filter(|p| p.extension().is_some_and(|e| e == "patch"))
            .collect();
        patches.sort();
        for patch in &patches {
            self.apply_patch(patch, &mut want)?;
        }
        // Files touched last time but not now go back to pristine.
        let old = std::fs::read_to_string(&self.manifest).unwrap_or_default();
        for rel in old.lines().filter(|l| !l.is_empty()) {
            if !want.contains_key(rel) {
                want.insert(rel.to_string(), self.pristine(rel)?);
            }
        }
        let mut changed = 0;
        for (rel, content) in &want {
            let path = self.src.join(rel);
            let current = std::fs::read(&path).ok();
            if current != *content {
                changed += 1;
                if !write {
                    continue;
                }
                self.save_pristine(rel)?;
                match content {
                    Some(bytes) => {
                        std::fs::create_dir_all(path.parent().unwrap())?;
                        std::fs::write(&path, bytes)?;
                    }
                    None => std::fs::remove_file(&path)?,
                }
            }
        }
        if !write {
            return Ok(changed);
        }
        let touched: Vec<&str> = want
            .iter()
            .filter(|(rel, content)| self.pristine(rel).ok().as_ref() != Some(content))
            .map(|(rel, _)| rel.as_str())
            .collect();
        std::fs::write(&self.manifest, touched.join("\n"))?;
        if changed > 0 {
            eprintln!("kernel: overlay changed {changed} file(s) of the tree");
        }
        Ok(changed)
    }

    /// Applies one patch to the files it names, starting from their current
    /// wanted (or pristine) content, in a scratch tree. The tree it leaves is
    /// kept under the hash of those inputs: the same patch over the same
    /// content is not run again (every build checks the overlay; running
    /// the eight patches took 0.1 s of the edit loop's 2.5).
    fn apply_patch(
        &self,
        patch: &Path,
        want: &mut BTreeMap<String, Option<Vec<u8>>>,
    ) -> Result<()> {
        let text = std::fs::read_to_string(patch)?;
        let files: Vec<String> = text
            .lines()
            .filter_map(|l| l.strip_prefix("+++ b/"))
            .map(|l| l.split('\t').next().unwrap_or(l).to_string())
            .collect();
        let mut inputs = Vec::with_capacity(files.len());
        let mut h = Fnv::default();
        h.field(text.as_bytes());
        for rel in &files {
            let content = match want.get(rel) {
                Some(c) => c.clone(),
                None => self.pristine(rel)?,
            };
            h.field(rel.as_bytes());
            match &content {
                Some(bytes) => h.field(bytes),
                None => h.write(b"absent"),
            }
            inputs.push(content);
        }
        let memo = self.patch_memo().join(format!("{:016x}", h.0));
        if !memo.is_dir() {
            // Several builds check the overlay at once: a scratch tree each.
            static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
            let scratch = self.orig.with_file_name(format!(
                "patch.tmp-{}-{}",
                std::process::id(),
                N.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
            ));
            let _ = std::fs::remove_dir_all(&scratch);
            for (rel, content) in files.iter().zip(inputs) {
                if let Some(bytes) = content {
                    let p = scratch.join(rel);
                    std::fs::create_dir_all(p.parent().unwrap())?;
                    std::fs::write(p, bytes)?;
                }
            }
            std::fs::create_dir_all(&scratch)?;
            run(Command::new("patch")
                .args([
                    "-p1",
                    "--forward",
                    "--batch",
                    "--fuzz=0",
                    "--no-backup-if-mismatch",
                    "-d",
                ])
                .arg(&scratch)
                .arg("-i")
                .arg(patch))
            .with_context(|| format!("{} does not apply to linux 6.12", patch.display()))?;
            std::fs::create_dir_all(self.patch_memo())?;
            // Whole or not at all; another build may have kept the same.
            if std::fs::rename(&scratch, &memo).is_err() {
                std::fs::remove_dir_all(&scratch)?;
            }
        }
        for rel in files {
            want.insert(rel.clone(), std::fs::read(memo.join(&rel)).ok());
        }
        Ok(())
    }

    /// Where [`Overlay::apply_patch`] keeps what each patch made.
    fn patch_memo(&self) -> PathBuf {
        self.orig.with_file_name("patch-memo")
    }
}

fn walk(dir: &Path) -> Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Ok(out);
    };
    for e in entries {
        let p = e?.path();
        if p.is_dir() {
            out.extend(walk(&p)?);
        } else if p.file_name().is_none_or(|n| n != ".gitkeep") {
            out.push(p);
        }
    }
    Ok(out)
}

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
fn configure(
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
    if !unmet.is_empty() {
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
    let inputs = build_inputs(paths, &build, arch, clang, &cmd, flavor.line)?;
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
    let ours = std::fs::read_to_string(src.parent().unwrap().join("overlay-manifest"))?;
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

/// How many objects the config compiled: the members of `vmlinux.a` (a
/// thin archive: `ar t` lists them) and the modules of `modules.order`;
/// objects of options since switched off stay in the tree but not there.
fn objects(build: &Path) -> Result<usize> {
    let members = run(Command::new("ar").arg("t").arg(build.join("vmlinux.a")))
        .context("listing vmlinux.a")?;
    let modules = std::fs::read_to_string(build.join("modules.order")).unwrap_or_default();
    Ok(members.lines().count() + modules.lines().count())
}

/// Fails when make's `log` shows a warning in one of `ours` (paths relative
/// to `src`, one per line). A warned file then gets a new mtime: make
/// would otherwise find its objects up to date next time, print nothing,
/// and the same source would pass on a rerun.
fn refuse_our_warnings(log: &Path, ours: &str, src: &Path, what: &str) -> Result<()> {
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
fn compile_again(file: &Path) -> Result<()> {
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
fn build_inputs(
    paths: &Paths,
    build: &Path,
    arch: Arch,
    clang: bool,
    cmd: &Command,
    line: Line,
) -> Result<String> {
    let mut h = Fnv::default();
    let guest = paths.root.join("guest-kernel");
    // Our overlay is read by LTS builds only.
    let overlay: &[&str] = match line {
        Line::Lts => &["rust", "patches"],
        Line::Mainline => &[],
    };
    for dir in overlay {
        let mut files = walk(&guest.join(dir))?;
        files.sort();
        for f in files {
            h.write(f.strip_prefix(&guest)?.as_os_str().as_encoded_bytes());
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
fn on_path(name: &str) -> PathBuf {
    std::env::var_os("PATH")
        .iter()
        .flat_map(std::env::split_paths)
        .map(|d| d.join(name))
        .find(|p| p.exists())
        .unwrap_or_else(|| PathBuf::from(name))
}

/// FNV-1a, 64 bits: stable across Rust versions, unlike `DefaultHasher`.
struct Fnv(u64);

impl Default for Fnv {
    fn default() -> Self {
        Fnv(0xcbf2_9ce4_8422_2325)
    }
}

impl Fnv {
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
        }
    }

    /// `bytes` with its length first, so that fields cannot run together.
    fn field(&mut self, bytes: &[u8]) {
        self.write(&(bytes.len() as u64).to_le_bytes());
        self.write(bytes);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        assert_eq!(config_hz(config), Some(250));
        assert_eq!(config_hz("CONFIG_HZ_250=y\n"), None);
    }

    #[test]
    fn fnv_1a_matches_its_reference_vectors() {
        let hash = |s: &str| {
            let mut h = Fnv::default();
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
        let inputs_of = |line| {
            build_inputs(&paths, &build, Arch::X86_64, false, &make_with("V=0"), line).unwrap()
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
            &paths,
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
