//! Unmodified Debian programs on Rusty: nginx, curl, Python's http.server, asyncio and
//! selectors programs, and redis, each run as `rusty-run --link 'tap:csuite0
//! 10.78.N.2/24' -- PROGRAM ...` in a network namespace of its own, and driven by (or
//! driving) plain Linux programs in the same namespace on the kernel's sockets, at
//! `10.78.N.1`. Every transfer is checked byte for byte (sha256 of whole files, or a
//! comparison in the client).
//!
//! Multi-process programs are here too: nginx with a master and two workers (reloaded
//! under load), and redis's BGSAVE, which forks.
//!
//! `RUSTY_PROGRAMS_STACK=kernel` runs every program under test on the kernel's sockets
//! instead (at `.1`, without rusty-run), which checks the tests themselves: they must
//! pass that way on any Linux machine.
//!
//! Needs root and the programs (nginx, wrk, curl, python3, redis-server, redis-tools);
//! skips with a printed reason otherwise, unless `RUSTY_REQUIRE_PRIVILEGED=1`, which
//! makes a skip a failure. Every test makes its own namespace, TAP and /24 and tears them
//! down on drop; it stops only the processes it started and their descendants, by pid;
//! every wait and every request loop is bounded in count and time.

mod common;

use std::collections::HashSet;
use std::fmt::Write as _;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::ExitStatus;
use std::time::{Duration, Instant};

use common::{make_tap, plain, rusty_run_args, tap_stat, RUSTY_RUN};
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
            family: Vec::new(),
        })
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
        let cmd = match self.stack {
            Stack::Kernel => plain(&self.net, argv),
            Stack::Rusty => {
                let mut cmd = plain(&self.net, &[RUSTY_RUN.to_string()]);
                cmd.args(rusty_run_args(&self.net, queues)).args(argv);
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

/// What one wrk run reported.
struct Wrk {
    requests: u64,
    read: String,
}

/// The wrk script that checks every response body against a file (its path is the
/// script's argument) and prints how many matched.
const WRK_CHECK: &str = r#"local threads = {}
function setup(thread)
  table.insert(threads, thread)
end
function init(args)
  local f = assert(io.open(args[1], "rb"))
  expected = f:read("*a")
  f:close()
  good = 0
  bad = 0
end
function response(status, headers, body)
  if status == 200 and body == expected then
    good = good + 1
  else
    bad = bad + 1
  end
end
function done(summary, latency, requests)
  local g, b = 0, 0
  for _, t in ipairs(threads) do
    g = g + t:get("good")
    b = b + t:get("bad")
  end
  io.write(string.format("checked: %d good %d bad\n", g, b))
end
"#;

/// What a wrk run must show: no socket errors (but at most `read_errors` on reading),
/// no status but 2xx, every body as `expected`, at least [`WRK_MIN_REQUESTS`].
fn check_wrk(scene: &Scene, what: &str, out: &str, read_errors: u64) -> Wrk {
    let fail = |why: &str| -> ! { scene.fail(&format!("{what}: {why}\n----- wrk -----\n{out}")) };
    let requests_line = out
        .lines()
        .find(|l| l.contains(" requests in "))
        .unwrap_or_else(|| fail("no request count"));
    let mut words = requests_line.split_whitespace();
    let requests: u64 = words
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| fail("unreadable request count"));
    let read = requests_line
        .rsplit(", ")
        .next()
        .unwrap_or("")
        .trim()
        .trim_end_matches(" read")
        .to_string();
    if let Some(errors) = out.lines().find(|l| l.contains("Socket errors:")) {
        // `Socket errors: connect 0, read 8, write 0, timeout 0`
        let counts: Vec<(&str, u64)> = errors
            .split([':', ','])
            .skip(1)
            .filter_map(|part| {
                let mut w = part.split_whitespace();
                Some((w.next()?, w.next()?.parse().ok()?))
            })
            .collect();
        let tolerated = counts.len() == 4
            && counts
                .iter()
                .all(|&(kind, n)| n == 0 || (kind == "read" && n <= read_errors));
        if !tolerated {
            fail(&format!("wrk saw {}", errors.trim()));
        }
    }
    if let Some(non2xx) = out.lines().find(|l| l.contains("Non-2xx")) {
        fail(&format!("wrk saw {}", non2xx.trim()));
    }
    let checked = out
        .lines()
        .find_map(|l| l.strip_prefix("checked: "))
        .unwrap_or_else(|| fail("the check script reported nothing"));
    let counts: Vec<u64> = checked
        .split_whitespace()
        .filter_map(|w| w.parse().ok())
        .collect();
    match counts[..] {
        [_, 0] => {}
        [_, bad] => fail(&format!("{bad} response bodies differ from the file")),
        _ => fail("unreadable check counts"),
    }
    if requests < WRK_MIN_REQUESTS {
        fail(&format!(
            "{requests} requests in {WRK_SECONDS} s, fewer than {WRK_MIN_REQUESTS}"
        ));
    }
    Wrk { requests, read }
}

/// wrk's arguments: 2 threads, [`WRK_CONNECTIONS`] connections, `seconds`, every body checked against
/// `expected`, optionally with `Connection: close` (a new connection per request).
fn wrk_args(scene: &Scene, url: &str, expected: &Path, seconds: u64, close: bool) -> Vec<String> {
    let script = scene.path("check.lua");
    if !script.exists() {
        write_file(&script, WRK_CHECK.as_bytes());
    }
    let mut argv = strings(&[
        &scene.tool("wrk"),
        "-t2",
        &format!("-c{WRK_CONNECTIONS}"),
        &format!("-d{seconds}s"),
        "--timeout",
        "5s",
        "-s",
        &script.display().to_string(),
    ]);
    if close {
        argv.extend(strings(&["-H", "Connection: close"]));
    }
    argv.extend(strings(&[url, "--", &expected.display().to_string()]));
    argv
}

/// The nginx under test: its prefix, configuration and files.
struct Nginx {
    www: PathBuf,
    small: PathBuf,
    big: PathBuf,
}

/// Port of the server block with `sendfile on`, and of the one with `sendfile off`.
const SENDFILE_ON: u16 = 8080;
const SENDFILE_OFF: u16 = 8081;

/// nginx's prefix, configuration and files in the scratch directory; returns its
/// command line. Everything nginx reads or writes is under the prefix (the pid file,
/// logs, temporary directories), so the Debian package's own configuration and any
/// nginx the package started play no part; the log goes to stderr, which the harness
/// keeps.
fn nginx_setup(scene: &Scene, master: bool) -> (Nginx, Vec<String>) {
    let prefix = scene.path("nginx");
    let www = prefix.join("www");
    let small = www.join("small.txt");
    let big = www.join("big.bin");
    write_file(&small, &text(3000, 1));
    write_file(&big, &pattern(BIG, 2));
    let p = prefix.display();
    let processes = if master {
        // Debian's nginx runs its workers as nobody when started as root.
        let groups = fs::read_to_string("/etc/group").unwrap_or_default();
        let group = if groups.lines().any(|l| l.starts_with("nogroup:")) {
            "nogroup"
        } else {
            "nobody"
        };
        format!("master_process on;\nworker_processes 2;\nuser nobody {group};\n")
    } else {
        "master_process off;\nworker_processes 1;\n".to_string()
    };
    let server = |port: u16, sendfile: &str| {
        format!(
            "    server {{\n        listen {port};\n        root {www};\n        \
             sendfile {sendfile};\n    }}\n",
            www = www.display()
        )
    };
    let conf = format!(
        "daemon off;\n{processes}pid {p}/nginx.pid;\nerror_log stderr notice;\n\
         events {{\n    worker_connections 1024;\n}}\n\
         http {{\n    access_log off;\n    keepalive_timeout 65s;\n    \
         keepalive_requests 100000;\n    \
         types {{ text/plain txt; application/octet-stream bin; }}\n    \
         client_body_temp_path {p}/client_body;\n    proxy_temp_path {p}/proxy;\n    \
         fastcgi_temp_path {p}/fastcgi;\n    uwsgi_temp_path {p}/uwsgi;\n    \
         scgi_temp_path {p}/scgi;\n{}{}}}\n",
        server(SENDFILE_ON, "on"),
        server(SENDFILE_OFF, "off"),
    );
    let conf_path = prefix.join("nginx.conf");
    write_file(&conf_path, conf.as_bytes());
    let argv = strings(&[
        &scene.tool("nginx"),
        "-p",
        &p.to_string(),
        "-c",
        &conf_path.display().to_string(),
        "-e",
        "stderr",
    ]);
    (Nginx { www, small, big }, argv)
}

/// What the curl and wrk rounds against nginx moved.
#[derive(Default)]
struct Tally {
    curl_transfers: u64,
    curl_bytes: u64,
    wrk_runs: u64,
    wrk_requests: u64,
    wrk_read: Vec<String>,
}

impl Tally {
    fn add_wrk(&mut self, w: Wrk) {
        self.wrk_runs += 1;
        self.wrk_requests += w.requests;
        self.wrk_read.push(w.read);
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

/// The checks both nginx tests make against both server blocks: curl downloads over
/// one kept-alive connection and with `Connection: close` (checked by sha256), and wrk
/// with keep-alive and with `Connection: close` (every body checked).
fn nginx_rounds(scene: &mut Scene, nginx: &Nginx, round: &str, tally: &mut Tally) {
    let ip = scene.own_ip();
    for (port, sendfile) in [(SENDFILE_ON, "on"), (SENDFILE_OFF, "off")] {
        let what = format!("{round}, sendfile {sendfile}");
        let url = |file: &Path| {
            format!(
                "http://{ip}:{port}/{}",
                file.strip_prefix(&nginx.www).unwrap().display()
            )
        };
        let dir = scene.net.dir.clone();
        let dl = |name: &str| dir.join(format!("dl-{round}-{port}-{name}"));
        let expected = [&nginx.small, &nginx.big, &nginx.small, &nginx.big];
        let kept: Vec<(String, PathBuf)> = expected
            .iter()
            .enumerate()
            .map(|(i, f)| (url(f), dl(&format!("keepalive-{i}"))))
            .collect();
        let got = curl_many(scene, &format!("curl-{port}"), &kept, false, None);
        let connects: Vec<u64> = got.iter().map(|g| g.1).collect();
        if connects != [1, 0, 0, 0] {
            scene.fail(&format!(
                "{what}: curl's four transfers made {connects:?} connections \
                 (want [1, 0, 0, 0]: the connection kept alive)"
            ));
        }
        let headers = scene.path(&format!("headers-{round}-{port}"));
        let closed: Vec<(String, PathBuf)> = expected[..2]
            .iter()
            .enumerate()
            .map(|(i, f)| (url(f), dl(&format!("close-{i}"))))
            .collect();
        let got_closed = curl_many(
            scene,
            &format!("curl-close-{port}"),
            &closed,
            true,
            Some(&headers),
        );
        let connects: Vec<u64> = got_closed.iter().map(|g| g.1).collect();
        let header_text = fs::read_to_string(&headers).unwrap_or_default();
        let closes = header_text
            .lines()
            .filter(|l| l.trim().eq_ignore_ascii_case("connection: close"))
            .count();
        if connects != [1, 1] || closes != 2 {
            scene.fail(&format!(
                "{what}: with Connection: close, curl made {connects:?} connections \
                 (want [1, 1]) and saw {closes} `Connection: close` (want 2):\n{header_text}"
            ));
        }
        for ((_, out), file) in kept
            .iter()
            .chain(&closed)
            .zip(expected.iter().chain(&expected[..2]))
        {
            scene.same_file(file, out, &what);
            let _ = fs::remove_file(out);
        }
        tally.curl_transfers += (got.len() + got_closed.len()) as u64;
        tally.curl_bytes += got.iter().chain(&got_closed).map(|g| g.2).sum::<u64>();
        for close in [false, true] {
            let argv = wrk_args(scene, &url(&nginx.small), &nginx.small, WRK_SECONDS, close);
            let limit = Duration::from_secs(WRK_SECONDS + 30);
            let out = scene.run(&format!("wrk-{port}"), &argv, limit);
            let mode = if close {
                "Connection: close"
            } else {
                "keep-alive"
            };
            tally.add_wrk(check_wrk(scene, &format!("{what}, wrk {mode}"), &out, 0));
        }
    }
}

fn nginx_summary(scene: &Scene, test: &str, tally: &Tally, extra: &str) {
    eprintln!(
        "{test}: {} wrk runs, {} requests ({} read), {} curl transfers, {} bytes checked by \
         sha256{extra}, {:.1} s",
        tally.wrk_runs,
        tally.wrk_requests,
        tally.wrk_read.join(" + "),
        tally.curl_transfers,
        tally.curl_bytes,
        scene.seconds()
    );
}

/// 1. nginx in one process (`master_process off`): a small file and a 50 MiB one, with
///    sendfile on and off, keep-alive and `Connection: close`, curl and wrk; then a
///    graceful stop with SIGQUIT.
#[test]
fn nginx_single_process() {
    let test = "nginx_single_process";
    let Some(mut scene) = Scene::new(test, &["nginx", "curl", "wrk"]) else {
        return;
    };
    let (nginx, argv) = nginx_setup(&scene, false);
    let server = scene.under_test("nginx", None, &argv);
    let ip = scene.own_ip();
    for port in [SENDFILE_ON, SENDFILE_OFF] {
        scene.wait_http(&format!("http://{ip}:{port}/small.txt"), server);
    }
    let mut tally = Tally::default();
    nginx_rounds(&mut scene, &nginx, "first", &mut tally);
    let stopped = scene.stop(server, "QUIT");
    nginx_summary(
        &scene,
        test,
        &tally,
        &format!(", SIGQUIT stop in {:.2} s", stopped.as_secs_f64()),
    );
}

/// 2. nginx with a master and two workers (which the master forks after it listens):
///    the same rounds, then a reload (SIGHUP) while wrk runs, the rounds again on the
///    new workers, and a graceful stop with SIGQUIT that ends every worker.
#[test]
fn nginx_master_and_two_workers() {
    let test = "nginx_master_and_two_workers";
    let Some(mut scene) = Scene::new(test, &["nginx", "curl", "wrk"]) else {
        return;
    };
    let (nginx, argv) = nginx_setup(&scene, true);
    let master = scene.under_test("nginx", Some(3), &argv);
    scene.wait_for_log(master, "start worker process");
    let ip = scene.own_ip();
    for port in [SENDFILE_ON, SENDFILE_OFF] {
        scene.wait_http(&format!("http://{ip}:{port}/small.txt"), master);
    }
    let workers = wait_workers(&mut scene, master, &[]);
    probe_workers(
        &mut scene,
        &format!("http://{ip}:{SENDFILE_ON}/small.txt"),
        "",
    );
    let mut tally = Tally::default();
    nginx_rounds(&mut scene, &nginx, "first", &mut tally);
    scene.expect_running(master, "after the first rounds");

    // The reload: wrk keeps requesting (keep-alive) while the master forks new workers
    // and the old ones finish their requests and close.
    let url = format!("http://{ip}:{SENDFILE_ON}/small.txt");
    let load_seconds = 8;
    let argv = wrk_args(&scene, &url, &nginx.small, load_seconds, false);
    let load = scene.spawn("wrk-reload", &argv);
    std::thread::sleep(Duration::from_secs(2));
    scene.signal(master, "HUP");
    let new_workers = wait_workers(&mut scene, master, &workers);
    scene.expect_exit_0(load, Duration::from_secs(load_seconds + 30));
    let out = scene.net.log(load);
    // The old workers close their kept-alive connections when they are idle; a
    // request wrk sends on one just then reads EOF (on the kernel too). That is one
    // read error per connection at most, each connection being closed once.
    tally.add_wrk(check_wrk(
        &scene,
        "wrk during the reload",
        &out,
        WRK_CONNECTIONS,
    ));
    wait_gone(&mut scene, &workers, "the old workers after the reload");
    probe_workers(
        &mut scene,
        &format!("http://{ip}:{SENDFILE_ON}/small.txt"),
        " after the reload",
    );
    nginx_rounds(&mut scene, &nginx, "reloaded", &mut tally);

    let stopped = scene.stop(master, "QUIT");
    wait_gone(&mut scene, &new_workers, "the workers after SIGQUIT");
    nginx_summary(
        &scene,
        test,
        &tally,
        &format!(
            ", workers {workers:?} reloaded to {new_workers:?}, SIGQUIT stop in {:.2} s",
            stopped.as_secs_f64()
        ),
    );
}

/// A few requests, each on a new connection, so that a failure to serve from the
/// workers is reported as such (with what curl saw) rather than as the first check's.
fn probe_workers(scene: &mut Scene, url: &str, when: &str) {
    let curl = scene.net.tools.get("curl").to_path_buf();
    let probes = 8;
    let mut failed = Vec::new();
    for i in 0..probes {
        let args = [
            "-sS",
            "-o",
            "/dev/null",
            "-w",
            "%{http_code}\\n",
            "--max-time",
            "3",
            url,
        ];
        let (ok, out) = scene.net.ns_quick(&curl, &args);
        if !ok || out.trim() != "200" {
            failed.push(format!("request {i}: {}", out.trim()));
        }
    }
    if !failed.is_empty() {
        scene.fail(&format!(
            "nginx's workers (forked by the master after it listened) do not serve{when}: \
             {} of {probes} requests to {url} failed:\n{}",
            failed.len(),
            failed.join("\n")
        ));
    }
}

/// Wait until the nginx master has two workers that are not in `old` (bounded), and
/// return their pids.
fn wait_workers(scene: &mut Scene, master: Proc, old: &[u32]) -> Vec<u32> {
    let deadline = Instant::now() + STARTUP;
    loop {
        scene.expect_running(master, "while its workers start");
        let fresh: Vec<u32> = scene
            .descendants(master)
            .into_iter()
            .filter(|pid| !old.contains(pid))
            .collect();
        if fresh.len() == 2 {
            return fresh;
        }
        if Instant::now() > deadline {
            scene.fail(&format!(
                "the master has new children {fresh:?} after {STARTUP:?}, want two workers \
                 (old ones {old:?})"
            ));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Wait until none of `pids` runs any more (bounded by [`STOP`]).
fn wait_gone(scene: &mut Scene, pids: &[u32], what: &str) {
    let deadline = Instant::now() + STOP;
    loop {
        let alive: Vec<u32> = pids
            .iter()
            .copied()
            .filter(|pid| {
                fs::read_to_string(format!("/proc/{pid}/stat"))
                    .is_ok_and(|s| !s.rsplit(')').next().unwrap_or("").trim().starts_with('Z'))
            })
            .collect();
        if alive.is_empty() {
            return;
        }
        if Instant::now() > deadline {
            scene.fail(&format!("{what}: {alive:?} still run after {STOP:?}"));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// 3. curl as a client: it downloads a 4 MiB file from Python's http.server on the
///    namespace's kernel.
#[test]
fn curl_as_a_client() {
    let test = "curl_as_a_client";
    let Some(mut scene) = Scene::new(test, &["curl", "python3"]) else {
        return;
    };
    let www = scene.path("www");
    let file = www.join("file.bin");
    let size = 4 << 20;
    write_file(&file, &pattern(size, 3));
    let port = 8000;
    let python = scene.python();
    let argv = strings(&[
        &python,
        "-m",
        "http.server",
        &port.to_string(),
        "--bind",
        &scene.kernel_ip(),
        "--directory",
        &www.display().to_string(),
    ]);
    let server = scene.spawn("http.server", &argv);
    scene.net.wait_listening(port, server);
    let got = scene.path("downloaded.bin");
    let url = format!("http://{}:{port}/file.bin", scene.kernel_ip());
    let argv = strings(&[
        &scene.tool("curl"),
        "-sS",
        "--max-time",
        "60",
        "-o",
        &got.display().to_string(),
        &url,
    ]);
    let client = scene.under_test("curl", None, &argv);
    scene.expect_exit_0(client, Duration::from_secs(90));
    scene.same_file(&file, &got, "curl's download");
    scene.expect_tap_carried(size as u64);
    eprintln!(
        "{test}: 1 request, {size} bytes checked by sha256, {:.1} s",
        scene.seconds()
    );
}

/// 4. Python's http.server (a ThreadingHTTPServer) serving three files to 200 curl
///    requests: 100 one after another, 100 from eight curls at a time.
#[test]
fn python_threaded_http_server() {
    let test = "python_threaded_http_server";
    let Some(mut scene) = Scene::new(test, &["curl", "python3", "xargs", "env"]) else {
        return;
    };
    let www = scene.path("www");
    let files: Vec<(String, Vec<u8>)> = vec![
        ("a.txt".into(), text(1000, 4)),
        ("b.bin".into(), pattern(200 << 10, 5)),
        ("c.bin".into(), pattern(2 << 20, 6)),
    ];
    for (name, contents) in &files {
        write_file(&www.join(name), contents);
    }
    let port = 8000;
    let ip = scene.own_ip();
    let python = scene.python();
    // SIGINT stops http.server cleanly (exit 0), but Python leaves SIGINT alone when it
    // starts ignored (as under a shell that ran the tests in the background); env
    // gives it back its default first.
    let argv = strings(&[
        &scene.tool("env"),
        "--default-signal=INT",
        &python,
        "-m",
        "http.server",
        &port.to_string(),
        "--bind",
        &ip,
        "--directory",
        &www.display().to_string(),
    ]);
    let server = scene.under_test("http.server", None, &argv);
    scene.wait_http(&format!("http://{ip}:{port}/a.txt"), server);

    let requests = 200;
    let out_dir = scene.path("got");
    fs::create_dir_all(&out_dir).expect("output directory");
    let plan: Vec<(usize, String, PathBuf)> = (0..requests)
        .map(|i| {
            let f = i % files.len();
            let url = format!("http://{ip}:{port}/{}", files[f].0);
            (f, url, out_dir.join(format!("{i}")))
        })
        .collect();
    let (sequential, parallel) = plan.split_at(requests / 2);
    let urls: Vec<(String, PathBuf)> = sequential
        .iter()
        .map(|(_, url, out)| (url.clone(), out.clone()))
        .collect();
    let got = curl_many(&mut scene, "curl-sequential", &urls, false, None);
    let list: String = parallel
        .iter()
        .map(|(_, url, out)| format!("{url} {}\n", out.display()))
        .collect();
    let list_path = scene.path("parallel.list");
    write_file(&list_path, list.as_bytes());
    scene.sh(
        "curl-parallel",
        r#"curl=$1; xargs -P 8 -n 2 sh -c '"$0" -sS --max-time 20 -o "$2" "$1"' "$curl" <"$2""#,
        &[&scene.tool("curl"), &list_path.display().to_string()],
        Duration::from_secs(120),
    );
    let mut bytes = 0;
    for (f, url, out) in &plan {
        let have = fs::read(out).unwrap_or_default();
        if have != files[*f].1 {
            scene.fail(&format!(
                "{url} into {}: {}",
                out.display(),
                describe_difference(&files[*f].1, &have)
            ));
        }
        bytes += have.len();
    }
    scene.expect_running(server, "after the requests");
    let stopped = scene.stop(server, "INT");
    eprintln!(
        "{test}: {requests} requests ({} sequential over {} connections, {} by 8 curls at \
         a time), {bytes} bytes checked, SIGINT stop in {:.2} s, {:.1} s",
        got.len(),
        got.iter().map(|g| g.1).sum::<u64>(),
        parallel.len(),
        stopped.as_secs_f64(),
        scene.seconds()
    );
}

/// The asyncio echo server: echoes each connection until its peer half-closes, then
/// closes; SIGTERM stops it (exit 0).
const ASYNCIO_ECHO: &str = r#"import asyncio, signal, sys

async def handle(reader, writer):
    try:
        while True:
            data = await reader.read(65536)
            if not data:
                break
            writer.write(data)
            await writer.drain()
    finally:
        writer.close()

async def main():
    server = await asyncio.start_server(handle, sys.argv[1], int(sys.argv[2]))
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    print("listening", flush=True)
    async with server:
        await stop.wait()
    print("stopped", flush=True)

asyncio.run(main())
"#;

/// The echo client: CONNS connections at once, half of them in lock step (a payload,
/// then its echo, ROUNDS times), half streaming (ROUNDS payloads sent back to back by
/// one thread while another reads the echo); every byte compared; each connection ends
/// with a half-close and waits for the server's EOF. Exit 0 only when all matched.
const ECHO_CLIENT: &str = r#"import random, socket, sys, threading

host, port = sys.argv[1], int(sys.argv[2])
conns, rounds, seed = int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
errors, totals, payloads = [], [0] * conns, [0] * conns

def sizes(rng):
    return [rng.choice([1, rng.randint(2, 1500), rng.randint(1500, 65536),
                        rng.randint(65536, 262144)]) for _ in range(rounds)]

def recv_exact(s, n):
    parts, got = [], 0
    while got < n:
        b = s.recv(min(n - got, 1 << 20))
        if not b:
            raise RuntimeError(f"EOF after {got} of {n} bytes")
        parts.append(b)
        got += len(b)
    return b"".join(parts)

def check(i, k, want, have):
    if want != have:
        at = next((j for j in range(min(len(want), len(have))) if want[j] != have[j]),
                  min(len(want), len(have)))
        raise RuntimeError(f"payload {k} ({len(want)} bytes) differs at byte {at}")
    totals[i] += len(want)
    payloads[i] += 1

def finish(s):
    s.shutdown(socket.SHUT_WR)
    if s.recv(1) != b"":
        raise RuntimeError("data after the echo instead of EOF")

def lockstep(i, rng):
    with socket.create_connection((host, port), timeout=20) as s:
        for k, n in enumerate(sizes(rng)):
            p = rng.randbytes(n)
            s.sendall(p)
            check(i, k, p, recv_exact(s, n))
        finish(s)

def streamed(i, rng):
    ps = [rng.randbytes(n) for n in sizes(rng)]
    with socket.create_connection((host, port), timeout=20) as s:
        t = threading.Thread(target=lambda: [s.sendall(p) for p in ps])
        t.start()
        for k, p in enumerate(ps):
            check(i, k, p, recv_exact(s, len(p)))
        t.join()
        finish(s)

def run(i):
    rng = random.Random(seed * 1000 + i)
    try:
        (lockstep if i % 2 == 0 else streamed)(i, rng)
    except Exception as e:
        errors.append(f"connection {i}: {e!r} after {payloads[i]} payloads")

threads = [threading.Thread(target=run, args=(i,)) for i in range(conns)]
for t in threads:
    t.start()
for t in threads:
    t.join()
for e in errors:
    print(e, file=sys.stderr)
print(f"echoed {sum(totals)} bytes in {sum(payloads)} payloads over {conns} connections")
sys.exit(1 if errors else 0)
"#;

/// The number in `out`'s line that starts with `prefix` (`echoed 123 bytes ...`).
fn echoed_bytes(scene: &Scene, out: &str, prefix: &str) -> u64 {
    out.lines()
        .find_map(|l| l.strip_prefix(prefix))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| scene.fail(&format!("no `{prefix}N` line in:\n{out}")))
}

/// 5. An asyncio echo server; eight connections at once from a client on the kernel,
///    each payload compared.
#[test]
fn python_asyncio_echo() {
    let test = "python_asyncio_echo";
    let Some(mut scene) = Scene::new(test, &["python3"]) else {
        return;
    };
    let server_py = scene.net.write("echo_server.py", ASYNCIO_ECHO);
    let client_py = scene.net.write("echo_client.py", ECHO_CLIENT);
    let python = scene.python();
    let ip = scene.own_ip();
    let port = "7000";
    let argv = strings(&[&python, &server_py.display().to_string(), &ip, port]);
    let server = scene.under_test("asyncio-echo", None, &argv);
    scene.wait_for_log(server, "listening");
    let (conns, rounds) = (8, 40);
    let argv = strings(&[
        &python,
        &client_py.display().to_string(),
        &ip,
        port,
        &conns.to_string(),
        &rounds.to_string(),
        "7",
    ]);
    let out = scene.run("echo-client", &argv, Duration::from_secs(120));
    let bytes = echoed_bytes(&scene, &out, "echoed ");
    let stopped = scene.stop(server, "TERM");
    eprintln!(
        "{test}: {} payloads over {conns} connections, {bytes} bytes echoed and checked, \
         SIGTERM stop in {:.2} s, {:.1} s",
        conns * rounds,
        stopped.as_secs_f64(),
        scene.seconds()
    );
}

/// The kernel's echo server for the selectors client: a thread per connection, echoing
/// until the peer half-closes.
const THREADED_ECHO: &str = r#"import socketserver, sys

class Echo(socketserver.BaseRequestHandler):
    def handle(self):
        while True:
            data = self.request.recv(65536)
            if not data:
                return
            self.request.sendall(data)

socketserver.ThreadingTCPServer.allow_reuse_address = True
socketserver.ThreadingTCPServer.daemon_threads = True
with socketserver.ThreadingTCPServer((sys.argv[1], int(sys.argv[2])), Echo) as server:
    print("listening", flush=True)
    server.serve_forever()
"#;

/// The client under test: CONNS non-blocking connections driven by one selectors loop
/// (epoll), each connecting with EINPROGRESS, sending ROUNDS payloads one at a time and
/// reading each echo before the next, then half-closing and waiting for EOF. Exit 0
/// only when every byte matched, within 60 s.
const SELECTORS_CLIENT: &str = r#"import errno, random, selectors, socket, sys, time

host, port = sys.argv[1], int(sys.argv[2])
conns, rounds, seed = int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
sel = selectors.DefaultSelector()
print(f"selector {type(sel).__name__}", flush=True)

class Conn:
    def __init__(self, i):
        self.i, self.rng, self.round = i, random.Random(seed * 1000 + i), 0
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setblocking(False)
        err = self.sock.connect_ex((host, port))
        if err != errno.EINPROGRESS:
            raise RuntimeError(f"connection {i}: connect_ex gave {errno.errorcode.get(err, err)}")
        self.state, self.bytes = "connecting", 0
        sel.register(self.sock, selectors.EVENT_WRITE, self)

    def next_payload(self):
        n = self.rng.choice([1, self.rng.randint(2, 1500), self.rng.randint(1500, 200000)])
        self.payload = self.rng.randbytes(n)
        self.out, self.got = memoryview(self.payload), bytearray()
        sel.modify(self.sock, selectors.EVENT_READ | selectors.EVENT_WRITE, self)

    def ready(self, events):
        if self.state == "connecting":
            err = self.sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
            if err:
                raise RuntimeError(f"connection {self.i}: SO_ERROR {errno.errorcode.get(err, err)}")
            self.state = "echoing"
            self.next_payload()
            return
        if events & selectors.EVENT_WRITE and self.out:
            sent = self.sock.send(self.out)
            self.out = self.out[sent:]
            if not self.out:
                sel.modify(self.sock, selectors.EVENT_READ, self)
        if events & selectors.EVENT_READ:
            data = self.sock.recv(1 << 20)
            if self.state == "closing":
                if data:
                    raise RuntimeError(f"connection {self.i}: data instead of EOF")
                sel.unregister(self.sock)
                self.sock.close()
                self.state = "done"
                return
            if not data:
                raise RuntimeError(f"connection {self.i}: EOF in round {self.round}")
            self.got += data
            if len(self.got) > len(self.payload) or self.payload[:len(self.got)] != self.got:
                raise RuntimeError(f"connection {self.i}: round {self.round}: echo differs "
                                   f"within its first {len(self.got)} bytes")
            if len(self.got) == len(self.payload):
                self.bytes += len(self.payload)
                self.round += 1
                if self.round == rounds:
                    self.sock.shutdown(socket.SHUT_WR)
                    self.state = "closing"
                    sel.modify(self.sock, selectors.EVENT_READ, self)
                else:
                    self.next_payload()

all_conns = [Conn(i) for i in range(conns)]
deadline = time.monotonic() + 60
while any(c.state != "done" for c in all_conns):
    if time.monotonic() > deadline:
        states = [(c.i, c.state, c.round) for c in all_conns]
        sys.exit(f"not done within 60 s: {states}")
    for key, events in sel.select(timeout=1):
        key.data.ready(events)
print(f"echoed {sum(c.bytes for c in all_conns)} bytes in {conns * rounds} payloads "
      f"over {conns} connections")
"#;

/// 6. A selectors (epoll) client of non-blocking connections, against a kernel echo
///    server on the namespace's `.1`.
#[test]
fn python_selectors_client() {
    let test = "python_selectors_client";
    let Some(mut scene) = Scene::new(test, &["python3"]) else {
        return;
    };
    let server_py = scene.net.write("echo_server.py", THREADED_ECHO);
    let client_py = scene.net.write("selectors_client.py", SELECTORS_CLIENT);
    let python = scene.python();
    let kernel = scene.kernel_ip();
    let port = 7000;
    let argv = strings(&[
        &python,
        &server_py.display().to_string(),
        &kernel,
        &port.to_string(),
    ]);
    let server = scene.spawn("kernel-echo", &argv);
    scene.net.wait_listening(port, server);
    let (conns, rounds) = (6, 30);
    let argv = strings(&[
        &python,
        &client_py.display().to_string(),
        &kernel,
        &port.to_string(),
        &conns.to_string(),
        &rounds.to_string(),
        "11",
    ]);
    let client = scene.under_test("selectors-client", None, &argv);
    scene.expect_exit_0(client, Duration::from_secs(90));
    let out = scene.net.log(client);
    let bytes = echoed_bytes(&scene, &out, "echoed ");
    scene.expect_tap_carried(bytes);
    eprintln!(
        "{test}: {} payloads over {conns} connections, {bytes} bytes echoed and checked, \
         {:.1} s",
        conns * rounds,
        scene.seconds()
    );
}

/// The requests per second redis-benchmark reported for each of `tests` (`SET`, ...);
/// fails on any error it printed.
fn check_benchmark(scene: &Scene, what: &str, out: &str, tests: &[&str]) -> Vec<String> {
    let lines: Vec<&str> = out
        .split(['\r', '\n'])
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    let fail = |why: String| -> ! {
        scene.fail(&format!(
            "{what}: {why}\n----- redis-benchmark -----\n{out}"
        ))
    };
    if let Some(bad) = lines
        .iter()
        .find(|l| l.to_ascii_lowercase().contains("error") || l.starts_with("ERR"))
    {
        fail(format!("it reported {bad:?}"));
    }
    tests
        .iter()
        .map(|t| {
            lines
                .iter()
                .find(|l| l.starts_with(&format!("{t}: ")) && l.contains("requests per second"))
                .map(|l| l.to_string())
                .unwrap_or_else(|| fail(format!("no result for {t}")))
        })
        .collect()
}

/// 7. redis: redis-benchmark (plain and pipelined), a 100 KB value through redis-cli,
///    and BGSAVE (which forks) with a client connected; then SIGTERM.
#[test]
fn redis() {
    let test = "redis";
    let Some(mut scene) = Scene::new(test, &["redis-server", "redis-cli", "redis-benchmark"])
    else {
        return;
    };
    let ip = scene.own_ip();
    let port = "6379";
    let dir = scene.net.dir.display().to_string();
    let argv = strings(&[
        &scene.tool("redis-server"),
        "--port",
        port,
        "--bind",
        "0.0.0.0",
        "--protected-mode",
        "no",
        "--save",
        "",
        "--appendonly",
        "no",
        "--dir",
        &dir,
        "--dbfilename",
        "dump.rdb",
        "--daemonize",
        "no",
        "--logfile",
        "",
    ]);
    let server = scene.under_test("redis-server", None, &argv);
    scene.wait_for_log(server, "Ready to accept connections");
    let cli_prefix = strings(&[&scene.tool("redis-cli"), "-h", &ip, "-p", port]);
    let cli = |args: &[&str]| -> Vec<String> {
        let mut argv = cli_prefix.clone();
        argv.extend(strings(args));
        argv
    };
    let benchmark = scene.tool("redis-benchmark");
    let bench = |extra: &[&str]| -> Vec<String> {
        let mut argv = strings(&[
            &benchmark,
            "-h",
            &ip,
            "-p",
            port,
            "-t",
            "set,get,lpush",
            "-n",
            "20000",
            "-q",
        ]);
        argv.extend(strings(extra));
        argv
    };
    let tests = ["SET", "GET", "LPUSH"];
    let limit = Duration::from_secs(120);
    let out = scene.run("redis-benchmark", &bench(&[]), limit);
    let plain_rates = check_benchmark(&scene, "redis-benchmark", &out, &tests);
    let out = scene.run("redis-benchmark-P16", &bench(&["-P", "16"]), limit);
    let pipelined_rates = check_benchmark(&scene, "redis-benchmark -P 16", &out, &tests);

    // A 100 KB value in and out: the same bytes (redis-cli --raw adds a newline).
    let value = text(100 << 10, 8);
    let value_path = scene.path("value.txt");
    write_file(&value_path, &value);
    let got_path = scene.path("got.txt");
    let mut args = vec![value_path.display().to_string()];
    args.extend(cli(&[]));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let script = r#"value=$1; shift; exec "$@" -x SET big <"$value""#;
    let set = scene.sh("redis-cli-set", script, &args, Duration::from_secs(20));
    if set.trim() != "OK" {
        scene.fail(&format!("redis-cli SET of the 100 KB value: {set:?}"));
    }
    let get_value = |scene: &mut Scene, label: &str| {
        let _ = fs::remove_file(&got_path);
        let mut args = vec![got_path.display().to_string()];
        args.extend(cli(&["--raw", "GET", "big"]));
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let script = r#"out=$1; shift; exec "$@" >"$out""#;
        scene.sh(label, script, &args, Duration::from_secs(20));
        let mut want = value.clone();
        want.push(b'\n');
        let have = fs::read(&got_path).unwrap_or_default();
        if have != want {
            scene.fail(&format!(
                "{label}: the 100 KB value came back different: {}",
                describe_difference(&want, &have)
            ));
        }
    };
    get_value(&mut scene, "redis-cli-get");

    // BGSAVE with a client connected (one PING every 100 ms for 10 s).
    let lastsave = |scene: &mut Scene| -> u64 {
        let out = scene.run(
            "redis-cli-lastsave",
            &cli(&["LASTSAVE"]),
            Duration::from_secs(20),
        );
        out.trim()
            .trim_start_matches("(integer) ")
            .parse()
            .unwrap_or_else(|_| scene.fail(&format!("LASTSAVE: {out:?}")))
    };
    let before = lastsave(&mut scene);
    // LASTSAVE counts seconds: let one pass since the last save, so that a new save
    // changes it.
    let wait_until = std::time::UNIX_EPOCH + Duration::from_secs(before + 1);
    while std::time::SystemTime::now() < wait_until {
        std::thread::sleep(Duration::from_millis(50));
    }
    let pings = 100;
    let pinger = scene.spawn(
        "redis-cli-ping",
        &cli(&["-r", &pings.to_string(), "-i", "0.1", "PING"]),
    );
    std::thread::sleep(Duration::from_millis(500));
    let reply = scene.run(
        "redis-cli-bgsave",
        &cli(&["BGSAVE"]),
        Duration::from_secs(20),
    );
    if !reply.contains("Background saving started") {
        scene.fail(&format!("BGSAVE: {reply:?}"));
    }
    let deadline = Instant::now() + Duration::from_secs(20);
    let after = loop {
        scene.expect_running(server, "during BGSAVE");
        let now = lastsave(&mut scene);
        if now != before {
            break now;
        }
        if Instant::now() > deadline {
            scene.fail(&format!("LASTSAVE still {before} 20 s after BGSAVE"));
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    let info = scene.run(
        "redis-cli-info",
        &cli(&["INFO", "persistence"]),
        Duration::from_secs(20),
    );
    if !info.contains("rdb_last_bgsave_status:ok") {
        scene.fail(&format!("BGSAVE did not succeed:\n{info}"));
    }
    let rdb = fs::metadata(scene.path("dump.rdb")).map_or(0, |m| m.len());
    if rdb < value.len() as u64 {
        scene.fail(&format!(
            "dump.rdb has {rdb} bytes, less than the 100 KB value"
        ));
    }
    scene.expect_exit_0(pinger, Duration::from_secs(30));
    let pongs = scene.net.log(pinger).matches("PONG").count();
    if pongs != pings {
        scene.fail(&format!(
            "the connected client got {pongs} PONGs of {pings} across BGSAVE"
        ));
    }
    get_value(&mut scene, "redis-cli-get-after-bgsave");
    let stopped = scene.stop(server, "TERM");
    let mut rates = String::new();
    for r in plain_rates.iter().chain(&pipelined_rates) {
        let _ = write!(rates, "; {}", r.split(", p50").next().unwrap_or(r));
    }
    eprintln!(
        "{test}: 2 x 3 x 20000 benchmark requests{rates}; 100 KB value set and read twice; \
         BGSAVE {}→{after} ({rdb} bytes) with {pongs} PINGs; SIGTERM stop in {:.2} s; {:.1} s",
        before,
        stopped.as_secs_f64(),
        scene.seconds()
    );
}
