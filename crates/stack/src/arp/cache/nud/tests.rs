//! Neighbour Unreachability Detection, state by state: every transition of RFC 4861
//! §7.3.3 and of the tables of §7.2.3 and §7.2.5 (and their ARP analogues), each
//! state's timer, `ReachableTime`'s bounds and its new draws, confirmations from
//! connections read only when a timer fires, and what is reported to connections.

use super::*;
use crate::arp::cache::{ArpConfig, EnqueueResult};
use crate::arp::wire::tests::receive;
use crate::arp::wire::{build_gratuitous, build_reply, build_request, FRAME_LEN};
use crate::rng::Rng;
use std::cell::Cell;
use std::net::{Ipv4Addr, Ipv6Addr};

const PEER: Ipv6Addr = Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0, 0, 7);
const PEER_MAC: MacAddr = MacAddr([0x02, 0, 0, 0, 0, 7]);
const NEW_MAC: MacAddr = MacAddr([0x02, 0, 0, 0, 0, 8]);
const US4: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
const PEER4: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 7);

fn t(ms: u64) -> Instant {
    Instant::from_millis(ms)
}

/// A cache with one connection through `PEER`, whose SYN came from `PEER_MAC`: STALE.
fn stale() -> (ArpCache, NeighbourId) {
    let mut cache = ArpCache::default();
    let id = cache.attach(PEER.into(), Some(PEER_MAC), t(0));
    assert_eq!(cache.state(PEER), Some(Nud::Stale));
    (cache, id)
}

/// Poll at `now`, connections having last made progress at `confirmed`.
fn poll(cache: &mut ArpCache, now: Instant, confirmed: Option<Instant>) -> (Vec<Solicit>, Polled) {
    let mut out = Vec::new();
    let polled = cache.poll(now, |_| confirmed, &mut out);
    (out, polled)
}

/// A solicited advertisement from `PEER` at its MAC, without Override.
fn confirm(cache: &mut ArpCache, now: Instant) {
    cache.update(PEER, News::advertisement(Some(PEER_MAC), true, false), now);
}

fn changed(cache: &mut ArpCache) -> Vec<NeighbourId> {
    let mut out = Vec::new();
    cache.take_changed(&mut out);
    out
}

fn probe() -> Solicit {
    Solicit {
        ip: PEER.into(),
        unicast: Some(PEER_MAC),
    }
}

#[test]
fn reachable_time_is_drawn_between_half_and_one_and_a_half_of_the_base() {
    let base = Duration::from_secs(30);
    let mut rng = Rng::new(1);
    let draws: Vec<Duration> = (0..10_000)
        .map(|_| draw_reachable_time(base, &mut rng))
        .collect();
    let (low, high) = (Duration::from_secs(15), Duration::from_secs(45));
    assert!(draws.iter().all(|&d| d >= low && d < high));
    // Uniform over the whole range.
    assert!(draws.iter().any(|&d| d < low + Duration::from_millis(300)));
    assert!(draws.iter().any(|&d| d > high - Duration::from_millis(300)));
    let mean = draws.iter().sum::<Duration>() / draws.len() as u32;
    assert!(mean.abs_diff(base) < Duration::from_millis(500), "{mean:?}");
    // Each cache draws its own, from the seed its engine gives it.
    let caches: Vec<Duration> = (0..64)
        .map(|seed| ArpCache::new(ArpConfig::default(), seed).reachable_time())
        .collect();
    assert!(caches.iter().all(|&d| d >= low && d < high));
    assert!(caches.windows(2).any(|w| w[0] != w[1]));
    assert_eq!(
        ArpCache::new(ArpConfig::default(), 5).reachable_time(),
        caches[5]
    );
}

/// RFC 4861 §6.3.4: drawn again at least every few hours, when a neighbour next becomes
/// REACHABLE; between draws every confirmation counts the same time.
#[test]
fn reachable_time_is_drawn_again_every_two_hours() {
    let mut redrawn = 0;
    for seed in 0..16 {
        let mut cache = ArpCache::new(ArpConfig::default(), seed);
        let first = cache.reachable_time();
        cache.attach(PEER.into(), Some(PEER_MAC), t(0));
        let hour = 3_600_000;
        cache.update(
            PEER,
            News::advertisement(Some(PEER_MAC), true, true),
            t(hour),
        );
        assert_eq!(cache.reachable_time(), first);
        assert_eq!(cache.next_deadline(), Some(t(hour) + first));
        cache.update(
            PEER,
            News::advertisement(Some(PEER_MAC), true, true),
            t(2 * hour),
        );
        let second = cache.reachable_time();
        assert!(second >= Duration::from_secs(15) && second < Duration::from_secs(45));
        redrawn += usize::from(second != first);
    }
    assert!(redrawn >= 14, "{redrawn} of 16 drawn again");
}

#[test]
fn reachable_becomes_stale_after_reachable_time() {
    let (mut cache, id) = stale();
    confirm(&mut cache, t(1000));
    assert_eq!(cache.state(PEER), Some(Nud::Reachable));
    assert_eq!(cache.sendable(id), Some(PEER_MAC));
    assert_eq!(changed(&mut cache), vec![id]);
    let until = t(1000) + cache.reachable_time();
    assert_eq!(cache.next_deadline(), Some(until));
    assert!(!cache.has_work(until - Duration::from_millis(1)));
    poll(&mut cache, until, None);
    assert_eq!(cache.state(PEER), Some(Nud::Stale));
    assert_eq!(cache.next_deadline(), None);
    assert_eq!(cache.sendable(id), None);
    assert_eq!(changed(&mut cache), vec![id]);
    // STALE waits for traffic: nothing is sent to find out.
    for minute in 1..=10 {
        let (out, _) = poll(&mut cache, t(minute * 60_000), None);
        assert!(out.is_empty());
    }
    assert_eq!(cache.state(PEER), Some(Nud::Stale));
}

/// Connections' forward progress keeps the neighbour REACHABLE, and is asked for only
/// when the entry's timer fires.
#[test]
fn progress_of_connections_keeps_it_reachable() {
    let (mut cache, id) = stale();
    cache.update(PEER, News::advertisement(Some(PEER_MAC), true, true), t(0));
    let rt = cache.reachable_time();
    changed(&mut cache);
    let asked = Cell::new(0);
    let mut progress = t(0);
    let mut out = Vec::new();
    for ms in (0..600_000).step_by(10) {
        // Every request of a busy connection makes progress.
        progress = t(ms);
        cache.poll(
            t(ms),
            |n| {
                assert_eq!(n, id);
                asked.set(asked.get() + 1);
                Some(progress)
            },
            &mut out,
        );
    }
    assert!(out.is_empty());
    assert_eq!(cache.state(PEER), Some(Nud::Reachable));
    assert!(changed(&mut cache).is_empty());
    // Asked once a ReachableTime, not once a poll.
    let fires = 600_000 / rt.as_millis() as usize;
    assert!(
        asked.get() >= fires && asked.get() <= fires + 1,
        "{}",
        asked.get()
    );
    // The timer runs from the latest progress.
    let next = cache.next_deadline().expect("REACHABLE's timer");
    poll(&mut cache, next, Some(progress));
    assert_eq!(cache.next_deadline(), Some(progress + rt));
    // Progress that stops lets it go STALE one ReachableTime after the last.
    poll(&mut cache, progress + rt, Some(progress));
    assert_eq!(cache.state(PEER), Some(Nud::Stale));
}

#[test]
fn sending_to_stale_delays_then_probes_unicast_then_forgets() {
    let (mut cache, id) = stale();
    assert_eq!(cache.sendable(id), None);
    // The first frame sent: DELAY, and frames go straight out from then on.
    assert_eq!(cache.output(id, t(0)), Some(PEER_MAC));
    assert_eq!(cache.state(PEER), Some(Nud::Delay));
    assert_eq!(cache.sendable(id), Some(PEER_MAC));
    assert_eq!(changed(&mut cache), vec![id]);
    assert_eq!(cache.next_deadline(), Some(t(5000)));
    assert_eq!(poll(&mut cache, t(4999), None).0, vec![]);
    // DELAY_FIRST_PROBE_TIME without a confirmation: PROBE, a solicitation unicast to
    // the cached MAC every RetransTimer, MAX_UNICAST_SOLICIT of them.
    for (i, ms) in [5000, 6000, 7000].into_iter().enumerate() {
        let (out, polled) = poll(&mut cache, t(ms), None);
        assert_eq!(out, vec![probe()], "probe {i}");
        assert_eq!(polled.probes, 1);
        assert_eq!(cache.state(PEER), Some(Nud::Probe));
        assert_eq!(cache.sendable(id), Some(PEER_MAC));
        assert_eq!(cache.next_deadline(), Some(t(ms + 1000)));
    }
    assert!(changed(&mut cache).is_empty());
    // RetransTimer after the last: unreachable. The mapping goes; the connection's
    // entry stays, and its next frame resolves it again (to the group).
    let (out, polled) = poll(&mut cache, t(8000), None);
    assert!(out.is_empty());
    assert_eq!(polled.unreachable, 1);
    assert_eq!(cache.state(PEER), Some(Nud::Unresolved));
    assert_eq!(cache.lookup(PEER), None);
    assert_eq!(cache.sendable(id), None);
    assert_eq!(changed(&mut cache), vec![id]);
    assert_eq!(cache.output(id, t(8001)), None);
    assert_eq!(
        cache.enqueue(id, vec![0; 20], t(8001)),
        EnqueueResult::SendRequest
    );
    assert_eq!(cache.state(PEER), Some(Nud::Incomplete));
    let (out, _) = poll(&mut cache, t(9001), None);
    assert_eq!(
        out,
        vec![Solicit {
            ip: PEER.into(),
            unicast: None
        }]
    );
}

#[test]
fn an_entry_no_connection_uses_any_more_is_deleted_when_probes_fail() {
    let (mut cache, id) = stale();
    cache.output(id, t(0));
    assert!(cache.detach(id, None, t(1)));
    for ms in [5000, 6000, 7000] {
        assert_eq!(poll(&mut cache, t(ms), None).0, vec![probe()]);
    }
    assert_eq!(poll(&mut cache, t(8000), None).1.unreachable, 1);
    assert!(cache.is_empty());
}

/// A connection that made progress and ended leaves its confirmation with the entry.
#[test]
fn a_connection_that_ends_leaves_its_confirmation() {
    let (mut cache, id) = stale();
    cache.output(id, t(0));
    assert!(cache.detach(id, Some(t(1000)), t(2000)));
    assert_eq!(poll(&mut cache, t(5000), None), (vec![], Polled::default()));
    assert_eq!(cache.state(PEER), Some(Nud::Reachable));
    assert_eq!(
        cache.next_deadline(),
        Some(t(1000) + cache.reachable_time())
    );
}

#[test]
fn a_confirmation_while_delaying_makes_it_reachable_without_a_probe() {
    let (mut cache, id) = stale();
    cache.output(id, t(10_000));
    changed(&mut cache);
    // Progress from before the frame confirms nothing new.
    let (out, _) = poll(&mut cache, t(15_000), Some(t(9_000)));
    assert_eq!(out, vec![probe()]);

    let (mut cache, id) = stale();
    cache.output(id, t(10_000));
    let (out, polled) = poll(&mut cache, t(15_000), Some(t(12_000)));
    assert!(out.is_empty());
    assert_eq!(polled, Polled::default());
    assert_eq!(cache.state(PEER), Some(Nud::Reachable));
    assert_eq!(cache.sendable(id), Some(PEER_MAC));
    assert_eq!(
        cache.next_deadline(),
        Some(t(12_000) + cache.reachable_time())
    );
}

#[test]
fn a_confirmation_while_probing_ends_the_probes() {
    // From a connection, read at the next probe's time.
    let (mut cache, id) = stale();
    cache.output(id, t(0));
    assert_eq!(poll(&mut cache, t(5000), None).0, vec![probe()]);
    let (out, _) = poll(&mut cache, t(6000), Some(t(5500)));
    assert!(out.is_empty());
    assert_eq!(cache.state(PEER), Some(Nud::Reachable));
    // From the neighbour itself: a solicited advertisement, at once.
    let (mut cache, id) = stale();
    cache.output(id, t(0));
    poll(&mut cache, t(5000), None);
    changed(&mut cache);
    confirm(&mut cache, t(5100));
    assert_eq!(cache.state(PEER), Some(Nud::Reachable));
    assert_eq!(cache.sendable(id), Some(PEER_MAC));
    assert!(
        changed(&mut cache).is_empty(),
        "the MAC it sends to is the same"
    );
    assert_eq!(
        cache.next_deadline(),
        Some(t(5100) + cache.reachable_time())
    );
}

/// RFC 4861 §7.2.5, row by row.
#[test]
fn advertisements_follow_rfc4861_7_2_5() {
    let adv = |mac, s, o| News::advertisement(mac, s, o);
    // No entry: nothing is created.
    let mut cache = ArpCache::default();
    cache.update(PEER, adv(Some(PEER_MAC), true, true), t(0));
    assert!(cache.is_empty());

    // INCOMPLETE: without the target's address, ignored; with it, REACHABLE if
    // solicited, else STALE (and DELAY as the frames waiting go out).
    let incomplete = || {
        let mut cache = ArpCache::default();
        let id = cache.attach(PEER.into(), None, t(0));
        cache.enqueue(id, vec![0; 20], t(0));
        (cache, id)
    };
    let (mut cache, _) = incomplete();
    assert_eq!(cache.update(PEER, adv(None, true, true), t(1)), 0);
    assert_eq!(cache.state(PEER), Some(Nud::Incomplete));
    assert_eq!(
        cache.update(PEER, adv(Some(PEER_MAC), true, false), t(1)),
        1
    );
    assert_eq!(cache.state(PEER), Some(Nud::Reachable));
    let (mut cache, _) = incomplete();
    assert_eq!(
        cache.update(PEER, adv(Some(PEER_MAC), false, false), t(1)),
        1
    );
    assert_eq!(cache.state(PEER), Some(Nud::Delay));

    // Override clear, a different address: a REACHABLE entry goes STALE and keeps its
    // address; any other is left alone.
    let (mut cache, _) = stale();
    cache.update(PEER, adv(Some(PEER_MAC), true, true), t(1));
    cache.update(PEER, adv(Some(NEW_MAC), true, false), t(2));
    assert_eq!(cache.state(PEER), Some(Nud::Stale));
    assert_eq!(cache.lookup(PEER), Some(PEER_MAC));
    cache.update(PEER, adv(Some(NEW_MAC), true, false), t(3));
    assert_eq!(cache.state(PEER), Some(Nud::Stale));
    assert_eq!(cache.lookup(PEER), Some(PEER_MAC));

    // Override set: the new address, REACHABLE if solicited, else STALE.
    let (mut cache, id) = stale();
    cache.output(id, t(1));
    cache.update(PEER, adv(Some(NEW_MAC), true, true), t(2));
    assert_eq!(
        (cache.state(PEER), cache.lookup(PEER)),
        (Some(Nud::Reachable), Some(NEW_MAC))
    );
    cache.update(PEER, adv(Some(PEER_MAC), false, true), t(3));
    assert_eq!(
        (cache.state(PEER), cache.lookup(PEER)),
        (Some(Nud::Stale), Some(PEER_MAC))
    );

    // The same address, or none: solicited confirms, unsolicited changes nothing.
    let (mut cache, _) = stale();
    cache.update(PEER, adv(Some(PEER_MAC), false, true), t(1));
    cache.update(PEER, adv(None, false, false), t(1));
    assert_eq!(cache.state(PEER), Some(Nud::Stale));
    cache.update(PEER, adv(None, true, false), t(2));
    assert_eq!(cache.state(PEER), Some(Nud::Reachable));
    cache.update(PEER, adv(Some(PEER_MAC), false, true), t(3));
    assert_eq!(cache.state(PEER), Some(Nud::Reachable));

    // An entry forgotten after failed probes (deleted, for RFC 4861) learns nothing
    // from an advertisement.
    let (mut cache, id) = stale();
    cache.output(id, t(0));
    for ms in [5000, 6000, 7000, 8000] {
        poll(&mut cache, t(ms), None);
    }
    assert_eq!(cache.state(PEER), Some(Nud::Unresolved));
    cache.update(PEER, adv(Some(PEER_MAC), true, true), t(9000));
    assert_eq!(cache.state(PEER), Some(Nud::Unresolved));
}

/// RFC 4861 §7.2.3: a solicitation with the sender's address makes or updates its
/// entry, STALE when the address is new or changed, unchanged otherwise.
#[test]
fn solicitations_follow_rfc4861_7_2_3() {
    let mut cache = ArpCache::default();
    cache.update(PEER, News::unsolicited(PEER_MAC), t(0));
    assert_eq!(cache.state(PEER), Some(Nud::Stale));
    cache.update(PEER, News::advertisement(Some(PEER_MAC), true, true), t(1));
    cache.update(PEER, News::unsolicited(PEER_MAC), t(2));
    assert_eq!(cache.state(PEER), Some(Nud::Reachable));
    cache.update(PEER, News::unsolicited(NEW_MAC), t(3));
    assert_eq!(
        (cache.state(PEER), cache.lookup(PEER)),
        (Some(Nud::Stale), Some(NEW_MAC))
    );
    // An entry forgotten after failed probes is made again.
    let (mut cache, id) = stale();
    cache.output(id, t(0));
    for ms in [5000, 6000, 7000, 8000] {
        poll(&mut cache, t(ms), None);
    }
    cache.update(PEER, News::unsolicited(NEW_MAC), t(9000));
    assert_eq!(
        (cache.state(PEER), cache.lookup(PEER)),
        (Some(Nud::Stale), Some(NEW_MAC))
    );
}

/// ARP as Linux applies it: a reply unicast to us for our address confirms the
/// sender; requests and broadcast replies are news as solicitations are.
#[test]
fn arp_confirms_only_with_a_reply_unicast_to_us() {
    let packet = |build: &dyn Fn(&mut [u8]) -> usize| {
        let mut buf = [0u8; FRAME_LEN];
        build(&mut buf);
        receive(&buf, US4).1
    };
    let reply = packet(&|b| build_reply(b, PEER_MAC, PEER4, MacAddr([2, 0, 0, 0, 0, 1]), US4));
    let mut cache = ArpCache::default();
    let id = cache.attach(PEER4.into(), Some(PEER_MAC), t(0));
    // Broadcast (the frame was not to our MAC): no confirmation.
    cache.learn(&reply, false, t(1));
    assert_eq!(cache.state(PEER4), Some(Nud::Stale));
    cache.learn(&reply, true, t(2));
    assert_eq!(cache.state(PEER4), Some(Nud::Reachable));
    assert_eq!(cache.sendable(id), Some(PEER_MAC));
    // A request from it with the same MAC changes nothing; from a new MAC (a
    // gratuitous ARP of its new NIC), STALE at the new one.
    let request = packet(&|b| build_request(b, PEER_MAC, PEER4, US4));
    cache.learn(&request, false, t(3));
    assert_eq!(cache.state(PEER4), Some(Nud::Reachable));
    let moved = packet(&|b| build_gratuitous(b, NEW_MAC, PEER4));
    cache.learn(&moved, false, t(4));
    assert_eq!(
        (cache.state(PEER4), cache.lookup(PEER4)),
        (Some(Nud::Stale), Some(NEW_MAC))
    );
    // A reply unicast to us that is not for our address confirms nothing.
    let stray = packet(&|b| build_reply(b, PEER_MAC, PEER4, NEW_MAC, Ipv4Addr::new(10, 0, 0, 9)));
    cache.learn(&stray, true, t(5));
    assert_eq!(
        (cache.state(PEER4), cache.lookup(PEER4)),
        (Some(Nud::Stale), Some(PEER_MAC))
    );
}

/// Connections hear only of entries they use, and only when the MAC they may send to
/// directly changes.
#[test]
fn changes_are_reported_for_entries_connections_use() {
    let mut cache = ArpCache::default();
    cache.update(PEER, News::unsolicited(PEER_MAC), t(0));
    cache.update(PEER, News::advertisement(Some(PEER_MAC), true, true), t(0));
    assert!(changed(&mut cache).is_empty());
    let id = cache.attach(PEER.into(), None, t(1));
    assert_eq!(cache.sendable(id), Some(PEER_MAC));
    cache.update(PEER, News::advertisement(Some(NEW_MAC), true, true), t(2));
    assert_eq!(changed(&mut cache), vec![id]);
    assert_eq!(cache.sendable(id), Some(NEW_MAC));
    cache.update(PEER, News::advertisement(Some(NEW_MAC), true, true), t(3));
    assert!(changed(&mut cache).is_empty());
    // Reported once however often it changes before the engine asks.
    cache.update(PEER, News::unsolicited(PEER_MAC), t(4));
    cache.output(id, t(5));
    assert_eq!(changed(&mut cache), vec![id]);
    // Not at all when its last connection went before the engine asked.
    cache.update(PEER, News::unsolicited(NEW_MAC), t(6));
    assert!(cache.detach(id, None, t(7)));
    assert!(changed(&mut cache).is_empty());
}

/// Every state's timer (RFC 4861 §7.3.3, §10).
#[test]
fn each_state_has_its_timer() {
    let config = ArpConfig::default();
    let mut cache = ArpCache::default();
    let id = cache.attach(PEER.into(), None, t(0));
    assert_eq!(cache.next_deadline(), None, "unresolved");
    cache.enqueue(id, vec![0; 20], t(0));
    assert_eq!(cache.next_deadline(), Some(t(0) + config.retry_interval));
    cache.update(
        PEER,
        News::advertisement(Some(PEER_MAC), true, true),
        t(100),
    );
    cache.drain_ready(&mut Vec::new());
    assert_eq!(cache.next_deadline(), Some(t(100) + cache.reachable_time()));
    cache.update(PEER, News::unsolicited(NEW_MAC), t(200));
    assert_eq!(cache.next_deadline(), None, "stale");
    cache.output(id, t(300));
    assert_eq!(
        cache.next_deadline(),
        Some(t(300) + config.delay_first_probe)
    );
    poll(&mut cache, t(5300), None);
    assert_eq!(cache.next_deadline(), Some(t(5300) + config.retry_interval));
}
