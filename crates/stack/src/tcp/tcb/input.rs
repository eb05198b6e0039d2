//! Segment arrival (§3.10.7): the SYN-SENT rules, the checks of §3.10.7.4 in their
//! order (sequence, RST, SYN, ACK, text, FIN) with PAWS (RFC 7323 §5) and the RFC 5961
//! defences, received data and the peer's FIN. ACK processing proper is in `ack.rs`.

use super::{ConnFlags, PendingOutput};
use std::time::Duration;

use super::timer_table::Timer;
use super::{CloseReason, RxOutcome, State, SynOptions, Tcb};
use crate::tcp::pool::RingPool;
use crate::tcp::segment::Segment;
use crate::tcp::seq::SeqNum;
use crate::time::Instant;

/// PAWS: TS.Recent older than this is no longer trusted (RFC 7323 §5.5).
const PAWS_IDLE: Duration = Duration::from_secs(24 * 24 * 3600);

impl Tcb {
    /// Process one incoming segment (§3.10.7). `payload` is the segment's data. Call
    /// [`poll_transmit`](Self::poll_transmit) after it (after the application had its
    /// say, for an answer to ride on): an ACK it leaves owed is sent there, or, when it
    /// may wait, the delayed-ACK timer is armed there.
    #[inline(always)]
    pub fn on_segment(
        &mut self,
        now: Instant,
        seg: &Segment,
        payload: &[u8],
        pool: &mut RingPool,
    ) -> RxOutcome {
        self.last_now = now;
        let mut out = RxOutcome::default();
        if self.cfg.fast_paths && self.on_segment_predicted(now, seg, payload, &mut out, pool) {
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

    /// Whether the connection's limit holds back an ACK answering the invalid `seg`
    /// (out of window, failing PAWS, or challenged): at most one per
    /// `invalid_ack_interval`, as Linux's `tcp_oow_rate_limited`. A segment carrying
    /// data or a FIN (and no SYN) is always answered: its ACK (and D-SACK) is what the
    /// sender recovers with, and two stacks cannot loop on it.
    fn invalid_ack_limited(&mut self, now: Instant, seg: &Segment) -> bool {
        if (seg.payload_len > 0 || seg.flags.fin) && !seg.flags.syn {
            return false;
        }
        let interval = self.cfg.invalid_ack_interval;
        if self
            .last_invalid_ack()
            .is_some_and(|last| now.saturating_duration_since(last) < interval)
        {
            return true;
        }
        self.timers.extra_mut().last_invalid_ack = Some(now);
        false
    }

    /// Answer an invalid segment with an ACK, unless the connection's limit holds it
    /// back.
    fn answer_invalid(&mut self, now: Instant, seg: &Segment, out: &mut RxOutcome) {
        if self.invalid_ack_limited(now, seg) {
            out.invalid_ack_suppressed = true;
        } else {
            self.pending.set(PendingOutput::ACK_NOW);
        }
    }

    /// RFC 5961: ask the engine for a challenge ACK (its global budget applies next),
    /// unless the connection's limit holds it back.
    pub(super) fn challenge(&mut self, now: Instant, seg: &Segment, out: &mut RxOutcome) {
        if self.invalid_ack_limited(now, seg) {
            out.invalid_ack_suppressed = true;
        } else {
            out.challenge_ack = true;
        }
    }

    /// Is the segment's sequence range acceptable (§3.10.7.4, first check)?
    ///
    /// One deviation, as in Linux (`tcp_sequence`) and BSD: a segment without data
    /// exactly at the right edge (SEG.SEQ = RCV.NXT + RCV.WND) is acceptable, but for a
    /// RST (RFC 5961 keeps those strictly inside). A peer
    /// that has sent up to our edge sends its bare ACKs from there; when the tail it
    /// sent is lost (or we could not store it), the strict test would discard the ACK
    /// information those carry. If both ends are in that state at once, each drops the
    /// other's ACKs and both time out (found by the simulation under memory pressure).
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
        if self.state == State::SynReceived
            && self.cfg.fast_paths
            && self.on_handshake_ack_predicted(now, seg, payload, out, pool)
        {
            return;
        }
        if seg.flags.fin
            && matches!(
                self.state,
                State::Established | State::FinWait1 | State::FinWait2
            )
            && self.cfg.fast_paths
            && self.on_fin_predicted(now, seg, payload, out, pool)
        {
            return;
        }

        // RFC 7323 §5.3: PAWS, before the sequence check.
        if let (Some(ts), Some((tsval, _))) = (&self.ts, seg.timestamp) {
            if !seg.flags.rst
                && ts.is_older(tsval)
                && now.saturating_duration_since(ts.recent_age) < PAWS_IDLE
            {
                self.answer_invalid(now, seg, out);
                return;
            }
        }

        // The segment as received, or a trimmed copy in the rare cases that change its
        // length or FIN (the copy costs a few dozen instructions per segment otherwise).
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
                if !seg.flags.rst {
                    self.answer_invalid(now, seg, out);
                    if seg.payload_len > 0 && seg.seq + seg.payload_len <= self.rcv.nxt {
                        // Entirely old data: a duplicate (RFC 2883 §4 case 1).
                        self.queue_dsack((seg.seq, seg.seq + seg.payload_len));
                    }
                    // TIME-WAIT (§3.10.7.4, eighth check): a retransmitted FIN is
                    // acknowledged again and restarts the 2·MSL wait. Being a duplicate,
                    // it never passes the sequence check, so it is recognised here.
                    if self.state == State::TimeWait
                        && seg.flags.fin
                        && seg.seq + (seg.payload_len + 1) == self.rcv.nxt
                    {
                        self.arm(Timer::Linger, now + self.cfg.time_wait);
                    }
                }
                return;
            }
        }

        // RST (RFC 5961 §3.2): exact match resets, anything else in window is challenged.
        if seg.flags.rst {
            if seg.seq == self.rcv.nxt {
                let reason =
                    if self.state == State::SynReceived && self.flags.has(ConnFlags::ACTIVE_OPEN) {
                        CloseReason::Refused
                    } else {
                        CloseReason::Reset
                    };
                self.finish(reason);
            } else {
                self.challenge(now, seg, out);
            }
            return;
        }

        if !seg.flags.ack {
            return;
        }

        // Trim what lies before RCV.NXT or beyond the window (§3.10.7.4, "trimmed").
        let mut seq = seg.seq;
        if seq < self.rcv.nxt {
            let dup = self.rcv.nxt.since(seq).min(payload.len());
            if dup > 0 {
                // Its front was received before: report that part (RFC 2883 §4).
                self.queue_dsack((seq, seq + dup));
                self.pending.set(PendingOutput::ACK_NOW);
            }
            payload = &payload[dup..];
            seq += dup;
        }
        let wnd = self.rcv.window();
        let room = (self.rcv.nxt + wnd).since(seq);
        if payload.len() > room {
            payload = &payload[..room];
            let mut copy = *seg;
            copy.flags.fin = false;
            trimmed = copy;
            seg = &trimmed;
        }
        self.last_recv = now;
        self.keepalive_sent = 0;
        self.arm_keepalive(now);

        // Update TS.Recent (RFC 7323 §4.3) now that the segment is acceptable.
        if let (Some(ts), Some((tsval, _))) = (self.ts.as_mut(), seg.timestamp) {
            if seg.seq <= self.rcv.last_ack_sent {
                ts.update_recent(tsval, now);
            }
        }

        // ACK processing.
        if self.state == State::SynReceived {
            if self.snd.una < seg.ack && seg.ack <= self.snd.max {
                let wnd = (seg.window as usize) << self.snd.wscale;
                self.snd.update_window(wnd, seg.seq, seg.ack);
                self.enter_established(now);
            } else {
                self.queue_rst(seg.ack, None);
                return;
            }
        }
        if !self.process_ack(now, seg, out, pool) {
            return;
        }

        // Segment text (§3.10.7.4, seventh).
        if !payload.is_empty()
            && matches!(
                self.state,
                State::Established | State::FinWait1 | State::FinWait2
            )
        {
            self.receive_data(now, seq, payload, seg, out, pool);
        }

        // FIN (§3.10.7.4, eighth), possibly ahead of missing data.
        if seg.flags.fin {
            match self.state {
                State::Established | State::FinWait1 | State::FinWait2 | State::SynReceived => {
                    self.rcv.hold_fin(seq + payload.len());
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

    /// What a segment the short input paths take does first, as the general path does
    /// (§3.10.7.4 and RFC 7323 §4.3): the keepalive restarts, and TS.Recent takes
    /// SEG.TSval when the segment starts at or before the last ACK we sent.
    #[inline(always)]
    fn short_path_arrival(&mut self, now: Instant, seg: &Segment) {
        self.last_recv = now;
        self.keepalive_sent = 0;
        self.arm_keepalive(now);
        if let (Some(ts), Some((tsval, _))) = (self.ts.as_mut(), seg.timestamp) {
            if seg.seq <= self.rcv.last_ack_sent {
                ts.update_recent(tsval, now);
            }
        }
    }

    /// The ACK that completes a passive open (SYN-RECEIVED), taken as header prediction
    /// takes the common segment in ESTABLISHED (`fast.rs`): next in sequence, only ACK
    /// (and PSH), no SACK blocks, an acceptable timestamp, acknowledging our SYN (and no
    /// more than we sent), with data or without, while nothing unusual is going on (no
    /// FIN queued or held, nothing SACKed, lost or retransmitted, no probe, no undo). The
    /// general path's work for it, in its order, without the tests whose answer is
    /// known: the checks of §3.10.7.4 up to the ACK, the handshake's end, then
    /// `process_ack` as `on_delivery` goes for a quiet flight, then the data
    /// (`scripts/callgrind-conn.sh`). Returns false, having changed nothing, otherwise.
    /// Under `fast_paths`, so `fast_path_tests` holds it to the general path.
    #[inline]
    fn on_handshake_ack_predicted(
        &mut self,
        now: Instant,
        seg: &Segment,
        payload: &[u8],
        out: &mut RxOutcome,
        pool: &mut RingPool,
    ) -> bool {
        let flags = seg.flags;
        if !flags.ack
            || flags.syn
            || flags.fin
            || flags.rst
            || seg.seq != self.rcv.nxt
            || seg.sack[0].is_some()
            || seg.payload_len != payload.len()
            // Acceptable with nothing to trim (a bare ACK at RCV.NXT even in a zero
            // window).
            || payload.len() > self.rcv.window()
            || self.snd.fin_queued
        {
            return false;
        }
        // PAWS passes: SEG.TSval is not older than TS.Recent.
        if !self.paws_passes(seg) {
            return false;
        }
        // It acknowledges our SYN (SND.UNA < SEG.ACK =< SND.MAX): the handshake ends.
        let ack = seg.ack;
        if ack <= self.snd.una || ack > self.snd.max || self.ack_too_old(ack) {
            return false;
        }
        if !self.send_side_quiet() {
            return false;
        }
        if self.rcv.closed || self.rcv.fin_held || self.rcv.buf.has_out_of_order() {
            return false;
        }

        // ---- What the general path does with it, in its order. ----
        self.short_path_arrival(now, seg);
        let wnd = (seg.window as usize) << self.snd.wscale;
        self.snd.update_window(wnd, seg.seq, ack);
        self.enter_established(now);
        // `process_ack`: an acceptable ACK of new data (our SYN at least), no SACK
        // information, not a duplicate; `on_delivery` for a quiet flight. The window
        // update after it would write what was just written.
        self.quiet_ack(now, seg, pool);
        // Segment text (§3.10.7.4, seventh check): in order, nothing to trim; no FIN.
        if !payload.is_empty() {
            self.receive_data(now, seg.seq, payload, seg, out, pool);
        }
        true
    }

    /// The peer's FIN, after the data it carries (ESTABLISHED, or FIN-WAIT-1 or -2 after
    /// ours), taken as [`on_handshake_ack_predicted`](Self::on_handshake_ack_predicted)
    /// takes the handshake's ACK: next in sequence, inside the window with nothing to
    /// trim, only ACK, FIN (and PSH), no SACK blocks, an acceptable timestamp,
    /// acknowledging nothing we did not send, while nothing unusual is going on. The
    /// general path's work for it, in its order: `process_ack` as `on_delivery` goes for
    /// a quiet flight, with our FIN's acknowledgement, the data, then the FIN, which
    /// takes the connection to CLOSE-WAIT, TIME-WAIT or CLOSING
    /// (`scripts/callgrind-conn.sh`). Returns false, having changed nothing, otherwise.
    /// Under `fast_paths`, so `fast_path_tests` holds it to the general path.
    #[inline]
    fn on_fin_predicted(
        &mut self,
        now: Instant,
        seg: &Segment,
        payload: &[u8],
        out: &mut RxOutcome,
        pool: &mut RingPool,
    ) -> bool {
        let flags = seg.flags;
        let wnd = self.rcv.window();
        if !flags.ack
            || flags.syn
            || flags.rst
            || seg.seq != self.rcv.nxt
            || seg.sack[0].is_some()
            || seg.payload_len != payload.len()
            // Acceptable with nothing to trim: at RCV.NXT, the data inside the window.
            || wnd == 0
            || payload.len() > wnd
        {
            return false;
        }
        if !self.paws_passes(seg) {
            return false;
        }
        let ack = seg.ack;
        if ack < self.snd.una || ack > self.snd.max || self.ack_too_old(ack) {
            return false;
        }
        if !self.send_side_quiet() {
            return false;
        }
        if self.rcv.fin_held || self.rcv.buf.has_out_of_order() {
            return false;
        }

        // ---- What the general path does with it, in its order. ----
        self.short_path_arrival(now, seg);
        // `process_ack`: an acceptable ACK, no SACK information, not a duplicate (it
        // carries a FIN); `on_delivery` for a quiet flight; the window update.
        self.quiet_ack(now, seg, pool);
        self.window_update(seg);
        if self.state == State::FinWait1 && self.snd.fin_acked() {
            self.state = State::FinWait2;
            if self.rcv.closed {
                self.arm(Timer::Linger, now + self.cfg.fin_wait2_timeout);
            }
        }
        // Segment text (§3.10.7.4, seventh check), then the FIN (eighth).
        if !payload.is_empty()
            && matches!(
                self.state,
                State::Established | State::FinWait1 | State::FinWait2
            )
        {
            self.receive_data(now, seg.seq, payload, seg, out, pool);
        }
        if matches!(
            self.state,
            State::Established | State::FinWait1 | State::FinWait2
        ) {
            self.rcv.hold_fin(seg.seq + payload.len());
        }
        self.maybe_accept_fin(now);
        true
    }

    /// A segment with SYN in a synchronized state (or SYN-RECEIVED), before any other
    /// check: true when it has been dealt with. Out of line, so that the common segment
    /// without SYN tests one bit.
    #[inline(never)]
    fn on_syn_synchronized(
        &mut self,
        now: Instant,
        seg: &Segment,
        out: &mut RxOutcome,
        pool: &mut RingPool,
    ) -> bool {
        // A retransmitted SYN while our SYN-ACK is unacknowledged: resend it.
        if self.state == State::SynReceived && !seg.flags.ack && seg.seq == self.rcv.irs {
            self.pending.set(PendingOutput::SYN);
            self.snd.nxt = self.snd.iss;
            return true;
        }

        // Simultaneous open (§3.5 figure 7, line 6): after an active open, the peer's
        // SYN-ACK repeats its SYN (already counted in RCV.NXT, so the sequence check
        // would call it old) and acknowledges ours. Take its ACK.
        if self.state == State::SynReceived
            && self.flags.has(ConnFlags::ACTIVE_OPEN)
            && seg.flags.ack
            && !seg.flags.rst
            && seg.seq == self.rcv.irs
        {
            self.on_simultaneous_syn_ack(now, seg, pool);
            return true;
        }

        // A SYN in a synchronized state, irrespective of its sequence number, gets a
        // challenge ACK and is dropped (RFC 5961 §4.2, RFC 9293 §3.10.7.4 fourth check):
        // so it is tested before the sequence check.
        if !seg.flags.rst {
            self.challenge(now, seg, out);
            return true;
        }
        false
    }

    /// The peer's SYN-ACK in SYN-RECEIVED after a simultaneous open: it completes the
    /// handshake like the ACK of §3.10.7.4 (fifth check, SYN-RECEIVED).
    fn on_simultaneous_syn_ack(&mut self, now: Instant, seg: &Segment, pool: &mut RingPool) {
        if !(self.snd.una < seg.ack && seg.ack <= self.snd.max) {
            self.queue_rst(seg.ack, None);
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

    /// Segment text (§3.10.7.4, seventh check), trimmed to the window, at `seq`.
    pub(super) fn receive_data(
        &mut self,
        now: Instant,
        seq: SeqNum,
        payload: &[u8],
        seg: &Segment,
        out: &mut RxOutcome,
        pool: &mut RingPool,
    ) {
        let offset = seq.since(self.rcv.nxt);
        let had_ooo = self.rcv.buf.has_out_of_order();
        if self.rcv.closed && now >= self.rcv.discard_until {
            // The application closed a while ago and new data still arrives that
            // nobody will read: RFC 1122 §4.2.2.13 lets us reset so the peer learns its
            // data was lost, and Linux does (TCPAbortOnData). The RST carries SEG.ACK
            // as its sequence number, as for any segment answered with a reset.
            self.queue_rst(seg.ack, None);
            self.finish(CloseReason::Aborted);
            return;
        }
        if self.rcv.closed {
            // A lingering close: ACK the data and drop it. It still goes through the
            // buffer, so out-of-order ranges held from before the close stay aligned
            // with RCV.NXT: they join up when the gap fills, SACK blocks stay true, and
            // a FIN behind them is accepted (`maybe_accept_fin` waits for no hole). What
            // becomes readable is discarded at once, along with anything the
            // application left unread, so the window stays open.
            let advanced = self.rcv.buf.write_at(offset, payload, pool);
            self.rcv.nxt += advanced;
            let unread = self.rcv.buf.readable_len();
            self.rcv.buf.consume(unread, pool);
            self.pending.set(PendingOutput::ACK_NOW);
            return;
        }
        if offset == 0 && !had_ooo && self.rcv.buf.readable_len() == 0 {
            // Shown to the application straight from the frame; what it leaves must be
            // kept, so at the memory limit take only what could be (the rest is not
            // acknowledged and comes again; a FIN behind it waits in `rcv.fin`).
            let fits = self.rcv.buf.storable(payload.len(), pool);
            if fits < payload.len() {
                pool.counters_mut().rcv_dropped += 1;
                self.pending.set(PendingOutput::ACK_NOW);
            }
            let payload = &payload[..fits];
            self.rcv.nxt += payload.len();
            // Relative to the segment's own payload: trimmed duplicate bytes are at its front.
            let front = seq.since(seg.seq);
            out.deliver = Some((front, front + payload.len()));
        } else {
            let advanced = self.rcv.buf.write_at(offset, payload, pool);
            self.rcv.nxt += advanced;
            if advanced > 0 {
                out.readable = true;
            }
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
