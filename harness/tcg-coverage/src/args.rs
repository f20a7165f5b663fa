//! The plugin's arguments: `range=0xSTART+0xLEN` (one or more) and
//! `out=PATH`.

use std::path::PathBuf;

#[derive(Debug)]
pub struct Args {
    /// Half-open `[start, end)` ranges of guest virtual addresses.
    pub ranges: Vec<(u64, u64)>,
    pub out: PathBuf,
}

fn number(s: &str) -> Result<u64, String> {
    let hex = s
        .strip_prefix("0x")
        .ok_or_else(|| format!("`{s}` is not a 0x-prefixed hexadecimal number"))?;
    u64::from_str_radix(hex, 16).map_err(|e| format!("`{s}`: {e}"))
}

impl Args {
    pub fn parse<'a>(args: impl IntoIterator<Item = &'a str>) -> Result<Args, String> {
        let mut ranges = Vec::new();
        let mut out = None;
        for arg in args {
            match arg.split_once('=') {
                Some(("range", r)) => {
                    let (start, len) = r
                        .split_once('+')
                        .ok_or_else(|| format!("range=`{r}`: want 0xSTART+0xLEN"))?;
                    let (start, len) = (number(start)?, number(len)?);
                    let end = start
                        .checked_add(len)
                        .ok_or_else(|| format!("range=`{r}` runs past the address space"))?;
                    if len == 0 {
                        return Err(format!("range=`{r}` is empty"));
                    }
                    ranges.push((start, end));
                }
                Some(("out", path)) => out = Some(PathBuf::from(path)),
                _ => {
                    return Err(format!(
                        "unknown argument `{arg}`: want range=0xSTART+0xLEN and out=PATH"
                    ))
                }
            }
        }
        if ranges.is_empty() {
            return Err("no range=0xSTART+0xLEN given: nothing to watch".into());
        }
        Ok(Args {
            ranges,
            out: out.ok_or("no out=PATH given")?,
        })
    }
}

/// Whether `addr` lies in one of `ranges`.
pub fn within(ranges: &[(u64, u64)], addr: u64) -> bool {
    ranges.iter().any(|&(s, e)| (s..e).contains(&addr))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_and_out_parse() {
        let a = Args::parse([
            "range=0x1000+0x100",
            "range=0xffffffffa0000000+0x10",
            "out=/tmp/c",
        ])
        .unwrap();
        assert_eq!(
            a.ranges,
            vec![
                (0x1000, 0x1100),
                (0xffff_ffff_a000_0000, 0xffff_ffff_a000_0010)
            ]
        );
        assert!(within(&a.ranges, 0x10ff));
        assert!(!within(&a.ranges, 0x1100));
        assert_eq!(a.out, PathBuf::from("/tmp/c"));
    }

    #[test]
    fn bad_arguments_say_what_is_wanted() {
        assert!(Args::parse(["out=/x"]).unwrap_err().contains("no range"));
        assert!(Args::parse(["range=0x10+0x0", "out=/x"])
            .unwrap_err()
            .contains("empty"));
        assert!(Args::parse(["range=16+0x10", "out=/x"])
            .unwrap_err()
            .contains("hexadecimal"));
        assert!(Args::parse(["range=0xffffffffffffffff+0x2", "out=/x"])
            .unwrap_err()
            .contains("past"));
        assert!(Args::parse(["range=0x10+0x10"])
            .unwrap_err()
            .contains("out=PATH"));
        assert!(Args::parse(["watch=0x10+0x10"])
            .unwrap_err()
            .contains("unknown argument"));
    }
}
