//! The request/response workload shared by the `request_response` benchmark and the
//! `request_response` example (which runs it under callgrind): a client engine and a
//! server engine on one thread, joined by the in-memory link, exchanging 64-byte
//! requests and 64-byte responses over K connections.
//!
//! Each client connection keeps exactly one request outstanding: it sends the next one
//! only when the whole response to the previous one has arrived, so K connections keep
//! K requests in flight. The client and the server are different [`Handler`] types, so
//! their engines are different monomorphizations, and each engine's loop turn is entered
//! through its own never-inlined function ([`client_turn`], [`server_turn`]) that a
//! profiler can select (`valgrind --toggle-collect=*server_turn*`).
//!
//! Virtual time moves 1 µs per loop turn: runs are deterministic, timers still advance,
//! and no retransmission timer can fire while every segment is answered at once.

use std::net::SocketAddrV4;
use std::time::Duration;

use rusty::io::fault::{FaultConfig, FaultInjector};
use rusty::io::memory::{self, MemoryLink};
use rusty::io::{Capabilities, PacketIo};
use rusty::sim::{self, CLIENT_IP, CLIENT_MAC, SERVER_IP, SERVER_MAC};
use rusty::time::VirtualClock;
use rusty::{Conn, Engine, Handler};

/// Size of a request and of a response.
pub(crate) const MESSAGE_LEN: usize = 64;
const SERVER_PORT: u16 = 7;
const REQUEST: [u8; MESSAGE_LEN] = [b'q'; MESSAGE_LEN];
const RESPONSE: [u8; MESSAGE_LEN] = [b'r'; MESSAGE_LEN];
/// Loop turns in a row with no frame moving after which a run is declared stuck.
const STALL_TURNS: u32 = 1000;

/// Bytes of the current message received so far on one connection.
#[derive(Debug, Default)]
pub(crate) struct Partial {
    received: usize,
}

/// The client: one outstanding request per connection, counts completed round trips.
#[derive(Debug, Default)]
pub(crate) struct RrClient {
    pub connected: usize,
    pub completed: u64,
    pub send_failures: u64,
}

impl RrClient {
    fn send_request(&mut self, conn: &mut Conn<'_, Partial>) {
        // The send buffer holds far more than one request; a short write would mean the
        // stack lost track of acknowledged data, which the run then reports as a stall.
        if conn.send(&REQUEST) != Ok(MESSAGE_LEN) {
            self.send_failures += 1;
        }
    }
}

impl Handler for RrClient {
    type Conn = Partial;

    fn accept(&mut self, _: SocketAddrV4, _: SocketAddrV4) -> Option<Partial> {
        None
    }

    fn connected(&mut self, conn: &mut Conn<'_, Partial>) {
        self.connected += 1;
        self.send_request(conn);
    }

    fn data(&mut self, conn: &mut Conn<'_, Partial>, data: &[u8]) -> usize {
        let partial = conn.state();
        partial.received += data.len();
        let mut done = 0;
        while partial.received >= MESSAGE_LEN {
            partial.received -= MESSAGE_LEN;
            done += 1;
        }
        for _ in 0..done {
            self.completed += 1;
            self.send_request(conn);
        }
        data.len()
    }
}

/// The server: answers every complete 64-byte request with a 64-byte response.
#[derive(Debug, Default)]
pub(crate) struct RrServer {
    pub served: u64,
    pub send_failures: u64,
}

impl Handler for RrServer {
    type Conn = Partial;

    fn accept(&mut self, _: SocketAddrV4, _: SocketAddrV4) -> Option<Partial> {
        Some(Partial::default())
    }

    fn data(&mut self, conn: &mut Conn<'_, Partial>, data: &[u8]) -> usize {
        let partial = conn.state();
        partial.received += data.len();
        let mut done = 0;
        while partial.received >= MESSAGE_LEN {
            partial.received -= MESSAGE_LEN;
            done += 1;
        }
        for _ in 0..done {
            self.served += 1;
            if conn.send(&RESPONSE) != Ok(MESSAGE_LEN) {
                self.send_failures += 1;
            }
        }
        data.len()
    }
}

pub(crate) type ClientEngine<D> = Engine<D, RrClient, VirtualClock>;
pub(crate) type ServerEngine<D> = Engine<D, RrServer, VirtualClock>;

/// One loop turn of the client engine (a separate symbol for profilers).
#[inline(never)]
pub(crate) fn client_turn<D: PacketIo>(client: &mut ClientEngine<D>) -> usize {
    client.poll()
}

/// One loop turn of the server engine (a separate symbol for profilers).
#[inline(never)]
pub(crate) fn server_turn<D: PacketIo>(server: &mut ServerEngine<D>) -> usize {
    server.poll()
}

/// A client and a server engine with `connections` established connections.
pub(crate) struct RrPair<D: PacketIo> {
    pub clock: VirtualClock,
    pub client: ClientEngine<D>,
    pub server: ServerEngine<D>,
}

/// The two ends of a fresh in-memory link, without checksum or segmentation offloads.
fn link() -> (MemoryLink, MemoryLink) {
    memory::pair(
        Capabilities::new(CLIENT_MAC, 1500),
        Capabilities::new(SERVER_MAC, 1500),
    )
}

impl RrPair<MemoryLink> {
    /// Two engines on a bare in-memory link.
    pub(crate) fn memory(connections: usize) -> Result<RrPair<MemoryLink>, String> {
        let clock = VirtualClock::new();
        let (a, b) = link();
        RrPair::build(clock, a, b, connections)
    }
}

pub(crate) type FaultLink = FaultInjector<MemoryLink, VirtualClock>;

impl RrPair<FaultLink> {
    /// Two engines on the in-memory link behind fault injectors configured with no faults.
    pub(crate) fn fault_injector(connections: usize) -> Result<RrPair<FaultLink>, String> {
        let clock = VirtualClock::new();
        let (a, b) = link();
        let a = FaultInjector::new(a, clock.clone(), FaultConfig::none(), 1);
        let b = FaultInjector::new(b, clock.clone(), FaultConfig::none(), 2);
        RrPair::build(clock, a, b, connections)
    }
}

impl<D: PacketIo> RrPair<D> {
    /// Build both engines, open `connections` connections, then run `connections` round
    /// trips so that measurements start with every connection's pipeline busy.
    fn build(clock: VirtualClock, a: D, b: D, connections: usize) -> Result<RrPair<D>, String> {
        let cfg_client = sim::engine_config(CLIENT_IP, 1);
        let cfg_server = sim::engine_config(SERVER_IP, 1);
        let mut pair = RrPair {
            client: Engine::new(a, RrClient::default(), clock.clone(), cfg_client),
            server: Engine::new(b, RrServer::default(), clock.clone(), cfg_server),
            clock,
        };
        pair.server.listen(SERVER_PORT, connections.max(1));
        // One connection first: its SYN waits for ARP, and the ARP queue holds only a few
        // frames per address; the others start once the server's MAC is known.
        let server = SocketAddrV4::new(SERVER_IP, SERVER_PORT);
        for i in 0..connections {
            pair.client
                .connect(server, Partial::default())
                .map_err(|(e, _)| format!("connect: {e}"))?;
            if i == 0 && !pair.turn_until(|p| p.client.handler().connected == 1) {
                return Err(format!("first connection stuck: {}", pair.describe()));
            }
        }
        if !pair.turn_until(|p| p.client.handler().connected == connections) {
            return Err(format!("connections stuck: {}", pair.describe()));
        }
        let warm = pair.run(connections as u64);
        if warm < connections as u64 {
            return Err(format!("warm-up stuck: {}", pair.describe()));
        }
        Ok(pair)
    }

    /// Run loop turns until at least `requests` more round trips have completed; returns
    /// how many completed (fewer only if the exchange got stuck: see [`RrPair::describe`]).
    pub(crate) fn run(&mut self, requests: u64) -> u64 {
        let start = self.client.handler().completed;
        let target = start + requests;
        self.turn_until(|p| p.client.handler().completed >= target);
        self.client.handler().completed - start
    }

    /// Loop turns until `done` holds (true) or no frame has moved for a while (false).
    fn turn_until(&mut self, mut done: impl FnMut(&Self) -> bool) -> bool {
        let mut idle = 0;
        while !done(self) {
            let moved = client_turn(&mut self.client) + server_turn(&mut self.server);
            self.clock.advance(Duration::from_micros(1));
            if moved == 0 {
                idle += 1;
                if idle >= STALL_TURNS {
                    return false;
                }
            } else {
                idle = 0;
            }
        }
        true
    }

    /// Both engines' counters, for error messages and sanity checks.
    pub(crate) fn describe(&self) -> String {
        format!(
            "client {:?} / {}; server {:?} / {}",
            self.client.handler(),
            self.client.stats(),
            self.server.handler(),
            self.server.stats()
        )
    }

    /// Segments the two engines retransmitted (zero in a healthy run).
    pub(crate) fn retransmissions(&self) -> u64 {
        self.client.stats().retransmissions + self.server.stats().retransmissions
    }
}
