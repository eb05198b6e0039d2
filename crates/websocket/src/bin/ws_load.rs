//! `ws-load <target ip:port> [<n links> [<link> <addresses> <n workers>]...]`: drive a
//! WebSocket echo server with ping-pong binary messages from kernel sockets (or Rusty's
//! stack with links), verify every echoed byte, report throughput and latency in the
//! lines `echo-load` prints.

use std::process::ExitCode;

use clap::{Parser, ValueEnum};
use rusty_echo::client::{run_client, ClientArgs, ClientCli};
use rusty_websocket::load::{LoadConfig, WsLoad};
use rusty_websocket::{WsClient, WsConfig};

/// The one mode: `echo-load`'s flag, so scripts drive both clients alike.
#[derive(Debug, Clone, Copy, ValueEnum)]
enum ModeArg {
    /// Each connection sends a message and waits for its echo.
    PingPong,
}

#[derive(Debug, Parser)]
#[command(
    name = "ws-load",
    about = "Load client for WebSocket echo servers (Rusty or kernel sockets)",
    after_help = rusty::cli::link::links_help("ws-load [fd00::2]:9001 1 tap0 10.0.2.3,fd00::3 2")
)]
struct Cli {
    #[arg(long, value_enum, default_value_t = ModeArg::PingPong)]
    mode: ModeArg,
    /// Connections in total (spread over the workers).
    #[arg(long, default_value_t = 240)]
    connections: usize,
    /// Message size in bytes (1 to 65,520).
    #[arg(long, default_value_t = 128, value_parser = clap::value_parser!(u64).range(1..65_521))]
    size: u64,
    /// Request path of the opening handshake.
    #[arg(long, default_value = "/")]
    path: String,
    #[command(flatten)]
    client: ClientCli,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    cli.client.common.init_logging();
    let duration = cli.client.duration();
    let size = cli.size as usize;
    let args = ClientArgs::new(
        "ws-load",
        &cli.client,
        cli.connections,
        size,
        format!("{:?} (WebSocket binary)", cli.mode),
    );
    let (target, path) = (cli.client.target, cli.path.clone());
    run_client(args, move |worker, connections, collector| {
        let mut cfg = LoadConfig::new(target, path.clone());
        cfg.connections = connections;
        cfg.size = size;
        cfg.duration = duration;
        WsClient::new(WsLoad::new(cfg, worker, collector), WsConfig::default())
    })
}
