//! ACK processing (§3.10.7.4, fifth check): the RFC 5961 §5.2 range test, SND.UNA and
//! the send window, RTT samples (RFC 7323 §4.1, Karn), and our FIN being acknowledged;
//! then what the ACK says about loss: SACK blocks into the scoreboard, RACK and DupThresh
//! loss detection (RFC 8985, RFC 6675), duplicate ACKs from peers without SACK (RFC 5681
//! §3.2, RFC 6582), loss recovery with Proportional Rate Reduction (RFC 6937), tail
//! loss probes (RFC 8985 §7), undo of spurious reductions (RFC 2883, RFC 3522), and
//! window growth outside recovery.

use super::ConnFlags;
use std::time::Duration;

use super::deadlines::Timer;
use super::{CloseReason, Prr, RxOutcome, State, Tcb, Undo};
use crate::tcp::cc::{AckSample, CongestionControl};
use crate::tcp::options::ts_clock;
use crate::tcp::pool::RingPool;
use crate::tcp::scoreboard::DUP_THRESH;
use crate::tcp::segment::Segment;
use crate::tcp::seq::SeqNum;
use crate::time::Instant;

/// What an ACK changed, as `on_delivery` needs it.
#[derive(Clone, Copy)]
pub(super) struct AckFacts {
    /// SND.UNA and the SACKed bytes before the ACK.
    prior_una: SeqNum,
    prior_sacked: usize,
    /// Its first SACK block was a D-SACK.
    dsack: bool,
    /// A duplicate ACK (RFC 5681 §2, RFC 6675 §2).
    dupack: bool,
    /// The RTT sample it gave, in microseconds.
    rtt: Option<u64>,
}

/// Probes sent in a row without an ACK that delivers data before the RTO takes over.
/// RFC 8985 sends one; like QUIC's probe timeout (RFC 9002 §6.2), which backs off and
/// repeats, we send up to three, each after twice the previous wait, so that the loss
/// of a probe or of its ACK (often delayed by the receiver, being one new segment)
/// costs milliseconds rather than the 200 ms minimum RTO and its collapse of cwnd.
const MAX_PROBES: u8 = 3;

/// The shortest probe timeout, microseconds (Linux: TCP_TIMEOUT_MIN, 2 jiffies;
/// RFC 8985 §7.2 leaves it to the timer granularity).
const MIN_PTO_US: u64 = 10_000;

/// RFC 8985 §7.2 WCDelAckT: the longest a peer may delay the ACK of a lone segment.
const WORST_CASE_DELAYED_ACK: Duration = Duration::from_millis(200);

impl Tcb {
    /// The ACK field of an acceptable segment in a synchronized state: its range, what
    /// it acknowledges and says about delivery and loss, the window it carries and our
    /// FIN. Returns false when the segment must be dropped after the ACK check.
    pub(super) fn process_ack(
        &mut self,
        now: Instant,
        seg: &Segment,
        out: &mut RxOutcome,
        pool: &mut RingPool,
    ) -> bool {
        if !self.ack_acceptable(seg.ack) {
            self.challenge(now, seg, out);
            return false;
        }
        let facts = self.take_ack(now, seg, pool);
        if self.state.is_synchronized() || self.snd.syn_acked {
            self.on_delivery(now, seg, &facts);
        }
        self.window_update(now, seg);
        self.on_fin_acked(now)
    }

    /// RFC 5961 §5.2: acceptable ACKs lie in [SND.UNA - MAX.SND.WND, SND.NXT]; others
    /// are challenged and dropped (an ACK of unsent data too, as Linux does).
    #[inline]
    pub(super) fn ack_acceptable(&self, ack: SeqNum) -> bool {
        ack <= self.snd.max && !self.ack_too_old(ack)
    }

    /// Take an acceptable ACK: SND.UNA advances (with the RTT sample that may give), SACK
    /// blocks go into the scoreboard, a duplicate ACK is counted. Returns what
    /// [`on_delivery`](Self::on_delivery) needs to know about it.
    // Always inline: per ACK; the caller's next steps take its result from registers.
    #[inline(always)]
    pub(super) fn take_ack(
        &mut self,
        now: Instant,
        seg: &Segment,
        pool: &mut RingPool,
    ) -> AckFacts {
        // The peer is alive and answering (RFC 1122 §4.2.2.17 keeps a zero-window
        // connection open as long as probes are answered).
        self.snd.persist_probes = 0;
        let prior_una = self.snd.una;
        let prior_sacked = self.flight().board.sacked_bytes();
        let rtt = if prior_una < seg.ack {
            self.ack_advance(now, seg, pool)
        } else {
            None
        };
        let dsack = self.take_sack_blocks(now, seg, prior_una);
        // RFC 5681 §2 duplicate ACK (RFC 6675 §2 also counts ACKs that SACK new data;
        // one that only reports a duplicate, a D-SACK, is not a loss signal). SND.WND is
        // still the window before this segment's: the window update comes after.
        let dupack = seg.ack == prior_una
            && seg.payload_len == 0
            && !seg.flags.fin
            && self.snd.max > self.snd.una
            && {
                let old_wnd = self.snd.wnd();
                let sacked_new = self.flight().board.sacked_bytes() > prior_sacked;
                // New SACK information, or the same window and no D-SACK.
                (sacked_new || (((seg.window as usize) << self.snd.wscale) == old_wnd && !dsack))
                    // Answers to zero-window probes are not loss signals.
                    && old_wnd != 0
            };
        if dupack {
            self.recovery.dupacks = self.recovery.dupacks.saturating_add(1);
        }
        AckFacts {
            prior_una,
            prior_sacked,
            dsack,
            dupack,
            rtt,
        }
    }

    /// The SACK blocks of `seg` into the scoreboard (RFC 2018, RFC 6675); returns
    /// whether the first was a D-SACK (RFC 2883). An ACK older than SND.UNA (reordered
    /// on the way) carries stale SACK information, and its blocks would read as
    /// D-SACKs: they are skipped. Otherwise SND.UNA is now SEG.ACK, the point D-SACKs
    /// are told by (RFC 2883 §4).
    #[inline]
    fn take_sack_blocks(&mut self, now: Instant, seg: &Segment, prior_una: SeqNum) -> bool {
        seg.sack[0].is_some()
            && self.flags.has(ConnFlags::SACK_OK)
            && self.snd.syn_acked
            && seg.ack >= prior_una
            && self.sack_into_board(now, seg)
    }

    /// [`take_sack_blocks`](Self::take_sack_blocks) for blocks to take. Out of line:
    /// the common ACK carries none.
    #[inline(never)]
    fn sack_into_board(&mut self, now: Instant, seg: &Segment) -> bool {
        let mss = self.max_payload();
        let (una, max) = (self.snd.una, self.snd.max);
        self.flight_mut()
            .board
            .on_sack(&seg.sack, una, max, now, mss)
            .dsack
    }

    /// The window update (§3.10.7.4): only for SND.UNA =< SEG.ACK, and only from a
    /// segment no older than the last update (the SND.WL1/WL2 rule). A window that
    /// opens ends persist mode.
    #[inline]
    pub(super) fn window_update(&mut self, now: Instant, seg: &Segment) {
        let (wl1, wl2) = (self.snd.wl1, self.snd.wl2);
        if self.snd.una <= seg.ack && (wl1 < seg.seq || (wl1 == seg.seq && wl2 <= seg.ack)) {
            let wnd = (seg.window as usize) << self.snd.wscale;
            let offered = self.wnd_end_at_last_update();
            self.snd.update_window(wnd, seg.seq, seg.ack);
            if seg.ack + wnd < self.snd.max {
                self.window_shrank(offered);
            }
            if self.snd.wnd > 0 && self.timers.is_armed(Timer::Persist) {
                self.leave_persist(now);
            }
        }
    }

    /// The right edge the peer's last window update offered: SND.WL2 + SND.WND.
    #[inline]
    fn wnd_end_at_last_update(&self) -> SeqNum {
        self.snd.wl2 + self.snd.wnd()
    }

    /// The peer's window now ends short of SND.MAX, where the update before it offered
    /// up to `offered`: keep the furthest edge offered in this flight
    /// ([`Flight::edge`](super::flight::Flight::edge)).
    #[cold]
    #[inline(never)]
    fn window_shrank(&mut self, offered: SeqNum) {
        if let Some(flight) = self.flight.as_deref_mut() {
            if offered > flight.edge {
                flight.edge = offered;
            }
        }
    }

    /// The peer's window opened while zero-window probing (§3.8.6.1). Persist starts
    /// with nothing in flight, so only probe bytes can be outstanding: those the peer
    /// did not take are sent again at once as ordinary data rather than after an RTO.
    fn leave_persist(&mut self, now: Instant) {
        self.timers.stop(Timer::Persist);
        self.snd.persist_backoff = 0;
        self.on_progress(now);
        // The probe bytes' records go too: they are sent again as new ones.
        if let Some(board) = self.board_if_any() {
            board.clear();
        }
        self.snd.nxt = self.snd.una;
        if self.snd.max > self.snd.una {
            self.arm(Timer::Rto, now.plus_micros(self.rtt.rto_us()));
        }
    }

    /// The state changes our FIN's acknowledgement drives (§3.10.7.4, fifth check, in
    /// FIN-WAIT-1, CLOSING and LAST-ACK). Returns false when the connection is over.
    fn on_fin_acked(&mut self, now: Instant) -> bool {
        let fin_acked = self.snd.fin_acked();
        match self.state {
            State::FinWait1 if fin_acked => {
                self.state = State::FinWait2;
                if self.rcv.closed {
                    self.arm(Timer::Linger, now + self.cfg.fin_wait2_timeout);
                }
            }
            State::Closing if fin_acked => self.enter_time_wait(now),
            State::LastAck if fin_acked => {
                self.finish(CloseReason::Normal);
                return false;
            }
            _ => {}
        }
        true
    }

    /// SND.UNA < SEG.ACK: new data acknowledged. Returns the RTT sample it gave, in microseconds.
    pub(super) fn ack_advance(
        &mut self,
        now: Instant,
        seg: &Segment,
        pool: &mut RingPool,
    ) -> Option<u64> {
        let ack = seg.ack;
        let mut acked = ack.since(self.snd.una);
        // Without a flight block nothing was in flight but perhaps our SYN: nothing to
        // drop, nothing timed but the SYN.
        let mut timed = None;
        if !self.snd.syn_acked {
            // The first ACK covers our SYN, which is not in the send buffer.
            self.snd.syn_acked = true;
            acked = acked.saturating_sub(1);
            if self.flags.has(ConnFlags::SYN_TIMED) {
                self.flags.clear(ConnFlags::SYN_TIMED);
                timed = Some(self.snd.stall_from);
            }
        }
        let data_acked = acked.min(self.snd.buf.len());
        self.snd.buf.consume(data_acked, pool);
        self.snd.una = ack;
        self.last_progress = Some(now);
        if self.snd.nxt < ack {
            self.snd.nxt = ack;
        }
        if let Some(flight) = self.flight.as_deref_mut() {
            flight.board.on_cumulative_ack(ack, now);
            if let Some((seq, sent)) = flight.rtt_seq {
                if ack >= seq {
                    timed = Some(sent);
                    flight.rtt_seq = None;
                }
            }
        }
        self.on_progress(now);
        self.recovery.retries = 0;
        self.recovery.dupacks = 0;

        // RTT sample: timestamps when the peer echoes ours (RFC 7323 §4.1), else Karn.
        // In microseconds: this runs on every ACK of new data.
        let mut sample = None;
        if let (Some(ts), Some((_, tsecr))) = (self.ts, seg.timestamp) {
            if tsecr != 0 {
                let delta = ts_clock(now, ts.offset).wrapping_sub(tsecr);
                if (delta as i32) >= 0 {
                    sample = Some(u64::from(delta) * 1000);
                }
            }
        }
        if let Some(sent) = timed {
            if sample.is_none() {
                sample = Some(now.micros_since(sent));
            }
        }
        if let Some(us) = sample {
            self.rtt.sample_us(us, &self.cfg.rto);
        }

        // RFC 6298 §5.2/5.3: stop the timer when all is acked, else restart it.
        if self.snd.una == self.snd.max {
            self.timers.stop(Timer::Rto);
        } else {
            self.arm(Timer::Rto, now.plus_micros(self.rtt.rto_us()));
        }

        if self.want_writable && data_acked > 0 && self.snd.buf.space() > 0 && self.can_send() {
            self.want_writable = false;
            self.events.writable = true;
        }
        sample
    }

    /// Everything an acceptable ACK says about delivery and loss, after SND.UNA and the
    /// scoreboard have taken it.
    fn on_delivery(&mut self, now: Instant, seg: &Segment, facts: &AckFacts) {
        let delivered = self.delivered(facts);
        self.check_spurious(now, seg, facts.prior_una, facts.dsack);
        self.tlp_on_ack(now, seg, facts.dsack);
        self.recovery_on_ack(now, facts.prior_una);
        self.cc_on_delivery(now, facts, delivered);
        self.arm_tlp(now);
    }

    /// RFC 6937 DeliveredData: the change in SND.UNA plus the change in SACKed bytes; a
    /// duplicate ACK without SACK information stands for one segment (§3). Data
    /// delivered means the ACK clock runs: probes start counting afresh.
    #[inline]
    pub(super) fn delivered(&mut self, facts: &AckFacts) -> usize {
        let acked = self.snd.una.since(facts.prior_una);
        let delivered =
            (acked + self.flight().board.sacked_bytes()).saturating_sub(facts.prior_sacked);
        if delivered > 0 {
            self.recovery.probes = 0;
        }
        if facts.dupack && delivered == 0 {
            self.max_payload()
        } else {
            delivered
        }
    }

    /// Loss detection on an ACK (RACK and DupThresh on the scoreboard, RFC 8985 §6.2;
    /// duplicate and partial ACKs without SACK, RFC 5681 §3.2 and RFC 6582), and the
    /// start and end of loss recovery it leads to. `prior_una` is SND.UNA before the ACK.
    fn recovery_on_ack(&mut self, now: Instant, prior_una: SeqNum) {
        let acked = self.snd.una.since(prior_una);
        let leaving =
            self.recovery.in_recovery && self.flight().recover.is_none_or(|r| self.snd.una >= r);
        // RACK needs SACK (RFC 8985 §3.1, as Linux): without it, the first partial
        // ACK after a retransmission would mark the whole flight lost.
        if self.flags.has(ConnFlags::SACK_OK)
            && (!self.flight().board.is_quiet() || self.recovery.in_recovery)
        {
            self.detect_loss(now, leaving);
        }
        // Peers without SACK: the third duplicate ACK, and partial ACKs in recovery,
        // mark the segment at SND.UNA lost (RFC 5681 §3.2, RFC 6582 §3.2 step 5).
        if self.flight().board.sacked_bytes() == 0 {
            let third_dup =
                self.recovery.dupacks == DUP_THRESH as u16 && !self.recovery.in_recovery;
            let partial = self.recovery.in_recovery
                && acked > 0
                && !leaving
                && !self.flags.has(ConnFlags::SACK_OK);
            if third_dup || partial {
                let mss = self.max_payload();
                self.flight_mut().board.mark_head_lost(mss);
            }
        }

        if leaving {
            self.recovery.in_recovery = false;
            self.set_recover(None);
            self.cc.on_recovery_end(now);
        }
        if !self.recovery.in_recovery
            && self.flight().board.lost_bytes() > 0
            && self.flight().recover.is_none_or(|r| self.snd.una >= r)
        {
            self.enter_recovery(now);
        }
        if !self.recovery.in_recovery && self.flight().recover.is_some_and(|r| self.snd.una >= r) {
            // SND.UNA has passed "recover": it no longer holds anything back.
            self.set_recover(None);
        }
    }

    /// What `delivered` bytes let congestion control do: PRR's budget in recovery
    /// (RFC 6937), window growth outside it.
    #[inline]
    pub(super) fn cc_on_delivery(&mut self, now: Instant, facts: &AckFacts, delivered: usize) {
        if self.recovery.in_recovery {
            self.prr_update(delivered);
        } else if delivered > 0 {
            self.grow_window(now, facts.prior_una, delivered, facts.rtt);
        }
    }

    /// Outside recovery, `delivered` bytes delivered by an ACK: the congestion
    /// controller's window growth.
    #[inline]
    pub(super) fn grow_window(
        &mut self,
        now: Instant,
        prior_una: SeqNum,
        delivered: usize,
        rtt_us: Option<u64>,
    ) {
        let prior_flight = self.snd.max.since(prior_una);
        let cwnd = self.cc.cwnd();
        let in_slow_start = cwnd < self.cc.ssthresh();
        // RFC 7661 / Linux tcp_is_cwnd_limited: in slow start the window may grow
        // while the flight reached half of it.
        let app_limited =
            !(self.cwnd_limited || in_slow_start && cwnd < prior_flight.saturating_mul(2));
        if app_limited && delivered > 0 {
            return self.cc.on_app_limited_ack(now);
        }
        self.cc.on_ack(&AckSample {
            now,
            delivered,
            rtt_us,
            srtt_us: self.rtt.srtt_us(),
            una: self.snd.una,
            snd_max: self.snd.max,
            app_limited,
        });
    }

    /// RFC 5961 §5.2: an ACK below SND.UNA - MAX.SND.WND is not acceptable.
    #[inline]
    pub(super) fn ack_too_old(&self, ack: SeqNum) -> bool {
        let oldest = SeqNum(self.snd.una.0.wrapping_sub(self.snd.max_wnd.min(1 << 30)));
        ack < oldest
    }

    /// Run RACK and DupThresh loss detection and (re)arm the reordering timer.
    pub(super) fn detect_loss(&mut self, now: Instant, leaving_recovery: bool) {
        let mss = self.max_payload();
        let srtt = self.rtt.srtt().unwrap_or(self.rtt.rto());
        let (una, in_recovery) = (self.snd.una, self.recovery.in_recovery);
        let reo = self
            .flight_mut()
            .board
            .reo_wnd(una, in_recovery, leaving_recovery, srtt, mss);
        let loss = self.flight_mut().board.detect_loss(now, reo, mss);
        if loss.rack_lost > 0 {
            self.recovery.counters().rack_losses += loss.rack_lost;
        }
        match loss.timeout {
            Some(at) => self.arm(Timer::Reorder, at),
            None => self.timers.stop(Timer::Reorder),
        }
    }

    /// Loss detected: enter recovery (RFC 6675 §5), reduce the window once (RFC 5681
    /// eq. 4 through the congestion controller) and start PRR (RFC 6937).
    pub(super) fn enter_recovery(&mut self, now: Instant) {
        let flight = self.snd.max.since(self.snd.una);
        self.recovery.in_recovery = true;
        self.flight_mut().recover = Some(self.snd.max);
        self.recovery.rescued = false;
        self.set_tlp(None);
        *self.recovery.prr_mut() = Prr {
            recover_fs: flight.max(1),
            ..Prr::default()
        };
        // Duplicates of retransmissions already in flight (a probe's) may come back as
        // D-SACKs too: they count, or one of them could undo this real reduction.
        self.recovery.set_undo(Some(Undo {
            retrans: self.flight().board.retransmissions_in_flight(),
            ..Undo::default()
        }));
        self.cc.on_congestion(flight, now);
        self.recovery.counters().fast_retransmits += 1;
        self.set_rtt_seq(None);
    }

    /// RFC 6937 §3: how much this ACK lets us send during recovery.
    pub(super) fn prr_update(&mut self, delivered: usize) {
        let mss = self.max_payload();
        let pipe = self.pipe();
        let ssthresh = self.cc.ssthresh();
        let p = self.recovery.prr_mut();
        p.delivered = p.delivered.saturating_add(delivered);
        let sndcnt = if pipe > ssthresh {
            // Proportional part: ceil(prr_delivered * ssthresh / RecoverFS) - prr_out.
            let target = (p.delivered as u128 * ssthresh as u128).div_ceil(p.recover_fs as u128);
            (target.min(usize::MAX as u128) as usize).saturating_sub(p.out)
        } else {
            // PRR-SSRB: back up to ssthresh, at most one segment beyond what was delivered.
            let limit = p
                .delivered
                .saturating_sub(p.out)
                .max(delivered)
                .saturating_add(mss);
            (ssthresh - pipe).min(limit)
        };
        // The fast retransmit itself always goes (RFC 6937 §3.1 on the first ACK).
        p.budget = if p.out == 0 { sndcnt.max(mss) } else { sndcnt };
    }

    /// Spurious retransmissions (RFC 2883 §5: every retransmission of the episode came
    /// back as a D-SACK; RFC 3522 Eifel: the ACK of the first retransmitted segment
    /// echoes the TSval of its original transmission): undo the reduction.
    fn check_spurious(&mut self, now: Instant, seg: &Segment, prior_una: SeqNum, dsack: bool) {
        let Some(undo) = self.recovery.undo_mut() else {
            return;
        };
        let mut spurious = false;
        if dsack && undo.retrans > 0 {
            undo.retrans -= 1;
            spurious = undo.retrans == 0;
        }
        if let (Some((first, tsval)), false) = (undo.first, undo.eifel_done) {
            if prior_una <= first && first < self.snd.una {
                undo.eifel_done = true;
                if let Some((_, tsecr)) = seg.timestamp {
                    if tsecr != 0 && (tsecr.wrapping_sub(tsval) as i32) < 0 {
                        spurious = true;
                    }
                }
            }
        }
        if spurious {
            self.recovery.set_undo(None);
            self.cc.undo(now);
            self.flight_mut().board.clear_lost();
            self.recovery.in_recovery = false;
            self.recovery.counters().spurious_undos += 1;
        }
    }

    /// RFC 8985 §7.4: an ACK for the tail loss probe. A probe that resent old data and
    /// is acknowledged without a D-SACK repaired a real loss: reduce the window once.
    fn tlp_on_ack(&mut self, now: Instant, seg: &Segment, dsack: bool) {
        let Some((end, retrans)) = self.flight().tlp else {
            return;
        };
        if seg.ack < end {
            return;
        }
        if !retrans || dsack || self.recovery.in_recovery {
            // New data, a duplicate, or a probe inside a recovery that has already
            // reduced the window.
            self.set_tlp(None);
        } else if seg.ack > end || !self.flags.has(ConnFlags::SACK_OK) {
            self.set_tlp(None);
            let flight = self.snd.max.since(self.snd.una);
            self.recovery.set_undo(None);
            self.cc.on_congestion(flight, now);
            self.cc.on_recovery_end(now);
        }
    }

    /// Arm the probe timer (RFC 8985 §7.2) when data is in flight; stop it otherwise.
    ///
    /// Unlike RFC 8985 (and Linux), the probe also runs during recovery and with SACKed
    /// data outstanding: when the ACKs of a whole flight are lost, PRR (which sends only
    /// as ACKs arrive) and RACK (which needs a later segment delivered) would both wait
    /// for the RTO; one probe after two round trips restarts the ACK clock instead.
    /// On paths where receivers coalesce ACKs (GRO, or Rusty's own one ACK per burst),
    /// one lost ACK can be the last of a flight.
    // Always inline: per ACK and send; with nothing in flight it is one store.
    #[inline(always)]
    pub(super) fn arm_tlp(&mut self, now: Instant) {
        let flight = self.snd.max.since(self.snd.una);
        if flight == 0 {
            self.timers.stop(Timer::Tlp);
        } else {
            self.arm_tlp_in_flight(flight, now);
        }
    }

    /// After output that sent something (so data or our FIN is in flight): the
    /// loss-probe timer, unless it runs already.
    // Always inline: the output paths arm the timer after most sends (ACKs mostly stop it).
    #[inline(always)]
    pub(super) fn arm_tlp_after_send(&mut self, now: Instant) {
        if !self.timers.is_armed(Timer::Tlp) {
            let flight = self.snd.max.since(self.snd.una);
            debug_assert!(flight > 0);
            self.tlp_timer(flight, now);
        }
    }

    /// [`arm_tlp`](Self::arm_tlp) with `flight` bytes outstanding, out of line.
    #[inline(never)]
    fn arm_tlp_in_flight(&mut self, flight: usize, now: Instant) {
        self.tlp_timer(flight, now);
    }

    /// The loss-probe timer with `flight` bytes outstanding: armed in the states that
    /// send data or our FIN, with the peer's window open, SACK, the probe budget left,
    /// no retries and an RTT sample; else it stops.
    // Always inline: the body of the two entries above, each wanting it inline.
    #[inline(always)]
    fn tlp_timer(&mut self, flight: usize, now: Instant) {
        let eligible = self.snd.wnd > 0
            && matches!(
                self.state,
                State::Established
                    | State::CloseWait
                    | State::FinWait1
                    | State::Closing
                    | State::LastAck
            )
            && self.flags.has(ConnFlags::SACK_OK)
            && self.recovery.probes < MAX_PROBES
            && self.recovery.retries == 0;
        let Some(srtt) = self.rtt.srtt_us().filter(|_| eligible) else {
            self.timers.stop(Timer::Tlp);
            return;
        };
        // In microseconds: this runs on every ACK.
        let mut pto = srtt.saturating_mul(2);
        if flight <= self.snd.mss() {
            pto = pto.saturating_add(WORST_CASE_DELAYED_ACK.as_micros() as u64);
        }
        let pto = pto.max(MIN_PTO_US) << self.recovery.probes;
        let mut at = now.plus_micros(pto);
        if let Some(rto) = self.timers.get(Timer::Rto) {
            if rto < at {
                at = rto;
            }
        }
        self.arm(Timer::Tlp, at);
    }

    /// RFC 6675 pipe: our estimate of the bytes still in the network.
    pub(super) fn pipe(&self) -> usize {
        self.flight().board.pipe(self.snd.max.since(self.snd.una))
    }
}
