//! The baseline's tree: a detached worktree of its revision, and a cold run's scratch.

use anyhow::{bail, Context, Result};
use rig::Paths;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

pub(super) fn git(dir: &Path, args: &[&str]) -> Result<String> {
    let out = Command::new("git")
        .args(args)
        .current_dir(dir)
        .stdin(Stdio::null())
        .output()
        .context("running git")?;
    if !out.status.success() {
        bail!(
            "git {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// A detached worktree of `sha` under the results, reused when it is
/// there at that commit and clean; stale worktrees pruned first.
pub(super) fn worktree(paths: &Paths, sha: &str) -> Result<PathBuf> {
    let dir = paths
        .results()
        .join("bench")
        .join(format!("baseline-{}", &sha[..12.min(sha.len())]));
    git(&paths.root, &["worktree", "prune"])?;
    if dir.exists() {
        let at = git(&dir, &["rev-parse", "HEAD"]).ok();
        let clean = git(&dir, &["status", "--porcelain", "--untracked-files=no"])
            .is_ok_and(|s| s.is_empty());
        if at.as_deref() == Some(sha) && clean {
            return Ok(dir);
        }
        eprintln!(
            "bench: {} is not a clean worktree of {sha}; making it again",
            dir.display()
        );
        let path = dir.display().to_string();
        let _ = git(&paths.root, &["worktree", "remove", "--force", &path]);
        if dir.exists() {
            std::fs::remove_dir_all(&dir).with_context(|| format!("removing {}", dir.display()))?;
        }
        git(&paths.root, &["worktree", "prune"])?;
    }
    let path = dir.display().to_string();
    git(&paths.root, &["worktree", "add", "--detach", &path, sha])?;
    Ok(dir)
}

/// A cold run's folder (clone and cache), removed when dropped unless kept.
pub(super) struct Scratch {
    pub(super) path: PathBuf,
    pub(super) keep: bool,
}

impl Drop for Scratch {
    fn drop(&mut self) {
        if self.keep {
            eprintln!("bench: kept {}", self.path.display());
        } else if let Err(e) = std::fs::remove_dir_all(&self.path) {
            eprintln!("bench: could not remove {}: {e}", self.path.display());
        }
    }
}
