//! The TCP send buffer: every byte the application queued that the peer has not yet
//! acknowledged, from `snd_una` onward (RFC 9293 §3.3.1, the "send sequence space" left
//! of `snd_una + SND.WND`).
//!
//! Two kinds of data share one FIFO order:
//!
//! * bytes the application handed over by copy, held in a byte ring whose size is bounded
//!   by `capacity` (what [`SendBuffer::space`] reports and what backpressures the
//!   application);
//! * shared immutable chunks ([`Bytes`]), kept by reference without copying (cached static
//!   file bodies). They do not count against `capacity`: their memory is owned elsewhere.
//!
//! Retransmission re-reads any byte from the front by offset, so nothing leaves the buffer
//! before it is acknowledged ([`SendBuffer::consume`]).
//!
//! Memory: an idle connection owns nothing. The ring is taken from the engine's
//! [`RingPool`] on the first copy, sized to what is queued (a power of two, at least
//! [`MIN_RING`], at most `capacity`), grown by doubling while the application queues
//! more (as the engine's memory budget allows, see [`MemoryBudget`]), and shrunk when a
//! quarter full. Small responses therefore never pay for a full-capacity allocation.
//! Once no copied byte remains, a ring of the smallest size is kept, empty, for the
//! connection's next response (a keep-alive connection would otherwise give it back and
//! take it again for every request); the engine gives kept rings back once their
//! connection has been quiet for a while ([`SendBuffer::release_idle_ring`]), and a ring
//! that drains under memory pressure goes back at once. Larger rings always go back
//! when drained. The calls that may take or give back storage borrow the pool;
//! [`SendBuffer::release`] returns the ring of a buffer that is going away.
//!
//! [`MemoryBudget`]: super::pool::MemoryBudget

use std::collections::VecDeque;

use bytes::Bytes;

use super::pool::{fit, should_shrink, wrap, Ring, RingPool, MIN_RING};
use crate::checksum::{self, SummedBytes};

/// A run of queued bytes of one kind.
#[derive(Debug, Clone)]
enum Chunk {
    /// The next `n` copied bytes of the ring, in FIFO order.
    Ring(usize),
    /// A shared chunk; its first `start` bytes are already acknowledged. `summed`: the
    /// chunk is `data = body[base..]` of a body with precomputed checksums.
    Shared {
        data: Bytes,
        start: usize,
        summed: Option<(SummedBytes, usize)>,
    },
}

impl Chunk {
    fn len(&self) -> usize {
        match self {
            Chunk::Ring(n) => *n,
            Chunk::Shared { data, start, .. } => data.len() - start,
        }
    }
}

/// Unacknowledged outgoing bytes, counted from `snd_una` (offset 0).
#[derive(Debug, Clone, Default)]
pub(crate) struct SendBuffer {
    /// Copy ring; `ring.len()` is its current size (0 when unallocated).
    ring: Ring,
    /// Bound on copied bytes held (at most 4 GiB: windows are at most 1 GiB, RFC 7323
    /// §2.3).
    capacity: u32,
    /// Ring index of the oldest copied byte (below the ring's size, at most `capacity`:
    /// 32 bits, like the next).
    head: u32,
    /// Copied bytes held in the ring.
    ring_len: u32,
    /// All bytes held (copied and shared).
    len: usize,
    /// FIFO of runs; never holds an empty run, and never two adjacent `Ring` runs.
    /// Empty while only copied bytes are queued (the ring is then the one run): the
    /// common case of small copied writes never touches it, and an idle connection
    /// holds no storage for it, nor more than a pointer inline.
    chunks: Runs,
}

/// The run list: a `VecDeque` behind a pointer that is null while no run is listed, so
/// the buffer keeps 8 bytes inline for it instead of 32. Only what the buffer uses of
/// `VecDeque`. The deque is never empty: `consume` drops it when no shared run is left
/// (which covers the last run going).
#[derive(Debug, Clone, Default)]
#[allow(clippy::box_collection)] // the box is the point: 8 bytes inline, not 32
struct Runs(Option<Box<VecDeque<Chunk>>>);

impl Runs {
    #[inline]
    fn is_empty(&self) -> bool {
        self.0.is_none()
    }

    fn len(&self) -> usize {
        self.0.as_ref().map_or(0, |v| v.len())
    }

    fn push_back(&mut self, chunk: Chunk) {
        self.0.get_or_insert_with(Box::default).push_back(chunk);
    }

    #[inline]
    fn back_mut(&mut self) -> Option<&mut Chunk> {
        self.0.as_mut()?.back_mut()
    }

    fn front(&self) -> Option<&Chunk> {
        self.0.as_ref()?.front()
    }

    fn front_mut(&mut self) -> Option<&mut Chunk> {
        self.0.as_mut()?.front_mut()
    }

    fn pop_front(&mut self) -> Option<Chunk> {
        self.0.as_mut()?.pop_front()
    }
}

impl<'a> IntoIterator for &'a Runs {
    type Item = &'a Chunk;
    type IntoIter = std::iter::Flatten<std::option::IntoIter<&'a VecDeque<Chunk>>>;
    fn into_iter(self) -> Self::IntoIter {
        self.0.as_deref().into_iter().flatten()
    }
}

impl SendBuffer {
    /// A buffer that will hold at most `capacity` copied bytes. Allocates nothing.
    pub(crate) fn new(capacity: usize) -> Self {
        SendBuffer {
            capacity: u32::try_from(capacity).unwrap_or(u32::MAX),
            ..SendBuffer::default()
        }
    }

    /// Total queued, unacknowledged bytes (copied and shared).
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    #[cfg(test)]
    pub(crate) fn is_empty(&self) -> bool {
        self.len == 0
    }

    fn capacity(&self) -> usize {
        self.capacity as usize
    }

    /// Copy space left: how many more bytes [`push_copy`](Self::push_copy) accepts.
    pub(crate) fn space(&self) -> usize {
        self.capacity() - self.ring_len as usize
    }

    /// Copies as much of `data` as fits and returns how much that was.
    ///
    /// The ring grows as the engine's memory budget allows: under memory pressure it
    /// does not grow past its current size (or a first ring), so fewer bytes may be
    /// taken than [`space`](Self::space) said.
    pub(crate) fn push_copy(&mut self, data: &[u8], pool: &mut RingPool) -> usize {
        let mut n = data.len().min(self.space());
        if n == 0 {
            return 0;
        }
        let need = self.ring_len as usize + n;
        if need > self.ring.len() {
            let size = pool.ring_size(self.ring.len(), need, self.capacity(), true);
            if self.ring.is_empty() {
                self.ring = pool.take(size);
                self.head = 0;
            } else if size > self.ring.len() {
                self.resize(size, pool);
            }
            if need > self.ring.len() {
                pool.counters_mut().sends_clamped += 1;
                n = self.ring.len() - self.ring_len as usize;
                if n == 0 {
                    return 0;
                }
            }
        }
        let size = self.ring.len();
        let tail = wrap(self.head as usize + self.ring_len as usize, size);
        let first = n.min(size - tail);
        self.ring[tail..tail + first].copy_from_slice(&data[..first]);
        if n > first {
            // Wrapped around the ring's end.
            self.ring[..n - first].copy_from_slice(&data[first..n]);
        }
        self.ring_len += n as u32;
        self.len += n;
        match self.chunks.back_mut() {
            None => {}
            Some(Chunk::Ring(run)) => *run += n,
            Some(Chunk::Shared { .. }) => self.chunks.push_back(Chunk::Ring(n)),
        }
        n
    }

    /// Before a shared chunk is queued: the ring's bytes, until now the one implicit
    /// run, become an explicit run in front of it.
    fn open_runs(&mut self) {
        if self.chunks.is_empty() && self.ring_len > 0 {
            self.chunks.push_back(Chunk::Ring(self.ring_len as usize));
        }
    }

    /// Queues a shared chunk without copying it. Always accepted; empty is a no-op.
    pub(crate) fn push_shared(&mut self, data: Bytes) {
        if data.is_empty() {
            return;
        }
        self.open_runs();
        self.len += data.len();
        self.chunks.push_back(Chunk::Shared {
            data,
            start: 0,
            summed: None,
        });
    }

    /// Queue `body[range]` by reference, with the body's precomputed checksums, so the
    /// payload checksum of segments cut from it never re-reads the bytes
    /// ([`SendBuffer::copy_out_summed`]). A range beyond the body is clipped.
    pub(crate) fn push_summed(&mut self, body: &SummedBytes, range: std::ops::Range<usize>) {
        let end = range.end.min(body.len());
        let start = range.start.min(end);
        if start == end {
            return;
        }
        self.open_runs();
        self.len += end - start;
        self.chunks.push_back(Chunk::Shared {
            data: body.bytes().slice(start..end),
            start: 0,
            summed: Some((body.clone(), start)),
        });
    }

    /// Copy bytes `[offset, offset + dst.len())` into `dst` like [`copy_out`], and
    /// return `acc` with their sum added, `dst` being at an even offset of what `acc`
    /// sums. Bytes from [`push_summed`] bodies are summed from the precomputed prefix
    /// sums, not read again.
    ///
    /// [`copy_out`]: SendBuffer::copy_out
    /// [`push_summed`]: SendBuffer::push_summed
    pub(crate) fn copy_out_summed(
        &self,
        offset: usize,
        dst: &mut [u8],
        mut acc: checksum::Wide,
    ) -> checksum::Wide {
        // The usual case: copied bytes only, in one run of the ring.
        if self.chunks.is_empty() && offset.saturating_add(dst.len()) <= self.len {
            let from = wrap(self.head as usize + offset, self.ring.len());
            if let Some(run) = self.ring.get(from..from + dst.len()) {
                return acc.copy_add(run, dst);
            }
        }
        let mut at = 0;
        self.for_each_piece(offset, dst.len(), |piece, summed| {
            let n = piece.len();
            let out = &mut dst[at..at + n];
            let odd = at % 2 == 1;
            acc = match summed {
                Some((body, from)) => {
                    out.copy_from_slice(piece);
                    acc.add_folded(body.sums().range_sum(body.bytes(), from, from + n), odd)
                }
                // Copied bytes at an even offset (all of them but after an odd piece)
                // add unfolded.
                None if !odd => acc.copy_add(piece, out),
                None => acc.add_folded(checksum::fold(checksum::copy_and_sum(piece, out)), odd),
            };
            at += n;
        });
        acc
    }

    /// Copies bytes `[offset, offset + dst.len())`, counted from the front, into `dst`.
    ///
    /// The caller guarantees the range is queued; a range running past the end is a bug
    /// (debug assertion) and in release only the queued part is copied.
    pub(crate) fn copy_out(&self, offset: usize, dst: &mut [u8]) {
        let mut at = 0;
        self.for_each_chunk(offset, dst.len(), |s| {
            dst[at..at + s.len()].copy_from_slice(s);
            at += s.len();
        });
    }

    /// Visits bytes `[offset, offset + len)` as contiguous slices, in order (for
    /// checksumming or scatter-gather transmit). Same range contract as
    /// [`copy_out`](Self::copy_out).
    pub(crate) fn for_each_chunk(&self, offset: usize, len: usize, mut f: impl FnMut(&[u8])) {
        self.for_each_piece(offset, len, |piece, _| f(piece));
    }

    /// [`for_each_chunk`](SendBuffer::for_each_chunk), also telling for each piece
    /// whether it lies in a summed body, and where (body, offset of the piece in it).
    fn for_each_piece(
        &self,
        offset: usize,
        len: usize,
        mut f: impl FnMut(&[u8], Option<(&SummedBytes, usize)>),
    ) {
        debug_assert!(
            offset.saturating_add(len) <= self.len,
            "range {offset}+{len} beyond queued {}",
            self.len
        );
        let end = offset.saturating_add(len).min(self.len);
        if offset >= end {
            return;
        }
        let size = self.ring.len();
        if self.chunks.is_empty() {
            // Only copied bytes: one run, from the ring's head.
            let from = wrap(self.head as usize + offset, size);
            let take = end - offset;
            let first = take.min(size - from);
            f(&self.ring[from..from + first], None);
            if take > first {
                f(&self.ring[..take - first], None);
            }
            return;
        }
        let mut skip = offset;
        let mut remaining = end - offset;
        // Ring index of the first byte of the current `Ring` run.
        let mut ring_at = self.head as usize;
        for chunk in &self.chunks {
            let run = chunk.len();
            if skip >= run {
                skip -= run;
                if let Chunk::Ring(n) = chunk {
                    ring_at = wrap(ring_at + n, size);
                }
                continue;
            }
            let take = (run - skip).min(remaining);
            match chunk {
                Chunk::Ring(n) => {
                    let from = wrap(ring_at + skip, size);
                    let first = take.min(size - from);
                    f(&self.ring[from..from + first], None);
                    if take > first {
                        f(&self.ring[..take - first], None);
                    }
                    ring_at = wrap(ring_at + n, size);
                }
                Chunk::Shared {
                    data,
                    start,
                    summed,
                } => {
                    let from = start + skip;
                    let where_ = summed.as_ref().map(|(body, base)| (body, base + from));
                    f(&data[from..from + take], where_);
                }
            }
            remaining -= take;
            if remaining == 0 {
                return;
            }
            skip = 0;
        }
    }

    /// Removes `n` acknowledged bytes from the front (more than queued empties the
    /// buffer). Frees the ring when no copied byte remains.
    pub(crate) fn consume(&mut self, n: usize, pool: &mut RingPool) {
        let mut n = n.min(self.len);
        self.len -= n;
        let size = self.ring.len();
        if self.chunks.is_empty() {
            self.advance_ring(n, size);
            n = 0;
        }
        while n > 0 {
            let Some(front) = self.chunks.front_mut() else {
                break;
            };
            let done = match front {
                Chunk::Ring(run) => {
                    let take = (*run).min(n);
                    *run -= take;
                    self.head = wrap(self.head as usize + take, size) as u32;
                    self.ring_len -= take as u32;
                    n -= take;
                    *run == 0
                }
                Chunk::Shared { data, start, .. } => {
                    let take = (data.len() - *start).min(n);
                    *start += take;
                    n -= take;
                    *start == data.len()
                }
            };
            if done {
                self.chunks.pop_front();
            }
            if self.chunks.len() <= 1 && !matches!(self.chunks.front(), Some(Chunk::Shared { .. }))
            {
                // Nothing shared left: back to the implicit run, without storage.
                self.chunks = Runs::default();
                self.advance_ring(n, size);
                n = 0;
            }
        }
        if self.ring_len == 0 && !self.ring.is_empty() {
            self.head = 0;
            if self.ring.len() > MIN_RING || pool.pressure() {
                pool.give(std::mem::take(&mut self.ring));
            }
        } else if should_shrink(self.ring.len(), self.ring_len as usize) {
            let size = fit(self.ring_len as usize, self.capacity());
            self.resize(size, pool);
        }
    }

    /// Drop `n` copied bytes from the ring's front (a ring of `size` bytes).
    #[inline]
    fn advance_ring(&mut self, n: usize, size: usize) {
        self.head = wrap(self.head as usize + n, size) as u32;
        self.ring_len -= n as u32;
    }

    /// Move the copied bytes to a pooled ring of `size` bytes.
    fn resize(&mut self, size: usize, pool: &mut RingPool) {
        let mut head = self.head as usize;
        pool.resize(&mut self.ring, &mut head, self.ring_len as usize, size);
        self.head = head as u32;
    }

    /// Whether the buffer holds a ring with no copied byte in it (kept by
    /// [`consume`](Self::consume) for the next response).
    pub(crate) fn holds_empty_ring(&self) -> bool {
        self.ring_len == 0 && !self.ring.is_empty()
    }

    /// Give back a ring kept empty ([`holds_empty_ring`](Self::holds_empty_ring));
    /// returns whether there was one.
    pub(crate) fn release_idle_ring(&mut self, pool: &mut RingPool) -> bool {
        if !self.holds_empty_ring() {
            return false;
        }
        pool.give(std::mem::take(&mut self.ring));
        self.head = 0;
        true
    }

    /// Give the ring back to `pool` and drop everything queued: the connection is
    /// going away.
    pub(crate) fn release(&mut self, pool: &mut RingPool) {
        if !self.ring.is_empty() {
            pool.give(std::mem::take(&mut self.ring));
            self.head = 0;
        }
        // An empty buffer is left as it is (the common case: a connection closes with
        // everything acknowledged); anything still queued is dropped.
        if self.len > 0 || !self.chunks.is_empty() {
            *self = SendBuffer::new(self.capacity());
        }
    }

    /// The shared chunk holding the byte at `offset`, and that byte's position within
    /// the chunk *as it was pushed* (so offsets into precomputed per-chunk checksum
    /// tables stay valid after acknowledgements). `None` if that byte was copied or is
    /// not queued.
    #[cfg(test)]
    pub(crate) fn shared_chunk_at(&self, offset: usize) -> Option<(&Bytes, usize)> {
        let mut skip = offset;
        for chunk in &self.chunks {
            let run = chunk.len();
            if skip < run {
                return match chunk {
                    Chunk::Ring(_) => None,
                    Chunk::Shared { data, start, .. } => Some((data, start + skip)),
                };
            }
            skip -= run;
        }
        None
    }
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
    use std::collections::VecDeque;

    fn read_all(b: &SendBuffer) -> Vec<u8> {
        let mut v = vec![0; b.len()];
        b.copy_out(0, &mut v);
        v
    }

    #[test]
    fn new_allocates_nothing_and_push_copy_respects_capacity() {
        let mut b = SendBuffer::new(10);
        assert!(b.ring.is_empty());
        assert_eq!(b.space(), 10);
        assert_eq!(b.push_copy(b"hello", &mut pool()), 5);
        assert_eq!(b.push_copy(b"world!!", &mut pool()), 5);
        assert_eq!(b.push_copy(b"x", &mut pool()), 0);
        assert_eq!(b.len(), 10);
        assert_eq!(b.space(), 0);
        assert_eq!(read_all(&b), b"helloworld");
        // Copies alone need no run list.
        assert!(b.chunks.is_empty());
    }

    #[test]
    fn shared_chunks_do_not_use_copy_space_and_keep_order() {
        let mut b = SendBuffer::new(4);
        b.push_copy(b"HTTP", &mut pool());
        b.push_shared(Bytes::from_static(b"<body>"));
        b.push_shared(Bytes::new());
        assert_eq!(b.space(), 0);
        assert_eq!(b.len(), 10);
        let mut p = pool();
        b.consume(4, &mut p);
        assert_eq!(b.space(), 4);
        assert!(
            b.holds_empty_ring(),
            "a small ring is kept once no copied byte remains"
        );
        assert!(b.release_idle_ring(&mut p));
        assert!(b.ring.is_empty() && !b.holds_empty_ring());
        assert_eq!(p.in_use(), 0);
        b.push_copy(b"!!", &mut pool());
        assert_eq!(read_all(&b), b"<body>!!");
        let mut mid = [0u8; 4];
        b.copy_out(4, &mut mid);
        assert_eq!(&mid, b"y>!!");
    }

    #[test]
    fn shared_chunk_at_reports_offset_within_original_chunk() {
        let mut b = SendBuffer::new(100);
        b.push_copy(b"abc", &mut pool());
        let body = Bytes::from_static(b"0123456789");
        b.push_shared(body.clone());
        assert!(b.shared_chunk_at(0).is_none());
        assert!(b.shared_chunk_at(2).is_none());
        let (c, off) = b.shared_chunk_at(3).unwrap();
        assert_eq!((c.as_ptr(), off), (body.as_ptr(), 0));
        b.consume(5, &mut pool()); // "abc" and "01"
        let (c, off) = b.shared_chunk_at(1).unwrap();
        assert_eq!((c.as_ptr(), off), (body.as_ptr(), 3));
        assert!(b.shared_chunk_at(8).is_none());
    }

    #[test]
    fn ring_wraps_and_for_each_chunk_splits_at_the_wrap() {
        let mut b = SendBuffer::new(MIN_RING);
        let first: Vec<u8> = (0..MIN_RING).map(|i| i as u8).collect();
        assert_eq!(b.push_copy(&first, &mut pool()), MIN_RING);
        b.consume(MIN_RING - 10, &mut pool());
        assert_eq!(b.push_copy(&[0xAA; 20], &mut pool()), 20);
        let mut pieces = Vec::new();
        b.for_each_chunk(5, 20, |s| pieces.push(s.to_vec()));
        assert_eq!(pieces.len(), 2);
        assert_eq!(pieces[0], first[MIN_RING - 5..].to_vec());
        assert_eq!(pieces[1], vec![0xAA; 15]);
    }

    #[test]
    fn ring_grows_lazily_and_preserves_wrapped_data() {
        let mut b = SendBuffer::new(1 << 20);
        b.push_copy(&[1; 100], &mut pool());
        assert_eq!(b.ring.len(), MIN_RING);
        b.push_copy(&[2; 3000], &mut pool());
        b.consume(2000, &mut pool());
        b.push_copy(&[3; 1000], &mut pool()); // wraps in the 4096 ring
        assert_eq!(b.ring.len(), 4096);
        b.push_copy(&[4; 5000], &mut pool()); // grows, relinearising the wrapped data
        assert_eq!(b.ring.len(), 8192);
        let mut want = vec![2; 1100];
        want.extend_from_slice(&[3; 1000]);
        want.extend_from_slice(&[4; 5000]);
        assert_eq!(read_all(&b), want);
        // A quarter full, the ring shrinks to what it holds.
        b.consume(6000, &mut pool());
        assert_eq!(b.ring.len(), MIN_RING);
        assert_eq!(read_all(&b), vec![4; 1100]);
        b.consume(usize::MAX, &mut pool());
        assert!(b.is_empty());
        // Drained, the smallest ring stays for the next response.
        assert_eq!(b.ring.len(), MIN_RING);
        assert!(b.holds_empty_ring());
    }

    #[test]
    fn drained_rings_are_kept_only_small_and_without_pressure() {
        // A larger ring goes back as soon as it drains.
        let mut p = pool();
        let mut b = SendBuffer::new(1 << 16);
        b.push_copy(&[1; 3000], &mut p);
        assert_eq!(b.ring.len(), 2 * MIN_RING);
        b.consume(3000, &mut p);
        assert!(b.ring.is_empty());
        assert_eq!(p.in_use(), 0);
        // The smallest is kept, and reused without going back to the pool.
        b.push_copy(&[2; 100], &mut p);
        b.consume(100, &mut p);
        assert!(b.holds_empty_ring());
        assert_eq!(p.in_use(), MIN_RING);
        b.push_copy(&[3; 10], &mut p);
        assert_eq!(p.in_use(), MIN_RING);
        assert_eq!(read_all(&b), vec![3; 10]);
        assert!(
            !b.release_idle_ring(&mut p),
            "not empty: nothing to release"
        );
        // Under memory pressure even the smallest goes back at once.
        let budget = crate::tcp::pool::MemoryBudget {
            low: 0,
            pressure: 1,
            limit: 1 << 20,
        };
        let mut tight = RingPool::with_budget(1 << 20, budget);
        let mut b = SendBuffer::new(1 << 16);
        b.push_copy(&[1; 100], &mut tight);
        assert!(tight.pressure());
        b.consume(100, &mut tight);
        assert!(b.ring.is_empty());
        assert_eq!(tight.in_use(), 0);
    }

    #[test]
    fn zero_capacity_accepts_only_shared() {
        let mut b = SendBuffer::new(0);
        assert_eq!(b.push_copy(b"abc", &mut pool()), 0);
        b.push_shared(Bytes::from_static(b"abc"));
        assert_eq!(read_all(&b), b"abc");
    }

    #[cfg(not(debug_assertions))]
    #[test]
    fn out_of_range_copy_out_is_clamped_in_release() {
        let mut b = SendBuffer::new(8);
        b.push_copy(b"abc", &mut pool());
        let mut dst = [0u8; 5];
        b.copy_out(1, &mut dst);
        assert_eq!(&dst, b"bc\0\0\0");
    }

    #[derive(Debug, Clone)]
    enum Op {
        Copy(Vec<u8>),
        Shared(Vec<u8>),
        Consume(usize),
        Check(usize, usize),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            3 => proptest::collection::vec(any::<u8>(), 0..3000).prop_map(Op::Copy),
            2 => proptest::collection::vec(any::<u8>(), 0..1500).prop_map(Op::Shared),
            3 => (0usize..5000).prop_map(Op::Consume),
            3 => (0usize..10_000, 0usize..4000).prop_map(|(a, b)| Op::Check(a, b)),
        ]
    }

    /// Model byte: value, and for shared bytes (chunk id, index within the chunk).
    type ModelByte = (u8, Option<(usize, usize)>);

    proptest! {
        #[test]
        fn matches_a_byte_queue_model(cap in 0usize..6000, ops in proptest::collection::vec(op(), 1..60)) {
            let mut b = SendBuffer::new(cap);
            let mut model: VecDeque<ModelByte> = VecDeque::new();
            let mut chunks: Vec<Bytes> = Vec::new();
            for op in ops {
                match op {
                    Op::Copy(d) => {
                        let copied = model.iter().filter(|m| m.1.is_none()).count();
                        let want = d.len().min(cap - copied);
                        prop_assert_eq!(b.push_copy(&d, &mut pool()), want);
                        model.extend(d[..want].iter().map(|&x| (x, None)));
                    }
                    Op::Shared(d) => {
                        let id = chunks.len();
                        let bytes = Bytes::from(d.clone());
                        chunks.push(bytes.clone());
                        b.push_shared(bytes);
                        model.extend(d.iter().enumerate().map(|(i, &x)| (x, Some((id, i)))));
                    }
                    Op::Consume(n) => {
                        b.consume(n, &mut pool());
                        let n = n.min(model.len());
                        model.drain(..n);
                    }
                    Op::Check(off, len) => {
                        let off = off.min(model.len());
                        let len = len.min(model.len() - off);
                        let mut dst = vec![0u8; len];
                        b.copy_out(off, &mut dst);
                        let want: Vec<u8> = model.range(off..off + len).map(|m| m.0).collect();
                        prop_assert_eq!(&dst, &want);
                        let mut seen = Vec::new();
                        b.for_each_chunk(off, len, |s| {
                            assert!(!s.is_empty());
                            seen.extend_from_slice(s);
                        });
                        prop_assert_eq!(&seen, &want);
                        match (b.shared_chunk_at(off), model.get(off)) {
                            (None, None) | (None, Some((_, None))) => {}
                            (Some((c, i)), Some((x, Some((id, j))))) => {
                                prop_assert_eq!(c.as_ptr(), chunks[*id].as_ptr());
                                prop_assert_eq!(i, *j);
                                prop_assert_eq!(c[i], *x);
                            }
                            (got, want) => prop_assert!(false, "shared_chunk_at({}): {:?} vs {:?}", off, got, want),
                        }
                    }
                }
                let copied = model.iter().filter(|m| m.1.is_none()).count();
                prop_assert_eq!(b.len(), model.len());
                prop_assert_eq!(b.is_empty(), model.is_empty());
                prop_assert_eq!(b.space(), cap - copied);
                prop_assert!(b.ring.len() <= cap);
                if copied == 0 {
                    // Empty, or the smallest ring kept for the next copy.
                    prop_assert!(b.ring.len() <= MIN_RING);
                    prop_assert_eq!(b.holds_empty_ring(), !b.ring.is_empty());
                } else {
                    prop_assert!(!b.ring.is_empty());
                }
            }
        }
    }

    proptest! {
        /// Copy-and-sum gives the bytes `copy_out` gives and the sum a fresh pass over
        /// them would, whatever mix of copied, shared and summed chunks, odd offsets and
        /// acknowledgements lies underneath.
        #[test]
        fn copy_out_summed_matches_a_fresh_sum(
            ops in proptest::collection::vec((0u8..4, 0usize..5000, 0usize..5000), 1..12),
            seed in any::<u8>(),
            window in (0usize..8000, 1usize..3000),
        ) {
            let body: Vec<u8> = (0..9000u32).map(|i| (i as u8).wrapping_mul(13).wrapping_add(seed)).collect();
            let summed = crate::checksum::SummedBytes::new(Bytes::from(body.clone()), 1024);
            let mut b = SendBuffer::new(6000);
            for (kind, x, y) in ops {
                match kind {
                    0 => { b.push_copy(&body[..x % 3000], &mut pool()); }
                    1 => b.push_shared(Bytes::copy_from_slice(&body[x % 4000..x % 4000 + y % 2000])),
                    2 => b.push_summed(&summed, x..x + y),
                    _ => b.consume(x % 700, &mut pool()),
                }
            }
            let off = window.0.min(b.len());
            let len = window.1.min(b.len() - off);
            let mut plain = vec![0u8; len];
            b.copy_out(off, &mut plain);
            let mut dst = vec![0u8; len];
            let sum = b.copy_out_summed(off, &mut dst, crate::checksum::Wide::default());
            prop_assert_eq!(&dst, &plain);
            prop_assert_eq!(
                sum.folded(),
                crate::checksum::fold(crate::checksum::sum(&plain))
            );
        }
    }
}
