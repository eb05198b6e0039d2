//! Frames into a dual-stack engine: Ethernet, ARP, IPv4, IPv6 with its extension
//! headers, ICMP, ICMPv6 with Neighbor Discovery, and TCP over either family up to a
//! handler, on the in-memory link, on virtual time.
//!
//! The input is a header byte, then records until it runs out (see [`Record`]). With
//! bit 0 of the header set, the target first opens a connection with a valid handshake
//! of its own (bit 1: the engine opens it; bit 2: the peer offers timestamps, SACK and
//! window scaling; bit 5: over IPv6, to the engine's global address or with bit 6 its
//! link-local one), and tracks both sides' sequence numbers from then on, so that the
//! segment records land on a synchronized connection with fuzzed offsets around the
//! right numbers. The engine's IPv6 addresses are usable at once, or with bit 7 go
//! through duplicate address detection first (with bit 0 too, the clock runs until
//! they are usable before the handshake). Raw-frame records may ask for their
//! checksums to be repaired. The IPv6 records are in [`v6`].
//!
//! Checked: every frame the engine sends is well-formed (see [`check_sent`]); after
//! every loop turn the engine's counters of frames in and out, echo replies,
//! solicitations and advertisements match what crossed the link, and no frame was
//! built above the MTU; after the whole input the engine still answers a ping, over
//! IPv6 too (to both of its addresses) when they are usable.

mod script;
mod v6;

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::Duration;

use rusty_stack::internals::SeqNum;
use rusty_stack::internals::{Segment, TxSegment};
use rusty_stack::io::{Capabilities, MacAddr, PacketIo};
use rusty_stack::time::{Clock, VirtualClock};
use rusty_stack::{CloseReason, Conn, ConnId, DropReason, Engine, Handler, Opener};
use rusty_testkit::memory::{self, MemoryLink};
use rusty_testkit::sim;

use crate::input::Input;
use crate::wire::{
    arp_frame, check_sent, echo_request, fix_checksums, tcp_bytes, tcp_frame, Sent, HOST_IP,
    HOST_MAC, PEER_IP, PEER_MAC,
};
use crate::wire6::{self, host_link_local, Own6, HOST6, PEER6, PEER_LL};

pub(crate) use script::Script;
pub(crate) use v6::{icmp6, packet6};

/// The port the engine listens on.
pub(crate) const PORT: u16 = 80;
/// The peer's port on the connection the target opens.
pub(crate) const PEER_PORT: u16 = 40000;

/// Header bits.
pub(crate) const OPEN: u8 = 1;
pub(crate) const ACTIVE: u8 = 2;
pub(crate) const FULL_OPTIONS: u8 = 4;
pub(crate) const TIGHT_LIMITS: u8 = 8;
pub(crate) const SMALL_MTU: u8 = 16;
pub(crate) const V6: u8 = 32;
pub(crate) const LINK_LOCAL: u8 = 64;
pub(crate) const DAD: u8 = 128;

/// The kinds of record, the low three bits of its first byte.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Record {
    /// A frame as given: a flags byte (bit 0: repair checksums; bit 1: hand it over as a
    /// sibling worker would, checksums trusted), a length (u16) and the bytes.
    Raw = 0,
    /// A segment on the tracked connection: flags, offsets from the expected sequence
    /// and acknowledgment numbers, window, payload length, options (see
    /// [`Bench::segment`]).
    Segment = 1,
    /// Advance the clock (the record's second byte: 6 bits of count, 2 of unit).
    Advance = 2,
    /// Change what the handler does, or call the engine's API.
    App = 3,
    /// An ICMP Echo Request with a payload of fuzzed length.
    Ping = 4,
    /// An ARP packet from fuzzed addresses.
    Arp = 5,
    /// ICMPv6 from a fuzzed source: an Echo Request, Neighbor Discovery, an error
    /// quoting the engine's latest IPv6 segment, any message; or an active open to a
    /// fuzzed IPv6 address (see [`Bench::icmp6`]).
    Icmp6 = 6,
    /// An IPv6 packet between fuzzed addresses with a fuzzed hop limit and
    /// extension-header chain, carrying TCP, ICMPv6 or another protocol (see
    /// [`Bench::packet6`]).
    Packet6 = 7,
}

impl Record {
    pub(crate) fn from_tag(tag: u8) -> Record {
        match tag & 7 {
            0 => Record::Raw,
            1 => Record::Segment,
            2 => Record::Advance,
            3 => Record::App,
            4 => Record::Ping,
            5 => Record::Arp,
            6 => Record::Icmp6,
            _ => Record::Packet6,
        }
    }
}

/// What the handler does with data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// Send back what fits; the rest waits.
    Echo,
    /// Consume nothing.
    Pause,
    /// Consume half of what is offered.
    Half,
    /// Send "bye" and close.
    ReplyClose,
    /// Abort the connection.
    Abort,
    /// Refuse new connections; echo on old ones.
    Refuse,
    /// Consume and arm the connection's timer, which closes it.
    Timer,
    /// Echo, then shut down writing.
    Shutdown,
}

const MODES: [Mode; 8] = [
    Mode::Echo,
    Mode::Pause,
    Mode::Half,
    Mode::ReplyClose,
    Mode::Abort,
    Mode::Refuse,
    Mode::Timer,
    Mode::Shutdown,
];

struct Fuzzy {
    mode: Mode,
    /// Connections seen, for `resume_receive` (bounded).
    ids: Vec<ConnId>,
    /// An active open to start from `poll`.
    open: Option<SocketAddr>,
}

impl Handler for Fuzzy {
    type Conn = ();

    fn accept(&mut self, _: std::net::SocketAddr, _: std::net::SocketAddr) -> Option<()> {
        (self.mode != Mode::Refuse).then_some(())
    }
    fn connected(&mut self, conn: &mut Conn<'_, ()>) {
        if self.ids.len() >= 16 {
            self.ids.remove(0);
        }
        self.ids.push(conn.id());
        if self.mode == Mode::Timer {
            conn.set_timer(Some(Duration::from_millis(50)));
        }
    }
    fn data(&mut self, conn: &mut Conn<'_, ()>, data: &[u8]) -> usize {
        match self.mode {
            Mode::Echo | Mode::Refuse => conn.send(data).unwrap_or(0),
            Mode::Pause => 0,
            Mode::Half => data.len().div_ceil(2),
            Mode::ReplyClose => {
                let _ = conn.send(b"bye");
                conn.close();
                data.len()
            }
            Mode::Abort => {
                conn.abort();
                0
            }
            Mode::Timer => {
                conn.set_timer(Some(Duration::from_millis(data.len() as u64)));
                data.len()
            }
            Mode::Shutdown => {
                let _ = conn.send(data);
                conn.shutdown_write();
                data.len()
            }
        }
    }
    fn peer_closed(&mut self, conn: &mut Conn<'_, ()>) {
        if self.mode != Mode::Pause {
            conn.shutdown_write();
        }
    }
    fn timer(&mut self, conn: &mut Conn<'_, ()>) {
        conn.close();
    }
    fn closed(&mut self, _: &mut Opener<'_, ()>, _: (), _: CloseReason) {}
    fn poll(&mut self, opener: &mut Opener<'_, ()>) {
        if let Some(remote) = self.open.take() {
            opener.connect(remote, ());
        }
    }
}

/// The peer's view of the connection the target opened.
#[derive(Debug, Clone, Copy)]
struct Peer {
    /// The peer's address, and the engine's on the connection.
    ip: IpAddr,
    host_ip: IpAddr,
    port: u16,
    host_port: u16,
    /// The peer's next sequence number.
    snd_nxt: SeqNum,
    /// The end of what the engine has sent: what the peer acknowledges.
    rcv_nxt: SeqNum,
    ts: bool,
    /// The engine's latest TSval, echoed as TSecr.
    ts_recent: u32,
}

/// What crossed the link from the engine, by kind, to hold its counters against.
#[derive(Debug, Default)]
struct Tally {
    frames: u64,
    echo_replies: u64,
    solicitations: u64,
    advertisements: u64,
    icmpv6_errors: u64,
    /// Frames handed over with `inject_frames`.
    injected: u64,
}

struct Bench {
    clock: VirtualClock,
    wire: MemoryLink,
    eng: Engine<MemoryLink, Fuzzy, VirtualClock>,
    mtu: usize,
    /// The addresses (peer's, engine's) of a connection the target opens.
    family: (IpAddr, IpAddr),
    dad: bool,
    peer: Option<Peer>,
    rx: Vec<memory::MemFrame>,
    tally: Tally,
    /// The engine's latest TCP segment over IPv6, from its IPv6 header on: what a
    /// router's Packet Too Big quotes.
    last6: Vec<u8>,
    /// The data of the echo replies the latest loop turn sent.
    echoes: Vec<Vec<u8>>,
}

impl Bench {
    fn new(header: u8) -> Bench {
        let clock = VirtualClock::new();
        let mtu = if header & SMALL_MTU != 0 { 576 } else { 1500 };
        let (wire, dev) = memory::pair(
            Capabilities::new(PEER_MAC, mtu),
            Capabilities::new(crate::wire::HOST_MAC, mtu),
        );
        let mut cfg = sim::engine_config(HOST_IP, 7);
        cfg.ipv6 = vec![(HOST6, 64)];
        cfg.ipv6_gateway = Some(wire6::ROUTER_LL);
        cfg.stable_secret = wire6::STABLE_SECRET;
        cfg.dad_transmits = u8::from(header & DAD != 0);
        // The connection table is allocated whole up front; an input opens a few dozen
        // connections at most, and a fresh engine per input must stay cheap.
        cfg.max_connections = 64;
        if header & TIGHT_LIMITS != 0 {
            cfg.max_connections = 2;
            cfg.max_orphans = 1;
            cfg.max_time_wait = 1;
            cfg.syn_cookies = false;
            cfg.tcp.send_buffer = 4096;
            cfg.tcp.recv_buffer = 4096;
        }
        let handler = Fuzzy {
            mode: Mode::Echo,
            ids: Vec::new(),
            open: None,
        };
        let mut eng = Engine::new(dev, handler, clock.clone(), cfg);
        eng.listen(PORT, if header & TIGHT_LIMITS != 0 { 1 } else { 16 });
        let family = match (header & V6 != 0, header & LINK_LOCAL != 0) {
            (false, _) => (PEER_IP.into(), HOST_IP.into()),
            (true, false) => (PEER6.into(), HOST6.into()),
            (true, true) => (PEER_LL.into(), host_link_local(0).into()),
        };
        let mut bench = Bench {
            clock,
            wire,
            eng,
            mtu,
            family,
            dad: header & DAD != 0,
            peer: None,
            rx: Vec::new(),
            tally: Tally::default(),
            last6: Vec::new(),
            echoes: Vec::new(),
        };
        bench.poll();
        bench
    }

    /// The peer's timestamp clock: never zero, only forward.
    fn peer_tsval(&self) -> u32 {
        (self.clock.now().as_millis() as u32).wrapping_add(1_000_000)
    }

    /// One engine loop turn; checks what it sent and learns the tracked connection's
    /// numbers from it. Returns the segments sent to the peer's address.
    fn poll(&mut self) -> Vec<Segment> {
        self.eng.poll();
        self.drain()
    }

    fn drain(&mut self) -> Vec<Segment> {
        let mut segs = Vec::new();
        self.echoes.clear();
        let peer_ip = self.peer.map_or(self.family.0, |p| p.ip);
        self.wire.receive(&mut self.rx, usize::MAX);
        let own6: Vec<_> = self.eng.internals().ipv6_addresses().collect();
        let own6 = Own6(&own6);
        for frame in self.rx.drain(..) {
            let t = &mut self.tally;
            t.frames += 1;
            match check_sent(&frame, self.mtu, &own6) {
                Sent::Tcp { dst, seg } => {
                    if dst.is_ipv6() {
                        self.last6.clear();
                        self.last6.extend_from_slice(&frame[14..]);
                    }
                    if dst == peer_ip {
                        segs.push(seg);
                    }
                }
                Sent::EchoReply { data } => {
                    t.echo_replies += 1;
                    self.echoes.push(data);
                }
                Sent::Solicitation => t.solicitations += 1,
                Sent::Advertisement => t.advertisements += 1,
                Sent::Icmpv6Error => t.icmpv6_errors += 1,
                Sent::Arp | Sent::MldReport => {}
            }
        }
        self.check_counters();
        if let Some(peer) = &mut self.peer {
            for seg in segs.iter().filter(|s| s.dst_port == peer.port) {
                let end = seg.seq + seg.seg_len();
                if end > peer.rcv_nxt {
                    peer.rcv_nxt = end;
                }
                if let Some((tsval, _)) = seg.timestamp {
                    peer.ts_recent = tsval;
                }
            }
        }
        segs
    }

    /// The engine counts what crossed the link as the link saw it.
    fn check_counters(&self) {
        let s = self.eng.stats();
        let t = &self.tally;
        assert_eq!(
            s.frames_in,
            self.wire.stats().sent + t.injected,
            "frames in"
        );
        assert_eq!(s.frames_out, t.frames, "frames out");
        assert_eq!(s.icmp_echo_replies, t.echo_replies, "echo replies");
        assert_eq!(
            s.neighbor_solicitations_sent, t.solicitations,
            "solicitations"
        );
        assert_eq!(
            s.neighbor_advertisements_sent, t.advertisements,
            "advertisements"
        );
        assert_eq!(s.icmpv6_errors_sent, t.icmpv6_errors, "ICMPv6 errors");
        assert_eq!(
            s.drops[DropReason::OverMtu.index()],
            0,
            "a frame above the MTU"
        );
    }

    fn send(&mut self, frame: &[u8]) -> Vec<Segment> {
        self.inject(frame);
        self.poll()
    }

    /// Hand `frame` over as a sibling worker would (checksums trusted).
    fn hand_over(&mut self, frame: Vec<u8>) {
        self.tally.injected += 1;
        self.eng.inject_frames([frame]);
        self.drain();
    }

    fn inject(&mut self, frame: &[u8]) {
        // The link refuses frames over its MTU: it is a device, it cannot receive them.
        if let Some(mut buf) = self.wire.alloc_tx(frame.len()) {
            buf.copy_from_slice(frame);
            self.wire.transmit(&mut vec![buf]);
        }
    }

    /// [`Bench::peer_seg`] on `base` with fuzzed control bits (`flags`: bit 0 clears
    /// ACK, bits 1 to 4 set SYN, FIN, RST and PSH) and its sequence and acknowledgment
    /// numbers moved by `seq_off` and `ack_off`.
    fn fuzzed_seg(&self, base: &Peer, flags: u8, seq_off: i16, ack_off: i16) -> TxSegment {
        let mut seg = self.peer_seg(base);
        seg.seq = SeqNum(base.snd_nxt.0.wrapping_add_signed(i32::from(seq_off)));
        seg.ack = (flags & 1 == 0)
            .then(|| SeqNum(base.rcv_nxt.0.wrapping_add_signed(i32::from(ack_off))));
        seg.syn = flags & 2 != 0;
        seg.fin = flags & 4 != 0;
        seg.rst = flags & 8 != 0;
        seg.psh = flags & 16 != 0;
        seg
    }

    /// The segment the peer sends next on `peer`, with options as agreed.
    fn peer_seg(&self, peer: &Peer) -> TxSegment {
        TxSegment {
            seq: peer.snd_nxt,
            ack: Some(peer.rcv_nxt),
            window: 65535,
            timestamp: peer.ts.then(|| (self.peer_tsval(), peer.ts_recent)),
            ..Default::default()
        }
    }

    fn syn(&self, isn: SeqNum, full: bool) -> TxSegment {
        TxSegment {
            seq: isn,
            syn: true,
            window: 65535,
            mss: full.then_some(1460),
            wscale: full.then_some(7),
            sack_permitted: full,
            timestamp: full.then(|| (self.peer_tsval(), 0)),
            ..Default::default()
        }
    }

    /// A segment from the peer's address `ips.0` and `ports.0` to the engine's, in its
    /// frame; over IPv6 through `chain` (extension headers as [`wire6::chain`] builds
    /// them).
    fn tcp_to(
        ips: (IpAddr, IpAddr),
        ports: (u16, u16),
        seg: &TxSegment,
        payload: &[u8],
        chain: &[u8],
    ) -> Vec<u8> {
        match ips {
            (IpAddr::V6(src), IpAddr::V6(dst)) => {
                let tcp = tcp_bytes(src, dst, ports, seg, payload);
                let (next, body) = wire6::chain(chain, wire6::TCP, &tcp);
                let packet = wire6::packet(src, dst, 64, next, &body);
                wire6::frame(PEER_MAC, HOST_MAC, &packet)
            }
            _ => tcp_frame(ports.0, ports.1, seg, payload),
        }
    }

    /// The peer connects to the engine's listener.
    fn open_passive(&mut self, isn: SeqNum, full: bool) {
        let syn = self.syn(isn, full);
        let out = self.send(&Self::tcp_to(
            self.family,
            (PEER_PORT, PORT),
            &syn,
            &[],
            &[],
        ));
        let Some(sa) = out.iter().find(|s| s.flags.syn && s.flags.ack) else {
            return;
        };
        let peer = Peer {
            ip: self.family.0,
            host_ip: self.family.1,
            port: PEER_PORT,
            host_port: PORT,
            snd_nxt: isn + 1,
            rcv_nxt: sa.seq + 1,
            ts: full && sa.timestamp.is_some(),
            ts_recent: sa.timestamp.map_or(0, |t| t.0),
        };
        self.peer = Some(peer);
        let ack = self.peer_seg(&peer);
        self.send(&Self::tcp_to(
            self.family,
            (peer.port, peer.host_port),
            &ack,
            &[],
            &[],
        ));
    }

    /// The engine connects to the peer, whose MAC it already knows.
    fn open_active(&mut self, isn: SeqNum, full: bool) {
        self.eng.import_arp(self.family.0, PEER_MAC);
        if self
            .eng
            .connect(SocketAddr::new(self.family.0, PEER_PORT), ())
            .is_err()
        {
            return;
        }
        let out = self.poll();
        let Some(syn) = out.iter().find(|s| s.flags.syn && !s.flags.ack) else {
            return;
        };
        let mut sa = self.syn(isn, full && syn.timestamp.is_some());
        sa.ack = Some(syn.seq + 1);
        sa.mss = syn.mss.and(sa.mss);
        sa.wscale = syn.wscale.and(sa.wscale);
        sa.sack_permitted &= syn.sack_permitted;
        sa.timestamp = sa
            .timestamp
            .map(|(v, _)| (v, syn.timestamp.map_or(0, |t| t.0)));
        let peer = Peer {
            ip: self.family.0,
            host_ip: self.family.1,
            port: PEER_PORT,
            host_port: syn.src_port,
            snd_nxt: isn + 1,
            rcv_nxt: syn.seq + 1,
            ts: sa.timestamp.is_some(),
            ts_recent: syn.timestamp.map_or(0, |t| t.0),
        };
        self.peer = Some(peer);
        self.send(&Self::tcp_to(
            self.family,
            (peer.port, peer.host_port),
            &sa,
            &[],
            &[],
        ));
    }

    fn raw(&mut self, input: &mut Input<'_>) {
        let flags = input.u8();
        let len = usize::from(input.u16()) % 2048;
        let mut frame = input.bytes(len).to_vec();
        if flags & 1 != 0 {
            fix_checksums(&mut frame);
        }
        if flags & 2 != 0 {
            self.hand_over(frame);
        } else {
            self.send(&frame);
        }
    }

    /// A [`Record::Segment`]: flags (bit 0 no ACK, then SYN, FIN, RST, PSH, and bit 5
    /// toggles timestamps), sequence and acknowledgment offsets (i16 each), window,
    /// payload length (u16), options (bit 0 MSS, 1 window scale, 2 SACK-permitted, 3 a
    /// SACK block whose offset and length follow). Tag bit 3 sends it from the peer's
    /// other port; over IPv6, tag bit 4 through the extension headers a host takes.
    fn segment(&mut self, tag: u8, input: &mut Input<'_>) {
        let flags = input.u8();
        let seq_off = input.u16() as i16;
        let ack_off = input.u16() as i16;
        let window = input.u16();
        let len = usize::from(input.u16()) % 3000;
        let opts = input.u8();
        let base = self.peer.unwrap_or(Peer {
            ip: self.family.0,
            host_ip: self.family.1,
            port: PEER_PORT + 1,
            host_port: PORT,
            snd_nxt: SeqNum(1),
            rcv_nxt: SeqNum(0),
            ts: false,
            ts_recent: 0,
        });
        let mut seg = self.fuzzed_seg(&base, flags, seq_off, ack_off);
        seg.window = window;
        if flags & 32 != 0 {
            // Toggle the timestamp option against what was agreed.
            seg.timestamp = match seg.timestamp {
                Some(_) => None,
                None => Some((self.peer_tsval(), base.ts_recent)),
            };
        }
        if opts & 1 != 0 {
            seg.mss = Some(u16::from(opts) << 4);
        }
        if opts & 2 != 0 {
            seg.wscale = Some(opts >> 4);
        }
        seg.sack_permitted = opts & 4 != 0;
        if opts & 8 != 0 && seg.ack.is_some() {
            // One SACK block around what the engine has sent (RFC 2018).
            let left = base
                .rcv_nxt
                .0
                .wrapping_add_signed(i32::from(input.u16() as i16));
            let right = left.wrapping_add(u32::from(input.u8()) * 16);
            seg.sack = [Some((left, right)), None, None];
            seg.mss = None;
            seg.wscale = None;
        }
        let payload: Vec<u8> = (0..len).map(|i| (i as u8).wrapping_mul(7) ^ tag).collect();
        let port = if tag & 8 != 0 {
            base.port ^ 1
        } else {
            base.port
        };
        // Over IPv6, with tag bit 4 through the extension headers a host takes in
        // (Hop-by-Hop and Destination Options, an atomic fragment).
        let chain: &[u8] = if tag & 16 != 0 { &[0, 1, 3] } else { &[] };
        let ips = (base.ip, base.host_ip);
        self.send(&Self::tcp_to(
            ips,
            (port, base.host_port),
            &seg,
            &payload,
            chain,
        ));
        if let Some(peer) = &mut self.peer {
            // An in-order segment moves the peer on, as a real sender's would.
            if seq_off == 0 && !seg.rst && port == peer.port {
                peer.snd_nxt += payload.len() + usize::from(seg.syn) + usize::from(seg.fin);
            }
        }
    }

    fn advance(&mut self, input: &mut Input<'_>) {
        let b = input.u8();
        let unit = [1, 10, 1000, 60_000][usize::from(b >> 6)];
        let step = Duration::from_millis(u64::from(b & 63) * unit);
        if step.is_zero() {
            // Straight to the engine's next deadline, if it has one.
            if let Some(at) = self.eng.next_deadline() {
                self.clock
                    .advance(at.saturating_duration_since(self.clock.now()));
            }
        } else {
            self.clock.advance(step);
        }
        self.poll();
    }

    fn app(&mut self, input: &mut Input<'_>) {
        let b = input.u8();
        match b & 3 {
            0 => self.eng.handler_mut().mode = MODES[usize::from(b >> 2) % MODES.len()],
            1 => {
                let ids = &self.eng.handler().ids;
                if let Some(&id) = ids.get(usize::from(b >> 2) % ids.len().max(1)) {
                    self.eng.resume_receive(id);
                }
            }
            2 => {
                // An active open through the handler's opener, to a port of the peer:
                // with bit 2 over IPv6 (bit 3: to its link-local address).
                let (ip, port): (IpAddr, u16) = match (b & 4 != 0, b & 8 != 0) {
                    (false, _) => (PEER_IP.into(), u16::from(b >> 3) + 1),
                    (true, false) => (PEER6.into(), u16::from(b >> 4) + 1),
                    (true, true) => (PEER_LL.into(), u16::from(b >> 4) + 1),
                };
                self.eng.import_arp(ip, PEER_MAC);
                self.eng.handler_mut().open = Some(SocketAddr::new(ip, port));
            }
            _ => {
                if b & 4 != 0 {
                    self.eng.stop_accepting();
                } else {
                    self.eng.listen(u16::from(b >> 3) + 1, usize::from(b >> 3));
                }
            }
        }
        self.poll();
    }

    /// Whatever came before, the engine still answers a ping from a known neighbour;
    /// over IPv6 too, at both of its addresses, unless duplicate address detection may
    /// have taken them.
    fn check_alive(&mut self) {
        self.eng.import_arp(PEER_IP.into(), PEER_MAC);
        self.inject(&echo_request(0xbeef, 9, b"alive?"));
        self.poll();
        let replied = self.echoes.iter().any(|d| d == b"alive?");
        assert!(replied, "the engine no longer answers a ping");
        if self.dad {
            return;
        }
        for (peer, host) in [(PEER6, HOST6), (PEER_LL, host_link_local(0))] {
            self.send(&wire6::echo_request(peer, host, b"alive6?"));
            let replied = self.echoes.iter().any(|d| d == b"alive6?");
            assert!(replied, "the engine no longer answers a ping at {host}");
        }
    }

    fn ping(&mut self, tag: u8, input: &mut Input<'_>) {
        let len = usize::from(input.u16()) % 2000;
        let data = vec![tag; len];
        self.send(&echo_request(u16::from(tag), 1, &data));
    }

    fn arp(&mut self, tag: u8, input: &mut Input<'_>) {
        let mac_byte = input.u8();
        let sender_ip = Ipv4Addr::new(10, 0, 0, input.u8());
        let target_ip = Ipv4Addr::new(10, 0, 0, input.u8());
        // A group MAC when the tag's top bit says so (ARP must refuse it).
        let mac = MacAddr([(mac_byte & 0xfe) | (tag >> 7), 0, 0, 0, 0, mac_byte]);
        let mut frame = arp_frame(tag & 8 == 0, (mac, sender_ip), target_ip);
        if tag & 16 != 0 {
            // The other Ethernet destination: a broadcast reply, a unicast request.
            let dst = if tag & 8 != 0 {
                MacAddr::BROADCAST
            } else {
                crate::wire::HOST_MAC
            };
            frame[..6].copy_from_slice(dst.as_bytes());
        }
        self.send(&frame);
    }
}

/// Run `data` against a fresh engine. Panics on a bug.
pub fn engine_frame(data: &[u8]) {
    run(data).check_alive();
}

/// The engine after the header and the records of `data`, each checked.
fn run(data: &[u8]) -> Bench {
    let mut input = Input::new(data);
    let header = input.u8();
    let mut bench = Bench::new(header);
    if header & OPEN != 0 {
        if bench.dad {
            // Until duplicate address detection lets the addresses be used.
            bench.clock.advance(Duration::from_secs(1));
            bench.poll();
        }
        let isn = SeqNum(input.u32());
        let full = header & FULL_OPTIONS != 0;
        if header & ACTIVE != 0 {
            bench.open_active(isn, full);
        } else {
            bench.open_passive(isn, full);
        }
    }
    // Bounded work per input, whatever its length.
    for _ in 0..256 {
        if input.is_empty() {
            break;
        }
        let tag = input.u8();
        match Record::from_tag(tag) {
            Record::Raw => bench.raw(&mut input),
            Record::Segment => bench.segment(tag, &mut input),
            Record::Advance => bench.advance(&mut input),
            Record::App => bench.app(&mut input),
            Record::Ping => bench.ping(tag, &mut input),
            Record::Arp => bench.arp(tag, &mut input),
            Record::Icmp6 => bench.icmp6(tag, &mut input),
            Record::Packet6 => bench.packet6(tag, &mut input),
        }
    }
    bench
}

#[cfg(test)]
mod tests;
