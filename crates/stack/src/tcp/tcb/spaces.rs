//! The send and receive sequence spaces of a connection (RFC 9293 §3.3.1), with what
//! RFC 7323 and RFC 5961 add to them, the buffers, the FINs both ways, zero-window
//! probing's persist state and the delayed-ACK count.

use crate::tcp::recv_buffer::RecvBuffer;
use crate::tcp::send_buffer::SendBuffer;
use crate::tcp::seq::SeqNum;
use crate::time::Instant;

/// The send sequence space (RFC 9293 §3.3.1: ISS, SND.UNA, SND.NXT, SND.WND, SND.WL1,
/// SND.WL2), what RFC 7323 and RFC 5961 add to it, the send buffer, our FIN and the
/// persist state of zero-window probing (§3.8.6.1).
pub(super) struct SendSeq {
    pub(super) iss: SeqNum,
    pub(super) una: SeqNum,
    pub(super) nxt: SeqNum,
    /// SND.MAX: the highest sequence number sent so far (SND.NXT can be rewound by a
    /// timeout).
    pub(super) max: SeqNum,
    /// SND.WND, scaled (at most 2^30, RFC 7323 §2.3: 32 bits hold it).
    pub(super) wnd: u32,
    pub(super) wl1: SeqNum,
    pub(super) wl2: SeqNum,
    /// MAX.SND.WND: the largest window the peer has offered (RFC 5961 §5.2).
    pub(super) max_wnd: u32,
    /// Snd.Wind.Shift: the peer's window-scale shift (0 unless both sides agreed,
    /// RFC 7323 §2).
    pub(super) wscale: u8,
    /// Eff.snd.MSS (§3.7.1): payload bytes per full-sized segment, after the options we
    /// always send (the MSS option is 16 bits).
    pub(super) mss: u16,
    /// Most payload bytes the device segments for us in one TSO super-frame (0: no TSO;
    /// an IPv4 packet carries less than 64 KiB).
    pub(super) tso_max: u16,
    pub(super) buf: SendBuffer,
    /// Our SYN has been acknowledged: the send buffer's first byte is SND.UNA, not
    /// ISS + 1. A flag, not `una == iss`: SND.UNA comes back round to ISS after
    /// 2^32 - 1 acknowledged bytes.
    pub(super) syn_acked: bool,
    /// The application closed its sending side: a FIN follows the queued data.
    pub(super) fin_queued: bool,
    /// Sequence number of our FIN once queued ([`SendSeq::fin`]); meaningless before.
    pub(super) fin: SeqNum,
    /// Zero-window probes sent since the peer last answered with an acceptable ACK.
    pub(super) persist_probes: u16,
    /// Exponent of the persist timer's backoff (at most 16).
    pub(super) persist_backoff: u8,
    /// Zero-window probes sent since the last progress (SND.UNA advanced or the window
    /// opened): answers do not reset it. What bounds an orphan's probing.
    pub(super) stalled_probes: u16,
    /// Since when nothing has moved: the time the oldest unacknowledged sequence number
    /// was first sent, or of the last progress since. What the user and orphan timeouts
    /// count from.
    pub(super) stall_from: Instant,
}

/// The receive sequence space (RFC 9293 §3.3.1: IRS, RCV.NXT, RCV.WND as the right edge
/// advertised), what RFC 7323 adds to it, the receive buffer, the peer's FIN and the
/// delayed-ACK count (§3.8.6.3).
pub(super) struct RecvSeq {
    pub(super) irs: SeqNum,
    pub(super) nxt: SeqNum,
    /// Right edge of the window we last advertised (RCV.NXT + RCV.WND as sent); never
    /// moved left (§3.8.6).
    pub(super) adv: SeqNum,
    /// Rcv.Wind.Shift: our window-scale shift as the peer applies it (RFC 7323 §2).
    pub(super) wscale: u8,
    /// Last.ACK.sent: RCV.NXT as of the last ACK we sent (RFC 7323 §4.3).
    pub(super) last_ack_sent: SeqNum,
    pub(super) buf: RecvBuffer,
    /// Sequence number of a FIN that arrived ahead of missing data, while `fin_held`.
    /// (A flag, not an `Option`: with it the receive space fits 88 bytes.)
    pub(super) fin: SeqNum,
    pub(super) fin_held: bool,
    /// The application will not read any more (it called close): data is ACKed and
    /// dropped until `discard_until`, and answered with a RST after.
    pub(super) closed: bool,
    pub(super) discard_until: Instant,
    /// Our MSS as advertised in our SYN (§3.7.1): the largest segment we receive.
    pub(super) mss: u16,
    /// Full-sized segments received since our last ACK (ACK every second one, §3.8.6.3),
    /// saturating.
    pub(super) unacked_segs: u16,
    /// The window the receive buffer offers for the segments being built
    /// ([`RecvBuffer::offer`], set as `poll_transmit` starts).
    pub(super) offer: u32,
}

impl SendSeq {
    /// Sequence number of the first byte in the send buffer.
    pub(super) fn data_start(&self) -> SeqNum {
        if self.syn_acked {
            self.una
        } else {
            self.iss + 1
        }
    }

    /// Bytes in the send buffer not sent since SND.NXT was last set (or rewound).
    pub(super) fn unsent_data(&self) -> usize {
        let sent = self.nxt.since(self.data_start());
        self.buf.len().saturating_sub(sent)
    }

    /// Queue our FIN after everything in the send buffer (its sequence number is fixed
    /// now: no data can be added after it).
    pub(super) fn queue_fin(&mut self) {
        self.fin_queued = true;
        self.fin = self.data_start() + self.buf.len();
    }

    /// Sequence number of our FIN, once queued.
    #[inline]
    pub(super) fn fin(&self) -> Option<SeqNum> {
        self.fin_queued.then_some(self.fin)
    }

    /// Our FIN is queued and not sent since SND.NXT was last set (or rewound).
    pub(super) fn fin_unsent(&self) -> bool {
        self.fin().is_some_and(|f| self.nxt <= f)
    }

    /// Our FIN has been sent and acknowledged.
    pub(super) fn fin_acked(&self) -> bool {
        self.fin().is_some_and(|f| self.una > f)
    }

    /// SND.WND, in bytes (scaled).
    #[inline]
    pub(super) fn wnd(&self) -> usize {
        self.wnd as usize
    }

    /// Eff.snd.MSS.
    #[inline]
    pub(super) fn mss(&self) -> usize {
        self.mss as usize
    }

    /// Take the window of a segment (§3.10.7.4: SND.WND, SND.WL1, SND.WL2) and keep
    /// MAX.SND.WND up to date (RFC 5961 §5.2). `wnd` is already scaled (at most 2^30).
    pub(super) fn update_window(&mut self, wnd: usize, seq: SeqNum, ack: SeqNum) {
        let wnd = wnd as u32;
        self.wnd = wnd;
        self.max_wnd = self.max_wnd.max(wnd);
        self.wl1 = seq;
        self.wl2 = ack;
    }
}

impl RecvSeq {
    /// Hold the peer's FIN at `seq` until the data before it has arrived.
    pub(super) fn hold_fin(&mut self, seq: SeqNum) {
        self.fin = seq;
        self.fin_held = true;
    }

    /// The FIN held, if any.
    pub(super) fn held_fin(&self) -> Option<SeqNum> {
        self.fin_held.then_some(self.fin)
    }

    /// RCV.WND: what we accept from RCV.NXT on, i.e. up to the right edge we advertised.
    /// Space the application freed but that receiver SWS avoidance has not announced yet
    /// is not offered (§3.8.6.2.2 keeps RCV.WND fixed until the update is sent).
    pub(super) fn window(&self) -> usize {
        self.adv.since(self.nxt)
    }

    /// The window a SYN or SYN-ACK carries: unscaled, so at most 65535 (RFC 7323 §2.2).
    pub(super) fn syn_window(&self) -> usize {
        self.buf.window().min(65535)
    }

    /// Receiver SWS threshold (§3.8.6.2.2): min(Fr·RCV.BUFF, Eff.snd.MSS) with Fr = 1/2.
    pub(super) fn sws_threshold(&self) -> usize {
        (self.buf.capacity() / 2).min(self.mss as usize).max(1)
    }

    /// The smallest window-scale shift that lets the window field cover the whole
    /// receive buffer (RFC 7323 §2.3: at most 14).
    pub(super) fn wscale_for_buffer(&self) -> u8 {
        let mut shift = 0u8;
        while shift < 14 && (self.buf.capacity() >> shift) > 65535 {
            shift += 1;
        }
        shift
    }
}
