//! The MMIO oracle: `qemu-plugin/` (`mmio-oracle`), a TCG plugin loaded into
//! every boot with our device, writes down every guest access to the
//! machine's PCI memory windows from inside QEMU (`oracle.jsonl` in the
//! boot's folder). The guest assigns the BARs while it runs, after the
//! plugin started, so the plugin watches the whole windows and the judge
//! keeps the accesses to our device's BARs, learned from the kernel's own
//! resource lines (every assignment, so an old BAR stays watched after an
//! unplug). Unlike the device's log it still sees an access once the device
//! is gone.

use crate::accounting::{self, Accounted};
use crate::console;
use crate::device_log::{Access, Class, Kind, Region, Stopped};
use crate::driver::Actor;
use crate::requests::{GuestRequest, HostAction};
use serde::{Deserialize, Serialize};

/// The log's name in a boot's folder.
pub const LOG: &str = "oracle.jsonl";

/// Where our device sits on every machine (behind root port `rp0`).
const DEVICE: &str = "pci 0000:01:00.0: BAR ";

/// What the host knew when it let the guest go on after arming the
/// oracle (it answers the guest only once the plugin's log has its
/// `armed` record).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct HostArmed {
    /// The console line (index into the boot's lines) of the guest's
    /// request: the host acted on every later line after arming.
    pub line: usize,
    /// The attached device server's next access number then: a BAR access
    /// in its log numbered below this happened before the oracle watched.
    pub device_next_seq: Option<u64>,
}

/// Whether the plugin's log (as written so far) says it is armed.
pub fn armed_in(text: &str) -> bool {
    text.lines().any(|l| l.starts_with("{\"armed\":"))
}

/// One access the plugin saw.
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
pub struct Seen {
    pub seq: u64,
    /// The host's CLOCK_MONOTONIC at the access (0 in logs from before the plugin said).
    #[serde(default)]
    pub ns: u64,
    pub vcpu: u32,
    pub pc: u64,
    pub vaddr: u64,
    pub addr: u64,
    pub size: u32,
    pub kind: Kind,
    pub value: u64,
    pub io: bool,
}

/// The plugin's log of one boot.
#[derive(Debug, Default)]
pub struct Log {
    pub seen: Vec<Seen>,
    /// The plugin wrote its header (it was loaded and watching).
    pub started: bool,
    /// It wrote its last line (QEMU exited normally, nothing cut).
    pub complete: bool,
    /// The `seq` of its `armed` record: every access from then on is in
    /// the log.
    pub armed: Option<u64>,
    /// What the host knew when it let the guest go on (filled in by the
    /// harness, not read from the log).
    pub host: Option<HostArmed>,
}

impl Log {
    pub fn parse(text: &str) -> Result<Log, String> {
        let mut log = Log::default();
        // Every record but the header and the trailer is numbered, from 1.
        let mut next = 1;
        for (i, line) in text.lines().enumerate() {
            let v: serde_json::Value =
                serde_json::from_str(line).map_err(|e| format!("{LOG} line {}: {e}", i + 1))?;
            if v.get("plugin").is_some() {
                log.started = true;
            } else if let Some(end) = v.get("end") {
                let n = end["records"].as_u64().unwrap_or(u64::MAX);
                if n != next - 1 {
                    return Err(format!(
                        "{LOG} says it wrote {n} records, it holds {}",
                        next - 1
                    ));
                }
                log.complete = true;
            } else if let Some(armed) = v.get("armed") {
                let seq = armed["seq"].as_u64();
                if seq != Some(next) || log.armed.is_some() {
                    return Err(format!(
                        "{LOG} line {}: armed record {armed} out of order",
                        i + 1
                    ));
                }
                log.armed = seq;
                next += 1;
            } else {
                let s: Seen =
                    serde_json::from_value(v).map_err(|e| format!("{LOG} line {}: {e}", i + 1))?;
                if s.seq != next {
                    return Err(format!("{LOG} line {}: seq {} out of order", i + 1, s.seq));
                }
                next += 1;
                log.seen.push(s);
            }
        }
        Ok(log)
    }
}

/// One of our device's BARs as the kernel placed it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Bar {
    pub region: Region,
    pub start: u64,
    pub end: u64,
}

/// Every place the kernel put our device's memory BARs during the boot
/// (`pci 0000:01:00.0: BAR 0 [mem 0xfe610000-0xfe610fff]`, `…: assigned`),
/// each once; unassigned ones (at 0) left out.
pub fn bars(lines: &[String]) -> Vec<Bar> {
    let mut out: Vec<Bar> = Vec::new();
    for l in lines {
        let text = console::strip_timestamp(l);
        let Some(rest) = text.strip_prefix(DEVICE) else {
            continue;
        };
        let Some((n, rest)) = rest.split_once(" [mem ") else {
            continue;
        };
        let Some(range) = rest.split(&[']', ' '][..]).next() else {
            continue;
        };
        let Some((a, b)) = range.split_once('-') else {
            continue;
        };
        let num = |s: &str| u64::from_str_radix(s.trim_start_matches("0x"), 16).ok();
        let (Some(start), Some(last)) = (num(a), num(b)) else {
            continue;
        };
        let region = match n {
            "0" => Region::Bar0,
            "2" => Region::Bar2,
            _ => continue,
        };
        let bar = Bar {
            region,
            start,
            end: last + 1,
        };
        if start != 0 && !out.contains(&bar) {
            out.push(bar);
        }
    }
    out
}

/// The plugin's accesses to our BARs, as the device would log them (region
/// and offset), in the plugin's order.
pub fn to_device(seen: &[Seen], bars: &[Bar]) -> Vec<Access> {
    seen.iter()
        .filter_map(|s| {
            let b = bars.iter().find(|b| (b.start..b.end).contains(&s.addr))?;
            Some(Access {
                seq: s.seq,
                time_ns: 0,
                region: b.region,
                offset: s.addr - b.start,
                size: s.size,
                value: Some(s.value),
                kind: s.kind,
                // The plugin does not classify: `judge` copies a hung device's answers.
                class: Class::Ok,
                fault: None,
            })
        })
        .collect()
}

/// Marks the plugin's entries for the accesses a hung device answered (class `hung` in its
/// log) as such, so that the accounting lets the worker read on after them, as it does by the
/// device's log. The all-ones answer the plugin saw is checked against the device's by `same`.
fn carry_hung(seen: &mut [Access], devices: &[&[Access]]) {
    let hung = devices
        .iter()
        .flat_map(|l| l.iter())
        .filter(|a| a.class == Class::Hung);
    for d in hung {
        if let Some(o) = seen.iter_mut().find(|o| o.class == Class::Ok && same(d, o)) {
            o.class = Class::Hung;
        }
    }
}

/// The same access, seen by the device and by the plugin.
fn same(d: &Access, o: &Access) -> bool {
    // A read the device died at was never answered: the vCPU got all-ones from QEMU.
    let value = match (crate::accounting::died_at(d), d.kind) {
        (true, Kind::Read) => o.value.map(|v| v | 0xffff_ffff) == o.value,
        _ => d.value == o.value,
    };
    d.kind == o.kind && d.region == o.region && d.offset == o.offset && d.size == o.size && value
}

/// The oracle was armed before anything could touch our device unseen:
/// its log has the `armed` record, before any access it holds; the host
/// saw it before it let the guest go on; no host unplug came before that;
/// and the device logged no BAR access before it. (The plugin instruments
/// nothing before it is armed, so an access before arming would be in the
/// device's log only while the device is present, and not at all after an
/// unplug.)
pub fn armed_in_time(log: &Log, lines: &[String], devices: &[&[Access]]) -> Result<(), String> {
    let Some(seq) = log.armed else {
        return Err(
            "the MMIO oracle was never armed (no `armed` record in its log): the guest did not ask (`pcirig: host arm-oracle`) or QEMU never ran the plugin's reset".into(),
        );
    };
    if let Some(s) = log.seen.iter().find(|s| s.seq < seq) {
        return Err(format!(
            "the MMIO oracle logged access #{} before it was armed (#{seq})",
            s.seq
        ));
    }
    let Some(host) = &log.host else {
        return Err("the MMIO oracle's log says armed, but the host never saw it so before the guest went on".into());
    };
    // Read by the parser the host acted on, not by a text of its own.
    let unplug = lines.iter().position(|l| {
        matches!(
            GuestRequest::parse(console::strip_timestamp(l)),
            Some(Ok(GuestRequest::Host(HostAction::Unplug)))
        )
    });
    if let Some(u) = unplug.filter(|&u| u < host.line) {
        return Err(format!(
            "the host unplugged the device (console line {}) before the MMIO oracle was armed (line {}): an access after the unplug could have gone unseen",
            u + 1,
            host.line + 1
        ));
    }
    if let Some(next) = host.device_next_seq {
        let early: Vec<&Access> = devices
            .first()
            .into_iter()
            .flat_map(|l| l.iter())
            .filter(|a| a.region != Region::Config && a.seq < next)
            .collect();
        if let Some(a) = early.first() {
            return Err(format!(
                "the device logged {} BAR access{} before the MMIO oracle was armed (first: #{} {} {} 0x{:x} size {}): nothing may touch the device before the oracle watches",
                early.len(),
                if early.len() == 1 { "" } else { "es" },
                a.seq,
                a.kind,
                a.region,
                a.offset,
                a.size
            ));
        }
    }
    Ok(())
}

/// Judges a boot from the plugin's side: it watched the whole boot; every
/// access it saw to our BARs is one the guest accounts for (`accounting`,
/// the same rules as the device's log; so none after a binding ended); and
/// every BAR access in the device logs is one it saw.
pub fn judge(
    log: &Log,
    lines: &[String],
    history: &[Actor],
    devices: &[&[Access]],
) -> Result<String, String> {
    if !log.started {
        return Err("the MMIO oracle never started (no header in its log)".into());
    }
    if !log.complete {
        return Err("the MMIO oracle's log was cut short (QEMU did not exit normally)".into());
    }
    armed_in_time(log, lines, devices)?;
    let bars = bars(lines);
    if bars.is_empty() {
        return Err("the kernel never printed where it put our device's BARs".into());
    }
    let mut seen = to_device(&log.seen, &bars);
    carry_hung(&mut seen, devices);
    let n: Accounted = accounting::account(history, &[&seen[..]])
        .map_err(|e| format!("MMIO oracle (inside QEMU): {e}"))?;
    // Every device-log entry has its plugin entry. With two vCPUs the two
    // logs may order concurrent accesses differently: matched as a multiset.
    let mut left: Vec<&Access> = seen.iter().collect();
    let mut matched = 0;
    for d in devices
        .iter()
        .flat_map(|l| l.iter())
        .filter(|a| a.region != Region::Config)
    {
        match left.iter().position(|o| same(d, o)) {
            Some(i) => {
                left.swap_remove(i);
                matched += 1;
            }
            None => {
                return Err(format!(
                    "MMIO oracle: the device logged #{} {} {} 0x{:x} size {} value {:?}, which no vCPU made",
                    d.seq, d.kind, d.region, d.offset, d.size, d.value
                ))
            }
        }
    }
    let places: Vec<String> = bars
        .iter()
        .map(|b| format!("{} {:#x}", b.region, b.start))
        .collect();
    Ok(format!(
        "; the MMIO oracle saw {} accesses to our BARs ({}) in {} bindings, {} driver, {} user space, {} worker reads, all accounted for, and each of the device's {matched} BAR accesses",
        seen.len(),
        places.join(", "),
        n.bindings,
        n.driver,
        n.user,
        n.worker
    ))
}

/// Judges a device-tree boot from the plugin's side (`platform`): armed in
/// time, and the accesses it saw in the node's `window` are exactly
/// `reads` ((offset, value), what the driver's lines say it read, in
/// order), each a 4-byte read: nothing before the first probe, between a
/// remove and the next probe, or after the last remove.
pub fn judge_window(
    log: &Log,
    lines: &[String],
    window: (u64, u64),
    reads: &[(u64, u64)],
) -> Result<String, String> {
    if !log.started {
        return Err("the MMIO oracle never started (no header in its log)".into());
    }
    if !log.complete {
        return Err("the MMIO oracle's log was cut short (QEMU did not exit normally)".into());
    }
    armed_in_time(log, lines, &[])?;
    let (start, len) = window;
    let seen: Vec<&Seen> = log
        .seen
        .iter()
        .filter(|s| (start..start + len).contains(&s.addr))
        .collect();
    for (i, s) in seen.iter().enumerate() {
        let want = reads.get(i);
        let is = (s.addr - start, s.value);
        if s.kind != Kind::Read || s.size != 4 || want != Some(&is) {
            return Err(format!(
                "MMIO oracle (inside QEMU): the node's window at {start:#x} saw, as its access {}, a {}-byte {} at +{:#x} of {:#x}; the driver's lines account for {}",
                i + 1,
                s.size,
                s.kind,
                is.0,
                is.1,
                want.map_or("nothing more".to_string(), |(o, v)| format!(
                    "a 4-byte read at +{o:#x} of {v:#x}"
                ))
            ));
        }
    }
    if seen.len() < reads.len() {
        let (o, v) = reads[seen.len()];
        return Err(format!(
            "MMIO oracle (inside QEMU): the driver's lines say it read +{o:#x} of the node's window at {start:#x} (value {v:#x}), which no vCPU did (the oracle saw {} reads there)",
            seen.len()
        ));
    }
    Ok(format!(
        "; the MMIO oracle saw exactly the driver's {} reads of the node's window at {start:#x}, with their values, and nothing else there",
        seen.len()
    ))
}

/// The MMIO oracle's side of a boot ([`judge`]), when it watched it (`oracle`: its log, or why
/// it could not be read; `lines`: the boot's console).
pub(crate) fn of_boot(
    oracle: Option<&Result<Log, String>>,
    lines: &[String],
    history: &[Actor],
    device: &[Stopped],
) -> Result<String, String> {
    match oracle {
        None => Ok(String::new()),
        Some(Err(e)) => Err(format!("MMIO oracle: {e}")),
        Some(Ok(log)) => judge(log, lines, history, &crate::device_log::access_logs(device)),
    }
}

pub mod sample;

#[cfg(test)]
mod tests;
