//! # rusty-preload
//!
//! Unmodified Linux programs on Rusty: `librusty_preload.so` interposes the socket
//! calls of a program it is preloaded into and runs the program's TCP sockets on a
//! Rusty engine inside the program's own process; `rusty-run` is the wrapper that
//! checks the flags, sets the environment and execs the program (or, exporting
//! metrics, runs it as a child and stays beside it: [`supervisor`]).

#![warn(missing_docs)]

mod call;
pub mod config;
mod handover;
mod heirs;
pub mod sockets;
// The C-facing functions: the crate's unsafe code is here and in `sys`, each block
// with its SAFETY note.
#[allow(unsafe_code)]
mod hooks;
mod options;
mod process;
mod siblings;
mod snapshots;
mod start;
pub mod supervisor;
#[allow(unsafe_code)]
mod sys;

pub use siblings::{table_file, SHARED_VAR};
