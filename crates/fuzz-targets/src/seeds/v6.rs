//! IPv6 seeds: `engine_frame`'s IPv6 records and `icmpv6`'s messages.

use super::named;
use crate::engine_frame::{
    icmp6, packet6, Script, ACTIVE, DAD, FULL_OPTIONS, LINK_LOCAL, OPEN, SMALL_MTU, V6,
};
use crate::wire6::sel;

/// IPv6 traffic for `engine_frame`: connections over the global and link-local
/// addresses, after duplicate address detection too; echo; Neighbor Discovery from
/// peers, from the unspecified address and spoofing ours; resolution of new
/// neighbours; conflicts; Packet Too Big and the other errors about our segments;
/// extension-header chains a host takes and refuses; martians and groups.
pub(super) fn engine_frame() -> Vec<(String, Vec<u8>)> {
    let full = OPEN | V6 | FULL_OPTIONS;
    let tcp = Script::tcp6_fields;
    // Hop-by-Hop, Destination Options with a skippable unknown option, a finished
    // type-2 route, an atomic fragment, Authentication: all taken.
    let taken = [0x00, 0x21, 0x0a, 0x03, 0x0c];
    let any = |dst: u8, kind: u8, code: u8, body: &[u8]| {
        [&[dst, kind, code, body.len() as u8][..], body].concat()
    };
    vec![
        named(
            "v6-passive-full-echo-fin",
            Script::new(full, 1)
                .data(16, 12)
                .advance(5)
                .data(0, 0)
                .data(4, 0)
                .advance(0)
                .data(0, 0)
                .finish(),
        ),
        named(
            "v6-active-bare-pause-resume",
            Script::new(OPEN | V6 | ACTIVE, 3)
                .mode(1)
                .data(16, 1400)
                .segment(0, 0, 0, 0, 0, 0, 0, &[])
                .advance(0x44)
                .app(1)
                .mode(0)
                .app(1)
                .finish(),
        ),
        named(
            "v6-link-local-passive-reply-close",
            Script::new(full | LINK_LOCAL, 5)
                .mode(3)
                .data(16, 2)
                .data(0, 0)
                .data(4, 0)
                .advance(0xc1)
                .finish(),
        ),
        named(
            "v6-link-local-active-rst",
            Script::new(OPEN | V6 | LINK_LOCAL | ACTIVE | FULL_OPTIONS, 9)
                .data(16, 100)
                .segment(0, 8, 10, 0, 0, 0, 0, &[])
                .segment(0, 2, 0, 0, 65535, 0, 0, &[])
                .segment(0, 8, 0, 0, 0, 0, 0, &[])
                .finish(),
        ),
        named(
            "v6-dad-then-open",
            Script::new(full | DAD, 11)
                .data(16, 50)
                .ping6(sel::PEER6, sel::HOST6, 8)
                .finish(),
        ),
        named(
            "v6-extension-chains",
            Script::new(full, 13)
                .segment(2, 16, 0, 0, 65535, 40, 0, &[])
                .tcp6((sel::PEER6, sel::HOST6), &taken, 16, 2)
                // Refused: a Type 0 route, a route with segments left, a fragment, a
                // discard option, Hop-by-Hop second, nine headers, ESP.
                .tcp6((sel::PEER6, sel::HOST6), &[0x02], 16, 1)
                .tcp6((sel::PEER6, sel::HOST6), &[0x0a | 0x08 << 3], 16, 1)
                .tcp6((sel::PEER6, sel::HOST6), &[0x13], 16, 1)
                .tcp6((sel::PEER6, sel::HOST6), &[0x61], 16, 1)
                .tcp6((sel::PEER6, sel::HOST6), &[0x01, 0x00], 16, 1)
                .tcp6((sel::PEER6, sel::HOST6), &[0x01; 9], 16, 1)
                .tcp6((sel::PEER6, sel::HOST6), &[0x0d], 16, 1)
                .tcp6((sel::PEER6, sel::HOST6), &[0x17], 16, 1)
                .data(0, 0)
                .finish(),
        ),
        named(
            "v6-ping-groups-and-martians",
            Script::new(0, 0)
                .ping6(sel::PEER6, sel::HOST6, 100)
                .ping6(sel::PEER_LL, sel::HOST_LL, 1400)
                .ping6(sel::PEER6, sel::ALL_NODES, 10)
                .ping6(sel::PEER6, sel::HOST6_GROUP, 10)
                .ping6(sel::LOOPBACK, sel::HOST6, 10)
                .ping6(sel::UNSPECIFIED, sel::HOST6, 10)
                .ping6(sel::HOST6, sel::HOST6, 10)
                .ping6(sel::PEER6, sel::OTHER6, 10)
                .icmp6(
                    icmp6::ECHO,
                    icmp6::HOP_LIMIT,
                    sel::OFF_LINK,
                    &[1, sel::HOST6, 4, 0],
                )
                .finish(),
        ),
        named(
            "v6-neighbor-discovery",
            Script::new(0, 0)
                .solicit(sel::PEER6, sel::HOST6, 1, 1)
                .solicit(sel::PEER_LL, sel::HOST_LL, 1 | 4, 1)
                .solicit(sel::OTHER6, sel::HOST6, 0, 0)
                .solicit(sel::UNSPECIFIED, sel::HOST6, 0, 0)
                .solicit(sel::UNSPECIFIED, sel::HOST_LL, 1, 1)
                .solicit(sel::HOST6, sel::HOST6, 1, 0x81)
                .solicit(sel::PEER6, sel::HOST6, 2, 1)
                .solicit(sel::PEER6, sel::HOST6, 3 | 16, 1)
                .solicit(sel::PEER6, sel::OTHER6, 1, 1)
                .solicit(sel::PEER6, sel::ALL_NODES, 1 | 8, 1)
                .icmp6(
                    icmp6::SOLICITATION,
                    icmp6::HOP_LIMIT,
                    sel::PEER6,
                    &[64, sel::HOST6, 1, 1],
                )
                .advertise(sel::PEER6, sel::PEER6, 0x60, 1, 1)
                .advertise(sel::OTHER6, sel::HOST6, 0x20, 1 | 8, 7)
                .advertise(sel::HOST6, sel::HOST6, 0x20, 1 | 8, 7)
                .advertise(sel::PEER6, sel::PEER6, 0x40, 1 | 8, 1)
                .advertise(sel::PEER6, sel::PEER6, 0xa0, 2 | 32, 1)
                .finish(),
        ),
        named(
            "v6-resolve-new-neighbors",
            Script::new(0, 0)
                .icmp6(icmp6::OPEN, 0, sel::OTHER6, &[7])
                .advertise(sel::OTHER6, sel::OTHER6, 0x60, 1, 7)
                .icmp6(icmp6::OPEN, 0, sel::OFF_LINK, &[8])
                .advertise(sel::ROUTER_LL, sel::ROUTER_LL, 0xe0, 1 | 4, 0x7e)
                .icmp6(icmp6::OPEN, 0, sel::PEER_LL, &[9])
                .advertise(sel::PEER_LL, sel::PEER_LL, 0x60, 1 | 4, 0x81)
                .icmp6(icmp6::OPEN, 0, sel::ALL_NODES, &[10])
                .icmp6(icmp6::OPEN, 0, sel::HOST6, &[11])
                .advertise(sel::PEER_LL, sel::PEER_LL, 0x60, 1 | 4, 1)
                .advance(0xc1)
                .advance(0)
                .finish(),
        ),
        named(
            "v6-duplicate-addresses",
            Script::new(V6 | DAD, 0)
                .icmp6(icmp6::DAD, 0, 1, &[0])
                .solicit(sel::UNSPECIFIED, sel::HOST6, 0, 0)
                .advance(0x82)
                .ping6(sel::PEER_LL, sel::HOST_LL + 1, 8)
                .ping6(sel::PEER6, sel::HOST6, 8)
                .tcp6((sel::PEER_LL, sel::HOST_LL + 1), &[], 3, 0)
                .tcp6((sel::PEER6, sel::HOST6), &[], 3, 0)
                .finish(),
        ),
        named(
            "v6-duplicate-link-local-exhausted",
            Script::new(V6 | DAD, 0)
                .icmp6(icmp6::DAD, 0, 1, &[0])
                .icmp6(icmp6::DAD, 0, 2, &[1])
                .icmp6(icmp6::DAD, 0, 3, &[0])
                .icmp6(icmp6::DAD, 0, 4, &[1])
                .advance(0x82)
                .ping6(sel::PEER_LL, sel::HOST_LL + 3, 8)
                .solicit(sel::PEER_LL, sel::HOST_LL + 3, 1, 1)
                .finish(),
        ),
        named(
            "v6-packet-too-big",
            Script::new(full, 15)
                .data(16, 1400)
                .error6(sel::ROUTER_LL, 0, 1280, 0xff, 0)
                .error6(sel::ROUTER_LL, 0, 1000, 0xff, 0)
                .error6(sel::ROUTER_LL, 0, 1280, 0xff, 3000)
                .error6(sel::ROUTER_LL, 0, 1280, 5, 0)
                .error6(sel::PEER6, 1 | 4 << 2, 0, 0xff, 0)
                .error6(sel::PEER6, 2, 0, 0xff, 0)
                .error6(sel::PEER6, 3, 40, 0xff, 0)
                .data(0, 0)
                .advance(0)
                .finish(),
        ),
        named(
            "v6-small-mtu",
            Script::new(full | SMALL_MTU, 17)
                .data(16, 500)
                .error6(sel::ROUTER_LL, 0, 1280, 0xff, 0)
                .ping6(sel::PEER6, sel::HOST6, 400)
                .ping6(sel::PEER_LL, sel::HOST_LL, 300)
                .finish(),
        ),
        named(
            "v6-martians-groups-and-others",
            Script::new(0, 0)
                .tcp6((sel::LOOPBACK, sel::HOST6), &[], 3, 0)
                .tcp6((sel::V4_MAPPED, sel::HOST6), &[], 3, 0)
                .tcp6((sel::ALL_NODES, sel::HOST6), &[], 3, 0)
                .tcp6((sel::HOST6, sel::HOST6), &[], 3, 0)
                .tcp6((sel::PEER6, sel::ALL_NODES), &[], 3, 0)
                .tcp6((sel::PEER6, sel::OTHER6), &[], 3, 0)
                .packet6(
                    packet6::TCP,
                    packet6::SWAP_MAC,
                    (sel::PEER6, sel::HOST6, 64),
                    &[],
                    &tcp(3, 0, 0, 0, 0),
                )
                .packet6(
                    packet6::TCP_BAD_CHECKSUM,
                    0,
                    (sel::PEER6, sel::HOST6, 64),
                    &[],
                    &tcp(3, 0, 0, 0, 0),
                )
                .packet6(
                    packet6::TCP,
                    packet6::OTHER_MAC,
                    (sel::OFF_LINK, sel::HOST6, 9),
                    &[],
                    &tcp(3, 0, 0, 0, 0),
                )
                .packet6(
                    packet6::TCP,
                    packet6::HAND_OVER,
                    (sel::PEER_LL, sel::HOST_LL, 64),
                    &[],
                    &tcp(3, 3, 0, 0, 0),
                )
                .packet6(
                    packet6::ICMPV6,
                    0,
                    (sel::PEER_LL, sel::ALL_NODES, 255),
                    &[],
                    &[134, 0, 8, 64, 0, 0, 0, 0, 0, 0, 0],
                )
                .packet6(
                    packet6::ICMPV6,
                    0,
                    (sel::PEER_LL, sel::ALL_NODES, 1),
                    &[0x30],
                    &[
                        130, 0, 20, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
                    ],
                )
                .packet6(
                    packet6::OTHER,
                    0,
                    (sel::PEER6, sel::HOST6, 64),
                    &[0x01],
                    &[17, 8, 0, 7, 0, 9, 0, 8, 0, 0],
                )
                .icmp6(
                    icmp6::ANY,
                    0,
                    sel::PEER_LL,
                    &any(sel::HOST_LL, 137, 0, &[0; 36]),
                )
                .icmp6(icmp6::ANY, 0, sel::PEER6, &any(sel::HOST6, 129, 0, b"pong"))
                .finish(),
        ),
        named("v6-icmpv6-errors-and-their-budget", {
            let udp = [17, 8, 0, 7, 0, 9, 0, 8, 0, 0];
            let other = |s: Script, bits: u8, (src, dst): (u8, u8), body: &[u8]| {
                s.packet6(packet6::OTHER, bits, (src, dst, 64), &[], body)
            };
            let mut s = Script::new(0, 0);
            s = other(s, 0, (sel::PEER6, sel::HOST6), &udp);
            s = other(s, 0, (sel::PEER_LL, sel::HOST_LL), &[253, 4, 1, 2, 3, 4]);
            s = s.packet6(
                packet6::OTHER,
                0,
                (sel::PEER6, sel::HOST6, 64),
                &[0x01, 0x00],
                &udp,
            );
            s = other(s, 0, (sel::PEER6, sel::ALL_NODES), &udp);
            s = other(s, packet6::SWAP_MAC, (sel::PEER6, sel::HOST6), &udp);
            s = other(s, 0, (sel::UNSPECIFIED, sel::HOST6), &udp);
            // Past the burst, then one a millisecond.
            for _ in 0..52 {
                s = other(s, 0, (sel::PEER6, sel::HOST6), &udp);
            }
            s = s.advance(1);
            other(s, 0, (sel::PEER6, sel::HOST6), &udp).finish()
        }),
        named(
            "dual-stack-opens",
            Script::new(OPEN | FULL_OPTIONS, 19)
                .app(2 | 4 | 3 << 4)
                .app(2 | 4 | 8 | 5 << 4)
                .data(16, 10)
                .packet6(
                    packet6::TCP,
                    0,
                    (sel::PEER6, sel::HOST6, 64),
                    &[],
                    &tcp(3, 1, 0, 0, 0),
                )
                .advance(0)
                .finish(),
        ),
    ]
}

/// Messages for `icmpv6`, with their hop limit and addresses written out (flags 0) and
/// their checksums right but where the name says otherwise: echo, Neighbor Discovery
/// both ways and for duplicate address detection, the four errors, messages a host
/// reads past; and, named `bad-…` or `truncated-…`, the ones RFC 4861 or a short
/// message refuses.
pub(super) fn icmpv6() -> Vec<(String, Vec<u8>)> {
    use rusty_stack::internals::icmpv6::{
        neighbor_advertisement, neighbor_solicitation, solicited_node,
    };
    use rusty_stack::io::MacAddr;

    use crate::wire::PEER_MAC;
    use crate::wire6::{seal, ALL_NODES, HOST6, PEER6};

    let any = std::net::Ipv6Addr::UNSPECIFIED;
    let group = solicited_node(HOST6);
    let seed = |name: &str, hops: u8, (src, dst), mut msg: Vec<u8>, sealed: bool| {
        if sealed {
            seal(&mut msg, src, dst);
        }
        let data = [&[0, hops][..], &src.octets(), &dst.octets(), &msg].concat();
        named(name, data)
    };
    let to_us = (PEER6, HOST6);
    let ns = neighbor_solicitation(PEER6, group, HOST6, Some(PEER_MAC));
    let na = neighbor_advertisement(PEER6, HOST6, PEER6, PEER_MAC, true);
    let error = |kind: u8, word: u32| {
        let invoking = crate::wire6::packet(HOST6, PEER6, 64, 6, &[0, 80, 0x9c, 0x40, 0, 0, 0, 1]);
        [&[kind, 0, 0, 0][..], &word.to_be_bytes(), &invoking].concat()
    };
    let with = |mut msg: Vec<u8>, at: usize, b: u8| {
        msg[at] = b;
        msg
    };
    vec![
        seed(
            "echo-request",
            64,
            to_us,
            b"\x80\0\0\0\x12\x34\0\x01ping".to_vec(),
            true,
        ),
        seed(
            "echo-reply",
            64,
            to_us,
            b"\x81\0\0\0\x12\x34\0\x01pong".to_vec(),
            true,
        ),
        seed("solicitation", 255, (PEER6, group), ns.clone(), false),
        seed(
            "solicitation-dad",
            255,
            (any, group),
            neighbor_solicitation(any, group, HOST6, None),
            false,
        ),
        seed("advertisement-solicited", 255, to_us, na.clone(), false),
        seed(
            "advertisement-unsolicited",
            255,
            (PEER6, ALL_NODES),
            neighbor_advertisement(PEER6, ALL_NODES, PEER6, PEER_MAC, false),
            false,
        ),
        seed("packet-too-big", 64, to_us, error(2, 1280), true),
        seed("destination-unreachable", 64, to_us, error(1, 0), true),
        seed("time-exceeded", 64, to_us, error(3, 0), true),
        seed("parameter-problem", 64, to_us, error(4, 40), true),
        seed(
            "router-advertisement",
            255,
            (PEER6, ALL_NODES),
            vec![134, 0, 0, 0, 64, 0, 7, 8, 0, 0, 0, 0, 0, 0, 0, 0],
            true,
        ),
        seed(
            "mld-query",
            1,
            (PEER6, ALL_NODES),
            [&[130, 0, 0, 0, 0, 0, 0, 0][..], &[0; 20]].concat(),
            true,
        ),
        seed("bad-hop-limit", 64, (PEER6, group), ns.clone(), false),
        seed(
            "bad-code",
            255,
            (PEER6, group),
            with(ns.clone(), 1, 1),
            true,
        ),
        seed(
            "bad-group-target",
            255,
            (PEER6, group),
            neighbor_solicitation(PEER6, group, group, Some(PEER_MAC)),
            false,
        ),
        seed(
            "bad-dad-with-mac",
            255,
            (any, group),
            neighbor_solicitation(any, group, HOST6, Some(PEER_MAC)),
            false,
        ),
        seed(
            "bad-dad-to-unicast",
            255,
            (any, HOST6),
            neighbor_solicitation(any, HOST6, HOST6, None),
            false,
        ),
        seed(
            "bad-solicited-to-group",
            255,
            (PEER6, ALL_NODES),
            neighbor_advertisement(PEER6, ALL_NODES, PEER6, PEER_MAC, true),
            false,
        ),
        seed(
            "bad-zero-length-option",
            255,
            (PEER6, group),
            with(ns.clone(), 25, 0),
            true,
        ),
        seed(
            "bad-group-link-layer-address",
            255,
            (PEER6, group),
            neighbor_solicitation(PEER6, group, HOST6, Some(MacAddr([0x33, 0x33, 0, 0, 0, 1]))),
            false,
        ),
        seed("bad-checksum", 255, to_us, with(na, 2, 0), false),
        seed(
            "truncated-solicitation",
            255,
            (PEER6, group),
            ns[..20].to_vec(),
            true,
        ),
        seed("truncated", 64, to_us, vec![128, 0, 0, 0], true),
    ]
}
