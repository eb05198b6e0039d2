//! TIME-WAIT as compact entries (RFC 9293 §3.10.7.4, TIME-WAIT STATE).
//!
//! A connection in TIME-WAIT only has to acknowledge a retransmitted FIN and refuse old
//! duplicates for 2·MSL, so the engine drops its full block and keeps these few words
//! instead: a live connection block is over a kilobyte with its buffers, an entry here
//! is about 40 bytes.

use std::collections::HashMap;
use std::time::Duration;

use super::ports::{InUse, PortUse, Remote};
use super::FlowKey;
use crate::tcp::options::ts_clock;
use crate::tcp::segment::{Segment, TxSegment};
use crate::tcp::seq::SeqNum;
use crate::tcp::tcb::Tcb;
use crate::time::Instant;

#[derive(Debug, Clone, Copy)]
struct Entry {
    snd_nxt: SeqNum,
    rcv_nxt: SeqNum,
    /// (TS.Recent, our TSval offset) when timestamps were in use.
    ts: Option<(u32, u32)>,
    expires: Instant,
    /// The deadline of the one timer the engine holds for this entry. A retransmitted
    /// FIN moves `expires` but schedules nothing: when this timer fires early,
    /// [`TimeWait::expire`] hands back the new deadline to schedule (lazy restart), so a
    /// flood of FINs cannot pile up timer items.
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
    entries: HashMap<FlowKey, Entry, super::flows::FlowHash>,
    max: usize,
    /// Entries a RST closed, so that [`TimeWait::len`] is O(1).
    reset: usize,
    /// Ephemeral ports held, per remote endpoint, for active opens.
    ports: PortUse,
}

impl TimeWait {
    /// A table of at most `max` entries, counting local ports in `ephemeral`.
    pub(super) fn new(max: usize, ephemeral: std::ops::RangeInclusive<u16>) -> TimeWait {
        TimeWait {
            entries: HashMap::with_hasher(super::flows::FlowHash::new()),
            max,
            reset: 0,
            ports: PortUse::new(ephemeral),
        }
    }

    /// Entries in TIME-WAIT proper (not those a RST closed, which only keep the pair
    /// from our own active opens).
    pub(super) fn len(&self) -> usize {
        self.entries.len() - self.reset
    }

    /// Ephemeral ports the table keeps from `remote` (reset entries included).
    pub(super) fn ports_in_use(&self, remote: Remote) -> InUse {
        self.ports.get(remote)
    }

    /// Drop the entry of `key`, keeping the counts in step.
    fn remove(&mut self, key: &FlowKey) {
        if let Some(e) = self.entries.remove(key) {
            self.reset -= usize::from(e.reset);
            self.ports.removed(key);
        }
    }

    pub(super) fn contains(&self, key: &FlowKey) -> bool {
        self.entries.contains_key(key)
    }

    /// Remember `tcb` (which is in TIME-WAIT) until `expires`. False when the table is full
    /// and the connection skips TIME-WAIT.
    pub(super) fn insert(&mut self, key: FlowKey, tcb: &Tcb, expires: Instant) -> bool {
        if self.entries.len() >= self.max {
            return false;
        }
        let old = self.entries.insert(
            key,
            Entry {
                snd_nxt: tcb.snd_nxt(),
                rcv_nxt: tcb.rcv_nxt(),
                ts: tcb.timestamp_state(),
                expires,
                timer_at: expires,
                reset: false,
                last_invalid_ack: None,
            },
        );
        match old {
            Some(e) => self.reset -= usize::from(e.reset),
            None => self.ports.added(&key),
        }
        true
    }

    /// The 2·MSL timer scheduled for `at` fired. Drops the entry if its time is up;
    /// if a retransmitted FIN restarted the wait, returns the new deadline, for which the
    /// engine schedules the entry's next (and only) timer. A timer left over from an
    /// entry that was since removed and inserted again is ignored.
    #[must_use]
    pub(super) fn expire(&mut self, key: &FlowKey, at: Instant) -> Option<Instant> {
        let e = self.entries.get_mut(key)?;
        if e.timer_at != at {
            return None;
        }
        if e.expires <= at {
            self.remove(key);
            return None;
        }
        e.timer_at = e.expires;
        Some(e.expires)
    }

    /// A segment for `key`: `None` when the pair is not in TIME-WAIT. One hash lookup
    /// (a second one only to remove the entry). `get_mut`, not the entry API: that one
    /// may grow the table even on a miss, and most lookups here miss.
    pub(super) fn on_segment(
        &mut self,
        key: &FlowKey,
        seg: &Segment,
        now: Instant,
        time_wait: Duration,
        invalid_ack_interval: Duration,
    ) -> Option<Verdict> {
        let e = self.entries.get_mut(key)?;
        let iss_floor = e.snd_nxt + REOPEN_ISS_GAP;
        if e.expires <= now {
            self.remove(key);
            return Some(Verdict::Reopen { iss_floor });
        }
        if e.reset {
            // Closed: as for no connection, except that a SYN reopening the pair still
            // starts its sequence space beyond the old one.
            if seg.flags.syn && !seg.flags.ack {
                self.remove(key);
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
                self.remove(key);
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
