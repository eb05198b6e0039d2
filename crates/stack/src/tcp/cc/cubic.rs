//! CUBIC (RFC 9438): after a reduction the window follows W_cubic(t) = C(t−K)³ + W_max,
//! concave up to the W_max where loss last struck and convex past it, never slower than
//! the Reno-friendly estimate W_est; β = 0.7 and fast convergence. The initial slow
//! start exits through HyStart++ ([`HyStart`], RFC 9406).
//!
//! The RFC counts in segments; we keep bytes and convert with SMSS where the formulas
//! need segments (K, the cubic term, W_est's increment).
//!
//! Choices the RFC leaves open:
//! - ssthresh = β·cwnd, not β·FlightSize (§4.6 allows either; Linux and Windows use
//!   cwnd, which does not collapse the window of an application-limited flow). The RFC
//!   asks an implementation that uses cwnd to keep cwnd from growing while less than it
//!   is in flight: ACKs flagged [`app_limited`](AckSample::app_limited) never grow the
//!   window (§5.8, RFC 7661).
//! - t must not include time spent application-limited (§4.2, §5.8): an app-limited ACK
//!   pauses the curve's clock and the next cwnd-limited ACK moves the epoch start later
//!   by the pause, so the window does not leap after an app-limited period (Linux does
//!   the same for idle periods). An idle restart (RFC 5681 §4.1) starts a new epoch.
//! - When W_max is unknown or below cwnd at the start of congestion avoidance (after a
//!   timeout, §4.8; after HyStart++ left slow start without loss, §4.10; after an undo),
//!   K = 0 and the curve starts at cwnd.
//! - In the Reno-friendly region cwnd = max(cwnd, W_est): W_est only ever raises cwnd.
//! - A timeout during loss recovery does not reduce ssthresh a second time for the same
//!   losses (as Linux); it still collapses cwnd to one segment.
//! - An undo (§4.9) restores cwnd, cwnd_prior, W_max and the curve (K, epoch start,
//!   W_est) of before the reduction if cwnd is still below cwnd_prior, the curve paused
//!   for the time the reduction lasted; ssthresh is never lowered. If cwnd has already
//!   grown back, the current state stays.

use std::time::Duration;

use super::hystart::HyStart;
use super::{initial_window, window, AckSample, CongestionControl, INITIAL_SSTHRESH, MAX_CWND};
use crate::time::Instant;

/// RFC 9438 §5.1: C, in segments per second³.
const C: f64 = 0.4;
/// β_cubic (§4.6) = 7/10.
const BETA: (usize, usize) = (7, 10);
/// Fast convergence (§4.7): W_max = cwnd·(1 + β_cubic)/2 = cwnd·17/20.
const FAST_CONVERGENCE: (usize, usize) = (17, 20);
/// α_cubic (§4.3) = 3(1 − β_cubic)/(1 + β_cubic) = 9/17.
const ALPHA_CUBIC: f64 = 3.0 * (1.0 - 0.7) / (1.0 + 0.7);
/// The largest SMSS taken (the MSS option is 16 bits).
const MAX_SMSS: usize = u16::MAX as usize;
/// RFC 3465 L in the slow starts after the first (HyStart++ has its own, RFC 9406).
const ABC_L: usize = 2;

/// The clock of a curve, t of W_cubic(t): it stops while the sender is
/// application-limited.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Clock {
    /// Running: t = 0 was at this time (moved later by the pauses so far).
    Running(Instant),
    /// Stopped at this t.
    Paused(Duration),
}

/// The cubic curve of one congestion-avoidance stage (RFC 9438 §4.2).
#[derive(Debug, Clone, PartialEq)]
struct Epoch {
    clock: Clock,
    /// K of eq. 2, seconds.
    k: f64,
    /// W_est (§4.3), bytes.
    w_est: f64,
    /// W_max of eq. 1, bytes: where the curve flattens out.
    w_max: u32,
    /// Cubic growth earned by ACKs but not yet a whole byte: the remainder of
    /// (target − cwnd)·acked / cwnd, over cwnd.
    credit: u32,
}

impl Epoch {
    /// The curve of a stage beginning now with `cwnd`, towards `w_max` (bytes; below
    /// cwnd or 0 when unknown: K = 0 and the curve starts at cwnd).
    fn begin(now: Instant, cwnd: usize, w_max: usize, smss: usize) -> Epoch {
        let (w_max, k) = if w_max > cwnd {
            let segments = (w_max - cwnd) as f64 / smss as f64;
            (w_max, (segments / C).cbrt())
        } else {
            (cwnd, 0.0)
        };
        Epoch {
            clock: Clock::Running(now),
            k,
            // §4.3: W_est = cwnd_epoch at the start of the stage.
            w_est: cwnd as f64,
            w_max: window(w_max),
            credit: 0,
        }
    }

    /// W_cubic(t) (eq. 1), bytes; may be negative or beyond any window.
    fn w_cubic(&self, t: Duration, smss: usize) -> f64 {
        let d = t.as_secs_f64() - self.k;
        C * d * d * d * smss as f64 + f64::from(self.w_max)
    }

    /// Stop the clock (the sender is application-limited) if it runs.
    fn pause(&mut self, now: Instant) {
        if let Clock::Running(start) = self.clock {
            self.clock = Clock::Paused(now.saturating_duration_since(start));
        }
    }

    /// Restart the clock if it was stopped, t going on from where it stopped; t now.
    fn resume(&mut self, now: Instant) -> Duration {
        match self.clock {
            Clock::Running(start) => now.saturating_duration_since(start),
            Clock::Paused(t) => {
                self.clock = Clock::Running(now - t);
                t
            }
        }
    }
}

/// Where the window grows from: the initial slow start under HyStart++, or the stages
/// after it. The two never hold state at once (HyStart++ runs only while ssthresh is
/// at its initial value, RFC 9406 §4.3; a curve only in congestion avoidance, below
/// it), so they share the space.
#[derive(Debug, Clone, PartialEq)]
enum Stage {
    /// The initial slow start: ssthresh is at its initial value.
    Initial(HyStart),
    /// After it: the curve of the current congestion-avoidance stage ([`Cold::epoch`],
    /// out of line), none until its first ACK (and during the slow starts after a
    /// loss).
    Curve,
}

/// What an undo restores (RFC 9438 §4.9).
#[derive(Debug, Clone, PartialEq)]
struct Prior {
    cwnd: u32,
    ssthresh: u32,
    w_max: u32,
    cwnd_prior: u32,
    epoch: Option<Epoch>,
}

/// What only a connection past its initial slow start uses, out of line: a connection
/// that never leaves it (most short ones) keeps none of it, and one in congestion
/// avoidance allocates it once per stage (a loss, a timeout, an idle restart), not
/// per ACK. Freed when both parts are gone.
#[derive(Debug, Clone, PartialEq, Default)]
struct Cold {
    /// The curve of the current congestion-avoidance stage, once it has begun (only
    /// in [`Stage::Curve`]).
    epoch: Option<Epoch>,
    /// Set by a reduction, until undone or replaced.
    prior: Option<Prior>,
}

/// CUBIC congestion control (RFC 9438) with HyStart++ (RFC 9406). Windows are kept in
/// 32 bits (see [`MAX_CWND`]), the segment size in 16 (the MSS option's range).
#[derive(Debug, Clone, PartialEq)]
// `repr(C)` with `cwnd` and `ssthresh` first, as in `NewReno`: `Cc`'s accessors then
// read the same place whichever the algorithm, without a branch on it. The rest is
// ordered so that `Cc` stays as small as Rust's own layout made it (`engine::tests`).
#[repr(C)]
pub(crate) struct Cubic {
    cwnd: u32,
    ssthresh: u32,
    /// W_max for the next stage, bytes: the window before the last reduction (less with
    /// fast convergence); 0 when unknown (§4.8, §4.10).
    w_max: u32,
    /// cwnd when ssthresh was last set (§4.3), bytes.
    cwnd_prior: u32,
    cold: Option<Box<Cold>>,
    stage: Stage,
    smss: u16,
    /// Between `on_congestion` and the end of that recovery.
    in_recovery: bool,
}

impl Cubic {
    /// A controller for a sender whose maximum segment size is `smss` (0 is treated as
    /// 1, more than 65535 as 65535), starting at the initial window in slow start.
    pub(crate) fn new(smss: usize) -> Self {
        let smss = smss.clamp(1, MAX_SMSS);
        Cubic {
            smss: smss as u16,
            cwnd: window(initial_window(smss)),
            ssthresh: INITIAL_SSTHRESH as u32,
            w_max: 0,
            cwnd_prior: 0,
            in_recovery: false,
            stage: Stage::Initial(HyStart::new()),
            cold: None,
        }
    }

    fn cold_mut(&mut self) -> &mut Cold {
        self.cold.get_or_insert_with(Box::default)
    }

    /// Free the out-of-line part once neither a curve nor an undo snapshot is in it.
    fn drop_cold_if_empty(&mut self) {
        if self
            .cold
            .as_ref()
            .is_some_and(|c| c.epoch.is_none() && c.prior.is_none())
        {
            self.cold = None;
        }
    }

    /// Apply `set` to the out-of-line part: allocated first when `fills`, else only if
    /// it exists, and freed if it ends up empty.
    fn update_cold(&mut self, fills: bool, set: impl FnOnce(&mut Cold)) {
        if fills {
            set(self.cold_mut());
        } else if let Some(cold) = self.cold.as_mut() {
            set(cold);
            self.drop_cold_if_empty();
        }
    }

    /// Set (or clear) the curve of the current stage.
    fn set_epoch(&mut self, epoch: Option<Epoch>) {
        self.update_cold(epoch.is_some(), |c| c.epoch = epoch);
    }

    /// Set (or clear) the undo snapshot.
    fn set_prior(&mut self, prior: Option<Prior>) {
        self.update_cold(prior.is_some(), |c| c.prior = prior);
    }

    fn smss(&self) -> usize {
        self.smss as usize
    }

    /// The curve of the current stage, if one has begun.
    fn epoch(&self) -> Option<&Epoch> {
        self.cold.as_ref()?.epoch.as_ref()
    }

    /// The curve of the current stage, if one has begun.
    fn epoch_mut(&mut self) -> Option<&mut Epoch> {
        self.cold.as_mut()?.epoch.as_mut()
    }

    /// End the current curve (the next congestion-avoidance ACK begins a new one);
    /// the initial slow start, if it is still on, goes on.
    fn end_epoch(&mut self) {
        self.set_epoch(None);
    }

    /// ssthresh changed: HyStart++ afresh if it is back at its initial value (an undo),
    /// else no curve until the next congestion-avoidance ACK.
    fn restart_stage(&mut self) {
        self.stage = if self.ssthresh as usize == INITIAL_SSTHRESH {
            Stage::Initial(HyStart::new())
        } else {
            Stage::Curve
        };
        self.end_epoch();
    }

    fn snapshot(&self, now: Instant) -> Prior {
        let mut epoch = self.epoch().cloned();
        if let Some(e) = &mut epoch {
            // Should the reduction be undone, the curve goes on from where it stopped.
            e.pause(now);
        }
        Prior {
            cwnd: self.cwnd,
            ssthresh: self.ssthresh,
            w_max: self.w_max,
            cwnd_prior: self.cwnd_prior,
            epoch,
        }
    }

    /// §4.6 multiplicative decrease with §4.7 fast convergence: sets W_max, cwnd_prior
    /// and ssthresh from cwnd and ends the stage. cwnd itself is the caller's.
    fn reduce(&mut self) {
        let cwnd = self.cwnd as usize;
        self.w_max = if self.cwnd < self.w_max {
            // Loss struck below the last W_max: the flow is losing share, so it gives
            // some more up for newcomers.
            window(mul_frac(cwnd, FAST_CONVERGENCE))
        } else {
            self.cwnd
        };
        self.cwnd_prior = self.cwnd;
        self.ssthresh = window(mul_frac(cwnd, BETA).max(self.smss().saturating_mul(2)));
        // HyStart++ is for the initial slow start only (RFC 9406 §4.3); an undo back
        // to it starts its rounds afresh.
        self.restart_stage();
    }

    fn slow_start(&mut self, ack: &AckSample) {
        let smss = self.smss();
        if let Stage::Initial(hystart) = &mut self.stage {
            let step = hystart.on_ack(ack, smss);
            self.cwnd = window((self.cwnd as usize).saturating_add(step.increase));
            if step.exit {
                // RFC 9406 §4.2: CSS confirmed the delay rise; RFC 9438 §4.10: with no
                // loss there is no W_max, the curve starts at cwnd.
                self.ssthresh = self.cwnd;
                self.cwnd_prior = self.cwnd;
                self.w_max = 0;
                self.stage = Stage::Curve;
            }
        } else {
            // RFC 5681 §3.1 with RFC 3465 L = 2 SMSS, as NewReno.
            let increase = ack.delivered.min(smss.saturating_mul(ABC_L));
            self.cwnd = window((self.cwnd as usize).saturating_add(increase));
        }
    }

    fn congestion_avoidance(&mut self, ack: &AckSample) {
        let smss = self.smss();
        let cwnd = (self.cwnd as usize).max(1);
        let w_max = self.w_max as usize;
        let cwnd_prior = self.cwnd_prior as f64;
        if let Stage::Initial(_) = self.stage {
            // Not reached (cwnd stays below the initial ssthresh); a curve if it were.
            self.stage = Stage::Curve;
        }
        let epoch = self
            .cold
            .get_or_insert_with(Box::default)
            .epoch
            .get_or_insert_with(|| Epoch::begin(ack.now, cwnd, w_max, smss));
        let t = epoch.resume(ack.now);

        // §4.3: W_est grows like Reno with AIMD(α_cubic, β_cubic), and like Reno itself
        // (α = 1) once it is back to the window of the last reduction.
        let alpha = if epoch.w_est >= cwnd_prior {
            1.0
        } else {
            ALPHA_CUBIC
        };
        epoch.w_est += alpha * ack.delivered as f64 * smss as f64 / cwnd as f64;

        if epoch.w_cubic(t, smss) < epoch.w_est {
            // Reno-friendly region.
            self.cwnd = window(cwnd.max(to_bytes(epoch.w_est)));
            return;
        }
        // §4.2 concave and convex regions: aim at where the curve will be one RTT on,
        // but at most 1.5·cwnd, and close (target − cwnd)/cwnd of the gap per segment
        // acknowledged. Without an RTT estimate, aim at the curve now.
        let rtt = Duration::from_micros(ack.srtt_us.or(ack.rtt_us).unwrap_or(0));
        let ceiling = cwnd.saturating_add(cwnd / 2).min(MAX_CWND).max(cwnd);
        let target = to_bytes(epoch.w_cubic(t.saturating_add(rtt), smss)).clamp(cwnd, ceiling);
        let gap = target - cwnd;
        let earned = (gap as u128)
            .saturating_mul(ack.delivered as u128)
            .saturating_add(u128::from(epoch.credit));
        let grow = earned / cwnd as u128;
        // The remainder is below cwnd, so it fits.
        epoch.credit = u32::try_from(earned % cwnd as u128).unwrap_or(0);
        let grow = usize::try_from(grow).unwrap_or(usize::MAX).min(gap);
        self.cwnd = window(cwnd + grow);
    }
}

impl CongestionControl for Cubic {
    fn cwnd(&self) -> usize {
        self.cwnd as usize
    }

    fn ssthresh(&self) -> usize {
        self.ssthresh as usize
    }

    fn on_ack(&mut self, ack: &AckSample) {
        if ack.delivered == 0 {
            return;
        }
        if ack.app_limited {
            return self.on_app_limited_ack(ack.now);
        }
        if self.cwnd < self.ssthresh {
            self.slow_start(ack);
        } else {
            self.congestion_avoidance(ack);
        }
    }

    #[inline]
    fn on_app_limited_ack(&mut self, now: Instant) {
        // §5.8, RFC 7661 §4.1: an unused window is not validated, and the time does
        // not count towards the curve.
        if let Some(e) = self.epoch_mut() {
            e.pause(now);
        }
    }

    fn on_congestion(&mut self, _flight_size: usize, now: Instant) {
        self.set_prior(Some(self.snapshot(now)));
        self.reduce();
        self.cwnd = self.ssthresh;
        self.in_recovery = true;
    }

    fn on_recovery_end(&mut self, _now: Instant) {
        // After an undo (or a timeout) the recovery this ends is already over for us;
        // ssthresh may be back at its initial value then.
        if self.in_recovery {
            self.cwnd = window(self.ssthresh as usize);
            self.in_recovery = false;
        }
    }

    fn on_rto(&mut self, _flight_size: usize, first: bool, now: Instant) {
        if first && !self.in_recovery {
            self.set_prior(Some(self.snapshot(now)));
            self.reduce();
        }
        // §4.8: the first stage after a timeout starts its curve at cwnd (K = 0).
        self.w_max = 0;
        self.restart_stage();
        self.in_recovery = false;
        // Loss window (RFC 5681 §3.1): one segment, then slow start again.
        self.cwnd = u32::from(self.smss);
    }

    fn undo(&mut self, _now: Instant) {
        let Some(p) = self.cold.as_mut().and_then(|c| c.prior.take()) else {
            return;
        };
        self.drop_cold_if_empty();
        self.in_recovery = false;
        // §4.9: only while the window is still below the one the reduction left;
        // once it has grown back, the current state is the better one.
        if self.cwnd < self.cwnd_prior {
            self.cwnd = self.cwnd.max(p.cwnd);
            self.ssthresh = self.ssthresh.max(p.ssthresh);
            self.w_max = p.w_max;
            self.cwnd_prior = p.cwnd_prior;
            // Back to the initial slow start (a reduction there was spurious), or to
            // the curve of before.
            self.restart_stage();
            if self.stage == Stage::Curve {
                self.set_epoch(p.epoch);
            }
        }
    }

    fn on_idle_restart(&mut self, _now: Instant) {
        self.cwnd = self.cwnd.min(window(initial_window(self.smss())));
        self.end_epoch();
    }

    fn set_mss(&mut self, smss: usize) {
        let smss = smss.min(MAX_SMSS);
        let old = self.smss();
        if smss == 0 || smss == old {
            return;
        }
        let cwnd = self.cwnd as usize;
        let initial = self.ssthresh as usize == INITIAL_SSTHRESH;
        if cwnd == initial_window(old).min(MAX_CWND) && initial {
            // Nothing sent yet that changed the window: start from the IW for this MSS.
            self.cwnd = window(initial_window(smss));
        } else {
            // Keep the windows' sizes in segments (as a packet-counting stack would).
            self.cwnd = window(in_segments(cwnd, old, smss).max(smss));
            self.w_max = window(in_segments(self.w_max as usize, old, smss));
            self.cwnd_prior = window(in_segments(self.cwnd_prior as usize, old, smss));
            if !initial {
                self.ssthresh = window(
                    in_segments(self.ssthresh as usize, old, smss).max(smss.saturating_mul(2)),
                );
            }
        }
        self.smss = smss as u16;
        // The curve and the undo state were in the old segment size.
        self.end_epoch();
        self.set_prior(None);
    }
}

/// `x`·num/den for a fraction below one, without overflow.
fn mul_frac(x: usize, (num, den): (usize, usize)) -> usize {
    usize::try_from(x as u128 * num as u128 / den as u128).unwrap_or(x)
}

/// `bytes` rounded up to whole segments of `old`, counted in segments of `new` (whole).
fn in_segments(bytes: usize, old: usize, new: usize) -> usize {
    bytes.div_ceil(old.max(1)).saturating_mul(new).min(MAX_CWND)
}

/// A window computed in floating point, as bytes in 0..=MAX_CWND.
fn to_bytes(w: f64) -> usize {
    if w.is_nan() || w <= 0.0 {
        0
    } else if w >= MAX_CWND as f64 {
        MAX_CWND
    } else {
        w as usize
    }
}

#[cfg(test)]
mod tests;
