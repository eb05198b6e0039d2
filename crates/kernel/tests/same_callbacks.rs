//! The same handler types run on Rusty's engine (two engines on the simulated wire) and
//! on the kernel backend (two kernel engines on loopback), and see the same callbacks
//! in the same order: the "cannot tell which backend runs it" claim, checked. Rusty's
//! side runs on the simulator's virtual clock, the kernel's on the wall clock; handlers
//! that use timers see the same callbacks all the same.

mod common;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use common::loopback;
use rusty_kernel::{KernelConfig, KernelEngine};
use rusty_stack::io::fault::FaultConfig;
use rusty_stack::{CloseReason, Conn, Handler, Opener};
use rusty_testkit::sim::{self, SimPair};

/// Appends `event`, merging consecutive `data` events (segmentation differs between
/// stacks; the bytes do not).
fn record(log: &mut Vec<String>, event: String) {
    if let (Some(last), Some(n)) = (log.last_mut(), event.strip_prefix("data ")) {
        if let Some(m) = last.strip_prefix("data ") {
            let sum: usize = m.parse::<usize>().unwrap() + n.parse::<usize>().unwrap();
            *last = format!("data {sum}");
            return;
        }
    }
    log.push(event);
}

/// How the echo server takes its input.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
enum Take {
    /// At most this many bytes per offer (partial consumption: the rest is offered
    /// again at once).
    #[default]
    Chunks,
    /// One whole line per offer; pauses (takes 0) on a partial line.
    Lines,
    /// Takes nothing, ever: each offer is logged on its own (`offer N`), so that a
    /// backend offering the same unread bytes again shows.
    Nothing,
}

const CHUNK: usize = 100;

/// Echoes what it takes; closes when the peer has. Refuses everything when `refuse`.
/// With `idle`, closes a connection that has been quiet that long (a timer armed on
/// `connected` and re-armed on every `data`).
#[derive(Default)]
struct EchoServer {
    take: Take,
    refuse: bool,
    idle: Option<Duration>,
    log: Vec<String>,
}

impl Handler for EchoServer {
    type Conn = usize;
    fn accept(&mut self, _: std::net::SocketAddr, _: std::net::SocketAddr) -> Option<usize> {
        record(&mut self.log, format!("accept {}", !self.refuse));
        (!self.refuse).then_some(0)
    }
    fn connected(&mut self, conn: &mut Conn<'_, usize>) {
        record(&mut self.log, "connected".into());
        if self.idle.is_some() {
            conn.set_timer(self.idle);
        }
    }
    fn data(&mut self, conn: &mut Conn<'_, usize>, data: &[u8]) -> usize {
        if self.idle.is_some() {
            conn.set_timer(self.idle);
        }
        let n = match self.take {
            Take::Chunks => conn.send(&data[..data.len().min(CHUNK)]).unwrap(),
            Take::Lines => match data.iter().position(|&b| b == b'\n') {
                Some(end) => conn.send(&data[..=end]).unwrap(),
                None => 0,
            },
            Take::Nothing => {
                self.log.push(format!("offer {}", data.len()));
                return 0;
            }
        };
        *conn.state() += 1;
        record(&mut self.log, format!("data {n}"));
        n
    }
    fn writable(&mut self, _: &mut Conn<'_, usize>) {
        record(&mut self.log, "writable".into());
    }
    fn peer_closed(&mut self, conn: &mut Conn<'_, usize>) {
        record(&mut self.log, "peer_closed".into());
        conn.close();
    }
    fn timer(&mut self, conn: &mut Conn<'_, usize>) {
        record(&mut self.log, "timer".into());
        conn.close();
    }
    fn closed(&mut self, _: &mut Opener<'_, usize>, _: usize, reason: CloseReason) {
        record(&mut self.log, format!("closed {reason:?}"));
    }
}

/// Sends `payload`, half-closes, collects the echo. With `keep_open`, does not
/// half-close but closes when the peer has.
#[derive(Default)]
struct Client {
    payload: Vec<u8>,
    keep_open: bool,
    received: Vec<u8>,
    log: Vec<String>,
}

impl Handler for Client {
    type Conn = ();
    fn accept(&mut self, _: std::net::SocketAddr, _: std::net::SocketAddr) -> Option<()> {
        None
    }
    fn connected(&mut self, conn: &mut Conn<'_, ()>) {
        record(&mut self.log, "connected".into());
        assert_eq!(conn.send(&self.payload), Ok(self.payload.len()));
        if !self.keep_open {
            conn.shutdown_write();
            assert!(conn.send(b"x").is_err());
        }
    }
    fn data(&mut self, _: &mut Conn<'_, ()>, data: &[u8]) -> usize {
        self.received.extend_from_slice(data);
        record(&mut self.log, format!("data {}", data.len()));
        data.len()
    }
    fn writable(&mut self, _: &mut Conn<'_, ()>) {
        record(&mut self.log, "writable".into());
    }
    fn peer_closed(&mut self, conn: &mut Conn<'_, ()>) {
        record(&mut self.log, "peer_closed".into());
        if self.keep_open {
            conn.close();
        }
    }
    fn closed(&mut self, _: &mut Opener<'_, ()>, _: (), reason: CloseReason) {
        record(&mut self.log, format!("closed {reason:?}"));
    }
    fn connect_failed(
        &mut self,
        _: &mut Opener<'_, ()>,
        _: SocketAddr,
        _: (),
        e: rusty_stack::ConnectError,
    ) {
        record(&mut self.log, format!("connect_failed {e:?}"));
    }
}

fn done(log: &[String]) -> bool {
    log.iter()
        .any(|e| e.starts_with("closed") || e == "accept false")
}

/// A session on Rusty's engine.
fn on_rusty(client: Client, server: EchoServer) -> Outcome {
    let mut net = SimPair::new(
        client,
        sim::engine_config(sim::CLIENT_IP, 1),
        server,
        sim::engine_config(sim::SERVER_IP, 1),
        FaultConfig::none(),
        FaultConfig::none(),
        1,
    );
    net.server.listen(7, 128);
    net.client
        .connect(SocketAddr::from((sim::SERVER_IP, 7)), ())
        .ok()
        .unwrap();
    assert!(net.run_until(Duration::from_secs(30), |n| {
        done(&n.client.handler().log) && done(&n.server.handler().log)
    }));
    (
        net.client.handler().log.clone(),
        net.server.handler().log.clone(),
        net.client.handler().received.clone(),
    )
}

/// The same on two kernel engines over loopback.
fn on_kernel(client: Client, server: EchoServer) -> Outcome {
    let mut server = KernelEngine::new(server, KernelConfig::default()).unwrap();
    let addr = server.listen(loopback(0), 128).unwrap();
    let mut client = KernelEngine::new(client, KernelConfig::default()).unwrap();
    client.connect(addr, ()).ok().unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while !(done(&client.handler().log) && done(&server.handler().log)) {
        assert!(Instant::now() < deadline, "kernel session did not finish");
        client.poll(Duration::from_millis(1));
        server.poll(Duration::from_millis(1));
    }
    (
        client.handler().log.clone(),
        server.handler().log.clone(),
        client.handler().received.clone(),
    )
}

fn lines(n: usize) -> Vec<u8> {
    (0..n)
        .flat_map(|i| format!("line {i} {}\n", "x".repeat(i % 97)).into_bytes())
        .collect()
}

/// What one backend made of a session: (client log, server log, bytes the client got).
type Outcome = (Vec<String>, Vec<String>, Vec<u8>);

/// Both backends (Rusty's, then the kernel's), with handlers made by `make`.
fn both(make: impl Fn() -> (Client, EchoServer)) -> (Outcome, Outcome) {
    let (client, server) = make();
    let rusty = on_rusty(client, server);
    let (client, server) = make();
    let kernel = on_kernel(client, server);
    (rusty, kernel)
}

fn echo(payload: &[u8], take: Take, refuse: bool) -> (Client, EchoServer) {
    (
        Client {
            payload: payload.to_vec(),
            ..Client::default()
        },
        EchoServer {
            take,
            refuse,
            ..EchoServer::default()
        },
    )
}

fn compare(payload: &[u8], take: Take) {
    let (rusty, kernel) = both(|| echo(payload, take, false));
    let n = payload.len();
    assert!(
        rusty.2 == payload,
        "rusty echoed {} of {n} bytes: {:?}",
        rusty.2.len(),
        rusty.1
    );
    assert!(
        kernel.2 == payload,
        "kernel echoed {} of {n} bytes: {:?}",
        kernel.2.len(),
        kernel.1
    );
    assert_eq!(
        rusty.0,
        [
            "connected",
            &format!("data {n}"),
            "peer_closed",
            "closed Normal"
        ]
    );
    assert_eq!(
        rusty.1,
        [
            "accept true",
            "connected",
            &format!("data {n}"),
            "peer_closed",
            "closed Normal"
        ]
    );
    assert_eq!(kernel.0, rusty.0, "client callbacks");
    assert_eq!(kernel.1, rusty.1, "server callbacks");
}

#[test]
fn an_echo_session_looks_the_same_on_both_backends() {
    compare(&lines(300), Take::Chunks);
}

/// A handler that waits for whole lines: a line that straddles the wrap point of
/// Rusty's receive ring must still be offered whole (the engine joins the ring when the
/// handler takes nothing from a wrapped view), as the kernel backend's linear buffer does.
#[test]
fn a_line_reader_looks_the_same_on_both_backends() {
    compare(&lines(300), Take::Lines);
}

#[test]
fn a_refused_connection_looks_the_same_on_both_backends() {
    let payload = lines(3);
    let (rusty, kernel) = both(|| echo(&payload, Take::Chunks, true));
    assert_eq!(rusty.0, ["connected", "closed Reset"]);
    assert_eq!(rusty.1, ["accept false"]);
    assert_eq!(kernel.0, rusty.0, "client callbacks");
    assert_eq!(kernel.1, rusty.1, "server callbacks");
}

/// An idle timeout: the server's timer, re-armed by every `data`, fires once the echo
/// is done and the client went quiet, and the server closes.
#[test]
fn an_idle_timeout_looks_the_same_on_both_backends() {
    let payload = lines(300);
    let n = payload.len();
    let (rusty, kernel) = both(|| {
        let (mut client, mut server) = echo(&payload, Take::Chunks, false);
        client.keep_open = true;
        server.idle = Some(Duration::from_millis(200));
        (client, server)
    });
    assert!(
        rusty.2 == payload,
        "rusty echoed {} of {n} bytes",
        rusty.2.len()
    );
    assert!(
        kernel.2 == payload,
        "kernel echoed {} of {n} bytes",
        kernel.2.len()
    );
    assert_eq!(
        rusty.0,
        [
            "connected",
            &format!("data {n}"),
            "peer_closed",
            "closed Normal"
        ]
    );
    assert_eq!(
        rusty.1,
        [
            "accept true",
            "connected",
            &format!("data {n}"),
            "timer",
            // The client's FIN, answering the server's close.
            "peer_closed",
            "closed Normal"
        ]
    );
    assert_eq!(kernel.0, rusty.0, "client callbacks");
    assert_eq!(kernel.1, rusty.1, "server callbacks");
}

/// A connection that ends before its idle timeout never sees the timer, on either
/// backend.
#[test]
fn a_timer_outlived_by_its_connection_looks_the_same_on_both_backends() {
    let payload = lines(30);
    let n = payload.len();
    let (rusty, kernel) = both(|| {
        let (client, mut server) = echo(&payload, Take::Chunks, false);
        server.idle = Some(Duration::from_secs(5));
        (client, server)
    });
    assert_eq!(
        rusty.1,
        [
            "accept true",
            "connected",
            &format!("data {n}"),
            "peer_closed",
            "closed Normal"
        ]
    );
    assert_eq!(kernel.0, rusty.0, "client callbacks");
    assert_eq!(kernel.1, rusty.1, "server callbacks");
}

/// A handler that paused (took nothing) is offered its unread bytes again only when
/// more arrive, after `writable`, on `resume_receive`, or a last time when the
/// connection ends: not because an ACK or a timer came by. Here the server never takes
/// the client's bytes; its idle timer closes the connection.
#[test]
fn a_paused_handler_is_not_offered_its_bytes_again_by_a_timer_on_either_backend() {
    let (rusty, kernel) = both(|| {
        let (mut client, mut server) = echo(b"no newline", Take::Nothing, false);
        client.keep_open = true;
        server.idle = Some(Duration::from_millis(200));
        (client, server)
    });
    assert_eq!(
        rusty.1,
        [
            "accept true",
            "connected",
            "offer 10",
            "timer",
            "peer_closed",
            // The last offer as the connection ends.
            "offer 10",
            "closed Normal"
        ]
    );
    assert_eq!(kernel.0, rusty.0, "client callbacks");
    assert_eq!(kernel.1, rusty.1, "server callbacks");
}
