//! What happens when a timer fires: retransmission timeout (RFC 6298 §5, RFC 5681 §3.1),
//! persist timer (§3.8.6.1), delayed ACK (§3.8.6.3), keepalive (RFC 1122 §4.2.3.6),
//! TIME-WAIT and FIN-WAIT-2 (linger), the application's timer, and giving up: the user
//! timeout (RFC 5482) and the bounds on orphans (retries and time without progress, as
//! Linux's tcp_orphan_retries). The deadlines
//! themselves are kept in `deadlines.rs`.

use super::PendingOutput;
use std::time::Duration;

use super::deadlines::Timer;
use super::{reached, CloseReason, ConnFlags, State, Tcb};
use crate::tcp::cc::CongestionControl;
use crate::tcp::seq::SeqNum;
use crate::time::Instant;

impl Tcb {
    /// The earliest time [`Tcb::on_timer`] has work to do.
    #[cfg(test)]
    pub(crate) fn next_deadline(&self) -> Option<Instant> {
        self.timers.next()
    }

    /// Arm `timer` for `at`, noting when that is before the promised wake-up.
    #[inline]
    pub(super) fn arm(&mut self, timer: Timer, at: Instant) {
        if self.timers.set(timer, at) {
            self.flags.set(ConnFlags::WAKE_EARLIER);
        }
    }

    /// For a caller that wakes the connection with one timer of its own (the engine's
    /// wheel entry per connection): the new wake-up time when it moved since the last
    /// call, which is when a timer was set to fire before it or [`on_timer`] ran. The
    /// caller arms its timer for it and calls `on_timer` when a timer of its fires at
    /// or after [`wake_at`](Self::wake_at). No timer is scanned unless `on_timer` ran.
    /// The wake-up may come early (a timer stopped or moved later since): `on_timer`
    /// then finds nothing due.
    ///
    /// [`on_timer`]: Self::on_timer
    #[inline]
    pub(crate) fn take_wake(&mut self) -> Option<Instant> {
        if !self.flags.has(ConnFlags::WAKE_EARLIER) {
            return None;
        }
        self.flags.clear(ConnFlags::WAKE_EARLIER);
        self.wake_at()
    }

    /// When the connection wants to be woken ([`take_wake`](Self::take_wake)), if ever.
    /// A caller's timer that fires before it is stale: an earlier wake-up came since,
    /// and what was due then is handled.
    #[inline]
    pub(crate) fn wake_at(&self) -> Option<Instant> {
        let at = self.timers.wake();
        (at != Instant::FAR_FUTURE).then_some(at)
    }

    /// Arm the application's one-shot timer `after` from now (replacing an armed one),
    /// or cancel it; when it fires, [`Events::app_timer`](super::Events::app_timer) is raised. A closed
    /// connection's timer never fires.
    pub(crate) fn set_app_timer(&mut self, after: Option<Duration>) {
        match after {
            Some(d) if !self.is_closed() => self.arm(Timer::App, self.last_now + d),
            _ => self.timers.stop(Timer::App),
        }
    }

    /// Fire whatever timers are due at `now`.
    pub(crate) fn on_timer(&mut self, now: Instant) {
        self.last_now = now;

        // In this order: the application's timer fires even when another timer then ends
        // the connection, and once one has (`finish` stops every timer) the later ones
        // find nothing due.
        if self.timers.take_expired(Timer::App, now) {
            self.events.app_timer = true;
        }
        if self.timers.take_expired(Timer::Reorder, now) {
            self.on_reorder_timeout(now);
        }
        if self.timers.take_expired(Timer::Tlp, now) {
            self.on_tlp_timeout(now);
        }
        if self.timers.take_expired(Timer::Rto, now) {
            self.on_rto(now);
        }
        if self.timers.take_expired(Timer::Persist, now) {
            self.on_persist(now);
        }
        if self.timers.take_expired(Timer::GiveUp, now) {
            self.on_give_up();
        }
        if self.timers.take_expired(Timer::DelayedAck, now) {
            self.pending.set(PendingOutput::ACK_NOW);
        }
        if self.timers.take_expired(Timer::Keepalive, now) {
            self.on_keepalive(now);
        }
        if self.timers.take_expired(Timer::Linger, now) {
            self.on_linger();
        }
        // Woken: the next wake-up is for what stays armed.
        self.timers.woke();
        self.flags.set(ConnFlags::WAKE_EARLIER);
    }

    /// RFC 6298 §5.4–5.7 and RFC 5681 §3.1 on a retransmission timeout.
    fn on_rto(&mut self, now: Instant) {
        match self.state {
            State::SynSent | State::SynReceived => {
                let limit = if self.state == State::SynSent {
                    self.cfg.max_syn_retries
                } else {
                    self.cfg.max_synack_retries
                };
                if self.recovery.retries_reached(limit) {
                    self.finish(CloseReason::TimedOut);
                    return;
                }
                self.recovery.retries = self.recovery.retries.saturating_add(1);
                self.rtt.backoff(&self.cfg.rto);
                self.pending.set(PendingOutput::SYN);
                self.snd.nxt = self.snd.iss;
            }
            State::Closed | State::Listen | State::TimeWait => {}
            _ => {
                if self.snd.max == self.snd.una {
                    return;
                }
                if self.recovery.retries_reached(self.cfg.max_retries) {
                    self.finish(CloseReason::TimedOut);
                    return;
                }
                if self.is_orphan() && self.recovery.retries_reached(self.cfg.orphan_retries) {
                    // Linux tcp_write_timeout: tcp_orphan_retries for orphans.
                    self.reset(CloseReason::TimedOut);
                    return;
                }
                self.arm_give_up();
                self.recovery.retries = self.recovery.retries.saturating_add(1);
                let flight = self.snd.max.since(self.snd.una);
                // A timeout during fast recovery is the same loss episode: no second
                // reduction of ssthresh (as Linux's tcp_enter_loss).
                let first = self.recovery.retries == 1 && !self.recovery.in_recovery;
                self.cc.on_rto(flight, first, now);
                self.recovery.counters().rtos += 1;
                self.rtt.backoff(&self.cfg.rto);
                self.recovery.in_recovery = false;
                self.flight_mut().recover = Some(self.snd.max);
                self.recovery.dupacks = 0;
                self.set_tlp(None);
                if first {
                    self.recovery.set_undo(Some(super::Undo {
                        retrans: self.flight().board.retransmissions_in_flight(),
                        ..Default::default()
                    }));
                }
                self.set_rtt_seq(None);
                self.timers.stop(Timer::Tlp);
                self.timers.stop(Timer::Reorder);
                // Everything not SACKed is lost (RFC 6675 §5.1): resent in order from
                // SND.UNA as the (now one-segment) window allows.
                if let Some(board) = self.board_if_any() {
                    board.renege_if_head_sacked();
                    board.mark_all_lost();
                }
            }
        }
    }

    /// The path to the peer carries packets of at most `mtu` bytes, of which the IP
    /// header takes `ip_header` (an ICMPv6 Packet Too Big, RFC 8201): lower our segment
    /// size to fit and resend what is in flight at the new size, every byte not SACKed
    /// marked lost. Not a congestion signal, so the window stays (as Linux's
    /// `tcp_simple_retransmit`). Only for a synchronized connection, and only when
    /// `seq`, the sequence number of the segment the path refused, is one we sent and
    /// is not yet acknowledged (RFC 5927 §4.1: a blind attacker cannot aim at a live
    /// connection). Whether the segment size went down.
    pub(crate) fn path_mtu(&mut self, mtu: usize, ip_header: usize, seq: SeqNum) -> bool {
        let in_flight = self.snd.una <= seq && seq < self.snd.nxt;
        if !(self.state.is_synchronized() && in_flight) {
            return false;
        }
        let options = if self.ts.is_some() {
            crate::tcp::options::TS_OPTION_LEN
        } else {
            0
        };
        let headers = ip_header + crate::tcp::segment::MIN_HEADER_LEN + options;
        let mss = mtu.saturating_sub(headers).max(64);
        if mss >= self.snd.mss() {
            return false;
        }
        self.snd.mss = mss as u16;
        self.cc.set_mss(mss);
        if let Some(board) = self.board_if_any() {
            board.mark_all_lost();
        }
        true
    }

    /// The RACK reordering timer (RFC 8985 §6.3): records whose reordering window has
    /// run out are lost now, and recovery starts if it has not.
    fn on_reorder_timeout(&mut self, now: Instant) {
        if !self.state.is_synchronized() || self.state == State::TimeWait {
            return;
        }
        self.detect_loss(now, false);
        if self.flight().board.lost_bytes() == 0 {
            return;
        }
        if !self.recovery.in_recovery && self.flight().recover.is_none_or(|r| self.snd.una >= r) {
            self.enter_recovery(now);
        }
        if self.recovery.in_recovery {
            self.prr_update(0);
        }
    }

    /// The probe timeout (RFC 8985 §7.3): send a tail loss probe.
    fn on_tlp_timeout(&mut self, now: Instant) {
        if self.snd.max != self.snd.una {
            self.pending.set(PendingOutput::TLP);
            // The probe goes instead of a timeout due at the same moment (§7.2 caps
            // the PTO at the RTO); the RTO is armed afresh behind it.
            self.arm(Timer::Rto, now.plus_micros(self.rtt.rto_us()));
        }
    }

    /// The persist timer (§3.8.6.1): probe a zero window, or send what sender SWS
    /// avoidance holds back when nothing in flight will bring an ACK (§3.8.6.2.1).
    fn on_persist(&mut self, now: Instant) {
        // A zero window, or (nothing in flight) a window sender SWS avoidance will not
        // fill: either way no ACK is coming to unblock us.
        if (self.snd.unsent_data() + self.flight_size() > 0 || self.snd.fin_unsent())
            && (self.snd.wnd == 0 || self.flight_size() == 0)
        {
            if self.snd.wnd == 0 {
                // Zero-window probes count like retransmissions: a peer that answers none
                // of them is gone (RFC 1122 §4.2.2.17 only obliges us to wait while it
                // keeps answering; Linux tcp_probe_timer does the same).
                if reached(self.snd.persist_probes, self.cfg.max_retries, u16::MAX) {
                    self.finish(CloseReason::TimedOut);
                    return;
                }
                // An orphan that the peer keeps answering with a shut window: answered
                // probes do not count as progress for it (Linux tcp_probe_timer bounds
                // orphans by tcp_orphan_retries of backoff), or a client that stops
                // reading would hold the connection forever.
                if self.is_orphan()
                    && reached(self.snd.stalled_probes, self.cfg.orphan_retries, u16::MAX)
                {
                    self.reset(CloseReason::TimedOut);
                    return;
                }
                if self.snd.max == self.snd.una {
                    // The first probe goes now: the stall counts from here.
                    self.snd.stall_from = now;
                }
                self.snd.persist_probes = self.snd.persist_probes.saturating_add(1);
                self.snd.stalled_probes = self.snd.stalled_probes.saturating_add(1);
                self.arm_give_up();
            }
            self.pending.set(PendingOutput::PROBE);
            self.snd.persist_backoff = (self.snd.persist_backoff + 1).min(16);
        }
    }

    /// The user timeout (RFC 5482) or the orphan timeout: nothing outstanding has
    /// moved for that long. Reset the peer and report the timeout.
    fn on_give_up(&mut self) {
        if self.snd.max != self.snd.una && self.state.is_synchronized() {
            self.reset(CloseReason::TimedOut);
        }
    }

    /// Keepalive (RFC 1122 §4.2.3.6): probe an idle peer, give up after the configured
    /// number of unanswered probes.
    fn on_keepalive(&mut self, now: Instant) {
        let Some(ka) = self.cfg.keepalive else { return };
        if reached(self.keepalive_sent, ka.probes, u8::MAX) {
            self.finish(CloseReason::TimedOut);
            return;
        }
        if self.state.is_synchronized() && self.state != State::TimeWait {
            self.keepalive_sent = self.keepalive_sent.saturating_add(1);
            self.pending.set(PendingOutput::KEEPALIVE_PROBE);
            self.arm(Timer::Keepalive, now + ka.interval);
        }
    }

    /// The end of TIME-WAIT (2·MSL), or of the FIN-WAIT-2 timeout.
    fn on_linger(&mut self) {
        match self.state {
            State::TimeWait => self.finish(CloseReason::Normal),
            State::FinWait2 => self.finish(CloseReason::TimedOut),
            _ => {}
        }
    }

    /// Start (or restart) the keepalive idle time: the peer was just heard from. The
    /// test for keepalives inline (on every segment, and most connections have none).
    #[inline]
    pub(super) fn arm_keepalive(&mut self, now: Instant) {
        if self.cfg.keepalive.is_some() {
            self.restart_keepalive(now);
        }
    }

    fn restart_keepalive(&mut self, now: Instant) {
        if let Some(ka) = self.cfg.keepalive {
            if self.state.is_synchronized() {
                self.arm(Timer::Keepalive, now + ka.idle);
            }
        }
    }
}
