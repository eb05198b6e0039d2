//! The exported functions that stand in for libc's: each one sends calls on kernel
//! descriptors (and every call made before the library is set up, or from inside the
//! stack) to libc unchanged, and carries calls on Rusty sockets out on the process's
//! stack with the meaning and errno Linux gives them.
//!
//! Pointers from the program are turned into slices and values here, and nowhere else;
//! the rest of the library is safe code.

// The functions are `pub` for their exported symbols, not for Rust callers.
#![allow(unreachable_pub)]

use std::net::SocketAddr;
use std::os::fd::RawFd;
use std::time::Duration;

use libc::{
    c_int, c_uint, c_ulong, c_void, epoll_event, fd_set, iovec, msghdr, nfds_t, off_t, pollfd,
    size_t, sockaddr, socklen_t, ssize_t,
};

use crate::call::Call;
use crate::process::{self, kind, Kind, Process, Unmet};
use crate::sockets::{
    bind_address, connect_address, sockaddr_of, Errno, Family, Shut, SockId, MAX_SOCKADDR,
};
use crate::sys::{self, originals, Bypass};

// ----- Errors and addresses -----

fn fail<T: From<i8>>(e: Errno) -> T {
    sys::set_errno(e.0);
    T::from(-1)
}

fn int(r: Result<c_int, Errno>) -> c_int {
    r.unwrap_or_else(fail)
}

fn size(r: Result<usize, Errno>) -> ssize_t {
    match r {
        Ok(n) => n as ssize_t,
        Err(e) => fail(e),
    }
}

/// Run `f` on the process; `EBADF` when the library is not running.
fn on_process<R>(f: impl FnOnce(&mut Process) -> Result<R, Errno>) -> Result<R, Errno> {
    process::with(f).unwrap_or(Err(Errno(libc::EBADF)))
}

/// Whether a call on `fd` is the library's to carry.
/// A call on a kernel descriptor first sends the small writes the stack holds: the
/// program may be about to wait, through the kernel, for what they ask for.
fn ours(fd: RawFd) -> bool {
    if kind(fd) == Kind::Socket {
        return !Bypass::active();
    }
    process::settle();
    false
}

/// The bytes of the program's socket address, as many as it said (`EINVAL` beyond
/// what any call takes, as Linux's `move_addr_to_kernel`).
///
/// # Safety
/// `addr` is null or points to `len` readable bytes.
unsafe fn addr_bytes(addr: *const sockaddr, len: socklen_t) -> Result<Vec<u8>, Errno> {
    let len = len as usize;
    if len > MAX_SOCKADDR {
        return Err(Errno(libc::EINVAL));
    }
    if len == 0 {
        return Ok(Vec::new());
    }
    if addr.is_null() {
        return Err(Errno(libc::EFAULT));
    }
    // SAFETY: the caller vouches for `len` bytes.
    Ok(unsafe { std::slice::from_raw_parts(addr.cast::<u8>(), len) }.to_vec())
}

/// Check the program's buffer for an address before anything is done that a bad one
/// would lose: `len` must be there (`EFAULT`) and not negative (`EINVAL`), and `addr`
/// there if it has room (`EFAULT`), as Linux's `move_addr_to_user` checks.
///
/// # Safety
/// `len` is null or readable.
unsafe fn addr_room(addr: *mut sockaddr, len: *mut socklen_t) -> Result<(), Errno> {
    if len.is_null() {
        return Err(Errno(libc::EFAULT));
    }
    // SAFETY: the caller vouches for `len`.
    let room = unsafe { *len } as c_int;
    if room < 0 {
        return Err(Errno(libc::EINVAL));
    }
    if addr.is_null() && room > 0 {
        return Err(Errno(libc::EFAULT));
    }
    Ok(())
}

/// Write `a` to the program's address buffer as `getsockname` does: a `sockaddr_in`
/// or a `sockaddr_in6`, truncated to the room given, with the full length reported.
///
/// # Safety
/// [`addr_room`] accepted `addr` and `len`, and `addr` has `*len` writable bytes.
unsafe fn write_addr(a: SocketAddr, addr: *mut sockaddr, len: *mut socklen_t) {
    let (bytes, full) = sockaddr_of(a);
    // SAFETY: the caller vouches for `len`.
    let room = (unsafe { *len } as usize).min(full);
    // SAFETY: copies at most `room` bytes into the caller's buffer of that size (none
    // when `addr` is null, which `addr_room` lets through with no room).
    unsafe {
        if room > 0 {
            std::ptr::copy_nonoverlapping(bytes.as_ptr(), addr.cast::<u8>(), room);
        }
        *len = full as socklen_t;
    }
}

/// A slice over the program's buffer.
///
/// # Safety
/// `buf` has `len` readable bytes (or `len` is 0).
unsafe fn bytes<'a>(buf: *const c_void, len: size_t) -> &'a [u8] {
    if len == 0 || buf.is_null() {
        return &[];
    }
    // SAFETY: the caller vouches for the buffer.
    unsafe { std::slice::from_raw_parts(buf.cast::<u8>(), len) }
}

/// A mutable slice over the program's buffer.
///
/// # Safety
/// `buf` has `len` writable bytes (or `len` is 0).
unsafe fn bytes_mut<'a>(buf: *mut c_void, len: size_t) -> &'a mut [u8] {
    if len == 0 || buf.is_null() {
        return &mut [];
    }
    // SAFETY: the caller vouches for the buffer.
    unsafe { std::slice::from_raw_parts_mut(buf.cast::<u8>(), len) }
}

/// The program's I/O vectors.
///
/// # Safety
/// `iov` has `count` readable entries.
unsafe fn iovecs<'a>(iov: *const iovec, count: c_int) -> Result<&'a [iovec], Errno> {
    if !(0..=libc::UIO_MAXIOV).contains(&count) {
        return Err(Errno(libc::EINVAL));
    }
    if count == 0 {
        return Ok(&[]);
    }
    if iov.is_null() {
        return Err(Errno(libc::EFAULT));
    }
    // SAFETY: the caller vouches for `count` entries.
    Ok(unsafe { std::slice::from_raw_parts(iov, count as usize) })
}

fn millis(timeout: c_int) -> Option<Duration> {
    u64::try_from(timeout).ok().map(Duration::from_millis)
}

/// # Safety
/// `ts` is null or readable.
unsafe fn timespec(ts: *const libc::timespec) -> Result<Option<Duration>, Errno> {
    if ts.is_null() {
        return Ok(None);
    }
    // SAFETY: the caller vouches for `ts`.
    let ts = unsafe { *ts };
    if ts.tv_sec < 0 || !(0..1_000_000_000).contains(&ts.tv_nsec) {
        return Err(Errno(libc::EINVAL));
    }
    Ok(Some(Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)))
}

fn unmet(u: Unmet, timed_out: Errno) -> Errno {
    match u {
        Unmet::TimedOut => timed_out,
        Unmet::Interrupted => Errno(libc::EINTR),
        Unmet::LinkGone => Errno(libc::ENETDOWN),
    }
}

// ----- Blocking and readiness -----

/// The socket of `fd`, whether its calls block, and its timeout for receiving (`recv`)
/// or sending.
fn desc_of(fd: RawFd, receiving: bool) -> Result<(SockId, bool, Option<Duration>), Errno> {
    let lookup = |p: &mut Process| {
        let d = p.desc(fd)?;
        let timeout = if receiving {
            d.recv_timeout
        } else {
            d.send_timeout
        };
        Ok((d.sock, d.nonblock, timeout))
    };
    if receiving {
        on_process(lookup)
    } else {
        process::with_held(lookup).unwrap_or(Err(Errno(libc::EBADF)))
    }
}

/// Run `op` until it is not `EAGAIN`, waiting in between unless `nonblock`. A send
/// (`sending`) first tries without sending the small writes the stack holds, so that
/// they leave together with its own (see `Stack::send`).
fn blocking<R>(
    nonblock: bool,
    timeout: Option<Duration>,
    sending: bool,
    mut op: impl FnMut(&mut Process) -> Result<R, Errno>,
) -> Result<R, Errno> {
    let first = if sending {
        process::with_held(&mut op).unwrap_or(Err(Errno(libc::EBADF)))
    } else {
        on_process(&mut op)
    };
    match first {
        Err(Errno(libc::EAGAIN)) => {}
        done => return done,
    }
    if nonblock {
        return process::with_turn(op).unwrap_or(Err(Errno(libc::EBADF)));
    }
    process::wait(timeout, &[], None, |p| match op(p) {
        Err(Errno(libc::EAGAIN)) => None,
        other => Some(other),
    })
    .unwrap_or_else(|u| Err(unmet(u, Errno(libc::EAGAIN))))
}

/// Receive into `buf` with `recv`'s flags.
fn receive(fd: RawFd, buf: &mut [u8], flags: c_int) -> Result<usize, Errno> {
    let (sock, nonblock, timeout) = desc_of(fd, true)?;
    let nonblock = nonblock || flags & libc::MSG_DONTWAIT != 0;
    let peek = flags & libc::MSG_PEEK != 0;
    let all = flags & libc::MSG_WAITALL != 0 && !peek && !nonblock;
    let mut got = 0;
    loop {
        let r = blocking(nonblock, timeout, false, |p| {
            p.stir();
            p.stack.recv(sock, &mut buf[got..], peek)
        });
        match r {
            Ok(0) => return Ok(got),
            Ok(n) => got += n,
            Err(e) if got > 0 && matches!(e.0, libc::EINTR | libc::EAGAIN) => return Ok(got),
            Err(e) => return Err(e),
        }
        if !all || got == buf.len() {
            return Ok(got);
        }
    }
}

/// Send `data` with `send`'s flags: a blocking socket sends it all (or what it could
/// before a signal or its timeout), a non-blocking one what fits.
fn transmit(fd: RawFd, data: &[u8], flags: c_int) -> Result<usize, Errno> {
    let (sock, nonblock, timeout) = desc_of(fd, false)?;
    let nonblock = nonblock || flags & libc::MSG_DONTWAIT != 0;
    let mut sent = 0;
    loop {
        let r = blocking(nonblock, timeout, true, |p| {
            p.stir();
            p.stack.send(sock, &data[sent..])
        });
        match r {
            Ok(n) => sent += n,
            Err(e) if sent > 0 && matches!(e.0, libc::EINTR | libc::EAGAIN) => return Ok(sent),
            Err(e) => {
                if e.0 == libc::EPIPE && flags & libc::MSG_NOSIGNAL == 0 {
                    sys::raise_sigpipe();
                }
                return Err(e);
            }
        }
        if nonblock || sent == data.len() {
            return Ok(sent);
        }
    }
}

// ----- Setting up -----

/// Whether the library carries TCP sockets in this process (setting it up on first
/// call).
fn running() -> bool {
    process::running(|| {
        let _bypass = Bypass::enter();
        crate::start::from_env()
    })
}

/// Make Rusty socket `fd` a kernel socket in place (same number, family, flags and
/// options set so far), for a `bind` or `connect` to an address Rusty's link does not
/// carry; `unfresh` when it is bound already (only a fresh socket can change hands).
fn hand_to_kernel(fd: RawFd, unfresh: Errno) -> Result<(), Errno> {
    on_process(|p| {
        if !p.is_fresh(fd) {
            return Err(unfresh);
        }
        let desc = p.desc(fd)?.clone();
        let family = p.stack.family(desc.sock)?;
        let o = originals();
        let ty = libc::SOCK_STREAM
            | if desc.nonblock {
                libc::SOCK_NONBLOCK
            } else {
                0
            };
        // SAFETY: plain integer arguments.
        let k = unsafe { (o.socket)(family.domain(), ty, 0) };
        if k < 0 {
            return Err(Errno(sys::errno()));
        }
        for (level, name, value) in &desc.early_options {
            // SAFETY: `value` is live for the call and its length is given.
            unsafe {
                (o.setsockopt)(
                    k,
                    *level,
                    *name,
                    value.as_ptr().cast(),
                    value.len() as socklen_t,
                )
            };
        }
        // SAFETY: plain integer arguments.
        let cloexec = unsafe { (o.fcntl)(fd, libc::F_GETFD, 0) } & libc::FD_CLOEXEC != 0;
        p.forget(fd);
        let flags = if cloexec { libc::O_CLOEXEC } else { 0 };
        // SAFETY: plain integer arguments; `fd` now names the kernel socket.
        let r = unsafe { (o.dup3)(k, fd, flags) };
        let err = sys::errno();
        sys::close(k);
        if r < 0 {
            return Err(Errno(err));
        }
        Ok(())
    })
}

mod calls;
mod io;
mod privileges;
mod wait;

/// Run as the library is loaded, before the program's `main` (and so before it can
/// fork): install the panic hook (`call`), and under `rusty-run` map the table every
/// process of the program shares, and take up the listening sockets an image this one
/// replaced by `exec` left.
extern "C" fn on_load() {
    crate::call::install_panic_hook();
    let _call = Call::enter("the library's set-up");
    if std::env::var_os(crate::config::FLAGS_VAR).is_some_and(|v| !v.is_empty()) {
        let heirs = {
            let _bypass = Bypass::enter();
            crate::siblings::Siblings::new().inheritance()
        };
        // This image was exec'd by one that listened: take its listening sockets up
        // now, before the program uses their descriptors (see `heirs`).
        if !heirs.is_empty() && running() {
            process::with(|p| p.inherit());
        }
    }
}

#[used]
#[link_section = ".init_array"]
static ON_LOAD: extern "C" fn() = on_load;
