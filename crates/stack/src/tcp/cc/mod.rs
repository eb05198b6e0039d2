//! Congestion control: the [`CongestionControl`] trait a connection drives, the
//! algorithms behind it, and the [`Cc`] enum that dispatches to them without a vtable.
//!
//! The connection decides *when* things happen: it detects loss (SACK scoreboard,
//! RACK, duplicate ACKs, timeouts), runs loss recovery and paces sending during it with
//! Proportional Rate Reduction (RFC 6937), and decides that a reduction was spurious. An
//! algorithm only decides what happens to `cwnd` and `ssthresh`: how the window grows
//! on ACKs outside recovery, what a congestion event reduces it to, where it restarts
//! after a timeout or idle period, and what an undo restores. All quantities are bytes.
//!
//! Algorithms: [`cubic::Cubic`] (RFC 9438, leaving the initial slow start with
//! HyStart++, RFC 9406, in [`hystart`]), the default as on Linux, and
//! [`newreno::NewReno`] (RFC 5681), chosen per engine with
//! [`TcpConfig::congestion_control`](super::config::TcpConfig::congestion_control).

use super::seq::SeqNum;
use crate::time::Instant;

mod cubic;
mod hystart;
mod newreno;

pub(crate) use cubic::Cubic;
pub(crate) use newreno::NewReno;

/// "Arbitrarily high" initial ssthresh (RFC 5681 §3.1): above any window.
pub(crate) const INITIAL_SSTHRESH: usize = u32::MAX as usize;

/// Upper bound on cwnd (and on the SMSS taken), so that growth saturates instead of
/// overflowing: 2 GiB, twice the largest window a peer can offer (RFC 7323 §2.3). The
/// algorithms keep windows and sizes in 32 bits ([`window`]).
pub(crate) const MAX_CWND: usize = 1 << 31;

/// A window or size in bytes as the algorithms keep it: 32 bits, at most [`MAX_CWND`].
pub(crate) fn window(bytes: usize) -> u32 {
    bytes.min(MAX_CWND) as u32
}

/// The congestion-control algorithm an engine's connections use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum CongestionAlgorithm {
    /// CUBIC (RFC 9438) with HyStart++ (RFC 9406), as Linux runs by default.
    #[default]
    Cubic,
    /// NewReno (RFC 5681 slow start and congestion avoidance; loss recovery by the
    /// connection, RFC 6675 / RFC 6582 with RFC 6937).
    NewReno,
}

impl CongestionAlgorithm {
    /// Every algorithm.
    pub const ALL: [CongestionAlgorithm; 2] =
        [CongestionAlgorithm::Cubic, CongestionAlgorithm::NewReno];

    /// The name used on command lines and in logs (`cubic`, `newreno`).
    pub fn name(self) -> &'static str {
        match self {
            CongestionAlgorithm::Cubic => "cubic",
            CongestionAlgorithm::NewReno => "newreno",
        }
    }

    /// Parse a name as [`CongestionAlgorithm::name`] spells it (case-insensitive).
    pub fn from_name(name: &str) -> Option<Self> {
        match name.to_ascii_lowercase().as_str() {
            "cubic" => Some(CongestionAlgorithm::Cubic),
            "newreno" | "reno" => Some(CongestionAlgorithm::NewReno),
            _ => None,
        }
    }
}

/// What one ACK that acknowledged new data tells the algorithm (outside recovery).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct AckSample {
    /// When the ACK arrived.
    pub now: Instant,
    /// Bytes newly delivered by this ACK: cumulatively acknowledged plus newly SACKed.
    pub delivered: usize,
    /// The round-trip time this ACK measured, if it measured one (timestamps or Karn),
    /// in microseconds (as the estimator keeps it: no conversion on every ACK).
    pub rtt_us: Option<u64>,
    /// The smoothed round-trip time after this ACK (RFC 6298), once there is one, in
    /// microseconds.
    pub srtt_us: Option<u64>,
    /// SND.UNA after this ACK.
    pub una: SeqNum,
    /// SND.MAX: the highest sequence number sent so far (a round ends when SND.UNA
    /// passes the SND.MAX it began with, RFC 9406 §4.2).
    pub snd_max: SeqNum,
    /// The sender used less than the window before this ACK (application- or
    /// receiver-window-limited): the window should not grow on it (RFC 7661 §4.1).
    pub app_limited: bool,
}

/// A test's RTT in the microseconds an [`AckSample`] carries (saturating).
#[cfg(test)]
pub(crate) fn us(d: Option<std::time::Duration>) -> Option<u64> {
    d.map(|d| u64::try_from(d.as_micros()).unwrap_or(u64::MAX))
}

/// What the connection tells its congestion controller.
pub(crate) trait CongestionControl {
    /// The congestion window, bytes.
    fn cwnd(&self) -> usize;
    /// The slow-start threshold, bytes.
    fn ssthresh(&self) -> usize;
    /// New data delivered outside loss recovery: grow the window.
    fn on_ack(&mut self, ack: &AckSample);
    /// What [`on_ack`](CongestionControl::on_ack) does with a sample that delivered
    /// data while the sender was application-limited (`app_limited`, `delivered > 0`),
    /// without the sample: the window does not grow, so the rest of it is not read.
    /// The request/response case, on every ACK: the sample it would not read is not
    /// built.
    fn on_app_limited_ack(&mut self, now: Instant);
    /// Loss detected (fast retransmit, SACK or RACK): the start of loss recovery. Set
    /// ssthresh to the reduced window and cwnd to it as well (the connection paces
    /// sending during recovery itself, RFC 6937); remember what an [`undo`] restores.
    /// `flight_size` is the data outstanding when loss was detected (RFC 5681 eq. 4).
    ///
    /// [`undo`]: CongestionControl::undo
    fn on_congestion(&mut self, flight_size: usize, now: Instant);
    /// Loss recovery ended at its recovery point (RFC 6675 §5, RFC 6937: cwnd =
    /// ssthresh).
    fn on_recovery_end(&mut self, now: Instant);
    /// Retransmission timeout (RFC 5681 §3.1 eq. 4, loss window of one segment); like
    /// [`on_congestion`](CongestionControl::on_congestion) it remembers what an undo
    /// restores. `first` is false for the backed-off timeouts that follow the first
    /// one without progress in between (they do not reduce ssthresh again).
    fn on_rto(&mut self, flight_size: usize, first: bool, now: Instant);
    /// The last reduction was spurious (D-SACK or Eifel detection): restore the window
    /// and threshold it replaced.
    fn undo(&mut self, now: Instant);
    /// Restart after idle (RFC 5681 §4.1): cwnd = min(cwnd, restart window = IW).
    fn on_idle_restart(&mut self, now: Instant);
    /// The sender's MSS changed (set once after the handshake). Zero is ignored.
    fn set_mss(&mut self, smss: usize);
}

/// The initial window of RFC 6928 §2: min(10*SMSS, max(2*SMSS, 14600)).
pub(crate) fn initial_window(smss: usize) -> usize {
    smss.saturating_mul(10)
        .min(smss.saturating_mul(2).max(14_600))
}

/// The congestion controller of one connection: enum dispatch over the algorithms.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Cc {
    Cubic(Cubic),
    NewReno(NewReno),
}

impl Cc {
    /// A controller running `algorithm` for a sender MSS of `smss`.
    pub(crate) fn new(algorithm: CongestionAlgorithm, smss: usize) -> Self {
        match algorithm {
            CongestionAlgorithm::Cubic => Cc::Cubic(Cubic::new(smss)),
            CongestionAlgorithm::NewReno => Cc::NewReno(NewReno::new(smss)),
        }
    }

    /// Which algorithm this is.
    #[cfg(test)]
    pub(crate) fn algorithm(&self) -> CongestionAlgorithm {
        match self {
            Cc::Cubic(_) => CongestionAlgorithm::Cubic,
            Cc::NewReno(_) => CongestionAlgorithm::NewReno,
        }
    }
}

/// Forward every trait method to the algorithm inside.
macro_rules! dispatch {
    ($self:ident, $c:ident => $e:expr) => {
        match $self {
            Cc::Cubic($c) => $e,
            Cc::NewReno($c) => $e,
        }
    };
}

impl CongestionControl for Cc {
    #[inline]
    fn cwnd(&self) -> usize {
        dispatch!(self, c => c.cwnd())
    }
    #[inline]
    fn ssthresh(&self) -> usize {
        dispatch!(self, c => c.ssthresh())
    }
    #[inline]
    fn on_ack(&mut self, ack: &AckSample) {
        dispatch!(self, c => c.on_ack(ack))
    }
    #[inline]
    fn on_app_limited_ack(&mut self, now: Instant) {
        dispatch!(self, c => c.on_app_limited_ack(now))
    }
    #[inline]
    fn on_congestion(&mut self, flight_size: usize, now: Instant) {
        dispatch!(self, c => c.on_congestion(flight_size, now))
    }
    #[inline]
    fn on_recovery_end(&mut self, now: Instant) {
        dispatch!(self, c => c.on_recovery_end(now))
    }
    #[inline]
    fn on_rto(&mut self, flight_size: usize, first: bool, now: Instant) {
        dispatch!(self, c => c.on_rto(flight_size, first, now))
    }
    #[inline]
    fn undo(&mut self, now: Instant) {
        dispatch!(self, c => c.undo(now))
    }
    #[inline]
    fn on_idle_restart(&mut self, now: Instant) {
        dispatch!(self, c => c.on_idle_restart(now))
    }
    #[inline]
    fn set_mss(&mut self, smss: usize) {
        dispatch!(self, c => c.set_mss(smss))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn initial_window_per_rfc6928() {
        assert_eq!(initial_window(1460), 14_600);
        assert_eq!(initial_window(536), 5_360);
        assert_eq!(initial_window(1000), 10_000);
        assert_eq!(initial_window(2000), 14_600);
        assert_eq!(initial_window(8960), 17_920);
        assert_eq!(initial_window(usize::MAX), usize::MAX);
    }

    #[test]
    fn names_round_trip() {
        for a in CongestionAlgorithm::ALL {
            assert_eq!(CongestionAlgorithm::from_name(a.name()), Some(a));
            assert_eq!(Cc::new(a, 1460).algorithm(), a);
        }
        assert_eq!(
            CongestionAlgorithm::from_name("NewReno"),
            Some(CongestionAlgorithm::NewReno)
        );
        assert_eq!(
            CongestionAlgorithm::from_name("CUBIC"),
            Some(CongestionAlgorithm::Cubic)
        );
        assert_eq!(CongestionAlgorithm::from_name("bbr"), None);
        assert_eq!(CongestionAlgorithm::default(), CongestionAlgorithm::Cubic);
    }

    proptest::proptest! {
        /// `on_app_limited_ack` leaves every algorithm exactly as `on_ack` of an
        /// application-limited sample that delivered data does, through random runs of
        /// ACKs (limited and not), losses, timeouts and undos that take the algorithms
        /// through slow start, congestion avoidance and paused CUBIC epochs, and it
        /// never moves the window. (CUBIC's `on_ack` hands such a sample to
        /// `on_app_limited_ack`, so for CUBIC the first part holds the two entry points
        /// together; the second is the independent check.)
        #[test]
        fn app_limited_ack_is_on_ack_of_such_a_sample(
            steps in proptest::collection::vec(
                (0u8..8, 1usize..4000, 0u64..50_000, proptest::option::of(1u64..400_000)),
                1..120,
            ),
        ) {
            for algorithm in CongestionAlgorithm::ALL {
                let mut full = Cc::new(algorithm, 1460);
                let mut short = full.clone();
                let mut now = Instant::ZERO;
                let mut una = SeqNum(1);
                for &(kind, bytes, gap_us, rtt_us) in &steps {
                    now = now.plus_micros(gap_us);
                    match kind {
                        0 => {
                            full.on_congestion(bytes * 10, now);
                            short.on_congestion(bytes * 10, now);
                        }
                        1 => {
                            full.on_rto(bytes * 10, bytes % 2 == 0, now);
                            short.on_rto(bytes * 10, bytes % 2 == 0, now);
                        }
                        2 => {
                            full.on_recovery_end(now);
                            short.on_recovery_end(now);
                            full.undo(now);
                            short.undo(now);
                        }
                        _ => {
                            una += bytes;
                            let sample = AckSample {
                                now,
                                delivered: bytes,
                                rtt_us,
                                srtt_us: rtt_us,
                                una,
                                snd_max: una + 20_000,
                                app_limited: kind >= 6,
                            };
                            full.on_ack(&sample);
                            if sample.app_limited {
                                // Independently of `on_ack`: the window is not validated
                                // (RFC 7661 §4.1): cwnd and ssthresh stay, and NewReno
                                // changes nothing at all.
                                let before = short.clone();
                                short.on_app_limited_ack(now);
                                proptest::prop_assert_eq!(short.cwnd(), before.cwnd());
                                proptest::prop_assert_eq!(short.ssthresh(), before.ssthresh());
                                if algorithm == CongestionAlgorithm::NewReno {
                                    proptest::prop_assert_eq!(&short, &before);
                                }
                            } else {
                                short.on_ack(&sample);
                            }
                        }
                    }
                    proptest::prop_assert_eq!(&full, &short);
                }
            }
        }
    }
}
