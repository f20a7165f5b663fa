//! The oracle's log: JSON lines. The first line says what was watched, then
//! one line when the oracle was armed (from then on every guest load and
//! store is instrumented), one line per access, all numbered by `seq`, and a
//! last line when QEMU exits normally (a log without it was cut short):
//!
//! ```text
//! {"plugin":"mmio-oracle","api":7,"target":"x86_64","qemu_api":[7,7],"watch":[[4261412864,4096]]}
//! {"armed":{"seq":1,"flushed":true}}
//! {"seq":2,"ns":81234567890,"vcpu":0,"pc":18446744071583086657,"vaddr":18446683600570056704,"addr":4261412864,"size":4,"kind":"read","value":1346978889,"io":true}
//! {"end":{"records":2}}
//! ```
//!
//! `flushed` says QEMU's translated code was thrown away when it was armed
//! (armed late, on request), so that no code translated before, without
//! the oracle's callbacks, runs after; `false` when it was armed as QEMU
//! started, before anything was translated. `records` counts every line
//! with a `seq`, the `armed` one included.
//!
//! `ns` is the host's CLOCK_MONOTONIC when the access was made (the clock of
//! the device server's log and of the host's marks), so that an access can be
//! placed between two moments the host marked while the guest waited.
//! `pc` is the virtual address of the instruction that made the access,
//! `vaddr`/`addr` the virtual and physical address accessed, `value` what a
//! read returned or a write stored (host order, zero-extended; accesses wider
//! than 8 bytes add `value_hi`), `io` whether QEMU routed it to an I/O region
//! rather than RAM.

use crate::watch::Range;
use std::fmt::Write;

/// One access the oracle saw.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Record {
    pub seq: u64,
    pub ns: u64,
    pub vcpu: u32,
    pub pc: u64,
    pub vaddr: u64,
    pub addr: u64,
    pub size: u32,
    pub write: bool,
    pub value: u128,
    pub io: bool,
}

impl Record {
    /// The record as one line, newline included, appended to `out`.
    pub fn write_line(&self, out: &mut String) {
        let kind = if self.write { "write" } else { "read" };
        let _ = write!(
            out,
            r#"{{"seq":{},"ns":{},"vcpu":{},"pc":{},"vaddr":{},"addr":{},"size":{},"kind":"{kind}","value":{}"#,
            self.seq,
            self.ns,
            self.vcpu,
            self.pc,
            self.vaddr,
            self.addr,
            self.size,
            self.value as u64,
        );
        if self.size > 8 {
            let _ = write!(out, r#","value_hi":{}"#, (self.value >> 64) as u64);
        }
        let _ = writeln!(out, r#","io":{}}}"#, self.io);
    }
}

/// The first line of a log.
pub fn header(target: &str, qemu_api: (i32, i32), watch: &[Range]) -> String {
    let mut s = format!(
        r#"{{"plugin":"mmio-oracle","api":{},"target":"{}","qemu_api":[{},{}],"watch":["#,
        crate::api::VERSION,
        plain(target),
        qemu_api.0,
        qemu_api.1
    );
    for (i, r) in watch.iter().enumerate() {
        let sep = if i == 0 { "" } else { "," };
        let _ = write!(s, "{sep}[{},{}]", r.start, r.end - r.start);
    }
    s.push_str("]}\n");
    s
}

/// The line that says the oracle is armed, numbered `seq` like an access.
pub fn armed(seq: u64, flushed: bool) -> String {
    format!("{{\"armed\":{{\"seq\":{seq},\"flushed\":{flushed}}}}}\n")
}

/// The last line of a complete log.
pub fn trailer(records: u64) -> String {
    format!("{{\"end\":{{\"records\":{records}}}}}\n")
}

/// QEMU's target names are plain words; anything else is shown as `?` so
/// that the header stays valid JSON without an escaper.
fn plain(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '?'
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_is_one_json_line() {
        let mut s = String::new();
        Record {
            seq: 3,
            ns: 42,
            vcpu: 1,
            pc: 0xffff_ffff_8100_0000,
            vaddr: 0xffff_c900_0000_0010,
            addr: 0xfe00_0010,
            size: 4,
            write: true,
            value: 0xdead_beef,
            io: true,
        }
        .write_line(&mut s);
        assert_eq!(
            s,
            concat!(
                r#"{"seq":3,"ns":42,"vcpu":1,"pc":18446744071578845184,"vaddr":18446683600570023952,"#,
                r#""addr":4261412880,"size":4,"kind":"write","value":3735928559,"io":true}"#,
                "\n"
            )
        );
    }

    #[test]
    fn a_wide_access_adds_the_high_half() {
        let mut s = String::new();
        Record {
            seq: 1,
            ns: 0,
            vcpu: 0,
            pc: 0,
            vaddr: 0,
            addr: 0,
            size: 16,
            write: false,
            value: (7u128 << 64) | 9,
            io: false,
        }
        .write_line(&mut s);
        assert!(
            s.ends_with("\"kind\":\"read\",\"value\":9,\"value_hi\":7,\"io\":false}\n"),
            "{s}"
        );
    }

    #[test]
    fn header_and_trailer() {
        let h = header(
            "x86\"64",
            (7, 7),
            &[Range {
                start: 0x1000,
                end: 0x1100,
            }],
        );
        assert_eq!(
            h,
            "{\"plugin\":\"mmio-oracle\",\"api\":7,\"target\":\"x86?64\",\"qemu_api\":[7,7],\"watch\":[[4096,256]]}\n"
        );
        assert_eq!(trailer(12), "{\"end\":{\"records\":12}}\n");
        assert_eq!(armed(1, true), "{\"armed\":{\"seq\":1,\"flushed\":true}}\n");
    }
}
