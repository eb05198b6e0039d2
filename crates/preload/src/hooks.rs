//! The exported functions that stand in for libc's: each one sends calls on kernel
//! descriptors (and every call made before the library is set up, or from inside the
//! stack) to libc unchanged, and carries calls on Rusty sockets out on the process's
//! stack with the meaning and errno Linux gives them.
//!
//! Pointers from the program are turned into slices and values here, and nowhere else;
//! the rest of the library is safe code.

// The functions are `pub` for their exported symbols, not for Rust callers.
#![allow(unreachable_pub)]

use std::net::{Ipv4Addr, SocketAddrV4};
use std::os::fd::RawFd;
use std::time::Duration;

use libc::{
    c_int, c_uint, c_ulong, c_void, epoll_event, fd_set, iovec, msghdr, nfds_t, off_t, pollfd,
    size_t, sockaddr, sockaddr_in, socklen_t, ssize_t,
};

use crate::process::{self, kind, Kind, Process, Unmet};
use crate::sockets::{Errno, Shut, SockId};
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
fn ours(fd: RawFd) -> bool {
    kind(fd) == Kind::Socket && !Bypass::active()
}

/// An IPv4 socket address from the program.
///
/// # Safety
/// `addr` points to `len` readable bytes.
unsafe fn read_addr(addr: *const sockaddr, len: socklen_t) -> Result<SocketAddrV4, Errno> {
    if addr.is_null() {
        return Err(Errno(libc::EFAULT));
    }
    if (len as usize) < std::mem::size_of::<sockaddr_in>() {
        return Err(Errno(libc::EINVAL));
    }
    // SAFETY: the caller vouches for `len` bytes, at least a sockaddr_in.
    let sin = unsafe { std::ptr::read_unaligned(addr.cast::<sockaddr_in>()) };
    if c_int::from(sin.sin_family) != libc::AF_INET {
        return Err(Errno(libc::EAFNOSUPPORT));
    }
    Ok(SocketAddrV4::new(
        Ipv4Addr::from(u32::from_be(sin.sin_addr.s_addr)),
        u16::from_be(sin.sin_port),
    ))
}

/// Write `a` to the program's address buffer as `getsockname` does: truncated to the
/// room given, with the full length reported.
///
/// # Safety
/// `addr` and `len` are null, or `len` is readable and writable and `addr` has `*len`
/// writable bytes.
unsafe fn write_addr(a: SocketAddrV4, addr: *mut sockaddr, len: *mut socklen_t) {
    if addr.is_null() || len.is_null() {
        return;
    }
    // SAFETY: an all-zero sockaddr_in is valid.
    let mut sin: sockaddr_in = unsafe { std::mem::zeroed() };
    sin.sin_family = libc::AF_INET as libc::sa_family_t;
    sin.sin_port = a.port().to_be();
    sin.sin_addr.s_addr = u32::from(*a.ip()).to_be();
    let full = std::mem::size_of::<sockaddr_in>();
    // SAFETY: the caller vouches for `len`.
    let room = unsafe { *len } as usize;
    // SAFETY: copies at most `room` bytes into the caller's buffer of that size.
    unsafe {
        std::ptr::copy_nonoverlapping(
            (&sin as *const sockaddr_in).cast::<u8>(),
            addr.cast::<u8>(),
            room.min(full),
        );
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
    }
}

// ----- Blocking and readiness -----

/// The socket of `fd`, whether its calls block, and its timeout for receiving (`recv`)
/// or sending.
fn desc_of(fd: RawFd, receiving: bool) -> Result<(SockId, bool, Option<Duration>), Errno> {
    on_process(|p| {
        let d = p.desc(fd)?;
        let timeout = if receiving {
            d.recv_timeout
        } else {
            d.send_timeout
        };
        Ok((d.sock, d.nonblock, timeout))
    })
}

/// Run `op` until it is not `EAGAIN`, waiting in between unless `nonblock`.
fn blocking<R>(
    nonblock: bool,
    timeout: Option<Duration>,
    mut op: impl FnMut(&mut Process) -> Result<R, Errno>,
) -> Result<R, Errno> {
    if nonblock {
        return on_process(op);
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
        let r = blocking(nonblock, timeout, |p| {
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
        let r = blocking(nonblock, timeout, |p| {
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

/// Make Rusty socket `fd` a kernel socket in place (same number, flags and options
/// set so far), for a `bind` or `connect` to an address Rusty's link does not carry.
fn hand_to_kernel(fd: RawFd) -> Result<(), Errno> {
    on_process(|p| {
        if !p.is_fresh(fd) {
            return Err(Errno(libc::EINVAL));
        }
        let desc = p.desc(fd)?.clone();
        let o = originals();
        let ty = libc::SOCK_STREAM
            | if desc.nonblock {
                libc::SOCK_NONBLOCK
            } else {
                0
            };
        // SAFETY: plain integer arguments.
        let k = unsafe { (o.socket)(libc::AF_INET, ty, 0) };
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

// ----- The calls -----

/// `socket`: TCP over IPv4 goes to Rusty (a kernel eventfd gives the descriptor its
/// number); everything else to the kernel.
///
/// # Safety
/// As `socket(2)`.
#[no_mangle]
pub unsafe extern "C" fn socket(domain: c_int, ty: c_int, protocol: c_int) -> c_int {
    let base = ty & !(libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC);
    let tcp = domain == libc::AF_INET
        && base == libc::SOCK_STREAM
        && (protocol == 0 || protocol == libc::IPPROTO_TCP);
    if !tcp || Bypass::active() || !running() {
        // SAFETY: the program's own arguments.
        return unsafe { (originals().socket)(domain, ty, protocol) };
    }
    let nonblock = ty & libc::SOCK_NONBLOCK != 0;
    let fd = match sys::eventfd(ty & libc::SOCK_CLOEXEC != 0, false) {
        Ok(fd) => fd,
        Err(e) => return fail(Errno(e)),
    };
    let attached = process::with(|p| {
        let s = p.stack.socket();
        p.attach(fd, s, nonblock);
    });
    if attached.is_none() {
        sys::close(fd);
        return fail(Errno(libc::ENOMEM));
    }
    fd
}

/// # Safety
/// As `bind(2)`.
#[no_mangle]
pub unsafe extern "C" fn bind(fd: c_int, addr: *const sockaddr, len: socklen_t) -> c_int {
    if !ours(fd) {
        // SAFETY: the program's own arguments.
        return unsafe { (originals().bind)(fd, addr, len) };
    }
    // SAFETY: the program's own arguments.
    let a = match unsafe { read_addr(addr, len) } {
        Ok(a) => a,
        Err(e) => return fail(e),
    };
    let here = on_process(|p| {
        if !p.stack.binds(*a.ip()) {
            return Ok(false);
        }
        let sock = p.desc(fd)?.sock;
        p.stack.bind(sock, a).map(|()| true)
    });
    match here {
        Ok(true) => 0,
        Ok(false) => match hand_to_kernel(fd) {
            // SAFETY: the program's own arguments, on the kernel socket now at `fd`.
            Ok(()) => unsafe { (originals().bind)(fd, addr, len) },
            Err(e) => fail(e),
        },
        Err(e) => fail(e),
    }
}

/// # Safety
/// As `listen(2)`.
#[no_mangle]
pub unsafe extern "C" fn listen(fd: c_int, backlog: c_int) -> c_int {
    if !ours(fd) {
        // SAFETY: plain integer arguments.
        return unsafe { (originals().listen)(fd, backlog) };
    }
    let backlog = usize::try_from(backlog).unwrap_or(0).clamp(1, 4096);
    int(on_process(|p| {
        let sock = p.desc(fd)?.sock;
        p.stir();
        p.stack.listen(sock, backlog).map(|()| 0)
    }))
}

/// # Safety
/// As `accept4(2)`.
#[no_mangle]
pub unsafe extern "C" fn accept4(
    fd: c_int,
    addr: *mut sockaddr,
    len: *mut socklen_t,
    flags: c_int,
) -> c_int {
    if !ours(fd) {
        // SAFETY: the program's own arguments.
        return unsafe { (originals().accept4)(fd, addr, len, flags) };
    }
    if flags & !(libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC) != 0 {
        return fail(Errno(libc::EINVAL));
    }
    let (listener, nonblock, _) = match desc_of(fd, true) {
        Ok(d) => d,
        Err(e) => return fail(e),
    };
    // The descriptor first, so that a connection taken off the queue always gets one.
    let new = match sys::eventfd(flags & libc::SOCK_CLOEXEC != 0, false) {
        Ok(new) => new,
        Err(e) => return fail(Errno(e)),
    };
    let accepted = blocking(nonblock, None, |p| {
        let c = p.stack.accept(listener)?;
        p.attach(new, c, flags & libc::SOCK_NONBLOCK != 0);
        p.stack
            .peer_addr(c)
            .or(Ok(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 0)))
    });
    match accepted {
        Ok(peer) => {
            // SAFETY: the program's own address buffer.
            unsafe { write_addr(peer, addr, len) };
            new
        }
        Err(e) => {
            sys::close(new);
            fail(e)
        }
    }
}

/// # Safety
/// As `accept(2)`.
#[no_mangle]
pub unsafe extern "C" fn accept(fd: c_int, addr: *mut sockaddr, len: *mut socklen_t) -> c_int {
    // SAFETY: the program's own arguments.
    unsafe { accept4(fd, addr, len, 0) }
}

/// # Safety
/// As `connect(2)`.
#[no_mangle]
pub unsafe extern "C" fn connect(fd: c_int, addr: *const sockaddr, len: socklen_t) -> c_int {
    if !ours(fd) {
        // SAFETY: the program's own arguments.
        return unsafe { (originals().connect)(fd, addr, len) };
    }
    // SAFETY: the program's own arguments.
    let a = match unsafe { read_addr(addr, len) } {
        Ok(a) => a,
        Err(e) => return fail(e),
    };
    let started = on_process(|p| {
        let d = p.desc(fd)?;
        let (sock, nonblock) = (d.sock, d.nonblock);
        if !p.stack.carries(*a.ip()) {
            return Ok(None);
        }
        p.stir();
        Ok(Some((sock, nonblock, p.stack.connect(sock, a))))
    });
    let (sock, nonblock, r) = match started {
        Ok(Some(s)) => s,
        Ok(None) => {
            return match hand_to_kernel(fd) {
                // SAFETY: the program's own arguments, on the kernel socket now at `fd`.
                Ok(()) => unsafe { (originals().connect)(fd, addr, len) },
                Err(e) => fail(e),
            };
        }
        Err(e) => return fail(e),
    };
    match r {
        Err(Errno(libc::EINPROGRESS)) if !nonblock => {}
        other => return int(other.map(|()| 0)),
    }
    let done = process::wait(None, &[], None, |p| match p.stack.connect_result(sock) {
        Ok(true) => Some(Ok(0)),
        Ok(false) => None,
        Err(e) => Some(Err(e)),
    });
    int(done.unwrap_or_else(|u| Err(unmet(u, Errno(libc::ETIMEDOUT)))))
}

/// # Safety
/// As `read(2)`.
#[no_mangle]
pub unsafe extern "C" fn read(fd: c_int, buf: *mut c_void, count: size_t) -> ssize_t {
    if !ours(fd) {
        // SAFETY: the program's own arguments.
        return unsafe { (originals().read)(fd, buf, count) };
    }
    // SAFETY: the program's own buffer.
    size(receive(fd, unsafe { bytes_mut(buf, count) }, 0))
}

/// # Safety
/// As `recv(2)`.
#[no_mangle]
pub unsafe extern "C" fn recv(fd: c_int, buf: *mut c_void, len: size_t, flags: c_int) -> ssize_t {
    if !ours(fd) {
        // SAFETY: the program's own arguments.
        return unsafe { (originals().recv)(fd, buf, len, flags) };
    }
    // SAFETY: the program's own buffer.
    size(receive(fd, unsafe { bytes_mut(buf, len) }, flags))
}

/// # Safety
/// As `recvfrom(2)`.
#[no_mangle]
pub unsafe extern "C" fn recvfrom(
    fd: c_int,
    buf: *mut c_void,
    len: size_t,
    flags: c_int,
    addr: *mut sockaddr,
    addrlen: *mut socklen_t,
) -> ssize_t {
    if !ours(fd) {
        // SAFETY: the program's own arguments.
        return unsafe { (originals().recvfrom)(fd, buf, len, flags, addr, addrlen) };
    }
    // SAFETY: the program's own buffer.
    let r = receive(fd, unsafe { bytes_mut(buf, len) }, flags);
    if r.is_ok() {
        if let Ok(peer) = on_process(|p| p.stack.peer_addr(p.desc(fd)?.sock)) {
            // SAFETY: the program's own address buffer.
            unsafe { write_addr(peer, addr, addrlen) };
        }
    }
    size(r)
}

/// Receive into the program's I/O vectors: into one buffer, then scattered.
///
/// # Safety
/// `iov` has `count` entries, each naming a writable buffer.
unsafe fn receive_vectored(fd: RawFd, iov: *const iovec, count: c_int, flags: c_int) -> ssize_t {
    // SAFETY: the caller's vectors.
    let iov = match unsafe { iovecs(iov, count) } {
        Ok(v) => v,
        Err(e) => return fail(e),
    };
    let total: usize = iov.iter().map(|v| v.iov_len).sum();
    let mut buf = vec![0u8; total];
    let n = match receive(fd, &mut buf, flags) {
        Ok(n) => n,
        Err(e) => return fail(e),
    };
    let mut at = 0;
    for v in iov {
        if at == n {
            break;
        }
        let k = v.iov_len.min(n - at);
        // SAFETY: each vector names `iov_len` writable bytes.
        unsafe { bytes_mut(v.iov_base, k) }.copy_from_slice(&buf[at..at + k]);
        at += k;
    }
    n as ssize_t
}

/// Send the program's I/O vectors as one buffer.
///
/// # Safety
/// `iov` has `count` entries, each naming a readable buffer.
unsafe fn send_vectored(fd: RawFd, iov: *const iovec, count: c_int, flags: c_int) -> ssize_t {
    // SAFETY: the caller's vectors.
    let iov = match unsafe { iovecs(iov, count) } {
        Ok(v) => v,
        Err(e) => return fail(e),
    };
    if let [one] = iov {
        // SAFETY: the vector names `iov_len` readable bytes.
        return size(transmit(
            fd,
            unsafe { bytes(one.iov_base, one.iov_len) },
            flags,
        ));
    }
    let mut buf = Vec::with_capacity(iov.iter().map(|v| v.iov_len).sum());
    for v in iov {
        // SAFETY: each vector names `iov_len` readable bytes.
        buf.extend_from_slice(unsafe { bytes(v.iov_base, v.iov_len) });
    }
    size(transmit(fd, &buf, flags))
}

/// # Safety
/// As `readv(2)`.
#[no_mangle]
pub unsafe extern "C" fn readv(fd: c_int, iov: *const iovec, count: c_int) -> ssize_t {
    if !ours(fd) {
        // SAFETY: the program's own arguments.
        return unsafe { (originals().readv)(fd, iov, count) };
    }
    // SAFETY: the program's own vectors.
    unsafe { receive_vectored(fd, iov, count, 0) }
}

/// # Safety
/// As `recvmsg(2)`.
#[no_mangle]
pub unsafe extern "C" fn recvmsg(fd: c_int, msg: *mut msghdr, flags: c_int) -> ssize_t {
    if !ours(fd) {
        // SAFETY: the program's own arguments.
        return unsafe { (originals().recvmsg)(fd, msg, flags) };
    }
    if msg.is_null() {
        return fail(Errno(libc::EFAULT));
    }
    // SAFETY: the program's message header.
    let m = unsafe { &mut *msg };
    // SAFETY: the program's own vectors.
    let n = unsafe { receive_vectored(fd, m.msg_iov, m.msg_iovlen as c_int, flags) };
    if n >= 0 {
        m.msg_controllen = 0;
        m.msg_flags = 0;
        if let Ok(peer) = on_process(|p| p.stack.peer_addr(p.desc(fd)?.sock)) {
            let mut len = m.msg_namelen;
            // SAFETY: the program's own address buffer of `msg_namelen` bytes.
            unsafe { write_addr(peer, m.msg_name.cast(), &mut len) };
            m.msg_namelen = len;
        }
    }
    n
}

/// # Safety
/// As `write(2)`.
#[no_mangle]
pub unsafe extern "C" fn write(fd: c_int, buf: *const c_void, count: size_t) -> ssize_t {
    if !ours(fd) {
        // SAFETY: the program's own arguments.
        return unsafe { (originals().write)(fd, buf, count) };
    }
    // SAFETY: the program's own buffer.
    size(transmit(fd, unsafe { bytes(buf, count) }, 0))
}

/// # Safety
/// As `send(2)`.
#[no_mangle]
pub unsafe extern "C" fn send(fd: c_int, buf: *const c_void, len: size_t, flags: c_int) -> ssize_t {
    if !ours(fd) {
        // SAFETY: the program's own arguments.
        return unsafe { (originals().send)(fd, buf, len, flags) };
    }
    // SAFETY: the program's own buffer.
    size(transmit(fd, unsafe { bytes(buf, len) }, flags))
}

/// `sendto`: on a connected stream socket the address is ignored, as on Linux.
///
/// # Safety
/// As `sendto(2)`.
#[no_mangle]
pub unsafe extern "C" fn sendto(
    fd: c_int,
    buf: *const c_void,
    len: size_t,
    flags: c_int,
    addr: *const sockaddr,
    addrlen: socklen_t,
) -> ssize_t {
    if !ours(fd) {
        // SAFETY: the program's own arguments.
        return unsafe { (originals().sendto)(fd, buf, len, flags, addr, addrlen) };
    }
    // SAFETY: the program's own buffer.
    size(transmit(fd, unsafe { bytes(buf, len) }, flags))
}

/// # Safety
/// As `writev(2)`.
#[no_mangle]
pub unsafe extern "C" fn writev(fd: c_int, iov: *const iovec, count: c_int) -> ssize_t {
    if !ours(fd) {
        // SAFETY: the program's own arguments.
        return unsafe { (originals().writev)(fd, iov, count) };
    }
    // SAFETY: the program's own vectors.
    unsafe { send_vectored(fd, iov, count, 0) }
}

/// # Safety
/// As `sendmsg(2)`.
#[no_mangle]
pub unsafe extern "C" fn sendmsg(fd: c_int, msg: *const msghdr, flags: c_int) -> ssize_t {
    if !ours(fd) {
        // SAFETY: the program's own arguments.
        return unsafe { (originals().sendmsg)(fd, msg, flags) };
    }
    if msg.is_null() {
        return fail(Errno(libc::EFAULT));
    }
    // SAFETY: the program's message header.
    let m = unsafe { &*msg };
    // SAFETY: the program's own vectors.
    unsafe { send_vectored(fd, m.msg_iov, m.msg_iovlen as c_int, flags) }
}

/// `sendfile` from a file to a Rusty socket: the file's bytes are read and sent in
/// pieces; the file offset (or `*offset`) moves by what was sent.
///
/// # Safety
/// As `sendfile(2)`.
#[no_mangle]
pub unsafe extern "C" fn sendfile(
    out: c_int,
    input: c_int,
    offset: *mut off_t,
    count: size_t,
) -> ssize_t {
    if !ours(out) {
        // SAFETY: the program's own arguments.
        return unsafe { (originals().sendfile)(out, input, offset, count) };
    }
    let mut at = if offset.is_null() {
        // SAFETY: plain integer arguments.
        unsafe { libc::lseek(input, 0, libc::SEEK_CUR) }
    } else {
        // SAFETY: the program's offset.
        unsafe { *offset }
    };
    if at < 0 {
        return fail(Errno(if offset.is_null() {
            sys::errno()
        } else {
            libc::EINVAL
        }));
    }
    let mut buf = vec![0u8; count.min(256 << 10)];
    let mut sent = 0usize;
    let result = loop {
        if sent == count {
            break Ok(sent);
        }
        let want = (count - sent).min(buf.len());
        // SAFETY: reads at most `want` bytes into a live buffer of at least that size.
        let got = unsafe { libc::pread(input, buf.as_mut_ptr().cast(), want, at) };
        if got < 0 {
            break if sent > 0 {
                Ok(sent)
            } else {
                Err(Errno(sys::errno()))
            };
        }
        if got == 0 {
            break Ok(sent);
        }
        let got = got as usize;
        // After the first piece, send only what fits now, as Linux returns a short
        // count rather than block again.
        let flags = if sent > 0 { libc::MSG_DONTWAIT } else { 0 };
        match transmit(out, &buf[..got], flags) {
            Ok(n) => {
                sent += n;
                at += n as off_t;
                if n < got {
                    break Ok(sent);
                }
            }
            Err(e) if sent > 0 && matches!(e.0, libc::EAGAIN | libc::EINTR) => break Ok(sent),
            Err(e) => break Err(e),
        }
    };
    if offset.is_null() {
        // SAFETY: plain integer arguments.
        unsafe { libc::lseek(input, at, libc::SEEK_SET) };
    } else {
        // SAFETY: the program's offset.
        unsafe { *offset = at };
    }
    size(result)
}

/// # Safety
/// As `close(2)`.
#[no_mangle]
pub unsafe extern "C" fn close(fd: c_int) -> c_int {
    if kind(fd) != Kind::Kernel && !Bypass::active() {
        process::with(|p| p.forget(fd));
    }
    // SAFETY: a plain integer argument.
    unsafe { (originals().close)(fd) }
}

/// # Safety
/// As `close_range(2)`.
#[no_mangle]
pub unsafe extern "C" fn close_range(first: c_uint, last: c_uint, flags: c_int) -> c_int {
    if flags & libc::CLOSE_RANGE_CLOEXEC as c_int == 0 && process::started() && !Bypass::active() {
        process::with(|p| {
            let top = last.min(c_int::MAX as c_uint) as RawFd;
            for fd in first as RawFd..=top {
                if kind(fd) != Kind::Kernel {
                    p.forget(fd);
                }
            }
        });
    }
    // SAFETY: plain integer arguments.
    unsafe { (originals().close_range)(first, last, flags) }
}

/// # Safety
/// As `shutdown(2)`.
#[no_mangle]
pub unsafe extern "C" fn shutdown(fd: c_int, how: c_int) -> c_int {
    if !ours(fd) {
        // SAFETY: plain integer arguments.
        return unsafe { (originals().shutdown)(fd, how) };
    }
    let how = match how {
        libc::SHUT_RD => Shut::Read,
        libc::SHUT_WR => Shut::Write,
        libc::SHUT_RDWR => Shut::Both,
        _ => return fail(Errno(libc::EINVAL)),
    };
    int(on_process(|p| {
        let sock = p.desc(fd)?.sock;
        p.stir();
        p.stack.shutdown(sock, how).map(|()| 0)
    }))
}

/// # Safety
/// As `getsockname(2)`.
#[no_mangle]
pub unsafe extern "C" fn getsockname(fd: c_int, addr: *mut sockaddr, len: *mut socklen_t) -> c_int {
    if !ours(fd) {
        // SAFETY: the program's own arguments.
        return unsafe { (originals().getsockname)(fd, addr, len) };
    }
    match on_process(|p| p.stack.local_addr(p.desc(fd)?.sock)) {
        Ok(a) => {
            // SAFETY: the program's own address buffer.
            unsafe { write_addr(a, addr, len) };
            0
        }
        Err(e) => fail(e),
    }
}

/// # Safety
/// As `getpeername(2)`.
#[no_mangle]
pub unsafe extern "C" fn getpeername(fd: c_int, addr: *mut sockaddr, len: *mut socklen_t) -> c_int {
    if !ours(fd) {
        // SAFETY: the program's own arguments.
        return unsafe { (originals().getpeername)(fd, addr, len) };
    }
    match on_process(|p| p.stack.peer_addr(p.desc(fd)?.sock)) {
        Ok(a) => {
            // SAFETY: the program's own address buffer.
            unsafe { write_addr(a, addr, len) };
            0
        }
        Err(e) => fail(e),
    }
}

/// # Safety
/// As `setsockopt(2)`.
#[no_mangle]
pub unsafe extern "C" fn setsockopt(
    fd: c_int,
    level: c_int,
    name: c_int,
    value: *const c_void,
    len: socklen_t,
) -> c_int {
    if !ours(fd) {
        // SAFETY: the program's own arguments.
        return unsafe { (originals().setsockopt)(fd, level, name, value, len) };
    }
    if value.is_null() && len > 0 {
        return fail(Errno(libc::EFAULT));
    }
    // SAFETY: the program's option value of `len` bytes.
    let raw = unsafe { bytes(value, len as size_t) };
    int(on_process(|p| {
        crate::options::set(p, fd, level, name, raw).map(|()| 0)
    }))
}

/// # Safety
/// As `getsockopt(2)`.
#[no_mangle]
pub unsafe extern "C" fn getsockopt(
    fd: c_int,
    level: c_int,
    name: c_int,
    value: *mut c_void,
    len: *mut socklen_t,
) -> c_int {
    if !ours(fd) {
        // SAFETY: the program's own arguments.
        return unsafe { (originals().getsockopt)(fd, level, name, value, len) };
    }
    if value.is_null() || len.is_null() {
        return fail(Errno(libc::EFAULT));
    }
    let got = on_process(|p| crate::options::get(p, fd, level, name));
    match got {
        Ok(bytes_out) => {
            // SAFETY: the program's `len`.
            let room = unsafe { *len } as usize;
            let n = room.min(bytes_out.len());
            // SAFETY: at most `room` bytes into the program's buffer of that size.
            unsafe {
                bytes_mut(value, n).copy_from_slice(&bytes_out[..n]);
                *len = n as socklen_t;
            }
            0
        }
        Err(e) => fail(e),
    }
}

/// `fcntl`: the third argument is read as a machine word, which is how C callers pass
/// an `int` or a pointer on Linux's ABIs.
///
/// # Safety
/// As `fcntl(2)`.
#[no_mangle]
pub unsafe extern "C" fn fcntl(fd: c_int, cmd: c_int, arg: usize) -> c_int {
    let o = originals();
    if !ours(fd) {
        // SAFETY: the program's own arguments.
        return unsafe { (o.fcntl)(fd, cmd, arg) };
    }
    match cmd {
        libc::F_GETFL => {
            // SAFETY: plain integer arguments, on the socket's eventfd.
            let flags = unsafe { (o.fcntl)(fd, cmd, 0) } & !libc::O_NONBLOCK;
            match on_process(|p| Ok(p.desc(fd)?.nonblock)) {
                Ok(true) => flags | libc::O_NONBLOCK,
                Ok(false) => flags,
                Err(e) => fail(e),
            }
        }
        libc::F_SETFL => int(on_process(|p| {
            p.desc_mut(fd)?.nonblock = arg as c_int & libc::O_NONBLOCK != 0;
            Ok(0)
        })),
        libc::F_DUPFD | libc::F_DUPFD_CLOEXEC => {
            let r = process::with(|p| {
                // SAFETY: plain integer arguments, on the socket's eventfd.
                let new = unsafe { (o.fcntl)(fd, cmd, arg) };
                if new < 0 {
                    return Err(Errno(sys::errno()));
                }
                p.duplicate(fd, new).map(|()| new)
            });
            int(r.unwrap_or(Err(Errno(libc::EBADF))))
        }
        // Descriptor flags (FD_CLOEXEC) and the rest are the eventfd's.
        // SAFETY: the program's own arguments.
        _ => unsafe { (o.fcntl)(fd, cmd, arg) },
    }
}

/// `ioctl`: `FIONBIO` and `FIONREAD` on Rusty sockets; other requests get `ENOTTY`,
/// as on a socket that does not know them.
///
/// # Safety
/// As `ioctl(2)`.
#[no_mangle]
pub unsafe extern "C" fn ioctl(fd: c_int, request: c_ulong, arg: usize) -> c_int {
    if !ours(fd) {
        // SAFETY: the program's own arguments.
        return unsafe { (originals().ioctl)(fd, request, arg) };
    }
    let ptr = arg as *mut c_int;
    if ptr.is_null() {
        return fail(Errno(libc::EFAULT));
    }
    match request {
        libc::FIONBIO => {
            // SAFETY: FIONBIO's argument points to an int.
            let on = unsafe { *ptr } != 0;
            int(on_process(|p| {
                p.desc_mut(fd)?.nonblock = on;
                Ok(0)
            }))
        }
        libc::FIONREAD => match on_process(|p| p.stack.unread(p.desc(fd)?.sock)) {
            Ok(n) => {
                // SAFETY: FIONREAD's argument points to an int.
                unsafe { *ptr = n.min(c_int::MAX as usize) as c_int };
                0
            }
            Err(e) => fail(e),
        },
        _ => fail(Errno(libc::ENOTTY)),
    }
}

/// # Safety
/// As `dup(2)`.
#[no_mangle]
pub unsafe extern "C" fn dup(fd: c_int) -> c_int {
    if !ours(fd) {
        // SAFETY: a plain integer argument.
        return unsafe { (originals().dup)(fd) };
    }
    let r = process::with(|p| {
        // SAFETY: a plain integer argument, the socket's eventfd.
        let new = unsafe { (originals().dup)(fd) };
        if new < 0 {
            return Err(Errno(sys::errno()));
        }
        p.duplicate(fd, new).map(|()| new)
    });
    int(r.unwrap_or(Err(Errno(libc::EBADF))))
}

/// `dup2` and `dup3`: the new number first stops being whatever Rusty socket it was.
fn dup_onto(old: RawFd, new: RawFd, dup: impl FnOnce() -> c_int) -> c_int {
    let r = process::with(|p| {
        if kind(new) != Kind::Kernel {
            p.forget(new);
        }
        let r = dup();
        if r < 0 {
            return Err(Errno(sys::errno()));
        }
        if kind(old) == Kind::Socket {
            p.duplicate(old, new)?;
        }
        Ok(r)
    });
    int(r.unwrap_or(Err(Errno(libc::EBADF))))
}

/// # Safety
/// As `dup2(2)`.
#[no_mangle]
pub unsafe extern "C" fn dup2(old: c_int, new: c_int) -> c_int {
    let o = originals();
    if (kind(old) == Kind::Kernel && kind(new) == Kind::Kernel) || Bypass::active() || old == new {
        // SAFETY: plain integer arguments.
        return unsafe { (o.dup2)(old, new) };
    }
    // SAFETY: plain integer arguments.
    dup_onto(old, new, || unsafe { (o.dup2)(old, new) })
}

/// # Safety
/// As `dup3(2)`.
#[no_mangle]
pub unsafe extern "C" fn dup3(old: c_int, new: c_int, flags: c_int) -> c_int {
    let o = originals();
    if (kind(old) == Kind::Kernel && kind(new) == Kind::Kernel) || Bypass::active() || old == new {
        // SAFETY: plain integer arguments.
        return unsafe { (o.dup3)(old, new, flags) };
    }
    // SAFETY: plain integer arguments.
    dup_onto(old, new, || unsafe { (o.dup3)(old, new, flags) })
}

// ----- Waiting -----

/// `poll` over a mix of Rusty sockets and kernel descriptors.
fn poll_mixed(
    fds: &mut [pollfd],
    timeout: Option<Duration>,
    sigmask: Option<&libc::sigset_t>,
) -> Result<c_int, Errno> {
    let kernel: Vec<pollfd> = fds
        .iter()
        .filter(|f| kind(f.fd) != Kind::Socket && f.fd >= 0)
        .copied()
        .collect();
    let mut scratch = kernel.clone();
    let o = originals();
    let waited = process::wait(timeout, &kernel, sigmask, |p| {
        // SAFETY: `scratch` is live and its length is given.
        let k = unsafe { (o.poll)(scratch.as_mut_ptr(), scratch.len() as nfds_t, 0) };
        if k < 0 {
            return Some(Err(Errno(sys::errno())));
        }
        let mut ready = 0;
        let mut next = scratch.iter();
        for f in fds.iter_mut() {
            f.revents = if f.fd < 0 {
                0
            } else if kind(f.fd) == Kind::Socket {
                p.poll_revents(f.fd, f.events)
            } else {
                next.next().map_or(0, |s| s.revents)
            };
            if f.revents != 0 {
                ready += 1;
            }
        }
        (ready > 0).then_some(Ok(ready))
    });
    match waited {
        Ok(r) => r,
        Err(Unmet::TimedOut) => {
            fds.iter_mut().for_each(|f| f.revents = 0);
            Ok(0)
        }
        Err(Unmet::Interrupted) => Err(Errno(libc::EINTR)),
    }
}

fn any_socket(fds: &[pollfd]) -> bool {
    fds.iter().any(|f| kind(f.fd) == Kind::Socket)
}

/// # Safety
/// As `poll(2)`.
#[no_mangle]
pub unsafe extern "C" fn poll(fds: *mut pollfd, nfds: nfds_t, timeout: c_int) -> c_int {
    let o = originals();
    if fds.is_null() || Bypass::active() || !process::started() {
        // SAFETY: the program's own arguments.
        return unsafe { (o.poll)(fds, nfds, timeout) };
    }
    // SAFETY: the program's `nfds` entries.
    let list = unsafe { std::slice::from_raw_parts_mut(fds, nfds as usize) };
    if !any_socket(list) {
        // SAFETY: the program's own arguments.
        return unsafe { (o.poll)(fds, nfds, timeout) };
    }
    int(poll_mixed(list, millis(timeout), None))
}

/// # Safety
/// As `ppoll(2)`.
#[no_mangle]
pub unsafe extern "C" fn ppoll(
    fds: *mut pollfd,
    nfds: nfds_t,
    ts: *const libc::timespec,
    sigmask: *const libc::sigset_t,
) -> c_int {
    let o = originals();
    if fds.is_null() || Bypass::active() || !process::started() {
        // SAFETY: the program's own arguments.
        return unsafe { (o.ppoll)(fds, nfds, ts, sigmask) };
    }
    // SAFETY: the program's `nfds` entries.
    let list = unsafe { std::slice::from_raw_parts_mut(fds, nfds as usize) };
    if !any_socket(list) {
        // SAFETY: the program's own arguments.
        return unsafe { (o.ppoll)(fds, nfds, ts, sigmask) };
    }
    // SAFETY: the program's timespec and mask.
    let (timeout, mask) = match unsafe { timespec(ts) } {
        Ok(t) => (t, unsafe { sigmask.as_ref() }),
        Err(e) => return fail(e),
    };
    int(poll_mixed(list, timeout, mask))
}

/// `select` and `pselect` as `poll` over the descriptors in the sets.
///
/// # Safety
/// The sets are null or hold `nfds` descriptors' bits.
unsafe fn select_mixed(
    nfds: c_int,
    sets: [*mut fd_set; 3],
    timeout: Option<Duration>,
    sigmask: Option<&libc::sigset_t>,
) -> Result<c_int, Errno> {
    if !(0..=libc::FD_SETSIZE as c_int).contains(&nfds) {
        return Err(Errno(libc::EINVAL));
    }
    let bits = [libc::POLLIN, libc::POLLOUT, libc::POLLPRI];
    let mut list: Vec<pollfd> = Vec::new();
    for fd in 0..nfds {
        let mut events = 0;
        for (set, bit) in sets.iter().zip(bits) {
            // SAFETY: a non-null set holds bits for `nfds` descriptors.
            if !set.is_null() && unsafe { libc::FD_ISSET(fd, *set) } {
                events |= bit;
            }
        }
        if events != 0 {
            list.push(pollfd {
                fd,
                events,
                revents: 0,
            });
        }
    }
    let r = poll_mixed(&mut list, timeout, sigmask)?;
    if r < 0 {
        return Ok(r);
    }
    for set in sets.iter().filter(|s| !s.is_null()) {
        // SAFETY: a non-null set is the program's.
        unsafe { libc::FD_ZERO(*set) };
    }
    let mut count = 0;
    for f in &list {
        if f.revents & libc::POLLNVAL != 0 {
            return Err(Errno(libc::EBADF));
        }
        let hit = [
            f.revents & (libc::POLLIN | libc::POLLHUP | libc::POLLERR) != 0,
            f.revents & (libc::POLLOUT | libc::POLLERR) != 0,
            f.revents & libc::POLLPRI != 0,
        ];
        for ((set, bit), hit) in sets.iter().zip(bits).zip(hit) {
            if hit && f.events & bit != 0 && !set.is_null() {
                // SAFETY: a non-null set holds bits for `nfds` descriptors.
                unsafe { libc::FD_SET(f.fd, *set) };
                count += 1;
            }
        }
    }
    Ok(count)
}

/// Whether any descriptor in the sets is a Rusty socket.
///
/// # Safety
/// The sets are null or hold `nfds` descriptors' bits.
unsafe fn sets_hold_socket(nfds: c_int, sets: [*mut fd_set; 3]) -> bool {
    (0..nfds.clamp(0, libc::FD_SETSIZE as c_int)).any(|fd| {
        kind(fd) == Kind::Socket
            // SAFETY: a non-null set holds bits for `nfds` descriptors.
            && sets.iter().any(|s| !s.is_null() && unsafe { libc::FD_ISSET(fd, *s) })
    })
}

/// # Safety
/// As `select(2)`.
#[no_mangle]
pub unsafe extern "C" fn select(
    nfds: c_int,
    r: *mut fd_set,
    w: *mut fd_set,
    e: *mut fd_set,
    tv: *mut libc::timeval,
) -> c_int {
    let sets = [r, w, e];
    // SAFETY: the program's sets.
    if Bypass::active() || !process::started() || !unsafe { sets_hold_socket(nfds, sets) } {
        // SAFETY: the program's own arguments.
        return unsafe { (originals().select)(nfds, r, w, e, tv) };
    }
    let timeout = if tv.is_null() {
        None
    } else {
        // SAFETY: the program's timeval.
        let t = unsafe { *tv };
        if t.tv_sec < 0 || t.tv_usec < 0 {
            return fail(Errno(libc::EINVAL));
        }
        Some(Duration::from_secs(t.tv_sec as u64) + Duration::from_micros(t.tv_usec as u64))
    };
    // SAFETY: the program's sets.
    int(unsafe { select_mixed(nfds, sets, timeout, None) })
}

/// # Safety
/// As `pselect(2)`.
#[no_mangle]
pub unsafe extern "C" fn pselect(
    nfds: c_int,
    r: *mut fd_set,
    w: *mut fd_set,
    e: *mut fd_set,
    ts: *const libc::timespec,
    sigmask: *const libc::sigset_t,
) -> c_int {
    let sets = [r, w, e];
    // SAFETY: the program's sets.
    if Bypass::active() || !process::started() || !unsafe { sets_hold_socket(nfds, sets) } {
        // SAFETY: the program's own arguments.
        return unsafe { (originals().pselect)(nfds, r, w, e, ts, sigmask) };
    }
    // SAFETY: the program's timespec, mask and sets.
    match unsafe { timespec(ts) } {
        Ok(t) => int(unsafe { select_mixed(nfds, sets, t, sigmask.as_ref()) }),
        Err(err) => fail(err),
    }
}

/// # Safety
/// As `epoll_ctl(2)`.
#[no_mangle]
pub unsafe extern "C" fn epoll_ctl(
    epfd: c_int,
    op: c_int,
    fd: c_int,
    event: *mut epoll_event,
) -> c_int {
    if !ours(fd) {
        // SAFETY: the program's own arguments.
        return unsafe { (originals().epoll_ctl)(epfd, op, fd, event) };
    }
    let (events, data) = if op == libc::EPOLL_CTL_DEL {
        (0, 0)
    } else if event.is_null() {
        return fail(Errno(libc::EFAULT));
    } else {
        // SAFETY: the program's event (packed on x86-64, hence the unaligned read).
        let ev = unsafe { std::ptr::read_unaligned(event) };
        (ev.events, ev.u64)
    };
    if epfd == fd {
        return fail(Errno(libc::EINVAL));
    }
    int(on_process(|p| {
        p.epoll_ctl(epfd, op, fd, events, data).map(|()| 0)
    }))
}

/// `epoll_wait` and its variants on a set that watches Rusty sockets: their events
/// first, then the kernel's.
///
/// # Safety
/// `events` has `max` writable entries.
unsafe fn epoll_mixed(
    epfd: RawFd,
    events: *mut epoll_event,
    max: c_int,
    timeout: Option<Duration>,
    sigmask: Option<&libc::sigset_t>,
) -> c_int {
    if events.is_null() || max <= 0 {
        return fail(Errno(libc::EINVAL));
    }
    let o = originals();
    let watch = [pollfd {
        fd: epfd,
        events: libc::POLLIN,
        revents: 0,
    }];
    let mut ours_ready = Vec::new();
    let waited = process::wait(timeout, &watch, sigmask, |p| {
        ours_ready.clear();
        p.epoll_ready(epfd, max as usize, &mut ours_ready);
        for (i, &(bits, data)) in ours_ready.iter().enumerate() {
            let ev = epoll_event {
                events: bits,
                u64: data,
            };
            // SAFETY: `i < max`, inside the program's array.
            unsafe { std::ptr::write_unaligned(events.add(i), ev) };
        }
        let n = ours_ready.len() as c_int;
        let k = if n < max {
            // SAFETY: the rest of the program's array.
            unsafe { (o.epoll_wait)(epfd, events.add(n as usize), max - n, 0) }
        } else {
            0
        };
        if k < 0 {
            return Some(Err(Errno(sys::errno())));
        }
        (n + k > 0).then_some(Ok(n + k))
    });
    match waited {
        Ok(r) => int(r),
        Err(Unmet::TimedOut) => 0,
        Err(Unmet::Interrupted) => fail(Errno(libc::EINTR)),
    }
}

/// Whether an `epoll_wait` on `epfd` needs the library.
fn epoll_is_ours(epfd: RawFd) -> bool {
    kind(epfd) == Kind::Epoll
        && !Bypass::active()
        && process::with(|p| p.epoll_watches_sockets(epfd)).unwrap_or(false)
}

/// # Safety
/// As `epoll_wait(2)`.
#[no_mangle]
pub unsafe extern "C" fn epoll_wait(
    epfd: c_int,
    events: *mut epoll_event,
    max: c_int,
    timeout: c_int,
) -> c_int {
    if !epoll_is_ours(epfd) {
        // SAFETY: the program's own arguments.
        return unsafe { (originals().epoll_wait)(epfd, events, max, timeout) };
    }
    // SAFETY: the program's own array.
    unsafe { epoll_mixed(epfd, events, max, millis(timeout), None) }
}

/// # Safety
/// As `epoll_pwait(2)`.
#[no_mangle]
pub unsafe extern "C" fn epoll_pwait(
    epfd: c_int,
    events: *mut epoll_event,
    max: c_int,
    timeout: c_int,
    sigmask: *const libc::sigset_t,
) -> c_int {
    if !epoll_is_ours(epfd) {
        // SAFETY: the program's own arguments.
        return unsafe { (originals().epoll_pwait)(epfd, events, max, timeout, sigmask) };
    }
    // SAFETY: the program's own array and mask.
    unsafe { epoll_mixed(epfd, events, max, millis(timeout), sigmask.as_ref()) }
}

/// `epoll_pwait2`, with a `timespec` timeout. libc has it since glibc 2.35; on a set
/// without Rusty sockets it is the system call.
///
/// # Safety
/// As `epoll_pwait2(2)`.
#[no_mangle]
pub unsafe extern "C" fn epoll_pwait2(
    epfd: c_int,
    events: *mut epoll_event,
    max: c_int,
    ts: *const libc::timespec,
    sigmask: *const libc::sigset_t,
) -> c_int {
    if !epoll_is_ours(epfd) {
        // SAFETY: the program's own arguments; the kernel reads the mask's 8 bytes.
        let r = unsafe {
            libc::syscall(
                libc::SYS_epoll_pwait2,
                epfd,
                events,
                max,
                ts,
                sigmask,
                8usize,
            )
        };
        return r as c_int;
    }
    // SAFETY: the program's timespec, array and mask.
    match unsafe { timespec(ts) } {
        Ok(t) => unsafe { epoll_mixed(epfd, events, max, t, sigmask.as_ref()) },
        Err(e) => fail(e),
    }
}

// ----- glibc's fortified variants (`_FORTIFY_SOURCE`) -----

/// The check the fortified variants make before the call.
fn check_fortified(len: size_t, room: size_t) {
    if len > room {
        sys::fatal("buffer overflow detected by a fortified socket call");
    }
}

/// # Safety
/// As glibc's `__read_chk`.
#[no_mangle]
pub unsafe extern "C" fn __read_chk(
    fd: c_int,
    buf: *mut c_void,
    n: size_t,
    room: size_t,
) -> ssize_t {
    check_fortified(n, room);
    // SAFETY: checked against the buffer's size.
    unsafe { read(fd, buf, n) }
}

/// # Safety
/// As glibc's `__recv_chk`.
#[no_mangle]
pub unsafe extern "C" fn __recv_chk(
    fd: c_int,
    buf: *mut c_void,
    n: size_t,
    room: size_t,
    flags: c_int,
) -> ssize_t {
    check_fortified(n, room);
    // SAFETY: checked against the buffer's size.
    unsafe { recv(fd, buf, n, flags) }
}

/// # Safety
/// As glibc's `__recvfrom_chk`.
#[no_mangle]
pub unsafe extern "C" fn __recvfrom_chk(
    fd: c_int,
    buf: *mut c_void,
    n: size_t,
    room: size_t,
    flags: c_int,
    addr: *mut sockaddr,
    addrlen: *mut socklen_t,
) -> ssize_t {
    check_fortified(n, room);
    // SAFETY: checked against the buffer's size.
    unsafe { recvfrom(fd, buf, n, flags, addr, addrlen) }
}

/// # Safety
/// As glibc's `__poll_chk`.
#[no_mangle]
pub unsafe extern "C" fn __poll_chk(
    fds: *mut pollfd,
    nfds: nfds_t,
    timeout: c_int,
    room: size_t,
) -> c_int {
    check_fortified(nfds as size_t * std::mem::size_of::<pollfd>(), room);
    // SAFETY: checked against the array's size.
    unsafe { poll(fds, nfds, timeout) }
}

/// # Safety
/// As glibc's `__ppoll_chk`.
#[no_mangle]
pub unsafe extern "C" fn __ppoll_chk(
    fds: *mut pollfd,
    nfds: nfds_t,
    ts: *const libc::timespec,
    sigmask: *const libc::sigset_t,
    room: size_t,
) -> c_int {
    check_fortified(nfds as size_t * std::mem::size_of::<pollfd>(), room);
    // SAFETY: checked against the array's size.
    unsafe { ppoll(fds, nfds, ts, sigmask) }
}
