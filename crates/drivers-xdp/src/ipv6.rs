//! What the interface must do for Rusty's IPv6 addresses: the set of destinations the
//! XDP program looks up (its `RUSTY_IPV6` map), and the link-layer memberships that make
//! the NIC accept the multicast frames among them.
//!
//! A NIC drops multicast frames for groups nobody joined before any XDP program sees
//! them, and the kernel joins only its own addresses' solicited-node groups; Rusty's
//! addresses have groups of their own (RFC 4291 §2.7.1), whose neighbour solicitations
//! would otherwise never arrive. The memberships are held by a packet socket that
//! receives nothing, so they end with the process as the program's link does.

use std::net::Ipv6Addr;
use std::os::fd::{AsRawFd, OwnedFd};

use crate::program::ipv6_destinations;
use crate::{sys, XdpError};

/// The map and the memberships, kept while the program is attached.
pub(crate) struct Ipv6Filter {
    /// The `RUSTY_IPV6` map the program is loaded with.
    map: OwnedFd,
    _memberships: OwnedFd,
}

impl Ipv6Filter {
    /// The map's descriptor, for the program's relocation.
    pub(crate) fn map_fd(&self) -> i32 {
        self.map.as_raw_fd()
    }
}

/// The Ethernet multicast address of the IPv6 group `group` (RFC 2464 §7): `33:33` and
/// its low 32 bits.
pub(crate) fn group_mac(group: Ipv6Addr) -> [u8; 6] {
    rusty_stack::io::ipv6_group_mac(group).0
}

/// The set for `addrs` and the memberships of its groups on `ifindex`; `None` when
/// there are no IPv6 addresses.
pub(crate) fn install(
    addrs: &[Ipv6Addr],
    ifname: &str,
    ifindex: u32,
) -> Result<Option<Ipv6Filter>, XdpError> {
    let set = ipv6_destinations(addrs);
    if set.is_empty() {
        return Ok(None);
    }
    let what = "bpf(BPF_MAP_CREATE, hash of IPv6 destinations)";
    let map =
        sys::create_addr_set(set.len() as u32, "rusty_ipv6").map_err(|e| XdpError::os(what, e))?;
    for a in &set {
        sys::addr_set_insert(&map, &a.octets())
            .map_err(|e| XdpError::os(format!("bpf(BPF_MAP_UPDATE_ELEM, {a})"), e))?;
    }
    let ctx = |what: String| format!("interface '{ifname}': {what}");
    let memberships = sys::membership_socket()
        .map_err(|e| XdpError::os(ctx("socket(AF_PACKET) for multicast".into()), e))?;
    for g in set.iter().filter(|a| a.is_multicast()) {
        let mac = group_mac(*g);
        sys::add_multicast(&memberships, ifindex, mac).map_err(|e| {
            let m = mac.map(|b| format!("{b:02x}")).join(":");
            XdpError::os(ctx(format!("PACKET_ADD_MEMBERSHIP {m} (group {g})")), e)
        })?;
    }
    Ok(Some(Ipv6Filter {
        map,
        _memberships: memberships,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_map_to_33_33_and_their_low_32_bits() {
        let g: Ipv6Addr = "ff02::1:ff4d:5e6f".parse().unwrap();
        assert_eq!(group_mac(g), [0x33, 0x33, 0xff, 0x4d, 0x5e, 0x6f]);
        assert_eq!(
            group_mac("ff02::1".parse().unwrap()),
            [0x33, 0x33, 0, 0, 0, 1]
        );
    }
}
