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
