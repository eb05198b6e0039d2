//! `cargo xtask bench echo`: the echo server on Rusty's stack behind a TAP against the
//! same server on the kernel's sockets, with the same client on the same cores.
//!
//! Setup (needs root): a private network namespace `rusty-bench-<pid>` holding a
//! pre-created multi-queue TAP `rbtap<pid>` whose host side is 10.79.0.1/24. Every run
//! starts a fresh server inside the namespace pinned to the server core with `taskset`
//! (one worker), then the client `echo-load` (kernel sockets, one worker) pinned to the
//! client core:
//!
//! - TAP: `echo 7 1 tap:rbtap<pid> 10.79.0.2/24 1`, client → 10.79.0.2:7 through the
//!   namespace's kernel and the TAP;
//! - kernel: `echo 7` (kernel sockets), client → 127.0.0.1:7 over loopback.
//!
//! The servers run inside the namespace too: a TAP is found by name in the opener's
//! namespace, and the driver configures its host side by name, so a server in the root
//! namespace could not attach to a TAP that was moved into the client's namespace.
//!
//! Server CPU is utime + stime of the server process (all threads) from
//! `/proc/PID/stat`, sampled just before the client starts and just after it exits.
//! Cases alternate their backend order round by round; the table shows medians. On every
//! exit path (errors, SIGINT/SIGTERM) the processes started here are killed by PID and
//! the namespace and TAP are deleted.

use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::AtomicBool;
use std::thread;
use std::time::{Duration, Instant};

use crate::common::{
    check_interrupted, check_run, explain_run, listening, median, process_cpu_seconds, provenance,
    release_bin, tail, thousands, write_readme, Netns, Proc, Result, RunArgs,
};

const PORT: u16 = 7;
const HOST_CIDR: &str = "10.79.0.1/24";
const STACK_IP: &str = "10.79.0.2";
const PREFIX: u8 = 24;
const README_START: &str = "<!-- bench-echo:start -->";
const README_END: &str = "<!-- bench-echo:end -->";

#[derive(Debug, Clone, clap::Args)]
pub(crate) struct Options {
    #[command(flatten)]
    pub run: RunArgs,
}

#[derive(Debug, Clone, Copy)]
struct Case {
    label: &'static str,
    mode: &'static str,
    connections: usize,
    size: usize,
}

const CASES: [Case; 2] = [
    Case {
        label: "ping-pong 100 × 64 B",
        mode: "ping-pong",
        connections: 100,
        size: 64,
    },
    Case {
        label: "stream 4 × 512 B",
        mode: "stream",
        connections: 4,
        size: 512,
    },
];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Backend {
    Tap,
    Kernel,
}

impl Backend {
    fn label(self) -> &'static str {
        match self {
            Backend::Tap => "Rusty on TAP",
            Backend::Kernel => "kernel sockets",
        }
    }
}

/// One client run.
#[derive(Debug, Clone, Copy, Default)]
struct Sample {
    msgs_per_s: f64,
    mb_per_s: f64,
    messages: u64,
    server_cpu_s: f64,
    latency_us: Option<(u64, u64)>,
}

impl Sample {
    fn cpu_per_million(&self) -> f64 {
        if self.messages == 0 {
            f64::NAN
        } else {
            self.server_cpu_s / (self.messages as f64 / 1e6)
        }
    }
}

pub(crate) fn run(opts: &Options) -> Result<()> {
    if opts.run.duration == 0 || opts.run.rounds == 0 {
        return Err("--duration and --rounds must be at least 1".into());
    }
    let (interrupted, root) = opts.run.host.prepare("bench echo", &["rusty-echo"])?;
    let bins = Bins {
        echo: release_bin(&root, "echo")?,
        load: release_bin(&root, "echo-load")?,
    };

    let pid = std::process::id();
    let logs = std::env::temp_dir().join(format!("rusty-bench-{pid}"));
    fs::create_dir_all(&logs).map_err(|e| format!("creating {}: {e}", logs.display()))?;
    let net = Netns::create(
        format!("rusty-bench-{pid}"),
        format!("rbtap{pid}"),
        HOST_CIDR,
    )?;
    let ctx = Ctx {
        opts,
        bins,
        net: &net,
        logs: &logs,
        interrupted: &interrupted,
    };

    let total = opts.run.rounds * CASES.len() * 2;
    eprintln!(
        "bench echo: {total} runs of {} s (server on CPU {}, client on CPU {}, namespace {})",
        opts.run.duration, opts.run.host.server_cpu, opts.run.host.client_cpu, net.name
    );
    let mut samples: Vec<Vec<(Backend, Sample)>> = vec![Vec::new(); CASES.len()];
    let mut n = 0;
    for round in 0..opts.run.rounds {
        for (ci, case) in CASES.iter().enumerate() {
            let order = if (round + ci) % 2 == 0 {
                [Backend::Tap, Backend::Kernel]
            } else {
                [Backend::Kernel, Backend::Tap]
            };
            for backend in order {
                n += 1;
                let s = ctx.run_one(*case, backend, n).map_err(|e| {
                    format!("{e}\n(server and client logs kept in {})", logs.display())
                })?;
                eprintln!(
                    "  [{n}/{total}] round {} {:<22} {:<15} {:>10.0} msg/s {:>8.2} MB/s \
                     server CPU {:.2} s ({:.2} s/1M msgs){}",
                    round + 1,
                    case.label,
                    backend.label(),
                    s.msgs_per_s,
                    s.mb_per_s,
                    s.server_cpu_s,
                    s.cpu_per_million(),
                    s.latency_us
                        .map(|(a, b)| format!(", p50/p99 {a}/{b} µs"))
                        .unwrap_or_default()
                );
                samples[ci].push((backend, s));
            }
        }
    }
    drop(net);
    let _ = fs::remove_dir_all(&logs);

    let table = table(&samples);
    println!("{table}");
    if !opts.run.host.no_readme {
        let body = readme_body(opts, &table);
        let path = write_readme(&root, README_START, README_END, &body)?;
        eprintln!("bench echo: table written to {}", path.display());
    }
    Ok(())
}

struct Bins {
    echo: PathBuf,
    load: PathBuf,
}

struct Ctx<'a> {
    opts: &'a Options,
    bins: Bins,
    net: &'a Netns,
    logs: &'a Path,
    interrupted: &'a AtomicBool,
}

impl Ctx<'_> {
    fn check_interrupted(&self) -> Result<()> {
        check_interrupted(self.interrupted)
    }

    fn in_ns(&self, cpu: usize, program: &Path) -> Command {
        self.net.exec_pinned(cpu, program)
    }

    fn run_one(&self, case: Case, backend: Backend, n: usize) -> Result<Sample> {
        self.check_interrupted()?;
        let tag = format!("{n:02}-{}-{:?}", case.mode, backend).to_lowercase();
        let server_log = self.logs.join(format!("{tag}-server.log"));
        let mut cmd = self.in_ns(self.opts.run.host.server_cpu, &self.bins.echo);
        cmd.arg(PORT.to_string());
        if backend == Backend::Tap {
            cmd.args(["1", &format!("tap:{}", self.net.tap)])
                .arg(format!("{STACK_IP}/{PREFIX}"))
                .arg("1");
        }
        cmd.args(["--grace", "1"]);
        if let Some(us) = self.opts.run.host.spin_us {
            cmd.arg("--spin-us").arg(us.to_string());
        }
        let mut server = Proc::spawn("echo", cmd, &server_log)?;
        self.wait_ready(&mut server, backend, &server_log)?;

        let target = match backend {
            Backend::Tap => format!("{STACK_IP}:{PORT}"),
            Backend::Kernel => format!("127.0.0.1:{PORT}"),
        };
        let client_log = self.logs.join(format!("{tag}-client.log"));
        let mut cmd = self.in_ns(self.opts.run.host.client_cpu, &self.bins.load);
        cmd.arg(&target)
            .args(["--mode", case.mode, "--connections"])
            .arg(case.connections.to_string())
            .arg("--size")
            .arg(case.size.to_string())
            .arg("--duration")
            .arg(self.opts.run.duration.to_string());

        let cpu_before = process_cpu_seconds(server.pid())?;
        let mut client = Proc::spawn("echo-load", cmd, &client_log)?;
        let limit = Duration::from_secs(self.opts.run.duration + 30);
        let status = client.wait_for(limit, self.interrupted)?;
        let cpu_after = process_cpu_seconds(server.pid());
        let server_alive = server.try_status()?.is_none();
        server.stop(Duration::from_secs(5));

        let out = fs::read_to_string(&client_log).unwrap_or_default();
        let explain = || explain_run("echo-load", &out, &server_log);
        let what = format!("{} on {}", case.label, backend.label());
        check_run("echo-load", &what, status, limit, server_alive, explain)?;
        let mut s = parse_client(&out)
            .ok_or_else(|| format!("could not read echo-load's numbers{}", explain()))?;
        s.server_cpu_s = cpu_after? - cpu_before;
        Ok(s)
    }

    /// Until the server accepts: a listening socket on the port (kernel) or the TAP's
    /// carrier, which comes up once a queue is attached (TAP).
    fn wait_ready(&self, server: &mut Proc, backend: Backend, log: &Path) -> Result<()> {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            self.check_interrupted()?;
            if let Some(st) = server.try_status()? {
                return Err(format!(
                    "the {} server exited at start ({st}):\n{}",
                    backend.label(),
                    tail(log, 20)
                ));
            }
            let ready = match backend {
                Backend::Kernel => listening(server.pid(), PORT),
                Backend::Tap => self.net.tap_has_carrier(),
            };
            if ready {
                // Let the worker reach its loop (pinning, listener setup).
                thread::sleep(Duration::from_millis(200));
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err(format!(
                    "the {} server was not ready after 10 s:\n{}",
                    backend.label(),
                    tail(log, 20)
                ));
            }
            thread::sleep(Duration::from_millis(20));
        }
    }
}

/// messages/s, MB/s, messages and (ping-pong) p50/p99 from echo-load's report.
fn parse_client(out: &str) -> Option<Sample> {
    let mut s = Sample::default();
    let mut seen = false;
    for line in out.lines() {
        let words: Vec<&str> = line.split_whitespace().collect();
        let after = |key: &str| {
            words
                .iter()
                .position(|w| *w == key)
                .and_then(|i| words.get(i + 1))
                .copied()
        };
        if line.starts_with("messages/s ") {
            s.msgs_per_s = after("messages/s")?.parse().ok()?;
            s.mb_per_s = after("MB/s")?.parse().ok()?;
            s.messages = after("messages")?.parse().ok()?;
            seen = true;
        } else if line.starts_with("latency us:") {
            s.latency_us = Some((after("p50")?.parse().ok()?, after("p99")?.parse().ok()?));
        }
    }
    seen.then_some(s)
}

/// Medians per (case, backend) and the TAP/kernel ratios, as a markdown table.
fn table(samples: &[Vec<(Backend, Sample)>]) -> String {
    let mut t = String::new();
    t.push_str(
        "| case | backend | messages/s (min–max) | MB/s | server CPU s per 1M msgs | p50 / p99 latency (µs) |\n\
         |---|---|---:|---:|---:|---:|\n",
    );
    for (case, runs) in CASES.iter().zip(samples) {
        let mut med = Vec::new();
        for backend in [Backend::Tap, Backend::Kernel] {
            let of = |f: &dyn Fn(&Sample) -> f64| {
                median(
                    runs.iter()
                        .filter(|(b, _)| *b == backend)
                        .map(|(_, s)| f(s))
                        .collect(),
                )
            };
            let rate = of(&|s| s.msgs_per_s);
            let rates = runs
                .iter()
                .filter(|(b, _)| *b == backend)
                .map(|(_, s)| s.msgs_per_s);
            let lo = rates.clone().fold(f64::INFINITY, f64::min);
            let hi = rates.fold(f64::NEG_INFINITY, f64::max);
            let spread = if runs.iter().filter(|(b, _)| *b == backend).count() > 1 {
                format!(" ({}–{})", thousands(lo), thousands(hi))
            } else {
                String::new()
            };
            let mb = of(&|s| s.mb_per_s);
            let cpu = of(&|s| s.cpu_per_million());
            let p50 = of(&|s| s.latency_us.map_or(f64::NAN, |l| l.0 as f64));
            let p99 = of(&|s| s.latency_us.map_or(f64::NAN, |l| l.1 as f64));
            let lat = if p50.is_nan() {
                "—".to_string()
            } else {
                format!("{p50:.0} / {p99:.0}")
            };
            let _ = writeln!(
                t,
                "| {} | {} | {}{spread} | {mb:.2} | {cpu:.2} | {lat} |",
                case.label,
                backend.label(),
                thousands(rate)
            );
            med.push((rate, cpu));
        }
        let _ = writeln!(
            t,
            "| {} | **TAP / kernel** | **{:.2}×** | | **{:.2}×** | |",
            case.label,
            med[0].0 / med[1].0,
            med[0].1 / med[1].1
        );
    }
    t
}

fn readme_body(opts: &Options, table: &str) -> String {
    let spin = opts.run.host.spin("the binaries' default `--spin-us 200`");
    format!(
        "### Echo: Rusty on TAP vs the kernel's sockets\n\
         \n\
         {provenance}.\n\
         {rounds} run(s) × {d} s per case and backend, alternating which backend goes first;\n\
         each column is the median over the runs, messages/s also shows the slowest–fastest run.\n\
         \n\
         Both servers run one worker pinned to CPU {scpu} ({spin}); the same client,\n\
         `echo-load` on kernel sockets with one worker, runs pinned to CPU {ccpu}; all inside a\n\
         private network namespace. TAP: the client's kernel → TAP → Rusty (`echo 7 1\n\
         tap:NAME {STACK_IP}/{PREFIX} 1`). Kernel: the same client → loopback → `echo 7` on kernel\n\
         sockets. Server CPU is the server process's utime + stime over the client's run\n\
         (`/proc/PID/stat`) per million echoed messages; an idle worker busy-polls for\n\
         `--spin-us` before it parks, and that counts too. On both paths the kernel runs a\n\
         receiver's TCP input in the sender's context (loopback, and writes to a TAP), so the\n\
         server's CPU includes the client kernel's receive work on both sides.\n\
         \n\
         {table}",
        provenance = provenance(),
        rounds = opts.run.rounds,
        d = opts.run.duration,
        scpu = opts.run.host.server_cpu,
        ccpu = opts.run.host.client_cpu,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_echo_load_output() {
        let out = "mode PingPong, 100 connections x 64 B, 2.0 s\n\
                   messages/s 96812   MB/s 6.20   messages 193694   bytes 12399677\n\
                   latency us: p50 365  p90 3385  p99 8591  p99.9 12575  max 16527\n\
                   failed connections 0   byte mismatches 0   workers reported 1/1\n";
        let s = parse_client(out).unwrap();
        assert_eq!(s.msgs_per_s, 96812.0);
        assert_eq!(s.mb_per_s, 6.20);
        assert_eq!(s.messages, 193_694);
        assert_eq!(s.latency_us, Some((365, 8591)));
        let s = parse_client("messages/s 10   MB/s 0.01   messages 20   bytes 1\n").unwrap();
        assert_eq!(s.latency_us, None);
        assert!(parse_client("echo-load: connection refused\n").is_none());
    }
}
