//! The retransmission timeout estimator of RFC 6298: smoothed RTT (SRTT), RTT variation
//! (RTTVAR), the RTO derived from them, and exponential backoff.
//!
//! Which measurements are valid samples (Karn's algorithm, RFC 6298 §3, or timestamps,
//! RFC 7323 §4) is the caller's business; this type only turns samples into an RTO.

use std::time::Duration;

/// Clock granularity G of RFC 6298 §2: the engine's timers tick in 1 ms.
pub(crate) const CLOCK_GRANULARITY: Duration = Duration::from_millis(1);

/// RFC 6298 estimator state for one connection, in whole microseconds kept in 32 bits
/// (as Linux keeps them; the samples come in µs): every step is plain integer
/// arithmetic (this runs on every ACK that gives a sample), and the block stays small.
/// Times saturate at 71 minutes, far beyond any RTO bound that makes sense. The bounds,
/// the same for every connection of an engine, are not kept here ([`RtoBounds`]).
/// Packed: 13 bytes that fill the connection block's gaps (its fields are only read
/// and written by value, which unaligned loads and stores do at no extra cost).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(C, packed)]
pub(crate) struct RttEstimator {
    /// SRTT; [`NO_SAMPLE`] before the first sample.
    srtt: u32,
    rttvar: u32,
    /// The RTO, backoff included, clamped to [min_rto, max_rto]: what the timers read,
    /// so a plain load.
    rto: u32,
    /// Consecutive timeouts since the last valid sample (RFC 6298 §5.5), saturating.
    backoff: u8,
}

/// The RTO bounds of RFC 6298 and the initial RTO, in µs as [`RttEstimator`] keeps
/// them: one copy per engine, passed to the estimator where they apply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct RtoBounds {
    /// The initial RTO, already clamped.
    initial: u32,
    min: u32,
    max: u32,
}

impl RtoBounds {
    /// `initial_rto` applies until the first sample (RFC 6298 §2.1: 1 s); every RTO is
    /// kept within [`min_rto`, `max_rto`] (§2.4 asks for a 1 s floor; Linux uses 200 ms;
    /// §2.5 allows an upper bound of at least 60 s).
    pub(crate) fn new(initial_rto: Duration, min_rto: Duration, max_rto: Duration) -> Self {
        let (min, max) = (micros(min_rto), micros(max_rto));
        let max = max.max(min);
        RtoBounds {
            initial: micros(initial_rto).clamp(min, max),
            min,
            max,
        }
    }
}

/// SRTT before any sample.
const NO_SAMPLE: u32 = u32::MAX;

/// `us` saturated below [`NO_SAMPLE`].
fn saturate(us: u64) -> u32 {
    us.min(u64::from(NO_SAMPLE - 1)) as u32
}

/// `d` in µs, saturating below [`NO_SAMPLE`].
fn micros(d: Duration) -> u32 {
    saturate(u64::try_from(d.as_micros()).unwrap_or(u64::MAX))
}

impl RttEstimator {
    /// An estimator before any sample: the initial RTO of `bounds`.
    pub(crate) fn new(bounds: &RtoBounds) -> Self {
        RttEstimator {
            srtt: NO_SAMPLE,
            rttvar: 0,
            rto: bounds.initial,
            backoff: 0,
        }
    }

    /// Feeds one RTT measurement R of `rtt` microseconds (RFC 6298 §2.2, §2.3) and
    /// clears the backoff: the path answered, so the RTO is recomputed from fresh state
    /// (§5.7).
    pub(crate) fn sample_us(&mut self, rtt: u64, bounds: &RtoBounds) {
        let rtt = saturate(rtt);
        if self.srtt == NO_SAMPLE {
            // §2.2: SRTT <- R, RTTVAR <- R/2.
            self.srtt = rtt;
            self.rttvar = rtt / 2;
        } else {
            // §2.3, with alpha = 1/8 and beta = 1/4; RTTVAR is updated with the old
            // SRTT, as the RFC orders it. Neither sum overflows, and SRTT stays below
            // NO_SAMPLE: each is a weighted mean of values below it.
            let delta = self.srtt.abs_diff(rtt);
            self.rttvar = self.rttvar - self.rttvar / 4 + delta / 4;
            self.srtt = self.srtt - self.srtt / 8 + rtt / 8;
        }
        self.backoff = 0;
        self.rto = self.base_rto(bounds);
    }

    /// The RTO before backoff: RTO <- SRTT + max(G, K*RTTVAR) with K = 4, then the
    /// §2.4/§2.5 bounds; the initial RTO before any sample.
    fn base_rto(&self, bounds: &RtoBounds) -> u32 {
        if self.srtt == NO_SAMPLE {
            return bounds.initial;
        }
        let var = (u64::from(self.rttvar) * 4).max(CLOCK_GRANULARITY.as_micros() as u64);
        // At most max_rto, so it fits.
        (u64::from(self.srtt) + var).clamp(u64::from(bounds.min), u64::from(bounds.max)) as u32
    }

    /// The current RTO: the estimate doubled once per backoff (RFC 6298 §5.5), at most
    /// `max_rto`.
    pub(crate) fn rto(&self) -> Duration {
        Duration::from_micros(self.rto_us())
    }

    /// [`rto`](Self::rto) in whole microseconds.
    #[inline]
    pub(crate) fn rto_us(&self) -> u64 {
        u64::from(self.rto)
    }

    /// The retransmission timer expired: double the RTO (RFC 6298 §5.5), up to
    /// `max_rto`. Doubling the clamped value step by step gives min(base·2^n, max);
    /// from the 32nd backoff on the RTO is `max_rto` whatever the base.
    pub(crate) fn backoff(&mut self, bounds: &RtoBounds) {
        self.backoff = self.backoff.saturating_add(1);
        self.rto = if self.backoff >= 32 {
            bounds.max
        } else {
            (u64::from(self.rto) * 2).min(u64::from(bounds.max)) as u32
        };
    }

    /// Timeouts since the last sample or reset; the caller aborts after too many.
    #[cfg(test)]
    pub(crate) fn backoff_count(&self) -> u32 {
        u32::from(self.backoff)
    }

    /// Forget the backoff (the handshake completed): the RTO is the estimate again.
    pub(crate) fn reset_backoff(&mut self, bounds: &RtoBounds) {
        self.backoff = 0;
        self.rto = self.base_rto(bounds);
    }

    /// SRTT, once there has been a sample.
    pub(crate) fn srtt(&self) -> Option<Duration> {
        self.srtt_us().map(Duration::from_micros)
    }

    /// SRTT in whole microseconds, once there has been a sample.
    pub(crate) fn srtt_us(&self) -> Option<u64> {
        (self.srtt != NO_SAMPLE).then_some(u64::from(self.srtt))
    }

    /// RTTVAR, once there has been a sample.
    #[cfg(test)]
    pub(crate) fn rttvar(&self) -> Option<Duration> {
        self.srtt()
            .map(|_| Duration::from_micros(u64::from(self.rttvar)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(x: u64) -> Duration {
        Duration::from_millis(x)
    }

    /// An estimator with its bounds, as a connection and its engine hold them.
    struct Est(RttEstimator, RtoBounds);

    impl Est {
        fn new(initial: Duration, min: Duration, max: Duration) -> Est {
            let bounds = RtoBounds::new(initial, min, max);
            Est(RttEstimator::new(&bounds), bounds)
        }
        fn sample(&mut self, rtt: Duration) {
            self.0
                .sample_us(u64::try_from(rtt.as_micros()).unwrap_or(u64::MAX), &self.1);
        }
        fn backoff(&mut self) {
            self.0.backoff(&self.1);
        }
        fn reset_backoff(&mut self) {
            self.0.reset_backoff(&self.1);
        }
    }

    impl std::ops::Deref for Est {
        type Target = RttEstimator;
        fn deref(&self) -> &RttEstimator {
            &self.0
        }
    }

    fn linux() -> Est {
        Est::new(ms(1000), ms(200), ms(60_000))
    }

    #[test]
    fn initial_rto_before_any_sample() {
        let e = linux();
        assert_eq!(e.rto(), ms(1000));
        assert_eq!(e.srtt(), None);
        assert_eq!(e.rttvar(), None);
    }

    #[test]
    fn first_and_second_samples_worked_by_hand() {
        let mut e = linux();
        e.sample(ms(100));
        // SRTT = 100, RTTVAR = 50, RTO = 100 + 4*50 = 300.
        assert_eq!(e.srtt(), Some(ms(100)));
        assert_eq!(e.rttvar(), Some(ms(50)));
        assert_eq!(e.rto(), ms(300));
        e.sample(ms(200));
        // RTTVAR = 3/4*50 + 1/4*|100-200| = 62.5; SRTT = 7/8*100 + 1/8*200 = 112.5;
        // RTO = 112.5 + 250 = 362.5.
        assert_eq!(e.rttvar(), Some(Duration::from_micros(62_500)));
        assert_eq!(e.srtt(), Some(Duration::from_micros(112_500)));
        assert_eq!(e.rto(), Duration::from_micros(362_500));
        e.sample(ms(80));
        // RTTVAR = 3/4*62.5 + 1/4*32.5 = 55; SRTT = 7/8*112.5 + 10 = 108.4375, in
        // whole µs 108.438 (112.5/8 rounds down); RTO = 108.438 + 220 = 328.438.
        assert_eq!(e.rttvar(), Some(ms(55)));
        assert_eq!(e.srtt(), Some(Duration::from_micros(108_438)));
        assert_eq!(e.rto(), Duration::from_micros(328_438));
    }

    #[test]
    fn rto_is_clamped_to_min_and_max() {
        let mut e = linux();
        e.sample(ms(10)); // 10 + 20 = 30 ms -> 200 ms floor
        assert_eq!(e.rto(), ms(200));
        e.sample(ms(100_000)); // huge variation -> 60 s cap
        assert_eq!(e.rto(), ms(60_000));
    }

    #[test]
    fn granularity_floors_the_variance_term() {
        let mut e = Est::new(ms(1000), Duration::ZERO, ms(60_000));
        e.sample(ms(8));
        for _ in 0..200 {
            e.sample(ms(8));
        }
        // RTTVAR has decayed to ~0, so RTO = SRTT + G.
        assert!(e.rttvar().unwrap() < Duration::from_micros(250));
        assert_eq!(e.rto(), ms(9));
    }

    #[test]
    fn backoff_doubles_up_to_max_and_sample_resets_it() {
        let mut e = linux();
        e.sample(ms(100)); // RTO 300 ms
        e.backoff();
        assert_eq!(e.rto(), ms(600));
        e.backoff();
        assert_eq!(e.rto(), ms(1200));
        assert_eq!(e.backoff_count(), 2);
        for _ in 0..100 {
            e.backoff();
        }
        assert_eq!(e.backoff_count(), 102);
        assert_eq!(e.rto(), ms(60_000));
        e.sample(ms(100));
        assert_eq!(e.backoff_count(), 0);
        // SRTT = 100, RTTVAR = 3/4*50 + 0 = 37.5 -> RTO = 250.
        assert_eq!(e.rto(), ms(250));
        e.backoff();
        e.reset_backoff();
        assert_eq!(e.rto(), ms(250));
    }

    #[test]
    fn extreme_samples_do_not_panic() {
        let mut e = linux();
        e.sample(Duration::MAX);
        e.sample(Duration::ZERO);
        e.sample(Duration::MAX);
        assert_eq!(e.rto(), ms(60_000));
        let odd = Est::new(ms(1), ms(500), ms(100));
        assert_eq!(odd.rto(), ms(500));
    }
}
