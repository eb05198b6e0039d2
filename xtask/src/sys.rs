//! The system calls the benchmark scripts make that std does not wrap: who we run as,
//! signals to processes we started, the allowed CPU set, the clock tick, entering a
//! network namespace and two socket options. All go through rustix, so the crate has no
//! `unsafe` code.

use std::io;
use std::os::fd::AsFd;
use std::time::Duration;

pub(crate) use rustix::process::Signal;
use rustix::process::{geteuid, kill_process, Pid};
use rustix::thread::{sched_getaffinity, CpuSet};

/// The effective user id.
pub(crate) fn euid() -> u32 {
    geteuid().as_raw()
}

/// Send `sig` to `pid`. The caller makes sure `pid` still names the process it means
/// (its own unreaped child, or one whose identity it has just checked). Never a process
/// group or "every process": a `pid` of 0 or below is refused.
pub(crate) fn kill(pid: i32, sig: Signal) {
    if pid <= 0 {
        return;
    }
    if let Some(pid) = Pid::from_raw(pid) {
        // A process that is already gone is no error here.
        let _ = kill_process(pid, sig);
    }
}

/// The CPUs this process may run on, in order.
pub(crate) fn allowed_cpus() -> io::Result<Vec<usize>> {
    let set = sched_getaffinity(None)?;
    Ok((0..CpuSet::MAX_CPU).filter(|&c| set.is_set(c)).collect())
}

/// Clock ticks per second (`/proc/PID/stat` times are in ticks), as the kernel told the
/// process at start (AT_CLKTCK, which sysconf(_SC_CLK_TCK) reports too).
pub(crate) fn clock_ticks_per_second() -> i64 {
    i64::try_from(rustix::param::clock_ticks_per_second()).unwrap_or(i64::MAX)
}

/// Moves the calling thread (only it) into the network namespace the file `ns` names
/// (`/run/netns/NAME`): sockets it opens from then on, and threads it starts, live
/// there.
pub(crate) fn enter_netns(ns: &impl AsFd) -> io::Result<()> {
    rustix::thread::move_into_link_name_space(
        ns.as_fd(),
        Some(rustix::thread::LinkNameSpaceType::Network),
    )?;
    Ok(())
}

/// `SO_LINGER` with a zero timeout on `socket`: closing it then sends a RST and drops
/// whatever was unsent.
pub(crate) fn set_linger_zero(socket: &impl AsFd) -> io::Result<()> {
    rustix::net::sockopt::set_socket_linger(socket, Some(Duration::ZERO))?;
    Ok(())
}

/// `SO_RCVBUF` of `socket`, in bytes (the kernel doubles it for its bookkeeping).
pub(crate) fn set_recv_buffer(socket: &impl AsFd, bytes: usize) -> io::Result<()> {
    rustix::net::sockopt::set_socket_recv_buffer_size(socket, bytes)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::process::ExitStatusExt;
    use std::process::Command;

    #[test]
    fn the_process_facts_agree_with_proc() {
        let status = std::fs::read_to_string("/proc/self/status").unwrap();
        let uid_line = status.lines().find(|l| l.starts_with("Uid:")).unwrap();
        let effective: u32 = uid_line.split_whitespace().nth(2).unwrap().parse().unwrap();
        assert_eq!(euid(), effective);
        let cpus = allowed_cpus().unwrap();
        assert!(!cpus.is_empty());
        assert!(cpus.windows(2).all(|w| w[0] < w[1]), "{cpus:?}");
        assert!(clock_ticks_per_second() > 0);
    }

    #[test]
    fn kill_signals_a_child() {
        let mut child = Command::new("sleep").arg("30").spawn().unwrap();
        kill(child.id() as i32, Signal::KILL);
        assert_eq!(child.wait().unwrap().signal(), Some(Signal::KILL.as_raw()));
    }
}
