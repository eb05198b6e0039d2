//! `echo <port> [<n links> [<link> <addresses> <n workers>]...] [--discard]`: an echo server
//! on Rusty's stack (TAP) or, without links, on the kernel's sockets on all addresses
//! with one worker per core. With `--discard`, a discard server (RFC 863) instead: what
//! arrives is dropped, nothing is sent, and each connection closes after its peer does.
//! With `--tls-cert` and `--tls-key`, either speaks TLS (rereading them on SIGHUP).

use std::process::ExitCode;

use clap::Parser;
use rusty::cli::tls::{self, TlsServerArgs};
use rusty::cli::CommonArgs;
use rusty::launch;
use rusty::runtime::{StopHandle, WorkerContext};
use rusty_echo::{DiscardServer, DiscardSink, DiscardStats, EchoServer};
use rusty_tls::ServerSettings;

#[derive(Debug, Parser)]
#[command(
    name = "echo",
    about = "Echo (or discard) server on Rusty (TAP, AF_XDP) or on kernel sockets",
    after_help = rusty::cli::link::links_help(
        "echo 7 1 tap0 10.0.2.2/24,fd00::2/64 2 --tap-host 10.0.2.1/24,fd00::1/64"
    )
)]
struct Cli {
    /// TCP port to listen on.
    port: u16,
    /// Link specs (see below).
    links: Vec<String>,
    /// Discard (RFC 863) instead of echoing: consume and drop every byte, send nothing,
    /// close when the peer closes. The counters printed on stop include the bytes taken.
    #[arg(long)]
    discard: bool,
    #[command(flatten)]
    tls: TlsServerArgs,
    #[command(flatten)]
    common: CommonArgs,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    cli.common.init_logging();
    let launch = match cli.common.launch(&cli.links) {
        Ok(l) => l,
        Err(e) => {
            eprintln!("echo: {e}");
            return ExitCode::from(2);
        }
    };
    let name = if cli.discard { "discard" } else { "echo" };
    let tls = match cli.tls.start(name, ServerSettings::default()) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("echo: {e}");
            return ExitCode::from(2);
        }
    };
    let ready = || {
        log::info!(
            "{name}: listening on port {}{} ({})",
            cli.port,
            if tls.is_some() { " (TLS)" } else { "" },
            launch.describe_links()
        )
    };
    let stop = StopHandle::new();
    let sink = DiscardSink::default();
    let result = if cli.discard {
        let handler_sink = sink.clone();
        let make = move |ctx: &WorkerContext| {
            DiscardServer::default().with_sink(ctx.index(), handler_sink.clone())
        };
        tls::run(&launch, Some(cli.port), &stop, tls.as_ref(), make, ready)
    } else {
        let make = |_: &WorkerContext| EchoServer::default();
        tls::run(&launch, Some(cli.port), &stop, tls.as_ref(), make, ready)
    };
    match result {
        Ok(stats) => {
            let discard = ("discard", &sink, DiscardStats::add as fn(&mut _, &_));
            launch::log_counters(&stats, cli.discard.then_some(discard));
            if let Some(tls) = &tls {
                tls.log_counters();
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("echo: {e}");
            ExitCode::from(1)
        }
    }
}
