//! `httpd <TCP port> <root dir> [<n links> [<link> <addresses> <n workers>]...]`: a static
//! file server on Rusty's stack (TAP) or, without links, on the kernel's sockets on all
//! addresses with one worker per core. `--tls-cert` and `--tls-key` make it HTTPS (on the
//! port given, or on `--tls-port` beside plain HTTP); SIGHUP rereads them.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use clap::Parser;
use rusty::cli::tls::{TlsServer, TlsServerArgs};
use rusty::cli::CommonArgs;
use rusty::launch;
use rusty::runtime::{StopHandle, WorkerContext};
use rusty_httpd::{Cache, HttpConfig, HttpServer, HttpStats, Https, StatsSink, TlsPorts};
use rusty_tls::ServerSettings;

fn seconds(s: &str) -> Result<Duration, String> {
    let v = seconds_or_off(s)?;
    if v.is_zero() {
        return Err(format!("'{s}' must be above 0 and at most 86400 seconds"));
    }
    Ok(v)
}

/// Seconds, or 0 for a timeout that is off.
fn seconds_or_off(s: &str) -> Result<Duration, String> {
    let v: f64 = s
        .parse()
        .map_err(|_| format!("'{s}' is not a number of seconds"))?;
    if !(0.0..=86_400.0).contains(&v) {
        return Err(format!("'{s}' must be from 0 to 86400 seconds"));
    }
    Ok(Duration::from_secs_f64(v))
}

#[derive(Debug, Parser)]
#[command(
    name = "httpd",
    about = "Static file server on Rusty (TAP, AF_XDP) or on kernel sockets",
    after_help = rusty::cli::link::links_help(
        "httpd 80 ./pages 2 tap0 10.0.2.2,fd00::2 1 tap1 10.0.3.2 1"
    )
)]
struct Cli {
    /// TCP port to listen on.
    port: u16,
    /// Directory to serve (read whole into memory at start).
    root: PathBuf,
    /// Link specs (see below).
    links: Vec<String>,
    /// Connections each worker serves at once; more are refused.
    #[arg(long, value_name = "N", default_value_t = 10_000)]
    max_connections: usize,
    /// Seconds an idle persistent connection stays open.
    #[arg(long, value_name = "SECONDS", default_value = "15", value_parser = seconds)]
    keepalive_timeout: Duration,
    /// Seconds a client has to complete a request head.
    #[arg(long, value_name = "SECONDS", default_value = "10", value_parser = seconds)]
    header_timeout: Duration,
    /// Seconds a client may leave what we sent unacknowledged (by not reading, so its
    /// window stays shut) before the connection is reset: the user timeout (RFC 5482)
    /// of every connection, like nginx's `send_timeout`. 0 turns it off.
    #[arg(long, value_name = "SECONDS", default_value = "60", value_parser = seconds_or_off)]
    send_timeout: Duration,
    /// Largest request head (request line and header fields) accepted.
    #[arg(long, value_name = "BYTES", default_value_t = 8192)]
    max_header_bytes: usize,
    #[command(flatten)]
    tls: TlsServerArgs,
    /// Serve HTTPS on this port, and plain HTTP on the port given.
    /// Serve HTTPS on this port, with `--tls-cert`, and plain HTTP on the port given.
    #[arg(long, value_name = "PORT", requires = "tls_cert")]
    tls_port: Option<u16>,
    #[command(flatten)]
    common: CommonArgs,
}

/// HTTPS as the command line asks for it: the TLS server side and which port speaks
/// it; `None` without `--tls-cert`, an error for flags that do not go together or
/// certificates that cannot be used. With `reload`, SIGHUP rereads the files.
fn tls_from_cli(cli: &Cli, reload: bool) -> Result<Option<(TlsServer, TlsPorts)>, String> {
    if cli.tls_port == Some(cli.port) {
        return Err(format!(
            "--tls-port {} is the port given for plain HTTP; omit it to serve HTTPS there",
            cli.port
        ));
    }
    let ports = cli.tls_port.map_or(TlsPorts::All, TlsPorts::Only);
    let settings = ServerSettings::default();
    let server = match reload {
        true => cli.tls.start("httpd", settings)?,
        false => cli.tls.server(settings)?,
    };
    Ok(server.map(|t| (t, ports)))
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    cli.common.init_logging();
    let launch = match cli.common.launch(&cli.links) {
        Ok(l) => l,
        Err(e) => {
            eprintln!("httpd: {e}");
            return ExitCode::from(2);
        }
    };
    if cli.max_connections == 0 || cli.max_header_bytes < 64 {
        eprintln!("httpd: --max-connections must be at least 1 and --max-header-bytes at least 64");
        return ExitCode::from(2);
    }
    let cache = match Cache::load(&cli.root) {
        Ok(c) => Arc::new(c),
        Err(e) => {
            eprintln!("httpd: {e}");
            return ExitCode::from(1);
        }
    };
    for (path, why) in cache.skipped() {
        log::warn!("skipped {}: {why}", path.display());
    }
    let tls = match tls_from_cli(&cli, true) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("httpd: {e}");
            return ExitCode::from(2);
        }
    };
    let ports: Vec<u16> = [cli.port].into_iter().chain(cli.tls_port).collect();
    let listening = match (&tls, cli.tls_port) {
        (None, _) => format!("port {}", cli.port),
        (Some(_), None) => format!("port {} (HTTPS)", cli.port),
        (Some(_), Some(p)) => format!("port {} (HTTP) and port {p} (HTTPS)", cli.port),
    };
    let ready = || {
        log::info!(
            "httpd: serving {} files, {} bytes from {} on {listening} ({})",
            cache.files(),
            cache.bytes(),
            cli.root.display(),
            launch.describe_links()
        )
    };
    let mut cfg = HttpConfig::default();
    cfg.limits.max_header_bytes = cli.max_header_bytes;
    cfg.header_timeout = cli.header_timeout;
    cfg.keepalive_timeout = cli.keepalive_timeout;
    cfg.max_connections = cli.max_connections;
    cfg.send_timeout = (!cli.send_timeout.is_zero()).then_some(cli.send_timeout);
    let sink: StatsSink = Arc::new(Mutex::new(Vec::new()));
    let stop = StopHandle::new();
    let handler_sink = sink.clone();
    let files = cache.clone();
    let make = move |ctx: &WorkerContext| {
        HttpServer::new(files.clone(), cfg.clone()).with_sink(ctx.index(), handler_sink.clone())
    };
    let result = match &tls {
        None => launch::run(&launch, &ports[..], &stop, make, ready),
        Some((tls, ports_tls)) => {
            let (make, ports_tls) = (tls.wrap(make), *ports_tls);
            let make = move |ctx: &WorkerContext| Https::new(make(ctx), ports_tls);
            launch::run(&launch, &ports[..], &stop, make, ready)
        }
    };
    match result {
        Ok(stats) => {
            launch::log_counters(&stats, Some(("httpd", &sink, HttpStats::add)));
            if let Some((tls, _)) = &tls {
                tls.log_counters();
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("httpd: {e}");
            match e {
                launch::LaunchError::Usage(_) | launch::LaunchError::Link(_) => ExitCode::from(2),
                _ => ExitCode::from(1),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<Cli, clap::Error> {
        Cli::try_parse_from(["httpd", "8080", "site"].iter().chain(args))
    }

    #[test]
    fn send_timeout_zero_turns_it_off_other_timeouts_refuse_zero() {
        let cli = parse(&["--send-timeout", "0"]).expect("0 is accepted");
        assert!(cli.send_timeout.is_zero());
        assert_eq!(
            parse(&["--send-timeout", "2.5"]).unwrap().send_timeout,
            Duration::from_millis(2500)
        );
        for bad in [["--send-timeout", "-1"], ["--send-timeout", "86401"]] {
            assert!(parse(&bad).is_err(), "{bad:?}");
        }
        assert!(parse(&["--keepalive-timeout", "0"]).is_err());
        assert!(parse(&["--header-timeout", "x"]).is_err());
    }

    #[test]
    fn tls_port_needs_a_certificate_and_another_port() {
        assert!(parse(&["--tls-port", "8443"]).is_err());
        assert!(tls_from_cli(&parse(&[]).unwrap(), false).unwrap().is_none());
        let same = parse(&["--tls-cert", "c", "--tls-key", "k", "--tls-port", "8080"]).unwrap();
        let e = tls_from_cli(&same, false).err().unwrap_or_default();
        assert!(e.contains("--tls-port 8080"), "{e}");
        let missing = parse(&["--tls-cert", "/nonexistent/c.pem", "--tls-key", "k.pem"]).unwrap();
        let e = tls_from_cli(&missing, false).err().unwrap_or_default();
        assert!(e.contains("/nonexistent/c.pem"), "{e}");
    }
}
