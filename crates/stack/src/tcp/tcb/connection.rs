//! Rusty's TCP connection as the application sees it: [`Connection`] for [`Tcb`], the
//! operations behind every [`Conn`](crate::Conn) handle on Rusty's engine.

use std::net::SocketAddrV4;
use std::ops::Range;
use std::time::Duration;

use bytes::Bytes;

use super::Tcb;
use crate::app::{Connection, SendError, UnreadBytes};
use crate::checksum::SummedBytes;
use crate::tcp::recv_buffer::RecvBuffer;

impl Connection for Tcb {
    fn local_addr(&self) -> SocketAddrV4 {
        self.local()
    }
    fn peer_addr(&self) -> SocketAddrV4 {
        self.remote()
    }
    fn send_space(&self) -> usize {
        Tcb::send_space(self)
    }
    fn send(&mut self, data: &[u8]) -> Result<usize, SendError> {
        Tcb::send(self, data)
    }
    fn send_shared(&mut self, data: Bytes) -> Result<(), SendError> {
        Tcb::send_shared(self, data)
    }
    fn send_summed(&mut self, body: &SummedBytes, range: Range<usize>) -> Result<(), SendError> {
        Tcb::send_summed(self, body, range)
    }
    fn notify_writable(&mut self) {
        Tcb::notify_writable(self)
    }
    fn set_timer(&mut self, after: Option<Duration>) {
        Tcb::set_app_timer(self, after)
    }
    fn close(&mut self) {
        Tcb::close(self)
    }
    fn shutdown_write(&mut self) {
        Tcb::shutdown_write(self)
    }
    fn abort(&mut self) {
        Tcb::abort(self)
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
