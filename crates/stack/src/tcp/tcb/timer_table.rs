//! The connection's timers: one enum of timer kinds and one table of absolute deadlines.
//! What happens when a timer fires lives in `timers.rs`; this file only keeps time.
//!
//! Memory: the five timers every connection's data path or close arms are kept inline;
//! the four that only some connections ever arm (RACK's reordering timer, the persist
//! timer, keepalive, the application's timer) are kept out of line, allocated the first
//! time one of them is armed and kept until the connection goes, so an idle connection
//! that never armed one holds 48 bytes for its timers instead of 72. The out-of-line
//! part also carries the owner's other rarely set state (`X`, see
//! [`TimerTable::extra_mut`]), so that state costs no pointer of its own.

use crate::time::Instant;

/// The timers a connection runs. The first [`INLINE`] are kept inline.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Timer {
    /// Retransmission timeout (RFC 6298).
    Rto,
    /// Tail loss probe timeout (RFC 8985 §7.2).
    Tlp,
    /// Delayed ACK (§3.8.6.3).
    DelayedAck,
    /// TIME-WAIT end, or the FIN-WAIT-2 timeout.
    Linger,
    /// The user timeout or the orphan timeout: no progress for too long.
    GiveUp,
    /// RACK reordering timer (RFC 8985 §6.3).
    Reorder,
    /// Persist timer: zero-window probes and the SWS override (§3.8.6.1, §3.8.6.2.1).
    Persist,
    /// Keepalive idle time and probe interval (RFC 1122 §4.2.3.6).
    Keepalive,
    /// The application's one-shot timer.
    App,
}

impl Timer {
    const COUNT: usize = 9;
}

/// Timers kept inline: those before [`Timer::Reorder`].
const INLINE: usize = Timer::Reorder as usize;
/// Timers kept out of line.
const RARE: usize = Timer::COUNT - INLINE;

/// A deadline for each [`Timer`]; a stopped timer holds [`Instant::FAR_FUTURE`], a time
/// the engine never reaches, so "is it due" is one comparison.
#[derive(Clone)]
pub(super) struct TimerTable<X = ()> {
    inline: Deadlines<INLINE>,
    /// The rarely armed timers and the extra state; `None` until one of them is first
    /// armed or the extra state first set.
    rare: Option<Box<Rare<X>>>,
    /// When the owner's caller has promised to wake it ([`STOPPED`]: no promise): the
    /// engine's timer-wheel entry for the connection. [`set`](Self::set) says when a
    /// deadline falls before it.
    wake: Instant,
}

#[derive(Clone, Default)]
struct Rare<X> {
    deadlines: Deadlines<RARE>,
    extra: X,
}

impl<X> Default for TimerTable<X> {
    fn default() -> Self {
        TimerTable {
            inline: Deadlines::default(),
            rare: None,
            wake: STOPPED,
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
struct Deadlines<const N: usize>([Instant; N]);

impl<const N: usize> Default for Deadlines<N> {
    fn default() -> Self {
        Deadlines([STOPPED; N])
    }
}

impl<const N: usize> Deadlines<N> {
    /// The earliest deadline, [`STOPPED`] if none is armed.
    #[inline]
    fn earliest(&self) -> Instant {
        let mut at = STOPPED;
        for d in self.0 {
            at = at.min(d);
        }
        at
    }
}

const STOPPED: Instant = Instant::FAR_FUTURE;

impl<X: Default> TimerTable<X> {
    /// Bytes of the out-of-line part, while allocated.
    #[cfg(test)]
    pub(super) const RARE_BYTES: usize = std::mem::size_of::<Rare<X>>();

    /// The extra state, if it was ever set.
    #[inline]
    pub(super) fn extra(&self) -> Option<&X> {
        self.rare.as_ref().map(|r| &r.extra)
    }

    /// The extra state, if it was ever set, to change without allocating.
    #[inline]
    pub(super) fn extra_if_set(&mut self) -> Option<&mut X> {
        self.rare.as_mut().map(|r| &mut r.extra)
    }

    /// The extra state, allocating the out-of-line part (with `X::default()`) if needed.
    pub(super) fn extra_mut(&mut self) -> &mut X {
        &mut self.rare_mut().extra
    }

    fn rare_mut(&mut self) -> &mut Rare<X> {
        self.rare.get_or_insert_with(|| {
            Box::new(Rare {
                deadlines: Deadlines::default(),
                extra: X::default(),
            })
        })
    }

    /// The deadline of `timer`, [`STOPPED`] when it is not armed.
    #[inline]
    fn deadline(&self, timer: Timer) -> Instant {
        let i = timer as usize;
        if i < INLINE {
            self.inline.0[i]
        } else {
            self.rare
                .as_ref()
                .map_or(STOPPED, |r| r.deadlines.0[i - INLINE])
        }
    }

    /// Arm (or re-arm) `timer` to fire at `at`. When that is before the wake-up
    /// promised so far ([`wake`](Self::wake)), the promise moves to `at` and the result
    /// is true: the owner's caller has to arm its own timer earlier.
    #[inline]
    #[must_use = "a deadline before the promised wake-up needs an earlier one"]
    pub(super) fn set(&mut self, timer: Timer, at: Instant) -> bool {
        let i = timer as usize;
        if i < INLINE {
            self.inline.0[i] = at;
        } else {
            self.rare_mut().deadlines.0[i - INLINE] = at;
        }
        let earlier = at < self.wake;
        if earlier {
            self.wake = at;
        }
        earlier
    }

    /// When the owner is to be woken, [`STOPPED`] for never: no later than any deadline
    /// set since the last [`woke`](Self::woke), nor than any armed then. Early when a
    /// timer was stopped or moved later since.
    #[inline]
    pub(super) fn wake(&self) -> Instant {
        self.wake
    }

    /// The owner was woken (and its due timers handled): the next wake-up is the
    /// earliest armed deadline.
    #[inline]
    pub(super) fn woke(&mut self) {
        self.wake = self.next().unwrap_or(STOPPED);
    }

    #[inline]
    pub(super) fn stop(&mut self, timer: Timer) {
        let i = timer as usize;
        if i < INLINE {
            self.inline.0[i] = STOPPED;
        } else if let Some(rare) = self.rare.as_mut() {
            rare.deadlines.0[i - INLINE] = STOPPED;
        }
    }

    /// Stop every timer (the extra state stays).
    #[inline]
    pub(super) fn stop_all(&mut self) {
        self.inline = Deadlines::default();
        if let Some(rare) = self.rare.as_mut() {
            rare.deadlines = Deadlines::default();
        }
    }

    /// The deadline of `timer`, if it is armed.
    #[inline]
    pub(super) fn get(&self, timer: Timer) -> Option<Instant> {
        let at = self.deadline(timer);
        (at != STOPPED).then_some(at)
    }

    #[inline]
    pub(super) fn is_armed(&self, timer: Timer) -> bool {
        self.deadline(timer) != STOPPED
    }

    /// `timer` is due at `now` (it stays armed until stopped or set again).
    #[inline]
    pub(super) fn expired(&self, timer: Timer, now: Instant) -> bool {
        self.deadline(timer) <= now
    }

    /// `timer` is due at `now`: stop it and say so.
    #[inline]
    pub(super) fn take_expired(&mut self, timer: Timer, now: Instant) -> bool {
        let due = self.expired(timer, now);
        if due {
            self.stop(timer);
        }
        due
    }

    /// The earliest deadline of all armed timers.
    #[inline]
    pub(super) fn next(&self) -> Option<Instant> {
        let mut at = self.inline.earliest();
        if let Some(rare) = &self.rare {
            at = at.min(rare.deadlines.earliest());
        }
        (at != STOPPED).then_some(at)
    }

    /// Every deadline, in [`Timer`] order.
    fn all(&self) -> [Instant; Timer::COUNT] {
        let mut all = [STOPPED; Timer::COUNT];
        all[..INLINE].copy_from_slice(&self.inline.0);
        if let Some(rare) = &self.rare {
            all[INLINE..].copy_from_slice(&rare.deadlines.0);
        }
        all
    }
}

/// Tables are equal when their deadlines are, whether or not the out-of-line part is
/// allocated (the extra state is its owner's to compare).
impl<X: Default> PartialEq for TimerTable<X> {
    fn eq(&self, other: &Self) -> bool {
        self.all() == other.all()
    }
}

impl<X: Default> Eq for TimerTable<X> {}

impl<X: Default> std::fmt::Debug for TimerTable<X> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TimerTable")
            .field("deadlines", &self.all())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ALL: [Timer; Timer::COUNT] = [
        Timer::Rto,
        Timer::Tlp,
        Timer::DelayedAck,
        Timer::Linger,
        Timer::GiveUp,
        Timer::Reorder,
        Timer::Persist,
        Timer::Keepalive,
        Timer::App,
    ];

    #[test]
    fn the_rare_timers_take_no_storage_until_one_is_armed() {
        let mut t: TimerTable = TimerTable::default();
        for timer in &ALL[..INLINE] {
            let _ = t.set(*timer, ms(5));
        }
        t.stop(Timer::Keepalive);
        assert!(t.rare.is_none());
        let _ = t.set(Timer::App, ms(1));
        assert!(t.rare.is_some());
        assert_eq!(t.next(), Some(ms(1)));
        t.stop(Timer::App);
        assert_eq!(t.next(), Some(ms(5)));
        for timer in &ALL[..INLINE] {
            t.stop(*timer);
        }
        // Stopped timers compare equal whether or not the storage is still held.
        assert_eq!(t, TimerTable::default());
    }

    #[test]
    fn the_extra_state_shares_the_rare_part_and_outlives_stop_all() {
        let mut t: TimerTable<u32> = TimerTable::default();
        assert_eq!(t.extra(), None);
        let _ = t.set(Timer::Keepalive, ms(9));
        assert_eq!(t.extra(), Some(&0));
        *t.extra_mut() = 7;
        t.stop_all();
        assert_eq!(t.next(), None);
        assert_eq!(t.extra(), Some(&7));
    }

    fn ms(n: u64) -> Instant {
        Instant::from_millis(n)
    }

    #[test]
    fn a_new_table_has_nothing_armed() {
        let t: TimerTable = TimerTable::default();
        for timer in ALL {
            assert!(!t.is_armed(timer));
            assert_eq!(t.get(timer), None);
            assert!(!t.expired(timer, ms(1_000_000_000)));
        }
        assert_eq!(t.next(), None);
    }

    #[test]
    fn each_timer_keeps_its_own_deadline() {
        let mut t: TimerTable = TimerTable::default();
        for (i, timer) in ALL.into_iter().enumerate() {
            let _ = t.set(timer, ms(100 + i as u64));
        }
        for (i, timer) in ALL.into_iter().enumerate() {
            assert_eq!(t.get(timer), Some(ms(100 + i as u64)));
        }
        t.stop(Timer::DelayedAck);
        assert!(!t.is_armed(Timer::DelayedAck));
        assert!(t.is_armed(Timer::Keepalive));
        t.stop_all();
        assert_eq!(t, TimerTable::default());
    }

    #[test]
    fn expired_means_the_deadline_is_now_or_past() {
        let mut t: TimerTable = TimerTable::default();
        let _ = t.set(Timer::Rto, ms(50));
        assert!(!t.expired(Timer::Rto, ms(49)));
        assert!(t.expired(Timer::Rto, ms(50)));
        assert!(t.expired(Timer::Rto, ms(51)));
        assert!(!t.expired(Timer::Persist, ms(51)));
    }

    #[test]
    fn take_expired_stops_only_a_due_timer() {
        let mut t: TimerTable = TimerTable::default();
        let _ = t.set(Timer::Keepalive, ms(50));
        assert!(!t.take_expired(Timer::Keepalive, ms(49)));
        assert_eq!(t.get(Timer::Keepalive), Some(ms(50)));
        assert!(t.take_expired(Timer::Keepalive, ms(60)));
        assert!(!t.is_armed(Timer::Keepalive));
        assert!(!t.take_expired(Timer::Keepalive, ms(60)));
    }

    #[test]
    fn next_is_the_earliest_armed_deadline() {
        let mut t: TimerTable = TimerTable::default();
        let _ = t.set(Timer::App, ms(300));
        assert_eq!(t.next(), Some(ms(300)));
        let _ = t.set(Timer::Linger, ms(200));
        let _ = t.set(Timer::Rto, ms(250));
        assert_eq!(t.next(), Some(ms(200)));
        t.stop(Timer::Linger);
        assert_eq!(t.next(), Some(ms(250)));
        let _ = t.set(Timer::Rto, ms(400));
        assert_eq!(t.next(), Some(ms(300)));
        t.stop(Timer::App);
        t.stop(Timer::Rto);
        assert_eq!(t.next(), None);
    }
    #[test]
    fn a_deadline_before_the_wake_up_moves_it() {
        let mut t: TimerTable = TimerTable::default();
        assert_eq!(t.wake(), STOPPED);
        assert!(t.set(Timer::Rto, ms(200)));
        assert_eq!(t.wake(), ms(200));
        assert!(!t.set(Timer::Tlp, ms(250)), "later: the wake-up holds");
        assert!(t.set(Timer::DelayedAck, ms(40)));
        t.stop(Timer::DelayedAck);
        assert_eq!(t.wake(), ms(40), "early now: stopping does not move it");
        t.woke();
        assert_eq!(t.wake(), ms(200));
        t.stop_all();
        t.woke();
        assert_eq!(t.wake(), STOPPED);
    }

    proptest::proptest! {
        /// Whatever is set, stopped or woken for, the wake-up is never after the
        /// earliest armed deadline, and `set` says exactly when it moved.
        #[test]
        fn the_wake_up_is_never_late(
            ops in proptest::collection::vec((0u8..4, 0usize..Timer::COUNT, 0u64..1000), 1..64)
        ) {
            let mut t: TimerTable = TimerTable::default();
            for (op, timer, at) in ops {
                let timer = ALL[timer];
                match op {
                    0 | 1 => {
                        let before = t.wake();
                        let moved = t.set(timer, ms(at));
                        proptest::prop_assert_eq!(moved, ms(at) < before);
                        proptest::prop_assert_eq!(t.wake(), before.min(ms(at)));
                    }
                    2 => t.stop(timer),
                    _ => {
                        t.woke();
                        proptest::prop_assert_eq!(t.wake(), t.next().unwrap_or(STOPPED));
                    }
                }
                proptest::prop_assert!(t.wake() <= t.next().unwrap_or(STOPPED));
            }
        }
    }
}
