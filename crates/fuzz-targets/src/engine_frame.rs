//! Frames into an engine: Ethernet, ARP, IPv4, ICMP and TCP up to a handler, on the
//! in-memory link, on virtual time.
//!
//! The input is a header byte, then records until it runs out (see [`Record`]). With
//! bit 0 of the header set, the target first opens a connection with a valid handshake
//! of its own (bit 1: the engine opens it; bit 2: the peer offers timestamps, SACK and
//! window scaling), and tracks both sides' sequence numbers from then on, so that the
//! segment records land on a synchronized connection with fuzzed offsets around the
//! right numbers. Raw-frame records may ask for their checksums to be repaired.
//!
//! Checked: every frame the engine sends is well-formed (see [`check_sent`]), and after
//! the whole input the engine still answers a ping.

use std::net::{Ipv4Addr, SocketAddr};
use std::time::Duration;

use rusty_stack::internals::SeqNum;
use rusty_stack::internals::{Segment, TxSegment};
use rusty_stack::io::{Capabilities, MacAddr, PacketIo};
use rusty_stack::time::{Clock, VirtualClock};
use rusty_stack::{CloseReason, Conn, ConnId, Engine, Handler, Opener};
use rusty_testkit::memory::{self, MemoryLink};
use rusty_testkit::sim;

use crate::input::Input;
use crate::wire::{
    arp_frame, check_sent, echo_request, fix_checksums, tcp_frame, Sent, HOST_IP, PEER_IP, PEER_MAC,
};

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

/// The kinds of record, the low three bits of its first byte.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Record {
    /// A frame as given: a flags byte (bit 0: repair checksums; bit 1: hand it over as a
    /// sibling worker would, checksums trusted), a length (u16) and the bytes.
    Raw = 0,
    /// A segment on the tracked connection: flags, offsets from the expected sequence
    /// and acknowledgment numbers, window, payload length, options.
    Segment = 1,
    /// Advance the clock (the record's second byte: 6 bits of count, 2 of unit).
    Advance = 2,
    /// Change what the handler does, or call the engine's API.
    App = 3,
    /// An ICMP Echo Request with a payload of fuzzed length.
    Ping = 4,
    /// An ARP packet from fuzzed addresses.
    Arp = 5,
}

impl Record {
    pub(crate) fn from_tag(tag: u8) -> Option<Record> {
        Some(match tag & 7 {
            0 => Record::Raw,
            1 => Record::Segment,
            2 => Record::Advance,
            3 => Record::App,
            4 => Record::Ping,
            5 => Record::Arp,
            _ => return None,
        })
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

struct Bench {
    clock: VirtualClock,
    wire: MemoryLink,
    eng: Engine<MemoryLink, Fuzzy, VirtualClock>,
    mtu: usize,
    peer: Option<Peer>,
    rx: Vec<memory::MemFrame>,
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
        let mut bench = Bench {
            clock,
            wire,
            eng,
            mtu,
            peer: None,
            rx: Vec::new(),
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
        self.wire.receive(&mut self.rx, usize::MAX);
        for frame in self.rx.drain(..) {
            if let Sent::Tcp { dst, seg } = check_sent(&frame, self.mtu) {
                if dst == PEER_IP {
                    segs.push(seg);
                }
            }
        }
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

    fn send(&mut self, frame: &[u8]) -> Vec<Segment> {
        self.inject(frame);
        self.poll()
    }

    fn inject(&mut self, frame: &[u8]) {
        // The link refuses frames over its MTU: it is a device, it cannot receive them.
        if let Some(mut buf) = self.wire.alloc_tx(frame.len()) {
            buf.copy_from_slice(frame);
            self.wire.transmit(&mut vec![buf]);
        }
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

    /// The peer connects to the engine's listener.
    fn open_passive(&mut self, isn: SeqNum, full: bool) {
        let syn = self.syn(isn, full);
        let out = self.send(&tcp_frame(PEER_PORT, PORT, &syn, &[]));
        let Some(sa) = out.iter().find(|s| s.flags.syn && s.flags.ack) else {
            return;
        };
        let peer = Peer {
            port: PEER_PORT,
            host_port: PORT,
            snd_nxt: isn + 1,
            rcv_nxt: sa.seq + 1,
            ts: full && sa.timestamp.is_some(),
            ts_recent: sa.timestamp.map_or(0, |t| t.0),
        };
        self.peer = Some(peer);
        let ack = self.peer_seg(&peer);
        self.send(&tcp_frame(peer.port, peer.host_port, &ack, &[]));
    }

    /// The engine connects to the peer, whose MAC it already knows.
    fn open_active(&mut self, isn: SeqNum, full: bool) {
        self.eng.import_arp(PEER_IP.into(), PEER_MAC);
        if self
            .eng
            .connect(SocketAddr::from((PEER_IP, PEER_PORT)), ())
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
            port: PEER_PORT,
            host_port: syn.src_port,
            snd_nxt: isn + 1,
            rcv_nxt: syn.seq + 1,
            ts: sa.timestamp.is_some(),
            ts_recent: syn.timestamp.map_or(0, |t| t.0),
        };
        self.peer = Some(peer);
        self.send(&tcp_frame(peer.port, peer.host_port, &sa, &[]));
    }

    fn raw(&mut self, input: &mut Input<'_>) {
        let flags = input.u8();
        let len = usize::from(input.u16()) % 2048;
        let mut frame = input.bytes(len).to_vec();
        if flags & 1 != 0 {
            fix_checksums(&mut frame);
        }
        if flags & 2 != 0 {
            self.eng.inject_frames([frame]);
            self.drain();
        } else {
            self.send(&frame);
        }
    }

    fn segment(&mut self, tag: u8, input: &mut Input<'_>) {
        let flags = input.u8();
        let seq_off = input.u16() as i16;
        let ack_off = input.u16() as i16;
        let window = input.u16();
        let len = usize::from(input.u16()) % 3000;
        let opts = input.u8();
        let base = self.peer.unwrap_or(Peer {
            port: PEER_PORT + 1,
            host_port: PORT,
            snd_nxt: SeqNum(1),
            rcv_nxt: SeqNum(0),
            ts: false,
            ts_recent: 0,
        });
        let mut seg = self.peer_seg(&base);
        seg.seq = SeqNum(base.snd_nxt.0.wrapping_add_signed(i32::from(seq_off)));
        seg.ack = (flags & 1 == 0)
            .then(|| SeqNum(base.rcv_nxt.0.wrapping_add_signed(i32::from(ack_off))));
        seg.syn = flags & 2 != 0;
        seg.fin = flags & 4 != 0;
        seg.rst = flags & 8 != 0;
        seg.psh = flags & 16 != 0;
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
        self.send(&tcp_frame(port, base.host_port, &seg, &payload));
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
                // An active open through the handler's opener, to a port of the peer.
                let port = u16::from(b >> 2) + 1;
                self.eng.import_arp(PEER_IP.into(), PEER_MAC);
                self.eng.handler_mut().open = Some(SocketAddr::from((PEER_IP, port)));
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
    let mut input = Input::new(data);
    let header = input.u8();
    let mut bench = Bench::new(header);
    if header & OPEN != 0 {
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
            Some(Record::Raw) => bench.raw(&mut input),
            Some(Record::Segment) => bench.segment(tag, &mut input),
            Some(Record::Advance) => bench.advance(&mut input),
            Some(Record::App) => bench.app(&mut input),
            Some(Record::Ping) => bench.ping(tag, &mut input),
            Some(Record::Arp) => bench.arp(tag, &mut input),
            None => {
                bench.poll();
            }
        }
    }
    // Whatever came before, the engine still answers a ping from a known neighbour.
    bench.eng.import_arp(PEER_IP.into(), PEER_MAC);
    bench.inject(&echo_request(0xbeef, 9, b"alive?"));
    bench.eng.poll();
    let mut replied = false;
    bench.wire.receive(&mut bench.rx, usize::MAX);
    for frame in bench.rx.drain(..) {
        if let Sent::EchoReply { data } = check_sent(&frame, bench.mtu) {
            replied |= data == b"alive?";
        }
    }
    assert!(replied, "the engine no longer answers a ping");
}

/// Writes inputs for [`engine_frame`] record by record (the seed corpus is built with
/// it), so the format lives in this file only.
pub(crate) struct Script(Vec<u8>);

impl Script {
    /// A script starting with `header`; with [`OPEN`] in it, `isn` is the peer's ISN.
    pub(crate) fn new(header: u8, isn: u32) -> Script {
        let mut s = vec![header];
        if header & OPEN != 0 {
            s.extend_from_slice(&isn.to_le_bytes());
        }
        Script(s)
    }

    pub(crate) fn raw(mut self, flags: u8, frame: &[u8]) -> Script {
        let len = u16::try_from(frame.len()).expect("frame under 64 KiB");
        self.0.extend_from_slice(&[Record::Raw as u8, flags]);
        self.0.extend_from_slice(&len.to_le_bytes());
        self.0.extend_from_slice(frame);
        self
    }

    /// A segment record; `extra` follows the option byte (a SACK block's offset and
    /// length when `opts` asks for one).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn segment(
        mut self,
        tag_bits: u8,
        flags: u8,
        seq_off: i16,
        ack_off: i16,
        window: u16,
        len: u16,
        opts: u8,
        extra: &[u8],
    ) -> Script {
        self.0.push(Record::Segment as u8 | tag_bits << 3);
        self.0.push(flags);
        self.0.extend_from_slice(&seq_off.to_le_bytes());
        self.0.extend_from_slice(&ack_off.to_le_bytes());
        self.0.extend_from_slice(&window.to_le_bytes());
        self.0.extend_from_slice(&len.to_le_bytes());
        self.0.push(opts);
        self.0.extend_from_slice(extra);
        self
    }

    /// In-order data (or nothing) acknowledging everything, with `flags` (see
    /// [`Bench::segment`]).
    pub(crate) fn data(self, flags: u8, len: u16) -> Script {
        self.segment(0, flags, 0, 0, 65535, len, 0, &[])
    }

    pub(crate) fn advance(mut self, b: u8) -> Script {
        self.0.extend_from_slice(&[Record::Advance as u8, b]);
        self
    }

    pub(crate) fn app(mut self, b: u8) -> Script {
        self.0.extend_from_slice(&[Record::App as u8, b]);
        self
    }

    pub(crate) fn mode(self, index: u8) -> Script {
        self.app(index << 2)
    }

    pub(crate) fn ping(mut self, len: u16) -> Script {
        self.0.push(Record::Ping as u8);
        self.0.extend_from_slice(&len.to_le_bytes());
        self
    }

    pub(crate) fn arp(mut self, tag_bits: u8, mac: u8, sender: u8, target: u8) -> Script {
        self.0
            .extend_from_slice(&[Record::Arp as u8 | tag_bits << 3, mac, sender, target]);
        self
    }

    pub(crate) fn finish(self) -> Vec<u8> {
        self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rusty_stack::TcpState as State;

    fn established(bench: &Bench) -> bool {
        bench
            .eng
            .connection_states()
            .any(|(r, s)| r.port() == PEER_PORT && s == State::Established)
    }

    /// The handshakes the target builds itself work, so fuzzed segments reach a
    /// synchronized connection, and in-order data is echoed and acknowledged.
    #[test]
    fn handshakes_reach_established_and_data_is_echoed() {
        for header in [
            OPEN,
            OPEN | FULL_OPTIONS,
            OPEN | ACTIVE,
            OPEN | ACTIVE | FULL_OPTIONS,
        ] {
            let mut bench = Bench::new(header);
            if header & ACTIVE != 0 {
                bench.open_active(SeqNum(u32::MAX), header & FULL_OPTIONS != 0);
            } else {
                bench.open_passive(SeqNum(u32::MAX), header & FULL_OPTIONS != 0);
            }
            assert!(established(&bench), "header {header:#x}");
            let before = bench.peer.expect("tracked").rcv_nxt;
            let script = Script::new(0, 0).data(16, 100).finish();
            bench.segment(script[1], &mut Input::new(&script[2..]));
            let peer = bench.peer.expect("tracked");
            assert_eq!(peer.rcv_nxt, before + 100, "echo of 100 bytes");
            assert_eq!(peer.snd_nxt, SeqNum(100), "{header:#x}");
        }
    }
}
