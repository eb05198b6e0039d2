//! The seam for per-message compression (RFC 7692). A negotiated extension is a
//! [`MessageCodec`] the connection owns: it lets the frame parser accept RSV1 on the
//! first frame of a message, routes that message's payload through
//! [`MessageCodec::decompress`] frame by frame, and checks what comes out like any
//! other payload (UTF-8 for text, [`WsConfig::max_message`](crate::WsConfig)). A message
//! without RSV1 on a connection with a codec is taken as it is (RFC 7692 §6.1: the
//! sender chooses per message).
//!
//! Whole messages sent with [`WsHandle`](crate::WsHandle) go through
//! [`MessageCodec::compress`] and carry RSV1 when [`MessageCodec::should_compress`]
//! says so, and go out plain otherwise. Compression necessarily writes a new buffer,
//! so a [`WsHandle::send_shared`](crate::WsHandle::send_shared) message is copied
//! (compressed) on such a connection, not queued by reference. Fragments
//! ([`WsHandle::send_fragment`](crate::WsHandle::send_fragment)) and control frames are
//! never compressed.
//!
//! Two ways to get a codec on a connection:
//! - permessage-deflate ([`deflate`](crate::deflate)): set
//!   [`WsConfig::deflate`](crate::WsConfig) to [`DeflateConfig::enabled`]; the server
//!   answers the client's offer itself (unless the application chose an extension in
//!   `open`), and the client offers it and checks the answer (RFC 6455 §4.1: a bad or
//!   unasked-for answer fails the connection). [`DeflateCodec`] is the codec.
//! - any other extension, server side: [`WsServerApp::open`](crate::WsServerApp::open)
//!   reads the offers with [`Request::extensions`](crate::Request::extensions) and hands
//!   the chosen codec and its `Sec-WebSocket-Extensions` response value to
//!   [`Accept::extension`](crate::Accept::extension).

use crate::deflate::{DeflateConfig, DeflateError, Negotiated, PerMessageDeflate, Role};

/// Why a compressed message could not be decoded, or a message not encoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum CodecError {
    /// The output would exceed the limit the caller gave (fails the connection with 1009).
    TooBig,
    /// The compressed data is malformed (fails the connection with 1007).
    Invalid,
    /// The encoder failed (the message is then sent uncompressed).
    Encode,
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

    /// Encode a whole message's payload, appending to `out`. On an error the message
    /// goes out uncompressed and, if `out` got anything, is discarded.
    fn compress(&mut self, payload: &[u8], out: &mut Vec<u8>) -> Result<(), CodecError>;

    /// Whether a message of `len` bytes should be sent through [`Self::compress`] (with
    /// RSV1) rather than plain. Every message by default.
    fn should_compress(&self, len: usize) -> bool {
        let _ = len;
        true
    }
}

/// permessage-deflate as a connection's [`MessageCodec`]: a [`PerMessageDeflate`] plus
/// the rule that once our compressor failed (which zlib does not do on valid input) no
/// message is compressed any more, since the peer's decompressor no longer shares its
/// window.
///
/// Memory: nothing is allocated until the first compressed message in each direction
/// ([`PerMessageDeflate`] creates its compressor and decompressor lazily). After that,
/// with context takeover (the default), the zlib state stays for the connection's life:
/// about 256 KiB for a compressor at 15 window bits (zlib's 2^(bits+2) + 2^(memLevel+9)
/// bytes, memLevel 8), less at smaller windows, and about 40 KiB for the decompressor
/// (zlib-rs always keeps a 32 KiB window). With no context takeover the state is reset,
/// not freed, after each message. Message buffers are not held between messages.
#[derive(Debug)]
pub struct DeflateCodec {
    inner: PerMessageDeflate,
    compress_failed: bool,
}

impl DeflateCodec {
    /// The codec for a connection that negotiated `neg`, at our end `role`, configured
    /// by `cfg`.
    pub fn new(neg: &Negotiated, role: Role, cfg: &DeflateConfig) -> DeflateCodec {
        DeflateCodec {
            inner: PerMessageDeflate::new(neg, role, cfg),
            compress_failed: false,
        }
    }
}

impl MessageCodec for DeflateCodec {
    fn decompress(
        &mut self,
        frame_payload: &[u8],
        end_of_message: bool,
        out: &mut Vec<u8>,
        limit: usize,
    ) -> Result<(), CodecError> {
        self.inner
            .decompress(frame_payload, end_of_message, out, limit)
            .map_err(|e| match e {
                DeflateError::TooLarge { .. } => CodecError::TooBig,
                _ => CodecError::Invalid,
            })
    }

    fn compress(&mut self, payload: &[u8], out: &mut Vec<u8>) -> Result<(), CodecError> {
        self.inner.compress(payload, out).map_err(|e| {
            log::warn!("permessage-deflate: {e}; sending uncompressed from now on");
            self.compress_failed = true;
            CodecError::Encode
        })
    }

    fn should_compress(&self, len: usize) -> bool {
        !self.compress_failed && self.inner.should_compress(len)
    }
}
