//! Neighbour Unreachability Detection (RFC 4861 §7.3) for every entry of the cache, ARP's
//! as well as Neighbor Discovery's (Linux runs the same machine for both): the states,
//! what each timer does when it fires, and what a message about a neighbour changes
//! (the table of RFC 4861 §7.2.3 and §7.2.5, and its ARP analogue).
//!
//! An entry is REACHABLE for `ReachableTime` after a confirmation, then STALE; the first
//! frame sent to a STALE entry makes it DELAY; if nothing confirms it within
//! `DELAY_FIRST_PROBE_TIME`, PROBE sends up to `MAX_UNICAST_SOLICIT` solicitations to its
//! cached MAC, `RetransTimer` apart, and an entry that answers none is forgotten: the
//! next frame resolves it again. Confirmations come from Neighbor Discovery and ARP
//! themselves (a solicited advertisement, an ARP reply unicast to us), and from TCP's
//! forward progress: the caller of [`ArpCache::poll`] says when a connection through the
//! entry last made some, and it is asked only when one of the entry's timers fires.
//! Sending to a REACHABLE, DELAY or PROBE entry costs nothing: a connection keeps the
//! MAC while the entry is in one of those states ([`ArpCache::sendable`]).

use std::net::IpAddr;
use std::time::Duration;

use super::{ArpCache, NeighbourId, Solicit};
use crate::io::MacAddr;
use crate::time::Instant;

/// RFC 4861 §10's `MIN_RANDOM_FACTOR` and `MAX_RANDOM_FACTOR` bound `ReachableTime` to
/// half and one and a half times `BaseReachableTime`.
const RANDOM_FACTOR_PERCENT: (u64, u64) = (50, 150);

/// How long one draw of `ReachableTime` holds: RFC 4861 §6.3.4 asks for a new one "at
/// least every few hours".
pub(super) const REDRAW_EVERY: Duration = Duration::from_secs(2 * 3600);

/// An entry's reachability state (RFC 4861 §7.3.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Nud {
    /// No mapping: the entry of a connection's next hop before its first frame asks
    /// for one, or after its probes went unanswered (where RFC 4861 deletes the entry;
    /// a connection still refers to it). The next frame resolves it.
    Unresolved,
    /// Resolution is in progress: solicitations to the group (multicast Neighbor
    /// Solicitations, broadcast ARP requests) are out, frames wait.
    Incomplete,
    /// Confirmed within the last `ReachableTime`.
    Reachable,
    /// Not confirmed lately; nothing is sent to check until a frame is sent to it.
    Stale,
    /// A frame was sent to the STALE entry: waiting `DELAY_FIRST_PROBE_TIME` for a
    /// confirmation before probing.
    Delay,
    /// Probing with solicitations unicast to the cached MAC.
    Probe,
}

impl Nud {
    /// Whether frames go straight to the cached MAC without the cache hearing of them:
    /// only sending to a STALE entry changes its state.
    pub fn sends_directly(self) -> bool {
        matches!(self, Nud::Reachable | Nud::Delay | Nud::Probe)
    }
}

/// What a received message says about a neighbour's mapping.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct News {
    /// The link-layer address it carries, if any.
    pub mac: Option<MacAddr>,
    /// It confirms reachability: a solicited Neighbor Advertisement, an ARP reply
    /// unicast to us for our address.
    pub solicited: bool,
    /// It may replace a cached address: the advertisement's Override flag; every
    /// solicitation and ARP packet.
    pub override_: bool,
    /// It may create an entry: a solicitation with its sender's address, an ARP packet
    /// aimed at us, a mapping a sibling worker learned.
    pub create: bool,
    /// A new or changed mapping is reported through
    /// [`drain_learned`](ArpCache::drain_learned) (not one a sibling reported).
    pub report: bool,
}

impl News {
    /// A Neighbor Solicitation from the neighbour with its Source Link-Layer Address
    /// option (RFC 4861 §7.2.3), a sibling's mapping, or an ARP request: creates an
    /// entry, or makes a changed one STALE.
    pub fn unsolicited(mac: MacAddr) -> News {
        News {
            mac: Some(mac),
            solicited: false,
            override_: true,
            create: true,
            report: true,
        }
    }

    /// A Neighbor Advertisement with its Solicited and Override flags and its Target
    /// Link-Layer Address option (RFC 4861 §7.2.5): creates nothing.
    pub fn advertisement(mac: Option<MacAddr>, solicited: bool, override_: bool) -> News {
        News {
            mac,
            solicited,
            override_,
            create: false,
            report: true,
        }
    }
}

/// What [`ArpCache::poll`] did besides the solicitations it asks for.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Polled {
    /// Frames dropped because their address did not resolve
    /// ([`DropReason::ArpUnresolved`](crate::drop_reason::DropReason::ArpUnresolved)).
    pub failed_frames: usize,
    /// Unicast probes among the solicitations (PROBE).
    pub probes: u64,
    /// Neighbours that answered none of their probes, and were forgotten.
    pub unreachable: u64,
}

/// `ReachableTime`: `base` times a factor drawn uniformly from RFC 4861's bounds.
pub(super) fn draw_reachable_time(base: Duration, rng: &mut crate::rng::Rng) -> Duration {
    let (low, high) = RANDOM_FACTOR_PERCENT;
    let base = u64::try_from(base.as_micros()).unwrap_or(u64::MAX / high);
    let lowest = base.saturating_mul(low) / 100;
    let span = base.saturating_mul(high - low) / 100;
    Duration::from_micros(lowest.saturating_add(rng.below(span)))
}

impl ArpCache {
    /// Apply `news` about `ip` (RFC 4861 §7.2.3 for solicitations, §7.2.5 for
    /// advertisements; ARP as Linux applies it). Returns the number of frames ready for
    /// `ip` (take them with [`drain_ready`](Self::drain_ready)).
    ///
    /// A mapping no neighbour can own (a group or zero MAC; an unspecified, broadcast or
    /// group IP) is ignored.
    pub fn update(&mut self, ip: impl Into<IpAddr>, news: News, now: Instant) -> usize {
        let ip = ip.into();
        if news.mac.is_some_and(|m| !super::is_unicast_mac(m)) || !super::is_neighbour_ip(ip) {
            return 0;
        }
        let id = match self.index.get(&ip) {
            Some(&id) => id,
            None if news.create && news.mac.is_some() => match self.create(ip, now, false) {
                Some(id) => id,
                None => return 0,
            },
            None => return 0,
        };
        let before = self.sendable(id);
        let entry = self.entry(id);
        let (state, cached) = (entry.state, entry.mac);
        let changed = match (state, cached, news.mac) {
            // No address, or an entry forgotten (which RFC 4861 deletes, so only what
            // may create one brings it back): nothing learned.
            (Nud::Incomplete | Nud::Unresolved, _, None) => return 0,
            (Nud::Unresolved, _, Some(_)) if !news.create => return 0,
            (Nud::Incomplete | Nud::Unresolved, _, Some(mac)) => {
                self.enter(
                    id,
                    if news.solicited {
                        Nud::Reachable
                    } else {
                        Nud::Stale
                    },
                    now,
                );
                self.entry_mut(id).mac = Some(mac);
                true
            }
            (state, Some(cached), mac) => {
                let differs = mac.is_some_and(|m| m != cached);
                if differs && !news.override_ {
                    // §7.2.5: a different address without Override only casts doubt on
                    // a REACHABLE entry; the cached address stays.
                    if state == Nud::Reachable {
                        self.enter(id, Nud::Stale, now);
                        self.notify(id, before);
                    }
                    return 0;
                }
                if differs {
                    self.entry_mut(id).mac = mac;
                }
                if news.solicited {
                    self.enter(id, Nud::Reachable, now);
                } else if differs {
                    self.enter(id, Nud::Stale, now);
                }
                differs
            }
            // A resolved state always has its address.
            (_, None, _) => return 0,
        };
        let entry = self.entry_mut(id);
        let mac = entry.mac;
        if news.solicited {
            entry.confirmed = Some(now);
        }
        self.refresh_idle(id, now);
        if let (true, true, Some(mac)) = (changed, news.report, mac) {
            if self.learned.len() < self.config.max_entries.max(1) {
                self.learned.push((ip, mac));
            }
        }
        let ready = self.release(id, now);
        self.notify(id, before);
        ready
    }

    /// Enter `state` at `now`, with the timer it starts (REACHABLE's counts from the
    /// confirmation `now`).
    pub(super) fn enter(&mut self, id: NeighbourId, state: Nud, now: Instant) {
        let deadline = match state {
            Nud::Unresolved | Nud::Stale => Instant::FAR_FUTURE,
            Nud::Incomplete | Nud::Probe => now + self.config.retry_interval,
            Nud::Reachable => now + self.reachable_time_at(now),
            Nud::Delay => now + self.config.delay_first_probe,
        };
        let entry = self.entry_mut(id);
        entry.state = state;
        entry.since = now;
        entry.sent = 0;
        if matches!(state, Nud::Unresolved | Nud::Incomplete) {
            entry.mac = None;
        }
        self.set_deadline(id, deadline);
    }

    /// `ReachableTime` at `now`, drawn again when the last draw is old.
    fn reachable_time_at(&mut self, now: Instant) -> Duration {
        if now >= self.redraw_at {
            self.reachable_time = draw_reachable_time(self.config.reachable_time, &mut self.rng);
            self.redraw_at = now + REDRAW_EVERY;
        }
        self.reachable_time
    }

    /// The timer of entry `id` fired at `now`. `confirmed` says when a connection
    /// through it last made forward progress; solicitations to send go to `out`.
    pub(super) fn fire(
        &mut self,
        id: NeighbourId,
        now: Instant,
        confirmed: &mut impl FnMut(NeighbourId) -> Option<Instant>,
        out: &mut Vec<Solicit>,
        polled: &mut Polled,
    ) {
        let before = self.sendable(id);
        let entry = self.entry(id);
        let (ip, mac, state, since, sent) =
            (entry.ip, entry.mac, entry.state, entry.since, entry.sent);
        // The latest confirmation: Neighbor Discovery's or ARP's own, or TCP's, read
        // only now (RFC 4861 §7.3.1: hints from upper layers).
        let mut latest = entry.confirmed;
        if entry.users > 0 && state.sends_directly() {
            latest = latest.max(confirmed(id));
        }
        match state {
            Nud::Unresolved | Nud::Stale => {}
            Nud::Incomplete if sent < self.config.max_retries => {
                self.entry_mut(id).sent += 1;
                self.set_deadline(id, now + self.config.retry_interval);
                out.push(Solicit { ip, unicast: None });
            }
            Nud::Incomplete => {
                let entry = self.entry_mut(id);
                let dropped = entry.frames.len();
                entry.frames.clear();
                self.queued_frames -= dropped;
                polled.failed_frames += dropped;
                self.forget_mapping(id, now);
            }
            Nud::Reachable => {
                let rt = self.reachable_time_at(now);
                match latest.map(|l| l + rt) {
                    Some(until) if now < until => self.set_deadline(id, until),
                    _ => self.enter(id, Nud::Stale, now),
                }
            }
            // Confirmed while delaying or probing (§7.3.3): REACHABLE from then.
            Nud::Delay | Nud::Probe if latest.is_some_and(|l| l >= since) => {
                self.enter(id, Nud::Reachable, now);
                let rt = self.reachable_time_at(now);
                let until = latest.map_or(now, |l| l + rt);
                self.set_deadline(id, until.max(now));
            }
            Nud::Delay | Nud::Probe if sent < self.config.max_probes => {
                if state == Nud::Delay {
                    self.enter(id, Nud::Probe, now);
                } else {
                    self.set_deadline(id, now + self.config.retry_interval);
                }
                self.entry_mut(id).sent += 1;
                out.push(Solicit { ip, unicast: mac });
                polled.probes += 1;
            }
            Nud::Delay | Nud::Probe => {
                polled.unreachable += 1;
                self.forget_mapping(id, now);
            }
        }
        self.notify(id, before);
    }

    /// The entry's mapping is gone (RFC 4861 §7.3.3, or a resolution that failed):
    /// the entry goes, or stays unresolved while connections refer to it.
    fn forget_mapping(&mut self, id: NeighbourId, now: Instant) {
        if self.entry(id).users == 0 {
            self.forget(id);
        } else {
            self.enter(id, Nud::Unresolved, now);
        }
    }
}

#[cfg(test)]
mod tests;
