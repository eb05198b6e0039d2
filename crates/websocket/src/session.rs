//! One WebSocket connection after (and during) the opening handshake, for either role:
//! its state ([`WsConn`]), the frame loop that turns received bytes into messages and
//! control replies, the close handshake (RFC 6455 §7) and timeouts, and the handle
//! through which the application sends ([`WsHandle`]).

use std::net::SocketAddr;

use bytes::Bytes;
use rusty_stack::{Conn, SendError};

use crate::app::{CloseInfo, Message, WsApp};
use crate::close;
use crate::config::WsConfig;
use crate::error::ProtocolError;
use crate::extension::MessageCodec;
use crate::frame::{extend_masked, FrameHeader, OpCode, MAX_CONTROL_PAYLOAD, MAX_HEADER, RSV1};
use crate::handshake::{ClientRequest, HeadBuffer};
use crate::message::{Assembler, MessageKind};
use crate::parser::{FrameParser, Role, Step};
use crate::stats::WsStats;

/// The accessors both roles' handlers share, for a type with `app`, `cfg` and `stats`.
macro_rules! endpoint_accessors {
    () => {
        /// This worker's counters.
        pub fn stats(&self) -> &WsStats {
            &self.stats
        }

        /// The application.
        pub fn app(&self) -> &A {
            &self.app
        }

        /// The application, mutably.
        pub fn app_mut(&mut self) -> &mut A {
            &mut self.app
        }

        /// The configuration.
        pub fn config(&self) -> &WsConfig {
            &self.cfg
        }

        fn endpoint(&mut self) -> Endpoint<'_, A> {
            Endpoint {
                app: &mut self.app,
                stats: &mut self.stats,
                cfg: &self.cfg,
            }
        }
    };
}
pub(crate) use endpoint_accessors;

/// The `Handler` callbacks both roles share, for an impl block whose type has
/// `handshake(conn, data) -> usize` (its side of the opening handshake) and
/// `endpoint() -> Endpoint` (the frame loop).
macro_rules! handler_callbacks {
    () => {
        fn data(&mut self, conn: &mut Conn<'_, Self::Conn>, data: &[u8]) -> usize {
            if conn.state().phase == Phase::Handshake {
                return self.handshake(conn, data);
            }
            self.endpoint().frames(conn, data)
        }

        fn peer_closed(&mut self, conn: &mut Conn<'_, Self::Conn>) {
            self.endpoint().peer_closed(conn);
        }

        fn timer(&mut self, conn: &mut Conn<'_, Self::Conn>) {
            self.endpoint().timer(conn);
        }

        fn closed(
            &mut self,
            _opener: &mut rusty_stack::Opener<'_, Self::Conn>,
            state: Self::Conn,
            reason: rusty_stack::CloseReason,
        ) {
            self.endpoint().closed(state, &format!("TCP: {reason:?}"));
        }

        fn connect_failed(
            &mut self,
            _opener: &mut rusty_stack::Opener<'_, Self::Conn>,
            _remote: std::net::SocketAddr,
            state: Self::Conn,
            error: rusty_stack::ConnectError,
        ) {
            self.endpoint().closed(state, &format!("connect: {error}"));
        }
    };
}
pub(crate) use handler_callbacks;

/// Where a connection is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Phase {
    /// Reading the opening handshake (server: the request; client: the response).
    Handshake,
    /// Messages flow both ways.
    Open,
    /// We sent a close frame and wait for the peer's (§7.1.2); its data messages are
    /// dropped.
    Closing,
    /// The close handshake is over or the connection failed: input is discarded, the
    /// TCP connection is closing (a client waits for the server to close it, §7.1.1).
    Closed,
}

/// The client role's handshake data.
#[derive(Debug)]
pub(crate) struct ClientSide {
    pub(crate) request: ClientRequest,
    pub(crate) key: String,
}

/// Per-connection state of a WebSocket endpoint (the `Handler::Conn` of
/// [`WsServer`](crate::WsServer) and [`WsClient`](crate::WsClient)); the application's own
/// state `S` lives inside it.
pub struct WsConn<S> {
    pub(crate) phase: Phase,
    /// The opening handshake completed.
    opened: bool,
    pub(crate) role: Role,
    pub(crate) head: HeadBuffer,
    parser: FrameParser,
    msg: Assembler,
    /// The current frame is a control frame; its payload collects in `ctrl`.
    in_control: bool,
    ctrl: [u8; MAX_CONTROL_PAYLOAD],
    ctrl_len: usize,
    /// The negotiated per-message extension, if any.
    codec: Option<Box<dyn MessageCodec>>,
    pub(crate) app: Option<S>,
    pub(crate) protocol: Option<String>,
    close_sent: bool,
    /// We are in the middle of sending a fragmented message.
    sending_fragments: bool,
    /// The code and reason of the peer's close frame (1005 for none).
    received_close: Option<(u16, String)>,
    /// Why we ended the connection, when we did (failure, timeout).
    local_close: Option<(u16, String)>,
    /// Bytes sent since the send queue was last measured.
    out_since_check: usize,
    paused: bool,
    /// Where a client's frame masks come from (client role only).
    masks: Option<Box<MaskKeys>>,
    pub(crate) client: Option<Box<ClientSide>>,
}

impl<S> WsConn<S> {
    pub(crate) fn new(role: Role, cfg: &WsConfig, app: Option<S>) -> WsConn<S> {
        WsConn {
            phase: Phase::Handshake,
            opened: false,
            role,
            head: HeadBuffer::default(),
            parser: FrameParser::new(role, cfg.max_frame as u64),
            msg: Assembler::new(cfg.max_message),
            in_control: false,
            ctrl: [0; MAX_CONTROL_PAYLOAD],
            ctrl_len: 0,
            codec: None,
            app,
            protocol: None,
            close_sent: false,
            sending_fragments: false,
            received_close: None,
            local_close: None,
            out_since_check: 0,
            paused: false,
            masks: None,
            client: None,
        }
    }

    /// Install a negotiated per-message codec: RSV1 becomes legal on first frames.
    pub(crate) fn set_codec(&mut self, codec: Box<dyn MessageCodec>) {
        self.codec = Some(codec);
        self.parser.allow_rsv(RSV1);
    }

    /// Mask this client connection's frames with keys from `masks`.
    pub(crate) fn set_masks(&mut self, masks: MaskKeys) {
        self.masks = Some(Box::new(masks));
    }

    /// The key the next frame this client connection sends will be masked with.
    #[cfg(test)]
    pub(crate) fn next_mask(&mut self) -> Option<[u8; 4]> {
        self.masks.as_mut().map(|m| m.next())
    }

    pub(crate) fn set_local_close(&mut self, code: u16, reason: String) {
        self.local_close = Some((code, reason));
    }

    /// The application state, once the handshake has created it.
    pub fn app_state(&mut self) -> Option<&mut S> {
        self.app.as_mut()
    }

    /// The subprotocol agreed in the handshake.
    pub fn protocol(&self) -> Option<&str> {
        self.protocol.as_deref()
    }
}

/// Why a send through [`WsHandle`] was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum WsSendError {
    /// The connection is not open: the handshake is not done, or a close frame was
    /// sent (§5.5.1: no data after it).
    NotOpen,
    /// A control frame payload over 125 bytes (§5.5).
    ControlTooLong,
    /// The TCP connection's sending side is closed.
    Closed,
    /// A whole message (or the first fragment of another) while a fragmented message
    /// is unfinished (§5.4: fragments of different messages must not interleave), or a
    /// continuation with none started.
    FragmentInProgress,
    /// A close status that must not be sent (§7.4.1: 1005, 1006, 1015, reserved or
    /// unassigned codes).
    InvalidCloseCode,
}

impl From<SendError> for WsSendError {
    fn from(_: SendError) -> WsSendError {
        WsSendError::Closed
    }
}

/// A payload to send: borrowed (copied into the send buffer) or shared (queued by
/// reference, never copied on the server side).
enum Payload<'a> {
    Borrowed(&'a [u8]),
    Shared(Bytes),
}

impl Payload<'_> {
    fn as_slice(&self) -> &[u8] {
        match self {
            Payload::Borrowed(b) => b,
            Payload::Shared(b) => b,
        }
    }
}

/// Queue all of `data`: copied while the send buffer has room, the rest by reference.
pub(crate) fn send_all<S>(conn: &mut Conn<'_, WsConn<S>>, data: &[u8]) -> Result<(), SendError> {
    let n = conn.send(data)?;
    if n < data.len() {
        conn.send_shared(Bytes::copy_from_slice(&data[n..]))?;
    }
    Ok(())
}

/// Write one frame. The header is built on the stack; a server's shared payload is
/// queued without a copy; a client's payload is masked into one buffer (§5.3 needs a
/// fresh key per frame, so the bytes change anyway).
fn write_frame<S>(
    conn: &mut Conn<'_, WsConn<S>>,
    (opcode, fin, rsv): (OpCode, bool, u8),
    payload: Payload<'_>,
) -> Result<(), SendError> {
    let st = conn.state();
    let len = payload.as_slice().len();
    let mask = match (st.role, st.masks.as_mut()) {
        (Role::Client, Some(keys)) => Some(keys.next()),
        // A client connection made without keys (not through `WsClient`): masked all
        // the same, with a key of its own from the OS.
        (Role::Client, None) => Some(st.masks.insert(Box::new(MaskKeys::from_os())).next()),
        (Role::Server, _) => None,
    };
    st.out_since_check += len + MAX_HEADER;
    let h = FrameHeader {
        fin,
        rsv,
        opcode,
        mask,
        len: len as u64,
    };
    let mut hdr = [0u8; MAX_HEADER];
    let n = h.encode(&mut hdr);
    match (mask, payload) {
        (None, Payload::Borrowed(p)) => {
            send_all(conn, &hdr[..n])?;
            send_all(conn, p)
        }
        (None, Payload::Shared(b)) => {
            send_all(conn, &hdr[..n])?;
            if b.is_empty() {
                return Ok(());
            }
            conn.send_shared(b)
        }
        (Some(key), p) => {
            let mut v = Vec::with_capacity(n + len);
            v.extend_from_slice(&hdr[..n]);
            extend_masked(&mut v, p.as_slice(), Some(key), 0);
            let sent = conn.send(&v)?;
            if sent < v.len() {
                conn.send_shared(Bytes::from(v).slice(sent..))?;
            }
            Ok(())
        }
    }
}

/// Send a data message (compressed when an extension was negotiated).
fn send_message<S>(
    conn: &mut Conn<'_, WsConn<S>>,
    stats: &mut WsStats,
    kind: MessageKind,
    payload: Payload<'_>,
) -> Result<(), WsSendError> {
    let st = conn.state();
    if st.phase != Phase::Open {
        return Err(WsSendError::NotOpen);
    }
    if st.sending_fragments {
        return Err(WsSendError::FragmentInProgress);
    }
    let len = payload.as_slice().len();
    stats.messages_out += 1;
    stats.bytes_out += len as u64;
    // RFC 7692 §6.1: each message may go compressed or not; the codec decides by size.
    // Compressing writes a new buffer, so a shared payload is not queued by reference.
    if let Some(codec) = st.codec.as_mut().filter(|c| c.should_compress(len)) {
        let mut z = Vec::new();
        if codec.compress(payload.as_slice(), &mut z).is_ok() {
            stats.compressed_out += 1;
            let z = Payload::Shared(Bytes::from(z));
            return Ok(write_frame(conn, (kind.opcode(), true, RSV1), z)?);
        }
    }
    Ok(write_frame(conn, (kind.opcode(), true, 0), payload)?)
}

/// Send our close frame (once) and enter `next`.
fn send_close<S>(
    conn: &mut Conn<'_, WsConn<S>>,
    stats: &mut WsStats,
    code: Option<u16>,
    reason: &str,
    next: Phase,
) {
    let st = conn.state();
    st.phase = next;
    if st.close_sent {
        return;
    }
    st.close_sent = true;
    stats.closes_out += 1;
    let mut buf = [0u8; MAX_CONTROL_PAYLOAD];
    let n = code.map_or(0, |c| close::encode(c, reason, &mut buf));
    // A send side already closed leaves nothing to tell the peer.
    let _ = write_frame(conn, (OpCode::Close, true, 0), Payload::Borrowed(&buf[..n]));
}

/// Fail the connection (§7.1.7): close frame with the status for `e`, then close TCP.
fn fail<S>(conn: &mut Conn<'_, WsConn<S>>, stats: &mut WsStats, e: ProtocolError) {
    stats.errors[e.index()] += 1;
    log::debug!("websocket {}: failing: {e}", conn.peer_addr());
    let st = conn.state();
    st.local_close = Some((e.close_code(), e.as_str().to_string()));
    if st.phase == Phase::Handshake {
        st.phase = Phase::Closed;
    } else {
        send_close(conn, stats, Some(e.close_code()), e.as_str(), Phase::Closed);
    }
    conn.close();
}

/// The application's view of one connection during a callback.
pub struct WsHandle<'h, 'c, S> {
    conn: &'h mut Conn<'c, WsConn<S>>,
    state: &'h mut S,
    stats: &'h mut WsStats,
}

impl<S> WsHandle<'_, '_, S> {
    /// This connection's application state.
    pub fn state(&mut self) -> &mut S {
        self.state
    }

    /// The peer's address.
    pub fn peer_addr(&self) -> SocketAddr {
        self.conn.peer_addr()
    }

    /// Our address.
    pub fn local_addr(&self) -> SocketAddr {
        self.conn.local_addr()
    }

    /// The subprotocol agreed in the handshake, if any.
    pub fn protocol(&mut self) -> Option<&str> {
        self.conn.state().protocol.as_deref()
    }

    /// Whether messages can still be sent (no close frame sent yet).
    pub fn is_open(&mut self) -> bool {
        self.conn.state().phase == Phase::Open
    }

    /// The counters of this worker.
    pub fn stats(&self) -> &WsStats {
        self.stats
    }

    /// Send a text message, copying it (compressed, with RSV1, when the connection
    /// negotiated permessage-deflate and the codec finds it long enough).
    pub fn send_text(&mut self, text: &str) -> Result<(), WsSendError> {
        send_message(
            self.conn,
            self.stats,
            MessageKind::Text,
            Payload::Borrowed(text.as_bytes()),
        )
    }

    /// Send a binary message, copying it.
    pub fn send_binary(&mut self, data: &[u8]) -> Result<(), WsSendError> {
        send_message(
            self.conn,
            self.stats,
            MessageKind::Binary,
            Payload::Borrowed(data),
        )
    }

    /// Send a message whose bytes the application holds as [`Bytes`]: the server role
    /// queues them by reference, without a copy, unless the message is compressed
    /// (permessage-deflate negotiated and the message long enough): compressing
    /// necessarily writes a new buffer, which is queued instead. For [`MessageKind::Text`] they must be
    /// UTF-8 (the peer fails the connection otherwise); [`Message::into_bytes`] of a
    /// received text message is.
    pub fn send_shared(&mut self, kind: MessageKind, data: Bytes) -> Result<(), WsSendError> {
        send_message(self.conn, self.stats, kind, Payload::Shared(data))
    }

    /// Send one fragment of a message (§5.4), copying it: the first with `first` set
    /// (it gives the message's `kind`), the last with `last` set; control frames may go
    /// between them, other messages may not. Fragments are sent uncompressed.
    pub fn send_fragment(
        &mut self,
        kind: MessageKind,
        data: &[u8],
        first: bool,
        last: bool,
    ) -> Result<(), WsSendError> {
        let st = self.conn.state();
        if st.phase != Phase::Open {
            return Err(WsSendError::NotOpen);
        }
        if first == st.sending_fragments {
            return Err(WsSendError::FragmentInProgress);
        }
        st.sending_fragments = !last;
        let op = if first {
            kind.opcode()
        } else {
            OpCode::Continuation
        };
        if last {
            self.stats.messages_out += 1;
        }
        self.stats.bytes_out += data.len() as u64;
        Ok(write_frame(
            self.conn,
            (op, last, 0),
            Payload::Borrowed(data),
        )?)
    }

    /// Send a ping (at most 125 bytes); the peer answers with a pong carrying it.
    pub fn ping(&mut self, payload: &[u8]) -> Result<(), WsSendError> {
        self.control(OpCode::Ping, payload)
    }

    /// Send an unsolicited pong (a heartbeat, §5.5.3).
    pub fn pong(&mut self, payload: &[u8]) -> Result<(), WsSendError> {
        self.control(OpCode::Pong, payload)
    }

    fn control(&mut self, op: OpCode, payload: &[u8]) -> Result<(), WsSendError> {
        if payload.len() > MAX_CONTROL_PAYLOAD {
            return Err(WsSendError::ControlTooLong);
        }
        if self.conn.state().phase != Phase::Open {
            return Err(WsSendError::NotOpen);
        }
        Ok(write_frame(
            self.conn,
            (op, true, 0),
            Payload::Borrowed(payload),
        )?)
    }

    /// Start the close handshake with `code` and `reason` (cut to fit 123 bytes).
    /// Messages still arriving are dropped; when the peer answers, the connection
    /// closes; if it does not within [`WsConfig::close_timeout`], it is closed anyway.
    /// `code` must be one a peer accepts ([`close::is_valid_code`]: e.g. 1000, 1001,
    /// 1008, 4000-4999), never 1005 or 1006.
    pub fn close(&mut self, code: u16, reason: &str) -> Result<(), WsSendError> {
        if !close::is_valid_code(code) {
            return Err(WsSendError::InvalidCloseCode);
        }
        let st = self.conn.state();
        if st.phase != Phase::Open {
            return Err(WsSendError::NotOpen);
        }
        st.local_close = Some((code, reason.to_string()));
        send_close(self.conn, self.stats, Some(code), reason, Phase::Closing);
        Ok(())
    }
}

/// Run `f` with a handle on `conn`, the application state taken out of it meanwhile.
fn with_handle<S, R>(
    conn: &mut Conn<'_, WsConn<S>>,
    stats: &mut WsStats,
    f: impl FnOnce(&mut WsHandle<'_, '_, S>) -> R,
) -> Option<R> {
    let mut state = conn.state().app.take()?;
    let r = f(&mut WsHandle {
        conn,
        state: &mut state,
        stats,
    });
    conn.state().app = Some(state);
    Some(r)
}

/// The endpoint state a role's `Handler` shares with this module.
pub(crate) struct Endpoint<'e, A> {
    pub(crate) app: &'e mut A,
    pub(crate) stats: &'e mut WsStats,
    pub(crate) cfg: &'e WsConfig,
}

impl<A: WsApp> Endpoint<'_, A> {
    /// The handshake completed: tell the application, arm the idle timer.
    pub(crate) fn opened(&mut self, conn: &mut Conn<'_, WsConn<A::State>>) {
        let st = conn.state();
        st.phase = Phase::Open;
        st.opened = true;
        st.head.clear();
        self.stats.handshakes += 1;
        conn.set_timer(self.cfg.idle_timeout);
        let app = &mut *self.app;
        with_handle(conn, self.stats, |ws| app.opened(ws));
        self.after_callback(conn);
    }

    /// Received bytes after the handshake; returns how many were consumed.
    pub(crate) fn frames(&mut self, conn: &mut Conn<'_, WsConn<A::State>>, data: &[u8]) -> usize {
        let used = self.read_frames(conn, data);
        conn.state().msg.release();
        used
    }

    fn read_frames(&mut self, conn: &mut Conn<'_, WsConn<A::State>>, data: &[u8]) -> usize {
        match conn.state().phase {
            Phase::Handshake | Phase::Closed => return data.len(),
            // Re-arm only when there is an idle timeout (`opened` cancelled the
            // handshake timer otherwise).
            Phase::Open => {
                if let Some(t) = self.cfg.idle_timeout {
                    conn.set_timer(Some(t));
                }
            }
            Phase::Closing => {}
        }
        if self.must_pause(conn) {
            return 0;
        }
        let mut pos = 0;
        while pos < data.len() || conn.state().parser.end_pending() {
            let st = conn.state();
            let (n, step) = match st.parser.feed(&data[pos..]) {
                Ok(r) => r,
                Err(e) => {
                    fail(conn, self.stats, e);
                    return data.len();
                }
            };
            pos += n;
            let result = match step {
                Step::NeedMore => break,
                Step::Header(h) => {
                    st.in_control = h.opcode.is_control();
                    st.ctrl_len = 0;
                    if st.in_control {
                        Ok(())
                    } else {
                        st.msg.frame_start(&h)
                    }
                }
                Step::Payload {
                    data: p,
                    mask,
                    offset,
                } => {
                    if st.in_control {
                        // The header check bounds control payloads to 125 bytes.
                        let at = st.ctrl_len;
                        st.ctrl[at..at + p.len()].copy_from_slice(p);
                        if let Some(k) = mask {
                            crate::frame::apply_mask(
                                &mut st.ctrl[at..at + p.len()],
                                k,
                                offset as usize,
                            );
                        }
                        st.ctrl_len += p.len();
                        Ok(())
                    } else {
                        st.msg.payload(p, mask, offset)
                    }
                }
                Step::End(h) => {
                    if st.in_control {
                        self.control(conn, h.opcode);
                        Ok(())
                    } else {
                        match st.msg.frame_end(&h, st.codec.as_deref_mut()) {
                            Ok(Some(kind)) => {
                                self.deliver(conn, kind);
                                Ok(())
                            }
                            Ok(None) => Ok(()),
                            Err(e) => Err(e),
                        }
                    }
                }
            };
            if let Err(e) = result {
                fail(conn, self.stats, e);
                return data.len();
            }
            let phase = conn.state().phase;
            match phase {
                Phase::Closed => return data.len(),
                Phase::Open | Phase::Closing if self.must_pause(conn) => return pos,
                _ => {}
            }
        }
        pos
    }

    /// Stop reading while more than `max_send_queue` bytes wait for the peer; measured
    /// only after an eighth of that was sent, since measuring may cost a system call.
    fn must_pause(&mut self, conn: &mut Conn<'_, WsConn<A::State>>) -> bool {
        let st = conn.state();
        if !st.paused && st.out_since_check < self.cfg.max_send_queue / 8 {
            return false;
        }
        let queued = conn.unacked_len();
        let st = conn.state();
        st.out_since_check = 0;
        let pause = queued > self.cfg.max_send_queue;
        if pause {
            if !st.paused {
                self.stats.paused += 1;
            }
            conn.notify_writable();
        }
        conn.state().paused = pause;
        pause
    }

    fn deliver(&mut self, conn: &mut Conn<'_, WsConn<A::State>>, kind: MessageKind) {
        let st = conn.state();
        let mut buf = std::mem::take(st.msg.buffer());
        self.stats.messages_in += 1;
        self.stats.compressed_in += u64::from(st.msg.compressed());
        self.stats.bytes_in += buf.len() as u64;
        if st.phase == Phase::Open {
            let app = &mut *self.app;
            with_handle(conn, self.stats, |ws| {
                app.message(ws, Message::new(kind, &mut buf))
            });
        }
        buf.clear();
        *conn.state().msg.buffer() = buf;
        self.after_callback(conn);
    }

    fn control(&mut self, conn: &mut Conn<'_, WsConn<A::State>>, op: OpCode) {
        let st = conn.state();
        let payload = st.ctrl;
        let payload = &payload[..st.ctrl_len];
        match op {
            OpCode::Ping => {
                self.stats.pings_in += 1;
                if st.phase == Phase::Open {
                    let _ = write_frame(conn, (OpCode::Pong, true, 0), Payload::Borrowed(payload));
                }
            }
            OpCode::Pong => {
                self.stats.pongs_in += 1;
                if st.phase == Phase::Open {
                    let app = &mut *self.app;
                    with_handle(conn, self.stats, |ws| app.pong(ws, payload));
                    self.after_callback(conn);
                }
            }
            OpCode::Close => self.peer_close(conn, payload),
            _ => {}
        }
    }

    /// The peer's close frame (§5.5.1, §7.1.5): echo its status if we have not sent
    /// ours; the server then closes TCP, the client waits for the server to.
    fn peer_close(&mut self, conn: &mut Conn<'_, WsConn<A::State>>, payload: &[u8]) {
        let parsed = match close::parse(payload) {
            Ok(p) => p,
            Err(e) => return fail(conn, self.stats, e),
        };
        self.stats.closes_in += 1;
        let (code, reason) = parsed.unwrap_or((close::NO_STATUS, ""));
        let st = conn.state();
        st.received_close = Some((code, reason.to_string()));
        send_close(conn, self.stats, parsed.map(|(c, _)| c), "", Phase::Closed);
        match conn.state().role {
            Role::Server => conn.close(),
            Role::Client => conn.set_timer(Some(self.cfg.close_timeout)),
        }
    }

    /// An application callback may have started the close handshake.
    fn after_callback(&mut self, conn: &mut Conn<'_, WsConn<A::State>>) {
        if conn.state().phase == Phase::Closing {
            conn.set_timer(Some(self.cfg.close_timeout));
        }
    }

    /// The connection's timer fired.
    pub(crate) fn timer(&mut self, conn: &mut Conn<'_, WsConn<A::State>>) {
        match conn.state().phase {
            Phase::Handshake => {
                self.stats.handshake_timeouts += 1;
                conn.state().phase = Phase::Closed;
                conn.close();
            }
            Phase::Open => {
                self.stats.idle_timeouts += 1;
                conn.state().local_close = Some((close::GOING_AWAY, "idle timeout".to_string()));
                send_close(
                    conn,
                    self.stats,
                    Some(close::GOING_AWAY),
                    "idle timeout",
                    Phase::Closing,
                );
                conn.set_timer(Some(self.cfg.close_timeout));
            }
            Phase::Closing | Phase::Closed => {
                self.stats.close_timeouts += 1;
                conn.state().phase = Phase::Closed;
                conn.close();
            }
        }
    }

    /// The peer closed its side of TCP: no close frame can follow.
    pub(crate) fn peer_closed(&mut self, conn: &mut Conn<'_, WsConn<A::State>>) {
        conn.state().phase = Phase::Closed;
        conn.close();
    }

    /// The TCP connection is over (or never started): report to the application;
    /// `tcp` says how TCP ended, the reason when no close frame gave one.
    pub(crate) fn closed(&mut self, mut st: WsConn<A::State>, tcp: &str) {
        let clean = st.close_sent && st.received_close.is_some();
        if clean {
            self.stats.clean_closes += 1;
        } else if st.opened {
            self.stats.unclean_closes += 1;
        }
        let Some(state) = st.app.take() else {
            return;
        };
        let (code, reason) = st
            .received_close
            .take()
            .or(st.local_close.take())
            .unwrap_or_else(|| (close::ABNORMAL, tcp.to_string()));
        let opened = st.opened;
        self.app.closed(
            state,
            CloseInfo {
                code,
                reason,
                clean,
                opened,
            },
        );
    }
}

/// A client connection's frame masks (RFC 6455 §5.3): a fresh 32-bit key per frame from
/// a ChaCha20 stream of its own, seeded from the OS's randomness, so that no party to
/// the traffic can predict the next key from the ones it has seen (§10.3), nor from
/// the connection's handshake key.
pub(crate) struct MaskKeys(rand_chacha::ChaCha20Rng);

impl MaskKeys {
    /// Keys from a stream seeded with `seed`.
    pub(crate) fn new(seed: [u8; 32]) -> MaskKeys {
        use rand_chacha::rand_core::SeedableRng;
        MaskKeys(rand_chacha::ChaCha20Rng::from_seed(seed))
    }

    /// Keys from a stream seeded by the OS.
    pub(crate) fn from_os() -> MaskKeys {
        MaskKeys::new(os_seed())
    }

    pub(crate) fn next(&mut self) -> [u8; 4] {
        use rand_chacha::rand_core::RngCore;
        self.0.next_u32().to_ne_bytes()
    }
}

/// 32 bytes from the OS's randomness. Where the OS cannot give any (it always can on
/// Linux once booted), from std's per-process random hash keys instead, with an error
/// logged: still unpredictable to a peer, though not a cryptographic source.
pub(crate) fn os_seed() -> [u8; 32] {
    let mut seed = [0u8; 32];
    if let Err(e) = getrandom::fill(&mut seed) {
        log::error!("websocket: no randomness from the OS ({e}); masks from std's hash keys");
        use std::hash::BuildHasher;
        let keys = std::collections::hash_map::RandomState::new();
        for (i, chunk) in seed.chunks_mut(8).enumerate() {
            chunk.copy_from_slice(&keys.hash_one(i).to_le_bytes());
        }
    }
    seed
}
