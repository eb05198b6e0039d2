//! TCP (RFC 9293) and its extensions: the sans-IO connection state machine and the pure
//! pieces it is built from.

pub mod cc;
pub mod config;
pub mod cookie;
pub mod isn;
pub(crate) mod options;
pub mod pool;
pub mod recv_buffer;
pub mod rtt;
pub mod segment;
pub mod send_buffer;
pub mod seq;
pub mod tcb;
#[cfg(test)]
mod tcb_tests;
