//! [`AppCore`]: the application's handler and its connection table, and the rules for
//! calling it, in one place for every backend.
//!
//! A backend (Rusty's engine, the kernel-socket backend) finds out what happened to a
//! connection its own way (segments through the TCP state machine, readiness from
//! epoll) and then tells the core: it connected, bytes arrived, send space freed, the
//! peer closed, a timer fired, it is over. The core decides which callbacks that means:
//!
//! * `accept` may refuse a passive open; `connected` follows acceptance (or the end of
//!   an active open's handshake).
//! * `data` gets new bytes straight from where the backend has them when nothing is
//!   queued ahead of them; what the handler does not take is kept by the connection
//!   ([`AppConn::keep_unread`]) and offered again at once while the handler makes
//!   progress (it may take one request at a time). Taking nothing pauses; a paused
//!   connection is offered its bytes again when the backend says so (more data,
//!   `writable`, `resume_receive`, which runs `receive_resumed` first). A message that wraps the end of a ring buffer is
//!   offered again in one piece before the core treats a zero as a pause.
//! * A callback that aborts the connection (or otherwise ends it at once) gets no
//!   further callback for it but `closed`.
//! * `closed` comes exactly once per connection the application accepted or opened,
//!   after a last offer of unread bytes; the close reason is counted in [`Stats`].
//! * The table holds at most its configured number of connections; past that, and
//!   once the worker stops accepting (graceful shutdown), new connections are refused
//!   ([`AppCore::may_open`]).
//! * Active opens requested from callbacks are queued and started by the backend when
//!   the callback returns ([`AppCore::start_requested`]); one that cannot start comes
//!   back through `connect_failed`, and requests made from `connect_failed` wait for
//!   the next turn, so a handler that retries at once cannot spin.
//!
//! Slots are reused; each carries a generation, so a [`ConnId`] of a closed connection
//! is recognised as stale and never reaches the connection now in its slot.

use std::net::SocketAddr;
use std::ops::{Index, IndexMut};

use super::table::Table;

use super::conn::CloseReason;
use super::conn::{Conn, ConnId, ConnectError, Connection, OpenResult, Opener, GENERATION_MASK};
use super::handler::Handler;
use crate::stats::Stats;

/// What the core needs from a backend's connection block.
pub trait AppConn {
    /// Per-worker state the connection borrows while the application uses it (Rusty's
    /// engine lends its buffer pool; the kernel backend needs nothing).
    type Ctx;
    /// The connection's buffer of received, unread bytes, lent to the core while the
    /// handler reads it.
    type Unread: UnreadBytes;

    /// Run `f` with the application-facing operations of this connection.
    fn with_ops<R>(&mut self, ctx: &mut Self::Ctx, f: impl FnOnce(&mut dyn Connection) -> R) -> R;
    /// (local, remote) addresses, for `accept`.
    fn addrs(&self) -> (SocketAddr, SocketAddr);
    /// The connection is over for the application: aborted, or finished. A callback
    /// that turns this on has ended the connection itself.
    fn is_closed(&self) -> bool;
    /// Received bytes the application has not consumed.
    fn unread_len(&self) -> usize;
    /// Lend the unread bytes out (the connection holds none until they come back).
    fn take_unread(&mut self) -> Self::Unread;
    /// Take the lent bytes back after the handler consumed `consumed` of them; with
    /// `contiguous`, move what is left into one piece (it wrapped the buffer's end).
    fn put_unread(
        &mut self,
        unread: Self::Unread,
        consumed: usize,
        contiguous: bool,
        ctx: &mut Self::Ctx,
    );
    /// Keep bytes the handler did not take from a direct offer, after anything unread.
    fn keep_unread(&mut self, rest: &[u8], ctx: &mut Self::Ctx);
}

/// A connection's unread bytes while the core has them out.
pub trait UnreadBytes {
    /// The unread bytes as one slice: all of them, or the part before the buffer wraps.
    fn readable(&self) -> &[u8];
    /// All unread bytes, contiguous or not.
    fn len(&self) -> usize;
    /// Nothing unread.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

struct Slot<C, S> {
    conn: C,
    /// The application's state: `None` before `accept` and after `closed`.
    app: Option<S>,
    generation: u32,
    /// A callback ended the connection: only `closed` is left to call.
    ended: bool,
    /// `closed` ran (or was due with no state) and the close was counted.
    finished: bool,
}

/// Bytes one connection takes in the table: its slot as the table's entry.
pub(crate) fn slot_bytes<C, S>() -> usize {
    super::table::entry_bytes::<Slot<C, S>>()
}

/// One worker's handler and connection table: see [the application core](crate::app)
/// for the rules it keeps.
pub struct AppCore<H: Handler, C> {
    handler: H,
    slots: Table<Slot<C, H::Conn>>,
    /// Most connections the table holds.
    limit: usize,
    /// New connections are welcome (no graceful stop has begun).
    accepting: bool,
    next_generation: u32,
    /// Active opens requested from callbacks, started by the backend.
    requests: Vec<(SocketAddr, H::Conn)>,
}

impl<H: Handler, C: AppConn> AppCore<H, C> {
    /// A table for at most `limit` connections, with room for `capacity` of them
    /// before it grows.
    pub fn new(handler: H, limit: usize, capacity: usize) -> AppCore<H, C> {
        AppCore {
            handler,
            slots: Table::with_capacity(capacity.min(limit)),
            limit,
            accepting: true,
            next_generation: 1,
            requests: Vec::new(),
        }
    }

    /// The application's handler.
    pub fn handler(&self) -> &H {
        &self.handler
    }
    /// The application's handler.
    pub fn handler_mut(&mut self) -> &mut H {
        &mut self.handler
    }
    /// Connections in the table.
    pub fn len(&self) -> usize {
        self.slots.len()
    }
    /// No connection in the table.
    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }

    /// The table holds its limit of connections.
    pub fn is_full(&self) -> bool {
        self.slots.len() >= self.limit
    }

    /// New connections are welcome: no graceful stop has begun.
    pub fn is_accepting(&self) -> bool {
        self.accepting
    }

    /// Begin a graceful stop: refuse new connections, passive and active; open ones
    /// carry on.
    pub fn stop_accepting(&mut self) {
        self.accepting = false;
    }

    /// Whether an active open with application state `state` may start now: the
    /// state back, or why not with the state.
    pub fn may_open(&self, state: H::Conn) -> Result<H::Conn, (ConnectError, H::Conn)> {
        if !self.accepting {
            Err((ConnectError::ShuttingDown, state))
        } else if self.is_full() {
            Err((ConnectError::TooManyConnections, state))
        } else {
            Ok(state)
        }
    }

    /// The id the next [`AppCore::insert`] will return (for backends that must name the
    /// connection, e.g. in an event token, before it is inserted).
    pub fn next_id(&self) -> ConnId {
        ConnId::new(self.slots.vacant_key() as u32, self.next_generation)
    }

    /// Add a connection, with the application's state for active opens or `None` for a
    /// passive open that has not been accepted yet. The backend checks first that the
    /// table is not full. Inlined, so that a large block is built in its slot rather
    /// than copied there through each call.
    #[inline]
    pub fn insert(&mut self, conn: C, app: Option<H::Conn>) -> ConnId {
        self.insert_with(|| conn, app).0
    }

    /// [`insert`](Self::insert) of the connection `make` builds, in its slot; its id,
    /// and the connection where it lies, for the backend to finish it there.
    #[inline]
    pub fn insert_with(
        &mut self,
        make: impl FnOnce() -> C,
        app: Option<H::Conn>,
    ) -> (ConnId, &mut C) {
        // Backends refuse new connections first ([`AppCore::is_full`], `may_open`).
        debug_assert!(!self.is_full(), "insert into a full connection table");
        let id = self.next_id();
        self.next_generation = (self.next_generation + 1) & GENERATION_MASK;
        if self.next_generation == 0 {
            self.next_generation = 1;
        }
        let (index, slot) = self.slots.insert_with(|| Slot {
            conn: make(),
            app,
            generation: id.generation(),
            ended: false,
            finished: false,
        });
        debug_assert_eq!(index as u32, id.index());
        (id, &mut slot.conn)
    }

    /// The slot of `id`, unless that connection is gone.
    pub fn index_of(&self, id: ConnId) -> Option<usize> {
        let index = id.index() as usize;
        self.slots
            .get(index)
            .is_some_and(|s| s.generation == id.generation())
            .then_some(index)
    }

    /// The id of the connection in slot `index`.
    pub fn id(&self, index: usize) -> Option<ConnId> {
        self.slots
            .get(index)
            .map(|s| ConnId::new(index as u32, s.generation))
    }

    /// The connection in slot `index`.
    pub fn get(&self, index: usize) -> Option<&C> {
        self.slots.get(index).map(|s| &s.conn)
    }
    /// The connection in slot `index`.
    pub fn get_mut(&mut self, index: usize) -> Option<&mut C> {
        self.slots.get_mut(index).map(|s| &mut s.conn)
    }
    /// The connection in slot `index` with its id ([`id`](Self::id) and
    /// [`get_mut`](Self::get_mut) in one look-up).
    pub fn get_mut_with_id(&mut self, index: usize) -> Option<(ConnId, &mut C)> {
        self.slots
            .get_mut(index)
            .map(|s| (ConnId::new(index as u32, s.generation), &mut s.conn))
    }
    /// Every connection, with its slot.
    pub fn iter(&self) -> impl Iterator<Item = (usize, &C)> {
        self.slots.iter().map(|(i, s)| (i, &s.conn))
    }
    /// Every connection, with its slot.
    pub fn iter_mut(&mut self) -> impl Iterator<Item = (usize, &mut C)> {
        self.slots.iter_mut().map(|(i, s)| (i, &mut s.conn))
    }

    // ----- Events a backend reports -----

    /// A passive open completed its handshake: ask the handler. Returns false if it
    /// refused (the backend resets the connection; `closed` will not be called).
    pub fn accept(&mut self, index: usize, stats: &mut Stats) -> bool {
        let Some(slot) = self.slots.get_mut(index) else {
            return false;
        };
        if slot.app.is_some() {
            return true;
        }
        let (local, remote) = slot.conn.addrs();
        match self.handler.accept(local, remote) {
            Some(state) => {
                stats.conns_opened_passive += 1;
                slot.app = Some(state);
                true
            }
            None => {
                stats.conns_refused += 1;
                false
            }
        }
    }

    /// The connection is established.
    pub fn connected(&mut self, ctx: &mut C::Ctx, index: usize) {
        self.call(ctx, index, |h, c| h.connected(c));
    }

    /// In-order bytes arrived. `direct` are new bytes the backend still holds (a slice
    /// of the received frame or read buffer) rather than ones it stored; empty when
    /// there are none. They are offered at once when nothing is unread ahead of them,
    /// else kept behind what is; then unread bytes are offered for as long as the
    /// handler makes progress.
    // Always inlined: each backend calls it from one place, once per delivery; out of line,
    // the backend's state is spilled around the call.
    #[inline(always)]
    pub fn data(&mut self, ctx: &mut C::Ctx, index: usize, direct: &[u8]) {
        let AppCore {
            handler,
            slots,
            requests,
            ..
        } = self;
        let Some(slot) = slots.get_mut(index).filter(|s| s.is_live()) else {
            return;
        };
        if !direct.is_empty() {
            if slot.conn.unread_len() == 0 {
                let mut taken = 0;
                let open = slot.call(index, handler, requests, ctx, |h, c| {
                    taken = h.data(c, direct)
                });
                let taken = taken.min(direct.len());
                if taken < direct.len() {
                    // Kept even when the callback ended the connection: they are then
                    // counted as discarded when it closes.
                    slot.conn.keep_unread(&direct[taken..], ctx);
                }
                if taken == 0 || !open {
                    return;
                }
            } else {
                slot.conn.keep_unread(direct, ctx);
            }
        }
        if slot.conn.unread_len() > 0 {
            self.offer_unread(ctx, index);
        }
    }

    /// Send space freed after the application asked for it: `writable`, then unread
    /// bytes again (the handler may have paused for lack of send space).
    pub fn writable(&mut self, ctx: &mut C::Ctx, index: usize) {
        if self.call(ctx, index, |h, c| h.writable(c)) {
            self.offer_unread(ctx, index);
        }
    }

    /// The application asked for its received bytes again (the backend's
    /// `resume_receive`): `receive_resumed`, then the unread bytes. Backends call it on
    /// established connections only.
    pub fn resume(&mut self, ctx: &mut C::Ctx, index: usize) {
        if self.call(ctx, index, |h, c| h.receive_resumed(c)) {
            self.offer_unread(ctx, index);
        }
    }

    /// The application acts on connection `index` on its own, outside any event (a
    /// socket layer's `write` or `close`, say): `f` gets the handler and the connection
    /// as a callback would. `None`, without calling `f`, when the connection is gone or
    /// has ended for the application.
    pub fn with_conn<R>(
        &mut self,
        ctx: &mut C::Ctx,
        index: usize,
        f: impl FnOnce(&mut H, &mut Conn<'_, H::Conn>) -> R,
    ) -> Option<R> {
        let mut out = None;
        self.call(ctx, index, |h, c| out = Some(f(h, c)));
        out
    }

    /// The peer closed its sending side.
    pub fn peer_closed(&mut self, ctx: &mut C::Ctx, index: usize) {
        self.call(ctx, index, |h, c| h.peer_closed(c));
    }

    /// The application's timer fired.
    pub fn timer(&mut self, ctx: &mut C::Ctx, index: usize) {
        self.call(ctx, index, |h, c| h.timer(c));
    }

    /// The connection is over for the application: offer unread bytes a last time
    /// (unless a callback ended it), count what is left and the reason, and hand the
    /// state back through `closed`. Only the first call for a connection does
    /// anything; the slot stays until [`AppCore::remove`].
    pub fn finish(
        &mut self,
        ctx: &mut C::Ctx,
        index: usize,
        reason: CloseReason,
        stats: &mut Stats,
    ) {
        let AppCore {
            handler,
            slots,
            requests,
            ..
        } = self;
        let Some(slot) = slots.get_mut(index).filter(|s| !s.finished) else {
            return;
        };
        slot.offer_unread(index, handler, requests, ctx);
        slot.finished = true;
        stats.unread_bytes_discarded += slot.conn.unread_len() as u64;
        match reason {
            CloseReason::Normal => stats.conns_closed += 1,
            CloseReason::Reset | CloseReason::Refused => stats.conns_reset += 1,
            CloseReason::TimedOut => stats.conns_timed_out += 1,
            // Only layers above a backend report the last two.
            CloseReason::Aborted | CloseReason::ProtocolError => stats.conns_aborted += 1,
            CloseReason::Truncated => stats.conns_reset += 1,
        }
        if let Some(state) = slot.app.take() {
            handler.closed(&mut Opener::new(requests), state, reason);
        }
    }

    /// Take the connection out of the table. One that never finished is finished
    /// first (as a normal close), so its application still gets `closed`.
    pub fn remove(&mut self, ctx: &mut C::Ctx, index: usize, stats: &mut Stats) -> C {
        self.finish(ctx, index, CloseReason::Normal, stats);
        self.slots
            .remove(index)
            .expect("removing a connection that is in the table")
            .conn
    }

    /// [`remove`](Self::remove) without moving the connection out: `last` sees it in
    /// place (with the context), then it is dropped where it lies. Does nothing if slot
    /// `index` is empty.
    pub fn remove_with(
        &mut self,
        ctx: &mut C::Ctx,
        index: usize,
        stats: &mut Stats,
        last: impl FnOnce(&mut C::Ctx, &mut C),
    ) {
        self.finish(ctx, index, CloseReason::Normal, stats);
        self.slots
            .discard_with(index, |slot| last(ctx, &mut slot.conn));
    }

    // ----- Calls without a connection -----

    /// The handler's once-per-turn `poll`.
    pub fn poll(&mut self) {
        self.handler.poll(&mut Opener::new(&mut self.requests));
    }

    /// Whether callbacks asked for active opens not yet started.
    pub fn has_requests(&self) -> bool {
        !self.requests.is_empty()
    }

    /// Let requested active opens wait: those for which `hold(remote)` is true move to
    /// `held`, and those in `held` for which it no longer is come back to be started,
    /// ahead of newer requests, in the order they were asked for.
    pub fn hold_requests(
        &mut self,
        held: &mut Vec<(SocketAddr, H::Conn)>,
        hold: impl Fn(SocketAddr) -> bool,
    ) {
        let mut all = std::mem::take(held);
        all.append(&mut self.requests);
        for (remote, state) in all {
            if hold(remote) {
                held.push((remote, state));
            } else {
                self.requests.push((remote, state));
            }
        }
    }

    /// Start the active opens callbacks asked for with `open`, the backend's own
    /// connect; `core` finds this table inside the backend. Opens that fail to start
    /// go back to the handler through `connect_failed`.
    #[inline]
    pub fn start_requested<B>(
        backend: &mut B,
        core: impl Fn(&mut B) -> &mut Self,
        open: impl FnMut(&mut B, SocketAddr, H::Conn) -> OpenResult<H::Conn>,
    ) {
        // Called every loop turn; almost always there is nothing to start.
        if !core(backend).requests.is_empty() {
            Self::start_batch(backend, core, open);
        }
    }

    fn start_batch<B>(
        backend: &mut B,
        core: impl Fn(&mut B) -> &mut Self,
        mut open: impl FnMut(&mut B, SocketAddr, H::Conn) -> OpenResult<H::Conn>,
    ) {
        let mut batch = std::mem::take(&mut core(backend).requests);
        for (remote, state) in batch.drain(..) {
            if let Err((error, state)) = open(backend, remote, state) {
                let app = core(backend);
                let mut opener = Opener::new(&mut app.requests);
                app.handler
                    .connect_failed(&mut opener, remote, state, error);
            }
        }
        let app = core(backend);
        if app.requests.is_empty() {
            // Keep the allocation for the next turn.
            app.requests = batch;
        }
    }

    // ----- Internals -----

    /// Run one callback on a live connection. Returns whether it is still live (the
    /// callback did not end it).
    fn call(
        &mut self,
        ctx: &mut C::Ctx,
        index: usize,
        f: impl FnOnce(&mut H, &mut Conn<'_, H::Conn>),
    ) -> bool {
        let AppCore {
            handler,
            slots,
            requests,
            ..
        } = self;
        match slots.get_mut(index) {
            Some(slot) => slot.call(index, handler, requests, ctx, f),
            None => false,
        }
    }

    /// Offer the unread bytes for as long as the handler takes some. Out of line, so
    /// that `data`, whose common case needs no offer, stays small enough to inline.
    #[inline(never)]
    fn offer_unread(&mut self, ctx: &mut C::Ctx, index: usize) {
        let AppCore {
            handler,
            slots,
            requests,
            ..
        } = self;
        if let Some(slot) = slots.get_mut(index) {
            slot.offer_unread(index, handler, requests, ctx);
        }
    }
}

impl<C: AppConn, S> Slot<C, S> {
    /// Offer this connection's (slot `index`) unread bytes for as long as the handler
    /// takes some.
    fn offer_unread<H: Handler<Conn = S>>(
        &mut self,
        index: usize,
        handler: &mut H,
        requests: &mut Vec<(SocketAddr, S)>,
        ctx: &mut C::Ctx,
    ) {
        while self.is_live() && self.conn.unread_len() > 0 {
            // The bytes leave the connection while the handler reads it, so that it
            // can use its connection handle at the same time.
            let unread = self.conn.take_unread();
            let len = unread.readable().len();
            let mut taken = 0;
            let open = self.call(index, handler, requests, ctx, |h, c| {
                taken = h.data(c, unread.readable())
            });
            let taken = taken.min(len);
            // Nothing taken of a message that wraps the ring's end: the handler may
            // need all of it, so offer it again in one piece.
            let again = taken == 0 && len < unread.len() && open;
            self.conn.put_unread(unread, taken, again, ctx);
            if !again && (taken == 0 || !open) {
                return;
            }
        }
    }

    /// Has application state and was not ended by a callback.
    fn is_live(&self) -> bool {
        self.app.is_some() && !self.ended
    }

    /// Run one callback on this connection (slot `index`) if it is live. Returns whether
    /// it is still live (the callback did not end it).
    #[inline]
    fn call<H: Handler<Conn = S>>(
        &mut self,
        index: usize,
        handler: &mut H,
        requests: &mut Vec<(SocketAddr, S)>,
        ctx: &mut C::Ctx,
        f: impl FnOnce(&mut H, &mut Conn<'_, S>),
    ) -> bool {
        let Some(state) = self.app.as_mut().filter(|_| !self.ended) else {
            return false;
        };
        let id = ConnId::new(index as u32, self.generation);
        let was_closed = self.conn.is_closed();
        self.conn.with_ops(ctx, |ops| {
            f(handler, &mut Conn::new(id, ops, state, requests))
        });
        if !was_closed && self.conn.is_closed() {
            self.ended = true;
        }
        !self.ended
    }
}

impl<H: Handler, C> Index<usize> for AppCore<H, C> {
    type Output = C;
    /// The connection in slot `index`, which must be occupied.
    fn index(&self, index: usize) -> &C {
        &self.slots[index].conn
    }
}

impl<H: Handler, C> IndexMut<usize> for AppCore<H, C> {
    fn index_mut(&mut self, index: usize) -> &mut C {
        &mut self.slots[index].conn
    }
}

#[cfg(test)]
mod tests;
