//! One measured run: start nginx or redis-server pinned inside its namespace (through
//! rusty-run on the TAP or on AF_XDP, or on the kernel's sockets behind the veth), wait until it
//! accepts, drive it from the client core and stop it (its workers too) by PID.

use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use super::{
    redis, App, Net, Options, Server, Stack, Tools, HTTP_PORT, KERNEL_IP, PREFIX, REDIS_CLIENTS,
    REDIS_PORT, REDIS_TESTS, STACK_IP,
};
use crate::common::{check_interrupted, children_of, exec_pinned, listening, Proc, Result};
use crate::http_load::nginx::nginx_args;
use crate::http_load::report::{us, Row};
use crate::http_load::wrk::Sample;
use crate::http_load::{Case, Measured, ServerProcs, Wrk};
use crate::sys::Signal;

/// What every run needs: the options, the programs and their configuration, the
/// namespaces and where logs go.
pub(super) struct Ctx<'a> {
    pub opts: &'a Options,
    pub rusty_run: PathBuf,
    pub tools: &'a Tools,
    /// nginx's configuration with 1 and with 2 workers.
    pub nginx_confs: [PathBuf; 2],
    pub script: PathBuf,
    pub redis_dir: PathBuf,
    pub net: &'a Net,
    pub logs: &'a Path,
    pub interrupted: &'a AtomicBool,
}

impl Ctx<'_> {
    /// The cores a server runs on: the server core, or both for nginx with 2 workers.
    fn cpus(&self, server: Server) -> String {
        let h = &self.opts.host;
        match server.app {
            App::Nginx(n) if n > 1 => format!("{},{}", h.server_cpu, h.client_cpu),
            _ => h.server_cpu.to_string(),
        }
    }

    /// The AF_XDP link with a queue for each of `server`'s accepting processes.
    fn xdp_link(&self, server: Server) -> Result<&crate::xdp::XdpLink> {
        self.net
            .xdp
            .iter()
            .find(|l| l.queues == server.accepting())
            .ok_or_else(|| format!("no AF_XDP link with {} queues", server.accepting()))
    }

    /// Where the client reaches the server.
    fn host(&self, server: Server) -> Result<&'static str> {
        Ok(match server.stack {
            Stack::Rusty => STACK_IP,
            Stack::Xdp => self.xdp_link(server)?.stack_ip,
            Stack::Kernel => KERNEL_IP,
        })
    }

    fn port(server: Server) -> u16 {
        match server.app {
            App::Nginx(_) => HTTP_PORT,
            App::Redis => REDIS_PORT,
        }
    }

    /// A fresh server, up and accepting.
    fn start(&self, server: Server, log: &Path) -> Result<ServerProcs> {
        let cpus = self.cpus(server);
        let program = match server.app {
            App::Nginx(_) => &self.tools.nginx,
            App::Redis => &self.tools.redis_server,
        };
        let mut cmd = match server.stack {
            Stack::Rusty | Stack::Xdp => {
                let mut c = self.net.client.exec_pinned(&cpus, &self.rusty_run);
                let link = match server.stack {
                    Stack::Xdp => self.xdp_link(server)?.rusty_run_link(),
                    _ => format!(
                        "tap:{} {STACK_IP}/{PREFIX} {}",
                        self.net.client.tap,
                        server.queues()
                    ),
                };
                c.arg("--link").arg(link);
                if let Some(us) = self.opts.wait_spin_us {
                    c.arg("--wait-spin-us").arg(us.to_string());
                }
                if let Some(us) = self.opts.host.spin_us {
                    c.arg("--spin-us").arg(us.to_string());
                }
                c.arg("--").arg(program);
                c
            }
            Stack::Kernel => exec_pinned(&self.net.server.0, &cpus, program),
        };
        let (workers, worker_name) = match server.app {
            App::Nginx(n) => {
                nginx_args(&mut cmd, &self.nginx_confs[n.clamp(1, 2) - 1]);
                (n, "nginx")
            }
            App::Redis => {
                redis::server_args(&mut cmd, REDIS_PORT, &self.redis_dir);
                (0, "redis-server")
            }
        };
        let proc = Proc::spawn("server", cmd, log)?;
        // SIGTERM: nginx's fast shutdown (workers too), redis's shutdown.
        let mut running = ServerProcs::new(proc, Signal::TERM, worker_name);
        let port = Self::port(server);
        let host = self.host(server)?;
        let times = (Duration::from_secs(15), Duration::from_millis(300));
        crate::common::wait_ready(
            &mut running.proc,
            &server.label(),
            log,
            times,
            self.interrupted,
            |pid| {
                let up = match server.stack {
                    // The TAP's carrier comes up once a queue is attached.
                    Stack::Rusty => {
                        self.net.client.tap_has_carrier()
                            && self.net.client.connects(STACK_IP, port)
                    }
                    Stack::Xdp => self.net.client.connects(host, port),
                    Stack::Kernel => listening(pid, port),
                };
                Ok(up && children_of(pid).len() >= workers)
            },
        )?;
        running.workers = children_of(running.proc.pid());
        Ok(running)
    }

    /// nginx under wrk in one case.
    pub(super) fn run_http(&self, case: Case, server: Server, n: usize) -> Result<Sample> {
        check_interrupted(self.interrupted)?;
        let tag = format!("{n:02}-{}-{}", case.tag, server.tag());
        let server_log = self.logs.join(format!("{tag}-server.log"));
        let mut running = self.start(server, &server_log)?;
        let what = format!("{} on {}", case.label, server.label());
        self.wrk(case, server, &mut running, &server_log, &what, &tag)
    }

    /// wrk against `running` (`server`) in `case`, its log under `tag`.
    fn wrk(
        &self,
        case: Case,
        server: Server,
        running: &mut ServerProcs,
        server_log: &Path,
        what: &str,
        tag: &str,
    ) -> Result<Sample> {
        let wrk = Wrk {
            program: &self.tools.wrk,
            connections: self.opts.connections,
            duration: self.opts.load.duration,
            script: &self.script,
            tls: None,
        };
        let m = Measured::new(running, server_log, what, self.interrupted);
        let client = (&self.net.client, self.opts.host.client_cpu);
        let at = (self.host(server)?, HTTP_PORT);
        wrk.run(
            m,
            client,
            case,
            at,
            &self.logs.join(format!("{tag}-wrk.log")),
        )
    }

    /// Where `server`'s (first) worker spends its time in `case`, apart from the
    /// measured runs: `perf record -e cpu-clock -g` on it for wrk's run, then `perf
    /// report` by shared object and by symbol (with callees) into a text file in the
    /// logs; returns that file.
    pub(super) fn run_profile(&self, case: Case, server: Server, perf: &Path) -> Result<PathBuf> {
        check_interrupted(self.interrupted)?;
        let tag = format!("perf-{}-{}", case.tag, server.tag());
        let server_log = self.logs.join(format!("{tag}-server.log"));
        let mut running = self.start(server, &server_log)?;
        let worker = running
            .workers
            .first()
            .copied()
            .unwrap_or(running.proc.pid());
        let data = self.logs.join(format!("{tag}.data"));
        let mut record = std::process::Command::new(perf);
        record
            .args([
                "record",
                "-e",
                "cpu-clock",
                "-g",
                "-p",
                &worker.to_string(),
                "-o",
            ])
            .arg(&data)
            .args(["--", "sleep", &self.opts.load.duration.to_string()]);
        let mut recording = Proc::spawn("perf", record, &self.logs.join(format!("{tag}.log")))?;
        let what = format!("{} on {} (profiled)", case.label, server.label());
        self.wrk(case, server, &mut running, &server_log, &what, &tag)?;
        let limit = Duration::from_secs(self.opts.load.duration + 30);
        if !matches!(recording.wait_for(limit, self.interrupted)?, Some(s) if s.success()) {
            return Err(format!("perf record on {what} failed; see {tag}.log"));
        }
        running.stop();
        let mut text = String::new();
        for sort in [
            &["--no-children", "--sort", "dso"][..],
            &["--children", "--sort", "sym"],
        ] {
            let out = std::process::Command::new(perf)
                .args(["report", "--stdio", "-g", "none", "-i"])
                .arg(&data)
                .args(sort)
                .output()
                .map_err(|e| format!("perf report: {e}"))?;
            let lines = String::from_utf8_lossy(&out.stdout);
            let rows = lines.lines().filter(|l| l.contains('%')).take(40);
            text.push_str(&format!("perf report {}\n", sort.join(" ")));
            for row in rows {
                text.push_str(row);
                text.push('\n');
            }
            text.push('\n');
        }
        let report = self.logs.join(format!("{tag}.txt"));
        std::fs::write(&report, text).map_err(|e| format!("{}: {e}", report.display()))?;
        Ok(report)
    }

    /// nginx with `server`'s workers left idle for `seconds` after it came up: the
    /// share of one core its processes (master and workers) used meanwhile.
    pub(super) fn run_idle(&self, server: Server, seconds: u64) -> Result<f64> {
        check_interrupted(self.interrupted)?;
        let log = self.logs.join(format!("idle-{}-server.log", server.tag()));
        let mut running = self.start(server, &log)?;
        let before = running.cpu()?;
        std::thread::sleep(Duration::from_secs(seconds));
        let after = running.cpu()?;
        running.stop();
        Ok((after.server_s - before.server_s) / seconds as f64)
    }

    /// redis-server under redis-benchmark: each of [`REDIS_TESTS`] in turn against the
    /// same server, each measured on its own.
    pub(super) fn run_redis(&self, server: Server, n: usize) -> Result<Vec<Sample>> {
        check_interrupted(self.interrupted)?;
        let tag = format!("{n:02}-{}", server.tag());
        let server_log = self.logs.join(format!("{tag}-server.log"));
        let mut running = self.start(server, &server_log)?;
        let requests = self.opts.redis_requests;
        // At least 2,000 requests a second, or the run has failed.
        let limit = Duration::from_secs(30 + requests / 2_000);
        let mut out = Vec::new();
        for (test, label) in REDIS_TESTS {
            let mut cmd = self
                .net
                .client
                .exec_pinned(self.opts.host.client_cpu, &self.tools.redis_benchmark);
            let host = self.host(server)?;
            redis::benchmark_args(&mut cmd, host, REDIS_PORT, test, requests, REDIS_CLIENTS);
            let what = format!("{label} on {}", server.label());
            let mut m = Measured::new(&mut running, &server_log, &what, self.interrupted);
            let log = self.logs.join(format!("{tag}-{test}-redis-benchmark.log"));
            let run = m.client("redis-benchmark", cmd, &log, limit)?;
            let name = test.to_uppercase();
            let r = redis::parse(&run.out, &name).ok_or_else(|| {
                format!(
                    "{what}: no `{name}: … requests per second` in redis-benchmark's output:\n{}",
                    run.out.trim_end()
                )
            })?;
            out.push(Sample {
                requests,
                req_per_s: r.req_per_s,
                mb_per_s: f64::NAN,
                latency_us: r.p50_us.map(|p| (p, f64::NAN)),
                cpu: run.cpu,
                wall_s: run.wall_s,
                ..Sample::default()
            });
        }
        Ok(out)
    }

    /// One line on stderr for run `n` of `total`.
    pub(super) fn print(
        &self,
        n: usize,
        total: usize,
        round: usize,
        tag: &str,
        server: Server,
        s: &Sample,
    ) {
        eprintln!(
            "  [{n}/{total}] round {} {:<6} {:<38} {:>9.0} req/s CPU µs/req server {:.2} \
             machine {:.2}{}{}",
            round + 1,
            tag,
            server.label(),
            s.req_per_s,
            s.server_us(),
            s.machine_us(),
            s.latency_us
                .map(|(a, _)| format!(", p50 {}", us(a)))
                .unwrap_or_default(),
            if s.socket_errors > 0 {
                format!(", {} socket errors", s.socket_errors)
            } else {
                String::new()
            }
        );
    }
}
