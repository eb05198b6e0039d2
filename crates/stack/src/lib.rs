//! # rusty-stack
//!
//! The engine of Rusty, a shared-nothing, event-driven user-space TCP/IP stack: the
//! packet-IO seam ([`io`]), Ethernet, ARP, IPv4, ICMP and TCP, the per-core [`engine`] and
//! the [`Handler`] API applications implement.
//!
//! Each worker owns one packet-IO queue, one [`Engine`] and one handler; nothing on the
//! data path is shared between workers. The TCP connection state machine (the
//! crate-private `tcp::tcb`) is sans-IO: segments and time in, segments, events and a
//! deadline out.
//!
//! ## What is public, for whom
//!
//! - Applications: [`Handler`], [`Conn`], [`Opener`] and the types they use (the
//!   [`app`] module), [`EngineConfig`] and [`TcpConfig`], and [`Stats`]. The pinned
//!   worker threads that drive engines are the `rusty-runtime` crate's: this one has
//!   no threads.
//! - Backends: the [`backend`] module, the one implementation of the callback rules
//!   that Rusty's [`Engine`] and the kernel-socket backend both drive.
//! - Drivers: the packet-IO seam ([`io::PacketIo`], [`io::Capabilities`]) and the RSS
//!   description ([`rss`]); the fault injector in [`io`] decorates any driver
//!   (`rusty-runtime` has pcap capture).
//! - Tests and simulation: the `rusty-testkit` crate: the in-memory link and the
//!   simulator, which joins two engines over it on virtual time
//!   ([`time::VirtualClock`]). The engine's own tests (`tests/engine/`) are integration
//!   tests on that crate; a build of this one contains no test double.
//! - Rusty's own micro-benchmarks and fuzz targets: with the `internals` feature, the
//!   `internals` module re-exports the internal pieces they drive directly. Not an API.
//!
//! The wire formats (Ethernet, ARP, IPv4, ICMP, TCP segments), the TCP state machine,
//! the timer wheel and the engine's own bookkeeping are internal. The public modules are
//! [`app`], [`backend`], [`checksum`], [`engine`], [`io`], [`rss`], [`stats`] and
//! [`time`].
//!
//! ## A complete application
//!
//! An echo server and a client that checks its echo, on two engines joined by the
//! in-memory link (`rusty_testkit::sim::SimPair` drives both on virtual time; a real
//! worker calls [`Engine::poll`] in its loop instead).
//!
//! ```
//! use std::net::SocketAddr;
//! use std::time::Duration;
//! use rusty_stack::{CloseReason, Conn, Handler, Opener};
//! use rusty_stack::io::fault::FaultConfig;
//! use rusty_testkit::sim::{self, SimPair};
//!
//! /// Sends back whatever arrives; closes its side once the peer has closed and
//! /// everything has been echoed.
//! struct Echo;
//!
//! #[derive(Default)]
//! struct EchoConn {
//!     backlog: bool,     // received bytes still wait for send space
//!     peer_done: bool,   // the peer sent its FIN
//! }
//!
//! impl Handler for Echo {
//!     type Conn = EchoConn;
//!
//!     fn accept(&mut self, _local: SocketAddr, _remote: SocketAddr) -> Option<EchoConn> {
//!         Some(EchoConn::default())
//!     }
//!     fn data(&mut self, conn: &mut Conn<'_, EchoConn>, data: &[u8]) -> usize {
//!         // Take only what fits in the send buffer: the rest stays queued in the
//!         // stack (shrinking the window) and is offered again after `writable`.
//!         let n = conn.send(data).unwrap_or(0);
//!         let st = conn.state();
//!         st.backlog = n < data.len();
//!         if st.peer_done && !st.backlog {
//!             conn.shutdown_write();
//!         }
//!         n
//!     }
//!     fn peer_closed(&mut self, conn: &mut Conn<'_, EchoConn>) {
//!         // Closing now would refuse the bytes still waiting to be echoed.
//!         let st = conn.state();
//!         st.peer_done = true;
//!         if !st.backlog {
//!             conn.shutdown_write();
//!         }
//!     }
//! }
//!
//! /// Sends a greeting, half-closes, and keeps what comes back.
//! #[derive(Default)]
//! struct Client {
//!     reply: Vec<u8>,
//!     done: Option<CloseReason>,
//! }
//!
//! impl Handler for Client {
//!     type Conn = ();
//!
//!     fn accept(&mut self, _: SocketAddr, _: SocketAddr) -> Option<()> {
//!         None // a client listens nowhere
//!     }
//!     fn connected(&mut self, conn: &mut Conn<'_, ()>) {
//!         conn.send(b"hello, rusty").unwrap();
//!         conn.shutdown_write();
//!     }
//!     fn data(&mut self, _conn: &mut Conn<'_, ()>, data: &[u8]) -> usize {
//!         self.reply.extend_from_slice(data);
//!         data.len()
//!     }
//!     fn closed(&mut self, _: &mut Opener<'_, ()>, _: (), reason: CloseReason) {
//!         self.done = Some(reason);
//!     }
//! }
//!
//! let mut net = SimPair::new(
//!     Client::default(),
//!     sim::engine_config(sim::CLIENT_IP, 1),
//!     Echo,
//!     sim::engine_config(sim::SERVER_IP, 1),
//!     FaultConfig::none(),
//!     FaultConfig::none(),
//!     1,
//! );
//! net.server.listen(7, 128);
//! net.client.connect(SocketAddr::from((sim::SERVER_IP, 7)), ()).ok().unwrap();
//! assert!(net.run_until(Duration::from_secs(10), |n| n.client.handler().done.is_some()));
//! assert_eq!(net.client.handler().reply, b"hello, rusty");
//! assert_eq!(net.client.handler().done, Some(CloseReason::Normal));
//! ```

#![warn(missing_docs)]
#![forbid(unsafe_code)]

pub mod app;
pub(crate) mod arp;
pub mod checksum;
mod drop_reason;
pub mod engine;
// `pub` items for the `internals` feature, unreachable without it.
#[cfg_attr(not(feature = "internals"), allow(unreachable_pub))]
pub(crate) mod ethernet;
pub(crate) mod icmp;
#[cfg(feature = "internals")]
pub mod internals;
pub mod io;
// `pub` items for the `internals` feature, unreachable without it.
#[cfg_attr(not(feature = "internals"), allow(unreachable_pub))]
pub(crate) mod icmpv6;
#[cfg_attr(not(feature = "internals"), allow(unreachable_pub))]
pub(crate) mod ipv4;
#[cfg_attr(not(feature = "internals"), allow(unreachable_pub))]
pub(crate) mod ipv6;
// `pub` items for the `internals` feature, unreachable without it.
#[cfg_attr(not(feature = "internals"), allow(unreachable_pub))]
pub(crate) mod rng;
pub mod rss;
pub mod stats;
pub(crate) mod tcp;
pub mod time;
// `pub` items for the `internals` feature, unreachable without it.
#[cfg_attr(not(feature = "internals"), allow(unreachable_pub))]
pub(crate) mod timer_wheel;

pub use app::{CloseReason, Conn, ConnId, ConnectError, Handler, Opener, SendError};

/// What a backend implements and drives to run a [`Handler`]: Rusty's [`Engine`] and the
/// kernel-socket backend (`rusty-kernel`) both do. Applications never need these.
///
/// A backend implements [`Connection`](backend::Connection) (what a [`Conn`] does on
/// its connection) and [`AppConn`](backend::AppConn) (what the core needs to lend a
/// connection to the handler), and drives an [`AppCore`](backend::AppCore): it owns the
/// handler, the connection table with its generations, the re-offer of unread bytes
/// and the exactly-one `closed`, so an application cannot tell backends apart but by
/// speed.
///
/// A layer between a backend and an application (TLS in `rusty-tls`) implements
/// [`Connection`](backend::Connection) too: it is a [`Handler`] whose callbacks take
/// their [`Conn`] apart ([`Conn::split`]) and hand the application's handler a [`Conn`]
/// of its own ([`Conn::new`]).
pub mod backend {
    pub use crate::app::conn::Connection;
    pub use crate::app::core::{AppConn, AppCore, UnreadBytes};
}
pub use arp::ArpConfig;
pub use engine::{Engine, EngineConfig};
pub use stats::{DropReason, Stats};
pub use tcp::config::{CongestionAlgorithm, Keepalive, TcpConfig};
pub use tcp::pool::MemoryBudget;
/// A connection's TCP state (RFC 9293 §3.3.2), as [`Engine::connection_states`] reports it;
/// not to be confused with an application's own per-connection state ([`Conn::state`]).
pub use tcp::tcb::State as TcpState;
pub use time::{Clock, Instant, SystemClock, VirtualClock};
