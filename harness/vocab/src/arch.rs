//! The three guest architectures and everything that differs between them:
//! how the kernel is built and how QEMU boots it.

use std::fmt;
use std::str::FromStr;

/// vCPUs per guest (`-smp`): Revocable and Devres are only really tested
/// when a reader and a revoker run at the same time.
pub const VCPUS: usize = 2;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Arch {
    X86_64,
    Arm64,
    Riscv64,
}

impl Arch {
    pub const ALL: [Arch; 3] = [Arch::X86_64, Arch::Arm64, Arch::Riscv64];

    /// Whether the rig can boot it behind a vIOMMU that maps a vfio-user device exactly what
    /// the guest maps (x86_64's intel-iommu, arm64's virtio-iommu). riscv64 cannot: its
    /// VIRTIO_IOMMU is ARM64 || X86 (6.12 and 7.3), and QEMU 11 hangs at startup with a
    /// vfio-user device behind riscv-iommu, which 7.3 could drive (docs/defects.md).
    pub fn has_viommu(self) -> bool {
        matches!(self, Arch::X86_64 | Arch::Arm64)
    }

    pub fn name(self) -> &'static str {
        match self {
            Arch::X86_64 => "x86_64",
            Arch::Arm64 => "arm64",
            Arch::Riscv64 => "riscv64",
        }
    }

    /// Kbuild's `ARCH=`.
    pub fn kernel_arch(self) -> &'static str {
        match self {
            Arch::X86_64 => "x86_64",
            Arch::Arm64 => "arm64",
            Arch::Riscv64 => "riscv",
        }
    }

    /// Debian's name for the architecture (busybox-static packages).
    pub fn debian_arch(self) -> &'static str {
        match self {
            Arch::X86_64 => "amd64",
            Arch::Arm64 => "arm64",
            Arch::Riscv64 => "riscv64",
        }
    }

    /// Extra `make` variables for cross builds, with gcc or `clang` (the
    /// LLVM of folder `llvm`, the kernel line's). riscv64 needs clang for
    /// Rust (always), and clang-14's integrated assembler fails on its
    /// fpu.S, hence LLVM_IAS=0 (binutils' assembler, on both lines).
    pub fn make_vars(self, clang: bool, llvm: &str) -> Vec<String> {
        match self {
            Arch::X86_64 => vec![],
            Arch::Arm64 if clang => vec![format!("LLVM={llvm}")],
            Arch::Arm64 => vec!["CROSS_COMPILE=aarch64-linux-gnu-".into()],
            Arch::Riscv64 => vec![
                format!("LLVM={llvm}"),
                "LLVM_IAS=0".into(),
                "CROSS_COMPILE=riscv64-linux-gnu-".into(),
            ],
        }
    }

    /// The bootable image, relative to the build directory.
    pub fn kernel_image(self) -> &'static str {
        match self {
            // The ELF with its PVH entry note (CONFIG_PVH): QEMU loads it as is.
            Arch::X86_64 => "vmlinux",
            Arch::Arm64 => "arch/arm64/boot/Image",
            Arch::Riscv64 => "arch/riscv/boot/Image",
        }
    }

    /// What `make` builds: the image QEMU boots and the modules, nothing
    /// else (no bzImage or Image.gz compression, no board device trees).
    pub fn make_targets(self) -> [&'static str; 2] {
        match self {
            Arch::X86_64 => ["vmlinux", "modules"],
            Arch::Arm64 | Arch::Riscv64 => ["Image", "modules"],
        }
    }

    pub fn qemu_binary(self) -> &'static str {
        match self {
            Arch::X86_64 => "qemu-system-x86_64",
            Arch::Arm64 => "qemu-system-aarch64",
            Arch::Riscv64 => "qemu-system-riscv64",
        }
    }

    /// Machine profile: always TCG, with a PCIe root port (`rp0`) ready for
    /// the device under test.
    pub fn machine_args(self) -> Vec<String> {
        let args: &[&str] = match self {
            // Without ERMS/FSRM the kernel zeroes pages and copies with
            // `rep stosq`/`movsq` or plain moves: TCG runs a `rep` string
            // instruction one element per loop, so byte-wise `rep stosb`/
            // `movsb` cost 8x the iterations (`device`'s scenario phase,
            // 4 interleaved pairs: 2.23-2.37 s -> 1.75-1.87 s).
            Arch::X86_64 => &["-M", "q35", "-cpu", "max,erms=off,fsrm=off"],
            Arch::Arm64 => &["-M", "virt", "-cpu", "cortex-a57"],
            // AIA with IMSIC gives PCI devices MSI (as GICv2m does on arm64's virt);
            // without it everything shares INTx lines with the root port's pciehp.
            Arch::Riscv64 => &["-M", "virt,aia=aplic-imsic", "-bios", "default"],
        };
        let mut v: Vec<String> = args.iter().map(|s| s.to_string()).collect();
        // Guest RAM in a shared memfd: QEMU's vfio-user client then passes its file
        // descriptor with each DMA_MAP, so our device can DMA into guest memory itself.
        v.extend(
            [
                "-accel",
                "tcg",
                "-m",
                "512M",
                "-object",
                "memory-backend-memfd,id=ram,size=512M,share=on",
                "-machine",
                "memory-backend=ram",
                "-smp",
            ]
            .iter()
            .map(|s| s.to_string()),
        );
        v.push(VCPUS.to_string());
        // At 5 GT/s: QEMU's port never reported its link active for our device while it was
        // conventional PCI, and Linux waits for that after a bus reset only above 5 GT/s
        // (docs/defects.md).
        v.extend([
            "-device".into(),
            "pcie-root-port,id=rp0,bus=pcie.0,chassis=1,slot=1,x-speed=5".into(),
        ]);
        v
    }

    /// Kernel parameters every boot of this arch gets besides the console, for a kernel
    /// ticking `hz` times a second. x86_64: the boot's timer checks and calibrations poll
    /// against QEMU's clock, and on a loaded host a vCPU that is descheduled meanwhile gets
    /// them wrong: the IO-APIC timer check panicked a boot ("IO-APIC + timer doesn't work!"),
    /// and in 12 boots at once 4 calibrated the TSC at 77 to 630 MHz against the host's 2594,
    /// so the guest's clock ran up to 40 times fast and a driver's 1 s interrupt wait expired
    /// in milliseconds. So `no_timer_check` (QEMU's timer is known good), and
    /// `tsc_early_khz=` the host's TSC frequency: TCG's guest TSC is the host's
    /// (`host_tsc_khz`, which the rig measures). And `lpj=` the TSC's cycles per tick, which the first CPU derives
    /// from that frequency anyway: the second (another socket, no constant-TSC flag) would
    /// otherwise calibrate its delay loop for 70 ms of every boot. `nolapic_timer`: the
    /// local APIC timer has no known frequency under TCG (no TSC-deadline mode), so the
    /// kernel would count it against the tick for 100 ms (`HZ/10` ticks) of every boot; the
    /// HPET ticks instead, the second CPU through broadcast IPIs.
    pub fn kernel_args(self, hz: Option<u32>, host_tsc_khz: Option<u64>) -> String {
        match self {
            Arch::X86_64 => match (host_tsc_khz, hz) {
                (Some(khz), Some(hz)) => format!(
                    "no_timer_check tsc_early_khz={khz} lpj={} nolapic_timer",
                    khz * 1000 / u64::from(hz)
                ),
                (Some(khz), None) => format!("no_timer_check tsc_early_khz={khz} nolapic_timer"),
                (None, _) => "no_timer_check nolapic_timer".into(),
            },
            Arch::Arm64 | Arch::Riscv64 => String::new(),
        }
    }

    pub fn console(self) -> &'static str {
        match self {
            Arch::X86_64 | Arch::Riscv64 => "ttyS0",
            Arch::Arm64 => "ttyAMA0",
        }
    }
}

impl fmt::Display for Arch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Arch {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Arch::ALL
            .into_iter()
            .find(|a| a.name() == s)
            .ok_or_else(|| format!("unknown arch `{s}`; valid: x86_64, arm64, riscv64, all"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_every_name_and_rejects_others() {
        for a in Arch::ALL {
            assert_eq!(a.name().parse::<Arch>().unwrap(), a);
        }
        let err = "mips".parse::<Arch>().unwrap_err();
        assert!(err.contains("x86_64, arm64, riscv64"), "{err}");
    }
}
