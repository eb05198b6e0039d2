//! A per-thread pool of ring storage for connection buffers.
//!
//! Idle connections own no buffer memory: a send or receive ring is taken when data
//! arrives and given back when it drains. Going to the allocator (and zeroing 2 KiB)
//! for every request/response would put malloc/free on the data path, so drained rings
//! return here instead and the next connection that needs one reuses it. Each worker is
//! one thread, so a thread-local pool is the worker's own: no locks, no sharing.

use std::cell::RefCell;

/// Smallest ring handed out; rings are powers of two from here.
pub const MIN_RING: usize = 2048;
/// Size classes kept: 2 KiB … 256 KiB.
const CLASSES: usize = 8;
/// Bytes of idle storage the pool keeps per size class.
const BYTES_PER_CLASS: usize = 4 << 20;

thread_local! {
    static POOL: RefCell<[Vec<Vec<u8>>; CLASSES]> = RefCell::new(Default::default());
}

fn class(size: usize) -> Option<usize> {
    if size < MIN_RING || !size.is_power_of_two() {
        return None;
    }
    let c = (size / MIN_RING).trailing_zeros() as usize;
    (c < CLASSES).then_some(c)
}

/// A ring of exactly `size` bytes (contents unspecified).
pub fn take(size: usize) -> Vec<u8> {
    if let Some(c) = class(size) {
        if let Some(v) = POOL.with(|p| p.borrow_mut()[c].pop()) {
            return v;
        }
    }
    vec![0; size]
}

/// Give a ring back for reuse (or to the allocator when the pool is full).
pub fn give(ring: Vec<u8>) {
    if let Some(c) = class(ring.len()) {
        if ring.capacity() == ring.len() {
            POOL.with(|p| {
                let mut p = p.borrow_mut();
                if p[c].len() * ring.len() < BYTES_PER_CLASS {
                    p[c].push(ring);
                }
            });
        }
    }
}

/// Replace `ring` by a pooled ring that holds at least `need` bytes (a power of two, at
/// least [`MIN_RING`], at most `capacity`), moving the `keep` bytes that start at `*head`
/// (wrapping) to its start; the old ring goes back to the pool.
pub fn regrow(ring: &mut Vec<u8>, head: &mut usize, keep: usize, need: usize, capacity: usize) {
    let size = need
        .checked_next_power_of_two()
        .unwrap_or(need)
        .max(MIN_RING)
        .min(capacity);
    let mut new = take(size);
    if keep > 0 {
        let first = keep.min(ring.len() - *head);
        new[..first].copy_from_slice(&ring[*head..*head + first]);
        new[first..keep].copy_from_slice(&ring[..keep - first]);
    }
    give(std::mem::replace(ring, new));
    *head = 0;
}

/// `x mod size` for `x < 2 * size` (ring arithmetic without a division).
pub fn wrap(x: usize, size: usize) -> usize {
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
        let a = take(MIN_RING);
        assert_eq!(a.len(), MIN_RING);
        let ptr = a.as_ptr();
        give(a);
        let b = take(MIN_RING);
        assert_eq!(b.as_ptr(), ptr, "the drained ring comes back");
        give(b);
        // Odd sizes are not pooled.
        give(vec![0; 3000]);
        assert_eq!(take(3000).len(), 3000);
        // The pool keeps at most BYTES_PER_CLASS per class.
        let many: Vec<_> = (0..4096).map(|_| take(MIN_RING)).collect();
        many.into_iter().for_each(give);
        let kept = POOL.with(|p| p.borrow()[0].len());
        assert_eq!(kept * MIN_RING, BYTES_PER_CLASS);
    }
}
