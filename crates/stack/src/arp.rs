//! ARP (RFC 826) for Ethernet/IPv4: each worker's neighbour cache ([`ArpCache`]), the
//! receive-side validation of ARP packets ([`process`]) and the builders of the frames we
//! send ([`build_request`], [`build_reply`], [`build_gratuitous`]).
//!
//! The cache is sans-IO: the engine tells it what arrived and what time it is, and it
//! answers with addresses to ask for and frames that became sendable. Frames for an
//! address still being resolved wait in a bounded queue (RFC 1122 §2.3.2.2 asks for at
//! least one per address; we keep up to 16, and 256 overall), and requests are retried at
//! most once per second (RFC 1122 §2.3.2.1 forbids flooding) a bounded number of times.
//!
//! Entries expire a fixed time after they were last learned (RFC 1122 §2.3.2.1, the
//! "timeout" mechanism); expiry is checked on every [`lookup`](ArpCache::lookup), so
//! correctness never waits for [`poll`](ArpCache::poll). Each worker owns its own cache;
//! entries one worker learns are handed to its siblings through
//! [`drain_learned`](ArpCache::drain_learned) and [`import`](ArpCache::import), which does not
//! report them again, so they do not bounce between workers.

use std::collections::{BTreeSet, VecDeque};
use std::net::Ipv4Addr;
use std::time::Duration;

use ahash::AHashMap;
use smoltcp::wire::{
    ArpHardware, ArpOperation, ArpPacket, ArpRepr, EthernetAddress, EthernetProtocol,
};

use crate::ethernet::{self, DropReason};
use crate::io::MacAddr;
use crate::time::Instant;

/// Length of an Ethernet/IPv4 ARP packet (RFC 826: 8 + 2 × (6 + 4)).
pub const PACKET_LEN: usize = 28;
/// Length of an ARP frame we build: Ethernet header plus ARP packet. The driver pads it
/// to the 60-byte Ethernet minimum.
pub const FRAME_LEN: usize = ethernet::HEADER_LEN + PACKET_LEN;

/// Tuning of an [`ArpCache`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArpConfig {
    /// How long a learned mapping is trusted.
    pub entry_lifetime: Duration,
    /// Time between two requests for the same address.
    pub retry_interval: Duration,
    /// Requests sent after the first before giving up: with 3, an unanswered address
    /// costs 4 requests and its frames are dropped 4 × `retry_interval` after the first.
    pub max_retries: u32,
    /// Frames that may wait for one address.
    pub max_pending_per_addr: usize,
    /// Frames that may wait for all addresses together.
    pub max_pending_total: usize,
    /// Mappings kept; learning one more evicts the least recently learned.
    pub max_entries: usize,
}

impl Default for ArpConfig {
    fn default() -> Self {
        ArpConfig {
            entry_lifetime: Duration::from_secs(60),
            retry_interval: Duration::from_secs(1),
            max_retries: 3,
            max_pending_per_addr: 16,
            max_pending_total: 256,
            max_entries: 4096,
        }
    }
}

/// What [`ArpCache::enqueue`] did with a frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EnqueueResult {
    /// The frame is queued and it is the first for this address: send an ARP request
    /// for it now (later retries come from [`ArpCache::poll`]).
    SendRequest,
    /// The frame is queued behind a request already in flight.
    Queued,
    /// A queue bound was hit and the frame was dropped ([`DropReason::ArpQueueFull`]).
    Dropped,
}

#[derive(Debug, Clone)]
struct Entry {
    mac: MacAddr,
    learned_at: Instant,
}

#[derive(Debug)]
struct Pending {
    frames: VecDeque<Vec<u8>>,
    /// Requests sent after the first one.
    retries: u32,
    next_request: Instant,
}

/// One worker's IPv4 → MAC cache, with the frames waiting for resolution.
#[derive(Debug)]
pub struct ArpCache {
    config: ArpConfig,
    entries: AHashMap<Ipv4Addr, Entry>,
    /// `entries` ordered by `learned_at`: the front is both the next to expire and the
    /// one to evict.
    by_age: BTreeSet<(Instant, Ipv4Addr)>,
    pending: AHashMap<Ipv4Addr, Pending>,
    /// Frames whose address got resolved, destination MAC already filled in, waiting for
    /// the engine to take them.
    ready: AHashMap<Ipv4Addr, VecDeque<Vec<u8>>>,
    /// Frames in `pending` and `ready` together, bounded by `max_pending_total`.
    queued_frames: usize,
    /// New or changed mappings not yet reported through `drain_learned`.
    learned: Vec<(Ipv4Addr, MacAddr)>,
}

impl Default for ArpCache {
    fn default() -> Self {
        ArpCache::new(ArpConfig::default())
    }
}

impl ArpCache {
    pub fn new(config: ArpConfig) -> ArpCache {
        ArpCache {
            config,
            entries: AHashMap::new(),
            by_age: BTreeSet::new(),
            pending: AHashMap::new(),
            ready: AHashMap::new(),
            queued_frames: 0,
            learned: Vec::new(),
        }
    }

    pub fn config(&self) -> &ArpConfig {
        &self.config
    }

    /// The MAC for `ip`, if it was learned less than `entry_lifetime` ago.
    pub fn lookup(&self, ip: Ipv4Addr, now: Instant) -> Option<MacAddr> {
        let entry = self.entries.get(&ip)?;
        (now < entry.learned_at + self.config.entry_lifetime).then_some(entry.mac)
    }

    /// Number of mappings held (expired ones included until purged by `poll` or eviction).
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Frames waiting, for resolution or to be taken with [`take_ready`](Self::take_ready).
    pub fn queued_frames(&self) -> usize {
        self.queued_frames
    }

    /// Learn (or refresh) `ip` → `mac`, reporting it through
    /// [`drain_learned`](Self::drain_learned) when it is new or changed. Frames waiting for
    /// `ip` get their destination MAC filled in and move to the ready queue; returns how
    /// many are ready for `ip` (take them with [`take_ready`](Self::take_ready)).
    ///
    /// Addresses no neighbour can own (multicast or zero MAC; unspecified, broadcast or
    /// multicast IP) are ignored.
    pub fn insert(&mut self, ip: Ipv4Addr, mac: MacAddr, now: Instant) -> usize {
        self.store(ip, mac, now, true)
    }

    /// Like [`insert`](Self::insert), for a mapping a sibling worker learned: it is not
    /// reported again by `drain_learned`.
    pub fn import(&mut self, ip: Ipv4Addr, mac: MacAddr, now: Instant) -> usize {
        self.store(ip, mac, now, false)
    }

    /// Apply RFC 826's merge rule to a processed ARP packet: update the sender's mapping
    /// if we already hold (or are resolving) it, add it only when the packet was aimed
    /// at us. Returns the number of frames that became ready, as `insert` does.
    pub fn learn(&mut self, input: &ArpInput, now: Instant) -> usize {
        let Some((ip, mac)) = input.learnable() else {
            return 0;
        };
        let known = self.entries.contains_key(&ip) || self.pending.contains_key(&ip);
        if known || input.targets_us {
            self.insert(ip, mac, now)
        } else {
            0
        }
    }

    fn store(&mut self, ip: Ipv4Addr, mac: MacAddr, now: Instant, report: bool) -> usize {
        if !is_unicast_mac(mac) || !is_neighbour_ip(ip) {
            return 0;
        }
        let lifetime = self.config.entry_lifetime;
        let changed = match self.entries.get_mut(&ip) {
            Some(entry) => {
                let changed = entry.mac != mac || now >= entry.learned_at + lifetime;
                self.by_age.remove(&(entry.learned_at, ip));
                entry.mac = mac;
                entry.learned_at = now;
                changed
            }
            None => {
                if self.entries.len() >= self.config.max_entries {
                    self.evict_oldest();
                }
                if self.config.max_entries == 0 {
                    return self.release(ip, mac);
                }
                self.entries.insert(
                    ip,
                    Entry {
                        mac,
                        learned_at: now,
                    },
                );
                true
            }
        };
        self.by_age.insert((now, ip));
        if changed && report && self.learned.len() < self.config.max_entries.max(1) {
            self.learned.push((ip, mac));
        }
        self.release(ip, mac)
    }

    /// Move the frames waiting for `ip` to the ready queue, addressed to `mac`.
    fn release(&mut self, ip: Ipv4Addr, mac: MacAddr) -> usize {
        if let Some(pending) = self.pending.remove(&ip) {
            let ready = self.ready.entry(ip).or_default();
            for mut frame in pending.frames {
                fill_dst(&mut frame, mac);
                ready.push_back(frame);
            }
        }
        self.ready.get(&ip).map_or(0, VecDeque::len)
    }

    fn evict_oldest(&mut self) {
        if let Some((_, ip)) = self.by_age.pop_first() {
            self.entries.remove(&ip);
        }
    }

    /// Queue a complete Ethernet frame for `ip`, whose MAC is not known (call
    /// [`lookup`](Self::lookup) first). Its destination MAC (bytes 0..6) is filled in when
    /// the address resolves. If `ip` does resolve already, the frame goes straight to the
    /// ready queue and `Queued` is returned.
    pub fn enqueue(&mut self, ip: Ipv4Addr, mut frame: Vec<u8>, now: Instant) -> EnqueueResult {
        if self.queued_frames >= self.config.max_pending_total {
            return EnqueueResult::Dropped;
        }
        if let Some(mac) = self.lookup(ip, now) {
            fill_dst(&mut frame, mac);
            self.ready.entry(ip).or_default().push_back(frame);
            self.queued_frames += 1;
            return EnqueueResult::Queued;
        }
        match self.pending.get_mut(&ip) {
            Some(pending) => {
                if pending.frames.len() >= self.config.max_pending_per_addr {
                    return EnqueueResult::Dropped;
                }
                pending.frames.push_back(frame);
                self.queued_frames += 1;
                EnqueueResult::Queued
            }
            None => {
                if self.config.max_pending_per_addr == 0 {
                    return EnqueueResult::Dropped;
                }
                let mut frames = VecDeque::new();
                frames.push_back(frame);
                self.pending.insert(
                    ip,
                    Pending {
                        frames,
                        retries: 0,
                        next_request: now + self.config.retry_interval,
                    },
                );
                self.queued_frames += 1;
                EnqueueResult::SendRequest
            }
        }
    }

    /// Whether a request for `ip` is in flight.
    pub fn is_pending(&self, ip: Ipv4Addr) -> bool {
        self.pending.contains_key(&ip)
    }

    /// The frames that became sendable for `ip`, oldest first, destination MAC filled in.
    pub fn take_ready(&mut self, ip: Ipv4Addr) -> impl Iterator<Item = Vec<u8>> {
        let frames = self.ready.remove(&ip).unwrap_or_default();
        self.queued_frames -= frames.len();
        frames.into_iter()
    }

    /// Append every sendable frame, for all addresses, to `out` (per address, oldest
    /// first).
    pub fn drain_ready(&mut self, out: &mut Vec<Vec<u8>>) {
        for (_, frames) in self.ready.drain() {
            self.queued_frames -= frames.len();
            out.extend(frames);
        }
    }

    /// Do the work that is due at `now`: append to `requests` the addresses whose ARP
    /// request must be sent again, give up on those that used all their retries (adding
    /// the number of frames dropped to `failed_frames`, for
    /// [`DropReason::ArpUnresolved`]), and purge expired entries.
    pub fn poll(&mut self, now: Instant, requests: &mut Vec<Ipv4Addr>, failed_frames: &mut usize) {
        let config = &self.config;
        let mut dropped = 0;
        self.pending.retain(|ip, pending| {
            if pending.next_request > now {
                return true;
            }
            if pending.retries >= config.max_retries {
                dropped += pending.frames.len();
                return false;
            }
            pending.retries += 1;
            pending.next_request = now + config.retry_interval;
            requests.push(*ip);
            true
        });
        self.queued_frames -= dropped;
        *failed_frames += dropped;

        while let Some(&(learned_at, ip)) = self.by_age.first() {
            if now < learned_at + self.config.entry_lifetime {
                break;
            }
            self.by_age.pop_first();
            self.entries.remove(&ip);
        }
    }

    /// When [`poll`](Self::poll) next has a request to retry or give up on. Entry expiry
    /// needs no wake-up: `lookup` enforces it.
    pub fn next_deadline(&self) -> Option<Instant> {
        self.pending.values().map(|p| p.next_request).min()
    }

    /// Append to `out` the mappings learned through [`insert`](Self::insert) (new, changed
    /// or re-learned after expiry) since the last call, for sibling workers to
    /// [`import`](Self::import). At most `max_entries` are kept between calls.
    pub fn drain_learned(&mut self, out: &mut Vec<(Ipv4Addr, MacAddr)>) {
        out.append(&mut self.learned);
    }
}

/// Write `mac` as the destination of the Ethernet frame `frame` (bytes 0..6). A frame too
/// short to hold it is left alone.
pub fn fill_dst(frame: &mut [u8], mac: MacAddr) {
    if let Some(dst) = frame.get_mut(..6) {
        dst.copy_from_slice(mac.as_bytes());
    }
}

/// A valid ARP packet, reduced to what the engine acts on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ArpInput {
    pub operation: ArpOperation,
    pub sender_ip: Ipv4Addr,
    pub sender_mac: MacAddr,
    pub target_ip: Ipv4Addr,
    /// The target protocol address is ours (RFC 826 "Am I the target protocol address?").
    pub targets_us: bool,
    /// A request for our address: answer with [`build_reply`] to `sender_mac`/`sender_ip`.
    pub reply_owed: bool,
    /// Another host claims our address (RFC 5227 §2.4 conflict): its sender IP is ours.
    /// Nothing is learned from it; the engine should count it and may defend with
    /// [`build_gratuitous`].
    pub conflict: bool,
}

impl ArpInput {
    /// The mapping this packet teaches, if any: none from a probe (RFC 5227 §2.1.1,
    /// sender IP 0.0.0.0) or from a conflict.
    pub fn learnable(&self) -> Option<(Ipv4Addr, MacAddr)> {
        (!self.sender_ip.is_unspecified() && !self.conflict)
            .then_some((self.sender_ip, self.sender_mac))
    }
}

/// Validate the payload of an ARP frame received by the host that owns `our_ip`.
///
/// Only Ethernet/IPv4 ARP (hardware type 1, protocol 0x0800, lengths 6 and 4) with
/// operation Request or Reply is accepted. A sender hardware address that is multicast,
/// broadcast or zero, or a sender IP that is broadcast, multicast or loopback, is
/// rejected as [`DropReason::BadArp`]: learning it would poison the cache.
pub fn process(payload: &[u8], our_ip: Ipv4Addr) -> Result<ArpInput, DropReason> {
    // The fixed part (types, lengths, operation) is 8 bytes; read it before trusting the
    // lengths it announces.
    if payload.len() < 8 {
        return Err(DropReason::Truncated);
    }
    let packet = ArpPacket::new_unchecked(payload);
    if packet.hardware_type() != ArpHardware::Ethernet
        || packet.protocol_type() != EthernetProtocol::Ipv4
        || packet.hardware_len() != 6
        || packet.protocol_len() != 4
    {
        return Err(DropReason::BadArp);
    }
    if payload.len() < PACKET_LEN {
        return Err(DropReason::Truncated);
    }
    let repr = ArpRepr::parse(&packet).map_err(|_| DropReason::BadArp)?;
    let ArpRepr::EthernetIpv4 {
        operation,
        source_hardware_addr: sender_mac,
        source_protocol_addr: sender_ip,
        target_protocol_addr: target_ip,
        ..
    } = repr
    else {
        return Err(DropReason::BadArp);
    };
    let is_request = match operation {
        ArpOperation::Request => true,
        ArpOperation::Reply => false,
        _ => return Err(DropReason::BadArp),
    };
    if !is_unicast_mac(sender_mac)
        || sender_ip.is_broadcast()
        || sender_ip.is_multicast()
        || sender_ip.is_loopback()
    {
        return Err(DropReason::BadArp);
    }
    let targets_us = target_ip == our_ip;
    let conflict = sender_ip == our_ip;
    Ok(ArpInput {
        operation,
        sender_ip,
        sender_mac,
        target_ip,
        targets_us,
        reply_owed: is_request && targets_us && !conflict,
        conflict,
    })
}

/// The all-zero MAC: what RFC 5227 puts in a request's target hardware address.
const ZERO_MAC: MacAddr = EthernetAddress([0; 6]);

fn is_unicast_mac(mac: MacAddr) -> bool {
    mac.is_unicast() && mac != ZERO_MAC
}

fn is_neighbour_ip(ip: Ipv4Addr) -> bool {
    !(ip.is_unspecified() || ip.is_broadcast() || ip.is_multicast() || ip.is_loopback())
}

/// Write an Ethernet frame carrying an Ethernet/IPv4 ARP packet; returns [`FRAME_LEN`].
fn build(
    buf: &mut [u8],
    eth_dst: MacAddr,
    operation: ArpOperation,
    sender: (MacAddr, Ipv4Addr),
    target: (MacAddr, Ipv4Addr),
) -> usize {
    let frame = &mut buf[..FRAME_LEN];
    ethernet::write_header(frame, sender.0, eth_dst, EthernetProtocol::Arp);
    let repr = ArpRepr::EthernetIpv4 {
        operation,
        source_hardware_addr: sender.0,
        source_protocol_addr: sender.1,
        target_hardware_addr: target.0,
        target_protocol_addr: target.1,
    };
    repr.emit(&mut ArpPacket::new_unchecked(
        &mut frame[ethernet::HEADER_LEN..],
    ));
    FRAME_LEN
}

/// Build a broadcast "who has `target_ip`?" request; returns the frame length.
/// The target hardware address is zero, as RFC 5227 §2.1.1 recommends.
///
/// # Panics
/// If `buf` is shorter than [`FRAME_LEN`] (a bug in the caller, not bad input).
pub fn build_request(
    buf: &mut [u8],
    our_mac: MacAddr,
    our_ip: Ipv4Addr,
    target_ip: Ipv4Addr,
) -> usize {
    build(
        buf,
        MacAddr::BROADCAST,
        ArpOperation::Request,
        (our_mac, our_ip),
        (ZERO_MAC, target_ip),
    )
}

/// Build the unicast reply to a request from `their_mac`/`their_ip` (RFC 826: swap sender
/// and target, fill in our MAC); returns the frame length.
///
/// # Panics
/// If `buf` is shorter than [`FRAME_LEN`].
pub fn build_reply(
    buf: &mut [u8],
    our_mac: MacAddr,
    our_ip: Ipv4Addr,
    their_mac: MacAddr,
    their_ip: Ipv4Addr,
) -> usize {
    build(
        buf,
        their_mac,
        ArpOperation::Reply,
        (our_mac, our_ip),
        (their_mac, their_ip),
    )
}

/// Build a gratuitous ARP announcement (RFC 5227 §2.3): a broadcast request whose sender
/// and target IP are both ours, so neighbours refresh their caches when we start.
///
/// # Panics
/// If `buf` is shorter than [`FRAME_LEN`].
pub fn build_gratuitous(buf: &mut [u8], our_mac: MacAddr, our_ip: Ipv4Addr) -> usize {
    build_request(buf, our_mac, our_ip, our_ip)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const US: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
    const THEM: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);
    const OTHER: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 3);
    const US_MAC: MacAddr = EthernetAddress([0x02, 0, 0, 0, 0, 1]);
    const THEM_MAC: MacAddr = EthernetAddress([0x02, 0, 0, 0, 0, 2]);
    const OTHER_MAC: MacAddr = EthernetAddress([0x02, 0, 0, 0, 0, 3]);

    fn t(ms: u64) -> Instant {
        Instant::from_millis(ms)
    }

    /// Parse a built frame the way the engine will: Ethernet, then ARP.
    fn receive(frame: &[u8], our_ip: Ipv4Addr) -> (ethernet::EthernetHeader, ArpInput) {
        let (eth, payload) = ethernet::parse(frame).unwrap();
        assert_eq!(eth.ethertype, EthernetProtocol::Arp);
        (eth, process(payload, our_ip).unwrap())
    }

    fn frame(tag: u8) -> Vec<u8> {
        let mut f = vec![0u8; 20];
        f[14] = tag;
        f
    }

    #[test]
    fn request_round_trip() {
        let mut buf = [0u8; FRAME_LEN];
        assert_eq!(build_request(&mut buf, THEM_MAC, THEM, US), FRAME_LEN);
        let (eth, input) = receive(&buf, US);
        assert_eq!((eth.src, eth.dst), (THEM_MAC, MacAddr::BROADCAST));
        assert_eq!(input.operation, ArpOperation::Request);
        assert_eq!(
            (input.sender_ip, input.sender_mac, input.target_ip),
            (THEM, THEM_MAC, US)
        );
        assert!(input.targets_us && input.reply_owed && !input.conflict);
        assert_eq!(input.learnable(), Some((THEM, THEM_MAC)));
        // Seen by a third host: nothing owed.
        let (_, input) = receive(&buf, OTHER);
        assert!(!input.targets_us && !input.reply_owed);
    }

    #[test]
    fn reply_round_trip() {
        let mut buf = [0u8; 64];
        assert_eq!(build_reply(&mut buf, US_MAC, US, THEM_MAC, THEM), FRAME_LEN);
        let (eth, input) = receive(&buf[..FRAME_LEN], THEM);
        assert_eq!((eth.src, eth.dst), (US_MAC, THEM_MAC));
        assert_eq!(input.operation, ArpOperation::Reply);
        assert_eq!((input.sender_ip, input.sender_mac), (US, US_MAC));
        assert!(input.targets_us && !input.reply_owed);
        let ArpRepr::EthernetIpv4 {
            target_hardware_addr,
            ..
        } = ArpRepr::parse(&ArpPacket::new_checked(&buf[14..FRAME_LEN]).unwrap()).unwrap()
        else {
            unreachable!()
        };
        assert_eq!(target_hardware_addr, THEM_MAC);
    }

    #[test]
    fn gratuitous_round_trip_and_conflict() {
        let mut buf = [0u8; FRAME_LEN];
        build_gratuitous(&mut buf, THEM_MAC, THEM);
        let (eth, input) = receive(&buf, US);
        assert_eq!(eth.dst, MacAddr::BROADCAST);
        assert_eq!((input.sender_ip, input.target_ip), (THEM, THEM));
        assert!(!input.targets_us && !input.reply_owed && !input.conflict);
        assert_eq!(input.learnable(), Some((THEM, THEM_MAC)));
        // Somebody announcing our own address is a conflict, not something to learn.
        build_gratuitous(&mut buf, OTHER_MAC, US);
        let (_, input) = receive(&buf, US);
        assert!(input.conflict && !input.reply_owed);
        assert_eq!(input.learnable(), None);
    }

    #[test]
    fn probe_is_answered_but_not_learned() {
        let mut buf = [0u8; FRAME_LEN];
        build_request(&mut buf, THEM_MAC, Ipv4Addr::UNSPECIFIED, US);
        let (_, input) = receive(&buf, US);
        assert!(input.reply_owed);
        assert_eq!(input.learnable(), None);
    }

    #[test]
    fn rejects_bad_packets() {
        let mut buf = [0u8; FRAME_LEN];
        build_request(&mut buf, THEM_MAC, THEM, US);
        let good = buf;
        for len in [0, 7, 8, 27] {
            assert_eq!(
                process(&good[14..14 + len], US),
                Err(DropReason::Truncated),
                "{len}"
            );
        }
        // Hardware type, protocol type, lengths.
        for (pos, val) in [(15, 6), (16, 0x86), (18, 8), (19, 16)] {
            let mut b = good;
            b[pos] = val;
            assert_eq!(process(&b[14..], US), Err(DropReason::BadArp), "{pos}");
        }
        // Operation 3 (RARP request).
        let mut b = good;
        b[21] = 3;
        assert_eq!(process(&b[14..], US), Err(DropReason::BadArp));
        // Sender MAC broadcast / multicast / zero, sender IP broadcast.
        for mac in [
            MacAddr::BROADCAST,
            EthernetAddress([1, 0, 0x5e, 0, 0, 1]),
            EthernetAddress([0; 6]),
        ] {
            build_request(&mut buf, mac, THEM, US);
            assert_eq!(process(&buf[14..], US), Err(DropReason::BadArp));
        }
        build_request(&mut buf, THEM_MAC, Ipv4Addr::BROADCAST, US);
        assert_eq!(process(&buf[14..], US), Err(DropReason::BadArp));
        // Trailing Ethernet padding is fine.
        let mut padded = good.to_vec();
        padded.resize(60, 0);
        assert!(process(&padded[14..], US).is_ok());
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
            ready.iter().map(|f| f[14]).collect::<Vec<_>>(),
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
        // poll purges expired entries.
        cache.insert(OTHER, OTHER_MAC, t(50_000));
        let (mut r, mut f) = (Vec::new(), 0);
        cache.poll(t(95_000), &mut r, &mut f);
        assert_eq!(cache.len(), 1);
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
        let mac = |i: u8| EthernetAddress([0x02, 0, 0, 0, 1, i]);
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
        assert_eq!(out, vec![(THEM, THEM_MAC)]);
        out.clear();
        cache.drain_learned(&mut out);
        assert!(out.is_empty());
        cache.insert(THEM, OTHER_MAC, t(2)); // MAC changed
        cache.insert(OTHER, OTHER_MAC, t(3)); // same as imported: not news
        cache.insert(THEM, OTHER_MAC, t(70_000)); // re-learned after expiry
        cache.drain_learned(&mut out);
        assert_eq!(out, vec![(THEM, OTHER_MAC), (THEM, OTHER_MAC)]);
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
        cache.insert(OTHER, EthernetAddress([0; 6]), t(0));
        assert!(cache.is_empty());
    }

    proptest! {
        #[test]
        fn process_never_panics(
            bytes in proptest::collection::vec(any::<u8>(), 0..64),
            ip in any::<[u8; 4]>(),
        ) {
            let our_ip = Ipv4Addr::from(ip);
            if let Ok(input) = process(&bytes, our_ip) {
                prop_assert!(bytes.len() >= PACKET_LEN);
                prop_assert_eq!(input.reply_owed, input.operation == ArpOperation::Request
                    && input.target_ip == our_ip && input.sender_ip != our_ip);
                let mut cache = ArpCache::default();
                cache.learn(&input, Instant::ZERO);
            }
        }

        #[test]
        fn mutated_packets_never_panic(pos in 0usize..FRAME_LEN - 14, val in any::<u8>()) {
            let mut buf = [0u8; FRAME_LEN];
            build_request(&mut buf, THEM_MAC, THEM, US);
            buf[14 + pos] = val;
            let _ = process(&buf[14..], US);
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
                    1 => { cache.insert(ip, EthernetAddress([2, 0, 0, 0, 2, addr]), t(now)); }
                    2 => taken += cache.take_ready(ip).count(),
                    _ => cache.poll(t(now), &mut Vec::new(), &mut failed),
                }
                prop_assert!(cache.queued_frames() <= 10);
                prop_assert!(cache.len() <= 2);
                prop_assert_eq!(accepted, taken + failed + cache.queued_frames());
            }
        }
    }
}
