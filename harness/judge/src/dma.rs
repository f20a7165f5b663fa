//! The DMA oracle: every DMA the device made, from its own DMA log, held against what the
//! driver had mapped at that moment, by the driver's `# dma` lines (`dma_lines.rs`; what they
//! say of each mapping is held to the kernel's own record by `dma_core.rs`).
//!
//! A DMA is placed among the driver's reports exactly: the device logs it with the number of
//! the CMD write that started it, and the accounting matched that write to one report. Rules:
//! the range lies in one mapping live then, whose kind allows the direction; the bytes are the
//! driver's (to the device, the CRC its start line gave; from the device, the CRC it received);
//! bus mastering was on by the device's own config-space log; no DMA outside a binding, and no
//! DMA nobody's report started.

use crate::accounting::{Accounted, ClaimSeqs};
use crate::device_log::{
    Access, Claimed, DmaDirection, DmaEvent, DmaOutcome, Kind, Region, Stopped,
};
pub use crate::dma_lines::{parse, Line, MapKind, Op};
use crate::driver::Actor;
use std::collections::BTreeMap;

/// What the oracle counted.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct DmaFindings {
    /// Mappings the driver reported.
    pub mappings: usize,
    /// DMAs that moved data, each inside a live mapping with the driver's data.
    pub moved: usize,
    /// DMAs the device refused (no bus master, mask, fault, forced).
    pub refused: usize,
    /// Bytes moved.
    pub bytes: u64,
    /// Behind the guest's IOMMU: the driver's mappings the device's own DMA log witnessed
    /// (QEMU mapped each, and unmapped each the driver ended).
    #[serde(skip_serializing_if = "is_zero")]
    pub witnessed: usize,
    /// DMAs the device ran on its own clock, after their doorbell, each found inside a
    /// mapping the driver had not ended yet.
    #[serde(skip_serializing_if = "is_zero")]
    pub delayed: usize,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

/// One actor's side, as the oracle walks it: its claims, and its DMA lines each with the
/// number of its claims before it.
pub struct Walk<'a> {
    pub claims: Vec<&'a Claimed>,
    pub lines: &'a [(usize, Line)],
    /// A driver binding (its mappings live until it ends) or user space.
    pub binding: Option<usize>,
    /// The binding ended (its mappings end with it).
    pub ended: bool,
    /// Its `dma_from_device` step passed: what the DMA from the device during probe wrote, it
    /// must have said it received (a step that failed may not have looked; a stream's last round
    /// is never looked at).
    pub received: bool,
    /// How many of `claims` probe made.
    pub probe_claims: usize,
}

struct Live {
    kind: MapKind,
    iova: u64,
    len: u64,
}

/// Whether our device sat behind the guest's IOMMU, by the kernel's own word: it put a device
/// our driver printed for into an IOMMU group (`pci 0000:01:00.0: Adding to iommu group 3`;
/// on arm64 the group is made at probe, under the driver's name). Whichever vIOMMU it was.
pub fn behind_iommu(lines: &[String]) -> bool {
    let texts = || lines.iter().map(|l| crate::console::strip_timestamp(l));
    let ours: Vec<&str> = texts()
        .filter_map(|l| l.strip_prefix("pci_rig ")?.split_once(": ").map(|(d, _)| d))
        .collect();
    texts().any(|l| {
        l.split_once(": Adding to iommu group ")
            .and_then(|(who, _)| who.split_whitespace().nth(1))
            .is_some_and(|dev| ours.contains(&dev))
    })
}

/// The oracle over a boot: the console's history, what the accounting matched, the servers;
/// `iommu`: the guest mapped through its IOMMU, so QEMU mapped the device each mapping.
pub fn check(
    history: &[Actor],
    n: &Accounted,
    device: &[Stopped],
    iommu: bool,
) -> Result<DmaFindings, String> {
    let mut k = 0;
    let walks: Vec<Walk<'_>> = history
        .iter()
        .map(|a| match a {
            Actor::Driver(b) => {
                k += 1;
                Walk {
                    claims: b.claims().collect(),
                    lines: &b.dma,
                    binding: Some(k),
                    ended: b.worker_reads.is_some() || !b.probed,
                    received: b.steps.iter().any(|s| s.name == "dma_from_device" && s.ok),
                    probe_claims: b.probe_claims.len(),
                }
            }
            Actor::User(c) => Walk {
                claims: vec![c],
                lines: &[],
                binding: None,
                ended: false,
                received: false,
                probe_claims: 1,
            },
        })
        .collect();
    let servers: Vec<_> = device.iter().map(|d| (&d.log[..], &d.dma[..])).collect();
    let mut f = judge(&walks, &n.seqs, &servers)?;
    f.delayed = ran_while_mapped(&walks, &n.seqs, &servers)?;
    if iommu {
        f.witnessed = witnessed(&walks, &n.seqs, &servers)?;
    }
    Ok(f)
}

/// Behind the guest's IOMMU, QEMU maps the device exactly what the guest maps, so the device's
/// own DMA log witnesses the driver's `# dma` lines: by the driver's next report after a map
/// line, the device could reach the whole mapping; after an unmap line, QEMU unmapped it for
/// the device before anything mapped that range again (or the log ended). The unmap is placed
/// after the access reported last before the line (that access completed before its report,
/// so before the unmap), never before the next report: another context of the driver (the
/// interrupt handler) may report an access it made while the free was still under way.
/// Returns how many mappings were witnessed.
fn witnessed(
    walks: &[Walk<'_>],
    seqs: &ClaimSeqs,
    servers: &[(&[Access], &[DmaEvent])],
) -> Result<usize, String> {
    let mut n = 0;
    let mut live: BTreeMap<u64, (u64, u64)> = BTreeMap::new();
    for (ai, walk) in walks.iter().enumerate() {
        let Some(k) = walk.binding else { continue };
        let claim = |i: usize| seqs.get(ai).and_then(|s| s.get(i)).copied().flatten();
        for (pos, line) in walk.lines {
            match line {
                Line::Map { id, iova, len, .. } => {
                    // The access the driver reported next, if it reached a log.
                    let Some((server, seq)) = claim(*pos) else {
                        continue;
                    };
                    if !reaches(&windows_before(servers[server].1, seq), *iova, *len) {
                        return Err(format!(
                            "binding {k}: the driver reported DMA mapping {id} at {iova:#x}+{len:#x}, but QEMU had not mapped the device all of it by the driver's next access (device access #{seq}): the guest's IOMMU does not agree"
                        ));
                    }
                    live.insert(*id, (*iova, *len));
                    n += 1;
                }
                Line::Unmap { id } => {
                    let Some((iova, len)) = live.remove(id) else {
                        continue;
                    };
                    let Some((server, before)) = pos.checked_sub(1).and_then(claim) else {
                        continue;
                    };
                    let overlaps = |at: u64, size: u64| iova < at + size && at < iova + len;
                    let next = servers[server].1.iter().find(|e| match **e {
                        DmaEvent::Map {
                            seq,
                            iova: at,
                            size,
                            ..
                        }
                        | DmaEvent::Unmap {
                            seq,
                            iova: at,
                            size,
                            ..
                        } => seq > before && overlaps(at, size),
                        DmaEvent::Dma { .. } | DmaEvent::Reset { .. } | DmaEvent::Power { .. } => {
                            false
                        }
                    });
                    if !matches!(next, Some(DmaEvent::Unmap { .. })) {
                        return Err(format!(
                            "binding {k}: the driver reported DMA mapping {id} ({iova:#x}+{len:#x}) ended after device access #{before}, but QEMU never unmapped it for the device after that ({})",
                            match next {
                                Some(e) => format!("the range was mapped again first: {e:?}"),
                                None => "the device could reach it to the end of its log".into(),
                            }
                        ));
                    }
                }
                _ => {}
            }
        }
    }
    Ok(n)
}

/// Whether `windows` cover every byte of `[iova, iova + len)`.
fn reaches(windows: &[(u64, u64)], iova: u64, len: u64) -> bool {
    let mut at = iova;
    while at < iova + len {
        match windows.iter().find(|(w, s)| at >= *w && at < w + s) {
            Some((w, s)) => at = w + s,
            None => return false,
        }
    }
    true
}

/// The guest memory windows QEMU had mapped for the device before access `seq`.
fn windows_before(dma: &[DmaEvent], seq: u64) -> Vec<(u64, u64)> {
    let mut windows: Vec<(u64, u64)> = Vec::new();
    for e in dma {
        match *e {
            DmaEvent::Map {
                seq: s,
                iova,
                size,
                memory: true,
                ..
            } if s <= seq => {
                windows.retain(|&(w, n)| !(iova < w + n && w < iova + size));
                windows.push((iova, size));
            }
            DmaEvent::Unmap {
                seq: s, iova, size, ..
            } if s <= seq => windows.retain(|&(w, n)| !(iova < w + n && w < iova + size)),
            _ => {}
        }
    }
    windows
}

impl DmaFindings {
    /// For a verdict's summary.
    pub fn summary(&self) -> String {
        if self.moved + self.refused == 0 {
            return String::new();
        }
        format!(
            "; DMA oracle: {} DMAs ({} bytes) each inside a mapping the driver had live, with its data, bus mastering on{}",
            self.moved,
            self.bytes,
            if self.refused > 0 { format!(", {} refused by the device", self.refused) } else { String::new() },
        ) + &if self.delayed > 0 {
            format!(", {} of them run on the device's own clock after their doorbell, each before the driver ended its mapping", self.delayed)
        } else {
            String::new()
        } + &if self.witnessed > 0 {
            format!(", behind the guest IOMMU each of the driver's {} mappings mapped for the device by QEMU and each it ended unmapped", self.witnessed)
        } else {
            String::new()
        }
    }
}

/// The oracle over every actor in console order; `servers` are the device servers' access
/// and DMA logs in attach order, `seqs` the accounting's match of each claim.
pub fn judge(
    walks: &[Walk<'_>],
    seqs: &ClaimSeqs,
    servers: &[(&[Access], &[DmaEvent])],
) -> Result<DmaFindings, String> {
    let mut events: BTreeMap<(usize, u64), &DmaEvent> = BTreeMap::new();
    for (s, (_, dma)) in servers.iter().enumerate() {
        for e in dma.iter() {
            if let DmaEvent::Dma { seq, .. } = e {
                events.insert((s, *seq), e);
            }
        }
    }
    let mut seen = 0;
    let mut f = DmaFindings::default();
    // The mappings of the last binding, while it has not ended (user space may point the
    // device at them).
    let mut open: BTreeMap<u64, Live> = BTreeMap::new();
    for (ai, walk) in walks.iter().enumerate() {
        let who = match walk.binding {
            Some(k) => format!("binding {k}"),
            None => "user space".to_string(),
        };
        if walk.binding.is_some() {
            open.clear();
        }
        let mut lines = walk.lines.iter().peekable();
        let mut start: Option<Line> = None;
        // The last DMA from the device not yet received: where, how long, the CRC written, and
        // whether probe started it.
        let mut last_from: Option<(u64, u32, u32, bool)> = None;
        let apply = |line: &Line,
                     open: &mut BTreeMap<u64, Live>,
                     start: &mut Option<Line>,
                     last_from: &mut Option<(u64, u32, u32, bool)>,
                     f: &mut DmaFindings|
         -> Result<(), String> {
            match line {
                Line::Map { id, kind, iova, len } => {
                    f.mappings += 1;
                    if open
                        .insert(*id, Live { kind: *kind, iova: *iova, len: *len })
                        .is_some()
                    {
                        return Err(format!("{who}: DMA mapping {id} mapped twice"));
                    }
                }
                Line::Unmap { id } => {
                    if open.remove(id).is_none() {
                        return Err(format!("{who}: DMA mapping {id} unmapped, but it was not mapped"));
                    }
                }
                Line::Start { .. } => *start = Some(line.clone()),
                Line::Received { iova, len, crc } => match last_from.take() {
                    Some((at, n, moved, _)) if (at, u64::from(n)) == (*iova, *len) => {
                        if moved != *crc {
                            return Err(format!(
                                "{who}: the driver received CRC {crc:#x} at {iova:#x}+{len:#x}, but the device wrote bytes of CRC {moved:#x}"
                            ));
                        }
                    }
                    _ => {
                        return Err(format!(
                            "{who}: the driver says it received {len:#x} bytes at {iova:#x}, but the device wrote none there just before"
                        ))
                    }
                },
            }
            Ok(())
        };
        for (i, c) in walk.claims.iter().enumerate() {
            while let Some((_, line)) = lines.next_if(|(pos, _)| *pos <= i) {
                apply(line, &mut open, &mut start, &mut last_from, &mut f)?;
            }
            if !is_doorbell(c) {
                continue;
            }
            let pending = start.take();
            let Some(Some(at)) = seqs.get(ai).and_then(|s| s.get(i)) else {
                // Unwitnessed (its server had died): no DMA reached a log.
                continue;
            };
            let Some(&event) = events.get(at) else {
                // Dropped before the engine (a device gone, a malformed or busy request).
                continue;
            };
            seen += 1;
            let DmaEvent::Dma {
                iova,
                len,
                dir,
                crc_only,
                outcome,
                crc,
                ..
            } = *event
            else {
                unreachable!("only DMA events are indexed")
            };
            let what = format!(
                "the device's DMA #{} ({} {iova:#x}+{len:#x}, {})",
                at.1,
                if crc_only {
                    "crc32".to_string()
                } else {
                    format!("{dir:?}")
                },
                serde_json::to_value(outcome)
                    .map_or(String::new(), |v| v.as_str().unwrap_or("").to_string())
            );
            if walk.binding.is_some() {
                match &pending {
                    Some(Line::Start { op, iova: si, len: sl, .. })
                        if op.opcode() == c.value && (*si, *sl) == (iova, u64::from(len)) => {}
                    Some(other) => {
                        return Err(format!(
                            "{who}: {what} is not the one the driver's start line announced ({other:?})"
                        ))
                    }
                    None => {
                        return Err(format!(
                            "{who}: {what} was started by the driver without a `# dma start` line"
                        ))
                    }
                }
            }
            if outcome == DmaOutcome::Denied {
                return Err(format!(
                    "{who}: {what}: the IOMMU's permissions refused it, the guest had mapped the memory for the other direction"
                ));
            }
            let end = iova + u64::from(len);
            let inside = open
                .values()
                .find(|m| iova >= m.iova && end <= m.iova + m.len);
            if let (DmaOutcome::Fault, Some(m)) = (outcome, inside) {
                // All of RAM is mapped for the device but behind an IOMMU, which maps exactly
                // what the guest has mapped: a range the driver had live at the doorbell that
                // faults when the device runs was unmapped in between.
                return Err(format!(
                    "{who}: {what}: the device found its range unmapped when it ran, though it lay in the driver's {:?} mapping {:#x}+{:#x} at the doorbell: the driver gave the buffer back before the device was done with it",
                    m.kind, m.iova, m.len
                ));
            }
            if outcome != DmaOutcome::Ok {
                f.refused += 1;
                continue;
            }
            let moved = crc.ok_or_else(|| format!("{what} moved data but logged no CRC"))?;
            match inside {
                Some(m) if m.kind.allows(dir) => {}
                Some(m) => {
                    return Err(format!(
                        "{who}: {what} went against its mapping's direction ({:?} at {:#x}+{:#x})",
                        m.kind, m.iova, m.len
                    ))
                }
                None => {
                    return Err(format!(
                        "{who}: {what} fell outside every mapping the driver had live then ({})",
                        if open.is_empty() {
                            "none: unmapped, freed, or its binding had ended".to_string()
                        } else {
                            open.values()
                                .map(|m| format!("{:?} {:#x}+{:#x}", m.kind, m.iova, m.len))
                                .collect::<Vec<_>>()
                                .join(", ")
                        }
                    ))
                }
            }
            if let Some(Line::Start {
                crc: Some(wrote), ..
            }) = pending
            {
                if wrote != moved {
                    return Err(format!(
                        "{who}: {what} read bytes of CRC {moved:#x}, the driver put bytes of CRC {wrote:#x} there"
                    ));
                }
            }
            if dir == DmaDirection::FromDevice {
                if let Some((at, n, _, true)) = last_from.filter(|_| walk.received) {
                    return Err(format!(
                        "{who}: the device wrote {n:#x} bytes at {at:#x} during probe and the driver, whose dma_from_device step passed, never said what it received"
                    ));
                }
                last_from = Some((iova, len, moved, i < walk.probe_claims));
            }
            let (log, _) = servers[at.0];
            if !bus_master_on(log, at.1) {
                return Err(format!(
                    "{who}: {what} moved data while the device's config space had bus mastering off"
                ));
            }
            f.moved += 1;
            f.bytes += u64::from(len);
        }
        for (_, line) in lines {
            apply(line, &mut open, &mut start, &mut last_from, &mut f)?;
        }
        if let Some((iova, len, _, true)) = last_from {
            if walk.received {
                return Err(format!(
                    "{who}: the device wrote {len:#x} bytes at {iova:#x} during probe and the driver, whose dma_from_device step passed, never said what it received"
                ));
            }
        }
        if walk.ended {
            open.clear();
        }
    }
    if seen != events.len() {
        return Err(format!(
            "the device made {} DMAs, {seen} of them started by a reported doorbell",
            events.len()
        ));
    }
    Ok(f)
}

/// Each DMA the device ran later than its doorbell (`dma_delay_us`) must have found its
/// mapping still live when it ran, not only at the doorbell: the device logs when it ran (after
/// every access numbered below `before`; during access `before` when a write `waited` for it),
/// and the accounting places each `# dma unmap` line among the driver's accesses. An unmap
/// printed before an access that came before the DMA ended the mapping under it, for certain;
/// one between the DMA's neighbouring accesses cannot be ordered against it and passes. Returns
/// how many DMAs ran after their doorbell.
pub fn ran_while_mapped(
    walks: &[Walk<'_>],
    seqs: &ClaimSeqs,
    servers: &[(&[Access], &[DmaEvent])],
) -> Result<usize, String> {
    let mut delayed = 0;
    for (ai, walk) in walks.iter().enumerate() {
        let Some(k) = walk.binding else { continue };
        let claim_seq = |i: usize| seqs.get(ai).and_then(|s| s.get(i)).copied().flatten();
        for (i, c) in walk.claims.iter().enumerate() {
            if !is_doorbell(c) {
                continue;
            }
            let Some((server, seq)) = claim_seq(i) else {
                continue;
            };
            let Some(&DmaEvent::Dma {
                before,
                waited,
                iova,
                len,
                outcome: DmaOutcome::Ok,
                ..
            }) = servers[server]
                .1
                .iter()
                .find(|e| matches!(e, DmaEvent::Dma { seq: s, .. } if *s == seq))
            else {
                continue;
            };
            if before <= seq {
                continue; // ran at its doorbell: `judge` held it to the mappings live then
            }
            delayed += 1;
            // The mapping holding the range at the doorbell, by the lines before it.
            let mut live: BTreeMap<u64, (u64, u64)> = BTreeMap::new();
            for (_, line) in walk.lines.iter().filter(|(pos, _)| *pos <= i) {
                match line {
                    Line::Map { id, iova, len, .. } => {
                        live.insert(*id, (*iova, *len));
                    }
                    Line::Unmap { id } => {
                        live.remove(id);
                    }
                    _ => {}
                }
            }
            let end = iova + u64::from(len);
            let Some((&id, _)) = live.iter().find(|(_, (m, n))| iova >= *m && end <= m + n) else {
                continue; // `judge` fails a DMA outside every mapping
            };
            let ended = walk
                .lines
                .iter()
                .find(|(pos, line)| *pos > i && matches!(line, Line::Unmap { id: u } if *u == id));
            let Some((pos, _)) = ended else { continue };
            let Some((s2, next)) = claim_seq(*pos) else {
                continue;
            };
            if s2 != server {
                continue;
            }
            if next < before || (next == before && waited) {
                return Err(format!(
                    "binding {k}: the device's DMA #{seq} ({iova:#x}+{len:#x}) ran after the driver ended mapping {id}: its `# dma unmap {id}` came before the driver's access #{next}, and the DMA ran {}: the driver gave the buffer back before the device was done with it",
                    if next < before {
                        format!("after that access (before access #{before})")
                    } else {
                        "while that write waited for it".to_string()
                    }
                ));
            }
        }
    }
    Ok(delayed)
}

/// A write of a DMA opcode to CMD.
fn is_doorbell(c: &Claimed) -> bool {
    c.kind == Kind::Write
        && c.region == "bar0"
        && c.offset == regmap::reg::CMD
        && [Op::ToDevice, Op::FromDevice, Op::Crc32]
            .iter()
            .any(|op| op.opcode() == c.value)
}

/// Bus Master Enable just before access `seq`, by the device's log of config writes (off at
/// power-on).
fn bus_master_on(log: &[Access], seq: u64) -> bool {
    let mut on = false;
    for a in log.iter().take_while(|a| a.seq < seq) {
        if a.region != Region::Config || a.kind != Kind::Write || a.offset > 4 {
            continue;
        }
        let at = 4 - a.offset;
        if at < u64::from(a.size) {
            if let Some(v) = a.value {
                on = (v >> (8 * at)) & 0x4 != 0;
            }
        }
    }
    on
}

#[cfg(test)]
#[path = "dma_tests.rs"]
mod tests;
