//! The request/response workload shared by the `request_response` benchmark and the
//! `request_response` and `smoltcp_rr` examples (which run it under callgrind): a client
//! engine and a server joined by the in-memory link on one thread, exchanging 64-byte
//! requests and 64-byte responses over K connections.
//!
//! Each client connection keeps exactly one request outstanding: it sends the next one
//! only when the whole response to the previous one has arrived, so K connections keep
//! K requests in flight. The client is always a Rusty engine; the server is one too
//! ([`ServerEngine`]) or another stack behind [`RrServerSide`] (smoltcp, in
//! `smoltcp_server.rs`), so that a comparison changes only the server. The client and
//! the server are different [`Handler`] types, so their engines are different
//! monomorphizations, and each engine's loop turn is entered through its own
//! never-inlined function ([`client_turn`], [`server_turn`]) that a profiler can select
//! (`valgrind --toggle-collect=*server_turn*`).
//!
//! Virtual time moves 1 µs per loop turn: runs are deterministic, timers still advance,
//! and no retransmission timer can fire while every segment is answered at once.
//!
//! Both ends take at most a burst of B frames from the link per loop turn (the engines'
//! `rx_burst`, 32 by default). With K connections that caps how many requests one turn
//! serves, which matters to a server whose every turn costs O(K) (smoltcp's walks over
//! its sockets) and little to one whose turn costs O(1) (Rusty's).
//!
//! Any K the stack can hold works (100,000 was tried). Three things scale with it: the
//! link's in-flight bound (see [`common::link`]), the engines' connection limit
//! ([`engine_config`]) and the server ports (see [`server_ports`]).

use std::net::{IpAddr, Ipv6Addr, SocketAddr};
use std::ops::Range;
use std::time::{Duration, Instant};

use rusty::io::fault::{FaultConfig, FaultInjector};
use rusty::io::PacketIo;
use rusty::time::VirtualClock;
use rusty::{Conn, Engine, EngineConfig, Handler, MemoryBudget};
use rusty_testkit::memory::MemoryLink;
use rusty_testkit::sim::{self, CLIENT_IP, SERVER_IP};

use crate::common::{self, Messages, OutOfLine, MESSAGE_LEN};

/// Which family the workload's connections use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Family {
    V4,
    /// Over IPv6: both engines also have an IPv6 address on the link (usable at once,
    /// with no duplicate detection), and the client opens to the server's.
    V6,
}

impl Family {
    /// `ipv4` (the default, `None`) or `ipv6`.
    #[allow(dead_code)] // only the examples read a family from their command line
    pub(crate) fn parse(word: Option<&str>) -> Result<Family, String> {
        match word {
            None | Some("ipv4") => Ok(Family::V4),
            Some("ipv6") => Ok(Family::V6),
            Some(other) => Err(format!("unknown family {other:?} (ipv4 or ipv6)")),
        }
    }

    /// The server's address in this family.
    fn server(self) -> IpAddr {
        match self {
            Family::V4 => SERVER_IP.into(),
            Family::V6 => SERVER_IP6.into(),
        }
    }

    /// `cfg`, for the engine whose IPv6 address in this family would be `ip6`.
    fn configure(self, mut cfg: EngineConfig, ip6: Ipv6Addr) -> EngineConfig {
        if self == Family::V6 {
            cfg.ipv6 = vec![(ip6, 64)];
            cfg.dad_transmits = 0;
        }
        cfg
    }
}

/// The engines' IPv6 addresses (see [`Family::V6`]).
const CLIENT_IP6: Ipv6Addr = Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 1);
const SERVER_IP6: Ipv6Addr = Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 2);

/// The first port the server listens on.
pub(crate) const SERVER_PORT: u16 = 7;
pub(crate) const REQUEST: [u8; MESSAGE_LEN] = [b'q'; MESSAGE_LEN];
pub(crate) const RESPONSE: [u8; MESSAGE_LEN] = [b'r'; MESSAGE_LEN];
/// Active opens started at once while connecting: the engines turn until a batch is
/// established before the next one starts, so the listener never holds more than a
/// batch half-open and a batch's SYNs fit the link's default in-flight bound, whatever
/// K.
const OPEN_BATCH: usize = 4096;

/// How often a connection established while the client holds its requests looks
/// whether it may send (virtual time: 100 turns, well within the stall limit).
const HOLD_POLL: Duration = Duration::from_micros(100);

/// The client: one outstanding request per connection, counts completed round trips.
/// While `holding`, a connection that opens waits (polling a timer) instead of sending
/// its first request.
#[derive(Debug, Default)]
pub(crate) struct RrClient {
    pub connected: usize,
    pub completed: u64,
    pub send_failures: u64,
    pub holding: bool,
}

impl RrClient {
    fn start(&mut self, conn: &mut Conn<'_, Messages>) {
        if self.holding {
            conn.set_timer(Some(HOLD_POLL));
        } else {
            self.send_request(conn);
        }
    }

    fn send_request(&mut self, conn: &mut Conn<'_, Messages>) {
        // The send buffer holds far more than one request; a short write would mean the
        // stack lost track of acknowledged data, which the run then reports as a stall.
        if conn.send(&REQUEST) != Ok(MESSAGE_LEN) {
            self.send_failures += 1;
        }
    }
}

impl Handler for RrClient {
    type Conn = Messages;

    fn accept(&mut self, _: std::net::SocketAddr, _: std::net::SocketAddr) -> Option<Messages> {
        None
    }

    fn connected(&mut self, conn: &mut Conn<'_, Messages>) {
        self.connected += 1;
        self.start(conn);
    }

    fn timer(&mut self, conn: &mut Conn<'_, Messages>) {
        self.start(conn);
    }

    fn data(&mut self, conn: &mut Conn<'_, Messages>, data: &[u8]) -> usize {
        for _ in 0..conn.state().add(data.len()) {
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
    type Conn = Messages;

    fn accept(&mut self, _: std::net::SocketAddr, _: std::net::SocketAddr) -> Option<Messages> {
        Some(Messages::default())
    }

    fn data(&mut self, conn: &mut Conn<'_, Messages>, data: &[u8]) -> usize {
        for _ in 0..conn.state().add(data.len()) {
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

/// The server end of the workload: a Rusty engine ([`ServerEngine`]) or another stack
/// on the same link.
pub(crate) trait RrServerSide {
    /// Accept up to `connections` connections on `port`.
    fn listen(&mut self, port: u16, connections: usize);
    /// One loop turn, through a never-inlined function of its own; returns the frames
    /// received.
    fn turn(&mut self) -> usize;
    /// Requests the server has answered so far.
    fn served(&self) -> u64;
    /// The server's counters, for error messages.
    fn describe(&self) -> String;
    /// Segments the server retransmitted.
    fn retransmissions(&self) -> u64;
}

impl<D: PacketIo> RrServerSide for ServerEngine<D> {
    fn listen(&mut self, port: u16, connections: usize) {
        Engine::listen(self, port, connections);
    }
    fn turn(&mut self) -> usize {
        server_turn(self)
    }
    fn served(&self) -> u64 {
        self.handler().served
    }
    fn describe(&self) -> String {
        format!("{:?} / {}", self.handler(), self.stats())
    }
    fn retransmissions(&self) -> u64 {
        self.stats().retransmissions
    }
}

/// The simulator's configuration of the engine at `ip` (fixed keys, so runs replay),
/// taking up to `burst` frames per loop turn, and sized for `connections` connections
/// where that is more than the defaults are for:
/// the connection limit (65,536 by default) grows to it, and so does the buffer memory
/// budget, in proportion. The default budget (pressure at 192 MiB) suits the default
/// limit; 100,000 connections holding their first 2 KiB ring each would put the engine
/// under memory pressure (clamped windows) and the run would measure that instead.
pub(crate) fn engine_config(
    ip: std::net::Ipv4Addr,
    connections: usize,
    burst: usize,
) -> EngineConfig {
    let mut cfg = sim::engine_config(ip, 1);
    cfg.rx_burst = burst;
    let scale = connections.div_ceil(cfg.max_connections).max(1);
    cfg.max_connections = cfg.max_connections.max(connections);
    cfg.memory = MemoryBudget::new(
        cfg.memory.low * scale,
        cfg.memory.pressure * scale,
        cfg.memory.limit * scale,
    );
    cfg
}

/// The frames an engine takes from the link per loop turn by default.
pub(crate) fn default_burst() -> usize {
    sim::engine_config(SERVER_IP, 1).rx_burst
}

/// The server ports `connections` connections from the client `client` are spread over,
/// and how many go to each. From one client address to one server port there are only
/// as many connections as the client has ephemeral ports (28,232 by default), so more
/// connections than that take more server ports: 100,000 take four.
pub(crate) fn server_ports(client: &EngineConfig, connections: usize) -> (Range<u16>, usize) {
    let range = &client.ephemeral_ports;
    let span = usize::from(*range.end() - *range.start()) + 1;
    let ports = connections.div_ceil(span).max(1);
    let per_port = connections.div_ceil(ports);
    (SERVER_PORT..SERVER_PORT + ports as u16, per_port)
}

/// A Rusty server engine on `dev` for `connections` connections, `burst` frames a turn.
fn rusty_server<D: PacketIo>(
    dev: D,
    clock: &VirtualClock,
    connections: usize,
    burst: usize,
    family: Family,
) -> ServerEngine<D> {
    let cfg = family.configure(engine_config(SERVER_IP, connections, burst), SERVER_IP6);
    Engine::new(dev, RrServer::default(), clock.clone(), cfg)
}

/// The client engine, `connections` connections to the server, and the virtual clock.
pub(crate) struct RrPair<D: PacketIo, S = ServerEngine<D>> {
    pub clock: VirtualClock,
    pub client: ClientEngine<D>,
    pub server: S,
}

/// The pair on the bare in-memory link: the server's end is [`OutOfLine`], so that
/// profiles tell the link's cost from the server engine's.
pub(crate) type MemoryPair = RrPair<MemoryLink, ServerEngine<OutOfLine<MemoryLink>>>;

impl MemoryPair {
    /// Two engines on a bare in-memory link.
    pub(crate) fn memory(
        connections: usize,
        burst: usize,
        family: Family,
    ) -> Result<MemoryPair, String> {
        let clock = VirtualClock::new();
        let (a, b) = common::link(2 * connections);
        let server = rusty_server(OutOfLine::new(b), &clock, connections, burst, family);
        RrPair::build(clock, a, server, connections, burst, family)
    }
}

pub(crate) type FaultLink = FaultInjector<MemoryLink, VirtualClock>;

impl RrPair<FaultLink> {
    /// Two engines on the in-memory link behind fault injectors configured with no faults.
    pub(crate) fn fault_injector(
        connections: usize,
        burst: usize,
        family: Family,
    ) -> Result<RrPair<FaultLink>, String> {
        let clock = VirtualClock::new();
        let (a, b) = common::link(2 * connections);
        let a = FaultInjector::new(a, clock.clone(), FaultConfig::none(), 1);
        let b = FaultInjector::new(b, clock.clone(), FaultConfig::none(), 2);
        let server = rusty_server(b, &clock, connections, burst, family);
        RrPair::build(clock, a, server, connections, burst, family)
    }
}

impl<D: PacketIo, S: RrServerSide> RrPair<D, S> {
    /// Build the client engine on `dev` (`burst` frames a turn), open `connections`
    /// connections of `family` to `server`
    /// (in batches of [`OPEN_BATCH`]), then run `connections` round trips so that
    /// measurements start with every connection's pipeline busy.
    ///
    /// No request is sent until every connection is open: otherwise the connections
    /// opened first would keep exchanging requests while the later ones wait for the
    /// link, and at 10,000 connections the opening would cost a smoltcp server more
    /// round trips (each walking its sockets) than the measurement itself.
    pub(crate) fn build(
        clock: VirtualClock,
        dev: D,
        server: S,
        connections: usize,
        burst: usize,
        family: Family,
    ) -> Result<RrPair<D, S>, String> {
        let cfg = family.configure(engine_config(CLIENT_IP, connections, burst), CLIENT_IP6);
        let (ports, per_port) = server_ports(&cfg, connections);
        let client = RrClient {
            holding: true,
            ..RrClient::default()
        };
        let mut pair = RrPair {
            client: Engine::new(dev, client, clock.clone(), cfg),
            server,
            clock,
        };
        for (i, port) in ports.clone().enumerate() {
            pair.server
                .listen(port, per_port.min(connections - i * per_port));
        }
        // One connection first: its SYN waits for ARP (or Neighbor Discovery), and the
        // queue of frames waiting for a resolution holds only a few per address; the
        // others start once the server's MAC is known.
        for i in 0..connections {
            let port = ports.start + (i / per_port) as u16;
            pair.client
                .connect(SocketAddr::new(family.server(), port), Messages::default())
                .map_err(|(e, _)| format!("connect {i}: {e}"))?;
            let opened = i + 1;
            if (opened == 1 || opened % OPEN_BATCH == 0 || opened == connections)
                && !pair.turn_until(|p| p.client.handler().connected == opened)
            {
                return Err(format!("connection {i} stuck: {}", pair.describe()));
            }
        }
        pair.client.handler_mut().holding = false;
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

    /// Loop turns (the clock 1 µs further each) until `done` holds (true) or no frame
    /// has moved for a while (false).
    fn turn_until(&mut self, done: impl FnMut(&Self) -> bool) -> bool {
        common::turn_until(
            self,
            |p| {
                let moved = client_turn(&mut p.client) + p.server.turn();
                p.clock.advance(Duration::from_micros(1));
                moved
            },
            done,
        )
    }

    /// Both ends' counters, for error messages and sanity checks.
    pub(crate) fn describe(&self) -> String {
        format!(
            "client {:?} / {}; server {}",
            self.client.handler(),
            self.client.stats(),
            self.server.describe()
        )
    }

    /// Segments the two ends retransmitted (zero in a healthy run).
    pub(crate) fn retransmissions(&self) -> u64 {
        self.client.stats().retransmissions + self.server.retransmissions()
    }

    /// Time `n` round trips and print requests, the requests the server answered in
    /// the meantime, elapsed time and requests per second (the examples' report, which
    /// `scripts/callgrind-rr.sh` runs under callgrind).
    ///
    /// The server may answer more than `n`: the run stops after the client turn in
    /// which the `n`-th response arrives, and that turn may take up to a burst more
    /// (at 10,000 connections and 4,096 frames a turn, runs of 42,000 and 62,000
    /// serve 20,480 requests apart). The callgrind scripts divide by `served`.
    #[allow(dead_code)] // the benchmark times its runs itself
    pub(crate) fn measure(&mut self, n: u64, k: usize, setup: &str) -> Result<(), String> {
        let served = self.server.served();
        let start = Instant::now();
        let done = self.run(n);
        let elapsed = start.elapsed();
        if done < n {
            return Err(format!(
                "stuck after {done} of {n} requests: {}",
                self.describe()
            ));
        }
        println!(
            "requests {n} served {} connections {k} {setup} elapsed {:.3} s requests/s {:.0} retransmissions {}",
            self.server.served() - served,
            elapsed.as_secs_f64(),
            n as f64 / elapsed.as_secs_f64(),
            self.retransmissions()
        );
        Ok(())
    }
}
