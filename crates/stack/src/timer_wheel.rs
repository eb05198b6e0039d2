//! The per-core timer wheel: a hashed timing wheel (Varghese & Lauck, "Hashed and
//! Hierarchical Timing Wheels", scheme 6) with a coarse second level and an overflow
//! list, holding every TCP timer of one worker.
//!
//! There is no cancel. The owner of a timer (a connection block) keeps the authoritative
//! deadline in its own state; when the wheel hands back an item whose deadline has since
//! moved or been cleared, the owner ignores it (lazy cancellation). Rescheduling is just
//! another [`TimerWheel::schedule`].
//!
//! Design:
//! - Time is cut into ticks of `tick`, counted from the clock's epoch. An item due within
//!   one revolution (`slots` ticks) lives in slot `tick mod slots`, next to its exact
//!   deadline, so every slot holds the items of exactly one tick.
//! - Further ahead, time is cut into epochs of half a revolution. An item due within
//!   [`FAR_BUCKETS`] epochs waits in the bucket of its epoch (scheme 7's second level);
//!   when the wheel enters an epoch, the bucket of the next one, whose items have just
//!   come within one revolution, is emptied into the slots. So a far timer (60 s on
//!   a wheel of 8,192 1-ms slots) is moved once, not looked at every half
//!   revolution.
//! - Items beyond the buckets wait in an overflow list, swept every `FAR_BUCKETS / 2`
//!   epochs into the buckets (and after a jump that makes one of them due).
//! - [`TimerWheel::expire`] visits the occupied slots (found in a bitmap) of the ticks
//!   between the previous call and `now` — at most one revolution, however long the
//!   jump — and fires exactly the items whose deadline is `<= now`: never early, and
//!   never late by more than the gap between two calls (the required bound is one tick).
//! - [`TimerWheel::next_deadline`] is O(1): the earliest deadline is cached, lowered on
//!   schedule and recomputed only after something fired, from the overflow's minimum and
//!   the first occupied slot (found in a bitmap, one word per 64 slots), whose items are
//!   all due at that same tick and about to be visited anyway.
//! - Slots and the overflow are `Vec`s whose capacity is kept (items leave by
//!   `swap_remove`), so scheduling allocates nothing in steady state. A slot that
//!   empties when it fires gives its buffer to a spare list, and an empty slot without
//!   one takes a spare before it allocates: deadlines drift over the slots (a server's
//!   timers land wherever its loop turns fall), and without the recycling every slot
//!   would allocate and grow its own buffer the first time one lands in it, once for
//!   each of the 8,192 slots. The buffers in use are then about as many as the slots
//!   occupied at once.
//! - What the wheel keeps for reuse is bounded: the spare list holds at most
//!   [`SPARE_BUFFERS`] buffers of at most [`KEPT_SLOT_ENTRIES`] entries, and a drained
//!   bucket or overflow keeps its buffer only up to [`KEPT_FAR_ENTRIES`]. A burst of
//!   timers (a flood of connections) leaves no large buffers behind once it has fired.

use std::time::Duration;

use crate::time::Instant;

/// Buckets of the second level, one per epoch (half a revolution): with 8,192 slots of
/// 1 ms, 64 buckets cover 262 s.
const FAR_BUCKETS: u64 = 64;

/// Most empty slot buffers kept on the spare list.
const SPARE_BUFFERS: usize = 1024;
/// Largest slot buffer (in entries) kept for reuse when its slot empties.
const KEPT_SLOT_ENTRIES: usize = 64;
/// Largest bucket or overflow buffer (in entries) kept when it is drained.
const KEPT_FAR_ENTRIES: usize = 64;

struct Entry<T> {
    /// Exact deadline, `Instant::as_micros`.
    deadline: u64,
    item: T,
}

/// A hashed timing wheel of items of type `T` (typically a connection handle and a timer
/// kind). See the module docs.
pub struct TimerWheel<T> {
    tick_us: u64,
    mask: usize,
    /// Slot `i` holds the items of the one tick `t` in `cur_tick..cur_tick + slots` with
    /// `t mod slots == i`, plus, in `cur_tick`'s slot, items scheduled in the past.
    slots: Vec<Vec<Entry<T>>>,
    /// Bit `i` set iff slot `i` is non-empty.
    occupied: Vec<u64>,
    /// Empty buffers that slots gave back when they emptied, for slots without one.
    spare: Vec<Vec<Entry<T>>>,
    /// Ticks per epoch: half a revolution.
    half: u64,
    /// Bucket `e mod FAR_BUCKETS` holds the items of epoch `e`, for epochs
    /// `cur_epoch + 2 .. cur_epoch + FAR_BUCKETS`; epoch `cur_epoch + 1`'s were moved to
    /// the slots when the wheel entered `cur_epoch`.
    far: Vec<Vec<Entry<T>>>,
    /// Smallest deadline in each bucket, `u64::MAX` when empty.
    far_min: Vec<u64>,
    /// Bit `b` set iff bucket `b` is non-empty.
    far_occupied: u64,
    /// The epoch whose entry moved the buckets last (`cur_tick / half` after each
    /// `expire`).
    swept_epoch: u64,
    /// Items at least `FAR_BUCKETS` epochs ahead when they were scheduled or last swept.
    overflow: Vec<Entry<T>>,
    /// Smallest deadline in `overflow`, `u64::MAX` when empty.
    overflow_min: u64,
    /// `cur_tick` at or after which the next epoch begins (and the buckets move).
    next_sweep: u64,
    /// Epoch at or after which the overflow is swept next.
    next_overflow_sweep: u64,
    /// Tick of the latest `now` seen (by `new` or `expire`).
    cur_tick: u64,
    /// First µs of the tick after `cur_tick`: until `now` reaches it the wheel has
    /// nothing to move.
    tick_end: u64,
    /// Earliest pending deadline in µs (exact), `u64::MAX` when empty.
    earliest: u64,
    len: usize,
}

impl<T> TimerWheel<T> {
    /// A wheel starting at `now` with `slots` slots of `tick` each. `slots` is rounded up
    /// to a power of two (at least 2) and `tick` to at least 1 µs. Deadlines any distance
    /// ahead are accepted; one revolution (`tick * slots`, e.g. 1 ms × 1024) should cover
    /// the common timers (retransmission, delayed ACK) so that few go through the overflow.
    pub fn new(now: Instant, tick: Duration, slots: usize) -> Self {
        let n = slots.max(2).next_power_of_two();
        let tick_us = u64::try_from(tick.as_micros()).unwrap_or(u64::MAX).max(1);
        let now = now.as_micros();
        let cur_tick = now / tick_us;
        let half = (n as u64) / 2;
        let epoch = cur_tick / half;
        TimerWheel {
            tick_us,
            mask: n - 1,
            slots: (0..n).map(|_| Vec::new()).collect(),
            occupied: vec![0; n.div_ceil(64)],
            spare: Vec::new(),
            half,
            far: (0..FAR_BUCKETS).map(|_| Vec::new()).collect(),
            far_min: vec![u64::MAX; FAR_BUCKETS as usize],
            far_occupied: 0,
            swept_epoch: epoch,
            overflow: Vec::new(),
            overflow_min: u64::MAX,
            next_sweep: (epoch + 1) * half,
            next_overflow_sweep: epoch + FAR_BUCKETS / 2,
            cur_tick,
            tick_end: (cur_tick + 1).saturating_mul(tick_us),
            earliest: u64::MAX,
            len: 0,
        }
    }

    /// Number of pending items, stale ones included.
    #[cfg(any(test, feature = "internals"))]
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether no item is pending, stale ones included.
    #[cfg(any(test, feature = "internals"))]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    fn slot_of(&self, tick: u64) -> usize {
        // Only the low bits matter: the truncation is the hash.
        (tick as usize) & self.mask
    }

    fn revolution(&self) -> u64 {
        self.slots.len() as u64
    }

    fn push_slot(&mut self, tick: u64, entry: Entry<T>) {
        let slot = self.slot_of(tick);
        let entries = &mut self.slots[slot];
        if entries.capacity() == 0 {
            if let Some(buffer) = self.spare.pop() {
                *entries = buffer;
            }
        }
        entries.push(entry);
        self.occupied[slot / 64] |= 1 << (slot % 64);
    }

    /// Keeps the empty buffer of a slot that emptied for the next slot that needs one,
    /// within the bounds in the module docs; frees it otherwise.
    fn retire(&mut self, buffer: Vec<Entry<T>>) {
        if self.spare.len() < SPARE_BUFFERS && buffer.capacity() <= KEPT_SLOT_ENTRIES {
            self.spare.push(buffer);
        }
    }

    /// Queues `item` to fire at `deadline`. A deadline in the past fires on the next
    /// [`expire`](Self::expire).
    pub fn schedule(&mut self, deadline: Instant, item: T) {
        let deadline = deadline.as_micros();
        self.place(Entry { deadline, item });
        self.len += 1;
        self.earliest = self.earliest.min(deadline);
    }

    /// Puts `entry` where its deadline belongs from `cur_tick`: a slot within one
    /// revolution, else its epoch's bucket, else the overflow. Needs `swept_epoch` to be
    /// `cur_tick`'s epoch (so that every bucket it may pick is still to be moved).
    #[inline]
    fn place(&mut self, entry: Entry<T>) {
        let tick = (entry.deadline / self.tick_us).max(self.cur_tick);
        if tick - self.cur_tick < self.revolution() {
            self.push_slot(tick, entry);
        } else {
            self.place_far(tick, entry);
        }
    }

    /// [`place`](Self::place) for a `tick` at least one revolution ahead: out of line, so
    /// that the common near timer inlines to a slot push.
    #[inline(never)]
    fn place_far(&mut self, tick: u64, entry: Entry<T>) {
        // Here tick >= cur_tick + 2 * half, so its epoch is at least swept_epoch + 2.
        let epoch = tick / self.half;
        if epoch < self.swept_epoch + FAR_BUCKETS {
            let b = (epoch % FAR_BUCKETS) as usize;
            self.far_min[b] = self.far_min[b].min(entry.deadline);
            self.far_occupied |= 1 << b;
            self.far[b].push(entry);
        } else {
            self.overflow_min = self.overflow_min.min(entry.deadline);
            self.overflow.push(entry);
        }
    }

    /// Fires `entry` if it is due by `now`, else [`place`](Self::place)s it.
    fn fire_or_place(&mut self, entry: Entry<T>, now: u64, out: &mut Vec<T>) {
        if entry.deadline <= now {
            out.push(entry.item);
            self.len -= 1;
        } else {
            self.place(entry);
        }
    }

    /// Appends to `out` every item whose deadline is `<= now`, and advances the wheel.
    ///
    /// Cost: the bitmap words of the ticks elapsed since the previous call (at most one
    /// revolution) plus the occupied slots among them and the items fired, plus a sweep of the overflow once per half
    /// revolution. Time never goes backwards; a `now` earlier than a previous call's only
    /// fires what is due by it in the current slot and the overflow.
    #[inline]
    pub fn expire(&mut self, now: Instant, out: &mut Vec<T>) {
        if !self.quiet(now) {
            self.expire_due(now.as_micros(), out);
        }
    }

    /// Whether [`expire`](Self::expire) at `now` would do nothing: nothing is due (the
    /// cached earliest deadline is exact) and `now` is still in the current tick, so no
    /// slot or bucket moves. One comparison pair, inlined into the caller's loop turn.
    #[inline]
    pub fn quiet(&self, now: Instant) -> bool {
        let now = now.as_micros();
        now < self.earliest && now < self.tick_end
    }

    #[inline(never)]
    fn expire_due(&mut self, now: u64, out: &mut Vec<T>) {
        if now < self.earliest {
            // Nothing is due, but far items still move to their slots on schedule,
            // keeping sweeps to one per half revolution.
            self.advance_to(now);
            if self.cur_tick >= self.next_sweep {
                self.sweep(now, out, false);
            }
            return;
        }
        let now_tick = (now / self.tick_us).max(self.cur_tick);
        if self.far_occupied != 0 && self.first_far_min() <= now {
            // A jump past a bucket's deadline: its items are due now, not when their
            // bucket comes within a revolution.
            self.sweep(now, out, true);
        }
        // Ticks `cur_tick..=now_tick`; the current one was only partly processed before.
        // Their slots run from `cur_tick`'s for `visits` slots, wrapping at most once:
        // only the occupied ones are visited, found in the bitmap a word (64 slots) at a
        // time (a loop turn of a busy server spans tens of ticks, mostly empty).
        let visits = (now_tick - self.cur_tick).min(self.mask as u64) + 1;
        let mut i = 0;
        while i < visits {
            let from = self.slot_of(self.cur_tick + i);
            let to = (from as u64 + (visits - i)).min(self.revolution()) as usize;
            let Some(slot) = self.first_occupied(from, to) else {
                i += (to - from) as u64;
                continue;
            };
            // The tick offset of `slot` from `cur_tick`; the next search starts after it.
            let at = i + (slot - from) as u64;
            debug_assert_eq!(self.slot_of(self.cur_tick + at), slot);
            i = at + 1;
            let entries = &mut self.slots[slot];
            if self.cur_tick + at < now_tick {
                // A tick wholly past: every item of the slot is due (it holds that one
                // tick's, and the current slot's past ones). Moved out in one pass,
                // without the per-item check and swap.
                self.len -= entries.len();
                out.extend(entries.drain(..).map(|e| e.item));
                self.occupied[slot / 64] &= !(1 << (slot % 64));
                let buffer = std::mem::take(entries);
                self.retire(buffer);
                continue;
            }
            let mut j = 0;
            while j < entries.len() {
                if entries[j].deadline <= now {
                    let e = entries.swap_remove(j);
                    out.push(e.item);
                    self.len -= 1;
                } else {
                    j += 1;
                }
            }
            if entries.is_empty() {
                self.occupied[slot / 64] &= !(1 << (slot % 64));
                let buffer = std::mem::take(entries);
                self.retire(buffer);
            }
        }
        self.advance_to(now);
        if self.overflow_min <= now || self.cur_tick >= self.next_sweep {
            self.sweep(now, out, false);
        }
        self.recompute_earliest();
    }

    fn advance_to(&mut self, now: u64) {
        if now >= self.tick_end {
            self.cur_tick = now / self.tick_us;
            self.tick_end = (self.cur_tick + 1).saturating_mul(self.tick_us);
        }
    }

    /// Enters `cur_tick`'s epoch: empties the buckets of the epochs that have come within
    /// one revolution (all of them after a jump of `FAR_BUCKETS` epochs or more, or with
    /// `all`), firing what is due by `now`; every `FAR_BUCKETS / 2` epochs, or when an
    /// overflow item is due, sweeps the overflow too.
    fn sweep(&mut self, now: u64, out: &mut Vec<T>, all: bool) {
        let epoch = self.cur_tick / self.half;
        // Buckets of epochs up to swept_epoch + 1 were moved already.
        let from = self.swept_epoch + 2;
        let count = if all {
            FAR_BUCKETS
        } else {
            (epoch + 2).saturating_sub(from).min(FAR_BUCKETS)
        };
        self.swept_epoch = epoch;
        for k in 0..count {
            let b = ((from + k) % FAR_BUCKETS) as usize;
            if self.far_occupied & (1 << b) == 0 {
                continue;
            }
            self.far_occupied &= !(1 << b);
            self.far_min[b] = u64::MAX;
            // Taken out so that placing can refill the bucket; its buffer goes back.
            let mut items = std::mem::take(&mut self.far[b]);
            for e in items.drain(..) {
                self.fire_or_place(e, now, out);
            }
            if self.far[b].is_empty() && items.capacity() <= KEPT_FAR_ENTRIES {
                self.far[b] = items;
            }
        }
        if self.overflow_min <= now || epoch >= self.next_overflow_sweep {
            let mut items = std::mem::take(&mut self.overflow);
            self.overflow_min = u64::MAX;
            for e in items.drain(..) {
                self.fire_or_place(e, now, out);
            }
            if self.overflow.is_empty() && items.capacity() <= KEPT_FAR_ENTRIES {
                self.overflow = items;
            }
            self.next_overflow_sweep = epoch + FAR_BUCKETS / 2;
        }
        self.next_sweep = (epoch + 1) * self.half;
    }

    /// The smallest deadline in the buckets: the first non-empty bucket's, counting from
    /// the epoch after next (buckets hold consecutive later epochs in order).
    fn first_far_min(&self) -> u64 {
        if self.far_occupied == 0 {
            return u64::MAX;
        }
        let start = ((self.swept_epoch + 2) % FAR_BUCKETS) as u32;
        let b = self.far_occupied.rotate_right(start).trailing_zeros();
        self.far_min[((start + b) % FAR_BUCKETS as u32) as usize]
    }

    /// Index of the first occupied slot in `lo..hi`.
    fn first_occupied(&self, lo: usize, hi: usize) -> Option<usize> {
        let mut i = lo;
        while i < hi {
            let word = self.occupied[i / 64] >> (i % 64);
            if word != 0 {
                let p = i + word.trailing_zeros() as usize;
                return (p < hi).then_some(p);
            }
            i = (i / 64 + 1) * 64;
        }
        None
    }

    /// The earliest deadline is the overflow's minimum or lies in the first occupied slot
    /// after `cur_tick` (circularly): slots hold one tick each, in order.
    fn recompute_earliest(&mut self) {
        let start = self.slot_of(self.cur_tick);
        let first = self
            .first_occupied(start, self.slots.len())
            .or_else(|| self.first_occupied(0, start));
        let in_slots = first.map_or(u64::MAX, |s| {
            self.slots[s]
                .iter()
                .map(|e| e.deadline)
                .min()
                .unwrap_or(u64::MAX)
        });
        self.earliest = in_slots.min(self.first_far_min()).min(self.overflow_min);
    }

    /// The earliest pending deadline, or `None` when the wheel is empty. Exact (stale
    /// items included) and O(1). After [`expire`](Self::expire)`(now)` it is later than
    /// `now`, so an engine that sleeps until it does not spin.
    pub fn next_deadline(&self) -> Option<Instant> {
        if self.len == 0 {
            None
        } else {
            Some(Instant::from_micros(self.earliest))
        }
    }
}

impl<T> std::fmt::Debug for TimerWheel<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TimerWheel")
            .field("tick_us", &self.tick_us)
            .field("slots", &self.slots.len())
            .field("len", &self.len)
            .field("far", &self.far.iter().map(Vec::len).sum::<usize>())
            .field("overflow", &self.overflow.len())
            .field("next_deadline", &self.next_deadline())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn ms(n: u64) -> Instant {
        Instant::from_millis(n)
    }

    fn wheel(slots: usize) -> TimerWheel<u32> {
        TimerWheel::new(ms(0), Duration::from_millis(1), slots)
    }

    #[test]
    fn fires_at_deadline_not_before() {
        let mut w = wheel(8);
        let mut out = Vec::new();
        w.schedule(ms(5), 1);
        w.schedule(Instant::from_micros(5_500), 2);
        assert_eq!(w.next_deadline(), Some(ms(5)));
        w.expire(Instant::from_micros(4_999), &mut out);
        assert!(out.is_empty());
        w.expire(ms(5), &mut out);
        assert_eq!(out, vec![1]);
        assert_eq!(w.next_deadline(), Some(Instant::from_micros(5_500)));
        w.expire(Instant::from_micros(5_499), &mut out);
        assert_eq!(out, vec![1]);
        w.expire(Instant::from_micros(5_500), &mut out);
        assert_eq!(out, vec![1, 2]);
        assert!(w.is_empty());
        assert_eq!(w.next_deadline(), None);
    }

    #[test]
    fn past_deadline_fires_on_next_expire() {
        let mut w = wheel(8);
        let mut out = Vec::new();
        w.expire(ms(100), &mut out);
        w.schedule(ms(3), 7);
        assert_eq!(w.next_deadline(), Some(ms(3)));
        w.expire(ms(100), &mut out);
        assert_eq!(out, vec![7]);
    }

    #[test]
    fn beyond_one_revolution() {
        // 8 slots of 1 ms: a 20 ms deadline shares slot 4 with a 4 ms one.
        let mut w = wheel(8);
        let mut out = Vec::new();
        w.schedule(ms(20), 20);
        w.schedule(ms(4), 4);
        for t in 0..=19 {
            w.expire(ms(t), &mut out);
        }
        assert_eq!(out, vec![4]);
        assert_eq!(w.next_deadline(), Some(ms(20)));
        w.expire(ms(20), &mut out);
        assert_eq!(out, vec![4, 20]);
    }

    #[test]
    fn far_items_wait_in_their_bucket_then_move_to_slots() {
        // 8 slots of 1 ms: epochs of 4 ms, buckets up to 64 epochs (256 ms) ahead.
        let mut w = wheel(8);
        let mut out = Vec::new();
        w.schedule(ms(100), 1);
        let in_buckets = |w: &TimerWheel<u32>| w.far.iter().map(Vec::len).sum::<usize>();
        assert_eq!((in_buckets(&w), w.overflow.len()), (1, 0));
        // It stays in its bucket (epoch 25) until the wheel enters epoch 24, then moves
        // to its slot, once.
        for t in 0..96 {
            w.expire(ms(t), &mut out);
            assert_eq!(in_buckets(&w), 1, "at {t} ms");
        }
        w.expire(ms(96), &mut out);
        assert_eq!(in_buckets(&w), 0);
        assert!(out.is_empty());
        assert_eq!(w.next_deadline(), Some(ms(100)));
        w.expire(ms(100), &mut out);
        assert_eq!(out, vec![1]);
    }

    #[test]
    fn very_far_items_go_through_the_overflow() {
        let mut w = wheel(8);
        let mut out = Vec::new();
        w.schedule(ms(1_000), 1);
        w.schedule(ms(300), 2);
        assert_eq!(w.overflow.len(), 2);
        assert_eq!(w.next_deadline(), Some(ms(300)));
        for t in 0..1_000 {
            w.expire(ms(t), &mut out);
            assert_eq!(
                w.next_deadline(),
                Some(if t < 300 { ms(300) } else { ms(1_000) })
            );
        }
        assert_eq!(out, vec![2]);
        assert!(w.overflow.is_empty());
        w.expire(ms(1_000), &mut out);
        assert_eq!(out, vec![2, 1]);
    }

    #[test]
    fn a_jump_into_a_far_bucket_fires_it() {
        let mut w = wheel(8);
        let mut out = Vec::new();
        w.schedule(ms(50), 1);
        w.schedule(ms(200), 2);
        assert_eq!(w.next_deadline(), Some(ms(50)));
        w.expire(ms(60), &mut out);
        assert_eq!(out, vec![1]);
        assert_eq!(w.next_deadline(), Some(ms(200)));
        w.expire(ms(1_000), &mut out);
        assert_eq!(out, vec![1, 2]);
        assert!(w.is_empty());
    }

    #[test]
    fn huge_jump_fires_everything_due_once() {
        let mut w = wheel(16);
        let mut out = Vec::new();
        for i in 0..100u32 {
            w.schedule(ms(u64::from(i) * 37), i);
        }
        w.schedule(ms(10_000_000), 1000);
        w.expire(ms(5_000_000), &mut out);
        out.sort_unstable();
        assert_eq!(out, (0..100).collect::<Vec<_>>());
        assert_eq!(w.len(), 1);
        assert_eq!(w.next_deadline(), Some(ms(10_000_000)));
    }

    #[test]
    fn slots_are_reused_without_growth() {
        let mut w = wheel(4);
        let mut out = Vec::new();
        for round in 0..10u64 {
            for i in 0..16 {
                w.schedule(ms(round * 10 + i % 4), 0);
            }
            w.expire(ms(round * 10 + 5), &mut out);
        }
        assert_eq!(out.len(), 160);
        assert!(w.slots.iter().all(|s| s.capacity() <= 16));
    }

    #[test]
    fn an_emptied_slot_gives_its_buffer_to_the_next_slot_used() {
        let mut w = wheel(64);
        let mut out = Vec::new();
        for i in 0..10 {
            w.schedule(ms(1), i);
        }
        w.expire(ms(1), &mut out);
        assert_eq!(out.len(), 10);
        assert_eq!((w.slots[1].capacity(), w.spare.len()), (0, 1));
        let capacity = w.spare[0].capacity();
        assert!(capacity >= 10);
        w.schedule(ms(7), 10);
        assert_eq!((w.slots[7].capacity(), w.spare.len()), (capacity, 0));
        // A slot that still has a buffer keeps it.
        w.schedule(ms(7), 11);
        assert_eq!(w.slots[7].capacity(), capacity);
    }

    /// A burst of timers, near and far, leaves no large buffers behind once it fired:
    /// what the wheel keeps for reuse stays within its bounds.
    #[test]
    fn a_burst_leaves_only_bounded_buffers_behind() {
        let mut w = wheel(64);
        let mut out = Vec::new();
        let n = 20 * KEPT_FAR_ENTRIES as u32;
        for i in 0..n {
            // Into a few slots, and far ahead into the buckets and the overflow.
            w.schedule(ms(1 + u64::from(i % 4)), i);
            w.schedule(ms(200 + u64::from(i % 3)), i);
            w.schedule(ms(5_000 + u64::from(i % 5)), i);
        }
        w.expire(ms(10_000), &mut out);
        assert_eq!(out.len(), 3 * n as usize);
        assert!(w.is_empty());
        let kept_slots = w.slots.iter().chain(&w.spare).map(Vec::capacity);
        assert!(kept_slots.clone().all(|c| c <= KEPT_SLOT_ENTRIES));
        assert!(w.spare.len() <= SPARE_BUFFERS);
        let kept_far = w.far.iter().chain([&w.overflow]).map(Vec::capacity);
        assert!(kept_far.clone().all(|c| c <= KEPT_FAR_ENTRIES));
    }

    #[derive(Debug, Clone)]
    enum Op {
        Schedule(i64),
        Advance(u64),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            // Deadlines relative to now: some in the past, many within a few revolutions.
            3 => (-2_000i64..40_000).prop_map(Op::Schedule),
            1 => (0i64..5_000_000).prop_map(Op::Schedule),
            2 => (0u64..3_000).prop_map(Op::Advance),
            1 => (0u64..200_000).prop_map(Op::Advance),
        ]
    }

    proptest! {
        #[test]
        fn every_item_fires_once_on_time(
            ops in proptest::collection::vec(op(), 1..200),
            slots_log in 0u32..9,
            tick_us in 1u64..2_000,
        ) {
            let start = Instant::from_micros(1_000_000);
            let mut w = TimerWheel::new(start, Duration::from_micros(tick_us), 1 << slots_log);
            let mut now = start;
            let mut pending: Vec<(u32, Instant)> = Vec::new();
            let mut fired: Vec<Option<Instant>> = Vec::new();
            let mut out = Vec::new();
            let mut check = |w: &mut TimerWheel<u32>, now: Instant,
                             pending: &mut Vec<(u32, Instant)>,
                             fired: &mut Vec<Option<Instant>>| -> Result<(), TestCaseError> {
                out.clear();
                w.expire(now, &mut out);
                for &id in &out {
                    let slot = &mut fired[id as usize];
                    prop_assert!(slot.is_none(), "item {} fired twice", id);
                    *slot = Some(now);
                }
                for &(id, deadline) in pending.iter() {
                    match fired[id as usize] {
                        Some(_) => prop_assert!(deadline <= now, "item {} early", id),
                        // Exact wheel: anything due must have fired (stronger than the
                        // required "at most one tick late").
                        None => prop_assert!(deadline > now, "item {} late", id),
                    }
                }
                pending.retain(|(id, _)| fired[*id as usize].is_none());
                prop_assert_eq!(w.len(), pending.len());
                let min = pending.iter().map(|p| p.1).min();
                prop_assert_eq!(w.next_deadline(), min);
                if let Some(next) = w.next_deadline() {
                    prop_assert!(next > now);
                }
                Ok(())
            };
            for op in ops {
                match op {
                    Op::Schedule(off) => {
                        let deadline = if off < 0 {
                            now - Duration::from_micros(off.unsigned_abs())
                        } else {
                            now + Duration::from_micros(off as u64)
                        };
                        let id = fired.len() as u32;
                        fired.push(None);
                        pending.push((id, deadline));
                        w.schedule(deadline, id);
                        let min = pending.iter().map(|p| p.1).min();
                        prop_assert_eq!(w.next_deadline(), min);
                    }
                    Op::Advance(d) => {
                        now += Duration::from_micros(d);
                        check(&mut w, now, &mut pending, &mut fired)?;
                    }
                }
            }
            now += Duration::from_secs(10_000);
            check(&mut w, now, &mut pending, &mut fired)?;
            prop_assert!(fired.iter().all(|f| f.is_some()));
            prop_assert!(w.is_empty());
        }
    }
}
