//! `echo-load <target ip:port> [<n links> [<link> <ipv4> <n workers>]...]`: drive an
//! echo server with ping-pong or streaming traffic from Rusty's stack (TAP) or, without
//! links, from kernel sockets; verify every echoed byte; report throughput and latency.

use std::net::SocketAddrV4;
use std::process::ExitCode;
use std::thread;
use std::time::Duration;

use clap::{Parser, ValueEnum};
use rusty::cli::link::{LinkKind, LinkSpec};
use rusty::cli::CommonArgs;
use rusty::launch;
use rusty::runtime::StopHandle;
use rusty_echo::{Collector, LoadClient, LoadConfig, Mode};

#[derive(Debug, Clone, Copy, ValueEnum)]
enum ModeArg {
    /// Each connection sends a message and waits for its echo.
    PingPong,
    /// Each connection sends and receives independently.
    Stream,
}

#[derive(Debug, Parser)]
#[command(
    name = "echo-load",
    about = "Load client for echo servers (Rusty or kernel sockets)"
)]
struct Cli {
    /// Echo server address.
    target: SocketAddrV4,
    /// Link specs to run the client on (default: kernel sockets, --workers workers).
    links: Vec<String>,
    #[arg(long, value_enum, default_value_t = ModeArg::PingPong)]
    mode: ModeArg,
    /// Connections in total (spread over the workers).
    #[arg(long, default_value_t = 100)]
    connections: usize,
    /// Message size in bytes.
    #[arg(long, default_value_t = 64)]
    size: usize,
    /// Seconds to run.
    #[arg(long, default_value_t = 10)]
    duration: u64,
    /// Kernel-socket workers when no links are given.
    #[arg(long, default_value_t = 1)]
    workers: usize,
    #[command(flatten)]
    common: CommonArgs,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    cli.common.init_logging();
    if cli.size == 0 || cli.connections == 0 || cli.workers == 0 {
        eprintln!("echo-load: --size, --connections and --workers must be at least 1");
        return ExitCode::from(2);
    }
    let mut launch = match cli.common.launch(&cli.links) {
        Ok(l) => l,
        Err(e) => {
            eprintln!("echo-load: {e}");
            return ExitCode::from(2);
        }
    };
    if launch.links.is_empty() {
        launch.links.push(LinkSpec {
            kind: LinkKind::Kernel,
            ip: std::net::Ipv4Addr::UNSPECIFIED,
            prefix_len: 0,
            workers: cli.workers,
        });
    }
    let workers: usize = launch.links.iter().map(|l| l.workers).sum();
    let per_worker = cli.connections.div_ceil(workers);
    let cfg = LoadConfig {
        target: cli.target,
        mode: match cli.mode {
            ModeArg::PingPong => Mode::PingPong,
            ModeArg::Stream => Mode::Stream,
        },
        connections: per_worker,
        size: cli.size,
        duration: Duration::from_secs(cli.duration),
    };
    // Workers stop on their own once every one has reported; a watchdog ends the run if
    // connections hang past the duration plus the grace period.
    launch.runtime.grace = launch.runtime.grace.min(Duration::from_secs(30));
    let collector = Collector::new();
    let stop = StopHandle::new();
    let watcher = {
        let (collector, stop) = (collector.clone(), stop.clone());
        let limit = cfg.duration + Duration::from_secs(5);
        thread::spawn(move || {
            let start = std::time::Instant::now();
            while collector.finished() < workers && start.elapsed() < limit {
                thread::sleep(Duration::from_millis(20));
            }
            stop.stop();
        })
    };
    let make = {
        let collector = collector.clone();
        move |ctx: &rusty::runtime::WorkerContext| {
            LoadClient::new(cfg.clone(), ctx.index(), collector.clone())
        }
    };
    let result = launch::run(&launch, None, &stop, make, || {});
    let _ = watcher.join();
    let stats = match result {
        Ok(s) => s,
        Err(e) => {
            eprintln!("echo-load: {e}");
            return ExitCode::from(1);
        }
    };
    let r = collector.total();
    let secs = r.elapsed.as_secs_f64().max(1e-9);
    println!(
        "mode {:?}, {} connections x {} B, {:.1} s",
        cli.mode,
        per_worker * workers,
        cli.size,
        secs
    );
    println!(
        "messages/s {:.0}   MB/s {:.2}   messages {}   bytes {}",
        r.messages as f64 / secs,
        r.bytes as f64 / secs / 1e6,
        r.messages,
        r.bytes
    );
    if !r.latency_us.is_empty() {
        println!(
            "latency us: p50 {}  p90 {}  p99 {}  p99.9 {}  max {}",
            r.latency_us.value_at_quantile(0.50),
            r.latency_us.value_at_quantile(0.90),
            r.latency_us.value_at_quantile(0.99),
            r.latency_us.value_at_quantile(0.999),
            r.latency_us.max()
        );
    }
    println!(
        "failed connections {}   byte mismatches {}   workers reported {}/{}",
        r.failed,
        r.mismatches,
        collector.finished(),
        workers
    );
    for (i, s) in stats.iter().enumerate() {
        log::info!("worker {i}: {s}");
    }
    if r.failed > 0 || r.mismatches > 0 || collector.finished() < workers || r.messages == 0 {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    }
}
