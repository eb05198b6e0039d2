//! The secret a link's IPv6 link-local address is drawn with (RFC 7217's secret key,
//! [`EngineConfig::stable_secret`](rusty_stack::EngineConfig)), from the machine's
//! identity: the same on every start of every binary on this machine, so a link keeps
//! its link-local address across restarts, and different between machines and links.
//!
//! The key is the machine ID (`/etc/machine-id`, or D-Bus's copy), 128 bits that
//! machine-id(5) asks applications never to show but to hash with a keyed function of
//! their own. It keys SipHash-2-4 (a pseudo-random function with a 128-bit key and a
//! 128-bit output), which hashes a label of Rusty's and the link's name; what an
//! observer sees, the interface identifier, is a further SipHash of the result (RFC
//! 7217 §5), so neither reveals the machine ID. Without a machine ID the secret is all
//! zeros, and the addresses are still stable (the MAC goes into them too) but
//! predictable; a line in the log says so.

use std::hash::Hasher;
use std::sync::OnceLock;

use siphasher::sip128::{Hasher128, SipHasher24};

/// Where the machine ID is looked for, in order (systemd's, then D-Bus's).
const MACHINE_ID_FILES: [&str; 2] = ["/etc/machine-id", "/var/lib/dbus/machine-id"];

/// The 128 bits of a machine-id file: 32 hexadecimal digits and an optional newline.
fn parse_machine_id(text: &str) -> Option<[u8; 16]> {
    let hex = text.trim();
    if hex.len() != 32 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    let mut id = [0u8; 16];
    for (i, byte) in id.iter_mut().enumerate() {
        *byte = u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).ok()?;
    }
    // An all-zero ID is what an unset one looks like, not an identity.
    (id != [0; 16]).then_some(id)
}

/// The machine ID, read once; `None` (logged once) when there is none to read.
fn machine_id() -> Option<[u8; 16]> {
    static ID: OnceLock<Option<[u8; 16]>> = OnceLock::new();
    *ID.get_or_init(|| {
        let id = MACHINE_ID_FILES
            .iter()
            .find_map(|f| parse_machine_id(&std::fs::read_to_string(f).ok()?));
        if id.is_none() {
            log::info!(
                "no machine ID in {}: IPv6 link-local addresses are drawn with an all-zero \
                 secret (stable, but predictable from the MAC)",
                MACHINE_ID_FILES.join(" or ")
            );
        }
        id
    })
}

/// The secret for the link named `link` under machine ID `id`.
fn derive(id: &[u8; 16], link: &str) -> [u8; 16] {
    let mut h = SipHasher24::new_with_key(id);
    h.write(b"rusty RFC 7217 stable secret\0");
    h.write(link.as_bytes());
    h.finish128().as_bytes()
}

/// The stable secret of the link named `link` (its spec, e.g. `tap:tap0`) on this
/// machine; all zeros without a machine ID.
pub(crate) fn stable_secret(link: &str) -> [u8; 16] {
    machine_id().map_or([0; 16], |id| derive(&id, link))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn machine_ids_are_32_hex_digits() {
        let id = parse_machine_id("3d1219c7c4c5404aaa1f6d2a48adfda4\n").unwrap();
        assert_eq!(id[0], 0x3d);
        assert_eq!(id[15], 0xa4);
        for bad in [
            "",
            "3d1219c7",
            "3d1219c7c4c5404aaa1f6d2a48adfda4ff",
            "zz1219c7c4c5404aaa1f6d2a48adfda4",
            "00000000000000000000000000000000",
            "uninitialized",
        ] {
            assert_eq!(parse_machine_id(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn the_secret_is_stable_per_machine_and_link_and_differs_otherwise() {
        let a = [1u8; 16];
        let b = [2u8; 16];
        assert_eq!(derive(&a, "tap:tap0"), derive(&a, "tap:tap0"));
        assert_ne!(derive(&a, "tap:tap0"), derive(&a, "tap:tap1"));
        assert_ne!(derive(&a, "tap:tap0"), derive(&b, "tap:tap0"));
        assert_ne!(derive(&a, "tap:tap0"), [0; 16]);
        assert_eq!(stable_secret("x"), stable_secret("x"));
    }
}
