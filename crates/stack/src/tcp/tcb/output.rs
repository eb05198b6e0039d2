//! Output: `poll_transmit` and the segments it builds (SYN and SYN-ACK, data with
//! packetisation and TSO runs, probes, bare ACKs and RST), the window we advertise
//! (§3.8.6, receiver SWS avoidance §3.8.6.2.2), sender SWS avoidance (§3.8.6.2.1) and
//! SACK blocks (RFC 2018).

use super::deadlines::Timer;
use super::fast::{PredictedSegment, Prediction};
use super::{ConnFlags, PendingOutput};
use super::{State, Tcb};
use crate::tcp::cc::CongestionControl;
use crate::tcp::options::ts_clock;
use crate::tcp::pool::RingPool;
use crate::tcp::segment::TxSegment;
use crate::tcp::seq::SeqNum;
use crate::time::Instant;

/// Fewest full segments sent as one TSO super-frame.
const TSO_MIN_SEGMENTS: usize = 2;

impl Tcb {
    /// The window field, timestamps and SACK blocks for an outgoing segment; records
    /// what we advertised and acknowledged.
    #[inline]
    pub(super) fn advertise(&mut self, seg: &mut TxSegment, now: Instant) {
        (seg.window, seg.timestamp) = self.advertise_window(seg.syn, now);
        if seg.ack.is_some() {
            self.ack_sent();
            self.sack_blocks(&mut seg.sack);
        }
    }

    /// [`advertise`](Self::advertise) for a segment with ACK that carries no SACK
    /// blocks (no D-SACK owed, nothing held out of order to report).
    #[inline]
    pub(super) fn advertise_plain(&mut self, seg: &mut PredictedSegment, now: Instant) {
        (seg.window, seg.timestamp) = self.advertise_window(false, now);
        self.ack_sent();
    }

    /// The SACK blocks of an ACK sent now (RFC 2018 §4): the D-SACK owed first (RFC
    /// 2883 §4), then the ranges held out of order.
    #[inline]
    fn sack_blocks(&mut self, sack: &mut [Option<(u32, u32)>; 3]) {
        let dsack = self
            .take_pending_dsack()
            .filter(|_| self.flags.has(ConnFlags::SACK_OK));
        if let Some((l, r)) = dsack {
            sack[0] = Some((l.0, r.0));
        }
        if self.flags.has(ConnFlags::SACK_OK) && self.rcv.buf.has_out_of_order() {
            let mut ranges = [(0u32, 0u32); 3];
            let n = self.rcv.buf.sack_ranges(&mut ranges);
            let base = self.rcv.nxt;
            let slots = &mut sack[dsack.is_some() as usize..];
            for (slot, (l, r)) in slots.iter_mut().zip(ranges.iter().take(n)) {
                *slot = Some(((base + *l as usize).0, (base + *r as usize).0));
            }
        }
    }

    /// A segment without data acknowledging RCV.NXT, at `seq`: an ACK, or a keepalive
    /// probe. The window and timestamps are [`advertise`](Self::advertise)'s.
    #[inline]
    pub(super) fn ack_segment(&self, seq: SeqNum) -> PredictedSegment {
        PredictedSegment {
            seq,
            ack: self.rcv.nxt,
            window: 0,
            psh: false,
            timestamp: None,
            payload_offset: 0,
            payload_len: 0,
        }
    }

    /// A segment with `len` bytes of the send buffer from `seq` on, acknowledging
    /// RCV.NXT, with PSH when it carries the last byte queued.
    #[inline]
    pub(super) fn data_segment(&self, seq: SeqNum, len: usize) -> PredictedSegment {
        let offset = seq.since(self.snd.data_start());
        PredictedSegment {
            psh: offset + len == self.snd.buf.len(),
            // The send buffer holds less than 4 GiB (its head and length are 32-bit).
            payload_offset: offset as u32,
            payload_len: len as u32,
            ..self.ack_segment(seq)
        }
    }

    /// The window field (for a SYN when `syn`) and the timestamps of a segment sent now;
    /// records the right edge advertised.
    #[inline]
    pub(super) fn advertise_window(
        &mut self,
        syn: bool,
        now: Instant,
    ) -> (u16, Option<(u32, u32)>) {
        let buf_edge = self.rcv.nxt + self.rcv.offer as usize;
        // Never shrink the window (§3.8.6), and move the right edge only by at least the
        // SWS threshold (§3.8.6.2.2 receiver SWS avoidance): otherwise keep offering the
        // edge already advertised. A SYN has advertised nothing yet.
        let old_edge = self.rcv.adv.max(self.rcv.nxt);
        let edge = if syn
            || (buf_edge > old_edge && buf_edge.since(old_edge) >= self.rcv.sws_threshold())
        {
            buf_edge
        } else {
            old_edge
        };
        let wnd = edge.since(self.rcv.nxt);
        let field = if syn {
            wnd.min(65535)
        } else {
            (wnd >> self.rcv.wscale).min(65535)
        };
        // What the peer may now send is what the field says, after scaling.
        let shift = if syn { 0 } else { self.rcv.wscale };
        let adv_edge = self.rcv.nxt + (field << shift);
        if adv_edge > self.rcv.adv {
            self.rcv.adv = adv_edge;
        }
        let timestamp = self.ts.map(|ts| (ts_clock(now, ts.offset), ts.recent));
        (field as u16, timestamp)
    }

    /// A segment acknowledging RCV.NXT goes out: nothing is owed any more.
    #[inline]
    pub(super) fn ack_sent(&mut self) {
        self.rcv.last_ack_sent = self.rcv.nxt;
        self.pending.clear(PendingOutput::ACK_NOW);
        self.rcv.unacked_segs = 0;
        self.timers.stop(Timer::DelayedAck);
    }

    /// Bytes the SACK option adds to a segment sent now (RFC 2018 §3, padded to 4).
    fn sack_option_len(&self) -> usize {
        if !self.flags.has(ConnFlags::SACK_OK) {
            return 0;
        }
        let dsack = self.pending.has(PendingOutput::DSACK) as usize;
        let n = if self.rcv.buf.has_out_of_order() {
            let mut ranges = [(0u32, 0u32); 3];
            self.rcv.buf.sack_ranges(&mut ranges)
        } else {
            0
        };
        match (n + dsack).min(3) {
            0 => 0,
            blocks => (2 + 8 * blocks + 3) & !3,
        }
    }

    /// Payload bytes of a full-sized segment sent now: Eff.snd.MSS less the SACK
    /// blocks it carries.
    #[inline]
    pub(super) fn max_payload(&self) -> usize {
        self.snd.mss().saturating_sub(self.sack_option_len()).max(1)
    }

    /// The most new data one TSO super-frame carries: whole segments of `mss` bytes, at
    /// least one.
    fn tso_burst(&self, mss: usize) -> usize {
        if self.pending.has(PendingOutput::DSACK) {
            // The device would copy the D-SACK into every segment it cuts; RFC 2883 §4
            // reports each duplicate once.
            return mss;
        }
        (self.snd.tso_max as usize / mss).max(1) * mss
    }

    /// Append the segments this connection wants sent now to `out`. When none of them
    /// acknowledges in-order data received since the last ACK, the delayed-ACK timer
    /// starts (§3.8.6.3): a request answered before this call never starts it.
    ///
    /// `pool` says whether the engine is under memory pressure, which limits the window
    /// offered (see [`MemoryBudget`](crate::tcp::pool::MemoryBudget)).
    #[cfg(test)]
    pub(crate) fn poll_transmit(
        &mut self,
        now: Instant,
        out: &mut Vec<TxSegment>,
        pool: &mut RingPool,
    ) {
        if let Some(seg) = self.poll_transmit_predicted(now, out, pool) {
            out.push(seg.into());
        }
    }

    /// `poll_transmit` (the form the tests call), except that the common segment (see
    /// `PredictedSegment`) comes back by value instead of going into `out`, for a
    /// frame writer made for it. Whatever else is due goes into `out`.
    #[inline]
    pub(crate) fn poll_transmit_predicted(
        &mut self,
        now: Instant,
        out: &mut Vec<TxSegment>,
        pool: &mut RingPool,
    ) -> Option<PredictedSegment> {
        // What the receive buffer offers does not change while segments are built.
        self.rcv.offer = u32::try_from(self.rcv.buf.offer(pool)).unwrap_or(u32::MAX);
        self.last_now = now;
        self.start_flight(pool);
        let prediction = if self.cfg.header_prediction {
            self.transmit_predicted(now, out)
        } else {
            Prediction::General
        };
        #[cfg(test)]
        if matches!(prediction, Prediction::Done(_)) {
            super::fast::count_predicted(1);
        }
        match prediction {
            // An ACK went out: no delayed ACK is left to time.
            Prediction::Done(Some(seg)) => return Some(seg),
            Prediction::Done(None) => {}
            Prediction::General => self.transmit_general(now, out),
        }
        self.arm_delayed_ack(now);
        None
    }

    /// What header prediction requires of output: a synchronized state, nothing owed
    /// but data, the FIN or an ACK (no SYN, RST, probe or D-SACK), no recovery, nothing
    /// lost, and no SACK blocks to carry.
    #[inline]
    pub(super) fn output_is_plain(&self) -> bool {
        self.state.is_synchronized()
            && !self.pending.has(
                PendingOutput::SYN
                    | PendingOutput::RST
                    | PendingOutput::TLP
                    | PendingOutput::PROBE
                    | PendingOutput::KEEPALIVE_PROBE
                    | PendingOutput::DSACK,
            )
            && !self.recovery.in_recovery
            && self.flight().board.lost_bytes() == 0
            && !(self.flags.has(ConnFlags::SACK_OK) && self.rcv.buf.has_out_of_order())
    }

    /// The general path of `poll_transmit`, for every case header prediction leaves.
    /// Out of line, so that the predicted case's frame stays small.
    #[inline(never)]
    fn transmit_general(&mut self, now: Instant, out: &mut Vec<TxSegment>) {
        if let Some((seq, ack)) = self.take_pending_rst() {
            out.push(TxSegment {
                seq,
                ack,
                rst: true,
                ..Default::default()
            });
        }
        match self.state {
            State::Closed | State::Listen => return,
            State::SynSent | State::SynReceived => {
                if self.pending.has(PendingOutput::SYN) {
                    self.pending.clear(PendingOutput::SYN);
                    self.send_syn(now, out);
                }
                if self.state == State::SynReceived && self.pending.has(PendingOutput::ACK_NOW) {
                    self.push_ack(now, self.snd.nxt, out);
                }
                return;
            }
            _ => {}
        }
        let sent_before = out.len();

        if self.pending.has(PendingOutput::TLP) {
            self.pending.clear(PendingOutput::TLP);
            self.send_tlp(now, out);
        }
        // RFC 6675 §5 NextSeg: repair what is lost first (rule 1), then new data (rule 2),
        // then in recovery the rescue retransmission (rule 4).
        self.send_lost(now, out);
        self.send_new(now, out);
        if self.recovery.in_recovery && !self.recovery.rescued {
            self.send_rescue(now, out);
        }
        if out.len() > sent_before {
            self.arm_tlp_after_send(now);
        }

        if self.pending.has(PendingOutput::PROBE) {
            self.pending.clear(PendingOutput::PROBE);
            if self.snd.wnd == 0 {
                // Zero-window probe: one byte (or the FIN) at SND.UNA, beyond the window.
                self.send_segment_at(now, self.snd.una, 1, true, out);
                let backoff = self.rtt.rto() * (1 << self.snd.persist_backoff.min(10));
                self.arm(Timer::Persist, now + backoff.min(self.cfg.max_persist));
            } else if self.flight_size() == 0 {
                // §3.8.6.2.1 override timeout: SWS avoidance held back a segment smaller
                // than the window and nothing in flight will bring an ACK (the peer's
                // window update may have been lost): send what the window allows. The
                // segment is ordinary data, covered by the RTO from here on.
                self.send_segment_at(now, self.snd.nxt, self.snd.wnd(), false, out);
            }
        }
        let blocked = if self.snd.wnd == 0 {
            // Counted from SND.NXT: after a timeout rewound it, a FIN sent before the
            // window closed waits here too.
            self.snd.unsent_data() > 0 || self.snd.fin_unsent()
        } else {
            // Data left unsent with nothing in flight: only SWS avoidance holds it back.
            self.flight_size() == 0 && self.snd.unsent_data() > 0
        };
        if blocked && !self.timers.is_armed(Timer::Persist) && !self.timers.is_armed(Timer::Rto) {
            self.arm(Timer::Persist, now.plus_micros(self.rtt.rto_us()));
        }
        if self.pending.has(PendingOutput::KEEPALIVE_PROBE) {
            self.pending.clear(PendingOutput::KEEPALIVE_PROBE);
            // RFC 1122 §4.2.3.6: SEG.SEQ = SND.UNA-1, no data; the peer answers with an ACK.
            self.push_ack(now, self.snd.una - 1usize, out);
        }
        if self.pending.has(PendingOutput::ACK_NOW) && out.len() == sent_before {
            self.push_bare_ack(now, out);
        }
    }

    /// An ACK owed and nothing else sent to carry it.
    ///
    /// A bare ACK carries SND.MAX, not SND.NXT: after a timeout SND.NXT is pulled back
    /// to SND.UNA, and an ACK numbered below the peer's RCV.NXT would fail its
    /// acceptability test (§3.10.7.4) and be dropped with its ACK field unread; with
    /// both sides retransmitting, neither would ever learn of the other's progress (BSD
    /// tcp_output uses snd_max here for the same reason). Nor past the peer's window:
    /// after a zero-window probe SND.MAX lies beyond it, the only acceptable number is
    /// RCV.NXT = SND.UNA, and two zero windows would deadlock on dropped ACKs (Linux
    /// tcp_acceptable_seq caps it likewise).
    pub(super) fn push_bare_ack(&mut self, now: Instant, out: &mut Vec<TxSegment>) {
        self.push_ack(now, self.acceptable_seq(), out);
    }

    /// A segment with no data: an ACK, or a keepalive probe.
    fn push_ack(&mut self, now: Instant, seq: SeqNum, out: &mut Vec<TxSegment>) {
        let mut seg = TxSegment::from(self.ack_segment(seq));
        self.advertise(&mut seg, now);
        out.push(seg);
    }

    /// Our SYN (active open) or SYN-ACK (passive open), first or again (§3.10.1,
    /// §3.10.7.2).
    fn send_syn(&mut self, now: Instant, out: &mut Vec<TxSegment>) {
        let passive = self.state == State::SynReceived;
        let mut seg = TxSegment {
            seq: self.snd.iss,
            ack: passive.then_some(self.rcv.nxt),
            syn: true,
            mss: Some(self.rcv.mss),
            ..Default::default()
        };
        // In a SYN-ACK, offer only what the peer offered (RFC 7323 §2.2, RFC 2018 §2).
        if self.cfg.window_scaling && (!passive || self.flags.has(ConnFlags::WS_OK)) {
            seg.wscale = Some(self.rcv.wscale);
        }
        seg.sack_permitted = if passive {
            self.flags.has(ConnFlags::SACK_OK)
        } else {
            self.cfg.sack
        };
        // Timestamps: offered in a SYN when configured, echoed in a SYN-ACK only when the
        // peer offered them; `advertise` fills them in from `self.ts`.
        self.advertise(&mut seg, now);
        out.push(seg);
        self.snd.nxt = self.snd.iss + 1;
        self.snd.max = self.snd.max.max(self.snd.nxt);
        self.last_send = now;
        // Timed without a flight block (see `syn_timed`), so that a handshake takes
        // none.
        if self.recovery.retries == 0 && !self.flags.has(ConnFlags::SYN_TIMED) {
            self.flags.set(ConnFlags::SYN_TIMED);
            self.snd.stall_from = now;
        } else if self.recovery.retries > 0 {
            self.flags.clear(ConnFlags::SYN_TIMED);
        }
        self.arm(Timer::Rto, now.plus_micros(self.rtt.rto_us()));
    }

    /// What congestion control lets us send now: PRR's allowance in recovery
    /// (RFC 6937), cwnd less pipe otherwise (RFC 6675 §5).
    #[inline]
    pub(super) fn cc_room(&self) -> usize {
        if self.recovery.in_recovery {
            self.recovery.prr_budget()
        } else {
            self.cc.cwnd().saturating_sub(self.pipe())
        }
    }

    /// Bytes of new data the peer's window still takes from SND.NXT on.
    pub(super) fn rwnd_room(&self) -> usize {
        let edge = self.wnd_end();
        if self.snd.nxt >= edge {
            0
        } else {
            edge.since(self.snd.nxt)
        }
    }

    /// Retransmit what the scoreboard says is lost, as congestion control allows
    /// (NextSeg rule 1).
    fn send_lost(&mut self, now: Instant, out: &mut Vec<TxSegment>) {
        while self.flight().board.lost_bytes() > 0 && self.cc_room() > 0 {
            let Some((start, end)) = self.flight().board.next_lost(self.max_payload()) else {
                break;
            };
            let before = out.len();
            self.send_segment_at(now, start, end.since(start), false, out);
            if out.len() == before {
                break;
            }
        }
    }

    /// NextSeg rule 4 (RFC 6675 §4): once per recovery, when nothing lost or new can go,
    /// resend the highest segment not SACKed so a lost tail cannot wait for a timeout.
    fn send_rescue(&mut self, now: Instant, out: &mut Vec<TxSegment>) {
        if self.cc_room() == 0 || self.flight().board.lost_bytes() > 0 || self.snd.unsent_data() > 0
        {
            return;
        }
        if self.flight().board.sacked_bytes() == 0 {
            return;
        }
        if let Some((start, end)) = self.flight().board.rescue(self.max_payload()) {
            self.recovery.rescued = true;
            self.send_segment_at(now, start, end.since(start), false, out);
        }
    }

    /// The tail loss probe (RFC 8985 §7.3): a new segment if the peer's window takes
    /// one, otherwise the last segment sent, again; in recovery, the first lost segment
    /// still waiting for its retransmission comes first. Then the RTO is armed afresh.
    fn send_tlp(&mut self, now: Instant, out: &mut Vec<TxSegment>) {
        if self.snd.max == self.snd.una {
            return;
        }
        let before = out.len();
        let mss = self.max_payload();
        let unsent = self.snd.unsent_data();
        let lost = self.flight().board.next_lost(mss);
        let retrans = if let Some((start, end)) = lost {
            self.send_segment_at(now, start, end.since(start), false, out);
            true
        } else if unsent > 0 && self.rwnd_room() >= unsent.min(mss) {
            self.send_segment_at(now, self.snd.nxt, mss, false, out);
            false
        } else if let Some((start, end)) = self.flight().board.last(mss) {
            self.send_segment_at(now, start, end.since(start), false, out);
            true
        } else {
            return;
        };
        if out.len() > before {
            self.recovery.counters().tlps += 1;
            self.recovery.probes += 1;
            self.flight_mut().tlp = Some((self.snd.max, retrans));
            self.arm(Timer::Rto, now.plus_micros(self.rtt.rto_us()));
        }
    }

    /// Send new data as the windows allow.
    fn send_new(&mut self, now: Instant, out: &mut Vec<TxSegment>) {
        if self.idle_restart_due(now) {
            self.cc.on_idle_restart(now);
        }
        loop {
            let avail = self.snd.unsent_data();
            let fin_due = avail == 0 && self.snd.fin_unsent();
            if avail == 0 && !fin_due {
                self.cwnd_limited = false;
                break;
            }
            let cc_room = self.cc_room();
            let rwnd_room = self.rwnd_room();
            let usable = rwnd_room.min(cc_room);
            let max_payload = self.max_payload();
            // RFC 7661: remember whether the congestion window is what holds data back.
            self.cwnd_limited = cc_room < rwnd_room && cc_room < avail.min(max_payload);
            // With TSO, a run of full segments goes out as one super-frame.
            let mut len = avail.min(self.tso_burst(max_payload)).min(usable);
            if len < TSO_MIN_SEGMENTS * max_payload {
                // Less than two full segments: nothing for the device to cut.
                len = len.min(max_payload);
            }
            if avail > 0 && len == 0 {
                break;
            }
            if fin_due && usable == 0 {
                // The FIN occupies sequence space too: into a closed window it goes only
                // as a persist probe, which expects no ACK of it (§3.8.6.1), never with
                // the retransmission timer, whose retries a live peer holding its window
                // shut would exhaust.
                break;
            }
            // Sender SWS avoidance (§3.8.6.2.1), without Nagle: send full segments, the
            // tail of the queue, or at least half the largest window the peer offered.
            if len < max_payload && len < avail && usable < self.snd.max_wnd as usize / 2 {
                break;
            }
            let before = out.len();
            self.send_segment_at(now, self.snd.nxt, len, false, out);
            if out.len() == before {
                break;
            }
            if let Some(seg) = out.last_mut() {
                if seg.payload_len > max_payload {
                    seg.tso_mss = Some(max_payload as u16);
                }
            }
            if fin_due {
                break;
            }
        }
    }

    /// Emit one segment starting at `seq` with up to `max_len` payload bytes (and the FIN
    /// if it fits after them). `probe` ignores the windows.
    fn send_segment_at(
        &mut self,
        now: Instant,
        seq: SeqNum,
        max_len: usize,
        probe: bool,
        out: &mut Vec<TxSegment>,
    ) {
        let offset = seq.since(self.snd.data_start());
        let remaining = self.snd.buf.len().saturating_sub(offset);
        let mss = self.max_payload();
        // New data may be a TSO run of full segments (send_new sized it); everything
        // else (retransmissions, probes) is one segment.
        let max_payload = if probe || seq < self.snd.max {
            mss
        } else {
            self.tso_burst(mss)
        };
        let len = remaining.min(max_len).min(max_payload);
        let fin = self.snd.fin() == Some(seq + len);
        if len == 0 && !fin {
            return;
        }
        let mut seg = TxSegment {
            fin,
            ..self.data_segment(seq, len).into()
        };
        self.advertise(&mut seg, now);
        out.push(seg);
        self.on_sent(now, seq, len, fin, probe);
    }

    /// RFC 5681 §4.1: data waits to go out after an idle period (nothing in flight for
    /// longer than an RTO), so the congestion window restarts first.
    #[inline]
    pub(super) fn idle_restart_due(&self, now: Instant) -> bool {
        self.snd.nxt == self.snd.una
            && now.micros_since(self.last_send) > self.rtt.rto_us()
            && self.snd.unsent_data() > 0
    }

    /// What sending [`seq`, `seq + len`) changed, with our FIN after it when `fin`:
    /// SND.NXT and SND.MAX, the segment timed for an RTT sample or the retransmission
    /// counted (Karn's rule), the scoreboard, and but for a `probe`, PRR's count in
    /// recovery and the retransmission timer.
    #[inline]
    pub(super) fn on_sent(
        &mut self,
        now: Instant,
        seq: SeqNum,
        len: usize,
        fin: bool,
        probe: bool,
    ) {
        let end = seq + len + fin as usize;
        let prior_max = self.snd.max;
        self.snd.nxt = self.snd.nxt.max(end);
        if end > prior_max {
            if prior_max == self.snd.una {
                // The oldest unacknowledged sequence number goes out now.
                self.snd.stall_from = now;
            }
            self.snd.max = end;
        } else {
            self.on_retransmitted(now, seq, len);
        }
        let flight = self.flight_mut();
        if seq >= prior_max {
            // Nothing sent before: timed unless a segment is timed already (Karn's rule).
            if flight.rtt_seq.is_none() {
                flight.rtt_seq = Some((end, now));
            }
            flight.board.on_transmit_new(seq, end, now);
        } else {
            flight.board.on_transmit(seq, end, now);
        }
        if !probe && self.recovery.in_recovery {
            let sent = end.since(seq);
            let prr = self.recovery.prr_mut();
            prr.out = prr.out.saturating_add(sent);
            prr.budget = prr.budget.saturating_sub(sent);
        }
        self.last_send = now;
        if !self.timers.is_armed(Timer::Rto) && !probe {
            self.arm(Timer::Rto, now.plus_micros(self.rtt.rto_us()));
        }
    }

    /// A retransmission of `len` bytes at `seq` went out: it is counted, kept for the
    /// undo of a spurious reduction (RFC 2883 §5, RFC 3522), and spoils the RTT sample
    /// of the segment being timed if it covers it (Karn).
    fn on_retransmitted(&mut self, now: Instant, seq: SeqNum, len: usize) {
        let counters = self.recovery.counters();
        counters.retransmitted_segments += 1;
        counters.retransmitted_bytes = counters.retransmitted_bytes.saturating_add(len as u32);
        if let Some(undo) = self.recovery.undo_mut() {
            undo.retrans += 1;
            if undo.first.is_none() {
                if let Some(ts) = self.ts {
                    undo.first = Some((seq, ts_clock(now, ts.offset)));
                }
            }
        }
        if self.flight().rtt_seq.is_some_and(|(timed, _)| seq < timed) {
            self.set_rtt_seq(None);
        }
    }
}
