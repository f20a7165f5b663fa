//! Bindgen's layouts held against the C compiler's, after every kernel build.
//!
//! The kernel generates its Rust bindings with `--no-layout-tests`, so nothing
//! checks that a Rust struct has the size, alignment and field offsets its C
//! original has. bindgen can get them wrong (docs/defects.md, "Bindgen drops the
//! alignment of empty structs": `struct sched_statistics` under
//! `CONFIG_SCHEDSTATS=n` moved every later `task_struct` field). So each
//! build runs the kernel's own bindgen command again, layout tests on, into a
//! scratch folder, and compiles the crate from there with the kernel's own
//! rustc command, metadata only. bindgen's layout tests are constant
//! assertions of libclang's numbers, which agree with GCC's: a struct laid out
//! differently fails to compile, and the error names it. Those assertions
//! need `offset_of!` in constants (Rust 1.77): an older `--rust-target` (6.12
//! asks for 1.68) gets `#[test]` functions instead, which a kernel crate never
//! runs, so the check asks for 1.77, and then holds its output, assertions
//! taken out, against the kernel's own file: byte for byte the same bindings.
//! A build whose bindings, commands and headers are those of its last check
//! is not checked again (`pci-rig-layouts.ok`): an edit that does not touch
//! them costs nothing.

use anyhow::{bail, Context, Result};
use std::path::Path;
use std::process::Command;

/// A crate of generated bindings: its object, the files bindgen generates
/// for it, and the generated files it includes as they are.
struct Generated {
    object: &'static str,
    regenerate: &'static [&'static str],
    copy: &'static [&'static str],
}

/// The kernel's two crates of bindings (both lines have them).
const CRATES: &[Generated] = &[
    Generated {
        object: "rust/bindings.o",
        regenerate: &["rust/bindings/bindings_generated.rs"],
        copy: &["rust/bindings/bindings_helpers_generated.rs"],
    },
    Generated {
        object: "rust/uapi.o",
        regenerate: &["rust/uapi/uapi_generated.rs"],
        copy: &[],
    },
];

/// Checks the layouts of every crate of bindings in `build` (a kernel build
/// directory whose build just succeeded). `env`: what make ran with
/// (`LIBCLANG_PATH`). Returns how many layout assertions were compiled, and
/// whether now (else a check of the very same inputs recorded it).
pub fn check(build: &Path, env: &[(String, String)]) -> Result<(usize, bool)> {
    // Checked already for these very inputs: the count it found then.
    let record = build.join("pci-rig-layouts.ok");
    let inputs = digest(build)?;
    if let Some(n) = std::fs::read_to_string(&record)
        .ok()
        .and_then(|r| r.strip_prefix(&format!("{inputs} "))?.trim().parse().ok())
    {
        return Ok((n, false));
    }
    let _ = std::fs::remove_file(&record);
    let scratch = build.join("pci-rig-layouts");
    let _ = std::fs::remove_dir_all(&scratch);
    let mut asserted = 0;
    for c in CRATES {
        for file in c.regenerate {
            let cmd = with_layout_tests(&saved_command(build, file)?, file, &scratch)?;
            std::fs::create_dir_all(scratch.join(file).parent().unwrap())?;
            run_shell(build, &cmd, env)
                .with_context(|| format!("bindgen for {file}, layout tests on"))?;
            let text = std::fs::read_to_string(scratch.join(file))?;
            let theirs = std::fs::read_to_string(build.join(file))?;
            let (bindings, n) = without_layout_tests(&text);
            if let Some(line) = first_difference(&bindings, &theirs) {
                bail!(
                    "{file}: bindgen with layout tests made other bindings than the kernel's (first difference at line {line}), so their layouts would not be the kernel's; scratch copy: {}",
                    scratch.display()
                );
            }
            if n == 0 {
                bail!("{file}: bindgen wrote no layout assertion (layout tests as #[test] functions?); scratch copy: {}", scratch.display());
            }
            asserted += n;
        }
        for file in c.copy {
            std::fs::copy(build.join(file), scratch.join(file))
                .with_context(|| format!("copying {file}"))?;
        }
        let cmd = metadata_only(&saved_command(build, c.object)?, build, &scratch, c.object)?;
        if let Err(e) = run_shell(build, &cmd, env) {
            let wrong = wrong_layouts(&format!("{e:#}"));
            bail!(
                "{}: bindgen's Rust layouts differ from the C compiler's ({} types, the first wrong assertion of each: {}); Rust code reading these structs reads the wrong bytes. The kernel builds its bindings with --no-layout-tests, which hides this; docs/defects.md, \"Bindgen drops the alignment of empty structs\", has the known cause and its workaround. Scratch copy: {}",
                c.object,
                wrong.len(),
                wrong.join(", "),
                scratch.display()
            );
        }
    }
    std::fs::write(&record, format!("{inputs} {asserted}\n"))?;
    Ok((asserted, true))
}

/// A digest of everything the check reads: Kbuild's records of the bindings and their crates
/// (commands and header lists), the generated files, and every header those records list, by
/// content. An unchanged digest means the same assertions over the same bindings.
fn digest(build: &Path) -> Result<String> {
    let mut h = super::digest::Fnv::default();
    for c in CRATES {
        let mut records: Vec<&str> = c.regenerate.to_vec();
        records.push(c.object);
        for target in records {
            let (dir, name) = target.rsplit_once('/').unwrap_or(("", target));
            let cmd = build.join(dir).join(format!(".{name}.cmd"));
            let text = std::fs::read_to_string(&cmd)
                .with_context(|| format!("reading {}", cmd.display()))?;
            h.field(text.as_bytes());
            for dep in text.split_whitespace().filter(|w| w.ends_with(".h")) {
                let path = build.join(dep);
                if let Ok(bytes) = std::fs::read(&path) {
                    h.field(&bytes);
                }
            }
        }
        for file in c.regenerate.iter().chain(c.copy) {
            h.field(&std::fs::read(build.join(file)).with_context(|| format!("reading {file}"))?);
        }
    }
    Ok(format!("{:016x}", h.0))
}

/// The command Kbuild last ran to make `target` (relative to `build`), from
/// its `.cmd` file (`savedcmd_<target> := …`).
fn saved_command(build: &Path, target: &str) -> Result<String> {
    let (dir, name) = target.rsplit_once('/').unwrap_or(("", target));
    let file = build.join(dir).join(format!(".{name}.cmd"));
    let text = std::fs::read_to_string(&file)
        .with_context(|| format!("reading {} (Kbuild's record of {target})", file.display()))?;
    text.lines()
        .find_map(|l| {
            let (k, v) = l.split_once(" := ")?;
            k.ends_with(&format!("cmd_{target}")).then(|| unescape(v))
        })
        .with_context(|| format!("{} holds no command for {target}", file.display()))
}

/// A command as make would run it: Kbuild writes `#` as `$(pound)` and `$` as `$$` into its
/// records (make reads them back).
fn unescape(saved: &str) -> String {
    saved.replace("$(pound)", "#").replace("$$", "$")
}

/// Kbuild's bindgen command for `target`, writing into `scratch` with bindgen's layout tests.
fn with_layout_tests(cmd: &str, target: &str, scratch: &Path) -> Result<String> {
    if !cmd.contains(&format!("-o {target} ")) {
        bail!("Kbuild's bindgen command for {target} has no `-o {target}`: {cmd}");
    }
    let (dir, name) = target.rsplit_once('/').unwrap_or(("", target));
    let depfile = format!("{dir}/.{name}.d");
    let out = scratch.join(target).display().to_string();
    // The target first: the depfile's name does not contain it, its new name does.
    Ok(const_layout_tests(cmd)
        .replace(" --no-layout-tests", "")
        .replace(target, &out)
        .replace(&depfile, &format!("{out}.d")))
}

/// The oldest `--rust-target` whose layout tests are constant assertions (`offset_of!`).
const CONST_LAYOUT_TESTS: u32 = 77;

/// `cmd` asking bindgen for at least Rust 1.77.
fn const_layout_tests(cmd: &str) -> String {
    let flag = " --rust-target ";
    let Some(at) = cmd.find(flag).map(|i| i + flag.len()) else {
        return cmd.to_string();
    };
    let version = cmd[at..].split_whitespace().next().unwrap_or("");
    let minor = version
        .strip_prefix("1.")
        .and_then(|m| m.split('.').next()?.parse::<u32>().ok());
    match minor {
        Some(m) if m < CONST_LAYOUT_TESTS => format!(
            "{}1.{CONST_LAYOUT_TESTS}{}",
            &cmd[..at],
            &cmd[at + version.len()..]
        ),
        _ => cmd.to_string(),
    }
}

/// How bindgen 0.73 opens the constant block of one type's layout assertions.
const ASSERTIONS: &str =
    "#[allow(clippy::unnecessary_operation, clippy::identity_op)]\nconst _: () = {\n";

/// `text` without its layout assertion blocks, and how many assertions they held.
fn without_layout_tests(text: &str) -> (String, usize) {
    let (mut out, mut n, mut rest) = (String::with_capacity(text.len()), 0, text);
    while let Some(start) = rest.find(ASSERTIONS) {
        out.push_str(&rest[..start]);
        let block = &rest[start + ASSERTIONS.len()..];
        let end = block.find("\n};\n").map_or(block.len(), |e| e + 4);
        n += block[..end].matches("\"][").count();
        rest = &block[end..];
    }
    out.push_str(rest);
    (out, n)
}

/// The first line (from 1) where `a` and `b` differ, if they do.
fn first_difference(a: &str, b: &str) -> Option<usize> {
    if a == b {
        return None;
    }
    let same = a.lines().zip(b.lines()).take_while(|(x, y)| x == y).count();
    Some(same + 1)
}

/// Kbuild's rustc command for `object`, emitting only `scratch`'s metadata
/// and reading its generated files from `scratch` (`OBJTREE`); what follows
/// the compiler (objcopy, objtool) is dropped.
fn metadata_only(cmd: &str, build: &Path, scratch: &Path, object: &str) -> Result<String> {
    let rustc = cmd.split(';').next().unwrap_or(cmd).trim_start();
    let objtree = format!("OBJTREE={}", std::path::absolute(build)?.display());
    if !rustc.starts_with(&objtree) {
        bail!("Kbuild's rustc command for {object} does not start with {objtree}: {rustc}");
    }
    let words: Vec<String> = rustc[objtree.len()..]
        .split_whitespace()
        .filter(|w| !w.starts_with("--emit="))
        .map(str::to_string)
        .collect();
    Ok(format!(
        "OBJTREE={} {} --emit=metadata={}/lib.rmeta",
        scratch.display(),
        words.join(" "),
        scratch.display()
    ))
}

fn run_shell(dir: &Path, cmd: &str, env: &[(String, String)]) -> Result<()> {
    let out = Command::new("sh")
        .arg("-c")
        .arg(cmd)
        .current_dir(dir)
        .envs(env.iter().map(|(k, v)| (k, v)))
        // As the kernel's Makefile exports: its rustc flags are unstable ones.
        .env("RUSTC_BOOTSTRAP", "1")
        .env_remove("RUSTUP_TOOLCHAIN")
        .env_remove("RUSTFLAGS")
        .output()
        .context("running sh")?;
    if !out.status.success() {
        bail!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(())
}

/// The layout assertions rustc refused, by their names (`Size of task_struct`,
/// `Offset of field: task_struct::pid`), each once, in order. rustc stops at
/// the first failing assertion of a type's block: one name per wrong type.
fn wrong_layouts(errors: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for line in errors.lines() {
        let Some(start) = line.find("[\"") else {
            continue;
        };
        let rest = &line[start + 2..];
        let Some(end) = rest.find("\"]") else {
            continue;
        };
        let name = &rest[..end];
        let known = ["Size of ", "Alignment of ", "Offset of field: "];
        if known.iter().any(|k| name.starts_with(k)) && !out.iter().any(|n| n == name) {
            out.push(name.to_string());
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bindgen_command_gets_layout_tests_and_a_scratch_output() {
        let cmd = "/c/bindgen ../src/rust/bindings/bindings_helper.h --blocklist-type x --rust-target 1.68 --use-core --no-layout-tests --no-debug '.*' -o rust/bindings/bindings_generated.rs -- -Wp,-MMD,rust/bindings/.bindings_generated.rs.d -DMODULE ; sed -Ei 's/a/b/g' rust/bindings/bindings_generated.rs";
        let t = "rust/bindings/bindings_generated.rs";
        let got = with_layout_tests(cmd, t, Path::new("/s")).unwrap();
        assert_eq!(
            got,
            "/c/bindgen ../src/rust/bindings/bindings_helper.h --blocklist-type x --rust-target 1.77 --use-core --no-debug '.*' -o /s/rust/bindings/bindings_generated.rs -- -Wp,-MMD,/s/rust/bindings/bindings_generated.rs.d -DMODULE ; sed -Ei 's/a/b/g' /s/rust/bindings/bindings_generated.rs"
        );
        assert!(with_layout_tests("bindgen x.h -o elsewhere.rs", t, Path::new("/s")).is_err());
    }

    #[test]
    fn the_rust_target_is_raised_to_const_assertions_only_when_older() {
        assert_eq!(
            const_layout_tests("bindgen h --rust-target 1.68 -o x"),
            "bindgen h --rust-target 1.77 -o x"
        );
        assert_eq!(
            const_layout_tests("bindgen h --rust-target 1.78 -o x"),
            "bindgen h --rust-target 1.78 -o x"
        );
        assert_eq!(const_layout_tests("bindgen h -o x"), "bindgen h -o x");
    }

    #[test]
    fn assertions_taken_out_leave_the_kernels_bindings() {
        let with = "#[repr(C)]\npub struct e {}\n#[allow(clippy::unnecessary_operation, clippy::identity_op)]\nconst _: () = {\n    [\"Size of e\"][::core::mem::size_of::<e>() - 0usize];\n    [\"Alignment of e\"][::core::mem::align_of::<e>() - 64usize];\n};\npub struct o {}\n";
        let (text, n) = without_layout_tests(with);
        assert_eq!(text, "#[repr(C)]\npub struct e {}\npub struct o {}\n");
        assert_eq!(n, 2);
        assert_eq!(first_difference(&text, &text), None);
        assert_eq!(first_difference("a\nb\n", "a\nc\n"), Some(2));
    }

    #[test]
    fn the_rustc_command_emits_metadata_alone_from_the_scratch_tree() {
        let cmd = "OBJTREE=/b clippy-driver -Cx --extern ffi --emit=dep-info=rust/.bindings.o.d --emit=obj=rust/bindings.o --emit=metadata=rust/libbindings.rmeta --crate-type rlib -L./rust --crate-name bindings ../src/rust/bindings/lib.rs --sysroot=/dev/null -Zunstable-options ; ./tools/objtool/objtool --hacks=jump_label rust/bindings.o";
        let got = metadata_only(cmd, Path::new("/b"), Path::new("/s"), "rust/bindings.o").unwrap();
        assert_eq!(
            got,
            "OBJTREE=/s clippy-driver -Cx --extern ffi --crate-type rlib -L./rust --crate-name bindings ../src/rust/bindings/lib.rs --sysroot=/dev/null -Zunstable-options --emit=metadata=/s/lib.rmeta"
        );
        assert!(metadata_only(cmd, Path::new("/other"), Path::new("/s"), "x").is_err());
    }

    #[test]
    fn refused_layouts_are_named_once_each() {
        // rustc's refusal of bindgen 0.73's layout assertions (the sched_statistics case).
        let errors = r#"error[E0080]: attempt to compute `1_usize - 64_usize`, which would overflow
   --> /s/rust/bindings/bindings_generated.rs:9:24
    |
9   |     ["Alignment of sched_statistics"][::core::mem::align_of::<sched_statistics>() - 64usize];
    |                        ^^^^^^^^^^^^^^ evaluation of `_` failed here
error[E0080]: attempt to compute `1048_usize - 1072_usize`, which would overflow
    |     ["Offset of field: task_struct::pid"][::core::mem::offset_of!(task_struct, pid) - 1072usize];
    |     ["Offset of field: task_struct::pid"][::core::mem::offset_of!(task_struct, pid) - 1072usize];
note: some other line ["not a layout"]"#;
        assert_eq!(
            wrong_layouts(errors),
            [
                "Alignment of sched_statistics",
                "Offset of field: task_struct::pid"
            ]
        );
    }

    #[test]
    fn a_check_is_recorded_under_the_digest_of_what_it_read() {
        let dir = std::env::temp_dir().join(format!("pci-rig-digest-{}", std::process::id()));
        let files = [
            (
                "rust/bindings/.bindings_generated.rs.cmd",
                "savedcmd_x := bindgen\ndeps := h.h\n",
            ),
            ("rust/bindings/bindings_generated.rs", "pub struct e {}"),
            ("rust/bindings/bindings_helpers_generated.rs", ""),
            ("rust/.bindings.o.cmd", "savedcmd_rust/bindings.o := rustc"),
            ("rust/uapi/.uapi_generated.rs.cmd", "savedcmd_y := bindgen"),
            ("rust/uapi/uapi_generated.rs", ""),
            ("rust/.uapi.o.cmd", "savedcmd_rust/uapi.o := rustc"),
            ("h.h", "struct e {} __attribute__((aligned(64)));"),
        ];
        for (f, text) in files {
            std::fs::create_dir_all(dir.join(f).parent().unwrap()).unwrap();
            std::fs::write(dir.join(f), text).unwrap();
        }
        let d = digest(&dir).unwrap();
        std::fs::write(dir.join("pci-rig-layouts.ok"), format!("{d} 42\n")).unwrap();
        // Recorded: no bindgen runs (there is none here), the count comes back.
        assert_eq!(check(&dir, &[]).unwrap(), (42, false));
        // A header's alignment changed, bindings alike: checked again (and fails here, with no
        // bindgen to run), the record gone.
        std::fs::write(
            dir.join("h.h"),
            "struct e {} __attribute__((aligned(128)));",
        )
        .unwrap();
        assert_ne!(digest(&dir).unwrap(), d);
        assert!(check(&dir, &[]).is_err());
        assert!(!dir.join("pci-rig-layouts.ok").exists());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_saved_command_is_read_from_kbuilds_record() {
        let dir = std::env::temp_dir().join(format!("pci-rig-layouts-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("rust")).unwrap();
        std::fs::write(
            dir.join("rust/.bindings.o.cmd"),
            "savedcmd_rust/bindings.o := OBJTREE=/b rustc x\n\nsource_rust/bindings.o := y\n",
        )
        .unwrap();
        assert_eq!(
            saved_command(&dir, "rust/bindings.o").unwrap(),
            "OBJTREE=/b rustc x"
        );
        assert!(saved_command(&dir, "rust/uapi.o").is_err());
        // Kbuild's escapes are undone.
        assert_eq!(
            unescape("bindgen --attr '$(pound)[cfi_encoding = \"x\"]' && echo $$HOME"),
            "bindgen --attr '#[cfi_encoding = \"x\"]' && echo $HOME"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
