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
//! None of this is in `rusty-stack`: a production build of the stack carries no test
//! double. The stack's engine tests are integration tests (`crates/stack/tests/`) that
//! run on this crate, and reach the few engine internals they check through the stack's
//! `internals` feature.

#![warn(missing_docs)]

pub mod memory;
pub mod rig;
pub mod sim;
mod trend;

pub use trend::{heap_trend, MemoryTrend};
