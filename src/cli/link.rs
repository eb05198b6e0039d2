//! Link specifications on the command line, one parser for every binary:
//! `<n links> [<link> <ipv4>[/prefix] <n workers>]...`. The address is read by
//! [`parse_cidr`], so a missing prefix means /24, as for `--tap-host`.
//!
//! A link is `kernel` (the host's own TCP), `tap0`/`tap:NAME` (a TAP device), and, for
//! drivers that plug in later, `ixgbe:PCI-ADDR`, `mpipe:LINK` and `xdp:IFNAME`. Which of
//! them a binary can run is its own business: it gets a clear "not built into this
//! binary" error for the others from [`LinkKind::require`].

use std::fmt;
use std::net::Ipv4Addr;
use std::str::FromStr;

use super::parse::{parse_cidr, CidrError};

/// The "Links:" paragraph of a binary's `--help`, ending with `example` (a whole
/// command line).
pub fn links_help(example: &str) -> String {
    format!(
        "Links: <n links> then, per link, <link> <ipv4>[/prefix] <n workers>, where <link> is\n\
         kernel, tapN, tap:NAME (a TAP device, created if missing), xdp:IFNAME (AF_XDP on\n\
         the queues of an existing interface, one per worker; needs root), ixgbe:PCI (an Intel\n\
         82599 port in user space), mpipe:LINK or xgbeN/gbeN (TILE-Gx only), or\n\
         ixgbe-model:TAP / mpipe-model:TAP (those drivers on a model of their device whose wire\n\
         is the TAP device TAP). An address without a prefix is a /24 (so is --tap-host's).\n\
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

/// One link: its driver, this host's address on it and how many workers serve it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LinkSpec {
    /// The driver and the device it opens.
    pub kind: LinkKind,
    /// This host's address on the link; on a `kernel` link, the address to listen on
    /// (`0.0.0.0`: every address).
    pub ip: Ipv4Addr,
    /// The link's subnet prefix length; 24 when the spec gives none.
    pub prefix_len: u8,
    /// Workers serving the link (at least 1): one queue each, or one kernel-socket
    /// worker each.
    pub workers: usize,
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
    /// A link's address is not `<ipv4>[/prefix]`.
    BadAddress(CidrError),
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
                "{links} links need {} more arguments (<link> <ipv4> <n workers> each), got {got}",
                links * 3
            ),
            LinkSpecError::BadLink(s) => write!(f, "{s}"),
            LinkSpecError::BadAddress(e) => write!(f, "{e}"),
            LinkSpecError::BadWorkers(s) => write!(f, "'{s}' is not a worker count (1 or more)"),
            LinkSpecError::NotBuiltIn(d) => {
                write!(f, "the {d} driver is not built into this binary")
            }
        }
    }
}

impl std::error::Error for LinkSpecError {}

/// Parse `<n links> [<link> <ipv4>[/prefix] <n workers>]...`. An empty list means no
/// links (the caller's default).
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
            let (ip, prefix_len) = parse_cidr(c[1].as_ref()).map_err(LinkSpecError::BadAddress)?;
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
                workers,
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
            "'10.0.0.300' is not an IPv4 address (a.b.c.d or a.b.c.d/prefix; no prefix means /24)"
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
