//! `rusty-run --metrics` and `--metrics-file`: the program runs as `rusty-run`'s
//! child, and `rusty-run` stays beside it to export its counters.
//!
//! The stacks run inside the program's processes (nginx's master and each worker),
//! none of which is Rusty's to give an endpoint to, and one endpoint per process would
//! need a port each. So with either flag, `rusty-run` does not exec the program: it
//! starts it as a child (same arguments, same environment, the library preloaded) and
//! stays as a small parent that
//!
//! - copies the counters the program's processes publish to the shared table (see
//!   `snapshots`) onto a [`Board`] a few times a second, and serves it and writes it
//!   with `rusty-metrics`' exporter, on threads of its own and kernel sockets, off the
//!   program's path;
//! - forwards the signals a service manager or a user sends it (`SIGTERM`, `SIGINT`,
//!   `SIGQUIT`, `SIGHUP`, `SIGUSR1`, `SIGUSR2`, `SIGWINCH`) to the child; one the
//!   kernel raised for a terminal (Ctrl-C, a hang-up, a resize) reached the child
//!   too, in the same process group, and is not sent twice;
//! - exits with the child's status when it exits (128 + the signal's number when a
//!   signal ended it). Should `rusty-run` itself die, the child gets `SIGTERM`.

use std::fmt;
use std::net::SocketAddr;
use std::os::fd::RawFd;
use std::path::PathBuf;
use std::process::{Command, ExitStatus};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rusty_metrics::{Board, ExportError, Exporter, Report, Snapshot};

use crate::snapshots::{self, SLOTS};
use crate::sys::{self, Signals};

/// The signals passed on to the program.
const FORWARDED: [i32; 7] = [
    libc::SIGTERM,
    libc::SIGINT,
    libc::SIGQUIT,
    libc::SIGHUP,
    libc::SIGUSR1,
    libc::SIGUSR2,
    libc::SIGWINCH,
];

/// How often the slots are copied onto the board (and the child looked at when no
/// signal says it ended): a scrape's counters are at most this much older than the
/// processes' last publication.
const TICK: Duration = Duration::from_millis(250);

/// What the supervisor exports, and where.
#[derive(Debug, Clone)]
pub struct Exports {
    /// `--metrics`: serve at this address.
    pub listen: Option<SocketAddr>,
    /// `--metrics-file`: write to this file.
    pub file: Option<PathBuf>,
    /// The name each process's samples carry in `rusty_worker_info` (the link's).
    pub name: String,
}

/// Why the program could not be supervised.
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// The endpoint or the file could not start (exit code 1, as for the other
    /// binaries).
    Metrics(ExportError),
    /// Anything else: the program could not start, the table did not map, ...
    Other(String),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Metrics(e) => write!(f, "{e}"),
            Error::Other(e) => f.write_str(e),
        }
    }
}

impl std::error::Error for Error {}

impl From<String> for Error {
    fn from(e: String) -> Error {
        Error::Other(e)
    }
}

/// Run `program` as a child, with the counters its processes publish to the table in
/// memory file `table` ([`table_file`](crate::table_file)'s) exported as `exports`
/// says, until it exits; its exit code as a shell reports it. An error (an address that
/// cannot be bound, a program that cannot start) comes before the program runs.
pub fn supervise(mut program: Command, table: RawFd, exports: &Exports) -> Result<u8, Error> {
    // Before any thread starts, so that every thread has them blocked and the loop
    // below takes them; the child starts with the mask from before.
    let mut blocked = FORWARDED.to_vec();
    blocked.push(libc::SIGCHLD);
    let signals = Signals::block(&blocked).map_err(|e| {
        format!(
            "cannot block signals: {}",
            std::io::Error::from_raw_os_error(e)
        )
    })?;
    let slots = crate::siblings::snapshots_in(table)?;
    slots.watch();
    let board = Board::new(vec![exports.name.clone(); SLOTS], snapshots::INTERVAL);
    let exporter =
        Exporter::start(&board, exports.listen, exports.file.clone()).map_err(Error::Metrics)?;
    if let Some(addr) = exporter.local_addr() {
        eprintln!("rusty-run: metrics: serving http://{addr}/metrics");
    }
    signals.unblock_in(&mut program);
    sys::end_with_parent(&mut program, libc::SIGTERM);
    let name = program.get_program().to_string_lossy().into_owned();
    let mut child = program
        .spawn()
        .map_err(|e| format!("cannot run {name}: {e}"))?;
    let pid = child.id();
    let status = loop {
        if let Some(caught) = signals.wait(TICK) {
            let from_terminal = caught.by_kernel && sys::in_my_process_group(pid);
            if caught.signal != libc::SIGCHLD && !from_terminal {
                sys::send_signal(pid, caught.signal);
            }
        }
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) => relay(slots, &board),
            Err(e) => return Err(format!("waiting for {name}: {e}").into()),
        }
    };
    relay(slots, &board);
    drop(exporter);
    Ok(exit_code(status))
}

/// Copy every slot onto `board`: a process's latest counters, or nothing for a slot
/// whose process ended.
fn relay(slots: &snapshots::Table, board: &Arc<Board>) {
    let (clock, now) = (sys::monotonic_ns(), Instant::now());
    for i in 0..SLOTS {
        let snapshot = slots.read(i).map(|p| Snapshot {
            stats: p.stats,
            gauges: p.gauges,
            app: Report::new(),
            taken: now.checked_sub(Duration::from_nanos(clock.saturating_sub(p.taken))),
            pid: Some(p.pid),
        });
        board.store(i, snapshot);
    }
}

/// The code a shell reports for `status`: the exit code, or 128 + the signal that
/// ended the process.
fn exit_code(status: ExitStatus) -> u8 {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => code as u8,
        (None, Some(signal)) => 128u8.saturating_add(signal as u8),
        (None, None) => 1,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exit_codes_are_a_shells() {
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(exit_code(ExitStatus::from_raw(0)), 0);
        assert_eq!(exit_code(ExitStatus::from_raw(3 << 8)), 3);
        assert_eq!(exit_code(ExitStatus::from_raw(libc::SIGTERM)), 143);
        assert_eq!(exit_code(ExitStatus::from_raw(libc::SIGKILL)), 137);
    }
}
