//! # rusty-stack
//!
//! The engine of Rusty, a shared-nothing, event-driven user-space TCP/IP stack: the
//! packet-IO seam ([`io`]), Ethernet, ARP, IPv4, ICMP and TCP, the per-core [`engine`] and
//! the [`Handler`](engine::Handler) API applications implement.
//!
//! Each worker owns one packet-IO queue, one engine and one handler; nothing on the data
//! path is shared between workers. The TCP connection state machine ([`tcp::tcb`]) is
//! sans-IO: segments and time in, segments, events and a deadline out.

pub mod arp;
pub mod checksum;
pub mod engine;
pub mod ethernet;
pub mod icmp;
pub mod io;
pub mod ipv4;
pub mod rss;
pub mod tcp;
pub mod time;
pub mod timer;
pub mod sim;
pub mod stats;
