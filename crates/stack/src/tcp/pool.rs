//! [`RingPool`]: one engine's store of ring storage for connection buffers, and the
//! account of the buffer memory its connections hold against the engine's
//! [`MemoryBudget`].
//!
//! Idle connections own no buffer memory: a send or receive ring is taken when data
//! arrives and given back when it drains (a send ring of the smallest size once its
//! connection has been quiet for a second, so that a keep-alive connection does not
//! take and give one per response; see `SendBuffer`).
//! Going to the allocator (and zeroing 2 KiB) for every request/response would put
//! malloc/free on the data path, so drained rings return to the pool and the next
//! connection that needs one reuses it; rings that then sit unused for a whole second go
//! back to the allocator (`RingPool::trim_idle`). The engine owns
//! its pool, sized from its configuration ([`EngineConfig::buffer_pool`]), and lends it
//! to the connection state machine for each call that may take or give back storage:
//! the state machine itself holds no pool and reaches into none.
//!
//! The pool also keeps the connections' idle flight blocks (`Flight`: the scoreboard
//! and what else only data in flight needs), which come and go like the send rings.
//!
//! Because every ring is taken from and given back to the pool, and out-of-order data
//! held by receive buffers is charged to it too, the pool knows how much buffer memory
//! the engine's connections hold ([`RingPool::in_use`]) and whether the engine is under
//! memory pressure; the buffers ask it before they grow (see [`MemoryBudget`]).
//!
//! [`EngineConfig::buffer_pool`]: crate::EngineConfig::buffer_pool

use super::tcb::Flight;

/// A ring's storage: its length is its size (a boxed slice, 16 bytes inline in a
/// buffer where a `Vec` would take 24).
pub(crate) type Ring = Box<[u8]>;

/// Smallest ring handed out; rings are powers of two from here.
pub const MIN_RING: usize = 2048;
/// Size classes kept: 2 KiB … 256 KiB.
pub const CLASSES: usize = 8;

/// An engine's budget for the buffer memory its connections hold: send rings, receive
/// rings and out-of-order data (not the shared, zero-copy chunks an application sends,
/// which it owns). Like Linux's `tcp_mem`, three thresholds in bytes:
///
/// - At `pressure` the engine enters memory pressure and stays there until what its
///   connections hold falls below `low`. Under pressure no connection stores
///   out-of-order data (what one held is dropped, "pruned", when more arrives; the peer
///   learns it from the SACK blocks and retransmits, RFC 2018 §8), receive windows are
///   not opened beyond the storage a connection already has, and send rings do not
///   grow (the application's `send` takes less).
/// - `limit` is the most they may hold: in-order data that would need more is dropped
///   unacknowledged (the peer retransmits it).
///
/// A connection's first ring in each direction (2 KiB) is always granted, so that no
/// connection stalls for good; with [`EngineConfig::max_connections`] that bounds what
/// can exceed `limit`. Data the application has been shown is never dropped.
///
/// [`EngineConfig::max_connections`]: crate::EngineConfig::max_connections
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct MemoryBudget {
    /// Pressure ends below this.
    pub low: usize,
    /// Pressure begins at this.
    pub pressure: usize,
    /// The most buffer memory held (but for first rings, above).
    pub limit: usize,
}

impl MemoryBudget {
    /// A budget whose pressure begins at `pressure` bytes and ends below `low`, holding
    /// at most `limit` (the order of Linux's `tcp_mem`: low, pressure, limit).
    pub const fn new(low: usize, pressure: usize, limit: usize) -> MemoryBudget {
        MemoryBudget {
            low,
            pressure,
            limit,
        }
    }
}

impl Default for MemoryBudget {
    /// 128 MiB / 192 MiB / 256 MiB per engine. Linux sizes `tcp_mem` from the machine's
    /// memory (on 24 GiB about 1.0 / 1.4 / 2.1 GiB for the whole machine); a fixed
    /// per-worker budget keeps the stack pure. It is what a few thousand connections
    /// with full 256 KiB buffers hold, and far above what a web server's connections
    /// need (their bodies are shared, not copied); raise it for bulk transfers over
    /// many connections.
    fn default() -> Self {
        MemoryBudget {
            low: 128 << 20,
            pressure: 192 << 20,
            limit: 256 << 20,
        }
    }
}

/// What memory pressure made connections give up, since the engine started.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MemoryCounters {
    /// Times the engine entered memory pressure.
    pub pressure_entered: u64,
    /// Out-of-order segments not stored because of memory pressure.
    pub ooo_refused: u64,
    /// Held out-of-order bytes dropped under memory pressure.
    pub ooo_pruned_bytes: u64,
    /// In-order segments (or their tails) dropped unacknowledged at the memory limit.
    pub rcv_dropped: u64,
    /// Window advertisements held below the buffer's free space by memory pressure.
    pub windows_clamped: u64,
    /// Sends cut short because memory pressure kept the send ring from growing.
    pub sends_clamped: u64,
}

impl MemoryCounters {
    /// Add another worker's counters to these.
    pub fn add(&mut self, other: &MemoryCounters) {
        self.pressure_entered += other.pressure_entered;
        self.ooo_refused += other.ooo_refused;
        self.ooo_pruned_bytes += other.ooo_pruned_bytes;
        self.rcv_dropped += other.rcv_dropped;
        self.windows_clamped += other.windows_clamped;
        self.sends_clamped += other.sends_clamped;
    }
}

/// Extra bytes charged per out-of-order range besides its data (its record and the
/// allocator's overhead), so that many tiny ranges are not free.
pub(crate) const RANGE_OVERHEAD: usize = 64;

/// Idle ring storage by size class, each class bounded in bytes, and the account of the
/// buffer memory lent out. See the [module docs](self).
#[derive(Debug)]
pub(crate) struct RingPool {
    classes: [Vec<Ring>; CLASSES],
    /// Bytes of the rings in `classes`.
    idle: usize,
    /// The fewest idle rings each class held since the last [`trim_idle`](Self::trim_idle),
    /// and the fewest idle flight blocks: what sat unused all that time.
    low: [usize; CLASSES],
    low_flights: usize,
    /// Most bytes of idle rings kept per class; rings beyond go back to the allocator.
    bytes_per_class: usize,
    budget: MemoryBudget,
    /// Ring bytes lent to connections plus out-of-order bytes charged.
    in_use: usize,
    peak: usize,
    pressure: bool,
    counters: MemoryCounters,
    /// Whether `in_use`, `peak` or `counters` may have changed since
    /// [`take_changed`](Self::take_changed) last said so.
    changed: bool,
    /// Idle flight blocks ([`Flight`]), bounded like a ring class.
    #[allow(clippy::vec_box)] // the boxes are what connections hold: handed out whole
    flights: Vec<Box<Flight>>,
}

impl RingPool {
    /// A pool that keeps at most `bytes_per_class` bytes of idle rings in each of its
    /// size classes (2 KiB … 256 KiB, powers of two), with the default
    /// [`MemoryBudget`]. It starts empty and fills as connections drain their buffers.
    pub(crate) fn new(bytes_per_class: usize) -> RingPool {
        RingPool::with_budget(bytes_per_class, MemoryBudget::default())
    }

    /// [`RingPool::new`] with the given memory budget.
    pub(crate) fn with_budget(bytes_per_class: usize, budget: MemoryBudget) -> RingPool {
        RingPool {
            classes: Default::default(),
            idle: 0,
            low: [0; CLASSES],
            low_flights: 0,
            bytes_per_class,
            budget,
            in_use: 0,
            peak: 0,
            pressure: false,
            counters: MemoryCounters::default(),
            changed: false,
            flights: Vec::new(),
        }
    }

    /// Bytes of idle rings held for reuse (at most [`CLASSES`] times the bound per class).
    pub(crate) fn idle_bytes(&self) -> usize {
        self.idle
    }

    /// Buffer memory the engine's connections hold now (rings and out-of-order data).
    pub(crate) fn in_use(&self) -> usize {
        self.in_use
    }

    /// The most [`in_use`](Self::in_use) has been.
    pub(crate) fn peak(&self) -> usize {
        self.peak
    }

    /// Whether the engine is under memory pressure (see [`MemoryBudget`]).
    pub(crate) fn pressure(&self) -> bool {
        self.pressure
    }

    /// What memory pressure cost so far.
    pub(crate) fn counters(&self) -> MemoryCounters {
        self.counters
    }

    pub(crate) fn counters_mut(&mut self) -> &mut MemoryCounters {
        self.changed = true;
        &mut self.counters
    }

    /// Whether the account ([`in_use`](Self::in_use), [`peak`](Self::peak),
    /// [`counters`](Self::counters)) may have changed since the last call that said
    /// so: the engine copies it into its statistics only then, not every loop turn.
    #[inline]
    pub(crate) fn take_changed(&mut self) -> bool {
        std::mem::take(&mut self.changed)
    }

    /// Account for `n` more bytes held.
    pub(crate) fn charge(&mut self, n: usize) {
        self.changed = true;
        self.in_use += n;
        self.peak = self.peak.max(self.in_use);
        if !self.pressure && self.in_use >= self.budget.pressure {
            self.pressure = true;
            self.counters.pressure_entered += 1;
        }
    }

    /// Account for `n` bytes no longer held.
    pub(crate) fn uncharge(&mut self, n: usize) {
        self.changed = true;
        self.in_use = self.in_use.saturating_sub(n);
        if self.pressure && self.in_use < self.budget.low {
            self.pressure = false;
        }
    }

    /// Whether `n` more bytes of out-of-order data may be stored: not under pressure,
    /// and within the limit.
    pub(crate) fn may_hold_out_of_order(&self, n: usize) -> bool {
        !self.pressure && self.in_use + n <= self.budget.limit
    }

    /// The size a ring of `from` bytes that should hold `need` bytes (at most
    /// `capacity`) may have. Its first [`MIN_RING`] is always granted; growth beyond
    /// needs the total to stay within the limit and, when `elastic` (a send ring, which
    /// only makes the application's queue longer), the engine not to be under pressure.
    /// The result may be below `need`: the caller stores what fits.
    pub(crate) fn ring_size(
        &self,
        from: usize,
        need: usize,
        capacity: usize,
        elastic: bool,
    ) -> usize {
        // Within a first ring: always granted (what the general rule below says too).
        let first = MIN_RING.min(capacity);
        if need <= first && from <= first {
            return first;
        }
        let want = fit(need, capacity);
        let floor = from.max(first);
        if want <= floor
            || (!(elastic && self.pressure) && self.in_use + (want - from) <= self.budget.limit)
        {
            want
        } else {
            floor
        }
    }

    /// A ring of exactly `size` bytes (contents unspecified), charged to the account.
    #[inline]
    pub(crate) fn take(&mut self, size: usize) -> Ring {
        self.charge(size);
        if let Some(c) = class(size) {
            if let Some(ring) = self.classes[c].pop() {
                self.idle -= ring.len();
                self.low[c] = self.low[c].min(self.classes[c].len());
                return ring;
            }
        }
        vec![0; size].into_boxed_slice()
    }

    /// Give a ring taken with [`take`](Self::take) back for reuse (or to the allocator
    /// when its class is full, or it is no ring size).
    #[inline]
    pub(crate) fn give(&mut self, ring: Ring) {
        self.uncharge(ring.len());
        let Some(c) = class(ring.len()) else { return };
        let kept = &mut self.classes[c];
        if (kept.len() + 1) * ring.len() <= self.bytes_per_class {
            self.idle += ring.len();
            kept.push(ring);
        }
    }

    /// A flight block from the pool (its contents unspecified), or a new one.
    #[inline]
    pub(crate) fn take_flight(&mut self) -> Box<Flight> {
        let flight = self
            .flights
            .pop()
            .unwrap_or_else(|| Box::new(Flight::EMPTY));
        self.low_flights = self.low_flights.min(self.flights.len());
        flight
    }

    /// Frees the idle rings and flight blocks that sat unused since the last call: in
    /// each class, as many as its fewest idle in between (the oldest first). The engine
    /// calls it once a second, so storage kept after a burst goes back after a quiet
    /// second, while a steady load keeps what it reuses.
    pub(crate) fn trim_idle(&mut self) {
        for (kept, low) in self.classes.iter_mut().zip(&mut self.low) {
            let unused = (*low).min(kept.len());
            if unused > 0 {
                let freed: usize = kept.drain(..unused).map(|r| r.len()).sum();
                self.idle -= freed;
                self.changed = true;
            }
            *low = kept.len();
        }
        let unused = self.low_flights.min(self.flights.len());
        self.flights.drain(..unused);
        self.low_flights = self.flights.len();
    }

    /// Keep `flight` for reuse, as many as a ring class's bytes hold, or free it.
    #[inline]
    pub(crate) fn give_flight(&mut self, flight: Box<Flight>) {
        if (self.flights.len() + 1) * size_of::<Flight>() <= self.bytes_per_class {
            self.flights.push(flight);
        }
    }

    /// Replace `ring` by a pooled ring of `size` bytes (a ring size from
    /// [`ring_size`](Self::ring_size)), moving the `keep` bytes that start at `*head`
    /// (wrapping) to its start; the old ring comes back to the pool.
    pub(crate) fn resize(&mut self, ring: &mut Ring, head: &mut usize, keep: usize, size: usize) {
        debug_assert!(keep <= size);
        let mut new = self.take(size);
        if keep > 0 {
            let first = keep.min(ring.len() - *head);
            new[..first].copy_from_slice(&ring[*head..*head + first]);
            new[first..keep].copy_from_slice(&ring[..keep - first]);
        }
        self.give(std::mem::replace(ring, new));
        *head = 0;
    }
}

/// The ring size for `need` bytes: a power of two, at least [`MIN_RING`], at most
/// `capacity`.
pub(crate) fn fit(need: usize, capacity: usize) -> usize {
    need.checked_next_power_of_two()
        .unwrap_or(need)
        .max(MIN_RING)
        .min(capacity)
}

/// A pool whose budget is counted in first rings: pressure from 8, the limit at 12, and
/// pressure ending below `low_rings` (tests).
#[cfg(test)]
pub(crate) fn small_pool(low_rings: usize) -> RingPool {
    let budget = MemoryBudget {
        low: low_rings * MIN_RING,
        pressure: 8 * MIN_RING,
        limit: 12 * MIN_RING,
    };
    RingPool::with_budget(DEFAULT_BYTES_PER_CLASS, budget)
}

/// Whether a ring of `size` bytes holding `len` should shrink: it is larger than the
/// smallest ring and at most a quarter full. Shrinking then copies at most a third of
/// what was consumed since it was last this size, so memory follows what is held at an
/// amortised constant cost per byte.
pub(crate) fn should_shrink(size: usize, len: usize) -> bool {
    size > MIN_RING && len <= size / 4
}

impl Default for RingPool {
    /// 4 MiB per class (see [`EngineConfig::buffer_pool`](crate::EngineConfig)).
    fn default() -> Self {
        RingPool::new(DEFAULT_BYTES_PER_CLASS)
    }
}

/// Idle ring bytes an engine keeps per size class unless configured otherwise.
pub(crate) const DEFAULT_BYTES_PER_CLASS: usize = 4 << 20;

#[inline]
fn class(size: usize) -> Option<usize> {
    if size == MIN_RING {
        // The first ring of every buffer, by far the most common size.
        return Some(0);
    }
    if size < MIN_RING || !size.is_power_of_two() {
        return None;
    }
    let c = (size / MIN_RING).trailing_zeros() as usize;
    (c < CLASSES).then_some(c)
}

/// `x mod size` for `x < 2 * size` (ring arithmetic without a division).
pub(crate) fn wrap(x: usize, size: usize) -> usize {
    if x >= size {
        x - size
    } else {
        x
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The first-ring shortcut of `ring_size` gives what the general rule gives.
    #[test]
    fn ring_size_first_ring_shortcut_agrees_with_the_rule() {
        fn rule(
            pool: &RingPool,
            from: usize,
            need: usize,
            capacity: usize,
            elastic: bool,
        ) -> usize {
            let want = fit(need, capacity);
            let floor = from.max(MIN_RING.min(capacity));
            if want <= floor
                || (!(elastic && pool.pressure) && pool.in_use + (want - from) <= pool.budget.limit)
            {
                want
            } else {
                floor
            }
        }
        let mut pressed = small_pool(1);
        let held: Vec<_> = (0..13).map(|_| pressed.take(MIN_RING)).collect();
        assert!(pressed.pressure());
        for pool in [&RingPool::default(), &pressed] {
            for capacity in [1, 100, 1024, 2048, 4096, 1 << 20] {
                for from in [0, 1, 1024, 2048, 4096] {
                    for need in (0..=5000).step_by(7).chain([2047, 2048, 2049]) {
                        for elastic in [false, true] {
                            assert_eq!(
                                pool.ring_size(from, need, capacity, elastic),
                                rule(pool, from, need, capacity, elastic),
                                "from {from} need {need} capacity {capacity}"
                            );
                        }
                    }
                }
            }
        }
        drop(held);
    }

    #[test]
    fn rings_are_reused_and_bounded() {
        let mut pool = RingPool::new(DEFAULT_BYTES_PER_CLASS);
        let a = pool.take(MIN_RING);
        assert_eq!(a.len(), MIN_RING);
        let ptr = a.as_ptr();
        pool.give(a);
        let b = pool.take(MIN_RING);
        assert_eq!(b.as_ptr(), ptr, "the drained ring comes back");
        pool.give(b);
        // Odd sizes are not pooled.
        let odd = pool.take(3000);
        pool.give(odd);
        assert_eq!(pool.take(3000).len(), 3000);
        // The pool keeps at most its bound per class.
        let many: Vec<_> = (0..4096).map(|_| pool.take(MIN_RING)).collect();
        many.into_iter().for_each(|r| pool.give(r));
        assert_eq!(pool.idle_bytes(), DEFAULT_BYTES_PER_CLASS);
    }

    #[test]
    fn idle_storage_unused_for_a_period_goes_back() {
        let mut pool = RingPool::default();
        let rings: Vec<_> = (0..10).map(|_| pool.take(MIN_RING)).collect();
        rings.into_iter().for_each(|r| pool.give(r));
        let flights: Vec<_> = (0..4).map(|_| pool.take_flight()).collect();
        flights.into_iter().for_each(|f| pool.give_flight(f));
        // Given back during this period: kept through its end.
        pool.trim_idle();
        assert_eq!((pool.idle_bytes(), pool.flights.len()), (10 * MIN_RING, 4));
        // Three rings and a flight block used in the next period: the rest go.
        let used: Vec<_> = (0..3).map(|_| pool.take(MIN_RING)).collect();
        used.into_iter().for_each(|r| pool.give(r));
        let f = pool.take_flight();
        pool.give_flight(f);
        pool.trim_idle();
        assert_eq!((pool.idle_bytes(), pool.flights.len()), (3 * MIN_RING, 1));
        // A quiet period: nothing is kept.
        pool.trim_idle();
        assert_eq!((pool.idle_bytes(), pool.flights.len()), (0, 0));
        assert_eq!(pool.in_use(), 0);
    }

    #[test]
    fn a_zero_sized_pool_keeps_nothing() {
        let mut pool = RingPool::new(0);
        let r = pool.take(MIN_RING);
        pool.give(r);
        assert_eq!(pool.idle_bytes(), 0);
    }

    #[test]
    fn resize_keeps_wrapped_bytes_in_order() {
        let mut pool = RingPool::default();
        let mut ring = pool.take(MIN_RING);
        ring[MIN_RING - 2..].copy_from_slice(b"ab");
        ring[..2].copy_from_slice(b"cd");
        let mut head = MIN_RING - 2;
        let size = pool.ring_size(MIN_RING, MIN_RING + 1, 1 << 20, false);
        pool.resize(&mut ring, &mut head, 4, size);
        assert_eq!((ring.len(), head), (2 * MIN_RING, 0));
        assert_eq!(&ring[..4], b"abcd");
        assert_eq!(pool.idle_bytes(), MIN_RING, "the old ring went back");
        assert_eq!(pool.in_use(), 2 * MIN_RING);
    }

    #[test]
    fn the_account_follows_rings_and_pressure_has_hysteresis() {
        let mut pool = small_pool(2);
        let big = pool.take(8 * MIN_RING);
        assert!(pool.pressure());
        assert_eq!(pool.counters().pressure_entered, 1);
        // Under pressure a send ring does not grow; a receive ring may, to the limit.
        assert_eq!(
            pool.ring_size(MIN_RING, 3 * MIN_RING, 1 << 20, true),
            MIN_RING
        );
        assert_eq!(
            pool.ring_size(MIN_RING, 3 * MIN_RING, 1 << 20, false),
            4 * MIN_RING
        );
        assert_eq!(
            pool.ring_size(MIN_RING, 8 * MIN_RING, 1 << 20, false),
            MIN_RING
        );
        // The first ring is always granted, shrinking always is.
        assert_eq!(pool.ring_size(0, 100, 1 << 20, true), MIN_RING);
        assert_eq!(pool.ring_size(8 * MIN_RING, 100, 1 << 20, true), MIN_RING);
        assert!(!pool.may_hold_out_of_order(1));
        let small = pool.take(2 * MIN_RING);
        pool.give(big);
        assert!(pool.pressure(), "still above low");
        pool.give(small);
        assert!(!pool.pressure());
        assert_eq!((pool.in_use(), pool.peak()), (0, 10 * MIN_RING));
        assert!(pool.may_hold_out_of_order(1));
    }
}
