//! What the model needs to know about the bytes it moves: where the IPv4 and TCP/UDP
//! headers of an Ethernet frame are, the Internet checksum (RFC 1071) and the Ethernet
//! FCS (IEEE 802.3 CRC-32). Written here rather than taken from the stack, so that the
//! model checks the stack's and the driver's work instead of sharing it.

/// EtherType of IPv4.
const ETHERTYPE_IPV4: u16 = 0x0800;
/// Ethernet header length (no VLAN tag; tagged frames are treated as non-IP).
pub(crate) const ETH_HEADER: usize = 14;
/// IP protocol numbers.
pub(crate) const PROTO_TCP: u8 = 6;
/// UDP.
pub(crate) const PROTO_UDP: u8 = 17;

/// The layer 3 and 4 headers the receive path parses (§7.1.2.8 hash inputs,
/// §7.1.11 checksum checks).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Ipv4Info {
    /// Offset of the IPv4 header in the frame.
    pub(crate) ip: usize,
    /// IPv4 header length in bytes.
    pub(crate) ihl: usize,
    /// Offset just past the IPv4 datagram (total length), within the frame.
    pub(crate) end: usize,
    /// Protocol field.
    pub(crate) proto: u8,
    /// Whether this is a fragment (MF set or a non-zero offset): no L4 header to use.
    pub(crate) fragment: bool,
    /// Source and destination addresses, as on the wire.
    pub(crate) src: [u8; 4],
    /// Destination address.
    pub(crate) dst: [u8; 4],
}

impl Ipv4Info {
    /// Offset of the L4 header.
    pub(crate) fn l4(&self) -> usize {
        self.ip + self.ihl
    }

    /// Whether a whole TCP or UDP header follows (unfragmented).
    pub(crate) fn l4_header(&self, frame: &[u8]) -> Option<u8> {
        let need = match self.proto {
            PROTO_TCP => 20,
            PROTO_UDP => 8,
            _ => return None,
        };
        (!self.fragment && self.l4() + need <= self.end && self.end <= frame.len())
            .then_some(self.proto)
    }
}

/// Parse an untagged Ethernet II frame carrying IPv4; `None` for anything else or a
/// header that does not hold together.
pub(crate) fn parse_ipv4(frame: &[u8]) -> Option<Ipv4Info> {
    if frame.len() < ETH_HEADER + 20 || be16(frame, 12) != ETHERTYPE_IPV4 {
        return None;
    }
    let ip = ETH_HEADER;
    let vihl = frame[ip];
    let ihl = usize::from(vihl & 0xF) * 4;
    if vihl >> 4 != 4 || ihl < 20 || ip + ihl > frame.len() {
        return None;
    }
    let total = usize::from(be16(frame, ip + 2));
    if total < ihl || ip + total > frame.len() {
        return None;
    }
    let frag = be16(frame, ip + 6);
    Some(Ipv4Info {
        ip,
        ihl,
        end: ip + total,
        proto: frame[ip + 9],
        fragment: frag & 0x3FFF != 0,
        src: frame[ip + 12..ip + 16].try_into().ok()?,
        dst: frame[ip + 16..ip + 20].try_into().ok()?,
    })
}

/// Big-endian u16 at `off` (the caller checked the bounds).
pub(crate) fn be16(b: &[u8], off: usize) -> u16 {
    u16::from_be_bytes([b[off], b[off + 1]])
}

/// Store a big-endian u16 at `off`.
pub(crate) fn put16(b: &mut [u8], off: usize, v: u16) {
    b[off..off + 2].copy_from_slice(&v.to_be_bytes());
}

/// The one's-complement sum of `data` as 16-bit big-endian words (an odd last byte is
/// padded with zero), not yet folded or complemented.
pub(crate) fn sum(data: &[u8]) -> u32 {
    let mut acc: u32 = 0;
    let mut chunks = data.chunks_exact(2);
    for c in &mut chunks {
        acc = acc.wrapping_add(u32::from(u16::from_be_bytes([c[0], c[1]])));
        acc = (acc & 0xFFFF) + (acc >> 16);
    }
    if let [last] = chunks.remainder() {
        acc = acc.wrapping_add(u32::from(*last) << 8);
    }
    acc
}

/// Fold a sum to 16 bits.
pub(crate) fn fold(mut acc: u32) -> u16 {
    while acc > 0xFFFF {
        acc = (acc & 0xFFFF) + (acc >> 16);
    }
    acc as u16
}

/// The sum of the IPv4 pseudo-header (RFC 793 §3.1, RFC 768) for `len` bytes of
/// `proto` between `src` and `dst`.
pub(crate) fn pseudo_sum(src: [u8; 4], dst: [u8; 4], proto: u8, len: usize) -> u32 {
    sum(&src) + sum(&dst) + u32::from(proto) + len as u32
}

/// Whether the IPv4 header checksum is right (the header sums to 0xFFFF).
pub(crate) fn ipv4_header_ok(frame: &[u8], info: &Ipv4Info) -> bool {
    fold(sum(&frame[info.ip..info.ip + info.ihl])) == 0xFFFF
}

/// Whether the TCP or UDP checksum is right; `None` for a UDP datagram without one.
pub(crate) fn l4_ok(frame: &[u8], info: &Ipv4Info) -> Option<bool> {
    let seg = &frame[info.l4()..info.end];
    if info.proto == PROTO_UDP && be16(seg, 6) == 0 {
        return None;
    }
    let total = pseudo_sum(info.src, info.dst, info.proto, seg.len()) + sum(seg);
    Some(fold(total) == 0xFFFF)
}

/// The Ethernet FCS of `frame` (CRC-32, reflected polynomial 0xEDB88320), in the byte
/// order it follows the frame on the wire.
pub(crate) fn fcs(frame: &[u8]) -> [u8; 4] {
    let mut crc: u32 = !0;
    for &b in frame {
        crc ^= u32::from(b);
        for _ in 0..8 {
            crc = if crc & 1 != 0 {
                (crc >> 1) ^ 0xEDB8_8320
            } else {
                crc >> 1
            };
        }
    }
    (!crc).to_le_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crc32_check_value() {
        // The CRC-32 check value: "123456789" gives 0xCBF43926.
        assert_eq!(u32::from_le_bytes(fcs(b"123456789")), 0xCBF4_3926);
    }

    #[test]
    fn rfc1071_example_sum() {
        // RFC 1071 §3: the words 0001 f203 f4f5 f6f7 sum to ddf2.
        assert_eq!(
            fold(sum(&[0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7])),
            0xddf2
        );
    }
}
