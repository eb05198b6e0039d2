//! `cargo xtask bench http`: `httpd` on Rusty's stack behind a TAP and on AF_XDP, the
//! same `httpd` on the kernel's sockets and nginx, each on one pinned server core, under
//! the same `wrk` on another core.
//!
//! Setup (needs root): wrk, nginx and ethtool from the distribution (installed with
//! apt-get when missing; without nginx its rows are skipped with a note, without ethtool
//! the AF_XDP row), a temporary directory with the generated page set
//! ([`crate::pages`]), the wrk script and nginx's prefix, and a private network
//! namespace `rusty-bench-http-<pid>` holding a pre-created multi-queue TAP
//! `rhtap<pid>` whose host side is 10.80.0.1/24 and fd00:80::1/64, and a veth pair
//! `rhxdp<pid>` – `rhcli<pid>` whose client end is 10.80.1.1/24 and fd00:80:1::1/64
//! ([`crate::xdp`]). Every run starts a fresh server inside the namespace, pinned to
//! the server core with `taskset`, then `taskset -c CLIENT wrk -t1 -cN -dDs --latency …`
//! inside the namespace, over IPv4 and over IPv6 ([`crate::family`]; `--family`):
//!
//! - Rusty on TAP: `httpd 8080 PAGES 1 tap:rhtap<pid> 10.80.0.2/24,fd00:80::2/64 1`,
//!   wrk → `10.80.0.2:8080` or `[fd00:80::2]:8080` through the namespace's kernel and
//!   the TAP;
//! - Rusty on AF_XDP: `httpd 8080 PAGES 1 xdp:rhxdp<pid> 10.80.1.2/24,fd00:80:1::2/64 1`,
//!   wrk → `10.80.1.2:8080` or `[fd00:80:1::2]:8080` through the namespace's kernel and
//!   the veth pair (left out with `--no-xdp`, skipped with a note when httpd cannot
//!   come up on it: the driver not built in, or the kernel refusing AF_XDP);
//! - kernel sockets: `httpd 8080 PAGES` (one worker: the allowed set is one core; it
//!   listens on `[::]`, both families), wrk → `127.0.0.1:8080` or `[::1]:8080` over
//!   loopback;
//! - nginx: `worker_processes 1`, `access_log off`, `sendfile on`, `open_file_cache`,
//!   `keepalive_requests` 10⁸, master and worker pinned by `taskset`, wrk →
//!   `127.0.0.1:8080` (IPv4 only).
//!
//! Server CPU is utime + stime from `/proc/PID/stat` (for nginx, master plus workers),
//! and machine CPU the busy time of every CPU from `/proc/stat`, both sampled just
//! before wrk starts and just after it exits. Cases rotate their server
//! order round by round; the table shows medians. On every exit path the processes
//! started here are killed by PID, and the namespace, TAP, veth pair and temporary
//! directory are deleted.
//!
//! `--tls` runs the same cases over HTTPS instead, without the AF_XDP row ([`tls`]).
//!
//! This file holds the servers and the loop over rounds; beside it: finding or
//! installing wrk and nginx ([`tools`]), one measured run ([`runs`]) and the table,
//! verdict, charts and block written into `docs/benchmarks.md` ([`report`]). What the preload
//! benchmark shares with it (the cases, nginx's configuration, reading wrk's report) is
//! in [`crate::http_load`].

mod report;
mod runs;
mod tls;
mod tools;

use std::path::Path;

use crate::common::{
    release_bin, rotated, warn_if_busy, Netns, Result, RunArgs, TempDir, QUICK_DURATION,
};
use crate::family::{self, Over, Subnet, Subnets};
use crate::http_load::report::{us, Row};
use crate::http_load::wrk::Sample;
use crate::http_load::{nginx, write_files, Files, CASES};
use crate::pages;
use crate::results::{publish, Block};
use crate::xdp::{self, Goal, Per};
use report::{block_body, table, verdict};
use runs::Ctx;
use tools::Tools;

const PORT: u16 = 8080;
/// The TAP's subnets: its host side and Rusty.
const TAP: Subnets = Subnets {
    v4: Subnet {
        kernel_cidr: "10.80.0.1/24",
        rusty: "10.80.0.2",
    },
    v6: Subnet {
        kernel_cidr: "fd00:80::1/64",
        rusty: "fd00:80::2",
    },
};
/// The AF_XDP row's veth pair: `rhxdp<pid>` (Rusty's end) and `rhcli<pid>`.
const XDP: xdp::Plan = xdp::Plan {
    prefix: "rh",
    client_cidr: "10.80.1.1/24",
    stack_ip: "10.80.1.2",
    ipv6: Some(Subnet {
        kernel_cidr: "fd00:80:1::1/64",
        rusty: "fd00:80:1::2",
    }),
    queues: 1,
};
/// The marker lines of this benchmark's block in `docs/benchmarks.md`.
const BLOCK: Block = Block {
    start: "<!-- bench-http:start -->",
    end: "<!-- bench-http:end -->",
};
/// The goal for Rusty on TAP against the kernel-backend httpd, per server core.
const GOAL: f64 = 3.0;
/// The goals for Rusty on AF_XDP against the kernel-backend httpd.
const XDP_GOALS: [Goal; 3] = [
    Goal::new(CASES[0].label, Per::ServerCpu, 3.0),
    Goal::new(CASES[0].label, Per::MachineCpu, 2.0),
    Goal::new(CASES[2].label, Per::ServerCpu, 1.5),
];

#[derive(Debug, Clone, clap::Args)]
pub(crate) struct Options {
    #[command(flatten)]
    pub run: RunArgs,
    /// wrk's connections (`-c`), all on one wrk thread.
    #[arg(long, default_value_t = 64)]
    pub connections: usize,
    /// Leave nginx out.
    #[arg(long)]
    pub no_nginx: bool,
    /// Do not apt-get install missing wrk/nginx/ethtool; fail (wrk) or skip (nginx, the
    /// AF_XDP row) instead.
    #[arg(long)]
    pub no_install: bool,
    /// HTTPS instead: httpd on Rusty (TAP), httpd on kernel sockets and nginx, all with
    /// the same certificate, TLS 1.3 and cipher suite, and no session resumption; its
    /// own table (no AF_XDP row).
    #[arg(long)]
    pub tls: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Server {
    Tap,
    Xdp,
    Kernel,
    Nginx,
}

impl Row for Server {
    fn label(self) -> String {
        match self {
            Server::Tap => "httpd, Rusty on TAP",
            Server::Xdp => "httpd, Rusty on AF_XDP",
            Server::Kernel => "httpd, kernel sockets",
            Server::Nginx => "nginx, 1 worker",
        }
        .into()
    }

    fn short(self) -> String {
        match self {
            Server::Tap => "TAP",
            Server::Xdp => "XDP",
            Server::Kernel => "kernel httpd",
            Server::Nginx => "nginx",
        }
        .into()
    }
}

/// Every round of every case on every row, rotating which row goes first, into
/// `samples` (one list per case), each run reported on stderr.
fn measure(
    ctx: &Ctx<'_>,
    rows: &[Over<Server>],
    samples: &mut [Vec<(Over<Server>, Sample)>],
) -> Result<()> {
    let rounds = ctx.opts.run.load.rounds;
    let total = rounds * CASES.len() * rows.len();
    let mut n = 0;
    for round in 0..rounds {
        for (ci, case) in CASES.iter().enumerate() {
            for server in rotated(rows, round + ci) {
                n += 1;
                let s = ctx.run_one(*case, server, n)?;
                eprintln!(
                    "  [{n}/{total}] round {} {:<6} {:<28} {:>9.0} req/s {:>9.2} MB/s \
                     CPU µs/req server {:.2} machine {:.2}{}{}{}",
                    round + 1,
                    case.tag,
                    server.label(),
                    s.req_per_s,
                    s.mb_per_s,
                    s.server_us(),
                    s.machine_us(),
                    s.latency_us
                        .map(|(a, b)| format!(", p50/p99 {} / {}", us(a), us(b)))
                        .unwrap_or_default(),
                    if s.socket_errors > 0 {
                        format!(", {} socket errors", s.socket_errors)
                    } else {
                        String::new()
                    },
                    s.handshakes
                        .map(|h| format!(
                            ", {} TLS handshakes ({} resumed)",
                            h.completed, h.resumed
                        ))
                        .unwrap_or_default()
                );
                samples[ci].push((server, s));
            }
        }
    }
    Ok(())
}

/// `cargo xtask gen-pages DIR`.
pub(crate) fn gen_pages(dir: &Path) -> Result<()> {
    let set = pages::write_pages(dir)?;
    println!("{}: {}", dir.display(), set.summary());
    Ok(())
}

/// The private namespace `<name>-<pid>` with the TAP `rhtap<pid>`, its host side on
/// both families' subnets of [`TAP`].
fn tap_namespace(name: &str, pid: u32) -> Result<Netns> {
    let net = Netns::create(
        format!("{name}-{pid}"),
        format!("rhtap{pid}"),
        TAP.v4.kernel_cidr,
    )?;
    net.add_address(&net.tap, TAP.v6.kernel_cidr)?;
    // `Connection: close` opens a connection per request: give wrk the whole port range
    // and let it reuse its own TIME-WAIT ports (both sysctls are per namespace, and
    // apply to IPv6 too).
    net.sysctl("net.ipv4.ip_local_port_range", "1024 65535")?;
    net.sysctl("net.ipv4.tcp_tw_reuse", "1")?;
    Ok(net)
}

/// The servers measured on kernel sockets and TAP: nginx too when it was found.
fn servers(tools: &Tools) -> Vec<Server> {
    let mut servers = vec![Server::Tap, Server::Kernel];
    if tools.nginx.is_some() {
        servers.push(Server::Nginx);
    }
    servers
}

pub(crate) fn run(opts: &Options) -> Result<()> {
    let opts = &Options {
        run: opts.run.effective(QUICK_DURATION),
        ..opts.clone()
    };
    if opts.run.load.duration == 0 || opts.run.load.rounds == 0 || opts.connections == 0 {
        return Err("--duration, --rounds and --connections must be at least 1".into());
    }
    if opts.tls {
        return tls::run(opts);
    }
    let (interrupted, root) = opts.run.host.prepare("bench http", &["rusty-httpd"])?;
    warn_if_busy("bench http");
    let httpd = release_bin(&root, "httpd")?;

    let pid = std::process::id();
    let tmp = TempDir::new(&format!("rusty-bench-http-{pid}"))?;
    let tools = Tools::find_or_install(opts, tmp.path(), &interrupted)?;
    let Files {
        set,
        pages: page_dir,
        script,
        logs,
    } = write_files(tmp.path(), "bench http")?;
    let nginx_conf = match &tools.nginx {
        Some(_) => Some(nginx::write_nginx_conf(
            tmp.path(),
            "nginx",
            &page_dir,
            PORT,
            1,
            None,
        )?),
        None => None,
    };

    let mut net = tap_namespace("rusty-bench-http", pid)?;
    let xdp_link = xdp::setup(
        &opts.run,
        opts.no_install,
        &mut net,
        &XDP,
        &tmp.path().join("ethtool.log"),
        &interrupted,
    )?;

    let mut servers = servers(&tools);
    let mut ctx = Ctx {
        opts,
        httpd,
        wrk: tools.wrk.clone(),
        nginx: tools.nginx.clone(),
        nginx_conf,
        pages: page_dir,
        script,
        net: &net,
        xdp: xdp_link.as_ref().ok(),
        logs: &logs,
        interrupted: &interrupted,
        port: PORT,
        tls: None,
    };
    let xdp_outcome = match &xdp_link {
        Ok(_) => match ctx.xdp_preflight() {
            Ok(outcome) => outcome,
            Err(e) => return Err(tmp.keep_for(e)),
        },
        Err(why) => Err(why.clone()),
    };
    if xdp_outcome.is_ok() {
        servers.insert(1, Server::Xdp);
    } else {
        ctx.xdp = None;
    }
    xdp::announce("bench http", &xdp_outcome);
    let rows = family::rows(&servers, &opts.run.family.list(), |s| s == Server::Nginx);

    eprintln!(
        "bench http: {} runs of {} s, {} connections (server on CPU {}, wrk on CPU {}, \
         namespace {})",
        opts.run.load.rounds * CASES.len() * rows.len(),
        opts.run.load.duration,
        opts.connections,
        opts.run.host.server_cpu,
        opts.run.host.client_cpu,
        net.name
    );
    let mut samples: Vec<Vec<(Over<Server>, Sample)>> = vec![Vec::new(); CASES.len()];
    let result = measure(&ctx, &rows, &mut samples);
    drop(net);
    tmp.finish(result, opts.run.host.keep_logs, "bench http")?;

    let table = table(&samples, &rows);
    let xdp_skipped = xdp_outcome.as_ref().err().map(String::as_str);
    let verdict = verdict(&samples, xdp_skipped, opts.run.family);
    println!("{table}\n{verdict}");
    let charts = report::charts("http", "HTTP", &samples, &rows)?;
    publish(
        &root,
        "bench http",
        opts.run.host.no_docs,
        &charts,
        BLOCK,
        |charts| block_body(opts, &set, &tools, &xdp_outcome, charts, &table, &verdict),
    )
}
