//! HyStart++ (RFC 9406): leaving the initial slow start before it overshoots, on a rise
//! in the round's minimum RTT, through a few rounds of Conservative Slow Start (CSS) that
//! either confirm the rise (slow start ends: ssthresh = cwnd) or find it was spurious
//! (back to slow start). It only ever runs in the initial slow start (§4.3: while
//! ssthresh is at its initial value); [`Cubic`](super::cubic::Cubic) owns one and asks
//! it how much each ACK grows the window there.

use super::AckSample;
use crate::tcp::seq::SeqNum;

/// RFC 9406 §4.3: RTT samples a round needs before its minimum is trusted.
const N_RTT_SAMPLE: u8 = 8;
/// RFC 9406 §4.3: bounds of the RTT increase that counts as a delay rise, µs.
const MIN_RTT_THRESH: u32 = 4_000;
const MAX_RTT_THRESH: u32 = 16_000;
/// RFC 9406 §4.3: the rise must be at least lastRoundMinRTT / MIN_RTT_DIVISOR.
const MIN_RTT_DIVISOR: u32 = 8;
/// RFC 9406 §4.3: CSS grows the window this many times slower than slow start.
const CSS_GROWTH_DIVISOR: usize = 4;
/// RFC 9406 §4.3: rounds of CSS before slow start ends for good.
const CSS_ROUNDS: u8 = 5;
/// RFC 9406 §4.2: at most L segments of growth per ACK; 8 for a sender that does not
/// pace (ours does not).
const L: usize = 8;

/// The RFC's "infinity" for a round that has no RTT sample yet. RTTs are kept in µs in
/// 32 bits (up to 71 minutes; longer ones count as 71 minutes).
const NO_RTT: u32 = u32::MAX;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Standard slow start, watching for a delay rise.
    SlowStart,
    /// Conservative Slow Start: `rounds` rounds have ended in it so far.
    Css { baseline_min_rtt: u32, rounds: u8 },
}

/// What one slow-start ACK does to the window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Step {
    /// Bytes to add to cwnd.
    pub(crate) increase: usize,
    /// CSS ran its CSS_ROUNDS rounds: slow start is over (set ssthresh = cwnd after
    /// adding `increase`).
    pub(crate) exit: bool,
}

/// HyStart++ state of one connection's initial slow start (RFC 9406 §4.2).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct HyStart {
    /// The [`Phase`], flattened so that the state fits 20 bytes (with CUBIC's stage
    /// tag in a flag's spare values): in CSS, since `css_baseline_min_rtt`, with
    /// `css_rounds` rounds ended in it.
    in_css: bool,
    css_rounds: u8,
    css_baseline_min_rtt: u32,
    /// The round ends when SND.UNA reaches this (SND.MAX when the round began), once
    /// `round_begun`.
    window_end: SeqNum,
    /// Minimum RTT of the previous round and of this one, µs (NO_RTT: none).
    last_round_min_rtt: u32,
    current_round_min_rtt: u32,
    rtt_sample_count: u8,
    /// A round has begun: no round begins before the first ACK. (A flag, not an
    /// `Option` of `window_end`: four bytes less for every connection.)
    round_begun: bool,
}

impl Default for HyStart {
    fn default() -> Self {
        HyStart::new()
    }
}

impl HyStart {
    /// Fresh state: standard slow start, no round begun.
    pub(crate) fn new() -> Self {
        HyStart {
            in_css: false,
            css_rounds: 0,
            css_baseline_min_rtt: 0,
            window_end: SeqNum(0),
            last_round_min_rtt: NO_RTT,
            current_round_min_rtt: NO_RTT,
            rtt_sample_count: 0,
            round_begun: false,
        }
    }

    /// In Conservative Slow Start.
    pub(crate) fn in_css(&self) -> bool {
        self.in_css
    }

    fn phase(&self) -> Phase {
        if self.in_css {
            Phase::Css {
                baseline_min_rtt: self.css_baseline_min_rtt,
                rounds: self.css_rounds,
            }
        } else {
            Phase::SlowStart
        }
    }

    fn set_phase(&mut self, phase: Phase) {
        (self.in_css, self.css_baseline_min_rtt, self.css_rounds) = match phase {
            Phase::SlowStart => (false, 0, 0),
            Phase::Css {
                baseline_min_rtt,
                rounds,
            } => (true, baseline_min_rtt, rounds),
        };
    }

    /// One ACK that delivered new data in the initial slow start, from a sender that
    /// was not application-limited. `smss` is at least 1.
    pub(crate) fn on_ack(&mut self, ack: &AckSample, smss: usize) -> Step {
        if !self.round_begun {
            self.round_begun = true;
            self.window_end = ack.snd_max;
        }
        let window_end = self.window_end;
        if let Some(rtt) = ack.rtt_us {
            self.current_round_min_rtt = self.current_round_min_rtt.min(micros(rtt));
            self.rtt_sample_count = self.rtt_sample_count.saturating_add(1);
        }
        let sampled = self.rtt_sample_count >= N_RTT_SAMPLE;
        match self.phase() {
            Phase::SlowStart => {
                if sampled
                    && self.current_round_min_rtt != NO_RTT
                    && self.last_round_min_rtt != NO_RTT
                {
                    let thresh = (self.last_round_min_rtt / MIN_RTT_DIVISOR)
                        .clamp(MIN_RTT_THRESH, MAX_RTT_THRESH);
                    if self.current_round_min_rtt >= self.last_round_min_rtt.saturating_add(thresh)
                    {
                        self.set_phase(Phase::Css {
                            baseline_min_rtt: self.current_round_min_rtt,
                            rounds: 0,
                        });
                    }
                }
            }
            Phase::Css {
                baseline_min_rtt, ..
            } => {
                // The delay rise did not last: it was not the queue building (§4.2).
                if sampled && self.current_round_min_rtt < baseline_min_rtt {
                    self.set_phase(Phase::SlowStart);
                }
            }
        }

        let mut increase = ack.delivered.min(smss.saturating_mul(L));
        if self.in_css() {
            increase /= CSS_GROWTH_DIVISOR;
        }

        let mut exit = false;
        if ack.una >= window_end {
            // The round ends with this ACK; the next begins at what is sent now. The
            // round CSS was entered in counts as its first.
            if self.in_css {
                self.css_rounds = self.css_rounds.saturating_add(1);
                exit = self.css_rounds >= CSS_ROUNDS;
            }
            self.last_round_min_rtt = self.current_round_min_rtt;
            self.current_round_min_rtt = NO_RTT;
            self.rtt_sample_count = 0;
            self.window_end = ack.snd_max;
        }
        Step { increase, exit }
    }
}

fn micros(us: u64) -> u32 {
    // NO_RTT is reserved; an RTT that long is as good as none anyway.
    u32::try_from(us).map_or(NO_RTT - 1, |us| us.min(NO_RTT - 1))
}

#[cfg(test)]
mod tests {
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
}
