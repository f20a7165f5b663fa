//! What a side's `cargo xtask test` left: its report.json's verdicts, scenarios and walls,
//! the kernel builds its log reports.

use rig::arch::Arch;
use serde::Serialize;
use std::path::{Path, PathBuf};

/// A run's verdicts, counted from its report.json.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Counts {
    pub pass: usize,
    pub fail: usize,
    pub skip: usize,
}

/// One kernel build of a run, from its log's `kernel ARCH: up to date in …` line.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct KernelBuild {
    pub arch: String,
    /// The tree, `<version>/<arch>-<flavour>` (the version names the kernel line).
    pub tree: String,
    pub seconds: f64,
    pub objects: usize,
}

/// The kernel builds a `cargo xtask test` log reports (a kernel found up to date is not one).
pub fn kernel_builds(log: &str) -> Vec<KernelBuild> {
    log.lines()
        .filter_map(|l| {
            let rest = l.trim().strip_prefix("kernel ")?;
            let (arch, rest) = rest.split_once(": up to date in ")?;
            let (seconds, rest) = rest.split_once(" s, ")?;
            let (objects, rest) = rest.split_once(" objects (")?;
            let dir = Path::new(rest.strip_suffix(')')?);
            let tree = dir.parent()?.parent()?.file_name()?.to_string_lossy();
            Some(KernelBuild {
                arch: arch.to_string(),
                tree: format!("{tree}/{}", dir.file_name()?.to_string_lossy()),
                seconds: seconds.parse().ok()?,
                objects: objects.parse().ok()?,
            })
        })
        .collect()
}

/// The run folder a `cargo xtask test` printed last (`report: …/report.json`).
pub fn report_of(output: &str) -> Option<PathBuf> {
    output
        .lines()
        .rev()
        .find_map(|l| l.trim_end().strip_prefix("report: "))
        .and_then(|p| Path::new(p.trim()).parent().map(Path::to_path_buf))
}

pub(super) fn results(report: &str) -> Vec<serde_json::Value> {
    serde_json::from_str::<serde_json::Value>(report)
        .ok()
        .and_then(|v| v["results"].as_array().cloned())
        .unwrap_or_default()
}

/// The verdicts of a report.json's text; `None` if it is not one.
pub fn counts(report: &str) -> Option<Counts> {
    let v: serde_json::Value = serde_json::from_str(report).ok()?;
    let mut c = Counts::default();
    for r in v["results"].as_array()? {
        match r["verdict"].as_str() {
            Some("pass") => c.pass += 1,
            Some("fail") => c.fail += 1,
            Some("skip") => c.skip += 1,
            _ => {}
        }
    }
    Some(c)
}

/// The scenarios a report.json's text holds, by name, each once, in the
/// order of their first result (the host's `cargo test` is none).
pub fn scenario_names(report: &str) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    for r in results(report) {
        if let (Some(arch), Some(name)) = (r["arch"].as_str(), r["scenario"].as_str()) {
            if arch != "host" && !names.iter().any(|n| n == name) {
                names.push(name.to_string());
            }
        }
    }
    names
}

/// The duration a report.json's text gives `scenario` on `arch`.
pub fn scenario_wall(report: &str, arch: Arch, scenario: &str) -> Option<f64> {
    results(report).iter().find_map(|r| {
        (r["arch"] == arch.name() && r["scenario"] == scenario)
            .then(|| r["duration_s"].as_f64())
            .flatten()
    })
}
