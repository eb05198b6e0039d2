//! N round trips of the 64-byte request/response workload (see `benches/support/rr.rs`)
//! over K connections, client and server engines on one thread and the in-memory link;
//! prints requests, elapsed time and requests per second.
//!
//! Usage: `request_response [N=100000] [K=1] [memory|fault] [B=32] [ipv4|ipv6]`;
//! `fault` puts the simulator's fault injector (with no faults) on the link; B is the
//! frames each engine takes from the link per loop turn (`rx_burst`); `ipv6` runs the
//! connections over IPv6. `-` stands for an argument's default. `scripts/callgrind-rr.sh`
//! runs it under callgrind with two values of N and subtracts, so set-up costs cancel
//! out. `smoltcp_rr` runs the same workload against a smoltcp server.

use std::process::ExitCode;

#[path = "../benches/support/cli.rs"]
mod cli;
#[path = "../benches/support/common.rs"]
mod common;
#[path = "../benches/support/rr.rs"]
mod rr;

fn run() -> Result<(), String> {
    let n = cli::arg(1, 100_000)?;
    let k = cli::count(2, 1, "K")?;
    let b = cli::count(4, rr::default_burst() as u64, "B")?;
    let family = rr::Family::parse(std::env::args().nth(5).as_deref())?;
    let setup = |link| format!("link {link} burst {b} {family:?}");
    match std::env::args().nth(3).as_deref() {
        None | Some("memory" | "-") => {
            rr::RrPair::memory(k, b, family)?.measure(n, k, &setup("memory"))
        }
        Some("fault") => {
            rr::RrPair::fault_injector(k, b, family)?.measure(n, k, &setup("fault-injector"))
        }
        Some(other) => Err(format!("unknown link {other:?} (memory or fault)")),
    }
}

fn main() -> ExitCode {
    cli::main("request_response", run)
}
