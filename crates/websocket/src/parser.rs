//! A push parser for frames (RFC 6455 §5.2): it takes whatever bytes arrive, split or
//! packed any way, and yields a header, then the payload in the pieces it arrived in
//! (still masked, with the key and offset to unmask them), then the frame's end. Only
//! a header is ever buffered (at most 14 bytes); payload goes straight to its consumer.

use crate::error::ProtocolError;
use crate::frame::{FrameHeader, OpCode, MAX_CONTROL_PAYLOAD, MAX_HEADER};

/// Which end of the connection we are: it decides which frames must be masked (§5.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// We accepted the connection: frames we receive must be masked, ours are not.
    Server,
    /// We opened the connection: frames we receive must not be masked, ours are.
    Client,
}

/// What one call to [`FrameParser::feed`] produced.
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
mod tests {
    use super::*;
    use crate::frame::{apply_mask, RSV1};
    use proptest::prelude::*;

    /// Every frame the parser yields from `input` split at `cuts`, as (header, unmasked
    /// payload), or the first error.
    fn parse_all(
        parser: &mut FrameParser,
        input: &[u8],
        cuts: &[usize],
    ) -> Result<Vec<(FrameHeader, Vec<u8>)>, ProtocolError> {
        let mut frames = Vec::new();
        let mut payload = Vec::new();
        let mut bounds: Vec<usize> = cuts.iter().map(|&c| c.min(input.len())).collect();
        bounds.sort_unstable();
        bounds.push(input.len());
        let mut start = 0;
        for end in bounds {
            let mut chunk = &input[start..end];
            start = end;
            while !chunk.is_empty() || parser.end_pending() {
                let (n, step) = parser.feed(chunk)?;
                chunk = &chunk[n..];
                match step {
                    Step::NeedMore => assert!(chunk.is_empty()),
                    Step::Header(_) => payload.clear(),
                    Step::Payload { data, mask, offset } => {
                        let at = payload.len();
                        assert_eq!(at as u64, offset);
                        payload.extend_from_slice(data);
                        if let Some(k) = mask {
                            apply_mask(&mut payload[at..], k, at);
                        }
                    }
                    Step::End(h) => frames.push((h, std::mem::take(&mut payload))),
                }
            }
        }
        Ok(frames)
    }

    fn frame(op: OpCode, fin: bool, mask: Option<[u8; 4]>, payload: &[u8]) -> Vec<u8> {
        let h = FrameHeader {
            fin,
            rsv: 0,
            opcode: op,
            mask,
            len: payload.len() as u64,
        };
        let mut buf = [0u8; MAX_HEADER];
        let n = h.encode(&mut buf);
        let mut out = buf[..n].to_vec();
        let at = out.len();
        out.extend_from_slice(payload);
        if let Some(k) = mask {
            apply_mask(&mut out[at..], k, 0);
        }
        out
    }

    /// A frame as (opcode, FIN, payload).
    type Plain = (OpCode, bool, Vec<u8>);

    fn sample_stream() -> (Vec<u8>, Vec<Plain>) {
        let key = Some([1, 2, 3, 4]);
        let frames = vec![
            (OpCode::Text, false, b"Hel".to_vec()),
            (OpCode::Ping, true, b"p".to_vec()),
            (OpCode::Continuation, true, b"lo".to_vec()),
            (OpCode::Binary, true, vec![7u8; 300]),
            (OpCode::Binary, true, vec![]),
            (
                OpCode::Binary,
                true,
                (0..70_000u32).map(|i| i as u8).collect(),
            ),
            (OpCode::Close, true, vec![3, 0xe8]),
        ];
        let mut bytes = Vec::new();
        for (op, fin, p) in &frames {
            bytes.extend(frame(*op, *fin, key, p));
        }
        (bytes, frames)
    }

    fn check_stream(cuts: &[usize]) {
        let (bytes, expect) = sample_stream();
        let mut p = FrameParser::new(Role::Server, 1 << 20);
        let got = parse_all(&mut p, &bytes, cuts).unwrap();
        assert_eq!(got.len(), expect.len());
        for ((h, payload), (op, fin, want)) in got.iter().zip(&expect) {
            assert_eq!((h.opcode, h.fin, payload), (*op, *fin, want));
        }
    }

    #[test]
    fn every_split_point() {
        let (bytes, _) = sample_stream();
        for cut in 0..bytes.len() {
            check_stream(&[cut]);
        }
        // One byte at a time.
        let all: Vec<usize> = (0..bytes.len()).step_by(1).take(400).collect();
        check_stream(&all);
    }

    proptest! {
        #[test]
        fn random_splits(cuts in proptest::collection::vec(0usize..71_000, 0..12)) {
            check_stream(&cuts);
        }
    }

    fn any_opcode() -> impl Strategy<Value = OpCode> {
        prop_oneof![
            Just(OpCode::Text),
            Just(OpCode::Binary),
            Just(OpCode::Continuation),
            Just(OpCode::Ping),
            Just(OpCode::Pong),
            Just(OpCode::Close),
        ]
    }

    proptest! {
        /// What the writer's header encoding and masking produce, the other role's
        /// parser reads back: a client's masked frames at the server, a server's
        /// unmasked frames at the client, across the 7/16/64-bit length boundaries.
        #[test]
        fn writer_parser_round_trip(
            frames in proptest::collection::vec(
                (any_opcode(), any::<bool>(), prop_oneof![0usize..130, 65530usize..65540, Just(70_000usize)], any::<[u8; 4]>()),
                1..5,
            ),
            client in any::<bool>(),
            cuts in proptest::collection::vec(0usize..300_000, 0..4),
        ) {
            let mut bytes = Vec::new();
            let mut want = Vec::new();
            for (i, (op, fin, len, key)) in frames.into_iter().enumerate() {
                let (fin, len) = if op.is_control() { (true, len.min(125)) } else { (fin, len) };
                let payload: Vec<u8> = (0..len).map(|j| (i * 31 + j) as u8).collect();
                bytes.extend(frame(op, fin, client.then_some(key), &payload));
                want.push((op, fin, payload));
            }
            let role = if client { Role::Server } else { Role::Client };
            let mut p = FrameParser::new(role, 1 << 20);
            let got = parse_all(&mut p, &bytes, &cuts).unwrap();
            prop_assert_eq!(got.len(), want.len());
            for ((h, payload), (op, fin, w)) in got.iter().zip(&want) {
                prop_assert_eq!((h.opcode, h.fin, h.mask.is_some()), (*op, *fin, client));
                prop_assert!(payload == w);
            }
        }
    }

    fn first_error(role: Role, bytes: &[u8]) -> Option<ProtocolError> {
        let mut p = FrameParser::new(role, 1000);
        parse_all(&mut p, bytes, &[]).err()
    }

    #[test]
    fn bad_headers() {
        let k = Some([9, 9, 9, 9]);
        let s = Role::Server;
        let mut rsv = frame(OpCode::Text, true, k, b"x");
        rsv[0] |= 0x40;
        assert_eq!(first_error(s, &rsv), Some(ProtocolError::ReservedBits));
        // With RSV1 negotiated: RSV1 on a data frame passes, RSV2 or RSV1 on a control
        // frame does not.
        let with_rsv1 = |bytes: &[u8]| {
            let mut p = FrameParser::new(s, 1000);
            p.allow_rsv(RSV1);
            parse_all(&mut p, bytes, &[]).err()
        };
        assert_eq!(with_rsv1(&rsv), None);
        let mut rsv2 = frame(OpCode::Text, true, k, b"x");
        rsv2[0] |= 0x20;
        assert_eq!(with_rsv1(&rsv2), Some(ProtocolError::ReservedBits));
        let mut rsv_ping = frame(OpCode::Ping, true, k, b"");
        rsv_ping[0] |= 0x40;
        assert_eq!(with_rsv1(&rsv_ping), Some(ProtocolError::ReservedBits));
        for op in [3u8, 7, 0xB, 0xF] {
            let mut f = frame(OpCode::Binary, true, k, b"");
            f[0] = 0x80 | op;
            assert_eq!(first_error(s, &f), Some(ProtocolError::ReservedOpcode));
        }
        let long_ping = frame(OpCode::Ping, true, k, &[0; 126]);
        assert_eq!(
            first_error(s, &long_ping),
            Some(ProtocolError::ControlTooLong)
        );
        let frag_ping = frame(OpCode::Ping, false, k, b"");
        assert_eq!(
            first_error(s, &frag_ping),
            Some(ProtocolError::FragmentedControl)
        );
        let unmasked = frame(OpCode::Text, true, None, b"x");
        assert_eq!(first_error(s, &unmasked), Some(ProtocolError::Unmasked));
        assert_eq!(first_error(Role::Client, &unmasked), None);
        let masked = frame(OpCode::Text, true, k, b"x");
        assert_eq!(
            first_error(Role::Client, &masked),
            Some(ProtocolError::Masked)
        );
        let msb = [0x82, 0xFF, 0x80, 0, 0, 0, 0, 0, 0, 1, 1, 2, 3, 4];
        assert_eq!(first_error(s, &msb), Some(ProtocolError::LengthOverflow));
        let big = frame(OpCode::Binary, true, k, &[0; 1001]);
        assert_eq!(first_error(s, &big), Some(ProtocolError::FrameTooBig));
        // The error comes with the header, before any payload arrives.
        let mut p = FrameParser::new(s, 1000);
        assert_eq!(p.feed(&big[..8]).err(), Some(ProtocolError::FrameTooBig));
    }
}
