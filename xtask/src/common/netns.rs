//! The benchmarks' network namespaces: one holding a multi-queue TAP (and veth pairs),
//! a plain one, and running a program pinned inside one; all removed when dropped.

use super::*;

/// A private network namespace holding a multi-queue TAP whose host side has an
/// address, and any veth pairs added to it; all deleted when dropped.
pub(crate) struct Netns {
    pub name: String,
    pub tap: String,
    /// One end of each veth pair made here (deleting one end deletes the pair).
    veths: Vec<String>,
}

impl Netns {
    pub(crate) fn create(name: String, tap: String, host_cidr: &str) -> Result<Netns> {
        let ns = Netns::create_unaddressed(name, tap)?;
        ns.add_address(&ns.tap, host_cidr)?;
        Ok(ns)
    }

    /// Gives `dev` in the namespace the address `cidr`; an IPv6 one is usable at once
    /// (`nodad`: no duplicate address detection on a link the benchmark made).
    pub(crate) fn add_address(&self, dev: &str, cidr: &str) -> Result<()> {
        let n = self.name.as_str();
        if cidr.contains(':') {
            ip(&["-n", n, "-6", "addr", "add", cidr, "dev", dev, "nodad"])
        } else {
            ip(&["-n", n, "addr", "add", cidr, "dev", dev])
        }
    }

    /// The namespace and its TAP (up), with no address on the TAP's host side.
    pub(crate) fn create_unaddressed(name: String, tap: String) -> Result<Netns> {
        ip(&["netns", "add", &name])?;
        // From here on, Drop deletes whatever was made.
        let ns = Netns {
            name,
            tap,
            veths: Vec::new(),
        };
        let n = ns.name.as_str();
        let t = ns.tap.as_str();
        ip(&["-n", n, "link", "set", "lo", "up"])?;
        ip(&[
            "-n",
            n,
            "tuntap",
            "add",
            "dev",
            t,
            "mode",
            "tap",
            "multi_queue",
            "vnet_hdr",
        ])?;
        ip(&["-n", n, "link", "set", t, "up"])?;
        Ok(ns)
    }

    /// A veth pair `a`–`b` inside the namespace, each end with `queues` receive and
    /// transmit queues, both up, without addresses.
    pub(crate) fn add_veth(&mut self, a: &str, b: &str, queues: usize) -> Result<()> {
        let q = queues.to_string();
        let per_end = ["numtxqueues", &q, "numrxqueues", &q];
        let mut args = vec!["-n", &self.name, "link", "add", a];
        args.extend(per_end);
        args.extend(["type", "veth", "peer", "name", b]);
        args.extend(per_end);
        ip(&args)?;
        self.veths.push(a.to_string());
        for dev in [a, b] {
            ip(&["-n", &self.name, "link", "set", dev, "up"])?;
        }
        Ok(())
    }

    /// A veth pair `a`–`b` with `a` in this namespace and `b` in namespace `peer_ns`,
    /// both up, without addresses; deleted with this namespace.
    pub(crate) fn add_veth_to(&mut self, a: &str, b: &str, peer_ns: &str) -> Result<()> {
        ip(&[
            "-n", &self.name, "link", "add", a, "type", "veth", "peer", "name", b, "netns", peer_ns,
        ])?;
        self.veths.push(a.to_string());
        ip(&["-n", &self.name, "link", "set", a, "up"])?;
        ip(&["-n", peer_ns, "link", "set", b, "up"])
    }

    /// `ip netns exec NAME taskset -c CPUS PROGRAM` (`cpus`: one core or a list).
    pub(crate) fn exec_pinned(&self, cpus: impl std::fmt::Display, program: &Path) -> Command {
        exec_pinned(&self.name, cpus, program)
    }

    /// Whether a TCP connection from this namespace's kernel to `addr`:`port` opens
    /// within a second.
    pub(crate) fn connects(&self, addr: &str, port: u16) -> bool {
        Command::new("ip")
            .args(["netns", "exec", &self.name, "timeout", "1", "bash", "-c"])
            .arg(format!("exec 3<>/dev/tcp/{addr}/{port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    }

    /// Sets a (namespaced) sysctl inside the namespace.
    pub(crate) fn sysctl(&self, key: &str, value: &str) -> Result<()> {
        let out = Command::new("ip")
            .args(["netns", "exec", &self.name, "sysctl", "-q", "-w"])
            .arg(format!("{key}={value}"))
            .output()
            .map_err(|e| format!("running sysctl: {e}"))?;
        if out.status.success() {
            Ok(())
        } else {
            Err(format!(
                "sysctl {key}={value} in {} failed: {}",
                self.name,
                String::from_utf8_lossy(&out.stderr).trim()
            ))
        }
    }

    pub(crate) fn tap_has_carrier(&self) -> bool {
        let out = Command::new("ip")
            .args(["-n", &self.name, "-o", "link", "show", "dev", &self.tap])
            .stderr(Stdio::null())
            .output();
        matches!(out, Ok(o) if o.status.success()
            && String::from_utf8_lossy(&o.stdout).contains("LOWER_UP"))
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let mut done: Vec<Result<()>> = self
            .veths
            .iter()
            .map(|v| ip(&["-n", &self.name, "link", "del", "dev", v]))
            .collect();
        done.push(ip(&["-n", &self.name, "link", "del", "dev", &self.tap]));
        done.push(ip(&["netns", "del", &self.name]));
        for r in done {
            if let Err(e) = r {
                eprintln!("xtask: cleanup: {e}");
            }
        }
    }
}

/// `ip netns exec NS taskset -c CPUS PROGRAM` (both exec in place, so the child's PID
/// is the program's).
pub(crate) fn exec_pinned(ns: &str, cpus: impl std::fmt::Display, program: &Path) -> Command {
    let mut c = Command::new("ip");
    c.args(["netns", "exec", ns, "taskset", "-c"])
        .arg(cpus.to_string())
        .arg(program);
    c
}

/// A namespace with nothing of ours that needs deleting first; deleted when dropped.
pub(crate) struct Namespace(pub String);

impl Namespace {
    /// The namespace `name`, its loopback up.
    pub(crate) fn create(name: String) -> Result<Namespace> {
        ip(&["netns", "add", &name])?;
        let ns = Namespace(name);
        ip(&["-n", &ns.0, "link", "set", "lo", "up"])?;
        Ok(ns)
    }
}

impl Drop for Namespace {
    fn drop(&mut self) {
        if let Err(e) = ip(&["netns", "del", &self.0]) {
            eprintln!("xtask: cleanup: {e}");
        }
    }
}

pub(crate) fn ip(args: &[&str]) -> Result<()> {
    let out = Command::new("ip")
        .args(args)
        .output()
        .map_err(|e| format!("running `ip`: {e} (is iproute2 installed?)"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "`ip {}` failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}
