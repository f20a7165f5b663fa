//! The removal-point sweep's plan: which device faults strike where. A point is a fault kind
//! and an access of our driver's: `vanish:12` strikes at probe's 12th device access (the
//! interrupt thread's accesses, which interleave with probe's, counted), `vanish:w1` at the
//! first write after probe, remove()'s RESET. The `sweep` scenario runs the points it is given
//! on `pcirig.points=` (`images/scenarios/sweep.sh`); `judge::sweep` judges each.

use crate::arch::Arch;
use qemu_device::model::FaultKind;
use std::fmt;

/// Device accesses of a clean probe of our driver (MSI), the interrupt thread's included: the
/// range the sweep's probe points cover. `judge::sweep` checks every clean binding made
/// exactly this many, so the sweep cannot silently miss accesses a changed driver adds;
/// `judge::sweep_table` lists them one by one, with what each point there may end in.
pub const PROBE_ACCESSES: u64 = 129;

/// The longest `pcirig.points=` the kernel prints whole in its `Kernel command line:` record
/// (a printk record holds about 1000 characters, the other arguments and the DMA core's
/// trace switches included), from which the judge reads the points back.
pub const CMDLINE_MAX: usize = 770;

/// The kinds swept (the chart's rows), one boot re-arming binding after binding: the device
/// comes back when cleared (`vanish`), was never gone (`error`; `aer`, which the host injects
/// at the root port when it sees the strike), or is plugged in afresh (`unplug`: the host
/// sends device_del when it sees the strike; `die`: the server is gone, the guest has it
/// unplugged).
pub const KINDS: [FaultKind; 5] = [
    FaultKind::Vanish,
    FaultKind::Error,
    FaultKind::Aer,
    FaultKind::Unplug,
    FaultKind::Die,
];

/// What a sweep scenario sweeps: its kinds, each with the points the default run draws of
/// it per arch.
pub type Sample = &'static [(FaultKind, usize)];

/// The `sweep` scenario's: every kind but `die` in each of probe's three phases
/// ([`PHASES`]) each run; a `die` point costs QEMU's 5 s wait, so `sweep-acpi`, whose ejects
/// take milliseconds, has it. 12 points took 26 s on x86_64 alone, as 6 had.
pub const SAMPLE: Sample = &[
    (FaultKind::Vanish, 3),
    (FaultKind::Error, 3),
    (FaultKind::Aer, 3),
    (FaultKind::Unplug, 3),
    (FaultKind::Die, 0),
];

/// Probe's first access of its DMA self-test (`dma_mask`'s DMA_BITS read):
/// `judge::sweep_table`'s tests hold it to the table.
pub const DMA_FROM: u64 = 81;

/// The phases a sample draws each kind's points from in turn: probe before its DMA
/// self-test, probe's DMA self-test, remove()'s RESET.
pub const PHASES: usize = 3;

fn phase(at: At) -> usize {
    match at {
        At::Probe(n) if n < DMA_FROM => 0,
        At::Probe(_) => 1,
        At::Write(_) => 2,
    }
}

/// The `sweep-acpi` scenario's (x86_64): the kinds that unplug, where acpiphp ejects within
/// milliseconds.
pub const SAMPLE_ACPI: Sample = &[(FaultKind::Unplug, 2), (FaultKind::Die, 1)];

/// Where in the driver's accesses a fault strikes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum At {
    /// Probe's N-th device access (from 1).
    Probe(u64),
    /// The N-th device write after probe bound: 1 is remove()'s RESET.
    Write(u64),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Point {
    pub kind: FaultKind,
    pub at: At,
}

impl fmt::Display for Point {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.at {
            At::Probe(n) => write!(f, "{}:{n}", self.kind),
            At::Write(n) => write!(f, "{}:w{n}", self.kind),
        }
    }
}

impl std::str::FromStr for Point {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let usage = "a point is KIND:N (probe's N-th access, 1 to 129) or KIND:wN (the N-th write after probe; w1 is remove()'s RESET)";
        let (kind, at) = s.split_once(':').ok_or_else(|| format!("`{s}`: {usage}"))?;
        let kind: FaultKind = kind.parse().map_err(|e| format!("`{s}`: {e}"))?;
        let (writes, n) = match at.strip_prefix('w') {
            Some(n) => (true, n),
            None => (false, at),
        };
        let n: u64 = n.parse().map_err(|_| format!("`{s}`: {usage}"))?;
        let at = match (writes, n) {
            (_, 0) => return Err(format!("`{s}`: accesses count from 1; {usage}")),
            (false, n) if n > PROBE_ACCESSES => {
                return Err(format!(
                    "`{s}`: probe makes {PROBE_ACCESSES} accesses; {usage}"
                ))
            }
            (false, n) => At::Probe(n),
            (true, n) => At::Write(n),
        };
        Ok(Point { kind, at })
    }
}

/// Which points a run sweeps.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Plan {
    /// `SAMPLE`'s points per arch drawn from `every()` with this seed (the default run).
    Sample(u64),
    /// Every point (`--sweep`).
    All,
    /// These points on every arch (`--sweep-point`).
    Points(Vec<Point>),
}

impl Plan {
    /// The points a scenario sweeping `sample`'s kinds runs on `arch`.
    pub fn points(&self, arch: Arch, sample: Sample) -> Vec<Point> {
        let ours = |p: &Point| sample.iter().any(|(k, _)| *k == p.kind);
        match self {
            Plan::All => every().into_iter().filter(ours).collect(),
            Plan::Points(p) => p.iter().copied().filter(ours).collect(),
            Plan::Sample(seed) => self::sample(*seed, arch, sample),
        }
    }

    /// How to run the same points again.
    pub fn replay(&self) -> String {
        match self {
            Plan::Sample(seed) => format!("--sweep-seed {seed}"),
            Plan::All => "--sweep".into(),
            Plan::Points(p) => p
                .iter()
                .map(|p| format!("--sweep-point {p}"))
                .collect::<Vec<_>>()
                .join(" "),
        }
    }
}

/// Every point: each kind at each of probe's accesses and at remove()'s RESET.
pub fn every() -> Vec<Point> {
    KINDS
        .iter()
        .flat_map(|&kind| {
            (1..=PROBE_ACCESSES)
                .map(At::Probe)
                .chain([At::Write(1)])
                .map(move |at| Point { kind, at })
        })
        .collect()
}

/// How deep `module-sweep` strikes into a foreign module's accesses by default: its probe,
/// whatever it makes, is not written down anywhere the rig can read.
pub const FOREIGN_DEPTH: u64 = 24;

/// `module-sweep`'s default points: a `vanish` and an `error` fault at each of a foreign
/// module's first [`FOREIGN_DEPTH`] accesses (its probe's, then its later ones').
pub fn foreign() -> Vec<Point> {
    [FaultKind::Vanish, FaultKind::Error]
        .iter()
        .flat_map(|&kind| {
            (1..=FOREIGN_DEPTH).map(move |n| Point {
                kind,
                at: At::Probe(n),
            })
        })
        .collect()
}

/// `sample`'s distinct points of `every()`, so many of each kind, in sweep order, drawn by
/// `seed` and the arch (so the arches of one run cover different points).
pub fn sample(seed: u64, arch: Arch, sample: Sample) -> Vec<Point> {
    let mut state = seed ^ (arch as u64 + 1).wrapping_mul(0xd6e8_feb8_6659_fd93);
    let mut picked = Vec::new();
    for &(kind, n) in sample {
        let all: Vec<Point> = every().into_iter().filter(|p| p.kind == kind).collect();
        for i in 0..n.min(all.len()) {
            // The i-th draw of a kind comes from phase i (in turn), so that a kind drawn
            // `PHASES` times strikes each phase once.
            let mut pool: Vec<Point> = all
                .iter()
                .copied()
                .filter(|p| phase(p.at) == i % PHASES && !picked.contains(p))
                .collect();
            if pool.is_empty() {
                continue;
            }
            // splitmix64: small, seedable, the same on every host, and well mixed from the
            // first draw even for small seeds.
            state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut r = state;
            r = (r ^ (r >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            r = (r ^ (r >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            r ^= r >> 31;
            picked.push(pool.swap_remove((r % pool.len() as u64) as usize));
        }
    }
    picked.sort();
    picked
}

/// What a sweep boot may take for `points`, beyond its scenario's own timeout: a bound per
/// point (two bindings; a lost interrupt's 1 s; an unplug's 5 s pciehp delay and replug; a
/// death's 5 s QEMU timeout on top), several times what they take.
pub fn budget(points: &[Point]) -> std::time::Duration {
    let secs: u64 = points
        .iter()
        .map(|p| match p.kind {
            FaultKind::Vanish | FaultKind::Error | FaultKind::Aer | FaultKind::Hang => 5,
            FaultKind::Unplug => 20,
            FaultKind::Die => 30,
        })
        .sum();
    std::time::Duration::from_secs(secs)
}

/// `pcirig.points=` for the guest's command line: runs of probe points of one kind written
/// `KIND:A-B`, so that every point fits riscv64's 1024-byte command line (and the kernel's
/// printed copy of it, which the judge reads).
pub fn cmdline(points: &[Point]) -> String {
    let mut items: Vec<String> = Vec::new();
    let mut run: Option<(FaultKind, u64, u64)> = None;
    let flush = |run: &mut Option<(FaultKind, u64, u64)>, items: &mut Vec<String>| {
        if let Some((kind, a, b)) = run.take() {
            items.push(if a == b {
                format!("{kind}:{a}")
            } else {
                format!("{kind}:{a}-{b}")
            });
        }
    };
    for p in points {
        match (p.at, &mut run) {
            (At::Probe(n), Some((kind, _, b))) if *kind == p.kind && *b + 1 == n => *b = n,
            (At::Probe(n), _) => {
                flush(&mut run, &mut items);
                run = Some((p.kind, n, n));
            }
            (At::Write(_), _) => {
                flush(&mut run, &mut items);
                items.push(p.to_string());
            }
        }
    }
    flush(&mut run, &mut items);
    format!("pcirig.points={}", items.join(","))
}

/// The points of a `pcirig.points=` value (`cmdline`'s runs expanded).
pub fn parse_list(list: &str) -> Result<Vec<Point>, String> {
    let mut points = Vec::new();
    for item in list.split(',').filter(|i| !i.is_empty()) {
        let range = item
            .split_once(':')
            .and_then(|(kind, at)| Some((kind, at.split_once('-')?)));
        match range {
            Some((kind, (a, b))) => {
                let first: Point = format!("{kind}:{a}").parse()?;
                let last: Point = format!("{kind}:{b}").parse()?;
                match (first.at, last.at) {
                    (At::Probe(a), At::Probe(b)) if a <= b => {
                        points.extend((a..=b).map(|n| Point {
                            kind: first.kind,
                            at: At::Probe(n),
                        }))
                    }
                    _ => {
                        return Err(format!(
                            "`{item}`: a run is KIND:A-B, A ≤ B, probe accesses"
                        ))
                    }
                }
            }
            None => points.push(item.parse()?),
        }
    }
    Ok(points)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn points_parse_and_print_alike() {
        for s in ["vanish:1", "error:129", "vanish:w1"] {
            assert_eq!(s.parse::<Point>().unwrap().to_string(), s);
        }
        for (bad, why) in [
            ("vanish", "KIND:N"),
            ("vanish:0", "count from 1"),
            ("vanish:130", "129 accesses"),
            ("vanish:x", "KIND:N"),
            ("melt:3", "no fault kind"),
        ] {
            let e = bad.parse::<Point>().unwrap_err();
            assert!(e.contains(why), "{bad}: {e}");
        }
    }

    #[test]
    fn a_sweeps_budget_grows_with_its_points_and_their_kinds() {
        let p = |s: &str| s.parse::<Point>().unwrap();
        assert_eq!(budget(&[]).as_secs(), 0);
        assert_eq!(
            budget(&[p("vanish:1"), p("unplug:2"), p("die:w1")]).as_secs(),
            55
        );
        assert_eq!(budget(&every()).as_secs(), 130 * (3 * 5 + 20 + 30));
    }

    #[test]
    fn every_point_is_each_kind_at_each_access_and_at_remove() {
        let all = every();
        assert_eq!(all.len(), KINDS.len() * (PROBE_ACCESSES as usize + 1));
        assert!(all.contains(&"error:w1".parse().unwrap()));
    }

    #[test]
    fn a_sample_is_seeded_distinct_and_differs_per_arch_and_seed() {
        let a = sample(7, Arch::X86_64, SAMPLE);
        assert_eq!(a, sample(7, Arch::X86_64, SAMPLE), "replayable");
        let size: usize = SAMPLE.iter().map(|(_, n)| n).sum();
        assert_eq!(a.len(), size);
        let mut d = a.clone();
        d.dedup();
        assert_eq!(d.len(), size, "distinct");
        for &(kind, n) in SAMPLE {
            assert_eq!(a.iter().filter(|p| p.kind == kind).count(), n, "{kind}");
        }
        let unplugs: Sample = &[(FaultKind::Unplug, 3)];
        let u = Plan::Sample(7).points(Arch::X86_64, unplugs);
        assert!(u.len() == 3 && u.iter().all(|p| p.kind == FaultKind::Unplug));
        assert_eq!(Plan::All.points(Arch::X86_64, unplugs).len(), 130);
        let asked = Plan::Points(vec![
            "vanish:1".parse().unwrap(),
            "unplug:2".parse().unwrap(),
        ]);
        assert_eq!(
            asked.points(Arch::X86_64, unplugs),
            ["unplug:2".parse().unwrap()]
        );
        assert_ne!(a, sample(7, Arch::Arm64, SAMPLE));
        assert_ne!(a, sample(8, Arch::X86_64, SAMPLE));
        assert_eq!(
            parse_list(cmdline(&a).strip_prefix("pcirig.points=").unwrap()),
            Ok(a)
        );
    }

    #[test]
    fn samples_spread_over_the_accesses() {
        // Over 1000 seeds, each of probe's 129 accesses is drawn for vanish (one before the
        // DMA self-test and one in it, a seed) at least once, and none more than 5 times as
        // often as an even spread.
        let mut hits = [0u32; PROBE_ACCESSES as usize + 1];
        for seed in 0..1000 {
            for p in sample(seed, Arch::X86_64, SAMPLE) {
                if let (FaultKind::Vanish, At::Probe(n)) = (p.kind, p.at) {
                    hits[n as usize - 1] += 1;
                }
            }
        }
        let even = 2000 / 129;
        assert!(
            hits[..129].iter().all(|&h| h >= 1 && h <= 5 * even),
            "{hits:?}"
        );
    }

    #[test]
    fn the_default_sample_strikes_every_kind_in_every_phase() {
        for seed in 0..50 {
            for arch in Arch::ALL {
                let points = sample(seed, arch, SAMPLE);
                for &(kind, n) in SAMPLE.iter().filter(|(_, n)| *n > 0) {
                    let mut phases: Vec<usize> = points
                        .iter()
                        .filter(|p| p.kind == kind)
                        .map(|p| phase(p.at))
                        .collect();
                    phases.sort();
                    assert_eq!(phases, (0..n).collect::<Vec<_>>(), "{kind:?}, seed {seed}");
                }
            }
        }
    }

    #[test]
    fn the_command_line_writes_runs_and_fits_riscv64s() {
        let all = every();
        let line = cmdline(&all);
        assert_eq!(
            line,
            "pcirig.points=vanish:1-129,vanish:w1,error:1-129,error:w1,aer:1-129,aer:w1,unplug:1-129,unplug:w1,die:1-129,die:w1"
        );
        assert_eq!(
            parse_list(line.strip_prefix("pcirig.points=").unwrap()),
            Ok(all)
        );
        let odd: Vec<Point> = ["vanish:3", "vanish:4", "vanish:6", "error:7"]
            .iter()
            .map(|p| p.parse().unwrap())
            .collect();
        assert_eq!(cmdline(&odd), "pcirig.points=vanish:3-4,vanish:6,error:7");
        for bad in ["vanish:5-3", "vanish:w1-w2", "vanish:1-130"] {
            assert!(parse_list(bad).is_err(), "{bad}");
        }
    }
}
