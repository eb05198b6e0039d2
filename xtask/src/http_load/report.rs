//! The table the request benchmarks print and write into `docs/benchmarks.md`: per case,
//! a row of medians per server and a row of ratios per pair of servers compared.

use std::fmt::Write as _;

use super::wrk::Sample;
use crate::common::{median_by, thousands};

/// A server as the table names it.
pub(crate) trait Row: Copy + PartialEq {
    /// Its name in its own rows.
    fn label(self) -> String;
    /// Its short name in ratio rows.
    fn short(self) -> String;
}

/// Microseconds as wrk-like text.
pub(crate) fn us(v: f64) -> String {
    if v >= 1e6 {
        format!("{:.2} s", v / 1e6)
    } else if v >= 1e3 {
        format!("{:.2} ms", v / 1e3)
    } else {
        format!("{v:.0} µs")
    }
}

/// `v` with `decimals`, or a dash for a value not measured.
fn num(v: f64, decimals: usize) -> String {
    if v.is_finite() {
        format!("{v:.decimals$}")
    } else {
        "—".into()
    }
}

/// One case of the table: its label and every run in it, by server.
pub(crate) type CaseRuns<'a, K> = (&'a str, &'a [(K, Sample)]);

/// Medians per (case, server), in the order of `servers` (a server with no run in a
/// case has no row there, nor one left out of `servers`), and for each `(a, b)` of `pairs` measured in a case the
/// ratios of `a` to `b`: requests/s, and requests per server and per machine
/// CPU-second.
pub(crate) fn table<K: Row>(cases: &[CaseRuns<'_, K>], servers: &[K], pairs: &[(K, K)]) -> String {
    let mut t = String::new();
    t.push_str(
        "| case | server | requests/s (min–max) | MB/s | server CPU µs per request | machine CPU µs per request | server core busy | p50 / p99 latency | socket errors |\n\
         |---|---|---:|---:|---:|---:|---:|---:|---:|\n",
    );
    for &(label, runs) in cases {
        let ran = |k: K| servers.contains(&k) && runs.iter().any(|(s, _)| *s == k);
        for &server in servers.iter().filter(|&&k| ran(k)) {
            let rates: Vec<f64> = runs
                .iter()
                .filter(|(s, _)| *s == server)
                .map(|(_, x)| x.req_per_s)
                .collect();
            let spread = if rates.len() > 1 {
                let lo = rates.iter().copied().fold(f64::INFINITY, f64::min);
                let hi = rates.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                format!(" ({}–{})", thousands(lo), thousands(hi))
            } else {
                String::new()
            };
            let p50 = median_by(runs, server, |x| x.latency_us.map_or(f64::NAN, |l| l.0));
            let p99 = median_by(runs, server, |x| x.latency_us.map_or(f64::NAN, |l| l.1));
            let lat = match (p50.is_nan(), p99.is_nan()) {
                (true, _) => "—".to_string(),
                (false, true) => format!("{} / —", us(p50)),
                (false, false) => format!("{} / {}", us(p50), us(p99)),
            };
            let errors: u64 = runs
                .iter()
                .filter(|(s, _)| *s == server)
                .map(|(_, x)| x.socket_errors)
                .sum();
            let _ = writeln!(
                t,
                "| {label} | {} | {}{spread} | {} | {:.2} | {:.2} | {:.0} % | {lat} | {errors} |",
                server.label(),
                thousands(median_by(runs, server, |x| x.req_per_s)),
                num(median_by(runs, server, |x| x.mb_per_s), 1),
                median_by(runs, server, Sample::server_us),
                median_by(runs, server, Sample::machine_us),
                median_by(runs, server, Sample::busy_percent),
            );
        }
        for &(a, b) in pairs.iter().filter(|(a, b)| ran(*a) && ran(*b)) {
            let r = ratios(runs, a, b);
            let _ = writeln!(
                t,
                "| {label} | **{} / {}** | **{:.2}×** | | **{:.2}×** per CPU-s | **{:.2}×** per CPU-s | | | |",
                a.short(),
                b.short(),
                r.rate,
                r.per_server_cpu,
                r.per_machine_cpu,
            );
        }
    }
    t
}

/// One server against another in one case, from the medians.
pub(crate) struct Ratios {
    pub rate: f64,
    /// Requests per server CPU-second: the inverse of the CPU-per-request ratio.
    pub per_server_cpu: f64,
    pub per_machine_cpu: f64,
}

/// Server `a` against server `b` over `runs`.
pub(crate) fn ratios<K: PartialEq + Copy>(runs: &[(K, Sample)], a: K, b: K) -> Ratios {
    let of = |f: fn(&Sample) -> f64| median_by(runs, b, f) / median_by(runs, a, f);
    Ratios {
        rate: 1.0 / of(|x| x.req_per_s),
        per_server_cpu: of(Sample::server_us),
        per_machine_cpu: of(Sample::machine_us),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, Clone, Copy, PartialEq)]
    enum S {
        A,
        B,
        C,
    }

    impl Row for S {
        fn label(self) -> String {
            format!("server {self:?}")
        }
        fn short(self) -> String {
            format!("{self:?}")
        }
    }

    fn s(rps: f64, server_s: f64, machine_s: f64, mb: f64) -> Sample {
        Sample {
            mb_per_s: mb,
            ..Sample::for_test(rps, server_s, machine_s)
        }
    }

    #[test]
    fn rows_only_for_servers_that_ran_and_dashes_for_what_was_not_measured() {
        let one = vec![
            (S::A, s(200.0, 1.0, 2.0, f64::NAN)),
            (S::B, s(100.0, 1.0, 1.0, f64::NAN)),
        ];
        let two = vec![(S::C, s(50.0, 5.0, 5.0, 2.0))];
        let t = table(
            &[("one", &one), ("two", &two)],
            &[S::A, S::B, S::C],
            &[(S::A, S::B), (S::C, S::B)],
        );
        assert!(
            t.contains("| one | server A | 200 | — | 1000.00 | 2000.00 | 20 % | — | 0 |"),
            "{t}"
        );
        assert!(
            t.contains(
                "| one | **A / B** | **2.00×** | | **2.00×** per CPU-s | **1.00×** per CPU-s |"
            ),
            "{t}"
        );
        assert!(
            !t.contains("| one | server C") && !t.contains("C / B"),
            "{t}"
        );
        assert!(t.contains("| two | server C | 50 | 2.0 |"), "{t}");
        assert_eq!(us(1500.0), "1.50 ms");
        assert_eq!(us(2.5e6), "2.50 s");
    }
}
