//! Internal pieces that Rusty's own micro-benchmarks (`benches/micro.rs`) and fuzz targets
//! (`crates/fuzz-targets`) drive directly, because the engine reaches them only through
//! frames or timing: ARP's wire format and the neighbour cache, TCP's segment format and
//! sequence numbers, the timer wheel, the flow table with its key, and the replayable
//! generator.
//!
//! Built only with the crate's `internals` feature. Not an API: these change with any
//! commit, and nothing outside this repository should enable the feature.

pub use crate::arp::cache::{ArpCache, EnqueueResult};
pub use crate::arp::wire::{build_reply, build_request, process, ArpInput, FRAME_LEN, PACKET_LEN};
pub use crate::checksum::wide::Wide;
pub use crate::engine::flow_key::FlowKey;
pub use crate::engine::flows::{Flow, Flows};
pub use crate::rng::Rng;
pub use crate::tcp::segment::{
    pseudo_header_sum, Segment, TxSegment, CHECKSUM_OFFSET, MAX_HEADER_LEN,
};
pub use crate::tcp::seq::SeqNum;
pub use crate::timer_wheel::TimerWheel;
