//! IPv4 (RFC 791) as a host sees it: validate a received datagram and find its transport
//! payload ([`parse`]), write the 20-byte header of an outgoing one ([`write_header`]), and
//! number outgoing datagrams ([`IdentCounter`]).
//!
//! Decisions a reader should know about:
//! - **No reassembly.** Any fragment (MF set or a nonzero offset) is dropped as
//!   [`DropReason::Fragment`]. We send every datagram with DF set and announce an MSS that
//!   fits the link MTU, so a TCP peer has no reason to fragment towards us; RFC 1122
//!   §3.3.2 requires reassembly of a host, and this is a documented deviation.
//! - **Options are skipped, not acted on.** RFC 1122 §3.2.1.8 lets a host ignore options it
//!   does not implement; we implement none and never emit any.
//! - **Accepted destinations** are our address and the limited broadcast
//!   255.255.255.255. A directed broadcast of our subnet is [`DropReason::NotOurAddress`]
//!   (we do not know the prefix length); the engine decides what a broadcast may reach.
//! - **Source addresses** that no datagram may carry (RFC 1122 §3.2.1.3: multicast,
//!   broadcast, loopback, 0.0.0.0) are dropped, so nothing above ever answers them.
//! - The header checksum is verified unless the device already did it.

use std::net::Ipv4Addr;

pub(crate) use smoltcp::wire::IpProtocol;
use smoltcp::wire::Ipv4Packet;

use crate::drop::DropReason;

/// Length of an IPv4 header without options, the only kind we emit.
pub(crate) const HEADER_LEN: usize = 20;

/// Where the transport header starts in an Ethernet frame we build: after the Ethernet
/// header and an IPv4 header without options.
pub(crate) const TRANSPORT_OFFSET: usize = crate::ethernet::HEADER_LEN + HEADER_LEN;

/// The TTL we send with: RFC 1700's recommended default, as Linux uses.
pub(crate) const DEFAULT_TTL: u8 = 64;

/// The fields of a received IPv4 header that the layers above use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Ipv4Header {
    pub src: Ipv4Addr,
    pub dst: Ipv4Addr,
    pub protocol: IpProtocol,
    pub ttl: u8,
    pub ident: u16,
    /// Header plus payload, from the header's Total Length field.
    pub total_len: u16,
    /// Header length in bytes (IHL × 4), options included.
    pub header_len: u8,
}

impl Ipv4Header {
    /// Length of the transport payload.
    #[cfg(test)]
    pub(crate) fn payload_len(&self) -> usize {
        usize::from(self.total_len) - usize::from(self.header_len)
    }

    /// Whether the datagram was sent to the limited broadcast address.
    pub(crate) fn is_broadcast(&self) -> bool {
        self.dst.is_broadcast()
    }
}

/// Validate a received IPv4 datagram addressed to `our_ip` and return its header and its
/// transport payload.
///
/// The payload is trimmed to the header's Total Length, which drops the padding Ethernet
/// adds to short frames. Pass `checksum_verified` when the device verified the header
/// checksum ([`RxMeta::checksum_verified`](crate::io::RxMeta)).
pub(crate) fn parse(
    packet: &[u8],
    our_ip: Ipv4Addr,
    checksum_verified: bool,
) -> Result<(Ipv4Header, &[u8]), DropReason> {
    if packet.len() < HEADER_LEN {
        return Err(DropReason::Truncated);
    }
    // The buffer holds the fixed header, so the fixed-offset accessors cannot panic; the
    // checks below establish what `check_len` requires before anything reads beyond it.
    let view = Ipv4Packet::new_unchecked(packet);
    if view.version() != 4 {
        return Err(DropReason::BadIpHeader);
    }
    let header_len = view.header_len();
    if usize::from(header_len) < HEADER_LEN {
        return Err(DropReason::BadIpHeader);
    }
    let total_len = view.total_len();
    if total_len < u16::from(header_len) || usize::from(total_len) > packet.len() {
        return Err(DropReason::BadIpLength);
    }
    let view = Ipv4Packet::new_checked(packet).map_err(|_| DropReason::BadIpLength)?;
    if !checksum_verified && !crate::checksum::verify(&packet[..usize::from(header_len)]) {
        return Err(DropReason::BadIpChecksum);
    }
    let src = view.src_addr();
    let dst = view.dst_addr();
    if !is_valid_source(src) {
        return Err(DropReason::BadSourceAddress);
    }
    if dst != our_ip && !dst.is_broadcast() {
        return Err(DropReason::NotOurAddress);
    }
    // RFC 791 §3.2: a datagram is a fragment when More Fragments is set or its offset is
    // nonzero (the last fragment has MF clear).
    if view.more_frags() || view.frag_offset() != 0 {
        return Err(DropReason::Fragment);
    }
    let header = Ipv4Header {
        src,
        dst,
        protocol: view.next_header(),
        ttl: view.hop_limit(),
        ident: view.ident(),
        total_len,
        header_len,
    };
    Ok((header, view.payload()))
}

/// RFC 1122 §3.2.1.3: a host silently discards datagrams whose source is not a unicast
/// address of some host.
fn is_valid_source(src: Ipv4Addr) -> bool {
    !(src.is_unspecified() || src.is_broadcast() || src.is_multicast() || src.is_loopback())
}

/// Write a 20-byte IPv4 header (no options) at the start of `buf` for a datagram carrying
/// `payload_len` bytes of `protocol`.
///
/// With `fill_checksum` false the checksum field is left zero for the device to fill
/// (transmit checksum offload). A total length above 65535 (only possible for a TSO
/// super-frame, which the device re-numbers per segment) is written as 0, as Linux does
/// for GSO packets.
///
/// # Panics
/// If `buf` is shorter than [`HEADER_LEN`]: the caller sizes its transmit buffers, so a
/// short one is a bug in the stack, not bad input.
#[allow(clippy::too_many_arguments)]
#[inline]
pub(crate) fn write_header(
    buf: &mut [u8],
    src: Ipv4Addr,
    dst: Ipv4Addr,
    protocol: IpProtocol,
    payload_len: usize,
    ttl: u8,
    ident: u16,
    dont_frag: bool,
    fill_checksum: bool,
) {
    let total_len = payload_len
        .checked_add(HEADER_LEN)
        .and_then(|n| u16::try_from(n).ok())
        .unwrap_or(0);
    let mut p = Ipv4Packet::new_unchecked(&mut buf[..HEADER_LEN]);
    p.set_version(4);
    p.set_header_len(HEADER_LEN as u8);
    p.set_dscp(0);
    p.set_ecn(0);
    p.set_total_len(total_len);
    p.set_ident(ident);
    p.clear_flags();
    p.set_dont_frag(dont_frag);
    p.set_more_frags(false);
    p.set_frag_offset(0);
    p.set_hop_limit(ttl);
    p.set_next_header(protocol);
    p.set_src_addr(src);
    p.set_dst_addr(dst);
    p.set_checksum(0);
    if fill_checksum {
        let c = crate::checksum::checksum(&buf[..HEADER_LEN]);
        buf[10..12].copy_from_slice(&c.to_be_bytes());
    }
}

/// The Identification field source of one worker (RFC 791 §3.2, RFC 6864).
///
/// RFC 6864 §4.1 only requires uniqueness for datagrams that may be fragmented; ours all
/// carry DF, so a plain wrapping counter per worker is enough. Starting at a random value
/// keeps restarts and sibling workers from emitting the same sequence.
#[derive(Debug, Clone)]
pub(crate) struct IdentCounter {
    next: u16,
}

impl IdentCounter {
    /// A counter whose first value is `start`.
    pub(crate) fn new(start: u16) -> IdentCounter {
        IdentCounter { next: start }
    }

    /// A counter starting at a random value (zero if the OS has no randomness to give).
    #[cfg(test)]
    pub(crate) fn random() -> IdentCounter {
        let mut b = [0u8; 2];
        let start = match getrandom::getrandom(&mut b) {
            Ok(()) => u16::from_ne_bytes(b),
            Err(_) => 0,
        };
        IdentCounter::new(start)
    }

    /// The identification for the next datagram.
    #[allow(clippy::should_implement_trait)]
    pub(crate) fn next(&mut self) -> u16 {
        let id = self.next;
        self.next = self.next.wrapping_add(1);
        id
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use smoltcp::phy::ChecksumCapabilities;
    use smoltcp::wire::Ipv4Repr;

    const US: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
    const THEM: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);

    /// A datagram built by smoltcp (not by us) with `payload`.
    fn smoltcp_datagram(src: Ipv4Addr, dst: Ipv4Addr, payload: &[u8]) -> Vec<u8> {
        let repr = Ipv4Repr {
            src_addr: src,
            dst_addr: dst,
            next_header: IpProtocol::Tcp,
            payload_len: payload.len(),
            hop_limit: 61,
        };
        let mut buf = vec![0u8; repr.buffer_len() + payload.len()];
        let mut p = Ipv4Packet::new_unchecked(&mut buf[..]);
        repr.emit(&mut p, &ChecksumCapabilities::default());
        p.payload_mut().copy_from_slice(payload);
        buf
    }

    fn refill_checksum(buf: &mut [u8]) {
        Ipv4Packet::new_unchecked(buf).fill_checksum();
    }

    #[test]
    fn parses_a_smoltcp_datagram() {
        let buf = smoltcp_datagram(THEM, US, b"hello");
        let (h, payload) = parse(&buf, US, false).unwrap();
        assert_eq!(h.src, THEM);
        assert_eq!(h.dst, US);
        assert_eq!(h.protocol, IpProtocol::Tcp);
        assert_eq!(h.ttl, 61);
        assert_eq!(h.total_len, 25);
        assert_eq!(h.header_len, 20);
        assert_eq!(h.payload_len(), 5);
        assert_eq!(payload, b"hello");
        assert!(!h.is_broadcast());
    }

    #[test]
    fn ethernet_padding_is_trimmed() {
        let mut buf = smoltcp_datagram(THEM, US, b"hi");
        buf.extend_from_slice(&[0u8; 24]);
        let (_, payload) = parse(&buf, US, false).unwrap();
        assert_eq!(payload, b"hi");
    }

    #[test]
    fn options_are_skipped() {
        // IHL 6: one 4-byte option word (NOP NOP NOP EOL) before the payload.
        let mut buf = vec![0u8; 24 + 3];
        let mut p = Ipv4Packet::new_unchecked(&mut buf[..]);
        p.set_version(4);
        p.set_header_len(24);
        p.set_total_len(27);
        p.set_hop_limit(64);
        p.set_next_header(IpProtocol::Icmp);
        p.set_src_addr(THEM);
        p.set_dst_addr(US);
        buf[20..24].copy_from_slice(&[1, 1, 1, 0]);
        buf[24..].copy_from_slice(b"xyz");
        refill_checksum(&mut buf);
        let (h, payload) = parse(&buf, US, false).unwrap();
        assert_eq!(h.header_len, 24);
        assert_eq!(h.protocol, IpProtocol::Icmp);
        assert_eq!(payload, b"xyz");
    }

    #[test]
    fn limited_broadcast_is_accepted() {
        let buf = smoltcp_datagram(THEM, Ipv4Addr::BROADCAST, b"");
        let (h, _) = parse(&buf, US, false).unwrap();
        assert!(h.is_broadcast());
    }

    #[test]
    fn truncated_header() {
        let buf = smoltcp_datagram(THEM, US, b"");
        for len in 0..HEADER_LEN {
            assert_eq!(parse(&buf[..len], US, false), Err(DropReason::Truncated));
        }
    }

    #[test]
    fn bad_version() {
        let mut buf = smoltcp_datagram(THEM, US, b"x");
        buf[0] = 0x65;
        refill_checksum(&mut buf);
        assert_eq!(parse(&buf, US, false), Err(DropReason::BadIpHeader));
    }

    #[test]
    fn ihl_below_five() {
        let mut buf = smoltcp_datagram(THEM, US, b"x");
        buf[0] = 0x44;
        assert_eq!(parse(&buf, US, true), Err(DropReason::BadIpHeader));
    }

    #[test]
    fn ihl_beyond_total_length_or_buffer() {
        let mut buf = smoltcp_datagram(THEM, US, b"abcd");
        buf[0] = 0x46; // 24-byte header inside a 24-byte datagram: fine
        refill_checksum(&mut buf);
        assert!(parse(&buf, US, false).is_ok());
        buf[0] = 0x47; // 28-byte header, total length 24
        assert_eq!(parse(&buf, US, false), Err(DropReason::BadIpLength));
        assert_eq!(parse(&buf, US, true), Err(DropReason::BadIpLength));
        buf[0] = 0x4f; // 60-byte header in a 24-byte buffer
        assert_eq!(parse(&buf, US, true), Err(DropReason::BadIpLength));
    }

    #[test]
    fn total_length_too_small_or_too_large() {
        let mut buf = smoltcp_datagram(THEM, US, b"abcd");
        let mut p = Ipv4Packet::new_unchecked(&mut buf[..]);
        p.set_total_len(19);
        p.fill_checksum();
        assert_eq!(parse(&buf, US, false), Err(DropReason::BadIpLength));
        let mut p = Ipv4Packet::new_unchecked(&mut buf[..]);
        p.set_total_len(25);
        p.fill_checksum();
        assert_eq!(parse(&buf, US, false), Err(DropReason::BadIpLength));
    }

    #[test]
    fn bad_checksum_unless_verified_by_device() {
        let mut buf = smoltcp_datagram(THEM, US, b"abcd");
        buf[8] ^= 0x10; // TTL changed, checksum stale
        assert_eq!(parse(&buf, US, false), Err(DropReason::BadIpChecksum));
        assert!(parse(&buf, US, true).is_ok());
    }

    #[test]
    fn other_destinations_are_not_ours() {
        let buf = smoltcp_datagram(THEM, Ipv4Addr::new(10, 0, 0, 3), b"");
        assert_eq!(parse(&buf, US, false), Err(DropReason::NotOurAddress));
        let buf = smoltcp_datagram(THEM, Ipv4Addr::new(10, 0, 0, 255), b"");
        assert_eq!(parse(&buf, US, false), Err(DropReason::NotOurAddress));
        let buf = smoltcp_datagram(THEM, Ipv4Addr::new(224, 0, 0, 1), b"");
        assert_eq!(parse(&buf, US, false), Err(DropReason::NotOurAddress));
    }

    #[test]
    fn impossible_sources_are_dropped() {
        for src in [
            Ipv4Addr::UNSPECIFIED,
            Ipv4Addr::BROADCAST,
            Ipv4Addr::new(224, 0, 0, 5),
            Ipv4Addr::new(127, 0, 0, 1),
        ] {
            let buf = smoltcp_datagram(src, US, b"");
            assert_eq!(
                parse(&buf, US, false),
                Err(DropReason::BadSourceAddress),
                "{src}"
            );
        }
    }

    #[test]
    fn fragments_are_dropped() {
        let mut buf = smoltcp_datagram(THEM, US, b"abcdefgh");
        let mut p = Ipv4Packet::new_unchecked(&mut buf[..]);
        p.set_dont_frag(false);
        p.set_more_frags(true);
        p.fill_checksum();
        assert_eq!(parse(&buf, US, false), Err(DropReason::Fragment));
        let mut p = Ipv4Packet::new_unchecked(&mut buf[..]);
        p.set_more_frags(false);
        p.set_frag_offset(8);
        p.fill_checksum();
        assert_eq!(parse(&buf, US, false), Err(DropReason::Fragment));
        let mut p = Ipv4Packet::new_unchecked(&mut buf[..]);
        p.set_frag_offset(0);
        p.fill_checksum();
        assert!(parse(&buf, US, false).is_ok());
    }

    #[test]
    fn written_header_matches_smoltcp() {
        let mut buf = [0u8; HEADER_LEN + 6];
        write_header(
            &mut buf,
            US,
            THEM,
            IpProtocol::Tcp,
            6,
            64,
            0xbeef,
            true,
            true,
        );
        let p = Ipv4Packet::new_checked(&buf[..]).unwrap();
        assert!(p.verify_checksum());
        assert_eq!(p.version(), 4);
        assert_eq!(p.header_len(), 20);
        assert_eq!(p.total_len(), 26);
        assert_eq!(p.ident(), 0xbeef);
        assert!(p.dont_frag());
        assert!(!p.more_frags());
        assert_eq!(p.frag_offset(), 0);
        assert_eq!(p.hop_limit(), 64);
        assert_eq!(p.next_header(), IpProtocol::Tcp);
        assert_eq!(p.src_addr(), US);
        assert_eq!(p.dst_addr(), THEM);
        let repr = Ipv4Repr::parse(&p, &ChecksumCapabilities::default()).unwrap();
        assert_eq!(repr.payload_len, 6);
        // And our own parser accepts it from the other side.
        let (h, payload) = parse(&buf, THEM, false).unwrap();
        assert_eq!((h.src, h.ident, payload.len()), (US, 0xbeef, 6));
    }

    #[test]
    fn offloaded_checksum_is_zero_and_flags_follow_arguments() {
        let mut buf = [0xffu8; HEADER_LEN];
        write_header(&mut buf, US, THEM, IpProtocol::Icmp, 0, 1, 7, false, false);
        let p = Ipv4Packet::new_checked(&buf[..]).unwrap();
        assert_eq!(p.checksum(), 0);
        assert!(!p.dont_frag());
        assert_eq!(p.dscp(), 0);
        assert_eq!(p.ecn(), 0);
        assert_eq!(p.total_len(), 20);
    }

    #[test]
    fn oversized_total_length_is_written_as_zero() {
        let mut buf = [0u8; HEADER_LEN];
        write_header(
            &mut buf,
            US,
            THEM,
            IpProtocol::Tcp,
            65_516,
            64,
            0,
            true,
            true,
        );
        assert_eq!(Ipv4Packet::new_unchecked(&buf[..]).total_len(), 0);
        write_header(
            &mut buf,
            US,
            THEM,
            IpProtocol::Tcp,
            65_515,
            64,
            0,
            true,
            true,
        );
        assert_eq!(Ipv4Packet::new_unchecked(&buf[..]).total_len(), 65_535);
    }

    #[test]
    fn ident_counter_wraps() {
        let mut c = IdentCounter::new(u16::MAX - 1);
        assert_eq!(c.next(), u16::MAX - 1);
        assert_eq!(c.next(), u16::MAX);
        assert_eq!(c.next(), 0);
        let mut r = IdentCounter::random();
        let a = r.next();
        assert_eq!(r.next(), a.wrapping_add(1));
    }

    proptest! {
        #[test]
        fn parse_never_panics(
            bytes in proptest::collection::vec(any::<u8>(), 0..96),
            verified in any::<bool>(),
        ) {
            if let Ok((h, payload)) = parse(&bytes, US, verified) {
                prop_assert_eq!(payload.len(), h.payload_len());
                prop_assert!(usize::from(h.total_len) <= bytes.len());
            }
        }

        #[test]
        fn mutated_headers_never_panic(
            payload in proptest::collection::vec(any::<u8>(), 0..40),
            pos in 0usize..20,
            val in any::<u8>(),
        ) {
            let mut buf = smoltcp_datagram(THEM, US, &payload);
            buf[pos] = val;
            let _ = parse(&buf, US, false);
            let _ = parse(&buf, US, true);
        }

        #[test]
        fn written_headers_parse_back(
            a in any::<[u8; 4]>(),
            payload_len in 0usize..1500,
            ttl in 1u8..,
            ident in any::<u16>(),
            df in any::<bool>(),
        ) {
            let src = Ipv4Addr::from(a);
            prop_assume!(is_valid_source(src));
            let mut buf = vec![0u8; HEADER_LEN + payload_len];
            write_header(&mut buf, src, US, IpProtocol::Tcp, payload_len, ttl, ident, df, true);
            let (h, payload) = parse(&buf, US, false).unwrap();
            prop_assert_eq!((h.src, h.ttl, h.ident, payload.len()), (src, ttl, ident, payload_len));
        }
    }
}
