//! Pieces the benchmarks share: child processes killed by PID, the benchmark's network
//! namespace with its TAP (and veth pairs), `/proc` CPU accounting, building, installing
//! Debian packages, and table formatting.

use crate::family::Families;
use crate::sys::{self, Signal};
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant, SystemTime};

pub(crate) type Result<T> = std::result::Result<T, String>;

/// How long each load runs and how often: flags every load-driven benchmark takes.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct LoadArgs {
    /// Seconds of load per run.
    #[arg(long, default_value_t = 5)]
    pub duration: u64,
    /// Runs per case and server; the table shows the median (an odd count gives a real
    /// middle run).
    #[arg(long, default_value_t = 3)]
    pub rounds: usize,
    /// The shortest run that still measures every server and case: one round of 2 s
    /// each (`bench ws`: 4 s); leaves the docs alone (implies --no-docs) and writes the
    /// charts under the target directory.
    #[arg(long)]
    pub quick: bool,
}

/// Seconds of load per run with `--quick`. The clients' clocks include opening their
/// connections, which on a busy machine can take most of a second (`bench ws` takes
/// longer: [`crate::bench_echo`]'s WebSocket suite).
pub(crate) const QUICK_DURATION: u64 = 2;

impl LoadArgs {
    /// With `--quick`: one round of `seconds`, and `host` told to leave the docs alone.
    pub(crate) fn apply_quick(&mut self, host: &mut HostArgs, seconds: u64) {
        if self.quick {
            self.duration = seconds;
            self.rounds = 1;
            host.no_docs = true;
        }
    }
}

/// Flags every scripted benchmark with an AF_XDP row takes.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct RunArgs {
    #[command(flatten)]
    pub load: LoadArgs,
    /// Leave out Rusty on AF_XDP (its veth pair and its row).
    #[arg(long)]
    pub no_xdp: bool,
    /// The address families to measure, side by side in one run: every server over
    /// IPv4, over IPv6, or both (nginx over IPv4 only).
    #[arg(long, value_enum, default_value_t = Families::Both)]
    pub family: Families,
    #[command(flatten)]
    pub host: HostArgs,
}

impl RunArgs {
    /// These flags with `--quick` applied ([`LoadArgs::apply_quick`]), `seconds` per
    /// run.
    pub(crate) fn effective(&self, seconds: u64) -> RunArgs {
        let mut r = self.clone();
        r.load.apply_quick(&mut r.host, seconds);
        r
    }
}

/// Where a benchmark runs and what it leaves behind: flags every scripted benchmark
/// takes, load-driven (`RunArgs`) or not.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct HostArgs {
    /// Pass --spin-us to Rusty's servers (default: the binaries' own, 200 µs).
    #[arg(long, value_name = "MICROSECONDS")]
    pub spin_us: Option<u64>,
    /// Core for the servers.
    #[arg(long, default_value_t = 0)]
    pub server_cpu: usize,
    /// Core for the client (the load generator, or the Linux peer).
    #[arg(long, default_value_t = 1)]
    pub client_cpu: usize,
    /// Print the table only; leave docs/benchmarks.md alone (`--no-readme` is an old
    /// name for it).
    #[arg(long = "no-docs", alias = "no-readme")]
    pub no_docs: bool,
    /// Use the release binaries already built.
    #[arg(long)]
    pub no_build: bool,
    /// Keep the servers' and clients' logs (and their per-worker counters) after a
    /// successful run too; the path is printed.
    #[arg(long)]
    pub keep_logs: bool,
}

impl HostArgs {
    /// How a results page names the servers' spin setting: `--spin-us N` when given,
    /// else `default`.
    pub(crate) fn spin(&self, default: &str) -> String {
        self.spin_us
            .map_or(default.to_string(), |us| format!("`--spin-us {us}`"))
    }

    /// [`prepare`] for these flags and `packages`.
    pub(crate) fn prepare(
        &self,
        what: &str,
        packages: &[&str],
    ) -> Result<(Arc<AtomicBool>, PathBuf)> {
        prepare(
            what,
            packages,
            (self.server_cpu, self.client_cpu),
            self.no_build,
        )
    }
}

/// What every benchmark does before its first run: check that it runs as root on two
/// usable cores (`cpus`: server, client), catch SIGINT/SIGTERM, and (unless `no_build`)
/// build `packages` in release. `what` names the command for messages. Returns the
/// interrupt flag and the workspace root.
pub(crate) fn prepare(
    what: &str,
    packages: &[&str],
    cpus: (usize, usize),
    no_build: bool,
) -> Result<(Arc<AtomicBool>, PathBuf)> {
    require_root(what)?;
    check_cpus(cpus.0, cpus.1)?;
    let interrupted = interrupt_flag()?;
    let root = workspace_root();
    if !no_build {
        build(&root, packages)?;
    }
    Ok((interrupted, root))
}

/// Fails unless running as root; `what` names the command for the message.
pub(crate) fn require_root(what: &str) -> Result<()> {
    if sys::euid() != 0 {
        return Err(format!(
            "`cargo xtask {what}` must run as root: it creates a network namespace and a \
             TAP device (try `sudo -E cargo xtask {what}`)"
        ));
    }
    Ok(())
}

/// Checks that the two cores differ and are both in this process's allowed set.
pub(crate) fn check_cpus(server: usize, client: usize) -> Result<()> {
    if server == client {
        return Err("--server-cpu and --client-cpu must differ".into());
    }
    let allowed = allowed_cpus()?;
    for cpu in [server, client] {
        if !allowed.contains(&cpu) {
            return Err(format!(
                "CPU {cpu} is not in this process's allowed set {allowed:?}; pick others \
                 with --server-cpu/--client-cpu"
            ));
        }
    }
    Ok(())
}

/// A flag raised by SIGINT/SIGTERM, so that a run stops and cleans up.
pub(crate) fn interrupt_flag() -> Result<Arc<AtomicBool>> {
    let interrupted = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(sig, Arc::clone(&interrupted))
            .map_err(|e| format!("installing a signal handler: {e}"))?;
    }
    Ok(interrupted)
}

pub(crate) fn check_interrupted(interrupted: &AtomicBool) -> Result<()> {
    if interrupted.load(Ordering::Relaxed) {
        Err("interrupted; cleaning up".into())
    } else {
        Ok(())
    }
}

/// A child process, killed by PID and reaped when dropped.
pub(crate) struct Proc {
    name: &'static str,
    child: Child,
    done: Option<ExitStatus>,
}

impl Proc {
    /// Starts `cmd` with stdin from /dev/null and stdout and stderr into `log`.
    pub(crate) fn spawn(name: &'static str, cmd: Command, log: &Path) -> Result<Proc> {
        Proc::spawn_with_input(name, cmd, Stdio::null(), log)
    }

    /// [`Proc::spawn`] with stdin from the file `input`.
    pub(crate) fn spawn_reading(
        name: &'static str,
        cmd: Command,
        input: &Path,
        log: &Path,
    ) -> Result<Proc> {
        let file =
            fs::File::open(input).map_err(|e| format!("opening {}: {e}", input.display()))?;
        Proc::spawn_with_input(name, cmd, Stdio::from(file), log)
    }

    fn spawn_with_input(
        name: &'static str,
        mut cmd: Command,
        stdin: Stdio,
        log: &Path,
    ) -> Result<Proc> {
        let file = fs::File::create(log).map_err(|e| format!("creating {}: {e}", log.display()))?;
        let err = file
            .try_clone()
            .map_err(|e| format!("duplicating a file handle: {e}"))?;
        let child = cmd
            .stdin(stdin)
            .stdout(file)
            .stderr(err)
            .spawn()
            .map_err(|e| format!("starting {name} ({cmd:?}): {e}"))?;
        Ok(Proc {
            name,
            child,
            done: None,
        })
    }

    /// `ip netns exec` and `taskset` exec the program in place, so this is its PID.
    pub(crate) fn pid(&self) -> i32 {
        self.child.id() as i32
    }

    pub(crate) fn try_status(&mut self) -> Result<Option<ExitStatus>> {
        if self.done.is_none() {
            self.done = self
                .child
                .try_wait()
                .map_err(|e| format!("waiting for {}: {e}", self.name))?;
        }
        Ok(self.done)
    }

    /// Its exit status, or `None` when it ran past `limit` (it is then killed).
    pub(crate) fn wait_for(
        &mut self,
        limit: Duration,
        interrupted: &AtomicBool,
    ) -> Result<Option<ExitStatus>> {
        let deadline = Instant::now() + limit;
        loop {
            if let Some(st) = self.try_status()? {
                return Ok(Some(st));
            }
            check_interrupted(interrupted)?;
            if Instant::now() > deadline {
                self.kill(Signal::KILL);
                return Ok(None);
            }
            thread::sleep(Duration::from_millis(10));
        }
    }

    pub(crate) fn kill(&mut self, sig: Signal) {
        if matches!(self.try_status(), Ok(None)) {
            // The PID is our unreaped child, so it cannot have been reused.
            sys::kill(self.pid(), sig);
        }
    }

    /// `sig` (SIGINT or SIGTERM), then SIGKILL if it is still there after `grace`.
    pub(crate) fn stop_with(&mut self, sig: Signal, grace: Duration) {
        self.kill(sig);
        let deadline = Instant::now() + grace;
        while matches!(self.try_status(), Ok(None)) && Instant::now() < deadline {
            thread::sleep(Duration::from_millis(10));
        }
        self.kill(Signal::KILL);
        if self.done.is_none() {
            self.done = self.child.wait().ok();
        }
    }

    /// SIGINT, then SIGKILL if it is still there after `grace`.
    pub(crate) fn stop(&mut self, grace: Duration) {
        self.stop_with(Signal::INT, grace);
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        if self.done.is_none() {
            self.kill(Signal::KILL);
            self.done = self.child.wait().ok();
        }
    }
}

/// Waits until `ready(pid)` says the server accepts (polled every 20 ms for up to
/// `limit`), then `settle` more for its workers to reach their loops (pinning, listener
/// setup). Fails when the server exits first, time runs out or the run is interrupted;
/// `what` names the server in messages, with the tail of its `log`.
pub(crate) fn wait_ready(
    server: &mut Proc,
    what: &str,
    log: &Path,
    (limit, settle): (Duration, Duration),
    interrupted: &AtomicBool,
    mut ready: impl FnMut(i32) -> Result<bool>,
) -> Result<()> {
    let deadline = Instant::now() + limit;
    loop {
        check_interrupted(interrupted)?;
        if let Some(st) = server.try_status()? {
            return Err(format!("{what} exited at start ({st}):\n{}", tail(log, 20)));
        }
        if ready(server.pid())? {
            thread::sleep(settle);
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err(format!(
                "{what} was not ready after {} s:\n{}",
                limit.as_secs(),
                tail(log, 20)
            ));
        }
        thread::sleep(Duration::from_millis(20));
    }
}

/// A temporary directory, removed with its contents when dropped.
pub(crate) struct TempDir(pub PathBuf);

impl TempDir {
    pub(crate) fn new(name: &str) -> Result<TempDir> {
        let path = std::env::temp_dir().join(name);
        let _ = fs::remove_dir_all(&path);
        fs::create_dir_all(&path).map_err(|e| format!("creating {}: {e}", path.display()))?;
        Ok(TempDir(path))
    }

    pub(crate) fn path(&self) -> &Path {
        &self.0
    }

    /// Leaves the directory in place (for its logs) and says where it is.
    pub(crate) fn keep(self) -> PathBuf {
        let p = self.0.clone();
        std::mem::forget(self);
        p
    }

    /// The runs failed with `e`: keep the directory and say where its logs are.
    pub(crate) fn keep_for(self, e: String) -> String {
        format!("{e}\n(logs kept in {})", self.keep().join("logs").display())
    }

    /// After a benchmark's runs (`result`): on failure the directory is kept and the
    /// error says where its logs are; on success it is removed, or kept with
    /// `keep_logs` and where said on stderr (`what` names the benchmark).
    pub(crate) fn finish(self, result: Result<()>, keep_logs: bool, what: &str) -> Result<()> {
        if let Err(e) = result {
            return Err(self.keep_for(e));
        }
        if keep_logs {
            eprintln!(
                "{what}: logs kept in {}",
                self.keep().join("logs").display()
            );
        }
        Ok(())
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

/// `cargo build --release -p PACKAGE…` in the workspace.
pub(crate) fn build(root: &Path, packages: &[&str]) -> Result<()> {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let args: Vec<&str> = packages.iter().flat_map(|p| ["-p", p]).collect();
    let status = Command::new(cargo)
        .args(["build", "--release"])
        .args(&args)
        .current_dir(root)
        .status()
        .map_err(|e| format!("running cargo: {e}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!(
            "`cargo build --release {}` failed ({status})",
            args.join(" ")
        ))
    }
}

/// `apt-get update`, then `apt-get install` of each of `packages` (Debian's) in turn;
/// what became of each, in order. Fails only when interrupted.
pub(crate) fn apt_install(
    packages: &[&str],
    log: &Path,
    interrupted: &AtomicBool,
) -> Result<Vec<Result<()>>> {
    let updated = apt_get(&["update"], log, interrupted);
    let mut done = Vec::new();
    for pkg in packages {
        check_interrupted(interrupted)?;
        done.push(updated.clone().and_then(|()| {
            apt_get(
                &["install", "-y", "--no-install-recommends", pkg],
                log,
                interrupted,
            )
        }));
    }
    check_interrupted(interrupted)?;
    Ok(done)
}

/// `apt-get ARGS` as root, non-interactive, within 10 minutes.
fn apt_get(args: &[&str], log: &Path, interrupted: &AtomicBool) -> Result<()> {
    let mut cmd = Command::new("apt-get");
    cmd.args(args).env("DEBIAN_FRONTEND", "noninteractive");
    let mut p = Proc::spawn("apt-get", cmd, log)?;
    match p.wait_for(Duration::from_secs(600), interrupted)? {
        Some(st) if st.success() => Ok(()),
        Some(st) => Err(format!(
            "`apt-get {}` failed ({st}):\n{}",
            args.join(" "),
            tail(log, 10)
        )),
        None => Err(format!("`apt-get {}` took over 10 minutes", args.join(" "))),
    }
}

pub(crate) fn workspace_root() -> PathBuf {
    let manifest = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    manifest
        .parent()
        .map_or(manifest.clone(), Path::to_path_buf)
}

/// The target directory in effect: `CARGO_TARGET_DIR` (made absolute, since the
/// cargo commands run from the workspace root) or `target/` at the root.
pub(crate) fn target_dir(root: &Path) -> Result<PathBuf> {
    match std::env::var_os("CARGO_TARGET_DIR").map(PathBuf::from) {
        Some(d) if d.is_absolute() => Ok(d),
        Some(d) => std::env::current_dir()
            .map(|cwd| cwd.join(d))
            .map_err(|e| format!("finding the current directory: {e}")),
        None => Ok(root.join("target")),
    }
}

/// The release binary `name` of the workspace (honouring `CARGO_TARGET_DIR`).
pub(crate) fn release_bin(root: &Path, name: &str) -> Result<PathBuf> {
    let b = target_dir(root)?.join("release").join(name);
    if b.is_file() {
        Ok(b)
    } else {
        Err(format!("{} is missing; build it first", b.display()))
    }
}

/// The first `name` on `PATH` (plus /usr/sbin and /sbin, which a non-login root shell
/// may lack).
pub(crate) fn find_program(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(["/usr/local/sbin", "/usr/sbin", "/sbin"].map(PathBuf::from))
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

/// Other work on the machine skews every number (machine CPU most of all): say so when
/// the load is visible. `what` names the benchmark.
pub(crate) fn warn_if_busy(what: &str) {
    let load = fs::read_to_string("/proc/loadavg").unwrap_or_default();
    if let Some(one) = load
        .split_whitespace()
        .next()
        .and_then(|l| l.parse::<f64>().ok())
    {
        if one > 0.5 {
            eprintln!(
                "{what}: warning: the 1-minute load average is {one:.2}; other processes \
                 will skew the results"
            );
        }
    }
}

pub(crate) fn allowed_cpus() -> Result<Vec<usize>> {
    sys::allowed_cpus().map_err(|e| format!("sched_getaffinity: {e}"))
}

/// utime + stime of process `pid` (all its threads), in seconds.
pub(crate) fn process_cpu_seconds(pid: i32) -> Result<f64> {
    let path = format!("/proc/{pid}/stat");
    let stat = fs::read_to_string(&path).map_err(|e| format!("reading {path}: {e}"))?;
    let ticks = parse_stat_ticks(&stat).ok_or_else(|| format!("unexpected {path}: {stat}"))?;
    let hz = sys::clock_ticks_per_second();
    Ok(ticks as f64 / hz.max(1) as f64)
}

/// CPU time the whole machine has spent busy (every CPU, all but idle and iowait), in
/// seconds, from `/proc/stat`.
pub(crate) fn machine_cpu_seconds() -> Result<f64> {
    let stat = fs::read_to_string("/proc/stat").map_err(|e| format!("reading /proc/stat: {e}"))?;
    let ticks = parse_busy_ticks(&stat).ok_or("unexpected /proc/stat".to_string())?;
    let hz = sys::clock_ticks_per_second();
    Ok(ticks as f64 / hz.max(1) as f64)
}

/// CPU time in seconds: a server's processes' (utime + stime) and the whole machine's
/// ([`machine_cpu_seconds`]). Read one before and one after a client's run; their
/// difference is what the run cost.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(crate) struct CpuTimes {
    pub server_s: f64,
    pub machine_s: f64,
}

impl CpuTimes {
    /// Now, for the server made of processes `pids`.
    pub(crate) fn read(pids: &[i32]) -> Result<CpuTimes> {
        Ok(CpuTimes {
            server_s: pids
                .iter()
                .copied()
                .map(process_cpu_seconds)
                .sum::<Result<f64>>()?,
            machine_s: machine_cpu_seconds()?,
        })
    }

    /// What was spent from `before` to `self`.
    pub(crate) fn since(self, before: CpuTimes) -> CpuTimes {
        CpuTimes {
            server_s: self.server_s - before.server_s,
            machine_s: self.machine_s - before.machine_s,
        }
    }

    /// Server CPU microseconds per unit of work (request, message); NaN for none.
    pub(crate) fn server_us_per(&self, units: u64) -> f64 {
        us_per(self.server_s, units)
    }

    /// Machine CPU microseconds per unit of work; NaN for none.
    pub(crate) fn machine_us_per(&self, units: u64) -> f64 {
        us_per(self.machine_s, units)
    }
}

fn us_per(seconds: f64, units: u64) -> f64 {
    if units == 0 {
        f64::NAN
    } else {
        seconds * 1e6 / units as f64
    }
}

/// Busy clock ticks of all CPUs from the text of `/proc/stat`: user, nice, system, irq,
/// softirq and steal of the `cpu` line (guest time is already inside user and nice).
pub(crate) fn parse_busy_ticks(stat: &str) -> Option<u64> {
    let line = stat.lines().find(|l| l.starts_with("cpu "))?;
    let f: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .map(|v| v.parse().ok())
        .collect::<Option<_>>()?;
    let at = |i: usize| f.get(i).copied().unwrap_or(0);
    (f.len() >= 4).then(|| at(0) + at(1) + at(2) + at(5) + at(6) + at(7))
}

/// utime + stime in clock ticks from the text of `/proc/PID/stat`.
pub(crate) fn parse_stat_ticks(stat: &str) -> Option<u64> {
    // The command name (field 2) is in parentheses and may hold spaces; fields after it
    // start at 3 (state), so utime (14) and stime (15) are the 12th and 13th.
    let rest = &stat[stat.rfind(')')? + 1..];
    let mut f = rest.split_whitespace().skip(11);
    let utime: u64 = f.next()?.parse().ok()?;
    let stime: u64 = f.next()?.parse().ok()?;
    Some(utime + stime)
}

/// The parent PID from the text of `/proc/PID/stat`.
pub(crate) fn parse_stat_ppid(stat: &str) -> Option<i32> {
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(1)?.parse().ok()
}

/// PIDs of the live children of `pid` (from the parent field of every `/proc/N/stat`).
pub(crate) fn children_of(pid: i32) -> Vec<i32> {
    let Ok(dir) = fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter(|&n| {
            fs::read_to_string(format!("/proc/{n}/stat"))
                .ok()
                .and_then(|s| parse_stat_ppid(&s))
                == Some(pid)
        })
        .collect()
}

/// Whether process `pid`'s network namespace has a TCP socket listening on `port`.
pub(crate) fn listening(pid: i32, port: u16) -> bool {
    let want = format!(":{port:04X}");
    ["tcp", "tcp6"].iter().any(|f| {
        fs::read_to_string(format!("/proc/{pid}/net/{f}")).is_ok_and(|t| {
            t.lines().skip(1).any(|l| {
                let mut cols = l.split_whitespace();
                let local = cols.nth(1).unwrap_or("");
                let state = cols.nth(1).unwrap_or("");
                local.ends_with(&want) && state == "0A"
            })
        })
    })
}

/// What a failed run shows: the client's whole output and the end of the server's log.
pub(crate) fn explain_run(client: &str, out: &str, server_log: &Path) -> String {
    format!(
        "\n--- {client} output ---\n{}\n--- server log (tail) ---\n{}",
        out.trim_end(),
        tail(server_log, 20)
    )
}

/// Fails unless the client finished within `limit` (`status` is `None` when it was
/// killed for running longer) and exited 0, with the server still up. `what` names the
/// case and server; `explain` adds the logs to the message.
pub(crate) fn check_run(
    client: &str,
    what: &str,
    status: Option<ExitStatus>,
    limit: Duration,
    server_alive: bool,
    explain: impl Fn() -> String,
) -> Result<()> {
    let status = status.ok_or_else(|| {
        format!(
            "{client} ({what}) did not finish within {} s{}",
            limit.as_secs(),
            explain()
        )
    })?;
    if !status.success() || !server_alive {
        return Err(format!(
            "{what} failed ({client} {status}, server {}){}",
            if server_alive {
                "alive"
            } else {
                "exited early"
            },
            explain()
        ));
    }
    Ok(())
}

pub(crate) fn tail(path: &Path, lines: usize) -> String {
    let text = fs::read_to_string(path).unwrap_or_default();
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

/// `items` rotated left by `by` (modulo their count): the order in which a round runs
/// its servers, so that each goes first in turn.
pub(crate) fn rotated<T: Clone>(items: &[T], by: usize) -> Vec<T> {
    let mut v = items.to_vec();
    if !v.is_empty() {
        v.rotate_left(by % items.len());
    }
    v
}

pub(crate) fn median(mut v: Vec<f64>) -> f64 {
    v.retain(|x| !x.is_nan());
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(f64::total_cmp);
    let m = v.len() / 2;
    if v.len() % 2 == 1 {
        v[m]
    } else {
        (v[m - 1] + v[m]) / 2.0
    }
}

/// Median of `f` over the runs of `key` (a server, backend or stack) among `runs`.
pub(crate) fn median_by<K: PartialEq, S>(runs: &[(K, S)], key: K, f: impl Fn(&S) -> f64) -> f64 {
    median(
        runs.iter()
            .filter(|(k, _)| *k == key)
            .map(|(_, s)| f(s))
            .collect(),
    )
}

pub(crate) fn thousands(x: f64) -> String {
    if !x.is_finite() {
        return "—".into();
    }
    let digits = format!("{:.0}", x.abs());
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    if x < 0.0 {
        out.insert(0, '-');
    }
    out
}

/// Where a table of results comes from: "`cargo xtask …` — DATE, MACHINE".
pub(crate) fn provenance() -> String {
    format!("`{}` — {}, {}", command_line(), utc_date(), machine())
}

/// `cargo xtask ARGS…` as this process was started.
fn command_line() -> String {
    std::iter::once("cargo xtask".to_string())
        .chain(std::env::args().skip(1))
        .collect::<Vec<_>>()
        .join(" ")
}

/// "N CPUs (MODEL), Linux RELEASE".
fn machine() -> String {
    let kernel = fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    let model = fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|c| {
            c.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split(':').nth(1))
                .map(|m| m.trim().to_string())
        })
        .unwrap_or_else(|| "unknown CPU".into());
    let nproc = thread::available_parallelism().map_or(0, |n| n.get());
    format!("{nproc} CPUs ({model}), Linux {}", kernel.trim())
}

/// Today's date in UTC as YYYY-MM-DD.
fn utc_date() -> String {
    let secs = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let (y, m, d) = civil_from_days((secs / 86_400) as i64);
    format!("{y:04}-{m:02}-{d:02}")
}

/// Proleptic Gregorian date of `days` since 1970-01-01 (Howard Hinnant's algorithm).
pub(crate) fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

/// The page the benchmarks write their tables into, relative to the workspace root.
pub(crate) const BENCHMARKS_PAGE: &str = "docs/benchmarks.md";

/// Writes `body` into the Markdown page `page` (relative to the workspace root `root`)
/// between the marker lines `start` and `end`; returns the page's path.
pub(crate) fn write_results(
    root: &Path,
    page: &str,
    start: &str,
    end: &str,
    body: &str,
) -> Result<PathBuf> {
    let path = root.join(page);
    let text = fs::read_to_string(&path).map_err(|e| format!("reading {}: {e}", path.display()))?;
    fs::write(&path, crate::results::put_block(&text, start, end, body))
        .map_err(|e| format!("writing {}: {e}", path.display()))?;
    Ok(path)
}

/// `args` (a program name first) parsed as the flags `T` stands for, as a subcommand
/// parses them.
#[cfg(test)]
pub(crate) fn parse_flags<T: clap::Args>(args: &[&str]) -> std::result::Result<T, String> {
    #[derive(clap::Parser)]
    struct Cli<T: clap::Args> {
        #[command(flatten)]
        flags: T,
    }
    <Cli<T> as clap::Parser>::try_parse_from(args)
        .map(|c| c.flags)
        .map_err(|e| e.to_string())
}

mod netns;
pub(crate) use netns::{exec_pinned, ip, Namespace, Netns};

#[cfg(test)]
mod tests;
