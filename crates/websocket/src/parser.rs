//! A push parser for frames (RFC 6455 §5.2): it takes whatever bytes arrive, split or
//! packed any way, and yields a header, then the payload in the pieces it arrived in
//! (still masked, with the key and offset to unmask them), then the frame's end. Only
//! a header is ever buffered (at most 14 bytes); payload goes straight to its consumer.

use crate::error::ProtocolError;
use crate::frame::{FrameHeader, OpCode, MAX_CONTROL_PAYLOAD, MAX_HEADER};

/// Which end of the connection we are: it decides which frames must be masked (§5.1).
// Exhaustive: a connection has two ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// We accepted the connection: frames we receive must be masked, ours are not.
    Server,
    /// We opened the connection: frames we receive must not be masked, ours are.
    Client,
}

/// What one call to [`FrameParser::feed`] produced.
// Exhaustive: a frame is a header, its payload and its end (§5.2); nothing else arrives.
#[derive(Debug, PartialEq, Eq)]
pub enum Step<'a> {
    /// All input was taken into a partial header; feed more.
    NeedMore,
    /// A complete, valid header; its payload follows.
    Header(FrameHeader),
    /// Payload bytes as received (masked if `mask` is set): they start `offset` bytes
    /// into the frame's payload, which is what [`apply_mask`](crate::frame::apply_mask)
    /// needs.
    Payload {
        /// The bytes.
        data: &'a [u8],
        /// The frame's masking key.
        mask: Option<[u8; 4]>,
        /// Where `data` starts within the payload.
        offset: u64,
    },
    /// The frame's payload is complete.
    End(FrameHeader),
}

#[derive(Debug, Clone, Copy)]
enum State {
    Header { buf: [u8; MAX_HEADER], have: usize },
    Payload { header: FrameHeader, done: u64 },
}

/// The frame parser of one connection.
#[derive(Debug, Clone)]
pub struct FrameParser {
    role: Role,
    rsv_allowed: u8,
    max_frame: u64,
    state: State,
}

impl FrameParser {
    /// A parser for `role` that refuses frames longer than `max_frame`.
    pub fn new(role: Role, max_frame: u64) -> FrameParser {
        FrameParser {
            role,
            rsv_allowed: 0,
            max_frame,
            state: State::Header {
                buf: [0; MAX_HEADER],
                have: 0,
            },
        }
    }

    /// Allow the RSV bits in `rsv` (e.g. [`RSV1`](crate::frame::RSV1) once
    /// permessage-deflate is negotiated); any other set RSV bit fails the frame.
    pub fn allow_rsv(&mut self, rsv: u8) {
        self.rsv_allowed = rsv & 0b111;
    }

    /// Whether a frame's end is due without more input (after a header with an empty
    /// payload, or once the last payload byte was yielded).
    pub fn end_pending(&self) -> bool {
        matches!(self.state, State::Payload { header, done } if done == header.len)
    }

    /// Take the next piece of `input`: returns how many bytes were used and what they
    /// made. Call again with the rest (also with empty input while
    /// [`FrameParser::end_pending`]). After an error the connection must be failed.
    pub fn feed<'a>(&mut self, input: &'a [u8]) -> Result<(usize, Step<'a>), ProtocolError> {
        let limits = (self.role, self.rsv_allowed, self.max_frame);
        match &mut self.state {
            State::Payload { header, done } => {
                let header = *header;
                if *done == header.len {
                    self.state = State::Header {
                        buf: [0; MAX_HEADER],
                        have: 0,
                    };
                    return Ok((0, Step::End(header)));
                }
                let left = header.len - *done;
                let n = (input.len() as u64).min(left) as usize;
                if n == 0 {
                    return Ok((0, Step::NeedMore));
                }
                let offset = *done;
                *done += n as u64;
                let data = &input[..n];
                Ok((
                    n,
                    Step::Payload {
                        data,
                        mask: header.mask,
                        offset,
                    },
                ))
            }
            State::Header { buf, have } => {
                let mut used = 0;
                loop {
                    let need = header_len(&buf[..*have]);
                    if *have >= need {
                        break;
                    }
                    if used == input.len() {
                        return Ok((used, Step::NeedMore));
                    }
                    // Take what the header still needs in one copy when it is there.
                    let want = (need - *have).min(input.len() - used);
                    buf[*have..*have + want].copy_from_slice(&input[used..used + want]);
                    *have += want;
                    used += want;
                }
                let header = check(limits, &buf[..*have])?;
                self.state = State::Payload { header, done: 0 };
                Ok((used, Step::Header(header)))
            }
        }
    }
}

/// Validate a complete header (§5.2, §5.5, §5.1) for a parser with `(role, allowed RSV
/// bits, max frame)`, and decode it.
fn check(
    (role, rsv_allowed, max_frame): (Role, u8, u64),
    b: &[u8],
) -> Result<FrameHeader, ProtocolError> {
    let fin = b[0] & 0x80 != 0;
    let rsv = b[0] >> 4 & 0b111;
    let opcode = OpCode::from_bits(b[0] & 0x0F).ok_or(ProtocolError::ReservedOpcode)?;
    if rsv & !rsv_allowed != 0 {
        return Err(ProtocolError::ReservedBits);
    }
    let masked = b[1] & 0x80 != 0;
    let (len, at) = match b[1] & 0x7F {
        126 => (u64::from(u16::from_be_bytes([b[2], b[3]])), 4),
        127 => {
            let mut l = [0u8; 8];
            l.copy_from_slice(&b[2..10]);
            (u64::from_be_bytes(l), 10)
        }
        n => (u64::from(n), 2),
    };
    if len >> 63 != 0 {
        return Err(ProtocolError::LengthOverflow);
    }
    if opcode.is_control() {
        if len > MAX_CONTROL_PAYLOAD as u64 {
            return Err(ProtocolError::ControlTooLong);
        }
        if !fin {
            return Err(ProtocolError::FragmentedControl);
        }
        // Extensions define RSV bits for data frames only (RFC 7692 §6).
        if rsv != 0 {
            return Err(ProtocolError::ReservedBits);
        }
    }
    match (role, masked) {
        (Role::Server, false) => return Err(ProtocolError::Unmasked),
        (Role::Client, true) => return Err(ProtocolError::Masked),
        _ => {}
    }
    if len > max_frame {
        return Err(ProtocolError::FrameTooBig);
    }
    let mask = masked.then(|| [b[at], b[at + 1], b[at + 2], b[at + 3]]);
    Ok(FrameHeader {
        fin,
        rsv,
        opcode,
        mask,
        len,
    })
}

/// How long the header starting with `have` is, as far as `have` tells (2 until the
/// second byte is known).
fn header_len(have: &[u8]) -> usize {
    let Some(&second) = have.get(1) else {
        return 2;
    };
    let ext = match second & 0x7F {
        126 => 2,
        127 => 8,
        _ => 0,
    };
    2 + ext + if second & 0x80 != 0 { 4 } else { 0 }
}

#[cfg(test)]
mod tests;
