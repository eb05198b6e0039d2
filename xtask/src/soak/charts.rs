//! A soak run's charts, drawn from its samples: httpd's memory over time (resident,
//! buffers, kept for reuse) and the requests it answered per second between samples.
//! The run writes them beside its report; `--charts-from CSV` draws them again from a
//! past run's samples.

use std::fs;
use std::path::{Path, PathBuf};

use super::series::{Measure, Series};
use super::Backend;
use crate::chart::{self, over_time, Line};
use crate::common::Result;

/// The charts of `series`, each as its file name's suffix (`memory`, `requests`) and
/// the SVG document; `backend` goes into their titles.
pub(crate) fn draw(series: &Series, backend: Backend) -> Result<Vec<(&'static str, String)>> {
    let server = match backend {
        Backend::Tap => "httpd on TAP",
        Backend::Kernel => "httpd on kernel sockets",
    };
    let line = |m: Measure| Line {
        name: m.label().into(),
        points: series.points(m),
    };
    let memory = over_time(
        &format!("Soak, {server}: memory"),
        "MiB",
        &[
            line(Measure::ResidentMib),
            line(Measure::BufferMib),
            line(Measure::IdleMib),
        ],
    )?;
    let rate = Line {
        name: "requests answered per second".into(),
        points: series.rate(Measure::Requests),
    };
    let requests = over_time(
        &format!("Soak, {server}: requests answered"),
        "requests per second",
        &[rate],
    )?;
    Ok(vec![("memory", memory), ("requests", requests)])
}

/// Writes the charts of `series` as `STEM-memory.svg` and `STEM-requests.svg` beside
/// `csv` (`STEM.csv`), each read back by [`crate::chart::check()`] first; their paths.
pub(crate) fn write_beside(csv: &Path, series: &Series, backend: Backend) -> Result<Vec<PathBuf>> {
    let stem = csv
        .file_stem()
        .and_then(|s| s.to_str())
        .ok_or_else(|| format!("{}: no file name to name the charts by", csv.display()))?;
    let mut paths = Vec::new();
    for (suffix, svg) in draw(series, backend)? {
        let marks = chart::check(&svg)?;
        if !marks.any() {
            return Err(format!(
                "the {suffix} chart of {} shows no data",
                csv.display()
            ));
        }
        let path = csv.with_file_name(format!("{stem}-{suffix}.svg"));
        fs::write(&path, svg).map_err(|e| format!("writing {}: {e}", path.display()))?;
        paths.push(path);
    }
    Ok(paths)
}

/// `--charts-from CSV`: the charts of a past run, from the samples it wrote.
pub(crate) fn redraw(csv: &Path, backend: Backend) -> Result<()> {
    let text = fs::read_to_string(csv).map_err(|e| format!("reading {}: {e}", csv.display()))?;
    let series = Series::from_csv(&text).map_err(|e| format!("{}: {e}", csv.display()))?;
    for path in write_beside(csv, &series, backend)? {
        eprintln!("soak: chart written to {}", path.display());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::soak::series::Sample;
    use std::time::Duration;

    fn series() -> Series {
        let mut s = Series::default();
        for (i, rss) in [30u64, 31, 31, 31].into_iter().enumerate() {
            s.push(Sample {
                at: Duration::from_secs(30 * (i as u64 + 1)),
                requests: 60_000 * (i as u64 + 1),
                resident_bytes: rss << 20,
                buffer_bytes: 1 << 18,
                idle_bytes: 8 << 20,
                connections: 100,
                ..Sample::default()
            });
        }
        s
    }

    #[test]
    fn charts_of_memory_and_rate_are_valid_and_drawn() {
        let charts = draw(&series(), Backend::Tap).unwrap();
        let names: Vec<&str> = charts.iter().map(|c| c.0).collect();
        assert_eq!(names, ["memory", "requests"]);
        for (name, svg) in &charts {
            let marks = chart::check(svg).unwrap();
            assert!(marks.any(), "{name}: nothing drawn");
        }
        assert!(charts[0].1.contains("resident (MiB)"));
        assert!(charts[0].1.contains("Soak, httpd on TAP: memory"));
        assert!(charts[1].1.contains("requests answered per second"));
    }

    #[test]
    fn a_past_run_is_drawn_again_from_its_csv() {
        let dir = std::env::temp_dir().join(format!("xtask-soak-charts-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let csv = dir.join("soak-tap-19700101T000000Z.csv");
        fs::write(&csv, series().csv()).unwrap();
        redraw(&csv, Backend::Tap).unwrap();
        for suffix in ["memory", "requests"] {
            let svg =
                fs::read_to_string(dir.join(format!("soak-tap-19700101T000000Z-{suffix}.svg")))
                    .unwrap();
            assert!(chart::check(&svg).unwrap().any());
        }
        fs::write(&csv, "seconds,requests\n1,2\n").unwrap();
        let err = redraw(&csv, Backend::Tap).unwrap_err();
        assert!(err.contains("header"), "{err}");
        fs::remove_dir_all(&dir).unwrap();
    }
}
