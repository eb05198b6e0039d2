//! TIME-WAIT as compact entries (RFC 9293 §3.10.7.4, TIME-WAIT STATE).
//!
//! A connection in TIME-WAIT only has to acknowledge a retransmitted FIN and refuse old
//! duplicates for 2·MSL, so the engine drops its full block and keeps these few words
//! instead: a live connection block is over a kilobyte with its buffers, an entry here
//! is 80 bytes (the flow key holds an address of either family), with 16 for its timer
//! and its flow's bucket in the flow table (12 bytes for IPv4, 32 for IPv6).
//!
//! The entries live in a slab here; the flow table maps their keys to their slots
//! ([`Flow::TimeWait`]), so a segment for no live connection is looked up once, and a
//! connection entering TIME-WAIT changes its flow's value instead of leaving one hash
//! table for another.
//!
//! The entries' 2·MSL timers are the table's own: a queue in deadline order, not the
//! engine's timer wheel. Every entry waits the same 2·MSL from the loop turn it was
//! made in, so deadlines arrive in order and the queue is a FIFO: a push at the back,
//! a look at the front each turn ([`TimeWait::expire`]). In the wheel, each 60 s timer
//! would go to a far bucket, move into the slots half a revolution before it is due,
//! then fire through the wheel's slot walk.

use std::collections::VecDeque;
use std::time::Duration;

use super::flows::{Flow, Flows};
use super::FlowKey;
use crate::tcp::options::ts_clock;
use crate::tcp::segment::{Segment, TxSegment};
use crate::tcp::seq::SeqNum;
use crate::tcp::tcb::Tcb;
use crate::time::Instant;

#[derive(Debug, Clone, Copy)]
struct Entry {
    /// The flow, which the flow table maps to this entry's slot.
    key: FlowKey,
    snd_nxt: SeqNum,
    rcv_nxt: SeqNum,
    /// (TS.Recent, our TSval offset) when timestamps were in use.
    ts: Option<(u32, u32)>,
    expires: Instant,
    /// The deadline of the entry's one timer in the queue; [`Instant::FAR_FUTURE`] for
    /// a free slot, which no queued timer has. A retransmitted FIN moves `expires` but
    /// schedules nothing: when this timer fires early, [`TimeWait::expire`] queues it
    /// again for the new deadline (lazy restart), so a flood of FINs cannot pile up
    /// timers.
    timer_at: Instant,
    /// The peer's RST closed it (RFC 9293): it answers nothing any more and the peer
    /// may open the pair again, but our own active opens keep away from the pair until
    /// `expires`, or old duplicates could land in a new incarnation whose sequence
    /// space overlaps the old one (the TIME-WAIT assassination hazard of RFC 1337).
    reset: bool,
    /// When the entry last answered a segment that was not a retransmitted FIN (out of
    /// window, an old duplicate, a SYN it would not reopen for): at most one such answer
    /// per `invalid_ack_interval`, as for live connections (ACK-storm fuel otherwise).
    last_invalid_ack: Option<Instant>,
}

/// What to do with a segment that hit a TIME-WAIT entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// Send this ACK.
    Reply(TxSegment),
    /// Nothing to do.
    Drop,
    /// An answer was due but the entry answered another invalid segment less than
    /// `invalid_ack_interval` ago.
    Suppressed,
    /// The entry is gone; treat the segment as new (a SYN reopening the pair). A new
    /// connection must start its sequence space at or after `iss_floor`, beyond
    /// anything the old incarnation sent (RFC 1122 §4.2.2.13, RFC 6191 §2).
    Reopen { iss_floor: SeqNum },
}

/// How far past the old SND.NXT a reopened pair's ISS starts: beyond the largest window
/// the old connection could have had outstanding, so none of its duplicates fall in the
/// new connection's window (the value Linux uses).
const REOPEN_ISS_GAP: usize = 65535 + 2;

pub(crate) struct TimeWait {
    /// The entries by slot; free slots are listed in `free`.
    entries: Vec<Entry>,
    free: Vec<u32>,
    /// The entries' timers, (deadline, slot), earliest first. A timer whose slot was
    /// freed, or holds an entry made or restarted since (its `timer_at` differs), is
    /// stale and skipped.
    timers: VecDeque<(Instant, u32)>,
    /// The front timer's deadline, [`Instant::FAR_FUTURE`] when none is queued: what
    /// every loop turn compares `now` with.
    front_at: Instant,
    max: usize,
    /// Slots in use.
    used: usize,
    /// Entries a RST closed, so that [`TimeWait::len`] is O(1).
    reset: usize,
}

impl TimeWait {
    /// A table of at most `max` entries.
    pub(super) fn new(max: usize) -> TimeWait {
        TimeWait {
            entries: Vec::new(),
            free: Vec::new(),
            timers: VecDeque::new(),
            front_at: Instant::FAR_FUTURE,
            max,
            used: 0,
            reset: 0,
        }
    }

    /// Entries in TIME-WAIT proper (not those a RST closed, which only keep the pair
    /// from our own active opens).
    pub(super) fn len(&self) -> usize {
        self.used - self.reset
    }

    /// Make `tcb` (which is in TIME-WAIT, on flow `key`, which `flows` maps to its live
    /// block) an entry until `expires`, and queue its timer; the flow then maps to the
    /// entry. False when the table is full: the connection skips TIME-WAIT and its flow
    /// leaves `flows`.
    #[inline]
    pub(super) fn insert(
        &mut self,
        flows: &mut Flows,
        key: FlowKey,
        tcb: &Tcb,
        expires: Instant,
    ) -> bool {
        if self.used >= self.max {
            flows.remove(&key);
            return false;
        }
        let entry = Entry {
            key,
            snd_nxt: tcb.snd_nxt(),
            rcv_nxt: tcb.rcv_nxt(),
            ts: tcb.timestamp_state(),
            expires,
            timer_at: expires,
            reset: false,
            last_invalid_ack: None,
        };
        let slot = match self.free.pop() {
            Some(slot) => {
                self.entries[slot as usize] = entry;
                slot
            }
            None => {
                self.entries.push(entry);
                (self.entries.len() - 1) as u32
            }
        };
        self.used += 1;
        flows.replace(&key, Flow::TimeWait(slot));
        self.schedule(expires, slot);
        true
    }

    /// Free `slot` (its flow has left the flow table or maps to something else now).
    fn release(&mut self, slot: u32) {
        let e = &mut self.entries[slot as usize];
        debug_assert!(e.timer_at != Instant::FAR_FUTURE, "releasing a free slot");
        e.timer_at = Instant::FAR_FUTURE;
        self.reset -= usize::from(e.reset);
        self.used -= 1;
        self.free.push(slot);
    }

    /// A live connection took the flow of the entry in `slot` over (a cookie ACK on a
    /// pair whose entry a RST closed): the entry goes; the flow table already maps the
    /// flow to the connection.
    pub(super) fn replaced(&mut self, slot: u32) {
        self.release(slot);
    }

    /// Drop the entry in `slot` and its flow.
    fn remove(&mut self, flows: &mut Flows, slot: u32) {
        let key = self.entries[slot as usize].key;
        self.release(slot);
        let old = flows.remove(&key);
        debug_assert_eq!(old, Some(Flow::TimeWait(slot)));
    }

    /// Queue the timer of the entry in `slot` for `at`, in deadline order: at the
    /// back, where every deadline goes while the 2·MSL wait is the same for all entries
    /// and time moves forward.
    #[inline]
    fn schedule(&mut self, at: Instant, slot: u32) {
        self.front_at = self.front_at.min(at);
        if self.timers.back().is_none_or(|&(last, _)| last <= at) {
            self.timers.push_back((at, slot));
        } else {
            self.schedule_early(at, slot);
        }
    }

    /// [`schedule`](Self::schedule) for a deadline before the last one queued.
    #[inline(never)]
    fn schedule_early(&mut self, at: Instant, slot: u32) {
        let i = self.timers.partition_point(|&(t, _)| t <= at);
        self.timers.insert(i, (at, slot));
    }

    /// The earliest deadline of a queued timer (stale ones included: they only make
    /// the engine look early).
    pub(super) fn next_deadline(&self) -> Option<Instant> {
        (self.front_at != Instant::FAR_FUTURE).then_some(self.front_at)
    }

    /// Fire the timers due by `now`: an entry whose time is up is dropped, with its
    /// flow from `flows`; one whose wait a retransmitted FIN restarted is queued again
    /// for its new deadline. A timer left over from an entry that was since removed, or
    /// removed and its slot reused, is ignored. Called every loop turn: the look at the
    /// front inlines, so a turn with nothing due costs a comparison.
    #[inline]
    pub(super) fn expire(&mut self, now: Instant, flows: &mut Flows) {
        if self.front_at <= now {
            self.expire_due(now, flows);
        }
    }

    #[inline(never)]
    fn expire_due(&mut self, now: Instant, flows: &mut Flows) {
        while let Some(&(at, slot)) = self.timers.front() {
            if at > now {
                break;
            }
            self.timers.pop_front();
            let e = &mut self.entries[slot as usize];
            if e.timer_at != at {
                continue;
            }
            if e.expires <= at {
                self.remove(flows, slot);
            } else {
                e.timer_at = e.expires;
                let expires = e.expires;
                self.schedule(expires, slot);
            }
        }
        self.front_at = self
            .timers
            .front()
            .map_or(Instant::FAR_FUTURE, |&(at, _)| at);
    }

    /// A segment for the entry in `slot`, which `flows` maps `seg`'s flow to. `None`
    /// when the entry no longer answers (a RST closed it) and the segment is to be
    /// treated as for no connection. No hash lookup (a removal takes one).
    pub(super) fn on_segment(
        &mut self,
        flows: &mut Flows,
        slot: u32,
        seg: &Segment,
        now: Instant,
        time_wait: Duration,
        invalid_ack_interval: Duration,
    ) -> Option<Verdict> {
        let e = &mut self.entries[slot as usize];
        let iss_floor = e.snd_nxt + REOPEN_ISS_GAP;
        if e.expires <= now {
            self.remove(flows, slot);
            return Some(Verdict::Reopen { iss_floor });
        }
        if e.reset {
            // Closed: as for no connection, except that a SYN reopening the pair still
            // starts its sequence space beyond the old one.
            if seg.flags.syn && !seg.flags.ack {
                self.remove(flows, slot);
                return Some(Verdict::Reopen { iss_floor });
            }
            return None;
        }
        if seg.flags.rst {
            // RFC 9293: a RST in TIME-WAIT closes it (RFC 1337 argues for ignoring it;
            // we follow the standard, as Linux does by default). The entry stays, inert,
            // so that our own active opens do not reuse the pair at once (see `reset`).
            if seg.seq == e.rcv_nxt {
                e.reset = true;
                self.reset += 1;
            }
            return Some(Verdict::Drop);
        }
        if seg.flags.syn && !seg.flags.ack {
            // RFC 6191 / RFC 1122 §4.2.2.13: a new SYN may reopen the pair if it cannot be
            // confused with the old connection: newer timestamp, or (equal timestamp or
            // none) a sequence number at or past the old FIN, RCV.NXT - 1. The new receive
            // space then starts at SEG.SEQ + 1 >= RCV.NXT, beyond every old segment. At
            // exactly RCV.NXT - 1 refusing cannot even work: the ACK below would ack this
            // SYN, which SYN-SENT accepts and drops without the RST that ends TIME-WAIT
            // (RFC 9293 §3.10.7.3, RFC 5961 §4.2), so the peer's SYNs bounce for 2·MSL.
            let past_old_fin = seg.seq + 1 >= e.rcv_nxt;
            let newer = match (e.ts, seg.timestamp) {
                (Some((recent, _)), Some((tsval, _))) => match tsval.wrapping_sub(recent) as i32 {
                    d if d > 0 => true,
                    0 => past_old_fin,
                    _ => false,
                },
                _ => past_old_fin,
            };
            if newer {
                self.remove(flows, slot);
                return Some(Verdict::Reopen { iss_floor });
            }
        }
        if !seg.flags.fin && seg.seg_len() == 0 && seg.seq == e.rcv_nxt {
            // §3.10.7.4: an acceptable segment that is not a retransmitted FIN needs no
            // answer. Answering bare ACKs would make two TIME-WAIT ends (after a
            // simultaneous close) ACK each other's ACKs forever.
            return Some(Verdict::Drop);
        }
        let retransmitted_fin = seg.flags.fin && seg.seq + seg.payload_len + 1 == e.rcv_nxt;
        if retransmitted_fin {
            // A retransmitted FIN: our ACK was lost. Restart the 2·MSL wait (the timer
            // catches up lazily, see `expire`). Always answered: it is what the peer
            // needs to finish, and it cannot loop.
            e.expires = now + time_wait;
        } else {
            if e.last_invalid_ack
                .is_some_and(|t| now.saturating_duration_since(t) < invalid_ack_interval)
            {
                return Some(Verdict::Suppressed);
            }
            e.last_invalid_ack = Some(now);
        }
        let timestamp = e.ts.map(|(recent, offset)| (ts_clock(now, offset), recent));
        Some(Verdict::Reply(TxSegment {
            seq: e.snd_nxt,
            ack: Some(e.rcv_nxt),
            window: 0,
            timestamp,
            ..Default::default()
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tcp::config::TcpConfig;
    use crate::tcp::tcb::{Opening, TcbLimits};
    use std::net::Ipv4Addr;
    use std::rc::Rc;

    fn key(port: u16) -> FlowKey {
        FlowKey::new(Ipv4Addr::new(10, 0, 0, 2).into(), port, 80, 0)
    }

    fn tcb(cfg: &TcpConfig) -> Tcb {
        Tcb::connect(&Opening {
            iss: SeqNum(1),
            ts_offset: 0,
            our_mss: 1460,
            now: Instant::ZERO,
            cfg,
            limits: Rc::new(TcbLimits::new(cfg)),
        })
    }

    fn ms(n: u64) -> Instant {
        Instant::from_millis(n)
    }

    /// A table of 16 entries and a flow table; `enter` moves a live flow into it.
    struct Tables {
        tw: TimeWait,
        flows: Flows,
        tcb: Tcb,
    }

    impl Tables {
        fn new(cfg: &TcpConfig) -> Tables {
            Tables {
                tw: TimeWait::new(16),
                flows: Flows::new(16, 0, 1024..=65535),
                tcb: tcb(cfg),
            }
        }

        fn enter(&mut self, port: u16, at: Instant) -> bool {
            self.flows.insert(key(port), Flow::Conn(u32::from(port)));
            self.tw.insert(&mut self.flows, key(port), &self.tcb, at)
        }

        fn contains(&self, port: u16) -> bool {
            matches!(self.flows.get(&key(port)), Some(Flow::TimeWait(_)))
        }

        fn expire(&mut self, now: Instant) {
            self.tw.expire(now, &mut self.flows);
        }
    }

    #[test]
    fn timers_fire_in_deadline_order_whatever_the_insertion_order() {
        let cfg = TcpConfig::default();
        let mut t = Tables::new(&cfg);
        for (port, at) in [(1, 300), (2, 100), (3, 200), (4, 300), (5, 50)] {
            assert!(t.enter(port, ms(at)));
        }
        assert_eq!(t.tw.next_deadline(), Some(ms(50)));
        t.expire(ms(99));
        assert_eq!(t.tw.len(), 4);
        assert!(!t.contains(5) && t.flows.get(&key(5)).is_none());
        t.expire(ms(200));
        assert_eq!(t.tw.len(), 2);
        assert!(t.contains(1) && t.contains(4));
        assert_eq!(t.tw.next_deadline(), Some(ms(300)));
        t.expire(ms(300));
        assert_eq!((t.tw.len(), t.tw.next_deadline()), (0, None));
        assert!(t.flows.get(&key(1)).is_none());
    }

    #[test]
    fn a_timer_left_from_an_entry_made_again_is_ignored() {
        let cfg = TcpConfig::default();
        let mut t = Tables::new(&cfg);
        assert!(t.enter(1, ms(100)));
        // The pair reopened and closed again: a new entry (in the same slot), the old
        // timer still queued.
        let Some(Flow::TimeWait(slot)) = t.flows.get(&key(1)) else {
            panic!("not in TIME-WAIT");
        };
        t.tw.remove(&mut t.flows, slot);
        assert!(t.enter(1, ms(500)));
        t.expire(ms(100));
        assert!(t.contains(1), "the old timer must not end the new entry");
        t.expire(ms(500));
        assert!(!t.contains(1));
    }

    #[test]
    #[cfg(target_pointer_width = "64")]
    fn an_entry_stays_within_80_bytes() {
        assert!(std::mem::size_of::<Entry>() <= 80);
        assert_eq!(std::mem::size_of::<(Instant, u32)>(), 16);
    }

    #[test]
    fn a_full_table_lets_the_flow_go() {
        let cfg = TcpConfig::default();
        let mut t = Tables::new(&cfg);
        for port in 1..=16 {
            assert!(t.enter(port, ms(100)));
        }
        assert!(!t.enter(17, ms(100)));
        assert!(t.flows.get(&key(17)).is_none());
    }
}
