//! The Rusty-on-AF_XDP row that `bench http` and `bench echo` share: its veth pair in
//! the benchmark's namespace, why the row is skipped when it cannot run, and the goals
//! it is held to. Rusty is up on it once a TCP connection from the namespace's kernel
//! opens: the XDP program, the AF_XDP socket and the listener are all there.
//!
//! ```text
//!   benchmark namespace
//!  ┌────────────────────────────────────────────────────────────────────────────┐
//!  │ client (kernel sockets) ── CLIENT-END 10.x.1.1 ══ veth ══ XDP-END ── Rusty  │
//!  │                            transmit checksum off          10.x.1.2, AF_XDP │
//!  └────────────────────────────────────────────────────────────────────────────┘
//! ```
//!
//! A benchmark that measures IPv6 too gives both ends addresses in an IPv6 /64 as well
//! ([`Plan::ipv6`]; `bench http` and `bench echo`: `fd00:x:1::1` and `fd00:x:1::2`).
//! Rusty (`xdp:XDP-END`) attaches its XDP program to its end and takes the frames for its
//! addresses from one AF_XDP socket per worker (copy mode on a veth); the client reaches it
//! through the namespace's kernel and the client end, as it reaches Rusty on TAP through
//! the TAP's host side. Both ends have one queue pair per server worker: a veth delivers
//! a frame on the peer's receive queue numbered like the transmit queue it was sent on,
//! and Rusty has a socket only on queues below its worker count, so a spare queue would
//! hand some flows to the kernel instead. The client end does not offload its transmit
//! checksums: a veth would pass the frame on with only the pseudo-header summed (as for
//! a NIC that finishes it), and an XDP program, so AF_XDP, sees it as it is; on a wire,
//! checksums are complete.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::AtomicBool;

use crate::common::{apt_install, find_program, tail, Netns, Result, RunArgs};
use crate::family::{Family, Subnet};
use crate::goals;
pub(crate) use crate::goals::{Goal, Per};

/// Where a benchmark puts the row: the two letters its device names start with (like
/// its TAP's), the client end's address and Rusty's, in the same /24, the same in an
/// IPv6 /64 when the benchmark measures IPv6 too, and the queue pairs of each veth end
/// (the server's workers or processes on AF_XDP).
pub(crate) struct Plan {
    pub prefix: &'static str,
    pub client_cidr: &'static str,
    pub stack_ip: &'static str,
    pub ipv6: Option<Subnet>,
    pub queues: usize,
}

impl Plan {
    /// Rusty's addresses as its link spec writes them ([`rusty_addresses`]).
    pub(crate) fn rusty_addresses(&self) -> String {
        rusty_addresses(self.stack_ip, self.ipv6)
    }
}

/// Rusty's addresses on the veth as a link spec writes them: `IP/24`, or with IPv6
/// `IP/24,IP6/64`.
fn rusty_addresses(stack_ip: &str, ipv6: Option<Subnet>) -> String {
    let v4 = format!("{stack_ip}/24");
    match ipv6 {
        Some(v6) => format!("{v4},{}", v6.rusty_cidr()),
        None => v4,
    }
}

/// Rusty's end of the veth pair, and the addresses the client reaches Rusty at.
pub(crate) struct XdpLink {
    /// The veth end Rusty attaches to (`xdp:NAME`).
    pub ifname: String,
    /// Rusty's address, in the client end's /24.
    pub stack_ip: &'static str,
    /// Rusty's IPv6 subnet, when it has one.
    pub ipv6: Option<Subnet>,
    /// Queue pairs of each end.
    pub queues: usize,
}

impl XdpLink {
    /// The pair `<prefix>xdp<pid>` (Rusty's end) – `<prefix>cli<pid>` (the client end,
    /// addressed, transmit checksum offload off) in `net`, deleted with it.
    pub(crate) fn create(net: &mut Netns, plan: &Plan, ethtool: &Path) -> Result<XdpLink> {
        let pid = std::process::id();
        let ifname = format!("{}xdp{pid}", plan.prefix);
        let client = format!("{}cli{pid}", plan.prefix);
        net.add_veth(&ifname, &client, plan.queues)?;
        net.add_address(&client, plan.client_cidr)?;
        if let Some(v6) = plan.ipv6 {
            net.add_address(&client, v6.kernel_cidr)?;
        }
        let out = Command::new("ip")
            .args(["netns", "exec", &net.name])
            .arg(ethtool)
            .args(["-K", &client, "tx", "off"])
            .output()
            .map_err(|e| format!("running ethtool: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "`ethtool -K {client} tx off` failed: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        Ok(XdpLink {
            ifname,
            stack_ip: plan.stack_ip,
            ipv6: plan.ipv6,
            queues: plan.queues,
        })
    }

    /// The link arguments of a Rusty binary: `1 xdp:NAME ADDRESSES QUEUES`
    /// ([`rusty_addresses`]).
    pub(crate) fn link_args(&self) -> [String; 4] {
        [
            "1".into(),
            format!("xdp:{}", self.ifname),
            rusty_addresses(self.stack_ip, self.ipv6),
            self.queues.to_string(),
        ]
    }

    /// Rusty's address in `family`.
    pub(crate) fn stack_ip_of(&self, family: Family) -> Result<&'static str> {
        match (family, self.ipv6) {
            (Family::V4, _) => Ok(self.stack_ip),
            (Family::V6, Some(v6)) => Ok(v6.rusty),
            (Family::V6, None) => Err(format!("{} has no IPv6 address", self.ifname)),
        }
    }

    /// The link as `rusty-run --link` takes it: `xdp:NAME IP/24 QUEUES`.
    pub(crate) fn rusty_run_link(&self) -> String {
        let [_, name, cidr, queues] = self.link_args();
        format!("{name} {cidr} {queues}")
    }
}

/// The row's link in `net` as `plan` says (see [`XdpLink::create`]), or why the row is
/// skipped: `--no-xdp`, or no ethtool (found, or unless `no_install` installed with
/// apt-get, logging to `log`).
pub(crate) fn setup(
    run: &RunArgs,
    no_install: bool,
    net: &mut Netns,
    plan: &Plan,
    log: &Path,
    interrupted: &AtomicBool,
) -> Result<std::result::Result<XdpLink, String>> {
    if run.no_xdp {
        return Ok(Err("left out with --no-xdp".into()));
    }
    Ok(match ethtool(no_install, log, interrupted)? {
        Ok(ethtool) => Ok(XdpLink::create(net, plan, &ethtool)?),
        Err(why) => Err(why),
    })
}

/// Says on stderr how the row goes, for the benchmark `what`.
pub(crate) fn announce(what: &str, outcome: &Outcome) {
    match outcome {
        Ok(mode) => eprintln!("{what}: Rusty on AF_XDP runs in {mode}"),
        Err(why) => eprintln!("{what}: Rusty on AF_XDP is skipped: {why}"),
    }
}

/// ethtool, found or (unless `no_install`) installed with apt-get; otherwise why the row
/// is skipped.
pub(crate) fn ethtool(
    no_install: bool,
    log: &Path,
    interrupted: &AtomicBool,
) -> Result<std::result::Result<PathBuf, String>> {
    if let Some(p) = find_program("ethtool") {
        return Ok(Ok(p));
    }
    if no_install {
        return Ok(Err(
            "ethtool is not installed (--no-install); it turns off the client veth's \
             checksum offload"
                .into(),
        ));
    }
    eprintln!("xtask: installing ethtool with apt-get (Debian package)");
    if let Some(Err(e)) = apt_install(&["ethtool"], log, interrupted)?.pop() {
        return Ok(Err(format!("ethtool could not be installed: {e}")));
    }
    Ok(find_program("ethtool").ok_or_else(|| "ethtool is not found after installing".into()))
}

/// How the AF_XDP row went: the mode the driver reported for its queue ("native XDP,
/// copy mode"), or why the row was skipped.
pub(crate) type Outcome = std::result::Result<String, String>;

/// The row's outcome from a trial start of `program` on `link` (`started`) and the log
/// it wrote (at info level, where the driver reports each queue's mode).
pub(crate) fn outcome(program: &str, link: &XdpLink, log: &Path, started: Result<()>) -> Outcome {
    match started {
        Ok(()) => {
            let text = std::fs::read_to_string(log).unwrap_or_default();
            Ok(queue_mode(&text, &link.ifname).unwrap_or_else(|| "a mode it did not log".into()))
        }
        Err(e) => Err(skip_note(program, log, &e)),
    }
}

/// The mode of queue 0 from the driver's line `xdp:NAME queue 0: MODE`.
fn queue_mode(log: &str, ifname: &str) -> Option<String> {
    let key = format!("xdp:{ifname} queue 0: ");
    log.lines()
        .find_map(|l| Some(l[l.find(&key)? + key.len()..].trim().to_string()))
}

/// The results page's sentence on the AF_XDP row: its mode, or why its rows are missing.
pub(crate) fn mode_note(outcome: &Outcome) -> String {
    match outcome {
        Ok(mode) => format!(
            "\n\nRusty on AF_XDP ran in {mode}, as the driver reported for the veth's queue."
        ),
        Err(why) => format!("\n\nRusty on AF_XDP was skipped ({why}): its rows are missing."),
    }
}

/// Why Rusty could not come up on AF_XDP, from `program`'s log (`error` when the log
/// says nothing).
fn skip_note(program: &str, log: &Path, error: &str) -> String {
    let said = tail(log, 3);
    if said.contains("not built into this binary") {
        return format!("the xdp driver is not built into `{program}`");
    }
    let why = said
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or(error.lines().next().unwrap_or(""))
        .trim();
    format!("`{program}` did not come up on AF_XDP (the kernel may refuse it here): {why}")
}

/// Where Rusty on AF_XDP stands against `goals` ([`goals::verdict`]); `baseline` names
/// the kernel backend.
pub(crate) fn verdict(
    goals: &[Goal],
    unit: &str,
    baseline: &str,
    skipped: Option<&str>,
    ratio: impl Fn(&Goal) -> f64,
) -> String {
    let head = format!("Goals for Rusty on AF_XDP against {baseline}");
    goals::verdict(&head, goals, unit, skipped, ratio)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verdict_names_af_xdp() {
        let goals = [Goal::new("small", Per::ServerCpu, 3.0)];
        let v = verdict(&goals, "request", "the kernel", None, |_| 3.5);
        assert!(
            v.starts_with("Goals for Rusty on AF_XDP against the kernel: met 1 of 1"),
            "{v}"
        );
    }

    #[test]
    fn reads_the_queue_mode() {
        let log = "httpd: serving /x\nxdp:rhxdp7 queue 0: native XDP, copy mode\n";
        assert_eq!(
            queue_mode(log, "rhxdp7").as_deref(),
            Some("native XDP, copy mode")
        );
        assert_eq!(queue_mode(log, "rhxdp"), None);
    }

    #[test]
    fn skip_notes_name_the_cause() {
        let dir = std::env::temp_dir().join(format!("xtask-xdp-note-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let log = dir.join("log");
        std::fs::write(
            &log,
            "httpd: the xdp driver is not built into this binary\n",
        )
        .unwrap();
        assert_eq!(
            skip_note("httpd", &log, "exited"),
            "the xdp driver is not built into `httpd`"
        );
        std::fs::write(
            &log,
            "echo: AF_XDP socket: Address family not supported\n\n",
        )
        .unwrap();
        let n = skip_note("echo", &log, "exited");
        assert!(
            n.ends_with(": echo: AF_XDP socket: Address family not supported"),
            "{n}"
        );
        std::fs::write(&log, "").unwrap();
        assert!(
            skip_note("echo", &log, "not ready after 10 s\n…").ends_with("not ready after 10 s")
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
