//! ARP (RFC 826) for Ethernet/IPv4, in two rooms: the [wire format](wire) (validate a
//! received packet, build the ones we send) and each worker's [neighbour
//! cache](cache) (mappings, and frames waiting for a resolution). The engine's
//! `engine::arp` joins them to the device.

pub mod cache;
pub mod wire;

pub use cache::{ArpCache, ArpConfig, EnqueueResult};
pub use wire::{
    build_gratuitous, build_reply, build_request, process, ArpInput, FRAME_LEN, PACKET_LEN,
};
