//! The connection's timers: one enum of timer kinds and one table of absolute deadlines.
//! What happens when a timer fires lives in `timers.rs`; this file only keeps time.

use crate::time::Instant;

/// The timers a connection runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Timer {
    /// Retransmission timeout (RFC 6298).
    Rto,
    /// Tail loss probe timeout (RFC 8985 §7.2).
    Tlp,
    /// RACK reordering timer (RFC 8985 §6.3).
    Reorder,
    /// Persist timer: zero-window probes and the SWS override (§3.8.6.1, §3.8.6.2.1).
    Persist,
    /// Delayed ACK (§3.8.6.3).
    DelayedAck,
    /// Keepalive idle time and probe interval (RFC 1122 §4.2.3.6).
    Keepalive,
    /// TIME-WAIT end, or the FIN-WAIT-2 timeout.
    Linger,
    /// The application's one-shot timer.
    App,
    /// The user timeout or the orphan timeout: no progress for too long.
    GiveUp,
}

impl Timer {
    const COUNT: usize = 9;
}

/// A deadline for each [`Timer`]; a stopped timer holds [`Instant::FAR_FUTURE`], a time
/// the engine never reaches, so "is it due" is one comparison.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct TimerTable {
    deadlines: [Instant; Timer::COUNT],
}

const STOPPED: Instant = Instant::FAR_FUTURE;

impl Default for TimerTable {
    fn default() -> Self {
        TimerTable {
            deadlines: [STOPPED; Timer::COUNT],
        }
    }
}

impl TimerTable {
    /// Arm (or re-arm) `timer` to fire at `at`.
    #[inline]
    pub(super) fn set(&mut self, timer: Timer, at: Instant) {
        self.deadlines[timer as usize] = at;
    }

    #[inline]
    pub(super) fn stop(&mut self, timer: Timer) {
        self.deadlines[timer as usize] = STOPPED;
    }

    #[inline]
    pub(super) fn stop_all(&mut self) {
        *self = TimerTable::default();
    }

    /// The deadline of `timer`, if it is armed.
    #[inline]
    pub(super) fn get(&self, timer: Timer) -> Option<Instant> {
        let at = self.deadlines[timer as usize];
        (at != STOPPED).then_some(at)
    }

    #[inline]
    pub(super) fn is_armed(&self, timer: Timer) -> bool {
        self.deadlines[timer as usize] != STOPPED
    }

    /// `timer` is due at `now` (it stays armed until stopped or set again).
    #[inline]
    pub(super) fn expired(&self, timer: Timer, now: Instant) -> bool {
        self.deadlines[timer as usize] <= now
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
        let [first, rest @ ..] = self.deadlines;
        let at = rest.into_iter().fold(first, Instant::min);
        (at != STOPPED).then_some(at)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ALL: [Timer; Timer::COUNT] = [
        Timer::Rto,
        Timer::Tlp,
        Timer::Reorder,
        Timer::Persist,
        Timer::DelayedAck,
        Timer::Keepalive,
        Timer::Linger,
        Timer::App,
        Timer::GiveUp,
    ];

    fn ms(n: u64) -> Instant {
        Instant::from_millis(n)
    }

    #[test]
    fn a_new_table_has_nothing_armed() {
        let t = TimerTable::default();
        for timer in ALL {
            assert!(!t.is_armed(timer));
            assert_eq!(t.get(timer), None);
            assert!(!t.expired(timer, ms(1_000_000_000)));
        }
        assert_eq!(t.next(), None);
    }

    #[test]
    fn each_timer_keeps_its_own_deadline() {
        let mut t = TimerTable::default();
        for (i, timer) in ALL.into_iter().enumerate() {
            t.set(timer, ms(100 + i as u64));
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
        let mut t = TimerTable::default();
        t.set(Timer::Rto, ms(50));
        assert!(!t.expired(Timer::Rto, ms(49)));
        assert!(t.expired(Timer::Rto, ms(50)));
        assert!(t.expired(Timer::Rto, ms(51)));
        assert!(!t.expired(Timer::Persist, ms(51)));
    }

    #[test]
    fn take_expired_stops_only_a_due_timer() {
        let mut t = TimerTable::default();
        t.set(Timer::Keepalive, ms(50));
        assert!(!t.take_expired(Timer::Keepalive, ms(49)));
        assert_eq!(t.get(Timer::Keepalive), Some(ms(50)));
        assert!(t.take_expired(Timer::Keepalive, ms(60)));
        assert!(!t.is_armed(Timer::Keepalive));
        assert!(!t.take_expired(Timer::Keepalive, ms(60)));
    }

    #[test]
    fn next_is_the_earliest_armed_deadline() {
        let mut t = TimerTable::default();
        t.set(Timer::App, ms(300));
        assert_eq!(t.next(), Some(ms(300)));
        t.set(Timer::Linger, ms(200));
        t.set(Timer::Rto, ms(250));
        assert_eq!(t.next(), Some(ms(200)));
        t.stop(Timer::Linger);
        assert_eq!(t.next(), Some(ms(250)));
        t.set(Timer::Rto, ms(400));
        assert_eq!(t.next(), Some(ms(300)));
        t.stop(Timer::App);
        t.stop(Timer::Rto);
        assert_eq!(t.next(), None);
    }
}
