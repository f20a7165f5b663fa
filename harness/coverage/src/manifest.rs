//! What a boot's code is measured against, written into its folder by the
//! rig (`coverage.images`): the images (vmlinux and each module's `.ko`)
//! and how the compiler's source paths become the report's names.
//!
//! ```text
//! image vmlinux /cache/…/build/x86_64-base/vmlinux 8c1d…
//! image pci_rig /run/…/coverage-images/x86_64-6.12/pci_rig.ko 3f0a…
//! map /cache/…/pci-rig-external/pci_rig/ guest-kernel/driver/
//! ```
//!
//! An image's last word is the FNV-1a digest of its bytes at the boot: a
//! run is read again only against the very files it booted (the rig keeps a
//! copy of each module in the run's folder; vmlinux stays in the cache, and a
//! rebuilt one is refused).
//!
//! A `map` rewrites a path that starts with its first word; the first that
//! matches wins (so exact files go before their folder). A path no map
//! matches is left out of the report (the Rust standard library, headers).

use anyhow::{bail, Result};
use std::path::PathBuf;

/// The manifest's name in a boot's folder.
pub const MANIFEST: &str = "coverage.images";

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Manifest {
    /// (name as the guest loads it, or `vmlinux`; its ELF file; the digest of its bytes).
    pub images: Vec<(String, PathBuf, u64)>,
    /// (prefix, replacement), first match wins.
    pub maps: Vec<(String, String)>,
}

impl Manifest {
    pub fn parse(text: &str) -> Result<Manifest> {
        let mut m = Manifest::default();
        for (n, line) in text.lines().enumerate() {
            let mut words = line.splitn(3, ' ');
            let image = |rest: &str| {
                let (path, digest) = rest.rsplit_once(' ')?;
                Some((PathBuf::from(path), u64::from_str_radix(digest, 16).ok()?))
            };
            match (words.next(), words.next(), words.next()) {
                (Some("image"), Some(name), Some(rest)) if image(rest).is_some() => {
                    let (path, digest) = image(rest).unwrap_or_default();
                    m.images.push((name.to_string(), path, digest))
                }
                (Some("map"), Some(from), Some(to)) => {
                    m.maps.push((from.to_string(), to.to_string()))
                }
                (Some(""), None, None) => {}
                _ => bail!(
                    "{MANIFEST} line {}: `{line}` is neither `image NAME PATH DIGEST` nor `map FROM TO`",
                    n + 1
                ),
            }
        }
        Ok(m)
    }

    pub fn to_text(&self) -> String {
        let mut out = String::new();
        for (name, path, digest) in &self.images {
            out.push_str(&format!("image {name} {} {digest:016x}\n", path.display()));
        }
        for (from, to) in &self.maps {
            out.push_str(&format!("map {from} {to}\n"));
        }
        out
    }

    /// The digest an image's bytes must have (FNV-1a).
    pub fn digest(bytes: &[u8]) -> u64 {
        bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, b| {
            (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3)
        })
    }

    /// The report's name for the compiler's source path `raw`.
    pub fn place(&self, raw: &str) -> Option<String> {
        self.maps.iter().find_map(|(from, to)| {
            raw.strip_prefix(from.as_str())
                .map(|rest| format!("{to}{rest}"))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_manifest_round_trips_and_maps_first_match_first() {
        let m = Manifest {
            images: vec![("pci_rig".into(), "/b/pci_rig.ko".into(), 0xfeed)],
            maps: vec![
                ("/b/x/regs.rs".into(), "guest-kernel/driver/regs.rs".into()),
                ("/b/x/".into(), "guest-kernel/driver-mainline/".into()),
            ],
        };
        assert_eq!(Manifest::parse(&m.to_text()).unwrap(), m);
        assert_eq!(
            m.place("/b/x/regs.rs").as_deref(),
            Some("guest-kernel/driver/regs.rs")
        );
        assert_eq!(
            m.place("/b/x/pci_rig.rs").as_deref(),
            Some("guest-kernel/driver-mainline/pci_rig.rs")
        );
        assert_eq!(m.place("/usr/lib/rustlib/core.rs"), None);
        assert!(Manifest::parse("imag x y").is_err());
        assert!(Manifest::parse("image x /y").is_err(), "no digest");
    }
}
