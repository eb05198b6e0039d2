//! SVG charts of results: grouped bars (a value per group and series: requests/s per
//! case and server), lines (y against x per series: goodput against the loss rate) and
//! lines over time (x in seconds since the start: memory or requests/s over a soak
//! run), drawn with plotters' SVG backend. Text stays `<text>` elements, so no font is
//! read when drawing.
//!
//! A chart has a title, its axes' labels (units included), one or more panels stacked
//! top to bottom, each with its own name and y scale, and one legend on the right that
//! names every series once; a series has the same colour in every panel. A value that
//! is not finite (a server not measured) leaves a gap, and a chart without data says so
//! instead of failing. [`check()`] reads an SVG written here back.

mod check;
#[cfg(test)]
mod tests;

use plotters::chart::MeshStyle;
use plotters::coord::ranged1d::ValueFormatter;
use plotters::coord::types::RangedCoordf64;
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use crate::common::Result;
pub(crate) use check::check;
pub(crate) use check::check_files;

/// A chart's title and its axes' labels, each with its unit ("requests/s").
#[derive(Debug, Clone, Default)]
pub(crate) struct Axes {
    pub title: String,
    pub x: String,
    pub y: String,
}

/// One panel of grouped bars: in each group (a case), a bar per series (a server).
#[derive(Debug, Clone, Default)]
pub(crate) struct BarPanel {
    /// The panel's heading ("IPv4"); empty for none.
    pub name: String,
    pub groups: Vec<String>,
    pub series: Vec<Series>,
}

/// A series of bars: its name in the legend and its value in each group, in the
/// panel's order (not finite, or missing at the end: no bar).
#[derive(Debug, Clone, Default)]
pub(crate) struct Series {
    pub name: String,
    pub values: Vec<f64>,
}

/// One panel of lines.
#[derive(Debug, Clone, Default)]
pub(crate) struct LinePanel {
    /// The panel's heading; empty for none.
    pub name: String,
    pub lines: Vec<Line>,
}

/// A line: its name in the legend and its points `(x, y)`, drawn in the order of x;
/// points with a coordinate that is not finite are left out.
#[derive(Debug, Clone, Default)]
pub(crate) struct Line {
    pub name: String,
    pub points: Vec<(f64, f64)>,
}

/// The series' colours, in the order their names first appear in a chart: a palette for
/// readers with any colour vision (Okabe and Ito's, black left out), then grey.
pub(crate) const PALETTE: [RGBColor; 7] = [
    RGBColor(0x00, 0x72, 0xB2),
    RGBColor(0xE6, 0x9F, 0x00),
    RGBColor(0x00, 0x9E, 0x73),
    RGBColor(0xD5, 0x5E, 0x00),
    RGBColor(0x56, 0xB4, 0xE9),
    RGBColor(0xCC, 0x79, 0xA7),
    RGBColor(0xF0, 0xE4, 0x42),
];
const OTHER: RGBColor = RGBColor(0x77, 0x77, 0x77);
/// What a legend entry starts with, in its series' colour.
pub(crate) const SWATCH: &str = "■";

const WIDTH: u32 = 960;
const LEGEND_WIDTH: u32 = 250;
const TITLE_HEIGHT: u32 = 40;
const PANEL_HEIGHT: u32 = 320;
const FONT: &str = "sans-serif";
/// A group's width on the x axis of bars: x is an integer there, so that the groups'
/// centres can be the axis' labelled points.
const GROUP: i32 = 1000;

type Area<'a> = DrawingArea<SVGBackend<'a>, Shift>;

/// Grouped bars, a panel each, as an SVG document.
pub(crate) fn bars(axes: &Axes, panels: &[BarPanel]) -> Result<String> {
    let names = legend(panels.iter().flat_map(|p| &p.series).map(|s| &s.name));
    figure(axes, &names, panels.len(), |area, i| {
        bar_panel(area, axes, &panels[i], &names)
    })
}

/// Lines, a panel each, as an SVG document.
pub(crate) fn lines(axes: &Axes, panels: &[LinePanel]) -> Result<String> {
    let names = legend(panels.iter().flat_map(|p| &p.lines).map(|l| &l.name));
    figure(axes, &names, panels.len(), |area, i| {
        line_panel(area, axes, &panels[i], &names)
    })
}

/// Lines over time in one panel, x in seconds since the start (a soak run's memory or
/// requests/s), as an SVG document; `y` names the quantity and its unit.
pub(crate) fn over_time(title: &str, y: &str, series: &[Line]) -> Result<String> {
    let axes = Axes {
        title: title.into(),
        x: "time since the start (s)".into(),
        y: y.into(),
    };
    let panel = LinePanel {
        name: String::new(),
        lines: series.to_vec(),
    };
    lines(&axes, &[panel])
}

/// `v` in at most four significant digits with a k, M or G suffix: an axis tick or a
/// bar's value. Not finite: a dash.
pub(crate) fn compact(v: f64) -> String {
    if !v.is_finite() {
        return "—".into();
    }
    let a = v.abs();
    if a >= 1e12 {
        return format!("{v:.1e}");
    }
    let (x, suffix) = if a >= 1e9 {
        (v / 1e9, "G")
    } else if a >= 1e6 {
        (v / 1e6, "M")
    } else if a >= 1e4 {
        (v / 1e3, "k")
    } else {
        (v, "")
    };
    let decimals = if x.abs() >= 100.0 {
        0
    } else if x.abs() >= 10.0 {
        1
    } else if x.abs() >= 0.01 || x == 0.0 {
        2
    } else {
        return format!("{v:.1e}");
    };
    let mut s = format!("{x:.decimals$}");
    if s.contains('.') {
        s = s.trim_end_matches('0').trim_end_matches('.').to_string();
    }
    if s == "-0" {
        s = "0".into();
    }
    format!("{s}{suffix}")
}

/// Every distinct name in the order it first appears.
fn legend<'a>(names: impl Iterator<Item = &'a String>) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for n in names {
        if !out.contains(n) {
            out.push(n.clone());
        }
    }
    out
}

fn colour(names: &[String], name: &str) -> RGBColor {
    names
        .iter()
        .position(|n| n == name)
        .and_then(|i| PALETTE.get(i))
        .copied()
        .unwrap_or(OTHER)
}

fn drawing<E: std::fmt::Display>(e: E) -> String {
    format!("drawing a chart: {e}")
}

/// The document: title on top, the legend on the right, `panels` panels (64 at most)
/// stacked on the left, each drawn by `panel` with its index.
fn figure(
    axes: &Axes,
    names: &[String],
    panels: usize,
    panel: impl Fn(&Area<'_>, usize) -> Result<()>,
) -> Result<String> {
    let mut svg = String::new();
    {
        let height = TITLE_HEIGHT + PANEL_HEIGHT * panels.clamp(1, 64) as u32;
        let root = SVGBackend::with_string(&mut svg, (WIDTH, height)).into_drawing_area();
        root.fill(&WHITE).map_err(drawing)?;
        let (top, body) = root.split_vertically(TITLE_HEIGHT);
        let title =
            TextStyle::from((FONT, 20).into_font()).pos(Pos::new(HPos::Center, VPos::Center));
        let at = (WIDTH as i32 / 2, TITLE_HEIGHT as i32 / 2);
        top.draw(&Text::new(axes.title.as_str(), at, title))
            .map_err(drawing)?;
        let (plots, key) = body.split_horizontally(WIDTH - LEGEND_WIDTH);
        draw_legend(&key, names)?;
        if panels == 0 {
            no_data(&plots)?;
        }
        for (i, area) in plots.split_evenly((panels.min(64), 1)).iter().enumerate() {
            panel(area, i)?;
        }
        root.present().map_err(drawing)?;
    }
    Ok(svg)
}

fn draw_legend(area: &Area<'_>, names: &[String]) -> Result<()> {
    let text = TextStyle::from((FONT, 13).into_font()).pos(Pos::new(HPos::Left, VPos::Center));
    for (i, name) in names.iter().enumerate() {
        let y = 30 + 22 * i as i32;
        let fill = colour(names, name);
        let swatch = TextStyle::from((FONT, 16).into_font())
            .color(&fill)
            .pos(Pos::new(HPos::Left, VPos::Center));
        area.draw(&Text::new(SWATCH, (8, y), swatch))
            .map_err(drawing)?;
        area.draw(&Text::new(name.as_str(), (28, y), text.clone()))
            .map_err(drawing)?;
    }
    Ok(())
}

/// "no data" in the middle of `area`.
fn no_data(area: &Area<'_>) -> Result<()> {
    let (w, h) = area.dim_in_pixel();
    let style = TextStyle::from((FONT, 14).into_font()).pos(Pos::new(HPos::Center, VPos::Center));
    area.draw(&Text::new("no data", (w as i32 / 2, h as i32 / 2), style))
        .map_err(drawing)?;
    Ok(())
}

/// The span an axis shows for `values` (and zero): the finite ones' range with a tenth
/// more room above (and below, when some are negative), never empty and never beyond
/// what the axis can subdivide.
fn span(values: impl Iterator<Item = f64>) -> (f64, f64) {
    const LIMIT: f64 = 1e300;
    let (mut lo, mut hi) = (0.0f64, 0.0f64);
    for v in values.filter(|v| v.is_finite()) {
        lo = lo.min(v.max(-LIMIT));
        hi = hi.max(v.min(LIMIT));
    }
    if hi - lo <= 0.0 {
        return (lo, lo + 1.0);
    }
    let room = (hi - lo) / 10.0;
    (if lo < 0.0 { lo - room } else { lo }, hi + room)
}

/// A panel's heading (when it has one) and the room for its axes' labels.
fn caption<'a, 'b>(builder: &mut ChartBuilder<'a, 'b, SVGBackend<'b>>, name: &str) {
    if !name.is_empty() {
        builder.caption(name, (FONT, 15));
    }
    builder
        .margin(10)
        .x_label_area_size(45)
        .y_label_area_size(70);
}

/// A panel's axes, grid and tick labels: x's by `x_label`, y's [`compact`].
fn draw_axes<'b, X, XT>(
    mut mesh: MeshStyle<'_, 'b, X, RangedCoordf64, SVGBackend<'_>>,
    axes: &'b Axes,
    x_label: &'b dyn Fn(&XT) -> String,
) -> Result<()>
where
    X: Ranged<ValueType = XT> + ValueFormatter<XT>,
{
    mesh.max_light_lines(0)
        .x_label_formatter(x_label)
        .y_label_formatter(&|y| compact(*y))
        .x_desc(axes.x.as_str())
        .y_desc(axes.y.as_str())
        .label_style((FONT, 12))
        .axis_desc_style((FONT, 13))
        .draw()
        .map_err(drawing)
}

fn bar_panel(area: &Area<'_>, axes: &Axes, panel: &BarPanel, names: &[String]) -> Result<()> {
    let groups = panel.groups.len();
    if groups == 0 || panel.series.is_empty() {
        return empty_panel(area, &panel.name);
    }
    let values = || {
        panel
            .series
            .iter()
            .flat_map(|s| s.values.iter().take(groups).copied())
    };
    let (lo, hi) = span(values());
    let groups = groups.min(1_000_000) as i32;
    let centres: Vec<i32> = (0..groups).map(|g| g * GROUP + GROUP / 2).collect();
    let mut builder = ChartBuilder::on(area);
    caption(&mut builder, &panel.name);
    let mut chart = builder
        .build_cartesian_2d((0..groups * GROUP).with_key_points(centres), lo..hi)
        .map_err(drawing)?;
    let group_name = |x: &i32| {
        usize::try_from(x / GROUP)
            .ok()
            .and_then(|g| panel.groups.get(g))
            .cloned()
            .unwrap_or_default()
    };
    let mut mesh = chart.configure_mesh();
    mesh.disable_x_mesh();
    draw_axes(mesh, axes, &group_name)?;
    // Each series' slot in a group: 80 % of the group shared, bars 90 % of their slot.
    let slot = GROUP * 8 / 10 / panel.series.len().min(GROUP as usize / 10) as i32;
    let label = TextStyle::from((FONT, 10).into_font()).pos(Pos::new(HPos::Center, VPos::Bottom));
    for (si, series) in panel.series.iter().enumerate() {
        let fill = colour(names, &series.name).filled();
        let bars: Vec<(i32, f64)> = series
            .values
            .iter()
            .take(groups as usize)
            .enumerate()
            .filter(|(_, v)| v.is_finite())
            .map(|(g, v)| {
                let x = g as i32 * GROUP + GROUP / 10 + slot * si as i32;
                (x, v.clamp(lo, hi))
            })
            .collect();
        chart
            .draw_series(
                bars.iter()
                    .map(|&(x, v)| Rectangle::new([(x, 0.0), (x + slot * 9 / 10, v)], fill)),
            )
            .map_err(drawing)?;
        chart
            .draw_series(bars.iter().map(|&(x, v)| {
                Text::new(compact(v), (x + slot * 9 / 20, v.max(0.0)), label.clone())
            }))
            .map_err(drawing)?;
    }
    Ok(())
}

fn line_panel(area: &Area<'_>, axes: &Axes, panel: &LinePanel, names: &[String]) -> Result<()> {
    let finite = |&&(x, y): &&(f64, f64)| x.is_finite() && y.is_finite();
    let points = || {
        panel
            .lines
            .iter()
            .flat_map(|l| l.points.iter().filter(finite))
    };
    if points().next().is_none() {
        return empty_panel(area, &panel.name);
    }
    let (x0, x1) = span(points().map(|p| p.0));
    let (y0, y1) = span(points().map(|p| p.1));
    let mut builder = ChartBuilder::on(area);
    caption(&mut builder, &panel.name);
    let mut chart = builder
        .build_cartesian_2d(x0..x1, y0..y1)
        .map_err(drawing)?;
    draw_axes(chart.configure_mesh(), axes, &|x| compact(*x))?;
    for line in &panel.lines {
        let c = colour(names, &line.name);
        let mut pts: Vec<(f64, f64)> = line
            .points
            .iter()
            .filter(finite)
            .map(|&(x, y)| (x.clamp(x0, x1), y.clamp(y0, y1)))
            .collect();
        pts.sort_by(|a, b| a.0.total_cmp(&b.0));
        if pts.len() > 1 {
            chart
                .draw_series(LineSeries::new(pts.iter().copied(), c.stroke_width(2)))
                .map_err(drawing)?;
        }
        chart
            .draw_series(pts.iter().map(|&p| Circle::new(p, 3, c.filled())))
            .map_err(drawing)?;
    }
    Ok(())
}

/// A panel without data: its heading and a note.
fn empty_panel(area: &Area<'_>, name: &str) -> Result<()> {
    if name.is_empty() {
        return no_data(area);
    }
    let inner = area.titled(name, (FONT, 15)).map_err(drawing)?;
    no_data(&inner)
}
