//! Echoes byte-exact under load: 100 connections on TAP and on the ixgbe and mPIPE
//! models, with the kernel dropping 5% of its packets (over IPv4 and over IPv6), with
//! Rusty reordering and duplicating its own; Rusty as the client; and the kernel
//! backend.

use super::*;

/// 2. 100 concurrent kernel connections against `echo` on a two-queue TAP, random data
///    up to 10 MB each way, SHA-256 of every echo equal to what was sent.
#[test]
fn echo_on_tap_100_connections() {
    hundred_connections("echo_on_tap_100_connections", &[], start_tap_echo, 2);
}

/// 2b. The same through the ixgbe driver on the model of the 82599, two queues and
///     RSS: every connection's frames go through the model's receive path (Toeplitz,
///     RETA, advanced descriptors) and transmit path (checksum insertion).
#[test]
fn echo_on_the_ixgbe_model_100_connections() {
    hundred_connections(
        "echo_on_the_ixgbe_model_100_connections",
        &[],
        start_ixgbe_model_echo,
        5,
    );
}

/// 2c. The same through the mPIPE driver on the host model of gxio, two workers: the
///     model's classifier spreads flows over the workers' notification rings by bucket,
///     and the workers hand segments to the flow's owner.
#[test]
fn echo_on_the_mpipe_model_100_connections() {
    hundred_connections(
        "echo_on_the_mpipe_model_100_connections",
        &[],
        start_mpipe_model_echo,
        6,
    );
}

/// 3. The same while nftables in the namespace drops 5% of the kernel's packets.
#[test]
fn echo_on_tap_with_kernel_dropping_5_percent() {
    kernel_dropping_5_percent("echo_on_tap_with_kernel_dropping_5_percent", start_tap_echo);
}

/// 3b. The same through the ixgbe driver on the model of the 82599.
#[test]
fn echo_on_the_ixgbe_model_with_kernel_dropping_5_percent() {
    kernel_dropping_5_percent(
        "echo_on_the_ixgbe_model_with_kernel_dropping_5_percent",
        start_ixgbe_model_echo,
    );
}

/// 3c. The same over IPv6 (the rule's `inet` table takes both families).
#[test]
fn echo_on_tap_with_kernel_dropping_5_percent_over_ipv6() {
    kernel_dropping_5_percent_on(
        "echo_on_tap_with_kernel_dropping_5_percent_over_ipv6",
        start_tap_echo,
        true,
    );
}

fn kernel_dropping_5_percent(test: &str, start: StartEcho) {
    kernel_dropping_5_percent_on(test, start, false);
}

fn kernel_dropping_5_percent_on(test: &str, start: StartEcho, ipv6: bool) {
    let Some(mut net) = setup(test, &["python3", "nft"]) else {
        return;
    };
    if ipv6 {
        net.with_ipv6();
    }
    net.drop_outgoing_percent(5);
    let echo = start(&mut net, 2, &["--grace", "2"]);
    let host = if ipv6 {
        net.stack_ip6()
    } else {
        net.stack_ip()
    };
    let (clients, s) = run_clients(
        &mut net,
        &host,
        &load(100, 10_000_000, 3, 2_000_000, 3),
        Duration::from_secs(100),
    );
    assert_all_echoed(&net, clients, &s, 100);
    // The rule really dropped packets.
    let dropped = net.dropped_outgoing();
    eprintln!("{test}: nft dropped {dropped} packets; {s:?}");
    stop(&mut net, echo, Duration::from_secs(5));
}

/// 4. The same with Rusty's own fault injector reordering and duplicating what it sends.
#[test]
fn echo_on_tap_with_reordering_and_duplication() {
    let Some(mut net) = setup("echo_on_tap_with_reordering_and_duplication", &["python3"]) else {
        return;
    };
    let seed = (std::process::id() % 1000).to_string();
    let echo = start_tap_echo(
        &mut net,
        2,
        &[
            "--grace",
            "2",
            "--fault-reorder",
            "0.05",
            "--fault-duplicate",
            "0.02",
            "--fault-seed",
            &seed,
        ],
    );
    let host = net.stack_ip();
    let (clients, s) = run_clients(
        &mut net,
        &host,
        &load(100, 10_000_000, 5, 2_000_000, 4),
        Duration::from_secs(100),
    );
    assert_all_echoed(&net, clients, &s, 100);
    eprintln!("echo_on_tap_with_reordering_and_duplication (fault seed {seed}): {s:?}");
    stop(&mut net, echo, Duration::from_secs(5));
}

/// 5. Rusty as the client: `echo-load` on a two-queue TAP (two workers, so active opens
///    must come back to the worker that made them) against `echo` on kernel sockets
///    inside the namespace.
#[test]
fn echo_load_on_tap_against_kernel_echo() {
    echo_load_against_kernel_echo("echo_load_on_tap_against_kernel_echo", false);
}

/// `echo-load` on a two-queue TAP against `echo` on kernel sockets in the namespace,
/// over IPv4 or (`ipv6`) over IPv6, each end resolving the other with Neighbor
/// Discovery.
pub(super) fn echo_load_against_kernel_echo(test: &str, ipv6: bool) {
    let Some(mut net) = setup(test, &[]) else {
        return;
    };
    if ipv6 {
        net.with_ipv6();
    }
    let server = start_kernel_echo(&mut net);
    let tap = net.create_tap();
    let target = if ipv6 {
        format!("[{}]:{PORT}", net.host_ip6())
    } else {
        format!("{}:{PORT}", net.host_ip())
    };
    let mut cmd = Command::new(ECHO_LOAD);
    cmd.args([
        &target,
        "1",
        &format!("tap:{tap}"),
        &net.stack_addresses(),
        "2",
        "--oversubscribe",
        "--duration",
        "2",
        "--connections",
        "40",
    ]);
    let load = net.spawn("echo-load", cmd);
    // echo-load connects as soon as it runs; SYNs and ARP requests sent before the
    // move are lost and retried (ARP every 1 s, 3 retries; SYN RTO 1 s). Over IPv6 the
    // connects wait for duplicate address detection (1 s) first.
    net.move_tap_when_attached(&tap, 2, load);
    let status = net.wait_ok(load, Duration::from_secs(30));
    let log = net.log(load);
    if !status.success() {
        net.fail(&format!("echo-load exited with {status}"));
    }
    let rate: f64 = log
        .lines()
        .find_map(|l| l.strip_prefix("messages/s "))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| net.fail("echo-load printed no messages/s"));
    if rate <= 0.0 || !log.contains("failed connections 0   byte mismatches 0") {
        net.fail(&format!("echo-load: rate {rate}, or failures"));
    }
    eprintln!("{test}: {rate} messages/s");
    stop(&mut net, server, Duration::from_secs(5));
}

/// 6. The kernel backend passes the same echo test (inside the namespace, on loopback).
#[test]
fn kernel_backend_echo() {
    let Some(mut net) = setup("kernel_backend_echo", &["python3"]) else {
        return;
    };
    let server = start_kernel_echo(&mut net);
    let (clients, s) = run_clients(
        &mut net,
        "127.0.0.1",
        &load(100, 10_000_000, 3, 2_000_000, 6),
        Duration::from_secs(60),
    );
    assert_all_echoed(&net, clients, &s, 100);
    eprintln!("kernel_backend_echo: {s:?}");
    stop(&mut net, server, Duration::from_secs(5));
}

/// Start `echo` on kernel sockets inside the namespace and wait until it listens.
fn start_kernel_echo(net: &mut TestNet) -> Proc {
    let server = net.spawn_in_ns(
        "echo (kernel)",
        ECHO,
        &[PORT.to_string(), "--grace".into(), "2".into()],
    );
    net.wait_listening(7, server);
    server
}
