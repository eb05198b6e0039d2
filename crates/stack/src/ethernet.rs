//! Ethernet II framing (IEEE 802.3 with an EtherType, RFC 894).
//!
//! Parsing goes through smoltcp's [`EthernetFrame`] view; this module adds the two
//! decisions the engine needs on every frame: is it addressed to us ([`accepts`]) and
//! what does it carry ([`EthernetHeader::ethertype`]). 802.1Q VLAN tags are not
//! understood: a tagged frame parses with EtherType `0x8100` and the engine drops it as
//! [`DropReason::UnknownEtherType`].

use smoltcp::wire::EthernetFrame;
pub(crate) use smoltcp::wire::EthernetProtocol;

use crate::drop::DropReason;
use crate::io::MacAddr;

/// Length of an Ethernet II header: destination, source, EtherType.
pub(crate) const HEADER_LEN: usize = crate::io::ETHERNET_HEADER_LEN;

/// The header fields of a received frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct EthernetHeader {
    pub dst: MacAddr,
    pub src: MacAddr,
    pub ethertype: EthernetProtocol,
}

/// Split a received frame into its header and payload.
///
/// The payload is everything after the 14-byte header, including any padding the sender
/// added to reach the 60-byte minimum frame; the IPv4 layer trims it using the IP total
/// length. The frame check sequence is assumed to have been stripped by the device.
pub(crate) fn parse(frame: &[u8]) -> Result<(EthernetHeader, &[u8]), DropReason> {
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
pub(crate) fn write_header(
    buf: &mut [u8],
    src: MacAddr,
    dst: MacAddr,
    ethertype: EthernetProtocol,
) {
    let mut frame = EthernetFrame::new_unchecked(&mut buf[..HEADER_LEN]);
    frame.set_dst_addr(dst);
    frame.set_src_addr(src);
    frame.set_ethertype(ethertype);
}

/// Whether a frame with destination `dst` is for this host: unicast to `our_mac` or
/// broadcast (ARP requests). Multicast is not accepted: the stack joins no group (no IGMP),
/// so a multicast frame can only be flooding from a switch.
pub(crate) fn accepts(our_mac: MacAddr, dst: MacAddr) -> bool {
    dst == our_mac || dst.is_broadcast()
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
