//! Idle connections: an idle timeout on the application timer, the send ring a quiet
//! connection gives back, and the timer entries a keep-alive connection keeps.

use super::*;
use rusty_stack::internals::IDLE_RING_RELEASE;

/// An idle timeout built on the application timer: the server arms it on accept and on
/// every request, closes when it fires; a cancelled timer never fires.
#[test]
fn application_timer_closes_idle_connections() {
    use rusty_stack::time::Instant;

    #[derive(Default)]
    struct Idle {
        fired_at: Vec<Instant>,
        now: Option<rusty_stack::time::VirtualClock>,
    }
    impl Handler for Idle {
        type Conn = u32;
        fn accept(&mut self, _: std::net::SocketAddr, _: std::net::SocketAddr) -> Option<u32> {
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

    let sender = Sender::new(Vec::new());
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
        .connect(SocketAddr::from((SERVER_IP, 80)), ())
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

/// Sends one message on connect and keeps the connection open.
#[derive(Default)]
struct OneShot {
    received: Vec<u8>,
}

impl Handler for OneShot {
    type Conn = ();
    fn accept(&mut self, _: std::net::SocketAddr, _: std::net::SocketAddr) -> Option<()> {
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
        .connect(SocketAddr::from((SERVER_IP, 7)), ())
        .map_err(|(e, _)| e)
        .expect("connect");
    let started = net.now();
    // Until the echo is back and acknowledged: both send buffers drained.
    let echoed = net.run_until(Duration::from_millis(500), |n| {
        n.client.handler().received == b"ping"
            && n.server.internals().holds_idle_send_ring(0)
            && n.client.internals().holds_idle_send_ring(0)
    });
    assert!(
        echoed,
        "{:?} / {:?}",
        net.client.stats(),
        net.server.stats()
    );
    let sent_at = net.now();
    assert_eq!(
        net.server.internals().buffers_in_use(),
        rusty_stack::internals::MIN_RING
    );
    assert_eq!(
        net.client.internals().buffers_in_use(),
        rusty_stack::internals::MIN_RING
    );
    // Quiet: both rings go back within two sweep periods, with nothing else happening.
    let released = net.run_until(3 * IDLE_RING_RELEASE, |n| {
        n.server.internals().buffers_in_use() == 0 && n.client.internals().buffers_in_use() == 0
    });
    assert!(released, "rings still held at {:?}", net.now() - sent_at);
    // Not before a full period after the last data was sent (after `started`), and
    // within two periods of both buffers draining.
    let (since_start, since_drained) = (net.now() - started, net.now() - sent_at);
    assert!(
        since_start >= IDLE_RING_RELEASE && since_drained <= 2 * IDLE_RING_RELEASE,
        "released {since_start:?} after the start, {since_drained:?} after draining"
    );
    assert!(
        (net.server.internals().ring_keepers() == 0)
            && (net.client.internals().ring_keepers() == 0)
    );
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
    fn accept(&mut self, _: std::net::SocketAddr, _: std::net::SocketAddr) -> Option<()> {
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
    fn accept(&mut self, _: std::net::SocketAddr, _: std::net::SocketAddr) -> Option<u32> {
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
            .connect(SocketAddr::from((SERVER_IP, 80)), 0)
            .map_err(|(e, _)| e)
            .expect("connect");
    }
    let mut most = 0;
    let done = net.run_until(Duration::from_secs(120), |n| {
        most = most.max(n.server.internals().pending_timers());
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
