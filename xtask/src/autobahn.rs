//! `cargo xtask autobahn`: the Autobahn TestSuite's fuzzing client (the `wstest` tool
//! of the `autobahntestsuite` package) against `ws-echo`, on the kernel backend and on
//! Rusty's stack behind a TAP.
//!
//! Autobahn runs on Python 2.7 only. The command looks for an interpreter (`--python`,
//! then `python2.7` on `PATH`, then pyenv's `~/.pyenv/versions/2.7*`), makes a
//! virtualenv under the target directory (`autobahn/venv`) the first time and installs
//! the pinned `autobahntestsuite` release into it from PyPI.
//!
//! Backends:
//! - kernel: `ws-echo <port>` on the kernel's sockets, the fuzzing client connects to
//!   127.0.0.1 (no root needed). The port is one the kernel has free when the run
//!   starts, not a fixed one: `ws-echo` listens with `SO_REUSEPORT`, so two runs on one
//!   port (two checkouts, CI beside a developer) would share each other's connections
//!   without an error, one's ws:// client reaching the other's wss:// server;
//! - TAP (root): a private namespace `rusty-ab-<pid>` holding a TAP `rbwstap<pid>` whose
//!   host side is 10.79.4.1/24; `ws-echo 9001 1 tap:rbwstap<pid> 10.79.4.2/24 1` runs in
//!   it and so does the fuzzing client, which connects to 10.79.4.2.
//!
//! Cases: sections 1–7 and 9–10 (framing, pings, reserved bits, opcodes, fragmentation,
//! UTF-8, close handling, limits, misc); with `--deflate` also 12 and 13
//! (permessage-deflate, RFC 7692), and `ws-echo` runs with `--deflate`. With `--tls`
//! the same cases run over wss://: the run makes a test authority and a certificate it
//! signs (for [`TLS_NAME`] and the server's address) under the target directory,
//! `ws-echo` gets `--tls-cert`/`--tls-key`, and the fuzzing client (Twisted's TLS over
//! pyOpenSSL) connects to `wss://…` with SNI [`TLS_NAME`], verifying the certificate
//! against that authority (`SSL_CERT_FILE`). `--quick`
//! leaves out section 9 (large messages, most of the time) and the larger half of 12.
//! A case passes when its behaviour and its closing behaviour are each OK, NON-STRICT
//! or INFORMATIONAL; the command fails if any case does not. Reports (HTML and JSON)
//! stay in the target directory (`autobahn/reports/<backend>`, `<backend>-wss` with
//! `--tls`), and unless `--no-docs` (old name: `--no-readme`) the per-section summary
//! goes into `docs/websocket.md` (a block of its own for `--deflate` runs, for `--tls`
//! runs and for both).
//!
//! Processes started here are stopped by PID; the namespace and TAP are deleted on
//! every exit path.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use crate::common::{
    build, check_interrupted, find_program, interrupt_flag, listening, provenance, release_bin,
    require_root, tail, target_dir, workspace_root, write_results, Netns, Proc, Result,
};
use crate::sys;

/// The release the summary in `docs/websocket.md` was made with.
const AUTOBAHN_PACKAGE: &str = "autobahntestsuite==25.10.1";
/// What the fuzzing client's TLS needs (Twisted's `ssl` over pyOpenSSL, and
/// service_identity to check the server's name), pinned to the releases that
/// [`AUTOBAHN_PACKAGE`] resolves to on Python 2.7 beside its Twisted 19.10 (the ones
/// the summary was made with). That package normally pulls them in already; `--tls`
/// installs them only when the virtualenv cannot import them.
const TLS_PACKAGES: [&str; 3] = [
    "pyOpenSSL==19.1.0",
    "service_identity==18.1.0",
    "cryptography==3.3.2",
];
/// The name `ws-echo`'s certificate is for (besides its address) and that the fuzzing
/// client sends as SNI and verifies with `--tls`.
const TLS_NAME: &str = "autobahn.rusty.test";
/// The port on the TAP backend's private namespace.
const PORT: u16 = 9001;
const HOST_CIDR: &str = "10.79.4.1/24";
const STACK_IP: &str = "10.79.4.2";
const PREFIX: u8 = 24;
/// Autobahn's largest messages are 16 MiB (sections 9.1 and 9.2).
const MAX_MESSAGE: usize = 16 << 20;
/// The page the summary goes into, relative to the workspace root.
const PAGE: &str = "docs/websocket.md";
/// The page's blocks, by `[tls][deflate]`: plain ws:// without and with
/// permessage-deflate, then the same over wss://.
const BLOCKS: [[(&str, &str); 2]; 2] = [
    [
        ("<!-- autobahn:start -->", "<!-- autobahn:end -->"),
        (
            "<!-- autobahn-deflate:start -->",
            "<!-- autobahn-deflate:end -->",
        ),
    ],
    [
        ("<!-- autobahn-wss:start -->", "<!-- autobahn-wss:end -->"),
        (
            "<!-- autobahn-wss-deflate:start -->",
            "<!-- autobahn-wss-deflate:end -->",
        ),
    ],
];
/// What a whole run may take before it is called hung.
const RUN_LIMIT: Duration = Duration::from_secs(45 * 60);

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Which {
    /// `ws-echo` on the kernel's sockets.
    Kernel,
    /// `ws-echo` on Rusty's stack behind a TAP (needs root).
    Tap,
    /// Both (TAP only when running as root).
    All,
}

#[derive(Debug, Clone, clap::Args)]
pub(crate) struct Options {
    /// Which server(s) to test.
    #[arg(long, value_enum, default_value = "all")]
    backend: Which,
    /// Turn permessage-deflate on in ws-echo and add sections 12 and 13.
    #[arg(long)]
    deflate: bool,
    /// Run the cases over wss://: ws-echo with a certificate made for the run, the
    /// fuzzing client over TLS (installs pyOpenSSL into the virtualenv if missing).
    #[arg(long)]
    tls: bool,
    /// Leave out section 9 (large messages) and cases 12.3 to 12.5 (the larger
    /// compressed ones): a few minutes instead of many.
    #[arg(long)]
    quick: bool,
    /// Case patterns instead of the default sections (comma-separated, e.g.
    /// `1.*,5.19`).
    #[arg(long, value_delimiter = ',')]
    cases: Vec<String>,
    /// Python 2.7 interpreter to make the virtualenv with.
    #[arg(long)]
    python: Option<PathBuf>,
    /// Print the summary only; leave docs/websocket.md alone (`--no-readme` is an old
    /// name for it).
    #[arg(long = "no-docs", alias = "no-readme")]
    no_docs: bool,
    /// Use the release ws-echo already built.
    #[arg(long)]
    no_build: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Backend {
    Kernel,
    Tap,
}

impl Backend {
    fn label(self) -> &'static str {
        match self {
            Backend::Kernel => "kernel sockets",
            Backend::Tap => "Rusty on TAP",
        }
    }

    fn short(self) -> &'static str {
        match self {
            Backend::Kernel => "kernel",
            Backend::Tap => "tap",
        }
    }
}

pub(crate) fn run(opts: &Options) -> Result<()> {
    let interrupted = interrupt_flag()?;
    let root = workspace_root();
    let root_user = sys::euid() == 0;
    let backends = match (opts.backend, root_user) {
        (Which::Kernel, _) => vec![Backend::Kernel],
        (Which::Tap, _) => {
            require_root("autobahn --backend tap")?;
            vec![Backend::Tap]
        }
        (Which::All, true) => vec![Backend::Kernel, Backend::Tap],
        (Which::All, false) => {
            eprintln!("autobahn: not root, so only the kernel backend (TAP needs root)");
            vec![Backend::Kernel]
        }
    };
    if !opts.no_build {
        build(&root, &["rusty-websocket"])?;
    }
    let ws_echo = release_bin(&root, "ws-echo")?;
    let work = target_dir(&root)?.join("autobahn");
    let wstest = ensure_wstest(&work, opts.python.as_deref(), opts.tls, &interrupted)?;
    let cases = case_patterns(opts);
    let pki = if opts.tls {
        let dir = work.join("tls");
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
        Some(rusty_testnet::make_pki(
            &dir,
            &[TLS_NAME, "127.0.0.1", STACK_IP],
        ))
    } else {
        None
    };

    let mut summaries = Vec::new();
    for backend in backends {
        check_interrupted(&interrupted)?;
        let reports =
            work.join("reports")
                .join(format!("{}{}", backend.short(), scheme_suffix(opts.tls)));
        let _ = fs::remove_dir_all(&reports);
        fs::create_dir_all(&reports).map_err(|e| format!("creating {}: {e}", reports.display()))?;
        let started = Instant::now();
        let results = run_backend(
            backend,
            opts,
            &Tools {
                ws_echo: &ws_echo,
                wstest: &wstest,
                pki: pki.as_ref(),
            },
            &cases,
            &reports,
            &interrupted,
        )?;
        let summary = Summary::of(backend, &results, started.elapsed());
        eprintln!(
            "autobahn: {}{}: {} cases in {:.0} s, {} not passing; reports in {}",
            backend.label(),
            if opts.tls { " (wss://)" } else { "" },
            summary.total,
            summary.elapsed.as_secs_f64(),
            summary.failures.len(),
            reports.join("index.html").display()
        );
        summaries.push(summary);
    }

    let text = render(&summaries);
    println!("{text}");
    let failed: Vec<String> = summaries
        .iter()
        .flat_map(|s| {
            s.failures
                .iter()
                .map(move |f| format!("{}: {f}", s.backend.label()))
        })
        .collect();
    if !opts.no_docs {
        let mut flags = Vec::new();
        if opts.deflate {
            flags.push("`--deflate`");
        }
        if opts.tls {
            flags.push("`--tls-cert`/`--tls-key` (an ECDSA P-256 certificate made for the run), the client verifying it");
        }
        let body = format!(
            "{}\n\nMeasured with {}; `ws-echo` with `--max-message {MAX_MESSAGE}`{}.\n",
            text.trim_end(),
            provenance(),
            flags
                .iter()
                .map(|f| format!(" and {f}"))
                .collect::<String>()
        );
        let (start, end) = BLOCKS[usize::from(opts.tls)][usize::from(opts.deflate)];
        let path = write_results(&root, PAGE, start, end, &body)?;
        eprintln!("autobahn: summary written to {}", path.display());
    }
    if failed.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "{} case(s) did not pass:\n  {}",
            failed.len(),
            failed.join("\n  ")
        ))
    }
}

struct Tools<'a> {
    ws_echo: &'a Path,
    wstest: &'a Path,
    /// The run's certificates, with `--tls`.
    pki: Option<&'a rusty_testnet::Pki>,
}

/// What the reports' directories and the agents' names end in: `-wss` over TLS.
fn scheme_suffix(tls: bool) -> &'static str {
    if tls {
        "-wss"
    } else {
        ""
    }
}

/// The case patterns of this run.
fn case_patterns(opts: &Options) -> Vec<String> {
    if !opts.cases.is_empty() {
        return opts.cases.clone();
    }
    let mut sections = vec!["1", "2", "3", "4", "5", "6", "7", "10"];
    if !opts.quick {
        sections.push("9");
    }
    let mut cases: Vec<String> = sections.iter().map(|s| format!("{s}.*")).collect();
    if opts.deflate {
        if opts.quick {
            cases.extend(["12.1.*", "12.2.*"].map(String::from));
        } else {
            cases.push("12.*".into());
        }
        cases.push("13.*".into());
    }
    cases
}

/// One backend's run: a fresh server, the fuzzing client, its results by case id.
fn run_backend(
    backend: Backend,
    opts: &Options,
    tools: &Tools<'_>,
    cases: &[String],
    reports: &Path,
    interrupted: &AtomicBool,
) -> Result<BTreeMap<String, CaseResult>> {
    let pid = std::process::id();
    let net = match backend {
        Backend::Tap => Some(Netns::create(
            format!("rusty-ab-{pid}"),
            format!("rbwstap{pid}"),
            HOST_CIDR,
        )?),
        Backend::Kernel => None,
    };
    let in_ns = |program: &Path| -> Command {
        match &net {
            Some(ns) => {
                let mut c = Command::new("ip");
                c.args(["netns", "exec", &ns.name]).arg(program);
                c
            }
            None => Command::new(program),
        }
    };

    let port = match backend {
        Backend::Tap => PORT,
        Backend::Kernel => free_port()?,
    };
    let mut server_cmd = in_ns(tools.ws_echo);
    server_cmd.arg(port.to_string());
    if let Some(ns) = &net {
        server_cmd
            .args(["1", &format!("tap:{}", ns.tap)])
            .arg(format!("{STACK_IP}/{PREFIX}"))
            .arg("1");
    }
    server_cmd
        .arg("--max-message")
        .arg(MAX_MESSAGE.to_string())
        .args(["--grace", "1"]);
    if opts.deflate {
        server_cmd.arg("--deflate");
    }
    if let Some(pki) = tools.pki {
        server_cmd
            .arg("--tls-cert")
            .arg(&pki.chain)
            .arg("--tls-key")
            .arg(&pki.key);
    }
    let server_log = reports.join("ws-echo.log");
    let mut server = Proc::spawn("ws-echo", server_cmd, &server_log)?;
    let what = format!("ws-echo on {}", backend.label());
    let times = (Duration::from_secs(10), Duration::from_millis(200));
    // Ready: a listening socket (kernel), or the TAP's carrier, which comes up once the
    // server has attached a queue.
    crate::common::wait_ready(&mut server, &what, &server_log, times, interrupted, |pid| {
        Ok(match &net {
            None => listening(pid, port),
            Some(ns) => ns.tap_has_carrier(),
        })
    })?;

    let host = match backend {
        Backend::Kernel => "127.0.0.1",
        Backend::Tap => STACK_IP,
    };
    let agent = format!(
        "rusty-ws-echo-{}{}",
        backend.short(),
        scheme_suffix(tools.pki.is_some())
    );
    let url = match tools.pki {
        Some(_) => format!("wss://{host}:{port}"),
        None => format!("ws://{host}:{port}"),
    };
    let sni = tools.pki.map(|_| TLS_NAME);
    let spec = spec_json(reports, &agent, &url, sni, cases);
    let spec_path = reports.join("fuzzingclient.json");
    fs::write(&spec_path, spec).map_err(|e| format!("writing {}: {e}", spec_path.display()))?;
    let mut client_cmd = in_ns(tools.wstest);
    client_cmd
        .args(["-m", "fuzzingclient", "-s"])
        .arg(&spec_path)
        .current_dir(reports);
    if let Some(pki) = tools.pki {
        // Twisted's default trust (OpenSSL's default paths) with only our authority in
        // it; the environment crosses `ip netns exec`.
        client_cmd
            .env("SSL_CERT_FILE", &pki.ca)
            .env_remove("SSL_CERT_DIR");
    }
    let client_log = reports.join("wstest.log");
    let mut client = Proc::spawn("wstest", client_cmd, &client_log)?;
    let status = client.wait_for(RUN_LIMIT, interrupted)?;
    let server_alive = server.try_status()?.is_none();
    server.stop(Duration::from_secs(5));
    drop(net);
    match status {
        None => {
            return Err(format!(
                "wstest ran past {} minutes on {}:\n{}",
                RUN_LIMIT.as_secs() / 60,
                backend.label(),
                tail(&client_log, 20)
            ))
        }
        Some(st) if !st.success() => {
            return Err(format!(
                "wstest failed ({st}) on {}:\n{}",
                backend.label(),
                tail(&client_log, 20)
            ))
        }
        Some(_) => {}
    }
    if !server_alive {
        return Err(format!(
            "ws-echo exited during the run on {}:\n{}",
            backend.label(),
            tail(&server_log, 20)
        ));
    }
    let index = reports.join("index.json");
    let json =
        fs::read_to_string(&index).map_err(|e| format!("reading {}: {e}", index.display()))?;
    parse_index(&json, &agent)
}

/// A TCP port nothing listens on now (the kernel's pick for a listener on all
/// addresses, closed again).
fn free_port() -> Result<u16> {
    let probe = std::net::TcpListener::bind(("0.0.0.0", 0))
        .map_err(|e| format!("finding a free port: {e}"))?;
    let port = probe
        .local_addr()
        .map_err(|e| format!("finding a free port: {e}"))?
        .port();
    Ok(port)
}

/// The fuzzing client's spec file. With `hostname` (wss:// only) the client sends it as
/// SNI and verifies the server's certificate for it against its trust roots; without,
/// it verifies nothing.
fn spec_json(
    outdir: &Path,
    agent: &str,
    url: &str,
    hostname: Option<&str>,
    cases: &[String],
) -> String {
    let cases = serde_json::Value::from(cases.to_vec());
    let mut server = serde_json::json!({"agent": agent, "url": url});
    if let Some(h) = hostname {
        server["hostname"] = h.into();
    }
    serde_json::json!({
        "outdir": outdir.display().to_string(),
        "servers": [server],
        "cases": cases,
        "exclude-cases": [],
        "exclude-agent-cases": {},
    })
    .to_string()
}

/// `wstest` in the virtualenv under `work`, made and filled on first use; with `tls`,
/// also able to speak TLS ([`TLS_PACKAGES`]).
fn ensure_wstest(
    work: &Path,
    python: Option<&Path>,
    tls: bool,
    interrupted: &AtomicBool,
) -> Result<PathBuf> {
    let venv = work.join("venv");
    let wstest = venv.join("bin").join("wstest");
    if !wstest.is_file() {
        make_venv(work, &venv, python, interrupted)?;
    }
    if !wstest.is_file() {
        return Err(format!("{} is missing after the install", wstest.display()));
    }
    if tls && !venv_speaks_tls(&venv) {
        let log = work.join("install.log");
        eprintln!(
            "autobahn: installing {} for --tls (log: {})",
            TLS_PACKAGES.join(" "),
            log.display()
        );
        let mut cmd = Command::new(venv.join("bin").join("pip"));
        cmd.arg("install").args(TLS_PACKAGES);
        install_step(&log, "pip install pyOpenSSL", cmd, interrupted)?;
        if !venv_speaks_tls(&venv) {
            return Err(format!(
                "the virtualenv {} still cannot import OpenSSL and service_identity                  (log: {})",
                venv.display(),
                log.display()
            ));
        }
    }
    Ok(wstest)
}

/// The virtualenv's Python imports what Twisted's TLS client needs.
fn venv_speaks_tls(venv: &Path) -> bool {
    Command::new(venv.join("bin").join("python"))
        .args([
            "-c",
            "import OpenSSL, service_identity; from twisted.internet import ssl; ssl.ClientContextFactory",
        ])
        .output()
        .is_ok_and(|o| o.status.success())
}

/// One install step, its output into `log`, bounded by 10 minutes.
fn install_step(
    log: &Path,
    what: &'static str,
    cmd: Command,
    interrupted: &AtomicBool,
) -> Result<()> {
    let mut p = Proc::spawn(what, cmd, log)?;
    match p.wait_for(Duration::from_secs(600), interrupted)? {
        Some(st) if st.success() => Ok(()),
        Some(st) => Err(format!("{what} failed ({st}):\n{}", tail(log, 15))),
        None => Err(format!("{what} took over 10 minutes")),
    }
}

/// A virtualenv at `venv` with [`AUTOBAHN_PACKAGE`] in it, made with `python` or the
/// Python 2.7 found.
fn make_venv(
    work: &Path,
    venv: &Path,
    python: Option<&Path>,
    interrupted: &AtomicBool,
) -> Result<()> {
    fs::create_dir_all(work).map_err(|e| format!("creating {}: {e}", work.display()))?;
    let python = match python {
        Some(p) if is_python27(p) => p.to_path_buf(),
        Some(p) => return Err(format!("{} is not a working Python 2.7", p.display())),
        None => find_python27().ok_or(
            "the Autobahn TestSuite needs Python 2.7 and none was found: pass --python, or \
             install one (e.g. `pyenv install 2.7.18`)",
        )?,
    };
    let log = work.join("install.log");
    eprintln!(
        "autobahn: making a virtualenv with {} and installing {AUTOBAHN_PACKAGE} (log: {})",
        python.display(),
        log.display()
    );
    let step = |what: &'static str, cmd: Command| install_step(&log, what, cmd, interrupted);
    let has_virtualenv = Command::new(&python)
        .args(["-m", "virtualenv", "--version"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !has_virtualenv {
        let mut cmd = Command::new(&python);
        cmd.args(["-m", "pip", "install", "virtualenv<20.22"]);
        step("pip install virtualenv", cmd)?;
    }
    let _ = fs::remove_dir_all(venv);
    let mut cmd = Command::new(&python);
    cmd.args(["-m", "virtualenv"]).arg(venv);
    step("virtualenv", cmd)?;
    let mut cmd = Command::new(venv.join("bin").join("pip"));
    cmd.args(["install", AUTOBAHN_PACKAGE]);
    step("pip install autobahntestsuite", cmd)
}

/// A Python 2.7 that runs: pyenv's installed 2.7 versions first (pyenv's `python2.7`
/// shim on `PATH` fails unless 2.7 is the selected version), then `python2.7` on `PATH`.
fn find_python27() -> Option<PathBuf> {
    let pyenv = std::env::var_os("PYENV_ROOT")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".pyenv")));
    let mut found: Vec<PathBuf> = pyenv
        .and_then(|root| fs::read_dir(root.join("versions")).ok())
        .into_iter()
        .flatten()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().starts_with("2.7"))
        .map(|e| e.path().join("bin").join("python"))
        .collect();
    found.sort();
    found.reverse();
    found.extend(find_program("python2.7"));
    found.into_iter().find(|p| is_python27(p))
}

/// `python` starts and is 2.7.
fn is_python27(python: &Path) -> bool {
    Command::new(python)
        .args(["-c", "import sys; assert sys.version_info[:2] == (2, 7)"])
        .output()
        .is_ok_and(|o| o.status.success())
}

/// One case's outcome, as `index.json` gives it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct CaseResult {
    behavior: String,
    behavior_close: String,
}

impl CaseResult {
    fn passes(&self) -> bool {
        let ok = |b: &str| matches!(b, "OK" | "NON-STRICT" | "INFORMATIONAL");
        ok(&self.behavior) && ok(&self.behavior_close)
    }
}

/// The results of `agent` from the fuzzing client's `index.json`.
fn parse_index(json: &str, agent: &str) -> Result<BTreeMap<String, CaseResult>> {
    let v: serde_json::Value =
        serde_json::from_str(json).map_err(|e| format!("index.json is not JSON: {e}"))?;
    let cases = v
        .get(agent)
        .and_then(|a| a.as_object())
        .ok_or_else(|| format!("index.json has no results for {agent}"))?;
    let field = |c: &serde_json::Value, k: &str| {
        c.get(k)
            .and_then(|b| b.as_str())
            .unwrap_or("MISSING")
            .to_string()
    };
    Ok(cases
        .iter()
        .map(|(id, c)| {
            (
                id.clone(),
                CaseResult {
                    behavior: field(c, "behavior"),
                    behavior_close: field(c, "behaviorClose"),
                },
            )
        })
        .collect())
}

/// The numeric order of case ids ("9.10.1" after "9.2.1").
fn case_key(id: &str) -> Vec<u32> {
    id.split('.')
        .map(|p| p.parse().unwrap_or(u32::MAX))
        .collect()
}

fn section_name(section: u32) -> &'static str {
    match section {
        1 => "framing",
        2 => "pings and pongs",
        3 => "reserved bits",
        4 => "opcodes",
        5 => "fragmentation",
        6 => "UTF-8",
        7 => "close handling",
        9 => "limits and performance",
        10 => "miscellaneous",
        12 => "permessage-deflate payloads",
        13 => "permessage-deflate parameters",
        _ => "other",
    }
}

/// Counts per section and behaviour, and the cases that did not pass.
struct Summary {
    backend: Backend,
    total: usize,
    /// section -> (OK, NON-STRICT, INFORMATIONAL, not passing)
    sections: BTreeMap<u32, [usize; 4]>,
    failures: Vec<String>,
    elapsed: Duration,
}

impl Summary {
    fn of(backend: Backend, results: &BTreeMap<String, CaseResult>, elapsed: Duration) -> Summary {
        let mut ids: Vec<&String> = results.keys().collect();
        ids.sort_by_key(|id| case_key(id));
        let mut s = Summary {
            backend,
            total: results.len(),
            sections: BTreeMap::new(),
            failures: Vec::new(),
            elapsed,
        };
        for id in ids {
            let r = &results[id];
            let section = case_key(id)[0];
            let counts = s.sections.entry(section).or_default();
            let slot = if !r.passes() {
                s.failures.push(format!(
                    "{id} ({} / close {})",
                    r.behavior, r.behavior_close
                ));
                3
            } else if r.behavior == "NON-STRICT" || r.behavior_close == "NON-STRICT" {
                1
            } else if r.behavior == "INFORMATIONAL" || r.behavior_close == "INFORMATIONAL" {
                2
            } else {
                0
            };
            counts[slot] += 1;
        }
        s
    }
}

/// One markdown table per backend.
fn render(summaries: &[Summary]) -> String {
    let mut t = String::new();
    for s in summaries {
        let _ = writeln!(
            t,
            "**{}** ({} cases, {:.0} s):\n\n| section | cases | OK | NON-STRICT | INFORMATIONAL | not passing |\n|---|---:|---:|---:|---:|---:|",
            s.backend.label(),
            s.total,
            s.elapsed.as_secs_f64()
        );
        for (section, c) in &s.sections {
            let _ = writeln!(
                t,
                "| {section} {} | {} | {} | {} | {} | {} |",
                section_name(*section),
                c.iter().sum::<usize>(),
                c[0],
                c[1],
                c[2],
                c[3]
            );
        }
        if !s.failures.is_empty() {
            let _ = writeln!(t, "\nNot passing: {}", s.failures.join(", "));
        }
        t.push('\n');
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    const INDEX: &str = r#"{"rusty-ws-echo-kernel": {
        "1.1.1": {"behavior": "OK", "behaviorClose": "OK", "duration": 2, "remoteCloseCode": 1000, "reportfile": "a.json"},
        "6.4.1": {"behavior": "NON-STRICT", "behaviorClose": "OK", "duration": 1, "remoteCloseCode": 1007, "reportfile": "b.json"},
        "7.1.6": {"behavior": "INFORMATIONAL", "behaviorClose": "INFORMATIONAL", "duration": 3, "remoteCloseCode": 1000, "reportfile": "c.json"},
        "9.10.1": {"behavior": "OK", "behaviorClose": "OK", "duration": 5, "remoteCloseCode": 1000, "reportfile": "d.json"},
        "9.2.1": {"behavior": "FAILED", "behaviorClose": "OK", "duration": 5, "remoteCloseCode": 1000, "reportfile": "e.json"},
        "7.9.1": {"behavior": "OK", "behaviorClose": "WRONG CODE", "duration": 5, "remoteCloseCode": 1000, "reportfile": "f.json"}
    }}"#;

    #[test]
    fn reads_the_index_and_sorts_failures_numerically() {
        let r = parse_index(INDEX, "rusty-ws-echo-kernel").unwrap();
        assert_eq!(r.len(), 6);
        assert!(parse_index(INDEX, "other").is_err());
        assert!(parse_index("not json", "x").is_err());
        let s = Summary::of(Backend::Kernel, &r, Duration::from_secs(1));
        assert_eq!(s.sections[&1], [1, 0, 0, 0]);
        assert_eq!(s.sections[&6], [0, 1, 0, 0]);
        assert_eq!(s.sections[&7], [0, 0, 1, 1]);
        assert_eq!(s.sections[&9], [1, 0, 0, 1]);
        assert_eq!(
            s.failures,
            ["7.9.1 (OK / close WRONG CODE)", "9.2.1 (FAILED / close OK)"]
        );
        let text = render(&[s]);
        assert!(
            text.contains("| 9 limits and performance | 2 | 1 | 0 | 0 | 1 |"),
            "{text}"
        );
    }

    #[test]
    fn case_selection() {
        let mut o = Options {
            backend: Which::Kernel,
            deflate: false,
            tls: false,
            quick: false,
            cases: Vec::new(),
            python: None,
            no_docs: true,
            no_build: true,
        };
        let all = case_patterns(&o);
        assert!(all.contains(&"9.*".to_string()) && !all.iter().any(|c| c.starts_with("12")));
        o.quick = true;
        o.deflate = true;
        let quick = case_patterns(&o);
        assert!(!quick.contains(&"9.*".to_string()));
        assert!(quick.contains(&"12.1.*".to_string()) && quick.contains(&"13.*".to_string()));
        o.cases = vec!["2.1".into()];
        assert_eq!(case_patterns(&o), ["2.1"]);
        assert!(case_key("9.10.1") > case_key("9.2.1"));
    }

    #[test]
    fn no_docs_keeps_its_old_name() {
        #[derive(clap::Parser)]
        struct Cli {
            #[command(flatten)]
            opts: Options,
        }
        use clap::Parser;
        for flag in ["--no-docs", "--no-readme"] {
            assert!(
                Cli::try_parse_from(["autobahn", flag])
                    .unwrap()
                    .opts
                    .no_docs
            );
        }
        assert!(!Cli::try_parse_from(["autobahn"]).unwrap().opts.no_docs);
    }

    #[test]
    fn spec_is_valid_json() {
        let s = spec_json(
            Path::new("/tmp/x"),
            "a",
            "ws://127.0.0.1:9001",
            None,
            &["1.*".into()],
        );
        let v: serde_json::Value = serde_json::from_str(&s).unwrap();
        assert_eq!(v["servers"][0]["url"], "ws://127.0.0.1:9001");
        assert!(v["servers"][0].get("hostname").is_none());
        assert_eq!(v["cases"][0], "1.*");
        let s = spec_json(
            Path::new("/tmp/x"),
            "a",
            "wss://127.0.0.1:9001",
            Some(TLS_NAME),
            &["1.*".into()],
        );
        let v: serde_json::Value = serde_json::from_str(&s).unwrap();
        assert_eq!(v["servers"][0]["hostname"], TLS_NAME);
    }
}
