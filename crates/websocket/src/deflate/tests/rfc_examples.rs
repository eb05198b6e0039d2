//! The examples of RFC 7692 §7.2.3, decoded and, where our compressor writes them,
//! encoded byte for byte.

use super::*;

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
