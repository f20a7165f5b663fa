//! Kconfig fragments: parsing them and checking that a merged `.config`
//! really has every option they ask for. Kconfig drops options whose
//! dependencies are unmet without a word, so this check is what turns a
//! silently missing feature into a build error.

use std::collections::BTreeMap;

/// One requested option: `CONFIG_FOO=y` or `# CONFIG_FOO is not set`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Wanted {
    pub name: String,
    /// `None` means "must not be set".
    pub value: Option<String>,
    /// Where it was asked for, e.g. `base.config:12`.
    pub origin: String,
}

/// Reads the options of a fragment (or of a whole `.config`).
pub fn parse(text: &str, file: &str) -> Vec<Wanted> {
    text.lines()
        .enumerate()
        .filter_map(|(i, line)| {
            let line = line.trim();
            let (name, value) = if let Some(rest) = line.strip_prefix("# ") {
                (rest.strip_suffix(" is not set")?, None)
            } else if line.starts_with('#') || line.is_empty() {
                return None;
            } else {
                let (n, v) = line.split_once('=')?;
                (n, Some(v.to_string()))
            };
            // `=n` and "is not set" mean the same to Kconfig.
            let value = value.filter(|v| v != "n");
            name.starts_with("CONFIG_").then(|| Wanted {
                name: name.to_string(),
                value,
                origin: format!("{file}:{}", i + 1),
            })
        })
        .collect()
}

/// The options of a merged `.config`, by name. Unset ones are absent.
pub fn values(dot_config: &str) -> BTreeMap<String, String> {
    parse(dot_config, ".config")
        .into_iter()
        .filter_map(|w| Some((w.name, w.value?)))
        .collect()
}

/// Every wanted option the merged config does not honour, as readable lines.
pub fn unmet(wanted: &[Wanted], dot_config: &str) -> Vec<String> {
    let have = values(dot_config);
    // A later fragment overrides an earlier one: only the last word counts.
    let mut last: BTreeMap<&str, &Wanted> = BTreeMap::new();
    for w in wanted {
        last.insert(&w.name, w);
    }
    last.values()
        .filter(|w| have.get(&w.name) != w.value.as_ref())
        .map(|w| {
            let show = |v: Option<&String>| v.map_or("not set".to_string(), |v| format!("={v}"));
            format!(
                "{} wanted {} but got {} (asked in {})",
                w.name,
                show(w.value.as_ref()),
                show(have.get(&w.name)),
                w.origin
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const FRAGMENT: &str =
        "# comment\nCONFIG_RUST=y\n\n# CONFIG_BAR is not set\nCONFIG_LOG=\"x\"\nNOT_CONFIG=y\n";

    #[test]
    fn parses_set_unset_and_strings_with_origins() {
        let w = parse(FRAGMENT, "base.config");
        assert_eq!(w.len(), 3);
        assert_eq!(w[0].name, "CONFIG_RUST");
        assert_eq!(w[0].value.as_deref(), Some("y"));
        assert_eq!(w[0].origin, "base.config:2");
        assert_eq!(w[1].value, None);
        assert_eq!(w[2].value.as_deref(), Some("\"x\""));
    }

    #[test]
    fn a_fully_honoured_fragment_has_nothing_unmet() {
        let cfg = "CONFIG_RUST=y\n# CONFIG_BAR is not set\nCONFIG_LOG=\"x\"\n";
        assert!(unmet(&parse(FRAGMENT, "f"), cfg).is_empty());
    }

    #[test]
    fn dropped_and_wrong_options_are_listed() {
        let cfg = "CONFIG_BAR=y\nCONFIG_LOG=\"y\"\n";
        let bad = unmet(&parse(FRAGMENT, "base.config"), cfg);
        assert_eq!(bad.len(), 3, "{bad:?}");
        assert!(bad
            .iter()
            .any(|l| l.starts_with("CONFIG_RUST wanted =y but got not set")));
        assert!(bad
            .iter()
            .any(|l| l.starts_with("CONFIG_BAR wanted not set but got =y")));
        assert!(bad.iter().any(|l| l.contains("base.config:5")));
    }

    #[test]
    fn equals_n_means_not_set() {
        let w = parse("CONFIG_KUNIT_DEFAULT_ENABLED=n\n", "base.config");
        assert!(unmet(&w, "# CONFIG_KUNIT_DEFAULT_ENABLED is not set\n").is_empty());
        assert!(unmet(&w, "").is_empty());
        assert_eq!(unmet(&w, "CONFIG_KUNIT_DEFAULT_ENABLED=y\n").len(), 1);
    }

    #[test]
    fn a_later_fragment_overrides_an_earlier_one() {
        let mut w = parse("CONFIG_A=y\n", "base");
        w.extend(parse("CONFIG_A=m\n", "debug"));
        assert!(unmet(&w, "CONFIG_A=m\n").is_empty());
        assert_eq!(unmet(&w, "CONFIG_A=y\n").len(), 1);
    }
}
