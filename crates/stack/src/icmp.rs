//! ICMP (RFC 792) as far as a TCP server needs it: answering Echo Requests ("ping").
//!
//! RFC 1122 §3.2.2.6 requires every host to implement an Echo server. Other ICMP messages
//! (Destination Unreachable, Time Exceeded, Echo Replies to pings we never sent...) are
//! accepted and ignored: they are not errors, so they are reported as `Ok(None)` rather
//! than as a [`DropReason`]. Parsing and emitting go through smoltcp's [`Icmpv4Packet`] and
//! [`Icmpv4Repr`].
//!
//! A request longer than the link MTU allows a reply to be (a device may hand over a
//! frame above its MTU: a peer with a larger MTU on the segment, a driver that does not
//! filter) is answered with its data cut to fit: RFC 1122 §3.2.2.6 says that when the
//! reply would need fragmentation the host does not implement, it MUST be truncated to
//! the maximum transmission size and sent. We never fragment.

use std::net::Ipv4Addr;

use smoltcp::phy::ChecksumCapabilities;
use smoltcp::wire::{Icmpv4Message, Icmpv4Packet, Icmpv4Repr};

use crate::drop_reason::DropReason;
use crate::ethernet::{self, EthernetProtocol};
use crate::io::MacAddr;
use crate::ipv4::{self, IpProtocol, Ipv4Header};

/// Length of the fixed ICMP header: type, code, checksum and the 4-byte rest-of-header.
pub(crate) const HEADER_LEN: usize = 8;

/// Answer an ICMP message.
///
/// For an Echo Request (type 8, code 0) with a valid checksum, write the Echo Reply
/// (RFC 792: same identifier, sequence number and data, type 0, new checksum) into `out`
/// and return `Ok(Some(len))`, where `len` equals `request.len()`, or `max_len` when the
/// request is longer: the data is then cut to fit (RFC 1122 §3.2.2.6). Any other
/// well-formed message returns `Ok(None)`: nothing to send, nothing wrong.
///
/// `request` is the whole ICMP message, i.e. the IPv4 payload already trimmed to the IP
/// total length. A `max_len` below the ICMP header yields [`DropReason::OverMtu`]; an
/// `out` shorter than the reply [`DropReason::NoTxBuffer`].
pub(crate) fn echo_reply(
    request: &[u8],
    out: &mut [u8],
    max_len: usize,
) -> Result<Option<usize>, DropReason> {
    let packet = Icmpv4Packet::new_checked(request).map_err(|_| DropReason::Truncated)?;
    // ICMP checksums are never offloaded to the NIC, so always verify (RFC 792: the
    // ones'-complement sum over the whole message).
    if !packet.verify_checksum() {
        return Err(DropReason::BadIcmpChecksum);
    }
    if packet.msg_type() != Icmpv4Message::EchoRequest {
        return Ok(None);
    }
    // The checksum is already verified; smoltcp's parse rejects a nonzero code.
    let (ident, seq_no, data) = match Icmpv4Repr::parse(&packet, &ChecksumCapabilities::ignored()) {
        Ok(Icmpv4Repr::EchoRequest {
            ident,
            seq_no,
            data,
        }) => (ident, seq_no, data),
        _ => return Err(DropReason::BadIcmp),
    };
    let Some(room) = max_len.checked_sub(HEADER_LEN) else {
        return Err(DropReason::OverMtu);
    };
    let reply = Icmpv4Repr::EchoReply {
        ident,
        seq_no,
        data: &data[..data.len().min(room)],
    };
    let len = reply.buffer_len();
    let Some(out) = out.get_mut(..len) else {
        return Err(DropReason::NoTxBuffer);
    };
    reply.emit(
        &mut Icmpv4Packet::new_unchecked(out),
        &ChecksumCapabilities::default(),
    );
    Ok(Some(len))
}

/// Build a complete Ethernet + IPv4 + ICMP Echo Reply frame into `out` for an Echo
/// Request that arrived from `request_src_mac` with IPv4 header `request_ip` and ICMP
/// message `request_icmp`, on a link whose IP MTU is `mtu` (the reply is cut to fit it,
/// see [`echo_reply`]). Returns the frame length, or `Ok(None)` when nothing is owed.
///
/// Only a request to `our_ip` itself is answered: one sent to a broadcast or multicast
/// address is ignored (RFC 1122 §3.2.2.6 allows it; answering would make us a
/// smurf-attack amplifier). The IPv4 layer passes up no other destination; this keeps
/// the rule where the reply is made. Nor is a reply ever sent to a group MAC
/// ([`DropReason::SendToGroupMac`]). The reply always comes from `our_ip`, carries DF
/// and [`ipv4::DEFAULT_TTL`], and has its IPv4 checksum filled in. `out` must hold the
/// reply, `14 + 20 + request_icmp.len()` bytes or `14 + mtu` if fewer, else
/// [`DropReason::NoTxBuffer`].
#[allow(clippy::too_many_arguments)]
pub(crate) fn echo_reply_frame(
    out: &mut [u8],
    our_mac: MacAddr,
    our_ip: Ipv4Addr,
    request_src_mac: MacAddr,
    request_ip: &Ipv4Header,
    request_icmp: &[u8],
    ip_ident: u16,
    mtu: usize,
) -> Result<Option<usize>, DropReason> {
    if request_ip.dst != our_ip {
        return Ok(None);
    }
    if request_src_mac.is_multicast() {
        return Err(DropReason::SendToGroupMac);
    }
    let Some(icmp_out) = out.get_mut(ipv4::TRANSPORT_OFFSET..) else {
        return Err(DropReason::NoTxBuffer);
    };
    let max_icmp = mtu.saturating_sub(ipv4::HEADER_LEN);
    let Some(icmp_len) = echo_reply(request_icmp, icmp_out, max_icmp)? else {
        return Ok(None);
    };
    ethernet::write_header(out, our_mac, request_src_mac, EthernetProtocol::Ipv4);
    ipv4::write_header(
        &mut out[ethernet::HEADER_LEN..],
        our_ip,
        request_ip.src,
        IpProtocol::Icmp,
        icmp_len,
        ipv4::DEFAULT_TTL,
        ip_ident,
        true,
        true,
    );
    Ok(Some(ipv4::TRANSPORT_OFFSET + icmp_len))
}

#[cfg(test)]
mod tests;
