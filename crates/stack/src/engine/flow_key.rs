//! The key of the engine's flow and TIME-WAIT tables.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// A connection's key within one engine.
#[derive(Debug, Clone, Copy, Eq)]
pub struct FlowKey {
    /// The peer's address.
    remote: IpAddr,
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
    /// The flow from `remote_ip` port `remote_port` to our address `local` port
    /// `local_port`.
    #[inline]
    pub fn new(remote_ip: IpAddr, remote_port: u16, local_port: u16, local: u8) -> FlowKey {
        FlowKey {
            remote: remote_ip,
            remote_port,
            local_port,
            local,
        }
    }

    /// The peer's address.
    #[inline]
    pub fn remote_ip(&self) -> IpAddr {
        self.remote
    }

    /// The peer's address if it is an IPv4 one.
    #[inline]
    pub fn remote_v4(&self) -> Option<Ipv4Addr> {
        match &self.remote {
            IpAddr::V4(ip) => Some(*ip),
            IpAddr::V6(_) => None,
        }
    }

    /// The peer's address, borrowed: matched by value, an address is taken apart into
    /// bytes by the compiler.
    #[inline]
    pub fn remote(&self) -> &IpAddr {
        &self.remote
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
            && self.remote == other.remote
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
        match self.remote {
            IpAddr::V4(ip) => state.write_u64(
                (u64::from(ip.to_bits()) << 32)
                    | (u64::from(self.remote_port) << 16)
                    | u64::from(self.local_port),
            ),
            IpAddr::V6(ip) => hash_v6(state, &ip, self.ports()),
        }
    }
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

/// [`FlowKey`]'s hash of an IPv6 flow, out of line beside the IPv4 one.
#[cold]
fn hash_v6<S: std::hash::Hasher>(state: &mut S, ip: &Ipv6Addr, ports: u64) {
    let bits = ip.to_bits();
    state.write_u64((bits >> 64) as u64);
    state.write_u64(bits as u64);
    state.write_u64(ports);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn either_family_comes_back_as_it_went_in() {
        for ip in [
            IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2)),
            IpAddr::V6("fd00::2".parse().unwrap()),
            IpAddr::V6("fe80::1:2".parse().unwrap()),
        ] {
            let key = FlowKey::new(ip, 40000, 80, 1);
            assert_eq!(key.remote_ip(), ip);
            assert_eq!(key.remote_v4().is_some(), ip.is_ipv4());
        }
    }

    #[test]
    fn an_ipv4_flow_hashes_as_one_word() {
        use std::hash::{Hash, Hasher};
        #[derive(Default)]
        struct Words(Vec<u64>);
        impl Hasher for Words {
            fn write(&mut self, _: &[u8]) {
                unreachable!("FlowKey writes words");
            }
            fn write_u64(&mut self, w: u64) {
                self.0.push(w);
            }
            fn finish(&self) -> u64 {
                0
            }
        }
        let mut h = Words::default();
        FlowKey::new(Ipv4Addr::new(10, 0, 0, 2).into(), 40000, 80, 0).hash(&mut h);
        assert_eq!(h.0, [(0x0a00_0002 << 32) | (40000 << 16) | 80]);
        let mut h = Words::default();
        FlowKey::new("fd00::2".parse().unwrap(), 40000, 80, 1).hash(&mut h);
        assert_eq!(h.0.len(), 3);
    }
}
