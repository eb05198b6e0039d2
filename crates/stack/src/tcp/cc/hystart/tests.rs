use super::*;
use crate::tcp::cc::us;
use crate::time::Instant;
use std::time::Duration;

const MSS: usize = 1000;

/// Drives rounds of `per_round` ACKs of one segment each, every one carrying an RTT
/// sample, the way a sender in slow start sees them.
struct Flow {
    hs: HyStart,
    una: u32,
    snd_max: u32,
}

impl Flow {
    fn new() -> Self {
        Flow {
            hs: HyStart::new(),
            una: 0,
            snd_max: 10 * MSS as u32,
        }
    }

    /// One ACK of one segment with an RTT sample; true if it ended the round.
    fn ack(&mut self, rtt_ms: u64) -> (Step, bool) {
        // The end the ACK is judged against (set by this ACK if no round began).
        let end = if self.hs.round_begun {
            self.hs.window_end
        } else {
            SeqNum(self.snd_max)
        };
        self.una += MSS as u32;
        let step = self.hs.on_ack(
            &AckSample {
                now: Instant::ZERO,
                delivered: MSS,
                rtt_us: Some(rtt_ms * 1000),
                srtt_us: Some(rtt_ms * 1000),
                una: SeqNum(self.una),
                snd_max: SeqNum(self.snd_max),
                app_limited: false,
            },
            MSS,
        );
        // Each ACK releases two more segments, as in slow start.
        self.snd_max += 2 * MSS as u32;
        (step, SeqNum(self.una) >= end)
    }

    /// ACKs to the end of the current round, all with `rtt_ms`; their steps.
    fn round(&mut self, rtt_ms: u64) -> Vec<Step> {
        let mut steps = Vec::new();
        loop {
            let (step, ended) = self.ack(rtt_ms);
            steps.push(step);
            if ended {
                return steps;
            }
        }
    }
}

#[test]
fn growth_is_capped_at_l_segments_per_ack() {
    let mut hs = HyStart::new();
    let mut a = AckSample {
        now: Instant::ZERO,
        delivered: 20 * MSS,
        rtt_us: None,
        srtt_us: None,
        una: SeqNum(20 * MSS as u32),
        snd_max: SeqNum(100 * MSS as u32),
        app_limited: false,
    };
    assert_eq!(hs.on_ack(&a, MSS).increase, L * MSS);
    a.delivered = 3 * MSS;
    assert_eq!(hs.on_ack(&a, MSS).increase, 3 * MSS);
    assert!(!hs.in_css());
}

#[test]
fn a_steady_rtt_stays_in_slow_start() {
    let mut f = Flow::new();
    for _ in 0..10 {
        for s in f.round(50) {
            assert_eq!(
                s,
                Step {
                    increase: MSS,
                    exit: false
                }
            );
        }
    }
    assert!(!f.hs.in_css());
}

#[test]
fn an_rtt_rise_enters_css_and_css_rounds_end_slow_start() {
    let mut f = Flow::new();
    f.round(50);
    f.round(50);
    // RttThresh = clamp(50/8 ms, 4, 16) = 6.25 ms: 56 ms is not enough ...
    f.round(56);
    assert!(!f.hs.in_css());
    // ... but the round after, measured against 56 ms, rises by 7 ms. CSS begins
    // at the eighth sample of that round, not before.
    let steps = f.round(63);
    assert!(steps.len() > N_RTT_SAMPLE as usize);
    assert!(steps[..7].iter().all(|s| s.increase == MSS));
    assert!(steps[7..]
        .iter()
        .all(|s| s.increase == MSS / CSS_GROWTH_DIVISOR));
    assert!(f.hs.in_css());
    assert_eq!(
        f.hs.phase(),
        Phase::Css {
            baseline_min_rtt: 63_000,
            rounds: 1
        }
    );
    // Three more CSS rounds grow by a quarter and do not end slow start.
    for _ in 0..3 {
        let steps = f.round(64);
        assert!(steps.iter().all(|s| *s
            == Step {
                increase: MSS / CSS_GROWTH_DIVISOR,
                exit: false
            }));
    }
    // The last ACK of the fifth round does.
    let steps = f.round(64);
    let (last, rest) = steps.split_last().unwrap();
    assert!(rest.iter().all(|s| !s.exit));
    assert!(last.exit);
}

#[test]
fn an_rtt_drop_below_the_baseline_is_a_spurious_css_exit() {
    let mut f = Flow::new();
    f.round(40);
    f.round(40);
    f.round(60);
    assert!(f.hs.in_css());
    f.round(60);
    // The queue drained: the round's minimum falls below the CSS baseline once it
    // has its N_RTT_SAMPLE samples, and slow start resumes at full speed.
    let steps = f.round(45);
    assert!(!f.hs.in_css());
    assert_eq!(steps.last().unwrap().increase, MSS);
    assert!(steps.iter().all(|s| !s.exit));
    // Measured against the 45 ms round, a steady RTT stays in slow start.
    f.round(46);
    assert!(!f.hs.in_css());
}

#[test]
fn rounds_without_enough_samples_never_enter_css() {
    let mut f = Flow::new();
    f.round(10);
    // A round of 7 samples only (the rest carry none).
    let end = f.hs.window_end.0;
    let mut n = 0;
    while f.una < end {
        f.una += MSS as u32;
        let a = AckSample {
            now: Instant::ZERO,
            delivered: MSS,
            rtt_us: (n < 7).then_some(500_000),
            srtt_us: None,
            una: SeqNum(f.una),
            snd_max: SeqNum(f.snd_max),
            app_limited: false,
        };
        n += 1;
        f.hs.on_ack(&a, MSS);
    }
    assert!(!f.hs.in_css());
}

#[test]
fn extreme_samples_do_not_panic() {
    let mut hs = HyStart::new();
    for (i, rtt) in [Duration::ZERO, Duration::MAX, Duration::from_nanos(1)]
        .into_iter()
        .cycle()
        .take(100)
        .enumerate()
    {
        hs.on_ack(
            &AckSample {
                now: Instant::FAR_FUTURE,
                delivered: usize::MAX,
                rtt_us: us(Some(rtt)),
                srtt_us: us(Some(rtt)),
                una: SeqNum((i as u32).wrapping_mul(0x9e37_79b9)),
                snd_max: SeqNum(u32::MAX - i as u32),
                app_limited: false,
            },
            usize::MAX,
        );
    }
}
