//! The TCP connection state machine (transmission control block), sans-IO.
//!
//! A [`Tcb`] takes parsed segments and the current time, and yields segments to send
//! ([`Tcb::poll_transmit_predicted`]), events for the application ([`Tcb::take_events`])
//! and when it wants to be woken ([`Tcb::take_wake`]). It never reads a clock and never touches a device;
//! the engine owns both. Section numbers refer to RFC 9293 unless said otherwise.
//!
//! What is implemented: all eleven states including simultaneous open and close; MSS,
//! window scale, timestamps with PAWS (RFC 7323), SACK (RFC 2018) both ways; the RFC
//! 6298 retransmission timer with Karn's rule or timestamp samples, backoff and a retry
//! limit; loss recovery over the sender's scoreboard (`scoreboard.rs`): SACK-based
//! recovery (RFC 6675: pipe, NextSeg, DupThresh, the rescue retransmission), RACK-TLP
//! (RFC 8985: time-based loss detection with a reordering window that D-SACKs widen,
//! tail loss probes), Proportional Rate Reduction (RFC 6937), duplicate ACKs and
//! partial ACKs for peers without SACK (RFC 5681, RFC 6582), undo of spurious
//! reductions on D-SACK (RFC 2883) or timestamps (Eifel, RFC 3522); congestion control
//! behind `CongestionControl` (`cc/`); delayed ACKs with immediate ACKs for
//! out-of-order data; bounded out-of-order reassembly; receiver and sender silly-window
//! avoidance; persist timer and zero-window probes; half-close; a RST for data that
//! arrives after the application closed (RFC 1122 §4.2.2.13); TIME-WAIT; the RFC 5961
//! defences (challenge ACKs for in-window RSTs and SYNs, ACK range check); keepalive.
//!
//! Decisions where the RFCs leave a choice, as Linux makes them: RACK marks losses by
//! time and, until reordering has been seen, DupThresh by count; a retransmission
//! timeout marks everything not SACKed lost (instead of going back N) and keeps the
//! SACK information; a tail loss probe needs SACK and resends the last segment when no
//! new data may go; an undo restores the window only upward.
//!
//! One mechanism per file:
//! - `mod.rs`: the block, its accessors and the application's calls (send, close,
//!   abort);
//! - `spaces.rs`: the send and receive sequence spaces;
//! - `recovery.rs`: loss recovery's state (PRR, undo, counters);
//! - `flags.rs`: one-bit states (output owed, the connection's flags);
//! - `limits.rs`: what the connection consults of the configuration;
//! - `open.rs`: active and passive open, SYN cookies, option negotiation;
//! - `input.rs`: segment arrival (§3.10.7), one step per check, received data and FIN;
//! - `fast.rs`: header prediction, a shortcut for the common segment through the same
//!   steps;
//! - `ack.rs`: ACK processing, RTT samples, loss detection, recovery with PRR, TLP and
//!   undo;
//! - `flight.rs`: the flight block, what the connection keeps about data in flight,
//!   from the engine's pool;
//! - `output.rs`: `poll_transmit`, packetisation, the advertised window;
//! - `timers.rs`: what each timer does when it fires;
//! - `deadlines.rs`: the timer kinds and their deadlines;
//! - `connection.rs`: the block as the application's `Connection`.

use crate::tcp::config::Keepalive;
use std::net::IpAddr;
use std::rc::Rc;
use std::time::Duration;

use bytes::Bytes;

use super::cc::Cc;
#[cfg(test)]
use super::cc::CongestionControl;
use super::pool::RingPool;
use super::recv_buffer::RecvBuffer;
use super::rtt::RttEstimator;
use super::scoreboard::RackKeep;
#[cfg(test)]
use super::segment::TxSegment;
use super::send_buffer::SendBuffer;
use super::seq::SeqNum;
use crate::app::{CloseReason, SendError};
use crate::time::Instant;
use deadlines::{Timer, TimerTable};

mod ack;
mod connection;
mod deadlines;
pub(crate) mod fast;
mod flags;
mod flight;
mod input;
mod limits;
mod open;
mod output;
mod recovery;
mod spaces;
mod timers;

pub(crate) use connection::TcbConn;
use flags::{ConnFlags, PendingOutput};
pub(crate) use flight::Flight;
pub(crate) use limits::TcbLimits;
pub(crate) use open::Open;
pub(crate) use open::{Opening, SynOptions};
pub(crate) use recovery::LossCounters;
use recovery::{Prr, Recovery, Undo};
use spaces::{RecvSeq, SendSeq};
#[cfg(test)]
pub(crate) use tests::part_sizes;

/// The connection states of RFC 9293 §3.3.2.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum State {
    /// No connection (also: the block is finished and may be dropped).
    Closed,
    /// Waiting for a SYN (listeners live in the engine; no block is in this state).
    Listen,
    /// Our SYN is sent; waiting for the peer's SYN.
    SynSent,
    /// Both SYNs seen; waiting for the ACK of ours.
    SynReceived,
    /// The handshake is done: data flows both ways.
    Established,
    /// We closed; our FIN is not acknowledged yet.
    FinWait1,
    /// Our FIN is acknowledged; waiting for the peer's.
    FinWait2,
    /// The peer closed; waiting for us to close.
    CloseWait,
    /// Both closed at once; waiting for the ACK of our FIN.
    Closing,
    /// The peer closed first, then we did; waiting for the ACK of our FIN.
    LastAck,
    /// Both FINs are acknowledged; waiting 2·MSL for stray segments.
    TimeWait,
}

impl State {
    /// States in which both sides' initial sequence numbers are known (RFC 9293 §3.10.7.4).
    pub fn is_synchronized(self) -> bool {
        !matches!(
            self,
            State::Closed | State::Listen | State::SynSent | State::SynReceived
        )
    }
}

/// Application-visible events raised by the state machine, drained by the engine.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Events {
    /// The three-way handshake completed.
    pub connected: bool,
    /// Send space was freed after the application was refused some bytes.
    pub writable: bool,
    /// The peer sent its FIN: no more data will arrive.
    pub peer_closed: bool,
    /// The connection is finished; the engine must drop the block.
    pub closed: Option<CloseReason>,
    /// The application's timer ([`Tcb::set_app_timer`]) fired.
    pub app_timer: bool,
}

impl Events {
    /// Nothing happened.
    #[cfg(test)]
    pub(crate) fn is_empty(&self) -> bool {
        *self == Events::default()
    }
}

/// What one incoming segment produced for the engine to act on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct RxOutcome {
    /// In-order payload bytes `payload[start..end]` for the application, taken straight
    /// from the frame (the receive buffer was empty). Whatever the application does not
    /// consume must be handed back with [`Tcb::keep_unconsumed`].
    pub deliver: Option<(usize, usize)>,
    /// The receive buffer holds new in-order bytes for the application.
    pub readable: bool,
    /// RFC 5961 asks for a challenge ACK; the engine applies its global rate limit and
    /// calls [`Tcb::send_challenge_ack`] if allowed.
    pub challenge_ack: bool,
    /// An ACK for an invalid segment (out of window, failing PAWS, or a challenge) was
    /// held back by the connection's rate limit.
    pub invalid_ack_suppressed: bool,
}

/// RFC 7323 timestamp state.
#[derive(Debug, Clone, Copy)]
struct Timestamps {
    /// TS.Recent: the peer's TSval to echo (§4.3).
    recent: u32,
    /// When TS.Recent was last updated, for the 24-day PAWS validity rule (§5.5).
    recent_age: Instant,
    /// Added to our millisecond clock so TSvals do not reveal uptime (§7.1).
    offset: u32,
}

impl Timestamps {
    /// SEG.TSval is older than TS.Recent, in 2^32 modular arithmetic (§5.3 R1).
    fn is_older(&self, tsval: u32) -> bool {
        (tsval.wrapping_sub(self.recent) as i32) < 0
    }

    /// Take a TSval as TS.Recent unless it is older (§4.3).
    fn update_recent(&mut self, tsval: u32, now: Instant) {
        if !self.is_older(tsval) {
            self.recent = tsval;
            self.recent_age = now;
        }
    }
}

/// A transmission control block: one TCP connection.
pub(crate) struct Tcb {
    state: State,
    snd: SendSeq,
    rcv: RecvSeq,
    recovery: Recovery,
    pending: PendingOutput,
    /// The timers, and out of line with the rarely armed ones, what is rarely set.
    timers: TimerTable<RareState>,

    rtt: RttEstimator,
    cc: Cc,
    /// What is in flight (the scoreboard, the timed segment, the recovery point, the
    /// tail loss probe): from the engine's pool while data is in flight or the send
    /// ring is kept, none while idle (`flight.rs`).
    flight: Option<Box<Flight>>,
    /// What RACK carries from one flight to the next while there is no flight block.
    rack: RackKeep,
    /// One-bit states, packed ([`ConnFlags`]).
    flags: ConnFlags,
    /// The last time new data was offered, the congestion window (not the application
    /// or the peer's window) was what held it back (RFC 7661). (A `bool`, not a bit:
    /// written as every segment goes out.)
    cwnd_limited: bool,
    /// The application was refused bytes: raise `writable` once send space frees up.
    /// (A `bool`, not a bit: tested on every ACK of new data.)
    want_writable: bool,
    last_send: Instant,
    last_recv: Instant,
    /// When the peer last acknowledged something new (our SYN or data): forward
    /// progress, which confirms the neighbour toward it reachable (RFC 4861 §7.3.1). The
    /// engine reads it only when the neighbour's reachability timer fires.
    last_progress: Option<Instant>,
    /// The time of the latest input, timer or output call: "now" for calls the
    /// application makes from its callbacks.
    last_now: Instant,
    /// Keepalive probes sent since the peer was last heard from (RFC 1122 §4.2.3.6).
    /// Saturating ([`reached`]).
    keepalive_sent: u8,

    // Settled by the handshake.
    /// Timestamps, when both sides agreed on them (RFC 7323 §3).
    ts: Option<Timestamps>,

    // For the application and the engine.
    events: Events,
    // The addresses are not kept: the engine's flow key holds the peer's address and
    // our port, the limits our address ([`TcbLimits::local_ip`]).
    /// Shared by the engine's connections (single-threaded, like the engine), until
    /// the application sets this one's keepalive ([`Tcb::set_keepalive`]).
    cfg: Rc<TcbLimits>,
}

/// A saturating counter kept in fewer bits than its configured `limit` (a `u32`) has
/// reached that limit; a limit the counter cannot hold counts as the counter's `max`
/// (2^16 - 1 retries or probes, 255 keepalive probes: one per RTO or probe interval,
/// far beyond any limit in use).
fn reached<C: Into<u32>>(count: C, limit: u32, max: C) -> bool {
    count.into() >= limit.min(max.into())
}

/// What a connection rarely sets, kept out of line with the rarely armed timers
/// ([`TimerTable::extra_mut`]): most connections never allocate it.
#[derive(Debug, Clone, Copy, Default)]
struct RareState {
    /// The user timeout (RFC 5482), from the configuration or the application.
    user_timeout: Option<Duration>,
    /// When we last answered an invalid segment (out of window, failing PAWS, or
    /// challenged per RFC 5961): such ACKs are sent at most once per
    /// [`TcpConfig::invalid_ack_interval`](crate::TcpConfig::invalid_ack_interval) per connection.
    last_invalid_ack: Option<Instant>,
    /// Owed to the peer ([`PendingOutput`]): a duplicate segment arrived, to report in
    /// the next ACK's first SACK block (D-SACK, RFC 2883 §4), so the sender can tell
    /// its retransmission was spurious.
    dsack: Option<(SeqNum, SeqNum)>,
    /// Owed to the peer: a RST, <SEQ=x><CTL=RST> for an unacceptable ACK, or our abort.
    rst: Option<(SeqNum, Option<SeqNum>)>,
}

impl Tcb {
    // ----- Accessors -----

    /// The connection's state.
    pub(crate) fn state(&self) -> State {
        self.state
    }
    /// When the peer last acknowledged something new (see `last_progress`), if ever.
    pub(crate) fn last_progress(&self) -> Option<Instant> {
        self.last_progress
    }
    /// Our address (the port is in the engine's flow key).
    pub(crate) fn local_ip(&self) -> IpAddr {
        self.cfg.local_ip
    }
    pub(crate) fn send_buffer(&self) -> &SendBuffer {
        &self.snd.buf
    }
    /// Copy the payload of `seg` (a segment [`Tcb::poll_transmit`] produced, not yet
    /// acknowledged) into `out`, which is `seg.payload_len` bytes long: what a driver of
    /// the state machine puts after the TCP header.
    #[cfg(test)]
    pub(crate) fn write_payload(&self, seg: &TxSegment, out: &mut [u8]) {
        self.snd.buf.copy_out(seg.payload_offset, out);
    }
    /// SND.UNA: the oldest sequence number not yet acknowledged.
    #[cfg(test)]
    pub(crate) fn snd_una(&self) -> SeqNum {
        self.snd.una
    }
    /// SND.NXT: the next sequence number to send.
    pub(crate) fn snd_nxt(&self) -> SeqNum {
        self.snd.nxt
    }
    /// RCV.NXT: the next sequence number expected from the peer.
    pub(crate) fn rcv_nxt(&self) -> SeqNum {
        self.rcv.nxt
    }
    /// SND.WND: the peer's receive window, in bytes (scaled).
    #[cfg(test)]
    pub(crate) fn snd_wnd(&self) -> usize {
        self.snd.wnd()
    }
    /// Payload bytes per full-sized segment we send (after the options on every one).
    #[cfg(test)]
    pub(crate) fn snd_mss(&self) -> usize {
        self.snd.mss()
    }
    /// The congestion window (RFC 5681), in bytes.
    #[cfg(test)]
    pub(crate) fn cwnd(&self) -> usize {
        self.cc.cwnd()
    }
    /// The slow-start threshold (RFC 5681 §3.1), in bytes.
    #[cfg(test)]
    pub(crate) fn ssthresh(&self) -> usize {
        self.cc.ssthresh()
    }
    /// The current retransmission timeout (RFC 6298), backoff included.
    #[cfg(test)]
    pub(crate) fn rto(&self) -> Duration {
        self.rtt.rto()
    }
    /// The smoothed round-trip time, once there is a sample (RFC 6298).
    #[cfg(test)]
    pub(crate) fn srtt(&self) -> Option<Duration> {
        self.rtt.srtt()
    }
    /// Both sides agreed on timestamps (RFC 7323).
    #[cfg(test)]
    pub(crate) fn timestamps_enabled(&self) -> bool {
        self.ts.is_some()
    }
    /// Both sides agreed on SACK (RFC 2018).
    #[cfg(test)]
    pub(crate) fn sack_enabled(&self) -> bool {
        self.flags.has(ConnFlags::SACK_OK)
    }
    /// Window-scale shifts (the peer's, ours); zeros unless both sides agreed.
    #[cfg(test)]
    pub(crate) fn window_scales(&self) -> (u8, u8) {
        (self.snd.wscale, self.rcv.wscale)
    }
    /// Let new data go out as TSO super-frames of up to `max_payload` bytes, which the
    /// device cuts into full segments ([`TxSegment::tso_mss`](super::segment::TxSegment::tso_mss)). Zero turns it off.
    pub(crate) fn set_tso(&mut self, max_payload: usize) {
        self.snd.tso_max = u16::try_from(max_payload).unwrap_or(u16::MAX);
    }

    /// Bytes the application may still queue by copy.
    pub(crate) fn send_space(&self) -> usize {
        if self.can_send() {
            self.snd.buf.space()
        } else {
            0
        }
    }
    /// Bytes in flight: sent and not yet acknowledged (sequence space).
    pub(crate) fn flight_size(&self) -> usize {
        self.snd.nxt.since(self.snd.una)
    }
    /// The connection has been fully closed and may be dropped.
    pub(crate) fn is_closed(&self) -> bool {
        self.state == State::Closed
    }
    /// Bytes of the receive buffer the application has not taken yet.
    pub(crate) fn readable_len(&self) -> usize {
        self.rcv.buf.readable_len()
    }
    /// TS.Recent and our timestamp offset, when timestamps are in use (for TIME-WAIT).
    pub(crate) fn timestamp_state(&self) -> Option<(u32, u32)> {
        self.ts.map(|t| (t.recent, t.offset))
    }
    /// When TIME-WAIT (or the FIN-WAIT-2 timeout) ends.
    pub(crate) fn linger_deadline(&self) -> Option<Instant> {
        self.timers.get(Timer::Linger)
    }
    /// Whether [`Tcb::take_counters`] may have anything to give: loss recovery's rare
    /// part, which holds the counters, exists (one test on the common path).
    #[inline]
    pub(crate) fn may_have_counters(&self) -> bool {
        self.recovery.cold.is_some()
    }
    /// Retransmissions and loss-recovery events since the last call.
    pub(crate) fn take_counters(&mut self) -> LossCounters {
        self.recovery.take_counters()
    }
    /// Number of consecutive retransmission timeouts without progress.
    #[cfg(test)]
    pub(crate) fn retries(&self) -> u32 {
        u32::from(self.recovery.retries)
    }

    /// What the application has not read yet, as one contiguous slice (the receive buffer
    /// may hold more after it).
    #[cfg(test)]
    pub(crate) fn readable(&self) -> &[u8] {
        self.rcv.buf.readable()
    }

    /// Take the receive buffer out so the application can read it while it also holds a
    /// mutable handle on the connection; give it back with [`Tcb::put_recv_buffer`].
    pub(crate) fn take_recv_buffer(&mut self) -> RecvBuffer {
        std::mem::replace(&mut self.rcv.buf, RecvBuffer::new(0, 0))
    }

    pub(crate) fn put_recv_buffer(&mut self, buf: RecvBuffer) {
        self.rcv.buf = buf;
        self.maybe_window_update();
    }

    /// The events raised since the last call, for the application.
    pub(crate) fn take_events(&mut self) -> Events {
        std::mem::take(&mut self.events)
    }

    fn can_send(&self) -> bool {
        matches!(
            self.state,
            State::SynSent | State::SynReceived | State::Established | State::CloseWait
        ) && !self.snd.fin_queued
    }

    // ----- Application calls -----

    /// Queue a copy of `data`; returns how many bytes fit. When not all fit, a
    /// `writable` event follows once space frees up.
    pub(crate) fn send(&mut self, data: &[u8], pool: &mut RingPool) -> Result<usize, SendError> {
        if !self.can_send() {
            return Err(SendError::Closed);
        }
        let n = self.snd.buf.push_copy(data, pool);
        if n < data.len() {
            self.want_writable = true;
        }
        Ok(n)
    }

    /// Queue shared immutable bytes without copying them; retransmissions re-read them.
    pub(crate) fn send_shared(&mut self, data: Bytes) -> Result<(), SendError> {
        if !self.can_send() {
            return Err(SendError::Closed);
        }
        self.snd.buf.push_shared(data);
        Ok(())
    }

    /// Queue `body[range]` by reference with its precomputed checksums (see
    /// [`SummedBytes`](crate::checksum::SummedBytes)).
    pub(crate) fn send_summed(
        &mut self,
        body: &crate::checksum::SummedBytes,
        range: std::ops::Range<usize>,
    ) -> Result<(), SendError> {
        if !self.can_send() {
            return Err(SendError::Closed);
        }
        self.snd.buf.push_summed(body, range);
        Ok(())
    }

    /// Ask for a `writable` event the next time acknowledged bytes free send space.
    pub(crate) fn notify_writable(&mut self) {
        self.want_writable = true;
    }

    /// Close our sending side after the queued data (CLOSE call, §3.10.4), keeping the
    /// receive side open: a half-close.
    pub(crate) fn shutdown_write(&mut self) {
        if self.snd.fin_queued {
            return;
        }
        match self.state {
            State::SynSent => self.finish(CloseReason::Normal),
            State::SynReceived | State::Established => {
                self.snd.queue_fin();
                if self.state == State::Established {
                    self.state = State::FinWait1;
                }
            }
            State::CloseWait => {
                self.snd.queue_fin();
                self.state = State::LastAck;
            }
            _ => {}
        }
    }

    /// Graceful close of both directions: FIN after queued data; data that arrives within
    /// [`TcpConfig::close_linger`](super::config::TcpConfig::close_linger) is
    /// acknowledged and discarded, data after that resets the connection.
    pub(crate) fn close(&mut self) {
        if !self.rcv.closed {
            self.rcv.discard_until = self.last_now + self.cfg.close_linger;
        }
        self.rcv.closed = true;
        self.shutdown_write();
        if self.state == State::FinWait2 {
            self.arm(Timer::Linger, self.last_recv + self.cfg.fin_wait2_timeout);
        }
        // An orphan now: its stall, if one is going on, is bounded by the orphan
        // timeout too.
        self.arm_give_up();
    }

    /// Abort (§3.10.5): send a RST if synchronized, drop everything, close now.
    pub(crate) fn abort(&mut self) {
        if matches!(
            self.state,
            State::SynReceived
                | State::Established
                | State::FinWait1
                | State::FinWait2
                | State::CloseWait
        ) {
            self.queue_rst(self.acceptable_seq(), None);
        }
        self.finish(CloseReason::Aborted);
    }

    /// The sequence number of a segment we send without data of its own (a bare ACK, or
    /// a RST we send on our own): SND.NXT in the RFC's sense, the highest sequence
    /// number sent (our snd_nxt may have been rewound by a timeout), but not past what
    /// the peer takes. After a zero-window probe, or a FIN sent one past the window,
    /// SND.MAX lies beyond the window and the only acceptable number is the edge
    /// (RCV.NXT = SND.UNA under a shut window): a peer drops anything else as
    /// unacceptable, or (a RST, RFC 5961 §3.2) answers it with a challenge ACK instead
    /// of resetting (Linux tcp_acceptable_seq caps it likewise).
    ///
    /// One exception: a peer's window field is its window shifted right by its scale,
    /// rounded down, so the edge we know may lie up to 2^shift - 1 bytes short of the
    /// real one. A segment sent when the peer offered more (the flight block keeps the
    /// furthest edge offered) may end past the edge now shown and still have been taken
    /// whole; numbered at the edge, the ACK would lie below the peer's RCV.NXT and be
    /// dropped unread, and two peers so placed, each holding the other's data, would
    /// drop each other's ACKs and window updates for ever. SND.MAX within that rounding
    /// is kept when it was inside an edge offered before (Linux allows the same slack);
    /// a peer that really took back what it offered gets the edge.
    #[inline]
    fn acceptable_seq(&self) -> SeqNum {
        let wnd_end = self.wnd_end();
        if self.snd.max <= wnd_end {
            return self.snd.max;
        }
        let rounding = (1usize << self.snd.wscale) - 1;
        let offered = self.flight.as_deref().map_or(wnd_end, |f| f.edge);
        if self.snd.max.since(wnd_end) <= rounding && self.snd.max <= offered {
            self.snd.max
        } else {
            wnd_end
        }
    }

    /// The right edge of the peer's window as it stands: SND.UNA + SND.WND.
    #[inline]
    pub(super) fn wnd_end(&self) -> SeqNum {
        self.snd.una + self.snd.wnd()
    }

    /// Give up on the connection, resetting the peer (in any synchronized state before
    /// TIME-WAIT, CLOSING and LAST-ACK included: unlike the application's abort, the
    /// peer may still be holding data or a window open for us) and reporting `reason`.
    pub(crate) fn reset(&mut self, reason: CloseReason) {
        if self.state.is_synchronized() && self.state != State::TimeWait
            || self.state == State::SynReceived
        {
            self.queue_rst(self.acceptable_seq(), None);
        }
        self.finish(reason);
    }

    /// The application has closed the connection (FIN queued, nothing will be read) and
    /// it is not finished: an orphan, bounded by [`TcpConfig::orphan_retries`](super::config::TcpConfig::orphan_retries) and
    /// [`TcpConfig::orphan_timeout`](super::config::TcpConfig).
    pub(crate) fn is_orphan(&self) -> bool {
        self.rcv.closed
            && matches!(
                self.state,
                State::FinWait1 | State::FinWait2 | State::Closing | State::LastAck
            )
    }

    /// Set (or clear) the user timeout (RFC 5482; RFC 9293 §3.10.1 USER TIMEOUT).
    pub(crate) fn set_user_timeout(&mut self, timeout: Option<Duration>) {
        if timeout.is_some() || self.user_timeout().is_some() {
            self.timers.extra_mut().user_timeout = timeout;
        }
        self.timers.stop(Timer::GiveUp);
        self.arm_give_up();
    }

    /// Set this connection's keepalive (RFC 1122 §4.2.3.6), `None` for none, in place
    /// of the configuration's; the idle time counts from now. One that differs is kept
    /// in limits of the connection's own, a copy of the shared ones: what the data path
    /// reads stays one field of the limits, and the rare state keeps its size.
    pub(crate) fn set_keepalive(&mut self, keepalive: Option<Keepalive>) {
        if self.cfg.keepalive != keepalive {
            Rc::make_mut(&mut self.cfg).keepalive = keepalive;
        }
        self.keepalive_sent = 0;
        self.timers.stop(Timer::Keepalive);
        self.arm_keepalive(self.last_now);
    }

    /// The user timeout (RFC 5482), if one is set ([`RareState::user_timeout`]).
    fn user_timeout(&self) -> Option<Duration> {
        self.timers.extra().and_then(|r| r.user_timeout)
    }

    /// Report the duplicate `range` in the next ACK (D-SACK, RFC 2883 §4).
    fn queue_dsack(&mut self, range: (SeqNum, SeqNum)) {
        self.timers.extra_mut().dsack = Some(range);
        self.pending.set(PendingOutput::DSACK);
    }

    #[inline]
    fn take_pending_dsack(&mut self) -> Option<(SeqNum, SeqNum)> {
        if !self.pending.has(PendingOutput::DSACK) {
            return None;
        }
        self.pending.clear(PendingOutput::DSACK);
        self.timers.extra_if_set()?.dsack.take()
    }

    /// Send a RST `<SEQ=seq><ACK=ack>` (with ACK when `ack` is given).
    fn queue_rst(&mut self, seq: SeqNum, ack: Option<SeqNum>) {
        self.timers.extra_mut().rst = Some((seq, ack));
        self.pending.set(PendingOutput::RST);
    }

    #[inline]
    fn take_pending_rst(&mut self) -> Option<(SeqNum, Option<SeqNum>)> {
        if !self.pending.has(PendingOutput::RST) {
            return None;
        }
        self.pending.clear(PendingOutput::RST);
        self.timers.extra_if_set()?.rst.take()
    }

    /// When we last answered an invalid segment ([`RareState::last_invalid_ack`]).
    fn last_invalid_ack(&self) -> Option<Instant> {
        self.timers.extra().and_then(|r| r.last_invalid_ack)
    }

    /// How long the connection may make no progress before it gives up: the user
    /// timeout, and for an orphan the orphan timeout, whichever is tighter.
    fn give_up_after(&self) -> Option<Duration> {
        let orphan = self.is_orphan().then_some(self.cfg.orphan_timeout);
        match (self.user_timeout(), orphan) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// While something is outstanding (sent and not acknowledged: data, FIN or a
    /// zero-window probe), arm the give-up timer at the bound counted from
    /// `stall_from`. Called where a stall shows (a retransmission timeout, a persist
    /// probe) and when the bound changes; progress stops the timer
    /// ([`Tcb::on_progress`]), so the data path does not re-arm it.
    fn arm_give_up(&mut self) {
        if self.snd.max == self.snd.una || !self.state.is_synchronized() {
            return;
        }
        if let Some(bound) = self.give_up_after() {
            self.arm(Timer::GiveUp, self.snd.stall_from + bound);
        }
    }

    /// SND.UNA advanced or the peer's window opened: the stall counters start afresh.
    #[inline]
    fn on_progress(&mut self, now: Instant) {
        self.snd.stall_from = now;
        self.snd.stalled_probes = 0;
        self.timers.stop(Timer::GiveUp);
    }

    /// The engine's rate limiter allowed a challenge ACK (RFC 5961 §7).
    pub(crate) fn send_challenge_ack(&mut self) {
        self.pending.set(PendingOutput::ACK_NOW);
    }

    /// Hand back the part of a directly delivered payload the application did not
    /// consume; it is kept in the receive buffer and offered again later.
    pub(crate) fn keep_unconsumed(&mut self, rest: &[u8], pool: &mut RingPool) {
        if !rest.is_empty() {
            self.rcv.buf.keep(rest, pool);
        }
    }

    /// The application consumed `n` bytes of [`Tcb::readable`].
    #[cfg(test)]
    pub(crate) fn consume(&mut self, n: usize, pool: &mut RingPool) {
        self.rcv.buf.consume(n, pool);
        self.maybe_window_update();
    }

    /// Whether the connection keeps, with nothing in flight, what it sends its next
    /// response with: an empty send ring (see `SendBuffer`'s memory rules) or its
    /// flight block (`flight.rs`). The engine lists such connections for its idle
    /// sweep ([`Tcb::release_idle_send_ring`]).
    pub(crate) fn holds_idle_send_ring(&self) -> bool {
        self.snd.buf.holds_empty_ring() || (self.flight.is_some() && self.snd.una == self.snd.max)
    }

    /// Give back the empty ring the send buffer keeps and the flight block, if nothing
    /// was sent since `quiet_since`; returns whether the connection still keeps either
    /// (a flight block stays while something in it is still in use, say a recovery
    /// point not passed yet: rare, and retried at the next sweep).
    pub(crate) fn release_idle_send_ring(
        &mut self,
        quiet_since: Instant,
        pool: &mut RingPool,
    ) -> bool {
        if !self.holds_idle_send_ring() {
            return false;
        }
        if self.last_send > quiet_since {
            return true;
        }
        self.snd.buf.release_idle_ring(pool);
        self.end_flight(pool);
        self.flight.is_some()
    }

    /// Give both buffers' storage back to `pool`: the block is going away (closed, or
    /// replaced by a compact TIME-WAIT entry). A block dropped without this frees its
    /// storage to the allocator instead.
    pub(crate) fn release_buffers(&mut self, pool: &mut RingPool) {
        self.drop_flight(pool);
        self.snd.buf.release(pool);
        self.rcv.buf.release(pool);
    }

    /// Receiver SWS avoidance (§3.8.6.2.2): announce a larger window only once it has
    /// grown by min(buffer/2, MSS) past what we last advertised.
    fn maybe_window_update(&mut self) {
        if !self.state.is_synchronized() && self.state != State::SynReceived {
            return;
        }
        let edge = self.rcv.nxt + self.rcv.buf.window();
        let grown = edge.since(self.rcv.adv);
        let threshold = self.rcv.sws_threshold();
        if grown >= threshold && self.rcv.adv.since(self.rcv.nxt) < threshold {
            self.pending.set(PendingOutput::ACK_NOW);
        }
    }

    /// The connection is over (CLOSED): stop every timer, drop what was still to be sent
    /// but a RST, and tell the engine why.
    fn finish(&mut self, reason: CloseReason) {
        self.state = State::Closed;
        self.events.closed = Some(reason);
        self.timers.stop_all();
        self.pending.clear(PendingOutput::ACK_NOW);
        // No ACK is owed any more: the next `poll_transmit` must not arm the
        // delayed-ACK timer for data that arrived before the end.
        self.rcv.unacked_segs = 0;
        self.pending.clear(PendingOutput::SYN);
        self.pending.clear(PendingOutput::PROBE);
        self.pending.clear(PendingOutput::TLP);
        if let Some(flight) = self.flight.as_deref_mut() {
            flight.board.clear();
        }
        self.pending.clear(PendingOutput::KEEPALIVE_PROBE);
    }
}

impl std::fmt::Debug for Tcb {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tcb")
            .field("state", &self.state)
            .field("snd_una", &self.snd.una)
            .field("snd_nxt", &self.snd.nxt)
            .field("snd_max", &self.snd.max)
            .field("snd_wnd", &self.snd.wnd)
            .field("rcv_nxt", &self.rcv.nxt)
            .field("send_queued", &self.snd.buf.len())
            .field("readable", &self.rcv.buf.readable_len())
            .finish()
    }
}

#[cfg(test)]
mod tests;
