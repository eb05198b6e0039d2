//! Privileged tests: httpd on Rusty's own stack on a TAP with two workers, inside a
//! network namespace the test creates, against the namespace kernel's clients (curl,
//! Python). They skip with a printed reason when not root (or a tool is missing), and
//! fail instead under `RUSTY_REQUIRE_PRIVILEGED=1`.

mod common;

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
    let tap = net.create_tap();
    let mut cmd = Command::new(common::HTTPD);
    httpd_args(&mut cmd, net, root, &format!("tap:{tap}"), extra);
    let p = net.spawn("httpd", cmd);
    net.move_tap_when_attached(&tap, 2, p);
    p
}

/// httpd's arguments: serve `root` on `link` at `stack_ip()` with two workers.
fn httpd_args(cmd: &mut Command, net: &TestNet, root: &Path, link: &str, extra: &[&str]) {
    let ip = format!("{}/24", net.stack_ip());
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

/// checks.py inside the namespace against Rusty's address.
fn ns_checks(net: &TestNet, root: &Path, checks: &[&str], extra: &[&str]) {
    let python = net.tools.get("python3").to_path_buf();
    let script = checks_py();
    let root = root.display().to_string();
    let ip = net.stack_ip();
    let mut args = vec![
        "-u",
        script.to_str().unwrap(),
        ip.as_str(),
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

/// 1b. The same on AF_XDP: two workers on a two-queue veth, the peer a bridge hop away.
#[test]
fn httpd_on_xdp_all_checks() {
    all_checks("httpd_on_xdp_all_checks", &["ethtool"], start_xdp_httpd);
}

type Start = fn(&mut TestNet, &Path, &[&str]) -> Proc;

fn all_checks(test: &str, tools: &[&str], start: Start) {
    let tools: Vec<&str> = ["python3", "curl"].iter().chain(tools).copied().collect();
    let Some(mut net) = setup(test, &tools) else {
        return;
    };
    let root = make_site(&net.dir, Some(100 << 20));
    let httpd = start(
        &mut net,
        &root,
        &["--header-timeout", "1", "--keepalive-timeout", "2"],
    );
    let curl_path = net.tools.get("curl").to_path_buf();
    let base = format!("http://{}:{PORT}", net.stack_ip());
    {
        let net = &net;
        let curl = |args: &[&str]| {
            let mut all = vec!["--max-time", "60", "-sS"];
            all.extend_from_slice(args);
            ns_output(net, &curl_path, &all)
        };
        curl_checks(&curl, &base, &root);
    }
    ns_checks(
        &net,
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
    ns_checks(
        &net,
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
