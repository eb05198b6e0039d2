//! One connection on a kernel socket, as the application's callbacks drive it: the
//! [`Connection`] behind every [`Conn`](rusty_stack::Conn) handle of the kernel backend.
//!
//! The handle only records what the application asked for (and writes straight to the
//! socket when nothing is queued); the worker loop carries the requests out after the
//! callback returns: flushing the queue, the FIN, the RST and the `closed` callback.

use std::io::{self, IoSlice};
use std::net::SocketAddr;
use std::os::fd::{AsFd, OwnedFd};
use std::time::{Duration, Instant};

use bytes::Bytes;
use rustix::io::Errno;
use rusty_stack::backend::{AppConn, Connection, UnreadBytes};
use rusty_stack::{CloseReason, Keepalive, SendError};

use crate::queue::{RecvBuffer, SendQueue, MAX_IOV};
use crate::sys;

/// What a failed socket call means to the application.
pub(crate) fn close_reason(e: &io::Error) -> CloseReason {
    match Errno::from_io_error(e) {
        Some(Errno::CONNREFUSED) => CloseReason::Refused,
        Some(Errno::TIMEDOUT | Errno::HOSTUNREACH | Errno::NETUNREACH) => CloseReason::TimedOut,
        _ => CloseReason::Reset,
    }
}

/// One connection's block in the worker's table: the socket, its buffers, what the
/// kernel reported and what the application asked for.
pub(crate) struct KernelConn {
    pub fd: OwnedFd,
    local: SocketAddr,
    peer: SocketAddr,
    send_buffer: usize,
    pub queue: SendQueue,
    pub rx: RecvBuffer,

    // What the kernel told us.
    /// An active open whose handshake has not completed.
    pub connecting: bool,
    /// The socket may have bytes (or EOF, or an error) to read.
    pub can_read: bool,
    /// The last write did not fill the socket's buffer.
    pub can_write: bool,
    /// EPOLLERR was reported; SO_ERROR is worth a look.
    pub err_event: bool,
    /// A half-close, hang-up or error edge was reported: read until EOF or error.
    pub hup_seen: bool,
    /// The peer's FIN was read.
    pub eof: bool,
    /// The socket failed; the connection ends with this reason.
    pub error: Option<CloseReason>,
    /// Our FIN was handed to the kernel (shutdown(SHUT_WR)).
    pub fin_sent: bool,

    // What the application asked for.
    pub want_writable: bool,
    /// `notify_writable` with nothing queued: call `writable` on the next loop turn.
    pub writable_soon: bool,
    pub fin_requested: bool,
    /// `close`: incoming bytes are read and dropped.
    pub rx_closed: bool,
    /// When the application closed: data read after `close_linger` from then resets.
    pub closed_at: Option<Instant>,
    pub aborted: bool,
    /// `peer_closed` was called.
    pub peer_closed_told: bool,
    /// When the application's one-shot timer is due (`set_timer`). The engine notices
    /// changes after each callback.
    pub timer_at: Option<Instant>,
    /// The connection is over (`closed` is being delivered): refuse everything.
    pub done: bool,

    /// Bytes and sends made from inside callbacks, for the worker's counters.
    pub bytes_out: u64,
    pub sends: u64,

    // The worker's bookkeeping.
    /// In the ready list.
    pub queued: bool,
    /// In the list of deferred `writable` calls.
    pub soon_queued: bool,
    /// After `close` and our FIN: when to stop waiting for the peer's.
    pub linger_at: Option<Instant>,
    /// The deadline of this connection's live entry in the timer heap: no later than
    /// `timer_at` when that is set. Entries that do not match are stale.
    pub timer_filed: Option<Instant>,
}

impl KernelConn {
    pub(crate) fn new(
        fd: OwnedFd,
        local: SocketAddr,
        peer: SocketAddr,
        send_buffer: usize,
    ) -> KernelConn {
        KernelConn {
            fd,
            local,
            peer,
            send_buffer,
            queue: SendQueue::default(),
            rx: RecvBuffer::default(),
            connecting: false,
            can_read: false,
            can_write: true,
            err_event: false,
            hup_seen: false,
            eof: false,
            error: None,
            fin_sent: false,
            want_writable: false,
            writable_soon: false,
            fin_requested: false,
            rx_closed: false,
            closed_at: None,
            aborted: false,
            peer_closed_told: false,
            timer_at: None,
            done: false,
            bytes_out: 0,
            sends: 0,
            queued: false,
            soon_queued: false,
            linger_at: None,
            timer_filed: None,
        }
    }

    fn can_send(&self) -> bool {
        !self.done && !self.fin_requested && !self.aborted
    }

    /// Write queued bytes until the queue empties or the socket is full. Returns how many
    /// bytes the kernel took.
    pub(crate) fn flush(&mut self) -> usize {
        let mut total = 0;
        while !self.queue.is_empty() && self.can_write && self.error.is_none() {
            let (r, want) = {
                let mut iov = [IoSlice::new(&[]); MAX_IOV];
                let k = self.queue.slices(&mut iov);
                let want: usize = iov[..k].iter().map(|s| s.len()).sum();
                (sys::send_vectored(self.fd.as_fd(), &iov[..k]), want)
            };
            match r {
                Ok(n) => {
                    self.queue.advance(n);
                    self.bytes_out += n as u64;
                    self.sends += 1;
                    total += n;
                    if n < want {
                        // A short write means the socket buffer filled up; the kernel
                        // reports EPOLLOUT when it has room again.
                        self.can_write = false;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => self.can_write = false,
                Err(e) => self.error = Some(close_reason(&e)),
            }
        }
        total
    }
}

impl Connection for KernelConn {
    fn local_addr(&self) -> std::net::SocketAddr {
        self.local
    }

    fn peer_addr(&self) -> std::net::SocketAddr {
        self.peer
    }

    fn send_space(&self) -> usize {
        if self.can_send() {
            self.send_buffer - self.queue.copied()
        } else {
            0
        }
    }

    /// Write straight to the socket when nothing is queued ahead; copy only what the
    /// kernel refuses, up to `send_buffer`.
    fn send(&mut self, data: &[u8]) -> Result<usize, SendError> {
        if !self.can_send() {
            return Err(SendError::Closed);
        }
        let mut written = 0;
        if self.queue.is_empty() && !self.connecting && self.error.is_none() && !data.is_empty() {
            match sys::send(self.fd.as_fd(), data) {
                Ok(n) => {
                    written = n;
                    self.bytes_out += n as u64;
                    self.sends += 1;
                    if n < data.len() {
                        self.can_write = false;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => self.can_write = false,
                // Reported once the callback returns, as Rusty reports a RST that
                // arrives after data was queued.
                Err(e) => self.error = Some(close_reason(&e)),
            }
        }
        let space = self.send_buffer - self.queue.copied();
        let n = written + self.queue.push_copy(&data[written..], space);
        if n < data.len() {
            self.want_writable = true;
        }
        Ok(n)
    }

    /// Queued by reference; written with the rest of the queue (one gathered send) when
    /// the callback returns.
    fn send_shared(&mut self, data: Bytes) -> Result<(), SendError> {
        if !self.can_send() {
            return Err(SendError::Closed);
        }
        self.queue.push_shared(data);
        Ok(())
    }

    fn notify_writable(&mut self) {
        self.want_writable = true;
        if self.queue.is_empty() {
            // Nothing of ours is waiting for the kernel, so there is room now; say so on
            // the next turn rather than inside this callback.
            self.writable_soon = true;
        }
    }

    /// Recorded only; the engine files the deadline when the callback returns. A
    /// deadline beyond what `Instant` can hold never comes, like no timer at all.
    fn set_timer(&mut self, after: Option<Duration>) {
        self.timer_at = match after {
            Some(d) if !self.done => Instant::now().checked_add(d),
            _ => None,
        };
    }

    /// Set on the socket at once (TCP_USER_TIMEOUT); the kernel applies it. A failure
    /// (the socket is already gone) changes nothing the application could act on.
    fn set_user_timeout(&mut self, timeout: Option<Duration>) {
        if let Err(e) = sys::set_user_timeout(self.fd.as_fd(), timeout) {
            log::debug!("TCP_USER_TIMEOUT: {e}");
        }
    }

    fn set_keepalive(&mut self, keepalive: Option<Keepalive>) {
        if let Err(e) = sys::set_keepalive(self.fd.as_fd(), keepalive) {
            log::debug!("SO_KEEPALIVE: {e}");
        }
    }

    /// Our own queue plus what the kernel holds unacknowledged (SIOCOUTQ).
    fn unacked_len(&self) -> usize {
        self.queue.len() + sys::unacked(self.fd.as_fd()).unwrap_or(0)
    }

    fn close(&mut self) {
        if !self.rx_closed {
            self.closed_at = Some(Instant::now());
        }
        self.rx_closed = true;
        self.shutdown_write();
    }

    fn shutdown_write(&mut self) {
        self.fin_requested = true;
    }

    fn abort(&mut self) {
        if !self.done {
            self.aborted = true;
        }
    }
}

/// How the application core lends a kernel connection to the handler.
impl AppConn for KernelConn {
    type Ctx = ();
    type Unread = RecvBuffer;

    fn with_ops<R>(&mut self, _: &mut (), f: impl FnOnce(&mut dyn Connection) -> R) -> R {
        f(self)
    }
    fn addrs(&self) -> (std::net::SocketAddr, std::net::SocketAddr) {
        (self.local, self.peer)
    }
    fn is_closed(&self) -> bool {
        self.aborted || self.done
    }
    fn unread_len(&self) -> usize {
        self.rx.len()
    }
    fn take_unread(&mut self) -> RecvBuffer {
        std::mem::take(&mut self.rx)
    }
    /// The buffer is always contiguous, so `contiguous` asks for nothing.
    fn put_unread(&mut self, mut rx: RecvBuffer, consumed: usize, _contiguous: bool, _: &mut ()) {
        rx.consume(consumed);
        self.rx = rx;
    }
    fn keep_unread(&mut self, rest: &[u8], _: &mut ()) {
        self.rx.extend(rest);
    }
}

impl UnreadBytes for RecvBuffer {
    fn readable(&self) -> &[u8] {
        RecvBuffer::readable(self)
    }
    fn len(&self) -> usize {
        RecvBuffer::len(self)
    }
}
