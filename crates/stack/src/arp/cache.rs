//! Each worker's neighbour cache ([`ArpCache`]), shared by ARP (IPv4) and Neighbor
//! Discovery (IPv6): IP → MAC mappings, each with its reachability state (RFC 4861
//! §7.3, run for ARP's entries too, as Linux does: `nud`), and the frames waiting for an
//! address to resolve.
//!
//! The cache is sans-IO: the engine tells it what arrived, what it sends and what time
//! it is, and it answers with solicitations to send and frames that became sendable.
//! Frames for an address still being resolved wait in a bounded queue (RFC 1122
//! §2.3.2.2 asks for at least one per address; we keep up to 16, and 256 overall), and
//! resolution is retried at most once per second (RFC 1122 §2.3.2.1 forbids flooding) a
//! bounded number of times.
//!
//! A connection refers to the entry of its next hop by a [`NeighbourId`]
//! ([`attach`](ArpCache::attach)): such an entry is never evicted nor forgotten until
//! the last connection [`detach`](ArpCache::detach)es, only its mapping may be (after
//! probes went unanswered). An entry no connection uses is forgotten `entry_lifetime`
//! after it was last learned or used, or evicted, the longest unused first, when the
//! cache is full. The connections keep the MAC while the entry sends directly
//! ([`Nud::sends_directly`]); [`take_changed`](ArpCache::take_changed) says which
//! entries stopped or started to, or changed MAC.
//!
//! Each worker owns its own cache; mappings one worker learns are handed to its
//! siblings through [`drain_learned`](ArpCache::drain_learned) and
//! [`import`](ArpCache::import), which does not report them again, so they do not
//! bounce between workers.

mod nud;

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::net::IpAddr;
use std::time::Duration;

use ahash::AHashMap;

use super::wire::{is_neighbour_ip, is_unicast_mac, ArpInput};
use crate::io::MacAddr;
use crate::rng::Rng;
use crate::time::Instant;
pub use nud::{News, Nud, Polled};

/// Tuning of each engine's neighbour cache.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ArpConfig {
    /// How long a mapping no connection uses is kept after it was last learned or used.
    pub entry_lifetime: Duration,
    /// `RetransTimer` (RFC 4861 §10): the time between two solicitations for the same
    /// address, to resolve it or to probe it.
    pub retry_interval: Duration,
    /// Requests sent after the first before giving up on a resolution: with 3, an
    /// unanswered address costs 4 requests and its frames are dropped 4 ×
    /// `retry_interval` after the first.
    pub max_retries: u32,
    /// `BaseReachableTime` (RFC 4861 §10): a confirmed neighbour is REACHABLE for a
    /// time drawn between half and one and a half times this.
    pub reachable_time: Duration,
    /// `DELAY_FIRST_PROBE_TIME`: how long a STALE neighbour that frames are sent to
    /// waits for a confirmation before it is probed.
    pub delay_first_probe: Duration,
    /// `MAX_UNICAST_SOLICIT`: unicast probes a neighbour gets before it is forgotten.
    pub max_probes: u32,
    /// Frames that may wait for one address.
    pub max_pending_per_addr: usize,
    /// Frames that may wait for all addresses together.
    pub max_pending_total: usize,
    /// Mappings kept; learning one more evicts the one no connection has used for the
    /// longest. A connection's next hop gets an entry past this bound.
    pub max_entries: usize,
}

impl Default for ArpConfig {
    fn default() -> Self {
        ArpConfig {
            entry_lifetime: Duration::from_secs(60),
            retry_interval: Duration::from_secs(1),
            max_retries: 3,
            reachable_time: Duration::from_secs(30),
            delay_first_probe: Duration::from_secs(5),
            max_probes: 3,
            max_pending_per_addr: 16,
            max_pending_total: 256,
            max_entries: 4096,
        }
    }
}

/// What [`ArpCache::enqueue`] did with a frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EnqueueResult {
    /// The frame is queued and it is the first for this address: solicit it now (later
    /// retries come from [`ArpCache::poll`]).
    SendRequest,
    /// The frame is queued behind a solicitation already in flight, or ready to go.
    Queued,
    /// A queue bound was hit and the frame was dropped
    /// ([`DropReason::ArpQueueFull`](crate::drop_reason::DropReason::ArpQueueFull)).
    Dropped,
}

/// An entry of the cache as a connection refers to it ([`ArpCache::attach`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct NeighbourId(u32);

impl NeighbourId {
    /// Where the entry lies in the cache's table.
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

/// A solicitation for the engine to send.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Solicit {
    /// The address asked for.
    pub ip: IpAddr,
    /// `Some`: a probe of the cached MAC, sent to it (RFC 4861 §7.3.3; a unicast ARP
    /// request for IPv4); `None`: a resolution, to the address's solicited-node group
    /// or, for IPv4, broadcast.
    pub unicast: Option<MacAddr>,
}

#[derive(Debug)]
struct Entry {
    ip: IpAddr,
    /// None while unresolved ([`Nud::Unresolved`], [`Nud::Incomplete`]).
    mac: Option<MacAddr>,
    state: Nud,
    /// When `state` was entered.
    since: Instant,
    /// When Neighbor Discovery or ARP last confirmed the neighbour, or a connection
    /// that no longer refers to the entry last made progress, if ever (the
    /// confirmations of connections that do come through `poll`).
    confirmed: Option<Instant>,
    /// When the state's timer fires ([`Instant::FAR_FUTURE`]: it has none).
    deadline: Instant,
    /// Solicitations sent in this state (INCOMPLETE: after the first).
    sent: u32,
    /// Frames waiting for the resolution.
    frames: VecDeque<Vec<u8>>,
    /// Connections that refer to the entry.
    users: u32,
    /// For an entry no connection uses (and not INCOMPLETE): since when, the key of
    /// `idle`.
    idle_since: Option<Instant>,
}

/// One worker's neighbour cache, with the frames waiting for resolution.
#[derive(Debug)]
pub struct ArpCache {
    config: ArpConfig,
    /// The entries by [`NeighbourId`]; a `None` is free (listed in `free`).
    entries: Vec<Option<Entry>>,
    free: Vec<u32>,
    index: AHashMap<IpAddr, NeighbourId>,
    /// (deadline, entry) of every state timer, the next first. Ordered sets and maps
    /// here and below (a few entries, off the fast path): solicitations and released
    /// frames go out in an order that is the same in every run, which a hasher's random
    /// keys would not give, so a simulated run replays exactly.
    timers: BTreeSet<(Instant, NeighbourId)>,
    /// (since, entry) of the entries no connection uses: the front is the next to
    /// forget and the one to evict.
    idle: BTreeSet<(Instant, NeighbourId)>,
    /// Nothing is due before this (a lower bound, exact after `poll`): what
    /// [`has_work`](Self::has_work), asked every loop turn, compares `now` with.
    due: Instant,
    /// `ReachableTime`, drawn from `rng` again once `redraw_at` is reached.
    reachable_time: Duration,
    redraw_at: Instant,
    rng: Rng,
    /// Frames whose address got resolved, destination MAC already filled in, waiting for
    /// the engine to take them.
    ready: BTreeMap<IpAddr, VecDeque<Vec<u8>>>,
    /// Frames waiting in entries and in `ready` together, bounded by
    /// `max_pending_total`.
    queued_frames: usize,
    /// New or changed mappings not yet reported through `drain_learned`.
    learned: Vec<(IpAddr, MacAddr)>,
    /// Entries with connections whose [`sendable`](Self::sendable) MAC changed.
    changed: Vec<NeighbourId>,
}

impl Default for ArpCache {
    fn default() -> Self {
        ArpCache::new(ArpConfig::default(), 0)
    }
}

impl ArpCache {
    /// An empty cache tuned by `config`, drawing `ReachableTime` from a generator
    /// seeded with `seed` (the engine's own generator gives it).
    pub fn new(config: ArpConfig, seed: u64) -> ArpCache {
        let mut rng = Rng::new(seed);
        ArpCache {
            reachable_time: nud::draw_reachable_time(config.reachable_time, &mut rng),
            redraw_at: Instant::ZERO + nud::REDRAW_EVERY,
            rng,
            config,
            entries: Vec::new(),
            free: Vec::new(),
            index: AHashMap::new(),
            timers: BTreeSet::new(),
            idle: BTreeSet::new(),
            due: Instant::FAR_FUTURE,
            ready: BTreeMap::new(),
            queued_frames: 0,
            learned: Vec::new(),
            changed: Vec::new(),
        }
    }

    fn entry(&self, id: NeighbourId) -> &Entry {
        self.entries[id.index()]
            .as_ref()
            .expect("a neighbour id names a live entry")
    }

    fn entry_mut(&mut self, id: NeighbourId) -> &mut Entry {
        self.entries[id.index()]
            .as_mut()
            .expect("a neighbour id names a live entry")
    }

    /// The MAC cached for `ip`, in any state that has one.
    pub fn lookup(&self, ip: impl Into<IpAddr>) -> Option<MacAddr> {
        let id = *self.index.get(&ip.into())?;
        self.entry(id).mac
    }

    /// The state of `ip`'s entry, if it has one.
    pub fn state(&self, ip: impl Into<IpAddr>) -> Option<Nud> {
        let id = *self.index.get(&ip.into())?;
        Some(self.entry(id).state)
    }

    /// The current `ReachableTime`.
    pub fn reachable_time(&self) -> Duration {
        self.reachable_time
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.index.len()
    }

    /// Whether there is no entry.
    pub fn is_empty(&self) -> bool {
        self.index.is_empty()
    }

    /// Frames waiting, for resolution or to be taken with [`drain_ready`](Self::drain_ready).
    pub fn queued_frames(&self) -> usize {
        self.queued_frames
    }

    // ----- Connections -----

    /// The entry of `ip`, a connection's next hop, which the connection refers to until
    /// it calls [`detach`](Self::detach). Without an entry yet, one is made: STALE at
    /// `hint` (the MAC the peer's SYN came from) if given, otherwise unresolved, to be
    /// resolved when the first frame is sent. An unresolved entry takes `hint` too.
    pub fn attach(&mut self, ip: IpAddr, hint: Option<MacAddr>, now: Instant) -> NeighbourId {
        let id = match self.index.get(&ip) {
            Some(&id) => id,
            None => self
                .create(ip, now, true)
                .expect("a connection's entry is made"),
        };
        let entry = self.entry_mut(id);
        entry.users += 1;
        let unresolved = entry.state == Nud::Unresolved;
        if let Some(since) = entry.idle_since.take() {
            self.idle.remove(&(since, id));
        }
        if let (true, Some(mac)) = (unresolved, hint.filter(|&m| is_unicast_mac(m))) {
            self.enter(id, Nud::Stale, now);
            self.entry_mut(id).mac = Some(mac);
        }
        id
    }

    /// How many connections refer to `id`.
    pub fn users(&self, id: NeighbourId) -> u32 {
        self.entry(id).users
    }

    /// A connection no longer refers to `id`; it last made forward progress at
    /// `confirmed`, which the entry keeps as a confirmation of its own. Returns whether
    /// it was the last: the entry may go from then on.
    pub fn detach(&mut self, id: NeighbourId, confirmed: Option<Instant>, now: Instant) -> bool {
        let entry = self.entry_mut(id);
        entry.confirmed = entry.confirmed.max(confirmed);
        entry.users -= 1;
        if entry.users > 0 {
            return false;
        }
        let state = entry.state;
        self.changed.retain(|&c| c != id);
        match state {
            Nud::Unresolved => self.forget(id),
            // It goes when its resolution ends.
            Nud::Incomplete => {}
            _ => self.make_idle(id, now),
        }
        true
    }

    /// The MAC frames to `id` go to directly: while the entry is REACHABLE, DELAY or
    /// PROBE. Otherwise they go through [`output`](Self::output).
    #[inline]
    pub fn sendable(&self, id: NeighbourId) -> Option<MacAddr> {
        let entry = self.entries.get(id.index())?.as_ref()?;
        entry.mac.filter(|_| entry.state.sends_directly())
    }

    /// A frame is to be sent to `id`: the MAC it goes to, if the entry has one. The
    /// first frame sent to a STALE entry makes it DELAY (RFC 4861 §7.3.3). `None`:
    /// [`enqueue`](Self::enqueue) the frame.
    pub fn output(&mut self, id: NeighbourId, now: Instant) -> Option<MacAddr> {
        let before = self.sendable(id);
        let entry = self.entry(id);
        let mac = entry.mac?;
        if entry.state == Nud::Stale {
            self.enter(id, Nud::Delay, now);
            self.notify(id, before);
        }
        Some(mac)
    }

    /// Queue a complete Ethernet frame for `id`, which has no MAC (see
    /// [`output`](Self::output)). Its destination MAC (bytes 0..6) is filled in when
    /// the address resolves. If it has one, the frame goes straight to the ready queue
    /// and `Queued` is returned.
    pub fn enqueue(&mut self, id: NeighbourId, mut frame: Vec<u8>, now: Instant) -> EnqueueResult {
        if self.queued_frames >= self.config.max_pending_total {
            return EnqueueResult::Dropped;
        }
        if let Some(mac) = self.output(id, now) {
            fill_dst(&mut frame, mac);
            let ip = self.entry(id).ip;
            self.ready.entry(ip).or_default().push_back(frame);
            self.queued_frames += 1;
            return EnqueueResult::Queued;
        }
        let max = self.config.max_pending_per_addr;
        let entry = self.entry_mut(id);
        if entry.frames.len() >= max {
            return EnqueueResult::Dropped;
        }
        entry.frames.push_back(frame);
        let resolving = entry.state == Nud::Incomplete;
        self.queued_frames += 1;
        if resolving {
            return EnqueueResult::Queued;
        }
        self.enter(id, Nud::Incomplete, now);
        EnqueueResult::SendRequest
    }

    /// Append to `out` the entries with connections whose
    /// [`sendable`](Self::sendable) MAC changed since the last call.
    pub fn take_changed(&mut self, out: &mut Vec<NeighbourId>) {
        out.append(&mut self.changed);
    }

    /// Whether [`take_changed`](Self::take_changed) has anything.
    #[inline]
    pub fn has_changed(&self) -> bool {
        !self.changed.is_empty()
    }

    // ----- What arrives -----

    /// Apply an ARP packet as Linux does: a reply unicast to us (`to_us`: the frame
    /// was addressed to our MAC) for our address confirms the sender, as a solicited
    /// advertisement does; any other packet is news as a solicitation is, and creates
    /// an entry only when it was aimed at our address (RFC 826's merge rule). Returns
    /// the number of frames that became ready, as [`update`](Self::update) does.
    pub fn learn(&mut self, input: &ArpInput, to_us: bool, now: Instant) -> usize {
        let Some((ip, mac)) = input.learnable() else {
            return 0;
        };
        let reply = input.operation == smoltcp::wire::ArpOperation::Reply;
        let news = News {
            solicited: reply && to_us && input.targets_us,
            create: input.targets_us,
            ..News::unsolicited(mac)
        };
        self.update(IpAddr::V4(ip), news, now)
    }

    /// A mapping a sibling worker learned: news as a solicitation is, not reported
    /// again by `drain_learned`.
    pub fn import(&mut self, ip: impl Into<IpAddr>, mac: MacAddr, now: Instant) -> usize {
        let news = News {
            report: false,
            ..News::unsolicited(mac)
        };
        self.update(ip, news, now)
    }

    /// Move the frames waiting for `id` to the ready queue, addressed to its MAC;
    /// returns how many are ready for its address. Sending them to a STALE entry makes
    /// it DELAY.
    fn release(&mut self, id: NeighbourId, now: Instant) -> usize {
        let entry = self.entry_mut(id);
        let ip = entry.ip;
        if let (Some(mac), false) = (entry.mac, entry.frames.is_empty()) {
            let frames = std::mem::take(&mut entry.frames);
            let stale = entry.state == Nud::Stale;
            let ready = self.ready.entry(ip).or_default();
            for mut frame in frames {
                fill_dst(&mut frame, mac);
                ready.push_back(frame);
            }
            if stale {
                self.enter(id, Nud::Delay, now);
            }
        }
        self.ready.get(&ip).map_or(0, VecDeque::len)
    }

    /// Append every sendable frame, for all addresses, to `out` (per address, oldest
    /// first).
    pub fn drain_ready(&mut self, out: &mut Vec<Vec<u8>>) {
        for (_, frames) in std::mem::take(&mut self.ready) {
            self.queued_frames -= frames.len();
            out.extend(frames);
        }
    }

    /// The frames that became sendable for `ip`, oldest first, destination MAC filled in.
    #[cfg(test)]
    pub(crate) fn take_ready(&mut self, ip: impl Into<IpAddr>) -> impl Iterator<Item = Vec<u8>> {
        let frames = self.ready.remove(&ip.into()).unwrap_or_default();
        self.queued_frames -= frames.len();
        frames.into_iter()
    }

    /// Append to `out` the mappings learned (new or changed) since the last call, for
    /// sibling workers to [`import`](Self::import). At most `max_entries` are kept
    /// between calls.
    pub fn drain_learned(&mut self, out: &mut Vec<(IpAddr, MacAddr)>) {
        out.append(&mut self.learned);
    }

    // ----- Time -----

    /// Do the work that is due at `now`: the timers of the entries' states (see `nud`),
    /// with `confirmed` telling when a connection through an entry last made forward
    /// progress (asked only when one of the entry's timers fires), and forgetting
    /// entries no connection used for `entry_lifetime`. Solicitations to send go to
    /// `out`.
    pub fn poll(
        &mut self,
        now: Instant,
        mut confirmed: impl FnMut(NeighbourId) -> Option<Instant>,
        out: &mut Vec<Solicit>,
    ) -> Polled {
        let mut polled = Polled::default();
        if !self.has_work(now) {
            return polled;
        }
        while let Some(&(since, id)) = self.idle.first() {
            if now < since + self.config.entry_lifetime {
                break;
            }
            self.forget(id);
        }
        while let Some(&(at, id)) = self.timers.first() {
            if at > now {
                break;
            }
            self.timers.pop_first();
            self.entry_mut(id).deadline = Instant::FAR_FUTURE;
            self.fire(id, now, &mut confirmed, out, &mut polled);
        }
        let idle = self
            .idle
            .first()
            .map(|&(since, _)| since + self.config.entry_lifetime);
        let timer = self.timers.first().map(|&(at, _)| at);
        self.due = idle
            .into_iter()
            .chain(timer)
            .min()
            .unwrap_or(Instant::FAR_FUTURE);
        polled
    }

    /// Whether [`poll`](Self::poll) has anything to do at `now`. Engines ask every loop
    /// turn.
    #[inline]
    pub fn has_work(&self, now: Instant) -> bool {
        now >= self.due
    }

    /// When a state's timer next fires. Forgetting unused entries needs no wake-up.
    pub fn next_deadline(&self) -> Option<Instant> {
        self.timers.first().map(|&(at, _)| at)
    }

    // ----- Entries -----

    /// A new entry for `ip`, unresolved, no connection using it yet. When the cache is
    /// full, the entry no connection has used for the longest goes; if every one is
    /// used, the new entry is made only `for_connection`.
    fn create(&mut self, ip: IpAddr, now: Instant, for_connection: bool) -> Option<NeighbourId> {
        if self.len() >= self.config.max_entries {
            if let Some(&(_, oldest)) = self.idle.first() {
                self.forget(oldest);
            }
            if self.len() >= self.config.max_entries && !for_connection {
                return None;
            }
        }
        let entry = Entry {
            ip,
            mac: None,
            state: Nud::Unresolved,
            since: now,
            confirmed: None,
            deadline: Instant::FAR_FUTURE,
            sent: 0,
            frames: VecDeque::new(),
            users: 0,
            idle_since: None,
        };
        let id = match self.free.pop() {
            Some(i) => {
                self.entries[i as usize] = Some(entry);
                NeighbourId(i)
            }
            None => {
                self.entries.push(Some(entry));
                NeighbourId((self.entries.len() - 1) as u32)
            }
        };
        self.index.insert(ip, id);
        if !for_connection {
            self.make_idle(id, now);
        }
        Some(id)
    }

    /// Remove entry `id`, which no connection uses; frames waiting for it are dropped.
    fn forget(&mut self, id: NeighbourId) {
        let Some(entry) = self.entries[id.index()].take() else {
            return;
        };
        debug_assert_eq!(entry.users, 0);
        self.queued_frames -= entry.frames.len();
        self.index.remove(&entry.ip);
        self.timers.remove(&(entry.deadline, id));
        if let Some(since) = entry.idle_since {
            self.idle.remove(&(since, id));
        }
        self.free.push(id.0);
    }

    /// Entry `id` is not used by any connection from `now` on.
    fn make_idle(&mut self, id: NeighbourId, now: Instant) {
        let entry = self.entry_mut(id);
        if let Some(since) = entry.idle_since.replace(now) {
            self.idle.remove(&(since, id));
        }
        self.idle.insert((now, id));
        self.due = self.due.min(now + self.config.entry_lifetime);
    }

    /// Entry `id` was learned again at `now`: if no connection uses it, it is kept
    /// `entry_lifetime` from now.
    fn refresh_idle(&mut self, id: NeighbourId, now: Instant) {
        let entry = self.entry(id);
        if entry.idle_since.is_some() || (entry.users == 0 && entry.state != Nud::Incomplete) {
            self.make_idle(id, now);
        }
    }

    /// Entry `id`'s state timer fires at `at` (`FAR_FUTURE`: never).
    fn set_deadline(&mut self, id: NeighbourId, at: Instant) {
        let entry = self.entry_mut(id);
        let old = std::mem::replace(&mut entry.deadline, at);
        if old != Instant::FAR_FUTURE {
            self.timers.remove(&(old, id));
        }
        if at != Instant::FAR_FUTURE {
            self.timers.insert((at, id));
            self.due = self.due.min(at);
        }
    }

    /// Report `id` through `take_changed` if connections use it and its sendable MAC is
    /// no longer `before`.
    fn notify(&mut self, id: NeighbourId, before: Option<MacAddr>) {
        let used = self.entries[id.index()]
            .as_ref()
            .is_some_and(|e| e.users > 0);
        if used && self.sendable(id) != before && !self.changed.contains(&id) {
            self.changed.push(id);
        }
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
