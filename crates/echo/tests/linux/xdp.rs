//! AF_XDP: Rusty and the kernel sharing one interface, 100 connections with and
//! without loss, and an XDP program that lives exactly as long as the process.

use std::path::Path;

use super::*;

/// Start `echo` on AF_XDP with `workers` queues: `xdp:rx0` in Rusty's namespace of
/// [`TestNet::xdp_peer`], the Linux peer a bridge hop away in its own namespace (where
/// [`spawn_clients`] then runs the clients). Returns once every queue reported its mode.
pub(crate) fn start_xdp_echo(net: &mut TestNet, workers: usize, extra: &[&str]) -> Proc {
    let ifname = net.xdp_peer(workers);
    let mut cmd = net.rusty_ns_command(ECHO);
    cmd.args([
        PORT,
        "1",
        &format!("xdp:{ifname}"),
        &net.stack_addresses(),
        &workers.to_string(),
        "--oversubscribe",
    ])
    .args(extra);
    let echo = net.spawn("echo", cmd);
    let last = format!("xdp:{ifname} queue {}: ", workers - 1);
    net.wait_for_log(echo, &last, Duration::from_secs(15));
    echo
}

/// Whether an XDP program is attached to `rx0` in Rusty's namespace.
fn xdp_attached(net: &TestNet) -> bool {
    let ip = net.tools.get("ip").to_path_buf();
    let (ok, out) = net.rusty_ns_quick(&ip, &["link", "show", "dev", "rx0"]);
    if !ok {
        net.fail(&format!("ip link show rx0: {out}"));
    }
    out.contains("prog/xdp")
}

/// 11. AF_XDP: Rusty and the host share one interface. The peer pings Rusty (our
///     raw-socket ICMP client and `ping`) and the kernel's own address on the same
///     interface; TCP to Rusty reaches Rusty and TCP to the kernel's address reaches the
///     kernel (an `echo` on kernel sockets in Rusty's namespace); each queue says it runs
///     native XDP on veth.
#[test]
fn kernel_and_rusty_share_an_xdp_interface() {
    let Some(mut net) = setup(
        "kernel_and_rusty_share_an_xdp_interface",
        &["python3", "ethtool"],
    ) else {
        return;
    };
    let echo = start_xdp_echo(&mut net, 2, &["--grace", "2"]);
    for q in 0..2 {
        let line = format!("xdp:rx0 queue {q}: native XDP, copy mode");
        if !net.log(echo).contains(&line) {
            net.fail(&format!("no `{line}` at start"));
        }
    }
    let kernel_ip = net.rusty_ns_kernel_ip();
    let mut cmd = net.rusty_ns_command(ECHO);
    cmd.args([PORT, "1", "kernel", &kernel_ip, "1", "--grace", "2"]);
    let kernel_echo = net.spawn("echo (kernel)", cmd);
    net.wait_for_log(kernel_echo, "listening", Duration::from_secs(10));

    let script = net.write("icmp.py", ICMP_PY);
    let python = net.tools.get("python3").to_path_buf();
    for ip in [net.stack_ip(), kernel_ip.clone()] {
        let args = [script.display().to_string(), ip, "20".into(), "10".into()];
        let icmp = net.spawn_in_peer("icmp.py", &python, &args);
        if !net.wait_ok(icmp, Duration::from_secs(40)).success() {
            net.fail("raw-socket ICMP echo failed");
        }
    }
    if let Some(ping) = Tools::optional("ping") {
        let args = ["-n", "-c", "10", "-i", "0.05", "-W", "2", &net.stack_ip()].map(String::from);
        let p = net.spawn_in_peer("ping", ping, &args);
        let status = net.wait_ok(p, Duration::from_secs(30));
        if !status.success() || !net.log(p).contains(" 0% packet loss") {
            net.fail("ping lost packets");
        }
    }
    let args = ["--conns", "10", "--max", "200000", "--seed", "11"];
    for host in [net.stack_ip(), kernel_ip] {
        let (clients, s) = run_clients(&mut net, &host, &args, Duration::from_secs(60));
        assert_all_echoed(&net, clients, &s, 10);
    }
    // Rusty served only its own address: its ten connections and the client's readiness
    // probe; the kernel had the other eleven.
    stop(&mut net, echo, Duration::from_secs(5));
    let opened: u64 = net
        .log(echo)
        .lines()
        .filter(|l| l.starts_with("worker "))
        .filter_map(|l| l.split("conns opened ").nth(1))
        .filter_map(|r| r.split('+').next()?.parse::<u64>().ok())
        .sum();
    if opened != 11 {
        net.fail(&format!("Rusty opened {opened} connections, not 10 + 1"));
    }
    stop(&mut net, kernel_echo, Duration::from_secs(5));
}

/// 12. AF_XDP: 100 concurrent connections against `echo` with two workers on a
///     two-queue veth, random data up to 10 MB each way, SHA-256 of every echo equal.
#[test]
fn echo_on_xdp_100_connections() {
    hundred_connections(
        "echo_on_xdp_100_connections",
        &["ethtool"],
        start_xdp_echo,
        12,
    );
}

/// 13. AF_XDP with 5% loss each way: the bridge between the peer and Rusty's veth drops
///     5% of the TCP packets towards the peer and, independently, 5% of those from it;
///     100 connections all echoed byte-exact.
#[test]
fn echo_on_xdp_with_5_percent_loss() {
    let Some(mut net) = setup(
        "echo_on_xdp_with_5_percent_loss",
        &["python3", "nft", "ethtool"],
    ) else {
        return;
    };
    let echo = start_xdp_echo(&mut net, 2, &["--grace", "2"]);
    net.drop_bridged_percent(5);
    let mut args = load(100, 2_000_000, 3, 500_000, 13);
    args.extend(["--deadline", "150"].map(String::from));
    let host = net.stack_ip();
    echo_through_lossy_bridge(&mut net, echo, &host, 100, &args, Duration::from_secs(160));
}

/// 14. The XDP program lives exactly as long as the process: attached while `echo`
///     runs, gone after SIGTERM and after SIGKILL. Meanwhile a second Rusty on the same
///     interface is refused with a clear error (the interface has an XDP program), and
///     so is a worker count that does not match the interface's queues.
#[test]
fn xdp_program_goes_away_with_the_process() {
    let Some(mut net) = setup("xdp_program_goes_away_with_the_process", &["ethtool"]) else {
        return;
    };
    let echo = start_xdp_echo(&mut net, 2, &["--grace", "1"]);
    if !xdp_attached(&net) {
        net.fail("no XDP program on rx0 while echo runs");
    }
    let cidr = format!("{}/24", net.stack_ip());
    for (workers, want) in [
        ("2", "another XDP program is attached to 'rx0'"),
        (
            "3",
            "'rx0' has 2 receive and 2 transmit queues but 3 workers",
        ),
    ] {
        let mut cmd = net.rusty_ns_command(ECHO);
        cmd.args(["8", "1", "xdp:rx0", &cidr, workers, "--oversubscribe"]);
        let second = net.spawn("second echo", cmd);
        let status = net.wait_ok(second, Duration::from_secs(15));
        let log = net.log(second);
        if status.success() || !log.contains(want) {
            net.fail(&format!(
                "second echo ({workers} workers): {status}, wanted {want:?}"
            ));
        }
    }
    stop(&mut net, echo, Duration::from_secs(5));
    wait_detached(&net, "the XDP program outlived echo (SIGTERM)");
    let mut cmd = net.rusty_ns_command(ECHO);
    cmd.args([PORT, "1", "xdp:rx0", &cidr, "2", "--oversubscribe"]);
    let echo = net.spawn("echo again", cmd);
    net.wait_for_log(echo, "xdp:rx0 queue 1: ", Duration::from_secs(15));
    if !xdp_attached(&net) {
        net.fail("no XDP program on rx0 after a restart");
    }
    let pid = net.pid(echo).to_string();
    let (ok, out) = rusty_testnet::quick(Path::new("/bin/kill"), &["-KILL", &pid]);
    if !ok {
        net.fail(&format!("kill -KILL {pid}: {out}"));
    }
    net.wait(echo, Duration::from_secs(10));
    wait_detached(&net, "the XDP program outlived echo (SIGKILL)");
}

/// Fails with `why` unless the XDP program leaves `rx0` within 5 s. The kernel releases
/// the link when the last descriptor closes, which the exit does, but the release can
/// finish a little after the process is gone. (The SIGTERM check used to look once;
/// the test failed once in a full run under load, its message not kept.)
fn wait_detached(net: &TestNet, why: &str) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while xdp_attached(net) {
        if Instant::now() > deadline {
            net.fail(why);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}
