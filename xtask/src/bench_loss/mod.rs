//! `cargo xtask bench loss`: bulk transfers under random packet loss, Rusty against
//! Linux, side by side in one run.
//!
//! Two directions, each against the same Linux-to-Linux baseline:
//!
//! - **Rusty sends**: `httpd` on Rusty (TAP) serves a generated file to a Linux client;
//!   the baseline is the same `httpd` on kernel sockets in a namespace of its own behind
//!   a veth pair, so the application is the same and only the sender's TCP differs.
//! - **Rusty receives**: a Linux client sends to `echo --discard` (RFC 863) on Rusty
//!   (TAP); the baseline is the same discard server on kernel sockets behind the veth.
//!
//! Each runs one connection with `--single` bytes and `--multi` N connections at once,
//! under every `--loss` rate, with nftables on a bridge between the Linux peer and both
//! servers dropping that share of the TCP packets in each direction, independently
//! ([`net`] has the topology and the rules). Servers run pinned to `--server-cpu`, the
//! Linux peer ([`peer`]) to `--client-cpu`. Every run starts a fresh server and fresh
//! rules; the stacks alternate which goes first, case by case and round by round.
//!
//! Measured per run ([`runs`]): goodput (the application's bytes over the peer's wall
//! time); retransmitted bytes per lost byte, both counted on the wire by the rules
//! (payload bytes sent in the data direction minus the bytes the receiving application
//! read, over the payload bytes dropped in that direction); the sender's retransmission
//! timeouts (Rusty's `rto` counter; Linux's `TcpExt.TCPTimeouts` in the sender's
//! namespace); and CPU per MB, of the server process and of the whole machine. The table
//! ([`report`]) shows medians and the Rusty / Linux ratios; MB are 10⁶ bytes.
//!
//! On every exit path (errors, SIGINT/SIGTERM) the processes started here are killed by
//! PID and the three namespaces (with the TAP, the bridge, the veth pairs and the rules)
//! are deleted.

mod net;
mod peer;
mod report;
mod runs;

use crate::common::{find_program, release_bin, HostArgs, Result, TempDir};
use crate::results::{publish, Block};
use net::LossNet;
use runs::{Ctx, Sample};

/// The marker lines of this benchmark's block in `docs/benchmarks.md`.
const BLOCK: Block = Block {
    start: "<!-- bench-loss:start -->",
    end: "<!-- bench-loss:end -->",
};
const DEFAULT_SINGLE: u64 = 64_000_000;
const DEFAULT_MULTI: (usize, u64) = (16, 4_000_000);
const QUICK_SINGLE: u64 = 2_000_000;
const QUICK_MULTI: (usize, u64) = (16, 250_000);
/// Loss rates in 1/10,000: 0.1, 1, 3 and 5 %; with `--quick`, 1 and 5 %.
const DEFAULT_LOSS: [u32; 4] = [10, 100, 300, 500];
const QUICK_LOSS: [u32; 2] = [100, 500];

#[derive(Debug, Clone, clap::Args)]
pub(crate) struct Options {
    /// Bytes on the single connection (suffixes k, M, G are powers of 1000)
    /// [default: 64M; --quick: 2M].
    #[arg(long, value_name = "SIZE", value_parser = parse_size)]
    pub single: Option<u64>,
    /// Connections at once and the bytes on each, as NxSIZE [default: 16x4M; --quick:
    /// 16x250k].
    #[arg(long, value_name = "NxSIZE", value_parser = parse_multi)]
    pub multi: Option<(usize, u64)>,
    /// Loss rates in percent, each applied to both directions (0.01 % steps) [default:
    /// 0.1,1,3,5; --quick: 1,5].
    #[arg(long, value_name = "PERCENT,…", value_delimiter = ',', value_parser = parse_percent)]
    pub loss: Vec<u32>,
    /// Which of Rusty's roles to run.
    #[arg(long, value_enum, default_value_t = Roles::Both)]
    pub rusty_as: Roles,
    /// Smoke run: small transfers (see --single and --multi), two loss rates and one
    /// round; leaves the docs alone (implies --no-docs) and writes the chart under the
    /// target directory.
    #[arg(long)]
    pub quick: bool,
    /// Runs per case and stack; the table shows the median [default: 3; --quick: 1].
    #[arg(long)]
    pub rounds: Option<usize>,
    /// Seconds a transfer may take; one that takes longer is reported with what arrived.
    #[arg(long, value_name = "SECONDS", default_value_t = 120)]
    pub timeout: u64,
    #[command(flatten)]
    pub host: HostArgs,
}

impl Options {
    fn single(&self) -> u64 {
        self.single.unwrap_or(if self.quick {
            QUICK_SINGLE
        } else {
            DEFAULT_SINGLE
        })
    }
    fn multi(&self) -> (usize, u64) {
        self.multi.unwrap_or(if self.quick {
            QUICK_MULTI
        } else {
            DEFAULT_MULTI
        })
    }
    fn rounds(&self) -> usize {
        self.rounds.unwrap_or(if self.quick { 1 } else { 3 })
    }
    /// Whether to leave the docs alone: `--no-docs`, or `--quick`.
    fn no_docs(&self) -> bool {
        self.host.no_docs || self.quick
    }
    /// The loss rates, in 1/10,000.
    fn loss(&self) -> Vec<u32> {
        if !self.loss.is_empty() {
            self.loss.clone()
        } else if self.quick {
            QUICK_LOSS.to_vec()
        } else {
            DEFAULT_LOSS.to_vec()
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Roles {
    Sender,
    Receiver,
    Both,
}

/// Which way the data flows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Direction {
    /// httpd serves a file to the Linux peer.
    RustySends,
    /// The Linux peer sends to a discard server.
    RustyReceives,
}

impl Direction {
    fn label(self) -> &'static str {
        match self {
            Direction::RustySends => "sender",
            Direction::RustyReceives => "receiver",
        }
    }
}

/// Whose TCP is at the far end from the Linux peer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stack {
    /// Rusty on the TAP.
    Rusty,
    /// The same application on kernel sockets, in the server namespace.
    Linux,
}

impl Stack {
    fn label(self) -> &'static str {
        match self {
            Stack::Rusty => "Rusty (TAP)",
            Stack::Linux => "Linux",
        }
    }
}

/// One row of the table: a direction, a transfer shape and a loss rate.
#[derive(Debug, Clone, Copy)]
struct Case {
    direction: Direction,
    conns: usize,
    /// Bytes on each connection.
    bytes: u64,
    /// Loss in each direction, in 1/10,000.
    basis_points: u32,
}

impl Case {
    fn transfer(&self) -> String {
        format!("{} × {}", self.conns, size_label(self.bytes))
    }
    fn loss(&self) -> String {
        percent_label(self.basis_points)
    }
}

pub(crate) fn run(opts: &Options) -> Result<()> {
    let (n, per) = opts.multi();
    if opts.rounds() == 0 || opts.timeout == 0 || n == 0 {
        return Err("--rounds, --timeout and --multi must not be zero".into());
    }
    if opts.single() == 0 || per == 0 {
        return Err("transfer sizes must be at least 1 byte".into());
    }
    let (interrupted, root) = opts
        .host
        .prepare("bench loss", &["rusty-httpd", "rusty-echo"])?;
    let nft = find_program("nft")
        .ok_or("nft is not installed (Debian: `apt-get install nftables`)".to_string())?;
    let python = find_program("python3").ok_or("python3 is not installed".to_string())?;

    let pid = std::process::id();
    let tmp = TempDir::new(&format!("rusty-bench-loss-{pid}"))?;
    let files = runs::write_files(tmp.path(), opts.single(), per)?;
    let logs = tmp.path().join("logs");
    std::fs::create_dir_all(&logs).map_err(|e| format!("creating {}: {e}", logs.display()))?;
    let net = LossNet::create(pid)?;

    let mut cases = Vec::new();
    for direction in [Direction::RustySends, Direction::RustyReceives] {
        let wanted = match direction {
            Direction::RustySends => opts.rusty_as != Roles::Receiver,
            Direction::RustyReceives => opts.rusty_as != Roles::Sender,
        };
        if !wanted {
            continue;
        }
        for (conns, bytes) in [(1, opts.single()), (n, per)] {
            for basis_points in opts.loss() {
                cases.push(Case {
                    direction,
                    conns,
                    bytes,
                    basis_points,
                });
            }
        }
    }
    let ctx = Ctx {
        opts,
        httpd: release_bin(&root, "httpd")?,
        echo: release_bin(&root, "echo")?,
        python,
        nft,
        files,
        net: &net,
        scratch: tmp.path(),
        logs: &logs,
        interrupted: &interrupted,
    };

    let total = opts.rounds() * cases.len() * 2;
    eprintln!(
        "bench loss: {total} transfers (servers on CPU {}, Linux peer on CPU {}, namespaces {}, \
         {} and {})",
        opts.host.server_cpu, opts.host.client_cpu, net.bridge.name, net.peer.0, net.server.0
    );
    let mut samples: Vec<Vec<(Stack, Sample)>> = vec![Vec::new(); cases.len()];
    let mut k = 0;
    let result: Result<()> = (|| {
        for round in 0..opts.rounds() {
            for (ci, case) in cases.iter().enumerate() {
                let order = if (round + ci) % 2 == 0 {
                    [Stack::Rusty, Stack::Linux]
                } else {
                    [Stack::Linux, Stack::Rusty]
                };
                for stack in order {
                    k += 1;
                    let s = ctx.run_one(case, stack, k)?;
                    eprintln!(
                        "  [{k}/{total}] round {} Rusty as {:<8} {:>10} loss {:>6} {:<12} {}",
                        round + 1,
                        case.direction.label(),
                        case.transfer(),
                        case.loss(),
                        stack.label(),
                        s.summary()
                    );
                    samples[ci].push((stack, s));
                }
            }
        }
        Ok(())
    })();
    drop(net);
    tmp.finish(result, opts.host.keep_logs, "bench loss")?;

    let table = report::table(&cases, &samples);
    println!("{table}");
    let charts = [report::chart(&cases, &samples)?];
    publish(
        &root,
        "bench loss",
        opts.no_docs(),
        &charts,
        BLOCK,
        |charts| report::block_body(opts, charts, &table),
    )
}

/// `64M`, `250k`, `1G`, `1000`: a byte count with an optional power-of-1000 suffix.
fn parse_size(s: &str) -> std::result::Result<u64, String> {
    let s = s.trim();
    let (digits, scale) = match s.char_indices().last() {
        Some((i, 'k' | 'K')) => (&s[..i], 1_000),
        Some((i, 'M')) => (&s[..i], 1_000_000),
        Some((i, 'G')) => (&s[..i], 1_000_000_000),
        _ => (s, 1),
    };
    let v: f64 = digits
        .parse()
        .map_err(|_| format!("'{s}' is not a size (e.g. 64M, 250k, 1000)"))?;
    let bytes = v * scale as f64;
    if !(1.0..=1e12).contains(&bytes) {
        return Err(format!("'{s}' must be between 1 byte and 1 TB"));
    }
    Ok(bytes.round() as u64)
}

/// `16x4M`: connections and bytes on each.
fn parse_multi(s: &str) -> std::result::Result<(usize, u64), String> {
    let (n, size) = s
        .split_once(['x', 'X', '×'])
        .ok_or_else(|| format!("'{s}' is not NxSIZE (e.g. 16x4M)"))?;
    let n: usize = n
        .trim()
        .parse()
        .map_err(|_| format!("'{n}' is not a number of connections"))?;
    if !(1..=1000).contains(&n) {
        return Err(format!("{n} connections: pick 1 to 1000"));
    }
    Ok((n, parse_size(size)?))
}

/// A loss rate in percent, as 1/10,000 (`0.1` → 10).
fn parse_percent(s: &str) -> std::result::Result<u32, String> {
    let v: f64 = s
        .trim()
        .trim_end_matches('%')
        .parse()
        .map_err(|_| format!("'{s}' is not a percentage"))?;
    if !(0.0..=100.0).contains(&v) {
        return Err(format!("{v} % is not between 0 and 100"));
    }
    let bp = (v * 100.0).round();
    if (bp - v * 100.0).abs() > 1e-6 {
        return Err(format!("{v} %: loss rates go in steps of 0.01 %"));
    }
    Ok(bp as u32)
}

fn size_label(bytes: u64) -> String {
    let (v, unit) = if bytes >= 1_000_000 {
        (bytes as f64 / 1e6, "MB")
    } else if bytes >= 1_000 {
        (bytes as f64 / 1e3, "kB")
    } else {
        (bytes as f64, "B")
    };
    format!("{} {unit}", trim_float(v))
}

fn percent_label(basis_points: u32) -> String {
    format!("{} %", trim_float(f64::from(basis_points) / 100.0))
}

/// `4`, `0.25`, `1.5`: up to two decimals, no trailing zeros.
fn trim_float(v: f64) -> String {
    let s = format!("{v:.2}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_sizes_and_rates() {
        assert_eq!(parse_size("64M"), Ok(64_000_000));
        assert_eq!(parse_size("250k"), Ok(250_000));
        assert_eq!(parse_size("1.5G"), Ok(1_500_000_000));
        assert_eq!(parse_size("1000"), Ok(1000));
        assert!(parse_size("0").is_err());
        assert!(parse_size("lots").is_err());
        assert_eq!(parse_multi("16x4M"), Ok((16, 4_000_000)));
        assert_eq!(parse_multi("4×1M"), Ok((4, 1_000_000)));
        assert!(parse_multi("16").is_err());
        assert!(parse_multi("0x1M").is_err());
        assert_eq!(parse_percent("0.1"), Ok(10));
        assert_eq!(parse_percent("5%"), Ok(500));
        assert_eq!(parse_percent("0"), Ok(0));
        assert!(parse_percent("0.001").is_err());
        assert!(parse_percent("101").is_err());
    }

    #[test]
    fn quick_is_small_and_leaves_the_docs_alone() {
        let parse = |args: &[&str]| crate::common::parse_flags::<Options>(args).unwrap();
        let full = parse(&["x"]);
        assert_eq!(
            (full.single(), full.multi(), full.rounds(), full.loss()),
            (DEFAULT_SINGLE, DEFAULT_MULTI, 3, DEFAULT_LOSS.to_vec())
        );
        assert!(!full.no_docs());
        let quick = parse(&["x", "--quick"]);
        assert_eq!(
            (quick.single(), quick.multi(), quick.rounds(), quick.loss()),
            (2_000_000, (16, 250_000), 1, vec![100, 500])
        );
        assert!(quick.no_docs());
        let chosen = parse(&["x", "--quick", "--loss", "0.5,2,4", "--rounds", "2"]);
        assert_eq!((chosen.loss(), chosen.rounds()), (vec![50, 200, 400], 2));
    }

    #[test]
    fn labels() {
        assert_eq!(size_label(64_000_000), "64 MB");
        assert_eq!(size_label(250_000), "250 kB");
        assert_eq!(size_label(2_500_000), "2.5 MB");
        assert_eq!(size_label(999), "999 B");
        assert_eq!(percent_label(10), "0.1 %");
        assert_eq!(percent_label(500), "5 %");
    }
}
