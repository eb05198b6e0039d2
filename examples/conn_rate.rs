//! The connection-rate workload (see `benches/support/conn.rs`): N connections, each a
//! whole life (connect, 64-byte request, 64-byte response, server closes first and
//! keeps TIME-WAIT, client closes), C of them in flight at once, between a client and a
//! server engine on one thread and the in-memory link. Prints connections, elapsed time,
//! connections per second, the virtual clock's step and the server's TIME-WAIT counts.
//!
//! Usage: `conn_rate [N=100000] [C=64]`. `scripts/callgrind-conn.sh` runs it under
//! callgrind with two values of N and subtracts, for the server engine's instructions
//! per connection (`conn_server_turn`).
//!
//! Before the N connections are counted the run is brought to its steady state:
//! 1. Calibration: 2,000 connections at 1 ms a turn give the connections that end per
//!    loop turn, from which [`conn::ConnPair::step_for`] sets the clock's step so that
//!    the client's ephemeral ports take twice TIME-WAIT (2 × 60 s) to cycle.
//! 2. Warm-up: one cycle of the client's ports (28,232 connections, 120 s of virtual
//!    time). From then on every connection's TIME-WAIT entry on the server expires by
//!    its timer, about 60 s after it was made, before the client reuses the pair: the
//!    server makes and expires entries at the same rate and holds about 14,000.

use std::process::ExitCode;
use std::time::{Duration, Instant};

use rusty::Clock;

#[path = "../benches/support/cli.rs"]
mod cli;
#[path = "../benches/support/common.rs"]
mod common;
#[path = "../benches/support/conn.rs"]
mod conn;

use conn::ConnPair;

/// Connections of the calibration run.
const CALIBRATION: u64 = 2000;

fn run() -> Result<(), String> {
    let n = cli::arg(1, 100_000)?;
    let c = cli::count(2, 64, "C")?;
    let mut pair = ConnPair::new(c, Duration::from_millis(1))?;
    let stuck = |pair: &ConnPair, what: &str| format!("{what} stuck: {}", pair.describe());
    if pair.run(CALIBRATION) < CALIBRATION {
        return Err(stuck(&pair, "calibration"));
    }
    pair.step = ConnPair::step_for(CALIBRATION as f64 / pair.turns as f64);
    let warm = conn::client_ports() as u64;
    if pair.run(warm) < warm {
        return Err(stuck(&pair, "warm-up"));
    }
    let (turns, virtual_start) = (pair.turns, pair.clock.now());
    let start = Instant::now();
    let done = pair.run(n);
    let elapsed = start.elapsed();
    if done < n {
        return Err(format!(
            "{done} of {n} connections completed: {}",
            pair.describe()
        ));
    }
    let retransmissions = pair.client.stats().retransmissions + pair.server.stats().retransmissions;
    println!(
        "connections {n} concurrency {c} elapsed {:.3} s connections/s {:.0} step {:?} \
         turns/connection {:.2} virtual {:.1} s retransmissions {retransmissions}; {}",
        elapsed.as_secs_f64(),
        n as f64 / elapsed.as_secs_f64(),
        pair.step,
        (pair.turns - turns) as f64 / n as f64,
        (pair.clock.now() - virtual_start).as_secs_f64(),
        pair.time_wait()
    );
    Ok(())
}

fn main() -> ExitCode {
    cli::main("conn_rate", run)
}
