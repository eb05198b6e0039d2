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
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant, SystemTime};

use crate::readme;

const PORT: u16 = 7;
const HOST_CIDR: &str = "10.79.0.1/24";
const STACK_IP: &str = "10.79.0.2";
const PREFIX: u8 = 24;

#[derive(Debug, Clone, clap::Args)]
pub struct Options {
    /// Seconds of load per run.
    #[arg(long, default_value_t = 5)]
    pub duration: u64,
    /// Runs per case and backend; the table shows the median (an odd count gives a real
    /// middle run).
    #[arg(long, default_value_t = 3)]
    pub rounds: usize,
    /// Pass --spin-us to both servers (default: the binaries' own default, 200 µs).
    #[arg(long, value_name = "MICROSECONDS")]
    pub spin_us: Option<u64>,
    /// Core for the server's worker.
    #[arg(long, default_value_t = 0)]
    pub server_cpu: usize,
    /// Core for the client.
    #[arg(long, default_value_t = 1)]
    pub client_cpu: usize,
    /// Print the table only; leave README.md alone.
    #[arg(long)]
    pub no_readme: bool,
    /// Use the release binaries already built.
    #[arg(long)]
    pub no_build: bool,
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

type Result<T> = std::result::Result<T, String>;

pub fn run(opts: &Options) -> Result<()> {
    if opts.duration == 0 || opts.rounds == 0 {
        return Err("--duration and --rounds must be at least 1".into());
    }
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Err(
            "`cargo xtask bench echo` must run as root: it creates a network \
                    namespace and a TAP device (try `sudo -E cargo xtask bench echo`)"
                .into(),
        );
    }
    if opts.server_cpu == opts.client_cpu {
        return Err("--server-cpu and --client-cpu must differ".into());
    }
    let allowed = allowed_cpus()?;
    for cpu in [opts.server_cpu, opts.client_cpu] {
        if !allowed.contains(&cpu) {
            return Err(format!(
                "CPU {cpu} is not in this process's allowed set {allowed:?}; pick others \
                 with --server-cpu/--client-cpu"
            ));
        }
    }
    let interrupted = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(sig, Arc::clone(&interrupted))
            .map_err(|e| format!("installing a signal handler: {e}"))?;
    }

    let root = workspace_root();
    if !opts.no_build {
        build(&root)?;
    }
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("target"));
    let bins = Bins {
        echo: target.join("release/echo"),
        load: target.join("release/echo-load"),
    };
    for b in [&bins.echo, &bins.load] {
        if !b.is_file() {
            return Err(format!("{} is missing; build it first", b.display()));
        }
    }

    let pid = std::process::id();
    let logs = std::env::temp_dir().join(format!("rusty-bench-{pid}"));
    fs::create_dir_all(&logs).map_err(|e| format!("creating {}: {e}", logs.display()))?;
    let net = Netns::create(format!("rusty-bench-{pid}"), format!("rbtap{pid}"))?;
    let ctx = Ctx {
        opts,
        bins,
        net: &net,
        logs: &logs,
        interrupted: &interrupted,
    };

    let total = opts.rounds * CASES.len() * 2;
    eprintln!(
        "bench echo: {total} runs of {} s (server on CPU {}, client on CPU {}, namespace {})",
        opts.duration, opts.server_cpu, opts.client_cpu, net.name
    );
    let mut samples: Vec<Vec<(Backend, Sample)>> = vec![Vec::new(); CASES.len()];
    let mut n = 0;
    for round in 0..opts.rounds {
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
    if !opts.no_readme {
        let body = readme_body(opts, &table);
        let path = root.join("README.md");
        let text =
            fs::read_to_string(&path).map_err(|e| format!("reading {}: {e}", path.display()))?;
        fs::write(&path, readme::put_block(&text, &body))
            .map_err(|e| format!("writing {}: {e}", path.display()))?;
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
        if self.interrupted.load(Ordering::Relaxed) {
            Err("interrupted; cleaning up".into())
        } else {
            Ok(())
        }
    }

    fn in_ns(&self, cpu: usize, program: &Path) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &self.net.name, "taskset", "-c"])
            .arg(cpu.to_string())
            .arg(program);
        c
    }

    fn run_one(&self, case: Case, backend: Backend, n: usize) -> Result<Sample> {
        self.check_interrupted()?;
        let tag = format!("{n:02}-{}-{:?}", case.mode, backend).to_lowercase();
        let server_log = self.logs.join(format!("{tag}-server.log"));
        let mut cmd = self.in_ns(self.opts.server_cpu, &self.bins.echo);
        cmd.arg(PORT.to_string());
        if backend == Backend::Tap {
            cmd.args(["1", &format!("tap:{}", self.net.tap)])
                .arg(format!("{STACK_IP}/{PREFIX}"))
                .arg("1");
        }
        cmd.args(["--grace", "1"]);
        if let Some(us) = self.opts.spin_us {
            cmd.arg("--spin-us").arg(us.to_string());
        }
        let mut server = Proc::spawn("echo", cmd, &server_log)?;
        self.wait_ready(&mut server, backend, &server_log)?;

        let target = match backend {
            Backend::Tap => format!("{STACK_IP}:{PORT}"),
            Backend::Kernel => format!("127.0.0.1:{PORT}"),
        };
        let client_log = self.logs.join(format!("{tag}-client.log"));
        let mut cmd = self.in_ns(self.opts.client_cpu, &self.bins.load);
        cmd.arg(&target)
            .args(["--mode", case.mode, "--connections"])
            .arg(case.connections.to_string())
            .arg("--size")
            .arg(case.size.to_string())
            .arg("--duration")
            .arg(self.opts.duration.to_string());

        let cpu_before = process_cpu_seconds(server.pid())?;
        let mut client = Proc::spawn("echo-load", cmd, &client_log)?;
        let limit = Duration::from_secs(self.opts.duration + 30);
        let status = client.wait_for(limit, self.interrupted)?;
        let cpu_after = process_cpu_seconds(server.pid());
        let server_alive = server.try_status()?.is_none();
        server.stop(Duration::from_secs(5));

        let out = fs::read_to_string(&client_log).unwrap_or_default();
        let explain = || {
            format!(
                "\n--- echo-load output ---\n{}\n--- server log (tail) ---\n{}",
                out.trim_end(),
                tail(&server_log, 20)
            )
        };
        let status = status.ok_or_else(|| {
            format!(
                "echo-load ({} {}) did not finish within {} s{}",
                case.label,
                backend.label(),
                limit.as_secs(),
                explain()
            )
        })?;
        if !status.success() || !server_alive {
            return Err(format!(
                "{} on {} failed (echo-load {status}, server {}){}",
                case.label,
                backend.label(),
                if server_alive {
                    "alive"
                } else {
                    "exited early"
                },
                explain()
            ));
        }
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

/// A child process, killed by PID and reaped when dropped.
struct Proc {
    name: &'static str,
    child: Child,
    done: Option<ExitStatus>,
}

impl Proc {
    fn spawn(name: &'static str, mut cmd: Command, log: &Path) -> Result<Proc> {
        let file = fs::File::create(log).map_err(|e| format!("creating {}: {e}", log.display()))?;
        let err = file
            .try_clone()
            .map_err(|e| format!("duplicating a file handle: {e}"))?;
        let child = cmd
            .stdin(Stdio::null())
            .stdout(file)
            .stderr(err)
            .spawn()
            .map_err(|e| format!("starting {name} ({cmd:?}): {e}"))?;
        Ok(Proc {
            name,
            child,
            done: None,
        })
    }

    /// `ip netns exec` and `taskset` exec the program in place, so this is its PID.
    fn pid(&self) -> i32 {
        self.child.id() as i32
    }

    fn try_status(&mut self) -> Result<Option<ExitStatus>> {
        if self.done.is_none() {
            self.done = self
                .child
                .try_wait()
                .map_err(|e| format!("waiting for {}: {e}", self.name))?;
        }
        Ok(self.done)
    }

    /// Its exit status, or `None` when it ran past `limit` (it is then killed).
    fn wait_for(
        &mut self,
        limit: Duration,
        interrupted: &AtomicBool,
    ) -> Result<Option<ExitStatus>> {
        let deadline = Instant::now() + limit;
        loop {
            if let Some(st) = self.try_status()? {
                return Ok(Some(st));
            }
            if interrupted.load(Ordering::Relaxed) {
                return Err("interrupted; cleaning up".into());
            }
            if Instant::now() > deadline {
                self.kill(libc::SIGKILL);
                return Ok(None);
            }
            thread::sleep(Duration::from_millis(10));
        }
    }

    fn kill(&mut self, sig: i32) {
        if matches!(self.try_status(), Ok(None)) {
            // SAFETY: kill has no memory preconditions; the PID is our unreaped child, so
            // it cannot have been reused.
            unsafe { libc::kill(self.pid(), sig) };
        }
    }

    /// SIGINT, then SIGKILL if it is still there after `grace`.
    fn stop(&mut self, grace: Duration) {
        self.kill(libc::SIGINT);
        let deadline = Instant::now() + grace;
        while matches!(self.try_status(), Ok(None)) && Instant::now() < deadline {
            thread::sleep(Duration::from_millis(10));
        }
        self.kill(libc::SIGKILL);
        if self.done.is_none() {
            self.done = self.child.wait().ok();
        }
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        if self.done.is_none() {
            self.kill(libc::SIGKILL);
            self.done = self.child.wait().ok();
        }
    }
}

/// The benchmark's network namespace and TAP, deleted when dropped.
struct Netns {
    name: String,
    tap: String,
}

impl Netns {
    fn create(name: String, tap: String) -> Result<Netns> {
        ip(&["netns", "add", &name])?;
        // From here on, Drop deletes whatever was made.
        let ns = Netns { name, tap };
        let n = ns.name.as_str();
        let t = ns.tap.as_str();
        ip(&["-n", n, "link", "set", "lo", "up"])?;
        ip(&[
            "-n",
            n,
            "tuntap",
            "add",
            "dev",
            t,
            "mode",
            "tap",
            "multi_queue",
            "vnet_hdr",
        ])?;
        ip(&["-n", n, "addr", "add", HOST_CIDR, "dev", t])?;
        ip(&["-n", n, "link", "set", t, "up"])?;
        Ok(ns)
    }

    fn tap_has_carrier(&self) -> bool {
        let out = Command::new("ip")
            .args(["-n", &self.name, "-o", "link", "show", "dev", &self.tap])
            .stderr(Stdio::null())
            .output();
        matches!(out, Ok(o) if o.status.success()
            && String::from_utf8_lossy(&o.stdout).contains("LOWER_UP"))
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let tap = ip(&["-n", &self.name, "link", "del", "dev", &self.tap]);
        let ns = ip(&["netns", "del", &self.name]);
        for r in [tap, ns] {
            if let Err(e) = r {
                eprintln!("bench echo: cleanup: {e}");
            }
        }
    }
}

fn ip(args: &[&str]) -> Result<()> {
    let out = Command::new("ip")
        .args(args)
        .output()
        .map_err(|e| format!("running `ip`: {e} (is iproute2 installed?)"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "`ip {}` failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

fn build(root: &Path) -> Result<()> {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let status = Command::new(cargo)
        .args(["build", "--release", "-p", "rusty-echo"])
        .current_dir(root)
        .status()
        .map_err(|e| format!("running cargo: {e}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!(
            "`cargo build --release -p rusty-echo` failed ({status})"
        ))
    }
}

fn workspace_root() -> PathBuf {
    let manifest = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    manifest
        .parent()
        .map_or(manifest.clone(), Path::to_path_buf)
}

fn allowed_cpus() -> Result<Vec<usize>> {
    // SAFETY: cpu_set_t is plain data; sched_getaffinity writes at most its size.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) != 0 {
            return Err(format!(
                "sched_getaffinity: {}",
                std::io::Error::last_os_error()
            ));
        }
        Ok((0..libc::CPU_SETSIZE as usize)
            .filter(|&c| libc::CPU_ISSET(c, &set))
            .collect())
    }
}

/// utime + stime of process `pid` (all its threads), in seconds.
fn process_cpu_seconds(pid: i32) -> Result<f64> {
    let path = format!("/proc/{pid}/stat");
    let stat = fs::read_to_string(&path).map_err(|e| format!("reading {path}: {e}"))?;
    let ticks = parse_stat_ticks(&stat).ok_or_else(|| format!("unexpected {path}: {stat}"))?;
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    Ok(ticks as f64 / hz.max(1) as f64)
}

/// utime + stime in clock ticks from the text of `/proc/PID/stat`.
fn parse_stat_ticks(stat: &str) -> Option<u64> {
    // The command name (field 2) is in parentheses and may hold spaces; fields after it
    // start at 3 (state), so utime (14) and stime (15) are the 12th and 13th.
    let rest = &stat[stat.rfind(')')? + 1..];
    let mut f = rest.split_whitespace().skip(11);
    let utime: u64 = f.next()?.parse().ok()?;
    let stime: u64 = f.next()?.parse().ok()?;
    Some(utime + stime)
}

/// Whether process `pid`'s network namespace has a TCP socket listening on `port`.
fn listening(pid: i32, port: u16) -> bool {
    let want = format!(":{port:04X}");
    ["tcp", "tcp6"].iter().any(|f| {
        fs::read_to_string(format!("/proc/{pid}/net/{f}")).is_ok_and(|t| {
            t.lines().skip(1).any(|l| {
                let mut cols = l.split_whitespace();
                let local = cols.nth(1).unwrap_or("");
                let state = cols.nth(1).unwrap_or("");
                local.ends_with(&want) && state == "0A"
            })
        })
    })
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

fn tail(path: &Path, lines: usize) -> String {
    let text = fs::read_to_string(path).unwrap_or_default();
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

fn median(mut v: Vec<f64>) -> f64 {
    v.retain(|x| !x.is_nan());
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(f64::total_cmp);
    let m = v.len() / 2;
    if v.len() % 2 == 1 {
        v[m]
    } else {
        (v[m - 1] + v[m]) / 2.0
    }
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

fn thousands(x: f64) -> String {
    if !x.is_finite() {
        return "—".into();
    }
    let digits = format!("{:.0}", x.abs());
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    if x < 0.0 {
        out.insert(0, '-');
    }
    out
}

fn readme_body(opts: &Options, table: &str) -> String {
    let command = std::iter::once("cargo xtask".to_string())
        .chain(std::env::args().skip(1))
        .collect::<Vec<_>>()
        .join(" ");
    let kernel = fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    let model = fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|c| {
            c.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split(':').nth(1))
                .map(|m| m.trim().to_string())
        })
        .unwrap_or_else(|| "unknown CPU".into());
    let nproc = thread::available_parallelism().map_or(0, |n| n.get());
    let spin = opts
        .spin_us
        .map_or("the binaries' default `--spin-us 200`".to_string(), |us| {
            format!("`--spin-us {us}`")
        });
    format!(
        "### Echo: Rusty on TAP vs the kernel's sockets\n\
         \n\
         `{command}` — {date}, {nproc} CPUs ({model}), Linux {kernel}.\n\
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
        date = utc_date(),
        kernel = kernel.trim(),
        rounds = opts.rounds,
        d = opts.duration,
        scpu = opts.server_cpu,
        ccpu = opts.client_cpu,
    )
}

/// Today's date in UTC as YYYY-MM-DD.
fn utc_date() -> String {
    let secs = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let (y, m, d) = civil_from_days((secs / 86_400) as i64);
    format!("{y:04}-{m:02}-{d:02}")
}

/// Proleptic Gregorian date of `days` since 1970-01-01 (Howard Hinnant's algorithm).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
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

    #[test]
    fn reads_proc_stat() {
        let stat = "1234 (echo (x) y) S 1 2 3 4 5 6 7 8 9 10 150 25 0 0 20 0 3 0";
        assert_eq!(parse_stat_ticks(stat), Some(175));
    }

    #[test]
    fn medians_and_numbers() {
        assert_eq!(median(vec![3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(vec![4.0, 1.0]), 2.5);
        assert!(median(vec![f64::NAN]).is_nan());
        assert_eq!(thousands(1_234_567.4), "1,234,567");
        assert_eq!(thousands(999.0), "999");
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(19_723), (2024, 1, 1));
        assert_eq!(civil_from_days(11_016), (2000, 2, 29));
    }
}
