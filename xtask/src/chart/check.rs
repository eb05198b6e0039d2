//! Reading a chart back: that it is an SVG document whose every coordinate is a finite
//! number, and what it draws (`cargo xtask check-svg`, and the chart tests).

use super::{PALETTE, SWATCH};
use crate::common::Result;

/// What a chart draws, counted by the marks in its series' colours.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Marks {
    pub bars: usize,
    /// Lines of two or more points.
    pub lines: usize,
    /// Points of lines (a marker each).
    pub points: usize,
    /// Legend entries.
    pub legend: usize,
    /// Every text element, legend and labels included.
    pub texts: usize,
}

impl Marks {
    /// Whether the chart shows any data.
    pub(crate) fn any(&self) -> bool {
        self.bars + self.points > 0
    }
}

/// Attributes that hold one number (a length may end in a unit such as `em` or `px`).
const NUMBERS: [&str; 13] = [
    "x",
    "y",
    "x1",
    "y1",
    "x2",
    "y2",
    "cx",
    "cy",
    "r",
    "width",
    "height",
    "font-size",
    "stroke-width",
];

/// `svg` checked: well-formed XML with an `svg` root of a positive size, no coordinate
/// that is not a finite number; and its marks.
pub(crate) fn check(svg: &str) -> Result<Marks> {
    let doc = roxmltree::Document::parse(svg).map_err(|e| format!("not XML: {e}"))?;
    let root = doc.root_element();
    if root.tag_name().name() != "svg" {
        return Err(format!(
            "the root element is <{}>, not <svg>",
            root.tag_name().name()
        ));
    }
    for side in ["width", "height"] {
        match root.attribute(side).map(number) {
            Some(Ok(v)) if v > 0.0 => {}
            _ => return Err(format!("<svg> has no positive {side}")),
        }
    }
    let palette: Vec<String> = PALETTE
        .iter()
        .map(|c| format!("#{:02X}{:02X}{:02X}", c.0, c.1, c.2))
        .collect();
    let coloured = |v: Option<&str>| v.is_some_and(|v| palette.iter().any(|p| p == v));
    let mut marks = Marks::default();
    for node in doc.descendants().filter(|n| n.is_element()) {
        let tag = node.tag_name().name();
        for a in node.attributes() {
            let bad = if NUMBERS.contains(&a.name()) {
                number(a.value()).is_err()
            } else if a.name() == "points" {
                a.value()
                    .split([' ', ','])
                    .filter(|p| !p.is_empty())
                    .any(|p| number(p).is_err())
            } else {
                false
            };
            if bad {
                return Err(format!(
                    "<{tag}> has {}=\"{}\", not a finite number",
                    a.name(),
                    a.value()
                ));
            }
        }
        match tag {
            "rect" if coloured(node.attribute("fill")) => marks.bars += 1,
            "polyline" if coloured(node.attribute("stroke")) => marks.lines += 1,
            "circle" if coloured(node.attribute("fill")) => marks.points += 1,
            "text" => {
                marks.texts += 1;
                if node.text().map(str::trim) == Some(SWATCH) {
                    marks.legend += 1;
                }
            }
            _ => {}
        }
    }
    Ok(marks)
}

/// A finite number, with an optional unit after it (`0.76em`, `12px`).
fn number(s: &str) -> std::result::Result<f64, ()> {
    let s = s.trim();
    let s = ["em", "px", "pt", "%"]
        .iter()
        .find_map(|unit| s.strip_suffix(unit))
        .unwrap_or(s);
    match s.parse::<f64>() {
        Ok(v) if v.is_finite() => Ok(v),
        _ => Err(()),
    }
}

/// `cargo xtask check-svg PATH…`: each file [`check`]ed, and drawing data; prints what
/// each draws, fails naming every file that is not sound.
pub(crate) fn check_files(paths: &[std::path::PathBuf]) -> Result<()> {
    let mut failed = Vec::new();
    for path in paths {
        let checked = std::fs::read_to_string(path)
            .map_err(|e| format!("reading it: {e}"))
            .and_then(|svg| check(&svg))
            .and_then(|m| {
                if m.any() {
                    Ok(m)
                } else {
                    Err("it draws no data".into())
                }
            });
        match checked {
            Ok(m) => println!(
                "{}: {} bars, {} lines, {} points, {} legend entries, {} texts",
                path.display(),
                m.bars,
                m.lines,
                m.points,
                m.legend,
                m.texts
            ),
            Err(e) => failed.push(format!("{}: {e}", path.display())),
        }
    }
    if failed.is_empty() {
        Ok(())
    } else {
        Err(format!("unsound charts:\n{}", failed.join("\n")))
    }
}
