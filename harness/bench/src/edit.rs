//! The edit→verdict loops' edit: a real change of the driver's source, undone however the
//! bench ends.

use anyhow::{Context, Result};
use std::path::{Path, PathBuf};

/// The driver source the edit→verdict loop edits.
pub(crate) const EDITED: &str = "guest-kernel/driver/pci_rig.rs";

/// Puts a file back byte for byte however the bench ends (error or panic):
/// the edit loops' guard on the driver they edit.
pub(crate) struct Restore {
    path: PathBuf,
    original: Vec<u8>,
}

impl Restore {
    /// Reads `path`; dropping the guard writes those bytes back.
    pub(crate) fn take(path: &Path) -> Result<Restore> {
        let original =
            std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
        Ok(Restore {
            path: path.to_path_buf(),
            original,
        })
    }

    /// Writes the file as it was plus run `i`'s comment line (see [`edited`]).
    pub(crate) fn edit(&self, who: &str, i: usize) -> Result<()> {
        std::fs::write(&self.path, edited(&self.original, who, i))
            .with_context(|| format!("editing {}", self.path.display()))
    }
}

impl Drop for Restore {
    fn drop(&mut self) {
        if let Err(e) = std::fs::write(&self.path, &self.original) {
            eprintln!("bench: could not restore {}: {e}", self.path.display());
        }
    }
}

/// `original` with one trailing comment line, different for each run `i`:
/// a real change of the source, so the module really rebuilds.
pub(crate) fn edited(original: &[u8], who: &str, i: usize) -> Vec<u8> {
    let mut text = original.to_vec();
    if !text.is_empty() && !text.ends_with(b"\n") {
        text.push(b'\n');
    }
    text.extend_from_slice(format!("// {who}: edit {i}\n").as_bytes());
    text
}
