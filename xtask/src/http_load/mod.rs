//! What the benchmarks that drive web servers with wrk share (`bench http`, `bench
//! preload`): the three HTTP cases and wrk's command line for each, a server made of a
//! started process and its workers, one measured client run with the server's and the
//! machine's CPU time around it, nginx's configuration ([`nginx`]), the tools found or
//! installed with apt-get ([`tools`]), wrk's report ([`wrk`]) and the table of medians
//! and ratios ([`report`]).

pub(crate) mod nginx;
pub(crate) mod report;
pub(crate) mod tls;
pub(crate) mod tools;
pub(crate) mod wrk;

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use crate::common::{check_run, explain_run, CpuTimes, Netns, Proc, Result};
use crate::family::endpoint;
use crate::pages::{self, PageSet, SMALL_PAGE};
use crate::sys::Signal;
use wrk::{parse_wrk, Sample};

/// What wrk asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Load {
    /// The 64-byte page over keep-alive connections.
    Small,
    /// The 64-byte page, one connection per request.
    SmallClose,
    /// The page set, uniformly at random, over keep-alive connections.
    Random,
}

/// One case of the table: its label, the tag in log names and what wrk asks for.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Case {
    pub label: &'static str,
    pub tag: &'static str,
    pub load: Load,
}

pub(crate) const CASES: [Case; 3] = [
    Case {
        label: "64 B, keep-alive",
        tag: "small",
        load: Load::Small,
    },
    Case {
        label: "64 B, `Connection: close`",
        tag: "close",
        load: Load::SmallClose,
    },
    Case {
        label: "random pages, keep-alive",
        tag: "pages",
        load: Load::Random,
    },
];

/// How wrk runs: the program, its connections (on one thread), seconds of load, the
/// random-pages script, and over TLS (`https://`) the OpenSSL configuration its library
/// reads ([`tls::client_conf`], through `OPENSSL_CONF`).
pub(crate) struct Wrk<'a> {
    pub program: &'a Path,
    pub connections: usize,
    pub duration: u64,
    pub script: &'a Path,
    pub tls: Option<&'a Path>,
}

impl Wrk<'_> {
    /// wrk in `net` pinned to `cpu`, with the arguments for `case` against
    /// `host`:`port` (an IPv6 host in brackets).
    pub(crate) fn command(
        &self,
        net: &Netns,
        cpu: usize,
        case: Case,
        host: &str,
        port: u16,
    ) -> Command {
        let mut cmd = net.exec_pinned(cpu, self.program);
        cmd.arg("-t1")
            .arg(format!("-c{}", self.connections))
            .arg(format!("-d{}s", self.duration))
            .args(["--latency", "--timeout", "5s"]);
        match case.load {
            Load::Small => {}
            Load::SmallClose => {
                cmd.args(["-H", "Connection: close"]);
            }
            Load::Random => {
                cmd.arg("-s").arg(self.script);
            }
        }
        if let Some(conf) = self.tls {
            cmd.env("OPENSSL_CONF", conf);
        }
        cmd.arg(url(case, host, port, self.tls.is_some()));
        cmd
    }

    /// How long a run may take before wrk is killed.
    pub(crate) fn limit(&self) -> Duration {
        Duration::from_secs(self.duration + 30)
    }

    /// wrk from `net`, pinned to `cpu`, in `case` against `host`:`port`, measured as
    /// [`Measured::wrk`] does, logging to `log`.
    pub(crate) fn run(
        &self,
        mut m: Measured<'_>,
        (net, cpu): (&Netns, usize),
        case: Case,
        (host, port): (&str, u16),
        log: &Path,
    ) -> Result<Sample> {
        let cmd = self.command(net, cpu, case, host, port);
        m.wrk(cmd, log, self.limit())
    }
}

/// The URL wrk asks for in `case` at `host`:`port`, `https://` over TLS: an IPv6 host
/// in brackets (wrk takes `http://[fd00::2]:8080/`).
fn url(case: Case, host: &str, port: u16, tls: bool) -> String {
    let at = endpoint(host, port);
    let scheme = if tls { "https" } else { "http" };
    match case.load {
        Load::Small | Load::SmallClose => format!("{scheme}://{at}/{SMALL_PAGE}"),
        Load::Random => format!("{scheme}://{at}/"),
    }
}

/// What the HTTP benchmarks keep in their temporary directory.
pub(crate) struct Files {
    pub set: PageSet,
    pub pages: PathBuf,
    /// wrk's Lua script for the random pages.
    pub script: PathBuf,
    pub logs: PathBuf,
}

/// Makes `tmp` readable by nginx's unprivileged workers and writes the page set, wrk's
/// script and an empty `logs` directory into it; `what` names the benchmark on stderr.
pub(crate) fn write_files(tmp: &Path, what: &str) -> Result<Files> {
    fs::set_permissions(tmp, fs::Permissions::from_mode(0o755))
        .map_err(|e| format!("chmod {}: {e}", tmp.display()))?;
    let pages = tmp.join("pages");
    let set = pages::write_pages(&pages)?;
    eprintln!("{what}: {}", set.summary());
    let script = tmp.join("random-pages.lua");
    fs::write(&script, pages::wrk_script())
        .map_err(|e| format!("writing {}: {e}", script.display()))?;
    let logs = tmp.join("logs");
    fs::create_dir_all(&logs).map_err(|e| format!("creating {}: {e}", logs.display()))?;
    Ok(Files {
        set,
        pages,
        script,
        logs,
    })
}

/// A running server: the process started and its workers (nginx's), stopped with
/// `signal`, then SIGKILL; a worker left behind is killed by PID once its name is
/// checked to be `worker_name`.
pub(crate) struct ServerProcs {
    pub proc: Proc,
    pub workers: Vec<i32>,
    pub signal: Signal,
    pub worker_name: &'static str,
}

impl ServerProcs {
    pub(crate) fn new(proc: Proc, signal: Signal, worker_name: &'static str) -> ServerProcs {
        ServerProcs {
            proc,
            workers: Vec::new(),
            signal,
            worker_name,
        }
    }

    pub(crate) fn pids(&self) -> Vec<i32> {
        std::iter::once(self.proc.pid())
            .chain(self.workers.iter().copied())
            .collect()
    }

    pub(crate) fn cpu(&self) -> Result<CpuTimes> {
        CpuTimes::read(&self.pids())
    }

    pub(crate) fn stop(&mut self) {
        self.proc.stop_with(self.signal, Duration::from_secs(5));
        for &w in &self.workers {
            let comm = fs::read_to_string(format!("/proc/{w}/comm")).unwrap_or_default();
            if comm.trim() == self.worker_name {
                // The PID was checked above to name a worker of ours.
                crate::sys::kill(w, Signal::KILL);
            }
        }
    }
}

impl Drop for ServerProcs {
    fn drop(&mut self) {
        self.stop();
    }
}

/// A client's run against a server: what it printed, and the server's and the
/// machine's CPU time and the wall time over it.
pub(crate) struct ClientRun {
    pub out: String,
    pub cpu: CpuTimes,
    pub wall_s: f64,
}

/// What one client run needs besides the client: the server, its log, what to call the
/// run in messages and the interrupt flag.
pub(crate) struct Measured<'a> {
    pub server: &'a mut ServerProcs,
    pub server_log: &'a Path,
    pub what: &'a str,
    pub interrupted: &'a AtomicBool,
}

impl<'a> Measured<'a> {
    pub(crate) fn new(
        server: &'a mut ServerProcs,
        server_log: &'a Path,
        what: &'a str,
        interrupted: &'a AtomicBool,
    ) -> Measured<'a> {
        Measured {
            server,
            server_log,
            what,
            interrupted,
        }
    }

    /// Runs `client` (`name`, logging to `log`) for at most `limit`, with the server's
    /// and the machine's CPU time taken just before it starts and just after it exits.
    /// Fails, with the client's output and the server log's tail, unless the client
    /// exited 0 in time with the server still up.
    pub(crate) fn client(
        &mut self,
        name: &'static str,
        client: Command,
        log: &Path,
        limit: Duration,
    ) -> Result<ClientRun> {
        let before = self.server.cpu()?;
        let started = Instant::now();
        let mut c = Proc::spawn(name, client, log)?;
        let status = c.wait_for(limit, self.interrupted)?;
        let after = self.server.cpu();
        let wall_s = started.elapsed().as_secs_f64();
        let alive = self.server.proc.try_status()?.is_none();
        let out = fs::read_to_string(log).unwrap_or_default();
        let explain = || explain_run(name, &out, self.server_log);
        check_run(name, self.what, status, limit, alive, explain)?;
        Ok(ClientRun {
            cpu: after?.since(before),
            out,
            wall_s,
        })
    }

    /// wrk (`cmd`, with its arguments) as [`client`](Self::client) runs it, read into a
    /// sample; fails when no request or any non-2xx/3xx answer was counted.
    pub(crate) fn wrk(&mut self, cmd: Command, log: &Path, limit: Duration) -> Result<Sample> {
        let run = self.client("wrk", cmd, log, limit)?;
        let explain = || explain_run("wrk", &run.out, self.server_log);
        let mut s = parse_wrk(&run.out)
            .ok_or_else(|| format!("could not read wrk's numbers{}", explain()))?;
        if s.requests == 0 || s.non_2xx > 0 {
            return Err(format!(
                "{}: {} requests, {} answered with a non-2xx/3xx status{}",
                self.what,
                s.requests,
                s.non_2xx,
                explain()
            ));
        }
        s.cpu = run.cpu;
        s.wall_s = run.wall_s;
        Ok(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_of_either_family() {
        assert_eq!(
            url(CASES[0], "10.80.0.2", 8080, false),
            "http://10.80.0.2:8080/64b.html"
        );
        assert_eq!(
            url(CASES[1], "fd00:80::2", 8080, false),
            "http://[fd00:80::2]:8080/64b.html"
        );
        assert_eq!(url(CASES[2], "::1", 8080, false), "http://[::1]:8080/");
        assert_eq!(
            url(CASES[1], "10.80.0.2", 8443, true),
            "https://10.80.0.2:8443/64b.html"
        );
        assert_eq!(url(CASES[2], "::1", 8443, true), "https://[::1]:8443/");
    }
}
