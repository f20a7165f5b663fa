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

pub fn show(cmd: &Command) -> String {
    let mut s = cmd.get_program().to_string_lossy().into_owned();
    for a in cmd.get_args() {
        s.push(' ');
        s.push_str(&a.to_string_lossy());
    }
    s
}

pub fn tail(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// Whether `name` is an executable on PATH.
pub fn on_path(name: &str) -> bool {
    std::env::var_os("PATH").is_some_and(|p| std::env::split_paths(&p).any(|d| d.join(name).is_file()))
}

pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}
