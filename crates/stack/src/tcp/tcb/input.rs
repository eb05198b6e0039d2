//! Segment arrival (§3.10.7): the SYN-SENT rules, the checks of §3.10.7.4 in their
//! order (sequence, RST, SYN, ACK, text, FIN) with PAWS (RFC 7323 §5) and the RFC 5961
//! defences, received data and the peer's FIN. Each check is a step of its own, which
//! header prediction (`fast.rs`) calls too. ACK processing proper is in `ack.rs`.

use super::{ConnFlags, PendingOutput};
use std::time::Duration;

use super::deadlines::Timer;
use super::{CloseReason, RxOutcome, State, SynOptions, Tcb};
use crate::tcp::pool::RingPool;
use crate::tcp::segment::Segment;
use crate::tcp::seq::SeqNum;
use crate::time::Instant;

/// PAWS: TS.Recent older than this is no longer trusted (RFC 7323 §5.5).
const PAWS_IDLE: Duration = Duration::from_secs(24 * 24 * 3600);

impl Tcb {
    /// Process one incoming segment (§3.10.7). `payload` is the segment's data. Call
    /// [`poll_transmit_predicted`](Self::poll_transmit_predicted) after it (after the application had its
    /// say, for an answer to ride on): an ACK it leaves owed is sent there, or, when it
    /// may wait, the delayed-ACK timer is armed there.
    // Always inline: one caller, per segment; the segment stays where it was parsed.
    #[inline(always)]
    pub(crate) fn on_segment(
        &mut self,
        now: Instant,
        seg: &Segment,
        payload: &[u8],
        pool: &mut RingPool,
    ) -> RxOutcome {
        self.last_now = now;
        let mut out = RxOutcome::default();
        if self.cfg.header_prediction
            && self.on_segment_predicted(now, seg, payload, &mut out, pool)
        {
            return out;
        }
        match self.state {
            State::Closed | State::Listen => {}
            State::SynSent => self.on_segment_syn_sent(now, seg, pool),
            _ => self.on_segment_synchronized(now, seg, payload, &mut out, pool),
        }
        out
    }

    /// §3.10.7.3.
    fn on_segment_syn_sent(&mut self, now: Instant, seg: &Segment, pool: &mut RingPool) {
        if seg.flags.ack && (seg.ack <= self.snd.iss || seg.ack > self.snd.max) {
            if !seg.flags.rst {
                self.queue_rst(seg.ack, None);
            }
            return;
        }
        if seg.flags.rst {
            // RFC 5961 §3.2 leaves SYN-SENT as 9293 has it: only an acceptable ACK counts.
            if seg.flags.ack {
                self.finish(CloseReason::Refused);
            }
            return;
        }
        if !seg.flags.syn {
            return;
        }
        self.last_recv = now;
        self.rcv.irs = seg.seq;
        self.rcv.nxt = seg.seq + 1;
        // Our SYN offered its (unscaled) window before RCV.NXT was known.
        self.rcv.adv = self.rcv.nxt + self.rcv.syn_window();
        self.rcv.last_ack_sent = self.rcv.nxt;
        let offset = self.ts.map(|t| t.offset).unwrap_or(0);
        self.negotiate(&SynOptions::from(seg), offset, now);
        if seg.flags.ack {
            self.take_syn_ack(now, seg, pool);
        } else {
            // Simultaneous open (§3.5, figure 7): answer with SYN-ACK on the same ISS.
            self.snd.wnd = u32::from(seg.window);
            self.snd.max_wnd = self.snd.wnd;
            self.snd.wl1 = seg.seq;
            self.state = State::SynReceived;
            self.snd.nxt = self.snd.iss;
            self.pending.set(PendingOutput::SYN);
            self.timers.stop(Timer::Rto);
        }
    }

    /// The handshake is complete (§3.10.7.3, §3.10.7.4 fifth check): ESTABLISHED, or
    /// FIN-WAIT-1 straight away when the application has already closed.
    pub(super) fn enter_established(&mut self, now: Instant) {
        self.state = State::Established;
        self.events.connected = true;
        self.recovery.retries = 0;
        self.rtt.reset_backoff(&self.cfg.rto);
        self.timers.stop(Timer::Rto);
        self.arm_keepalive(now);
        if self.snd.fin_queued {
            self.state = State::FinWait1;
        }
    }

    /// Whether the connection's limit lets an ACK answer the invalid `seg` (out of
    /// window, failing PAWS, or challenged): at most one per `invalid_ack_interval`, as
    /// Linux's `tcp_oow_rate_limited`; a held-back answer is reported in `out`. A segment
    /// carrying data or a FIN (and no SYN) is always answered: its ACK (and D-SACK) is
    /// what the sender recovers with, and two stacks cannot loop on it.
    fn invalid_ack_allowed(&mut self, now: Instant, seg: &Segment, out: &mut RxOutcome) -> bool {
        if (seg.payload_len > 0 || seg.flags.fin) && !seg.flags.syn {
            return true;
        }
        let interval = self.cfg.invalid_ack_interval;
        if self
            .last_invalid_ack()
            .is_some_and(|last| now.saturating_duration_since(last) < interval)
        {
            out.invalid_ack_suppressed = true;
            return false;
        }
        self.timers.extra_mut().last_invalid_ack = Some(now);
        true
    }

    /// Answer an invalid segment with an ACK, unless the connection's limit holds it
    /// back.
    fn answer_invalid(&mut self, now: Instant, seg: &Segment, out: &mut RxOutcome) {
        if self.invalid_ack_allowed(now, seg, out) {
            self.pending.set(PendingOutput::ACK_NOW);
        }
    }

    /// RFC 5961: ask the engine for a challenge ACK (its global budget applies next),
    /// unless the connection's limit holds it back.
    pub(super) fn challenge(&mut self, now: Instant, seg: &Segment, out: &mut RxOutcome) {
        if self.invalid_ack_allowed(now, seg, out) {
            out.challenge_ack = true;
        }
    }

    /// PAWS (RFC 7323 §5.3): a segment other than a RST whose SEG.TSval is older than
    /// TS.Recent is dropped, while TS.Recent is still trusted (§5.5).
    #[inline]
    pub(super) fn paws_rejects(&self, now: Instant, seg: &Segment) -> bool {
        let (Some((tsval, _)), Some(ts)) = (seg.timestamp, &self.ts) else {
            return false;
        };
        ts.is_older(tsval)
            && !seg.flags.rst
            && now.saturating_duration_since(ts.recent_age) < PAWS_IDLE
    }

    /// Is the segment's sequence range acceptable (§3.10.7.4, first check)?
    ///
    /// One deviation, as in Linux (`tcp_sequence`) and BSD: a segment without data
    /// exactly at the right edge (SEG.SEQ = RCV.NXT + RCV.WND) is acceptable, but for a
    /// RST (RFC 5961 keeps those strictly inside). A peer
    /// that has sent up to our edge sends its bare ACKs from there; when the tail it
    /// sent is lost (or we could not store it), the strict test would discard the ACK
    /// information those carry. If both ends are in that state at once, each drops the
    /// other's ACKs and both time out (a state the simulation reaches under memory
    /// pressure).
    fn acceptable(&self, seg: &Segment) -> bool {
        let wnd = self.rcv.window();
        let len = seg.seg_len();
        match (len, wnd) {
            (0, 0) => seg.seq == self.rcv.nxt,
            (0, _) => {
                self.rcv.nxt.contains(wnd, seg.seq)
                    || (!seg.flags.rst && seg.seq == self.rcv.nxt + wnd)
            }
            (_, 0) => false,
            (_, _) => {
                self.rcv.nxt.contains(wnd, seg.seq)
                    || self.rcv.nxt.contains(wnd, seg.seq + (len - 1))
            }
        }
    }

    /// The general path of §3.10.7.4 for a synchronized state (or SYN-RECEIVED): its
    /// checks in their order, each a step of its own. Header prediction (`fast.rs`) goes
    /// through the same steps for the common segment.
    fn on_segment_synchronized(
        &mut self,
        now: Instant,
        seg: &Segment,
        payload: &[u8],
        out: &mut RxOutcome,
        pool: &mut RingPool,
    ) {
        if seg.flags.syn && self.on_syn_synchronized(now, seg, out, pool) {
            return;
        }
        // RFC 7323 §5.3: PAWS, before the sequence check.
        if self.paws_rejects(now, seg) {
            self.answer_invalid(now, seg, out);
            return;
        }

        // The segment as received, or a trimmed copy in the rare cases that change its
        // length or FIN: the common segment is not copied.
        let mut trimmed: Segment;
        let mut seg = seg;
        let mut payload = payload;
        if !self.acceptable(seg) {
            // Zero window: still take ACK information from a segment at RCV.NXT (§3.10.7.4
            // "special allowance"), but not its data.
            if self.rcv.window() == 0 && seg.seq == self.rcv.nxt && !seg.flags.rst {
                payload = &[];
                trimmed = *seg;
                trimmed.payload_len = 0;
                trimmed.flags.fin = false;
                seg = &trimmed;
                self.pending.set(PendingOutput::ACK_NOW);
            } else {
                self.on_unacceptable(now, seg, out);
                return;
            }
        }
        if seg.flags.rst {
            self.on_rst(now, seg, out);
            return;
        }
        if !seg.flags.ack {
            return;
        }
        let (seq, text, cut) = self.trim(seg.seq, payload);
        payload = text;
        if cut {
            // What lay beyond the window is gone, and the FIN with it.
            trimmed = *seg;
            trimmed.flags.fin = false;
            seg = &trimmed;
        }
        self.on_acceptable(now, seg);
        if self.state == State::SynReceived && !self.complete_handshake(now, seg) {
            return;
        }
        if !self.process_ack(now, seg, out, pool) {
            return;
        }
        // Segment text (§3.10.7.4, seventh check), in the states that still receive.
        if !payload.is_empty()
            && matches!(
                self.state,
                State::Established | State::FinWait1 | State::FinWait2
            )
        {
            self.receive_data(now, seq, payload, seg, out, pool);
        }
        self.on_fin(now, seq + payload.len(), seg);
    }

    /// A segment that fails the sequence check (§3.10.7.4, first check): dropped, and
    /// but for a RST answered with an ACK (rate-limited), with a D-SACK when it is
    /// entirely old data.
    fn on_unacceptable(&mut self, now: Instant, seg: &Segment, out: &mut RxOutcome) {
        if seg.flags.rst {
            return;
        }
        self.answer_invalid(now, seg, out);
        if seg.payload_len > 0 && seg.seq + seg.payload_len <= self.rcv.nxt {
            // Entirely old data: a duplicate (RFC 2883 §4 case 1).
            self.queue_dsack((seg.seq, seg.seq + seg.payload_len));
        }
        // TIME-WAIT (§3.10.7.4, eighth check): a retransmitted FIN is acknowledged again
        // and restarts the 2·MSL wait. Being a duplicate, it never passes the sequence
        // check, so it is recognised here.
        if self.state == State::TimeWait
            && seg.flags.fin
            && seg.seq + (seg.payload_len + 1) == self.rcv.nxt
        {
            self.arm(Timer::Linger, now + self.cfg.time_wait);
        }
    }

    /// RST (§3.10.7.4 second check, RFC 5961 §3.2): an exact match resets, anything
    /// else in the window is challenged.
    fn on_rst(&mut self, now: Instant, seg: &Segment, out: &mut RxOutcome) {
        if seg.seq != self.rcv.nxt {
            self.challenge(now, seg, out);
            return;
        }
        let reason = if self.state == State::SynReceived && self.flags.has(ConnFlags::ACTIVE_OPEN) {
            CloseReason::Refused
        } else {
            CloseReason::Reset
        };
        self.finish(reason);
    }

    /// Trim an acceptable segment's `payload` at `seq` to what lies from RCV.NXT to the
    /// right edge of the window (§3.10.7.4, "trimmed"): the part received before is
    /// reported in a D-SACK (RFC 2883 §4). Returns where the rest starts, the rest, and
    /// whether its end was cut off.
    fn trim<'p>(&mut self, seq: SeqNum, payload: &'p [u8]) -> (SeqNum, &'p [u8], bool) {
        let mut seq = seq;
        let mut payload = payload;
        if seq < self.rcv.nxt {
            let dup = self.rcv.nxt.since(seq).min(payload.len());
            if dup > 0 {
                self.queue_dsack((seq, seq + dup));
                self.pending.set(PendingOutput::ACK_NOW);
            }
            payload = &payload[dup..];
            seq += dup;
        }
        let room = (self.rcv.nxt + self.rcv.window()).since(seq);
        let cut = payload.len() > room;
        if cut {
            payload = &payload[..room];
        }
        (seq, payload, cut)
    }

    /// What every acceptable segment with an ACK does before its ACK is processed: the
    /// peer was heard from (the keepalive restarts), and TS.Recent takes SEG.TSval when
    /// the segment starts at or before the last ACK we sent (RFC 7323 §4.3).
    #[inline]
    pub(super) fn on_acceptable(&mut self, now: Instant, seg: &Segment) {
        self.last_recv = now;
        self.keepalive_sent = 0;
        self.arm_keepalive(now);
        if let (Some(ts), Some((tsval, _))) = (self.ts.as_mut(), seg.timestamp) {
            if seg.seq <= self.rcv.last_ack_sent {
                ts.update_recent(tsval, now);
            }
        }
    }

    /// SYN-RECEIVED (§3.10.7.4, fifth check): an ACK of our SYN completes the handshake
    /// and the ACK is processed on; any other is answered with a RST, and the segment is
    /// dropped (false).
    fn complete_handshake(&mut self, now: Instant, seg: &Segment) -> bool {
        if !self.acks_our_syn(seg) {
            return false;
        }
        let wnd = (seg.window as usize) << self.snd.wscale;
        self.snd.update_window(wnd, seg.seq, seg.ack);
        self.enter_established(now);
        true
    }

    /// In SYN-RECEIVED, whether `seg` acknowledges our SYN (SND.UNA < SEG.ACK =<
    /// SND.MAX); if not, a RST <SEQ=SEG.ACK> answers it.
    fn acks_our_syn(&mut self, seg: &Segment) -> bool {
        let ok = self.snd.una < seg.ack && seg.ack <= self.snd.max;
        if !ok {
            self.queue_rst(seg.ack, None);
        }
        ok
    }

    /// FIN (§3.10.7.4, eighth check) at `seq`, after the text: held until the data
    /// before it has arrived, then taken; a held FIN is taken once a gap before it fills.
    fn on_fin(&mut self, now: Instant, seq: SeqNum, seg: &Segment) {
        if seg.flags.fin {
            match self.state {
                State::Established | State::FinWait1 | State::FinWait2 | State::SynReceived => {
                    self.rcv.hold_fin(seq);
                }
                // A retransmitted FIN: the first was taken on the way into these states,
                // so none is held and `maybe_accept_fin` below leaves them alone.
                // Acknowledge again; in TIME-WAIT restart the 2·MSL wait.
                State::CloseWait | State::Closing | State::LastAck | State::TimeWait => {
                    debug_assert!(self.rcv.held_fin().is_none());
                    self.pending.set(PendingOutput::ACK_NOW);
                    if self.state == State::TimeWait {
                        self.arm(Timer::Linger, now + self.cfg.time_wait);
                    }
                }
                _ => {}
            }
        }
        self.maybe_accept_fin(now);
    }

    /// A segment with SYN in a synchronized state (or SYN-RECEIVED), before any other
    /// check: true when it has been dealt with. Out of line, so that the common segment
    /// without SYN tests one bit.
    #[inline(never)]
    fn on_syn_synchronized(
        &mut self,
        now: Instant,
        syn: &Segment,
        out: &mut RxOutcome,
        pool: &mut RingPool,
    ) -> bool {
        // A retransmitted SYN while our SYN-ACK is unacknowledged: resend it.
        if self.state == State::SynReceived && !syn.flags.ack && syn.seq == self.rcv.irs {
            self.pending.set(PendingOutput::SYN);
            self.snd.nxt = self.snd.iss;
            return true;
        }

        // Simultaneous open (§3.5 figure 7, line 6): after an active open, the peer's
        // SYN-ACK repeats its SYN (already counted in RCV.NXT, so the sequence check
        // would call it old) and acknowledges ours. Take its ACK.
        if self.state == State::SynReceived
            && self.flags.has(ConnFlags::ACTIVE_OPEN)
            && syn.flags.ack
            && !syn.flags.rst
            && syn.seq == self.rcv.irs
        {
            self.on_simultaneous_syn_ack(now, syn, pool);
            return true;
        }

        // A SYN in a synchronized state, irrespective of its sequence number, gets a
        // challenge ACK and is dropped (RFC 5961 §4.2, RFC 9293 §3.10.7.4 fourth check):
        // so it is tested before the sequence check.
        if !syn.flags.rst {
            self.challenge(now, syn, out);
            return true;
        }
        false
    }

    /// The peer's SYN-ACK in SYN-RECEIVED after a simultaneous open: it completes the
    /// handshake like the ACK of §3.10.7.4 (fifth check, SYN-RECEIVED).
    fn on_simultaneous_syn_ack(&mut self, now: Instant, seg: &Segment, pool: &mut RingPool) {
        if !self.acks_our_syn(seg) {
            return;
        }
        self.last_recv = now;
        if let (Some(ts), Some((tsval, _))) = (self.ts.as_mut(), seg.timestamp) {
            ts.update_recent(tsval, now);
        }
        // Its SYN was a duplicate: the ACK we owe it also covers a lost SYN-ACK of ours.
        self.take_syn_ack(now, seg, pool);
    }

    /// A SYN-ACK that acknowledges our SYN completes the handshake: take its window and
    /// ACK, enter ESTABLISHED and acknowledge its SYN (§3.10.7.3).
    fn take_syn_ack(&mut self, now: Instant, seg: &Segment, pool: &mut RingPool) {
        // RFC 7323 §2.2: the window field of a SYN (here a SYN-ACK) is never scaled.
        self.snd
            .update_window(seg.window as usize, seg.seq, seg.ack);
        self.ack_advance(now, seg, pool);
        self.enter_established(now);
        self.pending.set(PendingOutput::ACK_NOW);
    }

    /// Segment text (§3.10.7.4, seventh check), trimmed to the window, at `seq`: in
    /// order with nothing unread or held out of order, shown to the application
    /// straight from the frame; otherwise through the receive buffer.
    #[inline]
    pub(super) fn receive_data(
        &mut self,
        now: Instant,
        seq: SeqNum,
        payload: &[u8],
        seg: &Segment,
        out: &mut RxOutcome,
        pool: &mut RingPool,
    ) {
        if seq == self.rcv.nxt
            && !self.rcv.closed
            && self.rcv.buf.readable_len() == 0
            && !self.rcv.buf.has_out_of_order()
        {
            // Relative to the segment's own payload: trimmed duplicate bytes are at its
            // front.
            self.deliver_from_frame(seq.since(seg.seq), payload.len(), out, pool);
        } else {
            let offset = seq.since(self.rcv.nxt);
            self.receive_buffered(now, offset, payload, seg.ack, out, pool);
        }
    }

    /// In-order data at `front..front + len` of the segment's payload, with nothing
    /// unread or held out of order and the application still reading: shown to it
    /// straight from the frame. What it leaves must be kept, so at the memory limit
    /// take only what could be (the rest is not acknowledged and comes again; a FIN
    /// behind it waits in `rcv.fin`).
    #[inline]
    fn deliver_from_frame(
        &mut self,
        front: usize,
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
        out.deliver = Some((front, front + fits));
        self.delay_ack();
    }

    /// [`receive_data`](Self::receive_data) through the receive buffer: `data` at
    /// `offset` past RCV.NXT, of a segment acknowledging `seg_ack`; out of order,
    /// behind unread data or out-of-order ranges, or after the application closed. Out
    /// of line: the common segment is shown to the application from the frame.
    #[inline(never)]
    fn receive_buffered(
        &mut self,
        now: Instant,
        offset: usize,
        data: &[u8],
        seg_ack: SeqNum,
        out: &mut RxOutcome,
        pool: &mut RingPool,
    ) {
        let had_ooo = self.rcv.buf.has_out_of_order();
        if self.rcv.closed && now >= self.rcv.discard_until {
            // The application closed a while ago and new data still arrives that
            // nobody will read: RFC 1122 §4.2.2.13 lets us reset so the peer learns its
            // data was lost, and Linux does (TCPAbortOnData). The RST carries SEG.ACK
            // as its sequence number, as for any segment answered with a reset.
            self.queue_rst(seg_ack, None);
            self.finish(CloseReason::Aborted);
            return;
        }
        let advanced = self.rcv.buf.write_at(offset, data, pool);
        self.rcv.nxt += advanced;
        if self.rcv.closed {
            // A lingering close: ACK the data and drop it. It still goes through the
            // buffer, so out-of-order ranges held from before the close stay aligned
            // with RCV.NXT: they join up when the gap fills, SACK blocks stay true, and
            // a FIN behind them is accepted (`maybe_accept_fin` waits for no hole). What
            // becomes readable is discarded at once, along with anything the
            // application left unread, so the window stays open.
            let unread = self.rcv.buf.readable_len();
            self.rcv.buf.consume(unread, pool);
            self.pending.set(PendingOutput::ACK_NOW);
            return;
        }
        if advanced > 0 {
            out.readable = true;
        }
        // RFC 5681 §4.2 / RFC 9293 §3.8.6.3: ACK at once for out-of-order data and for
        // data that fills a gap; otherwise ACK every second full segment, or after the
        // delayed-ACK timeout.
        if offset > 0 || had_ooo {
            self.pending.set(PendingOutput::ACK_NOW);
        } else {
            self.delay_ack();
        }
    }

    /// An in-order segment arrived: ACK every second one at once, else the ACK waits
    /// (§3.8.6.3) for a segment to ride on or for the delayed-ACK timer, which
    /// `poll_transmit` arms when it sends no ACK ([`Tcb::arm_delayed_ack`]): a
    /// request answered in the same turn never arms it.
    #[inline]
    pub(super) fn delay_ack(&mut self) {
        self.rcv.unacked_segs = self.rcv.unacked_segs.saturating_add(1);
        if self.rcv.unacked_segs >= 2 {
            self.pending.set(PendingOutput::ACK_NOW);
        }
    }

    /// After output that left in-order segments unacknowledged: the delayed-ACK timer,
    /// unless it runs already (from the first of them, in an earlier turn).
    #[inline]
    pub(super) fn arm_delayed_ack(&mut self, now: Instant) {
        if self.rcv.unacked_segs > 0 && !self.timers.is_armed(Timer::DelayedAck) {
            self.arm(Timer::DelayedAck, now.plus_micros(self.cfg.delayed_ack_us));
        }
    }

    /// Take the peer's FIN once everything before it has arrived (§3.10.7.4, eighth
    /// check).
    fn maybe_accept_fin(&mut self, now: Instant) {
        let Some(fin) = self.rcv.held_fin() else {
            return;
        };
        if fin != self.rcv.nxt || self.rcv.buf.has_out_of_order() {
            return;
        }
        self.rcv.fin_held = false;
        self.rcv.nxt += 1;
        self.pending.set(PendingOutput::ACK_NOW);
        self.events.peer_closed = true;
        match self.state {
            State::SynReceived | State::Established => self.state = State::CloseWait,
            State::FinWait1 => {
                if self.snd.fin_acked() {
                    self.enter_time_wait(now);
                } else {
                    self.state = State::Closing;
                }
            }
            State::FinWait2 => self.enter_time_wait(now),
            _ => {}
        }
    }

    /// TIME-WAIT: only the 2·MSL linger timer runs.
    pub(super) fn enter_time_wait(&mut self, now: Instant) {
        self.state = State::TimeWait;
        self.timers.stop(Timer::Rto);
        self.timers.stop(Timer::Persist);
        self.timers.stop(Timer::Keepalive);
        self.timers.stop(Timer::GiveUp);
        self.arm(Timer::Linger, now + self.cfg.time_wait);
    }
}
