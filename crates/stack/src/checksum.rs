//! The Internet checksum (RFC 1071): the 16-bit ones'-complement sum of 16-bit big-endian
//! words, its incremental update (RFC 1624) and precomputed prefix sums over immutable
//! content ([`PrefixSums`]), so a static body is never re-read to checksum a segment of it.
//!
//! Vocabulary used throughout:
//! - a *sum* (`u32`) is an accumulation not yet folded to 16 bits; sums add with
//!   [`combine`] (end-around carry), and [`fold`] reduces one to 16 bits;
//! - a *folded sum* (`u16`) is that value folded but **not** complemented;
//! - a *checksum* is the complement of a folded sum, the value written into a header.
//!
//! Two properties of ones'-complement arithmetic (RFC 1071 §2) carry the design:
//! - (A, B) the sum is independent of byte order except for a final swap, so bytes can be
//!   summed in native-endian 64-bit words and the result swapped once;
//! - (C) the sum of a piece that starts at an odd offset of the whole is the byte-swap of
//!   the piece's own sum: that is how pieces of odd length (ring-buffer wrap, prefix sums
//!   at odd offsets) are stitched together (as the prefix sums do).
//!
//! Every function returns a folded sum of exactly `0` only when all summed bytes are zero
//! (otherwise a value in `1..=0xffff`), the same as the naive word-by-word algorithm, so
//! results from the fast and the incremental paths are bit-identical.

// `pub` for the `internals` feature, unreachable without it.
#[cfg_attr(not(feature = "internals"), allow(unreachable_pub))]
pub(crate) mod wide;
pub(crate) use wide::Wide;

/// Folds a 64-bit accumulation to 16 bits with end-around carries (not complemented).
/// Zero stays zero and any non-zero value maps into `1..=0xffff`.
#[inline]
fn fold64(s: u64) -> u16 {
    // Adding a value to itself rotated by half its width leaves, in the upper half,
    // the sum of both halves with the end-around carry already in: 64 -> 32 -> 16 bits.
    let s = (s.wrapping_add(s.rotate_right(32)) >> 32) as u32;
    (s.wrapping_add(s.rotate_right(16)) >> 16) as u16
}

/// [`fold64`] of a 128-bit accumulation: its halves added with end-around carry first.
#[inline]
fn fold128(acc: u128) -> u16 {
    let (lo, carry) = (acc as u64).overflowing_add((acc >> 64) as u64);
    fold64(lo + u64::from(carry))
}

/// Whether a 128-bit accumulation folds to all ones (`fold128(acc) == 0xffff`), without
/// the fold: the fold keeps the value modulo 2^16 - 1 (a divisor of 2^64 - 1) and maps
/// only zero to zero, so it gives `0xffff` exactly for the non-zero multiples of
/// 2^16 - 1; and `s` is a multiple of the odd 2^16 - 1 exactly when `s` times its
/// inverse modulo 2^64 is at most `u64::MAX / (2^16 - 1)`.
#[inline]
fn folds_to_ones(acc: u128) -> bool {
    const INVERSE: u64 = 0xfffe_fffe_fffe_ffff; // 0xffff * INVERSE ≡ 1 (mod 2^64)
    let (lo, carry) = (acc as u64).overflowing_add((acc >> 64) as u64);
    // With a carry, `lo` is below 2^64 - 1: no overflow.
    let s = lo + u64::from(carry);
    s.wrapping_mul(INVERSE) <= u64::MAX / 0xffff && s != 0
}

/// The native-endian word at `at` of `b`.
#[inline]
fn word(b: &[u8], at: usize) -> u64 {
    u64::from_ne_bytes(b[at..at + 8].try_into().expect("eight bytes"))
}

/// `acc` plus the four words `w`, as a 128-bit value congruent to the exact sum modulo
/// 2^64 - 1 (all the fold needs) and zero only if every word added was zero; no carry
/// is lost below 2^64 words.
///
/// On x86-64 the four additions are one add-with-carry chain: a carry out of one word's
/// addition goes into the next (2^64 ≡ 1 modulo 2^64 - 1), and the chain's last carry
/// is counted in the high half. So the value depends on the order pieces were added in,
/// and two accumulations of the same bytes compare equal only once folded. Other
/// targets add each word to a 128-bit value, with its carry.
#[inline]
fn add4(acc: u128, w: [u64; 4]) -> u128 {
    #[cfg(target_arch = "x86_64")]
    {
        use core::arch::x86_64::_addcarry_u64;
        let (mut lo, hi) = (acc as u64, (acc >> 64) as u64);
        let mut c = 0;
        for x in w {
            c = _addcarry_u64(c, lo, x, &mut lo);
        }
        (u128::from(hi + u64::from(c)) << 64) | u128::from(lo)
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        w.iter().fold(acc, |a, &x| a + u128::from(x))
    }
}

/// The four native-endian words of a 32-byte block.
#[inline]
fn words4(b: &[u8]) -> [u64; 4] {
    [word(b, 0), word(b, 8), word(b, 16), word(b, 24)]
}

/// Sums `data` as native-endian words into a folded native-endian 16-bit value.
///
/// The 64-bit words go into a 128-bit accumulator, 32 bytes per turn of the loop
/// ([`add4`]), then 8 bytes at a time. A tail shorter than a word is, on little-endian
/// targets when `data` has eight bytes, the last word of `data` shifted down past the
/// bytes already summed (one load, whatever the tail's length), and otherwise a 4-, a
/// 2- and a 1-byte piece: where a piece sits within a 64-bit lane does not matter as
/// long as it starts on a 16-bit boundary (2^16 ≡ 1 mod 2^16 - 1), and an odd last byte
/// is the first byte of a word padded with zero (RFC 1071 §4.1).
#[inline]
fn sum_native(data: &[u8]) -> u16 {
    fold128(add_native(0, data))
}

/// `acc` plus `data` as native-endian words, unfolded (see [`sum_native`]).
// Always inlined (as `copy_and_add`, `Wide::add_bytes`, `Wide::copy_add`): the
// per-segment sums are short, and inlined into their caller they are specialised for
// what it knows of the lengths instead of paying a call for a few words.
#[inline(always)]
fn add_native(mut acc: u128, data: &[u8]) -> u128 {
    let mut blocks = data.chunks_exact(32);
    for b in &mut blocks {
        acc = add4(acc, words4(b));
    }
    let mut rest = blocks.remainder();
    while let Some((w, tail)) = rest.split_first_chunk::<8>() {
        acc += u128::from(u64::from_ne_bytes(*w));
        rest = tail;
    }
    if rest.is_empty() {
        return acc;
    }
    #[cfg(target_endian = "little")]
    if let Some(last) = data.last_chunk::<8>() {
        // The last eight bytes of `data`, of which the tail is the last `rest.len()`
        // (1 to 7): shifted down to the bottom of the word, the tail's bytes sit where
        // its own load would put them and the bytes above them are zero.
        let gone = 8 - rest.len() as u32;
        return acc + u128::from(u64::from_le_bytes(*last) >> (8 * gone));
    }
    if let Some((w, tail)) = rest.split_first_chunk::<4>() {
        acc += u128::from(u32::from_ne_bytes(*w));
        rest = tail;
    }
    if let Some((w, tail)) = rest.split_first_chunk::<2>() {
        acc += u128::from(u16::from_ne_bytes(*w));
        rest = tail;
    }
    if let Some(&b) = rest.first() {
        acc += u128::from(u16::from_ne_bytes([b, 0]));
    }
    acc
}

/// The ones'-complement sum of `data` as 16-bit big-endian words, an odd trailing byte
/// padded with zero (RFC 1071). The result is already folded, so it is below `2^16` and
/// up to 2^16 such sums can be added in a `u32` before [`fold`]; [`combine`] never
/// overflows.
pub fn sum(data: &[u8]) -> u32 {
    let native = sum_native(data);
    // RFC 1071 §2(B): summing in the other byte order yields the byte-swapped sum.
    u32::from(u16::from_be(native))
}

/// Copies `src` into `dst` (the same length) and returns [`sum`] of the bytes, in one
/// pass: each word is added as it is moved, so the bytes are read once and no separate
/// copy runs (what a segment's payload costs on the way into a transmit buffer).
pub(crate) fn copy_and_sum(src: &[u8], dst: &mut [u8]) -> u32 {
    u32::from(u16::from_be(fold128(copy_and_add(0, src, dst))))
}

/// `acc` plus the native-endian words of `src`, copied into `dst` on the way (see
/// [`copy_and_sum`]), unfolded.
// Always inlined: see `add_native`.
#[inline(always)]
fn copy_and_add(mut acc: u128, src: &[u8], dst: &mut [u8]) -> u128 {
    assert_eq!(src.len(), dst.len(), "copy_and_sum: lengths differ");
    let mut i = 0;
    while i + 32 <= src.len() {
        let block: &[u8; 32] = src[i..i + 32].try_into().expect("32 bytes");
        let out: &mut [u8; 32] = (&mut dst[i..i + 32]).try_into().expect("32 bytes");
        // Word by word through registers: a 32-byte array assignment becomes a call
        // to memcpy, dearer than the four moves for a small payload.
        let w = words4(block);
        for (at, w) in (0..32).step_by(8).zip(w) {
            out[at..at + 8].copy_from_slice(&w.to_ne_bytes());
        }
        acc = add4(acc, w);
        i += 32;
    }
    while i + 8 <= src.len() {
        let w: [u8; 8] = src[i..i + 8].try_into().expect("eight bytes");
        dst[i..i + 8].copy_from_slice(&w);
        acc += u128::from(u64::from_ne_bytes(w));
        i += 8;
    }
    let rest = &src[i..];
    if !rest.is_empty() {
        dst[i..].copy_from_slice(rest);
        // The tail starts at a multiple of eight, so its sum adds in place.
        acc = add_native(acc, rest);
    }
    acc
}

/// Folds a sum's carries into 16 bits (RFC 1071 §4.1). Not complemented.
pub fn fold(sum: u32) -> u16 {
    fold64(u64::from(sum))
}

/// Adds two sums with end-around carry, so the result stays a valid sum for any inputs.
pub fn combine(a: u32, b: u32) -> u32 {
    let (s, carry) = a.overflowing_add(b);
    // 2^32 ≡ 1 (mod 2^16 - 1): the carry re-enters at the bottom. When it does, `s` is
    // below `b`, so adding 1 cannot overflow.
    s + u32::from(carry)
}

/// Adds the folded sum `part` of a piece to `acc`, where the piece starts at an odd byte
/// offset of the whole when `offset_is_odd` (RFC 1071 §2(C): its words are then
/// byte-swapped relative to the whole's).
#[cfg(test)]
pub(crate) fn combine_at(acc: u32, part: u16, offset_is_odd: bool) -> u32 {
    let p = if offset_is_odd {
        part.swap_bytes()
    } else {
        part
    };
    combine(acc, u32::from(p))
}

/// Ones'-complement addition of two 16-bit values.
pub(crate) fn add(a: u16, b: u16) -> u16 {
    fold(u32::from(a) + u32::from(b))
}

/// Ones'-complement subtraction `a - b`, i.e. `a + !b`.
#[cfg(test)]
pub(crate) fn sub(a: u16, b: u16) -> u16 {
    add(a, !b)
}

/// The sum of the IPv4 pseudo-header for TCP/UDP (RFC 9293 §3.1): source and destination
/// address, zero byte + protocol, and the TCP/UDP length (header plus data).
pub fn pseudo_header_v4(src: [u8; 4], dst: [u8; 4], protocol: u8, len: u16) -> u32 {
    let w = |a: u8, b: u8| u32::from(u16::from_be_bytes([a, b]));
    w(src[0], src[1])
        + w(src[2], src[3])
        + w(dst[0], dst[1])
        + w(dst[2], dst[3])
        + u32::from(protocol)
        + u32::from(len)
}

/// The sum of the IPv6 pseudo-header for upper-layer checksums (RFC 8200 §8.1): source
/// and destination address, the upper-layer packet length as 32 bits, three zero bytes
/// and the Next Header value of the upper-layer protocol.
pub fn pseudo_header_v6(src: [u8; 16], dst: [u8; 16], next_header: u8, len: u32) -> u32 {
    let words = |a: [u8; 16]| {
        a.chunks_exact(2)
            .map(|w| u32::from(u16::from_be_bytes([w[0], w[1]])))
            .sum::<u32>()
    };
    words(src) + words(dst) + (len >> 16) + (len & 0xffff) + u32::from(next_header)
}

/// The checksum to write into a header whose other bytes are `data` (checksum field zero).
pub fn checksum(data: &[u8]) -> u16 {
    !fold(sum(data))
}

/// Completes a checksum from a sum (e.g. pseudo-header combined with segment sum).
pub fn finish(sum: u32) -> u16 {
    !fold(sum)
}

/// True when `data`, checksum field included, sums to all ones (RFC 1071 §1: the receiver
/// checks that the sum over the header including the checksum is `0xffff`).
pub fn verify(data: &[u8]) -> bool {
    // All ones reads the same in either byte order: no swap needed.
    sum_native(data) == 0xffff
}

/// [`verify`] for a 20-byte header (IPv4 without options, the common case): three loads
/// and one fold, inlined where the header is parsed.
#[inline]
pub(crate) fn verify_20(header: &[u8; 20]) -> bool {
    folds_to_ones(sum_20(header))
}

/// [`checksum`] of a 20-byte header whose checksum field is zero, as its two bytes in
/// network order: three loads and one fold, the same wherever it is inlined.
#[inline]
pub(crate) fn checksum_20(header: &[u8; 20]) -> [u8; 2] {
    (!fold128(sum_20(header))).to_ne_bytes()
}

/// The 20 bytes as native words, added without folding.
#[inline]
fn sum_20(header: &[u8; 20]) -> u128 {
    let (a, rest) = header.split_first_chunk::<8>().expect("20 bytes");
    let (b, c) = rest.split_first_chunk::<8>().expect("12 bytes");
    let c: &[u8; 4] = c.try_into().expect("4 bytes");
    u128::from(u64::from_ne_bytes(*a))
        + u128::from(u64::from_ne_bytes(*b))
        + u128::from(u32::from_ne_bytes(*c))
}

/// Like [`verify`] with an extra initial sum, e.g. the TCP pseudo-header.
pub fn verify_with(initial: u32, data: &[u8]) -> bool {
    fold(combine(initial, sum(data))) == 0xffff
}

/// Incrementally updates `old_checksum` after one 16-bit word of the covered data changed
/// from `old` to `new` (RFC 1624 §3, eqn. 3: `HC' = ~(~HC + ~m + m')`). Eqn. 3, unlike the
/// older eqn. 2 of RFC 1141, never produces the `-0` that recomputation would not.
pub fn update16(old_checksum: u16, old: u16, new: u16) -> u16 {
    !add(add(!old_checksum, !old), new)
}

/// [`update16`] for a 32-bit field (an address, a sequence number) changed from `old` to
/// `new`; the field must start at an even offset of the covered data.
pub fn update32(old_checksum: u16, old: u32, new: u32) -> u16 {
    let s = u32::from(!old_checksum)
        + u32::from(!(old >> 16) as u16)
        + u32::from(!old as u16)
        + (new >> 16)
        + (new & 0xffff);
    !fold(s)
}

/// Folded sum of `piece` as it contributes when it sits at byte offset `offset` of the
/// whole: RFC 1071 §2(C), odd offsets see the piece's words byte-swapped.
fn positional(piece: &[u8], offset: usize) -> u16 {
    let s = fold(sum(piece));
    if offset % 2 == 1 {
        s.swap_bytes()
    } else {
        s
    }
}

/// Precomputed prefix sums over immutable content (a static file), so the checksum of any
/// byte range can be had by reading at most two blocks of it (the unaligned edges).
///
/// Prefix `k` is the exact integer sum (no folding) of the words of `data[..k * block]`,
/// each byte weighted by its position in the whole: `<< 8` at even offsets, `<< 0` at odd
/// ones. Storing exact `u64`s rather than folded `u16`s costs 6 bytes a block but keeps
/// the difference of two prefixes exact, so the range's sum is zero exactly when the range
/// is all zeros — the one bit folded values lose (`0` vs `0xffff`, both "zero" in ones'
/// complement), which [`PrefixSums::range_sum`] needs to equal `fold(sum(range))`.
#[derive(Debug, Clone)]
pub struct PrefixSums {
    block: usize,
    len: usize,
    /// `prefix[k]` covers `data[..k * block]`, for `k` in `0..=len / block`.
    prefix: Vec<u64>,
}

impl PrefixSums {
    /// Builds the prefix sums of `data` every `block` bytes (a `block` of 0 is taken as 1).
    /// Any block size works; a few KiB keeps the table small and the edges cheap.
    pub fn new(data: &[u8], block: usize) -> PrefixSums {
        let block = block.max(1);
        let mut prefix = Vec::with_capacity(data.len() / block + 1);
        let mut acc: u64 = 0;
        prefix.push(acc);
        for (k, chunk) in data.chunks_exact(block).enumerate() {
            acc += exact_positional(chunk, k * block);
            prefix.push(acc);
        }
        PrefixSums {
            block,
            len: data.len(),
            prefix,
        }
    }

    /// Length of the content these sums were built for.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the data was empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Block size in bytes.
    pub fn block(&self) -> usize {
        self.block
    }

    /// The folded (uncomplemented) sum of `data[start..end]` as if that range began at an
    /// even offset, i.e. exactly `fold(sum(&data[start..end]))`, reading at most about two
    /// blocks of `data`. `data` must be the content the sums were built from; if its
    /// length differs the sum is computed directly (still correct, just slow). Bounds past
    /// the end are clamped to `data.len()` and `start > end` yields the empty range.
    pub fn range_sum(&self, data: &[u8], start: usize, end: usize) -> u16 {
        let end = end.min(data.len());
        let start = start.min(end);
        if data.len() != self.len {
            return fold(sum(&data[start..end]));
        }
        // Whole blocks strictly inside the range: `ka..kb`.
        let ka = start.div_ceil(self.block);
        let kb = end / self.block;
        if ka >= kb {
            // No whole block inside, so the range is shorter than two blocks.
            return fold(sum(&data[start..end]));
        }
        let (a, b) = (ka * self.block, kb * self.block);
        // Every term is non-negative and zero only for all-zero bytes, so the fold below is
        // zero exactly when the whole range is.
        let middle = self.prefix[kb] - self.prefix[ka];
        let total = u64::from(positional(&data[start..a], start))
            + middle
            + u64::from(positional(&data[b..end], b));
        let at_offset = fold64(total);
        // `at_offset` weighs bytes by their offset in the whole; re-base the range to an
        // even start (RFC 1071 §2(C)).
        if start % 2 == 1 {
            at_offset.swap_bytes()
        } else {
            at_offset
        }
    }
}

/// Exact (unfolded) positional sum of `piece` sitting at `offset` of the whole.
fn exact_positional(piece: &[u8], offset: usize) -> u64 {
    let mut even = 0u64;
    let mut odd = 0u64;
    let mut pairs = piece.chunks_exact(2);
    for p in &mut pairs {
        even += u64::from(p[0]);
        odd += u64::from(p[1]);
    }
    if let [last] = pairs.remainder() {
        even += u64::from(*last);
    }
    if offset.is_multiple_of(2) {
        (even << 8) + odd
    } else {
        (odd << 8) + even
    }
}

/// A running checksum over data that arrives in pieces of any length (a ring buffer that
/// wraps, a header and a body in different buffers): each piece is placed at the byte
/// offset where it falls in the whole.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[cfg(test)]
pub(crate) struct Partial {
    sum: u32,
    len: usize,
}

#[cfg(test)]
impl Partial {
    /// An empty sum.
    pub(crate) fn new() -> Partial {
        Partial::default()
    }

    /// Starts from an existing sum (e.g. the pseudo-header), covering no bytes yet.
    pub(crate) fn with_initial(sum: u32) -> Partial {
        Partial { sum, len: 0 }
    }

    /// Appends bytes.
    pub(crate) fn add_bytes(&mut self, data: &[u8]) {
        self.add_folded(fold(sum(data)), data.len());
    }

    /// Appends a piece of `len` bytes known only by its folded sum (as if it started at an
    /// even offset), e.g. from [`PrefixSums::range_sum`].
    pub(crate) fn add_folded(&mut self, part: u16, len: usize) {
        self.sum = combine_at(self.sum, part, self.len % 2 == 1);
        self.len = self.len.wrapping_add(len);
    }

    /// Bytes covered so far.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// The sum so far.
    pub(crate) fn sum(&self) -> u32 {
        self.sum
    }
}

/// Immutable content with precomputed checksum prefix sums: a cached file body, say.
/// Segments cut from it get their payload checksum from the sums, never by reading the
/// bytes again. Cloning shares both.
#[derive(Debug, Clone)]
pub struct SummedBytes {
    bytes: bytes::Bytes,
    sums: std::sync::Arc<PrefixSums>,
}

impl SummedBytes {
    /// Sum `bytes` once, every `block` bytes (1–4 KiB is a good block).
    pub fn new(bytes: bytes::Bytes, block: usize) -> SummedBytes {
        let sums = std::sync::Arc::new(PrefixSums::new(&bytes, block));
        SummedBytes { bytes, sums }
    }
    /// The bytes.
    pub fn bytes(&self) -> &bytes::Bytes {
        &self.bytes
    }
    /// Their prefix sums.
    pub fn sums(&self) -> &PrefixSums {
        &self.sums
    }
    /// Length of the bytes.
    pub fn len(&self) -> usize {
        self.bytes.len()
    }
    /// Whether there are no bytes.
    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }
}

#[cfg(test)]
mod tests;
