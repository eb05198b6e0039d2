//! The socket's life: making, binding, listening, accepting and connecting it, its
//! names and options, descriptor flags and duplicates, shutting and closing it.

use super::*;

/// `socket`: TCP over IPv4 and IPv6 goes to Rusty (a kernel eventfd gives the
/// descriptor its number), when the link speaks the family (an AF_INET6 socket always:
/// it carries IPv4 as IPv4-mapped addresses); everything else to the kernel.
///
/// # Safety
/// As `socket(2)`.
#[no_mangle]
pub unsafe extern "C" fn socket(domain: c_int, ty: c_int, protocol: c_int) -> c_int {
    let _call = Call::enter("socket");
    let base = ty & !(libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC);
    let tcp = base == libc::SOCK_STREAM && (protocol == 0 || protocol == libc::IPPROTO_TCP);
    let family = Family::of_domain(domain).filter(|_| tcp);
    let kernel = || {
        // SAFETY: the program's own arguments.
        unsafe { (originals().socket)(domain, ty, protocol) }
    };
    let Some(family) = family else {
        return kernel();
    };
    if Bypass::active() || !running() {
        return kernel();
    }
    let nonblock = ty & libc::SOCK_NONBLOCK != 0;
    let fd = match sys::eventfd(ty & libc::SOCK_CLOEXEC != 0, false) {
        Ok(fd) => fd,
        Err(e) => return fail(Errno(e)),
    };
    let attached = process::with(|p| {
        if !p.stack.speaks(family) {
            return false;
        }
        let s = p.stack.socket(family);
        p.attach(fd, s, nonblock);
        true
    });
    match attached {
        Some(true) => fd,
        Some(false) => {
            sys::close(fd);
            kernel()
        }
        None => {
            sys::close(fd);
            fail(Errno(libc::ENOMEM))
        }
    }
}

/// # Safety
/// As `bind(2)`.
#[no_mangle]
pub unsafe extern "C" fn bind(fd: c_int, addr: *const sockaddr, len: socklen_t) -> c_int {
    let _call = Call::enter("bind");
    if !ours(fd) {
        // SAFETY: the program's own arguments.
        return unsafe { (originals().bind)(fd, addr, len) };
    }
    // SAFETY: the program's own arguments.
    let raw = match unsafe { addr_bytes(addr, len) } {
        Ok(raw) => raw,
        Err(e) => return fail(e),
    };
    let here = on_process(|p| {
        let sock = p.desc(fd)?.sock;
        let a = bind_address(&raw, p.stack.family(sock)?)?;
        if !p.stack.binds(a)? {
            return Ok(false);
        }
        p.stack.bind(sock, a).map(|()| true)
    });
    match here {
        Ok(true) => 0,
        Ok(false) => match hand_to_kernel(fd, Errno(libc::EINVAL)) {
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
    let _call = Call::enter("listen");
    if !ours(fd) {
        // SAFETY: plain integer arguments.
        return unsafe { (originals().listen)(fd, backlog) };
    }
    let backlog = usize::try_from(backlog).unwrap_or(0).clamp(1, 4096);
    int(on_process(|p| p.listen(fd, backlog).map(|()| 0)))
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
    let _call = Call::enter("accept4");
    if !ours(fd) {
        // SAFETY: the program's own arguments.
        return unsafe { (originals().accept4)(fd, addr, len, flags) };
    }
    if flags & !(libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC) != 0 {
        return fail(Errno(libc::EINVAL));
    }
    if !addr.is_null() {
        // SAFETY: the program's own address length.
        if let Err(e) = unsafe { addr_room(addr, len) } {
            return fail(e);
        }
    }
    let (listener, nonblock, _) = match desc_of(fd, true) {
        Ok(d) => d,
        Err(e) => return fail(e),
    };
    let accepted = blocking(nonblock, None, false, |p| {
        p.engage(fd);
        let c = p.stack.accept(listener)?;
        // A connection that gets no descriptor (EMFILE) goes back to the head of the
        // queue, for the next accept.
        let new = match sys::eventfd(flags & libc::SOCK_CLOEXEC != 0, false) {
            Ok(new) => new,
            Err(e) => {
                p.stack.requeue(listener, c);
                return Err(Errno(e));
            }
        };
        p.attach(new, c, flags & libc::SOCK_NONBLOCK != 0);
        Ok((new, p.stack.peer_addr(c).ok()))
    });
    match accepted {
        Ok((new, peer)) => {
            if let (false, Some(peer)) = (addr.is_null(), peer) {
                // SAFETY: the program's own address buffer, which `addr_room` checked.
                unsafe { write_addr(peer, addr, len) };
            }
            new
        }
        Err(e) => fail(e),
    }
}

/// # Safety
/// As `accept(2)`.
#[no_mangle]
pub unsafe extern "C" fn accept(fd: c_int, addr: *mut sockaddr, len: *mut socklen_t) -> c_int {
    let _call = Call::enter("accept");
    // SAFETY: the program's own arguments.
    unsafe { accept4(fd, addr, len, 0) }
}

/// # Safety
/// As `connect(2)`.
#[no_mangle]
pub unsafe extern "C" fn connect(fd: c_int, addr: *const sockaddr, len: socklen_t) -> c_int {
    let _call = Call::enter("connect");
    if !ours(fd) {
        // SAFETY: the program's own arguments.
        return unsafe { (originals().connect)(fd, addr, len) };
    }
    // SAFETY: the program's own arguments.
    let raw = match unsafe { addr_bytes(addr, len) } {
        Ok(raw) => raw,
        Err(e) => return fail(e),
    };
    let started = on_process(|p| {
        let d = p.desc(fd)?;
        let (sock, nonblock) = (d.sock, d.nonblock);
        let unconnected = p.stack.is_unconnected(sock)?;
        let Some(a) = connect_address(&raw, p.stack.family(sock)?)? else {
            // AF_UNSPEC: nothing to dissolve on a socket not yet connected.
            return if unconnected {
                Ok(Some((sock, nonblock, Ok(()))))
            } else {
                Err(Errno(libc::EOPNOTSUPP))
            };
        };
        if unconnected && !p.stack.carries(a)? {
            return Ok(None);
        }
        p.stir();
        p.connecting();
        Ok(Some((sock, nonblock, p.stack.connect(sock, a))))
    });
    let (sock, nonblock, r) = match started {
        Ok(Some(s)) => s,
        Ok(None) => {
            // A bound socket cannot change hands: Linux finds no route from it.
            return match hand_to_kernel(fd, Errno(libc::ENETUNREACH)) {
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
/// As `close(2)`.
#[no_mangle]
pub unsafe extern "C" fn close(fd: c_int) -> c_int {
    let _call = Call::enter("close");
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
    let _call = Call::enter("close_range");
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
    let _call = Call::enter("shutdown");
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
    let _call = Call::enter("getsockname");
    if !ours(fd) {
        // SAFETY: the program's own arguments.
        return unsafe { (originals().getsockname)(fd, addr, len) };
    }
    // SAFETY: the program's own address length.
    let named = unsafe { addr_room(addr, len) }
        .and_then(|()| on_process(|p| p.stack.local_addr(p.desc(fd)?.sock)));
    match named {
        Ok(a) => {
            // SAFETY: the program's own address buffer, which `addr_room` checked.
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
    let _call = Call::enter("getpeername");
    if !ours(fd) {
        // SAFETY: the program's own arguments.
        return unsafe { (originals().getpeername)(fd, addr, len) };
    }
    // SAFETY: the program's own address length.
    let named = unsafe { addr_room(addr, len) }
        .and_then(|()| on_process(|p| p.stack.peer_addr(p.desc(fd)?.sock)));
    match named {
        Ok(a) => {
            // SAFETY: the program's own address buffer, which `addr_room` checked.
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
    let _call = Call::enter("setsockopt");
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
    let _call = Call::enter("getsockopt");
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
    let _call = Call::enter("fcntl");
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
            p.bequeath(fd);
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

/// `fcntl64`, the name glibc's headers give `fcntl` for programs built with 64-bit
/// file offsets (the same call on 64-bit Linux).
///
/// # Safety
/// As `fcntl(2)`.
#[no_mangle]
pub unsafe extern "C" fn fcntl64(fd: c_int, cmd: c_int, arg: usize) -> c_int {
    let _call = Call::enter("fcntl64");
    // SAFETY: the program's own arguments.
    unsafe { fcntl(fd, cmd, arg) }
}

/// `ioctl`: `FIONBIO` and `FIONREAD` on Rusty sockets; other requests get `ENOTTY`,
/// as on a socket that does not know them.
///
/// # Safety
/// As `ioctl(2)`.
#[no_mangle]
pub unsafe extern "C" fn ioctl(fd: c_int, request: c_ulong, arg: usize) -> c_int {
    let _call = Call::enter("ioctl");
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
                p.bequeath(fd);
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
    let _call = Call::enter("dup");
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
    let _call = Call::enter("dup2");
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
    let _call = Call::enter("dup3");
    let o = originals();
    if (kind(old) == Kind::Kernel && kind(new) == Kind::Kernel) || Bypass::active() || old == new {
        // SAFETY: plain integer arguments.
        return unsafe { (o.dup3)(old, new, flags) };
    }
    // SAFETY: plain integer arguments.
    dup_onto(old, new, || unsafe { (o.dup3)(old, new, flags) })
}
