//! ICMPv6 (RFC 4443) and the Neighbor Discovery messages a host exchanges (RFC 4861
//! §4.3–4.4): reading a received message ([`parse`]) and writing the ones a host sends
//! ([`echo_reply`], [`neighbor_solicitation`], [`neighbor_advertisement`], and the
//! MLDv2 report that joins its solicited-node groups, [`mld_report`]).
//!
//! Decisions a reader should know about:
//! - **Every message's checksum is verified**, over the IPv6 pseudo-header (RFC 4443
//!   §2.3); a device offload for ICMPv6 is not trusted.
//! - **Neighbor Discovery is link-local by construction.** A solicitation or an
//!   advertisement must arrive with Hop Limit 255 (RFC 4861 §7.1.1–7.1.2: no router
//!   forwarded it), code 0, and its target must not be a group; an unspecified source
//!   (duplicate address detection) may not carry a link-layer address option, and its
//!   destination must be a solicited-node group. Options of length zero refuse the
//!   message; unknown options are skipped. A link-layer address no neighbour can own
//!   (a group or all zeros) refuses it too, as ARP refuses one: answered, it would
//!   send a unicast advertisement to every node on the link.
//! - **Errors name the packet that caused them.** Destination Unreachable, Packet Too
//!   Big, Time Exceeded and Parameter Problem carry as much of the invoking packet as
//!   fits; [`Message::Error`] hands it over for the transport to find its connection.

use std::net::Ipv6Addr;

use crate::checksum;
use crate::io::MacAddr;

/// ICMPv6's Next Header value.
pub const NEXT_HEADER: u8 = 58;
/// The Hop Limit Neighbor Discovery messages are sent and must arrive with.
pub const ND_HOP_LIMIT: u8 = 255;

const DESTINATION_UNREACHABLE: u8 = 1;
const PARAMETER_PROBLEM: u8 = 4;
const ECHO_REQUEST: u8 = 128;
const ECHO_REPLY: u8 = 129;
const NEIGHBOR_SOLICITATION: u8 = 135;
const NEIGHBOR_ADVERTISEMENT: u8 = 136;
/// NDP option types (RFC 4861 §4.6.1).
const SOURCE_LINK_LAYER: u8 = 1;
const TARGET_LINK_LAYER: u8 = 2;
/// Neighbor Advertisement flags (RFC 4861 §4.4).
const FLAG_SOLICITED: u8 = 0x40;
const FLAG_OVERRIDE: u8 = 0x20;

/// The ICMPv6 error types (RFC 4443 §3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// Destination Unreachable, with its code.
    Unreachable(u8),
    /// Packet Too Big, with the MTU of the next hop.
    TooBig(u32),
    /// Time Exceeded, with its code.
    TimeExceeded(u8),
    /// Parameter Problem, with its code and the offset of the problem.
    ParameterProblem(u8, u32),
}

/// A received message, as far as a host acts on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Message<'a> {
    /// An Echo Request.
    EchoRequest {
        /// Its identifier.
        ident: u16,
        /// Its sequence number.
        seq: u16,
        /// Its data, to be echoed.
        data: &'a [u8],
    },
    /// A Neighbor Solicitation for `target`, with the asker's link-layer address if
    /// it gave one.
    NeighborSolicitation {
        /// The address asked about.
        target: Ipv6Addr,
        /// The Source Link-Layer Address option.
        source_mac: Option<MacAddr>,
    },
    /// A Neighbor Advertisement for `target`, with the flags and the link-layer
    /// address if given.
    NeighborAdvertisement {
        /// The address advertised.
        target: Ipv6Addr,
        /// The sender is a router (R).
        router: bool,
        /// It answers a solicitation (S).
        solicited: bool,
        /// It should replace a cached address (O).
        override_: bool,
        /// The Target Link-Layer Address option.
        target_mac: Option<MacAddr>,
    },
    /// An error about a packet we sent: its kind, and as much of the invoking packet
    /// (from its IPv6 header on) as the message carried.
    Error {
        /// Which error.
        kind: ErrorKind,
        /// The invoking packet, or as much of it as the message holds.
        invoking: &'a [u8],
    },
    /// Anything else (echo replies, router advertisements, MLD): nothing a host of
    /// ours answers.
    Other(u8),
}

/// Why [`parse`] refused a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Icmpv6Error {
    /// Shorter than its type's fixed part.
    Truncated,
    /// The checksum does not match.
    Checksum,
    /// A Neighbor Discovery message that may not be genuine: a hop limit below 255, a
    /// nonzero code, a group as target, options of length zero, a link-layer address
    /// where duplicate address detection allows none or one no neighbour can own (a
    /// group or all zeros), or a solicited advertisement to a group.
    BadNeighborDiscovery,
}

/// Read the ICMPv6 message `icmp` (the whole upper-layer payload) that came from `src`
/// to `dst` with `hop_limit`.
pub fn parse(
    icmp: &[u8],
    src: Ipv6Addr,
    dst: Ipv6Addr,
    hop_limit: u8,
) -> Result<Message<'_>, Icmpv6Error> {
    if icmp.len() < 8 {
        return Err(Icmpv6Error::Truncated);
    }
    let len = u32::try_from(icmp.len()).map_err(|_| Icmpv6Error::Truncated)?;
    let pseudo = checksum::pseudo_header_v6(src.octets(), dst.octets(), NEXT_HEADER, len);
    if !checksum::verify_with(pseudo, icmp) {
        return Err(Icmpv6Error::Checksum);
    }
    let (kind, code) = (icmp[0], icmp[1]);
    let word = u32::from_be_bytes([icmp[4], icmp[5], icmp[6], icmp[7]]);
    let error = |kind| Message::Error {
        kind,
        invoking: &icmp[8..],
    };
    Ok(match kind {
        1 => error(ErrorKind::Unreachable(code)),
        2 => error(ErrorKind::TooBig(word)),
        3 => error(ErrorKind::TimeExceeded(code)),
        4 => error(ErrorKind::ParameterProblem(code, word)),
        ECHO_REQUEST if code == 0 => Message::EchoRequest {
            ident: u16::from_be_bytes([icmp[4], icmp[5]]),
            seq: u16::from_be_bytes([icmp[6], icmp[7]]),
            data: &icmp[8..],
        },
        NEIGHBOR_SOLICITATION | NEIGHBOR_ADVERTISEMENT => {
            let target = address(icmp.get(8..24).ok_or(Icmpv6Error::Truncated)?);
            if hop_limit != ND_HOP_LIMIT || code != 0 || target.is_multicast() {
                return Err(Icmpv6Error::BadNeighborDiscovery);
            }
            let option = if kind == NEIGHBOR_SOLICITATION {
                SOURCE_LINK_LAYER
            } else {
                TARGET_LINK_LAYER
            };
            let mac = link_layer_option(&icmp[24..], option)?;
            if kind == NEIGHBOR_SOLICITATION {
                // Duplicate address detection: from no address, to the target's
                // solicited-node group, and with no address to answer to.
                if src.is_unspecified() && (mac.is_some() || !is_solicited_node(dst, target)) {
                    return Err(Icmpv6Error::BadNeighborDiscovery);
                }
                Message::NeighborSolicitation {
                    target,
                    source_mac: mac,
                }
            } else {
                let flags = icmp[4];
                // An advertisement to a group answers no one (RFC 4861 §7.1.2).
                if dst.is_multicast() && flags & FLAG_SOLICITED != 0 {
                    return Err(Icmpv6Error::BadNeighborDiscovery);
                }
                Message::NeighborAdvertisement {
                    target,
                    router: flags & 0x80 != 0,
                    solicited: flags & FLAG_SOLICITED != 0,
                    override_: flags & FLAG_OVERRIDE != 0,
                    target_mac: mac,
                }
            }
        }
        other => Message::Other(other),
    })
}

fn address(bytes: &[u8]) -> Ipv6Addr {
    let octets: [u8; 16] = bytes.try_into().expect("16 bytes");
    Ipv6Addr::from(octets)
}

/// The link-layer address in the NDP options `options` of type `wanted`, if any;
/// refuses options of length zero (RFC 4861 §4.6) or running past the message, and an
/// address no neighbour can own.
fn link_layer_option(mut options: &[u8], wanted: u8) -> Result<Option<MacAddr>, Icmpv6Error> {
    let mut found = None;
    while options.len() >= 2 {
        let (kind, units) = (options[0], usize::from(options[1]));
        let len = units * 8;
        if units == 0 || len > options.len() {
            return Err(Icmpv6Error::BadNeighborDiscovery);
        }
        if kind == wanted && len >= 8 {
            let mut mac = [0u8; 6];
            mac.copy_from_slice(&options[2..8]);
            found = Some(MacAddr(mac));
        }
        options = &options[len..];
    }
    if found.is_some_and(|mac| mac.is_multicast() || mac == MacAddr([0; 6])) {
        return Err(Icmpv6Error::BadNeighborDiscovery);
    }
    Ok(found)
}

/// The solicited-node group of `addr` (RFC 4291 §2.7.1): `ff02::1:ff` and its low 24
/// bits.
pub fn solicited_node(addr: Ipv6Addr) -> Ipv6Addr {
    let o = addr.octets();
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

fn is_solicited_node(group: Ipv6Addr, target: Ipv6Addr) -> bool {
    group == solicited_node(target)
}

/// The Ethernet multicast address of the IPv6 group `group` (RFC 2464 §7): `33:33` and
/// its low 32 bits.
pub fn group_mac(group: Ipv6Addr) -> MacAddr {
    let o = group.octets();
    MacAddr([0x33, 0x33, o[12], o[13], o[14], o[15]])
}

/// Write the checksum of the message `icmp` from `src` to `dst` into its place.
fn seal(icmp: &mut [u8], src: Ipv6Addr, dst: Ipv6Addr) {
    icmp[2..4].fill(0);
    let len = icmp.len() as u32;
    let pseudo = checksum::pseudo_header_v6(src.octets(), dst.octets(), NEXT_HEADER, len);
    let c = checksum::finish(checksum::combine(pseudo, checksum::sum(icmp)));
    icmp[2..4].copy_from_slice(&c.to_be_bytes());
}

/// The ICMPv6 errors a host of ours sends (RFC 4443 §3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorOut {
    /// Destination Unreachable, port unreachable (code 4): a UDP datagram, which no
    /// socket here takes (RFC 4443 §3.1).
    PortUnreachable,
    /// Parameter Problem, unrecognized Next Header (code 1), the byte that names the
    /// protocol `pointer` bytes into the invoking packet (RFC 4443 §3.4).
    UnknownNextHeader {
        /// Where that byte is.
        pointer: u32,
    },
    /// Parameter Problem, erroneous header field (code 0): the Routing Type of a
    /// Routing header with segments left, `pointer` bytes into the invoking packet
    /// (RFC 8200 §4.4).
    ErroneousField {
        /// Where that field is.
        pointer: u32,
    },
    /// Parameter Problem, unrecognized IPv6 option (code 2): an option whose type asks
    /// for it, `pointer` bytes into the invoking packet (RFC 8200 §4.2).
    UnknownOption {
        /// Where its Option Type is.
        pointer: u32,
    },
}

/// The smallest MTU an IPv6 link has: no error message is longer (RFC 4443 §2.4 (c)).
const MIN_MTU: usize = 1280;

/// The error `kind` about `invoking` (the packet as received, from its IPv6 header
/// on), from `own` to `peer`: as much of the invoking packet as fits a message of at
/// most `max_len` bytes (the link's MTU less the IPv6 header), and never more than the
/// IPv6 minimum MTU allows.
pub fn error(
    kind: ErrorOut,
    invoking: &[u8],
    own: Ipv6Addr,
    peer: Ipv6Addr,
    max_len: usize,
) -> Vec<u8> {
    let (kind, code, word) = match kind {
        ErrorOut::PortUnreachable => (DESTINATION_UNREACHABLE, 4, 0),
        ErrorOut::ErroneousField { pointer } => (PARAMETER_PROBLEM, 0, pointer),
        ErrorOut::UnknownNextHeader { pointer } => (PARAMETER_PROBLEM, 1, pointer),
        ErrorOut::UnknownOption { pointer } => (PARAMETER_PROBLEM, 2, pointer),
    };
    let room = max_len
        .min(MIN_MTU - crate::ipv6::HEADER_LEN)
        .saturating_sub(8);
    let mut icmp = vec![kind, code, 0, 0];
    icmp.extend_from_slice(&word.to_be_bytes());
    icmp.extend_from_slice(&invoking[..invoking.len().min(room)]);
    seal(&mut icmp, own, peer);
    icmp
}

/// The Echo Reply to an Echo Request (`ident`, `seq`, `data`) that came from `peer` to
/// `own`, with its data cut to `max_len` bytes of message (the link's MTU less the IPv6
/// header), as RFC 4443 §4.2 allows.
pub fn echo_reply(
    ident: u16,
    seq: u16,
    data: &[u8],
    own: Ipv6Addr,
    peer: Ipv6Addr,
    max_len: usize,
) -> Vec<u8> {
    let keep = data.len().min(max_len.saturating_sub(8));
    let mut icmp = vec![ECHO_REPLY, 0, 0, 0];
    icmp.extend_from_slice(&ident.to_be_bytes());
    icmp.extend_from_slice(&seq.to_be_bytes());
    icmp.extend_from_slice(&data[..keep]);
    seal(&mut icmp, own, peer);
    icmp
}

/// A Neighbor Solicitation from `own` for `target`, sent to `dst` (the target's
/// solicited-node group, or the target itself to confirm reachability), carrying
/// `mac` as the source link-layer address (`None` for duplicate address detection,
/// from the unspecified address).
pub fn neighbor_solicitation(
    own: Ipv6Addr,
    dst: Ipv6Addr,
    target: Ipv6Addr,
    mac: Option<MacAddr>,
) -> Vec<u8> {
    let mut icmp = vec![NEIGHBOR_SOLICITATION, 0, 0, 0, 0, 0, 0, 0];
    icmp.extend_from_slice(&target.octets());
    if let Some(mac) = mac {
        icmp.extend_from_slice(&[SOURCE_LINK_LAYER, 1]);
        icmp.extend_from_slice(&mac.0);
    }
    seal(&mut icmp, own, dst);
    icmp
}

/// A Neighbor Advertisement from `own` for `target` (one of our addresses) to `dst`,
/// with our link-layer address `mac`; `solicited` when it answers a solicitation.
/// Override is set: the address is ours alone.
pub fn neighbor_advertisement(
    own: Ipv6Addr,
    dst: Ipv6Addr,
    target: Ipv6Addr,
    mac: MacAddr,
    solicited: bool,
) -> Vec<u8> {
    let flags = FLAG_OVERRIDE | if solicited { FLAG_SOLICITED } else { 0 };
    let mut icmp = vec![NEIGHBOR_ADVERTISEMENT, 0, 0, 0, flags, 0, 0, 0];
    icmp.extend_from_slice(&target.octets());
    icmp.extend_from_slice(&[TARGET_LINK_LAYER, 1]);
    icmp.extend_from_slice(&mac.0);
    seal(&mut icmp, own, dst);
    icmp
}

/// The all-MLDv2-capable-routers group, where reports go (RFC 3810 §5.2.14).
pub const MLD_ROUTERS: Ipv6Addr = Ipv6Addr::new(0xff02, 0, 0, 0, 0, 0, 0, 0x16);
const MLD_REPORT: u8 = 143;
/// MLDv2 record type CHANGE_TO_EXCLUDE_MODE (RFC 3810 §5.2.12): with no sources, "I
/// listen to this group".
const CHANGE_TO_EXCLUDE: u8 = 4;
/// The Hop-by-Hop Options header every MLD message carries (RFC 3810 §5): Router
/// Alert (type 5, value 0: MLD) and two bytes of PadN. Its Next Header is ICMPv6.
pub const MLD_HOP_BY_HOP: [u8; 8] = [NEXT_HEADER, 0, 5, 2, 0, 0, 1, 0];

/// The MLDv2 report (RFC 3810 §5.2) from `own` (a link-local address) that joins
/// `groups`, one CHANGE_TO_EXCLUDE record with no sources each, so that switches that
/// snoop MLD, and NICs that filter, deliver the groups' packets. It goes to
/// [`MLD_ROUTERS`] with hop limit 1, after [`MLD_HOP_BY_HOP`].
pub fn mld_report(own: Ipv6Addr, groups: &[Ipv6Addr]) -> Vec<u8> {
    let records = u16::try_from(groups.len()).unwrap_or(u16::MAX);
    let mut icmp = vec![MLD_REPORT, 0, 0, 0, 0, 0];
    icmp.extend_from_slice(&records.to_be_bytes());
    for group in groups.iter().take(usize::from(records)) {
        icmp.extend_from_slice(&[CHANGE_TO_EXCLUDE, 0, 0, 0]);
        icmp.extend_from_slice(&group.octets());
    }
    seal(&mut icmp, own, MLD_ROUTERS);
    icmp
}

#[cfg(test)]
mod tests;
