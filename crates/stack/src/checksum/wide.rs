//! [`Wide`], the accumulator the engine's TCP path sums a segment in.

use super::{add_native, copy_and_add, fold128, folds_to_ones};

/// A sum in the making, for a header and payload checksummed together: the pieces'
/// native-endian words added into 128 bits with no fold between them, and one fold at
/// the end ([`Wide::verifies`], [`Wide::checksum_bytes`]): a fold, with its byte swap
/// and end-around carries, is the costly step, and a segment summed as pseudo-header,
/// header and payload needs only one.
///
/// Every piece added with [`Wide::add_bytes`] or [`Wide::copy_add`] must start at an even
/// offset of the whole (a piece at an odd offset goes in folded and byte-swapped:
/// [`Wide::add_folded`]). The raw accumulation depends on how the pieces were added
/// (see `add4`), so sums compare by their folded value (`folded`, what the tests compare), and `Wide`
/// has no `==` of its own.
#[derive(Debug, Clone, Copy, Default)]
pub struct Wide(u128);

impl Wide {
    /// The IPv4 pseudo-header of a TCP or UDP datagram of `len` bytes from `src` to
    /// `dst` (RFC 9293 §3.1): its twelve bytes as three native words, the third being
    /// the zero byte, the protocol and the length.
    #[inline]
    pub fn pseudo_v4(src: [u8; 4], dst: [u8; 4], protocol: u8, len: u16) -> Wide {
        let l = len.to_be_bytes();
        let word = |b: [u8; 4]| u64::from(u32::from_ne_bytes(b));
        Wide(u128::from(
            word(src) + word(dst) + word([0, protocol, l[0], l[1]]),
        ))
    }

    /// The IPv6 pseudo-header of an upper-layer packet of `len` bytes from `src` to
    /// `dst` (RFC 8200 §8.1): its forty bytes as five native 64-bit words, the last
    /// being the 32-bit length, three zero bytes and the next-header value.
    #[inline]
    pub fn pseudo_v6(src: [u8; 16], dst: [u8; 16], next_header: u8, len: u32) -> Wide {
        let halves = |b: [u8; 16]| {
            let (hi, lo) = b.split_at(8);
            let word = |h: &[u8]| u128::from(u64::from_ne_bytes(h.try_into().expect("8 bytes")));
            word(hi) + word(lo)
        };
        let l = len.to_be_bytes();
        let last = u64::from_ne_bytes([l[0], l[1], l[2], l[3], 0, 0, 0, next_header]);
        Wide(halves(src) + halves(dst) + u128::from(last))
    }

    /// [`Wide::pseudo_v4`] of the source and destination addresses as they lie in an
    /// IPv4 header, side by side (`header[12..20]`).
    #[inline]
    pub fn pseudo_v4_at(addresses: &[u8; 8], protocol: u8, len: u16) -> Wide {
        let (src, dst) = addresses.split_at(4);
        let word = |b: &[u8]| <[u8; 4]>::try_from(b).expect("four bytes");
        Wide::pseudo_v4(word(src), word(dst), protocol, len)
    }

    /// [`Wide::pseudo_v6`] of the source and destination addresses as they lie in an
    /// IPv6 header, side by side (`header[8..40]`).
    #[inline]
    pub fn pseudo_v6_at(addresses: &[u8; 32], next_header: u8, len: u32) -> Wide {
        let l = len.to_be_bytes();
        let last = u64::from_ne_bytes([l[0], l[1], l[2], l[3], 0, 0, 0, next_header]);
        Wide(u128::from(last)).add_bytes(addresses)
    }

    /// The pseudo-header of a TCP segment of `len` bytes from `src` to `dst`, of
    /// either family (both must be of the same one; a mixed pair sums as IPv6 with the
    /// IPv4 address mapped, which matches no segment).
    #[inline]
    pub fn pseudo_tcp(src: std::net::IpAddr, dst: std::net::IpAddr, len: u16) -> Wide {
        use std::net::IpAddr;
        const TCP: u8 = 6;
        match (src, dst) {
            (IpAddr::V4(s), IpAddr::V4(d)) => Wide::pseudo_v4(s.octets(), d.octets(), TCP, len),
            _ => Wide::pseudo_tcp_v6(src, dst, len),
        }
    }

    /// [`Wide::pseudo_tcp`] for IPv6, out of line beside the IPv4 path.
    #[cold]
    fn pseudo_tcp_v6(src: std::net::IpAddr, dst: std::net::IpAddr, len: u16) -> Wide {
        let v6 = |a| crate::ipv6::as_v6(a).octets();
        Wide::pseudo_v6(v6(src), v6(dst), 6, u32::from(len))
    }

    /// Plus the bytes of `data`.
    // Always inlined: see `add_native`.
    #[inline(always)]
    pub fn add_bytes(self, data: &[u8]) -> Wide {
        Wide(add_native(self.0, data))
    }

    /// Plus the bytes of `src`, copied into `dst` (the same length) as they are read.
    // Always inlined: see `add_native`.
    #[inline(always)]
    pub fn copy_add(self, src: &[u8], dst: &mut [u8]) -> Wide {
        Wide(copy_and_add(self.0, src, dst))
    }

    /// Plus a piece's sum `part` as [`sum`](super::sum) or [`fold`](super::fold) give it, the piece starting at
    /// an odd offset of the whole when `offset_is_odd` (as a piece at an odd offset adds: RFC 1071 §2, C).
    #[inline]
    pub fn add_folded(self, part: u16, offset_is_odd: bool) -> Wide {
        // `sum` is the byte swap of the native sum; a piece at an odd offset is swapped
        // once more (RFC 1071 §2(B), (C)).
        let native = u16::from_be(part);
        let native = if offset_is_odd {
            native.swap_bytes()
        } else {
            native
        };
        Wide(self.0 + u128::from(native))
    }

    /// The sum folded, as [`sum`] gives it.
    #[inline]
    #[cfg(test)]
    pub fn folded(self) -> u16 {
        u16::from_be(fold128(self.0))
    }

    /// Whether the bytes summed, a checksum field among them, check (RFC 1071 §1:
    /// all ones, which reads the same in either byte order).
    #[inline]
    pub fn verifies(self) -> bool {
        folds_to_ones(self.0)
    }

    /// The sum folded, not complemented, as its two bytes in network order: what a
    /// checksum field holds for a device that completes the sum (`CHECKSUM_PARTIAL`).
    #[inline]
    pub fn folded_bytes(self) -> [u8; 2] {
        fold128(self.0).to_ne_bytes()
    }

    /// The checksum of the bytes summed (their checksum field zero), as its two bytes
    /// in network order.
    #[inline]
    pub fn checksum_bytes(self) -> [u8; 2] {
        // The checksum is the complement of the big-endian folded sum, which is the
        // native one read in network order.
        (!fold128(self.0)).to_ne_bytes()
    }
}
