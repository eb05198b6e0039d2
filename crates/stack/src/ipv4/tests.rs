//! IPv4 headers against smoltcp's: parsing and every malformed case, destination and
//! martian-source checks, fragments, the header writer, and random or mutated headers
//! that never panic.

use super::*;
use proptest::prelude::*;
use smoltcp::phy::ChecksumCapabilities;
use smoltcp::wire::{Ipv4Packet, Ipv4Repr};

const US: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
const THEM: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);
/// US on 10.0.0.0/24.
const LOCAL: Local = Local::new(US, 24);

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
    let (h, payload) = parse(&buf, LOCAL, false).unwrap();
    assert_eq!(h.src, THEM);
    assert_eq!(h.dst, US);
    assert_eq!(h.protocol, IpProtocol::Tcp);
    assert_eq!(h.ttl, 61);
    assert_eq!(h.total_len, 25);
    assert_eq!(h.header_len, 20);
    assert_eq!(h.payload_len(), 5);
    assert_eq!(payload, b"hello");
}

#[test]
fn ethernet_padding_is_trimmed() {
    let mut buf = smoltcp_datagram(THEM, US, b"hi");
    buf.extend_from_slice(&[0u8; 24]);
    let (_, payload) = parse(&buf, LOCAL, false).unwrap();
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
    let (h, payload) = parse(&buf, LOCAL, false).unwrap();
    assert_eq!(h.header_len, 24);
    assert_eq!(h.protocol, IpProtocol::Icmp);
    assert_eq!(payload, b"xyz");
}

#[test]
fn truncated_header() {
    let buf = smoltcp_datagram(THEM, US, b"");
    for len in 0..HEADER_LEN {
        assert_eq!(parse(&buf[..len], LOCAL, false), Err(DropReason::Truncated));
    }
}

#[test]
fn bad_version() {
    let mut buf = smoltcp_datagram(THEM, US, b"x");
    buf[0] = 0x65;
    refill_checksum(&mut buf);
    assert_eq!(parse(&buf, LOCAL, false), Err(DropReason::BadIpHeader));
}

#[test]
fn ihl_below_five() {
    let mut buf = smoltcp_datagram(THEM, US, b"x");
    buf[0] = 0x44;
    assert_eq!(parse(&buf, LOCAL, true), Err(DropReason::BadIpHeader));
}

#[test]
fn ihl_beyond_total_length_or_buffer() {
    let mut buf = smoltcp_datagram(THEM, US, b"abcd");
    buf[0] = 0x46; // 24-byte header inside a 24-byte datagram: fine
    refill_checksum(&mut buf);
    assert!(parse(&buf, LOCAL, false).is_ok());
    buf[0] = 0x47; // 28-byte header, total length 24
    assert_eq!(parse(&buf, LOCAL, false), Err(DropReason::BadIpLength));
    assert_eq!(parse(&buf, LOCAL, true), Err(DropReason::BadIpLength));
    buf[0] = 0x4f; // 60-byte header in a 24-byte buffer
    assert_eq!(parse(&buf, LOCAL, true), Err(DropReason::BadIpLength));
}

#[test]
fn total_length_too_small_or_too_large() {
    let mut buf = smoltcp_datagram(THEM, US, b"abcd");
    let mut p = Ipv4Packet::new_unchecked(&mut buf[..]);
    p.set_total_len(19);
    p.fill_checksum();
    assert_eq!(parse(&buf, LOCAL, false), Err(DropReason::BadIpLength));
    let mut p = Ipv4Packet::new_unchecked(&mut buf[..]);
    p.set_total_len(25);
    p.fill_checksum();
    assert_eq!(parse(&buf, LOCAL, false), Err(DropReason::BadIpLength));
}

#[test]
fn bad_checksum_unless_verified_by_device() {
    let mut buf = smoltcp_datagram(THEM, US, b"abcd");
    buf[8] ^= 0x10; // TTL changed, checksum stale
    assert_eq!(parse(&buf, LOCAL, false), Err(DropReason::BadIpChecksum));
    assert!(parse(&buf, LOCAL, true).is_ok());
}

#[test]
fn only_our_unicast_address_is_a_destination() {
    for dst in [
        Ipv4Addr::new(10, 0, 0, 3),
        Ipv4Addr::new(10, 0, 0, 255),
        Ipv4Addr::BROADCAST,
        Ipv4Addr::new(224, 0, 0, 1),
        Ipv4Addr::new(239, 255, 255, 250),
        Ipv4Addr::UNSPECIFIED,
    ] {
        let buf = smoltcp_datagram(THEM, dst, b"");
        assert_eq!(
            parse(&buf, LOCAL, false),
            Err(DropReason::NotOurAddress),
            "{dst}"
        );
    }
}

#[test]
fn martian_sources_are_dropped() {
    for src in [
        Ipv4Addr::UNSPECIFIED,
        Ipv4Addr::new(0, 1, 2, 3),
        Ipv4Addr::new(0, 255, 255, 255),
        Ipv4Addr::new(127, 0, 0, 1),
        Ipv4Addr::new(127, 255, 255, 254),
        Ipv4Addr::new(224, 0, 0, 0),
        Ipv4Addr::new(224, 0, 0, 5),
        Ipv4Addr::new(239, 255, 255, 255),
        Ipv4Addr::new(240, 0, 0, 0),
        Ipv4Addr::new(250, 1, 2, 3),
        Ipv4Addr::new(255, 255, 255, 254),
        Ipv4Addr::BROADCAST,
        Ipv4Addr::new(10, 0, 0, 255),
    ] {
        let buf = smoltcp_datagram(src, US, b"");
        assert_eq!(
            parse(&buf, LOCAL, false),
            Err(DropReason::MartianSource),
            "{src}"
        );
    }
    let buf = smoltcp_datagram(US, US, b"");
    assert_eq!(parse(&buf, LOCAL, false), Err(DropReason::OwnSourceAddress));
}

#[test]
fn neighbours_of_the_martian_classes_are_fine() {
    for src in [
        Ipv4Addr::new(1, 0, 0, 0),
        Ipv4Addr::new(10, 0, 0, 0),
        Ipv4Addr::new(10, 0, 0, 254),
        Ipv4Addr::new(10, 0, 1, 255),
        Ipv4Addr::new(126, 255, 255, 255),
        Ipv4Addr::new(128, 0, 0, 0),
        Ipv4Addr::new(223, 255, 255, 255),
    ] {
        let buf = smoltcp_datagram(src, US, b"");
        assert!(parse(&buf, LOCAL, false).is_ok(), "{src}");
    }
}

#[test]
fn directed_broadcast_follows_the_prefix() {
    let from = |src: [u8; 4], prefix_len: u8| {
        let buf = smoltcp_datagram(Ipv4Addr::from(src), US, b"");
        parse(&buf, Local::new(US, prefix_len), false).map(|_| ())
    };
    let martian = Err(DropReason::MartianSource);
    assert_eq!(from([10, 0, 255, 255], 16), martian);
    assert_eq!(from([10, 0, 0, 255], 16), Ok(()));
    assert_eq!(from([10, 0, 0, 3], 30), martian);
    assert_eq!(from([10, 255, 255, 255], 8), martian);
    // RFC 3021: a /31 has two hosts and no broadcast; a /32 only us.
    assert_eq!(from([10, 0, 0, 0], 31), Ok(()));
    assert_eq!(from([10, 0, 0, 1], 32), Err(DropReason::OwnSourceAddress));
    // A /0 link: its directed broadcast is the limited one, martian anyway.
    assert_eq!(from([10, 0, 0, 255], 0), Ok(()));
    assert_eq!(from([255; 4], 0), martian);
}

#[test]
fn netmask_of_every_prefix() {
    assert_eq!(netmask(0), 0);
    assert_eq!(netmask(1), 0x8000_0000);
    assert_eq!(netmask(24), 0xffff_ff00);
    assert_eq!(netmask(31), 0xffff_fffe);
    assert_eq!(netmask(32), u32::MAX);
    assert_eq!(netmask(40), u32::MAX);
}

#[test]
fn fragments_are_dropped() {
    let mut buf = smoltcp_datagram(THEM, US, b"abcdefgh");
    let mut p = Ipv4Packet::new_unchecked(&mut buf[..]);
    p.set_dont_frag(false);
    p.set_more_frags(true);
    p.fill_checksum();
    assert_eq!(parse(&buf, LOCAL, false), Err(DropReason::Fragment));
    let mut p = Ipv4Packet::new_unchecked(&mut buf[..]);
    p.set_more_frags(false);
    p.set_frag_offset(8);
    p.fill_checksum();
    assert_eq!(parse(&buf, LOCAL, false), Err(DropReason::Fragment));
    let mut p = Ipv4Packet::new_unchecked(&mut buf[..]);
    p.set_frag_offset(0);
    p.fill_checksum();
    assert!(parse(&buf, LOCAL, false).is_ok());
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
    let (h, payload) = parse(&buf, Local::new(THEM, 24), false).unwrap();
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
    fn check_source_is_the_martian_classes(a in any::<u32>(), prefix_len in 0u8..=32) {
        let src = Ipv4Addr::from(a);
        let o = src.octets()[0];
        let subnet_broadcast = prefix_len < 31 && a == u32::from(US) | !netmask(prefix_len);
        let want = if src == US {
            Err(DropReason::OwnSourceAddress)
        } else if o == 0 || o == 127 || src.is_multicast() || o >= 240 || subnet_broadcast {
            Err(DropReason::MartianSource)
        } else {
            Ok(())
        };
        prop_assert_eq!(Local::new(US, prefix_len).check_source(src), want);
    }

    #[test]
    fn parse_never_panics(
        bytes in proptest::collection::vec(any::<u8>(), 0..96),
        verified in any::<bool>(),
    ) {
        if let Ok((h, payload)) = parse(&bytes, LOCAL, verified) {
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
        let _ = parse(&buf, LOCAL, false);
        let _ = parse(&buf, LOCAL, true);
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
        prop_assume!(LOCAL.check_source(src).is_ok());
        let mut buf = vec![0u8; HEADER_LEN + payload_len];
        write_header(&mut buf, src, US, IpProtocol::Tcp, payload_len, ttl, ident, df, true);
        let (h, payload) = parse(&buf, LOCAL, false).unwrap();
        prop_assert_eq!((h.src, h.ttl, h.ident, payload.len()), (src, ttl, ident, payload_len));
    }
}
