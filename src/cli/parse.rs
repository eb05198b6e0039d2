//! The small value grammars of the command line: addresses with a prefix length
//! (`10.0.2.2/24,fd00::2/64`, for link addresses and `--tap-host`), CPU lists (`0,2-3`)
//! and congestion-control names (`cubic`).
//!
//! There is one address parser so that a link's addresses and the TAP's host addresses
//! read the same way: a missing prefix means [`DEFAULT_PREFIX_LEN`] (/24) for IPv4 and
//! [`DEFAULT_PREFIX_LEN_V6`] (/64) for IPv6 in both.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use rusty_stack::CongestionAlgorithm;
use rusty_stack::MemoryBudget;

/// The prefix length of an address given without one. The original Rusty's command line
/// gave bare addresses on a /24 lab link, and [`EngineConfig::new`](crate::EngineConfig::new)
/// assumes the same, so `10.0.2.2` and `10.0.2.2/24` mean one thing everywhere.
pub const DEFAULT_PREFIX_LEN: u8 = 24;

/// The prefix length of an IPv6 address given without one: a /64, the subnet size of
/// nearly every IPv6 link (RFC 4291 §2.5.4 gives unicast addresses 64-bit interface
/// identifiers).
pub const DEFAULT_PREFIX_LEN_V6: u8 = 64;

/// Why an address argument was refused; each names the argument (or the element of a
/// list) it was given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CidrError {
    /// The part before `/` (or the whole argument) is not a dotted-quad IPv4 address.
    NotAnAddress(String),
    /// The part after `/` is not a number.
    NotAPrefix(String),
    /// A prefix longer than an IPv4 address.
    PrefixOver32(String, u32),
    /// An element of an address list is neither an IPv4 nor an IPv6 address.
    NotAnIpAddress(String),
    /// A prefix longer than an IPv6 address.
    PrefixOver128(String, u32),
    /// An address list with more than one IPv4 address (the list).
    SecondIpv4(String),
    /// An address list naming an address twice (the list, the address).
    Repeated(String, IpAddr),
}

impl fmt::Display for CidrError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CidrError::NotAnAddress(s) => write!(
                f,
                "'{s}' is not an IPv4 address (a.b.c.d or a.b.c.d/prefix; no prefix means /{DEFAULT_PREFIX_LEN})"
            ),
            CidrError::NotAPrefix(s) => {
                write!(f, "'{s}': the part after '/' is not a prefix length (0 to 32)")
            }
            CidrError::PrefixOver32(s, len) => {
                write!(f, "'{s}': prefix length /{len} is over 32")
            }
            CidrError::NotAnIpAddress(s) => write!(
                f,
                "'{s}' is not an IPv4 or IPv6 address (a.b.c.d[/prefix] or an IPv6 \
                 address[/prefix], several separated by commas; no prefix means \
                 /{DEFAULT_PREFIX_LEN} for IPv4, /{DEFAULT_PREFIX_LEN_V6} for IPv6)"
            ),
            CidrError::PrefixOver128(s, len) => {
                write!(f, "'{s}': prefix length /{len} is over 128")
            }
            CidrError::SecondIpv4(s) => write!(
                f,
                "'{s}': at most one IPv4 address per link (IPv6 addresses may be several)"
            ),
            CidrError::Repeated(s, ip) => write!(f, "'{s}' names {ip} twice"),
        }
    }
}

impl std::error::Error for CidrError {}

/// Parse `a.b.c.d` or `a.b.c.d/len`; a missing prefix means [`DEFAULT_PREFIX_LEN`].
pub fn parse_cidr(s: &str) -> Result<(Ipv4Addr, u8), CidrError> {
    let (ip, len) = match s.split_once('/') {
        Some((ip, len)) => (ip, Some(len)),
        None => (s, None),
    };
    let ip: Ipv4Addr = ip
        .parse()
        .map_err(|_| CidrError::NotAnAddress(s.to_string()))?;
    let Some(len) = len else {
        return Ok((ip, DEFAULT_PREFIX_LEN));
    };
    // Read wider than u8 so that /300 is reported as over 32, not as "not a number".
    let len: u32 = len
        .parse()
        .map_err(|_| CidrError::NotAPrefix(s.to_string()))?;
    match u8::try_from(len) {
        Ok(len) if len <= 32 => Ok((ip, len)),
        _ => Err(CidrError::PrefixOver32(s.to_string(), len)),
    }
}

/// Parse an IPv4 or IPv6 address with an optional prefix length (`10.0.2.2/24`,
/// `fd00::2/64`); a missing prefix means [`DEFAULT_PREFIX_LEN`] for IPv4 and
/// [`DEFAULT_PREFIX_LEN_V6`] for IPv6.
pub fn parse_ip_cidr(s: &str) -> Result<(IpAddr, u8), CidrError> {
    let (ip, len) = match s.split_once('/') {
        Some((ip, len)) => (ip, Some(len)),
        None => (s, None),
    };
    let ip: IpAddr = ip
        .parse()
        .map_err(|_| CidrError::NotAnIpAddress(s.to_string()))?;
    let (default, max) = match ip {
        IpAddr::V4(_) => (DEFAULT_PREFIX_LEN, 32),
        IpAddr::V6(_) => (DEFAULT_PREFIX_LEN_V6, 128),
    };
    let Some(len) = len else {
        return Ok((ip, default));
    };
    let len: u32 = len
        .parse()
        .map_err(|_| CidrError::NotAPrefix(s.to_string()))?;
    match u8::try_from(len) {
        Ok(len) if u32::from(len) <= max => Ok((ip, len)),
        _ if ip.is_ipv4() => Err(CidrError::PrefixOver32(s.to_string(), len)),
        _ => Err(CidrError::PrefixOver128(s.to_string(), len)),
    }
}

/// The addresses of one link, or of the TAP's host side: at most one IPv4 address and
/// any number of IPv6 ones, each with its prefix length, in the order given.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Addresses {
    /// The IPv4 address, if one was given.
    pub ipv4: Option<(Ipv4Addr, u8)>,
    /// The IPv6 addresses.
    pub ipv6: Vec<(Ipv6Addr, u8)>,
}

impl fmt::Display for Addresses {
    /// The list as [`parse_addresses`] reads it, prefixes included.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let v4 = self.ipv4.iter().map(|(ip, len)| format!("{ip}/{len}"));
        let v6 = self.ipv6.iter().map(|(ip, len)| format!("{ip}/{len}"));
        let all: Vec<String> = v4.chain(v6).collect();
        f.write_str(&all.join(","))
    }
}

/// Parse a comma-separated list of addresses, each as [`parse_ip_cidr`] reads it
/// (`10.0.2.2/24,fd00::2`): at most one IPv4 address, none twice.
pub fn parse_addresses(s: &str) -> Result<Addresses, CidrError> {
    let mut out = Addresses::default();
    for part in s.split(',') {
        if part.is_empty() {
            return Err(CidrError::NotAnIpAddress(s.to_string()));
        }
        let (ip, len) = parse_ip_cidr(part)?;
        let repeated = match ip {
            IpAddr::V4(v4) => out.ipv4.is_some_and(|(a, _)| a == v4),
            IpAddr::V6(v6) => out.ipv6.iter().any(|&(a, _)| a == v6),
        };
        if repeated {
            return Err(CidrError::Repeated(s.to_string(), ip));
        }
        match ip {
            IpAddr::V4(_) if out.ipv4.is_some() => {
                return Err(CidrError::SecondIpv4(s.to_string()))
            }
            IpAddr::V4(v4) => out.ipv4 = Some((v4, len)),
            IpAddr::V6(v6) => out.ipv6.push((v6, len)),
        }
    }
    Ok(out)
}

/// Why `ip` cannot be an address a host holds on a link (the unspecified address, a
/// group, loopback and the rest of `::/8`, which IPv4-mapped and -compatible addresses
/// live in), if it cannot.
pub fn not_a_host_address(ip: Ipv6Addr) -> Option<&'static str> {
    if ip.is_unspecified() {
        Some("the unspecified address")
    } else if ip.is_multicast() {
        Some("a multicast address")
    } else if ip.octets()[0] == 0 {
        Some("in ::/8 (loopback, IPv4-mapped and reserved addresses)")
    } else {
        None
    }
}

/// Parse `--tap-host`: the host side's addresses, as [`parse_addresses`] reads them,
/// each IPv6 one an address a host may hold.
pub fn parse_host_addresses(s: &str) -> Result<Addresses, String> {
    let addrs = parse_addresses(s).map_err(|e| e.to_string())?;
    if let Some((ip, why)) = addrs
        .ipv6
        .iter()
        .find_map(|&(ip, _)| Some((ip, not_a_host_address(ip)?)))
    {
        return Err(format!(
            "'{s}': {ip} is {why}, not an address a host can hold"
        ));
    }
    Ok(addrs)
}

/// Highest CPU number a list may name: Linux's `NR_CPUS` limit on x86_64, so that a
/// typo such as `0-4000000000` is refused instead of allocating a list that size.
pub const MAX_CPU: usize = 8191;

/// Parse a CPU list such as `0,2-3` into the CPUs in the order given.
pub fn parse_cpus(s: &str) -> Result<Vec<usize>, String> {
    let mut out = Vec::new();
    for part in s.split(',').filter(|p| !p.is_empty()) {
        let bad = || format!("'{part}' is not a CPU number or range");
        let cpu = |n: &str| match n.parse::<usize>() {
            Ok(c) if c <= MAX_CPU => Ok(c),
            Ok(_) => Err(format!("CPU {n} is above {MAX_CPU}")),
            Err(_) => Err(bad()),
        };
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b) = (cpu(a)?, cpu(b)?);
                if a > b {
                    return Err(bad());
                }
                out.extend(a..=b);
            }
            None => out.push(cpu(part)?),
        }
    }
    if out.is_empty() {
        return Err(format!("'{s}' names no CPU"));
    }
    Ok(out)
}

/// Parse a congestion-control name as [`CongestionAlgorithm::name`] spells it.
pub fn parse_congestion(s: &str) -> Result<CongestionAlgorithm, String> {
    CongestionAlgorithm::from_name(s).ok_or_else(|| {
        let names: Vec<_> = CongestionAlgorithm::ALL.iter().map(|a| a.name()).collect();
        format!(
            "unknown congestion control '{s}' (expected {})",
            names.join(" or ")
        )
    })
}

/// Parse a size in bytes: digits with an optional binary suffix K, M or G
/// (`64K` = 65,536).
pub fn parse_size(s: &str) -> Result<usize, String> {
    let t = s.trim();
    let (digits, shift) = match t.char_indices().last() {
        Some((i, 'K' | 'k')) => (&t[..i], 10),
        Some((i, 'M' | 'm')) => (&t[..i], 20),
        Some((i, 'G' | 'g')) => (&t[..i], 30),
        _ => (t, 0),
    };
    let n: usize = digits
        .parse()
        .map_err(|_| format!("'{s}' is no size (digits with an optional K, M or G)"))?;
    n.checked_mul(1 << shift)
        .ok_or_else(|| format!("'{s}' is too large"))
}

/// Parse a port range `LOW-HIGH` (Linux's `ip_local_port_range`, with a dash): both
/// ports at least 1, LOW <= HIGH.
pub fn parse_port_range(s: &str) -> Result<std::ops::RangeInclusive<u16>, String> {
    let (lo, hi) = s
        .split_once('-')
        .ok_or_else(|| format!("'{s}' is not LOW-HIGH (e.g. 32768-60999)"))?;
    let port = |p: &str| match p.trim().parse::<u16>() {
        Ok(0) | Err(_) => Err(format!("'{p}' is no port (1 to 65535)")),
        Ok(n) => Ok(n),
    };
    let (lo, hi) = (port(lo)?, port(hi)?);
    if lo > hi {
        return Err(format!("'{s}': need LOW <= HIGH"));
    }
    Ok(lo..=hi)
}

/// Parse `LOW,PRESSURE,LIMIT` (sizes as [`parse_size`] reads them, in that order, like
/// Linux's `tcp_mem` but in bytes) into a [`MemoryBudget`].
pub fn parse_memory_budget(s: &str) -> Result<MemoryBudget, String> {
    let parts: Vec<&str> = s.split(',').collect();
    let [low, pressure, limit] = parts[..] else {
        return Err(format!(
            "'{s}' is not LOW,PRESSURE,LIMIT (three sizes, e.g. 128M,192M,256M)"
        ));
    };
    let (low, pressure, limit) = (parse_size(low)?, parse_size(pressure)?, parse_size(limit)?);
    if !(low <= pressure && pressure <= limit) {
        return Err(format!("'{s}': need LOW <= PRESSURE <= LIMIT"));
    }
    Ok(MemoryBudget::new(low, pressure, limit))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn port_ranges() {
        assert_eq!(parse_port_range("32768-60999"), Ok(32768..=60999));
        assert_eq!(parse_port_range("1024-1024"), Ok(1024..=1024));
        for bad in [
            "",
            "1024",
            "0-10",
            "10-0",
            "2000-1000",
            "1-65536",
            "a-b",
            "1--2",
        ] {
            assert!(parse_port_range(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn sizes_and_memory_budgets() {
        assert_eq!(parse_size("4096"), Ok(4096));
        assert_eq!(parse_size("64K"), Ok(64 << 10));
        assert_eq!(parse_size("3m"), Ok(3 << 20));
        assert_eq!(parse_size("1G"), Ok(1 << 30));
        for bad in ["", "K", "1.5M", "-1", "12T", "99999999999999999999G"] {
            assert!(parse_size(bad).is_err(), "{bad}");
        }
        assert_eq!(
            parse_memory_budget("1M,2M,3M"),
            Ok(MemoryBudget::new(1 << 20, 2 << 20, 3 << 20))
        );
        for bad in ["1M,2M", "1M,2M,3M,4M", "3M,2M,1M", "1M,x,3M"] {
            assert!(parse_memory_budget(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_missing_prefix_means_24() {
        assert_eq!(
            parse_cidr("10.0.0.1/16"),
            Ok((Ipv4Addr::new(10, 0, 0, 1), 16))
        );
        assert_eq!(parse_cidr("10.0.0.1"), Ok((Ipv4Addr::new(10, 0, 0, 1), 24)));
        assert_eq!(parse_cidr("10.0.0.1"), parse_cidr("10.0.0.1/24"));
        assert_eq!(parse_cidr("0.0.0.0/0"), Ok((Ipv4Addr::UNSPECIFIED, 0)));
        assert_eq!(
            parse_cidr("10.0.0.1/32"),
            Ok((Ipv4Addr::new(10, 0, 0, 1), 32))
        );
    }

    #[test]
    fn bad_addresses_are_refused_with_the_reason() {
        for s in ["10.0.0.300", "10.0.0", "tap0", "", "/24", "10.0.0.1 /24"] {
            assert_eq!(
                parse_cidr(s),
                Err(CidrError::NotAnAddress(s.into())),
                "{s:?}"
            );
        }
        for s in ["10.0.0.1/", "10.0.0.1/x", "10.0.0.1/-1", "10.0.0.1/24/8"] {
            assert_eq!(parse_cidr(s), Err(CidrError::NotAPrefix(s.into())), "{s:?}");
        }
        assert_eq!(
            parse_cidr("10.0.0.1/33"),
            Err(CidrError::PrefixOver32("10.0.0.1/33".into(), 33))
        );
        assert_eq!(
            parse_cidr("10.0.0.1/300").unwrap_err().to_string(),
            "'10.0.0.1/300': prefix length /300 is over 32"
        );
        assert_eq!(
            parse_cidr("10.0.0.300").unwrap_err().to_string(),
            "'10.0.0.300' is not an IPv4 address (a.b.c.d or a.b.c.d/prefix; no prefix means /24)"
        );
    }

    #[test]
    fn address_lists_take_either_family_with_its_own_default_prefix() {
        let v6 = |s: &str| s.parse::<Ipv6Addr>().unwrap();
        let a = parse_addresses("10.0.2.2/16,fd00::2,fd00:1::2/48").unwrap();
        assert_eq!(a.ipv4, Some((Ipv4Addr::new(10, 0, 2, 2), 16)));
        assert_eq!(a.ipv6, vec![(v6("fd00::2"), 64), (v6("fd00:1::2"), 48)]);
        assert_eq!(a.to_string(), "10.0.2.2/16,fd00::2/64,fd00:1::2/48");
        assert_eq!(parse_addresses(&a.to_string()), Ok(a));
        let only6 = parse_addresses("fd00::2").unwrap();
        assert_eq!((only6.ipv4, only6.ipv6.len()), (None, 1));
        assert_eq!(
            parse_addresses("10.0.2.2").unwrap().ipv4,
            Some((Ipv4Addr::new(10, 0, 2, 2), 24))
        );
        assert_eq!(
            parse_ip_cidr("::/0"),
            Ok((IpAddr::V6(Ipv6Addr::UNSPECIFIED), 0))
        );
        assert_eq!(parse_ip_cidr("fd00::1/128").map(|a| a.1), Ok(128));
    }

    #[test]
    fn bad_address_lists_are_refused_with_the_reason() {
        for s in [
            "",
            ",",
            "10.0.2.2,",
            ",fd00::1",
            "tap0",
            "fd00::g",
            "[fd00::1]",
            "fe80::1%eth0",
        ] {
            assert!(
                matches!(parse_addresses(s), Err(CidrError::NotAnIpAddress(_))),
                "{s:?}: {:?}",
                parse_addresses(s)
            );
        }
        assert_eq!(
            parse_addresses("fd00::1/129").unwrap_err().to_string(),
            "'fd00::1/129': prefix length /129 is over 128"
        );
        assert_eq!(
            parse_addresses("10.0.0.1/33,fd00::1"),
            Err(CidrError::PrefixOver32("10.0.0.1/33".into(), 33))
        );
        assert!(matches!(
            parse_addresses("fd00::1/x"),
            Err(CidrError::NotAPrefix(_))
        ));
        assert_eq!(
            parse_addresses("10.0.0.1,fd00::1,10.0.0.2")
                .unwrap_err()
                .to_string(),
            "'10.0.0.1,fd00::1,10.0.0.2': at most one IPv4 address per link (IPv6 addresses may be several)"
        );
        assert_eq!(
            parse_addresses("fd00::1,fd00:0::1/48")
                .unwrap_err()
                .to_string(),
            "'fd00::1,fd00:0::1/48' names fd00::1 twice"
        );
        assert!(parse_addresses("tap0")
            .unwrap_err()
            .to_string()
            .starts_with("'tap0' is not an IPv4 or IPv6 address"));
    }

    #[test]
    fn host_addresses_are_unicast() {
        assert!(parse_host_addresses("10.0.2.1/24,fd00::1/64,fe80::1").is_ok());
        for bad in ["::", "::1", "ff02::1", "::ffff:10.0.0.1"] {
            let e = parse_host_addresses(bad).unwrap_err();
            assert!(e.contains("not an address a host can hold"), "{bad}: {e}");
        }
        assert!(parse_host_addresses("10.0.2.1,10.0.2.3").is_err());
    }

    #[test]
    fn congestion_control_names() {
        assert_eq!(parse_congestion("cubic"), Ok(CongestionAlgorithm::Cubic));
        assert_eq!(
            parse_congestion("NewReno"),
            Ok(CongestionAlgorithm::NewReno)
        );
        assert_eq!(
            parse_congestion("bbr"),
            Err("unknown congestion control 'bbr' (expected cubic or newreno)".to_string())
        );
    }

    #[test]
    fn cpu_lists() {
        assert_eq!(parse_cpus("0,2-4"), Ok(vec![0, 2, 3, 4]));
        assert_eq!(parse_cpus("3,1"), Ok(vec![3, 1]));
        assert!(parse_cpus("3-1").is_err());
        assert!(parse_cpus("x").is_err());
        assert!(parse_cpus(",").is_err());
        assert!(parse_cpus("1-").is_err());
        assert_eq!(
            parse_cpus("0-4000000000"),
            Err("CPU 4000000000 is above 8191".to_string()),
            "refused, not allocated"
        );
        assert_eq!(parse_cpus("8191").map(|v| v.len()), Ok(1));
    }
}
