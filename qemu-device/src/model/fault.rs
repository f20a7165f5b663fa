//! One fault, armed from the host, that strikes at the N-th BAR access counted from its arming
//! (REGISTERS.md, "Faults"): the removal-point sweep's lever. The model acts on `vanish`,
//! `error` and `hang` itself; `die` is the transport's to carry out, `unplug` and `aer` the host's, who
//! learns of the strike from the control socket.

use serde::{Deserialize, Serialize};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FaultKind {
    /// From the struck access on, the device answers as a surprise-removed one: reads return
    /// all-ones, writes drop, no interrupts (the `all_ones` knob, set by the strike).
    Vanish,
    /// The struck access alone goes wrong: a read returns its value with every bit inverted, a
    /// write is dropped.
    Error,
    /// The server exits at the struck access, before answering it.
    Die,
    /// The host unplugs the device (QMP `device_del`) once it sees the strike.
    Unplug,
    /// The host injects an uncorrectable error at the root port once it sees the strike.
    Aer,
    /// From the struck access on, the function hangs until a reset (DEVICE_RESET: a
    /// function-level or bus reset) or `clear_fault`: BAR reads return all-ones, BAR writes
    /// drop, no interrupts, no DMA; config space still answers, so a driver can tell a hung
    /// function from a removed one.
    Hang,
}

impl FaultKind {
    pub const ALL: [FaultKind; 6] = [
        FaultKind::Vanish,
        FaultKind::Error,
        FaultKind::Die,
        FaultKind::Unplug,
        FaultKind::Aer,
        FaultKind::Hang,
    ];

    pub fn name(self) -> &'static str {
        match self {
            FaultKind::Vanish => "vanish",
            FaultKind::Error => "error",
            FaultKind::Die => "die",
            FaultKind::Unplug => "unplug",
            FaultKind::Aer => "aer",
            FaultKind::Hang => "hang",
        }
    }
}

impl std::fmt::Display for FaultKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for FaultKind {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        Self::ALL
            .into_iter()
            .find(|k| k.name() == s)
            .ok_or_else(|| {
                let names: Vec<_> = Self::ALL.iter().map(|k| k.name()).collect();
                format!("{s:?} is no fault kind; one of: {}", names.join(", "))
            })
    }
}

/// Where a fault struck: the access it struck (its number since arming, and the log's seq).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Strike {
    pub kind: FaultKind,
    pub at: u64,
    pub seq: u64,
}

/// The fault as the control socket shows it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FaultState {
    /// Armed and not struck yet: the kind and the access number it strikes at.
    pub armed: Option<(FaultKind, u64)>,
    /// Only writes are counted (e.g. to strike a driver's first write after arming, whatever
    /// reads its other threads make meanwhile).
    #[serde(default)]
    pub writes: bool,
    /// BAR accesses counted since the last arming.
    pub counted: u64,
    /// The last strike since the last arming.
    pub struck: Option<Strike>,
}

impl FaultState {
    /// Counts one BAR access that will get log number `seq`; the kind, if the fault strikes it.
    pub(super) fn count(&mut self, seq: u64, write: bool) -> Option<FaultKind> {
        let (kind, at) = self.armed?;
        if self.writes && !write {
            return None;
        }
        self.counted += 1;
        if self.counted != at {
            return None;
        }
        self.armed = None;
        self.struck = Some(Strike { kind, at, seq });
        Some(kind)
    }
}
