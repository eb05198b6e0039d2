//! Header prediction (Van Jacobson's, as Linux's `tcp_rcv_established` fast path): in
//! ESTABLISHED, the common segment is the next one in sequence, carrying only ACK (and
//! PSH), no SACK blocks, an acceptable timestamp, and either an
//! ACK of new data or in-order data (or both), while nothing unusual is going on (no
//! recovery, no duplicate ACKs, no SACKed, lost or retransmitted data, no persist
//! probing, no out-of-order data, no FIN waiting). For such a segment most of the
//! checks of §3.10.7.4 and of ACK processing (`ack.rs`) have a known outcome; the
//! short path here does exactly the work the general path would do for it and skips
//! the tests whose answer is known. Anything else takes the general path.
//!
//! Being an optimisation only, it must be observably identical to the general path:
//! `fast_path_tests.rs` runs random conversations with faults through pairs of
//! connections with the fast paths on and off and compares every output and every
//! part of their state.

use super::timer_table::Timer;
use super::{RxOutcome, State, Tcb};
use crate::tcp::pool::RingPool;
use crate::tcp::segment::Segment;
use crate::time::Instant;

// Segments the short path took on this thread (for the tests that compare the paths,
// to show it was taken).
#[cfg(test)]
thread_local! {
    pub(crate) static PREDICTED: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

impl Tcb {
    /// Process `seg` on the short path if it is the predicted segment; returns false
    /// (having changed nothing) if it is not, and the general path must take it.
    #[inline]
    pub(super) fn on_segment_predicted(
        &mut self,
        now: Instant,
        seg: &Segment,
        payload: &[u8],
        out: &mut RxOutcome,
        pool: &mut RingPool,
    ) -> bool {
        // ---- The prediction: every test below is one the general path would make
        // with a known outcome for such a segment. ----
        let flags = seg.flags;
        if self.state != State::Established
            || !flags.ack
            || flags.syn
            || flags.fin
            || flags.rst
            || seg.seq != self.rcv.nxt
            || seg.sack[0].is_some()
            || seg.payload_len != payload.len()
        {
            return false;
        }
        let len = payload.len();
        // Acceptable (§3.10.7.4 first check) with nothing to trim: at RCV.NXT and inside
        // the window (a bare ACK at RCV.NXT is acceptable even in a zero window).
        if len > self.rcv.window() {
            return false;
        }
        // PAWS (RFC 7323 §5.3) passes: SEG.TSval is not older than TS.Recent.
        let tsval = match (self.ts, seg.timestamp) {
            (Some(ts), Some((tsval, _))) if !ts.is_older(tsval) => Some(tsval),
            (Some(_), _) => return false,
            (None, _) => None,
        };
        // The ACK acknowledges new data (SND.UNA < SEG.ACK =< SND.MAX), or the segment
        // carries data and acknowledges nothing new (not a duplicate ACK, RFC 5681 §2).
        let ack = seg.ack;
        let advances = self.snd.una < ack;
        if advances {
            if ack > self.snd.max {
                return false;
            }
        } else if ack != self.snd.una || len == 0 {
            return false;
        }
        // RFC 5961 §5.2 range test, as `process_ack` makes it.
        if self.ack_too_old(ack) {
            return false;
        }
        if !self.snd.syn_acked || self.timers.is_armed(Timer::Persist) || !self.board.is_quiet() {
            return false;
        }
        let r = &self.recovery;
        if r.in_recovery
            || r.recover.is_some()
            || r.tlp.is_some()
            || r.cold.is_some()
            || r.dupacks != 0
        {
            return false;
        }
        if self.rcv.closed || self.rcv.fin.is_some() || self.rcv.buf.has_out_of_order() {
            return false;
        }

        // ---- What the general path does with it, in its order. ----
        #[cfg(test)]
        PREDICTED.with(|n| n.set(n.get() + 1));
        self.last_recv = now;
        self.keepalive_sent = 0;
        self.arm_keepalive(now);
        // TS.Recent (RFC 7323 §4.3): SEG.TSval is not older, so it is taken.
        if let (Some(ts), Some(tsval)) = (self.ts.as_mut(), tsval) {
            if seg.seq <= self.rcv.last_ack_sent {
                ts.recent = tsval;
                ts.recent_age = now;
            }
        }

        // ACK processing (`process_ack`): an acceptable ACK.
        self.snd.persist_probes = 0;
        let prior_una = self.snd.una;
        let rtt = if advances {
            self.ack_advance(now, seg, pool)
        } else {
            None
        };
        // `on_delivery`, with no SACK information, no duplicate ACK, nothing SACKed,
        // lost or retransmitted (the scoreboard stays quiet: a cumulative ACK only
        // removes records), no recovery, no probe and no undo pending.
        let acked = self.snd.una.since(prior_una);
        if acked > 0 {
            self.recovery.probes = 0;
            self.grow_window(now, prior_una, acked, rtt);
        }
        self.arm_tlp(now);
        // Window update (§3.10.7.4, SND.WL1/WL2 rule; SND.UNA =< SEG.ACK holds), after
        // `on_delivery` as in `process_ack`. The persist timer is not armed, so there is
        // no persist mode to leave.
        if self.snd.wl1 < seg.seq || (self.snd.wl1 == seg.seq && self.snd.wl2 <= ack) {
            let wnd = (seg.window as usize) << self.snd.wscale;
            self.snd.update_window(wnd, seg.seq, ack);
        }

        // Segment text (§3.10.7.4, seventh check): in order, nothing to trim.
        if len > 0 {
            self.receive_data(now, seg.seq, payload, seg, out, pool);
        }
        true
    }
}
