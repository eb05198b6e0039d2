//! IPv4 (RFC 791) as a host sees it: validate a received datagram and find its transport
//! payload ([`parse`]), write the 20-byte header of an outgoing one ([`write_header`]), and
//! number outgoing datagrams ([`IdentCounter`]).
//!
//! Decisions a reader should know about:
//! - **No reassembly.** Any fragment (MF set or a nonzero offset) is dropped as
//!   [`DropReason::Fragment`]. We send every datagram with DF set and announce an MSS that
//!   fits the link MTU, so a TCP peer has no reason to fragment towards us; RFC 1122
//!   §3.3.2 requires reassembly of a host, and this is a documented deviation.
//! - **Options are skipped, not acted on.** RFC 1122 §3.2.1.8 lets a host ignore options it
//!   does not implement; we implement none and never emit any.
//! - **The only accepted destination is our unicast address.** The limited broadcast,
//!   our subnet's directed broadcast and multicast are [`DropReason::NotOurAddress`]: we
//!   run no UDP and join no group, so no broadcast has anything for us, and answering one
//!   (a ping, a SYN) would make us an amplifier (RFC 1122 §3.2.2.6 lets a host ignore a
//!   broadcast ping; we ignore everything broadcast).
//! - **Martian sources are dropped** ([`Local::check_source`]), so nothing above ever
//!   answers them: the classes RFC 1122 §3.2.1.3 says a host must silently discard, and
//!   our own address (a LAND attack).
//! - The header checksum is verified unless the device already did it.

use std::net::Ipv4Addr;

pub use smoltcp::wire::IpProtocol;

use crate::drop_reason::DropReason;

/// Length of an IPv4 header without options, the only kind we emit.
pub(crate) const HEADER_LEN: usize = 20;

/// Where the transport header starts in an Ethernet frame we build: after the Ethernet
/// header and an IPv4 header without options.
pub(crate) const TRANSPORT_OFFSET: usize = crate::ethernet::HEADER_LEN + HEADER_LEN;

/// Where the source and destination addresses lie in the header, side by side.
pub(crate) const ADDRESSES: std::ops::Range<usize> = 12..20;

/// The TTL we send with: RFC 1700's recommended default, as Linux uses.
pub const DEFAULT_TTL: u8 = 64;

/// The fields of a received IPv4 header that the layers above use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ipv4Header {
    /// Source address.
    pub src: Ipv4Addr,
    /// Destination address.
    pub dst: Ipv4Addr,
    /// The transport protocol of the payload.
    pub protocol: IpProtocol,
    /// Time to live as received.
    pub ttl: u8,
    /// The Identification field.
    pub ident: u16,
    /// Header plus payload, from the header's Total Length field.
    pub total_len: u16,
    /// Header length in bytes (IHL × 4), options included.
    pub header_len: u8,
}

impl Ipv4Header {
    /// Length of the transport payload.
    #[cfg(test)]
    pub(crate) fn payload_len(&self) -> usize {
        usize::from(self.total_len) - usize::from(self.header_len)
    }
}

/// The subnet mask of a prefix length (0: every address is on the link).
pub(crate) const fn netmask(prefix_len: u8) -> u32 {
    match prefix_len {
        0 => 0,
        n if n >= 32 => u32::MAX,
        n => u32::MAX << (32 - n as u32),
    }
}

/// Our address on a link, with what its prefix makes special, precomputed so that the
/// checks on every received datagram are a few compares of integers. Both addresses are
/// kept as their four octets read as a native integer (`u32::from_ne_bytes`), the way
/// they lie in a header: compared without a byte swap.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Local {
    addr: u32,
    /// Our subnet's directed broadcast (host part all ones), or 255.255.255.255 when the
    /// subnet has none: a /31 (RFC 3021 §2.2: both addresses are hosts) or a /32.
    directed_broadcast: u32,
}

impl Local {
    /// Address `addr` on a link whose subnet is `addr/prefix_len`.
    pub const fn new(addr: Ipv4Addr, prefix_len: u8) -> Local {
        let addr = u32::from_be_bytes(addr.octets());
        let directed_broadcast = if prefix_len < 31 {
            addr | !netmask(prefix_len)
        } else {
            u32::MAX
        };
        Local {
            addr: u32::from_ne_bytes(addr.to_be_bytes()),
            directed_broadcast: u32::from_ne_bytes(directed_broadcast.to_be_bytes()),
        }
    }

    /// Whether `octets` are our address.
    #[inline]
    fn is_addr(&self, octets: [u8; 4]) -> bool {
        u32::from_ne_bytes(octets) == self.addr
    }

    /// Drop a martian source, one no datagram we receive may carry:
    /// - 0.0.0.0/8, "this host on this network" (RFC 1122 §3.2.1.3 (a), (b): only ever a
    ///   source during initialisation, which needs a broadcast reply we never give);
    /// - 127.0.0.0/8, loopback (§3.2.1.3 (g): must not appear outside a host);
    /// - 224.0.0.0/4, multicast, and 240.0.0.0/4, reserved class E with the limited
    ///   broadcast 255.255.255.255 (§3.2.1.3 (c), RFC 1812 §5.3.7, RFC 6890): no host
    ///   sends from a group or a reserved address;
    /// - our subnet's directed broadcast (§3.2.1.3 (d): must not be a source);
    /// - our own address ([`DropReason::OwnSourceAddress`]): the LAND attack, a SYN from
    ///   us to us, which a host that answered would answer forever.
    ///
    /// RFC 1122 §3.2.1.3: "A host MUST silently discard an incoming datagram containing
    /// an IP source address that is invalid by the rules of this section."
    ///
    /// On the fast path this is four compares folded into one branch; which reason
    /// applies is worked out only for a datagram that is dropped.
    #[inline]
    pub(crate) fn check_source(&self, src: Ipv4Addr) -> Result<(), DropReason> {
        let octets = src.octets();
        let first = octets[0];
        let src = u32::from_ne_bytes(octets);
        // 0/8 and 224/4 + 240/4 in one unsigned compare: 0 - 1 wraps to 255.
        let martian = (first.wrapping_sub(1) >= 223)
            | (first == 127)
            | (src == self.addr)
            | (src == self.directed_broadcast);
        if martian {
            return Err(self.martian_reason(src));
        }
        Ok(())
    }

    #[cold]
    fn martian_reason(&self, src: u32) -> DropReason {
        if src == self.addr {
            DropReason::OwnSourceAddress
        } else {
            DropReason::MartianSource
        }
    }
}

/// Validate a received IPv4 datagram for the host `local` and return its header and its
/// transport payload.
///
/// The payload is trimmed to the header's Total Length, which drops the padding Ethernet
/// adds to short frames. Pass `checksum_verified` when the device verified the header
/// checksum ([`RxMeta::checksum_verified`](crate::io::RxMeta)).
// Always inlined: every received frame passes here, from one call site in the receive
// loop; out of line, the loop's state is spilled around the call.
#[inline(always)]
pub fn parse(
    packet: &[u8],
    local: Local,
    checksum_verified: bool,
) -> Result<(Ipv4Header, &[u8]), DropReason> {
    let Some(fixed) = packet.first_chunk::<HEADER_LEN>() else {
        return Err(DropReason::Truncated);
    };
    // Version 4 and a header of five words (no options): nearly every datagram, one
    // compare. Any other first byte is looked at apart.
    let header_len = match fixed[0] {
        0x45 => HEADER_LEN as u8,
        other => header_len(other)?,
    };
    let total_len = u16::from_be_bytes([fixed[2], fixed[3]]);
    if total_len < u16::from(header_len) || usize::from(total_len) > packet.len() {
        return Err(DropReason::BadIpLength);
    }
    let header = &packet[..usize::from(header_len)];
    let header_ok = || match <&[u8; HEADER_LEN]>::try_from(header) {
        Ok(fixed) => crate::checksum::verify_20(fixed),
        Err(_) => crate::checksum::verify(header),
    };
    if !checksum_verified && !header_ok() {
        return Err(DropReason::BadIpChecksum);
    }
    // Whole arrays, read as words, rather than assembled byte by byte.
    let src: [u8; 4] = fixed[12..16].try_into().expect("four bytes");
    let dst: [u8; 4] = fixed[16..20].try_into().expect("four bytes");
    local.check_source(Ipv4Addr::from(src))?;
    if !local.is_addr(dst) {
        return Err(DropReason::NotOurAddress);
    }
    // RFC 791 §3.2: a datagram is a fragment when More Fragments is set or its offset is
    // nonzero (the last fragment has MF clear).
    if u16::from_be_bytes([fixed[6], fixed[7]]) & 0x3fff != 0 {
        return Err(DropReason::Fragment);
    }
    let header = Ipv4Header {
        src: Ipv4Addr::from(src),
        dst: Ipv4Addr::from(dst),
        protocol: IpProtocol::from(fixed[9]),
        ttl: fixed[8],
        ident: u16::from_be_bytes([fixed[4], fixed[5]]),
        total_len,
        header_len,
    };
    Ok((
        header,
        &packet[usize::from(header_len)..usize::from(total_len)],
    ))
}

/// The header length a first byte other than 0x45 gives: options, or not version 4.
#[cold]
fn header_len(first: u8) -> Result<u8, DropReason> {
    if first >> 4 != 4 {
        return Err(DropReason::BadIpHeader);
    }
    let header_len = (first & 0x0f) * 4;
    if usize::from(header_len) < HEADER_LEN {
        return Err(DropReason::BadIpHeader);
    }
    Ok(header_len)
}

/// Write a 20-byte IPv4 header (no options) at the start of `buf` for a datagram carrying
/// `payload_len` bytes of `protocol`.
///
/// With `fill_checksum` false the checksum field is left zero for the device to fill
/// (transmit checksum offload). A total length above 65535 (only possible for a TSO
/// super-frame, which the device re-numbers per segment) is written as 0, as Linux does
/// for GSO packets.
///
/// # Panics
/// If `buf` is shorter than [`HEADER_LEN`]: the caller sizes its transmit buffers, so a
/// short one is a bug in the stack, not bad input.
#[allow(clippy::too_many_arguments)]
#[inline]
pub(crate) fn write_header(
    buf: &mut [u8],
    src: Ipv4Addr,
    dst: Ipv4Addr,
    protocol: IpProtocol,
    payload_len: usize,
    ttl: u8,
    ident: u16,
    dont_frag: bool,
    fill_checksum: bool,
) {
    let total_len = payload_len
        .checked_add(HEADER_LEN)
        .and_then(|n| u16::try_from(n).ok())
        .unwrap_or(0);
    let t = total_len.to_be_bytes();
    let i = ident.to_be_bytes();
    let (a, b) = (src.octets(), dst.octets());
    let header: [u8; HEADER_LEN] = [
        0x45,
        0,
        t[0],
        t[1],
        i[0],
        i[1],
        if dont_frag { 0x40 } else { 0 },
        0,
        ttl,
        protocol.into(),
        0,
        0,
        a[0],
        a[1],
        a[2],
        a[3],
        b[0],
        b[1],
        b[2],
        b[3],
    ];
    let out: &mut [u8; HEADER_LEN] = (&mut buf[..HEADER_LEN]).try_into().expect("20 bytes");
    *out = header;
    if fill_checksum {
        let c = crate::checksum::checksum_20(out);
        out[10..12].copy_from_slice(&c);
    }
}

/// The Identification field source of one worker (RFC 791 §3.2, RFC 6864).
///
/// RFC 6864 §4.1 only requires uniqueness for datagrams that may be fragmented; ours all
/// carry DF, so a plain wrapping counter per worker is enough. Starting at a random value
/// keeps restarts and sibling workers from emitting the same sequence.
#[derive(Debug, Clone)]
pub(crate) struct IdentCounter {
    next: u16,
}

impl IdentCounter {
    /// A counter whose first value is `start`.
    pub(crate) fn new(start: u16) -> IdentCounter {
        IdentCounter { next: start }
    }

    /// A counter starting at a random value (zero if the OS has no randomness to give).
    #[cfg(test)]
    pub(crate) fn random() -> IdentCounter {
        let mut b = [0u8; 2];
        let start = match getrandom::fill(&mut b) {
            Ok(()) => u16::from_ne_bytes(b),
            Err(_) => 0,
        };
        IdentCounter::new(start)
    }

    /// The identification for the next datagram.
    #[allow(clippy::should_implement_trait)]
    pub(crate) fn next(&mut self) -> u16 {
        let id = self.next;
        self.next = self.next.wrapping_add(1);
        id
    }
}

#[cfg(test)]
mod tests;
