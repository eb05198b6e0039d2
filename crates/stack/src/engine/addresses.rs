//! The engine's own addresses: its IPv4 address, if any, and on an IPv6 link its
//! configured IPv6 addresses and a link-local one, each IPv6 address tentative until
//! duplicate address detection lets it be used (RFC 4862 §5.4). A flow names the
//! address it uses by its index here ([`FlowKey::local`](super::FlowKey)), and every
//! connection on an address shares that address's [`TcbLimits`].

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::rc::Rc;
use std::time::Duration;

use super::EngineConfig;
use crate::io::MacAddr;
use crate::ipv6::address::{self, Dad, DadState};
use crate::tcp::tcb::TcbLimits;
use crate::time::Instant;

/// RFC 4861 §10's RetransTimer: the spacing of duplicate-address probes.
const DAD_INTERVAL: Duration = Duration::from_secs(1);

/// How many link-local addresses are drawn before giving up when each one is found
/// duplicate (RFC 7217 §6's IDGEN_RETRIES).
const IDGEN_RETRIES: u8 = 3;

/// The link-local address of an engine on a device with `mac` under `secret`, draw
/// `try_` (RFC 7217: the interface identifier from the prefix, the MAC as the
/// interface's name, the duplicate-detection counter and the secret).
pub(super) fn link_local(mac: MacAddr, secret: &[u8; 16], try_: u8) -> Ipv6Addr {
    let prefix = Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0, 0, 0);
    address::link_local(address::stable_iid(prefix, &mac.0, try_, secret))
}

/// One of the engine's addresses.
pub(super) struct Address {
    pub(super) ip: IpAddr,
    /// What connections on this address consult, our address among it.
    pub(super) limits: Rc<TcbLimits>,
    /// Our MSS on this address's family: the MTU less the IP and TCP headers.
    pub(super) mss: u16,
    /// Duplicate address detection (IPv6 addresses only).
    dad: Option<Dad>,
    /// Which draw of the link-local identifier this is (`None`: not the link-local
    /// address).
    link_local_try: Option<u8>,
}

impl Address {
    /// Whether traffic may use the address: not tentative, not a duplicate.
    pub(super) fn usable(&self) -> bool {
        self.dad
            .as_ref()
            .is_none_or(|d| d.state() == DadState::Preferred)
    }

    /// Whether duplicate detection is still checking the address.
    fn tentative(&self) -> bool {
        self.dad
            .as_ref()
            .is_some_and(|d| d.state() == DadState::Tentative)
    }
}

/// The engine's addresses.
pub(super) struct Addresses {
    list: Vec<Address>,
    /// The usable IPv6 addresses and their indexes: what the receive path compares a
    /// packet's addresses with. Each as its bytes lie in memory read as one number, so
    /// that a packet's address compares without a byte swap; the link-local address
    /// last, as TCP mostly comes to the configured ones.
    usable6: Vec<(u128, u8)>,
    /// The index of the IPv4 address, if the link has one.
    v4: Option<u8>,
    transmits: u8,
    mac: MacAddr,
    secret: [u8; 16],
}

impl Addresses {
    /// The addresses `cfg` gives an engine on a device with `mtu` and `mac`, with
    /// `tcp` the limits every connection shares (our address set per entry). IPv6
    /// addresses start tentative at `now`.
    pub(super) fn new(
        cfg: &EngineConfig,
        limits: &TcbLimits,
        mtu: usize,
        mac: MacAddr,
        now: Instant,
    ) -> Addresses {
        let mut a = Addresses {
            list: Vec::new(),
            usable6: Vec::new(),
            v4: None,
            transmits: cfg.dad_transmits,
            mac,
            secret: cfg.stable_secret,
        };
        let mss = |ip_header: usize| {
            mtu.saturating_sub(ip_header + crate::tcp::segment::MIN_HEADER_LEN)
                .clamp(64, 65495) as u16
        };
        if cfg.ip != Ipv4Addr::UNSPECIFIED {
            a.v4 = Some(0);
            a.list.push(Address {
                ip: IpAddr::V4(cfg.ip),
                limits: Rc::new(limits.clone().at(IpAddr::V4(cfg.ip))),
                mss: mss(crate::ipv4::HEADER_LEN),
                dad: None,
                link_local_try: None,
            });
        }
        if !cfg.ipv6.is_empty() {
            let v6 = |ip: Ipv6Addr, try_: Option<u8>| Address {
                ip: IpAddr::V6(ip),
                limits: Rc::new(limits.clone().at(IpAddr::V6(ip))),
                mss: mss(crate::ipv6::HEADER_LEN),
                dad: Some(Dad::new(ip, cfg.dad_transmits, DAD_INTERVAL, now)),
                link_local_try: try_,
            };
            let ll = a.link_local(0);
            a.list.push(v6(ll, Some(0)));
            for &(ip, _) in &cfg.ipv6 {
                if ip != ll && !a.list.iter().any(|x| x.ip == IpAddr::V6(ip)) {
                    a.list.push(v6(ip, None));
                }
            }
        }
        debug_assert!(a.list.len() <= usize::from(u8::MAX));
        a.refresh_usable();
        a
    }

    /// Rebuild [`Addresses::usable6`] after a change of duplicate detection.
    fn refresh_usable(&mut self) {
        self.usable6.clear();
        for (i, a) in self.list.iter().enumerate() {
            if let (IpAddr::V6(ip), true) = (a.ip, a.usable()) {
                self.usable6
                    .push((u128::from_ne_bytes(ip.octets()), i as u8));
            }
        }
        self.usable6
            .sort_by_key(|&(ip, _)| Ipv6Addr::from(ip.to_ne_bytes()).is_unicast_link_local());
    }

    /// The index of `ip` if it is one of our usable IPv6 addresses.
    #[inline]
    pub(super) fn usable_v6(&self, ip: &Ipv6Addr) -> Option<u8> {
        let bits = u128::from_ne_bytes(ip.octets());
        self.usable6
            .iter()
            .find(|&&(a, _)| a == bits)
            .map(|&(_, i)| i)
    }

    /// The link-local address of draw `try_` (RFC 7217's DAD_Counter).
    fn link_local(&self, try_: u8) -> Ipv6Addr {
        link_local(self.mac, &self.secret, try_)
    }

    /// The address at `index`.
    #[inline]
    pub(super) fn get(&self, index: u8) -> &Address {
        &self.list[usize::from(index)]
    }

    /// The IPv4 address's index, if the link has one.
    #[inline]
    pub(super) fn v4(&self) -> Option<u8> {
        self.v4
    }

    /// Whether the engine speaks IPv6.
    pub(super) fn has_v6(&self) -> bool {
        self.list.len() > usize::from(self.v4.is_some())
    }

    /// The IPv6 addresses, usable or not.
    pub(super) fn v6(&self) -> impl Iterator<Item = (u8, &Address, Ipv6Addr)> + '_ {
        self.list
            .iter()
            .enumerate()
            .filter_map(|(i, a)| match a.ip {
                IpAddr::V6(ip) => Some((i as u8, a, ip)),
                IpAddr::V4(_) => None,
            })
    }

    /// The index of IPv6 address `ip` if it is ours, usable or not.
    pub(super) fn find_v6(&self, ip: Ipv6Addr) -> Option<u8> {
        self.v6().find(|&(_, _, a)| a == ip).map(|(i, _, _)| i)
    }

    /// The address to reach `remote` from (RFC 6724's rules, cut to what a host with
    /// one link needs): for IPv4 the IPv4 address; for a link-local peer our
    /// link-local address; otherwise the usable global address sharing the longest
    /// prefix with it. `None` when no usable address fits.
    pub(super) fn source_for(&self, remote: IpAddr) -> Option<u8> {
        let remote = match remote {
            IpAddr::V4(_) => return self.v4,
            IpAddr::V6(r) => r,
        };
        let link_local = remote.is_unicast_link_local();
        self.v6()
            .filter(|(_, a, ip)| a.usable() && ip.is_unicast_link_local() == link_local)
            .max_by_key(|&(i, _, ip)| {
                let common = (u128::from(ip) ^ u128::from(remote)).leading_zeros();
                // Ties go to the address configured first.
                (common, u8::MAX - i)
            })
            .map(|(i, _, _)| i)
    }

    /// Whether an active open to `remote` has no source address yet but will once
    /// duplicate detection is over: none usable fits it, and one that would is
    /// tentative.
    pub(super) fn awaiting_source(&self, remote: IpAddr) -> bool {
        let IpAddr::V6(r) = remote else {
            return false;
        };
        self.source_for(remote).is_none()
            && self.v6().any(|(_, a, ip)| {
                a.tentative() && ip.is_unicast_link_local() == r.is_unicast_link_local()
            })
    }

    /// Addresses whose duplicate detection has a probe due at `now`, into `out`;
    /// addresses whose last probe went unanswered become usable.
    pub(super) fn poll_dad(&mut self, now: Instant, out: &mut Vec<Ipv6Addr>) {
        for a in &mut self.list {
            if let (Some(dad), IpAddr::V6(ip)) = (&mut a.dad, a.ip) {
                if dad.poll(now) {
                    out.push(ip);
                }
            }
        }
        self.refresh_usable();
    }

    /// When duplicate detection next has something to do.
    pub(super) fn next_dad_deadline(&self) -> Option<Instant> {
        self.list
            .iter()
            .filter_map(|a| a.dad.as_ref()?.deadline())
            .min()
    }

    /// Another node probes or holds `target`: if it is one of our tentative addresses,
    /// that address is a duplicate and is not used. A link-local address is drawn
    /// again (RFC 7217 §6), up to [`IDGEN_RETRIES`] times, and probed from `now`.
    /// Whether `target` was a tentative address of ours.
    pub(super) fn conflict(&mut self, target: Ipv6Addr, now: Instant) -> bool {
        let Some(index) = self.find_v6(target) else {
            return false;
        };
        let next_try = {
            let a = &mut self.list[usize::from(index)];
            let Some(dad) = &mut a.dad else { return false };
            if !dad.conflict(target) {
                return false;
            }
            a.link_local_try
                .map(|t| t + 1)
                .filter(|&t| t <= IDGEN_RETRIES)
        };
        if let Some(t) = next_try {
            let ip = self.link_local(t);
            let a = &mut self.list[usize::from(index)];
            a.ip = IpAddr::V6(ip);
            a.limits = Rc::new((*a.limits).clone().at(IpAddr::V6(ip)));
            a.dad = Some(Dad::new(ip, self.transmits, DAD_INTERVAL, now));
            a.link_local_try = Some(t);
        }
        self.refresh_usable();
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tcp::config::TcpConfig;

    fn addrs(v4: bool, v6: &[&str], transmits: u8) -> Addresses {
        let mut cfg = EngineConfig::new(if v4 {
            Ipv4Addr::new(10, 0, 0, 1)
        } else {
            Ipv4Addr::UNSPECIFIED
        });
        cfg.ipv6 = v6.iter().map(|s| (s.parse().unwrap(), 64)).collect();
        cfg.dad_transmits = transmits;
        let limits = TcbLimits::new(&TcpConfig::default());
        Addresses::new(
            &cfg,
            &limits,
            1500,
            MacAddr([2, 0, 0, 0, 0, 1]),
            Instant::ZERO,
        )
    }

    #[test]
    fn ipv4_only_has_one_address_and_no_ipv6() {
        let a = addrs(true, &[], 1);
        assert_eq!(a.v4(), Some(0));
        assert!(!a.has_v6());
        assert_eq!(a.get(0).mss, 1460);
        assert_eq!(a.source_for("fd00::1".parse().unwrap()), None);
    }

    #[test]
    fn ipv6_gets_a_link_local_address_and_waits_for_detection() {
        let mut a = addrs(false, &["fd00::2", "2001:db8::2"], 1);
        assert_eq!(a.v4(), None);
        let v6: Vec<Ipv6Addr> = a.v6().map(|(_, _, ip)| ip).collect();
        assert_eq!(v6.len(), 3);
        assert!(v6[0].is_unicast_link_local());
        assert_eq!(a.get(1).mss, 1440);
        // Tentative: nothing to send from yet.
        assert_eq!(a.source_for("fd00::9".parse().unwrap()), None);
        let mut probes = Vec::new();
        a.poll_dad(Instant::ZERO, &mut probes);
        assert_eq!(probes, v6);
        probes.clear();
        a.poll_dad(Instant::from_millis(999), &mut probes);
        assert!(probes.is_empty() && !a.get(1).usable());
        a.poll_dad(Instant::from_millis(1000), &mut probes);
        assert!(probes.is_empty() && a.get(1).usable());
        assert_eq!(a.next_dad_deadline(), None);
        // The longest common prefix picks the source; a link-local peer gets ours.
        assert_eq!(a.source_for("fd00::9".parse().unwrap()), Some(1));
        assert_eq!(a.source_for("2001:db8::77".parse().unwrap()), Some(2));
        assert_eq!(a.source_for("fe80::5".parse().unwrap()), Some(0));
        assert_eq!(a.source_for("10.0.0.2".parse().unwrap()), None);
    }

    #[test]
    fn a_duplicate_is_not_used_and_a_link_local_one_is_drawn_again() {
        let mut a = addrs(true, &["fd00::2"], 1);
        let ll = a.get(1).ip;
        let IpAddr::V6(ll) = ll else { panic!() };
        assert!(a.conflict("fd00::2".parse().unwrap(), Instant::ZERO));
        assert!(!a.get(2).usable());
        // Not ours, or no longer tentative: no conflict.
        assert!(!a.conflict("fd00::3".parse().unwrap(), Instant::ZERO));
        assert!(a.conflict(ll, Instant::ZERO));
        let IpAddr::V6(again) = a.get(1).ip else {
            panic!()
        };
        assert_ne!(again, ll);
        assert!(again.is_unicast_link_local());
        assert_eq!(a.get(1).limits.local_ip(), IpAddr::V6(again));
        let mut probes = Vec::new();
        a.poll_dad(Instant::ZERO, &mut probes);
        assert_eq!(probes, vec![again]);
        // Without detection, addresses are usable at once.
        let a = addrs(false, &["fd00::2"], 0);
        assert!(a.get(1).usable() && a.get(0).usable());
    }
}
