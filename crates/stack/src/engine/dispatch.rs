//! From the TCP state machine to the application: a segment or a timer goes into a
//! connection's [`Tcb`](crate::tcp::tcb::Tcb), and the events it raises go to the [`AppCore`](crate::app),
//! which decides the callbacks. Also the engine's timers and the RFC 5961 challenge-ACK
//! budget.

use std::net::SocketAddr;

use super::challenge_budget;
use super::output::schedule_wake;
use super::{Block, Engine, TimerItem};
use crate::app::{AppConn, CloseReason, Connection, Handler};
use crate::io::PacketIo;
use crate::tcp::pool::RingPool;
use crate::tcp::recv_buffer::RecvBuffer;
use crate::tcp::segment::Segment;
use crate::tcp::tcb::{Events, RxOutcome, TcbConn};
use crate::time::{Clock, Instant};

impl AppConn for Block {
    /// The engine's ring pool, which the buffers take storage from and give it back to.
    type Ctx = RingPool;
    type Unread = RecvBuffer;

    #[inline]
    fn with_ops<R>(&mut self, pool: &mut RingPool, f: impl FnOnce(&mut dyn Connection) -> R) -> R {
        f(&mut TcbConn {
            tcb: &mut self.tcb,
            pool,
            key: &self.key,
        })
    }
    fn addrs(&self) -> (SocketAddr, SocketAddr) {
        let k = &self.key;
        (
            SocketAddr::new(self.tcb.local_ip(), k.local_port),
            SocketAddr::new(k.remote_ip(), k.remote_port),
        )
    }
    fn is_closed(&self) -> bool {
        self.tcb.is_closed()
    }
    fn unread_len(&self) -> usize {
        self.tcb.readable_len()
    }
    fn take_unread(&mut self) -> RecvBuffer {
        self.tcb.take_recv_buffer()
    }
    fn put_unread(
        &mut self,
        mut buf: RecvBuffer,
        consumed: usize,
        contiguous: bool,
        pool: &mut RingPool,
    ) {
        buf.consume(consumed, pool);
        if contiguous {
            buf.make_contiguous();
        }
        self.tcb.put_recv_buffer(buf);
    }
    fn keep_unread(&mut self, rest: &[u8], pool: &mut RingPool) {
        self.tcb.keep_unconsumed(rest, pool);
    }
}

impl<D: PacketIo, H: Handler, C: Clock> Engine<D, H, C> {
    /// A segment for the connection in slot `index`.
    // Always inlined: every segment of a connection passes here, from one call site in the
    // receive loop; out of line, the loop's state is spilled around the call.
    #[inline(always)]
    pub(super) fn conn_input(&mut self, index: usize, seg: &Segment, payload: &[u8]) {
        let tcb = &mut self.app[index].tcb;
        let outcome = tcb.on_segment(self.now, seg, payload, &mut self.pool);
        let ev = tcb.take_events();
        if outcome.challenge_ack && self.allow_challenge() {
            self.app[index].tcb.send_challenge_ack();
        }
        if outcome.invalid_ack_suppressed {
            self.stats.invalid_acks_suppressed += 1;
        }
        self.dispatch_events(index, ev, outcome, payload);
    }

    /// RFC 5961 §7: a global budget of challenge ACKs per second, drawn at random each
    /// second between half and one and a half times `challenge_ack_limit`: a fixed
    /// budget shared by every connection is the side channel of CVE-2016-5696 (an
    /// off-path attacker exhausts it and counts the challenge ACKs a victim connection
    /// still gets). Linux 4.7 randomised it the same way; the per-connection limit
    /// ([`TcpConfig::invalid_ack_interval`](crate::TcpConfig)) applied first.
    fn allow_challenge(&mut self) -> bool {
        if self.now - self.challenge_window >= std::time::Duration::from_secs(1) {
            self.challenge_window = self.now;
            self.challenge_count = 0;
            self.challenge_budget =
                challenge_budget(&mut self.rng, self.cfg.tcp.challenge_ack_limit);
        }
        if self.challenge_count < self.challenge_budget {
            self.challenge_count += 1;
            self.stats.challenge_acks += 1;
            true
        } else {
            self.stats.challenge_acks_suppressed += 1;
            false
        }
    }

    /// Hand the events of input or a timer to the application core, and mark the
    /// connection for [`flush_dirty`](Self::flush_dirty). `payload` is the segment's,
    /// for bytes the state machine delivers straight from the frame.
    pub(super) fn dispatch(&mut self, index: usize, outcome: RxOutcome, payload: &[u8]) {
        let ev = self.app[index].tcb.take_events();
        self.dispatch_events(index, ev, outcome, payload);
    }

    /// [`dispatch`](Self::dispatch) of the events `ev` already taken from the
    /// connection (by the caller that had its block at hand: one table look-up less).
    // Always inlined: called once per segment from `conn_input` alone (see there).
    #[inline(always)]
    fn dispatch_events(&mut self, index: usize, ev: Events, outcome: RxOutcome, payload: &[u8]) {
        if ev.connected {
            self.release_half_open(index);
            if !self.app.accept(index, &mut self.stats) {
                self.app[index].tcb.abort();
            }
            self.app.connected(&mut self.pool, index);
        }
        let (app, pool) = (&mut self.app, &mut self.pool);
        // New in-order bytes: straight from the frame, or stored behind unread ones.
        // A handler that paused is offered its unread bytes again only then (and after
        // `writable`, or on `resume_receive`), as on every backend.
        match outcome.deliver {
            Some((a, b)) => app.data(pool, index, &payload[a..b]),
            None if outcome.readable => app.data(pool, index, &[]),
            None => {}
        }
        if ev.writable {
            app.writable(pool, index);
        }
        if ev.peer_closed {
            app.peer_closed(pool, index);
        }
        if ev.app_timer {
            app.timer(pool, index);
        }
        // Callbacks may have closed or aborted the connection.
        let block = &mut app[index];
        let Some(reason) = ev.closed.or(block.tcb.take_events().closed) else {
            // The common case, with the block at hand: mark it dirty here.
            let adopt = !block.orphan && block.tcb.is_orphan();
            if !block.dirty {
                block.dirty = true;
                self.dirty.push(index);
            }
            if adopt {
                self.adopt_orphan(index);
            }
            return;
        };
        self.release_half_open(index);
        if reason == CloseReason::TimedOut && self.app[index].orphan {
            self.stats.orphans_timed_out += 1;
        }
        self.app
            .finish(&mut self.pool, index, reason, &mut self.stats);
        self.mark_dirty(index);
    }

    pub(super) fn run_timers(&mut self) {
        self.time_wait.expire(self.now, &mut self.flows);
        if self.timers.quiet(self.now) {
            // Nothing due in the wheel and no tick passed: no scratch vector to touch.
            return;
        }
        let mut expired = std::mem::take(&mut self.expired);
        self.timers.expire(self.now, &mut expired);
        for &item in &expired {
            match item {
                TimerItem::Conn { id, at } => {
                    let Some(index) = self.app.index_of(id) else {
                        continue;
                    };
                    let block = &mut self.app[index];
                    let far = at == block.far_wake;
                    if far {
                        block.far_wake = Instant::FAR_FUTURE;
                    }
                    match block.tcb.wake_at() {
                        // Nothing armed any more.
                        None => continue,
                        // Early: a stale entry (an earlier wake-up came since), or the
                        // connection's far entry standing in for a later wake-up, which
                        // now gets an entry of its own.
                        Some(wake) if at < wake => {
                            if far {
                                schedule_wake(&mut self.timers, self.now, block, id, wake);
                            }
                            continue;
                        }
                        Some(_) => {}
                    }
                    block.tcb.on_timer(self.now);
                    self.dispatch(index, RxOutcome::default(), &[]);
                }
            }
        }
        expired.clear();
        self.expired = expired;
    }
}
