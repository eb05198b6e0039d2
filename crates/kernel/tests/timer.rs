//! The application timer ([`Conn::set_timer`] and [`Handler::timer`]) on the kernel
//! backend: one [`KernelEngine`] driven on the test thread against `std::net` peers on
//! loopback, and once inside the runtime with a worker that parks.

mod common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::thread;
use std::time::{Duration, Instant};

use common::{loopback, start_with, Log};
use rusty_kernel::{KernelConfig, KernelEngine};
use rusty_runtime::metrics::AppMetrics;
use rusty_runtime::{RuntimeConfig, WorkerContext};
use rusty_stack::{CloseReason, Conn, ConnId, Handler, Opener};

const MS: Duration = Duration::from_millis(1);

fn server<H: Handler>(handler: H) -> (KernelEngine<H>, SocketAddr) {
    let mut e = KernelEngine::new(handler, KernelConfig::default()).unwrap();
    let addr = e.listen(loopback(0), 128).unwrap();
    (e, addr)
}

fn client(addr: SocketAddr) -> TcpStream {
    let s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s
}

/// Poll until `done` holds (at most 10 s).
fn drive<H: Handler>(engine: &mut KernelEngine<H>, what: &str, done: impl Fn(&H) -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !done(engine.handler()) {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        engine.poll(MS);
    }
}

/// Poll until `until`.
fn drive_until<H: Handler>(engine: &mut KernelEngine<H>, until: Instant) {
    while Instant::now() < until {
        engine.poll(MS);
    }
}

/// Arms timers as configured and records what happens. The connection's state is the
/// deadline it asked for (taken before `set_timer`, so the real one is no earlier).
#[derive(Default)]
struct Timed {
    /// On `connected`: arm with the nth delay for the nth connection.
    connect_delays: Vec<Duration>,
    /// On `data`: re-arm (`Some(Some(d))`) or cancel (`Some(None)`).
    on_data: Option<Option<Duration>>,
    close_on_fire: bool,
    /// On `timer`: arm again with this delay, this many times (before closing).
    rearm: Option<(Duration, usize)>,

    ids: Vec<ConnId>,
    armed: Vec<Instant>,
    data_at: Vec<Instant>,
    /// (when, the deadline asked for, which connection)
    fires: Vec<(Instant, Option<Instant>, ConnId)>,
    closed: Vec<CloseReason>,
}

fn arm(timed: &mut Timed, conn: &mut Conn<'_, Option<Instant>>, after: Option<Duration>) {
    let now = Instant::now();
    if after.is_some() {
        timed.armed.push(now);
    }
    *conn.state() = after.map(|d| now + d);
    conn.set_timer(after);
}

impl AppMetrics for Timed {}

impl Handler for Timed {
    type Conn = Option<Instant>;
    fn accept(
        &mut self,
        _: std::net::SocketAddr,
        _: std::net::SocketAddr,
    ) -> Option<Option<Instant>> {
        Some(None)
    }
    fn connected(&mut self, conn: &mut Conn<'_, Option<Instant>>) {
        let delay = self.connect_delays.get(self.ids.len()).copied();
        self.ids.push(conn.id());
        if delay.is_some() {
            arm(self, conn, delay);
        }
    }
    fn data(&mut self, conn: &mut Conn<'_, Option<Instant>>, data: &[u8]) -> usize {
        self.data_at.push(Instant::now());
        if let Some(after) = self.on_data {
            arm(self, conn, after);
        }
        data.len()
    }
    fn peer_closed(&mut self, conn: &mut Conn<'_, Option<Instant>>) {
        conn.close();
    }
    fn timer(&mut self, conn: &mut Conn<'_, Option<Instant>>) {
        let now = Instant::now();
        let asked = conn.state().take();
        self.fires.push((now, asked, conn.id()));
        if let Some((delay, left)) = self.rearm.as_mut() {
            if *left > 0 {
                *left -= 1;
                let delay = *delay;
                return arm(self, conn, Some(delay));
            }
        }
        if self.close_on_fire {
            conn.close();
        }
    }
    fn closed(&mut self, _: &mut Opener<'_, Option<Instant>>, _: Option<Instant>, r: CloseReason) {
        self.closed.push(r);
    }
}

/// Every fire came no earlier than asked, and for an armed timer.
fn assert_on_time(fires: &[(Instant, Option<Instant>, ConnId)]) {
    for &(at, asked, _) in fires {
        let asked = asked.expect("a timer fired that was not armed");
        assert!(at >= asked, "fired {:?} early", asked - at);
    }
}

#[test]
fn a_timer_armed_on_connect_closes_the_connection() {
    let delay = 100 * MS;
    let (mut engine, addr) = server(Timed {
        connect_delays: vec![delay],
        close_on_fire: true,
        ..Timed::default()
    });
    let reader = thread::spawn(move || {
        let mut s = client(addr);
        // The server arms its timer after the handshake completed here.
        let t0 = Instant::now();
        let mut buf = Vec::new();
        s.read_to_end(&mut buf).unwrap();
        (t0.elapsed(), buf)
    });
    drive(&mut engine, "closed", |h| !h.closed.is_empty());
    let (waited, got) = reader.join().unwrap();
    assert!(got.is_empty());
    assert!(waited >= delay, "EOF after {waited:?}, timer was {delay:?}");
    let h = engine.handler();
    assert_eq!(h.fires.len(), 1);
    assert_on_time(&h.fires);
    assert_eq!(h.closed, [CloseReason::Normal]);
    assert_eq!(engine.connection_count(), 0);
}

#[test]
fn re_arming_sooner_replaces_the_timer() {
    let (mut engine, addr) = server(Timed {
        connect_delays: vec![600 * MS],
        on_data: Some(Some(50 * MS)),
        ..Timed::default()
    });
    let mut s = client(addr);
    s.write_all(b"x").unwrap();
    drive(&mut engine, "the timer", |h| !h.fires.is_empty());
    let h = engine.handler();
    let (fired, _, _) = h.fires[0];
    assert!(fired >= h.data_at[0] + 50 * MS);
    assert!(fired < h.armed[0] + 600 * MS, "the first deadline held");
    // The replaced deadline passes without a call.
    let later = h.armed[0] + 800 * MS;
    drive_until(&mut engine, later);
    assert_eq!(engine.handler().fires.len(), 1);
    assert_on_time(&engine.handler().fires);
    drop(s);
    drive(&mut engine, "closed", |h| !h.closed.is_empty());
}

#[test]
fn re_arming_later_replaces_the_timer() {
    let (mut engine, addr) = server(Timed {
        connect_delays: vec![200 * MS],
        on_data: Some(Some(400 * MS)),
        ..Timed::default()
    });
    let mut s = client(addr);
    s.write_all(b"x").unwrap();
    drive(&mut engine, "the timer", |h| !h.fires.is_empty());
    let h = engine.handler();
    assert!(
        h.data_at[0] < h.armed[0] + 200 * MS,
        "the data came too late for this test"
    );
    assert!(h.fires[0].0 >= h.data_at[0] + 400 * MS);
    let later = h.fires[0].0 + 200 * MS;
    drive_until(&mut engine, later);
    assert_eq!(engine.handler().fires.len(), 1);
    assert_on_time(&engine.handler().fires);
    drop(s);
    drive(&mut engine, "closed", |h| !h.closed.is_empty());
}

#[test]
fn cancelling_the_timer_prevents_it() {
    let (mut engine, addr) = server(Timed {
        connect_delays: vec![100 * MS],
        on_data: Some(None),
        ..Timed::default()
    });
    let mut s = client(addr);
    s.write_all(b"x").unwrap();
    drive(&mut engine, "data", |h| !h.data_at.is_empty());
    let later = engine.handler().armed[0] + 400 * MS;
    drive_until(&mut engine, later);
    assert!(engine.handler().fires.is_empty());
    // Not even when the connection is otherwise idle and has nothing else to wake for.
    assert_eq!(engine.next_deadline(), None);
    drop(s);
    drive(&mut engine, "closed", |h| !h.closed.is_empty());
    assert!(engine.handler().fires.is_empty());
}

/// The closed connection's heap entry outlives it; a new connection in the same slot
/// (another generation) must not be called at the old deadline.
#[test]
fn a_closed_connection_never_sees_its_timer() {
    let (mut engine, addr) = server(Timed {
        connect_delays: vec![150 * MS, 400 * MS],
        ..Timed::default()
    });
    drop(client(addr));
    drive(&mut engine, "the first close", |h| h.closed.len() == 1);
    let s = client(addr);
    drive(&mut engine, "the second connection", |h| h.ids.len() == 2);
    let h = engine.handler();
    assert_eq!(h.ids[0].index(), h.ids[1].index(), "the slot was reused");
    assert_ne!(h.ids[0], h.ids[1]);
    assert!(h.armed[1] < h.armed[0] + 150 * MS, "too slow for this test");
    drive(&mut engine, "the second timer", |h| !h.fires.is_empty());
    let h = engine.handler();
    assert_eq!(h.fires.len(), 1);
    assert_eq!(h.fires[0].2, h.ids[1]);
    assert!(h.fires[0].0 >= h.armed[1] + 400 * MS);
    assert_on_time(&h.fires);
    drop(s);
    drive(&mut engine, "closed", |h| h.closed.len() == 2);
}

#[test]
fn a_zero_delay_re_arm_fires_once_per_turn() {
    let (mut engine, addr) = server(Timed {
        connect_delays: vec![Duration::ZERO],
        rearm: Some((Duration::ZERO, 5)),
        close_on_fire: true,
        ..Timed::default()
    });
    let mut s = client(addr);
    let deadline = Instant::now() + Duration::from_secs(10);
    while engine.handler().closed.is_empty() {
        assert!(Instant::now() < deadline, "timed out");
        let before = engine.handler().fires.len();
        engine.poll(MS);
        assert!(engine.handler().fires.len() - before <= 1);
        if engine.handler().fires.len() == 6 {
            // The close is done; let the client answer with its FIN.
            let mut buf = Vec::new();
            s.read_to_end(&mut buf).unwrap();
            drop(s);
            drive(&mut engine, "closed", |h| !h.closed.is_empty());
            break;
        }
    }
    assert_eq!(engine.handler().fires.len(), 6);
    assert_on_time(&engine.handler().fires);
}

/// Many connections with different deadlines, most of them closed before theirs (stale
/// heap entries pile up and are swept): each live timer fires once, on time, in order.
#[test]
fn many_timers_fire_in_order_among_stale_entries() {
    let live = 20;
    let stale = 150;
    let mut delays: Vec<Duration> = vec![Duration::from_secs(5); stale];
    delays.extend((0..live).map(|i| Duration::from_millis(50 + 7 * ((i * 13) % live) as u64)));
    let (mut engine, addr) = server(Timed {
        connect_delays: delays,
        close_on_fire: true,
        ..Timed::default()
    });
    // In batches, within the listener's backlog.
    for batch in 1..=stale / 50 {
        for _ in 0..50 {
            drop(client(addr));
        }
        drive(&mut engine, "the short-lived connections", |h| {
            h.closed.len() == 50 * batch
        });
    }
    let clients: Vec<TcpStream> = (0..live).map(|_| client(addr)).collect();
    let readers: Vec<_> = clients
        .into_iter()
        .map(|mut s| {
            thread::spawn(move || {
                let mut buf = Vec::new();
                s.read_to_end(&mut buf).unwrap();
            })
        })
        .collect();
    drive(&mut engine, "all timers", |h| {
        h.closed.len() == stale + live
    });
    for r in readers {
        r.join().unwrap();
    }
    let h = engine.handler();
    assert_eq!(h.fires.len(), live);
    assert_on_time(&h.fires);
    let asked: Vec<Instant> = h.fires.iter().map(|f| f.1.unwrap()).collect();
    // Fired in deadline order (deadlines closer than a poll may fire in one turn; the
    // heap still hands them out earliest first).
    assert!(asked.windows(2).all(|w| w[0] <= w[1] + MS), "out of order");
    for &(at, asked, _) in &h.fires {
        assert!(
            at - asked.unwrap() < 50 * MS,
            "fired {:?} late",
            at - asked.unwrap()
        );
    }
}

/// One `poll` with a long timeout returns for the timer: `next_deadline` counts it.
#[test]
fn a_blocking_poll_wakes_up_for_the_timer() {
    let delay = 150 * MS;
    let (mut engine, addr) = server(Timed {
        connect_delays: vec![delay],
        ..Timed::default()
    });
    let _s = client(addr);
    drive(&mut engine, "connected", |h| !h.ids.is_empty());
    let asked = engine.handler().armed[0] + delay;
    let next = engine.next_deadline().expect("the timer is a deadline");
    assert!(
        next >= asked && next < asked + 10 * MS,
        "{next:?} vs {asked:?}"
    );
    let mut polls = 0;
    while engine.handler().fires.is_empty() {
        polls += 1;
        assert!(polls < 20, "poll does not wait for the timer");
        engine.poll(Duration::from_secs(5));
    }
    let fired = engine.handler().fires[0].0;
    assert!(fired >= asked);
    assert!(fired - asked < 50 * MS, "fired {:?} late", fired - asked);
    assert_eq!(engine.next_deadline(), None);
}

/// Fires, on a runtime worker, after its idle spin: the worker parks and must wake for
/// the timer.
#[derive(Clone)]
struct IdleTimeout {
    after: Duration,
    log: Log,
}

impl AppMetrics for IdleTimeout {}

impl Handler for IdleTimeout {
    type Conn = Instant;
    fn accept(&mut self, _: std::net::SocketAddr, _: std::net::SocketAddr) -> Option<Instant> {
        Some(Instant::now())
    }
    fn connected(&mut self, conn: &mut Conn<'_, Instant>) {
        *conn.state() = Instant::now() + self.after;
        conn.set_timer(Some(self.after));
    }
    fn data(&mut self, _: &mut Conn<'_, Instant>, data: &[u8]) -> usize {
        data.len()
    }
    fn timer(&mut self, conn: &mut Conn<'_, Instant>) {
        let late = Instant::now().saturating_duration_since(*conn.state());
        self.log.push(format!("late {}", late.as_micros()));
        conn.close();
    }
    fn peer_closed(&mut self, conn: &mut Conn<'_, Instant>) {
        conn.close();
    }
    fn closed(&mut self, _: &mut Opener<'_, Instant>, _: Instant, r: CloseReason) {
        self.log.push(format!("closed {r:?}"));
    }
}

#[test]
fn a_parked_worker_wakes_up_for_the_timer() {
    let after = 200 * MS;
    let log = Log::default();
    let handler = IdleTimeout {
        after,
        log: log.clone(),
    };
    let rcfg = {
        let mut c = RuntimeConfig::default();
        c.oversubscribe = true;
        c.handle_signals = false;
        c.spin = MS;
        c.grace = Duration::from_secs(1);
        c
    };
    let server = start_with(
        1,
        rcfg,
        true,
        KernelConfig::default(),
        move |_: &WorkerContext| handler.clone(),
    );
    let mut s = common::connect(server.addr);
    let t0 = Instant::now();
    let mut buf = Vec::new();
    s.read_to_end(&mut buf).unwrap();
    let waited = t0.elapsed();
    drop(s);
    let events = log.wait_for("closed", |l| l.iter().any(|e| e.starts_with("closed")));
    server.stop();
    assert!(waited >= after, "EOF after {waited:?}");
    assert!(waited < after + 50 * MS, "EOF after {waited:?}");
    let late: u64 = events[0].strip_prefix("late ").unwrap().parse().unwrap();
    assert!(late < 50_000, "fired {late} µs late");
    assert_eq!(events[1], "closed Normal");
}
