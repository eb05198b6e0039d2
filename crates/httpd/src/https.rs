//! HTTPS: [`Https`] runs the same [`HttpServer`] behind `rusty-tls` on the TLS port and
//! directly on the plain one, in one handler per worker; [`TlsFiles`] names the PEM
//! files its certificates come from, read at start and again on reload.
//!
//! Bodies: the server queues a file's body by reference with its precomputed checksum
//! prefix sums (`send_summed`), as without TLS. The TLS layer keeps the reference and
//! encrypts from the cached bytes, a record at a time, as TCP's send buffer frees room;
//! the sums are not used (they describe the plaintext), so the ciphertext is checksummed
//! as any other payload: by the device where it can, by the stack where it cannot.

use std::fmt;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use rusty_stack::{CloseReason, Conn, Handler, Opener};
use rusty_tls::{CertKey, Certificates, ConfigError, Tls, TlsAcceptor, TlsConn, TlsStats};

use crate::server::{HttpConn, HttpServer};

/// Where the server's certificates are: the default chain and key, and one more of each
/// per server name (SNI).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TlsFiles {
    /// The default certificate chain (PEM, leaf first).
    pub cert: PathBuf,
    /// Its private key (PEM).
    pub key: PathBuf,
    /// `(name, chain, key)`: the certificate for clients that ask for `name`.
    pub sni: Vec<(String, PathBuf, PathBuf)>,
}

/// What is wrong with one of the [`TlsFiles`]: which files, and why.
#[derive(Debug)]
pub struct TlsFilesError {
    /// The chain and key files that could not be used.
    pub files: String,
    /// Why.
    pub error: ConfigError,
}

impl fmt::Display for TlsFilesError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.files, self.error)
    }
}

impl std::error::Error for TlsFilesError {}

impl TlsFiles {
    /// Read every file now.
    pub fn load(&self) -> Result<Certificates, TlsFilesError> {
        let pair = |cert: &PathBuf, key: &PathBuf| {
            CertKey::from_pem_files(cert, key).map_err(|error| TlsFilesError {
                files: format!("{} and {}", cert.display(), key.display()),
                error,
            })
        };
        let mut certs = Certificates::new(pair(&self.cert, &self.key)?);
        for (name, cert, key) in &self.sni {
            certs = certs.add(name, pair(cert, key)?);
        }
        Ok(certs)
    }

    /// Read every file again and serve what they hold to new connections; on any
    /// error, keep serving the certificates held so far.
    pub fn reload_into(&self, acceptor: &TlsAcceptor) -> Result<(), TlsFilesError> {
        let certs = self.load()?;
        acceptor.reload(certs).map_err(|error| TlsFilesError {
            files: format!("{} and {}", self.cert.display(), self.key.display()),
            error,
        })
    }
}

/// Parse `--tls-sni NAME=CERT,KEY`.
pub fn parse_sni(s: &str) -> Result<(String, PathBuf, PathBuf), String> {
    let bad = || format!("'{s}' is not NAME=CERT,KEY");
    let (name, files) = s.split_once('=').ok_or_else(bad)?;
    let (cert, key) = files.split_once(',').ok_or_else(bad)?;
    if name.is_empty() || cert.is_empty() || key.is_empty() {
        return Err(bad());
    }
    Ok((name.to_string(), cert.into(), key.into()))
}

/// One worker's counters of TLS, left where [`Https`] is told when it is dropped.
pub type TlsStatsSink = rusty::launch::CounterSink<TlsStats>;

/// Which of the listening ports speak TLS.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TlsPorts {
    /// Every one.
    All,
    /// Only this one; the others speak plain HTTP.
    Only(u16),
}

/// A connection of [`Https`]: plain HTTP, or HTTP inside TLS.
#[derive(Debug)]
pub enum HttpsConn {
    /// On a plain port.
    Plain(HttpConn),
    /// On the TLS port.
    Tls(TlsConn<HttpConn>),
}

/// One worker's handler: the [`HttpServer`] behind TLS on the TLS port(s), and directly
/// on the others. The same server (its counters, its connection limit) serves both.
pub struct Https {
    tls: Tls<HttpServer>,
    ports: TlsPorts,
    worker: usize,
    sink: Option<TlsStatsSink>,
}

impl Https {
    /// `server` behind TLS with `acceptor`'s configuration on `ports`.
    pub fn new(server: HttpServer, acceptor: Arc<TlsAcceptor>, ports: TlsPorts) -> Https {
        Https {
            tls: Tls::server(server, acceptor),
            ports,
            worker: 0,
            sink: None,
        }
    }

    /// Leave this worker's TLS counters in `sink` (as worker `index`) when it is dropped.
    pub fn with_sink(mut self, index: usize, sink: TlsStatsSink) -> Https {
        self.worker = index;
        self.sink = Some(sink);
        self
    }

    /// This worker's TLS counters so far.
    pub fn tls_stats(&self) -> &TlsStats {
        self.tls.stats()
    }

    /// Run one callback on `conn`, as the plain server's or as the TLS layer's. Neither
    /// opens connections, so the opener each is given is a throwaway.
    fn dispatch<R>(
        &mut self,
        conn: &mut Conn<'_, HttpsConn>,
        plain: impl FnOnce(&mut HttpServer, &mut Conn<'_, HttpConn>) -> R,
        tls: impl FnOnce(&mut Tls<HttpServer>, &mut Conn<'_, TlsConn<HttpConn>>) -> R,
    ) -> R {
        let id = conn.id();
        let (ops, state, _) = conn.split();
        match state {
            HttpsConn::Plain(s) => {
                let mut opens = Vec::new();
                plain(self.tls.inner_mut(), &mut Conn::new(id, ops, s, &mut opens))
            }
            HttpsConn::Tls(s) => {
                let mut opens = Vec::new();
                tls(&mut self.tls, &mut Conn::new(id, ops, s, &mut opens))
            }
        }
    }
}

impl Drop for Https {
    fn drop(&mut self) {
        if let Some(sink) = &self.sink {
            if let Ok(mut v) = sink.lock() {
                v.push((self.worker, self.tls.stats().clone()));
            }
        }
    }
}

impl Handler for Https {
    type Conn = HttpsConn;

    fn accept(&mut self, local: SocketAddr, remote: SocketAddr) -> Option<HttpsConn> {
        match self.ports {
            TlsPorts::Only(p) if p != local.port() => self
                .tls
                .inner_mut()
                .accept(local, remote)
                .map(HttpsConn::Plain),
            _ => self.tls.accept(local, remote).map(HttpsConn::Tls),
        }
    }

    fn connected(&mut self, conn: &mut Conn<'_, HttpsConn>) {
        self.dispatch(conn, |h, c| h.connected(c), |h, c| h.connected(c));
    }

    fn data(&mut self, conn: &mut Conn<'_, HttpsConn>, data: &[u8]) -> usize {
        self.dispatch(conn, |h, c| h.data(c, data), |h, c| h.data(c, data))
    }

    fn writable(&mut self, conn: &mut Conn<'_, HttpsConn>) {
        self.dispatch(conn, |h, c| h.writable(c), |h, c| h.writable(c));
    }

    fn peer_closed(&mut self, conn: &mut Conn<'_, HttpsConn>) {
        self.dispatch(conn, |h, c| h.peer_closed(c), |h, c| h.peer_closed(c));
    }

    fn timer(&mut self, conn: &mut Conn<'_, HttpsConn>) {
        self.dispatch(conn, |h, c| h.timer(c), |h, c| h.timer(c));
    }

    fn closed(&mut self, _: &mut Opener<'_, HttpsConn>, state: HttpsConn, reason: CloseReason) {
        match state {
            HttpsConn::Plain(s) => {
                let mut opens = Vec::new();
                let opener = &mut Opener::new(&mut opens);
                self.tls.inner_mut().closed(opener, s, reason);
            }
            HttpsConn::Tls(s) => {
                let mut opens = Vec::new();
                self.tls.closed(&mut Opener::new(&mut opens), s, reason);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sni_flags_parse_or_say_why_not() {
        assert_eq!(
            parse_sni("a.example=a.pem,a.key").unwrap(),
            ("a.example".to_string(), "a.pem".into(), "a.key".into())
        );
        for bad in ["a.example", "a.example=a.pem", "=a,b", "a=,b", "a=b,"] {
            assert!(parse_sni(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn unreadable_files_are_named_in_the_error() {
        let files = TlsFiles {
            cert: "/nonexistent/chain.pem".into(),
            key: "/nonexistent/key.pem".into(),
            sni: Vec::new(),
        };
        let e = files.load().expect_err("no such files");
        assert!(e.to_string().contains("/nonexistent/chain.pem"), "{e}");
    }
}
