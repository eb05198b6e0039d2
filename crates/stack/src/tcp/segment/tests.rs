use super::*;
use std::net::Ipv4Addr;

fn roundtrip(tx: TxSegment, payload: &[u8]) -> (Segment, Vec<u8>) {
    let src = Ipv4Addr::new(10, 0, 0, 1);
    let dst = Ipv4Addr::new(10, 0, 0, 2);
    let hl = tx.header_len();
    let mut buf = vec![0u8; hl + payload.len()];
    tx.write_header(&mut buf[..hl], 1234, 80);
    buf[hl..].copy_from_slice(payload);
    let ph = pseudo_header_sum(src, dst, buf.len() as u16);
    let c = !checksum::fold(ph + checksum::sum(&buf));
    buf[CHECKSUM_OFFSET..CHECKSUM_OFFSET + 2].copy_from_slice(&c.to_be_bytes());
    let (seg, p) = Segment::parse(&buf, src, dst, false).expect("parses");
    (seg, p.to_vec())
}

#[test]
fn syn_options_round_trip() {
    let tx = TxSegment {
        seq: SeqNum(7),
        syn: true,
        window: 65535,
        mss: Some(1460),
        wscale: Some(7),
        sack_permitted: true,
        timestamp: Some((1, 0)),
        ..Default::default()
    };
    let (seg, p) = roundtrip(tx, &[]);
    assert!(seg.flags.syn && !seg.flags.ack);
    assert_eq!(seg.mss, Some(1460));
    assert_eq!(seg.wscale, Some(7));
    assert!(seg.sack_permitted);
    assert_eq!(seg.timestamp, Some((1, 0)));
    assert_eq!(seg.seg_len(), 1);
    assert!(p.is_empty());
}

#[test]
fn data_fin_psh_round_trip_and_bad_checksum() {
    let tx = TxSegment {
        seq: SeqNum(u32::MAX),
        ack: Some(SeqNum(5)),
        fin: true,
        psh: true,
        window: 100,
        sack: [Some((10, 20)), Some((30, 40)), None],
        timestamp: Some((9, 8)),
        ..Default::default()
    };
    let (seg, p) = roundtrip(tx, b"hello");
    assert!(seg.flags.fin && seg.flags.ack && seg.flags.psh);
    assert_eq!(seg.ack, SeqNum(5));
    assert_eq!(seg.sack, [Some((10, 20)), Some((30, 40)), None]);
    assert_eq!(p, b"hello");
    assert_eq!(seg.seg_len(), 6);

    let src = Ipv4Addr::new(10, 0, 0, 1);
    let dst = Ipv4Addr::new(10, 0, 0, 2);
    let mut buf = vec![0u8; tx.header_len()];
    tx.write_header(&mut buf, 1, 2);
    assert_eq!(
        Segment::parse(&buf, src, dst, false).unwrap_err(),
        ParseError::Checksum
    );
    assert!(Segment::parse(&buf[..10], src, dst, true).is_err());
}

#[test]
fn linux_aligned_timestamp_parses() {
    // NOP NOP TS(tsval 0x01020304, tsecr 0x05060708), as Linux sends it.
    let mut h = [0u8; 32];
    h[0..2].copy_from_slice(&80u16.to_be_bytes());
    h[2..4].copy_from_slice(&1234u16.to_be_bytes());
    h[12] = 8 << 4;
    h[13] = 0x18;
    h[20..32].copy_from_slice(&[1, 1, 8, 10, 1, 2, 3, 4, 5, 6, 7, 8]);
    let (seg, p) =
        Segment::parse(&h, Ipv4Addr::LOCALHOST, Ipv4Addr::LOCALHOST, true).expect("parses");
    assert_eq!(seg.timestamp, Some((0x0102_0304, 0x0506_0708)));
    assert!(seg.flags.ack && seg.flags.psh && p.is_empty());
    assert_eq!(smoltcp_parse(&h), Some(seg));
}

#[test]
fn common_syn_layouts_take_the_fixed_offsets() {
    let ours = TxSegment {
        syn: true,
        mss: Some(1460),
        wscale: Some(7),
        sack_permitted: true,
        timestamp: Some((0x0102_0304, 0)),
        ..Default::default()
    };
    let mut o = [0u8; 20];
    ours.write_options(&mut o);
    // MSS 1460, SACK-permitted, TS, NOP, WS 7: Linux's order.
    let linux = [
        2, 4, 5, 180, 4, 2, 8, 10, 1, 2, 3, 4, 0, 0, 0, 0, 1, 3, 3, 7,
    ];
    for o in [o, linux] {
        let mut seg = Segment::default();
        assert!(parse_syn_options(&o, &mut seg));
        assert_eq!(seg.mss, Some(1460));
        assert_eq!(seg.wscale, Some(7));
        assert!(seg.sack_permitted);
        assert_eq!(seg.timestamp, Some((0x0102_0304, 0)));
    }
    // Another order walks the options.
    let mut seg = Segment::default();
    assert!(!parse_syn_options(
        &[2, 4, 5, 180, 1, 3, 3, 7, 4, 2, 8, 10, 1, 2, 3, 4, 0, 0, 0, 0],
        &mut seg
    ));
}

use proptest::prelude::*;
use smoltcp::phy::ChecksumCapabilities;
use smoltcp::wire::{IpAddress, TcpControl, TcpPacket, TcpRepr, TcpTimestampRepr};

/// The header smoltcp writes for `tx` (the reference the writer is checked against).
fn smoltcp_header(tx: &TxSegment, src_port: u16, dst_port: u16) -> Vec<u8> {
    let control = if tx.syn {
        TcpControl::Syn
    } else if tx.fin {
        TcpControl::Fin
    } else if tx.rst {
        TcpControl::Rst
    } else if tx.psh {
        TcpControl::Psh
    } else {
        TcpControl::None
    };
    let repr = TcpRepr {
        src_port,
        dst_port,
        control,
        seq_number: tx.seq.into(),
        ack_number: tx.ack.map(Into::into),
        window_len: tx.window,
        window_scale: tx.wscale,
        max_seg_size: tx.mss,
        sack_permitted: tx.sack_permitted,
        sack_ranges: tx.sack,
        timestamp: tx.timestamp.map(|(v, e)| TcpTimestampRepr::new(v, e)),
        payload: &[],
    };
    let mut buf = vec![0xa5u8; repr.header_len()];
    let any = IpAddress::Ipv4(Ipv4Addr::UNSPECIFIED);
    let mut packet = TcpPacket::new_unchecked(&mut buf[..]);
    repr.emit(&mut packet, &any, &any, &ChecksumCapabilities::ignored());
    if tx.psh && tx.fin {
        packet.set_psh(true);
    }
    buf
}

/// What smoltcp parses from `bytes`, as a [`Segment`].
fn smoltcp_parse(bytes: &[u8]) -> Option<Segment> {
    let packet = TcpPacket::new_checked(bytes).ok()?;
    let any = IpAddress::Ipv4(Ipv4Addr::UNSPECIFIED);
    let repr = TcpRepr::parse(&packet, &any, &any, &ChecksumCapabilities::ignored()).ok()?;
    Some(Segment {
        src_port: repr.src_port,
        dst_port: repr.dst_port,
        seq: repr.seq_number.into(),
        ack: repr.ack_number.map(SeqNum::from).unwrap_or_default(),
        flags: Flags {
            syn: repr.control == TcpControl::Syn,
            ack: repr.ack_number.is_some(),
            fin: repr.control == TcpControl::Fin,
            rst: repr.control == TcpControl::Rst,
            psh: packet.psh(),
        },
        window: repr.window_len,
        mss: repr.max_seg_size,
        wscale: repr.window_scale,
        sack_permitted: repr.sack_permitted,
        timestamp: repr.timestamp.map(|t| (t.tsval, t.tsecr)),
        sack: repr.sack_ranges,
        payload_len: repr.payload.len(),
    })
}

fn arb_tx() -> impl Strategy<Value = TxSegment> {
    (
        any::<u32>(),
        proptest::option::of(any::<u32>()),
        (any::<bool>(), any::<bool>(), any::<bool>()),
        any::<u16>(),
        proptest::option::of(64u16..),
        proptest::option::of(0u8..=14),
        any::<bool>(),
        proptest::option::of((any::<u32>(), any::<u32>())),
        proptest::collection::vec((any::<u32>(), any::<u32>()), 0..=3),
        0usize..64,
    )
        .prop_map(
            |(seq, ack, (syn, fin, psh), window, mss, wscale, sp, ts, sack, len)| {
                let mut tx = TxSegment {
                    seq: SeqNum(seq),
                    ack: ack.map(SeqNum),
                    syn,
                    fin: fin && !syn,
                    psh,
                    window,
                    timestamp: ts,
                    payload_len: len,
                    ..Default::default()
                };
                if syn {
                    tx.mss = mss;
                    tx.wscale = wscale;
                    tx.sack_permitted = sp;
                } else if tx.ack.is_some() {
                    for (slot, b) in tx.sack.iter_mut().zip(sack) {
                        *slot = Some(b);
                    }
                }
                tx
            },
        )
}

proptest! {
    /// Every header we can emit parses back to the same fields and options.
    #[test]
    fn options_round_trip(tx in arb_tx(), fill in any::<u8>()) {
        let payload = vec![fill; tx.payload_len];
        let (seg, p) = roundtrip(tx, &payload);
        prop_assert_eq!(seg.seq, tx.seq);
        prop_assert_eq!(seg.flags.ack, tx.ack.is_some());
        if let Some(a) = tx.ack {
            prop_assert_eq!(seg.ack, a);
        }
        prop_assert_eq!(seg.flags.syn, tx.syn);
        prop_assert_eq!(seg.flags.fin, tx.fin);
        prop_assert_eq!(seg.window, tx.window);
        prop_assert_eq!(seg.mss, tx.mss);
        prop_assert_eq!(seg.wscale, tx.wscale);
        prop_assert_eq!(seg.sack_permitted, tx.sack_permitted);
        prop_assert_eq!(seg.timestamp, tx.timestamp);
        let blocks = |s: &[Option<(u32, u32)>; 3]| s.iter().flatten().copied().collect::<Vec<_>>();
        prop_assert_eq!(blocks(&seg.sack), blocks(&tx.sack));
        prop_assert_eq!(p, payload);
    }

    /// The hand-written writer emits exactly the bytes smoltcp's `TcpRepr::emit` emits
    /// for the same segment.
    #[test]
    fn writer_matches_smoltcp(tx in arb_tx()) {
        let hl = tx.header_len();
        let mut ours = vec![0xa5u8; hl];
        tx.write_header(&mut ours, 1234, 80);
        let theirs = smoltcp_header(&tx, 1234, 80);
        prop_assert_eq!(ours, theirs);
    }

    /// On any bytes (mutations of valid headers, so options get exercised) the parser
    /// accepts and rejects what smoltcp's `TcpRepr::parse` does, with the same fields.
    #[test]
    fn parser_matches_smoltcp(
        tx in arb_tx(),
        flips in proptest::collection::vec((0usize..64, any::<u8>()), 0..4),
        cut in 0usize..8,
    ) {
        let mut bytes = smoltcp_header(&tx, 1234, 80);
        bytes.extend(std::iter::repeat_n(7u8, tx.payload_len));
        for (at, v) in flips {
            if let Some(b) = bytes.get_mut(at) {
                *b = v;
            }
        }
        bytes.truncate(bytes.len().saturating_sub(cut));
        let (src, dst) = (Ipv4Addr::new(1, 2, 3, 4), Ipv4Addr::new(5, 6, 7, 8));
        let ours = Segment::parse(&bytes, src, dst, true).ok();
        let theirs = smoltcp_parse(&bytes);
        prop_assert_eq!(ours.is_some(), theirs.is_some());
        if let (Some((seg, payload)), Some(want)) = (ours, theirs) {
            prop_assert_eq!(seg, want);
            prop_assert_eq!(payload.len(), want.payload_len);
        }
    }

    /// The fixed-offset reading of the two common SYN layouts agrees with the option
    /// walk, on those layouts with any values and on near misses (flipped bytes).
    #[test]
    fn syn_layouts_match_the_walk(
        linux in any::<bool>(),
        values in proptest::collection::vec(any::<u8>(), 20),
        flips in proptest::collection::vec((0usize..20, any::<u8>()), 0..3),
    ) {
        let mut o: [u8; 20] = values.try_into().expect("20 bytes");
        let fixed: &[(usize, u8)] = if linux {
            &[(0, 2), (1, 4), (4, 4), (5, 2), (6, 8), (7, 10), (16, 1), (17, 3), (18, 3)]
        } else {
            &[(0, 2), (1, 4), (4, 3), (5, 3), (7, 4), (8, 2), (9, 8), (10, 10), (19, 0)]
        };
        for &(at, b) in fixed {
            o[at] = b;
        }
        for (at, v) in flips {
            o[at] = v;
        }
        let mut fast = Segment::default();
        let mut walked = Segment::default();
        let walk = parse_options(&o, &mut walked);
        if parse_syn_options(&o, &mut fast) {
            prop_assert_eq!(walk, Ok(()));
            prop_assert_eq!(fast, walked);
            prop_assert!(fast.mss.is_some() && fast.wscale.is_some());
            prop_assert!(fast.sack_permitted && fast.timestamp.is_some());
        } else {
            prop_assert_eq!(fast, Segment::default());
        }
    }

    /// Hostile bytes never panic the parser.
    #[test]
    fn parse_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..80), verified in any::<bool>()) {
        let _ = Segment::parse(&bytes, Ipv4Addr::new(1, 2, 3, 4), Ipv4Addr::new(5, 6, 7, 8), verified);
    }
}
