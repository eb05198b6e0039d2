//! A soak run over time: one [`Sample`] every `--sample-seconds` of what httpd had
//! served, the errors so far, its resident memory and its buffer memory, kept in a
//! [`Series`] that the report's table, the CSV file and a chart read through
//! [`Series::points`].

use std::fmt::Write;
use std::time::Duration;

use rusty_testkit::MemoryTrend;

use super::exposition::Exposition;

const MIB: f64 = (1u64 << 20) as f64;

/// What a run looked like at one moment.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Sample {
    /// Since the load started.
    pub at: Duration,
    /// Requests httpd has answered (`rusty_http_requests_total`, every code).
    pub requests: u64,
    /// Of those, answered with another status than 2xx.
    pub error_responses: u64,
    /// Requests of the soak's own clients that failed so far (wrk's failures are known
    /// only at its end).
    pub client_failures: u64,
    /// httpd's `VmRSS`.
    pub resident_bytes: u64,
    /// Buffer memory the connections hold (`rusty_buffer_memory_bytes`, every worker).
    pub buffer_bytes: u64,
    /// Buffers kept for reuse (`rusty_buffer_pool_idle_bytes` and
    /// `rusty_driver_pool_idle_bytes`, every worker).
    pub idle_bytes: u64,
    /// Connections httpd has open (`rusty_http_open_connections`).
    pub connections: u64,
}

impl Sample {
    /// The sample at `at` from a scrape of httpd's metrics, its resident set and the
    /// clients' failures.
    pub(crate) fn from_scrape(
        at: Duration,
        scrape: &Exposition,
        resident_bytes: u64,
        client_failures: u64,
    ) -> Sample {
        Sample {
            at,
            requests: scrape.total("rusty_http_requests_total"),
            error_responses: super::exposition::as_count(
                scrape.sum_where("rusty_http_requests_total", |s| {
                    !s.label("code").is_some_and(|c| c.starts_with('2'))
                }),
            ),
            client_failures,
            resident_bytes,
            buffer_bytes: scrape.total("rusty_buffer_memory_bytes"),
            idle_bytes: scrape.total("rusty_buffer_pool_idle_bytes")
                + scrape.total("rusty_driver_pool_idle_bytes"),
            connections: scrape.total("rusty_http_open_connections"),
        }
    }

    /// Error responses and client failures.
    pub(crate) fn errors(&self) -> u64 {
        self.error_responses + self.client_failures
    }
}

/// A quantity followed over the run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Measure {
    Requests,
    Errors,
    ResidentMib,
    BufferMib,
    IdleMib,
    Connections,
}

impl Measure {
    pub(crate) const ALL: [Measure; 6] = [
        Measure::Requests,
        Measure::Errors,
        Measure::ResidentMib,
        Measure::BufferMib,
        Measure::IdleMib,
        Measure::Connections,
    ];

    /// Its name in a table or on an axis, with its unit.
    pub(crate) fn label(self) -> &'static str {
        match self {
            Measure::Requests => "requests served",
            Measure::Errors => "errors",
            Measure::ResidentMib => "resident (MiB)",
            Measure::BufferMib => "buffer (MiB)",
            Measure::IdleMib => "kept for reuse (MiB)",
            Measure::Connections => "open connections",
        }
    }

    pub(crate) fn of(self, s: &Sample) -> f64 {
        match self {
            Measure::Requests => s.requests as f64,
            Measure::Errors => s.errors() as f64,
            Measure::ResidentMib => s.resident_bytes as f64 / MIB,
            Measure::BufferMib => s.buffer_bytes as f64 / MIB,
            Measure::IdleMib => s.idle_bytes as f64 / MIB,
            Measure::Connections => s.connections as f64,
        }
    }

    /// A value of this measure as the report shows it.
    fn format(self, v: f64) -> String {
        match self {
            Measure::Requests | Measure::Errors | Measure::Connections => {
                crate::common::thousands(v)
            }
            _ => format!("{v:.1}"),
        }
    }
}

/// The samples of a run, in time order.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Series {
    samples: Vec<Sample>,
}

impl Series {
    pub(crate) fn push(&mut self, s: Sample) {
        self.samples.push(s);
    }

    pub(crate) fn samples(&self) -> &[Sample] {
        &self.samples
    }

    pub(crate) fn last(&self) -> Option<&Sample> {
        self.samples.last()
    }

    /// `m` over time: (seconds since the start, value) for every sample.
    pub(crate) fn points(&self, m: Measure) -> Vec<(f64, f64)> {
        self.samples
            .iter()
            .map(|s| (s.at.as_secs_f64(), m.of(s)))
            .collect()
    }

    /// How fast `m` grew: for every sample, (seconds since the start, its growth per
    /// second since the sample before it, or since the start, where it was zero).
    pub(crate) fn rate(&self, m: Measure) -> Vec<(f64, f64)> {
        let mut before = (0.0, 0.0);
        self.points(m)
            .into_iter()
            .map(|(t, v)| {
                let (t0, v0) = std::mem::replace(&mut before, (t, v));
                let rate = if t > t0 {
                    (v - v0) / (t - t0)
                } else {
                    f64::NAN
                };
                (t, rate)
            })
            .collect()
    }

    /// Bytes of memory `bytes` picks from each sample, for [`MemoryTrend::check_flat`].
    pub(crate) fn trend(&self, bytes: impl Fn(&Sample) -> u64) -> MemoryTrend {
        let mut t = MemoryTrend::new();
        for s in &self.samples {
            t.record(s.at, i64::try_from(bytes(s)).unwrap_or(i64::MAX));
        }
        t
    }

    /// A Markdown table: time and every [`Measure`] but open connections.
    pub(crate) fn table(&self) -> String {
        let shown = &Measure::ALL[..5];
        let mut out = String::from("| time (s) |");
        for m in shown {
            let _ = write!(out, " {} |", m.label());
        }
        out += "\n|---:|";
        out += &"---:|".repeat(shown.len());
        out.push('\n');
        let columns: Vec<Vec<(f64, f64)>> = shown.iter().map(|&m| self.points(m)).collect();
        for (row, s) in self.samples.iter().enumerate() {
            let _ = write!(out, "| {:.0} |", s.at.as_secs_f64());
            for (m, column) in shown.iter().zip(&columns) {
                let _ = write!(out, " {} |", m.format(column[row].1));
            }
            out.push('\n');
        }
        out
    }

    /// Every field of every sample as CSV, sizes in bytes, with a header line.
    pub(crate) fn csv(&self) -> String {
        let mut out = format!("{CSV_HEADER}\n");
        for s in &self.samples {
            let _ = writeln!(
                out,
                "{:.3},{},{},{},{},{},{},{}",
                s.at.as_secs_f64(),
                s.requests,
                s.error_responses,
                s.client_failures,
                s.resident_bytes,
                s.buffer_bytes,
                s.idle_bytes,
                s.connections
            );
        }
        out
    }

    /// The samples [`Series::csv`] wrote, read back.
    pub(crate) fn from_csv(text: &str) -> Result<Series, String> {
        let mut lines = text.lines().enumerate();
        match lines.next() {
            Some((_, h)) if h.trim() == CSV_HEADER => {}
            _ => return Err(format!("the first line is not the header `{CSV_HEADER}`")),
        }
        let mut series = Series::default();
        for (i, line) in lines.filter(|(_, l)| !l.trim().is_empty()) {
            let bad = || format!("line {}: not a sample: `{line}`", i + 1);
            let fields: Vec<&str> = line.split(',').map(str::trim).collect();
            let [secs, rest @ ..] = fields.as_slice() else {
                return Err(bad());
            };
            let counts = rest
                .iter()
                .map(|f| f.parse::<u64>())
                .collect::<Result<Vec<u64>, _>>()
                .map_err(|_| bad())?;
            let at = secs
                .parse::<f64>()
                .ok()
                .and_then(|s| Duration::try_from_secs_f64(s).ok())
                .ok_or_else(bad)?;
            let [requests, error_responses, client_failures, resident_bytes, buffer_bytes, idle_bytes, connections] =
                counts[..]
            else {
                return Err(bad());
            };
            series.push(Sample {
                at,
                requests,
                error_responses,
                client_failures,
                resident_bytes,
                buffer_bytes,
                idle_bytes,
                connections,
            });
        }
        Ok(series)
    }
}

/// The first line of a run's CSV: the fields of a [`Sample`], sizes in bytes.
const CSV_HEADER: &str = "seconds,requests,error_responses,client_failures,resident_bytes,\
                          buffer_bytes,idle_bytes,connections";

#[cfg(test)]
mod tests {
    use super::*;

    const SCRAPE: &str = "\
rusty_http_requests_total{worker=\"0\",code=\"200\"} 900
rusty_http_requests_total{worker=\"0\",code=\"206\"} 80
rusty_http_requests_total{worker=\"0\",code=\"404\"} 3
rusty_http_requests_total{worker=\"1\",code=\"200\"} 1000
rusty_http_requests_total{worker=\"1\",code=\"400\"} 1
rusty_buffer_memory_bytes{worker=\"0\"} 1048576
rusty_buffer_memory_bytes{worker=\"1\"} 524288
rusty_buffer_pool_idle_bytes{worker=\"0\"} 100
rusty_driver_pool_idle_bytes{worker=\"1\"} 200
rusty_http_open_connections{worker=\"0\"} 60
rusty_http_open_connections{worker=\"1\"} 50
";

    fn sample(secs: u64) -> Sample {
        let scrape = Exposition::parse(SCRAPE).unwrap();
        Sample::from_scrape(Duration::from_secs(secs), &scrape, 30 << 20, 2)
    }

    #[test]
    fn a_sample_sums_the_workers() {
        let s = sample(30);
        assert_eq!(s.requests, 1984);
        assert_eq!(s.error_responses, 4);
        assert_eq!(s.errors(), 6);
        assert_eq!(s.buffer_bytes, 1_572_864);
        assert_eq!(s.idle_bytes, 300);
        assert_eq!(s.connections, 110);
        let empty = Sample::from_scrape(Duration::ZERO, &Exposition::default(), 0, 0);
        assert_eq!(empty, Sample::default());
    }

    #[test]
    fn table_csv_and_points() {
        let mut series = Series::default();
        series.push(sample(30));
        series.push(Sample {
            requests: 123_456,
            ..sample(60)
        });
        let table = series.table();
        assert!(table.starts_with(
            "| time (s) | requests served | errors | resident (MiB) | buffer (MiB) | kept for \
             reuse (MiB) |\n|---:|---:|---:|---:|---:|---:|\n"
        ));
        assert!(
            table.contains("| 30 | 1,984 | 6 | 30.0 | 1.5 | 0.0 |\n"),
            "{table}"
        );
        assert!(
            table.ends_with("| 60 | 123,456 | 6 | 30.0 | 1.5 | 0.0 |\n"),
            "{table}"
        );
        let csv = series.csv();
        let lines: Vec<&str> = csv.lines().collect();
        assert_eq!(lines.len(), 3);
        assert_eq!(lines[1], "30.000,1984,4,2,31457280,1572864,300,110");
        assert_eq!(
            series.points(Measure::Requests),
            [(30.0, 1984.0), (60.0, 123_456.0)]
        );
        assert_eq!(series.points(Measure::ResidentMib)[0], (30.0, 30.0));
        assert_eq!(series.last().map(|s| s.requests), Some(123_456));
        let trend = series.trend(|s| s.buffer_bytes);
        assert_eq!(trend.samples()[1], (Duration::from_secs(60), 1_572_864));
    }

    #[test]
    fn csv_reads_back_and_rates_come_from_differences() {
        let mut series = Series::default();
        series.push(sample(30));
        series.push(Sample {
            requests: 1984 + 60_000,
            at: Duration::from_millis(60_500),
            ..sample(60)
        });
        assert_eq!(Series::from_csv(&series.csv()), Ok(series.clone()));
        let rate = series.rate(Measure::Requests);
        assert_eq!(rate[0], (30.0, 1984.0 / 30.0));
        assert_eq!(rate[1].0, 60.5);
        assert!((rate[1].1 - 60_000.0 / 30.5).abs() < 1e-9);

        for bad in [
            "",
            "seconds,requests\n",
            &format!("{CSV_HEADER}\n30.0,1,2\n"),
            &format!("{CSV_HEADER}\n-1,1,2,3,4,5,6,7\n"),
            &format!("{CSV_HEADER}\n30.0,1,2,3,4,5,6,x\n"),
            &format!("{CSV_HEADER}\n30.0,1,2,3,4,5,6,7,8\n"),
        ] {
            assert!(Series::from_csv(bad).is_err(), "{bad:?}");
        }
    }
}
