//! What the model's classifier reads of a packet, after the default classifier's
//! description in `gxio/mpipe.h`: the L2 header, IPv4 (packets with a bad header
//! checksum are dropped), and for TCP and UDP the ports and a checksum the iDMA engine
//! computes; a flow hash over the addresses and ports.
//!
//! The hash is CRC-32C (Castagnoli, reflected polynomial 0x82F63B78) over source
//! address, destination address, source port, destination port in wire order (IPv4
//! TCP/UDP, first fragments); over the two addresses for other IPv4 packets (and later
//! fragments, as the real classifier does); over destination and source MAC otherwise.
//! The real classifier's hash function is not documented in the headers; any hash with
//! every input bit reaching the low bits spreads flows over the buckets alike.

use rusty_stack::checksum;

/// The classifier's findings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Class {
    pub(super) hash: u32,
    pub(super) ethertype: u16,
    /// IPv4: header start, L4 start, protocol.
    pub(super) l3: Option<(u8, u8, u8)>,
    /// TCP/UDP: the checksum to check (L4 start, and the pseudo-header seed).
    pub(super) l4_csum: Option<(usize, u32)>,
}

/// Why the classifier dropped a packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Drop {
    /// Shorter than an Ethernet header.
    Runt,
    /// An IPv4 header whose checksum is wrong.
    BadIpChecksum,
}

pub(super) fn classify(p: &[u8]) -> Result<Class, Drop> {
    if p.len() < 14 {
        return Err(Drop::Runt);
    }
    let ethertype = u16::from_be_bytes([p[12], p[13]]);
    let mac_hash = || crc32c(&[&p[0..6], &p[6..12]]);
    if ethertype != 0x0800 || p.len() < 34 || p[14] >> 4 != 4 {
        return Ok(Class {
            hash: mac_hash(),
            ethertype,
            l3: None,
            l4_csum: None,
        });
    }
    let ihl = usize::from(p[14] & 0x0F) * 4;
    let total = usize::from(u16::from_be_bytes([p[16], p[17]]));
    if ihl < 20 || p.len() < 14 + ihl || total < ihl || p.len() < 14 + total {
        return Err(Drop::BadIpChecksum);
    }
    if !checksum::verify(&p[14..14 + ihl]) {
        return Err(Drop::BadIpChecksum);
    }
    let proto = p[23];
    let (src, dst) = (&p[26..30], &p[30..34]);
    let l4 = 14 + ihl;
    let first_fragment = u16::from_be_bytes([p[20], p[21]]) & 0x1FFF == 0;
    let ports = (proto == 6 || proto == 17) && first_fragment && total >= ihl + 8;
    let hash = if ports {
        crc32c(&[src, dst, &p[l4..l4 + 4]])
    } else {
        crc32c(&[src, dst])
    };
    let l4_len = total - ihl;
    // UDP with a zero checksum has none to check.
    let udp_none = proto == 17 && ports && p[l4 + 6] == 0 && p[l4 + 7] == 0;
    let l4_csum = (ports && !udp_none).then(|| {
        let s: [u8; 4] = [src[0], src[1], src[2], src[3]];
        let d: [u8; 4] = [dst[0], dst[1], dst[2], dst[3]];
        (l4, checksum::pseudo_header_v4(s, d, proto, l4_len as u16))
    });
    Ok(Class {
        hash,
        ethertype,
        l3: Some((14, l4 as u8, proto)),
        l4_csum,
    })
}

/// The iDMA checksum engine over `p[start..end]` seeded with `seed`, folded (0xFFFF
/// for a segment whose checksum verifies).
pub(super) fn l4_result(p: &[u8], start: usize, end: usize, seed: u32) -> u16 {
    checksum::fold(checksum::combine(seed, checksum::sum(&p[start..end])))
}

/// CRC-32C of the concatenated `parts`.
pub(super) fn crc32c(parts: &[&[u8]]) -> u32 {
    let mut crc = !0u32;
    for b in parts.iter().flat_map(|p| p.iter()) {
        crc ^= u32::from(*b);
        for _ in 0..8 {
            crc = (crc >> 1) ^ (0x82F6_3B78 & (crc & 1).wrapping_neg());
        }
    }
    !crc
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crc32c_check_value() {
        // The CRC catalogue's check value for "123456789".
        assert_eq!(crc32c(&[b"1234", b"56789"]), 0xE306_9283);
    }
}
