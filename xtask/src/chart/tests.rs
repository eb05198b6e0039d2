use super::*;

fn axes() -> Axes {
    Axes {
        title: "HTTP: requests/s".into(),
        x: "case".into(),
        y: "requests/s".into(),
    }
}

fn series(name: &str, values: &[f64]) -> Series {
    Series {
        name: name.into(),
        values: values.to_vec(),
    }
}

fn line(name: &str, points: &[(f64, f64)]) -> Line {
    Line {
        name: name.into(),
        points: points.to_vec(),
    }
}

/// Every text element's content.
fn texts(svg: &str) -> Vec<String> {
    let doc = roxmltree::Document::parse(svg).unwrap();
    doc.descendants()
        .filter(|n| n.has_tag_name("text"))
        .map(|n| n.text().unwrap_or("").trim().to_string())
        .collect()
}

/// The fill of every bar, in drawing order.
fn bar_fills(svg: &str) -> Vec<String> {
    let doc = roxmltree::Document::parse(svg).unwrap();
    doc.descendants()
        .filter(|n| n.has_tag_name("rect") && n.attribute("fill") != Some("#FFFFFF"))
        .map(|n| n.attribute("fill").unwrap_or("").to_string())
        .collect()
}

fn two_families() -> Vec<BarPanel> {
    let groups: Vec<String> = ["64 B, keep-alive", "64 B, Connection: close", "pages"]
        .map(String::from)
        .to_vec();
    vec![
        BarPanel {
            name: "IPv4".into(),
            groups: groups.clone(),
            series: vec![
                series("httpd, Rusty on TAP", &[300_000.0, 40_000.0, 120_000.0]),
                series("httpd, kernel sockets", &[100_000.0, 35_000.0, 90_000.0]),
                series("nginx, 1 worker", &[150_000.0, 30_000.0, 95_000.0]),
            ],
        },
        BarPanel {
            name: "IPv6".into(),
            groups,
            series: vec![
                series("httpd, Rusty on TAP", &[280_000.0, f64::NAN, 110_000.0]),
                series("httpd, kernel sockets", &[90_000.0, 33_000.0]),
            ],
        },
    ]
}

#[test]
fn grouped_bars_draw_a_bar_and_a_label_per_measured_value() {
    let svg = bars(&axes(), &two_families()).unwrap();
    let marks = check(&svg).unwrap();
    // 9 in IPv4; in IPv6 one not measured and one missing at the end.
    assert_eq!(marks.bars, 13, "{svg}");
    assert_eq!((marks.lines, marks.points), (0, 0));
    assert_eq!(marks.legend, 3, "each series once");
    let t = texts(&svg);
    for want in [
        "HTTP: requests/s",
        "IPv4",
        "IPv6",
        "requests/s",
        "case",
        "64 B, Connection: close",
        "httpd, Rusty on TAP",
        "nginx, 1 worker",
        "300k",
        "280k",
        "33k",
    ] {
        assert!(t.iter().any(|s| s == want), "no text {want:?} in {t:?}");
    }
    let values = t.iter().filter(|s| s.ends_with('k')).count();
    assert!(values >= 13, "a value above each bar: {t:?}");
    assert!(marks.any());
}

#[test]
fn a_series_keeps_its_colour_across_panels() {
    let svg = bars(&axes(), &two_families()).unwrap();
    let fills = bar_fills(&svg);
    assert_eq!(fills.len(), 13);
    let hex = |c: RGBColor| format!("#{:02X}{:02X}{:02X}", c.0, c.1, c.2);
    // IPv4: TAP ×3, kernel ×3, nginx ×3; IPv6: TAP ×2, kernel ×2.
    let want: Vec<String> = [0, 0, 0, 1, 1, 1, 2, 2, 2, 0, 0, 1, 1]
        .iter()
        .map(|&i| hex(PALETTE[i]))
        .collect();
    assert_eq!(fills, want);
}

#[test]
fn lines_draw_a_path_and_markers_per_series() {
    let panels = vec![
        LinePanel {
            name: "Rusty as sender".into(),
            lines: vec![
                line(
                    "Rusty (TAP), 1 × 2 MB",
                    &[(0.1, 90.0), (1.0, 60.0), (5.0, 12.0)],
                ),
                line("Linux, 1 × 2 MB", &[(5.0, 8.0), (0.1, 95.0), (1.0, 50.0)]),
            ],
        },
        LinePanel {
            name: "Rusty as receiver".into(),
            lines: vec![
                line("Rusty (TAP), 1 × 2 MB", &[(1.0, 70.0)]),
                line(
                    "Linux, 1 × 2 MB",
                    &[(1.0, 40.0), (f64::NAN, 1.0), (5.0, 9.0)],
                ),
            ],
        },
    ];
    let axes = Axes {
        title: "Loss".into(),
        x: "loss each way (%)".into(),
        y: "goodput (MB/s)".into(),
    };
    let svg = lines(&axes, &panels).unwrap();
    let marks = check(&svg).unwrap();
    // A single point is a marker without a line; the NaN point is left out.
    assert_eq!(marks.lines, 3, "{svg}");
    assert_eq!(marks.points, 3 + 3 + 1 + 2);
    assert_eq!(marks.bars, 0);
    assert_eq!(marks.legend, 2);
    let t = texts(&svg);
    for want in ["loss each way (%)", "goodput (MB/s)", "Rusty as receiver"] {
        assert!(t.iter().any(|s| s == want), "no text {want:?} in {t:?}");
    }
}

#[test]
fn time_series_have_seconds_on_x() {
    let memory: Vec<(f64, f64)> = (0..30)
        .map(|i| (i as f64 * 30.0, 40.0 + i as f64))
        .collect();
    let rss = line("resident MiB", &memory);
    let svg = over_time("Soak: httpd's memory", "resident memory (MiB)", &[rss]).unwrap();
    let marks = check(&svg).unwrap();
    assert_eq!((marks.lines, marks.points, marks.legend), (1, 30, 1));
    let t = texts(&svg);
    assert!(t.iter().any(|s| s == "time since the start (s)"), "{t:?}");
    assert!(t.iter().any(|s| s == "resident memory (MiB)"), "{t:?}");
}

#[test]
fn no_data_is_a_valid_chart_that_says_so() {
    let empty_panel = BarPanel {
        name: "IPv6".into(),
        ..BarPanel::default()
    };
    let no_values = BarPanel {
        name: "IPv4".into(),
        groups: vec!["a".into(), "b".into()],
        series: vec![series("x", &[]), series("y", &[f64::NAN, f64::INFINITY])],
    };
    let drawn = [
        bars(&axes(), &[]).unwrap(),
        bars(&axes(), &[empty_panel, no_values]).unwrap(),
        lines(&axes(), &[]).unwrap(),
        lines(
            &axes(),
            &[LinePanel {
                name: String::new(),
                lines: vec![line("a", &[]), line("b", &[(f64::NAN, 1.0)])],
            }],
        )
        .unwrap(),
        over_time("t", "y", &[]).unwrap(),
    ];
    for svg in drawn {
        let marks = check(&svg).unwrap();
        assert!(!marks.any(), "{marks:?}\n{svg}");
        assert_eq!(marks.lines, 0);
        assert!(texts(&svg).iter().any(|t| t == "no data"), "{svg}");
    }
}

#[test]
fn zero_tiny_huge_and_negative_values_stay_finite() {
    let cases: [&[f64]; 6] = [
        &[0.0, 0.0, 0.0],
        &[1e-300, 2e-300, 0.0],
        &[f64::MAX, 1.0, 0.0],
        &[f64::MAX, f64::MIN, f64::MIN_POSITIVE],
        &[-5.0, 3.0, f64::NEG_INFINITY],
        &[1e15, 1e12, 1e9],
    ];
    for values in cases {
        let panel = BarPanel {
            name: "p".into(),
            groups: vec!["a".into(), "b".into(), "c".into()],
            series: vec![series("s", values), series("t", &values[..1])],
        };
        let svg = bars(&axes(), &[panel]).unwrap();
        let marks = check(&svg).unwrap_or_else(|e| panic!("{values:?}: {e}\n{svg}"));
        let finite = values.iter().filter(|v| v.is_finite()).count();
        let first = usize::from(values[0].is_finite());
        assert_eq!(marks.bars, finite + first, "{values:?}");
        let points: Vec<(f64, f64)> = values.iter().map(|&v| (v, v)).collect();
        let panel = LinePanel {
            name: "p".into(),
            lines: vec![line("s", &points)],
        };
        let svg = lines(&axes(), &[panel]).unwrap();
        let marks = check(&svg).unwrap_or_else(|e| panic!("{values:?}: {e}\n{svg}"));
        assert_eq!(marks.points, finite, "{values:?}");
    }
}

#[test]
fn check_rejects_what_is_not_a_sound_svg() {
    let ok = r##"<svg width="10" height="10" xmlns="http://www.w3.org/2000/svg"><rect x="1" y="2" width="3" height="4" fill="#0072B2"/><text x="1" y="1" dy="0.76em" font-size="12">■</text></svg>"##;
    let marks = check(ok).unwrap();
    assert_eq!((marks.bars, marks.legend, marks.texts), (1, 1, 1));
    for (bad, why) in [
        ("", "not XML"),
        ("<svg width='10' height='10'><rect x='1'></svg>", "not XML"),
        ("<html width='10' height='10'/>", "not <svg>"),
        ("<svg height='10'/>", "no positive width"),
        ("<svg width='10' height='0'/>", "no positive height"),
        (
            "<svg width='10' height='10'><rect x='NaN' y='1'/></svg>",
            "x=\"NaN\"",
        ),
        (
            "<svg width='10' height='10'><line x1='1' y1='inf' x2='1' y2='1'/></svg>",
            "y1=\"inf\"",
        ),
        (
            "<svg width='10' height='10'><polyline points='1,2 3,NaN'/></svg>",
            "points=",
        ),
        (
            "<svg width='10' height='10'><circle cx='1' cy='1' r='-inf'/></svg>",
            "r=",
        ),
    ] {
        let e = check(bad).unwrap_err();
        assert!(e.contains(why), "{bad}: {e}");
    }
}

#[test]
fn compact_numbers() {
    for (v, want) in [
        (0.0, "0"),
        (-0.0, "0"),
        (0.25, "0.25"),
        (1.0, "1"),
        (12.34, "12.3"),
        (999.4, "999"),
        (9_999.0, "9999"),
        (12_345.0, "12.3k"),
        (300_000.0, "300k"),
        (1_500_000.0, "1.5M"),
        (2.5e9, "2.5G"),
        (-40_000.0, "-40k"),
        (0.001, "1.0e-3"),
        (3e14, "3.0e14"),
        (f64::NAN, "—"),
        (f64::INFINITY, "—"),
    ] {
        assert_eq!(compact(v), want, "{v}");
    }
}
