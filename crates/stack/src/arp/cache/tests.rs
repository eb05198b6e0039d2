//! The neighbour cache: pending frames queued and released in order, retries and
//! failure, expiry and eviction, the RFC 826 merge rule, what is reported as learned,
//! and random packets that never break its accounting.

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

fn t(ms: u64) -> Instant {
    Instant::from_millis(ms)
}

fn frame(tag: u8) -> Vec<u8> {
    let mut f = vec![0u8; 20];
    f[ethernet::HEADER_LEN] = tag;
    f
}

#[test]
fn enqueue_requests_once_then_queues_then_drops() {
    let mut cache = ArpCache::default();
    assert_eq!(
        cache.enqueue(THEM, frame(0), t(0)),
        EnqueueResult::SendRequest
    );
    assert!(cache.is_pending(THEM));
    for i in 1..16 {
        assert_eq!(cache.enqueue(THEM, frame(i), t(1)), EnqueueResult::Queued);
    }
    assert_eq!(cache.enqueue(THEM, frame(16), t(2)), EnqueueResult::Dropped);
    assert_eq!(cache.queued_frames(), 16);
    // Another address has its own per-address bound.
    assert_eq!(
        cache.enqueue(OTHER, frame(0), t(2)),
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
            cache.enqueue(ip, frame(i as u8), t(0));
        }
        let (mut requests, mut failed) = (Vec::new(), 0);
        cache.poll(t(1000), &mut requests, &mut failed);
        // Half resolve at once (their frames ready together), the others are retried.
        for &ip in addrs.iter().step_by(2) {
            cache.insert(ip, THEM_MAC, t(1000));
        }
        let mut ready = Vec::new();
        cache.drain_ready(&mut ready);
        cache.poll(t(2000), &mut requests, &mut failed);
        let tags: Vec<u8> = ready.iter().map(|f| f[ethernet::HEADER_LEN]).collect();
        (requests, tags)
    };
    let first = run();
    assert_eq!(first.0.len(), 36);
    assert_eq!(first.1.len(), 12);
    for _ in 0..4 {
        assert_eq!(run(), first);
    }
}

#[test]
fn total_pending_bound() {
    let mut cache = ArpCache::new(ArpConfig {
        max_pending_total: 3,
        ..ArpConfig::default()
    });
    assert_eq!(
        cache.enqueue(THEM, frame(0), t(0)),
        EnqueueResult::SendRequest
    );
    assert_eq!(cache.enqueue(THEM, frame(1), t(0)), EnqueueResult::Queued);
    assert_eq!(
        cache.enqueue(OTHER, frame(2), t(0)),
        EnqueueResult::SendRequest
    );
    assert_eq!(cache.enqueue(OTHER, frame(3), t(0)), EnqueueResult::Dropped);
    let fourth = Ipv4Addr::new(10, 0, 0, 4);
    assert_eq!(
        cache.enqueue(fourth, frame(4), t(0)),
        EnqueueResult::Dropped
    );
    assert!(!cache.is_pending(fourth));
    // Taking frames out frees room.
    cache.insert(THEM, THEM_MAC, t(1));
    assert_eq!(cache.take_ready(THEM).count(), 2);
    assert_eq!(
        cache.enqueue(fourth, frame(4), t(1)),
        EnqueueResult::SendRequest
    );
}

#[test]
fn insert_releases_pending_frames_in_order_with_mac_filled() {
    let mut cache = ArpCache::default();
    for i in 0..5 {
        cache.enqueue(THEM, frame(i), t(0));
    }
    cache.enqueue(OTHER, frame(9), t(0));
    assert_eq!(cache.insert(THEM, THEM_MAC, t(10)), 5);
    assert!(!cache.is_pending(THEM));
    assert_eq!(cache.lookup(THEM, t(10)), Some(THEM_MAC));
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
    // The other address is untouched, still pending.
    assert!(cache.is_pending(OTHER));
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
    cache.insert(THEM, THEM_MAC, t(0));
    assert_eq!(cache.enqueue(THEM, frame(1), t(1)), EnqueueResult::Queued);
    let f: Vec<_> = cache.take_ready(THEM).collect();
    assert_eq!(&f[0][..6], THEM_MAC.as_bytes());
}

#[test]
fn retries_then_failure_counts_dropped_frames() {
    let mut cache = ArpCache::default();
    assert_eq!(
        cache.enqueue(THEM, frame(0), t(0)),
        EnqueueResult::SendRequest
    );
    cache.enqueue(THEM, frame(1), t(0));
    assert_eq!(cache.next_deadline(), Some(t(1000)));
    let (mut requests, mut failed) = (Vec::new(), 0);
    cache.poll(t(999), &mut requests, &mut failed);
    assert!(requests.is_empty());
    for (i, now) in [1000, 2000, 3000].into_iter().enumerate() {
        cache.poll(t(now), &mut requests, &mut failed);
        assert_eq!(requests.len(), i + 1, "retry {i} at {now}");
        assert_eq!(cache.next_deadline(), Some(t(now + 1000)));
    }
    assert!(requests.iter().all(|&ip| ip == THEM));
    assert_eq!(failed, 0);
    cache.poll(t(4000), &mut requests, &mut failed);
    assert_eq!(requests.len(), 3);
    assert_eq!(failed, 2);
    assert!(!cache.is_pending(THEM));
    assert_eq!(cache.next_deadline(), None);
    assert_eq!(cache.queued_frames(), 0);
    // A new frame starts over with a fresh request.
    assert_eq!(
        cache.enqueue(THEM, frame(2), t(4001)),
        EnqueueResult::SendRequest
    );
}

#[test]
fn entries_expire() {
    let mut cache = ArpCache::default();
    cache.insert(THEM, THEM_MAC, t(0));
    assert_eq!(cache.lookup(THEM, t(59_999)), Some(THEM_MAC));
    assert_eq!(cache.lookup(THEM, t(60_000)), None);
    // A refresh extends the lifetime.
    cache.insert(THEM, THEM_MAC, t(30_000));
    assert_eq!(cache.lookup(THEM, t(89_999)), Some(THEM_MAC));
    // poll purges expired entries, and is wanted from the first expiry on (perhaps
    // earlier: after the refresh the floor it compares with is a lower bound).
    cache.insert(OTHER, OTHER_MAC, t(50_000));
    assert!(cache.has_work(t(90_000)));
    let (mut r, mut f) = (Vec::new(), 0);
    cache.poll(t(95_000), &mut r, &mut f);
    assert_eq!(cache.len(), 1);
    // After a poll the floor is exact.
    assert!(!cache.has_work(t(109_999)));
    assert!(cache.has_work(t(110_000)));
    assert_eq!(cache.lookup(OTHER, t(95_000)), Some(OTHER_MAC));
    assert_eq!(cache.lookup(THEM, t(95_000)), None);
}

#[test]
fn oldest_entry_is_evicted() {
    let mut cache = ArpCache::new(ArpConfig {
        max_entries: 3,
        ..ArpConfig::default()
    });
    let ip = |i: u8| Ipv4Addr::new(10, 0, 1, i);
    let mac = |i: u8| MacAddr([0x02, 0, 0, 0, 1, i]);
    for i in 1..=3 {
        cache.insert(ip(i), mac(i), t(u64::from(i)));
    }
    // Refreshing 1 makes 2 the oldest.
    cache.insert(ip(1), mac(1), t(10));
    cache.insert(ip(4), mac(4), t(11));
    assert_eq!(cache.len(), 3);
    assert_eq!(cache.lookup(ip(2), t(12)), None);
    for i in [1, 3, 4] {
        assert_eq!(cache.lookup(ip(i), t(12)), Some(mac(i)));
    }
}

#[test]
fn drain_learned_reports_new_and_changed_only() {
    let mut cache = ArpCache::default();
    let mut out = Vec::new();
    cache.insert(THEM, THEM_MAC, t(0));
    cache.insert(THEM, THEM_MAC, t(1)); // refresh: not news
    cache.import(OTHER, OTHER_MAC, t(1)); // from a sibling: not reported back
    cache.drain_learned(&mut out);
    assert_eq!(out, vec![(THEM.into(), THEM_MAC)]);
    out.clear();
    cache.drain_learned(&mut out);
    assert!(out.is_empty());
    cache.insert(THEM, OTHER_MAC, t(2)); // MAC changed
    cache.insert(OTHER, OTHER_MAC, t(3)); // same as imported: not news
    cache.insert(THEM, OTHER_MAC, t(70_000)); // re-learned after expiry
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
    assert_eq!(cache.learn(&input, t(0)), 0);
    assert_eq!(cache.lookup(OTHER, t(0)), None);
    // A request aimed at us adds the sender.
    build_request(&mut buf, THEM_MAC, THEM, US);
    let (_, input) = receive(&buf, US);
    cache.learn(&input, t(0));
    assert_eq!(cache.lookup(THEM, t(0)), Some(THEM_MAC));
    // A gratuitous ARP for an address we hold updates it.
    build_gratuitous(&mut buf, OTHER_MAC, THEM);
    let (_, input) = receive(&buf, US);
    cache.learn(&input, t(1));
    assert_eq!(cache.lookup(THEM, t(1)), Some(OTHER_MAC));
    // A reply for an address we are resolving releases its frames.
    cache.enqueue(OTHER, frame(7), t(2));
    build_reply(&mut buf, OTHER_MAC, OTHER, THEM_MAC, THEM);
    let (_, input) = receive(&buf, US);
    assert_eq!(cache.learn(&input, t(3)), 1);
}

#[test]
fn impossible_mappings_are_not_stored() {
    let mut cache = ArpCache::default();
    cache.insert(Ipv4Addr::BROADCAST, THEM_MAC, t(0));
    cache.insert(THEM, MacAddr::BROADCAST, t(0));
    cache.insert(OTHER, MacAddr([0; 6]), t(0));
    assert!(cache.is_empty());
}

proptest! {
    /// Whatever a valid packet says, learning from it keeps the cache sound.
    #[test]
    fn learning_any_valid_packet_never_panics(
        bytes in proptest::collection::vec(any::<u8>(), 0..64),
        ip in any::<[u8; 4]>(),
    ) {
        if let Ok(input) = process(&bytes, Ipv4Addr::from(ip)) {
            let mut cache = ArpCache::default();
            cache.learn(&input, Instant::ZERO);
            prop_assert!(cache.len() <= 1);
        }
    }

    /// Whatever the sequence of operations, the frame count stays consistent and
    /// within its bound.
    #[test]
    fn cache_accounting_holds(ops in proptest::collection::vec((0u8..4, 0u8..4, 0u64..3000), 0..200)) {
        let config = ArpConfig { max_pending_total: 10, max_pending_per_addr: 4, max_entries: 2, ..ArpConfig::default() };
        let mut cache = ArpCache::new(config);
        let mut now = 0;
        let mut taken = 0usize;
        let mut accepted = 0usize;
        let mut failed = 0usize;
        for (op, addr, dt) in ops {
            now += dt;
            let ip = Ipv4Addr::new(10, 0, 2, addr);
            match op {
                0 => if cache.enqueue(ip, frame(addr), t(now)) != EnqueueResult::Dropped { accepted += 1 },
                1 => { cache.insert(ip, MacAddr([2, 0, 0, 0, 2, addr]), t(now)); }
                2 => taken += cache.take_ready(ip).count(),
                _ => cache.poll(t(now), &mut Vec::new(), &mut failed),
            }
            prop_assert!(cache.queued_frames() <= 10);
            prop_assert!(cache.len() <= 2);
            // An expired entry always makes poll wanted (the floor is a lower bound).
            if let Some(&(learned_at, _)) = cache.by_age.first() {
                if t(now) >= learned_at + cache.config.entry_lifetime {
                    prop_assert!(cache.has_work(t(now)));
                }
            }
            prop_assert_eq!(accepted, taken + failed + cache.queued_frames());
        }
    }
}
