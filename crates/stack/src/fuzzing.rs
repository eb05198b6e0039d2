//! Internal pieces the fuzz targets (`crates/fuzz-targets`) drive directly, because the
//! engine reaches them only through frames: ARP's wire format and the neighbour cache.
//! Exists for fuzzing only: hidden from the docs and not an API, so it may change with
//! any commit.

pub use crate::arp::cache::{ArpCache, EnqueueResult};
pub use crate::arp::wire::{build_reply, build_request, process, ArpInput, FRAME_LEN, PACKET_LEN};
