//! A run's coverage from its boots' folders alone: each folder's manifest,
//! the plugin's record and the console.

use crate::boot::{self, BLOCKS};
use crate::image::Image;
use crate::manifest::{Manifest, MANIFEST};
use crate::tally::Tally;
use anyhow::{Context, Result};
use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

/// Whether a vmlinux function is measured: the Rust `kernel` crate's
/// (vmlinux's other code is the kernel's, not ours).
pub fn in_kernel_crate(name: &str) -> bool {
    name.trim_start_matches('<').starts_with("kernel::")
}

/// Counts the boots whose folders are `dirs` (their console in the file
/// `console`); a folder without a manifest booted without the plugin and is
/// not counted.
pub fn tally(dirs: &[PathBuf], console: &str) -> Result<Tally> {
    let mut images: HashMap<PathBuf, Image> = HashMap::new();
    let mut measured: HashSet<String> = HashSet::new();
    let mut tally = Tally::default();
    for dir in dirs {
        let Ok(text) = std::fs::read_to_string(dir.join(MANIFEST)) else {
            continue;
        };
        let manifest = Manifest::parse(&text).with_context(|| dir.display().to_string())?;
        for (name, path, digest) in &manifest.images {
            if !images.contains_key(path) {
                images.insert(path.clone(), read(name, path, *digest)?);
            }
        }
        let these: Vec<&Image> = manifest.images.iter().map(|(_, p, _)| &images[p]).collect();
        let place = |raw: &str| manifest.place(raw);
        if measured.insert(text.clone()) {
            tally.measure(&these, &place);
        }
        let Ok(record) = std::fs::read_to_string(dir.join(BLOCKS)) else {
            continue;
        };
        let blocks =
            boot::blocks(&record).with_context(|| dir.join(BLOCKS).display().to_string())?;
        let lines: Vec<String> = std::fs::read_to_string(dir.join(console))
            .unwrap_or_default()
            .lines()
            .map(str::to_string)
            .collect();
        let loads = boot::loads(&lines).with_context(|| dir.join(console).display().to_string())?;
        tally.add(&these, &place, (&blocks, &loads), &scenario_of(dir));
    }
    Ok(tally)
}

fn read(name: &str, path: &Path, digest: u64) -> Result<Image> {
    let bytes = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
    if Manifest::digest(&bytes) != digest {
        anyhow::bail!(
            "{} is not the file this run booted (rebuilt since): its coverage cannot be read again",
            path.display()
        );
    }
    let keep: &dyn Fn(&str) -> bool = if name == "vmlinux" {
        &in_kernel_crate
    } else {
        &|_| true
    };
    Image::read(name, &bytes, keep)
}

/// The scenario a boot's folder is of: `ARCH-SCENARIO`, or
/// `ARCH-SCENARIO-NNN` when repeated.
pub fn scenario_of(dir: &Path) -> String {
    let name = dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let scenario = name.split_once('-').map_or(name.as_str(), |(_, s)| s);
    match scenario.rsplit_once('-') {
        Some((s, n)) if n.len() == 3 && n.bytes().all(|b| b.is_ascii_digit()) => s.to_string(),
        _ => scenario.to_string(),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_folder_names_its_scenario() {
        let of = |s: &str| super::scenario_of(std::path::Path::new(s));
        assert_eq!(of("/r/x86_64-probe"), "probe");
        assert_eq!(
            of("/r/arm64-mainline-dma-surprise"),
            "mainline-dma-surprise"
        );
        assert_eq!(of("/r/riscv64-pm-soak-007"), "pm-soak");
    }
}
