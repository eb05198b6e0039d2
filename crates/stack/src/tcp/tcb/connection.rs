//! Rusty's TCP connection as the application sees it: [`TcbConn`], a [`Tcb`] with the
//! engine's ring pool lent to it for one callback, implements [`Connection`], the
//! operations behind every [`Conn`](crate::Conn) handle on Rusty's engine.

use std::net::SocketAddr;
use std::ops::Range;
use std::time::Duration;

use bytes::Bytes;

use super::Tcb;
use crate::app::{Connection, SendError, UnreadBytes};
use crate::checksum::SummedBytes;
use crate::engine::FlowKey;
use crate::tcp::config::Keepalive;
use crate::tcp::pool::RingPool;
use crate::tcp::recv_buffer::RecvBuffer;

/// A connection block and the pool its buffers take storage from, for one callback.
pub(crate) struct TcbConn<'a> {
    pub(crate) tcb: &'a mut Tcb,
    pub(crate) pool: &'a mut RingPool,
    /// The connection's flow: the peer's address and our port.
    pub(crate) key: &'a FlowKey,
}

impl Connection for TcbConn<'_> {
    fn local_addr(&self) -> SocketAddr {
        SocketAddr::new(self.tcb.local_ip(), self.key.local_port)
    }
    fn peer_addr(&self) -> SocketAddr {
        SocketAddr::new(self.key.remote_ip(), self.key.remote_port)
    }
    fn send_space(&self) -> usize {
        self.tcb.send_space()
    }
    fn send(&mut self, data: &[u8]) -> Result<usize, SendError> {
        self.tcb.send(data, self.pool)
    }
    fn send_shared(&mut self, data: Bytes) -> Result<(), SendError> {
        self.tcb.send_shared(data)
    }
    fn send_summed(&mut self, body: &SummedBytes, range: Range<usize>) -> Result<(), SendError> {
        self.tcb.send_summed(body, range)
    }
    fn notify_writable(&mut self) {
        self.tcb.notify_writable()
    }
    fn set_timer(&mut self, after: Option<Duration>) {
        self.tcb.set_app_timer(after)
    }
    fn set_user_timeout(&mut self, timeout: Option<Duration>) {
        self.tcb.set_user_timeout(timeout)
    }
    fn set_keepalive(&mut self, keepalive: Option<Keepalive>) {
        self.tcb.set_keepalive(keepalive)
    }
    fn unacked_len(&self) -> usize {
        self.tcb.send_buffer().len()
    }
    fn close(&mut self) {
        self.tcb.close()
    }
    fn shutdown_write(&mut self) {
        self.tcb.shutdown_write()
    }
    fn abort(&mut self) {
        self.tcb.abort()
    }
}

/// The receive buffer, lent to the application core while the handler reads it.
impl UnreadBytes for RecvBuffer {
    fn readable(&self) -> &[u8] {
        RecvBuffer::readable(self)
    }
    fn len(&self) -> usize {
        self.readable_len()
    }
}
