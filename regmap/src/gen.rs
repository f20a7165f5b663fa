//! The files generated from the register map, and the check that they are current.
//!
//! Whole files are written as they are; Markdown tables replace the text between a pair of
//! marker comments (`<!-- regmap:NAME begin … -->` … `<!-- regmap:NAME end -->`) and leave the
//! rest of the document alone.

use crate::{Group, Unit, ERRORS, GROUPS, OPCODES, REGISTERS};
use std::fmt::Write as _;
use std::path::Path;

/// The command that rewrites every generated file.
pub const COMMAND: &str = "cargo xtask regs";
/// Where the table lives.
pub const SOURCE: &str = "regmap/src/lib.rs";

/// The driver's register module (the bench module's build copy gets it too).
pub const DRIVER_REGS: &str = "guest-kernel/driver/regs.rs";
/// Sourced by the guest's init, so scenarios can name registers.
pub const SHELL_REGS: &str = "images/regs.sh";
/// The register map's documentation; its tables are generated.
pub const REGISTERS_MD: &str = "qemu-device/REGISTERS.md";

/// One generated piece of text and where it goes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Output {
    /// A whole file, relative to the workspace root.
    File { path: &'static str, text: String },
    /// The lines between the markers named `name` in the file at `path`.
    Section {
        path: &'static str,
        name: &'static str,
        text: String,
    },
}

impl Output {
    pub fn path(&self) -> &'static str {
        match self {
            Output::File { path, .. } | Output::Section { path, .. } => path,
        }
    }

    /// The file's new content, given its current one.
    pub fn apply(&self, current: Option<&str>) -> Result<String, String> {
        match self {
            Output::File { text, .. } => Ok(text.clone()),
            Output::Section { path, name, text } => {
                let current = current.ok_or_else(|| format!("{path} does not exist"))?;
                splice(current, name, text).map_err(|e| format!("{path}: {e}"))
            }
        }
    }
}

fn begin_marker(name: &str) -> String {
    format!("<!-- regmap:{name} begin: generated from {SOURCE} by `{COMMAND}`; edit the table there -->")
}

fn end_marker(name: &str) -> String {
    format!("<!-- regmap:{name} end -->")
}

/// Replaces what is between the markers named `name` with `text`.
pub fn splice(doc: &str, name: &str, text: &str) -> Result<String, String> {
    let (begin, end) = (begin_marker(name), end_marker(name));
    let missing = |m: &str| {
        format!(
            "the marker line `{m}` is missing; put the begin and end markers where the table goes"
        )
    };
    let b = doc.find(&begin).ok_or_else(|| missing(&begin))?;
    let after_begin = b + begin.len();
    let e = doc[after_begin..]
        .find(&end)
        .map(|i| after_begin + i)
        .ok_or_else(|| missing(&end))?;
    Ok(format!("{}\n{text}{}", &doc[..after_begin], &doc[e..]))
}

/// Every generated file and section.
pub fn outputs() -> Vec<Output> {
    vec![
        Output::File {
            path: DRIVER_REGS,
            text: driver_regs(),
        },
        Output::File {
            path: SHELL_REGS,
            text: shell_regs(),
        },
        Output::Section {
            path: REGISTERS_MD,
            name: "registers",
            text: register_table(),
        },
        Output::Section {
            path: REGISTERS_MD,
            name: "opcodes",
            text: code_table(
                &OPCODES,
                "Opcode",
                "OP_",
                "Effect on BAR2[OP_OFFSET .. OP_OFFSET + OP_LENGTH]",
            ),
        },
        Output::Section {
            path: REGISTERS_MD,
            name: "errors",
            text: code_table(&ERRORS, "Error code", "ERR_", "Cause"),
        },
    ]
}

/// A generated file: its path, what it holds now (`None`: missing), what it should hold.
type Rendered = (&'static str, Option<String>, String);

/// Applies every output to the files under `root` in turn (several sections share a file).
fn render_all(root: &Path) -> Result<Vec<Rendered>, String> {
    let mut files: Vec<Rendered> = Vec::new();
    for out in outputs() {
        let path = out.path();
        let i = match files.iter().position(|f| f.0 == path) {
            Some(i) => i,
            None => {
                let old = std::fs::read_to_string(root.join(path)).ok();
                files.push((path, old.clone(), old.unwrap_or_default()));
                files.len() - 1
            }
        };
        let current = (files[i].1.is_some() || matches!(out, Output::File { .. }))
            .then(|| files[i].2.clone());
        files[i].2 = out.apply(current.as_deref())?;
    }
    Ok(files)
}

/// The generated files under `root` that differ from what the table gives, each with what to
/// do about it; empty when all are current.
pub fn drift(root: &Path) -> Result<Vec<String>, String> {
    Ok(render_all(root)?
        .into_iter()
        .filter(|(_, old, new)| old.as_ref() != Some(new))
        .map(|(path, old, _)| {
            let what = if old.is_none() {
                "is missing"
            } else {
                "differs from the register table"
            };
            format!("{path} {what} ({SOURCE}); run `{COMMAND}` to regenerate it")
        })
        .collect())
}

/// Rewrites the generated files under `root` that changed; returns their paths.
pub fn write(root: &Path) -> Result<Vec<&'static str>, String> {
    let mut written = Vec::new();
    for (path, old, new) in render_all(root)? {
        if old.as_ref() != Some(&new) {
            std::fs::write(root.join(path), &new).map_err(|e| format!("writing {path}: {e}"))?;
            written.push(path);
        }
    }
    Ok(written)
}

fn rust_type(unit: Unit) -> &'static str {
    match unit {
        Unit::Value => "u32",
        Unit::Bytes => "usize",
    }
}

/// The guest driver's module: offsets as `usize` (what `Bar::readl` takes), values as `u32`.
fn driver_regs() -> String {
    let mut s = String::new();
    s.push_str("// SPDX-License-Identifier: GPL-2.0\n\n");
    let _ = writeln!(
        s,
        "// @generated from {SOURCE} by `{COMMAND}`: edit the table there, not this file."
    );
    s.push_str("\n//! The register map of pci-rig's device (`qemu-device/REGISTERS.md`).\n");
    s.push_str("//!\n//! Not every user needs every name.\n\n");
    s.push_str("#![allow(dead_code)]\n\n");
    s.push_str("/// BAR0 register offsets, in bytes.\npub(crate) mod reg {\n");
    for (i, r) in REGISTERS.iter().enumerate() {
        if i > 0 {
            s.push('\n');
        }
        let _ = writeln!(s, "    /// {}. {}", r.access.name(), r.behaviour);
        let _ = writeln!(
            s,
            "    pub(crate) const {}: usize = {:#05x};",
            r.name, r.offset
        );
    }
    s.push_str("}\n");
    for g in GROUPS {
        let _ = writeln!(s, "\n// {}", g.doc);
        for c in g.consts {
            let _ = writeln!(s, "\n/// {}", c.doc.trim());
            let _ = writeln!(
                s,
                "pub(crate) const {}: {} = {:#x};",
                c.name,
                rust_type(g.unit),
                c.value
            );
        }
    }
    s
}

/// Shell variables: `rd bar0 $SCRATCH`, `wr bar0 $INT_RAISE $INT_SOFT`.
fn shell_regs() -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "# @generated from {SOURCE} by `{COMMAND}`: edit the table there, not this file."
    );
    s.push_str("# The register map of pci-rig's device for guest scripts; /init sources it.\n");
    s.push_str("# BAR0 register offsets.\n");
    for r in REGISTERS {
        let _ = writeln!(s, "{}={:#x} # {}", r.name, r.offset, r.access.name());
    }
    for g in GROUPS {
        let _ = writeln!(s, "# {}", g.doc);
        for c in g.consts {
            let _ = writeln!(s, "{}={:#x}", c.name, c.value);
        }
    }
    s
}

fn register_table() -> String {
    let mut s = String::from(
        "| Offset | Name | Access | Reset | Behaviour |\n| --- | --- | --- | --- | --- |\n",
    );
    for r in REGISTERS {
        let reset = match r.reset {
            None => "—".to_string(),
            Some(0) => "`0`".to_string(),
            Some(v) => format!("`{v:#010x}`"),
        };
        let _ = writeln!(
            s,
            "| {:#05x} | {} | {} | {reset} | {} |",
            r.offset,
            r.name,
            r.access.name(),
            r.behaviour
        );
    }
    s
}

fn code_table(g: &Group, code: &str, prefix: &str, effect: &str) -> String {
    let mut s = format!("| {code} | Name | {effect} |\n| --- | --- | --- |\n");
    for c in g.consts {
        let name = c.name.strip_prefix(prefix).unwrap_or(c.name);
        let _ = writeln!(s, "| {} | {name} | {} |", c.value, c.doc.trim());
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    fn root() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
    }

    /// The checked-in files are what the table gives.
    #[test]
    fn generated_files_are_current() {
        let drift = drift(&root()).unwrap();
        assert!(drift.is_empty(), "{}", drift.join("\n"));
    }

    #[test]
    fn a_hand_edited_table_is_drift() {
        let text = "intro\n<!-- regmap:errors begin: generated from regmap/src/lib.rs by `cargo xtask regs`; edit the table there -->\nold\n<!-- regmap:errors end -->\ntail\n";
        let out = Output::Section {
            path: REGISTERS_MD,
            name: "errors",
            text: "new\n".into(),
        };
        assert_eq!(
            out.apply(Some(text)).unwrap(),
            text.replace("old", "new"),
            "only the section changes"
        );
        let e = out.apply(Some("no markers")).unwrap_err();
        assert!(
            e.contains("qemu-device/REGISTERS.md") && e.contains("regmap:errors begin"),
            "{e}"
        );

        // A tree of its own: REGISTERS.md with only the markers, the rest missing.
        let dir = std::env::temp_dir().join(format!("regmap-drift-{}", std::process::id()));
        for f in [DRIVER_REGS, SHELL_REGS, REGISTERS_MD] {
            std::fs::create_dir_all(dir.join(f).parent().unwrap()).unwrap();
        }
        let md: String = ["registers", "opcodes", "errors"]
            .iter()
            .map(|n| format!("## {n}\n\n{}\n{}\n\n", begin_marker(n), end_marker(n)))
            .collect();
        std::fs::write(dir.join(REGISTERS_MD), &md).unwrap();
        let d = drift(&dir).unwrap();
        assert!(
            d[0].starts_with("guest-kernel/driver/regs.rs is missing"),
            "{d:?}"
        );
        assert_eq!(d.len(), 3, "{d:?}");
        assert_eq!(
            write(&dir).unwrap(),
            vec![DRIVER_REGS, SHELL_REGS, REGISTERS_MD]
        );
        assert_eq!(drift(&dir).unwrap(), Vec::<String>::new());
        let md = std::fs::read_to_string(dir.join(REGISTERS_MD)).unwrap();
        assert!(md.starts_with("## registers\n\n<!-- regmap:registers begin"));
        assert!(md.contains("| 0x014 | STATUS | RO | `0` |"), "{md}");
        let sh = std::fs::read_to_string(dir.join(SHELL_REGS)).unwrap();
        std::fs::write(
            dir.join(SHELL_REGS),
            sh.replace("SCRATCH=0x8", "SCRATCH=0xc"),
        )
        .unwrap();
        let md = std::fs::read_to_string(dir.join(REGISTERS_MD)).unwrap();
        std::fs::write(
            dir.join(REGISTERS_MD),
            md.replace("| 2 | BAD_RANGE", "| 4 | BAD_RANGE"),
        )
        .unwrap();
        let d = drift(&dir).unwrap();
        assert_eq!(d.len(), 2, "{d:?}");
        assert!(d[0].starts_with("images/regs.sh differs") && d[0].contains("cargo xtask regs"));
        assert!(d[1].starts_with("qemu-device/REGISTERS.md differs"));
        assert_eq!(write(&dir).unwrap(), vec![SHELL_REGS, REGISTERS_MD]);
        assert_eq!(drift(&dir).unwrap(), Vec::<String>::new());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
