//! pci-rig's harness: provisions the host, builds the guest kernel and
//! initramfs, boots guests under QEMU and judges what they print.
//! `xtask` is only its command line; everything it does lives here.

pub mod guest;
pub mod host;
pub mod kernel;
pub mod mutate;
pub mod run;

// The vocabulary, under the names the rig's modules have always used.
pub use vocab::{arch, matrix, scenario, sweep, verdict};
// The judge, under the name the rig's modules have always used.
pub use judge;

use anyhow::{bail, Result};
use std::path::PathBuf;

/// Where things live: the checkout and the cache outside it.
#[derive(Clone, Debug)]
pub struct Paths {
    pub root: PathBuf,
    pub cache: PathBuf,
}

impl Paths {
    /// The cache is `$PCI_RIG_CACHE`, else `$XDG_CACHE_HOME/pci-rig`, else
    /// `~/.cache/pci-rig`; never inside the checkout.
    pub fn new(root: PathBuf) -> Result<Self> {
        let var = |k: &str| {
            std::env::var_os(k)
                .filter(|v| !v.is_empty())
                .map(PathBuf::from)
        };
        let cache = var("PCI_RIG_CACHE")
            .or_else(|| var("XDG_CACHE_HOME").map(|x| x.join("pci-rig")))
            .or_else(|| var("HOME").map(|h| h.join(".cache/pci-rig")))
            .unwrap_or_else(|| PathBuf::from("/var/tmp/pci-rig-cache"));
        let cache = std::path::absolute(cache)?;
        if cache.starts_with(&root) {
            bail!(
                "the cache {} is inside the checkout; point PCI_RIG_CACHE elsewhere",
                cache.display()
            );
        }
        Ok(Paths { root, cache })
    }

    /// `target/pci-rig`, where runs leave their results.
    pub fn results(&self) -> PathBuf {
        self.root.join("target/pci-rig")
    }

    /// Where `cargo build --release` run in the checkout puts its binaries: under
    /// `$CARGO_TARGET_DIR` when it is set (the builds inherit it), else `target`.
    pub fn cargo_release(&self) -> PathBuf {
        let target = std::env::var_os("CARGO_TARGET_DIR")
            .filter(|v| !v.is_empty())
            .map_or_else(|| self.root.join("target"), |t| self.root.join(t));
        target.join("release")
    }
}
