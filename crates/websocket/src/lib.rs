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
//! Bad input never panics: a violation fails the connection with the status RFC 6455
//! prescribes ([`ProtocolError::close_code`]) and is counted in [`WsStats`].

#![warn(missing_docs)]

pub mod app;
pub mod base64;
pub mod client;
pub mod close;
pub mod config;
pub mod echo;
pub mod error;
pub mod extension;
pub mod frame;
pub mod handshake;
pub mod message;
pub mod parser;
pub mod server;
mod session;
pub mod stats;
pub mod utf8;

#[cfg(test)]
mod tests;

pub use app::{Accept, CloseInfo, Data, Message, WsApp, WsServerApp};
pub use client::WsClient;
pub use config::WsConfig;
pub use echo::WsEcho;
pub use error::ProtocolError;
pub use extension::{CodecError, MessageCodec};
pub use handshake::{ClientRequest, Reject, Request};
pub use message::MessageKind;
pub use server::{WsServer, WsStatsSink};
pub use session::{WsConn, WsHandle, WsSendError};
pub use stats::WsStats;
