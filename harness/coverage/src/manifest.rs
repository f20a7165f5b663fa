//! What a boot's code is measured against, written into its folder by the
//! rig (`coverage.images`): the images (vmlinux and each module's `.ko`)
//! and how the compiler's source paths become the report's names.
//!
//! ```text
//! image vmlinux /cache/…/build/x86_64-base/vmlinux
//! image pci_rig /cache/…/pci-rig-external/pci_rig/pci_rig.ko
//! map /cache/…/pci-rig-external/pci_rig/ guest-kernel/driver/
//! ```
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
    /// (name as the guest loads it, or `vmlinux`; its ELF file).
    pub images: Vec<(String, PathBuf)>,
    /// (prefix, replacement), first match wins.
    pub maps: Vec<(String, String)>,
}

impl Manifest {
    pub fn parse(text: &str) -> Result<Manifest> {
        let mut m = Manifest::default();
        for (n, line) in text.lines().enumerate() {
            let mut words = line.splitn(3, ' ');
            match (words.next(), words.next(), words.next()) {
                (Some("image"), Some(name), Some(path)) => {
                    m.images.push((name.to_string(), PathBuf::from(path)))
                }
                (Some("map"), Some(from), Some(to)) => {
                    m.maps.push((from.to_string(), to.to_string()))
                }
                (Some(""), None, None) => {}
                _ => bail!(
                    "{MANIFEST} line {}: `{line}` is neither `image NAME PATH` nor `map FROM TO`",
                    n + 1
                ),
            }
        }
        Ok(m)
    }

    pub fn to_text(&self) -> String {
        let mut out = String::new();
        for (name, path) in &self.images {
            out.push_str(&format!("image {name} {}\n", path.display()));
        }
        for (from, to) in &self.maps {
            out.push_str(&format!("map {from} {to}\n"));
        }
        out
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
            images: vec![("pci_rig".into(), "/b/pci_rig.ko".into())],
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
    }
}
