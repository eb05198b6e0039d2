//! The key of the engine's flow and TIME-WAIT tables.

use std::net::{IpAddr, Ipv6Addr};

/// A connection's key within one engine.
#[derive(Debug, Clone, Copy, Eq)]
pub struct FlowKey {
    /// The peer's address, IPv4 or IPv6.
    pub remote_ip: IpAddr,
    /// The peer's port.
    pub remote_port: u16,
    /// Our port.
    pub local_port: u16,
    /// Which of the engine's own addresses the flow uses, as an index into its address
    /// table (see `addresses`): an IPv6 link has a link-local address beside its others,
    /// and one peer may reach us on more than one of them.
    pub local: u8,
}

impl FlowKey {
    /// The ports and the local address's index as one word.
    #[inline]
    fn ports(&self) -> u64 {
        (u64::from(self.local) << 32)
            | (u64::from(self.remote_port) << 16)
            | u64::from(self.local_port)
    }
}

impl PartialEq for FlowKey {
    /// The ports first, which tell most flows of one table apart, then the address; the
    /// derived impl compares the address first.
    #[inline]
    fn eq(&self, other: &FlowKey) -> bool {
        self.remote_port == other.remote_port
            && self.local_port == other.local_port
            && self.local == other.local
            && self.remote_ip == other.remote_ip
    }
}

impl std::hash::Hash for FlowKey {
    /// One word for an IPv4 flow, so a hasher sees one write per lookup (the derived
    /// impl makes several, the address as a length-prefixed slice): the address and
    /// the ports (the local address's index left out: two flows that differ only in it
    /// are told apart by equality, and a link rarely has more than one IPv4 address).
    /// An IPv6 flow is three words.
    #[inline]
    fn hash<S: std::hash::Hasher>(&self, state: &mut S) {
        match self.remote_ip {
            IpAddr::V4(ip) => state.write_u64(
                (u64::from(ip.to_bits()) << 32)
                    | (u64::from(self.remote_port) << 16)
                    | u64::from(self.local_port),
            ),
            IpAddr::V6(ip) => hash_v6(state, ip, self.ports()),
        }
    }
}

/// [`FlowKey`]'s hash of an IPv6 flow, out of line beside the IPv4 one.
#[cold]
fn hash_v6<S: std::hash::Hasher>(state: &mut S, ip: Ipv6Addr, ports: u64) {
    state.write_u128(ip.to_bits());
    state.write_u64(ports);
}
