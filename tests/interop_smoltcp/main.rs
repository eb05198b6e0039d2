//! Interoperability with a TCP we did not write: smoltcp 0.14, in memory, over IPv4 and
//! over IPv6.
//!
//! One side is a Rusty [`Engine`] on one end of the in-memory link; the other is a smoltcp
//! `Interface` with one TCP socket, whose `phy::Device` (in `wire`) moves frames over
//! the other end. Each direction can sit behind a seeded [`FaultInjector`]. Both run on
//! one thread and one [`VirtualClock`]; when neither has anything to do, time jumps to the
//! earliest timer (ours, smoltcp's `poll_delay`, or a frame the injector holds back).
//!
//! Over IPv6 the two share a /64 and find each other with Neighbor Discovery: smoltcp
//! solicits our address and we answer, we solicit smoltcp's and it answers. Our address
//! keeps the default duplicate address detection, so for our first second it is
//! tentative: smoltcp's solicitations go unanswered and our connects fail until then.
//!
//! The adapter also watches the frames that cross it, so the tests can check what was
//! negotiated on the wire (window scale, timestamps, SACK, RFC 7323 / RFC 2018), that
//! a scaled window was honoured, and which Neighbor Discovery messages each side sent.

mod echo;
mod wire;
mod world;

use std::cell::Cell;
use std::collections::VecDeque;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::time::Duration;

use rusty_stack::io::fault::{FaultConfig, FaultInjector};
use rusty_stack::io::{Capabilities, MacAddr, PacketIo};
use rusty_stack::time::{Clock, VirtualClock};
use rusty_stack::CloseReason;
use rusty_stack::{Conn, ConnectError, Engine, Handler, Opener};
use rusty_testkit::memory::{self, MemoryLink};
use rusty_testkit::sim;
use smoltcp::iface::{Config, Interface, PollResult, SocketHandle, SocketSet};
use smoltcp::phy::{self, ChecksumCapabilities, DeviceCapabilities, Medium};
use smoltcp::socket::tcp;
use smoltcp::wire::{
    EthernetAddress, EthernetFrame, EthernetProtocol, HardwareAddress, Icmpv6Message, Icmpv6Packet,
    IpAddress, IpCidr, IpProtocol, Ipv4Packet, Ipv6Packet, TcpControl, TcpPacket, TcpRepr,
};

use echo::*;
use wire::*;
use world::*;

/// Our engine's address.
const OUR_IP: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);
const OUR_IP6: Ipv6Addr = Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 2);
const OUR_MAC: MacAddr = MacAddr([0x02, 0, 0, 0, 0, 2]);
/// smoltcp's address.
const PEER_IP: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
const PEER_IP6: Ipv6Addr = Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 1);
const PEER_MAC: MacAddr = MacAddr([0x02, 0, 0, 0, 0, 1]);

/// The family a test runs over: IPv4 (with ARP), or IPv6 alone on both stacks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Family {
    V4,
    V6,
}

const FAMILIES: [Family; 2] = [Family::V4, Family::V6];

impl Family {
    fn ours(self) -> IpAddr {
        match self {
            Family::V4 => IpAddr::V4(OUR_IP),
            Family::V6 => IpAddr::V6(OUR_IP6),
        }
    }

    fn peer(self) -> IpAddr {
        match self {
            Family::V4 => IpAddr::V4(PEER_IP),
            Family::V6 => IpAddr::V6(PEER_IP6),
        }
    }

    /// Our MSS (and smoltcp's): the MTU less the IP and TCP headers.
    fn mss(self) -> u16 {
        match self {
            Family::V4 => 1460,
            Family::V6 => 1440,
        }
    }
}

type Link = FaultInjector<MemoryLink, VirtualClock>;

thread_local! {
    /// Virtual time in ms for smoltcp's timestamp generator (a plain `fn() -> u32`).
    static NOW_MS: Cell<u32> = const { Cell::new(0) };
}

fn smoltcp_tsval() -> u32 {
    NOW_MS.with(|c| c.get())
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

/// smoltcp client → our echo server over `family`: `len` bytes out, the echo back
/// byte-exact, smoltcp closes first. Returns the world for further checks.
fn smoltcp_client(
    family: Family,
    len: usize,
    f: FaultConfig,
    seed: u64,
    buf: usize,
) -> World<EchoServer> {
    let payload = random_bytes(len, seed);
    let mut w = World::new(EchoServer::default(), family, f, f, seed, buf);
    w.engine.listen(OUR_PORT, 16);
    let cx = w.iface.context();
    w.sockets
        .get_mut::<tcp::Socket>(w.sock)
        .connect(cx, (IpAddress::from(family.ours()), OUR_PORT), 49_500)
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
    if family == Family::V6 {
        // smoltcp found us: it solicited our address and we answered.
        let wire = &w.phy.wire;
        assert!(wire.peer_solicitations > 0, "seed {seed}: {wire:?}");
        assert!(wire.our_advertisements > 0, "seed {seed}: {wire:?}");
    }
    w
}

/// Our client → smoltcp echo server over `family`: `len` bytes out, the echo back
/// byte-exact, we half-close first, smoltcp closes after echoing everything.
fn our_client(family: Family, len: usize, f: FaultConfig, seed: u64, buf: usize) -> World<Sender> {
    let payload = random_bytes(len, seed ^ 0xabcd);
    let mut w = World::new(Sender::new(payload.clone()), family, f, f, seed, buf);
    w.socket().listen(SMOL_PORT).expect("smoltcp listen");
    let remote = SocketAddr::new(family.peer(), SMOL_PORT);
    if family == Family::V6 {
        // Our address is tentative while duplicate address detection runs: no source
        // for a connection yet, until its probes went unanswered.
        let connect = w.engine.connect(remote, ()).map_err(|(e, _)| e);
        assert_eq!(connect.err(), Some(ConnectError::NoSourceAddress));
        let probes = w.engine.config().dad_transmits;
        let usable = w.clock.now() + Duration::from_secs(u64::from(probes));
        w.run(
            Duration::from_secs(10),
            |_, _| false,
            |w| w.clock.now() >= usable,
        );
        // The engine's turn at that time ends the detection.
        w.engine.poll();
    }
    w.engine
        .connect(remote, ())
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
    if family == Family::V6 {
        // We found smoltcp: we solicited its address and it answered.
        let wire = &w.phy.wire;
        assert!(wire.our_solicitations > 0, "seed {seed}: {wire:?}");
        assert!(wire.peer_advertisements > 0, "seed {seed}: {wire:?}");
    }
    w
}

fn report<H: Handler>(name: &str, seed: u64, w: &World<H>) {
    eprintln!(
        "{name} over {:?} seed {seed}: t={:?} steps={} ours {} / faults to peer {:?} to us {:?}",
        w.family,
        w.clock.now(),
        w.steps,
        w.engine.stats(),
        w.engine.device().stats(),
        w.phy.io.stats(),
    );
}

#[test]
fn smoltcp_client_to_our_echo_server() {
    for family in FAMILIES {
        let w = smoltcp_client(family, 300_000, FaultConfig::none(), 1, 64 * 1024);
        report("clean smoltcp client", 1, &w);
        // No faults: nothing may be retransmitted, by either side.
        assert_eq!(w.engine.stats().retransmissions, 0, "{family:?}");
        // smoltcp's solicitations while our address was tentative went unanswered.
        let wire = &w.phy.wire;
        if family == Family::V6 {
            assert!(
                wire.peer_solicitations > wire.our_advertisements,
                "{wire:?}"
            );
        }
    }
}

#[test]
fn our_client_to_smoltcp_echo_server() {
    for family in FAMILIES {
        let w = our_client(family, 300_000, FaultConfig::none(), 1, 64 * 1024);
        report("clean our client", 1, &w);
        assert_eq!(w.engine.stats().retransmissions, 0, "{family:?}");
    }
}

#[test]
fn smoltcp_client_to_our_echo_server_with_faults() {
    for (family, seed) in FAMILIES
        .into_iter()
        .flat_map(|f| (0..5).map(move |s| (f, s)))
    {
        let w = smoltcp_client(family, 300_000, faults(), seed, 64 * 1024);
        report("faulty smoltcp client", seed, &w);
        assert!(
            w.engine.stats().retransmissions > 0,
            "{family:?} seed {seed}: faults did bite"
        );
    }
}

#[test]
fn our_client_to_smoltcp_echo_server_with_faults() {
    for (family, seed) in FAMILIES
        .into_iter()
        .flat_map(|f| (0..5).map(move |s| (f, s)))
    {
        let w = our_client(family, 300_000, faults(), seed, 64 * 1024);
        report("faulty our client", seed, &w);
        assert!(
            w.engine.stats().retransmissions > 0,
            "{family:?} seed {seed}: faults did bite"
        );
    }
}

/// smoltcp offers window scaling, SACK and (with a generator) timestamps on its SYN; our
/// SYN-ACK must accept all three, every later segment of ours must carry a timestamp
/// (RFC 7323 §3.2), and with a 256 KB smoltcp receive buffer we must use the scaled
/// window: more than 64 KB outstanding at once.
#[test]
fn options_negotiated_with_smoltcp_as_client() {
    for family in FAMILIES {
        let w = smoltcp_client(family, 3_000_000, wan(), 3, 256 * 1024);
        report("options (smoltcp client)", 3, &w);
        let wire = &w.phy.wire;
        let peer = wire.peer_syn.expect("smoltcp SYN seen");
        let ours = wire.our_syn.expect("our SYN-ACK seen");
        assert_eq!(peer.wscale, Some(3), "256 KB buffer: smoltcp shift 3");
        assert!(peer.sack_permitted && peer.timestamps, "{peer:?}");
        assert_eq!(peer.mss, Some(family.mss()), "{peer:?}");
        assert!(ours.wscale.is_some(), "{ours:?}");
        assert!(ours.sack_permitted, "{ours:?}");
        assert!(ours.timestamps, "{ours:?}");
        assert_eq!(ours.mss, Some(family.mss()));
        assert!(wire.our_segments > 100);
        assert_eq!(wire.our_segments_with_ts, wire.our_segments, "{wire:?}");
        assert_eq!(wire.peer_segments_with_ts, wire.peer_segments, "{wire:?}");
        assert!(wire.peer_max_window > 65_535, "{wire:?}");
        assert!(
            wire.max_outstanding > 65_535,
            "scaled window not used: {wire:?}"
        );
    }
}

/// The same from the other side: our SYN offers the options, smoltcp's SYN-ACK accepts
/// them, and they stay in use.
#[test]
fn options_negotiated_with_smoltcp_as_server() {
    for family in FAMILIES {
        let w = our_client(family, 3_000_000, wan(), 4, 256 * 1024);
        report("options (our client)", 4, &w);
        let wire = &w.phy.wire;
        let ours = wire.our_syn.expect("our SYN seen");
        let peer = wire.peer_syn.expect("smoltcp SYN-ACK seen");
        assert!(
            ours.wscale.is_some() && ours.sack_permitted && ours.timestamps,
            "{ours:?}"
        );
        assert_eq!(ours.mss, Some(family.mss()));
        assert_eq!(peer.mss, Some(family.mss()), "{peer:?}");
        assert_eq!(peer.wscale, Some(3), "{peer:?}");
        assert!(peer.sack_permitted && peer.timestamps, "{peer:?}");
        assert_eq!(wire.our_segments_with_ts, wire.our_segments, "{wire:?}");
        assert_eq!(wire.peer_segments_with_ts, wire.peer_segments, "{wire:?}");
        assert!(
            wire.max_outstanding > 65_535,
            "scaled window not used: {wire:?}"
        );
    }
}

/// Loss with SACK: smoltcp reports out-of-order data it holds in SACK blocks; recovery
/// from them still ends byte-exact, and some SACK blocks were seen.
#[test]
fn sack_from_smoltcp_under_loss() {
    for family in FAMILIES {
        let f = FaultConfig::none().with_loss(0.03);
        let w = our_client(family, 500_000, f, 11, 256 * 1024);
        report("sack (our client)", 11, &w);
        assert!(w.phy.wire.peer_sack_segments > 0, "{:?}", w.phy.wire);
    }
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
    for (family, seed) in FAMILIES
        .into_iter()
        .flat_map(|f| (110..122).map(move |s| (f, s)))
    {
        let w = smoltcp_client(family, 200_000, harsh(0.05), seed, 4096);
        report("small windows, smoltcp client", seed, &w);
        let w = our_client(family, 200_000, harsh(0.05), seed, 4096);
        report("small windows, our client", seed, &w);
    }
}

/// smoltcp with 1 KB buffers under loss: both windows reach zero. Our bare ACKs must stay
/// inside smoltcp's zero window (SEG.SEQ = RCV.NXT) even after a zero-window probe moved
/// our sequence space on, or smoltcp drops them and both sides probe each other forever.
/// (Seed 100 deadlocked that way.)
#[test]
fn zero_windows_both_ways_with_faults() {
    for (family, seed) in FAMILIES
        .into_iter()
        .flat_map(|f| (100..106).map(move |s| (f, s)))
    {
        let w = smoltcp_client(family, 50_000, harsh(0.1), seed, 1024);
        report("zero windows, smoltcp client", seed, &w);
        let w = our_client(family, 50_000, harsh(0.1), seed, 1024);
        report("zero windows, our client", seed, &w);
    }
}
