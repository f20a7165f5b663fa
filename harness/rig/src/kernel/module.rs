//! Out-of-tree modules (our driver, the bench, platform and compile-fail
//! modules), each built by Kbuild in its own copy under the kernel's build
//! directory. A copy whose inputs are those of its last build is not handed
//! to make again (a no-op `make M=…` still walks and runs modpost): a clean
//! build's module or a refused build's refusal is given back. When only the
//! sources' contents changed since a clean build, Kbuild's recorded commands
//! run instead of make (see [`replay`]).

use super::digest::{walk, Fnv};
use super::make::{make, run_make};
use super::{build_errors, replay, Kernel};
use crate::host::provision::Toolchain;
use anyhow::{bail, Context, Result};
use std::path::{Path, PathBuf};
use std::process::Command;

/// Written by the kernel's build after it ended clean, holding its inputs'
/// digest; absent while the kernel is rebuilt or after a failed build.
const KERNEL_STAMP: &str = "pci-rig-built";
/// In a copy: its last make ended clean (no error, no warning).
const CLEAN: &str = "pci-rig-clean";
/// In a copy: the digest of what that clean build read.
const INPUTS: &str = "pci-rig-inputs";
/// In a copy: the digest of what its last clean build read but the
/// contents of its sources (see [`replay`]).
const SHAPE: &str = "pci-rig-shape";
/// In a copy: its objects were last made by [`replay`], which leaves
/// Kbuild's dependency records as they were; make starts from none.
const REPLAYED: &str = "pci-rig-replayed";
/// In a copy: the digest of what its last build read, which was refused
/// for a reason the compiler gave, then the refusal's message.
const REFUSED: &str = "pci-rig-refused";
/// How a refusal given back from the record says so.
pub const GIVEN_BACK: &str = "these very inputs were refused before; make was not run again";
/// Line tables in every module built here, and no other debug information:
/// the coverage plugin's record of what ran maps back to source lines
/// through them (`coverage`). Not for C on riscv64: clang's line tables there
/// hold `.uleb128` differences of labels that linker relaxation may move, which
/// binutils' assembler (LLVM_IAS=0) refuses before 2.41 ("non-constant
/// .uleb128 is not supported"; the kernel's own DWARF options exclude that
/// pair: lib/Kconfig.debug, AS_HAS_NON_CONST_ULEB128). The C driver's
/// functions are still counted there, by its symbols.
fn line_tables(kernel: &Kernel) -> &'static [&'static str] {
    match kernel.arch {
        crate::arch::Arch::Riscv64 => &["KRUSTFLAGS=-Cdebuginfo=line-tables-only"],
        _ => &["KRUSTFLAGS=-Cdebuginfo=line-tables-only", "KCFLAGS=-g1"],
    }
}

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
    let mut cmd = make(
        tc,
        &kernel.src,
        &kernel.build,
        (kernel.arch, kernel.clang, kernel.line),
    );
    // Our modules are linted as they build, and must build without a warning.
    cmd.arg(format!("M={}", copy.display()))
        .arg("CLIPPY=1")
        .args(line_tables(kernel))
        .args(vars)
        .arg("modules");
    let stamp = std::fs::read_to_string(kernel.build.join(KERNEL_STAMP)).ok();
    let job = Job {
        dir,
        shared,
        copy: &copy,
        name,
        what: &format!("module {label} ({})", kernel.arch),
        trees: Some((&kernel.src, &kernel.build)),
        strict: true,
    };
    build_in_copy(&job, cmd, stamp.as_deref())
}

/// Builds a module pci-rig did not write (`--module`: `dir` holds its Kbuild or Makefile and
/// sources) against `kernel`, in a copy named after it, as its author would: no clippy, and
/// its warnings shown, not refused. Returns the `.ko`.
pub fn build_foreign(tc: &Toolchain, kernel: &Kernel, dir: &Path, name: &str) -> Result<PathBuf> {
    // Named by its directory too: two modules of one name from two places keep two copies.
    let mut h = Fnv::default();
    h.write(dir.as_os_str().as_encoded_bytes());
    let copy = kernel
        .build
        .join("pci-rig-external")
        .join(format!("foreign-{name}-{:08x}", h.0 as u32));
    let mut cmd = make(
        tc,
        &kernel.src,
        &kernel.build,
        (kernel.arch, kernel.clang, kernel.line),
    );
    cmd.arg(format!("M={}", copy.display()))
        .args(line_tables(kernel))
        .arg("modules");
    let stamp = std::fs::read_to_string(kernel.build.join(KERNEL_STAMP)).ok();
    let job = Job {
        dir,
        shared: &[],
        copy: &copy,
        name,
        what: &format!("module {name} from {} ({})", dir.display(), kernel.arch),
        trees: Some((&kernel.src, &kernel.build)),
        strict: false,
    };
    build_in_copy(&job, cmd, stamp.as_deref())
}

/// One module built in its copy.
struct Job<'a> {
    /// The module's sources, as the user edits them.
    dir: &'a Path,
    /// Files of other directories copied in beside them.
    shared: &'a [PathBuf],
    /// Where Kbuild builds it.
    copy: &'a Path,
    /// The module's name: the copy's `<name>.ko`.
    name: &'a str,
    /// How messages name the build.
    what: &'a str,
    /// The kernel's source and build trees, where Kbuild's recorded
    /// commands run; without them make always runs.
    trees: Option<(&'a Path, &'a Path)>,
    /// A warning refuses the build (ours); otherwise it is shown (a foreign module's).
    strict: bool,
}

/// Refreshes the copy, then runs `cmd` (make in the copy) unless the copy's
/// last build read the same inputs (`kernel_stamp`: the kernel build's
/// stamp; without one, make always runs): a clean one gives its module back,
/// a refused one its refusal. A build that fails or warns is refused and
/// leaves no module, no clean marker and no objects, so make, when it runs
/// again, starts from no objects and warns again. A refusal is recorded only
/// when the compiler (or modpost) said why: a make killed or cut short is
/// run again.
fn build_in_copy(job: &Job, cmd: Command, kernel_stamp: Option<&str>) -> Result<PathBuf> {
    let copy = job.copy;
    let files = refresh(job)?;
    let ko = copy.join(format!("{}.ko", job.name));
    let clean = copy.join(CLEAN);
    let recorded = copy.join(INPUTS);
    let digest = kernel_stamp.map(|stamp| inputs(&files, &cmd, stamp));
    if let Some(digest) = &digest {
        let last = clean
            .exists()
            .then(|| std::fs::read_to_string(&recorded).ok())
            .flatten();
        if up_to_date(last.as_deref(), digest, ko.exists()) {
            return Ok(ko);
        }
    }
    let log = copy.join("pci-rig-make.log");
    let refused = copy.join(REFUSED);
    if let Some(digest) = &digest {
        let last = std::fs::read_to_string(&refused).ok();
        if let Some(message) = refusal_of(last.as_deref(), digest, log.exists()) {
            // A refused build leaves no module, whoever left one there.
            discard_objects(copy)?;
            bail!("{message}\n({GIVEN_BACK})");
        }
    }
    let shape = kernel_stamp.map(|stamp| shape_of(&files, &cmd, stamp));
    let (shape_file, replayed) = (copy.join(SHAPE), copy.join(REPLAYED));
    let last_shape = clean
        .exists()
        .then(|| std::fs::read_to_string(&shape_file).ok())
        .flatten();
    let plan = match (job.trees, &shape) {
        (Some((src, build)), Some(shape)) if last_shape.as_ref() == Some(shape) => {
            replay::plan(copy, build).map(|plan| (plan, src))
        }
        _ => None,
    };
    // Make reuses objects only from a build that ended clean: one that
    // warned, failed or was cut short may have left objects whose warnings
    // make would not print again. Nor after a replay, whose objects may
    // hang on files Kbuild's records do not list.
    if !clean.exists() || (plan.is_none() && replayed.exists()) {
        discard_objects(copy)?;
    }
    for file in [&clean, &recorded, &refused, &shape_file, &replayed] {
        let _ = std::fs::remove_file(file);
    }
    let made = match plan {
        Some((plan, src)) => {
            std::fs::write(&replayed, "")?;
            plan.run(&cmd, src, &log, job.what)
        }
        None => run_make(cmd, &log, job.what),
    };
    let outcome = made.and_then(|()| refuse_warnings(job, &log));
    if let Err(e) = outcome {
        // A refused build leaves no module.
        discard_objects(copy)?;
        if let Some(digest) = &digest {
            if build_errors::diagnosed(&std::fs::read_to_string(&log)?) {
                std::fs::write(&refused, format!("{digest}{e:#}"))?;
            }
        }
        return Err(e);
    }
    if let (Some(digest), Some(shape)) = (&digest, &shape) {
        std::fs::write(&recorded, digest)?;
        std::fs::write(&shape_file, shape)?;
    }
    std::fs::write(&clean, "")?;
    Ok(ko)
}

/// Fails when the build `log` of `job` shows a warning: our modules must
/// build without one.
fn refuse_warnings(job: &Job, log: &Path) -> Result<()> {
    let copy = job.copy;
    // Named by the file the user edits, not by its copy.
    let warnings: Vec<String> = build_errors::warnings(&std::fs::read_to_string(log)?)
        .iter()
        .map(|w| {
            let w = job.shared.iter().fold(w.clone(), |w, f| {
                let name = f.file_name().unwrap_or_default();
                w.replace(&*copy.join(name).to_string_lossy(), &f.to_string_lossy())
            });
            w.replace(&*copy.to_string_lossy(), &job.dir.to_string_lossy())
        })
        .collect();
    if !warnings.is_empty() && !job.strict {
        eprintln!(
            "build: {} built with {} warning(s) (its author's to fix; full log: {}):\n{}",
            job.what,
            warnings.len(),
            log.display(),
            warnings.join("\n")
        );
    } else if !warnings.is_empty() {
        bail!(
            "{} built with {} warning(s); fix them:\n{}\nfull log: {}",
            job.what,
            warnings.len(),
            warnings.join("\n"),
            log.display()
        );
    }
    Ok(())
}

/// The message of the copy's recorded refusal (`last`: its digest line,
/// then the message) when it refused the very inputs `digest` and its log
/// is still there to read.
fn refusal_of(last: Option<&str>, digest: &str, log_exists: bool) -> Option<String> {
    let message = last?.strip_prefix(digest)?;
    (log_exists && !message.is_empty()).then(|| message.to_string())
}

/// Brings the copy's sources to the content of `dir`'s and the shared
/// files, rewriting only the files that differ (make goes by mtimes).
/// Returns each source by its name in the copy with the bytes it holds.
fn refresh(job: &Job) -> Result<Vec<(PathBuf, Vec<u8>)>> {
    std::fs::create_dir_all(job.copy)?;
    let mut from = Vec::new();
    for file in walk(job.dir)? {
        from.push((file.strip_prefix(job.dir)?.to_path_buf(), file));
    }
    for file in job.shared {
        let name = file
            .file_name()
            .context("a shared module file has no name")?;
        from.push((PathBuf::from(name), file.clone()));
    }
    let mut files = Vec::new();
    for (rel, file) in from {
        let bytes = std::fs::read(&file).with_context(|| format!("reading {}", file.display()))?;
        let to = job.copy.join(&rel);
        if std::fs::read(&to).ok().as_ref() != Some(&bytes) {
            std::fs::create_dir_all(to.parent().unwrap())?;
            std::fs::write(&to, &bytes)?;
        }
        files.push((rel, bytes));
    }
    Ok(files)
}

/// A digest of what a module's make reads that can change between runs:
/// its sources (names and contents, in name order), the make command line,
/// and the kernel build's stamp (which holds the digest of the kernel's own
/// inputs: overlay, `.config`, command, compilers).
fn inputs(files: &[(PathBuf, Vec<u8>)], cmd: &Command, kernel_stamp: &str) -> String {
    let mut sorted: Vec<&(PathBuf, Vec<u8>)> = files.iter().collect();
    sorted.sort_by(|a, b| a.0.cmp(&b.0));
    let mut h = Fnv::default();
    // Lengths keep one file's end from passing for the next one's start.
    let mut field = |bytes: &[u8]| {
        h.write(&(bytes.len() as u64).to_le_bytes());
        h.write(bytes);
    };
    for (name, bytes) in sorted {
        field(name.as_os_str().as_encoded_bytes());
        field(bytes);
    }
    field(format!("{cmd:?}").as_bytes());
    field(kernel_stamp.as_bytes());
    format!("{:016x}\n", h.0)
}

/// What of the inputs (see [`inputs`]) only make reads, so that a change
/// there must go to make: every file's name, the contents of all but the
/// sources the compiler reads (`.rs`, `.c`, `.h`), the command, the kernel.
fn shape_of(files: &[(PathBuf, Vec<u8>)], cmd: &Command, kernel_stamp: &str) -> String {
    let kept: Vec<(PathBuf, Vec<u8>)> = files
        .iter()
        .map(|(name, bytes)| {
            let source = name
                .extension()
                .is_some_and(|e| e == "rs" || e == "c" || e == "h");
            (
                name.clone(),
                if source { Vec::new() } else { bytes.clone() },
            )
        })
        .collect();
    inputs(&kept, cmd, kernel_stamp)
}

/// Whether make may be skipped: the copy's last build ended clean having
/// read `digest` (`last`: the digest it recorded, `None` when it did not
/// end clean), and its module is still there.
fn up_to_date(last: Option<&str>, digest: &str, ko_exists: bool) -> bool {
    last == Some(digest) && ko_exists
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A scratch directory, removed when dropped.
    struct Scratch(PathBuf);

    impl Scratch {
        fn new() -> Self {
            use std::sync::atomic::{AtomicU32, Ordering};
            static N: AtomicU32 = AtomicU32::new(0);
            let p = std::env::temp_dir().join(format!(
                "pci-rig-module-test-{}-{}",
                std::process::id(),
                N.fetch_add(1, Ordering::SeqCst)
            ));
            std::fs::create_dir_all(&p).unwrap();
            Scratch(p)
        }
    }

    impl Drop for Scratch {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn files(list: &[(&str, &str)]) -> Vec<(PathBuf, Vec<u8>)> {
        list.iter()
            .map(|(n, c)| (PathBuf::from(n), c.as_bytes().to_vec()))
            .collect()
    }

    fn make_with(arg: &str) -> Command {
        let mut c = Command::new("make");
        c.arg("M=/copy").arg(arg);
        c
    }

    #[test]
    fn the_digest_follows_sources_command_and_kernel() {
        let cmd = make_with("CLIPPY=1");
        let base = inputs(&files(&[("a.rs", "x"), ("Kbuild", "obj-m")]), &cmd, "k1\n");
        let same = inputs(&files(&[("Kbuild", "obj-m"), ("a.rs", "x")]), &cmd, "k1\n");
        assert_eq!(base, same, "the order files are found in does not count");
        for (what, other) in [
            (
                "a content",
                inputs(&files(&[("a.rs", "y"), ("Kbuild", "obj-m")]), &cmd, "k1\n"),
            ),
            (
                "a name",
                inputs(&files(&[("b.rs", "x"), ("Kbuild", "obj-m")]), &cmd, "k1\n"),
            ),
            (
                "a file more",
                inputs(
                    &files(&[("a.rs", "x"), ("Kbuild", "obj-m"), ("regs.rs", "")]),
                    &cmd,
                    "k1\n",
                ),
            ),
            (
                "where one file ends",
                inputs(&files(&[("a.rs", "xK"), ("build", "obj-m")]), &cmd, "k1\n"),
            ),
            (
                "the command",
                inputs(
                    &files(&[("a.rs", "x"), ("Kbuild", "obj-m")]),
                    &make_with("WARNS=y"),
                    "k1\n",
                ),
            ),
            (
                "the kernel",
                inputs(&files(&[("a.rs", "x"), ("Kbuild", "obj-m")]), &cmd, "k2\n"),
            ),
        ] {
            assert_ne!(base, other, "{what} changed");
        }
    }

    #[test]
    fn make_is_skipped_only_after_a_clean_build_of_the_same_inputs() {
        assert!(up_to_date(Some("d\n"), "d\n", true));
        assert!(!up_to_date(Some("d\n"), "e\n", true), "inputs changed");
        assert!(!up_to_date(Some("d\n"), "d\n", false), "the module is gone");
        assert!(
            !up_to_date(None, "d\n", true),
            "the last build was not clean"
        );
    }

    /// A module `w` of one C file whose "make" compiles it into `w.ko`,
    /// built the way our modules are; says whether make ran.
    struct Rig {
        scratch: Scratch,
        /// Its make leaves the records Kbuild does (see [`replay`]).
        records: bool,
    }

    /// A make that builds `w.ko` as Kbuild builds an external module since
    /// 6.13 (in the module's directory, relative names) and leaves the same
    /// records: modules.order, `w.mod`, and each target's command in its
    /// `.cmd` file ("modpost" writes `w.mod.c`, the link joins the objects).
    const KBUILD_LIKE: &str = "\
w.ko: w.c
\tcc -Wall -c $(CURDIR)/w.c -o w.o
\techo 'savedcmd_w.o := cc -Wall -c $(CURDIR)/w.c -o w.o' > .w.o.cmd
\techo w.o > modules.order
\techo ./w.o > w.mod
\techo 'savedcmd_Module.symvers := echo modinfo > w.mod.c' > .Module.symvers.cmd
\techo modinfo > w.mod.c
\techo 'savedcmd_w.mod.o := cp w.mod.c w.mod.o' > .w.mod.o.cmd
\tcp w.mod.c w.mod.o
\techo 'savedcmd_w.ko := cat w.o w.mod.o > w.ko' > .w.ko.cmd
\tcat w.o w.mod.o > w.ko
";

    impl Rig {
        fn new(source: &str) -> Self {
            Self::with_make(
                "w.ko: w.c\n\tcc -Wall -c $(CURDIR)/w.c -o w.ko\n",
                false,
                source,
            )
        }

        /// A rig whose make leaves Kbuild's records.
        fn kbuild(source: &str) -> Self {
            Self::with_make(KBUILD_LIKE, true, source)
        }

        fn with_make(makefile: &str, records: bool, source: &str) -> Self {
            let scratch = Scratch::new();
            let dir = scratch.0.join("src");
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::write(dir.join("Makefile"), makefile).unwrap();
            let rig = Rig { scratch, records };
            rig.edit(source);
            rig
        }

        fn edit(&self, source: &str) {
            // File times tick with the kernel's clock (a jiffy): the copy's
            // source must come out newer than the module built before.
            std::thread::sleep(std::time::Duration::from_millis(20));
            std::fs::write(self.scratch.0.join("src/w.c"), source).unwrap();
        }

        fn copy(&self) -> PathBuf {
            self.scratch.0.join("copy")
        }

        /// How many times make has run.
        fn runs(&self) -> usize {
            std::fs::read_to_string(self.scratch.0.join("runs")).map_or(0, |s| s.lines().count())
        }

        /// Builds against a kernel stamped `stamp`: the result (errors as
        /// text) and whether make ran.
        fn build(&self, stamp: Option<&str>) -> (Result<PathBuf, String>, bool) {
            let dir = self.scratch.0.join("src");
            let copy = self.copy();
            let runs = self.runs();
            let job = Job {
                dir: &dir,
                shared: &[],
                copy: &copy,
                name: "w",
                what: "module w",
                trees: self.records.then_some((&*self.scratch.0, &*self.scratch.0)),
                strict: true,
            };
            // Each run of make leaves a line in `runs`.
            let mut make = Command::new("sh");
            make.arg("-c").arg(format!(
                "echo run >> {} && exec make -C {}",
                self.scratch.0.join("runs").display(),
                copy.display()
            ));
            let result = build_in_copy(&job, make, stamp).map_err(|e| format!("{e:#}"));
            (result, self.runs() > runs)
        }
    }

    const CLEAN_SOURCE: &str = "int f(void) { return 0; }\n";
    const WARNED_SOURCE: &str = "int f(void) { int unused; return 0; }\n";

    #[test]
    fn an_unchanged_module_is_not_made_again() {
        let rig = Rig::new(CLEAN_SOURCE);
        let ko = rig.copy().join("w.ko");
        assert_eq!(rig.build(Some("k1\n")), (Ok(ko.clone()), true));
        assert_eq!(rig.build(Some("k1\n")), (Ok(ko.clone()), false), "skipped");
        assert_eq!(
            rig.build(Some("k2\n")),
            (Ok(ko.clone()), true),
            "the kernel was rebuilt"
        );
        assert_eq!(rig.build(Some("k2\n")), (Ok(ko.clone()), false));
        rig.edit("int f(void) { return 1; }\n");
        assert_eq!(rig.build(Some("k2\n")), (Ok(ko.clone()), true), "an edit");
        std::fs::remove_file(&ko).unwrap();
        assert_eq!(rig.build(Some("k2\n")), (Ok(ko.clone()), true), "no .ko");
        assert!(ko.exists());
        assert_eq!(rig.build(None), (Ok(ko.clone()), true), "no kernel stamp");
        assert_eq!(rig.build(None), (Ok(ko), true), "still none");
    }

    #[test]
    fn a_warned_module_is_refused_at_every_build() {
        let rig = Rig::new(CLEAN_SOURCE);
        let ko = rig.copy().join("w.ko");
        assert_eq!(rig.build(Some("k\n")), (Ok(ko.clone()), true));
        rig.edit(WARNED_SOURCE);
        let (first, made) = rig.build(Some("k\n"));
        let first = first.unwrap_err();
        assert!(made);
        assert!(
            first.contains("1 warning(s)") && first.contains("unused"),
            "{first}"
        );
        // Named by the source, not by its copy.
        let source = rig.scratch.0.join("src/w.c");
        assert!(
            first.contains(&format!("{}:1:", source.display())),
            "{first}"
        );
        let copy = rig.copy();
        assert!(
            first
                .lines()
                .filter(|l| l.contains("warning:"))
                .all(|l| !l.contains(&*copy.to_string_lossy())),
            "{first}"
        );
        for _ in 0..2 {
            assert!(!ko.exists(), "a refused build leaves no module");
            assert!(!copy.join(CLEAN).exists());
            assert!(!copy.join(INPUTS).exists());
            let (again, made) = rig.build(Some("k\n"));
            assert!(!made, "the same inputs' refusal is given back");
            let again = again.unwrap_err();
            assert!(again.starts_with(&first), "{again}");
            assert!(again.ends_with(&format!("({GIVEN_BACK})")), "{again}");
        }
        // A module left there by anyone is not this build's.
        std::fs::write(&ko, "stale").unwrap();
        assert!(rig.build(Some("k\n")).0.is_err());
        assert!(!ko.exists(), "a refused build leaves no module");
        // Without the record, make runs from no objects and warns again.
        std::fs::remove_file(copy.join(REFUSED)).unwrap();
        assert_eq!(rig.build(Some("k\n")), (Err(first.clone()), true));
        // Without the log the refusal was read from, too.
        std::fs::remove_file(copy.join("pci-rig-make.log")).unwrap();
        assert_eq!(rig.build(Some("k\n")), (Err(first.clone()), true));
        // Without a kernel stamp nothing is recorded: make runs every time.
        for _ in 0..2 {
            assert_eq!(rig.build(None), (Err(first.clone()), true));
        }
        rig.edit(CLEAN_SOURCE);
        assert_eq!(rig.build(Some("k\n")), (Ok(ko.clone()), true));
        assert_eq!(rig.build(Some("k\n")), (Ok(ko), false));
    }

    #[test]
    fn a_failure_is_given_back_only_when_the_compiler_said_why() {
        let rig = Rig::new(CLEAN_SOURCE);
        rig.edit("int f(void) { return }\n");
        let (first, made) = rig.build(Some("k\n"));
        let first = first.unwrap_err();
        assert!(made && first.contains("error"), "{first}");
        let (again, made) = rig.build(Some("k\n"));
        assert!(!made);
        assert!(again.unwrap_err().starts_with(&first));
        // A make that fails without the compiler's word (killed, a recipe
        // that broke) may pass next time: it is always run again.
        std::fs::write(rig.scratch.0.join("src/Makefile"), "w.ko: w.c\n\tfalse\n").unwrap();
        for _ in 0..2 {
            let (result, made) = rig.build(Some("k\n"));
            assert!(made && result.is_err(), "{result:?}");
        }
    }

    #[test]
    fn an_edit_of_sources_alone_replays_kbuilds_records() {
        let rig = Rig::kbuild(CLEAN_SOURCE);
        let ko = rig.copy().join("w.ko");
        assert_eq!(rig.build(Some("k\n")), (Ok(ko.clone()), true));
        let first = std::fs::read(&ko).unwrap();
        rig.edit("int f(void) { return 1; }\n");
        assert_eq!(rig.build(Some("k\n")), (Ok(ko.clone()), false), "replayed");
        let log = std::fs::read_to_string(rig.copy().join("pci-rig-make.log")).unwrap();
        assert!(log.starts_with("pci-rig: only sources"), "{log}");
        let second = std::fs::read(&ko).unwrap();
        assert_ne!(first, second, "the module holds the edit");
        assert!(second.ends_with(b"modinfo\n"), "linked with w.mod.o");
        // A warning in a replay is refused as in make, and the next build
        // (no clean one to replay from) goes to make.
        rig.edit(WARNED_SOURCE);
        let (warned, made) = rig.build(Some("k\n"));
        assert!(!made);
        assert!(warned.unwrap_err().contains("1 warning(s)"));
        assert!(!ko.exists(), "a refused build leaves no module");
        rig.edit(CLEAN_SOURCE);
        assert_eq!(rig.build(Some("k\n")), (Ok(ko.clone()), true));
        assert_eq!(std::fs::read(&ko).unwrap(), first);
        // Anything but sources' contents goes to make: a file more, the
        // Makefile, the kernel.
        rig.edit("int f(void) { return 2; }\n");
        assert_eq!(rig.build(Some("k\n")), (Ok(ko.clone()), false));
        std::fs::write(rig.scratch.0.join("src/extra.rs"), "").unwrap();
        assert_eq!(
            rig.build(Some("k\n")),
            (Ok(ko.clone()), true),
            "a file more"
        );
        std::fs::write(
            rig.scratch.0.join("src/Makefile"),
            format!("{KBUILD_LIKE}# changed\n"),
        )
        .unwrap();
        assert_eq!(
            rig.build(Some("k\n")),
            (Ok(ko.clone()), true),
            "the Makefile"
        );
        assert_eq!(
            rig.build(Some("k2\n")),
            (Ok(ko.clone()), true),
            "the kernel"
        );
        rig.edit(CLEAN_SOURCE);
        assert_eq!(rig.build(Some("k2\n")), (Ok(ko.clone()), false));
        assert_eq!(std::fs::read(&ko).unwrap(), first);
    }
}
