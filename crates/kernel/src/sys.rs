//! Safe wrappers over the few Linux socket and epoll calls the kernel backend makes.
//! Every `unsafe` block of the crate lives in this file; each wrapper takes only owned or
//! borrowed descriptors and Rust slices, so the rest of the crate cannot misuse them.

use std::io::{self, IoSlice};
use std::mem;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV6};
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::time::Duration;

use rusty_stack::Keepalive;

fn cvt(r: libc::c_int) -> io::Result<libc::c_int> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

fn cvt_size(r: libc::ssize_t) -> io::Result<usize> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r as usize)
    }
}

/// Retry `f` while it fails with EINTR.
fn retry<T>(mut f: impl FnMut() -> io::Result<T>) -> io::Result<T> {
    loop {
        match f() {
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            r => return r,
        }
    }
}

/// `addr` as the kernel takes it, with the length to pass.
fn to_sockaddr(addr: SocketAddr) -> (libc::sockaddr_storage, libc::socklen_t) {
    // SAFETY: sockaddr_storage is plain old data; all zeroes is a valid value.
    let mut storage: libc::sockaddr_storage = unsafe { mem::zeroed() };
    let len = match addr {
        SocketAddr::V4(a) => {
            let sin = libc::sockaddr_in {
                sin_family: libc::AF_INET as libc::sa_family_t,
                sin_port: a.port().to_be(),
                sin_addr: libc::in_addr {
                    s_addr: u32::from(*a.ip()).to_be(),
                },
                sin_zero: [0; 8],
            };
            // SAFETY: sockaddr_storage is larger than sockaddr_in and aligned for any
            // socket address, so the write stays inside `storage`.
            unsafe { std::ptr::write((&mut storage as *mut libc::sockaddr_storage).cast(), sin) };
            mem::size_of::<libc::sockaddr_in>()
        }
        SocketAddr::V6(a) => {
            let sin6 = libc::sockaddr_in6 {
                sin6_family: libc::AF_INET6 as libc::sa_family_t,
                sin6_port: a.port().to_be(),
                sin6_flowinfo: a.flowinfo().to_be(),
                sin6_addr: libc::in6_addr {
                    s6_addr: a.ip().octets(),
                },
                sin6_scope_id: a.scope_id(),
            };
            // SAFETY: as above, for sockaddr_in6.
            unsafe { std::ptr::write((&mut storage as *mut libc::sockaddr_storage).cast(), sin6) };
            mem::size_of::<libc::sockaddr_in6>()
        }
    };
    (storage, len as libc::socklen_t)
}

/// The address the kernel wrote into `sa`. An IPv4 peer of a dual-stack IPv6 socket
/// (`::ffff:a.b.c.d`) comes back as the IPv4 address it is, as Rusty's engine reports
/// an IPv4 connection; an unknown family as the unspecified IPv4 address.
fn from_sockaddr(sa: &libc::sockaddr_storage) -> SocketAddr {
    match libc::c_int::from(sa.ss_family) {
        libc::AF_INET => {
            // SAFETY: the family says the storage holds a sockaddr_in, which it is
            // large enough and aligned for.
            let sin: libc::sockaddr_in =
                unsafe { std::ptr::read((sa as *const libc::sockaddr_storage).cast()) };
            SocketAddr::new(
                Ipv4Addr::from(u32::from_be(sin.sin_addr.s_addr)).into(),
                u16::from_be(sin.sin_port),
            )
        }
        libc::AF_INET6 => {
            // SAFETY: as above, for sockaddr_in6.
            let sin6: libc::sockaddr_in6 =
                unsafe { std::ptr::read((sa as *const libc::sockaddr_storage).cast()) };
            let ip = Ipv6Addr::from(sin6.sin6_addr.s6_addr);
            let port = u16::from_be(sin6.sin6_port);
            match ip.to_ipv4_mapped() {
                Some(v4) => SocketAddr::new(v4.into(), port),
                None => SocketAddr::V6(SocketAddrV6::new(
                    ip,
                    port,
                    u32::from_be(sin6.sin6_flowinfo),
                    sin6.sin6_scope_id,
                )),
            }
        }
        _ => SocketAddr::new(Ipv4Addr::UNSPECIFIED.into(), 0),
    }
}

/// Take ownership of `fd`, which then closes when the `OwnedFd` drops.
///
/// # Safety
/// `fd` is an open descriptor nothing else owns: one a system call just created.
unsafe fn own(fd: libc::c_int) -> OwnedFd {
    // SAFETY: by this function's contract, the OwnedFd becomes the descriptor's only
    // owner and closes it exactly once.
    unsafe { OwnedFd::from_raw_fd(fd) }
}

/// A non-blocking, close-on-exec TCP socket for addresses like `addr` (IPv4 or IPv6).
pub(crate) fn tcp_socket(addr: &SocketAddr) -> io::Result<OwnedFd> {
    let family = if addr.is_ipv4() {
        libc::AF_INET
    } else {
        libc::AF_INET6
    };
    // SAFETY: socket(2) takes no pointers.
    let fd = cvt(unsafe {
        libc::socket(
            family,
            libc::SOCK_STREAM | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
            0,
        )
    })?;
    // SAFETY: socket(2) just created `fd`.
    Ok(unsafe { own(fd) })
}

fn set_int_option(
    fd: BorrowedFd<'_>,
    level: libc::c_int,
    name: libc::c_int,
    value: libc::c_int,
) -> io::Result<()> {
    // SAFETY: the option value points at a live c_int and its exact size is passed.
    cvt(unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            level,
            name,
            (&value as *const libc::c_int).cast(),
            mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    })
    .map(drop)
}

/// SO_REUSEADDR and SO_REUSEPORT: every worker binds its own listener to the same
/// address and the kernel spreads incoming connections over them.
pub(crate) fn set_reuse(fd: BorrowedFd<'_>) -> io::Result<()> {
    set_int_option(fd, libc::SOL_SOCKET, libc::SO_REUSEADDR, 1)?;
    set_int_option(fd, libc::SOL_SOCKET, libc::SO_REUSEPORT, 1)
}

/// TCP_NODELAY: what the application queues in one loop turn goes out at once, as on
/// Rusty's own stack (no Nagle delay).
pub(crate) fn set_nodelay(fd: BorrowedFd<'_>) -> io::Result<()> {
    set_int_option(fd, libc::IPPROTO_TCP, libc::TCP_NODELAY, 1)
}

/// TCP_USER_TIMEOUT (RFC 5482): the kernel resets the connection when sent data stays
/// unacknowledged, or zero-window probing makes no progress, for this long; `None`
/// (0) goes back to the kernel's retry count.
pub(crate) fn set_user_timeout(fd: BorrowedFd<'_>, timeout: Option<Duration>) -> io::Result<()> {
    let ms = timeout.map_or(0, |t| {
        t.as_millis().clamp(1, i32::MAX as u128) as libc::c_int
    });
    set_int_option(fd, libc::IPPROTO_TCP, libc::TCP_USER_TIMEOUT, ms)
}

/// Turn keepalive probing on with `keepalive`'s timing (SO_KEEPALIVE, TCP_KEEPIDLE,
/// TCP_KEEPINTVL, TCP_KEEPCNT; seconds, at least 1), or off.
pub(crate) fn set_keepalive(fd: BorrowedFd<'_>, keepalive: Option<Keepalive>) -> io::Result<()> {
    let Some(k) = keepalive else {
        return set_int_option(fd, libc::SOL_SOCKET, libc::SO_KEEPALIVE, 0);
    };
    let secs = |d: Duration| d.as_secs().clamp(1, i32::MAX as u64) as libc::c_int;
    set_int_option(fd, libc::IPPROTO_TCP, libc::TCP_KEEPIDLE, secs(k.idle))?;
    set_int_option(fd, libc::IPPROTO_TCP, libc::TCP_KEEPINTVL, secs(k.interval))?;
    let probes = k.probes.clamp(1, 127) as libc::c_int;
    set_int_option(fd, libc::IPPROTO_TCP, libc::TCP_KEEPCNT, probes)?;
    set_int_option(fd, libc::SOL_SOCKET, libc::SO_KEEPALIVE, 1)
}

/// Bytes in the socket's send queue the peer has not acknowledged (SIOCOUTQ).
pub(crate) fn unacked(fd: BorrowedFd<'_>) -> io::Result<usize> {
    let mut n: libc::c_int = 0;
    // SAFETY: SIOCOUTQ writes one c_int to the live `n`.
    cvt(unsafe { libc::ioctl(fd.as_raw_fd(), libc::TIOCOUTQ, &mut n as *mut libc::c_int) })?;
    Ok(n.max(0) as usize)
}

/// SO_LINGER {on, 0}: the next close sends a RST and drops queued data.
pub(crate) fn set_linger_zero(fd: BorrowedFd<'_>) -> io::Result<()> {
    let value = libc::linger {
        l_onoff: 1,
        l_linger: 0,
    };
    // SAFETY: the option value points at a live `linger` and its exact size is passed.
    cvt(unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_LINGER,
            (&value as *const libc::linger).cast(),
            mem::size_of::<libc::linger>() as libc::socklen_t,
        )
    })
    .map(drop)
}

/// TCP_CONGESTION: run the kernel's congestion-control module `name` on the socket (a
/// listener's choice is inherited by the connections it accepts). Fails with ENOENT
/// when the kernel has no such module and EPERM when this user may not choose it.
pub(crate) fn set_congestion(fd: BorrowedFd<'_>, name: &str) -> io::Result<()> {
    let len = libc::socklen_t::try_from(name.len())
        .map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    // SAFETY: the option value points at `name`'s bytes and exactly their length is
    // passed (the kernel needs no terminating NUL).
    cvt(unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_CONGESTION,
            name.as_ptr().cast(),
            len,
        )
    })
    .map(drop)
}

/// The name of the congestion-control module the socket runs (TCP_CONGESTION).
#[cfg(test)]
pub(crate) fn congestion(fd: BorrowedFd<'_>) -> io::Result<String> {
    let mut name = [0u8; 32];
    let mut len = name.len() as libc::socklen_t;
    // SAFETY: name and len are live locals; len holds name's size.
    cvt(unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_CONGESTION,
            name.as_mut_ptr().cast(),
            &mut len,
        )
    })?;
    let name = &name[..(len as usize).min(name.len())];
    let end = name.iter().position(|&b| b == 0).unwrap_or(name.len());
    Ok(String::from_utf8_lossy(&name[..end]).into_owned())
}

/// The socket's pending error (SO_ERROR), which reading clears.
pub(crate) fn take_error(fd: BorrowedFd<'_>) -> io::Result<Option<io::Error>> {
    let mut value: libc::c_int = 0;
    let mut len = mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: value and len are live locals; len holds value's size.
    cvt(unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_ERROR,
            (&mut value as *mut libc::c_int).cast(),
            &mut len,
        )
    })?;
    Ok((value != 0).then(|| io::Error::from_raw_os_error(value)))
}

pub(crate) fn bind(fd: BorrowedFd<'_>, addr: SocketAddr) -> io::Result<()> {
    let (sa, len) = to_sockaddr(addr);
    // SAFETY: sa is a live socket address of `len` bytes.
    cvt(unsafe {
        libc::bind(
            fd.as_raw_fd(),
            (&sa as *const libc::sockaddr_storage).cast(),
            len,
        )
    })
    .map(drop)
}

/// IPV6_V6ONLY: whether an IPv6 socket refuses IPv4 peers (off: a socket bound to
/// `[::]` takes both families, whatever `net.ipv6.bindv6only` says).
pub(crate) fn set_v6_only(fd: BorrowedFd<'_>, on: bool) -> io::Result<()> {
    let value = libc::c_int::from(on);
    // SAFETY: value is a live c_int and its exact size is passed.
    cvt(unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            libc::IPPROTO_IPV6,
            libc::IPV6_V6ONLY,
            (&value as *const libc::c_int).cast(),
            mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    })
    .map(drop)
}

pub(crate) fn listen(fd: BorrowedFd<'_>, backlog: usize) -> io::Result<()> {
    let backlog = backlog.clamp(1, libc::c_int::MAX as usize) as libc::c_int;
    // SAFETY: listen(2) takes no pointers.
    cvt(unsafe { libc::listen(fd.as_raw_fd(), backlog) }).map(drop)
}

/// How a non-blocking connect started.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ConnectStart {
    Connected,
    InProgress,
}

pub(crate) fn connect(fd: BorrowedFd<'_>, addr: SocketAddr) -> io::Result<ConnectStart> {
    let (sa, len) = to_sockaddr(addr);
    // SAFETY: sa is a live socket address of `len` bytes.
    let r = unsafe {
        libc::connect(
            fd.as_raw_fd(),
            (&sa as *const libc::sockaddr_storage).cast(),
            len,
        )
    };
    match cvt(r) {
        Ok(_) => Ok(ConnectStart::Connected),
        Err(e) if e.raw_os_error() == Some(libc::EINPROGRESS) => Ok(ConnectStart::InProgress),
        // Interrupted: the connect carries on in the background (connect(2)).
        Err(e) if e.kind() == io::ErrorKind::Interrupted => Ok(ConnectStart::InProgress),
        Err(e) => Err(e),
    }
}

/// Accept one connection as a non-blocking, close-on-exec socket.
pub(crate) fn accept(fd: BorrowedFd<'_>) -> io::Result<(OwnedFd, SocketAddr)> {
    retry(|| {
        // SAFETY: sockaddr_storage is plain old data; all zeroes is a valid value.
        let mut sa: libc::sockaddr_storage = unsafe { mem::zeroed() };
        let mut len = mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t;
        // SAFETY: sa and len are live locals; len holds sa's size, and the kernel
        // writes at most that many bytes.
        let new = cvt(unsafe {
            libc::accept4(
                fd.as_raw_fd(),
                (&mut sa as *mut libc::sockaddr_storage).cast(),
                &mut len,
                libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
            )
        })?;
        // SAFETY: accept4(2) just created `new`.
        Ok((unsafe { own(new) }, from_sockaddr(&sa)))
    })
}

pub(crate) fn local_addr(fd: BorrowedFd<'_>) -> io::Result<SocketAddr> {
    // SAFETY: sockaddr_storage is plain old data; all zeroes is a valid value.
    let mut sa: libc::sockaddr_storage = unsafe { mem::zeroed() };
    let mut len = mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t;
    // SAFETY: sa and len are live locals; len holds sa's size.
    cvt(unsafe {
        libc::getsockname(
            fd.as_raw_fd(),
            (&mut sa as *mut libc::sockaddr_storage).cast(),
            &mut len,
        )
    })?;
    Ok(from_sockaddr(&sa))
}

/// shutdown(SHUT_WR): FIN after what the kernel holds.
pub(crate) fn shutdown_write(fd: BorrowedFd<'_>) -> io::Result<()> {
    // SAFETY: shutdown(2) takes no pointers.
    cvt(unsafe { libc::shutdown(fd.as_raw_fd(), libc::SHUT_WR) }).map(drop)
}

pub(crate) fn read(fd: BorrowedFd<'_>, buf: &mut [u8]) -> io::Result<usize> {
    retry(|| {
        // SAFETY: buf is a live, writable slice of exactly buf.len() bytes.
        cvt_size(unsafe { libc::read(fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) })
    })
}

/// send(2) with MSG_NOSIGNAL: a reset peer is an EPIPE error, never a SIGPIPE.
pub(crate) fn send(fd: BorrowedFd<'_>, buf: &[u8]) -> io::Result<usize> {
    retry(|| {
        // SAFETY: buf is a live slice of exactly buf.len() bytes.
        cvt_size(unsafe {
            libc::send(
                fd.as_raw_fd(),
                buf.as_ptr().cast(),
                buf.len(),
                libc::MSG_NOSIGNAL,
            )
        })
    })
}

/// Gathered send (sendmsg(2) with MSG_NOSIGNAL): one syscall for many queued chunks.
pub(crate) fn send_vectored(fd: BorrowedFd<'_>, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
    retry(|| {
        // SAFETY: msghdr is plain old data; all zeroes is a valid (empty) value.
        let mut msg: libc::msghdr = unsafe { mem::zeroed() };
        // IoSlice is guaranteed ABI-compatible with iovec on Unix; the kernel only
        // reads through these pointers, and the slices outlive the call.
        msg.msg_iov = bufs.as_ptr() as *mut libc::iovec;
        msg.msg_iovlen = bufs.len() as _;
        // SAFETY: msg points at live iovecs (above) and no name or control data.
        cvt_size(unsafe { libc::sendmsg(fd.as_raw_fd(), &msg, libc::MSG_NOSIGNAL) })
    })
}

/// An epoll instance and its event buffer.
pub(crate) struct Epoll {
    fd: OwnedFd,
    events: Vec<libc::epoll_event>,
    ready: usize,
}

pub(crate) const IN: u32 = libc::EPOLLIN as u32;
pub(crate) const OUT: u32 = libc::EPOLLOUT as u32;
pub(crate) const RDHUP: u32 = libc::EPOLLRDHUP as u32;
pub(crate) const HUP: u32 = libc::EPOLLHUP as u32;
pub(crate) const ERR: u32 = libc::EPOLLERR as u32;
pub(crate) const ET: u32 = libc::EPOLLET as u32;

impl Epoll {
    /// An instance reporting at most `capacity` events per wait.
    pub(crate) fn new(capacity: usize) -> io::Result<Epoll> {
        // SAFETY: epoll_create1(2) takes no pointers.
        let fd = cvt(unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) })?;
        Ok(Epoll {
            // SAFETY: epoll_create1(2) just created `fd`.
            fd: unsafe { own(fd) },
            events: vec![libc::epoll_event { events: 0, u64: 0 }; capacity.max(1)],
            ready: 0,
        })
    }

    /// Watch `fd` for `events`, reported with `token`. Closing the descriptor removes
    /// it (the crate never duplicates descriptors).
    pub(crate) fn add(&self, fd: BorrowedFd<'_>, events: u32, token: u64) -> io::Result<()> {
        let mut ev = libc::epoll_event { events, u64: token };
        // SAFETY: ev is a live epoll_event the kernel only reads.
        cvt(unsafe {
            libc::epoll_ctl(
                self.fd.as_raw_fd(),
                libc::EPOLL_CTL_ADD,
                fd.as_raw_fd(),
                &mut ev,
            )
        })
        .map(drop)
    }

    /// Wait up to `timeout` (rounded up to whole milliseconds) for events; returns how
    /// many are ready for [`Epoll::event`]. An interrupted wait reports none.
    pub(crate) fn wait(&mut self, timeout: Duration) -> io::Result<usize> {
        let ms = timeout.as_micros().div_ceil(1000).min(i32::MAX as u128) as libc::c_int;
        // SAFETY: the buffer holds events.len() live epoll_event slots, and the kernel
        // writes at most maxevents of them.
        let r = unsafe {
            libc::epoll_wait(
                self.fd.as_raw_fd(),
                self.events.as_mut_ptr(),
                self.events.len() as libc::c_int,
                ms,
            )
        };
        self.ready = match cvt(r) {
            Ok(n) => n as usize,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => 0,
            Err(e) => return Err(e),
        };
        Ok(self.ready)
    }

    /// The `i`th event of the last wait: (event bits, token).
    pub(crate) fn event(&self, i: usize) -> (u32, u64) {
        let ev = self.events[..self.ready][i];
        (ev.events, ev.u64)
    }
}
