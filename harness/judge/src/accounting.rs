//! Holding the device's own access log against what the guest says it did:
//! every BAR access the device saw must be one the guest accounts for, and
//! every access the guest reports must be one the device saw.
//!
//! The guest accounts for an access in one of three ways (`driver::Actor`):
//! a user-space `# mmio` line (one access, exactly where it stands); a
//! driver `# mmio` line during probe (one access, exactly where it stands:
//! nothing else runs before the worker starts); and, from `probe_done` to
//! the binding's end, the worker's MAGIC reads, which it counts rather than
//! reports, between the driver's later `# mmio` lines (remove()'s). When the
//! binding ends the worker says how many reads it made (`worker_stopped
//! accesses=N`); a binding still open when the guest powered off may read
//! any number.
//!
//! A device server that a `die` fault stopped logged the access it died at
//! (which it never answered: QEMU gave the guest all-ones) and nothing
//! after. What the binding did after that is not in its log: its reports
//! are counted apart (`unwitnessed`; each read must have answered
//! all-ones), and the MMIO oracle, which sees every guest access, is their
//! witness.

use crate::device_log::{Access, Claimed, Class, Kind, Region};
use crate::driver::{Actor, Binding};
use qemu_device::model::FaultKind;

/// The register the worker reads.
const WORKER_READS: u64 = regmap::reg::MAGIC;

/// What the worker's read answers while the device is there (`MAGIC`'s value).
const MAGIC: u64 = regmap::MAGIC_VALUE as u64;

/// What a read of a device that is gone answers (the `all_ones` knob).
const ALL_ONES: u64 = 0xffff_ffff;

/// What the accounting matched.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct Accounted {
    pub bindings: usize,
    /// Driver `# mmio` lines, each matched to one device access.
    pub driver: usize,
    /// User-space `# mmio` lines, likewise.
    pub user: usize,
    /// Worker reads (counted ones and, for an open binding, the rest).
    pub worker: u64,
    /// Driver reports after its device server died (a `die` fault), which no
    /// device log holds (the MMIO oracle sees them).
    pub unwitnessed: usize,
    /// Each binding's probe in the device's log, in order.
    #[serde(skip)]
    pub probes: Vec<Probe>,
    /// The bindings that ended (their worker stopped), in order.
    #[serde(skip)]
    pub ended: Vec<Ended>,
    /// Per actor of the history, per report in console order: the device access it matched
    /// (server, seq), `None` for one made after its server died.
    #[serde(skip)]
    pub seqs: ClaimSeqs,
}

/// Per actor, per report: the device access the accounting matched it to (server, seq).
pub type ClaimSeqs = Vec<Vec<Option<(usize, u64)>>>;

/// The device access (server, seq) the accounting matched to report `index` (in console order)
/// of driver binding `binding` (from 1), if it reached a device's log.
pub fn binding_claim(
    history: &[Actor],
    seqs: &ClaimSeqs,
    binding: usize,
    index: usize,
) -> Option<(usize, u64)> {
    let actor = history
        .iter()
        .enumerate()
        .filter(|(_, a)| matches!(a, Actor::Driver(_)))
        .nth(binding.checked_sub(1)?)?
        .0;
    seqs.get(actor)?.get(index).copied().flatten()
}

/// Where in the device's log a binding's probe ran: from its first access
/// to its last, on one server.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Probe {
    /// The binding's number (from 1).
    pub binding: usize,
    pub server: usize,
    pub first: u64,
    pub last: u64,
}

/// Where in the device's log a binding ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ended {
    /// The binding's number (from 1).
    pub binding: usize,
    /// The device server it used (index in attach order).
    pub server: usize,
    /// The number of its last BAR access in that server's log.
    pub last: u64,
}

/// Whether the device server died at `a` (a `die` fault struck it).
pub fn died_at(a: &Access) -> bool {
    a.fault == Some(FaultKind::Die)
}

/// Whether `c` reports `a`. An access the device died at was never answered: QEMU gave the
/// guest all-ones, so a read's report says so, whatever the device computed.
fn reports(c: &Claimed, a: &Access) -> bool {
    if died_at(a) && c.kind == Kind::Read {
        let value = Access {
            value: Some(c.value),
            ..a.clone()
        };
        c.value & ALL_ONES == ALL_ONES && c.is(&value)
    } else {
        c.is(a)
    }
}

/// A report after the device died: a read must have answered all-ones.
fn after_death(c: &Claimed, who: &str) -> Result<(), String> {
    if c.kind == Kind::Read && c.value & ALL_ONES != ALL_ONES {
        return Err(format!(
            "{who} reported {} after the device server died, which QEMU answers with all-ones",
            claimed(c)
        ));
    }
    Ok(())
}

/// Whether `a` is a read the worker makes.
fn is_worker_read(a: &Access) -> bool {
    a.kind == Kind::Read && a.region == Region::Bar0 && a.offset == WORKER_READS && a.size == 4
}

fn show(a: Option<&Access>) -> String {
    a.map_or("nothing more".into(), |a| {
        format!(
            "#{} {} {} 0x{:x} size {} value {}",
            a.seq,
            a.kind,
            a.region,
            a.offset,
            a.size,
            a.value.map_or("none".into(), |v| format!("0x{v:x}"))
        )
    })
}

fn claimed(c: &Claimed) -> String {
    format!(
        "{} {} 0x{:x} size {} value 0x{:x}",
        c.kind, c.region, c.offset, c.size, c.value
    )
}

/// The device's BAR accesses, consumed in order: one list per device
/// server (a hot-plug attaches a fresh one), in attach order.
struct Log<'a> {
    servers: Vec<Vec<&'a Access>>,
    server: usize,
    at: usize,
    /// Reports after the current server died.
    unwitnessed: usize,
}

impl<'a> Log<'a> {
    /// The next access of the current server.
    fn peek(&self) -> Option<&'a Access> {
        self.servers.get(self.server)?.get(self.at).copied()
    }

    /// Moves on to the next server once this one's accesses are all used:
    /// a binding's accesses never span two servers, but the next actor may
    /// be on the next one. Not past a server that died: what the actor does
    /// after that reaches no server.
    fn next_server_if_done(&mut self) {
        while self.server + 1 < self.servers.len() && self.peek().is_none() && !self.dead() {
            self.server += 1;
            self.at = 0;
        }
    }

    /// A new actor begins: on the next server once this one's accesses are
    /// all used, also one that died.
    fn next_actor(&mut self) {
        while self.server + 1 < self.servers.len() && self.peek().is_none() {
            self.server += 1;
            self.at = 0;
        }
    }

    /// Every access of the current server is used, and it died at its last.
    fn dead(&self) -> bool {
        let log = &self.servers[self.server];
        self.at == log.len() && log.last().is_some_and(|a| died_at(a))
    }

    /// The accesses not used yet.
    fn left(&self) -> usize {
        self.servers
            .iter()
            .enumerate()
            .skip(self.server)
            .map(|(i, s)| s.len() - if i == self.server { self.at } else { 0 })
            .sum()
    }

    /// The next access must be `c`; which one it was (server, seq), if it reached a log.
    fn exact(&mut self, c: &Claimed, who: &str) -> Result<Option<(usize, u64)>, String> {
        self.next_server_if_done();
        if self.dead() {
            self.unwitnessed += 1;
            return after_death(c, who).map(|()| None);
        }
        match self.peek() {
            Some(a) if reports(c, a) => {
                self.at += 1;
                Ok(Some((self.server, a.seq)))
            }
            other => Err(format!(
                "{who} reported {}, but the device's next access was {}",
                claimed(c),
                show(other)
            )),
        }
    }

    /// From `probe_done` to the binding's end: the driver's later claims in
    /// order, with the worker's reads between them; exactly the reads it
    /// counted when the binding ended, any number (up to the end of this
    /// server's log) when not.
    fn worker_tail(
        &mut self,
        b: &Binding,
        k: usize,
        seqs: &mut Vec<Option<(usize, u64)>>,
    ) -> Result<u64, String> {
        let mut claims = b.later_claims.iter().peekable();
        let mut reads = 0;
        let mut last_read = None;
        loop {
            let done = claims.peek().is_none() && b.worker_reads.is_some_and(|n| reads == n);
            if done {
                break;
            }
            let Some(a) = self.peek() else { break };
            if claims.peek().is_some_and(|c| reports(c, a)) {
                claims.next();
                seqs.push(Some((self.server, a.seq)));
            } else if is_worker_read(a) && b.worker_reads.is_none_or(|n| reads < n) {
                // The worker stops at its first all-ones read: every read
                // before it answered MAGIC. A hung device's all-ones (its
                // config space still answers) it waits out, and reads again.
                if last_read == Some((ALL_ONES, false))
                    || !matches!(a.value, Some(MAGIC) | Some(ALL_ONES))
                {
                    return Err(format!(
                        "binding {k}: the worker's read {} follows an all-ones read or answered neither MAGIC nor all-ones",
                        show(Some(a))
                    ));
                }
                last_read = a.value.map(|v| (v, a.class == Class::Hung));
                reads += 1;
            } else {
                // The device's access is the report after the next: the next one never
                // reached it.
                let mut ahead = claims.clone();
                if let (Some(c), Some(after)) = (ahead.next(), ahead.next()) {
                    if reports(after, a) {
                        return Err(format!(
                            "binding {k}: the driver reported {}, which the device never saw (its next access, {}, is the report after it)",
                            claimed(c),
                            show(Some(a))
                        ));
                    }
                }
                return Err(format!(
                    "binding {k}: the device saw {}, which is neither the driver's next report ({}) nor a worker read it counted ({reads} of {})",
                    show(Some(a)),
                    claims.peek().map_or("none left".into(), |c| claimed(c)),
                    b.worker_reads.map_or("any".into(), |n| n.to_string())
                ));
            }
            self.at += 1;
        }
        if self.dead() {
            // The rest happened after the server died: the reports are
            // counted apart, and the worker's last reads (all-ones, from
            // QEMU) reached no log.
            for c in claims {
                self.unwitnessed += 1;
                seqs.push(None);
                after_death(c, &format!("binding {k}: the driver"))?;
            }
            return Ok(reads);
        }
        if let Some(c) = claims.next() {
            return Err(format!(
                "binding {k}: the driver reported {}, which the device never saw",
                claimed(c)
            ));
        }
        match b.worker_reads {
            Some(n) if reads != n => {
                return Err(format!(
                    "binding {k}: the worker counted {n} MAGIC reads, the device saw {reads}"
                ))
            }
            Some(_) => {}
            None => return Ok(reads),
        }
        // Why it stopped, by the device's own answer to its last read.
        match (b.worker_gone, last_read == Some((ALL_ONES, false))) {
            (true, false) if last_read == Some((ALL_ONES, true)) => Err(format!(
                "binding {k}: the worker said the device was gone (reason=Gone), but its last read was answered all-ones by a hung device whose config space still answered: a hang taken for a removal"
            )),
            (true, false) => Err(format!(
                "binding {k}: the worker said the device was gone (reason=Gone), but its last read in the device's log answered {}",
                last_read.map_or("nothing (no read)".into(), |(v, _)| format!("0x{v:x}"))
            )),
            (false, true) => Err(format!(
                "binding {k}: the device answered the worker's last read with all-ones, but the worker did not say it was gone"
            )),
            _ => Ok(reads),
        }
    }
}

/// Matches `history` against the device servers' access logs, in attach
/// order (config space aside).
pub fn account(history: &[Actor], servers: &[&[Access]]) -> Result<Accounted, String> {
    let mut log = Log {
        servers: servers
            .iter()
            .map(|l| l.iter().filter(|a| a.region != Region::Config).collect())
            .collect(),
        server: 0,
        at: 0,
        unwitnessed: 0,
    };
    let mut n = Accounted::default();
    let mut open = None;
    for actor in history {
        if let Some(k) = open {
            return Err(format!(
                "binding {k}'s worker never reported stopping, yet the device was used after it"
            ));
        }
        match actor {
            Actor::User(c) => {
                log.next_actor();
                n.user += 1;
                let seq = log.exact(c, &format!("user space (access {})", n.user))?;
                n.seqs.push(vec![seq]);
            }
            Actor::Driver(b) => {
                log.next_actor();
                n.bindings += 1;
                let k = n.bindings;
                let (server, from) = (log.server, log.at);
                if b.probe_claims.is_empty() {
                    return Err(format!(
                        "binding {k}: the driver reported no MMIO access during probe"
                    ));
                }
                let mut seqs = Vec::new();
                for (i, c) in b.probe_claims.iter().enumerate() {
                    seqs.push(log.exact(
                        c,
                        &format!("binding {k}: the driver's probe (access {})", i + 1),
                    )?);
                }
                if log.server != server || log.at == from {
                    return Err(format!(
                        "binding {k}: its probe's accesses span two device servers, or none reached one"
                    ));
                }
                let matched = &log.servers[log.server][from..log.at];
                n.probes.push(Probe {
                    binding: k,
                    server: log.server,
                    first: matched[0].seq,
                    last: matched[matched.len() - 1].seq,
                });
                n.driver += b.probe_claims.len() + b.later_claims.len();
                if b.probed {
                    n.worker += log.worker_tail(b, k, &mut seqs)?;
                    if b.worker_reads.is_none() {
                        open = Some(k);
                    } else if let Some(last) =
                        log.at.checked_sub(1).map(|i| log.servers[log.server][i])
                    {
                        n.ended.push(Ended {
                            binding: k,
                            server: log.server,
                            last: last.seq,
                        });
                    }
                } else if !b.later_claims.is_empty() {
                    return Err(format!(
                        "binding {k}: the driver reported accesses after a failed probe"
                    ));
                }
                n.seqs.push(seqs);
            }
        }
    }
    n.unwitnessed = log.unwitnessed;
    let left = log.left();
    if left > 0 {
        return Err(format!(
            "the device saw {left} access{} nothing the guest reported accounts for (after every binding ended), the first: {}",
            if left == 1 { "" } else { "es" },
            show(log.peek())
        ));
    }
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::driver::history;
    use qemu_device::model::FaultKind;

    fn access(seq: u64, region: &str, offset: u64, value: u64, kind: &str) -> Access {
        crate::device_log::test_access(seq, region, offset, 4, value, kind)
    }

    /// A log from (region, offset, value, kind), numbered in order.
    fn log(entries: &[(&str, u64, u64, &str)]) -> Vec<Access> {
        entries
            .iter()
            .enumerate()
            .map(|(i, &(r, o, v, k))| access(i as u64 + 1, r, o, v, k))
            .collect()
    }

    fn lines(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    const MAGIC: (&str, u64, u64, &str) = ("bar0", 0, 0x7072_6967, "read");

    /// Two bindings, each unbound: the worker read MAGIC twice, then once;
    /// remove() wrote RESET.
    const REBIND: &[&str] = &[
        "pci_rig 0000:01:00.0: event probe_begin",
        "pci_rig 0000:01:00.0: # mmio r bar0 0x0 4 0x70726967",
        "pci_rig 0000:01:00.0: # mmio w bar0 0x8 4 0x5",
        "pci_rig 0000:01:00.0: event probe_done",
        "pci_rig 0000:01:00.0: event remove_begin",
        "pci_rig 0000:01:00.0: # mmio w bar0 0x50 4 0x1",
        "pci_rig 0000:01:00.0: event remove_done",
        "pci_rig 0000:01:00.0: event worker_stopped reason=Refused accesses=2",
        "pci_rig 0000:01:00.0: event probe_begin",
        "pci_rig 0000:01:00.0: # mmio r bar0 0x0 4 0x70726967",
        "pci_rig 0000:01:00.0: event probe_done",
        "pci_rig 0000:01:00.0: event remove_begin",
        "pci_rig 0000:01:00.0: # mmio w bar0 0x50 4 0x1",
        "pci_rig 0000:01:00.0: event remove_done",
        "pci_rig 0000:01:00.0: event worker_stopped reason=Refused accesses=1",
    ];

    fn rebind_log() -> Vec<Access> {
        log(&[
            ("config", 4, 6, "write"),
            MAGIC,
            ("bar0", 8, 5, "write"),
            MAGIC,
            ("bar0", 0x50, 1, "write"),
            MAGIC,
            MAGIC,
            MAGIC,
            ("bar0", 0x50, 1, "write"),
        ])
    }

    fn check(console: &[&str], log: &[Access]) -> Result<Accounted, String> {
        account(&history(&lines(console))?, &[log])
    }

    /// A probe refused after its device server died at its second access (a
    /// `die` fault), then a binding on the fresh device plugged in after it.
    const DIED: &[&str] = &[
        "pci_rig 0000:01:00.0: event probe_begin",
        "pci_rig 0000:01:00.0: # mmio r bar0 0x0 4 0x70726967",
        "pci_rig 0000:01:00.0: # mmio w bar0 0x8 4 0x5",
        "pci_rig 0000:01:00.0: # mmio r bar0 0x8 4 0xffffffff",
        "pci_rig 0000:01:00.0: step scratch FAIL wrote=0x5 read=0xffffffff",
        "pci_rig 0000:01:00.0: event probe_begin",
        "pci_rig 0000:01:00.0: # mmio r bar0 0x0 4 0x70726967",
        "pci_rig 0000:01:00.0: event probe_done",
        "pci_rig 0000:01:00.0: event remove_begin",
        "pci_rig 0000:01:00.0: # mmio w bar0 0x50 4 0x1",
        "pci_rig 0000:01:00.0: event remove_done",
        "pci_rig 0000:01:00.0: event worker_stopped reason=Refused accesses=0",
    ];

    fn died_logs() -> (Vec<Access>, Vec<Access>) {
        let mut first = log(&[MAGIC, ("bar0", 8, 5, "write")]);
        first[1].fault = Some(FaultKind::Die);
        (first, log(&[MAGIC, ("bar0", 0x50, 1, "write")]))
    }

    #[test]
    fn what_a_binding_did_after_its_device_died_is_counted_apart() {
        let (first, second) = died_logs();
        let n = account(&history(&lines(DIED)).unwrap(), &[&first, &second]).unwrap();
        assert_eq!((n.bindings, n.unwitnessed, n.driver), (2, 1, 5));
        assert_eq!((n.probes[0].server, n.probes[1].server), (0, 1));
        // A read after the death that answered anything but all-ones is a lie.
        let lie: Vec<String> = lines(DIED)
            .into_iter()
            .map(|l| l.replace("r bar0 0x8 4 0xffffffff", "r bar0 0x8 4 0x5"))
            .collect();
        let e = account(&history(&lie).unwrap(), &[&first, &second]).unwrap_err();
        assert!(e.contains("after the device server died"), "{e}");
        // The access it died at, read: QEMU answered all-ones, whatever the device computed.
        let mut read_died = log(&[MAGIC]);
        read_died[0].fault = Some(FaultKind::Die);
        let one = [
            "pci_rig 0000:01:00.0: event probe_begin",
            "pci_rig 0000:01:00.0: # mmio r bar0 0x0 4 0xffffffff",
            "pci_rig 0000:01:00.0: step identify FAIL magic 0xffffffff",
        ];
        let n = check(&one, &read_died).unwrap();
        assert_eq!(n.unwitnessed, 0);
        let claimed_magic = [
            "pci_rig 0000:01:00.0: event probe_begin",
            "pci_rig 0000:01:00.0: # mmio r bar0 0x0 4 0x70726967",
            "pci_rig 0000:01:00.0: step identify ok magic=0x70726967",
        ];
        assert!(
            check(&claimed_magic, &read_died).is_err(),
            "the guest never got the device's answer"
        );
        // Without the die mark, the same log is one access short.
        let (mut first, second) = died_logs();
        first[1].fault = None;
        let e = account(&history(&lines(DIED)).unwrap(), &[&first, &second]).unwrap_err();
        assert!(e.contains("the device's next access was"), "{e}");
    }

    #[test]
    fn gone_is_backed_by_the_devices_own_answers() {
        // One binding whose worker read MAGIC, then all-ones, and said Gone.
        let gone: Vec<String> = REBIND[..8]
            .iter()
            .map(|l| l.replace("reason=Refused", "reason=Gone"))
            .collect();
        let gone: Vec<&str> = gone.iter().map(String::as_str).collect();
        let ones: (&str, u64, u64, &str) = ("bar0", 0, 0xffff_ffff, "read");
        let base = [("config", 4, 6, "write"), MAGIC, ("bar0", 8, 5, "write")];
        let with = |tail: &[(&str, u64, u64, &str)]| {
            let mut l = base.to_vec();
            l.extend_from_slice(tail);
            log(&l)
        };
        let write_reset = ("bar0", 0x50, 1, "write");
        assert_eq!(
            check(&gone, &with(&[MAGIC, ones, write_reset]))
                .unwrap()
                .worker,
            2
        );
        // The worker's word without the device's all-ones answer.
        let e = check(&gone, &with(&[MAGIC, MAGIC, write_reset])).unwrap_err();
        assert!(e.contains("said the device was gone (reason=Gone), but its last read in the device's log answered 0x70726967"), "{e}");
        // All-ones, and the worker said it was refused instead.
        let e = check(&REBIND[..8], &with(&[MAGIC, ones, write_reset])).unwrap_err();
        assert!(
            e.contains("all-ones, but the worker did not say it was gone"),
            "{e}"
        );
        // A read after all-ones: the worker did not stop at it.
        let e = check(&gone, &with(&[ones, ones, write_reset])).unwrap_err();
        assert!(e.contains("follows an all-ones read"), "{e}");
        // Neither MAGIC nor all-ones.
        let e = check(
            &gone,
            &with(&[("bar0", 0, 0x1234, "read"), ones, write_reset]),
        )
        .unwrap_err();
        assert!(e.contains("answered neither MAGIC nor all-ones"), "{e}");
    }

    #[test]
    fn a_hung_devices_all_ones_is_waited_out_not_taken_for_a_removal() {
        // Binding 1's worker: MAGIC, all-ones from a hung device, MAGIC again after its reset.
        let hung = |l: &mut Vec<Access>, at: usize| l[at].class = Class::Hung;
        let ones = ("bar0", 0, 0xffff_ffff, "read");
        let base = [("config", 4, 6, "write"), MAGIC, ("bar0", 8, 5, "write")];
        let with = |tail: &[(&str, u64, u64, &str)]| {
            let mut l = base.to_vec();
            l.extend_from_slice(tail);
            l.push(("bar0", 0x50, 1, "write"));
            log(&l)
        };
        let console = |accesses: u32, reason: &str| -> Vec<String> {
            REBIND[..7]
                .iter()
                .map(|l| l.to_string())
                .chain([format!(
                    "pci_rig 0000:01:00.0: event worker_stopped reason={reason} accesses={accesses}"
                )])
                .collect()
        };
        let judge = |c: &[String], l: &[Access]| {
            let c: Vec<&str> = c.iter().map(String::as_str).collect();
            check(&c, l)
        };
        let mut waited = with(&[ones, MAGIC]);
        hung(&mut waited, 3);
        assert_eq!(judge(&console(2, "Refused"), &waited).unwrap().worker, 2);
        // The same answers from a removed device: the worker read on after all-ones.
        let e = judge(&console(2, "Refused"), &with(&[ones, MAGIC])).unwrap_err();
        assert!(e.contains("follows an all-ones read"), "{e}");
        // A hang the worker took for a removal.
        let mut taken = with(&[ones]);
        hung(&mut taken, 3);
        let e = judge(&console(1, "Gone"), &taken).unwrap_err();
        assert!(e.contains("a hang taken for a removal"), "{e}");
    }

    #[test]
    fn every_binding_is_accounted_for() {
        let n = check(REBIND, &rebind_log()).unwrap();
        assert_eq!(
            n,
            Accounted {
                bindings: 2,
                driver: 5,
                user: 0,
                worker: 3,
                unwitnessed: 0,
                probes: vec![
                    Probe {
                        binding: 1,
                        server: 0,
                        first: 2,
                        last: 3
                    },
                    Probe {
                        binding: 2,
                        server: 0,
                        first: 7,
                        last: 7
                    }
                ],
                ended: vec![
                    Ended {
                        binding: 1,
                        server: 0,
                        last: 6
                    },
                    Ended {
                        binding: 2,
                        server: 0,
                        last: 9
                    }
                ],
                // Each binding's reports, matched to the device's accesses.
                seqs: vec![
                    vec![Some((0, 2)), Some((0, 3)), Some((0, 5))],
                    vec![Some((0, 7)), Some((0, 9))],
                ],
            }
        );
    }

    #[test]
    fn probe_accesses_must_match_one_to_one() {
        // An extra access during probe (nobody reported it).
        let mut l = rebind_log();
        l.insert(2, access(99, "bar0", 0xc, 0, "read"));
        let e = check(REBIND, &l).unwrap_err();
        assert!(
            e.contains("binding 1: the driver's probe (access 2) reported write bar0 0x8")
                && e.contains("the device's next access was #99 read bar0 0xc"),
            "{e}"
        );
        // A reported access the device never saw, or saw with another value.
        let mut l = rebind_log();
        l.remove(2);
        assert!(check(REBIND, &l).unwrap_err().contains("access 2"));
        let mut l = rebind_log();
        l[2].value = Some(6);
        assert!(check(REBIND, &l).unwrap_err().contains("value 0x6"));
    }

    #[test]
    fn a_binding_with_no_claims_fails() {
        let e = check(
            &[
                "pci_rig 0000:01:00.0: event probe_begin",
                "pci_rig 0000:01:00.0: event probe_done",
            ],
            &[],
        )
        .unwrap_err();
        assert!(e.contains("reported no MMIO access during probe"), "{e}");
    }

    #[test]
    fn the_worker_reads_exactly_what_it_counted() {
        // One more MAGIC read between the bindings: late, or not the worker's.
        let mut l = rebind_log();
        l.insert(5, access(99, "bar0", 0, 0x7072_6967, "read"));
        let e = check(REBIND, &l).unwrap_err();
        assert!(e.contains("binding 2"), "{e}");
        // One fewer.
        let mut l = rebind_log();
        l.remove(5);
        assert!(check(REBIND, &l).is_err());
        // Anything else between the bindings.
        let mut l = rebind_log();
        l.insert(4, access(99, "bar0", 0x8, 0, "read"));
        let e = check(REBIND, &l).unwrap_err();
        assert!(
            e.contains("binding 1: the device saw #99 read bar0 0x8"),
            "{e}"
        );
    }

    #[test]
    fn an_open_binding_may_read_magic_but_nothing_else() {
        let console = &REBIND[..11];
        let mut l = rebind_log();
        l.pop();
        l.extend(log(&[MAGIC, MAGIC]));
        assert_eq!(check(console, &l).unwrap().worker, 5);
        l.push(access(99, "bar2", 0, 0, "read"));
        let e = check(console, &l).unwrap_err();
        assert!(e.contains("binding 2: the device saw #99 read bar2"), "{e}");
    }

    #[test]
    fn a_reported_access_the_device_never_saw_fails() {
        // A fake claim after probe (e.g. written to /dev/kmsg by user space).
        let mut console = REBIND.to_vec();
        console.insert(4, "pci_rig 0000:01:00.0: # mmio w bar0 0x8 4 0xdead");
        let e = check(&console, &rebind_log()).unwrap_err();
        assert!(
            e.contains("binding 1: the driver reported write bar0 0x8 size 4 value 0xdead, which the device never saw (its next access, #5 write bar0 0x50"),
            "{e}"
        );
        // Not the report after it either: the device's access is what is wrong.
        console.remove(6);
        let e = check(&console, &rebind_log()).unwrap_err();
        assert!(
            e.contains("binding 1: the device saw #5 write bar0 0x50")
                && e.contains("driver's next report (write bar0 0x8 size 4 value 0xdead)"),
            "{e}"
        );
    }

    #[test]
    fn a_fake_report_during_an_open_binding_fails() {
        // selftest-lie-mmio: user space writes a driver-format line to
        // /dev/kmsg while the worker runs.
        let mut console = REBIND[..11].to_vec();
        console.push("pci_rig 0000:01:00.0: # mmio w bar0 0x8 4 0xdeadbeef");
        let l = rebind_log()[..8].to_vec();
        let e = check(&console, &l).unwrap_err();
        assert!(
            e.contains("binding 2: the driver reported write bar0 0x8 size 4 value 0xdeadbeef, which the device never saw"),
            "{e}"
        );
    }

    #[test]
    fn accesses_after_the_last_binding_ended_fail() {
        let console = &REBIND[..8];
        let l = &rebind_log()[..6];
        assert!(check(console, l).is_ok());
        // After the unbind, user space touched the BAR without saying so.
        let mut late = l.to_vec();
        late.push(access(7, "bar0", 0, 0x7072_6967, "read"));
        let e = check(console, &late).unwrap_err();
        assert!(
            e.contains("the device saw 1 access nothing the guest reported accounts for"),
            "{e}"
        );
    }

    #[test]
    fn each_server_holds_its_own_bindings() {
        // Hot-plug: the first binding on the first server, the second on a
        // fresh one, open at poweroff.
        let console = &REBIND[..11];
        let first = rebind_log()[..6].to_vec();
        let second = log(&[MAGIC, MAGIC, MAGIC]);
        let n = account(&history(&lines(console)).unwrap(), &[&first, &second]).unwrap();
        assert_eq!((n.bindings, n.worker), (2, 4));
        // A late read on the first server is not the second binding's.
        let mut late = first.clone();
        late.push(access(99, "bar0", 0, 0x7072_6967, "read"));
        let second = log(&[MAGIC, ("bar0", 4, 0x10000, "read"), MAGIC]);
        let mut console = console.to_vec();
        console.insert(10, "pci_rig 0000:01:00.0: # mmio r bar0 0x4 4 0x10000");
        let h = history(&lines(&console)).unwrap();
        assert!(account(&h, &[&first, &second]).is_ok());
        let e = account(&h, &[&late, &second]).unwrap_err();
        assert!(
            e.contains("binding 2: the driver's probe (access 2)"),
            "{e}"
        );
    }

    #[test]
    fn user_space_accesses_match_one_to_one() {
        let console = [
            "# mmio r bar0 0x0 4 0x70726967",
            "# mmio w bar2 0x0 4 0x64636261",
        ];
        let l = log(&[MAGIC, ("bar2", 0, 0x6463_6261, "write")]);
        assert_eq!(check(&console, &l).unwrap().user, 2);
        // An access no line reports.
        let mut extra = l.clone();
        extra.insert(1, access(9, "bar0", 0xc, 0, "read"));
        let e = check(&console, &extra).unwrap_err();
        assert!(e.contains("user space (access 2)"), "{e}");
        let mut tail = l.clone();
        tail.push(access(9, "bar0", 0xc, 0, "read"));
        assert!(check(&console, &tail)
            .unwrap_err()
            .contains("1 access nothing"));
        // A reported access the device never saw.
        assert!(check(&console, &l[..1])
            .unwrap_err()
            .contains("nothing more"));
    }

    #[test]
    fn nothing_may_follow_a_binding_whose_worker_never_stopped() {
        let mut console = REBIND[..4].to_vec();
        console.push("# mmio r bar0 0x0 4 0x70726967");
        let l = log(&[MAGIC, ("bar0", 8, 5, "write"), MAGIC, MAGIC]);
        let e = check(&console, &l).unwrap_err();
        assert!(
            e.contains("binding 1's worker never reported stopping"),
            "{e}"
        );
    }
}
