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
mod tests;
