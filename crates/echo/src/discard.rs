//! The discard server's handler (RFC 863): every byte received is consumed and dropped,
//! nothing is ever sent; when the peer closes its side, we close ours.
//!
//! A sink for bulk transfers: with nothing to send, a connection's cost is the
//! receiving side of TCP alone (ACKs, SACK blocks, window updates), which is what a
//! receive benchmark wants to measure.

use std::sync::{Arc, Mutex};

use rusty_stack::{CloseReason, Conn, Handler, Opener};

/// What a discard worker took in.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct DiscardStats {
    /// Bytes received and dropped.
    pub bytes: u64,
    /// Connections accepted.
    pub connections: u64,
    /// Connections that ended other than by both sides closing (reset, timed out,
    /// aborted).
    pub failed: u64,
}

impl DiscardStats {
    /// Add another worker's counters to these.
    pub fn add(&mut self, other: &DiscardStats) {
        self.bytes += other.bytes;
        self.connections += other.connections;
        self.failed += other.failed;
    }
}

impl std::fmt::Display for DiscardStats {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} bytes discarded on {} connections ({} failed)",
            self.bytes, self.connections, self.failed
        )
    }
}

/// Where workers leave their counters when they end: (worker index, counters).
pub type DiscardSink = Arc<Mutex<Vec<(usize, DiscardStats)>>>;

/// Discards on every connection. Counting is per worker, in plain integers; the
/// counters reach `sink` (if any) once, when the worker drops its handler.
#[derive(Debug, Default)]
pub struct DiscardServer {
    /// This worker's counters so far.
    pub stats: DiscardStats,
    sink: Option<(usize, DiscardSink)>,
}

impl DiscardServer {
    /// Leave this worker's counters in `sink` (as worker `index`) when it is dropped.
    pub fn with_sink(mut self, index: usize, sink: DiscardSink) -> DiscardServer {
        self.sink = Some((index, sink));
        self
    }
}

impl Drop for DiscardServer {
    fn drop(&mut self) {
        if let Some((index, sink)) = &self.sink {
            if let Ok(mut v) = sink.lock() {
                v.push((*index, self.stats));
            }
        }
    }
}

impl Handler for DiscardServer {
    type Conn = ();

    fn accept(
        &mut self,
        _local: std::net::SocketAddr,
        _remote: std::net::SocketAddr,
    ) -> Option<()> {
        self.stats.connections += 1;
        Some(())
    }

    fn data(&mut self, _conn: &mut Conn<'_, ()>, data: &[u8]) -> usize {
        self.stats.bytes += data.len() as u64;
        data.len()
    }

    fn peer_closed(&mut self, conn: &mut Conn<'_, ()>) {
        conn.close();
    }

    fn closed(&mut self, _opener: &mut Opener<'_, ()>, _state: (), reason: CloseReason) {
        if reason != CloseReason::Normal {
            self.stats.failed += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rusty_stack::io::fault::FaultConfig;
    use rusty_testkit::sim::{self, SimPair};
    use std::time::Duration;

    /// Opens `conns` connections, sends `size` bytes on each, then half-closes and
    /// waits for the server's FIN, counting whatever comes back.
    struct Sender {
        conns: usize,
        size: u64,
        started: bool,
        block: Vec<u8>,
        received: u64,
        closed: Vec<CloseReason>,
    }

    /// Bytes queued so far, and whether our FIN is.
    type Progress = (u64, bool);

    impl Sender {
        fn push(&mut self, conn: &mut Conn<'_, Progress>) {
            let (mut sent, shut) = *conn.state();
            while sent < self.size {
                let want = (self.size - sent).min(self.block.len() as u64) as usize;
                match conn.send(&self.block[..want]) {
                    Ok(n) if n > 0 => sent += n as u64,
                    _ => break,
                }
            }
            if sent == self.size && !shut {
                conn.shutdown_write();
            }
            *conn.state() = (sent, sent == self.size);
        }
    }

    impl Handler for Sender {
        type Conn = Progress;

        fn accept(&mut self, _: std::net::SocketAddr, _: std::net::SocketAddr) -> Option<Progress> {
            None
        }
        fn poll(&mut self, opener: &mut Opener<'_, Progress>) {
            if !self.started {
                self.started = true;
                for _ in 0..self.conns {
                    opener.connect(std::net::SocketAddr::from((sim::SERVER_IP, 9)), (0, false));
                }
            }
        }
        fn connected(&mut self, conn: &mut Conn<'_, Progress>) {
            self.push(conn);
        }
        fn writable(&mut self, conn: &mut Conn<'_, Progress>) {
            self.push(conn);
        }
        fn data(&mut self, _: &mut Conn<'_, Progress>, data: &[u8]) -> usize {
            self.received += data.len() as u64;
            data.len()
        }
        fn closed(&mut self, _: &mut Opener<'_, Progress>, _: Progress, reason: CloseReason) {
            self.closed.push(reason);
        }
    }

    fn run(conns: usize, size: u64, faults: FaultConfig) {
        let sender = Sender {
            conns,
            size,
            started: false,
            block: (0..16_384u32).map(|i| (i % 251) as u8).collect(),
            received: 0,
            closed: Vec::new(),
        };
        let sink = DiscardSink::default();
        let mut net = SimPair::new(
            sender,
            sim::engine_config(sim::CLIENT_IP, 5),
            DiscardServer::default().with_sink(0, sink.clone()),
            sim::engine_config(sim::SERVER_IP, 5),
            faults,
            faults,
            5,
        );
        net.server.listen(9, 128);
        let done = net.run_until(Duration::from_secs(600), |n| {
            n.client.handler().closed.len() == conns && n.server.connection_count() == 0
        });
        assert!(done, "transfers did not finish: {}", net.client.stats());
        let client = net.client.handler();
        assert!(client.closed.iter().all(|r| *r == CloseReason::Normal));
        assert_eq!(client.received, 0, "a discard server sends nothing");
        let want = DiscardStats {
            bytes: size * conns as u64,
            connections: conns as u64,
            failed: 0,
        };
        assert_eq!(net.server.handler().stats, want);
        drop(net);
        assert_eq!(*sink.lock().unwrap(), vec![(0, want)]);
    }

    #[test]
    fn consumes_everything_and_closes_after_the_peer() {
        run(4, 300_000, FaultConfig::none());
    }

    #[test]
    fn consumes_everything_under_loss_both_ways() {
        let f = {
            let mut c = FaultConfig::none();
            c.loss = 0.03;
            c
        };
        run(3, 200_000, f);
    }
}
