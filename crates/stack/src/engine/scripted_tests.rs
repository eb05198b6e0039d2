//! Scripted segment tests: the test plays the peer on the wire. It writes exact Ethernet
//! frames into one end of an in-memory link, an [`Engine`] on virtual time sits on the
//! other end, and every frame the engine sends back is parsed and checked field by field,
//! one test per RFC rule (SYN cookies, RSTs for closed ports, ARP, ICMP echo, malformed
//! input, TIME-WAIT, RFC 5961 challenge ACKs, refused accepts, connection limits).
//! Hostile addressing (martian sources, broadcasts, group MACs) has a file of its own,
//! `martians`, which uses the helpers here.
//!
//! The peer builds its frames with smoltcp's wire types (Ethernet, ARP, IPv4, ICMP) and
//! TCP headers with [`TxSegment::write_header`] plus a checksum computed here, so a bug in
//! the engine's own frame writer cannot hide in both directions at once.

use std::net::{Ipv4Addr, SocketAddrV4};
use std::time::Duration;

use proptest::prelude::*;
use smoltcp::phy::ChecksumCapabilities;
use smoltcp::wire::{
    ArpOperation, ArpPacket, ArpRepr, EthernetAddress, EthernetFrame, EthernetRepr, Icmpv4Packet,
    Icmpv4Repr, IpAddress, Ipv4Packet, Ipv4Repr, TcpPacket, TcpRepr,
};

use super::*;
use crate::app::CloseReason;
use crate::app::{Conn, ConnectError, Opener};
use crate::checksum;
use crate::drop::DropReason;
use crate::ethernet::EthernetHeader;
use crate::ethernet::{self, EthernetProtocol};
use crate::io::memory::{self, MemoryLink};
use crate::io::{Capabilities, ChecksumOffload, ETHERNET_HEADER_LEN};
use crate::ipv4::IpProtocol;
use crate::ipv4::Ipv4Header;
use crate::sim;
use crate::tcp::cookie;
use crate::tcp::segment::Segment;
use crate::tcp::seq::SeqNum;
use crate::time::VirtualClock;

const PEER_IP: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
const HOST_IP: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);
const PEER_MAC: MacAddr = EthernetAddress([0x02, 0, 0, 0, 0, 0x01]);
const HOST_MAC: MacAddr = EthernetAddress([0x02, 0, 0, 0, 0, 0x02]);
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
    accepted: Vec<SocketAddrV4>,
    connected: Vec<SocketAddrV4>,
    received: Vec<u8>,
    peer_closed: usize,
    closed: Vec<CloseReason>,
}

impl Handler for Recorder {
    type Conn = ();

    fn accept(&mut self, _local: SocketAddrV4, remote: SocketAddrV4) -> Option<()> {
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
        src_addr: src,
        dst_addr: dst,
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

/// [`tcp_bytes`] for a segment to `dst`.
fn tcp_bytes_to(
    src: Ipv4Addr,
    dst: Ipv4Addr,
    src_port: u16,
    dst_port: u16,
    seg: &TxSegment,
    payload: &[u8],
) -> Vec<u8> {
    let hl = seg.header_len();
    let mut tcp = vec![0u8; hl + payload.len()];
    seg.write_header(&mut tcp[..hl], src_port, dst_port);
    tcp[hl..].copy_from_slice(payload);
    let pseudo = checksum::pseudo_header_v4(src.octets(), dst.octets(), 6, tcp.len() as u16);
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
        source_hardware_addr: sender.0,
        source_protocol_addr: sender.1,
        target_hardware_addr: target.0,
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

// ----- 1. SYN cookies -----

#[test]
fn syn_cookies_when_backlog_overflows() {
    let cfg = config();
    let tcp = cfg.tcp.clone();
    let mut net = Net::new(cfg, echo());
    net.eng.listen(PORT, 1);

    // One half-open connection fills the backlog.
    let out = send_syn(&mut net, 40000, SeqNum(1000), FULL);
    assert_eq!(out.len(), 1);
    assert!(out[0].is_syn_ack());
    assert_eq!(net.eng.connection_count(), 1);
    assert_eq!(net.stats().syn_cookies_sent, 0);

    // Further SYNs are answered statelessly.
    let mut cookies = Vec::new();
    for (i, port) in (40001..40005u16).enumerate() {
        let isn = SeqNum(5000 + 1000 * i as u32);
        let sent_ts = net.peer_tsval();
        let out = send_syn(&mut net, port, isn, FULL);
        assert_eq!(out.len(), 1, "{out:?}");
        let sa = out[0].clone();
        assert!(sa.is_syn_ack(), "{sa:?}");
        assert_eq!(sa.seg.dst_port, port);
        assert_eq!(sa.ip.dst, PEER_IP);
        assert_eq!(sa.eth.dst, PEER_MAC);
        assert_eq!(sa.seg.ack, isn + 1);
        assert_eq!(sa.seg.mss, Some(1460));
        assert_eq!(sa.seg.wscale, Some(tcp.rcv_wscale()));
        assert!(sa.seg.sack_permitted);
        let (tsval, tsecr) = sa.seg.timestamp.expect("timestamps echoed");
        assert_eq!(tsecr, sent_ts);
        // Window scale 7 and SACK-permitted ride in the low bits of the TSval.
        assert_eq!(cookie::decode_ts_options(tsval), (Some(7), true));
        cookies.push((port, isn, sa));
    }
    assert_eq!(net.stats().syn_cookies_sent, 4);
    assert_eq!(
        net.eng.connection_count(),
        1,
        "cookies must not create blocks"
    );

    // The right ACK (SEG.ACK = cookie + 1) rebuilds the connection. The peer advertises a
    // window field of 4, i.e. 512 bytes with its window scale of 7.
    let (port, isn, sa) = cookies[0].clone();
    let mut pc = PeerConn::after_syn_ack(port, isn, FULL, &sa);
    pc.window = 4;
    let out = pc.ack(&mut net);
    assert!(out.is_empty(), "{out:?}");
    assert_eq!(net.stats().syn_cookies_accepted, 1);
    assert_eq!(net.eng.connection_count(), 2);
    assert_eq!(
        net.handler().accepted,
        vec![SocketAddrV4::new(PEER_IP, port)]
    );
    assert_eq!(
        net.handler().connected,
        vec![SocketAddrV4::new(PEER_IP, port)]
    );

    // Data both ways. The echo is bounded by the peer's scaled window: 4 << 7 = 512 bytes
    // (without the scale surviving the cookie it would be 4 bytes).
    let data = pattern(1000, 1);
    let out = pc.data(&mut net, &data);
    assert_eq!(net.handler().received, data);
    assert_eq!(out.len(), 1, "{out:?}");
    assert_eq!(out[0].seg.seq, sa.seg.seq + 1);
    assert_eq!(out[0].seg.ack, isn + 1 + 1000);
    assert_eq!(out[0].payload, data[..512]);
    // Our window scale survived too: the full 256 KiB buffer, scaled down.
    assert_eq!(
        usize::from(out[0].seg.window),
        tcp.recv_buffer >> tcp.rcv_wscale()
    );
    assert!(out[0].seg.timestamp.is_some());

    // Opening the window releases the rest.
    pc.window = 1000;
    let out = pc.ack(&mut net);
    assert_eq!(out.len(), 1, "{out:?}");
    assert_eq!(out[0].seg.seq, sa.seg.seq + 1 + 512);
    assert_eq!(out[0].payload, data[512..]);

    // SACK-permitted survived: out-of-order data is answered at once with a SACK block.
    let mut ooo = pc.seg(&net);
    ooo.seq = pc.snd_nxt + 100;
    let out = pc.send(&mut net, &ooo, &pattern(50, 2));
    assert_eq!(out.len(), 1, "{out:?}");
    assert!(out[0].is_pure_ack());
    assert_eq!(out[0].seg.ack, pc.snd_nxt);
    let left = pc.snd_nxt + 100;
    let right = pc.snd_nxt + 150;
    assert_eq!(out[0].sack, vec![(left.0, right.0)]);
    // Filling the gap delivers all 150 bytes in order.
    let gap = pattern(100, 3);
    let out = pc.data(&mut net, &gap);
    pc.snd_nxt += 50;
    let mut expect = gap.clone();
    expect.extend(pattern(50, 2));
    assert!(net.handler().received.ends_with(&expect));
    let echoed: Vec<u8> = out.iter().flat_map(|s| s.payload.clone()).collect();
    assert_eq!(echoed, expect);
    assert_eq!(out.last().map(|s| s.seg.ack), Some(pc.snd_nxt));
    assert!(out.iter().all(|s| s.sack.is_empty()));

    // A forged ACK (wrong cookie) gets a RST and no connection.
    let (port2, isn2, sa2) = cookies[1].clone();
    let mut forged = PeerConn::after_syn_ack(port2, isn2, FULL, &sa2);
    forged.rcv_nxt = sa2.seg.seq + 2;
    let out = forged.ack(&mut net);
    assert_eq!(out.len(), 1, "{out:?}");
    assert!(out[0].is_rst());
    assert!(!out[0].seg.flags.ack);
    assert_eq!(out[0].seg.seq, sa2.seg.seq + 2);
    assert_eq!(net.stats().syn_cookies_rejected, 1);
    assert_eq!(net.eng.connection_count(), 2);
    assert_eq!(net.handler().accepted.len(), 1);

    // The genuine ACK for that cookie still works.
    let mut pc2 = PeerConn::after_syn_ack(port2, isn2, FULL, &sa2);
    assert!(pc2.ack(&mut net).is_empty());
    assert_eq!(net.stats().syn_cookies_accepted, 2);
    assert_eq!(net.eng.connection_count(), 3);
}

#[test]
fn syn_cookie_without_timestamps_drops_window_scale_and_sack() {
    let mut net = Net::new(config(), echo());
    net.eng.listen(PORT, 1);
    let _half_open = send_syn(&mut net, 40000, SeqNum(1), FULL);
    let opts = SynOpts {
        mss: Some(1000),
        wscale: Some(7),
        sack: true,
        ts: false,
    };
    let out = send_syn(&mut net, 41000, SeqNum(777), opts);
    assert_eq!(out.len(), 1);
    let sa = out[0].clone();
    assert!(sa.is_syn_ack());
    assert_eq!(net.stats().syn_cookies_sent, 1);
    // Nothing to carry window scale or SACK in: neither is offered.
    assert_eq!(sa.seg.wscale, None);
    assert!(!sa.seg.sack_permitted);
    assert_eq!(sa.seg.timestamp, None);

    let mut pc = PeerConn::after_syn_ack(41000, SeqNum(777), opts, &sa);
    assert!(pc.ack(&mut net).is_empty());
    assert_eq!(net.stats().syn_cookies_accepted, 1);
    // The cookie rounded MSS 1000 down to 536; the unscaled window field is 65535.
    let data = pattern(1200, 9);
    let out = pc.data(&mut net, &data);
    let lens: Vec<usize> = out.iter().map(|s| s.payload.len()).collect();
    assert_eq!(lens, vec![536, 536, 128]);
    for s in &out {
        assert_eq!(s.seg.window, 65535);
        assert_eq!(s.seg.timestamp, None);
    }
}

// ----- 2. Segments for no connection -----

#[test]
fn closed_port_answers_with_rst() {
    let mut net = Net::new(config(), Recorder::default());
    net.eng.listen(PORT, 16);
    let closed = 81u16;

    // SYN: RST+ACK, SEQ 0, ACK = SEG.SEQ + SEG.LEN (RFC 9293 §3.10.7.1).
    let syn = syn_seg(&net, SeqNum(1000), FULL);
    let out = tcp_of(&net.send(&tcp_frame_from(PEER_MAC, PEER_IP, 40000, closed, &syn, &[])));
    assert_eq!(out.len(), 1, "{out:?}");
    let r = &out[0];
    assert!(r.is_rst() && r.seg.flags.ack && !r.seg.flags.syn);
    assert_eq!(r.seg.seq, SeqNum(0));
    assert_eq!(r.seg.ack, SeqNum(1001));
    assert_eq!((r.seg.src_port, r.seg.dst_port), (closed, 40000));
    assert_eq!((r.ip.src, r.ip.dst), (HOST_IP, PEER_IP));
    assert_eq!((r.eth.src, r.eth.dst), (HOST_MAC, PEER_MAC));
    assert!(r.payload.is_empty());
    assert_eq!(r.seg.mss, None);
    assert_eq!(r.seg.timestamp, None);
    assert_eq!(net.dropped(DropReason::NoListener), 1);
    assert_eq!(net.stats().rsts_sent, 1);

    // ACK: RST with SEQ = SEG.ACK and no ACK bit.
    let ack = TxSegment {
        seq: SeqNum(5),
        ack: Some(SeqNum(7777)),
        window: 100,
        ..Default::default()
    };
    let out = tcp_of(&net.send(&tcp_frame_from(
        PEER_MAC, PEER_IP, 40001, closed, &ack, b"xyz",
    )));
    assert_eq!(out.len(), 1, "{out:?}");
    assert!(out[0].is_rst() && !out[0].seg.flags.ack);
    assert_eq!(out[0].seg.seq, SeqNum(7777));
    assert_eq!(net.dropped(DropReason::NoConnection), 1);

    // FIN with data, no ACK bit: SEG.LEN counts the data and the FIN.
    let fin = TxSegment {
        seq: SeqNum(300),
        fin: true,
        ..Default::default()
    };
    let out = tcp_of(&net.send(&tcp_frame_from(
        PEER_MAC, PEER_IP, 40002, closed, &fin, b"abc",
    )));
    assert_eq!(out.len(), 1, "{out:?}");
    assert!(out[0].is_rst() && out[0].seg.flags.ack);
    assert_eq!(out[0].seg.ack, SeqNum(304));
    assert_eq!(net.dropped(DropReason::NoConnection), 2);

    // RST: never answered.
    let rst = TxSegment {
        seq: SeqNum(9),
        rst: true,
        ..Default::default()
    };
    assert!(net
        .send(&tcp_frame_from(PEER_MAC, PEER_IP, 40003, closed, &rst, &[]))
        .is_empty());
    let rst_ack = TxSegment {
        seq: SeqNum(9),
        ack: Some(SeqNum(10)),
        rst: true,
        ..Default::default()
    };
    assert!(net
        .send(&tcp_frame_from(
            PEER_MAC,
            PEER_IP,
            40003,
            closed,
            &rst_ack,
            &[]
        ))
        .is_empty());
    assert_eq!(net.dropped(DropReason::NoConnection), 4);
    assert_eq!(net.stats().rsts_sent, 3);

    // On the listening port, a stray ACK (no cookie matches) is also reset, a stray RST
    // is ignored.
    let out = tcp_of(&net.send(&tcp_frame(40004, &ack, &[])));
    assert_eq!(out.len(), 1);
    assert!(out[0].is_rst());
    assert_eq!(out[0].seg.seq, SeqNum(7777));
    assert!(net.send(&tcp_frame(40004, &rst, &[])).is_empty());
    assert_eq!(net.eng.connection_count(), 0);
}

// ----- 3. ARP -----

#[test]
fn arp_announce_answer_resolve_and_give_up() {
    let mut net = Net::new(config(), Recorder::default());

    // A gratuitous ARP at start (RFC 5227 §2.3).
    assert_eq!(net.boot.len(), 1, "{:?}", net.boot);
    assert_eq!(net.boot[0].eth().dst, MacAddr::BROADCAST);
    assert_eq!(net.boot[0].eth().src, HOST_MAC);
    assert_eq!(
        net.boot[0].arp(),
        Some(ArpRepr::EthernetIpv4 {
            operation: ArpOperation::Request,
            source_hardware_addr: HOST_MAC,
            source_protocol_addr: HOST_IP,
            target_hardware_addr: EthernetAddress([0; 6]),
            target_protocol_addr: HOST_IP,
        })
    );
    // Only once.
    assert!(net.advance(Duration::from_secs(1)).is_empty());

    // A request for our address is answered, unicast.
    let who_has = |target| {
        arp_frame(
            MacAddr::BROADCAST,
            ArpOperation::Request,
            (PEER_MAC, PEER_IP),
            (EthernetAddress([0; 6]), target),
        )
    };
    let out = net.send(&who_has(HOST_IP));
    assert_eq!(out.len(), 1, "{out:?}");
    assert_eq!(out[0].eth().dst, PEER_MAC);
    assert_eq!(
        out[0].arp(),
        Some(ArpRepr::EthernetIpv4 {
            operation: ArpOperation::Reply,
            source_hardware_addr: HOST_MAC,
            source_protocol_addr: HOST_IP,
            target_hardware_addr: PEER_MAC,
            target_protocol_addr: PEER_IP,
        })
    );
    assert_eq!(net.stats().arp_replies_sent, 1);
    // ... and not for anyone else's.
    assert!(net.send(&who_has(Ipv4Addr::new(10, 0, 0, 99))).is_empty());
    assert_eq!(net.stats().arp_replies_sent, 1);

    // The request taught us the peer's MAC (RFC 826 merge): an active open to it sends
    // its SYN at once.
    net.eng
        .connect(SocketAddrV4::new(PEER_IP, 8080), ())
        .map_err(|(e, _)| e)
        .expect("connect");
    let out = net.poll();
    assert_eq!(out.len(), 1, "{out:?}");
    let syn = out[0].tcp().expect("a SYN");
    assert!(syn.seg.flags.syn && !syn.seg.flags.ack);
    assert_eq!(syn.eth.dst, PEER_MAC);
    // Nobody listens there: the peer refuses.
    let refuse = TxSegment {
        seq: SeqNum(0),
        ack: Some(syn.seg.seq + 1),
        rst: true,
        ..Default::default()
    };
    let out = net.send(&tcp_frame_from(
        PEER_MAC,
        PEER_IP,
        8080,
        syn.seg.src_port,
        &refuse,
        &[],
    ));
    assert!(out.is_empty(), "{out:?}");
    assert_eq!(net.handler().closed, vec![CloseReason::Refused]);

    // An unknown neighbour: ARP first, the SYN after the reply, to the right MAC.
    let remote = Ipv4Addr::new(10, 0, 0, 7);
    let remote_mac = EthernetAddress([0x02, 0, 0, 0, 0, 0x07]);
    let requests = net.stats().arp_requests_sent;
    net.eng
        .connect(SocketAddrV4::new(remote, 80), ())
        .map_err(|(e, _)| e)
        .expect("connect");
    let out = net.poll();
    assert_eq!(out.len(), 1, "{out:?}");
    assert_eq!(out[0].eth().dst, MacAddr::BROADCAST);
    assert_eq!(
        out[0].arp(),
        Some(ArpRepr::EthernetIpv4 {
            operation: ArpOperation::Request,
            source_hardware_addr: HOST_MAC,
            source_protocol_addr: HOST_IP,
            target_hardware_addr: EthernetAddress([0; 6]),
            target_protocol_addr: remote,
        })
    );
    assert_eq!(net.stats().arp_requests_sent, requests + 1);

    let reply = arp_frame(
        HOST_MAC,
        ArpOperation::Reply,
        (remote_mac, remote),
        (HOST_MAC, HOST_IP),
    );
    let out = net.send(&reply);
    assert_eq!(out.len(), 1, "{out:?}");
    let syn = out[0].tcp().expect("the parked SYN");
    assert_eq!((syn.eth.src, syn.eth.dst), (HOST_MAC, remote_mac));
    assert_eq!((syn.ip.src, syn.ip.dst), (HOST_IP, remote));
    assert_eq!(syn.seg.dst_port, 80);
    assert!(syn.seg.flags.syn && !syn.seg.flags.ack);
    assert_eq!(syn.seg.mss, Some(1460));
    assert!(syn.seg.wscale.is_some() && syn.seg.sack_permitted && syn.seg.timestamp.is_some());

    // The remote answers; the handshake completes and the handler hears of it.
    let syn_ack = TxSegment {
        seq: SeqNum(9000),
        ack: Some(syn.seg.seq + 1),
        syn: true,
        window: 65535,
        mss: Some(1460),
        timestamp: Some((1, syn.tsval())),
        ..Default::default()
    };
    let out = tcp_of(&net.send(&tcp_frame_from(
        remote_mac,
        remote,
        80,
        syn.seg.src_port,
        &syn_ack,
        &[],
    )));
    assert_eq!(out.len(), 1, "{out:?}");
    assert!(out[0].is_pure_ack());
    assert_eq!(out[0].seg.seq, syn.seg.seq + 1);
    assert_eq!(out[0].seg.ack, SeqNum(9001));
    assert_eq!(out[0].eth.dst, remote_mac);
    assert_eq!(net.handler().connected, vec![SocketAddrV4::new(remote, 80)]);

    // Nobody answers for 10.0.0.8: requests are retried, the SYN never leaves, and the
    // active open eventually times out.
    let silent = Ipv4Addr::new(10, 0, 0, 8);
    let before = net.stats().arp_requests_sent;
    net.eng
        .connect(SocketAddrV4::new(silent, 80), ())
        .map_err(|(e, _)| e)
        .expect("connect");
    let out = net.run_for(Duration::from_secs(300), Duration::from_millis(100));
    let asked: Vec<&Frame> = out
        .iter()
        .filter(|f| matches!(f.arp(), Some(ArpRepr::EthernetIpv4 { target_protocol_addr, .. }) if target_protocol_addr == silent))
        .collect();
    assert!(asked.len() >= 4, "only {} ARP requests", asked.len());
    assert_eq!(net.stats().arp_requests_sent - before, asked.len() as u64);
    let to_silent = tcp_of(&out)
        .into_iter()
        .filter(|t| t.ip.dst == silent)
        .count();
    assert_eq!(to_silent, 0);
    assert!(net.dropped(DropReason::ArpUnresolved) >= 1);
    assert_eq!(
        net.handler().closed,
        vec![CloseReason::Refused, CloseReason::TimedOut]
    );
    assert_eq!(net.stats().conns_timed_out, 1);
    assert!(net.eng.connection_states().all(|(r, _)| *r.ip() != silent));
}

// ----- 4. ICMP -----

#[test]
fn icmp_echo_is_answered_and_bad_checksums_dropped() {
    let mut net = Net::new(config(), Recorder::default());
    let data = b"rusty ping, odd length!";
    let out = net.send(&echo_request(0x1234, 7, data));
    assert_eq!(out.len(), 1, "{out:?}");
    assert_eq!((out[0].eth().src, out[0].eth().dst), (HOST_MAC, PEER_MAC));
    let (ip, ident, seq_no, echoed) = out[0].echo_reply().expect("an echo reply");
    assert_eq!((ip.src, ip.dst), (HOST_IP, PEER_IP));
    assert_eq!(ip.ttl, ipv4::DEFAULT_TTL);
    assert_eq!((ident, seq_no), (0x1234, 7));
    assert_eq!(echoed, data);
    assert_eq!(net.stats().icmp_echo_replies, 1);

    let mut bad = echo_request(0x1234, 8, data);
    bad[14 + 20 + 2] ^= 0x5a; // the ICMP checksum
    assert!(net.send(&bad).is_empty());
    assert_eq!(net.dropped(DropReason::BadIcmpChecksum), 1);
    assert_eq!(net.stats().icmp_echo_replies, 1);

    // An empty echo works too.
    let out = net.send(&echo_request(1, 2, &[]));
    assert_eq!(out[0].echo_reply().map(|r| r.3), Some(Vec::new()));
}

/// The engine's end of a link of IP MTU `mtu` that checksums and segments (TSO).
fn tso_caps(mtu: usize) -> Capabilities {
    let mut caps = Capabilities::new(HOST_MAC, mtu);
    caps.tx_checksum = ChecksumOffload::ALL;
    caps.tso_max = Some(65535);
    caps
}

/// A device that hands over a frame above its MTU (the peer's MTU is larger) must not
/// make the engine send one: the reply is cut to the MTU (RFC 1122 §3.2.2.6), with TSO
/// on the device or not, and counted; a request that fits is answered whole.
#[test]
fn icmp_echo_over_the_mtu_gets_a_reply_cut_to_it() {
    const MTU: usize = 576;
    for dev in [Capabilities::new(HOST_MAC, MTU), tso_caps(MTU)] {
        let wire = Capabilities::new(PEER_MAC, 9000);
        let mut net = Net::with_caps(config(), Recorder::default(), wire, dev);
        let fits = pattern(MTU - 20 - 8, 1);
        let out = net.send(&echo_request(1, 1, &fits));
        assert_eq!(out.len(), 1, "{out:?}");
        assert_eq!(out[0].0.len(), ETHERNET_HEADER_LEN + MTU);
        assert_eq!(out[0].echo_reply().map(|r| r.3), Some(fits.clone()));
        assert_eq!(net.stats().icmp_echo_truncated, 0);

        let long = pattern(4000, 2);
        let out = net.send(&echo_request(1, 2, &long));
        assert_eq!(out.len(), 1, "{out:?}");
        assert_eq!(out[0].0.len(), ETHERNET_HEADER_LEN + MTU);
        let (ip, ident, seq_no, echoed) = out[0].echo_reply().expect("an echo reply");
        assert_eq!((usize::from(ip.total_len), ident, seq_no), (MTU, 1, 2));
        assert_eq!(echoed, long[..MTU - 20 - 8]);
        assert_eq!(net.stats().icmp_echo_replies, 2);
        assert_eq!(net.stats().icmp_echo_truncated, 1);
        assert_eq!(net.stats().total_drops(), 0);
    }
}

/// The transmit path's one size guard: a frame above the MTU that is no TSO
/// super-frame is dropped and counted, never handed to the device.
#[test]
fn frames_over_the_mtu_are_counted_not_sent() {
    let wire = Capabilities::new(PEER_MAC, 9000);
    let mut net = Net::with_caps(config(), Recorder::default(), wire, tso_caps(576));
    let frames_out = net.stats().frames_out;
    for (len, tso) in [(577, false), (576, false), (8000, true)] {
        let buf = net.eng.dev.alloc_tx(ETHERNET_HEADER_LEN + len);
        net.eng.push_tx(buf.expect("buffer"), tso);
    }
    net.eng.submit();
    let out = net.poll();
    let lens: Vec<usize> = out.iter().map(|f| f.0.len()).collect();
    assert_eq!(
        lens,
        [ETHERNET_HEADER_LEN + 576, ETHERNET_HEADER_LEN + 8000]
    );
    assert_eq!(net.dropped(DropReason::OverMtu), 1);
    assert_eq!(net.stats().frames_out - frames_out, 2);
}

// ----- 5. Malformed input -----

/// Recompute the IPv4 header checksum of an Ethernet frame in place.
fn fix_ip_checksum(frame: &mut [u8]) {
    if let Some(ip) = frame.get_mut(14..) {
        if let Ok(mut p) = Ipv4Packet::new_checked(ip) {
            p.fill_checksum();
        }
    }
}

/// Recompute the TCP checksum of an Ethernet + IPv4 + TCP frame in place, as far as the
/// headers allow.
fn fix_tcp_checksum(frame: &mut [u8]) {
    let Some(ip) = frame.get_mut(14..) else {
        return;
    };
    let Ok(p) = Ipv4Packet::new_checked(&*ip) else {
        return;
    };
    if p.next_header() != IpProtocol::Tcp {
        return;
    }
    let (src, dst) = (p.src_addr(), p.dst_addr());
    let hl = usize::from(p.header_len());
    let total = usize::from(p.total_len());
    let Some(tcp) = ip.get_mut(hl..total) else {
        return;
    };
    if tcp.len() < 20 {
        return;
    }
    tcp[16] = 0;
    tcp[17] = 0;
    let pseudo = checksum::pseudo_header_v4(src.octets(), dst.octets(), 6, tcp.len() as u16);
    let c = checksum::finish(checksum::combine(pseudo, checksum::sum(tcp)));
    tcp[16..18].copy_from_slice(&c.to_be_bytes());
}

#[test]
fn malformed_frames_are_counted_and_dropped() {
    let mut net = Net::new(config(), echo());
    net.eng.listen(PORT, 16);
    let good = tcp_frame(40000, &syn_seg(&net, SeqNum(1), FULL), &[]);
    let tcp_at = 14 + 20;
    let mut expect = [0u64; DropReason::COUNT];

    let mut check = |net: &mut Net, frame: Vec<u8>, reason: DropReason| {
        let out = net.send(&frame);
        assert!(out.is_empty(), "{reason:?}: answered with {out:?}");
        expect[reason.index()] += 1;
        assert_eq!(net.stats().drops, expect, "after a {reason:?} frame");
    };

    // Ethernet.
    check(&mut net, good[..10].to_vec(), DropReason::Truncated);
    check(&mut net, Vec::new(), DropReason::Truncated);
    let mut other = good.clone();
    other[..6].copy_from_slice(&[0x02, 0, 0, 0, 0, 0x99]);
    check(&mut net, other, DropReason::NotForUs);
    let mut multicast = good.clone();
    multicast[..6].copy_from_slice(&[0x01, 0, 0x5e, 0, 0, 1]);
    check(&mut net, multicast, DropReason::GroupDestinationMac);
    check(
        &mut net,
        eth_frame(PEER_MAC, HOST_MAC, EthernetProtocol::Ipv6, &[0x60; 40]),
        DropReason::UnknownEtherType,
    );

    // IPv4.
    check(&mut net, good[..14 + 12].to_vec(), DropReason::Truncated);
    let mut v6 = good.clone();
    v6[14] = 0x65;
    check(&mut net, v6, DropReason::BadIpHeader);
    let mut ihl = good.clone();
    ihl[14] = 0x44;
    fix_ip_checksum(&mut ihl);
    check(&mut net, ihl, DropReason::BadIpHeader);
    let mut long = good.clone();
    long[14 + 2..14 + 4].copy_from_slice(&1400u16.to_be_bytes());
    fix_ip_checksum(&mut long);
    check(&mut net, long, DropReason::BadIpLength);
    let mut bad_ip = good.clone();
    bad_ip[14 + 10] ^= 0xff;
    check(&mut net, bad_ip, DropReason::BadIpChecksum);
    let mut mf = good.clone();
    mf[14 + 6] |= 0x20; // More Fragments
    fix_ip_checksum(&mut mf);
    check(&mut net, mf, DropReason::Fragment);
    let mut offset = good.clone();
    offset[14 + 6..14 + 8].copy_from_slice(&[0x00, 0x10]);
    fix_ip_checksum(&mut offset);
    check(&mut net, offset, DropReason::Fragment);
    let mut not_ours = good.clone();
    not_ours[14 + 16..14 + 20].copy_from_slice(&[10, 0, 0, 3]);
    fix_ip_checksum(&mut not_ours);
    check(&mut net, not_ours, DropReason::NotOurAddress);
    let mut loopback = good.clone();
    loopback[14 + 12..14 + 16].copy_from_slice(&[127, 0, 0, 1]);
    fix_ip_checksum(&mut loopback);
    check(&mut net, loopback, DropReason::MartianSource);
    check(
        &mut net,
        ipv4_frame(PEER_MAC, PEER_IP, IpProtocol::Udp, &[0; 12]),
        DropReason::UnknownProtocol,
    );
    // TCP to the limited broadcast address (in a unicast frame).
    let mut broadcast = good.clone();
    broadcast[14 + 16..14 + 20].copy_from_slice(&[255; 4]);
    fix_ip_checksum(&mut broadcast);
    fix_tcp_checksum(&mut broadcast);
    check(&mut net, broadcast, DropReason::NotOurAddress);

    // TCP.
    check(
        &mut net,
        ipv4_frame(
            PEER_MAC,
            PEER_IP,
            IpProtocol::Tcp,
            &good[tcp_at..tcp_at + 10],
        ),
        DropReason::BadTcpHeader,
    );
    let mut offset_too_big = good.clone();
    offset_too_big[tcp_at + 12] = 0xf0;
    fix_tcp_checksum(&mut offset_too_big);
    check(&mut net, offset_too_big, DropReason::BadTcpHeader);
    let mut bad_tcp = good.clone();
    bad_tcp[tcp_at + 16] ^= 0x01;
    check(&mut net, bad_tcp, DropReason::BadTcpChecksum);
    let mut bad_payload = tcp_frame(40000, &syn_seg(&net, SeqNum(1), FULL), b"data");
    let len = bad_payload.len();
    bad_payload[len - 1] ^= 0x80;
    check(&mut net, bad_payload, DropReason::BadTcpChecksum);

    // ARP.
    let mut bad_arp = arp_frame(
        MacAddr::BROADCAST,
        ArpOperation::Request,
        (PEER_MAC, PEER_IP),
        (EthernetAddress([0; 6]), HOST_IP),
    );
    bad_arp[14 + 4] = 8; // hardware length
    check(&mut net, bad_arp, DropReason::BadArp);
    check(
        &mut net,
        eth_frame(
            PEER_MAC,
            MacAddr::BROADCAST,
            EthernetProtocol::Arp,
            &[0, 1, 8],
        )[..17]
            .to_vec(),
        DropReason::Truncated,
    );

    assert_eq!(net.stats().segments_in, 0);
    assert_eq!(net.eng.connection_count(), 0);
    // Still alive: the good SYN is answered.
    let out = tcp_of(&net.send(&good));
    assert_eq!(out.len(), 1);
    assert!(out[0].is_syn_ack());
}

/// Base frames for the fuzzer: valid traffic on and around a live connection.
fn fuzz_bases(net: &Net, pc: &PeerConn) -> Vec<Vec<u8>> {
    let mut data = pc.seg(net);
    data.psh = true;
    let mut fin = pc.seg(net);
    fin.fin = true;
    let mut ooo = pc.seg(net);
    ooo.seq = pc.snd_nxt + 1000;
    let mut sack = pc.seg(net);
    sack.sack = [Some((pc.rcv_nxt.0, pc.rcv_nxt.0 + 10)), None, None];
    let rst = TxSegment {
        seq: pc.snd_nxt,
        rst: true,
        ..Default::default()
    };
    vec![
        tcp_frame(pc.port, &data, b"fuzzing data"),
        tcp_frame(pc.port, &pc.seg(net), &[]),
        tcp_frame(pc.port, &fin, &[]),
        tcp_frame(pc.port, &ooo, &[7; 100]),
        tcp_frame(pc.port, &sack, &[]),
        tcp_frame(pc.port, &rst, &[]),
        tcp_frame(pc.port + 1, &syn_seg(net, SeqNum(99), FULL), &[]),
        tcp_frame_from(
            PEER_MAC,
            PEER_IP,
            50000,
            81,
            &syn_seg(net, SeqNum(5), BARE),
            &[],
        ),
        echo_request(3, 4, b"ping"),
        arp_frame(
            MacAddr::BROADCAST,
            ArpOperation::Request,
            (PEER_MAC, PEER_IP),
            (EthernetAddress([0; 6]), HOST_IP),
        ),
    ]
}

#[derive(Debug, Clone)]
enum Fuzz {
    Random(Vec<u8>),
    Mutated {
        base: usize,
        flips: Vec<(usize, u8)>,
        cut: Option<usize>,
        fix_checksums: bool,
    },
}

fn fuzz_input() -> impl Strategy<Value = Fuzz> {
    prop_oneof![
        proptest::collection::vec(any::<u8>(), 0..200).prop_map(Fuzz::Random),
        (
            0..10usize,
            proptest::collection::vec((0..200usize, 1..=255u8), 1..6),
            proptest::option::of(0..200usize),
            any::<bool>(),
        )
            .prop_map(|(base, flips, cut, fix_checksums)| Fuzz::Mutated {
                base,
                flips,
                cut,
                fix_checksums,
            }),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    /// Whatever arrives, the engine counts it and carries on: no panic, and it still
    /// answers a ping and serves its live connection afterwards.
    #[test]
    fn hostile_frames_never_panic(
        inputs in proptest::collection::vec((fuzz_input(), 0..300u64), 1..12)
    ) {
        let mut net = Net::new(config(), echo());
        net.eng.listen(PORT, 4);
        let mut pc = connect_peer(&mut net, 40000, SeqNum(1), FULL);
        let _ = pc.data(&mut net, b"warm-up");
        let bases = fuzz_bases(&net, &pc);
        let frames_before = net.stats().frames_in;
        for (input, delay_ms) in &inputs {
            let frame = match input {
                Fuzz::Random(bytes) => bytes.clone(),
                Fuzz::Mutated { base, flips, cut, fix_checksums } => {
                    let mut f = bases[*base % bases.len()].clone();
                    for &(at, x) in flips {
                        if !f.is_empty() {
                            let i = at % f.len();
                            f[i] ^= x;
                        }
                    }
                    if let Some(cut) = cut {
                        f.truncate(*cut);
                    }
                    if *fix_checksums {
                        fix_ip_checksum(&mut f);
                        fix_tcp_checksum(&mut f);
                    }
                    f
                }
            };
            net.send(&frame);
            net.advance(Duration::from_millis(*delay_ms));
        }
        prop_assert_eq!(net.stats().frames_in - frames_before, inputs.len() as u64);
        let out = net.send(&echo_request(9, 9, b"alive?"));
        prop_assert!(out.iter().any(|f| f.echo_reply().is_some()), "{:?}", out);
    }
}

// ----- 6. TIME-WAIT -----

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

/// An engine listening on [`PORT`] whose handler answers "bye" and closes, with a
/// 10 s TIME-WAIT.
fn time_wait_net() -> Net {
    let mut cfg = config();
    cfg.tcp.time_wait = Duration::from_secs(10);
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

#[test]
fn time_wait_is_compact_reacks_fin_expires_and_reopens() {
    let mut net = time_wait_net();
    let mut pc = close_into_time_wait(&mut net, 40000, SeqNum(1000), FULL);
    assert_eq!(net.eng.time_wait_count(), 1);
    assert_eq!(net.eng.connection_count(), 0);
    assert_eq!(net.stats().time_wait_entered, 1);
    assert_eq!(net.handler().closed, vec![CloseReason::Normal]);
    assert_eq!(net.handler().peer_closed, 1);

    // A retransmitted FIN (our ACK was lost) is ACKed again from the compact entry. It
    // lies below RCV.NXT, so TS.Recent stays the TSval of the original FIN and is what
    // the ACK echoes (RFC 7323 §4.3).
    let fin_tsval = net.peer_tsval();
    net.advance(Duration::from_secs(5));
    let mut again = pc.seg(&net);
    again.seq = pc.snd_nxt - 1;
    again.fin = true;
    let last_ts = pc.ts_recent;
    let out = pc.send(&mut net, &again, &[]);
    assert_eq!(out.len(), 1, "{out:?}");
    assert!(out[0].is_pure_ack());
    assert_eq!(out[0].seg.seq, pc.rcv_nxt);
    assert_eq!(out[0].seg.ack, pc.snd_nxt);
    let (tsval, tsecr) = out[0].seg.timestamp.expect("timestamps kept in TIME-WAIT");
    assert_eq!(tsecr, fin_tsval);
    assert!(
        tsval.wrapping_sub(last_ts) as i32 >= 5000,
        "TSval kept ticking"
    );

    // That restarted the 2·MSL wait: 10 s from the retransmission, not from the close.
    net.advance(Duration::from_millis(9_900));
    assert_eq!(net.eng.time_wait_count(), 1);
    net.advance(Duration::from_millis(200));
    assert_eq!(net.eng.time_wait_count(), 0);

    // Once more into TIME-WAIT on the same 4-tuple (a new incarnation).
    let pc = close_into_time_wait(&mut net, 40000, SeqNum(50_000), FULL);
    assert_eq!(net.eng.time_wait_count(), 1);
    net.advance(Duration::from_secs(1));
    // A SYN with a higher sequence number but an old timestamp could be a duplicate of
    // the old connection: it only gets the TIME-WAIT ACK.
    let mut old = syn_seg(&net, pc.snd_nxt + 100_000, FULL);
    old.timestamp = Some((pc.seg(&net).timestamp.unwrap().0 - 5000, 0));
    let out = tcp_of(&net.send(&tcp_frame(40000, &old, &[])));
    assert_eq!(out.len(), 1, "{out:?}");
    assert!(out[0].is_pure_ack());
    assert_eq!(out[0].seg.ack, pc.snd_nxt);
    assert_eq!(net.eng.time_wait_count(), 1);
    // A newer timestamp reopens the pair (RFC 6191).
    let isn = pc.snd_nxt + 100_000;
    let out = send_syn(&mut net, 40000, isn, FULL);
    assert_eq!(out.len(), 1, "{out:?}");
    assert!(out[0].is_syn_ack());
    assert_eq!(out[0].seg.ack, isn + 1);
    assert_eq!(net.eng.time_wait_count(), 0);
    assert_eq!(net.stats().time_wait_reused, 1);
    let mut pc = PeerConn::after_syn_ack(40000, isn, FULL, &out[0]);
    assert!(pc.ack(&mut net).is_empty());
    assert_eq!(net.eng.connection_count(), 1);
    let out = pc.data(&mut net, b"third");
    assert_eq!(out[0].payload, b"bye");
    assert_eq!(net.handler().accepted.len(), 3);
}

#[test]
fn a_cookie_ack_on_a_pair_whose_entry_a_rst_closed_takes_the_flow_over() {
    let mut net = time_wait_net();
    let pc = close_into_time_wait(&mut net, 40000, SeqNum(1000), FULL);
    let key = FlowKey {
        remote_ip: PEER_IP,
        remote_port: 40000,
        local_port: PORT,
    };
    // The peer's RST at RCV.NXT closes the entry, which stays, inert, in the flow table.
    let mut rst = pc.seg(&net);
    rst.rst = true;
    rst.ack = None;
    let mut peer = pc;
    assert!(peer.send(&mut net, &rst, &[]).is_empty());
    assert_eq!(net.eng.time_wait_count(), 0);
    assert!(matches!(net.eng.flows.get(&key), Some(Flow::TimeWait(_))));
    // An ACK carrying a valid SYN cookie for the pair (no SYN went through the entry,
    // which a SYN would have removed) opens a connection on it.
    let isn = pc.snd_nxt + 100_000;
    let (local, remote) = net.eng.endpoints(&key);
    let cookie = net
        .eng
        .cookies
        .encode(local, remote, isn, 1460, net.eng.now);
    let ack = TxSegment {
        seq: isn + 1,
        ack: Some(cookie + 1),
        window: 65535,
        ..Default::default()
    };
    let out = tcp_of(&net.send(&tcp_frame(40000, &ack, &[])));
    assert!(out.is_empty(), "{out:?}");
    assert_eq!(net.stats().syn_cookies_accepted, 1);
    assert_eq!(net.eng.connection_count(), 1);
    assert!(matches!(net.eng.flows.get(&key), Some(Flow::Conn(_))));
    // The entry went: its timer, when it comes due, leaves the connection's flow alone.
    net.advance(Duration::from_secs(11));
    assert_eq!(net.eng.connection_count(), 1);
    assert!(matches!(net.eng.flows.get(&key), Some(Flow::Conn(_))));
}

#[test]
fn time_wait_without_timestamps_reopens_on_higher_sequence() {
    let mut net = Net::new(
        config(),
        Recorder {
            reply_and_close: Some(b"bye".to_vec()),
            ..Default::default()
        },
    );
    net.eng.listen(PORT, 16);
    let pc = close_into_time_wait(&mut net, 40000, SeqNum(1000), BARE);
    assert_eq!(net.eng.time_wait_count(), 1);

    // An old SYN (below RCV.NXT) gets the ACK; the entry stays.
    let out = send_syn(&mut net, 40000, SeqNum(900), BARE);
    assert_eq!(out.len(), 1, "{out:?}");
    assert!(out[0].is_pure_ack());
    assert_eq!(out[0].seg.ack, pc.snd_nxt);
    assert_eq!(out[0].seg.timestamp, None);
    assert_eq!(net.eng.time_wait_count(), 1);

    // A higher one reopens.
    let out = send_syn(&mut net, 40000, pc.snd_nxt + 10, BARE);
    assert_eq!(out.len(), 1, "{out:?}");
    assert!(out[0].is_syn_ack());
    assert_eq!(out[0].seg.ack, pc.snd_nxt + 11);
    assert_eq!(net.eng.time_wait_count(), 0);
    assert_eq!(net.eng.connection_count(), 1);
}

// ----- 7. Challenge ACKs -----

#[test]
fn challenge_acks_are_limited_per_connection() {
    let mut net = Net::new(config(), echo());
    net.eng.listen(PORT, 16);
    let mut pc = connect_peer(&mut net, 40000, SeqNum(1000), FULL);

    // In-window but not exact RSTs (RFC 5961 §3.2): one challenge ACK per 500 ms per
    // connection, as Linux's tcp_invalid_ratelimit.
    let mut acks = Vec::new();
    for i in 0..20 {
        acks.extend(pc.rst(&mut net, pc.snd_nxt + 1 + i));
    }
    assert_eq!(acks.len(), 1, "{acks:?}");
    assert!(acks[0].is_pure_ack());
    assert_eq!((acks[0].seg.seq, acks[0].seg.ack), (pc.rcv_nxt, pc.snd_nxt));
    assert_eq!(net.stats().challenge_acks, 1);
    assert_eq!(net.stats().invalid_acks_suppressed, 19);
    assert!(net.handler().closed.is_empty());
    // A SYN on the connection (§4.2) shares the connection's limit.
    let syn = syn_seg(&net, pc.snd_nxt + 5, FULL);
    assert!(pc.send(&mut net, &syn, &[]).is_empty());
    assert_eq!(net.stats().invalid_acks_suppressed, 20);
    // Another connection is not affected by this one's limit.
    let mut other = connect_peer(&mut net, 40001, SeqNum(7000), FULL);
    assert_eq!(other.rst(&mut net, other.snd_nxt + 1).len(), 1);
    // Half a second later the first connection is answered again.
    net.advance(Duration::from_millis(500));
    let out = pc.rst(&mut net, pc.snd_nxt + 3);
    assert_eq!(out.len(), 1, "{out:?}");
    assert!(out[0].is_pure_ack());
    assert_eq!(net.stats().challenge_acks, 3);

    // The data path is unharmed.
    let out = pc.data(&mut net, b"still here");
    assert_eq!(out[0].payload, b"still here");

    // An exact RST resets, silently.
    assert!(pc.rst(&mut net, pc.snd_nxt).is_empty());
    assert_eq!(net.handler().closed, vec![CloseReason::Reset]);
    assert_eq!(net.stats().conns_reset, 1);
    assert_eq!(net.eng.connection_count(), 1);
}

#[test]
fn the_shared_challenge_budget_is_random_each_second() {
    // With the per-connection limit off, the engine's budget shows: between half and
    // one and a half times the configured limit each second (CVE-2016-5696), drawn
    // afresh each second and differing between engines.
    let mut budgets = Vec::new();
    for seed in 0..8u8 {
        let mut cfg = config();
        cfg.tcp.challenge_ack_limit = 20;
        cfg.tcp.invalid_ack_interval = Duration::ZERO;
        cfg.secret = Some([seed.wrapping_mul(37).wrapping_add(1); 32]);
        let mut net = Net::new(cfg, echo());
        net.eng.listen(PORT, 16);
        let mut pc = connect_peer(&mut net, 40000, SeqNum(1000), FULL);
        for second in 0..2 {
            let mut acks = 0;
            for i in 0..100 {
                acks += pc.rst(&mut net, pc.snd_nxt + 1 + i).len();
            }
            assert!((10..30).contains(&acks), "budget {acks} (second {second})");
            budgets.push(acks);
            net.advance(Duration::from_secs(1));
        }
        let s = net.stats();
        assert_eq!(s.challenge_acks + s.challenge_acks_suppressed, 200);
    }
    budgets.sort_unstable();
    budgets.dedup();
    assert!(budgets.len() > 3, "budgets barely vary: {budgets:?}");
}

// ----- 8. Refused accept -----

#[test]
fn refused_accept_resets_the_peer() {
    let mut net = Net::new(
        config(),
        Recorder {
            refuse: true,
            ..Default::default()
        },
    );
    net.eng.listen(PORT, 1);
    let out = send_syn(&mut net, 40000, SeqNum(1000), FULL);
    assert_eq!(out.len(), 1);
    let sa = out[0].clone();
    assert!(sa.is_syn_ack());
    let mut pc = PeerConn::after_syn_ack(40000, SeqNum(1000), FULL, &sa);
    let out = pc.ack(&mut net);
    assert_eq!(out.len(), 1, "{out:?}");
    assert!(out[0].is_rst());
    assert_eq!(out[0].seg.seq, sa.seg.seq + 1);
    assert_eq!(
        net.handler().accepted,
        vec![SocketAddrV4::new(PEER_IP, 40000)]
    );
    assert!(net.handler().connected.is_empty());
    assert!(net.handler().closed.is_empty(), "no state was handed out");
    assert_eq!(net.stats().conns_refused, 1);
    assert_eq!(net.stats().conns_aborted, 1);
    assert_eq!(
        net.stats().rsts_sent,
        1,
        "counted as the kernel backend counts it"
    );
    assert_eq!(net.stats().conns_opened_passive, 0);
    assert_eq!(net.eng.connection_count(), 0);

    // The refused connection no longer counts against the backlog of 1: the next SYN
    // gets a real SYN-ACK, not a cookie.
    let out = send_syn(&mut net, 40001, SeqNum(5), FULL);
    assert!(out[0].is_syn_ack());
    assert_eq!(net.stats().syn_cookies_sent, 0);
    assert_eq!(net.eng.connection_count(), 1);
}

// ----- 9. Connection limit -----

#[test]
fn syns_beyond_max_connections_are_dropped() {
    let mut cfg = config();
    cfg.max_connections = 2;
    let mut net = Net::new(cfg, echo());
    net.eng.listen(PORT, 16);
    let a = send_syn(&mut net, 40000, SeqNum(100), FULL);
    let b = send_syn(&mut net, 40001, SeqNum(200), FULL);
    assert!(a[0].is_syn_ack() && b[0].is_syn_ack());
    assert!(send_syn(&mut net, 40002, SeqNum(300), FULL).is_empty());
    assert_eq!(net.stats().syns_dropped_overload, 1);
    assert_eq!(net.eng.connection_count(), 2);
    // Active opens are refused too.
    let err = net
        .eng
        .connect(SocketAddrV4::new(PEER_IP, 9), ())
        .map_err(|(e, _)| e);
    assert_eq!(err, Err(ConnectError::TooManyConnections));

    // The peer resets one half-open connection; room for one more.
    let mut pa = PeerConn::after_syn_ack(40000, SeqNum(100), FULL, &a[0]);
    assert!(pa.rst(&mut net, SeqNum(101)).is_empty());
    assert_eq!(net.eng.connection_count(), 1);
    let out = send_syn(&mut net, 40002, SeqNum(300), FULL);
    assert!(out[0].is_syn_ack());
    assert_eq!(net.eng.connection_count(), 2);
    assert_eq!(net.stats().syns_dropped_overload, 1);
}

// ----- More RFC rules around the handshake and close -----

#[test]
fn syn_ack_is_retransmitted_then_half_open_expires_and_frees_backlog() {
    let cfg = config();
    let tcp = cfg.tcp.clone();
    let mut net = Net::new(cfg, echo());
    net.eng.listen(PORT, 1);
    let first = send_syn(&mut net, 40000, SeqNum(1000), FULL);
    assert!(first[0].is_syn_ack());
    // A retransmitted SYN gets the same SYN-ACK again (same ISS).
    let again = send_syn(&mut net, 40000, SeqNum(1000), FULL);
    assert_eq!(again.len(), 1, "{again:?}");
    assert!(again[0].is_syn_ack());
    assert_eq!(again[0].seg.seq, first[0].seg.seq);
    assert_eq!(again[0].seg.ack, SeqNum(1001));
    assert_eq!(net.eng.connection_count(), 1);

    // Unanswered, the SYN-ACK is retransmitted with backoff, then the half-open
    // connection is dropped without the application hearing of it.
    let out = tcp_of(&net.run_for(Duration::from_secs(120), Duration::from_millis(50)));
    let syn_acks: Vec<&TcpOut> = out.iter().filter(|t| t.is_syn_ack()).collect();
    assert_eq!(syn_acks.len() as u32, tcp.max_synack_retries, "{out:?}");
    assert!(syn_acks.iter().all(|t| t.seg.seq == first[0].seg.seq));
    assert_eq!(net.eng.connection_count(), 0);
    assert!(net.handler().accepted.is_empty() && net.handler().closed.is_empty());
    assert_eq!(net.stats().conns_timed_out, 1);

    // The backlog slot is free again: a new SYN gets a real SYN-ACK, not a cookie.
    let out = send_syn(&mut net, 40001, SeqNum(7), FULL);
    assert!(out[0].is_syn_ack());
    assert_eq!(net.stats().syn_cookies_sent, 0);
    assert_eq!(net.eng.connection_count(), 1);
}

#[test]
fn cookie_ack_carrying_data_is_delivered() {
    let mut net = Net::new(config(), echo());
    net.eng.listen(PORT, 1);
    let _half_open = send_syn(&mut net, 40000, SeqNum(1), FULL);
    let out = send_syn(&mut net, 40001, SeqNum(500), FULL);
    assert_eq!(net.stats().syn_cookies_sent, 1);
    let mut pc = PeerConn::after_syn_ack(40001, SeqNum(500), FULL, &out[0]);
    // The third segment of the handshake already carries a request.
    let out = pc.data(&mut net, b"GET / HTTP/1.0\r\n\r\n");
    assert_eq!(net.stats().syn_cookies_accepted, 1);
    assert_eq!(net.handler().received, b"GET / HTTP/1.0\r\n\r\n");
    assert_eq!(out.len(), 1, "{out:?}");
    assert_eq!(out[0].payload, b"GET / HTTP/1.0\r\n\r\n");
    assert_eq!(out[0].seg.ack, pc.snd_nxt);
}

#[test]
fn out_of_window_syn_gets_a_rate_limited_challenge_ack() {
    let mut net = Net::new(config(), echo());
    net.eng.listen(PORT, 16);
    let mut pc = connect_peer(&mut net, 40000, SeqNum(1000), FULL);
    // RFC 5961 §4.2: a SYN in a synchronized state, whatever its sequence number, gets a
    // challenge ACK, and those are rate limited (§7): here by the connection's limit.
    let mut acks = Vec::new();
    for i in 0..4u32 {
        let syn = syn_seg(&net, SeqNum(2_000_000_000 + i), FULL);
        acks.extend(pc.send(&mut net, &syn, &[]));
    }
    assert_eq!(acks.len(), 1, "{acks:?}");
    assert!(acks
        .iter()
        .all(|a| a.is_pure_ack() && a.seg.ack == pc.snd_nxt));
    assert_eq!(net.stats().challenge_acks, 1);
    assert_eq!(net.stats().invalid_acks_suppressed, 3);
    assert_eq!(net.eng.connection_count(), 1);
}

#[test]
fn simultaneous_close_passes_through_closing() {
    let mut net = Net::new(
        config(),
        Recorder {
            reply_and_close: Some(b"bye".to_vec()),
            ..Default::default()
        },
    );
    net.eng.listen(PORT, 16);
    let mut pc = connect_peer(&mut net, 40000, SeqNum(1000), FULL);
    let out = pc.data(&mut net, b"hi");
    assert!(out[0].seg.flags.fin);
    let our_fin_end = pc.rcv_nxt;
    // The peer's FIN crosses ours: it does not acknowledge our FIN.
    let mut fin = pc.seg(&net);
    fin.ack = Some(our_fin_end - 1);
    fin.fin = true;
    pc.snd_nxt += 1;
    let out = pc.send(&mut net, &fin, &[]);
    assert_eq!(out.len(), 1, "{out:?}");
    assert!(out[0].is_pure_ack());
    assert_eq!(out[0].seg.ack, pc.snd_nxt);
    assert!(net
        .eng
        .connection_states()
        .all(|(_, s)| s == State::Closing));
    // Its ACK of our FIN: TIME-WAIT.
    assert!(pc.ack(&mut net).is_empty());
    assert_eq!(net.eng.connection_count(), 0);
    assert_eq!(net.eng.time_wait_count(), 1);
    assert_eq!(net.handler().closed, vec![CloseReason::Normal]);
}

#[test]
fn time_wait_table_full_skips_time_wait() {
    let mut cfg = config();
    cfg.max_time_wait = 0;
    let mut net = Net::new(
        cfg,
        Recorder {
            reply_and_close: Some(b"bye".to_vec()),
            ..Default::default()
        },
    );
    net.eng.listen(PORT, 16);
    let _pc = close_into_time_wait(&mut net, 40000, SeqNum(1000), FULL);
    assert_eq!(net.eng.time_wait_count(), 0);
    assert_eq!(net.eng.connection_count(), 0);
    assert_eq!(net.stats().time_wait_entered, 0, "no entry was made");
    assert_eq!(net.handler().closed, vec![CloseReason::Normal]);
    assert_eq!(net.stats().conns_closed, 1);
}

#[test]
fn ip_options_and_ethernet_padding_are_handled() {
    let mut net = Net::new(config(), echo());
    net.eng.listen(PORT, 16);
    // A SYN in an IPv4 header with 4 bytes of options (NOP, NOP, NOP, EOL).
    let syn = tcp_bytes(PEER_IP, 40000, PORT, &syn_seg(&net, SeqNum(1), BARE), &[]);
    let mut ip = vec![0u8; 24 + syn.len()];
    {
        let mut p = Ipv4Packet::new_unchecked(&mut ip[..]);
        p.set_version(4);
        p.set_header_len(24);
        p.set_total_len((24 + syn.len()) as u16);
        p.set_dont_frag(true);
        p.set_hop_limit(64);
        p.set_next_header(IpProtocol::Tcp);
        p.set_src_addr(PEER_IP);
        p.set_dst_addr(HOST_IP);
    }
    ip[20..24].copy_from_slice(&[1, 1, 1, 0]);
    ip[24..].copy_from_slice(&syn);
    Ipv4Packet::new_unchecked(&mut ip[..]).fill_checksum();
    // Trailing junk after the IP datagram (Ethernet padding) must be ignored.
    ip.extend_from_slice(&[0xee; 6]);
    let frame = eth_frame(PEER_MAC, HOST_MAC, EthernetProtocol::Ipv4, &ip);
    let out = tcp_of(&net.send(&frame));
    assert_eq!(out.len(), 1, "{out:?}");
    assert!(out[0].is_syn_ack());
    assert_eq!(out[0].seg.ack, SeqNum(2));
    // Without an MSS option the peer is assumed to take 536 (RFC 9293 §3.7.1).
    let mut pc = PeerConn::after_syn_ack(40000, SeqNum(1), BARE, &out[0]);
    assert!(pc.ack(&mut net).is_empty());
    let out = pc.data(&mut net, &pattern(600, 4));
    let lens: Vec<usize> = out.iter().map(|s| s.payload.len()).collect();
    assert_eq!(lens, vec![536, 64]);
}

#[test]
fn active_open_follows_syn_sent_rules() {
    let mut net = Net::new(config(), echo());
    // Teach the engine the peer's MAC the ordinary way: the peer ARPs for it.
    let who_has = arp_frame(
        MacAddr::BROADCAST,
        ArpOperation::Request,
        (PEER_MAC, PEER_IP),
        (EthernetAddress([0; 6]), HOST_IP),
    );
    assert_eq!(net.send(&who_has).len(), 1);

    let connect = |net: &mut Net, port| {
        net.eng
            .connect(SocketAddrV4::new(PEER_IP, port), ())
            .map_err(|(e, _)| e)
            .expect("connect");
        let out = tcp_of(&net.poll());
        assert_eq!(out.len(), 1, "{out:?}");
        assert!(out[0].seg.flags.syn && !out[0].seg.flags.ack);
        out[0].clone()
    };
    let syn = connect(&mut net, 443);
    let local = syn.seg.src_port;
    let to_engine = |seg: &TxSegment| tcp_frame_from(PEER_MAC, PEER_IP, 443, local, seg, &[]);

    // §3.10.7.3: an ACK that does not acknowledge our SYN gets a RST with SEQ = SEG.ACK.
    let bad_ack = TxSegment {
        seq: SeqNum(42),
        ack: Some(syn.seg.seq + 1000),
        window: 100,
        ..Default::default()
    };
    let out = tcp_of(&net.send(&to_engine(&bad_ack)));
    assert_eq!(out.len(), 1, "{out:?}");
    assert!(out[0].is_rst() && !out[0].seg.flags.ack);
    assert_eq!(out[0].seg.seq, syn.seg.seq + 1000);
    // A RST without an acceptable ACK is ignored.
    let rst = TxSegment {
        seq: SeqNum(42),
        rst: true,
        ..Default::default()
    };
    assert!(net.send(&to_engine(&rst)).is_empty());
    assert!(net.handler().closed.is_empty());

    // The SYN-ACK completes it; the options are settled from it.
    let syn_ack = TxSegment {
        seq: SeqNum(70_000),
        ack: Some(syn.seg.seq + 1),
        syn: true,
        window: 1000,
        mss: Some(1000),
        wscale: Some(2),
        sack_permitted: true,
        timestamp: Some((555, syn.tsval())),
        ..Default::default()
    };
    let out = tcp_of(&net.send(&to_engine(&syn_ack)));
    assert_eq!(out.len(), 1, "{out:?}");
    assert!(out[0].is_pure_ack());
    assert_eq!(out[0].seg.ack, SeqNum(70_001));
    assert_eq!(out[0].seg.timestamp.map(|t| t.1), Some(555));
    assert_eq!(
        net.handler().connected,
        vec![SocketAddrV4::new(PEER_IP, 443)]
    );

    // Simultaneous open (§3.5 figure 7): a bare SYN in SYN-SENT is answered with a
    // SYN-ACK on our ISS.
    let syn2 = connect(&mut net, 444);
    let bare = TxSegment {
        seq: SeqNum(123),
        syn: true,
        window: 65535,
        mss: Some(1460),
        ..Default::default()
    };
    let frame = tcp_frame_from(PEER_MAC, PEER_IP, 444, syn2.seg.src_port, &bare, &[]);
    let out = tcp_of(&net.send(&frame));
    assert_eq!(out.len(), 1, "{out:?}");
    assert!(out[0].is_syn_ack());
    assert_eq!(out[0].seg.seq, syn2.seg.seq);
    assert_eq!(out[0].seg.ack, SeqNum(124));
}

#[test]
fn paws_drops_old_duplicates_and_out_of_window_rsts_are_ignored() {
    let mut net = Net::new(config(), echo());
    net.eng.listen(PORT, 16);
    let mut pc = connect_peer(&mut net, 40000, SeqNum(1000), FULL);
    net.advance(Duration::from_millis(100));
    let out = pc.data(&mut net, b"one");
    assert_eq!(out[0].payload, b"one");

    // RFC 7323 §5.3: a segment whose TSval is older than TS.Recent is dropped, and
    // answered with an ACK.
    let mut old = pc.seg(&net);
    old.timestamp = Some((net.peer_tsval() - 50, pc.ts_recent));
    let out = pc.send(&mut net, &old, b"stale");
    assert_eq!(out.len(), 1, "{out:?}");
    assert!(out[0].is_pure_ack());
    assert_eq!(out[0].seg.ack, pc.snd_nxt);
    assert_eq!(net.handler().received, b"one");

    // The same bytes with a current timestamp are taken.
    let out = pc.data(&mut net, b"fresh");
    assert_eq!(out[0].payload, b"fresh");
    assert_eq!(net.handler().received, b"onefresh");

    // A RST outside the window is dropped without a word (RFC 5961 §3.2).
    assert!(pc.rst(&mut net, pc.snd_nxt + 10_000_000).is_empty());
    assert!(pc.rst(&mut net, pc.snd_nxt - 1).is_empty());
    assert_eq!(net.stats().challenge_acks, 0);
    assert_eq!(net.eng.connection_count(), 1);
}

#[test]
fn time_wait_entry_answers_only_what_needs_an_answer() {
    let mut net = Net::new(
        config(),
        Recorder {
            reply_and_close: Some(b"bye".to_vec()),
            ..Default::default()
        },
    );
    net.eng.listen(PORT, 16);
    let mut pc = close_into_time_wait(&mut net, 40000, SeqNum(1000), FULL);
    assert_eq!(net.eng.time_wait_count(), 1);

    // A bare ACK at RCV.NXT is acceptable and needs nothing (RFC 9293 §3.10.7.4): were
    // it answered, two TIME-WAIT ends would ACK each other until both expire.
    assert!(pc.ack(&mut net).is_empty());
    // Anything unacceptable gets an ACK.
    let mut stray = pc.seg(&net);
    stray.seq = pc.snd_nxt + 5000;
    let out = pc.send(&mut net, &stray, b"late data");
    assert_eq!(out.len(), 1, "{out:?}");
    assert!(out[0].is_pure_ack());
    assert_eq!(out[0].seg.ack, pc.snd_nxt);

    // A RST that is not at RCV.NXT is ignored; one at RCV.NXT ends TIME-WAIT.
    assert!(pc.rst(&mut net, pc.snd_nxt + 1).is_empty());
    assert_eq!(net.eng.time_wait_count(), 1);
    assert!(pc.rst(&mut net, pc.snd_nxt).is_empty());
    assert_eq!(net.eng.time_wait_count(), 0);
    // Closed now: a stray segment is answered as for no connection.
    let mut stray = pc.seg(&net);
    stray.seq = pc.snd_nxt + 5000;
    let out = pc.send(&mut net, &stray, b"late data");
    assert_eq!(out.len(), 1, "{out:?}");
    assert!(out[0].seg.flags.rst);
}

#[test]
fn off_link_destinations_go_through_the_gateway() {
    let gateway = Ipv4Addr::new(10, 0, 0, 254);
    let gateway_mac = EthernetAddress([0x02, 0, 0, 0, 0, 0xfe]);
    let far = Ipv4Addr::new(192, 0, 2, 10);
    let mut cfg = config();
    cfg.gateway = Some(gateway);
    let mut net = Net::new(cfg, echo());
    net.eng
        .connect(SocketAddrV4::new(far, 80), ())
        .map_err(|(e, _)| e)
        .expect("connect");
    let out = net.poll();
    assert_eq!(out.len(), 1, "{out:?}");
    match out[0].arp() {
        Some(ArpRepr::EthernetIpv4 {
            operation: ArpOperation::Request,
            target_protocol_addr,
            ..
        }) => assert_eq!(target_protocol_addr, gateway),
        other => panic!("expected an ARP request for the gateway, got {other:?}"),
    }
    let reply = arp_frame(
        HOST_MAC,
        ArpOperation::Reply,
        (gateway_mac, gateway),
        (HOST_MAC, HOST_IP),
    );
    let out = tcp_of(&net.send(&reply));
    assert_eq!(out.len(), 1, "{out:?}");
    assert_eq!(out[0].eth.dst, gateway_mac);
    assert_eq!(out[0].ip.dst, far);
    assert!(out[0].seg.flags.syn);
}

// ----- 11. Regressions -----

/// A flood of retransmitted FINs (or other segments that get the TIME-WAIT ACK) must not
/// pile up timer items: the entry keeps one timer, which catches up with a restarted
/// 2·MSL wait when it fires.
#[test]
fn time_wait_flood_keeps_one_timer() {
    let mut net = time_wait_net();
    let mut pc = close_into_time_wait(&mut net, 40000, SeqNum(1000), FULL);
    assert_eq!(net.eng.connection_count(), 0);
    // The entry's timer, plus stale items of the closed connection block.
    let timers = net.eng.timers.len();
    let mut out_of_window_answered = 0;
    for i in 0..300 {
        net.clock.advance(Duration::from_millis(10));
        let mut again = pc.seg(&net);
        let fin = i % 2 == 0;
        if fin {
            again.seq = pc.snd_nxt - 1;
            again.fin = true;
        } else {
            again.seq = pc.snd_nxt + 5000;
        }
        let out = pc.send(&mut net, &again, &[]);
        // Every retransmitted FIN is answered; out-of-window segments at most once per
        // invalid_ack_interval (500 ms), as on a live connection.
        if fin {
            assert_eq!(out.len(), 1, "{out:?}");
        } else {
            assert!(out.len() <= 1, "{out:?}");
            out_of_window_answered += out.len();
        }
        assert!(out.iter().all(TcpOut::is_pure_ack));
        assert!(
            net.eng.timers.len() <= timers,
            "timer items piled up at {i}"
        );
    }
    // 150 out-of-window segments over 3 s: one answer per 500 ms.
    assert_eq!(out_of_window_answered, 6);
    assert_eq!(net.stats().invalid_acks_suppressed, 144);
    // The last FIN (at 2.99 s) restarted the wait: 10 s from it, not from the close.
    let last_fin = net.clock.now() - Duration::from_millis(10);
    net.advance(last_fin + Duration::from_millis(9_990) - net.clock.now());
    assert_eq!(net.eng.time_wait_count(), 1);
    net.advance(Duration::from_millis(20));
    assert_eq!(net.eng.time_wait_count(), 0);
    assert!(net.eng.timers.is_empty());
}

/// A SYN reopening a pair from TIME-WAIT gets an ISS beyond anything the old
/// incarnation sent (RFC 1122 §4.2.2.13), even when the clock-driven ISN has hardly
/// moved and no timestamps tell the incarnations apart.
#[test]
fn reopened_pair_starts_beyond_old_sequence_space() {
    let mut net = Net::new(
        config(),
        Recorder {
            reply_and_close: Some(b"bye".to_vec()),
            ..Default::default()
        },
    );
    net.eng.listen(PORT, 16);
    let old = close_into_time_wait(&mut net, 40000, SeqNum(1000), BARE);
    let isn = old.snd_nxt + 10;
    let out = send_syn(&mut net, 40000, isn, BARE);
    assert_eq!(out.len(), 1, "{out:?}");
    assert!(out[0].is_syn_ack());
    let gap = out[0].seg.seq - old.rcv_nxt;
    assert!(gap >= 65537, "new ISS only {gap} past the old SND.NXT");
    // The new incarnation works.
    let mut pc = PeerConn::after_syn_ack(40000, isn, BARE, &out[0]);
    assert!(pc.ack(&mut net).is_empty());
    let out = pc.data(&mut net, b"again");
    assert_eq!(out[0].payload, b"bye");
}

/// Simulation seed 119439: a client that closed second (so it kept no TIME-WAIT) reused
/// its port at once, and its clock-driven ISN had moved one less than the old incarnation
/// consumed, so its SYN carried the sequence number of its old FIN, RCV.NXT - 1 here.
/// Refused, that SYN got the TIME-WAIT ACK, whose ACK = RCV.NXT = ISS + 1 is acceptable in
/// SYN-SENT (RFC 9293 §3.10.7.3): the client dropped it without the RST that would have
/// ended TIME-WAIT (RFC 5961 §4.2), and its SYNs bounced until it gave up. A SYN at or past
/// the old FIN opens a receive space (from SEG.SEQ + 1 >= RCV.NXT) no old segment reaches:
/// it reopens the pair (RFC 6191: greater than the last sequence number seen, the FIN's,
/// or at it where refusing cannot work), without timestamps or with an equal TSval.
#[test]
fn time_wait_reopens_on_syn_at_the_old_fin() {
    let mut net = Net::new(
        config(),
        Recorder {
            reply_and_close: Some(b"bye".to_vec()),
            ..Default::default()
        },
    );
    net.eng.listen(PORT, 16);
    let old = close_into_time_wait(&mut net, 40000, SeqNum(1000), BARE);
    let fin_seq = old.snd_nxt - 1;

    // Below the old FIN: refused, and the ACK acknowledges more than that SYN, so a
    // SYN-SENT peer answers it with the RST that ends TIME-WAIT.
    let out = send_syn(&mut net, 40000, fin_seq - 1, BARE);
    assert_eq!(out.len(), 1, "{out:?}");
    assert!(out[0].is_pure_ack());
    assert!(out[0].seg.ack > fin_seq, "SYN-SENT would accept {out:?}");
    assert_eq!(net.eng.time_wait_count(), 1);

    // At the old FIN's sequence number: reopened, our ISS beyond the old sequence space.
    let out = send_syn(&mut net, 40000, fin_seq, BARE);
    assert_eq!(out.len(), 1, "{out:?}");
    assert!(out[0].is_syn_ack(), "refused with {out:?}");
    assert_eq!(out[0].seg.ack, old.snd_nxt);
    assert!(out[0].seg.seq - old.rcv_nxt >= 65537);
    assert_eq!(net.eng.time_wait_count(), 0);
    assert_eq!(net.stats().time_wait_reused, 1);
    let mut pc = PeerConn::after_syn_ack(40000, fin_seq, BARE, &out[0]);
    assert!(pc.ack(&mut net).is_empty());
    // A duplicate of the old FIN lies below the new RCV.NXT: only a duplicate ACK.
    let mut dup = pc.seg(&net);
    dup.seq = fin_seq;
    dup.ack = Some(old.rcv_nxt);
    dup.fin = true;
    let out = pc.send(&mut net, &dup, &[]);
    assert_eq!(out.len(), 1, "{out:?}");
    assert!(out[0].is_pure_ack());
    assert_eq!(out[0].seg.ack, old.snd_nxt);
    assert_eq!(net.handler().peer_closed, 1);
    let out = pc.data(&mut net, b"again");
    assert_eq!(out[0].payload, b"bye");

    // Just past the old FIN (RCV.NXT itself) reopens too.
    let old = close_into_time_wait(&mut net, 40001, SeqNum(5000), BARE);
    let out = send_syn(&mut net, 40001, old.snd_nxt, BARE);
    assert!(out.len() == 1 && out[0].is_syn_ack(), "{out:?}");

    // With timestamps, an equal TSval leaves it to the sequence number (RFC 6191).
    let old = close_into_time_wait(&mut net, 40002, SeqNum(9000), FULL);
    let out = send_syn(&mut net, 40002, old.snd_nxt - 2, FULL);
    assert!(out.len() == 1 && out[0].is_pure_ack(), "{out:?}");
    assert_eq!(net.eng.time_wait_count(), 1);
    let out = send_syn(&mut net, 40002, old.snd_nxt - 1, FULL);
    assert!(out.len() == 1 && out[0].is_syn_ack(), "{out:?}");
    assert_eq!(net.eng.time_wait_count(), 0);
    assert_eq!(net.stats().time_wait_reused, 3);
}

/// RFC 7323 §7.1: ISN - TSval must not be the same for every connection opened at one
/// instant (it would be the engine's clock if both used the same hash).
#[test]
fn isn_minus_tsval_does_not_reveal_the_clock() {
    let mut net = Net::new(config(), echo());
    net.eng.listen(PORT, 16);
    let mut diffs = Vec::new();
    for port in 40001..40005 {
        let out = send_syn(&mut net, port, SeqNum(7000), FULL);
        assert!(out[0].is_syn_ack());
        diffs.push(out[0].seg.seq.0.wrapping_sub(out[0].tsval()));
    }
    diffs.sort_unstable();
    diffs.dedup();
    assert_eq!(diffs.len(), 4, "ISN - TSval is the same for all tuples");
}

/// `resume_receive` runs the handler's data callback; an abort there is a real abort:
/// RST, close reason `Aborted`, counted as such.
#[test]
fn abort_inside_resumed_delivery_is_reported_as_aborted() {
    let mut net = Net::new(
        config(),
        Recorder {
            pause: true,
            ..Default::default()
        },
    );
    net.eng.listen(PORT, 16);
    let mut pc = connect_peer(&mut net, 40000, SeqNum(1000), BARE);
    let id = net.handler().ids[0];
    pc.data(&mut net, b"hello");
    assert_eq!(net.handler().data_calls, 1);
    net.eng.handler_mut().abort_on_data = true;
    assert!(net.eng.resume_receive(id));
    let out = tcp_of(&net.poll());
    assert!(out.iter().any(TcpOut::is_rst), "{out:?}");
    assert_eq!(net.handler().data_calls, 2);
    assert_eq!(net.handler().closed, vec![CloseReason::Aborted]);
    assert_eq!(net.stats().conns_aborted, 1);
    assert_eq!(net.stats().rsts_sent, 1);
    assert_eq!(net.stats().conns_closed, 0);
    assert_eq!(net.eng.connection_count(), 0);
    assert!(!net.eng.resume_receive(id));
}

/// After the application aborts inside a callback it gets no more callbacks for that
/// connection but `closed`: not `peer_closed` for a FIN in the same segment, nor the
/// final offer of unread bytes.
#[test]
fn no_callbacks_after_abort_in_a_callback() {
    let mut net = Net::new(
        config(),
        Recorder {
            abort_on_data: true,
            ..Default::default()
        },
    );
    net.eng.listen(PORT, 16);
    let mut pc = connect_peer(&mut net, 40000, SeqNum(1000), BARE);
    let mut seg = pc.seg(&net);
    seg.fin = true;
    seg.psh = true;
    pc.snd_nxt += 6;
    let out = pc.send(&mut net, &seg, b"hello");
    assert!(out.iter().any(TcpOut::is_rst), "{out:?}");
    assert_eq!(net.handler().data_calls, 1);
    assert_eq!(net.handler().peer_closed, 0);
    assert_eq!(net.handler().closed, vec![CloseReason::Aborted]);
    assert_eq!(net.stats().unread_bytes_discarded, 5);
}

/// Calling `listen` again on a listening port keeps the count of half-open connections.
#[test]
fn listen_again_keeps_the_half_open_count() {
    let mut net = Net::new(config(), echo());
    net.eng.listen(PORT, 1);
    let out = send_syn(&mut net, 40001, SeqNum(1000), BARE);
    assert!(out[0].is_syn_ack());
    assert_eq!(net.eng.connection_count(), 1);
    net.eng.listen(PORT, 1);
    // The backlog is still full: a cookie answers, no second block.
    let out = send_syn(&mut net, 40002, SeqNum(2000), BARE);
    assert!(out[0].is_syn_ack());
    assert_eq!(net.eng.connection_count(), 1);
    assert_eq!(net.stats().syn_cookies_sent, 1);
}

/// When ARP learns that a neighbour's address moved to another MAC, connections that
/// cached the old one follow.
#[test]
fn changed_arp_mapping_updates_cached_next_hop() {
    const NEW_MAC: MacAddr = EthernetAddress([0x02, 0, 0, 0, 0, 0x77]);
    let mut net = Net::new(config(), echo());
    net.eng.listen(PORT, 16);
    let mut pc = connect_peer(&mut net, 40000, SeqNum(1000), BARE);
    let out = tcp_of(&net.send(&arp_frame(
        EthernetAddress::BROADCAST,
        ArpOperation::Request,
        (PEER_MAC, PEER_IP),
        (EthernetAddress([0; 6]), HOST_IP),
    )));
    assert!(out.is_empty());
    let out = pc.data(&mut net, b"one");
    assert_eq!(out[0].eth.dst, PEER_MAC);
    // The peer's address moves (gratuitous ARP from the new NIC).
    net.send(&arp_frame(
        EthernetAddress::BROADCAST,
        ArpOperation::Request,
        (NEW_MAC, PEER_IP),
        (EthernetAddress([0; 6]), PEER_IP),
    ));
    pc.mac = NEW_MAC;
    let out = pc.data(&mut net, b"two");
    assert_eq!(out[0].payload, b"two");
    assert_eq!(out[0].eth.dst, NEW_MAC);
}

// ----- Orphans -----

#[test]
fn past_max_orphans_the_oldest_orphan_is_reset_and_its_slot_freed() {
    let mut cfg = config();
    cfg.max_orphans = 2;
    let handler = Recorder {
        reply_and_close: Some(b"bye".to_vec()),
        ..Default::default()
    };
    let mut net = Net::new(cfg, handler);
    net.eng.listen(PORT, 16);
    // Each peer asks, gets "bye" and our FIN, and acknowledges neither: an orphan.
    let mut peers: Vec<PeerConn> = Vec::new();
    for (i, port) in [40000u16, 40001, 40002].into_iter().enumerate() {
        let mut pc = connect_peer(&mut net, port, SeqNum(1000 * (i as u32 + 1)), FULL);
        let out = pc.data(&mut net, b"hi");
        assert!(out
            .iter()
            .any(|o| o.seg.dst_port == port && o.seg.flags.fin));
        if i < 2 {
            assert!(out.iter().all(|o| !o.is_rst()), "{out:?}");
        } else {
            // The third orphan is one too many: the oldest, the first peer's, is reset
            // at the sequence number it expects.
            let rst: Vec<_> = out.iter().filter(|o| o.is_rst()).collect();
            assert_eq!(rst.len(), 1, "{out:?}");
            assert_eq!(rst[0].seg.dst_port, 40000);
            assert_eq!(rst[0].seg.seq, peers[0].rcv_nxt);
        }
        peers.push(pc);
    }
    assert_eq!(net.stats().orphans_reset, 1);
    assert_eq!(net.handler().closed, vec![CloseReason::Aborted]);
    assert_eq!(net.eng.connection_count(), 2);
    assert_eq!(net.eng.orphan_count(), 2);
    // The second peer finishes properly: its slot comes back through TIME-WAIT, and
    // the orphan count with it.
    let pb = &mut peers[1];
    assert!(pb.ack(&mut net).is_empty());
    assert_eq!(pb.fin(&mut net).len(), 1);
    assert_eq!(net.eng.connection_count(), 1);
    assert_eq!(net.eng.orphan_count(), 1);
    assert_eq!(net.stats().orphans_reset, 1);
}

// ----- Martian and broadcast addressing -----

mod martians;

// ----- Memory a peer can make the engine hold -----

mod pinning;

// ----- Counts that replaced scans -----

mod limits;
