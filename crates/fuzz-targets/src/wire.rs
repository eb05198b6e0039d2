//! Frames as a peer on the wire builds them, and the check every frame the engine sends
//! must pass ([`check_sent`]), which reads them with smoltcp's parsers so that a bug in
//! the engine's own frame writer cannot hide in both directions. The peer's frames are
//! built with smoltcp's wire types (Ethernet, IPv4, ICMP), TCP headers from
//! [`TxSegment::write_header`] plus a checksum computed here, and ARP by the stack's
//! writer. IPv6 has its own file, [`wire6`](crate::wire6).

use std::net::{IpAddr, Ipv4Addr};

use rusty_stack::checksum;
use rusty_stack::internals::{build_reply, build_request, FRAME_LEN};
use rusty_stack::internals::{Segment, TxSegment, CHECKSUM_OFFSET};
use rusty_stack::io::MacAddr;
use smoltcp::phy::ChecksumCapabilities;
use smoltcp::wire::{
    ArpPacket, ArpRepr, EthernetAddress, EthernetFrame, EthernetProtocol, EthernetRepr,
    Icmpv4Packet, Icmpv4Repr, IpProtocol, Ipv4Packet, Ipv4Repr,
};

/// The peer's address (the engine's neighbour).
pub(crate) const PEER_IP: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
/// The engine's address.
pub(crate) const HOST_IP: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);
pub(crate) const PEER_MAC: MacAddr = MacAddr([0x02, 0, 0, 0, 0, 0x01]);
pub(crate) const HOST_MAC: MacAddr = MacAddr([0x02, 0, 0, 0, 0, 0x02]);

const ETH_LEN: usize = 14;
const IPV4_LEN: usize = 20;

/// An Ethernet frame, padded to the 60-byte minimum as a NIC would.
pub(crate) fn eth_frame(
    src: MacAddr,
    dst: MacAddr,
    ethertype: EthernetProtocol,
    payload: &[u8],
) -> Vec<u8> {
    let repr = EthernetRepr {
        src_addr: EthernetAddress(src.0),
        dst_addr: EthernetAddress(dst.0),
        ethertype,
    };
    let mut buf = vec![0u8; (ETH_LEN + payload.len()).max(60)];
    repr.emit(&mut EthernetFrame::new_unchecked(&mut buf[..]));
    buf[ETH_LEN..ETH_LEN + payload.len()].copy_from_slice(payload);
    buf
}

/// An IPv4 datagram from the peer to the engine.
pub(crate) fn ipv4_frame(src: Ipv4Addr, protocol: IpProtocol, l4: &[u8]) -> Vec<u8> {
    let repr = Ipv4Repr {
        src_addr: src,
        dst_addr: HOST_IP,
        next_header: protocol,
        payload_len: l4.len(),
        hop_limit: 64,
    };
    let mut ip = vec![0u8; IPV4_LEN + l4.len()];
    repr.emit(
        &mut Ipv4Packet::new_unchecked(&mut ip[..]),
        &ChecksumCapabilities::default(),
    );
    ip[IPV4_LEN..].copy_from_slice(l4);
    eth_frame(PEER_MAC, HOST_MAC, EthernetProtocol::Ipv4, &ip)
}

/// Write the TCP checksum of `tcp` (header and payload) from `src` to `dst`, over the
/// pseudo-header of their family (an IPv4 address with an IPv6 one: IPv6's, mapped).
pub(crate) fn set_tcp_checksum(tcp: &mut [u8], src: impl Into<IpAddr>, dst: impl Into<IpAddr>) {
    let (src, dst) = (src.into(), dst.into());
    let (Ok(len), true) = (u16::try_from(tcp.len()), tcp.len() >= CHECKSUM_OFFSET + 2) else {
        return;
    };
    tcp[CHECKSUM_OFFSET..CHECKSUM_OFFSET + 2].fill(0);
    let pseudo = match (src, dst) {
        (IpAddr::V4(s), IpAddr::V4(d)) => {
            checksum::pseudo_header_v4(s.octets(), d.octets(), 6, len)
        }
        _ => checksum::pseudo_header_v6(v6(src).octets(), v6(dst).octets(), 6, len.into()),
    };
    let c = checksum::finish(checksum::combine(pseudo, checksum::sum(tcp)));
    tcp[CHECKSUM_OFFSET..CHECKSUM_OFFSET + 2].copy_from_slice(&c.to_be_bytes());
}

fn v6(ip: IpAddr) -> std::net::Ipv6Addr {
    match ip {
        IpAddr::V4(a) => a.to_ipv6_mapped(),
        IpAddr::V6(a) => a,
    }
}

/// A TCP segment (header from `seg`, then `payload`) with a correct checksum.
pub(crate) fn tcp_bytes(
    src: impl Into<IpAddr>,
    dst: impl Into<IpAddr>,
    ports: (u16, u16),
    seg: &TxSegment,
    payload: &[u8],
) -> Vec<u8> {
    let hl = seg.header_len();
    let mut tcp = vec![0u8; hl + payload.len()];
    seg.write_header(&mut tcp[..hl], ports.0, ports.1);
    tcp[hl..].copy_from_slice(payload);
    set_tcp_checksum(&mut tcp, src, dst);
    tcp
}

/// A TCP segment from the peer's `port` to the engine's `host_port`, in its frame.
pub(crate) fn tcp_frame(port: u16, host_port: u16, seg: &TxSegment, payload: &[u8]) -> Vec<u8> {
    let tcp = tcp_bytes(PEER_IP, HOST_IP, (port, host_port), seg, payload);
    ipv4_frame(PEER_IP, IpProtocol::Tcp, &tcp)
}

/// An ICMP Echo Request from the peer (RFC 792: type 8, code 0, checksum, identifier,
/// sequence number, data).
pub(crate) fn echo_request(ident: u16, seq_no: u16, data: &[u8]) -> Vec<u8> {
    let mut icmp = [[8, 0], [0, 0], ident.to_be_bytes(), seq_no.to_be_bytes()].concat();
    icmp.extend_from_slice(data);
    let c = checksum::checksum(&icmp);
    icmp[2..4].copy_from_slice(&c.to_be_bytes());
    ipv4_frame(PEER_IP, IpProtocol::Icmp, &icmp)
}

/// An ARP frame from `sender` about `target_ip`: a broadcast request, or a reply to the
/// engine's MAC. Built by the stack's own ARP writer; what the engine sends back is
/// checked by smoltcp's parser ([`check_sent`]).
pub(crate) fn arp_frame(
    request: bool,
    sender: (MacAddr, Ipv4Addr),
    target_ip: Ipv4Addr,
) -> Vec<u8> {
    let mut frame = vec![0u8; FRAME_LEN];
    if request {
        build_request(&mut frame, sender.0, sender.1, target_ip);
    } else {
        build_reply(&mut frame, sender.0, sender.1, HOST_MAC, target_ip);
    }
    frame
}

/// Repair the IPv4 header checksum and, for TCP and ICMP, the checksum of the payload
/// the header's total length covers, so that mutated frames get past checksum checks
/// (for IPv6, TCP's and ICMPv6's: [`wire6::fix_checksums`](crate::wire6::fix_checksums)).
/// A frame too short or inconsistent to locate them is left alone.
pub(crate) fn fix_checksums(frame: &mut [u8]) {
    if frame.len() >= ETH_LEN && frame[12..14] == [0x86, 0xdd] {
        return crate::wire6::fix_checksums(&mut frame[ETH_LEN..]);
    }
    if frame.len() < ETH_LEN + IPV4_LEN || frame[12..14] != [0x08, 0x00] {
        return;
    }
    let ip = &mut frame[ETH_LEN..];
    let ihl = usize::from(ip[0] & 0x0f) * 4;
    let total = usize::from(u16::from_be_bytes([ip[2], ip[3]]));
    if ihl < IPV4_LEN || ihl > ip.len() {
        return;
    }
    ip[10..12].fill(0);
    let c = checksum::checksum(&ip[..ihl]);
    ip[10..12].copy_from_slice(&c.to_be_bytes());
    if total < ihl || total > ip.len() {
        return;
    }
    let src = Ipv4Addr::new(ip[12], ip[13], ip[14], ip[15]);
    let dst = Ipv4Addr::new(ip[16], ip[17], ip[18], ip[19]);
    let protocol = ip[9];
    let l4 = &mut ip[ihl..total];
    match protocol {
        6 => set_tcp_checksum(l4, src, dst),
        1 if l4.len() >= 4 => {
            l4[2..4].fill(0);
            let c = checksum::checksum(l4);
            l4[2..4].copy_from_slice(&c.to_be_bytes());
        }
        _ => {}
    }
}

/// Whether `parts`, one after the other, sum to all ones in the Internet checksum
/// (RFC 1071): the plain sum, apart from the stack's and from smoltcp's, whose
/// `verify_checksum` passes everything when built for fuzzing (`cfg(fuzzing)`, as
/// cargo-fuzz builds). Every part but the last has an even length.
pub(crate) fn sums_to_ones(parts: &[&[u8]]) -> bool {
    let mut sum: u64 = 0;
    for part in parts {
        for pair in part.chunks(2) {
            sum += u64::from(u16::from_be_bytes([pair[0], *pair.get(1).unwrap_or(&0)]));
        }
    }
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    sum == 0xffff
}

/// What the engine sent, once checked.
pub(crate) enum Sent {
    Arp,
    /// A TCP segment to `dst`.
    Tcp {
        dst: IpAddr,
        seg: Segment,
    },
    /// An ICMP or ICMPv6 Echo Reply carrying `data`.
    EchoReply {
        data: Vec<u8>,
    },
    /// A Neighbor Solicitation.
    Solicitation,
    /// A Neighbor Advertisement.
    Advertisement,
    /// An MLDv2 report.
    MldReport,
    /// An ICMPv6 error.
    Icmpv6Error,
}

/// Check a frame the engine transmitted on a device without offloads: it must be
/// well-formed ARP, IPv4 from the engine's address with correct checksums carrying TCP
/// or an Echo Reply, or IPv6 as [`wire6::check_sent`](crate::wire6::check_sent) says
/// (the engine's IPv6 addresses being `own6`),
/// within the MTU; to a group MAC only as ARP's broadcast or IPv6 to the group's MAC.
/// Panics otherwise: whatever came in, the engine must never put a malformed frame on
/// the wire.
pub(crate) fn check_sent(frame: &[u8], mtu: usize, own6: &crate::wire6::Own6<'_>) -> Sent {
    assert!(
        frame.len() <= ETH_LEN + mtu,
        "frame of {} bytes over MTU {mtu}",
        frame.len()
    );
    let eth = EthernetFrame::new_checked(frame).expect("engine sent a runt frame");
    assert_eq!(eth.src_addr().0, HOST_MAC.0, "frame not from our MAC");
    let to_group = eth.dst_addr().is_multicast();
    match eth.ethertype() {
        EthernetProtocol::Arp => {
            let packet = ArpPacket::new_checked(eth.payload()).expect("short ARP packet sent");
            let repr = ArpRepr::parse(&packet).expect("bad ARP packet sent");
            let ArpRepr::EthernetIpv4 {
                source_hardware_addr,
                source_protocol_addr,
                ..
            } = repr
            else {
                panic!("non-Ethernet/IPv4 ARP sent: {repr:?}");
            };
            assert_eq!(source_hardware_addr.0, HOST_MAC.0);
            assert_eq!(source_protocol_addr, HOST_IP);
            assert!(
                !to_group || eth.dst_addr().is_broadcast(),
                "ARP to a group MAC {}",
                eth.dst_addr()
            );
            Sent::Arp
        }
        EthernetProtocol::Ipv6 => crate::wire6::check_sent(&eth, own6),
        EthernetProtocol::Ipv4 => {
            assert!(!to_group, "IPv4 to a group MAC {}", eth.dst_addr());
            let ip = Ipv4Packet::new_checked(eth.payload()).expect("bad IPv4 header sent");
            let header = &eth.payload()[..usize::from(ip.header_len())];
            assert!(sums_to_ones(&[header]), "IPv4 header checksum sent wrong");
            assert_eq!(ip.src_addr(), HOST_IP, "IPv4 source not ours");
            let (src, dst) = (ip.src_addr(), ip.dst_addr());
            match ip.next_header() {
                IpProtocol::Tcp => {
                    let tcp = ip.payload();
                    let len = (tcp.len() as u16).to_be_bytes();
                    let pseudo = [&src.octets()[..], &dst.octets(), &[0, 6], &len].concat();
                    assert!(sums_to_ones(&[&pseudo, tcp]), "TCP checksum sent wrong");
                    let (seg, payload) = Segment::parse(tcp, src, dst, false)
                        .unwrap_or_else(|e| panic!("engine sent a bad TCP segment: {e:?}"));
                    assert_eq!(payload.len(), seg.payload_len);
                    Sent::Tcp {
                        dst: dst.into(),
                        seg,
                    }
                }
                IpProtocol::Icmp => {
                    assert!(sums_to_ones(&[ip.payload()]), "ICMP checksum sent wrong");
                    let packet = Icmpv4Packet::new_checked(ip.payload()).expect("short ICMP sent");
                    match Icmpv4Repr::parse(&packet, &ChecksumCapabilities::default()) {
                        Ok(Icmpv4Repr::EchoReply { data, .. }) => Sent::EchoReply {
                            data: data.to_vec(),
                        },
                        other => panic!("unexpected ICMP sent: {other:?}"),
                    }
                }
                other => panic!("engine sent IPv4 protocol {other}"),
            }
        }
        other => panic!("engine sent ethertype {other}"),
    }
}
