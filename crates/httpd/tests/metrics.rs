//! httpd's live metrics (`--metrics`, `--metrics-file`) on the kernel backend on
//! 127.0.0.1, no privileges needed: what a scrape says matches the requests sent, a
//! real Prometheus parser (Python's prometheus_client) reads it, counters only grow,
//! and hostile scrapers stop neither the metrics nor the HTTP service.

mod common;

use std::fs;
use std::io::Write;
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use common::{
    exchange, make_site, metrics_addr_in, requests, scrape, total_counter, Scratch, Server,
};

/// Where the log says the metrics are served.
fn metrics_addr(server: &Server) -> SocketAddr {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let log = server.log();
        if let Some(addr) = metrics_addr_in(&log) {
            return addr;
        }
        assert!(
            Instant::now() < deadline,
            "no metrics address logged:\n{log}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn get(addr: SocketAddr, path: &str) -> u16 {
    let req = format!("GET {path} HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
    exchange(addr, req.as_bytes()).0
}

/// Parses each file given with prometheus_client, checks that every counter sample of
/// the first is in the second with a value at least as large, and prints the number of
/// families and the HTTP requests by code of the last.
const CHECK: &str = r#"
import sys
from prometheus_client.parser import text_string_to_metric_families

def parse(path):
    families = list(text_string_to_metric_families(open(path).read()))
    counters = {}
    for f in families:
        assert f.documentation, f"{f.name}: no help"
        assert f.samples, f"{f.name}: no samples"
        assert "worker" in f.samples[0].labels, f"{f.name}: no worker label"
        if f.type == "counter":
            for s in f.samples:
                key = (s.name, tuple(sorted(s.labels.items())))
                counters[key] = s.value
    return families, counters

runs = [parse(p) for p in sys.argv[1:]]
for (_, before), (_, after) in zip(runs, runs[1:]):
    for key, value in before.items():
        assert key in after, f"{key} vanished"
        assert after[key] >= value, f"{key} went from {value} to {after[key]}"
families, counters = runs[-1]
codes = {}
for (name, labels), value in counters.items():
    if name == "rusty_http_requests_total":
        code = dict(labels)["code"]
        codes[code] = codes.get(code, 0) + value
print(len(families), " ".join(f"{c}={int(n)}" for c, n in sorted(codes.items()) if n))
"#;

/// Parses the file given with prometheus_client's OpenMetrics parser (which insists on
/// `# EOF`, counter families named without `_total`, and no clashing names) and prints
/// the number of families.
const CHECK_OPENMETRICS: &str = r#"
import sys
from prometheus_client.openmetrics.parser import text_string_to_metric_families
print(len(list(text_string_to_metric_families(open(sys.argv[1]).read()))))
"#;

fn prometheus_check(python: &Path, files: &[&Path]) -> String {
    python_check(python, CHECK, files)
}

fn python_check(python: &Path, script: &str, files: &[&Path]) -> String {
    let out = Command::new(python)
        .arg("-c")
        .arg(script)
        .args(files)
        .output()
        .expect("run python3");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "prometheus_client refused the exposition:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout.trim().to_string()
}

/// Requests sent show up, counted by code and worker, within a few intervals; the
/// endpoint's text and the file parse with prometheus_client; counters only grow
/// between scrapes; the file holds the final counts after httpd stops.
#[test]
fn metrics_count_live_requests_on_kernel_backend() {
    let test = "metrics_count_live_requests_on_kernel_backend";
    let Some(python) =
        rusty_testnet::python_importing(test, "prometheus_client", "python3-prometheus-client")
    else {
        return;
    };
    let dir = Scratch::new("metrics");
    let root = make_site(&dir.0, None);
    let file = dir.0.join("rusty.prom");
    let file_arg = file.to_string_lossy().into_owned();
    let extra = ["--metrics", "127.0.0.1:0", "--metrics-file", &file_arg];
    let server = Server::start(&root, &dir.0, 2, &extra);
    let metrics = metrics_addr(&server);
    let http: SocketAddr = ([127, 0, 0, 1], server.port).into();
    let first = dir.0.join("first.prom");
    fs::write(&first, scrape(metrics)).unwrap();
    const OK: u64 = 30;
    const MISSING: u64 = 10;
    for i in 0..OK {
        let path = ["/", "/hello.txt", "/style.css"][i as usize % 3];
        assert_eq!(get(http, path), 200, "{path}");
    }
    for _ in 0..MISSING {
        assert_eq!(get(http, "/no-such-file"), 404);
    }
    // Workers publish once a second: wait (bounded) for the counts to show.
    let deadline = Instant::now() + Duration::from_secs(10);
    let text = loop {
        let text = scrape(metrics);
        if requests(&text, "200") == OK && requests(&text, "404") == MISSING {
            break text;
        }
        assert!(Instant::now() < deadline, "counts never showed:\n{text}");
        std::thread::sleep(Duration::from_millis(200));
    };
    let second = dir.0.join("second.prom");
    fs::write(&second, &text).unwrap();
    let report = prometheus_check(&python, &[&first, &second]);
    assert!(report.ends_with(" 200=30 404=10"), "{report}");
    let families: usize = report.split(' ').next().unwrap().parse().unwrap();
    assert!(families > 50, "{report}");
    for want in [
        "rusty_drops_total{worker=\"1\",reason=\"truncated\"} 0",
        "rusty_http_connections_total{worker=\"0\"}",
        "rusty_connections{worker=\"1\"}",
        "rusty_buffer_memory_peak_bytes{worker=\"0\"}",
    ] {
        assert!(text.contains(want), "{want} not in\n{text}");
    }
    // The same families in OpenMetrics, for a client that asks for it.
    let accept = "GET /metrics HTTP/1.1\r\nAccept: application/openmetrics-text; \
                  version=1.0.0\r\n\r\n";
    let (code, om) = exchange(metrics, accept.as_bytes());
    assert_eq!(code, 200, "{om}");
    let om_file = dir.0.join("openmetrics.txt");
    fs::write(&om_file, om.split_once("\r\n\r\n").map_or("", |(_, b)| b)).unwrap();
    let om_families = python_check(&python, CHECK_OPENMETRICS, &[&om_file]);
    assert_eq!(om_families, families.to_string(), "{om}");
    let log = server.stop();
    assert_eq!(total_counter(&log, "requests"), OK + MISSING, "{log}");
    let report = prometheus_check(&python, &[&second, &file]);
    assert!(report.ends_with(" 200=30 404=10"), "the file: {report}");
    let names: Vec<_> = fs::read_dir(&dir.0)
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n.ends_with(".tmp"))
        .collect();
    assert!(names.is_empty(), "temporary files left: {names:?}");
}

/// Slow scrapers that never finish their request, more of them than the endpoint
/// keeps, oversized and malformed requests, other methods and paths: the endpoint
/// answers each as it should, keeps serving scrapes, and httpd keeps serving pages.
#[test]
fn hostile_scrapes_leave_http_and_metrics_serving() {
    let dir = Scratch::new("metrics-hostile");
    let root = make_site(&dir.0, None);
    let server = Server::start(&root, &dir.0, 1, &["--metrics", "127.0.0.1:0"]);
    let metrics = metrics_addr(&server);
    let http: SocketAddr = ([127, 0, 0, 1], server.port).into();
    let slow: Vec<TcpStream> = (0..40)
        .filter_map(|_| {
            let mut s = TcpStream::connect_timeout(&metrics, Duration::from_secs(5)).ok()?;
            s.write_all(b"GET /metr").ok()?;
            Some(s)
        })
        .collect();
    assert!(
        slow.len() >= 20,
        "only {} slow clients connected",
        slow.len()
    );
    let huge = format!(
        "GET /metrics HTTP/1.1\r\nX: {}\r\n\r\n",
        "a".repeat(64 << 10)
    );
    for _ in 0..5 {
        let (code, text) = exchange(metrics, huge.as_bytes());
        // Either the 431 arrives, or the kernel resets the connection on the bytes
        // the endpoint never read: both refuse the request.
        assert!(code == 431 || code == 0, "{text}");
    }
    for (request, want) in [
        (&b"POST /metrics HTTP/1.1\r\n\r\n"[..], 405),
        (b"DELETE /metrics HTTP/1.1\r\n\r\n", 405),
        (b"GET / HTTP/1.1\r\n\r\n", 404),
        (b"GET /metrics/../etc HTTP/1.1\r\n\r\n", 404),
        (b"\x00\xff garbage\r\n\r\n", 400),
        (b"GET /metrics\r\n\r\n", 400),
    ] {
        let (code, text) = exchange(metrics, request);
        assert_eq!(code, want, "{:?}: {text}", String::from_utf8_lossy(request));
    }
    for _ in 0..20 {
        assert_eq!(get(http, "/hello.txt"), 200);
    }
    assert!(scrape(metrics).contains("rusty_http_requests_total"));
    drop(slow);
    let text = scrape(metrics);
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut text = text;
    while requests(&text, "200") < 20 {
        assert!(Instant::now() < deadline, "requests never showed:\n{text}");
        std::thread::sleep(Duration::from_millis(200));
        text = scrape(metrics);
    }
    let log = server.stop();
    assert_eq!(total_counter(&log, "200"), 20, "{log}");
}
