//! Harness parts the privileged preload suites share: the namespace's TAP, the
//! interposer library cargo built with the tests, and commands that run a program on the
//! namespace kernel's sockets or on Rusty's through `rusty-run`.
//!
//! The TAP is created inside the test's namespace rather than handed over from the root
//! namespace once Rusty has attached (as the echo and httpd tests do): the program that
//! opens it runs in the namespace too, so there is no window in which Rusty's first
//! frames reach the root namespace, and the program's kernel sockets (pipes, eventfds,
//! anything off Rusty's link) stay inside the namespace as well.

// Each test file compiles this module on its own, and none uses all of it.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;

use rusty_testnet::TestNet;

/// The wrapper under test, as cargo built it for the tests.
pub(crate) const RUSTY_RUN: &str = env!("CARGO_BIN_EXE_rusty-run");
/// The TAP's name; each namespace has its own, so one name serves every test.
pub(crate) const TAP: &str = "csuite0";
/// The environment variables through which rusty-run hands a program to the library;
/// the plain runs clear them, so that they are the kernel's whatever the test inherits.
pub(crate) const PRELOAD_VARS: [&str; 2] = ["LD_PRELOAD", "RUSTY_PRELOAD_FLAGS"];

/// The interposer library cargo built with this test. A test build leaves it in
/// `deps/` beside rusty-run (only `cargo build` copies it next to rusty-run, where
/// rusty-run looks by default); `None` lets rusty-run look, and report, itself.
pub(crate) fn preload_library() -> Option<PathBuf> {
    let dir = Path::new(RUSTY_RUN).parent()?;
    [dir.join("deps"), dir.to_path_buf()]
        .into_iter()
        .map(|d| d.join("librusty_preload.so"))
        .find(|p| p.is_file())
}

/// A counter of the namespace's TAP (`rx_packets`, `tx_bytes`, ...): what the
/// namespace's kernel received from Rusty (`rx_*`) or sent to it (`tx_*`).
pub(crate) fn tap_stat(net: &TestNet, stat: &str) -> u64 {
    let cat = rusty_testnet::which("cat").unwrap_or_else(|| PathBuf::from("/bin/cat"));
    let path = format!("/sys/class/net/{TAP}/statistics/{stat}");
    let (ok, out) = net.ns_quick(&cat, &[&path]);
    if !ok {
        net.fail(&format!("cat {path}: {out}"));
    }
    out.trim()
        .parse()
        .unwrap_or_else(|_| net.fail(&format!("{path}: {out:?}")))
}

/// Make the namespace's TAP with the kernel's address on it. Nothing reads it while
/// every program runs on the kernel; the kernel's address is local either way.
pub(crate) fn make_tap(net: &TestNet) {
    let ip = net.tools.get("ip").to_path_buf();
    let cidr = format!("{}/24", net.host_ip());
    for args in [
        &[
            "tuntap",
            "add",
            "dev",
            TAP,
            "mode",
            "tap",
            "multi_queue",
            "vnet_hdr",
        ][..],
        &["addr", "add", &cidr, "dev", TAP],
        &["link", "set", "dev", TAP, "up"],
    ] {
        let (ok, out) = net.ns_quick(&ip, args);
        if !ok {
            net.fail(&format!("ip {}: {out}", args.join(" ")));
        }
    }
}

/// The namespace kernel's IPv6 address on the TAP, once [`add_tap_ipv6`] gave it one:
/// `.1`'s twin in `fd00:78:N::/64`.
pub(crate) fn host_ip6(net: &TestNet) -> String {
    format!("fd00:78:{}::1", net.subnet)
}

/// Rusty's IPv6 address on the TAP, on a link with IPv6 ([`rusty_run_args_ipv6`]).
pub(crate) fn stack_ip6(net: &TestNet) -> String {
    format!("fd00:78:{}::2", net.subnet)
}

/// The namespace kernel's link-local address on the TAP, once [`add_tap_ipv6`] gave
/// it one.
pub(crate) const HOST_LINK_LOCAL: &str = "fe80::1";

/// Give the namespace's TAP IPv6 addresses as well, usable at once (no duplicate
/// detection: nothing else in the namespace could hold them): [`host_ip6`] and the
/// link-local [`HOST_LINK_LOCAL`], which the kernel would otherwise draw itself only
/// once the TAP has a carrier (Rusty attached).
pub(crate) fn add_tap_ipv6(net: &TestNet) {
    let ip = net.tools.get("ip").to_path_buf();
    let global = format!("{}/64", host_ip6(net));
    let link_local = format!("{HOST_LINK_LOCAL}/64");
    for args in [
        &["link", "set", "dev", TAP, "addrgenmode", "none"][..],
        &["-6", "addr", "add", &global, "dev", TAP, "nodad"],
        &["-6", "addr", "add", &link_local, "dev", TAP, "nodad"],
    ] {
        let (ok, out) = net.ns_quick(&ip, args);
        if !ok {
            net.fail(&format!("ip {}: {out}", args.join(" ")));
        }
    }
}

/// A plain process in the namespace, on the kernel's sockets: `argv[0]` with the rest
/// as its arguments.
pub(crate) fn plain(net: &TestNet, argv: &[String]) -> Command {
    let mut cmd = net.ns_command(&argv[0]);
    cmd.args(&argv[1..]).env("TMPDIR", &net.dir);
    for var in PRELOAD_VARS {
        cmd.env_remove(var);
    }
    cmd
}

/// rusty-run's arguments up to and including `--`: Rusty at the namespace's `.2` on
/// the TAP with `queues` queues (the link's default when `None`), and the library
/// cargo built.
pub(crate) fn rusty_run_args(net: &TestNet, queues: Option<usize>) -> Vec<String> {
    link_args(net, queues, false)
}

/// [`rusty_run_args`] for a link with IPv6 as well: Rusty at [`stack_ip6`] beside
/// `.2` ('tap:csuite0 10.78.N.2/24,fd00:78:N::2/64').
pub(crate) fn rusty_run_args_ipv6(net: &TestNet, queues: Option<usize>) -> Vec<String> {
    link_args(net, queues, true)
}

fn link_args(net: &TestNet, queues: Option<usize>, ipv6: bool) -> Vec<String> {
    let mut link = format!("tap:{TAP} {}/24", net.stack_ip());
    if ipv6 {
        link.push_str(&format!(",{}/64", stack_ip6(net)));
    }
    if let Some(q) = queues {
        link.push_str(&format!(" {q}"));
    }
    let mut args = vec!["--link".to_string(), link];
    if let Some(library) = preload_library() {
        args.push("--library".into());
        args.push(library.display().to_string());
    }
    args.push("--".into());
    args
}
