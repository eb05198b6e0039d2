//! Waiting for readiness: poll, select and epoll over a mix of Rusty sockets and
//! kernel descriptors, and glibc's fortified variants.

use super::*;

use super::io::{read, recv, recvfrom};

/// `poll` over a mix of Rusty sockets and kernel descriptors.
fn poll_mixed(
    fds: &mut [pollfd],
    timeout: Option<Duration>,
    sigmask: Option<&libc::sigset_t>,
) -> Result<c_int, Errno> {
    // Epoll sets that watch Rusty sockets are polled in the kernel too, for their
    // kernel descriptors.
    let kernel: Vec<pollfd> = fds
        .iter()
        .filter(|f| kind(f.fd) != Kind::Socket && f.fd >= 0)
        .copied()
        .collect();
    let mut scratch = kernel.clone();
    let o = originals();
    process::with(|p| {
        for f in fds.iter().filter(|f| f.events & libc::POLLIN != 0) {
            if kind(f.fd) == Kind::Socket {
                p.engage(f.fd);
            }
        }
    });
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
                let theirs = next.next().map_or(0, |s| s.revents);
                let nested = kind(f.fd) == Kind::Epoll && p.epoll_peek(f.fd, 0);
                theirs | if nested { f.events & libc::POLLIN } else { 0 }
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
        Err(u) => Err(unmet(u, Errno(libc::EINTR))),
    }
}

fn any_socket(fds: &[pollfd]) -> bool {
    fds.iter().any(|f| kind(f.fd) != Kind::Kernel)
}

/// # Safety
/// As `poll(2)`.
#[no_mangle]
pub unsafe extern "C" fn poll(fds: *mut pollfd, nfds: nfds_t, timeout: c_int) -> c_int {
    let _call = Call::enter("poll");
    let o = originals();
    if fds.is_null() || Bypass::active() || !process::started() {
        // SAFETY: the program's own arguments.
        return unsafe { (o.poll)(fds, nfds, timeout) };
    }
    // SAFETY: the program's `nfds` entries.
    let list = unsafe { std::slice::from_raw_parts_mut(fds, nfds as usize) };
    if !any_socket(list) {
        process::settle();
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
    let _call = Call::enter("ppoll");
    let o = originals();
    if fds.is_null() || Bypass::active() || !process::started() {
        // SAFETY: the program's own arguments.
        return unsafe { (o.ppoll)(fds, nfds, ts, sigmask) };
    }
    // SAFETY: the program's `nfds` entries.
    let list = unsafe { std::slice::from_raw_parts_mut(fds, nfds as usize) };
    if !any_socket(list) {
        process::settle();
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
    let _call = Call::enter("select");
    let sets = [r, w, e];
    // SAFETY: the program's sets.
    if Bypass::active() || !process::started() || !unsafe { sets_hold_socket(nfds, sets) } {
        process::settle();
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
    let _call = Call::enter("pselect");
    let sets = [r, w, e];
    // SAFETY: the program's sets.
    if Bypass::active() || !process::started() || !unsafe { sets_hold_socket(nfds, sets) } {
        process::settle();
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
    let _call = Call::enter("epoll_ctl");
    if kind(fd) == Kind::Epoll && !Bypass::active() {
        // An epoll set inside another: the kernel watches its kernel descriptors, the
        // library its Rusty sockets.
        // SAFETY: the program's own arguments.
        let r = unsafe { (originals().epoll_ctl)(epfd, op, fd, event) };
        if r < 0 {
            return r;
        }
    } else if !ours(fd) {
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
        if op != libc::EPOLL_CTL_DEL {
            p.engage(fd);
        }
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
        Err(u) => fail(unmet(u, Errno(libc::EINTR))),
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
    let _call = Call::enter("epoll_wait");
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
    let _call = Call::enter("epoll_pwait");
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
    let _call = Call::enter("epoll_pwait2");
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
    let _call = Call::enter("__read_chk");
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
    let _call = Call::enter("__recv_chk");
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
    let _call = Call::enter("__recvfrom_chk");
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
    let _call = Call::enter("__poll_chk");
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
    let _call = Call::enter("__ppoll_chk");
    check_fortified(nfds as size_t * std::mem::size_of::<pollfd>(), room);
    // SAFETY: checked against the array's size.
    unsafe { ppoll(fds, nfds, ts, sigmask) }
}
