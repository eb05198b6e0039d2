//! `cargo xtask …`: project automation that is more than a one-line cargo command.
//!
//! The benchmarks and the Autobahn run write their results into the documentation, each
//! into its own block between marker lines (`<!-- bench-echo:start -->` …
//! `<!-- bench-echo:end -->`): the benchmarks into `docs/benchmarks.md`, Autobahn into
//! `docs/websocket.md` (see [`results`]). The benchmarks also draw SVG charts of the
//! medians in their tables ([`chart`]) into `docs/charts/`, which their blocks show.
//! `--no-docs` (old name: `--no-readme`) only prints, and writes the charts under the
//! target directory's `charts/`; `--quick` is the shortest run that still measures
//! every server and case, and implies `--no-docs`.
//!
//! - `cargo xtask bench echo [--duration S] [--rounds N] [--quick] [--spin-us U]
//!   [--no-xdp] [--family ipv4|ipv6|both] [--no-docs]`: the echo server on Rusty's stack (TAP,
//!   AF_XDP) against the same server on the kernel's sockets, driven by the same client
//!   on the same cores, over IPv4 and IPv6; prints a table and writes it into
//!   `docs/benchmarks.md` (see [`bench_echo`]).
//! - `cargo xtask bench ws [--duration S] [--rounds N] …`: the same for `ws-echo` under
//!   `ws-load`: WebSocket messages of 128 B, 1 KiB and 8 KiB over 240 connections
//!   (see [`bench_echo`]).
//! - `cargo xtask bench http [--duration S] [--rounds N] [--quick] [--connections C]
//!   [--no-nginx] [--no-xdp] [--family ipv4|ipv6|both] …`: httpd on Rusty's stack (TAP, AF_XDP), the
//!   same httpd on the kernel's sockets and nginx, one server core each, under the same
//!   wrk, over IPv4 and IPv6 (nginx over IPv4); prints a table and writes it into
//!   `docs/benchmarks.md` (see [`bench_http`]). With `--tls`, the same cases over HTTPS
//!   (TLS 1.3, one suite, full handshakes) for httpd on TAP and on kernel sockets and
//!   nginx, in a block of their own.
//!
//! Both report server CPU and whole-machine CPU per request or message; their Rusty-on-
//! AF_XDP row shares its veth pair, trial start and goals ([`xdp`]), their families the
//! addresses, rows and IPv6 goal of [`family`].
//! - `cargo xtask bench preload [--duration S] [--rounds N] [--quick] …`: unmodified nginx
//!   (1 and 2 workers) and redis-server on Rusty through `rusty-run` over a TAP against
//!   the same binaries on the kernel's sockets behind a veth pair, under wrk and
//!   redis-benchmark; prints a table and writes it into `docs/benchmarks.md` (see
//!   [`bench_preload`]).
//! - `cargo xtask bench loss [--quick] [--single SIZE] [--multi NxSIZE] [--loss P,…] …`:
//!   bulk transfers under nftables random loss in both directions, Rusty as sender and
//!   as receiver, each against the same application on Linux's TCP behind a veth pair;
//!   prints a table and writes it into `docs/benchmarks.md` (see [`bench_loss`]).
//! - `cargo xtask check-svg PATH…`: each chart an SVG document with finite coordinates
//!   that draws data (see [`chart`]).
//! - `cargo xtask gen-pages DIR`: the HTTP benchmark's page set (see [`pages`]).
//! - `cargo xtask cross-build TARGET [--release] [-p NAME]`: the workspace's binaries,
//!   or one package's library, for another target; `tilegx` does what today's
//!   toolchains allow and names what blocks the rest (see [`cross`], [`tilegx`]).
//! - `cargo xtask cross-test TARGET [--release]`: the cross-built httpd under qemu-user
//!   answers curl with the right bytes (see [`cross_test`]).
//! - `cargo xtask soak [--minutes N] [--backend tap|kernel] …`: httpd under a mix of
//!   clients (wrk's keep-alive load, short connections, range requests, slow readers,
//!   clients that vanish) for a long while (15 minutes by default), its resident and
//!   buffer memory and its metrics sampled every 30 s; writes a report and the samples
//!   as CSV, and fails when a request fails or memory keeps growing after the warm-up
//!   (see [`soak`]).
//! - `cargo xtask autobahn [--backend kernel|tap|all] [--deflate] [--tls] [--quick] …`:
//!   the Autobahn TestSuite against `ws-echo` on the kernel backend and on TAP, over
//!   ws:// or (`--tls`) wss://; prints a per-section summary and writes it into
//!   `docs/websocket.md` (see [`autobahn`]).

use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod autobahn;
mod bench_echo;
mod bench_http;
mod bench_loss;
mod bench_preload;
mod chart;
mod common;
mod cross;
mod cross_test;
mod family;
mod goals;
mod http_load;
mod pages;
mod results;
mod soak;
mod tilegx;
mod xdp;
// The system calls std does not wrap, through rustix.
mod sys;

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
    /// Write the HTTP benchmark's page set (500 log-normal pages and a 64-byte page).
    GenPages {
        /// Directory to write into (made if missing).
        dir: std::path::PathBuf,
    },
    /// Build the workspace's binaries (or one package's library) for another target.
    CrossBuild(cross::BuildArgs),
    /// Run the cross-built httpd under qemu-user and check what curl fetches from it.
    CrossTest(cross_test::TestArgs),
    /// The Autobahn TestSuite's fuzzing client against ws-echo on the kernel backend
    /// and on TAP (TAP needs root).
    Autobahn(autobahn::Options),
    /// httpd under a mix of clients for minutes, its memory and metrics sampled;
    /// fails when a request fails or memory keeps growing (needs root).
    Soak(soak::Options),
    /// Check charts the benchmarks wrote: each an SVG document with finite coordinates
    /// that draws data.
    CheckSvg {
        /// The SVG files.
        #[arg(required = true)]
        paths: Vec<std::path::PathBuf>,
    },
}

#[derive(Debug, Subcommand)]
enum Bench {
    /// Echo on TAP and AF_XDP vs the same echo on the kernel backend (needs root).
    Echo(bench_echo::Options),
    /// WebSocket echo (ws-echo under ws-load, 240 connections, 128 B / 1 KiB / 8 KiB)
    /// on TAP and AF_XDP vs the kernel backend (needs root).
    Ws(bench_echo::Options),
    /// httpd on TAP and AF_XDP vs httpd on the kernel backend vs nginx, under wrk (needs
    /// root).
    Http(bench_http::Options),
    /// Bulk transfers under random loss: Rusty vs Linux as sender and receiver (needs
    /// root).
    Loss(bench_loss::Options),
    /// nginx and redis on Rusty through rusty-run (TAP) vs on the kernel's sockets
    /// behind a veth pair, under wrk and redis-benchmark (needs root).
    Preload(bench_preload::Options),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Bench {
            which: Bench::Echo(opts),
        } => bench_echo::run(&opts, &bench_echo::ECHO),
        Command::Bench {
            which: Bench::Ws(opts),
        } => bench_echo::run(&opts, &bench_echo::WS),
        Command::Bench {
            which: Bench::Http(opts),
        } => bench_http::run(&opts),
        Command::Bench {
            which: Bench::Loss(opts),
        } => bench_loss::run(&opts),
        Command::Bench {
            which: Bench::Preload(opts),
        } => bench_preload::run(&opts),
        Command::GenPages { dir } => bench_http::gen_pages(&dir),
        Command::CrossBuild(args) => cross::run(&args),
        Command::CrossTest(args) => cross_test::run(&args),
        Command::Autobahn(opts) => autobahn::run(&opts),
        Command::Soak(opts) => soak::run(&opts),
        Command::CheckSvg { paths } => chart::check_files(&paths),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("xtask: {e}");
            ExitCode::FAILURE
        }
    }
}
