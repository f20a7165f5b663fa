//! Horizontal bar charts as one self-contained SVG file: no fonts to find,
//! no plotting crate, viewable in any browser.

use std::fmt::Write as _;

/// One bar: its label on the left, its length, the text printed after it,
/// and its colour (an index into the palette, the same for one series).
pub struct Bar {
    pub label: String,
    pub value: f64,
    pub text: String,
    pub series: usize,
}

/// A chart of bars sharing one axis.
pub struct Panel {
    pub title: String,
    /// The axis unit, e.g. "ms".
    pub unit: String,
    pub bars: Vec<Bar>,
    /// A vertical goal line and its label.
    pub goal: Option<(f64, String)>,
    /// Logarithmic axis, for values spanning decades (all must be > 0).
    pub log: bool,
}

const WIDTH: f64 = 960.0;
/// The least room for the labels left of the bars.
const LABEL_W: f64 = 300.0;
const PLOT_W: f64 = 520.0;
const ROW: f64 = 20.0;
const HEAD: f64 = 34.0;
const FOOT: f64 = 30.0;
const PALETTE: [&str; 6] = [
    "#4878a8", "#e0883a", "#5aa05a", "#c04848", "#8c6bb1", "#7f7f7f",
];

pub fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// Maps a value to an x offset within the plot, and lists the axis ticks.
struct Axis {
    log: bool,
    lo: f64,
    hi: f64,
}

impl Axis {
    fn new(p: &Panel) -> Self {
        let values = p
            .bars
            .iter()
            .map(|b| b.value)
            .chain(p.goal.as_ref().map(|g| g.0))
            .filter(|v| v.is_finite() && (!p.log || *v > 0.0));
        if p.log {
            let (min, max) = values.fold((f64::MAX, f64::MIN_POSITIVE), |(a, b), v| {
                (a.min(v), b.max(v))
            });
            let lo = min.min(max).log10().floor();
            let hi = max.log10().ceil().max(lo + 1.0);
            Axis { log: true, lo, hi }
        } else {
            let max = values.fold(0.0, f64::max);
            Axis {
                log: false,
                lo: 0.0,
                hi: nice_ceiling(max),
            }
        }
    }

    fn x(&self, v: f64) -> f64 {
        let t = if self.log {
            (v.max(f64::MIN_POSITIVE).log10() - self.lo) / (self.hi - self.lo)
        } else {
            v / self.hi
        };
        t.clamp(0.0, 1.0) * PLOT_W
    }

    fn ticks(&self) -> Vec<f64> {
        if self.log {
            (self.lo as i32..=self.hi as i32)
                .map(|e| 10f64.powi(e))
                .collect()
        } else {
            (0..=4).map(|i| self.hi * f64::from(i) / 4.0).collect()
        }
    }
}

/// The smallest 1, 2 or 5 times a power of ten at or above `v` (1 for 0).
fn nice_ceiling(v: f64) -> f64 {
    if v <= 0.0 || !v.is_finite() {
        return 1.0;
    }
    let p = 10f64.powf(v.log10().floor());
    [1.0, 2.0, 5.0, 10.0]
        .iter()
        .map(|m| m * p)
        .find(|c| *c >= v * 0.999_999)
        .unwrap_or(10.0 * p)
}

/// A tick's text: short, without trailing zeros.
fn tick_text(v: f64) -> String {
    if v >= 1.0 || v == 0.0 {
        format!("{}", (v * 100.0).round() / 100.0)
    } else {
        format!("{v:.3}")
            .trim_end_matches('0')
            .trim_end_matches('.')
            .to_string()
    }
}

/// Room for the labels left of the bars and the texts right of them: at
/// least the default's, more when a label or a text would not fit.
struct Layout {
    label_w: f64,
    tail_w: f64,
}

impl Layout {
    fn of(panels: &[Panel]) -> Layout {
        let longest = |text: fn(&Bar) -> &str| {
            panels
                .iter()
                .flat_map(|p| &p.bars)
                .map(|b| text(b).chars().count())
                .max()
                .unwrap_or(0) as f64
        };
        // About 6.6 px a character at 12 px (labels), 6.2 at 11 px (texts).
        Layout {
            label_w: (longest(|b| &b.label) * 6.6 + 16.0).max(LABEL_W),
            tail_w: (longest(|b| &b.text) * 6.2 + 12.0).max(WIDTH - LABEL_W - PLOT_W),
        }
    }

    fn width(&self) -> f64 {
        self.label_w + PLOT_W + self.tail_w
    }
}

fn panel_height(p: &Panel) -> f64 {
    HEAD + ROW * p.bars.len() as f64 + FOOT
}

fn draw(out: &mut String, p: &Panel, top: f64, layout: &Layout) {
    let axis = Axis::new(p);
    let x0 = layout.label_w;
    let bottom = top + HEAD + ROW * p.bars.len() as f64;
    let _ = writeln!(
        out,
        r#"<text x="10" y="{:.1}" font-weight="bold">{}</text>"#,
        top + 22.0,
        escape(&p.title)
    );
    for t in axis.ticks() {
        let x = x0 + axis.x(t);
        let _ = writeln!(
            out,
            r##"<line x1="{x:.1}" y1="{:.1}" x2="{x:.1}" y2="{bottom:.1}" stroke="#ddd"/><text x="{x:.1}" y="{:.1}" font-size="10" text-anchor="middle" fill="#555">{}</text>"##,
            top + HEAD - 4.0,
            bottom + 12.0,
            tick_text(t)
        );
    }
    let _ = writeln!(
        out,
        r##"<text x="{:.1}" y="{:.1}" font-size="10" text-anchor="end" fill="#555">{}{}</text>"##,
        x0 + PLOT_W,
        top + 22.0,
        escape(&p.unit),
        if axis.log { ", log scale" } else { "" }
    );
    for (i, b) in p.bars.iter().enumerate() {
        let y = top + HEAD + ROW * i as f64;
        let w = axis.x(b.value);
        let _ = writeln!(
            out,
            r##"<text x="{:.1}" y="{:.1}" text-anchor="end" font-size="12">{}</text><rect x="{x0:.1}" y="{:.1}" width="{w:.1}" height="{:.1}" fill="{}"/><text x="{:.1}" y="{:.1}" font-size="11" fill="#333">{}</text>"##,
            x0 - 6.0,
            y + 14.0,
            escape(&b.label),
            y + 3.0,
            ROW - 6.0,
            PALETTE[b.series % PALETTE.len()],
            x0 + w + 4.0,
            y + 14.0,
            escape(&b.text)
        );
    }
    if let Some((goal, label)) = &p.goal {
        let x = x0 + axis.x(*goal);
        let _ = writeln!(
            out,
            r##"<line x1="{x:.1}" y1="{:.1}" x2="{x:.1}" y2="{bottom:.1}" stroke="#c00" stroke-dasharray="4 3"/><text x="{:.1}" y="{:.1}" font-size="10" fill="#c00">{}</text>"##,
            top + HEAD - 2.0,
            x + 3.0,
            top + HEAD - 6.0,
            escape(label)
        );
    }
}

/// The whole picture: a title, then the panels one under the other.
pub fn render(title: &str, subtitle: &str, panels: &[Panel]) -> String {
    let layout = Layout::of(panels);
    let width = layout.width().ceil();
    let height = 60.0 + panels.iter().map(panel_height).sum::<f64>();
    let mut out = format!(
        r##"<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height:.0}" viewBox="0 0 {width} {height:.0}" font-family="sans-serif">
<rect width="100%" height="100%" fill="white"/>
<text x="10" y="24" font-size="18" font-weight="bold">{}</text>
<text x="10" y="44" font-size="11" fill="#555">{}</text>
"##,
        escape(title),
        escape(subtitle)
    );
    let mut top = 50.0;
    for p in panels {
        draw(&mut out, p, top, &layout);
        top += panel_height(p);
    }
    out.push_str("</svg>\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn panel(values: &[f64], log: bool) -> Panel {
        Panel {
            title: "t <1>".into(),
            unit: "ms".into(),
            bars: values
                .iter()
                .enumerate()
                .map(|(i, v)| Bar {
                    label: format!("bar {i}"),
                    value: *v,
                    text: format!("{v}"),
                    series: i,
                })
                .collect(),
            goal: Some((12.0, "goal 12".into())),
            log,
        }
    }

    #[test]
    fn nice_axis_ends() {
        assert_eq!(nice_ceiling(0.0), 1.0);
        assert_eq!(nice_ceiling(7.3), 10.0);
        assert_eq!(nice_ceiling(12.0), 20.0);
        assert_eq!(nice_ceiling(300.0), 500.0);
        assert_eq!(nice_ceiling(0.04), 0.05);
        assert_eq!(tick_text(0.25), "0.25");
        assert_eq!(tick_text(12.5), "12.5");
    }

    #[test]
    fn bars_scale_to_the_largest_value_or_goal() {
        let p = panel(&[5.0, 10.0], false);
        let a = Axis::new(&p);
        assert_eq!(a.hi, 20.0, "the goal (12) sets the end");
        assert_eq!(a.x(10.0), PLOT_W / 2.0);
        let l = Axis::new(&panel(&[1.0, 1000.0], true));
        assert_eq!((l.lo, l.hi), (0.0, 3.0));
        assert!((l.x(10.0) - PLOT_W / 3.0).abs() < 1e-9);
        assert_eq!(l.ticks(), vec![1.0, 10.0, 100.0, 1000.0]);
    }

    #[test]
    fn long_labels_and_texts_widen_the_picture() {
        let short = render("t", "s", &[panel(&[1.0, 2.0], false)]);
        assert!(short.contains(r#"width="960""#), "{short}");
        let mut p = panel(&[1.0], false);
        p.bars[0].label = "x".repeat(60);
        let l = Layout::of(std::slice::from_ref(&p));
        assert!(l.label_w > 60.0 * 6.0, "{}", l.label_w);
        assert_eq!(l.tail_w, WIDTH - LABEL_W - PLOT_W);
        let svg = render("t", "s", &[p]);
        assert!(
            svg.contains(&format!(r#"<rect x="{:.1}""#, l.label_w)),
            "the bars start after the labels: {svg}"
        );
        let mut p = panel(&[1.0], false);
        p.bars[0].text = "y".repeat(40);
        let l = Layout::of(std::slice::from_ref(&p));
        assert!(l.tail_w >= 40.0 * 6.0 && l.width() > WIDTH);
    }

    #[test]
    fn renders_escaped_well_formed_svg() {
        let svg = render(
            "a & b",
            "sub",
            &[panel(&[1.0, 2.0], false), panel(&[3.0], true)],
        );
        assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
        assert!(svg.contains("a &amp; b") && svg.contains("t &lt;1&gt;"));
        assert_eq!(svg.matches("<rect x=").count(), 3);
        assert_eq!(svg.matches("goal 12").count(), 2);
        assert!(!svg.contains("NaN") && !svg.contains("inf"));
    }
}
