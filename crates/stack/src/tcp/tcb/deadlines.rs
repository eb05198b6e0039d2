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
mod tests;
