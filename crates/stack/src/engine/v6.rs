//! The engine's side of IPv6: the receive path from the IPv6 header to TCP and ICMPv6,
//! Neighbor Discovery (answering solicitations for our addresses, resolving and probing
//! neighbours in the cache ARP uses), duplicate address detection of our own addresses, the
//! MLDv2 report that joins their solicited-node groups, echo, and Packet Too Big
//! lowering a connection's segment size. The wire formats live in [`crate::ipv6`] and
//! [`crate::icmpv6`].
//!
//! What is answered is what Linux answers, or less: echo requests to one of our
//! unicast addresses (not to a group: no amplification), solicitations for our
//! addresses, and the advertisement that defends an address another node probes for.
//! Router advertisements and redirects are not acted on (routes are configured). The
//! ICMPv6 errors of our own are Linux's for a host with no UDP socket: port
//! unreachable for UDP, and a parameter problem for a protocol we do not know (a
//! Hop-by-Hop header anywhere but first among them), for a Routing header with segments
//! left and for an option whose type asks for one, within a budget ([`ErrorBudget`]).

use std::net::{IpAddr, Ipv6Addr};

use super::input::TcpIn;
use super::Engine;
use crate::app::Handler;
use crate::arp::News;
use crate::drop_reason::DropReason;
use crate::ethernet::{self, EthernetProtocol};
use crate::icmpv6::{self, ErrorKind, ErrorOut, Icmpv6Error, Message};
use crate::io::{MacAddr, PacketIo, TxFrame};
use crate::ipv6::{self, Ipv6Error, Ipv6Header};
use crate::time::{Clock, Instant};

/// The all-nodes group, `ff02::1` (RFC 4291 §2.7.1).
const ALL_NODES: Ipv6Addr = Ipv6Addr::new(0xff02, 0, 0, 0, 0, 0, 0, 1);

/// The smallest MTU an IPv6 link may have (RFC 8200 §5): no Packet Too Big takes a
/// path below it (RFC 8201 §4).
const MIN_MTU: usize = 1280;

/// TCP's protocol number, as IPv6's Next Header.
const TCP: u8 = 6;

/// UDP's.
const UDP: u8 = 17;

/// The budget for ICMPv6 errors of our own: a token bucket of this many, refilled one
/// a millisecond (Linux's `icmp_msgs_burst` and `icmp_msgs_per_sec`), so a flood of
/// packets that each call for an error gets a thousand errors a second at most.
const ERROR_BURST: u32 = 50;

/// Tokens for ICMPv6 errors (see [`ERROR_BURST`]).
#[derive(Debug)]
pub(super) struct ErrorBudget {
    tokens: u32,
    /// When `tokens` was last refilled.
    at: Instant,
}

impl ErrorBudget {
    pub(super) fn new(now: Instant) -> ErrorBudget {
        ErrorBudget {
            tokens: ERROR_BURST,
            at: now,
        }
    }

    /// Take a token at `now`, if there is one.
    fn take(&mut self, now: Instant) -> bool {
        let ms = now.saturating_duration_since(self.at).as_millis();
        if ms > 0 {
            let refill = u32::try_from(ms).unwrap_or(u32::MAX);
            self.tokens = self.tokens.saturating_add(refill).min(ERROR_BURST);
            self.at = now;
        }
        if self.tokens == 0 {
            return false;
        }
        self.tokens -= 1;
        true
    }
}

impl<D: PacketIo, H: Handler, C: Clock> Engine<D, H, C> {
    /// Duplicate address detection's probes, and the report that joins our groups when
    /// they changed. Cheap when nothing is due (one comparison).
    pub(super) fn poll_v6(&mut self) {
        if self.now < self.v6_due {
            return;
        }
        if std::mem::take(&mut self.mld_pending) {
            self.send_mld_report();
        }
        let mut probes = std::mem::take(&mut self.dad_probes);
        self.addrs.poll_dad(self.now, &mut probes);
        for target in probes.drain(..) {
            // From the unspecified address to the target's solicited-node group, with
            // no link-layer option (RFC 4862 §5.4.2).
            let group = icmpv6::solicited_node(target);
            let icmp = icmpv6::neighbor_solicitation(Ipv6Addr::UNSPECIFIED, group, target, None);
            let sent = self.send_icmpv6(
                icmpv6::group_mac(group),
                Ipv6Addr::UNSPECIFIED,
                group,
                &icmp,
            );
            self.stats.neighbor_solicitations_sent += u64::from(sent);
        }
        self.dad_probes = probes;
        self.v6_due = self
            .addrs
            .next_dad_deadline()
            .unwrap_or(Instant::FAR_FUTURE);
    }

    /// When [`poll_v6`](Self::poll_v6) next has work.
    pub(super) fn v6_deadline(&self) -> Option<Instant> {
        (self.v6_due != Instant::FAR_FUTURE).then_some(self.v6_due)
    }

    /// `frame` is the whole frame, which carries the IPv6 `packet`; its Ethernet header
    /// has been parsed and admitted. A TCP segment for us comes back (see `on_frame`).
    // Inlined: a TCP segment, the common packet, comes back to `on_frame` at little
    // cost; the rest of IPv6 is out of line (`on_ipv6_other`).
    #[inline]
    pub(super) fn on_ipv6<'a>(&mut self, frame: &[u8], packet: &'a [u8]) -> Option<TcpIn<'a>> {
        let ip = match ipv6::parse(packet) {
            Ok(ip) => ip,
            Err(e) => {
                self.on_refused_ipv6(frame, packet, e);
                return None;
            }
        };
        if ip.protocol == TCP {
            // To one of our usable addresses (not to a group, RFC 9293 §3.9.1, nor to an
            // address not yet ours). The source is checked where a segment finds no
            // connection (`check_v6_source`).
            let Some(local) = self.addrs.usable_v6(&ip.dst()) else {
                self.stats.drop(DropReason::NotOurAddress);
                return None;
            };
            return Some(TcpIn {
                src: IpAddr::V6(ip.src()),
                addresses: &packet[ipv6::ADDRESSES],
                local,
                segment: ip.upper,
            });
        }
        self.on_ipv6_other(frame, packet, &ip);
        None
    }

    /// An IPv6 `packet` (in `frame`) that [`ipv6::parse`] refused with `e`: counted,
    /// and told to its sender where RFC 8200 asks for a Parameter Problem (§4.2 an
    /// option whose type says so, §4.4 a Routing header with segments left, §4 a
    /// Hop-by-Hop header anywhere but first), as Linux tells.
    #[cold]
    #[inline(never)]
    fn on_refused_ipv6(&mut self, frame: &[u8], packet: &[u8], e: Ipv6Error) {
        self.stats.drop(drop_reason(e));
        let pointer = |at: usize| u32::try_from(at).unwrap_or(u32::MAX);
        let error = match e {
            Ipv6Error::UnknownOption { at, report: true } => ErrorOut::UnknownOption {
                pointer: pointer(at),
            },
            Ipv6Error::Routing { at } => ErrorOut::ErroneousField {
                pointer: pointer(at),
            },
            Ipv6Error::MisplacedHopByHop { at } => ErrorOut::UnknownNextHeader {
                pointer: pointer(at),
            },
            _ => return,
        };
        let Some((src, dst, invoking)) = ipv6::refused(packet) else {
            return;
        };
        if let Ok(local) = self.admit_v6(src, dst, false) {
            self.send_error(frame, invoking, src, local, error);
        }
    }

    /// An IPv6 `packet` that is not TCP, with its header `ip`.
    #[inline(never)]
    fn on_ipv6_other(&mut self, frame: &[u8], packet: &[u8], ip: &Ipv6Header<'_>) {
        let icmp = ip.protocol == icmpv6::NEXT_HEADER;
        let local = match self.admit_v6(ip.src(), ip.dst(), icmp) {
            Ok(local) => local,
            Err(reason) => return self.stats.drop(reason),
        };
        if icmp {
            return self.on_icmpv6(frame, ip, local);
        }
        self.stats.drop(DropReason::UnknownProtocol);
        // Told, as Linux tells: no UDP socket here, and no other protocol.
        let error = if ip.protocol == UDP {
            ErrorOut::PortUnreachable
        } else {
            ErrorOut::UnknownNextHeader {
                pointer: ip.protocol_at as u32,
            }
        };
        let invoking = &packet[..(ip.upper_offset + ip.upper.len()).min(packet.len())];
        self.send_error(frame, invoking, ip.src(), local, error);
    }

    /// Send the ICMPv6 error `error` about `invoking` (the packet as received, in
    /// `frame`, from `src` to our address `local`), within the engine's budget. Never
    /// about a packet to a group or sent to a group MAC, nor from an address that is not
    /// one peer's (RFC 4443 §2.4 (e)): `admit_v6` let in only the unspecified address as
    /// such a source.
    fn send_error(
        &mut self,
        frame: &[u8],
        invoking: &[u8],
        src: Ipv6Addr,
        local: Option<u8>,
        error: ErrorOut,
    ) {
        let to_us = frame.get(..6) == Some(&self.mac.0[..]);
        let Some(i) = local.filter(|&i| to_us && self.addrs.get(i).usable()) else {
            return;
        };
        if src.is_unspecified() {
            return;
        }
        if !self.error_budget.take(self.now) {
            self.stats.icmpv6_errors_suppressed += 1;
            return;
        }
        let IpAddr::V6(own) = self.addrs.get(i).ip else {
            return;
        };
        let room = self.max_frame - ethernet::HEADER_LEN - ipv6::HEADER_LEN;
        let message = icmpv6::error(error, invoking, own, src, room);
        let hops = ipv6::DEFAULT_HOP_LIMIT;
        if self.send_ipv6(ethernet::source(frame), own, src, &[], &message, hops) {
            self.stats.icmpv6_errors_sent += 1;
        }
    }

    /// Whether a packet from `src` to `dst` (ICMPv6 when `icmp`) is for us and from a
    /// possible peer; which of our addresses it is to (`None`: a group we joined).
    fn admit_v6(&self, src: Ipv6Addr, dst: Ipv6Addr, icmp: bool) -> Result<Option<u8>, DropReason> {
        // For us: one of our addresses (tentative ones take Neighbor Discovery only), or
        // a group we joined.
        let local = self.addrs.find_v6(dst);
        if local.is_none() && !self.joined(dst) {
            return Err(DropReason::NotOurAddress);
        }
        // The unspecified source is a node probing for a duplicate, which only sends
        // solicitations; ICMPv6 checks that rule.
        if src.is_unspecified() && icmp {
            return Ok(local);
        }
        if ipv6::check_source(src, Ipv6Addr::UNSPECIFIED).is_err() {
            return Err(DropReason::MartianSource);
        }
        // Our own address as the source, unless it is still tentative: then another
        // node holds it, and says so from it.
        if let Some(i) = self.addrs.find_v6(src) {
            if self.addrs.get(i).usable() {
                return Err(DropReason::OwnSourceAddress);
            }
        }
        Ok(local)
    }

    /// Whether a TCP segment from `src` that found no connection may be a peer's: for
    /// IPv6, not a martian and none of our usable addresses (IPv4's source was checked
    /// with its header).
    #[inline]
    pub(super) fn check_v6_source(&self, src: IpAddr) -> Result<(), DropReason> {
        let IpAddr::V6(src) = src else {
            return Ok(());
        };
        if ipv6::check_source(src, Ipv6Addr::UNSPECIFIED).is_err() {
            Err(DropReason::MartianSource)
        } else if self.addrs.usable_v6(&src).is_some() {
            Err(DropReason::OwnSourceAddress)
        } else {
            Ok(())
        }
    }

    /// Whether we joined `group`: all-nodes, or the solicited-node group of one of our
    /// addresses.
    fn joined(&self, group: Ipv6Addr) -> bool {
        group == ALL_NODES
            || self
                .addrs
                .v6()
                .any(|(_, _, ip)| icmpv6::solicited_node(ip) == group)
    }

    fn on_icmpv6(&mut self, frame: &[u8], ip: &Ipv6Header<'_>, local: Option<u8>) {
        let l4 = ip.upper;
        let msg = match icmpv6::parse(l4, ip.src(), ip.dst(), ip.hop_limit()) {
            Ok(m) => m,
            Err(Icmpv6Error::Checksum) => return self.stats.drop(DropReason::BadIcmpChecksum),
            Err(Icmpv6Error::Truncated) => return self.stats.drop(DropReason::BadIcmp),
            Err(Icmpv6Error::BadNeighborDiscovery) => {
                return self.stats.drop(DropReason::BadNeighborDiscovery)
            }
        };
        if ip.src().is_unspecified() && !matches!(msg, Message::NeighborSolicitation { .. }) {
            return self.stats.drop(DropReason::MartianSource);
        }
        let src_mac = ethernet::source(frame);
        match msg {
            Message::EchoRequest { ident, seq, data } => {
                let Some(i) = local.filter(|&i| self.addrs.get(i).usable()) else {
                    // To a group, or to an address not yet ours: no answer.
                    return;
                };
                let IpAddr::V6(own) = self.addrs.get(i).ip else {
                    return;
                };
                // A request longer than the MTU allows gets a reply cut to it.
                let room = self.max_frame - ethernet::HEADER_LEN - ipv6::HEADER_LEN;
                let reply = icmpv6::echo_reply(ident, seq, data, own, ip.src(), room);
                self.stats.icmp_echo_truncated += u64::from(reply.len() < l4.len());
                let hops = ipv6::DEFAULT_HOP_LIMIT;
                if self.send_ipv6(src_mac, own, ip.src(), &[], &reply, hops) {
                    self.stats.icmp_echo_replies += 1;
                }
            }
            Message::NeighborSolicitation { target, source_mac } => {
                self.on_solicitation(ip, src_mac, target, source_mac)
            }
            Message::NeighborAdvertisement {
                target,
                solicited,
                override_,
                target_mac,
                ..
            } => self.on_advertisement(
                target,
                News::advertisement(target_mac, solicited, override_),
            ),
            Message::Error {
                kind: ErrorKind::TooBig(mtu),
                invoking,
            } => self.on_packet_too_big(frame, mtu, invoking),
            // Other errors are soft (RFC 1122 §4.2.3.9 as RFC 4443 keeps it): TCP's
            // own timers decide. Router advertisements, MLD and the rest: nothing a
            // host of ours answers.
            Message::Error { .. } | Message::Other(_) => {}
        }
    }

    /// A Neighbor Solicitation for `target` (RFC 4861 §7.2.3, RFC 4862 §5.4.3).
    fn on_solicitation(
        &mut self,
        ip: &Ipv6Header<'_>,
        src_mac: MacAddr,
        target: Ipv6Addr,
        source_mac: Option<MacAddr>,
    ) {
        let Some(i) = self.addrs.find_v6(target) else {
            // Not ours to answer (we proxy for nobody).
            return self.stats.drop(DropReason::BadNeighborDiscovery);
        };
        if ip.src().is_unspecified() {
            // Another node probing for `target`: a duplicate of a tentative address of
            // ours, or a claim on one we hold, which we defend (to all nodes: the
            // prober has no address to be answered at).
            if !self.addrs.get(i).usable() {
                return self.on_duplicate(target);
            }
            return self.send_advertisement(target, ALL_NODES, icmpv6::group_mac(ALL_NODES), false);
        }
        if !self.addrs.get(i).usable() {
            // A tentative address is not answered for (RFC 4862 §5.4.3).
            return;
        }
        // The asker wants our answer and will talk to us: its mapping is worth keeping
        // (RFC 4861 §7.2.3: a new entry, or a changed one, is STALE).
        if let Some(mac) = source_mac {
            let ready = self.arp.update(ip.src(), News::unsolicited(mac), self.now);
            self.after_neighbour_news(ready);
        }
        let to_mac = source_mac.unwrap_or(src_mac);
        self.send_advertisement(target, ip.src(), to_mac, true);
    }

    /// A Neighbor Advertisement for `target`, saying `news` (RFC 4861 §7.2.5): it
    /// updates a neighbour we hold or are resolving, and creates no entry.
    fn on_advertisement(&mut self, target: Ipv6Addr, news: News) {
        if let Some(i) = self.addrs.find_v6(target) {
            if self.addrs.get(i).usable() {
                return self.stats.drop(DropReason::AddressConflict);
            }
            return self.on_duplicate(target);
        }
        let ready = self.arp.update(target, news, self.now);
        self.after_neighbour_news(ready);
    }

    /// A tentative address of ours is another node's.
    fn on_duplicate(&mut self, target: Ipv6Addr) {
        if !self.addrs.conflict(target, self.now) {
            return;
        }
        self.stats.duplicate_addresses += 1;
        if self.addrs.find_v6(target).is_none() {
            // A link-local address was drawn again: join its group, probe it.
            self.mld_pending = true;
            self.v6_due = self.now;
        }
    }

    /// Advertise our `target` to `dst` at `dst_mac`; `solicited` answers a
    /// solicitation.
    fn send_advertisement(
        &mut self,
        target: Ipv6Addr,
        dst: Ipv6Addr,
        dst_mac: MacAddr,
        solicited: bool,
    ) {
        let icmp = icmpv6::neighbor_advertisement(target, dst, target, self.mac, solicited);
        let sent = self.send_icmpv6(dst_mac, target, dst, &icmp);
        self.stats.neighbor_advertisements_sent += u64::from(sent);
    }

    /// Resolve `target`: a solicitation to its solicited-node group; or, `unicast`,
    /// probe it at the MAC cached for it, to its own address (RFC 4861 §7.3.3). From
    /// our address that would talk to it, with our MAC. Whether it was sent.
    pub(super) fn send_neighbor_solicitation(
        &mut self,
        target: Ipv6Addr,
        unicast: Option<MacAddr>,
    ) -> bool {
        let Some(i) = self.addrs.source_for(IpAddr::V6(target)) else {
            return false;
        };
        let IpAddr::V6(own) = self.addrs.get(i).ip else {
            return false;
        };
        let (dst, dst_mac) = match unicast {
            Some(mac) => (target, mac),
            None => {
                let group = icmpv6::solicited_node(target);
                (group, icmpv6::group_mac(group))
            }
        };
        let icmp = icmpv6::neighbor_solicitation(own, dst, target, Some(self.mac));
        let sent = self.send_icmpv6(dst_mac, own, dst, &icmp);
        self.stats.neighbor_solicitations_sent += u64::from(sent);
        sent
    }

    /// Join all-nodes and the solicited-node groups of our addresses (an MLDv2 report
    /// to the MLD routers, RFC 3810 §5.2), so that switches that snoop MLD, and NICs
    /// that filter multicast, deliver them. From our link-local address once it is
    /// ours, from the unspecified address before (RFC 3590 §4).
    fn send_mld_report(&mut self) {
        let mut groups: Vec<Ipv6Addr> = self
            .addrs
            .v6()
            .map(|(_, _, ip)| icmpv6::solicited_node(ip))
            .collect();
        groups.sort_unstable();
        groups.dedup();
        let own = self
            .addrs
            .v6()
            .find(|(_, a, ip)| a.usable() && ip.is_unicast_link_local())
            .map_or(Ipv6Addr::UNSPECIFIED, |(_, _, ip)| ip);
        let icmp = icmpv6::mld_report(own, &groups);
        let dst = icmpv6::MLD_ROUTERS;
        self.send_ipv6(
            icmpv6::group_mac(dst),
            own,
            dst,
            &icmpv6::MLD_HOP_BY_HOP,
            &icmp,
            1,
        );
    }

    /// A Neighbor Discovery message of ours, with the hop limit (255) the receiver
    /// checks. Whether it was sent.
    fn send_icmpv6(&mut self, dst_mac: MacAddr, src: Ipv6Addr, dst: Ipv6Addr, icmp: &[u8]) -> bool {
        self.send_ipv6(dst_mac, src, dst, &[], icmp, icmpv6::ND_HOP_LIMIT)
    }

    /// One IPv6 packet: the fixed header (its Next Header the first of `extension`, or
    /// ICMPv6), the `extension` headers, then the ICMPv6 message `icmp`.
    fn send_ipv6(
        &mut self,
        dst_mac: MacAddr,
        src: Ipv6Addr,
        dst: Ipv6Addr,
        extension: &[u8],
        icmp: &[u8],
        hop_limit: u8,
    ) -> bool {
        // The first extension header is Hop-by-Hop Options (0): its type is the
        // fixed header's Next Header.
        let next = if extension.is_empty() {
            icmpv6::NEXT_HEADER
        } else {
            0
        };
        let payload = extension.len() + icmp.len();
        let Some(header) = ipv6::header(src, dst, next, payload, hop_limit) else {
            return false;
        };
        let len = ethernet::HEADER_LEN + ipv6::HEADER_LEN + payload;
        let Some(mut buf) = self.dev.alloc_tx(len) else {
            self.stats.drop(DropReason::NoTxBuffer);
            return false;
        };
        ethernet::write_header(&mut buf, self.mac, dst_mac, EthernetProtocol::Ipv6);
        let at = ethernet::HEADER_LEN;
        buf[at..at + ipv6::HEADER_LEN].copy_from_slice(&header);
        let at = at + ipv6::HEADER_LEN;
        buf[at..at + extension.len()].copy_from_slice(extension);
        buf[at + extension.len()..len].copy_from_slice(icmp);
        buf.truncate(len);
        self.push_tx(buf, false);
        true
    }

    /// A Packet Too Big about a TCP segment of ours (`invoking`, from its IPv6 header
    /// on): the connection's segment size goes down to the path's MTU, never below
    /// IPv6's minimum (RFC 8201 §4), if the segment is one it sent and the peer has not
    /// acknowledged ([`Tcb::path_mtu`](crate::tcp::tcb::Tcb::path_mtu)). On a link
    /// whose steering the stack cannot predict, the message (in `frame`) may land on any
    /// worker, as it comes from a router, not the peer: one about a flow a sibling owns
    /// goes to that sibling, as the flow's segments would (see [`owner`](super::owner)).
    fn on_packet_too_big(&mut self, frame: &[u8], mtu: u32, invoking: &[u8]) {
        // The fixed header and TCP's ports and sequence number: all the invoking
        // packet must hold (RFC 4443 §2.4 asks for as much as fits).
        let (Some(header), Some(tcp)) = (
            invoking.get(..ipv6::HEADER_LEN),
            invoking.get(ipv6::HEADER_LEN..ipv6::HEADER_LEN + 8),
        ) else {
            return self.stats.drop(DropReason::BadIcmp);
        };
        if header[6] != TCP {
            return;
        }
        let addr = |at: usize| -> Ipv6Addr {
            let octets: [u8; 16] = header[at..at + 16].try_into().unwrap_or([0; 16]);
            Ipv6Addr::from(octets)
        };
        let (ours, peer) = (addr(8), addr(24));
        let Some(local) = self.addrs.find_v6(ours) else {
            return self.stats.drop(DropReason::BadIcmp);
        };
        let key = super::FlowKey::new(
            IpAddr::V6(peer),
            u16::from_be_bytes([tcp[2], tcp[3]]),
            u16::from_be_bytes([tcp[0], tcp[1]]),
            local,
        );
        let Some(index) = self.flows.conn(&key) else {
            if let Some(owner) = self.flow_owner(&key) {
                if self.misdirected.len() < super::input::MAX_MISDIRECTED {
                    self.stats.misdirected_forwarded += 1;
                    self.misdirected.push((owner, frame.to_vec()));
                }
            }
            return;
        };
        let seq = crate::tcp::seq::SeqNum(u32::from_be_bytes([tcp[4], tcp[5], tcp[6], tcp[7]]));
        let mtu = usize::try_from(mtu).unwrap_or(usize::MAX).max(MIN_MTU);
        if self.app[index].tcb.path_mtu(mtu, ipv6::HEADER_LEN, seq) {
            self.stats.path_mtu_lowered += 1;
            self.mark_dirty(index);
        }
    }

    /// Whether `ip` may be a peer's address: what input would not drop as a martian
    /// source, and for IPv6 no group either.
    pub(super) fn may_be_peer(&self, ip: IpAddr) -> bool {
        match ip {
            IpAddr::V4(v4) => self.local.check_source(v4).is_ok(),
            IpAddr::V6(v6) => {
                ipv6::check_source(v6, Ipv6Addr::UNSPECIFIED).is_ok()
                    && ipv6::tcp_destination(v6)
                    && self.addrs.find_v6(v6).is_none()
            }
        }
    }
}

/// What an IPv6 header the parser refused is counted as.
fn drop_reason(e: Ipv6Error) -> DropReason {
    match e {
        Ipv6Error::Truncated => DropReason::BadIpLength,
        Ipv6Error::Version => DropReason::BadIpHeader,
        Ipv6Error::Fragment => DropReason::Fragment,
        Ipv6Error::Routing { .. } => DropReason::RoutingHeader,
        Ipv6Error::Jumbogram
        | Ipv6Error::ExtensionChain
        | Ipv6Error::MisplacedHopByHop { .. }
        | Ipv6Error::Options
        | Ipv6Error::UnknownOption { .. }
        | Ipv6Error::NoUpperLayer => DropReason::BadExtensionHeaders,
    }
}
