//! ICMPv6 and Neighbor Discovery messages ([`icmpv6::parse`]) between arbitrary
//! addresses with arbitrary hop limits, and the stack's writers
//! ([`icmpv6::echo_reply`], [`icmpv6::neighbor_solicitation`],
//! [`icmpv6::neighbor_advertisement`], [`icmpv6::mld_report`], [`icmpv6::error`])
//! round-tripping through it and through smoltcp's reader.
//!
//! The input is a flags byte ([`flags`]), a hop limit unless the flags say 255, the
//! source and destination addresses (each 16 bytes of the input, or one the flags
//! name), then the message, its checksum written first when the flags say so.
//!
//! Checked, for the message as it came: reading it never panics; its checksum is
//! refused exactly when a plain sum disagrees; what reads is what its bytes say
//! (type, code, fields, RFC 4861's rules for Neighbor Discovery, an error's invoking
//! packet); and what reads, written again by the stack's writers, reads the same (an
//! Echo Request's reply carries its fields and data; a solicitation comes back as it
//! came; an advertisement as ours would say it). Then the writers, given the input's
//! addresses, hop limit and bytes: each message reads back as what was written, by our
//! reader and by smoltcp's, with its checksum right, or is refused exactly where RFC
//! 4861 says.

use std::net::Ipv6Addr;

use rusty_stack::internals::icmpv6::{
    self, echo_reply, error, group_mac, mld_report, neighbor_advertisement, neighbor_solicitation,
    solicited_node, ErrorKind, ErrorOut, Icmpv6Error, Message, MLD_ROUTERS, ND_HOP_LIMIT,
};
use rusty_stack::io::MacAddr;
use smoltcp::phy::ChecksumCapabilities;
use smoltcp::wire::{
    Icmpv6DstUnreachable, Icmpv6Packet, Icmpv6Repr, MldAddressRecord, MldRecordType, MldRepr,
    NdiscNeighborFlags, NdiscRepr,
};

use crate::input::Input;
use crate::wire6::icmpv6_checksum_ok;

/// The flags byte.
pub(crate) mod flags {
    /// Bits 0–1: the source (0: from the input, then `::`, `fe80::1`, `fd00::1`).
    pub(crate) const SRC: u8 = 3;
    /// Bits 2–3: the destination (0: from the input, then the solicited-node group of
    /// the message's target, `ff02::1`, `fd00::2`).
    pub(crate) const DST: u8 = 3 << 2;
    /// Write the message's checksum.
    pub(crate) const SEAL: u8 = 16;
    /// Hop limit 255, no hop-limit byte.
    pub(crate) const ND_HOPS: u8 = 32;
    /// The writers' solicitation carries a link-layer address.
    pub(crate) const WITH_MAC: u8 = 64;
    /// The writers' advertisement is solicited.
    pub(crate) const SOLICITED: u8 = 128;
}

const PEER_LL: Ipv6Addr = Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0, 0, 1);
const PEER6: Ipv6Addr = Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 1);
const HOST6: Ipv6Addr = Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 2);
const ALL_NODES: Ipv6Addr = Ipv6Addr::new(0xff02, 0, 0, 0, 0, 0, 0, 1);

fn address(bytes: &[u8]) -> Ipv6Addr {
    let mut o = [0u8; 16];
    o[..bytes.len().min(16)].copy_from_slice(&bytes[..bytes.len().min(16)]);
    Ipv6Addr::from(o)
}

/// Whether a neighbour may own `mac` (not a group, not all zeros).
fn neighbor_mac(mac: MacAddr) -> bool {
    mac.is_unicast() && mac != MacAddr([0; 6])
}

/// Run `data` through the reader and the writers. Panics on a bug.
pub fn icmpv6(data: &[u8]) {
    let mut input = Input::new(data);
    let f = input.u8();
    let hops = if f & flags::ND_HOPS != 0 {
        ND_HOP_LIMIT
    } else {
        input.u8()
    };
    let src = match f & flags::SRC {
        0 => address(input.bytes(16)),
        1 => Ipv6Addr::UNSPECIFIED,
        2 => PEER_LL,
        _ => PEER6,
    };
    let dst_bytes = if f & flags::DST == 0 {
        input.bytes(16)
    } else {
        &[]
    };
    let mut msg = input.rest().to_vec();
    let target = address(msg.get(8..24).unwrap_or(&[]));
    let dst = match (f & flags::DST) >> 2 {
        0 => address(dst_bytes),
        1 => solicited_node(target),
        2 => ALL_NODES,
        _ => HOST6,
    };
    if f & flags::SEAL != 0 && msg.len() >= 4 {
        Icmpv6Packet::new_unchecked(&mut msg[..]).fill_checksum(&src, &dst);
    }
    check_read(&msg, src, dst, hops);
    check_groups(target);
    let mac =
        MacAddr::from_slice(msg.get(24..30).unwrap_or(&[2, 0, 0, 0, 0, 1])).expect("six bytes");
    let writers = Writers { src, dst, hops };
    writers.solicitation(target, (f & flags::WITH_MAC != 0).then_some(mac));
    writers.advertisement(target, mac, f & flags::SOLICITED != 0);
    writers.echo_reply(&msg);
    writers.mld_report(&msg);
    writers.error(&msg);
}

/// What [`icmpv6::parse`] makes of `msg` from `src` to `dst` with `hops` agrees with
/// its bytes and with smoltcp's checksum, and writes again the same.
fn check_read(msg: &[u8], src: Ipv6Addr, dst: Ipv6Addr, hops: u8) {
    let read = icmpv6::parse(msg, src, dst, hops);
    if msg.len() < 8 {
        assert_eq!(read, Err(Icmpv6Error::Truncated));
        return;
    }
    let summed = icmpv6_checksum_ok(msg, src, dst);
    assert_eq!(read == Err(Icmpv6Error::Checksum), !summed, "checksum");
    let (kind, code) = (msg[0], msg[1]);
    let word = u32::from_be_bytes([msg[4], msg[5], msg[6], msg[7]]);
    let nd = kind == 135 || kind == 136;
    let m = match read {
        Ok(m) => m,
        Err(Icmpv6Error::Checksum) => return,
        Err(Icmpv6Error::Truncated) => return assert!(nd && msg.len() < 24, "truncated"),
        Err(Icmpv6Error::BadNeighborDiscovery) => return assert!(nd, "not NDP"),
    };
    match m {
        Message::EchoRequest { ident, seq, data } => {
            assert_eq!((kind, code), (128, 0));
            assert_eq!((u32::from(ident) << 16) | u32::from(seq), word);
            assert_eq!(data, &msg[8..]);
            let reply = echo_reply(ident, seq, data, dst, src, usize::MAX);
            assert_eq!((reply[0], reply[1], &reply[4..]), (129, 0, &msg[4..]));
            assert_eq!(
                icmpv6::parse(&reply, dst, src, hops),
                Ok(Message::Other(129))
            );
        }
        Message::NeighborSolicitation { target, source_mac } => {
            assert_eq!((kind, code, hops), (135, 0, ND_HOP_LIMIT));
            assert_eq!(target, address(&msg[8..24]));
            assert!(!target.is_multicast());
            assert!(source_mac.is_none_or(neighbor_mac));
            if src.is_unspecified() {
                assert!(source_mac.is_none() && dst == solicited_node(target), "DAD");
            }
            let again = neighbor_solicitation(src, dst, target, source_mac);
            assert_eq!(icmpv6::parse(&again, src, dst, hops), Ok(m));
        }
        Message::NeighborAdvertisement {
            target,
            router,
            solicited,
            override_,
            target_mac,
        } => {
            assert_eq!((kind, code, hops), (136, 0, ND_HOP_LIMIT));
            assert_eq!(target, address(&msg[8..24]));
            assert!(!target.is_multicast());
            assert_eq!(
                (router, solicited, override_),
                (msg[4] & 0x80 != 0, msg[4] & 0x40 != 0, msg[4] & 0x20 != 0)
            );
            assert!(!(dst.is_multicast() && solicited), "solicited to a group");
            assert!(target_mac.is_none_or(neighbor_mac));
            // As ours says it: override, not a router, with a link-layer address.
            let mac = target_mac.unwrap_or(MacAddr([2, 0, 0, 0, 0, 1]));
            let again = neighbor_advertisement(src, dst, target, mac, solicited);
            let ours = Message::NeighborAdvertisement {
                target,
                router: false,
                solicited,
                override_: true,
                target_mac: Some(mac),
            };
            assert_eq!(icmpv6::parse(&again, src, dst, hops), Ok(ours));
        }
        Message::Error {
            kind: error,
            invoking,
        } => {
            let want = match kind {
                1 => ErrorKind::Unreachable(code),
                2 => ErrorKind::TooBig(word),
                3 => ErrorKind::TimeExceeded(code),
                4 => ErrorKind::ParameterProblem(code, word),
                other => panic!("type {other} read as an error"),
            };
            assert_eq!(error, want);
            assert_eq!(invoking, &msg[8..]);
        }
        Message::Other(t) => {
            assert_eq!(t, kind);
            assert!(!(1..=4).contains(&t) && !nd && (t, code) != (128, 0), "{t}");
        }
    }
}

/// The solicited-node group of `target` and its MAC are what RFC 4291 §2.7.1 and
/// RFC 2464 §7 say.
fn check_groups(target: Ipv6Addr) {
    let group = solicited_node(target);
    let (g, t) = (group.octets(), target.octets());
    assert_eq!(g[..13], [0xff, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0xff]);
    assert_eq!(g[13..], t[13..]);
    assert_eq!(
        group_mac(group),
        MacAddr([0x33, 0x33, 0xff, t[13], t[14], t[15]])
    );
}

/// The writers, given the input's addresses and hop limit.
struct Writers {
    src: Ipv6Addr,
    dst: Ipv6Addr,
    hops: u8,
}

impl Writers {
    /// `msg` as smoltcp reads it, from `src` to `dst`.
    fn read<'m>(&self, msg: &'m [u8], dst: Ipv6Addr) -> Icmpv6Repr<'m> {
        assert!(
            icmpv6_checksum_ok(msg, self.src, dst),
            "checksum written wrong"
        );
        let packet = Icmpv6Packet::new_checked(msg).expect("a whole header written");
        Icmpv6Repr::parse(&self.src, &dst, &packet, &ChecksumCapabilities::default())
            .unwrap_or_else(|e| panic!("smoltcp refuses what we wrote: {e:?} {msg:02x?}"))
    }

    /// A solicitation from `src` to `dst` for `target`: refused exactly when RFC 4861
    /// §7.1.1 refuses it, read back as written otherwise.
    fn solicitation(&self, target: Ipv6Addr, mac: Option<MacAddr>) {
        let (src, dst) = (self.src, self.dst);
        let msg = neighbor_solicitation(src, dst, target, mac);
        let forged = self.hops != ND_HOP_LIMIT
            || target.is_multicast()
            || !mac.is_none_or(neighbor_mac)
            || (src.is_unspecified() && (mac.is_some() || dst != solicited_node(target)));
        let want = if forged {
            Err(Icmpv6Error::BadNeighborDiscovery)
        } else {
            Ok(Message::NeighborSolicitation {
                target,
                source_mac: mac,
            })
        };
        assert_eq!(icmpv6::parse(&msg, src, dst, self.hops), want);
        let Icmpv6Repr::Ndisc(NdiscRepr::NeighborSolicit {
            target_addr,
            lladdr,
        }) = self.read(&msg, dst)
        else {
            panic!("not a solicitation");
        };
        assert_eq!(target_addr, target);
        assert_eq!(
            lladdr.map(|l| l.as_bytes().to_vec()),
            mac.map(|m| m.0.to_vec())
        );
    }

    /// An advertisement of ours for `target`: refused exactly when RFC 4861 §7.1.2
    /// refuses it, read back as written otherwise.
    fn advertisement(&self, target: Ipv6Addr, mac: MacAddr, solicited: bool) {
        let (src, dst) = (self.src, self.dst);
        let msg = neighbor_advertisement(src, dst, target, mac, solicited);
        let forged = self.hops != ND_HOP_LIMIT
            || target.is_multicast()
            || !neighbor_mac(mac)
            || (dst.is_multicast() && solicited);
        let want = if forged {
            Err(Icmpv6Error::BadNeighborDiscovery)
        } else {
            Ok(Message::NeighborAdvertisement {
                target,
                router: false,
                solicited,
                override_: true,
                target_mac: Some(mac),
            })
        };
        assert_eq!(icmpv6::parse(&msg, src, dst, self.hops), want);
        let Icmpv6Repr::Ndisc(NdiscRepr::NeighborAdvert {
            flags,
            target_addr,
            lladdr,
        }) = self.read(&msg, dst)
        else {
            panic!("not an advertisement");
        };
        let mut want_flags = NdiscNeighborFlags::OVERRIDE;
        want_flags.set(NdiscNeighborFlags::SOLICITED, solicited);
        assert_eq!((flags, target_addr), (want_flags, target));
        assert_eq!(lladdr.map(|l| l.as_bytes().to_vec()), Some(mac.0.to_vec()));
    }

    /// The reply to an Echo Request carrying `data`, cut to a room of eight bytes per
    /// unit of the hop limit (RFC 4443 §4.2 lets a reply be cut to the MTU).
    fn echo_reply(&self, data: &[u8]) {
        let ident = u16::from_be_bytes([self.hops, 7]);
        let room = usize::from(self.hops) * 8;
        let reply = echo_reply(ident, 9, data, self.src, self.dst, room);
        let keep = data.len().min(room.saturating_sub(8));
        assert_eq!(reply.len(), 8 + keep);
        let read = icmpv6::parse(&reply, self.src, self.dst, self.hops);
        assert_eq!(read, Ok(Message::Other(129)));
        assert!(icmpv6_checksum_ok(&reply, self.src, self.dst));
        let packet = Icmpv6Packet::new_checked(&reply[..]).expect("eight bytes");
        let caps = ChecksumCapabilities::default();
        match Icmpv6Repr::parse(&self.src, &self.dst, &packet, &caps) {
            Ok(Icmpv6Repr::EchoReply {
                ident: i,
                seq_no: 9,
                data: d,
            }) => assert!(i == ident && d == &data[..keep]),
            other => panic!("echo reply read as {other:?}"),
        }
    }

    /// An MLDv2 report from `src` joining the groups `bytes` holds, 16 bytes each, up
    /// to 64: every record as RFC 3810 §5.2 has it, read back by smoltcp.
    fn mld_report(&self, bytes: &[u8]) {
        let groups: Vec<Ipv6Addr> = bytes.chunks_exact(16).take(64).map(address).collect();
        let report = mld_report(self.src, &groups);
        assert_eq!(report.len(), 8 + 20 * groups.len());
        let read = icmpv6::parse(&report, self.src, MLD_ROUTERS, self.hops);
        assert_eq!(read, Ok(Message::Other(143)));
        assert!(icmpv6_checksum_ok(&report, self.src, MLD_ROUTERS));
        let packet = Icmpv6Packet::new_checked(&report[..]).expect("eight bytes");
        let caps = ChecksumCapabilities::default();
        let repr = Icmpv6Repr::parse(&self.src, &MLD_ROUTERS, &packet, &caps);
        let Ok(Icmpv6Repr::Mld(MldRepr::Report {
            nr_mcast_addr_rcrds,
            data,
        })) = repr
        else {
            panic!("report read as {repr:?}");
        };
        assert_eq!(usize::from(nr_mcast_addr_rcrds), groups.len());
        for (record, group) in data.chunks(20).zip(&groups) {
            let r = MldAddressRecord::new_checked(record).expect("a whole record");
            assert_eq!(r.record_type(), MldRecordType::ChangeToExclude);
            assert_eq!(
                (r.aux_data_len(), r.num_srcs(), r.mcast_addr()),
                (0, 0, *group)
            );
        }
    }

    /// The errors a host of ours sends, about `invoking` (the input's bytes, as a
    /// packet it received), in a room of eight bytes per unit of the hop limit: each
    /// reads back with its kind and as much of the invoking packet as fits in the room
    /// and in IPv6's minimum MTU (RFC 4443 §2.4 (c)), by our reader and, when a whole
    /// IPv6 header is quoted, by smoltcp's.
    fn error(&self, invoking: &[u8]) {
        let pointer = u32::from(self.hops);
        let room = usize::from(self.hops) * 8;
        let quoted = invoking.len().min(room.min(1280 - 40).saturating_sub(8));
        for (out, kind) in [
            (ErrorOut::PortUnreachable, ErrorKind::Unreachable(4)),
            (
                ErrorOut::ErroneousField { pointer },
                ErrorKind::ParameterProblem(0, pointer),
            ),
            (
                ErrorOut::UnknownNextHeader { pointer },
                ErrorKind::ParameterProblem(1, pointer),
            ),
            (
                ErrorOut::UnknownOption { pointer },
                ErrorKind::ParameterProblem(2, pointer),
            ),
        ] {
            let msg = error(out, invoking, self.src, self.dst, room);
            assert_eq!(msg.len(), 8 + quoted, "{out:?}");
            assert!(icmpv6_checksum_ok(&msg, self.src, self.dst));
            let read = icmpv6::parse(&msg, self.src, self.dst, self.hops);
            let invoking = &invoking[..quoted];
            assert_eq!(read, Ok(Message::Error { kind, invoking }));
            if quoted < 40 {
                continue;
            }
            let packet = Icmpv6Packet::new_checked(&msg[..]).expect("eight bytes");
            let caps = ChecksumCapabilities::default();
            match Icmpv6Repr::parse(&self.src, &self.dst, &packet, &caps) {
                Ok(Icmpv6Repr::DstUnreachable { reason, .. }) => {
                    assert_eq!(reason, Icmpv6DstUnreachable::PortUnreachable)
                }
                Ok(Icmpv6Repr::ParamProblem {
                    reason, pointer: p, ..
                }) => {
                    let ErrorKind::ParameterProblem(code, _) = kind else {
                        panic!("{out:?} read as a parameter problem");
                    };
                    assert_eq!((u8::from(reason), p), (code, pointer));
                }
                other => panic!("{out:?} read as {other:?}"),
            }
        }
    }
}
