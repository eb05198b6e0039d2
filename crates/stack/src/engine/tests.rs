//! Engine tests on the simulated wire: whole connections between two engines.

use std::net::SocketAddrV4;
use std::time::Duration;

use super::*;
use crate::io::fault::FaultConfig;
use crate::sim::{self, SimPair, SERVER_IP};

/// Echoes everything; closes when the peer does.
#[derive(Default)]
pub(crate) struct Echo {
    pub closed: Vec<CloseReason>,
}

impl Handler for Echo {
    type Conn = ();
    fn accept(&mut self, _: SocketAddrV4, _: SocketAddrV4) -> Option<()> {
        Some(())
    }
    fn data(&mut self, conn: &mut Conn<'_, ()>, data: &[u8]) -> usize {
        conn.send(data).unwrap_or(0)
    }
    fn writable(&mut self, _conn: &mut Conn<'_, ()>) {}
    fn peer_closed(&mut self, conn: &mut Conn<'_, ()>) {
        conn.close();
    }
    fn closed(&mut self, _: &mut Opener<'_, ()>, _: (), reason: CloseReason) {
        self.closed.push(reason);
    }
}

/// Sends `payload`, half-closes, collects the echo.
pub(crate) struct Sender {
    pub payload: Vec<u8>,
    pub sent: usize,
    pub received: Vec<u8>,
    pub closed: Vec<CloseReason>,
    pub peer_closed: bool,
}

impl Sender {
    fn pump(&mut self, conn: &mut Conn<'_, ()>) {
        while self.sent < self.payload.len() {
            let n = conn.send(&self.payload[self.sent..]).unwrap_or(0);
            self.sent += n;
            if n == 0 {
                break;
            }
        }
        if self.sent == self.payload.len() {
            conn.shutdown_write();
        }
    }
}

impl Handler for Sender {
    type Conn = ();
    fn accept(&mut self, _: SocketAddrV4, _: SocketAddrV4) -> Option<()> {
        None
    }
    fn connected(&mut self, conn: &mut Conn<'_, ()>) {
        self.pump(conn);
    }
    fn writable(&mut self, conn: &mut Conn<'_, ()>) {
        self.pump(conn);
    }
    fn data(&mut self, _: &mut Conn<'_, ()>, data: &[u8]) -> usize {
        self.received.extend_from_slice(data);
        data.len()
    }
    fn peer_closed(&mut self, _: &mut Conn<'_, ()>) {
        self.peer_closed = true;
    }
    fn closed(&mut self, _: &mut Opener<'_, ()>, _: (), reason: CloseReason) {
        self.closed.push(reason);
    }
}

fn pattern(n: usize, seed: u8) -> Vec<u8> {
    (0..n).map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed)).collect()
}

fn echo_once(len: usize, faults: FaultConfig, seed: u64) {
    let payload = pattern(len, seed as u8);
    let sender = Sender {
        payload: payload.clone(),
        sent: 0,
        received: Vec::new(),
        closed: Vec::new(),
        peer_closed: false,
    };
    let mut net = SimPair::new(
        sender,
        sim::engine_config(sim::CLIENT_IP, seed),
        Echo::default(),
        sim::engine_config(SERVER_IP, seed),
        faults,
        faults,
        seed,
    );
    net.server.listen(7, 128);
    net.client
        .connect(SocketAddrV4::new(SERVER_IP, 7), ())
        .map_err(|(e, _)| e)
        .expect("connect");
    let done = net.run_until(Duration::from_secs(600), |n| {
        !n.client.handler().closed.is_empty() && n.server.connection_count() == 0
    });
    let c = net.client.handler();
    assert!(done, "seed {seed}: not finished; client {:?} server {:?}", net.client.stats(), net.server.stats());
    assert_eq!(c.received.len(), payload.len(), "seed {seed}");
    assert!(c.received == payload, "seed {seed}: echo differs");
    assert_eq!(c.closed, vec![CloseReason::Normal]);
    assert!(c.peer_closed);
    assert_eq!(net.server.handler().closed, vec![CloseReason::Normal]);
    eprintln!("seed {seed}: t={:?} client {} / server {} / faults {:?}", net.now(), net.client.stats(), net.server.stats(), net.client.device().stats());
}

#[test]
fn echo_small_clean() {
    echo_once(100, FaultConfig::none(), 1);
}

#[test]
fn echo_large_clean() {
    echo_once(1 << 20, FaultConfig::none(), 2);
}

#[test]
fn echo_with_loss() {
    let f = FaultConfig {
        loss: 0.05,
        ..FaultConfig::none()
    };
    for seed in 0..5 {
        echo_once(200_000, f, seed);
    }
}
