//! The C conformance suite: small C programs (`tests/c/*.c`, one rule each) that must
//! print the same lines on the kernel's sockets and on Rusty's through `rusty-run`.
//!
//! Each test compiles its program with `cc` and runs it twice, each time in a fresh
//! network namespace of its own with a TAP device `csuite0` whose host side is
//! `10.78.N.1/24`:
//!
//! - the kernel run: the side under test runs plainly in the namespace, on the
//!   namespace kernel's address `.1`;
//! - the Rusty run: the side under test runs as `rusty-run --link 'tap:csuite0
//!   10.78.N.2/24' -- PROGRAM ...` in the namespace, so its TCP sockets are Rusty's on
//!   the TAP, at `.2`.
//!
//! A test over an IPv6 link ([`Link::Ipv6`]) gives the TAP `fd00:78:N::1/64` beside
//! `.1`, runs Rusty at `fd00:78:N::2` beside `.2`, and passes both sides' IPv6
//! addresses after the IPv4 ones (see `c/common.h`).
//!
//! The other side, when the program has one, is always a plain process in the
//! namespace (the server on `.1`, or a client connecting to the side under test). Only
//! the stdout of the side under test is compared, line by line; both sides must exit 0.
//! The programs print diagnostics on stderr, which the failure messages include. A
//! Rusty run with a peer also fails when the TAP carried (almost) nothing: otherwise a
//! library that left the sockets to the kernel would pass every client-side test.
//! rusty-run is given the interposer library cargo built with the test (`--library`).
//!
//! The TAP is made inside the namespace (see `common`).
//!
//! `RUSTY_PRELOAD_SUITE=kernel` runs only the kernel side of each test and prints its
//! output (`cargo test -p rusty-preload --test linux -- --nocapture`, with a test name
//! after `--` for one program); unset (or `both`), each test runs both sides and
//! compares them.
//!
//! Needs root and `cc`; skips with a printed reason otherwise, unless
//! `RUSTY_REQUIRE_PRIVILEGED=1`, which makes a skip a failure. Every test makes its own
//! namespaces, TAPs and /24s and tears them down on drop, stops only the processes it
//! started, and bounds every wait (each program also ends itself within 20 s).

mod common;

use std::fmt;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use common::{add_tap_ipv6, host_ip6, make_tap, plain, stack_ip6, tap_stat, PRELOAD_VARS};
use rusty_testnet::{Proc, TestNet, Tools};

const SOURCES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/c");
const PORT: &str = "5000";
/// Longer than any program's own watchdog, so that a program that hangs is reported
/// with its output rather than cut short by the harness.
const RUN_LIMIT: Duration = Duration::from_secs(40);
/// Fewer packets from Rusty than a connection takes (an ARP exchange, a handshake and
/// some data) mean the connection did not go over the TAP.
const MIN_TAP_PACKETS: u64 = 4;

/// Which side of a program's connection is the one compared.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum UnderTest {
    /// The server; a plain client connects to it.
    Server,
    /// The client; it connects to a plain server on the namespace kernel's address.
    Client,
    /// The server, with nothing connecting to it.
    Alone,
}

impl UnderTest {
    fn role(self) -> &'static str {
        match self {
            UnderTest::Server | UnderTest::Alone => "server",
            UnderTest::Client => "client",
        }
    }
}

/// What Rusty's link (and the namespace kernel's TAP) carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Link {
    /// IPv4: `10.78.N.0/24`.
    Ipv4,
    /// IPv4 and IPv6: `fd00:78:N::/64` as well.
    Ipv6,
}

/// Whose sockets the side under test runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stack {
    Kernel,
    Rusty,
}

impl fmt::Display for Stack {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Stack::Kernel => "kernel",
            Stack::Rusty => "rusty",
        })
    }
}

/// What `RUSTY_PRELOAD_SUITE` asks for: both runs (and their comparison), or only the
/// kernel's.
fn kernel_only() -> bool {
    match std::env::var("RUSTY_PRELOAD_SUITE").as_deref() {
        Err(_) | Ok("") | Ok("both") => false,
        Ok("kernel") => true,
        Ok(other) => panic!("RUSTY_PRELOAD_SUITE={other}: want `kernel` or `both`"),
    }
}

/// Compile `program`, run its side `under_test` on the kernel and on Rusty, and fail
/// unless both runs succeed and print the same lines.
fn same_on_both(program: &str, under_test: UnderTest) {
    same_on_both_over(program, under_test, Link::Ipv4);
}

/// [`same_on_both`] over `link`.
fn same_on_both_over(program: &str, under_test: UnderTest, link: Link) {
    let test = format!("{program} ({} under test)", under_test.role());
    let Some(tools) = rusty_testnet::privileged(&test, &["cc", "sh"]) else {
        return;
    };
    let binary = compile(&test, program, under_test, &tools);
    let kernel = run_side(&test, &tools, &binary, under_test, Stack::Kernel, link);
    if kernel_only() {
        eprintln!("{test}: kernel run:\n{}", kernel.join("\n"));
        return;
    }
    let rusty = run_side(&test, &tools, &binary, under_test, Stack::Rusty, link);
    if let Some(diff) = first_difference(&kernel, &rusty) {
        panic!(
            "{test}: the runs differ at {diff}\n----- kernel -----\n{}\n----- rusty -----\n{}",
            kernel.join("\n"),
            rusty.join("\n")
        );
    }
}

/// Where two outputs first differ, described; `None` when they are the same.
fn first_difference(kernel: &[String], rusty: &[String]) -> Option<String> {
    let n = kernel.len().max(rusty.len());
    (0..n).find_map(|i| {
        let (k, r) = (kernel.get(i), rusty.get(i));
        (k != r).then(|| {
            let show = |l: Option<&String>| l.map_or("(no line)".to_string(), |l| format!("{l:?}"));
            format!("line {}: kernel {} rusty {}", i + 1, show(k), show(r))
        })
    })
}

/// `cc` the program into a directory of the test's own under the target directory
/// (the two runs use different namespaces and scratch directories, the binary
/// outlives both).
fn compile(test: &str, program: &str, under_test: UnderTest, tools: &Tools) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("preload-c")
        .join(format!("{program}-{}", under_test.role()));
    fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{test}: {}: {e}", dir.display()));
    let binary = dir.join(program);
    let source = format!("{SOURCES}/{program}.c");
    let include = format!("-I{SOURCES}");
    let out = binary.display().to_string();
    let args = [
        "-std=c11", "-O2", "-Wall", "-Werror", "-pthread", &include, "-o", &out, &source,
    ];
    let (ok, text) = rusty_testnet::quick(tools.get("cc"), &args);
    if !ok {
        panic!("{test}: cc {}:\n{text}", args.join(" "));
    }
    binary
}

/// The side under test in the namespace, on `stack`, its stdout into `out` (its stderr
/// goes to its log): `sh` redirects and then execs it, so the process started is the
/// program itself (rusty-run execs it in turn).
fn under_test_command(
    net: &TestNet,
    stack: Stack,
    link: Link,
    out: &Path,
    argv: &[String],
) -> Command {
    let sh = net.tools.get("sh").to_path_buf();
    let mut cmd = net.ns_command(sh);
    cmd.args(["-c", r#"out=$1; shift; exec "$@" >"$out""#, "sh"])
        .arg(out)
        .env("TMPDIR", &net.dir);
    for var in PRELOAD_VARS {
        cmd.env_remove(var);
    }
    if stack == Stack::Rusty {
        let args = match link {
            Link::Ipv4 => common::rusty_run_args(net, None),
            Link::Ipv6 => common::rusty_run_args_ipv6(net, None),
        };
        cmd.arg(common::RUSTY_RUN).args(args);
    }
    cmd.args(argv);
    cmd
}

/// One run in a fresh namespace: the side under test on `stack` and its peer on the
/// kernel. Fails the test unless both exit 0; returns the stdout of the side under
/// test, line by line.
fn run_side(
    test: &str,
    tools: &Tools,
    binary: &Path,
    under_test: UnderTest,
    stack: Stack,
    link: Link,
) -> Vec<String> {
    let mut net = TestNet::new(&format!("{test}, {stack} run"), tools.clone());
    make_tap(&net);
    let kernel_ip = net.host_ip();
    let own_ip = match stack {
        Stack::Kernel => net.host_ip(),
        Stack::Rusty => net.stack_ip(),
    };
    // On an IPv6 link, each side's IPv6 address follows its IPv4 one.
    let (kernel_ip6, own_ip6) = match link {
        Link::Ipv4 => (None, None),
        Link::Ipv6 => {
            add_tap_ipv6(&net);
            let own = match stack {
                Stack::Kernel => host_ip6(&net),
                Stack::Rusty => stack_ip6(&net),
            };
            (Some(host_ip6(&net)), Some(own))
        }
    };
    let out = net.dir.join("under-test.out");
    // ROLE SERVER_IP PORT SELF_IP [SERVER_IP6 SELF_IP6]
    let argv = |role: &str, server: (&str, &Option<String>), me: (&str, &Option<String>)| {
        let mut v = vec![binary.display().to_string(), role.into()];
        v.extend([server.0.to_string(), PORT.into(), me.0.to_string()]);
        if let (Some(server6), Some(me6)) = (server.1, me.1) {
            v.extend([server6.clone(), me6.clone()]);
        }
        v
    };
    let own = (own_ip.as_str(), &own_ip6);
    let kernel = (kernel_ip.as_str(), &kernel_ip6);
    let listening = Duration::from_secs(20);
    let (side, peer): (Proc, Option<Proc>) = match under_test {
        UnderTest::Server | UnderTest::Alone => {
            let args = argv("server", own, own);
            let cmd = under_test_command(&net, stack, link, &out, &args);
            let side = net.spawn("under-test", cmd);
            let peer = (under_test == UnderTest::Server).then(|| {
                net.wait_for_log(side, "# listening", listening);
                let cmd = plain(&net, &argv("client", own, kernel));
                net.spawn("peer", cmd)
            });
            (side, peer)
        }
        UnderTest::Client => {
            let peer = net.spawn("peer", plain(&net, &argv("server", kernel, kernel)));
            net.wait_for_log(peer, "# listening", listening);
            let args = argv("client", kernel, own);
            let cmd = under_test_command(&net, stack, link, &out, &args);
            (net.spawn("under-test", cmd), Some(peer))
        }
    };
    let status = net.wait(side, RUN_LIMIT);
    let printed = fs::read_to_string(&out).unwrap_or_default();
    let failed = |net: &TestNet, what: String| -> ! {
        net.fail(&format!(
            "{what}\n----- stdout of the side under test -----\n{printed}"
        ))
    };
    match status {
        Some(s) if s.success() => {}
        Some(s) => failed(&net, format!("the side under test exited with {s}")),
        None => failed(
            &net,
            format!("the side under test still runs after {RUN_LIMIT:?}"),
        ),
    }
    if let Some(peer) = peer {
        match net.wait(peer, RUN_LIMIT) {
            Some(s) if s.success() => {}
            Some(s) => failed(&net, format!("the peer exited with {s}")),
            None => failed(&net, format!("the peer still runs after {RUN_LIMIT:?}")),
        }
    }
    // A library that left the sockets to the kernel would pass every test whose side
    // under test is a client (its peer is on the kernel's address): the TAP would carry
    // nothing. A connection through Rusty is at least ARP and a handshake on it.
    if stack == Stack::Rusty && under_test != UnderTest::Alone {
        let rx = tap_stat(&net, "rx_packets");
        if rx < MIN_TAP_PACKETS {
            failed(
                &net,
                format!("the TAP carried {rx} packets: the sockets were not Rusty's"),
            );
        }
    }
    printed.lines().map(String::from).collect()
}

/// 1. epoll on one connected socket: level-triggered, edge-triggered, EPOLLONESHOT and
///    its re-arming with EPOLL_CTL_MOD, EPOLLRDHUP when the peer half-closes.
#[test]
fn epoll_modes() {
    same_on_both("epoll_modes", UnderTest::Client);
}

/// 2. One epoll set with a listening socket, a connected socket, a pipe, an eventfd and
///    a timerfd.
#[test]
fn epoll_mixed_set() {
    same_on_both("epoll_mixed", UnderTest::Server);
}

/// An epoll set inside another epoll set and inside a poll set, with a socket and a
/// pipe in the inner set.
#[test]
fn epoll_nested() {
    same_on_both("epoll_nested", UnderTest::Server);
}

/// 3. Non-blocking connect: EINPROGRESS, writable, SO_ERROR 0; refused: ECONNREFUSED
///    through SO_ERROR (and from a blocking connect).
#[test]
fn nonblocking_connect() {
    same_on_both("connect_nonblocking", UnderTest::Client);
}

/// 4. Half-close, from the side that shuts down its sending side.
#[test]
fn half_close_shutting_down() {
    same_on_both("half_close", UnderTest::Client);
}

/// 4b. Half-close, from the side that reads EOF and then still sends.
#[test]
fn half_close_reading_eof() {
    same_on_both("half_close", UnderTest::Server);
}

/// 5. dup, dup2 and dup3 of sockets, and dup2 onto a socket's number.
#[test]
fn dup_of_sockets() {
    same_on_both("dup", UnderTest::Client);
}

/// 6. A socket closed by another thread; its number reused by the next socket.
#[test]
fn close_from_another_thread() {
    same_on_both("close_in_thread", UnderTest::Client);
}

/// 7. The parent listens and forks; the child accepts and serves.
#[test]
fn fork_after_listen() {
    same_on_both("fork_after_listen", UnderTest::Server);
}

/// A listening socket survives exec: the parent listens and forks, the child execs
/// the program again, which accepts on the inherited descriptor; then the parent
/// accepts on its own.
#[test]
fn listener_survives_exec() {
    same_on_both("exec_listener", UnderTest::Server);
}

/// Children forked before any socket each connect as clients: several processes of
/// one program on one link, each resolving the server's address.
#[test]
fn forked_clients() {
    same_on_both("fork_clients", UnderTest::Client);
}

/// A server that gives up root (groups, group, user) before its first socket, as
/// memcached does with `-u`: it still gets its queue of the link.
#[test]
fn drop_root_before_listening() {
    same_on_both("drop_root", UnderTest::Server);
}

/// 8. select() and poll() over sockets and a pipe.
#[test]
fn select_and_poll() {
    same_on_both("select_poll", UnderTest::Server);
}

/// 9. Blocking accept, epoll_wait, poll and select interrupted by SIGALRM: EINTR.
#[test]
fn eintr() {
    same_on_both("eintr", UnderTest::Alone);
}

/// 10. sendfile from a regular file to a socket, checked byte for byte by the peer.
#[test]
fn sendfile_to_a_socket() {
    same_on_both("sendfile", UnderTest::Client);
}

/// 11. Socket options, fcntl, ioctl, names, and the vectored and flagged data calls.
#[test]
fn socket_calls() {
    same_on_both("socket_calls", UnderTest::Client);
}

/// AF_INET6 on an IPv4 link: a dual-stack listener shows IPv4 clients IPv4-mapped in
/// accept, getpeername and getsockname; binds of both families on one port; a socket
/// bound to an IPv4-mapped address.
#[test]
fn ipv6_dual_stack_server() {
    same_on_both("ipv6_dual_stack", UnderTest::Server);
}

/// An AF_INET6 client on an IPv4 link: IPv4-mapped connects (blocking, non-blocking,
/// from a bound socket), IPV6_V6ONLY, options, epoll and sendfile on it, the socket
/// addresses Linux refuses, binds across the families, and loopback, which stays the
/// kernel's.
#[test]
fn ipv6_client() {
    same_on_both("ipv6_client", UnderTest::Client);
}

/// AF_INET6 listening sockets (dual-stack, IPv4-mapped, IPV6_V6ONLY) survive exec
/// with their family, address and IPV6_V6ONLY, and the new image serves on them.
#[test]
fn ipv6_listeners_survive_exec() {
    same_on_both("ipv6_exec_listener", UnderTest::Server);
}

// Until the link spec takes IPv6 addresses (`rusty::cli::link`), rusty-run cannot give
// Rusty an IPv6 address: the tests over an IPv6 link are ignored until it does.

/// A server on an IPv6 link: a dual-stack listener takes an IPv4 and an IPv6 client,
/// an IPV6_V6ONLY one refuses IPv4 at once and takes IPv6, a socket bound to the
/// server's IPv6 address is IPv6-only.
#[test]
fn ipv6_native_server() {
    same_on_both_over("ipv6_native_server", UnderTest::Server, Link::Ipv6);
}

/// A client on an IPv6 link: IPv6 connects (the first while Rusty's addresses are
/// still tentative), one to a link-local address with the link's scope, one
/// IPv4-mapped, and a bound socket's errors for the other family.
#[test]
fn ipv6_native_client() {
    same_on_both_over("ipv6_native_client", UnderTest::Client, Link::Ipv6);
}
