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
// ordered so that `Cc` stays as small as Rust's own layout made it (`memory_tests`).
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
mod tests {
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
}
