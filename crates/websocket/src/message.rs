//! Message assembly (RFC 6455 §5.4): data frames in, whole messages out. It owns the
//! fragmentation rules, the message size limit, UTF-8 validation of text as it arrives
//! (§8.1), and routing compressed messages through the negotiated
//! [`MessageCodec`].

use crate::error::ProtocolError;
use crate::extension::{CodecError, MessageCodec};
use crate::frame::{extend_masked, FrameHeader, OpCode, RSV1};
use crate::utf8::Utf8Validator;

/// The most buffer reserved ahead of a frame's payload on the strength of its header.
const RESERVE_AHEAD: u64 = 256 << 10;

/// The type of a data message.
// Exhaustive: RFC 6455 §5.6 defines exactly text and binary messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MessageKind {
    /// UTF-8 text.
    Text,
    /// Bytes.
    Binary,
}

impl MessageKind {
    /// The opcode of the message's first frame.
    pub fn opcode(self) -> OpCode {
        match self {
            MessageKind::Text => OpCode::Text,
            MessageKind::Binary => OpCode::Binary,
        }
    }
}

/// Assembles the data frames of one connection into messages.
#[derive(Debug, Default)]
pub struct Assembler {
    /// The message being received, if any.
    kind: Option<MessageKind>,
    /// Whether it is compressed (RSV1 on its first frame).
    compressed: bool,
    /// The (decompressed) payload so far.
    buf: Vec<u8>,
    /// The current frame's compressed payload.
    zbuf: Vec<u8>,
    utf8: Utf8Validator,
    max_message: usize,
}

impl Assembler {
    /// An assembler refusing messages longer than `max_message` bytes.
    pub fn new(max_message: usize) -> Assembler {
        Assembler {
            max_message,
            ..Assembler::default()
        }
    }

    /// Whether a fragmented message is in progress.
    pub fn in_message(&self) -> bool {
        self.kind.is_some()
    }

    /// A data frame's header arrived.
    pub fn frame_start(&mut self, h: &FrameHeader) -> Result<(), ProtocolError> {
        let rsv1 = h.rsv & RSV1 != 0;
        match h.opcode {
            OpCode::Continuation => {
                if self.kind.is_none() {
                    return Err(ProtocolError::UnexpectedContinuation);
                }
                if rsv1 {
                    return Err(ProtocolError::CompressedContinuation);
                }
            }
            OpCode::Text | OpCode::Binary => {
                if self.kind.is_some() {
                    return Err(ProtocolError::ExpectedContinuation);
                }
                self.kind = Some(if h.opcode == OpCode::Text {
                    MessageKind::Text
                } else {
                    MessageKind::Binary
                });
                self.compressed = rsv1;
                self.utf8 = Utf8Validator::new();
                self.buf.clear();
            }
            // Control frames are not part of messages; the caller keeps them apart.
            OpCode::Close | OpCode::Ping | OpCode::Pong => return Ok(()),
        }
        let held = if self.compressed {
            self.zbuf.len()
        } else {
            self.buf.len()
        };
        if held as u64 + h.len > self.max_message as u64 {
            return Err(ProtocolError::MessageTooBig);
        }
        // Reserve for what the header announces, but no more than a peer can make us
        // hold without sending the bytes: beyond that the buffer grows as they arrive.
        let reserve = h.len.min(RESERVE_AHEAD) as usize;
        if self.compressed {
            self.zbuf.reserve(reserve);
        } else {
            self.buf.reserve(reserve);
        }
        Ok(())
    }

    /// A piece of the current data frame's payload (see
    /// [`Step::Payload`](crate::parser::Step)).
    pub fn payload(
        &mut self,
        data: &[u8],
        mask: Option<[u8; 4]>,
        offset: u64,
    ) -> Result<(), ProtocolError> {
        let offset = (offset % 4) as usize;
        if self.compressed {
            extend_masked(&mut self.zbuf, data, mask, offset);
            return Ok(());
        }
        let at = self.buf.len();
        extend_masked(&mut self.buf, data, mask, offset);
        self.check_text(at)
    }

    /// The current data frame ended: returns the message's type when it is complete;
    /// its payload is then in [`Assembler::buffer`].
    pub fn frame_end(
        &mut self,
        h: &FrameHeader,
        codec: Option<&mut (dyn MessageCodec + '_)>,
    ) -> Result<Option<MessageKind>, ProtocolError> {
        if self.compressed {
            let codec = codec.ok_or(ProtocolError::ReservedBits)?;
            let at = self.buf.len();
            codec
                .decompress(&self.zbuf, h.fin, &mut self.buf, self.max_message)
                .map_err(|e| match e {
                    CodecError::TooBig => ProtocolError::MessageTooBig,
                    CodecError::Invalid | CodecError::Encode => ProtocolError::BadCompression,
                })?;
            self.zbuf.clear();
            if self.buf.len() > self.max_message {
                return Err(ProtocolError::MessageTooBig);
            }
            self.check_text(at)?;
        }
        if !h.fin {
            return Ok(None);
        }
        if self.kind == Some(MessageKind::Text) {
            self.utf8.finish().map_err(|_| ProtocolError::InvalidUtf8)?;
        }
        Ok(self.kind.take())
    }

    fn check_text(&mut self, from: usize) -> Result<(), ProtocolError> {
        if self.kind == Some(MessageKind::Text) {
            self.utf8
                .feed(&self.buf[from..])
                .map_err(|_| ProtocolError::InvalidUtf8)?;
        }
        Ok(())
    }

    /// Whether the message just completed (or in progress) came compressed.
    pub fn compressed(&self) -> bool {
        self.compressed
    }

    /// The payload of the message just completed.
    pub fn buffer(&mut self) -> &mut Vec<u8> {
        &mut self.buf
    }

    /// Free the buffers between messages, so a connection that is not receiving one
    /// holds no memory (messages arriving together still share one buffer).
    pub fn release(&mut self) {
        if self.kind.is_none() {
            self.buf = Vec::new();
            self.zbuf = Vec::new();
        }
    }
}
