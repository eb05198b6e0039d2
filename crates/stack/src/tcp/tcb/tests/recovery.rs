//! Scripted segment-level tests of loss recovery: the SACK scoreboard (RFC 2018, RFC
//! 6675), RACK-TLP (RFC 8985), PRR (RFC 6937) and the undo of spurious retransmissions
//! (RFC 2883, RFC 3522). The peer is played by hand; every segment and time is fixed.

use super::*;
use crate::tcp::tcb::LossCounters;

const M: usize = MSS as usize;
const MU: u32 = MSS as u32;

/// Sequence number of our `i`-th full segment.
fn at(i: u32) -> u32 {
    ISS + 1 + i * MU
}

/// Payload of a full segment with the timestamp option on every segment.
const TS_SEG: u32 = MU - 12;

/// An ACK from the peer acknowledging up to our segment `acked` (exclusive) and
/// SACKing the given ranges of segments [from, to).
fn sack(acked: u32, blocks: &[(u32, u32)]) -> Segment {
    sack_of(MU, acked, blocks)
}

/// [`sack`] for segments of `size` bytes.
fn sack_of(size: u32, acked: u32, blocks: &[(u32, u32)]) -> Segment {
    let at = |i: u32| ISS + 1 + i * size;
    let mut s = ack(IRS + 1, at(acked), 65535);
    for (slot, &(l, r)) in s.sack.iter_mut().zip(blocks) {
        *slot = Some((at(l), at(r)));
    }
    s
}

/// The sequence numbers of the data segments in `out`.
fn seqs(out: &[TxSegment]) -> Vec<u32> {
    out.iter()
        .filter(|s| s.payload_len > 0 || s.fin)
        .map(|s| s.seq.0)
        .collect()
}

/// Established with SACK, `n` full segments queued and the first window sent at 0 ms.
fn sending(n: usize) -> Tcb {
    let mut tcb = passive_sack(&cfg());
    tcb.send(&payload(n * M), &mut pool()).unwrap();
    let out = tx(&mut tcb, ms(0));
    assert_eq!(out.len(), n.min(10));
    tcb
}

#[test]
fn three_holes_are_repaired_in_one_round_trip_without_a_timeout() {
    let mut tcb = sending(10);
    // Segments 1, 4 and 7 are lost; the peer ACKs segment 0, then SACKs the others as
    // they arrive, all within one round trip.
    let mut resent = vec![];
    let acks = [
        sack(1, &[]),
        sack(1, &[(2, 3)]),
        sack(1, &[(2, 4)]),
        sack(1, &[(5, 6), (2, 4)]),
        sack(1, &[(5, 7), (2, 4)]),
        sack(1, &[(8, 9), (5, 7), (2, 4)]),
        sack(1, &[(8, 10), (5, 7), (2, 4)]),
    ];
    for (i, a) in acks.iter().enumerate() {
        rx(&mut tcb, ms(50 + i as u64), a);
        resent.extend(seqs(&tx(&mut tcb, ms(50 + i as u64))));
    }
    assert_eq!(resent, [at(1), at(4), at(7)], "each hole once, in order");
    // The retransmissions arrive: everything is acknowledged a round trip later.
    rx(&mut tcb, ms(100), &sack(10, &[]));
    assert!(tx(&mut tcb, ms(100)).is_empty());
    assert_eq!(tcb.snd_una(), SeqNum(at(10)));
    assert_eq!(tcb.next_deadline(), None, "no timer left running");
    let c = tcb.take_counters();
    assert_eq!(c.rtos, 0);
    assert_eq!(c.fast_retransmits, 1, "one recovery episode");
    assert_eq!(c.retransmitted_segments, 3);
    assert_eq!(c.retransmitted_bytes, 3 * MU);
    // The controller's reduction (CUBIC's β by default), reached through PRR.
    assert_eq!(tcb.cwnd(), tcb.ssthresh());
}

#[test]
fn a_lost_tail_is_repaired_by_a_probe_not_a_timeout() {
    let mut tcb = sending(10);
    // Segments 8 and 9 (the tail) are lost: nothing after them brings a SACK.
    for i in 1..=8 {
        rx(&mut tcb, ms(40 + i), &sack(i as u32, &[]));
        assert!(tx(&mut tcb, ms(40 + i)).is_empty());
    }
    let rto_at = ms(48) + tcb.rto();
    let pto_at = tcb.next_deadline().expect("a probe timer");
    assert!(pto_at < rto_at, "the probe comes before the timeout");
    // The probe resends the last segment.
    assert_eq!(seqs(&tick(&mut tcb, pto_at)), [at(9)]);
    // The peer SACKs it a round trip later: RACK sees segment 8 was sent before it
    // and is lost.
    let t = pto_at + std::time::Duration::from_millis(50);
    rx(&mut tcb, t, &sack(8, &[(9, 10)]));
    assert_eq!(seqs(&tx(&mut tcb, t)), [at(8)]);
    rx(
        &mut tcb,
        t + std::time::Duration::from_millis(20),
        &sack(10, &[]),
    );
    assert_eq!(tcb.next_deadline(), None);
    let c = tcb.take_counters();
    assert_eq!((c.tlps, c.rtos, c.fast_retransmits), (1, 0, 1));
    assert!(c.rack_losses >= 1);
}

#[test]
fn reordering_within_the_rack_window_causes_no_retransmission() {
    let mut tcb = sending(10);
    // Establish an RTT of 50 ms.
    rx(&mut tcb, ms(50), &sack(2, &[]));
    // Segment 2 is overtaken by 3 and 4; it arrives 2 ms later (min_RTT/4 is 12 ms).
    rx(&mut tcb, ms(51), &sack(2, &[(3, 4)]));
    assert!(tx(&mut tcb, ms(51)).is_empty());
    rx(&mut tcb, ms(52), &sack(2, &[(3, 5)]));
    assert!(tx(&mut tcb, ms(52)).is_empty());
    rx(&mut tcb, ms(53), &sack(5, &[]));
    // New data may go (the window grew); nothing is sent again.
    let out = tx(&mut tcb, ms(53));
    assert!(out.iter().all(|s| s.seq >= SeqNum(at(10))));
    let c = tcb.take_counters();
    assert_eq!(c, LossCounters::default());
    // Having seen reordering, RACK waits a whole window before calling a hole lost.
    rx(&mut tcb, ms(54), &sack(5, &[(6, 7)]));
    rx(&mut tcb, ms(55), &sack(5, &[(6, 8)]));
    rx(&mut tcb, ms(56), &sack(5, &[(6, 9)]));
    assert!(seqs(&tx(&mut tcb, ms(56))).iter().all(|&s| s != at(5)));
}

#[test]
fn hostile_sack_blocks_are_ignored() {
    let mut tcb = sending(10);
    rx(&mut tcb, ms(50), &sack(1, &[]));
    let cwnd = tcb.cwnd();
    let hostile: [[Option<(u32, u32)>; 3]; 4] = [
        [Some((at(20), at(30))), None, None], // beyond SND.MAX
        [Some((at(5), at(3))), Some((0, u32::MAX)), None], // reversed, everything
        [Some((at(0).wrapping_sub(5000), at(0))), None, None], // below SND.UNA
        [Some((at(4), at(4))), Some((at(9), at(12))), None], // empty; straddles SND.MAX
    ];
    for (i, blocks) in hostile.iter().enumerate() {
        let mut a = ack(IRS + 1, at(1), 65535);
        a.window = 60000 + i as u16; // not duplicate ACKs: the window changes
        a.sack = *blocks;
        rx(&mut tcb, ms(51 + i as u64), &a);
        assert!(seqs(&tx(&mut tcb, ms(51 + i as u64))).is_empty());
    }
    assert_eq!(tcb.cwnd(), cwnd);
    assert_eq!(tcb.take_counters(), LossCounters::default());
    // The connection carries on as if they had not been sent.
    rx(&mut tcb, ms(60), &sack(10, &[]));
    assert_eq!(tcb.snd_una(), SeqNum(at(10)));
    assert_eq!(tcb.next_deadline(), None);
}

#[test]
fn a_dsack_undoes_a_spurious_fast_retransmit() {
    let mut tcb = sending(10);
    rx(&mut tcb, ms(50), &sack(1, &[]));
    let before = (tcb.cwnd(), tcb.ssthresh());
    // Segment 1 is delayed behind 2, 3 and 4: DupThresh says lost.
    rx(&mut tcb, ms(51), &sack(1, &[(2, 3)]));
    rx(&mut tcb, ms(52), &sack(1, &[(2, 4)]));
    rx(&mut tcb, ms(53), &sack(1, &[(2, 5)]));
    assert_eq!(seqs(&tx(&mut tcb, ms(53))), [at(1)]);
    assert!(tcb.cwnd() < before.0);
    // The original arrives, then the retransmission: the peer reports the duplicate.
    rx(&mut tcb, ms(54), &sack(5, &[]));
    rx(&mut tcb, ms(100), &sack(5, &[(1, 2)]));
    let c = tcb.take_counters();
    assert_eq!(c.spurious_undos, 1);
    // The reduction is undone (and the window may grow again on the same ACK).
    assert!(tcb.cwnd() >= before.0);
    assert_eq!(tcb.ssthresh(), before.1);
}

#[test]
fn eifel_undoes_a_spurious_fast_retransmit() {
    // Timestamps and SACK; our TSval is the time in ms plus 1000.
    let cfg = cfg();
    let s = with_ts(syn_full(IRS, MSS, 0, 100), 100, 0);
    let mut tcb = Tcb::accept_syn(&open(SeqNum(ISS), 1000, MSS, ms(0), &cfg), &s);
    tx(&mut tcb, ms(0));
    rx(
        &mut tcb,
        ms(0),
        &with_ts(ack(IRS + 1, ISS + 1, 65535), 101, 1000),
    );
    tcb.send(&payload(10 * M), &mut pool()).unwrap();
    assert_eq!(tx(&mut tcb, ms(0)).len(), 10);
    rx(
        &mut tcb,
        ms(50),
        &with_ts(sack_of(TS_SEG, 1, &[]), 150, 1000),
    );
    let before = (tcb.cwnd(), tcb.ssthresh());
    for (i, r) in [(51u64, 3u32), (52, 4), (53, 5)] {
        rx(
            &mut tcb,
            ms(i),
            &with_ts(sack_of(TS_SEG, 1, &[(2, r)]), 150 + i as u32, 1000),
        );
    }
    // The retransmission first; PRR may let new data follow it.
    let sent = seqs(&tx(&mut tcb, ms(53)));
    assert_eq!(sent[0], ISS + 1 + TS_SEG);
    assert!(sent[1..].iter().all(|&s| s >= ISS + 1 + 10 * TS_SEG));
    // The ACK covering segment 1 echoes the TSval of its first transmission (1000),
    // not of the retransmission (1053): the original was only delayed.
    rx(
        &mut tcb,
        ms(54),
        &with_ts(sack_of(TS_SEG, 5, &[]), 204, 1000),
    );
    assert_eq!(tcb.take_counters().spurious_undos, 1);
    assert!(tcb.cwnd() >= before.0);
    assert_eq!(tcb.ssthresh(), before.1);
}

#[test]
fn a_timeout_resends_only_what_was_not_sacked() {
    let mut tcb = sending(10);
    // Segments 0 and 5 lost; 1-4 and 6-9 SACKed but the retransmission of 0 and 5 is
    // lost too, and no more ACKs come: the RTO fires.
    rx(&mut tcb, ms(50), &sack(0, &[(1, 5)]));
    rx(&mut tcb, ms(51), &sack(0, &[(6, 10), (1, 5)]));
    let first = seqs(&tx(&mut tcb, ms(51)));
    assert!(first.contains(&at(0)));
    // Probes first (each resends the highest segment not SACKed), then the timeout:
    // one segment (the loss window), then slow start; never a SACKed one.
    let mut resent = vec![];
    let mut rtos = 0;
    for _ in 0..8 {
        let t = tcb.next_deadline().unwrap();
        resent.extend(seqs(&tick(&mut tcb, t)));
        rtos += tcb.take_counters().rtos;
        if rtos > 0 {
            break;
        }
    }
    assert_eq!(rtos, 1);
    assert!(
        resent.iter().all(|&s| s == at(0) || s == at(5)),
        "{resent:?}"
    );
    assert_eq!(
        resent.last(),
        Some(&at(0)),
        "the timeout resends from SND.UNA"
    );
}

#[test]
fn newreno_stays_selectable() {
    use crate::tcp::config::CongestionAlgorithm;
    let cfg = TcpConfig {
        congestion_control: CongestionAlgorithm::NewReno,
        ..cfg()
    };
    let mut tcb = passive_sack(&cfg);
    tcb.send(&payload(10 * M), &mut pool()).unwrap();
    tx(&mut tcb, ms(0));
    rx(&mut tcb, ms(50), &sack(1, &[(2, 5)]));
    assert_eq!(seqs(&tx(&mut tcb, ms(50))), [at(1)]);
    // NewReno halves the flight (9 segments).
    assert_eq!(tcb.ssthresh(), 9 * M / 2);
}

#[test]
fn a_duplicate_segment_is_reported_as_a_dsack() {
    let mut tcb = passive_sack(&cfg());
    rx(&mut tcb, ms(1), &data(IRS + 1, ISS + 1, 100));
    tx(&mut tcb, ms(1));
    // The same segment again (the sender resent it needlessly): RFC 2883 §4.
    rx(&mut tcb, ms(2), &data(IRS + 1, ISS + 1, 100));
    let out = tx(&mut tcb, ms(2));
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].ack, Some(SeqNum(IRS + 101)));
    assert_eq!(out[0].sack, [Some((IRS + 1, IRS + 101)), None, None]);
    // Reported once.
    rx(&mut tcb, ms(3), &data(IRS + 101, ISS + 1, 100));
    let out = tx(&mut tcb, ms(50));
    assert!(out.iter().all(|s| s.sack == [None; 3]));
}

#[test]
fn a_dsack_comes_first_and_the_out_of_order_blocks_follow() {
    let mut tcb = passive_sack(&cfg());
    rx(&mut tcb, ms(1), &data(IRS + 1, ISS + 1, 100));
    rx(&mut tcb, ms(1), &data(IRS + 201, ISS + 1, 100));
    tx(&mut tcb, ms(1));
    // A segment overlapping what was received: its first 50 bytes are duplicates.
    rx(&mut tcb, ms(2), &data(IRS + 51, ISS + 1, 100));
    let out = tx(&mut tcb, ms(2));
    assert_eq!(out[0].ack, Some(SeqNum(IRS + 151)));
    assert_eq!(
        out[0].sack,
        [
            Some((IRS + 51, IRS + 101)),
            Some((IRS + 201, IRS + 301)),
            None
        ]
    );
}

#[test]
fn a_peer_that_sacks_everything_then_goes_quiet_gets_the_head_again() {
    // RFC 2018 §8: SACKed data may be dropped by the receiver (reneging); after a
    // timeout the segment at SND.UNA is resent even if it was SACKed.
    let mut tcb = sending(10);
    rx(&mut tcb, ms(50), &sack(0, &[(0, 10)]));
    let mut resent = vec![];
    for _ in 0..6 {
        let Some(t) = tcb.next_deadline() else { break };
        resent.extend(seqs(&tick(&mut tcb, t)));
        if resent.contains(&at(0)) {
            break;
        }
    }
    assert!(resent.contains(&at(0)), "{resent:?}");
    assert!(tcb.next_deadline().is_some(), "a timer still runs");
}
