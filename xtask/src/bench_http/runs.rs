//! One measured run: start a server pinned inside the namespace, wait until it accepts,
//! drive it with wrk pinned to the client core, take the server's and the machine's CPU
//! time around wrk's run, and stop the server (nginx's workers too) by PID.

use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use super::{Options, Server, PORT, TAP};
use crate::common::{check_interrupted, children_of, listening, Netns, Proc, Result};
use crate::family::{Family, Over};
use crate::http_load::nginx::nginx_args;
use crate::http_load::report::Row;
use crate::http_load::wrk::Sample;
use crate::http_load::{Case, Measured, ServerProcs, Wrk};
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

impl Ctx<'_> {
    /// A fresh server, up and accepting over `server`'s family; httpd logs at
    /// `log_level`.
    fn start(&self, server: Over<Server>, log: &Path, log_level: &str) -> Result<ServerProcs> {
        let mut cmd;
        match server.server {
            Server::Tap | Server::Xdp | Server::Kernel => {
                cmd = self
                    .net
                    .exec_pinned(self.opts.run.host.server_cpu, &self.httpd);
                cmd.arg(PORT.to_string()).arg(&self.pages);
                if server.server == Server::Tap {
                    cmd.args(["1", &format!("tap:{}", self.net.tap)])
                        .arg(TAP.rusty_spec())
                        .arg("1");
                }
                if server.server == Server::Xdp {
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
                cmd = self.net.exec_pinned(self.opts.run.host.server_cpu, nginx);
                nginx_args(&mut cmd, conf);
            }
        }
        let proc = Proc::spawn("server", cmd, log)?;
        // nginx: SIGTERM is its fast shutdown (workers too); httpd: SIGINT, then --grace.
        let signal = if server.server == Server::Nginx {
            libc::SIGTERM
        } else {
            libc::SIGINT
        };
        let mut running = ServerProcs::new(proc, signal, "nginx");
        self.wait_ready(&mut running, server, log)?;
        Ok(running)
    }

    fn xdp_link(&self) -> Result<&XdpLink> {
        self.xdp
            .ok_or_else(|| "Rusty on AF_XDP is not set up".into())
    }

    /// Starts and stops httpd on AF_XDP once, before any run, for the row's outcome.
    pub(super) fn xdp_preflight(&self) -> Result<xdp::Outcome> {
        let log = self.logs.join("00-xdp-preflight-server.log");
        let xdp = Over::new(Server::Xdp, Family::V4);
        let started = self.start(xdp, &log, "info").map(drop);
        check_interrupted(self.interrupted)?;
        Ok(xdp::outcome("httpd", self.xdp_link()?, &log, started))
    }

    /// Until the server accepts: a listening socket on the port and, for nginx, a worker
    /// (kernel), or a connection to Rusty's address in the run's family (TAP, AF_XDP:
    /// an IPv6 address takes about a second of duplicate address detection).
    fn wait_ready(&self, r: &mut ServerProcs, server: Over<Server>, log: &Path) -> Result<()> {
        let times = (Duration::from_secs(10), Duration::from_millis(300));
        crate::common::wait_ready(
            &mut r.proc,
            &server.label(),
            log,
            times,
            self.interrupted,
            |pid| {
                Ok(match server.server {
                    Server::Tap | Server::Xdp => self.net.connects(self.host(server)?, PORT),
                    Server::Kernel => listening(pid, PORT),
                    Server::Nginx => listening(pid, PORT) && !children_of(pid).is_empty(),
                })
            },
        )?;
        if server.server == Server::Nginx {
            r.workers = children_of(r.proc.pid());
        }
        Ok(())
    }

    /// Where wrk reaches `server` in its family.
    fn host(&self, server: Over<Server>) -> Result<&'static str> {
        Ok(match server.server {
            Server::Tap => TAP.of(server.family).rusty,
            Server::Xdp => self.xdp_link()?.stack_ip_of(server.family)?,
            Server::Kernel | Server::Nginx => server.family.loopback(),
        })
    }

    pub(super) fn run_one(&self, case: Case, server: Over<Server>, n: usize) -> Result<Sample> {
        check_interrupted(self.interrupted)?;
        let tag = format!("{n:02}-{}-{:?}-{}", case.tag, server.server, server.family);
        let tag = tag.to_lowercase();
        let server_log = self.logs.join(format!("{tag}-server.log"));
        let mut running = self.start(server, &server_log, "warn")?;

        let host = self.host(server)?;
        let wrk = Wrk {
            program: &self.wrk,
            connections: self.opts.connections,
            duration: self.opts.run.load.duration,
            script: &self.script,
        };
        let what = format!("{} on {}", case.label, server.label());
        let m = Measured::new(&mut running, &server_log, &what, self.interrupted);
        let client = (self.net, self.opts.run.host.client_cpu);
        let log = self.logs.join(format!("{tag}-wrk.log"));
        wrk.run(m, client, case, (host, PORT), &log)
    }
}
