//! The plugin's arguments and the set of watched physical ranges.

use std::fmt;
use std::path::PathBuf;

/// One watched range of guest physical addresses, `[start, end)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Range {
    pub start: u64,
    pub end: u64,
}

impl Range {
    /// Parses `0xADDR+0xLEN` (either number hex with `0x` or decimal).
    pub fn parse(s: &str) -> Result<Range, String> {
        let (a, l) = s
            .split_once('+')
            .ok_or_else(|| format!("watch={s}: expected ADDR+LEN, e.g. 0xfe000000+0x1000"))?;
        let start = number(a).map_err(|e| format!("watch={s}: address: {e}"))?;
        let len = number(l).map_err(|e| format!("watch={s}: length: {e}"))?;
        if len == 0 {
            return Err(format!("watch={s}: empty range"));
        }
        let end = start
            .checked_add(len)
            .ok_or_else(|| format!("watch={s}: runs past the end of the address space"))?;
        Ok(Range { start, end })
    }
}

impl fmt::Display for Range {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:#x}+{:#x}", self.start, self.end - self.start)
    }
}

fn number(s: &str) -> Result<u64, String> {
    let s = s.trim();
    let r = match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(hex) => u64::from_str_radix(hex, 16),
        None => s.parse(),
    };
    r.map_err(|e| format!("`{s}`: {e}"))
}

/// The widest access QEMU can describe: a `MemOp`'s size field (`MO_SIZE`,
/// three bits) says at most 2^7 bytes; loads and stores of today's targets
/// are at most 16.
pub const MAX_ACCESS: u64 = 1 << 7;

/// The watched ranges, sorted and merged, with their bounding box so that
/// almost every access is turned away by two comparisons.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Ranges {
    ranges: Vec<Range>,
    lo: u64,
    hi: u64,
}

impl Ranges {
    pub fn new(mut ranges: Vec<Range>) -> Ranges {
        ranges.sort();
        let mut merged: Vec<Range> = Vec::with_capacity(ranges.len());
        for r in ranges {
            match merged.last_mut() {
                Some(last) if r.start <= last.end => last.end = last.end.max(r.end),
                _ => merged.push(r),
            }
        }
        let lo = merged.first().map_or(u64::MAX, |r| r.start);
        let hi = merged.last().map_or(0, |r| r.end);
        Ranges {
            ranges: merged,
            lo,
            hi,
        }
    }

    pub fn as_slice(&self) -> &[Range] {
        &self.ranges
    }

    /// Whether an access starting at `addr`, of any size QEMU can make
    /// (at most [`MAX_ACCESS`] bytes), might touch a watched range: `false`
    /// only when none of them can. Lets the callback turn an access away
    /// before asking QEMU for its size.
    #[inline(always)]
    pub fn may_touch(&self, addr: u64) -> bool {
        addr < self.hi && addr.saturating_add(MAX_ACCESS) > self.lo
    }

    /// Whether `[addr, addr + size)` touches a watched range.
    #[inline(always)]
    pub fn overlaps(&self, addr: u64, size: u64) -> bool {
        let last = addr.saturating_add(size.max(1) - 1);
        if last < self.lo || addr >= self.hi {
            return false;
        }
        self.ranges.iter().any(|r| addr < r.end && last >= r.start)
    }
}

/// What `-plugin …,watch=…,out=…[,arm=…]` asked for.
#[derive(Debug, PartialEq, Eq)]
pub struct Args {
    pub watch: Ranges,
    pub out: PathBuf,
    /// Armed late: instrument nothing until this file exists (the
    /// harness creates it), then flush QEMU's translated code and watch
    /// from there on. `None`: armed from the start.
    pub arm: Option<PathBuf>,
}

impl Args {
    /// Parses QEMU's `name=value` plugin arguments: `watch=ADDR+LEN` (one or
    /// more), `out=PATH` (once) and `arm=PATH` (at most once).
    pub fn parse<'a>(args: impl IntoIterator<Item = &'a str>) -> Result<Args, String> {
        let mut watch = Vec::new();
        let mut out = None;
        let mut arm = None;
        for a in args {
            let (k, v) = a
                .split_once('=')
                .ok_or_else(|| format!("argument `{a}`: expected name=value"))?;
            match k {
                "watch" => watch.push(Range::parse(v)?),
                "out" if out.is_some() => return Err("out= given twice".into()),
                "out" if v.is_empty() => return Err("out= needs a path".into()),
                "out" => out = Some(PathBuf::from(v)),
                "arm" if arm.is_some() => return Err("arm= given twice".into()),
                "arm" if v.is_empty() => return Err("arm= needs a path".into()),
                "arm" => arm = Some(PathBuf::from(v)),
                _ => {
                    return Err(format!(
                        "unknown argument `{k}` (known: watch=ADDR+LEN, out=PATH, arm=PATH)"
                    ))
                }
            }
        }
        if watch.is_empty() {
            return Err("no watch=ADDR+LEN given: nothing to watch".into());
        }
        let out = out.ok_or("no out=PATH given")?;
        Ok(Args {
            watch: Ranges::new(watch),
            out,
            arm,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_ranges_in_hex_and_decimal() {
        assert_eq!(
            Range::parse("0xfe000000+0x1000").unwrap(),
            Range {
                start: 0xfe00_0000,
                end: 0xfe00_1000
            }
        );
        assert_eq!(
            Range::parse("4096+16").unwrap(),
            Range {
                start: 4096,
                end: 4112
            }
        );
        assert_eq!(Range::parse("0x10+0x10").unwrap().to_string(), "0x10+0x10");
    }

    #[test]
    fn refuses_bad_ranges_with_the_reason() {
        for (arg, why) in [
            ("0x1000", "expected ADDR+LEN"),
            ("0x1000+0", "empty range"),
            ("zz+1", "address"),
            ("0x10+0xg", "length"),
            ("0xffffffffffffffff+2", "past the end"),
        ] {
            let e = Range::parse(arg).unwrap_err();
            assert!(e.contains(why), "{arg}: {e}");
        }
    }

    #[test]
    fn parses_arguments() {
        let a = Args::parse([
            "watch=0x2000+0x100",
            "out=/tmp/o.jsonl",
            "watch=0x1000+0x10",
        ])
        .unwrap();
        assert_eq!(a.out, PathBuf::from("/tmp/o.jsonl"));
        assert_eq!(a.arm, None, "armed from the start unless told");
        assert_eq!(
            a.watch.as_slice(),
            [
                Range {
                    start: 0x1000,
                    end: 0x1010
                },
                Range {
                    start: 0x2000,
                    end: 0x2100
                }
            ]
        );
        let a = Args::parse(["watch=1+1", "arm=/b/arm", "out=/a"]).unwrap();
        assert_eq!(a.arm, Some(PathBuf::from("/b/arm")));
    }

    #[test]
    fn refuses_incomplete_or_unknown_arguments() {
        for (args, why) in [
            (&["out=/x"][..], "no watch="),
            (&["watch=1+1"][..], "no out="),
            (&["watch=1+1", "out=/a", "out=/b"][..], "twice"),
            (&["watch=1+1", "out="][..], "needs a path"),
            (&["watch=1+1", "out=/a", "arm="][..], "arm= needs a path"),
            (
                &["watch=1+1", "out=/a", "arm=/x", "arm=/y"][..],
                "arm= given twice",
            ),
            (
                &["watch=1+1", "out=/a", "verbose=on"][..],
                "unknown argument `verbose`",
            ),
            (&["watch"][..], "name=value"),
        ] {
            let e = Args::parse(args.iter().copied()).unwrap_err();
            assert!(e.contains(why), "{args:?}: {e}");
        }
    }

    #[test]
    fn matches_accesses_touching_a_range_and_nothing_else() {
        let w = Ranges::new(vec![
            Range::parse("0x3000+0x1000").unwrap(),
            Range::parse("0x1000+0x1000").unwrap(),
            Range::parse("0x1800+0x1000").unwrap(),
        ]);
        // 0x1000..0x2800 merged, 0x3000..0x4000.
        assert_eq!(w.as_slice().len(), 2);
        assert!(w.overlaps(0x1000, 4));
        assert!(w.overlaps(0x27ff, 1));
        assert!(!w.overlaps(0x2800, 4), "the gap");
        assert!(w.overlaps(0x2ffe, 4), "straddles the start of a range");
        assert!(w.overlaps(0xffc, 8), "straddles the start of the first");
        assert!(!w.overlaps(0xffc, 4), "ends just before");
        assert!(!w.overlaps(0x4000, 8), "just past the end");
        assert!(w.overlaps(0x3ffc, 4));
        assert!(!w.overlaps(0, 1));
        assert!(!w.overlaps(u64::MAX, 8), "no overflow at the top");
        assert!(!Ranges::new(vec![]).overlaps(0, 8));
    }

    #[test]
    fn the_size_free_test_never_turns_away_a_watched_access() {
        let w = Ranges::new(vec![
            Range::parse("0x1000+0x1000").unwrap(),
            Range::parse("0x8000+0x10").unwrap(),
        ]);
        let near = |edge: u64| edge.saturating_sub(2 * MAX_ACCESS)..edge + 2 * MAX_ACCESS;
        let addrs = [0, 0x1000, 0x2000, 0x8000, 0x8010, u64::MAX - 2 * MAX_ACCESS]
            .into_iter()
            .flat_map(near);
        for addr in addrs {
            for shift in 0..=7 {
                let size = 1u64 << shift;
                if w.overlaps(addr, size) {
                    assert!(w.may_touch(addr), "{addr:#x}+{size} watched, turned away");
                }
            }
        }
        assert!(
            !w.may_touch(0x1000 - MAX_ACCESS),
            "too far below to reach it"
        );
        assert!(w.may_touch(0x1000 - MAX_ACCESS + 1));
        assert!(!w.may_touch(0x8010), "at the end of the box");
        assert!(!w.may_touch(u64::MAX));
        assert!(!Ranges::new(vec![]).may_touch(0));
    }
}
