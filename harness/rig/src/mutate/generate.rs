//! Generated mutants (`cargo xtask mutate --generate FILE`): operators in the spirit of
//! cargo-mutants, applied by a real Rust parser (syn) to every function body of one module's
//! source. Each mutant has a stable name, `gen:<module>:<function>:<operator>:<hash of the
//! original text>` (and `-N` for the N-th same text in that function), so a survivor is rerun
//! with `--only NAME` until the function itself changes.
//!
//! Operators:
//! - `cmp`: a comparison negated (`==`/`!=`, `<`/`>=`, `>`/`<=`);
//! - `cond-true`, `cond-false`: an `if` condition (not an `if let`) replaced by a constant;
//! - `delete-call`: a statement that is only a call (`f(…);`, `x.m(…)?;`) deleted: a register
//!   write, a kernel call, a step left out;
//! - `error-ignored`: `expr?;` becomes `let _ = expr;`: an error code lost;
//! - `dma-direction`: `ToDevice` and `FromDevice` swapped;
//! - `plus-one`: an integer literal one larger: an off-by-one in a bound, a wrong bit;
//! - `bool-flip`: `true` and `false` swapped.

use super::Mutant;
use anyhow::{bail, Context, Result};
use proc_macro2::LineColumn;
use std::path::Path;
use syn::spanned::Spanned;
use syn::visit::{self, Visit};

/// The scenarios a generated mutant of a module folder (or of the kernel overlay) runs
/// without a run's coverage to pick them: the ones that exercise most of its code, each boot
/// cheap.
pub fn scenarios_for(file: &str) -> Result<Vec<String>> {
    // The abstractions' code runs under the driver: its scenarios are theirs.
    let dir = match super::is_kernel(file) {
        true => "driver",
        false => super::module_dir(file)?,
    };
    let names: &[&str] = match dir {
        // Besides probe, DMA, interrupts and unbind: the driver's error handlers, shutdown,
        // system sleep and runtime PM, each a path only its scenario reaches.
        "driver" => &[
            "dma",
            "dma-surprise",
            "irq-intx",
            "probe-error",
            "aer",
            "shutdown",
            "pm",
            "rpm",
        ],
        "driver-mainline" => &[
            "mainline-dma",
            "mainline-dma-surprise",
            "mainline-irq-intx",
            "mainline-probe-error",
        ],
        "bench" => &["bench"],
        _ => &["platform", "cpufreq"],
    };
    Ok(names.iter().map(|s| s.to_string()).collect())
}

/// Every mutant the operators make of `file` (relative to `root`), in source order.
pub fn generate(
    root: &Path,
    file: &str,
    reach: Option<&crate::run::coverage::Reach>,
) -> Result<Vec<Mutant>> {
    let scenarios = scenarios_for(file)?;
    let source =
        std::fs::read_to_string(root.join(file)).with_context(|| format!("reading {file}"))?;
    let parsed =
        syn::parse_file(&source).map_err(|e| anyhow::anyhow!("{file}: does not parse: {e}"))?;
    let mut finder = Finder {
        source: &source,
        line_starts: std::iter::once(0)
            .chain(source.match_indices('\n').map(|(i, _)| i + 1))
            .collect(),
        impl_ty: None,
        func: None,
        found: Vec::new(),
    };
    finder.visit_file(&parsed);
    let module = Path::new(file)
        .file_stem()
        .and_then(|s| s.to_str())
        .unwrap_or("module");
    let mut out: Vec<Mutant> = Vec::new();
    let mut unreached = 0;
    for f in finder.found {
        let base = format!(
            "gen:{module}:{}:{}:{:06x}",
            f.func,
            f.op,
            fnv(&f.original) & 0xff_ffff
        );
        let twins = out
            .iter()
            .filter(|m| m.name == base || m.name.starts_with(&format!("{base}-")))
            .count();
        let name = if twins == 0 {
            base
        } else {
            format!("{base}-{}", twins + 1)
        };
        let line = source[..f.start].matches('\n').count() + 1;
        let last = line + f.original.matches('\n').count();
        let scenarios = match reach.map(|r| reach_of(r, file, line..=last)) {
            // No code on its lines (a constant, a pattern): coverage cannot pick.
            None | Some(None) => scenarios.clone(),
            Some(Some(ran)) if ran.is_empty() => {
                unreached += 1;
                continue;
            }
            Some(Some(ran)) => chosen(&scenarios, ran),
        };
        out.push(Mutant {
            name,
            class: f.class.to_string(),
            file: file.to_string(),
            why: format!(
                "{}:{line}, in {}: `{}` becomes `{}`",
                file,
                f.func,
                one_line(&f.original),
                one_line(&f.replace)
            ),
            find: f.original,
            replace: f.replace,
            scenarios,
            survives: None,
            at: Some(f.start),
            debug: false,
        });
    }
    if unreached > 0 {
        eprintln!(
            "mutate: {file}: {unreached} mutants left out, on lines the run measured and no \
             scenario ran (coverage gaps: no boot can tell them from the clean module)"
        );
    }
    if out.is_empty() {
        bail!("{file}: the operators found nothing to change that a scenario runs");
    }
    Ok(out)
}

/// The scenarios that ran any of `lines` of `file`; `None` when none of them has code the
/// run measured.
fn reach_of(
    reach: &crate::run::coverage::Reach,
    file: &str,
    lines: std::ops::RangeInclusive<usize>,
) -> Option<Vec<String>> {
    let (a, b) = (*lines.start() as u32, *lines.end() as u32);
    let measured: Vec<&std::collections::BTreeSet<String>> =
        reach.get(file)?.range(a..=b).map(|(_, s)| s).collect();
    if measured.is_empty() {
        return None;
    }
    let mut out: Vec<String> = measured.into_iter().flatten().cloned().collect();
    out.sort();
    out.dedup();
    Some(out)
}

/// Of the scenarios that ran a mutant's lines, those of the module's usual set (each boot
/// cheap), or else the first three.
fn chosen(usual: &[String], ran: Vec<String>) -> Vec<String> {
    let both: Vec<String> = usual.iter().filter(|s| ran.contains(s)).cloned().collect();
    if both.is_empty() {
        ran.into_iter().take(3).collect()
    } else {
        both
    }
}

fn one_line(s: &str) -> String {
    let s: Vec<&str> = s.split_whitespace().collect();
    let s = s.join(" ");
    if s.len() > 70 {
        format!(
            "{}…",
            &s[..s.char_indices().nth(69).map_or(s.len(), |(i, _)| i)]
        )
    } else {
        s
    }
}

/// FNV-1a: a stable hash of the original text for the mutant's name.
fn fnv(s: &str) -> u64 {
    s.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

struct Found {
    func: String,
    op: &'static str,
    class: &'static str,
    start: usize,
    original: String,
    replace: String,
}

struct Finder<'a> {
    source: &'a str,
    line_starts: Vec<usize>,
    /// The type of the `impl` block being walked.
    impl_ty: Option<String>,
    /// The function being walked (`Type::name` or `name`); nothing outside one is mutated.
    func: Option<String>,
    found: Vec<Found>,
}

impl Finder<'_> {
    fn offset(&self, at: LineColumn) -> usize {
        let start = self.line_starts[at.line - 1];
        let line = &self.source[start..];
        start
            + line
                .char_indices()
                .nth(at.column)
                .map_or(line.len(), |(i, _)| i)
    }

    /// Records replacing the source text of `node` by `replace`, if inside a function.
    fn add(&mut self, node: &impl Spanned, op: &'static str, class: &'static str, replace: &str) {
        let Some(func) = self.func.clone() else {
            return;
        };
        let span = node.span();
        let (start, end) = (self.offset(span.start()), self.offset(span.end()));
        if start >= end {
            return;
        }
        let original = self.source[start..end].to_string();
        if original == replace {
            return;
        }
        self.found.push(Found {
            func,
            op,
            class,
            start,
            original,
            replace: replace.to_string(),
        });
    }

    fn in_function(&mut self, name: String, f: impl FnOnce(&mut Self)) {
        let outer = self.func.replace(name);
        f(self);
        self.func = outer;
    }
}

/// Whether an expression is only a call (maybe with `?` or `.await`).
fn is_call(e: &syn::Expr) -> bool {
    match e {
        syn::Expr::Call(_) | syn::Expr::MethodCall(_) => true,
        syn::Expr::Try(t) => is_call(&t.expr),
        _ => false,
    }
}

/// Whether a condition binds (`if let`, a let chain): not replaceable by a constant.
fn binds(e: &syn::Expr) -> bool {
    match e {
        syn::Expr::Let(_) => true,
        syn::Expr::Binary(b) => binds(&b.left) || binds(&b.right),
        syn::Expr::Paren(p) => binds(&p.expr),
        _ => false,
    }
}

impl<'ast> Visit<'ast> for Finder<'_> {
    fn visit_item_impl(&mut self, i: &'ast syn::ItemImpl) {
        let ty = match &*i.self_ty {
            syn::Type::Path(p) => p.path.segments.last().map(|s| s.ident.to_string()),
            _ => None,
        };
        let outer = std::mem::replace(&mut self.impl_ty, ty);
        visit::visit_item_impl(self, i);
        self.impl_ty = outer;
    }

    fn visit_item_fn(&mut self, i: &'ast syn::ItemFn) {
        self.in_function(i.sig.ident.to_string(), |s| visit::visit_item_fn(s, i));
    }

    fn visit_impl_item_fn(&mut self, i: &'ast syn::ImplItemFn) {
        let name = match &self.impl_ty {
            Some(t) => format!("{t}::{}", i.sig.ident),
            None => i.sig.ident.to_string(),
        };
        self.in_function(name, |s| visit::visit_impl_item_fn(s, i));
    }

    fn visit_expr_binary(&mut self, b: &'ast syn::ExprBinary) {
        use syn::BinOp::*;
        let negated = match b.op {
            Eq(_) => Some("!="),
            Ne(_) => Some("=="),
            Lt(_) => Some(">="),
            Ge(_) => Some("<"),
            Gt(_) => Some("<="),
            Le(_) => Some(">"),
            _ => None,
        };
        if let Some(n) = negated {
            self.add(&b.op, "cmp", "negated comparison", n);
        }
        visit::visit_expr_binary(self, b);
    }

    fn visit_expr_if(&mut self, i: &'ast syn::ExprIf) {
        if !binds(&i.cond) {
            self.add(&i.cond, "cond-true", "condition always true", "true");
            self.add(&i.cond, "cond-false", "condition always false", "false");
        }
        visit::visit_expr_if(self, i);
    }

    fn visit_stmt(&mut self, s: &'ast syn::Stmt) {
        if let syn::Stmt::Expr(e, Some(_)) = s {
            if is_call(e) {
                self.add(s, "delete-call", "call left out", "");
                if let syn::Expr::Try(t) = e {
                    let inner = t.expr.span();
                    let (a, b) = (self.offset(inner.start()), self.offset(inner.end()));
                    let replace = format!("let _ = {};", &self.source[a..b]);
                    self.add(s, "error-ignored", "error ignored", &replace);
                }
            }
        }
        visit::visit_stmt(self, s);
    }

    fn visit_expr_path(&mut self, p: &'ast syn::ExprPath) {
        if let Some(last) = p.path.segments.last() {
            let other = match last.ident.to_string().as_str() {
                "ToDevice" => Some("FromDevice"),
                "FromDevice" => Some("ToDevice"),
                _ => None,
            };
            if let Some(other) = other {
                self.add(&last.ident, "dma-direction", "wrong DMA direction", other);
            }
        }
        visit::visit_expr_path(self, p);
    }

    fn visit_lit(&mut self, l: &'ast syn::Lit) {
        match l {
            syn::Lit::Int(i) => {
                if let Ok(n) = i.base10_parse::<u128>() {
                    let text = i.to_string();
                    let plus = n + 1;
                    let replace = if text.starts_with("0x") {
                        format!("{plus:#x}{}", i.suffix())
                    } else {
                        format!("{plus}{}", i.suffix())
                    };
                    self.add(i, "plus-one", "off by one", &replace);
                }
            }
            syn::Lit::Bool(b) => {
                self.add(
                    b,
                    "bool-flip",
                    "boolean flipped",
                    if b.value { "false" } else { "true" },
                );
            }
            _ => {}
        }
        visit::visit_lit(self, l);
    }

    // Attributes and macro bodies are not code the operators change.
    fn visit_attribute(&mut self, _: &'ast syn::Attribute) {}
    fn visit_macro(&mut self, _: &'ast syn::Macro) {}
}

#[cfg(test)]
mod tests {
    use super::*;

    const SOURCE: &str = r#"
const LIMIT: u32 = 4;

impl Driver {
    fn probe(dev: &Device) -> Result {
        if dev.id() == 0x10 {
            dev.write32(1, REG)?;
        }
        let map = Mapping::new(dev, Direction::ToDevice)?;
        if let Some(x) = dev.find() {
            dev.kick(x);
        }
        pr_info!("{}", 5);
        Ok(())
    }
}
"#;

    fn generated() -> Vec<Mutant> {
        generated_with(None)
    }

    fn generated_with(reach: Option<&crate::run::coverage::Reach>) -> Vec<Mutant> {
        static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("pci-rig-gen-{}-{n}", std::process::id()));
        let file = "guest-kernel/driver/x.rs";
        std::fs::create_dir_all(dir.join("guest-kernel/driver")).unwrap();
        std::fs::write(dir.join(file), SOURCE).unwrap();
        let out = generate(&dir, file, reach).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        out
    }

    #[test]
    fn coverage_picks_each_mutants_scenarios_and_leaves_out_what_nothing_ran() {
        let all = generated();
        // Only the line of the first mutant ran, in `rpm` and `dma` (the usual set's) and `sweep`.
        let first: u32 = all[0]
            .why
            .split(':')
            .nth(1)
            .unwrap()
            .split(',')
            .next()
            .unwrap()
            .parse()
            .unwrap();
        let mut reach = crate::run::coverage::Reach::new();
        reach
            .entry("guest-kernel/driver/x.rs".into())
            .or_default()
            .insert(
                first,
                ["rpm", "dma", "sweep"]
                    .map(String::from)
                    .into_iter()
                    .collect(),
            );
        // A line with no code the run measured: coverage cannot pick, the usual set runs.
        let picked = generated_with(Some(&reach));
        assert_eq!(picked.len(), all.len());
        let on_first = |m: &Mutant| m.why.contains(&format!(":{first},"));
        for (p, a) in picked.iter().zip(&all) {
            match on_first(a) {
                true => assert_eq!(p.scenarios, ["dma", "rpm"]),
                false => assert_eq!(p, a),
            }
        }
        // Every other line measured and run by no scenario: those mutants are left out.
        let lines = reach.get_mut("guest-kernel/driver/x.rs").unwrap();
        for l in 1..=40 {
            lines.entry(l).or_default();
        }
        let picked = generated_with(Some(&reach));
        assert!(!picked.is_empty() && picked.len() < all.len());
        assert!(
            picked.iter().all(|m| m.scenarios == ["dma", "rpm"]),
            "{:?}",
            picked[0].scenarios
        );
        assert_eq!(
            super::chosen(
                &["probe".into()],
                vec!["a".into(), "b".into(), "c".into(), "d".into()]
            )
            .len(),
            3
        );
    }

    #[test]
    fn every_operator_finds_its_places_inside_functions_only() {
        let m = generated();
        let ops: Vec<(String, &str, &str)> = m
            .iter()
            .map(|m| {
                (
                    m.name.rsplit(':').nth(1).unwrap().to_string(),
                    m.find.as_str(),
                    m.replace.as_str(),
                )
            })
            .collect();
        let want: Vec<(String, &str, &str)> = [
            ("cond-true", "dev.id() == 0x10", "true"),
            ("cond-false", "dev.id() == 0x10", "false"),
            ("cmp", "==", "!="),
            ("plus-one", "0x10", "0x11"),
            ("delete-call", "dev.write32(1, REG)?;", ""),
            (
                "error-ignored",
                "dev.write32(1, REG)?;",
                "let _ = dev.write32(1, REG);",
            ),
            ("plus-one", "1", "2"),
            ("dma-direction", "ToDevice", "FromDevice"),
            ("delete-call", "dev.kick(x);", ""),
        ]
        .iter()
        .map(|(o, f, r)| (o.to_string(), *f, *r))
        .collect();
        assert_eq!(
            ops, want,
            "the const outside a function, the `if let` and the macro's arguments stay"
        );
    }

    #[test]
    fn names_are_stable_and_offsets_exact() {
        let (a, b) = (generated(), generated());
        assert_eq!(a, b);
        let names: std::collections::BTreeSet<&str> = a.iter().map(|m| m.name.as_str()).collect();
        assert_eq!(names.len(), a.len(), "unique");
        assert!(
            a[0].name.starts_with("gen:x:Driver::probe:cond-true:"),
            "{}",
            a[0].name
        );
        for m in &a {
            let at = m.at.unwrap();
            assert_eq!(&SOURCE[at..at + m.find.len()], m.find);
        }
        assert!(
            a[0].why
                .contains("guest-kernel/driver/x.rs:6, in Driver::probe"),
            "{}",
            a[0].why
        );
    }
}
