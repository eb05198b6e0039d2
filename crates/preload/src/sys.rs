//! libc's own functions behind the ones the library replaces, and the few system calls
//! the library makes for itself, each behind a safe wrapper.
//!
//! The library exports `read`, `close`, `poll`, … under libc's names, so a call by
//! name reaches the library, including calls made by the library's own dependencies
//! (the TAP driver reads its queue with `read`). The originals are found once with
//! `dlsym(RTLD_NEXT, …)`; a thread that is inside the stack sets [`Bypass`], and every
//! hook sends such a thread straight to the original.

use std::cell::Cell;
use std::ffi::CStr;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::OnceLock;
use std::time::Duration;

use libc::{c_int, c_uint, c_void, nfds_t, pollfd, size_t, sockaddr, socklen_t, ssize_t};

macro_rules! originals {
    ($($name:ident: fn($($arg:ty),*) -> $ret:ty;)*) => {
        /// libc's implementations of the calls the library replaces.
        #[allow(missing_docs)]
        pub(crate) struct Originals {
            $(pub $name: unsafe extern "C" fn($($arg),*) -> $ret,)*
        }

        impl Originals {
            fn resolve() -> Originals {
                Originals {
                    $($name: {
                        let name = concat!(stringify!($name), "\0");
                        let name = CStr::from_bytes_with_nul(name.as_bytes()).expect("NUL-terminated");
                        let p = next_symbol(name);
                        // SAFETY: `p` is the next definition of the libc function of
                        // this name, whose C prototype is the one declared here.
                        unsafe { std::mem::transmute::<*mut c_void, unsafe extern "C" fn($($arg),*) -> $ret>(p) }
                    },)*
                }
            }
        }
    };
}

originals! {
    socket: fn(c_int, c_int, c_int) -> c_int;
    bind: fn(c_int, *const sockaddr, socklen_t) -> c_int;
    listen: fn(c_int, c_int) -> c_int;
    accept4: fn(c_int, *mut sockaddr, *mut socklen_t, c_int) -> c_int;
    connect: fn(c_int, *const sockaddr, socklen_t) -> c_int;
    read: fn(c_int, *mut c_void, size_t) -> ssize_t;
    write: fn(c_int, *const c_void, size_t) -> ssize_t;
    readv: fn(c_int, *const libc::iovec, c_int) -> ssize_t;
    writev: fn(c_int, *const libc::iovec, c_int) -> ssize_t;
    recv: fn(c_int, *mut c_void, size_t, c_int) -> ssize_t;
    recvfrom: fn(c_int, *mut c_void, size_t, c_int, *mut sockaddr, *mut socklen_t) -> ssize_t;
    recvmsg: fn(c_int, *mut libc::msghdr, c_int) -> ssize_t;
    send: fn(c_int, *const c_void, size_t, c_int) -> ssize_t;
    sendto: fn(c_int, *const c_void, size_t, c_int, *const sockaddr, socklen_t) -> ssize_t;
    sendmsg: fn(c_int, *const libc::msghdr, c_int) -> ssize_t;
    sendfile: fn(c_int, c_int, *mut libc::off_t, size_t) -> ssize_t;
    close: fn(c_int) -> c_int;
    shutdown: fn(c_int, c_int) -> c_int;
    getsockname: fn(c_int, *mut sockaddr, *mut socklen_t) -> c_int;
    getpeername: fn(c_int, *mut sockaddr, *mut socklen_t) -> c_int;
    getsockopt: fn(c_int, c_int, c_int, *mut c_void, *mut socklen_t) -> c_int;
    setsockopt: fn(c_int, c_int, c_int, *const c_void, socklen_t) -> c_int;
    fcntl: fn(c_int, c_int, usize) -> c_int;
    ioctl: fn(c_int, libc::c_ulong, usize) -> c_int;
    dup: fn(c_int) -> c_int;
    dup2: fn(c_int, c_int) -> c_int;
    dup3: fn(c_int, c_int, c_int) -> c_int;
    poll: fn(*mut pollfd, nfds_t, c_int) -> c_int;
    ppoll: fn(*mut pollfd, nfds_t, *const libc::timespec, *const libc::sigset_t) -> c_int;
    select: fn(c_int, *mut libc::fd_set, *mut libc::fd_set, *mut libc::fd_set, *mut libc::timeval) -> c_int;
    pselect: fn(c_int, *mut libc::fd_set, *mut libc::fd_set, *mut libc::fd_set, *const libc::timespec, *const libc::sigset_t) -> c_int;
    epoll_ctl: fn(c_int, c_int, c_int, *mut libc::epoll_event) -> c_int;
    epoll_wait: fn(c_int, *mut libc::epoll_event, c_int, c_int) -> c_int;
    epoll_pwait: fn(c_int, *mut libc::epoll_event, c_int, c_int, *const libc::sigset_t) -> c_int;
    close_range: fn(c_uint, c_uint, c_int) -> c_int;
    setuid: fn(libc::uid_t) -> c_int;
    seteuid: fn(libc::uid_t) -> c_int;
    setreuid: fn(libc::uid_t, libc::uid_t) -> c_int;
    setresuid: fn(libc::uid_t, libc::uid_t, libc::uid_t) -> c_int;
}

fn next_symbol(name: &CStr) -> *mut c_void {
    // SAFETY: `name` is NUL-terminated; RTLD_NEXT asks for the definition after this
    // library's, which is libc's.
    let p = unsafe { libc::dlsym(libc::RTLD_NEXT, name.as_ptr()) };
    if p.is_null() {
        fatal(&format!("libc has no {}", name.to_string_lossy()));
    }
    p
}

/// libc's implementations, found on first use.
pub(crate) fn originals() -> &'static Originals {
    static ORIGINALS: OnceLock<Originals> = OnceLock::new();
    ORIGINALS.get_or_init(Originals::resolve)
}

thread_local! {
    static BYPASS: Cell<bool> = const { Cell::new(false) };
}

/// While held, the hooks send this thread's calls straight to libc: held for the whole
/// time a thread is inside the stack, whose drivers make system calls by name.
pub(crate) struct Bypass {
    was: bool,
}

impl Bypass {
    /// Enter the stack on this thread.
    pub(crate) fn enter() -> Bypass {
        let was = BYPASS.try_with(|b| b.replace(true)).unwrap_or(true);
        Bypass { was }
    }

    /// Whether this thread's calls go straight to libc: inside the stack, or while the
    /// thread is being torn down (its thread-local state is gone).
    pub(crate) fn active() -> bool {
        BYPASS.try_with(Cell::get).unwrap_or(true)
    }
}

impl Drop for Bypass {
    fn drop(&mut self) {
        let _ = BYPASS.try_with(|b| b.set(self.was));
    }
}

/// The calling thread's `errno`.
pub(crate) fn errno() -> i32 {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

/// Set the calling thread's `errno`.
pub(crate) fn set_errno(value: i32) {
    // SAFETY: `__errno_location` returns the calling thread's errno slot.
    unsafe { *libc::__errno_location() = value };
}

/// A new eventfd, the kernel descriptor that stands for a Rusty socket: its number
/// is the socket's, so it never collides with the kernel's descriptors.
pub(crate) fn eventfd(cloexec: bool, nonblock: bool) -> Result<RawFd, i32> {
    let mut flags = 0;
    if cloexec {
        flags |= libc::EFD_CLOEXEC;
    }
    if nonblock {
        flags |= libc::EFD_NONBLOCK;
    }
    // SAFETY: eventfd2 takes two integers and returns a new descriptor or -1.
    let fd = unsafe { libc::syscall(libc::SYS_eventfd2, 0, flags) };
    if fd < 0 {
        Err(errno())
    } else {
        Ok(fd as RawFd)
    }
}

/// Add one to eventfd `fd`'s counter (ringing a sleeping thread).
pub(crate) fn ring(fd: RawFd) {
    let one = 1u64.to_ne_bytes();
    // SAFETY: writes 8 bytes from a live buffer; an eventfd takes exactly that.
    unsafe { libc::syscall(libc::SYS_write, fd, one.as_ptr(), one.len()) };
}

/// Reset eventfd `fd`'s counter (it must be non-blocking).
pub(crate) fn drain(fd: RawFd) {
    let mut buf = [0u8; 8];
    // SAFETY: reads at most 8 bytes into a live buffer.
    unsafe { libc::syscall(libc::SYS_read, fd, buf.as_mut_ptr(), buf.len()) };
}

/// Close `fd` with the system call (not through the hooks).
pub(crate) fn close(fd: RawFd) {
    // SAFETY: closing a descriptor number has no memory effects.
    unsafe { libc::syscall(libc::SYS_close, fd) };
}

/// What a sleep ended with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Woken {
    /// A descriptor is ready (or the time ran out).
    Ready,
    /// A signal arrived.
    Interrupted,
}

/// Sleep until one of `fds` is ready or `timeout` passes (`None`: no limit), with
/// `sigmask` in place during the sleep if given. Their `revents` are filled in.
pub(crate) fn sleep(
    fds: &mut [pollfd],
    timeout: Option<Duration>,
    sigmask: Option<&libc::sigset_t>,
) -> Woken {
    let ts = timeout.map(|t| libc::timespec {
        tv_sec: t.as_secs().min(i64::MAX as u64) as libc::time_t,
        tv_nsec: t.subsec_nanos() as libc::c_long,
    });
    let ts_ptr = ts
        .as_ref()
        .map_or(std::ptr::null(), |t| t as *const libc::timespec);
    let mask_ptr = sigmask.map_or(std::ptr::null(), |m| m as *const libc::sigset_t);
    // SAFETY: `fds`, the timespec and the mask are live for the call and their lengths
    // are what ppoll is told.
    let n = unsafe { (originals().ppoll)(fds.as_mut_ptr(), fds.len() as nfds_t, ts_ptr, mask_ptr) };
    if n < 0 && errno() == libc::EINTR {
        Woken::Interrupted
    } else {
        Woken::Ready
    }
}

/// Register handlers to run around `fork` (`pthread_atfork`).
pub(crate) fn at_fork(
    prepare: extern "C" fn(),
    parent: extern "C" fn(),
    child: extern "C" fn(),
) -> Result<(), i32> {
    // SAFETY: the handlers are plain functions that live as long as the program.
    let r = unsafe { libc::pthread_atfork(Some(prepare), Some(parent), Some(child)) };
    if r == 0 {
        Ok(())
    } else {
        Err(r)
    }
}

/// Whether `fd` is an open eventfd (what a Rusty socket's descriptor is).
pub(crate) fn is_eventfd(fd: RawFd) -> bool {
    std::fs::read_link(format!("/proc/self/fd/{fd}"))
        .is_ok_and(|target| target.as_os_str() == "anon_inode:[eventfd]")
}

/// A type that processes may share in memory mapped by each.
///
/// # Safety
/// All-zero bytes are a valid value of the type, and it holds only atomics (no
/// pointers, nothing that assumes one process), so that processes using the same
/// memory at once see consistent values.
pub(crate) unsafe trait SharedPlain: Sync {}

/// A zeroed `T` in anonymous memory shared with the processes this one forks
/// afterwards, which lives as long as the process; `None` when the kernel refuses.
pub(crate) fn shared_zeroed<T: SharedPlain>() -> Option<&'static T> {
    map_shared::<T>(libc::MAP_SHARED | libc::MAP_ANONYMOUS, -1)
}

/// A memory file of `size_of::<T>()` zero bytes that the processes this one forks
/// and the programs it execs inherit (it is not close-on-exec), for [`map_file`].
pub(crate) fn memfd_for<T: SharedPlain>(name: &CStr) -> Result<OwnedFd, i32> {
    // SAFETY: a NUL-terminated name and plain flags; returns a new descriptor or -1.
    let fd = unsafe { libc::memfd_create(name.as_ptr(), 0) };
    if fd < 0 {
        return Err(errno());
    }
    // SAFETY: `fd` is a new descriptor nothing else owns.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    let len = std::mem::size_of::<T>() as libc::off_t;
    // SAFETY: plain integer arguments on a descriptor we own.
    if unsafe { libc::ftruncate(fd.as_raw_fd(), len) } != 0 {
        return Err(errno());
    }
    Ok(fd)
}

/// The `T` in memory file `fd` (made by [`memfd_for`]), mapped shared; `None` unless
/// `fd` is a regular file of exactly `size_of::<T>()` bytes.
pub(crate) fn map_file<T: SharedPlain>(fd: RawFd) -> Option<&'static T> {
    let mut st = std::mem::MaybeUninit::<libc::stat>::uninit();
    // SAFETY: fstat writes a `stat` into the buffer, which is large enough.
    if unsafe { libc::fstat(fd, st.as_mut_ptr()) } != 0 {
        return None;
    }
    // SAFETY: fstat succeeded, so it filled the buffer.
    let st = unsafe { st.assume_init() };
    let regular = st.st_mode & libc::S_IFMT == libc::S_IFREG;
    if !regular || st.st_size != std::mem::size_of::<T>() as libc::off_t {
        return None;
    }
    map_shared::<T>(libc::MAP_SHARED, fd)
}

fn map_shared<T: SharedPlain>(flags: c_int, fd: RawFd) -> Option<&'static T> {
    let len = std::mem::size_of::<T>();
    // SAFETY: a fresh mapping with no address hint overlaps nothing of ours.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            flags,
            fd,
            0,
        )
    };
    if p == libc::MAP_FAILED {
        return None;
    }
    // SAFETY: the mapping is `len` bytes, page-aligned (enough for any `T` here), zero
    // bytes or what other processes stored as `T` (valid by `SharedPlain`), and never
    // unmapped, so the reference lives as long as the process.
    Some(unsafe { &*p.cast::<T>() })
}

/// The index of network interface `name` in this network namespace; 0 when there is
/// none of that name.
pub(crate) fn if_index(name: &str) -> u32 {
    let Ok(name) = std::ffi::CString::new(name) else {
        return 0;
    };
    // SAFETY: a NUL-terminated name; returns an index, or 0 with errno set.
    unsafe { libc::if_nametoindex(name.as_ptr()) }
}

/// Register a handler to run at `exit` (`atexit`).
pub(crate) fn at_exit(handler: extern "C" fn()) -> Result<(), i32> {
    // SAFETY: the handler is a plain function that lives as long as the program.
    let r = unsafe { libc::atexit(handler) };
    if r == 0 {
        Ok(())
    } else {
        Err(r)
    }
}

/// Send `SIGPIPE` to the calling thread, as a write to a closed connection does.
pub(crate) fn raise_sigpipe() {
    // SAFETY: raise has no memory effects.
    unsafe { libc::raise(libc::SIGPIPE) };
}

/// Print `message` and end the process: the library cannot run the program as asked
/// (its link does not open, or libc lacks a call), and carrying on over the kernel
/// would hide that.
pub(crate) fn fatal(message: &str) -> ! {
    write_stderr(&format!("librusty_preload: {message}\n"));
    // SAFETY: ends the process without unwinding.
    unsafe { libc::_exit(70) }
}

/// Write `text` to standard error with the system call itself (not through the
/// library's own `write`).
pub(crate) fn write_stderr(text: &str) {
    // SAFETY: writes a live buffer of that length.
    unsafe { libc::syscall(libc::SYS_write, 2, text.as_ptr(), text.len()) };
}

/// The monotonic clock (`CLOCK_MONOTONIC`, which every process reads alike), in
/// nanoseconds.
pub(crate) fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec into a live one.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    (ts.tv_sec as u64)
        .saturating_mul(1_000_000_000)
        .saturating_add(ts.tv_nsec as u64)
}

/// Signals blocked in the thread that made it (and in the threads it starts
/// afterwards), to be taken one at a time with [`Signals::wait`].
pub(crate) struct Signals {
    set: libc::sigset_t,
    /// The mask before, for the programs this process starts.
    old: libc::sigset_t,
}

/// A signal [`Signals::wait`] took.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Caught {
    pub(crate) signal: c_int,
    /// The kernel raised it itself (`SI_KERNEL`): a terminal's keys, hang-up or
    /// resize, which reach the terminal's whole foreground process group.
    pub(crate) by_kernel: bool,
}

impl Signals {
    /// Block `signals` in the calling thread.
    pub(crate) fn block(signals: &[c_int]) -> Result<Signals, i32> {
        let mut set = std::mem::MaybeUninit::<libc::sigset_t>::uninit();
        // SAFETY: sigemptyset initialises the set it is given.
        unsafe { libc::sigemptyset(set.as_mut_ptr()) };
        // SAFETY: initialised just above.
        let mut set = unsafe { set.assume_init() };
        for &s in signals {
            // SAFETY: adds a signal number to a live set; a bad number is refused.
            if unsafe { libc::sigaddset(&mut set, s) } != 0 {
                return Err(libc::EINVAL);
            }
        }
        let mut old = std::mem::MaybeUninit::<libc::sigset_t>::zeroed();
        // SAFETY: a live set, and a live buffer for the old mask.
        let r = unsafe { libc::pthread_sigmask(libc::SIG_BLOCK, &set, old.as_mut_ptr()) };
        if r != 0 {
            return Err(r);
        }
        // SAFETY: pthread_sigmask succeeded, so it filled in the old mask.
        let old = unsafe { old.assume_init() };
        Ok(Signals { set, old })
    }

    /// Have the process `command` starts begin with the mask from before [`block`]
    /// (`Command` passes the caller's mask on).
    ///
    /// [`block`]: Signals::block
    pub(crate) fn unblock_in(&self, command: &mut std::process::Command) {
        use std::os::unix::process::CommandExt;
        let old = self.old;
        let hook = move || {
            // SAFETY: a live set; the mask in force is not asked for.
            let r = unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, &old, std::ptr::null_mut()) };
            if r == 0 {
                Ok(())
            } else {
                Err(std::io::Error::from_raw_os_error(r))
            }
        };
        // SAFETY: the hook runs in the child between fork and exec, where only
        // async-signal-safe calls may be made: it makes one (sigprocmask) and touches
        // no lock or allocation.
        unsafe { command.pre_exec(hook) };
    }

    /// The next of the blocked signals to arrive, waiting at most `timeout`; `None`
    /// when none came.
    pub(crate) fn wait(&self, timeout: Duration) -> Option<Caught> {
        let ts = libc::timespec {
            tv_sec: timeout.as_secs().min(i64::MAX as u64) as libc::time_t,
            tv_nsec: timeout.subsec_nanos() as libc::c_long,
        };
        let mut info = std::mem::MaybeUninit::<libc::siginfo_t>::zeroed();
        // SAFETY: a live set, a live buffer for the signal's information and a live
        // timespec.
        let signal = unsafe { libc::sigtimedwait(&self.set, info.as_mut_ptr(), &ts) };
        if signal <= 0 {
            return None;
        }
        // SAFETY: sigtimedwait filled it in for the signal it returned (and it was
        // zeroed before).
        let info = unsafe { info.assume_init() };
        Some(Caught {
            signal,
            by_kernel: info.si_code == libc::SI_KERNEL,
        })
    }
}

/// Send `signal` to process `pid`; whether it was sent.
pub(crate) fn send_signal(pid: u32, signal: c_int) -> bool {
    let Ok(pid) = libc::pid_t::try_from(pid) else {
        return false;
    };
    // SAFETY: kill has no memory effects.
    unsafe { libc::kill(pid, signal) == 0 }
}

/// Whether process `pid` is in the calling process's process group.
pub(crate) fn in_my_process_group(pid: u32) -> bool {
    let Ok(pid) = libc::pid_t::try_from(pid) else {
        return false;
    };
    // SAFETY: neither call has memory effects.
    unsafe { libc::getpgid(pid) == libc::getpgrp() }
}

/// Have the process `command` starts get `signal` when the calling thread ends (Linux's
/// parent-death signal), and not start at all if that already happened.
pub(crate) fn end_with_parent(command: &mut std::process::Command, signal: c_int) {
    use std::os::unix::process::CommandExt;
    // SAFETY: getpid has no memory effects.
    let parent = unsafe { libc::getpid() };
    let hook = move || {
        // SAFETY: prctl with integer arguments sets the calling process's
        // parent-death signal.
        if unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, signal as libc::c_ulong, 0, 0, 0) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: getppid has no memory effects.
        if unsafe { libc::getppid() } != parent {
            return Err(std::io::Error::from_raw_os_error(libc::ESRCH));
        }
        Ok(())
    };
    // SAFETY: the hook runs in the child between fork and exec, where only
    // async-signal-safe calls may be made: it makes two system calls and touches no
    // lock or allocation.
    unsafe { command.pre_exec(hook) };
}
