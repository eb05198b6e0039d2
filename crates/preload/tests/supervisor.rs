//! rusty-run with `--metrics` or `--metrics-file`, which runs the program as its child
//! and stays beside it, checked with programs that make no TCP socket (`sh`), so no
//! link is opened and no privilege needed: the program's exit status comes back as
//! rusty-run's, signals sent to rusty-run reach it, the endpoint answers and the file
//! parses, an address that cannot be bound stops rusty-run before the program starts,
//! and without either flag the program still replaces rusty-run (same pid).
//!
//! Every wait is bounded; the only processes stopped are the ones started here, by pid.

#[path = "common/mod.rs"]
mod common;

use std::fs;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use common::{preload_library, PRELOAD_VARS, RUSTY_RUN};

/// A link the programs never open (they make no TCP socket).
const LINK: &str = "tap:rrsuper0 10.123.0.2/24";

/// A scratch directory of the test's own.
fn scratch(test: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("rusty-supervisor-{}-{test}", std::process::id()));
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(&dir).unwrap();
    dir
}

/// `rusty-run --link LINK [--library ...] FLAGS -- sh -c SCRIPT`, its output into
/// `log`.
fn rusty_run(flags: &[&str], script: &str, log: &Path) -> Command {
    let mut cmd = Command::new(RUSTY_RUN);
    cmd.args(["--link", LINK]);
    if let Some(library) = preload_library() {
        cmd.arg("--library").arg(library);
    }
    cmd.args(flags).args(["--", "sh", "-c", script]);
    for var in PRELOAD_VARS {
        cmd.env_remove(var);
    }
    let out = fs::File::create(log).unwrap();
    cmd.stdin(Stdio::null())
        .stdout(out.try_clone().unwrap())
        .stderr(out);
    cmd
}

/// Wait for `child` at most `limit`; kill it (by its pid) and fail if it outlives it.
fn wait(child: &mut Child, limit: Duration, log: &Path) -> ExitStatus {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "rusty-run still ran after {limit:?}:\n{}",
                fs::read_to_string(log).unwrap_or_default()
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Wait (bounded) until `log` holds `pattern`; the log then.
fn wait_for(child: &mut Child, log: &Path, pattern: &str) -> String {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let text = fs::read_to_string(log).unwrap_or_default();
        if text.contains(pattern) {
            return text;
        }
        if Instant::now() > deadline || child.try_wait().unwrap().is_some() {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{pattern:?} never showed:\n{text}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Run rusty-run to the end: its exit code and its output.
fn run(flags: &[&str], script: &str, log: &Path) -> (Option<i32>, String) {
    let mut child = rusty_run(flags, script, log).spawn().unwrap();
    let status = wait(&mut child, Duration::from_secs(30), log);
    (status.code(), fs::read_to_string(log).unwrap_or_default())
}

/// `kill -s SIGNAL pid`.
fn signal(pid: u32, signal: &str) {
    let ok = Command::new("kill")
        .args(["-s", signal, &pid.to_string()])
        .status()
        .is_ok_and(|s| s.success());
    assert!(ok, "kill -s {signal} {pid}");
}

/// `GET /metrics` from `addr`: the status line and the body.
fn scrape(addr: SocketAddr) -> (String, String) {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(5)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    s.write_all(b"GET /metrics HTTP/1.1\r\nHost: t\r\n\r\n")
        .unwrap();
    let mut response = String::new();
    let _ = s.read_to_string(&mut response);
    let (head, body) = response.split_once("\r\n\r\n").unwrap_or((&response, ""));
    (
        head.lines().next().unwrap_or("").to_string(),
        body.to_string(),
    )
}

#[test]
fn the_programs_exit_status_is_rusty_runs() {
    let dir = scratch("status");
    let log = dir.join("log");
    let file = dir.join("rusty.prom");
    let file = file.to_str().unwrap();
    let flags = ["--metrics-file", file];
    assert_eq!(run(&flags, "exit 7", &log).0, Some(7));
    // Killed by a signal: 128 + its number, as a shell reports it.
    assert_eq!(run(&flags, "kill -s USR1 $$", &log).0, Some(128 + 10));
    let text = fs::read_to_string(file).unwrap();
    assert!(
        text.contains("# TYPE rusty_frames_received_total counter\n"),
        "{text}"
    );
    assert!(!text.contains("pid="), "no process runs a stack: {text}");
    fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn signals_sent_to_rusty_run_reach_the_program() {
    let dir = scratch("signals");
    let log = dir.join("log");
    // The program stops by itself after 30 s at most.
    let script = "trap 'echo got HUP' HUP; trap 'echo got TERM; exit 4' TERM; \
                  echo ready; i=0; while [ $i -lt 300 ]; do sleep 0.1; i=$((i+1)); done; exit 9";
    let mut child = rusty_run(&["--metrics", "127.0.0.1:0"], script, &log)
        .spawn()
        .unwrap();
    let text = wait_for(&mut child, &log, "ready");
    let addr: SocketAddr = text
        .split("metrics: serving http://")
        .nth(1)
        .and_then(|rest| rest.split("/metrics").next()?.parse().ok())
        .unwrap_or_else(|| panic!("no address logged:\n{text}"));
    let (status, body) = scrape(addr);
    assert_eq!(status, "HTTP/1.1 200 OK", "{body}");
    assert!(
        body.contains("# TYPE rusty_drops_total counter\n"),
        "{body}"
    );
    signal(child.id(), "HUP");
    wait_for(&mut child, &log, "got HUP");
    signal(child.id(), "TERM");
    let status = wait(&mut child, Duration::from_secs(20), &log);
    let text = fs::read_to_string(&log).unwrap();
    assert_eq!(status.code(), Some(4), "{text}");
    assert!(text.contains("got TERM"), "{text}");
    fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_metrics_address_in_use_stops_rusty_run_before_the_program() {
    let dir = scratch("in-use");
    let log = dir.join("log");
    let marker = dir.join("ran");
    let taken = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let script = format!("touch {}", marker.display());
    let (code, text) = run(&["--metrics", &addr], &script, &log);
    assert_eq!(code, Some(1), "{text}");
    assert!(
        text.contains(&format!("rusty-run: --metrics {addr}: Address")),
        "{text}"
    );
    assert!(!marker.exists(), "the program ran");
    // A bad address is refused by the parser, with the form expected.
    let (code, text) = run(&["--metrics", "9464"], "true", &log);
    assert_eq!(code, Some(2), "{text}");
    assert!(text.contains("is not an address and port"), "{text}");
    fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn without_metrics_the_program_replaces_rusty_run() {
    let dir = scratch("exec");
    let log = dir.join("log");
    let file = dir.join("m.prom");
    for (flags, replaced) in [
        (&[][..], true),
        (&["--metrics-file", file.to_str().unwrap()][..], false),
    ] {
        let mut child = rusty_run(flags, "echo pid $$", &log).spawn().unwrap();
        let pid = child.id();
        assert!(wait(&mut child, Duration::from_secs(30), &log).success());
        let text = fs::read_to_string(&log).unwrap();
        assert!(text.starts_with("pid "), "{text}");
        assert_eq!(
            text.trim() == format!("pid {pid}"),
            replaced,
            "{flags:?}: {text}"
        );
    }
    fs::remove_dir_all(&dir).unwrap();
}
