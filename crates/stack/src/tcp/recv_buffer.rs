//! The TCP receive buffer: in-order bytes received but not yet taken by the application
//! ("readable", up to `rcv_nxt`), followed by out-of-order data held beyond a gap
//! (RFC 9293 §3.10.7.4: segments beyond `rcv_nxt` but inside the window may be kept for
//! later processing).
//!
//! Offsets given to [`RecvBuffer::write_at`] count from the end of the readable data,
//! i.e. from `rcv_nxt`. Nothing is stored beyond `capacity` bytes from the first
//! readable byte, so the advertised window ([`RecvBuffer::window`], space from
//! `rcv_nxt` on) bounds what a peer may send. Out-of-order data is tracked as at most
//! `max_ranges` disjoint ranges: a hostile peer cannot make reassembly cost more than
//! that in CPU. Each range remembers when it was last written, so SACK blocks can be
//! reported most-recent first (RFC 2018 §4).
//!
//! Memory follows the bytes held, not where they sit in the window: readable bytes live
//! in a byte ring sized to them (a power of two, at least [`MIN_RING`], at most
//! `capacity`; grown by doubling, shrunk when a quarter full, given back when empty),
//! and each out-of-order range owns exactly its own bytes. So eight one-byte segments
//! spread over a 256 KiB window cost eight small ranges, not a 256 KiB ring. Everything
//! is taken from, or charged to, the engine's [`RingPool`], which holds the engine's
//! [`MemoryBudget`]: under memory pressure out-of-order data is refused and what was
//! held is pruned, the window offered stops at the storage already held
//! ([`RecvBuffer::offer`]), and at the limit in-order data that needs more storage is
//! not stored. An idle connection owns nothing. The calls that may take or give back
//! storage borrow the pool; [`RecvBuffer::release`] returns the storage of a buffer
//! that is going away.
//!
//! [`MemoryBudget`]: super::pool::MemoryBudget

use super::pool::{fit, should_shrink, wrap, Ring, RingPool, MIN_RING, RANGE_OVERHEAD};

/// One out-of-order range, `[start, end)` relative to `rcv_nxt`, and its bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
struct OooRange {
    start: usize,
    end: usize,
    /// Write counter value of the latest write that touched this range.
    stamp: u64,
    /// The range's `end - start` bytes.
    data: Vec<u8>,
}

impl OooRange {
    /// What the range is charged to the pool.
    fn cost(&self) -> usize {
        self.data.capacity() + RANGE_OVERHEAD
    }
}

/// Received bytes not yet read by the application, plus out-of-order data.
#[derive(Debug, Default)]
#[cfg_attr(test, derive(Clone))]
pub(crate) struct RecvBuffer {
    /// Ring of the readable bytes; `ring.len()` is its current size (0 when
    /// unallocated).
    ring: Ring,
    /// At most 4 GiB (windows are at most 1 GiB, RFC 7323 §2.3).
    capacity: u32,
    max_ranges: u32,
    /// Ring index of the first readable byte (below `capacity`, so 32 bits).
    head: u32,
    /// At most `capacity`.
    readable_len: u32,
    /// The out-of-order ranges; `None` while there are none, so that a connection
    /// without losses holds no storage (nor inline bytes) for them.
    ooo: Option<Box<Ooo>>,
}

/// Out-of-order state, allocated with the first range of a loss episode and freed with
/// the last.
#[derive(Debug, Default, Clone)]
struct Ooo {
    /// Sorted by `start`, disjoint and never touching (touching ranges are merged); all
    /// lie within `window()`. Never empty.
    ranges: Vec<OooRange>,
    /// Counts out-of-order writes, to order SACK blocks by recency.
    stamp: u64,
}

impl RecvBuffer {
    /// A buffer of `capacity` bytes keeping at most `max_ranges` disjoint out-of-order
    /// ranges. Allocates nothing.
    pub(crate) fn new(capacity: usize, max_ranges: usize) -> Self {
        RecvBuffer {
            capacity: u32::try_from(capacity).unwrap_or(u32::MAX),
            max_ranges: u32::try_from(max_ranges).unwrap_or(u32::MAX),
            ..RecvBuffer::default()
        }
    }

    pub(crate) fn capacity(&self) -> usize {
        self.capacity as usize
    }

    fn max_ranges(&self) -> usize {
        self.max_ranges as usize
    }

    /// The out-of-order ranges, in order.
    fn ranges(&self) -> &[OooRange] {
        self.ooo.as_deref().map_or(&[], |o| &o.ranges)
    }

    /// In-order bytes waiting for the application.
    pub(crate) fn readable_len(&self) -> usize {
        self.readable_len as usize
    }

    fn head(&self) -> usize {
        self.head as usize
    }

    /// Space from `rcv_nxt` onward: the most that may be advertised (RFC 9293
    /// §3.8.6.2 leaves the silly-window rules to the caller), and the bound on what is
    /// stored.
    pub(crate) fn window(&self) -> usize {
        self.capacity() - self.readable_len()
    }

    /// The window to offer now: [`window`](Self::window), or under memory pressure
    /// only the free space of the storage already held (at least a first ring's), so
    /// that a loaded engine does not invite data it would have to grow for. (The
    /// caller never moves the right edge left, RFC 9293 §3.8.6.)
    pub(crate) fn offer(&self, pool: &mut RingPool) -> usize {
        let window = self.window();
        if !pool.pressure() {
            return window;
        }
        let held = self.ring.len().max(MIN_RING).min(self.capacity());
        let room = held.saturating_sub(self.readable_len());
        if room < window {
            pool.counters_mut().windows_clamped += 1;
        }
        room.min(window)
    }

    /// How many of `len` more in-order bytes the buffer could store now: all of them,
    /// or, at the memory limit, what the ring it has (or a first ring) takes. Data shown
    /// to the application straight from a frame is cut to this first, since what the
    /// application leaves unconsumed must then be kept.
    pub(crate) fn storable(&self, len: usize, pool: &RingPool) -> usize {
        let need = self.readable_len() + len;
        if need <= self.ring.len() {
            return len;
        }
        let size = pool.ring_size(self.ring.len(), need, self.capacity(), false);
        len.min(size.saturating_sub(self.readable_len()))
    }

    pub(crate) fn has_out_of_order(&self) -> bool {
        self.ooo.is_some()
    }

    /// Stores `data` at `[offset, offset + data.len())` beyond the readable data
    /// (`offset` relative to `rcv_nxt`), clipped to [`window`](Self::window).
    ///
    /// Out-of-order data (`offset > 0`) is not stored when it would need a new range
    /// while `max_ranges` are already held, nor under memory pressure (which also
    /// prunes what this buffer held out of order). A write at offset 0 is stored as
    /// far as the memory budget lets the ring grow, and joins any out-of-order ranges
    /// it reaches.
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
            self.hold_out_of_order(offset, data, pool);
            0
        } else {
            self.write_in_order(data, pool, false)
        }
    }

    /// Keeps `data`, which the application was shown at `rcv_nxt` and did not consume,
    /// at the front of the readable bytes' end (the buffer held nothing readable): it
    /// was accepted, so it is stored whatever the memory budget says.
    pub(crate) fn keep(&mut self, data: &[u8], pool: &mut RingPool) {
        debug_assert!(self.readable_len() == 0 && data.len() <= self.window());
        let stored = self.write_in_order(data, pool, true);
        debug_assert_eq!(stored, data.len());
    }

    /// The first contiguous slice of readable data; shorter than
    /// [`readable_len`](Self::readable_len) when the ring wraps (consume it and call
    /// again for the rest).
    pub(crate) fn readable(&self) -> &[u8] {
        if self.readable_len() == 0 {
            return &[];
        }
        let first = self.readable_len().min(self.ring.len() - self.head());
        &self.ring[self.head()..self.head() + first]
    }

    /// Rotate the ring so all readable data is one slice (`readable()` then returns
    /// `readable_len` bytes). Costs a pass over the ring; the engine calls it only when
    /// the application could not use a wrapped prefix.
    pub(crate) fn make_contiguous(&mut self) {
        if self.head() + self.readable_len() > self.ring.len() {
            let head = self.head();
            self.ring.rotate_left(head);
            self.head = 0;
        }
    }

    /// Drops `n` bytes the application has read (at most `readable_len`). Frees the
    /// ring when nothing readable is left, and shrinks it when it is a quarter full.
    pub(crate) fn consume(&mut self, n: usize, pool: &mut RingPool) {
        let n = n.min(self.readable_len());
        if n == 0 {
            return;
        }
        self.readable_len -= n as u32;
        self.head = wrap(self.head() + n, self.ring.len()) as u32;
        if self.readable_len() == 0 {
            pool.give(std::mem::take(&mut self.ring));
            self.head = 0;
        } else if should_shrink(self.ring.len(), self.readable_len()) {
            let size = fit(self.readable_len(), self.capacity());
            let (mut head, keep) = (self.head(), self.readable_len());
            pool.resize(&mut self.ring, &mut head, keep, size);
            self.head = head as u32;
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
                .ranges()
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

    /// Give the storage back to `pool` and forget everything held: the connection is
    /// going away.
    pub(crate) fn release(&mut self, pool: &mut RingPool) {
        pool.give(std::mem::take(&mut self.ring));
        self.drop_ranges(pool);
        *self = RecvBuffer::new(self.capacity(), self.max_ranges());
    }

    /// Drops every out-of-order range, uncharging it; returns the bytes they held.
    fn drop_ranges(&mut self, pool: &mut RingPool) -> usize {
        let Some(ooo) = self.ooo.take() else {
            return 0;
        };
        pool.uncharge(ooo.ranges.iter().map(OooRange::cost).sum());
        ooo.ranges.iter().map(|r| r.end - r.start).sum()
    }

    /// Holds `data` at `offset > 0` (already clipped to the window) as out-of-order
    /// data, merged with the ranges it overlaps or touches.
    fn hold_out_of_order(&mut self, offset: usize, data: &[u8], pool: &mut RingPool) {
        let end = offset + data.len();
        // Ranges in [first, last) overlap or touch [offset, end): they merge with it.
        let ranges = self.ranges();
        let first = ranges.partition_point(|r| r.end < offset);
        let last = ranges.partition_point(|r| r.start <= end);
        if first == last && ranges.len() >= self.max_ranges() {
            return;
        }
        let joined = &ranges[first..last];
        let start = joined.first().map_or(offset, |r| r.start.min(offset));
        let stop = joined.last().map_or(end, |r| r.end.max(end));
        let held: usize = joined.iter().map(|r| r.end - r.start).sum();
        let new_range = if first == last { RANGE_OVERHEAD } else { 0 };
        if !pool.may_hold_out_of_order(stop - start - held + new_range) {
            // RFC 2018 §8 lets a receiver discard data it has SACKed; the sender keeps
            // it until cumulatively acknowledged and retransmits it.
            pool.counters_mut().ooo_refused += 1;
            let pruned = self.drop_ranges(pool);
            pool.counters_mut().ooo_pruned_bytes += pruned as u64;
            return;
        }
        let max_ranges = self.max_ranges();
        let ooo = self.ooo.get_or_insert_with(|| {
            // One allocation per out-of-order episode: there are never more than
            // max_ranges ranges.
            Box::new(Ooo {
                ranges: Vec::with_capacity(max_ranges),
                stamp: 0,
            })
        });
        ooo.stamp += 1;
        if first == last {
            let range = OooRange {
                start: offset,
                end,
                stamp: ooo.stamp,
                data: data.to_vec(),
            };
            pool.charge(range.cost());
            ooo.ranges.insert(first, range);
        } else if last == first + 1 && offset >= ooo.ranges[first].start {
            // The common case after a loss: the next segment extends one range at its
            // tail (or repeats part of it). Amortised growth in place.
            let range = &mut ooo.ranges[first];
            let overlap = range.end.min(end) - offset;
            let at = offset - range.start;
            range.data[at..at + overlap].copy_from_slice(&data[..overlap]);
            if end > range.end {
                let before = range.data.capacity();
                range.data.extend_from_slice(&data[overlap..]);
                pool.charge(range.data.capacity() - before);
                range.end = end;
            }
            range.stamp = ooo.stamp;
        } else {
            // The write bridges ranges or extends one at its front: one new range of
            // exactly the bytes held replaces them.
            let mut bytes = vec![0; stop - start];
            let mut freed = 0;
            for r in ooo.ranges.drain(first..last) {
                bytes[r.start - start..r.end - start].copy_from_slice(&r.data);
                freed += r.cost();
            }
            // The latest write wins where it overlaps (a retransmission carries the
            // same bytes anyway), as it does in the ring.
            bytes[offset - start..end - start].copy_from_slice(data);
            pool.uncharge(freed);
            let range = OooRange {
                start,
                end: stop,
                stamp: ooo.stamp,
                data: bytes,
            };
            pool.charge(range.cost());
            ooo.ranges.insert(first, range);
        }
    }

    /// Appends `data` (at `rcv_nxt`, within the window) to the readable bytes as far as
    /// the memory budget lets the ring grow (all of it when `forced`), then any held
    /// ranges it reaches. Returns by how much `rcv_nxt` advances.
    fn write_in_order(&mut self, data: &[u8], pool: &mut RingPool, forced: bool) -> usize {
        let stored = self.append(data, pool, forced);
        if stored < data.len() {
            pool.counters_mut().rcv_dropped += 1;
        }
        if stored == 0 {
            return stored;
        }
        let Some(mut ooo) = self.ooo.take() else {
            return stored;
        };
        let mut advanced = stored;
        // Ranges are disjoint and never touch, so the ones this write reaches are those
        // starting within it; their bytes past it become readable too. They were
        // accepted, so they move to the ring whatever the budget says.
        let joined = ooo.ranges.partition_point(|r| r.start <= stored);
        let mut freed = 0;
        for r in ooo.ranges.drain(..joined) {
            freed += r.cost();
            if r.end > advanced {
                advanced += self.append(&r.data[advanced - r.start..], pool, true);
            }
        }
        pool.uncharge(freed);
        if !ooo.ranges.is_empty() {
            // rcv_nxt moved: the remaining ranges keep their place in the stream.
            for r in &mut ooo.ranges {
                r.start -= advanced;
                r.end -= advanced;
            }
            self.ooo = Some(ooo);
        }
        advanced
    }

    /// Copies as much of `data` as fits after the readable bytes, growing the ring as
    /// the memory budget allows (to whatever `data` needs when `forced`); returns how
    /// much was stored.
    fn append(&mut self, data: &[u8], pool: &mut RingPool, forced: bool) -> usize {
        let need = self.readable_len() + data.len();
        if need > self.ring.len() {
            let size = if forced {
                fit(need, self.capacity())
            } else {
                pool.ring_size(self.ring.len(), need, self.capacity(), false)
            };
            if size > self.ring.len() {
                let (mut head, keep) = (self.head(), self.readable_len());
                pool.resize(&mut self.ring, &mut head, keep, size);
                self.head = head as u32;
            }
        }
        let size = self.ring.len();
        let n = data.len().min(size - self.readable_len());
        if n == 0 {
            return 0;
        }
        let at = wrap(self.head() + self.readable_len(), size);
        let first = n.min(size - at);
        self.ring[at..at + first].copy_from_slice(&data[..first]);
        self.ring[..n - first].copy_from_slice(&data[first..n]);
        self.readable_len += n as u32;
        n
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
    use crate::tcp::pool::{fit, MIN_RING};

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
    fn ring_grows_keeping_wrapped_data_and_holds_out_of_order_data_apart() {
        let mut b = RecvBuffer::new(1 << 16, 8);
        let stream: Vec<u8> = (0..20_000u32).map(|i| (i * 7 + i / 251) as u8).collect();
        assert_eq!(b.write_at(0, &stream[..2000], &mut pool()), 2000);
        assert_eq!(b.ring.len(), MIN_RING);
        b.consume(1500, &mut pool());
        // Wraps inside the 2048 ring; out-of-order data does not make the ring grow.
        assert_eq!(b.write_at(0, &stream[2000..2400], &mut pool()), 400);
        assert_eq!(b.write_at(600, &stream[3000..3100], &mut pool()), 0);
        assert_eq!(b.write_at(5000, &stream[7400..9000], &mut pool()), 0);
        assert_eq!(b.ring.len(), MIN_RING);
        // Filling the gap moves the joined range into the ring.
        assert_eq!(b.write_at(0, &stream[2400..3000], &mut pool()), 700);
        assert_eq!(b.ring.len(), MIN_RING);
        assert_eq!(readable_bytes(&b), stream[1500..3100].to_vec());
        b.consume(1600, &mut pool());
        assert!(b.ring.is_empty(), "nothing readable: the ring went back");
        assert!(b.has_out_of_order());
        assert_eq!(sacks(&b), vec![(4300, 5900)]);
        assert_eq!(b.write_at(0, &stream[3100..7400], &mut pool()), 5900);
        assert_eq!(readable_bytes(&b), stream[3100..9000].to_vec());
        assert_eq!(b.ring.len(), 8192);
        // A quarter full, the ring shrinks to what it holds.
        b.consume(5000, &mut pool());
        assert_eq!(b.ring.len(), 1024.max(MIN_RING));
        assert_eq!(readable_bytes(&b), stream[8100..9000].to_vec());
    }

    #[test]
    fn memory_follows_the_bytes_held_not_their_place_in_the_window() {
        let mut pool = pool();
        let mut b = RecvBuffer::new(256 << 10, 8);
        // Eight one-byte segments spread over the window (the pinning attack).
        for i in 1..=8 {
            assert_eq!(b.write_at(i * 30_000, b"x", &mut pool), 0);
        }
        assert_eq!(sacks(&b).len(), 8);
        assert!(b.ring.is_empty());
        let held = pool.in_use();
        assert!(
            held <= 8 * (8 + RANGE_OVERHEAD),
            "{held} bytes for 8 bytes held"
        );
        b.release(&mut pool);
        assert_eq!(pool.in_use(), 0);
    }

    #[test]
    fn under_pressure_out_of_order_data_is_pruned_and_the_window_offered_stops_at_the_ring() {
        let mut pool = crate::tcp::pool::small_pool(4);
        let mut b = RecvBuffer::new(1 << 20, 8);
        assert_eq!(b.write_at(5000, &[1; 1000], &mut pool), 0);
        assert_eq!(b.write_at(0, &[0; 100], &mut pool), 100);
        assert_eq!(b.offer(&mut pool), (1 << 20) - 100);
        // Another connection's data brings the engine under pressure.
        let other = pool.take(8 * MIN_RING);
        assert!(pool.pressure());
        assert_eq!(
            b.offer(&mut pool),
            MIN_RING - 100,
            "only the ring's free space"
        );
        assert_eq!(pool.counters().windows_clamped, 1);
        assert_eq!(b.write_at(6000, &[1; 10], &mut pool), 0);
        assert!(!b.has_out_of_order(), "held data pruned");
        let c = pool.counters();
        assert_eq!((c.ooo_refused, c.ooo_pruned_bytes), (1, 1000));
        // In-order data still grows the ring, up to the limit; beyond it, the tail is
        // not stored (the peer retransmits it).
        assert_eq!(b.write_at(0, &[2; 6000], &mut pool), 6000);
        assert_eq!(b.ring.len(), 8192);
        assert_eq!(b.write_at(0, &[3; 20_000], &mut pool), 8192 - 6100);
        assert_eq!(pool.counters().rcv_dropped, 1);
        pool.give(other);
        b.release(&mut pool);
        assert_eq!(pool.in_use(), 0);
        assert!(!pool.pressure());
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
            let mut pool = pool();
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
                        prop_assert_eq!(b.write_at(off, &data, &mut pool), expect);
                        rcv_nxt += expect;
                    }
                    Op::Consume(n) => {
                        b.consume(n, &mut pool);
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
                // The account is exact, and memory follows the bytes held.
                let ranges: usize = b.ranges().iter().map(OooRange::cost).sum();
                prop_assert_eq!(pool.in_use(), b.ring.len() + ranges);
                let readable = b.readable_len();
                prop_assert!(b.ring.len() <= fit(readable, cap).max(4 * readable));
                for r in b.ranges() {
                    prop_assert_eq!(r.data.len(), r.end - r.start);
                    prop_assert!(r.data.capacity() <= (2 * r.data.len()).max(8));
                }
            }
            b.release(&mut pool);
            prop_assert_eq!(pool.in_use(), 0);
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
