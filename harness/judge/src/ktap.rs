//! KTAP, the format both our guest-side scenario runner and KUnit print:
//! `1..N` plans and `ok N name` / `not ok N name # SKIP why` results,
//! nested by four spaces of indentation per level.

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Line {
    Plan { depth: usize, count: usize },
    Result(TestResult),
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TestResult {
    pub depth: usize,
    pub number: usize,
    pub ok: bool,
    pub skip: bool,
    pub name: String,
    /// Whatever follows `#`, e.g. a skip reason.
    pub directive: String,
}

/// Parses one console line (printk timestamp already stripped).
pub fn parse_line(line: &str) -> Option<Line> {
    let body = line.trim_start_matches(' ');
    let depth = (line.len() - body.len()) / 4;
    let body = body.trim_end();
    if let Some(n) = body.strip_prefix("1..") {
        return Some(Line::Plan {
            depth,
            count: n.parse().ok()?,
        });
    }
    let (ok, rest) = if let Some(r) = body.strip_prefix("ok ") {
        (true, r)
    } else {
        (false, body.strip_prefix("not ok ")?)
    };
    let (number, rest) = rest.split_once(' ').unwrap_or((rest, ""));
    let number = number.parse().ok()?;
    let (name, directive) = match rest.split_once('#') {
        Some((n, d)) => (n.trim(), d.trim()),
        None => (rest.trim(), ""),
    };
    let name = name.trim_start_matches("- ").to_string();
    // KTAP skips are `ok … # SKIP`; a failing test whose reason happens to start with
    // "skip" is a failure.
    let skip = ok && directive.to_ascii_uppercase().starts_with("SKIP");
    Some(Line::Result(TestResult {
        depth,
        number,
        ok,
        skip,
        name,
        directive: directive.to_string(),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_plans_results_skips_and_depth() {
        assert_eq!(parse_line("1..3"), Some(Line::Plan { depth: 0, count: 3 }));
        assert_eq!(
            parse_line("    1..12"),
            Some(Line::Plan {
                depth: 1,
                count: 12
            })
        );
        let Some(Line::Result(r)) = parse_line("ok 2 unload # SKIP no module") else {
            panic!()
        };
        assert_eq!(
            (
                r.number,
                r.ok,
                r.skip,
                r.name.as_str(),
                r.directive.as_str()
            ),
            (2, true, true, "unload", "SKIP no module")
        );
        // A failure whose reason starts with "skip" is a failure, not a skip.
        let Some(Line::Result(r)) = parse_line("not ok 3 load # skipping: no such file") else {
            panic!()
        };
        assert_eq!((r.ok, r.skip), (false, false));
        let Some(Line::Result(r)) = parse_line("    ok 7 - rust_doctest_kernel_io_rs_0") else {
            panic!()
        };
        assert_eq!(
            (r.depth, r.number, r.ok, r.name.as_str()),
            (1, 7, true, "rust_doctest_kernel_io_rs_0")
        );
    }

    #[test]
    fn other_lines_are_not_ktap() {
        for l in [
            "okay then",
            "ok x name",
            "# Subtest: rust_doctests_kernel",
            "not ok",
        ] {
            assert_eq!(parse_line(l), None, "{l}");
        }
    }
}
