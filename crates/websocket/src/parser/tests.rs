//! The frame parser on streams cut at every byte and at random points, on every opcode,
//! on what the frame writer writes, and on bad headers, each failing with its error.

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
