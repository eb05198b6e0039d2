//! One measured run: start a server pinned inside the namespace, wait until it accepts,
//! drive it with wrk pinned to the client core, take the server's and the machine's CPU
//! time around wrk's run, and stop the server (nginx's workers too) by PID.

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use super::wrk::{parse_wrk, Sample};
use super::{Case, Load, Options, Server, PORT, PREFIX, STACK_IP};
use crate::common::{
    check_interrupted, check_run, children_of, explain_run, listening, CpuTimes, Netns, Proc,
    Result,
};
use crate::pages::SMALL_PAGE;
use crate::xdp::{self, XdpLink};

/// What every run needs: the options, the programs, the namespace and where logs go.
pub(super) struct Ctx<'a> {
    pub opts: &'a Options,
    pub httpd: PathBuf,
    pub wrk: PathBuf,
    pub nginx: Option<PathBuf>,
    pub nginx_conf: Option<PathBuf>,
    pub pages: PathBuf,
    pub script: PathBuf,
    pub net: &'a Netns,
    /// The AF_XDP row's link, while that row runs.
    pub xdp: Option<&'a XdpLink>,
    pub logs: &'a Path,
    pub interrupted: &'a AtomicBool,
}

/// A running server: the process we started and, for nginx, its workers.
struct Running {
    proc: Proc,
    server: Server,
    workers: Vec<i32>,
}

impl Running {
    fn pids(&self) -> Vec<i32> {
        std::iter::once(self.proc.pid())
            .chain(self.workers.iter().copied())
            .collect()
    }

    fn cpu(&self) -> Result<CpuTimes> {
        CpuTimes::read(&self.pids())
    }

    fn stop(&mut self) {
        // nginx: SIGTERM is its fast shutdown (workers too); httpd: SIGINT, then --grace.
        let sig = if self.server == Server::Nginx {
            libc::SIGTERM
        } else {
            libc::SIGINT
        };
        self.proc.stop_with(sig, Duration::from_secs(5));
        // A worker left behind by a killed master is reparented; kill it by PID, after
        // checking that the PID still names an nginx process.
        for &w in &self.workers {
            let comm = fs::read_to_string(format!("/proc/{w}/comm")).unwrap_or_default();
            if comm.trim() == "nginx" {
                // The PID was checked above to name an nginx process.
                crate::sys::kill(w, libc::SIGKILL);
            }
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.stop();
    }
}

impl Ctx<'_> {
    /// A fresh server, up and accepting; httpd logs at `log_level`.
    fn start(&self, server: Server, log: &Path, log_level: &str) -> Result<Running> {
        let mut cmd;
        match server {
            Server::Tap | Server::Xdp | Server::Kernel => {
                cmd = self
                    .net
                    .exec_pinned(self.opts.run.host.server_cpu, &self.httpd);
                cmd.arg(PORT.to_string()).arg(&self.pages);
                if server == Server::Tap {
                    cmd.args(["1", &format!("tap:{}", self.net.tap)])
                        .arg(format!("{STACK_IP}/{PREFIX}"))
                        .arg("1");
                }
                if server == Server::Xdp {
                    cmd.args(self.xdp_link()?.link_args());
                }
                cmd.args(["--grace", "1", "--log-level", log_level]);
                if let Some(us) = self.opts.run.host.spin_us {
                    cmd.arg("--spin-us").arg(us.to_string());
                }
            }
            Server::Nginx => {
                let (Some(nginx), Some(conf)) = (&self.nginx, &self.nginx_conf) else {
                    return Err("nginx is not available".into());
                };
                let prefix = conf.parent().unwrap_or(Path::new("/"));
                cmd = self.net.exec_pinned(self.opts.run.host.server_cpu, nginx);
                cmd.args(["-e", "stderr", "-p"])
                    .arg(prefix)
                    .arg("-c")
                    .arg(conf);
            }
        }
        let proc = Proc::spawn("server", cmd, log)?;
        let mut running = Running {
            proc,
            server,
            workers: Vec::new(),
        };
        self.wait_ready(&mut running, log)?;
        Ok(running)
    }

    fn xdp_link(&self) -> Result<&XdpLink> {
        self.xdp
            .ok_or_else(|| "Rusty on AF_XDP is not set up".into())
    }

    /// Starts and stops httpd on AF_XDP once, before any run, for the row's outcome.
    pub(super) fn xdp_preflight(&self) -> Result<xdp::Outcome> {
        let log = self.logs.join("00-xdp-preflight-server.log");
        let started = self.start(Server::Xdp, &log, "info").map(drop);
        check_interrupted(self.interrupted)?;
        Ok(xdp::outcome("httpd", self.xdp_link()?, &log, started))
    }

    /// Until the server accepts: a listening socket on the port and, for nginx, a worker
    /// (kernel), the TAP's carrier, which comes up once a queue is attached (TAP), or a
    /// connection through the veth (AF_XDP).
    fn wait_ready(&self, r: &mut Running, log: &Path) -> Result<()> {
        let server = r.server;
        let times = (Duration::from_secs(10), Duration::from_millis(300));
        crate::common::wait_ready(
            &mut r.proc,
            server.label(),
            log,
            times,
            self.interrupted,
            |pid| {
                Ok(match server {
                    Server::Tap => self.net.tap_has_carrier(),
                    Server::Xdp => self.xdp_link()?.accepts(self.net, PORT),
                    Server::Kernel => listening(pid, PORT),
                    Server::Nginx => listening(pid, PORT) && !children_of(pid).is_empty(),
                })
            },
        )?;
        if server == Server::Nginx {
            r.workers = children_of(r.proc.pid());
        }
        Ok(())
    }

    pub(super) fn run_one(&self, case: Case, server: Server, n: usize) -> Result<Sample> {
        check_interrupted(self.interrupted)?;
        let tag = format!("{n:02}-{}-{:?}", case.tag, server).to_lowercase();
        let server_log = self.logs.join(format!("{tag}-server.log"));
        let mut running = self.start(server, &server_log, "warn")?;

        let host = match server {
            Server::Tap => STACK_IP,
            Server::Xdp => self.xdp_link()?.stack_ip,
            Server::Kernel | Server::Nginx => "127.0.0.1",
        };
        let mut cmd = self
            .net
            .exec_pinned(self.opts.run.host.client_cpu, &self.wrk);
        cmd.arg("-t1")
            .arg(format!("-c{}", self.opts.connections))
            .arg(format!("-d{}s", self.opts.run.duration))
            .args(["--latency", "--timeout", "5s"]);
        let url = match case.load {
            Load::Small => format!("http://{host}:{PORT}/{SMALL_PAGE}"),
            Load::SmallClose => {
                cmd.args(["-H", "Connection: close"]);
                format!("http://{host}:{PORT}/{SMALL_PAGE}")
            }
            Load::Random => {
                cmd.arg("-s").arg(&self.script);
                format!("http://{host}:{PORT}/")
            }
        };
        cmd.arg(&url);

        let client_log = self.logs.join(format!("{tag}-wrk.log"));
        let cpu_before = running.cpu()?;
        let started = Instant::now();
        let mut client = Proc::spawn("wrk", cmd, &client_log)?;
        let limit = Duration::from_secs(self.opts.run.duration + 30);
        let status = client.wait_for(limit, self.interrupted)?;
        let cpu_after = running.cpu();
        let wall_s = started.elapsed().as_secs_f64();
        let server_alive = running.proc.try_status()?.is_none();
        running.stop();

        let out = fs::read_to_string(&client_log).unwrap_or_default();
        let explain = || explain_run("wrk", &out, &server_log);
        let what = format!("{} on {}", case.label, server.label());
        check_run("wrk", &what, status, limit, server_alive, explain)?;
        let mut s =
            parse_wrk(&out).ok_or_else(|| format!("could not read wrk's numbers{}", explain()))?;
        if s.requests == 0 || s.non_2xx > 0 {
            return Err(format!(
                "{what}: {} requests, {} answered with a non-2xx/3xx status{}",
                s.requests,
                s.non_2xx,
                explain()
            ));
        }
        s.cpu = cpu_after?.since(cpu_before);
        s.wall_s = wall_s;
        Ok(s)
    }
}
