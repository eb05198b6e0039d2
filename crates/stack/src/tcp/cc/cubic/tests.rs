use super::*;
use crate::tcp::cc::us;
use crate::tcp::seq::SeqNum;

const MSS: usize = 1000;
const RTT: Duration = Duration::from_millis(100);

fn at(ms: u64) -> Instant {
    Instant::from_millis(ms)
}

fn ack(now: Instant, delivered: usize) -> AckSample {
    AckSample {
        now,
        delivered,
        rtt_us: us(Some(RTT)),
        srtt_us: us(Some(RTT)),
        una: SeqNum(0),
        snd_max: SeqNum(0),
        app_limited: false,
    }
}

/// RFC 9438 eq. 1 and 2, in segments and seconds.
fn closed_form(w_max: f64, cwnd_epoch: f64, t: f64) -> f64 {
    let k = ((w_max - cwnd_epoch) / C).cbrt();
    C * (t - k).powi(3) + w_max
}

/// A controller that has left slow start with a loss at `w_max_segments` and ended
/// that recovery at time 0.
fn after_loss_at(w_max_segments: usize) -> Cubic {
    let mut c = Cubic::new(MSS);
    c.cwnd = window(w_max_segments * MSS);
    c.on_congestion(c.cwnd(), at(0));
    c.on_recovery_end(at(0));
    c
}

#[test]
fn starts_at_the_initial_window_in_slow_start() {
    let c = Cubic::new(1460);
    assert_eq!(c.cwnd(), 14_600);
    assert_eq!(c.ssthresh(), INITIAL_SSTHRESH);
}

#[test]
fn the_window_follows_the_cubic_curve_after_a_reduction() {
    let mut c = after_loss_at(100);
    assert_eq!(c.ssthresh(), 70 * MSS);
    assert_eq!(c.cwnd(), 70 * MSS);
    assert_eq!(c.w_max as usize, 100 * MSS);
    // One ACK for a whole window at t: the whole gap to the target closes, so cwnd
    // lands on W_cubic(t + RTT) as long as that is within 1.5·cwnd.
    c.on_ack(&ack(at(0), c.cwnd()));
    let k = c.epoch().unwrap().k;
    assert!(
        (k - 75f64.cbrt()).abs() < 1e-9,
        "K = cbrt((100 - 70)/0.4) = {k}"
    );
    for ms in [500, 1000, 2000, 3000, 4000, 4217, 5000, 6000, 7000, 8000] {
        c.on_ack(&ack(at(ms), c.cwnd()));
        let t = ms as f64 / 1000.0 + RTT.as_secs_f64();
        let want = closed_form(100.0, 70.0, t) * MSS as f64;
        let got = c.cwnd() as f64;
        assert!(
            (got - want).abs() <= 2.0,
            "t = {t}: cwnd {got}, W_cubic {want}"
        );
    }
    // Concave below W_max, flat at t = K, convex beyond.
    assert!(c.cwnd() > 100 * MSS);
}

#[test]
fn per_segment_acks_add_up_to_the_same_curve() {
    // One-segment ACKs spread over each RTT close (target − cwnd)/cwnd of the gap
    // each: the window keeps within an eighth of a segment of W_cubic(t).
    let mut c = after_loss_at(100);
    let mut now = 0;
    for _ in 0..20 {
        let cwnd = c.cwnd();
        let segments = cwnd / MSS;
        for i in 0..segments as u64 {
            c.on_ack(&ack(at(now + i * 100 / segments as u64), MSS));
        }
        now += 100;
        let want = closed_form(100.0, 70.0, now as f64 / 1000.0) * MSS as f64;
        assert!(
            (c.cwnd() as f64 - want).abs() <= MSS as f64 / 8.0,
            "t = {now} ms: cwnd {} W_cubic {want}",
            c.cwnd()
        );
    }
}

#[test]
fn growth_is_concave_below_w_max_and_convex_above() {
    let mut c = after_loss_at(100);
    let mut cwnds = Vec::new();
    for ms in (0..=8000).step_by(500) {
        c.on_ack(&ack(at(ms), c.cwnd()));
        cwnds.push(c.cwnd());
    }
    let steps: Vec<i64> = cwnds
        .windows(2)
        .map(|w| w[1] as i64 - w[0] as i64)
        .collect();
    // K ≈ 4.2 s: the steps shrink up to it (concave), then grow (convex).
    let k = steps.len() / 2 - 1;
    assert!(steps[..k].windows(2).all(|s| s[1] <= s[0]), "{steps:?}");
    assert!(steps[k + 1..].windows(2).all(|s| s[1] >= s[0]), "{steps:?}");
    assert!(steps.iter().all(|&s| s >= 0));
    // Near t = K the window hovers at W_max.
    let at_k = cwnds[8] as f64 / MSS as f64;
    assert!((at_k - 100.0).abs() < 1.0, "{at_k}");
}

#[test]
fn the_reno_friendly_region_takes_over_at_small_bdp() {
    // W_max = 10 segments and a 1 ms RTT: the cubic curve barely moves in the time
    // Reno needs for many RTTs, so W_est sets the pace: α_cubic = 9/17 segment per
    // RTT until it is back at cwnd_prior = 10, then 1.
    let mut c = after_loss_at(10);
    assert_eq!(c.cwnd(), 7 * MSS);
    let mut now = Instant::ZERO;
    let mut rtt = |c: &mut Cubic| {
        let mut a = ack(now, c.cwnd());
        a.srtt_us = Some(1000);
        c.on_ack(&a);
        now += Duration::from_millis(1);
    };
    for _ in 0..5 {
        rtt(&mut c);
    }
    let want = (7.0 + 5.0 * ALPHA_CUBIC) * MSS as f64;
    assert!(
        (c.cwnd() as f64 - want).abs() <= 1.0,
        "{} vs {want}",
        c.cwnd()
    );
    rtt(&mut c); // 10.18 segments: past cwnd_prior
    for _ in 0..4 {
        rtt(&mut c);
    }
    let want = (7.0 + 6.0 * ALPHA_CUBIC + 4.0) * MSS as f64;
    assert!(
        (c.cwnd() as f64 - want).abs() <= 1.0,
        "{} vs {want}",
        c.cwnd()
    );
    // The cubic curve alone would still be near 7 segments.
    let e = c.epoch().unwrap();
    assert!(e.w_cubic(Duration::from_millis(10), MSS) < 7.1 * MSS as f64);
}

#[test]
fn fast_convergence_lowers_w_max_when_loss_comes_early() {
    let mut c = after_loss_at(100);
    assert_eq!(c.w_max as usize, 100 * MSS);
    // Loss again at 90 segments, short of W_max: W_max = 90·(1 + 0.7)/2 = 76.5.
    c.cwnd = window(90 * MSS);
    c.end_epoch();
    c.on_congestion(90 * MSS, at(1000));
    assert_eq!(c.w_max as usize, 76_500);
    assert_eq!(c.ssthresh(), 63 * MSS);
    assert_eq!(c.cwnd_prior as usize, 90 * MSS);
    c.on_recovery_end(at(1000));
    c.on_ack(&ack(at(1000), c.cwnd()));
    let k = c.epoch().unwrap().k;
    assert!((k - (13.5f64 / 0.4).cbrt()).abs() < 1e-9, "{k}");
    // Loss beyond W_max: W_max is the window itself.
    c.cwnd = window(120 * MSS);
    c.on_congestion(120 * MSS, at(2000));
    assert_eq!(c.w_max as usize, 120 * MSS);
    assert_eq!(c.ssthresh(), 84 * MSS);
}

#[test]
fn ssthresh_never_falls_below_two_segments() {
    let mut c = Cubic::new(MSS);
    c.cwnd = window(2 * MSS);
    c.on_congestion(2 * MSS, at(0));
    assert_eq!(c.ssthresh(), 2 * MSS);
    assert_eq!(c.cwnd(), 2 * MSS);
}

#[test]
fn undo_restores_the_window_and_the_curve() {
    let mut c = after_loss_at(100);
    for ms in [0, 1000, 2000] {
        c.on_ack(&ack(at(ms), c.cwnd()));
    }
    let before = c.clone();
    let Clock::Running(start) = before.epoch().unwrap().clock else {
        panic!("the curve's clock runs");
    };
    c.on_congestion(c.cwnd(), at(2500));
    assert!(c.cwnd() < before.cwnd());
    assert!((c.w_max as usize) < 100 * MSS);
    // Recovery lasts a second, then turns out spurious.
    c.undo(at(3500));
    assert_eq!(c.cwnd(), before.cwnd());
    assert_eq!(c.ssthresh(), before.ssthresh());
    assert_eq!(c.w_max as usize, 100 * MSS);
    assert_eq!(c.cwnd_prior, before.cwnd_prior);
    let e = c.epoch().unwrap();
    assert_eq!(e.k, before.epoch().unwrap().k);
    // The curve goes on from where the reduction stopped it (t = 2.5 s at 3.5 s).
    c.on_ack(&ack(at(3500), c.cwnd()));
    assert_eq!(
        c.epoch().unwrap().clock,
        Clock::Running(start + Duration::from_secs(1))
    );
    let want = closed_form(100.0, 70.0, 2.6) * MSS as f64;
    assert!((c.cwnd() as f64 - want).abs() <= 2.0);
    // Nothing to undo twice.
    let grown = c.cwnd();
    c.undo(at(4000));
    assert_eq!(c.cwnd(), grown);
}

#[test]
fn an_undone_timeout_restores_the_window_before_it() {
    let mut c = after_loss_at(100);
    c.on_ack(&ack(at(0), c.cwnd()));
    let cwnd = c.cwnd();
    c.on_rto(cwnd, true, at(100));
    assert_eq!(c.cwnd(), MSS);
    for _ in 0..10 {
        c.on_ack(&ack(at(200), 2 * MSS));
    }
    assert_eq!(c.cwnd(), 21 * MSS);
    c.undo(at(300));
    assert_eq!(c.cwnd(), cwnd);
    assert_eq!(c.ssthresh(), 70 * MSS);
    assert_eq!(c.w_max as usize, 100 * MSS);
    assert_eq!(c.cwnd_prior as usize, 100 * MSS);
    // Undone after the window grew back past cwnd_prior: the current state stays.
    c.on_congestion(cwnd, at(400));
    let w_max = c.w_max;
    c.cwnd = window(2 * cwnd);
    c.undo(at(500));
    assert_eq!(c.cwnd(), 2 * cwnd);
    assert_eq!(c.w_max, w_max);
    assert!(c.cold.as_ref().is_none_or(|c| c.prior.is_none()));
}

#[test]
fn a_timeout_collapses_to_one_segment_and_restarts_the_curve_at_cwnd() {
    let mut c = after_loss_at(100);
    c.on_ack(&ack(at(0), c.cwnd()));
    c.cwnd = window(80 * MSS);
    c.on_rto(80 * MSS, true, at(1000));
    assert_eq!(c.cwnd(), MSS);
    assert_eq!(c.ssthresh(), 56 * MSS);
    assert_eq!(c.cwnd_prior as usize, 80 * MSS);
    // Slow start after a timeout is standard (L = 2), not HyStart++.
    c.on_ack(&ack(at(1100), 5 * MSS));
    assert_eq!(c.cwnd(), 3 * MSS);
    // Backed-off timeouts do not reduce ssthresh again.
    c.on_rto(3 * MSS, false, at(1500));
    assert_eq!(c.cwnd(), MSS);
    assert_eq!(c.ssthresh(), 56 * MSS);
    // Back at ssthresh, the first congestion-avoidance stage starts its curve at
    // cwnd with K = 0 (§4.8), W_est = cwnd.
    c.cwnd = window(56 * MSS);
    c.on_ack(&ack(at(2000), MSS));
    let e = c.epoch().unwrap();
    assert_eq!(e.k, 0.0);
    assert_eq!(e.w_max as usize, 56 * MSS);
}

#[test]
fn a_timeout_in_recovery_does_not_reduce_twice() {
    let mut c = Cubic::new(MSS);
    c.cwnd = window(100 * MSS);
    c.on_congestion(100 * MSS, at(0));
    assert_eq!(c.ssthresh(), 70 * MSS);
    c.on_rto(100 * MSS, true, at(1000));
    assert_eq!(c.ssthresh(), 70 * MSS);
    assert_eq!(c.cwnd(), MSS);
    // The undo state is still that of before the loss.
    c.undo(at(2000));
    assert_eq!(c.cwnd(), 100 * MSS);
    assert_eq!(c.ssthresh(), INITIAL_SSTHRESH);
    // A recovery end after the undo changes nothing.
    c.on_recovery_end(at(2000));
    assert_eq!(c.cwnd(), 100 * MSS);
}

#[test]
fn an_application_limited_sender_does_not_grow_its_window() {
    let mut c = Cubic::new(MSS);
    let mut a = ack(at(0), MSS);
    a.app_limited = true;
    c.on_ack(&a);
    assert_eq!(c.cwnd(), 10 * MSS);
    let mut c = after_loss_at(100);
    c.on_ack(&ack(at(0), c.cwnd()));
    let cwnd = c.cwnd();
    for ms in (500..10_500).step_by(100) {
        let mut a = ack(at(ms), cwnd);
        a.app_limited = true;
        c.on_ack(&a);
        assert_eq!(c.cwnd(), cwnd);
    }
    // Ten seconds app-limited do not count: at 10.5 s the curve is where it would
    // be at 0.5 s, not past W_max.
    c.on_ack(&ack(at(10_500), c.cwnd()));
    let want = closed_form(100.0, 70.0, 0.6) * MSS as f64;
    assert!(
        (c.cwnd() as f64 - want).abs() <= 2.0,
        "{} vs {want}",
        c.cwnd()
    );
}

#[test]
fn idle_restart_caps_cwnd_and_restarts_the_curve() {
    let mut c = after_loss_at(100);
    c.on_ack(&ack(at(0), c.cwnd()));
    c.on_idle_restart(at(60_000));
    assert_eq!(c.cwnd(), 10 * MSS);
    assert!(c.epoch().is_none());
    assert_eq!(c.w_max as usize, 100 * MSS);
}

#[test]
fn hystart_leaves_the_initial_slow_start_on_an_rtt_rise() {
    let mut c = Cubic::new(MSS);
    let (mut una, mut snd_max) = (0u32, 10 * MSS as u32);
    // One-segment ACKs, each releasing two segments; a round ends when SND.UNA
    // reaches the SND.MAX of its start. The RTT rises by 10 ms in the fourth.
    let mut end = snd_max;
    let mut rounds = 0;
    let mut css_seen = false;
    while c.cwnd() < c.ssthresh() {
        let rtt = Duration::from_millis(if rounds < 3 { 50 } else { 60 });
        una += MSS as u32;
        let before = c.cwnd();
        c.on_ack(&AckSample {
            now: at(rounds * 50),
            delivered: MSS,
            rtt_us: us(Some(rtt)),
            srtt_us: us(Some(rtt)),
            una: SeqNum(una),
            snd_max: SeqNum(snd_max),
            app_limited: false,
        });
        if matches!(&c.stage, Stage::Initial(h) if h.in_css()) {
            css_seen = true;
            assert_eq!(c.cwnd() - before, MSS / 4);
        }
        if una >= end {
            rounds += 1;
            end = snd_max;
        }
        snd_max += 2 * MSS as u32;
        assert!(rounds < 20, "never left slow start");
    }
    assert!(css_seen);
    // The rise came in round 4; CSS ran five rounds: slow start ended in round 8,
    // with ssthresh = cwnd and no W_max (the curve starts at cwnd, §4.10).
    assert_eq!(rounds, 8);
    assert_eq!(c.ssthresh(), c.cwnd());
    assert_eq!(c.cwnd_prior as usize, c.cwnd());
    assert_eq!(c.w_max as usize, 0);
    let cwnd = c.cwnd();
    c.on_ack(&ack(at(1000), MSS));
    assert_eq!(c.epoch().unwrap().w_max as usize, cwnd);
    assert_eq!(c.epoch().unwrap().k, 0.0);
}

#[test]
fn loss_during_the_initial_slow_start_ends_hystart() {
    let mut c = Cubic::new(MSS);
    c.on_ack(&ack(at(0), 20 * MSS));
    assert_eq!(c.cwnd(), 18 * MSS, "HyStart++ L = 8 segments per ACK");
    c.on_congestion(18 * MSS, at(10));
    c.on_recovery_end(at(20));
    assert_eq!(c.ssthresh(), 12_600);
    assert_eq!(c.w_max as usize, 18 * MSS);
    // Undone, slow start resumes with HyStart++ afresh.
    c.undo(at(30));
    assert_eq!(c.ssthresh(), INITIAL_SSTHRESH);
    assert_eq!(c.stage, Stage::Initial(HyStart::new()));
}

#[test]
fn set_mss_keeps_windows_in_segments() {
    let mut c = Cubic::new(536);
    c.set_mss(1460);
    assert_eq!(c.cwnd(), 14_600);
    let mut c = after_loss_at(100);
    c.set_mss(500);
    assert_eq!(c.cwnd(), 70 * 500);
    assert_eq!(c.ssthresh(), 70 * 500);
    assert_eq!(c.w_max as usize, 100 * 500);
    assert_eq!(c.cwnd_prior as usize, 100 * 500);
    c.set_mss(0);
    assert_eq!(c.smss(), 500);
}

#[test]
fn extreme_inputs_saturate_instead_of_panicking() {
    let times = [
        Instant::ZERO,
        Instant::FAR_FUTURE,
        Instant::from_micros(u64::MAX),
        Instant::from_millis(1),
        Instant::ZERO,
    ];
    let rtts = [
        None,
        Some(Duration::ZERO),
        Some(Duration::MAX),
        Some(Duration::from_nanos(1)),
    ];
    for smss in [1, 1460, usize::MAX / 4, usize::MAX] {
        let mut c = Cubic::new(smss);
        for i in 0..200usize {
            let now = times[i % times.len()];
            let srtt = rtts[i % rtts.len()];
            c.on_ack(&AckSample {
                now,
                delivered: if i % 3 == 0 { usize::MAX } else { i },
                rtt_us: us(rtts[(i + 1) % rtts.len()]),
                srtt_us: us(srtt),
                una: SeqNum(i as u32 * 7919),
                snd_max: SeqNum(u32::MAX - i as u32),
                app_limited: i % 11 == 0,
            });
            match i % 17 {
                3 => c.on_congestion(usize::MAX, now),
                5 => c.on_recovery_end(now),
                7 => c.undo(now),
                11 => c.on_rto(usize::MAX, i % 2 == 0, now),
                13 => c.on_idle_restart(now),
                16 => c.set_mss(i * 1000),
                _ => {}
            }
            assert!(c.cwnd() <= MAX_CWND && c.cwnd() > 0);
            assert!(c.ssthresh() <= INITIAL_SSTHRESH);
        }
    }
    // Huge windows in congestion avoidance, time standing still.
    let mut c = Cubic::new(MSS);
    c.cwnd = window(MAX_CWND);
    c.w_max = window(MAX_CWND);
    c.on_congestion(0, at(5));
    c.on_recovery_end(at(5));
    for _ in 0..10 {
        c.on_ack(&ack(at(5), usize::MAX));
    }
    assert!(c.cwnd() <= MAX_CWND);
}
