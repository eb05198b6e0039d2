//! One measured transfer: fresh loss rules, a fresh server pinned to the server core,
//! the Linux peer pinned to the client core, counters around the peer's run, and the
//! server stopped by PID.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use super::net::{LossNet, MTU, PREFIX, RUSTY_IP, SERVER_IP};
use super::peer::{parse_result, PeerResult, PEER_PY};
use super::report::num;
use super::{Case, Direction, Options, Stack};
use crate::common::{
    check_interrupted, exec_pinned, explain_run, listening, machine_cpu_seconds,
    process_cpu_seconds, Proc, Result,
};

const HTTP_PORT: u16 = 8080;
const DISCARD_PORT: u16 = 9;
const SINGLE_FILE: &str = "single.bin";
const MULTI_FILE: &str = "multi.bin";

/// The files httpd serves and the peer program, all in one directory.
pub(super) struct Files {
    pub root: PathBuf,
    pub single: u64,
    pub peer: PathBuf,
}

/// Writes the two files httpd serves (pseudo-random bytes, so nothing along the path
/// could compress them) and the peer program.
pub(super) fn write_files(dir: &Path, single: u64, multi: u64) -> Result<Files> {
    let root = dir.join("files");
    fs::create_dir_all(&root).map_err(|e| format!("creating {}: {e}", root.display()))?;
    for (name, len) in [(SINGLE_FILE, single), (MULTI_FILE, multi)] {
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15 ^ len;
        let bytes: Vec<u8> = (0..len.div_ceil(8))
            .flat_map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x.to_le_bytes()
            })
            .take(len as usize)
            .collect();
        let path = root.join(name);
        fs::write(&path, bytes).map_err(|e| format!("writing {}: {e}", path.display()))?;
    }
    let peer = dir.join("peer.py");
    fs::write(&peer, PEER_PY).map_err(|e| format!("writing {}: {e}", peer.display()))?;
    Ok(Files { root, single, peer })
}

/// What every run needs.
pub(super) struct Ctx<'a> {
    pub opts: &'a Options,
    pub httpd: PathBuf,
    pub echo: PathBuf,
    pub python: PathBuf,
    pub nft: PathBuf,
    pub files: Files,
    pub net: &'a LossNet,
    pub scratch: &'a Path,
    pub logs: &'a Path,
    pub interrupted: &'a AtomicBool,
}

/// One transfer's numbers.
#[derive(Debug, Clone, Default)]
pub(super) struct Sample {
    pub peer: PeerResult,
    /// Payload bytes the sender put on the wire beyond those the receiving application
    /// read (signed: a transfer cut short by the timeout leaves bytes in flight).
    pub retransmitted: i64,
    /// Payload bytes the rules dropped in the data direction.
    pub lost: u64,
    /// Packets the rules dropped: in the data direction, and in the other (the ACKs).
    pub dropped_packets: (u64, u64),
    /// The sender's retransmission timeouts.
    pub rtos: u64,
    /// What the sender's stack says it retransmitted, for the log: Rusty's counters, or
    /// Linux's `Tcp.RetransSegs` and some of the `TcpExt` counters behind them.
    pub stack_note: String,
    pub server_cpu_s: f64,
    pub machine_cpu_s: f64,
}

impl Sample {
    pub(super) fn goodput_mb_s(&self) -> f64 {
        if self.peer.secs > 0.0 {
            self.peer.payload_bytes as f64 / 1e6 / self.peer.secs
        } else {
            f64::NAN
        }
    }

    pub(super) fn retransmitted_per_lost(&self) -> f64 {
        if self.lost == 0 {
            f64::NAN
        } else {
            self.retransmitted as f64 / self.lost as f64
        }
    }

    fn per_mb(&self, cpu_s: f64) -> f64 {
        if self.peer.payload_bytes == 0 {
            f64::NAN
        } else {
            cpu_s * 1e3 / (self.peer.payload_bytes as f64 / 1e6)
        }
    }

    /// Server CPU milliseconds per MB moved.
    pub(super) fn server_ms_per_mb(&self) -> f64 {
        self.per_mb(self.server_cpu_s)
    }

    /// Whole-machine CPU milliseconds per MB moved.
    pub(super) fn machine_ms_per_mb(&self) -> f64 {
        self.per_mb(self.machine_cpu_s)
    }

    /// One line for the progress log.
    pub(super) fn summary(&self) -> String {
        format!(
            "{:>8.2} MB/s ({:.2} s{}); resent/lost {} ({} B / {} B; {} data, {} ack \
             packets dropped); RTOs {}; sender says: {}; CPU ms/MB server {} machine {}",
            self.goodput_mb_s(),
            self.peer.secs,
            if self.peer.timed_out {
                ", TIMED OUT"
            } else {
                ""
            },
            num(self.retransmitted_per_lost()),
            self.retransmitted,
            self.lost,
            self.dropped_packets.0,
            self.dropped_packets.1,
            self.rtos,
            self.stack_note,
            num(self.server_ms_per_mb()),
            num(self.machine_ms_per_mb()),
        )
    }
}

/// The sender's counters as its stack reports them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct RustyCounters {
    pub retransmissions: u64,
    pub retransmitted_bytes: u64,
    pub rtos: u64,
}

/// Sums Rusty's per-worker counters from the `worker N: …` lines its servers log on
/// stop: `… retransmissions R (B bytes; fast F rack-lost L tlp T rto O undone U); …`.
pub(super) fn parse_rusty_counters(log: &str) -> Option<RustyCounters> {
    let mut c = RustyCounters::default();
    let mut seen = false;
    for line in log.lines().filter(|l| l.starts_with("worker ")) {
        let Some(rest) = line.split("retransmissions ").nth(1) else {
            continue;
        };
        let inner = rest.split_once('(')?.1.split_once(')')?.0;
        let words: Vec<&str> = inner
            .split(|c: char| c == ';' || c.is_whitespace())
            .filter(|w| !w.is_empty())
            .collect();
        let before = |key: &str| -> Option<u64> {
            let i = words.iter().position(|w| *w == key)?;
            words.get(i.checked_sub(1)?)?.parse().ok()
        };
        let after = |key: &str| -> Option<u64> {
            let i = words.iter().position(|w| *w == key)?;
            words.get(i + 1)?.parse().ok()
        };
        c.retransmissions += rest.split_whitespace().next()?.parse::<u64>().ok()?;
        c.retransmitted_bytes += before("bytes")?;
        c.rtos += after("rto")?;
        seen = true;
    }
    seen.then_some(c)
}

/// The discard server's `discard total: N bytes discarded on M connections (F failed)`.
pub(super) fn parse_discarded(log: &str) -> Option<(u64, u64)> {
    let line = log
        .lines()
        .rev()
        .find(|l| l.starts_with("discard total: "))?;
    let words: Vec<&str> = line.split_whitespace().collect();
    let bytes = words.get(2)?.parse().ok()?;
    let failed = words
        .iter()
        .position(|w| *w == "failed)")
        .and_then(|i| words.get(i - 1))
        .and_then(|w| w.trim_start_matches('(').parse().ok())?;
    Some((bytes, failed))
}

impl Ctx<'_> {
    pub(super) fn run_one(&self, case: &Case, stack: Stack, n: usize) -> Result<Sample> {
        check_interrupted(self.interrupted)?;
        let tag = format!(
            "{n:03}-{:?}-{}x{}-{}bp-{:?}",
            case.direction, case.conns, case.bytes, case.basis_points, stack
        )
        .to_lowercase();
        let server_log = self.logs.join(format!("{tag}-server.log"));
        let peer_log = self.logs.join(format!("{tag}-peer.log"));
        self.net
            .set_loss(&self.nft, case.basis_points, self.scratch)?;
        self.net.forget_neighbours()?;
        let (mut server, port) = self.start_server(case.direction, stack, &server_log)?;
        // The sender's kernel counters: the server's namespace when Linux serves the file,
        // the peer's when the peer sends; Rusty's own counters when Rusty sends.
        let linux_sender_ns = match (case.direction, stack) {
            (Direction::RustySends, Stack::Rusty) => None,
            (Direction::RustySends, Stack::Linux) => Some(self.net.server.0.as_str()),
            (Direction::RustyReceives, _) => Some(self.net.peer.0.as_str()),
        };

        let cmd = self.peer_command(case, stack, port);

        let snmp_before = linux_sender_ns
            .map(|ns| self.net.tcp_counters(ns))
            .transpose()?;
        let cpu_before = process_cpu_seconds(server.pid())?;
        let machine_before = machine_cpu_seconds()?;
        let mut peer = Proc::spawn("peer.py", cmd, &peer_log)?;
        let limit = Duration::from_secs(self.opts.timeout + 20);
        let status = peer.wait_for(limit, self.interrupted)?;
        let machine_after = machine_cpu_seconds()?;
        let cpu_after = process_cpu_seconds(server.pid());
        let snmp_after = linux_sender_ns
            .map(|ns| self.net.tcp_counters(ns))
            .transpose()?;
        let loss = self.net.loss_counters(&self.nft)?;
        let server_alive = server.try_status()?.is_none();
        server.stop(Duration::from_secs(5));

        let out = fs::read_to_string(&peer_log).unwrap_or_default();
        let server_out = fs::read_to_string(&server_log).unwrap_or_default();
        let what = format!(
            "Rusty as {}, {}, {} loss, {}",
            case.direction.label(),
            case.transfer(),
            case.loss(),
            stack.label()
        );
        let explain = || explain_run("peer.py", &out, &server_log);
        let status = status.ok_or_else(|| {
            format!(
                "{what}: peer.py did not exit within {} s{}",
                limit.as_secs(),
                explain()
            )
        })?;
        let peer_result = parse_result(&out)
            .ok_or_else(|| format!("{what}: peer.py printed no RESULT ({status}){}", explain()))?;
        if !(status.success() || status.code() == Some(3) && peer_result.timed_out) {
            return Err(format!("{what}: peer.py failed ({status}){}", explain()));
        }
        if !server_alive {
            return Err(format!("{what}: the server exited early{}", explain()));
        }
        if loss.wire_in.oversize + loss.wire_out.oversize > 0 {
            return Err(format!(
                "{what}: {} packets longer than the {}-byte MTU passed the loss rules: \
                 segmentation offload is on somewhere, and one drop would lose a burst",
                loss.wire_in.oversize + loss.wire_out.oversize,
                MTU
            ));
        }

        let (delivered, wire, lost, acks_lost) = match case.direction {
            Direction::RustySends => (
                peer_result.stream_bytes,
                loss.wire_in,
                loss.lost_in,
                loss.lost_out,
            ),
            Direction::RustyReceives => {
                let (taken, failed) = parse_discarded(&server_out).ok_or_else(|| {
                    format!("{what}: the discard server reported no total{}", explain())
                })?;
                if !peer_result.timed_out && (taken != peer_result.payload_bytes || failed > 0) {
                    return Err(format!(
                        "{what}: the discard server took {taken} bytes ({failed} connections \
                         failed), the peer sent {}{}",
                        peer_result.payload_bytes,
                        explain()
                    ));
                }
                (taken, loss.wire_out, loss.lost_out, loss.lost_in)
            }
        };
        let (rtos, stack_note) = match (snmp_before, snmp_after) {
            (Some(before), Some(after)) => {
                let delta = |k: &str| {
                    after
                        .get(k)
                        .copied()
                        .unwrap_or(0)
                        .saturating_sub(before.get(k).copied().unwrap_or(0))
                };
                let note = format!(
                    "Linux retransmitted {} segments (fast {}, slow start {}, loss probes {}, \
                     spurious RTOs {})",
                    delta("Tcp.RetransSegs"),
                    delta("TcpExt.TCPFastRetrans"),
                    delta("TcpExt.TCPSlowStartRetrans"),
                    delta("TcpExt.TCPLossProbes"),
                    delta("TcpExt.TCPSpuriousRTOs"),
                );
                (delta("TcpExt.TCPTimeouts"), note)
            }
            _ => {
                let c = parse_rusty_counters(&server_out).ok_or_else(|| {
                    format!("{what}: Rusty logged no worker counters{}", explain())
                })?;
                let note = format!(
                    "Rusty retransmitted {} segments, {} bytes",
                    c.retransmissions, c.retransmitted_bytes
                );
                (c.rtos, note)
            }
        };
        Ok(Sample {
            peer: peer_result,
            retransmitted: wire.payload as i64 - delivered as i64,
            lost: lost.payload,
            dropped_packets: (lost.packets, acks_lost.packets),
            rtos,
            stack_note,
            server_cpu_s: cpu_after? - cpu_before,
            machine_cpu_s: machine_after - machine_before,
        })
    }

    /// `peer.py` for `case` against `stack`'s server on `port`, pinned in the peer's
    /// namespace.
    fn peer_command(&self, case: &Case, stack: Stack, port: u16) -> Command {
        let host = match stack {
            Stack::Rusty => RUSTY_IP,
            Stack::Linux => SERVER_IP,
        };
        let mut cmd = exec_pinned(&self.net.peer.0, self.opts.host.client_cpu, &self.python);
        cmd.arg("-u").arg(&self.files.peer);
        match case.direction {
            Direction::RustySends => {
                // Both files have the right size when the sizes are equal.
                let file = if case.bytes == self.files.single {
                    SINGLE_FILE
                } else {
                    MULTI_FILE
                };
                cmd.args(["get", host, &port.to_string(), "--path"])
                    .arg(format!("/{file}"));
            }
            Direction::RustyReceives => {
                cmd.args(["send", host, &port.to_string()]);
            }
        }
        cmd.arg("--conns")
            .arg(case.conns.to_string())
            .arg("--bytes")
            .arg(case.bytes.to_string())
            .arg("--deadline")
            .arg(self.opts.timeout.to_string());
        cmd
    }

    /// Starts the server for `direction` on `stack` and waits until it accepts.
    fn start_server(&self, direction: Direction, stack: Stack, log: &Path) -> Result<(Proc, u16)> {
        let (program, port) = match direction {
            Direction::RustySends => (&self.httpd, HTTP_PORT),
            Direction::RustyReceives => (&self.echo, DISCARD_PORT),
        };
        let cpu = self.opts.host.server_cpu;
        let mut cmd = match stack {
            Stack::Rusty => self.net.bridge.exec_pinned(cpu, program),
            Stack::Linux => exec_pinned(&self.net.server.0, cpu, program),
        };
        cmd.arg(port.to_string());
        if direction == Direction::RustySends {
            cmd.arg(&self.files.root);
        }
        if stack == Stack::Rusty {
            cmd.args(["1", &format!("tap:{}", self.net.bridge.tap)])
                .arg(format!("{RUSTY_IP}/{PREFIX}"))
                .args(["1", "--no-tso"]);
        }
        if direction == Direction::RustyReceives {
            cmd.arg("--discard");
        }
        cmd.args(["--grace", "1"]);
        if let Some(us) = self.opts.host.spin_us {
            cmd.arg("--spin-us").arg(us.to_string());
        }
        let mut server = Proc::spawn("server", cmd, log)?;
        let what = format!("the {} server", stack.label());
        let times = (Duration::from_secs(20), Duration::from_millis(200));
        crate::common::wait_ready(&mut server, &what, log, times, self.interrupted, |pid| {
            Ok(match stack {
                Stack::Rusty => self.net.tap_forwarding(),
                Stack::Linux => listening(pid, port),
            })
        })?;
        Ok((server, port))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_rustys_counters() {
        let log = "httpd: serving 2 files, 4000 bytes from /tmp/x on port 8080 (1 link)\n\
            worker 0: frames in 10 out 20; segments in 9 out 19; retransmissions 7 \
            (10136 bytes; fast 2 rack-lost 0 tlp 1 rto 3 undone 0); conns opened 1+0 \
            closed 1 reset 0 timed-out 0 aborted 0 refused 0; rst sent 0; syn cookies 0/0\n\
            worker 1: frames in 1 out 2; segments in 1 out 1; retransmissions 1 (1448 \
            bytes; fast 0 rack-lost 0 tlp 0 rto 1 undone 0); conns opened 0+0 closed 0\n\
            httpd worker 0: requests 1\n";
        assert_eq!(
            parse_rusty_counters(log),
            Some(RustyCounters {
                retransmissions: 8,
                retransmitted_bytes: 11_584,
                rtos: 4
            })
        );
        assert_eq!(parse_rusty_counters("httpd: serving 2 files\n"), None);
    }

    #[test]
    fn reads_the_discard_total() {
        let log = "discard worker 0: 5 bytes discarded on 1 connections (0 failed)\n\
                   discard total: 64000000 bytes discarded on 16 connections (2 failed)\n";
        assert_eq!(parse_discarded(log), Some((64_000_000, 2)));
        assert_eq!(parse_discarded("worker 0: frames in 1\n"), None);
    }
}
