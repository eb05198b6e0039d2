//! The system calls the benchmark scripts make that std does not wrap: who we run as,
//! signals to processes we started, the allowed CPU set, the clock tick, entering a
//! network namespace and two socket options. The crate's only unsafe code; each
//! function is safe to call and says above its block why the call is sound.

use std::io;
use std::os::fd::AsRawFd;

/// The effective user id.
pub(crate) fn euid() -> u32 {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() }
}

/// Send `sig` to `pid`. The caller makes sure `pid` still names the process it means
/// (its own unreaped child, or one whose identity it has just checked). Never a process
/// group or "every process": a `pid` of 0 or below is refused.
pub(crate) fn kill(pid: i32, sig: i32) {
    if pid <= 0 {
        return;
    }
    // SAFETY: kill has no memory preconditions.
    unsafe { libc::kill(pid, sig) };
}

/// The CPUs this process may run on, in order.
pub(crate) fn allowed_cpus() -> io::Result<Vec<usize>> {
    // SAFETY: cpu_set_t is plain data, valid all-zero; sched_getaffinity writes at most
    // its size into it, and CPU_ISSET reads it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok((0..libc::CPU_SETSIZE as usize)
            .filter(|&c| libc::CPU_ISSET(c, &set))
            .collect())
    }
}

/// Clock ticks per second (`/proc/PID/stat` times are in ticks).
pub(crate) fn clock_ticks_per_second() -> i64 {
    // SAFETY: sysconf has no preconditions.
    unsafe { libc::sysconf(libc::_SC_CLK_TCK) }
}

/// Moves the calling thread (only it) into the network namespace the file `ns` names
/// (`/run/netns/NAME`): sockets it opens from then on, and threads it starts, live
/// there.
pub(crate) fn enter_netns(ns: &impl AsRawFd) -> io::Result<()> {
    // SAFETY: setns takes a descriptor `ns` keeps open for the call and a flag; it
    // touches no memory of ours.
    if unsafe { libc::setns(ns.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// `SO_LINGER` with a zero timeout on `socket`: closing it then sends a RST and drops
/// whatever was unsent.
pub(crate) fn set_linger_zero(socket: &impl AsRawFd) -> io::Result<()> {
    let linger = libc::linger {
        l_onoff: 1,
        l_linger: 0,
    };
    set_option(socket, libc::SO_LINGER, &linger)
}

/// `SO_RCVBUF` of `socket`, in bytes (the kernel doubles it for its bookkeeping).
pub(crate) fn set_recv_buffer(socket: &impl AsRawFd, bytes: i32) -> io::Result<()> {
    set_option(socket, libc::SO_RCVBUF, &bytes)
}

fn set_option<T>(socket: &impl AsRawFd, name: i32, value: &T) -> io::Result<()> {
    // SAFETY: `value` is a live `T` for the call, and the length passed is its size, so
    // the kernel reads only its bytes; the descriptor is kept open by `socket`.
    let r = unsafe {
        libc::setsockopt(
            socket.as_raw_fd(),
            libc::SOL_SOCKET,
            name,
            (value as *const T).cast(),
            std::mem::size_of::<T>() as libc::socklen_t,
        )
    };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}
