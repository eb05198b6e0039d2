//! Harness shared by Rusty's privileged Linux tests (echo, httpd): privilege and tool
//! checks, and a guard that owns one network namespace (plus the TAP devices and child
//! processes a test made) and tears all of it down on drop.
//!
//! Isolation: every test makes its own namespace (`rusty-<pid>-<n>`), its own TAP
//! (`rt<pid>t<n>`, at most 15 characters) and its own /24 (`10.78.N.0/24`, the
//! namespace's kernel is `.1`, Rusty is `.2`) and, when it asks
//! ([`TestNet::with_ipv6`]), its own /64 beside it (`fd00:78:N::/64`, the same host
//! numbers). A TAP is pre-created in the root
//! namespace, Rusty attaches to it there, and then its host side is moved into the
//! test's namespace, so all test traffic stays inside that namespace. Tests of loss
//! put the kernel peer one hop further, in a second namespace behind a bridge
//! ([`TestNet::bridge_peer`]), so that what the rules drop is lost to both stacks.
//!
//! `RUSTY_REQUIRE_PRIVILEGED=1` turns every "skip" (not root, tool missing) into a
//! failure.

#![warn(missing_docs)]

// Signals and raw sockets, through rustix.
pub mod sys;

mod loss;
pub mod pki;
pub mod reload;

pub use pki::{make_pki, Pki};

use std::collections::HashMap;
use std::fs::{self, File};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

static COUNTER: AtomicU32 = AtomicU32::new(0);

/// Whether CI demands that privileged tests run (no skipping).
pub fn required() -> bool {
    std::env::var("RUSTY_REQUIRE_PRIVILEGED").is_ok_and(|v| v == "1")
}

/// Skip (print why and return `None`) or, under `RUSTY_REQUIRE_PRIVILEGED=1`, fail.
fn skip<T>(test: &str, why: &str) -> Option<T> {
    if required() {
        panic!("{test}: {why} (RUSTY_REQUIRE_PRIVILEGED=1, so this is a failure)");
    }
    eprintln!("SKIPPED {test}: {why}");
    None
}

/// Effective uid from /proc/self/status (no libc needed).
pub fn euid() -> Option<u32> {
    let status = fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("Uid:"))?;
    line.split_whitespace().nth(2)?.parse().ok()
}

/// Find `name` on PATH or in the usual sbin directories.
pub fn which(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(
            [
                "/usr/local/sbin",
                "/usr/local/bin",
                "/usr/sbin",
                "/usr/bin",
                "/sbin",
                "/bin",
            ]
            .map(PathBuf::from),
        )
        .map(|d| d.join(name))
        .find(|p| {
            use std::os::unix::fs::PermissionsExt;
            p.metadata()
                .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
}

/// Resolved paths of the external tools a test uses.
#[derive(Debug, Clone)]
pub struct Tools(HashMap<String, PathBuf>);

impl Tools {
    /// Where the requested tool `name` is installed; panics if the test did not ask
    /// for it when it checked its tools.
    pub fn get(&self, name: &str) -> &Path {
        self.0
            .get(name)
            .unwrap_or_else(|| panic!("tool {name} was not requested"))
    }

    /// An optional tool (the test has a fallback), if installed.
    pub fn optional(name: &str) -> Option<PathBuf> {
        which(name)
    }
}

/// Check that `tools` are installed, for tests that need no privileges but do need
/// external clients (curl, python3). `None`: skip the test (a failure under
/// `RUSTY_REQUIRE_PRIVILEGED=1`, where CI has installed them).
pub fn tools(test: &str, tools: &[&str]) -> Option<Tools> {
    let mut found = HashMap::new();
    for &t in tools {
        match which(t) {
            Some(p) => {
                found.insert(t.to_string(), p);
            }
            None => return skip(test, &format!("tool `{t}` is not installed")),
        }
    }
    Some(Tools(found))
}

/// A Python 3 that imports scapy, for tests that craft frames with it (see
/// [`python_importing`]).
pub fn python_with_scapy(test: &str) -> Option<PathBuf> {
    python_importing(test, "scapy.all", "python3-scapy")
}

/// A Python 3 that imports `module`: `python3` on PATH, or else the system's
/// `/usr/bin/python3`, where Debian's `package` installs it when PATH finds another
/// Python first (pyenv's). `None`: skip the test (a failure under
/// `RUSTY_REQUIRE_PRIVILEGED=1`, where CI has installed it).
pub fn python_importing(test: &str, module: &str, package: &str) -> Option<PathBuf> {
    let system = PathBuf::from("/usr/bin/python3");
    let import = format!("import {module}");
    for python in which("python3").into_iter().chain([system]) {
        if quick(&python, &["-c", &import]).0 {
            return Some(python);
        }
    }
    skip(
        test,
        &format!("no python3 imports {module} (Debian: {package})"),
    )
}

/// The counter `field` of every per-worker counters line (`worker N: ...`) a program
/// logged when it stopped, summed over workers: `path mtu lowered 2` is field `path
/// mtu lowered`, `drop martian_source 12` field `drop martian_source`.
pub fn worker_counter(log: &str, field: &str) -> u64 {
    log.lines()
        .filter(|l| l.starts_with("worker "))
        .filter_map(|l| {
            let rest = l.split(&format!("{field} ")).nth(1)?;
            rest.split(|c: char| !c.is_ascii_digit())
                .next()?
                .parse::<u64>()
                .ok()
        })
        .sum()
}

/// Check that we are root and that `tools` are installed. `None`: skip the test.
pub fn privileged(test: &str, tools: &[&str]) -> Option<Tools> {
    match euid() {
        Some(0) => {}
        Some(uid) => return skip(test, &format!("needs root (euid {uid})")),
        None => return skip(test, "cannot read the effective uid"),
    }
    if !Path::new("/dev/net/tun").exists() {
        return skip(test, "/dev/net/tun is missing");
    }
    let mut found = HashMap::new();
    // `ip` is needed by the harness itself.
    for &t in ["ip"].iter().chain(tools) {
        match which(t) {
            Some(p) => {
                found.insert(t.to_string(), p);
            }
            None => return skip(test, &format!("tool `{t}` is not installed")),
        }
    }
    Some(Tools(found))
}

/// Index of a child process a [`TestNet`] started.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Proc(usize);

struct Child_ {
    label: String,
    child: Child,
    log: PathBuf,
    status: Option<ExitStatus>,
}

/// One test's network namespace, TAP devices, child processes and scratch directory;
/// dropping it kills the children (by pid) and deletes everything.
#[non_exhaustive]
pub struct TestNet {
    /// The test's name, as given to [`TestNet::new`]; it prefixes every failure message.
    pub test: String,
    /// The test's network namespace, `rusty-<pid>-<n>`.
    pub(crate) ns: String,
    /// Third octet of the test's 10.78.N.0/24.
    pub subnet: u8,
    /// Scratch directory for the test's files and the children's logs (under the
    /// system temporary directory); deleted on drop.
    pub dir: PathBuf,
    /// The external tools the test checked for, by name.
    pub tools: Tools,
    /// The Linux peer's own namespace, once [`bridge_peer`](Self::bridge_peer) made it.
    pub peer_ns: Option<String>,
    /// The namespace Rusty runs in on an AF_XDP link, once [`xdp_peer`](Self::xdp_peer)
    /// made it.
    pub rusty_ns: Option<String>,
    /// The kernel's interfaces also get the test's IPv6 addresses
    /// ([`with_ipv6`](Self::with_ipv6)).
    pub ipv6: bool,
    taps: Vec<String>,
    children: Vec<Child_>,
    ns_created: bool,
}

/// Run a short command to completion (bounded by 20 s), returning (success, output).
pub fn quick(program: &Path, args: &[&str]) -> (bool, String) {
    let mut child = match Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
    {
        Ok(c) => c,
        Err(e) => return (false, format!("spawn {}: {e}", program.display())),
    };
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        match child.try_wait() {
            Ok(Some(_)) => break,
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(5)),
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                return (false, format!("{} {args:?}: timed out", program.display()));
            }
        }
    }
    let out = child.wait_with_output().expect("collect output");
    let mut text = String::from_utf8_lossy(&out.stdout).into_owned();
    text.push_str(&String::from_utf8_lossy(&out.stderr));
    (out.status.success(), text)
}

impl TestNet {
    /// A fresh namespace (loopback up), a free /24 and a scratch directory.
    pub fn new(test: &str, tools: Tools) -> TestNet {
        let pid = std::process::id();
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let ns = format!("rusty-{pid}-{n}");
        let dir = std::env::temp_dir().join(format!("rusty-linux-{pid}-{n}"));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).expect("scratch directory");
        let mut net = TestNet {
            test: test.to_string(),
            ns,
            subnet: 0,
            dir,
            tools,
            peer_ns: None,
            rusty_ns: None,
            ipv6: false,
            taps: Vec::new(),
            children: Vec::new(),
            ns_created: false,
        };
        net.subnet = net.pick_subnet(pid, n);
        let ns = net.ns.clone();
        net.ip(&["netns", "add", &ns]);
        net.ns_created = true;
        net.ip(&["-n", &ns, "link", "set", "lo", "up"]);
        net
    }

    /// A 10.78.N.0/24 that nothing in the root namespace routes or owns already (the
    /// subnet only ever lives inside our namespace, but stay clear of the host's).
    fn pick_subnet(&self, pid: u32, n: u32) -> u8 {
        let (_, routes) = quick(
            self.tools.get("ip"),
            &["-4", "-o", "route", "show", "table", "all"],
        );
        let (_, addrs) = quick(self.tools.get("ip"), &["-o", "addr", "show"]);
        let (_, routes6) = quick(
            self.tools.get("ip"),
            &["-6", "-o", "route", "show", "table", "all"],
        );
        let start = pid.wrapping_mul(7).wrapping_add(n.wrapping_mul(31));
        for k in 0..250u32 {
            let subnet = (start.wrapping_add(k) % 250 + 1) as u8;
            let v4 = format!("10.78.{subnet}.");
            let v6 = format!("fd00:78:{subnet}:");
            let used = |p: &str| routes.contains(p) || addrs.contains(p) || routes6.contains(p);
            if !used(&v4) && !used(&v6) {
                return subnet;
            }
        }
        self.fail("no free 10.78.N.0/24 in the root namespace");
    }

    /// The namespace kernel's address on the TAP.
    pub fn host_ip(&self) -> String {
        format!("10.78.{}.1", self.subnet)
    }

    /// Rusty's address on the TAP.
    pub fn stack_ip(&self) -> String {
        format!("10.78.{}.2", self.subnet)
    }

    /// Give the kernel's interfaces the test's IPv6 addresses too (`fd00:78:N::/64`,
    /// the same host numbers as the IPv4 ones), each usable at once (`nodad`): the
    /// TAP's host side ([`move_tap_when_attached`](Self::move_tap_when_attached)), the
    /// peer ([`bridge_peer`](Self::bridge_peer), [`xdp_peer`](Self::xdp_peer)) and the
    /// kernel on Rusty's AF_XDP interface. Call it before those.
    pub fn with_ipv6(&mut self) {
        self.ipv6 = true;
    }

    /// The namespace kernel's IPv6 address on the TAP (see [`with_ipv6`](Self::with_ipv6)).
    pub fn host_ip6(&self) -> String {
        format!("fd00:78:{}::1", self.subnet)
    }

    /// Rusty's IPv6 address on the TAP.
    pub fn stack_ip6(&self) -> String {
        format!("fd00:78:{}::2", self.subnet)
    }

    /// Rusty's addresses as a link spec gives them: `10.78.N.2/24`, and with
    /// [`with_ipv6`](Self::with_ipv6) `,fd00:78:N::2/64` after it.
    pub fn stack_addresses(&self) -> String {
        let v4 = format!("{}/24", self.stack_ip());
        if self.ipv6 {
            format!("{v4},{}/64", self.stack_ip6())
        } else {
            v4
        }
    }

    /// With [`with_ipv6`](Self::with_ipv6), give `dev` in namespace `ns` the IPv6
    /// address `ip/64`, usable at once.
    fn add_ip6(&self, ns: &str, dev: &str, ip: &str) {
        if self.ipv6 {
            let cidr = format!("{ip}/64");
            self.ip(&["-n", ns, "-6", "addr", "add", &cidr, "dev", dev, "nodad"]);
        }
    }

    /// Panic with `msg` and every child's log.
    pub fn fail(&self, msg: &str) -> ! {
        panic!("{}: {msg}\n{}", self.test, self.logs());
    }

    /// Run `ip args` (root namespace); fail the test if it fails.
    pub fn ip(&self, args: &[&str]) -> String {
        let (ok, out) = quick(self.tools.get("ip"), args);
        if !ok {
            self.fail(&format!("ip {}: {out}", args.join(" ")));
        }
        out
    }

    /// Run `program args` inside the namespace to completion (bounded by 20 s).
    pub fn ns_quick(&self, program: &Path, args: &[&str]) -> (bool, String) {
        self.quick_in(&self.ns, program, args)
    }

    /// `program args` in namespace `ns`, to completion (bounded by 20 s).
    fn quick_in(&self, ns: &str, program: &Path, args: &[&str]) -> (bool, String) {
        let prog = program.to_string_lossy();
        let mut all = vec!["netns", "exec", ns, prog.as_ref()];
        all.extend_from_slice(args);
        quick(self.tools.get("ip"), &all)
    }

    /// `ip netns exec NS program` (the program replaces `ip`, so the child's pid is the
    /// program's own).
    fn command_in(&self, ns: &str, program: &Path) -> Command {
        let mut cmd = Command::new(self.tools.get("ip"));
        cmd.args(["netns", "exec", ns]).arg(program);
        cmd
    }

    /// Put the Linux peer one hop away from Rusty, so that loss rules sit between the
    /// two stacks instead of inside one: a bridge `rtbr` in the test's namespace joins
    /// `tap` (its host address removed) and a veth `rtpeer` whose other end, `peer0` in a
    /// namespace of its own (`<ns>p`), takes `host_ip()/24`. Call it after
    /// [`move_tap_when_attached`](Self::move_tap_when_attached); start the peer's
    /// programs with [`spawn_in_peer`](Self::spawn_in_peer).
    ///
    /// Why: nftables dropping in the output path of the host that sends is no loss to
    /// that host's TCP, which sees the failed transmit and simply sends again; on a
    /// bridge, neither end can tell. The peer's kernel sends one segment per packet
    /// (`gso_max_segs 1`), so a rule drops single segments, not 64 KiB super-packets;
    /// give Rusty `--no-tso` for the same.
    pub fn bridge_peer(&mut self, tap: &str) {
        let ns = self.ns.clone();
        self.ip(&["-n", &ns, "addr", "flush", "dev", tap]);
        self.peer_behind_bridge(tap);
    }

    /// The peer's namespace `<ns>p` with `peer0` at `host_ip()/24` (one segment per
    /// packet), its veth `rtpeer` and `port` joined by the bridge `rtbr` in the test's
    /// namespace.
    fn peer_behind_bridge(&mut self, port: &str) {
        let ns = self.ns.clone();
        let peer = format!("{ns}p");
        self.ip(&["netns", "add", &peer]);
        self.peer_ns = Some(peer.clone());
        self.ip(&["-n", &peer, "link", "set", "lo", "up"]);
        self.ip(&["-n", &ns, "link", "add", "rtbr", "type", "bridge"]);
        self.ip(&[
            "-n", &ns, "link", "add", "rtpeer", "type", "veth", "peer", "name", "peer0", "netns",
            &peer,
        ]);
        for dev in [port, "rtpeer"] {
            self.ip(&["-n", &ns, "link", "set", "dev", dev, "master", "rtbr", "up"]);
        }
        self.ip(&["-n", &ns, "link", "set", "dev", "rtbr", "up"]);
        let cidr = format!("{}/24", self.host_ip());
        self.ip(&["-n", &peer, "addr", "add", &cidr, "dev", "peer0"]);
        self.add_ip6(&peer, "peer0", &self.host_ip6());
        let up = ["link", "set", "dev", "peer0", "gso_max_segs", "1", "up"];
        self.ip(&[&["-n", peer.as_str()][..], &up].concat());
    }

    /// Put the Linux peer one IPv6 router away from Rusty, behind a narrower link: the
    /// test's namespace forwards between the host side of `tap` (`host_ip6()`) and a veth
    /// `rtfar` of MTU `mtu`, whose other end `peer0`, in a namespace of the peer's own
    /// (`<ns>p`), keeps MTU 1500, has [`far_peer_ip6`](Self::far_peer_ip6) and routes
    /// everything through the router. The peer so offers an MSS the narrow link cannot
    /// carry, and Rusty learns the path's MTU only from the router's Packet Too Big.
    /// Call it after [`move_tap_when_attached`](Self::move_tap_when_attached), with
    /// [`with_ipv6`](Self::with_ipv6); returns once every address of the three links is
    /// usable. Needs the `sysctl` tool.
    pub fn routed_peer6(&mut self, tap: &str, mtu: u32) {
        let ns = self.ns.clone();
        let peer = format!("{ns}p");
        self.ip(&["netns", "add", &peer]);
        self.peer_ns = Some(peer.clone());
        self.ip(&["-n", &peer, "link", "set", "lo", "up"]);
        self.ip(&[
            "-n", &ns, "link", "add", "rtfar", "type", "veth", "peer", "name", "peer0", "netns",
            &peer,
        ]);
        let mtu = mtu.to_string();
        self.ip(&["-n", &ns, "link", "set", "dev", "rtfar", "mtu", &mtu, "up"]);
        self.ip(&["-n", &peer, "link", "set", "dev", "peer0", "up"]);
        let router = format!("fd00:78:{}:1::1", self.subnet);
        for (n, dev, ip) in [
            (&ns, "rtfar", &router),
            (&peer, "peer0", &self.far_peer_ip6()),
        ] {
            let cidr = format!("{ip}/64");
            self.ip(&["-n", n, "-6", "addr", "add", &cidr, "dev", dev, "nodad"]);
        }
        self.ip(&["-n", &peer, "-6", "route", "add", "default", "via", &router]);
        let sysctl = self.tools.get("sysctl").to_path_buf();
        let (ok, out) = self.ns_quick(&sysctl, &["-w", "net.ipv6.conf.all.forwarding=1"]);
        if !ok {
            self.fail(&format!("sysctl net.ipv6.conf.all.forwarding=1: {out}"));
        }
        // A router resolves the next hop of a forwarded packet from its link-local
        // address, which the kernel will not use (nor send a solicitation without)
        // while its duplicate address detection runs: wait for it on both links.
        for (n, dev) in [(&ns, tap), (&ns, "rtfar"), (&peer, "peer0")] {
            self.wait_ipv6_settled(n, dev);
        }
    }

    /// Wait (up to 10 s) until no IPv6 address of `dev` in namespace `ns` is tentative.
    fn wait_ipv6_settled(&self, ns: &str, dev: &str) {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let out = self.ip(&["-n", ns, "-6", "addr", "show", "dev", dev, "tentative"]);
            if out.trim().is_empty() {
                return;
            }
            if Instant::now() > deadline {
                self.fail(&format!(
                    "{dev}'s IPv6 addresses still tentative after 10 s:\n{out}"
                ));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The peer's address behind the router of [`routed_peer6`](Self::routed_peer6).
    pub fn far_peer_ip6(&self) -> String {
        format!("fd00:78:{}:1::2", self.subnet)
    }

    /// The link for Rusty's AF_XDP driver, with the Linux peer one bridge hop away (as
    /// [`bridge_peer`](Self::bridge_peer) puts it, so
    /// [`drop_bridged_percent`](Self::drop_bridged_percent) works the same):
    ///
    /// ```text
    /// <ns>x: rx0 (queues×queues) ─ veth ─ rtrusty ┐
    ///                                  <ns>: rtbr ├ rtpeer ─ veth ─ peer0 :<ns>p
    /// ```
    ///
    /// Rusty runs in `<ns>x` ([`rusty_ns_command`](Self::rusty_ns_command)) on
    /// `xdp:rx0` at `stack_ip()`, where the kernel also has an address of its own on
    /// rx0, [`rusty_ns_kernel_ip`](Self::rusty_ns_kernel_ip); the peer has `host_ip()`.
    /// The peer sends complete checksums (`ethtool -K peer0 tx off`: AF_XDP has no
    /// checksum offload, a real NIC delivers full checksums) and single segments
    /// (`gso_max_segs 1`). Needs the `ethtool` tool. Returns Rusty's interface name.
    pub fn xdp_peer(&mut self, queues: usize) -> String {
        let ns = self.ns.clone();
        let rusty = format!("{ns}x");
        self.ip(&["netns", "add", &rusty]);
        self.rusty_ns = Some(rusty.clone());
        self.ip(&["-n", &rusty, "link", "set", "lo", "up"]);
        let q = queues.to_string();
        let queues = ["numtxqueues", q.as_str(), "numrxqueues", q.as_str()];
        let ours = [&["-n", ns.as_str(), "link", "add", "rtrusty"][..], &queues].concat();
        let theirs = [&["type", "veth", "peer", "name", "rx0"][..], &queues].concat();
        self.ip(&[&ours[..], &theirs, &["netns", rusty.as_str()]].concat());
        self.peer_behind_bridge("rtrusty");
        let kernel = format!("{}/24", self.rusty_ns_kernel_ip());
        self.ip(&["-n", &rusty, "addr", "add", &kernel, "dev", "rx0"]);
        self.add_ip6(&rusty, "rx0", &format!("fd00:78:{}::3", self.subnet));
        self.ip(&["-n", &rusty, "link", "set", "dev", "rx0", "up"]);
        let peer = format!("{ns}p");
        let ethtool = self.tools.get("ethtool");
        let (ok, out) = self.quick_in(&peer, ethtool, &["-K", "peer0", "tx", "off"]);
        if !ok {
            self.fail(&format!("ethtool -K peer0 tx off: {out}"));
        }
        "rx0".to_string()
    }

    /// The kernel's own address on Rusty's AF_XDP interface (see
    /// [`xdp_peer`](Self::xdp_peer)).
    pub fn rusty_ns_kernel_ip(&self) -> String {
        format!("10.78.{}.3", self.subnet)
    }

    /// `ip netns exec <ns>x program` (see [`xdp_peer`](Self::xdp_peer)).
    pub fn rusty_ns_command(&self, program: impl AsRef<Path>) -> Command {
        let rusty = self
            .rusty_ns
            .as_deref()
            .unwrap_or_else(|| self.fail("rusty_ns_command before xdp_peer"));
        self.command_in(rusty, program.as_ref())
    }

    /// Run `program args` in Rusty's namespace of [`xdp_peer`](Self::xdp_peer) to
    /// completion (bounded by 20 s).
    pub fn rusty_ns_quick(&self, program: &Path, args: &[&str]) -> (bool, String) {
        let rusty = self
            .rusty_ns
            .as_deref()
            .unwrap_or_else(|| self.fail("rusty_ns_quick before xdp_peer"));
        self.quick_in(rusty, program, args)
    }

    /// Pre-create a persistent multi-queue TAP with virtio-net headers in the root
    /// namespace; Rusty attaches to it by name (`tap:NAME`).
    pub fn create_tap(&mut self) -> String {
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let name = format!("rt{}t{n}", std::process::id());
        assert!(name.len() <= 15, "interface name {name} too long");
        self.ip(&[
            "tuntap",
            "add",
            "dev",
            &name,
            "mode",
            "tap",
            "multi_queue",
            "vnet_hdr",
        ]);
        self.taps.push(name.clone());
        name
    }

    /// Wait until `owner` (a Rusty process) has attached `queues` queues to `tap` and
    /// brought it up, then move the host side into the namespace and give it
    /// `host_ip()/24`. A TAP is found by name in the namespace of the process that
    /// opens /dev/net/tun, so the attach must happen before the move; the open queues
    /// follow the device into the namespace.
    pub fn move_tap_when_attached(&mut self, tap: &str, queues: usize, owner: Proc) {
        let deadline = Instant::now() + Duration::from_secs(15);
        let flags_path = format!("/sys/class/net/{tap}/flags");
        let want = format!("numqueues {queues} ");
        loop {
            if !self.running(owner) {
                self.fail(&format!(
                    "{} exited before attaching to {tap}",
                    self.label(owner)
                ));
            }
            let up = fs::read_to_string(&flags_path)
                .ok()
                .and_then(|s| u32::from_str_radix(s.trim().trim_start_matches("0x"), 16).ok())
                .is_some_and(|f| f & 1 != 0);
            if up {
                let (_, details) = quick(self.tools.get("ip"), &["-d", "link", "show", "dev", tap]);
                if details.contains(&want) {
                    break;
                }
            }
            if Instant::now() > deadline {
                self.fail(&format!(
                    "{tap} not attached with {queues} queues and up within 15 s"
                ));
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let ns = self.ns.clone();
        let cidr = format!("{}/24", self.host_ip());
        self.ip(&["link", "set", "dev", tap, "netns", &ns]);
        self.ip(&["-n", &ns, "addr", "add", &cidr, "dev", tap]);
        self.add_ip6(&ns, tap, &self.host_ip6());
        self.ip(&["-n", &ns, "link", "set", "dev", tap, "up"]);
    }

    /// Start `cmd` with stdout and stderr into a log file of the scratch directory.
    pub fn spawn(&mut self, label: &str, mut cmd: Command) -> Proc {
        let log = self
            .dir
            .join(format!("{}-{label}.log", self.children.len()));
        let file = File::create(&log).expect("log file");
        let err = file.try_clone().expect("log file");
        cmd.stdin(Stdio::null()).stdout(file).stderr(err);
        let child = cmd
            .spawn()
            .unwrap_or_else(|e| self.fail(&format!("spawn {label}: {e}")));
        self.children.push(Child_ {
            label: label.to_string(),
            child,
            log,
            status: None,
        });
        Proc(self.children.len() - 1)
    }

    /// `ip netns exec NS program args...` (the program replaces `ip`, so the child's
    /// pid is the program's own).
    pub fn ns_command(&self, program: impl AsRef<Path>) -> Command {
        self.command_in(&self.ns, program.as_ref())
    }

    /// `program` where the Linux peer runs: its own namespace once
    /// [`bridge_peer`](Self::bridge_peer) or [`xdp_peer`](Self::xdp_peer) made one, else
    /// the test's namespace.
    pub fn peer_command(&self, program: impl AsRef<Path>) -> Command {
        self.command_in(
            self.peer_ns.as_deref().unwrap_or(&self.ns),
            program.as_ref(),
        )
    }

    /// Start `program args` inside the namespace.
    pub fn spawn_in_ns(&mut self, label: &str, program: impl AsRef<Path>, args: &[String]) -> Proc {
        let mut cmd = self.ns_command(program);
        cmd.args(args);
        self.spawn(label, cmd)
    }

    /// Start `program args` in the peer's namespace of [`bridge_peer`](Self::bridge_peer).
    pub fn spawn_in_peer(
        &mut self,
        label: &str,
        program: impl AsRef<Path>,
        args: &[String],
    ) -> Proc {
        let peer = self
            .peer_ns
            .as_deref()
            .unwrap_or_else(|| self.fail("spawn_in_peer before bridge_peer"));
        let mut cmd = self.command_in(peer, program.as_ref());
        cmd.args(args);
        self.spawn(label, cmd)
    }

    /// The label the child was started with (it names the child's log file).
    pub fn label(&self, p: Proc) -> &str {
        &self.children[p.0].label
    }

    /// The child's process id.
    pub fn pid(&self, p: Proc) -> u32 {
        self.children[p.0].child.id()
    }

    /// Whether the child is still running (reaping it if it exited).
    pub fn running(&mut self, p: Proc) -> bool {
        let c = &mut self.children[p.0];
        if c.status.is_none() {
            c.status = c.child.try_wait().ok().flatten();
        }
        c.status.is_none()
    }

    /// Wait for the child to exit, at most `timeout`; `None` if it is still running.
    pub fn wait(&mut self, p: Proc, timeout: Duration) -> Option<ExitStatus> {
        let deadline = Instant::now() + timeout;
        loop {
            if !self.running(p) {
                return self.children[p.0].status;
            }
            if Instant::now() >= deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Wait for the child, failing the test (with the logs) if it outlives `timeout`.
    pub fn wait_ok(&mut self, p: Proc, timeout: Duration) -> ExitStatus {
        match self.wait(p, timeout) {
            Some(s) => s,
            None => self.fail(&format!(
                "{} still running after {timeout:?}",
                self.label(p)
            )),
        }
    }

    /// Send SIGTERM to the child, by pid.
    pub fn sigterm(&mut self, p: Proc) {
        if !self.running(p) {
            self.fail(&format!("{} exited before SIGTERM", self.label(p)));
        }
        if let Err(e) = sys::terminate(&mut self.children[p.0].child) {
            self.fail(&format!("SIGTERM to {}: {e}", self.label(p)));
        }
    }

    /// Send SIGHUP to the child, by pid.
    pub fn sighup(&mut self, p: Proc) {
        if !self.running(p) {
            self.fail(&format!("{} exited before SIGHUP", self.label(p)));
        }
        if let Err(e) = sys::hangup(&mut self.children[p.0].child) {
            self.fail(&format!("SIGHUP to {}: {e}", self.label(p)));
        }
    }

    /// The child's combined stdout and stderr so far.
    pub fn log(&self, p: Proc) -> String {
        let mut s = String::new();
        if let Ok(mut f) = File::open(&self.children[p.0].log) {
            let _ = f.read_to_string(&mut s);
        }
        s
    }

    /// Every child's log, for failure messages (long logs keep their last 4 KiB).
    pub fn logs(&self) -> String {
        let mut out = String::new();
        for (i, c) in self.children.iter().enumerate() {
            let log = self.log(Proc(i));
            let tail = if log.len() > 4096 {
                let mut cut = log.len() - 4096;
                while !log.is_char_boundary(cut) {
                    cut += 1;
                }
                &log[cut..]
            } else {
                &log[..]
            };
            out.push_str(&format!(
                "----- {} (pid {}) -----\n{tail}\n",
                c.label,
                c.child.id()
            ));
        }
        out
    }

    /// Wait until `pattern` appears in the child's log, at most `timeout`.
    pub fn wait_for_log(&mut self, p: Proc, pattern: &str, timeout: Duration) {
        let deadline = Instant::now() + timeout;
        while !self.log(p).contains(pattern) {
            if !self.running(p) && !self.log(p).contains(pattern) {
                self.fail(&format!(
                    "{} exited without printing {pattern:?}",
                    self.label(p)
                ));
            }
            if Instant::now() > deadline {
                self.fail(&format!(
                    "{} did not print {pattern:?} within {timeout:?}",
                    self.label(p)
                ));
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Wait until something listens on TCP `port` inside the namespace.
    pub fn wait_listening(&mut self, port: u16, owner: Proc) {
        let cat = which("cat").unwrap_or_else(|| PathBuf::from("/bin/cat"));
        // A listener's line: its local address ends in the port, its state is 0A.
        // IPv4 listeners are in /proc/net/tcp, IPv6 ones (`[::]` too) in tcp6.
        let want = format!(":{port:04X}");
        let listens = |table: &str| {
            table.lines().any(|line| {
                let f: Vec<&str> = line.split_whitespace().collect();
                f.len() > 3 && f[1].ends_with(&want) && f[3] == "0A"
            })
        };
        let deadline = Instant::now() + Duration::from_secs(15);
        loop {
            if !self.running(owner) {
                self.fail(&format!("{} exited before listening", self.label(owner)));
            }
            let (_, tcp) = self.ns_quick(&cat, &["/proc/net/tcp", "/proc/net/tcp6"]);
            if listens(&tcp) {
                return;
            }
            if Instant::now() > deadline {
                self.fail(&format!(
                    "nothing listens on port {port} in {} after 15 s",
                    self.ns
                ));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Write a file into the scratch directory.
    pub fn write(&self, name: &str, contents: &str) -> PathBuf {
        let p = self.dir.join(name);
        fs::write(&p, contents).expect("write scratch file");
        p
    }
}

impl Drop for TestNet {
    fn drop(&mut self) {
        // Children first, each by its own pid (SIGKILL), then reap.
        for c in &mut self.children {
            if c.status.is_none() && c.child.try_wait().ok().flatten().is_none() {
                let _ = c.child.kill();
                let _ = c.child.wait();
            }
        }
        let ip = self.tools.get("ip").to_path_buf();
        for tap in &self.taps {
            // Wherever the device is now; deleting the namespace would remove it too.
            let _ = quick(&ip, &["-n", &self.ns, "link", "del", "dev", tap]);
            let _ = quick(&ip, &["link", "del", "dev", tap]);
        }
        for extra in self.peer_ns.iter().chain(&self.rusty_ns) {
            let (ok, out) = quick(&ip, &["netns", "del", extra]);
            if !ok {
                eprintln!("{}: deleting namespace {extra}: {out}", self.test);
            }
        }
        if self.ns_created {
            let (ok, out) = quick(&ip, &["netns", "del", &self.ns]);
            if !ok {
                eprintln!("{}: deleting namespace {}: {out}", self.test, self.ns);
            }
        }
        if std::env::var_os("RUSTY_KEEP_TEST_DIR").is_none() {
            let _ = fs::remove_dir_all(&self.dir);
        }
    }
}
