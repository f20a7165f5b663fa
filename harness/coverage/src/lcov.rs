//! The tally as an lcov tracefile (what `genhtml` and most coverage tools
//! read): per file, each function with the boots that ran it, each line
//! with the boots that ran it.

use crate::tally::Tally;
use std::fmt::Write;

/// The tracefile, with `root` joined before each file's name (genhtml finds
/// the sources by it).
pub fn write(tally: &Tally, test: &str, root: &str) -> String {
    let mut out = String::new();
    for (name, file) in &tally.files {
        let path = if name.starts_with('/') || root.is_empty() {
            name.clone()
        } else {
            format!("{root}/{name}")
        };
        let _ = writeln!(out, "TN:{test}\nSF:{path}");
        for (f, v) in &file.functions {
            let _ = writeln!(out, "FN:{},{f}", v.line);
        }
        for (f, v) in &file.functions {
            let _ = writeln!(out, "FNDA:{},{f}", v.boots);
        }
        let _ = writeln!(
            out,
            "FNF:{}\nFNH:{}",
            file.functions.len(),
            file.functions_hit()
        );
        for (line, n) in &file.lines {
            let _ = writeln!(out, "DA:{line},{n}");
        }
        let _ = writeln!(
            out,
            "LF:{}\nLH:{}\nend_of_record",
            file.lines.len(),
            file.lines_hit()
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use crate::tally::{File, Function, Tally};
    use std::collections::BTreeMap;

    #[test]
    fn a_file_becomes_one_record() {
        let mut t = Tally::default();
        t.files.insert(
            "guest-kernel/driver/pci_rig.rs".into(),
            File {
                lines: BTreeMap::from([(3, 2), (4, 0)]),
                functions: BTreeMap::from([(
                    "pci_rig::probe".into(),
                    Function { line: 3, boots: 2 },
                )]),
            },
        );
        assert_eq!(
            super::write(&t, "run", "/repo"),
            "TN:run\nSF:/repo/guest-kernel/driver/pci_rig.rs\nFN:3,pci_rig::probe\n\
             FNDA:2,pci_rig::probe\nFNF:1\nFNH:1\nDA:3,2\nDA:4,0\nLF:2\nLH:1\nend_of_record\n"
        );
    }
}
