//! The kernel lines the rig builds and boots: where each one's source comes from, and the facts
//! about its toolchain that every build of it needs.

/// The source package of the mainline line, pinned: Debian trixie-backports' newest Linux.
pub const MAINLINE_PACKAGE: &str = "linux-source-7.3";

/// A kernel line: where its source comes from and what we lay over it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Line {
    /// Linux 6.12 LTS (the host's linux-source-6.12) with our abstractions laid over it.
    #[default]
    Lts,
    /// Mainline 7.x (`MAINLINE_PACKAGE`), with upstream's own Rust abstractions.
    Mainline,
}

impl Line {
    /// `6.12` or `7`, as `--kernel` takes it.
    pub fn name(self) -> &'static str {
        match self {
            Line::Lts => "6.12",
            Line::Mainline => "7",
        }
    }

    /// Its source package's name.
    pub fn package(self) -> &'static str {
        match self {
            Line::Lts => "linux-source-6.12",
            Line::Mainline => MAINLINE_PACKAGE,
        }
    }

    /// Where the libclang its bindgen loads lives, always named: bindgen otherwise takes the
    /// newest on the host, and with mainline's libclang 19 installed, 6.12's riscv64 build (clang
    /// 14's flags, such as `-enable-trivial-auto-var-init-zero-knowing-it-will-be-removed-from-clang`)
    /// failed on a fresh cache. Mainline needs 17 or newer (package libclang1-19).
    pub fn libclang(self) -> &'static str {
        match self {
            Line::Lts => "/usr/lib/llvm-14/lib",
            Line::Mainline => "/usr/lib/llvm-19/lib",
        }
    }

    /// The LLVM its clang builds use (riscv64 always, arm64's debug flavour): mainline asks
    /// for clang 17 or newer, Debian 12's default is 14.
    pub fn llvm(self) -> &'static str {
        match self {
            Line::Lts => "/usr/lib/llvm-14/bin/",
            Line::Mainline => "/usr/lib/llvm-19/bin/",
        }
    }

    /// This line's base fragment under guest-kernel/configs/ (the arch's are shared).
    pub fn base_fragment(self) -> &'static str {
        match self {
            Line::Lts => "base",
            Line::Mainline => "mainline/base",
        }
    }
}
