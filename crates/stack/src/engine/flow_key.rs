//! The key of the engine's flow and TIME-WAIT tables.

use std::net::{IpAddr, Ipv4Addr};

/// A connection's key within one engine.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
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

impl FlowKey {
    /// The key in the flow table of its family: an IPv4 flow as one word (the address
    /// and both ports; an engine has one IPv4 address, so the local one goes without
    /// saying), an IPv6 flow as three.
    #[inline]
    pub(super) fn table_key(&self) -> TableKey {
        let ports = (u64::from(self.remote_port) << 16) | u64::from(self.local_port);
        match &self.remote {
            IpAddr::V4(ip) => TableKey::V4(V4Key {
                addr: ip.to_bits(),
                ports: ports as u32,
            }),
            IpAddr::V6(ip) => {
                // The address's bytes as they lie, read as two words: no byte swap.
                let bits = u128::from_ne_bytes(ip.octets());
                TableKey::V6(V6Key {
                    addr: [(bits >> 64) as u64, bits as u64],
                    rest: (u64::from(self.local) << 32) | ports,
                })
            }
        }
    }
}

/// A flow's key in the flow table of its family (see [`FlowKey::table_key`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum TableKey {
    V4(V4Key),
    V6(V6Key),
}

/// An IPv4 flow in its table: the peer's address and both ports, eight bytes aligned to
/// four, so that a bucket with its slot is 12 bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct V4Key {
    addr: u32,
    ports: u32,
}

impl std::hash::Hash for V4Key {
    /// One word, one write.
    #[inline]
    fn hash<S: std::hash::Hasher>(&self, state: &mut S) {
        state.write_u64((u64::from(self.addr) << 32) | u64::from(self.ports));
    }
}

/// An IPv6 flow in its table: the peer's address, then the ports and our address's
/// index.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct V6Key {
    addr: [u64; 2],
    rest: u64,
}

impl std::hash::Hash for V6Key {
    /// Three words (the derived impl writes the array's length too).
    #[inline]
    fn hash<S: std::hash::Hasher>(&self, state: &mut S) {
        state.write_u64(self.addr[0]);
        state.write_u64(self.addr[1]);
        state.write_u64(self.rest);
    }
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
    fn an_ipv4_flow_is_one_word_in_its_table() {
        let v4 = FlowKey::new(Ipv4Addr::new(10, 0, 0, 2).into(), 40000, 80, 0);
        assert_eq!(
            v4.table_key(),
            TableKey::V4(V4Key {
                addr: 0x0a00_0002,
                ports: (40000 << 16) | 80
            })
        );
        let a = FlowKey::new("fd00::2".parse().unwrap(), 40000, 80, 1);
        let b = FlowKey::new("fd00::2".parse().unwrap(), 40000, 80, 2);
        assert!(matches!(a.table_key(), TableKey::V6(_)));
        assert_ne!(a.table_key(), b.table_key());
    }
}
