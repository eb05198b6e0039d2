//! Engine tests on the simulated wire: whole connections between two engines.

use std::net::SocketAddrV4;
use std::time::Duration;

use super::*;
use crate::app::CloseReason;
use crate::app::{Conn, Opener};
use crate::drop::DropReason;
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
    use crate::time::VirtualClock;

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
    for c in clients.iter_mut() {
        for _ in 0..CONNS_PER_WORKER {
            c.connect(SocketAddrV4::new(SERVER_IP, 7), ())
                .map_err(|(e, _)| e)
                .unwrap();
        }
    }
    let mut learned = Vec::new();
    for _ in 0..100_000 {
        let mut work = server.poll();
        for c in clients.iter_mut() {
            work += c.poll();
            c.drain_learned_arp(&mut learned);
        }
        for &(ip, mac) in &learned {
            for c in clients.iter_mut() {
                c.import_arp(ip, mac);
            }
        }
        learned.clear();
        if clients
            .iter()
            .all(|c| c.handler().closed.len() == CONNS_PER_WORKER)
        {
            break;
        }
        if work == 0 {
            clock.advance(Duration::from_millis(1));
        }
    }
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
    use crate::time::VirtualClock;

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
    for c in clients.iter_mut() {
        for _ in 0..CONNS_PER_WORKER {
            c.connect(SocketAddrV4::new(SERVER_IP, 7), ())
                .map_err(|(e, _)| e)
                .unwrap();
        }
    }
    let (mut learned, mut misdirected) = (Vec::new(), Vec::new());
    for _ in 0..100_000 {
        let mut work = server.poll();
        for c in clients.iter_mut() {
            work += c.poll();
            c.drain_learned_arp(&mut learned);
        }
        for (i, c) in clients.iter_mut().enumerate() {
            let before = misdirected.len();
            c.take_misdirected(&mut misdirected);
            assert!(misdirected[before..]
                .iter()
                .all(|(owner, _)| *owner as usize != i));
        }
        for (owner, frame) in misdirected.drain(..) {
            clients[owner as usize].inject_frame(&frame);
            work += 1;
        }
        for &(ip, mac) in &learned {
            for c in clients.iter_mut() {
                c.import_arp(ip, mac);
            }
        }
        learned.clear();
        if clients
            .iter()
            .all(|c| c.handler().closed.len() == CONNS_PER_WORKER)
        {
            break;
        }
        if work == 0 {
            clock.advance(Duration::from_millis(1));
        }
    }
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
    use crate::time::VirtualClock;

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
