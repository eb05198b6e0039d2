//! [`RingPool`]: one engine's store of ring storage for connection buffers.
//!
//! Idle connections own no buffer memory: a send or receive ring is taken when data
//! arrives and given back when it drains. Going to the allocator (and zeroing 2 KiB)
//! for every request/response would put malloc/free on the data path, so drained rings
//! return to the pool and the next connection that needs one reuses it. The engine owns
//! its pool, sized from its configuration ([`EngineConfig::buffer_pool`]), and lends it
//! to the connection state machine for each call that may take or give back storage:
//! the state machine itself holds no pool and reaches into none.
//!
//! [`EngineConfig::buffer_pool`]: crate::EngineConfig::buffer_pool

/// Smallest ring handed out; rings are powers of two from here.
pub(crate) const MIN_RING: usize = 2048;
/// Size classes kept: 2 KiB … 256 KiB.
const CLASSES: usize = 8;

/// Idle ring storage by size class, each class bounded in bytes. See the
/// [module docs](self).
#[derive(Debug)]
pub struct RingPool {
    classes: [Vec<Vec<u8>>; CLASSES],
    /// Most bytes of idle rings kept per class; rings beyond go back to the allocator.
    bytes_per_class: usize,
}

impl RingPool {
    /// A pool that keeps at most `bytes_per_class` bytes of idle rings in each of its
    /// size classes (2 KiB … 256 KiB, powers of two). It starts empty and fills as
    /// connections drain their buffers.
    pub fn new(bytes_per_class: usize) -> RingPool {
        RingPool {
            classes: Default::default(),
            bytes_per_class,
        }
    }

    /// Bytes of idle rings held.
    pub fn idle_bytes(&self) -> usize {
        self.classes
            .iter()
            .map(|c| c.iter().map(Vec::len).sum::<usize>())
            .sum()
    }

    /// A ring of exactly `size` bytes (contents unspecified).
    pub(crate) fn take(&mut self, size: usize) -> Vec<u8> {
        if let Some(ring) = class(size).and_then(|c| self.classes[c].pop()) {
            return ring;
        }
        vec![0; size]
    }

    /// Give a ring back for reuse (or to the allocator when its class is full, or it
    /// is no ring size).
    pub(crate) fn give(&mut self, ring: Vec<u8>) {
        let Some(c) = class(ring.len()) else { return };
        let kept = &mut self.classes[c];
        if ring.capacity() == ring.len() && (kept.len() + 1) * ring.len() <= self.bytes_per_class {
            kept.push(ring);
        }
    }

    /// Replace `ring` by a pooled ring that holds at least `need` bytes (a power of
    /// two, at least [`MIN_RING`], at most `capacity`), moving the `keep` bytes that
    /// start at `*head` (wrapping) to its start; the old ring comes back to the pool.
    pub(crate) fn regrow(
        &mut self,
        ring: &mut Vec<u8>,
        head: &mut usize,
        keep: usize,
        need: usize,
        capacity: usize,
    ) {
        let size = need
            .checked_next_power_of_two()
            .unwrap_or(need)
            .max(MIN_RING)
            .min(capacity);
        let mut new = self.take(size);
        if keep > 0 {
            let first = keep.min(ring.len() - *head);
            new[..first].copy_from_slice(&ring[*head..*head + first]);
            new[first..keep].copy_from_slice(&ring[..keep - first]);
        }
        self.give(std::mem::replace(ring, new));
        *head = 0;
    }
}

impl Default for RingPool {
    /// 4 MiB per class (see [`EngineConfig::buffer_pool`](crate::EngineConfig)).
    fn default() -> Self {
        RingPool::new(DEFAULT_BYTES_PER_CLASS)
    }
}

/// Idle ring bytes an engine keeps per size class unless configured otherwise.
pub const DEFAULT_BYTES_PER_CLASS: usize = 4 << 20;

fn class(size: usize) -> Option<usize> {
    if size < MIN_RING || !size.is_power_of_two() {
        return None;
    }
    let c = (size / MIN_RING).trailing_zeros() as usize;
    (c < CLASSES).then_some(c)
}

/// `x mod size` for `x < 2 * size` (ring arithmetic without a division).
pub(crate) fn wrap(x: usize, size: usize) -> usize {
    if x >= size {
        x - size
    } else {
        x
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rings_are_reused_and_bounded() {
        let mut pool = RingPool::new(DEFAULT_BYTES_PER_CLASS);
        let a = pool.take(MIN_RING);
        assert_eq!(a.len(), MIN_RING);
        let ptr = a.as_ptr();
        pool.give(a);
        let b = pool.take(MIN_RING);
        assert_eq!(b.as_ptr(), ptr, "the drained ring comes back");
        pool.give(b);
        // Odd sizes are not pooled.
        pool.give(vec![0; 3000]);
        assert_eq!(pool.take(3000).len(), 3000);
        // The pool keeps at most its bound per class.
        let many: Vec<_> = (0..4096).map(|_| pool.take(MIN_RING)).collect();
        many.into_iter().for_each(|r| pool.give(r));
        assert_eq!(pool.idle_bytes(), DEFAULT_BYTES_PER_CLASS);
    }

    #[test]
    fn a_zero_sized_pool_keeps_nothing() {
        let mut pool = RingPool::new(0);
        let r = pool.take(MIN_RING);
        pool.give(r);
        assert_eq!(pool.idle_bytes(), 0);
    }

    #[test]
    fn regrow_keeps_wrapped_bytes_in_order() {
        let mut pool = RingPool::default();
        let mut ring = vec![0u8; MIN_RING];
        ring[MIN_RING - 2..].copy_from_slice(b"ab");
        ring[..2].copy_from_slice(b"cd");
        let mut head = MIN_RING - 2;
        pool.regrow(&mut ring, &mut head, 4, MIN_RING + 1, 1 << 20);
        assert_eq!((ring.len(), head), (2 * MIN_RING, 0));
        assert_eq!(&ring[..4], b"abcd");
        assert_eq!(pool.idle_bytes(), MIN_RING, "the old ring went back");
    }
}
