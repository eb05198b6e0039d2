use super::*;
use crate::tcp::seq::SeqNum;

const MSS: usize = 1460;
const T: Instant = Instant::ZERO;

fn ack(delivered: usize) -> AckSample {
    AckSample {
        now: T,
        delivered,
        rtt_us: None,
        srtt_us: None,
        una: SeqNum(0),
        snd_max: SeqNum(0),
        app_limited: false,
    }
}

#[test]
fn starts_at_the_initial_window_in_slow_start() {
    let c = NewReno::new(MSS);
    assert_eq!(c.cwnd(), 14_600);
    assert_eq!(c.ssthresh(), INITIAL_SSTHRESH);
}

#[test]
fn slow_start_grows_by_at_most_two_smss_per_ack() {
    let mut c = NewReno::new(MSS);
    c.on_ack(&ack(MSS));
    assert_eq!(c.cwnd(), 14_600 + MSS);
    c.on_ack(&ack(500));
    assert_eq!(c.cwnd(), 14_600 + MSS + 500);
    // A delayed ACK for two segments adds both.
    c.on_ack(&ack(2 * MSS));
    assert_eq!(c.cwnd(), 14_600 + 3 * MSS + 500);
    // A stretch ACK of 4 segments adds only two (RFC 3465 L = 2*SMSS).
    c.on_ack(&ack(4 * MSS));
    assert_eq!(c.cwnd(), 14_600 + 5 * MSS + 500);
    c.on_ack(&ack(0));
    assert_eq!(c.cwnd(), 14_600 + 5 * MSS + 500);
}

#[test]
fn an_application_limited_sender_does_not_grow_its_window() {
    let mut c = NewReno::new(MSS);
    let mut a = ack(MSS);
    a.app_limited = true;
    c.on_ack(&a);
    assert_eq!(c.cwnd(), 14_600);
}

#[test]
fn congestion_avoidance_adds_one_smss_per_window_of_acked_bytes() {
    let mut c = NewReno::new(MSS);
    // Move to congestion avoidance with cwnd = 10 segments.
    c.on_congestion(20 * MSS, T);
    c.on_recovery_end(T);
    assert_eq!(c.ssthresh(), 10 * MSS);
    assert_eq!(c.cwnd(), 10 * MSS);
    // One full window of ACKs, segment by segment: +1 SMSS exactly at the end.
    for i in 0..10 {
        assert_eq!(c.cwnd(), 10 * MSS, "ack {i}");
        c.on_ack(&ack(MSS));
    }
    assert_eq!(c.cwnd(), 11 * MSS);
    // The next window is 11 segments long.
    for _ in 0..10 {
        c.on_ack(&ack(MSS));
    }
    assert_eq!(c.cwnd(), 11 * MSS);
    c.on_ack(&ack(MSS));
    assert_eq!(c.cwnd(), 12 * MSS);
}

#[test]
fn congestion_halves_the_flight_and_recovery_ends_at_ssthresh() {
    let mut c = NewReno::new(MSS);
    c.on_congestion(20 * MSS, T);
    assert_eq!(c.ssthresh(), 10 * MSS);
    assert_eq!(c.cwnd(), 10 * MSS);
    c.on_recovery_end(T);
    assert_eq!(c.cwnd(), 10 * MSS);
    // A small flight halves to at least two segments.
    c.on_congestion(MSS, T);
    assert_eq!(c.ssthresh(), 2 * MSS);
}

#[test]
fn undo_restores_the_window_before_the_reduction() {
    let mut c = NewReno::new(MSS);
    for _ in 0..10 {
        c.on_ack(&ack(MSS));
    }
    assert_eq!(c.cwnd(), 20 * MSS);
    c.on_congestion(20 * MSS, T);
    assert_eq!(c.cwnd(), 10 * MSS);
    c.undo(T);
    assert_eq!(c.cwnd(), 20 * MSS);
    assert_eq!(c.ssthresh(), INITIAL_SSTHRESH);
    // Nothing to undo twice.
    c.on_rto(20 * MSS, true, T);
    c.undo(T);
    c.undo(T);
    assert_eq!(c.cwnd(), 20 * MSS);
}

#[test]
fn rto_collapses_to_loss_window_then_slow_starts() {
    let mut c = NewReno::new(MSS);
    for _ in 0..30 {
        c.on_ack(&ack(MSS));
    }
    c.on_rto(30 * MSS, true, T);
    assert_eq!(c.cwnd(), MSS);
    assert_eq!(c.ssthresh(), 15 * MSS);
    c.on_ack(&ack(MSS));
    assert_eq!(c.cwnd(), 2 * MSS);
    // A backed-off timeout does not halve again (RFC 5681 §3.1 on eq. 4).
    c.on_rto(2 * MSS, false, T);
    assert_eq!(c.cwnd(), MSS);
    assert_eq!(c.ssthresh(), 15 * MSS);
    c.on_rto(0, true, T);
    assert_eq!(c.ssthresh(), 2 * MSS);
}

#[test]
fn idle_restart_caps_cwnd_at_initial_window() {
    let mut c = NewReno::new(MSS);
    for _ in 0..20 {
        c.on_ack(&ack(MSS));
    }
    assert_eq!(c.cwnd(), 30 * MSS);
    c.on_idle_restart(T);
    assert_eq!(c.cwnd(), 14_600);
    c.on_rto(4 * MSS, true, T);
    c.on_idle_restart(T);
    assert_eq!(c.cwnd(), MSS, "a smaller cwnd is kept");
}

#[test]
fn set_mss_before_data_uses_the_new_initial_window() {
    let mut c = NewReno::new(536);
    assert_eq!(c.cwnd(), 5_360);
    c.set_mss(1460);
    assert_eq!(c.cwnd(), 14_600);
    c.set_mss(8960);
    assert_eq!(c.cwnd(), 17_920);
    c.on_ack(&ack(8960));
    assert_eq!(c.cwnd(), 17_920 + 8960);
    // After growth the window keeps its size in segments.
    c.set_mss(1000);
    assert_eq!(c.cwnd(), 3 * 1000);
    c.set_mss(0); // nonsense: ignored
    assert_eq!(c.cwnd(), 3000);
    assert_eq!(c.smss, 1000);
}

#[test]
fn growth_saturates_instead_of_overflowing() {
    let mut c = NewReno::new(usize::MAX / 4);
    for _ in 0..10 {
        c.on_ack(&ack(usize::MAX));
        c.on_congestion(usize::MAX, T);
        c.undo(T);
        c.on_recovery_end(T);
        c.on_rto(usize::MAX, true, T);
    }
    assert!(c.cwnd() <= MAX_CWND);
}
