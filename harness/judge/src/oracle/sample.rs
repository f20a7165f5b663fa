//! The MMIO oracle over upstream's `rust_driver_pci` sample on QEMU's pci-testdev (the
//! mainline line's `mainline-pci`): the sample reports nothing, so its accesses are held
//! against what its source does. Each probe selects test 0 (a byte written to TEST), reads
//! OFFSET and DATA, writes DATA's byte at OFFSET and reads COUNT; each unbind writes TEST once
//! more. The plugin, inside QEMU, sees every guest access to the BAR: exactly one
//! probe-and-unbind sequence per binding, in order, and nothing else, so none after a binding
//! ended (the guest stays up after the last one).

use super::{Log, Seen};
use crate::device_log::Kind;

/// pci-testdev's BAR0 registers the sample uses.
const TEST: u64 = 0x0;
const OFFSET: u64 = 0x4;
const DATA: u64 = 0x8;
const COUNT: u64 = 0xc;

/// pci-testdev's BAR0, by the kernel's lines: its id line names the function
/// (`pci 0000:00:03.0: [1b36:0005] …`), its `BAR 0 [mem A-B]` line the place.
pub fn bar0(text: &[&str]) -> Result<(u64, u64), String> {
    let bdf = text
        .iter()
        .find_map(|l| {
            let (dev, rest) = l.strip_prefix("pci ")?.split_once(": ")?;
            rest.starts_with("[1b36:0005]").then_some(dev)
        })
        .ok_or("the kernel never listed pci-testdev ([1b36:0005])")?;
    let prefix = format!("pci {bdf}: BAR 0 [mem ");
    let num = |s: &str| u64::from_str_radix(s.trim_start_matches("0x"), 16).ok();
    // Listed at 0 first, then where it was assigned.
    text.iter()
        .filter_map(|l| {
            l.strip_prefix(prefix.as_str())?
                .split(&[']', ' '][..])
                .next()
        })
        .filter_map(|range| {
            let (a, b) = range.split_once('-')?;
            Some((num(a)?, num(b)? + 1))
        })
        .find(|&(start, _)| start != 0)
        .ok_or_else(|| format!("the kernel never placed pci-testdev's BAR 0 ({bdf})"))
}

/// What the sample's source makes on the BAR: kind, offset (None: the offset OFFSET read
/// back), size.
const PROBE: [(Kind, Option<u64>, u32); 5] = [
    (Kind::Write, Some(TEST), 1),
    (Kind::Read, Some(OFFSET), 4),
    (Kind::Read, Some(DATA), 1),
    (Kind::Write, None, 1),
    (Kind::Read, Some(COUNT), 4),
];
const UNBIND: (Kind, Option<u64>, u32) = (Kind::Write, Some(TEST), 1);

/// Holds the plugin's accesses to pci-testdev's BAR0 against `bindings` bindings of the
/// sample's source, in order.
pub fn judge(log: &Log, text: &[&str], bindings: usize) -> Result<String, String> {
    if !log.complete {
        return Err("MMIO oracle: its log is cut short (QEMU did not exit normally)".into());
    }
    let (start, end) = bar0(text)?;
    let seen: Vec<&Seen> = log
        .seen
        .iter()
        .filter(|s| s.addr >= start && s.addr < end)
        .collect();
    let mut want = Vec::new();
    for _ in 0..bindings {
        want.extend(PROBE);
        want.push(UNBIND);
    }
    let mut offset = None;
    for (i, (kind, at, size)) in want.iter().enumerate() {
        let Some(s) = seen.get(i) else {
            return Err(format!(
                "MMIO oracle (inside QEMU): the sample made {} accesses to pci-testdev's BAR 0, its source makes {} in {bindings} bindings",
                seen.len(),
                want.len()
            ));
        };
        let at = at
            .or(offset)
            .ok_or("the sample wrote at the test's offset before reading it")?;
        if s.kind != *kind || s.addr - start != at || s.size != *size {
            return Err(format!(
                "MMIO oracle (inside QEMU): pci-testdev access {} was {} 0x{:x} size {}, the sample's source makes {} 0x{at:x} size {size} there",
                i + 1,
                s.kind,
                s.addr - start,
                s.size,
                kind
            ));
        }
        if at == OFFSET {
            offset = Some(s.value);
        }
    }
    if seen.len() > want.len() {
        let extra = seen[want.len()];
        return Err(format!(
            "MMIO oracle (inside QEMU): pci-testdev's BAR 0 was accessed {} more times than the sample's {bindings} bindings make, the first: {} 0x{:x} (after the last binding ended)",
            seen.len() - want.len(),
            extra.kind,
            extra.addr - start
        ));
    }
    Ok(format!(
        ", the MMIO oracle saw pci-testdev's BAR 0 ({start:#x}) accessed exactly as the sample's source does in {bindings} bindings ({} accesses), none after",
        want.len()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    const LINES: &[&str] = &[
        "pci 0000:00:03.0: [1b36:0005] type 00 class 0x00ff00 conventional PCI endpoint",
        "pci 0000:00:03.0: BAR 0 [mem 0x00000000-0x00000fff]",
        "pci 0000:00:03.0: BAR 0 [mem 0xfebf1000-0xfebf1fff]: assigned",
    ];

    fn seen(seq: u64, kind: Kind, off: u64, size: u32, value: u64) -> Seen {
        Seen {
            seq,
            ns: seq,
            vcpu: 0,
            pc: 0,
            vaddr: 0,
            addr: 0xfebf_1000 + off,
            size,
            kind,
            value,
            io: true,
        }
    }

    /// Two bindings as the sample makes them; the test's offset reads 0x20.
    fn log() -> Log {
        let mut seen_all = Vec::new();
        for _ in 0..2 {
            for (kind, at, size) in PROBE.iter().copied().chain([UNBIND]) {
                let off = at.unwrap_or(0x20);
                let value = if off == OFFSET { 0x20 } else { 0 };
                seen_all.push(seen(seen_all.len() as u64 + 1, kind, off, size, value));
            }
        }
        Log {
            seen: seen_all,
            started: true,
            complete: true,
            ..Log::default()
        }
    }

    #[test]
    fn the_samples_own_accesses_pass_and_anything_else_fails() {
        let ok = judge(&log(), LINES, 2).unwrap();
        assert!(
            ok.contains("exactly as the sample's source does in 2 bindings (12 accesses)"),
            "{ok}"
        );
        // One access after the last binding ended.
        let mut late = log();
        late.seen.push(seen(13, Kind::Read, COUNT, 4, 1));
        let e = judge(&late, LINES, 2).unwrap_err();
        assert!(
            e.contains("accessed 1 more times") && e.contains("after the last binding"),
            "{e}"
        );
        // A binding whose unbind never wrote TEST.
        let mut short = log();
        short.seen.pop();
        let e = judge(&short, LINES, 2).unwrap_err();
        assert!(e.contains("made 11 accesses"), "{e}");
        // One binding's worth is what a hot-unplugged one makes: the second is one too many.
        let e = judge(&log(), LINES, 1).unwrap_err();
        assert!(
            e.contains("accessed 6 more times than the sample's 1 bindings"),
            "{e}"
        );
        // The data written elsewhere than the offset the device gave.
        let mut moved = log();
        moved.seen[3].addr += 4;
        let e = judge(&moved, LINES, 2).unwrap_err();
        assert!(e.contains("access 4 was write 0x24 size 1"), "{e}");
        let e = judge(&log(), &LINES[..2], 2).unwrap_err();
        assert!(e.contains("never placed pci-testdev's BAR 0"), "{e}");
        let cut = Log {
            complete: false,
            ..log()
        };
        assert!(judge(&cut, LINES, 2).unwrap_err().contains("cut short"));
    }
}
