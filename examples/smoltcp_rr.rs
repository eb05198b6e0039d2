//! The 64-byte request/response workload of `request_response` (see
//! `benches/support/rr.rs`) with a smoltcp server instead of Rusty's: the client is the
//! same Rusty engine on the same in-memory link, so only the server differs. The
//! server (`benches/support/smoltcp_server.rs`) is one smoltcp `Interface` with one TCP
//! socket per connection; its loop turn is `smoltcp_server_turn`, which
//! `scripts/callgrind-compare.sh` collects alone
//! (`--toggle-collect=*smoltcp_server_turn*`) for smoltcp's instructions per request
//! next to Rusty's `server_turn`.
//!
//! Usage: `smoltcp_rr [N=100000] [K=1] [B=32]`: N round trips over K connections, each
//! end taking at most B frames from the link per loop turn (Rusty's `rx_burst`; for
//! smoltcp, frames handed to the interface per turn); prints requests, elapsed time and
//! requests per second.
//!
//! Both servers run with what Rusty's defaults (`sim::engine_config`) set, where
//! smoltcp has the option: timestamps on (TSvals in milliseconds of the same virtual
//! clock), window scaling on with the same shift (256 KiB receive buffers give smoltcp
//! shift 3, as Rusty's `recv_buffer` does), SACK permitted (smoltcp agrees to it when
//! the client offers it), Nagle off (Rusty has no Nagle), a 40 ms delayed-ACK timeout
//! (smoltcp's default is 10 ms) and CUBIC congestion control, MSS 1460, no checksum
//! offload. The clock is the same virtual clock, 1 µs per loop turn, and smoltcp's
//! random seed is fixed, so runs replay exactly.
//!
//! What could not be matched:
//! - Delayed ACKs: both ACK out-of-order data at once and otherwise wait up to the
//!   timeout, but Rusty ACKs every second full-sized segment and smoltcp as soon as
//!   more than one MSS of data is unacknowledged. With one 64-byte request
//!   outstanding per connection, both answer within the turn and the ACK rides on the
//!   response, so neither rule nor timer comes into play here.
//! - Timestamps: Rusty adds a per-connection offset to its TSvals (RFC 7323 §7.1);
//!   smoltcp's generator is one function for all sockets, so it sends the bare clock.
//! - Send and receive buffers: Rusty grows its rings on demand (2 KiB first) up to
//!   256 KiB; smoltcp's are fixed at 256 KiB each from the start (untouched pages cost
//!   no instructions, but the sockets occupy K × 512 KiB of address space).
//! - Loss recovery beyond the basics (RACK-TLP, SACK-based recovery, undoing spurious
//!   retransmissions) and the memory budget are Rusty's only; nothing is lost here,
//!   so they do not run.
//! - Frames per turn: smoltcp's `Interface::poll` would take every frame the device
//!   has; here the interface is handed at most B per turn, as many as each Rusty engine
//!   takes (`rx_burst`), so that one turn serves as many requests for either server.
//! - Demultiplexing: smoltcp finds a segment's socket by walking the socket set, and
//!   the application finds readable sockets by walking them all every turn (smoltcp
//!   has no readiness events); Rusty looks flows up in a hash table and calls the
//!   handler for the connection that has data. That is the design, not an option.

use std::process::ExitCode;

use rusty::time::VirtualClock;

#[path = "../benches/support/cli.rs"]
mod cli;
#[path = "../benches/support/common.rs"]
mod common;
// The Rusty server's constructors in it serve the other binaries.
#[allow(dead_code)]
#[path = "../benches/support/rr.rs"]
mod rr;
#[path = "../benches/support/smoltcp_server.rs"]
mod smoltcp_server;

use smoltcp_server::{Buffers, SmoltcpServer};

fn run() -> Result<(), String> {
    let n = cli::arg(1, 100_000)?;
    let k = cli::count(2, 1, "K")?;
    let burst = cli::count(3, rr::default_burst() as u64, "B")?;
    let clock = VirtualClock::new();
    let (a, b) = common::link(2 * k);
    let mut buffers = Buffers::new(k);
    let server = SmoltcpServer::new(b, clock.clone(), &mut buffers, burst);
    let setup = format!("server smoltcp burst {burst}");
    rr::RrPair::build(clock, a, server, k, burst, rr::Family::V4)?.measure(n, k, &setup)
}

fn main() -> ExitCode {
    cli::main("smoltcp_rr", run)
}
