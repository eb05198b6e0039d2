//! TCP segments as the state machine sees them: [`Segment`] is a parsed incoming segment
//! (header fields and options, the payload stays in the frame), [`TxSegment`] is what the
//! state machine asks the engine to send (header fields plus a byte range of the send
//! buffer).
//!
//! Parsing and emitting are written out by hand, every read bounds-checked, so hostile
//! headers become errors, never panics (the fuzz target `tcp_segment` and the proptests
//! in `segment/tests.rs` hold it to that). The common header of an established connection, timestamps
//! and nothing else, takes a fast path on both sides, and so does, when parsed, a SYN
//! laid out as we or Linux send it (all four SYN options in 20 bytes): the option walk
//! and the option writer are for other SYNs and SACK blocks.
//!
//! What counts as malformed is what smoltcp's `TcpRepr::parse` rejects: a header
//! shorter than 20 bytes or than its data offset, port zero, more
//! than one of SYN, FIN and RST, an option whose length runs past the header or is
//! below 2, and MSS, window-scale or SACK-permitted options of the wrong length (an
//! odd-sized SACK option too). Unknown options and timestamps of the wrong length are
//! skipped; a window-scale shift above 14 reads as 14 (RFC 7323 §2.3); a fourth SACK
//! block is not kept.

use std::net::IpAddr;

use super::seq::SeqNum;
use crate::checksum;
use crate::ipv4::IpProtocol;

/// Where the checksum sits in a TCP header (RFC 9293 §3.1).
pub const CHECKSUM_OFFSET: usize = 16;

/// A TCP header without options (RFC 9293 §3.1: data offset 5).
pub(crate) const MIN_HEADER_LEN: usize = 20;

/// The largest TCP header, options included (data offset 15).
pub const MAX_HEADER_LEN: usize = 60;

/// The sum of the pseudo-header of a TCP segment of `len` bytes (header and payload)
/// from `src` to `dst`, which its checksum covers (RFC 9293 §3.1 for IPv4, RFC 8200
/// §8.1 for IPv6).
#[inline]
#[cfg_attr(not(any(test, feature = "internals")), allow(dead_code))]
pub fn pseudo_header_sum(src: impl Into<IpAddr>, dst: impl Into<IpAddr>, len: u16) -> u32 {
    let tcp = IpProtocol::Tcp.into();
    let (src, dst) = (src.into(), dst.into());
    match (src, dst) {
        (IpAddr::V4(s), IpAddr::V4(d)) => {
            checksum::pseudo_header_v4(s.octets(), d.octets(), tcp, len)
        }
        _ => {
            let v6 = |a| crate::ipv6::as_v6(a).octets();
            checksum::pseudo_header_v6(v6(src), v6(dst), tcp, u32::from(len))
        }
    }
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

    /// Parse the TCP part of an IPv4 or IPv6 packet from `src` to `dst`.
    /// `checksum_verified` says the device has already checked it.
    #[cfg_attr(not(any(test, feature = "internals")), allow(dead_code))]
    pub fn parse(
        tcp: &[u8],
        src: impl Into<IpAddr>,
        dst: impl Into<IpAddr>,
        checksum_verified: bool,
    ) -> Result<(Segment, &[u8]), ParseError> {
        let mut seg = Segment::default();
        let (src, dst) = (src.into(), dst.into());
        let pseudo = |len| checksum::Wide::pseudo_tcp(src, dst, len);
        let payload = Segment::parse_into(tcp, pseudo, checksum_verified, &mut seg)?;
        Ok((seg, payload))
    }

    /// [`Segment::parse`] into `seg`, which must hold [`Segment::default`]: the
    /// receive path parses into its own segment rather than moving a returned one (a
    /// segment is too large for registers, so a move is a copy on every segment), and
    /// only the fields the header sets are written (the caller's zeroed segment has the
    /// rest).
    // Always inline: one caller, per frame; the segment it fills stays in registers.
    #[inline(always)]
    pub(crate) fn parse_into<'a>(
        tcp: &'a [u8],
        pseudo: impl FnOnce(u16) -> checksum::Wide,
        checksum_verified: bool,
        seg: &mut Segment,
    ) -> Result<&'a [u8], ParseError> {
        let Some(fixed) = tcp.first_chunk::<MIN_HEADER_LEN>() else {
            return Err(ParseError::Malformed);
        };
        let header_len = usize::from(fixed[12] >> 4) * 4;
        if header_len < MIN_HEADER_LEN || header_len > tcp.len() {
            return Err(ParseError::Malformed);
        }
        if !checksum_verified {
            let len = u16::try_from(tcp.len()).map_err(|_| ParseError::Malformed)?;
            // Pseudo-header and segment summed together, folded once.
            let pseudo = pseudo(len);
            if !pseudo.add_bytes(tcp).verifies() {
                return Err(ParseError::Checksum);
            }
        }
        let src_port = u16::from_be_bytes([fixed[0], fixed[1]]);
        let dst_port = u16::from_be_bytes([fixed[2], fixed[3]]);
        // The five control bits as `Flags` and whether their mix is possible, looked up
        // rather than tested bit by bit.
        let FlagEntry(flags, possible) = FLAG_TABLE[usize::from(fixed[13] & 0x1f)];
        if src_port == 0 || dst_port == 0 || !possible {
            return Err(ParseError::Malformed);
        }
        debug_assert_eq!(
            *seg,
            Segment::default(),
            "parse_into needs a default segment"
        );
        seg.src_port = src_port;
        seg.dst_port = dst_port;
        seg.seq = SeqNum(be32(fixed, 4));
        if flags.ack {
            seg.ack = SeqNum(be32(fixed, 8));
        }
        seg.flags = flags;
        seg.window = u16::from_be_bytes([fixed[14], fixed[15]]);
        seg.payload_len = tcp.len() - header_len;
        let options = &tcp[MIN_HEADER_LEN..header_len];
        // The timestamp alone, as Linux (NOP NOP TS) and we (TS EOL EOL) send it.
        let timestamp = match options.first_chunk::<TS_BLOCK_LEN>() {
            Some(o) if options.len() == TS_BLOCK_LEN => timestamp_block_at(o).map(|at| (o, at)),
            _ => None,
        };
        match timestamp {
            Some((o, at)) => seg.timestamp = Some((be32(o, at), be32(o, at + 4))),
            None => parse_other_options(options, seg)?,
        }
        Ok(&tcp[header_len..])
    }
}

/// The options of any segment but one carrying the timestamp alone: a SYN's in a
/// common layout, else walked one by one. Out of line, so that the receive path, which
/// inlines [`Segment::parse_into`], carries only the timestamp case.
#[inline(never)]
fn parse_other_options(options: &[u8], seg: &mut Segment) -> Result<(), ParseError> {
    if parse_syn_options(options, seg) {
        return Ok(());
    }
    parse_options(options, seg)
}

/// The big-endian `u32` at `at` in `b`.
#[inline]
fn be32(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

/// [`Flags`] for one value of the low five control bits, and whether the value is
/// possible. Eight bytes, so that an entry is found by a scaled index.
#[derive(Clone, Copy)]
#[repr(C, align(8))]
struct FlagEntry(Flags, bool);

/// [`Flags`] for each value of the low five control bits (FIN, SYN, RST, PSH, ACK), and
/// whether the value is possible: at most one of SYN, FIN and RST.
const FLAG_TABLE: [FlagEntry; 32] = {
    let mut table = [FlagEntry(
        Flags {
            syn: false,
            ack: false,
            fin: false,
            rst: false,
            psh: false,
        },
        true,
    ); 32];
    let mut bits = 0;
    while bits < 32 {
        let b = bits as u8;
        let flags = Flags {
            fin: b & FIN != 0,
            syn: b & SYN != 0,
            rst: b & RST != 0,
            psh: b & PSH != 0,
            ack: b & ACK != 0,
        };
        let exclusive = flags.syn as u8 + flags.fin as u8 + flags.rst as u8;
        table[bits] = FlagEntry(flags, exclusive <= 1);
        bits += 1;
    }
    table
};

const FIN: u8 = 0x01;
const SYN: u8 = 0x02;
const RST: u8 = 0x04;
pub(crate) const PSH: u8 = 0x08;
pub(crate) const ACK: u8 = 0x10;

const OPT_EOL: u8 = 0;
const OPT_NOP: u8 = 1;
const OPT_MSS: u8 = 2;
const OPT_WS: u8 = 3;
const OPT_SACK_PERMITTED: u8 = 4;
const OPT_SACK: u8 = 5;
const OPT_TIMESTAMP: u8 = 8;
/// A timestamp option with its two bytes of padding.
pub(crate) const TS_BLOCK_LEN: usize = 12;

/// Where TSval starts in twelve option bytes that are exactly one timestamp option:
/// NOP NOP TS (RFC 7323 appendix A's layout, Linux's) or TS EOL EOL (ours); `None` for
/// any other bytes. Each layout is tested as whole words, not byte by byte.
#[inline]
fn timestamp_block_at(o: &[u8; TS_BLOCK_LEN]) -> Option<usize> {
    let word = |a: u8, b: u8| u16::from_ne_bytes([a, b]);
    let head = u32::from_ne_bytes([o[0], o[1], o[2], o[3]]);
    if head == u32::from_ne_bytes([OPT_NOP, OPT_NOP, OPT_TIMESTAMP, 10]) {
        Some(4)
    } else if word(o[0], o[1]) == word(OPT_TIMESTAMP, 10)
        && word(o[10], o[11]) == word(OPT_EOL, OPT_EOL)
    {
        Some(2)
    } else {
        None
    }
}

/// Option bytes of a SYN carrying all four SYN options in 20 bytes.
const SYN_OPTIONS_LEN: usize = 20;

/// A pattern over [`SYN_OPTIONS_LEN`] option bytes: the (offset, byte) pairs of `fixed`
/// must match, the other bytes are the option values. As (mask, value) of the first 16
/// bytes and of the last 4, read little-endian, so a match is two masked comparisons.
const fn syn_pattern(fixed: &[(usize, u8)]) -> (u128, u128, u32, u32) {
    let mut bytes = [None; SYN_OPTIONS_LEN];
    let mut i = 0;
    while i < fixed.len() {
        bytes[fixed[i].0] = Some(fixed[i].1);
        i += 1;
    }
    let (mut mask, mut value, mut tail_mask, mut tail_value) = (0u128, 0u128, 0u32, 0u32);
    let mut i = 0;
    while i < SYN_OPTIONS_LEN {
        if let Some(b) = bytes[i] {
            if i < 16 {
                mask |= 0xff << (8 * i);
                value |= (b as u128) << (8 * i);
            } else {
                tail_mask |= 0xff << (8 * (i - 16));
                tail_value |= (b as u32) << (8 * (i - 16));
            }
        }
        i += 1;
    }
    (mask, value, tail_mask, tail_value)
}

/// Our SYN's options: MSS, window scale, SACK-permitted, timestamps, one EOL (the order
/// of [`TxSegment::write_options`]). Values at 2..4 (MSS), 6 (shift), 11..19 (TS).
const SYN_OURS: (u128, u128, u32, u32) = syn_pattern(&[
    (0, OPT_MSS),
    (1, 4),
    (4, OPT_WS),
    (5, 3),
    (7, OPT_SACK_PERMITTED),
    (8, 2),
    (9, OPT_TIMESTAMP),
    (10, 10),
    (19, OPT_EOL),
]);

/// Linux's SYN options: MSS, SACK-permitted, timestamps, NOP, window scale. Values at
/// 2..4 (MSS), 8..16 (TS), 19 (shift).
const SYN_LINUX: (u128, u128, u32, u32) = syn_pattern(&[
    (0, OPT_MSS),
    (1, 4),
    (4, OPT_SACK_PERMITTED),
    (5, 2),
    (6, OPT_TIMESTAMP),
    (7, 10),
    (16, OPT_NOP),
    (17, OPT_WS),
    (18, 3),
]);

/// The options of a SYN in one of the two common layouts (ours and Linux's, each with
/// all four SYN options) read at fixed offsets: what [`parse_options`] would make of
/// them, without the walk. False, with `seg` untouched, for any other layout.
#[inline]
fn parse_syn_options(options: &[u8], seg: &mut Segment) -> bool {
    let Ok(o) = <&[u8; SYN_OPTIONS_LEN]>::try_from(options) else {
        return false;
    };
    let head = u128::from_le_bytes(o[..16].try_into().expect("16 bytes"));
    let tail = u32::from_le_bytes([o[16], o[17], o[18], o[19]]);
    let matches = |p: (u128, u128, u32, u32)| head & p.0 == p.1 && tail & p.2 == p.3;
    let (shift, ts) = if matches(SYN_OURS) {
        (o[6], 11)
    } else if matches(SYN_LINUX) {
        (o[19], 8)
    } else {
        return false;
    };
    seg.mss = Some(u16::from_be_bytes([o[2], o[3]]));
    seg.wscale = Some(shift.min(14));
    seg.sack_permitted = true;
    seg.timestamp = Some((be32(o, ts), be32(o, ts + 4)));
    true
}

/// Walk the options (RFC 9293 §3.2) into `seg`. Cold: the timestamp block and the SYN
/// layouts of [`parse_syn_options`] are read without it.
#[cold]
fn parse_options(mut options: &[u8], seg: &mut Segment) -> Result<(), ParseError> {
    while let Some(&kind) = options.first() {
        let len = match kind {
            OPT_EOL => break,
            OPT_NOP => 1,
            _ => usize::from(*options.get(1).ok_or(ParseError::Malformed)?),
        };
        if kind != OPT_NOP {
            let data = options.get(2..len).ok_or(ParseError::Malformed)?;
            match (kind, data.len()) {
                (OPT_MSS, 2) => seg.mss = Some(u16::from_be_bytes([data[0], data[1]])),
                (OPT_WS, 1) => seg.wscale = Some(data[0].min(14)),
                (OPT_SACK_PERMITTED, 0) => seg.sack_permitted = true,
                (OPT_MSS | OPT_WS | OPT_SACK_PERMITTED, _) => return Err(ParseError::Malformed),
                (OPT_SACK, n) => {
                    if n < 8 || n % 8 != 0 {
                        return Err(ParseError::Malformed);
                    }
                    seg.sack = [None; 3];
                    for (slot, block) in seg.sack.iter_mut().zip(data.chunks_exact(8)) {
                        *slot = Some((be32(block, 0), be32(block, 4)));
                    }
                }
                (OPT_TIMESTAMP, 8) => seg.timestamp = Some((be32(data, 0), be32(data, 4))),
                _ => {}
            }
        }
        options = &options[len..];
    }
    Ok(())
}

/// The fixed 20 bytes of a TCP header `hl` bytes long, with the control `bits`, a zero
/// checksum and no urgent pointer.
#[inline]
pub(crate) fn write_fixed_header(
    fixed: &mut [u8; MIN_HEADER_LEN],
    [src_port, dst_port]: [u16; 2],
    seq: u32,
    ack: u32,
    hl: usize,
    bits: u8,
    window: u16,
) {
    fixed[0..2].copy_from_slice(&src_port.to_be_bytes());
    fixed[2..4].copy_from_slice(&dst_port.to_be_bytes());
    fixed[4..8].copy_from_slice(&seq.to_be_bytes());
    fixed[8..12].copy_from_slice(&ack.to_be_bytes());
    fixed[12] = ((hl / 4) as u8) << 4;
    fixed[13] = bits;
    fixed[14..16].copy_from_slice(&window.to_be_bytes());
    fixed[16..20].fill(0);
}

/// The twelve option bytes of a header whose only option is the timestamps: the option,
/// then EOL padding.
#[inline]
pub(crate) fn write_timestamp_block(o: &mut [u8; TS_BLOCK_LEN], tsval: u32, tsecr: u32) {
    o[0] = OPT_TIMESTAMP;
    o[1] = 10;
    o[2..6].copy_from_slice(&tsval.to_be_bytes());
    o[6..10].copy_from_slice(&tsecr.to_be_bytes());
    o[10] = OPT_EOL;
    o[11] = OPT_EOL;
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
    /// Whether SACK blocks go out: only on an ACK that is not a SYN offering SACK
    /// (the blocks and SACK-permitted are never sent together).
    #[inline]
    fn sends_sack(&self) -> bool {
        !self.sack_permitted && self.ack.is_some() && self.sack != [None; 3]
    }

    /// Length of the TCP header (options included) this segment needs.
    #[inline]
    pub fn header_len(&self) -> usize {
        if self.mss.is_none()
            && self.wscale.is_none()
            && !self.sack_permitted
            && self.sack == [None; 3]
        {
            return MIN_HEADER_LEN
                + if self.timestamp.is_some() {
                    TS_BLOCK_LEN
                } else {
                    0
                };
        }
        let mut len = MIN_HEADER_LEN
            + 4 * usize::from(self.mss.is_some())
            + 3 * usize::from(self.wscale.is_some())
            + 2 * usize::from(self.sack_permitted)
            + 10 * usize::from(self.timestamp.is_some());
        let blocks = self.sack.iter().flatten().count();
        if blocks > 0 {
            len += 2 + 8 * blocks;
        }
        len.next_multiple_of(4)
    }

    /// Write the TCP header into `buf` (exactly `header_len()` bytes) with a zero
    /// checksum; the caller appends the payload and fills the checksum.
    ///
    /// Options go in the order MSS, window scale, SACK-permitted or SACK blocks,
    /// timestamps, packed without NOPs and padded with EOL to a multiple of four.
    #[inline]
    pub fn write_header(&self, buf: &mut [u8], src_port: u16, dst_port: u16) {
        let (fixed, options) = buf.split_at_mut(MIN_HEADER_LEN);
        let fixed: &mut [u8; MIN_HEADER_LEN] = fixed.try_into().expect("20-byte TCP header");
        // One control bit among SYN, FIN and RST (in that order of precedence), PSH
        // with data or a FIN, ACK whenever there is an acknowledgment number.
        let mut bits = if self.syn {
            SYN
        } else if self.fin {
            FIN | if self.psh { PSH } else { 0 }
        } else if self.rst {
            RST
        } else if self.psh {
            PSH
        } else {
            0
        };
        if self.ack.is_some() {
            bits |= ACK;
        }
        let hl = MIN_HEADER_LEN + options.len();
        let ack = self.ack.map_or(0, |a| a.0);
        write_fixed_header(
            fixed,
            [src_port, dst_port],
            self.seq.0,
            ack,
            hl,
            bits,
            self.window,
        );
        // Twelve option bytes with a timestamp hold nothing else, but for
        // SACK-permitted (2 + 10).
        let only_timestamp = options.len() == TS_BLOCK_LEN && !self.sack_permitted;
        if let (Some((tsval, tsecr)), Some(o)) =
            (self.timestamp, options.first_chunk_mut::<TS_BLOCK_LEN>())
        {
            if only_timestamp {
                write_timestamp_block(o, tsval, tsecr);
                return;
            }
        }
        self.write_options(options);
    }

    /// The general option writer (SYNs, SACK blocks).
    fn write_options(&self, options: &mut [u8]) {
        let mut at = 0;
        let mut put = |bytes: &[u8]| {
            options[at..at + bytes.len()].copy_from_slice(bytes);
            at += bytes.len();
        };
        if let Some(mss) = self.mss {
            let m = mss.to_be_bytes();
            put(&[OPT_MSS, 4, m[0], m[1]]);
        }
        if let Some(shift) = self.wscale {
            put(&[OPT_WS, 3, shift]);
        }
        if self.sack_permitted {
            put(&[OPT_SACK_PERMITTED, 2]);
        } else if self.sends_sack() {
            let blocks = self.sack.iter().flatten().count();
            put(&[OPT_SACK, (2 + 8 * blocks) as u8]);
            for &(left, right) in self.sack.iter().flatten() {
                put(&left.to_be_bytes());
                put(&right.to_be_bytes());
            }
        }
        if let Some((tsval, tsecr)) = self.timestamp {
            put(&[OPT_TIMESTAMP, 10]);
            put(&tsval.to_be_bytes());
            put(&tsecr.to_be_bytes());
        }
        // Padding to a multiple of four: at most three bytes, stored one by one (a fill
        // here is a call to memset).
        match &mut options[at..] {
            [] => {}
            [a] => *a = OPT_EOL,
            [a, b] => (*a, *b) = (OPT_EOL, OPT_EOL),
            [a, b, c] => (*a, *b, *c) = (OPT_EOL, OPT_EOL, OPT_EOL),
            rest => rest.fill(OPT_EOL),
        }
    }
}

#[cfg(test)]
mod tests;
