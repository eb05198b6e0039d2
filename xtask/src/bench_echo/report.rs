//! What a run of the echo-style benchmarks reports: the markdown table of medians and
//! ratios, the verdict against the suite's goals, and the block of `docs/benchmarks.md`
//! around them.

use std::fmt::Write as _;

use super::{Backend, Options, Sample, Suite, TAP, XDP};
use crate::common::{median_by, provenance, thousands, Result};
use crate::family::{self, CaseRuns, Families, Over};
use crate::http_load::report::Row;
use crate::results::{Chart, LoadCharts};
use crate::xdp::{self, Per};

/// A row of the table: a backend over a family.
type Key = Over<Backend>;

/// `a` over `b` in one case, from the medians: messages/s, and messages per server and
/// per machine CPU-second (the inverse of the CPU-per-message ratios).
fn ratios(runs: &[(Key, Sample)], a: Key, b: Key) -> [f64; 3] {
    let of = |f: fn(&Sample) -> f64| median_by(runs, b, f) / median_by(runs, a, f);
    [
        1.0 / of(|s| s.msgs_per_s),
        of(Sample::server_us),
        of(Sample::machine_us),
    ]
}

/// Medians per (case, row) and the ratios of each Rusty row to the kernel backend in the
/// same family and of each backend over IPv6 to itself over IPv4 ([`family::pairs`]),
/// as a markdown table.
pub(super) fn table(suite: &Suite, samples: &[Vec<(Key, Sample)>], rows: &[Key]) -> String {
    let mut t = String::new();
    t.push_str(
        "| case | backend | messages/s (min–max) | MB/s | server CPU µs per message | machine CPU µs per message | p50 / p99 latency (µs) |\n\
         |---|---|---:|---:|---:|---:|---:|\n",
    );
    let pairs = family::pairs(&[Backend::Tap, Backend::Xdp], &[Backend::Kernel]);
    for (case, runs) in suite.cases.iter().zip(samples) {
        for &backend in rows {
            let rates = runs
                .iter()
                .filter(|(b, _)| *b == backend)
                .map(|(_, s)| s.msgs_per_s);
            let lo = rates.clone().fold(f64::INFINITY, f64::min);
            let hi = rates.clone().fold(f64::NEG_INFINITY, f64::max);
            let spread = if rates.count() > 1 {
                format!(" ({}–{})", thousands(lo), thousands(hi))
            } else {
                String::new()
            };
            let p50 = median_by(runs, backend, |s| {
                s.latency_us.map_or(f64::NAN, |l| l.0 as f64)
            });
            let p99 = median_by(runs, backend, |s| {
                s.latency_us.map_or(f64::NAN, |l| l.1 as f64)
            });
            let lat = if p50.is_nan() {
                "—".to_string()
            } else {
                format!("{p50:.0} / {p99:.0}")
            };
            let _ = writeln!(
                t,
                "| {} | {} | {}{spread} | {:.2} | {:.2} | {:.2} | {lat} |",
                case.label,
                backend.label(),
                thousands(median_by(runs, backend, |s| s.msgs_per_s)),
                median_by(runs, backend, |s| s.mb_per_s),
                median_by(runs, backend, Sample::server_us),
                median_by(runs, backend, Sample::machine_us),
            );
        }
        for &(a, b) in pairs
            .iter()
            .filter(|(a, b)| rows.contains(a) && rows.contains(b))
        {
            let [rate, server, machine] = ratios(runs, a, b);
            let _ = writeln!(
                t,
                "| {} | **{} / {}** | **{rate:.2}×** | | **{server:.2}×** per CPU-s | **{machine:.2}×** per CPU-s | |",
                case.label,
                a.short(),
                b.short(),
            );
        }
    }
    t
}

/// Each case's label and runs.
fn case_runs<'a>(
    suite: &Suite,
    samples: &'a [Vec<(Key, Sample)>],
) -> Vec<CaseRuns<'a, Backend, Sample>> {
    suite
        .cases
        .iter()
        .zip(samples)
        .map(|(c, runs)| (c.label, runs.as_slice()))
        .collect()
}

/// The charts of messages/s and of server CPU per message, a bar per case and backend,
/// a panel per family (`echo-messages.svg`, `echo-cpu.svg`; `ws-…` for WebSocket).
pub(super) fn charts(
    suite: &Suite,
    samples: &[Vec<(Key, Sample)>],
    rows: &[Key],
) -> Result<Vec<Chart>> {
    let cases = case_runs(suite, samples);
    let charts = LoadCharts {
        bench: suite.name,
        title: suite.title,
        unit: "message",
    };
    charts.draw(
        &cases,
        rows,
        &|k| (k.family.to_string(), k.server.label()),
        &|s| s.msgs_per_s,
        &Sample::server_us,
    )
}

/// Where Rusty on AF_XDP stands against the suite's goals in the first of `families`
/// (`xdp_skipped` says why it was not measured), and Rusty on TAP and on AF_XDP over
/// IPv6 against IPv4 ([`family::IPV6_COST`]).
pub(super) fn verdict(
    suite: &Suite,
    samples: &[Vec<(Key, Sample)>],
    xdp_skipped: Option<&str>,
    families: Families,
) -> String {
    let family = families.first();
    let on = |backend| Over::new(backend, family);
    let xdp = xdp::verdict(
        suite.goals,
        "message",
        &format!("the kernel backend over {family}"),
        xdp_skipped,
        |g| {
            let ci = suite
                .cases
                .iter()
                .position(|c| c.label == g.case)
                .unwrap_or(0);
            let [_, server, machine] = ratios(&samples[ci], on(Backend::Xdp), on(Backend::Kernel));
            match g.per {
                Per::ServerCpu => server,
                Per::MachineCpu => machine,
            }
        },
    );
    let cases = case_runs(suite, samples);
    let v6 = |name, backend, skipped| {
        family::ipv6_verdict(name, backend, &cases, "message", skipped, Sample::server_us)
    };
    let one_only = families.one_only();
    format!(
        "{xdp}\n{}\n{}",
        v6("Rusty on TAP", Backend::Tap, one_only),
        v6("Rusty on AF_XDP", Backend::Xdp, xdp_skipped.or(one_only)),
    )
}

pub(super) fn block_body(
    suite: &Suite,
    opts: &Options,
    xdp_outcome: &xdp::Outcome,
    charts: &str,
    table: &str,
    verdict: &str,
) -> String {
    let spin = opts.run.host.spin("the binaries' default `--spin-us 200`");
    let xdp_note = xdp::mode_note(xdp_outcome);
    let families = family::page_note(opts.run.family, "message", None);
    format!(
        "### {heading}\n\
         \n\
         {provenance}.\n\
         {rounds} run(s) × {d} s per case and backend, rotating which backend goes first;\n\
         each column is the median over the runs, messages/s also shows the slowest–fastest run.\n\
         \n\
         Every server runs one worker pinned to CPU {scpu} ({spin}); the same client,\n\
         `{client}` on kernel sockets with one worker, runs pinned to CPU {ccpu}; all inside a\n\
         private network namespace. TAP: the client's kernel → TAP → Rusty (`{server} {port} 1\n\
         tap:NAME {tap} 1`). AF_XDP: the client's kernel → a veth pair (one queue\n\
         pair; the client end's transmit checksum offload off, so that frames carry whole\n\
         checksums as on a wire: the client's kernel sums them in software, and machine CPU\n\
         includes that) → Rusty's XDP program on the other end → an AF_XDP socket in\n\
         copy mode → Rusty (`{server} {port} 1 xdp:NAME {xdp} 1`). Kernel: the same client →\n\
         loopback → `{server} {port}` on kernel sockets.\n\
         \n\
         Server CPU is the server process's utime + stime over the client's run\n\
         (`/proc/PID/stat`); an idle worker busy-polls for `--spin-us` before it parks, and\n\
         that counts too. Machine CPU is the busy time of every CPU over the same span\n\
         (`/proc/stat`: user, nice, system, irq, softirq, steal): the server, the client, the\n\
         kernel's work for both that the server process is not charged for, and anything else\n\
         running on the machine. Both are per {unit}, at the kernel's 10 ms tick. The\n\
         kernel runs a receiver's input in the sender's context (loopback, a TAP written to,\n\
         a veth), so the server's CPU includes the client kernel's receive work on every\n\
         path, and on AF_XDP the client's core runs the XDP program and the copy into Rusty's\n\
         ring. In the ratio rows (Rusty over the kernel backend) the CPU columns hold messages\n\
         per CPU-second, the inverse of the CPU-per-message ratio: above 1× Rusty does more\n\
         with the same CPU.{xdp_note}\n\
         \n\
         {families}\n\
         \n\
         {charts}{table}\n\
         {verdict}",
        heading = suite.heading,
        client = suite.client,
        server = suite.server,
        port = suite.port,
        unit = suite.unit,
        provenance = provenance(),
        tap = TAP.rusty_spec(),
        xdp = XDP.rusty_addresses(),
        rounds = opts.run.load.rounds,
        d = opts.run.load.duration,
        scpu = opts.run.host.server_cpu,
        ccpu = opts.run.host.client_cpu,
    )
}

#[cfg(test)]
mod tests {
    use super::super::ECHO;
    use super::*;
    use crate::common::CpuTimes;
    use crate::family::Family;

    #[test]
    fn tables_and_goals() {
        let s = |rate: f64, server_s: f64, machine_s: f64| Sample {
            msgs_per_s: rate,
            mb_per_s: 1.0,
            messages: (rate * 5.0) as u64,
            cpu: CpuTimes {
                server_s,
                machine_s,
            },
            latency_us: Some((300, 900)),
        };
        let (v4, v6) = (|b| Over::new(b, Family::V4), |b| Over::new(b, Family::V6));
        let runs = vec![
            (v4(Backend::Tap), s(200_000.0, 5.0, 10.0)),
            (v4(Backend::Xdp), s(300_000.0, 5.0, 9.0)),
            (v4(Backend::Kernel), s(100_000.0, 5.0, 10.0)),
            (v6(Backend::Tap), s(190_000.0, 5.0, 10.0)),
            (v6(Backend::Xdp), s(250_000.0, 5.0, 9.0)),
            (v6(Backend::Kernel), s(100_000.0, 5.0, 10.0)),
        ];
        let samples = vec![runs.clone(), runs];
        let all = [Backend::Tap, Backend::Xdp, Backend::Kernel];
        let rows = family::rows(&all, &Families::Both.list(), |_| false);
        let charts = charts(&ECHO, &samples, &rows).unwrap();
        let files: Vec<&str> = charts.iter().map(|c| c.file.as_str()).collect();
        assert_eq!(files, ["echo-messages.svg", "echo-cpu.svg"]);
        for c in &charts {
            let marks = crate::chart::check(&c.svg).unwrap();
            assert_eq!((marks.bars, marks.legend), (12, 3), "{}", c.file);
        }
        // 300,000 messages/s on 5 s of server CPU over 5 s: 3.33 µs per message.
        assert!(charts[0].svg.contains(">\n300k\n<"));
        assert!(charts[1].svg.contains(">\n3.33\n<"));
        let t = table(&ECHO, &samples, &rows);
        assert!(
            t.contains("| ping-pong 100 × 64 B | Rusty on AF_XDP, IPv4 | 300,000 | 1.00 | 3.33 | 6.00 | 300 / 900 |"),
            "{t}"
        );
        assert!(
            t.contains("| ping-pong 100 × 64 B | Rusty on AF_XDP, IPv6 | 250,000 | 1.00 | 4.00 | 7.20 | 300 / 900 |"),
            "{t}"
        );
        assert!(
            t.contains(
                "| **TAP IPv4 / kernel IPv4** | **2.00×** | | **2.00×** per CPU-s | **2.00×** per CPU-s | |"
            ),
            "{t}"
        );
        assert!(
            t.contains(
                "| **XDP IPv4 / kernel IPv4** | **3.00×** | | **3.00×** per CPU-s | **3.33×** per CPU-s | |"
            ),
            "{t}"
        );
        assert!(
            t.contains(
                "| **XDP IPv6 / XDP IPv4** | **0.83×** | | **0.83×** per CPU-s | **0.83×** per CPU-s | |"
            ),
            "{t}"
        );
        let v = verdict(&ECHO, &samples, None, Families::Both);
        for want in [
            "AF_XDP against the kernel backend over IPv4: met 1 of 1",
            "Goals for Rusty on TAP over IPv6 against IPv4 on the same path: met 2 of 2",
            "- stream 4 × 512 B: 1.05× the server CPU per message (goal ≤ 1.1×: met)",
            "Goals for Rusty on AF_XDP over IPv6 against IPv4 on the same path: met 0 of 2",
            "- ping-pong 100 × 64 B: 1.20× the server CPU per message (goal ≤ 1.1×: not met)",
        ] {
            assert!(v.contains(want), "{want} missing from\n{v}");
        }
        let rows = family::rows(&[Backend::Tap, Backend::Kernel], &[Family::V4], |_| false);
        let t = table(&ECHO, &samples, &rows);
        assert!(!t.contains("XDP") && !t.contains("IPv6"), "{t}");
        let v = verdict(&ECHO, &samples, Some("left out (--no-xdp)"), Families::Ipv4);
        assert!(v.contains("not measured in this run; left out"), "{v}");
        assert!(v.contains("not measured in this run; only IPv4"), "{v}");
    }
}
