//! Scripted segment-level tests of how long a connection without progress lives: a
//! zero-window peer that answers every probe (RFC 1122 §4.2.2.17 keeps a connection the
//! application holds open), orphans (connections the application closed) bounded by
//! retries and time without progress as Linux's tcp_orphan_retries, and the user
//! timeout (RFC 5482). The peer is played by hand.

use super::*;

/// A RST at `seq`, as we send it when giving up.
fn exp_rst(seq: u32) -> TxSegment {
    TxSegment {
        seq: SeqNum(seq),
        rst: true,
        ..TxSegment::default()
    }
}

/// Established with 100 bytes queued behind a window the peer has shut.
fn zero_window(cfg: &TcpConfig) -> Tcb {
    let mut tcb = cookie(cfg);
    rx(&mut tcb, ms(0), &ack(IRS + 1, ISS + 1, 0));
    tcb.send(&payload(100), &mut pool()).unwrap();
    assert!(tx(&mut tcb, ms(0)).is_empty());
    tcb
}

/// Fire the persist timer and answer the probe with a window still shut, as a
/// receiver that stops reading does. Returns what the timer sent and when.
fn probe_answered(tcb: &mut Tcb, una: u32) -> (Instant, Vec<TxSegment>) {
    let at = tcb.next_deadline().expect("a timer is armed");
    let out = tick(tcb, at);
    if !tcb.is_closed() {
        rx(tcb, at + Duration::from_millis(10), &ack(IRS + 1, una, 0));
        assert!(tx(tcb, at + Duration::from_millis(10)).is_empty());
    }
    (at, out)
}

/// Established at time 0 with 100 bytes sent.
fn hundred_bytes_sent(cfg: &TcpConfig) -> Tcb {
    let mut tcb = passive(cfg);
    tcb.send(&payload(100), &mut pool()).unwrap();
    assert_eq!(tx(&mut tcb, ms(0)).len(), 1);
    tcb
}

fn user_timeout_cfg(millis: u64) -> TcpConfig {
    TcpConfig {
        user_timeout: Some(Duration::from_millis(millis)),
        ..cfg()
    }
}

/// Probes at 1 s and 3 s (then 7 s), answered with a shut window: the first probe is
/// where the stall begins, so a 5 s bound resets the peer at 6 s.
fn gives_up_five_seconds_after_the_first_probe(tcb: &mut Tcb) {
    assert_eq!(probe_answered(tcb, ISS + 1).0, ms(1000));
    assert_eq!(probe_answered(tcb, ISS + 1).0, ms(3000));
    assert_eq!(tcb.next_deadline(), Some(ms(6000)));
    assert_eq!(tick(tcb, ms(6000)), vec![exp_rst(ISS + 1)]);
    assert_eq!(events(tcb), closed(CloseReason::TimedOut));
}

fn no_orphan_timeout() -> TcpConfig {
    TcpConfig {
        orphan_timeout: Duration::from_secs(1_000_000),
        ..cfg()
    }
}

#[test]
fn a_connection_the_application_holds_probes_a_zero_window_for_as_long_as_it_is_answered() {
    let mut tcb = zero_window(&cfg());
    for _ in 0..40 {
        let (_, out) = probe_answered(&mut tcb, ISS + 1);
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].payload_len, 1);
    }
    assert_eq!(tcb.state(), State::Established);
    assert_eq!(events(&mut tcb).closed, None);
}

#[test]
fn an_orphan_gives_up_on_an_answered_zero_window_after_orphan_retries_with_a_rst() {
    let cfg = no_orphan_timeout();
    let mut tcb = zero_window(&cfg);
    tcb.close();
    assert!(tcb.is_orphan());
    for _ in 0..cfg.orphan_retries {
        let (_, out) = probe_answered(&mut tcb, ISS + 1);
        assert_eq!(out.len(), 1);
        assert!(!out[0].rst);
    }
    let (_, out) = probe_answered(&mut tcb, ISS + 1);
    // At SND.UNA: the only sequence number in a shut window, so the peer takes it.
    assert_eq!(out, vec![exp_rst(ISS + 1)]);
    assert!(tcb.is_closed());
    assert_eq!(events(&mut tcb), closed(CloseReason::TimedOut));
    assert_eq!(tcb.next_deadline(), None);
}

#[test]
fn progress_starts_an_orphans_count_afresh() {
    let cfg = no_orphan_timeout();
    let mut tcb = zero_window(&cfg);
    tcb.close();
    for _ in 0..cfg.orphan_retries - 1 {
        probe_answered(&mut tcb, ISS + 1);
    }
    // The peer takes the probe byte (SND.UNA advances), window still shut.
    let (at, out) = probe_answered(&mut tcb, ISS + 2);
    assert_eq!(out.len(), 1);
    for _ in 0..cfg.orphan_retries - 1 {
        let (_, out) = probe_answered(&mut tcb, ISS + 2);
        assert!(!out[0].rst);
    }
    // The window opens, then shuts again with part of what went acknowledged:
    // progress too.
    let later = tcb.next_deadline().unwrap() - Duration::from_millis(1);
    assert!(later > at);
    rx(&mut tcb, later, &ack(IRS + 1, ISS + 2, 1000));
    let out = tx(&mut tcb, later);
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].payload_len, 99);
    assert!(out[0].fin);
    rx(
        &mut tcb,
        later + Duration::from_millis(10),
        &ack(IRS + 1, ISS + 12, 0),
    );
    for _ in 0..cfg.orphan_retries {
        let (_, out) = probe_answered(&mut tcb, ISS + 12);
        assert!(!out[0].rst);
    }
    assert!(!tcb.is_closed());
    let (_, out) = probe_answered(&mut tcb, ISS + 12);
    assert_eq!(out, vec![exp_rst(ISS + 12)]);
    assert_eq!(events(&mut tcb), closed(CloseReason::TimedOut));
}

#[test]
fn an_orphan_gives_up_after_the_orphan_timeout_without_progress() {
    let cfg = TcpConfig {
        orphan_retries: 100,
        orphan_timeout: Duration::from_secs(5),
        ..cfg()
    };
    let mut tcb = zero_window(&cfg);
    tcb.close();
    gives_up_five_seconds_after_the_first_probe(&mut tcb);
}

#[test]
fn an_orphan_whose_peer_is_silent_gives_up_after_orphan_retries_timeouts() {
    let cfg = no_orphan_timeout();
    let mut tcb = hundred_bytes_sent(&cfg);
    tcb.close();
    for i in 0..cfg.orphan_retries {
        let at = tcb.next_deadline().unwrap();
        let out = tick(&mut tcb, at);
        assert!(!out.is_empty() && !out[0].rst, "retransmission {i}");
    }
    let at = tcb.next_deadline().unwrap();
    // SND.MAX: the data and the FIN were sent.
    assert_eq!(tick(&mut tcb, at), vec![exp_rst(ISS + 102)]);
    assert_eq!(events(&mut tcb), closed(CloseReason::TimedOut));
}

#[test]
fn the_user_timeout_aborts_data_left_unacknowledged_by_a_silent_peer() {
    let mut tcb = hundred_bytes_sent(&user_timeout_cfg(2500));
    // Probes and retransmissions until the bound, counted from the first send.
    loop {
        let at = tcb.next_deadline().unwrap();
        let out = tick(&mut tcb, at);
        if tcb.is_closed() {
            assert_eq!(at, ms(2500));
            assert_eq!(out, vec![exp_rst(ISS + 101)]);
            break;
        }
        assert!(at < ms(2500) && !out[0].rst);
    }
    assert_eq!(events(&mut tcb), closed(CloseReason::TimedOut));
}

#[test]
fn the_user_timeout_set_by_the_application_aborts_zero_window_probing() {
    let mut tcb = zero_window(&cfg());
    tcb.set_user_timeout(Some(Duration::from_secs(5)));
    gives_up_five_seconds_after_the_first_probe(&mut tcb);
}

#[test]
fn acknowledged_data_keeps_the_user_timeout_away() {
    let mut tcb = passive(&user_timeout_cfg(1500));
    let mut una = ISS + 1;
    for i in 0..10u64 {
        let t = ms(i * 1000);
        tcb.send(&payload(100), &mut pool()).unwrap();
        assert_eq!(tx(&mut tcb, t).len(), 1);
        una += 100;
        rx(
            &mut tcb,
            t + Duration::from_millis(900),
            &ack(IRS + 1, una, 65535),
        );
    }
    assert_eq!(tcb.state(), State::Established);
    assert_eq!(tcb.next_deadline(), None);
}
