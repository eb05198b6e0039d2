//! `echo-load <target ip:port> [<n links> [<link> <addresses> <n workers>]...]`: drive an
//! echo server with ping-pong or streaming traffic from Rusty's stack (TAP) or, without
//! links, from kernel sockets; verify every echoed byte; report throughput and latency.

use std::process::ExitCode;

use clap::{Parser, ValueEnum};
use rusty_echo::client::{run_client, ClientArgs, ClientCli};
use rusty_echo::{LoadClient, LoadConfig, Mode};

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
    about = "Load client for echo servers (Rusty or kernel sockets)",
    after_help = rusty::cli::link::links_help("echo-load [fd00::2]:7 1 tap0 10.0.2.3,fd00::3 2")
)]
struct Cli {
    #[arg(long, value_enum, default_value_t = ModeArg::PingPong)]
    mode: ModeArg,
    /// Connections in total (spread over the workers).
    #[arg(long, default_value_t = 100)]
    connections: usize,
    /// Message size in bytes.
    #[arg(long, default_value_t = 64)]
    size: usize,
    #[command(flatten)]
    client: ClientCli,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    cli.client.common.init_logging();
    let mode = match cli.mode {
        ModeArg::PingPong => Mode::PingPong,
        ModeArg::Stream => Mode::Stream,
    };
    let duration = cli.client.duration();
    let args = ClientArgs::new(
        "echo-load",
        &cli.client,
        cli.connections,
        cli.size,
        format!("{mode:?}"),
    );
    let (target, size) = (cli.client.target, cli.size);
    run_client(args, move |worker, connections, collector| {
        let mut cfg = LoadConfig::new(target, mode);
        cfg.connections = connections;
        cfg.size = size;
        cfg.duration = duration;
        LoadClient::new(cfg, worker, collector)
    })
}
