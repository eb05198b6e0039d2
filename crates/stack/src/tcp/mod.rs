//! TCP (RFC 9293) and its extensions: the sans-IO connection state machine and the pure
//! pieces it is built from.

pub(crate) mod cc;
pub(crate) mod config;
// `pub` items for the `internals` feature, unreachable without it.
#[cfg_attr(not(feature = "internals"), allow(unreachable_pub))]
pub(crate) mod cookie;
pub(crate) mod isn;
pub(crate) mod options;
// `pub` items for the `internals` feature, unreachable without it.
#[cfg_attr(not(feature = "internals"), allow(unreachable_pub))]
pub(crate) mod pool;
pub(crate) mod recv_buffer;
pub(crate) mod rtt;
pub(crate) mod scoreboard;
// `pub` items for the `internals` feature, unreachable without it.
#[cfg_attr(not(feature = "internals"), allow(unreachable_pub))]
pub(crate) mod segment;
pub(crate) mod send_buffer;
#[cfg_attr(not(feature = "internals"), allow(unreachable_pub))]
pub(crate) mod seq;
pub(crate) mod tcb;
