//! The virtio-net header (`struct virtio_net_hdr`, linux/virtio_net.h; virtio 1.x spec
//! §5.1.6 "Device Operation") that prefixes every frame on a TAP opened with
//! `IFF_VNET_HDR`, and its mapping to the stack's [`RxMeta`] / [`TxMeta`].
//!
//! ```text
//! u8  flags        NEEDS_CSUM (1), DATA_VALID (2)
//! u8  gso_type     NONE (0), TCPV4 (1), UDP (3), TCPV6 (4), UDP_L4 (5), | ECN (0x80)
//! u16 hdr_len      Ethernet + IP + TCP header bytes of a GSO frame
//! u16 gso_size     payload bytes per segment of a GSO frame
//! u16 csum_start   where checksumming starts (frame offset)
//! u16 csum_offset  where, from csum_start, the folded sum goes
//! ```
//!
//! The 16-bit fields are in the legacy virtio byte order, which TUN uses unless told
//! otherwise (`TUNSETVNETLE`/`TUNSETVNETBE`): the host's native order.

use rusty_stack::io::{ChecksumRequest, RxMeta, TxMeta};

/// Size of `struct virtio_net_hdr` (without the `num_buffers` of the mergeable variant).
pub const VNET_HDR_LEN: usize = 10;

/// `csum_start`/`csum_offset` are valid: the transport checksum is partial (the
/// pseudo-header sum only); whoever transmits the frame must finish it.
pub const F_NEEDS_CSUM: u8 = 1;
/// The sender already validated the checksums.
pub const F_DATA_VALID: u8 = 2;

/// `gso_type`: an ordinary frame, not a super-frame.
pub const GSO_NONE: u8 = 0;
/// `gso_type`: a TCP/IPv4 super-frame, cut into segments of `gso_size` payload bytes
/// (TSO); the driver enables it and [`GSO_TCPV6`], no other.
pub const GSO_TCPV4: u8 = 1;
/// `gso_type`: a UDP/IPv4 super-frame to be fragmented (UFO); refused on receive.
pub const GSO_UDP: u8 = 3;
/// `gso_type`: a TCP/IPv6 super-frame, cut like [`GSO_TCPV4`]'s.
pub const GSO_TCPV6: u8 = 4;
/// `gso_type`: a UDP super-frame cut into datagrams (USO); refused on receive.
pub const GSO_UDP_L4: u8 = 5;
/// Modifier bit: the super-frame's first segment carries CWR (RFC 3168 §6.1.2).
pub const GSO_ECN: u8 = 0x80;

/// A decoded virtio-net header.
// Exhaustive: the fields of `struct virtio_net_hdr`, a layout fixed by the virtio spec.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct VnetHdr {
    /// [`F_NEEDS_CSUM`] and [`F_DATA_VALID`] bits.
    pub flags: u8,
    /// One of the `GSO_*` types, possibly with the [`GSO_ECN`] bit.
    pub gso_type: u8,
    /// Bytes of Ethernet, IP and TCP headers in front of a GSO frame's payload, which
    /// the kernel repeats on every segment.
    pub hdr_len: u16,
    /// Payload bytes per segment of a GSO frame (the MSS); 0 for an ordinary frame.
    pub gso_size: u16,
    /// Offset in the frame where checksumming starts (the transport header), when
    /// [`F_NEEDS_CSUM`] is set.
    pub csum_start: u16,
    /// Offset from `csum_start` of the checksum field the folded sum goes into (16 for
    /// TCP), when [`F_NEEDS_CSUM`] is set.
    pub csum_offset: u16,
}

/// Why a received header was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum VnetError {
    /// Fewer than [`VNET_HDR_LEN`] bytes.
    Truncated,
    /// A GSO type the stack does not take (we only enable TCPv4 segmentation offload, so
    /// the kernel should never send another).
    UnsupportedGso(u8),
}

impl VnetHdr {
    /// The header at the start of `bytes` (the frame follows it); its fields are taken
    /// as they are, checked only by [`rx_meta`](Self::rx_meta).
    pub fn decode(bytes: &[u8]) -> Result<VnetHdr, VnetError> {
        let b: &[u8; VNET_HDR_LEN] = bytes
            .get(..VNET_HDR_LEN)
            .and_then(|b| b.try_into().ok())
            .ok_or(VnetError::Truncated)?;
        let u16_at = |i: usize| u16::from_ne_bytes([b[i], b[i + 1]]);
        Ok(VnetHdr {
            flags: b[0],
            gso_type: b[1],
            hdr_len: u16_at(2),
            gso_size: u16_at(4),
            csum_start: u16_at(6),
            csum_offset: u16_at(8),
        })
    }

    /// Write the header into the first [`VNET_HDR_LEN`] bytes of a frame buffer.
    pub fn encode(&self, out: &mut [u8; VNET_HDR_LEN]) {
        out[0] = self.flags;
        out[1] = self.gso_type;
        out[2..4].copy_from_slice(&self.hdr_len.to_ne_bytes());
        out[4..6].copy_from_slice(&self.gso_size.to_ne_bytes());
        out[6..8].copy_from_slice(&self.csum_start.to_ne_bytes());
        out[8..10].copy_from_slice(&self.csum_offset.to_ne_bytes());
    }

    /// What the stack needs to know about a received frame.
    ///
    /// A frame with `NEEDS_CSUM` comes from the local kernel (`CHECKSUM_PARTIAL`): its
    /// transport checksum field holds only the pseudo-header sum, and nothing on the wire
    /// can have corrupted it, so it counts as verified — as Linux's own receive path
    /// treats `CHECKSUM_PARTIAL`. Its IPv4 header checksum is always complete (virtio
    /// never offloads that one). `DATA_VALID` is the sender's statement that it checked.
    pub fn rx_meta(&self) -> Result<RxMeta, VnetError> {
        let gso_size = match self.gso_type & !GSO_ECN {
            GSO_NONE => None,
            GSO_TCPV4 | GSO_TCPV6 => Some(self.gso_size),
            other => return Err(VnetError::UnsupportedGso(other)),
        };
        Ok(RxMeta {
            checksum_verified: self.flags & (F_NEEDS_CSUM | F_DATA_VALID) != 0,
            gso_size,
        })
    }

    /// The header asking the kernel for the offload work in `meta`, for `frame` (the
    /// Ethernet frame, whose headers give `hdr_len` for TSO).
    pub fn for_tx(meta: &TxMeta, frame: &[u8]) -> VnetHdr {
        let mut h = VnetHdr::default();
        if let Some(ChecksumRequest { start, offset }) = meta.checksum {
            h.flags = F_NEEDS_CSUM;
            h.csum_start = start;
            h.csum_offset = offset;
        }
        if let Some(mss) = meta.tso_mss {
            h.gso_type = if is_ipv6(frame) { GSO_TCPV6 } else { GSO_TCPV4 };
            h.gso_size = mss;
            h.hdr_len = tcp_headers_len(frame).unwrap_or(0);
        }
        h
    }
}

/// Whether `frame`'s EtherType is IPv6's.
fn is_ipv6(frame: &[u8]) -> bool {
    frame.get(12..14) == Some(&[0x86, 0xdd][..])
}

/// Ethernet + IP + TCP header length of a TCP frame, from its IHL (IPv4; an IPv6 frame
/// of ours has the fixed header alone, no extension headers) and data offset fields;
/// `None` when the frame is too short to tell.
fn tcp_headers_len(frame: &[u8]) -> Option<u16> {
    const ETH: usize = rusty_stack::io::ETHERNET_HEADER_LEN;
    let ihl = if is_ipv6(frame) {
        40
    } else {
        usize::from(frame.get(ETH)? & 0x0f) * 4
    };
    let doff = usize::from(frame.get(ETH + ihl + 12)? >> 4) * 4;
    u16::try_from(ETH + ihl + doff).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encode_decode_round_trip() {
        let h = VnetHdr {
            flags: F_NEEDS_CSUM,
            gso_type: GSO_TCPV4,
            hdr_len: 66,
            gso_size: 1448,
            csum_start: 34,
            csum_offset: 16,
        };
        let mut b = [0u8; VNET_HDR_LEN];
        h.encode(&mut b);
        assert_eq!(b[0], 1);
        assert_eq!(b[1], 1);
        assert_eq!(&b[4..6], &1448u16.to_ne_bytes());
        assert_eq!(VnetHdr::decode(&b), Ok(h));
        assert_eq!(VnetHdr::decode(&b[..9]), Err(VnetError::Truncated));
    }

    #[test]
    fn rx_meta_trusts_partial_and_validated_checksums() {
        let plain = VnetHdr::default();
        assert_eq!(plain.rx_meta(), Ok(RxMeta::default()));
        for flags in [F_NEEDS_CSUM, F_DATA_VALID] {
            let h = VnetHdr {
                flags,
                ..VnetHdr::default()
            };
            assert!(h.rx_meta().unwrap().checksum_verified);
        }
        let gso = VnetHdr {
            flags: F_NEEDS_CSUM,
            gso_type: GSO_TCPV4 | GSO_ECN,
            gso_size: 1448,
            ..VnetHdr::default()
        };
        assert_eq!(
            gso.rx_meta(),
            Ok(RxMeta {
                checksum_verified: true,
                gso_size: Some(1448)
            })
        );
        let v6 = VnetHdr {
            gso_type: GSO_TCPV6,
            gso_size: 1428,
            ..VnetHdr::default()
        };
        assert_eq!(v6.rx_meta().map(|m| m.gso_size), Ok(Some(1428)));
        for t in [GSO_UDP, GSO_UDP_L4] {
            let h = VnetHdr {
                gso_type: t,
                ..VnetHdr::default()
            };
            assert_eq!(h.rx_meta(), Err(VnetError::UnsupportedGso(t)));
        }
    }

    #[test]
    fn tx_header_carries_checksum_and_tso_requests() {
        // Ethernet, IPv4 with IHL 5, TCP with data offset 8 (32 bytes: timestamps).
        let mut frame = vec![0u8; 14 + 20 + 32 + 100];
        frame[14] = 0x45;
        frame[14 + 20 + 12] = 8 << 4;
        assert_eq!(
            VnetHdr::for_tx(&TxMeta::default(), &frame),
            VnetHdr::default()
        );
        let meta = TxMeta {
            checksum: Some(ChecksumRequest {
                start: 34,
                offset: 16,
            }),
            tso_mss: Some(1448),
        };
        assert_eq!(
            VnetHdr::for_tx(&meta, &frame),
            VnetHdr {
                flags: F_NEEDS_CSUM,
                gso_type: GSO_TCPV4,
                hdr_len: 66,
                gso_size: 1448,
                csum_start: 34,
                csum_offset: 16,
            }
        );
        // A frame too short to hold its headers leaves hdr_len to the kernel.
        assert_eq!(VnetHdr::for_tx(&meta, &frame[..20]).hdr_len, 0);
        // IPv6: the fixed header, then TCP with timestamps.
        let mut frame = vec![0u8; 14 + 40 + 32 + 100];
        frame[12..14].copy_from_slice(&[0x86, 0xdd]);
        frame[14] = 0x60;
        frame[14 + 40 + 12] = 8 << 4;
        let meta = TxMeta {
            checksum: Some(ChecksumRequest {
                start: 54,
                offset: 16,
            }),
            tso_mss: Some(1428),
        };
        let h = VnetHdr::for_tx(&meta, &frame);
        assert_eq!((h.gso_type, h.hdr_len, h.gso_size), (GSO_TCPV6, 86, 1428));
    }
}
