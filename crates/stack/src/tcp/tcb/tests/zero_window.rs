//! Zero windows both ways: the receiver's window update, the sender's persist timer
//! and zero-window probes (§3.8.6.1), and how long a connection probing a shut window
//! lives.

use super::*;

// ----- Zero window -----

#[test]
fn receiver_zero_window_probe_and_window_update() {
    let cfg = TcpConfig {
        recv_buffer: 4096,
        ..TcpConfig::default()
    };
    let mut tcb = passive(&cfg);
    let m = MSS as usize;
    let out = rx(&mut tcb, ms(1), &data(IRS + 1, ISS + 1, m));
    assert_eq!(out.deliver, Some((0, m)));
    tcb.keep_unconsumed(&payload(m), &mut pool());
    assert!(tx(&mut tcb, ms(1)).is_empty());
    let out = rx(&mut tcb, ms(2), &data(IRS + 1 + m as u32, ISS + 1, m));
    assert!(out.readable);
    assert_eq!(
        tx(&mut tcb, ms(2)),
        vec![exp_ack(
            ISS + 1,
            IRS + 1 + 2 * m as u32,
            (4096 - 2 * m) as u16
        )]
    );
    let rest = 4096 - 2 * m;
    rx(
        &mut tcb,
        ms(3),
        &data(IRS + 1 + 2 * m as u32, ISS + 1, rest),
    );
    assert_eq!(tcb.readable_len(), 4096);
    assert_eq!(tx(&mut tcb, ms(3)), vec![]);
    let edge = IRS + 1 + 4096;
    assert_eq!(tick(&mut tcb, ms(43)), vec![exp_ack(ISS + 1, edge, 0)]);

    // Zero-window probe: one byte at RCV.NXT. ACKed with window 0, not accepted.
    let out = rx(&mut tcb, ms(100), &data(edge, ISS + 1, 1));
    assert_eq!(out, RxOutcome::default());
    assert_eq!(tcb.rcv_nxt(), SeqNum(edge));
    assert_eq!(tcb.readable_len(), 4096);
    assert_eq!(tx(&mut tcb, ms(100)), vec![exp_ack(ISS + 1, edge, 0)]);

    // Receiver SWS avoidance (§3.8.6.2.2): 1000 freed bytes < min(4096/2, MSS) stay
    // unannounced, even in the reply to a probe.
    tcb.consume(1000, &mut pool());
    assert!(tx(&mut tcb, ms(101)).is_empty());
    rx(&mut tcb, ms(102), &data(edge, ISS + 1, 1));
    assert_eq!(tx(&mut tcb, ms(102)), vec![exp_ack(ISS + 1, edge, 0)]);
    assert_eq!(tcb.rcv_nxt(), SeqNum(edge));
    // 2000 freed: announce it at once.
    tcb.consume(1000, &mut pool());
    assert_eq!(tx(&mut tcb, ms(103)), vec![exp_ack(ISS + 1, edge, 2000)]);
}

#[test]
fn sender_zero_window_persist_probes_with_backoff() {
    let mut tcb = cookie(&cfg());
    // The peer closes its window.
    rx(&mut tcb, ms(0), &ack(IRS + 1, ISS + 1, 0));
    assert_eq!(tcb.snd_wnd(), 0);
    tcb.send(&payload(100), &mut pool()).unwrap();
    assert!(tx(&mut tcb, ms(0)).is_empty());
    // Persist timer armed at the RTO (1 s).
    assert_eq!(tcb.next_deadline(), Some(ms(1000)));
    assert_eq!(
        tick(&mut tcb, ms(1000)),
        vec![exp_data(ISS + 1, IRS + 1, W, 0, 1, false)]
    );
    // The probe's ACK: window still 0, byte not accepted.
    rx(&mut tcb, ms(1010), &ack(IRS + 1, ISS + 1, 0));
    assert!(tx(&mut tcb, ms(1010)).is_empty());
    // Backoff: next probe 2 s later, then 4 s.
    assert_eq!(tcb.next_deadline(), Some(ms(3000)));
    assert_eq!(
        tick(&mut tcb, ms(3000)),
        vec![exp_data(ISS + 1, IRS + 1, W, 0, 1, false)]
    );
    rx(&mut tcb, ms(3010), &ack(IRS + 1, ISS + 1, 0));
    assert_eq!(tcb.next_deadline(), Some(ms(7000)));
    assert_eq!(
        tick(&mut tcb, ms(7000)),
        vec![exp_data(ISS + 1, IRS + 1, W, 0, 1, false)]
    );
    rx(&mut tcb, ms(7010), &ack(IRS + 1, ISS + 1, 0));
    // Probe ACKs are not duplicate ACKs: nothing was fast-retransmitted.
    assert!(tx(&mut tcb, ms(7010)).is_empty());
    assert_eq!(tcb.next_deadline(), Some(ms(15000)));
    // The window opens: everything goes, starting at SND.UNA.
    rx(&mut tcb, ms(8000), &ack(IRS + 1, ISS + 1, 65535));
    assert_eq!(
        tx(&mut tcb, ms(8000)),
        vec![exp_data(ISS + 1, IRS + 1, W, 0, 100, true)]
    );
    assert_eq!(tcb.next_deadline(), Some(ms(9000)));
    rx(&mut tcb, ms(8050), &ack(IRS + 1, ISS + 101, 65535));
    assert_eq!(tcb.next_deadline(), None);
}

#[test]
fn sender_zero_window_probe_accepted() {
    let mut tcb = cookie(&cfg());
    rx(&mut tcb, ms(0), &ack(IRS + 1, ISS + 1, 0));
    tcb.send(&payload(100), &mut pool()).unwrap();
    assert!(tx(&mut tcb, ms(0)).is_empty());
    assert_eq!(tick(&mut tcb, ms(1000)).len(), 1);
    // The peer took the probe byte and opened its window.
    rx(&mut tcb, ms(1010), &ack(IRS + 1, ISS + 2, 1000));
    assert_eq!(
        tx(&mut tcb, ms(1010)),
        vec![exp_data(ISS + 2, IRS + 1, W, 0, 99, true)]
    );
}

// ----- How long probing a shut window lives -----

fn few_retries_cfg() -> TcpConfig {
    TcpConfig {
        max_retries: 3,
        ..cfg()
    }
}

/// Zero-window probes nobody answers count as retries: after `max_retries` of them the
/// connection times out (RFC 1122 §4.2.2.17 keeps it only while probes are answered).
#[test]
fn unanswered_zero_window_probes_time_out() {
    let mut tcb = cookie(&few_retries_cfg());
    rx(&mut tcb, ms(0), &ack(IRS + 1, ISS + 1, 0));
    tcb.send(&payload(100), &mut pool()).unwrap();
    assert!(tx(&mut tcb, ms(0)).is_empty());
    for i in 0..3 {
        let t = tcb.next_deadline().expect("persist timer");
        assert_eq!(
            tick(&mut tcb, t),
            vec![exp_data(ISS + 1, IRS + 1, W, 0, 1, false)],
            "probe {i}"
        );
    }
    let t = tcb.next_deadline().expect("persist timer");
    assert!(tick(&mut tcb, t).is_empty());
    assert_eq!(tcb.state(), State::Closed);
    assert_eq!(events(&mut tcb), closed(CloseReason::TimedOut));
}

/// Answered probes reset the count: a live peer may keep its window shut indefinitely.
#[test]
fn answered_zero_window_probes_keep_the_connection() {
    let mut tcb = cookie(&few_retries_cfg());
    rx(&mut tcb, ms(0), &ack(IRS + 1, ISS + 1, 0));
    tcb.send(&payload(100), &mut pool()).unwrap();
    tx(&mut tcb, ms(0));
    for i in 0..10 {
        let t = tcb.next_deadline().expect("persist timer");
        assert_eq!(tick(&mut tcb, t).len(), 1, "probe {i}");
        rx(
            &mut tcb,
            t + Duration::from_millis(10),
            &ack(IRS + 1, ISS + 1, 0),
        );
    }
    assert_eq!(tcb.state(), State::Established);
    assert!(events(&mut tcb).is_empty());
}

/// A FIN into a zero window waits for the persist timer and goes as a probe, not under
/// the retransmission timer: a peer that keeps answering with a zero window must not
/// see the connection time out, and one that answers nothing must.
#[test]
fn fin_into_zero_window_is_probed_not_retransmitted() {
    let cfg = cfg();
    let mut tcb = passive(&cfg);
    rx(&mut tcb, ms(0), &ack(IRS + 1, ISS + 1, 0));
    // A half-close: the application still holds the connection, so answered probes
    // keep it open (an orphan's are bounded: `tests/orphan.rs`).
    tcb.shutdown_write();
    assert_eq!(tcb.state(), State::FinWait1);
    assert!(tx(&mut tcb, ms(0)).is_empty(), "no FIN into a zero window");
    // Persist timer (one RTO), not retransmission: probes carry the FIN at SND.UNA.
    assert_eq!(tcb.next_deadline(), Some(ms(0) + tcb.rto()));
    for i in 0..(cfg.max_retries + 5) {
        let t = tcb.next_deadline().expect("persist timer");
        assert_eq!(
            tick(&mut tcb, t),
            vec![exp_fin(ISS + 1, IRS + 1, W)],
            "probe {i}"
        );
        rx(
            &mut tcb,
            t + Duration::from_millis(10),
            &ack(IRS + 1, ISS + 1, 0),
        );
    }
    assert_eq!(tcb.state(), State::FinWait1);
    assert!(events(&mut tcb).is_empty());
    // The window opens: the FIN goes as ordinary output and is acknowledged.
    let t = tcb.next_deadline().unwrap() - Duration::from_millis(1);
    rx(&mut tcb, t, &ack(IRS + 1, ISS + 1, 65535));
    assert_eq!(tx(&mut tcb, t), vec![exp_fin(ISS + 1, IRS + 1, W)]);
    rx(&mut tcb, t, &ack(IRS + 1, ISS + 2, 65535));
    assert_eq!(tcb.state(), State::FinWait2);
}

/// Same in FIN-WAIT-1 with nobody answering: the probes run out.
#[test]
fn fin_wait_1_probes_run_out_without_answers() {
    let mut tcb = passive(&few_retries_cfg());
    rx(&mut tcb, ms(0), &ack(IRS + 1, ISS + 1, 0));
    tcb.close();
    assert!(tx(&mut tcb, ms(0)).is_empty());
    for _ in 0..3 {
        let t = tcb.next_deadline().expect("persist timer");
        assert_eq!(tick(&mut tcb, t), vec![exp_fin(ISS + 1, IRS + 1, W)]);
    }
    let t = tcb.next_deadline().expect("persist timer");
    assert!(tick(&mut tcb, t).is_empty());
    assert_eq!(events(&mut tcb), closed(CloseReason::TimedOut));
}
