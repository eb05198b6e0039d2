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
use super::{ConnFlags, PendingOutput};
use super::{RxOutcome, State, Tcb};
use crate::tcp::pool::RingPool;
use crate::tcp::segment::{
    write_fixed_header, write_timestamp_block, Segment, TxSegment, ACK, MIN_HEADER_LEN, PSH,
    TS_BLOCK_LEN,
};
use crate::tcp::seq::SeqNum;
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
        if self.state != State::Established || seg.flags.fin || !self.next_in_sequence(seg, payload)
        {
            return false;
        }
        let len = payload.len();
        // Acceptable (§3.10.7.4 first check) with nothing to trim: at RCV.NXT and inside
        // the window (a bare ACK at RCV.NXT is acceptable even in a zero window).
        if len > self.rcv.window() {
            return false;
        }
        if !self.paws_passes(seg) {
            return false;
        }
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
        if !self.snd.syn_acked || !self.send_side_quiet() {
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
        if let (Some(ts), Some((tsval, _))) = (self.ts.as_mut(), seg.timestamp) {
            if seg.seq <= self.rcv.last_ack_sent {
                ts.recent = tsval;
                ts.recent_age = now;
            }
        }

        // ACK processing (`process_ack`): an acceptable ACK, then the window update
        // (§3.10.7.4) after `on_delivery` as in `process_ack`. The persist timer is not
        // armed, so there is no persist mode to leave.
        self.quiet_ack(now, seg, pool);
        self.window_update(seg);

        // Segment text (§3.10.7.4, seventh check): in order, nothing to trim.
        if len > 0 {
            if self.rcv.buf.readable_len() == 0 {
                self.deliver_in_order(len, out, pool);
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
    fn deliver_in_order(&mut self, len: usize, out: &mut RxOutcome, pool: &mut RingPool) {
        let fits = self.rcv.buf.storable(len, pool);
        if fits < len {
            pool.counters_mut().rcv_dropped += 1;
            self.pending.set(PendingOutput::ACK_NOW);
        }
        self.rcv.nxt += fits;
        out.deliver = Some((0, fits));
        self.delay_ack();
    }
}

impl Tcb {
    /// Nothing unusual going on in the send direction, which every short input path
    /// requires: no persist probing, a quiet scoreboard (nothing SACKed, lost or
    /// retransmitted), no recovery point, no loss probe out, no recovery, no undo
    /// pending, no duplicate ACKs.
    #[inline(always)]
    pub(super) fn send_side_quiet(&self) -> bool {
        let f = self.flight();
        let r = &self.recovery;
        !self.timers.is_armed(Timer::Persist)
            && f.board.is_quiet()
            && f.recover.is_none()
            && f.tlp.is_none()
            && !r.in_recovery
            && r.cold.is_none()
            && r.dupacks == 0
    }

    /// The shape header prediction starts from: an ACK, no SYN and no RST, at RCV.NXT,
    /// no SACK blocks, and all its payload at hand. (The handshake's and the FIN's
    /// short paths test the same with their own extra conditions in one expression:
    /// through this function the connection rate measured 64 instructions worse.)
    #[inline(always)]
    pub(super) fn next_in_sequence(&self, seg: &Segment, payload: &[u8]) -> bool {
        let flags = seg.flags;
        flags.ack
            && !flags.syn
            && !flags.rst
            && seg.seq == self.rcv.nxt
            && seg.sack[0].is_none()
            && seg.payload_len == payload.len()
    }

    /// PAWS (RFC 7323 §5.3) passes: SEG.TSval is not older than TS.Recent, or the
    /// connection does not use timestamps.
    #[inline(always)]
    pub(super) fn paws_passes(&self, seg: &Segment) -> bool {
        match (self.ts, seg.timestamp) {
            (Some(ts), Some((tsval, _))) => !ts.is_older(tsval),
            (Some(_), None) => false,
            (None, _) => true,
        }
    }

    /// After a segment with data (or a FIN) went out: the retransmission and loss-probe
    /// timers, unless they run already. `new_data` when it was new data in ESTABLISHED
    /// within the peer's window ([`arm_tlp_after_send`](Self::arm_tlp_after_send)).
    #[inline(always)]
    pub(super) fn arm_send_timers(&mut self, now: Instant, new_data: bool) {
        if !self.timers.is_armed(Timer::Rto) {
            self.arm(Timer::Rto, now.plus_micros(self.rtt.rto_us()));
        }
        if !self.timers.is_armed(Timer::Tlp) {
            if new_data {
                self.arm_tlp_after_send(now);
            } else {
                self.arm_tlp(now);
            }
        }
    }

    /// `process_ack` and `on_delivery` for the acceptable ACK of `seg` (SND.UNA =<
    /// SEG.ACK =< SND.MAX) on a connection whose send side is quiet
    /// ([`send_side_quiet`](Self::send_side_quiet)), with no SACK information and no
    /// duplicate ACK: SND.UNA advances (the RTT sample with it), the window grows by
    /// what was delivered (the scoreboard stays quiet: a cumulative ACK only removes
    /// records), the loss-probe timer is set. What the short input paths share; the
    /// window update is each one's, in its place.
    #[inline(always)]
    pub(super) fn quiet_ack(&mut self, now: Instant, seg: &Segment, pool: &mut RingPool) {
        self.snd.persist_probes = 0;
        let prior_una = self.snd.una;
        let rtt = if prior_una < seg.ack {
            self.ack_advance(now, seg, pool)
        } else {
            None
        };
        let acked = self.snd.una.since(prior_una);
        if acked > 0 {
            self.recovery.probes = 0;
            self.grow_window(now, prior_una, acked, rtt);
        }
        if self.snd.una == self.snd.max {
            // All of it acknowledged: no probe to arm (`arm_tlp` would only stop it).
            self.timers.stop(Timer::Tlp);
        } else {
            self.arm_tlp(now);
        }
    }

    /// The window update of §3.10.7.4 (the SND.WL1/WL2 rule) for `seg`, whose ACK is
    /// acceptable.
    #[inline(always)]
    pub(super) fn window_update(&mut self, seg: &Segment) {
        let (wl1, wl2) = (self.snd.wl1, self.snd.wl2);
        if wl1 < seg.seq || (wl1 == seg.seq && wl2 <= seg.ack) {
            let wnd = (seg.window as usize) << self.snd.wscale;
            self.snd.update_window(wnd, seg.seq, seg.ack);
        }
    }
}

/// The segment [`Tcb::poll_transmit_predicted`] hands back by value: an ACK in
/// ESTABLISHED, with new data or without, no control bit but PSH, no SACK blocks, and
/// the timestamps option or no option at all. A quarter of a [`TxSegment`], and its
/// header has one layout (see [`PredictedSegment::write_header`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PredictedSegment {
    /// SEG.SEQ.
    pub seq: SeqNum,
    /// SEG.ACK.
    pub ack: SeqNum,
    /// The window field as sent (already scaled down).
    pub window: u16,
    /// PSH bit.
    pub psh: bool,
    /// (TSval, TSecr), RFC 7323.
    pub timestamp: Option<(u32, u32)>,
    /// Where the payload starts in the send buffer, from its first unacknowledged byte.
    pub payload_offset: u32,
    /// Bytes of payload (at most one MSS).
    pub payload_len: u32,
}

impl From<PredictedSegment> for TxSegment {
    fn from(p: PredictedSegment) -> TxSegment {
        TxSegment {
            seq: p.seq,
            ack: Some(p.ack),
            psh: p.psh,
            window: p.window,
            timestamp: p.timestamp,
            payload_offset: p.payload_offset as usize,
            payload_len: p.payload_len as usize,
            ..Default::default()
        }
    }
}

impl PredictedSegment {
    /// Length of its TCP header: 20 bytes, and 12 more with timestamps.
    #[inline(always)]
    pub fn header_len(&self) -> usize {
        if self.timestamp.is_some() {
            MIN_HEADER_LEN + TS_BLOCK_LEN
        } else {
            MIN_HEADER_LEN
        }
    }

    /// Write the TCP header into `buf` (exactly [`header_len`](Self::header_len) bytes)
    /// with a zero checksum: the bytes [`TxSegment::write_header`] writes for the same
    /// segment, without its general option and flag logic.
    #[inline(always)]
    pub fn write_header(&self, buf: &mut [u8], src_port: u16, dst_port: u16) {
        let (fixed, options) = buf.split_at_mut(MIN_HEADER_LEN);
        let fixed: &mut [u8; MIN_HEADER_LEN] = fixed.try_into().expect("20-byte TCP header");
        let hl = MIN_HEADER_LEN + options.len();
        let bits = ACK | if self.psh { PSH } else { 0 };
        let ports = [src_port, dst_port];
        write_fixed_header(fixed, ports, self.seq.0, self.ack.0, hl, bits, self.window);
        if let (Some((tsval, tsecr)), Some(o)) =
            (self.timestamp, options.first_chunk_mut::<TS_BLOCK_LEN>())
        {
            write_timestamp_block(o, tsval, tsecr);
        }
    }
}

/// What [`Tcb::transmit_predicted`] decided.
pub(super) enum Prediction {
    /// Nothing to send.
    Nothing,
    /// This one segment.
    Send(PredictedSegment),
    /// Not the common case: the general path decides.
    General,
}

impl Tcb {
    /// `poll_transmit` for the common case in ESTABLISHED: nothing owed but new data
    /// that fits one segment and both windows (or no data, and perhaps an ACK), no
    /// recovery, nothing lost, no probe, no RST, no D-SACK, no SACK blocks to report, no
    /// FIN. Returns [`Prediction::General`] (having changed nothing) when the general
    /// path must decide.
    #[inline]
    pub(super) fn transmit_predicted(&mut self, now: Instant) -> Prediction {
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
            || (self.flags.has(ConnFlags::SACK_OK) && self.rcv.buf.has_out_of_order())
        {
            return Prediction::General;
        }
        let avail = self.snd.unsent_data();
        if avail == 0 {
            // `send_new` finds nothing to send; nothing is blocked; an ACK owed goes
            // bare (`push_bare_ack`).
            self.cwnd_limited = false;
            if !self.pending.has(PendingOutput::ACK_NOW) {
                return Prediction::Nothing;
            }
            return Prediction::Send(self.bare_ack(now));
        }
        // New data from SND.MAX on (not after a timeout rewound SND.NXT), with no
        // restart after idle (RFC 5681 §4.1) due, all of it in one segment (with no
        // SACK blocks to carry, Eff.snd.MSS is all payload: `max_payload`).
        if self.snd.nxt != self.snd.max
            || (self.snd.nxt == self.snd.una
                && now.micros_since(self.last_send) > self.rtt.rto_us())
        {
            return Prediction::General;
        }
        if avail > self.snd.mss() || avail > self.rwnd_room().min(self.cc_room()) {
            return Prediction::General;
        }
        // `poll_transmit` took a flight block for the unsent data (`start_flight`).
        debug_assert!(self.flight.is_some());
        // `send_new`: neither window holds it back, and after it nothing is left.
        self.cwnd_limited = false;
        // `send_segment_at` for new data at SND.NXT = SND.MAX without a FIN.
        let seq = self.snd.nxt;
        let offset = seq.since(self.snd.data_start());
        let psh = offset + avail == self.snd.buf.len();
        let seg = self.predicted_segment(seq, psh, offset, avail, now);
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
            // New data at SND.NXT = SND.MAX: past every record.
            flight.board.on_transmit_new(seq, end, now);
        }
        self.last_send = now;
        self.arm_send_timers(now, true);
        Prediction::Send(seg)
    }

    /// `push_bare_ack` with no D-SACK and no SACK blocks: the ACK owed, alone, at
    /// SND.MAX, or at the right edge of the peer's window if that is below it.
    #[inline(always)]
    pub(super) fn bare_ack(&mut self, now: Instant) -> PredictedSegment {
        let wnd_end = self.snd.una + self.snd.wnd();
        let seq = if self.snd.max > wnd_end {
            wnd_end
        } else {
            self.snd.max
        };
        self.predicted_segment(seq, false, 0, 0, now)
    }

    /// The predicted segment at `seq` with `len` bytes from `offset` of the send
    /// buffer, advertised (`advertise` for an ACK without SACK blocks).
    #[inline(always)]
    fn predicted_segment(
        &mut self,
        seq: SeqNum,
        psh: bool,
        offset: usize,
        len: usize,
        now: Instant,
    ) -> PredictedSegment {
        let (window, timestamp) = self.advertise_window(false, now);
        self.ack_sent();
        PredictedSegment {
            seq,
            ack: self.rcv.nxt,
            window,
            psh,
            timestamp,
            // The send buffer holds less than 4 GiB (its head and length are 32-bit).
            payload_offset: offset as u32,
            payload_len: len as u32,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// The predicted segment's header is byte for byte the one the general writer
        /// makes for the same segment.
        #[test]
        fn predicted_header_is_the_general_one(
            seq: u32, ack: u32, window: u16, psh: bool,
            timestamp: Option<(u32, u32)>, len in 0u32..1500, ports: (u16, u16),
        ) {
            let p = PredictedSegment {
                seq: SeqNum(seq),
                ack: SeqNum(ack),
                window,
                psh,
                timestamp,
                payload_offset: 0,
                payload_len: len,
            };
            let general = TxSegment::from(p);
            prop_assert_eq!(p.header_len(), general.header_len());
            let mut a = [0xa5u8; 32];
            let mut b = [0x5au8; 32];
            p.write_header(&mut a[..p.header_len()], ports.0, ports.1);
            general.write_header(&mut b[..p.header_len()], ports.0, ports.1);
            prop_assert_eq!(&a[..p.header_len()], &b[..p.header_len()]);
        }
    }
}
