//! What a boot needs ready: the kernel of its line and arch, our modules built against it,
//! the initramfs; and `cargo xtask setup`.

use super::foreign::{self, Foreign};
use crate::arch::Arch;
use crate::guest::image;
use crate::host::provision::{self, Toolchain};
use crate::kernel::{self, Flavor, Kernel};
use crate::scenario::{self};
use crate::Paths;
use anyhow::Result;
use std::path::{Path, PathBuf};

/// In-tree modules every guest image carries.
pub(super) const MODULES: &[&str] = &[
    "samples/rust/rust_minimal.ko",
    "drivers/misc/lkdtm/lkdtm.ko",
];

/// The mainline line's in-tree modules: upstream's samples, its drivers under test.
pub(super) const MAINLINE_MODULES: &[&str] = &[
    "samples/rust/rust_minimal.ko",
    "samples/rust/rust_driver_pci.ko",
    "samples/rust/rust_dma.ko",
    "samples/rust/rust_driver_auxiliary.ko",
];

/// A kernel and an initramfs, ready to boot.
pub struct Prepared {
    pub kernel: Kernel,
    pub image: PathBuf,
    pub initrd: PathBuf,
    /// Our driver's module, or why there is none (not asked for, or its
    /// build failed: then only the scenarios that need it fail).
    pub driver: std::result::Result<PathBuf, String>,
    /// The device-tree machines' platform modules (`guest-kernel/platform`:
    /// `pcirig_platform`, `rcpufreq_dt`), or why there are none.
    pub platform: std::result::Result<Vec<PathBuf>, String>,
    /// How many times its scenarios' timeouts a boot of this kernel gets
    /// ([`Flavor::slowdown`]).
    pub slowdown: u32,
    /// The kernel's `CONFIG_HZ`.
    pub hz: Option<u32>,
    /// The foreign module (`--module`) built against this kernel, or why it is not: `None`
    /// when none was given.
    pub foreign: Option<std::result::Result<Foreign, String>>,
    /// What the coverage plugin watches in its boots, and what its record
    /// is read against; `None` when vmlinux could not be read (said once).
    pub watch: Option<super::coverage::Watch>,
}

/// Where the out-of-tree modules' sources are.
#[derive(Clone, Copy, Default)]
pub struct Sources<'a> {
    /// Our modules: `guest-kernel` unless a mutant's copy ([`TestOptions::modules`]).
    pub guest: Option<&'a Path>,
    /// A module pci-rig did not write (`--module`), or one the kernel built.
    pub foreign: Option<ForeignSource<'a>>,
}

/// Where the foreign module comes from.
#[derive(Clone, Copy)]
pub enum ForeignSource<'a> {
    /// Its directory (`--module DIR`), built against the kernel.
    Dir(&'a Path),
    /// One of the kernel's own modules, by its path in the build tree: a user's tree's Rust
    /// PCI sample (`--kernel-src` without `--module`).
    InTree(&'static str),
}

pub fn setup(paths: &Paths, arches: &[Arch]) -> Result<Toolchain> {
    // linux-source is installed once the host packages are: unpack it while bindgen builds.
    let tc = provision::ensure(paths, arches, || {
        kernel::unpack_source(paths, kernel::Line::Lts)
    })?;
    eprintln!("setup: cache {}", paths.cache.display());
    eprintln!("setup: bindgen {}", tc.bindgen.display());
    let qemu = tc
        .qemu
        .prefix
        .as_ref()
        .map_or("system".to_string(), |p| p.display().to_string());
    eprintln!("setup: QEMU {} ({qemu})", tc.qemu.version);
    for (a, b) in &tc.busybox {
        eprintln!("setup: busybox {a}: {}", b.display());
    }
    Ok(tc)
}

/// Builds the kernel (and our driver, when `with_driver`) and writes an
/// initramfs into `out` (the run folder, so concurrent runs never share one).
pub fn prepare(
    paths: &Paths,
    tc: &Toolchain,
    arch: Arch,
    flavor: &Flavor,
    out: &Path,
    with_driver: bool,
    sources: Sources,
) -> Result<Prepared> {
    let tree = kernel::lock(paths, arch, flavor)?;
    let kernel = kernel::build(paths, tc, &tree, flavor)?;
    let lts = flavor.line == kernel::Line::Lts;
    let in_tree = if lts { MODULES } else { MAINLINE_MODULES };
    let guest = sources
        .guest
        .map_or_else(|| paths.root.join("guest-kernel"), Path::to_path_buf);
    // A user's tree (`--kernel-src`) may lack some of upstream's samples.
    let mut modules: Vec<PathBuf> = in_tree
        .iter()
        .map(|m| kernel.module(m))
        .filter(|m| flavor.src.is_none() || m.exists())
        .collect();
    // The driver, its benchmarking sibling (loaded only by `bench`) and the
    // platform modules build in copies of their own: all at once. On
    // mainline, the driver and bench module are their ports to upstream's API.
    let (driver_dir, bench_dir) = match flavor.line {
        kernel::Line::Lts => ("driver", "bench"),
        kernel::Line::Mainline => ("driver-mainline", "bench-mainline"),
    };
    let (driver, platform, findings, foreign) = std::thread::scope(|s| {
        let k = &kernel;
        let foreign = sources.foreign.map(|from| {
            s.spawn(move || match from {
                ForeignSource::Dir(dir) => foreign::build(tc, k, dir),
                ForeignSource::InTree(rel) => foreign::in_tree(k, rel),
            })
        });
        let platform = s.spawn(|| match lts {
            true => platform_modules(tc, k, &guest.join("platform")),
            false => Err("the platform modules are the 6.12 line's".to_string()),
        });
        // Upstream's holes shown on its own API (the FINDINGS scenarios, run by name).
        let findings = (!lts).then(|| {
            s.spawn(|| {
                let dir = guest.join("findings-mainline");
                kernel::module::build_external(tc, k, &dir, "spawn_unload", &[])
            })
        });
        let driver = with_driver.then(|| {
            // The driver's generated regs.rs names the registers for all of them; its
            // selftest.rs is the mainline driver's too.
            let of_driver = |files: &[&str]| -> Vec<PathBuf> {
                files.iter().map(|f| guest.join("driver").join(f)).collect()
            };
            let (driver_shared, bench_shared) = match lts {
                true => (vec![], of_driver(&["regs.rs"])),
                false => (
                    of_driver(&["regs.rs", "selftest.rs"]),
                    of_driver(&["regs.rs"]),
                ),
            };
            let bench = guest.join(bench_dir);
            let bench = s.spawn(move || {
                kernel::module::build_external(tc, k, &bench, "pci_rig_bench", &bench_shared)
            });
            let dir = guest.join(driver_dir);
            let ko = kernel::module::build_external(tc, k, &dir, "pci_rig", &driver_shared);
            (ko, bench.join())
        });
        (
            driver,
            platform.join(),
            findings.map(|f| f.join()),
            foreign.map(|f| f.join()),
        )
    });
    let foreign = foreign.map(|f| {
        let built = f.unwrap_or_else(|p| std::panic::resume_unwind(p));
        built.map_err(|e| {
            eprintln!("build: {arch}: the foreign module is not there:\n{e:#}");
            format!("{e:#}")
        })
    });
    if let Some(findings) = findings {
        match findings.unwrap_or_else(|p| std::panic::resume_unwind(p)) {
            Ok(ko) => modules.push(ko),
            Err(e) => eprintln!("build: {arch}: the findings' module did not build:\n{e:#}"),
        }
    }
    // A thread's panic goes on here.
    let platform = platform.unwrap_or_else(|p| std::panic::resume_unwind(p));
    // The driver's failure first, then the bench module's, as when the
    // bench module was built only after the driver.
    let driver = match driver {
        Some((driver, bench)) => {
            let bench = bench.unwrap_or_else(|p| std::panic::resume_unwind(p));
            driver
                .and_then(|ko| {
                    modules.push(bench?);
                    Ok(ko)
                })
                .inspect(|ko| modules.push(ko.clone()))
                .map_err(|e| format!("{e:#}"))
        }
        None => Err("the driver was not asked for".to_string()),
    };
    if let Err(e) = &driver {
        if with_driver {
            eprintln!("build: {arch}: the driver did not build; its scenarios will fail:\n{e}");
        }
    }
    match &platform {
        Ok(kos) => modules.extend(kos.iter().cloned()),
        Err(e) => eprintln!("build: {arch}: {e}"),
    }
    drop(tree);
    let initrd = match flavor.line {
        kernel::Line::Lts => out.join(format!("{arch}-initramfs.cpio")),
        line => out.join(format!("{arch}-{}-initramfs.cpio", line.name())),
    };
    image::build(
        &image::Contents {
            busybox: &tc.busybox[&arch],
            images: &paths.root.join("images"),
            scripts: &scenario::image_scripts(),
            modules: &modules,
            foreign: foreign
                .as_ref()
                .and_then(|f| f.as_ref().ok())
                .map(|f| f.ko.as_path()),
        },
        &initrd,
    )?;
    let foreign_ko = foreign
        .as_ref()
        .and_then(|f| f.as_ref().ok())
        .map(|f| f.ko.clone());
    let copies = kernel.build.join("pci-rig-external");
    let source_of = |ko: &Path| -> Option<PathBuf> {
        let label = ko.strip_prefix(&copies).ok()?.iter().next()?.to_str()?;
        Some(match label {
            "pci_rig" => guest.join(driver_dir),
            "pci_rig_bench" => guest.join(bench_dir),
            "platform" => guest.join("platform"),
            "spawn_unload" => guest.join("findings-mainline"),
            _ => match sources.foreign {
                Some(ForeignSource::Dir(dir)) => dir.to_path_buf(),
                _ => return None,
            },
        })
    };
    let measured: Vec<(PathBuf, Option<PathBuf>)> = modules
        .iter()
        .chain(&foreign_ko)
        .map(|ko| (ko.clone(), source_of(ko)))
        .collect();
    let measured: Vec<super::coverage::Module> = measured
        .iter()
        .map(|(ko, sources)| super::coverage::Module {
            ko,
            sources: sources.as_deref(),
        })
        .collect();
    let keep = out
        .join("coverage-images")
        .join(format!("{arch}-{}", flavor.line.name()));
    let watch = super::coverage::watch(&kernel, (&paths.root, &guest), &measured, &keep)
        .inspect_err(|e| eprintln!("build: {arch}: no coverage in this kernel's boots: {e:#}"))
        .ok();
    Ok(Prepared {
        watch,
        image: kernel.image(),
        hz: kernel.hz(),
        kernel,
        initrd,
        driver,
        platform,
        slowdown: flavor.slowdown(arch),
        foreign,
    })
}

/// Builds `guest-kernel/platform` (two modules, one Kbuild) on the
/// device-tree machines; x86_64 has no device tree for them to bind.
pub(super) fn platform_modules(
    tc: &Toolchain,
    kernel: &Kernel,
    dir: &Path,
) -> std::result::Result<Vec<PathBuf>, String> {
    if kernel.arch == Arch::X86_64 {
        return Err("the platform modules are for device-tree machines (arm64, riscv64)".into());
    }
    let first = kernel::module::build_module_copy(tc, kernel, dir, &[], "platform", "pcirig_platform", &[])
        .map_err(|e| format!("the platform modules did not build; the platform and cpufreq scenarios will fail:\n{e:#}"))?;
    let second = first.with_file_name("rcpufreq_dt.ko");
    Ok(vec![first, second])
}
