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
