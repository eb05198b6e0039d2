//! The application API and its one implementation of the callback rules, shared by
//! every backend.
//!
//! Applications implement [`Handler`] and use the [`Conn`] and [`Opener`] handles their
//! callbacks get. Backends implement [`Connection`] (what `Conn` does) and [`AppConn`]
//! (what the core needs to lend the connection to the handler), and drive an
//! [`AppCore`]: it owns the handler, the connection table with its generations, the
//! re-offer of unread bytes and the exactly-one `closed`. Rusty's engine and the
//! kernel-socket backend both do, which is why an application cannot tell them apart
//! but by speed.

mod conn;
mod core;
mod handler;

pub use self::core::{AppConn, AppCore, UnreadBytes};
pub use conn::{CloseReason, Conn, ConnId, ConnectError, Connection, Opener, SendError};
pub use handler::Handler;
