//! The system calls test support makes that std does not wrap: signals to a child
//! process and a raw ICMP socket. The crate's only unsafe code; each function is safe to
//! call and says above its block why the call is sound.

use std::io;
use std::net::UdpSocket;
use std::os::fd::FromRawFd;
use std::process::Child;

/// Send SIGTERM to `child` (for a graceful stop), unless it has already been reaped.
pub fn terminate(child: &mut Child) -> io::Result<()> {
    signal(child, libc::SIGTERM)
}

/// Send SIGHUP to `child` (a server rereads its files), unless it has already been
/// reaped.
pub fn hangup(child: &mut Child) -> io::Result<()> {
    signal(child, libc::SIGHUP)
}

/// Send `sig` to `child`, unless it has already been reaped.
fn signal(child: &mut Child, sig: libc::c_int) -> io::Result<()> {
    if child.try_wait()?.is_some() {
        return Ok(());
    }
    let pid = libc::pid_t::try_from(child.id())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "pid out of range"))?;
    // SAFETY: kill(2) takes no pointers; the PID is our child, not yet reaped (checked
    // above), so it cannot name another process.
    if unsafe { libc::kill(pid, sig) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// A raw IPv4 ICMP socket (needs CAP_NET_RAW), usable through [`UdpSocket`]'s
/// `send_to`/`recv_from`: each datagram is one ICMP message out, one IPv4 packet in.
pub fn raw_icmp_socket() -> io::Result<UdpSocket> {
    // SAFETY: socket(2) takes no pointers.
    let fd = unsafe {
        libc::socket(
            libc::AF_INET,
            libc::SOCK_RAW | libc::SOCK_CLOEXEC,
            libc::IPPROTO_ICMP,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` is a fresh socket nothing else owns. A raw socket takes sendto and
    // recvfrom like a datagram socket, which is all UdpSocket calls on it.
    Ok(unsafe { UdpSocket::from_raw_fd(fd) })
}
