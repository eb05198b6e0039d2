//! Negotiated options at work: timestamps with PAWS and RTT samples (RFC 7323 §4, §5),
//! and window scaling (RFC 7323 §2).

use super::*;

// ----- Timestamps and PAWS -----

/// Passive open with timestamps (TS offset 1000), final ACK at 20 ms echoing our TSval.
fn passive_ts() -> Tcb {
    let cfg = cfg();
    let s = with_ts(syn(IRS), 100, 0);
    let mut tcb = Tcb::accept_syn(&open(SeqNum(ISS), 1000, MSS, ms(0), &cfg), &s);
    let out = tx(&mut tcb, ms(0));
    assert_eq!(out[0].timestamp, Some((1000, 100)));
    rx(
        &mut tcb,
        ms(20),
        &with_ts(ack(IRS + 1, ISS + 1, 65535), 120, 1000),
    );
    assert_eq!(tcb.state(), State::Established);
    assert!(tcb.timestamps_enabled());
    events(&mut tcb);
    tcb
}

#[test]
fn paws_drops_old_timestamps() {
    let mut tcb = passive_ts();
    assert_eq!(tcb.timestamp_state(), Some((120, 1000)));
    // RFC 7323 §5.3 R1: TSval < TS.Recent: not acceptable, ACK and drop.
    let old = with_ts(data(IRS + 1, ISS + 1, 100), 110, 1000);
    let out = rx(&mut tcb, ms(30), &old);
    assert_eq!(out, RxOutcome::default());
    assert_eq!(tcb.rcv_nxt(), SeqNum(IRS + 1));
    assert_eq!(
        tx(&mut tcb, ms(30)),
        vec![TxSegment {
            timestamp: Some((1030, 120)),
            ..exp_ack(ISS + 1, IRS + 1, W)
        }]
    );
    // Newer: accepted, TS.Recent updated (§4.3) and echoed.
    let new = with_ts(data(IRS + 1, ISS + 1, 100), 130, 1000);
    let out = rx(&mut tcb, ms(40), &new);
    assert_eq!(out.deliver, Some((0, 100)));
    assert_eq!(tcb.timestamp_state(), Some((130, 1000)));
    assert_eq!(tx(&mut tcb, ms(40)), vec![]);
    assert_eq!(
        tick(&mut tcb, ms(80)),
        vec![TxSegment {
            timestamp: Some((1080, 130)),
            ..exp_ack(ISS + 1, IRS + 101, W - 100)
        }]
    );
    // An RST is not subject to PAWS (RFC 7323 §5.3, R1 note).
    rx(&mut tcb, ms(90), &with_ts(rst(IRS + 101), 1, 0));
    assert_eq!(events(&mut tcb), closed(CloseReason::Reset));
}

#[test]
fn rtt_sample_from_timestamps_survives_retransmission() {
    let mut tcb = passive_ts();
    // Handshake sample: 20 ms; RTO = max(min_rto 200 ms, 20 + 4·10).
    assert_eq!(tcb.srtt(), Some(Duration::from_millis(20)));
    assert_eq!(tcb.rto(), Duration::from_millis(200));
    tcb.send(&payload(100), &mut pool()).unwrap();
    let first = tx(&mut tcb, ms(100));
    assert_eq!(first[0].timestamp, Some((1100, 120)));
    let again = tick(&mut tcb, ms(300));
    assert_eq!(again.len(), 1);
    assert_eq!(again[0].timestamp, Some((1300, 120)));
    // The ACK echoes the retransmission's TSval: a valid 40 ms sample (RFC 7323 §4.1),
    // where Karn's rule alone would give none.
    rx(
        &mut tcb,
        ms(340),
        &with_ts(ack(IRS + 1, ISS + 101, 65535), 200, 1300),
    );
    // SRTT = 7/8·20 + 1/8·40.
    assert_eq!(tcb.srtt(), Some(Duration::from_micros(22_500)));
}

// ----- Window scaling -----

#[test]
fn window_scaling_applies_both_ways() {
    let cfg = TcpConfig {
        timestamps: false,
        ..TcpConfig::default()
    };
    let mut s = syn(IRS);
    s.wscale = Some(2);
    let mut tcb = Tcb::accept_syn(&open(SeqNum(ISS), 0, MSS, ms(0), &cfg), &s);
    let out = tx(&mut tcb, ms(0));
    assert_eq!(out[0].wscale, Some(3));
    assert_eq!(out[0].window, 65535);
    rx(&mut tcb, ms(1), &ack(IRS + 1, ISS + 1, 1000));
    assert_eq!(tcb.window_scales(), (2, 3));
    // RFC 7323 §2.3: SND.WND = SEG.WND << Snd.Wind.Shift.
    assert_eq!(tcb.snd_wnd(), 4000);
    // Our window field = RCV.WND >> Rcv.Wind.Shift.
    rx(&mut tcb, ms(2), &data(IRS + 1, ISS + 1, 1000));
    tcb.keep_unconsumed(&payload(1000), &mut pool());
    rx(&mut tcb, ms(3), &data(IRS + 1001, ISS + 1, 1000));
    assert_eq!(
        tx(&mut tcb, ms(3)),
        vec![exp_ack(ISS + 1, IRS + 2001, ((262144 - 2000) >> 3) as u16)]
    );
    // A window update from the peer is scaled too.
    rx(&mut tcb, ms(4), &ack(IRS + 2001, ISS + 1, 3));
    assert_eq!(tcb.snd_wnd(), 12);
}
