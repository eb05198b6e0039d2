//! Deterministic simulation: two engines joined by the in-memory link, each direction
//! behind a seeded fault injector, on one virtual clock.
//!
//! Nothing here reads the wall clock or the OS's randomness (engines get fixed secrets),
//! so a run is a pure function of its seed and inputs, and a failing seed replays
//! exactly. Time jumps straight to the next thing that can happen when both sides are
//! idle, so a minute of TCP timers costs microseconds.
//!
//! The engines may speak IPv4, IPv6 or both ([`engine_config`], [`engine_config_v6`]);
//! over IPv6 they find each other with Neighbor Discovery, on the same faulty link.
//!
//! For debugging a failing seed, every TCP segment and every Neighbor Discovery message
//! either engine receives is logged with its virtual time at `trace` level, target
//! `rusty_testkit::sim` (a test that wants it installs a logger; without one the frames
//! are not even parsed).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::time::Duration;

use smoltcp::wire::{
    EthernetAddress, EthernetFrame, EthernetProtocol, Icmpv6Message, Icmpv6Packet, IpAddress,
    IpProtocol, Ipv4Packet, Ipv6Packet, NdiscRepr, TcpPacket,
};

use rusty_stack::io::fault::{FaultConfig, FaultInjector};
use rusty_stack::io::{Capabilities, MacAddr, PacketIo};
use rusty_stack::time::{Clock, Instant, VirtualClock};
use rusty_stack::{Engine, EngineConfig, Handler};

use crate::memory::{self, MemFrame, MemoryLink};

/// A queue of the simulated link, as each engine sees it.
pub type SimLink = FaultInjector<Tap, VirtualClock>;

/// The in-memory link end, plus a trace of every frame the engine receives (one `trace`
/// log line per TCP segment), for debugging a failing seed.
pub struct Tap {
    inner: MemoryLink,
    clock: VirtualClock,
    name: &'static str,
}

impl Tap {
    /// The link under the tap.
    pub fn inner(&self) -> &MemoryLink {
        &self.inner
    }

    fn trace(&self, frame: &[u8]) {
        let t = self.clock.now();
        let Ok(eth) = EthernetFrame::new_checked(frame) else {
            return log::trace!("{t:?} {}<- runt frame", self.name);
        };
        // The IP checksum's verdict (IPv6 has none), the addresses and the upper layer.
        let (ip_ok, src, dst, protocol, l4) = match eth.ethertype() {
            EthernetProtocol::Ipv4 => {
                let Ok(ip) = Ipv4Packet::new_checked(eth.payload()) else {
                    return log::trace!("{t:?} {}<- bad IPv4", self.name);
                };
                let (src, dst) = (ip.src_addr().into(), ip.dst_addr().into());
                (
                    ip.verify_checksum(),
                    src,
                    dst,
                    ip.next_header(),
                    ip.payload(),
                )
            }
            EthernetProtocol::Ipv6 => {
                let Ok(ip) = Ipv6Packet::new_checked(eth.payload()) else {
                    return log::trace!("{t:?} {}<- bad IPv6", self.name);
                };
                let (src, dst) = (ip.src_addr().into(), ip.dst_addr().into());
                (true, src, dst, ip.next_header(), ip.payload())
            }
            other => return log::trace!("{t:?} {}<- {other}", self.name),
        };
        match protocol {
            IpProtocol::Tcp => self.trace_tcp(t, ip_ok, &src, &dst, l4),
            IpProtocol::Icmpv6 => self.trace_icmpv6(t, &src, &dst, l4),
            other => log::trace!("{t:?} {}<- {src}>{dst} {other}", self.name),
        }
    }

    fn trace_tcp(&self, t: Instant, ip_ok: bool, src: &IpAddress, dst: &IpAddress, l4: &[u8]) {
        let Ok(tcp) = TcpPacket::new_checked(l4) else {
            return log::trace!("{t:?} {}<- {src}>{dst} bad TCP", self.name);
        };
        let ok = ip_ok && tcp.verify_checksum(src, dst);
        let flags: String = [
            (tcp.syn(), 'S'),
            (tcp.fin(), 'F'),
            (tcp.rst(), 'R'),
            (tcp.psh(), 'P'),
            (tcp.ack(), '.'),
        ]
        .iter()
        .filter(|(on, _)| *on)
        .map(|(_, c)| *c)
        .collect();
        log::trace!(
            "{t:?} {}<- {}>{} [{flags}] seq={} ack={} win={} len={}{}",
            self.name,
            tcp.src_port(),
            tcp.dst_port(),
            tcp.seq_number().0 as u32,
            tcp.ack_number().0 as u32,
            tcp.window_len(),
            tcp.payload().len(),
            if ok { "" } else { " CORRUPT" },
        );
    }

    fn trace_icmpv6(&self, t: Instant, src: &IpAddress, dst: &IpAddress, l4: &[u8]) {
        let Ok(icmp) = Icmpv6Packet::new_checked(l4) else {
            return log::trace!("{t:?} {}<- {src}>{dst} bad ICMPv6", self.name);
        };
        let ok = match (src, dst) {
            (IpAddress::Ipv6(s), IpAddress::Ipv6(d)) => icmp.verify_checksum(s, d),
            _ => false,
        };
        let what = match (icmp.msg_type(), NdiscRepr::parse(&icmp)) {
            (
                Icmpv6Message::NeighborSolicit,
                Ok(NdiscRepr::NeighborSolicit { target_addr, .. }),
            ) => {
                format!("NS who-has {target_addr}")
            }
            (
                Icmpv6Message::NeighborAdvert,
                Ok(NdiscRepr::NeighborAdvert {
                    target_addr,
                    lladdr,
                    ..
                }),
            ) => {
                format!("NA {target_addr} is-at {lladdr:?}")
            }
            (other, _) => format!("{other}"),
        };
        log::trace!(
            "{t:?} {}<- {src}>{dst} {what}{}",
            self.name,
            if ok { "" } else { " CORRUPT" },
        );
    }
}

impl PacketIo for Tap {
    type Rx = MemFrame;
    type Tx = MemFrame;

    fn capabilities(&self) -> &Capabilities {
        self.inner.capabilities()
    }

    fn receive(&mut self, out: &mut Vec<MemFrame>, max: usize) -> usize {
        let start = out.len();
        let n = self.inner.receive(out, max);
        if log::log_enabled!(log::Level::Trace) {
            for frame in &out[start..] {
                self.trace(frame);
            }
        }
        n
    }

    fn alloc_tx(&mut self, len: usize) -> Option<MemFrame> {
        self.inner.alloc_tx(len)
    }

    fn transmit(&mut self, frames: &mut Vec<MemFrame>) {
        self.inner.transmit(frames);
    }

    fn flush(&mut self) {
        self.inner.flush();
    }
}

/// The client engine's address.
pub const CLIENT_IP: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
/// The server engine's address.
pub const SERVER_IP: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);
/// The client engine's MAC.
pub const CLIENT_MAC: MacAddr = MacAddr([0x02, 0, 0, 0, 0, 1]);
/// The server engine's MAC.
pub const SERVER_MAC: MacAddr = MacAddr([0x02, 0, 0, 0, 0, 2]);

/// An Ethernet/IP/TCP SYN frame from [`CLIENT_MAC`] to [`SERVER_MAC`], for tests that
/// need a frame a NIC steers by its 4-tuple. `src` and `dst` are of one family.
pub fn syn_frame(
    src: impl Into<IpAddr>,
    dst: impl Into<IpAddr>,
    sport: u16,
    dport: u16,
) -> Vec<u8> {
    let (src, dst) = (src.into(), dst.into());
    let tcp = smoltcp::wire::TcpRepr {
        src_port: sport,
        dst_port: dport,
        control: smoltcp::wire::TcpControl::Syn,
        seq_number: smoltcp::wire::TcpSeqNumber(1),
        ack_number: None,
        window_len: 1000,
        window_scale: None,
        max_seg_size: None,
        sack_permitted: false,
        sack_ranges: [None; 3],
        timestamp: None,
        payload: &[],
    };
    let ip = smoltcp::wire::IpRepr::new(
        src.into(),
        dst.into(),
        IpProtocol::Tcp,
        tcp.buffer_len(),
        64,
    );
    let eth = smoltcp::wire::EthernetRepr {
        src_addr: EthernetAddress(CLIENT_MAC.0),
        dst_addr: EthernetAddress(SERVER_MAC.0),
        ethertype: match src {
            IpAddr::V4(_) => EthernetProtocol::Ipv4,
            IpAddr::V6(_) => EthernetProtocol::Ipv6,
        },
    };
    // The IP representation's length counts its payload (the TCP segment) too.
    let mut buf = vec![0u8; eth.buffer_len() + ip.buffer_len()];
    let caps = smoltcp::phy::ChecksumCapabilities::default();
    let mut f = EthernetFrame::new_unchecked(&mut buf[..]);
    eth.emit(&mut f);
    ip.emit(f.payload_mut(), &caps);
    let header = ip.header_len();
    let mut t = TcpPacket::new_unchecked(&mut f.payload_mut()[header..]);
    tcp.emit(&mut t, &src.into(), &dst.into(), &caps);
    buf
}

/// The client engine's IPv6 address (a unique-local /64 shared with the server).
pub const CLIENT_IP6: Ipv6Addr = Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 1);
/// The server engine's IPv6 address.
pub const SERVER_IP6: Ipv6Addr = Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 2);

/// A deterministic engine configuration for address `ip`, keyed by `seed`.
pub fn engine_config(ip: Ipv4Addr, seed: u64) -> EngineConfig {
    keyed(EngineConfig::new(ip), u64::from(ip.to_bits()), seed)
}

/// A deterministic engine configuration for IPv6 address `ip6` (a /64, with the
/// link-local address the engine adds) and IPv4 address `ip` ([`Ipv4Addr::UNSPECIFIED`]
/// for none), keyed by `seed`. Duplicate address detection keeps its default: each
/// IPv6 address is tentative for the engine's first second.
pub fn engine_config_v6(ip: Ipv4Addr, ip6: Ipv6Addr, seed: u64) -> EngineConfig {
    let bits = ip6.to_bits();
    let key = u64::from(ip.to_bits()) ^ (bits as u64) ^ ((bits >> 64) as u64);
    let mut cfg = keyed(EngineConfig::new(ip), key, seed);
    cfg.ipv6 = vec![(ip6, 64)];
    for (i, chunk) in cfg.stable_secret.chunks_mut(8).enumerate() {
        chunk.copy_from_slice(&splitmix(seed ^ key ^ 0x7217 ^ i as u64).to_le_bytes());
    }
    cfg
}

/// `cfg` with its ISN and cookie keys drawn from `seed` and the engine's `key`.
fn keyed(mut cfg: EngineConfig, key: u64, seed: u64) -> EngineConfig {
    let mut secret = [0u8; 32];
    for (i, chunk) in secret.chunks_mut(8).enumerate() {
        chunk.copy_from_slice(&splitmix(seed ^ key ^ i as u64).to_le_bytes());
    }
    cfg.secret = Some(secret);
    cfg
}

fn splitmix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// Two engines on one simulated wire.
pub struct SimPair<HC: Handler, HS: Handler> {
    /// The virtual clock both engines read.
    pub clock: VirtualClock,
    /// The engine that opens connections (usually).
    pub client: Engine<SimLink, HC, VirtualClock>,
    /// The engine that listens (usually).
    pub server: Engine<SimLink, HS, VirtualClock>,
}

impl<HC: Handler, HS: Handler> SimPair<HC, HS> {
    /// `to_server` and `to_client` are the faults of each direction; `seed` drives them.
    pub fn new(
        client: HC,
        client_cfg: EngineConfig,
        server: HS,
        server_cfg: EngineConfig,
        to_server: FaultConfig,
        to_client: FaultConfig,
        seed: u64,
    ) -> SimPair<HC, HS> {
        let clock = VirtualClock::new();
        let (a, b) = memory::pair(
            Capabilities::new(CLIENT_MAC, 1500),
            Capabilities::new(SERVER_MAC, 1500),
        );
        let tap = |inner, name| Tap {
            inner,
            clock: clock.clone(),
            name,
        };
        let (a, b) = (tap(a, "client"), tap(b, "server"));
        let a = FaultInjector::new(a, clock.clone(), to_server, splitmix(seed));
        let b = FaultInjector::new(b, clock.clone(), to_client, splitmix(seed ^ 0x5555));
        SimPair {
            client: Engine::new(a, client, clock.clone(), client_cfg),
            server: Engine::new(b, server, clock.clone(), server_cfg),
            clock,
        }
    }

    /// A pair with the deterministic configurations of [`engine_config`] (keyed by
    /// `seed`) on a link without faults that takes `delay` each way.
    pub fn with_delay(client: HC, server: HS, delay: Duration, seed: u64) -> SimPair<HC, HS> {
        let link = FaultConfig::none().with_delay(delay);
        SimPair::new(
            client,
            engine_config(CLIENT_IP, seed),
            server,
            engine_config(SERVER_IP, seed),
            link,
            link,
            seed,
        )
    }

    /// The virtual time.
    pub fn now(&self) -> Instant {
        self.clock.now()
    }

    fn in_flight(&self) -> usize {
        self.client.device().inner().inner().pending()
            + self.server.device().inner().inner().pending()
    }

    /// When something will next happen without new input: a timer or a held frame.
    fn next_event(&self) -> Option<Instant> {
        [
            self.client.next_deadline(),
            self.server.next_deadline(),
            self.client.device().next_release(),
            self.server.device().next_release(),
        ]
        .into_iter()
        .flatten()
        .min()
    }

    /// One step: both engines take a turn; if neither had anything to do, time jumps to
    /// the next event (at most `max_idle` ahead). Returns false when nothing at all is
    /// left to happen.
    pub fn step(&mut self, max_idle: Duration) -> bool {
        let n = self.client.poll() + self.server.poll();
        if n > 0 || self.in_flight() > 0 {
            return true;
        }
        let now = self.clock.now();
        match self.next_event() {
            Some(t) => {
                let t = if t <= now {
                    now + Duration::from_micros(1)
                } else {
                    t
                };
                self.clock.set(t.min(now + max_idle));
                true
            }
            None => false,
        }
    }

    /// Step until `done` holds or `limit` of virtual time has passed (or nothing is left
    /// to happen). Returns whether `done` held.
    pub fn run_until(&mut self, limit: Duration, mut done: impl FnMut(&mut Self) -> bool) -> bool {
        let end = self.clock.now() + limit;
        loop {
            if done(self) {
                return true;
            }
            if self.clock.now() >= end || !self.step(Duration::from_secs(1)) {
                return done(self);
            }
        }
    }
}
