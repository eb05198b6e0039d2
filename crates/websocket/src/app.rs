//! The application's side: the callbacks it implements ([`WsApp`], plus
//! [`WsServerApp::open`] for servers), what it receives ([`Message`], [`CloseInfo`]) and
//! how it answers a handshake ([`Accept`], [`Reject`]).

use std::net::SocketAddr;

use bytes::Bytes;

use crate::extension::MessageCodec;
use crate::handshake::{Reject, Request};
use crate::message::MessageKind;
use crate::session::WsHandle;

/// A received message, borrowed for the duration of the callback. Take its bytes with
/// [`Message::into_bytes`] to keep or resend them without a copy.
#[derive(Debug)]
pub struct Message<'m> {
    kind: MessageKind,
    data: &'m mut Vec<u8>,
}

/// A received message's content, for matching.
// Exhaustive: RFC 6455 §5.6 defines exactly two kinds of data frame, text and binary.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Data<'a> {
    /// A text message (validated UTF-8).
    Text(&'a str),
    /// A binary message.
    Binary(&'a [u8]),
}

impl<'m> Message<'m> {
    pub(crate) fn new(kind: MessageKind, data: &'m mut Vec<u8>) -> Message<'m> {
        Message { kind, data }
    }

    /// Text or binary.
    pub fn kind(&self) -> MessageKind {
        self.kind
    }

    /// The payload.
    pub fn as_bytes(&self) -> &[u8] {
        self.data
    }

    /// The payload length.
    pub fn len(&self) -> usize {
        self.data.len()
    }

    /// Whether the payload is empty.
    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }

    /// The content: text (as `&str`) or binary.
    pub fn data(&self) -> Data<'_> {
        match self.kind {
            // Validated while it arrived; from_utf8 only re-proves it without `unsafe`.
            MessageKind::Text => match std::str::from_utf8(self.data) {
                Ok(s) => Data::Text(s),
                Err(_) => Data::Binary(self.data),
            },
            MessageKind::Binary => Data::Binary(self.data),
        }
    }

    /// Take the payload (no copy); the connection allocates a new buffer for the next
    /// message.
    pub fn into_bytes(self) -> Bytes {
        Bytes::from(std::mem::take(self.data))
    }
}

/// How a connection ended, for [`WsApp::closed`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct CloseInfo {
    /// The peer's close status; or, if it sent none, ours (failure, idle timeout, the
    /// application's); 1005 if its close frame had no status; 1006 if no close frame
    /// was exchanged at all.
    pub code: u16,
    /// The reason that came with `code`.
    pub reason: String,
    /// Both close frames were exchanged (§7.1.4 "cleanly").
    pub clean: bool,
    /// The opening handshake had completed (a client whose handshake failed sees false).
    pub opened: bool,
}

/// The callbacks of a WebSocket application, in either role. All run on the worker's
/// thread, inline, and must not block.
pub trait WsApp {
    /// Per-connection application state.
    type State;

    /// The opening handshake completed; the connection may send.
    fn opened(&mut self, ws: &mut WsHandle<'_, '_, Self::State>) {
        let _ = ws;
    }

    /// A complete text or binary message arrived.
    fn message(&mut self, ws: &mut WsHandle<'_, '_, Self::State>, msg: Message<'_>);

    /// A pong arrived (an answer to our ping, or a heartbeat). Pings are answered for
    /// you.
    fn pong(&mut self, ws: &mut WsHandle<'_, '_, Self::State>, payload: &[u8]) {
        let _ = (ws, payload);
    }

    /// The connection is over; its state comes back.
    fn closed(&mut self, state: Self::State, info: CloseInfo) {
        let _ = (state, info);
    }

    /// Client role: once per loop turn, the chance to open connections (a load
    /// generator starts its connections here, a reconnecting client its next one). The
    /// server role never calls it.
    fn poll(&mut self, connector: &mut crate::client::Connector<'_, '_, Self::State>) {
        let _ = connector;
    }
}

/// The server side's extra callback: deciding on each opening handshake.
pub trait WsServerApp: WsApp {
    /// A valid upgrade request arrived from `peer` (method, version, `Upgrade`,
    /// `Connection`, key and version were checked already). Return the connection's
    /// state and choices, or an HTTP refusal (e.g. `Reject::new(403)` for an `Origin`
    /// not served, 404 for an unknown path).
    fn open(&mut self, req: &Request, peer: SocketAddr) -> Result<Accept<Self::State>, Reject>;
}

/// A server's acceptance of a handshake.
pub struct Accept<S> {
    pub(crate) state: S,
    pub(crate) protocol: Option<String>,
    pub(crate) headers: Vec<(String, String)>,
    pub(crate) extension: Option<(Box<dyn MessageCodec>, String)>,
}

impl<S> Accept<S> {
    /// Accept with `state` as the connection's application state, no subprotocol and
    /// no extension.
    pub fn new(state: S) -> Accept<S> {
        Accept {
            state,
            protocol: None,
            headers: Vec::new(),
            extension: None,
        }
    }

    /// Choose `protocol`, which must be one of [`Request::protocols`] (§4.2.2).
    pub fn protocol(mut self, protocol: &str) -> Accept<S> {
        self.protocol = Some(protocol.to_string());
        self
    }

    /// Add a header to the 101 response (e.g. `Set-Cookie`).
    pub fn header(mut self, name: &str, value: &str) -> Accept<S> {
        self.headers.push((name.to_string(), value.to_string()));
        self
    }

    /// Use a negotiated per-message extension; `response` is the
    /// `Sec-WebSocket-Extensions` value to answer with (see
    /// [`extension`](crate::extension)). It takes the place of the permessage-deflate
    /// the server would otherwise negotiate itself ([`WsConfig::deflate`](crate::WsConfig)).
    pub fn extension(mut self, codec: Box<dyn MessageCodec>, response: &str) -> Accept<S> {
        self.extension = Some((codec, response.to_string()));
        self
    }
}
