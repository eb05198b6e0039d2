//! Closing: the peer's FIN in each state, TIME-WAIT, half-close, data after the
//! application closed, and abort (§3.10.4, §3.10.5, §3.10.7.4).

use super::*;

// ----- FIN in each state -----

#[test]
fn fin_in_established_then_last_ack() {
    let mut tcb = passive(&cfg());
    rx(&mut tcb, ms(1), &fin(ack(IRS + 1, ISS + 1, 65535)));
    assert_eq!(tcb.state(), State::CloseWait);
    assert_eq!(
        events(&mut tcb),
        Events {
            peer_closed: true,
            ..Events::default()
        }
    );
    // A FIN is acknowledged at once.
    assert_eq!(tx(&mut tcb, ms(1)), vec![exp_ack(ISS + 1, IRS + 2, W - 1)]);
    // Data can still be sent in CLOSE-WAIT.
    tcb.send(&payload(10), &mut pool()).unwrap();
    assert_eq!(
        tx(&mut tcb, ms(2)),
        vec![exp_data(ISS + 1, IRS + 2, W - 1, 0, 10, true)]
    );
    tcb.close();
    assert_eq!(tcb.state(), State::LastAck);
    // The FIN follows the 10 unacknowledged bytes in the send buffer.
    assert_eq!(
        tx(&mut tcb, ms(3)),
        vec![TxSegment {
            payload_offset: 10,
            ..exp_fin(ISS + 11, IRS + 2, W - 1)
        }]
    );
    // ACK of the data only: still LAST-ACK.
    rx(&mut tcb, ms(4), &ack(IRS + 2, ISS + 11, 65535));
    assert_eq!(tcb.state(), State::LastAck);
    rx(&mut tcb, ms(5), &ack(IRS + 2, ISS + 12, 65535));
    assert_eq!(tcb.state(), State::Closed);
    assert_eq!(events(&mut tcb), closed(CloseReason::Normal));
    assert!(tx(&mut tcb, ms(5)).is_empty());
}

#[test]
fn fin_wait_1_fin_goes_closing() {
    let mut tcb = fin_wait_1(&cfg());
    rx(&mut tcb, ms(1), &fin(ack(IRS + 1, ISS + 1, 65535)));
    assert_eq!(tcb.state(), State::Closing);
}

#[test]
fn fin_wait_1_ack_then_fin_wait_2_fin() {
    let cfg = cfg();
    let mut tcb = fin_wait_1(&cfg);
    rx(&mut tcb, ms(1), &ack(IRS + 1, ISS + 2, 65535));
    assert_eq!(tcb.state(), State::FinWait2);
    assert!(tx(&mut tcb, ms(1)).is_empty());
    rx(&mut tcb, ms(2), &fin(ack(IRS + 1, ISS + 2, 65535)));
    assert_eq!(tcb.state(), State::TimeWait);
    assert!(events(&mut tcb).peer_closed);
    assert_eq!(tx(&mut tcb, ms(2)), vec![exp_ack(ISS + 2, IRS + 2, W - 1)]);
    assert_eq!(tcb.next_deadline(), Some(ms(2) + cfg.time_wait));
}

#[test]
fn fin_wait_1_fin_with_ack_of_our_fin_goes_time_wait() {
    let mut tcb = fin_wait_1(&cfg());
    rx(&mut tcb, ms(1), &fin(ack(IRS + 1, ISS + 2, 65535)));
    assert_eq!(tcb.state(), State::TimeWait);
    assert_eq!(tx(&mut tcb, ms(1)), vec![exp_ack(ISS + 2, IRS + 2, W - 1)]);
}

#[test]
fn fin_wait_2_times_out_after_close() {
    let cfg = cfg();
    let mut tcb = fin_wait_1(&cfg);
    rx(&mut tcb, ms(1), &ack(IRS + 1, ISS + 2, 65535));
    assert_eq!(tcb.state(), State::FinWait2);
    assert_eq!(tcb.next_deadline(), Some(ms(1) + cfg.fin_wait2_timeout));
    tick(&mut tcb, ms(1) + cfg.fin_wait2_timeout);
    assert_eq!(events(&mut tcb), closed(CloseReason::TimedOut));
}

#[test]
fn out_of_order_fin_waits_for_the_gap() {
    let mut tcb = passive(&cfg());
    rx(&mut tcb, ms(1), &fin(data(IRS + 101, ISS + 1, 100)));
    assert_eq!(tcb.state(), State::Established);
    assert!(events(&mut tcb).is_empty());
    assert_eq!(tx(&mut tcb, ms(1)), vec![exp_ack(ISS + 1, IRS + 1, W)]);
    let out = rx(&mut tcb, ms(2), &data(IRS + 1, ISS + 1, 100));
    assert!(out.readable);
    assert_eq!(tcb.state(), State::CloseWait);
    assert!(events(&mut tcb).peer_closed);
    assert_eq!(tcb.rcv_nxt(), SeqNum(IRS + 202));
    assert_eq!(
        tx(&mut tcb, ms(2)),
        vec![exp_ack(ISS + 1, IRS + 202, W - 201)]
    );
}

// ----- TIME-WAIT -----

#[test]
fn time_wait_lasts_and_restarts_on_retransmitted_fin() {
    let cfg = cfg();
    let mut tcb = fin_wait_1(&cfg);
    rx(&mut tcb, ms(1), &fin(ack(IRS + 1, ISS + 2, 65535)));
    assert_eq!(tcb.state(), State::TimeWait);
    assert!(events(&mut tcb).peer_closed);
    tx(&mut tcb, ms(1));
    let tw = cfg.time_wait;
    assert_eq!(tcb.next_deadline(), Some(ms(1) + tw));
    // The peer lost our ACK and resends its FIN: ACK again, restart 2·MSL (§3.10.7.4).
    let t = ms(30_000);
    rx(&mut tcb, t, &fin(ack(IRS + 1, ISS + 2, 65535)));
    assert_eq!(tcb.state(), State::TimeWait);
    assert_eq!(tx(&mut tcb, t), vec![exp_ack(ISS + 2, IRS + 2, W - 1)]);
    assert_eq!(tcb.next_deadline(), Some(t + tw));
    tick(&mut tcb, ms(1) + tw);
    assert_eq!(tcb.state(), State::TimeWait);
    assert!(tick(&mut tcb, t + tw).is_empty());
    assert_eq!(tcb.state(), State::Closed);
    assert_eq!(events(&mut tcb), closed(CloseReason::Normal));
}

// ----- Half-close and data after close -----

#[test]
fn half_close_sends_fin_after_data_and_keeps_receiving() {
    let mut tcb = passive(&cfg());
    tcb.send(&payload(100), &mut pool()).unwrap();
    tcb.shutdown_write();
    assert_eq!(tcb.state(), State::FinWait1);
    assert_eq!(
        tcb.send(b"x", &mut pool()),
        Err(crate::app::SendError::Closed)
    );
    assert_eq!(
        tx(&mut tcb, ms(0)),
        vec![TxSegment {
            fin: true,
            ..exp_data(ISS + 1, IRS + 1, W, 0, 100, true)
        }]
    );
    // Data from the peer acknowledging our data and FIN.
    let out = rx(&mut tcb, ms(10), &data(IRS + 1, ISS + 102, 50));
    assert_eq!(tcb.state(), State::FinWait2);
    assert_eq!(out.deliver, Some((0, 50)));
    let out = rx(&mut tcb, ms(11), &data(IRS + 51, ISS + 102, 50));
    assert_eq!(out.deliver, Some((0, 50)));
    assert_eq!(
        tx(&mut tcb, ms(11)),
        vec![exp_ack(ISS + 102, IRS + 101, W - 100)]
    );
    // No FIN-WAIT-2 timeout while the application still reads.
    assert_eq!(tcb.next_deadline(), None);
}

#[test]
fn data_after_close_is_acked_and_discarded_while_lingering() {
    let mut tcb = fin_wait_1(&cfg());
    let out = rx(&mut tcb, ms(1), &data(IRS + 1, ISS + 1, 100));
    assert_eq!(out, RxOutcome::default());
    assert_eq!(tcb.readable_len(), 0);
    assert_eq!(tcb.rcv_nxt(), SeqNum(IRS + 101));
    assert_eq!(
        tx(&mut tcb, ms(1)),
        vec![exp_ack(ISS + 2, IRS + 101, W - 100)]
    );
}

#[test]
fn data_after_the_close_linger_is_answered_with_rst() {
    // RFC 1122 §4.2.2.13, as Linux does: nobody will read it, so the peer is told.
    let mut tcb = fin_wait_1(&cfg());
    events(&mut tcb);
    let late = ms(0) + cfg().close_linger;
    let out = rx(&mut tcb, late, &data(IRS + 1, ISS + 1, 100));
    assert_eq!(out, RxOutcome::default());
    assert_eq!(tcb.state(), State::Closed);
    assert_eq!(events(&mut tcb), closed(CloseReason::Aborted));
    assert_eq!(
        tx(&mut tcb, late),
        vec![TxSegment {
            seq: SeqNum(ISS + 1),
            rst: true,
            ..TxSegment::default()
        }]
    );
}

#[test]
fn a_bare_fin_after_close_is_accepted() {
    let mut tcb = fin_wait_1(&cfg());
    rx(&mut tcb, ms(1), &fin(ack(IRS + 1, ISS + 2, 65535)));
    assert_eq!(tcb.state(), State::TimeWait);
    assert_eq!(tcb.rcv_nxt(), SeqNum(IRS + 2));
}

/// After close(), data is still ACKed and dropped, but through the receive buffer: an
/// out-of-order range held from before the close joins up when the gap fills, the SACK
/// blocks stay true, and the peer's FIN behind it is accepted.
#[test]
fn fin_after_out_of_order_data_is_accepted_after_close() {
    let mut tcb = passive_sack(&cfg());
    rx(&mut tcb, ms(1), &data(IRS + 101, ISS + 1, 100));
    let out = tx(&mut tcb, ms(1));
    assert_eq!(out[0].sack[0], Some((IRS + 101, IRS + 201)));
    tcb.close();
    let out = tx(&mut tcb, ms(2));
    assert_eq!(out.len(), 1);
    assert!(out[0].fin && out[0].seq == SeqNum(ISS + 1));
    // The gap, acknowledging our FIN, while the close lingers.
    rx(&mut tcb, ms(3), &data(IRS + 1, ISS + 2, 100));
    assert_eq!(tcb.state(), State::FinWait2);
    assert_eq!(tcb.rcv_nxt(), SeqNum(IRS + 201));
    assert_eq!(tcb.readable_len(), 0);
    let out = tx(&mut tcb, ms(3));
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].ack, Some(SeqNum(IRS + 201)));
    assert_eq!(out[0].sack, [None; 3], "no hole left to report");
    rx(&mut tcb, ms(4), &fin(ack(IRS + 201, ISS + 2, 65535)));
    assert_eq!(tcb.state(), State::TimeWait);
    assert_eq!(tcb.rcv_nxt(), SeqNum(IRS + 202));
}

// ----- Abort -----

#[test]
fn abort_sends_rst_at_snd_nxt() {
    let mut tcb = passive(&cfg());
    tcb.send(&payload(100), &mut pool()).unwrap();
    tx(&mut tcb, ms(0));
    tcb.abort();
    assert_eq!(tcb.state(), State::Closed);
    assert_eq!(events(&mut tcb), closed(CloseReason::Aborted));
    assert_eq!(
        tx(&mut tcb, ms(1)),
        vec![TxSegment {
            seq: SeqNum(ISS + 101),
            rst: true,
            ..TxSegment::default()
        }]
    );
    assert!(tx(&mut tcb, ms(2)).is_empty());
    assert_eq!(tcb.next_deadline(), None);
}

#[test]
fn abort_after_rto_uses_highest_sent_sequence() {
    let mut tcb = passive(&cfg());
    let m = MSS as usize;
    tcb.send(&payload(3 * m), &mut pool()).unwrap();
    tx(&mut tcb, ms(0));
    tick(&mut tcb, ms(1000));
    tcb.abort();
    let out = tx(&mut tcb, ms(1001));
    assert_eq!(out[0].seq, SeqNum(ISS + 1 + 3 * m as u32));
    assert!(out[0].rst);
}
