use super::*;

#[test]
fn the_two_sides_edits_differ_as_the_runs_do() {
    let head = edit_note("r1", Side::Head);
    assert_ne!(head, edit_note("r1", Side::Baseline));
    assert_ne!(head, edit_note("r2", Side::Head));
}

fn run(n: usize, s: f64, ok: bool) -> Run {
    Run {
        n,
        value_s: s,
        exit_ok: ok,
        counts: None,
        all_passed: ok,
        run_dir: None,
        log: format!("run-{n}.log"),
        kernels: Vec::new(),
    }
}

#[test]
fn kernel_builds_are_read_from_a_log_each_tree_apart() {
    let log = "\
kernel x86_64: configuring (base + x86_64)
kernel x86_64: unchanged since its last build (/c/linux/6.12.118-1_deb12u1/build/x86_64-base)
kernel arm64: up to date in 252.4 s, 681 objects (/c/linux/6.12.118-1_deb12u1/build/arm64-base)
kernel x86_64: up to date in 224.0 s, 977 objects (/c/linux/7.3.4-1_bpo13_1/build/x86_64-base)
kernel riscv64: up to date in soon s, 1 objects (/c/linux/x/build/riscv64-base)
";
    let k = kernel_builds(log);
    assert_eq!(k.len(), 2, "{k:?}");
    assert_eq!(
        (
            k[0].arch.as_str(),
            k[0].tree.as_str(),
            k[0].seconds,
            k[0].objects
        ),
        ("arm64", "6.12.118-1_deb12u1/arm64-base", 252.4, 681)
    );
    assert_eq!(k[1].tree, "7.3.4-1_bpo13_1/x86_64-base");
}

fn figure(key: Key, head: &[f64], base: &[f64]) -> Figure {
    let mut f = Figure::new(key, "cargo xtask test".into());
    for (i, &s) in head.iter().enumerate() {
        f.head.runs.push(run(i + 1, s, true));
    }
    for (i, &s) in base.iter().enumerate() {
        f.baseline.runs.push(run(i + 1, s, true));
    }
    f.finish();
    f
}

fn opts(arches: &[Arch], boot: usize, edit: usize, matrix: usize, cold: usize) -> Options {
    Options {
        rev: "512677d".into(),
        arches: arches.to_vec(),
        boot_runs: boot,
        edit_runs: edit,
        matrix_runs: matrix,
        cold_runs: cold,
        keep: false,
    }
}

#[test]
fn statistics_are_median_and_range() {
    let s = Stats::of(&[3.0, 1.0, 2.0]).unwrap();
    assert_eq!((s.median_s, s.min_s, s.max_s), (2.0, 1.0, 3.0));
    let s = Stats::of(&[4.0, 1.0, 2.0, 10.0]).unwrap();
    assert_eq!((s.median_s, s.min_s, s.max_s), (3.0, 1.0, 10.0));
    assert_eq!(Stats::of(&[]), None);
}

#[test]
fn ratios_are_medians_over_medians_with_the_extreme_pairings() {
    let f = figure(Key::Matrix, &[100.0, 120.0, 110.0], &[200.0, 250.0, 220.0]);
    let r = f.ratio.unwrap();
    assert_eq!(r.value, 0.5);
    assert_eq!(
        r.min,
        100.0 / 250.0,
        "head's best over the baseline's worst"
    );
    assert_eq!(
        r.max,
        120.0 / 200.0,
        "head's worst over the baseline's best"
    );
    assert!(figure(Key::Cold, &[1.0], &[]).ratio.is_none(), "one side");
    let zero = Stats::of(&[0.0]).unwrap();
    assert!(ratio(Stats::of(&[1.0]).unwrap(), zero).is_none());
}

#[test]
fn a_failed_run_marks_its_side_and_the_table() {
    let mut f = figure(Key::Edit(Arch::X86_64), &[1.0], &[2.0, 3.0]);
    f.baseline.runs.push(run(3, 4.0, false));
    f.finish();
    assert!(f.head.all_passed);
    assert!(!f.baseline.all_passed);
    assert_eq!(f.baseline.runs_s, [2.0, 3.0, 4.0], "still timed");
    let c = comparison(vec![f]);
    let t = table(&c);
    assert!(t.contains("3.00 s (2.00-4.00) FAILED"), "{t}");
    assert!(t.contains("  3/1  "), "runs, the baseline's first: {t}");
    assert!(
        t.contains("!!! not all verdicts passed (timed all the same): baseline edit → verdict x86_64 run 3: run-3.log"),
        "{t}"
    );
}

#[test]
fn sides_take_turns() {
    assert_eq!(
        interleaved(2, Side::Head),
        [
            (1, Side::Head),
            (1, Side::Baseline),
            (2, Side::Head),
            (2, Side::Baseline)
        ]
    );
    assert_eq!(
        interleaved(1, Side::Baseline),
        [(1, Side::Baseline), (1, Side::Head)]
    );
    assert!(interleaved(0, Side::Head).is_empty());
}

#[test]
fn the_plan_interleaves_every_figure() {
    let p = plan(&opts(&Arch::ALL, 2, 1, 2, 1));
    let steps: Vec<(Step, usize, Side)> = p.iter().map(|p| (p.step, p.n, p.side)).collect();
    use Side::{Baseline as B, Head as H};
    let x = Arch::X86_64;
    let a = Arch::Arm64;
    let r = Arch::Riscv64;
    assert_eq!(
        steps,
        [
            (Step::WarmUp, 1, H),
            (Step::WarmUp, 1, B),
            (Step::EditWarmUp(x), 1, H),
            (Step::EditWarmUp(x), 1, B),
            (Step::EditWarmUp(a), 1, H),
            (Step::EditWarmUp(a), 1, B),
            (Step::Boot(x), 1, H),
            (Step::Boot(x), 1, B),
            (Step::Boot(a), 1, H),
            (Step::Boot(a), 1, B),
            (Step::Boot(r), 1, H),
            (Step::Boot(r), 1, B),
            (Step::Boot(x), 2, H),
            (Step::Boot(x), 2, B),
            (Step::Boot(a), 2, H),
            (Step::Boot(a), 2, B),
            (Step::Boot(r), 2, H),
            (Step::Boot(r), 2, B),
            (Step::Edit(x), 1, H),
            (Step::Edit(x), 1, B),
            (Step::Edit(a), 1, H),
            (Step::Edit(a), 1, B),
            (Step::MatrixWarmUp, 1, H),
            (Step::MatrixWarmUp, 1, B),
            (Step::Matrix, 1, H),
            (Step::Matrix, 1, B),
            (Step::SameMatrix, 1, H),
            (Step::Matrix, 2, H),
            (Step::Matrix, 2, B),
            (Step::SameMatrix, 2, H),
            (Step::Cold, 1, B),
            (Step::Cold, 1, H),
        ]
    );
    // One arch, no matrix: its warm-up boots that arch alone; riscv64 has
    // no edit loop (nor its warm-up); no matrix warm-up.
    let p = plan(&opts(&[Arch::Riscv64], 1, 3, 0, 0));
    assert_eq!(
        p.iter().map(|p| p.step).collect::<Vec<_>>(),
        [Step::WarmUp, Step::WarmUp, Step::Boot(r), Step::Boot(r)]
    );
    let p = plan(&opts(&[x, a], 1, 0, 0, 0));
    assert!(
        p.iter()
            .all(|p| !matches!(p.step, Step::Edit(_) | Step::EditWarmUp(_))),
        "no edit runs, no edit warm-up"
    );
}

#[test]
fn each_step_runs_cargo_xtask_test_as_a_user_would() {
    let one = opts(&[Arch::Arm64], 1, 1, 0, 0);
    let all = opts(&[Arch::Arm64], 1, 1, 1, 0);
    let line = |s: Step, o: &Options| args(s, o, &[]).join(" ");
    assert_eq!(
        line(Step::WarmUp, &one),
        "test --arch arm64 --scenario boot --no-unit-tests"
    );
    assert_eq!(
        line(Step::WarmUp, &all),
        "test --arch all --scenario boot --no-unit-tests",
        "the matrix boots every arch"
    );
    assert_eq!(
        line(Step::Boot(Arch::X86_64), &one),
        "test --arch x86_64 --scenario boot"
    );
    assert_eq!(
        line(Step::Edit(Arch::Arm64), &one),
        "test --arch arm64 --scenario probe"
    );
    assert_eq!(
        line(Step::EditWarmUp(Arch::X86_64), &one),
        "test --arch x86_64 --scenario probe"
    );
    for s in [Step::Matrix, Step::MatrixWarmUp, Step::Cold] {
        assert_eq!(line(s, &one), "test");
    }
    let same = ["boot".to_string(), "probe".to_string()];
    assert_eq!(
        args(Step::SameMatrix, &all, &same).join(" "),
        "test --unit-tests --scenario boot,probe",
        "the baseline's scenarios, with the unit tests its matrix ran"
    );
}

#[test]
fn a_reports_scenarios_are_named_once_without_the_host() {
    let report = r#"{"results": [
        {"arch": "host", "scenario": "cargo-test", "verdict": "pass"},
        {"arch": "x86_64", "scenario": "modules", "verdict": "pass"},
        {"arch": "arm64", "scenario": "boot", "verdict": "pass"},
        {"arch": "arm64", "scenario": "modules", "verdict": "fail"},
        {"arch": "riscv64", "scenario": "platform", "verdict": "skip"}
    ]}"#;
    assert_eq!(scenario_names(report), ["modules", "boot", "platform"]);
    assert!(scenario_names("not json").is_empty());
}

#[test]
fn the_run_folder_is_the_last_report_line() {
    let out = "test: results in /x\nreport: /t/pci-rig/1/report.json\n\nreport: /t/pci-rig/2/report.json\n";
    assert_eq!(report_of(out), Some(PathBuf::from("/t/pci-rig/2")));
    assert_eq!(
        report_of("report: /a b/r/report.json\r\n"),
        Some(PathBuf::from("/a b/r"))
    );
    assert_eq!(report_of("no report here\n  report: /x/report.json"), None);
    assert_eq!(report_of(""), None);
}

#[test]
fn reports_give_counts_and_the_boots_duration() {
    let r = r#"{"results":[
        {"arch":"x86_64","scenario":"unit tests","verdict":"pass","duration_s":9.0},
        {"arch":"arm64","scenario":"boot","verdict":"fail","duration_s":0.9},
        {"arch":"x86_64","scenario":"boot","verdict":"pass","duration_s":1.25},
        {"arch":"riscv64","scenario":"boot","verdict":"skip","duration_s":0.0}]}"#;
    assert_eq!(
        counts(r),
        Some(Counts {
            pass: 2,
            fail: 1,
            skip: 1
        })
    );
    assert_eq!(scenario_wall(r, Arch::X86_64, "boot"), Some(1.25));
    assert_eq!(scenario_wall(r, Arch::Arm64, "boot"), Some(0.9));
    assert_eq!(scenario_wall(r, Arch::X86_64, "probe"), None);
    assert_eq!(counts("not json"), None);
    assert_eq!(scenario_wall("{}", Arch::X86_64, "boot"), None);
}

fn all_figures() -> Vec<Figure> {
    let x = Arch::X86_64;
    let a = Arch::Arm64;
    vec![
        figure(Key::Matrix, &[60.0], &[100.0]),
        figure(Key::SameMatrix, &[45.0], &[100.0]),
        figure(Key::Edit(x), &[4.0, 5.0], &[10.0]),
        figure(Key::Boot(x, Wall::Command), &[2.0], &[3.0]),
        figure(Key::Boot(x, Wall::Scenario), &[1.2, 1.4], &[2.0]),
        figure(Key::Boot(a, Wall::Command), &[2.0], &[1.0]),
        figure(Key::Boot(a, Wall::Scenario), &[1.0], &[1.0]),
    ]
}

#[test]
fn goals_say_met_or_not_from_the_same_run() {
    let g = goals(&all_figures());
    let by = |name: &str, of: &str| {
        g.iter()
            .find(|g| g.name == name && g.of == of)
            .unwrap_or_else(|| panic!("no goal {name} ({of}) in {g:?}"))
    };
    let m = by("warm matrix", "head/baseline");
    assert!(!m.met && (m.ratio.value - 0.6).abs() < 1e-9, "0.6 > 0.5");
    let same = by("warm matrix, the baseline's scenarios", "head/baseline");
    assert!(
        same.met && (same.ratio.value - 0.45).abs() < 1e-9,
        "0.45 ≤ 0.5"
    );
    let e = by("edit → verdict x86_64", "head/baseline");
    assert!(e.met && (e.ratio.value - 0.45).abs() < 1e-9, "4.5/10 ≤ 0.5");
    assert_eq!(e.goal, 0.5);
    let eb = by(
        "edit → verdict x86_64 / boot x86_64 alone (scenario wall)",
        "head",
    );
    assert!(!eb.met, "4.5 / 1.3 > 1.5");
    assert!((eb.ratio.value - 4.5 / 1.3).abs() < 1e-9);
    assert!((eb.ratio.min - 4.0 / 1.4).abs() < 1e-9);
    assert!((eb.ratio.max - 5.0 / 1.2).abs() < 1e-9);
    let base = by(
        "edit → verdict x86_64 / boot x86_64 alone (command)",
        "baseline",
    );
    assert!(!base.met && (base.ratio.value - 10.0 / 3.0).abs() < 1e-9);
    let xa = by(
        "boot x86_64 alone (scenario wall) / boot arm64 alone (scenario wall)",
        "head",
    );
    assert!(xa.met && (xa.ratio.value - 1.3).abs() < 1e-9, "1.3 ≤ 1.5");
    let xa = by(
        "boot x86_64 alone (scenario wall) / boot arm64 alone (scenario wall)",
        "baseline",
    );
    assert!(!xa.met, "2.0 > 1.5");
    let xa = by(
        "boot x86_64 alone (command) / boot arm64 alone (command)",
        "head",
    );
    assert!(
        xa.met && xa.ratio.value == 1.0,
        "exactly on the goal is met"
    );
    assert!(
        g.iter().all(|g| !g.name.starts_with("cold")),
        "no cold run, no cold goal"
    );
    let cold = goals(&[figure(Key::Cold, &[650.0], &[1000.0])]);
    assert_eq!(cold.len(), 1);
    assert!(cold[0].met && cold[0].goal == 0.65, "0.65 ≤ 0.65");
    let cold = goals(&[figure(Key::Cold, &[651.0], &[1000.0])]);
    assert!(!cold[0].met);
}

fn comparison(figures: Vec<Figure>) -> Comparison {
    Comparison {
        baseline_rev: "512677d".into(),
        baseline_sha: "512677d3f311e6f970f61567beacf1bf7f34091e".into(),
        baseline_tree: "/t/baseline-512677d3f311".into(),
        head: "abc1234-dirty".into(),
        head_sha: "abc1234".into(),
        warm_up: vec![],
        goals: goals(&figures),
        figures,
        missing: vec![],
    }
}

#[test]
fn the_table_names_both_sides_every_figure_and_goal() {
    let mut c = comparison(all_figures());
    c.missing.push("head boot x86_64 run 1: no duration".into());
    let t = table(&c);
    assert!(t.contains("baseline 512677d"), "{t}");
    let matrix = t.lines().find(|l| l.starts_with("warm matrix")).unwrap();
    assert!(
        matrix.contains("1/1") && matrix.contains("100 s (100-100)"),
        "{matrix}"
    );
    assert!(matrix.contains("60.0 s (60.0-60.0)"), "{matrix}");
    assert!(matrix.ends_with("0.60 (0.60-0.60)"), "{matrix}");
    assert!(
        t.contains("goal, head/baseline: warm matrix = 0.60 (0.60-0.60) ≤ 0.5: NOT met"),
        "{t}"
    );
    assert!(
        t.contains("goal, head/baseline: edit → verdict x86_64 = 0.45 (0.40-0.50) ≤ 0.5: met"),
        "{t}"
    );
    assert_eq!(t.matches("goal, ").count(), c.goals.len());
    assert!(
        t.contains("!!! not measured: head boot x86_64 run 1"),
        "{t}"
    );
    assert!(!t.contains("FAILED"), "{t}");
}

#[test]
fn the_chart_has_both_sides_per_figure_and_the_ratio_beside() {
    let c = comparison(all_figures());
    let p = panels(&c);
    assert_eq!(p.len(), 2);
    assert_eq!(p[0].bars.len(), 2 * c.figures.len());
    let head = p[0]
        .bars
        .iter()
        .find(|b| b.label == "warm matrix (head)")
        .unwrap();
    assert_eq!(head.value, 60.0);
    assert!(head.text.contains("×0.60 (0.60-0.60)"), "{}", head.text);
    let base = p[0]
        .bars
        .iter()
        .find(|b| b.label == "warm matrix (512677d)")
        .unwrap();
    assert_eq!((base.value, base.series), (100.0, 0));
    assert_eq!(p[1].bars.len(), c.goals.len());
    assert!(p[1].bars.iter().any(|b| b.text.ends_with("not met")));
    let svg = crate::svg::render("t", "s", &p);
    assert!(svg.contains("×0.60") && !svg.contains("NaN"));
}
