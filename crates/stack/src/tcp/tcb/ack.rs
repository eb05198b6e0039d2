//! ACK processing (§3.10.7.4, fifth check): the RFC 5961 §5.2 range test, SND.UNA and
//! the send window, RTT samples (RFC 7323 §4.1, Karn), duplicate ACKs and NewReno
//! recovery (RFC 5681 §3.2, RFC 6582 §3.2), and our FIN being acknowledged.

use std::time::Duration;

use super::timer_table::Timer;
use super::{CloseReason, RxOutcome, State, Tcb};
use crate::tcp::cc::{AckSample, CongestionControl};
use crate::tcp::options::ts_clock;
use crate::tcp::pool::RingPool;
use crate::tcp::segment::Segment;
use crate::tcp::seq::SeqNum;
use crate::time::Instant;

impl Tcb {
    /// The ACK field of an acceptable segment in a synchronized state. Returns false
    /// when the segment must be dropped after the ACK check.
    pub(super) fn process_ack(
        &mut self,
        now: Instant,
        seg: &Segment,
        out: &mut RxOutcome,
        pool: &mut RingPool,
    ) -> bool {
        // RFC 5961 §5.2: acceptable ACKs lie in [SND.UNA - MAX.SND.WND, SND.NXT].
        if seg.ack > self.snd.max {
            self.pending.ack_now = true;
            return false;
        }
        let oldest = SeqNum(
            self.snd
                .una
                .0
                .wrapping_sub(self.snd.max_wnd.min(1 << 30) as u32),
        );
        if seg.ack < oldest {
            out.challenge_ack = true;
            return false;
        }
        // An acceptable ACK: the peer is alive and answering (RFC 1122 §4.2.2.17 keeps
        // a zero-window connection open as long as probes are answered).
        self.snd.persist_probes = 0;

        let old_wnd = self.snd.wnd;
        if self.snd.una < seg.ack {
            self.ack_advance(now, seg, pool);
        } else if seg.ack == self.snd.una
            && seg.payload_len == 0
            && !seg.flags.fin
            && self.snd.max > self.snd.una
            && ((seg.window as usize) << self.snd.wscale) == old_wnd
            // Answers to zero-window probes are not loss signals.
            && old_wnd != 0
        {
            self.on_dup_ack(now);
        }

        // Window update (§3.10.7.4): only for SND.UNA =< SEG.ACK, and only from a segment
        // no older than the last update (SND.WL1/WL2 rule).
        if self.snd.una <= seg.ack
            && (self.snd.wl1 < seg.seq || (self.snd.wl1 == seg.seq && self.snd.wl2 <= seg.ack))
        {
            let wnd = (seg.window as usize) << self.snd.wscale;
            self.snd.update_window(wnd, seg.seq, seg.ack);
            if self.snd.wnd > 0 && self.timers.is_armed(Timer::Persist) {
                // Leave persist mode. Persist starts with nothing in flight, so only
                // probe bytes can be outstanding: those the peer did not take are sent
                // again at once as ordinary data rather than after an RTO.
                self.timers.stop(Timer::Persist);
                self.snd.persist_backoff = 0;
                self.snd.nxt = self.snd.una;
                if self.snd.max > self.snd.una {
                    self.timers.set(Timer::Rto, now + self.rtt.rto());
                }
            }
        }

        // State changes driven by our FIN being acknowledged.
        let fin_acked = self.snd.fin_acked();
        match self.state {
            State::FinWait1 if fin_acked => {
                self.state = State::FinWait2;
                if self.rcv.closed {
                    self.timers
                        .set(Timer::Linger, now + self.cfg.fin_wait2_timeout);
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

    /// SND.UNA < SEG.ACK: new data acknowledged.
    pub(super) fn ack_advance(&mut self, now: Instant, seg: &Segment, pool: &mut RingPool) {
        let ack = seg.ack;
        let mut acked = ack.since(self.snd.una);
        if !self.snd.syn_acked {
            // The first ACK covers our SYN, which is not in the send buffer.
            self.snd.syn_acked = true;
            acked = acked.saturating_sub(1);
        }
        let data_acked = acked.min(self.snd.buf.len());
        self.snd.buf.consume(data_acked, pool);
        self.snd.una = ack;
        if self.snd.nxt < ack {
            self.snd.nxt = ack;
        }
        self.recovery.retries = 0;

        // RTT sample: timestamps when the peer echoes ours (RFC 7323 §4.1), else Karn.
        let mut sampled = false;
        if let (Some(ts), Some((_, tsecr))) = (self.ts, seg.timestamp) {
            if tsecr != 0 {
                let delta = ts_clock(now, ts.offset).wrapping_sub(tsecr);
                if (delta as i32) >= 0 {
                    self.rtt.sample(Duration::from_millis(delta as u64));
                    sampled = true;
                }
            }
        }
        if let Some((seq, sent)) = self.rtt_seq {
            if ack >= seq {
                if !sampled {
                    self.rtt.sample(now - sent);
                }
                self.rtt_seq = None;
            }
        }

        // Congestion control and NewReno recovery (RFC 6582 §3.2).
        if self.recovery.in_recovery {
            if self.recovery.recover.is_none_or(|r| ack >= r) {
                self.recovery.in_recovery = false;
                let flight = self.snd.max.since(ack);
                let _ = flight;
                self.cc.on_recovery_end(now);
            } else {
                self.recovery.retransmit_una = true;
                self.timers.set(Timer::Rto, now + self.rtt.rto());
            }
        } else {
            self.cc.on_ack(&AckSample {
                now,
                delivered: data_acked,
                rtt: None,
                srtt: self.rtt.srtt(),
                una: self.snd.una,
                snd_max: self.snd.max,
                app_limited: false,
            });
        }
        if !self.recovery.in_recovery && self.recovery.recover.is_some_and(|r| ack >= r) {
            // SND.UNA has passed "recover": it no longer holds anything back.
            self.recovery.recover = None;
        }
        self.recovery.dupacks = 0;

        // RFC 6298 §5.2/5.3: stop the timer when all is acked, else restart it.
        if self.snd.una == self.snd.max {
            self.timers.stop(Timer::Rto);
        } else if !(self.recovery.in_recovery && self.recovery.retransmit_una) {
            self.timers.set(Timer::Rto, now + self.rtt.rto());
        }

        if self.want_writable && data_acked > 0 && self.snd.buf.space() > 0 && self.can_send() {
            self.want_writable = false;
            self.events.writable = true;
        }
    }

    /// RFC 5681 §3.2 / RFC 6582 §3.2: duplicate ACKs.
    fn on_dup_ack(&mut self, now: Instant) {
        self.recovery.dupacks += 1;
        if self.recovery.in_recovery {
        } else if self.recovery.dupacks == 3 {
            // RFC 6582 §3.2 step 2: only if the ACK covers more than "recover" (avoid
            // a second reduction for losses of the same window).
            if self.recovery.recover.is_none_or(|r| self.snd.una >= r) {
                self.recovery.in_recovery = true;
                self.recovery.recover = Some(self.snd.max);
                self.cc.on_congestion(self.flight_size(), now);
                self.recovery.retransmit_una = true;
                self.rtt_seq = None;
            }
        }
    }
}
