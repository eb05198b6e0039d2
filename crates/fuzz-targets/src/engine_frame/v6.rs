//! The IPv6 records of [`engine_frame`](super::engine_frame): ICMPv6 (echo, Neighbor
//! Discovery from any source, including the unspecified address and the engine's own
//! addresses, errors quoting the engine's own segments, any other message) and IPv6
//! packets between fuzzed addresses through fuzzed extension-header chains.
//!
//! Addresses are picked by selector bytes from [`wire6::address`]: the peer's, the
//! engine's (every link-local address it may draw), groups, other nodes, martians.

use std::net::{IpAddr, Ipv6Addr, SocketAddr};

use rusty_stack::internals::icmpv6::{group_mac, solicited_node};
use rusty_stack::internals::{ipv6, SeqNum};
use rusty_stack::io::MacAddr;

use super::{Bench, Peer, PEER_PORT, PORT};
use crate::input::Input;
use crate::wire::{HOST_MAC, PEER_MAC};
use crate::wire6::{self, address, ALL_NODES, HOST6, ICMPV6, OTHER_MAC};

/// Kinds of [`Record::Icmp6`](super::Record::Icmp6), bits 3–5 of its tag.
pub(crate) mod icmp6 {
    pub(crate) const ECHO: u8 = 0;
    pub(crate) const SOLICITATION: u8 = 1;
    pub(crate) const ADVERTISEMENT: u8 = 2;
    pub(crate) const ERROR: u8 = 3;
    pub(crate) const ANY: u8 = 4;
    pub(crate) const OPEN: u8 = 5;
    pub(crate) const DAD: u8 = 6;
    /// Tag bit 6: a hop-limit byte follows the source (otherwise 255).
    pub(crate) const HOP_LIMIT: u8 = 0x40;
    /// Tag bit 7: the frame comes from another node's MAC.
    pub(crate) const OTHER_MAC: u8 = 0x80;
}

/// Upper layers of [`Record::Packet6`](super::Record::Packet6), bits 3–4 of its tag,
/// and its flags.
pub(crate) mod packet6 {
    pub(crate) const TCP: u8 = 0;
    pub(crate) const ICMPV6: u8 = 1;
    pub(crate) const OTHER: u8 = 2;
    pub(crate) const TCP_BAD_CHECKSUM: u8 = 3;
    /// Tag bit 5: a unicast destination at a group MAC, a group at the engine's MAC.
    pub(crate) const SWAP_MAC: u8 = 0x20;
    /// Tag bit 6: the frame comes from another node's MAC.
    pub(crate) const OTHER_MAC: u8 = 0x40;
    /// Tag bit 7: handed over as a sibling worker would, checksums trusted.
    pub(crate) const HAND_OVER: u8 = 0x80;
}

/// The MAC a link-layer option byte names: a peer-like MAC ending in the byte's low
/// seven bits, a group MAC when its top bit is set, all zeros for 0xff.
fn option_mac(b: u8) -> MacAddr {
    if b == 0xff {
        return MacAddr([0; 6]);
    }
    MacAddr([0x02 | (b >> 7), 0, 0, 0, 0, b & 0x7f])
}

/// The options of a solicitation (`own` Source Link-Layer, 1) or an advertisement
/// (Target Link-Layer, 2) as the low bits of `opt` pick them: none, ours with `mac`,
/// one of length zero (which refuses the message), or the other type first and ours
/// after.
fn nd_options(opt: u8, own: u8, mac: MacAddr) -> Vec<u8> {
    let option = |kind: u8| [&[kind, 1][..], &mac.0].concat();
    match opt & 3 {
        0 => Vec::new(),
        1 => option(own),
        2 => vec![own, 0, 0, 0, 0, 0, 0, 0],
        _ => [option(3 - own), option(own)].concat(),
    }
}

impl Bench {
    /// A [`Record::Icmp6`](super::Record::Icmp6): the kind in tag bits 3–5 (see
    /// [`icmp6`]), then the source selector, a hop limit (tag bit 6), and per kind:
    ///
    /// - echo: destination selector, data length (u16);
    /// - solicitation: target selector, option byte, MAC byte;
    /// - advertisement: target selector, flags (R, S, O in the top three bits), option
    ///   byte, MAC byte;
    /// - error: kind byte (`b % 4`: Packet Too Big, Destination Unreachable, Time
    ///   Exceeded, Parameter Problem; code `b >> 2`), MTU or pointer (u16), how much of
    ///   the engine's latest IPv6 segment to quote (8-byte units, at most what fits in
    ///   1,280 bytes), an offset added to its quoted sequence number (i16);
    /// - any: destination selector, type, code, body length, body;
    /// - open: the engine opens a connection to the source selector's address, port
    ///   byte + 1;
    /// - duplicate detection: another node probes for (byte even) or holds (odd) the
    ///   engine's address the source selector picks (`% 5`: global, link-local draws);
    /// - 7: a loop turn.
    ///
    /// The option byte: bits 0–1 the options ([`nd_options`]); bits 2–3 the
    /// destination (a solicitation: the target's solicited-node group, the target, all
    /// nodes, the MAC byte's selector; an advertisement: the engine's global address,
    /// its link-local one, all nodes, the target's group); bit 4 a nonzero code; bit 5
    /// cut to 20 bytes; bit 6 the checksum left wrong.
    pub(super) fn icmp6(&mut self, tag: u8, input: &mut Input<'_>) {
        let sel = input.u8();
        let src = address(sel);
        let hops = if tag & icmp6::HOP_LIMIT != 0 {
            input.u8()
        } else {
            255
        };
        let nd = |kind: u8, target: Ipv6Addr, opt: u8, mac_byte: u8, head: [u8; 4]| {
            let mut msg = vec![kind, u8::from(opt & 16 != 0), 0, 0];
            msg.extend_from_slice(&head);
            msg.extend_from_slice(&target.octets());
            let own = if kind == 135 { 1 } else { 2 };
            msg.extend(nd_options(opt, own, option_mac(mac_byte)));
            if opt & 32 != 0 {
                msg.truncate(20);
            }
            msg
        };
        let (dst, mut msg, sealed) = match (tag >> 3) & 7 {
            icmp6::ECHO => {
                let dst = address(input.u8());
                let len = usize::from(input.u16()) % 2000;
                let mut msg = vec![128, 0, 0, 0, 0, tag, 0, 1];
                msg.resize(8 + len, tag);
                (dst, msg, true)
            }
            icmp6::SOLICITATION => {
                let target = address(input.u8());
                let (opt, mac_byte) = (input.u8(), input.u8());
                let dst = match (opt >> 2) & 3 {
                    0 => solicited_node(target),
                    1 => target,
                    2 => ALL_NODES,
                    _ => address(mac_byte),
                };
                (dst, nd(135, target, opt, mac_byte, [0; 4]), opt & 64 == 0)
            }
            icmp6::ADVERTISEMENT => {
                let target = address(input.u8());
                let flags = input.u8() & 0xe0;
                let (opt, mac_byte) = (input.u8(), input.u8());
                let dst = match (opt >> 2) & 3 {
                    0 => HOST6,
                    1 => wire6::host_link_local(0),
                    2 => ALL_NODES,
                    _ => solicited_node(target),
                };
                let msg = nd(136, target, opt, mac_byte, [flags, 0, 0, 0]);
                (dst, msg, opt & 64 == 0)
            }
            icmp6::ERROR => {
                let (dst, msg) = self.error6(input);
                (dst, msg, true)
            }
            icmp6::ANY => {
                let dst = address(input.u8());
                let (kind, code, len) = (input.u8(), input.u8(), input.u8());
                let mut msg = vec![kind, code, 0, 0];
                msg.extend_from_slice(input.bytes(usize::from(len)));
                (dst, msg, true)
            }
            icmp6::OPEN => {
                let port = u16::from(input.u8()) + 1;
                self.eng.handler_mut().open = Some(SocketAddr::new(src.into(), port));
                self.poll();
                return;
            }
            icmp6::DAD => return self.duplicate(sel, input.u8()),
            _ => {
                self.poll();
                return;
            }
        };
        if sealed {
            wire6::seal(&mut msg, src, dst);
        }
        let src_mac = if tag & icmp6::OTHER_MAC != 0 {
            OTHER_MAC
        } else {
            PEER_MAC
        };
        let packet = wire6::packet(src, dst, hops, ICMPV6, &msg);
        self.send(&wire6::frame(src_mac, wire6::mac_for(dst), &packet));
    }

    /// An ICMPv6 error about the engine's latest IPv6 segment (or, before there is
    /// one, a made-up segment of ours), to the address it came from.
    fn error6(&mut self, input: &mut Input<'_>) -> (Ipv6Addr, Vec<u8>) {
        let kind = input.u8();
        let value = u32::from(input.u16());
        let quote = input.u8();
        let seq_off = input.u16() as i16;
        let mut invoking = if self.last6.is_empty() {
            let mut p = wire6::packet(HOST6, wire6::PEER6, 64, wire6::TCP, &[0; 20]);
            p[40..44].copy_from_slice(&[0, 80, 0x9c, 0x40]);
            p
        } else {
            self.last6.clone()
        };
        // At most what fits in IPv6's minimum MTU (RFC 4443 §2.4).
        invoking.truncate((usize::from(quote) * 8).min(1280 - 40 - 8));
        if let Some(seq) = invoking.get_mut(44..48) {
            let s = u32::from_be_bytes([seq[0], seq[1], seq[2], seq[3]]);
            let s = s.wrapping_add_signed(i32::from(seq_off));
            seq.copy_from_slice(&s.to_be_bytes());
        }
        // To whichever of our addresses sent the segment.
        let dst = self.last6.get(8..24).map_or(HOST6, |o| {
            Ipv6Addr::from(<[u8; 16]>::try_from(o).expect("16 bytes"))
        });
        let kind_code = [2, 1, 3, 4][usize::from(kind % 4)];
        let mut msg = vec![kind_code, kind >> 2, 0, 0];
        msg.extend_from_slice(&value.to_be_bytes());
        msg.extend_from_slice(&invoking);
        (dst, msg)
    }

    /// Another node probes for (`how` even: a solicitation from the unspecified
    /// address) or holds (odd: an unsolicited advertisement with its MAC) the engine's
    /// address `sel % 5` picks: its global one or a link-local draw.
    fn duplicate(&mut self, sel: u8, how: u8) {
        let ours = match sel % 5 {
            0 => HOST6,
            n => wire6::host_link_local(n - 1),
        };
        let (src, dst, mut msg) = if how & 1 == 0 {
            let group = solicited_node(ours);
            let mut msg = vec![135, 0, 0, 0, 0, 0, 0, 0];
            msg.extend_from_slice(&ours.octets());
            (Ipv6Addr::UNSPECIFIED, group, msg)
        } else {
            let mut msg = vec![136, 0, 0, 0, 0x20, 0, 0, 0];
            msg.extend_from_slice(&ours.octets());
            msg.extend(nd_options(1, 2, OTHER_MAC));
            (ours, ALL_NODES, msg)
        };
        wire6::seal(&mut msg, src, dst);
        let packet = wire6::packet(src, dst, 255, ICMPV6, &msg);
        self.send(&wire6::frame(OTHER_MAC, group_mac(dst), &packet));
    }

    /// A [`Record::Packet6`](super::Record::Packet6): the upper layer in tag bits 3–4
    /// and flags in bits 5–7 (see [`packet6`]), then source and destination selectors,
    /// the hop limit, a count of extension headers (`% 10`, one past the engine's
    /// bound) and their spec bytes ([`wire6::chain`]), and the upper layer:
    ///
    /// - TCP: flags (as [`Bench::segment`]'s low five bits), ports (bits 0–1: the
    ///   tracked connection's port or another of the peer's; bits 2–7: the engine's
    ///   port on it or that port), offsets from the tracked numbers (i16 each), payload
    ///   length in 8-byte units;
    /// - ICMPv6: type, code, body length, body (checksum written);
    /// - another protocol: its number, body length, body.
    pub(super) fn packet6(&mut self, tag: u8, input: &mut Input<'_>) {
        let src = address(input.u8());
        let dst = address(input.u8());
        let hops = input.u8();
        let n = usize::from(input.u8() % 10);
        let specs = input.bytes(n).to_vec();
        let upper_kind = (tag >> 3) & 3;
        let mut advance = None;
        let (protocol, upper) = match upper_kind {
            packet6::TCP | packet6::TCP_BAD_CHECKSUM => {
                let (mut tcp, by) = self.tcp6(src, dst, input);
                if upper_kind == packet6::TCP_BAD_CHECKSUM {
                    tcp[16] ^= 0x5a;
                } else {
                    advance = by;
                }
                (wire6::TCP, tcp)
            }
            packet6::ICMPV6 => {
                let (kind, code, len) = (input.u8(), input.u8(), input.u8());
                let mut msg = vec![kind, code, 0, 0];
                msg.extend_from_slice(input.bytes(usize::from(len)));
                wire6::seal(&mut msg, src, dst);
                (ICMPV6, msg)
            }
            _ => {
                let (protocol, len) = (input.u8(), input.u8());
                (protocol, input.bytes(usize::from(len)).to_vec())
            }
        };
        let (first, body) = wire6::chain(&specs, protocol, &upper);
        let packet = wire6::packet(src, dst, hops, first, &body);
        // The tracked connection's next segment moves the peer on if the engine takes
        // the packet it came in.
        let taken = ipv6::parse(&packet).is_ok_and(|h| h.protocol == wire6::TCP);
        if let (Some(by), Some(peer), true) = (advance, &mut self.peer, taken) {
            peer.snd_nxt += by;
        }
        let dst_mac = match (tag & packet6::SWAP_MAC != 0, dst.is_multicast()) {
            (false, _) => wire6::mac_for(dst),
            (true, true) => HOST_MAC,
            (true, false) => group_mac(ALL_NODES),
        };
        let src_mac = if tag & packet6::OTHER_MAC != 0 {
            OTHER_MAC
        } else {
            PEER_MAC
        };
        let frame = wire6::frame(src_mac, dst_mac, &packet);
        if tag & packet6::HAND_OVER != 0 {
            self.hand_over(frame);
        } else {
            self.send(&frame);
        }
    }

    /// The TCP segment of a packet record from `src` to `dst`, around the tracked
    /// connection's numbers; and, if it is the tracked connection's next segment, how
    /// far it moves the peer on.
    fn tcp6(
        &self,
        src: Ipv6Addr,
        dst: Ipv6Addr,
        input: &mut Input<'_>,
    ) -> (Vec<u8>, Option<usize>) {
        let flags = input.u8();
        let ports = input.u8();
        let seq_off = input.u16() as i16;
        let ack_off = input.u16() as i16;
        let len = usize::from(input.u8()) * 8;
        let base = self.peer.unwrap_or(Peer {
            ip: src.into(),
            host_ip: dst.into(),
            port: PEER_PORT + 2,
            host_port: PORT,
            snd_nxt: SeqNum(1),
            rcv_nxt: SeqNum(0),
            ts: false,
            ts_recent: 0,
        });
        let seg = self.fuzzed_seg(&base, flags, seq_off, ack_off);
        let src_port = match ports & 3 {
            0 => base.port,
            n => PEER_PORT + 2 + u16::from(n),
        };
        let dst_port = match ports >> 2 {
            0 => base.host_port,
            p => u16::from(p),
        };
        let payload: Vec<u8> = (0..len).map(|i| (i as u8) ^ flags).collect();
        let tcp = crate::wire::tcp_bytes(src, dst, (src_port, dst_port), &seg, &payload);
        let tracked = self.peer.is_some_and(|p| {
            (p.ip, p.host_ip, p.port, p.host_port)
                == (IpAddr::V6(src), IpAddr::V6(dst), src_port, dst_port)
        });
        let advance = (tracked && seq_off == 0 && !seg.rst)
            .then(|| payload.len() + usize::from(seg.syn) + usize::from(seg.fin));
        (tcp, advance)
    }
}
