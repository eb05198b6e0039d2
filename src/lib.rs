//! # rusty
//!
//! Rusty is a shared-nothing, event-driven user-space TCP/IP stack. This facade
//! re-exports the public API of [`rusty_stack`] (see its documentation for the design
//! and a complete example handler) and adds the command line every binary shares
//! ([`cli`]: flags, link specs, addresses) and [`launch`], which turns the link specs of
//! a command line into pinned workers on Rusty's stack or the kernel's.

#![warn(missing_docs)]

pub mod cli;
pub mod launch;
mod secret;

/// Live metrics: the handler's [`AppMetrics`](metrics::AppMetrics) seam, the text
/// format, the scrape endpoint and the metrics file.
pub use rusty_metrics as metrics;
/// Pinned worker threads, stop signals, pcap capture and the model-device bridge.
pub use rusty_runtime as runtime;
pub use rusty_stack::*;
