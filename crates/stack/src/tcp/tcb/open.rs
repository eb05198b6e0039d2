//! Opening a connection (§3.10.1, §3.10.7.2): the three ways a [`Tcb`] is born (active
//! open, passive open, a returning SYN cookie) and the options the handshake settles
//! (RFC 7323 §2.2, §3.2; RFC 2018 §2; RFC 6691).

use std::rc::Rc;

use super::deadlines::TimerTable;
use super::{
    ConnFlags, Events, PendingOutput, RareState, Recovery, RecvSeq, SendSeq, State, Tcb, TcbLimits,
    Timestamps,
};
use crate::tcp::cc::{Cc, CongestionControl};
use crate::tcp::config::TcpConfig;
use crate::tcp::options::{DEFAULT_MSS, TS_OPTION_LEN};
use crate::tcp::recv_buffer::RecvBuffer;
use crate::tcp::scoreboard::RackKeep;
use crate::tcp::segment::Segment;
use crate::tcp::send_buffer::SendBuffer;
use crate::tcp::seq::SeqNum;
use crate::time::Instant;

/// What every new connection is created with, whichever way it opens.
#[derive(Debug, Clone)]
pub(crate) struct Opening<'a> {
    /// Our initial sequence number (RFC 9293 §3.4.1; RFC 6528).
    pub iss: SeqNum,
    /// Added to our millisecond clock in the TSvals we send, so they do not reveal
    /// uptime (RFC 7323 §7.1).
    pub ts_offset: u32,
    /// The largest segment our link carries (MTU - 40), announced in our SYN.
    pub our_mss: u16,
    /// The time of the opening.
    pub now: Instant,
    /// The engine's TCP settings, for what the connection starts with (buffer sizes,
    /// RTO bounds, options to offer).
    pub cfg: &'a TcpConfig,
    /// What the connection consults during its life: [`TcbLimits::new`] of `cfg`,
    /// built once by the engine and shared by its connections.
    pub limits: Rc<TcbLimits>,
}

/// How a connection opens: what [`Tcb::open`] does with a block fresh from
/// [`Tcb::new`].
#[derive(Debug, Clone, Copy)]
pub(crate) enum Open<'s> {
    /// Active open (§3.10.1): SYN-SENT, with a SYN to send.
    Active,
    /// Passive open on this SYN for a listener (§3.10.7.2): SYN-RECEIVED, with a
    /// SYN-ACK to send.
    Passive(&'s Segment),
    /// A valid SYN-cookie ACK, with what the cookie preserved of the client's SYN:
    /// ESTABLISHED. `Opening::iss` is then the cookie (our SYN-ACK's sequence number)
    /// and the client's ISN the ACK's sequence number - 1.
    Cookie(&'s Segment, SynOptions),
}

/// Options a SYN carried that shape the connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct SynOptions {
    /// Maximum segment size (RFC 9293 §3.7.1); 536 when absent.
    pub mss: Option<u16>,
    /// Window-scale shift (RFC 7323 §2).
    pub wscale: Option<u8>,
    /// SACK-permitted (RFC 2018 §2).
    pub sack_permitted: bool,
    /// (TSval, TSecr) (RFC 7323 §3).
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

impl Tcb {
    /// A block in CLOSED with nothing sent or received; [`Tcb::open`] moves it into its
    /// first state.
    // Always inline: so that the engine builds the block in its slot, not on the stack.
    #[inline(always)]
    pub(crate) fn new(p: &Opening<'_>) -> Tcb {
        let &Opening {
            iss,
            our_mss,
            now,
            cfg,
            ref limits,
            ..
        } = p;
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
                mss: our_mss,
                tso_max: 0,
                buf: SendBuffer::new(cfg.send_buffer),
                syn_acked: false,
                fin_queued: false,
                fin: SeqNum(0),
                persist_probes: 0,
                persist_backoff: 0,
                stalled_probes: 0,
                stall_from: now,
            },
            rcv: RecvSeq {
                irs: SeqNum(0),
                nxt: SeqNum(0),
                adv: SeqNum(0),
                wscale: 0,
                last_ack_sent: SeqNum(0),
                buf: RecvBuffer::new(cfg.recv_buffer, cfg.max_ooo_ranges),
                fin: SeqNum(0),
                fin_held: false,
                closed: false,
                discard_until: now,
                mss: our_mss,
                unacked_segs: 0,
                offer: 0,
            },
            recovery: Recovery {
                dupacks: 0,
                in_recovery: false,
                retries: 0,
                rescued: false,
                probes: 0,
                cold: None,
            },
            pending: PendingOutput::NONE,
            timers: {
                let mut timers: TimerTable<RareState> = TimerTable::default();
                if cfg.user_timeout.is_some() {
                    timers.extra_mut().user_timeout = cfg.user_timeout;
                }
                timers
            },
            rtt: limits.rtt,
            // Sized for the MSS the handshake most often settles on (ours, less the
            // timestamp option when we offer it), so that `negotiate` usually finds
            // nothing to change.
            cc: Cc::new(
                cfg.congestion_control,
                smss.saturating_sub(if cfg.timestamps { TS_OPTION_LEN } else { 0 }),
            ),
            flight: None,
            rack: RackKeep::default(),
            flags: ConnFlags::NONE,
            cwnd_limited: false,
            want_writable: false,
            last_send: now,
            last_recv: now,
            last_progress: None,
            last_now: now,
            keepalive_sent: 0,
            ts: None,
            events: Events::default(),
            cfg: Rc::clone(limits),
        }
    }

    /// Active open (§3.10.1): the connection starts in SYN-SENT with a SYN to send.
    #[cfg(test)]
    pub(crate) fn connect(p: &Opening<'_>) -> Tcb {
        Tcb::opened(p, Open::Active)
    }

    /// Passive open: a SYN arrived for a listener (§3.10.7.2). The connection starts in
    /// SYN-RECEIVED with a SYN-ACK to send.
    #[cfg(test)]
    pub(crate) fn accept_syn(p: &Opening<'_>, syn: &Segment) -> Tcb {
        Tcb::opened(p, Open::Passive(syn))
    }

    /// A connection rebuilt from a valid SYN-cookie ACK: straight to ESTABLISHED.
    /// `p.iss` is the cookie (our SYN-ACK's sequence number) and `opts` what the cookie
    /// preserved of the client's SYN; the client's ISN is the ACK's sequence number - 1.
    #[cfg(test)]
    pub(crate) fn from_cookie(p: &Opening<'_>, ack: &Segment, opts: SynOptions) -> Tcb {
        Tcb::opened(p, Open::Cookie(ack, opts))
    }

    #[cfg(test)]
    fn opened(p: &Opening<'_>, how: Open<'_>) -> Tcb {
        let mut tcb = Tcb::new(p);
        tcb.open(p, how);
        tcb
    }

    /// Move a block fresh from [`Tcb::new`] (in CLOSED, built from the same `p`) into
    /// its first state. The engine builds the block where it keeps it and opens it
    /// there: a block is hundreds of bytes, and each move of it by value is a copy.
    // Always inline: one caller, per connection; the block is written in place.
    #[inline(always)]
    pub(crate) fn open(&mut self, p: &Opening<'_>, how: Open<'_>) {
        match how {
            Open::Active => self.open_active(p),
            Open::Passive(syn) => self.open_passive(p, syn),
            Open::Cookie(ack, opts) => self.open_from_cookie(p, ack, opts),
        }
    }

    fn open_active(&mut self, p: &Opening<'_>) {
        let (now, cfg) = (p.now, p.cfg);
        self.state = State::SynSent;
        self.flags.set(ConnFlags::ACTIVE_OPEN);
        self.rcv.wscale = if cfg.window_scaling {
            cfg.rcv_wscale()
        } else {
            0
        };
        if cfg.timestamps {
            self.ts = Some(Timestamps {
                recent: 0,
                recent_age: now,
                offset: p.ts_offset,
            });
        }
        self.pending.set(PendingOutput::SYN);
    }

    fn open_passive(&mut self, p: &Opening<'_>, syn: &Segment) {
        self.state = State::SynReceived;
        self.rcv.irs = syn.seq;
        self.rcv.nxt = syn.seq + 1;
        self.rcv.adv = self.rcv.nxt;
        self.rcv.last_ack_sent = self.rcv.nxt;
        self.negotiate(&SynOptions::from(syn), p.ts_offset, p.now);
        self.snd.wnd = u32::from(syn.window);
        self.snd.max_wnd = self.snd.wnd;
        self.snd.wl1 = syn.seq;
        self.pending.set(PendingOutput::SYN);
    }

    fn open_from_cookie(&mut self, p: &Opening<'_>, ack: &Segment, opts: SynOptions) {
        let (iss, now) = (p.iss, p.now);
        self.rcv.irs = ack.seq - 1;
        self.rcv.nxt = ack.seq;
        self.negotiate(&opts, p.ts_offset, now);
        self.snd.una = iss + 1;
        self.snd.syn_acked = true;
        self.snd.nxt = self.snd.una;
        self.snd.max = self.snd.una;
        let wnd = (ack.window as usize) << self.snd.wscale;
        self.snd.update_window(wnd, ack.seq, ack.ack);
        // The cookie SYN-ACK offered the unscaled SYN window (see `advertise`): RCV.WND
        // starts there, so data on this very ACK is acceptable.
        self.rcv.adv = self.rcv.nxt + self.rcv.syn_window();
        self.rcv.last_ack_sent = self.rcv.nxt;
        if let (Some(ts), Some((tsval, _))) = (self.ts.as_mut(), ack.timestamp) {
            ts.recent = tsval;
        }
        // The ACK shows our SYN-ACK reached the peer.
        self.last_progress = Some(now);
        self.enter_established(now);
    }

    /// Settle options from the peer's SYN (RFC 7323 §2.2, §3.2; RFC 2018 §2).
    pub(super) fn negotiate(&mut self, peer: &SynOptions, ts_offset: u32, now: Instant) {
        let peer_mss = peer.mss.unwrap_or(DEFAULT_MSS).max(64);
        match (self.cfg.window_scaling, peer.wscale) {
            (true, Some(ws)) => {
                self.flags.set(ConnFlags::WS_OK);
                self.snd.wscale = ws.min(14);
                self.rcv.wscale = self.rcv.wscale_for_buffer();
            }
            _ => {
                self.snd.wscale = 0;
                self.rcv.wscale = 0;
            }
        }
        self.flags
            .put(ConnFlags::SACK_OK, self.cfg.sack && peer.sack_permitted);
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
        self.snd.mss = (mss - if self.ts.is_some() { TS_OPTION_LEN } else { 0 }) as u16;
        self.cc.set_mss(self.snd.mss());
    }
}
