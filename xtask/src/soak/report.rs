//! What a soak run found ([`Outcome`]), as a Markdown report, and whether it passed
//! ([`verdict`]).

use std::fmt::Write;
use std::time::Duration;

use super::clients::{Kind, Totals, MIX};
use super::exposition::Exposition;
use super::series::{Sample, Series};
use crate::http_load::wrk;

const MIB: f64 = (1u64 << 20) as f64;

/// Families left out of the report's counters: labels and ages, not counts.
const NOT_COUNTERS: [&str; 2] = ["rusty_worker_info", "rusty_worker_snapshot_age_seconds"];

/// Everything a run yields.
#[derive(Debug, Clone, Default)]
pub(crate) struct Outcome {
    /// What ran, for the report's first lines.
    pub title: String,
    /// How long the load ran (the clients' rates are over it).
    pub load: Duration,
    pub series: Series,
    /// The soak's own clients, by kind.
    pub clients: Vec<Totals>,
    /// wrk's summary (`None`: it printed none) and whether it exited with success.
    pub wrk: Option<wrk::Sample>,
    pub wrk_ok: bool,
    /// httpd's metrics after the load ended.
    pub last_scrape: Exposition,
    /// Whether httpd was still running when the load ended.
    pub httpd_alive: bool,
    /// httpd's own counter lines from its log, printed as it stopped.
    pub httpd_lines: Vec<String>,
    /// What the link to httpd dropped outside httpd, in a sentence (empty: nothing to
    /// say, as on kernel sockets).
    pub link: String,
}

/// How much growth after the warm-up still counts as flat.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Limits {
    pub warm_up: Duration,
    pub resident_slack: u64,
    pub buffer_slack: u64,
}

/// Every reason the run failed, or `Ok`: no request failed (wrk's, the clients' or
/// as httpd answered them), httpd stayed up, and neither its resident memory nor its
/// buffer memory kept growing after the warm-up.
pub(crate) fn verdict(o: &Outcome, limits: Limits) -> Result<(), String> {
    let mut problems = Vec::new();
    match &o.wrk {
        None => problems.push("wrk printed no summary".to_string()),
        Some(w) if !o.wrk_ok || w.socket_errors > 0 || w.non_2xx > 0 || w.requests == 0 => problems
            .push(format!(
                "wrk: {}, {} requests, {} socket errors, {} non-2xx",
                if o.wrk_ok { "exited 0" } else { "failed" },
                w.requests,
                w.socket_errors,
                w.non_2xx
            )),
        Some(_) => {}
    }
    for t in &o.clients {
        if t.failures() > 0 {
            problems.push(format!(
                "{}: {} failed ({}); first: {}",
                t.kind.name(),
                t.failures(),
                t.failure_list(),
                t.examples.join("; ")
            ));
        } else if t.ok == 0 {
            problems.push(format!("{}: nothing done", t.kind.name()));
        }
    }
    if o.clients.len() != MIX.len() {
        problems.push(format!(
            "{} kinds of client reported, {} expected",
            o.clients.len(),
            MIX.len()
        ));
    }
    let last = Sample::from_scrape(Duration::ZERO, &o.last_scrape, 0, 0);
    if last.error_responses > 0 {
        problems.push(format!(
            "httpd answered {} requests with an error status",
            last.error_responses
        ));
    }
    if !o.httpd_alive {
        problems.push("httpd exited before the load ended".into());
    }
    type Bytes = fn(&Sample) -> u64;
    let resident: Bytes = |s| s.resident_bytes;
    let buffers: Bytes = |s| s.buffer_bytes;
    for (what, bytes, slack) in [
        ("resident memory", resident, limits.resident_slack),
        ("buffer memory", buffers, limits.buffer_slack),
    ] {
        if let Err(e) = o.series.trend(bytes).check_flat(limits.warm_up, slack) {
            problems.push(format!("{what}: {e}"));
        }
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(problems.join("\n"))
    }
}

/// The run as Markdown: what ran, the samples over time, what each kind of client did,
/// memory in brief, httpd's counters and the verdict.
pub(crate) fn report(o: &Outcome, limits: Limits, verdict: &Result<(), String>) -> String {
    let mut out = format!(
        "{}\n\nWarm-up: the first {} s. Errors: responses other than 2xx and failed \
         requests of the soak's own clients (wrk's only at its end, below).\n\n",
        o.title,
        limits.warm_up.as_secs()
    );
    out += &o.series.table();
    out += "\n| client | done | per second | longest wait (s) | failed | failures |\n\
            |---|---:|---:|---:|---:|---|\n";
    let rate = |n: u64| {
        let secs = o.load.as_secs_f64();
        if secs > 0.0 {
            crate::common::thousands(n as f64 / secs)
        } else {
            "—".into()
        }
    };
    let mut row = |name: &str, done: u64, wait: &str, failed: u64, failures: &str| {
        let _ = writeln!(
            out,
            "| {name} | {} | {} | {wait} | {} | {failures} |",
            crate::common::thousands(done as f64),
            rate(done),
            crate::common::thousands(failed as f64),
        );
    };
    if let Some(w) = &o.wrk {
        row(
            "keep-alive (wrk)",
            w.requests.saturating_sub(w.non_2xx),
            "—",
            w.socket_errors + w.non_2xx,
            &format!("{} socket errors, {} non-2xx", w.socket_errors, w.non_2xx),
        );
    }
    for t in &o.clients {
        // A vanishing client reads nothing.
        let wait = if t.kind == Kind::Vanish {
            "—".to_string()
        } else {
            format!("{:.2}", t.longest_wait.as_secs_f64())
        };
        row(t.kind.name(), t.ok, &wait, t.failures(), &t.failure_list());
    }
    out += &memory_summary(&o.series, limits.warm_up);
    if !o.link.is_empty() {
        let _ = writeln!(out, "\n{}", o.link);
    }
    out += "\nhttpd's counters after the load, summed over workers (zeros left out):\n\n\
            | counter | value |\n|---|---:|\n";
    for (name, v) in o.last_scrape.over_workers() {
        if v != 0.0 && !NOT_COUNTERS.iter().any(|n| name.starts_with(n)) {
            let _ = writeln!(out, "| `{name}` | {} |", crate::common::thousands(v));
        }
    }
    if !o.httpd_lines.is_empty() {
        out += "\nhttpd's own counters as it stopped:\n\n```\n";
        for l in &o.httpd_lines {
            out += l;
            out.push('\n');
        }
        out += "```\n";
    }
    match verdict {
        Ok(()) => out += "\nPassed.\n",
        Err(e) => {
            let _ = write!(out, "\nFailed:\n\n```\n{e}\n```\n");
        }
    }
    out
}

/// Resident and buffer memory at the first sample, the highest after the warm-up and
/// at the last sample.
fn memory_summary(series: &Series, warm_up: Duration) -> String {
    let (Some(first), Some(last)) = (series.samples().first(), series.last()) else {
        return "\nNo samples.\n".into();
    };
    let mib = |b: u64| format!("{:.1}", b as f64 / MIB);
    let high = |f: fn(&Sample) -> u64| {
        let after = series.samples().iter().filter(|s| s.at >= warm_up);
        after.map(f).max().map_or("—".to_string(), mib)
    };
    format!(
        "\nResident memory {} MiB at {} s, at most {} MiB after the warm-up, {} MiB at {} s; \
         buffer memory {}, {} and {} MiB.\n",
        mib(first.resident_bytes),
        first.at.as_secs(),
        high(|s| s.resident_bytes),
        mib(last.resident_bytes),
        last.at.as_secs(),
        mib(first.buffer_bytes),
        high(|s| s.buffer_bytes),
        mib(last.buffer_bytes),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::soak::http::Failure;

    const LIMITS: Limits = Limits {
        warm_up: Duration::from_secs(60),
        resident_slack: 4 << 20,
        buffer_slack: 4 << 20,
    };

    fn good() -> Outcome {
        let mut series = Series::default();
        for i in 1..=10u64 {
            series.push(Sample {
                at: Duration::from_secs(30 * i),
                requests: 1000 * i,
                resident_bytes: (30 << 20) + 1000 * i.min(3),
                buffer_bytes: 1 << 20,
                ..Sample::default()
            });
        }
        Outcome {
            title: "httpd on Tap".into(),
            load: Duration::from_secs(300),
            series,
            clients: MIX
                .iter()
                .map(|p| Totals {
                    kind: p.kind,
                    ok: 100,
                    failed: [0; Failure::ALL.len()],
                    examples: Vec::new(),
                    longest_wait: Duration::from_millis(250),
                })
                .collect(),
            wrk: Some(wrk::Sample {
                requests: 5000,
                ..wrk::Sample::default()
            }),
            wrk_ok: true,
            last_scrape: Exposition::parse(
                "rusty_http_requests_total{worker=\"0\",code=\"200\"} 10000\n\
                 rusty_http_requests_total{worker=\"0\",code=\"404\"} 0\n\
                 rusty_worker_info{worker=\"0\",name=\"tap-q0\"} 1\n",
            )
            .unwrap(),
            httpd_alive: true,
            httpd_lines: vec!["httpd total: connections=5 requests=10000".into()],
            link: "Frames the TAP's host side dropped: 3".into(),
        }
    }

    #[test]
    fn a_clean_flat_run_passes() {
        let o = good();
        let v = verdict(&o, LIMITS);
        assert_eq!(v, Ok(()));
        let r = report(&o, LIMITS, &v);
        assert!(
            r.starts_with("httpd on Tap\n\nWarm-up: the first 60 s."),
            "{r}"
        );
        assert!(
            r.contains("| keep-alive (wrk) | 5,000 | 17 | — | 0 | 0 socket errors, 0 non-2xx |")
        );
        assert!(
            r.contains("| slow readers | 100 | 0 | 0.25 | 0 | none |"),
            "{r}"
        );
        assert!(
            r.contains("| vanishing clients | 100 | 0 | — | 0 | none |"),
            "{r}"
        );
        assert!(!r.contains("404"), "zeros are left out");
        assert!(!r.contains("worker_info"));
        assert!(r.contains("httpd total: connections=5"));
        assert!(r.contains("\nFrames the TAP's host side dropped: 3\n"));
        assert!(r.contains("Resident memory 30.0 MiB at 30 s"), "{r}");
        assert!(r.ends_with("\nPassed.\n"));
    }

    #[test]
    fn a_failed_request_of_any_kind_fails_the_run() {
        let mut o = good();
        o.clients[1].failed[Failure::WrongBody.index()] = 1;
        o.clients[1].examples = vec!["wrong body: differs at byte 7".into()];
        let err = verdict(&o, LIMITS).unwrap_err();
        assert!(
            err.contains("range requests: 1 failed (1 wrong body)"),
            "{err}"
        );
        assert!(err.contains("differs at byte 7"));

        let mut o = good();
        o.clients[3].ok = 0;
        assert!(verdict(&o, LIMITS)
            .unwrap_err()
            .contains("vanishing clients: nothing done"));

        let mut o = good();
        o.clients.pop();
        assert!(verdict(&o, LIMITS).is_err());

        let mut o = good();
        o.wrk = o.wrk.map(|w| wrk::Sample {
            socket_errors: 3,
            ..w
        });
        assert!(verdict(&o, LIMITS).unwrap_err().contains("3 socket errors"));

        let mut o = good();
        o.wrk_ok = false;
        assert!(verdict(&o, LIMITS).unwrap_err().contains("wrk: failed"));

        let mut o = good();
        o.wrk = None;
        assert!(verdict(&o, LIMITS).is_err());

        let mut o = good();
        o.last_scrape =
            Exposition::parse("rusty_http_requests_total{worker=\"1\",code=\"400\"} 2\n").unwrap();
        let err = verdict(&o, LIMITS).unwrap_err();
        assert!(err.contains("2 requests with an error status"), "{err}");

        let mut o = good();
        o.httpd_alive = false;
        let v = verdict(&o, LIMITS);
        assert!(v.as_ref().unwrap_err().contains("httpd exited"));
        assert!(report(&o, LIMITS, &v).contains("\nFailed:\n"));
        assert_eq!(Kind::Vanish.name(), "vanishing clients");
    }

    /// [`good`] with each sample changed by `change` (given the sample's index).
    fn changed(change: impl Fn(Sample, u64) -> Sample) -> Outcome {
        let mut o = good();
        let mut series = Series::default();
        for (i, s) in o.series.samples().iter().enumerate() {
            series.push(change(*s, i as u64));
        }
        o.series = series;
        o
    }

    #[test]
    fn growing_memory_fails_the_run() {
        let o = changed(|s, i| Sample {
            buffer_bytes: s.buffer_bytes + i * (1 << 20),
            ..s
        });
        let err = verdict(&o, LIMITS).unwrap_err();
        assert!(
            err.starts_with("buffer memory: memory kept growing"),
            "{err}"
        );
        let o = changed(|s, i| Sample {
            resident_bytes: s.resident_bytes + i * (2 << 20),
            ..s
        });
        assert!(verdict(&o, LIMITS)
            .unwrap_err()
            .starts_with("resident memory:"));
        // Growth within the slack is flat.
        let o = changed(|s, i| Sample {
            resident_bytes: s.resident_bytes + i * (256 << 10),
            ..s
        });
        assert_eq!(verdict(&o, LIMITS), Ok(()));

        let mut o = good();
        o.series = Series::default();
        assert!(verdict(&o, LIMITS)
            .unwrap_err()
            .contains("no samples after the warm-up"));
    }
}
