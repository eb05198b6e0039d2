//! `cargo xtask bench echo` and `cargo xtask bench ws`: an echo server on Rusty's stack
//! behind a TAP and on AF_XDP against the same server on the kernel's sockets, with the
//! same client on the same cores. `bench echo` runs `echo` under `echo-load` (TCP
//! bytes); `bench ws` runs `ws-echo` under `ws-load` (WebSocket messages over 240
//! connections, as LAppS measured). Both are a [`Suite`]; below, `echo` stands for
//! either.
//!
//! Setup (needs root): ethtool (installed with apt-get when missing; without it the
//! AF_XDP row is skipped with a note), and a private network namespace
//! `rusty-bench-<pid>` holding a pre-created multi-queue TAP `rbtap<pid>` whose host
//! side is 10.79.0.1/24 and fd00:79::1/64 and a veth pair `rbxdp<pid>` – `rbcli<pid>`
//! whose client end is 10.79.1.1/24 and fd00:79:1::1/64 ([`crate::xdp`]). Every run
//! starts a fresh server inside the namespace pinned to the server core with `taskset`
//! (one worker), then the client `echo-load` (kernel sockets, one worker) pinned to the
//! client core, over IPv4 and over IPv6 ([`crate::family`]; `--family`):
//!
//! - TAP: `echo 7 1 tap:rbtap<pid> 10.79.0.2/24,fd00:79::2/64 1`, client →
//!   `10.79.0.2:7` or `[fd00:79::2]:7` through the namespace's kernel and the TAP;
//! - AF_XDP: `echo 7 1 xdp:rbxdp<pid> 10.79.1.2/24,fd00:79:1::2/64 1`, client →
//!   `10.79.1.2:7` or `[fd00:79:1::2]:7` through the namespace's kernel and the veth
//!   pair (left out with `--no-xdp`, skipped with a note when echo cannot come up on it:
//!   the driver not built in, or the kernel refusing AF_XDP);
//! - kernel: `echo 7` (kernel sockets on `[::]`, both families), client →
//!   `127.0.0.1:7` or `[::1]:7` over loopback.
//!
//! The servers run inside the namespace too: a TAP is found by name in the opener's
//! namespace, and the driver configures its host side by name, so a server in the root
//! namespace could not attach to a TAP that was moved into the client's namespace.
//!
//! Server CPU is utime + stime of the server process (all threads) from
//! `/proc/PID/stat`, and machine CPU the busy time of every CPU from `/proc/stat`, both
//! sampled just before the client starts and just after it exits. Cases rotate their
//! backend order round by round; the table shows medians. On every exit path (errors,
//! SIGINT/SIGTERM) the processes started here are killed by PID and the namespace, TAP
//! and veth pair are deleted.
//!
//! This file holds the suites, the servers and the loop over rounds; the table, verdict,
//! charts and block written into `docs/benchmarks.md` are in [`report`].

mod report;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use crate::common::{
    check_interrupted, check_run, explain_run, listening, release_bin, rotated, warn_if_busy,
    CpuTimes, Netns, Proc, Result, RunArgs, QUICK_DURATION,
};
use crate::family::{self, endpoint, Family, Over, Subnet, Subnets};
use crate::http_load::report::Row;
use crate::results::{publish, Block};
use crate::xdp::{self, Goal, Per, XdpLink};
use report::{block_body, charts, table, verdict};

/// The TAP's subnets: its host side and Rusty.
const TAP: Subnets = Subnets {
    v4: Subnet {
        kernel_cidr: "10.79.0.1/24",
        rusty: "10.79.0.2",
    },
    v6: Subnet {
        kernel_cidr: "fd00:79::1/64",
        rusty: "fd00:79::2",
    },
};
/// The AF_XDP row's veth pair: `rbxdp<pid>` (Rusty's end) and `rbcli<pid>`.
const XDP: xdp::Plan = xdp::Plan {
    prefix: "rb",
    client_cidr: "10.79.1.1/24",
    stack_ip: "10.79.1.2",
    ipv6: Some(Subnet {
        kernel_cidr: "fd00:79:1::1/64",
        rusty: "fd00:79:1::2",
    }),
    queues: 1,
};

#[derive(Debug, Clone, clap::Args)]
pub(crate) struct Options {
    #[command(flatten)]
    pub run: RunArgs,
}

/// What differs between the echo-style benchmarks: server and client, cases, goals and
/// where the table goes.
pub(crate) struct Suite {
    /// `cargo xtask bench NAME`.
    name: &'static str,
    /// The package that builds both binaries.
    package: &'static str,
    server: &'static str,
    client: &'static str,
    port: u16,
    cases: &'static [Case],
    goals: &'static [Goal],
    /// The marker lines of the suite's block in `docs/benchmarks.md`.
    block: Block,
    /// The block's heading, the start of its charts' titles, and what the client sends.
    heading: &'static str,
    title: &'static str,
    unit: &'static str,
    /// Seconds per run with `--quick`.
    quick_seconds: u64,
}

/// TCP echo under `echo-load`.
pub(crate) const ECHO: Suite = Suite {
    name: "echo",
    package: "rusty-echo",
    server: "echo",
    client: "echo-load",
    port: 7,
    cases: &ECHO_CASES,
    goals: &ECHO_GOALS,
    block: Block {
        start: "<!-- bench-echo:start -->",
        end: "<!-- bench-echo:end -->",
    },
    heading: "Echo: Rusty on TAP and on AF_XDP vs the kernel's sockets",
    title: "Echo",
    unit: "echoed message",
    quick_seconds: QUICK_DURATION,
};

/// WebSocket echo under `ws-load`: 240 connections, each sending one binary message and
/// waiting for its echo, at LAppS's three sizes.
pub(crate) const WS: Suite = Suite {
    name: "ws",
    package: "rusty-websocket",
    server: "ws-echo",
    client: "ws-load",
    port: 9001,
    cases: &WS_CASES,
    goals: &WS_GOALS,
    block: Block {
        start: "<!-- bench-ws:start -->",
        end: "<!-- bench-ws:end -->",
    },
    heading: "WebSocket echo: Rusty on TAP and on AF_XDP vs the kernel's sockets",
    title: "WebSocket echo",
    unit: "echoed WebSocket message",
    // ws-load's clock includes its 240 opening handshakes, and a run that echoes no
    // message fails: on a busy machine the handshakes alone have taken over 2 s.
    quick_seconds: 4,
};

#[derive(Debug, Clone, Copy)]
struct Case {
    label: &'static str,
    mode: &'static str,
    connections: usize,
    size: usize,
}

/// `connections` clients in `mode` (echo-load's and ws-load's `--mode`) with messages of
/// `size` bytes.
const fn case(label: &'static str, mode: &'static str, connections: usize, size: usize) -> Case {
    Case {
        label,
        mode,
        connections,
        size,
    }
}

const WS_CASES: [Case; 3] = [
    case("240 × 128 B messages", "ping-pong", 240, 128),
    case("240 × 1 KiB messages", "ping-pong", 240, 1024),
    case("240 × 8 KiB messages", "ping-pong", 240, 8192),
];

/// The goal: at least 2× the kernel backend's messages per server CPU-second at 128 B.
const WS_GOALS: [Goal; 1] = [Goal::new(WS_CASES[0].label, Per::ServerCpu, 2.0)];

const ECHO_CASES: [Case; 2] = [
    case("ping-pong 100 × 64 B", "ping-pong", 100, 64),
    case("stream 4 × 512 B", "stream", 4, 512),
];

/// The goal for Rusty on AF_XDP against the kernel backend.
const ECHO_GOALS: [Goal; 1] = [Goal::new(ECHO_CASES[0].label, Per::ServerCpu, 3.0)];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Backend {
    Tap,
    Xdp,
    Kernel,
}

impl Row for Backend {
    fn label(self) -> String {
        match self {
            Backend::Tap => "Rusty on TAP",
            Backend::Xdp => "Rusty on AF_XDP",
            Backend::Kernel => "kernel sockets",
        }
        .into()
    }

    fn short(self) -> String {
        match self {
            Backend::Tap => "TAP",
            Backend::Xdp => "XDP",
            Backend::Kernel => "kernel",
        }
        .into()
    }
}

/// One client run.
#[derive(Debug, Clone, Copy, Default)]
struct Sample {
    msgs_per_s: f64,
    mb_per_s: f64,
    messages: u64,
    /// The server's and the machine's CPU time over the client's run.
    cpu: CpuTimes,
    latency_us: Option<(u64, u64)>,
}

impl Sample {
    /// Server CPU microseconds per echoed message.
    fn server_us(&self) -> f64 {
        self.cpu.server_us_per(self.messages)
    }

    /// Machine CPU microseconds per echoed message.
    fn machine_us(&self) -> f64 {
        self.cpu.machine_us_per(self.messages)
    }
}

pub(crate) fn run(opts: &Options, suite: &'static Suite) -> Result<()> {
    let opts = &Options {
        run: opts.run.effective(suite.quick_seconds),
    };
    if opts.run.load.duration == 0 || opts.run.load.rounds == 0 {
        return Err("--duration and --rounds must be at least 1".into());
    }
    let what = format!("bench {}", suite.name);
    let (interrupted, root) = opts.run.host.prepare(&what, &[suite.package])?;
    warn_if_busy(&what);
    let bins = Bins {
        echo: release_bin(&root, suite.server)?,
        load: release_bin(&root, suite.client)?,
    };

    let pid = std::process::id();
    let logs = std::env::temp_dir().join(format!("rusty-bench-{pid}"));
    fs::create_dir_all(&logs).map_err(|e| format!("creating {}: {e}", logs.display()))?;
    let kept = |e: String| format!("{e}\n(server and client logs kept in {})", logs.display());
    let mut net = Netns::create(
        format!("rusty-bench-{pid}"),
        format!("rbtap{pid}"),
        TAP.v4.kernel_cidr,
    )?;
    net.add_address(&net.tap, TAP.v6.kernel_cidr)?;
    let xdp_link = xdp::setup(
        &opts.run,
        false,
        &mut net,
        &XDP,
        &logs.join("apt-get.log"),
        &interrupted,
    )?;
    let mut ctx = Ctx {
        opts,
        suite,
        bins,
        net: &net,
        xdp: xdp_link.as_ref().ok(),
        logs: &logs,
        interrupted: &interrupted,
    };
    let mut backends = vec![Backend::Tap, Backend::Kernel];
    let xdp_outcome = match &xdp_link {
        Ok(_) => ctx.xdp_preflight().map_err(kept)?,
        Err(why) => Err(why.clone()),
    };
    if xdp_outcome.is_ok() {
        backends.insert(1, Backend::Xdp);
    } else {
        ctx.xdp = None;
    }
    xdp::announce(&what, &xdp_outcome);
    let rows = family::rows(&backends, &opts.run.family.list(), |_| false);

    let cases = suite.cases;
    let total = opts.run.load.rounds * cases.len() * rows.len();
    eprintln!(
        "{what}: {total} runs of {} s (server on CPU {}, client on CPU {}, namespace {})",
        opts.run.load.duration, opts.run.host.server_cpu, opts.run.host.client_cpu, net.name
    );
    let mut samples: Vec<Vec<(Over<Backend>, Sample)>> = vec![Vec::new(); cases.len()];
    let mut n = 0;
    for round in 0..opts.run.load.rounds {
        for (ci, case) in cases.iter().enumerate() {
            for backend in rotated(&rows, round + ci) {
                n += 1;
                let s = ctx.run_one(*case, backend, n).map_err(kept)?;
                eprintln!(
                    "  [{n}/{total}] round {} {:<22} {:<21} {:>10.0} msg/s {:>8.2} MB/s \
                     CPU µs/msg server {:.2} machine {:.2}{}",
                    round + 1,
                    case.label,
                    backend.label(),
                    s.msgs_per_s,
                    s.mb_per_s,
                    s.server_us(),
                    s.machine_us(),
                    s.latency_us
                        .map(|(a, b)| format!(", p50/p99 {a}/{b} µs"))
                        .unwrap_or_default()
                );
                samples[ci].push((backend, s));
            }
        }
    }
    drop(net);
    if opts.run.host.keep_logs {
        eprintln!("{what}: logs kept in {}", logs.display());
    } else {
        let _ = fs::remove_dir_all(&logs);
    }

    let table = table(suite, &samples, &rows);
    let xdp_skipped = xdp_outcome.as_ref().err().map(String::as_str);
    let verdict = verdict(suite, &samples, xdp_skipped, opts.run.family);
    println!("{table}\n{verdict}");
    let charts = charts(suite, &samples, &rows)?;
    publish(
        &root,
        &what,
        opts.run.host.no_docs,
        &charts,
        suite.block,
        |charts| block_body(suite, opts, &xdp_outcome, charts, &table, &verdict),
    )
}

struct Bins {
    echo: PathBuf,
    load: PathBuf,
}

struct Ctx<'a> {
    opts: &'a Options,
    suite: &'static Suite,
    bins: Bins,
    net: &'a Netns,
    /// The AF_XDP row's link, while that row runs.
    xdp: Option<&'a XdpLink>,
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

    fn xdp_link(&self) -> Result<&XdpLink> {
        self.xdp
            .ok_or_else(|| "Rusty on AF_XDP is not set up".into())
    }

    /// A fresh server for `backend`, up and accepting over its family.
    fn start(&self, backend: Over<Backend>, log: &Path) -> Result<Proc> {
        let mut cmd = self.in_ns(self.opts.run.host.server_cpu, &self.bins.echo);
        cmd.arg(self.suite.port.to_string());
        match backend.server {
            Backend::Tap => {
                cmd.args(["1", &format!("tap:{}", self.net.tap)])
                    .arg(TAP.rusty_spec())
                    .arg("1");
            }
            Backend::Xdp => {
                cmd.args(self.xdp_link()?.link_args());
            }
            Backend::Kernel => {}
        }
        cmd.args(["--grace", "1"]);
        if let Some(us) = self.opts.run.host.spin_us {
            cmd.arg("--spin-us").arg(us.to_string());
        }
        let mut server = Proc::spawn(self.suite.server, cmd, log)?;
        self.wait_ready(&mut server, backend, log)?;
        Ok(server)
    }

    /// Starts and stops echo on AF_XDP once, before any run, for the row's outcome.
    fn xdp_preflight(&self) -> Result<xdp::Outcome> {
        let log = self.logs.join("00-xdp-preflight-server.log");
        let started = self
            .start(Over::new(Backend::Xdp, Family::V4), &log)
            .map(|mut server| server.stop(Duration::from_secs(5)));
        self.check_interrupted()?;
        Ok(xdp::outcome(
            self.suite.server,
            self.xdp_link()?,
            &log,
            started,
        ))
    }

    /// Where the client reaches `backend` in its family.
    fn host(&self, backend: Over<Backend>) -> Result<&'static str> {
        Ok(match backend.server {
            Backend::Tap => TAP.of(backend.family).rusty,
            Backend::Xdp => self.xdp_link()?.stack_ip_of(backend.family)?,
            Backend::Kernel => backend.family.loopback(),
        })
    }

    fn run_one(&self, case: Case, backend: Over<Backend>, n: usize) -> Result<Sample> {
        self.check_interrupted()?;
        let tag = format!(
            "{n:02}-{}-{:?}-{}",
            case.mode, backend.server, backend.family
        );
        let tag = tag.to_lowercase();
        let server_log = self.logs.join(format!("{tag}-server.log"));
        let mut server = self.start(backend, &server_log)?;

        let target = endpoint(self.host(backend)?, self.suite.port);
        let client_log = self.logs.join(format!("{tag}-client.log"));
        let mut cmd = self.in_ns(self.opts.run.host.client_cpu, &self.bins.load);
        cmd.arg(&target)
            .args(["--mode", case.mode, "--connections"])
            .arg(case.connections.to_string())
            .arg("--size")
            .arg(case.size.to_string())
            .arg("--duration")
            .arg(self.opts.run.load.duration.to_string());

        let cpu_before = CpuTimes::read(&[server.pid()])?;
        let client_name = self.suite.client;
        let mut client = Proc::spawn(client_name, cmd, &client_log)?;
        let limit = Duration::from_secs(self.opts.run.load.duration + 30);
        let status = client.wait_for(limit, self.interrupted)?;
        let cpu_after = CpuTimes::read(&[server.pid()]);
        let server_alive = server.try_status()?.is_none();
        server.stop(Duration::from_secs(5));

        let out = fs::read_to_string(&client_log).unwrap_or_default();
        let explain = || explain_run(client_name, &out, &server_log);
        let what = format!("{} on {}", case.label, backend.label());
        check_run(client_name, &what, status, limit, server_alive, explain)?;
        let mut s = parse_client(&out)
            .ok_or_else(|| format!("could not read {client_name}'s numbers{}", explain()))?;
        s.cpu = cpu_after?.since(cpu_before);
        Ok(s)
    }

    /// Until the server accepts: a listening socket on the port (kernel), or a
    /// connection to Rusty's address in the run's family (TAP, AF_XDP: an IPv6 address
    /// takes about a second of duplicate address detection).
    fn wait_ready(&self, server: &mut Proc, backend: Over<Backend>, log: &Path) -> Result<()> {
        let what = format!("the {} server", backend.label());
        let times = (Duration::from_secs(10), Duration::from_millis(200));
        let port = self.suite.port;
        crate::common::wait_ready(server, &what, log, times, self.interrupted, |pid| {
            Ok(match backend.server {
                Backend::Kernel => listening(pid, port),
                Backend::Tap | Backend::Xdp => self.net.connects(self.host(backend)?, port),
            })
        })
    }
}

/// messages/s, MB/s, messages and (ping-pong) p50/p99 from the client's report
/// (`echo-load` and `ws-load` print the same lines).
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
