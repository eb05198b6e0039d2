//! TCP segments as the state machine sees them: [`Segment`] is a parsed incoming segment
//! (header fields and options, the payload stays in the frame), [`TxSegment`] is what the
//! state machine asks the engine to send (header fields plus a byte range of the send
//! buffer). Parsing and emitting go through `smoltcp::wire` so hostile headers become
//! errors, never panics.

use std::net::Ipv4Addr;

use smoltcp::phy::ChecksumCapabilities;
use smoltcp::wire::{IpAddress, TcpControl, TcpPacket, TcpRepr, TcpTimestampRepr};

use super::seq::SeqNum;
use crate::checksum;
use crate::ipv4::IpProtocol;

/// Where the checksum sits in a TCP header (RFC 9293 §3.1).
pub const CHECKSUM_OFFSET: usize = 16;

/// A TCP header without options (RFC 9293 §3.1: data offset 5).
pub const MIN_HEADER_LEN: usize = 20;

/// The largest TCP header, options included (data offset 15).
pub const MAX_HEADER_LEN: usize = 60;

/// The sum of the IPv4 pseudo-header of a TCP segment of `len` bytes (header and
/// payload) from `src` to `dst`, which its checksum covers (RFC 9293 §3.1).
pub fn pseudo_header_sum(src: Ipv4Addr, dst: Ipv4Addr, len: u16) -> u32 {
    checksum::pseudo_header_v4(src.octets(), dst.octets(), IpProtocol::Tcp.into(), len)
}

/// Why a TCP segment could not be parsed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ParseError {
    /// Truncated, bad data offset, bad options, port zero or an impossible flag mix.
    Malformed,
    /// The checksum does not match.
    Checksum,
}

/// The control bits the state machine acts on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Flags {
    /// Synchronize sequence numbers.
    pub syn: bool,
    /// The acknowledgment field is significant.
    pub ack: bool,
    /// No more data from the sender.
    pub fin: bool,
    /// Reset the connection.
    pub rst: bool,
    /// Push: deliver without waiting for more.
    pub psh: bool,
}

/// A parsed incoming segment. The payload is not part of it: it stays in the frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Segment {
    /// The sender's port.
    pub src_port: u16,
    /// Our port.
    pub dst_port: u16,
    /// SEG.SEQ: the sequence number of the first byte (or of the SYN).
    pub seq: SeqNum,
    /// SEG.ACK. Meaningful only when `flags.ack` is set.
    pub ack: SeqNum,
    /// The control bits.
    pub flags: Flags,
    /// The raw window field, not yet scaled.
    pub window: u16,
    /// The MSS option (SYNs).
    pub mss: Option<u16>,
    /// The window-scale option (SYNs).
    pub wscale: Option<u8>,
    /// The SACK-permitted option (SYNs).
    pub sack_permitted: bool,
    /// (TSval, TSecr), RFC 7323.
    pub timestamp: Option<(u32, u32)>,
    /// SACK blocks (left edge, right edge) as received, RFC 2018: not validated here
    /// (the connection checks them against its send sequence space). A fourth block
    /// (possible only without timestamps) is not kept.
    pub sack: [Option<(u32, u32)>; 3],
    /// Bytes of payload after the header.
    pub payload_len: usize,
}

impl Segment {
    /// SEG.LEN: payload plus one for each of SYN and FIN (RFC 9293 §3.4).
    pub fn seg_len(&self) -> usize {
        self.payload_len + self.flags.syn as usize + self.flags.fin as usize
    }

    /// Parse the TCP part of an IPv4 packet. `checksum_verified` says the device has
    /// already checked it.
    pub fn parse(
        tcp: &[u8],
        src: Ipv4Addr,
        dst: Ipv4Addr,
        checksum_verified: bool,
    ) -> Result<(Segment, &[u8]), ParseError> {
        let packet = TcpPacket::new_checked(tcp).map_err(|_| ParseError::Malformed)?;
        let (s, d) = (IpAddress::Ipv4(src), IpAddress::Ipv4(dst));
        if !checksum_verified {
            let len = u16::try_from(tcp.len()).map_err(|_| ParseError::Malformed)?;
            let pseudo = pseudo_header_sum(src, dst, len);
            if !checksum::verify_with(pseudo, tcp) {
                return Err(ParseError::Checksum);
            }
        }
        let repr = TcpRepr::parse(&packet, &s, &d, &ChecksumCapabilities::ignored())
            .map_err(|_| ParseError::Malformed)?;
        let flags = Flags {
            syn: repr.control == TcpControl::Syn,
            ack: repr.ack_number.is_some(),
            fin: repr.control == TcpControl::Fin,
            rst: repr.control == TcpControl::Rst,
            psh: packet.psh(),
        };
        let seg = Segment {
            src_port: repr.src_port,
            dst_port: repr.dst_port,
            seq: repr.seq_number.into(),
            ack: repr.ack_number.map(SeqNum::from).unwrap_or_default(),
            flags,
            window: repr.window_len,
            mss: repr.max_seg_size,
            wscale: repr.window_scale,
            sack_permitted: repr.sack_permitted,
            timestamp: repr.timestamp.map(|t| (t.tsval, t.tsecr)),
            sack: repr.sack_ranges,
            payload_len: repr.payload.len(),
        };
        Ok((seg, repr.payload))
    }
}

/// A segment the state machine wants sent. The payload is `payload_len` bytes of the
/// connection's send buffer starting `payload_offset` bytes from its front (the first
/// unacknowledged data byte).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TxSegment {
    /// SEG.SEQ.
    pub seq: SeqNum,
    /// Sent with the ACK bit when `Some`.
    pub ack: Option<SeqNum>,
    /// SYN bit.
    pub syn: bool,
    /// FIN bit.
    pub fin: bool,
    /// RST bit.
    pub rst: bool,
    /// PSH bit.
    pub psh: bool,
    /// The window field as sent (already scaled down).
    pub window: u16,
    /// MSS option (SYNs).
    pub mss: Option<u16>,
    /// Window-scale option (SYNs).
    pub wscale: Option<u8>,
    /// SACK-permitted option (SYNs).
    pub sack_permitted: bool,
    /// (TSval, TSecr), RFC 7323.
    pub timestamp: Option<(u32, u32)>,
    /// SACK blocks (left edge, right edge), RFC 2018.
    pub sack: [Option<(u32, u32)>; 3],
    /// Where the payload starts in the send buffer, from its first unacknowledged byte.
    pub payload_offset: usize,
    /// Bytes of payload.
    pub payload_len: usize,
    /// A TSO super-frame: the device cuts the payload into segments of this size.
    pub tso_mss: Option<u16>,
}

impl TxSegment {
    fn repr(&self, src_port: u16, dst_port: u16) -> TcpRepr<'static> {
        let control = if self.syn {
            TcpControl::Syn
        } else if self.fin {
            TcpControl::Fin
        } else if self.rst {
            TcpControl::Rst
        } else if self.psh {
            TcpControl::Psh
        } else {
            TcpControl::None
        };
        TcpRepr {
            src_port,
            dst_port,
            control,
            seq_number: self.seq.into(),
            ack_number: self.ack.map(Into::into),
            window_len: self.window,
            window_scale: self.wscale,
            max_seg_size: self.mss,
            sack_permitted: self.sack_permitted,
            sack_ranges: self.sack,
            timestamp: self
                .timestamp
                .map(|(tsval, tsecr)| TcpTimestampRepr::new(tsval, tsecr)),
            payload: &[],
        }
    }

    /// Length of the TCP header (options included) this segment needs.
    pub fn header_len(&self) -> usize {
        self.repr(1, 1).header_len()
    }

    /// Write the TCP header into `buf` (exactly `header_len()` bytes) with a zero
    /// checksum; the caller appends the payload and fills the checksum.
    pub fn write_header(&self, buf: &mut [u8], src_port: u16, dst_port: u16) {
        let repr = self.repr(src_port, dst_port);
        let mut packet = TcpPacket::new_unchecked(buf);
        repr.emit(
            &mut packet,
            &IpAddress::Ipv4(Ipv4Addr::UNSPECIFIED),
            &IpAddress::Ipv4(Ipv4Addr::UNSPECIFIED),
            &ChecksumCapabilities::ignored(),
        );
        // smoltcp does not emit FIN together with PSH or ACK-only combos beyond its
        // `Control` enum; PSH alongside FIN is set by hand.
        if self.psh && self.fin {
            packet.set_psh(true);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn roundtrip(tx: TxSegment, payload: &[u8]) -> (Segment, Vec<u8>) {
        let src = Ipv4Addr::new(10, 0, 0, 1);
        let dst = Ipv4Addr::new(10, 0, 0, 2);
        let hl = tx.header_len();
        let mut buf = vec![0u8; hl + payload.len()];
        tx.write_header(&mut buf[..hl], 1234, 80);
        buf[hl..].copy_from_slice(payload);
        let ph = pseudo_header_sum(src, dst, buf.len() as u16);
        let c = !checksum::fold(ph + checksum::sum(&buf));
        buf[CHECKSUM_OFFSET..CHECKSUM_OFFSET + 2].copy_from_slice(&c.to_be_bytes());
        let (seg, p) = Segment::parse(&buf, src, dst, false).expect("parses");
        (seg, p.to_vec())
    }

    #[test]
    fn syn_options_round_trip() {
        let tx = TxSegment {
            seq: SeqNum(7),
            syn: true,
            window: 65535,
            mss: Some(1460),
            wscale: Some(7),
            sack_permitted: true,
            timestamp: Some((1, 0)),
            ..Default::default()
        };
        let (seg, p) = roundtrip(tx, &[]);
        assert!(seg.flags.syn && !seg.flags.ack);
        assert_eq!(seg.mss, Some(1460));
        assert_eq!(seg.wscale, Some(7));
        assert!(seg.sack_permitted);
        assert_eq!(seg.timestamp, Some((1, 0)));
        assert_eq!(seg.seg_len(), 1);
        assert!(p.is_empty());
    }

    #[test]
    fn data_fin_psh_round_trip_and_bad_checksum() {
        let tx = TxSegment {
            seq: SeqNum(u32::MAX),
            ack: Some(SeqNum(5)),
            fin: true,
            psh: true,
            window: 100,
            sack: [Some((10, 20)), Some((30, 40)), None],
            timestamp: Some((9, 8)),
            ..Default::default()
        };
        let (seg, p) = roundtrip(tx, b"hello");
        assert!(seg.flags.fin && seg.flags.ack && seg.flags.psh);
        assert_eq!(seg.ack, SeqNum(5));
        assert_eq!(seg.sack, [Some((10, 20)), Some((30, 40)), None]);
        assert_eq!(p, b"hello");
        assert_eq!(seg.seg_len(), 6);

        let src = Ipv4Addr::new(10, 0, 0, 1);
        let dst = Ipv4Addr::new(10, 0, 0, 2);
        let mut buf = vec![0u8; tx.header_len()];
        tx.write_header(&mut buf, 1, 2);
        assert_eq!(
            Segment::parse(&buf, src, dst, false).unwrap_err(),
            ParseError::Checksum
        );
        assert!(Segment::parse(&buf[..10], src, dst, true).is_err());
    }

    use proptest::prelude::*;

    fn arb_tx() -> impl Strategy<Value = TxSegment> {
        (
            any::<u32>(),
            proptest::option::of(any::<u32>()),
            (any::<bool>(), any::<bool>(), any::<bool>()),
            any::<u16>(),
            proptest::option::of(64u16..),
            proptest::option::of(0u8..=14),
            any::<bool>(),
            proptest::option::of((any::<u32>(), any::<u32>())),
            proptest::collection::vec((any::<u32>(), any::<u32>()), 0..=3),
            0usize..64,
        )
            .prop_map(
                |(seq, ack, (syn, fin, psh), window, mss, wscale, sp, ts, sack, len)| {
                    let mut tx = TxSegment {
                        seq: SeqNum(seq),
                        ack: ack.map(SeqNum),
                        syn,
                        fin: fin && !syn,
                        psh,
                        window,
                        timestamp: ts,
                        payload_len: len,
                        ..Default::default()
                    };
                    if syn {
                        tx.mss = mss;
                        tx.wscale = wscale;
                        tx.sack_permitted = sp;
                    } else if tx.ack.is_some() {
                        for (slot, b) in tx.sack.iter_mut().zip(sack) {
                            *slot = Some(b);
                        }
                    }
                    tx
                },
            )
    }

    proptest! {
        /// Every header we can emit parses back to the same fields and options.
        #[test]
        fn options_round_trip(tx in arb_tx(), fill in any::<u8>()) {
            let payload = vec![fill; tx.payload_len];
            let (seg, p) = roundtrip(tx, &payload);
            prop_assert_eq!(seg.seq, tx.seq);
            prop_assert_eq!(seg.flags.ack, tx.ack.is_some());
            if let Some(a) = tx.ack {
                prop_assert_eq!(seg.ack, a);
            }
            prop_assert_eq!(seg.flags.syn, tx.syn);
            prop_assert_eq!(seg.flags.fin, tx.fin);
            prop_assert_eq!(seg.window, tx.window);
            prop_assert_eq!(seg.mss, tx.mss);
            prop_assert_eq!(seg.wscale, tx.wscale);
            prop_assert_eq!(seg.sack_permitted, tx.sack_permitted);
            prop_assert_eq!(seg.timestamp, tx.timestamp);
            let blocks = |s: &[Option<(u32, u32)>; 3]| s.iter().flatten().copied().collect::<Vec<_>>();
            prop_assert_eq!(blocks(&seg.sack), blocks(&tx.sack));
            prop_assert_eq!(p, payload);
        }

        /// Hostile bytes never panic the parser.
        #[test]
        fn parse_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..80), verified in any::<bool>()) {
            let _ = Segment::parse(&bytes, Ipv4Addr::new(1, 2, 3, 4), Ipv4Addr::new(5, 6, 7, 8), verified);
        }
    }
}
