//! The [`Handler`] trait: the application's side of a worker, called inline by the
//! backend's loop.
//!
//! Callbacks run on the worker's thread in the middle of the loop, so they must not
//! block. Whatever they queue with [`Conn::send`] goes out in the same loop turn, in
//! the same segment as the ACK for the data that prompted it when possible. The rules
//! for when each callback runs live in one place, [`AppCore`](super::AppCore), which
//! every backend drives.

use std::net::SocketAddr;

use super::conn::{CloseReason, Conn, ConnectError, Opener};

/// The application's side of a worker. One value per worker, built on the worker's
/// thread; all callbacks run inline on that thread.
///
/// Every connection the application sees gets exactly one `closed` call, with its state
/// handed back by value. The one exception is a worker that stops with connections
/// still open (the grace period after a stop signal ran out): the engine is dropped
/// with them and no callback runs. The kernel backend then resets their peers; Rusty's
/// engine sends nothing, so its peers learn by their own timeouts.
pub trait Handler {
    /// Per-connection application state, kept next to the connection block.
    type Conn;

    /// A peer completed a handshake with one of our listeners. Return the connection's
    /// state to accept it, or `None` to refuse it (it is reset).
    fn accept(&mut self, local: SocketAddr, remote: SocketAddr) -> Option<Self::Conn>;

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
    /// you call `resume_receive` on the engine. When
    /// the connection ends, unread bytes are offered one last time; what is still left
    /// then is discarded and counted in [`Stats::unread_bytes_discarded`](crate::Stats).
    fn data(&mut self, conn: &mut Conn<'_, Self::Conn>, data: &[u8]) -> usize;

    /// Send space was freed after `send` refused some bytes (or `notify_writable`).
    fn writable(&mut self, conn: &mut Conn<'_, Self::Conn>) {
        let _ = conn;
    }

    /// The application called `resume_receive` on the engine for this connection; the
    /// bytes the backend holds are offered again right after this returns. Applications
    /// need not implement it: it is for layers between the backend and the application
    /// (TLS), which hold received bytes of their own that the backend does not see, and
    /// offer them to their inner handler here (after calling its `receive_resumed`).
    fn receive_resumed(&mut self, conn: &mut Conn<'_, Self::Conn>) {
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
        remote: SocketAddr,
        state: Self::Conn,
        error: ConnectError,
    ) {
        let _ = (opener, remote, state, error);
    }

    /// Called once per engine loop turn, after input and timers; a place to start
    /// connections or do periodic work. Keep it cheap.
    fn poll(&mut self, opener: &mut Opener<'_, Self::Conn>) {
        let _ = opener;
    }
}
