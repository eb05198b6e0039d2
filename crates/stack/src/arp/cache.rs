//! Each worker's neighbour cache for IPv4 over Ethernet ([`ArpCache`]): IPv4 → MAC
//! mappings learned from ARP, and the frames waiting for an address to resolve.
//!
//! The cache is sans-IO: the engine tells it what arrived and what time it is, and it
//! answers with addresses to ask for and frames that became sendable. Frames for an
//! address still being resolved wait in a bounded queue (RFC 1122 §2.3.2.2 asks for at
//! least one per address; we keep up to 16, and 256 overall), and requests are retried at
//! most once per second (RFC 1122 §2.3.2.1 forbids flooding) a bounded number of times.
//!
//! Entries expire a fixed time after they were last learned (RFC 1122 §2.3.2.1, the
//! "timeout" mechanism); expiry is checked on every [`lookup`](ArpCache::lookup), so
//! correctness never waits for [`poll`](ArpCache::poll). Each worker owns its own cache;
//! entries one worker learns are handed to its siblings through
//! [`drain_learned`](ArpCache::drain_learned) and [`import`](ArpCache::import), which does not
//! report them again, so they do not bounce between workers.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::net::IpAddr;
use std::time::Duration;

use ahash::AHashMap;

use super::wire::{is_neighbour_ip, is_unicast_mac, ArpInput};
use crate::io::MacAddr;
use crate::time::Instant;

/// Tuning of each engine's neighbour cache.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ArpConfig {
    /// How long a learned mapping is trusted.
    pub entry_lifetime: Duration,
    /// Time between two requests for the same address.
    pub retry_interval: Duration,
    /// Requests sent after the first before giving up: with 3, an unanswered address
    /// costs 4 requests and its frames are dropped 4 × `retry_interval` after the first.
    pub max_retries: u32,
    /// Frames that may wait for one address.
    pub max_pending_per_addr: usize,
    /// Frames that may wait for all addresses together.
    pub max_pending_total: usize,
    /// Mappings kept; learning one more evicts the least recently learned.
    pub max_entries: usize,
}

impl Default for ArpConfig {
    fn default() -> Self {
        ArpConfig {
            entry_lifetime: Duration::from_secs(60),
            retry_interval: Duration::from_secs(1),
            max_retries: 3,
            max_pending_per_addr: 16,
            max_pending_total: 256,
            max_entries: 4096,
        }
    }
}

/// What [`ArpCache::enqueue`] did with a frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EnqueueResult {
    /// The frame is queued and it is the first for this address: send an ARP request
    /// for it now (later retries come from [`ArpCache::poll`]).
    SendRequest,
    /// The frame is queued behind a request already in flight.
    Queued,
    /// A queue bound was hit and the frame was dropped
    /// ([`DropReason::ArpQueueFull`](crate::drop_reason::DropReason::ArpQueueFull)).
    Dropped,
}

#[derive(Debug, Clone)]
struct Entry {
    mac: MacAddr,
    learned_at: Instant,
}

#[derive(Debug)]
struct Pending {
    frames: VecDeque<Vec<u8>>,
    /// Requests sent after the first one.
    retries: u32,
    next_request: Instant,
}

/// One worker's IPv4 → MAC cache, with the frames waiting for resolution.
#[derive(Debug)]
pub struct ArpCache {
    config: ArpConfig,
    entries: AHashMap<IpAddr, Entry>,
    /// `entries` ordered by `learned_at`: the front is both the next to expire and the
    /// one to evict.
    by_age: BTreeSet<(Instant, IpAddr)>,
    /// No entry expires before this (a lower bound, exact after `poll`): what
    /// [`has_work`](Self::has_work), asked every loop turn, compares `now` with instead of
    /// walking to the front of `by_age`.
    expiry_floor: Instant,
    /// Addresses being resolved. Ordered maps here and in `ready` (a few entries, off
    /// the fast path): requests and released frames go out in an order that is the
    /// same in every run, which a hasher's random keys would not give, so a simulated
    /// run replays exactly.
    pending: BTreeMap<IpAddr, Pending>,
    /// Frames whose address got resolved, destination MAC already filled in, waiting for
    /// the engine to take them.
    ready: BTreeMap<IpAddr, VecDeque<Vec<u8>>>,
    /// Frames in `pending` and `ready` together, bounded by `max_pending_total`.
    queued_frames: usize,
    /// New or changed mappings not yet reported through `drain_learned`.
    learned: Vec<(IpAddr, MacAddr)>,
}

impl Default for ArpCache {
    fn default() -> Self {
        ArpCache::new(ArpConfig::default())
    }
}

impl ArpCache {
    /// An empty cache tuned by `config`.
    pub fn new(config: ArpConfig) -> ArpCache {
        ArpCache {
            config,
            entries: AHashMap::new(),
            by_age: BTreeSet::new(),
            expiry_floor: Instant::FAR_FUTURE,
            pending: BTreeMap::new(),
            ready: BTreeMap::new(),
            queued_frames: 0,
            learned: Vec::new(),
        }
    }

    /// The MAC for `ip`, if it was learned less than `entry_lifetime` ago.
    pub fn lookup(&self, ip: impl Into<IpAddr>, now: Instant) -> Option<MacAddr> {
        let ip = ip.into();
        let entry = self.entries.get(&ip)?;
        (now < entry.learned_at + self.config.entry_lifetime).then_some(entry.mac)
    }

    /// Number of mappings held (expired ones included until purged by `poll` or eviction).
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether no mapping is held.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Frames waiting, for resolution or to be taken with [`drain_ready`](Self::drain_ready).
    pub fn queued_frames(&self) -> usize {
        self.queued_frames
    }

    /// Learn (or refresh) `ip` → `mac`, reporting it through
    /// [`drain_learned`](Self::drain_learned) when it is new or changed. Frames waiting for
    /// `ip` get their destination MAC filled in and move to the ready queue; returns how
    /// many are ready for `ip` (take them with [`drain_ready`](Self::drain_ready)).
    ///
    /// Addresses no neighbour can own (multicast or zero MAC; unspecified, broadcast or
    /// multicast IP) are ignored.
    pub fn insert(&mut self, ip: impl Into<IpAddr>, mac: MacAddr, now: Instant) -> usize {
        let ip = ip.into();
        self.store(ip, mac, now, true)
    }

    /// Like [`insert`](Self::insert), for a mapping a sibling worker learned: it is not
    /// reported again by `drain_learned`.
    pub fn import(&mut self, ip: impl Into<IpAddr>, mac: MacAddr, now: Instant) -> usize {
        let ip = ip.into();
        self.store(ip, mac, now, false)
    }

    /// Apply RFC 826's merge rule to a processed ARP packet: update the sender's mapping
    /// if we already hold (or are resolving) it, add it only when the packet was aimed
    /// at us. Returns the number of frames that became ready, as `insert` does.
    pub fn learn(&mut self, input: &ArpInput, now: Instant) -> usize {
        let Some((ip, mac)) = input.learnable() else {
            return 0;
        };
        let ip = IpAddr::V4(ip);
        if self.knows(ip) || input.targets_us {
            self.insert(ip, mac, now)
        } else {
            0
        }
    }

    fn store(&mut self, ip: IpAddr, mac: MacAddr, now: Instant, report: bool) -> usize {
        if !is_unicast_mac(mac) || !is_neighbour_ip(ip) {
            return 0;
        }
        let lifetime = self.config.entry_lifetime;
        let changed = match self.entries.get_mut(&ip) {
            Some(entry) => {
                let changed = entry.mac != mac || now >= entry.learned_at + lifetime;
                self.by_age.remove(&(entry.learned_at, ip));
                entry.mac = mac;
                entry.learned_at = now;
                changed
            }
            None => {
                if self.entries.len() >= self.config.max_entries {
                    self.evict_oldest();
                }
                if self.config.max_entries == 0 {
                    return self.release(ip, mac);
                }
                self.entries.insert(
                    ip,
                    Entry {
                        mac,
                        learned_at: now,
                    },
                );
                true
            }
        };
        self.by_age.insert((now, ip));
        // Entries removed since only make the true bound later.
        self.expiry_floor = self.expiry_floor.min(now + lifetime);
        if changed && report && self.learned.len() < self.config.max_entries.max(1) {
            self.learned.push((ip, mac));
        }
        self.release(ip, mac)
    }

    /// Move the frames waiting for `ip` to the ready queue, addressed to `mac`.
    fn release(&mut self, ip: IpAddr, mac: MacAddr) -> usize {
        if let Some(pending) = self.pending.remove(&ip) {
            let ready = self.ready.entry(ip).or_default();
            for mut frame in pending.frames {
                fill_dst(&mut frame, mac);
                ready.push_back(frame);
            }
        }
        self.ready.get(&ip).map_or(0, VecDeque::len)
    }

    fn evict_oldest(&mut self) {
        if let Some((_, ip)) = self.by_age.pop_first() {
            self.entries.remove(&ip);
        }
    }

    /// Queue a complete Ethernet frame for `ip`, whose MAC is not known (call
    /// [`lookup`](Self::lookup) first). Its destination MAC (bytes 0..6) is filled in when
    /// the address resolves. If `ip` does resolve already, the frame goes straight to the
    /// ready queue and `Queued` is returned.
    pub fn enqueue(
        &mut self,
        ip: impl Into<IpAddr>,
        mut frame: Vec<u8>,
        now: Instant,
    ) -> EnqueueResult {
        let ip = ip.into();
        if self.queued_frames >= self.config.max_pending_total {
            return EnqueueResult::Dropped;
        }
        if let Some(mac) = self.lookup(ip, now) {
            fill_dst(&mut frame, mac);
            self.ready.entry(ip).or_default().push_back(frame);
            self.queued_frames += 1;
            return EnqueueResult::Queued;
        }
        match self.pending.get_mut(&ip) {
            Some(pending) => {
                if pending.frames.len() >= self.config.max_pending_per_addr {
                    return EnqueueResult::Dropped;
                }
                pending.frames.push_back(frame);
                self.queued_frames += 1;
                EnqueueResult::Queued
            }
            None => {
                if self.config.max_pending_per_addr == 0 {
                    return EnqueueResult::Dropped;
                }
                let mut frames = VecDeque::new();
                frames.push_back(frame);
                self.pending.insert(
                    ip,
                    Pending {
                        frames,
                        retries: 0,
                        next_request: now + self.config.retry_interval,
                    },
                );
                self.queued_frames += 1;
                EnqueueResult::SendRequest
            }
        }
    }

    /// Whether `ip` has an entry or is being resolved.
    pub(crate) fn knows(&self, ip: impl Into<IpAddr>) -> bool {
        let ip = ip.into();
        self.entries.contains_key(&ip) || self.pending.contains_key(&ip)
    }

    /// Whether a request for `ip` is in flight.
    #[cfg(test)]
    pub(crate) fn is_pending(&self, ip: impl Into<IpAddr>) -> bool {
        let ip = ip.into();
        self.pending.contains_key(&ip)
    }

    /// The frames that became sendable for `ip`, oldest first, destination MAC filled in.
    #[cfg(test)]
    pub(crate) fn take_ready(&mut self, ip: impl Into<IpAddr>) -> impl Iterator<Item = Vec<u8>> {
        let ip = ip.into();
        let frames = self.ready.remove(&ip).unwrap_or_default();
        self.queued_frames -= frames.len();
        frames.into_iter()
    }

    /// Append every sendable frame, for all addresses, to `out` (per address, oldest
    /// first).
    pub fn drain_ready(&mut self, out: &mut Vec<Vec<u8>>) {
        for (_, frames) in std::mem::take(&mut self.ready) {
            self.queued_frames -= frames.len();
            out.extend(frames);
        }
    }

    /// Do the work that is due at `now`: append to `requests` the addresses whose ARP
    /// request must be sent again, give up on those that used all their retries (adding
    /// the number of frames dropped to `failed_frames`, for
    /// [`DropReason::ArpUnresolved`](crate::drop_reason::DropReason::ArpUnresolved)), and purge expired entries.
    pub fn poll(&mut self, now: Instant, requests: &mut Vec<IpAddr>, failed_frames: &mut usize) {
        if !self.has_work(now) {
            return;
        }
        let config = &self.config;
        let mut dropped = 0;
        self.pending.retain(|ip, pending| {
            if pending.next_request > now {
                return true;
            }
            if pending.retries >= config.max_retries {
                dropped += pending.frames.len();
                return false;
            }
            pending.retries += 1;
            pending.next_request = now + config.retry_interval;
            requests.push(*ip);
            true
        });
        self.queued_frames -= dropped;
        *failed_frames += dropped;

        while let Some(&(learned_at, ip)) = self.by_age.first() {
            if now < learned_at + self.config.entry_lifetime {
                break;
            }
            self.by_age.pop_first();
            self.entries.remove(&ip);
        }
        self.expiry_floor = self
            .by_age
            .first()
            .map_or(Instant::FAR_FUTURE, |&(learned_at, _)| {
                learned_at + self.config.entry_lifetime
            });
    }

    /// Whether [`poll`](Self::poll) has anything to do at `now`: an unresolved address
    /// (checked by poll itself), or an entry to forget. Engines ask every loop turn.
    #[inline]
    pub fn has_work(&self, now: Instant) -> bool {
        !self.pending.is_empty() || now >= self.expiry_floor
    }

    /// When [`poll`](Self::poll) next has a request to retry or give up on. Entry expiry
    /// needs no wake-up: `lookup` enforces it.
    pub fn next_deadline(&self) -> Option<Instant> {
        self.pending.values().map(|p| p.next_request).min()
    }

    /// Append to `out` the mappings learned through [`insert`](Self::insert) (new, changed
    /// or re-learned after expiry) since the last call, for sibling workers to
    /// [`import`](Self::import). At most `max_entries` are kept between calls.
    pub fn drain_learned(&mut self, out: &mut Vec<(IpAddr, MacAddr)>) {
        out.append(&mut self.learned);
    }
}

/// Write `mac` as the destination of the Ethernet frame `frame` (bytes 0..6). A frame too
/// short to hold it is left alone.
pub(crate) fn fill_dst(frame: &mut [u8], mac: MacAddr) {
    if let Some(dst) = frame.get_mut(..6) {
        dst.copy_from_slice(mac.as_bytes());
    }
}

#[cfg(test)]
mod tests;
