//! Engine tests of the limits that are configuration: active opens that run
//! a destination out of ports fail without a scan and get their ports back after close
//! and TIME-WAIT; queue-restricted ports are counted exactly; the tables that scale
//! with the connection count are sized by configuration, not by 16 bits.

use std::collections::HashSet;
use std::net::SocketAddr;
use std::time::Duration;

use super::*;
use rusty_stack::app::{CloseReason, Conn, ConnectError, Opener};
use rusty_stack::io::fault::FaultConfig;
use rusty_stack::io::Capabilities;
use rusty_stack::rss::RssConfig;
use rusty_stack::time::VirtualClock;
use rusty_testkit::memory::{self, MemoryLink};
use rusty_testkit::sim::{self, SimPair, CLIENT_IP, CLIENT_MAC, SERVER_IP, SERVER_MAC};

const SERVER_PORT: u16 = 7;
/// How long the client keeps each connection before closing it (so that the client
/// ends up in TIME-WAIT).
const HOLD: Duration = Duration::from_secs(100);

/// Accepts connections, and closes each one `hold` after it is established.
#[derive(Default)]
struct Holder {
    hold: Option<Duration>,
    connected: usize,
    closed: usize,
}

impl Handler for Holder {
    type Conn = ();
    fn accept(&mut self, _: std::net::SocketAddr, _: std::net::SocketAddr) -> Option<()> {
        Some(())
    }
    fn connected(&mut self, conn: &mut Conn<'_, ()>) {
        self.connected += 1;
        conn.set_timer(self.hold);
    }
    fn data(&mut self, _: &mut Conn<'_, ()>, data: &[u8]) -> usize {
        data.len()
    }
    fn timer(&mut self, conn: &mut Conn<'_, ()>) {
        conn.close();
    }
    fn peer_closed(&mut self, conn: &mut Conn<'_, ()>) {
        conn.close();
    }
    fn closed(&mut self, _: &mut Opener<'_, ()>, _: (), _: CloseReason) {
        self.closed += 1;
    }
}

fn server_addr() -> SocketAddr {
    SocketAddr::from((SERVER_IP, SERVER_PORT))
}

/// Why a connect from `e` to `remote` failed (it must fail).
fn refusal<D: PacketIo, C: Clock>(
    e: &mut Engine<D, Holder, C>,
    remote: SocketAddr,
) -> ConnectError {
    match e.connect(remote, ()) {
        Ok(_) => panic!("connect to {remote} succeeded"),
        Err((error, ())) => error,
    }
}

/// Ports the client's port search has checked, and the walks it made.
fn cost<D: PacketIo, H: Handler, C: Clock>(e: &Engine<D, H, C>) -> (u64, u64) {
    e.internals().port_search_cost()
}

#[test]
fn a_destination_out_of_ports_fails_in_o1_and_its_ports_come_back_after_time_wait() {
    let mut client_cfg = sim::engine_config(CLIENT_IP, 13);
    let ports = client_cfg.ephemeral_ports.clone();
    let n = usize::from(ports.end() - ports.start()) + 1;
    assert_eq!(n, 28232, "the default range");
    // All of them close at once: as orphans until their FINs are acknowledged.
    client_cfg.max_orphans = n;
    let mut server_cfg = sim::engine_config(SERVER_IP, 13);
    server_cfg.max_orphans = n;
    let mut net = SimPair::new(
        Holder {
            hold: Some(HOLD),
            ..Default::default()
        },
        client_cfg,
        Holder::default(),
        server_cfg,
        FaultConfig::none(),
        FaultConfig::none(),
        13,
    );
    net.server.listen(SERVER_PORT, n);
    // Fill every port to the one destination, in batches the link carries.
    let mut opened = 0;
    while opened < n {
        for _ in 0..(n - opened).min(2000) {
            net.client
                .connect(server_addr(), ())
                .expect("a port is free");
            opened += 1;
            if opened == 1 {
                // The first SYN waits for ARP, which queues only a few frames.
                assert!(net.run_until(Duration::from_secs(5), |n| {
                    n.client.handler().connected == 1
                }));
            }
        }
        assert!(net.run_until(Duration::from_secs(5), |n| {
            n.client.handler().connected == opened
        }));
    }
    assert_eq!(net.client.connection_count(), n);
    let (probes, walks) = cost(&net.client);
    // Ports taken in order are found at the cursor: one check each.
    assert_eq!(probes, n as u64);
    assert_eq!(walks, 0);

    // Full: a connect fails without checking a single port.
    for _ in 0..1000 {
        assert_eq!(
            refusal(&mut net.client, server_addr()),
            ConnectError::NoPortAvailable
        );
    }
    assert_eq!(
        cost(&net.client),
        (probes, walks),
        "failed connects cost no probe"
    );
    // Another destination has all its ports.
    net.client
        .connect(SocketAddr::from((SERVER_IP, SERVER_PORT + 1)), ())
        .expect("ports are per destination");

    // The client closes everything and holds the ports in TIME-WAIT: still full.
    assert!(net.run_until(HOLD + Duration::from_secs(5), |net| {
        net.client.handler().closed >= n
    }));
    assert_eq!(
        net.client.time_wait_count(),
        n,
        "{} / {:?}",
        net.client.stats(),
        net.client.connection_states().take(3).collect::<Vec<_>>()
    );
    let (probes, walks) = cost(&net.client);
    assert_eq!(
        refusal(&mut net.client, server_addr()),
        ConnectError::NoPortAvailable
    );
    assert_eq!(cost(&net.client), (probes, walks));

    // After 2·MSL every port is free again, each found with one check.
    net.clock.advance(Duration::from_secs(61));
    net.client.poll();
    assert_eq!(net.client.time_wait_count(), 0);
    for _ in 0..n {
        net.client
            .connect(server_addr(), ())
            .expect("ports came back");
    }
    let (after, walks_after) = cost(&net.client);
    assert_eq!(walks_after, walks);
    assert!(after - probes <= n as u64 + 2, "{} probes", after - probes);
}

#[test]
fn a_port_freed_by_an_abort_is_found_at_once() {
    let mut cfg = sim::engine_config(CLIENT_IP, 1);
    cfg.ephemeral_ports = 10000..=19999;
    let (mut engine, _peer) = lone_engine(cfg, Capabilities::new(CLIENT_MAC, 1500));
    let mut ids = Vec::new();
    for _ in 0..10000 {
        ids.push(
            engine
                .connect(server_addr(), ())
                .map_err(|(e, _)| e)
                .unwrap(),
        );
    }
    // Free one port far from the cursor (the connection is aborted and gone).
    let victim = ids[4321];
    assert!(engine.abort_internal(victim));
    let (probes, walks) = cost(&engine);
    engine
        .connect(server_addr(), ())
        .map_err(|(e, _)| e)
        .unwrap();
    assert_eq!(
        cost(&engine),
        (probes + 1, walks),
        "the freed port is the hint"
    );
    assert!(engine.connect(server_addr(), ()).is_err());
    assert_eq!(cost(&engine), (probes + 1, walks));
}

/// An engine alone on a memory link whose far end nobody answers: its active opens
/// stay in SYN-SENT and hold their ports.
fn lone_engine(
    cfg: EngineConfig,
    caps: Capabilities,
) -> (Engine<MemoryLink, Holder, VirtualClock>, MemoryLink) {
    let (a, b) = memory::pair(caps, Capabilities::new(SERVER_MAC, 1500));
    let engine = Engine::new(a, Holder::default(), VirtualClock::new(), cfg);
    (engine, b)
}

/// Fill every port `engine` may use towards `remote`; returns the ports it holds.
fn fill(engine: &mut Engine<MemoryLink, Holder, VirtualClock>, remote: SocketAddr) -> Vec<u16> {
    while engine.connect(remote, ()).is_ok() {}
    let ports: Vec<u16> = engine
        .internals()
        .connections()
        .map(|(_, key)| key.local_port)
        .collect();
    assert_eq!(ports.iter().collect::<HashSet<_>>().len(), ports.len());
    ports
}

#[test]
fn with_rss_exactly_the_ports_steered_here_are_used_and_a_full_destination_costs_one_walk() {
    let queues = 4;
    let rss = RssConfig::symmetric_default(queues);
    let mut caps = Capabilities::new(CLIENT_MAC, 1500);
    caps.queue = 2;
    caps.queue_count = queues;
    caps.rss = Some(rss.clone());
    let mut cfg = sim::engine_config(CLIENT_IP, 3);
    cfg.ephemeral_ports = 40000..=44999;
    let ports = cfg.ephemeral_ports.clone();
    let (mut engine, _peer) = lone_engine(cfg, caps);
    let taken = fill(&mut engine, server_addr());
    let n = taken.len();
    for &p in &taken {
        assert_eq!(
            rss.queue_for_rx_flow(SERVER_IP, CLIENT_IP, SERVER_PORT, p),
            2
        );
    }
    assert_eq!(
        refusal(&mut engine, server_addr()),
        ConnectError::NoPortAvailable
    );
    let steered_here = ports
        .clone()
        .filter(|&p| rss.queue_for_rx_flow(SERVER_IP, CLIENT_IP, SERVER_PORT, p) == 2)
        .count();
    assert_eq!(n, steered_here, "every port steered here, and no other");
    assert!(n > 5000 / 8 && n < 5000 / 2, "about a quarter: {n}");
    // The failure that found the destination full walked the range once and learned
    // how many ports it has; from then on failures check nothing.
    let (probes, walks) = cost(&engine);
    assert_eq!(walks, 1);
    for _ in 0..100 {
        assert!(engine.connect(server_addr(), ()).is_err());
    }
    assert_eq!(cost(&engine), (probes, walks));
}

#[test]
fn on_a_link_steered_by_port_a_full_destination_never_walks() {
    let mut caps = Capabilities::new(CLIENT_MAC, 1500);
    caps.queue = 1;
    caps.queue_count = 3;
    let mut cfg = sim::engine_config(CLIENT_IP, 4);
    cfg.ephemeral_ports = 30000..=32999;
    let (mut engine, _peer) = lone_engine(cfg, caps);
    let taken = fill(&mut engine, server_addr());
    assert_eq!(taken.len(), 1000);
    assert!(taken.iter().all(|p| p % 3 == 1));
    let (probes, walks) = cost(&engine);
    assert_eq!((probes, walks), (1000, 0));
    assert!(engine.connect(server_addr(), ()).is_err());
    assert_eq!(cost(&engine), (probes, walks));
}

#[test]
fn a_listener_inside_the_range_makes_the_search_look_before_failing() {
    let mut cfg = sim::engine_config(CLIENT_IP, 5);
    cfg.ephemeral_ports = 2000..=2099;
    let (mut engine, _peer) = lone_engine(cfg, Capabilities::new(CLIENT_MAC, 1500));
    engine.listen(2050, 16);
    let taken = fill(&mut engine, server_addr());
    assert_eq!(taken.len(), 100);
    let (probes, _) = cost(&engine);
    assert!(engine.connect(server_addr(), ()).is_err());
    // It could not trust the count, so it looked at every port (the range is short
    // enough for one run).
    assert_eq!(cost(&engine).0, probes + 100);
}

#[test]
fn configured_tables_hold_more_than_sixteen_bits_of_connections() {
    // 70,000 live connections on one engine: past 65,536 in the connection table, the
    // flow table and the slot indices; 3 destinations × 23,334 ports.
    let mut cfg = sim::engine_config(CLIENT_IP, 6);
    cfg.max_connections = 70_000;
    cfg.reserved_connections = 1024;
    let (mut engine, _peer) = lone_engine(cfg, Capabilities::new(CLIENT_MAC, 1500));
    let mut ids = Vec::new();
    for i in 0..70_000u32 {
        let remote = SocketAddr::from((SERVER_IP, 1 + (i % 3) as u16));
        ids.push(engine.connect(remote, ()).map_err(|(e, _)| e).unwrap());
    }
    assert_eq!(engine.connection_count(), 70_000);
    assert!(ids.iter().any(|id| id.index() >= 65536));
    assert_eq!(
        refusal(&mut engine, server_addr()),
        ConnectError::TooManyConnections
    );
    // Every flow is found by its key.
    let internals = engine.internals();
    for (index, key) in internals.connections() {
        assert_eq!(internals.flow(&key), Some(Flow::Conn(index as u32)));
    }
}
