//! Deterministic simulation of whole TCP conversations: a client engine and a server
//! engine over the in-memory link, each direction behind a seeded fault injector (loss,
//! duplication, reordering, corruption, delay and jitter), on one virtual clock.
//!
//! Every seed derives, with its own small PRNG, the faults of both directions, how many
//! connections to run and how many at once, and per connection: the payload each way
//! (random bytes, mostly small, some up to 1 MiB), whether it is queued by copy or as
//! shared bytes, and who closes first.
//!
//! Every third seed runs over IPv6 alone (the engines have no IPv4 address), every sixth
//! over both families at once, the rest over IPv4 ([`Families::of`]). Over IPv6 nothing
//! is configured about the peer but its address: each engine finds the other with
//! Neighbor Discovery, over the same faulty link as the data. Some engines run duplicate
//! address detection at start (one or two probes per address; until it ends their
//! connects fail with `NoSourceAddress` and are retried, and the peer's solicitations
//! and SYNs go unanswered), some forget neighbours within seconds so later connections
//! resolve again; a quarter of the connections go to the peer's link-local address and
//! a quarter are opened by the server engine to a listener on the client engine, so
//! each engine resolves the other. In a quarter of the IPv6 seeds the server engine also
//! has an address outside the link's prefix, which the client engine reaches through
//! its gateway: the server engine, by its link-local address. With both families, connections of each run side by
//! side between the same two engines. The checks:
//!
//! - every byte arrives exactly once and in order (compared byte for byte, nothing extra);
//! - every connection sees its peer's FIN and ends with exactly one `closed` callback,
//!   reason [`CloseReason::Normal`], on both sides;
//! - once virtual time passes TIME-WAIT, neither engine holds a connection block, a
//!   TIME-WAIT entry or a byte of buffer memory (no leaks);
//! - an active open uses the source address that fits its destination (link-local to
//!   link-local), and no address is ever taken for a duplicate.
//!
//! A quarter of the engines run on a memory budget small enough to keep them under
//! memory pressure, so pruning, clamped windows and short sends must not lose or stall
//! anything either.
//!
//! Under faults a reset or a timeout is a failure, not an accepted outcome. That is sound
//! only if the stack's give-up limits cannot legitimately be reached, so the simulation
//! configures them (see [`tcp_config`]): with at most 20 % loss plus 5 % corruption each
//! way, one round trip fails with probability ≤ 1 − (0.8·0.95)² ≈ 0.42, and 25 attempts
//! in a row fail with probability ≈ 4·10⁻¹⁰; with Linux's defaults (6 SYN retries) a
//! SYN would give up about once in 400 connections, which is the protocol working, not a
//! bug. The same goes for the bounds on orphans (connections the application has
//! closed): Linux's 8 retries without progress give up about once in 1,000 orphans
//! here, so they get the same 24 retries and a time bound beyond that schedule.
//! TIME-WAIT outlasts the peer's whole FIN retry schedule, so a late retransmitted
//! FIN is always answered by the TIME-WAIT entry and never by a RST.
//!
//! A failing seed is printed with the command that replays it exactly:
//! `RUSTY_SIM_SEED=<seed> cargo test --test simulation replay -- --nocapture`.
//!
//! The tests are here; the harness is in `scenario` (what a seed describes), `peers`
//! (the applications on both engines) and `run` (running and checking seeds).

mod peers;
mod run;
mod scenario;

use std::cell::RefCell;
use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::rc::Rc;
use std::time::Duration;

use bytes::Bytes;
use rusty_stack::io::fault::FaultConfig;
use rusty_stack::stats::Stats;
use rusty_stack::time::{Clock, Instant, VirtualClock};
use rusty_stack::MemoryBudget;
use rusty_stack::TcpConfig;
use rusty_stack::{CloseReason, DropReason};
use rusty_stack::{Conn, ConnectError, EngineConfig, Handler, Opener};
use rusty_testkit::sim::{self, SimPair, SERVER_IP};

use peers::*;
use run::*;
use scenario::*;

const SERVER_PORT: u16 = 5001;
/// Where the client engine listens for the connections the server engine opens.
const CLIENT_PORT: u16 = 5002;
/// The server engine's address outside the link's prefix (some IPv6 seeds).
const SERVER_ROUTED: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 1, 0, 0, 0, 0, 2);

/// The long run: `cargo test --release --test simulation -- --ignored`, seeds 500..5500,
/// or the range in `RUSTY_SIM_SEEDS` (`START..END`, e.g. `0..100000` for an offline run
/// over 100k seeds).
#[test]
#[ignore]
fn thousands_of_seeds() {
    let range = std::env::var("RUSTY_SIM_SEEDS")
        .ok()
        .map(|s| parse_seed_range(&s).unwrap_or_else(|e| panic!("RUSTY_SIM_SEEDS: {e}")))
        .unwrap_or(500..5500);
    run_seeds(range, false);
}

/// `START..END` (END exclusive).
fn parse_seed_range(s: &str) -> Result<std::ops::Range<u64>, String> {
    let (a, b) = s
        .trim()
        .split_once("..")
        .ok_or_else(|| format!("{s:?} is not START..END"))?;
    let a: u64 = a.trim().parse().map_err(|e| format!("{a:?}: {e}"))?;
    let b: u64 = b.trim().parse().map_err(|e| format!("{b:?}: {e}"))?;
    if a >= b {
        return Err(format!("{s:?} is empty"));
    }
    Ok(a..b)
}

#[test]
fn seed_ranges_parse() {
    assert_eq!(parse_seed_range("0..100000"), Ok(0..100_000));
    assert_eq!(parse_seed_range(" 5 .. 7 "), Ok(5..7));
    assert!(parse_seed_range("7..5").is_err());
    assert!(parse_seed_range("5").is_err());
    assert!(parse_seed_range("a..b").is_err());
}

/// The seeds of the CI range that run a SACK profile: each must pass (they are in
/// `many_seeds` too) and, together, make the senders recover from loss with SACK.
#[test]
fn sack_heavy_seeds_recover_with_sack() {
    let seeds: Vec<u64> = (0..500)
        .filter(|&s| Scenario::new(s, false).sack_profile.is_some())
        .take(40)
        .collect();
    assert!(seeds.len() >= 20, "the CI range holds SACK-heavy seeds");
    let (mut fast, mut rack) = (0, 0);
    for &seed in &seeds {
        let o =
            check_seed(seed).unwrap_or_else(|e| panic!("seed {seed}: {e}\n{}", replay_hint(seed)));
        fast += o.client.fast_retransmits + o.server.fast_retransmits;
        rack += o.client.rack_losses + o.server.rack_losses;
    }
    assert!(
        fast > 0 && rack > 0,
        "fast recoveries {fast}, RACK losses {rack}"
    );
}

/// One data segment lost in the middle of a long transfer is repaired by SACK recovery
/// (or a tail loss probe), never by a retransmission timeout, over either family.
#[test]
fn a_single_loss_in_a_long_transfer_needs_no_timeout() {
    let cases = [(400u64, 5u64, false), (1_000, 20, false), (1_777, 1, true)];
    for (frame, delay_ms, ipv6) in cases {
        let path = FaultConfig::none().with_delay(Duration::from_millis(delay_ms));
        let to_server = path.with_drop_frame(frame);
        let mut scenario = Scenario::bulk(4 << 20, to_server, path);
        if ipv6 {
            scenario = scenario.over_ipv6(0);
        }
        let o = run_scenario(1, scenario).unwrap_or_else(|e| panic!("frame {frame}: {e}"));
        let c = &o.client;
        assert_eq!(c.rtos, 0, "frame {frame}: {c:?}");
        assert_eq!(
            c.retransmissions, 1,
            "frame {frame}: exactly the lost segment"
        );
        assert!(c.fast_retransmits + c.tlps >= 1, "frame {frame}");
    }
}

/// 500 seeds (a few seconds with the test profile). They run every family, and over IPv6 each engine resolves the other with
/// Neighbor Discovery (soliciting, and answering the other's solicitations), some
/// engines after duplicate address detection, to unique-local and link-local
/// addresses, in both directions.
#[test]
fn many_seeds() {
    let c = run_seeds(0..500, false);
    assert!(c.seeds.iter().all(|&n| n > 50), "{c:?}");
    assert!(c.dad_seeds > 20, "{c:?}");
    assert!(c.solicitations.iter().all(|&n| n > 50), "{c:?}");
    assert!(c.advertisements.iter().all(|&n| n > 50), "{c:?}");
    assert!(c.link_local_conns > 100 && c.reversed > 100, "{c:?}");
    assert!(c.routed_conns > 50, "{c:?}");
    assert!(c.v6_cookies > 0 && c.v6_time_wait_reused > 0, "{c:?}");
}

/// Heavy loss (40 % each way) while the engines resolve each other: solicitations
/// and advertisements are lost, resolutions are retried and some given up (their
/// frames dropped), and TCP's own retransmissions start them again. Each engine opens
/// one connection to the other (the server to the client's link-local address, which
/// the client's solicitations from its other address did not teach it); everything
/// still arrives.
#[test]
fn neighbor_discovery_recovers_under_heavy_loss() {
    let mut gave_up = 0;
    for seed in 0..8 {
        let path = FaultConfig::none()
            .with_delay(Duration::from_millis(1))
            .with_loss(0.4);
        let mut scenario = Scenario::bulk(20_000, path, path).over_ipv6(1);
        let back = ConnSpec {
            reverse: true,
            dest: Dest::LinkLocal,
            ..scenario.conns[0].clone()
        };
        scenario.conns.push(back);
        let o = run_scenario(seed, scenario).unwrap_or_else(|e| panic!("seed {seed}: {e}"));
        // Beyond the two duplicate-address probes, each engine solicited the other.
        for s in [&o.client, &o.server] {
            let (ns, na) = (
                s.neighbor_solicitations_sent,
                s.neighbor_advertisements_sent,
            );
            assert!(ns > 2 && na > 0, "seed {seed}: {ns} NS, {na} NA");
            gave_up += s.dropped(DropReason::ArpUnresolved);
        }
    }
    assert!(gave_up > 0, "no resolution was given up");
}

/// Readers that consume only part of what each `data` call offers. The rest stays in
/// the receive buffer and must be offered again while the reader makes progress, and
/// offered a last time before the connection ends: every byte still arrives exactly once.
///
/// `RUSTY_SIM_SLOW_READERS=1` makes `replay` use this mode.
#[test]
fn slow_readers() {
    run_seeds(0..200, true);
}

/// Replays the seed in `RUSTY_SIM_SEED` (or a fixed one when unset) with details; with
/// `RUSTY_SIM_TRACE=1` also every segment received, with its virtual time.
#[test]
fn replay() {
    let seed = std::env::var("RUSTY_SIM_SEED")
        .ok()
        .map(|s| {
            s.trim()
                .parse::<u64>()
                .expect("RUSTY_SIM_SEED must be a u64")
        })
        .unwrap_or(12345);
    let slow = std::env::var_os("RUSTY_SIM_SLOW_READERS").is_some();
    let scenario = Scenario::new(seed, slow);
    eprintln!(
        "seed {seed}: {:?} {:?}, {} conns ({} at once), {} bytes, backlog {}\n  client {:?}\n  server {:?}\n  to server {:?}\n  to client {:?}",
        scenario.families,
        scenario.ipv6,
        scenario.conns.len(),
        scenario.concurrency,
        scenario.total_bytes(),
        scenario.backlog,
        scenario.client,
        scenario.server,
        scenario.to_server,
        scenario.to_client
    );
    if std::env::var_os("RUSTY_SIM_TRACE").is_some() {
        trace_segments();
    }
    match check_seed_with(seed, slow) {
        Ok(o) => eprintln!("seed {seed} passed: {o:?}"),
        Err(e) => panic!("seed {seed} failed: {e}\n{}", replay_hint(seed)),
    }
}

/// The simulator logs every segment it delivers at `trace` level (`rusty_testkit::sim`):
/// show those lines, and only those, through the test harness's output.
fn trace_segments() {
    use std::io::Write;
    let _ = env_logger::Builder::new()
        .filter_module("rusty_testkit::sim", log::LevelFilter::Trace)
        .format(|out, record| writeln!(out, "{}", record.args()))
        .is_test(true)
        .try_init();
}

#[test]
fn same_seed_same_run() {
    // Over IPv4, IPv6 and both.
    for seed in [6, 7, 11, 1_000_003] {
        let a = check_seed(seed).unwrap_or_else(|e| panic!("seed {seed}: {e}"));
        let b = check_seed(seed).unwrap_or_else(|e| panic!("seed {seed}: {e}"));
        assert_eq!(a, b, "seed {seed} did not replay identically");
        assert!(a.client.segments_out > 0 && a.server.segments_out > 0);
    }
}

/// The payload generator the byte-exact checks rely on.
#[test]
fn payload_check_detects_a_wrong_byte() {
    // Random access agrees with one sequential fill, at unaligned offsets too.
    let mut whole = vec![0u8; 110];
    fill_payload(42, 0, &mut whole);
    let mut part = vec![0u8; 97];
    fill_payload(42, 13, &mut part);
    assert_eq!(&whole[13..], &part[..]);
    // Another key gives other bytes.
    fill_payload(43, 13, &mut part);
    assert_ne!(&whole[13..], &part[..]);
}

/// Random loss of 1 % of the frames each way (data and ACKs), one long transfer: loss
/// recovery (SACK, RACK, PRR) and the probes repair everything without a single
/// retransmission timeout.
#[test]
fn one_percent_loss_each_way_needs_no_timeout() {
    for seed in 0..8u64 {
        let path = FaultConfig::none()
            .with_delay(Duration::from_micros(300))
            .with_loss(0.01);
        let scenario = Scenario::bulk(4 << 20, path, path);
        let o = run_scenario(seed, scenario).unwrap_or_else(|e| panic!("seed {seed}: {e}"));
        let c = &o.client;
        assert_eq!(c.rtos, 0, "seed {seed}: {c}");
        assert!(
            c.fast_retransmits > 0 && c.rack_losses > 0,
            "seed {seed}: {c}"
        );
    }
}
