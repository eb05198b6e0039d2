//! Protocol violations, each with the close status RFC 6455 prescribes for it.

use std::fmt;

use crate::close;

/// A way the peer broke RFC 6455. The connection is failed (§7.1.7) with
/// [`ProtocolError::close_code`], and the violation is counted in
/// [`WsStats::errors`](crate::WsStats).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ProtocolError {
    /// An RSV bit set that no negotiated extension defines (§5.2).
    ReservedBits,
    /// An opcode RFC 6455 reserves (3-7, 0xB-0xF) (§5.2).
    ReservedOpcode,
    /// A control frame with more than 125 payload bytes (§5.5).
    ControlTooLong,
    /// A control frame without FIN (§5.5).
    FragmentedControl,
    /// A 64-bit payload length with its most significant bit set (§5.2).
    LengthOverflow,
    /// A client frame without a mask (§5.1).
    Unmasked,
    /// A server frame with a mask (§5.1).
    Masked,
    /// A continuation frame with no message to continue (§5.4).
    UnexpectedContinuation,
    /// A new text or binary frame inside a fragmented message (§5.4).
    ExpectedContinuation,
    /// RSV1 on a continuation frame (RFC 7692 §6: only the first frame carries it).
    CompressedContinuation,
    /// A close frame with a one-byte payload (§5.5.1).
    CloseLength,
    /// A close status a peer must not send (§7.4).
    CloseCode,
    /// A close reason that is not UTF-8 (§5.5.1).
    CloseReason,
    /// A text message that is not UTF-8 (§8.1).
    InvalidUtf8,
    /// A compressed message the extension could not decode.
    BadCompression,
    /// A frame longer than [`WsConfig::max_frame`](crate::WsConfig).
    FrameTooBig,
    /// A message longer than [`WsConfig::max_message`](crate::WsConfig).
    MessageTooBig,
}

impl ProtocolError {
    /// Every variant, in the order of [`ProtocolError::index`].
    pub const ALL: [ProtocolError; 17] = [
        ProtocolError::ReservedBits,
        ProtocolError::ReservedOpcode,
        ProtocolError::ControlTooLong,
        ProtocolError::FragmentedControl,
        ProtocolError::LengthOverflow,
        ProtocolError::Unmasked,
        ProtocolError::Masked,
        ProtocolError::UnexpectedContinuation,
        ProtocolError::ExpectedContinuation,
        ProtocolError::CompressedContinuation,
        ProtocolError::CloseLength,
        ProtocolError::CloseCode,
        ProtocolError::CloseReason,
        ProtocolError::InvalidUtf8,
        ProtocolError::BadCompression,
        ProtocolError::FrameTooBig,
        ProtocolError::MessageTooBig,
    ];

    /// The position of this variant in [`ProtocolError::ALL`].
    pub fn index(self) -> usize {
        self as usize
    }

    /// The close status to fail the connection with (§7.4.1): 1007 for bad UTF-8 or
    /// bad compressed data, 1009 for size limits, 1002 for the rest.
    pub fn close_code(self) -> u16 {
        match self {
            ProtocolError::InvalidUtf8
            | ProtocolError::CloseReason
            | ProtocolError::BadCompression => close::INVALID_PAYLOAD,
            ProtocolError::FrameTooBig | ProtocolError::MessageTooBig => close::MESSAGE_TOO_BIG,
            _ => close::PROTOCOL_ERROR,
        }
    }

    /// A short name, also sent as the close reason.
    pub fn as_str(self) -> &'static str {
        match self {
            ProtocolError::ReservedBits => "reserved bits set",
            ProtocolError::ReservedOpcode => "reserved opcode",
            ProtocolError::ControlTooLong => "control frame too long",
            ProtocolError::FragmentedControl => "fragmented control frame",
            ProtocolError::LengthOverflow => "payload length overflow",
            ProtocolError::Unmasked => "unmasked client frame",
            ProtocolError::Masked => "masked server frame",
            ProtocolError::UnexpectedContinuation => "continuation without a message",
            ProtocolError::ExpectedContinuation => "new message inside a fragmented one",
            ProtocolError::CompressedContinuation => "RSV1 on a continuation frame",
            ProtocolError::CloseLength => "close payload of one byte",
            ProtocolError::CloseCode => "invalid close code",
            ProtocolError::CloseReason => "close reason not UTF-8",
            ProtocolError::InvalidUtf8 => "text not UTF-8",
            ProtocolError::BadCompression => "bad compressed data",
            ProtocolError::FrameTooBig => "frame too big",
            ProtocolError::MessageTooBig => "message too big",
        }
    }
}

impl fmt::Display for ProtocolError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::error::Error for ProtocolError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn all_is_in_index_order() {
        for (i, e) in ProtocolError::ALL.iter().enumerate() {
            assert_eq!(e.index(), i);
        }
    }
}
