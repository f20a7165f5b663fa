//! Digests of what a build reads: the files under a folder, hashed with a hash that is stable
//! across Rust versions.

use anyhow::Result;
use std::path::{Path, PathBuf};

pub(super) fn walk(dir: &Path) -> Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Ok(out);
    };
    for e in entries {
        let p = e?.path();
        if p.is_dir() {
            out.extend(walk(&p)?);
        } else if p.file_name().is_none_or(|n| n != ".gitkeep") {
            out.push(p);
        }
    }
    Ok(out)
}

/// FNV-1a, 64 bits: stable across Rust versions, unlike `DefaultHasher`.
pub(super) struct Fnv(pub(super) u64);

impl Default for Fnv {
    fn default() -> Self {
        Fnv(0xcbf2_9ce4_8422_2325)
    }
}

impl Fnv {
    pub(super) fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
        }
    }

    /// `bytes` with its length first, so that fields cannot run together.
    pub(super) fn field(&mut self, bytes: &[u8]) {
        self.write(&(bytes.len() as u64).to_le_bytes());
        self.write(bytes);
    }
}
