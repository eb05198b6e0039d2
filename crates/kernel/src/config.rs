//! How a kernel-backend worker listens and bounds its memory: [`KernelConfig`], the
//! listening socket every worker binds with `SO_REUSEPORT`, and the congestion control
//! asked of the kernel.

use std::io;
use std::net::SocketAddr;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use rusty_stack::CongestionAlgorithm;

use crate::sys;

/// How a kernel-backend worker listens and bounds its memory.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct KernelConfig {
    /// Addresses to listen on, each with its accept backlog. Every worker binds its own
    /// socket to each address (`SO_REUSEPORT`); the kernel spreads connections over them.
    /// The unspecified IPv6 address (`[::]:port`) listens on both families (IPv4 peers
    /// reach the handler as IPv4 addresses); `0.0.0.0:port` on IPv4 only.
    pub listen: Vec<(SocketAddr, usize)>,
    /// Per-connection bound on copied bytes queued in user space while the socket is
    /// full (shared bytes do not count), like `TcpConfig::send_buffer`.
    pub send_buffer: usize,
    /// Size of one `read` (the worker's receive buffer).
    pub recv_chunk: usize,
    /// Per-connection bound on received bytes the application has not consumed; past
    /// it the socket is not read, so the kernel's window closes (like
    /// `TcpConfig::recv_buffer`).
    pub recv_buffer: usize,
    /// Most connections one worker holds at once, accepted and opened alike. At the
    /// limit, new connections wait in the kernel's accept queue until one ends, and
    /// `connect` fails with `TooManyConnections`. Default 65536.
    pub max_connections: usize,
    /// After `close`, how long to wait for the peer's FIN before giving up with
    /// `TimedOut` (Rusty's FIN-WAIT-2 timeout).
    pub fin_timeout: Duration,
    /// After `close`, how long data that still arrives is read and dropped; data read
    /// later resets the connection (like `TcpConfig::close_linger`, RFC 1122
    /// §4.2.2.13).
    pub close_linger: Duration,
    /// Congestion control to ask the kernel for on every socket (`TCP_CONGESTION`; the
    /// kernel calls NewReno `reno`), e.g. to match Rusty's engines; `None` keeps the
    /// system default (`net.ipv4.tcp_congestion_control`). A kernel that lacks the module, or does not
    /// let this user choose it, keeps its default and a warning says so.
    pub congestion_control: Option<CongestionAlgorithm>,
}

impl Default for KernelConfig {
    fn default() -> Self {
        KernelConfig {
            listen: Vec::new(),
            send_buffer: 256 * 1024,
            recv_chunk: 64 * 1024,
            recv_buffer: 256 * 1024,
            max_connections: 65536,
            fin_timeout: Duration::from_secs(60),
            close_linger: Duration::from_secs(5),
            congestion_control: None,
        }
    }
}

impl KernelConfig {
    /// Bind (and release) a socket on every listen address, so that a bad address or a
    /// port held by someone else is reported before workers start. With
    /// `SO_REUSEPORT`, a port held by another `SO_REUSEPORT` socket of the same user
    /// is shared, not refused.
    pub fn check_listen(&self) -> io::Result<()> {
        for (addr, backlog) in &self.listen {
            bind_listener(*addr, *backlog, None)
                .map_err(|e| io::Error::new(e.kind(), format!("listen on {addr}: {e}")))?;
        }
        Ok(())
    }
}

/// A listening socket on `addr`; the connections it accepts run `cc` (if the kernel
/// will), chosen before `listen` so that none is accepted with the default.
pub(crate) fn bind_listener(
    addr: SocketAddr,
    backlog: usize,
    cc: Option<CongestionAlgorithm>,
) -> io::Result<OwnedFd> {
    let fd = sys::tcp_socket(&addr)?;
    sys::set_reuse(fd.as_fd())?;
    if let SocketAddr::V6(a) = addr {
        sys::set_v6_only(fd.as_fd(), !a.ip().is_unspecified())?;
    }
    sys::bind(fd.as_fd(), addr)?;
    set_congestion_control(fd.as_fd(), cc);
    sys::listen(fd.as_fd(), backlog)?;
    Ok(fd)
}

/// The Linux module that runs `algorithm` (as `net.ipv4.tcp_available_congestion_control`
/// names it): `cubic`, and `reno` for NewReno; `None` for an algorithm Linux has no
/// module for.
pub(crate) fn linux_name(algorithm: CongestionAlgorithm) -> Option<&'static str> {
    match algorithm {
        CongestionAlgorithm::Cubic => Some("cubic"),
        CongestionAlgorithm::NewReno => Some("reno"),
        _ => None,
    }
}

/// Ask the kernel to run `cc` on `fd`. Not fatal when it will not: the socket keeps the
/// system default, and the first refusal in the process is logged.
pub(crate) fn set_congestion_control(fd: BorrowedFd<'_>, cc: Option<CongestionAlgorithm>) {
    static WARNED: AtomicBool = AtomicBool::new(false);
    let Some(cc) = cc else {
        return;
    };
    let Some(name) = linux_name(cc) else {
        if !WARNED.swap(true, Ordering::Relaxed) {
            log::warn!("the kernel has no congestion control {cc:?}; its default applies");
        }
        return;
    };
    if let Err(e) = sys::set_congestion(fd, name) {
        if !WARNED.swap(true, Ordering::Relaxed) {
            log::warn!(
                "the kernel will not run congestion control {name} ({e}); its default applies \
                 (load it with `modprobe tcp_{name}`, or allow it in \
                 net.ipv4.tcp_allowed_congestion_control)"
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{Ipv4Addr, TcpStream};

    #[test]
    fn accepted_connections_run_the_listeners_congestion_control() {
        // Reno is built into every Linux kernel, so any user may choose it.
        let any = SocketAddr::from((Ipv4Addr::LOCALHOST, 0));
        let fd = bind_listener(any, 8, Some(CongestionAlgorithm::NewReno)).unwrap();
        assert_eq!(sys::congestion(fd.as_fd()).unwrap(), "reno");
        let addr = sys::local_addr(fd.as_fd()).unwrap();
        let _client = TcpStream::connect(addr).unwrap();
        let accepted = (0..100)
            .find_map(|_| {
                sys::accept(fd.as_fd()).ok().or_else(|| {
                    std::thread::sleep(Duration::from_millis(10));
                    None
                })
            })
            .expect("the connection is accepted");
        assert_eq!(sys::congestion(accepted.0.as_fd()).unwrap(), "reno");
    }

    #[test]
    fn a_congestion_control_the_kernel_lacks_is_not_fatal() {
        let fd = sys::tcp_socket(&"127.0.0.1:0".parse().unwrap()).unwrap();
        let before = sys::congestion(fd.as_fd()).unwrap();
        assert!(sys::set_congestion(fd.as_fd(), "no-such-cc").is_err());
        set_congestion_control(fd.as_fd(), None);
        assert_eq!(sys::congestion(fd.as_fd()).unwrap(), before);
        let none = bind_listener(SocketAddr::from((Ipv4Addr::LOCALHOST, 0)), 8, None).unwrap();
        assert_eq!(sys::congestion(none.as_fd()).unwrap(), before);
    }
}
