//! Which kernel a build is: its line and the fragments over its config (the flavour), and a
//! finished build of it.

use crate::arch::Arch;
use std::path::PathBuf;
use vocab::line::Line;

/// Which config fragments go over tinyconfig besides base and the arch's.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Flavor {
    /// Names under guest-kernel/configs/ without `.config`, e.g. `debug`.
    pub extra: Vec<String>,
    /// The kernel line.
    pub line: Line,
    /// A kernel tree of the user's (`--kernel-src`), built as it is on the mainline line's
    /// fragments and toolchain (`user_tree`); `None`: the line's source package.
    pub src: Option<PathBuf>,
    /// The `guest-kernel` folder whose `rust/` and `patches/` go over the LTS tree: a kernel
    /// mutant's scratch copy (`cargo xtask mutate`); `None`: the checkout's.
    pub overlay: Option<PathBuf>,
}

impl Flavor {
    /// The `guest-kernel` folder an LTS build lays over the tree.
    pub fn guest(&self, root: &std::path::Path) -> PathBuf {
        self.overlay
            .clone()
            .unwrap_or_else(|| root.join("guest-kernel"))
    }

    /// Whether `arch` is built with clang (LLVM=): riscv64 always (Rust on
    /// 6.12 needs it there); arm64 in the debug flavour, because Linux 6.12
    /// allows KASAN beside Rust only in clang-built kernels.
    pub fn clang(&self, arch: Arch) -> bool {
        match arch {
            Arch::Riscv64 => true,
            Arch::Arm64 => self.extra.iter().any(|e| e == "debug"),
            Arch::X86_64 => false,
        }
    }

    /// How many times its timeouts a scenario gets on `arch` in this flavour:
    /// the debug kernels (KASAN, lockdep, kmemleak's scan at the end) boot and
    /// run several times slower under TCG (riscv64's surprise took 180 s on
    /// 6.12); 7.3's riscv64 debug kernel slower still (100 s to `Run /init`
    /// against 6.12's 30 s, its `mainline-unplug` past 360 s).
    pub fn slowdown(&self, arch: Arch) -> u32 {
        match (self.extra.iter().any(|e| e == "debug"), self.line, arch) {
            (false, ..) => 1,
            (true, Line::Mainline, Arch::Riscv64) => 8,
            (true, ..) => 3,
        }
    }

    pub fn name(&self) -> String {
        if self.extra.is_empty() {
            "base".into()
        } else {
            self.extra.join("+")
        }
    }
}

/// A finished kernel build.
#[derive(Clone, Debug)]
pub struct Kernel {
    pub arch: Arch,
    /// Built with clang ([`Flavor::clang`]): every make on it must say so.
    pub clang: bool,
    pub line: Line,
    pub src: PathBuf,
    pub build: PathBuf,
}

impl Kernel {
    pub fn image(&self) -> PathBuf {
        self.build.join(self.arch.kernel_image())
    }

    /// A module built in-tree, by its path relative to the build dir.
    pub fn module(&self, rel: &str) -> PathBuf {
        self.build.join(rel)
    }

    /// Its timer ticks per second (`CONFIG_HZ` of its .config), if the config says.
    pub fn hz(&self) -> Option<u32> {
        config_hz(&std::fs::read_to_string(self.build.join(".config")).ok()?)
    }
}

/// `CONFIG_HZ=N` of a .config.
pub(super) fn config_hz(config: &str) -> Option<u32> {
    config
        .lines()
        .find_map(|l| l.strip_prefix("CONFIG_HZ=")?.trim().parse().ok())
}
