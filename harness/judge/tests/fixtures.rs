//! The judge on real boots: each folder under `tests/fixtures/` is judged from its files and
//! held to its `expected.txt` (see its README). The test reads files; the judge does not.

#![allow(clippy::disallowed_methods)]

use std::path::{Path, PathBuf};

fn fixtures() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(&root)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir())
        .collect();
    dirs.sort();
    dirs
}

fn fixture(name: &str) -> PathBuf {
    fixtures().into_iter().find(|d| d.ends_with(name)).unwrap()
}

fn read(dir: &Path, name: &str) -> String {
    std::fs::read_to_string(dir.join(name))
        .unwrap_or_else(|e| panic!("{}: {e}", dir.join(name).display()))
}

/// Judges the boot in `dir`, its access log edited by `edit` first.
fn judged(dir: &Path, edit: impl Fn(String) -> String) -> judge::Judgement {
    judged_with(dir, edit, |_| {})
}

/// Judges the boot in `dir`, its access log edited by `edit` and its sealed evidence by
/// `edit_sealed` first.
fn judged_with(
    dir: &Path,
    edit: impl Fn(String) -> String,
    edit_sealed: impl Fn(&mut judge::Sealed),
) -> judge::Judgement {
    judged_all(dir, edit, edit_sealed, |t| t)
}

/// As `judged_with`, the MMIO oracle's log edited by `edit_oracle` too.
fn judged_all(
    dir: &Path,
    edit: impl Fn(String) -> String,
    edit_sealed: impl Fn(&mut judge::Sealed),
    edit_oracle: impl Fn(String) -> String,
) -> judge::Judgement {
    let mut sealed: judge::Sealed = serde_json::from_str(&read(dir, "evidence.json")).unwrap();
    edit_sealed(&mut sealed);
    let scenario = vocab::scenario::find(&sealed.scenario).unwrap();
    let texts: Vec<(String, String)> = sealed
        .servers
        .iter()
        .map(|s| {
            let d = dir.join(&s.dir);
            let text = |n: &str| std::fs::read_to_string(d.join(n)).unwrap_or_default();
            (edit(text("device-access.jsonl")), text("device-dma.jsonl"))
        })
        .collect();
    let logs: Vec<judge::ServerLogs<'_>> = texts
        .iter()
        .map(|(access, dma)| judge::ServerLogs { access, dma })
        .collect();
    let oracle = std::fs::read_to_string(dir.join("oracle.jsonl"))
        .ok()
        .map(edit_oracle);
    let (c, device) =
        judge::unseal(&sealed, &read(dir, "console.log"), &logs, oracle.as_deref()).unwrap();
    judge::judge(scenario, &c, &device)
}

#[test]
fn every_fixture_gets_its_expected_verdict_and_reason() {
    let all = fixtures();
    assert!(all.len() >= 6, "fixtures missing: {all:?}");
    for dir in all {
        let expected = read(&dir, "expected.txt");
        let mut lines = expected.lines();
        let verdict = lines.next().unwrap();
        let j = judged(&dir, |t| t);
        let name = dir.file_name().unwrap().to_string_lossy();
        assert_eq!(
            format!("{:?}", j.verdict).to_lowercase(),
            verdict,
            "{name}: {}",
            j.reason
        );
        for want in lines.filter(|l| !l.is_empty()) {
            assert!(
                j.reason.contains(want),
                "{name}: `{want}` not in: {}",
                j.reason
            );
        }
    }
}

#[test]
fn a_passing_boot_fails_once_the_device_log_loses_an_access() {
    let dir = fixture("unbind-pass");
    let j = judged(&dir, |t| {
        let mut lines: Vec<&str> = t.lines().collect();
        lines.remove(lines.len() / 2);
        lines.join("\n")
    });
    assert_eq!(j.verdict, vocab::verdict::Verdict::Fail, "{}", j.reason);
}

#[test]
fn a_scenario_that_needs_the_iommu_fails_without_it() {
    let dir = fixture("probe-error-iommu-pass");
    let console = read(&dir, "console.log");
    let sealed: judge::Sealed = serde_json::from_str(&read(&dir, "evidence.json")).unwrap();
    let logs: Vec<(String, String)> = sealed
        .servers
        .iter()
        .map(|s| {
            let d = dir.join(&s.dir);
            (
                read(&d, "device-access.jsonl"),
                read(&d, "device-dma.jsonl"),
            )
        })
        .collect();
    let logs: Vec<judge::ServerLogs<'_>> = logs
        .iter()
        .map(|(access, dma)| judge::ServerLogs { access, dma })
        .collect();
    let oracle = read(&dir, "oracle.jsonl");
    // The guest as if it had booted without its IOMMU: no device put into a group.
    let direct: String = console
        .lines()
        .filter(|l| !l.contains("Adding to iommu group"))
        .map(|l| format!("{l}\n"))
        .collect();
    let (c, device) = judge::unseal(&sealed, &direct, &logs, Some(&oracle)).unwrap();
    let j = judge::judge(vocab::scenario::find("probe-error").unwrap(), &c, &device);
    assert_eq!(j.verdict, vocab::verdict::Verdict::Fail, "{}", j.reason);
    assert!(
        j.reason.contains("no device into an IOMMU group"),
        "{}",
        j.reason
    );
}

#[test]
fn a_foreign_modules_boot_fails_once_its_first_binding_is_marked_ended_before_its_last_access() {
    let dir = fixture("module-probe-pass");
    let sealed: judge::Sealed = serde_json::from_str(&read(&dir, "evidence.json")).unwrap();
    let (begin, end) = (sealed.marks[0].ns, sealed.marks[1].ns);
    // The last BAR access the device saw inside the first binding's window.
    let last = read(&dir, "device-access.jsonl")
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .filter(|a| a["region"] != "config")
        .map(|a| a["time_ns"].as_u64().unwrap())
        .filter(|t| (begin..=end).contains(t))
        .max()
        .unwrap();
    let j = judged_with(&dir, |t| t, |s| s.marks[1].ns = last - 1);
    assert_eq!(j.verdict, vocab::verdict::Verdict::Fail, "{}", j.reason);
    assert!(j.reason.contains("after binding 1 ended"), "{}", j.reason);
    // Without the device's log, the MMIO oracle still sees it.
    let j = judged_with(&dir, |_| String::new(), |s| s.marks[1].ns = last - 1);
    assert!(
        j.reason.contains("MMIO oracle (inside QEMU)")
            && j.reason.contains("after binding 1 ended"),
        "{}",
        j.reason
    );
}

#[test]
fn a_sleeping_device_fails_once_the_oracle_saw_an_access_while_it_was_in_d3hot() {
    let dir = fixture("pm-pass");
    // The first stay in D3hot, on the host's clock, by the device's power events.
    let times: Vec<u64> = read(&dir, "device-dma.jsonl")
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .filter(|e| e["event"] == "power")
        .map(|e| e["time_ns"].as_u64().unwrap())
        .collect();
    let inside = (times[0] + times[1]) / 2;
    // The oracle's last read of the device's MAGIC, moved into that stay.
    let moved = |text: String| {
        let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
        let last = lines
            .iter()
            // A read of MAGIC ("prig"): surely of our BAR 0.
            .rposition(|l| l.contains("\"value\":1886546279,"))
            .unwrap();
        let mut v: serde_json::Value = serde_json::from_str(&lines[last]).unwrap();
        v["ns"] = inside.into();
        lines[last] = v.to_string();
        lines.join("\n") + "\n"
    };
    let j = judged_all(&dir, |t| t, |_| {}, moved);
    assert_eq!(j.verdict, vocab::verdict::Verdict::Fail, "{}", j.reason);
    assert!(
        j.reason.contains("while the device was in D3hot"),
        "{}",
        j.reason
    );
}

#[test]
fn a_worker_left_reading_a_runtime_suspended_device_fails_even_when_its_count_is_a_lie() {
    // The worker read on in D3hot, where QEMU no longer passes BAR accesses on: the device saw
    // 105 of its 278 reads. Were the driver to report only those, the MMIO oracle, which sees
    // every access the guest made, still holds the others: reads QEMU answered with 0 while
    // the device was in D3hot.
    let dir = fixture("rpm-suspend-keeps-worker");
    let console = read(&dir, "console.log").replace("accesses=278", "accesses=105");
    let scratch = std::env::temp_dir().join(format!("pci-rig-rpm-lie-{}", std::process::id()));
    std::fs::create_dir_all(&scratch).unwrap();
    for f in [
        "device-access.jsonl",
        "device-dma.jsonl",
        "evidence.json",
        "oracle.jsonl",
    ] {
        std::fs::copy(dir.join(f), scratch.join(f)).unwrap();
    }
    std::fs::write(scratch.join("console.log"), console).unwrap();
    let j = judged(&scratch, |t| t);
    std::fs::remove_dir_all(&scratch).unwrap();
    assert_eq!(j.verdict, vocab::verdict::Verdict::Fail, "{}", j.reason);
    assert!(j.reason.contains("MMIO oracle"), "{}", j.reason);
}
