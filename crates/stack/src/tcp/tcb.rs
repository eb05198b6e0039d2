//! The TCP connection state machine (transmission control block), sans-IO.
//!
//! A [`Tcb`] takes parsed segments and the current time, and yields segments to send
//! ([`Tcb::poll_transmit`]), events for the application ([`Tcb::take_events`]) and its next
//! deadline ([`Tcb::next_deadline`]). It never reads a clock and never touches a device;
//! the engine owns both. Section numbers refer to RFC 9293 unless said otherwise.
//!
//! What is implemented: all eleven states including simultaneous open and close; MSS,
//! window scale, timestamps with PAWS (RFC 7323), SACK-permitted and SACK blocks on the
//! receive side (RFC 2018); the RFC 6298 retransmission timer with Karn's rule or
//! timestamp samples, backoff and a retry limit; NewReno congestion control (RFC 5681,
//! RFC 6582) behind [`CongestionControl`]; delayed ACKs with immediate ACKs for
//! out-of-order data; bounded out-of-order reassembly; receiver and sender silly-window
//! avoidance; persist timer and zero-window probes; half-close; TIME-WAIT; the RFC 5961
//! defences (challenge ACKs for in-window RSTs and SYNs, ACK range check); keepalive.

use std::net::SocketAddrV4;
use std::time::Duration;

use bytes::Bytes;

use super::cc::{Cc, CongestionControl, NewReno};
use super::config::TcpConfig;
use super::options::{ts_clock, DEFAULT_MSS, TS_OPTION_LEN};
use super::recv_buffer::RecvBuffer;
use super::rtt::RttEstimator;
use super::segment::{Segment, TxSegment};
use super::send_buffer::SendBuffer;
use super::seq::SeqNum;
use crate::time::Instant;
use timer_table::{Timer, TimerTable};

mod timer_table;

/// The connection states of RFC 9293 §3.3.2.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum State {
    Closed,
    Listen,
    SynSent,
    SynReceived,
    Established,
    FinWait1,
    FinWait2,
    CloseWait,
    Closing,
    LastAck,
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

/// Why a connection ended; handed to the application's `closed` callback.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CloseReason {
    /// Both sides closed gracefully.
    Normal,
    /// The peer reset the connection.
    Reset,
    /// The peer refused an active open (RST in reply to our SYN).
    Refused,
    /// Retransmissions, keepalive probes or FIN-WAIT-2 ran out of time.
    TimedOut,
    /// The application aborted the connection (we sent a RST).
    Aborted,
}

/// Application-visible events raised by the state machine, drained by the engine.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Events {
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
    pub fn is_empty(&self) -> bool {
        *self == Events::default()
    }
}

/// What one incoming segment produced for the engine to act on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RxOutcome {
    /// In-order payload bytes `payload[start..end]` for the application, taken straight
    /// from the frame (the receive buffer was empty). Whatever the application does not
    /// consume must be handed back with [`Tcb::keep_unconsumed`].
    pub deliver: Option<(usize, usize)>,
    /// The receive buffer holds new in-order bytes for the application.
    pub readable: bool,
    /// RFC 5961 asks for a challenge ACK; the engine applies its global rate limit and
    /// calls [`Tcb::send_challenge_ack`] if allowed.
    pub challenge_ack: bool,
}

/// Errors of the application-facing send calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SendError {
    /// The sending side is closed (FIN queued, or the connection is gone).
    Closed,
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

/// PAWS: TS.Recent older than this is no longer trusted (RFC 7323 §5.5).
const PAWS_IDLE: Duration = Duration::from_secs(24 * 24 * 3600);

/// A transmission control block: one TCP connection.
pub struct Tcb {
    state: State,
    snd: SendSeq,
    rcv: RecvSeq,
    recovery: Recovery,
    pending: PendingOutput,
    timers: TimerTable,

    rtt: RttEstimator,
    /// The segment being timed for an RTT sample (Karn's rule: none if retransmitted).
    rtt_seq: Option<(SeqNum, Instant)>,
    cc: Cc,
    last_send: Instant,
    last_recv: Instant,
    /// The time of the latest input, timer or output call: "now" for calls the
    /// application makes from its callbacks.
    last_now: Instant,
    /// Keepalive probes sent since the peer was last heard from (RFC 1122 §4.2.3.6).
    keepalive_sent: u32,

    // Settled by the handshake.
    ts: Option<Timestamps>,
    sack_ok: bool,
    /// Both sides agreed on window scaling.
    ws_ok: bool,
    /// The connection began with an active open (it came through SYN-SENT): a RST in
    /// SYN-RECEIVED then means "connection refused" (§3.10.7.4).
    active_open: bool,

    // For the application and the engine.
    events: Events,
    /// The application was refused bytes: raise `writable` once send space frees up.
    want_writable: bool,
    /// Segments sent again (timeouts, fast retransmit, SYN retries), for statistics.
    retransmissions: u64,
    local: SocketAddrV4,
    remote: SocketAddrV4,
    cfg: TcbLimits,
}

/// The send sequence space (RFC 9293 §3.3.1: ISS, SND.UNA, SND.NXT, SND.WND, SND.WL1,
/// SND.WL2), what RFC 7323 and RFC 5961 add to it, the send buffer, our FIN and the
/// persist state of zero-window probing (§3.8.6.1).
struct SendSeq {
    iss: SeqNum,
    una: SeqNum,
    nxt: SeqNum,
    /// SND.MAX: the highest sequence number sent so far (SND.NXT can be rewound by a
    /// timeout).
    max: SeqNum,
    wnd: usize,
    wl1: SeqNum,
    wl2: SeqNum,
    /// MAX.SND.WND: the largest window the peer has offered (RFC 5961 §5.2).
    max_wnd: usize,
    /// Snd.Wind.Shift: the peer's window-scale shift (0 unless both sides agreed,
    /// RFC 7323 §2).
    wscale: u8,
    /// Eff.snd.MSS (§3.7.1): payload bytes per full-sized segment, after the options we
    /// always send.
    mss: usize,
    /// Most payload bytes the device segments for us in one TSO super-frame (0: no TSO).
    tso_max: usize,
    buf: SendBuffer,
    /// Our SYN has been acknowledged: the send buffer's first byte is SND.UNA, not
    /// ISS + 1. A flag, not `una == iss`: SND.UNA comes back round to ISS after
    /// 2^32 - 1 acknowledged bytes.
    syn_acked: bool,
    /// The application closed its sending side: a FIN follows the queued data.
    fin_queued: bool,
    /// Sequence number of our FIN once queued.
    fin: Option<SeqNum>,
    /// Zero-window probes sent since the peer last answered with an acceptable ACK.
    persist_probes: u32,
    /// Exponent of the persist timer's backoff (at most 16).
    persist_backoff: u8,
}

/// The receive sequence space (RFC 9293 §3.3.1: IRS, RCV.NXT, RCV.WND as the right edge
/// advertised), what RFC 7323 adds to it, the receive buffer, the peer's FIN and the
/// delayed-ACK count (§3.8.6.3).
struct RecvSeq {
    irs: SeqNum,
    nxt: SeqNum,
    /// Right edge of the window we last advertised (RCV.NXT + RCV.WND as sent); never
    /// moved left (§3.8.6).
    adv: SeqNum,
    /// Rcv.Wind.Shift: our window-scale shift as the peer applies it (RFC 7323 §2).
    wscale: u8,
    /// Last.ACK.sent: RCV.NXT as of the last ACK we sent (RFC 7323 §4.3).
    last_ack_sent: SeqNum,
    buf: RecvBuffer,
    /// Sequence number of a FIN that arrived ahead of missing data.
    fin: Option<SeqNum>,
    /// The application will not read any more (it called close): data is ACKed and dropped.
    closed: bool,
    /// Our MSS as advertised in our SYN (§3.7.1): the largest segment we receive.
    mss: u16,
    /// Full-sized segments received since our last ACK (ACK every second one, §3.8.6.3).
    unacked_segs: u32,
}

/// Loss recovery: duplicate ACKs and fast retransmit (RFC 5681 §3.2), NewReno's
/// "recover" (RFC 6582 §3.2) and consecutive retransmission timeouts (RFC 6298 §5).
struct Recovery {
    dupacks: u32,
    /// In fast recovery (RFC 6582 §3.2 steps 2 to 5).
    in_recovery: bool,
    /// RFC 6582 "recover": SND.MAX when fast recovery or a timeout began, while SND.UNA
    /// has not passed it yet; `None` once it has. Sequence comparisons only hold within
    /// 2^31, so a value left behind would read as "ahead" again after 2 GiB (§3.2 step 2
    /// then never fires); dropping it keeps the test meaningful at any distance.
    recover: Option<SeqNum>,
    /// Fast retransmit: resend the segment at SND.UNA once.
    retransmit_una: bool,
    /// Retransmission timeouts (or SYN retries) since the last progress.
    retries: u32,
}

/// Segments owed to the peer that `poll_transmit` has not sent yet.
struct PendingOutput {
    /// Our SYN (or SYN-ACK), first or again.
    syn: bool,
    /// An ACK, now rather than delayed.
    ack_now: bool,
    /// A zero-window probe or the SWS override segment (§3.8.6.1, §3.8.6.2.1).
    probe: bool,
    /// A keepalive probe (RFC 1122 §4.2.3.6).
    keepalive_probe: bool,
    /// RST to send: <SEQ=x><CTL=RST> for an unacceptable ACK, or our abort.
    rst: Option<(SeqNum, Option<SeqNum>)>,
}

/// The parts of [`TcpConfig`] a connection consults after creation.
#[derive(Debug, Clone, Copy)]
struct TcbLimits {
    max_retries: u32,
    max_syn_retries: u32,
    max_synack_retries: u32,
    delayed_ack: Duration,
    time_wait: Duration,
    fin_wait2_timeout: Duration,
    max_persist: Duration,
    keepalive: Option<super::config::Keepalive>,
    window_scaling: bool,
    timestamps: bool,
    sack: bool,
}

/// Options a SYN carried that shape the connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SynOptions {
    pub mss: Option<u16>,
    pub wscale: Option<u8>,
    pub sack_permitted: bool,
    pub timestamp: Option<(u32, u32)>,
}

impl From<&Segment> for SynOptions {
    fn from(seg: &Segment) -> SynOptions {
        SynOptions {
            mss: seg.mss,
            wscale: seg.wscale,
            sack_permitted: seg.sack_permitted,
            timestamp: seg.timestamp,
        }
    }
}

/// Fewest full segments sent as one TSO super-frame.
const TSO_MIN_SEGMENTS: usize = 2;

impl Tcb {
    fn new(
        local: SocketAddrV4,
        remote: SocketAddrV4,
        iss: SeqNum,
        our_mss: u16,
        now: Instant,
        cfg: &TcpConfig,
    ) -> Tcb {
        let smss = our_mss as usize;
        Tcb {
            state: State::Closed,
            snd: SendSeq {
                iss,
                una: iss,
                nxt: iss,
                max: iss,
                wnd: 0,
                wl1: SeqNum(0),
                wl2: iss,
                max_wnd: 0,
                wscale: 0,
                mss: smss,
                tso_max: 0,
                buf: SendBuffer::new(cfg.send_buffer),
                syn_acked: false,
                fin_queued: false,
                fin: None,
                persist_probes: 0,
                persist_backoff: 0,
            },
            rcv: RecvSeq {
                irs: SeqNum(0),
                nxt: SeqNum(0),
                adv: SeqNum(0),
                wscale: 0,
                last_ack_sent: SeqNum(0),
                buf: RecvBuffer::new(cfg.recv_buffer, cfg.max_ooo_ranges),
                fin: None,
                closed: false,
                mss: our_mss,
                unacked_segs: 0,
            },
            recovery: Recovery {
                dupacks: 0,
                in_recovery: false,
                recover: None,
                retransmit_una: false,
                retries: 0,
            },
            pending: PendingOutput {
                syn: false,
                ack_now: false,
                probe: false,
                keepalive_probe: false,
                rst: None,
            },
            timers: TimerTable::default(),
            rtt: RttEstimator::new(cfg.initial_rto, cfg.min_rto, cfg.max_rto),
            rtt_seq: None,
            cc: Cc::NewReno(NewReno::new(smss)),
            last_send: now,
            last_recv: now,
            last_now: now,
            keepalive_sent: 0,
            ts: None,
            sack_ok: false,
            ws_ok: false,
            active_open: false,
            want_writable: false,
            retransmissions: 0,
            local,
            remote,
            events: Events::default(),
            cfg: TcbLimits {
                max_retries: cfg.max_retries,
                max_syn_retries: cfg.max_syn_retries,
                max_synack_retries: cfg.max_synack_retries,
                delayed_ack: cfg.delayed_ack,
                time_wait: cfg.time_wait,
                fin_wait2_timeout: cfg.fin_wait2_timeout,
                max_persist: cfg.max_persist,
                keepalive: cfg.keepalive,
                window_scaling: cfg.window_scaling,
                timestamps: cfg.timestamps,
                sack: cfg.sack,
            },
        }
    }

    /// Active open (§3.10.1): the connection starts in SYN-SENT with a SYN to send.
    /// `our_mss` is the largest segment our link carries (MTU - 40).
    #[allow(clippy::too_many_arguments)]
    pub fn connect(
        local: SocketAddrV4,
        remote: SocketAddrV4,
        iss: SeqNum,
        ts_offset: u32,
        our_mss: u16,
        now: Instant,
        cfg: &TcpConfig,
    ) -> Tcb {
        let mut tcb = Tcb::new(local, remote, iss, our_mss, now, cfg);
        tcb.state = State::SynSent;
        tcb.active_open = true;
        tcb.rcv.wscale = if cfg.window_scaling {
            cfg.rcv_wscale()
        } else {
            0
        };
        if cfg.timestamps {
            tcb.ts = Some(Timestamps {
                recent: 0,
                recent_age: now,
                offset: ts_offset,
            });
        }
        tcb.pending.syn = true;
        tcb
    }

    /// Passive open: a SYN arrived for a listener (§3.10.7.2). The connection starts in
    /// SYN-RECEIVED with a SYN-ACK to send.
    #[allow(clippy::too_many_arguments)]
    pub fn accept_syn(
        local: SocketAddrV4,
        remote: SocketAddrV4,
        syn: &Segment,
        iss: SeqNum,
        ts_offset: u32,
        our_mss: u16,
        now: Instant,
        cfg: &TcpConfig,
    ) -> Tcb {
        let mut tcb = Tcb::new(local, remote, iss, our_mss, now, cfg);
        tcb.state = State::SynReceived;
        tcb.rcv.irs = syn.seq;
        tcb.rcv.nxt = syn.seq + 1;
        tcb.rcv.adv = tcb.rcv.nxt;
        tcb.rcv.last_ack_sent = tcb.rcv.nxt;
        tcb.negotiate(&SynOptions::from(syn), ts_offset, now);
        tcb.snd.wnd = syn.window as usize;
        tcb.snd.max_wnd = tcb.snd.wnd;
        tcb.snd.wl1 = syn.seq;
        tcb.pending.syn = true;
        tcb
    }

    /// A connection rebuilt from a valid SYN-cookie ACK: straight to ESTABLISHED.
    /// `iss` is the cookie (our SYN-ACK's sequence number), `irs` the client's ISN and
    /// `opts` what the cookie preserved of the client's SYN.
    #[allow(clippy::too_many_arguments)]
    pub fn from_cookie(
        local: SocketAddrV4,
        remote: SocketAddrV4,
        ack: &Segment,
        iss: SeqNum,
        opts: SynOptions,
        ts_offset: u32,
        our_mss: u16,
        now: Instant,
        cfg: &TcpConfig,
    ) -> Tcb {
        let mut tcb = Tcb::new(local, remote, iss, our_mss, now, cfg);
        tcb.rcv.irs = ack.seq - 1;
        tcb.rcv.nxt = ack.seq;
        tcb.negotiate(&opts, ts_offset, now);
        tcb.snd.una = iss + 1;
        tcb.snd.syn_acked = true;
        tcb.snd.nxt = tcb.snd.una;
        tcb.snd.max = tcb.snd.una;
        tcb.snd.wnd = (ack.window as usize) << tcb.snd.wscale;
        tcb.snd.max_wnd = tcb.snd.wnd;
        tcb.snd.wl1 = ack.seq;
        tcb.snd.wl2 = ack.ack;
        // The cookie SYN-ACK offered the unscaled SYN window (see `advertise`): RCV.WND
        // starts there, so data on this very ACK is acceptable.
        tcb.rcv.adv = tcb.rcv.nxt + tcb.syn_window();
        tcb.rcv.last_ack_sent = tcb.rcv.nxt;
        if let (Some(ts), Some((tsval, _))) = (tcb.ts.as_mut(), ack.timestamp) {
            ts.recent = tsval;
        }
        tcb.enter_established(now);
        tcb
    }

    /// Settle options from the peer's SYN (RFC 7323 §2.2, §3.2; RFC 2018 §2).
    fn negotiate(&mut self, peer: &SynOptions, ts_offset: u32, now: Instant) {
        let peer_mss = peer.mss.unwrap_or(DEFAULT_MSS).max(64);
        if self.cfg.window_scaling {
            if let Some(ws) = peer.wscale {
                self.ws_ok = true;
                self.snd.wscale = ws.min(14);
                self.rcv.wscale = self.rcv_wscale_for_buffer();
            } else {
                self.snd.wscale = 0;
                self.rcv.wscale = 0;
            }
        } else {
            self.snd.wscale = 0;
            self.rcv.wscale = 0;
        }
        self.sack_ok = self.cfg.sack && peer.sack_permitted;
        self.ts = match (self.cfg.timestamps, peer.timestamp) {
            (true, Some((tsval, _))) => Some(Timestamps {
                recent: tsval,
                recent_age: now,
                offset: self.ts.map(|t| t.offset).unwrap_or(ts_offset),
            }),
            _ => None,
        };
        let mss = peer_mss.min(self.rcv.mss) as usize;
        // RFC 6691: the MSS excludes options; leave room for the ones on every segment.
        self.snd.mss = mss - if self.ts.is_some() { TS_OPTION_LEN } else { 0 };
        self.cc.set_mss(self.snd.mss);
    }

    fn rcv_wscale_for_buffer(&self) -> u8 {
        let mut shift = 0u8;
        while shift < 14 && (self.rcv.buf.capacity() >> shift) > 65535 {
            shift += 1;
        }
        shift
    }

    // ----- Accessors -----

    pub fn state(&self) -> State {
        self.state
    }
    pub fn local(&self) -> SocketAddrV4 {
        self.local
    }
    pub fn remote(&self) -> SocketAddrV4 {
        self.remote
    }
    pub fn send_buffer(&self) -> &SendBuffer {
        &self.snd.buf
    }
    pub fn snd_una(&self) -> SeqNum {
        self.snd.una
    }
    pub fn snd_nxt(&self) -> SeqNum {
        self.snd.nxt
    }
    pub fn rcv_nxt(&self) -> SeqNum {
        self.rcv.nxt
    }
    pub fn snd_wnd(&self) -> usize {
        self.snd.wnd
    }
    pub fn snd_mss(&self) -> usize {
        self.snd.mss
    }
    pub fn cwnd(&self) -> usize {
        self.cc.cwnd()
    }
    pub fn rto(&self) -> Duration {
        self.rtt.rto()
    }
    pub fn srtt(&self) -> Option<Duration> {
        self.rtt.srtt()
    }
    pub fn timestamps_enabled(&self) -> bool {
        self.ts.is_some()
    }
    pub fn sack_enabled(&self) -> bool {
        self.sack_ok
    }
    pub fn window_scales(&self) -> (u8, u8) {
        (self.snd.wscale, self.rcv.wscale)
    }
    /// Let new data go out as TSO super-frames of up to `max_payload` bytes, which the
    /// device cuts into full segments ([`TxSegment::tso_mss`]). Zero turns it off.
    pub fn set_tso(&mut self, max_payload: usize) {
        self.snd.tso_max = max_payload;
    }

    /// Bytes the application may still queue by copy.
    pub fn send_space(&self) -> usize {
        if self.can_send() {
            self.snd.buf.space()
        } else {
            0
        }
    }
    /// Bytes in flight: sent and not yet acknowledged (sequence space).
    pub fn flight_size(&self) -> usize {
        self.snd.nxt.since(self.snd.una)
    }
    /// The connection has been fully closed and may be dropped.
    pub fn is_closed(&self) -> bool {
        self.state == State::Closed
    }
    /// Bytes of the receive buffer the application has not taken yet.
    pub fn readable_len(&self) -> usize {
        self.rcv.buf.readable_len()
    }
    /// TS.Recent and our timestamp offset, when timestamps are in use (for TIME-WAIT).
    pub fn timestamp_state(&self) -> Option<(u32, u32)> {
        self.ts.map(|t| (t.recent, t.offset))
    }
    /// Our window-scale shift as the peer applies it to our window field.
    pub fn rcv_wscale(&self) -> u8 {
        self.rcv.wscale
    }
    /// When TIME-WAIT (or the FIN-WAIT-2 timeout) ends.
    pub fn linger_deadline(&self) -> Option<Instant> {
        self.timers.get(Timer::Linger)
    }
    /// Segments retransmitted since the last call.
    pub fn take_retransmissions(&mut self) -> u64 {
        std::mem::take(&mut self.retransmissions)
    }
    /// Number of consecutive retransmission timeouts without progress.
    pub fn retries(&self) -> u32 {
        self.recovery.retries
    }

    /// What the application has not read yet, as one contiguous slice (the receive buffer
    /// may hold more after it).
    pub fn readable(&self) -> &[u8] {
        self.rcv.buf.readable()
    }

    /// Take the receive buffer out so the application can read it while it also holds a
    /// mutable handle on the connection; give it back with [`Tcb::put_recv_buffer`].
    pub fn take_recv_buffer(&mut self) -> RecvBuffer {
        std::mem::replace(&mut self.rcv.buf, RecvBuffer::new(0, 0))
    }

    pub fn put_recv_buffer(&mut self, buf: RecvBuffer) {
        self.rcv.buf = buf;
        self.maybe_window_update();
    }

    pub fn take_events(&mut self) -> Events {
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
    pub fn send(&mut self, data: &[u8]) -> Result<usize, SendError> {
        if !self.can_send() {
            return Err(SendError::Closed);
        }
        let n = self.snd.buf.push_copy(data);
        if n < data.len() {
            self.want_writable = true;
        }
        Ok(n)
    }

    /// Queue shared immutable bytes without copying them; retransmissions re-read them.
    pub fn send_shared(&mut self, data: Bytes) -> Result<(), SendError> {
        if !self.can_send() {
            return Err(SendError::Closed);
        }
        self.snd.buf.push_shared(data);
        Ok(())
    }

    /// Queue `body[range]` by reference with its precomputed checksums (see
    /// [`SummedBytes`](crate::checksum::SummedBytes)).
    pub fn send_summed(
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
    pub fn notify_writable(&mut self) {
        self.want_writable = true;
    }

    /// Close our sending side after the queued data (CLOSE call, §3.10.4), keeping the
    /// receive side open: a half-close.
    pub fn shutdown_write(&mut self) {
        if self.snd.fin_queued {
            return;
        }
        match self.state {
            State::SynSent => self.finish(CloseReason::Normal),
            State::SynReceived | State::Established => {
                self.queue_fin();
                if self.state == State::Established {
                    self.state = State::FinWait1;
                }
            }
            State::CloseWait => {
                self.queue_fin();
                self.state = State::LastAck;
            }
            _ => {}
        }
    }

    /// Graceful close of both directions: FIN after queued data; data that arrives later
    /// is acknowledged and discarded.
    pub fn close(&mut self) {
        self.rcv.closed = true;
        self.shutdown_write();
        if self.state == State::FinWait2 {
            self.timers
                .set(Timer::Linger, self.last_recv + self.cfg.fin_wait2_timeout);
        }
    }

    /// Abort (§3.10.5): send a RST if synchronized, drop everything, close now.
    pub fn abort(&mut self) {
        if matches!(
            self.state,
            State::SynReceived
                | State::Established
                | State::FinWait1
                | State::FinWait2
                | State::CloseWait
        ) {
            // SND.NXT in the RFC's sense: the highest sequence number sent (our snd_nxt
            // may have been rewound by a timeout).
            self.pending.rst = Some((self.snd.max, None));
        }
        self.finish(CloseReason::Aborted);
    }

    /// The engine's rate limiter allowed a challenge ACK (RFC 5961 §7).
    pub fn send_challenge_ack(&mut self) {
        self.pending.ack_now = true;
    }

    /// Hand back the part of a directly delivered payload the application did not
    /// consume; it is kept in the receive buffer and offered again later.
    pub fn keep_unconsumed(&mut self, rest: &[u8]) {
        if !rest.is_empty() {
            let stored = self.rcv.buf.write_at(0, rest);
            debug_assert_eq!(stored, rest.len());
        }
    }

    /// The application consumed `n` bytes of [`Tcb::readable`].
    pub fn consume(&mut self, n: usize) {
        self.rcv.buf.consume(n);
        self.maybe_window_update();
    }

    /// Receiver SWS avoidance (§3.8.6.2.2): announce a larger window only once it has
    /// grown by min(buffer/2, MSS) past what we last advertised.
    fn maybe_window_update(&mut self) {
        if !self.state.is_synchronized() && self.state != State::SynReceived {
            return;
        }
        let edge = self.rcv.nxt + self.rcv.buf.window();
        let grown = edge.since(self.rcv.adv);
        let threshold = self.sws_threshold();
        if grown >= threshold && self.rcv.adv.since(self.rcv.nxt) < threshold {
            self.pending.ack_now = true;
        }
    }

    // ----- Segment arrival -----

    /// Process one incoming segment (§3.10.7). `payload` is the segment's data.
    pub fn on_segment(&mut self, now: Instant, seg: &Segment, payload: &[u8]) -> RxOutcome {
        self.last_now = now;
        let mut out = RxOutcome::default();
        match self.state {
            State::Closed | State::Listen => {}
            State::SynSent => self.on_segment_syn_sent(now, seg),
            _ => self.on_segment_synchronized(now, seg, payload, &mut out),
        }
        out
    }

    /// §3.10.7.3.
    fn on_segment_syn_sent(&mut self, now: Instant, seg: &Segment) {
        if seg.flags.ack && (seg.ack <= self.snd.iss || seg.ack > self.snd.max) {
            if !seg.flags.rst {
                self.pending.rst = Some((seg.ack, None));
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
        self.rcv.adv = self.rcv.nxt + self.syn_window();
        self.rcv.last_ack_sent = self.rcv.nxt;
        let offset = self.ts.map(|t| t.offset).unwrap_or(0);
        self.negotiate(&SynOptions::from(seg), offset, now);
        self.snd.wl1 = seg.seq;
        if seg.flags.ack {
            // RFC 7323 §2.2: the window field of a SYN (here a SYN-ACK) is never scaled.
            self.snd.wnd = seg.window as usize;
            self.snd.max_wnd = self.snd.wnd;
            self.snd.wl2 = seg.ack;
            self.ack_advance(now, seg);
            self.enter_established(now);
            self.pending.ack_now = true;
        } else {
            // Simultaneous open (§3.5, figure 7): answer with SYN-ACK on the same ISS.
            self.snd.wnd = seg.window as usize;
            self.snd.max_wnd = self.snd.wnd;
            self.state = State::SynReceived;
            self.snd.nxt = self.snd.iss;
            self.pending.syn = true;
            self.timers.stop(Timer::Rto);
        }
    }

    fn enter_established(&mut self, now: Instant) {
        self.state = State::Established;
        self.events.connected = true;
        self.recovery.retries = 0;
        self.rtt.reset_backoff();
        self.timers.stop(Timer::Rto);
        self.arm_keepalive(now);
        if self.snd.fin_queued {
            self.state = State::FinWait1;
        }
    }

    /// Is the segment's sequence range acceptable (§3.10.7.4, first check)?
    fn acceptable(&self, seg: &Segment) -> bool {
        let wnd = self.rcv_window();
        let len = seg.seg_len();
        match (len, wnd) {
            (0, 0) => seg.seq == self.rcv.nxt,
            (0, _) => self.rcv.nxt.contains(wnd, seg.seq),
            (_, 0) => false,
            (_, _) => {
                self.rcv.nxt.contains(wnd, seg.seq)
                    || self.rcv.nxt.contains(wnd, seg.seq + (len - 1))
            }
        }
    }

    /// RCV.WND: what we accept from RCV.NXT on, i.e. up to the right edge we advertised.
    /// Space the application freed but that receiver SWS avoidance has not announced yet
    /// is not offered (§3.8.6.2.2 keeps RCV.WND fixed until the update is sent).
    fn rcv_window(&self) -> usize {
        self.rcv.adv.since(self.rcv.nxt)
    }

    /// The window a SYN or SYN-ACK carries: unscaled, so at most 65535 (RFC 7323 §2.2).
    fn syn_window(&self) -> usize {
        self.rcv.buf.window().min(65535)
    }

    /// Receiver SWS threshold (§3.8.6.2.2): min(Fr·RCV.BUFF, Eff.snd.MSS) with Fr = 1/2.
    fn sws_threshold(&self) -> usize {
        (self.rcv.buf.capacity() / 2)
            .min(self.rcv.mss as usize)
            .max(1)
    }

    fn on_segment_synchronized(
        &mut self,
        now: Instant,
        seg: &Segment,
        payload: &[u8],
        out: &mut RxOutcome,
    ) {
        // A retransmitted SYN while our SYN-ACK is unacknowledged: resend it.
        if self.state == State::SynReceived
            && seg.flags.syn
            && !seg.flags.ack
            && seg.seq == self.rcv.irs
        {
            self.pending.syn = true;
            self.snd.nxt = self.snd.iss;
            return;
        }

        // Simultaneous open (§3.5 figure 7, line 6): after an active open, the peer's
        // SYN-ACK repeats its SYN (already counted in RCV.NXT, so the sequence check
        // would call it old) and acknowledges ours. Take its ACK.
        if self.state == State::SynReceived
            && self.active_open
            && seg.flags.syn
            && seg.flags.ack
            && !seg.flags.rst
            && seg.seq == self.rcv.irs
        {
            self.on_simultaneous_syn_ack(now, seg);
            return;
        }

        // A SYN in a synchronized state, irrespective of its sequence number, gets a
        // challenge ACK and is dropped (RFC 5961 §4.2, RFC 9293 §3.10.7.4 fourth check):
        // so it is tested before the sequence check, whose plain ACK is not rate limited.
        if seg.flags.syn && !seg.flags.rst {
            out.challenge_ack = true;
            return;
        }

        // RFC 7323 §5.3: PAWS, before the sequence check.
        if let (Some(ts), Some((tsval, _))) = (self.ts, seg.timestamp) {
            if !seg.flags.rst
                && (tsval.wrapping_sub(ts.recent) as i32) < 0
                && now.saturating_duration_since(ts.recent_age) < PAWS_IDLE
            {
                self.pending.ack_now = true;
                return;
            }
        }

        let mut seg = *seg;
        let mut payload = payload;
        if !self.acceptable(&seg) {
            // Zero window: still take ACK information from a segment at RCV.NXT (§3.10.7.4
            // "special allowance"), but not its data.
            if self.rcv_window() == 0 && seg.seq == self.rcv.nxt && !seg.flags.rst {
                payload = &[];
                seg.payload_len = 0;
                seg.flags.fin = false;
                self.pending.ack_now = true;
            } else {
                if seg.flags.syn && !seg.flags.rst {
                    // RFC 5961 §4.2: a SYN in a synchronized state gets a challenge ACK
                    // whatever its sequence number, under the §7 rate limit.
                    out.challenge_ack = true;
                    return;
                }
                if !seg.flags.rst {
                    self.pending.ack_now = true;
                    // TIME-WAIT (§3.10.7.4, eighth check): a retransmitted FIN is
                    // acknowledged again and restarts the 2·MSL wait. Being a duplicate,
                    // it never passes the sequence check, so it is recognised here.
                    if self.state == State::TimeWait
                        && seg.flags.fin
                        && seg.seq + (seg.payload_len + 1) == self.rcv.nxt
                    {
                        self.timers.set(Timer::Linger, now + self.cfg.time_wait);
                    }
                }
                return;
            }
        }

        // RST (RFC 5961 §3.2): exact match resets, anything else in window is challenged.
        if seg.flags.rst {
            if seg.seq == self.rcv.nxt {
                let reason = if self.state == State::SynReceived && self.active_open {
                    CloseReason::Refused
                } else {
                    CloseReason::Reset
                };
                self.finish(reason);
            } else {
                out.challenge_ack = true;
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
            payload = &payload[dup..];
            seq += dup;
        }
        let wnd = self.rcv_window();
        let room = (self.rcv.nxt + wnd).since(seq);
        if payload.len() > room {
            payload = &payload[..room];
            seg.flags.fin = false;
        }
        self.last_recv = now;
        self.keepalive_sent = 0;
        self.arm_keepalive(now);

        // Update TS.Recent (RFC 7323 §4.3) now that the segment is acceptable.
        if let (Some(ts), Some((tsval, _))) = (self.ts.as_mut(), seg.timestamp) {
            if seg.seq <= self.rcv.last_ack_sent && (tsval.wrapping_sub(ts.recent) as i32) >= 0 {
                ts.recent = tsval;
                ts.recent_age = now;
            }
        }

        // ACK processing.
        if self.state == State::SynReceived {
            if self.snd.una < seg.ack && seg.ack <= self.snd.max {
                self.snd.wnd = (seg.window as usize) << self.snd.wscale;
                self.snd.max_wnd = self.snd.max_wnd.max(self.snd.wnd);
                self.snd.wl1 = seg.seq;
                self.snd.wl2 = seg.ack;
                self.enter_established(now);
            } else {
                self.pending.rst = Some((seg.ack, None));
                return;
            }
        }
        if !self.process_ack(now, &seg, out) {
            return;
        }

        // Segment text (§3.10.7.4, seventh).
        if !payload.is_empty()
            && matches!(
                self.state,
                State::Established | State::FinWait1 | State::FinWait2
            )
        {
            self.receive_data(now, seq, payload, &seg, out);
        }

        // FIN (§3.10.7.4, eighth), possibly ahead of missing data.
        if seg.flags.fin
            && matches!(
                self.state,
                State::Established | State::FinWait1 | State::FinWait2 | State::SynReceived
            )
        {
            self.rcv.fin = Some(seq + payload.len());
        }
        self.maybe_accept_fin(now);
        if matches!(
            self.state,
            State::CloseWait | State::Closing | State::LastAck | State::TimeWait
        ) && seg.flags.fin
        {
            // A retransmitted FIN: acknowledge again; in TIME-WAIT restart the 2·MSL wait.
            self.pending.ack_now = true;
            if self.state == State::TimeWait {
                self.timers.set(Timer::Linger, now + self.cfg.time_wait);
            }
        }
    }

    /// The peer's SYN-ACK in SYN-RECEIVED after a simultaneous open: it completes the
    /// handshake like the ACK of §3.10.7.4 (fifth check, SYN-RECEIVED).
    fn on_simultaneous_syn_ack(&mut self, now: Instant, seg: &Segment) {
        if !(self.snd.una < seg.ack && seg.ack <= self.snd.max) {
            self.pending.rst = Some((seg.ack, None));
            return;
        }
        self.last_recv = now;
        if let (Some(ts), Some((tsval, _))) = (self.ts.as_mut(), seg.timestamp) {
            if (tsval.wrapping_sub(ts.recent) as i32) >= 0 {
                ts.recent = tsval;
                ts.recent_age = now;
            }
        }
        // RFC 7323 §2.2: a SYN's window field is not scaled.
        self.snd.wnd = seg.window as usize;
        self.snd.max_wnd = self.snd.max_wnd.max(self.snd.wnd);
        self.snd.wl1 = seg.seq;
        self.snd.wl2 = seg.ack;
        self.ack_advance(now, seg);
        self.enter_established(now);
        // Its SYN was a duplicate: acknowledge it, which also covers a lost SYN-ACK of ours.
        self.pending.ack_now = true;
    }

    /// Returns false when the segment must be dropped after the ACK check.
    fn process_ack(&mut self, now: Instant, seg: &Segment, out: &mut RxOutcome) -> bool {
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
            self.ack_advance(now, seg);
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
            self.snd.wnd = (seg.window as usize) << self.snd.wscale;
            self.snd.max_wnd = self.snd.max_wnd.max(self.snd.wnd);
            self.snd.wl1 = seg.seq;
            self.snd.wl2 = seg.ack;
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
        let fin_acked = self.fin_acked();
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

    /// Our FIN has been sent and acknowledged.
    fn fin_acked(&self) -> bool {
        self.snd.fin.is_some_and(|f| self.snd.una > f)
    }

    /// Queue our FIN after everything in the send buffer (its sequence number is fixed
    /// now: no data can be added after it).
    fn queue_fin(&mut self) {
        self.snd.fin_queued = true;
        self.snd.fin = Some(self.data_start() + self.snd.buf.len());
    }

    /// Our FIN is queued and not sent since SND.NXT was last set (or rewound).
    fn fin_unsent(&self) -> bool {
        self.snd.fin.is_some_and(|f| self.snd.nxt <= f)
    }

    /// Sequence number of the first byte in the send buffer.
    fn data_start(&self) -> SeqNum {
        if self.snd.syn_acked {
            self.snd.una
        } else {
            self.snd.iss + 1
        }
    }

    /// SND.UNA < SEG.ACK: new data acknowledged.
    fn ack_advance(&mut self, now: Instant, seg: &Segment) {
        let ack = seg.ack;
        let mut acked = ack.since(self.snd.una);
        if !self.snd.syn_acked {
            // The first ACK covers our SYN, which is not in the send buffer.
            self.snd.syn_acked = true;
            acked = acked.saturating_sub(1);
        }
        let data_acked = acked.min(self.snd.buf.len());
        self.snd.buf.consume(data_acked);
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
                self.cc.on_exit_recovery(flight);
            } else {
                self.cc.on_partial_ack(data_acked);
                self.recovery.retransmit_una = true;
                self.timers.set(Timer::Rto, now + self.rtt.rto());
            }
        } else {
            self.cc.on_ack(data_acked, now);
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
            self.cc.on_dup_ack_in_recovery();
        } else if self.recovery.dupacks == 3 {
            // RFC 6582 §3.2 step 2: only if the ACK covers more than "recover" (avoid
            // a second reduction for losses of the same window).
            if self.recovery.recover.is_none_or(|r| self.snd.una >= r) {
                self.recovery.in_recovery = true;
                self.recovery.recover = Some(self.snd.max);
                self.cc.on_enter_recovery(self.flight_size(), now);
                self.recovery.retransmit_una = true;
                self.rtt_seq = None;
            }
        }
    }

    fn receive_data(
        &mut self,
        now: Instant,
        seq: SeqNum,
        payload: &[u8],
        seg: &Segment,
        out: &mut RxOutcome,
    ) {
        let offset = seq.since(self.rcv.nxt);
        let had_ooo = self.rcv.buf.has_out_of_order();
        if self.rcv.closed {
            // The application has gone: ACK the data and drop it. It still goes through
            // the buffer, so out-of-order ranges held from before the close stay aligned
            // with RCV.NXT: they join up when the gap fills, SACK blocks stay true, and a
            // FIN behind them is accepted (`maybe_accept_fin` waits for no hole). What
            // becomes readable is discarded at once, along with anything the application
            // left unread, so the window stays open.
            let advanced = self.rcv.buf.write_at(offset, payload);
            self.rcv.nxt += advanced;
            let unread = self.rcv.buf.readable_len();
            self.rcv.buf.consume(unread);
            self.pending.ack_now = true;
            return;
        }
        if offset == 0 && !had_ooo && self.rcv.buf.readable_len() == 0 {
            self.rcv.nxt += payload.len();
            // Relative to the segment's own payload: trimmed duplicate bytes are at its front.
            let front = seq.since(seg.seq);
            out.deliver = Some((front, front + payload.len()));
        } else {
            let advanced = self.rcv.buf.write_at(offset, payload);
            self.rcv.nxt += advanced;
            if advanced > 0 {
                out.readable = true;
            }
        }
        // RFC 5681 §4.2 / RFC 9293 §3.8.6.3: ACK at once for out-of-order data and for
        // data that fills a gap; otherwise ACK every second full segment, or after the
        // delayed-ACK timeout.
        if offset > 0 || had_ooo {
            self.pending.ack_now = true;
        } else {
            self.rcv.unacked_segs += 1;
            if self.rcv.unacked_segs >= 2 {
                self.pending.ack_now = true;
            } else if !self.timers.is_armed(Timer::DelayedAck) {
                self.timers
                    .set(Timer::DelayedAck, now + self.cfg.delayed_ack);
            }
        }
    }

    fn maybe_accept_fin(&mut self, now: Instant) {
        let Some(fin) = self.rcv.fin else { return };
        if fin != self.rcv.nxt || self.rcv.buf.has_out_of_order() {
            return;
        }
        self.rcv.fin = None;
        self.rcv.nxt += 1;
        self.pending.ack_now = true;
        self.events.peer_closed = true;
        match self.state {
            State::SynReceived | State::Established => self.state = State::CloseWait,
            State::FinWait1 => {
                if self.fin_acked() {
                    self.enter_time_wait(now);
                } else {
                    self.state = State::Closing;
                }
            }
            State::FinWait2 => self.enter_time_wait(now),
            _ => {}
        }
    }

    fn enter_time_wait(&mut self, now: Instant) {
        self.state = State::TimeWait;
        self.timers.stop(Timer::Rto);
        self.timers.stop(Timer::Persist);
        self.timers.stop(Timer::Keepalive);
        self.timers.set(Timer::Linger, now + self.cfg.time_wait);
    }

    fn finish(&mut self, reason: CloseReason) {
        self.state = State::Closed;
        self.events.closed = Some(reason);
        self.timers.stop_all();
        self.pending.ack_now = false;
        self.pending.syn = false;
        self.recovery.retransmit_una = false;
        self.pending.probe = false;
        self.pending.keepalive_probe = false;
    }

    fn arm_keepalive(&mut self, now: Instant) {
        if let Some(ka) = self.cfg.keepalive {
            if self.state.is_synchronized() {
                self.timers.set(Timer::Keepalive, now + ka.idle);
            }
        }
    }

    // ----- Timers -----

    /// The earliest time [`Tcb::on_timer`] has work to do.
    pub fn next_deadline(&self) -> Option<Instant> {
        self.timers.next()
    }

    /// Arm the application's one-shot timer `after` from now (replacing an armed one),
    /// or cancel it; when it fires, [`Events::app_timer`] is raised. A closed
    /// connection's timer never fires.
    pub fn set_app_timer(&mut self, after: Option<Duration>) {
        match after {
            Some(d) if !self.is_closed() => self.timers.set(Timer::App, self.last_now + d),
            _ => self.timers.stop(Timer::App),
        }
    }

    /// Fire whatever timers are due at `now`.
    pub fn on_timer(&mut self, now: Instant) {
        self.last_now = now;
        // The order matters: a timer that ends the connection stops every later one, and
        // the application's timer fires even then.
        if self.timers.expired(Timer::App, now) {
            self.timers.stop(Timer::App);
            self.events.app_timer = true;
        }
        if self.timers.expired(Timer::Rto, now) {
            self.timers.stop(Timer::Rto);
            self.on_rto(now);
        }
        if self.timers.expired(Timer::Persist, now) {
            self.timers.stop(Timer::Persist);
            // A zero window, or (nothing in flight) a window sender SWS avoidance will
            // not fill: either way no ACK is coming to unblock us.
            if (self.unsent_data() + self.flight_size() > 0 || self.fin_unsent())
                && (self.snd.wnd == 0 || self.flight_size() == 0)
            {
                if self.snd.wnd == 0 {
                    // Zero-window probes count like retransmissions: a peer that answers
                    // none of them is gone (RFC 1122 §4.2.2.17 only obliges us to wait
                    // while it keeps answering; Linux tcp_probe_timer does the same).
                    if self.snd.persist_probes >= self.cfg.max_retries {
                        self.finish(CloseReason::TimedOut);
                        return;
                    }
                    self.snd.persist_probes += 1;
                }
                self.pending.probe = true;
                self.snd.persist_backoff = (self.snd.persist_backoff + 1).min(16);
            }
        }
        if self.timers.expired(Timer::DelayedAck, now) {
            self.timers.stop(Timer::DelayedAck);
            self.pending.ack_now = true;
        }
        if self.timers.expired(Timer::Keepalive, now) {
            self.timers.stop(Timer::Keepalive);
            if let Some(ka) = self.cfg.keepalive {
                if self.keepalive_sent >= ka.probes {
                    self.finish(CloseReason::TimedOut);
                    return;
                }
                if self.state.is_synchronized() && self.state != State::TimeWait {
                    self.keepalive_sent += 1;
                    self.pending.keepalive_probe = true;
                    self.timers.set(Timer::Keepalive, now + ka.interval);
                }
            }
        }
        if self.timers.expired(Timer::Linger, now) {
            self.timers.stop(Timer::Linger);
            match self.state {
                State::TimeWait => self.finish(CloseReason::Normal),
                State::FinWait2 => self.finish(CloseReason::TimedOut),
                _ => {}
            }
        }
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
                if self.recovery.retries >= limit {
                    self.finish(CloseReason::TimedOut);
                    return;
                }
                self.recovery.retries += 1;
                self.rtt.backoff();
                self.pending.syn = true;
                self.snd.nxt = self.snd.iss;
            }
            State::Closed | State::Listen | State::TimeWait => {}
            _ => {
                if self.snd.max == self.snd.una {
                    return;
                }
                if self.recovery.retries >= self.cfg.max_retries {
                    self.finish(CloseReason::TimedOut);
                    return;
                }
                self.recovery.retries += 1;
                let flight = self.snd.max.since(self.snd.una);
                self.cc.on_rto(flight, now);
                self.rtt.backoff();
                self.recovery.in_recovery = false;
                self.recovery.recover = Some(self.snd.max);
                self.recovery.dupacks = 0;
                self.rtt_seq = None;
                self.recovery.retransmit_una = false;
                // Go back N: resend from SND.UNA as the window allows.
                self.snd.nxt = self.snd.una;
            }
        }
    }

    // ----- Output -----

    fn unsent_data(&self) -> usize {
        let sent = self.snd.nxt.since(self.data_start());
        self.snd.buf.len().saturating_sub(sent)
    }

    /// The window field and SACK blocks for an outgoing segment; records what we
    /// advertised.
    fn advertise(&mut self, seg: &mut TxSegment, now: Instant) {
        let buf_edge = self.rcv.nxt + self.rcv.buf.window();
        // Never shrink the window (§3.8.6), and move the right edge only by at least the
        // SWS threshold (§3.8.6.2.2 receiver SWS avoidance): otherwise keep offering the
        // edge already advertised. A SYN has advertised nothing yet.
        let old_edge = self.rcv.adv.max(self.rcv.nxt);
        let edge = if seg.syn
            || (buf_edge > old_edge && buf_edge.since(old_edge) >= self.sws_threshold())
        {
            buf_edge
        } else {
            old_edge
        };
        let wnd = edge.since(self.rcv.nxt);
        let field = if seg.syn {
            wnd.min(65535)
        } else {
            (wnd >> self.rcv.wscale).min(65535)
        };
        // What the peer may now send is what the field says, after scaling.
        let shift = if seg.syn { 0 } else { self.rcv.wscale };
        let adv_edge = self.rcv.nxt + (field << shift);
        if adv_edge > self.rcv.adv {
            self.rcv.adv = adv_edge;
        }
        seg.window = field as u16;
        if let Some(ts) = self.ts {
            seg.timestamp = Some((ts_clock(now, ts.offset), ts.recent));
        }
        if seg.ack.is_some() {
            self.rcv.last_ack_sent = self.rcv.nxt;
            self.pending.ack_now = false;
            self.rcv.unacked_segs = 0;
            self.timers.stop(Timer::DelayedAck);
            if self.sack_ok && self.rcv.buf.has_out_of_order() {
                let mut ranges = [(0u32, 0u32); 3];
                let n = self.rcv.buf.sack_ranges(&mut ranges);
                let base = self.rcv.nxt;
                for (slot, (l, r)) in seg.sack.iter_mut().zip(ranges.iter().take(n)) {
                    *slot = Some(((base + *l as usize).0, (base + *r as usize).0));
                }
            }
        }
    }

    fn sack_option_len(&self) -> usize {
        if self.sack_ok && self.rcv.buf.has_out_of_order() {
            let mut ranges = [(0u32, 0u32); 3];
            let n = self.rcv.buf.sack_ranges(&mut ranges);
            (2 + 8 * n + 3) & !3
        } else {
            0
        }
    }

    /// Append the segments this connection wants sent now to `out`.
    pub fn poll_transmit(&mut self, now: Instant, out: &mut Vec<TxSegment>) {
        self.last_now = now;
        if let Some((seq, ack)) = self.pending.rst.take() {
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
                if self.pending.syn {
                    self.pending.syn = false;
                    self.send_syn(now, out);
                }
                if self.state == State::SynReceived && self.pending.ack_now {
                    self.push_ack(now, self.snd.nxt, out);
                }
                return;
            }
            _ => {}
        }
        let sent_before = out.len();

        if self.recovery.retransmit_una {
            self.recovery.retransmit_una = false;
            self.send_segment_at(now, self.snd.una, usize::MAX, false, out);
        }
        self.send_new(now, out);

        if self.pending.probe {
            self.pending.probe = false;
            if self.snd.wnd == 0 {
                // Zero-window probe: one byte (or the FIN) at SND.UNA, beyond the window.
                self.send_segment_at(now, self.snd.una, 1, true, out);
                let backoff = self.rtt.rto() * (1 << self.snd.persist_backoff.min(10));
                self.timers
                    .set(Timer::Persist, now + backoff.min(self.cfg.max_persist));
            } else if self.flight_size() == 0 {
                // §3.8.6.2.1 override timeout: SWS avoidance held back a segment smaller
                // than the window and nothing in flight will bring an ACK (the peer's
                // window update may have been lost): send what the window allows. The
                // segment is ordinary data, covered by the RTO from here on.
                self.send_segment_at(now, self.snd.nxt, self.snd.wnd, false, out);
            }
        }
        let blocked = if self.snd.wnd == 0 {
            // Counted from SND.NXT: after a timeout rewound it, a FIN sent before the
            // window closed waits here too.
            self.unsent_data() > 0 || self.fin_unsent()
        } else {
            // Data left unsent with nothing in flight: only SWS avoidance holds it back.
            self.flight_size() == 0 && self.unsent_data() > 0
        };
        if blocked && !self.timers.is_armed(Timer::Persist) && !self.timers.is_armed(Timer::Rto) {
            self.timers.set(Timer::Persist, now + self.rtt.rto());
        }
        if self.pending.keepalive_probe {
            self.pending.keepalive_probe = false;
            // RFC 1122 §4.2.3.6: SEG.SEQ = SND.UNA-1, no data; the peer answers with an ACK.
            self.push_ack(now, self.snd.una - 1usize, out);
        }
        if self.pending.ack_now && out.len() == sent_before {
            // A bare ACK carries SND.MAX, not SND.NXT: after a timeout SND.NXT is pulled
            // back to SND.UNA, and an ACK numbered below the peer's RCV.NXT would fail its
            // acceptability test (§3.10.7.4) and be dropped with its ACK field unread;
            // with both sides retransmitting, neither would ever learn of the other's
            // progress (BSD tcp_output uses snd_max here for the same reason).
            // Nor past the peer's window: after a zero-window probe SND.MAX lies beyond
            // it, the only acceptable number is RCV.NXT = SND.UNA, and two zero windows
            // would deadlock on dropped ACKs (Linux tcp_acceptable_seq caps it likewise).
            let wnd_end = self.snd.una + self.snd.wnd;
            let seq = if self.snd.max > wnd_end {
                wnd_end
            } else {
                self.snd.max
            };
            self.push_ack(now, seq, out);
        }
    }

    fn push_ack(&mut self, now: Instant, seq: SeqNum, out: &mut Vec<TxSegment>) {
        let mut seg = TxSegment {
            seq,
            ack: Some(self.rcv.nxt),
            ..Default::default()
        };
        self.advertise(&mut seg, now);
        out.push(seg);
    }

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
        if self.cfg.window_scaling && (!passive || self.ws_ok) {
            seg.wscale = Some(self.rcv.wscale);
        }
        seg.sack_permitted = if passive { self.sack_ok } else { self.cfg.sack };
        // Timestamps: offered in a SYN when configured, echoed in a SYN-ACK only when the
        // peer offered them; `advertise` fills them in from `self.ts`.
        self.advertise(&mut seg, now);
        out.push(seg);
        self.snd.nxt = self.snd.iss + 1;
        self.snd.max = self.snd.max.max(self.snd.nxt);
        self.last_send = now;
        if self.recovery.retries == 0 && self.rtt_seq.is_none() {
            self.rtt_seq = Some((self.snd.nxt, now));
        } else if self.recovery.retries > 0 {
            self.rtt_seq = None;
        }
        self.timers.set(Timer::Rto, now + self.rtt.rto());
    }

    /// Send new data (or data again after a timeout) as the windows allow.
    fn send_new(&mut self, now: Instant, out: &mut Vec<TxSegment>) {
        if self.snd.nxt == self.snd.una && now - self.last_send > self.rtt.rto() {
            // RFC 5681 §4.1: restart window after an idle period.
            if self.unsent_data() > 0 {
                self.cc.on_idle_restart();
            }
        }
        loop {
            let avail = self.unsent_data();
            let fin_due = avail == 0 && self.snd.fin.is_some_and(|f| self.snd.nxt <= f);
            if avail == 0 && !fin_due {
                break;
            }
            let wnd = self.snd.wnd.min(self.cc.cwnd());
            let usable = wnd.saturating_sub(self.flight_size());
            let max_payload = self.snd.mss.saturating_sub(self.sack_option_len()).max(1);
            // With TSO, a run of full segments goes out as one super-frame.
            let burst = (self.snd.tso_max / max_payload).max(1) * max_payload;
            let mut len = avail.min(burst).min(usable);
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
            if len < max_payload && len < avail && usable < self.snd.max_wnd / 2 {
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
        let offset = seq.since(self.data_start());
        let remaining = self.snd.buf.len().saturating_sub(offset);
        let mss = self.snd.mss.saturating_sub(self.sack_option_len()).max(1);
        // New data may be a TSO run of full segments (send_new sized it); everything
        // else (retransmissions, probes) is one segment.
        let max_payload = if probe || seq < self.snd.max {
            mss
        } else {
            (self.snd.tso_max / mss).max(1) * mss
        };
        let len = remaining.min(max_len).min(max_payload);
        let fin = self.snd.fin == Some(seq + len);
        if len == 0 && !fin {
            return;
        }
        let mut seg = TxSegment {
            seq,
            ack: Some(self.rcv.nxt),
            fin,
            psh: offset + len == self.snd.buf.len(),
            payload_offset: offset,
            payload_len: len,
            ..Default::default()
        };
        self.advertise(&mut seg, now);
        out.push(seg);
        let end = seq + len + fin as usize;
        self.snd.nxt = self.snd.nxt.max(end);
        if end > self.snd.max {
            // Karn's rule: time only segments that carry nothing sent before.
            if self.rtt_seq.is_none() && seq >= self.snd.max {
                self.rtt_seq = Some((end, now));
            }
            self.snd.max = end;
        } else {
            self.retransmissions += 1;
            // Karn: a retransmission covering the timed segment spoils its sample.
            if self.rtt_seq.is_some_and(|(timed, _)| seq < timed) {
                self.rtt_seq = None;
            }
        }
        self.last_send = now;
        if !self.timers.is_armed(Timer::Rto) && !probe {
            self.timers.set(Timer::Rto, now + self.rtt.rto());
        }
    }
}

impl std::fmt::Debug for Tcb {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tcb")
            .field("state", &self.state)
            .field("local", &self.local)
            .field("remote", &self.remote)
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
