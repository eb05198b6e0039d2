//! Acting on a connection from outside a callback (`Engine::with_conn`), as a socket
//! layer does for `write`, `shutdown` and `close`.

use super::*;
use rusty_stack::ConnId;

/// Keeps the id of its one connection and what arrives on it.
#[derive(Default)]
struct Outside {
    id: Option<ConnId>,
    received: Vec<u8>,
    peer_closed: bool,
    closed: Vec<CloseReason>,
}

impl Handler for Outside {
    type Conn = ();
    fn accept(&mut self, _: std::net::SocketAddr, _: std::net::SocketAddr) -> Option<()> {
        None
    }
    fn connected(&mut self, conn: &mut Conn<'_, ()>) {
        self.id = Some(conn.id());
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

fn connected_pair() -> (SimPair<Outside, Echo>, ConnId) {
    let mut net = SimPair::with_delay(
        Outside::default(),
        Echo::default(),
        Duration::from_millis(1),
        7,
    );
    net.server.listen(7, 16);
    net.client
        .connect(SocketAddr::from((SERVER_IP, 7)), ())
        .map_err(|(e, _)| e)
        .expect("connect");
    assert!(net.run_until(Duration::from_secs(1), |n| n.client.handler().id.is_some()));
    let id = net.client.handler().id.expect("connected");
    (net, id)
}

#[test]
fn sends_and_closes_from_outside_a_callback_take_effect_at_once() {
    let (mut net, id) = connected_pair();
    let sent = net.client.with_conn(id, |_, conn| conn.send(b"hello"));
    assert_eq!(sent, Some(Ok(5)));
    assert!(
        net.run_until(Duration::from_secs(1), |n| n.client.handler().received
            == b"hello")
    );
    // A half-close: the echo server closes back, and both ends finish normally.
    assert_eq!(
        net.client.with_conn(id, |_, conn| conn.shutdown_write()),
        Some(())
    );
    assert!(net.run_until(Duration::from_secs(5), |n| {
        !n.client.handler().closed.is_empty() && !n.server.handler().closed.is_empty()
    }));
    assert!(net.client.handler().peer_closed);
    assert_eq!(net.client.handler().closed, vec![CloseReason::Normal]);
    assert_eq!(net.server.handler().closed, vec![CloseReason::Normal]);
}

#[test]
fn a_gone_connection_is_not_acted_on() {
    let (mut net, id) = connected_pair();
    assert_eq!(net.client.with_conn(id, |_, conn| conn.abort()), Some(()));
    assert_eq!(net.client.handler().closed, vec![CloseReason::Aborted]);
    let mut called = false;
    assert_eq!(net.client.with_conn(id, |_, _| called = true), None);
    assert!(!called, "the closure ran on a gone connection");
    assert_eq!(net.client.connection_count(), 0);
}

#[test]
fn after_unlisten_new_connections_are_refused_and_open_ones_carry_on() {
    let (mut net, id) = connected_pair();
    assert!(net.server.unlisten(7));
    assert!(!net.server.unlisten(7), "not listening any more");
    net.client
        .connect(SocketAddr::from((SERVER_IP, 7)), ())
        .map_err(|(e, _)| e)
        .expect("connect");
    assert!(net.run_until(Duration::from_secs(1), |n| {
        n.client.handler().closed == [CloseReason::Refused]
    }));
    // The first connection still echoes.
    assert_eq!(
        net.client.with_conn(id, |_, conn| conn.send(b"still here")),
        Some(Ok(10))
    );
    assert!(
        net.run_until(Duration::from_secs(1), |n| n.client.handler().received
            == b"still here")
    );
}

#[test]
fn a_listener_for_one_family_refuses_the_other_at_once() {
    let v6 = |last: u16| std::net::Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, last);
    let cfg = |ip, last| {
        let mut cfg = sim::engine_config(ip, 9);
        cfg.ipv6 = vec![(v6(last), 64)];
        cfg.dad_transmits = 0;
        cfg
    };
    let mut net = SimPair::new(
        Outside::default(),
        cfg(sim::CLIENT_IP, 1),
        Echo::default(),
        cfg(SERVER_IP, 2),
        FaultConfig::none().with_delay(Duration::from_millis(1)),
        FaultConfig::none().with_delay(Duration::from_millis(1)),
        9,
    );
    assert!(!net.server.listen_families(7, false, true), "not listening");
    net.server.listen(7, 16);
    assert!(net.server.listen_families(7, false, true));
    let connect = |net: &mut SimPair<Outside, Echo>, to: SocketAddr| {
        net.client
            .connect(to, ())
            .map_err(|(e, _)| e)
            .expect("connect");
    };
    connect(&mut net, SocketAddr::from((SERVER_IP, 7)));
    assert!(net.run_until(Duration::from_secs(1), |n| {
        n.client.handler().closed == [CloseReason::Refused]
    }));
    assert_eq!(net.server.stats().conns_opened_passive, 0, "no handshake");
    connect(&mut net, SocketAddr::from((v6(2), 7)));
    assert!(net.run_until(Duration::from_secs(1), |n| n.client.handler().id.is_some()));
    // A new `listen` on the port changes its backlog, not its families.
    net.server.listen(7, 32);
    net.client.handler_mut().closed.clear();
    connect(&mut net, SocketAddr::from((SERVER_IP, 7)));
    assert!(net.run_until(Duration::from_secs(1), |n| {
        n.client.handler().closed == [CloseReason::Refused]
    }));
}
