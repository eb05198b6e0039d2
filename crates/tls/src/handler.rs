//! [`Tls`]: the [`Handler`] that runs TLS on every connection and an application's
//! handler on the plaintext.
//!
//! The backend calls `Tls`; `Tls` feeds received bytes to rustls, gives the
//! application's handler the decrypted bytes through the same callbacks, and gives it
//! a [`Conn`] whose operations encrypt ([`Plain`]). Received ciphertext that rustls
//! cannot take yet (the application paused and rustls holds a full buffer of
//! plaintext) is left unconsumed, so TCP keeps it and its window closes.

use std::io::Read;
use std::net::SocketAddr;
use std::sync::Arc;

use rusty_stack::backend::Connection;
use rusty_stack::{
    Clock, CloseReason, Conn, ConnId, ConnectError, Handler, Instant, Opener, SystemClock,
};

use crate::config::{parse_server_name, TlsAcceptor, TlsConnector};
use crate::info::TlsInfo;
use crate::session::{Closing, Plain, Session, TlsConn, MAX_UNREAD};
use crate::stats::{StatsSink, TlsStats};

/// Size of the worker's buffer that decrypted bytes are offered from.
const SCRATCH: usize = 16 * 1024;

/// One callback's connection, taken apart: its id, TCP's operations on it, its TLS
/// session and the application's state, at the callback's time.
struct Link<'c, S> {
    id: ConnId,
    outer: &'c mut dyn Connection,
    s: &'c mut Session,
    app: &'c mut S,
    now: Instant,
}

/// Where the server name of a connection the application opens comes from: its state.
type ServerNameOf<S> = fn(&S) -> Option<&str>;

/// TLS around an application's handler `H`: a server for accepted connections (with a
/// [`TlsAcceptor`]), a client for opened ones (with a [`TlsConnector`]), or both. One
/// value per worker, like any handler. `C` is the clock its timeouts are measured on:
/// the backend's (a virtual clock in simulations).
pub struct Tls<H: Handler, C: Clock = SystemClock> {
    inner: H,
    acceptor: Option<Arc<TlsAcceptor>>,
    connector: Option<Arc<TlsConnector>>,
    clock: C,
    /// Handshakes in progress on this worker.
    handshakes: usize,
    stats: TlsStats,
    /// Opens the application asked for, to be started as TLS clients.
    requests: Vec<(SocketAddr, H::Conn)>,
    /// The server name of an open the application asked for, from its state.
    server_name_of: Option<ServerNameOf<H::Conn>>,
    scratch: Vec<u8>,
    /// Where the counters go, as worker `.0`'s, when this handler is dropped.
    sink: Option<(usize, StatsSink)>,
}

impl<H: Handler> Tls<H> {
    /// TLS servers for the connections this worker accepts.
    pub fn server(inner: H, acceptor: Arc<TlsAcceptor>) -> Tls<H> {
        Tls::with_clock(inner, Some(acceptor), None, SystemClock::new())
    }

    /// TLS clients for the connections this worker opens.
    pub fn client(inner: H, connector: Arc<TlsConnector>) -> Tls<H> {
        Tls::with_clock(inner, None, Some(connector), SystemClock::new())
    }
}

impl<H: Handler, C: Clock> Tls<H, C> {
    /// Servers for accepted connections (with `acceptor`), clients for opened ones (with
    /// `connector`), timed by `clock`. Without an acceptor, accepted connections are
    /// refused; without a connector, opened ones are aborted once TCP connects.
    pub fn with_clock(
        inner: H,
        acceptor: Option<Arc<TlsAcceptor>>,
        connector: Option<Arc<TlsConnector>>,
        clock: C,
    ) -> Tls<H, C> {
        Tls {
            inner,
            acceptor,
            connector,
            clock,
            handshakes: 0,
            stats: TlsStats::default(),
            requests: Vec::new(),
            server_name_of: None,
            scratch: Vec::new(),
            sink: None,
        }
    }

    /// Leave this worker's counters in `sink`, as worker `index`'s, when the handler is
    /// dropped (when its worker ends).
    pub fn with_sink(mut self, index: usize, sink: StatsSink) -> Tls<H, C> {
        self.sink = Some((index, sink));
        self
    }

    /// Take the server name of each connection the application's handler opens (with
    /// [`Opener::connect`]) from its state: `name_of` returns the name the server must
    /// prove and is asked for by SNI, or `None` for the [`TlsConnector`]'s. A name that
    /// is neither a DNS name nor an IP address fails the open: the application's
    /// `connect_failed` gets [`ConnectError::InvalidAddress`]. Opens started from
    /// outside name theirs with [`TlsConn::with_server_name`].
    pub fn with_server_name_of(mut self, name_of: fn(&H::Conn) -> Option<&str>) -> Tls<H, C> {
        self.server_name_of = Some(name_of);
        self
    }

    /// Measure timeouts on `clock` from now on (the backend's, once it exists).
    pub fn set_clock(&mut self, clock: C) {
        self.clock = clock;
    }

    /// The application's handler.
    pub fn inner(&self) -> &H {
        &self.inner
    }
    /// The application's handler.
    pub fn inner_mut(&mut self) -> &mut H {
        &mut self.inner
    }
    /// This worker's TLS counters.
    pub fn stats(&self) -> &TlsStats {
        &self.stats
    }
    /// Handshakes in progress on this worker.
    pub fn handshakes_in_progress(&self) -> usize {
        self.handshakes
    }

    /// Run one callback of the application's handler on `link`'s connection.
    fn call<R>(
        &mut self,
        link: &mut Link<'_, H::Conn>,
        f: impl FnOnce(&mut H, &mut Conn<'_, H::Conn>) -> R,
    ) -> R {
        let mut plain = Plain {
            outer: &mut *link.outer,
            session: &mut *link.s,
            now: link.now,
        };
        f(
            &mut self.inner,
            &mut Conn::new(link.id, &mut plain, &mut *link.app, &mut self.requests),
        )
    }

    /// Run `f` on a callback's connection if it has a session and application state,
    /// then start the opens the application asked for.
    fn with_link(
        &mut self,
        conn: &mut Conn<'_, TlsConn<H::Conn>>,
        f: impl FnOnce(&mut Self, &mut Link<'_, H::Conn>),
    ) {
        let now = self.clock.now();
        let id = conn.id();
        let (outer, state, opener) = conn.split();
        if let (Some(s), Some(app)) = (state.session.as_deref_mut(), state.app.as_mut()) {
            f(
                self,
                &mut Link {
                    id,
                    outer,
                    s,
                    app,
                    now,
                },
            );
        }
        self.forward(opener);
    }

    /// Start the opens the application asked for, as TLS clients. One whose server
    /// name is malformed goes back to the application; opens it asks for from
    /// `connect_failed` wait for the next callback.
    fn forward(&mut self, opener: &mut Opener<'_, TlsConn<H::Conn>>) {
        if self.requests.is_empty() {
            return;
        }
        let mut batch = std::mem::take(&mut self.requests);
        for (remote, state) in batch.drain(..) {
            let Some(name) = self.server_name_of.and_then(|name_of| name_of(&state)) else {
                opener.connect(remote, TlsConn::new(state));
                continue;
            };
            match parse_server_name(name) {
                Ok(name) => opener.connect(
                    remote,
                    TlsConn {
                        server_name: Some(name),
                        ..TlsConn::new(state)
                    },
                ),
                Err(e) => {
                    log::warn!("cannot open a TLS connection to {remote}: {e}");
                    let mut inner = Opener::new(&mut self.requests);
                    let error = ConnectError::InvalidAddress;
                    self.inner.connect_failed(&mut inner, remote, state, error);
                }
            }
        }
        if self.requests.is_empty() {
            // Keep the allocation.
            self.requests = batch;
        }
    }

    /// The handshake is over, well or not: it no longer counts as in progress.
    fn handshake_over(&mut self, s: &mut Session, ok: bool) {
        if !s.handshaking {
            return;
        }
        s.handshaking = false;
        s.handshake_deadline = None;
        self.handshakes -= 1;
        match ok {
            true => self.stats.handshakes_completed += 1,
            false => self.stats.handshakes_failed += 1,
        }
    }

    /// rustls refused what the peer sent: send the alert it queued, close, count.
    fn fail(&mut self, outer: &mut dyn Connection, s: &mut Session, error: &rustls::Error) {
        log::debug!("TLS error from {}: {error}", outer.peer_addr());
        match error {
            rustls::Error::InvalidMessage(_) | rustls::Error::DecryptError => {
                self.stats.records_rejected += 1
            }
            rustls::Error::AlertReceived(_) => self.stats.alerts_received += 1,
            _ => self.stats.protocol_errors += 1,
        }
        if s.tls.wants_write() {
            self.stats.alerts_sent += 1;
            s.write_tls(outer);
        }
        self.handshake_over(s, false);
        s.die(CloseReason::ProtocolError);
        outer.close();
    }

    /// Feed received ciphertext to rustls and what it decrypts to the application.
    /// Returns how much ciphertext was taken.
    fn receive(&mut self, link: &mut Link<'_, H::Conn>, data: &[u8]) -> usize {
        let mut used = 0;
        loop {
            self.deliver(link);
            let (outer, s) = (&mut *link.outer, &mut *link.s);
            if !s.app_open() || s.peer_notified {
                // Nothing after an error, the application's close or the peer's
                // close_notify reaches anyone.
                return data.len();
            }
            if used == data.len() {
                return used;
            }
            let mut rest = &data[used..];
            let n = match s.tls.read_tls(&mut rest) {
                Ok(n) if n > 0 => n,
                // The application holds rustls's plaintext buffer full: leave the
                // rest with TCP.
                _ => return used,
            };
            let handshake_record = s.records.handshake_record_in(&data[used..used + n]);
            used += n;
            if handshake_record
                && !s.handshaking
                && s.tls.protocol_version() == Some(rustls::ProtocolVersion::TLSv1_2)
            {
                self.stats.renegotiation_attempts += 1;
                s.die(CloseReason::ProtocolError);
                s.request_close(Closing::Close, outer);
                return data.len();
            }
            match s.tls.process_new_packets() {
                Ok(io) => s.peer_notified = io.peer_has_closed(),
                Err(e) => {
                    self.fail(outer, s, &e);
                    return data.len();
                }
            }
            if s.handshaking && !s.tls.is_handshaking() {
                self.established(link);
            }
            link.s.flush(link.outer);
        }
    }

    /// The handshake finished: the application's connection begins.
    fn established(&mut self, link: &mut Link<'_, H::Conn>) {
        self.handshake_over(link.s, true);
        let info = TlsInfo::of(&link.s.tls, link.s.client_name.take());
        if info.resumed() {
            self.stats.handshakes_resumed += 1;
        }
        link.s.info = Some(info);
        self.call(link, |h, c| h.connected(c));
    }

    /// Offer decrypted bytes to the application for as long as it takes some; then, once
    /// the peer's close_notify arrived, tell it the peer closed.
    fn deliver(&mut self, link: &mut Link<'_, H::Conn>) {
        // Whether the unread bytes are worth offering again without new ones: the
        // application took some of them last time.
        let mut progress = true;
        while link.s.app_open() && !link.s.handshaking {
            if link.s.unread.is_empty() {
                let mut scratch = std::mem::take(&mut self.scratch);
                scratch.resize(SCRATCH, 0);
                let n = link.s.tls.reader().read(&mut scratch).unwrap_or(0);
                if n == 0 {
                    self.scratch = scratch;
                    break;
                }
                let taken = self.call(link, |h, c| h.data(c, &scratch[..n]));
                let taken = taken.min(n);
                link.s.unread.extend_from_slice(&scratch[taken..n]);
                self.scratch = scratch;
                progress = taken > 0;
            } else {
                // Append what rustls holds, so that a message split over records is
                // offered in one piece.
                let old = link.s.unread.len();
                link.s.unread.resize(MAX_UNREAD.max(old), 0);
                let added = link
                    .s
                    .tls
                    .reader()
                    .read(&mut link.s.unread[old..])
                    .unwrap_or(0);
                link.s.unread.truncate(old + added);
                if added == 0 && !progress {
                    break;
                }
                let unread = std::mem::take(&mut link.s.unread);
                let taken = self.call(link, |h, c| h.data(c, &unread));
                let taken = taken.min(unread.len());
                link.s.unread = unread;
                link.s.unread.drain(..taken);
                if link.s.unread.is_empty() {
                    // Idle connections hold no buffer.
                    link.s.unread = Vec::new();
                }
                progress = taken > 0;
            }
        }
        if link.s.peer_notified && !link.s.told_peer_closed {
            link.s.told_peer_closed = true;
            self.stats.close_notify_received += 1;
            if link.s.app_open() {
                self.call(link, |h, c| h.peer_closed(c));
            }
        }
    }
}

impl<H: Handler, C: Clock> Drop for Tls<H, C> {
    fn drop(&mut self) {
        if let Some((index, sink)) = &self.sink {
            if let Ok(mut v) = sink.lock() {
                v.push((*index, self.stats.clone()));
            }
        }
    }
}

impl<H: Handler, C: Clock> Handler for Tls<H, C> {
    type Conn = TlsConn<H::Conn>;

    fn accept(&mut self, local: SocketAddr, remote: SocketAddr) -> Option<Self::Conn> {
        let acceptor = self.acceptor.as_ref()?;
        if self.handshakes >= acceptor.settings().max_handshakes {
            self.stats.handshakes_refused += 1;
            return None;
        }
        let deadline = self.clock.now() + acceptor.settings().handshake_timeout;
        let tls = match rustls::ServerConnection::new(acceptor.config()) {
            Ok(tls) => tls,
            Err(e) => {
                log::warn!("cannot start a TLS server connection: {e}");
                return None;
            }
        };
        let app = self.inner.accept(local, remote)?;
        self.handshakes += 1;
        Some(TlsConn {
            session: Some(Session::new(tls.into(), deadline)),
            ..TlsConn::new(app)
        })
    }

    fn connected(&mut self, conn: &mut Conn<'_, Self::Conn>) {
        let now = self.clock.now();
        let (outer, state, _) = conn.split();
        if state.session.is_none() {
            let Some(connector) = &self.connector else {
                log::warn!("no TLS client configuration: aborting an opened connection");
                outer.abort();
                return;
            };
            let deadline = now + connector.settings().handshake_timeout;
            match connector.start(state.server_name.as_ref()) {
                Ok((tls, name)) => {
                    let mut s = Session::new(tls.into(), deadline);
                    s.client_name = Some(name);
                    state.session = Some(s);
                    self.handshakes += 1;
                }
                Err(e) => {
                    log::warn!("cannot start a TLS client connection: {e}");
                    outer.abort();
                    return;
                }
            }
        }
        if let Some(s) = state.session.as_deref_mut() {
            s.arm(outer, now);
            s.flush(outer);
        }
    }

    fn data(&mut self, conn: &mut Conn<'_, Self::Conn>, data: &[u8]) -> usize {
        let mut used = data.len();
        self.with_link(conn, |tls, link| used = tls.receive(link, data));
        used
    }

    fn writable(&mut self, conn: &mut Conn<'_, Self::Conn>) {
        self.with_link(conn, |tls, link| {
            link.s.flush(link.outer);
            if link.s.want_writable && link.s.app_open() {
                if link.s.room(link.outer) > 0 {
                    link.s.want_writable = false;
                    tls.call(link, |h, c| h.writable(c));
                } else {
                    link.outer.notify_writable();
                }
            }
            // The application may have paused for want of send space.
            tls.deliver(link);
        });
    }

    fn receive_resumed(&mut self, conn: &mut Conn<'_, Self::Conn>) {
        self.with_link(conn, |tls, link| {
            if link.s.handshaking || !link.s.app_open() {
                return;
            }
            // A layer inside holds bytes older than the ones held here: it offers them
            // first. Ciphertext TCP holds comes after both.
            tls.call(link, |h, c| h.receive_resumed(c));
            tls.deliver(link);
        });
    }

    fn peer_closed(&mut self, conn: &mut Conn<'_, Self::Conn>) {
        self.with_link(conn, |tls, link| {
            if link.s.handshaking {
                tls.handshake_over(link.s, false);
                link.s.die(CloseReason::Truncated);
                link.outer.close();
                return;
            }
            tls.deliver(link);
            if !link.s.peer_notified && link.s.app_open() {
                // TCP ended without close_notify: what arrived may have been cut
                // short by whoever sent the FIN (RFC 8446 §6.1).
                tls.stats.truncations += 1;
                link.s.end.get_or_insert(CloseReason::Truncated);
                link.s.request_close(Closing::Close, link.outer);
            }
        });
    }

    fn timer(&mut self, conn: &mut Conn<'_, Self::Conn>) {
        self.with_link(conn, |tls, link| {
            let now = link.now;
            link.s.armed = None;
            if link.s.handshaking && link.s.handshake_deadline.is_some_and(|d| d <= now) {
                tls.stats.handshake_timeouts += 1;
                tls.handshake_over(link.s, false);
                link.s.die(CloseReason::TimedOut);
                link.outer.abort();
                return;
            }
            if link.s.app_deadline.is_some_and(|d| d <= now) {
                link.s.app_deadline = None;
                if link.s.app_open() {
                    tls.call(link, |h, c| h.timer(c));
                }
            }
            link.s.arm(link.outer, now);
        });
    }

    fn closed(
        &mut self,
        opener: &mut Opener<'_, Self::Conn>,
        state: Self::Conn,
        reason: CloseReason,
    ) {
        let TlsConn { app, session, .. } = state;
        let mut reason = reason;
        if let Some(mut s) = session {
            self.handshake_over(&mut s, false);
            reason = s.end.unwrap_or(reason);
            self.stats.plaintext_discarded += s.unconsumed() as u64;
        }
        if let Some(app) = app {
            self.inner
                .closed(&mut Opener::new(&mut self.requests), app, reason);
        }
        self.forward(opener);
    }

    fn connect_failed(
        &mut self,
        opener: &mut Opener<'_, Self::Conn>,
        remote: SocketAddr,
        state: Self::Conn,
        error: ConnectError,
    ) {
        if let Some(app) = state.app {
            self.inner
                .connect_failed(&mut Opener::new(&mut self.requests), remote, app, error);
        }
        self.forward(opener);
    }

    fn poll(&mut self, opener: &mut Opener<'_, Self::Conn>) {
        self.inner.poll(&mut Opener::new(&mut self.requests));
        self.forward(opener);
    }
}
