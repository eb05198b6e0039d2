//! Privileged tests: httpd on Rusty's own stack on a TAP with two workers, inside a
//! network namespace the test creates, against the namespace kernel's clients (curl,
//! Python); `ipv6` runs them over IPv6 too, `tls` over HTTPS. They skip with a printed reason when not
//! root (or a tool is missing), and fail instead under `RUSTY_REQUIRE_PRIVILEGED=1`.

#[path = "../common/mod.rs"]
mod common;
mod ipv6;
mod metrics;
mod tls;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use common::{assert_checks_passed, checks_py, curl_checks, make_site, total_counter};
use rusty_testnet::{Proc, TestNet};

const PORT: &str = "80";

fn setup(test: &str, tools: &[&str]) -> Option<TestNet> {
    let tools = rusty_testnet::privileged(test, tools)?;
    Some(TestNet::new(test, tools))
}

/// Start httpd on a fresh two-queue TAP serving `root`, and hand the TAP's host side
/// to the namespace once it has attached.
fn start_tap_httpd(net: &mut TestNet, root: &Path, extra: &[&str]) -> Proc {
    start_httpd_on_a_tap(net, root, "tap", 2, extra).0
}

/// Start httpd with two workers on a fresh TAP device through `driver` (`tap`, or
/// `ixgbe-model`, whose wire the TAP is), and hand the TAP's host side to the namespace
/// once `queues` queues have attached. Returns httpd and the TAP's name.
fn start_httpd_on_a_tap(
    net: &mut TestNet,
    root: &Path,
    driver: &str,
    queues: usize,
    extra: &[&str],
) -> (Proc, String) {
    let tap = net.create_tap();
    let mut cmd = Command::new(common::HTTPD);
    httpd_args(&mut cmd, net, root, &format!("{driver}:{tap}"), extra);
    let p = net.spawn("httpd", cmd);
    net.move_tap_when_attached(&tap, queues, p);
    (p, tap)
}

/// httpd's arguments: serve `root` on `link` at `stack_addresses()` (IPv4, and IPv6
/// when the test asked for it) with two workers.
fn httpd_args(cmd: &mut Command, net: &TestNet, root: &Path, link: &str, extra: &[&str]) {
    let ip = net.stack_addresses();
    cmd.arg(PORT).arg(root);
    cmd.args(["1", link, &ip, "2", "--oversubscribe", "--grace", "1"]);
    cmd.args(extra);
}

/// Start httpd with two workers on AF_XDP (`xdp:rx0` in Rusty's namespace of
/// [`TestNet::xdp_peer`]) serving `root`; clients then run in the peer's namespace.
fn start_xdp_httpd(net: &mut TestNet, root: &Path, extra: &[&str]) -> Proc {
    let ifname = net.xdp_peer(2);
    let mut cmd = net.rusty_ns_command(common::HTTPD);
    httpd_args(&mut cmd, net, root, &format!("xdp:{ifname}"), extra);
    let p = net.spawn("httpd", cmd);
    net.wait_for_log(p, "queue 1: ", Duration::from_secs(15));
    p
}

/// Run `program args` where the Linux peer runs (the namespace, or the peer's own one
/// on an AF_XDP link) to completion; (success, stdout, stderr). Bounded by the
/// program's own time limits (curl --max-time, the checks' timeouts).
fn ns_output(net: &TestNet, program: &Path, args: &[&str]) -> (bool, Vec<u8>, String) {
    let out = net
        .peer_command(program)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| net.fail(&format!("run {}: {e}", program.display())));
    (
        out.status.success(),
        out.stdout,
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// checks.py inside the namespace against Rusty's address `ip`.
fn ns_checks(net: &TestNet, ip: &str, root: &Path, checks: &[&str], extra: &[&str]) {
    let python = net.tools.get("python3").to_path_buf();
    let script = checks_py();
    let root = root.display().to_string();
    let mut args = vec![
        "-u",
        script.to_str().unwrap(),
        ip,
        PORT,
        "--root",
        root.as_str(),
    ];
    args.extend_from_slice(extra);
    args.extend_from_slice(checks);
    let (ok, out, err) = ns_output(net, &python, &args);
    let text = format!("{}{err}", String::from_utf8_lossy(&out));
    let summary = format!("SUMMARY ok={} failed=0", checks.len());
    if !ok || !text.lines().any(|l| l == summary) {
        net.fail(&format!("checks {checks:?} failed:\n{text}"));
    }
    assert_checks_passed(&format!("{} {}", net.test, checks.join(",")), ok, &text);
}

fn stop(net: &mut TestNet, p: Proc) -> String {
    net.sigterm(p);
    let status = net.wait_ok(p, Duration::from_secs(10));
    if !status.success() {
        net.fail(&format!("httpd exited with {status} after SIGTERM"));
    }
    net.log(p)
}

/// 1. Everything the kernel-backend tests check, now on Rusty's stack over a TAP with
///    two workers: curl (GET, HEAD, Range, conditionals, keep-alive reuse, HTTP/1.0,
///    errors, traversal), Python (every file, pipelining, every error status,
///    traversal, timeouts), a 100 MB file by SHA-256, and 50 concurrent clients.
#[test]
fn httpd_on_tap_all_checks() {
    all_checks("httpd_on_tap_all_checks", &[], start_tap_httpd);
}

/// 1c. httpd's whole check list through the ixgbe driver on the model of the 82599
/// (its wire bridged to a TAP device).
#[test]
fn httpd_on_the_ixgbe_model_all_checks() {
    all_checks(
        "httpd_on_the_ixgbe_model_all_checks",
        &[],
        start_ixgbe_model_httpd,
    );
}

/// Start httpd with two workers on the ixgbe driver over the model, the model's wire
/// bridged to a fresh TAP device (one queue).
fn start_ixgbe_model_httpd(net: &mut TestNet, root: &Path, extra: &[&str]) -> Proc {
    start_httpd_on_a_tap(net, root, "ixgbe-model", 1, extra).0
}

/// 1d. httpd's whole check list through the mPIPE driver on the host model of gxio.
#[test]
fn httpd_on_the_mpipe_model_all_checks() {
    all_checks(
        "httpd_on_the_mpipe_model_all_checks",
        &[],
        |net, root, extra| start_httpd_on_a_tap(net, root, "mpipe-model", 1, extra).0,
    );
}

/// 1b. The same on AF_XDP: two workers on a two-queue veth, the peer a bridge hop away.
#[test]
fn httpd_on_xdp_all_checks() {
    all_checks("httpd_on_xdp_all_checks", &["ethtool"], start_xdp_httpd);
}

type Start = fn(&mut TestNet, &Path, &[&str]) -> Proc;

/// Which of Rusty's addresses the clients use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Family {
    V4,
    /// Rusty's link has both families; the clients use its IPv6 address.
    V6,
}

fn all_checks(test: &str, tools: &[&str], start: Start) {
    all_checks_over(test, tools, start, Family::V4);
}

/// httpd's whole check list (curl, then checks.py), the clients talking to Rusty's
/// address of `family`.
fn all_checks_over(test: &str, tools: &[&str], start: Start, family: Family) {
    let tools: Vec<&str> = ["python3", "curl"].iter().chain(tools).copied().collect();
    let Some(mut net) = setup(test, &tools) else {
        return;
    };
    if family == Family::V6 {
        net.with_ipv6();
    }
    let root = make_site(&net.dir, Some(100 << 20));
    let httpd = start(
        &mut net,
        &root,
        &["--header-timeout", "1", "--keepalive-timeout", "2"],
    );
    let curl_path = net.tools.get("curl").to_path_buf();
    let (host, base) = match family {
        Family::V4 => (net.stack_ip(), format!("http://{}:{PORT}", net.stack_ip())),
        Family::V6 => (
            net.stack_ip6(),
            format!("http://[{}]:{PORT}", net.stack_ip6()),
        ),
    };
    {
        let net = &net;
        let curl = |args: &[&str]| {
            // -g: brackets are an IPv6 address, not a URL glob.
            let mut all = vec!["--max-time", "60", "-sS", "-g"];
            all.extend_from_slice(args);
            ns_output(net, &curl_path, &all)
        };
        curl_checks(&curl, &base, &root);
    }
    ns_checks(
        &net,
        &host,
        &root,
        &[
            "basic",
            "pipeline",
            "errors",
            "traversal",
            "timeouts",
            "big",
            "concurrent",
        ],
        &[
            "--header-timeout",
            "1",
            "--keepalive-timeout",
            "2",
            "--clients",
            "50",
            "--rounds",
            "10",
        ],
    );
    let log = stop(&mut net, httpd);
    for c in [
        "header_timeouts",
        "idle_timeouts",
        "400",
        "404",
        "414",
        "431",
        "501",
        "505",
        "206",
        "304",
    ] {
        if total_counter(&log, c) == 0 {
            net.fail(&format!("counter {c} is 0"));
        }
    }
    eprintln!(
        "{test}: {}",
        log.lines()
            .find(|l| l.starts_with("httpd total:"))
            .unwrap_or("")
    );
}

/// 2. 100 concurrent clients, 20 requests each, and a 20 MB download, while nftables in
///    the namespace drops 5% of the kernel's packets: every body intact.
#[test]
fn httpd_on_tap_with_kernel_dropping_5_percent() {
    let Some(mut net) = setup(
        "httpd_on_tap_with_kernel_dropping_5_percent",
        &["python3", "nft"],
    ) else {
        return;
    };
    net.drop_outgoing_percent(5);
    let root = make_site(&net.dir, Some(20 << 20));
    let httpd = start_tap_httpd(&mut net, &root, &[]);
    let host = net.stack_ip();
    ns_checks(
        &net,
        &host,
        &root,
        &["concurrent", "big"],
        &["--clients", "100", "--rounds", "20", "--timeout", "60"],
    );
    let dropped = net.dropped_outgoing();
    let log = stop(&mut net, httpd);
    if total_counter(&log, "200") < 2000 {
        net.fail("fewer than 2000 responses counted");
    }
    eprintln!("httpd_on_tap_with_kernel_dropping_5_percent: nft dropped {dropped} packets");
}

/// The page probe both attack scripts use, as a string literal for `concat!`:
/// `probe(host, port)` asks for `/hello.txt` on a fresh connection and says `"ok"` or
/// `"failed: why"`.
macro_rules! probe_py {
    () => {
        r#"
import socket, sys, time

def probe(host, port):
    try:
        c = socket.create_connection((host, port), timeout=3)
        c.sendall(b"GET /hello.txt HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        got = b""
        while True:
            b = c.recv(4096)
            if not b:
                break
            got += b
        c.close()
        if got.startswith(b"HTTP/1.1 200") and got.endswith(b"Hello from Rusty.\n"):
            return "ok"
        return "failed: " + repr(got[:80])
    except OSError as e:
        return "failed: " + repr(e)
"#
    };
}

/// Clients that ask for a large file and then stop reading, with a tiny receive buffer:
/// their kernels advertise a zero window and answer every window probe, the attack that
/// used to hold httpd's slots forever. Prints `STALLED n`, waits `hold` seconds, then
/// tries one ordinary request and prints `PROBE ok` or `PROBE failed: why`.
const STALL_PY: &str = concat!(
    probe_py!(),
    r#"
host, port, n, hold = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
socks = []
for i in range(n):
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 2048)
    s.settimeout(3)
    try:
        s.connect((host, port))
        s.sendall(b"GET /big.bin HTTP/1.1\r\nHost: x\r\n\r\n")
        socks.append(s)
    except OSError as e:
        pass
print("STALLED", len(socks), flush=True)
print("DURING", probe(host, port), flush=True)
time.sleep(hold)
print("PROBE", probe(host, port), flush=True)
for s in socks:
    s.close()
"#
);

/// 3. The zero-window slot hold from outside: with two workers of 10 slots each, 60
///    clients take every slot with a 20 MB download they never read. While they hold
///    them a new client is refused; within the bound httpd is given (`--send-timeout 2`:
///    the user timeout of every connection, so the stack resets one whose data stays
///    unacknowledged that long) the slots come back and an ordinary request is served,
///    and the resets are counted.
#[test]
fn httpd_on_tap_takes_back_slots_from_clients_that_stop_reading() {
    let Some(mut net) = setup(
        "httpd_on_tap_takes_back_slots_from_clients_that_stop_reading",
        &["python3"],
    ) else {
        return;
    };
    let root = make_site(&net.dir, Some(20 << 20));
    let httpd = start_tap_httpd(
        &mut net,
        &root,
        &[
            "--max-connections",
            "10",
            "--keepalive-timeout",
            "1",
            "--send-timeout",
            "2",
        ],
    );
    let script = net.write("stall.py", STALL_PY);
    let python = net.tools.get("python3").to_path_buf();
    let args = [
        script.display().to_string(),
        net.stack_ip(),
        PORT.to_string(),
        "60".into(),
        "8".into(),
    ];
    let p = net.spawn_in_ns("stall.py", python, &args);
    let status = net.wait_ok(p, Duration::from_secs(60));
    let out = net.log(p);
    if !status.success() {
        net.fail(&format!("stall.py exited with {status}"));
    }
    if !out.lines().any(|l| l.starts_with("DURING failed")) {
        net.fail(&format!("the stalled clients did not fill httpd:\n{out}"));
    }
    if !out.lines().any(|l| l == "PROBE ok") {
        net.fail(&format!("no slot came back within the bound:\n{out}"));
    }
    let log = stop(&mut net, httpd);
    // The user timeout (`--send-timeout`) resets them in the stack (`timed-out` in the
    // workers' lines); httpd's own timers reset the ones they find stalled.
    let timed_out: u64 = log
        .lines()
        .filter(|l| l.starts_with("worker "))
        .filter_map(|l| {
            l.split("timed-out ")
                .nth(1)?
                .split_whitespace()
                .next()?
                .parse::<u64>()
                .ok()
        })
        .sum::<u64>();
    let stalled = total_counter(&log, "stalled_aborts");
    if timed_out + stalled == 0 {
        net.fail("no stalled connection was reset");
    }
    eprintln!(
        "httpd_on_tap_takes_back_slots_from_clients_that_stop_reading: {timed_out} timed out, \
         {stalled} reset by httpd's timers"
    );
}

/// Slowloris: `n` connections each dribble a request head one byte per second while an
/// ordinary client keeps asking for a page. Prints `SLOWLORIS slow=n got408=k ok=a
/// failed=b`.
const SLOWLORIS_PY: &str = concat!(
    probe_py!(),
    r#"
host, port, n, secs = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
head = b"GET /hello.txt HTTP/1.1\r\nHost: slow\r\nX-Pad: " + b"a" * 64
slow = []
for i in range(n):
    s = socket.create_connection((host, port), timeout=5)
    s.setblocking(False)
    slow.append(s)
ok = failed = 0
start = time.monotonic()
k = 0
while time.monotonic() - start < secs:
    for s in slow:
        try:
            s.send(head[k:k + 1])
        except OSError:
            pass
    k += 1
    tick = time.monotonic()
    while time.monotonic() - tick < 1.0:
        if probe(host, port) == "ok":
            ok += 1
        else:
            failed += 1
        time.sleep(0.1)
got408 = 0
for s in slow:
    s.setblocking(True)
    s.settimeout(3)
    try:
        if s.recv(4096).startswith(b"HTTP/1.1 408"):
            got408 += 1
    except OSError:
        pass
    s.close()
print(f"SLOWLORIS slow={n} got408={got408} ok={ok} failed={failed}", flush=True)
"#
);

/// 4. Slowloris from outside: 500 connections dribble their request heads a byte a
///    second past `--header-timeout 2`; every one of them gets 408 (none is answered
///    with anything else), and an ordinary client asking for a page ten times a second
///    meanwhile is never refused or stalled.
#[test]
fn httpd_on_tap_answers_slowloris_with_408_and_keeps_serving() {
    let Some(mut net) = setup(
        "httpd_on_tap_answers_slowloris_with_408_and_keeps_serving",
        &["python3"],
    ) else {
        return;
    };
    let root = make_site(&net.dir, None);
    let httpd = start_tap_httpd(&mut net, &root, &["--header-timeout", "2"]);
    let script = net.write("slowloris.py", SLOWLORIS_PY);
    let python = net.tools.get("python3").to_path_buf();
    let args = [
        script.display().to_string(),
        net.stack_ip(),
        PORT.to_string(),
        "500".into(),
        "5".into(),
    ];
    let p = net.spawn_in_ns("slowloris.py", python, &args);
    let status = net.wait_ok(p, Duration::from_secs(90));
    let out = net.log(p);
    if !status.success() {
        net.fail(&format!("slowloris.py exited with {status}"));
    }
    let field = |name: &str| -> u64 {
        out.split_whitespace()
            .find_map(|w| w.strip_prefix(&format!("{name}=")))
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| net.fail(&format!("no {name} in the script's output:\n{out}")))
    };
    let (got408, ok, failed) = (field("got408"), field("ok"), field("failed"));
    if got408 < 500 || failed > 0 || ok < 20 {
        net.fail(&format!(
            "{got408} of 500 slow connections got 408; ordinary requests {ok} served, {failed} failed"
        ));
    }
    let log = stop(&mut net, httpd);
    let timeouts = total_counter(&log, "header_timeouts");
    if timeouts < 500 {
        net.fail(&format!("{timeouts} header timeouts counted"));
    }
    eprintln!(
        "httpd_on_tap_answers_slowloris_with_408_and_keeps_serving: 408 to {got408} slow \
         connections, {ok} ordinary requests served meanwhile"
    );
}
