//! What a benchmark run reports: the markdown table of medians and ratios
//! ([`crate::http_load::report`] with this benchmark's rows), the verdict against the
//! goals, and the block of `docs/benchmarks.md` around them.

use super::tools::Tools;
use super::{Options, Server, CASES, GOAL, PORT, TAP, XDP, XDP_GOALS};
use crate::common::{provenance, thousands, Result};
use crate::family::{self, CaseRuns, Families, Over};
use crate::http_load::report::{self, ratios, Row};
use crate::http_load::wrk::Sample;
use crate::pages::{self, PAGES, SMALL_PAGE};
use crate::results::{Chart, LoadCharts};
use crate::xdp::{self, Goal, Per};

/// Each case's label and runs.
pub(super) fn case_runs(
    samples: &[Vec<(Over<Server>, Sample)>],
) -> Vec<CaseRuns<'_, Server, Sample>> {
    CASES
        .iter()
        .zip(samples)
        .map(|(c, runs)| (c.label, runs.as_slice()))
        .collect()
}

/// Goal `g`'s ratio of `rusty` to `baseline`: work per server or per machine CPU-second
/// in the goal's case.
pub(super) fn goal_ratio(
    samples: &[Vec<(Over<Server>, Sample)>],
    g: &Goal,
    rusty: Over<Server>,
    baseline: Over<Server>,
) -> f64 {
    let ci = CASES.iter().position(|c| c.label == g.case).unwrap_or(0);
    let r = ratios(&samples[ci], rusty, baseline);
    match g.per {
        Per::ServerCpu => r.per_server_cpu,
        Per::MachineCpu => r.per_machine_cpu,
    }
}

/// The charts of requests/s and of server CPU per request, a bar per case and server,
/// a panel per family; `bench` names the files, `title` starts the titles.
pub(super) fn charts(
    bench: &str,
    title: &str,
    samples: &[Vec<(Over<Server>, Sample)>],
    rows: &[Over<Server>],
) -> Result<Vec<Chart>> {
    let charts = LoadCharts {
        bench,
        title,
        unit: "request",
    };
    charts.draw(
        &case_runs(samples),
        rows,
        &|k| (k.family.to_string(), k.server.label()),
        &|s| s.req_per_s,
        &Sample::server_us,
    )
}

/// The table of medians and of the ratios of each Rusty row (TAP, AF_XDP) to each
/// baseline in the same family, and of each server over IPv6 to itself over IPv4
/// ([`crate::http_load::report::table`], [`family::pairs`]).
pub(super) fn table(samples: &[Vec<(Over<Server>, Sample)>], rows: &[Over<Server>]) -> String {
    let pairs = family::pairs(
        &[Server::Tap, Server::Xdp],
        &[Server::Kernel, Server::Nginx],
    );
    report::table(&case_runs(samples), rows, &pairs)
}

/// Where Rusty on TAP stands against its goal (≥ 3× the kernel-backend httpd per core),
/// Rusty on AF_XDP against its own ([`XDP_GOALS`]; `xdp_skipped` says why it was not
/// measured), both in the first of `families`, and both over IPv6 against IPv4
/// ([`family::IPV6_COST`]).
pub(super) fn verdict(
    samples: &[Vec<(Over<Server>, Sample)>],
    xdp_skipped: Option<&str>,
    families: Families,
) -> String {
    let family = families.first();
    let on = |server| Over::new(server, family);
    let mut parts = Vec::new();
    let mut met = 0;
    for (case, runs) in CASES.iter().zip(samples) {
        let r = ratios(runs, on(Server::Tap), on(Server::Kernel));
        if r.rate >= GOAL {
            met += 1;
        }
        parts.push(format!(
            "- {}: {:.2}× the requests/s, {:.2}× the requests per server CPU-second, {:.2}× \
             per machine CPU-second\n",
            case.label, r.rate, r.per_server_cpu, r.per_machine_cpu
        ));
    }
    let xdp = xdp::verdict(
        &XDP_GOALS,
        "request",
        &format!("the kernel-backend httpd over {family}"),
        xdp_skipped,
        |g| goal_ratio(samples, g, on(Server::Xdp), on(Server::Kernel)),
    );
    let cases = case_runs(samples);
    let v6 = |name, server, skipped| {
        family::ipv6_verdict(name, server, &cases, "request", skipped, Sample::server_us)
    };
    let one_only = families.one_only();
    format!(
        "Goal: Rusty on TAP at least {GOAL:.0}× the kernel-backend httpd per server core, \
         over {family}. Met in {met} of {} cases in this run:\n\n{}\n{xdp}\n{}\n{}",
        CASES.len(),
        parts.concat(),
        v6("Rusty on TAP", Server::Tap, one_only),
        v6("Rusty on AF_XDP", Server::Xdp, xdp_skipped.or(one_only)),
    )
}

pub(super) fn block_body(
    opts: &Options,
    set: &pages::PageSet,
    tools: &Tools,
    xdp_outcome: &xdp::Outcome,
    charts: &str,
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
    let xdp_note = xdp::mode_note(xdp_outcome);
    let v4_only = tools.nginx.as_ref().map(|_| "nginx");
    let families = family::page_note(opts.run.family, "request", v4_only);
    format!(
        "### HTTP: httpd on Rusty (TAP, AF_XDP) vs httpd on kernel sockets vs nginx\n\
         \n\
         {provenance}; {versions}.\n\
         {rounds} run(s) × {d} s per case and server, rotating which server goes first; each\n\
         column is the median over the runs, requests/s also shows the slowest–fastest run.\n\
         \n\
         Every server runs on one core, CPU {scpu} (`taskset`; httpd with one worker and\n\
         {spin}; nginx with `worker_processes 1`, master and worker both pinned); the client,\n\
         `taskset -c {ccpu} wrk -t1 -c{conns} -d{d}s --latency`, runs on CPU {ccpu}; all inside a\n\
         private network namespace. Rusty on TAP: wrk's kernel → TAP → Rusty (`httpd {PORT} PAGES 1\n\
         tap:NAME {tap} 1`). Rusty on AF_XDP: wrk's kernel → a veth pair (one queue\n\
         pair; the client end's transmit checksum offload off, so that frames carry whole\n\
         checksums as on a wire: the client's kernel sums them in software, and machine CPU\n\
         includes that) → Rusty's XDP program on the other end → an AF_XDP socket in\n\
         copy mode → Rusty (`httpd {PORT} PAGES 1 xdp:NAME {xdp} 1`). Kernel: wrk →\n\
         loopback → `httpd {PORT} PAGES` on kernel sockets. nginx: wrk → loopback → nginx with\n\
         `access_log off`, `sendfile on`, `open_file_cache`, `keepalive_requests 100000000`.\n\
         Pages (`cargo xtask gen-pages DIR` writes the same set): `{SMALL_PAGE}` (64 B) and {PAGES}\n\
         pages `0.html`…`{last}.html` with log-normal sizes (median {med} B, mean {mean} B, max\n\
         {max} B, fixed seed), requested uniformly at random by a generated wrk Lua script;\n\
         `Connection: close` is wrk's `-H`.\n\
         \n\
         Server CPU is utime + stime from `/proc/PID/stat` (nginx: master + worker) over wrk's\n\
         run; an idle httpd worker busy-polls for `--spin-us` before it parks, and that counts\n\
         too. Machine CPU is the busy time of every CPU over the same span (`/proc/stat`: user,\n\
         nice, system, irq, softirq, steal): the server, wrk, the kernel's work for both that\n\
         the server process is not charged for, and anything else running on the machine.\n\
         Both are per request, at the kernel's 10 ms tick. Server core busy is the server's\n\
         CPU time over wrk's wall time: below 100 % the server waited for wrk, whose core was\n\
         then the bottleneck (an httpd worker's polling hides this). The kernel runs a\n\
         receiver's input in the sender's context (on loopback, a TAP written to, and a veth),\n\
         so every server's CPU includes wrk's kernel receiving the responses; for httpd on\n\
         kernel sockets and nginx, wrk's core in turn pays for the server kernel's receive of\n\
         the requests, Rusty on TAP reads its requests from the TAP itself, and for Rusty on\n\
         AF_XDP wrk's core runs the XDP program and the copy into Rusty's ring. In the ratio\n\
         rows (Rusty over a baseline) the CPU columns hold requests per CPU-second, the inverse\n\
         of the CPU-per-request ratio: above 1× Rusty does more with the same CPU.{nginx_note}{xdp_note}\n\
         \n\
         {families}\n\
         \n\
         {charts}{table}\n\
         {verdict}",
        provenance = provenance(),
        tap = TAP.rusty_spec(),
        xdp = XDP.rusty_addresses(),
        rounds = opts.run.load.rounds,
        d = opts.run.load.duration,
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
    use crate::family::Family;

    fn s(rps: f64, server_s: f64, machine_s: f64) -> Sample {
        Sample {
            latency_us: Some((100.0, 900.0)),
            ..Sample::for_test(rps, server_s, machine_s)
        }
    }

    #[test]
    fn tables_and_ratios() {
        let (v4, v6) = (|s| Over::new(s, Family::V4), |s| Over::new(s, Family::V6));
        let runs = vec![
            (v4(Server::Tap), s(300_000.0, 5.0, 10.0)),
            (v4(Server::Xdp), s(400_000.0, 5.0, 8.0)),
            (v4(Server::Kernel), s(100_000.0, 5.0, 10.0)),
            (v4(Server::Nginx), s(150_000.0, 5.0, 10.0)),
            (v6(Server::Tap), s(280_000.0, 5.0, 10.0)),
            (v6(Server::Xdp), s(300_000.0, 5.0, 8.0)),
            (v6(Server::Kernel), s(90_000.0, 5.0, 10.0)),
        ];
        let samples = vec![runs.clone(), runs.clone(), runs];
        let servers = [Server::Tap, Server::Xdp, Server::Kernel, Server::Nginx];
        let rows = family::rows(&servers, &Families::Both.list(), |s| s == Server::Nginx);
        for c in charts("http", "HTTP", &samples, &rows).unwrap() {
            let marks = crate::chart::check(&c.svg).unwrap();
            // IPv4: 4 servers in 3 cases; IPv6: 3 (no nginx).
            assert_eq!((marks.bars, marks.legend), (21, 4), "{}", c.file);
            for panel in [">\nIPv4\n<", ">\nIPv6\n<", ">\nnginx, 1 worker\n<"] {
                assert!(c.svg.contains(panel), "{panel} in {}", c.file);
            }
        }
        let t = table(&samples, &rows);
        assert!(t.contains("| 64 B, keep-alive | httpd, Rusty on TAP, IPv4 | 300,000 | 1.0 | 3.33 | 6.67 | 100 % | 100 µs / 900 µs | 0 |"), "{t}");
        assert!(t.contains("| 64 B, keep-alive | httpd, Rusty on TAP, IPv6 | 280,000 | 1.0 | 3.57 | 7.14 | 100 % | 100 µs / 900 µs | 0 |"), "{t}");
        assert!(
            t.contains("| **TAP IPv4 / kernel httpd IPv4** | **3.00×** | | **3.00×** per CPU-s | **3.00×** per CPU-s |"),
            "{t}"
        );
        assert!(
            t.contains(
                "| **TAP IPv4 / nginx IPv4** | **2.00×** | | **2.00×** per CPU-s | **2.00×** per CPU-s |"
            ),
            "{t}"
        );
        // 4× the requests on 5 s of server CPU, 5× on 0.8× the machine CPU.
        assert!(
            t.contains("| **XDP IPv4 / kernel httpd IPv4** | **4.00×** | | **4.00×** per CPU-s | **5.00×** per CPU-s |"),
            "{t}"
        );
        // IPv6 against IPv4: 280,000 against 300,000 requests/s on the same CPU.
        assert!(
            t.contains("| **TAP IPv6 / TAP IPv4** | **0.93×** | | **0.93×** per CPU-s | **0.93×** per CPU-s |"),
            "{t}"
        );
        assert!(
            t.contains("| **kernel httpd IPv6 / kernel httpd IPv4** | **0.90×** |"),
            "{t}"
        );
        assert!(
            !t.contains("nginx, 1 worker, IPv6") && !t.contains("nginx IPv6"),
            "{t}"
        );
        let v = verdict(&samples, None, Families::Both);
        for want in [
            "per server core, over IPv4. Met in 3 of 3 cases",
            "AF_XDP against the kernel-backend httpd over IPv4: met 3 of 3",
            "- random pages, keep-alive: 4.00× the requests per server CPU-second (goal ≥ 1.5×: met)",
            "Goals for Rusty on TAP over IPv6 against IPv4 on the same path: met 3 of 3",
            "- 64 B, keep-alive: 1.07× the server CPU per request (goal ≤ 1.1×: met)",
            "Goals for Rusty on AF_XDP over IPv6 against IPv4 on the same path: met 0 of 3",
            "- random pages, keep-alive: 1.33× the server CPU per request (goal ≤ 1.1×: not met)",
        ] {
            assert!(v.contains(want), "{want} missing from\n{v}");
        }
        let rows = family::rows(&[Server::Tap, Server::Kernel], &[Family::V4], |_| false);
        let t = table(&samples, &rows);
        assert!(
            !t.contains("nginx") && !t.contains("XDP") && !t.contains("IPv6"),
            "{t}"
        );
        let v = verdict(&samples, Some("left out (--no-xdp)"), Families::Ipv4);
        assert!(
            v.contains("not measured in this run; left out (--no-xdp)."),
            "{v}"
        );
        assert!(
            v.contains("not measured in this run; only IPv4 was measured (`--family ipv4`)."),
            "{v}"
        );
        let v = verdict(&samples, None, Families::Ipv6);
        assert!(
            v.contains("per server core, over IPv6. Met in 3 of 3"),
            "{v}"
        );
    }
}
