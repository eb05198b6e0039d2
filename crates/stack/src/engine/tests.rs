//! Engine tests on the simulated wire: whole connections between two engines.

use std::net::SocketAddrV4;
use std::time::Duration;

use super::*;
use crate::app::CloseReason;
use crate::app::{Conn, Opener};
use crate::drop::DropReason;
use crate::io::fault::FaultConfig;
use crate::sim::{self, SimPair, SERVER_IP};
use crate::time::VirtualClock;

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

/// One connection of a [`Checker`]: its payload, how much of it is queued, and what
/// came back.
#[derive(Default)]
struct Transfer {
    payload: Vec<u8>,
    sent: usize,
    echoed: Vec<u8>,
}

/// Opens connections that each send their own payload and half-close; records, for
/// each, whether the whole payload came back and how the connection ended.
#[derive(Default)]
struct Checker {
    results: Vec<(bool, CloseReason)>,
}

impl Checker {
    fn pump(conn: &mut Conn<'_, Transfer>) {
        let mut t = std::mem::take(conn.state());
        pump(conn, &t.payload, &mut t.sent);
        *conn.state() = t;
    }
}

impl Handler for Checker {
    type Conn = Transfer;
    fn accept(&mut self, _: SocketAddrV4, _: SocketAddrV4) -> Option<Transfer> {
        None
    }
    fn connected(&mut self, conn: &mut Conn<'_, Transfer>) {
        Self::pump(conn);
    }
    fn writable(&mut self, conn: &mut Conn<'_, Transfer>) {
        Self::pump(conn);
    }
    fn data(&mut self, conn: &mut Conn<'_, Transfer>, data: &[u8]) -> usize {
        conn.state().echoed.extend_from_slice(data);
        data.len()
    }
    fn closed(&mut self, _: &mut Opener<'_, Transfer>, t: Transfer, reason: CloseReason) {
        self.results.push((t.echoed == t.payload, reason));
    }
}

/// One loop turn of the workers on one side of a multi-queue link (in queue order),
/// doing the runtime's part by hand: ARP mappings one worker learns reach the others,
/// and frames a worker hands over reach the owner it names, never itself. Returns the
/// work done.
fn turn_side<D: PacketIo, H: Handler>(workers: &mut [Engine<D, H, VirtualClock>]) -> usize {
    let (mut learned, mut misdirected) = (Vec::new(), Vec::new());
    let mut work = 0;
    for (i, w) in workers.iter_mut().enumerate() {
        work += w.poll();
        w.drain_learned_arp(&mut learned);
        let before = misdirected.len();
        w.take_misdirected(&mut misdirected);
        assert!(
            misdirected[before..]
                .iter()
                .all(|(owner, _)| usize::from(*owner) != i),
            "worker {i} handed a frame to itself"
        );
    }
    for (q, w) in workers.iter_mut().enumerate() {
        let mine: Vec<&Vec<u8>> = misdirected
            .iter()
            .filter(|(owner, _)| usize::from(*owner) == q)
            .map(|(_, frame)| frame)
            .collect();
        if !mine.is_empty() {
            work += mine.len();
            w.inject_frames(mine);
        }
    }
    for w in workers.iter_mut() {
        for &(ip, mac) in &learned {
            w.import_arp(ip, mac);
        }
    }
    work
}

/// Run the workers of both sides of a link (see [`turn_side`]), advancing `clock` a
/// millisecond whenever a turn did nothing, until `done` holds (true) or 100,000 turns
/// have passed (false).
fn run_sides<DA: PacketIo, HA: Handler, DB: PacketIo, HB: Handler>(
    a: &mut [Engine<DA, HA, VirtualClock>],
    b: &mut [Engine<DB, HB, VirtualClock>],
    clock: &VirtualClock,
    mut done: impl FnMut(&[Engine<DA, HA, VirtualClock>], &[Engine<DB, HB, VirtualClock>]) -> bool,
) -> bool {
    for _ in 0..100_000 {
        let work = turn_side(a) + turn_side(b);
        if done(a, b) {
            return true;
        }
        if work == 0 {
            clock.advance(Duration::from_millis(1));
        }
    }
    false
}

/// Open `conns` connections from every client worker to the server's port 7, and run
/// both sides (see [`run_sides`]) until every client has seen all of them close.
fn echo_from_every_client<D: PacketIo>(
    clients: &mut [Engine<D, Sender, VirtualClock>],
    server: &mut Engine<D, Echo, VirtualClock>,
    clock: &VirtualClock,
    conns: usize,
) {
    for c in clients.iter_mut() {
        for _ in 0..conns {
            c.connect(SocketAddrV4::new(SERVER_IP, 7), ())
                .map_err(|(e, _)| e)
                .unwrap();
        }
    }
    run_sides(clients, std::slice::from_mut(server), clock, |c, _| {
        c.iter().all(|c| c.handler().closed.len() == conns)
    });
}

fn pattern(n: usize, seed: u8) -> Vec<u8> {
    (0..n)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect()
}

fn echo_once(len: usize, faults: FaultConfig, seed: u64) {
    echo_with_pools(len, faults, seed, None);
}

/// Echo `len` bytes; with `pool`, both engines keep that many idle ring bytes per size
/// class. Returns the idle ring bytes each engine's pool holds afterwards
/// (client, server).
fn echo_with_pools(
    len: usize,
    faults: FaultConfig,
    seed: u64,
    pool: Option<usize>,
) -> (usize, usize) {
    let payload = pattern(len, seed as u8);
    let sender = Sender {
        payload: payload.clone(),
        sent: 0,
        received: Vec::new(),
        closed: Vec::new(),
        peer_closed: false,
    };
    let config = |ip| {
        let mut cfg = sim::engine_config(ip, seed);
        cfg.buffer_pool = pool.unwrap_or(cfg.buffer_pool);
        cfg
    };
    let mut net = SimPair::new(
        sender,
        config(sim::CLIENT_IP),
        Echo::default(),
        config(SERVER_IP),
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
        !n.client.handler().closed.is_empty()
            && n.server.connection_count() == 0
            && n.client.connection_count() == 0
    });
    let c = net.client.handler();
    assert!(
        done,
        "seed {seed}: not finished; client {:?} server {:?}",
        net.client.stats(),
        net.server.stats()
    );
    assert_eq!(c.received.len(), payload.len(), "seed {seed}");
    assert!(c.received == payload, "seed {seed}: echo differs");
    assert_eq!(c.closed, vec![CloseReason::Normal]);
    assert!(c.peer_closed);
    assert_eq!(net.server.handler().closed, vec![CloseReason::Normal]);
    eprintln!(
        "seed {seed}: t={:?} client {} / server {} / faults {:?}",
        net.now(),
        net.client.stats(),
        net.server.stats(),
        net.client.device().stats()
    );
    (net.client.pool.idle_bytes(), net.server.pool.idle_bytes())
}

/// Buffer storage comes from the engine's own pool and goes back to it when the
/// connection is done; the configured size bounds what the pool keeps.
#[test]
fn buffer_storage_returns_to_the_engines_pool() {
    let (client, server) = echo_with_pools(100_000, FaultConfig::none(), 3, None);
    assert!(client > 0 && server > 0, "client {client}, server {server}");
    let kept = 64 * 1024;
    let (client, server) = echo_with_pools(100_000, FaultConfig::none(), 3, Some(kept));
    assert!(client <= 8 * kept && server <= 8 * kept);
    let (client, server) = echo_with_pools(100_000, FaultConfig::none(), 3, Some(0));
    assert_eq!((client, server), (0, 0), "a zero-sized pool keeps nothing");
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

/// Four client workers on a four-queue link: every active open picks a source port whose
/// return flow the link's Toeplitz RSS steers back to the opening worker's own queue, and
/// ARP mappings learned by the worker that owns queue 0 reach the others through the
/// sibling-publishing API (what the runtime's control channel carries).
#[test]
fn active_opens_land_on_their_own_queue() {
    use crate::io::memory;
    use crate::rss::RssConfig;

    const WORKERS: usize = 4;
    const CONNS_PER_WORKER: usize = 8;
    let clock = VirtualClock::new();
    let rss = RssConfig::symmetric_default(WORKERS as u16);
    let (client_queues, mut server_queue) = memory::multi_queue_pair(
        WORKERS as u16,
        1,
        rss,
        sim::CLIENT_MAC,
        sim::SERVER_MAC,
        1500,
    );
    let mut clients: Vec<_> = client_queues
        .into_iter()
        .enumerate()
        .map(|(i, q)| {
            let sender = Sender {
                payload: pattern(3000, i as u8),
                sent: 0,
                received: Vec::new(),
                closed: Vec::new(),
                peer_closed: false,
            };
            Engine::new(
                q,
                sender,
                clock.clone(),
                sim::engine_config(sim::CLIENT_IP, 7 + i as u64),
            )
        })
        .collect();
    let mut server = Engine::new(
        server_queue.remove(0),
        Echo::default(),
        clock.clone(),
        sim::engine_config(SERVER_IP, 99),
    );
    server.listen(7, 1024);
    echo_from_every_client(&mut clients, &mut server, &clock, CONNS_PER_WORKER);
    for (i, c) in clients.iter().enumerate() {
        let h = c.handler();
        assert_eq!(
            h.closed.len(),
            CONNS_PER_WORKER,
            "worker {i}: {}",
            c.stats()
        );
        assert!(
            h.closed.iter().all(|r| *r == CloseReason::Normal),
            "worker {i}"
        );
        // Nothing was ever answered with a RST: no SYN-ACK reached a worker that did
        // not own its connection.
        assert_eq!(c.stats().rsts_sent, 0, "worker {i}: {}", c.stats());
        assert_eq!(c.stats().dropped(DropReason::NoConnection), 0, "worker {i}");
    }
    assert_eq!(
        server.stats().conns_opened_passive,
        (WORKERS * CONNS_PER_WORKER) as u64
    );
}

/// A multi-queue link whose steering the stack cannot predict (like TAP, whose kernel
/// flow table is not Toeplitz): workers pick ports they own by `port % queues`, and a
/// segment that lands on another worker's queue is handed to its owner (what the
/// runtime's control channel carries) instead of being answered with a RST.
#[test]
fn unpredictable_steering_hands_segments_to_the_owner() {
    use crate::io::memory;
    use crate::rss::RssConfig;

    const WORKERS: usize = 3;
    const CONNS_PER_WORKER: usize = 8;
    let clock = VirtualClock::new();
    let (client_queues, mut server_queue) = memory::multi_queue_pair(
        WORKERS as u16,
        1,
        RssConfig::symmetric_default(WORKERS as u16),
        sim::CLIENT_MAC,
        sim::SERVER_MAC,
        1500,
    );
    let mut clients: Vec<_> = client_queues
        .into_iter()
        .enumerate()
        .map(|(i, mut q)| {
            q.capabilities_mut().rss = None;
            let sender = Sender {
                payload: pattern(5000, i as u8),
                sent: 0,
                received: Vec::new(),
                closed: Vec::new(),
                peer_closed: false,
            };
            Engine::new(
                q,
                sender,
                clock.clone(),
                sim::engine_config(sim::CLIENT_IP, 70 + i as u64),
            )
        })
        .collect();
    let mut server = Engine::new(
        server_queue.remove(0),
        Echo::default(),
        clock.clone(),
        sim::engine_config(SERVER_IP, 98),
    );
    server.listen(7, 1024);
    echo_from_every_client(&mut clients, &mut server, &clock, CONNS_PER_WORKER);
    let forwarded: u64 = clients
        .iter()
        .map(|c| c.stats().misdirected_forwarded)
        .sum();
    assert!(
        forwarded > 0,
        "the link never steered a flow to a non-owner"
    );
    for (i, c) in clients.iter().enumerate() {
        assert_eq!(
            c.handler().closed,
            vec![CloseReason::Normal; CONNS_PER_WORKER],
            "worker {i}: {}",
            c.stats()
        );
        assert_eq!(c.stats().rsts_sent, 0, "worker {i}");
    }
}

/// How the receiving side of [`adversarial_steering`]'s link picks a frame's queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Steer {
    /// Every TCP frame lands on a queue that does not own its flow; the link loses
    /// nothing.
    AwayFromOwner,
    /// Every frame lands on a random queue, so a flow's frames also overtake each other
    /// (those that land on the owner go first, those handed over follow); the link
    /// loses 2 % of frames each way.
    Random,
}

/// The flow of a received TCP frame as its receiver keys it, `None` for anything else.
fn flow_of(frame: &[u8]) -> Option<FlowKey> {
    use smoltcp::wire::{EthernetFrame, EthernetProtocol, IpProtocol, Ipv4Packet, TcpPacket};
    let eth = EthernetFrame::new_checked(frame).ok()?;
    if eth.ethertype() != EthernetProtocol::Ipv4 {
        return None;
    }
    let ip = Ipv4Packet::new_checked(eth.payload()).ok()?;
    if ip.next_header() != IpProtocol::Tcp {
        return None;
    }
    let tcp = TcpPacket::new_checked(ip.payload()).ok()?;
    Some(FlowKey {
        remote_ip: ip.src_addr(),
        remote_port: tcp.src_port(),
        local_port: tcp.dst_port(),
    })
}

/// Both ends of a two-queue link without RSS steer adversarially, as a veth may when
/// its peer kernel draws its transmit queue anew: every segment lands on a worker that
/// does not own its flow and is handed to the owner, SYNs (so that the owner accepts)
/// and segments for TIME-WAIT included, and no segment is ever answered with a RST.
#[test]
fn adversarial_steering_hands_every_segment_to_the_owner() {
    adversarial_steering(Steer::AwayFromOwner, 1024, 1);
}

/// With a backlog of one, most handshakes complete through SYN cookies, which only the
/// worker that sent them can check: the cookie's ACK reaches it wherever it lands.
#[test]
fn adversarial_steering_keeps_syn_cookies_on_the_owner() {
    adversarial_steering(Steer::AwayFromOwner, 1, 2);
}

/// Frames land on random queues, so a flow's frames overtake each other (those that
/// land on the owner go before those handed over), and some are lost: the data still
/// arrives intact and every connection closes normally on its owner. A stale segment
/// (a retransmission, or an ACK from TIME-WAIT answering it) that arrives after its
/// flow has closed on the owner gets the RST any TCP sends for no connection (RFC 9293
/// §3.10.7.1), on one queue as on many; no connection is ever reset.
#[test]
fn random_steering_reorders_but_loses_no_connection() {
    adversarial_steering(Steer::Random, 1024, 3);
}

/// Each of two workers per side opens 16 connections that echo their own payloads
/// through a link that steers by `steer`, with 1 ms of delay each way; the server
/// listens with `backlog`.
fn adversarial_steering(steer: Steer, backlog: usize, seed: u64) {
    use crate::io::fault::FaultInjector;
    use crate::io::memory::{self, MemoryLink};
    use crate::rss::RssConfig;

    const QUEUES: u16 = 2;
    const CONNS_PER_WORKER: usize = 16;
    let total = usize::from(QUEUES) * CONNS_PER_WORKER;
    let clock = VirtualClock::new();
    let (client_queues, server_queues) = memory::multi_queue_pair(
        QUEUES,
        QUEUES,
        RssConfig::symmetric_default(QUEUES),
        sim::CLIENT_MAC,
        sim::SERVER_MAC,
        1500,
    );
    let faults = FaultConfig {
        loss: if steer == Steer::Random { 0.02 } else { 0.0 },
        delay: Duration::from_millis(1),
        ..FaultConfig::none()
    };
    let ephemeral = sim::engine_config(SERVER_IP, 0).ephemeral_ports;
    // Queues that report no RSS, fed by `steer`, with `faults` on what they send.
    let side = |queues: Vec<MemoryLink>, salt: u64| {
        let mut x = 0x9e37_79b9_7f4a_7c15 ^ (seed << 8) ^ salt;
        let ephemeral = ephemeral.clone();
        queues[0].steer_with(move |frame| match (steer, flow_of(frame)) {
            (Steer::AwayFromOwner, Some(key)) => {
                usize::from(owner::owner_queue(&key, &ephemeral, QUEUES) + 1)
            }
            _ => {
                // xorshift64
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                (x >> 32) as usize
            }
        });
        let clock = &clock;
        queues
            .into_iter()
            .enumerate()
            .map(move |(i, mut q)| {
                q.capabilities_mut().rss = None;
                FaultInjector::new(q, clock.clone(), faults, salt + i as u64)
            })
            .collect::<Vec<_>>()
    };
    let mut clients: Vec<_> = side(client_queues, 10)
        .into_iter()
        .enumerate()
        .map(|(i, q)| {
            let cfg = sim::engine_config(sim::CLIENT_IP, seed * 100 + i as u64);
            Engine::new(q, Checker::default(), clock.clone(), cfg)
        })
        .collect();
    let mut servers: Vec<_> = side(server_queues, 20)
        .into_iter()
        .enumerate()
        .map(|(i, q)| {
            let cfg = sim::engine_config(SERVER_IP, seed * 100 + 50 + i as u64);
            let mut server = Engine::new(q, Echo::default(), clock.clone(), cfg);
            server.listen(7, backlog);
            server
        })
        .collect();
    for (i, c) in clients.iter_mut().enumerate() {
        for j in 0..CONNS_PER_WORKER {
            let transfer = Transfer {
                payload: pattern(1000 + 1500 * j, (i * CONNS_PER_WORKER + j) as u8),
                ..Transfer::default()
            };
            c.connect(SocketAddrV4::new(SERVER_IP, 7), transfer)
                .map_err(|(e, _)| e)
                .unwrap();
        }
    }
    let done = run_sides(&mut clients, &mut servers, &clock, |clients, servers| {
        // Every connection lives on the worker that owns it, from its first segment on.
        for (q, server) in servers.iter().enumerate() {
            for (remote, _) in server.connection_states() {
                let key = FlowKey {
                    remote_ip: *remote.ip(),
                    remote_port: remote.port(),
                    local_port: 7,
                };
                let owner = owner::owner_queue(&key, &ephemeral, QUEUES);
                assert_eq!(usize::from(owner), q, "{remote} accepted by a non-owner");
            }
        }
        clients
            .iter()
            .map(|c| c.handler().results.len())
            .sum::<usize>()
            == total
            && servers.iter().all(|s| s.connection_count() == 0)
    });
    let client_stats: Vec<&Stats> = clients.iter().map(|c| c.stats()).collect();
    let server_stats: Vec<&Stats> = servers.iter().map(|s| s.stats()).collect();
    let report: String = client_stats
        .iter()
        .chain(&server_stats)
        .map(|s| format!("\n  {s}"))
        .collect();
    let report = format!("{steer:?}, backlog {backlog}:{report}");
    assert!(done, "not finished; {report}");
    for c in &clients {
        assert_eq!(
            c.handler().results,
            vec![(true, CloseReason::Normal); CONNS_PER_WORKER],
            "{report}"
        );
    }
    for s in &servers {
        let passive = s.stats().conns_opened_passive as usize;
        assert!(passive > 0, "{report}");
        assert_eq!(s.handler().closed, vec![CloseReason::Normal; passive]);
    }
    let passive: u64 = server_stats.iter().map(|s| s.conns_opened_passive).sum();
    assert_eq!(passive, total as u64, "{report}");
    if backlog == 1 {
        let cookies: u64 = server_stats.iter().map(|s| s.syn_cookies_accepted).sum();
        assert!(cookies > 0, "{report}");
    }
    for side in [&client_stats, &server_stats] {
        let forwarded: u64 = side.iter().map(|s| s.misdirected_forwarded).sum();
        for s in side.iter() {
            assert!(s.misdirected_forwarded > 0, "{report}");
            assert_eq!(s.conns_reset, 0, "{report}");
            if steer == Steer::AwayFromOwner {
                assert_eq!(s.rsts_sent, 0, "{report}");
                assert_eq!(s.syn_cookies_rejected, 0, "{report}");
            }
        }
        if steer == Steer::AwayFromOwner {
            // Each segment was received twice: on a non-owner, then handed over.
            let segments: u64 = side.iter().map(|s| s.segments_in).sum();
            assert_eq!(segments, 2 * forwarded, "{report}");
        }
    }
}

/// An idle timeout built on the application timer: the server arms it on accept and on
/// every request, closes when it fires; a cancelled timer never fires.
#[test]
fn application_timer_closes_idle_connections() {
    use crate::time::Instant;

    #[derive(Default)]
    struct Idle {
        fired_at: Vec<Instant>,
        now: Option<crate::time::VirtualClock>,
    }
    impl Handler for Idle {
        type Conn = u32;
        fn accept(&mut self, _: SocketAddrV4, _: SocketAddrV4) -> Option<u32> {
            Some(0)
        }
        fn connected(&mut self, conn: &mut Conn<'_, u32>) {
            // A timer that is cancelled straight away, then the real one.
            conn.set_timer(Some(Duration::from_millis(10)));
            conn.set_timer(None);
            conn.set_timer(Some(Duration::from_millis(500)));
        }
        fn data(&mut self, conn: &mut Conn<'_, u32>, data: &[u8]) -> usize {
            *conn.state() += 1;
            conn.set_timer(Some(Duration::from_millis(500)));
            data.len()
        }
        fn timer(&mut self, conn: &mut Conn<'_, u32>) {
            self.fired_at.push(self.now.as_ref().unwrap().now());
            conn.close();
        }
    }

    let sender = Sender {
        payload: Vec::new(),
        sent: 0,
        received: Vec::new(),
        closed: Vec::new(),
        peer_closed: false,
    };
    let mut net = SimPair::new(
        sender,
        sim::engine_config(sim::CLIENT_IP, 5),
        Idle::default(),
        sim::engine_config(SERVER_IP, 5),
        FaultConfig::none(),
        FaultConfig::none(),
        5,
    );
    net.server.handler_mut().now = Some(net.clock.clone());
    net.server.listen(80, 16);
    // The client sends nothing and never closes (empty payload: it half-closes at once,
    // so make it wait by giving it bytes it cannot send until connected).
    net.client.handler_mut().payload = b"x".to_vec();
    let start = net.now();
    net.client
        .connect(SocketAddrV4::new(SERVER_IP, 80), ())
        .map_err(|(e, _)| e)
        .unwrap();
    assert!(net.run_until(Duration::from_secs(10), |n| !n
        .client
        .handler()
        .closed
        .is_empty()));
    let fired = &net.server.handler().fired_at;
    assert_eq!(
        fired.len(),
        1,
        "one timer fired (the cancelled one did not)"
    );
    let after = fired[0] - start;
    assert!(after >= Duration::from_millis(500), "fired after {after:?}");
    assert!(after < Duration::from_millis(520), "fired late: {after:?}");
    assert_eq!(net.client.handler().closed, vec![CloseReason::Normal]);
}

/// A body with precomputed checksums (`send_summed`), sliced at odd offsets and sent
/// over a link without checksum offload, under loss (retransmissions re-cut the body at
/// new offsets): the receiver verifies every segment's checksum, so a wrong sum from the
/// prefix tables would show as drops and lost data.
#[test]
fn summed_bodies_carry_correct_checksums() {
    use crate::checksum::SummedBytes;

    struct Server {
        body: SummedBytes,
    }
    impl Handler for Server {
        type Conn = ();
        fn accept(&mut self, _: SocketAddrV4, _: SocketAddrV4) -> Option<()> {
            Some(())
        }
        fn connected(&mut self, conn: &mut Conn<'_, ()>) {
            // Odd-length, odd-offset pieces mixed with copied bytes.
            conn.send_summed(&self.body, 1..70_001).unwrap();
            conn.send(b"+").unwrap();
            conn.send_summed(&self.body, 70_001..self.body.len())
                .unwrap();
            conn.shutdown_write();
        }
        fn data(&mut self, _: &mut Conn<'_, ()>, data: &[u8]) -> usize {
            data.len()
        }
    }

    let body: Vec<u8> = (0..250_001u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    let mut want = body[1..70_001].to_vec();
    want.push(b'+');
    want.extend_from_slice(&body[70_001..]);
    let faults = FaultConfig {
        loss: 0.03,
        ..FaultConfig::none()
    };
    let receiver = Sender {
        payload: Vec::new(),
        sent: 0,
        received: Vec::new(),
        closed: Vec::new(),
        peer_closed: false,
    };
    let mut net = SimPair::new(
        receiver,
        sim::engine_config(sim::CLIENT_IP, 9),
        Server {
            body: SummedBytes::new(bytes::Bytes::from(body), 1024),
        },
        sim::engine_config(SERVER_IP, 9),
        faults,
        faults,
        9,
    );
    net.server.listen(80, 16);
    net.client
        .connect(SocketAddrV4::new(SERVER_IP, 80), ())
        .map_err(|(e, _)| e)
        .unwrap();
    assert!(net.run_until(Duration::from_secs(120), |n| n.client.handler().peer_closed));
    assert!(net.client.handler().received == want, "body differs");
    assert_eq!(net.client.stats().dropped(DropReason::BadTcpChecksum), 0);
    assert!(
        net.server.stats().retransmissions > 0,
        "loss exercised retransmission"
    );
}

/// With a device that does TSO (and transmit checksums), new data leaves as super-frames
/// of many full segments; the in-memory link hands them over whole, as GRO would, and
/// the stream arrives intact. Retransmissions stay single segments.
#[test]
fn tso_super_frames_carry_bulk_data() {
    use crate::io::memory;
    use crate::io::{Capabilities, ChecksumOffload};

    let mut caps_a = Capabilities::new(sim::CLIENT_MAC, 1500);
    let mut caps_b = Capabilities::new(sim::SERVER_MAC, 1500);
    for caps in [&mut caps_a, &mut caps_b] {
        caps.tso_max = Some(65521);
        caps.tx_checksum = ChecksumOffload {
            ipv4: false,
            tcp: true,
        };
    }
    let (a, b) = memory::pair(caps_a, caps_b);
    let clock = VirtualClock::new();
    let payload = pattern(3 << 20, 7);
    let sender = Sender {
        payload: payload.clone(),
        sent: 0,
        received: Vec::new(),
        closed: Vec::new(),
        peer_closed: false,
    };
    let mut client = Engine::new(
        a,
        sender,
        clock.clone(),
        sim::engine_config(sim::CLIENT_IP, 11),
    );
    let mut server = Engine::new(
        b,
        Echo::default(),
        clock.clone(),
        sim::engine_config(SERVER_IP, 11),
    );
    server.listen(7, 16);
    client
        .connect(SocketAddrV4::new(SERVER_IP, 7), ())
        .map_err(|(e, _)| e)
        .unwrap();
    for _ in 0..1_000_000 {
        let n = client.poll() + server.poll();
        if !client.handler().closed.is_empty() {
            break;
        }
        if n == 0 {
            clock.advance(Duration::from_millis(1));
        }
    }
    let h = client.handler();
    assert_eq!(h.closed, vec![CloseReason::Normal], "{}", client.stats());
    assert!(h.received == payload, "echo differs");
    // 3 MiB each way in far fewer frames than 1448-byte segments would need.
    let full_segments = (3 << 20) / 1448;
    assert!(
        client.stats().frames_out < full_segments as u64 / 4,
        "TSO not used: {} frames",
        client.stats().frames_out
    );
}

/// Sends one message on connect and keeps the connection open.
#[derive(Default)]
struct OneShot {
    received: Vec<u8>,
}

impl Handler for OneShot {
    type Conn = ();
    fn accept(&mut self, _: SocketAddrV4, _: SocketAddrV4) -> Option<()> {
        None
    }
    fn connected(&mut self, conn: &mut Conn<'_, ()>) {
        assert_eq!(conn.send(b"ping").ok(), Some(4));
    }
    fn data(&mut self, _: &mut Conn<'_, ()>, data: &[u8]) -> usize {
        self.received.extend_from_slice(data);
        data.len()
    }
    fn closed(&mut self, _: &mut Opener<'_, ()>, _: (), _: CloseReason) {}
}

/// A keep-alive connection keeps its drained send ring for its next response, and gives
/// it back once it has been quiet for `IDLE_RING_RELEASE` (at most twice that): an idle
/// connection holds no buffer memory.
#[test]
fn quiet_connections_give_their_kept_send_ring_back() {
    let mut net = SimPair::new(
        OneShot::default(),
        sim::engine_config(sim::CLIENT_IP, 5),
        Echo::default(),
        sim::engine_config(SERVER_IP, 5),
        FaultConfig::none(),
        FaultConfig::none(),
        5,
    );
    net.server.listen(7, 16);
    net.client
        .connect(SocketAddrV4::new(SERVER_IP, 7), ())
        .map_err(|(e, _)| e)
        .expect("connect");
    let started = net.now();
    // Until the echo is back and acknowledged: both send buffers drained.
    let echoed = net.run_until(Duration::from_millis(500), |n| {
        n.client.handler().received == b"ping"
            && n.server.app[0].tcb.holds_idle_send_ring()
            && n.client.app[0].tcb.holds_idle_send_ring()
    });
    assert!(
        echoed,
        "{:?} / {:?}",
        net.client.stats(),
        net.server.stats()
    );
    let sent_at = net.now();
    assert_eq!(net.server.pool.in_use(), crate::tcp::pool::MIN_RING);
    assert_eq!(net.client.pool.in_use(), crate::tcp::pool::MIN_RING);
    // Quiet: both rings go back within two sweep periods, with nothing else happening.
    let released = net.run_until(3 * IDLE_RING_RELEASE, |n| {
        n.server.pool.in_use() == 0 && n.client.pool.in_use() == 0
    });
    assert!(released, "rings still held at {:?}", net.now() - sent_at);
    // Not before a full period after the last data was sent (after `started`), and
    // within two periods of both buffers draining.
    let (since_start, since_drained) = (net.now() - started, net.now() - sent_at);
    assert!(
        since_start >= IDLE_RING_RELEASE && since_drained <= 2 * IDLE_RING_RELEASE,
        "released {since_start:?} after the start, {since_drained:?} after draining"
    );
    assert!(net.server.ring_keepers.is_empty() && net.client.ring_keepers.is_empty());
    assert_eq!(
        net.server.connection_count(),
        1,
        "the connection stays open"
    );
    assert_eq!(net.client.connection_count(), 1);
}

/// Answers every request with a few bytes and arms the application timer for an idle
/// timeout on each, as httpd does with its keep-alive timeout.
struct KeepAliveServer {
    idle_timeout: Duration,
}

impl Handler for KeepAliveServer {
    type Conn = ();
    fn accept(&mut self, _: SocketAddrV4, _: SocketAddrV4) -> Option<()> {
        Some(())
    }
    fn data(&mut self, conn: &mut Conn<'_, ()>, data: &[u8]) -> usize {
        let _ = conn.send(b"response");
        conn.set_timer(Some(self.idle_timeout));
        data.len()
    }
    fn timer(&mut self, conn: &mut Conn<'_, ()>) {
        conn.close();
    }
    fn closed(&mut self, _: &mut Opener<'_, ()>, _: (), _: CloseReason) {}
}

/// Asks, waits for the answer, pauses for `pause`, asks again: `exchanges` times on
/// each connection, which then stays open.
struct PausingClient {
    pause: Duration,
    exchanges: u32,
    finished: usize,
}

impl Handler for PausingClient {
    type Conn = u32;
    fn accept(&mut self, _: SocketAddrV4, _: SocketAddrV4) -> Option<u32> {
        None
    }
    fn connected(&mut self, conn: &mut Conn<'_, u32>) {
        let _ = conn.send(b"request");
    }
    fn data(&mut self, conn: &mut Conn<'_, u32>, data: &[u8]) -> usize {
        *conn.state() += 1;
        if *conn.state() < self.exchanges {
            conn.set_timer(Some(self.pause));
        } else {
            self.finished += 1;
        }
        data.len()
    }
    fn timer(&mut self, conn: &mut Conn<'_, u32>) {
        let _ = conn.send(b"request");
    }
    fn closed(&mut self, _: &mut Opener<'_, u32>, _: u32, _: CloseReason) {}
}

/// A keep-alive connection whose far timer (the application's idle timeout) is re-armed
/// on every request, while its near timers (loss probe, retransmission) come and go,
/// keeps a bounded number of entries in the engine's timer wheel however many requests
/// it serves: the entry for the far deadline is made once and moved when it comes due,
/// not made again whenever a near one fires.
#[test]
fn keep_alive_connections_keep_few_timer_entries() {
    const CONNS: usize = 20;
    let client = PausingClient {
        pause: Duration::from_millis(300),
        exchanges: 200,
        finished: 0,
    };
    let server = KeepAliveServer {
        idle_timeout: Duration::from_secs(15),
    };
    let mut net = SimPair::with_delay(client, server, Duration::from_millis(1), 9);
    net.server.listen(80, 64);
    for _ in 0..CONNS {
        net.client
            .connect(SocketAddrV4::new(SERVER_IP, 80), 0)
            .map_err(|(e, _)| e)
            .expect("connect");
    }
    let mut most = 0;
    let done = net.run_until(Duration::from_secs(120), |n| {
        most = most.max(n.server.timers.len());
        n.client.handler().finished == CONNS
    });
    assert!(done, "{:?} / {:?}", net.client.stats(), net.server.stats());
    assert_eq!(net.server.connection_count(), CONNS);
    println!("at most {most} timer-wheel entries for {CONNS} connections");
    assert!(
        most <= 3 * CONNS,
        "{most} timer-wheel entries for {CONNS} connections"
    );
}
