//! [`DropReason`]: why a received frame (or one waiting to be sent) was dropped, one
//! taxonomy for every layer, so each worker keeps its drop counters in one fixed array
//! ([`Stats`](crate::Stats)).

use std::fmt;

/// Why a received frame (or a frame waiting to be sent) was dropped.
///
/// One enum for every layer so the engine can keep per-reason counters in a fixed array
/// indexed by [`DropReason::index`]. Every variant is a counted, silent drop: bad input
/// never panics and, unless the RFCs ask for an answer (a RST, an ICMP error), gets none.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum DropReason {
    /// The buffer is shorter than the fixed header of the layer parsing it.
    Truncated,
    /// The Ethernet destination is another host's MAC, or a multicast group we never
    /// joined (IPv4 sent to any group address is [`DropReason::GroupDestinationMac`]).
    NotForUs,
    /// The Ethernet source address has the individual/group bit set (multicast or
    /// broadcast). The bit tells individual from group destinations; in a source address
    /// it is reserved and 0 (IEEE 802.3 §3.2.3), so such a frame is forged or corrupt,
    /// whatever it carries (ARP included; nothing is learned from it).
    GroupSourceMac,
    /// An IPv4 datagram in a frame sent to the Ethernet broadcast or a multicast
    /// address. RFC 1122 §3.3.6: a host should silently discard a datagram received by
    /// link-layer broadcast unless it is addressed to an IP broadcast or multicast
    /// address, and we accept neither (we run no UDP and join no group). So no TCP
    /// segment or ICMP echo that was flooded to every host is answered.
    GroupDestinationMac,
    /// An EtherType other than IPv4 or ARP (IPv6, VLAN-tagged, 802.3 length field...).
    UnknownEtherType,
    /// ARP that is not Ethernet/IPv4 (RFC 826 hardware/protocol types and lengths), has an
    /// unknown operation, or carries an address no host may own (multicast MAC...).
    BadArp,
    /// IPv4 header with a version other than 4 or an IHL below 5 (RFC 791 §3.1).
    BadIpHeader,
    /// IPv4 header checksum mismatch (RFC 791 §3.1, RFC 1122 §3.2.1.2).
    BadIpChecksum,
    /// IPv4 total length smaller than the header or larger than the bytes received.
    BadIpLength,
    /// An IPv4 fragment: we do not reassemble (we send with DF and advertise an MSS that
    /// fits the MTU, so peers have no reason to fragment towards us).
    Fragment,
    /// The IPv4 destination is not our unicast address: another host's, the limited or
    /// our subnet's directed broadcast, or multicast. A host that runs no UDP and joins
    /// no group has nothing to do with broadcasts, and answering one (ping, a SYN) would
    /// make it an amplifier (RFC 1122 §3.2.2.6 lets a host ignore a broadcast ping).
    NotOurAddress,
    /// A martian IPv4 source, one no datagram may come from (RFC 1122 §3.2.1.3: a host
    /// must silently discard it): 0.0.0.0/8 ("this network"), 127.0.0.0/8 (loopback),
    /// 224.0.0.0/4 (multicast), 240.0.0.0/4 (reserved class E, with the limited broadcast
    /// 255.255.255.255), or our subnet's directed broadcast.
    MartianSource,
    /// An IPv4 datagram from our own address arriving on the wire: a LAND attack (SYN
    /// from our address and port to itself), or another host using our address. A host
    /// never receives its own datagrams from the link, so none is answered.
    OwnSourceAddress,
    /// An IP protocol other than ICMP or TCP.
    UnknownProtocol,
    /// A malformed ICMP message (RFC 792), e.g. an Echo Request with a nonzero code.
    BadIcmp,
    /// ICMP checksum mismatch (RFC 792).
    BadIcmpChecksum,
    /// A malformed TCP header (data offset out of range, bad options) (RFC 9293 §3.1).
    BadTcpHeader,
    /// TCP checksum mismatch (RFC 9293 §3.1).
    BadTcpChecksum,
    /// A SYN to a port nobody listens on (answered with RST per RFC 9293 §3.10.7.1).
    NoListener,
    /// A non-SYN segment that matches no connection (answered with RST unless it is one).
    NoConnection,
    /// A frame waiting for ARP resolution was dropped: the per-address or total queue
    /// was full.
    ArpQueueFull,
    /// A frame waiting for ARP resolution was dropped: the neighbour never answered.
    ArpUnresolved,
    /// A reply would have gone to an Ethernet group (broadcast or multicast) MAC, the
    /// source of the frame it answers: the reply (a RST, a cookie SYN-ACK, an echo
    /// reply) is not sent, and a SYN whose connection would send there makes none.
    /// Nothing but ARP goes to a group address, so that no outsider can turn us into an
    /// amplifier by offering a group MAC as its own. Defence in depth: input already
    /// drops [`DropReason::GroupSourceMac`] frames.
    SendToGroupMac,
    /// No transmit buffer (or one too small) was available for a reply.
    NoTxBuffer,
    /// A frame the engine built is longer than the link's MTU (plus the Ethernet
    /// header) and is no TSO super-frame: never sent, as the device or the next hop
    /// would drop it or worse.
    OverMtu,
    /// An IPv6 extension-header chain this host does not read through: too long,
    /// running past the packet, Hop-by-Hop Options not first, an option whose type
    /// says to discard the packet, options padded beyond alignment or more than eight
    /// in a header (as Linux refuses them), no upper-layer header, or a jumbogram.
    BadExtensionHeaders,
    /// An IPv6 Routing header with segments left, Type 0 (RFC 5095) or any other: this
    /// host is no router.
    RoutingHeader,
    /// A Neighbor Discovery message that may not be genuine (RFC 4861 §7.1: hop limit
    /// below 255, bad code or options, a group as target), or one about an address
    /// that is not ours.
    BadNeighborDiscovery,
    /// A Neighbor Advertisement from another node for an address of ours already in
    /// use: ignored, the address kept (a spoofer or a misconfigured neighbour).
    AddressConflict,
}

impl DropReason {
    /// Number of variants: the length of a per-reason counter array.
    pub const COUNT: usize = 29;

    /// Every variant, in [`index`](DropReason::index) order.
    pub const ALL: [DropReason; DropReason::COUNT] = [
        DropReason::Truncated,
        DropReason::NotForUs,
        DropReason::GroupSourceMac,
        DropReason::GroupDestinationMac,
        DropReason::UnknownEtherType,
        DropReason::BadArp,
        DropReason::BadIpHeader,
        DropReason::BadIpChecksum,
        DropReason::BadIpLength,
        DropReason::Fragment,
        DropReason::NotOurAddress,
        DropReason::MartianSource,
        DropReason::OwnSourceAddress,
        DropReason::UnknownProtocol,
        DropReason::BadIcmp,
        DropReason::BadIcmpChecksum,
        DropReason::BadTcpHeader,
        DropReason::BadTcpChecksum,
        DropReason::NoListener,
        DropReason::NoConnection,
        DropReason::ArpQueueFull,
        DropReason::ArpUnresolved,
        DropReason::SendToGroupMac,
        DropReason::NoTxBuffer,
        DropReason::OverMtu,
        DropReason::BadExtensionHeaders,
        DropReason::RoutingHeader,
        DropReason::BadNeighborDiscovery,
        DropReason::AddressConflict,
    ];

    /// Position of this reason in [`DropReason::ALL`] and in a counter array.
    pub const fn index(self) -> usize {
        self as usize
    }

    /// A short stable name for statistics output.
    pub const fn name(self) -> &'static str {
        match self {
            DropReason::Truncated => "truncated",
            DropReason::NotForUs => "not_for_us",
            DropReason::GroupSourceMac => "group_source_mac",
            DropReason::GroupDestinationMac => "group_destination_mac",
            DropReason::UnknownEtherType => "unknown_ethertype",
            DropReason::BadArp => "bad_arp",
            DropReason::BadIpHeader => "bad_ip_header",
            DropReason::BadIpChecksum => "bad_ip_checksum",
            DropReason::BadIpLength => "bad_ip_length",
            DropReason::Fragment => "ip_fragment",
            DropReason::NotOurAddress => "not_our_address",
            DropReason::MartianSource => "martian_source",
            DropReason::OwnSourceAddress => "own_source_address",
            DropReason::UnknownProtocol => "unknown_protocol",
            DropReason::BadIcmp => "bad_icmp",
            DropReason::BadIcmpChecksum => "bad_icmp_checksum",
            DropReason::BadTcpHeader => "bad_tcp_header",
            DropReason::BadTcpChecksum => "bad_tcp_checksum",
            DropReason::NoListener => "no_listener",
            DropReason::NoConnection => "no_connection",
            DropReason::ArpQueueFull => "arp_queue_full",
            DropReason::ArpUnresolved => "arp_unresolved",
            DropReason::SendToGroupMac => "send_to_group_mac",
            DropReason::NoTxBuffer => "no_tx_buffer",
            DropReason::OverMtu => "over_mtu",
            DropReason::BadExtensionHeaders => "bad_extension_headers",
            DropReason::RoutingHeader => "routing_header",
            DropReason::BadNeighborDiscovery => "bad_neighbor_discovery",
            DropReason::AddressConflict => "address_conflict",
        }
    }
}

impl fmt::Display for DropReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn drop_reason_table_is_consistent() {
        let mut names = std::collections::HashSet::new();
        for (i, r) in DropReason::ALL.iter().enumerate() {
            assert_eq!(r.index(), i);
            assert!(names.insert(r.name()), "duplicate name {}", r.name());
            assert_eq!(r.to_string(), r.name());
        }
        assert_eq!(names.len(), DropReason::COUNT);
        assert_eq!(DropReason::AddressConflict.index(), DropReason::COUNT - 1);
    }
}
