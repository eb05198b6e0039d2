//! The application API: a [`Handler`] per worker, called inline by the engine, and the
//! [`Conn`] handle it gets for one connection.
//!
//! Callbacks run on the worker's thread in the middle of the engine's loop, so they must
//! not block. Whatever they queue with [`Conn::send`] goes out in the same loop turn, in
//! the same segment as the ACK for the data that prompted it when possible.

use std::net::SocketAddrV4;
use std::ops::Range;
use std::time::Duration;

use bytes::Bytes;

use crate::checksum::SummedBytes;
use crate::tcp::tcb::{CloseReason, SendError, Tcb};

/// Identifies a connection within one worker. Stale ids (of closed connections) are
/// detected, never confused with a new connection in the same slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ConnId {
    pub(crate) index: u32,
    pub(crate) generation: u32,
}

impl ConnId {
    /// For backends: slot `index` in the worker's connection table, and a generation
    /// that changes each time the slot is reused.
    pub fn new(index: u32, generation: u32) -> ConnId {
        ConnId { index, generation }
    }
    pub fn index(&self) -> u32 {
        self.index
    }
}

/// What a backend's connection offers the application. Rusty's own TCP ([`Tcb`]) and
/// the kernel-socket backend implement it, so a [`Handler`] runs unchanged on either.
pub trait Connection {
    fn local_addr(&self) -> SocketAddrV4;
    fn peer_addr(&self) -> SocketAddrV4;
    /// Bytes [`Connection::send`] would accept now.
    fn send_space(&self) -> usize;
    fn send(&mut self, data: &[u8]) -> Result<usize, SendError>;
    fn send_shared(&mut self, data: Bytes) -> Result<(), SendError>;
    /// `body[range]` by reference; a backend that computes checksums itself uses the
    /// body's precomputed sums instead of reading the bytes again.
    fn send_summed(&mut self, body: &SummedBytes, range: Range<usize>) -> Result<(), SendError> {
        let end = range.end.min(body.len());
        let start = range.start.min(end);
        self.send_shared(body.bytes().slice(start..end))
    }
    fn notify_writable(&mut self);
    /// Arm a one-shot timer `after` from now (replacing an armed one), or cancel it
    /// with `None`; the handler's `timer` callback runs when it fires.
    fn set_timer(&mut self, after: Option<Duration>);
    fn close(&mut self);
    fn shutdown_write(&mut self);
    fn abort(&mut self);
}

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

/// Why an active open could not start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConnectError {
    /// The engine holds its configured maximum of connections.
    TooManyConnections,
    /// No free local port maps the return flow to this worker.
    NoPortAvailable,
    /// The engine is shutting down.
    ShuttingDown,
}

impl std::fmt::Display for ConnectError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let s = match self {
            ConnectError::TooManyConnections => "too many connections",
            ConnectError::NoPortAvailable => "no local port available for this worker",
            ConnectError::ShuttingDown => "engine is shutting down",
        };
        f.write_str(s)
    }
}

impl std::error::Error for ConnectError {}

/// Active opens requested from inside callbacks; the engine starts them when the
/// callback returns.
pub struct Opener<'a, S> {
    pub(crate) requests: &'a mut Vec<(SocketAddrV4, S)>,
}

impl<'a, S> Opener<'a, S> {
    /// For backends: collect requests into `requests`.
    pub fn new(requests: &'a mut Vec<(SocketAddrV4, S)>) -> Opener<'a, S> {
        Opener { requests }
    }

    /// Open a connection to `remote` with `state` as its application state. Failures
    /// are reported through the handler's `connect_failed` callback.
    pub fn connect(&mut self, remote: SocketAddrV4, state: S) {
        self.requests.push((remote, state));
    }
}

/// One connection, as a callback sees it.
pub struct Conn<'a, S> {
    pub(crate) id: ConnId,
    pub(crate) ops: &'a mut dyn Connection,
    pub(crate) state: &'a mut S,
    pub(crate) opener: Opener<'a, S>,
}

impl<'a, S> Conn<'a, S> {
    /// For backends: the handle a callback gets.
    pub fn new(
        id: ConnId,
        ops: &'a mut dyn Connection,
        state: &'a mut S,
        requests: &'a mut Vec<(SocketAddrV4, S)>,
    ) -> Conn<'a, S> {
        Conn {
            id,
            ops,
            state,
            opener: Opener { requests },
        }
    }

    pub fn id(&self) -> ConnId {
        self.id
    }
    /// The application state of this connection.
    pub fn state(&mut self) -> &mut S {
        self.state
    }
    pub fn local_addr(&self) -> SocketAddrV4 {
        self.ops.local_addr()
    }
    pub fn peer_addr(&self) -> SocketAddrV4 {
        self.ops.peer_addr()
    }
    /// Bytes [`Conn::send`] would accept now.
    pub fn send_space(&self) -> usize {
        self.ops.send_space()
    }
    /// Copy as much of `data` as fits into the send buffer; returns how much that was.
    /// When it is less than `data.len()`, a `writable` callback follows once
    /// acknowledgements free space. Sending after `close`/`shutdown_write` is an error.
    pub fn send(&mut self, data: &[u8]) -> Result<usize, SendError> {
        self.ops.send(data)
    }
    /// Queue shared immutable bytes without copying them (the send queue keeps a
    /// reference; retransmissions re-read it). Always accepted while the send side is open.
    pub fn send_shared(&mut self, data: Bytes) -> Result<(), SendError> {
        self.ops.send_shared(data)
    }
    /// Queue `body[range]` without copying, like [`Conn::send_shared`], for bodies
    /// with precomputed checksums (static files): where the device cannot compute TCP
    /// checksums, Rusty takes the payload's from the body's prefix sums instead of
    /// reading it again. Always accepted while the send side is open.
    pub fn send_summed(
        &mut self,
        body: &SummedBytes,
        range: Range<usize>,
    ) -> Result<(), SendError> {
        self.ops.send_summed(body, range)
    }
    /// Ask for a `writable` callback when acknowledgements next free send space.
    pub fn notify_writable(&mut self) {
        self.ops.notify_writable();
    }
    /// Arm this connection's one-shot timer `after` from now, replacing an armed one
    /// (`None` cancels it). When it fires, [`Handler::timer`] runs; a connection that
    /// has closed never sees its timer. Use it for idle and request timeouts.
    pub fn set_timer(&mut self, after: Option<Duration>) {
        self.ops.set_timer(after);
    }
    /// Graceful close: send what is queued, then FIN. Data arriving afterwards is
    /// acknowledged and dropped. `closed` follows when the connection is done.
    pub fn close(&mut self) {
        self.ops.close();
    }
    /// Half-close: FIN after the queued data; keep receiving.
    pub fn shutdown_write(&mut self) {
        self.ops.shutdown_write();
    }
    /// Abort with a RST; queued data is dropped. `closed` follows with `Aborted`.
    pub fn abort(&mut self) {
        self.ops.abort();
    }
    /// Open another connection (see [`Opener::connect`]).
    pub fn connect(&mut self, remote: SocketAddrV4, state: S) {
        self.opener.connect(remote, state);
    }
}

/// The application's side of a worker. One value per worker, built on the worker's
/// thread; all callbacks run inline on that thread.
///
/// Every connection the application sees gets exactly one `closed` call, with its state
/// handed back by value.
pub trait Handler {
    /// Per-connection application state, kept next to the connection block.
    type Conn;

    /// A peer completed a handshake with one of our listeners. Return the connection's
    /// state to accept it, or `None` to refuse it (it is reset).
    fn accept(&mut self, local: SocketAddrV4, remote: SocketAddrV4) -> Option<Self::Conn>;

    /// The connection is established: right after `accept` for passive opens, when the
    /// handshake completes for active opens.
    fn connected(&mut self, conn: &mut Conn<'_, Self::Conn>) {
        let _ = conn;
    }

    /// In-order bytes from the peer, borrowed from the received frame where possible.
    /// Return how many you consumed. If you took some but not all, the rest is offered
    /// again straight away (so you may take one request at a time). Return 0 to pause:
    /// the bytes stay queued in the stack (shrinking the advertised window) and are
    /// offered again when more data arrives, after the next `writable` callback, or when
    /// you call [`Engine::resume_receive`](crate::engine::Engine::resume_receive). When
    /// the connection ends, unread bytes are offered one last time; what is still left
    /// then is discarded and counted in [`Stats::unread_bytes_discarded`](crate::Stats).
    fn data(&mut self, conn: &mut Conn<'_, Self::Conn>, data: &[u8]) -> usize;

    /// Send space was freed after `send` refused some bytes (or `notify_writable`).
    fn writable(&mut self, conn: &mut Conn<'_, Self::Conn>) {
        let _ = conn;
    }

    /// The peer closed its sending side (FIN): no more data will arrive. Bytes you left
    /// unconsumed are still offered afterwards.
    fn peer_closed(&mut self, conn: &mut Conn<'_, Self::Conn>) {
        let _ = conn;
    }

    /// The timer armed with [`Conn::set_timer`] fired.
    fn timer(&mut self, conn: &mut Conn<'_, Self::Conn>) {
        let _ = conn;
    }

    /// The connection is over; its state comes back to you.
    fn closed(
        &mut self,
        opener: &mut Opener<'_, Self::Conn>,
        state: Self::Conn,
        reason: CloseReason,
    ) {
        let _ = (opener, state, reason);
    }

    /// An active open could not even start; its state comes back to you.
    fn connect_failed(
        &mut self,
        opener: &mut Opener<'_, Self::Conn>,
        remote: SocketAddrV4,
        state: Self::Conn,
        error: super::handler::ConnectError,
    ) {
        let _ = (opener, remote, state, error);
    }

    /// Called once per engine loop turn, after input and timers; a place to start
    /// connections or do periodic work. Keep it cheap.
    fn poll(&mut self, opener: &mut Opener<'_, Self::Conn>) {
        let _ = opener;
    }
}
