//! Time as the engine sees it: a monotonic [`Instant`] in microseconds and the [`Clock`]
//! the engine is given. The TCP state machine never reads a clock; the engine reads its
//! clock once per loop turn and passes `now` down, so tests can run on virtual time.

use std::cell::Cell;
use std::fmt;
use std::num::NonZeroU64;
use std::ops::{Add, AddAssign, Sub};
use std::rc::Rc;
use std::time::Duration;

/// A point in time, in microseconds since an arbitrary epoch chosen by the clock.
///
/// Kept as the count plus one in a `NonZeroU64`, so that `Option<Instant>` (and an
/// `Option` of a struct holding one) costs no more than an `Instant`: every connection
/// keeps several. Differences and comparisons are unaffected by the offset.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Instant(NonZeroU64);

impl Default for Instant {
    fn default() -> Self {
        Instant::ZERO
    }
}

impl Instant {
    /// The clock's epoch.
    pub const ZERO: Instant = Instant(NonZeroU64::MIN);
    /// A time later than any the engine will reach; used as "no deadline".
    pub const FAR_FUTURE: Instant = Instant::from_micros(u64::MAX / 2);

    /// `us` microseconds after the epoch.
    #[inline]
    pub const fn from_micros(us: u64) -> Instant {
        Instant(NonZeroU64::MIN.saturating_add(us))
    }
    /// `ms` milliseconds after the epoch.
    pub const fn from_millis(ms: u64) -> Instant {
        Instant::from_micros(ms * 1000)
    }
    /// `us` microseconds later (saturating).
    #[inline]
    pub const fn plus_micros(self, us: u64) -> Instant {
        Instant(self.0.saturating_add(us))
    }
    /// `us` microseconds earlier, or the epoch.
    #[inline]
    const fn minus_micros(self, us: u64) -> Instant {
        Instant::from_micros(self.as_micros().saturating_sub(us))
    }
    /// Microseconds since the epoch.
    #[inline]
    pub const fn as_micros(self) -> u64 {
        self.0.get() - 1
    }
    /// Milliseconds since the epoch.
    pub const fn as_millis(self) -> u64 {
        self.as_micros() / 1000
    }
    /// `self - earlier` in microseconds, or zero when `earlier` is later.
    #[inline]
    pub const fn micros_since(self, earlier: Instant) -> u64 {
        self.0.get().saturating_sub(earlier.0.get())
    }
    /// `self - earlier`, or zero when `earlier` is later.
    #[inline]
    pub fn saturating_duration_since(self, earlier: Instant) -> Duration {
        Duration::from_micros(self.0.get().saturating_sub(earlier.0.get()))
    }
}

impl fmt::Debug for Instant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let us = self.as_micros();
        write!(f, "{}.{:06}s", us / 1_000_000, us % 1_000_000)
    }
}

/// `d` in whole microseconds, saturating far beyond any time the engine reaches. In
/// 64-bit arithmetic (`Duration::as_micros` goes through `u128`): this runs several
/// times per segment.
#[inline]
pub(crate) fn micros(d: Duration) -> u64 {
    d.as_secs()
        .checked_mul(1_000_000)
        .and_then(|us| us.checked_add(u64::from(d.subsec_micros())))
        .unwrap_or(u64::MAX / 4)
}

impl Add<Duration> for Instant {
    type Output = Instant;
    #[inline]
    fn add(self, d: Duration) -> Instant {
        self.plus_micros(micros(d))
    }
}

impl AddAssign<Duration> for Instant {
    fn add_assign(&mut self, d: Duration) {
        *self = *self + d;
    }
}

impl Sub<Duration> for Instant {
    type Output = Instant;
    fn sub(self, d: Duration) -> Instant {
        self.minus_micros(micros(d))
    }
}

impl Sub<Instant> for Instant {
    type Output = Duration;
    fn sub(self, earlier: Instant) -> Duration {
        self.saturating_duration_since(earlier)
    }
}

/// A source of monotonic time. The engine reads it once per loop turn.
pub trait Clock {
    /// The current time (monotonic).
    fn now(&self) -> Instant;
}

/// Wall-clock monotonic time from the OS, with its epoch at construction.
#[derive(Debug, Clone, Copy)]
pub struct SystemClock {
    epoch: std::time::Instant,
}

impl SystemClock {
    /// A clock whose epoch is now.
    pub fn new() -> SystemClock {
        SystemClock {
            epoch: std::time::Instant::now(),
        }
    }
}

impl Default for SystemClock {
    fn default() -> Self {
        SystemClock::new()
    }
}

impl Clock for SystemClock {
    fn now(&self) -> Instant {
        Instant::from_micros(micros(self.epoch.elapsed()))
    }
}

/// Virtual time for tests and simulation: clones share one time, which moves only when
/// someone calls [`VirtualClock::advance`] or [`VirtualClock::set`].
#[derive(Debug, Clone, Default)]
pub struct VirtualClock {
    now: Rc<Cell<Instant>>,
}

impl VirtualClock {
    /// A clock at time zero that only moves when told.
    pub fn new() -> VirtualClock {
        VirtualClock::default()
    }
    /// Move the clock forward by `d`.
    pub fn advance(&self, d: Duration) {
        self.now.set(self.now.get() + d);
    }
    /// Move time to `t`; time never goes backwards, so an earlier `t` is ignored.
    pub fn set(&self, t: Instant) {
        if t > self.now.get() {
            self.now.set(t);
        }
    }
}

impl Clock for VirtualClock {
    fn now(&self) -> Instant {
        self.now.get()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arithmetic_saturates() {
        let t = Instant::from_millis(5);
        assert_eq!(t - Duration::from_millis(10), Instant::ZERO);
        assert_eq!((t + Duration::from_millis(1)).as_millis(), 6);
        assert_eq!(Instant::ZERO - t, Duration::ZERO);
    }

    #[test]
    fn an_optional_instant_costs_nothing_more() {
        assert_eq!(
            std::mem::size_of::<Option<Instant>>(),
            std::mem::size_of::<Instant>()
        );
        assert_eq!(Instant::from_micros(7).as_micros(), 7);
        assert_eq!(Instant::default(), Instant::ZERO);
        assert!(Instant::ZERO < Instant::FAR_FUTURE);
        assert_eq!(
            Instant::FAR_FUTURE.plus_micros(u64::MAX),
            Instant::from_micros(u64::MAX - 1)
        );
    }

    #[test]
    fn virtual_clock_is_shared_and_monotonic() {
        let a = VirtualClock::new();
        let b = a.clone();
        a.advance(Duration::from_millis(3));
        assert_eq!(b.now(), Instant::from_millis(3));
        b.set(Instant::from_millis(1));
        assert_eq!(a.now(), Instant::from_millis(3));
    }
}
