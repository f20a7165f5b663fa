//! The `bench …` lines `pci_rig_bench` prints in the guest (see
//! `guest-kernel/bench/pci_rig_bench.rs`), read back into numbers: MMIO cost
//! four ways per device, BAR2 throughput, unbind cost per case, revoking
//! resources one grace period each, and DMA throughput and allocation cost.

use serde::Serialize;
use std::collections::BTreeMap;

/// Per-read medians of one device, in ns.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Mmio {
    pub device: String,
    pub reads: u64,
    /// (a) `Io` with no `Devres` check.
    pub raw_ns: i64,
    /// (b) `try_access` per read.
    pub devres_ns: i64,
    /// (c) one guard for the whole loop.
    pub guard_ns: i64,
    /// (d) `Devres::access` (the bound device at hand, no RCU) per read.
    pub access_ns: i64,
}

impl Mmio {
    /// b/a.
    pub fn devres_ratio(&self) -> f64 {
        self.devres_ns as f64 / self.raw_ns.max(1) as f64
    }

    /// c/a.
    pub fn guard_ratio(&self) -> f64 {
        self.guard_ns as f64 / self.raw_ns.max(1) as f64
    }

    /// d/a.
    pub fn access_ratio(&self) -> f64 {
        self.access_ns as f64 / self.raw_ns.max(1) as f64
    }
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Window {
    pub bytes: u64,
    pub ns: i64,
    pub kib_per_s: i64,
}

/// One unbind: `k` values tied with `Devres`, with or without a busy worker.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Unbind {
    pub k: u32,
    pub busy: bool,
    /// `remove()` itself.
    pub remove_ns: i64,
    /// `remove()`'s start to the release of the last `Devres`.
    pub total_ns: i64,
}

/// Revoking `k` revocables one by one, a grace period each.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RevokeEach {
    pub k: u32,
    pub ns: i64,
}

/// Our device's DMA engine moving `bytes` one way, against a CPU copy of as many (medians).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Dma {
    /// `to_device` or `from_device`.
    pub dir: String,
    pub bytes: u64,
    pub ns: i64,
    pub cpu_ns: i64,
}

impl Dma {
    /// KiB/s at the DMA's median.
    pub fn kib_per_s(&self) -> i64 {
        self.bytes as i64 * 1_000_000_000 / 1024 / self.ns.max(1)
    }
}

/// A coherent allocation and its free.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct DmaAlloc {
    pub bytes: u64,
    pub samples: u64,
    pub median_ns: i64,
}

/// Everything one boot of the `bench` scenario printed.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct GuestFigures {
    pub mmio: Vec<Mmio>,
    pub window: Option<Window>,
    pub unbind: Vec<Unbind>,
    pub revoke_each: Vec<RevokeEach>,
    pub irq: Option<IrqTrip>,
    pub dma: Vec<Dma>,
    pub dma_alloc: Option<DmaAlloc>,
}

/// Interrupt round trip on our device: INT_RAISE write to the hard handler.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct IrqTrip {
    /// `msi` or `intx`.
    pub mode: String,
    pub samples: u64,
    pub median_ns: i64,
    /// Raises whose interrupt never came (within 1 s).
    pub lost: u64,
}

/// The K values and devices the module covers; a boot missing one is incomplete.
pub const KS: [u32; 3] = [1, 16, 64];
pub const DEVICES: [&str; 2] = ["pci-testdev", "pci-rig"];
pub const DMA_DIRS: [&str; 2] = ["to_device", "from_device"];

/// `key=value` words after the kind.
fn fields(rest: &str) -> BTreeMap<&str, &str> {
    rest.split_whitespace()
        .filter_map(|w| w.split_once('='))
        .collect()
}

fn num<T: std::str::FromStr>(f: &BTreeMap<&str, &str>, key: &str, line: &str) -> Result<T, String> {
    f.get(key)
        .ok_or_else(|| format!("no {key}= in bench line: {line}"))?
        .parse()
        .map_err(|_| format!("{key}= is not a number in bench line: {line}"))
}

impl GuestFigures {
    /// Reads every `…: bench KIND key=value…` line (console lines, with or
    /// without printk timestamps). A bench line that does not parse is an
    /// error, not a silent gap.
    pub fn parse<S: AsRef<str>>(lines: &[S]) -> Result<Self, String> {
        let mut g = GuestFigures::default();
        for line in lines.iter().map(AsRef::as_ref) {
            let Some((_, figures)) = line.split_once(": bench ") else {
                continue;
            };
            let (kind, rest) = figures.split_once(' ').unwrap_or((figures, ""));
            let f = fields(rest);
            match kind {
                "mmio" => g.mmio.push(Mmio {
                    device: f
                        .get("dev")
                        .ok_or_else(|| format!("no dev= in bench line: {line}"))?
                        .to_string(),
                    reads: num(&f, "reads", line)?,
                    raw_ns: num(&f, "raw_ns", line)?,
                    devres_ns: num(&f, "devres_ns", line)?,
                    guard_ns: num(&f, "guard_ns", line)?,
                    access_ns: num(&f, "access_ns", line)?,
                }),
                "window" => {
                    g.window = Some(Window {
                        bytes: num(&f, "bytes", line)?,
                        ns: num(&f, "ns", line)?,
                        kib_per_s: num(&f, "kib_per_s", line)?,
                    })
                }
                "unbind" => g.unbind.push(Unbind {
                    k: num(&f, "k", line)?,
                    busy: match f.get("worker") {
                        Some(&"busy") => true,
                        Some(&"idle") => false,
                        _ => return Err(format!("worker= is not busy|idle in: {line}")),
                    },
                    remove_ns: num(&f, "remove_ns", line)?,
                    total_ns: num(&f, "total_ns", line)?,
                }),
                "revoke_each" => g.revoke_each.push(RevokeEach {
                    k: num(&f, "k", line)?,
                    ns: num(&f, "ns", line)?,
                }),
                "irq" => {
                    g.irq = Some(IrqTrip {
                        mode: f
                            .get("mode")
                            .ok_or_else(|| format!("no mode= in bench line: {line}"))?
                            .to_string(),
                        samples: num(&f, "samples", line)?,
                        median_ns: num(&f, "median_ns", line)?,
                        lost: num(&f, "lost", line)?,
                    })
                }
                "dma" => g.dma.push(Dma {
                    dir: f
                        .get("dir")
                        .ok_or_else(|| format!("no dir= in bench line: {line}"))?
                        .to_string(),
                    bytes: num(&f, "bytes", line)?,
                    ns: num(&f, "ns", line)?,
                    cpu_ns: num(&f, "cpu_ns", line)?,
                }),
                "dma_alloc" => {
                    g.dma_alloc = Some(DmaAlloc {
                        bytes: num(&f, "bytes", line)?,
                        samples: num(&f, "samples", line)?,
                        median_ns: num(&f, "median_ns", line)?,
                    })
                }
                _ => return Err(format!("unknown bench line: {line}")),
            }
        }
        Ok(g)
    }

    /// Whether every figure the module promises is there: MMIO on both
    /// devices, the window, revoke-each and unbind (idle and busy) for every K.
    pub fn check_complete(&self) -> Result<(), String> {
        let mut missing = Vec::new();
        for d in DEVICES {
            if !self.mmio.iter().any(|m| m.device == d) {
                missing.push(format!("mmio dev={d}"));
            }
        }
        if self.window.is_none() {
            missing.push("window".into());
        }
        for dir in DMA_DIRS {
            if !self.dma.iter().any(|d| d.dir == dir) {
                missing.push(format!("dma dir={dir}"));
            }
        }
        if self.dma_alloc.is_none() {
            missing.push("dma_alloc".into());
        }
        match &self.irq {
            None => missing.push("irq".into()),
            Some(t) if t.samples == 0 || t.lost > 0 => {
                return Err(format!(
                    "interrupt round trip ({}): {} samples, {} interrupts lost",
                    t.mode, t.samples, t.lost
                ))
            }
            Some(_) => {}
        }
        for k in KS {
            if !self.revoke_each.iter().any(|r| r.k == k) {
                missing.push(format!("revoke_each k={k}"));
            }
            for busy in [false, true] {
                if !self.unbind.iter().any(|u| u.k == k && u.busy == busy) {
                    missing.push(format!(
                        "unbind k={k} worker={}",
                        if busy { "busy" } else { "idle" }
                    ));
                }
            }
        }
        if missing.is_empty() {
            Ok(())
        } else {
            Err(format!("bench lines missing: {}", missing.join(", ")))
        }
    }

    /// One line for a verdict's note: the ratios and unbind medians.
    pub fn summary(&self) -> String {
        let mut parts: Vec<String> = self
            .mmio
            .iter()
            .map(|m| {
                format!(
                    "{} read {} ns raw, b/a {:.2}, c/a {:.2}, d/a {:.2}",
                    m.device,
                    m.raw_ns,
                    m.devres_ratio(),
                    m.guard_ratio(),
                    m.access_ratio()
                )
            })
            .collect();
        if let Some(t) = &self.irq {
            parts.push(format!(
                "irq round trip ({}) {:.1} µs",
                t.mode,
                t.median_ns as f64 / 1e3
            ));
        }
        for d in &self.dma {
            parts.push(format!(
                "DMA {} {} KiB/s ({:.0} µs for {} KiB; CPU copy {:.0} µs)",
                d.dir,
                d.kib_per_s(),
                d.ns as f64 / 1e3,
                d.bytes / 1024,
                d.cpu_ns as f64 / 1e3
            ));
        }
        if let Some(a) = &self.dma_alloc {
            parts.push(format!(
                "coherent alloc+free ({} B) {:.1} µs",
                a.bytes,
                a.median_ns as f64 / 1e3
            ));
        }
        for busy in [false, true] {
            let totals: Vec<String> = KS
                .iter()
                .filter_map(|&k| {
                    self.unbind_median(k, busy)
                        .map(|u| format!("{:.1}", u.1 as f64 / 1e6))
                })
                .collect();
            parts.push(format!(
                "unbind ({}) k={} ms: {}",
                if busy { "busy" } else { "idle" },
                KS.map(|k| k.to_string()).join("/"),
                totals.join("/")
            ));
        }
        parts.join("; ")
    }

    /// Medians of (remove_ns, total_ns) over the unbinds of one case.
    pub fn unbind_median(&self, k: u32, busy: bool) -> Option<(i64, i64)> {
        let case: Vec<&Unbind> = self
            .unbind
            .iter()
            .filter(|u| u.k == k && u.busy == busy)
            .collect();
        if case.is_empty() {
            return None;
        }
        let remove = median(case.iter().map(|u| u.remove_ns as f64).collect())?;
        let total = median(case.iter().map(|u| u.total_ns as f64).collect())?;
        Some((remove as i64, total as i64))
    }
}

/// The median (mean of the middle two for an even count), or `None` if empty.
pub fn median(mut v: Vec<f64>) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    Some(if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const BOOT: &[&str] = &[
        "[    1.4] pci_rig_bench 0000:00:02.0: bench mmio dev=pci-testdev reads=3232 raw_ns=222 devres_ns=227 guard_ns=222 access_ns=223",
        "[    2.2] pci_rig_bench 0000:01:00.0: bench mmio dev=pci-rig reads=3232 raw_ns=74352 devres_ns=75965 guard_ns=74429 access_ns=74360",
        "pci_rig_bench 0000:01:00.0: bench window bytes=65536 ns=949869281 kib_per_s=67",
        "pci_rig_bench 0000:01:00.0: bench irq mode=msi samples=101 median_ns=41000 lost=0",
        "pci_rig_bench 0000:01:00.0: bench dma dir=to_device bytes=65536 ns=2000000 cpu_ns=50000",
        "pci_rig_bench 0000:01:00.0: bench dma dir=from_device bytes=65536 ns=4000000 cpu_ns=60000",
        "pci_rig_bench 0000:01:00.0: bench dma_alloc bytes=4096 samples=101 median_ns=3500",
        "pci_rig_bench 0000:01:00.0: bench revoke_each k=1 ns=10598078",
        "pci_rig_bench 0000:01:00.0: bench revoke_each k=16 ns=210987610",
        "pci_rig_bench 0000:01:00.0: bench revoke_each k=64 ns=847325969",
        "pci_rig_bench: bench unbind k=1 worker=idle remove_ns=10716 total_ns=14509113",
        "pci_rig_bench: bench unbind k=16 worker=idle remove_ns=1462 total_ns=8865104",
        "pci_rig_bench: bench unbind k=64 worker=idle remove_ns=1151 total_ns=19809974",
        "pci_rig_bench: bench unbind k=1 worker=busy remove_ns=284832 total_ns=18681091",
        "pci_rig_bench: bench unbind k=16 worker=busy remove_ns=132206 total_ns=19614125",
        "pci_rig_bench: bench unbind k=64 worker=busy remove_ns=92387 total_ns=13140478",
        "pci_rig_bench: bench unbind k=1 worker=idle remove_ns=1322 total_ns=8503500",
        "some other line",
    ];

    #[test]
    fn a_whole_boot_parses_and_is_complete() {
        let g = GuestFigures::parse(BOOT).unwrap();
        assert_eq!(g.mmio.len(), 2);
        assert_eq!(g.mmio[0].device, "pci-testdev");
        assert!((g.mmio[0].devres_ratio() - 227.0 / 222.0).abs() < 1e-9);
        assert_eq!(g.mmio[0].guard_ratio(), 1.0);
        assert!((g.mmio[0].access_ratio() - 223.0 / 222.0).abs() < 1e-9);
        assert_eq!(g.window.as_ref().unwrap().kib_per_s, 67);
        assert_eq!(g.unbind.len(), 7);
        assert_eq!(
            g.revoke_each[2],
            RevokeEach {
                k: 64,
                ns: 847325969
            }
        );
        g.check_complete().unwrap();
        // k=1 idle ran twice: 10716/14509113 and 1322/8503500.
        assert_eq!(g.unbind_median(1, false), Some((6019, 11506306)));
        assert_eq!(g.unbind_median(64, true), Some((92387, 13140478)));
        let s = g.summary();
        assert!(
            s.contains("pci-testdev read 222 ns raw, b/a 1.02, c/a 1.00, d/a 1.00"),
            "{s}"
        );
        assert!(
            s.contains("unbind (busy) k=1/16/64 ms: 18.7/19.6/13.1"),
            "{s}"
        );
        assert!(
            s.contains("DMA to_device 32000 KiB/s (2000 µs for 64 KiB; CPU copy 50 µs)")
                && s.contains("DMA from_device 16000 KiB/s")
                && s.contains("coherent alloc+free (4096 B) 3.5 µs"),
            "{s}"
        );
        let no_dma: Vec<&str> = BOOT
            .iter()
            .copied()
            .filter(|l| !l.contains("bench dma"))
            .collect();
        let e = GuestFigures::parse(&no_dma)
            .unwrap()
            .check_complete()
            .unwrap_err();
        assert!(
            e.contains("dma dir=to_device, dma dir=from_device, dma_alloc"),
            "{e}"
        );
    }

    #[test]
    fn a_lost_interrupt_or_no_sample_makes_the_figures_incomplete() {
        let lost: Vec<String> = BOOT
            .iter()
            .map(|l| {
                l.replace(
                    "samples=101 median_ns=41000 lost=0",
                    "samples=100 median_ns=41000 lost=1",
                )
            })
            .collect();
        let e = GuestFigures::parse(&lost)
            .unwrap()
            .check_complete()
            .unwrap_err();
        assert!(e.contains("1 interrupts lost"), "{e}");
        let none: Vec<String> = BOOT
            .iter()
            .map(|l| l.replace("samples=101 median_ns=41000", "samples=0 median_ns=-1"))
            .collect();
        let e = GuestFigures::parse(&none)
            .unwrap()
            .check_complete()
            .unwrap_err();
        assert!(e.contains("0 samples"), "{e}");
    }

    #[test]
    fn a_missing_case_or_device_is_named() {
        let lines: Vec<&str> = BOOT
            .iter()
            .copied()
            .filter(|l| !l.contains("dev=pci-testdev") && !l.contains("k=16 worker=busy"))
            .collect();
        let e = GuestFigures::parse(&lines)
            .unwrap()
            .check_complete()
            .unwrap_err();
        assert_eq!(
            e,
            "bench lines missing: mmio dev=pci-testdev, unbind k=16 worker=busy"
        );
        let e = GuestFigures::parse(&[] as &[&str])
            .unwrap()
            .check_complete()
            .unwrap_err();
        assert!(
            e.contains("window") && e.contains("irq") && e.contains("revoke_each k=64"),
            "{e}"
        );
    }

    #[test]
    fn malformed_bench_lines_are_errors() {
        for bad in [
            "x: bench mmio dev=a reads=1 raw_ns=2 devres_ns=x guard_ns=1 access_ns=1",
            "x: bench unbind k=1 worker=lazy remove_ns=1 total_ns=2",
            "x: bench unbind k=1 worker=idle remove_ns=1",
            "x: bench teleport ns=1",
        ] {
            assert!(GuestFigures::parse(&[bad]).is_err(), "{bad}");
        }
    }

    #[test]
    fn medians() {
        assert_eq!(median(vec![]), None);
        assert_eq!(median(vec![3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(vec![4.0, 1.0, 2.0, 3.0]), Some(2.5));
    }
}
