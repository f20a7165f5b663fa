//! The judge rules that `cargo xtask mutate --weaken` can switch off, one process at a time:
//! the score with a rule off against the score with it on is what that rule alone catches.

/// Judge rules that `cargo xtask mutate --weaken` can switch off, to measure what each one
/// alone catches (the score with it off against the score with it on).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rule {
    /// `acks::acks_are_status_read`.
    AckValues,
    /// `acks::interrupts_off_at_end`.
    InterruptsOff,
    /// `config::quiesced` for the bindings whose probe failed.
    FailedProbeQuiesced,
    /// `dma_core::agrees`.
    DmaCore,
    /// `warnings::unexpected`.
    DeviceWarnings,
}

impl Rule {
    pub const ALL: [(&'static str, Rule); 5] = [
        ("ack-values", Rule::AckValues),
        ("interrupts-off", Rule::InterruptsOff),
        ("failed-probe-quiesced", Rule::FailedProbeQuiesced),
        ("dma-core", Rule::DmaCore),
        ("device-warnings", Rule::DeviceWarnings),
    ];

    pub fn parse(name: &str) -> Result<Rule, String> {
        Rule::ALL
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, r)| *r)
            .ok_or_else(|| {
                let names: Vec<&str> = Rule::ALL.iter().map(|(n, _)| *n).collect();
                format!(
                    "{name:?} is no judge rule that can be switched off; one of: {}",
                    names.join(", ")
                )
            })
    }
}

static WEAKENED: std::sync::OnceLock<Vec<Rule>> = std::sync::OnceLock::new();

/// Switches `rules` off for the rest of this process: a weakened judge, whose verdicts are no
/// longer the rig's (for `cargo xtask mutate --weaken` alone). Once per process.
pub fn weaken(rules: Vec<Rule>) -> Result<(), String> {
    WEAKENED
        .set(rules)
        .map_err(|_| "the judge was weakened already".to_string())
}

/// Whether `rule` is on: always, unless `weaken` switched it off.
pub(crate) fn rule_on(rule: Rule) -> bool {
    !WEAKENED.get().is_some_and(|w| w.contains(&rule))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rules_parse_by_name_and_a_wrong_name_lists_them() {
        assert_eq!(Rule::parse("dma-core"), Ok(Rule::DmaCore));
        let e = Rule::parse("acks").unwrap_err();
        assert!(
            e.contains("one of: ack-values, interrupts-off, failed-probe-quiesced, dma-core, device-warnings"),
            "{e}"
        );
        // No test weakens the judge: every rule is on in this process.
        assert!(Rule::ALL.iter().all(|(_, r)| rule_on(*r)));
    }
}
