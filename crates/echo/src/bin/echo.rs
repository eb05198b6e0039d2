//! `echo <port> [<n links> [<link> <ipv4> <n workers>]...]`: an echo server on Rusty's
//! stack (TAP) or, without links, on the kernel's sockets on all addresses with one
//! worker per core.

use std::process::ExitCode;

use clap::Parser;
use rusty::cli::CommonArgs;
use rusty::launch;
use rusty::runtime::StopHandle;
use rusty_echo::EchoServer;

#[derive(Debug, Parser)]
#[command(
    name = "echo",
    about = "Echo server on Rusty (TAP) or on kernel sockets",
    after_help = "Links: <n links> then, per link, <link> <ipv4>[/prefix] <n workers>, where <link> is\n\
                  kernel, tapN or tap:NAME; an address without a prefix is a /24 (so is --tap-host's).\n\
                  Example: echo 7 1 tap0 10.0.2.2/24 2 --tap-host 10.0.2.1/24"
)]
struct Cli {
    /// TCP port to listen on.
    port: u16,
    /// Link specs (see below).
    links: Vec<String>,
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
    log::info!(
        "echo: listening on port {} ({})",
        cli.port,
        launch.describe_links()
    );
    let stop = StopHandle::new();
    match launch::run(&launch, Some(cli.port), &stop, |_| EchoServer::default()) {
        Ok(stats) => {
            for (i, s) in stats.iter().enumerate() {
                log::info!("worker {i}: {s}");
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("echo: {e}");
            ExitCode::from(1)
        }
    }
}
