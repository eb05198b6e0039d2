//! The servers' TLS flags (`--tls-cert`, `--tls-key`, `--tls-sni`) and what they set up:
//! the configuration every worker shares, each worker's [`Tls`] handler around the
//! program's own, rereading the files on SIGHUP, and the counters printed on stop.
//! `httpd`, `ws-echo` and `echo` take them alike.

use std::io;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use clap::Args;
use rusty_metrics::AppMetrics;
use rusty_runtime::hangup::{on_hangup, Hangup};
use rusty_runtime::WorkerContext;
use rusty_stack::Handler;
use rusty_tls::{
    parse_sni, ServerSettings, StatsSink, Tls, TlsAcceptor, TlsFiles, TlsStats, Versions,
};

use crate::launch;

/// The TLS flags of a server (flatten into its clap parser).
#[derive(Debug, Clone, Default, Args)]
#[non_exhaustive]
pub struct TlsServerArgs {
    /// Certificate chain (PEM, leaf first): speak TLS. Needs `--tls-key`. Reread with
    /// the key on SIGHUP.
    #[arg(long, value_name = "FILE", requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// Private key (PEM: PKCS#8, PKCS#1 or SEC1) of the `--tls-cert` leaf.
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
    /// Another certificate and key, for clients that ask for NAME (SNI); may be repeated.
    /// `*.example.com` matches one label.
    #[arg(long, value_name = "NAME=CERT,KEY", value_parser = parse_sni, requires = "tls_cert")]
    pub tls_sni: Vec<(String, PathBuf, PathBuf)>,
    /// The TLS versions spoken: both (1.3, and 1.2 for clients without it), or one.
    #[arg(long, value_enum, value_name = "VERSIONS", default_value_t = TlsVersions::Both,
          requires = "tls_cert")]
    pub tls_versions: TlsVersions,
    /// Send no session tickets, so that every handshake is a full one (no resumption;
    /// benchmarks of handshakes use it).
    #[arg(long, requires = "tls_cert")]
    pub tls_no_resumption: bool,
}

/// `--tls-versions`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
#[non_exhaustive]
pub enum TlsVersions {
    /// TLS 1.3, and TLS 1.2 for clients without it.
    #[default]
    Both,
    /// TLS 1.3 only.
    #[value(name = "1.3")]
    Tls13,
    /// TLS 1.2 only.
    #[value(name = "1.2")]
    Tls12,
}

impl TlsServerArgs {
    /// `settings` with what `--tls-versions` and `--tls-no-resumption` ask for.
    pub fn settings(&self, mut settings: ServerSettings) -> ServerSettings {
        match self.tls_versions {
            TlsVersions::Both => {}
            TlsVersions::Tls13 => settings.versions = Versions::Tls13,
            TlsVersions::Tls12 => settings.versions = Versions::Tls12,
        }
        if self.tls_no_resumption {
            settings.tickets = false;
        }
        settings
    }

    /// The TLS server the flags ask for, with `settings` as the flags change them
    /// ([`TlsServerArgs::settings`]): `None` without `--tls-cert`, an error (naming the
    /// files) when the certificates cannot be used.
    pub fn server(&self, settings: ServerSettings) -> Result<Option<TlsServer>, String> {
        let (Some(cert), Some(key)) = (&self.tls_cert, &self.tls_key) else {
            return Ok(None);
        };
        let settings = self.settings(settings);
        let files = TlsFiles {
            cert: cert.clone(),
            key: key.clone(),
            sni: self.tls_sni.clone(),
        };
        let certs = files.load().map_err(|e| format!("TLS certificate: {e}"))?;
        let acceptor =
            TlsAcceptor::new(certs, settings).map_err(|e| format!("TLS configuration: {e}"))?;
        Ok(Some(TlsServer {
            acceptor: Arc::new(acceptor),
            files,
            sink: Arc::new(Mutex::new(Vec::new())),
            hangup: None,
        }))
    }

    /// [`TlsServerArgs::server`], rereading the files on SIGHUP from now on
    /// ([`TlsServer::reload_on_hangup`]); `program` names the logged lines.
    pub fn start(
        &self,
        program: &'static str,
        settings: ServerSettings,
    ) -> Result<Option<TlsServer>, String> {
        let Some(mut server) = self.server(settings)? else {
            return Ok(None);
        };
        server
            .reload_on_hangup(program)
            .map_err(|e| format!("SIGHUP: {e}"))?;
        Ok(Some(server))
    }
}

/// A program's TLS server side: the configuration its workers share, the files it
/// comes from, and the workers' counters once they have stopped.
pub struct TlsServer {
    acceptor: Arc<TlsAcceptor>,
    files: TlsFiles,
    sink: StatsSink,
    hangup: Option<Hangup>,
}

impl TlsServer {
    /// The configuration every worker shares.
    pub fn acceptor(&self) -> &Arc<TlsAcceptor> {
        &self.acceptor
    }

    /// From now until this is dropped, reread the certificate files on every SIGHUP,
    /// for new connections (open ones keep theirs); files that cannot be used leave
    /// the certificates in use as they are. `program` names the logged lines.
    pub fn reload_on_hangup(&mut self, program: &'static str) -> io::Result<()> {
        let (files, acceptor) = (self.files.clone(), self.acceptor.clone());
        self.hangup = Some(on_hangup(move || match files.reload_into(&acceptor) {
            Ok(()) => log::info!(
                "{program}: SIGHUP: reloaded the TLS certificates from {}",
                files.cert.display()
            ),
            Err(e) => log::error!("{program}: SIGHUP: keeping the TLS certificates in use: {e}"),
        })?);
        Ok(())
    }

    /// A factory of worker handlers for [`launch::run`]: `make`'s handler behind TLS,
    /// each leaving its counters for [`TlsServer::log_counters`].
    pub fn wrap<H, F>(&self, make: F) -> impl Fn(&WorkerContext) -> Tls<H> + Clone + Send + 'static
    where
        H: Handler + AppMetrics + 'static,
        F: Fn(&WorkerContext) -> H + Clone + Send + 'static,
    {
        let (acceptor, sink) = (self.acceptor.clone(), self.sink.clone());
        move |ctx: &WorkerContext| {
            Tls::server(make(ctx), acceptor.clone()).with_sink(ctx.index(), sink.clone())
        }
    }

    /// Log each worker's TLS counters (`tls worker N: ...`) and their total (`tls
    /// total: ...`), once the workers have stopped.
    pub fn log_counters(&self) {
        launch::log_counters(&[], Some(("tls", &self.sink, TlsStats::add)));
    }
}

/// [`launch::run`] with `make`'s handlers, behind TLS when `tls` is given.
pub fn run<H, F>(
    launch: &launch::Launch,
    listen: impl Into<launch::Ports>,
    stop: &rusty_runtime::StopHandle,
    tls: Option<&TlsServer>,
    make: F,
    ready: impl FnOnce(),
) -> Result<Vec<rusty_stack::Stats>, launch::LaunchError>
where
    H: Handler + AppMetrics + 'static,
    F: Fn(&WorkerContext) -> H + Clone + Send + 'static,
{
    match tls {
        None => launch::run(launch, listen, stop, make, ready),
        Some(tls) => launch::run(launch, listen, stop, tls.wrap(make), ready),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Debug, Parser)]
    struct Cli {
        #[command(flatten)]
        tls: TlsServerArgs,
    }

    fn parse(args: &[&str]) -> Result<Cli, clap::Error> {
        Cli::try_parse_from(["x"].iter().chain(args))
    }

    #[test]
    fn tls_flags_come_together_and_unusable_files_are_refused() {
        assert!(parse(&["--tls-cert", "c.pem"]).is_err());
        assert!(parse(&["--tls-key", "k.pem"]).is_err());
        assert!(parse(&["--tls-cert", "c", "--tls-key", "k", "--tls-sni", "x=c"]).is_err());
        let plain = parse(&[]).unwrap();
        assert!(plain
            .tls
            .server(ServerSettings::default())
            .unwrap()
            .is_none());
        let missing = parse(&["--tls-cert", "/nonexistent/c.pem", "--tls-key", "k.pem"]).unwrap();
        let e = missing.tls.server(ServerSettings::default()).err();
        let e = e.unwrap_or_default();
        assert!(e.contains("/nonexistent/c.pem"), "{e}");
    }

    #[test]
    fn versions_and_resumption_flags_change_the_settings() {
        assert!(parse(&["--tls-no-resumption"]).is_err());
        assert!(parse(&["--tls-versions", "1.3"]).is_err());
        let plain = parse(&["--tls-cert", "c", "--tls-key", "k"]).unwrap();
        let s = plain.tls.settings(ServerSettings::default());
        assert!(s.tickets);
        assert_eq!(s.versions, Versions::Both);
        let cli = parse(&[
            "--tls-cert",
            "c",
            "--tls-key",
            "k",
            "--tls-versions",
            "1.3",
            "--tls-no-resumption",
        ])
        .unwrap();
        let s = cli.tls.settings(ServerSettings::default());
        assert!(!s.tickets);
        assert_eq!(s.versions, Versions::Tls13);
        let v12 = parse(&["--tls-cert", "c", "--tls-key", "k", "--tls-versions", "1.2"]).unwrap();
        assert_eq!(
            v12.tls.settings(ServerSettings::default()).versions,
            Versions::Tls12
        );
        assert!(parse(&["--tls-cert", "c", "--tls-key", "k", "--tls-versions", "1.1"]).is_err());
    }
}
