//! What a benchmark leaves behind: its block of results put into a Markdown page between
//! marker lines, leaving the rest of the page untouched, and its charts ([`crate::chart`])
//! of the same medians, which the block shows next to its table.
//!
//! With the docs written, the charts go to `docs/charts/` (the block links them as
//! `charts/NAME.svg`); with `--no-docs` (and `--quick`), under the target directory's
//! `charts/`.

use std::fs;
use std::path::Path;

use crate::chart::{self, Axes, BarPanel, Series};
use crate::common::{median_by, target_dir, write_results, Result, BENCHMARKS_PAGE};

/// Where the charts of docs/benchmarks.md go, relative to the workspace root.
pub(crate) const DOCS_CHARTS: &str = "docs/charts";

/// A chart a benchmark writes: its file's name (`http-requests.svg`), the text a page
/// shows for it, and the SVG.
#[derive(Debug, Clone)]
pub(crate) struct Chart {
    pub file: String,
    pub alt: String,
    pub svg: String,
}

/// A benchmark's block in docs/benchmarks.md: its marker lines.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Block {
    pub start: &'static str,
    pub end: &'static str,
}

/// Writes `charts` (printing where) and, unless `no_docs`, the block that `body` makes
/// from the charts' image links into docs/benchmarks.md. `what` names the command in
/// messages; `root` is the workspace root.
pub(crate) fn publish(
    root: &Path,
    what: &str,
    no_docs: bool,
    charts: &[Chart],
    block: Block,
    body: impl FnOnce(&str) -> String,
) -> Result<()> {
    let dir = if no_docs {
        target_dir(root)?.join("charts")
    } else {
        root.join(DOCS_CHARTS)
    };
    fs::create_dir_all(&dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
    for c in charts {
        let path = dir.join(&c.file);
        fs::write(&path, &c.svg).map_err(|e| format!("writing {}: {e}", path.display()))?;
        eprintln!("{what}: chart written to {}", path.display());
    }
    if !no_docs {
        let body = body(&image_links(charts));
        let path = write_results(root, BENCHMARKS_PAGE, block.start, block.end, &body)?;
        eprintln!("{what}: table written to {}", path.display());
    }
    Ok(())
}

/// The charts as docs/benchmarks.md shows them: an image each, in a paragraph of its
/// own, linked relative to the page (`docs/charts/` is beside it).
pub(crate) fn image_links(charts: &[Chart]) -> String {
    charts
        .iter()
        .map(|c| format!("![{}](charts/{})\n\n", c.alt, c.file))
        .collect()
}

/// One case: its label and its runs, each with its row (a server).
pub(crate) type Case<'a, K, S> = (&'a str, &'a [(K, S)]);

/// Text of a Markdown label as a chart shows it: without code marks.
fn plain(label: &str) -> String {
    label.replace('`', "")
}

/// The medians of `metric` as bar panels: a panel for each first name that `split` gives
/// a row, holding a group for each case in which any of its rows ran and a series for
/// each of its rows (by the second name) that ran in any case, in the order of `rows`.
pub(crate) fn median_bars<K: Copy + PartialEq, S>(
    cases: &[Case<'_, K, S>],
    rows: &[K],
    split: &dyn Fn(K) -> (String, String),
    metric: &dyn Fn(&S) -> f64,
) -> Vec<BarPanel> {
    let ran = |k: K, runs: &[(K, S)]| runs.iter().any(|(r, _)| *r == k);
    let mut panels: Vec<(String, Vec<K>)> = Vec::new();
    for &k in rows {
        if !cases.iter().any(|(_, runs)| ran(k, runs)) {
            continue;
        }
        let name = split(k).0;
        match panels.iter_mut().find(|(n, _)| *n == name) {
            Some((_, ks)) => ks.push(k),
            None => panels.push((name, vec![k])),
        }
    }
    panels
        .into_iter()
        .map(|(name, ks)| {
            let cases: Vec<&Case<'_, K, S>> = cases
                .iter()
                .filter(|(_, runs)| ks.iter().any(|&k| ran(k, runs)))
                .collect();
            BarPanel {
                name,
                groups: cases.iter().map(|(label, _)| plain(label)).collect(),
                series: ks
                    .iter()
                    .map(|&k| Series {
                        name: split(k).1,
                        values: cases
                            .iter()
                            .map(|(_, runs)| median_by(runs, k, metric))
                            .collect(),
                    })
                    .collect(),
            }
        })
        .collect()
}

/// The two charts of a load benchmark: the rate and the server CPU per unit of work, per
/// case and server.
pub(crate) struct LoadCharts<'a> {
    /// The files' prefix: `http` makes `http-requests.svg` and `http-cpu.svg`.
    pub bench: &'a str,
    /// The charts' titles start with it ("HTTP").
    pub title: &'a str,
    /// The unit of work ("request").
    pub unit: &'a str,
}

impl LoadCharts<'_> {
    /// Both charts from `cases` (each case's label and runs), a bar per row of `rows`
    /// that ran, panels and series named by `split` ([`median_bars`]), the rate and the
    /// server CPU in µs per unit of a run given by `rate` and `cpu`.
    pub(crate) fn draw<K: Copy + PartialEq, S>(
        &self,
        cases: &[Case<'_, K, S>],
        rows: &[K],
        split: &dyn Fn(K) -> (String, String),
        rate: &dyn Fn(&S) -> f64,
        cpu: &dyn Fn(&S) -> f64,
    ) -> Result<Vec<Chart>> {
        let (title, unit) = (self.title, self.unit);
        let per_second = format!("{unit}s/s");
        let charts = [
            (
                format!("{unit}s"),
                format!("{title}: {per_second}, median of the runs"),
                per_second.clone(),
                rate,
            ),
            (
                "cpu".to_string(),
                format!("{title}: server CPU per {unit}, median of the runs"),
                format!("server CPU per {unit} (µs)"),
                cpu,
            ),
        ];
        charts
            .into_iter()
            .map(|(name, chart_title, y, metric)| {
                let axes = Axes {
                    title: chart_title.clone(),
                    x: "case".into(),
                    y,
                };
                Ok(Chart {
                    file: format!("{}-{name}.svg", self.bench),
                    alt: chart_title,
                    svg: chart::bars(&axes, &median_bars(cases, rows, split, metric))?,
                })
            })
            .collect()
    }
}

/// `text` with `body` between the `start` and `end` marker lines. Without the markers,
/// the block goes at the end of the page.
pub(crate) fn put_block(text: &str, start: &str, end: &str, body: &str) -> String {
    let block = format!("{start}\n{}\n{end}", body.trim_end());
    if let Some(s) = text.find(start) {
        if let Some(e) = text[s..].find(end).map(|e| s + e) {
            return format!("{}{block}{}", &text[..s], &text[e + end.len()..]);
        }
    }
    let head = text.trim_end_matches('\n');
    if head.is_empty() {
        format!("{block}\n")
    } else {
        format!("{head}\n\n{block}\n")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_bars_split_rows_into_panels_of_the_cases_they_ran() {
        // (program, stack) rows; redis ran only in the last case, "c" never ran.
        let runs_1 = [
            (("web", "a"), 1.0),
            (("web", "b"), 4.0),
            (("web", "a"), 3.0),
        ];
        let runs_2 = [(("web", "a"), 5.0)];
        let runs_3 = [(("redis", "a"), 7.0), (("redis", "b"), 8.0)];
        let cases: [Case<'_, (&str, &str), f64>; 3] = [
            ("64 B, `Connection: close`", &runs_1),
            ("pages", &runs_2),
            ("SET", &runs_3),
        ];
        let rows = [
            ("web", "a"),
            ("web", "b"),
            ("web", "c"),
            ("redis", "a"),
            ("redis", "b"),
        ];
        let split = |(p, s): (&str, &str)| (p.to_string(), format!("on {s}"));
        let panels = median_bars(&cases, &rows, &split, &|v: &f64| *v);
        assert_eq!(panels.len(), 2);
        let web = &panels[0];
        assert_eq!(web.name, "web");
        assert_eq!(web.groups, ["64 B, Connection: close", "pages"]);
        let names: Vec<&str> = web.series.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["on a", "on b"]);
        assert_eq!(web.series[0].values, [2.0, 5.0]);
        assert_eq!(web.series[1].values[0], 4.0);
        assert!(web.series[1].values[1].is_nan(), "b did not run in pages");
        assert_eq!(panels[1].name, "redis");
        assert_eq!(panels[1].groups, ["SET"]);
        assert_eq!(panels[1].series[1].values, [8.0]);
    }

    #[test]
    fn publish_writes_the_charts_and_the_block_that_links_them() {
        let root = std::env::temp_dir().join(format!("rusty-publish-{}", std::process::id()));
        let docs = root.join("docs");
        fs::create_dir_all(&docs).unwrap();
        fs::write(
            docs.join("benchmarks.md"),
            "# Benchmarks\n\n{START}\nold\n{END}\n",
        )
        .unwrap();
        let block = Block {
            start: "{START}",
            end: "{END}",
        };
        let chart = Chart {
            file: "x-requests.svg".into(),
            alt: "X: requests/s".into(),
            svg: "<svg width='1' height='1'/>".into(),
        };
        let written = publish(&root, "test", false, &[chart], block, |charts| {
            format!("### X\n\n{charts}TABLE")
        });
        let page = fs::read_to_string(docs.join("benchmarks.md"));
        let svg = fs::read_to_string(root.join(DOCS_CHARTS).join("x-requests.svg"));
        let _ = fs::remove_dir_all(&root);
        written.unwrap();
        assert_eq!(
            page.unwrap(),
            "# Benchmarks\n\n{START}\n### X\n\n![X: requests/s](charts/x-requests.svg)\n\n\
             TABLE\n{END}\n"
        );
        assert_eq!(svg.unwrap(), "<svg width='1' height='1'/>");
    }

    #[test]
    fn load_charts_are_two_svgs_linked_from_the_page() {
        let runs = [("tap", (100.0, 2.0)), ("kernel", (50.0, 4.0))];
        let cases: [Case<'_, &str, (f64, f64)>; 1] = [("small", &runs)];
        let charts = LoadCharts {
            bench: "echo",
            title: "Echo",
            unit: "message",
        }
        .draw(
            &cases,
            &["tap", "kernel"],
            &|k: &str| ("IPv4".to_string(), k.to_string()),
            &|s: &(f64, f64)| s.0,
            &|s: &(f64, f64)| s.1,
        )
        .unwrap();
        let files: Vec<&str> = charts.iter().map(|c| c.file.as_str()).collect();
        assert_eq!(files, ["echo-messages.svg", "echo-cpu.svg"]);
        for c in &charts {
            let marks = chart::check(&c.svg).unwrap();
            assert_eq!((marks.bars, marks.legend), (2, 2), "{}", c.file);
        }
        assert!(charts[0].svg.contains("messages/s"));
        assert!(charts[1].svg.contains("server CPU per message (µs)"));
        assert_eq!(
            image_links(&charts),
            "![Echo: messages/s, median of the runs](charts/echo-messages.svg)\n\n\
             ![Echo: server CPU per message, median of the runs](charts/echo-cpu.svg)\n\n"
        );
    }

    const START: &str = "<!-- bench-echo:start -->";
    const END: &str = "<!-- bench-echo:end -->";

    fn put(text: &str, body: &str) -> String {
        put_block(text, START, END, body)
    }

    #[test]
    fn replaces_between_markers_only() {
        let t = format!("a\n{START}\nold\n{END}\nb\n");
        assert_eq!(put(&t, "new\n"), format!("a\n{START}\nnew\n{END}\nb\n"));
    }

    #[test]
    fn appends_at_the_end_without_markers() {
        let t = "# X\n\n## Benchmarks\n\nsome text\n\n## Later\n\nz\n";
        assert_eq!(put(t, "new"), format!("{t}\n{START}\nnew\n{END}\n"));
        assert_eq!(
            put("# X\ntext", "new"),
            format!("# X\ntext\n\n{START}\nnew\n{END}\n")
        );
        assert_eq!(put("", "new"), format!("{START}\nnew\n{END}\n"));
    }

    #[test]
    fn is_idempotent() {
        let t = "# X\n\nsome text\n";
        let once = put(t, "new");
        assert_eq!(put(&once, "new"), once);
    }

    #[test]
    fn keeps_other_blocks() {
        let t = format!("# Benchmarks\n\n{START}\necho\n{END}\n");
        let (s2, e2) = ("<!-- bench-http:start -->", "<!-- bench-http:end -->");
        let once = put_block(&t, s2, e2, "http");
        assert_eq!(once, format!("{t}\n{s2}\nhttp\n{e2}\n"));
        assert_eq!(
            put_block(&once, s2, e2, "http 2"),
            once.replace("http\n", "http 2\n")
        );
        assert_eq!(put(&once, "echo 2"), once.replace("echo\n", "echo 2\n"));
    }
}
