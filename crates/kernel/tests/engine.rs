//! One [`KernelEngine`] driven directly on the test thread (no runtime), against
//! `std::net` peers: pause and resume, flow control, abort, close, reset, timeouts and
//! the failures of active opens.

mod common;

use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::thread;
use std::time::{Duration, Instant};

use common::{free_port, loopback};
use rusty_kernel::{KernelConfig, KernelEngine};
use rusty_stack::{CloseReason, Conn, ConnId, ConnectError, Handler, Opener};

fn drive<H: Handler>(
    engine: &mut KernelEngine<H>,
    what: &str,
    done: impl Fn(&KernelEngine<H>) -> bool,
) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !done(engine) {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        engine.poll(Duration::from_millis(1));
    }
}

fn server<H: Handler>(handler: H, cfg: KernelConfig) -> (KernelEngine<H>, SocketAddr) {
    let mut e = KernelEngine::new(handler, cfg).unwrap();
    let addr = e.listen(loopback(0), 128).unwrap();
    (e, addr)
}

fn client(addr: SocketAddr) -> TcpStream {
    let s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s
}

/// Records callbacks; behaviour chosen per test.
#[derive(Default)]
struct Probe {
    id: Option<ConnId>,
    paused: bool,
    offers: Vec<Vec<u8>>,
    taken: Vec<u8>,
    writables: usize,
    peer_closed: bool,
    closed: Vec<CloseReason>,
    /// On `connected`: queue this much (refusals end up as `want`).
    blast: usize,
    blasted: usize,
    close_on_data: bool,
    abort_on_data: bool,
    notify_on_connect: bool,
}

impl Handler for Probe {
    type Conn = ();
    fn accept(&mut self, local: std::net::SocketAddr, remote: std::net::SocketAddr) -> Option<()> {
        assert_eq!(local.ip(), remote.ip());
        Some(())
    }
    fn connected(&mut self, conn: &mut Conn<'_, ()>) {
        self.id = Some(conn.id());
        if self.notify_on_connect {
            conn.notify_writable();
        }
        self.pump(conn);
    }
    fn data(&mut self, conn: &mut Conn<'_, ()>, data: &[u8]) -> usize {
        self.offers.push(data.to_vec());
        if self.abort_on_data {
            conn.abort();
            return 0;
        }
        if self.close_on_data {
            conn.close();
        }
        if self.paused {
            return 0;
        }
        self.taken.extend_from_slice(data);
        data.len()
    }
    fn writable(&mut self, conn: &mut Conn<'_, ()>) {
        self.writables += 1;
        self.pump(conn);
    }
    fn peer_closed(&mut self, _: &mut Conn<'_, ()>) {
        self.peer_closed = true;
    }
    fn closed(&mut self, _: &mut Opener<'_, ()>, _: (), reason: CloseReason) {
        self.closed.push(reason);
    }
}

impl Probe {
    fn pump(&mut self, conn: &mut Conn<'_, ()>) {
        let chunk = [0xabu8; 8192];
        while self.blasted < self.blast {
            let want = (self.blast - self.blasted).min(chunk.len());
            let n = conn.send(&chunk[..want]).unwrap();
            self.blasted += n;
            if n < want {
                return;
            }
        }
    }
}

#[test]
fn a_paused_handler_is_offered_its_bytes_again_on_resume() {
    let (mut e, addr) = server(
        Probe {
            paused: true,
            ..Probe::default()
        },
        KernelConfig::default(),
    );
    let mut c = client(addr);
    c.write_all(b"abc").unwrap();
    drive(&mut e, "first offer", |e| e.handler().offers.len() == 1);
    for _ in 0..20 {
        e.poll(Duration::from_millis(1));
    }
    assert_eq!(
        e.handler().offers.len(),
        1,
        "a pause is not re-offered on its own"
    );
    e.handler_mut().paused = false;
    let id = e.handler().id.unwrap();
    assert!(e.resume_receive(id));
    assert_eq!(e.handler().offers, [b"abc".to_vec(), b"abc".to_vec()]);
    assert_eq!(e.handler().taken, b"abc");
    c.write_all(b"de").unwrap();
    drive(&mut e, "next offer", |e| e.handler().taken == b"abcde");
    drop(c);
    drive(&mut e, "peer close", |e| e.handler().peer_closed);
    assert!(e.resume_receive(id), "open until the handler closes it");
    assert!(
        !e.resume_receive(ConnId::from_bits(u64::from(id.index()))),
        "a stale id (generation 0 is never given out) is detected"
    );
}

#[test]
fn a_paused_handler_holding_recv_buffer_stops_reading_so_the_window_closes() {
    let (mut e, addr) = server(
        Probe {
            paused: true,
            ..Probe::default()
        },
        {
            let mut c = KernelConfig::default();
            c.recv_chunk = 4096;
            c.recv_buffer = 16 * 1024;
            c
        },
    );
    let c = client(addr);
    let total = 64 * 1024 * 1024;
    let mut w = c.try_clone().unwrap();
    let writer = thread::spawn(move || {
        let buf = vec![7u8; 1 << 16];
        let mut sent = 0;
        while sent < total {
            match w.write(&buf) {
                Ok(n) => sent += n,
                Err(_) => break,
            }
        }
        let _ = w.shutdown(Shutdown::Write);
        sent
    });
    drive(&mut e, "first offer", |e| !e.handler().offers.is_empty());
    for _ in 0..200 {
        e.poll(Duration::from_millis(1));
    }
    let held = e.handler().offers.last().unwrap().len();
    assert!((16 * 1024..16 * 1024 + 4096).contains(&held), "held {held}");
    assert!(
        e.stats().bytes_in < total as u64 / 2,
        "backpressure reached the peer"
    );
    e.handler_mut().paused = false;
    assert!(e.resume_receive(e.handler().id.unwrap()));
    drive(&mut e, "the whole stream", |e| e.handler().peer_closed);
    assert_eq!(writer.join().unwrap(), total);
    assert_eq!(e.handler().taken.len(), total);
}

#[test]
fn refused_sends_get_writable_once_the_queue_drains() {
    let (mut e, addr) = server(
        Probe {
            blast: 32 * 1024 * 1024,
            ..Probe::default()
        },
        {
            let mut c = KernelConfig::default();
            c.send_buffer = 64 * 1024;
            c
        },
    );
    let mut c = client(addr);
    let reader = thread::spawn(move || {
        // Start late, so the socket's buffers fill and some sends are refused (a reader
        // keeping pace on the other core could otherwise take all 32 MB as it goes).
        thread::sleep(Duration::from_millis(100));
        let mut buf = vec![0u8; 1 << 16];
        let mut got = 0;
        while got < 32 * 1024 * 1024 {
            got += c.read(&mut buf).unwrap();
        }
        got
    });
    drive(&mut e, "all sent", |e| {
        e.handler().blasted == e.handler().blast
    });
    assert!(e.handler().writables > 0);
    drive(&mut e, "all out", |e| {
        e.stats().bytes_out == 32 * 1024 * 1024
    });
    assert_eq!(reader.join().unwrap(), 32 * 1024 * 1024);
}

#[test]
fn notify_writable_with_nothing_queued_calls_writable_on_the_next_turn() {
    let (mut e, addr) = server(
        Probe {
            notify_on_connect: true,
            ..Probe::default()
        },
        KernelConfig::default(),
    );
    let _c = client(addr);
    drive(&mut e, "writable", |e| e.handler().writables == 1);
    for _ in 0..10 {
        e.poll(Duration::from_millis(1));
    }
    assert_eq!(e.handler().writables, 1, "once per request");
}

#[test]
fn abort_resets_the_peer() {
    let (mut e, addr) = server(
        Probe {
            abort_on_data: true,
            ..Probe::default()
        },
        KernelConfig::default(),
    );
    let mut c = client(addr);
    c.write_all(b"x").unwrap();
    drive(&mut e, "closed", |e| !e.handler().closed.is_empty());
    assert_eq!(e.handler().closed, [CloseReason::Aborted]);
    assert_eq!(e.connection_count(), 0);
    let mut buf = [0u8; 4];
    assert_eq!(
        c.read(&mut buf).unwrap_err().kind(),
        ErrorKind::ConnectionReset
    );
    assert_eq!(e.stats().conns_aborted, 1);
    assert_eq!(e.stats().rsts_sent, 1);
}

#[test]
fn after_close_incoming_bytes_are_dropped_until_the_peers_fin() {
    let (mut e, addr) = server(
        Probe {
            close_on_data: true,
            ..Probe::default()
        },
        KernelConfig::default(),
    );
    let mut c = client(addr);
    c.write_all(b"first").unwrap();
    drive(&mut e, "first data", |e| !e.handler().offers.is_empty());
    // The server has sent its FIN; the client keeps talking, then closes.
    let mut buf = [0u8; 4];
    assert_eq!(c.read(&mut buf).unwrap(), 0, "FIN after close");
    c.write_all(&vec![1u8; 1 << 20]).unwrap();
    c.shutdown(Shutdown::Write).unwrap();
    drive(&mut e, "closed", |e| !e.handler().closed.is_empty());
    assert_eq!(e.handler().closed, [CloseReason::Normal]);
    assert_eq!(
        e.handler().offers,
        [b"first".to_vec()],
        "nothing offered after close"
    );
    assert_eq!(e.stats().bytes_in, 5 + (1 << 20));
    assert_eq!(e.stats().rsts_sent, 0);
}

#[test]
fn data_after_the_close_linger_resets_the_peer() {
    // RFC 1122 §4.2.2.13, as Rusty's engine does: bytes arriving once the lingering
    // close is over are answered with a reset.
    let (mut e, addr) = server(
        Probe {
            close_on_data: true,
            ..Probe::default()
        },
        {
            let mut c = KernelConfig::default();
            c.close_linger = Duration::from_millis(100);
            c
        },
    );
    let mut c = client(addr);
    c.write_all(b"first").unwrap();
    drive(&mut e, "first data", |e| !e.handler().offers.is_empty());
    let mut buf = [0u8; 4];
    assert_eq!(c.read(&mut buf).unwrap(), 0, "FIN after close");
    // Within the linger: dropped quietly.
    c.write_all(b"early").unwrap();
    let t = Instant::now();
    while t.elapsed() < Duration::from_millis(150) {
        e.poll(Duration::from_millis(1));
    }
    assert!(e.handler().closed.is_empty());
    c.write_all(b"late").unwrap();
    drive(&mut e, "closed", |e| !e.handler().closed.is_empty());
    assert_eq!(e.handler().closed, [CloseReason::Aborted]);
    assert_eq!(e.stats().rsts_sent, 1);
    // The reset reaches the client.
    thread::sleep(Duration::from_millis(20));
    let r = c
        .write_all(b"more")
        .and_then(|_| c.read(&mut buf).map(|_| ()));
    assert!(r.is_err(), "the peer sees the reset");
}

#[test]
fn a_peer_that_never_closes_times_out_after_fin_timeout() {
    let (mut e, addr) = server(
        Probe {
            close_on_data: true,
            ..Probe::default()
        },
        {
            let mut c = KernelConfig::default();
            c.fin_timeout = Duration::from_millis(200);
            c
        },
    );
    let mut c = client(addr);
    c.write_all(b"bye").unwrap();
    let t = Instant::now();
    drive(&mut e, "closed", |e| !e.handler().closed.is_empty());
    assert!(t.elapsed() >= Duration::from_millis(150));
    assert_eq!(e.handler().closed, [CloseReason::TimedOut]);
}

#[test]
fn a_peer_reset_closes_with_reset() {
    let (mut e, addr) = server(
        Probe {
            blast: 1 << 20,
            ..Probe::default()
        },
        KernelConfig::default(),
    );
    let c = client(addr);
    drive(&mut e, "connected", |e| e.handler().id.is_some());
    // Closing with unread bytes makes the client's kernel send a RST.
    thread::sleep(Duration::from_millis(20));
    drop(c);
    drive(&mut e, "closed", |e| !e.handler().closed.is_empty());
    assert_eq!(e.handler().closed, [CloseReason::Reset]);
    assert_eq!(e.stats().conns_reset, 1);
}

/// Dials whatever the test asks; records outcomes.
#[derive(Default)]
struct Dialer {
    connected: usize,
    failed: Vec<ConnectError>,
    closed: Vec<CloseReason>,
}

impl Handler for Dialer {
    type Conn = ();
    fn accept(&mut self, _: std::net::SocketAddr, _: std::net::SocketAddr) -> Option<()> {
        None
    }
    fn connected(&mut self, conn: &mut Conn<'_, ()>) {
        self.connected += 1;
        conn.close();
    }
    fn data(&mut self, _: &mut Conn<'_, ()>, data: &[u8]) -> usize {
        data.len()
    }
    fn closed(&mut self, _: &mut Opener<'_, ()>, _: (), reason: CloseReason) {
        self.closed.push(reason);
    }
    fn connect_failed(&mut self, _: &mut Opener<'_, ()>, _: SocketAddr, _: (), e: ConnectError) {
        self.failed.push(e);
    }
}

#[test]
fn active_open_failures() {
    let mut e = KernelEngine::new(Dialer::default(), {
        let mut c = KernelConfig::default();
        c.max_connections = 1;
        c
    })
    .unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let there = listener.local_addr().unwrap();
    e.connect(there, ()).ok().unwrap();
    let (err, ()) = e.connect(there, ()).unwrap_err();
    assert_eq!(err, ConnectError::TooManyConnections);
    let (mut s, _) = listener.accept().unwrap();
    drive(&mut e, "connected", |e| e.handler().connected == 1);
    let mut buf = [0u8; 1];
    assert_eq!(s.read(&mut buf).unwrap(), 0, "closed from connected");
    drop(s);
    drive(&mut e, "closed", |e| {
        e.handler().closed == [CloseReason::Normal]
    });

    e.connect(loopback(free_port()), ()).ok().unwrap();
    drive(&mut e, "refused", |e| e.handler().closed.len() == 2);
    assert_eq!(e.handler().closed[1], CloseReason::Refused);
    assert_eq!(
        e.handler().connected,
        1,
        "a refused open is never connected"
    );

    e.stop_accepting();
    let (err, ()) = e.connect(there, ()).unwrap_err();
    assert_eq!(err, ConnectError::ShuttingDown);
}

/// Notes the addresses of the connections it accepts.
#[derive(Default)]
struct Addresses {
    seen: Vec<(SocketAddr, SocketAddr)>,
}

impl Handler for Addresses {
    type Conn = ();
    fn accept(&mut self, local: SocketAddr, remote: SocketAddr) -> Option<()> {
        self.seen.push((local, remote));
        Some(())
    }
    fn data(&mut self, _: &mut Conn<'_, ()>, data: &[u8]) -> usize {
        data.len()
    }
}

/// A listener on `[::]` takes both families; an IPv4 peer reaches the handler as the
/// IPv4 address it is, not as `::ffff:a.b.c.d`. Active opens go to either family.
#[test]
fn a_listener_on_the_unspecified_ipv6_address_takes_both_families() {
    let mut e = KernelEngine::new(Addresses::default(), KernelConfig::default()).unwrap();
    let any: SocketAddr = "[::]:0".parse().unwrap();
    let port = e.listen(any, 16).unwrap().port();
    let _v4 = client(loopback(port));
    drive(&mut e, "the IPv4 peer", |e| e.handler().seen.len() == 1);
    let _v6 = client(SocketAddr::from((std::net::Ipv6Addr::LOCALHOST, port)));
    drive(&mut e, "the IPv6 peer", |e| e.handler().seen.len() == 2);
    let seen = &e.handler().seen;
    assert_eq!(seen[0].0, loopback(port));
    assert!(seen[0].1.is_ipv4() && seen[0].1.ip() == loopback(0).ip());
    assert_eq!(
        seen[1].0,
        SocketAddr::from((std::net::Ipv6Addr::LOCALHOST, port))
    );
    assert!(seen[1].1.is_ipv6() && seen[1].1.ip().is_loopback());

    let listener = TcpListener::bind("[::1]:0").unwrap();
    e.connect(listener.local_addr().unwrap(), ()).ok().unwrap();
    let (_s, from) = listener.accept().unwrap();
    assert!(from.is_ipv6());
}
