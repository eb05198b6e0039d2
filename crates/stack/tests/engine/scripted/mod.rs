//! Scripted segment tests: the test plays the peer on the wire. It writes exact Ethernet
//! frames into one end of an in-memory link, an [`Engine`] on virtual time sits on the
//! other end, and every frame the engine sends back is parsed and checked field by field,
//! one test per RFC rule. The rules are grouped a file a topic: SYN cookies, segments for
//! no connection, ARP, ICMP, malformed input, the handshake, TIME-WAIT, RFC 5961
//! challenge ACKs, aborts inside callbacks, orphans, hostile addressing (`martians`),
//! memory a peer can pin (`pinning`), counts that replaced scans (`limits`) and
//! neighbour unreachability detection (`nud`; IPv6's in `ipv6/nud.rs`). The
//! application, the frame builders and parsers and the peer they share are here.
//!
//! The peer builds its frames with smoltcp's wire types (Ethernet, ARP, IPv4, ICMP) and
//! TCP headers with [`TxSegment::write_header`] plus a checksum computed here, so a bug in
//! the engine's own frame writer cannot hide in both directions at once.

mod aborts;
mod arp;
mod challenge_acks;
mod cookies;
mod handshake;
mod icmp;
mod ipv6;
mod limits;
mod malformed;
mod martians;
mod no_connection;
mod nud;
mod orphans;
mod pinning;
mod time_wait;

use std::net::{Ipv4Addr, SocketAddr};
use std::time::Duration;

use proptest::prelude::*;
use smoltcp::phy::ChecksumCapabilities;
use smoltcp::wire::{
    ArpOperation, ArpPacket, ArpRepr, EthernetAddress, EthernetFrame, EthernetRepr, Icmpv4Packet,
    Icmpv4Repr, IpAddress, Ipv4Packet, Ipv4Repr, TcpPacket, TcpRepr,
};

use rusty_stack::app::CloseReason;
use rusty_stack::app::{Conn, ConnectError, Opener};
use rusty_stack::checksum;
use rusty_stack::engine::*;
use rusty_stack::internals::decode_ts_options;
use rusty_stack::internals::ethernet::{self, EthernetHeader, EthernetProtocol};
use rusty_stack::internals::ipv4::{self, IpProtocol, Ipv4Header};
use rusty_stack::internals::SeqNum;
use rusty_stack::internals::{Flow, FlowKey, Segment, TxSegment};
use rusty_stack::io::{Capabilities, ChecksumOffload, MacAddr, PacketIo, ETHERNET_HEADER_LEN};
use rusty_stack::time::{Clock, VirtualClock};
use rusty_stack::DropReason;
use rusty_stack::{ConnId, Handler, Stats, TcpState as State};
use rusty_testkit::memory::{self, MemoryLink};
use rusty_testkit::sim;

const PEER_IP: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
const HOST_IP: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);
const PEER_MAC: MacAddr = MacAddr([0x02, 0, 0, 0, 0, 0x01]);
const HOST_MAC: MacAddr = MacAddr([0x02, 0, 0, 0, 0, 0x02]);
/// The port the engine listens on.
const PORT: u16 = 80;

// ----- The application -----

/// Records every callback; optionally echoes, refuses, or answers and closes.
#[derive(Default)]
struct Recorder {
    /// `accept` returns `None`.
    refuse: bool,
    /// Send back whatever arrives.
    echo: bool,
    /// On data: send these bytes, then close (the engine closes first).
    reply_and_close: Option<Vec<u8>>,
    /// On data: consume nothing (pause receiving).
    pause: bool,
    /// On data: abort the connection and consume nothing.
    abort_on_data: bool,
    /// Calls of `data`.
    data_calls: usize,
    /// The id of every connection, from `connected`.
    ids: Vec<ConnId>,
    accepted: Vec<SocketAddr>,
    connected: Vec<SocketAddr>,
    received: Vec<u8>,
    peer_closed: usize,
    closed: Vec<CloseReason>,
    /// Active opens asked for from the next `poll`.
    dial: Vec<SocketAddr>,
    /// Why active opens could not start (`connect_failed`).
    connect_failures: Vec<ConnectError>,
}

impl Handler for Recorder {
    type Conn = ();

    fn accept(&mut self, _local: std::net::SocketAddr, remote: std::net::SocketAddr) -> Option<()> {
        self.accepted.push(remote);
        (!self.refuse).then_some(())
    }
    fn connected(&mut self, conn: &mut Conn<'_, ()>) {
        self.connected.push(conn.peer_addr());
        self.ids.push(conn.id());
    }
    fn data(&mut self, conn: &mut Conn<'_, ()>, data: &[u8]) -> usize {
        self.data_calls += 1;
        if self.abort_on_data {
            conn.abort();
            return 0;
        }
        if self.pause {
            return 0;
        }
        self.received.extend_from_slice(data);
        if self.echo {
            let n = conn.send(data).unwrap_or(0);
            assert_eq!(n, data.len(), "echo did not fit the send buffer");
        }
        if let Some(reply) = &self.reply_and_close {
            let _ = conn.send(reply);
            conn.close();
        }
        data.len()
    }
    fn peer_closed(&mut self, _conn: &mut Conn<'_, ()>) {
        self.peer_closed += 1;
    }
    fn closed(&mut self, _: &mut Opener<'_, ()>, _: (), reason: CloseReason) {
        self.closed.push(reason);
    }
    fn poll(&mut self, opener: &mut Opener<'_, ()>) {
        for remote in self.dial.drain(..) {
            opener.connect(remote, ());
        }
    }
    fn connect_failed(&mut self, _: &mut Opener<'_, ()>, _: SocketAddr, _: (), e: ConnectError) {
        self.connect_failures.push(e);
    }
}

fn echo() -> Recorder {
    Recorder {
        echo: true,
        ..Default::default()
    }
}

// ----- What the engine sends -----

/// One frame the engine transmitted.
#[derive(Clone)]
struct Frame(Vec<u8>);

impl std::fmt::Debug for Frame {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if let Some(t) = self.tcp() {
            write!(f, "{t:?}")
        } else if let Some(a) = self.arp() {
            write!(f, "{a:?}")
        } else {
            write!(f, "Frame({} bytes)", self.0.len())
        }
    }
}

/// A TCP segment the engine sent, parsed with checksums verified.
#[derive(Debug, Clone)]
struct TcpOut {
    eth: EthernetHeader,
    ip: Ipv4Header,
    seg: Segment,
    /// SACK blocks (RFC 2018 §3), which [`Segment`] does not keep.
    sack: Vec<(u32, u32)>,
    payload: Vec<u8>,
}

impl TcpOut {
    fn is_rst(&self) -> bool {
        self.seg.flags.rst
    }
    fn is_syn_ack(&self) -> bool {
        self.seg.flags.syn && self.seg.flags.ack
    }
    /// A segment with no payload and no SYN/FIN/RST.
    fn is_pure_ack(&self) -> bool {
        let f = self.seg.flags;
        f.ack && !f.syn && !f.fin && !f.rst && self.payload.is_empty()
    }
    fn tsval(&self) -> u32 {
        self.seg.timestamp.expect("timestamp option").0
    }
}

impl Frame {
    fn eth(&self) -> EthernetHeader {
        ethernet::parse(&self.0)
            .expect("engine sent a runt frame")
            .0
    }

    /// The IPv4 packet, with its header checksum verified.
    fn ipv4(&self) -> Option<(Ipv4Header, &[u8])> {
        let (eth, payload) = ethernet::parse(&self.0).ok()?;
        if eth.ethertype != EthernetProtocol::Ipv4 {
            return None;
        }
        let dst = Ipv4Packet::new_checked(payload).ok()?.dst_addr();
        let local = ipv4::Local::new(dst, 32);
        Some(ipv4::parse(payload, local, false).expect("engine sent a bad IPv4 header"))
    }

    fn tcp(&self) -> Option<TcpOut> {
        let (ip, l4) = self.ipv4()?;
        if ip.protocol != IpProtocol::Tcp {
            return None;
        }
        let (seg, payload) =
            Segment::parse(l4, ip.src, ip.dst, false).expect("engine sent a bad TCP segment");
        let (s, d) = (IpAddress::Ipv4(ip.src), IpAddress::Ipv4(ip.dst));
        let repr = TcpRepr::parse(
            &TcpPacket::new_checked(l4).expect("parsed above"),
            &s,
            &d,
            &ChecksumCapabilities::ignored(),
        )
        .expect("parsed above");
        Some(TcpOut {
            eth: self.eth(),
            ip,
            seg,
            sack: repr
                .sack_ranges
                .iter()
                .flatten()
                .map(|&(l, r)| (l, r))
                .collect(),
            payload: payload.to_vec(),
        })
    }

    fn arp(&self) -> Option<ArpRepr> {
        let (eth, payload) = ethernet::parse(&self.0).ok()?;
        if eth.ethertype != EthernetProtocol::Arp {
            return None;
        }
        let packet = ArpPacket::new_checked(payload).expect("engine sent a short ARP packet");
        Some(ArpRepr::parse(&packet).expect("engine sent a bad ARP packet"))
    }

    /// (IPv4 header, ident, seq_no, data) of an ICMP echo reply, checksum verified.
    fn echo_reply(&self) -> Option<(Ipv4Header, u16, u16, Vec<u8>)> {
        let (ip, l4) = self.ipv4()?;
        if ip.protocol != IpProtocol::Icmp {
            return None;
        }
        let packet = Icmpv4Packet::new_checked(l4).expect("short ICMP");
        match Icmpv4Repr::parse(&packet, &ChecksumCapabilities::default()) {
            Ok(Icmpv4Repr::EchoReply {
                ident,
                seq_no,
                data,
            }) => Some((ip, ident, seq_no, data.to_vec())),
            other => panic!("unexpected ICMP from the engine: {other:?}"),
        }
    }
}

fn tcp_of(frames: &[Frame]) -> Vec<TcpOut> {
    frames.iter().filter_map(Frame::tcp).collect()
}

// ----- What the peer sends -----

/// An Ethernet frame from `src` to `dst`, padded to the 60-byte minimum as a NIC would.
fn eth_frame(src: MacAddr, dst: MacAddr, ethertype: EthernetProtocol, payload: &[u8]) -> Vec<u8> {
    let repr = EthernetRepr {
        src_addr: EthernetAddress(src.0),
        dst_addr: EthernetAddress(dst.0),
        ethertype,
    };
    let len = (repr.buffer_len() + payload.len()).max(60);
    let mut buf = vec![0u8; len];
    repr.emit(&mut EthernetFrame::new_unchecked(&mut buf[..]));
    buf[repr.buffer_len()..repr.buffer_len() + payload.len()].copy_from_slice(payload);
    buf
}

/// An IPv4 datagram from `src` to the engine.
fn ipv4_frame(src_mac: MacAddr, src: Ipv4Addr, protocol: IpProtocol, l4: &[u8]) -> Vec<u8> {
    ipv4_frame_to(src_mac, HOST_MAC, src, HOST_IP, protocol, l4)
}

/// An IPv4 datagram from `src` to `dst` in a frame from `src_mac` to `dst_mac`.
fn ipv4_frame_to(
    src_mac: MacAddr,
    dst_mac: MacAddr,
    src: Ipv4Addr,
    dst: Ipv4Addr,
    protocol: IpProtocol,
    l4: &[u8],
) -> Vec<u8> {
    let repr = Ipv4Repr {
        src_addr: src,
        dst_addr: dst,
        next_header: protocol,
        payload_len: l4.len(),
        hop_limit: 64,
    };
    let mut ip = vec![0u8; repr.buffer_len() + l4.len()];
    repr.emit(
        &mut Ipv4Packet::new_unchecked(&mut ip[..]),
        &ChecksumCapabilities::default(),
    );
    ip[repr.buffer_len()..].copy_from_slice(l4);
    eth_frame(src_mac, dst_mac, EthernetProtocol::Ipv4, &ip)
}

/// A TCP segment (header from `seg`, then `payload`) with a correct checksum.
fn tcp_bytes(
    src: Ipv4Addr,
    src_port: u16,
    dst_port: u16,
    seg: &TxSegment,
    payload: &[u8],
) -> Vec<u8> {
    tcp_bytes_to(src, HOST_IP, src_port, dst_port, seg, payload)
}

/// [`tcp_bytes`] for a segment to `dst`, of either family.
fn tcp_bytes_to(
    src: impl Into<std::net::IpAddr>,
    dst: impl Into<std::net::IpAddr>,
    src_port: u16,
    dst_port: u16,
    seg: &TxSegment,
    payload: &[u8],
) -> Vec<u8> {
    let hl = seg.header_len();
    let mut tcp = vec![0u8; hl + payload.len()];
    seg.write_header(&mut tcp[..hl], src_port, dst_port);
    tcp[hl..].copy_from_slice(payload);
    let pseudo = rusty_stack::internals::pseudo_header_sum(src, dst, tcp.len() as u16);
    let c = checksum::finish(checksum::combine(pseudo, checksum::sum(&tcp)));
    tcp[16..18].copy_from_slice(&c.to_be_bytes());
    tcp
}

fn tcp_frame_from(
    mac: MacAddr,
    ip: Ipv4Addr,
    src_port: u16,
    dst_port: u16,
    seg: &TxSegment,
    payload: &[u8],
) -> Vec<u8> {
    let tcp = tcp_bytes(ip, src_port, dst_port, seg, payload);
    ipv4_frame(mac, ip, IpProtocol::Tcp, &tcp)
}

/// A segment from the default peer to the engine's listening port.
fn tcp_frame(src_port: u16, seg: &TxSegment, payload: &[u8]) -> Vec<u8> {
    tcp_frame_from(PEER_MAC, PEER_IP, src_port, PORT, seg, payload)
}

fn arp_frame(
    eth_dst: MacAddr,
    operation: ArpOperation,
    sender: (MacAddr, Ipv4Addr),
    target: (MacAddr, Ipv4Addr),
) -> Vec<u8> {
    let repr = ArpRepr::EthernetIpv4 {
        operation,
        source_hardware_addr: EthernetAddress(sender.0 .0),
        source_protocol_addr: sender.1,
        target_hardware_addr: EthernetAddress(target.0 .0),
        target_protocol_addr: target.1,
    };
    let mut arp = vec![0u8; repr.buffer_len()];
    repr.emit(&mut ArpPacket::new_unchecked(&mut arp[..]));
    eth_frame(sender.0, eth_dst, EthernetProtocol::Arp, &arp)
}

fn echo_request(ident: u16, seq_no: u16, data: &[u8]) -> Vec<u8> {
    ipv4_frame(
        PEER_MAC,
        PEER_IP,
        IpProtocol::Icmp,
        &icmp_echo(ident, seq_no, data),
    )
}

/// An ICMP Echo Request message.
fn icmp_echo(ident: u16, seq_no: u16, data: &[u8]) -> Vec<u8> {
    let repr = Icmpv4Repr::EchoRequest {
        ident,
        seq_no,
        data,
    };
    let mut icmp = vec![0u8; repr.buffer_len()];
    repr.emit(
        &mut Icmpv4Packet::new_unchecked(&mut icmp[..]),
        &ChecksumCapabilities::default(),
    );
    icmp
}

fn pattern(n: usize, seed: u8) -> Vec<u8> {
    (0..n)
        .map(|i| (i as u8).wrapping_mul(7).wrapping_add(seed))
        .collect()
}

// ----- The test bench -----

/// The engine on one end of an in-memory link; the test holds the other end.
struct Net {
    clock: VirtualClock,
    wire: MemoryLink,
    eng: Engine<MemoryLink, Recorder, VirtualClock>,
    /// What the engine sent on its first loop turn.
    boot: Vec<Frame>,
}

fn config() -> EngineConfig {
    sim::engine_config(HOST_IP, 7)
}

/// The gateway of the engine's subnet, and a peer beyond it.
const GATEWAY: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 254);
const GATEWAY_MAC: MacAddr = MacAddr([0x02, 0, 0, 0, 0, 0xfe]);
const FAR: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 10);

/// An echo engine that sends to off-link addresses through [`GATEWAY`].
fn gateway_net() -> Net {
    let mut cfg = config();
    cfg.gateway = Some(GATEWAY);
    Net::new(cfg, echo())
}

/// The ARP requests among `frames`: (Ethernet destination, target address).
fn arp_requests(frames: &[Frame]) -> Vec<(MacAddr, Ipv4Addr)> {
    frames
        .iter()
        .filter_map(|f| match f.arp() {
            Some(ArpRepr::EthernetIpv4 {
                operation: ArpOperation::Request,
                target_protocol_addr,
                ..
            }) => Some((f.eth().dst, target_protocol_addr)),
            _ => None,
        })
        .collect()
}

impl Net {
    fn new(cfg: EngineConfig, handler: Recorder) -> Net {
        Net::with_caps(
            cfg,
            handler,
            Capabilities::new(PEER_MAC, 1500),
            Capabilities::new(HOST_MAC, 1500),
        )
    }

    /// The peer's end of the link reports `wire`, the engine's `dev`.
    fn with_caps(
        cfg: EngineConfig,
        handler: Recorder,
        wire: Capabilities,
        dev: Capabilities,
    ) -> Net {
        let clock = VirtualClock::new();
        let (wire, dev) = memory::pair(wire, dev);
        let eng = Engine::new(dev, handler, clock.clone(), cfg);
        let mut net = Net {
            clock,
            wire,
            eng,
            boot: Vec::new(),
        };
        net.boot = net.poll();
        net
    }

    fn inject(&mut self, frame: &[u8]) {
        let mut buf = self.wire.alloc_tx(frame.len()).expect("wire buffer");
        buf.copy_from_slice(frame);
        self.wire.transmit(&mut vec![buf]);
    }

    /// One engine loop turn; returns what it sent.
    fn poll(&mut self) -> Vec<Frame> {
        self.eng.poll();
        let mut rx = Vec::new();
        self.wire.receive(&mut rx, usize::MAX);
        rx.iter().map(|f| Frame(f.to_vec())).collect()
    }

    /// Send one frame and return the engine's answer (one loop turn).
    fn send(&mut self, frame: &[u8]) -> Vec<Frame> {
        self.inject(frame);
        self.poll()
    }

    fn advance(&mut self, d: Duration) -> Vec<Frame> {
        self.clock.advance(d);
        self.poll()
    }

    /// Let `total` pass in steps of `step`, polling after each; returns all that was sent.
    fn run_for(&mut self, total: Duration, step: Duration) -> Vec<Frame> {
        let mut out = Vec::new();
        let end = self.clock.now() + total;
        while self.clock.now() < end {
            out.extend(self.advance(step));
        }
        out
    }

    /// [`run_for`](Self::run_for), the peer answering ARP requests for its address,
    /// as a host on the link does (its NIC answers while its TCP is silent), with a
    /// reply unicast to us. The replies' answers are in what is returned.
    fn run_for_answering_arp(&mut self, total: Duration, step: Duration) -> Vec<Frame> {
        let mut out = Vec::new();
        let end = self.clock.now() + total;
        let reply = arp_frame(
            HOST_MAC,
            ArpOperation::Reply,
            (PEER_MAC, PEER_IP),
            (HOST_MAC, HOST_IP),
        );
        while self.clock.now() < end {
            let sent = self.advance(step);
            let asked = sent.iter().any(|f| {
                matches!(f.arp(), Some(ArpRepr::EthernetIpv4 {
                    operation: ArpOperation::Request,
                    target_protocol_addr,
                    ..
                }) if target_protocol_addr == PEER_IP)
            });
            out.extend(sent);
            if asked {
                out.extend(self.send(&reply));
            }
        }
        out
    }

    fn stats(&self) -> &Stats {
        self.eng.stats()
    }

    fn handler(&self) -> &Recorder {
        self.eng.handler()
    }

    fn dropped(&self, r: DropReason) -> u64 {
        self.stats().dropped(r)
    }

    /// The peer's timestamp clock: milliseconds of virtual time plus a base, so it is
    /// never zero and only moves forward.
    fn peer_tsval(&self) -> u32 {
        self.clock.now().as_millis() as u32 + 1_000_000
    }
}

/// Options the peer's SYN carries.
#[derive(Debug, Clone, Copy)]
struct SynOpts {
    mss: Option<u16>,
    wscale: Option<u8>,
    sack: bool,
    ts: bool,
}

/// What a Linux peer offers.
const FULL: SynOpts = SynOpts {
    mss: Some(1460),
    wscale: Some(7),
    sack: true,
    ts: true,
};

/// A SYN with no options at all.
const BARE: SynOpts = SynOpts {
    mss: None,
    wscale: None,
    sack: false,
    ts: false,
};

fn syn_seg(net: &Net, isn: SeqNum, o: SynOpts) -> TxSegment {
    TxSegment {
        seq: isn,
        syn: true,
        window: 65535,
        mss: o.mss,
        wscale: o.wscale,
        sack_permitted: o.sack,
        timestamp: o.ts.then(|| (net.peer_tsval(), 0)),
        ..Default::default()
    }
}

fn send_syn(net: &mut Net, port: u16, isn: SeqNum, o: SynOpts) -> Vec<TcpOut> {
    let frame = tcp_frame(port, &syn_seg(net, isn, o), &[]);
    tcp_of(&net.send(&frame))
}

/// The peer's side of one connection.
#[derive(Debug, Clone, Copy)]
struct PeerConn {
    mac: MacAddr,
    ip: Ipv4Addr,
    /// The peer's port.
    port: u16,
    /// The engine's port.
    host_port: u16,
    /// The peer's next sequence number.
    snd_nxt: SeqNum,
    /// The engine's next sequence number: what the peer acknowledges.
    rcv_nxt: SeqNum,
    /// The window field the peer sends.
    window: u16,
    ts: bool,
    /// The engine's latest TSval, echoed as TSecr.
    ts_recent: u32,
}

impl PeerConn {
    /// The peer side after `syn_ack` answered a SYN with sequence number `isn`.
    fn after_syn_ack(port: u16, isn: SeqNum, o: SynOpts, syn_ack: &TcpOut) -> PeerConn {
        PeerConn {
            mac: PEER_MAC,
            ip: PEER_IP,
            port,
            host_port: PORT,
            snd_nxt: isn + 1,
            rcv_nxt: syn_ack.seg.seq + 1,
            window: 65535,
            ts: o.ts,
            ts_recent: syn_ack.seg.timestamp.map_or(0, |t| t.0),
        }
    }

    /// An ACK-carrying segment at `snd_nxt`.
    fn seg(&self, net: &Net) -> TxSegment {
        TxSegment {
            seq: self.snd_nxt,
            ack: Some(self.rcv_nxt),
            window: self.window,
            timestamp: self.ts.then(|| (net.peer_tsval(), self.ts_recent)),
            ..Default::default()
        }
    }

    /// Send `seg` + `payload`; track what the engine sends back on this connection.
    fn send(&mut self, net: &mut Net, seg: &TxSegment, payload: &[u8]) -> Vec<TcpOut> {
        let frame = tcp_frame_from(self.mac, self.ip, self.port, self.host_port, seg, payload);
        let out = tcp_of(&net.send(&frame));
        self.observe(&out);
        out
    }

    /// Follow the engine's sequence space and timestamps in `segs`.
    fn observe(&mut self, segs: &[TcpOut]) {
        for s in segs
            .iter()
            .filter(|s| s.seg.dst_port == self.port && !s.is_rst())
        {
            if let Some((tsval, _)) = s.seg.timestamp {
                self.ts_recent = tsval;
            }
            let end = s.seg.seq + s.seg.seg_len();
            if end > self.rcv_nxt {
                self.rcv_nxt = end;
            }
        }
    }

    fn ack(&mut self, net: &mut Net) -> Vec<TcpOut> {
        let seg = self.seg(net);
        self.send(net, &seg, &[])
    }

    fn data(&mut self, net: &mut Net, payload: &[u8]) -> Vec<TcpOut> {
        let mut seg = self.seg(net);
        seg.psh = true;
        self.snd_nxt += payload.len();
        self.send(net, &seg, payload)
    }

    fn fin(&mut self, net: &mut Net) -> Vec<TcpOut> {
        let mut seg = self.seg(net);
        seg.fin = true;
        self.snd_nxt += 1;
        self.send(net, &seg, &[])
    }

    fn rst(&mut self, net: &mut Net, seq: SeqNum) -> Vec<TcpOut> {
        let seg = TxSegment {
            seq,
            rst: true,
            ..Default::default()
        };
        self.send(net, &seg, &[])
    }
}

/// A full passive-open handshake from the peer's `port`; asserts the SYN-ACK.
fn connect_peer(net: &mut Net, port: u16, isn: SeqNum, o: SynOpts) -> PeerConn {
    let out = send_syn(net, port, isn, o);
    assert_eq!(out.len(), 1, "SYN answered by {out:?}");
    let sa = &out[0];
    assert!(sa.is_syn_ack(), "{sa:?}");
    assert_eq!(sa.seg.ack, isn + 1);
    let mut pc = PeerConn::after_syn_ack(port, isn, o, sa);
    let out = pc.ack(net);
    assert!(out.is_empty(), "handshake ACK answered by {out:?}");
    pc
}

/// Bring a connection from `port` to TIME-WAIT with the engine closing first; returns the
/// peer side after its FIN was acknowledged.
fn close_into_time_wait(net: &mut Net, port: u16, isn: SeqNum, o: SynOpts) -> PeerConn {
    let mut pc = connect_peer(net, port, isn, o);
    // The handler answers "bye" and closes: data and FIN in one segment.
    let out = pc.data(net, b"hi");
    assert_eq!(out.len(), 1, "{out:?}");
    assert_eq!(out[0].payload, b"bye");
    assert!(out[0].seg.flags.fin);
    assert_eq!(out[0].seg.ack, pc.snd_nxt);
    // FIN-WAIT-1 → FIN-WAIT-2 on our ACK of its FIN.
    assert!(pc.ack(net).is_empty());
    assert!(net
        .eng
        .connection_states()
        .any(|(r, s)| r.port() == port && s == State::FinWait2));
    // Our FIN: the engine ACKs it and goes to TIME-WAIT.
    let out = pc.fin(net);
    assert_eq!(out.len(), 1, "{out:?}");
    assert!(out[0].is_pure_ack());
    assert_eq!(out[0].seg.ack, pc.snd_nxt);
    assert_eq!(out[0].seg.seq, pc.rcv_nxt);
    pc
}

/// An engine configured by `cfg`, listening on [`PORT`], whose handler answers "bye"
/// and closes.
fn bye_net(cfg: EngineConfig) -> Net {
    let mut net = Net::new(
        cfg,
        Recorder {
            reply_and_close: Some(b"bye".to_vec()),
            ..Default::default()
        },
    );
    net.eng.listen(PORT, 16);
    net
}

/// [`bye_net`] with a 10 s TIME-WAIT.
fn time_wait_net() -> Net {
    let mut cfg = config();
    cfg.tcp.time_wait = Duration::from_secs(10);
    bye_net(cfg)
}
