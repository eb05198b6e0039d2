//! Addresses as a socket of either family has them, and the rules Linux binds and
//! connects them by.
//!
//! A socket keeps its addresses as the engine sees them ([`canonical`]): IPv4 traffic
//! as `SocketAddr::V4`, on an AF_INET6 socket too. The program sees them in its
//! socket's family ([`Family::shown`]): on an AF_INET6 socket an IPv4 address is
//! IPv4-mapped (`::ffff:a.b.c.d`, RFC 4291 §2.5.5.2, RFC 3493 §3.7), and a link-local
//! address carries the link's interface index as its scope (RFC 4007 §6).
//!
//! What a bound socket takes is a [`Binding`]: an AF_INET6 socket bound to `[::]`
//! takes both families unless `IPV6_V6ONLY` is set (Linux's default,
//! `net.ipv6.bindv6only=0`), one bound to `::ffff:a.b.c.d` takes IPv4 only, one bound
//! to an IPv6 address that address only. Two sockets may share a port when what they
//! take does not overlap, which is how Linux's `inet_rcv_saddr_equal` decides.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV6};

use super::{Errno, Stack};

/// A socket's address family.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Family {
    /// `AF_INET`.
    V4,
    /// `AF_INET6`: IPv6, and IPv4 as IPv4-mapped addresses unless `IPV6_V6ONLY`.
    V6,
}

impl Family {
    /// The family's `AF_*` number.
    pub fn domain(self) -> i32 {
        match self {
            Family::V4 => libc::AF_INET,
            Family::V6 => libc::AF_INET6,
        }
    }

    /// The family of `AF_*` number `domain`, if it is one of the two.
    pub fn of_domain(domain: i32) -> Option<Family> {
        match domain {
            libc::AF_INET => Some(Family::V4),
            libc::AF_INET6 => Some(Family::V6),
            _ => None,
        }
    }

    /// The wildcard address of the family, port 0: an unbound socket's name.
    pub(super) fn unspecified(self) -> SocketAddr {
        match self {
            Family::V4 => SocketAddr::from((Ipv4Addr::UNSPECIFIED, 0)),
            Family::V6 => SocketAddr::from((Ipv6Addr::UNSPECIFIED, 0)),
        }
    }

    /// Canonical address `a` as a socket of this family shows it, with `scope` (the
    /// link's interface index) on a link-local IPv6 address.
    pub(super) fn shown(self, a: SocketAddr, scope: u32) -> SocketAddr {
        match (self, a) {
            (Family::V6, SocketAddr::V4(v4)) => {
                SocketAddr::V6(SocketAddrV6::new(v4.ip().to_ipv6_mapped(), v4.port(), 0, 0))
            }
            (_, SocketAddr::V6(v6)) => {
                let scope = if v6.ip().is_unicast_link_local() {
                    scope
                } else {
                    0
                };
                SocketAddr::V6(SocketAddrV6::new(*v6.ip(), v6.port(), 0, scope))
            }
            (Family::V4, a) => a,
        }
    }
}

/// `a` as the engine sees it: an IPv4-mapped address is IPv4.
pub fn canonical(a: SocketAddr) -> SocketAddr {
    match a {
        SocketAddr::V6(v6) => match v6.ip().to_ipv4_mapped() {
            Some(v4) => SocketAddr::from((v4, v6.port())),
            None => a,
        },
        a => a,
    }
}

/// What a bound socket takes: the local addresses of the connections it may have.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Binding {
    /// The IPv4 addresses: `None` none, `Some(None)` all, `Some(Some(a))` only `a`.
    v4: Option<Option<Ipv4Addr>>,
    /// The IPv6 addresses, the same way.
    v6: Option<Option<Ipv6Addr>>,
}

impl Binding {
    /// A socket of `family` bound to canonical `local`, with `IPV6_V6ONLY` as `v6only`.
    pub(super) fn new(family: Family, local: SocketAddr, v6only: bool) -> Binding {
        let one_or_all = |unspecified: bool, a| (!unspecified).then_some(a);
        match (family, local.ip()) {
            (_, IpAddr::V4(a)) => Binding {
                v4: Some(one_or_all(a.is_unspecified(), a)),
                v6: None,
            },
            (Family::V4, IpAddr::V6(_)) => Binding { v4: None, v6: None },
            (Family::V6, IpAddr::V6(a)) if a.is_unspecified() => Binding {
                v4: (!v6only).then_some(None),
                v6: Some(None),
            },
            (Family::V6, IpAddr::V6(a)) => Binding {
                v4: None,
                v6: Some(Some(a)),
            },
        }
    }

    /// Whether a connection to canonical `local` is this socket's to take.
    pub(super) fn takes(&self, local: IpAddr) -> bool {
        match local {
            IpAddr::V4(a) => self.v4.is_some_and(|b| b.is_none_or(|b| b == a)),
            IpAddr::V6(a) => self.v6.is_some_and(|b| b.is_none_or(|b| b == a)),
        }
    }

    /// Whether the socket takes IPv4 connections, and whether IPv6 ones.
    pub(super) fn families(&self) -> (bool, bool) {
        (self.v4.is_some(), self.v6.is_some())
    }

    /// Whether some connection could be either socket's: then they may not share a
    /// port (without `SO_REUSEPORT`).
    pub(super) fn overlaps(&self, other: &Binding) -> bool {
        fn meet<A: PartialEq>(x: Option<Option<A>>, y: Option<Option<A>>) -> bool {
            match (x, y) {
                (Some(Some(a)), Some(Some(b))) => a == b,
                (Some(_), Some(_)) => true,
                _ => false,
            }
        }
        meet(self.v4, other.v4) || meet(self.v6, other.v6)
    }

    /// How closely the binding fits a connection it takes, for the choice among
    /// sockets sharing a port: a bound address before the wildcard, then an AF_INET
    /// socket before an AF_INET6 one, as Linux's listener lookup scores them.
    pub(super) fn fit(&self, family: Family) -> u8 {
        let specific = matches!(self.v4, Some(Some(_))) || matches!(self.v6, Some(Some(_)));
        2 * u8::from(specific) + u8::from(family == Family::V4)
    }
}

impl Stack {
    /// The link's interface index, the scope of its link-local addresses.
    pub fn link_index(&self) -> u32 {
        self.link_index
    }

    /// Name the link's interface index (`if_nametoindex` of the TAP or the AF_XDP
    /// interface): the scope a link-local address of the link is given and must be
    /// given with.
    pub fn set_link_index(&mut self, index: u32) {
        self.link_index = index;
    }

    /// Whether sockets of `family` belong on this stack: AF_INET ones when the link has
    /// an IPv4 address; AF_INET6 ones always (on a link without IPv6 they carry IPv4
    /// as IPv4-mapped addresses).
    pub fn speaks(&self, family: Family) -> bool {
        match family {
            Family::V4 => !self.address().is_unspecified(),
            Family::V6 => true,
        }
    }

    /// Whether IPv6 address `ip` is one of the stack's own.
    fn owns_v6(&self, ip: Ipv6Addr) -> bool {
        self.engine.ipv6_addresses().contains(&ip)
    }

    /// Whether a socket bound to `addr` (as the program gave it) belongs on this
    /// stack: the wildcard or one of the stack's own addresses (an IPv4 one mapped, on
    /// an AF_INET6 socket). `Ok(false)`: the kernel's (loopback, another interface's
    /// address, one nobody has). Errors are Linux's for addresses no TCP socket may
    /// bind: a group, or a link-local address without a scope.
    pub fn binds(&self, addr: SocketAddr) -> Result<bool, Errno> {
        let v4 = |ip: Ipv4Addr| ip.is_unspecified() || ip == self.address();
        let a = match addr {
            SocketAddr::V4(a) => return Ok(v4(*a.ip())),
            SocketAddr::V6(a) => a,
        };
        let ip = *a.ip();
        if let Some(mapped) = ip.to_ipv4_mapped() {
            return Ok(v4(mapped));
        }
        if ip.is_multicast() {
            return Err(Errno(libc::EINVAL));
        }
        if ip.is_unicast_link_local() {
            if a.scope_id() == 0 {
                return Err(Errno(libc::EINVAL));
            }
            if a.scope_id() != self.link_index {
                return Ok(false);
            }
        }
        Ok(ip.is_unspecified() || self.owns_v6(ip))
    }

    /// Whether a connection to `addr` (as the program gave it) belongs on this stack:
    /// an address its link reaches, other than loopback, the unspecified address,
    /// broadcast and groups (those stay the kernel's). A link-local peer needs the
    /// link's scope (another interface's is the kernel's; none is Linux's `EINVAL`).
    pub fn carries(&self, addr: SocketAddr) -> Result<bool, Errno> {
        let v4 = |ip: Ipv4Addr| {
            !(ip.is_loopback() || ip.is_unspecified() || ip.is_multicast() || ip.is_broadcast())
                && self.speaks(Family::V4)
                && self.engine.routes(ip)
        };
        let a = match addr {
            SocketAddr::V4(a) => return Ok(v4(*a.ip())),
            SocketAddr::V6(a) => a,
        };
        let ip = *a.ip();
        if let Some(mapped) = ip.to_ipv4_mapped() {
            return Ok(v4(mapped));
        }
        if ip.is_unicast_link_local() {
            if a.scope_id() == 0 {
                return Err(Errno(libc::EINVAL));
            }
            return Ok(a.scope_id() == self.link_index && self.engine.routes_v6(ip));
        }
        Ok(
            !(ip.is_loopback() || ip.is_unspecified() || ip.is_multicast())
                && self.engine.routes_v6(ip),
        )
    }
}

/// Bytes in a `sockaddr_in`.
const SIN_LEN: usize = 16;
/// Bytes in a `sockaddr_in6` without its scope, RFC 2133's: the least Linux takes.
const SIN6_LEN_RFC2133: usize = 24;
/// Bytes in a `sockaddr_in6`.
const SIN6_LEN: usize = 28;
/// The most bytes of a socket address a call takes (`sockaddr_storage`); longer is
/// `EINVAL`.
pub const MAX_SOCKADDR: usize = 128;

/// The `sa_family` of a socket address (host order), if it is long enough to have one.
fn sa_family(raw: &[u8]) -> Option<i32> {
    let f: [u8; 2] = raw.get(..2)?.try_into().ok()?;
    Some(i32::from(u16::from_ne_bytes(f)))
}

fn port_of(raw: &[u8]) -> u16 {
    u16::from_be_bytes([raw[2], raw[3]])
}

/// A `sockaddr_in` of at least [`SIN_LEN`] bytes.
fn v4_of(raw: &[u8]) -> SocketAddr {
    let ip = Ipv4Addr::new(raw[4], raw[5], raw[6], raw[7]);
    SocketAddr::from((ip, port_of(raw)))
}

/// A `sockaddr_in6` as Linux's `inet6_bind` and `tcp_v6_connect` take it: at least
/// RFC 2133's 24 bytes (`EINVAL`), of family AF_INET6 (`EAFNOSUPPORT`); the scope
/// only when the 28 bytes of RFC 2553's are there.
fn v6_of(raw: &[u8]) -> Result<SocketAddr, Errno> {
    if raw.len() < SIN6_LEN_RFC2133 {
        return Err(Errno(libc::EINVAL));
    }
    if sa_family(raw) != Some(libc::AF_INET6) {
        return Err(Errno(libc::EAFNOSUPPORT));
    }
    let mut octets = [0u8; 16];
    octets.copy_from_slice(&raw[8..24]);
    let scope = match raw.get(24..SIN6_LEN) {
        Some(s) => u32::from_ne_bytes(s.try_into().map_err(|_| Errno(libc::EINVAL))?),
        None => 0,
    };
    let ip = Ipv6Addr::from(octets);
    Ok(SocketAddr::V6(SocketAddrV6::new(
        ip,
        port_of(raw),
        0,
        scope,
    )))
}

/// The address `bind` on a socket of `family` was given (`raw`: the program's bytes,
/// as long as it said, at most [`MAX_SOCKADDR`]), or Linux's error for it: too short
/// for the family is `EINVAL`, another family `EAFNOSUPPORT` (but AF_INET takes
/// AF_UNSPEC with the wildcard address, as Linux does for old programs).
pub fn bind_address(raw: &[u8], family: Family) -> Result<SocketAddr, Errno> {
    match family {
        Family::V4 => {
            if raw.len() < SIN_LEN {
                return Err(Errno(libc::EINVAL));
            }
            let a = v4_of(raw);
            match sa_family(raw) {
                Some(libc::AF_INET) => Ok(a),
                Some(libc::AF_UNSPEC) if a.ip().is_unspecified() => Ok(a),
                _ => Err(Errno(libc::EAFNOSUPPORT)),
            }
        }
        Family::V6 => v6_of(raw),
    }
}

/// The peer `connect` on a socket of `family` was given, as [`bind_address`] reads
/// it; `None` for AF_UNSPEC, which asks to dissolve the socket's association.
pub fn connect_address(raw: &[u8], family: Family) -> Result<Option<SocketAddr>, Errno> {
    match (sa_family(raw), family) {
        (None, _) => Err(Errno(libc::EINVAL)),
        (Some(libc::AF_UNSPEC), _) => Ok(None),
        (Some(_), Family::V4) if raw.len() < SIN_LEN => Err(Errno(libc::EINVAL)),
        (Some(libc::AF_INET), Family::V4) => Ok(Some(v4_of(raw))),
        (Some(_), Family::V4) => Err(Errno(libc::EAFNOSUPPORT)),
        (Some(_), Family::V6) => v6_of(raw).map(Some),
    }
}

/// `a` as the program's socket address: the bytes of a `sockaddr_in` or a
/// `sockaddr_in6` (flow label 0), and how many there are.
pub fn sockaddr_of(a: SocketAddr) -> ([u8; SIN6_LEN], usize) {
    let mut out = [0u8; SIN6_LEN];
    out[2..4].copy_from_slice(&a.port().to_be_bytes());
    match a {
        SocketAddr::V4(v4) => {
            out[..2].copy_from_slice(&(libc::AF_INET as u16).to_ne_bytes());
            out[4..8].copy_from_slice(&v4.ip().octets());
            (out, SIN_LEN)
        }
        SocketAddr::V6(v6) => {
            out[..2].copy_from_slice(&(libc::AF_INET6 as u16).to_ne_bytes());
            out[8..24].copy_from_slice(&v6.ip().octets());
            out[24..].copy_from_slice(&v6.scope_id().to_ne_bytes());
            (out, SIN6_LEN)
        }
    }
}
