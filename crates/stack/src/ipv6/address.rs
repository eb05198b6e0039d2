//! A host's own IPv6 addresses: stable interface identifiers (RFC 7217) and duplicate
//! address detection (RFC 4862 §5.4).
//!
//! **Interface identifiers** are drawn, not copied from the MAC address (the EUI-64 of
//! RFC 4291 would let anyone follow a device from network to network and tell its
//! vendor): RFC 7217's `F(Prefix, Net_Iface, Network_ID, DAD_Counter, secret_key)`,
//! with SipHash-2-4 as F. The same interface on the same prefix gets the same
//! identifier after every restart; another prefix, another. Identifiers RFC 5453
//! reserves (the subnet-router anycast, the reserved anycast ranges) are skipped by
//! counting on, as a duplicate would be.
//!
//! **Duplicate address detection** ([`Dad`]): an address is tentative until
//! `transmits` Neighbor Solicitations, `interval` apart, went unanswered; a
//! solicitation for it from another node doing the same, or an advertisement for it,
//! makes it a duplicate, and the caller draws the next identifier (RFC 7217 §6: the
//! counter goes up). A tentative address receives nothing but Neighbor Discovery.

use std::hash::Hasher;
use std::net::Ipv6Addr;
use std::time::Duration;

use siphasher::sip::SipHasher24;

use crate::time::Instant;

/// The interface identifier for `prefix` (its first 64 bits) on the interface named
/// `iface`, the `dad_counter`th try, under the host's `secret`; never one RFC 5453
/// reserves.
pub fn stable_iid(prefix: Ipv6Addr, iface: &[u8], dad_counter: u8, secret: &[u8; 16]) -> u64 {
    let mut counter = dad_counter;
    loop {
        let mut h = SipHasher24::new_with_key(secret);
        h.write(&prefix.octets()[..8]);
        h.write(&(iface.len() as u32).to_be_bytes());
        h.write(iface);
        h.write(&[counter]);
        let iid = h.finish();
        if !reserved_iid(iid) {
            return iid;
        }
        counter = counter.wrapping_add(1);
    }
}

/// Interface identifiers a host may not take (RFC 5453 §3): all zeros (the
/// subnet-router anycast), `0200:5eff:fe00:0` to `0200:5eff:feff:ffff` (reserved, and
/// Proxy Mobile IPv6's), and `fdff:ffff:ffff:ff80` to `fdff:ffff:ffff:ffff`
/// (reserved subnet anycast).
fn reserved_iid(iid: u64) -> bool {
    iid == 0
        || (0x0200_5eff_fe00_0000..=0x0200_5eff_feff_ffff).contains(&iid)
        || (0xfdff_ffff_ffff_ff80..=0xfdff_ffff_ffff_ffff).contains(&iid)
}

/// `prefix`'s first 64 bits with `iid` after them.
pub fn with_iid(prefix: Ipv6Addr, iid: u64) -> Ipv6Addr {
    let mut o = prefix.octets();
    o[8..].copy_from_slice(&iid.to_be_bytes());
    Ipv6Addr::from(o)
}

/// The link-local address for interface identifier `iid` (`fe80::/64`).
pub fn link_local(iid: u64) -> Ipv6Addr {
    with_iid(Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0, 0, 0), iid)
}

/// Where duplicate address detection of one address stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DadState {
    /// Still probing: send a solicitation at the instant given.
    Tentative,
    /// Nobody else has it: ours to use.
    Preferred,
    /// Another node has it (or is taking it): draw another.
    Duplicate,
}

/// Duplicate address detection of one address.
#[derive(Debug, Clone)]
pub struct Dad {
    address: Ipv6Addr,
    /// Solicitations still to send.
    left: u8,
    /// When the next solicitation goes, or (none left) when the address is ours.
    next: Instant,
    interval: Duration,
    state: DadState,
}

impl Dad {
    /// Probe `address` with `transmits` solicitations `interval` apart (RFC 4862's
    /// DupAddrDetectTransmits, default 1, and RetransTimer, default 1 s), the first
    /// at `now`; zero transmits takes the address at once.
    pub fn new(address: Ipv6Addr, transmits: u8, interval: Duration, now: Instant) -> Dad {
        Dad {
            address,
            left: transmits,
            next: now,
            interval,
            state: if transmits == 0 {
                DadState::Preferred
            } else {
                DadState::Tentative
            },
        }
    }

    /// The address probed.
    #[cfg_attr(not(any(test, feature = "internals")), allow(dead_code))]
    pub fn address(&self) -> Ipv6Addr {
        self.address
    }

    /// Where detection stands.
    pub fn state(&self) -> DadState {
        self.state
    }

    /// What is due at `now`: `true` when a solicitation for the address is to go out
    /// now (from the unspecified address to its solicited-node group). Once the last
    /// one has gone unanswered for `interval`, the address is preferred.
    pub fn poll(&mut self, now: Instant) -> bool {
        if self.state != DadState::Tentative || now < self.next {
            return false;
        }
        if self.left == 0 {
            self.state = DadState::Preferred;
            return false;
        }
        self.left -= 1;
        self.next = now + self.interval;
        true
    }

    /// When [`poll`](Self::poll) has something to do next, while tentative.
    pub fn deadline(&self) -> Option<Instant> {
        (self.state == DadState::Tentative).then_some(self.next)
    }

    /// A solicitation for `target` arrived from the unspecified address (another node
    /// probing the same address), or an advertisement for `target` arrived (a node
    /// has it): a tentative address that is `target` is a duplicate. Whether it was.
    pub fn conflict(&mut self, target: Ipv6Addr) -> bool {
        let hit = self.state == DadState::Tentative && target == self.address;
        if hit {
            self.state = DadState::Duplicate;
        }
        hit
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECRET: [u8; 16] = [7; 16];

    #[test]
    fn identifiers_are_stable_per_prefix_and_interface_and_avoid_the_reserved() {
        let prefix: Ipv6Addr = "fd00:1:2:3::".parse().unwrap();
        let other: Ipv6Addr = "fd00:1:2:4::".parse().unwrap();
        let a = stable_iid(prefix, b"tap0", 0, &SECRET);
        assert_eq!(a, stable_iid(prefix, b"tap0", 0, &SECRET), "stable");
        assert_ne!(a, stable_iid(other, b"tap0", 0, &SECRET), "per prefix");
        assert_ne!(a, stable_iid(prefix, b"tap1", 0, &SECRET), "per interface");
        assert_ne!(a, stable_iid(prefix, b"tap0", 1, &SECRET), "per try");
        assert_ne!(a, stable_iid(prefix, b"tap0", 0, &[8; 16]), "per secret");
        // Only the prefix's first 64 bits count.
        let same_64: Ipv6Addr = "fd00:1:2:3::99".parse().unwrap();
        assert_eq!(a, stable_iid(same_64, b"tap0", 0, &SECRET));
        assert!(reserved_iid(0) && reserved_iid(0xfdff_ffff_ffff_ff80));
        assert!(reserved_iid(u64::from_be_bytes([
            0xfd, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff
        ])));
        assert!(reserved_iid(0x0200_5eff_fe00_5213));
        assert!(!reserved_iid(0xfdff_ffff_ffff_ff7f) && !reserved_iid(1));
        let addr = with_iid(prefix, 0x0123_4567_89ab_cdef);
        assert_eq!(
            addr,
            "fd00:1:2:3:123:4567:89ab:cdef".parse::<Ipv6Addr>().unwrap()
        );
        assert_eq!(link_local(1), "fe80::1".parse::<Ipv6Addr>().unwrap());
    }

    #[test]
    fn an_address_is_ours_after_its_probes_go_unanswered() {
        let t0 = Instant::ZERO;
        let second = Duration::from_secs(1);
        let addr = link_local(42);
        let mut dad = Dad::new(addr, 2, second, t0);
        assert_eq!(dad.state(), DadState::Tentative);
        assert!(dad.poll(t0), "first probe at once");
        assert!(!dad.poll(t0), "not twice");
        assert_eq!(dad.deadline(), Some(t0 + second));
        assert!(dad.poll(t0 + second), "second probe");
        assert!(!dad.poll(t0 + second + Duration::from_millis(999)));
        assert_eq!(dad.state(), DadState::Tentative);
        assert!(!dad.poll(t0 + second * 2));
        assert_eq!(dad.state(), DadState::Preferred);
        assert_eq!(dad.deadline(), None);
        assert!(!dad.conflict(addr), "too late to be a duplicate");
        assert_eq!(Dad::new(addr, 0, second, t0).state(), DadState::Preferred);
    }

    #[test]
    fn a_conflict_while_tentative_makes_a_duplicate() {
        let t0 = Instant::ZERO;
        let addr = link_local(42);
        let mut dad = Dad::new(addr, 1, Duration::from_secs(1), t0);
        assert!(dad.poll(t0));
        assert!(!dad.conflict(link_local(43)), "another address");
        assert!(dad.conflict(addr));
        assert_eq!(dad.state(), DadState::Duplicate);
        assert!(!dad.poll(t0 + Duration::from_secs(5)), "no more probes");
    }
}
