//! The guest's initramfs: busybox, the scenario runner from images/ with the
//! register names it sources (images/regs.sh), every scenario's script (from
//! the catalog), and the kernel modules under test, written with our own cpio
//! writer.

use crate::guest::cpio::Archive;
use anyhow::{Context, Result};
use std::path::{Path, PathBuf};

pub struct Contents<'a> {
    pub busybox: &'a Path,
    /// images/ of the checkout.
    pub images: &'a Path,
    /// (scenario name, script): `/scenarios/NAME.sh`, run by init.
    pub scripts: &'a [(&'a str, &'a str)],
    /// Modules placed flat in /lib/modules.
    pub modules: &'a [PathBuf],
    /// A module pci-rig did not write (`--module`), in /lib/modules/foreign: apart, since it
    /// may share its name with one of the kernel's (upstream's samples).
    pub foreign: Option<&'a Path>,
}

pub fn build(c: &Contents, out: &Path) -> Result<()> {
    let mut a = Archive::new();
    for d in [
        "bin",
        "dev",
        "proc",
        "sys",
        "tmp",
        "lib",
        "lib/modules",
        "lib/modules/foreign",
        "scenarios",
    ] {
        a.dir(d);
    }
    // The kernel opens /dev/console for init before anything mounts /dev.
    a.char_dev("dev/console", 0o600, 5, 1);
    a.file("bin/busybox", 0o755, &read(c.busybox)?);
    a.file("init", 0o755, &read(&c.images.join("init"))?);
    // The register map's names, sourced by init (generated: `cargo xtask regs`).
    a.file("regs.sh", 0o644, &read(&c.images.join("regs.sh"))?);
    for (name, script) in c.scripts {
        a.file(&format!("scenarios/{name}.sh"), 0o644, script.as_bytes());
    }
    for m in c.modules {
        a.file(&format!("lib/modules/{}", file_name(m)), 0o644, &read(m)?);
    }
    if let Some(m) = c.foreign {
        a.file(
            &format!("lib/modules/foreign/{}", file_name(m)),
            0o644,
            &read(m)?,
        );
    }
    std::fs::write(out, a.finish()).with_context(|| format!("writing {}", out.display()))
}

fn read(p: &Path) -> Result<Vec<u8>> {
    std::fs::read(p).with_context(|| format!("reading {} for the initramfs", p.display()))
}

fn file_name(p: &Path) -> String {
    p.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}
