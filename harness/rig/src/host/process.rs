//! Running host commands with errors that say what ran and what it printed.

use anyhow::{bail, Context, Result};
use std::path::Path;
use std::process::{Command, Stdio};

/// Runs `cmd` to completion, capturing its output. On failure the error names
/// the command and shows the last lines it printed.
pub fn run(cmd: &mut Command) -> Result<String> {
    let shown = show(cmd);
    let out = cmd
        .stdin(Stdio::null())
        .output()
        .with_context(|| format!("could not start `{shown}`"))?;
    let mut text = String::from_utf8_lossy(&out.stdout).into_owned();
    text.push_str(&String::from_utf8_lossy(&out.stderr));
    if !out.status.success() {
        bail!("`{shown}` failed ({}):\n{}", out.status, tail(&text, 30));
    }
    Ok(text)
}

/// Like [`run`], but keeps the whole output in `log` as well.
pub fn run_logged(cmd: &mut Command, log: &Path) -> Result<String> {
    let shown = show(cmd);
    let result = run(cmd);
    let text = match &result {
        Ok(t) => t.clone(),
        Err(e) => format!("{e:#}"),
    };
    std::fs::write(log, format!("$ {shown}\n{text}")).ok();
    result
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
