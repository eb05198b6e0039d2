//! Running it for real on Linux: `echo` and `echo-load` on a TAP device, on the ixgbe
//! and mPIPE models, on AF_XDP and on kernel sockets, with the host kernel (inside a
//! network namespace each test makes) as the peer. Needs root; skips when not root
//! unless `RUSTY_REQUIRE_PRIVILEGED=1` (CI), in which case a missing privilege or tool is
//! a failure. See `rusty-testnet` for the isolation scheme (own namespace, TAP and /24
//! per test; everything torn down on drop).
//!
//! One file a topic: `pings`, `transfers` (100 connections on each link, loss in the
//! kernel, reordering, Rusty as the client, the kernel backend), `process` (`--pcap`,
//! SIGTERM), `loss` (a lossy bridge both ways), `xdp`, `ipv6` (the transfers and the
//! loss over IPv6, Rusty as the client over IPv6), `attacks` (hostile addressing, a
//! SYN flood, memory pinning), `hostile_ipv6` (raw IPv6 frames crafted with scapy) and
//! `tls` (echo and echo-load over TLS).
//! Starting `echo` on a link and running the clients against it are here.

mod attacks;
mod common;
mod hostile_ipv6;
mod ipv6;
mod loss;
mod pings;
mod process;
mod tls;
mod transfers;
mod xdp;

use std::process::Command;
use std::time::{Duration, Instant};

use common::{
    python_with_scapy, worker_counter, ClientSummary, Proc, TestNet, Tools, CLIENT_PY, DISCARD_PY,
    ECHO, ECHO_LOAD, ICMP_PY, MARTIANS_PY, PINNING_PY, SHORT_CONNS_PY, STALLED_READERS_PY,
    SYNFLOOD_PY,
};

const PORT: &str = "7";

/// The client's arguments for `conns` concurrent connections of random data from `seed`:
/// up to `max` bytes each way for `big` of them, up to `small_max` for the rest.
fn load(conns: u32, max: u32, big: u32, small_max: u32, seed: u32) -> Vec<String> {
    [
        ("--conns", conns),
        ("--max", max),
        ("--big", big),
        ("--small-max", small_max),
        ("--seed", seed),
    ]
    .into_iter()
    .flat_map(|(flag, value)| [flag.to_string(), value.to_string()])
    .collect()
}

/// Starts `echo` with `workers` workers and extra flags on a link of its own.
type StartEcho = fn(&mut TestNet, usize, &[&str]) -> Proc;

/// Start `echo` on a fresh TAP with `workers` queues (plus `extra` flags), and hand the
/// TAP's host side to the namespace once it has attached.
fn start_tap_echo(net: &mut TestNet, workers: usize, extra: &[&str]) -> Proc {
    start_tap_echo_on(net, workers, extra).0
}

/// [`start_tap_echo`], also returning the TAP's name.
fn start_tap_echo_on(net: &mut TestNet, workers: usize, extra: &[&str]) -> (Proc, String) {
    start_echo_on_a_tap(net, "tap", workers, workers, extra)
}

/// Start `echo` on a fresh TAP device through `driver` (`tap`, or `ixgbe-model`, whose
/// wire the TAP is) with `workers` workers, and hand the TAP's host side to the
/// namespace once `queues` queues have attached.
fn start_echo_on_a_tap(
    net: &mut TestNet,
    driver: &str,
    workers: usize,
    queues: usize,
    extra: &[&str],
) -> (Proc, String) {
    let tap = net.create_tap();
    let mut cmd = Command::new(ECHO);
    cmd.args([
        PORT,
        "1",
        &format!("{driver}:{tap}"),
        &net.stack_addresses(),
        &workers.to_string(),
        "--oversubscribe",
    ])
    .args(extra);
    let echo = net.spawn("echo", cmd);
    net.move_tap_when_attached(&tap, queues, echo);
    (echo, tap)
}

/// Start `echo` on the ixgbe driver over the model of the 82599 with `workers` queues,
/// the model's wire bridged to a fresh TAP device (one queue), and hand the TAP's host
/// side to the namespace once the bridge has attached.
fn start_ixgbe_model_echo(net: &mut TestNet, workers: usize, extra: &[&str]) -> Proc {
    start_echo_on_a_tap(net, "ixgbe-model", workers, 1, extra).0
}

/// Start `echo` on the mPIPE driver over the host model of gxio, its wire bridged to a
/// fresh TAP device (one queue).
fn start_mpipe_model_echo(net: &mut TestNet, workers: usize, extra: &[&str]) -> Proc {
    start_echo_on_a_tap(net, "mpipe-model", workers, 1, extra).0
}

/// Run [`CLIENT_PY`] inside the namespace against `host:7` and wait for it.
fn run_clients(
    net: &mut TestNet,
    host: &str,
    args: &[impl AsRef<str>],
    timeout: Duration,
) -> (Proc, ClientSummary) {
    let p = spawn_clients(net, host, args);
    net.wait_ok(p, timeout);
    let summary = ClientSummary::parse(&net.log(p))
        .unwrap_or_else(|| net.fail("the client printed no SUMMARY line"));
    (p, summary)
}

/// [`CLIENT_PY`] in the namespace, or behind the bridge once the test made one.
fn spawn_clients(net: &mut TestNet, host: &str, args: &[impl AsRef<str>]) -> Proc {
    let script = net.write("client.py", CLIENT_PY);
    let mut all = vec![
        "-u".to_string(),
        script.display().to_string(),
        host.to_string(),
        PORT.to_string(),
    ];
    all.extend(args.iter().map(|s| s.as_ref().to_string()));
    let python = net.tools.get("python3").to_path_buf();
    if net.peer_ns.is_some() {
        net.spawn_in_peer("clients", python, &all)
    } else {
        net.spawn_in_ns("clients", python, &all)
    }
}

/// Every connection got its whole echo back with an equal SHA-256.
fn assert_all_echoed(net: &TestNet, clients: Proc, s: &ClientSummary, conns: u64) {
    if s.conns != conns || s.complete != conns || s.prefix_bad != 0 || s.errors != 0 {
        net.fail(&format!(
            "not every connection was echoed byte-exact: {s:?}\n{}",
            failed_conns(&net.log(clients))
        ));
    }
    assert_eq!(s.bytes_echoed, s.bytes_sent, "{s:?}");
}

/// The CONN lines of connections that did not complete.
fn failed_conns(log: &str) -> String {
    log.lines()
        .filter(|l| l.starts_with("CONN ") && !l.contains("complete=1"))
        .take(20)
        .collect::<Vec<_>>()
        .join("\n")
}

/// SIGTERM the server and require a clean exit within `limit`.
fn stop(net: &mut TestNet, p: Proc, limit: Duration) -> Duration {
    let t = Instant::now();
    net.sigterm(p);
    let status = net.wait_ok(p, limit);
    if !status.success() {
        net.fail(&format!(
            "{} exited with {status} after SIGTERM",
            net.label(p)
        ));
    }
    t.elapsed()
}

fn setup(test: &str, tools: &[&str]) -> Option<TestNet> {
    let tools: Tools = common::privileged(test, tools)?;
    Some(TestNet::new(test, tools))
}

/// 100 connections against `echo` with two workers on the link `start` makes, random
/// data from `seed` up to 10 MB each way (8 big ones), the rest up to 4 MB, every echo
/// byte-exact.
fn hundred_connections(test: &str, tools: &[&str], start: StartEcho, seed: u32) {
    hundred_connections_to(test, tools, start, seed, false);
}

/// [`hundred_connections`] to Rusty's IPv6 address (on a link with IPv6 beside IPv4)
/// when `ipv6`.
fn hundred_connections_to(test: &str, tools: &[&str], start: StartEcho, seed: u32, ipv6: bool) {
    let tools: Vec<&str> = ["python3"].iter().chain(tools).copied().collect();
    let Some(mut net) = setup(test, &tools) else {
        return;
    };
    if ipv6 {
        net.with_ipv6();
    }
    let echo = start(&mut net, 2, &["--grace", "2"]);
    let host = if ipv6 {
        net.stack_ip6()
    } else {
        net.stack_ip()
    };
    let (clients, s) = run_clients(
        &mut net,
        &host,
        &load(100, 10_000_000, 8, 4_000_000, seed),
        Duration::from_secs(100),
    );
    assert_all_echoed(&net, clients, &s, 100);
    eprintln!("{test}: {s:?}");
    stop(&mut net, echo, Duration::from_secs(5));
}

/// Run the clients with `args` (`conns` connections) against Rusty at `host` through
/// the lossy bridge, require every echo byte-exact and drops both ways, then stop `echo`.
fn echo_through_lossy_bridge(
    net: &mut TestNet,
    echo: Proc,
    host: &str,
    conns: u64,
    args: &[impl AsRef<str>],
    timeout: Duration,
) {
    let (clients, s) = run_clients(net, host, args, timeout);
    assert_all_echoed(net, clients, &s, conns);
    let (to_peer, from_peer) = net.dropped_bridged();
    eprintln!(
        "{}: the bridge dropped {to_peer} packets from Rusty and {from_peer} to it; {s:?}",
        net.test
    );
    stop(net, echo, Duration::from_secs(5));
}
