//! The decompression limit and garbage input: a bomb stops at the limit, bad blocks are
//! errors, and random bytes never panic.

use super::*;

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
}
