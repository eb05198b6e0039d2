//! The receive path: Ethernet → ARP/IPv4 → ICMP/TCP (IPv6 in `v6`), and TCP
//! demultiplexing, for either family, to a connection, the sibling worker that owns
//! the flow, a TIME-WAIT entry, a listener or a RST.

use std::net::IpAddr;

use super::flows::Flow;
use super::{timewait, Engine, FlowKey};
use crate::app::Handler;
use crate::checksum;
use crate::drop_reason::DropReason;
use crate::ethernet::{self, EthernetProtocol};
use crate::icmp;
use crate::io::{MacAddr, PacketIo, TxFrame, ETHERNET_HEADER_LEN};
use crate::ipv4::{self, IpProtocol, Ipv4Header};
use crate::tcp::segment::{ParseError, Segment, TxSegment};
use crate::tcp::seq::SeqNum;
use crate::time::Clock;

/// Most frames held for sibling workers between two loop turns.
pub(super) const MAX_MISDIRECTED: usize = 1024;

/// A TCP segment for us, as the IP layer (either family) hands it to TCP.
pub(super) struct TcpIn<'a> {
    pub src: IpAddr,
    /// The source and destination addresses as they lie in the IP header (8 bytes for
    /// IPv4, 32 for IPv6), which the pseudo-header sum reads.
    pub addresses: &'a [u8],
    /// Which of our addresses the destination is (see `addresses`).
    pub local: u8,
    /// The TCP header and payload.
    pub segment: &'a [u8],
}

impl TcpIn<'_> {
    /// The pseudo-header of the segment, which is `len` bytes long.
    #[inline]
    fn pseudo(&self, len: u16) -> checksum::Wide {
        const TCP: u8 = 6;
        match (
            self.addresses.first_chunk::<32>(),
            self.addresses.first_chunk::<8>(),
        ) {
            (Some(v6), _) => checksum::Wide::pseudo_v6_at(v6, TCP, u32::from(len)),
            (None, Some(v4)) => checksum::Wide::pseudo_v4_at(v4, TCP, len),
            // The IP layers give 8 or 32 bytes: no segment checks against nothing.
            (None, None) => checksum::Wide::default(),
        }
    }
}

impl<D: PacketIo, H: Handler, C: Clock> Engine<D, H, C> {
    // Never inlined: inlined into the loop turn, its body makes the compiler hoist the
    // addresses of the engine fields it uses ahead of the receive loop and spill them,
    // which a turn that receives one frame pays in full; one call per frame is cheaper.
    #[inline(never)]
    pub(super) fn on_frame(&mut self, frame: &[u8], checksum_verified: bool) {
        self.stats.frames_in += 1;
        self.stats.bytes_in += frame.len() as u64;
        let (ethertype, payload) = match ethernet::accept(&self.mac, frame) {
            Ok(x) => x,
            Err(r) => return self.stats.drop(r),
        };
        // The IP layers answer what is theirs and hand TCP back, so that the TCP input
        // below is one copy for both families: a second copy would leave each function
        // it calls two callers, and the compiler then keeps many of them out of line on
        // the IPv4 path as well.
        let tcp = match ethertype {
            EthernetProtocol::Arp => return self.on_arp(frame, payload),
            EthernetProtocol::Ipv4 => self.on_ipv4(frame, payload, checksum_verified),
            EthernetProtocol::Ipv6 if self.addrs.has_v6() => self.on_ipv6(frame, payload),
            _ => return self.stats.drop(DropReason::UnknownEtherType),
        };
        if let Some(t) = tcp {
            self.on_tcp(frame, &t, checksum_verified);
        }
    }

    /// `frame` is the whole frame, which carries the IPv4 `packet`; its Ethernet header
    /// has been parsed and admitted. A TCP segment for us comes back.
    fn on_ipv4<'a>(
        &mut self,
        frame: &[u8],
        packet: &'a [u8],
        checksum_verified: bool,
    ) -> Option<TcpIn<'a>> {
        let Some(local) = self.addrs.v4() else {
            self.stats.drop(DropReason::NotOurAddress);
            return None;
        };
        let (ip, l4) = match ipv4::parse(packet, self.local, checksum_verified) {
            Ok(x) => x,
            Err(r) => {
                self.stats.drop(r);
                return None;
            }
        };
        match ip.protocol {
            IpProtocol::Tcp => {
                return Some(TcpIn {
                    src: IpAddr::V4(ip.src),
                    addresses: &packet[ipv4::ADDRESSES],
                    local,
                    segment: l4,
                });
            }
            IpProtocol::Icmp => self.on_icmp(ethernet::source(frame), &ip, l4),
            _ => self.stats.drop(DropReason::UnknownProtocol),
        }
        None
    }

    fn on_icmp(&mut self, src_mac: MacAddr, ip: &Ipv4Header, l4: &[u8]) {
        // A request longer than the MTU allows (the device handed over a frame above
        // it) gets a reply cut to the MTU: see `icmp`.
        let full = ipv4::TRANSPORT_OFFSET + l4.len();
        let len = full.min(self.max_frame);
        let Some(mut buf) = self.dev.alloc_tx(len) else {
            return self.stats.drop(DropReason::NoTxBuffer);
        };
        let (mac, our_ip) = (self.mac, self.cfg.ip);
        let mtu = self.max_frame - ETHERNET_HEADER_LEN;
        let ident = self.ident.next();
        match icmp::echo_reply_frame(&mut buf, mac, our_ip, src_mac, ip, l4, ident, mtu) {
            Ok(Some(n)) => {
                buf.truncate(n);
                self.stats.icmp_echo_replies += 1;
                self.stats.icmp_echo_truncated += u64::from(n < full);
                self.push_tx(buf, false);
            }
            Ok(None) => {}
            Err(r) => self.stats.drop(r),
        }
    }

    /// The TCP segment `t`, which came in `frame`.
    fn on_tcp(&mut self, frame: &[u8], t: &TcpIn<'_>, checksum_verified: bool) {
        let mut seg = Segment::default();
        let pseudo = |len| t.pseudo(len);
        let payload = match Segment::parse_into(t.segment, pseudo, checksum_verified, &mut seg) {
            Ok(payload) => payload,
            Err(ParseError::Checksum) => return self.stats.drop(DropReason::BadTcpChecksum),
            Err(ParseError::Malformed) => return self.stats.drop(DropReason::BadTcpHeader),
        };
        self.stats.segments_in += 1;
        let key = FlowKey::new(t.src, seg.src_port, seg.dst_port, t.local);
        // One lookup for a live connection and a TIME-WAIT entry alike.
        let flow = self.flows.get(&key);
        if let Some(Flow::Conn(index)) = flow {
            return self.conn_input(index as usize, &seg, payload);
        }
        // No connection has a source no peer may have (none was let in): checked here,
        // off the path of established connections. IPv4's was checked with its header.
        if let Err(reason) = self.check_v6_source(t.src) {
            return self.stats.drop(reason);
        }
        if let Some(owner) = self.flow_owner(&key) {
            // A sibling's flow, steered here by a link we cannot predict: the owner holds
            // its TIME-WAIT entry and answers its SYN (see `owner`).
            if self.misdirected.len() < MAX_MISDIRECTED {
                self.stats.misdirected_forwarded += 1;
                self.misdirected.push((owner, frame.to_vec()));
            } else {
                self.stats.drop(DropReason::NoConnection);
            }
            return;
        }
        let mut iss_floor = None;
        let verdict = match flow {
            Some(Flow::TimeWait(slot)) => self.time_wait.on_segment(
                &mut self.flows,
                slot,
                &seg,
                self.now,
                self.cfg.tcp.time_wait,
                self.cfg.tcp.invalid_ack_interval,
            ),
            _ => None,
        };
        match verdict {
            None => {}
            Some(timewait::Verdict::Reply(tx)) => {
                // A restarted 2·MSL wait needs no new timer here: the entry's one timer
                // reschedules itself when it fires (see `run_timers`).
                return self.send_raw(ethernet::source(frame), key, &tx);
            }
            Some(timewait::Verdict::Drop) => return,
            Some(timewait::Verdict::Suppressed) => {
                self.stats.invalid_acks_suppressed += 1;
                return;
            }
            Some(timewait::Verdict::Reopen { iss_floor: floor }) => {
                self.stats.time_wait_reused += 1;
                iss_floor = Some(floor);
            }
        }
        if self.listeners.contains_key(&seg.dst_port) {
            return self.listen_input(ethernet::source(frame), key, &seg, payload, iss_floor);
        }
        self.stats.drop(if seg.flags.syn {
            DropReason::NoListener
        } else {
            DropReason::NoConnection
        });
        // On a shared link, a segment without a connection here may be another
        // engine's; only a SYN for a port no engine listens on is surely no one's.
        let no_ones = !self.cfg.shared_link
            || (seg.flags.syn
                && !seg.flags.ack
                && self
                    .link_listeners
                    .as_ref()
                    .is_some_and(|ports| ports.binary_search(&seg.dst_port).is_err()));
        if !seg.flags.rst && no_ones {
            self.send_rst_reply(ethernet::source(frame), key, &seg);
        }
    }

    /// RFC 9293 §3.10.7.1: a segment for no connection (on the flow `key`) gets a RST
    /// that the sender will accept.
    pub(super) fn send_rst_reply(&mut self, mac: MacAddr, key: FlowKey, seg: &Segment) {
        let tx = if seg.flags.ack {
            TxSegment {
                seq: seg.ack,
                rst: true,
                ..Default::default()
            }
        } else {
            TxSegment {
                seq: SeqNum(0),
                ack: Some(seg.seq + seg.seg_len()),
                rst: true,
                ..Default::default()
            }
        };
        self.stats.rsts_sent += 1;
        self.send_raw(mac, key, &tx);
    }
}
