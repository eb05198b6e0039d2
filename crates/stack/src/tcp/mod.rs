//! TCP (RFC 9293) and its extensions: the sans-IO connection state machine and the pure
//! pieces it is built from.

pub(crate) mod cc;
pub mod config;
pub(crate) mod cookie;
pub(crate) mod isn;
pub(crate) mod options;
pub mod pool;
pub(crate) mod recv_buffer;
pub(crate) mod rtt;
pub(crate) mod scoreboard;
pub mod segment;
pub(crate) mod send_buffer;
pub mod seq;
pub mod tcb;
