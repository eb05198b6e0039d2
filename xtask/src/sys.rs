//! The system calls the benchmark scripts make that std does not wrap: who we run as,
//! signals to processes we started, the allowed CPU set and the clock tick. The crate's
//! only unsafe code; each function is safe to call and says above its block why the
//! call is sound.

use std::io;

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
