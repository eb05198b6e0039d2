//! ARP (RFC 826) for Ethernet/IPv4, in two rooms: the wire format (`arp::wire`:
//! validate a received packet, build the ones we send) and each worker's neighbour
//! cache (`arp::cache`: mappings with their reachability, for Neighbor Discovery's
//! neighbours too, and frames waiting for a resolution). The engine's `engine::arp`
//! joins them to the device.

// `pub` items for the `internals` feature (the fuzz targets), unreachable and partly
// unused without it.
#[cfg_attr(not(feature = "internals"), allow(unreachable_pub, dead_code))]
pub(crate) mod cache;
#[cfg_attr(not(feature = "internals"), allow(unreachable_pub))]
pub(crate) mod wire;

pub use cache::ArpConfig;
pub(crate) use cache::{ArpCache, EnqueueResult, NeighbourId, News, Solicit};
pub(crate) use wire::{
    build_gratuitous, build_probe, build_reply, build_request, process, FRAME_LEN,
};
