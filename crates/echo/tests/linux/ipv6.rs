//! The same echoes over IPv6: `echo` on a link with an IPv4 and an IPv6 address, the
//! namespace's kernel talking to its IPv6 one (Neighbor Discovery resolving Rusty), on
//! TAP and AF_XDP, with and without loss; and Rusty as the client over IPv6 (Neighbor
//! Discovery resolving the kernel).

use super::*;

/// 18. 100 concurrent kernel connections over IPv6 against `echo` on a two-queue TAP
///     with both families, random data up to 10 MB each way, every echo byte-exact.
#[test]
fn echo_on_tap_100_connections_over_ipv6() {
    hundred_connections_over_ipv6(
        "echo_on_tap_100_connections_over_ipv6",
        &[],
        start_tap_echo,
        15,
    );
}

/// 19. The same on AF_XDP: the XDP program redirects Rusty's IPv6 address, its
///     solicited-node group and all-nodes to Rusty, and leaves the kernel's own IPv6
///     traffic on the same veth alone.
#[test]
fn echo_on_xdp_100_connections_over_ipv6() {
    hundred_connections_over_ipv6(
        "echo_on_xdp_100_connections_over_ipv6",
        &["ethtool"],
        super::xdp::start_xdp_echo,
        16,
    );
}

/// [`hundred_connections`] over IPv6.
fn hundred_connections_over_ipv6(test: &str, tools: &[&str], start: StartEcho, seed: u32) {
    super::hundred_connections_to(test, tools, start, seed, true);
}

/// 20. Loss in both directions over IPv6: the kernel peer behind a bridge that drops 5%
///     of the TCP packets towards it and, independently, 5% of those from it (the
///     bridge's rules see IPv6 as they see IPv4; Neighbor Discovery passes), one
///     segment per packet both ways; 8 connections each echo 1 MB byte-exact in time.
#[test]
fn echo_on_tap_with_loss_both_ways_over_ipv6() {
    let Some(mut net) = setup(
        "echo_on_tap_with_loss_both_ways_over_ipv6",
        &["python3", "nft"],
    ) else {
        return;
    };
    net.with_ipv6();
    let (echo, tap) = start_tap_echo_on(&mut net, 2, &["--grace", "2", "--no-tso"]);
    net.bridge_peer(&tap);
    net.drop_bridged_percent(5);
    let args = [
        "--conns",
        "8",
        "--max",
        "1000000",
        "--big",
        "8",
        "--seed",
        "17",
        "--deadline",
        "120",
    ];
    let host = net.stack_ip6();
    echo_through_lossy_bridge(&mut net, echo, &host, 8, &args, Duration::from_secs(130));
}

/// 21. Rusty as the client over IPv6: `echo-load` on a two-queue TAP against `echo` on
///     kernel sockets in the namespace, at the kernel's IPv6 address. Its connects wait
///     for duplicate address detection, then resolve the kernel by Neighbor Discovery.
#[test]
fn echo_load_on_tap_against_kernel_echo_over_ipv6() {
    super::transfers::echo_load_against_kernel_echo(
        "echo_load_on_tap_against_kernel_echo_over_ipv6",
        true,
    );
}
