//! # rusty-testkit
//!
//! What Rusty's tests, benchmarks, fuzz targets and examples run on:
//!
//! - [`memory`]: the in-memory link, two connected ends (or sets of queues) that move
//!   Ethernet frames between engines on one thread;
//! - [`sim`]: two engines joined by that link, each direction behind a seeded fault
//!   injector, on one virtual clock ([`sim::SimPair`]);
//! - [`rig`]: a driver tested against a model of its device, with frames carried to and
//!   from the model's wire;
//! - [`MemoryTrend`] and [`heap_trend`]: whether a heap sampled under steady load keeps
//!   growing.
//!
//! The in-memory link and the simulator are compiled in `rusty-stack` (behind its
//! `testkit` feature, which this crate turns on) because the stack's own unit tests run
//! on them and reach the engine's internals; this crate is how every other crate reaches
//! them. A production build of `rusty-stack` contains neither.

#![warn(missing_docs)]

pub mod rig;
mod trend;

pub use rusty_stack::io::memory;
pub use rusty_stack::sim;
pub use trend::{heap_trend, MemoryTrend};
