//! `cargo xtask bench preload`: unmodified nginx and redis with their TCP sockets on
//! Rusty through `rusty-run` (`librusty_preload.so`, over a TAP), against the same
//! binaries with the same configuration on the kernel's sockets behind a veth pair.
//!
//! ```text
//!   client namespace rusty-bench-preload-<pid>              server namespace …-<pid>-k
//!  ┌────────────────────────────────────────────────┐      ┌──────────────────────────┐
//!  │ wrk / redis-benchmark ── TAP rptap<pid> ── Rusty │      │                          │
//!  │   (kernel sockets)       10.82.0.1  10.82.0.2   │      │                          │
//!  │                     └── rpcli<pid> 10.82.1.1 ═══╪ veth ╪═ rpsrv<pid> 10.82.1.2   │
//!  │                                                  │      │  nginx / redis (kernel)  │
//!  └────────────────────────────────────────────────┘      └──────────────────────────┘
//! ```
//!
//! Every path goes through a virtual device: the client's kernel writes to the TAP,
//! whose queues the Rusty processes read (one queue per process: QUEUES is nginx's
//! workers + 1 for the master), to a veth pair whose far end carries Rusty's XDP program
//! and AF_XDP sockets (`rusty-run --link 'xdp:NAME 10.82.2.2/24 1'`, or `10.82.3.2/24 2`
//! for two nginx workers: one queue per accepting process), or to the veth whose far end
//! is the kernel server's namespace.
//!
//! Servers, each started fresh for every run inside its namespace and pinned with
//! `taskset` to the server core (both cores for the two-worker rows, which then share
//! them with the client):
//!
//! - nginx with `master_process on`, `worker_processes 1` (and a second row with 2),
//!   `access_log off`, `sendfile on`, `open_file_cache`, `keepalive_requests` 10⁸; on
//!   Rusty as `rusty-run --link 'tap:rptap<pid> 10.82.0.2/24 QUEUES' -- nginx …`;
//! - redis-server without persistence, on Rusty as `rusty-run --link 'tap:… 10.82.0.2/24'
//!   -- redis-server …`.
//!
//! Clients, pinned to the client core in the client namespace: `wrk -t1 -cC -dDs` for
//! the three cases of `bench http` (64 B keep-alive, 64 B `Connection: close`, the
//! random page set), and `redis-benchmark -t set -n N -c 50 -q`, then `-t get` against
//! the same server (so that GET finds the key SET wrote), each measured on its own.
//! Server CPU is utime + stime from `/proc/PID/stat` (nginx: master + workers), machine
//! CPU the busy time of every CPU from `/proc/stat`, both taken just before the client
//! starts and just after it exits; the table shows medians over the rounds. On every
//! exit path the processes started here are killed by PID, and the namespaces, TAP,
//! veth pair and temporary directory are deleted.
//!
//! This file holds the options, the servers and the loop over rounds; beside it: the
//! runs ([`runs`]), redis's command lines and report ([`redis`]), and the table, verdict,
//! charts and results block ([`report`]).

mod redis;
mod report;
mod runs;

use std::fs;
use std::path::PathBuf;

use crate::common::{
    ip, release_bin, rotated, warn_if_busy, HostArgs, LoadArgs, Namespace, Netns, Result, TempDir,
    QUICK_DURATION,
};
use crate::goals::{Goal, Per};
use crate::http_load::nginx::write_nginx_conf;
use crate::http_load::report::Row;
use crate::http_load::tools::{find_or_install, version, Need};
use crate::http_load::wrk::Sample;
use crate::http_load::{write_files, CASES};
use crate::results::{publish, Block};
use crate::xdp;
use runs::Ctx;

const HTTP_PORT: u16 = 8080;
const REDIS_PORT: u16 = 6379;
const HOST_CIDR: &str = "10.82.0.1/24";
const STACK_IP: &str = "10.82.0.2";
const CLIENT_CIDR: &str = "10.82.1.1/24";
const KERNEL_IP: &str = "10.82.1.2";
const PREFIX: u8 = 24;
/// redis-benchmark's connections (`-c`).
const REDIS_CLIENTS: usize = 50;
const BLOCK: Block = Block {
    start: "<!-- bench-preload:start -->",
    end: "<!-- bench-preload:end -->",
};

/// The redis cases: redis-benchmark's test and the label in the table.
const REDIS_TESTS: [(&str, &str); 2] = [("set", "redis SET"), ("get", "redis GET")];

/// The goals for Rusty against the kernel with one nginx worker or one redis process.
const GOALS: [Goal; 5] = [
    Goal::new(CASES[0].label, Per::ServerCpu, 2.0),
    Goal::new(CASES[0].label, Per::MachineCpu, 1.5),
    Goal::new(CASES[2].label, Per::ServerCpu, 1.0),
    Goal::new(REDIS_TESTS[0].1, Per::ServerCpu, 1.5),
    Goal::new(REDIS_TESTS[1].1, Per::ServerCpu, 1.5),
];

#[derive(Debug, Clone, clap::Args)]
pub(crate) struct Options {
    #[command(flatten)]
    pub load: LoadArgs,
    #[command(flatten)]
    pub host: HostArgs,
    /// wrk's connections (`-c`), all on one wrk thread.
    #[arg(long, default_value_t = 64)]
    pub connections: usize,
    /// Requests per redis-benchmark test (`-n`).
    #[arg(long, default_value_t = 200_000)]
    pub redis_requests: u64,
    /// Pass --wait-spin-us to rusty-run (default: the library's own, 0 µs).
    #[arg(long, value_name = "MICROSECONDS")]
    pub wait_spin_us: Option<u64>,
    /// Do not apt-get install missing wrk/nginx/redis/ethtool; fail instead.
    #[arg(long)]
    pub no_install: bool,
    /// Leave out the rows of Rusty on AF_XDP.
    #[arg(long)]
    pub no_xdp: bool,
    /// After the measured runs, profile the nginx worker (one worker, on the TAP and on
    /// AF_XDP) in the 64 B cases, keep-alive and `Connection: close`, with `perf record
    /// -e cpu-clock -g`, and keep the reports with the logs (implies --keep-logs).
    #[arg(long)]
    pub perf: bool,
}

impl Options {
    /// The options with `--perf` and `--quick` applied: with `--quick`, one round of 2 s
    /// per case and at most 20,000 requests per redis test, docs/benchmarks.md left
    /// alone.
    fn effective(&self) -> Options {
        let mut o = self.clone();
        if o.perf {
            o.host.keep_logs = true;
        }
        if o.load.quick {
            o.redis_requests = o.redis_requests.min(QUICK_REDIS_REQUESTS);
        }
        o.load.apply_quick(&mut o.host, QUICK_DURATION);
        o
    }

    /// How long nginx sits idle for the idle measurement.
    fn idle_seconds(&self) -> u64 {
        if self.load.quick {
            QUICK_IDLE_SECONDS
        } else {
            IDLE_SECONDS
        }
    }
}

/// Which stack a server's sockets are on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stack {
    /// Rusty through rusty-run, on the TAP.
    Rusty,
    /// Rusty through rusty-run, on AF_XDP: a veth pair with a queue per process that
    /// accepts (nginx's workers, redis).
    Xdp,
    /// The kernel's, behind the veth pair.
    Kernel,
}

/// Which program serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum App {
    /// nginx with this many workers.
    Nginx(usize),
    Redis,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Server {
    app: App,
    stack: Stack,
}

impl Server {
    const fn new(app: App, stack: Stack) -> Server {
        Server { app, stack }
    }

    /// Processes of the program that each run a stack on the TAP: nginx's workers and
    /// master.
    fn queues(self) -> usize {
        match self.app {
            App::Nginx(workers) => workers + 1,
            App::Redis => 1,
        }
    }

    /// Processes of the program that accept, one AF_XDP queue each: the master hands
    /// its queue to a worker (see docs/preload.md).
    fn accepting(self) -> usize {
        match self.app {
            App::Nginx(workers) => workers,
            App::Redis => 1,
        }
    }

    fn program(self) -> &'static str {
        match self.app {
            App::Nginx(_) => "nginx",
            App::Redis => "redis",
        }
    }

    /// The program as a chart's panel names it: "nginx, 2 workers", "redis".
    fn program_text(self) -> String {
        format!("{}{}", self.program(), self.workers_text())
    }

    /// The stack as a row names it.
    fn on(self) -> &'static str {
        match self.stack {
            Stack::Rusty => "Rusty (rusty-run, TAP)",
            Stack::Xdp => "Rusty (rusty-run, AF_XDP)",
            Stack::Kernel => "kernel sockets (veth)",
        }
    }

    fn workers_text(self) -> String {
        match self.app {
            App::Nginx(1) => ", 1 worker".into(),
            App::Nginx(n) => format!(", {n} workers"),
            App::Redis => String::new(),
        }
    }

    fn stack_name(self) -> &'static str {
        match self.stack {
            Stack::Rusty => "Rusty",
            Stack::Xdp => "Rusty XDP",
            Stack::Kernel => "kernel",
        }
    }

    /// A name for log files.
    fn tag(self) -> String {
        let n = match self.app {
            App::Nginx(n) => n,
            App::Redis => 1,
        };
        format!("{}{n}-{}", self.program(), self.stack_name())
            .to_lowercase()
            .replace(' ', "-")
    }
}

impl Row for Server {
    fn label(self) -> String {
        format!("{}, {}", self.program_text(), self.on())
    }

    fn short(self) -> String {
        format!("{}{}", self.stack_name(), self.workers_text())
    }
}

const NGINX_SERVERS: [Server; 6] = [
    Server::new(App::Nginx(1), Stack::Rusty),
    Server::new(App::Nginx(1), Stack::Xdp),
    Server::new(App::Nginx(1), Stack::Kernel),
    Server::new(App::Nginx(2), Stack::Rusty),
    Server::new(App::Nginx(2), Stack::Xdp),
    Server::new(App::Nginx(2), Stack::Kernel),
];
const REDIS_SERVERS: [Server; 3] = [
    Server::new(App::Redis, Stack::Rusty),
    Server::new(App::Redis, Stack::Xdp),
    Server::new(App::Redis, Stack::Kernel),
];
/// The pairs compared in the table: Rusty over the kernel with the same program, on
/// the TAP first (the goals are the TAP's), then on AF_XDP.
const PAIRS: [(Server, Server); 6] = [
    (NGINX_SERVERS[0], NGINX_SERVERS[2]),
    (NGINX_SERVERS[3], NGINX_SERVERS[5]),
    (REDIS_SERVERS[0], REDIS_SERVERS[2]),
    (NGINX_SERVERS[1], NGINX_SERVERS[2]),
    (NGINX_SERVERS[4], NGINX_SERVERS[5]),
    (REDIS_SERVERS[1], REDIS_SERVERS[2]),
];

/// Where the AF_XDP rows' veth pairs go: one with a queue pair, one with two.
const XDP_PLANS: [xdp::Plan; 2] = [
    xdp::Plan {
        prefix: "pa",
        client_cidr: "10.82.2.1/24",
        stack_ip: "10.82.2.2",
        ipv6: None,
        queues: 1,
    },
    xdp::Plan {
        prefix: "pb",
        client_cidr: "10.82.3.1/24",
        stack_ip: "10.82.3.2",
        ipv6: None,
        queues: 2,
    },
];

/// The programs the benchmark drives and their versions.
struct Tools {
    wrk: PathBuf,
    nginx: PathBuf,
    redis_server: PathBuf,
    redis_benchmark: PathBuf,
    versions: String,
}

impl Tools {
    fn find_or_install(
        opts: &Options,
        log: &std::path::Path,
        interrupted: &std::sync::atomic::AtomicBool,
    ) -> Result<Tools> {
        let needs = [
            Need {
                program: "wrk",
                package: "wrk",
            },
            Need {
                program: "nginx",
                package: "nginx",
            },
            Need {
                program: "redis-server",
                package: "redis-server",
            },
            Need {
                program: "redis-benchmark",
                package: "redis-tools",
            },
        ];
        let found = find_or_install("bench preload", &needs, opts.no_install, log, interrupted)?;
        let mut paths = Vec::new();
        for (need, f) in needs.iter().zip(found) {
            paths.push(f.map_err(|why| {
                format!(
                    "{} {why}; install it (Debian: `apt-get install {}`) and run again",
                    need.program, need.package
                )
            })?);
        }
        let [wrk, nginx, redis_server, redis_benchmark] =
            <[PathBuf; 4]>::try_from(paths).map_err(|_| "tool lookup went wrong".to_string())?;
        let versions = [
            version(&wrk, &["-v"]),
            version(&nginx, &["-v"]),
            version(&redis_server, &["--version"]).map(|v| redis::short_version(&v)),
        ]
        .into_iter()
        .flatten()
        .collect::<Vec<_>>()
        .join(", ");
        Ok(Tools {
            wrk,
            nginx,
            redis_server,
            redis_benchmark,
            versions,
        })
    }
}

/// The client namespace (with the TAP, the client end of the veth pair and the AF_XDP
/// rows' veth pairs) and the kernel servers' namespace; both deleted when dropped, the
/// client's first.
struct Net {
    client: Netns,
    server: Namespace,
    /// The AF_XDP rows' links, by [`XDP_PLANS`]; empty with `--no-xdp`.
    xdp: Vec<xdp::XdpLink>,
}

impl Net {
    fn create(pid: u32) -> Result<Net> {
        let client = Netns::create(
            format!("rusty-bench-preload-{pid}"),
            format!("rptap{pid}"),
            HOST_CIDR,
        )?;
        let server = Namespace::create(format!("rusty-bench-preload-{pid}-k"))?;
        let mut net = Net {
            client,
            server,
            xdp: Vec::new(),
        };
        let (cli, srv) = (format!("rpcli{pid}"), format!("rpsrv{pid}"));
        net.client.add_veth_to(&cli, &srv, &net.server.0)?;
        ip(&[
            "-n",
            &net.client.name,
            "addr",
            "add",
            CLIENT_CIDR,
            "dev",
            &cli,
        ])?;
        let kernel_cidr = format!("{KERNEL_IP}/{PREFIX}");
        ip(&[
            "-n",
            &net.server.0,
            "addr",
            "add",
            &kernel_cidr,
            "dev",
            &srv,
        ])?;
        // `Connection: close` opens a connection per request: give wrk the whole port
        // range and let it reuse its own TIME-WAIT ports (both sysctls are per
        // namespace).
        net.client
            .sysctl("net.ipv4.ip_local_port_range", "1024 65535")?;
        net.client.sysctl("net.ipv4.tcp_tw_reuse", "1")?;
        Ok(net)
    }
}

/// `--perf`: profile the one-worker Rusty rows in the 64 B cases.
fn profile(ctx: &Ctx, servers: &[Server]) -> Result<()> {
    let perf = crate::common::find_program("perf")
        .ok_or("--perf needs perf (Debian: `apt-get install linux-perf`)")?;
    let profiled = servers
        .iter()
        .filter(|s| s.app == App::Nginx(1) && s.stack != Stack::Kernel);
    for &server in profiled {
        for case in [CASES[0], CASES[1]] {
            let report = ctx.run_profile(case, server, &perf)?;
            eprintln!(
                "bench preload: where {} spends its time in the {} case: {}",
                server.label(),
                case.label,
                report.display()
            );
        }
    }
    Ok(())
}

/// How long nginx sits idle for the idle measurement, and with `--quick`.
const IDLE_SECONDS: u64 = 10;
const QUICK_IDLE_SECONDS: u64 = 2;
/// The most requests per redis test with `--quick`.
const QUICK_REDIS_REQUESTS: u64 = 20_000;

pub(crate) fn run(opts: &Options) -> Result<()> {
    let opts = &opts.effective();
    if opts.load.duration == 0
        || opts.load.rounds == 0
        || opts.connections == 0
        || opts.redis_requests == 0
    {
        return Err(
            "--duration, --rounds, --connections and --redis-requests must be at least 1".into(),
        );
    }
    let (interrupted, root) = opts.host.prepare("bench preload", &["rusty-preload"])?;
    warn_if_busy("bench preload");
    let rusty_run = release_bin(&root, "rusty-run")?;
    release_bin(&root, "librusty_preload.so")?;

    let pid = std::process::id();
    let tmp = TempDir::new(&format!("rusty-bench-preload-{pid}"))?;
    let tools = Tools::find_or_install(opts, &tmp.path().join("apt-get.log"), &interrupted)?;
    let files = write_files(tmp.path(), "bench preload")?;
    let redis_dir = tmp.path().join("redis");
    fs::create_dir_all(&redis_dir).map_err(|e| format!("creating {}: {e}", redis_dir.display()))?;
    let nginx_confs = [
        write_nginx_conf(tmp.path(), "nginx1", &files.pages, HTTP_PORT, 1, None)?,
        write_nginx_conf(tmp.path(), "nginx2", &files.pages, HTTP_PORT, 2, None)?,
    ];
    let mut net = Net::create(pid)?;
    if !opts.no_xdp {
        let log = tmp.path().join("apt-get-ethtool.log");
        let ethtool = xdp::ethtool(opts.no_install, &log, &interrupted)?
            .map_err(|why| format!("bench preload: {why} (or leave the rows out: --no-xdp)"))?;
        for plan in &XDP_PLANS {
            let link = xdp::XdpLink::create(&mut net.client, plan, &ethtool)?;
            net.xdp.push(link);
        }
    }
    let with_xdp = !net.xdp.is_empty();
    let ran = |s: &&Server| with_xdp || s.stack != Stack::Xdp;
    let nginx_servers: Vec<Server> = NGINX_SERVERS.iter().filter(ran).copied().collect();
    let redis_servers: Vec<Server> = REDIS_SERVERS.iter().filter(ran).copied().collect();

    let ctx = Ctx {
        opts,
        rusty_run,
        tools: &tools,
        nginx_confs,
        script: files.script.clone(),
        redis_dir,
        net: &net,
        logs: &files.logs,
        interrupted: &interrupted,
    };
    let per_round = CASES.len() * nginx_servers.len() + redis_servers.len();
    let total = opts.load.rounds * per_round;
    eprintln!(
        "bench preload: {total} runs ({} s each for wrk, {} requests per redis test; server \
         on CPU {}, client on CPU {}, namespaces {} and {})",
        opts.load.duration,
        opts.redis_requests,
        opts.host.server_cpu,
        opts.host.client_cpu,
        net.client.name,
        net.server.0
    );
    let labels: Vec<&str> = CASES
        .iter()
        .map(|c| c.label)
        .chain(REDIS_TESTS.iter().map(|t| t.1))
        .collect();
    let mut samples: Vec<Vec<(Server, Sample)>> = vec![Vec::new(); labels.len()];
    let mut n = 0;
    let result: Result<()> = (|| {
        for round in 0..opts.load.rounds {
            for (ci, case) in CASES.iter().enumerate() {
                for server in rotated(&nginx_servers, round + ci) {
                    n += 1;
                    let s = ctx.run_http(*case, server, n)?;
                    ctx.print(n, total, round, case.tag, server, &s);
                    samples[ci].push((server, s));
                }
            }
            for server in rotated(&redis_servers, round) {
                n += 1;
                let runs = ctx.run_redis(server, n)?;
                for (ti, s) in runs.into_iter().enumerate() {
                    ctx.print(n, total, round, REDIS_TESTS[ti].0, server, &s);
                    samples[CASES.len() + ti].push((server, s));
                }
            }
        }
        Ok(())
    })();
    // Idle: nginx through rusty-run, its master and two workers, and nothing asking.
    let idle = result.as_ref().ok().map(|()| {
        let server = Server::new(App::Nginx(2), Stack::Rusty);
        ctx.run_idle(server, opts.idle_seconds())
    });
    let idle = match idle {
        Some(Ok(share)) => Some(share),
        Some(Err(e)) => return Err(e),
        None => None,
    };
    let result = match result {
        Ok(()) if opts.perf => profile(&ctx, &nginx_servers),
        other => other,
    };
    drop(net);
    tmp.finish(result, opts.host.keep_logs, "bench preload")?;

    let table = report::table(&labels, &samples);
    let mut verdict = report::verdict(&labels, &samples);
    if let Some(share) = idle {
        verdict.push_str(&report::idle_line(share, opts.idle_seconds()));
    }
    println!("{table}\n{verdict}");
    let charts = report::charts(&labels, &samples)?;
    publish(
        &root,
        "bench preload",
        opts.host.no_docs,
        &charts,
        BLOCK,
        |charts| {
            let text = [charts, &table, &verdict];
            report::block_body(opts, &files.set, &tools.versions, text)
        },
    )
}
