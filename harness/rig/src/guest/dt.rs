//! Device trees for the `platform` and `cpufreq` scenarios, and how those two
//! are judged.
//!
//! QEMU's `virt` machines (arm64, riscv64) make their device tree
//! themselves. For these scenarios the harness asks QEMU for it
//! (`-machine dumpdtb=`, with the boot's own machine arguments), turns it
//! into source with `dtc` (Debian's `device-tree-compiler`), appends what the
//! scenario needs, compiles it again and boots with `-dtb`:
//!
//! - `platform`: one of the machine's virtio-mmio transports (no virtio
//!   device is attached to it and the guest has no virtio driver) becomes
//!   `compatible = "pci-rig,platform-demo"`: a real MMIO window whose first
//!   register reads "virt", for `guest-kernel/platform/pcirig_platform.rs`.
//! - `cpufreq`: a settable clock (`pci-rig,virtual-clock`, our provider in
//!   patch 0006: QEMU's own clocks are fixed and none drives the CPUs), an
//!   `opp-shared` OPP table ([`OPP_KHZ`]) that every CPU node points to along
//!   with that clock, and the `pci-rig,cpufreq-dt` node that
//!   `guest-kernel/platform/rcpufreq_dt.rs` binds.
//!
//! x86_64 (q35) boots from ACPI, not a device tree: both scenarios are for
//! arm64 and riscv64 only.

use crate::arch::Arch;
use crate::host::process::run_logged;
use crate::host::provision::Qemu;
use anyhow::{bail, Context, Result};
use std::path::{Path, PathBuf};
use std::process::Command;

pub use vocab::devicetree::*;

/// The nodes of a device-tree source that the edits refer to.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Nodes {
    /// Full paths of `virtio_mmio@…` nodes, in source order.
    pub virtio_mmio: Vec<String>,
    /// Full paths of the `cpu@…` nodes under `/cpus`, in source order.
    pub cpus: Vec<String>,
}

/// Finds the nodes of `dts` (as `dtc -O dts` writes it: one node or
/// property per line, `name {` opening and `};` closing a node).
pub fn nodes(dts: &str) -> Nodes {
    let mut path: Vec<String> = Vec::new();
    let mut found = Nodes::default();
    for line in dts.lines().map(str::trim) {
        if let Some(head) = line.strip_suffix('{') {
            // `label: name {` or `name {`; the root is `/`.
            let name = head.trim().rsplit(':').next().unwrap_or("").trim();
            let full = match (path.last(), name) {
                (None, _) => "/".to_string(),
                (Some(p), n) if p == "/" => format!("/{n}"),
                (Some(p), n) => format!("{p}/{n}"),
            };
            if name.starts_with("virtio_mmio@") {
                found.virtio_mmio.push(full.clone());
            }
            if name.starts_with("cpu@") && path.last().is_some_and(|p| p == "/cpus") {
                found.cpus.push(full.clone());
            }
            path.push(full);
        } else if line == "};" {
            path.pop();
        }
    }
    found
}

/// The source appended to QEMU's device tree for `edit`.
pub fn fragment(edit: Edit, nodes: &Nodes) -> Result<String> {
    let mut s = String::from("\n// Added by pci-rig (harness/rig/src/guest/dt.rs).\n");
    match edit {
        Edit::Platform => {
            // Any transport will do: these boots attach no virtio device.
            let Some(node) = nodes.virtio_mmio.last() else {
                bail!("QEMU's device tree has no virtio_mmio node to turn into the platform demo node");
            };
            s.push_str(&format!(
                "&{{{node}}} {{\n\tcompatible = \"{DEMO_COMPATIBLE}\";\n}};\n"
            ));
        }
        Edit::Cpufreq => {
            if nodes.cpus.is_empty() {
                bail!("QEMU's device tree has no cpu@N node under /cpus");
            }
            let max = OPP_KHZ[OPP_KHZ.len() - 1] * 1000;
            let min = OPP_KHZ[0] * 1000;
            s.push_str(&format!(
                "/ {{\n\
                 \tpcirig_cpu_clk: pcirig-cpu-clock {{\n\
                 \t\tcompatible = \"pci-rig,virtual-clock\";\n\
                 \t\t#clock-cells = <0>;\n\
                 \t\tclock-frequency = <{max}>;\n\
                 \t\tpci-rig,min-rate = <{}>;\n\
                 \t\tpci-rig,max-rate = <{}>;\n\
                 \t\tclock-output-names = \"{CPU_CLOCK}\";\n\
                 \t}};\n\
                 \tpcirig_cpu_opp: opp-table-pcirig-cpu {{\n\
                 \t\tcompatible = \"operating-points-v2\";\n\
                 \t\topp-shared;\n",
                min / 2,
                max * 2
            ));
            for khz in OPP_KHZ {
                let hz = khz * 1000;
                s.push_str(&format!(
                    "\t\topp-{hz} {{\n\t\t\topp-hz = /bits/ 64 <{hz}>;\n\t\t\tclock-latency-ns = <100000>;\n\t\t}};\n"
                ));
            }
            s.push_str(
                "\t};\n\tpcirig-cpufreq {\n\t\tcompatible = \"pci-rig,cpufreq-dt\";\n\t};\n};\n",
            );
            for cpu in &nodes.cpus {
                s.push_str(&format!(
                    "&{{{cpu}}} {{\n\tclocks = <&pcirig_cpu_clk>;\n\toperating-points-v2 = <&pcirig_cpu_opp>;\n}};\n"
                ));
            }
        }
    }
    Ok(s)
}

/// The demo node's MMIO window (its unit address, [`DEMO_WINDOW_LEN`]),
/// which `fragment` makes of the last virtio-mmio transport.
pub fn demo_window(nodes: &Nodes) -> Option<(u64, u64)> {
    let unit = nodes.virtio_mmio.last()?.rsplit_once('@')?.1;
    Some((u64::from_str_radix(unit, 16).ok()?, DEMO_WINDOW_LEN))
}

/// A device tree to boot with, and the MMIO window the oracle watches in
/// it (the platform demo node's; none for cpufreq).
pub struct Prepared {
    pub dtb: PathBuf,
    pub window: Option<(u64, u64)>,
}

/// Writes the edited device tree for `edit` into `dir` (QEMU's own as
/// `qemu.dtb`/`qemu.dts`, ours as `pcirig.dts`/`pcirig.dtb`, the tools'
/// output in `dt-*.log`) and returns the `.dtb` to boot with.
pub fn prepare(qemu: &Qemu, arch: Arch, dir: &Path, edit: Edit) -> Result<Prepared> {
    if arch == Arch::X86_64 {
        bail!("x86_64 (q35) boots from ACPI: there is no device tree to edit");
    }
    let qemu_dtb = dir.join("qemu.dtb");
    let log = dir.join("dt-decompile.log");
    let mut dump = qemu.command(arch);
    dump.args(arch.machine_args())
        .args(["-nodefaults", "-display", "none", "-machine"])
        .arg(format!("dumpdtb={}", qemu_dtb.display()));
    run_logged(&mut dump, &dir.join("dt-dump.log"))
        .context("asking QEMU for its device tree (-machine dumpdtb)")?;
    let qemu_dts = dir.join("qemu.dts");
    dtc(
        &["-I", "dtb", "-O", "dts", "-o"],
        &qemu_dts,
        &qemu_dtb,
        &log,
    )?;
    let source = std::fs::read_to_string(&qemu_dts)?;
    let ours = dir.join("pcirig.dts");
    let found = nodes(&source);
    std::fs::write(&ours, format!("{source}{}", fragment(edit, &found)?))?;
    let dtb = dir.join("pcirig.dtb");
    dtc(
        &["-I", "dts", "-O", "dtb", "-o"],
        &dtb,
        &ours,
        &dir.join("dt-build.log"),
    )?;
    let window = match edit {
        Edit::Platform => demo_window(&found),
        Edit::Cpufreq => None,
    };
    Ok(Prepared { dtb, window })
}

fn dtc(args: &[&str], out: &Path, input: &Path, log: &Path) -> Result<()> {
    let mut c = Command::new("dtc");
    // -q: QEMU's own tree draws warnings (e.g. unit addresses) we did not cause.
    c.arg("-q").args(args).arg(out).arg(input);
    run_logged(&mut c, log).with_context(|| {
        format!(
            "dtc could not turn {} into {} (dtc comes from Debian's device-tree-compiler, \
             which `cargo xtask setup` installs)",
            input.display(),
            out.display()
        )
    })?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const DTS: &str = "/dts-v1/;\n\n/ {\n\tcompatible = \"linux,dummy-virt\";\n\n\
        \tvirtio_mmio@a000000 {\n\t\tcompatible = \"virtio,mmio\";\n\t};\n\n\
        \tvirtio_mmio@a000200 {\n\t\tcompatible = \"virtio,mmio\";\n\t};\n\n\
        \tcpus {\n\t\tcpu-map {\n\t\t\tcluster0 {\n\t\t\t\tcore0 {\n\t\t\t\t};\n\t\t\t};\n\t\t};\n\n\
        \t\tcpu@0 {\n\t\t\treg = <0x00>;\n\t\t};\n\n\t\tcpu@1 {\n\t\t\treg = <0x01>;\n\t\t};\n\t};\n\n\
        \tsoc {\n\t\tplic: interrupt-controller@c000000 {\n\t\t};\n\t\tvirtio_mmio@10008000 {\n\t\t};\n\t};\n};\n";

    #[test]
    fn the_demo_window_is_the_last_transports_unit_address() {
        assert_eq!(
            demo_window(&nodes(DTS)),
            Some((0x1000_8000, DEMO_WINDOW_LEN))
        );
        assert_eq!(demo_window(&Nodes::default()), None);
    }

    #[test]
    fn finds_transports_and_cpus_with_their_paths() {
        let n = nodes(DTS);
        assert_eq!(
            n.virtio_mmio,
            [
                "/virtio_mmio@a000000",
                "/virtio_mmio@a000200",
                "/soc/virtio_mmio@10008000"
            ]
        );
        assert_eq!(n.cpus, ["/cpus/cpu@0", "/cpus/cpu@1"]);
    }

    #[test]
    fn fragments_name_the_nodes_and_refuse_a_tree_without_them() {
        let n = nodes(DTS);
        let p = fragment(Edit::Platform, &n).unwrap();
        assert!(p.contains("&{/soc/virtio_mmio@10008000} {"), "{p}");
        assert!(p.contains("\"pci-rig,platform-demo\""), "{p}");
        let c = fragment(Edit::Cpufreq, &n).unwrap();
        for want in [
            "&{/cpus/cpu@0} {",
            "&{/cpus/cpu@1} {",
            "opp-hz = /bits/ 64 <250000000>;",
            "opp-hz = /bits/ 64 <1000000000>;",
            "clock-frequency = <1000000000>;",
            "compatible = \"pci-rig,cpufreq-dt\";",
        ] {
            assert!(c.contains(want), "missing {want} in\n{c}");
        }
        let e = fragment(Edit::Platform, &Nodes::default()).unwrap_err();
        assert!(e.to_string().contains("no virtio_mmio node"), "{e}");
        let e = fragment(Edit::Cpufreq, &Nodes::default()).unwrap_err();
        assert!(e.to_string().contains("no cpu@N node"), "{e}");
    }
}
