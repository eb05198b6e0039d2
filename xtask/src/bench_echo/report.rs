//! What a run of the echo-style benchmarks reports: the markdown table of medians and
//! ratios, the verdict against the suite's goals, and the block of `docs/benchmarks.md`
//! around them.

use std::fmt::Write as _;

use super::{Backend, Options, Sample, Suite, PREFIX, STACK_IP, XDP};
use crate::common::{median_by, provenance, thousands};
use crate::xdp::{self, Per};

/// `a` over `b` in one case, from the medians: messages/s, and messages per server and
/// per machine CPU-second (the inverse of the CPU-per-message ratios).
fn ratios(runs: &[(Backend, Sample)], a: Backend, b: Backend) -> [f64; 3] {
    let of = |f: fn(&Sample) -> f64| median_by(runs, b, f) / median_by(runs, a, f);
    [
        1.0 / of(|s| s.msgs_per_s),
        of(Sample::server_us),
        of(Sample::machine_us),
    ]
}

/// Medians per (case, backend) and each Rusty row's ratios to the kernel backend, as a
/// markdown table.
pub(super) fn table(
    suite: &Suite,
    samples: &[Vec<(Backend, Sample)>],
    backends: &[Backend],
) -> String {
    let mut t = String::new();
    t.push_str(
        "| case | backend | messages/s (min–max) | MB/s | server CPU µs per message | machine CPU µs per message | p50 / p99 latency (µs) |\n\
         |---|---|---:|---:|---:|---:|---:|\n",
    );
    for (case, runs) in suite.cases.iter().zip(samples) {
        for &backend in backends {
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
        for rusty in [Backend::Tap, Backend::Xdp] {
            if !backends.contains(&rusty) {
                continue;
            }
            let [rate, server, machine] = ratios(runs, rusty, Backend::Kernel);
            let _ = writeln!(
                t,
                "| {} | **{} / kernel** | **{rate:.2}×** | | **{server:.2}×** per CPU-s | **{machine:.2}×** per CPU-s | |",
                case.label,
                rusty.short(),
            );
        }
    }
    t
}

/// Where Rusty on AF_XDP stands against the suite's goals; `xdp_skipped` says why it was
/// not measured.
pub(super) fn verdict(
    suite: &Suite,
    samples: &[Vec<(Backend, Sample)>],
    xdp_skipped: Option<&str>,
) -> String {
    xdp::verdict(
        suite.goals,
        "messages",
        "the kernel backend",
        xdp_skipped,
        |g| {
            let ci = suite
                .cases
                .iter()
                .position(|c| c.label == g.case)
                .unwrap_or(0);
            let [_, server, machine] = ratios(&samples[ci], Backend::Xdp, Backend::Kernel);
            match g.per {
                Per::ServerCpu => server,
                Per::MachineCpu => machine,
            }
        },
    )
}

pub(super) fn block_body(
    suite: &Suite,
    opts: &Options,
    xdp_outcome: &xdp::Outcome,
    table: &str,
    verdict: &str,
) -> String {
    let spin = opts.run.host.spin("the binaries' default `--spin-us 200`");
    let xdp_note = xdp::mode_note(xdp_outcome);
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
         tap:NAME {STACK_IP}/{PREFIX} 1`). AF_XDP: the client's kernel → a veth pair (one queue\n\
         pair; the client end's transmit checksum offload off, so that frames carry whole\n\
         checksums as on a wire: the client's kernel sums them in software, and machine CPU\n\
         includes that) → Rusty's XDP program on the other end → an AF_XDP socket in\n\
         copy mode → Rusty (`{server} {port} 1 xdp:NAME {xdp_ip}/{PREFIX} 1`). Kernel: the same client →\n\
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
         {table}\n\
         {verdict}",
        heading = suite.heading,
        client = suite.client,
        server = suite.server,
        port = suite.port,
        unit = suite.unit,
        provenance = provenance(),
        xdp_ip = XDP.stack_ip,
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
        let runs = vec![
            (Backend::Tap, s(200_000.0, 5.0, 10.0)),
            (Backend::Xdp, s(300_000.0, 5.0, 9.0)),
            (Backend::Kernel, s(100_000.0, 5.0, 10.0)),
        ];
        let samples = vec![runs.clone(), runs];
        let all = [Backend::Tap, Backend::Xdp, Backend::Kernel];
        let t = table(&ECHO, &samples, &all);
        assert!(
            t.contains("| ping-pong 100 × 64 B | Rusty on AF_XDP | 300,000 | 1.00 | 3.33 | 6.00 | 300 / 900 |"),
            "{t}"
        );
        assert!(
            t.contains(
                "| **TAP / kernel** | **2.00×** | | **2.00×** per CPU-s | **2.00×** per CPU-s | |"
            ),
            "{t}"
        );
        assert!(
            t.contains(
                "| **XDP / kernel** | **3.00×** | | **3.00×** per CPU-s | **3.33×** per CPU-s | |"
            ),
            "{t}"
        );
        let v = verdict(&ECHO, &samples, None);
        assert!(v.contains("met 1 of 1"), "{v}");
        let t = table(&ECHO, &samples, &[Backend::Tap, Backend::Kernel]);
        assert!(!t.contains("XDP"), "{t}");
        let v = verdict(&ECHO, &samples, Some("left out (--no-xdp)"));
        assert!(v.contains("not measured in this run"), "{v}");
    }
}
