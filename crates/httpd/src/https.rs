//! HTTPS: [`Https`] runs the same [`HttpServer`] behind `rusty-tls` on the TLS port and
//! directly on the plain one, in one handler per worker.
//!
//! Bodies: the server queues a file's body by reference with its precomputed checksum
//! prefix sums (`send_summed`), as without TLS. The TLS layer keeps the reference and
//! encrypts from the cached bytes, a record at a time, as TCP's send buffer frees room;
//! the sums are not used (they describe the plaintext), so the ciphertext is checksummed
//! as any other payload: by the device where it can, by the stack where it cannot.

use std::net::SocketAddr;

use rusty_stack::{CloseReason, Conn, Handler, Opener};
use rusty_tls::{Tls, TlsConn, TlsStats};

use crate::server::{HttpConn, HttpServer};

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
}

impl Https {
    /// The server in `tls` behind TLS on `ports`, and directly on the others.
    pub fn new(tls: Tls<HttpServer>, ports: TlsPorts) -> Https {
        Https { tls, ports }
    }

    /// This worker's TLS counters so far.
    pub fn tls_stats(&self) -> &TlsStats {
        self.tls.stats()
    }

    /// The TLS layer, with the server inside it.
    pub fn tls(&self) -> &Tls<HttpServer> {
        &self.tls
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
