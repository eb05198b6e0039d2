use super::*;

const MSS: usize = 1000;

fn ms(n: u64) -> Instant {
    Instant::ZERO + Duration::from_millis(n)
}

/// Ten segments of MSS bytes from 1000, sent at 0, 1, ... 9 ms.
fn ten() -> Scoreboard {
    let mut b = Scoreboard::default();
    for i in 0..10u32 {
        b.on_transmit(
            SeqNum(1000 + i * 1000),
            SeqNum(2000 + i * 1000),
            ms(i as u64),
        );
    }
    b
}

fn check_counts(b: &Scoreboard) {
    let sum = |f: u8| -> usize { b.segs.iter().filter(|s| s.has(f)).map(|s| s.len()).sum() };
    assert_eq!(b.sacked as usize, sum(SACKED));
    assert_eq!(b.lost as usize, sum(LOST));
    assert_eq!(b.retrans as usize, sum(RETRANS));
    for w in b.segs.iter().collect::<Vec<_>>().windows(2) {
        assert_eq!(w[0].end, w[1].start, "records stay contiguous");
    }
}

#[test]
fn records_cover_the_flight_and_cumulative_acks_pop_them() {
    let mut b = ten();
    assert_eq!(b.segs.len(), 10);
    assert_eq!(b.pipe(10_000), 10_000);
    b.on_cumulative_ack(SeqNum(3500), ms(20));
    assert_eq!(b.segs.front().unwrap().start, SeqNum(3500));
    assert_eq!(b.segs.len(), 8);
    b.on_cumulative_ack(SeqNum(11_000), ms(21));
    assert_eq!(b.segs.len(), 0);
    check_counts(&b);
}

#[test]
fn three_sacked_segments_mark_the_hole_below_lost() {
    let mut b = ten();
    // Segment 1000..2000 lost; the peer SACKs 2000..5000.
    let out = b.on_sack(
        &[Some((2000, 5000)), None, None],
        SeqNum(1000),
        SeqNum(11_000),
        ms(20),
        MSS,
    );
    assert!(!out.dsack);
    assert_eq!(b.sacked_bytes(), 3000);
    let reo = b.reo_wnd(SeqNum(1000), false, false, Duration::from_millis(20), MSS);
    assert_eq!(
        reo,
        Duration::ZERO,
        "DupThresh segments SACKed, no reordering seen"
    );
    let loss = b.detect_loss(ms(20), reo, MSS);
    assert_eq!(loss.rack_lost + loss.dupthresh_lost, 1);
    assert_eq!(b.next_lost(MSS), Some((SeqNum(1000), SeqNum(2000))));
    assert_eq!(b.pipe(10_000), 10_000 - 3000 - 1000);
    // Its retransmission is in flight again.
    b.on_transmit(SeqNum(1000), SeqNum(2000), ms(21));
    assert_eq!(b.next_lost(MSS), None);
    assert_eq!(b.pipe(10_000), 7000);
    check_counts(&b);
}

#[test]
fn several_holes_are_all_found_in_one_pass() {
    let mut b = ten();
    // Holes at 1000, 4000 and 7000; everything else SACKed.
    let blocks = [Some((8000, 11_000)), Some((5000, 7000)), Some((2000, 4000))];
    b.on_sack(&blocks, SeqNum(1000), SeqNum(11_000), ms(30), MSS);
    let reo = b.reo_wnd(SeqNum(1000), false, false, Duration::from_millis(20), MSS);
    let loss = b.detect_loss(ms(30), reo, MSS);
    assert_eq!(loss.rack_lost + loss.dupthresh_lost, 3);
    let mut holes = vec![];
    while let Some((s, e)) = b.next_lost(MSS) {
        holes.push(s.0);
        b.on_transmit(s, e, ms(31));
    }
    assert_eq!(holes, [1000, 4000, 7000]);
    check_counts(&b);
}

#[test]
fn reordering_within_the_window_marks_nothing_until_it_expires() {
    let mut b = ten();
    // One segment SACKed above a hole: not DupThresh, so RACK's window applies.
    b.on_sack(
        &[Some((2000, 3000)), None, None],
        SeqNum(1000),
        SeqNum(11_000),
        ms(20),
        MSS,
    );
    let srtt = Duration::from_millis(20);
    let reo = b.reo_wnd(SeqNum(1000), false, false, srtt, MSS);
    assert_eq!(reo, Duration::from_millis(19) / 4, "min_rtt / 4");
    let loss = b.detect_loss(ms(20), reo, MSS);
    assert_eq!(loss.rack_lost, 0);
    let t = loss.timeout.expect("a reordering timer");
    assert!(t > ms(20));
    // The late segment arrives in time: reordering, nothing lost.
    b.on_cumulative_ack(SeqNum(3000), ms(21));
    assert!(b.reordering_seen());
    assert_eq!(b.lost_bytes(), 0);
    check_counts(&b);
}

#[test]
fn rack_marks_a_hole_lost_once_its_window_expires() {
    let mut b = ten();
    b.on_sack(
        &[Some((2000, 3000)), None, None],
        SeqNum(1000),
        SeqNum(11_000),
        ms(20),
        MSS,
    );
    let reo = b.reo_wnd(SeqNum(1000), false, false, Duration::from_millis(20), MSS);
    let t = b.detect_loss(ms(20), reo, MSS).timeout.unwrap();
    let loss = b.detect_loss(t, reo, MSS);
    assert_eq!(loss.rack_lost, 1);
    assert_eq!(b.next_lost(MSS), Some((SeqNum(1000), SeqNum(2000))));
}

#[test]
fn a_lost_retransmission_is_detected_again() {
    let mut b = ten();
    b.on_sack(
        &[Some((2000, 5000)), None, None],
        SeqNum(1000),
        SeqNum(11_000),
        ms(20),
        MSS,
    );
    b.detect_loss(ms(20), Duration::ZERO, MSS);
    b.on_transmit(SeqNum(1000), SeqNum(2000), ms(21));
    // Segments sent after the retransmission get SACKed; it did not arrive.
    b.on_transmit(SeqNum(11_000), SeqNum(12_000), ms(22));
    let blocks = [Some((2000, 12_000)), None, None];
    b.on_sack(&blocks, SeqNum(1000), SeqNum(12_000), ms(45), MSS);
    let loss = b.detect_loss(ms(45), Duration::ZERO, MSS);
    assert_eq!(loss.rack_lost, 1);
    assert_eq!(b.next_lost(MSS), Some((SeqNum(1000), SeqNum(2000))));
    check_counts(&b);
}

#[test]
fn hostile_blocks_are_ignored() {
    let mut b = ten();
    let una = SeqNum(1000);
    let max = SeqNum(11_000);
    for blocks in [
        [Some((5000, 5000)), None, None],               // empty
        [Some((6000, 5000)), None, None],               // reversed
        [Some((10_000, 12_000)), None, None],           // beyond SND.MAX
        [Some((500, 1500)), Some((100, 200)), None],    // straddles SND.UNA
        [Some((0x8000_0000, 0x8000_1000)), None, None], // far away
        [Some((u32::MAX, 100)), None, None],            // wraps, huge
    ] {
        b.on_sack(&blocks, una, max, ms(20), MSS);
    }
    assert_eq!(b.sacked_bytes(), 0);
    assert_eq!(b.segs.len(), 10);
    check_counts(&b);
}

#[test]
fn dsack_is_recognised_below_the_ack_and_inside_the_second_block() {
    let mut b = ten();
    b.on_cumulative_ack(SeqNum(3000), ms(20));
    let out = b.on_sack(
        &[Some((1000, 2000)), None, None],
        SeqNum(3000),
        SeqNum(11_000),
        ms(20),
        MSS,
    );
    assert!(out.dsack);
    assert!(b.reordering_seen());
    let out = b.on_sack(
        &[Some((5000, 6000)), Some((5000, 7000)), None],
        SeqNum(3000),
        SeqNum(11_000),
        ms(21),
        MSS,
    );
    assert!(out.dsack);
    assert_eq!(b.sacked_bytes(), 2000, "the second block still counts");
    check_counts(&b);
}

#[test]
fn tso_records_are_cut_by_sack_blocks_and_retransmissions() {
    let mut b = Scoreboard::default();
    b.on_transmit(SeqNum(0), SeqNum(8000), ms(0));
    b.on_sack(
        &[Some((3000, 5000)), None, None],
        SeqNum(0),
        SeqNum(8000),
        ms(10),
        MSS,
    );
    assert_eq!(b.records().len(), 3);
    b.mark_all_lost();
    assert_eq!(b.lost_bytes(), 6000);
    assert_eq!(b.next_lost(MSS), Some((SeqNum(0), SeqNum(1000))));
    b.on_transmit(SeqNum(0), SeqNum(1000), ms(11));
    assert_eq!(b.next_lost(MSS), Some((SeqNum(1000), SeqNum(2000))));
    b.on_cumulative_ack(SeqNum(500), ms(12));
    check_counts(&b);
    // 7500 outstanding, 2000 SACKed, 5500 lost, 500 of it being retransmitted.
    assert_eq!(b.pipe(7500), 500);
}

#[test]
fn rescue_and_tail_pick_the_highest_unsacked() {
    let mut b = ten();
    b.on_sack(
        &[Some((2000, 9000)), None, None],
        SeqNum(1000),
        SeqNum(11_000),
        ms(20),
        MSS,
    );
    assert_eq!(b.rescue(MSS), Some((SeqNum(10_000), SeqNum(11_000))));
    assert_eq!(b.last(MSS), Some((SeqNum(10_000), SeqNum(11_000))));
    b.on_transmit(SeqNum(10_000), SeqNum(11_000), ms(21));
    assert_eq!(b.rescue(MSS), Some((SeqNum(9000), SeqNum(10_000))));
    let blocks = [Some((10_000, 11_000)), Some((2000, 9000)), None];
    b.on_sack(&blocks, SeqNum(1000), SeqNum(11_000), ms(22), MSS);
    assert_eq!(
        b.last(MSS),
        Some((SeqNum(9000), SeqNum(10_000))),
        "not a SACKed one"
    );
}

#[test]
fn odd_byte_sack_edges_never_cut_records_below_a_segment() {
    let mut b = Scoreboard::default();
    b.on_transmit(SeqNum(0), SeqNum(8000), ms(0)); // one TSO run of 8 segments
    for i in 0..50u32 {
        let l = 17 + i * 131;
        let blocks = [Some((l, l + 1)), Some((l + 40, l + 90)), None];
        b.on_sack(&blocks, SeqNum(0), SeqNum(8000), ms(1), MSS);
    }
    assert_eq!(b.segs.len(), 1, "no block covered a whole segment");
    assert_eq!(b.sacked_bytes(), 0);
    // A block from the middle of segment 2 to the middle of segment 5 SACKs 3 and 4.
    b.on_sack(
        &[Some((2500, 5500)), None, None],
        SeqNum(0),
        SeqNum(8000),
        ms(2),
        MSS,
    );
    assert_eq!(b.sacked_bytes(), 2000);
    assert_eq!(
        b.records(),
        [(0, 3000, 0), (3000, 5000, SACKED), (5000, 8000, 0)]
    );
    // Edges inside a SACKed record do not cut it either.
    b.on_sack(
        &[Some((3500, 6000)), None, None],
        SeqNum(0),
        SeqNum(8000),
        ms(3),
        MSS,
    );
    assert_eq!(b.records().len(), 4);
    assert_eq!(b.sacked_bytes(), 3000);
    check_counts(&b);
}

#[test]
fn a_sacked_head_is_forgotten_on_renege() {
    let mut b = ten();
    b.on_sack(
        &[Some((1000, 11_000)), None, None],
        SeqNum(1000),
        SeqNum(11_000),
        ms(20),
        MSS,
    );
    assert_eq!(b.sacked_bytes(), 10_000);
    b.renege_if_head_sacked();
    b.mark_all_lost();
    assert_eq!(b.next_lost(MSS), Some((SeqNum(1000), SeqNum(2000))));
    assert_eq!(b.sacked_bytes(), 0);
    check_counts(&b);
}

#[test]
fn non_sack_head_marking_and_clear() {
    let mut b = ten();
    assert!(b.mark_head_lost(MSS));
    assert!(
        !b.mark_head_lost(MSS),
        "already waiting for its retransmission"
    );
    assert_eq!(b.next_lost(MSS), Some((SeqNum(1000), SeqNum(2000))));
    b.clear_lost();
    assert_eq!(b.lost_bytes(), 0);
    check_counts(&b);
    b.clear();
    assert!(b.is_quiet());
}

#[test]
fn arbitrary_operations_keep_the_counts_true() {
    // A small deterministic fuzz over every operation.
    let mut rng = 0x1234_5678_u64;
    let mut next = || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    for _ in 0..200 {
        let mut b = Scoreboard::default();
        let mut una = SeqNum(next() as u32);
        let mut max = una;
        for step in 0..60u64 {
            let now = ms(step);
            match next() % 7 {
                0 | 1 => {
                    let len = 1 + (next() % 3000) as usize;
                    b.on_transmit(max, max + len, now);
                    max += len;
                }
                2 => {
                    let a = (next() % 4000) as usize;
                    let l = una + a;
                    let r = l + (next() % 3000) as usize;
                    let blocks = [Some((l.0, r.0)), Some((r.0, (r + 500usize).0)), None];
                    b.on_sack(&blocks, una, max, now, 1000);
                }
                3 => {
                    let out = max.since(una);
                    if out > 0 {
                        una += (next() as usize) % (out + 1);
                        // The one-record shortcut does what the walk does.
                        let mut walked = b.clone();
                        walked.cumulative_ack_walk(una, now);
                        b.on_cumulative_ack(una, now);
                        assert_eq!(b, walked);
                    }
                }
                4 => {
                    b.detect_loss(now, Duration::from_millis(next() % 5), 1000);
                }
                5 => {
                    if let Some((s, e)) = b.next_lost(1000).or_else(|| b.rescue(1000)) {
                        b.on_transmit(s, e, now);
                    }
                }
                _ => {
                    if next() % 4 == 0 {
                        b.mark_all_lost();
                    } else {
                        b.mark_head_lost(1000);
                    }
                }
            }
            check_counts(&b);
            assert!(b.pipe(max.since(una)) <= max.since(una) + b.retrans as usize);
            if let Some(f) = b.segs.front() {
                assert_eq!(f.start, una);
                assert_eq!(b.segs.back().unwrap().end, max);
            }
        }
    }
}
