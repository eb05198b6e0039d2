//! One TLS connection: its state ([`TlsConn`], [`Session`]) and the plaintext
//! [`Connection`] the application's handler is given over it ([`Plain`]).
//!
//! Plaintext the application sends is encrypted only as far as the TCP send buffer has
//! room for the records, so rustls holds little ciphertext and the application sees
//! TCP's back-pressure as its own: a short `send`, then `writable`. Shared bytes
//! (`send_shared`) are always accepted, kept by reference and encrypted as room frees.

use std::any::{Any, TypeId};
use std::collections::VecDeque;
use std::io::{Read, Write};
use std::net::SocketAddr;
use std::time::Duration;

use bytes::{Buf, Bytes};
use rustls::pki_types::ServerName;
use rusty_stack::backend::Connection;
use rusty_stack::{CloseReason, Instant, Keepalive, SendError};

use crate::config::{parse_server_name, ConfigError};
use crate::info::TlsInfo;

/// Largest plaintext of one record (RFC 8446 §5.1).
const RECORD: usize = 16 * 1024;
/// Most bytes a record adds to its plaintext: header 5, TLS 1.2's explicit nonce 8,
/// tag 16, TLS 1.3's inner content type 1, rounded up.
const OVERHEAD: usize = 32;
/// Bound on ciphertext rustls may hold for one connection (its `set_buffer_limit`);
/// what we encrypt is sized to the TCP send buffer, so this is only a backstop.
const TLS_BUFFER: usize = 64 * 1024;
/// Bound on decrypted bytes the application left unconsumed, kept here so that they
/// can be offered again together with what follows them.
pub(crate) const MAX_UNREAD: usize = 64 * 1024;

/// Plaintext that fits, once encrypted, in `space` bytes of the send buffer.
fn plaintext_room(space: usize) -> usize {
    let records = space.div_ceil(RECORD + OVERHEAD);
    space.saturating_sub(records * OVERHEAD)
}

/// A TLS connection's per-connection state, kept next to the TCP connection: the
/// application's own state and the TLS session.
pub struct TlsConn<S> {
    pub(crate) app: Option<S>,
    pub(crate) session: Option<Box<Session>>,
    /// For a client: the name the server must prove, if not the connector's.
    pub(crate) server_name: Option<ServerName<'static>>,
}

impl<S: std::fmt::Debug> std::fmt::Debug for TlsConn<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsConn")
            .field("app", &self.app)
            .field("handshaking", &self.session.as_ref().map(|s| s.handshaking))
            .finish()
    }
}

impl<S> TlsConn<S> {
    /// The state of a TLS client connection to open (with the backend's `connect` or
    /// [`Opener::connect`](rusty_stack::Opener::connect)); `state` is the application's.
    /// The handshake starts once TCP connects.
    pub fn new(state: S) -> TlsConn<S> {
        TlsConn {
            app: Some(state),
            session: None,
            server_name: None,
        }
    }

    /// [`TlsConn::new`] for a connection whose server must prove `server_name` (a DNS
    /// name, sent as SNI, or an IP address) instead of the
    /// [`TlsConnector`](crate::TlsConnector)'s name. An error if the name is neither.
    pub fn with_server_name(state: S, server_name: &str) -> Result<TlsConn<S>, ConfigError> {
        Ok(TlsConn {
            server_name: Some(parse_server_name(server_name)?),
            ..TlsConn::new(state)
        })
    }

    /// The application's state.
    pub fn app(&self) -> Option<&S> {
        self.app.as_ref()
    }

    /// The application protocol ALPN settled on, once the handshake has.
    pub fn alpn_protocol(&self) -> Option<&[u8]> {
        self.session.as_ref()?.tls.alpn_protocol()
    }

    /// What the handshake settled, once it is over.
    pub fn info(&self) -> Option<&TlsInfo> {
        self.session.as_ref()?.info.as_ref()
    }
}

/// What the application asked for its sending side.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Closing {
    Open,
    /// `shutdown_write`: `close_notify`, then FIN; keep receiving.
    Shutdown,
    /// `close`: `close_notify`, then close; nothing more reaches the application.
    Close,
}

/// The TLS side of one connection.
pub(crate) struct Session {
    pub(crate) tls: rustls::Connection,
    /// Shared bytes accepted but not yet encrypted, in order.
    shared: VecDeque<Bytes>,
    /// Decrypted bytes the application has not consumed yet.
    pub(crate) unread: Vec<u8>,
    pub(crate) records: crate::record::RecordScanner,
    /// Counted among the worker's handshakes in progress.
    pub(crate) handshaking: bool,
    closing: Closing,
    /// `close_notify` is queued with rustls.
    notify_queued: bool,
    /// The closing the application asked for has reached TCP.
    closed_out: bool,
    pub(crate) want_writable: bool,
    /// The peer's `close_notify` arrived.
    pub(crate) peer_notified: bool,
    /// The application was told (`peer_closed`).
    pub(crate) told_peer_closed: bool,
    /// Ended by the layer (error, timeout, truncation, abort): nothing more reaches
    /// the application but `closed`.
    pub(crate) dead: bool,
    /// The reason the application gets instead of the transport's.
    pub(crate) end: Option<CloseReason>,
    pub(crate) handshake_deadline: Option<Instant>,
    pub(crate) app_deadline: Option<Instant>,
    /// When the connection's one timer is armed to fire.
    pub(crate) armed: Option<Instant>,
    /// For a client: the name the server must prove.
    pub(crate) client_name: Option<String>,
    /// What the handshake settled, once it is over.
    pub(crate) info: Option<TlsInfo>,
}

impl Session {
    pub(crate) fn new(mut tls: rustls::Connection, handshake_deadline: Instant) -> Box<Session> {
        tls.set_buffer_limit(Some(TLS_BUFFER));
        Box::new(Session {
            tls,
            shared: VecDeque::new(),
            unread: Vec::new(),
            records: Default::default(),
            handshaking: true,
            closing: Closing::Open,
            notify_queued: false,
            closed_out: false,
            want_writable: false,
            peer_notified: false,
            told_peer_closed: false,
            dead: false,
            end: None,
            handshake_deadline: Some(handshake_deadline),
            app_deadline: None,
            armed: None,
            client_name: None,
            info: None,
        })
    }

    /// The application may still be offered data and callbacks.
    pub(crate) fn app_open(&self) -> bool {
        !self.dead && self.closing != Closing::Close
    }

    /// End the connection for the application, with `reason` for its `closed`.
    pub(crate) fn die(&mut self, reason: CloseReason) {
        self.dead = true;
        self.end.get_or_insert(reason);
    }

    /// Move the ciphertext rustls holds into the send buffer; whether all of it went.
    pub(crate) fn write_tls(&mut self, outer: &mut dyn Connection) -> bool {
        while self.tls.wants_write() {
            match self.tls.write_tls(&mut Out(outer)) {
                Ok(n) if n > 0 => {}
                _ => return false,
            }
        }
        true
    }

    /// Send what is queued: ciphertext, then shared plaintext as room allows, then the
    /// closing the application asked for. Asks for `writable` when something is left.
    pub(crate) fn flush(&mut self, outer: &mut dyn Connection) {
        if self.closed_out {
            return;
        }
        if !self.flush_data(outer) {
            outer.notify_writable();
            return;
        }
        if self.closing != Closing::Open {
            if !self.notify_queued {
                self.tls.send_close_notify();
                self.notify_queued = true;
            }
            if !self.write_tls(outer) {
                outer.notify_writable();
                return;
            }
            match self.closing {
                Closing::Shutdown => outer.shutdown_write(),
                _ => outer.close(),
            }
            self.closed_out = true;
        }
    }

    /// Ciphertext and shared plaintext into the send buffer; whether all of it went.
    fn flush_data(&mut self, outer: &mut dyn Connection) -> bool {
        loop {
            if !self.write_tls(outer) {
                return false;
            }
            let Some(front) = self.shared.front_mut() else {
                return true;
            };
            let room = plaintext_room(outer.send_space()).min(front.len());
            let n = match room {
                0 => 0,
                _ => self.tls.writer().write(&front[..room]).unwrap_or(0),
            };
            if n == 0 {
                return false;
            }
            front.advance(n);
            if front.is_empty() {
                self.shared.pop_front();
            }
        }
    }

    /// Plaintext `send` would take now: none while anything waits to be encrypted or
    /// written, or after the application closed its side.
    pub(crate) fn room(&self, outer: &dyn Connection) -> usize {
        let open = self.closing == Closing::Open && !self.dead;
        match open && self.shared.is_empty() && !self.tls.wants_write() {
            true => plaintext_room(outer.send_space()),
            false => 0,
        }
    }

    /// The application asked to close (`Close`) or half-close (`Shutdown`).
    pub(crate) fn request_close(&mut self, kind: Closing, outer: &mut dyn Connection) {
        self.closing = self.closing.max(kind);
        self.flush(outer);
    }

    /// Arm the connection's timer for the earlier of the handshake's and the
    /// application's deadlines, unless it is armed to fire sooner already (a timer
    /// that fires early is re-armed then).
    pub(crate) fn arm(&mut self, outer: &mut dyn Connection, now: Instant) {
        let want = match (self.handshake_deadline, self.app_deadline) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        if let Some(want) = want {
            if self.armed.is_none_or(|armed| want < armed) {
                outer.set_timer(Some(want.saturating_duration_since(now)));
                self.armed = Some(want);
            }
        }
    }

    /// Decrypted bytes the application never consumed.
    pub(crate) fn unconsumed(&mut self) -> usize {
        let mut rest = 0;
        let mut sink = [0u8; 1024];
        while let Ok(n @ 1..) = self.tls.reader().read(&mut sink) {
            rest += n;
        }
        self.unread.len() + rest
    }
}

/// The send buffer of the TCP connection, as rustls's output.
struct Out<'c>(&'c mut dyn Connection);

impl Write for Out<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0
            .send(buf)
            .map_err(|_| std::io::ErrorKind::BrokenPipe.into())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The plaintext connection the application's handler uses: TCP's operations with
/// TLS in between.
pub(crate) struct Plain<'c> {
    pub(crate) outer: &'c mut dyn Connection,
    pub(crate) session: &'c mut Session,
    pub(crate) now: Instant,
}

impl Plain<'_> {
    fn check_open(&self) -> Result<(), SendError> {
        match self.session.closing == Closing::Open && !self.session.dead {
            true => Ok(()),
            false => Err(SendError::Closed),
        }
    }
}

impl Connection for Plain<'_> {
    fn local_addr(&self) -> SocketAddr {
        self.outer.local_addr()
    }
    fn peer_addr(&self) -> SocketAddr {
        self.outer.peer_addr()
    }
    fn send_space(&self) -> usize {
        self.session.room(self.outer)
    }
    fn send(&mut self, data: &[u8]) -> Result<usize, SendError> {
        self.check_open()?;
        let s = &mut *self.session;
        let mut sent = 0;
        if s.flush_data(self.outer) {
            let room = plaintext_room(self.outer.send_space()).min(data.len());
            if room > 0 {
                sent = s.tls.writer().write(&data[..room]).unwrap_or(0);
            }
        }
        // Records that did not fit after all go out on `writable`.
        let flushed = s.write_tls(self.outer);
        s.want_writable |= sent < data.len();
        if !flushed || sent < data.len() {
            self.outer.notify_writable();
        }
        Ok(sent)
    }
    fn send_shared(&mut self, data: Bytes) -> Result<(), SendError> {
        self.check_open()?;
        if !data.is_empty() {
            self.session.shared.push_back(data);
        }
        self.session.flush(self.outer);
        Ok(())
    }
    fn notify_writable(&mut self) {
        self.session.want_writable = true;
        self.outer.notify_writable();
    }
    fn set_timer(&mut self, after: Option<Duration>) {
        self.session.app_deadline = after.map(|d| self.now + d);
        self.session.arm(self.outer, self.now);
    }
    fn set_user_timeout(&mut self, timeout: Option<Duration>) {
        self.outer.set_user_timeout(timeout);
    }
    fn set_keepalive(&mut self, keepalive: Option<Keepalive>) {
        self.outer.set_keepalive(keepalive);
    }
    fn unacked_len(&self) -> usize {
        let shared: usize = self.session.shared.iter().map(Bytes::len).sum();
        // rustls does not say how much ciphertext it holds, only whether it holds any.
        let held = usize::from(self.session.tls.wants_write());
        self.outer.unacked_len() + shared + held
    }
    fn close(&mut self) {
        self.session.request_close(Closing::Close, self.outer);
    }
    fn shutdown_write(&mut self) {
        self.session.request_close(Closing::Shutdown, self.outer);
    }
    fn abort(&mut self) {
        self.session.die(CloseReason::Aborted);
        self.outer.abort();
    }
    fn layer_info(&self, ty: TypeId) -> Option<&dyn Any> {
        if ty == TypeId::of::<TlsInfo>() {
            return self.session.info.as_ref().map(|i| i as &dyn Any);
        }
        self.outer.layer_info(ty)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn room_leaves_space_for_record_overhead() {
        assert_eq!(plaintext_room(0), 0);
        assert_eq!(plaintext_room(OVERHEAD), 0);
        assert_eq!(plaintext_room(100), 100 - OVERHEAD);
        let space = 4 * (RECORD + OVERHEAD);
        assert_eq!(plaintext_room(space), 4 * RECORD);
        assert_eq!(plaintext_room(space + 1), 4 * RECORD + 1 - OVERHEAD);
    }
}
