//! Pulling the compiler's message out of a failed kernel build, so the user
//! sees the failing file and the error instead of a wall of make output.

/// The first compiler error (with its context) and the target make gave up
/// on, or `None` when the log holds no recognisable error.
pub fn summarize(log: &str) -> Option<String> {
    let lines: Vec<&str> = log.lines().collect();
    let start = lines.iter().position(|l| is_error(l));
    let target = lines
        .iter()
        .find_map(|l| l.split("*** [").nth(1)?.split(']').next())
        .map(|t| format!("make stopped at: {t}"));
    let message = start.map(|i| {
        // rustc's message runs to the next blank line; a C compiler's is the
        // error line plus the source excerpt below it.
        let end = lines[i + 1..]
            .iter()
            .position(|l| l.trim().is_empty() || (is_error(l) && !l.starts_with(' ')))
            .map_or(lines.len(), |n| i + 1 + n)
            .min(i + 20);
        lines[i..end].join("\n")
    });
    match (message, target) {
        (None, None) => None,
        (m, t) => Some([m, t].into_iter().flatten().collect::<Vec<_>>().join("\n")),
    }
}

/// Every compiler or linter warning, one line each with its location:
/// rustc/clippy's `warning: …` followed by `--> file:line`, or a C
/// compiler's `file:line: warning: …`. rustc's closing count is skipped.
pub fn warnings(log: &str) -> Vec<String> {
    let lines: Vec<&str> = log.lines().collect();
    let mut found = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        if line.contains(": warning:") {
            found.push(line.trim().to_string());
        } else if let Some(msg) = line.strip_prefix("warning: ") {
            if msg.contains("warning emitted") || msg.contains("warnings emitted") {
                continue;
            }
            let at = lines[i + 1..]
                .iter()
                .take(3)
                .find_map(|l| l.trim().strip_prefix("--> "));
            found.push(match at {
                Some(at) => format!("{at}: warning: {msg}"),
                None => format!("warning: {msg}"),
            });
        }
    }
    found
}

/// Whether the compiler, the linter or modpost said why the build in `log`
/// failed: an error or a warning of theirs, not make killed or cut short.
pub fn diagnosed(log: &str) -> bool {
    log.lines().any(is_error) || !warnings(log).is_empty()
}

fn is_error(line: &str) -> bool {
    line.contains(": error:")
        || line.contains(": fatal error:")
        || line.starts_with("error[E")
        || line.starts_with("error: ")
        || line.contains("ERROR: modpost:")
}

#[cfg(test)]
mod tests {
    use super::{diagnosed, summarize, warnings};

    #[test]
    fn rust_errors_show_the_message_and_location() {
        let log = "  RUSTC L rust/kernel.o\nerror[E0425]: cannot find value `x` in this scope\n  --> rust/kernel/pci.rs:10:5\n   |\n10 |     x\n   |     ^ not found\n\nerror: aborting due to 1 previous error\nmake[2]: *** [rust/Makefile:480: rust/kernel.o] Error 1\nmake[1]: *** [Makefile:1234: prepare] Error 2\n";
        let s = summarize(log).unwrap();
        assert!(s.starts_with("error[E0425]: cannot find value `x`"), "{s}");
        assert!(s.contains("--> rust/kernel/pci.rs:10:5"));
        assert!(!s.contains("aborting"));
        assert!(
            s.ends_with("make stopped at: rust/Makefile:480: rust/kernel.o"),
            "{s}"
        );
    }

    #[test]
    fn c_errors_show_file_line_and_message() {
        let log = "  CC      drivers/pci/probe.o\ndrivers/pci/probe.c:12:1: error: expected ';' before '}' token\n   12 | }\n      | ^\nmake[4]: *** [scripts/Makefile.build:229: drivers/pci/probe.o] Error 1\n";
        let s = summarize(log).unwrap();
        assert!(
            s.starts_with("drivers/pci/probe.c:12:1: error: expected ';'"),
            "{s}"
        );
        assert!(s.contains("make stopped at: scripts/Makefile.build:229: drivers/pci/probe.o"));
    }

    #[test]
    fn warnings_are_listed_with_their_location() {
        let log = "  RUSTC [M] pci_rig.o\nwarning: unused variable: `x`\n  --> pci_rig.rs:5:9\n   |\n\nwarning: 1 warning emitted\n\ndrv.c:3:5: warning: unused variable 'y' [-Wunused-variable]\n  MODPOST Module.symvers\n";
        assert_eq!(
            warnings(log),
            vec![
                "pci_rig.rs:5:9: warning: unused variable: `x`".to_string(),
                "drv.c:3:5: warning: unused variable 'y' [-Wunused-variable]".to_string(),
            ]
        );
        assert!(warnings("  CC foo.o\n  LD [M] foo.ko\n").is_empty());
    }

    #[test]
    fn clean_logs_have_nothing_to_say() {
        assert_eq!(summarize("  CC foo.o\n  LD vmlinux\n"), None);
        assert!(!diagnosed("  CC foo.o\n  LD vmlinux\n"));
    }

    #[test]
    fn only_the_compilers_own_words_say_why_a_build_failed() {
        assert!(diagnosed(
            "error[E0308]: mismatched types\n  --> a.rs:1:1\n"
        ));
        assert!(diagnosed(
            "ERROR: modpost: \"rust_build_error\" [m.ko] undefined!\n"
        ));
        assert!(diagnosed("w.c:1:5: warning: unused variable 'x'\n"));
        // make killed, or a compiler that died, says nothing of the source.
        assert!(!diagnosed(
            "  RUSTC [M] m.o\nmake[2]: *** [scripts/Makefile.build:244: m.o] Killed\n"
        ));
        assert!(!diagnosed("make: *** [Makefile:224: __sub-make] Error 2\n"));
    }
}
