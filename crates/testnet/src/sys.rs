//! The system calls test support makes that std does not wrap: signals to a child
//! process and a raw ICMP socket, both through rustix, so without `unsafe` code.

use std::io;
use std::net::UdpSocket;
use std::process::Child;

use rustix::net::{ipproto, AddressFamily, SocketFlags, SocketType};
use rustix::process::{Pid, Signal};

/// Send SIGTERM to `child` (for a graceful stop), unless it has already been reaped.
pub fn terminate(child: &mut Child) -> io::Result<()> {
    signal(child, Signal::TERM)
}

/// Send SIGHUP to `child` (a server rereads its files), unless it has already been
/// reaped.
pub fn hangup(child: &mut Child) -> io::Result<()> {
    signal(child, Signal::HUP)
}

/// Send `sig` to `child`, unless it has already been reaped. The PID is our child, not
/// yet reaped (checked first), so it cannot name another process.
fn signal(child: &mut Child, sig: Signal) -> io::Result<()> {
    if child.try_wait()?.is_some() {
        return Ok(());
    }
    let pid = i32::try_from(child.id())
        .ok()
        .and_then(Pid::from_raw)
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "pid out of range"))?;
    Ok(rustix::process::kill_process(pid, sig)?)
}

/// A raw IPv4 ICMP socket (needs CAP_NET_RAW), usable through [`UdpSocket`]'s
/// `send_to`/`recv_from`: each datagram is one ICMP message out, one IPv4 packet in.
pub fn raw_icmp_socket() -> io::Result<UdpSocket> {
    let fd = rustix::net::socket_with(
        AddressFamily::INET,
        SocketType::RAW,
        SocketFlags::CLOEXEC,
        Some(ipproto::ICMP),
    )?;
    // A raw socket takes sendto and recvfrom like a datagram socket, which is all
    // UdpSocket calls on it.
    Ok(UdpSocket::from(fd))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::process::ExitStatusExt;
    use std::process::Command;

    #[test]
    fn signals_reach_a_live_child_and_skip_a_reaped_one() {
        let mut child = Command::new("sleep").arg("30").spawn().unwrap();
        terminate(&mut child).unwrap();
        assert_eq!(child.wait().unwrap().signal(), Some(Signal::TERM.as_raw()));
        // Reaped: nothing is sent, and nothing fails.
        hangup(&mut child).unwrap();
        terminate(&mut child).unwrap();
    }
}
