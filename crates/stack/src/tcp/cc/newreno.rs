//! NewReno: RFC 5681 slow start (with appropriate byte counting, RFC 3465) and
//! congestion avoidance, the RFC 5681 eq. 4 reduction to half the flight, and the
//! initial window of RFC 6928. Loss recovery itself (which segments to resend, how fast
//! to send during it) is the connection's: RFC 6675 and RFC 6937.

use super::{initial_window, window, AckSample, CongestionControl, INITIAL_SSTHRESH, MAX_CWND};
use crate::time::Instant;

/// NewReno: RFC 5681 with the reduction of RFC 6582 §3.2 step 2. Windows and sizes are
/// kept in 32 bits (see [`MAX_CWND`]).
#[derive(Debug, Clone, PartialEq, Eq)]
// `repr(C)` with `cwnd` and `ssthresh` first, as in `Cubic` (see there).
#[repr(C)]
pub(crate) struct NewReno {
    cwnd: u32,
    ssthresh: u32,
    smss: u32,
    /// Bytes acknowledged in congestion avoidance not yet turned into cwnd growth
    /// (RFC 5681 §3.1 byte counting; RFC 3465 §2.1).
    bytes_acked: u32,
    /// (cwnd, ssthresh) before the last reduction, for an undo.
    prior: Option<(u32, u32)>,
}

impl NewReno {
    /// A controller for a sender whose maximum segment size is `smss` (0 is treated as
    /// 1), starting at the initial window in slow start.
    pub(crate) fn new(smss: usize) -> Self {
        let smss = smss.clamp(1, MAX_CWND);
        NewReno {
            smss: window(smss),
            cwnd: window(initial_window(smss)),
            ssthresh: INITIAL_SSTHRESH as u32,
            bytes_acked: 0,
            prior: None,
        }
    }

    fn smss(&self) -> usize {
        self.smss as usize
    }

    /// RFC 5681 eq. 4 / RFC 6582 step 2: half the flight, at least two segments.
    fn halved(&self, flight_size: usize) -> u32 {
        window((flight_size / 2).max(self.smss().saturating_mul(2)))
    }
}

impl CongestionControl for NewReno {
    fn cwnd(&self) -> usize {
        self.cwnd as usize
    }

    fn ssthresh(&self) -> usize {
        self.ssthresh as usize
    }

    fn on_ack(&mut self, ack: &AckSample) {
        let acked = ack.delivered;
        if acked == 0 || ack.app_limited {
            // RFC 7661 §4.1: a window the sender did not use is not validated by ACKs.
            return;
        }
        let cwnd = self.cwnd as usize;
        if self.cwnd < self.ssthresh {
            // §3.1 slow start with appropriate byte counting (RFC 3465 §2.3, L = 2*SMSS):
            // a delayed ACK covers two segments, so slow start still doubles cwnd per
            // RTT, while a stretch ACK (or ACK division by a misbehaving receiver) cannot
            // produce a burst larger than two segments.
            self.cwnd = window(cwnd.saturating_add(acked.min(2 * self.smss())));
            self.bytes_acked = 0;
        } else {
            // §3.1 congestion avoidance with byte counting: one SMSS per cwnd of bytes
            // acknowledged, i.e. about one SMSS per RTT.
            let mut counted = (self.bytes_acked as usize).saturating_add(acked);
            if counted >= cwnd {
                counted -= cwnd;
                self.cwnd = window(cwnd.saturating_add(self.smss()));
            }
            self.bytes_acked = window(counted);
        }
    }

    #[inline]
    fn on_app_limited_ack(&mut self, _now: Instant) {
        // RFC 7661 §4.1: a window the sender did not use is not validated by ACKs.
    }

    fn on_congestion(&mut self, flight_size: usize, _now: Instant) {
        self.prior = Some((self.cwnd, self.ssthresh));
        self.ssthresh = self.halved(flight_size);
        self.cwnd = self.ssthresh;
        self.bytes_acked = 0;
    }

    fn on_recovery_end(&mut self, _now: Instant) {
        self.cwnd = window(self.ssthresh as usize);
        self.bytes_acked = 0;
    }

    fn on_rto(&mut self, flight_size: usize, first: bool, _now: Instant) {
        if first {
            self.prior = Some((self.cwnd, self.ssthresh));
            self.ssthresh = self.halved(flight_size);
        }
        // Loss window (RFC 5681 §3.1): one segment, then slow start again.
        self.cwnd = self.smss;
        self.bytes_acked = 0;
    }

    fn undo(&mut self, _now: Instant) {
        if let Some((cwnd, ssthresh)) = self.prior.take() {
            // As Linux does: never lower what has grown since.
            self.cwnd = self.cwnd.max(cwnd);
            self.ssthresh = self.ssthresh.max(ssthresh);
            self.bytes_acked = 0;
        }
    }

    fn on_idle_restart(&mut self, _now: Instant) {
        self.cwnd = self.cwnd.min(window(initial_window(self.smss())));
        self.bytes_acked = 0;
    }

    fn set_mss(&mut self, smss: usize) {
        let smss = smss.min(MAX_CWND);
        if smss == 0 || smss == self.smss() {
            return;
        }
        let old_iw = initial_window(self.smss());
        if self.cwnd as usize == old_iw && self.ssthresh as usize == INITIAL_SSTHRESH {
            // Nothing sent yet that changed the window: start from the IW for this MSS.
            self.cwnd = window(initial_window(smss));
        } else {
            // Keep the window's size in segments (as a packet-counting stack would).
            let segments = (self.cwnd as usize).div_ceil(self.smss()).max(1);
            self.cwnd = window(segments.saturating_mul(smss));
            if self.ssthresh as usize != INITIAL_SSTHRESH {
                self.ssthresh = self.ssthresh.max(window(smss.saturating_mul(2)));
            }
        }
        self.smss = window(smss);
    }
}

#[cfg(test)]
mod tests;
