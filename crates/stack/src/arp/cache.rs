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

use std::collections::{BTreeSet, VecDeque};
use std::net::Ipv4Addr;
use std::time::Duration;

use ahash::AHashMap;

use super::wire::{is_neighbour_ip, is_unicast_mac, ArpInput};
use crate::io::MacAddr;
use crate::time::Instant;

/// Tuning of each engine's neighbour cache.
#[derive(Debug, Clone, PartialEq, Eq)]
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
    /// ([`DropReason::ArpQueueFull`](crate::drop::DropReason::ArpQueueFull)).
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
    entries: AHashMap<Ipv4Addr, Entry>,
    /// `entries` ordered by `learned_at`: the front is both the next to expire and the
    /// one to evict.
    by_age: BTreeSet<(Instant, Ipv4Addr)>,
    /// No entry expires before this (a lower bound, exact after `poll`): what
    /// [`has_work`](Self::has_work), asked every loop turn, compares `now` with instead of
    /// walking to the front of `by_age`.
    expiry_floor: Instant,
    pending: AHashMap<Ipv4Addr, Pending>,
    /// Frames whose address got resolved, destination MAC already filled in, waiting for
    /// the engine to take them.
    ready: AHashMap<Ipv4Addr, VecDeque<Vec<u8>>>,
    /// Frames in `pending` and `ready` together, bounded by `max_pending_total`.
    queued_frames: usize,
    /// New or changed mappings not yet reported through `drain_learned`.
    learned: Vec<(Ipv4Addr, MacAddr)>,
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
            pending: AHashMap::new(),
            ready: AHashMap::new(),
            queued_frames: 0,
            learned: Vec::new(),
        }
    }

    /// The MAC for `ip`, if it was learned less than `entry_lifetime` ago.
    pub fn lookup(&self, ip: Ipv4Addr, now: Instant) -> Option<MacAddr> {
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
    pub fn insert(&mut self, ip: Ipv4Addr, mac: MacAddr, now: Instant) -> usize {
        self.store(ip, mac, now, true)
    }

    /// Like [`insert`](Self::insert), for a mapping a sibling worker learned: it is not
    /// reported again by `drain_learned`.
    pub fn import(&mut self, ip: Ipv4Addr, mac: MacAddr, now: Instant) -> usize {
        self.store(ip, mac, now, false)
    }

    /// Apply RFC 826's merge rule to a processed ARP packet: update the sender's mapping
    /// if we already hold (or are resolving) it, add it only when the packet was aimed
    /// at us. Returns the number of frames that became ready, as `insert` does.
    pub fn learn(&mut self, input: &ArpInput, now: Instant) -> usize {
        let Some((ip, mac)) = input.learnable() else {
            return 0;
        };
        let known = self.entries.contains_key(&ip) || self.pending.contains_key(&ip);
        if known || input.targets_us {
            self.insert(ip, mac, now)
        } else {
            0
        }
    }

    fn store(&mut self, ip: Ipv4Addr, mac: MacAddr, now: Instant, report: bool) -> usize {
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
    fn release(&mut self, ip: Ipv4Addr, mac: MacAddr) -> usize {
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
    pub fn enqueue(&mut self, ip: Ipv4Addr, mut frame: Vec<u8>, now: Instant) -> EnqueueResult {
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

    /// Whether a request for `ip` is in flight.
    #[cfg(test)]
    pub(crate) fn is_pending(&self, ip: Ipv4Addr) -> bool {
        self.pending.contains_key(&ip)
    }

    /// The frames that became sendable for `ip`, oldest first, destination MAC filled in.
    #[cfg(test)]
    pub(crate) fn take_ready(&mut self, ip: Ipv4Addr) -> impl Iterator<Item = Vec<u8>> {
        let frames = self.ready.remove(&ip).unwrap_or_default();
        self.queued_frames -= frames.len();
        frames.into_iter()
    }

    /// Append every sendable frame, for all addresses, to `out` (per address, oldest
    /// first).
    pub fn drain_ready(&mut self, out: &mut Vec<Vec<u8>>) {
        for (_, frames) in self.ready.drain() {
            self.queued_frames -= frames.len();
            out.extend(frames);
        }
    }

    /// Do the work that is due at `now`: append to `requests` the addresses whose ARP
    /// request must be sent again, give up on those that used all their retries (adding
    /// the number of frames dropped to `failed_frames`, for
    /// [`DropReason::ArpUnresolved`](crate::drop::DropReason::ArpUnresolved)), and purge expired entries.
    pub fn poll(&mut self, now: Instant, requests: &mut Vec<Ipv4Addr>, failed_frames: &mut usize) {
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
    pub fn drain_learned(&mut self, out: &mut Vec<(Ipv4Addr, MacAddr)>) {
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
mod tests {
    use super::*;
    use crate::arp::wire::tests::receive;
    use crate::arp::wire::*;
    use crate::ethernet;
    use proptest::prelude::*;
    use smoltcp::wire::EthernetAddress;

    const US: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
    const THEM: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);
    const OTHER: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 3);
    const THEM_MAC: MacAddr = EthernetAddress([0x02, 0, 0, 0, 0, 2]);
    const OTHER_MAC: MacAddr = EthernetAddress([0x02, 0, 0, 0, 0, 3]);

    fn t(ms: u64) -> Instant {
        Instant::from_millis(ms)
    }

    fn frame(tag: u8) -> Vec<u8> {
        let mut f = vec![0u8; 20];
        f[ethernet::HEADER_LEN] = tag;
        f
    }

    #[test]
    fn enqueue_requests_once_then_queues_then_drops() {
        let mut cache = ArpCache::default();
        assert_eq!(
            cache.enqueue(THEM, frame(0), t(0)),
            EnqueueResult::SendRequest
        );
        assert!(cache.is_pending(THEM));
        for i in 1..16 {
            assert_eq!(cache.enqueue(THEM, frame(i), t(1)), EnqueueResult::Queued);
        }
        assert_eq!(cache.enqueue(THEM, frame(16), t(2)), EnqueueResult::Dropped);
        assert_eq!(cache.queued_frames(), 16);
        // Another address has its own per-address bound.
        assert_eq!(
            cache.enqueue(OTHER, frame(0), t(2)),
            EnqueueResult::SendRequest
        );
    }

    #[test]
    fn total_pending_bound() {
        let mut cache = ArpCache::new(ArpConfig {
            max_pending_total: 3,
            ..ArpConfig::default()
        });
        assert_eq!(
            cache.enqueue(THEM, frame(0), t(0)),
            EnqueueResult::SendRequest
        );
        assert_eq!(cache.enqueue(THEM, frame(1), t(0)), EnqueueResult::Queued);
        assert_eq!(
            cache.enqueue(OTHER, frame(2), t(0)),
            EnqueueResult::SendRequest
        );
        assert_eq!(cache.enqueue(OTHER, frame(3), t(0)), EnqueueResult::Dropped);
        let fourth = Ipv4Addr::new(10, 0, 0, 4);
        assert_eq!(
            cache.enqueue(fourth, frame(4), t(0)),
            EnqueueResult::Dropped
        );
        assert!(!cache.is_pending(fourth));
        // Taking frames out frees room.
        cache.insert(THEM, THEM_MAC, t(1));
        assert_eq!(cache.take_ready(THEM).count(), 2);
        assert_eq!(
            cache.enqueue(fourth, frame(4), t(1)),
            EnqueueResult::SendRequest
        );
    }

    #[test]
    fn insert_releases_pending_frames_in_order_with_mac_filled() {
        let mut cache = ArpCache::default();
        for i in 0..5 {
            cache.enqueue(THEM, frame(i), t(0));
        }
        cache.enqueue(OTHER, frame(9), t(0));
        assert_eq!(cache.insert(THEM, THEM_MAC, t(10)), 5);
        assert!(!cache.is_pending(THEM));
        assert_eq!(cache.lookup(THEM, t(10)), Some(THEM_MAC));
        let ready: Vec<Vec<u8>> = cache.take_ready(THEM).collect();
        assert_eq!(
            ready
                .iter()
                .map(|f| f[ethernet::HEADER_LEN])
                .collect::<Vec<_>>(),
            vec![0, 1, 2, 3, 4]
        );
        assert!(ready.iter().all(|f| &f[..6] == THEM_MAC.as_bytes()));
        assert_eq!(cache.take_ready(THEM).count(), 0);
        assert_eq!(cache.queued_frames(), 1);
        // The other address is untouched, still pending.
        assert!(cache.is_pending(OTHER));
        assert_eq!(cache.take_ready(OTHER).count(), 0);
        // drain_ready collects everything.
        cache.import(OTHER, OTHER_MAC, t(11));
        let mut out = Vec::new();
        cache.drain_ready(&mut out);
        assert_eq!(out.len(), 1);
        assert_eq!(&out[0][..6], OTHER_MAC.as_bytes());
        assert_eq!(cache.queued_frames(), 0);
    }

    #[test]
    fn enqueue_for_resolved_address_is_ready_at_once() {
        let mut cache = ArpCache::default();
        cache.insert(THEM, THEM_MAC, t(0));
        assert_eq!(cache.enqueue(THEM, frame(1), t(1)), EnqueueResult::Queued);
        let f: Vec<_> = cache.take_ready(THEM).collect();
        assert_eq!(&f[0][..6], THEM_MAC.as_bytes());
    }

    #[test]
    fn retries_then_failure_counts_dropped_frames() {
        let mut cache = ArpCache::default();
        assert_eq!(
            cache.enqueue(THEM, frame(0), t(0)),
            EnqueueResult::SendRequest
        );
        cache.enqueue(THEM, frame(1), t(0));
        assert_eq!(cache.next_deadline(), Some(t(1000)));
        let (mut requests, mut failed) = (Vec::new(), 0);
        cache.poll(t(999), &mut requests, &mut failed);
        assert!(requests.is_empty());
        for (i, now) in [1000, 2000, 3000].into_iter().enumerate() {
            cache.poll(t(now), &mut requests, &mut failed);
            assert_eq!(requests.len(), i + 1, "retry {i} at {now}");
            assert_eq!(cache.next_deadline(), Some(t(now + 1000)));
        }
        assert!(requests.iter().all(|&ip| ip == THEM));
        assert_eq!(failed, 0);
        cache.poll(t(4000), &mut requests, &mut failed);
        assert_eq!(requests.len(), 3);
        assert_eq!(failed, 2);
        assert!(!cache.is_pending(THEM));
        assert_eq!(cache.next_deadline(), None);
        assert_eq!(cache.queued_frames(), 0);
        // A new frame starts over with a fresh request.
        assert_eq!(
            cache.enqueue(THEM, frame(2), t(4001)),
            EnqueueResult::SendRequest
        );
    }

    #[test]
    fn entries_expire() {
        let mut cache = ArpCache::default();
        cache.insert(THEM, THEM_MAC, t(0));
        assert_eq!(cache.lookup(THEM, t(59_999)), Some(THEM_MAC));
        assert_eq!(cache.lookup(THEM, t(60_000)), None);
        // A refresh extends the lifetime.
        cache.insert(THEM, THEM_MAC, t(30_000));
        assert_eq!(cache.lookup(THEM, t(89_999)), Some(THEM_MAC));
        // poll purges expired entries, and is wanted from the first expiry on (perhaps
        // earlier: after the refresh the floor it compares with is a lower bound).
        cache.insert(OTHER, OTHER_MAC, t(50_000));
        assert!(cache.has_work(t(90_000)));
        let (mut r, mut f) = (Vec::new(), 0);
        cache.poll(t(95_000), &mut r, &mut f);
        assert_eq!(cache.len(), 1);
        // After a poll the floor is exact.
        assert!(!cache.has_work(t(109_999)));
        assert!(cache.has_work(t(110_000)));
        assert_eq!(cache.lookup(OTHER, t(95_000)), Some(OTHER_MAC));
        assert_eq!(cache.lookup(THEM, t(95_000)), None);
    }

    #[test]
    fn oldest_entry_is_evicted() {
        let mut cache = ArpCache::new(ArpConfig {
            max_entries: 3,
            ..ArpConfig::default()
        });
        let ip = |i: u8| Ipv4Addr::new(10, 0, 1, i);
        let mac = |i: u8| EthernetAddress([0x02, 0, 0, 0, 1, i]);
        for i in 1..=3 {
            cache.insert(ip(i), mac(i), t(u64::from(i)));
        }
        // Refreshing 1 makes 2 the oldest.
        cache.insert(ip(1), mac(1), t(10));
        cache.insert(ip(4), mac(4), t(11));
        assert_eq!(cache.len(), 3);
        assert_eq!(cache.lookup(ip(2), t(12)), None);
        for i in [1, 3, 4] {
            assert_eq!(cache.lookup(ip(i), t(12)), Some(mac(i)));
        }
    }

    #[test]
    fn drain_learned_reports_new_and_changed_only() {
        let mut cache = ArpCache::default();
        let mut out = Vec::new();
        cache.insert(THEM, THEM_MAC, t(0));
        cache.insert(THEM, THEM_MAC, t(1)); // refresh: not news
        cache.import(OTHER, OTHER_MAC, t(1)); // from a sibling: not reported back
        cache.drain_learned(&mut out);
        assert_eq!(out, vec![(THEM, THEM_MAC)]);
        out.clear();
        cache.drain_learned(&mut out);
        assert!(out.is_empty());
        cache.insert(THEM, OTHER_MAC, t(2)); // MAC changed
        cache.insert(OTHER, OTHER_MAC, t(3)); // same as imported: not news
        cache.insert(THEM, OTHER_MAC, t(70_000)); // re-learned after expiry
        cache.drain_learned(&mut out);
        assert_eq!(out, vec![(THEM, OTHER_MAC), (THEM, OTHER_MAC)]);
    }

    #[test]
    fn learn_follows_rfc826_merge_rule() {
        let mut cache = ArpCache::default();
        let mut buf = [0u8; FRAME_LEN];
        // A request between two other hosts teaches nothing new.
        build_request(&mut buf, OTHER_MAC, OTHER, THEM);
        let (_, input) = receive(&buf, US);
        assert_eq!(cache.learn(&input, t(0)), 0);
        assert_eq!(cache.lookup(OTHER, t(0)), None);
        // A request aimed at us adds the sender.
        build_request(&mut buf, THEM_MAC, THEM, US);
        let (_, input) = receive(&buf, US);
        cache.learn(&input, t(0));
        assert_eq!(cache.lookup(THEM, t(0)), Some(THEM_MAC));
        // A gratuitous ARP for an address we hold updates it.
        build_gratuitous(&mut buf, OTHER_MAC, THEM);
        let (_, input) = receive(&buf, US);
        cache.learn(&input, t(1));
        assert_eq!(cache.lookup(THEM, t(1)), Some(OTHER_MAC));
        // A reply for an address we are resolving releases its frames.
        cache.enqueue(OTHER, frame(7), t(2));
        build_reply(&mut buf, OTHER_MAC, OTHER, THEM_MAC, THEM);
        let (_, input) = receive(&buf, US);
        assert_eq!(cache.learn(&input, t(3)), 1);
    }

    #[test]
    fn impossible_mappings_are_not_stored() {
        let mut cache = ArpCache::default();
        cache.insert(Ipv4Addr::BROADCAST, THEM_MAC, t(0));
        cache.insert(THEM, MacAddr::BROADCAST, t(0));
        cache.insert(OTHER, EthernetAddress([0; 6]), t(0));
        assert!(cache.is_empty());
    }

    proptest! {
        /// Whatever a valid packet says, learning from it keeps the cache sound.
        #[test]
        fn learning_any_valid_packet_never_panics(
            bytes in proptest::collection::vec(any::<u8>(), 0..64),
            ip in any::<[u8; 4]>(),
        ) {
            if let Ok(input) = process(&bytes, Ipv4Addr::from(ip)) {
                let mut cache = ArpCache::default();
                cache.learn(&input, Instant::ZERO);
                prop_assert!(cache.len() <= 1);
            }
        }

        /// Whatever the sequence of operations, the frame count stays consistent and
        /// within its bound.
        #[test]
        fn cache_accounting_holds(ops in proptest::collection::vec((0u8..4, 0u8..4, 0u64..3000), 0..200)) {
            let config = ArpConfig { max_pending_total: 10, max_pending_per_addr: 4, max_entries: 2, ..ArpConfig::default() };
            let mut cache = ArpCache::new(config);
            let mut now = 0;
            let mut taken = 0usize;
            let mut accepted = 0usize;
            let mut failed = 0usize;
            for (op, addr, dt) in ops {
                now += dt;
                let ip = Ipv4Addr::new(10, 0, 2, addr);
                match op {
                    0 => if cache.enqueue(ip, frame(addr), t(now)) != EnqueueResult::Dropped { accepted += 1 },
                    1 => { cache.insert(ip, EthernetAddress([2, 0, 0, 0, 2, addr]), t(now)); }
                    2 => taken += cache.take_ready(ip).count(),
                    _ => cache.poll(t(now), &mut Vec::new(), &mut failed),
                }
                prop_assert!(cache.queued_frames() <= 10);
                prop_assert!(cache.len() <= 2);
                // An expired entry always makes poll wanted (the floor is a lower bound).
                if let Some(&(learned_at, _)) = cache.by_age.first() {
                    if t(now) >= learned_at + cache.config.entry_lifetime {
                        prop_assert!(cache.has_work(t(now)));
                    }
                }
                prop_assert_eq!(accepted, taken + failed + cache.queued_frames());
            }
        }
    }
}
