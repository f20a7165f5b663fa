//! The access log and counters: the host's independent record of what the guest did.

use serde::{Deserialize, Serialize};
use std::collections::VecDeque;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Region {
    Config,
    Bar0,
    Bar2,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    Read,
    Write,
}

/// How the device treated an access. Anything but `Ok` means "documented, but not a plain
/// register access" (see REGISTERS.md, "Odd accesses").
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Class {
    /// A 32-bit access to a defined register, or any access to BAR2 / config space.
    Ok,
    /// An aligned 1- or 2-byte access to BAR0 (reads return the addressed bytes, writes drop).
    Narrow,
    /// An aligned 8-byte access to BAR0: two 32-bit accesses, low register first.
    Wide,
    /// An aligned 32-bit access to an offset with no register.
    Undefined,
    /// A write to a read-only register.
    ReadOnly,
    /// A BAR0 access not aligned to its size: reads return zeros, writes drop.
    Unaligned,
    /// A size other than 1, 2, 4 or 8 on BAR0: reads return zeros, writes drop.
    BadSize,
    /// Past the end of the region: the transport answers with an error.
    OutOfRange,
    /// The all-ones knob was set: reads return all-ones, writes drop.
    Removed,
    /// An `error` fault struck: the read returned its value inverted, the write dropped.
    Corrupted,
    /// A `hang` fault struck earlier and no reset followed yet: a BAR read returned all-ones,
    /// a BAR write dropped.
    Hung,
}

/// The names below are the ones the access log's JSON uses (serde's `snake_case`), for messages
/// that quote an access and for parsing; a test holds the two together.
macro_rules! names {
    ($ty:ident { $($variant:ident => $name:literal),* $(,)? }) => {
        impl $ty {
            /// Its name in the access log.
            pub fn name(self) -> &'static str {
                match self {
                    $($ty::$variant => $name,)*
                }
            }
        }

        impl std::fmt::Display for $ty {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.name())
            }
        }

        impl std::str::FromStr for $ty {
            type Err = String;

            fn from_str(s: &str) -> Result<Self, String> {
                match s {
                    $($name => Ok($ty::$variant),)*
                    _ => Err(format!(
                        "{s:?} is no {}; one of: {}",
                        stringify!($ty),
                        [$($name),*].join(", ")
                    )),
                }
            }
        }
    };
}

names!(Region { Config => "config", Bar0 => "bar0", Bar2 => "bar2" });
names!(Kind { Read => "read", Write => "write" });
names!(Class {
    Ok => "ok",
    Narrow => "narrow",
    Wide => "wide",
    Undefined => "undefined",
    ReadOnly => "read_only",
    Unaligned => "unaligned",
    BadSize => "bad_size",
    OutOfRange => "out_of_range",
    Removed => "removed",
    Corrupted => "corrupted",
    Hung => "hung",
});

/// One access as the device saw it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Access {
    /// 1, 2, 3, … in device order; never reused, even after `reset_log`.
    pub seq: u64,
    /// CLOCK_MONOTONIC in ns when the transport handed the access to the model.
    pub time_ns: u64,
    pub region: Region,
    pub offset: u64,
    pub size: u32,
    /// The value read or written, little-endian; `None` for accesses wider than 8 bytes.
    pub value: Option<u64>,
    pub kind: Kind,
    pub class: Class,
    /// The armed fault struck this access (REGISTERS.md, "Faults").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fault: Option<super::FaultKind>,
}

/// Everything counted since the device was created (or since `reset_counters`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Counters {
    pub config_reads: u64,
    pub config_writes: u64,
    pub bar0_reads: u64,
    pub bar0_writes: u64,
    pub bar2_reads: u64,
    pub bar2_writes: u64,
    pub narrow: u64,
    pub wide: u64,
    pub undefined: u64,
    pub read_only: u64,
    pub unaligned: u64,
    pub bad_size: u64,
    pub out_of_range: u64,
    pub removed: u64,
    pub corrupted: u64,
    #[serde(default)]
    pub hung: u64,
    /// Doorbell writes that started an operation.
    pub commands: u64,
    /// Operations that completed with the ERROR bit.
    pub command_errors: u64,
    /// Doorbell writes ignored because an operation was still busy.
    pub doorbell_busy: u64,
    /// Rising edges of the interrupt condition that reached the line.
    pub irqs_raised: u64,
    /// Rising edges swallowed by the drop-interrupts knob.
    pub irqs_dropped: u64,
    /// Soft resets (RESET register) and device resets (vfio-user).
    pub resets: u64,
    /// Log entries discarded because the log was full.
    pub log_overflow: u64,
}

impl Counters {
    pub(super) fn count(&mut self, region: Region, kind: Kind, class: Class) {
        let slot = match (region, kind) {
            (Region::Config, Kind::Read) => &mut self.config_reads,
            (Region::Config, Kind::Write) => &mut self.config_writes,
            (Region::Bar0, Kind::Read) => &mut self.bar0_reads,
            (Region::Bar0, Kind::Write) => &mut self.bar0_writes,
            (Region::Bar2, Kind::Read) => &mut self.bar2_reads,
            (Region::Bar2, Kind::Write) => &mut self.bar2_writes,
        };
        *slot += 1;
        let slot = match class {
            Class::Ok => return,
            Class::Narrow => &mut self.narrow,
            Class::Wide => &mut self.wide,
            Class::Undefined => &mut self.undefined,
            Class::ReadOnly => &mut self.read_only,
            Class::Unaligned => &mut self.unaligned,
            Class::BadSize => &mut self.bad_size,
            Class::OutOfRange => &mut self.out_of_range,
            Class::Removed => &mut self.removed,
            Class::Corrupted => &mut self.corrupted,
            Class::Hung => &mut self.hung,
        };
        *slot += 1;
    }
}

/// A bounded log: when full, the oldest entries go (and `log_overflow` counts them), so a
/// reader sees a gap in `seq` rather than a silently short log.
#[derive(Clone, Debug)]
pub struct AccessLog {
    entries: VecDeque<Access>,
    capacity: usize,
    next_seq: u64,
}

impl AccessLog {
    pub fn new(capacity: usize) -> Self {
        Self {
            entries: VecDeque::new(),
            capacity: capacity.max(1),
            next_seq: 1,
        }
    }

    /// Appends an entry; returns true if an old one had to go.
    pub(super) fn push(&mut self, mut a: Access) -> bool {
        a.seq = self.next_seq;
        self.next_seq += 1;
        let overflow = self.entries.len() == self.capacity;
        if overflow {
            self.entries.pop_front();
        }
        self.entries.push_back(a);
        overflow
    }

    /// Entries with `seq > since` (all of them for `since == 0`), oldest first.
    pub fn since(&self, since: u64) -> impl Iterator<Item = &Access> {
        // seq is strictly increasing, so the first match is found by binary search.
        let start = self.entries.partition_point(|a| a.seq <= since);
        self.entries.range(start..)
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The sequence number the next access will get.
    pub fn next_seq(&self) -> u64 {
        self.next_seq
    }

    /// Forgets the entries; numbering goes on.
    pub fn clear(&mut self) {
        self.entries.clear();
    }
}
