use super::*;
use crate::rng::Rng;

const TCP: u8 = 6;
const SRC: Ipv6Addr = Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 1);
const DST: Ipv6Addr = Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 2);

/// A packet: the fixed header (next header `first`), then `rest` (extension headers
/// and the upper layer), with the Payload Length of `rest`.
fn packet(first: u8, rest: &[u8]) -> Vec<u8> {
    let mut p = vec![0x6a, 0xb1, 0x23, 0x45];
    p.extend_from_slice(&(rest.len() as u16).to_be_bytes());
    p.extend_from_slice(&[first, 64]);
    p.extend_from_slice(&SRC.octets());
    p.extend_from_slice(&DST.octets());
    p.extend_from_slice(rest);
    p
}

/// An options header (Hop-by-Hop or Destination Options) holding `options`, padded
/// to a multiple of eight with PadN, followed by `next`.
fn options_header(next: u8, options: &[u8]) -> Vec<u8> {
    let mut h = vec![next, 0];
    h.extend_from_slice(options);
    let pad = (8 - h.len() % 8) % 8;
    match pad {
        0 => {}
        1 => h.push(0),
        n => {
            h.push(1);
            h.push((n - 2) as u8);
            h.extend(std::iter::repeat_n(0, n - 2));
        }
    }
    h[1] = (h.len() / 8 - 1) as u8;
    h
}

fn routing_header(next: u8, routing_type: u8, segments_left: u8) -> Vec<u8> {
    let mut h = vec![next, 2, routing_type, segments_left, 0, 0, 0, 0];
    h.extend_from_slice(&[0; 16]);
    h
}

fn fragment_header(next: u8, offset: u16, more: bool) -> Vec<u8> {
    let field = (offset << 3) | u16::from(more);
    let mut h = vec![next, 0];
    h.extend_from_slice(&field.to_be_bytes());
    h.extend_from_slice(&[0, 0, 0, 7]);
    h
}

const SEGMENT: [u8; 24] = [0x55; 24];

#[test]
fn a_plain_packet_gives_its_fields_and_upper_layer() {
    let mut p = packet(TCP, &SEGMENT);
    p.extend_from_slice(&[0; 6]); // Ethernet padding
    let h = parse(&p).unwrap();
    assert_eq!(
        (h.src(), h.dst(), h.protocol, h.hop_limit()),
        (SRC, DST, TCP, 64)
    );
    assert_eq!((h.upper_offset, h.upper.len(), h.protocol_at), (40, 24, 6));
    // The upper layer ends where the Payload Length says, before the padding.
    assert_eq!(h.upper, &SEGMENT[..]);
}

#[test]
fn short_and_malformed_fixed_headers_are_refused() {
    let p = packet(TCP, &SEGMENT);
    assert_eq!(parse(&p[..39]), Err(Ipv6Error::Truncated));
    assert_eq!(
        parse(&p[..50]),
        Err(Ipv6Error::Truncated),
        "payload announced"
    );
    let mut v4 = p.clone();
    v4[0] = 0x45;
    assert_eq!(parse(&v4), Err(Ipv6Error::Version));
    let mut jumbo = p.clone();
    jumbo[4..6].copy_from_slice(&[0, 0]);
    assert_eq!(parse(&jumbo), Err(Ipv6Error::Jumbogram));
}

#[test]
fn options_headers_are_walked_and_hop_by_hop_must_come_first() {
    // Router Alert (type 5: skip if unknown) and PadN in Hop-by-Hop, then
    // Destination Options, then TCP.
    let mut rest = options_header(60, &[5, 2, 0, 0]);
    rest.extend(options_header(TCP, &[]));
    rest.extend_from_slice(&SEGMENT);
    let p = packet(0, &rest);
    let h = parse(&p).unwrap();
    assert_eq!((h.protocol, h.upper_offset, h.upper.len()), (TCP, 56, 24));
    assert_eq!(h.upper, &SEGMENT[..]);
    // The Destination Options header (at 48) names TCP.
    assert_eq!(h.protocol_at, 48);

    let mut late = options_header(0, &[]);
    late.extend(options_header(TCP, &[]));
    late.extend_from_slice(&SEGMENT);
    // Refused, pointing at the Destination Options header's Next Header (at 40).
    assert_eq!(
        parse(&packet(60, &late)),
        Err(Ipv6Error::MisplacedHopByHop { at: 40 })
    );
}

#[test]
fn unknown_options_are_skipped_or_refused_as_their_type_says() {
    // The option's type is at 42, after the header's two fixed bytes.
    let refused = |report| Err(Ipv6Error::UnknownOption { at: 42, report });
    for (kind, verdict) in [
        (0x1e, Ok(TCP)),
        (0x5e, refused(false)),
        (0x9e, refused(true)),
        (0xde, refused(true)),
    ] {
        let mut rest = options_header(TCP, &[kind, 1, 0]);
        rest.extend_from_slice(&SEGMENT);
        assert_eq!(
            parse(&packet(60, &rest)).map(|h| h.protocol),
            verdict,
            "{kind:#x}"
        );
    }
    // An option whose length runs past its header.
    let mut rest = vec![TCP, 0, 0x1e, 9, 0, 0, 0, 0];
    rest.extend_from_slice(&SEGMENT);
    assert_eq!(parse(&packet(60, &rest)), Err(Ipv6Error::ExtensionChain));
}

/// Padding only aligns, and a header holds a few options: what Linux refuses (RFC 4942
/// §2.1.9.5, `max_dst_opts_number`) is refused.
#[test]
fn padding_and_option_counts_are_bounded_as_linux_bounds_them() {
    let with = |options: &[u8]| {
        let mut rest = options_header(TCP, options);
        rest.extend_from_slice(&SEGMENT);
        parse(&packet(60, &rest)).map(|h| h.protocol)
    };
    // Seven bytes of padding in a row, in one PadN or in Pad1s, pass; eight do not.
    // (Each case fills its header to sixteen bytes, so no padding is added after it.)
    let skip = |len: u8| [&[0x1e, len][..], &vec![0; usize::from(len)]].concat();
    assert_eq!(
        with(&[&[1, 5, 0, 0, 0, 0, 0][..], &skip(5)].concat()),
        Ok(TCP)
    );
    assert_eq!(with(&[&[0; 7][..], &skip(5)].concat()), Ok(TCP));
    let eight = [&[1, 6, 0, 0, 0, 0, 0, 0][..], &skip(4)].concat();
    assert_eq!(with(&eight), Err(Ipv6Error::Options));
    assert_eq!(
        with(&[&[0; 8][..], &skip(4)].concat()),
        Err(Ipv6Error::Options)
    );
    // An option between two runs starts the count again.
    let between = [&[1, 4, 0, 0, 0, 0][..], &skip(0), &[1, 4, 0, 0, 0, 0]].concat();
    assert_eq!(with(&between), Ok(TCP));
    // PadN carries zeros only.
    assert_eq!(
        with(&[&[1, 2, 0, 7][..], &skip(0)].concat()),
        Err(Ipv6Error::Options)
    );
    // Eight options that may be skipped pass; a ninth does not.
    assert_eq!(with(&skip(0).repeat(8)), Ok(TCP));
    assert_eq!(with(&skip(0).repeat(9)), Err(Ipv6Error::Options));
}

#[test]
fn the_chain_is_bounded_in_count_and_length() {
    let chain = |n: usize| {
        let mut rest = Vec::new();
        for i in 0..n {
            let next = if i + 1 == n { TCP } else { 60 };
            rest.extend(options_header(next, &[]));
        }
        rest.extend_from_slice(&SEGMENT);
        packet(60, &rest)
    };
    assert!(parse(&chain(MAX_EXTENSION_HEADERS)).is_ok());
    assert_eq!(
        parse(&chain(MAX_EXTENSION_HEADERS + 1)),
        Err(Ipv6Error::ExtensionChain)
    );
    // A header whose length field reaches past the payload.
    let mut long = options_header(TCP, &[]);
    long[1] = 200;
    long.extend_from_slice(&SEGMENT);
    assert_eq!(parse(&packet(60, &long)), Err(Ipv6Error::ExtensionChain));
    // A chain cut off in the middle of a header.
    assert_eq!(
        parse(&packet(60, &[TCP, 0, 1])),
        Err(Ipv6Error::ExtensionChain)
    );
}

/// RFC 8200 §4.4 and RFC 5095 §3: a finished route (no segments left) is skipped,
/// Type 0 too; one with segments left is refused, pointing at its Routing Type (42).
#[test]
fn routing_headers_with_segments_left_are_refused_whatever_their_type() {
    let with = |routing_type, segments_left| {
        let mut rest = routing_header(TCP, routing_type, segments_left);
        rest.extend_from_slice(&SEGMENT);
        parse(&packet(43, &rest)).map(|h| h.upper_offset)
    };
    assert_eq!(with(0, 0), Ok(64), "a finished Type 0 route");
    assert_eq!(with(2, 0), Ok(64), "a finished route");
    assert_eq!(with(0, 2), Err(Ipv6Error::Routing { at: 42 }));
    assert_eq!(with(4, 1), Err(Ipv6Error::Routing { at: 42 }));
}

#[test]
fn fragments_are_refused_but_an_atomic_fragment_is_the_whole_packet() {
    let with = |offset, more| {
        let mut rest = fragment_header(TCP, offset, more);
        rest.extend_from_slice(&SEGMENT);
        parse(&packet(44, &rest)).map(|h| (h.protocol, h.upper_offset))
    };
    assert_eq!(with(0, true), Err(Ipv6Error::Fragment));
    assert_eq!(with(185, false), Err(Ipv6Error::Fragment));
    assert_eq!(with(0, false), Ok((TCP, 48)));
}

#[test]
fn authentication_headers_are_skipped_and_unreadable_payloads_refused() {
    // AH with a 12-byte body (Payload Len 4: (4 + 2) × 4 = 24 bytes in all).
    let mut rest = vec![TCP, 4];
    rest.extend_from_slice(&[0; 22]);
    rest.extend_from_slice(&SEGMENT);
    assert_eq!(parse(&packet(51, &rest)).map(|h| h.upper_offset), Ok(64));
    for next in [59, 50, 135, 139, 140] {
        assert_eq!(
            parse(&packet(next, &SEGMENT)),
            Err(Ipv6Error::NoUpperLayer),
            "{next}"
        );
    }
}

#[test]
fn random_bytes_never_panic_and_an_accepted_packet_lies_inside_its_buffer() {
    let mut rng = Rng::new(0x1bad_5eed);
    let mut accepted = 0;
    for _ in 0..20_000 {
        let len = 40 + rng.below(120) as usize;
        let mut p: Vec<u8> = (0..len).map(|_| rng.next_u64() as u8).collect();
        // Mostly well-formed fixed headers, so that the walk itself is exercised.
        p[0] = 0x60 | (p[0] & 0x0f);
        let payload = (len - 40) as u16;
        p[4..6].copy_from_slice(&payload.to_be_bytes());
        p[6] = [0, 43, 44, 51, 60, TCP][rng.below(6) as usize];
        if let Ok(h) = parse(&p) {
            accepted += 1;
            assert!(h.upper_offset >= HEADER_LEN && h.upper_offset + h.upper.len() == len);
        }
    }
    assert!(accepted > 0);
}

#[test]
fn martian_sources_are_named_and_neighbours_pass() {
    let own: Ipv6Addr = "fd00::2".parse().unwrap();
    let verdict = |a: &str| check_source(a.parse().unwrap(), own);
    assert_eq!(verdict("fd00::1"), Ok(()));
    assert_eq!(verdict("fe80::1:2ff:fe00:1"), Ok(()), "link-local");
    assert_eq!(verdict("2a00:1450::1"), Ok(()), "global");
    assert_eq!(verdict("::"), Err(Martian::Unspecified));
    assert_eq!(verdict("::1"), Err(Martian::Loopback));
    assert_eq!(verdict("ff02::1"), Err(Martian::Multicast));
    assert_eq!(verdict("::ffff:10.0.0.1"), Err(Martian::V4Mapped));
    assert_eq!(verdict("::10.0.0.1"), Err(Martian::Reserved));
    assert_eq!(verdict("2001:0:4136:e378::1"), Err(Martian::Teredo));
    assert_eq!(verdict("2001:db8::1"), Ok(()), "2001::/32 only");
    assert_eq!(verdict("fd00::2"), Err(Martian::Ours));
    assert!(tcp_destination(own));
    assert!(!tcp_destination("ff02::1:ff00:2".parse().unwrap()));
    assert!(!tcp_destination(Ipv6Addr::UNSPECIFIED));
}
