//! wrk's side of a run: the numbers one run yields ([`Sample`]) and how they are read
//! from wrk's `--latency` report. (The Lua script for random pages is generated with
//! the page set, in [`crate::pages::wrk_script`].)

use super::tls::Handshakes;
use crate::common::CpuTimes;

/// One wrk run.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(crate) struct Sample {
    pub requests: u64,
    pub req_per_s: f64,
    pub mb_per_s: f64,
    /// p50 and p99 in microseconds.
    pub latency_us: Option<(f64, f64)>,
    pub socket_errors: u64,
    pub non_2xx: u64,
    /// The server's and the machine's CPU time over wrk's run.
    pub cpu: CpuTimes,
    /// Wall-clock seconds of wrk's run (over which `cpu` was taken).
    pub wall_s: f64,
    /// Over TLS, the handshakes the server counted in the run (httpd's counters).
    pub handshakes: Option<Handshakes>,
}

impl Sample {
    /// Server CPU microseconds per request.
    pub(crate) fn server_us(&self) -> f64 {
        self.cpu.server_us_per(self.requests)
    }

    /// Machine CPU microseconds per request.
    pub(crate) fn machine_us(&self) -> f64 {
        self.cpu.machine_us_per(self.requests)
    }

    /// A run of 5 s at `rps` on `server_s` and `machine_s` seconds of CPU, for tests.
    #[cfg(test)]
    pub(crate) fn for_test(rps: f64, server_s: f64, machine_s: f64) -> Sample {
        Sample {
            requests: (rps * 5.0) as u64,
            req_per_s: rps,
            mb_per_s: 1.0,
            cpu: CpuTimes {
                server_s,
                machine_s,
            },
            wall_s: 5.0,
            ..Sample::default()
        }
    }

    /// How busy the server's core was: its CPU time over wall time, in percent.
    pub(crate) fn busy_percent(&self) -> f64 {
        if self.wall_s > 0.0 {
            100.0 * self.cpu.server_s / self.wall_s
        } else {
            f64::NAN
        }
    }
}

/// wrk's time ("263.00us", "1.20ms", "2.00s", "1.00m") in microseconds.
fn parse_time_us(s: &str) -> Option<f64> {
    with_unit(
        s,
        &[
            ("us", 1.0),
            ("ms", 1e3),
            ("s", 1e6),
            ("m", 60e6),
            ("h", 3600e6),
        ],
    )
}

/// wrk's byte count ("30.05MB", "512.00B"; binary units) in bytes.
fn parse_bytes(s: &str) -> Option<f64> {
    with_unit(
        s,
        &[
            ("B", 1.0),
            ("KB", 1024.0),
            ("MB", 1024.0 * 1024.0),
            ("GB", 1024.0 * 1024.0 * 1024.0),
            ("TB", 1024.0f64.powi(4)),
        ],
    )
}

/// A number followed by one of `units` (name, scale), scaled; `None` for another unit.
fn with_unit(s: &str, units: &[(&str, f64)]) -> Option<f64> {
    let split = s.find(|c: char| c.is_ascii_alphabetic())?;
    let (num, unit) = s.split_at(split);
    let v: f64 = num.parse().ok()?;
    let scale = units.iter().find(|(name, _)| *name == unit)?.1;
    Some(v * scale)
}

/// Requests, requests/s, MB/s (10⁶ bytes), p50/p99, errors from wrk's report.
pub(crate) fn parse_wrk(out: &str) -> Option<Sample> {
    let mut s = Sample::default();
    let (mut rate, mut count) = (false, false);
    let (mut p50, mut p99) = (None, None);
    for line in out.lines() {
        let l = line.trim();
        let words: Vec<&str> = l.split_whitespace().collect();
        if let Some(v) = l.strip_prefix("Requests/sec:") {
            s.req_per_s = v.trim().parse().ok()?;
            rate = true;
        } else if let Some(v) = l.strip_prefix("Transfer/sec:") {
            s.mb_per_s = parse_bytes(v.trim())? / 1e6;
        } else if words.len() >= 3 && words[1] == "requests" && words[2] == "in" {
            s.requests = words[0].parse().ok()?;
            count = true;
        } else if words.len() == 2 && words[0] == "50%" {
            p50 = parse_time_us(words[1]);
        } else if words.len() == 2 && words[0] == "99%" {
            p99 = parse_time_us(words[1]);
        } else if let Some(v) = l.strip_prefix("Socket errors:") {
            // "connect 0, read 0, write 0, timeout 0"
            s.socket_errors = v
                .split(',')
                .filter_map(|kv| kv.split_whitespace().nth(1)?.parse::<u64>().ok())
                .sum();
        } else if let Some(v) = l.strip_prefix("Non-2xx or 3xx responses:") {
            s.non_2xx = v.trim().parse().ok()?;
        }
    }
    s.latency_us = p50.zip(p99);
    (rate && count).then_some(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    const WRK_OUT: &str = "Running 5s test @ http://127.0.0.1:8080/64b.html\n\
  1 threads and 64 connections\n\
  Thread Stats   Avg      Stdev     Max   +/- Stdev\n\
    Latency   470.39us  102.86us   5.27ms   91.47%\n\
    Req/Sec    68.12k     2.69k   72.01k    76.00%\n\
  Latency Distribution\n\
     50%  457.00us\n\
     75%  497.00us\n\
     90%  556.00us\n\
     99%    1.20ms\n\
  678123 requests in 5.00s, 150.23MB read\n\
  Socket errors: connect 0, read 12, write 0, timeout 3\n\
  Non-2xx or 3xx responses: 2\n\
Requests/sec: 135624.60\n\
Transfer/sec:     30.05MB\n";

    #[test]
    fn reads_wrk_output() {
        let s = parse_wrk(WRK_OUT).unwrap();
        assert_eq!(s.requests, 678_123);
        assert_eq!(s.req_per_s, 135_624.60);
        assert!((s.mb_per_s - 30.05 * 1.048_576).abs() < 1e-9);
        assert_eq!(s.latency_us, Some((457.0, 1200.0)));
        assert_eq!(s.socket_errors, 15);
        assert_eq!(s.non_2xx, 2);
        assert!(parse_wrk("unable to connect to 10.0.0.1:80 Connection refused\n").is_none());
        assert_eq!(parse_time_us("2.00s"), Some(2e6));
        assert_eq!(parse_bytes("512.00B"), Some(512.0));
        assert_eq!(parse_bytes("1.5KB"), Some(1536.0));
        assert_eq!(parse_time_us("1.00m"), Some(60e6));
        assert_eq!(parse_time_us("3.00d"), None);
        assert_eq!(parse_bytes("12"), None);
    }
}
