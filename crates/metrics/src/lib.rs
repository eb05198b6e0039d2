//! # rusty-metrics
//!
//! Live metrics for Rusty's programs, in the Prometheus text exposition format
//! (version 0.0.4): every counter of the stack ([`Stats`](rusty_stack::Stats), drops
//! by reason), the connections each worker holds, and the application's own counters,
//! each sample labelled with its worker.
//!
//! - Workers publish a [`Snapshot`] to their slot of a [`Board`] at a fixed interval,
//!   through their [`Publisher`]; nothing on the data path changes (see [`board`]).
//! - An application's handler contributes its counters by implementing
//!   [`AppMetrics`]; the stack crate knows nothing of this one.
//! - [`Exporter`] serves the board at `GET /metrics` from a thread of its own
//!   ([`serve`]) and writes it to a file at each interval ([`file`](mod@file)).
//! - A program whose stacks run in other processes (`rusty-run`) has them publish
//!   their counters as rows of words in shared memory ([`flat`]), and copies those
//!   into its board ([`Board::store`]).
//!
//! With the `tls` feature, rusty-tls's `Tls` adapter reports its counters and those of
//! the application inside it.

#![warn(missing_docs)]

pub mod board;
pub mod file;
pub mod flat;
mod render;
mod report;
pub mod serve;
pub mod text;
#[cfg(feature = "tls")]
mod tls;

use std::fmt;
use std::io;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

pub use board::{Board, Gauges, Publisher, Snapshot};
pub use render::{render, render_as};
pub use report::{AppMetrics, AppSample, Report};
pub use serve::Limits;
#[cfg(feature = "tls")]
pub use tls::report_tls;

/// Why the exporter could not start.
#[derive(Debug)]
#[non_exhaustive]
pub enum ExportError {
    /// The endpoint could not listen on its address.
    Listen(SocketAddr, io::Error),
    /// The file could not be written.
    File(PathBuf, io::Error),
}

impl fmt::Display for ExportError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ExportError::Listen(a, e) => write!(f, "--metrics {a}: {e}"),
            ExportError::File(p, e) => write!(f, "--metrics-file {}: {e}", p.display()),
        }
    }
}

impl std::error::Error for ExportError {}

/// The endpoint and the file writer a program asked for; dropping it stops both (the
/// file gets the last counters first).
pub struct Exporter {
    endpoint: Option<serve::Endpoint>,
    _file: Option<file::FileWriter>,
}

impl Exporter {
    /// Serve `board` on `listen` and write it to `file`, each if given.
    pub fn start(
        board: &Arc<Board>,
        listen: Option<SocketAddr>,
        file: Option<PathBuf>,
    ) -> Result<Exporter, ExportError> {
        let endpoint = match listen {
            Some(a) => Some(
                serve::Endpoint::start(a, board.clone(), Limits::default())
                    .map_err(|e| ExportError::Listen(a, e))?,
            ),
            None => None,
        };
        let file = match file {
            Some(p) => Some(
                file::FileWriter::start(p.clone(), board.clone())
                    .map_err(|e| ExportError::File(p, e))?,
            ),
            None => None,
        };
        Ok(Exporter {
            endpoint,
            _file: file,
        })
    }

    /// Where the endpoint listens, if there is one.
    pub fn local_addr(&self) -> Option<SocketAddr> {
        self.endpoint.as_ref().map(serve::Endpoint::local_addr)
    }
}
