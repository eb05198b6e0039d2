//! [`Script`]: inputs for [`engine_frame`](super::engine_frame) written record by
//! record (the seed corpus and the tests build them with it), so that the input format
//! lives beside the target only.

use super::v6::icmp6;
use super::{Record, OPEN};

/// An input for [`engine_frame`](super::engine_frame), written record by record.
pub(crate) struct Script(Vec<u8>);

impl Script {
    /// A script starting with `header`; with [`OPEN`] in it, `isn` is the peer's ISN.
    pub(crate) fn new(header: u8, isn: u32) -> Script {
        let mut s = vec![header];
        if header & OPEN != 0 {
            s.extend_from_slice(&isn.to_le_bytes());
        }
        Script(s)
    }

    pub(crate) fn raw(mut self, flags: u8, frame: &[u8]) -> Script {
        let len = u16::try_from(frame.len()).expect("frame under 64 KiB");
        self.0.extend_from_slice(&[Record::Raw as u8, flags]);
        self.0.extend_from_slice(&len.to_le_bytes());
        self.0.extend_from_slice(frame);
        self
    }

    /// A segment record; `extra` follows the option byte (a SACK block's offset and
    /// length when `opts` asks for one).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn segment(
        mut self,
        tag_bits: u8,
        flags: u8,
        seq_off: i16,
        ack_off: i16,
        window: u16,
        len: u16,
        opts: u8,
        extra: &[u8],
    ) -> Script {
        self.0.push(Record::Segment as u8 | tag_bits << 3);
        self.0.push(flags);
        self.0.extend_from_slice(&seq_off.to_le_bytes());
        self.0.extend_from_slice(&ack_off.to_le_bytes());
        self.0.extend_from_slice(&window.to_le_bytes());
        self.0.extend_from_slice(&len.to_le_bytes());
        self.0.push(opts);
        self.0.extend_from_slice(extra);
        self
    }

    /// In-order data (or nothing) acknowledging everything, with `flags` (see
    /// `Bench::segment`).
    pub(crate) fn data(self, flags: u8, len: u16) -> Script {
        self.segment(0, flags, 0, 0, 65535, len, 0, &[])
    }

    pub(crate) fn advance(mut self, b: u8) -> Script {
        self.0.extend_from_slice(&[Record::Advance as u8, b]);
        self
    }

    pub(crate) fn app(mut self, b: u8) -> Script {
        self.0.extend_from_slice(&[Record::App as u8, b]);
        self
    }

    pub(crate) fn mode(self, index: u8) -> Script {
        self.app(index << 2)
    }

    pub(crate) fn ping(mut self, len: u16) -> Script {
        self.0.push(Record::Ping as u8);
        self.0.extend_from_slice(&len.to_le_bytes());
        self
    }

    pub(crate) fn arp(mut self, tag_bits: u8, mac: u8, sender: u8, target: u8) -> Script {
        self.0
            .extend_from_slice(&[Record::Arp as u8 | tag_bits << 3, mac, sender, target]);
        self
    }

    /// An [`Record::Icmp6`] of `kind` (see [`icmp6`]) from the address `src` selects,
    /// with its `fields` after the source (the hop limit first if `flags` asks for
    /// one).
    pub(crate) fn icmp6(mut self, kind: u8, flags: u8, src: u8, fields: &[u8]) -> Script {
        self.0
            .extend_from_slice(&[Record::Icmp6 as u8 | kind << 3 | flags, src]);
        self.0.extend_from_slice(fields);
        self
    }

    /// An Echo Request over IPv6 from the address `src` selects to `dst`'s.
    pub(crate) fn ping6(self, src: u8, dst: u8, len: u16) -> Script {
        let [a, b] = len.to_le_bytes();
        self.icmp6(icmp6::ECHO, 0, src, &[dst, a, b])
    }

    /// A Neighbor Solicitation (`opt` and `mac` as [`Bench::icmp6`] reads them).
    ///
    /// [`Bench::icmp6`]: super::Bench::icmp6
    pub(crate) fn solicit(self, src: u8, target: u8, opt: u8, mac: u8) -> Script {
        self.icmp6(icmp6::SOLICITATION, 0, src, &[target, opt, mac])
    }

    /// A Neighbor Advertisement (`flags` R, S, O in its top bits).
    pub(crate) fn advertise(self, src: u8, target: u8, flags: u8, opt: u8, mac: u8) -> Script {
        self.icmp6(icmp6::ADVERTISEMENT, 0, src, &[target, flags, opt, mac])
    }

    /// An ICMPv6 error from `src` about the engine's latest IPv6 segment: `kind % 4`
    /// Packet Too Big (with MTU `value`), Destination Unreachable, Time Exceeded,
    /// Parameter Problem; `quote` 8-byte units of the segment, its sequence number
    /// moved by `seq_off`.
    pub(crate) fn error6(self, src: u8, kind: u8, value: u16, quote: u8, seq_off: i16) -> Script {
        let [v0, v1] = value.to_le_bytes();
        let [s0, s1] = seq_off.to_le_bytes();
        self.icmp6(icmp6::ERROR, 0, src, &[kind, v0, v1, quote, s0, s1])
    }

    /// An [`Record::Packet6`] with flags `bits` (see [`packet6`](super::v6::packet6)) carrying `upper`
    /// (see [`Bench::packet6`]) through the extension headers `chain`.
    ///
    /// [`Bench::packet6`]: super::Bench::packet6
    pub(crate) fn packet6(
        mut self,
        upper_kind: u8,
        bits: u8,
        (src, dst, hops): (u8, u8, u8),
        chain: &[u8],
        upper: &[u8],
    ) -> Script {
        let tag = Record::Packet6 as u8 | upper_kind << 3 | bits;
        self.0
            .extend_from_slice(&[tag, src, dst, hops, chain.len() as u8]);
        self.0.extend_from_slice(chain);
        self.0.extend_from_slice(upper);
        self
    }

    /// A TCP segment over IPv6 from the address `src` selects to `dst`'s with hop
    /// limit 64, through `chain`, on the tracked connection's ports and numbers:
    /// `flags` as [`Script::tcp6_fields`], `len` 8-byte units of payload.
    pub(crate) fn tcp6(self, (src, dst): (u8, u8), chain: &[u8], flags: u8, len: u8) -> Script {
        let fields = Self::tcp6_fields(flags, 0, 0, 0, len);
        self.packet6(super::v6::packet6::TCP, 0, (src, dst, 64), chain, &fields)
    }

    /// The TCP fields of a [`Record::Packet6`]: flags (bit 0 no ACK, then SYN, FIN,
    /// RST, PSH), ports, sequence and acknowledgment offsets, payload length.
    pub(crate) fn tcp6_fields(
        flags: u8,
        ports: u8,
        seq_off: i16,
        ack_off: i16,
        len: u8,
    ) -> Vec<u8> {
        let mut f = vec![flags, ports];
        f.extend_from_slice(&seq_off.to_le_bytes());
        f.extend_from_slice(&ack_off.to_le_bytes());
        f.push(len);
        f
    }

    pub(crate) fn finish(self) -> Vec<u8> {
        self.0
    }
}
