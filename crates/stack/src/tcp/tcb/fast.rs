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
//! The same goes for output: `transmit_predicted` sends the one new segment (or the bare
//! ACK) that `poll_transmit` would, when no recovery, probe, RST or FIN is pending.
//!
//! Being an optimisation only, it must be observably identical to the general path:
//! `fast_path_tests.rs` runs random conversations with faults through pairs of
//! connections with the fast paths on and off and compares every output and every
//! part of their state.

use super::timer_table::Timer;
use super::PendingOutput;
use super::{RxOutcome, State, Tcb};
use crate::tcp::pool::RingPool;
use crate::tcp::segment::{Segment, TxSegment};
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
    #[inline(always)]
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
        let f = self.flight();
        if !self.snd.syn_acked
            || self.timers.is_armed(Timer::Persist)
            || !f.board.is_quiet()
            || f.recover.is_some()
            || f.tlp.is_some()
        {
            return false;
        }
        let r = &self.recovery;
        if r.in_recovery || r.cold.is_some() || r.dupacks != 0 {
            return false;
        }
        if self.rcv.closed || self.rcv.fin_held || self.rcv.buf.has_out_of_order() {
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
            if self.rcv.buf.readable_len() == 0 {
                self.deliver_in_order(now, len, out, pool);
            } else {
                self.receive_data(now, seg.seq, payload, seg, out, pool);
            }
        }
        true
    }

    /// `receive_data` for `len` bytes at RCV.NXT while nothing is unread or held out
    /// of order and the application still reads: shown to it straight from the frame
    /// (as much as could be kept if it leaves some), then the delayed-ACK count.
    #[inline]
    fn deliver_in_order(
        &mut self,
        now: Instant,
        len: usize,
        out: &mut RxOutcome,
        pool: &mut RingPool,
    ) {
        let fits = self.rcv.buf.storable(len, pool);
        if fits < len {
            pool.counters_mut().rcv_dropped += 1;
            self.pending.set(PendingOutput::ACK_NOW);
        }
        self.rcv.nxt += fits;
        out.deliver = Some((0, fits));
        self.delay_ack(now);
    }
}

impl Tcb {
    /// `poll_transmit` for the common case in ESTABLISHED: nothing owed but new data
    /// that fits one segment and both windows (or no data, and perhaps an ACK), no
    /// recovery, nothing lost, no probe, no RST, no D-SACK, no FIN. Returns false
    /// (having changed nothing) when the general path must decide.
    #[inline]
    pub(super) fn transmit_predicted(&mut self, now: Instant, out: &mut Vec<TxSegment>) -> bool {
        let p = &self.pending;
        if self.state != State::Established
            || p.has(
                PendingOutput::RST
                    | PendingOutput::TLP
                    | PendingOutput::PROBE
                    | PendingOutput::KEEPALIVE_PROBE
                    | PendingOutput::DSACK,
            )
            || self.recovery.in_recovery
            || self.flight().board.lost_bytes() > 0
            || self.snd.fin_queued
        {
            return false;
        }
        let avail = self.snd.unsent_data();
        if avail == 0 {
            // `send_new` finds nothing to send; nothing is blocked; an ACK owed goes
            // bare.
            self.cwnd_limited = false;
            if self.pending.has(PendingOutput::ACK_NOW) {
                self.push_bare_ack(now, out);
            }
            return true;
        }
        // New data from SND.MAX on (not after a timeout rewound SND.NXT), with no
        // restart after idle (RFC 5681 §4.1) due, all of it in one segment.
        if self.snd.nxt != self.snd.max
            || (self.snd.nxt == self.snd.una
                && now.micros_since(self.last_send) > self.rtt.rto_us())
        {
            return false;
        }
        let max_payload = self.max_payload();
        if avail > max_payload || avail > self.rwnd_room().min(self.cc_room()) {
            return false;
        }
        // `poll_transmit` took a flight block for the unsent data (`start_flight`).
        debug_assert!(self.flight.is_some());
        // `send_new`: neither window holds it back, and after it nothing is left.
        self.cwnd_limited = false;
        // `send_segment_at` for new data at SND.NXT = SND.MAX without a FIN.
        let seq = self.snd.nxt;
        let offset = seq.since(self.snd.data_start());
        // Built where it is sent from (moving a built segment into `out` costs more).
        out.push(TxSegment {
            seq,
            ack: Some(self.rcv.nxt),
            psh: offset + avail == self.snd.buf.len(),
            payload_offset: offset,
            payload_len: avail,
            ..Default::default()
        });
        let seg = out.last_mut().expect("just pushed");
        self.advertise(seg, now);
        let end = seq + avail;
        self.snd.nxt = end;
        if self.snd.max == self.snd.una {
            self.snd.stall_from = now;
        }
        self.snd.max = end;
        if let Some(flight) = self.flight.as_deref_mut() {
            if flight.rtt_seq.is_none() {
                flight.rtt_seq = Some((end, now));
            }
            flight.board.on_transmit(seq, end, now);
        }
        self.last_send = now;
        if !self.timers.is_armed(Timer::Rto) {
            self.timers
                .set(Timer::Rto, now.plus_micros(self.rtt.rto_us()));
        }
        if !self.timers.is_armed(Timer::Tlp) {
            self.arm_tlp(now);
        }
        true
    }
}
