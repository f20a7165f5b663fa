//! What judging a run comes to, shared by the judge (which reaches it),
//! the scenario catalog (which names the causes its self-test guests must
//! be failed for) and the run layer (which reports it): none of them
//! imports another for these.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Verdict {
    Pass,
    Fail,
    Skip,
}

/// Why a boot failed, for callers that check the harness itself.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cause {
    Splat(Splat),
    Timeout,
    Checks,
    Unfinished,
    /// The device server died, or its log contradicts the guest.
    Device,
    /// The host could not do what the guest asked (a host action failed, the device refused
    /// a request), or QEMU itself exited with a failure.
    Host,
}

/// Durations a run measured, in milliseconds, by name (`remove_ms`, …).
pub type Timings = BTreeMap<&'static str, f64>;

/// A line that by itself fails any scenario.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Splat {
    Oops,
    Bug,
    Warning,
    Panic,
    Sanitizer,
    Lockdep,
    RcuStall,
    /// A kmemleak report (the debug flavour scans at the end of each boot).
    Leak,
}

impl Splat {
    pub fn name(self) -> &'static str {
        match self {
            Splat::Oops => "Oops",
            Splat::Bug => "BUG",
            Splat::Warning => "WARNING",
            Splat::Panic => "panic",
            Splat::Sanitizer => "sanitizer report",
            Splat::Lockdep => "lockdep splat",
            Splat::RcuStall => "RCU stall",
            Splat::Leak => "kmemleak report",
        }
    }
}
