//! Unmodified Debian programs on Rusty: nginx, curl, Python's http.server, asyncio and
//! selectors programs, redis and memcached, each run as `rusty-run --link 'tap:csuite0
//! 10.78.N.2/24' -- PROGRAM ...` in a network namespace of its own, and driven by (or
//! driving) plain Linux programs in the same namespace on the kernel's sockets, at
//! `10.78.N.1`. Every transfer is checked byte for byte (sha256 of whole files, or a
//! comparison in the client).
//!
//! Multi-process programs are here too: nginx with a master and two workers (reloaded
//! under load), and redis's BGSAVE, which forks. memcached is a threaded one: its
//! listener thread hands each connection it accepts to one of its worker threads.
//!
//! `RUSTY_PROGRAMS_STACK=kernel` runs every program under test on the kernel's sockets
//! instead (at `.1`, without rusty-run), which checks the tests themselves: they must
//! pass that way on any Linux machine.
//!
//! Needs root and the programs (nginx, wrk, curl, python3, redis-server, redis-tools,
//! memcached); skips with a printed reason otherwise, unless
//! `RUSTY_REQUIRE_PRIVILEGED=1`, which makes a skip a failure. Every test makes its own
//! namespace, TAP and /24 and tears them down on drop; it stops only the processes it
//! started and their descendants, by pid; every wait and every request loop is bounded
//! in count and time.

// Shared with the conformance suite (`tests/linux.rs`).
#[path = "../common/mod.rs"]
mod common;
mod curl;
mod ipv6;
mod memcached;
mod metrics;
mod nginx;
mod python;
mod redis;

use std::collections::HashSet;
use std::fmt::Write as _;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::ExitStatus;
use std::time::{Duration, Instant};

use common::{
    add_tap_ipv6, host_ip6, make_tap, plain, rusty_run_args, rusty_run_args_ipv6, stack_ip6,
    tap_stat, RUSTY_RUN,
};
use rusty_testnet::{Proc, TestNet};

/// A program that should be listening is given this long to answer.
const STARTUP: Duration = Duration::from_secs(20);
/// A graceful stop (SIGQUIT, SIGTERM, SIGINT) must end the program within this.
const STOP: Duration = Duration::from_secs(15);
/// Each wrk run: its duration, and the fewest requests it must complete.
const WRK_SECONDS: u64 = 4;
const WRK_MIN_REQUESTS: u64 = 1000;
/// wrk's connections (over two threads).
const WRK_CONNECTIONS: u64 = 8;
/// The large file nginx serves (50 MiB).
const BIG: usize = 50 << 20;

/// Whose sockets the program under test runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stack {
    Kernel,
    Rusty,
}

fn stack() -> Stack {
    match std::env::var("RUSTY_PROGRAMS_STACK").as_deref() {
        Err(_) | Ok("") | Ok("rusty") => Stack::Rusty,
        Ok("kernel") => Stack::Kernel,
        Ok(other) => panic!("RUSTY_PROGRAMS_STACK={other}: want `rusty` or `kernel`"),
    }
}

/// One test's namespace (with its TAP), the processes it started, and what those
/// forked, so that teardown can stop them all by pid.
struct Scene {
    net: TestNet,
    stack: Stack,
    started: Instant,
    procs: Vec<Proc>,
    /// The link carries IPv6 too ([`Scene::with_ipv6`]).
    ipv6: bool,
    /// Descendants of our processes seen so far, as (pid, start time): a descendant
    /// orphaned by its parent's death is still found, and a pid reused since is not.
    family: Vec<(u32, u64)>,
}

impl Scene {
    /// A namespace with its TAP, once root and `tools` (and the ones every test uses)
    /// are there; `None` when the test is skipped.
    fn new(test: &str, tools: &[&str]) -> Option<Scene> {
        let mut all = vec!["sh", "kill", "sha256sum", "cat"];
        all.extend_from_slice(tools);
        let tools = rusty_testnet::privileged(test, &all)?;
        let net = TestNet::new(test, tools);
        // Programs that drop privileges (nginx's workers) read the files served from
        // here.
        let _ = fs::set_permissions(&net.dir, fs::Permissions::from_mode(0o755));
        make_tap(&net);
        Some(Scene {
            net,
            stack: stack(),
            started: Instant::now(),
            procs: Vec::new(),
            ipv6: false,
            family: Vec::new(),
        })
    }

    /// [`Scene::new`] with IPv6 on the link: the TAP has [`host_ip6`] and Rusty
    /// [`stack_ip6`] as well.
    fn with_ipv6(test: &str, tools: &[&str]) -> Option<Scene> {
        let mut scene = Scene::new(test, tools)?;
        add_tap_ipv6(&scene.net);
        scene.ipv6 = true;
        Some(scene)
    }

    /// The IPv6 address of the program under test, in brackets (for URLs).
    fn own_ip6(&self) -> String {
        match self.stack {
            Stack::Kernel => format!("[{}]", host_ip6(&self.net)),
            Stack::Rusty => format!("[{}]", stack_ip6(&self.net)),
        }
    }

    /// The namespace kernel's IPv6 address, in brackets.
    fn kernel_ip6(&self) -> String {
        format!("[{}]", host_ip6(&self.net))
    }

    fn fail(&self, msg: &str) -> ! {
        self.net.fail(msg)
    }

    /// The address of the program under test.
    fn own_ip(&self) -> String {
        match self.stack {
            Stack::Kernel => self.net.host_ip(),
            Stack::Rusty => self.net.stack_ip(),
        }
    }

    /// The namespace kernel's address, where the plain servers listen.
    fn kernel_ip(&self) -> String {
        self.net.host_ip()
    }

    fn path(&self, name: &str) -> PathBuf {
        self.net.dir.join(name)
    }

    fn tool(&self, name: &str) -> String {
        self.net.tools.get(name).display().to_string()
    }

    /// The interpreter itself rather than a wrapper script in front of it (pyenv's
    /// shims run a chain of shells), so that the process started is Python.
    fn python(&self) -> String {
        let (ok, out) = rusty_testnet::quick(
            self.net.tools.get("python3"),
            &["-c", "import sys; print(sys.executable)"],
        );
        match out.trim() {
            exe if ok && !exe.is_empty() => exe.to_string(),
            _ => self.fail(&format!("python3 does not name its executable: {out}")),
        }
    }

    /// Start `argv` as the program under test: under rusty-run with `queues` queues on
    /// the link (its default when `None`), or plainly on the kernel.
    fn under_test(&mut self, label: &str, queues: Option<usize>, argv: &[String]) -> Proc {
        self.under_test_with(label, queues, &[], argv)
    }

    /// [`Scene::under_test`], with rusty-run given `flags` as well.
    fn under_test_with(
        &mut self,
        label: &str,
        queues: Option<usize>,
        flags: &[String],
        argv: &[String],
    ) -> Proc {
        let cmd = match self.stack {
            Stack::Kernel => plain(&self.net, argv),
            Stack::Rusty => {
                let mut cmd = plain(&self.net, &[RUSTY_RUN.to_string()]);
                let mut args = if self.ipv6 {
                    rusty_run_args_ipv6(&self.net, queues)
                } else {
                    rusty_run_args(&self.net, queues)
                };
                let end = args.len() - 1;
                args.splice(end..end, flags.iter().cloned());
                cmd.args(args).args(argv);
                cmd
            }
        };
        let p = self.net.spawn(label, cmd);
        self.procs.push(p);
        p
    }

    /// Start `argv` plainly in the namespace, on the kernel's sockets.
    fn spawn(&mut self, label: &str, argv: &[String]) -> Proc {
        let cmd = plain(&self.net, argv);
        let p = self.net.spawn(label, cmd);
        self.procs.push(p);
        p
    }

    /// Run `argv` plainly to completion within `limit`; fail unless it exits 0.
    /// Returns its output (stdout and stderr).
    fn run(&mut self, label: &str, argv: &[String], limit: Duration) -> String {
        let p = self.spawn(label, argv);
        let status = self.exit_status(p, limit);
        if !status.success() {
            self.fail(&format!("{label} exited with {status}: {}", argv.join(" ")));
        }
        self.net.log(p)
    }

    /// `sh -c script sh args...`, plainly, to completion within `limit`.
    fn sh(&mut self, label: &str, script: &str, args: &[&str], limit: Duration) -> String {
        let mut argv = strings(&[&self.tool("sh"), "-c", script, "sh"]);
        argv.extend(strings(args));
        self.run(label, &argv, limit)
    }

    fn exit_status(&mut self, p: Proc, limit: Duration) -> ExitStatus {
        match self.net.wait(p, limit) {
            Some(s) => s,
            None => self.fail(&format!("{} still runs after {limit:?}", self.net.label(p))),
        }
    }

    fn expect_exit_0(&mut self, p: Proc, limit: Duration) {
        let status = self.exit_status(p, limit);
        if !status.success() {
            self.fail(&format!("{} exited with {status}", self.net.label(p)));
        }
    }

    /// Fail unless `p` still runs (a program under test that died is the finding).
    fn expect_running(&mut self, p: Proc, when: &str) {
        if !self.net.running(p) {
            let status = self.net.wait(p, Duration::ZERO);
            self.fail(&format!(
                "{} exited ({}) {when}",
                self.net.label(p),
                status.map_or("?".into(), |s| s.to_string())
            ));
        }
    }

    /// Send `signal` (a name `kill -s` takes) to `p`, by pid.
    fn signal(&mut self, p: Proc, signal: &str) {
        self.expect_running(p, &format!("before SIG{signal}"));
        let pid = self.net.pid(p).to_string();
        let (ok, out) = rusty_testnet::quick(self.net.tools.get("kill"), &["-s", signal, &pid]);
        if !ok {
            self.fail(&format!("kill -s {signal} {pid}: {out}"));
        }
    }

    /// Stop `p` gracefully with `signal` and fail unless it exits 0 within [`STOP`].
    fn stop(&mut self, p: Proc, signal: &str) -> Duration {
        let t = Instant::now();
        self.signal(p, signal);
        match self.net.wait(p, STOP) {
            Some(s) if s.success() => t.elapsed(),
            Some(s) => self.fail(&format!(
                "{} exited with {s} after SIG{signal} (want 0)",
                self.net.label(p)
            )),
            None => self.fail(&format!(
                "{} still runs {STOP:?} after SIG{signal}",
                self.net.label(p)
            )),
        }
    }

    /// The descendants `p` has now (its children, theirs, ...), remembered for
    /// teardown.
    fn descendants(&mut self, p: Proc) -> Vec<u32> {
        let table = proc_table();
        let mut found = Vec::new();
        let mut frontier = vec![self.net.pid(p)];
        while let Some(parent) = frontier.pop() {
            for &(pid, ppid, start) in &table {
                if ppid == parent && !found.contains(&pid) {
                    found.push(pid);
                    frontier.push(pid);
                    if !self.family.contains(&(pid, start)) {
                        self.family.push((pid, start));
                    }
                }
            }
        }
        found
    }

    /// Wait until `url` answers 200 (curl from the namespace), failing if `owner`
    /// exits or [`STARTUP`] passes first.
    fn wait_http(&mut self, url: &str, owner: Proc) {
        let curl = self.net.tools.get("curl").to_path_buf();
        let deadline = Instant::now() + STARTUP;
        let mut last = String::new();
        while Instant::now() < deadline {
            self.expect_running(owner, &format!("before answering {url}"));
            let args = [
                "-sS",
                "-o",
                "/dev/null",
                "-w",
                "%{http_code}",
                "--max-time",
                "2",
            ];
            let (ok, out) = self.net.ns_quick(&curl, &[&args[..], &[url]].concat());
            if ok && out.trim() == "200" {
                return;
            }
            last = out;
            std::thread::sleep(Duration::from_millis(100));
        }
        self.fail(&format!(
            "{url} did not answer 200 within {STARTUP:?}; last curl: {last}"
        ));
    }

    /// Wait until `pattern` is in `p`'s output, within [`STARTUP`].
    fn wait_for_log(&mut self, p: Proc, pattern: &str) {
        self.net.wait_for_log(p, pattern, STARTUP);
    }

    /// Fail unless the files are the same: their sha256 (sha256sum) and, when they
    /// differ, where.
    fn same_file(&self, expected: &Path, got: &Path, what: &str) {
        let (ok, out) = rusty_testnet::quick(
            self.net.tools.get("sha256sum"),
            &[&expected.display().to_string(), &got.display().to_string()],
        );
        let sums: Vec<&str> = out
            .lines()
            .filter_map(|l| l.split_whitespace().next())
            .collect();
        if ok && sums.len() == 2 && sums[0] == sums[1] {
            return;
        }
        let want = fs::read(expected).unwrap_or_default();
        let have = fs::read(got).unwrap_or_default();
        self.fail(&format!(
            "{what}: {} differs from {}: {}\nsha256sum: {out}",
            got.display(),
            expected.display(),
            describe_difference(&want, &have)
        ));
    }

    /// In a Rusty run, fail unless the kernel sent at least `bytes` to Rusty over the
    /// TAP: a library that left a client's sockets to the kernel would reach the
    /// kernel's own address without the TAP.
    fn expect_tap_carried(&self, bytes: u64) {
        if self.stack == Stack::Rusty {
            let sent = tap_stat(&self.net, "tx_bytes");
            if sent < bytes {
                self.fail(&format!(
                    "the TAP carried {sent} bytes to Rusty, fewer than the {bytes} \
                     transferred: the sockets were not Rusty's"
                ));
            }
        }
    }

    fn seconds(&self) -> f64 {
        self.started.elapsed().as_secs_f64()
    }
}

impl Drop for Scene {
    fn drop(&mut self) {
        // Our own processes first, so that none starts another (nginx's master replaces
        // a worker that dies), then every descendant seen, each by pid and only while
        // its start time says it is the same process.
        let running: Vec<Proc> = self
            .procs
            .clone()
            .into_iter()
            .filter(|&p| self.net.running(p))
            .collect();
        for &p in &running {
            self.descendants(p);
        }
        let Some(kill) = rusty_testnet::which("kill") else {
            return;
        };
        let kill_pids = |pids: Vec<String>| {
            if !pids.is_empty() {
                let mut args = vec!["-s".to_string(), "KILL".into()];
                args.extend(pids);
                let args: Vec<&str> = args.iter().map(String::as_str).collect();
                let _ = rusty_testnet::quick(&kill, &args);
            }
        };
        kill_pids(
            running
                .iter()
                .map(|&p| self.net.pid(p).to_string())
                .collect(),
        );
        let table = proc_table();
        let alive: HashSet<(u32, u64)> = table.iter().map(|&(pid, _, s)| (pid, s)).collect();
        kill_pids(
            self.family
                .iter()
                .filter(|f| alive.contains(f))
                .map(|(pid, _)| pid.to_string())
                .collect(),
        );
    }
}

/// Every process as (pid, parent pid, start time in clock ticks), from /proc.
fn proc_table() -> Vec<(u32, u32, u64)> {
    let Ok(dir) = fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(|e| {
        let pid: u32 = e.ok()?.file_name().to_str()?.parse().ok()?;
        let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        // The fields after the command name, which is in parentheses and may hold
        // anything: state, ppid, ..., start time (field 22 of the whole line).
        let rest: Vec<&str> = stat[stat.rfind(')')? + 1..].split_whitespace().collect();
        Some((pid, rest.get(1)?.parse().ok()?, rest.get(19)?.parse().ok()?))
    })
    .collect()
}

fn strings(args: &[&str]) -> Vec<String> {
    args.iter().map(|s| s.to_string()).collect()
}

/// `len` bytes that tell their own offset apart: splitmix64 of each 8-byte word's
/// index and `seed`.
fn pattern(len: usize, seed: u64) -> Vec<u8> {
    let mut out = Vec::with_capacity(len + 8);
    let mut i = 0u64;
    while out.len() < len {
        let mut z = (i ^ seed.rotate_left(32)).wrapping_add(0x9e37_79b9_7f4a_7c15);
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        out.extend_from_slice(&(z ^ (z >> 31)).to_le_bytes());
        i += 1;
    }
    out.truncate(len);
    out
}

/// Printable text of `len` bytes (lines of letters and digits), for values that pass
/// through tools that print them.
fn text(len: usize, seed: u64) -> Vec<u8> {
    const ALPHABET: &[u8] = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    pattern(len, seed)
        .iter()
        .enumerate()
        .map(|(i, b)| {
            if i % 64 == 63 {
                b'\n'
            } else {
                ALPHABET[usize::from(*b) % ALPHABET.len()]
            }
        })
        .collect()
}

fn write_file(path: &Path, contents: &[u8]) {
    if let Some(dir) = path.parent() {
        fs::create_dir_all(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
        let _ = fs::set_permissions(dir, fs::Permissions::from_mode(0o755));
    }
    fs::write(path, contents).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let _ = fs::set_permissions(path, fs::Permissions::from_mode(0o644));
}

/// Where two byte strings first differ, and their lengths.
fn describe_difference(want: &[u8], have: &[u8]) -> String {
    match want.iter().zip(have).position(|(a, b)| a != b) {
        Some(i) => format!(
            "first difference at byte {i} (want {:02x?}, got {:02x?}); lengths {} and {}",
            &want[i..want.len().min(i + 8)],
            &have[i..have.len().min(i + 8)],
            want.len(),
            have.len()
        ),
        None if want.len() == have.len() => "the same bytes".into(),
        None => format!(
            "one is a prefix of the other; lengths {} (want) and {} (got)",
            want.len(),
            have.len()
        ),
    }
}

/// curl fetches `urls` in one run (so over one connection when keep-alive holds), each
/// into its own file; returns the `-w` lines (`code connects size`), one per transfer.
fn curl_many(
    scene: &mut Scene,
    label: &str,
    urls: &[(String, PathBuf)],
    close: bool,
    headers: Option<&Path>,
) -> Vec<(String, u64, u64)> {
    let mut argv = strings(&[
        &scene.tool("curl"),
        "-sS",
        "--max-time",
        "120",
        "-w",
        "%{http_code} %{num_connects} %{size_download}\\n",
    ]);
    if close {
        argv.extend(strings(&["-H", "Connection: close"]));
    }
    if let Some(h) = headers {
        argv.extend(strings(&["-D", &h.display().to_string()]));
    }
    for (url, out) in urls {
        argv.extend(strings(&["-o", &out.display().to_string(), url]));
    }
    let out = scene.run(label, &argv, Duration::from_secs(150));
    let lines: Vec<(String, u64, u64)> = out
        .lines()
        .filter_map(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            match w[..] {
                [code, connects, size] => {
                    Some((code.to_string(), connects.parse().ok()?, size.parse().ok()?))
                }
                _ => None,
            }
        })
        .collect();
    if lines.len() != urls.len() || lines.iter().any(|(code, _, _)| code != "200") {
        scene.fail(&format!(
            "{label}: want {} transfers with status 200, curl printed:\n{out}",
            urls.len()
        ));
    }
    lines
}
