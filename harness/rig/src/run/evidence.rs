//! A boot's evidence at rest in its folder, and judging it again from there.

use crate::guest::device::Stopped;
use crate::judge::{self, Judgement};
use crate::scenario::Scenario;
use anyhow::{Context, Result};
use std::path::Path;

/// Leaves a boot's evidence at rest in its folder (`judge::Sealed`): `console.log`, the lines
/// as the judge reads them, and `evidence.json`, the rest; `rejudge` reads them back.
pub(super) fn seal(
    dir: &Path,
    s: &Scenario,
    c: &judge::Console,
    device: &[Stopped],
    server_dirs: &[String],
) -> Result<()> {
    let mut lines = c.lines.join("\n");
    lines.push('\n');
    std::fs::write(dir.join(CONSOLE_LOG), lines)?;
    let sealed = judge::seal(s.name, c, device, server_dirs);
    std::fs::write(dir.join(EVIDENCE), serde_json::to_string_pretty(&sealed)?)?;
    Ok(())
}

/// A boot's console as the judge read it, and the rest of its evidence (see [`seal`]).
pub const CONSOLE_LOG: &str = "console.log";
pub const EVIDENCE: &str = "evidence.json";

/// Judges a boot again from what it left in `dir` (`cargo xtask judge DIR`): the verdict it
/// would get now, from the same evidence.
pub fn rejudge(dir: &Path) -> Result<Judgement> {
    let read = |name: &str| {
        std::fs::read_to_string(dir.join(name)).with_context(|| {
            format!(
                "reading {} (a boot folder of pci-rig 0.1 or newer has it)",
                dir.join(name).display()
            )
        })
    };
    let sealed: judge::Sealed = serde_json::from_str(&read(EVIDENCE)?)
        .with_context(|| format!("parsing {}", dir.join(EVIDENCE).display()))?;
    let scenario = crate::scenario::find(&sealed.scenario).map_err(anyhow::Error::msg)?;
    let console = read(CONSOLE_LOG)?;
    let mut texts = Vec::new();
    for server in &sealed.servers {
        let d = dir.join(&server.dir);
        let text = |name: &str| std::fs::read_to_string(d.join(name)).unwrap_or_default();
        texts.push((text("device-access.jsonl"), text("device-dma.jsonl")));
    }
    let logs: Vec<judge::ServerLogs<'_>> = texts
        .iter()
        .map(|(access, dma)| judge::ServerLogs { access, dma })
        .collect();
    let oracle = std::fs::read_to_string(dir.join(judge::oracle::LOG)).ok();
    let (c, device) =
        judge::unseal(&sealed, &console, &logs, oracle.as_deref()).map_err(anyhow::Error::msg)?;
    Ok(judge::judge(scenario, &c, &device))
}
