//! `cargo xtask soak [--minutes N] [--backend tap|kernel] …`: httpd under steady
//! keep-alive load for a long while, its resident memory sampled as it runs.
//!
//! httpd serves the HTTP benchmark's page set (500 pages, log-normal sizes up to
//! 300 KB, see [`pages`]) from a network namespace of its own: on Rusty's stack over
//! the namespace's TAP with two workers (`--oversubscribe`: they share the machine's
//! cores with wrk), or on the kernel's sockets. wrk, in the same namespace, keeps
//! `--connections` keep-alive connections asking for random pages for the whole run.
//! Every `--sample-seconds` the server's resident set (`VmRSS`) is read from `/proc`.
//!
//! The run fails when any request failed or when resident memory kept growing after
//! the warm-up (the first third of the run): the samples after it are cut in two
//! halves and the later half's highest may exceed the earlier half's by at most
//! `--slack-mib` ([`MemoryTrend::check_flat`]).

use std::fs;
use std::path::Path;
use std::time::{Duration, Instant};

use rusty_testkit::MemoryTrend;

use crate::common::{
    apt_install, check_interrupted, find_program, listening, prepare, release_bin, Netns, Proc,
    Result, TempDir,
};
use crate::http_load::wrk::parse_wrk;
use crate::pages;

const PORT: u16 = 8080;
const HOST_CIDR: &str = "10.81.0.1/24";
const STACK_IP: &str = "10.81.0.2";

/// Where httpd runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Backend {
    /// Rusty's stack on the namespace's TAP, two workers.
    Tap,
    /// The kernel's sockets, one worker per core.
    Kernel,
}

#[derive(Debug, Clone, clap::Args)]
pub(crate) struct Options {
    /// Minutes of load.
    #[arg(long, default_value_t = 15)]
    minutes: u64,
    #[arg(long, value_enum, default_value_t = Backend::Tap)]
    backend: Backend,
    /// Keep-alive connections wrk holds open.
    #[arg(long, default_value_t = 100)]
    connections: usize,
    /// Seconds between samples of the server's resident memory.
    #[arg(long, default_value_t = 30)]
    sample_seconds: u64,
    /// Growth of resident memory after the warm-up that still counts as flat, MiB.
    #[arg(long, default_value_t = 4)]
    slack_mib: u64,
    /// Use the release binaries already built.
    #[arg(long)]
    no_build: bool,
    /// Keep httpd's and wrk's logs; the path is printed.
    #[arg(long)]
    keep_logs: bool,
}

pub(crate) fn run(opts: &Options) -> Result<()> {
    if opts.minutes == 0 || opts.connections == 0 || opts.sample_seconds == 0 {
        return Err("--minutes, --connections and --sample-seconds must be at least 1".into());
    }
    let (interrupted, root) = prepare("soak", &["rusty-httpd"], (0, 1), opts.no_build)?;
    let httpd = release_bin(&root, "httpd")?;
    let pid = std::process::id();
    let tmp = TempDir::new(&format!("rusty-soak-{pid}"))?;
    let wrk = match find_program("wrk") {
        Some(w) => w,
        None => {
            eprintln!("soak: installing wrk with apt-get");
            apt_install(&["wrk"], &tmp.path().join("apt-get.log"), &interrupted)?
                .into_iter()
                .collect::<Result<Vec<_>>>()?;
            find_program("wrk").ok_or("wrk is not installed and could not be installed")?
        }
    };
    let page_dir = tmp.path().join("pages");
    let set = pages::write_pages(&page_dir)?;
    let script = tmp.path().join("random-pages.lua");
    fs::write(&script, pages::wrk_script())
        .map_err(|e| format!("writing {}: {e}", script.display()))?;
    let net = Netns::create(
        format!("rusty-soak-{pid}"),
        format!("rstap{pid}"),
        HOST_CIDR,
    )?;

    let server_log = tmp.path().join("httpd.log");
    let mut cmd = net_exec(&net, &httpd);
    cmd.arg(PORT.to_string()).arg(&page_dir);
    let host = match opts.backend {
        Backend::Tap => {
            cmd.args(["1", &format!("tap:{}", net.tap), &format!("{STACK_IP}/24")])
                .args(["2", "--oversubscribe"]);
            STACK_IP
        }
        Backend::Kernel => "127.0.0.1",
    };
    cmd.args(["--grace", "1"]);
    let mut server = Proc::spawn("httpd", cmd, &server_log)?;
    let backend = opts.backend;
    crate::common::wait_ready(
        &mut server,
        "httpd",
        &server_log,
        (Duration::from_secs(10), Duration::from_millis(300)),
        &interrupted,
        |pid| {
            Ok(match backend {
                Backend::Tap => net.tap_has_carrier(),
                Backend::Kernel => listening(pid, PORT),
            })
        },
    )?;
    eprintln!(
        "soak: httpd on {:?} (PID {}), {}; wrk with {} keep-alive connections for {} min, \
         resident memory every {} s",
        opts.backend,
        server.pid(),
        set.summary(),
        opts.connections,
        opts.minutes,
        opts.sample_seconds
    );

    let mut cmd = net_exec(&net, &wrk);
    cmd.arg("-t2")
        .arg(format!("-c{}", opts.connections))
        .arg(format!("-d{}s", opts.minutes * 60))
        .args(["--timeout", "5s", "-s"])
        .arg(&script)
        .arg(format!("http://{host}:{PORT}/"));
    let wrk_log = tmp.path().join("wrk.log");
    let mut client = Proc::spawn("wrk", cmd, &wrk_log)?;
    let started = Instant::now();
    let mut trend = MemoryTrend::new();
    let every = Duration::from_secs(opts.sample_seconds);
    let limit = Duration::from_secs(opts.minutes * 60 + 30);
    let status = loop {
        let next = every * (trend.samples().len() as u32 + 1);
        while started.elapsed() < next {
            if client.try_status()?.is_some() {
                break;
            }
            check_interrupted(&interrupted)?;
            std::thread::sleep(Duration::from_millis(200).min(next - started.elapsed()));
        }
        if let Some(status) = client.try_status()? {
            break status;
        }
        if started.elapsed() > limit {
            return Err(tmp.keep_for("wrk did not finish in time".into()));
        }
        let rss = resident_bytes(server.pid())?;
        trend.record(started.elapsed(), rss);
        eprintln!(
            "soak: {:>6.0} s  {:>7.1} MiB resident",
            started.elapsed().as_secs_f64(),
            rss as f64 / (1 << 20) as f64
        );
    };
    server.stop(Duration::from_secs(5));
    let wrk_out = fs::read_to_string(&wrk_log).unwrap_or_default();
    let server_out = fs::read_to_string(&server_log).unwrap_or_default();
    println!("{}", report(opts, &trend, &wrk_out, &server_out));

    let verdict = check(opts, status.success(), &trend, &wrk_out);
    if verdict.is_err() || opts.keep_logs {
        eprintln!("soak: logs kept in {}", tmp.keep().display());
    }
    verdict
}

/// `ip netns exec NS PROGRAM`, unpinned: the workers and wrk share the cores.
fn net_exec(net: &Netns, program: &Path) -> std::process::Command {
    let mut c = std::process::Command::new("ip");
    c.args(["netns", "exec", &net.name]).arg(program);
    c
}

/// `VmRSS` of process `pid`, in bytes.
fn resident_bytes(pid: i32) -> Result<i64> {
    let status = fs::read_to_string(format!("/proc/{pid}/status"))
        .map_err(|e| format!("reading /proc/{pid}/status: {e}"))?;
    vm_rss(&status).ok_or_else(|| format!("no VmRSS in /proc/{pid}/status"))
}

fn vm_rss(status: &str) -> Option<i64> {
    let kib: i64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))?
        .split_whitespace()
        .next()?
        .parse()
        .ok()?;
    Some(kib * 1024)
}

fn warm_up(opts: &Options) -> Duration {
    Duration::from_secs(opts.minutes * 60 / 3)
}

/// The samples as a table, wrk's totals and httpd's counters at exit.
fn report(opts: &Options, trend: &MemoryTrend, wrk_out: &str, server_out: &str) -> String {
    let mut out = format!(
        "httpd on {:?}, {} keep-alive connections, {} min (warm-up {} s)\n\n\
         | time (s) | resident (MiB) |\n|---:|---:|\n",
        opts.backend,
        opts.connections,
        opts.minutes,
        warm_up(opts).as_secs()
    );
    for (t, b) in trend.samples() {
        out += &format!(
            "| {:.0} | {:.1} |\n",
            t.as_secs_f64(),
            *b as f64 / (1 << 20) as f64
        );
    }
    if let Some(s) = parse_wrk(wrk_out) {
        out += &format!(
            "\nwrk: {} requests ({:.0}/s), {} socket errors, {} non-2xx\n",
            s.requests, s.req_per_s, s.socket_errors, s.non_2xx
        );
    }
    for line in server_out
        .lines()
        .filter(|l| l.starts_with("worker ") || l.starts_with("httpd total"))
    {
        out += line;
        out.push('\n');
    }
    out
}

fn check(opts: &Options, wrk_ok: bool, trend: &MemoryTrend, wrk_out: &str) -> Result<()> {
    let sample = parse_wrk(wrk_out).ok_or("wrk printed no summary")?;
    if !wrk_ok || sample.socket_errors > 0 || sample.non_2xx > 0 || sample.requests == 0 {
        return Err(format!(
            "requests failed: wrk {}, {} socket errors, {} non-2xx, {} requests",
            if wrk_ok { "succeeded" } else { "failed" },
            sample.socket_errors,
            sample.non_2xx,
            sample.requests
        ));
    }
    trend.check_flat(warm_up(opts), opts.slack_mib << 20)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_vm_rss() {
        let status = "Name:\thttpd\nVmPeak:\t  300000 kB\nVmRSS:\t   20808 kB\nThreads:\t3\n";
        assert_eq!(vm_rss(status), Some(20808 * 1024));
        assert_eq!(vm_rss("Name:\thttpd\n"), None);
    }
}
