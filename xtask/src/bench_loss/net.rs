//! The benchmark's network: three private namespaces joined by a bridge, the loss rules
//! on the bridge and what they count, and the kernel's TCP counters.
//!
//! ```text
//!   peer namespace rusty-loss-<pid>-p      bridge namespace rusty-loss-<pid>
//!  ┌──────────────────────────┐          ┌──────────────────────────────────────────────┐
//!  │ peer.py  peer0 10.81.0.1 ─┼── veth ──┼─ rlpeer ─┐                                   │
//!  └──────────────────────────┘          │          rlbr (bridge, nftables forward hook) │
//!                                         │  Rusty ── TAP rltap<pid> ─┘ │                  │
//!                                         │  10.81.0.2                  rlsrv             │
//!                                         └─────────────────────────────┼────────────────┘
//!   server namespace rusty-loss-<pid>-s                                veth
//!  ┌──────────────────────────────────────────────────┐                  │
//!  │ httpd / echo --discard on kernel sockets, srv0 10.81.0.3 ────────────┘
//!  └──────────────────────────────────────────────────┘
//! ```
//!
//! The Linux peer reaches Rusty (on the TAP) or the kernel server (on the veth) through
//! the same bridge, in one /24, and the loss rules drop what the bridge forwards to and
//! from the peer: the same rules whichever stack is at the far end, and a hop away from
//! both TCPs. (A rule in the output path of the sending host would be no loss at all:
//! Linux sees the failed transmit and sends the segment again as if nothing happened.)
//! Each direction draws its own `numgen random mod 10000`, so they lose independently.
//!
//! Segmentation offload would hand the bridge 64 KiB super-packets, and one drop would
//! then lose dozens of segments at once; so the kernel senders' devices have
//! `gso_max_segs 1` (their TCP builds one segment per packet), Rusty runs with
//! `--no-tso`, and the rules count packets longer than the MTU, so that a run can prove
//! none passed.
//!
//! Payload bytes are counted per TCP header length (`tcp doff`): for each value the
//! payload is the counted IP bytes minus packets × (20 + 4 × doff); the benchmark's IPv4
//! packets carry no options.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::path::Path;
use std::process::Command;

use crate::common::{ip, Namespace, Netns, Result};

pub(super) const MTU: u64 = 1500;
pub(super) const PEER_IP: &str = "10.81.0.1";
pub(super) const RUSTY_IP: &str = "10.81.0.2";
pub(super) const SERVER_IP: &str = "10.81.0.3";
pub(super) const PREFIX: u8 = 24;
const TABLE: &str = "rusty_loss";
const BRIDGE: &str = "rlbr";
/// The bridge's port towards the peer.
const PEER_PORT: &str = "rlpeer";

/// The three namespaces and the devices between them; all deleted when dropped.
pub(super) struct LossNet {
    /// The bridge's namespace, which holds the TAP; Rusty runs here.
    pub bridge: Netns,
    /// Where the Linux peer runs.
    pub peer: Namespace,
    /// Where the kernel-socket servers run.
    pub server: Namespace,
}

impl LossNet {
    pub(super) fn create(pid: u32) -> Result<LossNet> {
        let bridge = Netns::create_unaddressed(format!("rusty-loss-{pid}"), format!("rltap{pid}"))?;
        let peer = Namespace::create(format!("rusty-loss-{pid}-p"))?;
        let server = Namespace::create(format!("rusty-loss-{pid}-s"))?;
        let net = LossNet {
            bridge,
            peer,
            server,
        };
        let b = net.bridge.name.as_str();
        ip(&["-n", b, "link", "add", BRIDGE, "type", "bridge"])?;
        for (port, ns, dev, addr) in [
            (PEER_PORT, &net.peer.0, "peer0", PEER_IP),
            ("rlsrv", &net.server.0, "srv0", SERVER_IP),
        ] {
            ip(&[
                "-n", b, "link", "add", port, "type", "veth", "peer", "name", dev, "netns", ns,
            ])?;
            ip(&[
                "-n",
                ns,
                "addr",
                "add",
                &format!("{addr}/{PREFIX}"),
                "dev",
                dev,
            ])?;
            ip(&["-n", ns, "link", "set", dev, "gso_max_segs", "1", "up"])?;
            ip(&["-n", b, "link", "set", port, "master", BRIDGE, "up"])?;
        }
        ip(&["-n", b, "link", "set", &net.bridge.tap, "master", BRIDGE])?;
        ip(&["-n", b, "link", "set", BRIDGE, "up"])?;
        Ok(net)
    }

    /// Empties the peer's and the kernel server's neighbour caches. Every Rusty comes up
    /// with a new MAC address, and a peer that kept the last one would send into the
    /// void until its entry expired (Rusty's gratuitous ARP can come before the bridge
    /// forwards on the TAP's port); so every run starts with ARP, on both paths.
    pub(super) fn forget_neighbours(&self) -> Result<()> {
        for ns in [&self.peer.0, &self.server.0] {
            ip(&["-n", ns, "neigh", "flush", "all"])?;
        }
        Ok(())
    }

    /// Whether the bridge forwards on the TAP's port: Rusty has attached (carrier), and
    /// the bridge has taken the port up, which happens a little later.
    pub(super) fn tap_forwarding(&self) -> bool {
        let out = Command::new("ip")
            .args(["-n", &self.bridge.name, "-d", "-o", "link", "show", "dev"])
            .arg(&self.bridge.tap)
            .stderr(std::process::Stdio::null())
            .output();
        matches!(out, Ok(o) if o.status.success() && {
            let text = String::from_utf8_lossy(&o.stdout);
            text.contains("LOWER_UP") && text.contains("bridge_slave state forwarding")
        })
    }

    /// Replaces the loss rules (and so zeroes their counters): each direction drops
    /// `basis_points` / 10,000 of the TCP packets the bridge forwards to or from the
    /// peer.
    pub(super) fn set_loss(&self, nft: &Path, basis_points: u32, scratch: &Path) -> Result<()> {
        let file = scratch.join("loss.nft");
        std::fs::write(&file, ruleset(basis_points))
            .map_err(|e| format!("writing {}: {e}", file.display()))?;
        run_in(&self.bridge.name, nft, &["-f", &file.display().to_string()]).map(drop)
    }

    /// What the loss rules have counted since [`set_loss`](Self::set_loss).
    pub(super) fn loss_counters(&self, nft: &Path) -> Result<LossCounters> {
        let text = run_in(&self.bridge.name, nft, &["list", "table", "bridge", TABLE])?;
        parse_counters(&text).ok_or_else(|| format!("unexpected `nft list table` output:\n{text}"))
    }

    /// The kernel's TCP counters in namespace `ns` (`/proc/net/snmp` and `netstat`).
    pub(super) fn tcp_counters(&self, ns: &str) -> Result<HashMap<String, u64>> {
        let text = run_in(
            ns,
            Path::new("cat"),
            &["/proc/net/snmp", "/proc/net/netstat"],
        )?;
        Ok(parse_snmp(&text))
    }
}

/// `ip netns exec NS PROGRAM ARGS…` to completion; its stdout.
fn run_in(ns: &str, program: &Path, args: &[&str]) -> Result<String> {
    let out = Command::new("ip")
        .args(["netns", "exec", ns])
        .arg(program)
        .args(args)
        .output()
        .map_err(|e| format!("running {} in {ns}: {e}", program.display()))?;
    if !out.status.success() {
        return Err(format!(
            "`{} {}` in {ns} failed: {}",
            program.display(),
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// The nftables table: per direction (`in`: towards the peer; `out`: from it), a chain
/// that counts every TCP packet the bridge forwards by TCP header length (and those over
/// the MTU), and a chain that counts the same way what the random draw picked, and drops
/// it.
fn ruleset(basis_points: u32) -> String {
    let mut t =
        format!("add table bridge {TABLE}\ndelete table bridge {TABLE}\ntable bridge {TABLE} {{\n");
    for dir in ["in", "out"] {
        let _ = writeln!(t, "  chain wire_{dir} {{");
        for doff in 5..=15 {
            let _ = writeln!(t, "    tcp doff {doff} counter");
        }
        let _ = writeln!(t, "    ip length > {MTU} counter\n  }}");
        let _ = writeln!(t, "  chain lost_{dir} {{");
        for doff in 5..=15 {
            let _ = writeln!(t, "    tcp doff {doff} counter drop");
        }
        let _ = writeln!(t, "    counter drop\n  }}");
    }
    let _ = writeln!(
        t,
        "  chain pass {{\n    type filter hook forward priority filter; policy accept;"
    );
    for (dir, iface) in [("in", "oifname"), ("out", "iifname")] {
        let _ = writeln!(
            t,
            "    {iface} \"{PEER_PORT}\" meta l4proto tcp jump wire_{dir}\n    \
             {iface} \"{PEER_PORT}\" meta l4proto tcp numgen random mod 10000 < {basis_points} \
             jump lost_{dir}"
        );
    }
    t.push_str("  }\n}\n");
    t
}

/// Packets and TCP payload bytes one chain counted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct Count {
    pub packets: u64,
    pub payload: u64,
    /// Packets longer than the MTU (wire chains only).
    pub oversize: u64,
}

/// The four chains: everything the bridge forwarded and what it dropped, per direction
/// (`in`: towards the Linux peer; `out`: from it).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct LossCounters {
    pub wire_in: Count,
    pub lost_in: Count,
    pub wire_out: Count,
    pub lost_out: Count,
}

/// The counters in `nft list table bridge rusty_loss`.
pub(super) fn parse_counters(text: &str) -> Option<LossCounters> {
    let mut c = LossCounters::default();
    let mut chain: Option<&mut Count> = None;
    let mut seen = 0;
    for line in text.lines().map(str::trim) {
        if let Some(name) = line.strip_prefix("chain ") {
            let name = name.trim_end_matches('{').trim();
            chain = match name {
                "wire_in" => Some(&mut c.wire_in),
                "lost_in" => Some(&mut c.lost_in),
                "wire_out" => Some(&mut c.wire_out),
                "lost_out" => Some(&mut c.lost_out),
                _ => None,
            };
            seen += usize::from(chain.is_some());
            continue;
        }
        let Some(count) = chain.as_deref_mut() else {
            continue;
        };
        let words: Vec<&str> = line.split_whitespace().collect();
        let after = |key: &str| -> Option<u64> {
            let i = words.iter().position(|w| *w == key)?;
            words.get(i + 1)?.parse().ok()
        };
        let (Some(packets), Some(bytes)) = (after("packets"), after("bytes")) else {
            continue;
        };
        if line.starts_with("ip length") {
            count.oversize += packets;
        } else if let Some(doff) = after("doff") {
            count.packets += packets;
            count.payload += bytes.checked_sub(packets * (20 + 4 * doff))?;
        } else {
            // The lost chains' catch-all: nothing with a valid TCP header reaches it.
            count.packets += packets;
        }
    }
    (seen == 4).then_some(c)
}

/// `Tcp.RetransSegs`, `TcpExt.TCPTimeouts`, … from `/proc/net/snmp` and
/// `/proc/net/netstat`, where each group is a line of names followed by a line of
/// values with the same prefix.
pub(super) fn parse_snmp(text: &str) -> HashMap<String, u64> {
    let mut out = HashMap::new();
    let lines: Vec<&str> = text.lines().collect();
    for pair in lines.windows(2) {
        let (Some((group, names)), Some((group2, values))) =
            (pair[0].split_once(':'), pair[1].split_once(':'))
        else {
            continue;
        };
        if group != group2
            || names
                .split_whitespace()
                .next()
                .is_some_and(|w| w.parse::<i64>().is_ok())
        {
            continue;
        }
        for (n, v) in names.split_whitespace().zip(values.split_whitespace()) {
            if let Ok(v) = v.parse::<u64>() {
                out.insert(format!("{group}.{n}"), v);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rules_drop_both_directions_on_the_bridge() {
        let r = ruleset(30);
        assert!(r.starts_with("add table bridge rusty_loss\ndelete table bridge rusty_loss\n"));
        assert!(r.contains("type filter hook forward priority filter; policy accept;"));
        assert!(r.contains(
            "oifname \"rlpeer\" meta l4proto tcp numgen random mod 10000 < 30 jump lost_in"
        ));
        assert!(r.contains(
            "iifname \"rlpeer\" meta l4proto tcp numgen random mod 10000 < 30 jump lost_out"
        ));
        assert!(r.contains("    tcp doff 15 counter drop\n    counter drop\n  }"));
    }

    #[test]
    fn reads_nft_counters() {
        let text = "table ip rusty_loss {\n\
            \tchain wire_in {\n\
            \t\ttcp doff 5 counter packets 2 bytes 80\n\
            \t\ttcp doff 8 counter packets 14637 bytes 21951292\n\
            \t\tip length > 1500 counter packets 0 bytes 0\n\
            \t}\n\
            \n\
            \tchain lost_in {\n\
            \t\ttcp doff 8 counter packets 144 bytes 216000 drop\n\
            \t\tcounter packets 0 bytes 0 drop\n\
            \t}\n\
            \tchain wire_out {\n\
            \t\ttcp doff 8 counter packets 7000 bytes 364000\n\
            \t\tip length > 1500 counter packets 3 bytes 9000\n\
            \t}\n\
            \tchain lost_out {\n\
            \t\ttcp doff 8 counter packets 70 bytes 3640 drop\n\
            \t\tcounter packets 0 bytes 0 drop\n\
            \t}\n\
            \tchain input {\n\
            \t\ttype filter hook input priority filter; policy accept;\n\
            \t\tiifname { \"a\", \"b\" } meta l4proto tcp jump wire_in\n\
            \t}\n\
            }\n";
        let c = parse_counters(text).unwrap();
        assert_eq!(
            c.wire_in,
            Count {
                packets: 14_639,
                payload: 21_951_292 - 14_637 * 52,
                oversize: 0
            }
        );
        assert_eq!(
            c.lost_in,
            Count {
                packets: 144,
                payload: 144 * 1448,
                oversize: 0
            }
        );
        assert_eq!(c.wire_out.payload, 0);
        assert_eq!(c.wire_out.oversize, 3);
        assert_eq!(c.lost_out.packets, 70);
        assert!(parse_counters("table ip rusty_loss {\n}\n").is_none());
    }

    #[test]
    fn reads_snmp_tables() {
        let text = "Ip: Forwarding DefaultTTL\nIp: 1 64\n\
                    Tcp: RtoAlgorithm RtoMin RetransSegs MaxConn\nTcp: 1 200 151 -1\n\
                    TcpExt: SyncookiesSent TCPTimeouts\nTcpExt: 0 7\n";
        let m = parse_snmp(text);
        assert_eq!(m["Tcp.RetransSegs"], 151);
        assert_eq!(m["TcpExt.TCPTimeouts"], 7);
        assert_eq!(m["Ip.DefaultTTL"], 64);
        assert!(!m.contains_key("Tcp.MaxConn"));
        assert!(!m.contains_key("Tcp.1"));
    }
}
