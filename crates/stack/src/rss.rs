//! Receive-side scaling (RSS) in software: the Toeplitz hash NICs steer flows with, the
//! indirection table that maps a hash to a queue, and the active-open helper that picks a
//! local port whose *return* flow lands on the calling worker's queue (as Fastsocket, mTCP
//! and Seastar do).
//!
//! The hash is the one in Microsoft's "RSS hashing functions" page and the Intel 82599
//! datasheet (§7.1.2.8): for every input bit set, XOR in the 32-bit window of the key that
//! starts at that bit position. [`Toeplitz`] precomputes, for each input byte position, the
//! XOR for all 256 byte values, so hashing the 12-byte IPv4/TCP tuple is 12 table lookups.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::ops::RangeInclusive;
use std::sync::{Arc, OnceLock};

/// The 40-byte key from Microsoft's "Verifying the RSS Hash Calculation" page, also the
/// default key of many NIC drivers (ixgbe, DPDK's `default_rss_key`).
pub const MICROSOFT_RSS_KEY: [u8; 40] = [
    0x6d, 0x5a, 0x56, 0xda, 0x25, 0x5b, 0x0e, 0xc2, 0x41, 0x67, 0x25, 0x3d, 0x43, 0xa3, 0x8f, 0xb0,
    0xd0, 0xca, 0x2b, 0xcb, 0xae, 0x7b, 0x30, 0xb4, 0x77, 0xcb, 0x2d, 0xa3, 0x80, 0x30, 0xf2, 0x0c,
    0x6a, 0x42, 0xb7, 0x3b, 0xbe, 0xac, 0x01, 0xfa,
];

/// Entries in the 82599's redirection table (RETA); the NIC indexes it with the seven
/// least significant bits of the hash (82599 datasheet §7.1.2.8.2).
pub const DEFAULT_INDIRECTION_LEN: usize = 128;

/// A Toeplitz hasher for one key, with per-byte lookup tables.
///
/// Row `j` holds, for every byte value `v`, the XOR of the key windows selected by the set
/// bits of `v` when `v` sits at input byte `j`. Input bytes past the key's length hash to
/// zero (the key is shifted left with zeros, so their windows are empty).
#[derive(Clone)]
pub struct Toeplitz {
    key: Vec<u8>,
    rows: Box<[[u32; 256]]>,
}

impl Toeplitz {
    /// Build the lookup tables for `key` (any length; NICs use 40 or 52 bytes).
    pub fn new(key: &[u8]) -> Toeplitz {
        let mut rows = vec![[0u32; 256]; key.len()].into_boxed_slice();
        for (j, row) in rows.iter_mut().enumerate() {
            // windows[b]: the key window for bit b of this byte, b = 0 the most significant.
            let mut windows = [0u32; 8];
            for (b, w) in windows.iter_mut().enumerate() {
                *w = key_window(key, j * 8 + b);
            }
            for v in 1..256usize {
                let low = v.trailing_zeros() as usize;
                row[v] = row[v & (v - 1)] ^ windows[7 - low];
            }
        }
        Toeplitz {
            key: key.to_vec(),
            rows,
        }
    }

    /// The key this hasher was built from.
    pub fn key(&self) -> &[u8] {
        &self.key
    }

    /// The Toeplitz hash of `input`, bytes in the order the NIC concatenates them.
    pub fn hash(&self, input: &[u8]) -> u32 {
        input
            .iter()
            .zip(self.rows.iter())
            .fold(0, |h, (&byte, row)| h ^ row[usize::from(byte)])
    }

    /// The contribution of `byte` at input position `pos`: `hash` is the XOR of these.
    fn byte_term(&self, pos: usize, byte: u8) -> u32 {
        self.rows.get(pos).map_or(0, |row| row[usize::from(byte)])
    }
}

impl fmt::Debug for Toeplitz {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Toeplitz").field("key", &self.key).finish()
    }
}

/// The 32 key bits starting at bit `offset` (bit 0 = most significant bit of `key[0]`),
/// zero past the end of the key.
fn key_window(key: &[u8], offset: usize) -> u32 {
    let mut w = 0u32;
    for i in 0..32 {
        w = (w << 1) | u32::from(key_bit(key, offset + i));
    }
    w
}

fn key_bit(key: &[u8], bit: usize) -> u8 {
    key.get(bit / 8)
        .map_or(0, |byte| (byte >> (7 - bit % 8)) & 1)
}

/// The hash input for an IPv4/TCP packet as the NIC builds it from a *received* packet:
/// source address, destination address, source port, destination port, all in network
/// byte order (Microsoft "RSS hashing functions", `@12-15, @16-19, @20-21, @22-23`).
pub fn ipv4_tcp_input(
    src_ip: Ipv4Addr,
    dst_ip: Ipv4Addr,
    src_port: u16,
    dst_port: u16,
) -> [u8; 12] {
    let mut input = [0u8; 12];
    input[0..4].copy_from_slice(&src_ip.octets());
    input[4..8].copy_from_slice(&dst_ip.octets());
    input[8..10].copy_from_slice(&src_port.to_be_bytes());
    input[10..12].copy_from_slice(&dst_port.to_be_bytes());
    input
}

/// The hash input for an IPv6/TCP packet as the NIC builds it from a received packet:
/// source address, destination address, source port, destination port, in network byte
/// order (Microsoft "RSS hashing functions", `@8-23, @24-39, @40-41, @42-43`); its
/// first 32 bytes are the input of the addresses-only hash.
pub fn ipv6_tcp_input(
    src_ip: Ipv6Addr,
    dst_ip: Ipv6Addr,
    src_port: u16,
    dst_port: u16,
) -> [u8; 36] {
    let mut input = [0u8; 36];
    input[0..16].copy_from_slice(&src_ip.octets());
    input[16..32].copy_from_slice(&dst_ip.octets());
    input[32..34].copy_from_slice(&src_port.to_be_bytes());
    input[34..36].copy_from_slice(&dst_port.to_be_bytes());
    input
}

/// How a link steers received flows: the Toeplitz key and the indirection table.
///
/// Equality, hashing input and `Debug` only look at `key` and `indirection`; the lookup
/// tables are built lazily by [`RssConfig::hasher`] and cached (and rebuilt if someone
/// changes `key` after the fact).
#[non_exhaustive]
pub struct RssConfig {
    /// The Toeplitz hash key (40 bytes on most NICs).
    pub key: Vec<u8>,
    /// Queue index for each table entry; the entry for a hash is `hash % len`.
    pub indirection: Vec<u16>,
    cache: OnceLock<Arc<Toeplitz>>,
}

impl RssConfig {
    /// A configuration of `key` and `indirection` (hash → queue; non-empty).
    pub fn new(key: Vec<u8>, indirection: Vec<u16>) -> RssConfig {
        RssConfig {
            key,
            indirection,
            cache: OnceLock::new(),
        }
    }

    /// The Microsoft key and a 128-entry table filled round-robin over `queues` queues
    /// (zero is taken as one), which is what ixgbe programs by default. The same config
    /// is meant for both ends of a simulated link. Note the Microsoft key does not make
    /// the hash symmetric in (src, dst): predictions must hash the return flow, which
    /// [`RssConfig::queue_for_rx_flow`] and [`RssConfig::pick_local_port`] do.
    pub fn symmetric_default(queues: u16) -> RssConfig {
        let queues = queues.max(1);
        let indirection = (0..DEFAULT_INDIRECTION_LEN)
            .map(|i| (i % usize::from(queues)) as u16)
            .collect();
        RssConfig::new(MICROSOFT_RSS_KEY.to_vec(), indirection)
    }

    /// A hasher for this config's key, built once and shared by clones.
    pub fn hasher(&self) -> Arc<Toeplitz> {
        let cached = self
            .cache
            .get_or_init(|| Arc::new(Toeplitz::new(&self.key)));
        if cached.key() == self.key.as_slice() {
            Arc::clone(cached)
        } else {
            // `key` was changed after the cache was filled: build for the current key.
            Arc::new(Toeplitz::new(&self.key))
        }
    }

    /// The queue the indirection table assigns to `hash`. With the usual 128-entry table
    /// `hash % 128` is exactly the 82599's "seven LSBs of the hash" index. An empty
    /// table sends everything to queue 0.
    pub fn queue_for(&self, hash: u32) -> u16 {
        if self.indirection.is_empty() {
            return 0;
        }
        self.indirection[hash as usize % self.indirection.len()]
    }

    /// The queue a received IPv4/TCP packet with these addresses and ports lands on.
    pub fn queue_for_rx_flow(
        &self,
        src_ip: Ipv4Addr,
        dst_ip: Ipv4Addr,
        src_port: u16,
        dst_port: u16,
    ) -> u16 {
        let input = ipv4_tcp_input(src_ip, dst_ip, src_port, dst_port);
        self.queue_for(self.hasher().hash(&input))
    }

    /// Active open: the queue the NIC steers the *return* flow of a connection
    /// `local_ip -> remote_ip:remote_port` to, as a function of the local port, for
    /// either family (both addresses of one). The hash of the fixed part of the input
    /// is computed once; only the last two input bytes (the return flow's destination
    /// port) vary, so each port costs two table lookups.
    pub fn return_queue_by_local_port(
        &self,
        local_ip: IpAddr,
        remote_ip: IpAddr,
        remote_port: u16,
    ) -> impl Fn(u16) -> u16 + '_ {
        let hasher = self.hasher();
        let mut input = [0u8; 36];
        let len = match (remote_ip, local_ip) {
            (IpAddr::V4(r), IpAddr::V4(l)) => {
                input[..12].copy_from_slice(&ipv4_tcp_input(r, l, remote_port, 0));
                12
            }
            (r, l) => {
                let v6 = crate::ipv6::as_v6;
                input = ipv6_tcp_input(v6(r), v6(l), remote_port, 0);
                36
            }
        };
        let prefix = hasher.hash(&input[..len - 2]);
        move |port| {
            let [p_hi, p_lo] = port.to_be_bytes();
            let (hi, lo) = (
                hasher.byte_term(len - 2, p_hi),
                hasher.byte_term(len - 1, p_lo),
            );
            self.queue_for(prefix ^ hi ^ lo)
        }
    }

    /// Active open: a local port for a connection `local_ip -> remote_ip:remote_port`
    /// whose return traffic (source `remote`, destination `local`) the NIC steers to
    /// `want_queue`, and which `is_free` accepts. Ports are tried from `start` upwards,
    /// wrapping within `range` (a `start` outside `range` begins at its low end). `None`
    /// when no port qualifies.
    ///
    /// This walks the whole range when no port qualifies; the engine's own search
    /// (`engine::ports`) bounds its work and uses
    /// [`RssConfig::return_queue_by_local_port`] directly.
    // The arguments are the flow's coordinates plus the search bounds; a struct for them
    // would only move the same list elsewhere.
    #[allow(clippy::too_many_arguments)]
    pub fn pick_local_port(
        &self,
        local_ip: Ipv4Addr,
        remote_ip: Ipv4Addr,
        remote_port: u16,
        want_queue: u16,
        range: RangeInclusive<u16>,
        start: u16,
        mut is_free: impl FnMut(u16) -> bool,
    ) -> Option<u16> {
        let (lo, hi) = (*range.start(), *range.end());
        if lo > hi {
            return None;
        }
        let start = if range.contains(&start) { start } else { lo };
        let queue_of =
            self.return_queue_by_local_port(local_ip.into(), remote_ip.into(), remote_port);
        let count = u32::from(hi - lo) + 1;
        let offset = u32::from(start - lo);
        (0..count)
            // Proven in range: (offset + i) % count < count = hi - lo + 1.
            .map(|i| lo + ((offset + i) % count) as u16)
            .find(|&port| queue_of(port) == want_queue && is_free(port))
    }
}

impl Clone for RssConfig {
    fn clone(&self) -> RssConfig {
        RssConfig {
            key: self.key.clone(),
            indirection: self.indirection.clone(),
            cache: self.cache.clone(),
        }
    }
}

impl PartialEq for RssConfig {
    fn eq(&self, other: &RssConfig) -> bool {
        self.key == other.key && self.indirection == other.indirection
    }
}

impl Eq for RssConfig {}

impl fmt::Debug for RssConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RssConfig")
            .field("key", &self.key)
            .field("indirection", &self.indirection)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The hash exactly as the pseudocode states it: walk the input bits left to right,
    /// XOR in the leftmost 32 key bits for each set bit, shift the key left by one.
    fn naive_hash(key: &[u8], input: &[u8]) -> u32 {
        let mut result = 0u32;
        for bit in 0..input.len() * 8 {
            if (input[bit / 8] >> (7 - bit % 8)) & 1 == 1 {
                let mut window = 0u32;
                for i in 0..32 {
                    let k = bit + i;
                    let b = if k / 8 < key.len() {
                        (key[k / 8] >> (7 - k % 8)) & 1
                    } else {
                        0
                    };
                    window = (window << 1) | u32::from(b);
                }
                result ^= window;
            }
        }
        result
    }

    /// Microsoft, "Verifying the RSS Hash Calculation", IPv4 with TCP column
    /// (the same suite is in the 82599 datasheet §7.1.2.8.3).
    const VECTORS: [(&str, u16, &str, u16, u32); 5] = [
        ("66.9.149.187", 2794, "161.142.100.80", 1766, 0x51cc_c178),
        ("199.92.111.2", 14230, "65.69.140.83", 4739, 0xc626_b0ea),
        ("24.19.198.95", 12898, "12.22.207.184", 38024, 0x5c2b_394a),
        ("38.27.205.30", 48228, "209.142.163.6", 2217, 0xafc7_327f),
        ("153.39.163.191", 44251, "202.188.127.2", 1303, 0x10e8_28a2),
    ];

    #[test]
    fn microsoft_ipv4_tcp_vectors() {
        let t = Toeplitz::new(&MICROSOFT_RSS_KEY);
        for (src, sport, dst, dport, want) in VECTORS {
            let input = ipv4_tcp_input(src.parse().unwrap(), dst.parse().unwrap(), sport, dport);
            assert_eq!(t.hash(&input), want, "{src}:{sport} -> {dst}:{dport}");
            assert_eq!(naive_hash(&MICROSOFT_RSS_KEY, &input), want);
        }
    }

    /// The same page's IPv6 table: (source, port, destination, port, IPv6 only, IPv6
    /// with TCP).
    const VECTORS_V6: [(&str, u16, &str, u16, u32, u32); 3] = [
        (
            "3ffe:2501:200:1fff::7",
            2794,
            "3ffe:2501:200:3::1",
            1766,
            0x2cc1_8cd5,
            0x4020_7d3d,
        ),
        (
            "3ffe:501:8::260:97ff:fe40:efab",
            14230,
            "ff02::1",
            4739,
            0x0f0c_461c,
            0xdde5_1bbf,
        ),
        (
            "3ffe:1900:4545:3:200:f8ff:fe21:67cf",
            44251,
            "fe80::200:f8ff:fe21:67cf",
            38024,
            0x4b61_e985,
            0x02d1_feef,
        ),
    ];

    #[test]
    fn microsoft_ipv6_vectors() {
        let t = Toeplitz::new(&MICROSOFT_RSS_KEY);
        for (src, sport, dst, dport, addresses, with_tcp) in VECTORS_V6 {
            let input = ipv6_tcp_input(src.parse().unwrap(), dst.parse().unwrap(), sport, dport);
            assert_eq!(t.hash(&input), with_tcp, "{src}:{sport} -> {dst}:{dport}");
            assert_eq!(t.hash(&input[..32]), addresses, "{src} -> {dst}");
            assert_eq!(naive_hash(&MICROSOFT_RSS_KEY, &input), with_tcp);
        }
    }

    #[test]
    fn microsoft_ipv4_only_vectors() {
        // Same page, "IPv4 only" column: the 8-byte address-only input.
        let t = Toeplitz::new(&MICROSOFT_RSS_KEY);
        let input = ipv4_tcp_input(
            "66.9.149.187".parse().unwrap(),
            "161.142.100.80".parse().unwrap(),
            0,
            0,
        );
        assert_eq!(t.hash(&input[..8]), 0x323e_8fc2);
    }

    #[test]
    fn queue_for_uses_low_seven_bits_of_128_entry_table() {
        let rss = RssConfig::symmetric_default(4);
        assert_eq!(rss.indirection.len(), 128);
        assert_eq!(
            rss.queue_for(0x51cc_c178),
            ((0x51cc_c178u32 & 0x7f) % 4) as u16
        );
        assert_eq!(rss.queue_for(5), 1);
        assert_eq!(RssConfig::new(vec![], vec![]).queue_for(99), 0);
        assert_eq!(RssConfig::symmetric_default(0).queue_for(77), 0);
    }

    #[test]
    fn config_equality_ignores_cache_and_tracks_key_changes() {
        let a = RssConfig::symmetric_default(2);
        let _ = a.hasher();
        let mut b = a.clone();
        assert_eq!(a, b);
        b.key[0] ^= 1;
        assert_ne!(a, b);
        // The stale cache must not be used for the changed key.
        assert_eq!(b.hasher().key(), b.key.as_slice());
        assert_eq!(
            b.hasher().hash(&[0xff; 12]),
            naive_hash(&b.key, &[0xff; 12])
        );
    }

    #[test]
    fn pick_local_port_lands_on_wanted_queue() {
        let rss = RssConfig::symmetric_default(4);
        let local: Ipv4Addr = "10.0.0.1".parse().unwrap();
        let remote: Ipv4Addr = "10.0.0.2".parse().unwrap();
        for q in 0..4 {
            let port = rss
                .pick_local_port(local, remote, 80, q, 49152..=65535, 50000, |_| true)
                .unwrap();
            assert!((49152..=65535).contains(&port));
            assert_eq!(rss.queue_for_rx_flow(remote, local, 80, port), q);
        }
        // A queue no table entry names is never found.
        assert_eq!(
            rss.pick_local_port(local, remote, 80, 9, 1000..=2000, 1000, |_| true),
            None
        );
    }

    #[test]
    fn pick_local_port_skips_busy_ports_and_wraps() {
        let rss = RssConfig::symmetric_default(1);
        let local: Ipv4Addr = "10.0.0.1".parse().unwrap();
        let remote: Ipv4Addr = "10.0.0.2".parse().unwrap();
        let got = rss.pick_local_port(local, remote, 80, 0, 100..=110, 109, |p| {
            p != 109 && p != 110
        });
        assert_eq!(got, Some(100));
        let got = rss.pick_local_port(local, remote, 80, 0, 100..=110, 5, |p| p > 104);
        assert_eq!(got, Some(105));
        assert_eq!(
            rss.pick_local_port(local, remote, 80, 0, 1..=65535, 1, |_| false),
            None
        );
    }

    /// The return queue of an IPv6 active open is the queue of the return flow's full
    /// IPv6/TCP hash, for every local port.
    #[test]
    fn ipv6_return_queue_is_the_hash_of_the_return_flow() {
        let rss = RssConfig::symmetric_default(4);
        let local: Ipv6Addr = "fd00::2".parse().unwrap();
        let remote: Ipv6Addr = "fd00::1:77".parse().unwrap();
        let queue_of = rss.return_queue_by_local_port(local.into(), remote.into(), 443);
        let hasher = rss.hasher();
        for port in (1..=65535u16).step_by(97) {
            let input = ipv6_tcp_input(remote, local, 443, port);
            assert_eq!(queue_of(port), rss.queue_for(hasher.hash(&input)), "{port}");
        }
    }

    proptest! {
        #[test]
        fn table_hash_equals_naive(
            key in proptest::collection::vec(any::<u8>(), 0..52),
            input in proptest::collection::vec(any::<u8>(), 0..60),
        ) {
            let t = Toeplitz::new(&key);
            prop_assert_eq!(t.hash(&input), naive_hash(&key, &input));
        }

        #[test]
        fn picked_port_maps_to_wanted_queue(
            local in any::<u32>(), remote in any::<u32>(), rport in any::<u16>(),
            queues in 1u16..16, want in 0u16..16, start in any::<u16>(),
        ) {
            let want = want % queues;
            let rss = RssConfig::symmetric_default(queues);
            let (local, remote) = (Ipv4Addr::from(local), Ipv4Addr::from(remote));
            let port = rss.pick_local_port(local, remote, rport, want, 1024..=65535, start, |_| true);
            let port = port.expect("a 64k port range always has a port per queue");
            prop_assert_eq!(rss.queue_for_rx_flow(remote, local, rport, port), want);
        }
    }
}
