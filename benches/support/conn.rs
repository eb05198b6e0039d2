//! The connection-rate workload of `examples/conn_rate.rs`: a client engine and a server
//! engine on one thread, joined by the in-memory link, where every connection lives a
//! whole short life. The client connects and sends a 64-byte request; the server
//! answers with a 64-byte response and closes at once, as an HTTP/1.0 server does, so
//! the *server* holds TIME-WAIT; the client closes when the response is in and its
//! connection ends in LAST-ACK → CLOSED. C connections are in flight at any time: each
//! one that ends starts the next.
//!
//! Virtual time moves a fixed step per loop turn, chosen so that the run reaches a
//! steady state in which TIME-WAIT entries expire as fast as they are made (see
//! [`ConnPair::step_for`]). The server's loop turn is entered through its own
//! never-inlined function ([`conn_server_turn`]) for profilers.

use std::net::SocketAddr;
use std::time::Duration;

use rusty::time::VirtualClock;
use rusty::{CloseReason, Conn, ConnectError, Engine, Handler, Opener};
use rusty_testkit::memory::MemoryLink;
use rusty_testkit::sim::{self, CLIENT_IP, SERVER_IP};

use crate::common::{self, Messages, OutOfLine, MESSAGE_LEN};

const SERVER_PORT: u16 = 80;
const REQUEST: [u8; MESSAGE_LEN] = [b'q'; MESSAGE_LEN];
const RESPONSE: [u8; MESSAGE_LEN] = [b'r'; MESSAGE_LEN];

/// The client: opens connections until `target` have been started, each sending one
/// request and closing once the response is in.
#[derive(Debug)]
pub(crate) struct ConnClient {
    server: SocketAddr,
    /// Connections to start in all (the run ends when they are done).
    target: u64,
    pub started: u64,
    /// Connections that ended normally with their whole response.
    pub completed: u64,
    /// Connections that ended any other way, or could not start.
    pub failed: u64,
}

/// A client connection: the response bytes received so far, and whether it was whole.
#[derive(Debug, Default)]
pub(crate) struct ClientConn {
    response: Messages,
    answered: bool,
}

impl ConnClient {
    /// Connections that are over, completed or not.
    fn ended(&self) -> u64 {
        self.completed + self.failed
    }

    fn open(&mut self, opener: &mut Opener<'_, ClientConn>) {
        if self.started < self.target {
            self.started += 1;
            opener.connect(self.server, ClientConn::default());
        }
    }
}

impl Handler for ConnClient {
    type Conn = ClientConn;

    fn accept(&mut self, _: std::net::SocketAddr, _: std::net::SocketAddr) -> Option<ClientConn> {
        None
    }

    fn connected(&mut self, conn: &mut Conn<'_, ClientConn>) {
        if conn.send(&REQUEST) != Ok(MESSAGE_LEN) {
            conn.abort();
        }
    }

    fn data(&mut self, conn: &mut Conn<'_, ClientConn>, data: &[u8]) -> usize {
        if conn.state().response.add(data.len()) > 0 {
            conn.state().answered = true;
            conn.close();
        }
        data.len()
    }

    fn closed(
        &mut self,
        opener: &mut Opener<'_, ClientConn>,
        state: ClientConn,
        reason: CloseReason,
    ) {
        if reason == CloseReason::Normal && state.answered {
            self.completed += 1;
        } else {
            self.failed += 1;
        }
        self.open(opener);
    }

    fn connect_failed(
        &mut self,
        opener: &mut Opener<'_, ClientConn>,
        _: SocketAddr,
        _: ClientConn,
        _: ConnectError,
    ) {
        self.failed += 1;
        self.open(opener);
    }
}

/// The server: answers the request with the response and closes.
#[derive(Debug, Default)]
pub(crate) struct ConnServer {
    pub served: u64,
    pub send_failures: u64,
}

impl Handler for ConnServer {
    type Conn = Messages;

    fn accept(&mut self, _: std::net::SocketAddr, _: std::net::SocketAddr) -> Option<Messages> {
        Some(Messages::default())
    }

    fn data(&mut self, conn: &mut Conn<'_, Messages>, data: &[u8]) -> usize {
        if conn.state().add(data.len()) > 0 {
            self.served += 1;
            if conn.send(&RESPONSE) != Ok(MESSAGE_LEN) {
                self.send_failures += 1;
            }
            conn.close();
        }
        data.len()
    }
}

pub(crate) type ClientEngine = Engine<MemoryLink, ConnClient, VirtualClock>;
/// The server's link is [`OutOfLine`], so profiles tell its cost from the engine's.
pub(crate) type ServerEngine = Engine<OutOfLine<MemoryLink>, ConnServer, VirtualClock>;

/// One loop turn of the client engine (a separate symbol for profilers).
#[inline(never)]
pub(crate) fn conn_client_turn(client: &mut ClientEngine) -> usize {
    client.poll()
}

/// One loop turn of the server engine (a separate symbol for profilers).
#[inline(never)]
pub(crate) fn conn_server_turn(server: &mut ServerEngine) -> usize {
    server.poll()
}

/// The two engines, the virtual clock and its step per loop turn.
pub(crate) struct ConnPair {
    pub clock: VirtualClock,
    pub step: Duration,
    pub turns: u64,
    concurrency: usize,
    pub client: ClientEngine,
    pub server: ServerEngine,
}

impl ConnPair {
    /// Two engines on a fresh in-memory link that keep `concurrency` connections in
    /// flight, the clock `step` further each loop turn, after one connection alone: its
    /// SYN waits for ARP, and the ARP queue holds only a few frames per address, so
    /// the others start once the server's MAC is known (or all but a few would wait for
    /// their SYN's retransmission timer).
    pub(crate) fn new(concurrency: usize, step: Duration) -> Result<ConnPair, String> {
        let clock = VirtualClock::new();
        let (a, b) = common::link(2 * concurrency);
        let client = ConnClient {
            server: SocketAddr::from((SERVER_IP, SERVER_PORT)),
            target: 0,
            started: 0,
            completed: 0,
            failed: 0,
        };
        let cfg_client = sim::engine_config(CLIENT_IP, 1);
        let cfg_server = sim::engine_config(SERVER_IP, 1);
        let mut pair = ConnPair {
            client: Engine::new(a, client, clock.clone(), cfg_client),
            server: Engine::new(
                OutOfLine::new(b),
                ConnServer::default(),
                clock.clone(),
                cfg_server,
            ),
            clock,
            step,
            turns: 0,
            concurrency: 1,
        };
        pair.server.listen(SERVER_PORT, concurrency);
        if pair.run(1) < 1 {
            return Err(format!("first connection stuck: {}", pair.describe()));
        }
        pair.concurrency = concurrency;
        Ok(pair)
    }

    /// The clock step per loop turn at which the run reaches a steady state where the
    /// server's TIME-WAIT entries expire, given how many connections end per turn.
    ///
    /// Virtual time must pass much faster than in the request/response workload:
    /// TIME-WAIT lasts 60 s, which at 1 µs a turn would take 60 million turns. It must
    /// not pass too fast either: the client reuses each of its ephemeral ports (28,232)
    /// every 28,232 connections, and a SYN that finds its pair still in TIME-WAIT on
    /// the server reopens the entry (RFC 6191) instead of letting it expire. With one
    /// cycle of the client's ports lasting twice TIME-WAIT, every entry expires by its
    /// timer half a cycle before its pair is used again, and the server holds about
    /// half as many entries as the client has ports.
    pub(crate) fn step_for(per_turn: f64) -> Duration {
        let time_wait = sim::engine_config(SERVER_IP, 1).tcp.time_wait;
        time_wait.mul_f64(2.0 * per_turn / client_ports() as f64)
    }

    /// Run until `connections` more connections have ended, starting new ones to keep
    /// `concurrency` in flight; returns how many of them completed (fewer only if the
    /// exchange got stuck or connections failed: see [`ConnPair::describe`]).
    pub(crate) fn run(&mut self, connections: u64) -> u64 {
        let client = self.client.handler_mut();
        let (target, completed) = (client.ended() + connections, client.completed);
        client.target = client.started + connections;
        self.top_up();
        common::turn_until(
            self,
            |p| {
                let moved = conn_client_turn(&mut p.client) + conn_server_turn(&mut p.server);
                p.clock.advance(p.step);
                p.turns += 1;
                moved
            },
            |p| p.client.handler().ended() >= target,
        );
        self.client.handler().completed - completed
    }

    /// Start connections until `concurrency` are in flight (a previous run's last ones
    /// ended without successors) or the client's target is reached.
    fn top_up(&mut self) {
        loop {
            let client = self.client.handler();
            if client.started - client.ended() >= self.concurrency as u64
                || client.started >= client.target
            {
                return;
            }
            let server = client.server;
            self.client.handler_mut().started += 1;
            if self.client.connect(server, ClientConn::default()).is_err() {
                self.client.handler_mut().failed += 1;
            }
        }
    }

    /// Both engines' counters and the server's TIME-WAIT figures.
    pub(crate) fn describe(&self) -> String {
        format!(
            "client {:?} / {}; server {:?} / {}; {}",
            self.client.handler(),
            self.client.stats(),
            self.server.handler(),
            self.server.stats(),
            self.time_wait()
        )
    }

    /// The server's TIME-WAIT entries: made, reopened by a SYN, held now, and so expired.
    pub(crate) fn time_wait(&self) -> String {
        let s = self.server.stats();
        let held = self.server.time_wait_count() as u64;
        format!(
            "server TIME-WAIT entered {} reopened {} held {} expired {}",
            s.time_wait_entered,
            s.time_wait_reused,
            held,
            s.time_wait_entered - s.time_wait_reused - held
        )
    }
}

/// How many ephemeral ports the client has (28,232 by default).
pub(crate) fn client_ports() -> usize {
    let range = sim::engine_config(CLIENT_IP, 1).ephemeral_ports;
    usize::from(*range.end() - *range.start()) + 1
}
