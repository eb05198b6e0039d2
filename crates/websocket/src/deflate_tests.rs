//! Tests of the permessage-deflate module: negotiation (every offer shape the Autobahn
//! TestSuite's cases 12 and 13 make), the RFC 7692 §7.2.3 examples, round trips, chunking,
//! the decompression limit and garbage input.

use super::*;
use proptest::prelude::*;

const BIG: usize = 1 << 24;

fn server_cfg() -> DeflateConfig {
    DeflateConfig::enabled()
}

/// Sample text with repetition near and far (so that windows and context matter).
fn sample(len: usize, seed: u32) -> Vec<u8> {
    let words: [&[u8]; 8] = [
        b"permessage ",
        b"deflate ",
        b"window ",
        b"{\"id\": ",
        b"context takeover ",
        b"Rusty ",
        b"0123456789 ",
        b"\n",
    ];
    let mut x = seed.wrapping_mul(2_654_435_761).wrapping_add(1);
    let mut out = Vec::with_capacity(len + 32);
    while out.len() < len {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        if x.is_multiple_of(7) {
            out.push((x >> 8) as u8);
        } else {
            out.extend_from_slice(words[(x % 8) as usize]);
        }
    }
    out.truncate(len);
    out
}

fn inflate_all(d: &mut PerMessageDeflate, data: &[u8]) -> Result<Vec<u8>, DeflateError> {
    let mut out = Vec::new();
    d.decompress(data, true, &mut out, BIG)?;
    Ok(out)
}

fn pair(neg: &Negotiated, cfg: &DeflateConfig) -> (PerMessageDeflate, PerMessageDeflate) {
    (
        PerMessageDeflate::new(neg, Role::Server, cfg),
        PerMessageDeflate::new(neg, Role::Client, cfg),
    )
}

// ---- header grammar ---------------------------------------------------------------------

#[test]
fn extension_list_grammar() {
    let list = parse_extension_list(
        " foo ,, Permessage-Deflate ;\tClient_Max_Window_Bits ; server_max_window_bits = \"10\" , bar; x=\"a,b;c\\\"\"",
    );
    assert_eq!(list.len(), 3);
    assert_eq!(list[0].as_ref().unwrap().name, "foo");
    let pmd = list[1].as_ref().unwrap();
    assert_eq!(pmd.name, "permessage-deflate");
    assert_eq!(
        pmd.params,
        vec![
            ("client_max_window_bits".to_string(), None),
            ("server_max_window_bits".to_string(), Some("10".to_string())),
        ]
    );
    let bar = list[2].as_ref().unwrap();
    assert_eq!(
        bar.params,
        vec![("x".to_string(), Some("a,b;c\"".to_string()))]
    );

    // Malformed elements are errors in place; the rest still parses.
    let list = parse_extension_list("a b, permessage-deflate; =1, c; d=e f, ok");
    let oks: Vec<bool> = list.iter().map(Result::is_ok).collect();
    assert_eq!(oks, [false, false, false, true]);
    // An unclosed quote spoils its element and everything after it.
    let list = parse_extension_list("ok1, x; y=\"unclosed, permessage-deflate");
    assert_eq!(list.len(), 2);
    assert!(list[0].is_ok() && list[1].is_err());
}

// ---- server negotiation -----------------------------------------------------------------

/// server_no_context_takeover, client_no_context_takeover, server and client window bits.
type Expect = (bool, bool, u8, u8);

/// The offers the Autobahn client makes in cases 12.* and 13.* (`getExtensionString` of its
/// `PerMessageDeflateOffer`s), with the response we give and what is then in force.
#[test]
fn autobahn_offer_shapes() {
    let ab = "permessage-deflate; client_no_context_takeover; client_max_window_bits";
    let cases: [(String, &str, Expect); 7] = [
        // 12.* and 13.1: the default offer.
        (ab.to_string(), "permessage-deflate", (false, false, 15, 15)),
        // 13.2: (requestNoContextTakeover = True, requestMaxWindowBits = 0)
        (
            format!("{ab}; server_no_context_takeover"),
            "permessage-deflate; server_no_context_takeover",
            (true, false, 15, 15),
        ),
        // 13.3: (False, 9)
        (
            format!("{ab}; server_max_window_bits=9"),
            "permessage-deflate; server_max_window_bits=9",
            (false, false, 9, 15),
        ),
        // 13.4: (False, 15)
        (
            format!("{ab}; server_max_window_bits=15"),
            "permessage-deflate; server_max_window_bits=15",
            (false, false, 15, 15),
        ),
        // 13.5: (True, 9)
        (
            format!("{ab}; server_no_context_takeover; server_max_window_bits=9"),
            "permessage-deflate; server_no_context_takeover; server_max_window_bits=9",
            (true, false, 9, 15),
        ),
        // 13.6: (True, 15)
        (
            format!("{ab}; server_no_context_takeover; server_max_window_bits=15"),
            "permessage-deflate; server_no_context_takeover; server_max_window_bits=15",
            (true, false, 15, 15),
        ),
        // 13.7: three offers in one header; the first is accepted.
        (
            format!(
                "{ab}; server_no_context_takeover; server_max_window_bits=9, \
                 {ab}; server_no_context_takeover, {ab}"
            ),
            "permessage-deflate; server_no_context_takeover; server_max_window_bits=9",
            (true, false, 9, 15),
        ),
    ];
    for (offer, response, (snct, cnct, sbits, cbits)) in &cases {
        let (neg, header) = negotiate(offer, &server_cfg()).expect(offer);
        assert_eq!(header, *response, "offer {offer}");
        assert_eq!(
            neg,
            Negotiated {
                server_no_context_takeover: *snct,
                client_no_context_takeover: *cnct,
                server_max_window_bits: *sbits,
                client_max_window_bits: *cbits,
            },
            "offer {offer}"
        );
        // The response is one the client side (ours) accepts for the matching offer.
        let client_cfg = DeflateConfig {
            request_peer_no_context_takeover: *snct,
            peer_max_window_bits: if offer.contains("=9") { 9 } else { 15 },
            ..DeflateConfig::enabled()
        };
        let accepted = client_accept(response, &client_cfg).unwrap();
        assert_eq!(accepted, neg, "offer {offer}");
        // And the connection works both ways with these parameters.
        let (mut server, mut client) = pair(&neg, &DeflateConfig::enabled());
        for i in 0..4 {
            let msg = sample(3000, i);
            let mut wire = Vec::new();
            server.compress(&msg, &mut wire).unwrap();
            assert_eq!(inflate_all(&mut client, &wire).unwrap(), msg);
            wire.clear();
            client.compress(&msg, &mut wire).unwrap();
            assert_eq!(inflate_all(&mut server, &wire).unwrap(), msg);
        }
    }
}

#[test]
fn server_skips_bad_offers() {
    let cfg = server_cfg();
    let bad = [
        "permessage-deflate; foo",
        "permessage-deflate; server_no_context_takeover; server_no_context_takeover",
        "permessage-deflate; client_max_window_bits; client_max_window_bits=10",
        "permessage-deflate; server_max_window_bits",
        "permessage-deflate; server_max_window_bits=7",
        "permessage-deflate; server_max_window_bits=16",
        "permessage-deflate; server_max_window_bits=08",
        "permessage-deflate; server_max_window_bits=+9",
        "permessage-deflate; server_max_window_bits=\"\"",
        "permessage-deflate; client_max_window_bits=0",
        "permessage-deflate; client_max_window_bits=abc",
        "permessage-deflate; server_no_context_takeover=1",
        "permessage-deflate; client_no_context_takeover=\"\"",
        "permessage-deflate; server_max_window_bits=\"10",
        "permessage-deflate;",
        "permessage-deflatex",
        "x-webkit-deflate-frame",
        "",
    ];
    for offer in bad {
        assert_eq!(negotiate(offer, &cfg), None, "offer {offer:?}");
        // Followed by a good offer, the good one is taken (unless an unclosed quote
        // swallowed it).
        let two = format!("{offer}, permessage-deflate; server_max_window_bits=12");
        let got = negotiate(&two, &cfg).map(|(_, h)| h);
        if offer.contains("\"10") {
            assert_eq!(got, None);
        } else {
            assert_eq!(
                got.as_deref(),
                Some("permessage-deflate; server_max_window_bits=12"),
                "offers {two:?}"
            );
        }
    }
    // Disabled: never.
    assert_eq!(
        negotiate("permessage-deflate", &DeflateConfig::default()),
        None
    );
    // Quoted values, case and whitespace are fine.
    let (neg, header) = negotiate(
        "PerMessage-Deflate ;SERVER_MAX_WINDOW_BITS=\"10\";\tclient_max_window_bits = \"11\"",
        &cfg,
    )
    .unwrap();
    assert_eq!(
        header,
        "permessage-deflate; server_max_window_bits=10; client_max_window_bits=11"
    );
    assert_eq!(
        (neg.server_max_window_bits, neg.client_max_window_bits),
        (10, 11)
    );
}

#[test]
fn server_configuration_shapes_the_response() {
    let cfg = DeflateConfig {
        no_context_takeover: true,
        request_peer_no_context_takeover: true,
        max_window_bits: 12,
        peer_max_window_bits: 10,
        ..DeflateConfig::enabled()
    };
    let (neg, header) = negotiate("permessage-deflate; client_max_window_bits", &cfg).unwrap();
    assert_eq!(
        header,
        "permessage-deflate; server_no_context_takeover; client_no_context_takeover; \
         server_max_window_bits=12; client_max_window_bits=10"
    );
    assert_eq!(
        neg,
        Negotiated {
            server_no_context_takeover: true,
            client_no_context_takeover: true,
            server_max_window_bits: 12,
            client_max_window_bits: 10,
        }
    );
    // Without client_max_window_bits in the offer we must not answer it.
    let (neg, header) = negotiate("permessage-deflate; server_max_window_bits=9", &cfg).unwrap();
    assert!(!header.contains("client_max_window_bits"));
    assert_eq!(
        (neg.server_max_window_bits, neg.client_max_window_bits),
        (9, 15)
    );
    // An offer asking for server_no_context_takeover is declined when we refuse it.
    let refuse = DeflateConfig {
        accept_no_context_takeover: false,
        ..DeflateConfig::enabled()
    };
    assert_eq!(
        negotiate("permessage-deflate; server_no_context_takeover", &refuse),
        None
    );
    let (_, header) = negotiate(
        "permessage-deflate; server_no_context_takeover, permessage-deflate",
        &refuse,
    )
    .unwrap();
    assert_eq!(header, "permessage-deflate");
}

/// `server_max_window_bits=8` is accepted; we then send stored blocks (no back-references),
/// which respect a 256-byte window, and prefer to send uncompressed.
#[test]
fn server_window_of_8_bits() {
    let (neg, header) = negotiate(
        "permessage-deflate; server_max_window_bits=8",
        &server_cfg(),
    )
    .unwrap();
    assert_eq!(header, "permessage-deflate; server_max_window_bits=8");
    let (mut server, mut client) = pair(&neg, &DeflateConfig::enabled());
    assert!(!server.should_compress(1 << 20));
    assert!(client.should_compress(1 << 20));
    for i in 0..3 {
        let msg = sample(200_000, i);
        let mut wire = Vec::new();
        server.compress(&msg, &mut wire).unwrap();
        assert!(wire.len() > msg.len());
        assert_eq!(inflate_all(&mut client, &wire).unwrap(), msg);
    }
    // Our direction: the client's compressor may be limited to 8 bits as well.
    let neg8 = Negotiated {
        client_max_window_bits: 8,
        ..Negotiated::default()
    };
    let (mut server, mut client) = pair(&neg8, &DeflateConfig::enabled());
    let msg = sample(5000, 9);
    let mut wire = Vec::new();
    client.compress(&msg, &mut wire).unwrap();
    assert_eq!(inflate_all(&mut server, &wire).unwrap(), msg);
}

// ---- client side --------------------------------------------------------------------------

#[test]
fn client_offer_shapes() {
    assert_eq!(client_offer(&DeflateConfig::default()), "");
    assert_eq!(
        client_offer(&DeflateConfig::enabled()),
        "permessage-deflate; client_max_window_bits"
    );
    let cfg = DeflateConfig {
        no_context_takeover: true,
        request_peer_no_context_takeover: true,
        max_window_bits: 11,
        peer_max_window_bits: 9,
        ..DeflateConfig::enabled()
    };
    let offer = client_offer(&cfg);
    assert_eq!(
        offer,
        "permessage-deflate; client_no_context_takeover; server_no_context_takeover; \
         client_max_window_bits=11; server_max_window_bits=9"
    );
    // Our own server accepts our own offer, and our client accepts its answer.
    let (neg, header) = negotiate(&offer, &server_cfg()).unwrap();
    assert_eq!(
        client_accept(&header, &cfg).unwrap(),
        Negotiated {
            client_no_context_takeover: true,
            ..neg
        }
    );
}

#[test]
fn client_accepts_valid_responses() {
    let cfg = DeflateConfig::enabled();
    let ok = |r: &str| client_accept(r, &cfg).unwrap();
    assert_eq!(ok("permessage-deflate"), Negotiated::default());
    // The responses Autobahn's server side gives in cases 13.1 .. 13.7 to our default offer.
    assert_eq!(
        ok("permessage-deflate; client_no_context_takeover"),
        Negotiated {
            client_no_context_takeover: true,
            ..Negotiated::default()
        }
    );
    assert_eq!(
        ok("permessage-deflate; client_max_window_bits=9"),
        Negotiated {
            client_max_window_bits: 9,
            ..Negotiated::default()
        }
    );
    assert_eq!(
        ok("permessage-deflate; client_no_context_takeover; client_max_window_bits=15"),
        Negotiated {
            client_no_context_takeover: true,
            ..Negotiated::default()
        }
    );
    // The server may announce a smaller window and no context takeover unasked.
    assert_eq!(
        ok("permessage-deflate;server_no_context_takeover;server_max_window_bits=\"10\""),
        Negotiated {
            server_no_context_takeover: true,
            server_max_window_bits: 10,
            ..Negotiated::default()
        }
    );
    // Other extensions are left to the caller.
    assert_eq!(ok("foo, permessage-deflate"), Negotiated::default());
}

#[test]
fn client_rejects_invalid_responses() {
    let cfg = DeflateConfig {
        peer_max_window_bits: 12,
        request_peer_no_context_takeover: true,
        ..DeflateConfig::enabled()
    };
    let good = "permessage-deflate; server_no_context_takeover; server_max_window_bits=12";
    assert!(client_accept(good, &cfg).is_ok());
    let bad = [
        "",
        "foo",
        "permessage-deflate; server_no_context_takeover; server_max_window_bits=13",
        "permessage-deflate; server_max_window_bits=12",
        "permessage-deflate; server_no_context_takeover",
        "permessage-deflate; server_no_context_takeover; server_max_window_bits=12; client_max_window_bits",
        "permessage-deflate; server_no_context_takeover; server_max_window_bits=12; client_max_window_bits=16",
        "permessage-deflate; server_no_context_takeover; server_max_window_bits=12; x=1",
        "permessage-deflate; server_no_context_takeover; server_no_context_takeover; server_max_window_bits=12",
        "permessage-deflate; server_no_context_takeover=yes; server_max_window_bits=12",
        "permessage-deflate; server_no_context_takeover; server_max_window_bits=012",
        "permessage-deflate; server_no_context_takeover; server_max_window_bits=12, permessage-deflate",
        "permessage-deflate; server_no_context_takeover; server_max_window_bits=12, b@d",
    ];
    for r in bad {
        assert!(
            matches!(
                client_accept(r, &cfg),
                Err(DeflateError::InvalidResponse(_))
            ),
            "response {r:?}"
        );
    }
    // Not offered at all.
    assert!(client_accept("permessage-deflate", &DeflateConfig::default()).is_err());
    // client_no_context_takeover when we refuse it.
    let refuse = DeflateConfig {
        accept_no_context_takeover: false,
        ..DeflateConfig::enabled()
    };
    assert!(client_accept("permessage-deflate; client_no_context_takeover", &refuse).is_err());
}

// ---- RFC 7692 §7.2.3 examples -----------------------------------------------------------

const HELLO_FIXED: [u8; 7] = [0xf2, 0x48, 0xcd, 0xc9, 0xc9, 0x07, 0x00];

#[test]
fn rfc_example_one_block() {
    let (mut server, _) = pair(&Negotiated::default(), &DeflateConfig::enabled());
    assert_eq!(inflate_all(&mut server, &HELLO_FIXED).unwrap(), b"Hello");
    // Our compressor writes the same bytes.
    let (_, mut client) = pair(&Negotiated::default(), &DeflateConfig::enabled());
    let mut wire = Vec::new();
    client.compress(b"Hello", &mut wire).unwrap();
    assert_eq!(wire, HELLO_FIXED);
}

#[test]
fn rfc_example_context_takeover() {
    // §7.2.3.2: the second "Hello" refers back into the first message.
    let second = [0xf2, 0x00, 0x11, 0x00, 0x00];
    let (mut server, _) = pair(&Negotiated::default(), &DeflateConfig::enabled());
    assert_eq!(inflate_all(&mut server, &HELLO_FIXED).unwrap(), b"Hello");
    assert_eq!(inflate_all(&mut server, &second).unwrap(), b"Hello");
    // Without the first message, the reference is invalid: an error, not a panic.
    let (mut fresh, _) = pair(&Negotiated::default(), &DeflateConfig::enabled());
    assert!(matches!(
        inflate_all(&mut fresh, &second),
        Err(DeflateError::Corrupt(_))
    ));
    // When the client resets (client_no_context_takeover), the server's decompressor does
    // too, and so the same reference fails.
    let neg = Negotiated {
        client_no_context_takeover: true,
        ..Negotiated::default()
    };
    let (mut server, _) = pair(&neg, &DeflateConfig::enabled());
    assert_eq!(inflate_all(&mut server, &HELLO_FIXED).unwrap(), b"Hello");
    assert!(inflate_all(&mut server, &second).is_err());

    // Our compressor with context takeover: the second message is shorter and refers back.
    let (_, mut client) = pair(&Negotiated::default(), &DeflateConfig::enabled());
    let (mut first, mut again) = (Vec::new(), Vec::new());
    client.compress(b"Hello", &mut first).unwrap();
    client.compress(b"Hello", &mut again).unwrap();
    assert!(again.len() < first.len(), "{again:x?}");
    let (mut server, _) = pair(&Negotiated::default(), &DeflateConfig::enabled());
    assert_eq!(inflate_all(&mut server, &first).unwrap(), b"Hello");
    assert_eq!(inflate_all(&mut server, &again).unwrap(), b"Hello");
    // With no context takeover each message stands alone and compresses the same.
    let (_, mut client) = pair(&neg, &DeflateConfig::enabled());
    let (mut first, mut again) = (Vec::new(), Vec::new());
    client.compress(b"Hello", &mut first).unwrap();
    client.compress(b"Hello", &mut again).unwrap();
    assert_eq!(first, HELLO_FIXED);
    assert_eq!(again, HELLO_FIXED);
}

#[test]
fn rfc_example_stored_block() {
    // §7.2.3.3: "Hello" in a DEFLATE block with no compression.
    let stored = [
        0x00, 0x05, 0x00, 0xfa, 0xff, 0x48, 0x65, 0x6c, 0x6c, 0x6f, 0x00,
    ];
    let (mut server, _) = pair(&Negotiated::default(), &DeflateConfig::enabled());
    assert_eq!(inflate_all(&mut server, &stored).unwrap(), b"Hello");
    // That is exactly what we send with an 8-bit window.
    let neg = Negotiated {
        client_max_window_bits: 8,
        ..Negotiated::default()
    };
    let (_, mut client) = pair(&neg, &DeflateConfig::enabled());
    let mut wire = Vec::new();
    client.compress(b"Hello", &mut wire).unwrap();
    assert_eq!(wire, stored);
    // And an empty message as a single 0x00 octet.
    wire.clear();
    client.compress(b"", &mut wire).unwrap();
    assert_eq!(wire, [0x00]);
    assert_eq!(inflate_all(&mut server, &wire).unwrap(), b"");
}

#[test]
fn rfc_example_bfinal_and_two_blocks() {
    // §7.2.3.4: BFINAL set, followed by a 0x00 octet; the next message still decodes.
    let bfinal = [0xf3, 0x48, 0xcd, 0xc9, 0xc9, 0x07, 0x00, 0x00];
    let (mut server, _) = pair(&Negotiated::default(), &DeflateConfig::enabled());
    assert_eq!(inflate_all(&mut server, &bfinal).unwrap(), b"Hello");
    assert_eq!(inflate_all(&mut server, &HELLO_FIXED).unwrap(), b"Hello");
    assert_eq!(inflate_all(&mut server, &bfinal).unwrap(), b"Hello");
    // §7.2.3.5: two DEFLATE blocks in one message ("He" flushed, then "llo").
    let two = [
        0xf2, 0x48, 0x05, 0x00, 0x00, 0x00, 0xff, 0xff, 0xca, 0xc9, 0xc9, 0x07, 0x00,
    ];
    assert_eq!(inflate_all(&mut server, &two).unwrap(), b"Hello");
    // An empty compressed message (a lone empty stored block header).
    assert_eq!(inflate_all(&mut server, &[0x00]).unwrap(), b"");
}

// ---- round trips ------------------------------------------------------------------------

/// Sends `msgs` from `tx` to `rx`, each message's compressed payload split into frames of
/// `frame` bytes and each frame delivered in pieces of `piece` bytes.
fn send_all(
    tx: &mut PerMessageDeflate,
    rx: &mut PerMessageDeflate,
    msgs: &[Vec<u8>],
    frame: usize,
    piece: usize,
) {
    for msg in msgs {
        let mut wire = Vec::new();
        tx.compress(msg, &mut wire).unwrap();
        let mut out = Vec::new();
        let frames: Vec<&[u8]> = if wire.is_empty() {
            vec![&[]]
        } else {
            wire.chunks(frame).collect()
        };
        for (i, f) in frames.iter().enumerate() {
            let last_frame = i + 1 == frames.len();
            let pieces: Vec<&[u8]> = f.chunks(piece).collect();
            for (j, p) in pieces.iter().enumerate() {
                let eom = last_frame && j + 1 == pieces.len();
                rx.decompress(p, eom, &mut out, BIG).unwrap();
            }
            if pieces.is_empty() && last_frame {
                rx.finish_message(&mut out, BIG).unwrap();
            }
        }
        assert_eq!(out.len(), msg.len());
        assert!(out == *msg, "message differs");
    }
}

#[test]
fn round_trips_all_windows_and_takeover_modes() {
    let msgs: Vec<Vec<u8>> = [0, 1, 5, 100, 4000, 40_000, 70_000, 300_000, 0, 64]
        .iter()
        .enumerate()
        .map(|(i, &n)| sample(n, i as u32))
        .collect();
    for bits in 8..=15u8 {
        for (snct, cnct) in [(false, false), (true, false), (false, true), (true, true)] {
            let neg = Negotiated {
                server_no_context_takeover: snct,
                client_no_context_takeover: cnct,
                server_max_window_bits: bits,
                client_max_window_bits: 23 - bits,
            };
            for level in [1, 6, 9] {
                let cfg = DeflateConfig {
                    level,
                    ..DeflateConfig::enabled()
                };
                let (mut server, mut client) = pair(&neg, &cfg);
                send_all(&mut server, &mut client, &msgs, 1 << 20, 1 << 20);
                send_all(&mut client, &mut server, &msgs, 4096, 1000);
            }
        }
    }
}

// ---- an independent DEFLATE reader (RFC 1951) ---------------------------------------------

/// Reads bits least-significant first (RFC 1951 §3.1.1).
struct BitReader<'a> {
    data: &'a [u8],
    pos: usize,
}

impl BitReader<'_> {
    fn bits(&mut self, n: u32) -> u32 {
        let mut v = 0;
        for i in 0..n {
            let byte = self.data[self.pos / 8];
            v |= u32::from((byte >> (self.pos % 8)) & 1) << i;
            self.pos += 1;
        }
        v
    }

    fn align(&mut self) {
        self.pos = self.pos.div_ceil(8) * 8;
    }
}

/// A canonical Huffman code: how many codes of each length, and the symbols in code order.
struct Code {
    count: [u16; 16],
    symbols: Vec<u16>,
}

impl Code {
    fn new(lengths: &[u8]) -> Code {
        let mut count = [0u16; 16];
        for &l in lengths {
            count[l as usize] += 1;
        }
        count[0] = 0;
        let mut symbols = Vec::new();
        for len in 1..16u8 {
            for (sym, &l) in lengths.iter().enumerate() {
                if l == len {
                    symbols.push(sym as u16);
                }
            }
        }
        Code { count, symbols }
    }

    /// Canonical codes of one length are consecutive and follow the shorter ones.
    fn decode(&self, r: &mut BitReader<'_>) -> u16 {
        let (mut code, mut first, mut index) = (0i32, 0i32, 0i32);
        for len in 1..16 {
            code |= r.bits(1) as i32;
            let n = i32::from(self.count[len]);
            if code - first < n {
                return self.symbols[(index + code - first) as usize];
            }
            index += n;
            first = (first + n) << 1;
            code <<= 1;
        }
        panic!("invalid Huffman code");
    }
}

const LEN_BASE: [u16; 29] = [
    3, 4, 5, 6, 7, 8, 9, 10, 11, 13, 15, 17, 19, 23, 27, 31, 35, 43, 51, 59, 67, 83, 99, 115, 131,
    163, 195, 227, 258,
];
const LEN_EXTRA: [u8; 29] = [
    0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3, 4, 4, 4, 4, 5, 5, 5, 5, 0,
];
const DIST_BASE: [u32; 30] = [
    1, 2, 3, 4, 5, 7, 9, 13, 17, 25, 33, 49, 65, 97, 129, 193, 257, 385, 513, 769, 1025, 1537,
    2049, 3073, 4097, 6145, 8193, 12289, 16385, 24577,
];
const DIST_EXTRA: [u8; 30] = [
    0, 0, 0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7, 8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13,
    13,
];

/// Decodes one message's DEFLATE data (tail appended) onto `history` (the earlier
/// messages' output) and returns the largest back-reference distance it used.
fn read_deflate(data: &[u8], history: &mut Vec<u8>) -> usize {
    let mut r = BitReader { data, pos: 0 };
    let mut max_dist = 0;
    while r.pos.div_ceil(8) < data.len() {
        let last = r.bits(1) == 1;
        match r.bits(2) {
            0 => {
                r.align();
                let len = r.bits(16);
                assert_eq!(len ^ 0xffff, r.bits(16), "NLEN");
                for _ in 0..len {
                    history.push(r.bits(8) as u8);
                }
            }
            kind @ (1 | 2) => {
                let (lit, dist) = if kind == 1 {
                    let mut l = [8u8; 288];
                    l[144..256].fill(9);
                    l[256..280].fill(7);
                    (Code::new(&l), Code::new(&[5; 30]))
                } else {
                    let hlit = r.bits(5) as usize + 257;
                    let hdist = r.bits(5) as usize + 1;
                    let hclen = r.bits(4) as usize + 4;
                    let order = [
                        16, 17, 18, 0, 8, 7, 9, 6, 10, 5, 11, 4, 12, 3, 13, 2, 14, 1, 15,
                    ];
                    let mut cl = [0u8; 19];
                    for &i in &order[..hclen] {
                        cl[i] = r.bits(3) as u8;
                    }
                    let cl = Code::new(&cl);
                    let mut lengths = Vec::new();
                    while lengths.len() < hlit + hdist {
                        match cl.decode(&mut r) {
                            sym @ 0..=15 => lengths.push(sym as u8),
                            16 => {
                                let prev = *lengths.last().unwrap();
                                let n = 3 + r.bits(2);
                                lengths.extend((0..n).map(|_| prev));
                            }
                            17 => lengths.extend((0..3 + r.bits(3)).map(|_| 0)),
                            _ => lengths.extend((0..11 + r.bits(7)).map(|_| 0)),
                        }
                    }
                    (Code::new(&lengths[..hlit]), Code::new(&lengths[hlit..]))
                };
                loop {
                    let sym = lit.decode(&mut r) as usize;
                    if sym < 256 {
                        history.push(sym as u8);
                    } else if sym == 256 {
                        break;
                    } else {
                        let i = sym - 257;
                        let len = LEN_BASE[i] as usize + r.bits(u32::from(LEN_EXTRA[i])) as usize;
                        let d = dist.decode(&mut r) as usize;
                        let d = DIST_BASE[d] as usize + r.bits(u32::from(DIST_EXTRA[d])) as usize;
                        assert!(d <= history.len(), "distance before the start");
                        max_dist = max_dist.max(d);
                        for _ in 0..len {
                            history.push(history[history.len() - d]);
                        }
                    }
                }
            }
            _ => panic!("reserved block type"),
        }
        if last {
            break;
        }
    }
    max_dist
}

/// The compressor never refers further back than its window (checked with the reader
/// above: zlib-rs's inflater always keeps a 32 KiB window, so it cannot tell), in every
/// context-takeover mode, and the reader agrees on the content.
#[test]
fn compressor_respects_the_window() {
    for bits in 9..=15u8 {
        for reset in [false, true] {
            let neg = Negotiated {
                server_max_window_bits: bits,
                server_no_context_takeover: reset,
                ..Negotiated::default()
            };
            let (mut server, _) = pair(&neg, &DeflateConfig::enabled());
            // Text with near and far repetition, long enough to fill any window.
            let mut history = Vec::new();
            let mut max_dist = 0;
            for i in 0..3 {
                let msg = sample(40_000 + i * 1000, i as u32 % 2);
                let mut wire = Vec::new();
                server.compress(&msg, &mut wire).unwrap();
                wire.extend_from_slice(&TAIL);
                if reset {
                    history.clear();
                }
                let start = history.len();
                max_dist = max_dist.max(read_deflate(&wire, &mut history));
                assert!(history[start..] == msg[..], "bits {bits}");
            }
            assert!(max_dist <= 1 << bits, "bits {bits}: distance {max_dist}");
            // The window is used: zlib reaches up to the window less 262 bytes (its
            // MIN_LOOKAHEAD), far past half of it on this text.
            assert!(
                max_dist > (1 << bits) * 3 / 4 - 262,
                "bits {bits}: distance {max_dist}"
            );
        }
    }
}

/// The reader above reads what zlib-rs writes, and catches a compressor with a larger
/// window than asked for.
#[test]
fn window_check_can_fail() {
    let mut c = Compress::new_with_window_bits(Compression::new(6), false, 15);
    let msg = sample(40_000, 0);
    let mut wire = Vec::with_capacity(50_000);
    c.compress_vec(&msg, &mut wire, FlushCompress::Sync)
        .unwrap();
    let mut history = Vec::new();
    assert!(read_deflate(&wire, &mut history) > 1 << 9);
    assert!(history == msg);
}

/// Every split of a message's compressed payload into two frames, and each of those frames
/// into two pieces at every position, decodes the same.
#[test]
fn every_split_position() {
    let msg = sample(1500, 3);
    for takeover in [false, true] {
        let neg = Negotiated {
            server_no_context_takeover: !takeover,
            ..Negotiated::default()
        };
        let (mut server, _) = pair(&neg, &DeflateConfig::enabled());
        // The second message with takeover refers into the first.
        let mut first = Vec::new();
        server.compress(&msg, &mut first).unwrap();
        let mut wire = Vec::new();
        server.compress(&msg, &mut wire).unwrap();
        for cut in 0..=wire.len() {
            for sub in 0..=cut {
                let (_, mut client) = pair(&neg, &DeflateConfig::enabled());
                let mut out = Vec::new();
                client.decompress(&first, true, &mut out, BIG).unwrap();
                out.clear();
                client
                    .decompress(&wire[..sub], false, &mut out, BIG)
                    .unwrap();
                client
                    .decompress(&wire[sub..cut], false, &mut out, BIG)
                    .unwrap();
                client
                    .decompress(&wire[cut..], true, &mut out, BIG)
                    .unwrap();
                assert!(out == msg, "cut {cut} sub {sub}");
            }
        }
        // One byte at a time.
        let (_, mut client) = pair(&neg, &DeflateConfig::enabled());
        let mut out = Vec::new();
        client.decompress(&first, true, &mut out, BIG).unwrap();
        out.clear();
        for b in wire.chunks(1) {
            client.decompress(b, false, &mut out, BIG).unwrap();
        }
        client.finish_message(&mut out, BIG).unwrap();
        assert!(out == msg);
    }
}

#[test]
fn uncompressed_messages_leave_the_context_alone() {
    // A message sent uncompressed (below the threshold) does not enter either window.
    let cfg = DeflateConfig {
        min_compress_size: 100,
        ..DeflateConfig::enabled()
    };
    let (mut server, mut client) = pair(&Negotiated::default(), &cfg);
    assert!(!server.should_compress(99));
    assert!(server.should_compress(100));
    let msgs = [sample(500, 1), sample(500, 2)];
    send_all(&mut server, &mut client, &msgs[..1], 100, 7);
    // (a short message goes out plain here: nothing to do on either side)
    send_all(&mut server, &mut client, &msgs[1..], 100, 7);
}

// ---- limits and garbage -------------------------------------------------------------------

#[test]
fn decompression_bomb_is_stopped_at_the_limit() {
    let (mut server, mut client) = pair(&Negotiated::default(), &DeflateConfig::enabled());
    let bomb = vec![0u8; 50 << 20];
    let mut wire = Vec::new();
    server.compress(&bomb, &mut wire).unwrap();
    assert!(wire.len() < 100_000, "{}", wire.len());
    let limit = 1 << 20;
    let mut out = Vec::new();
    let err = client.decompress(&wire, true, &mut out, limit).unwrap_err();
    assert_eq!(err, DeflateError::TooLarge { limit });
    assert!(out.len() <= limit);
    assert!(out.capacity() <= limit, "capacity {}", out.capacity());
    assert!(err.to_string().contains("limit"));

    // Exactly at the limit is fine; one byte more is not; also when fed in pieces.
    for piece in [1usize, 3, 1000, usize::MAX] {
        let msg = sample(10_000, 5);
        let (mut server, _) = pair(&Negotiated::default(), &DeflateConfig::enabled());
        let mut wire = Vec::new();
        server.compress(&msg, &mut wire).unwrap();
        for (limit, ok) in [(msg.len(), true), (msg.len() - 1, false)] {
            let (_, mut client) = pair(&Negotiated::default(), &DeflateConfig::enabled());
            let mut out = Vec::new();
            let mut result = Ok(());
            for p in wire.chunks(piece.min(wire.len())) {
                result = result.and_then(|()| client.decompress(p, false, &mut out, limit));
            }
            result = result.and_then(|()| client.finish_message(&mut out, limit));
            assert_eq!(result.is_ok(), ok, "piece {piece} limit {limit}");
            assert!(out.len() <= limit && out.capacity() <= limit.max(wire.len()));
            if ok {
                assert!(out == msg);
            }
        }
    }
    // The limit counts what `out` already holds.
    let mut out = vec![1u8; 10];
    let (_, mut client) = pair(&Negotiated::default(), &DeflateConfig::enabled());
    assert!(client.decompress(&HELLO_FIXED, true, &mut out, 14).is_err());
    let (_, mut client) = pair(&Negotiated::default(), &DeflateConfig::enabled());
    out.truncate(10);
    client.decompress(&HELLO_FIXED, true, &mut out, 15).unwrap();
    assert_eq!(&out[10..], b"Hello");
}

#[test]
fn garbage_is_an_error() {
    let (mut server, _) = pair(&Negotiated::default(), &DeflateConfig::enabled());
    // BTYPE 11 is reserved.
    assert!(matches!(
        inflate_all(&mut server, &[0xff, 0xff, 0xff]),
        Err(DeflateError::Corrupt(_))
    ));
    // A stored block whose NLEN does not match LEN.
    let (mut server, _) = pair(&Negotiated::default(), &DeflateConfig::enabled());
    assert!(inflate_all(&mut server, &[0x00, 0x05, 0x00, 0x00, 0x00, b'x']).is_err());
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// Random bytes, in random pieces, never panic and never pass the limit.
    #[test]
    fn random_bytes_never_panic(
        data in proptest::collection::vec(any::<u8>(), 0..2000),
        cut in any::<prop::sample::Index>(),
        limit in 0usize..5000,
        takeover in any::<bool>(),
    ) {
        let neg = Negotiated { client_no_context_takeover: !takeover, ..Negotiated::default() };
        let (mut server, _) = pair(&neg, &DeflateConfig::enabled());
        let cut = cut.index(data.len() + 1);
        let mut out = Vec::new();
        let r = server
            .decompress(&data[..cut], false, &mut out, limit)
            .and_then(|()| server.decompress(&data[cut..], true, &mut out, limit));
        prop_assert!(out.len() <= limit);
        if r.is_ok() {
            // A second message through the same state must not panic either.
            let _ = server.decompress(&data, true, &mut Vec::new(), limit);
        }
    }

    /// Random messages, windows, modes and piece sizes round-trip.
    #[test]
    fn random_round_trips(
        msgs in proptest::collection::vec(proptest::collection::vec(0u8..4, 0..3000), 1..5),
        bits in 8u8..=15,
        snct in any::<bool>(),
        piece in 1usize..700,
        level in 0u32..=9,
    ) {
        let neg = Negotiated {
            server_no_context_takeover: snct,
            server_max_window_bits: bits,
            ..Negotiated::default()
        };
        let cfg = DeflateConfig { level, ..DeflateConfig::enabled() };
        let (mut server, mut client) = pair(&neg, &cfg);
        send_all(&mut server, &mut client, &msgs, piece * 2 + 1, piece);
    }
}
