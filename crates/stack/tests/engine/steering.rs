//! Multi-queue links: every segment reaches the worker that owns its flow, whether the
//! link's RSS steers it there, steers it unpredictably, or steers it adversarially.

use std::net::{IpAddr, Ipv4Addr};

use super::*;

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
    fn accept(&mut self, _: std::net::SocketAddr, _: std::net::SocketAddr) -> Option<Transfer> {
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

/// The client workers and the echo server of [`echo_from_every_client`].
type EchoSides<D> = (
    Vec<Engine<D, Sender, VirtualClock>>,
    Engine<D, Echo, VirtualClock>,
);

/// The engine configurations of a client worker (seed `client`) and of the server (seed
/// `server`) that talk over `family`: [`SERVER_IP`] or [`sim::SERVER_IP6`] and the
/// matching client address (IPv6 only, then).
fn family_configs(family: Family, client: u64, server: u64) -> (EngineConfig, EngineConfig) {
    match family {
        Family::V4 => (
            sim::engine_config(sim::CLIENT_IP, client),
            sim::engine_config(SERVER_IP, server),
        ),
        Family::V6 => (
            sim::engine_config_v6(Ipv4Addr::UNSPECIFIED, sim::CLIENT_IP6, client),
            sim::engine_config_v6(Ipv4Addr::UNSPECIFIED, sim::SERVER_IP6, server),
        ),
    }
}

/// Which family the connections of a steering test use.
#[derive(Debug, Clone, Copy)]
enum Family {
    V4,
    V6,
}

impl Family {
    /// The server's address.
    fn server(self) -> IpAddr {
        match self {
            Family::V4 => SERVER_IP.into(),
            Family::V6 => sim::SERVER_IP6.into(),
        }
    }
}

/// Client workers on `client_queues`, worker `i` sending `len` bytes of `pattern` (engine
/// seed `seeds.0 + i`), and an echo server on `server_queue` (engine seed `seeds.1`)
/// listening on port 7, talking over `family`. Opens `conns` connections from every
/// client worker and runs both sides (see [`run_sides`]) until every client has seen
/// all of them close.
fn echo_from_every_client<D: PacketIo>(
    family: Family,
    client_queues: Vec<D>,
    server_queue: D,
    len: usize,
    seeds: (u64, u64),
    conns: usize,
) -> EchoSides<D> {
    let clock = VirtualClock::new();
    let mut clients: Vec<_> = client_queues
        .into_iter()
        .enumerate()
        .map(|(i, q)| {
            let sender = Sender::new(pattern(len, i as u8));
            let (cfg, _) = family_configs(family, seeds.0 + i as u64, seeds.1);
            Engine::new(q, sender, clock.clone(), cfg)
        })
        .collect();
    let (_, cfg) = family_configs(family, seeds.0, seeds.1);
    let mut server = Engine::new(server_queue, Echo::default(), clock.clone(), cfg);
    server.listen(7, 1024);
    // IPv6 addresses are tentative until duplicate address detection has run.
    assert!(run_sides(
        &mut clients,
        std::slice::from_mut(&mut server),
        &clock,
        |c, s| !s[0].detecting_duplicates() && c.iter().all(|c| !c.detecting_duplicates()),
    ));
    for c in clients.iter_mut() {
        for _ in 0..conns {
            c.connect(SocketAddr::new(family.server(), 7), ())
                .map_err(|(e, _)| e)
                .unwrap();
        }
    }
    run_sides(
        &mut clients,
        std::slice::from_mut(&mut server),
        &clock,
        |c, _| c.iter().all(|c| c.handler().closed.len() == conns),
    );
    (clients, server)
}

/// Four client workers on a four-queue link: every active open picks a source port whose
/// return flow the link's Toeplitz RSS steers back to the opening worker's own queue, and
/// ARP mappings learned by the worker that owns queue 0 reach the others through the
/// sibling-publishing API (what the runtime's control channel carries).
#[test]
fn active_opens_land_on_their_own_queue() {
    active_opens_land_on_their_own_queue_over(Family::V4);
}

/// The same over IPv6: the port choice hashes the IPv6 4-tuple, and the neighbours the
/// worker on queue 0 resolves (Neighbor Advertisements are not hashed) reach the others.
#[test]
fn active_opens_land_on_their_own_queue_over_ipv6() {
    active_opens_land_on_their_own_queue_over(Family::V6);
}

fn active_opens_land_on_their_own_queue_over(family: Family) {
    use rusty_stack::rss::RssConfig;
    use rusty_testkit::memory;

    const WORKERS: usize = 4;
    const CONNS_PER_WORKER: usize = 8;
    let rss = RssConfig::symmetric_default(WORKERS as u16);
    let (client_queues, mut server_queue) = memory::multi_queue_pair(
        WORKERS as u16,
        1,
        rss,
        sim::CLIENT_MAC,
        sim::SERVER_MAC,
        1500,
    );
    let (clients, server) = echo_from_every_client(
        family,
        client_queues,
        server_queue.remove(0),
        3000,
        (7, 99),
        CONNS_PER_WORKER,
    );
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
        // And the link steered every segment of every flow to its owner: no worker had
        // to hand one over.
        assert_eq!(c.stats().misdirected_forwarded, 0, "worker {i}");
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
    unpredictable_steering_hands_segments_to_the_owner_over(Family::V4);
}

/// The same over IPv6.
#[test]
fn unpredictable_steering_hands_segments_to_the_owner_over_ipv6() {
    unpredictable_steering_hands_segments_to_the_owner_over(Family::V6);
}

fn unpredictable_steering_hands_segments_to_the_owner_over(family: Family) {
    use rusty_stack::rss::RssConfig;
    use rusty_testkit::memory;

    const WORKERS: usize = 3;
    const CONNS_PER_WORKER: usize = 8;
    let (mut client_queues, mut server_queue) = memory::multi_queue_pair(
        WORKERS as u16,
        1,
        RssConfig::symmetric_default(WORKERS as u16),
        sim::CLIENT_MAC,
        sim::SERVER_MAC,
        1500,
    );
    for q in &mut client_queues {
        q.capabilities_mut().rss = None;
    }
    let (clients, _) = echo_from_every_client(
        family,
        client_queues,
        server_queue.remove(0),
        5000,
        (70, 98),
        CONNS_PER_WORKER,
    );
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
    Some(FlowKey::new(
        ip.src_addr().into(),
        tcp.src_port(),
        tcp.dst_port(),
        0,
    ))
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
    use rusty_stack::io::fault::FaultInjector;
    use rusty_stack::rss::RssConfig;
    use rusty_testkit::memory::{self, MemoryLink};

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
    let faults = FaultConfig::none()
        .with_loss(if steer == Steer::Random { 0.02 } else { 0.0 })
        .with_delay(Duration::from_millis(1));
    let ephemeral = sim::engine_config(SERVER_IP, 0).ephemeral_ports;
    // Queues that report no RSS, fed by `steer`, with `faults` on what they send.
    let side = |queues: Vec<MemoryLink>, salt: u64| {
        let mut x = 0x9e37_79b9_7f4a_7c15 ^ (seed << 8) ^ salt;
        let ephemeral = ephemeral.clone();
        queues[0].steer_with(move |frame| match (steer, flow_of(frame)) {
            (Steer::AwayFromOwner, Some(key)) => {
                usize::from(owner_queue(&key, &ephemeral, QUEUES) + 1)
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
            c.connect(SocketAddr::from((SERVER_IP, 7)), transfer)
                .map_err(|(e, _)| e)
                .unwrap();
        }
    }
    let done = run_sides(&mut clients, &mut servers, &clock, |clients, servers| {
        // Every connection lives on the worker that owns it, from its first segment on.
        for (q, server) in servers.iter().enumerate() {
            for (remote, _) in server.connection_states() {
                let key = FlowKey::new(remote.ip(), remote.port(), 7, 0);
                let owner = owner_queue(&key, &ephemeral, QUEUES);
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
