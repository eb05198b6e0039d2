//! The engine's tests. Most run whole connections between two engines on the simulated
//! wire, one file a topic, with the handlers shared here: `transfer` (echoes, clean and
//! lossy, and the buffer pool), `steering` (multi-queue links and the owner of each
//! flow), `offload` (precomputed checksums, TSO) and `idle` (application timers, rings
//! and timer entries of quiet connections). `scripted` plays the peer byte by byte;
//! `ports` checks the limits that are configuration and `memory` the inline size of a
//! connection.

mod idle;
mod offload;
mod outside;
mod ports;
mod scripted;
mod steering;
mod transfer;

use std::net::SocketAddr;
use std::time::Duration;

use rusty_stack::app::CloseReason;
use rusty_stack::app::{Conn, Opener};
use rusty_stack::internals::{owner_queue, Flow, FlowKey};
use rusty_stack::io::fault::FaultConfig;
use rusty_stack::io::PacketIo;
use rusty_stack::time::Clock;
use rusty_stack::time::VirtualClock;
use rusty_stack::DropReason;
use rusty_stack::{Engine, EngineConfig, Handler, Stats};
use rusty_testkit::sim::{self, SimPair, SERVER_IP};

/// Echoes everything; closes when the peer does.
#[derive(Default)]
pub(crate) struct Echo {
    pub closed: Vec<CloseReason>,
}

impl Handler for Echo {
    type Conn = ();
    fn accept(&mut self, _: std::net::SocketAddr, _: std::net::SocketAddr) -> Option<()> {
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
    /// A sender of `payload` (none: it only receives) that has sent nothing yet.
    fn new(payload: Vec<u8>) -> Sender {
        Sender {
            payload,
            sent: 0,
            received: Vec::new(),
            closed: Vec::new(),
            peer_closed: false,
        }
    }

    fn pump(&mut self, conn: &mut Conn<'_, ()>) {
        pump(conn, &self.payload, &mut self.sent);
    }
}

/// Queue as much of `payload[*sent..]` on `conn` as fits; half-close once all of it is.
fn pump<S>(conn: &mut Conn<'_, S>, payload: &[u8], sent: &mut usize) {
    while *sent < payload.len() {
        let n = conn.send(&payload[*sent..]).unwrap_or(0);
        *sent += n;
        if n == 0 {
            break;
        }
    }
    if *sent == payload.len() {
        conn.shutdown_write();
    }
}

impl Handler for Sender {
    type Conn = ();
    fn accept(&mut self, _: std::net::SocketAddr, _: std::net::SocketAddr) -> Option<()> {
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

/// A payload of `n` bytes that differ from their neighbours.
fn pattern(n: usize, seed: u8) -> Vec<u8> {
    (0..n)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect()
}
