//! One measured run: start a server pinned inside the namespace, wait until it accepts,
//! drive it with wrk pinned to the client core, take the server's and the machine's CPU
//! time around wrk's run, and stop the server (nginx's workers too) by PID.

use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use super::tls::TlsRun;
use super::{Options, Server, TAP};
use crate::common::{check_interrupted, children_of, listening, Netns, Proc, Result};
use crate::family::{endpoint, Family, Over};
use crate::http_load::nginx::nginx_args;
use crate::http_load::report::Row;
use crate::http_load::tls::{self as tls_load, httpd_counters, parse_s_client, Negotiated};
use crate::http_load::wrk::Sample;
use crate::http_load::{Case, Measured, ServerProcs, Wrk};
use crate::sys::Signal;
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
    /// The port every server listens on.
    pub port: u16,
    /// Over TLS (`--tls`): the certificate, wrk's configuration and `openssl`.
    pub tls: Option<&'a TlsRun>,
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
                cmd.arg(self.port.to_string()).arg(&self.pages);
                if server.server == Server::Tap {
                    cmd.args(["1", &format!("tap:{}", self.net.tap)])
                        .arg(TAP.rusty_spec())
                        .arg("1");
                }
                if server.server == Server::Xdp {
                    cmd.args(self.xdp_link()?.link_args());
                }
                if let Some(t) = self.tls {
                    // The same version for everyone, and full handshakes only.
                    cmd.arg("--tls-cert").arg(&t.files.cert);
                    cmd.arg("--tls-key").arg(&t.files.key);
                    cmd.args(["--tls-versions", "1.3", "--tls-no-resumption"]);
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
            Signal::TERM
        } else {
            Signal::INT
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
                    Server::Tap | Server::Xdp => self.net.connects(self.host(server)?, self.port),
                    Server::Kernel => listening(pid, self.port),
                    Server::Nginx => listening(pid, self.port) && !children_of(pid).is_empty(),
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
        // Over TLS httpd's counters (printed at info) count the handshakes.
        let level = if self.tls.is_some() { "info" } else { "warn" };
        let mut running = self.start(server, &server_log, level)?;

        let host = self.host(server)?;
        let wrk = Wrk {
            program: &self.wrk,
            connections: self.opts.connections,
            duration: self.opts.run.load.duration,
            script: &self.script,
            tls: self.tls.map(|t| t.files.client_conf.as_path()),
        };
        let what = format!("{} on {}", case.label, server.label());
        let m = Measured::new(&mut running, &server_log, &what, self.interrupted);
        let client = (self.net, self.opts.run.host.client_cpu);
        let log = self.logs.join(format!("{tag}-wrk.log"));
        let mut s = wrk.run(m, client, case, (host, self.port), &log)?;
        if self.tls.is_some() && server.server != Server::Nginx {
            running.stop();
            let h = httpd_counters(&server_log)?;
            if h.resumed > 0 {
                return Err(format!(
                    "{what}: httpd resumed {} of {} handshakes; the run was to measure full \
                     handshakes only (--tls-no-resumption)",
                    h.resumed, h.completed
                ));
            }
            s.handshakes = Some(h);
        }
        Ok(s)
    }

    /// Over TLS: starts `server`, fetches the 64-byte page once with `openssl s_client`
    /// (under wrk's OpenSSL configuration, from the client core) and says what was
    /// negotiated; fails unless it is what every server must negotiate
    /// ([`Negotiated::check`]).
    pub(super) fn probe(&self, server: Over<Server>) -> Result<Negotiated> {
        let Some(t) = self.tls else {
            return Err("no TLS to probe".into());
        };
        check_interrupted(self.interrupted)?;
        let tag = format!("00-probe-{:?}-{}", server.server, server.family).to_lowercase();
        let server_log = self.logs.join(format!("{tag}-server.log"));
        let mut running = self.start(server, &server_log, "info")?;
        let at = endpoint(self.host(server)?, self.port);
        let mut cmd = self
            .net
            .exec_pinned(self.opts.run.host.client_cpu, &t.openssl);
        cmd.args(tls_load::probe_args(&at))
            .env("OPENSSL_CONF", &t.files.client_conf);
        let log = self.logs.join(format!("{tag}-s_client.log"));
        let mut client = Proc::spawn_reading("openssl", cmd, &t.request, &log)?;
        let status = client.wait_for(Duration::from_secs(15), self.interrupted)?;
        running.stop();
        let out = std::fs::read_to_string(&log).unwrap_or_default();
        let who = server.label();
        let negotiated = parse_s_client(&out).ok_or_else(|| {
            format!(
                "{who}: no TLS handshake with openssl s_client ({}):\n{out}",
                status.map_or("killed after 15 s".to_string(), |s| s.to_string())
            )
        })?;
        negotiated.check(&who)?;
        Ok(negotiated)
    }
}
