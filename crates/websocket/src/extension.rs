//! The seam for per-message compression (RFC 7692). A negotiated extension is a
//! [`MessageCodec`] the connection owns: it lets the frame parser accept RSV1 on the
//! first frame of a message, routes that message's payload through
//! [`MessageCodec::decompress`] frame by frame, and checks what comes out like any
//! other payload (UTF-8 for text, [`WsConfig::max_message`](crate::WsConfig)). Messages
//! sent with [`WsHandle`](crate::WsHandle) go through [`MessageCodec::compress`] and
//! carry RSV1.
//!
//! The server negotiates in [`WsServerApp::open`](crate::WsServerApp::open): it reads
//! the offers with [`Request::extensions`](crate::Request::extensions) and hands the
//! chosen codec and its `Sec-WebSocket-Extensions` response value to
//! [`Accept::extension`](crate::Accept::extension).
//!
//! TODO(deflate): `deflate.rs` (permessage-deflate) implements `MessageCodec` for its
//! `PerMessageDeflate` and `WsServer` calls its `negotiate` when `WsConfig` enables it.

/// Why a compressed message could not be decoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CodecError {
    /// The output would exceed the limit the caller gave (fails the connection with 1009).
    TooBig,
    /// The compressed data is malformed (fails the connection with 1007).
    Invalid,
}

/// A per-message transform of payloads, negotiated in the handshake (RFC 7692's
/// permessage-deflate is the one in use).
pub trait MessageCodec {
    /// Decode one frame's (unmasked) payload of a compressed message, appending to
    /// `out`, which must not grow beyond `limit` bytes; `end_of_message` is set on the
    /// message's last frame (RFC 7692 §7.2.2 appends the empty block's tail there).
    fn decompress(
        &mut self,
        frame_payload: &[u8],
        end_of_message: bool,
        out: &mut Vec<u8>,
        limit: usize,
    ) -> Result<(), CodecError>;

    /// Encode a whole message's payload, appending to `out`.
    fn compress(&mut self, payload: &[u8], out: &mut Vec<u8>);
}
