//! Ethernet II framing (IEEE 802.3 with an EtherType, RFC 894) and the [`DropReason`]s
//! every receive layer reports.
//!
//! Parsing goes through smoltcp's [`EthernetFrame`] view; this module adds the two
//! decisions the engine needs on every frame: is it addressed to us ([`accepts`]) and
//! what does it carry ([`EthernetHeader::ethertype`]). 802.1Q VLAN tags are not
//! understood: a tagged frame parses with EtherType `0x8100` and the engine drops it as
//! [`DropReason::UnknownEtherType`].

use std::fmt;

use smoltcp::wire::EthernetFrame;
pub use smoltcp::wire::EthernetProtocol;

use crate::io::MacAddr;

/// Length of an Ethernet II header: destination, source, EtherType.
pub const HEADER_LEN: usize = crate::io::ETHERNET_HEADER_LEN;

/// The header fields of a received frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EthernetHeader {
    pub dst: MacAddr,
    pub src: MacAddr,
    pub ethertype: EthernetProtocol,
}

/// Split a received frame into its header and payload.
///
/// The payload is everything after the 14-byte header, including any padding the sender
/// added to reach the 60-byte minimum frame; the IPv4 layer trims it using the IP total
/// length. The frame check sequence is assumed to have been stripped by the device.
pub fn parse(frame: &[u8]) -> Result<(EthernetHeader, &[u8]), DropReason> {
    let frame = EthernetFrame::new_checked(frame).map_err(|_| DropReason::Truncated)?;
    let header = EthernetHeader {
        dst: frame.dst_addr(),
        src: frame.src_addr(),
        ethertype: frame.ethertype(),
    };
    Ok((header, frame.payload()))
}

/// Write a 14-byte Ethernet II header at the start of `buf`.
///
/// # Panics
/// If `buf` is shorter than [`HEADER_LEN`]: the caller sizes its transmit buffers, so a
/// short one is a bug in the stack, not bad input.
pub fn write_header(buf: &mut [u8], src: MacAddr, dst: MacAddr, ethertype: EthernetProtocol) {
    let mut frame = EthernetFrame::new_unchecked(&mut buf[..HEADER_LEN]);
    frame.set_dst_addr(dst);
    frame.set_src_addr(src);
    frame.set_ethertype(ethertype);
}

/// Whether a frame with destination `dst` is for this host: unicast to `our_mac` or
/// broadcast (ARP requests). Multicast is not accepted: the stack joins no group (no IGMP),
/// so a multicast frame can only be flooding from a switch.
pub fn accepts(our_mac: MacAddr, dst: MacAddr) -> bool {
    dst == our_mac || dst.is_broadcast()
}

/// Why a received frame (or a frame waiting to be sent) was dropped.
///
/// One enum for every layer so the engine can keep per-reason counters in a fixed array
/// indexed by [`DropReason::index`]. Every variant is a counted, silent drop: bad input
/// never panics and, unless the RFCs ask for an answer (a RST, an ICMP error), gets none.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DropReason {
    /// The buffer is shorter than the fixed header of the layer parsing it.
    Truncated,
    /// The Ethernet destination is neither our MAC nor broadcast.
    NotForUs,
    /// An EtherType other than IPv4 or ARP (IPv6, VLAN-tagged, 802.3 length field...).
    UnknownEtherType,
    /// ARP that is not Ethernet/IPv4 (RFC 826 hardware/protocol types and lengths), has an
    /// unknown operation, or carries an address no host may own (multicast MAC...).
    BadArp,
    /// IPv4 header with a version other than 4 or an IHL below 5 (RFC 791 §3.1).
    BadIpHeader,
    /// IPv4 header checksum mismatch (RFC 791 §3.1, RFC 1122 §3.2.1.2).
    BadIpChecksum,
    /// IPv4 total length smaller than the header or larger than the bytes received.
    BadIpLength,
    /// An IPv4 fragment: we do not reassemble (we send with DF and advertise an MSS that
    /// fits the MTU, so peers have no reason to fragment towards us).
    Fragment,
    /// The IPv4 destination is not our address (nor the limited broadcast).
    NotOurAddress,
    /// The IPv4 source is one no datagram may come from: multicast, broadcast, loopback
    /// or unspecified (RFC 1122 §3.2.1.3).
    BadSourceAddress,
    /// An IP protocol other than ICMP or TCP.
    UnknownProtocol,
    /// A malformed ICMP message (RFC 792), e.g. an Echo Request with a nonzero code.
    BadIcmp,
    /// ICMP checksum mismatch (RFC 792).
    BadIcmpChecksum,
    /// A malformed TCP header (data offset out of range, bad options) (RFC 9293 §3.1).
    BadTcpHeader,
    /// TCP checksum mismatch (RFC 9293 §3.1).
    BadTcpChecksum,
    /// A SYN to a port nobody listens on (answered with RST per RFC 9293 §3.10.7.1).
    NoListener,
    /// A non-SYN segment that matches no connection (answered with RST unless it is one).
    NoConnection,
    /// A frame waiting for ARP resolution was dropped: the per-address or total queue
    /// was full.
    ArpQueueFull,
    /// A frame waiting for ARP resolution was dropped: the neighbour never answered.
    ArpUnresolved,
    /// No transmit buffer (or one too small) was available for a reply.
    NoTxBuffer,
}

impl DropReason {
    /// Number of variants: the length of a per-reason counter array.
    pub const COUNT: usize = 20;

    /// Every variant, in [`index`](DropReason::index) order.
    pub const ALL: [DropReason; DropReason::COUNT] = [
        DropReason::Truncated,
        DropReason::NotForUs,
        DropReason::UnknownEtherType,
        DropReason::BadArp,
        DropReason::BadIpHeader,
        DropReason::BadIpChecksum,
        DropReason::BadIpLength,
        DropReason::Fragment,
        DropReason::NotOurAddress,
        DropReason::BadSourceAddress,
        DropReason::UnknownProtocol,
        DropReason::BadIcmp,
        DropReason::BadIcmpChecksum,
        DropReason::BadTcpHeader,
        DropReason::BadTcpChecksum,
        DropReason::NoListener,
        DropReason::NoConnection,
        DropReason::ArpQueueFull,
        DropReason::ArpUnresolved,
        DropReason::NoTxBuffer,
    ];

    /// Position of this reason in [`DropReason::ALL`] and in a counter array.
    pub const fn index(self) -> usize {
        self as usize
    }

    /// A short stable name for statistics output.
    pub const fn name(self) -> &'static str {
        match self {
            DropReason::Truncated => "truncated",
            DropReason::NotForUs => "not_for_us",
            DropReason::UnknownEtherType => "unknown_ethertype",
            DropReason::BadArp => "bad_arp",
            DropReason::BadIpHeader => "bad_ip_header",
            DropReason::BadIpChecksum => "bad_ip_checksum",
            DropReason::BadIpLength => "bad_ip_length",
            DropReason::Fragment => "ip_fragment",
            DropReason::NotOurAddress => "not_our_address",
            DropReason::BadSourceAddress => "bad_source_address",
            DropReason::UnknownProtocol => "unknown_protocol",
            DropReason::BadIcmp => "bad_icmp",
            DropReason::BadIcmpChecksum => "bad_icmp_checksum",
            DropReason::BadTcpHeader => "bad_tcp_header",
            DropReason::BadTcpChecksum => "bad_tcp_checksum",
            DropReason::NoListener => "no_listener",
            DropReason::NoConnection => "no_connection",
            DropReason::ArpQueueFull => "arp_queue_full",
            DropReason::ArpUnresolved => "arp_unresolved",
            DropReason::NoTxBuffer => "no_tx_buffer",
        }
    }
}

impl fmt::Display for DropReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use smoltcp::wire::EthernetAddress;

    const US: MacAddr = EthernetAddress([0x02, 0, 0, 0, 0, 1]);
    const THEM: MacAddr = EthernetAddress([0x02, 0, 0, 0, 0, 2]);

    #[test]
    fn write_then_parse_round_trips() {
        let mut buf = [0u8; 20];
        buf[14..].copy_from_slice(b"abcdef");
        write_header(&mut buf, US, THEM, EthernetProtocol::Arp);
        assert_eq!(&buf[..6], THEM.as_bytes());
        assert_eq!(&buf[6..12], US.as_bytes());
        assert_eq!(&buf[12..14], &[0x08, 0x06]);
        let (h, payload) = parse(&buf).unwrap();
        assert_eq!(h.dst, THEM);
        assert_eq!(h.src, US);
        assert_eq!(h.ethertype, EthernetProtocol::Arp);
        assert_eq!(payload, b"abcdef");
    }

    #[test]
    fn header_only_frame_has_empty_payload() {
        let mut buf = [0u8; 14];
        write_header(&mut buf, US, THEM, EthernetProtocol::Ipv4);
        let (h, payload) = parse(&buf).unwrap();
        assert_eq!(h.ethertype, EthernetProtocol::Ipv4);
        assert!(payload.is_empty());
    }

    #[test]
    fn short_frames_are_truncated() {
        for len in 0..14 {
            assert_eq!(parse(&[0u8; 14][..len]), Err(DropReason::Truncated));
        }
    }

    #[test]
    fn vlan_tag_is_an_unknown_ethertype() {
        let mut buf = [0u8; 18];
        write_header(&mut buf, THEM, US, EthernetProtocol::Unknown(0x8100));
        let (h, _) = parse(&buf).unwrap();
        assert_eq!(h.ethertype, EthernetProtocol::Unknown(0x8100));
    }

    #[test]
    fn accepts_unicast_to_us_and_broadcast_only() {
        assert!(accepts(US, US));
        assert!(accepts(US, MacAddr::BROADCAST));
        assert!(!accepts(US, THEM));
        assert!(!accepts(US, EthernetAddress([0x01, 0x00, 0x5e, 0, 0, 1])));
        assert!(!accepts(US, EthernetAddress([0x33, 0x33, 0, 0, 0, 1])));
    }

    #[test]
    fn drop_reason_table_is_consistent() {
        let mut names = std::collections::HashSet::new();
        for (i, r) in DropReason::ALL.iter().enumerate() {
            assert_eq!(r.index(), i);
            assert!(names.insert(r.name()), "duplicate name {}", r.name());
            assert_eq!(r.to_string(), r.name());
        }
        assert_eq!(names.len(), DropReason::COUNT);
        assert_eq!(DropReason::NoTxBuffer.index(), DropReason::COUNT - 1);
    }

    proptest! {
        #[test]
        fn parse_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..128)) {
            match parse(&bytes) {
                Ok((h, payload)) => {
                    prop_assert!(bytes.len() >= HEADER_LEN);
                    prop_assert_eq!(payload.len(), bytes.len() - HEADER_LEN);
                    prop_assert_eq!(h.dst.as_bytes(), &bytes[..6]);
                }
                Err(e) => {
                    prop_assert_eq!(e, DropReason::Truncated);
                    prop_assert!(bytes.len() < HEADER_LEN);
                }
            }
        }
    }
}
