//! Initial sequence numbers (RFC 6528 §3): `ISN = M + F(localip, localport, remoteip,
//! remoteport, secretkey)`, where `M` is a timer ticking every 4 µs (RFC 9293 §3.4.1) and
//! `F` is SipHash-1-3 keyed with a per-process random secret.
//!
//! The keyed hash makes each 4-tuple's sequence space start at an offset an off-path
//! attacker cannot guess, while `M` keeps successive incarnations of the same 4-tuple
//! moving forward, so old duplicates of a previous connection fall outside the new window.
//! The same hash gives the tuple's RFC 7323 §7.1 timestamp offset ([`IsnGenerator`]).

use std::hash::{BuildHasher, Hasher};
use std::net::{SocketAddr, SocketAddrV4};

use crate::tcp::seq::SeqNum;
use crate::time::Instant;

/// A 128-bit secret for the keyed hashes of this module and of SYN cookies.
///
/// Comes from the OS (`getrandom`). If the OS source fails — no `getrandom(2)`, no
/// `/dev/urandom` in a tight sandbox — it falls back to std's `RandomState` (itself seeded
/// from the OS when it can) mixed with the wall-clock time, the process id and a stack
/// address. That fallback is guessable in principle, which only weakens the blind-attack
/// protection of RFC 6528, never correctness; it is better than refusing to start.
pub(crate) fn random_secret() -> [u8; 16] {
    let mut key = [0u8; 16];
    if getrandom::fill(&mut key).is_ok() {
        return key;
    }
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let marker = 0u8;
    let addr = std::ptr::addr_of!(marker) as usize;
    for (i, half) in key.chunks_exact_mut(8).enumerate() {
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_usize(i);
        h.write_u128(nanos);
        h.write_u32(std::process::id());
        h.write_usize(addr);
        half.copy_from_slice(&h.finish().to_le_bytes());
    }
    key
}

/// Bytes of an IPv4 4-tuple as hashed by [`IsnGenerator`] and the SYN-cookie MAC:
/// local address, local port, remote address, remote port, network byte order.
pub(crate) fn tuple_bytes(local: SocketAddrV4, remote: SocketAddrV4) -> [u8; 12] {
    let mut b = [0u8; 12];
    b[0..4].copy_from_slice(&local.ip().octets());
    b[4..6].copy_from_slice(&local.port().to_be_bytes());
    b[6..10].copy_from_slice(&remote.ip().octets());
    b[10..12].copy_from_slice(&remote.port().to_be_bytes());
    b
}

/// The longest 4-tuple as [`tuple_into`] writes it: two IPv6 endpoints.
pub(crate) const MAX_TUPLE_LEN: usize = 36;

/// Writes the 4-tuple's bytes at the start of `out` and returns how many: an IPv4
/// tuple as [`tuple_bytes`] (12), any other as two 16-byte addresses (an IPv4 one
/// mapped, `::ffff:a.b.c.d`) each followed by its port (36).
pub(crate) fn tuple_into(local: SocketAddr, remote: SocketAddr, out: &mut [u8; 36]) -> usize {
    if let (SocketAddr::V4(l), SocketAddr::V4(r)) = (local, remote) {
        out[..12].copy_from_slice(&tuple_bytes(l, r));
        return 12;
    }
    let v6 = |a: SocketAddr| crate::ipv6::as_v6(a.ip()).octets();
    out[0..16].copy_from_slice(&v6(local));
    out[16..18].copy_from_slice(&local.port().to_be_bytes());
    out[18..34].copy_from_slice(&v6(remote));
    out[34..36].copy_from_slice(&remote.port().to_be_bytes());
    36
}

/// RFC 6528 ISN generator, which also gives each 4-tuple its RFC 7323 §7.1 timestamp
/// offset. One per worker (or shared read-only); cheap to call.
///
/// SipHash-1-3 rather than 2-4: it is the keyed PRF Rust's own `HashMap` relies on
/// against chosen inputs, no attack on it is known, and the 12-byte tuple costs two
/// compression rounds and three finalisation rounds instead of four and four, about
/// 40 % less per hash.
///
/// One hash per connection serves both values ([`TupleHash`]): the ISN's `F` is the low
/// half of the tuple's 64-bit SipHash, the timestamp offset the high half. The offset
/// must not be `F` itself: with TSval = ms + F and ISN = µs/4 + F, anyone seeing a
/// SYN-ACK could compute ISN - TSval, read our clock straight off it, and predict ISNs
/// for other tuples up to their `F`. Two halves of one output of a PRF are as good as
/// two outputs under independent keys: each is uniform, neither says anything about the
/// other, so ISN - TSval is the clock plus a secret per-tuple value, which hides it (RFC
/// 7323 §7.1), and a peer that learns its offset from its own connection (it cannot
/// even do that without our clock) learns nothing about its `F`, nor anything about
/// another tuple's (RFC 6528 §3). Earlier versions hashed twice, the offset under a key
/// derived from the secret: the same guarantee for twice the work.
#[derive(Debug, Clone)]
pub(crate) struct IsnGenerator {
    hasher: TupleSip13,
    /// The key again, for tuples of another length than IPv4's (IPv6), hashed by the
    /// general SipHash-1-3.
    key: [u8; 16],
}

/// SipHash-1-3 (Aumasson and Bernstein) under one key, of exactly 12 bytes: a 4-tuple's
/// [`tuple_bytes`]. The same function as a general SipHash-1-3 (the tests compare it
/// with the `siphasher` crate's), written for the one length: one 8-byte word, then the
/// last 4 bytes with the length byte, then finalisation, with the key already folded
/// into the initial state: a general hasher buffers partial words, which one fixed
/// length never needs.
#[derive(Debug, Clone)]
struct TupleSip13 {
    /// The state after keying, before any input.
    init: [u64; 4],
}

impl TupleSip13 {
    fn new(key: &[u8; 16]) -> TupleSip13 {
        let k0 = u64::from_le_bytes(key[..8].try_into().expect("eight bytes"));
        let k1 = u64::from_le_bytes(key[8..].try_into().expect("eight bytes"));
        // The initialisation constants: "somepseudorandomlygeneratedbytes".
        TupleSip13 {
            init: [
                k0 ^ 0x736f_6d65_7073_6575,
                k1 ^ 0x646f_7261_6e64_6f6d,
                k0 ^ 0x6c79_6765_6e65_7261,
                k1 ^ 0x7465_6462_7974_6573,
            ],
        }
    }

    #[inline]
    fn hash(&self, bytes: &[u8; 12]) -> u64 {
        let mut v = self.init;
        let word = u64::from_le_bytes(bytes[..8].try_into().expect("eight bytes"));
        let tail = u32::from_le_bytes(bytes[8..].try_into().expect("four bytes"));
        // The last word: the remaining bytes, and the message length in its top byte.
        let last = u64::from(tail) | (12 << 56);
        for m in [word, last] {
            v[3] ^= m;
            sip_round(&mut v);
            v[0] ^= m;
        }
        v[2] ^= 0xff;
        for _ in 0..3 {
            sip_round(&mut v);
        }
        v[0] ^ v[1] ^ v[2] ^ v[3]
    }
}

/// One SipRound.
#[inline]
fn sip_round(v: &mut [u64; 4]) {
    v[0] = v[0].wrapping_add(v[1]);
    v[1] = v[1].rotate_left(13) ^ v[0];
    v[0] = v[0].rotate_left(32);
    v[2] = v[2].wrapping_add(v[3]);
    v[3] = v[3].rotate_left(16) ^ v[2];
    v[0] = v[0].wrapping_add(v[3]);
    v[3] = v[3].rotate_left(21) ^ v[0];
    v[2] = v[2].wrapping_add(v[1]);
    v[1] = v[1].rotate_left(17) ^ v[2];
    v[2] = v[2].rotate_left(32);
}

/// The keyed hash of one 4-tuple, split into what a new connection on it starts with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct TupleHash {
    /// `F(localip, localport, remoteip, remoteport, secretkey)` of RFC 6528 §3.
    pub f: u32,
    /// Added to the millisecond clock in our TSvals (RFC 7323 §7.1).
    pub ts_offset: u32,
}

impl TupleHash {
    /// The ISN for a connection opened at `now`: `M + F` (RFC 6528 §3), `M` counting
    /// 4 µs ticks of the engine's clock (RFC 9293 §3.4.1), modulo 2^32.
    pub(crate) fn isn(self, now: Instant) -> SeqNum {
        // Truncation to 32 bits is the point: both terms live in sequence space.
        let m = (now.as_micros() / 4) as u32;
        SeqNum(m.wrapping_add(self.f))
    }
}

impl IsnGenerator {
    /// A generator keyed with `secret` (deterministic; for tests and simulation).
    pub(crate) fn new(secret: [u8; 16]) -> Self {
        IsnGenerator {
            hasher: TupleSip13::new(&secret),
            key: secret,
        }
    }

    /// A generator keyed with a fresh [`random_secret`].
    #[cfg(test)]
    pub(crate) fn random() -> Self {
        IsnGenerator::new(random_secret())
    }

    /// The tuple's keyed hash: `F` and the timestamp offset (see the type's docs).
    pub(crate) fn hash_tuple(&self, local: SocketAddr, remote: SocketAddr) -> TupleHash {
        let h = match (local, remote) {
            (SocketAddr::V4(l), SocketAddr::V4(r)) => self.hasher.hash(&tuple_bytes(l, r)),
            _ => {
                let mut bytes = [0u8; MAX_TUPLE_LEN];
                let n = tuple_into(local, remote, &mut bytes);
                let mut h = siphasher::sip::SipHasher13::new_with_key(&self.key);
                h.write(&bytes[..n]);
                h.finish()
            }
        };
        // Truncations: the two 32-bit halves are the point.
        TupleHash {
            f: h as u32,
            ts_offset: (h >> 32) as u32,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;

    fn sa(a: [u8; 4], p: u16) -> SocketAddr {
        SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::from(a), p))
    }

    const KEY: [u8; 16] = *b"0123456789abcdef";

    fn isn(g: &IsnGenerator, l: SocketAddr, r: SocketAddr, t: Instant) -> SeqNum {
        g.hash_tuple(l, r).isn(t)
    }

    #[test]
    fn the_tuple_hash_is_siphash_1_3() {
        use siphasher::sip::SipHasher13;
        let mut rng = crate::rng::Rng::new(0x5170);
        let mut next = || rng.next_u64();
        for _ in 0..1000 {
            let mut key = [0u8; 16];
            key[..8].copy_from_slice(&next().to_le_bytes());
            key[8..].copy_from_slice(&next().to_le_bytes());
            let mut bytes = [0u8; 12];
            bytes[..8].copy_from_slice(&next().to_le_bytes());
            bytes[8..].copy_from_slice(&next().to_le_bytes()[..4]);
            assert_eq!(
                TupleSip13::new(&key).hash(&bytes),
                SipHasher13::new_with_key(&key).hash(&bytes),
                "key {key:?} bytes {bytes:?}"
            );
        }
    }

    #[test]
    fn deterministic_for_fixed_secret() {
        let (l, r) = (sa([10, 0, 0, 1], 80), sa([10, 0, 0, 2], 40000));
        let t = Instant::from_millis(1234);
        let a = IsnGenerator::new(KEY);
        let b = IsnGenerator::new(KEY);
        assert_eq!(a.hash_tuple(l, r).isn(t), b.hash_tuple(l, r).isn(t));
        let mut other = KEY;
        other[0] ^= 1;
        assert_ne!(
            a.hash_tuple(l, r).isn(t),
            IsnGenerator::new(other).hash_tuple(l, r).isn(t)
        );
    }

    #[test]
    fn tuples_differ() {
        let g = IsnGenerator::new(KEY);
        let t = Instant::from_millis(7);
        let base = isn(&g, sa([10, 0, 0, 1], 80), sa([10, 0, 0, 2], 40000), t);
        for (l, r) in [
            (sa([10, 0, 0, 1], 80), sa([10, 0, 0, 2], 40001)),
            (sa([10, 0, 0, 1], 81), sa([10, 0, 0, 2], 40000)),
            (sa([10, 0, 0, 3], 80), sa([10, 0, 0, 2], 40000)),
            (sa([10, 0, 0, 1], 80), sa([10, 0, 0, 4], 40000)),
            // Swapped ends are a different tuple.
            (sa([10, 0, 0, 2], 40000), sa([10, 0, 0, 1], 80)),
        ] {
            assert_ne!(g.hash_tuple(l, r).isn(t), base, "{l} {r}");
        }
        // Many ports: no two collide (a 32-bit hash collision among 1000 is ~1e-4).
        let mut seen: Vec<u32> = (1000..2000u16)
            .map(|p| isn(&g, sa([10, 0, 0, 1], 80), sa([10, 0, 0, 2], p), t).0)
            .collect();
        seen.sort_unstable();
        seen.dedup();
        assert_eq!(seen.len(), 1000);
    }

    #[test]
    fn advances_with_time() {
        let g = IsnGenerator::new(KEY);
        let (l, r) = (sa([192, 168, 1, 1], 443), sa([192, 168, 1, 9], 5555));
        let t0 = Instant::from_millis(1_000);
        let a = g.hash_tuple(l, r).isn(t0);
        let b = isn(&g, l, r, Instant::from_millis(1_001));
        assert_eq!(b - a, 250);
        let c = isn(&g, l, r, Instant::from_millis(2_000));
        assert_eq!(c - a, 250_000);
        assert!(a < b && b < c);
    }

    #[test]
    fn ts_offset_is_independent_of_the_isn_hash() {
        let g = IsnGenerator::new(KEY);
        let t = Instant::from_millis(5_000);
        let mut diffs = Vec::new();
        for port in 40000..40064u16 {
            let (l, r) = (sa([10, 0, 0, 1], 80), sa([10, 0, 0, 2], port));
            let off = g.hash_tuple(l, r).ts_offset;
            assert_eq!(off, g.hash_tuple(l, r).ts_offset, "deterministic");
            assert_ne!(off, g.hash_tuple(l, r).f);
            // ISN - TSval at one instant must not be the same for every tuple (it would
            // be µs/4 - ms, the engine clock, if both used the same F).
            let tsval = crate::tcp::options::ts_clock(t, off);
            diffs.push(g.hash_tuple(l, r).isn(t).0.wrapping_sub(tsval));
        }
        diffs.sort_unstable();
        diffs.dedup();
        assert_eq!(diffs.len(), 64);
    }

    #[test]
    fn random_secrets_differ() {
        assert_ne!(random_secret(), random_secret());
        let (l, r) = (sa([1, 2, 3, 4], 1), sa([5, 6, 7, 8], 2));
        let t = Instant::ZERO;
        assert_ne!(
            IsnGenerator::random().hash_tuple(l, r).isn(t),
            IsnGenerator::random().hash_tuple(l, r).isn(t)
        );
    }
}
