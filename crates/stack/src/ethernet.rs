//! Ethernet II framing (IEEE 802.3 with an EtherType, RFC 894).
//!
//! Headers are read and written by hand; this module adds the two
//! decisions the engine needs on every frame: may it go up at all, by its addresses
//! ([`admit`]), and what does it carry ([`EthernetHeader::ethertype`]); the receive path
//! takes both at once ([`accept`]). 802.1Q VLAN tags
//! are not understood: a tagged frame parses with EtherType `0x8100` and the engine drops
//! it as [`DropReason::UnknownEtherType`].

pub use smoltcp::wire::EthernetProtocol;

use crate::drop_reason::DropReason;
use crate::io::MacAddr;

/// Length of an Ethernet II header: destination, source, EtherType.
pub(crate) const HEADER_LEN: usize = crate::io::ETHERNET_HEADER_LEN;

/// The header fields of a received frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EthernetHeader {
    /// Destination address.
    pub dst: MacAddr,
    /// Source address.
    pub src: MacAddr,
    /// What the payload is.
    pub ethertype: EthernetProtocol,
}

/// Split a received frame into its header and payload.
///
/// The payload is everything after the 14-byte header, including any padding the sender
/// added to reach the 60-byte minimum frame; the IPv4 layer trims it using the IP total
/// length. The frame check sequence is assumed to have been stripped by the device.
pub fn parse(frame: &[u8]) -> Result<(EthernetHeader, &[u8]), DropReason> {
    let Some((h, payload)) = frame.split_first_chunk::<HEADER_LEN>() else {
        return Err(DropReason::Truncated);
    };
    Ok((header_of(h), payload))
}

/// The fields of the header `h`.
#[inline]
fn header_of(h: &[u8; HEADER_LEN]) -> EthernetHeader {
    let (dst, rest) = h.split_first_chunk::<6>().expect("six of fourteen bytes");
    let (src, _) = rest.split_first_chunk::<6>().expect("six of eight bytes");
    EthernetHeader {
        // Whole arrays rather than byte by byte: two loads each, not six.
        dst: MacAddr(*dst),
        src: MacAddr(*src),
        ethertype: ethertype_of(h),
    }
}

/// The EtherType of the header `h`.
#[inline]
fn ethertype_of(h: &[u8; HEADER_LEN]) -> EthernetProtocol {
    // IPv4 first, the frame nearly every one is: its two bytes as they lie, one compare.
    let raw = [h[12], h[13]];
    if u16::from_ne_bytes(raw) == u16::from_ne_bytes([0x08, 0x00]) {
        return EthernetProtocol::Ipv4;
    }
    EthernetProtocol::from(u16::from_be_bytes(raw))
}

/// [`parse`] then [`admit`], for the receive path: what `frame` carries and its payload,
/// if it may go up. The addresses are compared where they lie in the frame rather than
/// copied into an [`EthernetHeader`] first: a frame to `our_mac` from an individual
/// address costs two compares and a bit test, and only another frame builds the header
/// (for [`admit`]).
#[inline]
pub(crate) fn accept<'a>(
    our_mac: &MacAddr,
    frame: &'a [u8],
) -> Result<(EthernetProtocol, &'a [u8]), DropReason> {
    let Some((h, payload)) = frame.split_first_chunk::<HEADER_LEN>() else {
        return Err(DropReason::Truncated);
    };
    let m = &our_mac.0;
    let to_us = u32::from_ne_bytes([h[0], h[1], h[2], h[3]])
        == u32::from_ne_bytes([m[0], m[1], m[2], m[3]])
        && u16::from_ne_bytes([h[4], h[5]]) == u16::from_ne_bytes([m[4], m[5]]);
    // The source's individual/group bit (see `admit`).
    if !to_us || h[6] & 1 != 0 {
        admit_other(*our_mac, h)?;
    }
    Ok((ethertype_of(h), payload))
}

/// [`admit`] for the frames [`accept`] does not let through at once.
#[cold]
fn admit_other(our_mac: MacAddr, h: &[u8; HEADER_LEN]) -> Result<(), DropReason> {
    admit(our_mac, &header_of(h))
}

/// The source address of `frame`, which [`accept`] let through. The receive path reads
/// it here, where a reply needs it, rather than carrying it from [`accept`] through the
/// layers above: the common path, a segment of an established connection, does not.
pub(crate) fn source(frame: &[u8]) -> MacAddr {
    match frame.get(6..12) {
        Some(src) => MacAddr::from_slice(src).unwrap_or(MacAddr::BROADCAST),
        None => MacAddr::BROADCAST,
    }
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
    let h: &mut [u8; HEADER_LEN] = (&mut buf[..HEADER_LEN])
        .try_into()
        .expect("an Ethernet header");
    h[..6].copy_from_slice(&dst.0);
    h[6..12].copy_from_slice(&src.0);
    h[12..].copy_from_slice(&u16::from(ethertype).to_be_bytes());
}

/// Whether a received frame may go up to the layer its EtherType names, by its
/// addresses alone. The fast path, a frame to `our_mac` from an individual address, costs
/// a bit test and a compare.
///
/// - A source with the individual/group bit set is [`DropReason::GroupSourceMac`] for
///   every EtherType, ARP included: the bit tells individual from group destinations,
///   and in a source address it is reserved and 0 (IEEE 802.3 §3.2.3). Such a frame is
///   forged (answering it would flood the link: an amplifier) or corrupt.
/// - A frame to another host's MAC, or to a multicast group, is [`DropReason::NotForUs`]:
///   the stack joins no IPv4 group (no IGMP), so such a frame can only be flooding. The
///   exception is IPv6 to an IPv6 group MAC (`33:33:…`, RFC 2464 §7): Neighbor
///   Discovery lives there, and the IPv6 layer keeps the packets for the groups it
///   joined. IPv6 to the broadcast MAC is not for us: IPv6 has no broadcast.
/// - IPv4 in a frame sent to a group address (broadcast or multicast) is
///   [`DropReason::GroupDestinationMac`], whatever its IPv4 destination (RFC 1122
///   §3.3.6). Only ARP, broadcast by nature, comes up from the broadcast address.
#[inline]
pub(crate) fn admit(our_mac: MacAddr, h: &EthernetHeader) -> Result<(), DropReason> {
    if h.src.is_multicast() {
        return Err(DropReason::GroupSourceMac);
    }
    if h.dst != our_mac {
        return admit_to_group(h);
    }
    Ok(())
}

/// [`admit`] for a frame not sent to our MAC.
#[cold]
fn admit_to_group(h: &EthernetHeader) -> Result<(), DropReason> {
    if !h.dst.is_multicast() {
        return Err(DropReason::NotForUs);
    }
    match h.ethertype {
        EthernetProtocol::Ipv4 => Err(DropReason::GroupDestinationMac),
        EthernetProtocol::Ipv6 if h.dst.0[..2] == [0x33, 0x33] => Ok(()),
        EthernetProtocol::Ipv6 => Err(DropReason::NotForUs),
        // ARP requests, and whatever else the engine sorts by EtherType.
        _ if h.dst.is_broadcast() => Ok(()),
        _ => Err(DropReason::NotForUs),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const US: MacAddr = MacAddr([0x02, 0, 0, 0, 0, 1]);
    const THEM: MacAddr = MacAddr([0x02, 0, 0, 0, 0, 2]);

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
        assert_eq!(source(&buf), US);
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

    fn header(src: MacAddr, dst: MacAddr, ethertype: EthernetProtocol) -> EthernetHeader {
        EthernetHeader {
            dst,
            src,
            ethertype,
        }
    }

    const MULTICAST: MacAddr = MacAddr([0x01, 0x00, 0x5e, 0, 0, 1]);
    const IPV6_MULTICAST: MacAddr = MacAddr([0x33, 0x33, 0, 0, 0, 1]);

    #[test]
    fn admits_unicast_to_us_and_broadcast_arp() {
        use EthernetProtocol::{Arp, Ipv4, Ipv6};
        for t in [Arp, Ipv4, Ipv6] {
            assert_eq!(admit(US, &header(THEM, US, t)), Ok(()));
            assert_eq!(admit(US, &header(THEM, THEM, t)), Err(DropReason::NotForUs));
        }
        assert_eq!(admit(US, &header(THEM, MacAddr::BROADCAST, Arp)), Ok(()));
        // IPv6 has no broadcast; its groups' MACs come up for the IPv6 layer to sort.
        assert_eq!(
            admit(US, &header(THEM, MacAddr::BROADCAST, Ipv6)),
            Err(DropReason::NotForUs)
        );
        assert_eq!(admit(US, &header(THEM, IPV6_MULTICAST, Ipv6)), Ok(()));
        assert_eq!(
            admit(US, &header(THEM, MULTICAST, Ipv6)),
            Err(DropReason::NotForUs)
        );
        for group in [MULTICAST, IPV6_MULTICAST] {
            assert_eq!(
                admit(US, &header(THEM, group, Arp)),
                Err(DropReason::NotForUs)
            );
        }
    }

    #[test]
    fn ipv4_to_a_group_address_is_dropped() {
        for group in [MacAddr::BROADCAST, MULTICAST, IPV6_MULTICAST] {
            assert_eq!(
                admit(US, &header(THEM, group, EthernetProtocol::Ipv4)),
                Err(DropReason::GroupDestinationMac)
            );
        }
    }

    #[test]
    fn a_group_source_is_dropped_whatever_the_frame_carries() {
        use EthernetProtocol::{Arp, Ipv4};
        for src in [
            MacAddr::BROADCAST,
            MULTICAST,
            MacAddr([0x03, 0, 0, 0, 0, 2]),
        ] {
            for dst in [US, MacAddr::BROADCAST] {
                for t in [Arp, Ipv4] {
                    assert_eq!(
                        admit(US, &header(src, dst, t)),
                        Err(DropReason::GroupSourceMac)
                    );
                }
            }
        }
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

        /// `accept` decides as `parse` then `admit` do, whatever the addresses (ours, a
        /// neighbour's, group and broadcast ones) and the EtherType.
        #[test]
        fn accept_is_parse_then_admit(
            dst in prop_oneof![Just(US), Just(THEM), Just(MacAddr::BROADCAST),
                any::<[u8; 6]>().prop_map(MacAddr)],
            src in prop_oneof![Just(THEM), Just(US), Just(MacAddr::BROADCAST),
                any::<[u8; 6]>().prop_map(MacAddr)],
            ethertype in prop_oneof![Just(0x0800u16), Just(0x0806), Just(0x86dd), any::<u16>()],
            len in 0usize..40,
        ) {
            let mut frame = vec![0u8; len];
            if len >= HEADER_LEN {
                write_header(&mut frame, src, dst, EthernetProtocol::from(ethertype));
            }
            let expected = parse(&frame)
                .and_then(|(h, payload)| admit(US, &h).map(|()| (h.ethertype, payload)));
            prop_assert_eq!(accept(&US, &frame), expected);
        }
    }
}
