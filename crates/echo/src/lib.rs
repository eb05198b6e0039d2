//! # rusty-echo
//!
//! An echo server, a discard server (RFC 863) and a load client, written once against
//! Rusty's [`Handler`] API, so they run unchanged on Rusty's own stack (TAP) and on the
//! kernel's sockets.
//!
//! [`Handler`]: rusty_stack::Handler

#![warn(missing_docs)]

// `client` holds what the load-client binaries share, `load` the pieces the WebSocket
// load client reuses; the discard server is reached through the re-exports.
pub mod client;
mod discard;
pub mod load;
mod metrics;
pub mod server;

pub use discard::{DiscardServer, DiscardSink, DiscardStats};
pub use load::{Collector, LoadClient, LoadConfig, Mode, Report};
pub use server::EchoServer;

#[cfg(test)]
mod tests {
    use super::*;
    use rusty_stack::io::fault::FaultConfig;
    use rusty_testkit::sim::{self, SimPair};
    use std::net::SocketAddr;
    use std::time::Duration;

    fn run(mode: Mode, faults: FaultConfig) -> Report {
        let collector = Collector::new();
        let cfg = LoadConfig {
            target: SocketAddr::from((sim::SERVER_IP, 7)),
            mode,
            connections: 8,
            size: 512,
            // Wall-clock duration: the load client times itself with the real clock.
            duration: Duration::from_millis(200),
        };
        let mut net = SimPair::new(
            LoadClient::new(cfg, 0, collector.clone()),
            sim::engine_config(sim::CLIENT_IP, 3),
            EchoServer::default(),
            sim::engine_config(sim::SERVER_IP, 3),
            faults,
            faults,
            3,
        );
        net.server.listen(7, 128);
        let done = net.run_until(Duration::from_secs(3600), |_| collector.finished() == 1);
        assert!(done, "load run did not finish: {}", net.client.stats());
        collector.total()
    }

    #[test]
    fn ping_pong_verifies_every_byte() {
        let r = run(Mode::PingPong, FaultConfig::none());
        assert!(r.messages > 100, "{r:?}");
        assert_eq!((r.failed, r.mismatches), (0, 0));
        assert_eq!(r.latency_us.len(), r.messages);
    }

    #[test]
    fn streaming_survives_loss_and_reordering() {
        let f = {
            let mut c = FaultConfig::none();
            c.loss = 0.02;
            c.reorder = 0.05;
            c.reorder_delay = Duration::from_millis(2);
            c
        };
        let r = run(Mode::Stream, f);
        assert!(r.bytes > 1 << 20, "{r:?}");
        assert_eq!((r.failed, r.mismatches), (0, 0));
    }
}
