//! Retransmission: the RTO with backoff and retry limits (RFC 6298), SYN and SYN-ACK
//! retries, and fast retransmit with NewReno for peers without SACK (RFC 5681, RFC
//! 6582).

use super::*;

// ----- Retransmission timeout -----

#[test]
fn rto_backoff_and_give_up() {
    let cfg = TcpConfig {
        max_retries: 3,
        ..cfg()
    };
    let mut tcb = cookie(&cfg);
    tcb.send(&payload(100), &mut pool()).unwrap();
    let seg = exp_data(ISS + 1, IRS + 1, W, 0, 100, true);
    assert_eq!(tx(&mut tcb, ms(0)), vec![seg]);
    // RFC 6298 §2.1: initial RTO 1 s; §5.5: doubled per timeout.
    let mut t = 0;
    for (i, rto) in [1000u64, 2000, 4000].into_iter().enumerate() {
        assert_eq!(tcb.next_deadline(), Some(ms(t + rto)));
        assert!(tick(&mut tcb, ms(t + rto - 1)).is_empty());
        t += rto;
        assert_eq!(tick(&mut tcb, ms(t)), vec![seg], "retransmission {}", i + 1);
        assert_eq!(tcb.retries(), i as u32 + 1);
    }
    assert_eq!(tcb.next_deadline(), Some(ms(t + 8000)));
    assert!(tick(&mut tcb, ms(t + 8000)).is_empty());
    assert_eq!(tcb.state(), State::Closed);
    assert_eq!(events(&mut tcb), closed(CloseReason::TimedOut));
}

#[test]
fn rto_retransmits_from_snd_una_and_collapses_cwnd() {
    let mut tcb = passive(&cfg());
    let m = MSS as usize;
    tcb.send(&payload(3 * m), &mut pool()).unwrap();
    assert_eq!(tx(&mut tcb, ms(0)).len(), 3);
    // First segment acknowledged, the others lost.
    rx(&mut tcb, ms(100), &ack(IRS + 1, ISS + 1 + m as u32, 65535));
    // RFC 5681 §3.1: loss window of one segment; go back to SND.UNA.
    let out = tick(&mut tcb, ms(1100));
    assert_eq!(
        out,
        vec![exp_data(ISS + 1 + m as u32, IRS + 1, W, 0, m, false)]
    );
    assert_eq!(tcb.cwnd(), m);
    rx(
        &mut tcb,
        ms(1200),
        &ack(IRS + 1, ISS + 1 + 2 * m as u32, 65535),
    );
    assert_eq!(
        tx(&mut tcb, ms(1200)),
        vec![exp_data(ISS + 1 + 2 * m as u32, IRS + 1, W, 0, m, true)]
    );
}

#[test]
fn syn_retransmission_and_give_up() {
    let cfg = TcpConfig {
        max_syn_retries: 2,
        timestamps: false,
        ..cfg()
    };
    let mut tcb = Tcb::connect(&open(SeqNum(ISS), 0, MSS, ms(0), &cfg));
    let first = tx(&mut tcb, ms(0));
    assert_eq!(first.len(), 1);
    assert!(first[0].syn);
    let mut t = 0;
    for rto in [1000u64, 2000] {
        t += rto;
        assert_eq!(tcb.next_deadline(), Some(ms(t)));
        let again = tick(&mut tcb, ms(t));
        assert_eq!(again, first);
    }
    assert_eq!(tcb.next_deadline(), Some(ms(t + 4000)));
    assert!(tick(&mut tcb, ms(t + 4000)).is_empty());
    assert_eq!(tcb.state(), State::Closed);
    assert_eq!(events(&mut tcb), closed(CloseReason::TimedOut));
}

#[test]
fn synack_retransmission() {
    let cfg = cfg();
    let mut tcb = Tcb::accept_syn(&open(SeqNum(ISS), 0, MSS, ms(0), &cfg), &syn(IRS));
    let first = tx(&mut tcb, ms(0));
    assert_eq!(tick(&mut tcb, ms(1000)), first);
    // A retransmitted SYN from the peer gets the SYN-ACK again.
    rx(&mut tcb, ms(1500), &syn(IRS));
    assert_eq!(tx(&mut tcb, ms(1500)), first);
    assert_eq!(tcb.state(), State::SynReceived);
}

// ----- Fast retransmit and NewReno -----

#[test]
fn fast_retransmit_and_newreno_recovery_without_sack() {
    let cfg = TcpConfig {
        congestion_control: crate::tcp::config::CongestionAlgorithm::NewReno,
        ..cfg()
    };
    let mut tcb = passive(&cfg);
    let m = MSS as usize;
    let mu = MSS as u32;
    tcb.send(&payload(10 * m), &mut pool()).unwrap();
    let out = tx(&mut tcb, ms(0));
    // RFC 6928 initial window: 10 segments.
    assert_eq!(out.len(), 10);
    for (i, s) in out.iter().enumerate() {
        assert_eq!(s.seq, SeqNum(ISS + 1 + i as u32 * mu));
        assert_eq!(s.payload_len, m);
    }
    // Segment 2 lost: the peer acks segment 1, then three duplicates.
    rx(&mut tcb, ms(50), &ack(IRS + 1, ISS + 1 + mu, 65535));
    let cwnd = tcb.cwnd();
    assert_eq!(cwnd, 11 * m);
    for _ in 0..2 {
        rx(&mut tcb, ms(51), &ack(IRS + 1, ISS + 1 + mu, 65535));
        assert!(tx(&mut tcb, ms(51)).is_empty());
    }
    rx(&mut tcb, ms(52), &ack(IRS + 1, ISS + 1 + mu, 65535));
    assert_eq!(
        tx(&mut tcb, ms(52)),
        vec![exp_data(ISS + 1 + mu, IRS + 1, W, 0, m, false)]
    );
    // RFC 6582 §3.2 step 2 / RFC 5681 eq. 4: ssthresh = FlightSize/2; PRR (RFC 6937)
    // paces the recovery, so cwnd is the target from the start.
    let flight = 9 * m;
    assert_eq!(tcb.ssthresh(), flight / 2);
    assert_eq!(tcb.cwnd(), flight / 2);
    // Partial ACK (segments 2 and 3): retransmit the next hole, segment 4 (RFC 6582
    // §3.2 step 5), as PRR allows: 3 segments delivered × ssthresh / RecoverFS = 1.5,
    // less the one already sent.
    rx(&mut tcb, ms(100), &ack(IRS + 1, ISS + 1 + 3 * mu, 65535));
    assert_eq!(
        tx(&mut tcb, ms(100)),
        vec![exp_data(ISS + 1 + 3 * mu, IRS + 1, W, 0, m, false)]
    );
    // Full ACK: leave recovery with cwnd = ssthresh (RFC 6937 §3).
    rx(&mut tcb, ms(150), &ack(IRS + 1, ISS + 1 + 10 * mu, 65535));
    assert_eq!(tcb.cwnd(), flight / 2);
    assert_eq!(tcb.take_counters().fast_retransmits, 1);
    assert_eq!(tcb.next_deadline(), None);
    assert!(tx(&mut tcb, ms(150)).is_empty());
}
