//! # rusty-fuzz-targets
//!
//! The fuzz targets of Rusty, which must hold against a hostile network: one pure
//! function per target, each taking arbitrary bytes. None may panic on any input; a
//! panic, including a failed invariant check inside a target, is a bug found.
//!
//! - [`engine_frame()`]: frames into a dual-stack [`Engine`](rusty_stack::Engine) on the
//!   in-memory link, from Ethernet up to TCP over IPv4 or IPv6, ICMPv6 and Neighbor
//!   Discovery, and a handler that echoes, pauses, closes and aborts; optionally on a
//!   connection the target first opens itself, so fuzzed segments land in ESTABLISHED
//!   and beyond. Every frame the engine sends must parse back, and its counters match
//!   what crossed the link.
//! - [`tcp_segment()`]: [`Segment::parse`](rusty_stack::internals::Segment::parse) with
//!   options; what parses must emit and parse back the same.
//! - [`arp()`]: ARP's wire format and a neighbour cache fed a sequence of packets, frames
//!   and clock steps, with its accounting checked after each.
//! - [`http_request()`]: httpd's request-head parser with default and tiny limits, through
//!   a pipeline of requests, then the target, `Range` and date parsers it feeds.
//! - [`link_spec_cli()`]: the link-spec grammar and the whole shared command line.
//! - [`ipv6_header()`]: the IPv6 header check and its bounded extension-header walk.
//! - [`icmpv6()`]: ICMPv6 and Neighbor Discovery messages between any addresses with
//!   any hop limit, and the stack's ICMPv6 writers read back by it and by smoltcp.
//! - [`tls_record()`]: the TLS layer's record path, a server connection fed garbage, or
//!   after a real handshake the client's records in any chunking, spoiled, replayed or
//!   dropped; the application only ever sees what the client encrypted.
//!
//! cargo-fuzz runs them from `fuzz/` (nightly, libFuzzer); `tests/smoke.rs` runs them on
//! stable inside `cargo test` over the seed corpus in `fuzz/corpus/` plus a bounded
//! number of seeded mutations, and over every past crash in `fuzz/regressions/`.
//! [`seeds`] builds that corpus.

#![warn(missing_docs)]

mod arp;
mod engine_frame;
mod http_request;
mod icmpv6;
mod input;
mod ipv6_header;
mod link_spec_cli;
pub mod seeds;
mod tcp_segment;
mod tls_record;
mod wire;
mod wire6;

pub use arp::arp;
pub use engine_frame::engine_frame;
pub use http_request::http_request;
pub use icmpv6::icmpv6;
pub use ipv6_header::ipv6_header;
pub use link_spec_cli::link_spec_cli;
pub use tcp_segment::tcp_segment;
pub use tls_record::tls_record;

/// A fuzz target: arbitrary bytes in, a panic when a bug is found.
pub type Target = fn(&[u8]);

/// Every target by the name its cargo-fuzz binary and corpus directory carry.
pub const TARGETS: &[(&str, Target)] = &[
    ("engine_frame", engine_frame),
    ("tcp_segment", tcp_segment),
    ("arp", arp),
    ("http_request", http_request),
    ("link_spec_cli", link_spec_cli),
    ("ipv6_header", ipv6_header),
    ("icmpv6", icmpv6),
    ("tls_record", tls_record),
];
