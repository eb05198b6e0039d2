//! How a kernel-backend worker listens and bounds its memory: [`KernelConfig`], and
//! the listening socket every worker binds with `SO_REUSEPORT`.

use std::io;
use std::net::SocketAddrV4;
use std::os::fd::{AsFd, OwnedFd};
use std::time::Duration;

use crate::sys;

/// How a kernel-backend worker listens and bounds its memory.
#[derive(Debug, Clone)]
pub struct KernelConfig {
    /// Addresses to listen on, each with its accept backlog. Every worker binds its own
    /// socket to each address (`SO_REUSEPORT`); the kernel spreads connections over them.
    pub listen: Vec<(SocketAddrV4, usize)>,
    /// Per-connection bound on copied bytes queued in user space while the socket is
    /// full (shared bytes do not count), like `TcpConfig::send_buffer`.
    pub send_buffer: usize,
    /// Size of one `read` (the worker's receive buffer).
    pub recv_chunk: usize,
    /// Per-connection bound on received bytes the application has not consumed; past
    /// it the socket is not read, so the kernel's window closes (like
    /// `TcpConfig::recv_buffer`).
    pub recv_buffer: usize,
    pub max_connections: usize,
    /// After `close`, how long to wait for the peer's FIN before giving up with
    /// `TimedOut` (Rusty's FIN-WAIT-2 timeout).
    pub fin_timeout: Duration,
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
            bind_listener(*addr, *backlog)
                .map_err(|e| io::Error::new(e.kind(), format!("listen on {addr}: {e}")))?;
        }
        Ok(())
    }
}

pub(crate) fn bind_listener(addr: SocketAddrV4, backlog: usize) -> io::Result<OwnedFd> {
    let fd = sys::tcp_socket()?;
    sys::set_reuse(fd.as_fd())?;
    sys::bind(fd.as_fd(), addr)?;
    sys::listen(fd.as_fd(), backlog)?;
    Ok(fd)
}
