//! What every load-client binary does around its handler: spread the connections over
//! the workers (kernel sockets by default, or Rusty's links), run until every worker has
//! reported or a watchdog fires, and print the merged [`Report`](crate::Report) in the lines the
//! benchmark scripts read (`messages/s … MB/s … messages …`, `latency us: p50 …`).
//! `echo-load` and the WebSocket crate's `ws-load` both run through [`run_client`], which
//! also puts every connection inside TLS when `--tls-ca` is given.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::thread;
use std::time::Duration;

use rusty::cli::link::LinkSpec;
use rusty::cli::CommonArgs;
use rusty::launch;
use rusty::metrics::AppMetrics;
use rusty::runtime::{StopHandle, WorkerContext};
use rusty_stack::Handler;
use rusty_tls::{ClientSettings, Tls, TlsConnector};

use crate::load::Collector;

/// The arguments every load client takes (flatten into its clap parser; the
/// connection count and message size, whose defaults differ, are its own).
#[derive(Debug, Clone, clap::Args)]
#[non_exhaustive]
pub struct ClientCli {
    /// The server's address and port: `10.0.2.2:7`, or `[fd00::2]:7` for IPv6.
    #[arg(value_parser = parse_target)]
    pub target: SocketAddr,
    /// Link specs to run the client on (default: kernel sockets, --workers workers).
    pub links: Vec<String>,
    /// Seconds to run.
    #[arg(long, default_value_t = 10)]
    pub duration: u64,
    /// Kernel-socket workers when no links are given.
    #[arg(long, default_value_t = 1)]
    pub workers: usize,
    /// Speak TLS, trusting the certificate authorities in FILE (PEM).
    #[arg(long, value_name = "FILE")]
    pub tls_ca: Option<PathBuf>,
    /// The name the server's certificate must prove (and the SNI sent); default: the
    /// target's address.
    #[arg(long, value_name = "NAME", requires = "tls_ca")]
    pub tls_name: Option<String>,
    /// The flags every Rusty binary takes (logging, CPUs, engine and link tuning).
    #[command(flatten)]
    pub common: CommonArgs,
}

/// A server's address and port, with a reminder of both forms when it is neither.
fn parse_target(s: &str) -> Result<SocketAddr, String> {
    s.parse().map_err(|_| {
        format!("'{s}' is not an address and port (10.0.2.2:7, or [fd00::2]:7 for IPv6)")
    })
}

impl ClientCli {
    /// How long the connections keep sending (`--duration`).
    pub fn duration(&self) -> Duration {
        Duration::from_secs(self.duration)
    }

    /// The TLS client side `--tls-ca` asks for (`None` without it), proving
    /// `--tls-name` or else the target's address.
    pub fn tls(&self) -> Result<Option<Arc<TlsConnector>>, String> {
        let Some(ca) = &self.tls_ca else {
            return Ok(None);
        };
        let name = self
            .tls_name
            .clone()
            .unwrap_or_else(|| self.target.ip().to_string());
        let connector = TlsConnector::from_ca_file(ca, &name, ClientSettings::default())
            .map_err(|e| format!("TLS: {e}"))?;
        Ok(Some(Arc::new(connector)))
    }
}

/// A load client's command line, as far as [`run_client`] needs it.
#[non_exhaustive]
pub struct ClientArgs<'a> {
    /// The binary's name, for messages.
    pub name: &'static str,
    /// The flags shared by every load client.
    pub cli: &'a ClientCli,
    /// Connections in total.
    pub connections: usize,
    /// Message size in bytes.
    pub size: usize,
    /// How the first report line names the mode (e.g. `PingPong`).
    pub mode: String,
}

impl<'a> ClientArgs<'a> {
    /// The arguments of the binary `name`: `connections` connections in total sending
    /// `size`-byte messages, the mode named `mode` in the report.
    pub fn new(
        name: &'static str,
        cli: &'a ClientCli,
        connections: usize,
        size: usize,
        mode: impl Into<String>,
    ) -> ClientArgs<'a> {
        ClientArgs {
            name,
            cli,
            connections,
            size,
            mode: mode.into(),
        }
    }
}

/// Runs the client: `make(worker_index, connections_per_worker, collector)` builds each
/// worker's handler, which reports into the collector when its run is over. Prints the
/// merged report; the exit code is 2 for bad arguments, 1 when a connection failed, an
/// echo differed, a worker did not report or nothing was echoed.
pub fn run_client<H, F>(args: ClientArgs<'_>, make: F) -> ExitCode
where
    H: Handler + AppMetrics + 'static,
    F: Fn(usize, usize, Collector) -> H + Clone + Send + 'static,
{
    let name = args.name;
    let cli = args.cli;
    if args.size == 0 || args.connections == 0 || cli.workers == 0 {
        eprintln!("{name}: --size, --connections and --workers must be at least 1");
        return ExitCode::from(2);
    }
    let mut launch = match cli.common.launch(&cli.links) {
        Ok(l) => l,
        Err(e) => {
            eprintln!("{name}: {e}");
            return ExitCode::from(2);
        }
    };
    let tls = match cli.tls() {
        Ok(t) => t,
        Err(e) => {
            eprintln!("{name}: {e}");
            return ExitCode::from(2);
        }
    };
    if launch.links.is_empty() {
        launch.links.push(LinkSpec::kernel(cli.workers));
    }
    let workers: usize = launch.links.iter().map(|l| l.workers).sum();
    let per_worker = args.connections.div_ceil(workers);
    // Workers stop on their own once every one has reported; a watchdog ends the run if
    // connections hang past the duration plus the grace period.
    launch.runtime.grace = launch.runtime.grace.min(Duration::from_secs(30));
    let collector = Collector::new();
    let stop = StopHandle::new();
    let watcher = {
        let (collector, stop) = (collector.clone(), stop.clone());
        let limit = cli.duration() + Duration::from_secs(5);
        thread::spawn(move || {
            let start = std::time::Instant::now();
            while collector.finished() < workers && start.elapsed() < limit {
                thread::sleep(Duration::from_millis(20));
            }
            stop.stop();
        })
    };
    let handlers = {
        let collector = collector.clone();
        move |ctx: &WorkerContext| make(ctx.index(), per_worker, collector.clone())
    };
    let result = match tls {
        None => launch::run(&launch, None, &stop, handlers, || {}),
        Some(tls) => {
            let handlers = move |ctx: &WorkerContext| Tls::client(handlers(ctx), tls.clone());
            launch::run(&launch, None, &stop, handlers, || {})
        }
    };
    let _ = watcher.join();
    let stats = match result {
        Ok(s) => s,
        Err(e) => {
            eprintln!("{name}: {e}");
            return ExitCode::from(1);
        }
    };
    let r = collector.total();
    let secs = r.elapsed.as_secs_f64().max(1e-9);
    println!(
        "mode {}, {} connections x {} B, {:.1} s",
        args.mode,
        per_worker * workers,
        args.size,
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

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Debug, Parser)]
    struct Cli {
        #[command(flatten)]
        client: ClientCli,
    }

    #[test]
    fn targets_of_either_family_parse_and_others_are_explained() {
        for (arg, want) in [("10.0.2.2:7", "10.0.2.2:7"), ("[fd00::2]:7", "[fd00::2]:7")] {
            let cli = Cli::try_parse_from(["x", arg]).unwrap();
            assert_eq!(cli.client.target.to_string(), want);
        }
        for bad in ["fd00::2", "[fd00::2]", "10.0.2.2", "host:7"] {
            let err = Cli::try_parse_from(["x", bad]).unwrap_err().to_string();
            assert!(err.contains("or [fd00::2]:7 for IPv6"), "{bad}: {err}");
        }
        let cli = Cli::try_parse_from(["x", "[fd00::2]:7", "1", "tap0", "fd00::3", "1"]).unwrap();
        let launch = cli.client.common.launch(&cli.client.links).unwrap();
        assert_eq!(launch.links[0].ipv6.len(), 1);
    }

    #[test]
    fn tls_flags_name_the_authority_and_default_to_the_target() {
        assert!(Cli::try_parse_from(["x", "10.0.2.2:7", "--tls-name", "a"]).is_err());
        let plain = Cli::try_parse_from(["x", "10.0.2.2:7"]).unwrap();
        assert!(plain.client.tls().unwrap().is_none());
        let cli = Cli::try_parse_from(["x", "10.0.2.2:7", "--tls-ca", "/nonexistent/ca.pem"]);
        let e = cli.unwrap().client.tls().err().unwrap_or_default();
        assert!(e.contains("/nonexistent/ca.pem"), "{e}");
    }
}
