//! The key of the engine's flow and TIME-WAIT tables.

use std::net::Ipv4Addr;

/// A connection's key within one engine (the local address is the engine's own).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FlowKey {
    /// The peer's address.
    pub remote_ip: Ipv4Addr,
    /// The peer's port.
    pub remote_port: u16,
    /// Our port.
    pub local_port: u16,
}

impl FlowKey {
    /// The key as one 64-bit word (what it hashes as).
    #[inline]
    fn packed(&self) -> u64 {
        (u64::from(u32::from(self.remote_ip)) << 32)
            | (u64::from(self.remote_port) << 16)
            | u64::from(self.local_port)
    }
}

impl std::hash::Hash for FlowKey {
    /// One word, so a hasher sees one write per lookup (the derived impl makes three,
    /// the address as a length-prefixed slice).
    #[inline]
    fn hash<S: std::hash::Hasher>(&self, state: &mut S) {
        state.write_u64(self.packed());
    }
}
