//! The checksum functions against the textbook word-by-word algorithm, the RFC 1071
//! and RFC 1624 examples, and random data in random pieces.

use super::*;
use proptest::prelude::*;

/// The textbook algorithm: big-endian byte pairs added into a wide accumulator.
fn naive(data: &[u8]) -> u16 {
    let mut s: u64 = 0;
    for pair in data.chunks(2) {
        let hi = u64::from(pair[0]) << 8;
        let lo = pair.get(1).map_or(0, |b| u64::from(*b));
        s += hi | lo;
    }
    while s > 0xffff {
        s = (s & 0xffff) + (s >> 16);
    }
    s as u16
}

#[test]
fn rfc1071_example() {
    // RFC 1071 §3: bytes 00 01 f2 03 f4 f5 f6 f7 sum to ddf2 (after folding 2ddf0).
    let data = [0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7];
    assert_eq!(fold(sum(&data)), 0xddf2);
    assert_eq!(checksum(&data), !0xddf2);
    // Odd length: trailing byte is padded with zero.
    assert_eq!(fold(sum(&data[..7])), naive(&data[..7]));
    assert_eq!(fold(sum(&[0xab])), 0xab00);
    assert_eq!(fold(sum(&[])), 0);
}

#[test]
fn large_buffer_carries() {
    // Two MiB and odd, all-ones-heavy to stress the accumulator's carries.
    let data: Vec<u8> = (0..((2 << 20) + 12_345))
        .map(|i| if i % 7 == 0 { 0x13 } else { 0xff })
        .collect();
    assert_eq!(fold(sum(&data)), naive(&data));
}

#[test]
fn fold64_is_the_end_around_carry_fold() {
    // The plain fold: add the halves with end-around carry until 16 bits remain.
    fn reference(mut s: u64) -> u16 {
        while s > 0xffff {
            s = (s & 0xffff) + (s >> 16);
        }
        s as u16
    }
    let mut rng = crate::rng::Rng::new(7);
    let edges = [
        0,
        1,
        0xffff,
        0x1_0000,
        0xffff_ffff,
        0x1_0000_0000,
        u64::MAX,
        u64::MAX - 1,
    ];
    for s in edges
        .into_iter()
        .chain((0..100_000).map(|_| rng.next_u64()))
    {
        assert_eq!(fold64(s), reference(s), "{s:#x}");
    }
}

#[test]
fn copy_and_sum_copies_and_sums() {
    let data: Vec<u8> = (0..100u32).map(|i| (i * 91 + 7) as u8).collect();
    for start in 0..3 {
        for end in start..data.len() {
            let mut dst = vec![0u8; end - start];
            let s = copy_and_sum(&data[start..end], &mut dst);
            assert_eq!(dst, &data[start..end]);
            assert_eq!(fold(s), naive(&data[start..end]));
        }
    }
}

#[test]
fn every_tail_length_matches_the_naive_sum() {
    let data: Vec<u8> = (0..100u32).map(|i| (i * 37 + 200) as u8).collect();
    for start in 0..3 {
        for end in start..data.len() {
            assert_eq!(fold(sum(&data[start..end])), naive(&data[start..end]));
        }
    }
}

#[test]
fn ipv4_header_checksum() {
    // A real header (Wikipedia's IPv4 checksum example): checksum field c0 00 -> b861.
    let mut hdr = [
        0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11, 0x00, 0x00, 0xc0, 0xa8, 0x00,
        0x01, 0xc0, 0xa8, 0x00, 0xc7,
    ];
    let c = checksum(&hdr);
    assert_eq!(c, 0xb861);
    hdr[10..12].copy_from_slice(&c.to_be_bytes());
    assert!(verify(&hdr));
    hdr[3] ^= 1;
    assert!(!verify(&hdr));
}

#[test]
fn tcp_with_pseudo_header() {
    // A 20-byte TCP SYN 10.0.0.1:1234 -> 10.0.0.2:80, checksum computed, then verified
    // through both the one-shot and the piecewise paths.
    let src = [10, 0, 0, 1];
    let dst = [10, 0, 0, 2];
    let mut seg = [
        0x04, 0xd2, 0x00, 0x50, 0, 0, 0, 1, 0, 0, 0, 0, 0x50, 0x02, 0xff, 0xff, 0, 0, 0, 0,
    ];
    let ph = pseudo_header_v4(src, dst, 6, seg.len() as u16);
    let c = finish(combine(ph, sum(&seg)));
    seg[16..18].copy_from_slice(&c.to_be_bytes());
    assert!(verify_with(ph, &seg));
    let mut p = Partial::with_initial(ph);
    p.add_bytes(&seg[..7]);
    p.add_bytes(&seg[7..]);
    assert_eq!(fold(p.sum()), 0xffff);
}

#[test]
fn add_sub_update() {
    assert_eq!(add(0xffff, 1), 1);
    assert_eq!(add(0x8000, 0x8000), 1);
    assert_eq!(sub(5, 3), 2);
    assert_eq!(combine(u32::MAX, u32::MAX), u32::MAX);
    assert_eq!(combine(u32::MAX, 1), 1);
    // RFC 1624 §4: field m = 0x5555 changes to 0x3285, the rest of the header sums to
    // 0xcd7a, so HC = 0xdd2f. Recomputation gives 0x0000; RFC 1141's eqn. 2 gave 0xffff.
    let mut hdr = [0xcd, 0x7a, 0x55, 0x55];
    assert_eq!(checksum(&hdr), 0xdd2f);
    assert_eq!(update16(0xdd2f, 0x5555, 0x3285), 0x0000);
    hdr[2..4].copy_from_slice(&0x3285u16.to_be_bytes());
    assert_eq!(checksum(&hdr), 0x0000);
}

#[test]
fn prefix_sums_small() {
    let data: Vec<u8> = (0..=255u8).cycle().take(1000).collect();
    let ps = PrefixSums::new(&data, 16);
    for (s, e) in [(0, 1000), (1, 999), (3, 37), (17, 18), (15, 64), (500, 500)] {
        assert_eq!(
            ps.range_sum(&data, s, e),
            fold(sum(&data[s..e])),
            "{s}..{e}"
        );
    }
    // All-zero ranges must come out as 0, not 0xffff.
    let zeros = vec![0u8; 300];
    let pz = PrefixSums::new(&zeros, 7);
    assert_eq!(pz.range_sum(&zeros, 3, 290), 0);
    // Bounds are clamped; a mismatched length falls back to direct computation.
    assert_eq!(ps.range_sum(&data, 990, 5000), fold(sum(&data[990..])));
    assert_eq!(ps.range_sum(&data[..10], 0, 10), fold(sum(&data[..10])));
}

#[test]
fn folds_to_ones_at_the_edges() {
    let m = 0xffff_u128;
    for acc in [
        0,
        1,
        m,
        2 * m,
        m - 1,
        m + 1,
        u128::from(u64::MAX),
        u128::from(u64::MAX) - 1,
        u128::from(u64::MAX) << 64,
        u128::MAX,
        (u128::from(u64::MAX) << 64) | m,
        1 << 64,
        (1 << 64) | (m - 1),
    ] {
        assert_eq!(folds_to_ones(acc), fold128(acc) == 0xffff, "{acc:#x}");
    }
}

proptest! {
    #[test]
    fn folds_to_ones_is_the_fold(hi in any::<u64>(), lo in any::<u64>(), k in any::<u64>()) {
        let acc = (u128::from(hi) << 64) | u128::from(lo);
        prop_assert_eq!(folds_to_ones(acc), fold128(acc) == 0xffff);
        // Multiples of 2^16 - 1, which a random pair seldom is.
        let multiple = u128::from(k % (u64::MAX / 0xffff)) * 0xffff;
        prop_assert_eq!(folds_to_ones(multiple), fold128(multiple) == 0xffff);
    }

    #[test]
    fn sum_matches_naive(data in proptest::collection::vec(any::<u8>(), 0..600)) {
        prop_assert_eq!(fold(sum(&data)), naive(&data));
    }

    /// The IPv6 pseudo-header sum, with a segment, checks as RFC 8200 §8.1 lays the
    /// pseudo-header out: addresses, the length in 32 bits, three zeros, Next Header.
    #[test]
    fn ipv6_pseudo_header_is_the_rfc_layout(
        src in any::<[u8; 16]>(),
        dst in any::<[u8; 16]>(),
        next_header in any::<u8>(),
        segment in proptest::collection::vec(any::<u8>(), 0..200),
        big in any::<bool>(),
    ) {
        // Jumbo lengths too, whose high 16 bits count.
        let len = segment.len() as u32 + if big { 0x1_0000 } else { 0 };
        let mut bytes = [src, dst].concat();
        bytes.extend_from_slice(&len.to_be_bytes());
        bytes.extend_from_slice(&[0, 0, 0, next_header]);
        bytes.extend_from_slice(&segment);
        let c = finish(combine(pseudo_header_v6(src, dst, next_header, len), sum(&segment)));
        prop_assert_eq!(c, !naive(&bytes));
    }

    /// `Wide`'s IPv6 pseudo-header sums to the same as the byte-wise one.
    #[test]
    fn wide_ipv6_pseudo_header_matches(
        src in any::<[u8; 16]>(),
        dst in any::<[u8; 16]>(),
        next_header in any::<u8>(),
        segment in proptest::collection::vec(any::<u8>(), 0..200),
    ) {
        let len = segment.len() as u32;
        let wide = Wide::pseudo_v6(src, dst, next_header, len).add_bytes(&segment);
        let want = fold(combine(pseudo_header_v6(src, dst, next_header, len), sum(&segment)));
        prop_assert_eq!(wide.folded(), want);
        let addresses: [u8; 32] = [src, dst].concat().try_into().unwrap();
        let at = Wide::pseudo_v6_at(&addresses, next_header, len).add_bytes(&segment);
        prop_assert_eq!(at.folded(), want);
    }

    /// A `Wide` sum of a pseudo-header and pieces at even and odd offsets, folded
    /// once, is the textbook sum of the same bytes laid end to end, and its
    /// checksum and check agree with `finish` and `verify_with`.
    #[test]
    fn wide_matches_naive(
        src in any::<[u8; 4]>(),
        dst in any::<[u8; 4]>(),
        protocol in any::<u8>(),
        pieces in proptest::collection::vec(
            (proptest::collection::vec(any::<u8>(), 0..90), 0u8..3), 0..5),
    ) {
        let whole: Vec<u8> = pieces.iter().flat_map(|(p, _)| p.iter().copied()).collect();
        let len = whole.len() as u16;
        let mut bytes = [src, dst].concat();
        bytes.extend_from_slice(&[0, protocol]);
        bytes.extend_from_slice(&len.to_be_bytes());
        bytes.extend_from_slice(&whole);
        let pseudo = pseudo_header_v4(src, dst, protocol, len);

        let mut acc = Wide::pseudo_v4(src, dst, protocol, len);
        let mut at = 0;
        let mut copied = vec![0u8; whole.len()];
        for (piece, how) in &pieces {
            let out = &mut copied[at..at + piece.len()];
            let odd = at % 2 == 1;
            acc = match how {
                // Unfolded pieces only at even offsets (their contract).
                0 if !odd => acc.add_bytes(piece),
                1 if !odd => acc.copy_add(piece, out),
                _ => {
                    out.copy_from_slice(piece);
                    acc.add_folded(fold(sum(piece)), odd)
                }
            };
            if *how == 0 && !odd {
                out.copy_from_slice(piece);
            }
            at += piece.len();
        }
        prop_assert_eq!(&copied, &whole);
        prop_assert_eq!(acc.folded(), naive(&bytes));
        prop_assert_eq!(acc.folded(), fold(combine(pseudo, sum(&whole))));
        let c = acc.checksum_bytes();
        prop_assert_eq!(u16::from_be_bytes(c), finish(combine(pseudo, sum(&whole))));
        // A segment whose checksum field (its first two bytes) holds the checksum
        // `Wide` computed checks, as `verify_with` agrees; one bit flipped, it
        // does not.
        let mut seg = vec![0u8, 0];
        seg.extend_from_slice(&whole);
        let len2 = seg.len() as u16;
        let wide2 = Wide::pseudo_v4(src, dst, protocol, len2);
        let c2 = wide2.add_bytes(&seg).checksum_bytes();
        seg[..2].copy_from_slice(&c2);
        prop_assert!(wide2.add_bytes(&seg).verifies());
        prop_assert!(verify_with(pseudo_header_v4(src, dst, protocol, len2), &seg));
        let bit = (usize::from(protocol) * 7) % (seg.len() * 8);
        seg[bit / 8] ^= 1 << (bit % 8);
        prop_assert!(!wide2.add_bytes(&seg).verifies());
        prop_assert!(!verify_with(pseudo_header_v4(src, dst, protocol, len2), &seg));
    }

    #[test]
    fn verify_20_agrees_with_verify(mut header in proptest::array::uniform20(any::<u8>()), fix in any::<bool>()) {
        if fix {
            // Make it a valid header half the time: the checksum field set from the rest.
            header[10..12].copy_from_slice(&[0, 0]);
            let c = checksum(&header);
            prop_assert_eq!(checksum_20(&header), c.to_be_bytes());
            header[10..12].copy_from_slice(&c.to_be_bytes());
            prop_assert!(verify_20(&header));
        }
        prop_assert_eq!(verify_20(&header), verify(&header));
        prop_assert_eq!(verify(&header), fold(sum(&header)) == 0xffff);
    }

    #[test]
    fn all_ones_and_zero_bytes(len in 0usize..100, ones in any::<bool>()) {
        let data = vec![if ones { 0xff } else { 0 }; len];
        prop_assert_eq!(fold(sum(&data)), naive(&data));
    }

    #[test]
    fn incremental_update16_matches_recompute(
        mut data in proptest::collection::vec(any::<u8>(), 4..64),
        word in 1usize..32,
        new in any::<u16>(),
    ) {
        // Word 0 stays non-zero, as in any real header: with all-zero data the two
        // ones'-complement zeros would legitimately differ.
        data[0] |= 0x40;
        let n = data.len() / 2;
        let i = 1 + word % (n - 1);
        let old = u16::from_be_bytes([data[2 * i], data[2 * i + 1]]);
        let c = checksum(&data);
        data[2 * i..2 * i + 2].copy_from_slice(&new.to_be_bytes());
        prop_assert_eq!(update16(c, old, new), checksum(&data));
    }

    #[test]
    fn incremental_update32_matches_recompute(
        mut data in proptest::collection::vec(any::<u8>(), 8..64),
        new in any::<u32>(),
    ) {
        data[0] |= 0x40;
        let old = u32::from_be_bytes([data[4], data[5], data[6], data[7]]);
        let c = checksum(&data);
        data[4..8].copy_from_slice(&new.to_be_bytes());
        prop_assert_eq!(update32(c, old, new), checksum(&data));
    }

    #[test]
    fn prefix_range_matches_direct(
        data in proptest::collection::vec(any::<u8>(), 0..2000),
        block in 1usize..100,
        a in any::<usize>(),
        b in any::<usize>(),
    ) {
        let ps = PrefixSums::new(&data, block);
        let n = data.len() + 1;
        let (mut s, mut e) = (a % n, b % n);
        if s > e {
            std::mem::swap(&mut s, &mut e);
        }
        prop_assert_eq!(ps.range_sum(&data, s, e), fold(sum(&data[s..e])));
    }

    #[test]
    fn prefix_range_sparse_data(
        len in 0usize..1500,
        block in 1usize..64,
        a in any::<usize>(),
        b in any::<usize>(),
        spot in any::<usize>(),
    ) {
        // Mostly zeros: exercises the 0 vs 0xffff distinction.
        let mut data = vec![0u8; len];
        if len > 0 && spot % 2 == 0 {
            data[spot % len] = 1;
        }
        let ps = PrefixSums::new(&data, block);
        let n = len + 1;
        let (s, e) = ((a % n).min(b % n), (a % n).max(b % n));
        prop_assert_eq!(ps.range_sum(&data, s, e), fold(sum(&data[s..e])));
    }

    #[test]
    fn split_and_combine_equals_whole(
        data in proptest::collection::vec(any::<u8>(), 0..500),
        cuts in proptest::collection::vec(any::<usize>(), 0..5),
    ) {
        let mut cuts: Vec<usize> = cuts.iter().map(|c| c % (data.len() + 1)).collect();
        cuts.sort_unstable();
        let mut p = Partial::new();
        let mut acc = 0u32;
        let mut prev = 0;
        for c in cuts.into_iter().chain([data.len()]) {
            p.add_bytes(&data[prev..c]);
            acc = combine_at(acc, fold(sum(&data[prev..c])), prev % 2 == 1);
            prev = c;
        }
        prop_assert_eq!(fold(p.sum()), fold(sum(&data)));
        prop_assert_eq!(fold(acc), fold(sum(&data)));
        prop_assert_eq!(p.len(), data.len());
    }
}
