//! The fault injector over an in-memory pair: each fault alone (loss, bursts, a chosen
//! frame, duplication, corruption, delay, reordering, jitter), seeded runs that replay
//! exactly, and its random numbers.

use rusty_stack::internals::Rng;
use rusty_stack::io::fault::*;
use rusty_stack::io::{Capabilities, MacAddr, PacketIo};
use rusty_stack::time::{Instant, VirtualClock};
use rusty_testkit::memory::{pair, MemoryLink};
use std::time::Duration;

const MAC_A: MacAddr = MacAddr::BROADCAST;

type Sender = FaultInjector<MemoryLink, VirtualClock>;

fn setup(config: FaultConfig, seed: u64) -> (Sender, MemoryLink, VirtualClock) {
    let (a, b) = pair(
        Capabilities::new(MAC_A, 1500),
        Capabilities::new(MAC_A, 1500),
    );
    let clock = VirtualClock::new();
    (FaultInjector::new(a, clock.clone(), config, seed), b, clock)
}

/// A 60-byte frame: Ethernet (IPv4 type) + a 40-byte IPv4 packet numbered `n` + 6
/// bytes of padding.
fn frame(n: u16) -> Vec<u8> {
    let mut f = vec![0u8; 60];
    f[12..14].copy_from_slice(&[0x08, 0x00]);
    f[14] = 0x45;
    f[16..18].copy_from_slice(&40u16.to_be_bytes());
    f[40..42].copy_from_slice(&n.to_be_bytes());
    f
}

fn send(link: &mut Sender, frames: &[Vec<u8>]) {
    let mut burst = Vec::new();
    for f in frames {
        let mut tx = link.alloc_tx(f.len()).unwrap();
        tx.copy_from_slice(f);
        burst.push(tx);
    }
    link.transmit(&mut burst);
    assert!(burst.is_empty());
}

fn recv(link: &mut MemoryLink) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    link.receive(&mut out, usize::MAX);
    out.iter().map(|f| f.to_vec()).collect()
}

fn numbers(frames: &[Vec<u8>]) -> Vec<u16> {
    frames
        .iter()
        .map(|f| u16::from_be_bytes([f[40], f[41]]))
        .collect()
}

#[test]
fn no_faults_passes_everything_in_order() {
    let (mut a, mut b, _) = setup(FaultConfig::none(), 1);
    let frames: Vec<_> = (0..10).map(frame).collect();
    send(&mut a, &frames);
    assert_eq!(recv(&mut b), frames);
    assert_eq!(a.stats().forwarded, 10);
    assert_eq!(a.next_release(), None);
}

#[test]
fn loss_drops_about_the_configured_share() {
    let config = FaultConfig::none().with_loss(0.3);
    let (mut a, mut b, _) = setup(config, 7);
    for n in 0..1000 {
        send(&mut a, &[frame(n)]);
    }
    let got = recv(&mut b).len() as u64;
    let lost = a.stats().lost;
    assert_eq!(got + lost, 1000);
    assert!((200..400).contains(&lost), "lost {lost}");
    // Lost frames went back to the pool, received ones were dropped by `recv`.
    assert_eq!(a.inner().in_flight(), 0);
}

#[test]
fn bursts_last_while_frames_follow_closely_and_a_chosen_frame_is_dropped() {
    let config = FaultConfig::none().with_loss(0.05).with_burst(0.9);
    // Back to back: once a frame is lost, most that follow are too.
    let (mut a, mut b, _) = setup(config, 11);
    for n in 0..2000 {
        send(&mut a, &[frame(n)]);
    }
    let back_to_back = a.stats().lost;
    recv(&mut b);
    // Spaced wider than a burst: only the base loss applies.
    let (mut a, mut b, clock) = setup(config, 11);
    for n in 0..2000 {
        clock.advance(BURST_SPAN * 2);
        send(&mut a, &[frame(n)]);
    }
    let spaced = a.stats().lost;
    recv(&mut b);
    assert!(back_to_back > 3 * spaced, "{back_to_back} vs {spaced}");
    assert!((50..150).contains(&spaced), "{spaced}");
    // drop_frame drops exactly that frame and no other.
    let (mut a, mut b, _) = setup(FaultConfig::none().with_drop_frame(2), 1);
    send(&mut a, &[frame(0), frame(1), frame(2), frame(3)]);
    assert_eq!(numbers(&recv(&mut b)), vec![0, 1, 3]);
}

#[test]
fn duplicate_sends_every_frame_twice() {
    let config = FaultConfig::none().with_duplicate(1.0);
    let (mut a, mut b, _) = setup(config, 3);
    send(&mut a, &[frame(1), frame(2)]);
    assert_eq!(numbers(&recv(&mut b)), vec![1, 1, 2, 2]);
    assert_eq!(a.stats().duplicated, 2);
}

#[test]
fn corrupt_flips_one_bit_inside_the_ipv4_packet() {
    let config = FaultConfig::none().with_corrupt(1.0);
    let (mut a, mut b, _) = setup(config, 11);
    let frames: Vec<_> = (0..200).map(frame).collect();
    send(&mut a, &frames);
    // A non-IPv4 frame (ARP type) is left alone.
    let mut arp = frame(0);
    arp[12..14].copy_from_slice(&[0x08, 0x06]);
    send(&mut a, &[arp.clone()]);
    let got = recv(&mut b);
    for (sent, got) in frames.iter().zip(&got) {
        let diff: Vec<usize> = (0..60).filter(|&i| sent[i] != got[i]).collect();
        assert_eq!(diff.len(), 1);
        assert!((14..54).contains(&diff[0]), "flipped byte {}", diff[0]);
        assert_eq!((sent[diff[0]] ^ got[diff[0]]).count_ones(), 1);
    }
    assert_eq!(got[200], arp);
    assert_eq!(a.stats().corrupted, 200);
}

#[test]
fn corrupt_flips_one_bit_inside_the_ipv6_packet() {
    let config = FaultConfig::none().with_corrupt(1.0);
    let (mut a, mut b, _) = setup(config, 12);
    // Ethernet (IPv6 type), a 40-byte header announcing 20 bytes of payload, then 10
    // bytes of trailer past the packet.
    let mut v6 = vec![0u8; 84];
    v6[12..14].copy_from_slice(&[0x86, 0xdd]);
    v6[14] = 0x60;
    v6[18..20].copy_from_slice(&20u16.to_be_bytes());
    let frames = vec![v6; 300];
    send(&mut a, &frames);
    let got = recv(&mut b);
    let mut flipped = [false; 84];
    for (sent, got) in frames.iter().zip(&got) {
        let diff: Vec<usize> = (0..84).filter(|&i| sent[i] != got[i]).collect();
        assert_eq!(diff.len(), 1);
        assert!((14..74).contains(&diff[0]), "flipped byte {}", diff[0]);
        assert_eq!((sent[diff[0]] ^ got[diff[0]]).count_ones(), 1);
        flipped[diff[0]] = true;
    }
    // Header and payload alike.
    assert!(flipped[14..54].contains(&true) && flipped[54..74].contains(&true));
    assert_eq!(a.stats().corrupted, 300);
}

#[test]
fn delay_holds_frames_until_due_and_reports_next_release() {
    let config = FaultConfig::none().with_delay(Duration::from_millis(10));
    let (mut a, mut b, clock) = setup(config, 5);
    send(&mut a, &[frame(1)]);
    clock.advance(Duration::from_millis(4));
    send(&mut a, &[frame(2)]);
    assert!(recv(&mut b).is_empty());
    assert_eq!(a.next_release(), Some(Instant::from_millis(10)));
    assert_eq!(a.held(), 2);
    clock.advance(Duration::from_millis(6));
    // A receive on the faulty end releases due frames.
    let mut sink = Vec::new();
    a.receive(&mut sink, 8);
    assert_eq!(numbers(&recv(&mut b)), vec![1]);
    assert_eq!(a.next_release(), Some(Instant::from_millis(14)));
    clock.advance(Duration::from_millis(4));
    a.flush();
    assert_eq!(numbers(&recv(&mut b)), vec![2]);
    assert_eq!(a.next_release(), None);
    assert_eq!(a.stats().delayed, 2);
}

#[test]
fn reordered_frame_is_overtaken() {
    let config = FaultConfig::none()
        .with_reorder(1.0)
        .with_reorder_delay(Duration::from_millis(5));
    let (mut a, mut b, clock) = setup(config, 9);
    send(&mut a, &[frame(1)]);
    a.set_config(FaultConfig::none());
    send(&mut a, &[frame(2), frame(3)]);
    assert_eq!(numbers(&recv(&mut b)), vec![2, 3]);
    clock.advance(Duration::from_millis(5));
    send(&mut a, &[frame(4)]);
    assert_eq!(numbers(&recv(&mut b)), vec![1, 4]);
    assert_eq!(a.stats().reordered, 1);
}

#[test]
fn jitter_delivers_everything_in_release_order() {
    let config = FaultConfig::none()
        .with_delay(Duration::from_millis(1))
        .with_jitter(Duration::from_millis(20));
    let (mut a, mut b, clock) = setup(config, 21);
    for n in 0..100 {
        send(&mut a, &[frame(n)]);
        clock.advance(Duration::from_micros(100));
    }
    let mut got = Vec::new();
    while let Some(t) = a.next_release() {
        clock.set(t);
        a.flush();
        got.extend(recv(&mut b));
    }
    let mut nums = numbers(&got);
    assert_ne!(nums, (0..100).collect::<Vec<_>>(), "jitter should reorder");
    nums.sort_unstable();
    assert_eq!(nums, (0..100).collect::<Vec<_>>());
}

fn run(seed: u64) -> (Vec<Vec<u8>>, FaultStats) {
    let config = FaultConfig::none()
        .with_loss(0.1)
        .with_duplicate(0.1)
        .with_reorder(0.1)
        .with_corrupt(0.1)
        .with_delay(Duration::from_millis(1))
        .with_jitter(Duration::from_millis(3))
        .with_reorder_delay(Duration::from_millis(5));
    let (mut a, mut b, clock) = setup(config, seed);
    let mut got = Vec::new();
    for n in 0..300 {
        send(&mut a, &[frame(n), frame(n + 1000)]);
        clock.advance(Duration::from_micros(250));
        got.extend(recv(&mut b));
    }
    clock.advance(Duration::from_secs(1));
    a.flush();
    got.extend(recv(&mut b));
    (got, a.stats())
}

#[test]
fn same_seed_replays_exactly() {
    let (frames1, stats1) = run(42);
    let (frames2, stats2) = run(42);
    assert_eq!(frames1, frames2);
    assert_eq!(stats1, stats2);
    assert!(stats1.lost > 0 && stats1.duplicated > 0 && stats1.corrupted > 0);
    assert!(stats1.reordered > 0 && stats1.delayed > 0);
    let (frames3, _) = run(43);
    assert_ne!(frames1, frames3);
}

#[test]
fn rng_is_uniform_enough_and_bounded() {
    let mut r = Rng::new(0);
    let mut buckets = [0u32; 10];
    for _ in 0..10_000 {
        let x = r.below(10);
        buckets[x as usize] += 1;
        let u = r.unit();
        assert!((0.0..1.0).contains(&u));
    }
    assert!(
        buckets.iter().all(|&b| (800..1200).contains(&b)),
        "{buckets:?}"
    );
}
