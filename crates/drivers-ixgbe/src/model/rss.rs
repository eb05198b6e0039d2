//! Receive-side scaling as §7.1.2.8 describes it: the Toeplitz hash of a packet's
//! addresses (and ports) under the 40-byte key held in RSSRK, whose low 7 bits index
//! the 128-entry redirection table RETA.

use super::frame::{self, Ipv4Info};
use super::regs;

/// The key as the hash reads it, `K[0]` first: `RSSRK[n]` holds `K[4n]` in bits 7:0,
/// `K[4n+1]` in bits 15:8 and so on (§8.2.3.7.14), so the registers are the key's
/// bytes in little-endian words.
pub(crate) fn key_from_registers(words: &[u32; 10]) -> [u8; 40] {
    let mut key = [0u8; 40];
    for (chunk, w) in key.chunks_exact_mut(4).zip(words) {
        chunk.copy_from_slice(&w.to_le_bytes());
    }
    key
}

/// The Toeplitz hash of `input` under `key` (§7.1.2.8.1): for every set bit of the
/// input, most significant bit of the first byte first, XOR in the 32 bits of the key
/// that start at that bit position.
pub(crate) fn toeplitz(key: &[u8; 40], input: &[u8]) -> u32 {
    let mut hash = 0u32;
    // The key window: 32 bits in use in the high half, the next bits queued below.
    let mut window = u64::from(u32::from_be_bytes([key[0], key[1], key[2], key[3]])) << 32;
    for (next, &byte) in (4..).zip(input) {
        // Refill the low half with the next key byte (zero past the key's end).
        window |= u64::from(key.get(next).copied().unwrap_or(0)) << 24;
        for bit in (0..8).rev() {
            if byte >> bit & 1 == 1 {
                hash ^= (window >> 32) as u32;
            }
            window <<= 1;
        }
    }
    hash
}

/// The hash a packet gets and the RSS type the descriptor reports, given MRQC's field
/// enables; `None` when no enabled hash type applies (RSS type 0).
pub(crate) fn hash(
    key: &[u8; 40],
    mrqc: u32,
    frame_bytes: &[u8],
    ip: Option<&Ipv4Info>,
) -> Option<(u32, u32)> {
    let ip = ip?;
    let mut input = Vec::with_capacity(12);
    input.extend_from_slice(&ip.src);
    input.extend_from_slice(&ip.dst);
    let l4 = ip.l4_header(frame_bytes);
    let with_ports = match l4 {
        Some(frame::PROTO_TCP) if mrqc & regs::MRQC_TCPIPV4 != 0 => Some(regs::RSS_TYPE_TCPIPV4),
        Some(frame::PROTO_UDP) if mrqc & regs::MRQC_UDPIPV4 != 0 => Some(regs::RSS_TYPE_UDPIPV4),
        _ => None,
    };
    if let Some(kind) = with_ports {
        input.extend_from_slice(&frame_bytes[ip.l4()..ip.l4() + 4]);
        return Some((toeplitz(key, &input), kind));
    }
    (mrqc & regs::MRQC_IPV4 != 0).then(|| (toeplitz(key, &input), regs::RSS_TYPE_IPV4))
}

/// The queue RETA sends a hash to: entry `hash & 0x7F`, four 8-bit entries a
/// register with entry 4n in bits 7:0; the 82599 uses the low 4 bits of an entry
/// (§8.2.3.7.13).
pub(crate) fn queue(reta: &[u32; 32], hash: u32) -> usize {
    let entry = (hash & 0x7F) as usize;
    let byte = reta[entry / 4] >> (8 * (entry % 4));
    (byte & 0xF) as usize
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The key of Microsoft's RSS verification suite, which §7.1.2.8.3 reproduces.
    const KEY: [u8; 40] = [
        0x6d, 0x5a, 0x56, 0xda, 0x25, 0x5b, 0x0e, 0xc2, 0x41, 0x67, 0x25, 0x3d, 0x43, 0xa3, 0x8f,
        0xb0, 0xd0, 0xca, 0x2b, 0xcb, 0xae, 0x7b, 0x30, 0xb4, 0x77, 0xcb, 0x2d, 0xa3, 0x80, 0x30,
        0xf2, 0x0c, 0x6a, 0x42, 0xb7, 0x3b, 0xbe, 0xac, 0x01, 0xfa,
    ];

    /// Source, source port, destination, destination port, IPv4 hash, TCP/IPv4 hash.
    type Vector = ([u8; 4], u16, [u8; 4], u16, u32, u32);

    const VECTORS: [Vector; 5] = [
        (
            [66, 9, 149, 187],
            2794,
            [161, 142, 100, 80],
            1766,
            0x323e_8fc2,
            0x51cc_c178,
        ),
        (
            [199, 92, 111, 2],
            14230,
            [65, 69, 140, 83],
            4739,
            0xd718_262a,
            0xc626_b0ea,
        ),
        (
            [24, 19, 198, 95],
            12898,
            [12, 22, 207, 184],
            38024,
            0xd2d0_a5de,
            0x5c2b_394a,
        ),
        (
            [38, 27, 205, 30],
            48228,
            [209, 142, 163, 6],
            2217,
            0x8298_9176,
            0xafc7_327f,
        ),
        (
            [153, 39, 163, 191],
            44251,
            [202, 188, 127, 2],
            1303,
            0x5d18_09c5,
            0x10e8_28a2,
        ),
    ];

    #[test]
    fn microsoft_verification_vectors() {
        for (src, sport, dst, dport, ipv4, tcp) in VECTORS {
            let mut input = [src, dst].concat();
            assert_eq!(toeplitz(&KEY, &input), ipv4, "IPv4 {src:?} -> {dst:?}");
            input.extend_from_slice(&sport.to_be_bytes());
            input.extend_from_slice(&dport.to_be_bytes());
            assert_eq!(toeplitz(&KEY, &input), tcp, "TCP/IPv4 {src:?}:{sport}");
        }
    }

    #[test]
    fn key_registers_are_little_endian_words() {
        let mut words = [0u32; 10];
        for (w, c) in words.iter_mut().zip(KEY.chunks_exact(4)) {
            *w = u32::from_le_bytes(c.try_into().unwrap());
        }
        assert_eq!(words[0], 0xda56_5a6d);
        assert_eq!(key_from_registers(&words), KEY);
    }

    #[test]
    fn reta_entries_use_four_bits() {
        let mut reta = [0u32; 32];
        reta[1] = 0x0000_F300; // entry 5 = 0xF3 -> queue 3
        assert_eq!(queue(&reta, 0x85), 3, "hash bit 7 is ignored, entry 5");
    }
}
