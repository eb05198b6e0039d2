//! Round trips: every window and context-takeover mode, compressed payloads cut into
//! frames and pieces at every position, and messages sent plain between compressed ones.

use super::*;

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

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

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
