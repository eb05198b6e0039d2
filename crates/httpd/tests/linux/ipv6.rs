//! httpd over IPv6 with Linux peers: a link with both families answering ping and curl
//! on its global and link-local IPv6 addresses and on IPv4, `--tap-host` giving the
//! host side of the TAP both families; httpd's whole check list over IPv6 on TAP and on
//! AF_XDP; and a Packet Too Big from a Linux router lowering Rusty's segment size.

use std::fs;

use rusty_testnet::worker_counter;
use sha2::{Digest, Sha256};

use super::*;

/// The link-local address and the MAC a link of Rusty's logged at start (`…,
/// fe80::…/64 (link-local) (MAC 02:…)`).
fn logged_link_local(net: &TestNet, httpd: Proc) -> (String, String) {
    let log = net.log(httpd);
    let line = log
        .lines()
        .find(|l| l.contains("(link-local)"))
        .unwrap_or_else(|| net.fail("httpd logged no link-local address"));
    let ll = line
        .split_whitespace()
        .find_map(|w| w.strip_suffix("/64").filter(|a| a.starts_with("fe80:")))
        .unwrap_or_else(|| net.fail(&format!("no fe80:: address in {line:?}")));
    let mac = line
        .split("(MAC ")
        .nth(1)
        .and_then(|r| r.split(')').next())
        .unwrap_or_else(|| net.fail(&format!("no MAC in {line:?}")));
    (ll.to_string(), mac.to_string())
}

/// `ping -6 -c 3` of `dst` from the namespace, waiting up to 10 s for three replies
/// (Rusty answers once duplicate address detection has passed, about a second after
/// start), three times at most: the kernel cannot send at all while its own
/// link-local address is still tentative.
fn ping6(net: &TestNet, dst: &str) {
    let ping = net.tools.get("ping").to_path_buf();
    let args = ["-6", "-n", "-c", "3", "-i", "0.2", "-w", "10", dst];
    let mut out = String::new();
    for _ in 0..3 {
        let (ok, text) = net.ns_quick(&ping, &args);
        if ok {
            return;
        }
        out = text;
        std::thread::sleep(Duration::from_secs(1));
    }
    net.fail(&format!("ping -6 {dst}:\n{out}"));
}

/// 5. A link with both families, the TAP made and its host side given both by httpd
///    itself (`--tap-host 10.78.N.1/24,fd00:78:N::1/64`, inside the namespace): the
///    kernel pings Rusty's global and link-local IPv6 addresses, resolving them by
///    Neighbor Discovery (its neighbour table then holds Rusty's MAC), and fetches
///    files byte-exact over IPv6 and over IPv4 from the same workers.
#[test]
fn httpd_on_tap_answers_over_ipv6_and_ipv4() {
    let Some(mut net) = setup("httpd_on_tap_answers_over_ipv6_and_ipv4", &["curl", "ping"]) else {
        return;
    };
    net.with_ipv6();
    let root = make_site(&net.dir, None);
    // The TAP lives in the test's namespace only, so any name is the test's own.
    let tap = "rusty6";
    let host = format!("{}/24,{}/64", net.host_ip(), net.host_ip6());
    let args = [
        PORT.to_string(),
        root.display().to_string(),
        "1".into(),
        format!("tap:{tap}"),
        net.stack_addresses(),
        "2".into(),
        "--oversubscribe".into(),
        "--grace".into(),
        "1".into(),
        "--tap-host".into(),
        host,
    ];
    let httpd = net.spawn_in_ns("httpd", common::HTTPD, &args);
    net.wait_for_log(httpd, "httpd: serving", Duration::from_secs(15));
    let (link_local, mac) = logged_link_local(&net, httpd);

    // The host side has both families, its IPv6 address usable at once.
    let ip = net.tools.get("ip").to_path_buf();
    let (_, addrs) = net.ns_quick(&ip, &["-6", "addr", "show", "dev", tap]);
    let ours = format!("inet6 {}/64 ", net.host_ip6());
    let usable = addrs
        .lines()
        .any(|l| l.trim_start().starts_with(&ours) && !l.contains("tentative"));
    if !usable {
        net.fail(&format!("the host side's IPv6 address:\n{addrs}"));
    }

    ping6(&net, &net.stack_ip6());
    ping6(&net, &format!("{link_local}%{tap}"));
    let (_, neigh) = net.ns_quick(&ip, &["-6", "neigh", "show", "dev", tap]);
    let resolved = neigh
        .lines()
        .any(|l| l.starts_with(&format!("{} ", net.stack_ip6())) && l.contains(&mac));
    if !resolved {
        net.fail(&format!(
            "Linux did not resolve {} to {mac}:\n{neigh}",
            net.stack_ip6()
        ));
    }

    let curl = net.tools.get("curl").to_path_buf();
    let v6 = format!("http://[{}]:{PORT}", net.stack_ip6());
    let v4 = format!("http://{}:{PORT}", net.stack_ip());
    for (base, file) in [
        (&v6, "hello.txt"),
        (&v6, "data.bin"),
        (&v6, "sub/large.bin"),
        (&v4, "hello.txt"),
        (&v4, "sub/large.bin"),
    ] {
        let url = format!("{base}/{file}");
        let (ok, body, err) = ns_output(&net, &curl, &["-sS", "-g", "--max-time", "20", &url]);
        if !ok || body != fs::read(root.join(file)).unwrap() {
            net.fail(&format!("curl {url}: {} bytes, {err}", body.len()));
        }
    }
    let log = stop(&mut net, httpd);
    if total_counter(&log, "200") != 5 {
        net.fail("httpd did not count five responses");
    }
    if worker_counter(&log, "advertisements") == 0 {
        net.fail("no Neighbor Advertisement counted");
    }
}

/// 6. httpd's whole check list over IPv6 on a TAP with both families.
#[test]
fn httpd_on_tap_all_checks_over_ipv6() {
    all_checks_over(
        "httpd_on_tap_all_checks_over_ipv6",
        &[],
        start_tap_httpd,
        Family::V6,
    );
}

/// 6b. The same on AF_XDP: the XDP program hands Rusty its IPv6 addresses (the
///     link-local one included, read from the interface's MAC) and the kernel keeps its
///     own on the same veth.
#[test]
fn httpd_on_xdp_all_checks_over_ipv6() {
    all_checks_over(
        "httpd_on_xdp_all_checks_over_ipv6",
        &["ethtool"],
        start_xdp_httpd,
        Family::V6,
    );
}

/// 7. Path MTU discovery over IPv6: the client sits behind a Linux router (httpd's
///    `--gateway`) whose far link has an MTU of 1280 while the client's own end has
///    1500, so the client offers an MSS the path cannot carry. Four parallel 20 MB downloads from httpd on a
///    two-queue TAP complete byte-exact, which needs the router's Packet Too Big to have
///    lowered each connection's segment size (`path mtu lowered` in the workers'
///    counters), whichever worker the message reached.
#[test]
fn httpd_on_tap_follows_packet_too_big_from_a_router() {
    let Some(mut net) = setup(
        "httpd_on_tap_follows_packet_too_big_from_a_router",
        &["curl", "sysctl"],
    ) else {
        return;
    };
    net.with_ipv6();
    let root = make_site(&net.dir, Some(20 << 20));
    // The router is the TAP's host side: httpd routes the far client's traffic to it.
    let gateway = net.host_ip6();
    let extra = ["--gateway", gateway.as_str()];
    let (httpd, tap) = start_httpd_on_a_tap(&mut net, &root, "tap", 2, &extra);
    net.routed_peer6(&tap, 1280);
    let curl = net.tools.get("curl").to_path_buf();
    let url = format!("http://[{}]:{PORT}/big.bin", net.stack_ip6());
    let downloads: Vec<_> = (0..4)
        .map(|i| net.dir.join(format!("big.download{i}")))
        .collect();
    let mut args = vec![
        "-sS",
        "-g",
        "-Z",
        "--parallel-immediate",
        "--max-time",
        "60",
    ];
    let outs: Vec<String> = downloads.iter().map(|p| p.display().to_string()).collect();
    for out in &outs {
        args.extend(["-o", out.as_str(), url.as_str()]);
    }
    // Rusty's addresses become usable a second after start; curl retries its SYN.
    let (ok, _, err) = ns_output(&net, &curl, &args);
    if !ok {
        net.fail(&format!("curl through the router: {err}"));
    }
    let sha = |p: &Path| format!("{:x}", Sha256::digest(fs::read(p).unwrap()));
    let want = sha(&root.join("big.bin"));
    if downloads.iter().any(|d| sha(d) != want) {
        net.fail("a download through the router differs from big.bin");
    }
    let log = stop(&mut net, httpd);
    // curl may carry a download over a connection an earlier one finished with.
    let (lowered, conns) = (
        worker_counter(&log, "path mtu lowered"),
        worker_counter(&log, "conns opened"),
    );
    if conns == 0 || lowered != conns {
        net.fail(&format!(
            "{lowered} of {conns} connections had their segment size lowered"
        ));
    }
    eprintln!(
        "httpd_on_tap_follows_packet_too_big_from_a_router: path mtu lowered on {lowered} \
         connections"
    );
}
