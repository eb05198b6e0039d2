//! The socket layer on two engines over the in-memory link, on virtual time.

use super::*;
use rusty_stack::io::Capabilities;
use rusty_stack::time::VirtualClock;
use rusty_stack::Engine;
use rusty_testkit::memory::{self, MemoryLink};
use std::cell::RefCell;
use std::rc::Rc;

impl Steered for MemoryLink {}
use rusty_testkit::sim::{self, CLIENT_IP, CLIENT_MAC, SERVER_IP, SERVER_MAC};
use std::net::Ipv6Addr;

mod ipv6;

/// The client's IPv6 address on an IPv6 link ([`Net::dual`]).
const CLIENT6: Ipv6Addr = Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 1);
/// The server's.
const SERVER6: Ipv6Addr = Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 2);
/// The link's interface index, the scope of its link-local addresses.
const LINK_INDEX: u32 = 7;

struct Net {
    client: Stack,
    server: Stack,
    clock: VirtualClock,
    /// The TCP payload length of every frame that reached the server's end.
    to_server: Rc<RefCell<Vec<usize>>>,
}

/// The TCP payload length of an Ethernet frame carrying IPv4 and TCP (0 for others).
fn tcp_payload_len(frame: &[u8]) -> usize {
    if frame.len() < 34 || frame[12..14] != [0x08, 0x00] || frame[23] != 6 {
        return 0;
    }
    let ip_header = usize::from(frame[14] & 0x0f) * 4;
    let total = usize::from(u16::from_be_bytes([frame[16], frame[17]]));
    let Some(&offset) = frame.get(14 + ip_header + 12) else {
        return 0;
    };
    total.saturating_sub(ip_header + usize::from(offset >> 4) * 4)
}

impl Net {
    /// Two IPv4 stacks.
    fn new() -> Net {
        Net::build(None)
    }

    /// Two stacks with IPv4 and IPv6 addresses, the IPv6 ones usable at once.
    fn dual() -> Net {
        Net::build(Some(0))
    }

    /// IPv4 and IPv6 stacks with `dad` duplicate-detection probes per IPv6 address
    /// (`None`: IPv4 only).
    fn build(dad: Option<u8>) -> Net {
        let (a, b) = memory::pair(
            Capabilities::new(CLIENT_MAC, 1500),
            Capabilities::new(SERVER_MAC, 1500),
        );
        let to_server = Rc::new(RefCell::new(Vec::new()));
        let seen = Rc::clone(&to_server);
        b.steer_with(move |frame| {
            seen.borrow_mut().push(tcp_payload_len(frame));
            0
        });
        let clock = VirtualClock::new();
        let stack = |dev, ip, ip6| {
            let mut cfg = sim::engine_config(ip, 3);
            if let Some(transmits) = dad {
                cfg.ipv6 = vec![(ip6, 64)];
                cfg.dad_transmits = transmits;
            }
            let mut stack = Stack::new(Box::new(Engine::new(
                dev,
                Table::default(),
                clock.clone(),
                cfg,
            )));
            stack.set_link_index(LINK_INDEX);
            stack
        };
        Net {
            client: stack(a, CLIENT_IP, CLIENT6),
            server: stack(b, SERVER_IP, SERVER6),
            clock: clock.clone(),
            to_server,
        }
    }

    /// Poll both sides, 100 µs of virtual time a step, until `done` (at most 10 s).
    fn run_until(&mut self, mut done: impl FnMut(&mut Net) -> bool) -> bool {
        for _ in 0..100_000 {
            self.client.poll();
            self.server.poll();
            if done(self) {
                return true;
            }
            self.clock.advance(Duration::from_micros(100));
        }
        false
    }

    /// A listener on the server's port 80 and a connected pair of sockets.
    fn connected(&mut self) -> (SockId, SockId, SockId) {
        let l = self.server.socket(Family::V4);
        self.server
            .bind(l, SocketAddr::from((Ipv4Addr::UNSPECIFIED, 80)))
            .unwrap();
        self.server.listen(l, 16, true).unwrap();
        let c = self.client.socket(Family::V4);
        assert_eq!(
            self.client.connect(c, SocketAddr::from((SERVER_IP, 80))),
            Err(Errno(libc::EINPROGRESS))
        );
        assert_eq!(self.client.readiness(c) & ready::OUT, 0, "connecting");
        assert!(self.run_until(|n| n.server.readiness(l) & ready::IN != 0));
        let s = self.server.accept(l).unwrap();
        assert!(self.run_until(|n| n.client.connect_result(c) == Ok(true)));
        assert_eq!(self.client.readiness(c), ready::OUT);
        assert_eq!(
            self.server.peer_addr(s).unwrap(),
            self.client.local_addr(c).unwrap()
        );
        (l, c, s)
    }

    /// Everything `s` can read until the end of the stream.
    fn read_all(&mut self, s: SockId, server: bool) -> Vec<u8> {
        let mut got = Vec::new();
        let mut buf = [0u8; 1000];
        let done = self.run_until(|n| {
            let side = if server { &mut n.server } else { &mut n.client };
            loop {
                match side.recv(s, &mut buf, false) {
                    Ok(0) => return true,
                    Ok(k) => got.extend_from_slice(&buf[..k]),
                    Err(Errno(libc::EAGAIN)) => return false,
                    Err(e) => panic!("recv: {e:?}"),
                }
            }
        });
        assert!(done, "no end of stream after {} bytes", got.len());
        got
    }
}

fn pattern(n: usize) -> Vec<u8> {
    (0..n).map(|i| (i * 7 + i / 251) as u8).collect()
}

#[test]
fn bytes_go_both_ways_and_a_half_close_reads_as_end_of_stream() {
    let mut net = Net::new();
    let (_, c, s) = net.connected();
    assert_eq!(net.client.send(c, b"request"), Ok(7));
    assert!(net.run_until(|n| n.server.readiness(s) & ready::IN != 0));
    let mut buf = [0u8; 3];
    assert_eq!(net.server.recv(s, &mut buf, true), Ok(3));
    assert_eq!(&buf, b"req");
    assert_eq!(net.server.unread(s), Ok(7), "a peek leaves the bytes");
    net.client.shutdown(c, Shut::Write).unwrap();
    assert_eq!(net.read_all(s, true), b"request");
    assert_ne!(net.server.readiness(s) & ready::RDHUP, 0);
    // The other direction still works after the client's half-close.
    assert_eq!(net.server.send(s, b"response"), Ok(8));
    net.server.release(s).unwrap();
    assert_eq!(net.read_all(c, false), b"response");
    net.client.release(c).unwrap();
    assert!(net.run_until(|n| n.client.sockets() == 0 && n.server.sockets() == 1));
}

#[test]
fn small_writes_in_a_row_leave_as_one_segment_at_the_next_other_call() {
    let mut net = Net::new();
    let (_, c, s) = net.connected();
    net.to_server.borrow_mut().clear();
    assert_eq!(net.client.send(c, b"HTTP/1.1 200 OK\r\n\r\n"), Ok(19));
    assert_eq!(net.client.send(c, b"body"), Ok(4));
    assert!(net.client.holding());
    net.server.poll();
    assert_eq!(net.server.readiness(s) & ready::IN, 0, "nothing sent yet");
    net.client.release_held();
    assert!(!net.client.holding());
    net.server.poll();
    let mut buf = [0u8; 64];
    assert_eq!(net.server.recv(s, &mut buf, false), Ok(23));
    assert_eq!(&buf[..23], b"HTTP/1.1 200 OK\r\n\r\nbody");
    let data: Vec<usize> = net
        .to_server
        .borrow()
        .iter()
        .copied()
        .filter(|&n| n > 0)
        .collect();
    assert_eq!(data, [23], "one segment");

    // A write of a full segment or more is not held, nor is what follows it while
    // a full segment is unacknowledged.
    let big = pattern(3000);
    assert_eq!(net.client.send(c, &big), Ok(3000));
    assert!(!net.client.holding());
    assert_eq!(net.client.send(c, b"tail"), Ok(4));
    assert!(!net.client.holding());
    net.client.shutdown(c, Shut::Write).unwrap();
    let mut want = big;
    want.extend_from_slice(b"tail");
    assert_eq!(net.read_all(s, true), want);
}

#[test]
fn a_slow_reader_back_pressures_the_sender_and_loses_nothing() {
    let mut net = Net::new();
    let (_, c, s) = net.connected();
    let mut opts = net.server.opts(s).unwrap();
    opts.rcvbuf = 4096;
    net.server.set_opts(s, opts).unwrap();
    let data = pattern(2 << 20);
    let mut sent = 0;
    let mut blocked = false;
    let mut got = Vec::new();
    let mut buf = vec![0u8; 1500];
    assert!(net.run_until(|n| {
        while sent < data.len() {
            match n.client.send(c, &data[sent..]) {
                Ok(k) => sent += k,
                Err(Errno(libc::EAGAIN)) => {
                    blocked = true;
                    assert_eq!(n.client.readiness(c) & ready::OUT, 0);
                    break;
                }
                Err(e) => panic!("send: {e:?}"),
            }
        }
        // The reader takes one small read per step.
        if let Ok(k) = n.server.recv(s, &mut buf, false) {
            got.extend_from_slice(&buf[..k]);
        }
        got.len() == data.len()
    }));
    assert!(blocked, "the sender never met a full window");
    assert!(got == data, "the bytes differ");
}

#[test]
fn closing_with_unread_bytes_resets_the_peer() {
    let mut net = Net::new();
    let (_, c, s) = net.connected();
    assert_eq!(net.client.send(c, b"unread"), Ok(6));
    assert!(net.run_until(|n| n.server.unread(s) == Ok(6)));
    net.server.release(s).unwrap();
    let mut buf = [0u8; 8];
    assert!(net.run_until(|n| n.client.recv(c, &mut buf, false) == Err(Errno(libc::ECONNRESET))));
    assert_ne!(net.client.readiness(c) & ready::HUP, 0);
    assert_eq!(net.client.send(c, b"x"), Err(Errno(libc::EPIPE)));
}

#[test]
fn a_refused_connect_reports_econnrefused() {
    let mut net = Net::new();
    let c = net.client.socket(Family::V4);
    assert_eq!(
        net.client.connect(c, SocketAddr::from((SERVER_IP, 81))),
        Err(Errno(libc::EINPROGRESS))
    );
    assert_eq!(
        net.client.connect(c, SocketAddr::from((SERVER_IP, 81))),
        Err(Errno(libc::EALREADY))
    );
    assert!(net.run_until(|n| n.client.readiness(c) & ready::OUT != 0));
    assert_ne!(net.client.readiness(c) & ready::ERR, 0);
    assert_eq!(net.client.take_error(c), Ok(libc::ECONNREFUSED));
    assert_eq!(net.client.take_error(c), Ok(0), "SO_ERROR is read once");
    net.client.release(c).unwrap();
    assert_eq!(net.client.sockets(), 0);
}

#[test]
fn closing_a_listener_resets_what_it_had_not_accepted_and_frees_every_socket() {
    let mut net = Net::new();
    let (l, c, s) = net.connected();
    let c2 = net.client.socket(Family::V4);
    let _ = net.client.connect(c2, SocketAddr::from((SERVER_IP, 80)));
    assert!(net.run_until(|n| n.client.connect_result(c2) == Ok(true)));
    net.server.release(l).unwrap();
    let mut buf = [0u8; 8];
    assert!(net.run_until(|n| n.client.recv(c2, &mut buf, false) == Err(Errno(libc::ECONNRESET))));
    // The accepted connection carries on.
    assert_eq!(net.client.send(c, b"hi"), Ok(2));
    assert!(net.run_until(|n| n.server.unread(s) == Ok(2)));
    for sock in [c, c2] {
        net.client.release(sock).unwrap();
    }
    net.server.release(s).unwrap();
    assert!(net.run_until(|n| n.client.sockets() == 0 && n.server.sockets() == 0));
    // And the port can be bound again.
    let again = net.server.socket(Family::V4);
    net.server
        .bind(again, SocketAddr::from((Ipv4Addr::UNSPECIFIED, 80)))
        .unwrap();
}

#[test]
fn binding_a_taken_port_fails_unless_both_reuse_it() {
    let mut net = Net::new();
    let any = |port| SocketAddr::from((Ipv4Addr::UNSPECIFIED, port));
    let a = net.server.socket(Family::V4);
    net.server.bind(a, any(8080)).unwrap();
    let b = net.server.socket(Family::V4);
    assert_eq!(net.server.bind(b, any(8080)), Err(Errno(libc::EADDRINUSE)));
    assert_eq!(
        net.server.bind(a, any(8081)),
        Err(Errno(libc::EINVAL)),
        "bound twice"
    );
    let (x, y) = (net.server.socket(Family::V4), net.server.socket(Family::V4));
    for s in [x, y] {
        let mut o = net.server.opts(s).unwrap();
        o.reuse_port = true;
        net.server.set_opts(s, o).unwrap();
        net.server.bind(s, any(9000)).unwrap();
    }
    let z = net.server.socket(Family::V4);
    net.server.bind(z, any(0)).unwrap();
    let port = net.server.local_addr(z).unwrap().port();
    assert!((32768..=60999).contains(&port));
    assert!(net.server.local_addr(z).unwrap().ip().is_unspecified());
}

#[test]
fn calls_on_the_wrong_kind_of_socket_get_linuxs_errors() {
    let mut net = Net::new();
    let (l, c, _) = net.connected();
    let mut buf = [0u8; 4];
    assert_eq!(
        net.server.recv(l, &mut buf, false),
        Err(Errno(libc::ENOTCONN))
    );
    assert_eq!(net.client.accept(c), Err(Errno(libc::EINVAL)));
    let fresh = net.client.socket(Family::V4);
    assert_eq!(net.client.send(fresh, b"x"), Err(Errno(libc::EPIPE)));
    assert_eq!(net.client.peer_addr(fresh), Err(Errno(libc::ENOTCONN)));
    assert_eq!(
        net.client.shutdown(fresh, Shut::Both),
        Err(Errno(libc::ENOTCONN))
    );
    assert_eq!(net.client.readiness(fresh), ready::OUT | ready::HUP);
    assert_eq!(
        net.client.connect(c, SocketAddr::from((SERVER_IP, 80))),
        Err(Errno(libc::EISCONN))
    );
    assert_eq!(net.server.accept(l), Err(Errno(libc::EAGAIN)));
    assert_eq!(
        net.client.recv(99, &mut buf, false),
        Err(Errno(libc::EBADF))
    );
}
