//! `ws-echo <port> [<n links> [<link> <addresses> <n workers>]...]`: a WebSocket echo server
//! (RFC 6455) on Rusty's stack (TAP, AF_XDP) or, without links, on the kernel's sockets
//! on all addresses with one worker per core. Every text and binary message goes back
//! as the same type (compressed when the client negotiated permessage-deflate, which
//! `--deflate` allows). With `--tls-cert` and `--tls-key` it speaks WebSocket over TLS
//! (wss://), rereading them on SIGHUP. On stop, each worker's WebSocket counters and
//! their total are printed (and the TLS counters, with TLS).

use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use rusty::cli::parse::parse_size;
use rusty::cli::tls::{self, TlsServerArgs};
use rusty::cli::CommonArgs;
use rusty::launch;
use rusty::runtime::{StopHandle, WorkerContext};
use rusty_tls::ServerSettings;
use rusty_websocket::{WsConfig, WsEcho, WsServer, WsStats, WsStatsSink};

#[derive(Debug, Parser)]
#[command(
    name = "ws-echo",
    about = "WebSocket echo server on Rusty (TAP, AF_XDP) or on kernel sockets",
    after_help = rusty::cli::link::links_help(
        "ws-echo 9001 1 tap0 10.0.2.2/24,fd00::2/64 2 --tap-host 10.0.2.1/24,fd00::1/64"
    )
)]
struct Cli {
    /// TCP port to listen on.
    port: u16,
    /// Link specs (see below).
    links: Vec<String>,
    /// Longest message accepted (K, M, G suffixes); longer fails the connection with
    /// 1009. Autobahn's section 9 needs 16M.
    #[arg(long, value_name = "BYTES", value_parser = parse_size, default_value = "64M")]
    max_message: usize,
    /// Longest frame accepted (K, M, G suffixes).
    #[arg(long, value_name = "BYTES", value_parser = parse_size, default_value = "16M")]
    max_frame: usize,
    /// Largest opening-handshake request head; longer is answered with 431.
    #[arg(long, value_name = "BYTES", value_parser = parse_size, default_value = "8K")]
    max_handshake: usize,
    /// Output queued per connection above which its input stops being read.
    #[arg(long, value_name = "BYTES", value_parser = parse_size, default_value = "4M")]
    max_send_queue: usize,
    /// Close connections idle this many seconds (0: never).
    #[arg(long, value_name = "SECONDS", default_value_t = 0)]
    idle_timeout: u64,
    /// Seconds a peer has to finish the opening handshake (0: no limit).
    #[arg(long, value_name = "SECONDS", default_value_t = 10)]
    handshake_timeout: u64,
    /// Seconds a peer has to answer our close frame.
    #[arg(long, value_name = "SECONDS", default_value_t = 5)]
    close_timeout: u64,
    /// Accept permessage-deflate (RFC 7692) when a client offers it; echoes of
    /// compressed messages go out compressed (messages under 32 bytes plain).
    #[arg(long)]
    deflate: bool,
    /// With --deflate: reset our compressor after every message and say so
    /// (server_no_context_takeover), keeping no compression context between messages.
    #[arg(long, requires = "deflate")]
    deflate_no_context_takeover: bool,
    #[command(flatten)]
    tls: TlsServerArgs,
    #[command(flatten)]
    common: CommonArgs,
}

fn seconds(s: u64) -> Option<Duration> {
    (s > 0).then(|| Duration::from_secs(s))
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    cli.common.init_logging();
    let launch = match cli.common.launch(&cli.links) {
        Ok(l) => l,
        Err(e) => {
            eprintln!("ws-echo: {e}");
            return ExitCode::from(2);
        }
    };
    let tls = match cli.tls.start("ws-echo", ServerSettings::default()) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("ws-echo: {e}");
            return ExitCode::from(2);
        }
    };
    let mut cfg = WsConfig::default();
    cfg.max_frame = cli.max_frame;
    cfg.max_message = cli.max_message;
    cfg.max_handshake = cli.max_handshake;
    cfg.max_send_queue = cli.max_send_queue;
    cfg.idle_timeout = seconds(cli.idle_timeout);
    cfg.handshake_timeout = seconds(cli.handshake_timeout);
    cfg.close_timeout = Duration::from_secs(cli.close_timeout);
    cfg.deflate.enabled = cli.deflate;
    cfg.deflate.no_context_takeover = cli.deflate_no_context_takeover;
    let ready = || {
        log::info!(
            "ws-echo: listening on port {}{} ({}); max message {} B, max frame {} B, \
             permessage-deflate {}",
            cli.port,
            if tls.is_some() { " (TLS)" } else { "" },
            launch.describe_links(),
            cfg.max_message,
            cfg.max_frame,
            match (cfg.deflate.enabled, cfg.deflate.no_context_takeover) {
                (false, _) => "off",
                (true, false) => "on",
                (true, true) => "on (no context takeover)",
            }
        )
    };
    let stop = StopHandle::new();
    let sink = WsStatsSink::default();
    let make = {
        let (cfg, sink) = (cfg.clone(), sink.clone());
        move |ctx: &WorkerContext| {
            WsServer::new(WsEcho, cfg.clone()).with_sink(ctx.index(), sink.clone())
        }
    };
    match tls::run(&launch, Some(cli.port), &stop, tls.as_ref(), make, ready) {
        Ok(stats) => {
            launch::log_counters(&stats, Some(("websocket", &sink, WsStats::add)));
            if let Some(tls) = &tls {
                tls.log_counters();
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("ws-echo: {e}");
            ExitCode::from(1)
        }
    }
}
