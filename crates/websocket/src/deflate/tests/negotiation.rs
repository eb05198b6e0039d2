//! Negotiation: the `Sec-WebSocket-Extensions` grammar, the server's choice among the
//! offers (every shape the Autobahn TestSuite's cases 12 and 13 make) and the client's
//! offer and its check of the answer.

use super::*;

fn server_cfg() -> DeflateConfig {
    DeflateConfig::enabled()
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
