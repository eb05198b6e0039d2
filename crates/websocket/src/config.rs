//! Every limit of a WebSocket endpoint, in one place.

use std::time::Duration;

use crate::deflate::DeflateConfig;

/// Limits and timeouts, shared by the server and client roles. The defaults follow
/// what users of tungstenite (the most used Rust WebSocket library) and nginx already
/// know, so porting an application changes nothing it relies on:
///
/// | field | default | like |
/// |---|---|---|
/// | `max_frame` | 16 MiB | tungstenite's `max_frame_size` |
/// | `max_message` | 64 MiB | tungstenite's `max_message_size` |
/// | `max_handshake` | 8 KiB | nginx's `large_client_header_buffers` (one 8k buffer) |
/// | `handshake_timeout` | 10 s | |
/// | `idle_timeout` | none | tungstenite and a plain socket (nginx's proxy closes after 60 s) |
/// | `close_timeout` | 5 s | nginx's `lingering_timeout` |
/// | `max_send_queue` | 4 MiB | Linux's largest default `tcp_wmem` |
/// | `deflate` | off | LAppS and most servers; nginx does not compress WebSocket |
///
/// Autobahn's section 9 sends messages and frames of up to 16 MiB, which these
/// defaults take. Lower `max_message` (ws-echo: `--max-message`) when many connections
/// share little memory: each may hold one message being assembled.
///
/// permessage-deflate (RFC 7692) is off by default, as in LAppS and most servers (nginx
/// only proxies WebSocket and never compresses it): it trades CPU and, with context
/// takeover, a few hundred KiB of zlib state per connection that used it (see
/// [`DeflateCodec`](crate::extension::DeflateCodec)) for bandwidth. Turn it on with
/// `cfg.deflate = DeflateConfig::enabled()` (ws-echo: `--deflate`).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct WsConfig {
    /// The longest frame payload accepted; longer fails the connection with 1009.
    pub max_frame: usize,
    /// The longest message accepted (after decompression); longer fails with 1009.
    pub max_message: usize,
    /// The largest opening-handshake head; a longer request is answered with 431.
    pub max_handshake: usize,
    /// How long a peer has to complete the opening handshake before the connection
    /// is closed.
    pub handshake_timeout: Option<Duration>,
    /// Close (1001, "idle timeout") a connection on which nothing arrived for this
    /// long. `None`: never.
    pub idle_timeout: Option<Duration>,
    /// After we sent a close frame, how long the peer has to answer before the TCP
    /// connection is closed anyway; also how long a client waits for the server to
    /// close TCP after the close handshake (RFC 6455 §7.1.1).
    pub close_timeout: Duration,
    /// Bytes queued for the peer (sent but unacknowledged, or not sent yet) above which
    /// we stop reading its frames, so a peer that does not read its replies closes its
    /// own window instead of growing our memory. Checked every eighth of this many
    /// bytes sent, so the queue stays below 9/8 of it plus one message.
    pub max_send_queue: usize,
    /// permessage-deflate: a server accepts a client's offer, a client offers it. Off by
    /// default. `max_message` bounds the decompressed size (a bomb fails with 1009).
    pub deflate: DeflateConfig,
}

impl Default for WsConfig {
    fn default() -> WsConfig {
        WsConfig {
            max_frame: 16 << 20,
            max_message: 64 << 20,
            max_handshake: 8 << 10,
            handshake_timeout: Some(Duration::from_secs(10)),
            idle_timeout: None,
            close_timeout: Duration::from_secs(5),
            max_send_queue: 4 << 20,
            deflate: DeflateConfig::default(),
        }
    }
}
