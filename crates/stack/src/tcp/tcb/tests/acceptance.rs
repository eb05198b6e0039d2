//! Which segments a synchronized connection takes (§3.10.7.4): RST handling and SYNs
//! under RFC 5961, the ACK range check, and trimming to the window.

use super::*;

// ----- RST handling (RFC 5961 §3.2) -----

#[test]
fn rst_exact_seq_resets() {
    let mut tcb = passive(&cfg());
    rx(&mut tcb, ms(1), &rst(IRS + 1));
    assert_eq!(tcb.state(), State::Closed);
    assert_eq!(events(&mut tcb), closed(CloseReason::Reset));
    assert!(tx(&mut tcb, ms(1)).is_empty());
    assert_eq!(tcb.next_deadline(), None);
}

#[test]
fn rst_after_unacknowledged_data_leaves_no_timer() {
    // Data owed a delayed ACK, then the peer's RST before the poll: the poll after it
    // arms nothing (the delayed-ACK timer is armed by `poll_transmit`).
    let mut tcb = passive(&cfg());
    rx(&mut tcb, ms(1), &data(IRS + 1, ISS + 1, 100));
    rx(&mut tcb, ms(1), &rst(IRS + 101));
    assert_eq!(tcb.state(), State::Closed);
    assert!(tx(&mut tcb, ms(1)).is_empty());
    assert_eq!(tcb.next_deadline(), None);
}

#[test]
fn abort_after_unacknowledged_data_leaves_no_timer() {
    let mut tcb = passive(&cfg());
    rx(&mut tcb, ms(1), &data(IRS + 1, ISS + 1, 100));
    tcb.abort();
    tx(&mut tcb, ms(1));
    assert_eq!(tcb.next_deadline(), None);
    assert!(tick(&mut tcb, ms(100)).is_empty());
}

#[test]
fn rst_in_window_not_exact_is_challenged() {
    let mut tcb = passive(&cfg());
    let out = rx(&mut tcb, ms(1), &rst(IRS + 100));
    assert!(out.challenge_ack);
    assert_eq!(tcb.state(), State::Established);
    assert!(events(&mut tcb).is_empty());
    // The engine's rate limiter decides; nothing is sent until it allows.
    assert!(tx(&mut tcb, ms(1)).is_empty());
    tcb.send_challenge_ack();
    assert_eq!(tx(&mut tcb, ms(1)), vec![exp_ack(ISS + 1, IRS + 1, W)]);
}

/// A bare ACK exactly at the right edge of our window carries ACK information we must
/// not discard (as Linux and BSD accept it): a peer that sent up to our edge, and whose
/// tail we did not keep, sends its ACKs from there.
#[test]
fn a_bare_ack_at_the_right_edge_is_taken() {
    let mut tcb = passive(&cfg());
    assert_eq!(tcb.send(&[7; 100], &mut pool()), Ok(100));
    assert_eq!(tx(&mut tcb, ms(1)).len(), 1);
    assert_eq!(tcb.flight_size(), 100);
    let edge = IRS + 1 + RBUF as u32;
    let out = rx(&mut tcb, ms(2), &ack(edge, ISS + 1 + 100, 65535));
    assert!(!out.invalid_ack_suppressed);
    assert_eq!(tcb.flight_size(), 0, "the ACK was taken");
    // One past the edge is still out of window.
    assert_eq!(tcb.send(&[8; 10], &mut pool()), Ok(10));
    tx(&mut tcb, ms(3));
    rx(&mut tcb, ms(4), &ack(edge + 1, ISS + 1 + 110, 65535));
    assert_eq!(tcb.flight_size(), 10);
}

#[test]
fn rst_out_of_window_ignored() {
    let mut tcb = passive(&cfg());
    for seq in [IRS, IRS + 1 + RBUF as u32, IRS + 1 + RBUF as u32 + 1000] {
        let out = rx(&mut tcb, ms(1), &rst(seq));
        assert_eq!(out, RxOutcome::default());
        assert_eq!(tcb.state(), State::Established);
        assert!(tx(&mut tcb, ms(1)).is_empty());
    }
}

#[test]
fn rst_in_syn_sent() {
    let cfg = cfg();
    let mut tcb = Tcb::connect(&open(SeqNum(ISS), 0, MSS, ms(0), &cfg));
    tx(&mut tcb, ms(0));
    // Without ACK: ignored (§3.10.7.3).
    rx(&mut tcb, ms(1), &rst(0));
    assert_eq!(tcb.state(), State::SynSent);
    assert!(tx(&mut tcb, ms(1)).is_empty());
    // With an unacceptable ACK: ignored, and never answered with a RST.
    let mut r = rst(0);
    r.flags.ack = true;
    r.ack = SeqNum(ISS + 7);
    rx(&mut tcb, ms(1), &r);
    assert_eq!(tcb.state(), State::SynSent);
    assert!(tx(&mut tcb, ms(1)).is_empty());
    // With an acceptable ACK: connection refused.
    r.ack = SeqNum(ISS + 1);
    rx(&mut tcb, ms(2), &r);
    assert_eq!(tcb.state(), State::Closed);
    assert_eq!(events(&mut tcb), closed(CloseReason::Refused));
    assert!(tx(&mut tcb, ms(2)).is_empty());
}

#[test]
fn rst_in_syn_received_after_active_open_is_refused() {
    let cfg = cfg();
    let mut tcb = Tcb::connect(&open(SeqNum(ISS), 0, MSS, ms(0), &cfg));
    tx(&mut tcb, ms(0));
    rx(&mut tcb, ms(1), &syn(IRS));
    tx(&mut tcb, ms(1));
    // §3.10.7.4 SYN-RECEIVED, second check: an active open was refused.
    rx(&mut tcb, ms(2), &rst(IRS + 1));
    assert_eq!(events(&mut tcb), closed(CloseReason::Refused));

    let mut tcb = Tcb::accept_syn(&open(SeqNum(ISS), 0, MSS, ms(0), &cfg), &syn(IRS));
    tx(&mut tcb, ms(0));
    rx(&mut tcb, ms(2), &rst(IRS + 1));
    assert_eq!(tcb.state(), State::Closed);
    assert_eq!(events(&mut tcb), closed(CloseReason::Reset));
}

// ----- SYN in a synchronized state (RFC 5961 §4) -----

#[test]
fn syn_in_established_is_challenged() {
    let mut tcb = passive(&cfg());
    // In window, and far outside it: "irrespective of the sequence number" (§4.2). Each
    // one more than the per-connection interval (500 ms) after the last.
    for (i, seq) in [IRS + 1, IRS + 500, IRS + 2_000_000_000]
        .into_iter()
        .enumerate()
    {
        let out = rx(&mut tcb, ms(1 + 600 * i as u64), &syn(seq));
        assert!(out.challenge_ack);
        assert_eq!(tcb.state(), State::Established);
        assert_eq!(tcb.rcv_nxt(), SeqNum(IRS + 1));
        assert!(events(&mut tcb).is_empty());
        assert!(tx(&mut tcb, ms(1 + 600 * i as u64)).is_empty());
    }
}

#[test]
fn invalid_segments_are_answered_once_per_interval_unless_they_carry_data() {
    let mut tcb = passive(&cfg());
    // A SYN, an inexact RST and a pure ACK beyond the window within 500 ms: only the
    // first is answered (challenged); the others are held back and say so.
    let out = rx(&mut tcb, ms(10), &syn(IRS + 1));
    assert!(out.challenge_ack && !out.invalid_ack_suppressed);
    let out = rx(&mut tcb, ms(20), &rst(IRS + 5));
    assert!(!out.challenge_ack && out.invalid_ack_suppressed);
    let out = rx(&mut tcb, ms(30), &ack(IRS + 1_000_000, ISS + 1, 1000));
    assert!(out.invalid_ack_suppressed);
    assert!(
        tx(&mut tcb, ms(30)).is_empty(),
        "no ACK for the out-of-window ACK"
    );
    // Duplicate data is always answered, whatever the limit says: the sender needs the
    // ACK (and its D-SACK), and data cannot ping-pong between two stacks.
    rx(&mut tcb, ms(40), &data(IRS + 1, ISS + 1, 10));
    tx(&mut tcb, ms(40));
    let out = rx(&mut tcb, ms(50), &data(IRS + 1, ISS + 1, 10));
    assert!(!out.invalid_ack_suppressed);
    let sent = tx(&mut tcb, ms(50));
    assert_eq!(sent.len(), 1, "{sent:?}");
    assert_eq!(sent[0].ack, Some(SeqNum(IRS + 11)));
    // Past the interval, a pure out-of-window ACK is answered again.
    let out = rx(&mut tcb, ms(600), &ack(IRS + 1_000_000, ISS + 1, 1000));
    assert!(!out.invalid_ack_suppressed);
    assert_eq!(tx(&mut tcb, ms(600)).len(), 1);
}

// ----- The sequence number of our ACKs -----

/// Ten bytes from the peer at `seq` with window field `window` at `now`: the sequence
/// and acknowledgment numbers of the bare ACK that answers them (at once, or when the
/// delayed ACK is due).
fn bare_ack_for_data(
    tcb: &mut Tcb,
    now: Instant,
    seq: u32,
    ack_no: u32,
    window: u16,
) -> (SeqNum, SeqNum) {
    let mut d = data(seq, ack_no, 10);
    d.window = window;
    rx(tcb, now, &d);
    let mut acks = tx(tcb, now);
    if acks.is_empty() {
        let due = tcb.next_deadline().unwrap();
        acks = tick(tcb, due);
    }
    assert_eq!(acks.len(), 1, "{acks:?}");
    assert_eq!(acks[0].payload_len, 0);
    (acks[0].seq, acks[0].ack.unwrap())
}

#[test]
fn bare_ack_keeps_snd_max_when_the_peer_took_data_past_its_new_edge() {
    // The peer scales its window by 2^3: its field is the window rounded down to a
    // multiple of 8 bytes. 620 bytes went out under a wide window; the peer took them
    // all and its window shrank to somewhere in 620..=623 bytes, which it announces as
    // 77 << 3 = 616. Our ACK is numbered SND.MAX, 4 bytes past that edge but inside
    // what the peer offered before: numbered at the edge it would lie below the
    // peer's RCV.NXT and be dropped unread.
    let c = cfg();
    let mut s = syn(IRS);
    s.wscale = Some(3);
    let mut tcb = Tcb::accept_syn(&open(SeqNum(ISS), 0, MSS, ms(0), &c), &s);
    tx(&mut tcb, ms(0));
    // A round trip of 200 ms: the delayed ACK is due before any retransmission.
    rx(&mut tcb, ms(200), &ack(IRS + 1, ISS + 1, 1000));
    assert_eq!(tcb.window_scales(), (3, 0));
    assert_eq!(tcb.send(&payload(620), &mut pool()), Ok(620));
    assert_eq!(tx(&mut tcb, ms(200)).len(), 1);
    let answer = bare_ack_for_data(&mut tcb, ms(201), IRS + 1, ISS + 1, 77);
    assert_eq!(tcb.snd_wnd(), 616);
    assert_eq!(answer, (SeqNum(ISS + 621), SeqNum(IRS + 11)));
}

#[test]
fn bare_ack_stays_at_the_offered_edge_when_our_fin_went_past_it() {
    // The peer offered 100 bytes. Our 100 bytes go out with the FIN after them, one
    // past the edge; the peer takes the data, not the FIN, and shuts its window. Our
    // ACKs are numbered at the edge (its RCV.NXT), which it takes, not at SND.MAX,
    // which it would drop: it would then never learn that its own data arrived.
    // The peer scales by 2: the FIN one byte past its edge lies within its window's
    // rounding, yet it did not take it.
    let c = cfg();
    let mut s = syn(IRS);
    s.wscale = Some(1);
    let mut tcb = Tcb::accept_syn(&open(SeqNum(ISS), 0, MSS, ms(0), &c), &s);
    tx(&mut tcb, ms(0));
    rx(&mut tcb, ms(200), &ack(IRS + 1, ISS + 1, 50));
    assert_eq!(tcb.snd_wnd(), 100);
    assert_eq!(tcb.send(&payload(100), &mut pool()), Ok(100));
    tcb.close();
    let sent = tx(&mut tcb, ms(200));
    assert!(sent.len() == 1 && sent[0].fin, "{sent:?}");
    rx(&mut tcb, ms(300), &ack(IRS + 1, ISS + 101, 0));
    let answer = bare_ack_for_data(&mut tcb, ms(310), IRS + 1, ISS + 101, 0);
    assert_eq!(answer, (SeqNum(ISS + 101), SeqNum(IRS + 11)));
}

// ----- ACK range checks -----

#[test]
fn ack_of_unsent_data_is_answered_and_dropped() {
    let mut tcb = passive(&cfg());
    assert_eq!(tcb.send(&payload(100), &mut pool()), Ok(100));
    assert_eq!(
        tx(&mut tcb, ms(0)),
        vec![exp_data(ISS + 1, IRS + 1, W, 0, 100, true)]
    );
    // §3.10.7.4 fifth check: SEG.ACK > SND.NXT: send an ACK, drop the segment. RFC 5961
    // §5.2 makes that ACK a challenge ACK, under the engine's budget (as Linux does).
    let out = rx(&mut tcb, ms(1), &data(IRS + 1, ISS + 201, 10));
    assert_eq!(
        out,
        RxOutcome {
            challenge_ack: true,
            ..RxOutcome::default()
        }
    );
    assert_eq!(tcb.rcv_nxt(), SeqNum(IRS + 1));
    assert_eq!(tcb.snd_una(), SeqNum(ISS + 1));
    assert!(
        tx(&mut tcb, ms(1)).is_empty(),
        "not before the engine allows it"
    );
    tcb.send_challenge_ack();
    assert_eq!(tx(&mut tcb, ms(1)), vec![exp_ack(ISS + 101, IRS + 1, W)]);
}

#[test]
fn ack_too_old_is_challenged() {
    let mut tcb = passive(&cfg());
    // RFC 5961 §5.2: SEG.ACK < SND.UNA - MAX.SND.WND (65535 here) is challenged.
    let out = rx(
        &mut tcb,
        ms(1),
        &data(IRS + 1, (ISS + 1).wrapping_sub(70000), 10),
    );
    assert!(out.challenge_ack);
    assert_eq!(out.deliver, None);
    assert_eq!(tcb.rcv_nxt(), SeqNum(IRS + 1));
    assert!(tx(&mut tcb, ms(1)).is_empty());
    // An old ACK inside MAX.SND.WND is acceptable: its data is taken.
    let out = rx(&mut tcb, ms(1), &data(IRS + 1, ISS + 1 - 100, 10));
    assert!(!out.challenge_ack);
    assert_eq!(out.deliver, Some((0, 10)));
    assert_eq!(tcb.rcv_nxt(), SeqNum(IRS + 11));
    // ...but it must not update the send window (§3.10.7.4: only SND.UNA =< SEG.ACK).
    assert_eq!(tcb.snd_wnd(), 65535);
}

#[test]
fn old_ack_does_not_update_window() {
    let mut tcb = passive(&cfg());
    tcb.send(&payload(100), &mut pool()).unwrap();
    tx(&mut tcb, ms(0));
    rx(&mut tcb, ms(1), &data(IRS + 1, ISS + 101, 10));
    assert_eq!(tcb.snd_una(), SeqNum(ISS + 101));
    // A newer sequence number but an ACK below SND.UNA: window unchanged.
    let mut s = data(IRS + 11, ISS + 51, 10);
    s.window = 10;
    rx(&mut tcb, ms(2), &s);
    assert_eq!(tcb.snd_wnd(), 65535);
}

// ----- Window trimming -----

#[test]
fn data_beyond_window_is_trimmed() {
    let cfg = TcpConfig {
        recv_buffer: 1000,
        ..TcpConfig::default()
    };
    let mut tcb = passive(&cfg);
    // 1400 bytes at RCV.NXT with a 1000-byte window: the first 1000 are taken.
    let out = rx(&mut tcb, ms(1), &data(IRS + 1, ISS + 1, 1400));
    assert_eq!(out.deliver, Some((0, 1000)));
    assert_eq!(tcb.rcv_nxt(), SeqNum(IRS + 1001));
    // The application keeps all of it: the window closes.
    tcb.keep_unconsumed(&payload(1000), &mut pool());
    // One segment: the ACK is delayed.
    assert!(tx(&mut tcb, ms(1)).is_empty());
    assert_eq!(
        tick(&mut tcb, ms(41)),
        vec![exp_ack(ISS + 1, IRS + 1001, 0)]
    );
}

#[test]
fn segment_entirely_outside_window_gets_duplicate_ack() {
    let cfg = TcpConfig {
        recv_buffer: 1000,
        ..TcpConfig::default()
    };
    let mut tcb = passive(&cfg);
    // Beyond the right edge.
    let out = rx(&mut tcb, ms(1), &data(IRS + 1 + 1000, ISS + 1, 100));
    assert_eq!(out, RxOutcome::default());
    assert_eq!(tx(&mut tcb, ms(1)), vec![exp_ack(ISS + 1, IRS + 1, 1000)]);
    // Entirely old (a retransmission of something already received).
    let out = rx(&mut tcb, ms(2), &data(IRS + 1, ISS + 1, 100));
    assert_eq!(out.deliver, Some((0, 100)));
    tick(&mut tcb, ms(100));
    let out = rx(&mut tcb, ms(101), &data(IRS + 1, ISS + 1, 100));
    assert_eq!(out, RxOutcome::default());
    assert_eq!(tcb.rcv_nxt(), SeqNum(IRS + 101));
    assert_eq!(
        tx(&mut tcb, ms(101)),
        vec![exp_ack(ISS + 1, IRS + 101, 900)]
    );
}

#[test]
fn partially_old_segment_delivers_only_new_bytes() {
    let mut tcb = passive(&cfg());
    rx(&mut tcb, ms(1), &data(IRS + 1, ISS + 1, 100));
    let out = rx(&mut tcb, ms(2), &data(IRS + 51, ISS + 1, 100));
    assert_eq!(out.deliver, Some((50, 100)));
    assert_eq!(tcb.rcv_nxt(), SeqNum(IRS + 151));
}
