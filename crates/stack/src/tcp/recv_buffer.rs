//! The TCP receive buffer: in-order bytes received but not yet taken by the application
//! ("readable", up to `rcv_nxt`), followed by out-of-order data held beyond a gap
//! (RFC 9293 §3.10.7.4: segments beyond `rcv_nxt` but inside the window may be kept for
//! later processing).
//!
//! Offsets given to [`RecvBuffer::write_at`] count from the end of the readable data,
//! i.e. from `rcv_nxt`. Both kinds of data live in one byte ring of at most `capacity`
//! bytes, so the advertised window ([`RecvBuffer::window`], space from `rcv_nxt` on) is
//! also a hard memory bound. Out-of-order data is tracked as at most `max_ranges`
//! disjoint ranges: a hostile peer cannot make reassembly cost more than that in memory
//! or CPU. Each range remembers when it was last written, so SACK blocks can be reported
//! most-recent first (RFC 2018 §4).
//!
//! Memory: an idle connection owns nothing. The ring is taken from the engine's
//! [`RingPool`] on the first stored byte, sized to what is held (a power of two, at
//! least [`MIN_RING`], at most `capacity`), grown by doubling, and given back once
//! nothing is readable and nothing is held out of order. The calls that may take or
//! give back storage borrow the pool; [`RecvBuffer::release`] returns the ring of a
//! buffer that is going away.

use super::pool::{wrap, RingPool};

/// One out-of-order range, `[start, end)` relative to `rcv_nxt`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct OooRange {
    start: usize,
    end: usize,
    /// Write counter value of the latest write that touched this range.
    stamp: u64,
}

/// Received bytes not yet read by the application, plus out-of-order data.
#[derive(Debug, Default)]
#[cfg_attr(test, derive(Clone))]
pub(crate) struct RecvBuffer {
    /// Ring; `ring.len()` is its current size (0 when unallocated).
    ring: Vec<u8>,
    capacity: usize,
    max_ranges: usize,
    /// Ring index of the first readable byte.
    head: usize,
    readable_len: usize,
    /// Sorted by `start`, disjoint and never touching (touching ranges are merged); all
    /// lie within `window()`.
    ranges: Vec<OooRange>,
    /// Counts out-of-order writes, to order SACK blocks by recency.
    stamp: u64,
}

impl RecvBuffer {
    /// A buffer of `capacity` bytes keeping at most `max_ranges` disjoint out-of-order
    /// ranges. Allocates nothing.
    pub(crate) fn new(capacity: usize, max_ranges: usize) -> Self {
        RecvBuffer {
            capacity,
            max_ranges,
            ..RecvBuffer::default()
        }
    }

    pub(crate) fn capacity(&self) -> usize {
        self.capacity
    }

    /// In-order bytes waiting for the application.
    pub(crate) fn readable_len(&self) -> usize {
        self.readable_len
    }

    /// Space from `rcv_nxt` onward: what may be advertised (RFC 9293 §3.8.6.2 leaves the
    /// silly-window rules to the caller).
    pub(crate) fn window(&self) -> usize {
        self.capacity - self.readable_len
    }

    pub(crate) fn has_out_of_order(&self) -> bool {
        !self.ranges.is_empty()
    }

    /// Stores `data` at `[offset, offset + data.len())` beyond the readable data
    /// (`offset` relative to `rcv_nxt`), clipped to [`window`](Self::window).
    ///
    /// Out-of-order data (`offset > 0`) that would need a new range when `max_ranges`
    /// are already held is not stored. A write at offset 0 is always stored and joins
    /// any out-of-order ranges it reaches.
    ///
    /// Returns how many bytes became readable (by how much `rcv_nxt` advances),
    /// including previously held out-of-order data the write connected.
    pub(crate) fn write_at(&mut self, offset: usize, data: &[u8], pool: &mut RingPool) -> usize {
        let window = self.window();
        if offset >= window || data.is_empty() {
            return 0;
        }
        let end = offset.saturating_add(data.len()).min(window);
        let data = &data[..end - offset];

        if offset > 0 {
            // Ranges in [first, last) overlap or touch [offset, end): they merge with it.
            let first = self.ranges.partition_point(|r| r.end < offset);
            let last = self.ranges.partition_point(|r| r.start <= end);
            if first == last && self.ranges.len() >= self.max_ranges {
                return 0;
            }
            self.store(offset, data, pool);
            if self.ranges.capacity() == 0 {
                // Exactly one allocation per out-of-order episode: there are never more
                // than max_ranges ranges.
                self.ranges.reserve_exact(self.max_ranges);
            }
            self.stamp += 1;
            let mut merged = OooRange {
                start: offset,
                end,
                stamp: self.stamp,
            };
            if first == last {
                self.ranges.insert(first, merged);
            } else {
                merged.start = merged.start.min(self.ranges[first].start);
                merged.end = merged.end.max(self.ranges[last - 1].end);
                self.ranges[first] = merged;
                self.ranges.drain(first + 1..last);
            }
            return 0;
        }

        self.store(0, data, pool);
        let mut advanced = end;
        if !self.ranges.is_empty() {
            let joined = self.ranges.partition_point(|r| r.start <= advanced);
            if joined > 0 {
                advanced = advanced.max(self.ranges[joined - 1].end);
                self.ranges.drain(..joined);
            }
            // rcv_nxt moved: the remaining ranges keep their place in the stream.
            for r in &mut self.ranges {
                r.start -= advanced;
                r.end -= advanced;
            }
        }
        self.readable_len += advanced;
        advanced
    }

    /// The first contiguous slice of readable data; shorter than
    /// [`readable_len`](Self::readable_len) when the ring wraps (consume it and call
    /// again for the rest).
    pub(crate) fn readable(&self) -> &[u8] {
        if self.readable_len == 0 {
            return &[];
        }
        let first = self.readable_len.min(self.ring.len() - self.head);
        &self.ring[self.head..self.head + first]
    }

    /// Rotate the ring so all readable data is one slice (`readable()` then returns
    /// `readable_len` bytes). Costs a pass over the ring; the engine calls it only when
    /// the application could not use a wrapped prefix. Out-of-order data keeps its place
    /// relative to the head.
    pub(crate) fn make_contiguous(&mut self) {
        if self.head + self.readable_len > self.ring.len() {
            self.ring.rotate_left(self.head);
            self.head = 0;
        }
    }

    /// Drops `n` bytes the application has read (at most `readable_len`). Frees the
    /// storage when nothing is left.
    pub(crate) fn consume(&mut self, n: usize, pool: &mut RingPool) {
        let n = n.min(self.readable_len);
        if n == 0 {
            return;
        }
        self.readable_len -= n;
        self.head = wrap(self.head + n, self.ring.len());
        if self.readable_len == 0 && self.ranges.is_empty() {
            pool.give(std::mem::take(&mut self.ring));
            self.ranges.clear();
            self.head = 0;
        }
    }

    /// Writes the out-of-order ranges as `(start, end)` offsets relative to `rcv_nxt`
    /// into `out`, most recently written first, then the others by decreasing recency
    /// (RFC 2018 §4: the first block holds the latest segment, the following ones
    /// repeat the most recently reported). Returns how many were written.
    pub(crate) fn sack_ranges(&self, out: &mut [(u32, u32)]) -> usize {
        let mut below = u64::MAX;
        let mut written = 0;
        for slot in out.iter_mut() {
            // Ranges are few (max_ranges) and `out` is at most 4 long on the wire, so a
            // selection scan beats sorting.
            let Some(next) = self
                .ranges
                .iter()
                .filter(|r| r.stamp < below)
                .max_by_key(|r| r.stamp)
            else {
                break;
            };
            *slot = (to_u32(next.start), to_u32(next.end));
            below = next.stamp;
            written += 1;
        }
        written
    }

    /// Give the ring back to `pool` and forget everything held: the connection is
    /// going away.
    pub(crate) fn release(&mut self, pool: &mut RingPool) {
        pool.give(std::mem::take(&mut self.ring));
        *self = RecvBuffer::new(self.capacity, self.max_ranges);
    }

    /// Copies `data` to ring position `rcv_nxt + offset`, allocating or growing the ring
    /// as needed. The caller has clipped `offset + data.len()` to `window()`.
    fn store(&mut self, offset: usize, data: &[u8], pool: &mut RingPool) {
        let need = self.readable_len + offset + data.len();
        if need > self.ring.len() {
            self.grow(need, pool);
        }
        let size = self.ring.len();
        let at = wrap(wrap(self.head + self.readable_len, size) + offset, size);
        let first = data.len().min(size - at);
        self.ring[at..at + first].copy_from_slice(&data[..first]);
        self.ring[..data.len() - first].copy_from_slice(&data[first..]);
    }

    /// Reallocates the ring to hold at least `need` bytes from the head, keeping readable
    /// and out-of-order data at the same distance from the head.
    fn grow(&mut self, need: usize, pool: &mut RingPool) {
        // Bytes from the head up to the end of the last out-of-order range.
        let span = self.readable_len + self.ranges.last().map_or(0, |r| r.end);
        pool.regrow(&mut self.ring, &mut self.head, span, need, self.capacity);
    }
}

/// Range offsets are below `capacity`; a window that large cannot be advertised anyway
/// (RFC 7323 §2.3 caps it at 2^30), so saturate rather than wrap.
fn to_u32(x: usize) -> u32 {
    u32::try_from(x).unwrap_or(u32::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tcp::pool::MIN_RING;

    /// A pool for one call: storage comes from the allocator and goes back to it.
    fn pool() -> RingPool {
        RingPool::default()
    }
    use proptest::prelude::*;

    /// Drains all readable bytes of a copy of `b`.
    fn readable_bytes(b: &RecvBuffer) -> Vec<u8> {
        let mut b = b.clone();
        let mut out = Vec::new();
        while b.readable_len() > 0 {
            let s = b.readable();
            assert!(!s.is_empty());
            out.extend_from_slice(s);
            let n = s.len();
            b.consume(n, &mut pool());
        }
        out
    }

    fn sacks(b: &RecvBuffer) -> Vec<(u32, u32)> {
        let mut out = [(0, 0); 8];
        let n = b.sack_ranges(&mut out);
        out[..n].to_vec()
    }

    #[test]
    fn in_order_writes_become_readable() {
        let mut b = RecvBuffer::new(100, 4);
        assert!(b.ring.is_empty());
        assert_eq!(b.write_at(0, b"hello", &mut pool()), 5);
        assert_eq!(b.write_at(0, b" world", &mut pool()), 6);
        assert_eq!(b.readable(), b"hello world");
        assert_eq!(b.window(), 89);
        b.consume(6, &mut pool());
        assert_eq!(b.readable(), b"world");
        b.consume(5, &mut pool());
        assert_eq!(b.readable_len(), 0);
        assert!(b.ring.is_empty(), "storage freed when drained");
        assert_eq!(b.window(), 100);
    }

    #[test]
    fn gap_filled_releases_out_of_order_data() {
        let mut b = RecvBuffer::new(100, 4);
        assert_eq!(b.write_at(5, b"fghij", &mut pool()), 0);
        assert_eq!(b.write_at(15, b"pq", &mut pool()), 0);
        assert!(b.has_out_of_order());
        assert_eq!(b.readable_len(), 0);
        assert_eq!(b.window(), 100);
        assert_eq!(sacks(&b), vec![(15, 17), (5, 10)]);
        // Fills [0,5) and connects [5,10); [15,17) stays out of order, now at 5..7.
        assert_eq!(b.write_at(0, b"abcde", &mut pool()), 10);
        assert_eq!(readable_bytes(&b), b"abcdefghij");
        assert_eq!(sacks(&b), vec![(5, 7)]);
        assert_eq!(b.write_at(0, b"klmno", &mut pool()), 7);
        assert_eq!(readable_bytes(&b), b"abcdefghijklmnopq");
        assert!(!b.has_out_of_order());
    }

    #[test]
    fn writes_are_clipped_to_the_window() {
        let mut b = RecvBuffer::new(8, 4);
        assert_eq!(b.write_at(0, b"abcdefghijkl", &mut pool()), 8);
        assert_eq!(b.window(), 0);
        assert_eq!(b.write_at(0, b"x", &mut pool()), 0);
        b.consume(3, &mut pool());
        assert_eq!(b.write_at(2, b"XYZ", &mut pool()), 0);
        assert_eq!(sacks(&b), vec![(2, 3)]);
        assert_eq!(b.write_at(0, b"mn", &mut pool()), 3);
        assert_eq!(readable_bytes(&b), b"defghmnX");
        assert_eq!(b.write_at(usize::MAX, b"zz", &mut pool()), 0);
    }

    #[test]
    fn range_bound_rejects_new_ranges_but_not_merges_or_in_order() {
        let mut b = RecvBuffer::new(1000, 2);
        assert_eq!(b.write_at(10, b"aa", &mut pool()), 0);
        assert_eq!(b.write_at(20, b"bb", &mut pool()), 0);
        assert_eq!(b.write_at(30, b"cc", &mut pool()), 0); // third range: dropped
        assert_eq!(sacks(&b), vec![(20, 22), (10, 12)]);
        assert_eq!(b.write_at(12, b"AA", &mut pool()), 0); // touches [10,12): merges
        assert_eq!(b.write_at(18, b"BBB", &mut pool()), 0); // overlaps [20,22)
        assert_eq!(sacks(&b), vec![(18, 22), (10, 14)]);
        assert_eq!(b.write_at(13, &[b'x'; 6], &mut pool()), 0); // bridges both ranges into one
        assert_eq!(sacks(&b), vec![(10, 22)]);
        assert_eq!(b.write_at(0, &[b'.'; 10], &mut pool()), 22);
        assert!(!b.has_out_of_order());
        let mut want = vec![b'.'; 10];
        want.extend_from_slice(b"aaAxxxxxxBBb");
        assert_eq!(readable_bytes(&b), want);
    }

    #[test]
    fn zero_max_ranges_keeps_only_in_order_data() {
        let mut b = RecvBuffer::new(100, 0);
        assert_eq!(b.write_at(1, b"b", &mut pool()), 0);
        assert!(!b.has_out_of_order());
        assert!(b.ring.is_empty());
        assert_eq!(b.write_at(0, b"a", &mut pool()), 1);
    }

    #[test]
    fn sack_order_follows_recency_and_respects_out_len() {
        let mut b = RecvBuffer::new(1000, 8);
        b.write_at(100, b"x", &mut pool());
        b.write_at(300, b"x", &mut pool());
        b.write_at(200, b"x", &mut pool());
        b.write_at(101, b"y", &mut pool()); // refreshes the first range
        let mut out = [(0, 0); 2];
        assert_eq!(b.sack_ranges(&mut out), 2);
        assert_eq!(out, [(100, 102), (200, 201)]);
        assert_eq!(sacks(&b), vec![(100, 102), (200, 201), (300, 301)]);
        assert_eq!(b.sack_ranges(&mut []), 0);
    }

    #[test]
    fn ring_grows_keeping_wrapped_and_out_of_order_data() {
        let mut b = RecvBuffer::new(1 << 16, 8);
        let stream: Vec<u8> = (0..20_000u32).map(|i| (i * 7 + i / 251) as u8).collect();
        assert_eq!(b.write_at(0, &stream[..2000], &mut pool()), 2000);
        assert_eq!(b.ring.len(), MIN_RING);
        b.consume(1500, &mut pool());
        // Wraps inside the 2048 ring, then an out-of-order write forces growth.
        assert_eq!(b.write_at(0, &stream[2000..2400], &mut pool()), 400);
        assert_eq!(b.write_at(600, &stream[3000..3100], &mut pool()), 0);
        assert!(b.ring.len() >= 1600);
        assert_eq!(b.write_at(5000, &stream[7400..9000], &mut pool()), 0);
        assert_eq!(b.ring.len(), 8192);
        assert_eq!(b.write_at(0, &stream[2400..3000], &mut pool()), 700);
        assert_eq!(readable_bytes(&b), stream[1500..3100].to_vec());
        b.consume(1600, &mut pool());
        assert!(b.has_out_of_order());
        assert_eq!(sacks(&b), vec![(4300, 5900)]);
        assert_eq!(b.write_at(0, &stream[3100..7400], &mut pool()), 5900);
        assert_eq!(readable_bytes(&b), stream[3100..9000].to_vec());
    }

    #[derive(Debug, Clone)]
    enum Op {
        Write(usize, usize),
        Consume(usize),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            4 => (0usize..3000, 0usize..1200).prop_map(|(o, l)| Op::Write(o, l)),
            // Small offsets make overlaps, duplicates and in-order data frequent.
            3 => (0usize..64, 0usize..300).prop_map(|(o, l)| Op::Write(o, l)),
            // Coarse-grained offsets make ranges that exactly touch frequent.
            3 => (0usize..40, 0usize..8).prop_map(|(o, l)| Op::Write(o * 64, l * 64)),
            2 => (0usize..2000).prop_map(Op::Consume),
        ]
    }

    /// Stream byte at absolute position `p`: retransmissions carry the same bytes.
    fn byte(p: usize) -> u8 {
        (p.wrapping_mul(131) ^ (p >> 8)) as u8
    }

    /// Maximal runs of `true` in `held` as `[start, end)`.
    fn runs(held: &[bool]) -> Vec<(usize, usize)> {
        let mut out = Vec::new();
        let mut i = 0;
        while i < held.len() {
            if held[i] {
                let s = i;
                while i < held.len() && held[i] {
                    i += 1;
                }
                out.push((s, i));
            } else {
                i += 1;
            }
        }
        out
    }

    proptest! {
        #[test]
        fn matches_a_reassembly_model(
            cap in 1usize..5000,
            max_ranges in 0usize..5,
            ops in proptest::collection::vec(op(), 1..80),
        ) {
            let mut b = RecvBuffer::new(cap, max_ranges);
            // Model: stream positions already read, made readable (rcv_nxt), and the
            // out-of-order bytes held, indexed relative to rcv_nxt.
            let mut read = 0usize;
            let mut rcv_nxt = 0usize;
            let mut held = vec![false; cap];
            let mut latest: Option<(usize, usize)> = None; // absolute, last accepted OOO write
            for op in ops {
                match op {
                    Op::Write(off, len) => {
                        let data: Vec<u8> = (0..len).map(|i| byte(rcv_nxt + off + i)).collect();
                        let window = cap - (rcv_nxt - read);
                        let end = (off + len).min(window);
                        let mut expect = 0;
                        if off < end {
                            let mut next = held.clone();
                            next[off..end].iter_mut().for_each(|h| *h = true);
                            let accepted = off == 0 || runs(&next).len() <= max_ranges
                                || runs(&next).len() <= runs(&held).len();
                            if accepted {
                                held = next;
                                if off > 0 {
                                    latest = Some((rcv_nxt + off, rcv_nxt + end));
                                }
                                expect = held.iter().take_while(|h| **h).count();
                                held.drain(..expect);
                                held.resize(cap, false);
                            }
                        }
                        prop_assert_eq!(b.write_at(off, &data, &mut pool()), expect);
                        rcv_nxt += expect;
                    }
                    Op::Consume(n) => {
                        b.consume(n, &mut pool());
                        read += n.min(rcv_nxt - read);
                    }
                }
                prop_assert_eq!(b.readable_len(), rcv_nxt - read);
                prop_assert_eq!(b.window(), cap - (rcv_nxt - read));
                let want: Vec<u8> = (read..rcv_nxt).map(byte).collect();
                prop_assert_eq!(readable_bytes(&b), want);
                // Out-of-order data lies inside the window.
                prop_assert!(held[b.window().min(cap)..].iter().all(|h| !h));
                let model_runs = runs(&held);
                prop_assert!(model_runs.len() <= max_ranges);
                prop_assert_eq!(b.has_out_of_order(), !model_runs.is_empty());
                let mut got: Vec<(usize, usize)> =
                    sacks(&b).iter().map(|&(s, e)| (s as usize, e as usize)).collect();
                if let (Some(&first), Some((ls, le))) = (got.first(), latest) {
                    // The latest accepted out-of-order write, if still out of order, is
                    // inside the first block.
                    if le > rcv_nxt && held[ls.max(rcv_nxt) - rcv_nxt] {
                        prop_assert!(first.0 + rcv_nxt <= ls.max(rcv_nxt) && le <= first.1 + rcv_nxt);
                    }
                }
                got.sort_unstable();
                prop_assert_eq!(got, model_runs);
                if rcv_nxt == read && !b.has_out_of_order() {
                    prop_assert!(b.ring.is_empty());
                }
                prop_assert!(b.ring.len() <= cap);
            }
        }
    }

    #[test]
    fn make_contiguous_joins_a_wrapped_view() {
        let mut b = RecvBuffer::new(MIN_RING, 4);
        let fill: Vec<u8> = (0..MIN_RING).map(|i| (i * 7) as u8).collect();
        assert_eq!(b.write_at(0, &fill[..1500], &mut pool()), 1500);
        b.consume(1400, &mut pool());
        // 100 + 1000 readable bytes from position 1400 wrap the 2048-byte ring; 100 more
        // sit out of order beyond a 100-byte gap.
        assert_eq!(b.write_at(0, &fill[1500..], &mut pool()), MIN_RING - 1500);
        assert_eq!(b.write_at(0, &fill[..452], &mut pool()), 452);
        assert_eq!(b.readable_len(), 1100);
        assert_eq!(b.write_at(100, &fill[..100], &mut pool()), 0);
        assert!(b.readable().len() < 1100);
        b.make_contiguous();
        let mut want = fill[1400..].to_vec();
        want.extend_from_slice(&fill[..452]);
        assert_eq!(b.readable(), &want[..]);
        assert_eq!(
            b.write_at(0, &fill[..100], &mut pool()),
            200,
            "the gap fills and joins the held range"
        );
        assert_eq!(b.readable_len(), 1300);
    }
}
