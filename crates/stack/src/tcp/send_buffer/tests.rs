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
