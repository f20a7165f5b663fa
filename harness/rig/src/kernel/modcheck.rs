//! Checks on built kernel modules that need no boot: where the PCI id table
//! lands in a `.ko`, and that the abstractions refuse mistakes at build time
//! (a constant offset past the end of an `Io<SIZE>`, a device that may be
//! unbound where a bound one is needed).

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use object::{elf, Object, ObjectSection, ObjectSymbol, SectionFlags};

use crate::arch::Arch;
use crate::host::provision::Toolchain;
use crate::kernel::{self, Kernel};

/// `struct pci_device_id` on a 64-bit kernel: six `u32`s, a
/// `kernel_ulong_t` and a `u32`, padded to 8 bytes.
const PCI_DEVICE_ID_SIZE: usize = 40;

/// What the id table of a module holds.
#[derive(Debug, PartialEq, Eq)]
pub struct IdTable {
    /// The section holding it.
    pub section: String,
    /// (vendor, device) of every entry before the sentinel.
    pub ids: Vec<(u32, u32)>,
}

/// Finds the `__mod_pci__*_device_table` symbol modpost reads and checks
/// that it is in allocated, read-only data and ends in an all-zero entry.
pub fn pci_id_table(ko: &[u8]) -> Result<IdTable> {
    let file = object::File::parse(ko).context("not an ELF object")?;
    let sym = file
        .symbols()
        .find(|s| {
            s.name()
                .is_ok_and(|n| n.starts_with("__mod_pci__") && n.ends_with("_device_table"))
        })
        .context("no __mod_pci__*_device_table symbol: modpost sees no PCI id table")?;
    let index = sym
        .section_index()
        .context("the id table symbol is not defined in a section")?;
    let section = file.section_by_index(index)?;
    let name = section.name().unwrap_or("?").to_string();
    let SectionFlags::Elf { sh_flags } = section.flags() else {
        bail!("not an ELF section: {name}");
    };
    if sh_flags & u64::from(elf::SHF_ALLOC) == 0 {
        bail!("the id table is in {name}, which is not loaded (no SHF_ALLOC)");
    }
    if sh_flags & u64::from(elf::SHF_WRITE) != 0 {
        bail!("the id table is in {name}, which is writable; it must be read-only data");
    }
    let start = usize::try_from(sym.address() - section.address())?;
    let size = usize::try_from(sym.size())?;
    let table = section
        .data()?
        .get(start..start + size)
        .context("the id table symbol runs past its section")?;
    if size == 0 || size % PCI_DEVICE_ID_SIZE != 0 {
        bail!("the id table is {size} bytes, not whole struct pci_device_id entries of {PCI_DEVICE_ID_SIZE}");
    }
    let entries: Vec<&[u8]> = table.chunks(PCI_DEVICE_ID_SIZE).collect();
    let (last, rest) = entries.split_last().expect("size > 0");
    if last.iter().any(|&b| b != 0) {
        bail!("the id table does not end in a zero sentinel: last entry {last:02x?}");
    }
    let word = |e: &[u8], at: usize| {
        let b: [u8; 4] = e[at..at + 4].try_into().expect("4 bytes");
        if file.is_little_endian() {
            u32::from_le_bytes(b)
        } else {
            u32::from_be_bytes(b)
        }
    };
    let ids: Vec<(u32, u32)> = rest.iter().map(|e| (word(e, 0), word(e, 4))).collect();
    if ids.is_empty() {
        bail!("the id table holds only its sentinel");
    }
    if let Some(i) = ids.iter().position(|&(vendor, _)| vendor == 0) {
        bail!("entry {i} has vendor 0 and would end the table early");
    }
    Ok(IdTable { section: name, ids })
}

/// A mistake the abstractions must refuse at build time: the make variable
/// that switches it on in guest-kernel/compile-fail, what the build log
/// must say (all of the needles in one line), how many builds in a row
/// of the same source must each refuse it, and the arches whose kernels
/// build what it misuses (empty: all).
pub struct Mistake {
    pub name: &'static str,
    pub var: &'static str,
    pub needles: &'static [&'static str],
    pub builds: usize,
    pub only: &'static [Arch],
}

impl Mistake {
    /// Whether `arch`'s kernel builds what this mistake misuses.
    pub fn applies_to(&self, arch: Arch) -> bool {
        self.only.is_empty() || self.only.contains(&arch)
    }
}

/// The mistakes of guest-kernel/compile-fail, each refused for its reason.
pub const MISTAKES: &[Mistake] = &[
    Mistake {
        name: "an Io<16> read past its end",
        var: "PAST_END=y",
        needles: &["build_error"],
        builds: 1,
        only: &[],
    },
    Mistake {
        name: "iomap_region on a device that may be unbound",
        var: "IOMAP_UNBOUND=y",
        needles: &["E0599", "iomap_region"],
        builds: 1,
        only: &[],
    },
    Mistake {
        name: "Devres::access without a bound device",
        var: "ACCESS_UNBOUND=y",
        needles: &["E0308"],
        builds: 1,
        only: &[],
    },
    Mistake {
        name: "an interrupt vector made from a raw number",
        var: "IRQ_RAW=y",
        needles: &["E0133", "IrqVector"],
        builds: 1,
        only: &[],
    },
    Mistake {
        name: "an Opp kept after its Table was dropped",
        var: "OPP_OUTLIVES_TABLE=y",
        needles: &["E0505", "`table`"],
        builds: 1,
        only: &[Arch::Arm64, Arch::Riscv64],
    },
    Mistake {
        name: "DMA memory allocated for a device that may be unbound",
        var: "DMA_UNBOUND=y",
        // E0308 (mismatched types), by its note: the device must be bound.
        needles: &["expected reference `&kernel::device::Device<kernel::device::Bound>`"],
        builds: 1,
        only: &[],
    },
    Mistake {
        name: "DMA memory kept past the guard of its Devres",
        var: "DMA_KEPT_PAST_BINDING=y",
        needles: &["E0597", "`guard`"],
        builds: 1,
        only: &[],
    },
    Mistake {
        name: "Revocable::revoke with a guard of it held",
        var: "REVOKE_IN_GUARD=y",
        needles: &["E0133", "revoke"],
        builds: 1,
        only: &[],
    },
    Mistake {
        name: "a closure of the module spawned with nothing to cancel it",
        var: "SPAWN_IN_MODULE=y",
        needles: &["E0133", "try_spawn"],
        builds: 1,
        only: &[],
    },
    Mistake {
        name: "a config space read past its 256 bytes",
        var: "CONFIG_PAST_END=y",
        needles: &["build_error"],
        builds: 1,
        only: &[],
    },
    Mistake {
        name: "config space of a device that may be unbound",
        var: "CONFIG_UNBOUND=y",
        needles: &["E0599", "config_space"],
        builds: 1,
        only: &[],
    },
    Mistake {
        name: "is_present on a device that may be unbound",
        var: "PRESENT_UNBOUND=y",
        needles: &["E0599", "is_present"],
        builds: 1,
        only: &[],
    },
    Mistake {
        name: "a warning, built twice",
        var: "WARNS=y",
        needles: &["warning: unused variable"],
        builds: 2,
        only: &[],
    },
];

/// The line of a failed build's log that shows it failed for `m`'s reason.
pub fn refusal<'a>(m: &Mistake, log: &'a str) -> Option<&'a str> {
    log.lines()
        .find(|l| m.needles.iter().all(|n| l.contains(n)))
        .map(str::trim)
}

/// Builds `dir` (guest-kernel/compile-fail) as is, which must build, and once
/// per [`MISTAKES`] entry, which must fail for its reason and leave no
/// module. Returns a summary. Each variant builds in its own copy, so all
/// build at once; a mistake built more than once builds in a row. The
/// verdict is the one of building them in turn: the first failure in order.
pub fn compile_fail(tc: &Toolchain, kernel: &Kernel, dir: &Path) -> Result<String> {
    // A mistake's build removes the module an earlier build left, which must
    // not count as this one's. The correct one keeps it: its build returns
    // it without make only when a clean build of the very same inputs left it.
    let build = |label: &str, vars: &[&str], fresh: bool| {
        let ko = kernel
            .build
            .join("pci-rig-external")
            .join(label)
            .join("compile_fail.ko");
        if fresh {
            let _ = std::fs::remove_file(&ko);
        }
        let result =
            kernel::module::build_module_copy(tc, kernel, dir, &[], label, "compile_fail", vars);
        (result, ko)
    };
    let (correct, refusals) = std::thread::scope(|s| {
        let mistakes: Vec<_> = MISTAKES
            .iter()
            .enumerate()
            .filter(|(_, m)| m.applies_to(kernel.arch))
            .map(|(i, m)| {
                let label = format!("compile_fail-mistake{i}");
                s.spawn(move || refused(m, || build(&label, &[m.var], true)))
            })
            .collect();
        let correct = build("compile_fail-correct", &[], false);
        let refusals: Vec<Result<String>> = mistakes
            .into_iter()
            .map(|t| t.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
            .collect();
        (correct, refusals)
    });
    let (correct, ko) = correct;
    correct.context("the module without mistakes must build, but did not")?;
    if !ko.exists() {
        bail!("the correct build succeeded but left no {}", ko.display());
    }
    let mut summary = vec!["correct: built".to_string()];
    for line in refusals {
        summary.push(line?);
    }
    Ok(summary.join("; "))
}

/// Builds `m`'s variant (`build`, in its own copy) as many times in a row
/// as `m` says; each build must be refused for `m`'s reason and leave no
/// module. Returns its line of the summary.
fn refused(m: &Mistake, build: impl Fn() -> (Result<PathBuf>, PathBuf)) -> Result<String> {
    let mut lines = Vec::new();
    let mut given_back = 0;
    for n in 1..=m.builds {
        let (result, ko) = build();
        let log = ko.with_file_name("pci-rig-make.log");
        match result {
            Ok(_) => bail!(
                "{} built ({}, build {n}); it must be refused",
                m.name,
                ko.display()
            ),
            Err(e) if format!("{e:#}").contains(kernel::module::GIVEN_BACK) => given_back += 1,
            Err(_) => {}
        }
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        let Some(line) = refusal(m, &text) else {
            bail!(
                "{} failed to build (build {n}), but not for its reason (a line with {:?}); log {}",
                m.name,
                m.needles,
                log.display()
            );
        };
        if ko.exists() {
            bail!("{} failed to build yet left {}", m.name, ko.display());
        }
        lines.push(line.to_string());
    }
    lines.dedup();
    let recorded = match given_back {
        0 => String::new(),
        n => format!(", {n} of {} from the record of the same inputs", m.builds),
    };
    Ok(format!(
        "{}: refused ({}){recorded}",
        m.name,
        lines.join(" | ")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use object::write::{Object as Writer, Symbol, SymbolSection};
    use object::{
        Architecture, BinaryFormat, Endianness, SectionKind, SymbolFlags, SymbolKind, SymbolScope,
    };

    fn entry(vendor: u32, device: u32) -> Vec<u8> {
        let mut e = vec![0u8; PCI_DEVICE_ID_SIZE];
        e[0..4].copy_from_slice(&vendor.to_le_bytes());
        e[4..8].copy_from_slice(&device.to_le_bytes());
        e[8..16].copy_from_slice(&[0xff; 8]); // PCI_ANY_ID subvendor/subdevice
        e
    }

    fn sentinel() -> Vec<u8> {
        vec![0; PCI_DEVICE_ID_SIZE]
    }

    fn ko(kind: SectionKind, table: &[u8]) -> Vec<u8> {
        let mut w = Writer::new(BinaryFormat::Elf, Architecture::X86_64, Endianness::Little);
        let section = w.add_section(Vec::new(), b".rodata".to_vec(), kind);
        let offset = w.append_section_data(section, table, 8);
        w.add_symbol(Symbol {
            name: b"__mod_pci__IDS_device_table".to_vec(),
            value: offset,
            size: table.len() as u64,
            kind: SymbolKind::Data,
            scope: SymbolScope::Compilation,
            weak: false,
            section: SymbolSection::Section(section),
            flags: SymbolFlags::None,
        });
        w.write().unwrap()
    }

    #[test]
    fn a_read_only_table_with_a_sentinel_passes() {
        let table = [entry(0x1de5, 0x0001), entry(0x1de5, 0x0002), sentinel()].concat();
        let found = pci_id_table(&ko(SectionKind::ReadOnlyData, &table)).unwrap();
        assert_eq!(found.ids, vec![(0x1de5, 1), (0x1de5, 2)]);
        assert_eq!(found.section, ".rodata");
    }

    #[test]
    fn a_writable_table_fails() {
        let table = [entry(0x1de5, 1), sentinel()].concat();
        let e = pci_id_table(&ko(SectionKind::Data, &table)).unwrap_err();
        assert!(e.to_string().contains("writable"), "{e}");
    }

    #[test]
    fn a_table_without_sentinel_fails() {
        let table = [entry(0x1de5, 1), entry(0x1de5, 2)].concat();
        let e = pci_id_table(&ko(SectionKind::ReadOnlyData, &table)).unwrap_err();
        assert!(e.to_string().contains("zero sentinel"), "{e}");
    }

    #[test]
    fn a_lone_sentinel_or_a_ragged_size_fails() {
        let e = pci_id_table(&ko(SectionKind::ReadOnlyData, &sentinel())).unwrap_err();
        assert!(e.to_string().contains("only its sentinel"), "{e}");
        let e = pci_id_table(&ko(SectionKind::ReadOnlyData, &[0u8; 44])).unwrap_err();
        assert!(e.to_string().contains("whole struct pci_device_id"), "{e}");
    }

    #[test]
    fn no_table_symbol_fails() {
        let w = Writer::new(BinaryFormat::Elf, Architecture::X86_64, Endianness::Little);
        let e = pci_id_table(&w.write().unwrap()).unwrap_err();
        assert!(e.to_string().contains("no __mod_pci__"), "{e}");
    }

    #[test]
    fn a_mistake_is_refused_only_for_its_own_reason() {
        let iomap = &MISTAKES[1];
        let log = "error[E0599]: no method named `iomap_region` found for struct `ARef<Device>`";
        assert!(refusal(iomap, log).is_some());
        // Failing for another reason (here a syntax error) is not a refusal.
        assert!(refusal(iomap, "error: expected `;`, found `let`").is_none());
        assert!(refusal(iomap, "error[E0599]: no method named `readl` found").is_none());
        let past_end = &MISTAKES[0];
        assert!(refusal(past_end, "ERROR: modpost: \"pci_iomap\" undefined!").is_none());
        assert!(refusal(past_end, "ERROR: modpost: \"rust_build_error\" undefined!").is_some());
    }
}
