//! The device-tree contract between the rig, which adds nodes to a machine's tree, the guest's
//! platform modules, which bind to them, and the judge, which reads what they print.

/// The compatible string of the platform demo node.
pub const DEMO_COMPATIBLE: &str = "pci-rig,platform-demo";
/// virtio-mmio's MagicValue ("virt"), which the demo driver reads at offset 0.
pub const DEMO_MAGIC: &str = "0x74726976";
/// The length the MMIO oracle watches from the demo node's address: a
/// virtio-mmio transport's register block (QEMU's `virt` machines space
/// them 0x200 apart on arm64, 0x1000 on riscv64).
pub const DEMO_WINDOW_LEN: u64 = 0x200;
/// The CPUs' OPP table, in kHz, lowest first (the clock starts at the last).
pub const OPP_KHZ: [u64; 4] = [250_000, 500_000, 750_000, 1_000_000];
/// The name of the CPUs' clock (debugfs `clk/<name>/clk_rate`).
pub const CPU_CLOCK: &str = "pcirig-cpu";

/// What a scenario's device tree needs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Edit {
    /// The platform demo node.
    Platform,
    /// Clock, OPP table and the cpufreq driver's node.
    Cpufreq,
}
