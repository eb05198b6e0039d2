//! Close frames (RFC 6455 §5.5.1) and status codes (§7.4): which codes a peer may send,
//! and how a close payload is read.

use crate::error::ProtocolError;
use crate::utf8::Utf8Validator;

/// 1000: normal closure.
pub const NORMAL: u16 = 1000;
/// 1001: the endpoint is going away (server shutting down, idle timeout).
pub const GOING_AWAY: u16 = 1001;
/// 1002: protocol error.
pub const PROTOCOL_ERROR: u16 = 1002;
/// 1003: a data type the endpoint cannot accept.
pub const UNSUPPORTED_DATA: u16 = 1003;
/// 1005: reported locally when a close frame carried no status; never sent.
pub const NO_STATUS: u16 = 1005;
/// 1006: reported locally when the connection ended without a close frame; never sent.
pub const ABNORMAL: u16 = 1006;
/// 1007: data inconsistent with the message type (text that is not UTF-8).
pub const INVALID_PAYLOAD: u16 = 1007;
/// 1008: policy violation.
pub const POLICY_VIOLATION: u16 = 1008;
/// 1009: a message too big to process.
pub const MESSAGE_TOO_BIG: u16 = 1009;
/// 1010: the client needed an extension the server did not negotiate.
pub const MANDATORY_EXTENSION: u16 = 1010;
/// 1011: the server met an unexpected condition.
pub const INTERNAL_ERROR: u16 = 1011;

/// Whether a peer may put `code` in a close frame: the codes RFC 6455 §7.4.1 defines
/// for use on the wire (1000-1003, 1007-1011), those IANA registered since (1012
/// service restart, 1013 try again later, 1014 bad gateway), and the ranges left to
/// libraries and applications (3000-4999, §7.4.2). 1004 is reserved, 1005/1006/1015
/// must never be sent, everything below 1000 and from 5000 up is unassigned, and the
/// rest of 1000-2999 is reserved for future revisions of the protocol.
pub fn is_valid_code(code: u16) -> bool {
    matches!(code, 1000..=1003 | 1007..=1014 | 3000..=4999)
}

/// A close frame's payload: none, or a status code and a UTF-8 reason.
pub fn parse(payload: &[u8]) -> Result<Option<(u16, &str)>, ProtocolError> {
    match payload {
        [] => Ok(None),
        [_] => Err(ProtocolError::CloseLength),
        [hi, lo, reason @ ..] => {
            let code = u16::from_be_bytes([*hi, *lo]);
            if !is_valid_code(code) {
                return Err(ProtocolError::CloseCode);
            }
            let mut v = Utf8Validator::new();
            v.feed(reason)
                .and_then(|()| v.finish())
                .map_err(|_| ProtocolError::CloseReason)?;
            let reason = std::str::from_utf8(reason).map_err(|_| ProtocolError::CloseReason)?;
            Ok(Some((code, reason)))
        }
    }
}

/// Write a close payload into `buf` (code, then as much of `reason` as fits in a control
/// frame, cut on a character boundary); returns its length.
pub fn encode(code: u16, reason: &str, buf: &mut [u8; 125]) -> usize {
    buf[..2].copy_from_slice(&code.to_be_bytes());
    let mut n = reason.len().min(123);
    while !reason.is_char_boundary(n) {
        n -= 1;
    }
    buf[2..2 + n].copy_from_slice(&reason.as_bytes()[..n]);
    2 + n
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn autobahn_valid_and_invalid_codes() {
        // Autobahn case 7.7.x sends these and expects them echoed ...
        for c in [
            1000, 1001, 1002, 1003, 1007, 1008, 1009, 1010, 1011, 3000, 3999, 4000, 4999,
        ] {
            assert!(is_valid_code(c), "{c}");
        }
        // ... and case 7.9.x expects a protocol error for these.
        for c in [
            0, 999, 1004, 1005, 1006, 1015, 1016, 1100, 2000, 2999, 5000, 65535,
        ] {
            assert!(!is_valid_code(c), "{c}");
        }
    }

    #[test]
    fn payloads() {
        assert_eq!(parse(&[]), Ok(None));
        assert_eq!(parse(&[3]), Err(ProtocolError::CloseLength));
        assert_eq!(parse(&[3, 0xe8]), Ok(Some((1000, ""))));
        assert_eq!(parse(&[3, 0xe8, b'o', b'k']), Ok(Some((1000, "ok"))));
        assert_eq!(parse(&[3, 0xed]), Err(ProtocolError::CloseCode));
        assert_eq!(parse(&[3, 0xe8, 0xff]), Err(ProtocolError::CloseReason));
        assert_eq!(parse(&[3, 0xe8, 0xce]), Err(ProtocolError::CloseReason));
    }

    #[test]
    fn encode_cuts_reason_on_a_boundary() {
        let mut buf = [0u8; 125];
        let long = "é".repeat(100);
        let n = encode(1001, &long, &mut buf);
        assert_eq!(n, 124);
        assert_eq!(
            parse(&buf[..n]).map(|p| p.map(|(c, r)| (c, r.len()))),
            Ok(Some((1001, 122)))
        );
    }
}
