//! ARP's wire format and the neighbour cache, driven together as the engine drives them.
//!
//! The input is two bytes of cache limits, then operations (see `step`): packets to
//! validate and learn from, connections that start, end and send frames to an address,
//! news of any kind about a neighbour, mappings imported, clock steps and polls (with
//! connections' confirmations of any age). Checked: what validates obeys RFC 826's
//! rules as documented (unicast sender, reply owed exactly to a request for us from
//! another address) and our reply and probes validate at the asker; an entry a
//! connection uses stays, and hands out a MAC directly exactly in the states that send
//! directly; probes go to unicast MACs; the cache stays within its bounds, and every
//! frame queued is either still queued, handed out addressed to a unicast MAC, or
//! counted as failed.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::time::Duration;

use rusty_stack::internals::{
    build_probe, build_reply, build_request, process, ArpCache, ArpInput, EnqueueResult,
    NeighbourId, News, FRAME_LEN, PACKET_LEN,
};
use rusty_stack::io::{MacAddr, ETHERNET_HEADER_LEN};
use rusty_stack::time::Instant;
use rusty_stack::ArpConfig;
use smoltcp::wire::ArpOperation;

use crate::input::Input;
use crate::wire::{HOST_IP, HOST_MAC};

/// A small set of neighbour addresses of both families (the cache holds IPv6
/// neighbours too), so that operations meet each other, plus some no neighbour may
/// have.
fn addr(b: u8) -> IpAddr {
    match b % 16 {
        12 => IpAddr::V6(Ipv6Addr::UNSPECIFIED),
        13 => IpAddr::V6(Ipv6Addr::new(0xff02, 0, 0, 0, 0, 0, 0, 1)),
        14 => IpAddr::V6(Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0, 0, 7)),
        15 => IpAddr::V6(Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 7)),
        n => IpAddr::V4(v4(n)),
    }
}

/// A small set of IPv4 addresses (see [`addr`]).
fn v4(b: u8) -> Ipv4Addr {
    match b % 12 {
        8 => Ipv4Addr::UNSPECIFIED,
        9 => Ipv4Addr::BROADCAST,
        10 => Ipv4Addr::new(224, 0, 0, 1),
        11 => HOST_IP,
        n => Ipv4Addr::new(10, 0, 0, 10 + n),
    }
}

fn mac(b: u8) -> MacAddr {
    // Mostly unicast; every fourth multicast, and zero for 0xff.
    match b {
        0xff => MacAddr([0; 6]),
        _ if b % 4 == 3 => MacAddr([1, 0, 0x5e, 0, 0, b]),
        _ => MacAddr([2, 0, 0, 0, 1, b]),
    }
}

/// Check what [`process`] accepted from `payload`, and that our answer to it is valid.
fn check_input(payload: &[u8], input: &ArpInput) {
    assert!(payload.len() >= PACKET_LEN);
    assert!(input.sender_mac.is_unicast() && input.sender_mac != MacAddr([0; 6]));
    let ip = input.sender_ip;
    assert!(!ip.is_broadcast() && !ip.is_multicast() && !ip.is_loopback());
    assert_eq!(input.targets_us, input.target_ip == HOST_IP);
    assert_eq!(input.conflict, ip == HOST_IP);
    let request = input.operation == ArpOperation::Request;
    assert_eq!(
        input.reply_owed,
        request && input.targets_us && !input.conflict
    );
    if input.reply_owed {
        let mut frame = [0u8; FRAME_LEN];
        build_reply(&mut frame, HOST_MAC, HOST_IP, input.sender_mac, ip);
        let reply = process(&frame[ETHERNET_HEADER_LEN..], ip).expect("our reply is invalid");
        assert_eq!(reply.operation, ArpOperation::Reply);
        assert_eq!((reply.sender_ip, reply.sender_mac), (HOST_IP, HOST_MAC));
        assert!(reply.targets_us);
    }
}

struct State {
    cache: ArpCache,
    config: ArpConfig,
    now: Instant,
    /// The entries connections refer to, by address, with how many refer to each.
    attached: Vec<(IpAddr, NeighbourId, u32)>,
    /// Every address a connection has gone to: an entry made for a connection may
    /// outlive it past the cache's bound until forgotten.
    used: Vec<IpAddr>,
    accepted: usize,
    taken: usize,
    failed: usize,
}

impl State {
    /// The entry a connection to `ip` refers to, attaching one if none does.
    fn conn(&mut self, ip: IpAddr, hint: Option<MacAddr>) -> NeighbourId {
        if let Some(&(_, id, _)) = self.attached.iter().find(|a| a.0 == ip) {
            return id;
        }
        let id = self.cache.attach(ip, hint, self.now);
        self.attached.push((ip, id, 1));
        if !self.used.contains(&ip) {
            self.used.push(ip);
        }
        id
    }

    fn step(&mut self, op: u8, input: &mut Input<'_>) {
        let now = self.now;
        match op & 7 {
            0 => {
                let len = usize::from(input.u8() % 64);
                let payload = input.bytes(len);
                if let Ok(arp) = process(payload, HOST_IP) {
                    check_input(payload, &arp);
                    self.cache.learn(&arp, op & 8 != 0, now);
                }
            }
            1 => {
                // A connection sends a frame: straight to the MAC, or queued.
                let id = self.conn(addr(op >> 3), None);
                let direct = self.cache.sendable(id);
                match self.cache.output(id, now) {
                    Some(mac) => {
                        assert!(direct.is_none_or(|d| d == mac));
                        assert!(mac.is_unicast());
                    }
                    None => {
                        assert!(direct.is_none());
                        let frame = vec![op; 60];
                        if self.cache.enqueue(id, frame, now) != EnqueueResult::Dropped {
                            self.accepted += 1;
                        }
                    }
                }
            }
            2 => {
                let (m, flags) = (input.u8(), input.u8());
                let news = News {
                    mac: (flags & 1 != 0).then(|| mac(m)),
                    solicited: flags & 2 != 0,
                    override_: flags & 4 != 0,
                    create: flags & 8 != 0,
                    report: flags & 16 != 0,
                };
                self.cache.update(addr(op >> 3), news, now);
            }
            3 => {
                self.cache.import(addr(op >> 3), mac(input.u8()), now);
            }
            4 => {
                let mut ready = Vec::new();
                self.cache.drain_ready(&mut ready);
                self.taken += ready.len();
                for frame in ready {
                    let dst = MacAddr::from_slice(&frame[..6]).expect("six bytes");
                    assert!(dst.is_unicast() && dst != MacAddr([0; 6]));
                }
                let mut changed = Vec::new();
                self.cache.take_changed(&mut changed);
                for id in changed {
                    assert!(self.attached.iter().any(|a| a.1 == id));
                }
            }
            5 => {
                // Connections last made progress this long ago, or never.
                let ago = u64::from(input.u8());
                let confirmed = (ago > 0)
                    .then(|| Instant::from_micros(now.as_micros().saturating_sub(ago * 100_000)));
                let mut solicits = Vec::new();
                let polled = self.cache.poll(now, |_| confirmed, &mut solicits);
                self.failed += polled.failed_frames;
                let probes = solicits.iter().filter(|s| s.unicast.is_some()).count();
                assert_eq!(probes as u64, polled.probes);
                for s in solicits {
                    assert!(s.unicast.is_none_or(|m| m.is_unicast()));
                }
            }
            6 => {
                let unit = [1, 100, 1000, 60_000][usize::from(op >> 6)];
                self.now = now + Duration::from_millis(u64::from(input.u8()) * unit);
            }
            _ => {
                // A connection to the address ends (having made progress lately or
                // not), or one more starts (its SYN came from a MAC).
                let ip = addr(op >> 3);
                let byte = input.u8();
                let hint = mac(byte);
                match self.attached.iter().position(|a| a.0 == ip) {
                    Some(i) if op & 0x80 != 0 => {
                        let (_, id, n) = self.attached[i];
                        // Its last progress: now, or never.
                        let progress = (byte & 0x40 != 0).then_some(now);
                        let last = self.cache.detach(id, progress, now);
                        assert_eq!(last, n == 1);
                        if last {
                            self.attached.swap_remove(i);
                        } else {
                            self.attached[i].2 -= 1;
                        }
                    }
                    Some(i) => {
                        let id = self.cache.attach(ip, Some(hint), now);
                        assert_eq!(id, self.attached[i].1);
                        self.attached[i].2 += 1;
                    }
                    None => {
                        self.conn(ip, Some(hint));
                    }
                }
                if let Some(m) = self.cache.lookup(ip) {
                    assert!(m.is_unicast());
                }
                let mut learned = Vec::new();
                self.cache.drain_learned(&mut learned);
                assert!(learned.len() <= self.config.max_entries.max(1));
                for (ip, m) in learned {
                    assert!(m.is_unicast() && !ip.is_unspecified() && !ip.is_multicast());
                }
            }
        }
        for &(ip, id, n) in &self.attached {
            assert_eq!(self.cache.users(id), n);
            let state = self.cache.state(ip).expect("an entry in use stays");
            assert_eq!(
                self.cache.sendable(id).is_some(),
                state.sends_directly(),
                "{ip} {state:?}"
            );
        }
        assert!(self.cache.queued_frames() <= self.config.max_pending_total);
        assert!(self.cache.len() <= self.config.max_entries + self.used.len());
        assert_eq!(
            self.accepted,
            self.taken + self.failed + self.cache.queued_frames(),
            "frames lost or made up"
        );
    }
}

/// Run `data` through ARP validation and a fresh neighbour cache. Panics on a bug.
pub fn arp(data: &[u8]) {
    let mut input = Input::new(data);
    let (a, b) = (input.u8(), input.u8());
    let mut config = ArpConfig::default();
    config.entry_lifetime = Duration::from_secs(u64::from(a >> 4) * 10);
    config.retry_interval = Duration::from_millis(u64::from(b >> 5) * 500);
    config.max_retries = u32::from(a >> 2 & 3);
    config.max_probes = u32::from(b >> 5 & 3);
    config.max_pending_per_addr = usize::from(b & 7);
    config.max_pending_total = usize::from(b >> 3 & 3) * 8;
    config.max_entries = usize::from(a & 3) * 2;
    // Our own request must validate at its target, which owes a reply unless the
    // target is us; so must our probe.
    let target = v4(input.u8());
    let mut frame = [0u8; FRAME_LEN];
    build_request(&mut frame, HOST_MAC, HOST_IP, target);
    let request = process(&frame[ETHERNET_HEADER_LEN..], target).expect("our request is invalid");
    assert_eq!(request.reply_owed, target != HOST_IP);
    build_probe(&mut frame, HOST_MAC, HOST_IP, target, mac(0));
    let probe = process(&frame[ETHERNET_HEADER_LEN..], target).expect("our probe is invalid");
    assert_eq!(probe.reply_owed, target != HOST_IP);

    let mut state = State {
        cache: ArpCache::new(config.clone(), u64::from(a)),
        config,
        now: Instant::ZERO,
        attached: Vec::new(),
        used: Vec::new(),
        accepted: 0,
        taken: 0,
        failed: 0,
    };
    for _ in 0..512 {
        if input.is_empty() {
            break;
        }
        let op = input.u8();
        state.step(op, &mut input);
    }
}
