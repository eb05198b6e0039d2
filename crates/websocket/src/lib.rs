//! # rusty-websocket
//!
//! WebSocket (RFC 6455) over Rusty's [`Handler`](rusty_stack::Handler) API, so it runs
//! unchanged on Rusty's stack, on the kernel's sockets and in the simulator.
//!
//! An application implements [`WsApp`] (messages, pongs, close) and, to serve,
//! [`WsServerApp::open`] (accept or refuse each handshake, choose a subprotocol); it
//! sends through the [`WsHandle`] each callback gets. [`WsServer`] and [`WsClient`] are
//! the `Handler`s of the two roles; [`WsConfig`] holds every limit.
//!
//! The layers, each in its own file: [`handshake`] (HTTP upgrade, §4), [`parser`]
//! (push frame parser, §5.2), [`message`] (fragmentation, §5.4), [`utf8`] (incremental
//! validation, §8.1), [`close`] (close frames and codes, §7.4), [`frame`] (header
//! encoding and masking), [`extension`] (the seam for permessage-deflate), and
//! `session` (the per-connection loop and close handshake).
//!
//! ```
//! use std::net::SocketAddr;
//! use rusty_websocket::{Accept, Data, Message, Reject, Request, WsApp, WsConfig, WsHandle, WsServer, WsServerApp};
//!
//! /// Answers text with its length, on `/count` only, speaking the `count.v1` subprotocol
//! /// if the client offers it.
//! struct Counter;
//!
//! impl WsApp for Counter {
//!     type State = u64; // messages seen on this connection
//!
//!     fn message(&mut self, ws: &mut WsHandle<'_, '_, u64>, msg: Message<'_>) {
//!         *ws.state() += 1;
//!         if let Data::Text(t) = msg.data() {
//!             let reply = format!("{} chars", t.chars().count());
//!             let _ = ws.send_text(&reply);
//!         }
//!     }
//! }
//!
//! impl WsServerApp for Counter {
//!     fn open(&mut self, req: &Request, _peer: SocketAddr) -> Result<Accept<u64>, Reject> {
//!         if req.path() != "/count" {
//!             return Err(Reject::new(404));
//!         }
//!         let accept = Accept::new(0);
//!         Ok(if req.protocols().any(|p| p == "count.v1") { accept.protocol("count.v1") } else { accept })
//!     }
//! }
//!
//! // A `rusty_stack::Handler`: give it to any runtime (`rusty::launch::run`, the
//! // kernel backend, the simulator), one per worker.
//! let mut cfg = WsConfig::default();
//! cfg.max_message = 1 << 20;
//! let server = WsServer::new(Counter, cfg);
//! # let _ = server;
//! ```
//!
//! Autobahn's fuzzing client checks the server role through `ws-echo`; the spec used
//! is `autobahn/spec.json` in this crate.
//!
//! Bad input never panics: a violation fails the connection with the status RFC 6455
//! prescribes ([`ProtocolError::close_code`]) and is counted in [`WsStats`].

#![warn(missing_docs)]

// The protocol layers the crate docs name are public modules, usable on their own;
// `deflate` also holds the permessage-deflate configuration and `load` the `ws-load`
// client. The application API lives in private modules and is re-exported here.
mod app;
mod base64;
mod client;
pub mod close;
mod config;
pub mod deflate;
mod echo;
mod error;
pub mod extension;
pub mod frame;
pub mod handshake;
pub mod load;
pub mod message;
mod metrics;
pub mod parser;
mod server;
mod session;
mod stats;
pub mod utf8;

pub use app::{Accept, CloseInfo, Data, Message, WsApp, WsServerApp};
pub use client::{Connector, WsClient};
pub use config::WsConfig;
pub use deflate::DeflateConfig;
pub use echo::WsEcho;
pub use error::ProtocolError;
pub use extension::{CodecError, MessageCodec};
pub use handshake::{ClientRequest, Reject, Request};
pub use message::MessageKind;
pub use server::{WsServer, WsStatsSink};
pub use session::{WsConn, WsHandle, WsSendError};
pub use stats::WsStats;

#[cfg(test)]
mod tests;
