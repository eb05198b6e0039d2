//! Hostile IPv6 from outside, in raw frames over a real device: `hostile_ipv6.py`
//! (scapy) on the kernel's side of Rusty's TAP sends what RFC 8200's extension
//! headers, RFC 5095's routing header, fragments, Neighbor Discovery spoofing, ICMPv6
//! error floods and martian addresses allow, and checks every frame Rusty sends back
//! against what Linux would answer; this side checks that Rusty lives on, still
//! answers ping and TCP, and counted what it dropped and the errors it sent.

use super::attacks::assert_expected_drops;
use super::*;

/// The script (its docstring says what it sends and what it expects).
const HOSTILE_IPV6_PY: &str = include_str!("hostile_ipv6.py");

/// The port nothing listens on, where a SYN earns a RST.
const CLOSED_PORT: &str = "9";

/// 22. Hostile IPv6 against `echo` (one worker, so one budget for its errors) on a TAP
///     with both families: `hostile_ipv6.py` sends extension-header chains (at and past
///     the bound, running past the packet, cut short, Hop-by-Hop out of place, padding
///     and options Linux refuses, unknown options of each kind), routing headers of
///     Type 0 and another with and without segments left, atomic and real fragments,
///     SYNs and pings from martian sources and to foreign addresses, spoofed Neighbor
///     Discovery (group link-layer addresses, Rusty's own addresses claimed, the
///     kernel's address claimed around a live connection), 10,000 ICMPv6 errors about
///     random flows and 3,000 packets that each call for an error. Rusty answers only
///     what Linux answers (the script's verdict), keeps its errors within a burst of 50
///     and one a millisecond, and afterwards answers `ping -6` and echoes four
///     connections byte-exact; its counters show each drop under its reason, every
///     error the script heard (and errors held back), and no segment size lowered.
#[test]
fn hostile_ipv6_from_outside_gets_only_what_linux_answers_on_tap() {
    let test = "hostile_ipv6_from_outside_gets_only_what_linux_answers_on_tap";
    let Some(mut net) = setup(test, &["python3", "ping"]) else {
        return;
    };
    let Some(scapy) = python_with_scapy(test) else {
        return;
    };
    net.with_ipv6();
    let (echo, tap) = start_tap_echo_on(&mut net, 1, &["--grace", "1"]);
    let log = net.log(echo);
    let link_local = log
        .split_whitespace()
        .find_map(|w| w.strip_suffix("/64").filter(|a| a.starts_with("fe80:")))
        .unwrap_or_else(|| net.fail("echo logged no link-local address"))
        .to_string();
    let script = net.write("hostile_ipv6.py", HOSTILE_IPV6_PY);
    let args = [
        script.display().to_string(),
        tap,
        net.stack_ip6(),
        link_local,
        net.host_ip6(),
        PORT.to_string(),
        CLOSED_PORT.to_string(),
    ];
    let hostile = net.spawn_in_ns("hostile_ipv6.py", scapy, &args);
    if !net.wait_ok(hostile, Duration::from_secs(60)).success() {
        net.fail("Rusty answered what Linux would not, or not what it would");
    }

    // Alive, and answering as before.
    let ping = net.tools.get("ping").to_path_buf();
    let stack_ip6 = net.stack_ip6();
    let args = ["-6", "-n", "-c", "3", "-i", "0.2", "-W", "2", &stack_ip6];
    let (ok, out) = net.ns_quick(&ping, &args);
    if !ok || !out.contains(" 0% packet loss") {
        net.fail(&format!("ping -6 after the attacks:\n{out}"));
    }
    let load = load(4, 1_000_000, 1, 200_000, 22);
    let (clients, s) = run_clients(&mut net, &stack_ip6, &load, Duration::from_secs(60));
    assert_all_echoed(&net, clients, &s, 4);
    stop(&mut net, echo, Duration::from_secs(5));

    let expect = assert_expected_drops(&net, hostile, echo);
    let log = net.log(echo);
    let heard = net
        .log(hostile)
        .lines()
        .find_map(|l| l.strip_prefix("ERRORS sent="))
        .and_then(|n| n.parse::<u64>().ok())
        .unwrap_or_else(|| net.fail("hostile_ipv6.py printed no ERRORS line"));
    let sent = worker_counter(&log, "icmpv6 errors");
    let held_back = worker_counter(&log, "budget held back");
    if sent != heard || held_back == 0 {
        net.fail(&format!(
            "Rusty counted {sent} ICMPv6 errors (held back {held_back}); the script heard \
             {heard}"
        ));
    }
    let lowered = worker_counter(&log, "path mtu lowered");
    if lowered != 0 {
        net.fail(&format!(
            "errors about random flows lowered {lowered} segment sizes"
        ));
    }
    eprintln!("{test}: {expect}; icmpv6 errors {sent}, held back {held_back}");
}
