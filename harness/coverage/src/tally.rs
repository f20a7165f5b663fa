//! Coverage counted over a run: for each source file, each line and
//! function the measured images hold, and in how many boots it ran.

use crate::boot::Load;
use crate::image::Image;
use std::collections::{BTreeMap, BTreeSet};

/// One function of a file: its first line and how many boots ran it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Function {
    pub line: u32,
    pub boots: u32,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct File {
    /// Each line some image has code for, and how many boots ran it.
    pub lines: BTreeMap<u32, u32>,
    /// Each function, by its demangled name.
    pub functions: BTreeMap<String, Function>,
}

impl File {
    pub fn lines_hit(&self) -> usize {
        self.lines.values().filter(|n| **n > 0).count()
    }

    pub fn functions_hit(&self) -> usize {
        self.functions.values().filter(|f| f.boots > 0).count()
    }

    /// The functions no boot ran, by first line.
    pub fn unreached_functions(&self) -> Vec<(&str, u32)> {
        let mut v: Vec<(&str, u32)> = self
            .functions
            .iter()
            .filter(|(_, f)| f.boots == 0)
            .map(|(n, f)| (n.as_str(), f.line))
            .collect();
        v.sort_by_key(|(n, l)| (*l, *n));
        v
    }

    /// The lines no boot ran, as `a-b` runs of consecutive measured lines.
    pub fn unreached_lines(&self) -> Vec<String> {
        let mut runs: Vec<(u32, u32)> = Vec::new();
        let mut previous_measured: Option<u32> = None;
        for (&line, &n) in &self.lines {
            if n == 0 {
                match runs.last_mut() {
                    Some(run) if previous_measured == Some(run.1) => run.1 = line,
                    _ => runs.push((line, line)),
                }
            }
            previous_measured = Some(line);
        }
        runs.iter()
            .map(|&(a, b)| {
                if a == b {
                    a.to_string()
                } else {
                    format!("{a}-{b}")
                }
            })
            .collect()
    }
}

/// What ran, by source file (as `place` names them).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Tally {
    pub files: BTreeMap<String, File>,
    /// The boots counted.
    pub boots: u32,
    /// Which scenarios ran each line, by file: what a mutant of that line
    /// should be run against.
    pub reach: BTreeMap<String, BTreeMap<u32, BTreeSet<String>>>,
}

/// Names a source file as the report shows it, or `None` to leave it out
/// (the Rust standard library, generated bindings).
pub type Place<'a> = &'a dyn Fn(&str) -> Option<String>;

impl Tally {
    /// Adds every line and function of `images` as measured, run by no boot
    /// yet. A function whose first line the image has no row for is filed
    /// under `<image> (no line table)`.
    pub fn measure(&mut self, images: &[&Image], place: Place) {
        for image in images {
            let files: Vec<Option<String>> = image.files.iter().map(|f| place(f)).collect();
            for row in &image.rows {
                if let Some(file) = &files[row.file as usize] {
                    self.file(file).lines.entry(row.line).or_insert(0);
                }
            }
            for f in &image.functions {
                let Some((file, line)) = Self::home(image, &files, f.start) else {
                    continue;
                };
                self.file(&file)
                    .functions
                    .entry(f.name.clone())
                    .or_insert(Function { line, boots: 0 });
            }
        }
    }

    /// Where a function starting at `start` lives: its first row's file and
    /// line; a function of an image without line tables, under the image.
    fn home(image: &Image, files: &[Option<String>], start: u64) -> Option<(String, u32)> {
        if image.rows.is_empty() {
            return Some((format!("{} (no line table)", image.name), 0));
        }
        let row = image.rows_in(start, start + 1).next()?;
        Some((files[row.file as usize].clone()?, row.line))
    }

    fn file(&mut self, name: &str) -> &mut File {
        self.files.entry(name.to_string()).or_default()
    }

    /// Counts one boot: the guest ranges `blocks` that ran, the modules it
    /// loaded (`loads`), against the `images` it booted with (vmlinux's
    /// addresses are the guest's; a module's are placed by its loads).
    /// `scenario` names the boot in [`Tally::reach`].
    pub fn add(
        &mut self,
        images: &[&Image],
        place: Place,
        (blocks, loads): (&[(u64, u64)], &[Load]),
        scenario: &str,
    ) {
        let mut lines: BTreeSet<(String, u32)> = BTreeSet::new();
        let mut functions: BTreeSet<(String, String)> = BTreeSet::new();
        let mut placed: Vec<&Image> = Vec::new();
        for image in images {
            let placements: Vec<&[(String, u64)]> = if image.sections.is_empty() {
                vec![&[]]
            } else {
                loads
                    .iter()
                    .filter(|l| l.module == image.name)
                    .map(|l| l.sections.as_slice())
                    .collect()
            };
            let files: Vec<Option<String>> = image.files.iter().map(|f| place(f)).collect();
            if !placements.is_empty() {
                placed.push(image);
            }
            for loaded in placements {
                for &(start, end) in blocks {
                    let Some(at) = image.place(loaded, start) else {
                        continue;
                    };
                    let until = at + (end - start);
                    for row in image.rows_in(at, until) {
                        if let Some(file) = &files[row.file as usize] {
                            lines.insert((file.clone(), row.line));
                        }
                    }
                    for f in image.functions_in(at, until) {
                        if let Some((file, _)) = Self::home(image, &files, f.start) {
                            functions.insert((file, f.name.clone()));
                        }
                    }
                }
            }
        }
        self.inlined(&placed, place, &lines, &mut functions);
        for (file, line) in lines {
            *self.file(&file).lines.entry(line).or_insert(0) += 1;
            self.reach
                .entry(file)
                .or_default()
                .entry(line)
                .or_default()
                .insert(scenario.to_string());
        }
        for (file, name) in functions {
            self.file(&file).functions.entry(name).or_default().boots += 1;
        }
        self.boots += 1;
    }

    /// Adds to `functions` each function of the `placed` images whose own
    /// code did not run but whose lines did: the compiler inlined it into
    /// its callers (its symbol's copy is for others). A function's lines are
    /// taken from its first to the next function's first in its file.
    fn inlined(
        &self,
        placed: &[&Image],
        place: Place,
        lines: &BTreeSet<(String, u32)>,
        functions: &mut BTreeSet<(String, String)>,
    ) {
        for image in placed {
            let files: Vec<Option<String>> = image.files.iter().map(|f| place(f)).collect();
            for f in &image.functions {
                let Some((file, first)) = Self::home(image, &files, f.start) else {
                    continue;
                };
                if first == 0 || functions.contains(&(file.clone(), f.name.clone())) {
                    continue;
                }
                let next = self.files.get(&file).and_then(|t| {
                    t.functions
                        .values()
                        .map(|v| v.line)
                        .filter(|l| *l > first)
                        .min()
                });
                let until = next.unwrap_or(u32::MAX);
                let ran = lines
                    .range((file.clone(), first)..(file.clone(), until))
                    .next()
                    .is_some();
                if ran {
                    functions.insert((file, f.name.clone()));
                }
            }
        }
    }

    /// Adds another tally's counts (another arch's, another kernel line's).
    pub fn merge(&mut self, other: &Tally) {
        for (name, theirs) in &other.files {
            let ours = self.file(name);
            for (line, n) in &theirs.lines {
                *ours.lines.entry(*line).or_insert(0) += n;
            }
            for (f, t) in &theirs.functions {
                let o = ours.functions.entry(f.clone()).or_insert(Function {
                    line: t.line,
                    boots: 0,
                });
                o.boots += t.boots;
            }
        }
        self.boots += other.boots;
        for (file, lines) in &other.reach {
            let ours = self.reach.entry(file.clone()).or_default();
            for (line, names) in lines {
                ours.entry(*line).or_default().extend(names.iter().cloned());
            }
        }
    }

    /// The scenarios that ran any of `lines` of `file`.
    pub fn reaching(&self, file: &str, lines: std::ops::RangeInclusive<u32>) -> BTreeSet<String> {
        self.reach
            .get(file)
            .map(|by_line| {
                by_line
                    .range(lines)
                    .flat_map(|(_, s)| s.iter().cloned())
                    .collect()
            })
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::image::{Function as Sym, Row, Section, SECTION_STRIDE};

    /// A module `m` with two functions over three lines of `m.rs`, and a
    /// file the report leaves out.
    fn module() -> Image {
        let s = SECTION_STRIDE;
        Image {
            name: "m".into(),
            sections: vec![Section {
                name: ".text".into(),
                start: s,
                size: 0x30,
            }],
            functions: vec![
                Sym {
                    start: s,
                    end: s + 0x20,
                    name: "m::a".into(),
                },
                Sym {
                    start: s + 0x20,
                    end: s + 0x30,
                    name: "m::b".into(),
                },
            ],
            rows: vec![
                Row {
                    start: s,
                    end: s + 0x10,
                    file: 0,
                    line: 10,
                },
                Row {
                    start: s + 0x10,
                    end: s + 0x20,
                    file: 1,
                    line: 99,
                },
                Row {
                    start: s + 0x20,
                    end: s + 0x30,
                    file: 0,
                    line: 20,
                },
            ],
            files: vec!["/build/m.rs".into(), "/rustlib/core.rs".into()],
        }
    }

    fn place(f: &str) -> Option<String> {
        f.strip_prefix("/build/").map(str::to_string)
    }

    #[test]
    fn a_boot_counts_what_ran_where_its_module_was_loaded() {
        let m = module();
        let images = [&m];
        let mut t = Tally::default();
        t.measure(&images, &place);
        assert_eq!(t.files.len(), 1, "core.rs is left out");
        let loads = vec![Load {
            module: "m".into(),
            sections: vec![(".text".into(), 0x1000)],
        }];
        // The first 0x10 bytes ran, and a block of some other module.
        t.add(
            &images,
            &place,
            (&[(0x1000, 0x1008), (0x9000, 0x9010)], &loads),
            "probe",
        );
        assert_eq!(
            t.reaching("m.rs", 1..=15).into_iter().collect::<Vec<_>>(),
            vec!["probe"]
        );
        assert!(t.reaching("m.rs", 20..=20).is_empty());
        let f = &t.files["m.rs"];
        assert_eq!(f.lines, BTreeMap::from([(10, 1), (20, 0)]));
        assert_eq!(f.functions["m::a"].boots, 1);
        assert_eq!(f.unreached_functions(), vec![("m::b", 20)]);
        assert_eq!(f.unreached_lines(), vec!["20"]);
        // Not loaded in this boot: nothing of it ran.
        t.add(&images, &place, (&[(0x1000, 0x1030)], &[]), "unbind");
        assert_eq!(t.files["m.rs"].lines[&10], 1);
        assert_eq!(t.boots, 2);
        let mut all = t.clone();
        all.merge(&t);
        assert_eq!(all.files["m.rs"].lines[&10], 2);
        assert_eq!(all.boots, 4);
    }

    #[test]
    fn a_function_inlined_into_its_caller_counts_by_its_lines() {
        // m::b's own copy (lines 20..) never runs, but code inlined from line 21 does.
        let mut m = module();
        let s = SECTION_STRIDE;
        m.rows.push(Row {
            start: s + 0x30,
            end: s + 0x38,
            file: 0,
            line: 21,
        });
        m.sections[0].size = 0x38;
        m.functions[0].end = s + 0x20;
        let images = [&m];
        let mut t = Tally::default();
        t.measure(&images, &place);
        let loads = vec![Load {
            module: "m".into(),
            sections: vec![(".text".into(), 0x1000)],
        }];
        t.add(&images, &place, (&[(0x1030, 0x1038)], &loads), "pm");
        assert_eq!(t.files["m.rs"].functions["m::b"].boots, 1);
        assert_eq!(t.files["m.rs"].functions["m::a"].boots, 0);
    }

    #[test]
    fn unreached_lines_are_runs_of_measured_lines() {
        let f = File {
            lines: BTreeMap::from([(1, 0), (2, 0), (5, 0), (6, 1), (7, 0), (9, 0)]),
            ..File::default()
        };
        // 1 and 2 are consecutive measured lines, so are 7 and 9 (8 has no code); 5 ends at 6.
        assert_eq!(f.unreached_lines(), vec!["1-5", "7-9"]);
    }
}
