//! Ephemeral ports for active opens: how many each remote endpoint has in use, and the
//! bounded search for a free one.
//!
//! A local port is free for a connection to `remote` when no live connection and no
//! TIME-WAIT entry holds the pair. Checking one candidate costs a hash lookup (the flow
//! table holds both), so a search that walks the range until it finds a free port costs up to 64 Ki lookups
//! when the ports to that destination are all taken, on every attempt. Instead:
//!
//! - The flow table counts, per remote endpoint, the keys it holds (live and in
//!   TIME-WAIT) whose local port lies in the ephemeral range ([`PortUse`], kept inside
//!   the table's own insert and remove, so the counts cannot drift from the table), and
//!   remembers the latest such local port it let go of.
//! - [`PortSearch`] compares that count with the number of ports this worker may use for
//!   the destination (all of the range on one queue; those it owns by `port % queues`
//!   on a link the stack cannot predict; those whose return flow the NIC's RSS steers
//!   here otherwise) and fails at once when they are all taken. Otherwise it probes the
//!   port the table let go of last, then a bounded run of candidates from a rotating
//!   cursor, and only if all of those are taken walks the range once.
//!
//! The guarantee, exactly: a connect fails for want of a port if and only if every port
//! of the range this worker may use for that destination is held by a connection or a
//! TIME-WAIT entry (the search never gives up while a free port exists). A connect to a
//! destination whose ports are all taken checks no port: O(1), one hash lookup — once
//! the usable count is known, which it always is without RSS, and with RSS after one
//! walk of the range for that destination (hash arithmetic only, remembered for up to
//! [`USABLE_MEMO`] destinations). A connect that succeeds checks at most one hinted
//! port plus [`PROBE_STEPS`] candidates, unless all of those are taken, when it walks
//! the range once: that needs a destination nearly full *and* its free ports away from
//! both the cursor and the port freed last (ports taken in order and freed in about
//! the order they were taken, as TIME-WAIT expiry frees them, are found at once).
//!
//! The exact count assumes that only active opens hold ephemeral local ports, i.e. no
//! listener sits inside the range (the configuration
//! [`EngineConfig::ephemeral_ports`](super::EngineConfig::ephemeral_ports) asks for).
//! Once one does, the search stops trusting the count and never fails without a walk.

use std::collections::HashMap;
use std::net::IpAddr;
use std::ops::RangeInclusive;

use ahash::RandomState;

use super::FlowKey;

/// Candidates looked at from the cursor before the search walks the whole range.
pub(super) const PROBE_STEPS: usize = 256;
/// Destinations whose usable-port count (under RSS) is remembered; the memo is cleared
/// when it reaches this size.
pub(super) const USABLE_MEMO: usize = 4096;

/// A remote endpoint (address, port).
pub(super) type Remote = (IpAddr, u16);

/// What one table holds for one remote endpoint.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct InUse {
    /// Keys with a local port in the ephemeral range.
    pub count: u32,
    /// The ephemeral local port whose key left the table last (0: none yet).
    pub freed: u16,
}

/// Per remote endpoint, the keys of one table whose local port is ephemeral. Entries go
/// when their count reaches zero, so this holds one entry per destination in use.
pub(super) struct PortUse {
    range: RangeInclusive<u16>,
    by_remote: HashMap<Remote, InUse, RandomState>,
}

impl PortUse {
    pub(super) fn new(range: RangeInclusive<u16>) -> PortUse {
        PortUse {
            range,
            by_remote: HashMap::with_hasher(RandomState::new()),
        }
    }

    /// `key` entered the table (it was not there before).
    pub(super) fn added(&mut self, key: &FlowKey) {
        if self.range.contains(&key.local_port) {
            self.by_remote
                .entry((key.remote_ip(), key.remote_port))
                .or_default()
                .count += 1;
        }
    }

    /// `key` left the table.
    pub(super) fn removed(&mut self, key: &FlowKey) {
        if !self.range.contains(&key.local_port) {
            return;
        }
        let remote = (key.remote_ip(), key.remote_port);
        if let Some(e) = self.by_remote.get_mut(&remote) {
            e.count -= 1;
            e.freed = key.local_port;
            if e.count == 0 {
                self.by_remote.remove(&remote);
            }
        }
    }

    /// What the table holds for `remote`.
    pub(super) fn get(&self, remote: Remote) -> InUse {
        self.by_remote.get(&remote).copied().unwrap_or_default()
    }

    /// Destinations with ports in use.
    #[cfg(test)]
    pub(super) fn destinations(&self) -> usize {
        self.by_remote.len()
    }
}

/// Which ports of the range this worker may use for one destination.
pub(super) enum Steering<'a> {
    /// Every port (one queue).
    All,
    /// Ports `p` with `p % queues == queue` (a link whose steering the stack cannot
    /// predict: the port names the owner).
    Modulo { queue: u16, queues: u16 },
    /// Ports the predicate accepts (Toeplitz RSS: the return flow lands here).
    Hashed(&'a dyn Fn(u16) -> bool),
}

impl Steering<'_> {
    fn ours(&self, port: u16) -> bool {
        match self {
            Steering::All => true,
            Steering::Modulo { queue, queues } => port % (*queues).max(1) == *queue,
            Steering::Hashed(f) => f(port),
        }
    }

    /// The ports of `range` this worker may use, when arithmetic tells.
    fn usable(&self, range: &RangeInclusive<u16>) -> Option<u32> {
        let (lo, hi) = (u32::from(*range.start()), u32::from(*range.end()));
        if lo > hi {
            return Some(0);
        }
        match self {
            Steering::All => Some(hi - lo + 1),
            Steering::Modulo { queue, queues } => {
                let (q, n) = (u32::from(*queue), u32::from(*queues).max(1));
                if q >= n {
                    return Some(0);
                }
                // Ports p <= x with p % n == q: (x - q) / n + 1 when x >= q.
                let upto = |x: u32| if x >= q { (x - q) / n + 1 } else { 0 };
                Some(upto(hi) - if lo == 0 { 0 } else { upto(lo - 1) })
            }
            Steering::Hashed(_) => None,
        }
    }
}

/// The engine's port search: a rotating cursor, the usable counts it has learned, and
/// how many ports it has checked.
pub(super) struct PortSearch {
    /// Where the next run of candidates starts.
    cursor: u16,
    /// Usable ports per destination under RSS, learned by walking the range.
    usable: HashMap<Remote, u32, RandomState>,
    /// The in-use counts stand for every held ephemeral port (no listener in the range).
    counts_exact: bool,
    /// Ports checked against the flow table (each check is a hash lookup), for
    /// tests and diagnostics.
    pub probes: u64,
    /// Walks of the whole range.
    pub walks: u64,
}

/// What the flow table says about one destination: ports held (live and TIME-WAIT)
/// and the port it let go of last.
pub(super) struct Held {
    pub count: u32,
    pub freed: u16,
}

impl Held {
    pub(super) fn of(in_use: InUse) -> Held {
        Held {
            count: in_use.count,
            freed: in_use.freed,
        }
    }
}

impl PortSearch {
    pub(super) fn new(cursor: u16) -> PortSearch {
        PortSearch {
            cursor,
            usable: HashMap::with_hasher(RandomState::new()),
            counts_exact: true,
            probes: 0,
            walks: 0,
        }
    }

    /// A listener on `port`: inside `range`, passive opens may hold ephemeral ports,
    /// and the in-use counts stop being the whole story (for good: its connections
    /// outlive it).
    pub(super) fn listening(&mut self, port: u16, range: &RangeInclusive<u16>) {
        if range.contains(&port) {
            self.counts_exact = false;
        }
    }

    /// A free port of `range` for `remote` that `steering` lets this worker use; `held`
    /// from the flow table, `is_free` checks one port against it. See the module docs for
    /// what it costs and guarantees.
    pub(super) fn pick(
        &mut self,
        remote: Remote,
        range: &RangeInclusive<u16>,
        steering: &Steering<'_>,
        held: Held,
        mut is_free: impl FnMut(u16) -> bool,
    ) -> Option<u16> {
        let (lo, hi) = (*range.start(), *range.end());
        if lo > hi {
            return None;
        }
        let usable = steering
            .usable(range)
            .or_else(|| self.usable.get(&remote).copied());
        if self.counts_exact && usable.is_some_and(|u| held.count >= u) {
            return None;
        }
        let mut probe = |port: u16, probes: &mut u64| {
            *probes += 1;
            is_free(port)
        };
        let port = held.freed;
        if port != 0
            && range.contains(&port)
            && steering.ours(port)
            && probe(port, &mut self.probes)
        {
            return Some(port);
        }
        let next = |p: u16| if p >= hi { lo } else { p + 1 };
        let span = usize::from(hi - lo) + 1;
        let mut port = if range.contains(&self.cursor) {
            self.cursor
        } else {
            lo
        };
        for _ in 0..span.min(PROBE_STEPS) {
            if steering.ours(port) && probe(port, &mut self.probes) {
                self.cursor = next(port);
                return Some(port);
            }
            port = next(port);
        }
        if span <= PROBE_STEPS {
            // The run covered the range.
            return None;
        }
        // A walk of the whole range, from where the run stopped; it also counts the
        // usable ports when they are not known yet.
        self.walks += 1;
        let mut found = None;
        let mut count = 0u32;
        for _ in 0..span {
            if steering.ours(port) {
                count += 1;
                if found.is_none() && probe(port, &mut self.probes) {
                    found = Some(port);
                    if usable.is_some() {
                        break;
                    }
                }
            }
            port = next(port);
        }
        if usable.is_none() {
            if self.usable.len() >= USABLE_MEMO {
                self.usable.clear();
            }
            self.usable.insert(remote, count);
        }
        if let Some(p) = found {
            self.cursor = next(p);
        }
        found
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;
    use std::net::Ipv4Addr;

    /// `count` ports held, `freed` the one let go of last.
    fn held(count: u32, freed: u16) -> Held {
        Held { count, freed }
    }

    const REMOTE: Remote = (IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2)), 80);

    fn key(local_port: u16) -> FlowKey {
        FlowKey::new(REMOTE.0, REMOTE.1, local_port, 0)
    }

    /// Fill `range` through `pick` alone; returns the picks and the probes they cost.
    fn fill(
        search: &mut PortSearch,
        range: &RangeInclusive<u16>,
        steering: &Steering<'_>,
        taken: &mut HashSet<u16>,
    ) -> usize {
        let mut n = 0;
        loop {
            let h = held(taken.len() as u32, 0);
            match search.pick(REMOTE, range, steering, h, |p| !taken.contains(&p)) {
                Some(p) => {
                    assert!(taken.insert(p), "picked a taken port {p}");
                    n += 1;
                }
                None => return n,
            }
        }
    }

    #[test]
    fn port_use_counts_only_ephemeral_ports_and_forgets_empty_destinations() {
        let mut u = PortUse::new(1000..=2000);
        u.added(&key(80));
        assert_eq!(u.get(REMOTE), InUse::default());
        u.added(&key(1000));
        u.added(&key(2000));
        assert_eq!(u.get(REMOTE).count, 2);
        u.removed(&key(2000));
        assert_eq!(
            u.get(REMOTE),
            InUse {
                count: 1,
                freed: 2000
            }
        );
        u.removed(&key(1000));
        u.removed(&key(80));
        assert_eq!(u.destinations(), 0);
    }

    #[test]
    fn usable_counts_by_arithmetic() {
        let all: Steering<'static> = Steering::All;
        assert_eq!(all.usable(&(32768..=60999)), Some(28232));
        assert_eq!(all.usable(&(0..=65535)), Some(65536));
        for (queue, queues) in [(0u16, 1u16), (0, 3), (1, 3), (2, 3), (3, 4), (5, 4)] {
            let s: Steering<'static> = Steering::Modulo { queue, queues };
            for range in [0..=65535u16, 1..=10, 7..=7, 32768..=60999] {
                let want = range.clone().filter(|&p| s.ours(p)).count() as u32;
                assert_eq!(s.usable(&range), Some(want), "{queue}/{queues} {range:?}");
            }
        }
    }

    #[test]
    fn every_usable_port_is_found_then_a_full_destination_costs_no_probe() {
        let range = 1024..=65535;
        for steering in [
            Steering::All,
            Steering::Modulo {
                queue: 1,
                queues: 4,
            },
        ] {
            let mut search = PortSearch::new(40000);
            let mut taken = HashSet::new();
            let n = fill(&mut search, &range, &steering, &mut taken);
            assert_eq!(Some(n as u32), steering.usable(&range));
            assert_eq!(search.walks, 0, "sequential fills never walk");
            let before = search.probes;
            let h = held(n as u32, 0);
            assert_eq!(search.pick(REMOTE, &range, &steering, h, |_| true), None);
            assert_eq!(search.probes, before, "a full destination checks no port");
        }
    }

    #[test]
    fn hashed_steering_learns_the_usable_count_once() {
        let range = 1024..=65535;
        let steering = Steering::Hashed(&|p: u16| p % 7 == 3);
        let mut search = PortSearch::new(1024);
        let mut taken = HashSet::new();
        let n = fill(&mut search, &range, &steering, &mut taken);
        assert_eq!(n, range.clone().filter(|p| p % 7 == 3).count());
        // The fill's last call walked the range and learned the count.
        assert_eq!(search.walks, 1);
        let (probes, walks) = (search.probes, search.walks);
        let h = || held(n as u32, 0);
        for _ in 0..10 {
            assert_eq!(search.pick(REMOTE, &range, &steering, h(), |_| false), None);
        }
        assert_eq!((search.probes, search.walks), (probes, walks));
    }

    #[test]
    fn freed_ports_are_found_first_and_scattered_ones_by_a_walk() {
        let range = 1024..=65535;
        let steering: Steering<'static> = Steering::All;
        let mut search = PortSearch::new(1024);
        let mut taken = HashSet::new();
        fill(&mut search, &range, &steering, &mut taken);
        // One port freed far from the cursor: the table's hint finds it in one probe.
        taken.remove(&50000);
        let before = search.probes;
        let h = held(taken.len() as u32, 50000);
        assert_eq!(
            search.pick(REMOTE, &range, &steering, h, |p| !taken.contains(&p)),
            Some(50000)
        );
        assert_eq!(search.probes - before, 1);
        // Without the hint (it was taken since), a walk still finds it.
        let h = held(taken.len() as u32, 0);
        assert_eq!(
            search.pick(REMOTE, &range, &steering, h, |p| !taken.contains(&p)),
            Some(50000)
        );
        assert_eq!(search.walks, 1);
    }

    #[test]
    fn untrusted_counts_never_fail_without_looking() {
        let range = 1000..=1999;
        let steering: Steering<'static> = Steering::All;
        let mut search = PortSearch::new(1000);
        search.listening(80, &range);
        search.listening(1500, &range);
        // The count says full (a passive flow holds 1500 too), but port 1234 is free.
        let h = held(1000, 0);
        assert_eq!(
            search.pick(REMOTE, &range, &steering, h, |p| p == 1234),
            Some(1234)
        );
    }
}
