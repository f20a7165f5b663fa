//! A private apt state: Debian packages of any suite and architecture,
//! downloaded and unpacked into the cache without root and without touching
//! the host's own package database.

use crate::host::process::{run, run_logged};
use anyhow::{bail, Context, Result};
use std::path::{Path, PathBuf};
use std::process::Command;

const KEYRING: &str = "/usr/share/keyrings/debian-archive-keyring.gpg";

pub struct PrivateApt {
    dir: PathBuf,
    arch: String,
}

impl PrivateApt {
    /// Sets up (or reuses) a state under `dir` for `suites` of the Debian
    /// archive the host already uses, for Debian architecture `arch`.
    pub fn new(dir: &Path, arch: &str, suites: &[&str]) -> Result<Self> {
        for sub in ["lists/partial", "archives/partial", "parts", "prefs"] {
            std::fs::create_dir_all(dir.join(sub))?;
        }
        let mirror = debian_mirror()?;
        let sources: String = suites
            .iter()
            .map(|s| format!("deb [arch={arch} signed-by={KEYRING}] {mirror} {s} main\n"))
            .collect();
        std::fs::write(dir.join("sources.list"), sources)?;
        let status = dir.join("status");
        if !status.exists() {
            std::fs::write(&status, "")?;
        }
        let apt = PrivateApt {
            dir: dir.to_path_buf(),
            arch: arch.to_string(),
        };
        let stamp = dir.join("lists/.updated");
        if !stamp.exists() {
            run_logged(&mut apt.apt_get(&["update"]), &dir.join("update.log"))
                .context("updating the private apt lists")?;
            std::fs::write(&stamp, "")?;
        }
        Ok(apt)
    }

    fn apt_get(&self, args: &[&str]) -> Command {
        let d = &self.dir;
        let mut c = Command::new("apt-get");
        let opt = |k: &str, v: &Path| format!("{k}={}", v.display());
        c.args([
            "-q",
            "-y",
            "-o",
            "Debug::NoLocking=true",
            "-o",
            "APT::Get::AllowUnauthenticated=false",
        ])
        .args(["-o", &format!("APT::Architecture={}", self.arch)])
        .args(["-o", &format!("APT::Architectures={}", self.arch)])
        .args(["-o", &opt("Dir::State", d)])
        .args(["-o", &opt("Dir::State::Lists", &d.join("lists"))])
        .args(["-o", &opt("Dir::State::status", &d.join("status"))])
        .args(["-o", &opt("Dir::Cache", d)])
        .args(["-o", &opt("Dir::Cache::archives", &d.join("archives"))])
        .args(["-o", &opt("Dir::Etc::SourceList", &d.join("sources.list"))])
        .args(["-o", &opt("Dir::Etc::SourceParts", &d.join("parts"))])
        .args(["-o", &opt("Dir::Etc::PreferencesParts", &d.join("prefs"))])
        .args(["-o", "Dir::Etc::Preferences=/dev/null"])
        // Only package lists are needed, not translations or AppStream data.
        .args([
            "-o",
            "Acquire::Languages=none",
            "-o",
            "Acquire::IndexTargets::deb::DEP-11::DefaultEnabled=false",
        ]);
        if crate::host::process::is_root() {
            // The _apt sandbox user could not write into the cache.
            c.args(["-o", "APT::Sandbox::User=root"]);
        }
        c.args(args);
        c
    }

    /// Downloads `packages` with all their dependencies (nothing counts as
    /// installed in a private state) and returns the .deb files.
    /// `release` picks the suite preferred for them and their dependencies
    /// (e.g. `trixie-backports`).
    pub fn download_with_deps(&self, release: &str, packages: &[&str]) -> Result<Vec<PathBuf>> {
        let mut args = vec![
            "install",
            "--download-only",
            "--no-install-recommends",
            "-t",
            release,
        ];
        args.extend(packages);
        run_logged(&mut self.apt_get(&args), &self.dir.join("download.log"))?;
        debs_in(&self.dir.join("archives"))
    }

    /// Downloads exactly `package`, no dependencies.
    pub fn download_one(&self, package: &str) -> Result<PathBuf> {
        let into = self.dir.join("single");
        std::fs::create_dir_all(&into)?;
        run_logged(
            self.apt_get(&["download", package]).current_dir(&into),
            &self.dir.join("download.log"),
        )?;
        debs_in(&into)?
            .into_iter()
            .find(|p| {
                p.file_name()
                    .is_some_and(|n| n.to_string_lossy().starts_with(&format!("{package}_")))
            })
            .with_context(|| format!("apt-get download {package} left no .deb"))
    }
}

fn debs_in(dir: &Path) -> Result<Vec<PathBuf>> {
    let mut debs: Vec<PathBuf> = std::fs::read_dir(dir)?
        .filter_map(|e| Some(e.ok()?.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "deb"))
        .collect();
    debs.sort();
    Ok(debs)
}

/// Unpacks a .deb's files into `prefix`.
pub fn extract(deb: &Path, prefix: &Path) -> Result<()> {
    std::fs::create_dir_all(prefix)?;
    run(Command::new("dpkg-deb").arg("-x").arg(deb).arg(prefix))?;
    Ok(())
}

/// The Debian archive the host's apt is configured with (not the security
/// one), so the rig uses whatever mirror this machine is set up for.
/// `PCI_RIG_DEBIAN_MIRROR` overrides it.
pub fn debian_mirror() -> Result<String> {
    if let Ok(m) = std::env::var("PCI_RIG_DEBIAN_MIRROR") {
        return Ok(m);
    }
    let mut texts = Vec::new();
    if let Ok(t) = std::fs::read_to_string("/etc/apt/sources.list") {
        texts.push(t);
    }
    if let Ok(dir) = std::fs::read_dir("/etc/apt/sources.list.d") {
        for e in dir.flatten() {
            let p = e.path();
            if p.extension().is_some_and(|x| x == "list" || x == "sources") {
                texts.extend(std::fs::read_to_string(p).ok());
            }
        }
    }
    texts
        .iter()
        .find_map(|t| mirror_in(t))
        .map(str::to_string)
        .map_or_else(
            || bail!("found no Debian archive in /etc/apt/sources.list{{,.d/}}; set PCI_RIG_DEBIAN_MIRROR to a Debian mirror URL"),
            Ok,
        )
}

/// Finds the URI of a main Debian archive in one sources file, in either the
/// one-line or the deb822 format.
fn mirror_in(text: &str) -> Option<&str> {
    let is_archive = |uri: &str, suite: &str| {
        uri.trim_end_matches('/').ends_with("/debian") && !suite.contains("security")
    };
    // One-line format: deb [opts] URI SUITE COMPONENTS
    for line in text.lines() {
        let mut words = line
            .split_whitespace()
            .filter(|w| !w.starts_with('[') && !w.ends_with(']'));
        if words.next() == Some("deb") {
            if let (Some(uri), Some(suite)) = (words.next(), words.next()) {
                if is_archive(uri, suite) {
                    return Some(uri);
                }
            }
        }
    }
    // deb822: stanzas separated by blank lines.
    for stanza in text.split("\n\n") {
        let field = |name: &str| {
            stanza.lines().find_map(|l| {
                l.strip_prefix(name)
                    .map(|v| v.trim_start_matches(':').trim())
            })
        };
        if let (Some(uris), Some(suites)) = (field("URIs"), field("Suites")) {
            let uri = uris.split_whitespace().next()?;
            if suites.split_whitespace().any(|s| is_archive(uri, s)) {
                return Some(uri);
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::mirror_in;

    #[test]
    fn finds_the_main_archive_in_both_formats() {
        let deb822 = "Types: deb\nURIs: http://m.example/debian-security\nSuites: bookworm-security\n\nTypes: deb\nURIs: http://m.example/debian\nSuites: bookworm bookworm-updates\nComponents: main\n";
        assert_eq!(mirror_in(deb822), Some("http://m.example/debian"));
        let one_line = "# c\ndeb [signed-by=/k.gpg] http://m.example/debian/ bookworm main\n";
        assert_eq!(mirror_in(one_line), Some("http://m.example/debian/"));
        assert_eq!(
            mirror_in("deb http://m.example/debian-security bookworm-security main"),
            None
        );
        assert_eq!(mirror_in("deb https://other.example/apt stable main"), None);
    }
}
