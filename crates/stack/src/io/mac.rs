//! [`MacAddr`], Rusty's own Ethernet address type.

use std::fmt;

/// An Ethernet (MAC) address: six bytes, in the order they go on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct MacAddr(pub [u8; 6]);

impl MacAddr {
    /// The broadcast address, `ff:ff:ff:ff:ff:ff`.
    pub const BROADCAST: MacAddr = MacAddr([0xff; 6]);

    /// The address made of `bytes`.
    pub const fn new(bytes: [u8; 6]) -> MacAddr {
        MacAddr(bytes)
    }

    /// The address of the six bytes of `bytes`, or `None` if there are not six.
    pub fn from_slice(bytes: &[u8]) -> Option<MacAddr> {
        bytes.try_into().ok().map(MacAddr)
    }

    /// Its six bytes.
    pub const fn octets(&self) -> [u8; 6] {
        self.0
    }

    /// Its six bytes, borrowed.
    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }

    /// Whether it names one interface: the group bit (the least significant bit of the
    /// first byte) is clear.
    pub const fn is_unicast(&self) -> bool {
        self.0[0] & 0x01 == 0
    }

    /// Whether it names a group of interfaces (multicast or broadcast).
    pub const fn is_multicast(&self) -> bool {
        !self.is_unicast()
    }

    /// Whether it is the broadcast address.
    pub fn is_broadcast(&self) -> bool {
        *self == MacAddr::BROADCAST
    }

    /// Whether it is locally administered (the second least significant bit of the
    /// first byte is set), as addresses a program makes up are.
    pub const fn is_local(&self) -> bool {
        self.0[0] & 0x02 != 0
    }
}

impl MacAddr {
    /// As smoltcp's wire type, for the frames the stack parses and writes with smoltcp.
    pub(crate) fn wire(self) -> smoltcp::wire::EthernetAddress {
        smoltcp::wire::EthernetAddress(self.0)
    }

    /// From smoltcp's wire type.
    pub(crate) fn from_wire(addr: smoltcp::wire::EthernetAddress) -> MacAddr {
        MacAddr(addr.0)
    }
}

impl From<[u8; 6]> for MacAddr {
    fn from(bytes: [u8; 6]) -> MacAddr {
        MacAddr(bytes)
    }
}

impl From<MacAddr> for [u8; 6] {
    fn from(mac: MacAddr) -> [u8; 6] {
        mac.0
    }
}

/// `02:00:00:00:00:01`: lower-case hexadecimal bytes separated by colons.
impl fmt::Display for MacAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let b = self.0;
        write!(
            f,
            "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
            b[0], b[1], b[2], b[3], b[4], b[5]
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_and_text() {
        let local = MacAddr([0x02, 0, 0, 0, 0, 1]);
        assert!(local.is_unicast() && local.is_local() && !local.is_broadcast());
        assert!(MacAddr::BROADCAST.is_multicast() && MacAddr::BROADCAST.is_broadcast());
        let group = MacAddr([0x01, 0x00, 0x5e, 0, 0, 1]);
        assert!(group.is_multicast() && !group.is_broadcast() && !group.is_local());
        assert_eq!(local.to_string(), "02:00:00:00:00:01");
        assert_eq!(
            MacAddr::from_slice(&[1, 2, 3, 4, 5, 6]),
            Some(MacAddr([1, 2, 3, 4, 5, 6]))
        );
        assert_eq!(MacAddr::from_slice(&[1, 2, 3]), None);
    }
}
