//! Link specifications on the command line, one parser for every binary:
//! `<n links> [<link> <addresses> <n workers>]...`. The addresses are read by
//! [`parse_addresses`]: at most one IPv4 address and any number of IPv6 ones,
//! comma-separated (`10.0.2.2/24,fd00::2/64`), a missing prefix meaning /24 for IPv4 and
//! /64 for IPv6, as for `--tap-host`.
//!
//! A link is `kernel` (the host's own TCP), `tap0`/`tap:NAME` (a TAP device), and, for
//! drivers that plug in later, `ixgbe:PCI-ADDR`, `mpipe:LINK` and `xdp:IFNAME`. Which of
//! them a binary can run is its own business: it gets a clear "not built into this
//! binary" error for the others from [`LinkKind::require`].

use std::fmt;
use std::net::{Ipv4Addr, Ipv6Addr};
use std::str::FromStr;

use super::parse::{not_a_host_address, parse_addresses, Addresses, CidrError};

/// The "Links:" paragraph of a binary's `--help`, ending with `example` (a whole
/// command line).
pub fn links_help(example: &str) -> String {
    format!(
        "Links: <n links> then, per link, <link> <addresses> <n workers>, where <link> is\n\
         kernel, tapN, tap:NAME (a TAP device, created if missing), xdp:IFNAME (AF_XDP on\n\
         the queues of an existing interface, one per worker; needs root), ixgbe:PCI (an Intel\n\
         82599 port in user space), mpipe:LINK or xgbeN/gbeN (TILE-Gx only), or\n\
         ixgbe-model:TAP / mpipe-model:TAP (those drivers on a model of their device whose wire\n\
         is the TAP device TAP). <addresses> is one IPv4 address, IPv6 addresses, or both,\n\
         comma-separated, each with an optional prefix (IPv4 /24, IPv6 /64 without one; the same\n\
         for --tap-host): 10.0.2.2/24,fd00::2/64. A link with IPv6 also takes a link-local\n\
         address of its own, printed at start. On a kernel link, 0.0.0.0 or :: is every\n\
         address of both families.\n\
         Example: {example}"
    )
}

/// What carries a link's traffic: the `<link>` word of a link spec.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LinkKind {
    /// `kernel`: the host's own TCP through kernel sockets, no Rusty engine.
    Kernel,
    /// `tapN` or `tap:NAME`: a TAP device, created if missing.
    Tap {
        /// The device's name (at most 15 bytes).
        name: String,
    },
    /// `ixgbe:PCI`: an Intel 82599 port driven from user space.
    Ixgbe {
        /// The port's PCI address, e.g. `0000:03:00.0`.
        pci: String,
    },
    /// Rusty's ixgbe driver on the model of the 82599, the model's wire bridged to a
    /// TAP device (tests, and trying the driver without the NIC).
    IxgbeModel {
        /// The TAP device the model's wire is bridged to.
        tap: String,
    },
    /// `mpipe:LINK`, or a bare `xgbeN`/`gbeN`: an mPIPE link of a TILE-Gx.
    Mpipe {
        /// The link's name, e.g. `xgbe1`.
        link: String,
    },
    /// Rusty's mPIPE driver on the host model of gxio, its wire bridged to a TAP device.
    MpipeModel {
        /// The TAP device the model's wire is bridged to.
        tap: String,
    },
    /// `xdp:IFNAME`: AF_XDP sockets on the queues of an existing interface.
    Xdp {
        /// The interface (at most 15 bytes).
        ifname: String,
    },
}

impl LinkKind {
    /// The driver's name as used on the command line.
    pub fn driver(&self) -> &'static str {
        match self {
            LinkKind::Kernel => "kernel",
            LinkKind::Tap { .. } => "tap",
            LinkKind::Ixgbe { .. } => "ixgbe",
            LinkKind::IxgbeModel { .. } => "ixgbe-model",
            LinkKind::Mpipe { .. } => "mpipe",
            LinkKind::MpipeModel { .. } => "mpipe-model",
            LinkKind::Xdp { .. } => "xdp",
        }
    }

    /// Fails unless this binary was built with the link's driver.
    pub fn require(&self, built_in: &[&str]) -> Result<(), LinkSpecError> {
        if built_in.contains(&self.driver()) {
            Ok(())
        } else {
            Err(LinkSpecError::NotBuiltIn(self.driver().to_string()))
        }
    }
}

impl fmt::Display for LinkKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LinkKind::Kernel => write!(f, "kernel"),
            LinkKind::Tap { name } => write!(f, "tap:{name}"),
            LinkKind::Ixgbe { pci } => write!(f, "ixgbe:{pci}"),
            LinkKind::IxgbeModel { tap } => write!(f, "ixgbe-model:{tap}"),
            LinkKind::Mpipe { link } => write!(f, "mpipe:{link}"),
            LinkKind::MpipeModel { tap } => write!(f, "mpipe-model:{tap}"),
            LinkKind::Xdp { ifname } => write!(f, "xdp:{ifname}"),
        }
    }
}

/// Longest Linux interface name (IFNAMSIZ - 1).
const MAX_IFNAME: usize = 15;

fn ifname(s: &str, what: &str) -> Result<String, LinkSpecError> {
    if s.is_empty() || s.len() > MAX_IFNAME || s.contains(['/', ' ', '\0']) {
        return Err(LinkSpecError::BadLink(format!(
            "{what}: '{s}' is not a valid interface name"
        )));
    }
    Ok(s.to_string())
}

impl FromStr for LinkKind {
    type Err = LinkSpecError;
    fn from_str(s: &str) -> Result<LinkKind, LinkSpecError> {
        if s == "kernel" {
            return Ok(LinkKind::Kernel);
        }
        if let Some((driver, arg)) = s.split_once(':') {
            return match driver {
                "tap" => Ok(LinkKind::Tap {
                    name: ifname(arg, "tap")?,
                }),
                "xdp" => Ok(LinkKind::Xdp {
                    ifname: ifname(arg, "xdp")?,
                }),
                "ixgbe-model" => Ok(LinkKind::IxgbeModel {
                    tap: ifname(arg, "ixgbe-model")?,
                }),
                "mpipe-model" => Ok(LinkKind::MpipeModel {
                    tap: ifname(arg, "mpipe-model")?,
                }),
                "ixgbe" if !arg.is_empty() => Ok(LinkKind::Ixgbe {
                    pci: arg.to_string(),
                }),
                "mpipe" if !arg.is_empty() => Ok(LinkKind::Mpipe {
                    link: arg.to_string(),
                }),
                _ => Err(LinkSpecError::BadLink(format!(
                    "unknown link '{s}' (expected kernel, tapN, tap:NAME, xdp:IFNAME, ixgbe:PCI, ixgbe-model:TAP, mpipe:LINK, xgbeN/gbeN or mpipe-model:TAP)"
                ))),
            };
        }
        // The original Rusty's bare mPIPE link names (TILE-Gx only).
        if tilegx_link_name(s) {
            return Ok(LinkKind::Mpipe {
                link: s.to_string(),
            });
        }
        if s.starts_with("tap") {
            return Ok(LinkKind::Tap {
                name: ifname(s, "tap")?,
            });
        }
        Err(LinkSpecError::BadLink(format!(
            "unknown link '{s}' (expected kernel, tapN, tap:NAME, xdp:IFNAME, ixgbe:PCI, ixgbe-model:TAP, mpipe:LINK, xgbeN/gbeN or mpipe-model:TAP)"
        )))
    }
}

/// An mPIPE link as TILE-Gx names them: `xgbe` or `gbe` and a port number.
fn tilegx_link_name(s: &str) -> bool {
    ["xgbe", "gbe"].iter().any(|p| {
        s.strip_prefix(p)
            .is_some_and(|n| !n.is_empty() && n.len() <= 2 && n.bytes().all(|b| b.is_ascii_digit()))
    })
}

/// One link: its driver, this host's addresses on it and how many workers serve it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LinkSpec {
    /// The driver and the device it opens.
    pub kind: LinkKind,
    /// This host's IPv4 address on the link, [`Ipv4Addr::UNSPECIFIED`] when it has
    /// none; on a `kernel` link, the address to listen on, and with no IPv6 address
    /// `0.0.0.0` means every address of both families (`::` in the spec reads the same).
    pub ip: Ipv4Addr,
    /// The IPv4 subnet's prefix length (24 when the spec gives none; 0 without IPv4).
    pub prefix_len: u8,
    /// This host's IPv6 addresses on the link, each with its prefix length (64 when the
    /// spec gives none); on a `kernel` link, more addresses to listen on.
    pub ipv6: Vec<(Ipv6Addr, u8)>,
    /// Workers serving the link (at least 1): one queue each, or one kernel-socket
    /// worker each.
    pub workers: usize,
    /// The IPv4 router for addresses outside the subnet (`--gateway`); none: every
    /// address is on-link.
    pub gateway: Option<Ipv4Addr>,
    /// The IPv6 router for addresses outside the link's prefixes (`--gateway`); none:
    /// every address is on-link.
    pub ipv6_gateway: Option<Ipv6Addr>,
}

/// Why link specs could not be parsed, or cannot run in this binary.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LinkSpecError {
    /// The first argument (the number of links) is not a number.
    BadCount(String),
    /// The arguments after the count are not three per link.
    WrongArgumentCount {
        /// The number of links the count announced.
        links: usize,
        /// The arguments that followed it.
        got: usize,
    },
    /// A `<link>` word names no driver, or a bad interface name; the message says which.
    BadLink(String),
    /// A link's addresses are not a list of IPv4 and IPv6 addresses.
    BadAddress(CidrError),
    /// An address the link cannot have (the message says which and why).
    UnusableAddress(String),
    /// A link's worker count is not a number of at least 1.
    BadWorkers(String),
    /// The link's driver is not built into this binary (its name).
    NotBuiltIn(String),
}

impl fmt::Display for LinkSpecError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LinkSpecError::BadCount(s) => write!(f, "'{s}' is not a number of links"),
            LinkSpecError::WrongArgumentCount { links, got } => write!(
                f,
                "{links} links need {} more arguments (<link> <addresses> <n workers> each), got {got}",
                links * 3
            ),
            LinkSpecError::BadLink(s) => write!(f, "{s}"),
            LinkSpecError::BadAddress(e) => write!(f, "{e}"),
            LinkSpecError::UnusableAddress(s) => write!(f, "{s}"),
            LinkSpecError::BadWorkers(s) => write!(f, "'{s}' is not a worker count (1 or more)"),
            LinkSpecError::NotBuiltIn(d) => {
                write!(f, "the {d} driver is not built into this binary")
            }
        }
    }
}

impl std::error::Error for LinkSpecError {}

impl LinkSpec {
    /// Kernel sockets on every address of both families, with `workers` workers: what
    /// a binary runs on when given no links.
    pub fn kernel(workers: usize) -> LinkSpec {
        LinkSpec {
            kind: LinkKind::Kernel,
            ip: Ipv4Addr::UNSPECIFIED,
            prefix_len: 0,
            ipv6: Vec::new(),
            workers,
            gateway: None,
            ipv6_gateway: None,
        }
    }

    /// The link's addresses as they read in a status line: the IPv4 address and the IPv6
    /// ones, comma-separated, without prefixes (`10.0.2.2,fd00::2`; `0.0.0.0` for every
    /// address of a kernel link).
    pub fn describe_addresses(&self) -> String {
        let v4 = (!self.ip.is_unspecified() || self.ipv6.is_empty()).then(|| self.ip.to_string());
        let v6 = self.ipv6.iter().map(|(ip, _)| ip.to_string());
        v4.into_iter().chain(v6).collect::<Vec<_>>().join(",")
    }
}

/// The addresses of a link of `kind`, checked and made canonical: on a kernel link,
/// every address is `0.0.0.0` alone; a link of Rusty's needs an address, and its IPv6
/// ones must be unicast addresses of its own (the link-local one it draws itself).
fn link_addresses(kind: &LinkKind, spec: &str, a: Addresses) -> Result<Addresses, LinkSpecError> {
    if *kind == LinkKind::Kernel {
        let every = a.ipv4.is_some_and(|(ip, _)| ip.is_unspecified())
            || a.ipv6.iter().any(|(ip, _)| ip.is_unspecified());
        if every {
            return Ok(Addresses {
                ipv4: Some((Ipv4Addr::UNSPECIFIED, a.ipv4.map_or(0, |(_, len)| len))),
                ipv6: Vec::new(),
            });
        }
        return Ok(a);
    }
    let unusable = |why: String| {
        Err(LinkSpecError::UnusableAddress(format!(
            "{kind} {spec}: {why}"
        )))
    };
    if a.ipv4.is_some_and(|(ip, _)| ip.is_unspecified()) {
        return unusable(
            "0.0.0.0 means every address only on a kernel link; give this link an address \
             of its own (leave IPv4 out for IPv6 only)"
                .into(),
        );
    }
    for &(v6, _) in &a.ipv6 {
        if let Some(why) = not_a_host_address(v6) {
            return unusable(format!("{v6} is {why}, not an address a link can have"));
        }
        if v6.is_unicast_link_local() {
            return unusable(format!(
                "{v6} is link-local; the link draws its own link-local address (RFC 7217) \
                 and prints it at start"
            ));
        }
    }
    Ok(a)
}

/// Parse `<n links> [<link> <addresses> <n workers>]...`. An empty list means no links
/// (the caller's default).
pub fn parse_links<S: AsRef<str>>(args: &[S]) -> Result<Vec<LinkSpec>, LinkSpecError> {
    let Some((count, rest)) = args.split_first() else {
        return Ok(Vec::new());
    };
    let count = count.as_ref();
    // A count whose arguments could not even be counted is no number of links either.
    let n: usize = count
        .parse()
        .ok()
        .filter(|n: &usize| n.checked_mul(3).is_some())
        .ok_or_else(|| LinkSpecError::BadCount(count.to_string()))?;
    if rest.len() != n * 3 {
        return Err(LinkSpecError::WrongArgumentCount {
            links: n,
            got: rest.len(),
        });
    }
    rest.chunks(3)
        .map(|c| {
            let kind: LinkKind = c[0].as_ref().parse()?;
            let spec = c[1].as_ref();
            let addresses = parse_addresses(spec).map_err(LinkSpecError::BadAddress)?;
            let addresses = link_addresses(&kind, spec, addresses)?;
            let (ip, prefix_len) = addresses.ipv4.unwrap_or((Ipv4Addr::UNSPECIFIED, 0));
            let ipv6 = addresses.ipv6;
            let w = c[2].as_ref();
            let workers = w
                .parse::<usize>()
                .ok()
                .filter(|&n| n > 0)
                .ok_or_else(|| LinkSpecError::BadWorkers(w.to_string()))?;
            Ok(LinkSpec {
                kind,
                ip,
                prefix_len,
                ipv6,
                workers,
                gateway: None,
                ipv6_gateway: None,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_original_command_line() {
        let links =
            parse_links(&["2", "tap0", "10.0.2.2", "1", "tap:eth9", "10.0.3.2/16", "3"]).unwrap();
        assert_eq!(links.len(), 2);
        assert_eq!(
            links[0].kind,
            LinkKind::Tap {
                name: "tap0".into()
            }
        );
        assert_eq!(
            (links[0].ip, links[0].prefix_len, links[0].workers),
            (Ipv4Addr::new(10, 0, 2, 2), 24, 1)
        );
        assert_eq!(
            links[1].kind,
            LinkKind::Tap {
                name: "eth9".into()
            }
        );
        assert_eq!((links[1].prefix_len, links[1].workers), (16, 3));
        assert_eq!(parse_links::<&str>(&[]).unwrap(), vec![]);
        assert_eq!(
            parse_links(&["1", "kernel", "0.0.0.0", "2"]).unwrap()[0].kind,
            LinkKind::Kernel
        );
        let model = &parse_links(&["1", "ixgbe-model:tap7", "10.0.2.2", "4"]).unwrap()[0];
        assert_eq!(model.kind, LinkKind::IxgbeModel { tap: "tap7".into() });
        assert_eq!(model.kind.to_string(), "ixgbe-model:tap7");
        assert!("ixgbe-model:".parse::<LinkKind>().is_err());
        for (spec, kind) in [
            (
                "mpipe:xgbe1",
                LinkKind::Mpipe {
                    link: "xgbe1".into(),
                },
            ),
            (
                "xgbe1",
                LinkKind::Mpipe {
                    link: "xgbe1".into(),
                },
            ),
            (
                "gbe0",
                LinkKind::Mpipe {
                    link: "gbe0".into(),
                },
            ),
            (
                "mpipe-model:tap2",
                LinkKind::MpipeModel { tap: "tap2".into() },
            ),
        ] {
            assert_eq!(spec.parse::<LinkKind>(), Ok(kind), "{spec}");
        }
        assert!("xgbe".parse::<LinkKind>().is_err());
    }

    #[test]
    fn links_take_ipv4_ipv6_or_both() {
        let v6 = |s: &str| s.parse::<Ipv6Addr>().unwrap();
        let links = parse_links(&[
            "3",
            "tap0",
            "10.0.2.2/24,fd00::2/64",
            "2",
            "tap1",
            "fd01::2,fd02::2/56",
            "1",
            "xdp:eth1",
            "10.0.3.2",
            "1",
        ])
        .unwrap();
        assert_eq!(
            (links[0].ip, links[0].prefix_len, links[0].ipv6.clone()),
            (Ipv4Addr::new(10, 0, 2, 2), 24, vec![(v6("fd00::2"), 64)])
        );
        assert_eq!(links[0].describe_addresses(), "10.0.2.2,fd00::2");
        assert_eq!(
            (links[1].ip, links[1].prefix_len, links[1].ipv6.clone()),
            (
                Ipv4Addr::UNSPECIFIED,
                0,
                vec![(v6("fd01::2"), 64), (v6("fd02::2"), 56)]
            )
        );
        assert_eq!(links[1].describe_addresses(), "fd01::2,fd02::2");
        assert!(links[2].ipv6.is_empty());
        assert_eq!(links[2].describe_addresses(), "10.0.3.2");
    }

    /// On a kernel link `0.0.0.0` and `::` both mean every address (listened on as
    /// `[::]`, both families); other addresses are listened on one by one.
    #[test]
    fn a_kernel_link_listens_on_every_address_or_those_given() {
        for every in ["0.0.0.0", "::", "0.0.0.0,::", "::,127.0.0.1", "::/0"] {
            let l = &parse_links(&["1", "kernel", every, "1"]).unwrap()[0];
            assert_eq!((l.ip, l.ipv6.len()), (Ipv4Addr::UNSPECIFIED, 0), "{every}");
            assert_eq!(l.describe_addresses(), "0.0.0.0");
        }
        let l = &parse_links(&["1", "kernel", "127.0.0.1,::1", "1"]).unwrap()[0];
        assert_eq!(
            (l.ip, l.ipv6.clone()),
            (Ipv4Addr::LOCALHOST, vec![(Ipv6Addr::LOCALHOST, 64)])
        );
        let l = &parse_links(&["1", "kernel", "::1", "1"]).unwrap()[0];
        assert_eq!(
            (l.ip, l.describe_addresses()),
            (Ipv4Addr::UNSPECIFIED, "::1".into())
        );
    }

    #[test]
    fn addresses_a_link_cannot_have_are_refused_clearly() {
        let err = |spec: &str| {
            parse_links(&["1", "tap0", spec, "1"])
                .unwrap_err()
                .to_string()
        };
        assert!(
            err("10.0.0.1,10.0.0.2").contains("at most one IPv4 address per link"),
            "{}",
            err("10.0.0.1,10.0.0.2")
        );
        assert!(err("0.0.0.0").contains("every address only on a kernel link"));
        assert!(err("::").contains("is the unspecified address"));
        assert!(err("fd00::1,::1").contains("::1 is in ::/8"));
        assert!(err("ff02::1").contains("multicast"));
        assert_eq!(
            err("fe80::1"),
            "tap:tap0 fe80::1: fe80::1 is link-local; the link draws its own link-local \
             address (RFC 7217) and prints it at start"
        );
        assert!(err("fd00::1/200").contains("prefix length /200 is over 128"));
        assert!(matches!(
            parse_links(&["1", "tap0", "fd00::1,fd00::1", "1"]),
            Err(LinkSpecError::BadAddress(CidrError::Repeated(..)))
        ));
    }

    /// Found by the `link_spec_cli` fuzz target: a count near `usize::MAX` overflowed
    /// the multiplication by three (a panic with overflow checks on).
    #[test]
    fn a_link_count_beyond_any_argument_list_is_a_bad_count() {
        let huge = (usize::MAX / 3 + 1).to_string();
        assert_eq!(
            parse_links(&[huge.as_str(), "tap0", "10.0.0.1", "1"]),
            Err(LinkSpecError::BadCount(huge.clone()))
        );
        let most = (usize::MAX / 3).to_string();
        assert!(matches!(
            parse_links(&[most.as_str()]),
            Err(LinkSpecError::WrongArgumentCount { got: 0, .. })
        ));
    }

    #[test]
    fn rejects_bad_arguments_clearly() {
        assert!(matches!(
            parse_links(&["x"]),
            Err(LinkSpecError::BadCount(_))
        ));
        assert!(matches!(
            parse_links(&["1", "tap0", "10.0.0.1"]),
            Err(LinkSpecError::WrongArgumentCount { .. })
        ));
        assert!(matches!(
            parse_links(&["1", "eth0", "10.0.0.1", "1"]),
            Err(LinkSpecError::BadLink(_))
        ));
        assert!(matches!(
            parse_links(&["1", "tap0", "10.0.0.300", "1"]),
            Err(LinkSpecError::BadAddress(_))
        ));
        assert!(matches!(
            parse_links(&["1", "tap0", "10.0.0.1/33", "1"]),
            Err(LinkSpecError::BadAddress(CidrError::PrefixOver32(_, 33)))
        ));
        assert!(matches!(
            parse_links(&["1", "tap0", "10.0.0.1/x", "1"]),
            Err(LinkSpecError::BadAddress(CidrError::NotAPrefix(_)))
        ));
        assert_eq!(
            parse_links(&["1", "tap0", "10.0.0.300", "1"])
                .unwrap_err()
                .to_string(),
            "'10.0.0.300' is not an IPv4 or IPv6 address (a.b.c.d[/prefix] or an IPv6 \
             address[/prefix], several separated by commas; no prefix means /24 for IPv4, \
             /64 for IPv6)"
        );
        assert!(matches!(
            parse_links(&["1", "tap0", "10.0.0.1", "0"]),
            Err(LinkSpecError::BadWorkers(_))
        ));
        assert!(matches!(
            parse_links(&["1", "tap:averyveryverylongname", "10.0.0.1", "1"]),
            Err(LinkSpecError::BadLink(_))
        ));
        let ixgbe: LinkKind = "ixgbe:0000:03:00.0".parse().unwrap();
        assert_eq!(
            ixgbe.require(&["kernel", "tap"]),
            Err(LinkSpecError::NotBuiltIn("ixgbe".into()))
        );
        assert!(LinkKind::Kernel.require(&["kernel", "tap"]).is_ok());
        assert_eq!(
            LinkSpecError::NotBuiltIn("ixgbe".into()).to_string(),
            "the ixgbe driver is not built into this binary"
        );
    }
}
