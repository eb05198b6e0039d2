//! permessage-deflate end to end: our client and server roles with deflate negotiated
//! over the simulated link (with and without context takeover, with loss and
//! reordering), a raw client sending hand-made compressed frames to the server, and a
//! raw server answering our client's offer.

use super::*;
use crate::deflate::{self as pmd, DeflateConfig, Negotiated, PerMessageDeflate};
use crate::handshake::{accept_key, switching_protocols};

fn with_deflate(d: DeflateConfig) -> WsConfig {
    WsConfig {
        deflate: d,
        ..WsConfig::default()
    }
}

fn on() -> WsConfig {
    with_deflate(DeflateConfig::enabled())
}

/// The raw client's request, offering `offer` (none when empty).
fn upgrade_offering(offer: &str) -> String {
    if offer.is_empty() {
        return UPGRADE.to_string();
    }
    UPGRADE.replace(
        "\r\n\r\n",
        &format!("\r\nSec-WebSocket-Extensions: {offer}\r\n\r\n"),
    )
}

fn raw_deflate(cfg: WsConfig, offer: &str, frames: &[Vec<u8>]) -> (Seen, WsStats) {
    let mut s = upgrade_offering(offer).into_bytes();
    for f in frames {
        s.extend_from_slice(f);
    }
    raw_run(WsEcho, cfg, s)
}

/// A raw peer's compression state (client end, default parameters, context takeover).
fn peer() -> PerMessageDeflate {
    PerMessageDeflate::new(
        &Negotiated::default(),
        pmd::Role::Client,
        &DeflateConfig::enabled(),
    )
}

fn deflated(z: &mut PerMessageDeflate, data: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    z.compress(data, &mut out).unwrap();
    out
}

fn inflated(z: &mut PerMessageDeflate, data: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    z.decompress(data, true, &mut out, usize::MAX).unwrap();
    out
}

/// Bytes that deflate cannot shrink on their own (but can as a repeat).
fn noise(n: usize, seed: u64) -> Vec<u8> {
    let mut x = seed | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

const CLOSE_1000: [u8; 2] = [0x03, 0xE8];

#[test]
fn client_and_server_echo_with_deflate() {
    let (c, s) = check_echo_with(on(), on(), FaultConfig::none(), 1);
    assert_eq!((c.deflate, s.deflate), (1, 1));
    // The big messages went compressed both ways; the short ones ("message 7", under
    // min_compress_size) and the client's fragments went plain on the same connection.
    assert_eq!(s.compressed_in, 1, "{s}");
    assert!(s.compressed_in < s.messages_in, "{s}");
    assert_eq!(s.compressed_out, 3, "{s}");
    assert!(s.compressed_out < s.messages_out, "{s}");
    assert_eq!(c.compressed_in, s.compressed_out);
    assert_eq!(s.compressed_in, c.compressed_out);
    // Compression worked: the 200 kB messages shrink a lot.
    assert!(s.bytes_out > 400_000);
}

#[test]
fn deflate_without_context_takeover_either_way() {
    let both = DeflateConfig {
        no_context_takeover: true,
        request_peer_no_context_takeover: true,
        ..DeflateConfig::enabled()
    };
    let (c, s) = check_echo_with(with_deflate(both.clone()), on(), FaultConfig::none(), 2);
    assert_eq!((c.deflate, s.deflate), (1, 1));
    assert_eq!((c.compressed_in, s.compressed_in), (3, 1));
    let (c, s) = check_echo_with(on(), with_deflate(both), FaultConfig::none(), 3);
    assert_eq!((c.deflate, s.deflate), (1, 1));
    assert_eq!((c.compressed_in, s.compressed_in), (3, 1));
}

#[test]
fn deflate_echo_survives_loss_and_reordering() {
    let f = lossy();
    for seed in 11..=13 {
        let (c, s) = check_echo_with(on(), on(), f, seed);
        assert_eq!((c.deflate, s.deflate), (1, 1));
        assert_eq!((c.compressed_in, s.compressed_in), (3, 1));
    }
}

#[test]
fn deflate_on_one_side_only_means_no_extension() {
    let (c, s) = check_echo_with(on(), WsConfig::default(), FaultConfig::none(), 4);
    assert_eq!(
        (c.deflate, s.deflate, c.compressed_out, s.compressed_out),
        (0, 0, 0, 0)
    );
    let (c, s) = check_echo_with(WsConfig::default(), on(), FaultConfig::none(), 5);
    assert_eq!(
        (c.deflate, s.deflate, c.compressed_out, s.compressed_out),
        (0, 0, 0, 0)
    );
}

#[test]
fn raw_compressed_fragmented_and_plain_messages() {
    let mut z = peer();
    let text = "Hello, wörld ✓ κόσμε ".repeat(20);
    let zt = deflated(&mut z, text.as_bytes());
    let (a, b) = zt.split_at(zt.len() / 3);
    let (b, c) = b.split_at(b.len() / 2);
    let bin: Vec<u8> = (0..100_000u32).map(|i| (i % 251) as u8).collect();
    let zb = deflated(&mut z, &bin);
    let long_plain = "plain, but long enough to be compressed on the way back";
    let ze = deflated(&mut z, b"");
    let (seen, stats) = raw_deflate(
        on(),
        "permessage-deflate; client_max_window_bits",
        &[
            // RSV1 on the first frame only, a ping between the fragments.
            raw_frame(0x41, a),
            raw_frame(0x00, b),
            raw_frame(0x89, b"p"),
            raw_frame(0x80, c),
            raw_frame(0xC2, &zb),
            raw_frame(0x81, b"short plain"),
            raw_frame(0x81, long_plain.as_bytes()),
            raw_frame(0xC1, &ze),
            raw_frame(0x88, &CLOSE_1000),
        ],
    );
    assert_eq!(seen.status(), 101, "{}", seen.head);
    assert!(
        seen.head
            .contains("\r\nSec-WebSocket-Extensions: permessage-deflate\r\n"),
        "{}",
        seen.head
    );
    let mut unz = peer();
    let mut got = Vec::new();
    for (b0, p) in &seen.frames {
        if b0 & 0x0F >= 0x8 {
            got.push((*b0, p.clone()));
        } else if b0 & 0x40 != 0 {
            got.push((b0 & !0x40, inflated(&mut unz, p)));
        } else {
            got.push((*b0, p.clone()));
        }
    }
    let compressed: Vec<bool> = seen.frames.iter().map(|(b0, _)| b0 & 0x40 != 0).collect();
    assert_eq!(
        got,
        vec![
            (0x8A, b"p".to_vec()),
            (0x81, text.into_bytes()),
            (0x82, bin),
            (0x81, b"short plain".to_vec()),
            (0x81, long_plain.as_bytes().to_vec()),
            (0x81, Vec::new()),
            (0x88, CLOSE_1000.to_vec()),
        ]
    );
    assert_eq!(
        compressed,
        [false, true, true, false, true, false, false],
        "short messages go back plain"
    );
    assert_eq!(stats.total_errors(), 0);
    assert_eq!(
        (stats.deflate, stats.compressed_in, stats.compressed_out),
        (1, 3, 3)
    );
}

/// The second of two equal messages: tiny with context takeover, as big as the first
/// without.
#[test]
fn context_takeover_shows_on_the_wire() {
    let data = noise(3000, 7);
    let sizes = |cfg: WsConfig, offer: &str| {
        let mut z = peer();
        let m = deflated(&mut z, &data);
        let (seen, stats) = raw_deflate(
            cfg,
            offer,
            &[
                raw_frame(0xC2, &m),
                raw_frame(0xC2, &deflated(&mut z, &data)),
                raw_frame(0x88, &CLOSE_1000),
            ],
        );
        assert_eq!(stats.total_errors(), 0);
        assert_eq!(seen.frames[0].0, 0xC2);
        assert_eq!(seen.frames[1].0, 0xC2);
        (seen.head, seen.frames[0].1.len(), seen.frames[1].1.len())
    };
    let (head, first, second) = sizes(on(), "permessage-deflate");
    assert!(!head.contains("no_context_takeover"), "{head}");
    assert!(first > 2900 && second < 100, "{first} {second}");
    let nct = with_deflate(DeflateConfig {
        no_context_takeover: true,
        ..DeflateConfig::enabled()
    });
    let (head, first, second) = sizes(nct, "permessage-deflate");
    assert!(head.contains("server_no_context_takeover"), "{head}");
    assert!(first > 2900 && second > 2900, "{first} {second}");
    // The client may ask for it too.
    let (head, _, second) = sizes(on(), "permessage-deflate; server_no_context_takeover");
    assert!(head.contains("server_no_context_takeover"), "{head}");
    assert!(second > 2900, "{second}");
}

#[test]
fn corrupt_compressed_data_fails_with_1007() {
    // BTYPE 11 is reserved.
    let (seen, stats) = raw_deflate(on(), "permessage-deflate", &[raw_frame(0xC2, &[0xFF; 8])]);
    assert_eq!(seen.close_code(), Some(close::INVALID_PAYLOAD));
    assert_eq!(stats.error(ProtocolError::BadCompression), 1);
    assert!(seen.closed);
    // A good first fragment (it ends in the header of an empty stored block), then
    // stored-block lengths that do not match (LEN 5, NLEN 0).
    let m = deflated(&mut peer(), "abc".repeat(30).as_bytes());
    let (seen, stats) = raw_deflate(
        on(),
        "permessage-deflate",
        &[raw_frame(0x41, &m), raw_frame(0x80, &[5, 0, 0, 0, 1, 2, 3])],
    );
    assert_eq!(seen.close_code(), Some(close::INVALID_PAYLOAD));
    assert_eq!(stats.error(ProtocolError::BadCompression), 1);
    // Valid DEFLATE that is not UTF-8 text: 1007 too, counted as such.
    let m = deflated(&mut peer(), &[0xC3, 0x28, 0xFF, 0xFE]);
    let (seen, stats) = raw_deflate(on(), "permessage-deflate", &[raw_frame(0xC1, &m)]);
    assert_eq!(seen.close_code(), Some(close::INVALID_PAYLOAD));
    assert_eq!(stats.error(ProtocolError::InvalidUtf8), 1);
}

#[test]
fn a_decompression_bomb_fails_with_1009() {
    let cfg = WsConfig {
        max_message: 1 << 20,
        ..on()
    };
    let zeros = vec![0u8; 8 << 20];
    let bomb = deflated(&mut peer(), &zeros);
    assert!(bomb.len() < 20_000);
    let (seen, stats) = raw_deflate(cfg.clone(), "permessage-deflate", &[raw_frame(0xC2, &bomb)]);
    assert_eq!(seen.close_code(), Some(close::MESSAGE_TOO_BIG));
    assert_eq!(stats.error(ProtocolError::MessageTooBig), 1);
    assert_eq!(stats.messages_in, 0);
    // Exactly at the limit is fine, and goes back compressed.
    let at_limit = deflated(&mut peer(), &zeros[..1 << 20]);
    let (seen, stats) = raw_deflate(
        cfg,
        "permessage-deflate",
        &[raw_frame(0xC2, &at_limit), raw_frame(0x88, &CLOSE_1000)],
    );
    assert_eq!(stats.total_errors(), 0);
    assert_eq!(seen.frames[0].0, 0xC2);
    assert_eq!(inflated(&mut peer(), &seen.frames[0].1), &zeros[..1 << 20]);
}

#[test]
fn rsv1_without_negotiation_fails_with_1002() {
    let m = deflated(&mut peer(), b"hello hello hello hello hello hello");
    // Enabled, but the client offered nothing.
    let (seen, stats) = raw_deflate(on(), "", &[raw_frame(0xC1, &m)]);
    assert!(!seen.head.contains("Extensions"), "{}", seen.head);
    assert_eq!(seen.close_code(), Some(close::PROTOCOL_ERROR));
    assert_eq!(stats.error(ProtocolError::ReservedBits), 1);
    // Offered, but the server has it off.
    let (seen, stats) = raw_deflate(
        WsConfig::default(),
        "permessage-deflate",
        &[raw_frame(0xC1, &m)],
    );
    assert!(!seen.head.contains("Extensions"), "{}", seen.head);
    assert_eq!(seen.close_code(), Some(close::PROTOCOL_ERROR));
    assert_eq!(stats.error(ProtocolError::ReservedBits), 1);
    // Negotiated: RSV1 on a continuation is still an error.
    let (seen, stats) = raw_deflate(
        on(),
        "permessage-deflate",
        &[raw_frame(0x41, &m[..5]), raw_frame(0xC0, &m[5..])],
    );
    assert_eq!(seen.close_code(), Some(close::PROTOCOL_ERROR));
    assert_eq!(stats.error(ProtocolError::CompressedContinuation), 1);
    // Unacceptable offers only: no extension, RSV1 is an error.
    let (seen, stats) = raw_deflate(
        on(),
        "permessage-deflate; server_max_window_bits=99, x-other",
        &[raw_frame(0xC1, &m)],
    );
    assert!(!seen.head.contains("Extensions"), "{}", seen.head);
    assert_eq!(stats.error(ProtocolError::ReservedBits), 1);
}

/// Chooses the XOR stand-in whatever is offered.
struct XorAlways;

impl WsApp for XorAlways {
    type State = ();

    fn message(&mut self, ws: &mut WsHandle<'_, '_, ()>, msg: Message<'_>) {
        WsEcho.message(ws, msg);
    }
}

impl WsServerApp for XorAlways {
    fn open(&mut self, _req: &Request, _peer: SocketAddr) -> Result<Accept<()>, Reject> {
        Ok(Accept::new(()).extension(Box::new(Xor), "x-xor"))
    }
}

#[test]
fn the_applications_extension_wins_over_deflate() {
    let mut s = upgrade_offering("permessage-deflate, x-xor").into_bytes();
    s.extend_from_slice(&raw_frame(0xC2, &[0x55 ^ b'a'; 40]));
    let (seen, stats) = raw_run(XorAlways, on(), s);
    assert!(
        seen.head
            .contains("\r\nSec-WebSocket-Extensions: x-xor\r\n"),
        "{}",
        seen.head
    );
    assert_eq!(stats.deflate, 0);
    assert_eq!(seen.frames[0], (0xC2, vec![0x55 ^ b'a'; 40]));
}

/// A byte-level server: answers the opening handshake with `extension` in its
/// `Sec-WebSocket-Extensions` (none when empty), then records what it gets.
#[derive(Default)]
struct RawServer {
    extension: String,
    request: Vec<u8>,
    answered: bool,
}

impl Handler for RawServer {
    type Conn = ();

    fn accept(&mut self, _l: std::net::SocketAddr, _r: std::net::SocketAddr) -> Option<()> {
        Some(())
    }

    fn data(&mut self, conn: &mut Conn<'_, ()>, data: &[u8]) -> usize {
        self.request.extend_from_slice(data);
        if self.answered || !self.request.windows(4).any(|w| w == b"\r\n\r\n") {
            return data.len();
        }
        self.answered = true;
        let req = Request::parse(&self.request).unwrap();
        let key = accept_key(req.key().unwrap());
        let ext = (!self.extension.is_empty()).then_some(self.extension.as_str());
        let _ = conn.send(&switching_protocols(&key, None, ext, &[]));
        data.len()
    }

    fn peer_closed(&mut self, conn: &mut Conn<'_, ()>) {
        conn.close();
    }
}

/// Closes as soon as it is open; records how it ended.
#[derive(Default)]
struct OpenClose {
    closed: Option<CloseInfo>,
}

impl WsApp for OpenClose {
    type State = ();

    fn opened(&mut self, ws: &mut WsHandle<'_, '_, ()>) {
        ws.close(close::NORMAL, "").unwrap();
    }

    fn message(&mut self, _ws: &mut WsHandle<'_, '_, ()>, _msg: Message<'_>) {}

    fn closed(&mut self, _state: (), info: CloseInfo) {
        self.closed = Some(info);
    }
}

/// Our client (deflate per `deflate`) against a server answering `extension`:
/// the request it sent, whether the handshake completed, its counters.
fn client_against(deflate: DeflateConfig, extension: &str) -> (String, bool, WsStats) {
    let mut client = WsClient::new(OpenClose::default(), with_deflate(deflate));
    let state = client.connection(ClientRequest::new("10.0.0.2:9001", "/"), ());
    let server = RawServer {
        extension: extension.to_string(),
        ..RawServer::default()
    };
    let mut net = connected(client, state, server, FaultConfig::none(), 21);
    let done = net.run_until(Duration::from_secs(30), |n| {
        n.client.handler().app().closed.is_some()
    });
    assert!(done);
    let info = net.client.handler().app().closed.clone().unwrap();
    let request = String::from_utf8_lossy(&net.server.handler().request).into_owned();
    (request, info.opened, *net.client.handler().stats())
}

#[test]
fn client_offers_and_checks_the_answer() {
    let (req, opened, stats) = client_against(DeflateConfig::enabled(), "permessage-deflate");
    assert!(
        req.contains(
            "\r\nSec-WebSocket-Extensions: permessage-deflate; client_max_window_bits\r\n"
        ),
        "{req}"
    );
    assert!(opened);
    assert_eq!((stats.deflate, stats.rejected), (1, 0));
    // Not answered: plain.
    let (_, opened, stats) = client_against(DeflateConfig::enabled(), "");
    assert!(opened);
    assert_eq!((stats.deflate, stats.rejected), (0, 0));
    // Off: no offer; an answer anyway fails the connection (§4.1).
    let (req, opened, stats) = client_against(DeflateConfig::default(), "permessage-deflate");
    assert!(!req.contains("Extensions"), "{req}");
    assert!(!opened);
    assert_eq!(stats.rejected, 1);
    // Bad answers fail it too.
    for bad in [
        "x-unknown",
        "permessage-deflate; server_max_window_bits=16",
        "permessage-deflate; client_max_window_bits",
        "permessage-deflate; client_no_context_takeover=1",
    ] {
        let (_, opened, stats) = client_against(DeflateConfig::enabled(), bad);
        assert!(!opened, "{bad}");
        assert_eq!((stats.rejected, stats.deflate), (1, 0), "{bad}");
    }
}
