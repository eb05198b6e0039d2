//! redis as the benchmark runs it: `redis-server` without persistence in the foreground,
//! and `redis-benchmark -q`, whose report is read here.

use std::path::Path;
use std::process::Command;

/// `cmd` (redis-server, pinned inside a namespace) with the arguments that serve `port`
/// on every IPv4 address, with no snapshots and no append-only file, working in `dir`
/// and logging to stdout.
pub(super) fn server_args(cmd: &mut Command, port: u16, dir: &Path) {
    cmd.arg("--port")
        .arg(port.to_string())
        .args(["--bind", "0.0.0.0", "--protected-mode", "no"])
        .args(["--save", "", "--appendonly", "no", "--daemonize", "no"])
        .args(["--logfile", ""])
        .arg("--dir")
        .arg(dir);
}

/// `cmd` (redis-benchmark, pinned inside a namespace) with the arguments for `requests`
/// of test `test` ("set", "get") from `clients` connections against `host`:`port`.
pub(super) fn benchmark_args(
    cmd: &mut Command,
    host: &str,
    port: u16,
    test: &str,
    requests: u64,
    clients: usize,
) {
    cmd.args(["-h", host, "-p"])
        .arg(port.to_string())
        .args(["-t", test, "-n"])
        .arg(requests.to_string())
        .arg("-c")
        .arg(clients.to_string())
        .arg("-q");
}

/// `redis-server --version`'s line ("Redis server v=7.0.15 sha=… malloc=…") as
/// "redis-server 7.0.15"; another line as it is.
pub(super) fn short_version(line: &str) -> String {
    line.split_whitespace()
        .find_map(|w| w.strip_prefix("v="))
        .map_or(line.to_string(), |v| format!("redis-server {v}"))
}

/// One test's result in `redis-benchmark -q`'s report.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct TestResult {
    pub req_per_s: f64,
    /// The median latency in microseconds, where the report gives it (redis 7 does).
    pub p50_us: Option<f64>,
}

/// The result of test `name` ("SET", "GET") in `redis-benchmark -q`'s output: the
/// final line `NAME: 92506.94 requests per second, p50=0.279 msec`, among progress
/// lines (`NAME: rps=… (overall: …) …`) that a carriage return overwrites on a
/// terminal.
pub(super) fn parse(out: &str, name: &str) -> Option<TestResult> {
    out.split(['\r', '\n']).find_map(|line| {
        let rest = line.trim().strip_prefix(name)?.strip_prefix(':')?;
        let (rate, tail) = rest.trim_start().split_once(" requests per second")?;
        let req_per_s: f64 = rate.trim().parse().ok()?;
        let p50_us = tail
            .split(',')
            .find_map(|kv| kv.trim().strip_prefix("p50="))
            .and_then(|v| v.trim().strip_suffix("msec"))
            .and_then(|v| v.trim().parse::<f64>().ok())
            .map(|ms| ms * 1e3);
        Some(TestResult { req_per_s, p50_us })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_final_line_among_progress_lines() {
        let out = "SET: rps=0.0 (overall: -nan) avg_msec=-nan (overall: -nan)\r\
                   SET: rps=30569.7 (overall: 30569.7) avg_msec=1.327 (overall: 1.327)\r\
                   SET: 42176.30 requests per second, p50=0.391 msec                    \n\
                   GET: rps=46896.0 (overall: 86844.4) avg_msec=0.345 (overall: 0.345)\r\
                   GET: 92506.94 requests per second, p50=0.279 msec\n\n";
        assert_eq!(
            parse(out, "SET"),
            Some(TestResult {
                req_per_s: 42_176.30,
                p50_us: Some(391.0)
            })
        );
        let get = parse(out, "GET").unwrap();
        assert_eq!(get.req_per_s, 92_506.94);
        assert!((get.p50_us.unwrap() - 279.0).abs() < 1e-9);
    }

    #[test]
    fn older_reports_and_failures() {
        assert_eq!(
            parse("SET: 81234.56 requests per second\n", "SET"),
            Some(TestResult {
                req_per_s: 81_234.56,
                p50_us: None
            })
        );
        assert_eq!(parse("SET: 1.0 requests per second\n", "GET"), None);
        assert_eq!(
            parse(
                "Could not connect to Redis at 10.82.0.2:6379: Connection refused\n",
                "SET"
            ),
            None
        );
        assert_eq!(parse("SET: rps=1000.0 (overall: 1000.0)\r", "SET"), None);
        assert_eq!(parse("SETEX: 5.0 requests per second\n", "SET"), None);
    }

    #[test]
    fn versions() {
        assert_eq!(
            short_version("Redis server v=7.0.15 sha=00000000:0 malloc=jemalloc-5.3.0 bits=64"),
            "redis-server 7.0.15"
        );
        assert_eq!(short_version("something else"), "something else");
    }

    #[test]
    fn command_lines() {
        let mut c = Command::new("redis-benchmark");
        benchmark_args(&mut c, "10.0.0.2", 6379, "get", 1000, 50);
        let args: Vec<String> = c
            .get_args()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        assert_eq!(
            args.join(" "),
            "-h 10.0.0.2 -p 6379 -t get -n 1000 -c 50 -q"
        );
        let mut c = Command::new("redis-server");
        server_args(&mut c, 6379, Path::new("/tmp/r"));
        let args: Vec<String> = c
            .get_args()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        assert!(args.windows(2).any(|w| w == ["--save", ""]), "{args:?}");
        assert_eq!(args.last().map(String::as_str), Some("/tmp/r"));
    }
}
