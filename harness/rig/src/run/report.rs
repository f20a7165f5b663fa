//! Verdicts and the files a run leaves behind: `report.json`, `junit.xml`
//! and the closing table; the boots' phases summed up per arch.

use crate::judge::figures::median;
use crate::judge::phases::Phases;
use crate::judge::Findings;
pub use crate::verdict::{Timings, Verdict};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

#[derive(Clone, Debug, Serialize)]
pub struct Outcome {
    pub arch: String,
    pub scenario: String,
    pub verdict: Verdict,
    pub duration_s: f64,
    /// The folder holding this result's logs.
    pub log: String,
    /// Why it failed or was skipped; what was checked when it passed.
    pub reason: String,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub timings: Timings,
    /// What the judge established (`judge::Findings`).
    #[serde(skip_serializing_if = "Findings::is_empty")]
    pub findings: Findings,
}

#[derive(Serialize)]
struct Report<'a> {
    results: &'a [Outcome],
}

/// How long each arch's scenario took in the newest earlier run under
/// `results` (not `current`) that left a report, for scheduling: `(arch,
/// scenario)` to seconds, the longest of its repetitions. Empty when there
/// is none.
pub fn previous_durations(results: &Path, current: &Path) -> BTreeMap<(String, String), f64> {
    let mut runs: Vec<PathBuf> = std::fs::read_dir(results)
        .into_iter()
        .flatten()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.as_path() != current && p.join("report.json").is_file())
        .filter(|p| !p.is_symlink())
        .collect();
    // Run ids start with their UTC time: the newest sorts last.
    runs.sort();
    let Some(text) = runs
        .last()
        .and_then(|r| std::fs::read_to_string(r.join("report.json")).ok())
    else {
        return BTreeMap::new();
    };
    durations(&text)
}

/// `(arch, scenario)` to seconds from a report.json's text.
fn durations(report: &str) -> BTreeMap<(String, String), f64> {
    let mut out = BTreeMap::new();
    let v: serde_json::Value = serde_json::from_str(report).unwrap_or_default();
    for r in v["results"].as_array().into_iter().flatten() {
        if let (Some(a), Some(s), Some(d)) = (
            r["arch"].as_str(),
            r["scenario"].as_str(),
            r["duration_s"].as_f64(),
        ) {
            let e = out.entry((a.to_string(), s.to_string())).or_insert(0.0);
            *e = f64::max(*e, d);
        }
    }
    out
}

pub fn to_json(results: &[Outcome]) -> String {
    serde_json::to_string_pretty(&Report { results }).expect("plain data serializes")
}

fn xml_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            // XML 1.0 forbids most control characters, which a serial log can hold.
            c if (c as u32) < 0x20 && !matches!(c, '\n' | '\t' | '\r') => out.push('?'),
            c => out.push(c),
        }
    }
    out
}

pub fn to_junit(results: &[Outcome]) -> String {
    let count = |v| results.iter().filter(|r| r.verdict == v).count();
    let total: f64 = results.iter().map(|r| r.duration_s).sum();
    let mut x = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    let _ = writeln!(
        x,
        "<testsuites><testsuite name=\"pci-rig\" tests=\"{}\" failures=\"{}\" skipped=\"{}\" time=\"{total:.3}\">",
        results.len(),
        count(Verdict::Fail),
        count(Verdict::Skip)
    );
    for r in results {
        let _ = write!(
            x,
            "  <testcase classname=\"{}\" name=\"{}\" time=\"{:.3}\"",
            xml_escape(&r.arch),
            xml_escape(&r.scenario),
            r.duration_s
        );
        let reason = xml_escape(&r.reason);
        match r.verdict {
            Verdict::Pass => x.push_str("/>\n"),
            Verdict::Skip => {
                let _ = writeln!(x, "><skipped message=\"{reason}\"/></testcase>");
            }
            Verdict::Fail => {
                let first = reason.lines().next().unwrap_or("");
                let _ = writeln!(
                    x,
                    "><failure message=\"{first}\">{reason}\nlogs: {}</failure></testcase>",
                    xml_escape(&r.log)
                );
            }
        }
    }
    x.push_str("</testsuite></testsuites>\n");
    x
}

pub fn write_files(dir: &Path, results: &[Outcome]) -> std::io::Result<()> {
    std::fs::write(dir.join("report.json"), to_json(results))?;
    std::fs::write(dir.join("junit.xml"), to_junit(results))
}

/// The compact table that closes `cargo xtask test`.
pub fn table(results: &[Outcome]) -> String {
    let mut t = format!(
        "{:<9} {:<18} {:<7} {:>8} {:>8}  {}\n",
        "arch", "scenario", "verdict", "time", "QEMU CPU", "note"
    );
    for r in results {
        let verdict = match r.verdict {
            Verdict::Pass => "pass",
            Verdict::Fail => "FAIL",
            Verdict::Skip => "skip",
        };
        let note = r.reason.lines().next().unwrap_or("");
        let cpu = match r.findings.phases.as_ref().and_then(|p| p.qemu_cpu_ms) {
            Some(ms) => format!("{:.1}s", ms / 1000.0),
            None => "-".into(),
        };
        let _ = writeln!(
            t,
            "{:<9} {:<18} {:<7} {:>7.1}s {cpu:>8}  {}",
            r.arch, r.scenario, verdict, r.duration_s, note
        );
    }
    let n = |v| results.iter().filter(|r| r.verdict == v).count();
    let _ = write!(
        t,
        "{} passed, {} failed, {} skipped",
        n(Verdict::Pass),
        n(Verdict::Fail),
        n(Verdict::Skip)
    );
    t
}

/// One row per arch and scenario for repeated runs: failed if any run
/// failed; the note counts passes, gives the median and slowest time, and
/// the median and largest of each timing the passing runs measured (the
/// row's timings are those medians).
pub fn per_scenario(results: &[Outcome]) -> Vec<Outcome> {
    let mut rows: Vec<Outcome> = Vec::new();
    let mut groups: Vec<(&str, &str, Vec<&Outcome>)> = Vec::new();
    for r in results {
        match groups
            .iter_mut()
            .find(|(a, s, _)| *a == r.arch && *s == r.scenario)
        {
            Some((_, _, runs)) => runs.push(r),
            None => groups.push((&r.arch, &r.scenario, vec![r])),
        }
    }
    for (arch, scenario, runs) in groups {
        let times: Vec<f64> = runs.iter().map(|r| r.duration_s).collect();
        let (median, slowest) = median_max(&times);
        let passed: Vec<&&Outcome> = runs.iter().filter(|r| r.verdict == Verdict::Pass).collect();
        let failed: Vec<&&Outcome> = runs.iter().filter(|r| r.verdict == Verdict::Fail).collect();
        let skipped = runs.iter().all(|r| r.verdict == Verdict::Skip);
        let mut note = if skipped {
            format!(
                "skipped all {}: {}",
                runs.len(),
                runs[0].reason.lines().next().unwrap_or("")
            )
        } else {
            format!(
                "{}/{} passed, median {median:.1} s, slowest {slowest:.1} s",
                passed.len(),
                runs.len(),
            )
        };
        let mut timings = Timings::new();
        let names: std::collections::BTreeSet<&'static str> = passed
            .iter()
            .flat_map(|r| r.timings.keys().copied())
            .collect();
        for name in names {
            let values: Vec<f64> = passed
                .iter()
                .filter_map(|r| r.timings.get(name).copied())
                .collect();
            let (median, max) = median_max(&values);
            let _ = write!(
                note,
                "; {name} median {median:.1} max {max:.1} (n={})",
                values.len()
            );
            timings.insert(name, median);
        }
        if let Some(f) = failed.first() {
            let _ = write!(
                note,
                "; first failure ({}): {}",
                f.log,
                f.reason.lines().next().unwrap_or("")
            );
        }
        rows.push(Outcome {
            arch: arch.to_string(),
            scenario: scenario.to_string(),
            verdict: if !failed.is_empty() {
                Verdict::Fail
            } else if passed.is_empty() {
                Verdict::Skip
            } else {
                Verdict::Pass
            },
            duration_s: times.iter().sum(),
            log: runs[0].log.clone(),
            reason: note,
            timings,
            findings: Findings::default(),
        });
    }
    rows
}

/// Where one arch's boots spent their time: each of `Phases`' fields the
/// median over the passing boots that reached it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ArchPhases {
    pub arch: String,
    /// Passing boots with phases.
    pub boots: usize,
    /// Of those, the boots that armed the MMIO oracle (`arming_ms`).
    pub armed: usize,
    pub median: Phases,
}

/// The phases of a run's passing boots, per arch in the order the arches
/// first come (boots without phases, e.g. `harness-selftest`,
/// `compile-fail`, `id-table`, count for nothing).
pub fn phase_summary(outcomes: &[Outcome]) -> Vec<ArchPhases> {
    summarize(
        outcomes
            .iter()
            .filter(|o| o.verdict == Verdict::Pass)
            .filter_map(|o| Some((o.arch.as_str(), o.findings.phases.as_ref()?))),
    )
}

/// `phase_summary` of a report.json's text (`to_json`).
pub fn phase_summary_json(report: &str) -> serde_json::Result<Vec<ArchPhases>> {
    #[derive(Deserialize)]
    struct Report {
        results: Vec<Run>,
    }
    #[derive(Deserialize)]
    struct Run {
        arch: String,
        verdict: Verdict,
        #[serde(default)]
        findings: Found,
    }
    #[derive(Default, Deserialize)]
    struct Found {
        phases: Option<Phases>,
    }
    let r: Report = serde_json::from_str(report)?;
    Ok(summarize(
        r.results
            .iter()
            .filter(|o| o.verdict == Verdict::Pass)
            .filter_map(|o| Some((o.arch.as_str(), o.findings.phases.as_ref()?))),
    ))
}

/// `phase_summary` of a run folder's report.json.
pub fn read_phase_summary(dir: &Path) -> anyhow::Result<Vec<ArchPhases>> {
    let path = dir.join("report.json");
    let text = std::fs::read_to_string(&path)?;
    phase_summary_json(&text).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))
}

fn summarize<'a>(boots: impl Iterator<Item = (&'a str, &'a Phases)>) -> Vec<ArchPhases> {
    let mut arches: Vec<(&str, Vec<&Phases>)> = Vec::new();
    for (arch, p) in boots {
        match arches.iter_mut().find(|(a, _)| *a == arch) {
            Some((_, ps)) => ps.push(p),
            None => arches.push((arch, vec![p])),
        }
    }
    arches
        .into_iter()
        .map(|(arch, ps)| {
            let fields: Vec<_> = ps.iter().map(|p| p.fields()).collect();
            let mut m = Phases::default();
            for (i, slot) in m.fields_mut().into_iter().enumerate() {
                *slot = median(fields.iter().filter_map(|f| f[i].1).collect());
            }
            ArchPhases {
                arch: arch.to_string(),
                boots: ps.len(),
                armed: ps.iter().filter(|p| p.arming_ms.is_some()).count(),
                median: m,
            }
        })
        .collect()
}

/// `phase_summary` as a table: one row per arch, medians in seconds, `-`
/// where no boot reached the phase.
pub fn phase_table(arches: &[ArchPhases]) -> String {
    type Column = (&'static str, fn(&Phases) -> Option<f64>);
    let cols: [Column; 9] = [
        ("1st byte", |p| p.to_first_byte_ms),
        ("kernel", |p| p.kernel_ms),
        ("init", |p| p.init_to_scenario_ms),
        ("arming", |p| p.arming_ms),
        ("scenario", |p| p.scenario_ms),
        ("poweroff", |p| p.poweroff_ms),
        ("exit", |p| p.exit_at_ms),
        ("QEMU CPU", |p| p.qemu_cpu_ms),
        ("printk@init", |p| p.run_init_stamp_ms),
    ];
    let mut t = format!("{:<9} {:>5} {:>5}", "arch", "boots", "armed");
    for (name, _) in cols {
        let _ = write!(t, " {name:>11}");
    }
    t.push('\n');
    for a in arches {
        let _ = write!(t, "{:<9} {:>5} {:>5}", a.arch, a.boots, a.armed);
        for (_, get) in cols {
            match get(&a.median) {
                Some(ms) => write!(t, " {:>10.2}s", ms / 1000.0),
                None => write!(t, " {:>11}", "-"),
            }
            .expect("writing to a String");
        }
        t.push('\n');
    }
    t.push_str(
        "medians over passing boots (arming: over those with the MMIO oracle); 1st byte: QEMU's start to \
         the console's first byte; kernel: to `Run /init`; init: to the scenario's start line; \
         scenario: from it (or the arming) to `pcirig: done`; poweroff: to QEMU's exit; exit: the \
         whole boot; QEMU CPU: the CPU time QEMU used, all threads; printk@init: the kernel's own stamp at `Run /init`\n",
    );
    t
}

/// The median (the upper one of an even count) and the largest value.
fn median_max(values: &[f64]) -> (f64, f64) {
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    match v.last() {
        Some(&max) => (v[v.len() / 2], max),
        None => (0.0, 0.0),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn previous_durations_take_the_newest_report_but_this_run() {
        let d = std::env::temp_dir().join(format!("pci-rig-durations-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        let report = |run: &str, secs: f64| {
            std::fs::create_dir_all(d.join(run)).unwrap();
            let text = format!(
                r#"{{"results":[{{"arch":"x86_64","scenario":"boot","duration_s":{secs}}},{{"arch":"x86_64","scenario":"boot","duration_s":1.0}}]}}"#
            );
            std::fs::write(d.join(run).join("report.json"), text).unwrap();
        };
        report("20261201-000000-1", 3.0);
        report("20261202-000000-1", 5.0);
        std::fs::create_dir_all(d.join("20261203-000000-1")).unwrap();
        let key = ("x86_64".to_string(), "boot".to_string());
        let got = super::previous_durations(&d, &d.join("20261203-000000-1"));
        assert_eq!(got.get(&key), Some(&5.0), "the newest, longest repetition");
        let got = super::previous_durations(&d, &d.join("20261202-000000-1"));
        assert_eq!(got.get(&key), Some(&3.0), "never the current run's own");
        assert!(super::previous_durations(&d.join("none"), &d).is_empty());
        std::fs::remove_dir_all(&d).unwrap();
    }

    use super::*;

    #[test]
    fn repeated_runs_fold_into_one_row_each() {
        let run = |arch: &str, verdict, secs: f64| Outcome {
            arch: arch.into(),
            scenario: "surprise".into(),
            verdict,
            duration_s: secs,
            log: format!("target/pci-rig/r1/{arch}-surprise-{secs}"),
            reason: "why".into(),
            timings: Timings::from([("remove_ms", secs * 2.0)]),
            findings: Findings::default(),
        };
        let rows = per_scenario(&[
            run("x86_64", Verdict::Pass, 3.0),
            run("x86_64", Verdict::Fail, 9.0),
            run("x86_64", Verdict::Pass, 4.0),
            run("arm64", Verdict::Pass, 2.0),
            run("riscv64", Verdict::Skip, 0.0),
        ]);
        assert_eq!(rows.len(), 3);
        assert_eq!(rows[0].verdict, Verdict::Fail);
        assert_eq!(
            rows[0].reason,
            "2/3 passed, median 4.0 s, slowest 9.0 s; remove_ms median 8.0 max 8.0 (n=2); \
             first failure (target/pci-rig/r1/x86_64-surprise-9): why",
            "a failed run's timings are left out"
        );
        assert_eq!(rows[0].timings["remove_ms"], 8.0);
        assert_eq!(rows[1].verdict, Verdict::Pass);
        assert_eq!(
            rows[1].reason,
            "1/1 passed, median 2.0 s, slowest 2.0 s; remove_ms median 4.0 max 4.0 (n=1)"
        );
        assert_eq!(rows[2].verdict, Verdict::Skip);
        assert_eq!(rows[2].reason, "skipped all 1: why");
        assert!(rows[2].timings.is_empty());
    }

    fn sample() -> Vec<Outcome> {
        let o = |scenario: &str, verdict, reason: &str| Outcome {
            arch: "arm64".into(),
            scenario: scenario.into(),
            verdict,
            duration_s: 1.5,
            log: "target/pci-rig/r1/arm64-boot".into(),
            reason: reason.into(),
            timings: Timings::new(),
            findings: Findings::default(),
        };
        vec![
            o("boot", Verdict::Pass, "2/2 guest checks"),
            o(
                "hang",
                Verdict::Fail,
                "timeout after 10 s <no poweroff> & \u{1b}[0m",
            ),
            o("kunit", Verdict::Skip, "not built"),
        ]
    }

    #[test]
    fn json_has_the_documented_shape() {
        let v: serde_json::Value = serde_json::from_str(&to_json(&sample())).unwrap();
        let r = &v["results"];
        assert_eq!(r.as_array().unwrap().len(), 3);
        assert_eq!(r[0]["arch"], "arm64");
        assert_eq!(r[0]["scenario"], "boot");
        assert_eq!(r[0]["verdict"], "pass");
        assert_eq!(r[1]["verdict"], "fail");
        assert_eq!(r[2]["verdict"], "skip");
        assert_eq!(r[0]["duration_s"], 1.5);
        assert_eq!(r[0]["log"], "target/pci-rig/r1/arm64-boot");
        assert!(r[0].get("timings").is_none(), "no timings, no field");
    }

    #[test]
    fn junit_counts_and_escapes() {
        let x = to_junit(&sample());
        assert!(
            x.contains("tests=\"3\" failures=\"1\" skipped=\"1\""),
            "{x}"
        );
        assert!(x.contains("<testcase classname=\"arm64\" name=\"boot\" time=\"1.500\"/>"));
        assert!(
            x.contains("<failure message=\"timeout after 10 s &lt;no poweroff&gt; &amp; ?[0m\">")
        );
        assert!(x.contains("<skipped message=\"not built\"/>"));
        assert!(!x.contains('\u{1b}'));
        assert_eq!(
            x.matches("<testcase").count(),
            x.matches("</testcase>").count() + 1
        );
    }

    /// A boot of `arch` whose phases are `kernel_ms` and, when given,
    /// `arming_ms`, with its verdict.
    fn phased(arch: &str, verdict: Verdict, kernel: f64, arming: Option<f64>) -> Outcome {
        Outcome {
            arch: arch.into(),
            scenario: "unbind".into(),
            verdict,
            duration_s: 3.0,
            log: format!("target/pci-rig/r1/{arch}-unbind"),
            reason: "why".into(),
            timings: Timings::new(),
            findings: Findings {
                phases: Some(Phases {
                    kernel_ms: Some(kernel),
                    arming_ms: arming,
                    ..Phases::default()
                }),
                ..Findings::default()
            },
        }
    }

    fn phased_run() -> Vec<Outcome> {
        let mut no_phases = phased("x86_64", Verdict::Pass, 0.0, None);
        no_phases.findings = Findings::default();
        vec![
            phased("arm64", Verdict::Pass, 1000.0, Some(100.0)),
            phased("x86_64", Verdict::Pass, 3000.0, Some(400.0)),
            phased("arm64", Verdict::Pass, 1400.0, None),
            phased("arm64", Verdict::Fail, 90000.0, Some(9000.0)),
            phased("arm64", Verdict::Pass, 1100.0, Some(300.0)),
            phased("x86_64", Verdict::Pass, 2000.0, None),
            no_phases,
        ]
    }

    #[test]
    fn phases_summed_up_per_arch_as_medians_of_passing_boots() {
        let s = phase_summary(&phased_run());
        assert_eq!(s.len(), 2);
        assert_eq!(
            (s[0].arch.as_str(), s[0].boots, s[0].armed),
            ("arm64", 3, 2)
        );
        assert_eq!(s[0].median.kernel_ms, Some(1100.0), "odd count: the middle");
        assert_eq!(
            s[0].median.arming_ms,
            Some(200.0),
            "over the armed boots only"
        );
        assert_eq!(s[0].median.scenario_ms, None, "no boot had it");
        assert_eq!(
            (s[1].arch.as_str(), s[1].boots, s[1].armed),
            ("x86_64", 2, 1)
        );
        assert_eq!(
            s[1].median.kernel_ms,
            Some(2500.0),
            "even count: the mean of two"
        );
        assert_eq!(s[1].median.arming_ms, Some(400.0));
        assert!(phase_summary(&sample()).is_empty(), "no phases, no rows");
    }

    #[test]
    fn phases_summed_up_from_report_json_as_from_outcomes() {
        let run = phased_run();
        let json = to_json(&run);
        let v: serde_json::Value = serde_json::from_str(&json).unwrap();
        assert_eq!(v["results"][0]["findings"]["phases"]["kernel_ms"], 1000.0);
        assert!(v["results"][2]["findings"]["phases"]
            .get("arming_ms")
            .is_none());
        assert_eq!(phase_summary_json(&json).unwrap(), phase_summary(&run));
        let dir = std::env::temp_dir().join(format!("pci-rig-phases-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        write_files(&dir, &run).unwrap();
        assert_eq!(read_phase_summary(&dir).unwrap(), phase_summary(&run));
        let _ = std::fs::remove_dir_all(&dir);
        assert!(phase_summary_json("{\"results\": [{\"arch\": 1}]}").is_err());
    }

    #[test]
    fn phase_table_in_seconds_with_dashes_for_what_no_boot_reached() {
        let t = phase_table(&phase_summary(&phased_run()));
        let rows: Vec<&str> = t.lines().collect();
        assert!(
            rows[0].starts_with("arch      boots armed    1st byte      kernel"),
            "{t}"
        );
        assert!(
            rows[1].starts_with("arm64         3     2           -       1.10s"),
            "{t}"
        );
        assert!(rows[1].contains("       0.20s"), "{t}");
        assert!(
            rows[2].starts_with("x86_64        2     1           -       2.50s"),
            "{t}"
        );
        assert!(rows[3].starts_with("medians over passing boots"), "{t}");
    }

    #[test]
    fn table_closes_with_counts() {
        let t = table(&sample());
        assert!(t.ends_with("1 passed, 1 failed, 1 skipped"), "{t}");
        assert!(t.contains("FAIL"));
    }
}
