//! ARP's wire format (RFC 826) for Ethernet/IPv4: validating a received packet
//! ([`process`]) and building the frames we send ([`build_request`], [`build_reply`],
//! [`build_gratuitous`]). What the engine learns from a packet goes to the
//! [neighbour cache](super::cache).

use std::net::Ipv4Addr;

use smoltcp::wire::{ArpHardware, ArpOperation, ArpPacket, ArpRepr, EthernetProtocol};

use crate::drop_reason::DropReason;
use crate::ethernet;
use crate::io::MacAddr;

/// Length of an Ethernet/IPv4 ARP packet (RFC 826: 8 + 2 × (6 + 4)).
pub const PACKET_LEN: usize = 28;
/// Length of an ARP frame we build: Ethernet header plus ARP packet. The driver pads it
/// to the 60-byte Ethernet minimum.
pub const FRAME_LEN: usize = ethernet::HEADER_LEN + PACKET_LEN;

/// A valid ARP packet, reduced to what the engine acts on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ArpInput {
    /// Request or Reply (the only operations accepted).
    pub operation: ArpOperation,
    /// Sender protocol address.
    pub sender_ip: Ipv4Addr,
    /// Sender hardware address: always unicast and non-zero.
    pub sender_mac: MacAddr,
    /// Target protocol address.
    pub target_ip: Ipv4Addr,
    /// The target protocol address is ours (RFC 826 "Am I the target protocol address?").
    pub targets_us: bool,
    /// A request for our address: answer with [`build_reply`] to `sender_mac`/`sender_ip`.
    pub reply_owed: bool,
    /// Another host claims our address (RFC 5227 §2.4 conflict): its sender IP is ours.
    /// Nothing is learned from it; the engine should count it and may defend with
    /// `build_gratuitous`.
    pub conflict: bool,
}

impl ArpInput {
    /// The mapping this packet teaches, if any: none from a probe (RFC 5227 §2.1.1,
    /// sender IP 0.0.0.0) or from a conflict.
    pub fn learnable(&self) -> Option<(Ipv4Addr, MacAddr)> {
        (!self.sender_ip.is_unspecified() && !self.conflict)
            .then_some((self.sender_ip, self.sender_mac))
    }
}

/// Validate the payload of an ARP frame received by the host that owns `our_ip`.
///
/// Only Ethernet/IPv4 ARP (hardware type 1, protocol 0x0800, lengths 6 and 4) with
/// operation Request or Reply is accepted. A sender hardware address that is multicast,
/// broadcast or zero, or a sender IP that is broadcast, multicast or loopback, is
/// rejected as [`DropReason::BadArp`]: learning it would poison the cache.
pub fn process(payload: &[u8], our_ip: Ipv4Addr) -> Result<ArpInput, DropReason> {
    // The fixed part (types, lengths, operation) is 8 bytes; read it before trusting the
    // lengths it announces.
    if payload.len() < 8 {
        return Err(DropReason::Truncated);
    }
    let packet = ArpPacket::new_unchecked(payload);
    if packet.hardware_type() != ArpHardware::Ethernet
        || packet.protocol_type() != EthernetProtocol::Ipv4
        || packet.hardware_len() != 6
        || packet.protocol_len() != 4
    {
        return Err(DropReason::BadArp);
    }
    if payload.len() < PACKET_LEN {
        return Err(DropReason::Truncated);
    }
    let repr = ArpRepr::parse(&packet).map_err(|_| DropReason::BadArp)?;
    let ArpRepr::EthernetIpv4 {
        operation,
        source_hardware_addr: sender_mac,
        source_protocol_addr: sender_ip,
        target_protocol_addr: target_ip,
        ..
    } = repr
    else {
        return Err(DropReason::BadArp);
    };
    let sender_mac = MacAddr::from_wire(sender_mac);
    let is_request = match operation {
        ArpOperation::Request => true,
        ArpOperation::Reply => false,
        _ => return Err(DropReason::BadArp),
    };
    if !is_unicast_mac(sender_mac)
        || sender_ip.is_broadcast()
        || sender_ip.is_multicast()
        || sender_ip.is_loopback()
    {
        return Err(DropReason::BadArp);
    }
    let targets_us = target_ip == our_ip;
    let conflict = sender_ip == our_ip;
    Ok(ArpInput {
        operation,
        sender_ip,
        sender_mac,
        target_ip,
        targets_us,
        reply_owed: is_request && targets_us && !conflict,
        conflict,
    })
}

/// The all-zero MAC: what RFC 5227 puts in a request's target hardware address.
const ZERO_MAC: MacAddr = MacAddr([0; 6]);

pub(super) fn is_unicast_mac(mac: MacAddr) -> bool {
    mac.is_unicast() && mac != ZERO_MAC
}

pub(super) fn is_neighbour_ip(ip: std::net::IpAddr) -> bool {
    match ip {
        std::net::IpAddr::V4(ip) => {
            !(ip.is_unspecified() || ip.is_broadcast() || ip.is_multicast() || ip.is_loopback())
        }
        std::net::IpAddr::V6(ip) => !(ip.is_unspecified() || ip.is_multicast() || ip.is_loopback()),
    }
}

/// Write an Ethernet frame carrying an Ethernet/IPv4 ARP packet; returns [`FRAME_LEN`].
fn build(
    buf: &mut [u8],
    eth_dst: MacAddr,
    operation: ArpOperation,
    sender: (MacAddr, Ipv4Addr),
    target: (MacAddr, Ipv4Addr),
) -> usize {
    let frame = &mut buf[..FRAME_LEN];
    ethernet::write_header(frame, sender.0, eth_dst, EthernetProtocol::Arp);
    let repr = ArpRepr::EthernetIpv4 {
        operation,
        source_hardware_addr: sender.0.wire(),
        source_protocol_addr: sender.1,
        target_hardware_addr: target.0.wire(),
        target_protocol_addr: target.1,
    };
    repr.emit(&mut ArpPacket::new_unchecked(
        &mut frame[ethernet::HEADER_LEN..],
    ));
    FRAME_LEN
}

/// Build a broadcast "who has `target_ip`?" request; returns the frame length.
/// The target hardware address is zero, as RFC 5227 §2.1.1 recommends.
///
/// # Panics
/// If `buf` is shorter than [`FRAME_LEN`] (a bug in the caller, not bad input).
pub fn build_request(
    buf: &mut [u8],
    our_mac: MacAddr,
    our_ip: Ipv4Addr,
    target_ip: Ipv4Addr,
) -> usize {
    build(
        buf,
        MacAddr::BROADCAST,
        ArpOperation::Request,
        (our_mac, our_ip),
        (ZERO_MAC, target_ip),
    )
}

/// Build a probe of `target_ip`, which is cached at `target_mac`: the request
/// [`build_request`] builds, unicast to that MAC (as Linux probes a neighbour whose
/// reachability is in doubt). Returns the frame length.
///
/// # Panics
/// If `buf` is shorter than [`FRAME_LEN`].
pub fn build_probe(
    buf: &mut [u8],
    our_mac: MacAddr,
    our_ip: Ipv4Addr,
    target_ip: Ipv4Addr,
    target_mac: MacAddr,
) -> usize {
    build(
        buf,
        target_mac,
        ArpOperation::Request,
        (our_mac, our_ip),
        (ZERO_MAC, target_ip),
    )
}

/// Build the unicast reply to a request from `their_mac`/`their_ip` (RFC 826: swap sender
/// and target, fill in our MAC); returns the frame length.
///
/// # Panics
/// If `buf` is shorter than [`FRAME_LEN`].
pub fn build_reply(
    buf: &mut [u8],
    our_mac: MacAddr,
    our_ip: Ipv4Addr,
    their_mac: MacAddr,
    their_ip: Ipv4Addr,
) -> usize {
    build(
        buf,
        their_mac,
        ArpOperation::Reply,
        (our_mac, our_ip),
        (their_mac, their_ip),
    )
}

/// Build a gratuitous ARP announcement (RFC 5227 §2.3): a broadcast request whose sender
/// and target IP are both ours, so neighbours refresh their caches when we start.
///
/// # Panics
/// If `buf` is shorter than [`FRAME_LEN`].
pub(crate) fn build_gratuitous(buf: &mut [u8], our_mac: MacAddr, our_ip: Ipv4Addr) -> usize {
    build_request(buf, our_mac, our_ip, our_ip)
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    /// Where the ARP packet starts in a frame.
    const H: usize = ethernet::HEADER_LEN;
    use proptest::prelude::*;

    const US: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
    const THEM: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);
    const OTHER: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 3);
    const US_MAC: MacAddr = MacAddr([0x02, 0, 0, 0, 0, 1]);
    const THEM_MAC: MacAddr = MacAddr([0x02, 0, 0, 0, 0, 2]);
    const OTHER_MAC: MacAddr = MacAddr([0x02, 0, 0, 0, 0, 3]);

    /// Parse a built frame the way the engine does: Ethernet, then ARP.
    pub(in crate::arp) fn receive(
        frame: &[u8],
        our_ip: Ipv4Addr,
    ) -> (ethernet::EthernetHeader, ArpInput) {
        let (eth, payload) = ethernet::parse(frame).unwrap();
        assert_eq!(eth.ethertype, EthernetProtocol::Arp);
        (eth, process(payload, our_ip).unwrap())
    }

    /// A probe is the same request, to the MAC cached for its target.
    #[test]
    fn probe_round_trip() {
        let mut buf = [0u8; FRAME_LEN];
        assert_eq!(build_probe(&mut buf, US_MAC, US, THEM, THEM_MAC), FRAME_LEN);
        let (eth, input) = receive(&buf, THEM);
        assert_eq!((eth.src, eth.dst), (US_MAC, THEM_MAC));
        let mut request = [0u8; FRAME_LEN];
        build_request(&mut request, US_MAC, US, THEM);
        assert_eq!(buf[H..], request[H..]);
        assert!(input.reply_owed);
    }

    #[test]
    fn request_round_trip() {
        let mut buf = [0u8; FRAME_LEN];
        assert_eq!(build_request(&mut buf, THEM_MAC, THEM, US), FRAME_LEN);
        let (eth, input) = receive(&buf, US);
        assert_eq!((eth.src, eth.dst), (THEM_MAC, MacAddr::BROADCAST));
        assert_eq!(input.operation, ArpOperation::Request);
        assert_eq!(
            (input.sender_ip, input.sender_mac, input.target_ip),
            (THEM, THEM_MAC, US)
        );
        assert!(input.targets_us && input.reply_owed && !input.conflict);
        assert_eq!(input.learnable(), Some((THEM, THEM_MAC)));
        // Seen by a third host: nothing owed.
        let (_, input) = receive(&buf, OTHER);
        assert!(!input.targets_us && !input.reply_owed);
    }

    #[test]
    fn reply_round_trip() {
        let mut buf = [0u8; 64];
        assert_eq!(build_reply(&mut buf, US_MAC, US, THEM_MAC, THEM), FRAME_LEN);
        let (eth, input) = receive(&buf[..FRAME_LEN], THEM);
        assert_eq!((eth.src, eth.dst), (US_MAC, THEM_MAC));
        assert_eq!(input.operation, ArpOperation::Reply);
        assert_eq!((input.sender_ip, input.sender_mac), (US, US_MAC));
        assert!(input.targets_us && !input.reply_owed);
        let ArpRepr::EthernetIpv4 {
            target_hardware_addr,
            ..
        } = ArpRepr::parse(&ArpPacket::new_checked(&buf[H..FRAME_LEN]).unwrap()).unwrap()
        else {
            unreachable!()
        };
        assert_eq!(MacAddr::from_wire(target_hardware_addr), THEM_MAC);
    }

    #[test]
    fn gratuitous_round_trip_and_conflict() {
        let mut buf = [0u8; FRAME_LEN];
        build_gratuitous(&mut buf, THEM_MAC, THEM);
        let (eth, input) = receive(&buf, US);
        assert_eq!(eth.dst, MacAddr::BROADCAST);
        assert_eq!((input.sender_ip, input.target_ip), (THEM, THEM));
        assert!(!input.targets_us && !input.reply_owed && !input.conflict);
        assert_eq!(input.learnable(), Some((THEM, THEM_MAC)));
        // Somebody announcing our own address is a conflict, not something to learn.
        build_gratuitous(&mut buf, OTHER_MAC, US);
        let (_, input) = receive(&buf, US);
        assert!(input.conflict && !input.reply_owed);
        assert_eq!(input.learnable(), None);
    }

    #[test]
    fn probe_is_answered_but_not_learned() {
        let mut buf = [0u8; FRAME_LEN];
        build_request(&mut buf, THEM_MAC, Ipv4Addr::UNSPECIFIED, US);
        let (_, input) = receive(&buf, US);
        assert!(input.reply_owed);
        assert_eq!(input.learnable(), None);
    }

    #[test]
    fn rejects_bad_packets() {
        let mut buf = [0u8; FRAME_LEN];
        build_request(&mut buf, THEM_MAC, THEM, US);
        let good = buf;
        for len in [0, 7, 8, 27] {
            assert_eq!(
                process(&good[H..H + len], US),
                Err(DropReason::Truncated),
                "{len}"
            );
        }
        // Hardware type, protocol type, lengths.
        for (pos, val) in [(15, 6), (16, 0x86), (18, 8), (19, 16)] {
            let mut b = good;
            b[pos] = val;
            assert_eq!(process(&b[H..], US), Err(DropReason::BadArp), "{pos}");
        }
        // Operation 3 (RARP request).
        let mut b = good;
        b[21] = 3;
        assert_eq!(process(&b[H..], US), Err(DropReason::BadArp));
        // Sender MAC broadcast / multicast / zero, sender IP broadcast.
        for mac in [
            MacAddr::BROADCAST,
            MacAddr([1, 0, 0x5e, 0, 0, 1]),
            MacAddr([0; 6]),
        ] {
            build_request(&mut buf, mac, THEM, US);
            assert_eq!(process(&buf[H..], US), Err(DropReason::BadArp));
        }
        build_request(&mut buf, THEM_MAC, Ipv4Addr::BROADCAST, US);
        assert_eq!(process(&buf[H..], US), Err(DropReason::BadArp));
        // Trailing Ethernet padding is fine.
        let mut padded = good.to_vec();
        padded.resize(60, 0);
        assert!(process(&padded[H..], US).is_ok());
    }

    proptest! {
        #[test]
        fn process_never_panics(
            bytes in proptest::collection::vec(any::<u8>(), 0..64),
            ip in any::<[u8; 4]>(),
        ) {
            let our_ip = Ipv4Addr::from(ip);
            if let Ok(input) = process(&bytes, our_ip) {
                prop_assert!(bytes.len() >= PACKET_LEN);
                prop_assert_eq!(input.reply_owed, input.operation == ArpOperation::Request
                    && input.target_ip == our_ip && input.sender_ip != our_ip);
            }
        }

        #[test]
        fn mutated_packets_never_panic(pos in 0usize..FRAME_LEN - H, val in any::<u8>()) {
            let mut buf = [0u8; FRAME_LEN];
            build_request(&mut buf, THEM_MAC, THEM, US);
            buf[H + pos] = val;
            let _ = process(&buf[H..], US);
        }
    }
}
