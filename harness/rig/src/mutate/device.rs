//! Mutants of the device model (`qemu-device/src/…`): laid into a scratch copy of the
//! `qemu-device` and `regmap` crates (a workspace of their own), whose unit tests run first
//! (`cargo xtask test` runs them too) and whose server then serves the mutant's boots. The
//! builds share one target folder under the checkout's `target/`, so a mutant recompiles the
//! device crate alone.

use crate::host::process::run_logged;
use crate::Paths;
use anyhow::{Context, Result};
use std::path::{Path, PathBuf};
use std::process::Command;

/// The crates a device mutant's scratch workspace holds.
const CRATES: &[&str] = &["qemu-device", "regmap"];

/// Whether `file` is in the device model (a device mutant's).
pub fn is_device(file: &str) -> bool {
    file.starts_with("qemu-device/src/")
}

/// Copies the device's crates from `root` into `scratch` as a workspace of their own (the
/// checkout's lock file keeps the same dependency versions). Returns the workspace.
pub fn lay_crates(root: &Path, scratch: &Path) -> Result<PathBuf> {
    let ws = scratch.join("device");
    for c in CRATES {
        for part in ["Cargo.toml", "src"] {
            let from = root.join(c).join(part);
            let to = ws.join(c).join(part);
            if from.is_dir() {
                super::copy_dir(&from, &to)?;
            } else {
                std::fs::create_dir_all(to.parent().expect("a crate folder"))?;
                std::fs::copy(&from, &to).with_context(|| format!("copying {}", from.display()))?;
            }
        }
    }
    std::fs::copy(root.join("Cargo.lock"), ws.join("Cargo.lock"))?;
    std::fs::write(
        ws.join("Cargo.toml"),
        format!(
            "# A device mutant's workspace (cargo xtask mutate).\n[workspace]\nresolver = \"2\"\nmembers = [{}]\n\n[workspace.package]\nedition = \"2021\"\nlicense = \"GPL-2.0-only\"\npublish = false\n",
            CRATES.iter().map(|c| format!("\"{c}\"")).collect::<Vec<_>>().join(", ")
        ),
    )?;
    Ok(ws)
}

/// What building and unit-testing the mutated device gave.
pub enum Built {
    /// It did not build, or built with a warning: why.
    Unviable(String),
    /// Its own unit tests failed: the first failure.
    TestsFailed(String),
    /// The server binary, copied out of the shared target folder.
    Server(PathBuf),
}

/// Runs the mutated crates' unit tests, then builds the server, in the shared target folder.
pub fn build(paths: &Paths, ws: &Path) -> Result<Built> {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let target = paths.root.join("target/mutants-device");
    let cmd = |args: &[&str]| {
        let mut c = Command::new(&cargo);
        c.args(args)
            .current_dir(ws)
            .env("CARGO_TARGET_DIR", &target)
            // Warnings are the mutant's to answer for: shown, then counted unviable.
            .env("RUSTFLAGS", "-D warnings");
        c
    };
    let log = ws.join("build.log");
    if let Err(e) = run_logged(
        &mut cmd(&[
            "build",
            "--release",
            "-p",
            "qemu-device",
            "--bin",
            "pci-rig-device",
        ]),
        &log,
    ) {
        return Ok(Built::Unviable(format!(
            "the device did not build (or warned): {}",
            first_error(&format!("{e:#}"))
        )));
    }
    let tests = ws.join("unit-tests.log");
    if let Err(e) = run_logged(&mut cmd(&["test", "-p", "qemu-device", "--lib"]), &tests) {
        // The whole output: on a cold target its compile lines alone outrun the error's tail.
        let text = std::fs::read_to_string(&tests).unwrap_or_else(|_| format!("{e:#}"));
        // Tests that ran say how they ended; tests that did not build say nothing of it.
        if !text.contains("test result:") {
            return Ok(Built::Unviable(format!(
                "the device's tests did not build: {}",
                first_error(&text)
            )));
        }
        return Ok(Built::TestsFailed(first_failure(&text)));
    }
    let server = ws.join("pci-rig-device");
    std::fs::copy(target.join("release/pci-rig-device"), &server)
        .context("copying the mutant's server out of the shared target folder")?;
    Ok(Built::Server(server))
}

fn first_error(text: &str) -> String {
    text.lines()
        .find(|l| l.starts_with("error") || l.starts_with("warning"))
        .unwrap_or("(no error line; see build.log)")
        .to_string()
}

/// The failing tests' names, from the `failures:` list that closes cargo test's output.
fn first_failure(text: &str) -> String {
    let names: Vec<&str> = text
        .rsplit_once("\nfailures:\n")
        .map(|(_, list)| {
            list.lines()
                .take_while(|l| l.starts_with("    "))
                .map(str::trim)
                .collect()
        })
        .unwrap_or_default();
    if names.is_empty() {
        return "the device's unit tests failed (see unit-tests.log)".to_string();
    }
    format!("the device's unit tests failed: {}", names.join(", "))
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_failing_tests_are_named() {
        let out = "test a ... ok\n\nfailures:\n\n---- model::x stdout ----\npanicked\n\nfailures:\n    model::x\n    model::y\n\ntest result: FAILED. 1 passed; 2 failed";
        assert_eq!(
            super::first_failure(out),
            "the device's unit tests failed: model::x, model::y"
        );
    }
}
