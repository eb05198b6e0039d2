//! Header prediction (Van Jacobson's, as Linux's `tcp_rcv_established` uses it): a
//! short test for the common segment, and when it holds, a shortcut through the one
//! input path, not a second copy of it. In ESTABLISHED the common segment is the next
//! one in sequence, carrying only ACK (and PSH), no SACK blocks, a timestamp PAWS
//! accepts, and either an ACK of new data or data (or both), while nothing is going on
//! that loss detection or recovery would act on and no FIN is held. For such a segment
//! the outcome of most checks of §3.10.7.4 is known; [`Tcb::on_segment_predicted`]
//! calls the general path's steps (`input.rs`, `ack.rs`) that do work for it, in their
//! order, and skips the rest.
//!
//! Output likewise: [`Tcb::transmit_predicted`] sends the one segment (new data, our FIN
//! after it, or the ACK owed alone) that `poll_transmit` would, through the steps
//! `send_new` and `send_segment_at` take (`output.rs`), when nothing but that is owed.
//!
//! `tests/prediction.rs` runs random conversations with faults through pairs of
//! connections with header prediction on and off and compares every output and every
//! part of their state.

use super::PendingOutput;
use super::{RxOutcome, State, Tcb};
use crate::tcp::pool::RingPool;
use crate::tcp::segment::{
    write_fixed_header, write_timestamp_block, Segment, TxSegment, ACK, MIN_HEADER_LEN, PSH,
    TS_BLOCK_LEN,
};
use crate::tcp::seq::SeqNum;
use crate::time::Instant;

// Segments header prediction took on this thread, received and sent (for the tests
// that compare it with the general path, to show it was taken).
#[cfg(test)]
thread_local! {
    pub(crate) static PREDICTED: std::cell::Cell<[u64; 2]> = const { std::cell::Cell::new([0; 2]) };
}

/// Count a segment taken by header prediction: `0` received, `1` sent.
#[cfg(test)]
pub(super) fn count_predicted(way: usize) {
    PREDICTED.with(|n| {
        let mut counts = n.get();
        counts[way] += 1;
        n.set(counts);
    });
}

impl Tcb {
    /// Process `seg`, whose payload is `text`, on the short path if it is the predicted
    /// segment; returns false (having changed nothing) if it is not, and the general
    /// path must take it.
    // Always inline: one caller, per segment; its arguments stay in registers.
    #[inline(always)]
    pub(super) fn on_segment_predicted(
        &mut self,
        now: Instant,
        seg: &Segment,
        text: &[u8],
        out: &mut RxOutcome,
        pool: &mut RingPool,
    ) -> bool {
        if !self.predicts(now, seg, text) {
            return false;
        }
        #[cfg(test)]
        count_predicted(0);
        // No SYN; PAWS passes; acceptable at RCV.NXT with nothing to trim; no RST; ACK.
        self.on_acceptable(now, seg);
        // ACK processing: an acceptable ACK. With the send side quiet, there is nothing
        // to undo, no loss probe to settle and no loss to detect (`on_delivery`); in
        // ESTABLISHED no FIN of ours to be acknowledged.
        let facts = self.take_ack(now, seg, pool);
        let delivered = self.delivered(&facts);
        self.cc_on_delivery(now, &facts, delivered);
        self.arm_tlp(now);
        self.window_update(now, seg);
        // Segment text, in order; no FIN, and none held to take.
        if !text.is_empty() {
            self.receive_data(now, seg.seq, text, seg, out, pool);
        }
        true
    }

    /// The prediction: `seg` is the common segment in ESTABLISHED (see the module
    /// docs). Each test is one the general path makes, or one that makes a step the
    /// short path skips a no-op.
    // Always inline: one caller; its tests read the fields the short path uses next.
    #[inline(always)]
    fn predicts(&self, now: Instant, seg: &Segment, payload: &[u8]) -> bool {
        let flags = seg.flags;
        let len = payload.len();
        let ack = seg.ack;
        self.state == State::Established
            && flags.ack
            && !(flags.syn || flags.rst || flags.fin)
            // Acceptable (§3.10.7.4 first check) with nothing to trim: at RCV.NXT, all
            // of its payload at hand and inside the window (a bare ACK at RCV.NXT is
            // acceptable even in a zero window).
            && seg.seq == self.rcv.nxt
            && seg.payload_len == len
            && len <= self.rcv.window()
            && seg.sack[0].is_none()
            && !self.paws_rejects(now, seg)
            && self.ack_acceptable(ack)
            // An ACK of new data, or data that acknowledges nothing new: not a
            // duplicate ACK (RFC 5681 §2), and not older than SND.UNA.
            && (self.snd.una < ack || (self.snd.una == ack && len > 0))
            && self.send_side_quiet()
            && !self.rcv.fin_held
    }

    /// Nothing going on in the send direction that an ACK's loss detection, recovery,
    /// undo or tail loss probe steps would act on: a quiet scoreboard (nothing SACKed,
    /// lost or retransmitted), no recovery point, no loss probe out, no recovery, no
    /// undo pending, no duplicate ACKs.
    // Always inline: a few loads next to those the prediction has just made.
    #[inline(always)]
    fn send_side_quiet(&self) -> bool {
        let f = self.flight();
        let r = &self.recovery;
        f.board.is_quiet()
            && f.recover.is_none()
            && f.tlp.is_none()
            && !r.in_recovery
            && r.cold.is_none()
            && r.dupacks == 0
    }
}

/// The segment [`Tcb::poll_transmit_predicted`] hands back by value: an ACK in a
/// synchronized state, with new data or without, no control bit but PSH, no SACK
/// blocks, and the timestamps option or no option at all. A quarter of a
/// [`TxSegment`], and its header has one layout (see
/// [`PredictedSegment::write_header`]). Every data segment and ACK `poll_transmit`
/// sends starts as one ([`TxSegment`] adds the rest).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct PredictedSegment {
    /// SEG.SEQ.
    pub seq: SeqNum,
    /// SEG.ACK.
    pub ack: SeqNum,
    /// The window field as sent (already scaled down).
    pub window: u16,
    /// PSH bit.
    pub psh: bool,
    /// (TSval, TSecr), RFC 7323.
    pub timestamp: Option<(u32, u32)>,
    /// Where the payload starts in the send buffer, from its first unacknowledged byte.
    pub payload_offset: u32,
    /// Bytes of payload (at most one MSS when handed back by value).
    pub payload_len: u32,
}

impl From<PredictedSegment> for TxSegment {
    fn from(p: PredictedSegment) -> TxSegment {
        TxSegment {
            seq: p.seq,
            ack: Some(p.ack),
            psh: p.psh,
            window: p.window,
            timestamp: p.timestamp,
            payload_offset: p.payload_offset as usize,
            payload_len: p.payload_len as usize,
            ..Default::default()
        }
    }
}

impl PredictedSegment {
    /// Length of its TCP header: 20 bytes, and 12 more with timestamps.
    #[inline]
    pub(crate) fn header_len(&self) -> usize {
        if self.timestamp.is_some() {
            MIN_HEADER_LEN + TS_BLOCK_LEN
        } else {
            MIN_HEADER_LEN
        }
    }

    /// Write the TCP header into `buf` (exactly [`header_len`](Self::header_len) bytes)
    /// with a zero checksum: the bytes [`TxSegment::write_header`] writes for the same
    /// segment, without its general option and flag logic.
    #[inline]
    pub(crate) fn write_header(&self, buf: &mut [u8], src_port: u16, dst_port: u16) {
        let (fixed, options) = buf.split_at_mut(MIN_HEADER_LEN);
        let fixed: &mut [u8; MIN_HEADER_LEN] = fixed.try_into().expect("20-byte TCP header");
        let hl = MIN_HEADER_LEN + options.len();
        let bits = ACK | if self.psh { PSH } else { 0 };
        let ports = [src_port, dst_port];
        write_fixed_header(fixed, ports, self.seq.0, self.ack.0, hl, bits, self.window);
        if let (Some((tsval, tsecr)), Some(o)) =
            (self.timestamp, options.first_chunk_mut::<TS_BLOCK_LEN>())
        {
            write_timestamp_block(o, tsval, tsecr);
        }
    }
}

/// What [`Tcb::transmit_predicted`] decided.
pub(super) enum Prediction {
    /// Done: the common segment to send, if any (a FIN went into `out`).
    Done(Option<PredictedSegment>),
    /// Not the common case: the general path decides.
    General,
}

impl Tcb {
    /// `poll_transmit` when all that is owed is new data that fits one segment and both
    /// windows (our FIN after it or alone), or no data and perhaps an ACK; in a
    /// synchronized state with no recovery, nothing lost, no probe, no RST, no D-SACK
    /// and no SACK blocks to report ([`output_is_plain`](Self::output_is_plain)).
    /// Returns [`Prediction::General`] (having changed nothing) when the general path
    /// must decide.
    #[inline]
    pub(super) fn transmit_predicted(
        &mut self,
        now: Instant,
        out: &mut Vec<TxSegment>,
    ) -> Prediction {
        if !self.output_is_plain() {
            return Prediction::General;
        }
        let avail = self.snd.unsent_data();
        let fin = self.snd.fin_unsent();
        if avail == 0 && !fin {
            // `send_new` finds nothing to send and nothing held back; the ACK owed goes
            // alone (`push_bare_ack`, without SACK blocks).
            self.cwnd_limited = false;
            if !self.pending.has(PendingOutput::ACK_NOW) {
                return Prediction::Done(None);
            }
            let mut seg = self.ack_segment(self.acceptable_seq());
            self.advertise_plain(&mut seg, now);
            return Prediction::Done(Some(seg));
        }
        // `send_new` for one segment: new data from SND.MAX on (not after a timeout
        // rewound SND.NXT), no restart after idle due, all of it in one segment (with no
        // SACK blocks to carry, Eff.snd.MSS is all payload) and inside both windows.
        let seq = self.snd.nxt;
        if seq != self.snd.max || avail > self.snd.mss() || self.idle_restart_due(now) {
            return Prediction::General;
        }
        let usable = self.rwnd_room().min(self.cc_room());
        if usable == 0 || avail > usable {
            return Prediction::General;
        }
        debug_assert!(!fin || self.snd.fin() == Some(seq + avail));
        // Neither window holds it back, and after it nothing is left.
        self.cwnd_limited = false;
        // `send_segment_at`, then the loss-probe timer as `transmit_general` arms it.
        let mut seg = self.data_segment(seq, avail);
        self.advertise_plain(&mut seg, now);
        self.on_sent(now, seq, avail, fin, false);
        self.arm_tlp_after_send(now);
        if fin {
            out.push(TxSegment {
                fin: true,
                ..seg.into()
            });
            return Prediction::Done(None);
        }
        Prediction::Done(Some(seg))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// The predicted segment's header is byte for byte the one the general writer
        /// makes for the same segment.
        #[test]
        fn predicted_header_is_the_general_one(
            seq: u32, ack: u32, window: u16, psh: bool,
            timestamp: Option<(u32, u32)>, len in 0u32..1500, ports: (u16, u16),
        ) {
            let p = PredictedSegment {
                seq: SeqNum(seq),
                ack: SeqNum(ack),
                window,
                psh,
                timestamp,
                payload_offset: 0,
                payload_len: len,
            };
            let general = TxSegment::from(p);
            prop_assert_eq!(p.header_len(), general.header_len());
            let mut a = [0xa5u8; 32];
            let mut b = [0x5au8; 32];
            p.write_header(&mut a[..p.header_len()], ports.0, ports.1);
            general.write_header(&mut b[..p.header_len()], ports.0, ports.1);
            prop_assert_eq!(&a[..p.header_len()], &b[..p.header_len()]);
        }
    }
}
