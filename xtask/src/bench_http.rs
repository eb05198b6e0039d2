//! `cargo xtask bench http`: `httpd` on Rusty's stack behind a TAP, the same `httpd` on
//! the kernel's sockets and nginx, each on one pinned server core, under the same `wrk`
//! on another core.
//!
//! Setup (needs root): wrk and nginx from the distribution (installed with apt-get when
//! missing; without nginx its rows are skipped with a note), a temporary directory with
//! the generated page set ([`crate::pages`]), the wrk script and nginx's prefix, and a
//! private network namespace `rusty-bench-http-<pid>` holding a pre-created multi-queue
//! TAP `rhtap<pid>` whose host side is 10.80.0.1/24. Every run starts a fresh server
//! inside the namespace, pinned to the server core with `taskset`, then
//! `taskset -c CLIENT wrk -t1 -cN -dDs --latency …` inside the namespace:
//!
//! - Rusty on TAP: `httpd 8080 PAGES 1 tap:rhtap<pid> 10.80.0.2/24 1`, wrk →
//!   10.80.0.2:8080 through the namespace's kernel and the TAP;
//! - kernel sockets: `httpd 8080 PAGES` (one worker: the allowed set is one core), wrk →
//!   127.0.0.1:8080 over loopback;
//! - nginx: `worker_processes 1`, `access_log off`, `sendfile on`, `open_file_cache`,
//!   `keepalive_requests` 10⁸, master and worker pinned by `taskset`, wrk → 127.0.0.1:8080.
//!
//! Server CPU is utime + stime from `/proc/PID/stat` (for nginx, master plus workers),
//! sampled just before wrk starts and just after it exits. Cases rotate their server
//! order round by round; the table shows medians. On every exit path the processes
//! started here are killed by PID, and the namespace, TAP and temporary directory are
//! deleted.

use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::AtomicBool;
use std::thread;
use std::time::{Duration, Instant};

use crate::common::{
    build, check_cpus, check_interrupted, children_of, command_line, find_program, interrupt_flag,
    listening, machine, median, process_cpu_seconds, release_bin, require_root, tail, thousands,
    utc_date, workspace_root, write_readme, Netns, Proc, Result, RunArgs, TempDir,
};
use crate::pages::{self, PAGES, SMALL_PAGE};

const PORT: u16 = 8080;
const HOST_CIDR: &str = "10.80.0.1/24";
const STACK_IP: &str = "10.80.0.2";
const PREFIX: u8 = 24;
const README_START: &str = "<!-- bench-http:start -->";
const README_END: &str = "<!-- bench-http:end -->";
/// The goal for Rusty on TAP against the kernel-backend httpd, per server core.
const GOAL: f64 = 3.0;

#[derive(Debug, Clone, clap::Args)]
pub struct Options {
    #[command(flatten)]
    pub run: RunArgs,
    /// wrk's connections (`-c`), all on one wrk thread.
    #[arg(long, default_value_t = 64)]
    pub connections: usize,
    /// Leave nginx out.
    #[arg(long)]
    pub no_nginx: bool,
    /// Do not apt-get install missing wrk/nginx; fail (wrk) or skip (nginx) instead.
    #[arg(long)]
    pub no_install: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Load {
    Small,
    SmallClose,
    Random,
}

#[derive(Debug, Clone, Copy)]
struct Case {
    label: &'static str,
    tag: &'static str,
    load: Load,
}

const CASES: [Case; 3] = [
    Case {
        label: "64 B, keep-alive",
        tag: "small",
        load: Load::Small,
    },
    Case {
        label: "64 B, `Connection: close`",
        tag: "close",
        load: Load::SmallClose,
    },
    Case {
        label: "random pages, keep-alive",
        tag: "pages",
        load: Load::Random,
    },
];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Server {
    Tap,
    Kernel,
    Nginx,
}

impl Server {
    fn label(self) -> &'static str {
        match self {
            Server::Tap => "httpd, Rusty on TAP",
            Server::Kernel => "httpd, kernel sockets",
            Server::Nginx => "nginx, 1 worker",
        }
    }
}

/// One wrk run.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
struct Sample {
    requests: u64,
    req_per_s: f64,
    mb_per_s: f64,
    /// p50 and p99 in microseconds.
    latency_us: Option<(f64, f64)>,
    socket_errors: u64,
    non_2xx: u64,
    server_cpu_s: f64,
    /// Wall-clock seconds of wrk's run (over which `server_cpu_s` was taken).
    wall_s: f64,
}

impl Sample {
    fn cpu_per_100k(&self) -> f64 {
        if self.requests == 0 {
            f64::NAN
        } else {
            self.server_cpu_s / (self.requests as f64 / 1e5)
        }
    }

    /// How busy the server's core was: its CPU time over wall time, in percent.
    fn busy_percent(&self) -> f64 {
        if self.wall_s > 0.0 {
            100.0 * self.server_cpu_s / self.wall_s
        } else {
            f64::NAN
        }
    }
}

/// `cargo xtask gen-pages DIR`.
pub fn gen_pages(dir: &Path) -> Result<()> {
    let set = pages::write_pages(dir)?;
    println!("{}: {}", dir.display(), set.summary());
    Ok(())
}

pub fn run(opts: &Options) -> Result<()> {
    if opts.run.duration == 0 || opts.run.rounds == 0 || opts.connections == 0 {
        return Err("--duration, --rounds and --connections must be at least 1".into());
    }
    require_root("bench http")?;
    check_cpus(opts.run.server_cpu, opts.run.client_cpu)?;
    let interrupted = interrupt_flag()?;

    let root = workspace_root();
    if !opts.run.no_build {
        build(&root, "rusty-httpd")?;
    }
    warn_if_busy();
    let httpd = release_bin(&root, "httpd")?;

    let pid = std::process::id();
    let tmp = TempDir::new(&format!("rusty-bench-http-{pid}"))?;
    let tools = Tools::find_or_install(opts, tmp.path(), &interrupted)?;
    fs::set_permissions(
        tmp.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .map_err(|e| format!("chmod {}: {e}", tmp.path().display()))?;
    let page_dir = tmp.path().join("pages");
    let set = pages::write_pages(&page_dir)?;
    eprintln!("bench http: {}", set.summary());
    let script = tmp.path().join("random-pages.lua");
    fs::write(&script, pages::wrk_script())
        .map_err(|e| format!("writing {}: {e}", script.display()))?;
    let logs = tmp.path().join("logs");
    fs::create_dir_all(&logs).map_err(|e| format!("creating {}: {e}", logs.display()))?;
    let nginx_conf = match &tools.nginx {
        Some(_) => Some(write_nginx_conf(tmp.path(), &page_dir)?),
        None => None,
    };

    let net = Netns::create(
        format!("rusty-bench-http-{pid}"),
        format!("rhtap{pid}"),
        HOST_CIDR,
    )?;
    // `Connection: close` opens a connection per request: give wrk the whole port range
    // and let it reuse its own TIME-WAIT ports (both sysctls are per namespace).
    net.sysctl("net.ipv4.ip_local_port_range", "1024 65535")?;
    net.sysctl("net.ipv4.tcp_tw_reuse", "1")?;

    let mut servers = vec![Server::Tap, Server::Kernel];
    if tools.nginx.is_some() {
        servers.push(Server::Nginx);
    }
    let ctx = Ctx {
        opts,
        httpd,
        wrk: tools.wrk.clone(),
        nginx: tools.nginx.clone(),
        nginx_conf,
        pages: page_dir,
        script,
        net: &net,
        logs: &logs,
        interrupted: &interrupted,
    };

    let total = opts.run.rounds * CASES.len() * servers.len();
    eprintln!(
        "bench http: {total} runs of {} s, {} connections (server on CPU {}, wrk on CPU {}, \
         namespace {})",
        opts.run.duration, opts.connections, opts.run.server_cpu, opts.run.client_cpu, net.name
    );
    let mut samples: Vec<Vec<(Server, Sample)>> = vec![Vec::new(); CASES.len()];
    let mut n = 0;
    let result: Result<()> = (|| {
        for round in 0..opts.run.rounds {
            for (ci, case) in CASES.iter().enumerate() {
                let mut order = servers.clone();
                order.rotate_left((round + ci) % servers.len());
                for server in order {
                    n += 1;
                    let s = ctx.run_one(*case, server, n)?;
                    eprintln!(
                        "  [{n}/{total}] round {} {:<10} {:<22} {:>9.0} req/s {:>9.2} MB/s \
                         server CPU {:.2} s ({:.3} s/100k req){}{}",
                        round + 1,
                        case.tag,
                        server.label(),
                        s.req_per_s,
                        s.mb_per_s,
                        s.server_cpu_s,
                        s.cpu_per_100k(),
                        s.latency_us
                            .map(|(a, b)| format!(", p50/p99 {} / {}", us(a), us(b)))
                            .unwrap_or_default(),
                        if s.socket_errors > 0 {
                            format!(", {} socket errors", s.socket_errors)
                        } else {
                            String::new()
                        }
                    );
                    samples[ci].push((server, s));
                }
            }
        }
        Ok(())
    })();
    drop(net);
    if let Err(e) = result {
        let kept = tmp.keep();
        return Err(format!(
            "{e}\n(logs kept in {})",
            kept.join("logs").display()
        ));
    }
    drop(tmp);

    let table = table(&samples, &servers);
    let verdict = verdict(&samples);
    println!("{table}\n{verdict}");
    if !opts.run.no_readme {
        let body = readme_body(opts, &set, &tools, &table, &verdict);
        let path = write_readme(&root, README_START, README_END, &body)?;
        eprintln!("bench http: table written to {}", path.display());
    }
    Ok(())
}

/// Other work on the machine skews every number here: say so when the load is visible.
fn warn_if_busy() {
    let load = fs::read_to_string("/proc/loadavg").unwrap_or_default();
    if let Some(one) = load
        .split_whitespace()
        .next()
        .and_then(|l| l.parse::<f64>().ok())
    {
        if one > 0.5 {
            eprintln!(
                "bench http: warning: the 1-minute load average is {one:.2}; other processes \
                 will skew the results"
            );
        }
    }
}

/// wrk and (maybe) nginx, and why nginx is missing.
struct Tools {
    wrk: PathBuf,
    nginx: Option<PathBuf>,
    nginx_note: Option<String>,
    nginx_version: Option<String>,
    wrk_version: Option<String>,
}

impl Tools {
    fn find_or_install(opts: &Options, tmp: &Path, interrupted: &AtomicBool) -> Result<Tools> {
        let mut wrk = find_program("wrk");
        let mut nginx = if opts.no_nginx {
            None
        } else {
            find_program("nginx")
        };
        let mut nginx_note = opts.no_nginx.then(|| "left out (--no-nginx)".to_string());
        let mut missing = Vec::new();
        if wrk.is_none() {
            missing.push("wrk");
        }
        if nginx.is_none() && !opts.no_nginx {
            missing.push("nginx");
        }
        if !missing.is_empty() && opts.no_install {
            nginx_note = nginx_note.or(Some("not installed (--no-install)".into()));
        } else if !missing.is_empty() {
            eprintln!(
                "bench http: installing {} with apt-get (Debian packages)",
                missing.join(" and ")
            );
            let log = tmp.join("apt-get.log");
            let mut installed = apt_get(&["update"], &log, interrupted);
            // One package at a time: wrk is required, nginx only adds rows.
            for pkg in &missing {
                installed = installed.and_then(|()| {
                    apt_get(
                        &["install", "-y", "--no-install-recommends", pkg],
                        &log,
                        interrupted,
                    )
                });
                if let Err(e) = &installed {
                    eprintln!("bench http: installing {pkg} failed: {e}");
                    if *pkg == "nginx" {
                        nginx_note = Some(format!("could not be installed with apt-get ({e})"));
                    }
                }
                check_interrupted(interrupted)?;
            }
            wrk = find_program("wrk");
            if !opts.no_nginx {
                nginx = find_program("nginx");
            }
        }
        let wrk = wrk.ok_or_else(|| {
            "wrk is not installed and could not be installed; install it (Debian: `apt-get \
             install wrk`) and run again"
                .to_string()
        })?;
        if nginx.is_none() && nginx_note.is_none() {
            nginx_note = Some("not found after installing".into());
        }
        if let Some(n) = &nginx_note {
            eprintln!("bench http: nginx {n}; its rows are skipped");
        }
        let nginx_version = nginx.as_ref().and_then(|n| version(n, &["-v"]));
        let wrk_version = version(&wrk, &["-v"]);
        Ok(Tools {
            wrk,
            nginx,
            nginx_note,
            nginx_version,
            wrk_version,
        })
    }
}

/// `apt-get ARGS` as root, non-interactive, within 10 minutes.
fn apt_get(args: &[&str], log: &Path, interrupted: &AtomicBool) -> Result<()> {
    let mut cmd = Command::new("apt-get");
    cmd.args(args).env("DEBIAN_FRONTEND", "noninteractive");
    let mut p = Proc::spawn("apt-get", cmd, log)?;
    match p.wait_for(Duration::from_secs(600), interrupted)? {
        Some(st) if st.success() => Ok(()),
        Some(st) => Err(format!(
            "`apt-get {}` failed ({st}):\n{}",
            args.join(" "),
            tail(log, 10)
        )),
        None => Err(format!("`apt-get {}` took over 10 minutes", args.join(" "))),
    }
}

/// The first line a program prints for `args` (wrk and nginx print to stderr).
fn version(program: &Path, args: &[&str]) -> Option<String> {
    let out = Command::new(program).args(args).output().ok()?;
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stderr),
        String::from_utf8_lossy(&out.stdout)
    );
    let line = text.lines().next()?.trim();
    let line = line.strip_prefix("nginx version: ").unwrap_or(line);
    // wrk: "wrk 4.1.0 [epoll] Copyright (C) 2012 Will Glozer"
    let line = line.split(" Copyright").next().unwrap_or(line);
    (!line.is_empty()).then(|| line.to_string())
}

/// nginx's configuration and prefix under `tmp/nginx`; returns the configuration file.
fn write_nginx_conf(tmp: &Path, pages: &Path) -> Result<PathBuf> {
    let prefix = tmp.join("nginx");
    fs::create_dir_all(prefix.join("logs")).map_err(|e| format!("creating nginx dirs: {e}"))?;
    let conf = prefix.join("nginx.conf");
    fs::write(&conf, nginx_conf(&prefix, pages, &nobody_group()))
        .map_err(|e| format!("writing {}: {e}", conf.display()))?;
    Ok(conf)
}

/// Debian's unprivileged group is `nogroup`; elsewhere it is often `nobody`.
fn nobody_group() -> String {
    let groups = fs::read_to_string("/etc/group").unwrap_or_default();
    if groups.lines().any(|l| l.starts_with("nogroup:")) {
        "nogroup".into()
    } else {
        "nobody".into()
    }
}

fn nginx_conf(prefix: &Path, pages: &Path, group: &str) -> String {
    let p = prefix.display();
    format!(
        "# Generated by `cargo xtask bench http`.\n\
         user nobody {group};\n\
         worker_processes 1;\n\
         daemon off;\n\
         master_process on;\n\
         pid {p}/nginx.pid;\n\
         error_log {p}/logs/error.log warn;\n\
         worker_rlimit_nofile 65536;\n\
         events {{\n\
         \x20   worker_connections 16384;\n\
         \x20   use epoll;\n\
         }}\n\
         http {{\n\
         \x20   access_log off;\n\
         \x20   sendfile on;\n\
         \x20   tcp_nopush on;\n\
         \x20   tcp_nodelay on;\n\
         \x20   keepalive_requests 100000000;\n\
         \x20   keepalive_timeout 65s;\n\
         \x20   open_file_cache max=1024 inactive=60s;\n\
         \x20   open_file_cache_valid 60s;\n\
         \x20   types {{ text/html html; }}\n\
         \x20   default_type application/octet-stream;\n\
         \x20   client_body_temp_path {p}/client_body;\n\
         \x20   proxy_temp_path {p}/proxy;\n\
         \x20   fastcgi_temp_path {p}/fastcgi;\n\
         \x20   uwsgi_temp_path {p}/uwsgi;\n\
         \x20   scgi_temp_path {p}/scgi;\n\
         \x20   server {{\n\
         \x20       listen {PORT} backlog=4096;\n\
         \x20       server_name _;\n\
         \x20       root {pages};\n\
         \x20   }}\n\
         }}\n",
        pages = pages.display()
    )
}

struct Ctx<'a> {
    opts: &'a Options,
    httpd: PathBuf,
    wrk: PathBuf,
    nginx: Option<PathBuf>,
    nginx_conf: Option<PathBuf>,
    pages: PathBuf,
    script: PathBuf,
    net: &'a Netns,
    logs: &'a Path,
    interrupted: &'a AtomicBool,
}

/// A running server: the process we started and, for nginx, its workers.
struct Running {
    proc: Proc,
    server: Server,
    workers: Vec<i32>,
}

impl Running {
    fn pids(&self) -> Vec<i32> {
        std::iter::once(self.proc.pid())
            .chain(self.workers.iter().copied())
            .collect()
    }

    fn cpu_seconds(&self) -> Result<f64> {
        self.pids().into_iter().map(process_cpu_seconds).sum()
    }

    fn stop(&mut self) {
        // nginx: SIGTERM is its fast shutdown (workers too); httpd: SIGINT, then --grace.
        let sig = if self.server == Server::Nginx {
            libc::SIGTERM
        } else {
            libc::SIGINT
        };
        self.proc.stop_with(sig, Duration::from_secs(5));
        // A worker left behind by a killed master is reparented; kill it by PID, after
        // checking that the PID still names an nginx process.
        for &w in &self.workers {
            let comm = fs::read_to_string(format!("/proc/{w}/comm")).unwrap_or_default();
            if comm.trim() == "nginx" {
                // SAFETY: kill has no memory preconditions; the PID was checked above.
                unsafe { libc::kill(w, libc::SIGKILL) };
            }
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.stop();
    }
}

impl Ctx<'_> {
    fn start(&self, server: Server, log: &Path) -> Result<Running> {
        let mut cmd;
        match server {
            Server::Tap | Server::Kernel => {
                cmd = self.net.exec_pinned(self.opts.run.server_cpu, &self.httpd);
                cmd.arg(PORT.to_string()).arg(&self.pages);
                if server == Server::Tap {
                    cmd.args(["1", &format!("tap:{}", self.net.tap)])
                        .arg(format!("{STACK_IP}/{PREFIX}"))
                        .arg("1");
                }
                cmd.args(["--grace", "1", "--log-level", "warn"]);
                if let Some(us) = self.opts.run.spin_us {
                    cmd.arg("--spin-us").arg(us.to_string());
                }
            }
            Server::Nginx => {
                let (Some(nginx), Some(conf)) = (&self.nginx, &self.nginx_conf) else {
                    return Err("nginx is not available".into());
                };
                let prefix = conf.parent().unwrap_or(Path::new("/"));
                cmd = self.net.exec_pinned(self.opts.run.server_cpu, nginx);
                cmd.args(["-e", "stderr", "-p"])
                    .arg(prefix)
                    .arg("-c")
                    .arg(conf);
            }
        }
        let proc = Proc::spawn("server", cmd, log)?;
        let mut running = Running {
            proc,
            server,
            workers: Vec::new(),
        };
        self.wait_ready(&mut running, log)?;
        Ok(running)
    }

    /// Until the server accepts: a listening socket on the port and, for nginx, a worker
    /// (kernel), or the TAP's carrier, which comes up once a queue is attached (TAP).
    fn wait_ready(&self, r: &mut Running, log: &Path) -> Result<()> {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            check_interrupted(self.interrupted)?;
            if let Some(st) = r.proc.try_status()? {
                return Err(format!(
                    "{} exited at start ({st}):\n{}",
                    r.server.label(),
                    tail(log, 20)
                ));
            }
            let ready = match r.server {
                Server::Tap => self.net.tap_has_carrier(),
                Server::Kernel => listening(r.proc.pid(), PORT),
                Server::Nginx => {
                    r.workers = children_of(r.proc.pid());
                    listening(r.proc.pid(), PORT) && !r.workers.is_empty()
                }
            };
            if ready {
                // Let the worker reach its loop (pinning, listener setup).
                thread::sleep(Duration::from_millis(300));
                if r.server == Server::Nginx {
                    r.workers = children_of(r.proc.pid());
                }
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err(format!(
                    "{} was not ready after 10 s:\n{}",
                    r.server.label(),
                    tail(log, 20)
                ));
            }
            thread::sleep(Duration::from_millis(20));
        }
    }

    fn run_one(&self, case: Case, server: Server, n: usize) -> Result<Sample> {
        check_interrupted(self.interrupted)?;
        let tag = format!("{n:02}-{}-{:?}", case.tag, server).to_lowercase();
        let server_log = self.logs.join(format!("{tag}-server.log"));
        let mut running = self.start(server, &server_log)?;

        let host = match server {
            Server::Tap => STACK_IP,
            Server::Kernel | Server::Nginx => "127.0.0.1",
        };
        let mut cmd = self.net.exec_pinned(self.opts.run.client_cpu, &self.wrk);
        cmd.arg("-t1")
            .arg(format!("-c{}", self.opts.connections))
            .arg(format!("-d{}s", self.opts.run.duration))
            .args(["--latency", "--timeout", "5s"]);
        let url = match case.load {
            Load::Small => format!("http://{host}:{PORT}/{SMALL_PAGE}"),
            Load::SmallClose => {
                cmd.args(["-H", "Connection: close"]);
                format!("http://{host}:{PORT}/{SMALL_PAGE}")
            }
            Load::Random => {
                cmd.arg("-s").arg(&self.script);
                format!("http://{host}:{PORT}/")
            }
        };
        cmd.arg(&url);

        let client_log = self.logs.join(format!("{tag}-wrk.log"));
        let cpu_before = running.cpu_seconds()?;
        let started = Instant::now();
        let mut client = Proc::spawn("wrk", cmd, &client_log)?;
        let limit = Duration::from_secs(self.opts.run.duration + 30);
        let status = client.wait_for(limit, self.interrupted)?;
        let cpu_after = running.cpu_seconds();
        let wall_s = started.elapsed().as_secs_f64();
        let server_alive = running.proc.try_status()?.is_none();
        running.stop();

        let out = fs::read_to_string(&client_log).unwrap_or_default();
        let explain = || {
            format!(
                "\n--- wrk output ---\n{}\n--- server log (tail) ---\n{}",
                out.trim_end(),
                tail(&server_log, 20)
            )
        };
        let what = format!("{} on {}", case.label, server.label());
        let status = status.ok_or_else(|| {
            format!(
                "wrk ({what}) did not finish within {} s{}",
                limit.as_secs(),
                explain()
            )
        })?;
        if !status.success() || !server_alive {
            return Err(format!(
                "{what} failed (wrk {status}, server {}){}",
                if server_alive {
                    "alive"
                } else {
                    "exited early"
                },
                explain()
            ));
        }
        let mut s =
            parse_wrk(&out).ok_or_else(|| format!("could not read wrk's numbers{}", explain()))?;
        if s.requests == 0 || s.non_2xx > 0 {
            return Err(format!(
                "{what}: {} requests, {} answered with a non-2xx/3xx status{}",
                s.requests,
                s.non_2xx,
                explain()
            ));
        }
        s.server_cpu_s = cpu_after? - cpu_before;
        s.wall_s = wall_s;
        Ok(s)
    }
}

/// wrk's time ("263.00us", "1.20ms", "2.00s", "1.00m") in microseconds.
fn parse_time_us(s: &str) -> Option<f64> {
    let split = s.find(|c: char| c.is_ascii_alphabetic())?;
    let (num, unit) = s.split_at(split);
    let v: f64 = num.parse().ok()?;
    let scale = match unit {
        "us" => 1.0,
        "ms" => 1e3,
        "s" => 1e6,
        "m" => 60e6,
        "h" => 3600e6,
        _ => return None,
    };
    Some(v * scale)
}

/// wrk's byte count ("30.05MB", "512.00B"; binary units) in bytes.
fn parse_bytes(s: &str) -> Option<f64> {
    let split = s.find(|c: char| c.is_ascii_alphabetic())?;
    let (num, unit) = s.split_at(split);
    let v: f64 = num.parse().ok()?;
    let scale = match unit {
        "B" => 1.0,
        "KB" => 1024.0,
        "MB" => 1024.0 * 1024.0,
        "GB" => 1024.0 * 1024.0 * 1024.0,
        "TB" => 1024.0f64.powi(4),
        _ => return None,
    };
    Some(v * scale)
}

/// Requests, requests/s, MB/s (10⁶ bytes), p50/p99, errors from wrk's report.
fn parse_wrk(out: &str) -> Option<Sample> {
    let mut s = Sample::default();
    let (mut rate, mut count) = (false, false);
    let (mut p50, mut p99) = (None, None);
    for line in out.lines() {
        let l = line.trim();
        let words: Vec<&str> = l.split_whitespace().collect();
        if let Some(v) = l.strip_prefix("Requests/sec:") {
            s.req_per_s = v.trim().parse().ok()?;
            rate = true;
        } else if let Some(v) = l.strip_prefix("Transfer/sec:") {
            s.mb_per_s = parse_bytes(v.trim())? / 1e6;
        } else if words.len() >= 3 && words[1] == "requests" && words[2] == "in" {
            s.requests = words[0].parse().ok()?;
            count = true;
        } else if words.len() == 2 && words[0] == "50%" {
            p50 = parse_time_us(words[1]);
        } else if words.len() == 2 && words[0] == "99%" {
            p99 = parse_time_us(words[1]);
        } else if let Some(v) = l.strip_prefix("Socket errors:") {
            // "connect 0, read 0, write 0, timeout 0"
            s.socket_errors = v
                .split(',')
                .filter_map(|kv| kv.split_whitespace().nth(1)?.parse::<u64>().ok())
                .sum();
        } else if let Some(v) = l.strip_prefix("Non-2xx or 3xx responses:") {
            s.non_2xx = v.trim().parse().ok()?;
        }
    }
    s.latency_us = p50.zip(p99);
    (rate && count).then_some(s)
}

/// Microseconds as wrk-like text.
fn us(v: f64) -> String {
    if v >= 1e6 {
        format!("{:.2} s", v / 1e6)
    } else if v >= 1e3 {
        format!("{:.2} ms", v / 1e3)
    } else {
        format!("{v:.0} µs")
    }
}

/// Median of `f` over `server`'s runs of one case.
fn med(runs: &[(Server, Sample)], server: Server, f: impl Fn(&Sample) -> f64) -> f64 {
    median(
        runs.iter()
            .filter(|(s, _)| *s == server)
            .map(|(_, x)| f(x))
            .collect(),
    )
}

/// Medians per (case, server) and the ratios of Rusty on TAP to the others.
fn table(samples: &[Vec<(Server, Sample)>], servers: &[Server]) -> String {
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
            let p50 = med(runs, server, |x| x.latency_us.map_or(f64::NAN, |l| l.0));
            let p99 = med(runs, server, |x| x.latency_us.map_or(f64::NAN, |l| l.1));
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
                thousands(med(runs, server, |x| x.req_per_s)),
                med(runs, server, |x| x.mb_per_s),
                med(runs, server, Sample::cpu_per_100k),
                med(runs, server, Sample::busy_percent),
            );
        }
        for (other, name) in [(Server::Kernel, "kernel httpd"), (Server::Nginx, "nginx")] {
            if !servers.contains(&other) {
                continue;
            }
            let rate = med(runs, Server::Tap, |x| x.req_per_s) / med(runs, other, |x| x.req_per_s);
            let cpu = med(runs, Server::Tap, Sample::cpu_per_100k)
                / med(runs, other, Sample::cpu_per_100k);
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
fn verdict(samples: &[Vec<(Server, Sample)>]) -> String {
    let mut parts = Vec::new();
    let mut met = 0;
    for (case, runs) in CASES.iter().zip(samples) {
        let rate =
            med(runs, Server::Tap, |x| x.req_per_s) / med(runs, Server::Kernel, |x| x.req_per_s);
        // Requests per server CPU-second: the inverse of the CPU-per-request ratio.
        let eff = med(runs, Server::Kernel, Sample::cpu_per_100k)
            / med(runs, Server::Tap, Sample::cpu_per_100k);
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

fn readme_body(
    opts: &Options,
    set: &pages::PageSet,
    tools: &Tools,
    table: &str,
    verdict: &str,
) -> String {
    let spin = opts
        .run
        .spin_us
        .map_or("the binary's default `--spin-us 200`".to_string(), |us| {
            format!("`--spin-us {us}`")
        });
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
         `{command}` — {date}, {machine}; {versions}.\n\
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
        command = command_line(),
        date = utc_date(),
        machine = machine(),
        rounds = opts.run.rounds,
        d = opts.run.duration,
        scpu = opts.run.server_cpu,
        ccpu = opts.run.client_cpu,
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

    const WRK_OUT: &str = "Running 5s test @ http://127.0.0.1:8080/64b.html\n\
  1 threads and 64 connections\n\
  Thread Stats   Avg      Stdev     Max   +/- Stdev\n\
    Latency   470.39us  102.86us   5.27ms   91.47%\n\
    Req/Sec    68.12k     2.69k   72.01k    76.00%\n\
  Latency Distribution\n\
     50%  457.00us\n\
     75%  497.00us\n\
     90%  556.00us\n\
     99%    1.20ms\n\
  678123 requests in 5.00s, 150.23MB read\n\
  Socket errors: connect 0, read 12, write 0, timeout 3\n\
  Non-2xx or 3xx responses: 2\n\
Requests/sec: 135624.60\n\
Transfer/sec:     30.05MB\n";

    #[test]
    fn reads_wrk_output() {
        let s = parse_wrk(WRK_OUT).unwrap();
        assert_eq!(s.requests, 678_123);
        assert_eq!(s.req_per_s, 135_624.60);
        assert!((s.mb_per_s - 30.05 * 1.048_576).abs() < 1e-9);
        assert_eq!(s.latency_us, Some((457.0, 1200.0)));
        assert_eq!(s.socket_errors, 15);
        assert_eq!(s.non_2xx, 2);
        assert!(parse_wrk("unable to connect to 10.0.0.1:80 Connection refused\n").is_none());
        assert_eq!(parse_time_us("2.00s"), Some(2e6));
        assert_eq!(parse_bytes("512.00B"), Some(512.0));
        assert_eq!(parse_bytes("1.5KB"), Some(1536.0));
    }

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

    #[test]
    fn nginx_config_is_complete() {
        let c = nginx_conf(
            Path::new("/tmp/x/nginx"),
            Path::new("/tmp/x/pages"),
            "nogroup",
        );
        for want in [
            "user nobody nogroup;",
            "worker_processes 1;",
            "daemon off;",
            "access_log off;",
            "sendfile on;",
            "keepalive_requests 100000000;",
            "listen 8080 backlog=4096;",
            "root /tmp/x/pages;",
            "pid /tmp/x/nginx/nginx.pid;",
        ] {
            assert!(c.contains(want), "{want} missing from\n{c}");
        }
        assert_eq!(c.matches('{').count(), c.matches('}').count());
    }
}
