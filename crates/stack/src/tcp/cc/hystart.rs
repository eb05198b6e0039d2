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
mod tests;
