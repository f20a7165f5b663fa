//! Finding and installing everything a run needs: host packages (apt, as
//! root), bindgen (cargo install into the cache), a QEMU new enough for
//! vfio-user-pci and busybox for each guest (private apt states, no root).
//! Every step first looks for what is already there, so running it twice
//! does nothing the second time.

use crate::arch::Arch;
use crate::host::apt::{self, PrivateApt};
use crate::host::process::{is_root, on_path, run, run_logged};
use crate::Paths;
use anyhow::{bail, Context, Result};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

pub const BINDGEN_VERSION: &str = "0.73.2";
/// vfio-user-pci arrived in QEMU 10.1.
const QEMU_MIN: (u32, u32) = (10, 1);

/// Everything a build or boot needs, found or installed.
#[derive(Clone, Debug)]
pub struct Toolchain {
    pub bindgen: PathBuf,
    pub qemu: Qemu,
    pub busybox: BTreeMap<Arch, PathBuf>,
}

/// How to start QEMU: either a system binary or the unpacked bundle, which
/// runs through its own dynamic loader and libraries.
#[derive(Clone, Debug)]
pub struct Qemu {
    /// Empty for a system QEMU; the bundle's prefix otherwise.
    pub prefix: Option<PathBuf>,
    pub version: String,
}

impl Qemu {
    /// A firmware file QEMU ships (`qboot.rom`, …), where this QEMU has it.
    pub fn firmware(&self, name: &str) -> Option<PathBuf> {
        let dir = match &self.prefix {
            Some(p) => p.join("usr/share/qemu"),
            None => PathBuf::from("/usr/share/qemu"),
        };
        Some(dir.join(name)).filter(|f| f.is_file())
    }

    pub fn command(&self, arch: Arch) -> Command {
        match &self.prefix {
            None => Command::new(arch.qemu_binary()),
            Some(p) => {
                let mut c = Command::new(p.join("usr/lib64/ld-linux-x86-64.so.2"));
                c.arg("--library-path")
                    .arg(format!(
                        "{0}/lib/x86_64-linux-gnu:{0}/usr/lib/x86_64-linux-gnu",
                        p.display()
                    ))
                    .arg(p.join("usr/bin").join(arch.qemu_binary()));
                // Debian's QEMU finds firmware (SeaBIOS, iPXE ROMs) in several
                // folders of its firmware path; -L adds each one of the bundle's.
                for dir in ["usr/share/qemu", "usr/share/seabios", "usr/lib/ipxe/qemu"] {
                    c.arg("-L").arg(p.join(dir));
                }
                c
            }
        }
    }
}

/// A host package and how to tell it is installed.
struct Need {
    package: &'static str,
    /// An absolute path that must exist, or a command that must be on PATH.
    probe: &'static str,
}

const fn need(package: &'static str, probe: &'static str) -> Need {
    Need { package, probe }
}

fn host_needs(arches: &[Arch]) -> Vec<Need> {
    let mut v = vec![
        need("make", "make"),
        need("gcc", "gcc"),
        need("flex", "flex"),
        need("bison", "bison"),
        need("bc", "bc"),
        need("libelf-dev", "/usr/include/gelf.h"),
        need("libssl-dev", "/usr/include/openssl/ssl.h"),
        need("xz-utils", "xz"),
        need("patch", "patch"),
        need("linux-source-6.12", "/usr/src/linux-source-6.12.tar.xz"),
        need("rustc-web", "/usr/bin/rustc"),
        need(
            "rust-web-src",
            "/usr/lib/rustlib/src/rust/library/core/src/lib.rs",
        ),
        need("rust-web-clippy", "/usr/bin/clippy-driver"),
        need("rustfmt-web", "/usr/bin/rustfmt"),
        need("libclang-14-dev", "/usr/lib/llvm-14/lib/libclang.so"),
        // The mainline line's bindgen needs libclang 17 or newer.
        need("libclang1-19", "/usr/lib/llvm-19/lib/libclang-19.so.1"),
        // The kunit scenarios hold our KTAP reading against the kernel's kunit.py.
        need("python3", "python3"),
    ];
    for a in arches {
        match a {
            Arch::X86_64 => {}
            Arch::Arm64 => v.extend([
                need("gcc-aarch64-linux-gnu", "aarch64-linux-gnu-gcc"),
                // dtc edits QEMU's device tree for the platform and cpufreq scenarios.
                need("device-tree-compiler", "dtc"),
                // The debug flavour builds arm64 with clang (KASAN beside Rust).
                need("clang-14", "/usr/lib/llvm-14/bin/clang"),
                need("lld-14", "/usr/lib/llvm-14/bin/ld.lld"),
                need("llvm-14", "/usr/lib/llvm-14/bin/llvm-ar"),
            ]),
            Arch::Riscv64 => v.extend([
                need("device-tree-compiler", "dtc"),
                need("gcc-riscv64-linux-gnu", "riscv64-linux-gnu-gcc"),
                need("clang-14", "/usr/lib/llvm-14/bin/clang"),
                need("lld-14", "/usr/lib/llvm-14/bin/ld.lld"),
                need("llvm-14", "/usr/lib/llvm-14/bin/llvm-ar"),
            ]),
        }
    }
    v
}

fn present(n: &Need) -> bool {
    if n.probe.starts_with('/') {
        Path::new(n.probe).exists()
    } else {
        on_path(n.probe)
    }
}

/// What building the mainline line for `arch` needs besides `host_needs`: riscv64 builds with
/// clang, which mainline wants at 17 or newer (Debian 12 has 19 beside its default 14).
fn mainline_needs(arch: Arch) -> Vec<Need> {
    match arch {
        Arch::Riscv64 => vec![
            need("clang-19", "/usr/lib/llvm-19/bin/clang"),
            need("lld-19", "/usr/lib/llvm-19/bin/ld.lld"),
            need("llvm-19", "/usr/lib/llvm-19/bin/llvm-ar"),
        ],
        Arch::X86_64 | Arch::Arm64 => vec![],
    }
}

/// Installs what the mainline line's build for `arch` needs (`mainline_needs`), once a
/// mainline kernel is asked for: a run of the 6.12 line alone never downloads it.
pub fn ensure_mainline_packages(arch: Arch) -> Result<()> {
    // One apt at a time: arches' kernels build at once.
    static APT: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _one = APT.lock().unwrap_or_else(|e| e.into_inner());
    install(&|| mainline_needs(arch))
}

/// Installs missing host packages with apt as root; without root or apt,
/// fails with the exact list to install.
fn ensure_host_packages(arches: &[Arch]) -> Result<()> {
    install(&|| host_needs(arches))
}

/// Installs the missing packages of `needs` with apt as root; without root or apt, fails with
/// the exact list to install.
fn install(needs: &dyn Fn() -> Vec<Need>) -> Result<()> {
    let missing: Vec<&str> = needs()
        .iter()
        .filter(|n| !present(n))
        .map(|n| n.package)
        .collect();
    if missing.is_empty() {
        return Ok(());
    }
    let list = missing.join(" ");
    if !is_root() || !on_path("apt-get") {
        bail!(
            "missing host packages: {list}\n\
             install them (as root on Debian/Ubuntu): apt-get install --no-install-recommends {list}"
        );
    }
    eprintln!("setup: installing host packages: {list}");
    run(Command::new("apt-get").args(["-q", "update"])).context("apt-get update")?;
    run(Command::new("apt-get")
        .env("DEBIAN_FRONTEND", "noninteractive")
        .args(["-q", "-y", "install", "--no-install-recommends"])
        .args(&missing))
    .context("installing host packages")?;
    let still: Vec<&str> = needs()
        .iter()
        .filter(|n| !present(n))
        .map(|n| n.package)
        .collect();
    if !still.is_empty() {
        bail!(
            "apt-get installed but these are still missing: {}",
            still.join(" ")
        );
    }
    Ok(())
}

fn ensure_bindgen(paths: &Paths) -> Result<PathBuf> {
    let root = paths
        .cache
        .join(format!("tools/bindgen-cli-{BINDGEN_VERSION}"));
    let bin = root.join("bin/bindgen");
    if bin.is_file() {
        return Ok(bin);
    }
    eprintln!("setup: cargo install bindgen-cli {BINDGEN_VERSION} (about 2 minutes)");
    run_logged(
        Command::new("cargo")
            .args([
                "install",
                "--locked",
                "--version",
                BINDGEN_VERSION,
                "bindgen-cli",
                "--root",
            ])
            .arg(&root),
        &paths.cache.join("tools/bindgen-install.log"),
    )
    .context("installing bindgen-cli")?;
    Ok(bin)
}

/// Parses "QEMU emulator version 11.1.3 (Debian …)" into (11, 1).
fn qemu_version(banner: &str) -> Option<(u32, u32, String)> {
    let v = banner.split("version ").nth(1)?.split_whitespace().next()?;
    let mut it = v.split('.');
    Some((
        it.next()?.parse().ok()?,
        it.next()?.parse().ok()?,
        v.to_string(),
    ))
}

fn ensure_qemu(paths: &Paths, arches: &[Arch]) -> Result<Qemu> {
    // A system QEMU that is new enough and has every needed binary wins.
    let system = Qemu {
        prefix: None,
        version: String::new(),
    };
    let versions: Option<Vec<_>> = arches
        .iter()
        .map(|&a| {
            let out = system.command(a).arg("--version").output().ok()?;
            qemu_version(&String::from_utf8_lossy(&out.stdout))
        })
        .collect();
    if let Some(vs) = versions {
        if let Some((maj, min, v)) = vs.into_iter().min() {
            if (maj, min) >= QEMU_MIN {
                return Ok(Qemu {
                    prefix: None,
                    version: v,
                });
            }
        }
    }
    let prefix = paths.cache.join("qemu/trixie-backports");
    let done = prefix.join(".complete");
    if !done.exists() {
        eprintln!(
            "setup: no system QEMU >= 10.1; unpacking QEMU from trixie-backports into {} (~95 MB)",
            prefix.display()
        );
        let apt = PrivateApt::new(
            &paths.cache.join("apt/qemu"),
            "amd64",
            &["trixie", "trixie-backports"],
        )?;
        let debs = apt.download_with_deps(
            "trixie-backports",
            &[
                "qemu-system-x86",
                "qemu-system-arm",
                "qemu-system-riscv",
                "opensbi",
            ],
        )?;
        for deb in &debs {
            apt::extract(deb, &prefix)?;
        }
        std::fs::write(&done, "")?;
    }
    let q = Qemu {
        prefix: Some(prefix),
        version: String::new(),
    };
    let out = run(q.command(Arch::X86_64).arg("--version")).context("running the unpacked QEMU")?;
    let (_, _, version) =
        qemu_version(&out).with_context(|| format!("unexpected QEMU banner: {out}"))?;
    Ok(Qemu { version, ..q })
}

/// busybox-static for a guest: arm64 and amd64 from bookworm, riscv64 only
/// exists from trixie on.
fn ensure_busybox(paths: &Paths, arch: Arch) -> Result<PathBuf> {
    let prefix = paths.cache.join("busybox").join(arch.name());
    // bookworm installs it in /bin, trixie (merged /usr) in /usr/bin.
    let find = || {
        ["bin/busybox", "usr/bin/busybox"]
            .map(|p| prefix.join(p))
            .into_iter()
            .find(|p| p.is_file())
    };
    if let Some(bin) = find() {
        return Ok(bin);
    }
    eprintln!("setup: fetching busybox-static for {arch}");
    let suite = if arch == Arch::Riscv64 {
        "trixie"
    } else {
        "bookworm"
    };
    let apt = PrivateApt::new(
        &paths.cache.join("apt").join(format!("busybox-{arch}")),
        arch.debian_arch(),
        &[suite],
    )?;
    apt::extract(&apt.download_one("busybox-static")?, &prefix)?;
    find().with_context(|| format!("busybox-static for {arch} has no busybox binary"))
}

/// `cargo xtask setup`, also run before every build and boot.
/// `beside_bindgen` runs once the host packages are in, while bindgen compiles (the caller
/// unpacks the kernel source there: provisioning knows nothing of kernels).
pub fn ensure(
    paths: &Paths,
    arches: &[Arch],
    beside_bindgen: impl FnOnce() -> Result<()> + Send,
) -> Result<Toolchain> {
    std::fs::create_dir_all(&paths.cache)
        .with_context(|| format!("creating the cache {}", paths.cache.display()))?;
    // QEMU and busybox come from private apt states, apart from the
    // system's: they download while the host packages install and bindgen
    // compiles (a cold start's first minutes).
    std::thread::scope(|scope| {
        let fetched = scope.spawn(|| -> Result<_> {
            let qemu = ensure_qemu(paths, arches)?;
            let mut busybox = BTreeMap::new();
            for &a in arches {
                busybox.insert(a, ensure_busybox(paths, a)?);
            }
            Ok((qemu, busybox))
        });
        let bindgen = ensure_host_packages(arches).and_then(|()| {
            let beside = scope.spawn(beside_bindgen);
            let bindgen = ensure_bindgen(paths);
            beside
                .join()
                .map_err(|_| anyhow::anyhow!("the work beside bindgen's build panicked"))??;
            bindgen
        });
        let (qemu, busybox) = fetched
            .join()
            .map_err(|_| anyhow::anyhow!("fetching QEMU and busybox panicked"))??;
        Ok(Toolchain {
            bindgen: bindgen?,
            qemu,
            busybox,
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_qemu_banners() {
        let b = "QEMU emulator version 11.1.3 (Debian 1:11.1.3+ds-1~bpo13+1)\nCopyright";
        assert_eq!(qemu_version(b), Some((11, 1, "11.1.3".into())));
        assert!(qemu_version("QEMU emulator version 7.2.15").unwrap() < (10, 1, String::new()));
        assert_eq!(qemu_version("garbage"), None);
    }

    #[test]
    fn cross_tools_are_only_needed_for_their_arch() {
        let pk = |a: &[Arch]| host_needs(a).iter().map(|n| n.package).collect::<Vec<_>>();
        assert!(!pk(&[Arch::X86_64]).contains(&"gcc-riscv64-linux-gnu"));
        assert!(pk(&[Arch::Riscv64]).contains(&"lld-14"));
        assert!(pk(&[Arch::Arm64]).contains(&"gcc-aarch64-linux-gnu"));
    }
}
