//! One boot's evidence: the blocks the plugin saw run, and where the guest
//! loaded each module's code.

use anyhow::{bail, Context, Result};

/// The plugin's record, in a boot's folder.
pub const BLOCKS: &str = "coverage.blocks";
/// How the guest's init prints a module's code sections once loaded
/// (images/init, `insmod`): the name, then `grep -H`'s line for each.
pub const LOAD_LINE: &str = "pcirig: coverage module ";

/// The `[start, end)` guest ranges the plugin recorded.
pub fn blocks(text: &str) -> Result<Vec<(u64, u64)>> {
    let mut out = Vec::new();
    for (n, line) in text.lines().enumerate() {
        if line.starts_with('#') || line.trim().is_empty() {
            continue;
        }
        let parse = |s: &str| {
            s.strip_prefix("0x")
                .and_then(|h| u64::from_str_radix(h, 16).ok())
        };
        let (start, end) = match line.split_once(' ') {
            Some((a, b)) => (parse(a), parse(b)),
            None => (None, None),
        };
        match (start, end) {
            (Some(s), Some(e)) if s < e => out.push((s, e)),
            _ => bail!("line {}: `{line}` is not `0xSTART 0xEND`", n + 1),
        }
    }
    Ok(out)
}

/// A module the guest loaded: its name and its code sections' addresses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Load {
    pub module: String,
    pub sections: Vec<(String, u64)>,
}

/// Every module load the console shows, in order.
pub fn loads(console: &[String]) -> Result<Vec<Load>> {
    let mut out = Vec::new();
    for line in console {
        let Some(at) = line.find(LOAD_LINE) else {
            continue;
        };
        let mut words = line[at + LOAD_LINE.len()..].split_whitespace();
        let module = words.next().context("a module load line names no module")?;
        let mut sections = Vec::new();
        for word in words {
            // grep -H's `/sys/module/NAME/sections/.text:0xADDR`.
            let parsed = word.rsplit_once(':').and_then(|(file, addr)| {
                let addr = u64::from_str_radix(addr.strip_prefix("0x")?, 16).ok()?;
                let name = file.rsplit('/').next()?;
                Some((name.to_string(), addr))
            });
            match parsed {
                Some(s) => sections.push(s),
                None => bail!("`{line}`: `{word}` is not /sys/module/NAME/sections/SECTION:0xADDR"),
            }
        }
        out.push(Load {
            module: module.to_string(),
            sections,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_plugins_record_parses_and_rejects_garbage() {
        let text = "# tcg-coverage v1\n0xffffffffa0000000 0xffffffffa0000010\n0x10 0x20\n";
        assert_eq!(
            blocks(text).unwrap(),
            vec![(0xffff_ffff_a000_0000, 0xffff_ffff_a000_0010), (0x10, 0x20)]
        );
        assert!(blocks("0x20 0x10\n")
            .unwrap_err()
            .to_string()
            .contains("line 1"));
        assert!(blocks("0x20\n").is_err());
    }

    #[test]
    fn load_lines_parse_with_their_sections() {
        let console = vec![
            "[    1.0] something else".to_string(),
            "pcirig: coverage module pci_rig /sys/module/pci_rig/sections/.text:0xffffffffa0001000 \
             /sys/module/pci_rig/sections/.init.text:0xffffffffa0010000"
                .to_string(),
            "pcirig: coverage module lkdtm".to_string(),
        ];
        let l = loads(&console).unwrap();
        assert_eq!(l.len(), 2);
        assert_eq!(l[0].module, "pci_rig");
        assert_eq!(
            l[0].sections,
            vec![
                (".text".to_string(), 0xffff_ffff_a000_1000),
                (".init.text".to_string(), 0xffff_ffff_a001_0000)
            ]
        );
        assert!(l[1].sections.is_empty());
        let bad = vec!["pcirig: coverage module x /sys/module/x/sections/.text:zz".to_string()];
        assert!(loads(&bad).is_err());
    }
}
