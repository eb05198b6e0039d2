//! IPv6 (RFC 8200) as a host sees it: validate a received packet and walk its
//! extension headers to the upper-layer header ([`parse`]).
//!
//! Decisions a reader should know about:
//! - **The walk is bounded.** At most [`MAX_EXTENSION_HEADERS`] extension headers, each
//!   inside the payload the fixed header announces; a longer chain, or one that runs
//!   past the packet, is refused. A packet cannot make the walk loop: every step moves
//!   forward by at least eight bytes. A Hop-by-Hop Options header anywhere but first
//!   (RFC 8200 §4.1) is refused as an unrecognized Next Header would be (RFC 8200 §4).
//! - **Routing headers.** One with Segments Left of zero is skipped, whatever its type,
//!   Type 0 included (RFC 8200 §4.4, RFC 5095 §3): the packet has arrived. With segments
//!   left, a host is asked to forward the packet, which it does not do: refused, with
//!   where its Routing Type is, for the Parameter Problem RFC 8200 §4.4 asks for.
//! - **No reassembly,** as for IPv4: a fragment is refused ([`Ipv6Error::Fragment`]).
//!   An atomic fragment (offset 0, no more fragments: RFC 6946) is the whole packet
//!   and is processed as if it had no Fragment header.
//! - **Options.** Pad1 and PadN are skipped; an unknown option is skipped or refused as
//!   the two high bits of its type say (RFC 8200 §4.2). Refusing is silent here: the
//!   ICMPv6 Parameter Problem the RFC asks for is the caller's to send, rate-limited.
//!   As Linux does, a header is refused whose padding runs longer than the seven bytes
//!   that align an option, or pads with anything but zeros (RFC 4942 §2.1.9.5), or
//!   that holds more than [`MAX_OPTIONS`] options besides padding.
//! - **No jumbograms** (a Payload Length of zero with a Jumbo Payload option, RFC
//!   2675): no link Rusty runs on carries one.
//! - Trailing bytes after the payload (Ethernet padding) are ignored, as for IPv4.
//! - **Martian sources** ([`check_source`]) are the addresses no peer on a link sends
//!   from, as for IPv4: unspecified, loopback, multicast, IPv4-mapped, reserved,
//!   Teredo, and our own.

use std::net::Ipv6Addr;

/// Length of the fixed IPv6 header.
pub const HEADER_LEN: usize = 40;

/// Where the source and destination addresses lie in the fixed header, side by side.
pub(crate) const ADDRESSES: std::ops::Range<usize> = 8..40;

/// The Hop Limit of the packets we send but Neighbor Discovery's (Linux's default).
pub(crate) const DEFAULT_HOP_LIMIT: u8 = 64;

/// `addr` as an IPv6 address: an IPv4 one mapped (`::ffff:a.b.c.d`).
pub(crate) fn as_v6(addr: std::net::IpAddr) -> Ipv6Addr {
    match addr {
        std::net::IpAddr::V4(a) => a.to_ipv6_mapped(),
        std::net::IpAddr::V6(a) => a,
    }
}

/// The most extension headers [`parse`] walks before it gives up on a packet.
pub const MAX_EXTENSION_HEADERS: usize = 8;

/// The most options besides padding one Hop-by-Hop or Destination Options header may
/// hold (Linux's `max_hbh_opts_number` and `max_dst_opts_number`).
pub const MAX_OPTIONS: usize = 8;

/// The longest run of padding (Pad1 and PadN together) an options header may hold:
/// all it takes to align the next option to eight bytes (RFC 4942 §2.1.9.5).
const MAX_PADDING: usize = 7;

/// The padding options (RFC 8200 §4.2).
const PAD1: u8 = 0;
const PADN: u8 = 1;

/// Next Header values of the extension headers (IANA "IPv6 Extension Header Types").
mod next {
    pub(super) const HOP_BY_HOP: u8 = 0;
    pub(super) const ROUTING: u8 = 43;
    pub(super) const FRAGMENT: u8 = 44;
    pub(super) const ESP: u8 = 50;
    pub(super) const AUTH: u8 = 51;
    pub(super) const NO_NEXT: u8 = 59;
    pub(super) const DEST_OPTIONS: u8 = 60;
    pub(super) const MOBILITY: u8 = 135;
    pub(super) const HIP: u8 = 139;
    pub(super) const SHIM6: u8 = 140;
}

/// Why [`parse`] refused a packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ipv6Error {
    /// Shorter than the fixed header, or than the payload it announces.
    Truncated,
    /// Not version 6.
    Version,
    /// A Payload Length of zero (a jumbogram, or nothing at all).
    Jumbogram,
    /// The extension headers run past the payload, or are more than
    /// [`MAX_EXTENSION_HEADERS`].
    ExtensionChain,
    /// A Hop-by-Hop Options header anywhere but first (RFC 8200 §4.1).
    MisplacedHopByHop {
        /// Where the Next Header byte that names it is, from the start of the fixed
        /// header: what a Parameter Problem points at (RFC 8200 §4).
        at: usize,
    },
    /// An options header whose padding runs longer than seven bytes or is not zeros,
    /// or that holds more than [`MAX_OPTIONS`] options besides padding.
    Options,
    /// An option whose type says to discard the packet when it is not understood.
    UnknownOption {
        /// Where its Option Type is, from the start of the fixed header.
        at: usize,
        /// Its type also asks for a Parameter Problem (its high bits 10 or 11, RFC
        /// 8200 §4.2).
        report: bool,
    },
    /// A Routing header with segments left (RFC 8200 §4.4: a host forwards nothing).
    Routing {
        /// Where its Routing Type is, from the start of the fixed header: what the
        /// Parameter Problem points at.
        at: usize,
    },
    /// A fragment of a larger packet.
    Fragment,
    /// No upper-layer header follows (Next Header 59), or one this host cannot read
    /// past (ESP, Mobility, HIP, Shim6).
    NoUpperLayer,
}

/// A received IPv6 packet as [`parse`] checked it: its fixed header, read through
/// accessors, and where its upper layer is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ipv6Header<'a> {
    /// The fixed header, as received.
    fixed: &'a [u8; HEADER_LEN],
    /// The upper-layer protocol, after every extension header.
    pub protocol: u8,
    /// Where the upper-layer header starts, from the start of the fixed header.
    pub upper_offset: usize,
    /// Where the byte that names the upper-layer protocol is (the fixed header's Next
    /// Header, or the last extension header's): what a Parameter Problem points at.
    pub protocol_at: usize,
    /// The upper-layer header and payload.
    pub upper: &'a [u8],
}

impl<'a> Ipv6Header<'a> {
    /// Source address.
    #[inline]
    pub fn src(&self) -> Ipv6Addr {
        address(self.fixed, 8)
    }

    /// Destination address.
    #[inline]
    pub fn dst(&self) -> Ipv6Addr {
        address(self.fixed, 24)
    }

    /// Hop Limit as received.
    #[inline]
    pub fn hop_limit(&self) -> u8 {
        self.fixed[7]
    }
}

/// Validate `packet` (from the fixed header on) and find its upper-layer header.
// Inlined: once per IPv6 packet, from one call site; a packet with no extension header
// (every TCP segment Linux or Rusty sends) takes no loop (see `walk_extensions`).
#[inline]
pub fn parse(packet: &[u8]) -> Result<Ipv6Header<'_>, Ipv6Error> {
    let fixed: &[u8; HEADER_LEN] = packet
        .first_chunk::<HEADER_LEN>()
        .ok_or(Ipv6Error::Truncated)?;
    if fixed[0] >> 4 != 6 {
        return Err(Ipv6Error::Version);
    }
    let payload_len = usize::from(u16::from_be_bytes([fixed[4], fixed[5]]));
    if payload_len == 0 {
        return Err(Ipv6Error::Jumbogram);
    }
    let end = HEADER_LEN + payload_len;
    if packet.len() < end {
        return Err(Ipv6Error::Truncated);
    }
    let (protocol, at, protocol_at) = match Extension::of(fixed[6]) {
        None => (fixed[6], HEADER_LEN, 6),
        Some(_) => walk_extensions(packet, fixed[6], end)?,
    };
    if matches!(
        protocol,
        next::NO_NEXT | next::ESP | next::MOBILITY | next::HIP | next::SHIM6
    ) {
        return Err(Ipv6Error::NoUpperLayer);
    }
    // The walk ends inside the payload: `at` is at most `end`.
    let upper = packet.get(at..end).ok_or(Ipv6Error::ExtensionChain)?;
    Ok(Ipv6Header {
        fixed,
        protocol,
        upper_offset: at,
        protocol_at,
        upper,
    })
}

/// The 16-byte address at `from` in the fixed header `fixed`.
fn address(fixed: &[u8; HEADER_LEN], from: usize) -> Ipv6Addr {
    let octets: [u8; 16] = fixed[from..from + 16].try_into().expect("16 bytes");
    Ipv6Addr::from(octets)
}

/// The source and destination of a packet [`parse`] refused for what follows its
/// fixed header, and the packet up to the end of the payload that header announces:
/// what an ICMPv6 error about it needs. `None` when the fixed header itself was bad.
pub(crate) fn refused(packet: &[u8]) -> Option<(Ipv6Addr, Ipv6Addr, &[u8])> {
    let fixed = packet.first_chunk::<HEADER_LEN>()?;
    let end = HEADER_LEN + usize::from(u16::from_be_bytes([fixed[4], fixed[5]]));
    Some((address(fixed, 8), address(fixed, 24), packet.get(..end)?))
}

/// The extension headers of `packet`, the first of them `first`, its payload ending at
/// `end`: the upper-layer protocol after them, where it starts, and where the byte that
/// names it is.
#[inline(never)]
fn walk_extensions(packet: &[u8], first: u8, end: usize) -> Result<(u8, usize, usize), Ipv6Error> {
    let mut protocol = first;
    let mut at = HEADER_LEN;
    let mut protocol_at = 6;
    let mut walked = 0;
    while let Some(kind) = Extension::of(protocol) {
        if kind == Extension::HopByHop && walked > 0 {
            return Err(Ipv6Error::MisplacedHopByHop { at: protocol_at });
        }
        if walked == MAX_EXTENSION_HEADERS {
            return Err(Ipv6Error::ExtensionChain);
        }
        walked += 1;
        let header = packet
            .get(at..end)
            .filter(|h| h.len() >= 8)
            .ok_or(Ipv6Error::ExtensionChain)?;
        let len = kind.length(header);
        let header = header.get(..len).ok_or(Ipv6Error::ExtensionChain)?;
        match kind {
            Extension::HopByHop | Extension::DestOptions => check_options(&header[2..], at + 2)?,
            Extension::Routing => {
                // Segments Left; a host recognizes no Routing Type (RFC 8200 §4.4).
                if header[3] != 0 {
                    return Err(Ipv6Error::Routing { at: at + 2 });
                }
            }
            Extension::Fragment => {
                let offset_and_more = u16::from_be_bytes([header[2], header[3]]);
                if offset_and_more & 0xfff9 != 0 {
                    return Err(Ipv6Error::Fragment);
                }
            }
            Extension::Auth => {}
        }
        protocol = header[0];
        protocol_at = at;
        at += len;
    }
    Ok((protocol, at, protocol_at))
}

/// The fixed header of a packet from `src` to `dst` whose payload (extension headers
/// and upper layer) is `payload_len` bytes, the first of them `next_header`; traffic
/// class and flow label zero. `None` when the payload does not fit the 16-bit Payload
/// Length (a host of ours sends no jumbograms).
pub fn header(
    src: Ipv6Addr,
    dst: Ipv6Addr,
    next_header: u8,
    payload_len: usize,
    hop_limit: u8,
) -> Option<[u8; HEADER_LEN]> {
    let len = u16::try_from(payload_len).ok().filter(|&n| n > 0)?;
    let mut h = [0u8; HEADER_LEN];
    write_header(&mut h, &src, &dst, next_header, len, hop_limit);
    Some(h)
}

/// [`header`] written in place, with a Payload Length of `len` (0 for a TSO super-frame
/// above 64 KiB, whose length the device rewrites in each segment it cuts, as Linux
/// writes it).
#[inline]
pub(crate) fn write_header(
    h: &mut [u8; HEADER_LEN],
    src: &Ipv6Addr,
    dst: &Ipv6Addr,
    next_header: u8,
    len: u16,
    hop_limit: u8,
) {
    h[..4].copy_from_slice(&[0x60, 0, 0, 0]);
    h[4..6].copy_from_slice(&len.to_be_bytes());
    h[6] = next_header;
    h[7] = hop_limit;
    h[8..24].copy_from_slice(&src.octets());
    h[24..40].copy_from_slice(&dst.octets());
}

/// Why a source address is one that no peer on a link sends from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Martian {
    /// `::` (a node that has no address yet sends from it only in Neighbor Discovery).
    Unspecified,
    /// `::1`, which never leaves a node (RFC 4291 §2.5.3).
    Loopback,
    /// `ff00::/8`: a group, not a sender.
    Multicast,
    /// `::ffff:0:0/96`: an IPv4 address in IPv6's clothes, for sockets, not for the wire
    /// (RFC 4291 §2.5.5.2).
    V4Mapped,
    /// `::/96` (IPv4-compatible, deprecated by RFC 4291 §2.5.5.1) and the rest of
    /// `::/8`, reserved.
    Reserved,
    /// `2001::/32`, Teredo (RFC 4380): reached through a relay, never a neighbour.
    Teredo,
    /// Our own address: a packet claiming to come from us (a LAND attack).
    Ours,
}

/// Whether a packet from `src` may be a peer's, for a host whose address is `own`.
#[inline]
pub fn check_source(src: Ipv6Addr, own: Ipv6Addr) -> Result<(), Martian> {
    // Every martian is in `::/8`, `ff00::/8` or Teredo's `2001::/32`, or is `own`: one
    // look at the top bits lets every other address through.
    let bits = src.to_bits();
    let top = (bits >> 120) as u8;
    if top != 0 && top != 0xff && (bits >> 96) as u32 != 0x2001_0000 && src != own {
        return Ok(());
    }
    classify_source(src, own)
}

/// [`check_source`] for an address in one of the martian ranges.
#[cold]
fn classify_source(src: Ipv6Addr, own: Ipv6Addr) -> Result<(), Martian> {
    let s = src.segments();
    if src.is_unspecified() {
        Err(Martian::Unspecified)
    } else if src.is_loopback() {
        Err(Martian::Loopback)
    } else if src.is_multicast() {
        Err(Martian::Multicast)
    } else if src.to_ipv4_mapped().is_some() {
        Err(Martian::V4Mapped)
    } else if s[0] & 0xff00 == 0 {
        Err(Martian::Reserved)
    } else if s[0] == 0x2001 && s[1] == 0 {
        Err(Martian::Teredo)
    } else if src == own {
        Err(Martian::Ours)
    } else {
        Ok(())
    }
}

/// Whether TCP may send to (or accept a segment for) `dst`: a unicast address, never a
/// group (RFC 9293 §3.9.1).
pub fn tcp_destination(dst: Ipv6Addr) -> bool {
    !dst.is_multicast() && !dst.is_unspecified()
}

/// The extension headers [`parse`] walks through.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Extension {
    HopByHop,
    Routing,
    Fragment,
    Auth,
    DestOptions,
}

impl Extension {
    fn of(next_header: u8) -> Option<Extension> {
        Some(match next_header {
            next::HOP_BY_HOP => Extension::HopByHop,
            next::ROUTING => Extension::Routing,
            next::FRAGMENT => Extension::Fragment,
            next::AUTH => Extension::Auth,
            next::DEST_OPTIONS => Extension::DestOptions,
            _ => return None,
        })
    }

    /// The header's length in bytes, from its length field (`header` has at least
    /// eight bytes).
    fn length(self, header: &[u8]) -> usize {
        match self {
            Extension::Fragment => 8,
            // RFC 4302 §2.2: in 4-octet units, minus 2.
            Extension::Auth => (usize::from(header[1]) + 2) * 4,
            // RFC 8200 §4.3–4.6: in 8-octet units, not counting the first 8.
            _ => (usize::from(header[1]) + 1) * 8,
        }
    }
}

/// Walk the options of a Hop-by-Hop or Destination Options header (`options`: the
/// header after its two fixed bytes, which start `start` bytes into the packet).
fn check_options(options: &[u8], start: usize) -> Result<(), Ipv6Error> {
    let (mut at, mut padding, mut count) = (0, 0, 0);
    while let Some(&kind) = options.get(at) {
        let len = match kind {
            PAD1 => 1,
            _ => 2 + usize::from(*options.get(at + 1).ok_or(Ipv6Error::ExtensionChain)?),
        };
        let option = options.get(at..at + len).ok_or(Ipv6Error::ExtensionChain)?;
        if kind == PAD1 || kind == PADN {
            padding += len;
            if padding > MAX_PADDING || option.iter().skip(2).any(|&b| b != 0) {
                return Err(Ipv6Error::Options);
            }
        } else {
            padding = 0;
            count += 1;
            if count > MAX_OPTIONS {
                return Err(Ipv6Error::Options);
            }
            // Unknown here: its two high bits say what to do, 00 skip it, otherwise
            // discard the packet, 10 and 11 also telling the sender.
            if kind >> 6 != 0 {
                return Err(Ipv6Error::UnknownOption {
                    at: start + at,
                    report: kind >> 6 >= 2,
                });
            }
        }
        at += len;
    }
    Ok(())
}

pub(crate) mod address;
#[cfg(test)]
mod tests;
