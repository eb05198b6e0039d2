//! IPv6 as a peer on the link builds it, and the check of every IPv6 frame the engine
//! sends ([`check_sent`]). The peer's fixed headers are written by smoltcp
//! ([`Ipv6Repr`]), its ICMPv6 checksums too; the extension-header chains
//! ([`chain`]) and the Neighbor Discovery messages are written here byte by byte, so
//! that malformed ones can be. What the engine sends is read back with smoltcp's IPv6,
//! extension-header, ICMPv6, NDP and MLD types, so that a bug in the engine's own
//! writers cannot hide in both directions.

use std::net::Ipv6Addr;
use std::sync::LazyLock;

use rusty_stack::internals::icmpv6::{group_mac, solicited_node, MLD_ROUTERS};
use rusty_stack::internals::{ipv6, Segment};
use rusty_stack::io::MacAddr;
use smoltcp::phy::ChecksumCapabilities;
use smoltcp::wire::{
    EthernetFrame, EthernetProtocol, Icmpv6DstUnreachable, Icmpv6Packet, Icmpv6ParamProblem,
    Icmpv6Repr, IpProtocol, Ipv6ExtHeader, Ipv6OptionRepr, Ipv6OptionRouterAlert,
    Ipv6OptionsIterator, Ipv6Packet, Ipv6Repr, MldAddressRecord, MldRecordType, MldRepr,
    NdiscNeighborFlags, NdiscRepr,
};

use crate::wire::{eth_frame, set_tcp_checksum, sums_to_ones, Sent, HOST_MAC};

/// The peer's global address, inside the engine's prefix.
pub(crate) const PEER6: Ipv6Addr = Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 1);
/// The engine's global address (`fd00::/64`).
pub(crate) const HOST6: Ipv6Addr = Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 2);
/// The peer's link-local address.
pub(crate) const PEER_LL: Ipv6Addr = Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0, 0, 1);
/// Another node on the link, and its MAC.
pub(crate) const OTHER6: Ipv6Addr = Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 7);
pub(crate) const OTHER_MAC: MacAddr = MacAddr([0x02, 0, 0, 0, 0, 0x07]);
/// The router the engine is configured with.
pub(crate) const ROUTER_LL: Ipv6Addr = Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0, 0, 0xfe);
/// The all-nodes group.
pub(crate) const ALL_NODES: Ipv6Addr = Ipv6Addr::new(0xff02, 0, 0, 0, 0, 0, 0, 1);
/// The engine's `stable_secret`, from which its link-local addresses are drawn.
pub(crate) const STABLE_SECRET: [u8; 16] = [0x5a; 16];

/// ICMPv6's and TCP's Next Header values.
pub(crate) const ICMPV6: u8 = 58;
pub(crate) const TCP: u8 = 6;

/// The link-local addresses the engine draws, one after another when another node
/// holds the last (RFC 7217 §6: the engine gives up after the fourth).
static LINK_LOCAL: LazyLock<[Ipv6Addr; 4]> = LazyLock::new(|| {
    let prefix = Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0, 0, 0);
    std::array::from_fn(|draw| {
        let iid = ipv6::stable_iid(prefix, &HOST_MAC.0, draw as u8, &STABLE_SECRET);
        ipv6::link_local(iid)
    })
});

/// The engine's link-local address of draw `draw` (0 to 3).
pub(crate) fn host_link_local(draw: u8) -> Ipv6Addr {
    LINK_LOCAL[usize::from(draw) % 4]
}

/// The addresses a record picks from by a selector byte: the peer's, the engine's
/// (every draw of its link-local one), its groups and others, other nodes, and the
/// martians (unspecified, loopback, IPv4-mapped, Teredo, reserved).
pub(crate) fn address(sel: u8) -> Ipv6Addr {
    match sel % 24 {
        sel::PEER6 => PEER6,
        sel::PEER_LL => PEER_LL,
        sel::HOST6 => HOST6,
        n @ sel::HOST_LL..=6 => host_link_local(n - sel::HOST_LL),
        sel::ALL_NODES => ALL_NODES,
        sel::HOST6_GROUP => solicited_node(HOST6),
        sel::HOST_LL_GROUP => solicited_node(host_link_local(0)),
        10 => solicited_node(host_link_local(1)),
        sel::UNSPECIFIED => Ipv6Addr::UNSPECIFIED,
        sel::OTHER6 => OTHER6,
        sel::LOOPBACK => Ipv6Addr::LOCALHOST,
        sel::V4_MAPPED => std::net::Ipv4Addr::new(10, 0, 0, 1).to_ipv6_mapped(),
        15 => Ipv6Addr::new(0x2001, 0, 0, 0, 0, 0, 0, 1),
        16 => Ipv6Addr::new(0xff02, 0, 0, 0, 0, 0, 0, 2),
        17 => MLD_ROUTERS,
        sel::OFF_LINK => Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 1),
        19 => Ipv6Addr::new(0, 0, 0, 0, 0, 0, 0, 5),
        20 => solicited_node(PEER6),
        21 => solicited_node(host_link_local(2)),
        22 => Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 3),
        _ => ROUTER_LL,
    }
}

/// Selectors of [`address`] that seeds and tests name.
pub(crate) mod sel {
    pub(crate) const PEER6: u8 = 0;
    pub(crate) const PEER_LL: u8 = 1;
    pub(crate) const HOST6: u8 = 2;
    /// The engine's first link-local address; the next three draws follow.
    pub(crate) const HOST_LL: u8 = 3;
    pub(crate) const ALL_NODES: u8 = 7;
    pub(crate) const HOST6_GROUP: u8 = 8;
    pub(crate) const HOST_LL_GROUP: u8 = 9;
    pub(crate) const UNSPECIFIED: u8 = 11;
    pub(crate) const OTHER6: u8 = 12;
    pub(crate) const LOOPBACK: u8 = 13;
    pub(crate) const V4_MAPPED: u8 = 14;
    pub(crate) const OFF_LINK: u8 = 18;
    pub(crate) const ROUTER_LL: u8 = 23;
}

/// The MAC a frame to `dst` goes to: the group's for a group (RFC 2464 §7), the
/// engine's otherwise.
pub(crate) fn mac_for(dst: Ipv6Addr) -> MacAddr {
    if dst.is_multicast() {
        group_mac(dst)
    } else {
        HOST_MAC
    }
}

/// An IPv6 packet from `src` to `dst`: the fixed header (written by smoltcp) with
/// `next_header`, then `payload` (extension headers and the upper layer).
pub(crate) fn packet(
    src: Ipv6Addr,
    dst: Ipv6Addr,
    hop_limit: u8,
    next_header: u8,
    payload: &[u8],
) -> Vec<u8> {
    let repr = Ipv6Repr {
        src_addr: src,
        dst_addr: dst,
        next_header: IpProtocol::from(next_header),
        payload_len: payload.len(),
        hop_limit,
    };
    let mut p = vec![0u8; repr.buffer_len() + payload.len()];
    repr.emit(&mut Ipv6Packet::new_unchecked(&mut p[..]));
    p[repr.buffer_len()..].copy_from_slice(payload);
    p
}

/// `packet` in a frame from `src_mac` to `dst_mac`.
pub(crate) fn frame(src_mac: MacAddr, dst_mac: MacAddr, packet: &[u8]) -> Vec<u8> {
    eth_frame(src_mac, dst_mac, EthernetProtocol::Ipv6, packet)
}

/// Whether the ICMPv6 message `msg` from `src` to `dst` has its checksum right (RFC
/// 4443 §2.3, over RFC 8200 §8.1's pseudo-header), by the plain sum.
pub(crate) fn icmpv6_checksum_ok(msg: &[u8], src: Ipv6Addr, dst: Ipv6Addr) -> bool {
    let len = u32::try_from(msg.len()).unwrap_or(u32::MAX).to_be_bytes();
    sums_to_ones(&[&src.octets(), &dst.octets(), &len, &[0, 0, 0, ICMPV6], msg])
}

/// Write the ICMPv6 checksum of `msg` from `src` to `dst` (smoltcp's sum), if it is
/// long enough to have one.
pub(crate) fn seal(msg: &mut [u8], src: Ipv6Addr, dst: Ipv6Addr) {
    if msg.len() >= 4 {
        Icmpv6Packet::new_unchecked(msg).fill_checksum(&src, &dst);
    }
}

/// An ICMPv6 Echo Request (RFC 4443 §4.1) from `src` to `dst` carrying `data`, in a
/// frame from the peer.
pub(crate) fn echo_request(src: Ipv6Addr, dst: Ipv6Addr, data: &[u8]) -> Vec<u8> {
    let mut msg = vec![128, 0, 0, 0, 0xbe, 0xef, 0, 9];
    msg.extend_from_slice(data);
    seal(&mut msg, src, dst);
    let p = packet(src, dst, 64, ICMPV6, &msg);
    frame(crate::wire::PEER_MAC, mac_for(dst), &p)
}

/// Repair the TCP or ICMPv6 checksum of the IPv6 `packet`, found through its extension
/// headers, so that mutated packets get past checksum checks. A packet the stack's own
/// header check refuses is left alone.
pub(crate) fn fix_checksums(packet: &mut [u8]) {
    let Ok(h) = ipv6::parse(packet) else {
        return;
    };
    let (src, dst, protocol) = (h.src(), h.dst(), h.protocol);
    let upper = h.upper_offset..h.upper_offset + h.upper.len();
    let upper = &mut packet[upper];
    match protocol {
        TCP => set_tcp_checksum(upper, src, dst),
        ICMPV6 => seal(upper, src, dst),
        _ => {}
    }
}

/// An extension-header chain ending in `protocol` (which `upper` starts), one spec
/// byte per header: the kind in its low three bits, a parameter `p` in the high five.
///
/// - 0, 1: Hop-by-Hop, Destination Options of `(p & 3) + 1` eight-octet units; with
///   `p & 4`, first an option of type `(p >> 3 & 3) << 6 | 0x1e`, whose two high bits
///   say skip (00) or discard (the others); the rest is PadN, or an option to skip
///   where more than seven bytes are left (longer padding is refused).
/// - 2: Routing, type `[0, 2, 3, 4][p & 3]`, Segments Left `p >> 2`.
/// - 3: Fragment at offset `p >> 1`, More Fragments `p & 1` (`p` 0: atomic).
/// - 4: Authentication, `(p & 3) + 2` four-octet units.
/// - 5: no header; the chain ends in `[59, 50, 135, 139][p & 3]` (No Next Header, ESP,
///   Mobility, HIP) instead of `protocol`.
/// - 6: Hop-by-Hop with Router Alert (`p` even) or a Jumbo Payload option.
/// - 7: Destination Options announcing `p` units more than its eight bytes.
///
/// Returns the first Next Header (for the fixed header) and the bytes.
pub(crate) fn chain(specs: &[u8], protocol: u8, upper: &[u8]) -> (u8, Vec<u8>) {
    let mut headers: Vec<(u8, Vec<u8>)> = Vec::new();
    let mut last = protocol;
    for &spec in specs {
        let p = spec >> 3;
        let options = |kind: u8| {
            let mut h = vec![0, p & 3];
            if p & 4 != 0 {
                h.extend_from_slice(&[((p >> 3) & 3) << 6 | 0x1e, 0]);
            }
            // The rest (at least four bytes: the header is 8 or more).
            let len = (usize::from(p & 3) + 1) * 8;
            let filler = if len - h.len() > 7 { 0x1e } else { 1 };
            h.extend_from_slice(&[filler, (len - h.len() - 2) as u8]);
            h.resize(len, 0);
            (kind, h)
        };
        match spec & 7 {
            0 => headers.push(options(0)),
            1 => headers.push(options(60)),
            2 => headers.push((
                43,
                vec![0, 0, [0, 2, 3, 4][usize::from(p & 3)], p >> 2, 0, 0, 0, 0],
            )),
            3 => {
                let field = (u16::from(p >> 1) << 3) | u16::from(p & 1);
                let [a, b] = field.to_be_bytes();
                headers.push((44, vec![0, 0, a, b, 0, 0, 0, 1]));
            }
            4 => {
                let mut h = vec![0, p & 3];
                h.resize((usize::from(p & 3) + 2) * 4, 0);
                headers.push((51, h));
            }
            5 => last = [59, 50, 135, 139][usize::from(p & 3)],
            6 => {
                let option: &[u8] = if p & 1 == 0 {
                    &[5, 2, 0, 0]
                } else {
                    &[0xc2, 4, 0, 1, 0, 0]
                };
                let mut h = vec![0, 0];
                h.extend_from_slice(option);
                h.resize(8, 0);
                headers.push((0, h));
            }
            _ => headers.push((60, vec![0, p, 1, 4, 0, 0, 0, 0])),
        }
    }
    let first = headers.first().map_or(last, |h| h.0);
    let mut out = Vec::new();
    for i in 0..headers.len() {
        let next = headers.get(i + 1).map_or(last, |h| h.0);
        headers[i].1[0] = next;
        out.extend_from_slice(&headers[i].1);
    }
    out.extend_from_slice(upper);
    (first, out)
}

/// The engine's IPv6 addresses as it holds them at the end of a loop turn, each with
/// whether it is usable (`EngineInternals::ipv6_addresses`). An address becomes
/// usable at most once and stays so; a tentative one is only replaced or made a
/// duplicate: so what the engine sent during the turn came from addresses usable at
/// its end, and probed addresses it still holds.
pub(crate) struct Own6<'a>(pub(crate) &'a [(Ipv6Addr, bool)]);

impl Own6<'_> {
    fn usable(&self, ip: Ipv6Addr) -> bool {
        self.0.contains(&(ip, true))
    }

    fn held(&self, ip: Ipv6Addr) -> bool {
        self.0.iter().any(|&(a, _)| a == ip)
    }
}

/// Check an IPv6 frame the engine sent (see [`crate::wire::check_sent`]) while it held
/// `own`: an exact fixed header from one of its usable addresses (or the unspecified
/// address, for duplicate address detection and MLD); a group destination only for
/// Neighbor Discovery and MLD, at the group's MAC, and a unicast one never at a group
/// MAC, nor one of its usable addresses nor a martian; TCP with a correct checksum, an
/// Echo Reply, a solicitation, an advertisement of ours, an MLDv2 report, or an error
/// (port unreachable, a parameter problem) about a packet sent to us, each with
/// its hop limit and the fields RFC 4861, RFC 3810 and RFC 4443 ask for (a solicitation
/// to the target's group, or to the target itself when it probes its reachability).
pub(crate) fn check_sent(eth: &EthernetFrame<&[u8]>, own: &Own6<'_>) -> Sent {
    let is_host6 = |ip: Ipv6Addr| own.usable(ip);
    let ip = Ipv6Packet::new_checked(eth.payload()).expect("bad IPv6 header sent");
    let repr = Ipv6Repr::parse(&ip).expect("bad IPv6 header sent");
    assert_eq!(
        eth.payload().len(),
        ipv6::HEADER_LEN + repr.payload_len,
        "bytes after the IPv6 payload"
    );
    let (src, dst, hops) = (repr.src_addr, repr.dst_addr, repr.hop_limit);
    assert!(
        is_host6(src) || src.is_unspecified(),
        "IPv6 source {src} not ours"
    );
    let dst_mac = MacAddr(eth.dst_addr().0);
    if dst.is_multicast() {
        assert_eq!(dst_mac, group_mac(dst), "{dst} not at its group MAC");
    } else {
        assert!(
            dst_mac.is_unicast() && dst_mac != MacAddr([0; 6]),
            "unicast {dst} at MAC {dst_mac:?}"
        );
        assert!(
            ipv6::check_source(dst, Ipv6Addr::UNSPECIFIED).is_ok() && !is_host6(dst),
            "sent to {dst}, which no peer has"
        );
    }
    let payload = &ip.payload()[..repr.payload_len];
    let sent = match repr.next_header {
        IpProtocol::Tcp => {
            assert!(
                is_host6(src) && !dst.is_multicast(),
                "TCP from {src} to {dst}"
            );
            assert_eq!(hops, 64);
            let len = (payload.len() as u32).to_be_bytes();
            let pseudo = [&src.octets()[..], &dst.octets(), &len, &[0, 0, 0, TCP]].concat();
            assert!(sums_to_ones(&[&pseudo, payload]), "TCP checksum sent wrong");
            let (seg, data) = Segment::parse(payload, src, dst, false)
                .unwrap_or_else(|e| panic!("engine sent a bad TCP segment over IPv6: {e:?}"));
            assert_eq!(data.len(), seg.payload_len);
            return Sent::Tcp {
                dst: dst.into(),
                seg,
            };
        }
        IpProtocol::Icmpv6 => icmpv6((src, dst, hops), payload, own),
        IpProtocol::HopByHop => mld_report((src, dst, hops), payload, own),
        other => panic!("engine sent IPv6 next header {other}"),
    };
    if src.is_unspecified() {
        assert!(
            matches!(sent, Sent::Solicitation | Sent::MldReport),
            "only duplicate detection and MLD send from ::"
        );
    }
    sent
}

fn icmpv6((src, dst, hops): (Ipv6Addr, Ipv6Addr, u8), msg: &[u8], own: &Own6<'_>) -> Sent {
    assert!(
        icmpv6_checksum_ok(msg, src, dst),
        "ICMPv6 checksum sent wrong"
    );
    let is_host6 = |ip: Ipv6Addr| own.usable(ip);
    let packet = Icmpv6Packet::new_checked(msg).expect("short ICMPv6 sent");
    let caps = ChecksumCapabilities::default();
    let repr = Icmpv6Repr::parse(&src, &dst, &packet, &caps)
        .unwrap_or_else(|e| panic!("bad ICMPv6 sent from {src} to {dst}: {e:?}"));
    let ours = |mac: Option<smoltcp::wire::RawHardwareAddress>| {
        mac.is_some_and(|m| m.as_bytes() == HOST_MAC.0)
    };
    match repr {
        Icmpv6Repr::EchoReply { data, .. } => {
            assert!(
                is_host6(src) && !dst.is_multicast(),
                "echo reply {src} → {dst}"
            );
            assert_eq!(hops, 64);
            Sent::EchoReply {
                data: data.to_vec(),
            }
        }
        Icmpv6Repr::Ndisc(NdiscRepr::NeighborSolicit {
            target_addr,
            lladdr,
        }) => {
            assert_eq!(hops, 255, "solicitation's hop limit");
            // To the target's group; or, probing a neighbour's reachability (RFC 4861
            // §7.3.3), to the target itself, at the MAC cached for it.
            assert!(
                dst == solicited_node(target_addr) || (dst == target_addr && !src.is_unspecified()),
                "solicitation for {target_addr} to {dst}"
            );
            if src.is_unspecified() {
                // Duplicate address detection of one of ours (RFC 4862 §5.4.2).
                assert!(lladdr.is_none(), "a probe with a link-layer address");
                assert!(own.held(target_addr), "probing {target_addr}, not ours");
            } else {
                assert!(ours(lladdr), "solicitation without our MAC");
                assert!(!is_host6(target_addr), "resolving our own {target_addr}");
            }
            Sent::Solicitation
        }
        Icmpv6Repr::Ndisc(NdiscRepr::NeighborAdvert {
            flags,
            target_addr,
            lladdr,
        }) => {
            assert_eq!(hops, 255, "advertisement's hop limit");
            assert!(
                src == target_addr && is_host6(src),
                "advertising {target_addr}"
            );
            assert!(ours(lladdr), "advertisement without our MAC");
            assert!(flags.contains(NdiscNeighborFlags::OVERRIDE));
            assert!(!flags.contains(NdiscNeighborFlags::ROUTER));
            // Solicited exactly when it answers someone (RFC 4861 §7.2.4); a defence
            // goes to all nodes.
            let solicited = flags.contains(NdiscNeighborFlags::SOLICITED);
            assert_eq!(solicited, !dst.is_multicast(), "S flag to {dst}");
            assert!(
                !dst.is_multicast() || dst == ALL_NODES,
                "advertised to {dst}"
            );
            Sent::Advertisement
        }
        Icmpv6Repr::DstUnreachable { reason, .. } => {
            assert_eq!(reason, Icmpv6DstUnreachable::PortUnreachable);
            check_error((src, dst, hops), msg)
        }
        Icmpv6Repr::ParamProblem {
            reason, pointer, ..
        } => {
            // What the byte it points at holds: a protocol no host of ours reads (or
            // a Hop-by-Hop header out of place), a Routing Type (a route with segments
            // left) or an option whose type asks to be told.
            if let Some(&byte) = msg[8..].get(pointer as usize) {
                match reason {
                    Icmpv6ParamProblem::UnrecognizedNxtHdr => {
                        assert!(![TCP, 17, ICMPV6].contains(&byte), "{byte} unknown?")
                    }
                    Icmpv6ParamProblem::ErroneousHdrField => {
                        let segments_left = msg[8..].get(pointer as usize + 1);
                        assert!(segments_left.is_some_and(|&n| n > 0), "a finished route");
                    }
                    Icmpv6ParamProblem::UnrecognizedOption => {
                        assert!(byte >> 6 >= 2, "option {byte:#x} asks for no error")
                    }
                    other => panic!("parameter problem {other:?}"),
                }
            }
            check_error((src, dst, hops), msg)
        }
        other => panic!("unexpected ICMPv6 sent: {other:?}"),
    }
}

/// An ICMPv6 error of the engine's, `msg` from `src` to `dst` (RFC 4443 §2.4): about
/// a packet that came from `dst` to `src`, a unicast address (never a group), with
/// hop limit 64 and, quoted as far as it fits, the whole message within IPv6's
/// minimum MTU.
fn check_error((src, dst, hops): (Ipv6Addr, Ipv6Addr, u8), msg: &[u8]) -> Sent {
    assert_eq!(hops, 64, "error's hop limit");
    assert!(
        msg.len() <= 1280 - ipv6::HEADER_LEN,
        "an error of {} bytes",
        msg.len()
    );
    let invoking = &msg[8..];
    let header = invoking
        .get(..ipv6::HEADER_LEN)
        .expect("the invoking header quoted");
    let address =
        |at: usize| Ipv6Addr::from(<[u8; 16]>::try_from(&header[at..at + 16]).expect("16"));
    assert_eq!(
        (address(8), address(24)),
        (dst, src),
        "an error about another's packet"
    );
    Sent::Icmpv6Error
}

/// An MLDv2 report (RFC 3810 §5.2): to the MLD routers with hop limit 1, after a
/// Hop-by-Hop header with Router Alert (MLD), from our link-local address or (before
/// it is ours) the unspecified one, joining the solicited-node groups of addresses of
/// ours.
fn mld_report((src, dst, hops): (Ipv6Addr, Ipv6Addr, u8), payload: &[u8], own: &Own6<'_>) -> Sent {
    assert_eq!(
        (dst, hops),
        (MLD_ROUTERS, 1),
        "MLD report's group and hop limit"
    );
    assert!(src.is_unspecified() || src.is_unicast_link_local());
    let hbh = Ipv6ExtHeader::new_checked(payload).expect("bad Hop-by-Hop header sent");
    assert_eq!(hbh.next_header(), IpProtocol::Icmpv6);
    let alert = Ipv6OptionsIterator::new(hbh.payload()).any(|o| {
        matches!(
            o,
            Ok(Ipv6OptionRepr::RouterAlert(
                Ipv6OptionRouterAlert::MulticastListenerDiscovery
            ))
        )
    });
    assert!(alert, "no Router Alert before MLD");
    let msg = &payload[(usize::from(hbh.header_len()) + 1) * 8..];
    assert!(icmpv6_checksum_ok(msg, src, dst), "MLD checksum sent wrong");
    let packet = Icmpv6Packet::new_checked(msg).expect("short MLD report sent");
    let repr = Icmpv6Repr::parse(&src, &dst, &packet, &ChecksumCapabilities::default());
    let Ok(Icmpv6Repr::Mld(MldRepr::Report {
        nr_mcast_addr_rcrds,
        data,
    })) = repr
    else {
        panic!("not an MLDv2 report: {repr:?}");
    };
    assert_eq!(data.len(), usize::from(nr_mcast_addr_rcrds) * 20);
    for record in data.chunks(20) {
        let r = MldAddressRecord::new_checked(record).expect("short MLD record");
        assert_eq!(r.record_type(), MldRecordType::ChangeToExclude);
        assert_eq!((r.aux_data_len(), r.num_srcs()), (0, 0));
        let group = r.mcast_addr();
        let ours = own.0.iter().any(|&(a, _)| solicited_node(a) == group);
        assert!(ours, "joined {group}, not a group of ours");
    }
    Sent::MldReport
}
