//! `cargo xtask soak [--minutes N] [--backend tap|kernel] …`: httpd under a mix of
//! clients for a long while, its memory and what it served sampled as it runs.
//!
//! httpd serves the HTTP benchmark's page set (500 pages, log-normal sizes up to
//! 300 KB, see [`pages`]) from a network namespace of its own: on Rusty's stack over
//! the namespace's TAP with two workers (`--oversubscribe`: they share the machine's
//! cores with the clients), or on the kernel's sockets. Against it, all at once and
//! for the whole run:
//!
//! - wrk keeps `--connections` keep-alive connections asking for random pages;
//! - the soak's own clients ([`clients`]): short connections, range requests, slow
//!   readers and clients that vanish mid-request, threads of this process that enter
//!   the namespace with `setns`, every answer checked byte for byte.
//!
//! Every `--sample-seconds` it reads httpd's resident set (`VmRSS`) from `/proc` and
//! scrapes its `--metrics` endpoint (on the namespace's loopback) for the requests
//! answered by status, buffer memory and open connections ([`series`]).
//!
//! The run fails when any request failed (wrk's, the clients', or one httpd answered
//! with an error status) or when resident or buffer memory kept growing after the
//! warm-up (the first third of the run): the samples after it are cut in two halves
//! and the later half's highest may exceed the earlier half's by at most
//! `--slack-mib` (resident) or `--buffer-slack-mib` (buffers)
//! ([`MemoryTrend::check_flat`](rusty_testkit::MemoryTrend::check_flat)). The report
//! ([`report`]) is printed and written with the samples as CSV into `--out`, beside
//! charts of memory and of the requests answered per second over time ([`charts`]).

use std::fs;
use std::io::Write;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant, SystemTime};

use crate::common::{
    apt_install, check_interrupted, civil_from_days, find_program, listening, prepare, release_bin,
    target_dir, wait_ready, Netns, Proc, Result, TempDir,
};
use crate::http_load::wrk::parse_wrk;
use crate::pages;

mod charts;
mod clients;
mod exposition;
mod http;
mod report;
mod series;

use clients::{Clients, Pages, Target};
use exposition::Exposition;
use report::{Limits, Outcome};
use series::{Sample, Series};

const PORT: u16 = 8080;
const METRICS_PORT: u16 = 9464;
const HOST_CIDR: &str = "10.81.0.1/24";
const STACK_IP: Ipv4Addr = Ipv4Addr::new(10, 81, 0, 2);
/// Longest a scrape of the metrics may take.
const SCRAPE_DEADLINE: Duration = Duration::from_secs(10);
/// How long after the load's end its clients may take to finish: a slow reader's
/// last request, wrk's summary.
const WIND_DOWN: Duration = Duration::from_secs(90);

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
    /// Seconds between samples of the server's memory and metrics.
    #[arg(long, default_value_t = 30)]
    sample_seconds: u64,
    /// Growth of resident memory after the warm-up that still counts as flat, MiB.
    #[arg(long, default_value_t = 4)]
    slack_mib: u64,
    /// Growth of buffer memory after the warm-up that still counts as flat, MiB.
    #[arg(long, default_value_t = 4)]
    buffer_slack_mib: u64,
    /// Directory for the report and the samples as CSV (default: soak/ in the target
    /// directory); the paths are printed.
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
    /// Use the release binaries already built.
    #[arg(long)]
    no_build: bool,
    /// Keep httpd's and wrk's logs; the path is printed.
    #[arg(long)]
    keep_logs: bool,
    /// Run nothing: draw the charts of a past run again from the samples it wrote
    /// (`soak-BACKEND-TIME.csv`), beside that file; `--backend` names the server in
    /// their titles.
    #[arg(long, value_name = "CSV")]
    charts_from: Option<PathBuf>,
}

impl Options {
    fn run_for(&self) -> Duration {
        Duration::from_secs(self.minutes * 60)
    }

    fn limits(&self) -> Limits {
        Limits {
            warm_up: self.run_for() / 3,
            resident_slack: self.slack_mib << 20,
            buffer_slack: self.buffer_slack_mib << 20,
        }
    }
}

pub(crate) fn run(opts: &Options) -> Result<()> {
    if let Some(csv) = &opts.charts_from {
        return charts::redraw(csv, opts.backend);
    }
    if opts.minutes == 0 || opts.connections == 0 || opts.sample_seconds == 0 {
        return Err("--minutes, --connections and --sample-seconds must be at least 1".into());
    }
    let (interrupted, root) = prepare("soak", &["rusty-httpd"], (0, 1), opts.no_build)?;
    let httpd = release_bin(&root, "httpd")?;
    let out_dir = match &opts.out {
        Some(d) => d.clone(),
        None => target_dir(&root)?.join("soak"),
    };
    let tmp = TempDir::new(&format!("rusty-soak-{}", std::process::id()))?;
    let outcome = match soak(opts, &interrupted, &httpd, tmp.path()) {
        Ok(o) => o,
        Err(e) if check_interrupted(&interrupted).is_err() => return Err(e),
        Err(e) => return Err(tmp.keep_for(e)),
    };
    let limits = opts.limits();
    let verdict = report::verdict(&outcome, limits);
    let text = report::report(&outcome, limits, &verdict);
    println!("{text}");
    let (md, csv) = write_report(&out_dir, opts.backend, &text, &outcome.series)?;
    eprintln!(
        "soak: report in {}, samples in {}",
        md.display(),
        csv.display()
    );
    if !outcome.series.samples().is_empty() {
        for path in charts::write_beside(&csv, &outcome.series, opts.backend)? {
            eprintln!("soak: chart written to {}", path.display());
        }
    }
    tmp.finish(verdict, opts.keep_logs, "soak")
}

/// The run itself: namespace, httpd, load, samples. Everything it starts is stopped
/// and removed when it returns, whether it succeeded, failed or was interrupted.
fn soak(
    opts: &Options,
    interrupted: &std::sync::Arc<AtomicBool>,
    httpd: &Path,
    tmp: &Path,
) -> Result<Outcome> {
    let pid = std::process::id();
    let logs = tmp.join("logs");
    fs::create_dir_all(&logs).map_err(|e| format!("creating {}: {e}", logs.display()))?;
    let wrk = find_wrk(&logs, interrupted)?;
    let page_dir = tmp.join("pages");
    let set = pages::write_pages(&page_dir)?;
    let page_files = Pages::read(&page_dir, set.sizes.len())?;
    let script = tmp.join("random-pages.lua");
    fs::write(&script, pages::wrk_script())
        .map_err(|e| format!("writing {}: {e}", script.display()))?;
    let net = Netns::create(
        format!("rusty-soak-{pid}"),
        format!("rstap{pid}"),
        HOST_CIDR,
    )?;

    let server_log = logs.join("httpd.log");
    let mut cmd = net_exec(&net, httpd);
    cmd.arg(PORT.to_string()).arg(&page_dir);
    let host = match opts.backend {
        Backend::Tap => {
            cmd.args(["1", &format!("tap:{}", net.tap), &format!("{STACK_IP}/24")])
                .args(["2", "--oversubscribe"]);
            IpAddr::V4(STACK_IP)
        }
        Backend::Kernel => IpAddr::V4(Ipv4Addr::LOCALHOST),
    };
    let metrics = SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), METRICS_PORT);
    cmd.args(["--grace", "1", "--metrics", &metrics.to_string()]);
    let mut server = Proc::spawn("httpd", cmd, &server_log)?;
    wait_ready(
        &mut server,
        "httpd",
        &server_log,
        (Duration::from_secs(10), Duration::from_millis(300)),
        interrupted,
        |pid| {
            let serving = match opts.backend {
                Backend::Tap => net.tap_has_carrier(),
                Backend::Kernel => listening(pid, PORT),
            };
            Ok(serving && listening(pid, METRICS_PORT))
        },
    )?;
    let title = format!(
        "httpd on {} for {} min under wrk ({} keep-alive connections, random pages) and \
         the soak's clients ({}); samples every {} s.\n\n{}",
        match opts.backend {
            Backend::Tap => "Rusty's stack over TAP (two workers, `--oversubscribe`)",
            Backend::Kernel => "the kernel's sockets (one worker per core)",
        },
        opts.minutes,
        opts.connections,
        clients::describe_mix(),
        opts.sample_seconds,
        crate::common::provenance()
    );
    eprintln!(
        "soak: httpd PID {}, {}\nsoak: {title}",
        server.pid(),
        set.summary()
    );

    let run_for = opts.run_for();
    let mut cmd = net_exec(&net, &wrk);
    cmd.arg("-t2")
        .arg(format!("-c{}", opts.connections))
        .arg(format!("-d{}s", run_for.as_secs()))
        .args(["--timeout", "5s", "-s"])
        .arg(&script)
        .arg(format!("http://{host}:{PORT}/"));
    let wrk_log = logs.join("wrk.log");
    let mut load = Proc::spawn("wrk", cmd, &wrk_log)?;
    let target = Target {
        netns: net.name.clone(),
        addr: SocketAddr::new(host, PORT),
    };
    let clients = Clients::start(
        target,
        page_files,
        run_for,
        std::sync::Arc::clone(interrupted),
    )?;
    let started = Instant::now();

    let mut series = Series::default();
    let every = Duration::from_secs(opts.sample_seconds);
    let mut httpd_alive = true;
    let mut next = every;
    while next < run_for {
        while started.elapsed() < next {
            check_interrupted(interrupted)?;
            std::thread::sleep(Duration::from_millis(200).min(next - started.elapsed()));
        }
        if server.try_status()?.is_some() {
            httpd_alive = false;
            break;
        }
        if load.try_status()?.is_some_and(|st| !st.success()) {
            break;
        }
        let scrape = scrape(&net.name, metrics)?;
        let rss = resident_bytes(server.pid())?;
        let s = Sample::from_scrape(started.elapsed(), &scrape, rss, clients.failures());
        eprintln!(
            "soak: {:>6.0} s {:>12} requests {:>6} errors {:>7.1} MiB resident {:>7.1} MiB \
             buffers",
            s.at.as_secs_f64(),
            crate::common::thousands(s.requests as f64),
            s.errors(),
            s.resident_bytes as f64 / f64::from(1 << 20),
            s.buffer_bytes as f64 / f64::from(1 << 20),
        );
        series.push(s);
        next += every;
    }

    // A run cut short by httpd or wrk failing stops the rest now; otherwise each
    // client ends by itself when its time is up.
    let stop_now = !httpd_alive || load.try_status()?.is_some_and(|st| !st.success());
    let wrk_status = if stop_now {
        load.stop(Duration::from_secs(5));
        load.try_status()?
    } else {
        let wind_down = (run_for + WIND_DOWN).saturating_sub(started.elapsed());
        load.wait_for(wind_down, interrupted)?
    };
    let deadline = Instant::now() + WIND_DOWN;
    while !stop_now && !clients.finished() && Instant::now() < deadline {
        check_interrupted(interrupted)?;
        std::thread::sleep(Duration::from_millis(200));
    }
    let totals = clients.finish(true);
    httpd_alive &= server.try_status()?.is_none();
    let last_scrape = if httpd_alive {
        scrape(&net.name, metrics)?
    } else {
        Exposition::default()
    };
    server.stop(Duration::from_secs(5));
    let link = match opts.backend {
        Backend::Tap => tap_drops(&net)?,
        Backend::Kernel => String::new(),
    };
    let wrk_out = fs::read_to_string(&wrk_log).unwrap_or_default();
    let server_out = fs::read_to_string(&server_log).unwrap_or_default();
    Ok(Outcome {
        title,
        load: run_for,
        link,
        series,
        clients: totals,
        wrk: parse_wrk(&wrk_out),
        wrk_ok: wrk_status.is_some_and(|st| st.success()),
        last_scrape,
        httpd_alive,
        httpd_lines: server_out
            .lines()
            .filter(|l| l.starts_with("worker ") || l.starts_with("httpd total"))
            .map(str::to_string)
            .collect(),
    })
}

fn find_wrk(logs: &Path, interrupted: &AtomicBool) -> Result<PathBuf> {
    if let Some(w) = find_program("wrk") {
        return Ok(w);
    }
    eprintln!("soak: installing wrk with apt-get");
    apt_install(&["wrk"], &logs.join("apt-get.log"), interrupted)?
        .into_iter()
        .collect::<Result<Vec<_>>>()?;
    find_program("wrk").ok_or_else(|| "wrk is not installed and could not be installed".into())
}

/// `ip netns exec NS PROGRAM`, unpinned: the workers and the clients share the cores.
fn net_exec(net: &Netns, program: &Path) -> Command {
    let mut c = Command::new("ip");
    c.args(["netns", "exec", &net.name]).arg(program);
    c
}

/// What the TAP's host side dropped: frames toward httpd that its queue had no room
/// for, and frames from it the kernel did not take (`ip -s link`).
fn tap_drops(net: &Netns) -> Result<String> {
    let out = Command::new("ip")
        .args(["-n", &net.name, "-s", "-j", "link", "show", "dev", &net.tap])
        .output()
        .map_err(|e| format!("running `ip -s link`: {e}"))?;
    let text = String::from_utf8_lossy(&out.stdout);
    let (to_httpd, from_httpd) = parse_link_drops(&text)
        .ok_or_else(|| format!("`ip -s -j link show dev {}` said: {text}", net.tap))?;
    Ok(format!(
        "Frames the TAP's host side dropped: {to_httpd} on their way to httpd, \
         {from_httpd} from it."
    ))
}

/// Transmit and receive drops from `ip -s -j link show dev DEV`.
fn parse_link_drops(json: &str) -> Option<(u64, u64)> {
    let v: serde_json::Value = serde_json::from_str(json).ok()?;
    let stats = v.get(0)?.get("stats64")?;
    let dropped = |dir: &str| stats.get(dir)?.get("dropped")?.as_u64();
    Some((dropped("tx")?, dropped("rx")?))
}

/// httpd's metrics, from a thread inside network namespace `netns`.
fn scrape(netns: &str, addr: SocketAddr) -> Result<Exposition> {
    let ns = netns.to_string();
    let text = std::thread::spawn(move || -> Result<String> {
        clients::enter(&ns)?;
        let deadline = Instant::now() + SCRAPE_DEADLINE;
        let failed = |f: http::Fail| format!("{}: {}", f.kind.name(), f.detail);
        let mut s = clients::open(addr, SCRAPE_DEADLINE).map_err(failed)?;
        let request = http::get(&addr.ip().to_string(), "/metrics", true, "");
        s.write_all(request.as_bytes())
            .map_err(|e| format!("sending the request: {e}"))?;
        let resp = http::read_response(&mut s, deadline, http::Pace::FULL).map_err(failed)?;
        if resp.status != 200 {
            return Err(format!("status {}", resp.status));
        }
        String::from_utf8(resp.body).map_err(|_| "a body that is not UTF-8".to_string())
    })
    .join()
    .map_err(|_| "the scraping thread panicked".to_string())
    .and_then(|r| r)
    .map_err(|e| format!("scraping http://{addr}/metrics: {e}"))?;
    Exposition::parse(&text).map_err(|e| format!("http://{addr}/metrics: {e}"))
}

/// `VmRSS` of process `pid`, in bytes.
fn resident_bytes(pid: i32) -> Result<u64> {
    let status = fs::read_to_string(format!("/proc/{pid}/status"))
        .map_err(|e| format!("reading /proc/{pid}/status: {e}"))?;
    vm_rss(&status).ok_or_else(|| format!("no VmRSS in /proc/{pid}/status"))
}

fn vm_rss(status: &str) -> Option<u64> {
    let kib: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))?
        .split_whitespace()
        .next()?
        .parse()
        .ok()?;
    kib.checked_mul(1024)
}

/// Writes the report and the samples as `soak-BACKEND-STAMP.md` and `.csv` into `dir`.
fn write_report(
    dir: &Path,
    backend: Backend,
    report: &str,
    series: &Series,
) -> Result<(PathBuf, PathBuf)> {
    fs::create_dir_all(dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
    let secs = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let stem = format!("soak-{}-{}", backend_name(backend), utc_stamp(secs));
    let md = dir.join(format!("{stem}.md"));
    let csv = dir.join(format!("{stem}.csv"));
    for (path, text) in [(&md, report.to_string()), (&csv, series.csv())] {
        fs::write(path, text).map_err(|e| format!("writing {}: {e}", path.display()))?;
    }
    Ok((md, csv))
}

fn backend_name(b: Backend) -> &'static str {
    match b {
        Backend::Tap => "tap",
        Backend::Kernel => "kernel",
    }
}

/// `secs` since the epoch as `YYYYMMDDTHHMMSSZ`.
fn utc_stamp(secs: u64) -> String {
    let (y, m, d) = civil_from_days((secs / 86_400) as i64);
    let s = secs % 86_400;
    format!(
        "{y:04}{m:02}{d:02}T{:02}{:02}{:02}Z",
        s / 3600,
        s / 60 % 60,
        s % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_vm_rss() {
        let status = "Name:\thttpd\nVmPeak:\t  300000 kB\nVmRSS:\t   20808 kB\nThreads:\t3\n";
        assert_eq!(vm_rss(status), Some(20808 * 1024));
        assert_eq!(vm_rss("Name:\thttpd\n"), None);
        assert_eq!(vm_rss("VmRSS:\t -5 kB\n"), None);
    }

    #[test]
    fn reads_link_drops() {
        let json = r#"[{"ifname":"rstap1","stats64":{"rx":{"bytes":9,"dropped":2},
            "tx":{"bytes":7,"dropped":31}}}]"#;
        assert_eq!(parse_link_drops(json), Some((31, 2)));
        assert_eq!(parse_link_drops("[]"), None);
        assert_eq!(parse_link_drops("Device \"x\" does not exist."), None);
        assert_eq!(parse_link_drops(r#"[{"stats64":{"rx":{},"tx":{}}}]"#), None);
    }

    #[test]
    fn stamps_and_file_names() {
        assert_eq!(utc_stamp(0), "19700101T000000Z");
        assert_eq!(utc_stamp(1_700_000_000), "20231114T221320Z");
        let dir = std::env::temp_dir().join(format!("xtask-soak-report-{}", std::process::id()));
        let (md, csv) = write_report(&dir, Backend::Kernel, "# x\n", &Series::default()).unwrap();
        assert!(md
            .file_name()
            .unwrap()
            .to_str()
            .unwrap()
            .starts_with("soak-kernel-"));
        assert_eq!(md.with_extension("csv"), csv);
        assert_eq!(fs::read_to_string(&md).unwrap(), "# x\n");
        assert!(fs::read_to_string(&csv)
            .unwrap()
            .starts_with("seconds,requests,"));
        fs::remove_dir_all(&dir).unwrap();
    }
}
