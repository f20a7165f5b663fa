//! The probe's interrupt count, by the device alone: each IRQ_COUNT read in
//! a probe must answer exactly the number of INT_ACK writes the device saw
//! since its last RESET in that probe. The driver's `step irq_count`
//! compares IRQ_COUNT with its own handler's count; this holds the same
//! two numbers as the device logged them, so a handler that acknowledged
//! twice, or not at all, fails whatever the driver prints.

use crate::guest::device::{Access, Class, Kind, Region};
use crate::judge::accounting::{Ended, Probe};
use regmap::reg::{INT_ACK, IRQ_COUNT, RESET};

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
            (p.first..=p.last).contains(&a.seq) && (a.fault.is_some() || a.class == Class::Removed)
        });
        if faulted {
            continue;
        }
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
        crate::judge::test_access(seq, "bar0", offset, 4, value, kind)
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
