//! The probe's interrupt count, by the device alone: each IRQ_COUNT read in
//! a probe must answer exactly the number of INT_ACK writes the device saw
//! since its last RESET in that probe. The driver's `step irq_count`
//! compares IRQ_COUNT with its own handler's count; this holds the same
//! two numbers as the device logged them, so a handler that acknowledged
//! twice, or not at all, fails whatever the driver prints. And each ack by
//! value: every INT_ACK a binding wrote clears exactly the INT_STATUS bits
//! that binding read just before it, as the device logged both.

use crate::accounting::ClaimSeqs;
use crate::accounting::{Ended, Probe};
use crate::device_log::{Access, Class, Kind, Region};
use crate::driver::Actor;
use regmap::reg::{INT_ACK, INT_ENABLE, INT_STATUS, IRQ_COUNT, RESET};

/// Whether `a` is a BAR0 access of `kind` to register `offset`.
fn is(a: &Access, kind: Kind, offset: u64) -> bool {
    a.region == Region::Bar0 && a.kind == kind && a.offset == offset && a.size == 4
}

/// Checks every probe (`servers`: each device server's whole log, in attach
/// order); returns how many IRQ_COUNT reads were checked.
pub fn irq_count_is_acks(probes: &[Probe], servers: &[&[Access]]) -> Result<usize, String> {
    let mut checked = 0;
    for p in probes {
        let log = servers.get(p.server).copied().unwrap_or_default();
        // A probe an armed fault struck (or that met a vanished device) answers for what the
        // fault did, not for its count (the sweep judges it).
        let faulted = log.iter().any(|a| {
            (p.first..=p.last).contains(&a.seq)
                && (a.fault.is_some() || a.class == Class::Removed || a.class == Class::Hung)
        });
        if faulted {
            continue;
        }
        // Exact whatever the scheduling: each step waits for its interrupt's handler, which acks
        // before it tells the waiter, and no device raises interrupts of its own during a
        // probe (irq-unbind quiets its storm, waiting for the host's answer, first).
        let mut acks = 0u64;
        for a in log.iter().filter(|a| (p.first..=p.last).contains(&a.seq)) {
            if is(a, Kind::Write, RESET) && a.value == Some(u64::from(regmap::RESET_KEY)) {
                acks = 0;
            } else if is(a, Kind::Write, INT_ACK) && a.value.is_some_and(|v| v != 0) {
                acks += 1;
            } else if is(a, Kind::Read, IRQ_COUNT) {
                checked += 1;
                if a.value != Some(acks) {
                    return Err(format!(
                        "binding {}: the device's IRQ_COUNT read #{} answered {}, but the device saw {acks} INT_ACK writes since its last RESET: an interrupt was acknowledged other than once",
                        p.binding,
                        a.seq,
                        a.value.map_or("nothing".into(), |v| v.to_string())
                    ));
                }
            }
        }
    }
    Ok(checked)
}

/// Every INT_ACK write of a driver binding (`history`'s actors, `seqs` the accounting's match of
/// their reports to device accesses) must write exactly the value of the binding's last
/// INT_STATUS read before it, and each read is acknowledged at most once: a handler that acks
/// other bits than it read (a constant, a mask too wide or too narrow) leaves a source latched or
/// clears one it never saw. Both values are the device's own record. Returns the acks checked.
pub fn acks_are_status_read(
    history: &[Actor],
    seqs: &ClaimSeqs,
    servers: &[&[Access]],
) -> Result<usize, String> {
    let mut checked = 0;
    let mut binding = 0;
    for (actor, matched) in history.iter().zip(seqs) {
        let Actor::Driver(_) = actor else { continue };
        binding += 1;
        let mut mine: Vec<(usize, u64)> = matched.iter().flatten().copied().collect();
        mine.sort_unstable();
        // The INT_STATUS read not yet acknowledged, if any.
        let mut pending: Option<&Access> = None;
        for (server, seq) in mine {
            let log = servers.get(server).copied().unwrap_or_default();
            let Ok(i) = log.binary_search_by_key(&seq, |a| a.seq) else {
                continue;
            };
            let a = &log[i];
            if is(a, Kind::Read, INT_STATUS) {
                pending = Some(a);
            } else if is(a, Kind::Write, INT_ACK) {
                checked += 1;
                let wrote = a.value.unwrap_or_default();
                match pending.take() {
                    Some(r) if r.value == Some(wrote) => {}
                    Some(r) => {
                        return Err(format!(
                            "binding {binding}: INT_ACK write #{} wrote {wrote:#x}, but the INT_STATUS read #{} before it answered {:#x}: the handler acknowledged other bits than it read",
                            a.seq,
                            r.seq,
                            r.value.unwrap_or_default()
                        ))
                    }
                    None => {
                        return Err(format!(
                            "binding {binding}: INT_ACK write #{} wrote {wrote:#x} with no INT_STATUS read of its own since the last ack: it acknowledged bits it never read",
                            a.seq
                        ))
                    }
                }
            }
        }
    }
    Ok(checked)
}

/// Every binding that ended left the device's interrupt sources off: by the
/// device's log of that binding's span (its probe's first access to its last),
/// INT_ENABLE's last write was 0 or a RESET (which clears it) came after it. A
/// remove() that forgets to quiesce the device leaves it raising interrupts
/// (and running operations) after the binding, and its handler, are gone. A
/// RESET written to a device that is gone counts: the binding tried. Spans a
/// `die` fault cut short are not judged (the server logged nothing after).
/// Returns how many bindings were checked.
pub fn interrupts_off_at_end(
    probes: &[Probe],
    ended: &[Ended],
    servers: &[&[Access]],
) -> Result<usize, String> {
    let mut checked = 0;
    for e in ended {
        let Some(p) = probes.iter().find(|p| p.binding == e.binding) else {
            continue;
        };
        let log = servers.get(e.server).copied().unwrap_or_default();
        if log.last().is_some_and(crate::accounting::died_at) {
            continue;
        }
        // The last write that left sources enabled, if nothing turned them off after it.
        let mut enabled: Option<&Access> = None;
        for a in log.iter().filter(|a| (p.first..=e.last).contains(&a.seq)) {
            if is(a, Kind::Write, RESET) && a.value == Some(u64::from(regmap::RESET_KEY)) {
                enabled = None;
            } else if is(a, Kind::Write, INT_ENABLE) {
                enabled = a
                    .value
                    .filter(|v| *v & u64::from(regmap::INT_ALL) != 0)
                    .map(|_| a);
            }
        }
        if let Some(a) = enabled {
            return Err(format!(
                "binding {}: ended (its last access #{}) with interrupts enabled on the device (INT_ENABLE write #{} of {:#x}, no RESET or INT_ENABLE 0 after it): its remove() did not quiesce the device",
                e.binding,
                e.last,
                a.seq,
                a.value.unwrap_or_default()
            ));
        }
        checked += 1;
    }
    Ok(checked)
}

/// For each binding that ended, how many interrupts its handler
/// acknowledged after remove()'s RESET (its last RESET): those that came
/// while the binding ended (`irq_ignore_enable` keeps a device raising).
pub fn acks_after_reset(probes: &[Probe], ended: &[Ended], servers: &[&[Access]]) -> Vec<usize> {
    ended
        .iter()
        .filter_map(|e| {
            let p = probes.iter().find(|p| p.binding == e.binding)?;
            let log = servers.get(e.server).copied().unwrap_or_default();
            let span: Vec<&Access> = log
                .iter()
                .filter(|a| (p.first..=e.last).contains(&a.seq))
                .collect();
            let reset = span.iter().rposition(|a| {
                is(a, Kind::Write, RESET) && a.value == Some(u64::from(regmap::RESET_KEY))
            })?;
            Some(
                span[reset..]
                    .iter()
                    .filter(|a| is(a, Kind::Write, INT_ACK))
                    .count(),
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn access(seq: u64, kind: &str, offset: u64, value: u64) -> Access {
        crate::device_log::test_access(seq, "bar0", offset, 4, value, kind)
    }

    /// A probe: RESET, then `acks` interrupts acknowledged, then IRQ_COUNT
    /// read answering `count`.
    fn probe(acks: u64, count: u64) -> Vec<Access> {
        let mut l = vec![
            access(1, "write", INT_ACK, 4), // before the RESET: not counted
            access(2, "write", RESET, 1),
        ];
        for i in 0..acks {
            l.push(access(3 + 2 * i, "read", 0x30, 4));
            l.push(access(4 + 2 * i, "write", INT_ACK, 4));
        }
        l.push(access(3 + 2 * acks, "read", IRQ_COUNT, count));
        l
    }

    fn span(l: &[Access]) -> [Probe; 1] {
        [Probe {
            binding: 1,
            server: 0,
            first: 1,
            last: l.last().unwrap().seq,
        }]
    }

    #[test]
    fn irq_count_equal_to_the_acks_since_reset_passes() {
        let l = probe(10, 10);
        assert_eq!(irq_count_is_acks(&span(&l), &[&l]), Ok(1));
        // No IRQ_COUNT read (a probe refused before its irq step): nothing to check.
        let l = &probe(3, 3)[..4];
        assert_eq!(irq_count_is_acks(&span(l), &[l]), Ok(0));
    }

    #[test]
    fn a_probe_a_fault_struck_is_not_held_to_its_count() {
        let mut l = probe(10, 9);
        assert!(irq_count_is_acks(&span(&l), &[&l]).is_err());
        l[5].fault = Some(qemu_device::model::FaultKind::Error);
        assert_eq!(irq_count_is_acks(&span(&l), &[&l]), Ok(0));
        l[5].fault = None;
        l[5].class = Class::Removed;
        assert_eq!(irq_count_is_acks(&span(&l), &[&l]), Ok(0));
    }

    /// One driver binding whose reports matched every access of `l`.
    fn driver_of(l: &[Access]) -> (Vec<Actor>, ClaimSeqs) {
        let history = vec![Actor::Driver(Default::default())];
        (history, vec![l.iter().map(|a| Some((0, a.seq))).collect()])
    }

    #[test]
    fn each_ack_writes_the_status_it_read() {
        // The probe's reads at 0x30 are INT_STATUS, each answered 0x4 and acked 0x4.
        let l = probe(10, 10);
        let (h, seqs) = driver_of(&l[1..]);
        assert_eq!(acks_are_status_read(&h, &seqs, &[&l]), Ok(10));
        // An ack before any read of the binding's own fails.
        let (h, all) = driver_of(&l);
        assert!(acks_are_status_read(&h, &all, &[&l]).is_err());
        // User space's accesses are not the driver's: nothing checked.
        let user = vec![Actor::User(crate::device_log::Claimed {
            kind: Kind::Write,
            region: "bar0".into(),
            offset: INT_ACK,
            size: 4,
            value: 4,
        })];
        assert_eq!(acks_are_status_read(&user, &seqs, &[&l]), Ok(0));
    }

    #[test]
    fn an_ack_of_other_bits_than_read_fails() {
        // Read 0x4 (SOFT), acked 0x7 (every source): the lie a constant mask tells.
        let l = vec![
            access(1, "read", INT_STATUS, 4),
            access(2, "write", INT_ACK, 7),
        ];
        let (h, seqs) = driver_of(&l);
        let e = acks_are_status_read(&h, &seqs, &[&l]).unwrap_err();
        assert!(
            e.contains("binding 1: INT_ACK write #2 wrote 0x7, but the INT_STATUS read #1 before it answered 0x4"),
            "{e}"
        );
        // Acked twice for one read.
        let l = vec![
            access(1, "read", INT_STATUS, 4),
            access(2, "write", INT_ACK, 4),
            access(3, "write", INT_ACK, 4),
        ];
        let (h, seqs) = driver_of(&l);
        let e = acks_are_status_read(&h, &seqs, &[&l]).unwrap_err();
        assert!(
            e.contains("INT_ACK write #3 wrote 0x4 with no INT_STATUS read"),
            "{e}"
        );
        // The device's record decides, not the order of the reports.
        let l = vec![
            access(1, "read", INT_STATUS, 1),
            access(2, "write", INT_ACK, 1),
            access(3, "read", INT_STATUS, 4),
            access(4, "write", INT_ACK, 4),
        ];
        let (h, mut seqs) = driver_of(&l);
        seqs[0].reverse();
        assert_eq!(acks_are_status_read(&h, &seqs, &[&l]), Ok(2));
    }

    #[test]
    fn a_binding_must_end_with_the_devices_interrupts_off() {
        // Probe: RESET, INT_ENABLE 7, work; remove(): RESET.
        let mut l = vec![
            access(1, "write", RESET, 1),
            access(2, "write", INT_ENABLE, 7),
            access(3, "read", 0x30, 4),
            access(4, "write", RESET, 1),
        ];
        let probes = [Probe {
            binding: 1,
            server: 0,
            first: 1,
            last: 3,
        }];
        let ended = [Ended {
            binding: 1,
            server: 0,
            last: 4,
        }];
        assert_eq!(interrupts_off_at_end(&probes, &ended, &[&l]), Ok(1));
        // remove() without its RESET: the sources stay on.
        l.pop();
        let ended = [Ended {
            binding: 1,
            server: 0,
            last: 3,
        }];
        let e = interrupts_off_at_end(&probes, &ended, &[&l]).unwrap_err();
        assert!(
            e.contains("binding 1: ended (its last access #3) with interrupts enabled on the device (INT_ENABLE write #2 of 0x7"),
            "{e}"
        );
        // Turning them off by INT_ENABLE 0 is as good as a RESET.
        l.push(access(4, "write", INT_ENABLE, 0));
        let ended = [Ended {
            binding: 1,
            server: 0,
            last: 4,
        }];
        assert_eq!(interrupts_off_at_end(&probes, &ended, &[&l]), Ok(1));
        // A RESET with the wrong key resets nothing.
        l.pop();
        l.push(access(4, "write", RESET, 2));
        assert!(interrupts_off_at_end(&probes, &ended, &[&l]).is_err());
    }

    #[test]
    fn acks_after_removes_reset_are_counted_per_ended_binding() {
        // Probe (#1-#23), then remove()'s RESET (#24) and two more acks.
        let mut l = probe(10, 10);
        l.push(access(24, "write", RESET, 1));
        l.push(access(25, "write", INT_ACK, 4));
        l.push(access(26, "write", INT_ACK, 4));
        let probes = [Probe {
            binding: 1,
            server: 0,
            first: 1,
            last: 23,
        }];
        let ended = [Ended {
            binding: 1,
            server: 0,
            last: 26,
        }];
        assert_eq!(acks_after_reset(&probes, &ended, &[&l]), [2]);
        // Ended at the RESET: none after it.
        let ended = [Ended {
            binding: 1,
            server: 0,
            last: 24,
        }];
        assert_eq!(acks_after_reset(&probes, &ended, &[&l]), [0]);
    }

    #[test]
    fn a_missing_or_extra_ack_fails() {
        let l = probe(9, 10);
        let e = irq_count_is_acks(&span(&l), &[&l]).unwrap_err();
        assert!(
            e.contains("binding 1: the device's IRQ_COUNT read #21 answered 10, but the device saw 9 INT_ACK writes since its last RESET"),
            "{e}"
        );
        let l = probe(11, 10);
        assert!(irq_count_is_acks(&span(&l), &[&l]).is_err());
        // A zero write acknowledges nothing.
        let mut l = probe(10, 10);
        let read = l.pop().unwrap();
        l.push(access(read.seq, "write", INT_ACK, 0));
        l.push(access(read.seq + 1, "read", IRQ_COUNT, 11));
        assert!(irq_count_is_acks(&span(&l), &[&l]).is_err());
    }
}
