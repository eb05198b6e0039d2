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
//!   at odd offsets) are stitched together ([`combine_at`], [`Partial`]).
//!
//! Every function returns a folded sum of exactly `0` only when all summed bytes are zero
//! (otherwise a value in `1..=0xffff`), the same as the naive word-by-word algorithm, so
//! results from the fast and the incremental paths are bit-identical.

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
pub fn copy_and_sum(src: &[u8], dst: &mut [u8]) -> u32 {
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

/// A sum in the making, for a header and payload checksummed together: the pieces'
/// native-endian words added into 128 bits with no fold between them, and one fold at
/// the end ([`Wide::verifies`], [`Wide::checksum_bytes`]): a fold, with its byte swap
/// and end-around carries, is the costly step, and a segment summed as pseudo-header,
/// header and payload needs only one.
///
/// Every piece added with [`Wide::add_bytes`] or [`Wide::copy_add`] must start at an even
/// offset of the whole (a piece at an odd offset goes in folded and byte-swapped:
/// [`Wide::add_folded`]). The raw accumulation depends on how the pieces were added
/// (see `add4`), so sums compare by their folded value ([`Wide::folded`]), and `Wide`
/// has no `==` of its own.
#[derive(Debug, Clone, Copy, Default)]
pub struct Wide(u128);

impl Wide {
    /// The IPv4 pseudo-header of a TCP or UDP datagram of `len` bytes from `src` to
    /// `dst` (RFC 9293 §3.1): its twelve bytes as three native words, the third being
    /// the zero byte, the protocol and the length.
    #[inline]
    pub fn pseudo_v4(src: [u8; 4], dst: [u8; 4], protocol: u8, len: u16) -> Wide {
        let l = len.to_be_bytes();
        let word = |b: [u8; 4]| u64::from(u32::from_ne_bytes(b));
        Wide(u128::from(
            word(src) + word(dst) + word([0, protocol, l[0], l[1]]),
        ))
    }

    /// Plus the bytes of `data`.
    // Always inlined: see `add_native`.
    #[inline(always)]
    pub fn add_bytes(self, data: &[u8]) -> Wide {
        Wide(add_native(self.0, data))
    }

    /// Plus the bytes of `src`, copied into `dst` (the same length) as they are read.
    // Always inlined: see `add_native`.
    #[inline(always)]
    pub fn copy_add(self, src: &[u8], dst: &mut [u8]) -> Wide {
        Wide(copy_and_add(self.0, src, dst))
    }

    /// Plus a piece's sum `part` as [`sum`] or [`fold`] give it, the piece starting at
    /// an odd offset of the whole when `offset_is_odd` (see [`combine_at`]).
    #[inline]
    pub fn add_folded(self, part: u16, offset_is_odd: bool) -> Wide {
        // `sum` is the byte swap of the native sum; a piece at an odd offset is swapped
        // once more (RFC 1071 §2(B), (C)).
        let native = u16::from_be(part);
        let native = if offset_is_odd {
            native.swap_bytes()
        } else {
            native
        };
        Wide(self.0 + u128::from(native))
    }

    /// The sum folded, as [`sum`] gives it.
    #[inline]
    pub fn folded(self) -> u16 {
        u16::from_be(fold128(self.0))
    }

    /// Whether the bytes summed, a checksum field among them, check (RFC 1071 §1:
    /// all ones, which reads the same in either byte order).
    #[inline]
    pub fn verifies(self) -> bool {
        folds_to_ones(self.0)
    }

    /// The checksum of the bytes summed (their checksum field zero), as its two bytes
    /// in network order.
    #[inline]
    pub fn checksum_bytes(self) -> [u8; 2] {
        // The checksum is the complement of the big-endian folded sum, which is the
        // native one read in network order.
        (!fold128(self.0)).to_ne_bytes()
    }
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
pub fn combine_at(acc: u32, part: u16, offset_is_odd: bool) -> u32 {
    let p = if offset_is_odd {
        part.swap_bytes()
    } else {
        part
    };
    combine(acc, u32::from(p))
}

/// Ones'-complement addition of two 16-bit values.
pub fn add(a: u16, b: u16) -> u16 {
    fold(u32::from(a) + u32::from(b))
}

/// Ones'-complement subtraction `a - b`, i.e. `a + !b`.
pub fn sub(a: u16, b: u16) -> u16 {
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
pub fn verify_20(header: &[u8; 20]) -> bool {
    let (a, rest) = header.split_first_chunk::<8>().expect("20 bytes");
    let (b, c) = rest.split_first_chunk::<8>().expect("12 bytes");
    let c: &[u8; 4] = c.try_into().expect("4 bytes");
    let acc = u128::from(u64::from_ne_bytes(*a))
        + u128::from(u64::from_ne_bytes(*b))
        + u128::from(u32::from_ne_bytes(*c));
    folds_to_ones(acc)
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
pub struct Partial {
    sum: u32,
    len: usize,
}

impl Partial {
    /// An empty sum.
    pub fn new() -> Partial {
        Partial::default()
    }

    /// Starts from an existing sum (e.g. the pseudo-header), covering no bytes yet.
    pub fn with_initial(sum: u32) -> Partial {
        Partial { sum, len: 0 }
    }

    /// Appends bytes.
    pub fn add_bytes(&mut self, data: &[u8]) {
        self.add_folded(fold(sum(data)), data.len());
    }

    /// Appends a piece of `len` bytes known only by its folded sum (as if it started at an
    /// even offset), e.g. from [`PrefixSums::range_sum`].
    pub fn add_folded(&mut self, part: u16, len: usize) {
        self.sum = combine_at(self.sum, part, self.len % 2 == 1);
        self.len = self.len.wrapping_add(len);
    }

    /// Bytes covered so far.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Nothing added yet.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The sum so far.
    pub fn sum(&self) -> u32 {
        self.sum
    }

    /// The checksum to write into the header.
    pub fn checksum(&self) -> u16 {
        finish(self.sum)
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
mod tests {
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
            0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11, 0x00, 0x00, 0xc0, 0xa8,
            0x00, 0x01, 0xc0, 0xa8, 0x00, 0xc7,
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
}
