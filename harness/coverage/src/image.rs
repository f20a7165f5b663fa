//! One ELF image's code, as coverage needs it: its executable sections, its
//! functions (the symbol table) and its line table (DWARF, where it was
//! built with one), all in one address space of the image's own.
//!
//! A module (`.ko`) is a relocatable object: every section starts at 0 and
//! its debug sections hold relocations against them. Each executable
//! section gets its own stretch of the image's space (its index times
//! [`SECTION_STRIDE`]), and the debug sections are read with their
//! relocations applied against those stretches, so an address in the line
//! table says which section it is in. The guest prints where each section
//! was loaded; [`Image::place`] turns a guest address into the image's.
//! vmlinux is linked: its addresses are the guest's already.

use anyhow::{bail, Context, Result};
use gimli::{EndianSlice, Reader as _, RunTimeEndian};
use object::{Object, ObjectSection, ObjectSymbol, RelocationTarget, SectionKind, SymbolKind};
use std::borrow::Cow;
use std::collections::HashMap;

/// How far apart the executable sections of a module lie in its image's
/// address space: far more than any section's size.
pub const SECTION_STRIDE: u64 = 1 << 40;

/// An executable section of a module.
#[derive(Debug, Clone)]
pub struct Section {
    pub name: String,
    /// Where it starts in the image's address space.
    pub start: u64,
    pub size: u64,
}

/// A function of the image (a text symbol with a size).
#[derive(Debug, Clone)]
pub struct Function {
    pub start: u64,
    pub end: u64,
    /// Demangled, without Rust's hash.
    pub name: String,
}

/// A stretch of code the line table attributes to one source line.
#[derive(Debug, Clone, Copy)]
pub struct Row {
    pub start: u64,
    pub end: u64,
    /// Index into [`Image::files`].
    pub file: u32,
    pub line: u32,
}

#[derive(Debug, Default)]
pub struct Image {
    /// The module's name as the guest prints it, or `vmlinux`.
    pub name: String,
    /// A module's executable sections; empty for a linked image.
    pub sections: Vec<Section>,
    /// Sorted by start.
    pub functions: Vec<Function>,
    /// Sorted by start; empty without line tables.
    pub rows: Vec<Row>,
    /// The source files the rows name, as the compiler wrote them.
    pub files: Vec<String>,
}

/// A relocatable image's relocations of one debug section: the value each
/// relocated place must hold, by its offset.
#[derive(Debug, Default)]
struct Relocations(HashMap<usize, u64>);

impl gimli::Relocate for &Relocations {
    fn relocate_address(&self, offset: usize, value: u64) -> gimli::Result<u64> {
        Ok(self.0.get(&offset).copied().unwrap_or(value))
    }

    fn relocate_offset(&self, offset: usize, value: usize) -> gimli::Result<usize> {
        Ok(self
            .0
            .get(&offset)
            .map_or(value, |v| usize::try_from(*v).unwrap_or(value)))
    }
}

type Reader<'a> = gimli::RelocateReader<EndianSlice<'a, RunTimeEndian>, &'a Relocations>;

impl Image {
    /// Reads `bytes` (a `.ko` or vmlinux) as the image `name`, keeping the
    /// functions `keep` accepts (by demangled name; a linked image's other
    /// code is not measured) and every line-table row.
    pub fn read(name: &str, bytes: &[u8], keep: &dyn Fn(&str) -> bool) -> Result<Image> {
        let file =
            object::File::parse(bytes).with_context(|| format!("{name}: not an ELF file"))?;
        let relocatable = file.kind() == object::ObjectKind::Relocatable;
        let mut image = Image {
            name: name.to_string(),
            ..Image::default()
        };
        // Where each executable section of a module starts in the image.
        let mut bias: HashMap<object::SectionIndex, u64> = HashMap::new();
        if relocatable {
            for s in file.sections() {
                if s.kind() == SectionKind::Text && s.size() > 0 {
                    let start = s.index().0 as u64 * SECTION_STRIDE;
                    bias.insert(s.index(), start);
                    image.sections.push(Section {
                        name: s.name().unwrap_or_default().to_string(),
                        start,
                        size: s.size(),
                    });
                }
            }
        }
        for sym in file.symbols() {
            if sym.kind() != SymbolKind::Text || sym.size() == 0 {
                continue;
            }
            let start = match (relocatable, sym.section_index()) {
                (false, _) => sym.address(),
                (true, Some(i)) => match bias.get(&i) {
                    Some(b) => b + sym.address(),
                    None => continue,
                },
                (true, None) => continue,
            };
            let raw = sym.name().unwrap_or_default();
            let name = demangle(raw);
            if keep(&name) {
                image.functions.push(Function {
                    start,
                    end: start + sym.size(),
                    name,
                });
            }
        }
        image.functions.sort_by_key(|f| (f.start, f.end));
        image.functions.dedup_by_key(|f| f.start);
        image
            .read_lines(&file, &bias)
            .with_context(|| format!("{name}: its line table"))?;
        Ok(image)
    }

    fn read_lines(
        &mut self,
        file: &object::File,
        bias: &HashMap<object::SectionIndex, u64>,
    ) -> Result<()> {
        if file.section_by_name(".debug_line").is_none() {
            return Ok(());
        }
        let endian = if file.is_little_endian() {
            RunTimeEndian::Little
        } else {
            RunTimeEndian::Big
        };
        let mut data: HashMap<gimli::SectionId, (Cow<[u8]>, Relocations)> = HashMap::new();
        for id in [
            gimli::SectionId::DebugAbbrev,
            gimli::SectionId::DebugInfo,
            gimli::SectionId::DebugLine,
            gimli::SectionId::DebugLineStr,
            gimli::SectionId::DebugStr,
            gimli::SectionId::DebugStrOffsets,
            gimli::SectionId::DebugAddr,
            gimli::SectionId::DebugRanges,
            gimli::SectionId::DebugRngLists,
        ] {
            let Some(section) = file.section_by_name(id.name()) else {
                continue;
            };
            let bytes = section.uncompressed_data()?;
            let relocations = relocations(file, &section, bias)?;
            data.insert(id, (bytes, relocations));
        }
        let empty = (Cow::Borrowed(&[][..]), Relocations::default());
        let dwarf = gimli::Dwarf::load(|id| -> gimli::Result<Reader> {
            let (bytes, relocs) = data.get(&id).unwrap_or(&empty);
            Ok(gimli::RelocateReader::new(
                EndianSlice::new(bytes, endian),
                relocs,
            ))
        })?;
        let mut files: HashMap<String, u32> = HashMap::new();
        let mut units = dwarf.units();
        while let Some(header) = units.next()? {
            let unit = dwarf.unit(header)?;
            let Some(program) = unit.line_program.clone() else {
                continue;
            };
            let mut rows = program.rows();
            let mut last: Option<(u64, u64, u32)> = None; // address, file index, line
            let mut names: HashMap<u64, u32> = HashMap::new();
            while let Some((header, row)) = rows.next_row()? {
                let address = row.address();
                if let Some((from, file_index, line)) = last {
                    if address > from && line != 0 {
                        let file = match names.get(&file_index) {
                            Some(f) => *f,
                            None => {
                                let path = path_of(&dwarf, &unit, header, file_index)?;
                                let next = files.len() as u32;
                                let f = *files.entry(path.clone()).or_insert_with(|| {
                                    self.files.push(path);
                                    next
                                });
                                names.insert(file_index, f);
                                f
                            }
                        };
                        self.rows.push(Row {
                            start: from,
                            end: address,
                            file,
                            line,
                        });
                    }
                }
                last = (!row.end_sequence()).then(|| {
                    (
                        address,
                        row.file_index(),
                        row.line().map_or(0, |l| l.get() as u32),
                    )
                });
            }
        }
        self.rows.sort_by_key(|r| (r.start, r.end));
        Ok(())
    }

    /// The image address of guest address `addr`, given where the guest
    /// loaded this module's sections (`loaded`: section name, base); a
    /// linked image's addresses are the guest's.
    pub fn place(&self, loaded: &[(String, u64)], addr: u64) -> Option<u64> {
        if self.sections.is_empty() {
            return Some(addr);
        }
        loaded.iter().find_map(|(name, base)| {
            let s = self.sections.iter().find(|s| &s.name == name)?;
            (addr >= *base && addr - base < s.size).then(|| s.start + (addr - base))
        })
    }

    /// The rows overlapping `[start, end)` of the image's space.
    pub fn rows_in(&self, start: u64, end: u64) -> impl Iterator<Item = &Row> {
        let first = self.rows.partition_point(|r| r.end <= start);
        self.rows[first..]
            .iter()
            .take_while(move |r| r.start < end)
            .filter(move |r| r.end > start)
    }

    /// The functions overlapping `[start, end)` of the image's space.
    pub fn functions_in(&self, start: u64, end: u64) -> impl Iterator<Item = &Function> {
        let first = self.functions.partition_point(|f| f.end <= start);
        self.functions[first..]
            .iter()
            .take_while(move |f| f.start < end)
            .filter(move |f| f.end > start)
    }
}

/// A symbol's name demangled (Rust's without its hash); a C name as it is.
pub fn demangle(raw: &str) -> String {
    match rustc_demangle::try_demangle(raw) {
        Ok(d) => format!("{d:#}"),
        Err(_) => raw.to_string(),
    }
}

/// The relocations of a module's debug section, resolved against the image's
/// section stretches: the value each relocated place must read as.
fn relocations(
    file: &object::File,
    section: &object::Section,
    bias: &HashMap<object::SectionIndex, u64>,
) -> Result<Relocations> {
    let mut map = HashMap::new();
    for (offset, r) in section.relocations() {
        if r.kind() != object::RelocationKind::Absolute {
            // Only absolute addresses and offsets are read relocated; a
            // difference relocation (RISC-V's ADD/SUB pairs) is not.
            continue;
        }
        if r.has_implicit_addend() {
            bail!("REL relocations (implicit addends) are not read; this arch's modules use RELA");
        }
        let base = match r.target() {
            RelocationTarget::Symbol(i) => {
                let sym = file.symbol_by_index(i)?;
                let stretch = sym.section_index().and_then(|s| bias.get(&s)).copied();
                stretch.unwrap_or(0) + sym.address()
            }
            RelocationTarget::Section(s) => bias.get(&s).copied().unwrap_or(0),
            _ => 0,
        };
        map.insert(offset as usize, base.wrapping_add_signed(r.addend()));
    }
    Ok(Relocations(map))
}

/// The path of a line program's file, joined as the compiler meant it: the
/// unit's directory, the file's directory, its name.
fn path_of(
    dwarf: &gimli::Dwarf<Reader>,
    unit: &gimli::Unit<Reader>,
    header: &gimli::LineProgramHeader<Reader>,
    index: u64,
) -> Result<String> {
    let Some(entry) = header.file(index) else {
        return Ok(format!("<file {index}>"));
    };
    let text = |attr| -> Result<String> {
        Ok(dwarf
            .attr_string(unit, attr)?
            .to_string_lossy()?
            .into_owned())
    };
    let name = text(entry.path_name())?;
    let mut path = std::path::PathBuf::new();
    if let Some(dir) = &unit.comp_dir {
        path.push(dir.to_string_lossy()?.as_ref());
    }
    if let Some(dir) = entry.directory(header) {
        path.push(text(dir)?);
    }
    path.push(name);
    Ok(normalize(&path.to_string_lossy()))
}

/// `a/b/../c` as `a/c`, `a/./b` as `a/b`.
pub fn normalize(path: &str) -> String {
    let mut parts: Vec<&str> = Vec::new();
    for part in path.split('/') {
        match part {
            "." | "" if !parts.is_empty() => {}
            ".." if parts.last().is_some_and(|p| !p.is_empty() && *p != "..") => {
                parts.pop();
            }
            p => parts.push(p),
        }
    }
    parts.join("/")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_are_normalized() {
        assert_eq!(normalize("/a/b/../c/./d.rs"), "/a/c/d.rs");
        assert_eq!(normalize("a//b"), "a/b");
    }

    #[test]
    fn rust_names_lose_their_hash() {
        assert_eq!(
            demangle("_ZN4core3ptr13drop_in_place17h0123456789abcdefE"),
            "core::ptr::drop_in_place"
        );
        assert_eq!(demangle("pci_rig_probe"), "pci_rig_probe");
    }

    #[test]
    fn a_module_address_is_placed_by_its_section() {
        let image = Image {
            sections: vec![
                Section {
                    name: ".text".into(),
                    start: SECTION_STRIDE,
                    size: 0x100,
                },
                Section {
                    name: ".init.text".into(),
                    start: 2 * SECTION_STRIDE,
                    size: 0x10,
                },
            ],
            ..Image::default()
        };
        let loaded = vec![
            (".text".to_string(), 0xa000),
            (".init.text".to_string(), 0xb000),
        ];
        assert_eq!(image.place(&loaded, 0xa010), Some(SECTION_STRIDE + 0x10));
        assert_eq!(image.place(&loaded, 0xb00f), Some(2 * SECTION_STRIDE + 0xf));
        assert_eq!(image.place(&loaded, 0xa100), None);
        assert_eq!(Image::default().place(&[], 0x42), Some(0x42));
    }

    #[test]
    fn rows_and_functions_overlapping_a_range_are_found() {
        let row = |start, end, line| Row {
            start,
            end,
            file: 0,
            line,
        };
        let image = Image {
            rows: vec![row(0, 4, 1), row(4, 8, 2), row(8, 12, 3)],
            functions: vec![
                Function {
                    start: 0,
                    end: 8,
                    name: "a".into(),
                },
                Function {
                    start: 8,
                    end: 12,
                    name: "b".into(),
                },
            ],
            ..Image::default()
        };
        let lines: Vec<u32> = image.rows_in(5, 9).map(|r| r.line).collect();
        assert_eq!(lines, vec![2, 3]);
        let names: Vec<&str> = image.functions_in(0, 1).map(|f| f.name.as_str()).collect();
        assert_eq!(names, vec!["a"]);
        assert_eq!(image.rows_in(12, 20).count(), 0);
    }
}
