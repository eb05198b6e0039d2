//! Internal pieces that Rusty's own micro-benchmarks (`benches/micro.rs`), fuzz targets
//! (`crates/fuzz-targets`) and the engine's integration tests (`tests/engine/`) drive or
//! check directly, because the engine reaches them only through frames or timing: the
//! Ethernet and IPv4 header parsers, ARP's wire format and the neighbour cache, TCP's
//! segment format, sequence numbers and SYN-cookie timestamp encoding, the timer wheel,
//! the flow table with its key, the replayable generator, and read-only views of an
//! engine's bookkeeping ([`EngineInternals`]).
//!
//! Built only with the crate's `internals` feature. Not an API: these change with any
//! commit, and nothing outside this repository should enable the feature.

pub use crate::arp::cache::{ArpCache, EnqueueResult, NeighbourId, News, Nud, Polled, Solicit};
pub use crate::arp::wire::{
    build_probe, build_reply, build_request, process, ArpInput, FRAME_LEN, PACKET_LEN,
};
pub use crate::checksum::wide::Wide;
pub use crate::engine::flow_key::FlowKey;
pub use crate::engine::flows::{Flow, Flows};
pub use crate::engine::inspect::{EngineInternals, IDLE_RING_RELEASE};
pub use crate::engine::owner::owner_queue;
pub use crate::rng::Rng;
pub use crate::tcp::cookie::decode_ts_options;
pub use crate::tcp::pool::MIN_RING;
pub use crate::tcp::segment::{
    pseudo_header_sum, Segment, TxSegment, CHECKSUM_OFFSET, MAX_HEADER_LEN,
};
pub use crate::tcp::seq::SeqNum;
pub use crate::timer_wheel::TimerWheel;

/// Ethernet II headers as the engine parses them.
pub mod ethernet {
    pub use crate::ethernet::{parse, EthernetHeader, EthernetProtocol};
}

/// IPv6 headers and their extension-header chains, as [`ipv6::parse`] checks them, the
/// addresses no peer on a link sends from, and a host's own addresses (stable
/// interface identifiers, duplicate address detection).
pub mod ipv6 {
    pub use crate::ipv6::address::{link_local, stable_iid, with_iid, Dad, DadState};
    pub use crate::ipv6::{
        check_source, header, parse, tcp_destination, Ipv6Error, Ipv6Header, Martian, HEADER_LEN,
        MAX_EXTENSION_HEADERS, MAX_OPTIONS,
    };
}

/// ICMPv6 and Neighbor Discovery messages, read and written.
pub mod icmpv6 {
    pub use crate::icmpv6::{
        echo_reply, error, group_mac, mld_report, neighbor_advertisement, neighbor_solicitation,
        parse, solicited_node, ErrorKind, ErrorOut, Icmpv6Error, Message, MLD_HOP_BY_HOP,
        MLD_ROUTERS, ND_HOP_LIMIT, NEXT_HEADER,
    };
}

/// IPv4 headers as the engine parses them, with the local-address rules.
pub mod ipv4 {
    pub use crate::ipv4::{parse, IpProtocol, Ipv4Header, Local, DEFAULT_TTL};
}
