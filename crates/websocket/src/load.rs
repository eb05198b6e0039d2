//! The WebSocket load client's application (`ws-load`): a number of connections per
//! worker against an echo server, each sending one binary message and waiting for its
//! echo before the next (ping-pong, as LAppS's echo benchmark runs), verifying every
//! byte and timing every round trip. It reports into `rusty-echo`'s [`Collector`], so
//! its output is `echo-load`'s and the benchmark scripts read both alike.
//!
//! Message `i` of a connection is the `size` bytes of the shared pattern block at an
//! offset of the connection's own that moves on with each message, so an echo that
//! came back from the wrong connection or out of order is a mismatch.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rusty_echo::load::{pattern, Run, PATTERN_LEN};
use rusty_echo::Collector;
#[cfg(test)]
use rusty_echo::Report;

use crate::app::{CloseInfo, Message, WsApp};
use crate::client::Connector;
use crate::close;
use crate::handshake::ClientRequest;
use crate::session::WsHandle;

/// What one worker of the load client does.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct LoadConfig {
    /// The echo server.
    pub target: SocketAddr,
    /// The request path.
    pub path: String,
    /// Connections for this worker.
    pub connections: usize,
    /// Message size in bytes (at most the pattern's, 65,521).
    pub size: usize,
    /// How long to run; each connection then closes after its last echo.
    pub duration: Duration,
}

impl LoadConfig {
    /// Load on the echo server at `target`, path `path`: what `ws-load` does by
    /// default, 240 connections of 128-byte messages for 10 seconds.
    pub fn new(target: SocketAddr, path: impl Into<String>) -> LoadConfig {
        LoadConfig {
            target,
            path: path.into(),
            connections: 240,
            size: 128,
            duration: Duration::from_secs(10),
        }
    }
}

/// Per-connection state.
#[derive(Debug)]
pub struct LoadConn {
    /// Where in the pattern this connection's messages start.
    base: usize,
    /// Messages echoed so far.
    echoed: u64,
    /// When the outstanding message went out.
    sent_at: Option<Instant>,
}

/// One worker's load application (run it as `WsClient<WsLoad>`).
pub struct WsLoad {
    cfg: LoadConfig,
    pattern: Arc<Vec<u8>>,
    /// Index of this worker's first connection among all workers'.
    first: usize,
    run: Run,
}

impl WsLoad {
    /// Worker `worker`'s application: its connections are numbered after those of the
    /// workers before it, so no two connections share pattern offsets.
    pub fn new(cfg: LoadConfig, worker: usize, collector: Collector) -> WsLoad {
        assert!(
            (1..PATTERN_LEN).contains(&cfg.size),
            "message size must be 1..{PATTERN_LEN}"
        );
        WsLoad {
            first: worker * cfg.connections,
            run: Run::new(cfg.duration, collector),
            cfg,
            pattern: pattern(),
        }
    }

    /// Message `n` of the connection starting at `base`.
    fn message_bytes(&self, base: usize, n: u64) -> &[u8] {
        let span = (PATTERN_LEN - self.cfg.size) as u64;
        let start = ((base as u64 + n.wrapping_mul(7919)) % span) as usize;
        &self.pattern[start..start + self.cfg.size]
    }

    fn send_next(&mut self, ws: &mut WsHandle<'_, '_, LoadConn>) {
        if self.run.expired() {
            let _ = ws.close(close::NORMAL, "");
            return;
        }
        let (base, n) = {
            let st = ws.state();
            (st.base, st.echoed)
        };
        let msg = self.message_bytes(base, n);
        match ws.send_binary(msg) {
            Ok(()) => ws.state().sent_at = Some(Instant::now()),
            Err(_) => {
                self.run.report.failed += 1;
                let _ = ws.close(close::NORMAL, "");
            }
        }
    }
}

impl WsApp for WsLoad {
    type State = LoadConn;

    fn opened(&mut self, ws: &mut WsHandle<'_, '_, LoadConn>) {
        self.send_next(ws);
    }

    fn message(&mut self, ws: &mut WsHandle<'_, '_, LoadConn>, msg: Message<'_>) {
        let (base, n) = {
            let st = ws.state();
            (st.base, st.echoed)
        };
        if msg.as_bytes() != self.message_bytes(base, n) {
            self.run.report.mismatches += 1;
            let _ = ws.close(close::NORMAL, "mismatch");
            return;
        }
        let st = ws.state();
        st.echoed += 1;
        if let Some(t) = st.sent_at.take() {
            let us = t.elapsed().as_micros().clamp(1, 60_000_000) as u64;
            let _ = self.run.report.latency_us.record(us);
        }
        self.run.report.messages += 1;
        self.run.report.bytes += msg.len() as u64;
        self.send_next(ws);
    }

    fn closed(&mut self, _state: LoadConn, info: CloseInfo) {
        let failed = !(info.clean && info.code == close::NORMAL);
        if failed {
            log::debug!("ws-load: connection ended: {info:?}");
        }
        self.run.closed(failed);
    }

    fn poll(&mut self, connector: &mut Connector<'_, '_, LoadConn>) {
        if self.run.start() {
            let host = self.cfg.target.to_string();
            for i in 0..self.cfg.connections {
                let request = ClientRequest::new(&host, &self.cfg.path);
                let id = self.first + i;
                let state = LoadConn {
                    base: id.wrapping_mul(104_729) % PATTERN_LEN,
                    echoed: 0,
                    sent_at: None,
                };
                connector.connect(self.cfg.target, request, state);
                self.run.opened();
            }
        }
        self.run.finish_if_done();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{WsClient, WsConfig, WsEcho, WsServer};
    use rusty_stack::io::fault::FaultConfig;
    use rusty_testkit::sim::{self, SimPair};

    /// The load client against `ws-echo`'s application over the simulated link: every
    /// connection opens from `poll`, every echo is verified, and the run reports.
    fn run(faults: FaultConfig, size: usize) -> Report {
        let collector = Collector::new();
        let cfg = LoadConfig {
            target: SocketAddr::from((sim::SERVER_IP, 9001)),
            path: "/".into(),
            connections: 6,
            size,
            // Wall-clock: the client times itself with the real clock.
            duration: Duration::from_millis(200),
        };
        let client = WsClient::new(WsLoad::new(cfg, 0, collector.clone()), WsConfig::default());
        let mut net = SimPair::new(
            client,
            sim::engine_config(sim::CLIENT_IP, 5),
            WsServer::new(WsEcho, WsConfig::default()),
            sim::engine_config(sim::SERVER_IP, 5),
            faults,
            faults,
            5,
        );
        net.server.listen(9001, 16);
        let done = net.run_until(Duration::from_secs(3600), |_| collector.finished() == 1);
        assert!(done, "the load run did not finish: {}", net.client.stats());
        collector.total()
    }

    #[test]
    fn echoes_are_verified_and_counted() {
        for size in [1, 128, 8192] {
            let r = run(FaultConfig::none(), size);
            assert!(r.messages > 60, "{size}: {r:?}");
            assert_eq!((r.failed, r.mismatches), (0, 0), "{size}");
            assert_eq!(r.bytes, r.messages * size as u64);
            assert_eq!(r.latency_us.len(), r.messages);
        }
    }

    #[test]
    fn survives_loss_and_reordering() {
        let f = {
            let mut c = FaultConfig::none();
            c.loss = 0.02;
            c.reorder = 0.05;
            c.reorder_delay = Duration::from_millis(2);
            c
        };
        let r = run(f, 1024);
        assert!(r.messages > 6, "{r:?}");
        assert_eq!((r.failed, r.mismatches), (0, 0));
    }

    /// Echoes every message with its first byte flipped.
    struct Corrupting;

    impl WsApp for Corrupting {
        type State = ();
        fn message(&mut self, ws: &mut WsHandle<'_, '_, ()>, msg: Message<'_>) {
            let mut bytes = msg.as_bytes().to_vec();
            bytes[0] ^= 1;
            let _ = ws.send_binary(&bytes);
        }
    }

    impl crate::WsServerApp for Corrupting {
        fn open(
            &mut self,
            _req: &crate::Request,
            _peer: SocketAddr,
        ) -> Result<crate::Accept<()>, crate::Reject> {
            Ok(crate::Accept::new(()))
        }
    }

    #[test]
    fn a_wrong_echo_is_a_mismatch() {
        let collector = Collector::new();
        let cfg = LoadConfig {
            target: SocketAddr::from((sim::SERVER_IP, 9001)),
            path: "/".into(),
            connections: 3,
            size: 64,
            duration: Duration::from_millis(100),
        };
        let client = WsClient::new(WsLoad::new(cfg, 0, collector.clone()), WsConfig::default());
        let mut net = SimPair::new(
            client,
            sim::engine_config(sim::CLIENT_IP, 9),
            WsServer::new(Corrupting, WsConfig::default()),
            sim::engine_config(sim::SERVER_IP, 9),
            FaultConfig::none(),
            FaultConfig::none(),
            9,
        );
        net.server.listen(9001, 16);
        assert!(net.run_until(Duration::from_secs(3600), |_| collector.finished() == 1));
        let r = collector.total();
        assert_eq!((r.messages, r.mismatches), (0, 3), "{r:?}");
    }

    #[test]
    fn messages_differ_between_connections_and_turns() {
        let load = WsLoad::new(
            LoadConfig {
                target: SocketAddr::from((sim::SERVER_IP, 9001)),
                path: "/".into(),
                connections: 2,
                size: 64,
                duration: Duration::from_secs(1),
            },
            0,
            Collector::new(),
        );
        // Two connections' first messages differ, and one connection's messages move on.
        assert_ne!(load.message_bytes(0, 0), load.message_bytes(104_729, 0));
        assert_ne!(load.message_bytes(0, 0), load.message_bytes(0, 1));
    }
}
