//! Congestion control: the [`CongestionControl`] trait the connection drives, NewReno
//! (RFC 5681 slow start and congestion avoidance, RFC 6582 fast recovery) with the
//! initial window of RFC 6928, and the [`Cc`] enum that dispatches without a vtable so
//! other algorithms (CUBIC, RFC 9438) can sit beside NewReno.
//!
//! The connection decides *when* each event happens (duplicate-ACK counting, `recover`,
//! partial versus full ACKs); an algorithm only decides what happens to `cwnd` and
//! `ssthresh`. All quantities are bytes.

use crate::time::Instant;

/// "Arbitrarily high" initial ssthresh (RFC 5681 §3.1), with room left so that adding to
/// it never overflows.
pub(crate) const INITIAL_SSTHRESH: usize = usize::MAX / 2;

/// Upper bound on cwnd, so that growth saturates instead of overflowing.
const MAX_CWND: usize = usize::MAX / 2;

/// What the connection tells its congestion controller.
pub(crate) trait CongestionControl {
    fn cwnd(&self) -> usize;
    fn ssthresh(&self) -> usize;
    /// New data acknowledged outside fast recovery (RFC 5681 §3.1: slow start with
    /// appropriate byte counting cwnd += min(acked, SMSS); congestion avoidance ~ +SMSS
    /// per RTT, byte counted).
    fn on_ack(&mut self, acked: usize, now: Instant);
    /// Third duplicate ACK: enter fast recovery (RFC 6582 §3.2 step 2:
    /// ssthresh = max(flight/2, 2*SMSS), cwnd = ssthresh + 3*SMSS).
    fn on_enter_recovery(&mut self, flight_size: usize, now: Instant);
    /// Further duplicate ACK during recovery (cwnd += SMSS).
    fn on_dup_ack_in_recovery(&mut self);
    /// Partial ACK during recovery (RFC 6582 §3.2 step 5: deflate by acked, add back
    /// SMSS if acked >= SMSS).
    fn on_partial_ack(&mut self, acked: usize);
    /// Full ACK ends recovery (RFC 6582 §3.2 step 3:
    /// cwnd = min(ssthresh, max(flight, SMSS) + SMSS)).
    fn on_exit_recovery(&mut self, flight_size: usize);
    /// Retransmission timeout (RFC 5681 §3.1 eq. 4: ssthresh = max(flight/2, 2*SMSS),
    /// cwnd = 1 SMSS (loss window)).
    fn on_rto(&mut self, flight_size: usize, now: Instant);
    /// Restart after idle (RFC 5681 §4.1): cwnd = min(cwnd, restart window = IW).
    fn on_idle_restart(&mut self);
    /// The sender's MSS changed (set once after the handshake). Zero is ignored.
    fn set_mss(&mut self, smss: usize);
}

/// The initial window of RFC 6928 §2: min(10*SMSS, max(2*SMSS, 14600)).
pub(crate) fn initial_window(smss: usize) -> usize {
    smss.saturating_mul(10)
        .min(smss.saturating_mul(2).max(14_600))
}

/// NewReno: RFC 5681 with the fast-recovery modification of RFC 6582.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct NewReno {
    smss: usize,
    cwnd: usize,
    ssthresh: usize,
    /// Bytes acknowledged in congestion avoidance not yet turned into cwnd growth
    /// (RFC 5681 §3.1 byte counting; RFC 3465 §2.1).
    bytes_acked: usize,
}

impl NewReno {
    /// A controller for a sender whose maximum segment size is `smss` (0 is treated as
    /// 1), starting at the initial window in slow start.
    pub(crate) fn new(smss: usize) -> Self {
        let smss = smss.max(1);
        NewReno {
            smss,
            cwnd: initial_window(smss),
            ssthresh: INITIAL_SSTHRESH,
            bytes_acked: 0,
        }
    }

    #[cfg(test)]
    pub(crate) fn smss(&self) -> usize {
        self.smss
    }

    /// RFC 5681 eq. 4 / RFC 6582 step 2: half the flight, at least two segments.
    fn halved(&self, flight_size: usize) -> usize {
        (flight_size / 2).max(self.smss.saturating_mul(2))
    }
}

impl CongestionControl for NewReno {
    fn cwnd(&self) -> usize {
        self.cwnd
    }

    fn ssthresh(&self) -> usize {
        self.ssthresh
    }

    fn on_ack(&mut self, acked: usize, _now: Instant) {
        if acked == 0 {
            return;
        }
        if self.cwnd < self.ssthresh {
            // §3.1 slow start with appropriate byte counting (RFC 3465 §2.3, L = 2*SMSS):
            // a delayed ACK covers two segments, so slow start still doubles cwnd per
            // RTT, while a stretch ACK (or ACK division by a misbehaving receiver) cannot
            // produce a burst larger than two segments.
            self.cwnd = self
                .cwnd
                .saturating_add(acked.min(2 * self.smss))
                .min(MAX_CWND);
            self.bytes_acked = 0;
        } else {
            // §3.1 congestion avoidance with byte counting: one SMSS per cwnd of bytes
            // acknowledged, i.e. about one SMSS per RTT.
            self.bytes_acked = self.bytes_acked.saturating_add(acked);
            if self.bytes_acked >= self.cwnd {
                self.bytes_acked -= self.cwnd;
                self.cwnd = self.cwnd.saturating_add(self.smss).min(MAX_CWND);
            }
        }
    }

    fn on_enter_recovery(&mut self, flight_size: usize, _now: Instant) {
        self.ssthresh = self.halved(flight_size);
        self.cwnd = self
            .ssthresh
            .saturating_add(self.smss.saturating_mul(3))
            .min(MAX_CWND);
        self.bytes_acked = 0;
    }

    fn on_dup_ack_in_recovery(&mut self) {
        // RFC 6582 §3.2 step 4 (RFC 5681 §3.2 step 4): each further duplicate means a
        // segment left the network.
        self.cwnd = self.cwnd.saturating_add(self.smss).min(MAX_CWND);
    }

    fn on_partial_ack(&mut self, acked: usize) {
        let mut cwnd = self.cwnd.saturating_sub(acked);
        if acked >= self.smss {
            cwnd = cwnd.saturating_add(self.smss);
        }
        // Never below one segment, or the retransmission of the next hole could stall.
        self.cwnd = cwnd.max(self.smss);
    }

    fn on_exit_recovery(&mut self, flight_size: usize) {
        // RFC 6582 §3.2 step 3, option 1 (with the "max(FlightSize, SMSS) + SMSS" guard
        // against a burst when the flight is nearly empty).
        self.cwnd = self
            .ssthresh
            .min(flight_size.max(self.smss).saturating_add(self.smss));
        self.bytes_acked = 0;
    }

    fn on_rto(&mut self, flight_size: usize, _now: Instant) {
        self.ssthresh = self.halved(flight_size);
        // Loss window (RFC 5681 §3.1): one segment, then slow start again.
        self.cwnd = self.smss;
        self.bytes_acked = 0;
    }

    fn on_idle_restart(&mut self) {
        self.cwnd = self.cwnd.min(initial_window(self.smss));
        self.bytes_acked = 0;
    }

    fn set_mss(&mut self, smss: usize) {
        if smss == 0 || smss == self.smss {
            return;
        }
        let old_iw = initial_window(self.smss);
        if self.cwnd == old_iw && self.ssthresh == INITIAL_SSTHRESH {
            // Nothing sent yet that changed the window: start from the IW for this MSS.
            self.cwnd = initial_window(smss);
        } else {
            // Keep the window's size in segments (as a packet-counting stack would).
            let segments = self.cwnd.div_ceil(self.smss).max(1);
            self.cwnd = segments.saturating_mul(smss).min(MAX_CWND);
            if self.ssthresh != INITIAL_SSTHRESH {
                self.ssthresh = self.ssthresh.max(smss.saturating_mul(2));
            }
        }
        self.smss = smss;
    }
}

/// The congestion controller of one connection: enum dispatch over the algorithms.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Cc {
    NewReno(NewReno),
}

impl Cc {
    /// NewReno for a sender MSS of `smss`.
    #[cfg(test)]
    pub(crate) fn new_reno(smss: usize) -> Self {
        Cc::NewReno(NewReno::new(smss))
    }

    /// The sender MSS the window is counted in.
    #[cfg(test)]
    pub(crate) fn smss(&self) -> usize {
        match self {
            Cc::NewReno(c) => c.smss(),
        }
    }
}

impl CongestionControl for Cc {
    #[inline]
    fn cwnd(&self) -> usize {
        match self {
            Cc::NewReno(c) => c.cwnd(),
        }
    }
    #[inline]
    fn ssthresh(&self) -> usize {
        match self {
            Cc::NewReno(c) => c.ssthresh(),
        }
    }
    #[inline]
    fn on_ack(&mut self, acked: usize, now: Instant) {
        match self {
            Cc::NewReno(c) => c.on_ack(acked, now),
        }
    }
    #[inline]
    fn on_enter_recovery(&mut self, flight_size: usize, now: Instant) {
        match self {
            Cc::NewReno(c) => c.on_enter_recovery(flight_size, now),
        }
    }
    #[inline]
    fn on_dup_ack_in_recovery(&mut self) {
        match self {
            Cc::NewReno(c) => c.on_dup_ack_in_recovery(),
        }
    }
    #[inline]
    fn on_partial_ack(&mut self, acked: usize) {
        match self {
            Cc::NewReno(c) => c.on_partial_ack(acked),
        }
    }
    #[inline]
    fn on_exit_recovery(&mut self, flight_size: usize) {
        match self {
            Cc::NewReno(c) => c.on_exit_recovery(flight_size),
        }
    }
    #[inline]
    fn on_rto(&mut self, flight_size: usize, now: Instant) {
        match self {
            Cc::NewReno(c) => c.on_rto(flight_size, now),
        }
    }
    #[inline]
    fn on_idle_restart(&mut self) {
        match self {
            Cc::NewReno(c) => c.on_idle_restart(),
        }
    }
    #[inline]
    fn set_mss(&mut self, smss: usize) {
        match self {
            Cc::NewReno(c) => c.set_mss(smss),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MSS: usize = 1460;
    const T: Instant = Instant::ZERO;

    #[test]
    fn initial_window_per_rfc6928() {
        assert_eq!(initial_window(1460), 14_600);
        assert_eq!(initial_window(536), 5_360);
        assert_eq!(initial_window(1000), 10_000);
        assert_eq!(initial_window(2000), 14_600);
        assert_eq!(initial_window(8960), 17_920);
        assert_eq!(initial_window(usize::MAX), usize::MAX);
        let c = NewReno::new(MSS);
        assert_eq!(c.cwnd(), 14_600);
        assert_eq!(c.ssthresh(), INITIAL_SSTHRESH);
    }

    #[test]
    fn slow_start_grows_by_at_most_two_smss_per_ack() {
        let mut c = NewReno::new(MSS);
        c.on_ack(MSS, T);
        assert_eq!(c.cwnd(), 14_600 + MSS);
        c.on_ack(500, T);
        assert_eq!(c.cwnd(), 14_600 + MSS + 500);
        // A delayed ACK for two segments adds both.
        c.on_ack(2 * MSS, T);
        assert_eq!(c.cwnd(), 14_600 + 3 * MSS + 500);
        // A stretch ACK of 4 segments adds only two (RFC 3465 L = 2*SMSS).
        c.on_ack(4 * MSS, T);
        assert_eq!(c.cwnd(), 14_600 + 5 * MSS + 500);
        c.on_ack(0, T);
        assert_eq!(c.cwnd(), 14_600 + 5 * MSS + 500);
    }

    #[test]
    fn congestion_avoidance_adds_one_smss_per_window_of_acked_bytes() {
        let mut c = NewReno::new(MSS);
        // Move to congestion avoidance with cwnd = 10 segments.
        c.on_rto(20 * MSS, T);
        assert_eq!(c.ssthresh(), 10 * MSS);
        for _ in 0..9 {
            c.on_ack(MSS, T);
        }
        assert_eq!(c.cwnd(), 10 * MSS);
        // One full window of ACKs, segment by segment: +1 SMSS exactly at the end.
        for i in 0..10 {
            assert_eq!(c.cwnd(), 10 * MSS, "ack {i}");
            c.on_ack(MSS, T);
        }
        assert_eq!(c.cwnd(), 11 * MSS);
        // The next window is 11 segments long.
        for _ in 0..10 {
            c.on_ack(MSS, T);
        }
        assert_eq!(c.cwnd(), 11 * MSS);
        c.on_ack(MSS, T);
        assert_eq!(c.cwnd(), 12 * MSS);
    }

    #[test]
    fn fast_recovery_entry_inflation_partial_ack_and_exit() {
        let mut c = NewReno::new(MSS);
        c.on_enter_recovery(20 * MSS, T);
        assert_eq!(c.ssthresh(), 10 * MSS);
        assert_eq!(c.cwnd(), 13 * MSS);
        c.on_dup_ack_in_recovery();
        c.on_dup_ack_in_recovery();
        assert_eq!(c.cwnd(), 15 * MSS);
        // Partial ACK of 3 segments: deflate by 3, add back one.
        c.on_partial_ack(3 * MSS);
        assert_eq!(c.cwnd(), 13 * MSS);
        // Partial ACK of less than a segment: no add-back.
        c.on_partial_ack(100);
        assert_eq!(c.cwnd(), 13 * MSS - 100);
        // A huge partial ACK cannot take cwnd below one segment.
        c.on_partial_ack(100 * MSS);
        assert_eq!(c.cwnd(), MSS);
        // Full ACK: min(ssthresh, max(flight, SMSS) + SMSS).
        c.on_exit_recovery(4 * MSS);
        assert_eq!(c.cwnd(), 5 * MSS);
        c.on_exit_recovery(50 * MSS);
        assert_eq!(c.cwnd(), 10 * MSS);
        c.on_exit_recovery(0);
        assert_eq!(c.cwnd(), 2 * MSS);
        assert_eq!(c.ssthresh(), 10 * MSS);
    }

    #[test]
    fn small_flight_halves_to_at_least_two_segments() {
        let mut c = NewReno::new(MSS);
        c.on_enter_recovery(MSS, T);
        assert_eq!(c.ssthresh(), 2 * MSS);
        assert_eq!(c.cwnd(), 5 * MSS);
    }

    #[test]
    fn rto_collapses_to_loss_window_then_slow_starts() {
        let mut c = NewReno::new(MSS);
        for _ in 0..30 {
            c.on_ack(MSS, T);
        }
        c.on_rto(30 * MSS, T);
        assert_eq!(c.cwnd(), MSS);
        assert_eq!(c.ssthresh(), 15 * MSS);
        c.on_ack(MSS, T);
        assert_eq!(c.cwnd(), 2 * MSS);
        c.on_rto(0, T);
        assert_eq!(c.cwnd(), MSS);
        assert_eq!(c.ssthresh(), 2 * MSS);
    }

    #[test]
    fn idle_restart_caps_cwnd_at_initial_window() {
        let mut c = NewReno::new(MSS);
        for _ in 0..20 {
            c.on_ack(MSS, T);
        }
        assert_eq!(c.cwnd(), 30 * MSS);
        c.on_idle_restart();
        assert_eq!(c.cwnd(), 14_600);
        c.on_rto(4 * MSS, T);
        c.on_idle_restart();
        assert_eq!(c.cwnd(), MSS, "a smaller cwnd is kept");
    }

    #[test]
    fn set_mss_before_data_uses_the_new_initial_window() {
        let mut c = Cc::new_reno(536);
        assert_eq!(c.cwnd(), 5_360);
        c.set_mss(1460);
        assert_eq!(c.cwnd(), 14_600);
        c.set_mss(8960);
        assert_eq!(c.cwnd(), 17_920);
        c.on_ack(8960, T);
        assert_eq!(c.cwnd(), 17_920 + 8960);
        // After growth the window keeps its size in segments.
        c.set_mss(1000);
        assert_eq!(c.cwnd(), 3 * 1000);
        c.set_mss(0); // nonsense: ignored
        assert_eq!(c.cwnd(), 3000);
        assert_eq!(c.smss(), 1000);
    }

    #[test]
    fn enum_dispatch_delegates() {
        let mut c = Cc::new_reno(MSS);
        let mut n = NewReno::new(MSS);
        c.on_enter_recovery(40 * MSS, T);
        n.on_enter_recovery(40 * MSS, T);
        c.on_dup_ack_in_recovery();
        n.on_dup_ack_in_recovery();
        c.on_partial_ack(2 * MSS);
        n.on_partial_ack(2 * MSS);
        assert_eq!(c, Cc::NewReno(n.clone()));
        assert_eq!((c.cwnd(), c.ssthresh()), (n.cwnd(), n.ssthresh()));
    }

    #[test]
    fn growth_saturates_instead_of_overflowing() {
        let mut c = NewReno::new(usize::MAX / 4);
        for _ in 0..10 {
            c.on_ack(usize::MAX, T);
            c.on_dup_ack_in_recovery();
            c.on_enter_recovery(usize::MAX, T);
            c.on_partial_ack(usize::MAX / 4);
            c.on_exit_recovery(usize::MAX);
            c.on_rto(usize::MAX, T);
        }
        assert!(c.cwnd() <= usize::MAX / 2);
    }
}
