//! The workspace's own tests, run beside the boots, and the pure crates' lint.

use super::*;
use crate::Paths;
use report::{Outcome, Timings, Verdict};
use std::path::Path;
use std::process::Command;
use std::time::Instant;

/// The crates that must not spawn, touch files or read a clock: their `clippy.toml` bans those
/// calls, and [`cargo_test`] lints them for it.
pub const PURE_CRATES: &[&str] = &["vocab", "judge"];

/// `cargo test --workspace`, then clippy over [`PURE_CRATES`] with only their bans as errors;
/// the output of both in `cargo-test.log` (it runs while the guests boot; a failure prints the
/// log's tail).
pub(super) fn cargo_test(paths: &Paths, dir: &Path) -> Outcome {
    eprintln!(
        "test: cargo test --workspace, clippy's bans on {} (output: cargo-test.log)",
        PURE_CRATES.join(", ")
    );
    let started = Instant::now();
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let log = dir.join("cargo-test.log");
    let mut lint = vec!["clippy"];
    for c in PURE_CRATES {
        lint.extend(["-p", c]);
    }
    lint.extend([
        "--lib",
        "--",
        "-A",
        "clippy::all",
        "-D",
        "clippy::disallowed_methods",
        "-D",
        "clippy::disallowed_types",
    ]);
    let status = std::fs::File::create(&log).and_then(|out| {
        for args in [&["test", "--workspace"][..], &lint] {
            let s = Command::new(&cargo)
                .args(args)
                .current_dir(&paths.root)
                .stdin(std::process::Stdio::null())
                .stdout(out.try_clone()?)
                .stderr(out.try_clone()?)
                .status()?;
            if !s.success() {
                return Ok(s);
            }
        }
        Ok(std::process::ExitStatus::default())
    });
    let (verdict, reason) = match status {
        Ok(s) if s.success() => (
            Verdict::Pass,
            "all workspace tests passed; the pure crates spawn, open and time nothing".to_string(),
        ),
        Ok(s) => {
            let text = std::fs::read_to_string(&log).unwrap_or_default();
            (
                Verdict::Fail,
                format!(
                    "cargo test --workspace or the pure crates' lint failed ({s}); the end of {}:\n{}",
                    log.display(),
                    crate::host::process::tail(&text, 40)
                ),
            )
        }
        Err(e) => (Verdict::Fail, format!("could not run cargo: {e}")),
    };
    eprintln!(
        "test: host cargo-test: {verdict:?} in {:.1} s — {}",
        started.elapsed().as_secs_f64(),
        reason.lines().next().unwrap_or("")
    );
    Outcome {
        arch: "host".into(),
        scenario: "cargo-test".into(),
        verdict,
        duration_s: started.elapsed().as_secs_f64(),
        log: dir.display().to_string(),
        reason,
        timings: Timings::new(),
        findings: Default::default(),
    }
}
