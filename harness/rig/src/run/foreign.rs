//! A module pci-rig did not write (`cargo xtask test --module DIR`): its name from its Kbuild
//! (or Makefile), built against each boot's kernel, and the device its PCI id table names,
//! read from the built `.ko`'s aliases: ours or QEMU's pci-testdev.

use crate::host::provision::Toolchain;
use crate::kernel::{self, user_tree, Kernel, Line};
use crate::scenario::{self, Scenario};
use anyhow::{bail, Context, Result};
use object::{Object, ObjectSection};
use std::path::{Path, PathBuf};

/// The module the `module-*` scenarios run when none is given (the default run's
/// `module-probe`, `mutate`'s): our C driver for the device, under `guest-kernel/`.
pub const EXAMPLE: &str = "foreign/pcirig_c";

/// QEMU's pci-testdev: Red Hat's vendor id, its device id.
const TESTDEV: (u32, u32) = (0x1b36, 0x0005);

/// The devices a foreign module can be given.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Device {
    /// Our device (`qemu-device`): its access log, DMA log, config log and fault knobs.
    Ours,
    /// QEMU's pci-testdev: the MMIO oracle only.
    Testdev,
}

impl Device {
    /// Its vendor and device ids.
    pub fn ids(self) -> (u32, u32) {
        match self {
            Device::Ours => (regmap::VENDOR_ID, regmap::DEVICE_ID),
            Device::Testdev => TESTDEV,
        }
    }

    /// What the guest finds it by (`pcirig.dev=`, images/init's `find_module_dev`).
    pub fn cmdline(self) -> String {
        let (v, d) = self.ids();
        format!("pcirig.dev=0x{v:04x}:0x{d:04x}")
    }
}

/// A foreign module, built for one kernel.
#[derive(Clone, Debug)]
pub struct Foreign {
    pub name: String,
    pub ko: PathBuf,
    pub device: Device,
}

impl Foreign {
    /// The kernel command line's words for the guest (images/scenarios/module-*.sh).
    pub fn cmdline(&self) -> String {
        format!(" pcirig.module={} {}", self.name, self.device.cmdline())
    }
}

/// What runs for a user's code: with a tree (`--kernel-src`, what it `has`), the mainline
/// line's boot and doctests where it has Rust, and the `module-*` scenarios where there is a
/// module (`module`, or the tree's own Rust PCI sample); with a module alone, its scenarios on
/// `lines`. Each scenario left out comes with why, for the user.
pub fn chosen(
    module: bool,
    tree: Option<&user_tree::Has>,
    lines: &[Line],
) -> (Vec<&'static Scenario>, Vec<String>) {
    let modules = |line: Line| -> Vec<&'static Scenario> {
        scenario::FOREIGN
            .iter()
            .copied()
            .filter(|s| s.line == line)
            .collect()
    };
    let Some(has) = tree else {
        return (lines.iter().flat_map(|&l| modules(l)).collect(), Vec::new());
    };
    let mut run = vec![&scenario::MAINLINE_BOOT];
    let mut left = Vec::new();
    if has.rust {
        run.push(&scenario::MAINLINE_KUNIT);
    } else {
        left.push(format!(
            "{}: the tree has no Rust (rust/kernel/lib.rs), so no doctests",
            scenario::MAINLINE_KUNIT.name
        ));
    }
    if module || has.pci_sample {
        run.extend(modules(Line::Mainline));
    } else {
        let why = match has.rust_pci {
            true => "the tree has Rust PCI abstractions but no samples/rust/rust_driver_pci.rs",
            false => "the tree has no Rust PCI abstractions (rust/kernel/pci.rs) nor their sample",
        };
        left.extend(
            modules(Line::Mainline)
                .iter()
                .map(|s| format!("{}: {why}, and no --module was given", s.name)),
        );
    }
    (run, left)
}

/// The module `dir` builds: the one `obj-m` names in its Kbuild (or Makefile).
pub fn module_name(dir: &Path) -> Result<String> {
    let mut names = Vec::new();
    let mut read = Vec::new();
    for file in ["Kbuild", "Makefile"] {
        let Ok(text) = std::fs::read_to_string(dir.join(file)) else {
            continue;
        };
        read.push(file);
        names.extend(obj_m(&text));
        if !names.is_empty() {
            break;
        }
    }
    match names.as_slice() {
        [one] => Ok(one.clone()),
        [] if read.is_empty() => bail!(
            "--module {}: no Kbuild or Makefile there; a module's directory holds one with `obj-m := NAME.o` and its sources",
            dir.display()
        ),
        [] => bail!(
            "--module {}: its {} names no module (`obj-m := NAME.o`)",
            dir.display(),
            read.join(" and ")
        ),
        many => bail!(
            "--module {}: `obj-m` names {} modules ({}); the rig loads one: give a directory that builds only it",
            dir.display(),
            many.len(),
            many.join(", ")
        ),
    }
}

/// The modules an `obj-m` line of a Kbuild file names (`obj-m := a.o`, `obj-m += b.o c.o`).
fn obj_m(text: &str) -> Vec<String> {
    text.lines()
        .filter_map(|l| {
            let rest = l.trim().strip_prefix("obj-m")?.trim_start();
            let rest = rest
                .strip_prefix(":=")
                .or_else(|| rest.strip_prefix("+="))
                .or_else(|| rest.strip_prefix('='))?;
            Some(
                rest.split_whitespace()
                    .filter_map(|o| o.strip_suffix(".o"))
                    .map(str::to_string)
                    .collect::<Vec<_>>(),
            )
        })
        .flatten()
        .collect()
}

/// Builds the module in `dir` against `kernel` and finds its device.
pub fn build(tc: &Toolchain, kernel: &Kernel, dir: &Path) -> Result<Foreign> {
    let name = module_name(dir)?;
    let ko = kernel::module::build_foreign(tc, kernel, dir, &name)?;
    let device =
        device_of(&std::fs::read(&ko).with_context(|| format!("reading {}", ko.display()))?)
            .with_context(|| format!("{}", ko.display()))?;
    Ok(Foreign { name, ko, device })
}

/// One of the kernel's own modules (`rel`, in its build tree) as the foreign module.
pub fn in_tree(kernel: &Kernel, rel: &str) -> Result<Foreign> {
    let ko = kernel.module(rel);
    let bytes = std::fs::read(&ko).with_context(|| {
        format!(
            "the kernel built no {rel} (is its config option on in this tree? the build's .config is {})",
            kernel.build.join(".config").display()
        )
    })?;
    let name = ko
        .file_stem()
        .map(|n| n.to_string_lossy().into_owned())
        .context("a module without a name")?;
    let device = device_of(&bytes).with_context(|| format!("{}", ko.display()))?;
    Ok(Foreign { name, ko, device })
}

/// The device a module's PCI aliases (`.modinfo`'s `alias=pci:v…d…`) name.
pub fn device_of(ko: &[u8]) -> Result<Device> {
    let file = object::File::parse(ko).context("not an ELF object")?;
    let modinfo = file
        .section_by_name(".modinfo")
        .context("no .modinfo section: not a kernel module")?
        .data()?;
    let ids: Vec<(u32, u32)> = modinfo
        .split(|&b| b == 0)
        .filter_map(|s| std::str::from_utf8(s).ok()?.strip_prefix("alias=pci:"))
        .filter_map(pci_alias)
        .collect();
    for device in [Device::Ours, Device::Testdev] {
        if ids.contains(&device.ids()) {
            return Ok(device);
        }
    }
    let named: Vec<String> = ids
        .iter()
        .map(|(v, d)| format!("{v:04x}:{d:04x}"))
        .collect();
    bail!(
        "its PCI id table names {}; the rig can give it our device ({:04x}:{:04x}) or QEMU's pci-testdev (1b36:0005)",
        if named.is_empty() {
            "no device (no `alias=pci:` in .modinfo)".to_string()
        } else {
            named.join(", ")
        },
        regmap::VENDOR_ID,
        regmap::DEVICE_ID
    )
}

/// `v00007072d00000001sv*sd*bc*sc*i*`: the vendor and device, when both are named.
fn pci_alias(alias: &str) -> Option<(u32, u32)> {
    let rest = alias.strip_prefix('v')?;
    let vendor = rest.get(..8)?;
    let device = rest.get(8..)?.strip_prefix('d')?.get(..8)?;
    Some((
        u32::from_str_radix(vendor, 16).ok()?,
        u32::from_str_radix(device, 16).ok()?,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn obj_m_names_each_module_of_each_line() {
        assert_eq!(obj_m("obj-m := rust_driver_pci.o\n"), ["rust_driver_pci"]);
        assert_eq!(
            obj_m("ccflags-y := -DX\nobj-m += a.o b.o\nobj-m+=c.o\n"),
            ["a", "b", "c"]
        );
        assert!(obj_m("obj-y := a.o\n# obj-m is set below\n").is_empty());
    }

    #[test]
    fn a_pci_alias_gives_its_vendor_and_device() {
        assert_eq!(
            pci_alias("v00001B36d00000005sv*sd*bc*sc*i*"),
            Some((0x1b36, 5))
        );
        assert_eq!(pci_alias("v*d*sv*sd*bc02sc00i*"), None);
        assert_eq!(pci_alias("v00007072"), None);
    }

    #[test]
    fn a_trees_scenarios_follow_what_it_has() {
        let names = |v: &[&Scenario]| v.iter().map(|s| s.name).collect::<Vec<_>>().join(",");
        let mut has = user_tree::Has {
            rust: true,
            rust_pci: true,
            pci_sample: true,
            kunit_py: true,
        };
        let (run, left) = chosen(false, Some(&has), &[Line::Mainline]);
        assert_eq!(
            names(&run),
            "mainline-boot,mainline-kunit,mainline-module-probe,mainline-module-unplug,mainline-module-surprise,mainline-module-sweep"
        );
        assert!(left.is_empty(), "{left:?}");
        has.pci_sample = false;
        let (run, left) = chosen(false, Some(&has), &[Line::Mainline]);
        assert_eq!(names(&run), "mainline-boot,mainline-kunit");
        assert!(
            left[0].contains("no samples/rust/rust_driver_pci.rs, and no --module"),
            "{left:?}"
        );
        // A module of the user's runs on any tree; no Rust, no doctests.
        has.rust = false;
        let (run, left) = chosen(true, Some(&has), &[Line::Mainline]);
        assert!(names(&run).starts_with("mainline-boot,mainline-module-probe"));
        assert!(left[0].contains("no Rust"), "{left:?}");
        // A module alone: its scenarios on the lines asked for.
        let (run, _) = chosen(true, None, &[Line::Lts]);
        assert_eq!(
            names(&run),
            "module-probe,module-unplug,module-surprise,module-sweep"
        );
    }

    #[test]
    fn a_directory_without_a_module_says_what_it_lacks() {
        let dir = std::env::temp_dir().join(format!("pci-rig-foreign-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let e = module_name(&dir).unwrap_err().to_string();
        assert!(e.contains("no Kbuild or Makefile"), "{e}");
        std::fs::write(dir.join("Kbuild"), "obj-m := a.o b.o\n").unwrap();
        let e = module_name(&dir).unwrap_err().to_string();
        assert!(e.contains("names 2 modules (a, b)"), "{e}");
        std::fs::write(dir.join("Kbuild"), "obj-m := a.o\n").unwrap();
        assert_eq!(module_name(&dir).unwrap(), "a");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
