//! The neighbour cache: pending frames queued and released in order, retries and
//! failure, forgetting and eviction, entries that connections hold, the RFC 826 merge
//! rule, what is reported as learned, and random operations that never break its
//! accounting. The reachability states are `nud`'s tests.

use super::*;
use crate::arp::wire::tests::receive;
use crate::arp::wire::*;
use crate::ethernet;
use proptest::prelude::*;
use std::net::Ipv4Addr;

const US: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
const THEM: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);
const OTHER: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 3);
const THEM_MAC: MacAddr = MacAddr([0x02, 0, 0, 0, 0, 2]);
const OTHER_MAC: MacAddr = MacAddr([0x02, 0, 0, 0, 0, 3]);

pub(super) fn t(ms: u64) -> Instant {
    Instant::from_millis(ms)
}

pub(super) fn frame(tag: u8) -> Vec<u8> {
    let mut f = vec![0u8; 20];
    f[ethernet::HEADER_LEN] = tag;
    f
}

/// A connection's entry for `ip`, with no MAC to start from.
fn conn(cache: &mut ArpCache, ip: impl Into<IpAddr>) -> NeighbourId {
    cache.attach(ip.into(), None, t(0))
}

/// A solicited answer for `ip` (an advertisement with S and O, an ARP reply to us).
fn answer(cache: &mut ArpCache, ip: impl Into<IpAddr>, mac: MacAddr, now: Instant) -> usize {
    cache.update(ip, News::advertisement(Some(mac), true, true), now)
}

fn poll(cache: &mut ArpCache, now: Instant) -> (Vec<Solicit>, Polled) {
    let mut out = Vec::new();
    let polled = cache.poll(now, |_| None, &mut out);
    (out, polled)
}

#[test]
fn enqueue_requests_once_then_queues_then_drops() {
    let mut cache = ArpCache::default();
    let them = conn(&mut cache, THEM);
    assert_eq!(cache.state(THEM), Some(Nud::Unresolved));
    assert_eq!(cache.output(them, t(0)), None);
    assert_eq!(
        cache.enqueue(them, frame(0), t(0)),
        EnqueueResult::SendRequest
    );
    assert_eq!(cache.state(THEM), Some(Nud::Incomplete));
    for i in 1..16 {
        assert_eq!(cache.enqueue(them, frame(i), t(1)), EnqueueResult::Queued);
    }
    assert_eq!(cache.enqueue(them, frame(16), t(2)), EnqueueResult::Dropped);
    assert_eq!(cache.queued_frames(), 16);
    // Another address has its own per-address bound.
    let other = conn(&mut cache, OTHER);
    assert_eq!(
        cache.enqueue(other, frame(0), t(2)),
        EnqueueResult::SendRequest
    );
}

/// Two caches given the same calls retry, give up and release in the same order: a
/// simulation replays exactly only if nothing depends on a hasher's random keys. An
/// IPv6 peer is resolved at more than one address (its link-local one beside the
/// others), so several resolutions run at once.
#[test]
fn retries_and_releases_come_in_the_same_order_in_every_cache() {
    let addrs: Vec<IpAddr> = (1..=24u8)
        .map(|i| {
            IpAddr::V6(std::net::Ipv6Addr::new(
                0xfd00,
                0,
                0,
                0,
                0,
                0,
                0,
                u16::from(i),
            ))
        })
        .collect();
    let run = || {
        let mut cache = ArpCache::default();
        for (i, &ip) in addrs.iter().enumerate() {
            let id = conn(&mut cache, ip);
            cache.enqueue(id, frame(i as u8), t(0));
        }
        let (mut requests, _) = poll(&mut cache, t(1000));
        // Half resolve at once (their frames ready together), the others are retried.
        for &ip in addrs.iter().step_by(2) {
            answer(&mut cache, ip, THEM_MAC, t(1000));
        }
        let mut ready = Vec::new();
        cache.drain_ready(&mut ready);
        requests.extend(poll(&mut cache, t(2000)).0);
        let tags: Vec<u8> = ready.iter().map(|f| f[ethernet::HEADER_LEN]).collect();
        (requests, tags)
    };
    let first = run();
    assert_eq!(first.0.len(), 36);
    assert!(first.0.iter().all(|s| s.unicast.is_none()));
    assert_eq!(first.1.len(), 12);
    for _ in 0..4 {
        assert_eq!(run(), first);
    }
}

#[test]
fn total_pending_bound() {
    let mut cache = ArpCache::new(
        ArpConfig {
            max_pending_total: 3,
            ..ArpConfig::default()
        },
        0,
    );
    let them = conn(&mut cache, THEM);
    let other = conn(&mut cache, OTHER);
    let fourth = conn(&mut cache, Ipv4Addr::new(10, 0, 0, 4));
    assert_eq!(
        cache.enqueue(them, frame(0), t(0)),
        EnqueueResult::SendRequest
    );
    assert_eq!(cache.enqueue(them, frame(1), t(0)), EnqueueResult::Queued);
    assert_eq!(
        cache.enqueue(other, frame(2), t(0)),
        EnqueueResult::SendRequest
    );
    assert_eq!(cache.enqueue(other, frame(3), t(0)), EnqueueResult::Dropped);
    assert_eq!(
        cache.enqueue(fourth, frame(4), t(0)),
        EnqueueResult::Dropped
    );
    assert_eq!(
        cache.state(Ipv4Addr::new(10, 0, 0, 4)),
        Some(Nud::Unresolved)
    );
    // Taking frames out frees room.
    answer(&mut cache, THEM, THEM_MAC, t(1));
    assert_eq!(cache.take_ready(THEM).count(), 2);
    assert_eq!(
        cache.enqueue(fourth, frame(4), t(1)),
        EnqueueResult::SendRequest
    );
}

#[test]
fn resolution_releases_pending_frames_in_order_with_mac_filled() {
    let mut cache = ArpCache::default();
    let them = conn(&mut cache, THEM);
    for i in 0..5 {
        cache.enqueue(them, frame(i), t(0));
    }
    let other = conn(&mut cache, OTHER);
    cache.enqueue(other, frame(9), t(0));
    assert_eq!(answer(&mut cache, THEM, THEM_MAC, t(10)), 5);
    assert_eq!(cache.state(THEM), Some(Nud::Reachable));
    assert_eq!(cache.lookup(THEM), Some(THEM_MAC));
    assert_eq!(cache.sendable(them), Some(THEM_MAC));
    let ready: Vec<Vec<u8>> = cache.take_ready(THEM).collect();
    assert_eq!(
        ready
            .iter()
            .map(|f| f[ethernet::HEADER_LEN])
            .collect::<Vec<_>>(),
        vec![0, 1, 2, 3, 4]
    );
    assert!(ready.iter().all(|f| &f[..6] == THEM_MAC.as_bytes()));
    assert_eq!(cache.take_ready(THEM).count(), 0);
    assert_eq!(cache.queued_frames(), 1);
    // The other address is untouched, still being resolved.
    assert_eq!(cache.state(OTHER), Some(Nud::Incomplete));
    assert_eq!(cache.take_ready(OTHER).count(), 0);
    // drain_ready collects everything.
    cache.import(OTHER, OTHER_MAC, t(11));
    let mut out = Vec::new();
    cache.drain_ready(&mut out);
    assert_eq!(out.len(), 1);
    assert_eq!(&out[0][..6], OTHER_MAC.as_bytes());
    assert_eq!(cache.queued_frames(), 0);
}

#[test]
fn enqueue_for_resolved_address_is_ready_at_once() {
    let mut cache = ArpCache::default();
    let them = conn(&mut cache, THEM);
    cache.import(THEM, THEM_MAC, t(0));
    assert_eq!(cache.enqueue(them, frame(1), t(1)), EnqueueResult::Queued);
    // A frame sent to the STALE entry makes it DELAY.
    assert_eq!(cache.state(THEM), Some(Nud::Delay));
    let f: Vec<_> = cache.take_ready(THEM).collect();
    assert_eq!(&f[0][..6], THEM_MAC.as_bytes());
}

#[test]
fn retries_then_failure_counts_dropped_frames() {
    let mut cache = ArpCache::default();
    let them = conn(&mut cache, THEM);
    assert_eq!(
        cache.enqueue(them, frame(0), t(0)),
        EnqueueResult::SendRequest
    );
    cache.enqueue(them, frame(1), t(0));
    assert_eq!(cache.next_deadline(), Some(t(1000)));
    assert!(poll(&mut cache, t(999)).0.is_empty());
    let mut requests = Vec::new();
    for (i, now) in [1000, 2000, 3000].into_iter().enumerate() {
        let (out, polled) = poll(&mut cache, t(now));
        assert_eq!(polled, Polled::default());
        requests.extend(out);
        assert_eq!(requests.len(), i + 1, "retry {i} at {now}");
        assert_eq!(cache.next_deadline(), Some(t(now + 1000)));
    }
    let resolve = Solicit {
        ip: THEM.into(),
        unicast: None,
    };
    assert!(requests.iter().all(|&s| s == resolve));
    let (out, polled) = poll(&mut cache, t(4000));
    assert!(out.is_empty());
    assert_eq!(polled.failed_frames, 2);
    // A failed resolution finds nothing unreachable: nothing was reachable.
    assert_eq!(polled.unreachable, 0);
    assert_eq!(cache.state(THEM), Some(Nud::Unresolved));
    assert_eq!(cache.next_deadline(), None);
    assert_eq!(cache.queued_frames(), 0);
    // A new frame starts over with a fresh request.
    assert_eq!(
        cache.enqueue(them, frame(2), t(4001)),
        EnqueueResult::SendRequest
    );
}

#[test]
fn a_resolution_nobody_waits_for_any_more_ends_with_its_entry() {
    let mut cache = ArpCache::default();
    let them = conn(&mut cache, THEM);
    cache.enqueue(them, frame(0), t(0));
    // The connection went; the resolution runs its course.
    assert!(cache.detach(them, None, t(10)));
    assert_eq!(cache.state(THEM), Some(Nud::Incomplete));
    for now in [1000, 2000, 3000] {
        assert_eq!(poll(&mut cache, t(now)).0.len(), 1);
    }
    assert_eq!(poll(&mut cache, t(4000)).1.failed_frames, 1);
    assert!(cache.is_empty());
}

#[test]
fn unused_entries_are_forgotten() {
    let mut cache = ArpCache::default();
    cache.import(THEM, THEM_MAC, t(0));
    assert!(!cache.has_work(t(59_999)));
    assert!(cache.has_work(t(60_000)));
    // Learned again, it is kept longer.
    cache.import(THEM, THEM_MAC, t(30_000));
    poll(&mut cache, t(60_000));
    assert_eq!(cache.lookup(THEM), Some(THEM_MAC));
    cache.import(OTHER, OTHER_MAC, t(50_000));
    // poll is wanted from the first expiry on (perhaps earlier: after a refresh the
    // time it compares with is a lower bound).
    assert!(cache.has_work(t(90_000)));
    poll(&mut cache, t(95_000));
    assert_eq!(cache.len(), 1);
    // After a poll that time is exact.
    assert!(!cache.has_work(t(109_999)));
    assert!(cache.has_work(t(110_000)));
    assert_eq!(cache.lookup(OTHER), Some(OTHER_MAC));
    assert_eq!(cache.lookup(THEM), None);
}

#[test]
fn entries_connections_use_stay_until_the_last_one_goes() {
    let mut cache = ArpCache::default();
    let a = cache.attach(THEM.into(), Some(THEM_MAC), t(0));
    let b = cache.attach(THEM.into(), None, t(0));
    assert_eq!(a, b);
    assert_eq!(cache.users(a), 2);
    // A SYN's MAC starts the entry STALE (it confirms nothing).
    assert_eq!(cache.state(THEM), Some(Nud::Stale));
    assert_eq!(cache.lookup(THEM), Some(THEM_MAC));
    poll(&mut cache, t(600_000));
    assert_eq!(cache.lookup(THEM), Some(THEM_MAC));
    assert!(!cache.detach(a, None, t(600_000)));
    assert!(cache.detach(b, None, t(610_000)));
    // Unused from then on: forgotten a lifetime later.
    poll(&mut cache, t(669_999));
    assert_eq!(cache.lookup(THEM), Some(THEM_MAC));
    poll(&mut cache, t(670_000));
    assert!(cache.is_empty());
    // An entry that never got a MAC goes with its last connection.
    let c = conn(&mut cache, OTHER);
    assert!(cache.detach(c, None, t(670_000)));
    assert!(cache.is_empty());
}

#[test]
fn the_longest_unused_entry_is_evicted() {
    let mut cache = ArpCache::new(
        ArpConfig {
            max_entries: 3,
            ..ArpConfig::default()
        },
        0,
    );
    let ip = |i: u8| Ipv4Addr::new(10, 0, 1, i);
    let mac = |i: u8| MacAddr([0x02, 0, 0, 0, 1, i]);
    for i in 1..=3 {
        cache.import(ip(i), mac(i), t(u64::from(i)));
    }
    // Learning 1 again makes 2 the longest unused.
    cache.import(ip(1), mac(1), t(10));
    cache.import(ip(4), mac(4), t(11));
    assert_eq!(cache.len(), 3);
    assert_eq!(cache.lookup(ip(2)), None);
    for i in [1, 3, 4] {
        assert_eq!(cache.lookup(ip(i)), Some(mac(i)));
    }
    // Entries connections use are never evicted; a connection's entry is made past
    // the bound, and learning is refused while every entry is in use.
    for i in [1, 3, 4] {
        cache.attach(ip(i).into(), None, t(12));
    }
    cache.attach(ip(5).into(), None, t(12));
    assert_eq!(cache.len(), 4);
    cache.import(ip(6), mac(6), t(13));
    assert_eq!(cache.lookup(ip(6)), None);
    assert_eq!(cache.len(), 4);
}

#[test]
fn drain_learned_reports_new_and_changed_only() {
    let mut cache = ArpCache::default();
    let mut out = Vec::new();
    let learn = |cache: &mut ArpCache, ip, mac, ms| cache.update(ip, News::unsolicited(mac), t(ms));
    learn(&mut cache, THEM, THEM_MAC, 0);
    learn(&mut cache, THEM, THEM_MAC, 1); // again: not news
    cache.import(OTHER, OTHER_MAC, t(1)); // from a sibling: not reported back
    cache.attach(US.into(), Some(OTHER_MAC), t(1)); // a SYN's MAC: not reported
    cache.drain_learned(&mut out);
    assert_eq!(out, vec![(THEM.into(), THEM_MAC)]);
    out.clear();
    cache.drain_learned(&mut out);
    assert!(out.is_empty());
    learn(&mut cache, THEM, OTHER_MAC, 2); // MAC changed
    learn(&mut cache, OTHER, OTHER_MAC, 3); // same as imported: not news
    poll(&mut cache, t(70_000));
    learn(&mut cache, THEM, OTHER_MAC, 70_000); // learned again after it was forgotten
    cache.drain_learned(&mut out);
    assert_eq!(
        out,
        vec![(THEM.into(), OTHER_MAC), (THEM.into(), OTHER_MAC)]
    );
}

#[test]
fn learn_follows_rfc826_merge_rule() {
    let mut cache = ArpCache::default();
    let mut buf = [0u8; FRAME_LEN];
    // A request between two other hosts teaches nothing new.
    build_request(&mut buf, OTHER_MAC, OTHER, THEM);
    let (_, input) = receive(&buf, US);
    assert_eq!(cache.learn(&input, false, t(0)), 0);
    assert_eq!(cache.lookup(OTHER), None);
    // A request aimed at us adds the sender.
    build_request(&mut buf, THEM_MAC, THEM, US);
    let (_, input) = receive(&buf, US);
    cache.learn(&input, false, t(0));
    assert_eq!(cache.lookup(THEM), Some(THEM_MAC));
    // A gratuitous ARP for an address we hold updates it.
    build_gratuitous(&mut buf, OTHER_MAC, THEM);
    let (_, input) = receive(&buf, US);
    cache.learn(&input, false, t(1));
    assert_eq!(cache.lookup(THEM), Some(OTHER_MAC));
    // A reply for an address we are resolving releases its frames.
    let other = conn(&mut cache, OTHER);
    cache.enqueue(other, frame(7), t(2));
    build_reply(&mut buf, OTHER_MAC, OTHER, THEM_MAC, THEM);
    let (_, input) = receive(&buf, US);
    assert_eq!(cache.learn(&input, false, t(3)), 1);
}

#[test]
fn impossible_mappings_are_not_stored() {
    let mut cache = ArpCache::default();
    cache.import(Ipv4Addr::BROADCAST, THEM_MAC, t(0));
    cache.import(THEM, MacAddr::BROADCAST, t(0));
    cache.import(OTHER, MacAddr([0; 6]), t(0));
    assert!(cache.is_empty());
    // Nor is a SYN's impossible MAC taken for a connection's entry.
    cache.attach(THEM.into(), Some(MacAddr::BROADCAST), t(0));
    assert_eq!(cache.state(THEM), Some(Nud::Unresolved));
}

proptest! {
    /// Whatever a valid packet says, learning from it keeps the cache sound.
    #[test]
    fn learning_any_valid_packet_never_panics(
        bytes in proptest::collection::vec(any::<u8>(), 0..64),
        ip in any::<[u8; 4]>(),
        to_us in any::<bool>(),
    ) {
        if let Ok(input) = process(&bytes, Ipv4Addr::from(ip)) {
            let mut cache = ArpCache::default();
            cache.learn(&input, to_us, Instant::ZERO);
            prop_assert!(cache.len() <= 1);
        }
    }

    /// Whatever the sequence of operations, the frame count stays consistent and
    /// within its bound, and poll is wanted whenever something is due.
    #[test]
    fn cache_accounting_holds(ops in proptest::collection::vec((0u8..5, 0u8..4, 0u64..3000), 0..200)) {
        let config = ArpConfig { max_pending_total: 10, max_pending_per_addr: 4, max_entries: 2, ..ArpConfig::default() };
        let mut cache = ArpCache::new(config, 7);
        let mut now = 0;
        let mut taken = 0usize;
        let mut accepted = 0usize;
        let mut failed = 0usize;
        let mut ids = Vec::new();
        for (op, addr, dt) in ops {
            now += dt;
            let ip = Ipv4Addr::new(10, 0, 2, addr);
            match op {
                0 => {
                    let id = cache.attach(ip.into(), None, t(now));
                    ids.push(id);
                    if cache.output(id, t(now)).is_none()
                        && cache.enqueue(id, frame(addr), t(now)) != EnqueueResult::Dropped
                    {
                        accepted += 1;
                    }
                }
                1 => { answer(&mut cache, ip, MacAddr([2, 0, 0, 0, 2, addr]), t(now)); }
                2 => taken += cache.take_ready(ip).count(),
                3 => if let Some(id) = ids.pop() { cache.detach(id, None, t(now)); },
                _ => failed += poll(&mut cache, t(now)).1.failed_frames,
            }
            prop_assert!(cache.queued_frames() <= 10);
            // Anything due makes poll wanted (the time it compares with is a lower
            // bound).
            let idle_due = cache.idle.first().map(|&(s, _)| s + cache.config.entry_lifetime);
            let timer_due = cache.timers.first().map(|&(at, _)| at);
            for due in idle_due.into_iter().chain(timer_due) {
                if t(now) >= due {
                    prop_assert!(cache.has_work(t(now)));
                }
            }
            prop_assert_eq!(accepted, taken + failed + cache.queued_frames());
        }
    }
}
