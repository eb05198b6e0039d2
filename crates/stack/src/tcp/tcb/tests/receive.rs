//! Receiving data: in-order delivery, the ACK policy (§3.8.6.3), out-of-order data and
//! SACK blocks (RFC 2018).

use super::*;

// ----- Receiving data, ACK policy, SACK -----

#[test]
fn in_order_data_fast_path_and_delayed_ack() {
    let cfg = cfg();
    let mut tcb = passive(&cfg);
    let out = rx(&mut tcb, ms(100), &data(IRS + 1, ISS + 1, 100));
    assert_eq!(
        out,
        RxOutcome {
            deliver: Some((0, 100)),
            ..RxOutcome::default()
        }
    );
    assert_eq!(tcb.readable_len(), 0);
    // RFC 9293 §3.8.6.3: one segment waits for the delayed-ACK timer (40 ms).
    assert!(tx(&mut tcb, ms(100)).is_empty());
    assert_eq!(tcb.next_deadline(), Some(ms(140)));
    assert!(tick(&mut tcb, ms(139)).is_empty());
    assert_eq!(
        tick(&mut tcb, ms(140)),
        vec![exp_ack(ISS + 1, IRS + 101, W - 100)]
    );
    assert_eq!(tcb.next_deadline(), None);
}

#[test]
fn two_full_segments_acked_at_once() {
    let mut tcb = passive(&cfg());
    let m = MSS as u32;
    rx(&mut tcb, ms(1), &data(IRS + 1, ISS + 1, MSS as usize));
    assert!(tx(&mut tcb, ms(1)).is_empty());
    rx(&mut tcb, ms(2), &data(IRS + 1 + m, ISS + 1, MSS as usize));
    assert_eq!(
        tx(&mut tcb, ms(2)),
        vec![exp_ack(ISS + 1, IRS + 1 + 2 * m, W)]
    );
    assert_eq!(tcb.next_deadline(), None);
}

#[test]
fn out_of_order_data_acked_at_once_with_sack_then_gap_fill() {
    let mut tcb = passive_sack(&cfg());
    let out = rx(&mut tcb, ms(1), &data(IRS + 101, ISS + 1, 100));
    assert_eq!(out, RxOutcome::default());
    assert_eq!(tcb.rcv_nxt(), SeqNum(IRS + 1));
    // RFC 5681 §4.2: immediate duplicate ACK; RFC 2018 §4: with the SACK block.
    assert_eq!(
        tx(&mut tcb, ms(1)),
        vec![TxSegment {
            sack: [Some((IRS + 101, IRS + 201)), None, None],
            ..exp_ack(ISS + 1, IRS + 1, W)
        }]
    );
    // A second hole-separated block: most recent first.
    rx(&mut tcb, ms(2), &data(IRS + 301, ISS + 1, 50));
    assert_eq!(
        tx(&mut tcb, ms(2)),
        vec![TxSegment {
            sack: [
                Some((IRS + 301, IRS + 351)),
                Some((IRS + 101, IRS + 201)),
                None
            ],
            ..exp_ack(ISS + 1, IRS + 1, W)
        }]
    );
    // Fill the first gap: readable, immediate ACK.
    let out = rx(&mut tcb, ms(3), &data(IRS + 1, ISS + 1, 100));
    assert_eq!(
        out,
        RxOutcome {
            readable: true,
            ..RxOutcome::default()
        }
    );
    assert_eq!(tcb.rcv_nxt(), SeqNum(IRS + 201));
    assert_eq!(tcb.readable_len(), 200);
    // Both pieces are readable, in order.
    assert_eq!(tcb.readable(), &[payload(100), payload(100)].concat()[..]);
    assert_eq!(
        tx(&mut tcb, ms(3)),
        vec![TxSegment {
            sack: [Some((IRS + 301, IRS + 351)), None, None],
            ..exp_ack(ISS + 1, IRS + 201, W - 200)
        }]
    );
    // Fill the last gap.
    rx(&mut tcb, ms(4), &data(IRS + 201, ISS + 1, 100));
    assert_eq!(tcb.rcv_nxt(), SeqNum(IRS + 351));
    assert_eq!(
        tx(&mut tcb, ms(4)),
        vec![exp_ack(ISS + 1, IRS + 351, W - 350)]
    );
}

#[test]
fn out_of_order_without_sack_has_no_blocks() {
    let mut tcb = passive(&cfg());
    rx(&mut tcb, ms(1), &data(IRS + 101, ISS + 1, 100));
    assert_eq!(tx(&mut tcb, ms(1)), vec![exp_ack(ISS + 1, IRS + 1, W)]);
}
