//! Base64 (RFC 4648 §4, standard alphabet, with padding): what the handshake needs to
//! check `Sec-WebSocket-Key` and to write `Sec-WebSocket-Accept` (RFC 6455 §4.2.1-2),
//! through the `base64` crate's standard engine. That engine decodes strictly: padded
//! groups of four, padding only at the end, and no stray bits after the last byte, so
//! every input has at most one encoding.

use ::base64::engine::general_purpose::STANDARD;
use ::base64::Engine as _;

/// `data` in base64 with `=` padding.
pub(crate) fn encode(data: &[u8]) -> String {
    STANDARD.encode(data)
}

/// The bytes `text` encodes; `None` if it is not strictly padded base64.
pub(crate) fn decode(text: &str) -> Option<Vec<u8>> {
    STANDARD.decode(text).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn rfc4648_vectors() {
        let v = [
            ("", ""),
            ("f", "Zg=="),
            ("fo", "Zm8="),
            ("foo", "Zm9v"),
            ("foob", "Zm9vYg=="),
            ("fooba", "Zm9vYmE="),
            ("foobar", "Zm9vYmFy"),
        ];
        for (plain, enc) in v {
            assert_eq!(encode(plain.as_bytes()), enc);
            assert_eq!(decode(enc).as_deref(), Some(plain.as_bytes()));
        }
    }

    #[test]
    fn malformed_is_refused() {
        for bad in [
            "Zg=", "Zg", "Z===", "Zh==", "Zm8=Zm8=", "Zm9v!", "=Zm9", "Zm9v\n", " Zm9v",
        ] {
            assert_eq!(decode(bad), None, "{bad}");
        }
    }

    proptest! {
        #[test]
        fn round_trip(data in proptest::collection::vec(any::<u8>(), 0..100)) {
            prop_assert_eq!(decode(&encode(&data)), Some(data));
        }
    }
}
