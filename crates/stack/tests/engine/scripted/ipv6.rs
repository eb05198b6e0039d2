//! IPv6 on the wire: Neighbor Discovery both ways, duplicate address detection and the
//! MLD report at start, echo, TCP over IPv6 (handshake, data, our MSS), Packet Too Big
//! lowering the segment size, and hostile packets (extension-header chains, fragments,
//! martian sources, spoofed advertisements, Neighbor Discovery that may not be genuine)
//! counted and unanswered. `extensions`: the extension headers Linux answers with a
//! Parameter Problem or reads through, and advertisements without Override.
//! `link_local`: TCP to our link-local address beside the configured one.
//!
//! The peer writes and reads its packets with smoltcp's IPv6 and ICMPv6 types, not the
//! engine's, so a bug in the engine's writers cannot hide in both directions.

use std::net::Ipv6Addr;

use smoltcp::wire::{
    Icmpv6Packet, Icmpv6Repr, IpProtocol as SmolProtocol, Ipv6Packet, Ipv6Repr, NdiscNeighborFlags,
    NdiscRepr, RawHardwareAddress,
};

use super::*;

mod extensions;
mod link_local;
mod nud;
mod opens;

const PEER6: Ipv6Addr = Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 1);
const HOST6: Ipv6Addr = Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 2);
const ALL_NODES: Ipv6Addr = Ipv6Addr::new(0xff02, 0, 0, 0, 0, 0, 0, 1);

/// The engine's configuration with `HOST6/64` beside its IPv4 address, and `transmits`
/// duplicate-detection probes per address.
fn config6(transmits: u8) -> EngineConfig {
    let mut cfg = config();
    cfg.ipv6 = vec![(HOST6, 64)];
    cfg.dad_transmits = transmits;
    cfg
}

/// A listening engine whose IPv6 addresses are usable at once.
fn listening6() -> Net {
    let mut net = Net::new(config6(0), echo());
    net.eng.listen(PORT, 16);
    net
}

fn solicited_node(a: Ipv6Addr) -> Ipv6Addr {
    let o = a.octets();
    Ipv6Addr::new(
        0xff02,
        0,
        0,
        0,
        0,
        1,
        0xff00 | u16::from(o[13]),
        u16::from_be_bytes([o[14], o[15]]),
    )
}

fn group_mac(group: Ipv6Addr) -> MacAddr {
    let o = group.octets();
    MacAddr([0x33, 0x33, o[12], o[13], o[14], o[15]])
}

/// An IPv6 packet in a frame: the fixed header (written by smoltcp), then `payload`
/// (extension headers and the upper layer, the first of them `next_header`).
fn ipv6_frame(
    macs: (MacAddr, MacAddr),
    src: Ipv6Addr,
    dst: Ipv6Addr,
    next_header: u8,
    hop_limit: u8,
    payload: &[u8],
) -> Vec<u8> {
    let repr = Ipv6Repr {
        src_addr: src,
        dst_addr: dst,
        next_header: SmolProtocol::from(next_header),
        payload_len: payload.len(),
        hop_limit,
    };
    let mut ip = vec![0u8; repr.buffer_len() + payload.len()];
    repr.emit(&mut Ipv6Packet::new_unchecked(&mut ip[..]));
    ip[repr.buffer_len()..].copy_from_slice(payload);
    eth_frame(macs.0, macs.1, EthernetProtocol::Ipv6, &ip)
}

/// An ICMPv6 message from `src` to `dst`, checksummed by smoltcp.
fn icmpv6(src: Ipv6Addr, dst: Ipv6Addr, repr: &Icmpv6Repr<'_>) -> Vec<u8> {
    let mut buf = vec![0u8; repr.buffer_len()];
    repr.emit(
        &src,
        &dst,
        &mut Icmpv6Packet::new_unchecked(&mut buf[..]),
        &ChecksumCapabilities::default(),
    );
    buf
}

/// A Neighbor Solicitation for `target` from `src` (with our MAC as its link-layer
/// option unless `src` is unspecified), to `target`'s solicited-node group.
fn solicitation(src: Ipv6Addr, target: Ipv6Addr, hop_limit: u8) -> Vec<u8> {
    let lladdr = (!src.is_unspecified()).then(|| RawHardwareAddress::from_bytes(&PEER_MAC.0));
    let repr = Icmpv6Repr::Ndisc(NdiscRepr::NeighborSolicit {
        target_addr: target,
        lladdr,
    });
    let group = solicited_node(target);
    let icmp = icmpv6(src, group, &repr);
    ipv6_frame(
        (PEER_MAC, group_mac(group)),
        src,
        group,
        58,
        hop_limit,
        &icmp,
    )
}

/// A Neighbor Advertisement for `target` at `mac`, from `target` (to us when
/// `solicited`, to all nodes otherwise).
fn advertisement(target: Ipv6Addr, mac: MacAddr, solicited: bool) -> Vec<u8> {
    advertisement_from(target, target, mac, solicited)
}

/// [`advertisement`] sent from `src`.
fn advertisement_from(src: Ipv6Addr, target: Ipv6Addr, mac: MacAddr, solicited: bool) -> Vec<u8> {
    advertisement_flags(src, target, mac, solicited, true)
}

/// [`advertisement_from`] with the Override flag `override_`.
fn advertisement_flags(
    src: Ipv6Addr,
    target: Ipv6Addr,
    mac: MacAddr,
    solicited: bool,
    override_: bool,
) -> Vec<u8> {
    let mut flags = NdiscNeighborFlags::empty();
    flags.set(NdiscNeighborFlags::SOLICITED, solicited);
    flags.set(NdiscNeighborFlags::OVERRIDE, override_);
    let repr = Icmpv6Repr::Ndisc(NdiscRepr::NeighborAdvert {
        flags,
        target_addr: target,
        lladdr: Some(RawHardwareAddress::from_bytes(&mac.0)),
    });
    let (dst, dst_mac) = if solicited {
        (HOST6, HOST_MAC)
    } else {
        (ALL_NODES, group_mac(ALL_NODES))
    };
    let icmp = icmpv6(src, dst, &repr);
    ipv6_frame((mac, dst_mac), src, dst, 58, 255, &icmp)
}

/// A segment from the peer to the engine's port over IPv6.
fn tcp6_frame(src_port: u16, seg: &TxSegment, payload: &[u8]) -> Vec<u8> {
    let tcp = tcp_bytes_to(PEER6, HOST6, src_port, PORT, seg, payload);
    ipv6_frame((PEER_MAC, HOST_MAC), PEER6, HOST6, 6, 64, &tcp)
}

/// An IPv6 packet the engine sent: header, upper-layer protocol and payload.
struct Out6 {
    eth: EthernetHeader,
    src: Ipv6Addr,
    dst: Ipv6Addr,
    hop_limit: u8,
    next_header: u8,
    payload: Vec<u8>,
}

fn ipv6_of(frames: &[Frame]) -> Vec<Out6> {
    frames
        .iter()
        .filter_map(|f| {
            let eth = f.eth();
            if eth.ethertype != EthernetProtocol::Ipv6 {
                return None;
            }
            let packet = Ipv6Packet::new_checked(&f.0[ETHERNET_HEADER_LEN..]).expect("IPv6");
            let repr = Ipv6Repr::parse(&packet).expect("an IPv6 header");
            Some(Out6 {
                eth,
                src: repr.src_addr,
                dst: repr.dst_addr,
                hop_limit: repr.hop_limit,
                next_header: u8::from(repr.next_header),
                payload: packet.payload()[..repr.payload_len].to_vec(),
            })
        })
        .collect()
}

impl Out6 {
    /// The ICMPv6 message, checksum verified by smoltcp.
    fn icmp(&self) -> Option<Icmpv6Repr<'_>> {
        if self.next_header != 58 {
            return None;
        }
        let packet = Icmpv6Packet::new_checked(&self.payload[..]).expect("ICMPv6");
        Some(
            Icmpv6Repr::parse(
                &self.src,
                &self.dst,
                &packet,
                &ChecksumCapabilities::default(),
            )
            .expect("a valid ICMPv6 message"),
        )
    }

    /// The TCP segment, checksum verified over the IPv6 pseudo-header.
    fn tcp(&self) -> Option<(Segment, Vec<u8>)> {
        if self.next_header != 6 {
            return None;
        }
        let (seg, payload) =
            Segment::parse(&self.payload, self.src, self.dst, false).expect("a valid segment");
        Some((seg, payload.to_vec()))
    }
}

/// The Neighbor Solicitations among `packets`, each with its target and its link-layer
/// address option.
fn solicitations_in(packets: &[Out6]) -> Vec<(&Out6, Ipv6Addr, Option<RawHardwareAddress>)> {
    packets
        .iter()
        .filter_map(|p| match p.icmp() {
            Some(Icmpv6Repr::Ndisc(NdiscRepr::NeighborSolicit {
                target_addr,
                lladdr,
            })) => Some((p, target_addr, lladdr)),
            _ => None,
        })
        .collect()
}

/// The targets of the Neighbor Solicitations among `packets`.
fn solicited_targets(packets: &[Out6]) -> Vec<Ipv6Addr> {
    solicitations_in(packets).into_iter().map(|s| s.1).collect()
}

fn tcp6_of(frames: &[Frame]) -> Vec<(Segment, Vec<u8>)> {
    ipv6_of(frames).iter().filter_map(Out6::tcp).collect()
}

#[test]
fn at_start_the_engine_joins_its_groups_and_probes_its_addresses() {
    let mut net = Net::new(config6(1), echo());
    net.eng.listen(PORT, 16);
    let boot = ipv6_of(&net.boot);
    // The MLDv2 report: from the unspecified address (nothing is ours yet) to the MLD
    // routers, a Hop-by-Hop header with Router Alert first.
    let report = boot
        .iter()
        .find(|p| p.dst == "ff02::16".parse::<Ipv6Addr>().unwrap());
    let report = report.expect("an MLD report");
    assert_eq!(
        (report.src, report.hop_limit, report.next_header),
        (Ipv6Addr::UNSPECIFIED, 1, 0)
    );
    assert_eq!(report.payload[..8], [58, 0, 5, 2, 0, 0, 1, 0]);
    assert_eq!(report.payload[8], 143, "an MLDv2 report");
    // One probe for each address, from the unspecified address to its group.
    let probes: Vec<Ipv6Addr> = solicitations_in(&boot)
        .into_iter()
        .map(|(p, target_addr, lladdr)| {
            assert!(p.src.is_unspecified() && lladdr.is_none());
            assert_eq!(p.dst, solicited_node(target_addr));
            assert_eq!(p.eth.dst, group_mac(p.dst));
            assert_eq!(p.hop_limit, 255);
            target_addr
        })
        .collect();
    assert_eq!(probes.len(), 2, "{probes:?}");
    assert!(probes[0].is_unicast_link_local() && probes[1] == HOST6);
    // The groups reported are the probed addresses'.
    let groups: Vec<Ipv6Addr> = report.payload[16..]
        .chunks(20)
        .map(|r| Ipv6Addr::from(<[u8; 16]>::try_from(&r[4..20]).unwrap()))
        .collect();
    for p in &probes {
        assert!(groups.contains(&solicited_node(*p)), "{groups:?}");
    }
    // Tentative: a SYN to the address is not answered.
    let syn = syn_seg(&net, SeqNum(100), FULL);
    assert!(tcp6_of(&net.send(&tcp6_frame(40000, &syn, &[]))).is_empty());
    assert_eq!(net.dropped(DropReason::NotOurAddress), 1);
    // A second later, unanswered, the address is ours.
    net.advance(Duration::from_millis(1000));
    let syn = syn_seg(&net, SeqNum(100), FULL);
    let out = tcp6_of(&net.send(&tcp6_frame(40001, &syn, &[])));
    assert!(
        out.len() == 1 && out[0].0.flags.syn && out[0].0.flags.ack,
        "{}",
        out.len()
    );
    assert_eq!(net.stats().neighbor_solicitations_sent, 2);
}

#[test]
fn a_solicitation_is_answered_and_its_sender_learned() {
    let mut net = listening6();
    let out = ipv6_of(&net.send(&solicitation(PEER6, HOST6, 255)));
    assert_eq!(out.len(), 1);
    let na = &out[0];
    assert_eq!((na.src, na.dst, na.hop_limit), (HOST6, PEER6, 255));
    assert_eq!((na.eth.src, na.eth.dst), (HOST_MAC, PEER_MAC));
    match na.icmp() {
        Some(Icmpv6Repr::Ndisc(NdiscRepr::NeighborAdvert {
            flags,
            target_addr,
            lladdr,
        })) => {
            assert_eq!(target_addr, HOST6);
            assert!(flags.contains(NdiscNeighborFlags::SOLICITED | NdiscNeighborFlags::OVERRIDE));
            assert!(!flags.contains(NdiscNeighborFlags::ROUTER));
            assert_eq!(lladdr.unwrap().as_bytes(), &HOST_MAC.0);
        }
        other => panic!("not an advertisement: {other:?}"),
    }
    assert_eq!(net.stats().neighbor_advertisements_sent, 1);
    // Learned: an active open to the peer goes out at once, without a solicitation.
    net.eng.connect((PEER6, 9).into(), ()).ok().unwrap();
    let out = ipv6_of(&net.poll());
    assert_eq!(out.len(), 1);
    let (syn, _) = out[0].tcp().expect("a SYN");
    assert!(syn.flags.syn && !syn.flags.ack);
    assert_eq!(
        (out[0].src, out[0].dst, out[0].eth.dst),
        (HOST6, PEER6, PEER_MAC)
    );
    // Our MSS over IPv6: the MTU less 40 and 20 bytes.
    assert_eq!(syn.mss, Some(1440));
}

/// A solicitation whose link-layer address no neighbour can own (a group, broadcast,
/// all zeros) is dropped: answered, the unicast advertisement would go to every node
/// on the link.
#[test]
fn a_solicitation_from_a_group_link_layer_address_is_unanswered() {
    let mut net = listening6();
    let group = solicited_node(HOST6);
    for mac in [[0x03, 0, 0, 0, 0, 0], [0xff; 6], [0; 6]] {
        let repr = Icmpv6Repr::Ndisc(NdiscRepr::NeighborSolicit {
            target_addr: HOST6,
            lladdr: Some(RawHardwareAddress::from_bytes(&mac)),
        });
        let icmp = icmpv6(PEER6, group, &repr);
        let frame = ipv6_frame((PEER_MAC, group_mac(group)), PEER6, group, 58, 255, &icmp);
        assert!(net.send(&frame).is_empty(), "answered {mac:x?}");
    }
    assert_eq!(net.dropped(DropReason::BadNeighborDiscovery), 3);
    assert_eq!(net.stats().neighbor_advertisements_sent, 0);
}

#[test]
fn an_active_open_resolves_its_neighbor_first() {
    let mut net = listening6();
    net.eng.connect((PEER6, 9).into(), ()).ok().unwrap();
    let out = ipv6_of(&net.poll());
    assert_eq!(out.len(), 1, "a solicitation and nothing else");
    match out[0].icmp() {
        Some(Icmpv6Repr::Ndisc(NdiscRepr::NeighborSolicit {
            target_addr,
            lladdr,
        })) => {
            assert_eq!(target_addr, PEER6);
            assert_eq!(lladdr.unwrap().as_bytes(), &HOST_MAC.0);
        }
        other => panic!("not a solicitation: {other:?}"),
    }
    assert_eq!((out[0].src, out[0].dst), (HOST6, solicited_node(PEER6)));
    assert_eq!(out[0].eth.dst, group_mac(solicited_node(PEER6)));
    // The answer releases the SYN that waited.
    let out = tcp6_of(&net.send(&advertisement(PEER6, PEER_MAC, true)));
    assert_eq!(out.len(), 1);
    assert!(out[0].0.flags.syn);
}

#[test]
fn an_echo_request_is_answered_from_the_address_it_was_sent_to() {
    let mut net = listening6();
    let repr = Icmpv6Repr::EchoRequest {
        ident: 7,
        seq_no: 3,
        data: b"ping over six",
    };
    let icmp = icmpv6(PEER6, HOST6, &repr);
    let out = ipv6_of(&net.send(&ipv6_frame(
        (PEER_MAC, HOST_MAC),
        PEER6,
        HOST6,
        58,
        64,
        &icmp,
    )));
    assert_eq!(out.len(), 1);
    assert_eq!(
        (out[0].src, out[0].dst, out[0].eth.dst),
        (HOST6, PEER6, PEER_MAC)
    );
    match out[0].icmp() {
        Some(Icmpv6Repr::EchoReply {
            ident: 7,
            seq_no: 3,
            data,
        }) => assert_eq!(data, b"ping over six"),
        other => panic!("not the reply: {other:?}"),
    }
    // To all nodes: no answer (no amplification).
    let icmp = icmpv6(PEER6, ALL_NODES, &repr);
    let frame = ipv6_frame(
        (PEER_MAC, group_mac(ALL_NODES)),
        PEER6,
        ALL_NODES,
        58,
        64,
        &icmp,
    );
    assert!(net.send(&frame).is_empty());
    assert_eq!(net.stats().icmp_echo_replies, 1);
}

/// The handshake, data both ways and the close, over IPv6.
#[test]
fn tcp_runs_over_ipv6() {
    let mut net = listening6();
    let syn = syn_seg(&net, SeqNum(1000), FULL);
    let out = tcp6_of(&net.send(&tcp6_frame(40000, &syn, &[])));
    assert_eq!(out.len(), 1);
    let syn_ack = &out[0].0;
    assert!(syn_ack.flags.syn && syn_ack.flags.ack);
    assert_eq!(syn_ack.ack, SeqNum(1001));
    assert_eq!(syn_ack.mss, Some(1440));
    let mut seq = SeqNum(1001);
    let ours = syn_ack.seq + 1;
    let ack = TxSegment {
        seq,
        ack: Some(ours),
        window: 65535,
        timestamp: Some((net.peer_tsval(), syn_ack.timestamp.unwrap().0)),
        ..Default::default()
    };
    net.send(&tcp6_frame(40000, &ack, &[]));
    assert_eq!(
        net.handler().accepted,
        vec![SocketAddr::from((PEER6, 40000))]
    );
    let data = pattern(3000, 9);
    // The echo, placed by sequence number (a tail loss probe may send a segment twice).
    let mut echoed = vec![0u8; data.len()];
    let mut sent = Vec::new();
    for chunk in data.chunks(1000) {
        let seg = TxSegment { seq, ..ack };
        sent.extend(tcp6_of(&net.send(&tcp6_frame(40000, &seg, chunk))));
        seq += chunk.len();
    }
    sent.extend(tcp6_of(&net.advance(Duration::from_millis(50))));
    let mut covered = 0;
    for (s, payload) in &sent {
        assert!(s.payload_len <= 1428, "a segment above our MSS");
        let at = s.seq.0.wrapping_sub(ours.0) as usize;
        echoed[at..at + payload.len()].copy_from_slice(payload);
        covered = covered.max(at + payload.len());
    }
    assert_eq!(covered, data.len());
    assert!(echoed == data, "the echo differs");
    assert_eq!(net.eng.connection_count(), 1);
}

#[test]
fn a_packet_too_big_lowers_the_segment_size_and_resends() {
    let mut net = Net::new(config6(0), Recorder::default());
    net.eng.listen(PORT, 16);
    let syn = syn_seg(&net, SeqNum(1000), FULL);
    let out = tcp6_of(&net.send(&tcp6_frame(40000, &syn, &[])));
    let syn_ack = out[0].0;
    let ack = TxSegment {
        seq: SeqNum(1001),
        ack: Some(syn_ack.seq + 1),
        window: 65535,
        timestamp: Some((net.peer_tsval(), syn_ack.timestamp.unwrap().0)),
        ..Default::default()
    };
    net.send(&tcp6_frame(40000, &ack, &[]));
    let id = net.handler().ids[0];
    let body = pattern(6000, 1);
    net.eng
        .with_conn(id, |_, conn| assert_eq!(conn.send(&body), Ok(6000)))
        .expect("live");
    let sent = ipv6_of(&net.poll());
    let big = sent
        .iter()
        .find(|p| p.tcp().is_some_and(|(s, _)| s.payload_len > 1300));
    let big = big.expect("a full-sized segment");
    // The router's Packet Too Big quotes it (header and the start of TCP).
    let quoted = Ipv6Repr {
        src_addr: big.src,
        dst_addr: big.dst,
        next_header: SmolProtocol::Tcp,
        payload_len: big.payload.len(),
        hop_limit: big.hop_limit,
    };
    let router: Ipv6Addr = "fd00::fe".parse().unwrap();
    let from_router = |repr: &Icmpv6Repr<'_>| {
        let icmp = icmpv6(router, HOST6, repr);
        ipv6_frame((PEER_MAC, HOST_MAC), router, HOST6, 58, 64, &icmp)
    };
    let ptb = Icmpv6Repr::PktTooBig {
        mtu: 1280,
        header: quoted,
        data: &big.payload[..64],
    };
    let out = tcp6_of(&net.send(&from_router(&ptb)));
    assert_eq!(net.stats().path_mtu_lowered, 1);
    // Resent at the new size: 1280 less 40, 20 and 12 bytes of timestamps.
    assert!(!out.is_empty());
    for (s, _) in &out {
        assert!(s.payload_len <= 1208, "{}", s.payload_len);
    }
    // A second one about a segment not in flight (a blind guess) changes nothing.
    let mut guess = big.payload[..64].to_vec();
    guess[4..8].copy_from_slice(&0x1234_5678u32.to_be_bytes());
    let ptb = Icmpv6Repr::PktTooBig {
        mtu: 1280,
        header: quoted,
        data: &guess,
    };
    net.send(&from_router(&ptb));
    assert_eq!(net.stats().path_mtu_lowered, 1);
}

/// On a link whose steering the stack cannot predict (a TAP with several queues) a
/// router's Packet Too Big lands on whichever worker its own hash picks, not the one
/// the flow's segments reach: one about a flow a sibling owns is handed to that
/// sibling, as the flow's segments are; one about a flow this worker owns but does not
/// hold changes nothing.
#[test]
fn a_packet_too_big_about_a_siblings_flow_goes_to_the_sibling() {
    let mut dev = Capabilities::new(HOST_MAC, 1500);
    dev.queue_count = 2;
    let wire = Capabilities::new(PEER_MAC, 1500);
    let cfg = config6(0);
    let ephemeral = cfg.ephemeral_ports.clone();
    let mut net = Net::with_caps(cfg, Recorder::default(), wire, dev);
    net.eng.listen(PORT, 16);
    let owner = |port: u16| {
        let key = FlowKey::new(PEER6.into(), port, PORT, 0);
        rusty_stack::internals::owner_queue(&key, &ephemeral, 2)
    };
    let theirs = (40000..).find(|&p| owner(p) == 1).unwrap();
    let ours = (40000..).find(|&p| owner(p) == 0).unwrap();
    let router: Ipv6Addr = "fd00::fe".parse().unwrap();
    let ptb_about = |port: u16| {
        let mut tcp = [0u8; 20];
        tcp[..2].copy_from_slice(&PORT.to_be_bytes());
        tcp[2..4].copy_from_slice(&port.to_be_bytes());
        tcp[12] = 5 << 4;
        let quoted = Ipv6Repr {
            src_addr: HOST6,
            dst_addr: PEER6,
            next_header: SmolProtocol::Tcp,
            payload_len: 1440,
            hop_limit: 64,
        };
        let ptb = Icmpv6Repr::PktTooBig {
            mtu: 1280,
            header: quoted,
            data: &tcp,
        };
        let icmp = icmpv6(router, HOST6, &ptb);
        ipv6_frame((PEER_MAC, HOST_MAC), router, HOST6, 58, 64, &icmp)
    };
    let frame = ptb_about(theirs);
    net.send(&frame);
    let mut handed = Vec::new();
    net.eng.take_misdirected(&mut handed);
    assert_eq!(handed, vec![(1, frame)]);
    net.send(&ptb_about(ours));
    net.eng.take_misdirected(&mut handed);
    assert_eq!(handed.len(), 1, "nothing more handed over");
    assert_eq!(net.stats().path_mtu_lowered, 0);
}

#[test]
fn a_duplicate_address_is_not_used_and_a_link_local_one_is_drawn_again() {
    let mut net = Net::new(config6(1), echo());
    net.eng.listen(PORT, 16);
    let probes = solicited_targets(&ipv6_of(&net.boot));
    let link_local = probes[0];
    // Another node probes for our global address: it is a duplicate, never used.
    assert!(net
        .send(&solicitation(Ipv6Addr::UNSPECIFIED, HOST6, 255))
        .is_empty());
    // Another node holds our link-local address: a new one is drawn and probed.
    let out = ipv6_of(&net.send(&advertisement(link_local, PEER_MAC, false)));
    assert_eq!(net.stats().duplicate_addresses, 2);
    let again = solicited_targets(&out);
    assert_eq!(again.len(), 1);
    assert!(again[0].is_unicast_link_local() && again[0] != link_local);
    net.advance(Duration::from_secs(2));
    // The global address stays unused: a SYN to it is not answered...
    let syn = syn_seg(&net, SeqNum(5), FULL);
    assert!(tcp6_of(&net.send(&tcp6_frame(40000, &syn, &[]))).is_empty());
    // ...and nobody is told it is ours.
    assert!(net.send(&solicitation(PEER6, HOST6, 255)).is_empty());
}

#[test]
fn an_open_finds_no_source_address_until_duplicate_detection_ends() {
    let mut net = Net::new(config6(1), echo());
    assert!(net.eng.detecting_duplicates());
    let open = |net: &mut Net| net.eng.connect((PEER6, 9).into(), ()).map(|_| ());
    assert_eq!(
        open(&mut net).map_err(|(e, _)| e),
        Err(ConnectError::NoSourceAddress)
    );
    net.advance(Duration::from_secs(2));
    assert!(!net.eng.detecting_duplicates());
    assert!(open(&mut net).is_ok());
    assert!(!Net::new(config(), echo()).eng.detecting_duplicates());
    assert!(
        !listening6().eng.detecting_duplicates(),
        "no probes asked for"
    );
}

#[test]
fn our_address_is_defended_and_spoofed_advertisements_change_nothing() {
    let mut net = listening6();
    // A node probing for an address we hold is told it is taken, at all nodes.
    let out = ipv6_of(&net.send(&solicitation(Ipv6Addr::UNSPECIFIED, HOST6, 255)));
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].dst, ALL_NODES);
    // An advertisement claiming our address for another MAC is counted and ignored,
    // whether it comes from another address or from ours.
    let evil = MacAddr([0x02, 0, 0, 0, 0, 0x66]);
    assert!(net
        .send(&advertisement_from(PEER6, HOST6, evil, false))
        .is_empty());
    assert_eq!(net.dropped(DropReason::AddressConflict), 1);
    assert!(net.send(&advertisement(HOST6, evil, false)).is_empty());
    assert_eq!(net.dropped(DropReason::OwnSourceAddress), 1);
    let fake = advertisement(PEER6, evil, false);
    // An unsolicited advertisement for a neighbour we never asked about makes no entry:
    // an open to it still solicits first.
    net.send(&fake);
    net.eng.connect((PEER6, 9).into(), ()).ok().unwrap();
    let out = ipv6_of(&net.poll());
    assert!(matches!(
        out[0].icmp(),
        Some(Icmpv6Repr::Ndisc(NdiscRepr::NeighborSolicit { .. }))
    ));
    // Still ours: solicitations are answered with our MAC (and the asker learned,
    // which releases the SYN that waited).
    let out = ipv6_of(&net.send(&solicitation(PEER6, HOST6, 255)));
    let answers = out.iter().filter(|p| {
        matches!(p.icmp(), Some(Icmpv6Repr::Ndisc(NdiscRepr::NeighborAdvert { lladdr: Some(l), .. })) if l.as_bytes() == HOST_MAC.0)
    });
    assert_eq!(answers.count(), 1);
    assert_eq!(out.iter().filter(|p| p.tcp().is_some()).count(), 1);
}

#[test]
fn hostile_ipv6_is_counted_and_unanswered() {
    let mut net = listening6();
    let syn = syn_seg(&net, SeqNum(1), FULL);
    let tcp = tcp_bytes_to(PEER6, HOST6, 40000, PORT, &syn, &[]);
    let to_us = (PEER_MAC, HOST_MAC);
    let cases: Vec<(Vec<u8>, DropReason)> = vec![
        // A fragment of a larger packet.
        (
            ipv6_frame(
                to_us,
                PEER6,
                HOST6,
                44,
                64,
                &[&[6, 0, 0, 1, 0, 0, 0, 9][..], &tcp].concat(),
            ),
            DropReason::Fragment,
        ),
        // Destination options that loop on themselves past the bound.
        (
            ipv6_frame(
                to_us,
                PEER6,
                HOST6,
                60,
                64,
                &[[60, 0, 1, 4, 0, 0, 0, 0]; 12].concat(),
            ),
            DropReason::BadExtensionHeaders,
        ),
        // Martian sources.
        (
            ipv6_frame(
                to_us,
                ALL_NODES,
                HOST6,
                6,
                64,
                &tcp_bytes_to(ALL_NODES, HOST6, 40000, PORT, &syn, &[]),
            ),
            DropReason::MartianSource,
        ),
        (
            ipv6_frame(
                to_us,
                Ipv6Addr::LOCALHOST,
                HOST6,
                6,
                64,
                &tcp_bytes_to(Ipv6Addr::LOCALHOST, HOST6, 40000, PORT, &syn, &[]),
            ),
            DropReason::MartianSource,
        ),
        (
            {
                let mapped = Ipv4Addr::new(10, 0, 0, 1).to_ipv6_mapped();
                ipv6_frame(
                    to_us,
                    mapped,
                    HOST6,
                    6,
                    64,
                    &tcp_bytes_to(mapped, HOST6, 40000, PORT, &syn, &[]),
                )
            },
            DropReason::MartianSource,
        ),
        (
            ipv6_frame(
                to_us,
                HOST6,
                HOST6,
                6,
                64,
                &tcp_bytes_to(HOST6, HOST6, 40000, PORT, &syn, &[]),
            ),
            DropReason::OwnSourceAddress,
        ),
        // TCP to a group.
        (
            ipv6_frame(
                (PEER_MAC, group_mac(ALL_NODES)),
                PEER6,
                ALL_NODES,
                6,
                64,
                &tcp_bytes_to(PEER6, ALL_NODES, 40000, PORT, &syn, &[]),
            ),
            DropReason::NotOurAddress,
        ),
        // To another host.
        (
            {
                let other: Ipv6Addr = "fd00::77".parse().unwrap();
                ipv6_frame(
                    to_us,
                    PEER6,
                    other,
                    6,
                    64,
                    &tcp_bytes_to(PEER6, other, 40000, PORT, &syn, &[]),
                )
            },
            DropReason::NotOurAddress,
        ),
        // Neighbor Discovery that crossed a router (hop limit below 255).
        (
            solicitation(PEER6, HOST6, 64),
            DropReason::BadNeighborDiscovery,
        ),
        // A solicitation for an address that is not ours.
        (
            solicitation(PEER6, "fd00::99".parse().unwrap(), 255),
            DropReason::NotOurAddress,
        ),
        // A bad TCP checksum.
        (
            {
                let mut bad = tcp.clone();
                bad[16] ^= 0xff;
                ipv6_frame(to_us, PEER6, HOST6, 6, 64, &bad)
            },
            DropReason::BadTcpChecksum,
        ),
        // Truncated: the header announces more than the frame holds.
        (
            {
                let mut f = ipv6_frame(to_us, PEER6, HOST6, 6, 64, &tcp);
                f.truncate(ETHERNET_HEADER_LEN + 40 + 10);
                f
            },
            DropReason::BadIpLength,
        ),
    ];
    for (frame, reason) in cases {
        let before = net.dropped(reason);
        let out = net.send(&frame);
        assert!(out.is_empty(), "{reason:?}: answered {out:?}");
        assert_eq!(net.dropped(reason), before + 1, "{reason:?}");
    }
    assert_eq!(net.eng.connection_count(), 0);
}

/// An IPv4-only engine takes no IPv6 at all: no report or probe at start, and IPv6
/// frames are counted as an unknown EtherType.
#[test]
fn an_ipv4_only_engine_ignores_ipv6() {
    let mut net = Net::new(config(), echo());
    net.eng.listen(PORT, 16);
    assert!(ipv6_of(&net.boot).is_empty());
    assert!(net.send(&solicitation(PEER6, HOST6, 255)).is_empty());
    assert_eq!(net.dropped(DropReason::UnknownEtherType), 1);
}

/// A datagram for UDP (which no socket here takes) gets a port unreachable, and a
/// protocol we do not know a parameter problem pointing at the byte that names it;
/// within a budget, and never about a packet to a group or from no peer's address.
#[test]
fn unreachable_ports_and_unknown_protocols_are_told_within_a_budget() {
    use smoltcp::wire::{Icmpv6DstUnreachable, Icmpv6ParamProblem};
    let mut net = listening6();
    let udp = [
        0x9c, 0x40, 0x00, 0x35, 0x00, 0x0c, 0, 0, b'd', b'n', b's', b'?',
    ];
    let to_us = (PEER_MAC, HOST_MAC);
    let out = ipv6_of(&net.send(&ipv6_frame(to_us, PEER6, HOST6, 17, 64, &udp)));
    assert_eq!(out.len(), 1);
    assert_eq!(
        (out[0].src, out[0].dst, out[0].eth.dst),
        (HOST6, PEER6, PEER_MAC)
    );
    match out[0].icmp() {
        Some(Icmpv6Repr::DstUnreachable {
            reason: Icmpv6DstUnreachable::PortUnreachable,
            header,
            data,
        }) => {
            assert_eq!((header.src_addr, header.dst_addr), (PEER6, HOST6));
            assert_eq!(data, &udp[..]);
        }
        other => panic!("not a port unreachable: {other:?}"),
    }
    // An unknown protocol, straight after the fixed header and behind destination
    // options: the pointer names the byte that names it.
    let out = ipv6_of(&net.send(&ipv6_frame(to_us, PEER6, HOST6, 253, 64, &[0; 8])));
    let pointer_of = |p: &Out6| match p.icmp() {
        Some(Icmpv6Repr::ParamProblem {
            reason: Icmpv6ParamProblem::UnrecognizedNxtHdr,
            pointer,
            ..
        }) => pointer,
        other => panic!("not a parameter problem: {other:?}"),
    };
    assert_eq!(pointer_of(&out[0]), 6);
    let behind = [&[253, 0, 1, 4, 0, 0, 0, 0][..], &[0; 8]].concat();
    let out = ipv6_of(&net.send(&ipv6_frame(to_us, PEER6, HOST6, 60, 64, &behind)));
    assert_eq!(pointer_of(&out[0]), 40);
    // Nothing about a packet to a group, or from the unspecified address.
    let group = (PEER_MAC, group_mac(ALL_NODES));
    assert!(net
        .send(&ipv6_frame(group, PEER6, ALL_NODES, 17, 64, &udp))
        .is_empty());
    let unspecified = Ipv6Addr::UNSPECIFIED;
    assert!(net
        .send(&ipv6_frame(to_us, unspecified, HOST6, 17, 64, &udp))
        .is_empty());
    assert_eq!(net.stats().icmpv6_errors_sent, 3);
    // A flood: the rest of the burst of 50, then one a millisecond.
    let flood: Vec<Frame> = (0..100)
        .flat_map(|_| net.send(&ipv6_frame(to_us, PEER6, HOST6, 17, 64, &udp)))
        .collect();
    assert_eq!(flood.len(), 47);
    assert_eq!(net.stats().icmpv6_errors_suppressed, 53);
    net.advance(Duration::from_millis(10));
    let after: Vec<Frame> = (0..20)
        .flat_map(|_| net.send(&ipv6_frame(to_us, PEER6, HOST6, 17, 64, &udp)))
        .collect();
    assert_eq!(after.len(), 10);
}
