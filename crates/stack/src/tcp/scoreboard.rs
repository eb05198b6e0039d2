//! The sender's scoreboard: one record per segment sent and not yet cumulatively
//! acknowledged, with what the peer's SACK blocks (RFC 2018), RACK (RFC 8985) and the
//! DupThresh rule (RFC 6675) have said about it. From it come `pipe` (RFC 6675 §4), the
//! next segment to retransmit (NextSeg rule 1), and time-based loss detection.
//!
//! The records cover exactly [SND.UNA, SND.MAX) in order, without gaps: new data is
//! appended as it is sent, retransmissions update the records they cover (split at
//! their edges), cumulative ACKs pop from the front. A TSO super-frame is one record
//! until a SACK block or a retransmission cuts it. Nothing here allocates until data is
//! in flight, and a connection whose data is all acknowledged holds no records.
//!
//! Hostile SACK blocks (empty, reversed, below SND.UNA, beyond SND.MAX, wrapping) are
//! ignored; nothing a peer sends can make this code panic.

use std::time::Duration;

use super::seq::SeqNum;
use crate::time::Instant;
use records::Records;

mod records;

/// RFC 6675 §2 DupThresh: segments SACKed above a hole before it counts as lost.
pub(crate) const DUP_THRESH: usize = 3;

/// The peer SACKed it.
const SACKED: u8 = 1;
/// Deemed lost (RACK, DupThresh, a timeout); cleared if SACKed or acknowledged.
const LOST: u8 = 2;
/// Retransmitted, and that retransmission is still thought to be in flight.
const RETRANS: u8 = 4;
/// Retransmitted at least once (its RTT is ambiguous, RFC 8985 §6.2 step 2).
const EVER_RETRANS: u8 = 8;

/// One segment as sent (or a TSO run of them), last transmitted at `xmit`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Sent {
    start: SeqNum,
    end: SeqNum,
    xmit: Instant,
    flags: u8,
}

impl Sent {
    fn len(&self) -> usize {
        self.end.since(self.start)
    }
    /// `len` as the byte counts keep it (a record is far below 4 GiB).
    fn bytes(&self) -> u32 {
        self.end.0.wrapping_sub(self.start.0)
    }
    fn has(&self, flag: u8) -> bool {
        self.flags & flag != 0
    }
}

/// RACK state (RFC 8985 §5.2, §6.2). Times in µs are kept in 32 bits, saturating at
/// 71 minutes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Rack {
    /// RACK.xmit_ts and RACK.end_seq: the most recently sent segment delivered so far
    /// (`end` and `rtt` hold once `xmit` does: a segment has been delivered).
    xmit: Option<Instant>,
    end: SeqNum,
    /// RACK.rtt: the RTT of that segment, microseconds (plain integers: this runs on
    /// every ACK).
    rtt: u32,
    /// RACK.min_RTT; [`NO_RTT`] before the first sample.
    min_rtt: u32,
    /// RACK.fack: the highest sequence number delivered (cumulatively or selectively).
    fack: SeqNum,
    /// RACK.dsack_round: SND.MAX when the last D-SACK widened the window, while
    /// `in_dsack_round`. (A flag, not an `Option`: with it the state fits 32 bytes.)
    dsack_round: SeqNum,
    in_dsack_round: bool,
    /// RACK.reo_wnd_mult (at most 64) and RACK.reo_wnd_persist (at most 16) (§6.2
    /// step 4).
    reo_wnd_mult: u8,
    reo_wnd_persist: u8,
    /// RACK.reordering_seen.
    reordering_seen: bool,
}

/// RACK.min_RTT before the first sample.
const NO_RTT: u32 = u32::MAX;

impl Rack {
    /// RACK.xmit_ts, once a segment has been delivered.
    fn xmit(&self) -> Option<Instant> {
        self.xmit
    }

    /// SND.UNA reached `dsack_round`: the round of the last widening is over.
    #[inline]
    fn end_dsack_round(&mut self, una: SeqNum) {
        if self.in_dsack_round && una >= self.dsack_round {
            self.in_dsack_round = false;
        }
    }
}

/// `later - earlier` in µs, saturating at 32 bits (below [`NO_RTT`]).
fn rtt_us(later: Instant, earlier: Instant) -> u32 {
    later.micros_since(earlier).min(u64::from(NO_RTT - 1)) as u32
}

/// What one ACK's SACK and cumulative parts did to the scoreboard.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct SackOutcome {
    /// The first block was a D-SACK (RFC 2883 §4): a duplicate the peer received.
    pub dsack: bool,
    /// Blocks ignored as invalid.
    pub invalid_blocks: u32,
}

/// What a loss-detection pass found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct LossOutcome {
    /// Records RACK newly marked lost by time.
    pub rack_lost: u32,
    /// Records newly marked lost by the DupThresh rule (RFC 6675 IsLost).
    pub dupthresh_lost: u32,
    /// When the next not-yet-lost record's reordering window runs out: arm the RACK
    /// reordering timer for then (RFC 8985 §6.3).
    pub timeout: Option<Instant>,
}

/// The sender's record of what is in flight. See the module docs.
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct Scoreboard {
    segs: Records<Sent>,
    /// Bytes in SACKed records.
    sacked: u32,
    /// Bytes in records marked lost (retransmitted or not).
    lost: u32,
    /// Bytes in records whose retransmission is in flight.
    retrans: u32,
    rack: Rack,
}

impl std::fmt::Debug for Scoreboard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "rack {:?} segs {:?}", self.rack, self.dump())
    }
}

impl Default for Scoreboard {
    fn default() -> Self {
        Scoreboard::EMPTY
    }
}

/// What RACK learns about the path and keeps from one flight to the next (RFC 8985
/// §6.2): the minimum RTT and the reordering window's state. The rest of the
/// scoreboard means something only while data is in flight, so a connection whose
/// data is all acknowledged may give the scoreboard up ([`Scoreboard::keep`]) and
/// start the next flight from this alone ([`Scoreboard::resume_from`]). Packed: its
/// seven bytes fill the connection block's gaps, and it is only ever copied whole.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(C, packed)]
pub(crate) struct RackKeep {
    min_rtt: u32,
    reo_wnd_mult: u8,
    reo_wnd_persist: u8,
    reordering_seen: bool,
}

impl Default for RackKeep {
    fn default() -> Self {
        Scoreboard::EMPTY.keep()
    }
}

impl Scoreboard {
    /// No record, nothing learnt.
    pub(crate) const EMPTY: Scoreboard = Scoreboard {
        segs: Records::EMPTY,
        sacked: 0,
        lost: 0,
        retrans: 0,
        rack: Rack {
            xmit: None,
            end: SeqNum(0),
            rtt: 0,
            min_rtt: NO_RTT,
            fack: SeqNum(0),
            dsack_round: SeqNum(0),
            in_dsack_round: false,
            reo_wnd_mult: 1,
            reo_wnd_persist: 0,
            reordering_seen: false,
        },
    };

    /// Whether the scoreboard holds nothing but what [`keep`](Self::keep) keeps: no
    /// record (so nothing SACKed, lost or resent either).
    pub(crate) fn is_empty(&self) -> bool {
        self.segs.len() == 0
    }

    /// What the next flight needs of an empty scoreboard ([`is_empty`](Self::is_empty)).
    ///
    /// The rest may go. RACK.xmit_ts, RACK.end_seq and RACK.rtt describe a segment
    /// delivered before everything now acknowledged: every segment of a later flight
    /// is sent after it (at the same time or later, and above it), so RACK never
    /// compares a later segment against it, and the first delivery of the next flight
    /// replaces it. RACK.fack is at most SND.UNA, below everything the next flight
    /// delivers ([`resume_from`](Self::resume_from) sets it there). The D-SACK round ended when
    /// SND.UNA reached SND.MAX: the next test of it would end it.
    pub(crate) fn keep(&self) -> RackKeep {
        RackKeep {
            min_rtt: self.rack.min_rtt,
            reo_wnd_mult: self.rack.reo_wnd_mult,
            reo_wnd_persist: self.rack.reo_wnd_persist,
            reordering_seen: self.rack.reordering_seen,
        }
    }

    /// Make an empty scoreboard ([`is_empty`](Self::is_empty)) the one a flight
    /// starting at SND.UNA = `una` begins with, with what the previous flight kept
    /// ([`keep`](Self::keep)). Sets all of RACK's state: the scoreboard may have served
    /// another connection.
    #[inline]
    pub(crate) fn resume_from(&mut self, keep: RackKeep, una: SeqNum) {
        debug_assert!(self.is_empty() && self.is_quiet());
        self.rack = Rack {
            xmit: None,
            end: SeqNum(0),
            rtt: 0,
            min_rtt: keep.min_rtt,
            fack: una,
            dsack_round: SeqNum(0),
            in_dsack_round: false,
            reo_wnd_mult: keep.reo_wnd_mult,
            reo_wnd_persist: keep.reo_wnd_persist,
            reordering_seen: keep.reordering_seen,
        };
    }

    /// Bytes the peer has SACKed above SND.UNA.
    pub(crate) fn sacked_bytes(&self) -> usize {
        self.sacked as usize
    }

    /// Bytes marked lost.
    pub(crate) fn lost_bytes(&self) -> usize {
        self.lost as usize
    }

    /// Nothing is SACKed, lost or retransmitted: the fast path (no loss detection to
    /// run on an ACK).
    pub(crate) fn is_quiet(&self) -> bool {
        self.sacked == 0 && self.lost == 0 && self.retrans == 0
    }

    /// RACK.reordering_seen.
    #[cfg(test)]
    pub(crate) fn reordering_seen(&self) -> bool {
        self.rack.reordering_seen
    }

    /// RFC 6675 §4 pipe (as Linux counts it): outstanding bytes less those SACKed or
    /// lost, plus retransmissions in flight. `outstanding` is SND.MAX − SND.UNA.
    pub(crate) fn pipe(&self, outstanding: usize) -> usize {
        outstanding
            .saturating_sub(self.sacked as usize + self.lost as usize)
            .saturating_add(self.retrans as usize)
    }

    /// Record a transmission of [start, end) at `now`: new data past the last record is
    /// appended, anything below it is a retransmission of the records it covers.
    pub(crate) fn on_transmit(&mut self, start: SeqNum, end: SeqNum, now: Instant) {
        if end <= start {
            return;
        }
        let new_from = match self.segs.back().map(|s| s.end) {
            Some(tail) if start < tail => {
                self.retransmitted(start, if end < tail { end } else { tail }, now);
                tail
            }
            _ => start,
        };
        self.append(new_from, end, now);
    }

    /// [`on_transmit`](Self::on_transmit) for new data only, [start, end) from SND.MAX
    /// on: past every record.
    #[inline]
    pub(crate) fn on_transmit_new(&mut self, start: SeqNum, end: SeqNum, now: Instant) {
        debug_assert!(self.segs.back().is_none_or(|s| s.end <= start));
        self.append(start, end, now);
    }

    /// A record for [start, end) sent at `now`, after the last one.
    #[inline]
    fn append(&mut self, start: SeqNum, end: SeqNum, now: Instant) {
        if start < end {
            self.segs.push_back(Sent {
                start,
                end,
                xmit: now,
                flags: 0,
            });
        }
    }

    /// A retransmission of [start, end), inside the records.
    fn retransmitted(&mut self, start: SeqNum, end: SeqNum, now: Instant) {
        let (Some(first), Some(last)) = (self.split_at(start), self.split_at(end)) else {
            return;
        };
        for i in first..last {
            let s = &mut self.segs[i];
            if s.has(SACKED) {
                continue;
            }
            if !s.has(RETRANS) {
                self.retrans += s.bytes();
            }
            s.flags |= RETRANS | EVER_RETRANS;
            s.xmit = now;
        }
    }

    /// Make `seq` a record boundary; returns the index of the record starting there (or
    /// the record count if `seq` is the end). `None` if `seq` lies outside the records.
    fn split_at(&mut self, seq: SeqNum) -> Option<usize> {
        let front = self.segs.front()?.start;
        let back = self.segs.back()?.end;
        if seq < front || seq > back {
            return None;
        }
        if seq == back {
            return Some(self.segs.len());
        }
        // Records are contiguous and sorted: the first whose end is past `seq`.
        let i = self.segs.partition_point(|s| s.end <= seq);
        let s = self.segs[i];
        if s.start == seq {
            return Some(i);
        }
        let (left, right) = (Sent { end: seq, ..s }, Sent { start: seq, ..s });
        self.segs[i] = left;
        self.segs.insert(i + 1, right);
        Some(i + 1)
    }

    /// Drop the accounting of a record leaving the scoreboard (acknowledged) or
    /// becoming SACKed.
    fn unaccount(&mut self, s: &Sent, len: u32) {
        if s.has(SACKED) {
            self.sacked -= len;
        }
        if s.has(LOST) {
            self.lost -= len;
        }
        if s.has(RETRANS) {
            self.retrans -= len;
        }
    }

    /// A cumulative ACK up to `una`: pop what it covers, feeding RACK (RFC 8985 §6.2)
    /// with each record it delivered that was not SACKed before.
    pub(crate) fn on_cumulative_ack(&mut self, una: SeqNum, now: Instant) {
        // The request/response case: one record in flight, all of it acknowledged,
        // nothing SACKed, lost or resent. What the loop below does with it, directly.
        if let Some(s) = self.segs.only() {
            if s.start < una && s.end <= una && self.is_quiet() {
                self.segs.take_only();
                let mut best = None;
                self.rack_delivered(&s, now, &mut best);
                self.rack_advance(best, now);
                return;
            }
        }
        self.cumulative_ack_walk(una, now);
    }

    /// [`on_cumulative_ack`](Self::on_cumulative_ack) in general: walk the records
    /// from the front.
    fn cumulative_ack_walk(&mut self, una: SeqNum, now: Instant) {
        let mut best: Option<Sent> = None;
        // Nothing SACKed, lost or resent: the records went out in sequence order, so the
        // last one acknowledged is the most recently sent and the only one RACK needs.
        let quiet = self.is_quiet();
        while let Some(&s) = self.segs.front() {
            if s.start >= una {
                break;
            }
            if s.end <= una {
                self.segs.pop_front();
                if quiet {
                    if self.segs.front().is_none_or(|n| n.start >= una) {
                        self.rack_delivered(&s, now, &mut best);
                    }
                    continue;
                }
                self.unaccount(&s, s.bytes());
                if !s.has(SACKED) {
                    self.rack_delivered(&s, now, &mut best);
                }
            } else {
                // Part of a record (a TSO run, or a partial segment) acknowledged.
                let cut = una.0.wrapping_sub(s.start.0);
                self.unaccount(&s, cut);
                let acked = Sent { end: una, ..s };
                if !s.has(SACKED) {
                    self.rack_delivered(&acked, now, &mut best);
                }
                self.segs[0].start = una;
                break;
            }
        }
        self.rack_advance(best, now);
    }

    /// Take the SACK blocks of an ACK whose cumulative part has already been applied
    /// (SND.UNA = `una`); `prior_una` is SND.UNA before that ACK, `snd_max` the highest
    /// sequence number sent. Blocks outside (`una`, `snd_max`] are ignored, except that a
    /// first block at or below the cumulative ACK, or inside the second block, is a
    /// D-SACK (RFC 2883 §4).
    pub(crate) fn on_sack(
        &mut self,
        blocks: &[Option<(u32, u32)>; 3],
        una: SeqNum,
        snd_max: SeqNum,
        now: Instant,
        mss: usize,
    ) -> SackOutcome {
        let mut out = SackOutcome::default();
        self.rack.end_dsack_round(una);
        let valid = |l: SeqNum, r: SeqNum| l < r && r.since(l) < (1 << 30);
        if let Some((l, r)) = blocks[0] {
            let (l, r) = (SeqNum(l), SeqNum(r));
            let inside_second =
                blocks[1].is_some_and(|(l2, r2)| SeqNum(l2) <= l && r <= SeqNum(r2));
            if valid(l, r) && (r <= una || inside_second) && r <= snd_max {
                out.dsack = true;
                self.on_dsack(snd_max);
            }
        }
        let mut best: Option<Sent> = None;
        for (i, block) in blocks.iter().enumerate() {
            let Some((l, r)) = *block else { continue };
            if i == 0 && out.dsack {
                continue;
            }
            let (l, r) = (SeqNum(l), SeqNum(r));
            if !valid(l, r) || l < una || r > snd_max {
                out.invalid_blocks += 1;
                continue;
            }
            self.mark_sacked(l, r, now, mss.max(1), &mut best);
        }
        self.rack_advance(best, now);
        out
    }

    fn mark_sacked(
        &mut self,
        l: SeqNum,
        r: SeqNum,
        now: Instant,
        mss: usize,
        best: &mut Option<Sent>,
    ) {
        // Only whole segments are SACKed: an edge inside a record is moved inward to a
        // segment boundary of that record (and inside a SACKed record, to its edge), so
        // a peer SACKing odd byte ranges cannot cut the flight into tiny records (the
        // CVE-2019-11477 class; Linux rounds the same way).
        let Some(l) = self.round_edge(l, mss, true) else {
            return;
        };
        let Some(r) = self.round_edge(r, mss, false) else {
            return;
        };
        if l >= r {
            return;
        }
        let (Some(first), Some(last)) = (self.split_at(l), self.split_at(r)) else {
            return;
        };
        for i in first..last {
            let s = self.segs[i];
            if s.has(SACKED) {
                continue;
            }
            self.unaccount(&s, s.bytes());
            self.sacked += s.bytes();
            self.segs[i].flags = (s.flags & EVER_RETRANS) | SACKED;
            self.rack_delivered(&s, now, best);
        }
    }

    /// `seq` moved to a boundary a split may use: up (`up`) or down to a multiple of
    /// `mss` from the start of the record it falls in, or to that record's edge if it
    /// is SACKed already. `None` outside the records.
    fn round_edge(&self, seq: SeqNum, mss: usize, up: bool) -> Option<SeqNum> {
        let front = self.segs.front()?.start;
        let back = self.segs.back()?.end;
        if seq <= front {
            return Some(front);
        }
        if seq >= back {
            return Some(back);
        }
        let s = self.segs[self.segs.partition_point(|s| s.end <= seq)];
        if seq == s.start {
            return Some(seq);
        }
        if s.has(SACKED) {
            return Some(if up { s.end } else { s.start });
        }
        let into = seq.since(s.start);
        let cut = if up {
            into.div_ceil(mss).saturating_mul(mss)
        } else {
            into / mss * mss
        };
        Some(if cut >= s.len() { s.end } else { s.start + cut })
    }

    /// The head record is SACKed: after a timeout that means the receiver dropped
    /// what it had SACKed (reneging, RFC 2018 §8), so all SACK information is
    /// forgotten and the head is sent again.
    pub(crate) fn renege_if_head_sacked(&mut self) {
        if !self.segs.front().is_some_and(|s| s.has(SACKED)) {
            return;
        }
        for s in self.segs.iter_mut() {
            s.flags &= !SACKED;
        }
        self.sacked = 0;
    }

    /// Records whose retransmission is in flight.
    pub(crate) fn retransmissions_in_flight(&self) -> u32 {
        self.segs.iter().filter(|s| s.has(RETRANS)).count() as u32
    }

    /// A D-SACK arrived (RFC 8985 §6.2 step 4): widen the reordering window, once per
    /// round trip.
    fn on_dsack(&mut self, snd_max: SeqNum) {
        self.rack.reordering_seen = true;
        if !self.rack.in_dsack_round {
            self.rack.in_dsack_round = true;
            self.rack.dsack_round = snd_max;
            self.rack.reo_wnd_mult = (self.rack.reo_wnd_mult + 1).min(64);
            self.rack.reo_wnd_persist = 16;
        }
    }

    /// RACK_update (RFC 8985 §6.2 step 2) for one delivered record: keep the most
    /// recently sent, and notice reordering (step 3).
    fn rack_delivered(&mut self, s: &Sent, now: Instant, best: &mut Option<Sent>) {
        let rtt = rtt_us(now, s.xmit);
        if s.has(EVER_RETRANS) {
            // Which transmission was delivered is ambiguous: a sample shorter than the
            // path's minimum RTT must be the original's.
            if self.rack.min_rtt != NO_RTT && rtt < self.rack.min_rtt {
                return;
            }
        } else {
            self.rack.min_rtt = self.rack.min_rtt.min(rtt);
            if s.end < self.rack.fack {
                // Delivered below what was already delivered, never retransmitted:
                // the network reordered it.
                self.rack.reordering_seen = true;
            }
        }
        if best.is_none_or(|b| sent_after(s.xmit, s.end, b.xmit, b.end)) {
            *best = Some(*s);
        }
    }

    fn rack_advance(&mut self, best: Option<Sent>, now: Instant) {
        let Some(b) = best else { return };
        if b.end > self.rack.fack || self.rack.xmit.is_none() {
            self.rack.fack = b.end;
        }
        if self
            .rack
            .xmit()
            .is_none_or(|x| sent_after(b.xmit, b.end, x, self.rack.end))
        {
            self.rack.xmit = Some(b.xmit);
            self.rack.end = b.end;
            self.rack.rtt = rtt_us(now, b.xmit);
        }
    }

    /// RACK.reo_wnd (RFC 8985 §6.2 step 4). Until reordering has been seen, the window is
    /// zero in recovery and once DupThresh segments' worth is SACKed, which is where the
    /// DupThresh rule of RFC 6675 would declare the loss anyway.
    pub(crate) fn reo_wnd(
        &mut self,
        una: SeqNum,
        in_recovery: bool,
        leaving_recovery: bool,
        srtt: Duration,
        mss: usize,
    ) -> Duration {
        self.rack.end_dsack_round(una);
        if leaving_recovery && self.rack.reo_wnd_persist > 0 {
            self.rack.reo_wnd_persist -= 1;
            if self.rack.reo_wnd_persist == 0 {
                self.rack.reo_wnd_mult = 1;
            }
        }
        if !self.rack.reordering_seen
            && (in_recovery || self.sacked as usize >= DUP_THRESH.saturating_mul(mss))
        {
            return Duration::ZERO;
        }
        let min_rtt = match self.rack.min_rtt {
            NO_RTT => srtt,
            us => Duration::from_micros(u64::from(us)),
        };
        (min_rtt / 4)
            .saturating_mul(u32::from(self.rack.reo_wnd_mult))
            .min(srtt)
    }

    /// Loss detection (RFC 8985 §6.2 step 5, and RFC 6675 IsLost while no reordering has
    /// been seen): mark lost every record sent before the most recently delivered one
    /// whose reordering window has run out, and every hole with more than
    /// (DupThresh − 1)·SMSS bytes SACKed above it.
    pub(crate) fn detect_loss(
        &mut self,
        now: Instant,
        reo_wnd: Duration,
        mss: usize,
    ) -> LossOutcome {
        let mut out = LossOutcome::default();
        let dupthresh = !self.rack.reordering_seen;
        let mut sacked_above = 0usize;
        let threshold = (DUP_THRESH - 1).saturating_mul(mss);
        for i in (0..self.segs.len()).rev() {
            let s = self.segs[i];
            if s.has(SACKED) {
                sacked_above = sacked_above.saturating_add(s.len());
                continue;
            }
            if s.has(LOST) && !s.has(RETRANS) {
                continue; // already waiting for its retransmission
            }
            let mut lost_by_time = false;
            if let Some(rx) = self.rack.xmit() {
                if sent_after(rx, self.rack.end, s.xmit, s.end) {
                    let rtt = Duration::from_micros(u64::from(self.rack.rtt));
                    let deadline = s.xmit + rtt.saturating_add(reo_wnd);
                    if deadline <= now {
                        lost_by_time = true;
                    } else {
                        out.timeout = Some(out.timeout.map_or(deadline, |t| t.min(deadline)));
                    }
                }
            }
            // IsLost (RFC 6675 §4) applies to what was not retransmitted yet.
            let lost_by_count = dupthresh && !s.has(RETRANS) && sacked_above > threshold;
            if lost_by_time || lost_by_count {
                self.mark_lost(i);
                if lost_by_time {
                    out.rack_lost += 1;
                } else {
                    out.dupthresh_lost += 1;
                }
            }
        }
        out
    }

    fn mark_lost(&mut self, i: usize) {
        let s = self.segs[i];
        if s.has(RETRANS) {
            self.retrans -= s.bytes();
        }
        if !s.has(LOST) {
            self.lost += s.bytes();
        }
        self.segs[i].flags = (s.flags & !RETRANS) | LOST;
    }

    /// Mark the first `mss` bytes at SND.UNA lost (the third duplicate ACK, or a partial
    /// ACK, from a peer without SACK: RFC 6582 / RFC 5681 §3.2). Returns whether the
    /// head was newly marked.
    pub(crate) fn mark_head_lost(&mut self, mss: usize) -> bool {
        let Some(front) = self.segs.front().copied() else {
            return false;
        };
        if front.has(SACKED) || (front.has(LOST) && !front.has(RETRANS)) {
            return false;
        }
        let cut = front.start + front.len().min(mss.max(1));
        if self.split_at(cut).is_none() {
            return false;
        }
        self.mark_lost(0);
        true
    }

    /// A retransmission timeout: everything not SACKed is lost, and no retransmission
    /// is in flight any more (RFC 6675 §5.1; RFC 5681 §3.1).
    pub(crate) fn mark_all_lost(&mut self) {
        for i in 0..self.segs.len() {
            if !self.segs[i].has(SACKED) {
                self.mark_lost(i);
            }
        }
    }

    /// Forget the lost marks (an undo: the retransmissions were spurious). Records
    /// whose retransmission is in flight stay counted as such.
    pub(crate) fn clear_lost(&mut self) {
        for s in self.segs.iter_mut() {
            s.flags &= !LOST;
        }
        self.lost = 0;
        self.rack.reordering_seen = true;
    }

    /// NextSeg rule 1 (RFC 6675 §4): the first lost record not retransmitted since,
    /// as [start, end) cut to at most `mss` bytes.
    pub(crate) fn next_lost(&self, mss: usize) -> Option<(SeqNum, SeqNum)> {
        self.segs
            .iter()
            .find(|s| s.has(LOST) && !s.has(RETRANS) && !s.has(SACKED))
            .map(|s| (s.start, s.start + s.len().min(mss.max(1))))
    }

    /// NextSeg rule 4 (RFC 6675 §4): the rescue retransmission, the last `mss` bytes
    /// of the highest record neither SACKed nor retransmitted, if anything above it
    /// is SACKed or it is the tail.
    pub(crate) fn rescue(&self, mss: usize) -> Option<(SeqNum, SeqNum)> {
        let s = self
            .segs
            .iter()
            .rev()
            .find(|s| !s.has(SACKED) && !s.has(RETRANS))?;
        let len = s.len().min(mss.max(1));
        Some((s.end - len, s.end))
    }

    /// What a probe that resends carries (RFC 8985 §7.3): the last `mss` bytes of the
    /// highest record the peer has not SACKed.
    pub(crate) fn last(&self, mss: usize) -> Option<(SeqNum, SeqNum)> {
        let s = self.segs.iter().rev().find(|s| !s.has(SACKED))?;
        let len = s.len().min(mss.max(1));
        Some((s.end - len, s.end))
    }

    /// Drop every record (the connection is closing or restarting its send side).
    pub(crate) fn clear(&mut self) {
        let rack = self.rack;
        *self = Scoreboard::default();
        self.rack = rack;
    }

    /// For `Debug`: (start offset from the first record, length, flags, transmit time
    /// in µs) per record.
    fn dump(&self) -> Vec<(usize, usize, u8, u64)> {
        let base = self.segs.front().map(|s| s.start).unwrap_or_default();
        self.segs
            .iter()
            .map(|s| (s.start.since(base), s.len(), s.flags, s.xmit.as_micros()))
            .collect()
    }

    #[cfg(test)]
    fn records(&self) -> Vec<(u32, u32, u8)> {
        self.segs
            .iter()
            .map(|s| (s.start.0, s.end.0, s.flags))
            .collect()
    }
}

/// RACK_sent_after (RFC 8985 §6.2): was (t1, seq1) sent after (t2, seq2)?
fn sent_after(t1: Instant, seq1: SeqNum, t2: Instant, seq2: SeqNum) -> bool {
    t1 > t2 || (t1 == t2 && seq1 > seq2)
}

#[cfg(test)]
mod tests;
