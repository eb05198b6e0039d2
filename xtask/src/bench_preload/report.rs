//! What the run reports: the table of medians and ratios ([`crate::http_load::report`]
//! with this benchmark's rows), the verdict against the goals, and the block of
//! `docs/benchmarks.md` around them.

use super::{
    Options, Server, GOALS, HOST_CIDR, KERNEL_IP, NGINX_SERVERS, PAIRS, PREFIX, REDIS_CLIENTS,
    REDIS_SERVERS, STACK_IP,
};
use crate::common::{provenance, thousands, Result};
use crate::goals::{self, Per};
use crate::http_load::report::{self, ratios, CaseRuns};
use crate::http_load::wrk::Sample;
use crate::pages::{self, PAGES, SMALL_PAGE};
use crate::results::{Chart, LoadCharts};

/// The cases by their labels, with their runs.
fn cases<'a>(
    labels: &[&'a str],
    samples: &'a [Vec<(Server, Sample)>],
) -> Vec<CaseRuns<'a, Server>> {
    labels
        .iter()
        .zip(samples)
        .map(|(l, runs)| (*l, runs.as_slice()))
        .collect()
}

/// Every server, nginx's then redis's.
fn servers() -> Vec<Server> {
    NGINX_SERVERS
        .iter()
        .chain(&REDIS_SERVERS)
        .copied()
        .collect()
}

pub(super) fn table(labels: &[&str], samples: &[Vec<(Server, Sample)>]) -> String {
    report::table(&cases(labels, samples), &servers(), &PAIRS)
}

/// The charts of requests/s and of server CPU per request, a panel per program (nginx
/// with 1 and with 2 workers, redis), a bar per case and stack.
pub(super) fn charts(labels: &[&str], samples: &[Vec<(Server, Sample)>]) -> Result<Vec<Chart>> {
    let charts = LoadCharts {
        bench: "preload",
        title: "nginx and redis through rusty-run",
        unit: "request",
    };
    charts.draw(
        &cases(labels, samples),
        &servers(),
        &|s| (s.program_text(), s.on().to_string()),
        &|s| s.req_per_s,
        &Sample::server_us,
    )
}

/// Where Rusty stands against [`GOALS`]: nginx with one worker and redis, each over the
/// same program on the kernel's sockets.
pub(super) fn verdict(labels: &[&str], samples: &[Vec<(Server, Sample)>]) -> String {
    let cases = cases(labels, samples);
    goals::verdict(
        "Goals for Rusty through rusty-run against the same program on kernel sockets \
         (nginx with 1 worker, redis)",
        &GOALS,
        "request",
        None,
        |g| {
            let Some(&(_, runs)) = cases.iter().find(|(l, _)| *l == g.case) else {
                return f64::NAN;
            };
            let pair = PAIRS.iter().find(|(a, b)| {
                runs.iter().any(|(s, _)| s == a) && runs.iter().any(|(s, _)| s == b)
            });
            let Some(&(a, b)) = pair else {
                return f64::NAN;
            };
            let r = ratios(runs, a, b);
            match g.per {
                Per::ServerCpu => r.per_server_cpu,
                Per::MachineCpu => r.per_machine_cpu,
            }
        },
    )
}

/// The idle measurement's line: `share` of one core over `seconds`, and the goal
/// (under 2 %).
pub(super) fn idle_line(share: f64, seconds: u64) -> String {
    let pct = share * 100.0;
    let verdict = if pct < 2.0 { "met" } else { "missed" };
    format!(
        "\nIdle: nginx through rusty-run (master and 2 workers) with no client used \
         {pct:.2} % of one core over {seconds} s (goal: under 2 %; {verdict}).\n"
    )
}

pub(super) fn block_body(
    opts: &Options,
    set: &pages::PageSet,
    versions: &str,
    [charts, table, verdict]: [&str; 3],
) -> String {
    let wait = opts
        .wait_spin_us
        .map_or("the library's default `--wait-spin-us 0`".into(), |us| {
            format!("`--wait-spin-us {us}`")
        });
    format!(
        "### Unmodified nginx and redis: through rusty-run on Rusty vs on kernel sockets\n\
         \n\
         {provenance}; {versions}.\n\
         {rounds} run(s) per case and server ({d} s of wrk, {req} requests per redis test),\n\
         rotating which server goes first; each column is the median over the runs,\n\
         requests/s also shows the slowest–fastest run.\n\
         \n\
         The same binaries with the same configuration on both stacks. Rusty: `rusty-run --link\n\
         'tap:NAME {STACK_IP}/{PREFIX} QUEUES' -- PROGRAM …` ({wait}), one TAP queue per\n\
         process (nginx: workers + 1 for the master; redis: 1); the client's kernel →\n\
         TAP ({HOST_CIDR} on the host side) → Rusty inside the program. Rusty on AF_XDP:\n\
         `rusty-run --link 'xdp:NAME IP/24 QUEUES' -- PROGRAM …` on a veth pair in the\n\
         client's namespace with one queue pair per process that accepts (nginx: its\n\
         workers, the master handing its queue to one; redis: 1), the client end's transmit\n\
         checksum offload off; the client's kernel → veth → Rusty's XDP program → an\n\
         AF_XDP socket in copy mode → Rusty inside the program. Kernel: the program\n\
         in a second namespace at {KERNEL_IP}, reached through a veth pair, so that both\n\
         paths cross a virtual device. Each server is pinned with `taskset` to CPU {scpu},\n\
         the client to CPU {ccpu}; the rows with 2 nginx workers pin the server (master and\n\
         both workers, on either stack) to both CPUs {scpu},{ccpu}, where it shares a core with\n\
         the client. nginx: `master_process on`, `worker_processes 1` or 2, `access_log\n\
         off`, `sendfile on`, `open_file_cache`, `keepalive_requests 100000000`, under\n\
         `wrk -t1 -c{conns} -d{d}s --latency`; pages as in the HTTP benchmark: `{SMALL_PAGE}`\n\
         (64 B) and {PAGES} log-normal pages (median {med} B, mean {mean} B), requested\n\
         uniformly at random by a wrk Lua script; `Connection: close` is wrk's `-H`.\n\
         redis-server without persistence (`--save '' --appendonly no`), under\n\
         `redis-benchmark -t set -n {req} -c {REDIS_CLIENTS} -q`, then `-t get` against the\n\
         same server, each test measured on its own; its p50 is redis-benchmark's (it\n\
         prints no p99 in `-q` mode).\n\
         \n\
         Server CPU is utime + stime from `/proc/PID/stat` (nginx: master + workers) over the\n\
         client's run, machine CPU the busy time of every CPU over the same span\n\
         (`/proc/stat`), both per request at the kernel's 10 ms tick; machine CPU includes\n\
         anything else running on the machine. Server core busy is server CPU over the\n\
         client's wall time (up to 200 % with two cores). The kernel runs a receiver's\n\
         input in the sender's context (a TAP written to, a veth), so the kernel server's\n\
         receive of requests is charged to the client's core, while Rusty reads its\n\
         frames from the TAP itself. In the ratio rows (Rusty over the kernel with the same\n\
         program) the CPU columns hold requests per CPU-second, the inverse of the\n\
         CPU-per-request ratio: above 1× Rusty does more with the same CPU.\n\
         \n\
         {charts}{table}\n\
         {verdict}",
        provenance = provenance(),
        rounds = opts.load.rounds,
        d = opts.load.duration,
        req = thousands(opts.redis_requests as f64),
        scpu = opts.host.server_cpu,
        ccpu = opts.host.client_cpu,
        conns = opts.connections,
        med = thousands(set.median() as f64),
        mean = thousands((set.total() / set.sizes.len().max(1)) as f64),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    use Sample as S;
    fn s(rps: f64, server_s: f64, machine_s: f64) -> S {
        S::for_test(rps, server_s, machine_s)
    }

    #[test]
    fn quick_is_one_short_round_that_leaves_the_docs_alone() {
        let parse = |args: &[&str]| crate::common::parse_flags::<Options>(args).unwrap();
        let full = parse(&["x", "--rounds", "5"]).effective();
        assert_eq!((full.load.duration, full.load.rounds), (5, 5));
        assert_eq!((full.redis_requests, full.idle_seconds()), (200_000, 10));
        assert!(!full.host.no_docs);
        let quick = parse(&["x", "--quick", "--rounds", "5"]).effective();
        assert_eq!((quick.load.duration, quick.load.rounds), (2, 1));
        assert_eq!((quick.redis_requests, quick.idle_seconds()), (20_000, 2));
        assert!(quick.host.no_docs);
    }

    #[test]
    fn charts_have_a_panel_per_program() {
        let [r1, x1, k1, ..] = NGINX_SERVERS;
        let [rr, _, kr] = REDIS_SERVERS;
        let nginx = vec![
            (r1, s(100_000.0, 2.0, 5.0)),
            (x1, s(50_000.0, 2.0, 4.5)),
            (k1, s(100_000.0, 5.0, 9.0)),
        ];
        let redis = vec![(rr, s(80_000.0, 2.0, 4.0)), (kr, s(70_000.0, 2.0, 4.0))];
        let labels = ["64 B, keep-alive", "redis SET"];
        let charts = charts(&labels, &[nginx, redis]).unwrap();
        let files: Vec<&str> = charts.iter().map(|c| c.file.as_str()).collect();
        assert_eq!(files, ["preload-requests.svg", "preload-cpu.svg"]);
        for c in &charts {
            let marks = crate::chart::check(&c.svg).unwrap();
            // nginx, 1 worker: 3 bars; redis: 2; nginx with 2 workers did not run.
            assert_eq!((marks.bars, marks.legend), (5, 3), "{}", c.file);
            for panel in [">\nnginx, 1 worker\n<", ">\nredis\n<"] {
                assert!(c.svg.contains(panel), "{panel} in {}", c.file);
            }
            assert!(!c.svg.contains("2 workers"), "{}", c.file);
        }
        // 100,000 requests/s on 2 s of server CPU over 5 s: 4 µs per request.
        assert!(charts[0].svg.contains(">\n100k\n<"));
        assert!(charts[1].svg.contains(">\n4\n<"));
    }

    #[test]
    fn ratios_and_goals_per_program() {
        let [r1, x1, k1, r2, _, k2] = NGINX_SERVERS;
        let [rr, _, kr] = REDIS_SERVERS;
        let nginx = vec![
            (r1, s(100_000.0, 2.0, 5.0)),
            (x1, s(50_000.0, 2.0, 4.5)),
            (k1, s(100_000.0, 5.0, 9.0)),
            (r2, s(150_000.0, 4.0, 9.0)),
            (k2, s(150_000.0, 4.0, 9.0)),
        ];
        let redis = vec![(rr, s(80_000.0, 2.0, 4.0)), (kr, s(80_000.0, 2.0, 4.0))];
        let labels = [
            "64 B, keep-alive",
            "64 B, `Connection: close`",
            "random pages, keep-alive",
            "redis SET",
            "redis GET",
        ];
        let samples = vec![nginx.clone(), nginx.clone(), nginx, redis.clone(), redis];
        let t = table(&labels, &samples);
        assert!(
            t.contains("| 64 B, keep-alive | **Rusty, 1 worker / kernel, 1 worker** | **1.00×** | | **2.50×** per CPU-s | **1.80×** per CPU-s |"),
            "{t}"
        );
        assert!(
            t.contains("| 64 B, keep-alive | **Rusty, 2 workers / kernel, 2 workers** | **1.00×** | | **1.00×** per CPU-s |"),
            "{t}"
        );
        // The AF_XDP row's own ratio; the goals stay the TAP's (below: 2.50×).
        assert!(
            t.contains("| 64 B, keep-alive | **Rusty XDP, 1 worker / kernel, 1 worker** | **0.50×** | | **1.25×** per CPU-s | **1.00×** per CPU-s |"),
            "{t}"
        );
        assert!(!t.contains("Rusty XDP, 2 workers"), "no runs, no rows: {t}");
        assert!(
            t.contains("| redis GET | **Rusty / kernel** | **1.00×** |"),
            "{t}"
        );
        assert!(
            t.contains("| redis SET | redis, Rusty (rusty-run, TAP) | 80,000 | 1.0 |"),
            "{t}"
        );
        assert!(!t.contains("| redis SET | nginx"), "{t}");
        let v = verdict(&labels, &samples);
        assert!(v.contains("met 3 of 5"), "{v}");
        assert!(
            v.contains(
                "- 64 B, keep-alive: 2.50× the requests per server CPU-second (goal ≥ 2×: met)"
            ),
            "{v}"
        );
        assert!(
            v.contains(
                "- redis GET: 1.00× the requests per server CPU-second (goal ≥ 1.5×: not met)"
            ),
            "{v}"
        );
    }
}
