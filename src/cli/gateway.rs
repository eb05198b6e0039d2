//! `--gateway`: the router each of Rusty's links sends off-link traffic to, one per
//! family, as `ip route add default via ADDRESS dev LINK` gives Linux one.
//!
//! A gateway names its link by the subnet it lies in: `10.0.2.1` goes to the link whose
//! IPv4 subnet holds it, `fd00::1` to the link whose IPv6 prefix holds it. Routers
//! advertise themselves by their link-local address, which every link shares, so a
//! link-local gateway names its link after a `%` as a scoped address does
//! (`fe80::1%tap0`), unless only one link speaks IPv6. Without a gateway, a link treats
//! every address of that family as on-link (the engine's default).

use std::net::IpAddr;

use rusty_stack::EngineConfig;

use super::link::{LinkKind, LinkSpec};

/// One `--gateway` value: the router's address and, for a link-local one, the link.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Gateway {
    /// The router's address.
    pub ip: IpAddr,
    /// The link named after `%` (its device, as in the link spec: `tap0`, `veth0`, or
    /// the spec's whole word, `xdp:veth0`).
    pub link: Option<String>,
}

/// Parse `ADDRESS` or `ADDRESS%LINK`.
pub fn parse_gateway(s: &str) -> Result<Gateway, String> {
    let (addr, link) = match s.split_once('%') {
        Some((addr, link)) if !link.is_empty() => (addr, Some(link.to_string())),
        Some(_) => return Err(format!("{s}: nothing after '%' (write ADDRESS%LINK)")),
        None => (s, None),
    };
    let ip: IpAddr = addr
        .parse()
        .map_err(|_| format!("{addr} is not an IPv4 or IPv6 address"))?;
    let unusable = match ip {
        IpAddr::V4(v4) => {
            v4.is_unspecified() || v4.is_broadcast() || v4.is_multicast() || v4.is_loopback()
        }
        IpAddr::V6(v6) => v6.is_unspecified() || v6.is_multicast() || v6.is_loopback(),
    };
    if unusable {
        return Err(format!("{ip} cannot be a router's address"));
    }
    if link.is_some() && !matches!(ip, IpAddr::V6(v6) if v6.is_unicast_link_local()) {
        return Err(format!(
            "{s}: only a link-local IPv6 gateway names its link; {ip} finds its own by subnet"
        ));
    }
    Ok(Gateway { ip, link })
}

/// The names a link answers to after `%`: its device and its spec's word.
fn names(kind: &LinkKind) -> [String; 2] {
    let device = match kind {
        LinkKind::Kernel => "kernel",
        LinkKind::Tap { name } => name,
        LinkKind::Ixgbe { pci } => pci,
        LinkKind::IxgbeModel { tap } | LinkKind::MpipeModel { tap } => tap,
        LinkKind::Mpipe { link } => link,
        LinkKind::Xdp { ifname } => ifname,
    };
    [device.to_string(), kind.to_string()]
}

/// Give each of `gateways` to its link in `links` (see the module docs). Fails when a
/// gateway belongs to no link or to several, is a link's own address, is given for a
/// kernel link (the kernel routes those), or is a second one of its family for a link.
pub fn assign(links: &mut [LinkSpec], gateways: &[Gateway]) -> Result<(), String> {
    let configs: Vec<EngineConfig> = links.iter().map(engine_view).collect();
    for gw in gateways {
        let holds = |(i, link): (usize, &LinkSpec)| {
            let cfg = &configs[i];
            let found = match (gw.ip, &gw.link) {
                (_, Some(name)) => names(&link.kind).contains(name),
                (IpAddr::V4(v4), None) => !link.ip.is_unspecified() && cfg.on_link(v4),
                (IpAddr::V6(v6), None) if v6.is_unicast_link_local() => !link.ipv6.is_empty(),
                (IpAddr::V6(v6), None) => cfg.on_link_v6(v6),
            };
            found.then_some(i)
        };
        let found: Vec<usize> = links.iter().enumerate().filter_map(holds).collect();
        let i = match found[..] {
            [i] => i,
            [] if gw.link.is_some() => {
                return Err(format!(
                    "--gateway {}%{}: no link of that name",
                    gw.ip,
                    gw.link.as_deref().unwrap_or_default()
                ))
            }
            [] => return Err(format!("--gateway {}: no link has it in its subnet", gw.ip)),
            _ => {
                return Err(format!(
                    "--gateway {}: several links could reach it; write {}%LINK",
                    gw.ip, gw.ip
                ))
            }
        };
        let link = &mut links[i];
        if link.kind == LinkKind::Kernel {
            return Err(format!(
                "--gateway {}: a kernel link routes by the kernel's own table",
                gw.ip
            ));
        }
        let own = match gw.ip {
            IpAddr::V4(v4) => v4 == link.ip,
            IpAddr::V6(v6) => link.ipv6.iter().any(|&(a, _)| a == v6),
        };
        if own {
            return Err(format!(
                "--gateway {}: that is {}'s own address",
                gw.ip, link.kind
            ));
        }
        let taken = match gw.ip {
            IpAddr::V4(v4) => link.gateway.replace(v4).is_some(),
            IpAddr::V6(v6) => {
                if link.ipv6.is_empty() {
                    return Err(format!(
                        "--gateway {}: {} has no IPv6 address",
                        gw.ip, link.kind
                    ));
                }
                link.ipv6_gateway.replace(v6).is_some()
            }
        };
        if taken {
            return Err(format!(
                "--gateway {}: {} already has a gateway of that family",
                gw.ip, link.kind
            ));
        }
    }
    Ok(())
}

/// The engine configuration's view of `link`'s subnets, for its on-link tests.
fn engine_view(link: &LinkSpec) -> EngineConfig {
    let mut cfg = EngineConfig::new(link.ip);
    cfg.prefix_len = link.prefix_len;
    cfg.ipv6 = link.ipv6.clone();
    cfg
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::link::parse_links;

    fn links(args: &[&str]) -> Vec<LinkSpec> {
        parse_links(args).unwrap()
    }

    fn gw(s: &str) -> Gateway {
        parse_gateway(s).unwrap()
    }

    #[test]
    fn parses_addresses_and_scopes() {
        assert_eq!(
            gw("10.0.2.1"),
            Gateway {
                ip: "10.0.2.1".parse().unwrap(),
                link: None
            }
        );
        assert_eq!(gw("fe80::1%tap0").link.as_deref(), Some("tap0"));
        for bad in [
            "",
            "tap0",
            "10.0.2.1%tap0",
            "fd00::1%tap0",
            "fe80::1%",
            "0.0.0.0",
            "::",
        ] {
            assert!(parse_gateway(bad).is_err(), "{bad}");
        }
        for bad in [
            "255.255.255.255",
            "224.0.0.1",
            "127.0.0.1",
            "ff02::2",
            "::1",
        ] {
            assert!(parse_gateway(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn each_gateway_goes_to_the_link_whose_subnet_holds_it() {
        let mut l = links(&[
            "2",
            "tap0",
            "10.0.2.2/24,fd00::2/64",
            "1",
            "tap1",
            "10.0.3.2/24,fd01::2/64",
            "1",
        ]);
        let gws = ["10.0.3.1", "fd00::1", "fe80::1%tap1", "10.0.2.1"].map(gw);
        assign(&mut l, &gws).unwrap();
        assert_eq!(l[0].gateway, Some("10.0.2.1".parse().unwrap()));
        assert_eq!(l[0].ipv6_gateway, Some("fd00::1".parse().unwrap()));
        assert_eq!(l[1].gateway, Some("10.0.3.1".parse().unwrap()));
        assert_eq!(l[1].ipv6_gateway, Some("fe80::1".parse().unwrap()));
    }

    #[test]
    fn a_link_local_gateway_needs_its_link_named_only_among_several() {
        let mut one = links(&["1", "tap0", "fd00::2", "1"]);
        assign(&mut one, &[gw("fe80::1")]).unwrap();
        assert_eq!(one[0].ipv6_gateway, Some("fe80::1".parse().unwrap()));
        let mut two = links(&["2", "tap0", "fd00::2", "1", "xdp:veth0", "fd01::2", "1"]);
        let err = assign(&mut two, &[gw("fe80::1")]).unwrap_err();
        assert!(err.contains("%LINK"), "{err}");
        assign(&mut two, &[gw("fe80::1%xdp:veth0")]).unwrap();
        assert_eq!(two[1].ipv6_gateway, Some("fe80::1".parse().unwrap()));
    }

    #[test]
    fn refuses_what_no_link_can_use() {
        let mut l = links(&["1", "tap0", "10.0.2.2/24", "1"]);
        let cases = [
            ("10.0.9.1", "no link has it"),
            ("10.0.2.2", "own address"),
            ("fe80::1", "no link has it"),
            ("fe80::1%tap9", "no link of that name"),
            ("fe80::1%tap0", "no IPv6 address"),
        ];
        for (g, why) in cases {
            let err = assign(&mut l, &[gw(g)]).unwrap_err();
            assert!(err.contains(why), "{g}: {err}");
        }
        let err = assign(&mut l, &[gw("10.0.2.1"), gw("10.0.2.254")]).unwrap_err();
        assert!(err.contains("already has"), "{err}");
        let mut kernel = links(&["1", "kernel", "10.0.2.2/24", "1"]);
        let err = assign(&mut kernel, &[gw("10.0.2.1")]).unwrap_err();
        assert!(err.contains("kernel"), "{err}");
    }
}
