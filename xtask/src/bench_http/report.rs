//! What a benchmark run reports: the markdown table of medians and ratios, the verdict
//! against the goal, and the README section around them.

use std::fmt::Write as _;

use super::tools::Tools;
use super::wrk::Sample;
use super::{Options, Server, CASES, GOAL, PORT, PREFIX, STACK_IP};
use crate::common::{median_by, provenance, thousands};
use crate::pages::{self, PAGES, SMALL_PAGE};

/// Microseconds as wrk-like text.
pub(super) fn us(v: f64) -> String {
    if v >= 1e6 {
        format!("{:.2} s", v / 1e6)
    } else if v >= 1e3 {
        format!("{:.2} ms", v / 1e3)
    } else {
        format!("{v:.0} µs")
    }
}

/// Medians per (case, server) and the ratios of Rusty on TAP to the others.
pub(super) fn table(samples: &[Vec<(Server, Sample)>], servers: &[Server]) -> String {
    let mut t = String::new();
    t.push_str(
        "| case | server | requests/s (min–max) | MB/s | server CPU s per 100k requests | server core busy | p50 / p99 latency | socket errors |\n\
         |---|---|---:|---:|---:|---:|---:|---:|\n",
    );
    for (case, runs) in CASES.iter().zip(samples) {
        for &server in servers {
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
            let lat = if p50.is_nan() {
                "—".to_string()
            } else {
                format!("{} / {}", us(p50), us(p99))
            };
            let errors: u64 = runs
                .iter()
                .filter(|(s, _)| *s == server)
                .map(|(_, x)| x.socket_errors)
                .sum();
            let _ = writeln!(
                t,
                "| {} | {} | {}{spread} | {:.1} | {:.3} | {:.0} % | {lat} | {errors} |",
                case.label,
                server.label(),
                thousands(median_by(runs, server, |x| x.req_per_s)),
                median_by(runs, server, |x| x.mb_per_s),
                median_by(runs, server, Sample::cpu_per_100k),
                median_by(runs, server, Sample::busy_percent),
            );
        }
        for (other, name) in [(Server::Kernel, "kernel httpd"), (Server::Nginx, "nginx")] {
            if !servers.contains(&other) {
                continue;
            }
            let rate = median_by(runs, Server::Tap, |x| x.req_per_s)
                / median_by(runs, other, |x| x.req_per_s);
            let cpu = median_by(runs, Server::Tap, Sample::cpu_per_100k)
                / median_by(runs, other, Sample::cpu_per_100k);
            let _ = writeln!(
                t,
                "| {} | **TAP / {name}** | **{rate:.2}×** | | **{cpu:.2}×** | | | |",
                case.label
            );
        }
    }
    t
}

/// Where Rusty on TAP stands against the goal (≥ 3× the kernel-backend httpd per core).
pub(super) fn verdict(samples: &[Vec<(Server, Sample)>]) -> String {
    let mut parts = Vec::new();
    let mut met = 0;
    for (case, runs) in CASES.iter().zip(samples) {
        let rate = median_by(runs, Server::Tap, |x| x.req_per_s)
            / median_by(runs, Server::Kernel, |x| x.req_per_s);
        // Requests per server CPU-second: the inverse of the CPU-per-request ratio.
        let eff = median_by(runs, Server::Kernel, Sample::cpu_per_100k)
            / median_by(runs, Server::Tap, Sample::cpu_per_100k);
        if rate >= GOAL {
            met += 1;
        }
        parts.push(format!(
            "- {}: {rate:.2}× the requests/s, {eff:.2}× the requests per server CPU-second\n",
            case.label
        ));
    }
    format!(
        "Goal: Rusty on TAP at least {GOAL:.0}× the kernel-backend httpd per server core. \
         Met in {met} of {} cases in this run:\n\n{}",
        CASES.len(),
        parts.concat()
    )
}

pub(super) fn readme_body(
    opts: &Options,
    set: &pages::PageSet,
    tools: &Tools,
    table: &str,
    verdict: &str,
) -> String {
    let spin = opts.run.host.spin("the binary's default `--spin-us 200`");
    let versions = format!(
        "{}{}",
        tools.wrk_version.as_deref().unwrap_or("wrk"),
        tools
            .nginx_version
            .as_deref()
            .map(|v| format!(", {v}"))
            .unwrap_or_default()
    );
    let nginx_note = tools
        .nginx_note
        .as_deref()
        .map(|n| format!("\n\nnginx {n}: its rows are missing."))
        .unwrap_or_default();
    format!(
        "### HTTP: httpd on Rusty (TAP) vs httpd on kernel sockets vs nginx\n\
         \n\
         {provenance}; {versions}.\n\
         {rounds} run(s) × {d} s per case and server, rotating which server goes first; each\n\
         column is the median over the runs, requests/s also shows the slowest–fastest run.\n\
         \n\
         Every server runs on one core, CPU {scpu} (`taskset`; httpd with one worker and\n\
         {spin}; nginx with `worker_processes 1`, master and worker both pinned); the client,\n\
         `taskset -c {ccpu} wrk -t1 -c{conns} -d{d}s --latency`, runs on CPU {ccpu}; all inside a\n\
         private network namespace. Rusty: wrk's kernel → TAP → Rusty (`httpd {PORT} PAGES 1\n\
         tap:NAME {STACK_IP}/{PREFIX} 1`). Kernel: wrk → loopback → `httpd {PORT} PAGES` on kernel\n\
         sockets. nginx: wrk → loopback → nginx with `access_log off`, `sendfile on`,\n\
         `open_file_cache`, `keepalive_requests 100000000`. Pages (`cargo xtask gen-pages DIR`\n\
         writes the same set): `{SMALL_PAGE}` (64 B) and {PAGES} pages `0.html`…`{last}.html` with\n\
         log-normal sizes (median {med} B, mean {mean} B, max {max} B, fixed seed), requested\n\
         uniformly at random by a generated wrk Lua script; `Connection: close` is wrk's `-H`.\n\
         Server CPU is utime + stime from `/proc/PID/stat` (nginx: master + worker) over wrk's\n\
         run, per 100,000 requests; an idle httpd worker busy-polls for `--spin-us` before it\n\
         parks, and that counts too. Server core busy is that CPU time over wrk's wall time:\n\
         below 100 % the server waited for wrk, whose core was then the bottleneck (an httpd\n\
         worker's polling hides this). The kernel runs a receiver's TCP input in the sender's\n\
         context (on loopback, and when Rusty writes to the TAP), so every server's CPU includes\n\
         wrk's kernel receiving the responses; for httpd on kernel sockets and nginx, wrk's core\n\
         in turn pays for the server kernel's receive of the requests, while Rusty reads its\n\
         requests from the TAP itself.{nginx_note}\n\
         \n\
         {table}\n\
         {verdict}",
        provenance = provenance(),
        rounds = opts.run.rounds,
        d = opts.run.duration,
        scpu = opts.run.host.server_cpu,
        ccpu = opts.run.host.client_cpu,
        conns = opts.connections,
        last = PAGES - 1,
        med = thousands(set.median() as f64),
        mean = thousands((set.total() / set.sizes.len().max(1)) as f64),
        max = thousands(set.sizes.iter().max().copied().unwrap_or(0) as f64),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_and_ratios() {
        let s = |rps: f64, cpu: f64| Sample {
            requests: (rps * 5.0) as u64,
            req_per_s: rps,
            mb_per_s: 1.0,
            latency_us: Some((100.0, 900.0)),
            server_cpu_s: cpu,
            wall_s: 5.0,
            ..Sample::default()
        };
        let runs = vec![
            (Server::Tap, s(300_000.0, 5.0)),
            (Server::Kernel, s(100_000.0, 5.0)),
            (Server::Nginx, s(150_000.0, 5.0)),
        ];
        let samples = vec![runs.clone(), runs.clone(), runs];
        let servers = [Server::Tap, Server::Kernel, Server::Nginx];
        let t = table(&samples, &servers);
        assert!(t.contains("| 64 B, keep-alive | httpd, Rusty on TAP | 300,000 | 1.0 | 0.333 | 100 % | 100 µs / 900 µs | 0 |"), "{t}");
        assert!(
            t.contains("| **TAP / kernel httpd** | **3.00×** | | **0.33×** |"),
            "{t}"
        );
        assert!(
            t.contains("| **TAP / nginx** | **2.00×** | | **0.50×** |"),
            "{t}"
        );
        let v = verdict(&samples);
        assert!(v.contains("Met in 3 of 3 cases"), "{v}");
        let t = table(&samples, &servers[..2]);
        assert!(!t.contains("nginx"));
    }
}
