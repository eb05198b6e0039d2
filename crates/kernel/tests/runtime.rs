//! The kernel backend under the real runtime: two pinned workers sharing a loopback port
//! through `SO_REUSEPORT`, driven by ordinary `std::net` clients.

mod common;

use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::thread;
use std::time::Duration;

use bytes::Bytes;
use common::{connect, echo_round, free_port, loopback, start, Log, Rng};
use rusty_kernel::KernelConfig;
use rusty_runtime::metrics::AppMetrics;
use rusty_runtime::WorkerContext;
use rusty_stack::{CloseReason, Conn, Handler, Opener};

/// Sends back whatever arrives (as much as fits; the rest is offered again after
/// `writable`); closes once the peer has closed and everything it sent is echoed.
struct Echo {
    log: Log,
}

/// Bytes echoed; whether the last offer was left partly unread; whether the peer closed.
type EchoState = (u64, bool, bool);

impl AppMetrics for Echo {}

impl Handler for Echo {
    type Conn = EchoState;
    fn accept(&mut self, _: std::net::SocketAddr, _: std::net::SocketAddr) -> Option<EchoState> {
        Some((0, false, false))
    }
    fn data(&mut self, conn: &mut Conn<'_, EchoState>, data: &[u8]) -> usize {
        let n = conn.send(data).unwrap_or(0);
        let st = conn.state();
        st.0 += n as u64;
        st.1 = n < data.len();
        if !st.1 && st.2 {
            conn.close();
        }
        n
    }
    fn writable(&mut self, _: &mut Conn<'_, EchoState>) {
        self.log.push("writable");
    }
    fn peer_closed(&mut self, conn: &mut Conn<'_, EchoState>) {
        self.log.push("peer_closed");
        // Closing now would drop what is still unread (the send side refuses after
        // close); wait for the re-offer that drains it.
        conn.state().2 = true;
        if !conn.state().1 {
            conn.close();
        }
    }
    fn closed(&mut self, _: &mut Opener<'_, EchoState>, st: EchoState, reason: CloseReason) {
        self.log.push(format!("closed {reason:?} {}", st.0));
    }
}

fn echo_server(grace: Duration, cfg: KernelConfig) -> (common::Server, Log) {
    let log = Log::default();
    let l = log.clone();
    let server = start(2, grace, true, cfg, move |_: &WorkerContext| Echo {
        log: l.clone(),
    });
    (server, log)
}

#[test]
fn echoes_megabytes_on_many_concurrent_connections() {
    // A small user-space queue, so `send` refusals, `writable` and re-offers happen.
    let cfg = {
        let mut c = KernelConfig::default();
        c.send_buffer = 16 * 1024;
        c
    };
    let (server, log) = echo_server(Duration::from_secs(5), cfg);
    let mut rng = Rng(0x5eed);
    let sizes: Vec<usize> = (0..24)
        .map(|i| match i {
            0 => 0,
            1 => 1,
            // Late readers (below) get more than loopback's socket buffers hold.
            i if i % 3 == 2 => 12 * 1024 * 1024 + rng.below(1024) as usize,
            _ => rng.below(4 * 1024 * 1024) as usize,
        })
        .collect();
    let clients: Vec<_> = sizes
        .iter()
        .enumerate()
        .map(|(i, &n)| {
            let data = Rng(i as u64 + 1).bytes(n);
            let addr = server.addr;
            thread::spawn(move || {
                // Every third client reads late, so its echo backs up into the server:
                // refused sends, `writable`, paused reads, closed windows.
                let delay = Duration::from_millis(if i % 3 == 2 { 300 } else { 0 });
                let got = echo_round(connect(addr), data.clone(), delay).unwrap();
                assert!(
                    got == data,
                    "connection {i}: {} bytes back of {}",
                    got.len(),
                    n
                );
            })
        })
        .collect();
    for c in clients {
        c.join().unwrap();
    }
    log.wait_for("every connection closed", |l| {
        l.iter().filter(|e| e.starts_with("closed Normal")).count() == sizes.len()
    });
    assert!(
        log.snapshot().iter().any(|e| e == "writable"),
        "the small send buffer filled and drained"
    );
    let (stats, _) = server.stop();
    let total: u64 = sizes.iter().map(|&n| n as u64).sum();
    assert_eq!(stats.conns_opened_passive, sizes.len() as u64);
    assert_eq!(stats.conns_closed, sizes.len() as u64);
    assert_eq!(stats.bytes_in, total);
    assert_eq!(stats.bytes_out, total);
    assert_eq!(stats.unread_bytes_discarded, 0);
}

#[test]
fn half_close_reaches_the_handler_and_its_close_reaches_the_client() {
    let (server, log) = echo_server(Duration::from_secs(5), KernelConfig::default());
    let mut s = connect(server.addr);
    s.write_all(b"hello").unwrap();
    s.shutdown(Shutdown::Write).unwrap();
    let mut back = Vec::new();
    s.read_to_end(&mut back).unwrap();
    assert_eq!(back, b"hello", "echo, then EOF");
    let events = log.wait_for("closed", |l| l.iter().any(|e| e.starts_with("closed")));
    assert_eq!(events, ["peer_closed", "closed Normal 5"]);
    server.stop();
}

/// Refuses every connection.
struct Refuser;

impl AppMetrics for Refuser {}

impl Handler for Refuser {
    type Conn = ();
    fn accept(&mut self, _: std::net::SocketAddr, _: std::net::SocketAddr) -> Option<()> {
        None
    }
    fn data(&mut self, _: &mut Conn<'_, ()>, _: &[u8]) -> usize {
        unreachable!("refused connections get no callbacks")
    }
    fn closed(&mut self, _: &mut Opener<'_, ()>, _: (), _: CloseReason) {
        unreachable!("refused connections get no callbacks")
    }
}

#[test]
fn refused_accept_resets_the_client() {
    let server = start(
        2,
        Duration::from_secs(1),
        true,
        KernelConfig::default(),
        |_: &WorkerContext| Refuser,
    );
    let mut s = connect(server.addr);
    let mut buf = [0u8; 16];
    let err = s.read(&mut buf).expect_err("a refused connection is reset");
    assert_eq!(err.kind(), ErrorKind::ConnectionReset);
    let (stats, _) = server.stop();
    assert_eq!(stats.conns_refused, 1);
    assert_eq!(stats.conns_opened_passive, 0);
}

/// Takes one line per offer and echoes it; pauses (consumes 0) on a partial line.
struct Lines {
    log: Log,
}

impl AppMetrics for Lines {}

impl Handler for Lines {
    type Conn = ();
    fn accept(&mut self, _: std::net::SocketAddr, _: std::net::SocketAddr) -> Option<()> {
        Some(())
    }
    fn data(&mut self, conn: &mut Conn<'_, ()>, data: &[u8]) -> usize {
        self.log.push(String::from_utf8_lossy(data));
        match data.iter().position(|&b| b == b'\n') {
            Some(end) => {
                assert_eq!(conn.send(&data[..=end]), Ok(end + 1));
                end + 1
            }
            None => 0,
        }
    }
    fn peer_closed(&mut self, conn: &mut Conn<'_, ()>) {
        conn.close();
    }
}

#[test]
fn partial_consumption_is_offered_again_and_a_pause_waits_for_more_data() {
    let log = Log::default();
    let l = log.clone();
    let server = start(
        2,
        Duration::from_secs(1),
        true,
        KernelConfig::default(),
        move |_: &WorkerContext| Lines { log: l.clone() },
    );
    let mut s = connect(server.addr);
    s.write_all(b"one\ntwo\nthr").unwrap();
    log.wait_for("the pause", |l| l.last().is_some_and(|e| e == "thr"));
    s.write_all(b"ee\n").unwrap();
    s.shutdown(Shutdown::Write).unwrap();
    let mut back = Vec::new();
    s.read_to_end(&mut back).unwrap();
    assert_eq!(back, b"one\ntwo\nthree\n");
    assert_eq!(
        log.snapshot(),
        ["one\ntwo\nthr", "two\nthr", "thr", "three\n"]
    );
    server.stop();
}

/// Answers every connection with a header (copied), a shared body and a trailer
/// (copied), then closes.
struct Shared {
    body: Bytes,
}

impl AppMetrics for Shared {}

impl Handler for Shared {
    type Conn = ();
    fn accept(&mut self, _: std::net::SocketAddr, _: std::net::SocketAddr) -> Option<()> {
        Some(())
    }
    fn connected(&mut self, conn: &mut Conn<'_, ()>) {
        assert_eq!(conn.send(b"HEAD\n"), Ok(5));
        conn.send_shared(self.body.clone()).unwrap();
        conn.send_shared(self.body.slice(..10)).unwrap();
        assert_eq!(conn.send(b"\nEND"), Ok(4));
        conn.close();
        assert!(
            conn.send(b"late").is_err(),
            "sending after close is an error"
        );
    }
    fn data(&mut self, _: &mut Conn<'_, ()>, data: &[u8]) -> usize {
        data.len()
    }
}

#[test]
fn shared_bytes_go_out_in_order_with_copied_ones() {
    let body = Bytes::from(Rng(7).bytes(6 * 1024 * 1024 + 3));
    let b = body.clone();
    let server = start(
        2,
        Duration::from_secs(1),
        true,
        KernelConfig::default(),
        move |_: &WorkerContext| Shared { body: b.clone() },
    );
    let clients: Vec<_> = (0..4)
        .map(|_| {
            let addr = server.addr;
            let body = body.clone();
            thread::spawn(move || {
                let mut s = connect(addr);
                let mut got = Vec::new();
                s.read_to_end(&mut got).unwrap();
                let want = [b"HEAD\n".as_slice(), &body, &body[..10], b"\nEND"].concat();
                assert!(got == want, "{} bytes of {}", got.len(), want.len());
            })
        })
        .collect();
    for c in clients {
        c.join().unwrap();
    }
    server.stop();
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Dial {
    Ping,
    Nobody,
}

/// Worker 0 opens two connections from `poll`: one to the test's listener (ping, then
/// close on pong) and one to a closed port.
struct Dialer {
    worker: usize,
    ping: SocketAddr,
    nobody: SocketAddr,
    started: bool,
    log: Log,
}

impl AppMetrics for Dialer {}

impl Handler for Dialer {
    type Conn = (Dial, Vec<u8>);
    fn accept(&mut self, _: std::net::SocketAddr, _: std::net::SocketAddr) -> Option<Self::Conn> {
        None
    }
    fn poll(&mut self, opener: &mut Opener<'_, Self::Conn>) {
        if self.worker == 0 && !self.started {
            self.started = true;
            opener.connect(self.ping, (Dial::Ping, Vec::new()));
            opener.connect(self.nobody, (Dial::Nobody, Vec::new()));
        }
    }
    fn connected(&mut self, conn: &mut Conn<'_, Self::Conn>) {
        self.log.push(format!("connected {:?}", conn.state().0));
        assert_eq!(conn.peer_addr(), self.ping);
        assert_eq!(conn.local_addr().ip(), self.ping.ip());
        assert_eq!(conn.send(b"ping"), Ok(4));
    }
    fn data(&mut self, conn: &mut Conn<'_, Self::Conn>, data: &[u8]) -> usize {
        conn.state().1.extend_from_slice(data);
        if conn.state().1 == b"pong" {
            conn.close();
        }
        data.len()
    }
    fn closed(&mut self, _: &mut Opener<'_, Self::Conn>, state: Self::Conn, reason: CloseReason) {
        self.log.push(format!("closed {:?} {reason:?}", state.0));
    }
}

#[test]
fn active_opens_from_a_handler() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let ping = listener.local_addr().unwrap();
    let nobody = loopback(free_port());
    let log = Log::default();
    let l = log.clone();
    let server = start(
        2,
        Duration::from_secs(1),
        false,
        KernelConfig::default(),
        move |ctx: &WorkerContext| Dialer {
            worker: ctx.index(),
            ping,
            nobody,
            started: false,
            log: l.clone(),
        },
    );
    let (mut s, _) = listener.accept().unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut buf = [0u8; 4];
    s.read_exact(&mut buf).unwrap();
    assert_eq!(&buf, b"ping");
    s.write_all(b"pong").unwrap();
    let mut rest = Vec::new();
    s.read_to_end(&mut rest).unwrap();
    assert!(rest.is_empty(), "the handler closed after pong");
    drop(s);
    let mut events = log.wait_for("both connections closed", |l| {
        l.iter().filter(|e| e.starts_with("closed")).count() == 2
    });
    events.sort();
    assert_eq!(
        events,
        [
            "closed Nobody Refused",
            "closed Ping Normal",
            "connected Ping"
        ]
    );
    let (stats, _) = server.stop();
    assert_eq!(stats.conns_opened_active, 2);
    assert_eq!(stats.conns_closed, 1);
    assert_eq!(
        stats.conns_reset, 1,
        "a refused open counts as reset, as on Rusty's engine"
    );
}

#[test]
fn graceful_stop_stops_accepting_and_lets_open_connections_finish() {
    let (server, log) = echo_server(Duration::from_secs(8), KernelConfig::default());
    let mut clients: Vec<TcpStream> = (0..3).map(|_| connect(server.addr)).collect();
    for (i, c) in clients.iter_mut().enumerate() {
        let msg = format!("before {i}");
        c.write_all(msg.as_bytes()).unwrap();
        let mut buf = vec![0; msg.len()];
        c.read_exact(&mut buf).unwrap();
        assert_eq!(buf, msg.as_bytes());
    }
    let addr = server.addr;
    let stopper = thread::spawn(move || server.stop());
    // Workers notice the stop within a runtime tick and close their listeners.
    let mut refused = false;
    for _ in 0..200 {
        thread::sleep(Duration::from_millis(10));
        match TcpStream::connect(addr) {
            Err(e) if e.kind() == ErrorKind::ConnectionRefused => {
                refused = true;
                break;
            }
            Err(e) => panic!("unexpected connect error {e}"),
            // Raced the listeners' close; the stop resets it at the latest.
            Ok(s) => drop(s),
        }
    }
    assert!(refused, "listeners closed after the stop signal");
    for (i, mut c) in clients.into_iter().enumerate() {
        let msg = format!("after {i}");
        let back = {
            c.write_all(msg.as_bytes()).unwrap();
            let mut buf = vec![0; msg.len()];
            c.read_exact(&mut buf).unwrap();
            buf
        };
        assert_eq!(
            back,
            msg.as_bytes(),
            "open connections still served while draining"
        );
        c.shutdown(Shutdown::Write).unwrap();
        let mut rest = Vec::new();
        c.read_to_end(&mut rest).unwrap();
        assert!(rest.is_empty());
    }
    let (stats, took) = stopper.join().unwrap();
    assert!(
        took < Duration::from_secs(6),
        "workers left once their connections ended ({took:?})"
    );
    assert!(stats.conns_closed >= 3);
    assert_eq!(
        log.snapshot()
            .iter()
            .filter(|e| e.starts_with("closed Normal"))
            .count() as u64,
        stats.conns_closed
    );
}

#[test]
fn connections_still_open_when_grace_ends_are_reset() {
    let (server, _log) = echo_server(Duration::from_millis(300), KernelConfig::default());
    let mut c = connect(server.addr);
    c.write_all(b"x").unwrap();
    let mut buf = [0u8; 1];
    c.read_exact(&mut buf).unwrap();
    let (stats, took) = server.stop();
    assert!(
        took >= Duration::from_millis(250),
        "grace honoured ({took:?})"
    );
    assert!(
        took < Duration::from_secs(3),
        "and not much longer ({took:?})"
    );
    assert_eq!(stats.conns_opened_passive, 1);
    match c.read(&mut buf) {
        Err(e) => assert_eq!(e.kind(), ErrorKind::ConnectionReset),
        Ok(n) => panic!("expected a reset, read {n} bytes"),
    }
}
