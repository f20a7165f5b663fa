//! Running host commands with errors that say what ran and what it printed.

use anyhow::{bail, Context, Result};
use std::path::Path;
use std::process::{Command, Stdio};

/// Runs `cmd` to completion, capturing its output. On failure the error names
/// the command and shows the last lines it printed.
pub fn run(cmd: &mut Command) -> Result<String> {
    let (shown, status, text) = output(cmd)?;
    if !status.success() {
        bail!("`{shown}` failed ({status}):\n{}", tail(&text, 30));
    }
    Ok(text)
}

/// Like [`run`], but keeps the whole output in `log` as well, whatever the exit (the error
/// shows only its last lines).
pub fn run_logged(cmd: &mut Command, log: &Path) -> Result<String> {
    let (shown, status, text) = output(cmd)?;
    std::fs::write(log, format!("$ {shown}\n{text}")).ok();
    if !status.success() {
        bail!("`{shown}` failed ({status}):\n{}", tail(&text, 30));
    }
    Ok(text)
}

/// Runs `cmd` with no input; the command as shown, how it ended, and all it printed
/// (standard output, then standard error).
fn output(cmd: &mut Command) -> Result<(String, std::process::ExitStatus, String)> {
    let shown = show(cmd);
    let out = cmd
        .stdin(Stdio::null())
        .output()
        .with_context(|| format!("could not start `{shown}`"))?;
    let mut text = String::from_utf8_lossy(&out.stdout).into_owned();
    text.push_str(&String::from_utf8_lossy(&out.stderr));
    Ok((shown, out.status, text))
}

/// The command as a shell line that can be pasted to run it again.
pub fn show(cmd: &Command) -> String {
    std::iter::once(cmd.get_program())
        .chain(cmd.get_args())
        .map(|a| quote(&a.to_string_lossy()))
        .collect::<Vec<_>>()
        .join(" ")
}

fn quote(word: &str) -> String {
    let plain = |c: char| c.is_ascii_alphanumeric() || "-_./=:,+@%".contains(c);
    if !word.is_empty() && word.chars().all(plain) {
        word.to_string()
    } else {
        format!("'{}'", word.replace('\'', "'\\''"))
    }
}

/// Whether `name` is an executable on PATH.
pub fn on_path(name: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|p| std::env::split_paths(&p).any(|d| d.join(name).is_file()))
}

pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

pub fn tail(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_failed_command_leaves_all_it_printed_in_its_log() {
        let log = std::env::temp_dir().join(format!("pci-rig-run-logged-{}", std::process::id()));
        let mut c = std::process::Command::new("sh");
        c.args([
            "-c",
            "printf 'test %s: FAILED\\n' result; for i in $(seq 1 60); do echo compiling $i >&2; done; exit 1",
        ]);
        let e = super::run_logged(&mut c, &log).unwrap_err();
        let text = std::fs::read_to_string(&log).unwrap();
        std::fs::remove_file(&log).unwrap();
        // The error keeps the last lines; the log keeps the line that says how the tests ended.
        assert!(!format!("{e:#}").contains("test result"), "{e:#}");
        assert!(text.contains("test result: FAILED") && text.contains("compiling 60"));
    }

    #[test]
    fn shows_commands_as_pasteable_shell() {
        let mut c = std::process::Command::new("qemu");
        c.args([
            "-append",
            "console=ttyS0 panic=-1",
            "-device",
            "{\"a\":1}",
            "it's",
        ]);
        assert_eq!(
            super::show(&c),
            r#"qemu -append 'console=ttyS0 panic=-1' -device '{"a":1}' 'it'\''s'"#
        );
    }
}
