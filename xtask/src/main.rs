//! `cargo xtask …`: project automation that is more than a one-line cargo command.
//!
//! - `cargo xtask bench echo [--duration S] [--rounds N] [--spin-us U] [--no-readme]`: the
//!   echo server on Rusty's stack (TAP) against the same server on the kernel's sockets,
//!   driven by the same client on the same cores; prints a table and writes it into the
//!   README (see [`bench_echo`]).

use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod bench_echo;
mod readme;

#[derive(Debug, Parser)]
#[command(name = "cargo xtask", about = "Rusty project automation")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Benchmarks.
    Bench {
        #[command(subcommand)]
        which: Bench,
    },
}

#[derive(Debug, Subcommand)]
enum Bench {
    /// Echo on TAP vs the same echo on the kernel backend (needs root).
    Echo(bench_echo::Options),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Bench {
            which: Bench::Echo(opts),
        } => bench_echo::run(&opts),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("xtask: {e}");
            ExitCode::FAILURE
        }
    }
}
