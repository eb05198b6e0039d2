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
mod tests;
