//! The committed bar: for each file under watch, how many of its lines the
//! default run reaches and which functions. A run below it fails, naming
//! what it no longer reaches.

use crate::tally::Tally;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileBar {
    /// Lines reached, at least.
    pub lines: usize,
    /// Functions reached, each of them.
    pub functions: Vec<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Bar {
    pub files: BTreeMap<String, FileBar>,
}

impl Bar {
    pub fn parse(text: &str) -> anyhow::Result<Bar> {
        Ok(toml::from_str(text)?)
    }

    /// The bar `tally` sets for the files `watched` accepts.
    pub fn of(tally: &Tally, watched: &dyn Fn(&str) -> bool) -> Bar {
        let files = tally
            .files
            .iter()
            .filter(|(name, _)| watched(name))
            .map(|(name, f)| {
                let functions = f
                    .functions
                    .iter()
                    .filter(|(_, v)| v.boots > 0)
                    .map(|(n, _)| n.clone())
                    .collect();
                (
                    name.clone(),
                    FileBar {
                        lines: f.lines_hit(),
                        functions,
                    },
                )
            })
            .collect();
        Bar { files }
    }

    /// What both bars hold: the fewer lines, the functions both list. A bar written from
    /// several runs is what every one of them reached, so that no luck of one run's
    /// scheduling sets it.
    pub fn meet(&self, other: &Bar) -> Bar {
        let files = self
            .files
            .iter()
            .filter_map(|(name, a)| {
                let b = other.files.get(name)?;
                let functions = a
                    .functions
                    .iter()
                    .filter(|f| b.functions.contains(f))
                    .cloned()
                    .collect();
                Some((
                    name.clone(),
                    FileBar {
                        lines: a.lines.min(b.lines),
                        functions,
                    },
                ))
            })
            .collect();
        Bar { files }
    }

    pub fn to_toml(&self) -> String {
        toml::to_string_pretty(self).unwrap_or_default()
    }

    /// What `tally` no longer reaches, one line per file below the bar.
    pub fn shortfalls(&self, tally: &Tally) -> Vec<String> {
        let mut out = Vec::new();
        for (name, bar) in &self.files {
            let Some(file) = tally.files.get(name) else {
                out.push(format!(
                    "{name}: no code of it was measured (its module not built or loaded?)"
                ));
                continue;
            };
            let lost: Vec<&str> = bar
                .functions
                .iter()
                .filter(|f| file.functions.get(*f).is_none_or(|v| v.boots == 0))
                .map(String::as_str)
                .collect();
            let hit = file.lines_hit();
            if hit >= bar.lines && lost.is_empty() {
                continue;
            }
            let mut why = format!("{name}: {hit} lines reached, the bar is {}", bar.lines);
            if !lost.is_empty() {
                why.push_str(&format!(
                    "; functions no longer reached: {}",
                    lost.join(", ")
                ));
            }
            if hit < bar.lines {
                why.push_str(&format!(
                    "; lines not reached: {}",
                    file.unreached_lines().join(" ")
                ));
            }
            out.push(why);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tally::{File, Function};

    fn tally(hit: &[(u32, u32)], f_boots: u32) -> Tally {
        let mut t = Tally::default();
        t.files.insert(
            "d.rs".into(),
            File {
                lines: hit.iter().copied().collect(),
                functions: BTreeMap::from([
                    (
                        "d::probe".into(),
                        Function {
                            line: 1,
                            boots: f_boots,
                        },
                    ),
                    ("d::never".into(), Function { line: 9, boots: 0 }),
                ]),
            },
        );
        t
    }

    #[test]
    fn a_run_at_the_bar_passes_and_one_below_names_what_it_lost() {
        let full = tally(&[(1, 3), (2, 1), (9, 0)], 3);
        let bar = Bar::of(&full, &|n| n == "d.rs");
        assert_eq!(
            bar.files["d.rs"],
            FileBar {
                lines: 2,
                functions: vec!["d::probe".into()]
            }
        );
        assert_eq!(Bar::parse(&bar.to_toml()).unwrap(), bar);
        assert!(bar.shortfalls(&full).is_empty());
        let less = tally(&[(1, 0), (2, 1), (9, 0)], 0);
        let why = bar.shortfalls(&less);
        assert_eq!(why.len(), 1);
        assert!(
            why[0].contains("1 lines reached, the bar is 2"),
            "{}",
            why[0]
        );
        assert!(
            why[0].contains("functions no longer reached: d::probe"),
            "{}",
            why[0]
        );
        assert!(why[0].contains("lines not reached: 1 9"), "{}", why[0]);
        assert!(bar.shortfalls(&Tally::default())[0].contains("no code of it was measured"));
        let met = bar.meet(&Bar::of(&less, &|n| n == "d.rs"));
        assert_eq!(
            met.files["d.rs"],
            FileBar {
                lines: 1,
                functions: vec![]
            }
        );
    }
}
