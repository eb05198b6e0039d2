//! Seeds of `tls_record`: garbage where a ClientHello belongs, and after a handshake,
//! the client's data in small and whole chunks, records spoiled, replayed or dropped,
//! `close_notify`, FIN, a paused application and replies (see the target for the
//! format: a mode byte, then chunk, length and bytes, or operations).

/// Garbage: (name, chunking byte, bytes).
const GARBAGE: &[(&str, u8, &[u8])] = &[
    ("garbage-http", 0, b"GET / HTTP/1.1\r\nHost: x\r\n\r\n"),
    (
        "garbage-appdata-first",
        1,
        b"\x17\x03\x03\x00\x20\x00\x00\x00\x00\x00\x00",
    ),
    ("garbage-alert-first", 2, b"\x15\x03\x03\x00\x02\x02\x28"),
    (
        "garbage-oversize-hello",
        3,
        b"\x16\x03\x01\xff\xff\x01\x00\xff\xfb\x03\x03",
    ),
    (
        "garbage-short-hello",
        0,
        b"\x16\x03\x01\x00\x04\x01\x00\x00\x00",
    ),
];

/// After the handshake: (name, handshake chunking, operations).
const SESSIONS: &[(&str, &[u8])] = &[
    (
        "echo-small-chunks",
        &[1, 3, 0, 100, 0, 9, 0, 0x10, 0x27, 0, 7, 0x20, 0x4e, 5, 0],
    ),
    ("flip-a-bit", &[0, 0, 0, 50, 0, 4, 0, 20, 7, 0, 0, 3]),
    ("replay-a-record", &[0, 4, 0, 20, 0, 0, 2, 0, 0, 10, 0]),
    ("drop-a-record", &[0, 4, 0, 20, 0, 0, 3, 0, 0, 10, 0]),
    ("cut-a-record-then-fin", &[0, 4, 0, 20, 10, 0, 1, 6, 0]),
    (
        "paused-flood",
        &[0, 8, 0, 0, 0, 0x20, 0x4e, 0, 0, 0x20, 0x4e, 8, 0],
    ),
    (
        "raw-after-handshake",
        &[0, 3, 0, 8, 23, 3, 3, 0, 3, 1, 2, 3],
    ),
    ("fin-without-close-notify", &[0, 0, 5, 0, 1, 6, 0]),
    (
        "timer-and-reply",
        &[7, 7, 0, 200, 9, 0, 0x40, 0x9c, 0, 0, 1, 0],
    ),
];

pub(super) fn tls_record() -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    for (name, chunk, bytes) in GARBAGE {
        let mut d = vec![0, *chunk];
        d.extend_from_slice(&(bytes.len() as u16).to_le_bytes());
        d.extend_from_slice(bytes);
        out.push((name.to_string(), d));
    }
    for (name, ops) in SESSIONS {
        out.push((name.to_string(), [&[1][..], ops].concat()));
    }
    out
}
