//! The guest's side of the conversation: the lines `images/init` prints to
//! ask the host for something, parsed once into a [`GuestRequest`] that both
//! the host-action runner (`run`) and the judge read, and the marks it
//! leaves for the judge.

/// The guest finished its scenario (`images/init`, before poweroff).
pub const DONE: &str = "pcirig: done";

/// The guest stayed up after a binding ended (`settle`); written to
/// /dev/kmsg so that it carries a printk stamp.
pub const SETTLED: &str = "pcirig: settled";

/// The host's answer on the guest's console to a `device-sync` request the device carried out.
pub const DEVICE_DONE: &str = "pcirig-device-done";
/// The same, when it could not be carried out.
pub const DEVICE_FAILED: &str = "pcirig-device-failed";

/// The host's answer on the guest's console to a `mark`: the moment is written down.
pub const MARKED: &str = "pcirig-marked";

/// A moment the guest had the host write down (`HostAction::Mark`).
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Mark {
    pub name: String,
    /// The host's CLOCK_MONOTONIC in ns when it read the request.
    pub ns: u64,
}

/// What a guest's line asks of the host.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GuestRequest<'a> {
    /// `pcirig: device {json}`: a control request for the device server
    /// attached now; `pcirig: device-error {json}`: one it must refuse;
    /// `pcirig: device-sync {json}`: one whose outcome the guest waits for
    /// on its console (`DEVICE_DONE`, or `DEVICE_FAILED`).
    Device {
        json: &'a str,
        must_refuse: bool,
        answer: bool,
    },
    /// `pcirig: host ACTION`: something done to the machine.
    Host(HostAction<'a>),
}

/// What the guest asks the host to do to the machine.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HostAction<'a> {
    /// `pcirig: host unplug`: QMP device_del of our device.
    Unplug,
    /// `pcirig: host replug`: a fresh device server and device_add, once
    /// QEMU finished every unplug asked so far.
    Replug,
    /// `pcirig: host aer ID ERROR`: HMP pcie_aer_inject_error.
    Aer { id: &'a str, error: &'a str },
    /// `pcirig: host arm-oracle`: arm the MMIO oracle and answer on the
    /// guest's console once it is armed (`oracle::arm`).
    ArmOracle,
    /// `pcirig: host mark NAME`: the host writes down the moment (its CLOCK_MONOTONIC, the
    /// clock of the device's log and the MMIO oracle's) and answers `MARKED` on the console;
    /// the guest waits for it, so what it did before happened before the mark and what it does
    /// after, after (`foreign`'s binding windows).
    Mark { name: &'a str },
}

const HOST_ACTIONS: &str = "unplug, replug, aer ID ERROR, arm-oracle, mark NAME";

impl<'a> GuestRequest<'a> {
    /// The request on a console line (timestamp stripped), if it is one;
    /// an error for a `pcirig: host` line the host cannot understand.
    pub fn parse(text: &'a str) -> Option<Result<Self, String>> {
        for (prefix, must_refuse, answer) in [
            ("pcirig: device ", false, false),
            ("pcirig: device-error ", true, false),
            ("pcirig: device-sync ", false, true),
        ] {
            if let Some(json) = text.strip_prefix(prefix) {
                return Some(Ok(GuestRequest::Device {
                    json,
                    must_refuse,
                    answer,
                }));
            }
        }
        let action = text.strip_prefix("pcirig: host ")?.trim();
        let words: Vec<&str> = action.split_whitespace().collect();
        Some(match words[..] {
            ["unplug"] => Ok(GuestRequest::Host(HostAction::Unplug)),
            ["replug"] => Ok(GuestRequest::Host(HostAction::Replug)),
            ["arm-oracle"] => Ok(GuestRequest::Host(HostAction::ArmOracle)),
            ["aer", id, error] => Ok(GuestRequest::Host(HostAction::Aer { id, error })),
            ["mark", name] => Ok(GuestRequest::Host(HostAction::Mark { name })),
            _ => Err(format!(
                "unknown host action `{action}`; valid: {HOST_ACTIONS}"
            )),
        })
    }
}

/// Every request in `lines` (console lines, timestamps allowed).
pub fn in_console(lines: &[String]) -> impl Iterator<Item = Result<GuestRequest<'_>, String>> {
    lines
        .iter()
        .filter_map(|l| GuestRequest::parse(crate::console::strip_timestamp(l)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_are_parsed_once_into_their_kind() {
        let p = GuestRequest::parse;
        assert_eq!(
            p(r#"pcirig: device {"cmd":"ping"}"#),
            Some(Ok(GuestRequest::Device {
                json: r#"{"cmd":"ping"}"#,
                must_refuse: false,
                answer: false
            }))
        );
        assert_eq!(
            p(r#"pcirig: device-sync {"cmd":"fault"}"#),
            Some(Ok(GuestRequest::Device {
                json: r#"{"cmd":"fault"}"#,
                must_refuse: false,
                answer: true
            }))
        );
        assert_eq!(
            p("pcirig: device-error {}"),
            Some(Ok(GuestRequest::Device {
                json: "{}",
                must_refuse: true,
                answer: false
            }))
        );
        let host = |a| Some(Ok(GuestRequest::Host(a)));
        assert_eq!(p("pcirig: host unplug"), host(HostAction::Unplug));
        assert_eq!(p("pcirig: host replug "), host(HostAction::Replug));
        assert_eq!(p("pcirig: host arm-oracle"), host(HostAction::ArmOracle));
        assert_eq!(
            p("pcirig: host aer rp0 POISON_TLP"),
            host(HostAction::Aer {
                id: "rp0",
                error: "POISON_TLP"
            })
        );
        assert_eq!(
            p("pcirig: host mark ended"),
            host(HostAction::Mark { name: "ended" })
        );
        assert_eq!(p(DONE), None);
        assert_eq!(p("pcirig: hosting"), None);
    }

    #[test]
    fn an_unknown_host_action_is_an_error_naming_the_valid_ones() {
        for bad in [
            "pcirig: host unplugg",
            "pcirig: host aer rp0",
            "pcirig: host mark",
            "pcirig: host ",
        ] {
            let e = GuestRequest::parse(bad).unwrap().unwrap_err();
            assert!(
                e.contains("valid: unplug, replug, aer ID ERROR, arm-oracle"),
                "{e}"
            );
        }
    }

    #[test]
    fn requests_are_found_behind_printk_stamps() {
        let lines = ["[    1.0] pcirig: host unplug".to_string(), "x".into()];
        let found: Vec<_> = in_console(&lines).collect();
        assert_eq!(found, [Ok(GuestRequest::Host(HostAction::Unplug))]);
    }
}
