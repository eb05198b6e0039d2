//! The Linux socket and epoll calls the kernel backend makes. They go through rustix,
//! whose calls take owned or borrowed descriptors and Rust slices, so none needs
//! `unsafe` here; the one exception is the SIOCOUTQ ioctl, which rustix does not wrap
//! and which stays on libc behind [`unacked`]. Every function returns `io::Error`, with
//! the kernel's errno as its raw OS error, as the rest of the crate expects.

use std::io::{self, IoSlice};
use std::net::{Ipv4Addr, SocketAddr};
use std::os::fd::{AsRawFd, BorrowedFd, OwnedFd};
use std::time::Duration;

use rustix::event::epoll::{self, EventData, EventFlags};
use rustix::io::Errno;
use rustix::net::{sockopt, AddressFamily, SendAncillaryBuffer, SendFlags, SocketFlags};
use rustix::net::{Shutdown, SocketAddrAny, SocketType};
use rusty_stack::Keepalive;

/// Retry `f` while it fails with EINTR; other errors as `io::Error`.
fn retry<T>(mut f: impl FnMut() -> rustix::io::Result<T>) -> io::Result<T> {
    loop {
        match f() {
            Err(Errno::INTR) => continue,
            r => return r.map_err(io::Error::from),
        }
    }
}

/// `r` with its errno as an `io::Error`.
fn os<T>(r: rustix::io::Result<T>) -> io::Result<T> {
    r.map_err(io::Error::from)
}

/// The address the kernel reported. An IPv4 peer of a dual-stack IPv6 socket
/// (`::ffff:a.b.c.d`) comes back as the IPv4 address it is, as Rusty's engine reports
/// an IPv4 connection; no address or an unknown family as the unspecified IPv4 address.
fn from_sockaddr(sa: Option<SocketAddrAny>) -> SocketAddr {
    match sa.and_then(|sa| SocketAddr::try_from(sa).ok()) {
        Some(SocketAddr::V6(a)) => match a.ip().to_ipv4_mapped() {
            Some(v4) => SocketAddr::new(v4.into(), a.port()),
            None => SocketAddr::V6(a),
        },
        Some(a) => a,
        None => SocketAddr::new(Ipv4Addr::UNSPECIFIED.into(), 0),
    }
}

/// The flags of every socket the crate makes: non-blocking and close-on-exec.
const SOCK_FLAGS: SocketFlags = SocketFlags::NONBLOCK.union(SocketFlags::CLOEXEC);

/// A non-blocking, close-on-exec TCP socket for addresses like `addr` (IPv4 or IPv6).
pub(crate) fn tcp_socket(addr: &SocketAddr) -> io::Result<OwnedFd> {
    let family = if addr.is_ipv4() {
        AddressFamily::INET
    } else {
        AddressFamily::INET6
    };
    os(rustix::net::socket_with(
        family,
        SocketType::STREAM,
        SOCK_FLAGS,
        None,
    ))
}

/// SO_REUSEADDR and SO_REUSEPORT: every worker binds its own listener to the same
/// address and the kernel spreads incoming connections over them.
pub(crate) fn set_reuse(fd: BorrowedFd<'_>) -> io::Result<()> {
    os(sockopt::set_socket_reuseaddr(fd, true))?;
    os(sockopt::set_socket_reuseport(fd, true))
}

/// TCP_NODELAY: what the application queues in one loop turn goes out at once, as on
/// Rusty's own stack (no Nagle delay).
pub(crate) fn set_nodelay(fd: BorrowedFd<'_>) -> io::Result<()> {
    os(sockopt::set_tcp_nodelay(fd, true))
}

/// TCP_USER_TIMEOUT (RFC 5482): the kernel resets the connection when sent data stays
/// unacknowledged, or zero-window probing makes no progress, for this long; `None`
/// (0) goes back to the kernel's retry count.
pub(crate) fn set_user_timeout(fd: BorrowedFd<'_>, timeout: Option<Duration>) -> io::Result<()> {
    let ms = timeout.map_or(0, |t| t.as_millis().clamp(1, i32::MAX as u128) as u32);
    os(sockopt::set_tcp_user_timeout(fd, ms))
}

/// Turn keepalive probing on with `keepalive`'s timing (SO_KEEPALIVE, TCP_KEEPIDLE,
/// TCP_KEEPINTVL, TCP_KEEPCNT; seconds, at least 1), or off.
pub(crate) fn set_keepalive(fd: BorrowedFd<'_>, keepalive: Option<Keepalive>) -> io::Result<()> {
    let Some(k) = keepalive else {
        return os(sockopt::set_socket_keepalive(fd, false));
    };
    // Whole seconds, so the kernel gets exactly these (rustix would round a fraction up).
    let secs = |d: Duration| Duration::from_secs(d.as_secs().clamp(1, i32::MAX as u64));
    os(sockopt::set_tcp_keepidle(fd, secs(k.idle)))?;
    os(sockopt::set_tcp_keepintvl(fd, secs(k.interval)))?;
    os(sockopt::set_tcp_keepcnt(fd, k.probes.clamp(1, 127)))?;
    os(sockopt::set_socket_keepalive(fd, true))
}

/// Bytes in the socket's send queue the peer has not acknowledged (SIOCOUTQ). On libc:
/// rustix has no wrapper for this ioctl, and its generic `ioctl` is as unsafe.
pub(crate) fn unacked(fd: BorrowedFd<'_>) -> io::Result<usize> {
    let mut n: libc::c_int = 0;
    // SAFETY: SIOCOUTQ writes one c_int to the live `n`; `fd` is borrowed, so open.
    let r = unsafe { libc::ioctl(fd.as_raw_fd(), libc::TIOCOUTQ, &mut n as *mut libc::c_int) };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(n.max(0) as usize)
}

/// SO_LINGER {on, 0}: the next close sends a RST and drops queued data.
pub(crate) fn set_linger_zero(fd: BorrowedFd<'_>) -> io::Result<()> {
    os(sockopt::set_socket_linger(fd, Some(Duration::ZERO)))
}

/// TCP_CONGESTION: run the kernel's congestion-control module `name` on the socket (a
/// listener's choice is inherited by the connections it accepts). Fails with ENOENT
/// when the kernel has no such module and EPERM when this user may not choose it.
pub(crate) fn set_congestion(fd: BorrowedFd<'_>, name: &str) -> io::Result<()> {
    // The option's length is a socklen_t: refuse what does not fit rather than let the
    // conversion fail inside the call.
    if u32::try_from(name.len()).is_err() {
        return Err(io::Error::from(io::ErrorKind::InvalidInput));
    }
    os(sockopt::set_tcp_congestion(fd, name))
}

/// The name of the congestion-control module the socket runs (TCP_CONGESTION).
#[cfg(test)]
pub(crate) fn congestion(fd: BorrowedFd<'_>) -> io::Result<String> {
    os(sockopt::tcp_congestion(fd))
}

/// The socket's pending error (SO_ERROR), which reading clears.
pub(crate) fn take_error(fd: BorrowedFd<'_>) -> io::Result<Option<io::Error>> {
    Ok(os(sockopt::socket_error(fd))?.err().map(io::Error::from))
}

pub(crate) fn bind(fd: BorrowedFd<'_>, addr: SocketAddr) -> io::Result<()> {
    os(rustix::net::bind(fd, &addr))
}

/// IPV6_V6ONLY: whether an IPv6 socket refuses IPv4 peers (off: a socket bound to
/// `[::]` takes both families, whatever `net.ipv6.bindv6only` says).
pub(crate) fn set_v6_only(fd: BorrowedFd<'_>, on: bool) -> io::Result<()> {
    os(sockopt::set_ipv6_v6only(fd, on))
}

pub(crate) fn listen(fd: BorrowedFd<'_>, backlog: usize) -> io::Result<()> {
    os(rustix::net::listen(
        fd,
        backlog.clamp(1, i32::MAX as usize) as i32,
    ))
}

/// How a non-blocking connect started.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ConnectStart {
    Connected,
    InProgress,
}

pub(crate) fn connect(fd: BorrowedFd<'_>, addr: SocketAddr) -> io::Result<ConnectStart> {
    match rustix::net::connect(fd, &addr) {
        Ok(()) => Ok(ConnectStart::Connected),
        // Interrupted: the connect carries on in the background (connect(2)).
        Err(Errno::INPROGRESS | Errno::INTR) => Ok(ConnectStart::InProgress),
        Err(e) => Err(e.into()),
    }
}

/// Accept one connection as a non-blocking, close-on-exec socket.
pub(crate) fn accept(fd: BorrowedFd<'_>) -> io::Result<(OwnedFd, SocketAddr)> {
    let (new, peer) = retry(|| rustix::net::acceptfrom_with(fd, SOCK_FLAGS))?;
    Ok((new, from_sockaddr(peer)))
}

pub(crate) fn local_addr(fd: BorrowedFd<'_>) -> io::Result<SocketAddr> {
    Ok(from_sockaddr(Some(os(rustix::net::getsockname(fd))?)))
}

/// shutdown(SHUT_WR): FIN after what the kernel holds.
pub(crate) fn shutdown_write(fd: BorrowedFd<'_>) -> io::Result<()> {
    os(rustix::net::shutdown(fd, Shutdown::Write))
}

pub(crate) fn read(fd: BorrowedFd<'_>, buf: &mut [u8]) -> io::Result<usize> {
    retry(|| rustix::io::read(fd, &mut *buf))
}

/// send(2) with MSG_NOSIGNAL: a reset peer is an EPIPE error, never a SIGPIPE.
pub(crate) fn send(fd: BorrowedFd<'_>, buf: &[u8]) -> io::Result<usize> {
    retry(|| rustix::net::send(fd, buf, SendFlags::NOSIGNAL))
}

/// Gathered send (sendmsg(2) with MSG_NOSIGNAL): one syscall for many queued chunks.
pub(crate) fn send_vectored(fd: BorrowedFd<'_>, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
    retry(|| {
        // No control data: an empty buffer, which costs nothing to make.
        let mut control = SendAncillaryBuffer::default();
        rustix::net::sendmsg(fd, bufs, &mut control, SendFlags::NOSIGNAL)
    })
}

/// An epoll instance and its event buffer, made once and refilled by every wait.
pub(crate) struct Epoll {
    fd: OwnedFd,
    events: Vec<epoll::Event>,
    ready: usize,
}

pub(crate) const IN: u32 = EventFlags::IN.bits();
pub(crate) const OUT: u32 = EventFlags::OUT.bits();
pub(crate) const RDHUP: u32 = EventFlags::RDHUP.bits();
pub(crate) const HUP: u32 = EventFlags::HUP.bits();
pub(crate) const ERR: u32 = EventFlags::ERR.bits();
pub(crate) const ET: u32 = EventFlags::ET.bits();

impl Epoll {
    /// An instance reporting at most `capacity` events per wait.
    pub(crate) fn new(capacity: usize) -> io::Result<Epoll> {
        let fd = os(epoll::create(epoll::CreateFlags::CLOEXEC))?;
        let empty = epoll::Event {
            flags: EventFlags::empty(),
            data: EventData::new_u64(0),
        };
        Ok(Epoll {
            fd,
            events: vec![empty; capacity.max(1)],
            ready: 0,
        })
    }

    /// Watch `fd` for `events`, reported with `token`. Closing the descriptor removes
    /// it (the crate never duplicates descriptors).
    pub(crate) fn add(&self, fd: BorrowedFd<'_>, events: u32, token: u64) -> io::Result<()> {
        let flags = EventFlags::from_bits_retain(events);
        os(epoll::add(&self.fd, fd, EventData::new_u64(token), flags))
    }

    /// Wait up to `timeout` (rounded up to whole milliseconds) for events; returns how
    /// many are ready for [`Epoll::event`]. An interrupted wait reports none.
    pub(crate) fn wait(&mut self, timeout: Duration) -> io::Result<usize> {
        // Whole milliseconds that fit a c_int, so the wait is one epoll_pwait.
        let ms = timeout.as_micros().div_ceil(1000).min(i32::MAX as u128) as i64;
        let timeout = rustix::event::Timespec {
            tv_sec: ms / 1000,
            // A c_long on 32-bit targets; under 10^9, so it fits.
            tv_nsec: ((ms % 1000) * 1_000_000) as _,
        };
        self.ready = match epoll::wait(&self.fd, &mut self.events[..], Some(&timeout)) {
            Ok(n) => n,
            Err(Errno::INTR) => 0,
            Err(e) => return Err(e.into()),
        };
        Ok(self.ready)
    }

    /// The `i`th event of the last wait: (event bits, token).
    pub(crate) fn event(&self, i: usize) -> (u32, u64) {
        let ev = self.events[..self.ready][i];
        // Copies of the fields: the event is packed on x86-64, so no references to them.
        let (flags, data) = (ev.flags, ev.data);
        (flags.bits(), data.u64())
    }
}
