//! Our QEMU plugins, built in one cargo run (release: they run inside
//! every guest's translated code): `mmio-oracle` (`judge::oracle`) and
//! `vcpu-yield`, which the boots of a run of several at once load; and
//! `tcg-coverage` (`run::coverage`).

use crate::host::process::run_logged;
use crate::Paths;
use anyhow::{Context, Result};
use std::path::PathBuf;
use std::process::Command;

/// Where the built plugins are.
pub struct Plugins {
    pub oracle: PathBuf,
    pub vcpu_yield: PathBuf,
    pub coverage: PathBuf,
}

pub fn build(paths: &Paths) -> Result<Plugins> {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    std::fs::create_dir_all(paths.results())?;
    run_logged(
        Command::new(cargo)
            .args(["build", "--release", "--quiet"])
            .args([
                "-p",
                "mmio-oracle",
                "-p",
                "vcpu-yield",
                "-p",
                "tcg-coverage",
            ])
            .current_dir(&paths.root),
        &paths.results().join("plugins-build.log"),
    )
    .context("building the QEMU plugins (mmio-oracle, vcpu-yield, tcg-coverage)")?;
    let release = paths.cargo_release();
    Ok(Plugins {
        oracle: release.join("libmmio_oracle.so"),
        vcpu_yield: release.join("libvcpu_yield.so"),
        coverage: release.join("libtcg_coverage.so"),
    })
}
