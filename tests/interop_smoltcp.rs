//! Interoperability with a TCP we did not write: smoltcp 0.14, in memory.
//!
//! One side is a Rusty [`Engine`] on one end of the in-memory link; the other is a smoltcp
//! `Interface` with one TCP socket, whose `phy::Device` (in this file) moves frames over
//! the other end. Each direction can sit behind a seeded [`FaultInjector`]. Both run on
//! one thread and one [`VirtualClock`]; when neither has anything to do, time jumps to the
//! earliest timer (ours, smoltcp's `poll_delay`, or a frame the injector holds back).
//!
//! The adapter also watches the frames that cross it, so the tests can check what was
//! negotiated on the wire (window scale, timestamps, SACK, RFC 7323 / RFC 2018) and that
//! a scaled window was honoured.

use std::cell::Cell;
use std::collections::VecDeque;
use std::net::{Ipv4Addr, SocketAddr};
use std::time::Duration;

use rusty_stack::io::fault::{FaultConfig, FaultInjector};
use rusty_stack::io::{Capabilities, MacAddr, PacketIo};
use rusty_stack::time::{Clock, VirtualClock};
use rusty_stack::CloseReason;
use rusty_stack::{Conn, Engine, Handler, Opener};
use rusty_testkit::memory::{self, MemoryLink};
use rusty_testkit::sim;
use smoltcp::iface::{Config, Interface, PollResult, SocketHandle, SocketSet};
use smoltcp::phy::{self, ChecksumCapabilities, DeviceCapabilities, Medium};
use smoltcp::socket::tcp;
use smoltcp::wire::{
    EthernetAddress, EthernetFrame, EthernetProtocol, HardwareAddress, IpAddress, IpCidr,
    IpProtocol, Ipv4Packet, TcpControl, TcpPacket, TcpRepr,
};

/// Our engine's address.
const OUR_IP: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);
const OUR_MAC: MacAddr = MacAddr([0x02, 0, 0, 0, 0, 2]);
/// smoltcp's address.
const PEER_IP: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
const PEER_MAC: MacAddr = MacAddr([0x02, 0, 0, 0, 0, 1]);

type Link = FaultInjector<MemoryLink, VirtualClock>;

thread_local! {
    /// Virtual time in ms for smoltcp's timestamp generator (a plain `fn() -> u32`).
    static NOW_MS: Cell<u32> = const { Cell::new(0) };
}

fn smoltcp_tsval() -> u32 {
    NOW_MS.with(|c| c.get())
}

// ----- What crossed the wire -----

/// TCP options of a SYN or SYN-ACK.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct SynOpts {
    mss: Option<u16>,
    wscale: Option<u8>,
    sack_permitted: bool,
    timestamps: bool,
}

/// Observations of the TCP conversation, from the adapter's point of view.
#[derive(Debug, Default)]
struct Wire {
    our_syn: Option<SynOpts>,
    peer_syn: Option<SynOpts>,
    /// Non-SYN segments from us, and how many carried a timestamp.
    our_segments: u64,
    our_segments_with_ts: u64,
    /// Non-SYN segments from smoltcp, how many carried a timestamp, how many SACK blocks.
    peer_segments: u64,
    peer_segments_with_ts: u64,
    peer_sack_segments: u64,
    /// Highest sequence number we sent (end of segment), smoltcp's highest ACK, and the
    /// most bytes we ever had outstanding between the two.
    our_snd_max: Option<u32>,
    peer_ack_max: Option<u32>,
    max_outstanding: u32,
    /// The same for smoltcp's data.
    peer_snd_max: Option<u32>,
    our_ack_max: Option<u32>,
    peer_max_outstanding: u32,
    /// Largest window smoltcp advertised after the handshake, scaled as negotiated.
    peer_max_window: u64,
}

/// `a - b` in sequence space (RFC 9293 §3.4), signed.
fn seq_diff(a: u32, b: u32) -> i32 {
    a.wrapping_sub(b) as i32
}

/// Move a sequence-space high-water mark forward.
fn raise(mark: &mut Option<u32>, seq: u32) {
    if mark.is_none_or(|m| seq_diff(seq, m) > 0) {
        *mark = Some(seq);
    }
}

impl Wire {
    /// Look at one frame; `from_us` says which way it went.
    fn observe(&mut self, frame: &[u8], from_us: bool) {
        let Ok(eth) = EthernetFrame::new_checked(frame) else {
            return;
        };
        if eth.ethertype() != EthernetProtocol::Ipv4 {
            return;
        }
        let Ok(ip) = Ipv4Packet::new_checked(eth.payload()) else {
            return;
        };
        if ip.next_header() != IpProtocol::Tcp {
            return;
        }
        let Ok(tcp) = TcpPacket::new_checked(ip.payload()) else {
            return;
        };
        let src = IpAddress::Ipv4(ip.src_addr());
        let dst = IpAddress::Ipv4(ip.dst_addr());
        let Ok(repr) = TcpRepr::parse(&tcp, &src, &dst, &ChecksumCapabilities::ignored()) else {
            return;
        };
        if repr.control == TcpControl::Syn {
            let opts = SynOpts {
                mss: repr.max_seg_size,
                wscale: repr.window_scale,
                sack_permitted: repr.sack_permitted,
                timestamps: repr.timestamp.is_some(),
            };
            if from_us {
                self.our_syn = Some(opts);
            } else {
                self.peer_syn = Some(opts);
            }
            return;
        }
        let seq = repr.seq_number.0 as u32;
        if from_us {
            self.our_segments += 1;
            self.our_segments_with_ts += u64::from(repr.timestamp.is_some());
            let end = seq.wrapping_add(repr.segment_len() as u32);
            raise(&mut self.our_snd_max, end);
            if let Some(ack) = repr.ack_number {
                raise(&mut self.our_ack_max, ack.0 as u32);
            }
        } else {
            let end = seq.wrapping_add(repr.segment_len() as u32);
            raise(&mut self.peer_snd_max, end);
            self.peer_segments += 1;
            self.peer_segments_with_ts += u64::from(repr.timestamp.is_some());
            self.peer_sack_segments += u64::from(repr.sack_ranges[0].is_some());
            if let Some(ack) = repr.ack_number {
                raise(&mut self.peer_ack_max, ack.0 as u32);
            }
            // A window field is scaled by the shift smoltcp announced, if both sides did.
            let shift = match (self.our_syn, self.peer_syn) {
                (Some(a), Some(b)) if a.wscale.is_some() => b.wscale.unwrap_or(0),
                _ => 0,
            };
            let win = u64::from(repr.window_len) << shift;
            self.peer_max_window = self.peer_max_window.max(win);
        }
        if let (Some(snd), Some(ack)) = (self.our_snd_max, self.peer_ack_max) {
            self.max_outstanding = self.max_outstanding.max(seq_diff(snd, ack).max(0) as u32);
        }
        if let (Some(snd), Some(ack)) = (self.peer_snd_max, self.our_ack_max) {
            let out = seq_diff(snd, ack).max(0) as u32;
            self.peer_max_outstanding = self.peer_max_outstanding.max(out);
        }
    }
}

// ----- smoltcp's device over the in-memory link -----

/// smoltcp's `phy::Device` on one end of the in-memory link (copying: test adapter).
struct SmolPhy {
    io: Link,
    rx: VecDeque<<Link as PacketIo>::Rx>,
    burst: Vec<<Link as PacketIo>::Rx>,
    wire: Wire,
    /// Frames smoltcp wanted to send while the link had no buffer.
    tx_dropped: u64,
}

struct SmolRx(<Link as PacketIo>::Rx);

struct SmolTx<'a> {
    io: &'a mut Link,
    wire: &'a mut Wire,
    tx_dropped: &'a mut u64,
}

impl phy::RxToken for SmolRx {
    fn consume<R, F: FnOnce(&[u8]) -> R>(self, f: F) -> R {
        f(&self.0)
    }
}

impl phy::TxToken for SmolTx<'_> {
    fn consume<R, F: FnOnce(&mut [u8]) -> R>(self, len: usize, f: F) -> R {
        match self.io.alloc_tx(len) {
            Some(mut buf) => {
                let r = f(&mut buf);
                self.wire.observe(&buf, false);
                let mut burst = vec![buf];
                self.io.transmit(&mut burst);
                r
            }
            None => {
                *self.tx_dropped += 1;
                let mut scratch = vec![0u8; len];
                f(&mut scratch)
            }
        }
    }
}

impl phy::Device for SmolPhy {
    type RxToken<'a> = SmolRx;
    type TxToken<'a> = SmolTx<'a>;

    fn receive(&mut self, _timestamp: smoltcp::time::Instant) -> Option<(SmolRx, SmolTx<'_>)> {
        if self.rx.is_empty() {
            self.io.receive(&mut self.burst, 32);
            self.rx.extend(self.burst.drain(..));
        }
        let frame = self.rx.pop_front()?;
        self.wire.observe(&frame, true);
        Some((
            SmolRx(frame),
            SmolTx {
                io: &mut self.io,
                wire: &mut self.wire,
                tx_dropped: &mut self.tx_dropped,
            },
        ))
    }

    fn transmit(&mut self, _timestamp: smoltcp::time::Instant) -> Option<SmolTx<'_>> {
        Some(SmolTx {
            io: &mut self.io,
            wire: &mut self.wire,
            tx_dropped: &mut self.tx_dropped,
        })
    }

    fn capabilities(&self) -> DeviceCapabilities {
        let mut caps = DeviceCapabilities::default();
        caps.medium = Medium::Ethernet;
        // smoltcp counts the Ethernet header in the MTU.
        caps.max_transmission_unit = 1514;
        caps
    }
}

// ----- Our handlers -----

/// Echo server. Keeps what the send buffer refused in its own queue so it can consume
/// everything at once and close exactly when the echo is complete.
#[derive(Default)]
struct EchoServer {
    closed: Vec<CloseReason>,
    accepted: usize,
    echoed: usize,
}

#[derive(Default)]
struct EchoConn {
    backlog: VecDeque<u8>,
    peer_closed: bool,
    closing: bool,
}

impl EchoServer {
    fn flush(&mut self, conn: &mut Conn<'_, EchoConn>) {
        loop {
            let (a, _) = conn.state().backlog.as_slices();
            if a.is_empty() {
                break;
            }
            let chunk = a.to_vec();
            let n = conn.send(&chunk).unwrap_or(0);
            self.echoed += n;
            conn.state().backlog.drain(..n);
            if n < chunk.len() {
                return;
            }
        }
        if conn.state().peer_closed && !conn.state().closing {
            conn.state().closing = true;
            conn.close();
        }
    }
}

impl Handler for EchoServer {
    type Conn = EchoConn;
    fn accept(&mut self, _: std::net::SocketAddr, _: std::net::SocketAddr) -> Option<EchoConn> {
        self.accepted += 1;
        Some(EchoConn::default())
    }
    fn data(&mut self, conn: &mut Conn<'_, EchoConn>, data: &[u8]) -> usize {
        conn.state().backlog.extend(data);
        self.flush(conn);
        data.len()
    }
    fn writable(&mut self, conn: &mut Conn<'_, EchoConn>) {
        self.flush(conn);
    }
    fn peer_closed(&mut self, conn: &mut Conn<'_, EchoConn>) {
        conn.state().peer_closed = true;
        self.flush(conn);
    }
    fn closed(&mut self, _: &mut Opener<'_, EchoConn>, _: EchoConn, reason: CloseReason) {
        self.closed.push(reason);
    }
}

/// Client: sends `payload`, half-closes, collects what comes back.
struct Sender {
    payload: Vec<u8>,
    sent: usize,
    received: Vec<u8>,
    connected: bool,
    peer_closed: bool,
    closed: Vec<CloseReason>,
}

impl Sender {
    fn new(payload: Vec<u8>) -> Sender {
        Sender {
            payload,
            sent: 0,
            received: Vec::new(),
            connected: false,
            peer_closed: false,
            closed: Vec::new(),
        }
    }

    fn pump(&mut self, conn: &mut Conn<'_, ()>) {
        while self.sent < self.payload.len() {
            let n = conn.send(&self.payload[self.sent..]).unwrap_or(0);
            if n == 0 {
                break;
            }
            self.sent += n;
        }
        if self.sent == self.payload.len() {
            conn.shutdown_write();
        }
    }
}

impl Handler for Sender {
    type Conn = ();
    fn accept(&mut self, _: std::net::SocketAddr, _: std::net::SocketAddr) -> Option<()> {
        None
    }
    fn connected(&mut self, conn: &mut Conn<'_, ()>) {
        self.connected = true;
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

// ----- The two-stack world -----

struct World<H: Handler> {
    clock: VirtualClock,
    engine: Engine<Link, H, VirtualClock>,
    phy: SmolPhy,
    iface: Interface,
    sockets: SocketSet<'static>,
    sock: SocketHandle,
    steps: u64,
}

fn smol_now(clock: &VirtualClock) -> smoltcp::time::Instant {
    smoltcp::time::Instant::from_micros(clock.now().as_micros() as i64)
}

impl<H: Handler> World<H> {
    /// `to_peer` applies to our frames, `to_us` to smoltcp's; `seed` drives both and
    /// smoltcp's ISNs. `buf` is smoltcp's socket buffer size (each way).
    fn new(
        handler: H,
        to_peer: FaultConfig,
        to_us: FaultConfig,
        seed: u64,
        buf: usize,
    ) -> World<H> {
        let clock = VirtualClock::new();
        // Start away from zero so smoltcp's and our timestamp clocks are non-trivial.
        clock.set(rusty_stack::time::Instant::from_millis(1000));
        let (ours, theirs) = memory::pair(
            Capabilities::new(OUR_MAC, 1500),
            Capabilities::new(PEER_MAC, 1500),
        );
        let ours = FaultInjector::new(ours, clock.clone(), to_peer, seed.wrapping_mul(7) + 1);
        let theirs = FaultInjector::new(theirs, clock.clone(), to_us, seed.wrapping_mul(13) + 5);
        let engine = Engine::new(
            ours,
            handler,
            clock.clone(),
            sim::engine_config(OUR_IP, seed),
        );
        let mut phy = SmolPhy {
            io: theirs,
            rx: VecDeque::new(),
            burst: Vec::new(),
            wire: Wire::default(),
            tx_dropped: 0,
        };
        let mut config = Config::new(HardwareAddress::Ethernet(EthernetAddress(PEER_MAC.0)));
        config.random_seed = seed ^ 0x1234_5678;
        let mut iface = Interface::new(config, &mut phy, smol_now(&clock));
        iface.update_ip_addrs(|addrs| {
            addrs
                .push(IpCidr::new(IpAddress::Ipv4(PEER_IP), 24))
                .expect("one address fits");
        });
        let mut socket = tcp::Socket::new(
            tcp::SocketBuffer::new(vec![0u8; buf]),
            tcp::SocketBuffer::new(vec![0u8; buf]),
        );
        // smoltcp only does RFC 7323 timestamps with a generator.
        socket.set_tsval_generator(Some(smoltcp_tsval));
        let mut sockets = SocketSet::new(Vec::new());
        let sock = sockets.add(socket);
        World {
            clock,
            engine,
            phy,
            iface,
            sockets,
            sock,
            steps: 0,
        }
    }

    fn socket(&mut self) -> &mut tcp::Socket<'static> {
        self.sockets.get_mut::<tcp::Socket>(self.sock)
    }

    fn smol_state(&self) -> tcp::State {
        self.sockets.get::<tcp::Socket>(self.sock).state()
    }

    /// Run until `done`, with `app` driving the smoltcp socket each turn (it returns
    /// whether it did anything). Panics with diagnostics after `limit` of virtual time or
    /// too many steps, or when nothing is left to happen.
    fn run(
        &mut self,
        limit: Duration,
        mut app: impl FnMut(&mut tcp::Socket<'static>, &Interface) -> bool,
        mut done: impl FnMut(&mut World<H>) -> bool,
    ) {
        let end = self.clock.now() + limit;
        loop {
            if done(self) {
                return;
            }
            self.steps += 1;
            assert!(
                self.steps < 5_000_000 && self.clock.now() < end,
                "gave up at {:?} after {} steps: smoltcp {} / ours {:?}\n{}\n{:?}",
                self.clock.now(),
                self.steps,
                self.smol_state(),
                self.engine.connection_states().collect::<Vec<_>>(),
                self.engine.stats(),
                self.phy.wire,
            );
            let n = self.engine.poll();
            NOW_MS.with(|c| c.set(self.clock.now().as_millis() as u32));
            let now = smol_now(&self.clock);
            self.phy.io.flush();
            let mut busy = self.iface.poll(now, &mut self.phy, &mut self.sockets)
                == PollResult::SocketStateChanged;
            let sock = self.sockets.get_mut::<tcp::Socket>(self.sock);
            if app(sock, &self.iface) {
                busy = true;
                self.iface.poll(now, &mut self.phy, &mut self.sockets);
            }
            let pending = self.engine.device().inner().pending() + self.phy.io.inner().pending();
            if n > 0 || busy || pending > 0 || !self.phy.rx.is_empty() {
                continue;
            }
            // Both idle: jump to the next thing that can happen.
            let now = self.clock.now();
            let smol_at = self
                .iface
                .poll_delay(smol_now(&self.clock), &self.sockets)
                .map(|d| now + Duration::from_micros(d.total_micros()));
            let next = [
                self.engine.next_deadline(),
                smol_at,
                self.engine.device().next_release(),
                self.phy.io.next_release(),
            ]
            .into_iter()
            .flatten()
            .min();
            match next {
                Some(t) => self.clock.set(t.max(now + Duration::from_micros(1))),
                None => {
                    if done(self) {
                        return;
                    }
                    panic!(
                        "stalled at {:?}: smoltcp {} / ours {:?}\n{}\n{:?}",
                        now,
                        self.smol_state(),
                        self.engine.connection_states().collect::<Vec<_>>(),
                        self.engine.stats(),
                        self.phy.wire,
                    );
                }
            }
        }
    }
}

/// Deterministic pseudo-random bytes (xorshift), so every byte position matters.
fn random_bytes(n: usize, seed: u64) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 32) as u8
        })
        .collect()
}

fn faults() -> FaultConfig {
    FaultConfig::none()
        .with_loss(0.05)
        .with_duplicate(0.02)
        .with_reorder(0.05)
        .with_delay(Duration::from_micros(500))
        .with_reorder_delay(Duration::from_millis(3))
}

/// A clean link with some latency (a 10 ms round trip), so windows have to open up.
fn wan() -> FaultConfig {
    FaultConfig::none().with_delay(Duration::from_millis(5))
}

const SMOL_PORT: u16 = 7000;
const OUR_PORT: u16 = 7;

/// smoltcp client → our echo server: `len` bytes out, the echo back byte-exact, smoltcp
/// closes first. Returns the world for further checks.
fn smoltcp_client(len: usize, f: FaultConfig, seed: u64, buf: usize) -> World<EchoServer> {
    let payload = random_bytes(len, seed);
    let mut w = World::new(EchoServer::default(), f, f, seed, buf);
    w.engine.listen(OUR_PORT, 16);
    let cx = w.iface.context();
    w.sockets
        .get_mut::<tcp::Socket>(w.sock)
        .connect(cx, (IpAddress::Ipv4(OUR_IP), OUR_PORT), 49_500)
        .expect("smoltcp connect");
    let mut sent = 0usize;
    let mut received = Vec::with_capacity(len);
    let mut closing = false;
    let received_len = Cell::new(0usize);
    w.run(
        Duration::from_secs(600),
        |s, _| {
            let mut did = false;
            if s.can_send() && sent < payload.len() {
                let n = s.send_slice(&payload[sent..]).expect("send");
                sent += n;
                did |= n > 0;
            }
            if sent == payload.len() && !closing {
                s.close();
                closing = true;
                did = true;
            }
            while s.can_recv() {
                let n = s
                    .recv(|b| {
                        received.extend_from_slice(b);
                        (b.len(), b.len())
                    })
                    .expect("recv");
                if n == 0 {
                    break;
                }
                did = true;
            }
            received_len.set(received.len());
            did
        },
        |w| {
            let st = w.smol_state();
            received_len.get() == len
                && matches!(st, tcp::State::Closed | tcp::State::TimeWait)
                && !w.engine.handler().closed.is_empty()
                && w.engine.connection_count() == 0
        },
    );
    assert_eq!(received.len(), len, "seed {seed}");
    assert!(received == payload, "seed {seed}: echo differs");
    let h = w.engine.handler();
    assert_eq!(h.accepted, 1, "seed {seed}");
    assert_eq!(h.echoed, len, "seed {seed}");
    assert_eq!(h.closed, vec![CloseReason::Normal], "seed {seed}");
    w
}

/// Our client → smoltcp echo server: `len` bytes out, the echo back byte-exact, we
/// half-close first, smoltcp closes after echoing everything.
fn our_client(len: usize, f: FaultConfig, seed: u64, buf: usize) -> World<Sender> {
    let payload = random_bytes(len, seed ^ 0xabcd);
    let mut w = World::new(Sender::new(payload.clone()), f, f, seed, buf);
    w.socket().listen(SMOL_PORT).expect("smoltcp listen");
    w.engine
        .connect(SocketAddr::from((PEER_IP, SMOL_PORT)), ())
        .map_err(|(e, _)| e)
        .expect("connect");
    let mut echoed = 0usize;
    let mut closing = false;
    w.run(
        Duration::from_secs(600),
        |s, _| {
            let mut did = false;
            while s.can_recv() && s.can_send() {
                let space = s.send_capacity() - s.send_queue();
                let chunk = s
                    .recv(|b| {
                        let n = b.len().min(space);
                        (n, b[..n].to_vec())
                    })
                    .expect("recv");
                if chunk.is_empty() {
                    break;
                }
                let n = s.send_slice(&chunk).expect("send");
                assert_eq!(n, chunk.len(), "space was checked");
                echoed += n;
                did = true;
            }
            if !closing
                && !s.may_recv()
                && s.recv_queue() == 0
                && s.state() == tcp::State::CloseWait
            {
                s.close();
                closing = true;
                did = true;
            }
            did
        },
        |w| {
            let st = w.smol_state();
            matches!(st, tcp::State::Closed | tcp::State::TimeWait)
                && !w.engine.handler().closed.is_empty()
                && w.engine.connection_count() == 0
        },
    );
    assert_eq!(echoed, len, "seed {seed}: smoltcp echoed");
    let h = w.engine.handler();
    assert!(h.connected && h.peer_closed, "seed {seed}");
    assert_eq!(h.sent, len, "seed {seed}");
    assert_eq!(h.received.len(), len, "seed {seed}");
    assert!(h.received == payload, "seed {seed}: echo differs");
    assert_eq!(h.closed, vec![CloseReason::Normal], "seed {seed}");
    w
}

fn report<H: Handler>(name: &str, seed: u64, w: &World<H>) {
    eprintln!(
        "{name} seed {seed}: t={:?} steps={} ours {} / faults to peer {:?} to us {:?}",
        w.clock.now(),
        w.steps,
        w.engine.stats(),
        w.engine.device().stats(),
        w.phy.io.stats(),
    );
}

#[test]
fn smoltcp_client_to_our_echo_server() {
    let w = smoltcp_client(300_000, FaultConfig::none(), 1, 64 * 1024);
    report("clean smoltcp client", 1, &w);
    // No faults: nothing may be retransmitted, by either side.
    assert_eq!(w.engine.stats().retransmissions, 0);
}

#[test]
fn our_client_to_smoltcp_echo_server() {
    let w = our_client(300_000, FaultConfig::none(), 1, 64 * 1024);
    report("clean our client", 1, &w);
    assert_eq!(w.engine.stats().retransmissions, 0);
}

#[test]
fn smoltcp_client_to_our_echo_server_with_faults() {
    for seed in 0..5 {
        let w = smoltcp_client(300_000, faults(), seed, 64 * 1024);
        report("faulty smoltcp client", seed, &w);
        assert!(
            w.engine.stats().retransmissions > 0,
            "seed {seed}: faults did bite"
        );
    }
}

#[test]
fn our_client_to_smoltcp_echo_server_with_faults() {
    for seed in 0..5 {
        let w = our_client(300_000, faults(), seed, 64 * 1024);
        report("faulty our client", seed, &w);
        assert!(
            w.engine.stats().retransmissions > 0,
            "seed {seed}: faults did bite"
        );
    }
}

/// smoltcp offers window scaling, SACK and (with a generator) timestamps on its SYN; our
/// SYN-ACK must accept all three, every later segment of ours must carry a timestamp
/// (RFC 7323 §3.2), and with a 256 KB smoltcp receive buffer we must use the scaled
/// window: more than 64 KB outstanding at once.
#[test]
fn options_negotiated_with_smoltcp_as_client() {
    let w = smoltcp_client(3_000_000, wan(), 3, 256 * 1024);
    report("options (smoltcp client)", 3, &w);
    let wire = &w.phy.wire;
    let peer = wire.peer_syn.expect("smoltcp SYN seen");
    let ours = wire.our_syn.expect("our SYN-ACK seen");
    assert_eq!(peer.wscale, Some(3), "256 KB buffer: smoltcp shift 3");
    assert!(peer.sack_permitted && peer.timestamps, "{peer:?}");
    assert!(ours.wscale.is_some(), "{ours:?}");
    assert!(ours.sack_permitted, "{ours:?}");
    assert!(ours.timestamps, "{ours:?}");
    assert_eq!(ours.mss, Some(1460));
    assert!(wire.our_segments > 100);
    assert_eq!(wire.our_segments_with_ts, wire.our_segments, "{wire:?}");
    assert_eq!(wire.peer_segments_with_ts, wire.peer_segments, "{wire:?}");
    assert!(wire.peer_max_window > 65_535, "{wire:?}");
    assert!(
        wire.max_outstanding > 65_535,
        "scaled window not used: {wire:?}"
    );
}

/// The same from the other side: our SYN offers the options, smoltcp's SYN-ACK accepts
/// them, and they stay in use.
#[test]
fn options_negotiated_with_smoltcp_as_server() {
    let w = our_client(3_000_000, wan(), 4, 256 * 1024);
    report("options (our client)", 4, &w);
    let wire = &w.phy.wire;
    let ours = wire.our_syn.expect("our SYN seen");
    let peer = wire.peer_syn.expect("smoltcp SYN-ACK seen");
    assert!(
        ours.wscale.is_some() && ours.sack_permitted && ours.timestamps,
        "{ours:?}"
    );
    assert_eq!(ours.mss, Some(1460));
    assert_eq!(peer.wscale, Some(3), "{peer:?}");
    assert!(peer.sack_permitted && peer.timestamps, "{peer:?}");
    assert_eq!(wire.our_segments_with_ts, wire.our_segments, "{wire:?}");
    assert_eq!(wire.peer_segments_with_ts, wire.peer_segments, "{wire:?}");
    assert!(
        wire.max_outstanding > 65_535,
        "scaled window not used: {wire:?}"
    );
}

/// Loss with SACK: smoltcp reports out-of-order data it holds in SACK blocks; recovery
/// from them still ends byte-exact, and some SACK blocks were seen.
#[test]
fn sack_from_smoltcp_under_loss() {
    let f = FaultConfig::none().with_loss(0.03);
    let w = our_client(500_000, f, 11, 256 * 1024);
    report("sack (our client)", 11, &w);
    assert!(w.phy.wire.peer_sack_segments > 0, "{:?}", w.phy.wire);
}

/// Heavier faults: loss as given, 10% reordering, 5% duplication, 1% corruption, jitter.
fn harsh(loss: f64) -> FaultConfig {
    FaultConfig::none()
        .with_loss(loss)
        .with_duplicate(0.05)
        .with_reorder(0.1)
        .with_corrupt(0.01)
        .with_delay(Duration::from_micros(500))
        .with_jitter(Duration::from_millis(2))
        .with_reorder_delay(Duration::from_millis(3))
}

/// smoltcp with 4 KB buffers: its window keeps closing and reopening by less than an
/// MSS, so our sender's SWS avoidance holds data back; when the window update that would
/// release it is lost, only the override timer (RFC 9293 §3.8.6.2.1) gets it going again.
/// (Seed 119 deadlocked before that timer existed.)
#[test]
fn small_smoltcp_windows_with_faults() {
    for seed in 110..122 {
        let w = smoltcp_client(200_000, harsh(0.05), seed, 4096);
        report("small windows, smoltcp client", seed, &w);
        let w = our_client(200_000, harsh(0.05), seed, 4096);
        report("small windows, our client", seed, &w);
    }
}

/// smoltcp with 1 KB buffers under loss: both windows reach zero. Our bare ACKs must stay
/// inside smoltcp's zero window (SEG.SEQ = RCV.NXT) even after a zero-window probe moved
/// our sequence space on, or smoltcp drops them and both sides probe each other forever.
/// (Seed 100 deadlocked that way.)
#[test]
fn zero_windows_both_ways_with_faults() {
    for seed in 100..106 {
        let w = smoltcp_client(50_000, harsh(0.1), seed, 1024);
        report("zero windows, smoltcp client", seed, &w);
        let w = our_client(50_000, harsh(0.1), seed, 1024);
        report("zero windows, our client", seed, &w);
    }
}
