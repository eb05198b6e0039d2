//! # rusty
//!
//! Rusty is a shared-nothing, event-driven user-space TCP/IP stack. This facade
//! re-exports the public API of [`rusty_stack`]; see its documentation for the design and
//! a complete example handler.

pub use rusty_stack::*;
