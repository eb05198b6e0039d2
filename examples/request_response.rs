//! N round trips of the 64-byte request/response workload (see `benches/support/rr.rs`)
//! over K connections, client and server engines on one thread and the in-memory link;
//! prints requests, elapsed time and requests per second.
//!
//! Usage: `request_response [N=100000] [K=1] [memory|fault]`; `fault` puts the
//! simulator's fault injector (with no faults) on the link. `scripts/callgrind-rr.sh` runs it under
//! callgrind with two values of N and subtracts, so set-up costs cancel out.

use std::process::ExitCode;
use std::time::Instant;

use rusty::io::PacketIo;

#[path = "../benches/support/rr.rs"]
mod rr;

fn arg(index: usize, default: u64) -> Result<u64, String> {
    match std::env::args().nth(index) {
        None => Ok(default),
        Some(s) => s
            .replace('_', "")
            .parse()
            .map_err(|e| format!("argument {index} ({s:?}): {e}")),
    }
}

fn run() -> Result<(), String> {
    let n = arg(1, 100_000)?;
    let k = usize::try_from(arg(2, 1)?).map_err(|e| e.to_string())?;
    if k == 0 {
        return Err("K must be at least 1".into());
    }
    match std::env::args().nth(3).as_deref() {
        None | Some("memory") => measure(rr::RrPair::memory(k)?, n, k, "memory"),
        Some("fault") => measure(rr::RrPair::fault_injector(k)?, n, k, "fault-injector"),
        Some(other) => Err(format!("unknown link {other:?} (memory or fault)")),
    }
}

fn measure<D: PacketIo>(
    mut pair: rr::RrPair<D>,
    n: u64,
    k: usize,
    link: &str,
) -> Result<(), String> {
    let start = Instant::now();
    let done = pair.run(n);
    let elapsed = start.elapsed();
    if done != n {
        return Err(format!(
            "stuck after {done} of {n} requests: {}",
            pair.describe()
        ));
    }
    println!(
        "requests {n} connections {k} link {link} elapsed {:.3} s requests/s {:.0} retransmissions {}",
        elapsed.as_secs_f64(),
        n as f64 / elapsed.as_secs_f64(),
        pair.retransmissions()
    );
    Ok(())
}

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("request_response: {e}");
            ExitCode::FAILURE
        }
    }
}
