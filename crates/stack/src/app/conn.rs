//! What a callback holds: the [`Conn`] handle on one connection, the [`Opener`] for
//! starting new ones, the [`ConnId`] that names a connection, the [`Connection`]
//! trait every backend's connection implements behind the handle, and the errors and
//! close reasons a callback sees.

use std::any::{Any, TypeId};
use std::net::SocketAddr;
use std::ops::Range;
use std::time::Duration;

use bytes::Bytes;

use crate::checksum::SummedBytes;
use crate::tcp::config::Keepalive;

/// Identifies a connection within one worker. Stale ids (of closed connections) are
/// detected, never confused with a new connection in the same slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ConnId {
    index: u32,
    /// Never zero; 31 bits, so [`ConnId::to_bits`] leaves bit 63 clear.
    generation: u32,
}

/// Generations are 31-bit so an id packs into 63 bits (see [`ConnId::to_bits`]).
pub(crate) const GENERATION_MASK: u32 = 0x7fff_ffff;

impl ConnId {
    pub(crate) fn new(index: u32, generation: u32) -> ConnId {
        ConnId { index, generation }
    }

    /// The connection's slot in its worker's table (reused after the connection ends).
    pub fn index(&self) -> u32 {
        self.index
    }

    pub(crate) fn generation(&self) -> u32 {
        self.generation
    }

    /// The id packed into a `u64` with bit 63 clear, for event tokens (epoll's
    /// `data`, io_uring's `user_data`); [`ConnId::from_bits`] unpacks it.
    pub fn to_bits(self) -> u64 {
        (u64::from(self.generation & GENERATION_MASK) << 32) | u64::from(self.index)
    }

    /// The id [`ConnId::to_bits`] packed (bit 63 is ignored).
    pub fn from_bits(bits: u64) -> ConnId {
        ConnId {
            index: bits as u32,
            generation: (bits >> 32) as u32 & GENERATION_MASK,
        }
    }
}

/// What a backend's connection offers the application. Rusty's own TCP and the
/// kernel-socket backend implement it, so a [`Handler`](super::Handler) runs unchanged
/// on either. Applications use it through [`Conn`], whose methods document it.
pub trait Connection {
    /// Our end of the connection.
    fn local_addr(&self) -> SocketAddr;
    /// The peer's end of the connection.
    fn peer_addr(&self) -> SocketAddr;
    /// Bytes [`Connection::send`] would accept now.
    fn send_space(&self) -> usize;
    /// See [`Conn::send`].
    fn send(&mut self, data: &[u8]) -> Result<usize, SendError>;
    /// See [`Conn::send_shared`].
    fn send_shared(&mut self, data: Bytes) -> Result<(), SendError>;
    /// `body[range]` by reference; a backend that computes checksums itself uses the
    /// body's precomputed sums instead of reading the bytes again.
    fn send_summed(&mut self, body: &SummedBytes, range: Range<usize>) -> Result<(), SendError> {
        let end = range.end.min(body.len());
        let start = range.start.min(end);
        self.send_shared(body.bytes().slice(start..end))
    }
    /// See [`Conn::notify_writable`].
    fn notify_writable(&mut self);
    /// Arm a one-shot timer `after` from now (replacing an armed one), or cancel it
    /// with `None`; the handler's `timer` callback runs when it fires.
    fn set_timer(&mut self, after: Option<Duration>);
    /// See [`Conn::set_user_timeout`].
    fn set_user_timeout(&mut self, timeout: Option<Duration>);
    /// See [`Conn::set_keepalive`].
    fn set_keepalive(&mut self, keepalive: Option<Keepalive>);
    /// See [`Conn::unacked_len`].
    fn unacked_len(&self) -> usize;
    /// See [`Conn::close`].
    fn close(&mut self);
    /// See [`Conn::shutdown_write`].
    fn shutdown_write(&mut self);
    /// See [`Conn::abort`].
    fn abort(&mut self);
    /// What a layer between the backend and the application tells about the
    /// connection as a value of type `ty` (see [`Conn::layer_info`]). A layer answers
    /// for the type it defines and asks the connection beneath it for any other;
    /// backends have nothing to tell.
    fn layer_info(&self, ty: TypeId) -> Option<&dyn Any> {
        let _ = ty;
        None
    }
}

/// Why a connection ended; handed to the application's `closed` callback.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum CloseReason {
    /// Both sides closed gracefully.
    Normal,
    /// The peer reset the connection.
    Reset,
    /// The peer refused an active open (RST in reply to our SYN).
    Refused,
    /// Retransmissions, keepalive probes or FIN-WAIT-2 ran out of time, or the user
    /// timeout or (for a connection the application closed) the orphan bounds did: in
    /// those last cases we reset the peer.
    TimedOut,
    /// We aborted the connection with a RST: the application did, or refused it, or
    /// the engine held its maximum of orphans and this was the oldest.
    Aborted,
    /// A layer between the backend and the application (TLS) saw the peer end its
    /// transport without the layer's own end-of-data message (TLS `close_notify`):
    /// what arrived may be cut short. Backends never report it; layers do.
    Truncated,
    /// A layer between the backend and the application (TLS) ended the connection
    /// because the peer broke the layer's protocol (a failed handshake, a malformed
    /// record, a fatal alert). Backends never report it; layers do.
    ProtocolError,
}

/// Errors of the application-facing send calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum SendError {
    /// The sending side is closed (FIN queued, or the connection is gone).
    Closed,
}

/// Why an active open could not start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ConnectError {
    /// The engine holds its configured maximum of connections.
    TooManyConnections,
    /// No free local port maps the return flow to this worker.
    NoPortAvailable,
    /// The engine is shutting down.
    ShuttingDown,
    /// The remote address can name no peer: port 0, or an address no host may use as a
    /// unicast peer (0/8, 127/8, multicast, class E, the limited or the link's directed
    /// broadcast, or this engine's own address; for IPv6 the unspecified, loopback,
    /// multicast, IPv4-mapped and reserved addresses). A layer that needs a name for
    /// the peer (TLS's server name) reports a malformed one the same way.
    InvalidAddress,
    /// The engine has no usable address of the remote's family: none configured, each
    /// found to be another node's, or (for [`Engine::connect`](crate::Engine::connect)
    /// only) still being checked for duplicates. Opens asked for from callbacks wait
    /// for that check instead.
    NoSourceAddress,
}

impl std::fmt::Display for ConnectError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let s = match self {
            ConnectError::TooManyConnections => "too many connections",
            ConnectError::NoPortAvailable => "no local port available for this worker",
            ConnectError::ShuttingDown => "engine is shutting down",
            ConnectError::InvalidAddress => "not a unicast peer address",
            ConnectError::NoSourceAddress => "no local address of the peer's family",
        };
        f.write_str(s)
    }
}

impl std::error::Error for ConnectError {}

/// What starting an active open gives: the new connection's id, or why it could not
/// start, with the application state `S` handed back.
pub type OpenResult<S> = Result<ConnId, (ConnectError, S)>;

/// Active opens requested from inside callbacks; the engine starts them when the
/// callback returns.
pub struct Opener<'a, S> {
    requests: &'a mut Vec<(SocketAddr, S)>,
}

impl<'a, S> Opener<'a, S> {
    /// An opener that queues its requests in `requests`. Backends make their own; a
    /// layer that runs an inner handler (see [`Conn::new`]) makes one over a list of
    /// its own and starts what the inner handler asked for itself.
    pub fn new(requests: &'a mut Vec<(SocketAddr, S)>) -> Opener<'a, S> {
        Opener { requests }
    }

    /// Open a connection to `remote` with `state` as its application state. Failures
    /// are reported through the handler's `connect_failed` callback.
    pub fn connect(&mut self, remote: SocketAddr, state: S) {
        self.requests.push((remote, state));
    }
}

/// One connection, as a callback sees it.
pub struct Conn<'a, S> {
    id: ConnId,
    ops: &'a mut dyn Connection,
    state: &'a mut S,
    opener: Opener<'a, S>,
}

impl<'a, S> Conn<'a, S> {
    /// A handle on connection `id` whose operations are `ops`, with application state
    /// `state` and opens queued in `requests`.
    ///
    /// Backends make the handles their callbacks get. A layer between the backend and
    /// an application's handler (TLS, say) is a [`Handler`](super::Handler) itself: it
    /// takes its own handle apart with [`Conn::split`], implements
    /// [`Connection`] over it (plaintext in, ciphertext out) and builds the handle its
    /// inner handler gets with this, so the application runs unchanged on top of it.
    pub fn new(
        id: ConnId,
        ops: &'a mut dyn Connection,
        state: &'a mut S,
        requests: &'a mut Vec<(SocketAddr, S)>,
    ) -> Conn<'a, S> {
        Conn {
            id,
            ops,
            state,
            opener: Opener { requests },
        }
    }

    /// This connection's id, valid until its `closed` callback.
    pub fn id(&self) -> ConnId {
        self.id
    }
    /// The application state of this connection.
    pub fn state(&mut self) -> &mut S {
        self.state
    }
    /// Our end of the connection.
    pub fn local_addr(&self) -> SocketAddr {
        self.ops.local_addr()
    }
    /// The peer's end of the connection.
    pub fn peer_addr(&self) -> SocketAddr {
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
    /// (`None` cancels it). When it fires, [`Handler::timer`](super::Handler::timer)
    /// runs; a connection that has closed never sees its timer. Use it for idle and
    /// request timeouts.
    pub fn set_timer(&mut self, after: Option<Duration>) {
        self.ops.set_timer(after);
    }
    /// Set this connection's user timeout (RFC 5482; RFC 9293 §3.10.1 USER TIMEOUT;
    /// Linux's TCP_USER_TIMEOUT, which the kernel backend sets): when sent data or our
    /// FIN stays unacknowledged, or the peer keeps its window shut with no progress, for
    /// longer than this, the connection is reset and `closed` reports `TimedOut`.
    /// `None` clears it. The default comes from
    /// [`TcpConfig::user_timeout`](crate::TcpConfig). It keeps applying after
    /// [`Conn::close`], so it bounds a graceful close as well.
    pub fn set_user_timeout(&mut self, timeout: Option<Duration>) {
        self.ops.set_user_timeout(timeout);
    }
    /// Probe this connection's peer when it has been idle (RFC 1122 §4.2.3.6; Linux's
    /// SO_KEEPALIVE with TCP_KEEPIDLE, TCP_KEEPINTVL and TCP_KEEPCNT, which the kernel
    /// backend sets), or not with `None`, in place of
    /// [`TcpConfig::keepalive`](crate::TcpConfig). The idle time counts from now; when
    /// the probes go unanswered, `closed` reports `TimedOut`.
    pub fn set_keepalive(&mut self, keepalive: Option<Keepalive>) {
        self.ops.set_keepalive(keepalive);
    }
    /// Bytes queued on this connection that the peer has not acknowledged yet (not yet
    /// sent, or in flight): zero once everything sent was delivered. A timeout that
    /// finds it unchanged knows the peer made no progress.
    pub fn unacked_len(&self) -> usize {
        self.ops.unacked_len()
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
    /// Abort with a RST; queued data is dropped. `closed` follows with `Aborted`, and
    /// no other callback runs for this connection.
    pub fn abort(&mut self) {
        self.ops.abort();
    }
    /// What a layer between the backend and this handler tells about the connection,
    /// as the type `T` the layer defines: `rusty_tls::TlsInfo` (the ALPN protocol, the
    /// server name, the TLS version and cipher suite), say. `None` when no layer
    /// beneath offers a `T`, as on a bare backend.
    pub fn layer_info<T: Any>(&self) -> Option<&T> {
        self.ops.layer_info(TypeId::of::<T>())?.downcast_ref()
    }
    /// Open another connection (see [`Opener::connect`]).
    pub fn connect(&mut self, remote: SocketAddr, state: S) {
        self.opener.connect(remote, state);
    }
    /// The handle's parts at once: the connection's operations, its application state
    /// and the opener. For layers that present the connection to an inner handler
    /// (see [`Conn::new`]); applications use the methods above.
    pub fn split(&mut self) -> (&mut dyn Connection, &mut S, &mut Opener<'a, S>) {
        (&mut *self.ops, &mut *self.state, &mut self.opener)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_pack_into_63_bits() {
        let id = ConnId::new(0xffff_fffe, GENERATION_MASK);
        let bits = id.to_bits();
        assert_eq!(bits >> 63, 0);
        assert_eq!(ConnId::from_bits(bits), id);
        assert_eq!(ConnId::from_bits(bits | 1 << 63), id);
    }
}
