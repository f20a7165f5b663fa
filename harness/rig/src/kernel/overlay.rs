//! Our overlay (guest-kernel/rust, guest-kernel/patches) laid over the pristine tree file by
//! file: a file is rewritten only when its content changes, so builds stay incremental.

use super::digest::{walk, Fnv};
use crate::host::process::run;
use anyhow::{Context, Result};
use std::collections::BTreeMap;

use std::path::{Path, PathBuf};
use std::process::Command;

/// Lays guest-kernel/ over the tree, remembering pristine contents.
pub(super) struct Overlay {
    pub(super) src: PathBuf,
    /// Pristine copies of every file we ever changed; `X.absent` marks a
    /// file that did not exist in the pristine tree.
    pub(super) orig: PathBuf,
    pub(super) manifest: PathBuf,
}

impl Overlay {
    pub(super) fn pristine(&self, rel: &str) -> Result<Option<Vec<u8>>> {
        let saved = self.orig.join(rel);
        if saved.exists() {
            return Ok(Some(std::fs::read(saved)?));
        }
        if self.orig.join(format!("{rel}.absent")).exists() {
            return Ok(None);
        }
        Ok(std::fs::read(self.src.join(rel)).ok())
    }

    pub(super) fn save_pristine(&self, rel: &str) -> Result<()> {
        let saved = self.orig.join(rel);
        let absent = self.orig.join(format!("{rel}.absent"));
        if saved.exists() || absent.exists() {
            return Ok(());
        }
        std::fs::create_dir_all(saved.parent().unwrap())?;
        match std::fs::read(self.src.join(rel)) {
            Ok(bytes) => std::fs::write(saved, bytes)?,
            Err(_) => std::fs::write(absent, "")?,
        }
        Ok(())
    }

    /// Lays the overlay over the tree when `write`; returns how many files
    /// differ from it (were rewritten, when `write`).
    pub(super) fn apply(&self, guest: &Path, write: bool) -> Result<usize> {
        let mut want: BTreeMap<String, Option<Vec<u8>>> = BTreeMap::new();
        // Whole files laid over rust/.
        let rust = guest.join("rust");
        for file in walk(&rust)? {
            let rel = format!("rust/{}", file.strip_prefix(&rust)?.display());
            want.insert(rel, Some(std::fs::read(&file)?));
        }
        // Patches, in name order, each over the result of the ones before.
        let mut patches: Vec<PathBuf> = walk(&guest.join("patches"))?
            .into_iter()
            .filter(|p| p.extension().is_some_and(|e| e == "patch"))
            .collect();
        patches.sort();
        for patch in &patches {
            self.apply_patch(patch, &mut want)?;
        }
        // Files touched last time but not now go back to pristine.
        let old = std::fs::read_to_string(&self.manifest).unwrap_or_default();
        for rel in old.lines().filter(|l| !l.is_empty()) {
            if !want.contains_key(rel) {
                want.insert(rel.to_string(), self.pristine(rel)?);
            }
        }
        let mut changed = 0;
        for (rel, content) in &want {
            let path = self.src.join(rel);
            let current = std::fs::read(&path).ok();
            if current != *content {
                changed += 1;
                if !write {
                    continue;
                }
                self.save_pristine(rel)?;
                match content {
                    Some(bytes) => {
                        std::fs::create_dir_all(path.parent().unwrap())?;
                        std::fs::write(&path, bytes)?;
                    }
                    None => std::fs::remove_file(&path)?,
                }
            }
        }
        if !write {
            return Ok(changed);
        }
        let touched: Vec<&str> = want
            .iter()
            .filter(|(rel, content)| self.pristine(rel).ok().as_ref() != Some(content))
            .map(|(rel, _)| rel.as_str())
            .collect();
        std::fs::write(&self.manifest, touched.join("\n"))?;
        if changed > 0 {
            eprintln!("kernel: overlay changed {changed} file(s) of the tree");
        }
        Ok(changed)
    }

    /// Applies one patch to the files it names, starting from their current
    /// wanted (or pristine) content, in a scratch tree. The tree it leaves is
    /// kept under the hash of those inputs: the same patch over the same
    /// content is not run again (every build checks the overlay; running
    /// the eight patches took 0.1 s of the edit loop's 2.5).
    pub(super) fn apply_patch(
        &self,
        patch: &Path,
        want: &mut BTreeMap<String, Option<Vec<u8>>>,
    ) -> Result<()> {
        let text = std::fs::read_to_string(patch)?;
        let files: Vec<String> = text
            .lines()
            .filter_map(|l| l.strip_prefix("+++ b/"))
            .map(|l| l.split('\t').next().unwrap_or(l).to_string())
            .collect();
        let mut inputs = Vec::with_capacity(files.len());
        let mut h = Fnv::default();
        h.field(text.as_bytes());
        for rel in &files {
            let content = match want.get(rel) {
                Some(c) => c.clone(),
                None => self.pristine(rel)?,
            };
            h.field(rel.as_bytes());
            match &content {
                Some(bytes) => h.field(bytes),
                None => h.write(b"absent"),
            }
            inputs.push(content);
        }
        let memo = self.patch_memo().join(format!("{:016x}", h.0));
        if !memo.is_dir() {
            // Several builds check the overlay at once: a scratch tree each.
            static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
            let scratch = self.orig.with_file_name(format!(
                "patch.tmp-{}-{}",
                std::process::id(),
                N.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
            ));
            let _ = std::fs::remove_dir_all(&scratch);
            for (rel, content) in files.iter().zip(inputs) {
                if let Some(bytes) = content {
                    let p = scratch.join(rel);
                    std::fs::create_dir_all(p.parent().unwrap())?;
                    std::fs::write(p, bytes)?;
                }
            }
            std::fs::create_dir_all(&scratch)?;
            run(Command::new("patch")
                .args([
                    "-p1",
                    "--forward",
                    "--batch",
                    "--fuzz=0",
                    "--no-backup-if-mismatch",
                    "-d",
                ])
                .arg(&scratch)
                .arg("-i")
                .arg(patch))
            .with_context(|| format!("{} does not apply to linux 6.12", patch.display()))?;
            std::fs::create_dir_all(self.patch_memo())?;
            // Whole or not at all; another build may have kept the same.
            if std::fs::rename(&scratch, &memo).is_err() {
                std::fs::remove_dir_all(&scratch)?;
            }
        }
        for rel in files {
            want.insert(rel.clone(), std::fs::read(memo.join(&rel)).ok());
        }
        Ok(())
    }

    /// Where [`Overlay::apply_patch`] keeps what each patch made.
    pub(super) fn patch_memo(&self) -> PathBuf {
        self.orig.with_file_name("patch-memo")
    }
}
