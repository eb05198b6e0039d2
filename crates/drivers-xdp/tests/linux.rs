//! The XDP program in a real kernel, on a veth in namespaces this test makes
//! (`TestNet::xdp_peer`): the verifier accepts it, and an IPv6-only and then a
//! dual-stack configuration receive exactly their own traffic while the kernel keeps its
//! own on the same interface.
//!
//! The receiving end is this test binary again, started inside Rusty's namespace as the
//! ignored test `receive`: it opens one queue for Rusty's addresses, prints what reaches
//! its socket and stops when told (by a file) or after 30 s. The Linux peer, a bridge
//! hop away, pings Rusty's global and link-local addresses (static neighbour entries:
//! unicast echo requests), another of Rusty's addresses without one (a neighbour
//! solicitation to its solicited-node group), another host's address, Rusty's IPv4
//! address (an ARP request) and the kernel's own address on the interface, which must
//! answer.
//!
//! Needs root, ping and ethtool; skips with a printed reason otherwise, unless
//! `RUSTY_REQUIRE_PRIVILEGED=1`. Stops only the process it started, by pid.

use std::net::{Ipv4Addr, Ipv6Addr};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use rusty_drivers_xdp::{open, XdpConfig};
use rusty_stack::io::PacketIo;
use rusty_testnet::TestNet;

/// How the parent tells the receiver what to do: `IFNAME IPV4 IPV6,IPV6 STOPFILE`.
const RECEIVER: &str = "RUSTY_XDP_TEST_RECEIVER";

/// Rusty's link-local address in the test (the stack computes its own; the driver
/// takes whatever it is given).
const LINK_LOCAL: &str = "fe80::1:2";

/// One line per frame on the socket: `ipv6 dst=ADDR next=N icmpv6=TYPE`,
/// `arp target=ADDR`, `ipv4 dst=ADDR` or `other ethertype=TYPE`.
fn describe(frame: &[u8]) -> String {
    let at = |o: usize, n: usize| frame.get(o..o + n);
    match (at(12, 2), at(38, 16), at(38, 4), at(30, 4)) {
        (Some([0x86, 0xdd]), Some(dst), _, _) => {
            let dst: [u8; 16] = dst.try_into().expect("16 bytes");
            let next = frame[20];
            let icmp = match frame.get(54) {
                Some(t) if next == 58 => format!(" icmpv6={t}"),
                _ => String::new(),
            };
            format!("ipv6 dst={} next={next}{icmp}", Ipv6Addr::from(dst))
        }
        (Some([0x08, 0x06]), _, Some(t), _) => format!("arp target={t:?}"),
        (Some([0x08, 0x00]), _, _, Some(d)) => format!("ipv4 dst={d:?}"),
        (t, ..) => format!("other ethertype={t:02x?}"),
    }
}

#[test]
#[ignore = "started by ipv6_frames_reach_rusty_and_the_kernel_keeps_its_own, in a namespace"]
fn receive() {
    let Ok(spec) = std::env::var(RECEIVER) else {
        return;
    };
    let parts: Vec<&str> = spec.split(' ').collect();
    let [ifname, ipv4, ipv6, stop] = parts[..] else {
        panic!("{RECEIVER}={spec}");
    };
    let mut cfg = XdpConfig::new(ifname, ipv4.parse().expect("IPv4 address"), 1);
    cfg.ipv6 = ipv6
        .split(',')
        .map(|a| a.parse().expect("address"))
        .collect();
    let mut queues = open(&cfg).unwrap_or_else(|e| panic!("{e}"));
    let q = &mut queues[0];
    println!("ready: {}", q.mode());
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut frames = Vec::new();
    while Instant::now() < deadline && !std::path::Path::new(stop).exists() {
        q.receive(&mut frames, 64);
        for f in frames.drain(..) {
            println!("{}", describe(&f));
        }
        q.wait(Duration::from_millis(20));
    }
    println!("stopped");
}

/// The MAC of `dev` in namespace `ns`.
fn mac(net: &TestNet, ns: &str, dev: &str) -> String {
    let out = net.ip(&["-n", ns, "-o", "link", "show", "dev", dev]);
    let mut words = out.split_whitespace();
    words
        .find(|w| *w == "link/ether")
        .and_then(|_| words.next())
        .unwrap_or_else(|| net.fail(&format!("no MAC in {out}")))
        .to_string()
}

/// The addresses of the test, in `fd00:78:N::/64`.
struct Addrs {
    ifname: String,
    rusty_ns: String,
    /// Rusty's, with a static neighbour entry at the peer.
    ours: String,
    /// Rusty's, without one: the peer solicits it.
    solicited: String,
    /// The kernel's own on Rusty's interface.
    kernel: String,
    /// Nobody's, with a static neighbour entry at the peer.
    other: String,
}

#[test]
fn ipv6_frames_reach_rusty_and_the_kernel_keeps_its_own() {
    let test = "ipv6_frames_reach_rusty_and_the_kernel_keeps_its_own";
    let Some(tools) = rusty_testnet::privileged(test, &["ping", "ethtool"]) else {
        return;
    };
    let mut net = TestNet::new(test, tools);
    let ifname = net.xdp_peer(1);
    let rusty_ns = net.rusty_ns.clone().expect("Rusty's namespace");
    let peer = net.peer_ns.clone().expect("the peer's namespace");
    let prefix = format!("fd00:78:{:x}::", net.subnet);
    let at = |host: &str| format!("{prefix}{host}");
    let a = Addrs {
        ifname,
        rusty_ns,
        ours: at("2"),
        solicited: at("a:4"),
        kernel: at("3"),
        other: at("9"),
    };
    let kernel = format!("{}/64", a.kernel);
    net.ip(&[
        "-n",
        &a.rusty_ns,
        "addr",
        "add",
        &kernel,
        "dev",
        &a.ifname,
        "nodad",
    ]);
    let peer_addr = format!("{}/64", at("1"));
    net.ip(&[
        "-n", &peer, "addr", "add", &peer_addr, "dev", "peer0", "nodad",
    ]);
    let rx_mac = mac(&net, &a.rusty_ns, &a.ifname);
    for dst in [a.ours.as_str(), LINK_LOCAL, a.other.as_str()] {
        net.ip(&[
            "-n",
            &peer,
            "-6",
            "neigh",
            "replace",
            dst,
            "lladdr",
            &rx_mac,
            "dev",
            "peer0",
            "nud",
            "permanent",
        ]);
    }
    // The peer's link-local address must be usable as a source (its DAD over).
    let deadline = Instant::now() + Duration::from_secs(10);
    while !net
        .ip(&[
            "-n",
            &peer,
            "-6",
            "addr",
            "show",
            "dev",
            "peer0",
            "tentative",
        ])
        .trim()
        .is_empty()
    {
        if Instant::now() > deadline {
            net.fail("peer0's addresses still tentative after 10 s");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    scenario(&mut net, &a, false);
    scenario(&mut net, &a, true);
}

/// One receiver, IPv6-only or dual-stack, and the peer's pings.
fn scenario(net: &mut TestNet, a: &Addrs, dual: bool) {
    let stack_ip = net.stack_ip();
    let ipv4 = if dual { stack_ip.as_str() } else { "0.0.0.0" };
    let stop = net.dir.join(format!("stop-{ipv4}"));
    let exe = std::env::current_exe().expect("the test binary");
    let mut cmd = net.rusty_ns_command(&exe);
    let spec = format!(
        "{} {ipv4} {},{},{LINK_LOCAL} {}",
        a.ifname,
        a.ours,
        a.solicited,
        stop.display()
    );
    cmd.args([
        "receive",
        "--exact",
        "--ignored",
        "--nocapture",
        "--test-threads",
        "1",
    ])
    .env(RECEIVER, spec);
    let receiver = net.spawn(&format!("receiver-{ipv4}"), cmd);
    net.wait_for_log(receiver, "ready", Duration::from_secs(15));

    // The NIC accepts the groups of Rusty's addresses (veth would anyway; a NIC's
    // filter would not).
    let groups = |net: &TestNet| net.ip(&["-n", &a.rusty_ns, "maddr", "show", "dev", &a.ifname]);
    for mac in [
        "33:33:ff:0a:00:04",
        "33:33:ff:01:00:02",
        "33:33:00:00:00:01",
    ] {
        if !groups(net).contains(mac) {
            net.fail(&format!("{mac} not joined:\n{}", groups(net)));
        }
    }

    let ping = PathBuf::from(net.tools.get("ping"));
    let in_peer = |net: &mut TestNet, label: &str, family: &str, dst: &str| {
        let args = [family, "-c", "1", "-W", "1", dst].map(String::from);
        let p = net.spawn_in_peer(label, &ping, &args);
        net.wait(p, Duration::from_secs(10))
            .is_some_and(|s| s.success())
    };
    // The kernel's own address, NDP included, through the program (bounded retries).
    if !(0..3).any(|_| in_peer(net, "ping-kernel", "-6", &a.kernel)) {
        net.fail(&format!("the kernel's {} does not answer", a.kernel));
    }
    for (label, family, dst) in [
        ("ping-ours", "-6", a.ours.clone()),
        ("ping-link-local", "-6", format!("{LINK_LOCAL}%peer0")),
        ("ping-solicited", "-6", a.solicited.clone()),
        ("ping-other", "-6", a.other.clone()),
        ("ping-ipv4", "-4", stack_ip.clone()),
    ] {
        // Nobody answers these: only what reaches the socket counts.
        in_peer(net, label, family, &dst);
    }

    std::fs::write(&stop, "").expect("stop file");
    let status = net.wait_ok(receiver, Duration::from_secs(10));
    let log = net.log(receiver);
    if !status.success() || !log.contains("stopped") {
        net.fail(&format!("the receiver for {ipv4} failed ({status})"));
    }
    let arp = format!(
        "arp target={:?}",
        stack_ip.parse::<Ipv4Addr>().expect("IPv4").octets()
    );
    let mut wanted = vec![
        format!("dst={} next=58 icmpv6=128", a.ours),
        format!("dst={LINK_LOCAL} next=58 icmpv6=128"),
        "dst=ff02::1:ff0a:4 next=58 icmpv6=135".to_string(),
    ];
    let mut unwanted = vec![
        format!("dst={} ", a.other),
        format!("dst={} ", a.kernel),
        "dst=ff02::1:ff00:3 ".to_string(),
        "other ethertype".to_string(),
    ];
    if dual {
        wanted.push(arp);
    } else {
        unwanted.push("arp ".to_string());
    }
    for w in &wanted {
        if !log.contains(w.as_str()) {
            net.fail(&format!("no `{w}` on Rusty's socket ({ipv4})"));
        }
    }
    for u in &unwanted {
        if log.contains(u.as_str()) {
            net.fail(&format!("`{u}` reached Rusty's socket ({ipv4})"));
        }
    }
    // With the process, the program and the memberships are gone.
    let link = net.ip(&["-n", &a.rusty_ns, "link", "show", "dev", &a.ifname]);
    if link.contains("xdp") {
        net.fail(&format!("XDP program still attached: {link}"));
    }
    if groups(net).contains("33:33:ff:0a:00:04") {
        net.fail(&format!("group still joined:\n{}", groups(net)));
    }
}
