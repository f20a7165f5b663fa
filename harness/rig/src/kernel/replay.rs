//! Kbuild's own recorded commands, run again for an out-of-tree module
//! whose sources changed only in content since a clean build.
//!
//! Every `make M=…` re-evaluates the arch Makefile, and with it some forty
//! compiler probes (`cc-option`, `as-instr`): about 0.6 s before the first
//! object is compiled, on every edit. Kbuild records the exact command that
//! made each target in its `.<target>.cmd` file (`savedcmd_<target> := …`).
//! When neither the Kbuild file, nor the set of files, nor the make command
//! nor the kernel changed, those commands are what make would run: compile
//! each module object (rustc or clippy-driver, then objtool), modpost,
//! `<module>.mod.o` again if modpost rewrote `<module>.mod.c`, and the `.ko`
//! link. Anything else, or any recorded command missing, goes to make.

use super::build_errors;
use anyhow::{bail, Context, Result};
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The commands that rebuild the modules of one copy, as Kbuild recorded
/// them, in the order make runs them.
#[derive(Debug, PartialEq)]
pub struct Plan {
    /// Where they run: the kernel's build tree (6.12, whose records name
    /// the copy's files by absolute paths) or the copy itself (6.13 and
    /// later build an external module in its own directory).
    cwd: PathBuf,
    /// Each module object's compile.
    compiles: Vec<String>,
    /// modpost over the copy's `modules.order`.
    modpost: String,
    /// Per module: its `.mod.c`, the command compiling it, its `.ko` link.
    finals: Vec<(PathBuf, String, String)>,
}

/// The plan for the copy built against the kernel build tree `objtree`, or
/// `None` when Kbuild's records do not hold one: no clean build yet, or a
/// module made of more than one object (whose parts make would link first).
pub fn plan(copy: &Path, objtree: &Path) -> Option<Plan> {
    let order = std::fs::read_to_string(copy.join("modules.order")).ok()?;
    let objects: Vec<&Path> = order.lines().map(Path::new).collect();
    let cwd = if objects.iter().all(|o| o.is_absolute()) {
        objtree
    } else {
        copy
    };
    // `./a.o` and `a.o` alike, as the records may spell either.
    let resolve = |p: &str| cwd.join(p.trim_start_matches("./"));
    let mut compiles = Vec::new();
    let mut finals = Vec::new();
    for object in &objects {
        let object = resolve(object.to_str()?);
        let dir = object.parent()?;
        let module = object.file_stem()?.to_str()?;
        let parts = std::fs::read_to_string(dir.join(format!("{module}.mod"))).ok()?;
        if parts.lines().map(resolve).collect::<Vec<_>>() != [object.clone()] {
            return None;
        }
        compiles.push(saved(&dir.join(format!(".{module}.o.cmd")))?);
        finals.push((
            dir.join(format!("{module}.mod.c")),
            saved(&dir.join(format!(".{module}.mod.o.cmd")))?,
            saved(&dir.join(format!(".{module}.ko.cmd")))?,
        ));
    }
    if compiles.is_empty() {
        return None;
    }
    let modpost = saved(&copy.join(".Module.symvers.cmd"))?;
    Some(Plan {
        cwd: cwd.to_path_buf(),
        compiles,
        modpost,
        finals,
    })
}

/// The shell command a `.cmd` file records.
fn saved(cmd_file: &Path) -> Option<String> {
    let text = std::fs::read_to_string(cmd_file).ok()?;
    let line = text.lines().find(|l| l.starts_with("savedcmd_"))?;
    let (_, cmd) = line.split_once(" := ")?;
    Some(unescape(cmd))
}

/// Undoes Kbuild's `make-cmd` escaping: `$` was saved as `$$` and `#` as
/// `$(pound)`.
fn unescape(saved: &str) -> String {
    let mut out = String::with_capacity(saved.len());
    let mut rest = saved;
    while let Some(at) = rest.find('$') {
        out.push_str(&rest[..at]);
        rest = &rest[at..];
        if let Some(after) = rest.strip_prefix("$$") {
            out.push('$');
            rest = after;
        } else if let Some(after) = rest.strip_prefix("$(pound)") {
            out.push('#');
            rest = after;
        } else {
            out.push('$');
            rest = &rest[1..];
        }
    }
    out.push_str(rest);
    out
}

impl Plan {
    /// Runs the plan with the environment make would give its commands:
    /// `make_cmd`'s own changes plus what the top Makefile exports to the
    /// tools (`srctree`: the kernel's sources). Every command's output goes
    /// to `log`; a failing one fails the build the way make would.
    pub fn run(&self, make_cmd: &Command, srctree: &Path, log: &Path, what: &str) -> Result<()> {
        std::fs::write(
            log,
            "pci-rig: only sources' contents changed since a clean build: \
             Kbuild's recorded commands run, not make\n",
        )?;
        let shell = |cmd: &str| -> Result<()> {
            let mut c = Command::new("sh");
            c.arg("-c").arg(cmd).current_dir(&self.cwd);
            for (k, v) in make_cmd.get_envs() {
                match v {
                    Some(v) => c.env(k, v),
                    None => c.env_remove(k),
                };
            }
            c.env("RUSTC_BOOTSTRAP", "1")
                .env("CLIPPY_CONF_DIR", srctree)
                .env("LC_COLLATE", "C")
                .env("LC_NUMERIC", "C");
            let out = c
                .stdin(Stdio::null())
                .output()
                .with_context(|| format!("starting sh for {what}"))?;
            let mut log_file = std::fs::OpenOptions::new().append(true).open(log)?;
            log_file.write_all(&out.stdout)?;
            log_file.write_all(&out.stderr)?;
            if !out.status.success() {
                let text = std::fs::read_to_string(log)?;
                let summary = build_errors::summarize(&text)
                    .unwrap_or_else(|| crate::host::process::tail(&text, 20));
                bail!("{what} failed; full log: {}\n{summary}", log.display());
            }
            Ok(())
        };
        for compile in &self.compiles {
            shell(compile)?;
        }
        let before: Vec<Option<Vec<u8>>> = self
            .finals
            .iter()
            .map(|(c, _, _)| std::fs::read(c).ok())
            .collect();
        shell(&self.modpost)?;
        for ((mod_c, compile, link), before) in self.finals.iter().zip(before) {
            if std::fs::read(mod_c).ok() != before {
                shell(compile)?;
            }
            shell(link)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A copy holding the records Kbuild leaves for module `m`, each
    /// object named by `name(file)`; removed when dropped.
    struct Copy(PathBuf);

    impl Copy {
        fn new(tag: &str, name: impl Fn(&Path, &str) -> String, parts: &[&str]) -> Self {
            let dir = std::env::temp_dir()
                .join(format!("pci-rig-replay-test-{}-{tag}", std::process::id()));
            let _ = std::fs::remove_dir_all(&dir);
            std::fs::create_dir_all(&dir).unwrap();
            let write = |f: &str, text: String| std::fs::write(dir.join(f), text).unwrap();
            write("modules.order", format!("{}\n", name(&dir, "m.o")));
            let parts: Vec<String> = parts.iter().map(|p| name(&dir, p)).collect();
            write("m.mod", parts.join("\n") + "\n");
            for (file, cmd) in [
                (".m.o.cmd", "rustc m.rs; objtool m.o"),
                (".m.mod.o.cmd", "gcc -c m.mod.c"),
                (".m.ko.cmd", "ld -r -o m.ko m.o m.mod.o"),
                (".Module.symvers.cmd", "modpost -T modules.order"),
            ] {
                write(
                    file,
                    format!("savedcmd_{} := {cmd}\n\nsource_x := m.rs\n", &file[1..]),
                );
            }
            Copy(dir)
        }
    }

    impl Drop for Copy {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    #[test]
    fn a_one_object_module_is_planned_where_its_records_say() {
        let objtree = Path::new("/kernel/build");
        let absolute = |d: &Path, f: &str| d.join(f).display().to_string();
        let copy = Copy::new("abs", absolute, &["m.o"]);
        let in_tree = plan(&copy.0, objtree).expect("a plan");
        assert_eq!(in_tree.cwd, objtree, "6.12 runs them in the build tree");
        assert_eq!(in_tree.compiles, ["rustc m.rs; objtool m.o"]);
        assert_eq!(in_tree.modpost, "modpost -T modules.order");
        assert_eq!(
            in_tree.finals,
            [(
                copy.0.join("m.mod.c"),
                "gcc -c m.mod.c".to_string(),
                "ld -r -o m.ko m.o m.mod.o".to_string()
            )]
        );
        // 7.x: `m.o` in modules.order, `./m.o` in m.mod, run in the copy.
        let relative = Copy::new("rel", |_, f| f.to_string(), &["./m.o"]);
        let in_copy = plan(&relative.0, objtree).expect("a plan");
        assert_eq!(in_copy.cwd, relative.0);
    }

    #[test]
    fn no_plan_without_every_record_or_for_a_module_of_parts() {
        let objtree = Path::new("/kernel/build");
        let name = |_: &Path, f: &str| f.to_string();
        let parts = Copy::new("parts", name, &["a.o", "b.o"]);
        assert_eq!(plan(&parts.0, objtree), None, "make links the parts");
        for record in [
            "modules.order",
            "m.mod",
            ".m.o.cmd",
            ".m.ko.cmd",
            ".Module.symvers.cmd",
        ] {
            let copy = Copy::new(&format!("no{record}"), name, &["m.o"]);
            assert!(plan(&copy.0, objtree).is_some());
            std::fs::remove_file(copy.0.join(record)).unwrap();
            assert_eq!(plan(&copy.0, objtree), None, "without {record}");
        }
    }

    #[test]
    fn kbuilds_escapes_are_undone() {
        assert_eq!(
            unescape("printf '%s\\n' a | awk '!x[$$0]++ { print($$0) }' $(pound)x"),
            "printf '%s\\n' a | awk '!x[$0]++ { print($0) }' #x"
        );
        assert_eq!(unescape("a $$$$ b $$(pound)"), "a $$ b $(pound)");
        assert_eq!(unescape("plain"), "plain");
    }
}
