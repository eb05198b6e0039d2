//! The application API and its one implementation of the callback rules, shared by
//! every backend.
//!
//! Applications implement [`Handler`] and use the [`Conn`] and [`Opener`] handles their
//! callbacks get. Backends (see [`crate::backend`]) implement `Connection` (what `Conn`
//! does) and `AppConn` (what the core needs to lend the connection to the handler), and
//! drive an `AppCore`: it owns the handler, the connection table with its generations, the
//! re-offer of unread bytes and the exactly-one `closed`. Rusty's engine and the
//! kernel-socket backend both do, which is why an application cannot tell them apart
//! but by speed.

pub(crate) mod conn;
pub(crate) mod core;
mod handler;
mod table;

pub(crate) use self::core::slot_bytes;
pub(crate) use self::core::{AppConn, AppCore, UnreadBytes};
pub(crate) use conn::Connection;
pub use conn::{CloseReason, Conn, ConnId, ConnectError, OpenResult, Opener, SendError};
pub use handler::Handler;

/// Defines the accessors every backend's engine offers over its application core, for
/// a type with an `app: AppCore<H, _>` field and a `stats: Stats` field: `handler`,
/// `handler_mut`, `stats` and `connection_count`. Both backends invoke it inside their
/// engine's `impl` block (`rusty_stack::app_accessors!(H);`), so their surfaces cannot
/// drift apart.
#[doc(hidden)]
#[macro_export]
macro_rules! app_accessors {
    ($handler:ident) => {
        /// The application's handler.
        pub fn handler(&self) -> &$handler {
            self.app.handler()
        }
        /// The application's handler.
        pub fn handler_mut(&mut self) -> &mut $handler {
            self.app.handler_mut()
        }
        /// This worker's counters.
        pub fn stats(&self) -> &$crate::Stats {
            &self.stats
        }
        /// Connections in the worker's table (see the engine's docs for which states
        /// that covers).
        pub fn connection_count(&self) -> usize {
            self.app.len()
        }
    };
}
