//! The server role as a Rusty [`Handler`]: it reads the opening handshake, lets the
//! application accept or refuse it, and then runs the frame loop. Any `Handler`
//! runtime runs it: Rusty's stack, the kernel-socket backend, the simulator.

use std::sync::{Arc, Mutex};

use rusty_stack::{Conn, Handler};

use crate::app::WsServerApp;
use crate::config::WsConfig;
use crate::deflate;
use crate::extension::DeflateCodec;
use crate::handshake::{switching_protocols, HeadError, HeadProgress, Reject, Request};
use crate::parser::Role;
use crate::session::{endpoint_accessors, handler_callbacks, send_all, Endpoint, Phase, WsConn};
use crate::stats::WsStats;

/// Where workers leave their counters when they drop their server (see
/// [`WsServer::with_sink`]), as (worker index, counters).
pub type WsStatsSink = Arc<Mutex<Vec<(usize, WsStats)>>>;

/// A WebSocket server running application `A`, one per worker.
pub struct WsServer<A> {
    app: A,
    cfg: WsConfig,
    stats: WsStats,
    sink: Option<(usize, WsStatsSink)>,
}

impl<A: WsServerApp> WsServer<A> {
    /// A server with limits `cfg`.
    pub fn new(app: A, cfg: WsConfig) -> WsServer<A> {
        WsServer {
            app,
            cfg,
            stats: WsStats::default(),
            sink: None,
        }
    }

    /// Leave this worker's counters in `sink` (as worker `index`) when it is dropped,
    /// for a binary to print once its workers stop.
    pub fn with_sink(mut self, index: usize, sink: WsStatsSink) -> WsServer<A> {
        self.sink = Some((index, sink));
        self
    }

    endpoint_accessors!();

    /// Answer with an HTTP error and close.
    fn reject(&mut self, conn: &mut Conn<'_, WsConn<A::State>>, r: &Reject) {
        self.stats.rejected += 1;
        log::debug!(
            "websocket {}: handshake refused with {}",
            conn.peer_addr(),
            r.status()
        );
        conn.state().phase = Phase::Closed;
        conn.state().head.clear();
        let _ = send_all(conn, &r.to_bytes());
        conn.close();
    }

    /// Read the upgrade request (§4.2.1); returns how many bytes were consumed (frames
    /// right behind the request are processed too).
    fn handshake(&mut self, conn: &mut Conn<'_, WsConn<A::State>>, data: &[u8]) -> usize {
        let used = match conn.state().head.push(data, self.cfg.max_handshake) {
            HeadProgress::Partial => return data.len(),
            HeadProgress::TooLarge => {
                self.reject(conn, &Reject::new(431).body("request head too large\n"));
                return data.len();
            }
            HeadProgress::Complete(n) => n,
        };
        let req = match Request::parse(conn.state().head.bytes()) {
            Ok(r) => r,
            Err(HeadError::TooManyHeaders) => {
                self.reject(conn, &Reject::new(431).body("too many header lines\n"));
                return data.len();
            }
            Err(HeadError::Malformed) => {
                self.reject(conn, &Reject::new(400).body("malformed request\n"));
                return data.len();
            }
        };
        let accept_key = match req.validate() {
            Ok(k) => k,
            Err(r) => {
                self.reject(conn, &r);
                return data.len();
            }
        };
        let mut accept = match self.app.open(&req, conn.peer_addr()) {
            Ok(a) => a,
            Err(r) => {
                self.stats.rejected_by_app += 1;
                self.reject(conn, &r);
                return data.len();
            }
        };
        // permessage-deflate, unless the application chose an extension itself.
        if accept.extension.is_none() && self.cfg.deflate.enabled {
            let offers = req.extensions().collect::<Vec<_>>().join(", ");
            if let Some((neg, response)) = deflate::negotiate(&offers, &self.cfg.deflate) {
                let codec = DeflateCodec::new(&neg, deflate::Role::Server, &self.cfg.deflate);
                accept.extension = Some((Box::new(codec), response));
                self.stats.deflate += 1;
            }
        }
        let ext = accept.extension.as_ref().map(|(_, v)| v.as_str());
        let resp = switching_protocols(
            &accept_key,
            accept.protocol.as_deref(),
            ext,
            &accept.headers,
        );
        let _ = send_all(conn, &resp);
        let st = conn.state();
        st.app = Some(accept.state);
        st.protocol = accept.protocol;
        if let Some((codec, _)) = accept.extension {
            st.set_codec(codec);
        }
        let mut ep = self.endpoint();
        ep.opened(conn);
        used + ep.frames(conn, &data[used..])
    }
}

impl<A> Drop for WsServer<A> {
    fn drop(&mut self) {
        if let Some((index, sink)) = &self.sink {
            if let Ok(mut v) = sink.lock() {
                v.push((*index, self.stats));
            }
        }
    }
}

impl<A: WsServerApp> Handler for WsServer<A> {
    type Conn = WsConn<A::State>;

    fn accept(
        &mut self,
        _local: std::net::SocketAddr,
        _remote: std::net::SocketAddr,
    ) -> Option<WsConn<A::State>> {
        Some(WsConn::new(Role::Server, &self.cfg, None))
    }

    fn connected(&mut self, conn: &mut Conn<'_, Self::Conn>) {
        conn.set_timer(self.cfg.handshake_timeout);
    }

    handler_callbacks!();
}
