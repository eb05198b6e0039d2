//! Extension headers as Linux treats them, and advertisements that may not move a
//! neighbour: a finished route (Type 0 too) is read through; a route with segments
//! left, an option whose type asks and a Hop-by-Hop header out of place are told with
//! a Parameter Problem (within the error budget, never to a group or a martian);
//! padding beyond alignment and headers crowded with options are refused in silence;
//! an atomic fragment is the whole packet; an advertisement without Override does not
//! move a neighbour we hold (RFC 4861 §7.2.5).

use smoltcp::wire::Icmpv6ParamProblem;

use super::*;

/// A SYN to the engine's port from `sport`, over IPv6 behind the extension headers
/// `headers` (the first of them `first`, the last naming TCP).
fn syn_behind(net: &Net, first: u8, headers: &[u8], sport: u16) -> Vec<u8> {
    let syn = syn_seg(net, SeqNum(1), FULL);
    let tcp = tcp_bytes_to(PEER6, HOST6, sport, PORT, &syn, &[]);
    let payload = [headers, &tcp].concat();
    ipv6_frame((PEER_MAC, HOST_MAC), PEER6, HOST6, first, 64, &payload)
}

/// A Routing header of `routing_type` with `segments_left`, naming `next`, one
/// address long.
fn routing(next: u8, routing_type: u8, segments_left: u8) -> Vec<u8> {
    let mut h = vec![next, 2, routing_type, segments_left, 0, 0, 0, 0];
    h.extend_from_slice(&HOST6.octets());
    h
}

/// A Destination Options header naming `next`, holding `options`, eight bytes in
/// all: two of its own, then `options` (six bytes).
fn destination_options(next: u8, options: [u8; 6]) -> Vec<u8> {
    [&[next, 0][..], &options].concat()
}

/// The one packet the engine sent, which must be a Parameter Problem about the
/// packet that went to it: its reason and pointer.
fn parameter_problem(out: &[Frame]) -> (Icmpv6ParamProblem, u32) {
    let out = ipv6_of(out);
    assert_eq!(out.len(), 1, "one answer");
    assert_eq!(
        (out[0].src, out[0].dst, out[0].eth.dst, out[0].hop_limit),
        (HOST6, PEER6, PEER_MAC, 64)
    );
    match out[0].icmp() {
        Some(Icmpv6Repr::ParamProblem {
            reason,
            pointer,
            header,
            ..
        }) => {
            assert_eq!((header.src_addr, header.dst_addr), (PEER6, HOST6));
            (reason, pointer)
        }
        other => panic!("not a parameter problem: {other:?}"),
    }
}

fn syn_acked(out: &[Frame], sport: u16) -> bool {
    tcp6_of(out)
        .iter()
        .any(|(s, _)| s.flags.syn && s.flags.ack && s.dst_port == sport)
}

/// RFC 8200 §4.4 and RFC 5095 §3, as Linux reads them: a Routing header with no
/// segments left is skipped whatever its type, Type 0 included, and the SYN behind it
/// answered; with segments left (Type 0 or another) the packet is dropped and the
/// sender told with a Parameter Problem, code 0, pointing at the Routing Type.
#[test]
fn a_finished_route_is_read_through_and_one_with_segments_left_is_told() {
    let mut net = listening6();
    for (routing_type, sport) in [(0, 40001), (4, 40002)] {
        let out = net.send(&syn_behind(&net, 43, &routing(6, routing_type, 0), sport));
        assert!(syn_acked(&out, sport), "type {routing_type} finished");
    }
    for (routing_type, sport) in [(0, 40003), (253, 40004)] {
        let out = net.send(&syn_behind(&net, 43, &routing(6, routing_type, 1), sport));
        assert_eq!(
            parameter_problem(&out),
            (Icmpv6ParamProblem::ErroneousHdrField, 42),
            "type {routing_type} with a segment left"
        );
    }
    assert_eq!(net.dropped(DropReason::RoutingHeader), 2);
    assert_eq!(net.stats().icmpv6_errors_sent, 2);
}

/// RFC 8200 §4.2: an unknown option whose type's high bits are 10 or 11 gets a
/// Parameter Problem, code 2, pointing at it; 01 is dropped in silence, 00 skipped.
/// A Hop-by-Hop header anywhere but first is an unrecognized Next Header (RFC 8200
/// §4, code 1), pointing at the byte that names it. Padding that runs beyond the seven
/// bytes alignment needs, or is not zeros, and a ninth option in a header are refused
/// in silence, as Linux refuses them (RFC 4942 §2.1.9.5); the same SYN with seven bytes
/// of padding is answered.
#[test]
fn options_are_told_skipped_or_refused_as_linux_does() {
    let mut net = listening6();
    let option = |kind| destination_options(6, [kind, 0, 1, 2, 0, 0]);
    for (kind, sport) in [(0x9e, 40010), (0xde, 40011)] {
        let out = net.send(&syn_behind(&net, 60, &option(kind), sport));
        assert_eq!(
            parameter_problem(&out),
            (Icmpv6ParamProblem::UnrecognizedOption, 42),
            "{kind:#x}"
        );
    }
    assert!(net
        .send(&syn_behind(&net, 60, &option(0x5e), 40012))
        .is_empty());
    assert!(syn_acked(
        &net.send(&syn_behind(&net, 60, &option(0x1e), 40013)),
        40013
    ));

    let hop_by_hop = destination_options(6, [1, 4, 0, 0, 0, 0]);
    let late = [destination_options(0, [1, 4, 0, 0, 0, 0]), hop_by_hop].concat();
    let out = net.send(&syn_behind(&net, 60, &late, 40014));
    assert_eq!(
        parameter_problem(&out),
        (Icmpv6ParamProblem::UnrecognizedNxtHdr, 40)
    );
    assert_eq!(net.stats().icmpv6_errors_sent, 3);

    let before = net.dropped(DropReason::BadExtensionHeaders);
    let padded = |pad: &[u8]| {
        let mut h = vec![6, 1];
        h.extend_from_slice(pad);
        h.extend_from_slice(&[0x1e, 12 - pad.len() as u8]);
        h.resize(16, 0);
        h
    };
    let refused = [
        padded(&[1, 6, 0, 0, 0, 0, 0, 0]),
        padded(&[0; 8]),
        padded(&[1, 2, 0, 9]),
        [&[6, 2][..], &[0x1e, 0].repeat(9), &[1, 2, 0, 0]].concat(),
    ];
    for (i, headers) in refused.iter().enumerate() {
        let out = net.send(&syn_behind(&net, 60, headers, 40020 + i as u16));
        assert!(out.is_empty(), "case {i} answered");
    }
    assert_eq!(net.dropped(DropReason::BadExtensionHeaders), before + 4);
    let out = net.send(&syn_behind(
        &net,
        60,
        &padded(&[1, 5, 0, 0, 0, 0, 0]),
        40030,
    ));
    assert!(syn_acked(&out, 40030));
    assert_eq!(net.stats().icmpv6_errors_sent, 3);
}

/// The errors about refused packets follow the rules of the engine's other errors:
/// none about a packet to a group, from a martian or from the unspecified address,
/// and a flood gets the rest of the burst of 50, then one a millisecond.
#[test]
fn errors_about_refused_headers_keep_to_the_rules_and_the_budget() {
    let mut net = listening6();
    let syn = syn_seg(&net, SeqNum(1), FULL);
    let route = routing(6, 0, 1);
    for (src, dst, dst_mac) in [
        (PEER6, ALL_NODES, group_mac(ALL_NODES)),
        (Ipv6Addr::UNSPECIFIED, HOST6, HOST_MAC),
        (Ipv6Addr::LOCALHOST, HOST6, HOST_MAC),
        (HOST6, HOST6, HOST_MAC),
        (PEER6, HOST6, group_mac(ALL_NODES)),
    ] {
        let tcp = tcp_bytes_to(src, dst, 40000, PORT, &syn, &[]);
        let payload = [&route[..], &tcp].concat();
        let frame = ipv6_frame((PEER_MAC, dst_mac), src, dst, 43, 64, &payload);
        assert!(net.send(&frame).is_empty(), "told {src} > {dst}");
    }
    assert_eq!(net.stats().icmpv6_errors_sent, 0);
    let frame = syn_behind(&net, 43, &route, 40000);
    let told: usize = (0..100).map(|_| net.send(&frame).len()).sum();
    assert_eq!(told, 50);
    assert_eq!(net.stats().icmpv6_errors_suppressed, 50);
    net.advance(Duration::from_millis(10));
    let told: usize = (0..20).map(|_| net.send(&frame).len()).sum();
    assert_eq!(told, 10);
}

/// RFC 6946: an atomic fragment (offset 0, no more fragments) is the whole packet,
/// as Linux takes it: a SYN in one is answered, and so is an echo request.
#[test]
fn an_atomic_fragment_is_answered_as_the_packet_it_holds() {
    let mut net = listening6();
    let atomic = [6, 0, 0, 0, 0, 0, 0, 42];
    assert!(syn_acked(
        &net.send(&syn_behind(&net, 44, &atomic, 40040)),
        40040
    ));
    let echo = icmpv6(
        PEER6,
        HOST6,
        &Icmpv6Repr::EchoRequest {
            ident: 5,
            seq_no: 6,
            data: b"atomic",
        },
    );
    let payload = [&[58, 0, 0, 0, 0, 0, 0, 43][..], &echo].concat();
    let frame = ipv6_frame((PEER_MAC, HOST_MAC), PEER6, HOST6, 44, 64, &payload);
    let out = ipv6_of(&net.send(&frame));
    assert!(matches!(
        out[0].icmp(),
        Some(Icmpv6Repr::EchoReply {
            ident: 5,
            seq_no: 6,
            data: b"atomic"
        })
    ));
    assert_eq!(net.dropped(DropReason::Fragment), 0);
}

/// RFC 4861 §7.2.5: an advertisement without Override does not replace the
/// link-layer address of a neighbour we hold (as Linux keeps it), so a spoofer
/// cannot take the peer's traffic with one; with Override it does, as on Linux.
#[test]
fn an_advertisement_without_override_leaves_a_neighbour_where_it_is() {
    let mut net = listening6();
    // The peer solicits us: we hold it at PEER_MAC.
    net.send(&solicitation(PEER6, HOST6, 255));
    let evil = MacAddr([0x02, 0, 0, 0, 0, 0x66]);
    let syn_to = |net: &mut Net| {
        net.eng.connect((PEER6, 9).into(), ()).ok().unwrap();
        let out = ipv6_of(&net.poll());
        assert_eq!(out.len(), 1, "the SYN alone, no solicitation");
        assert!(out[0].tcp().is_some());
        out[0].eth.dst
    };
    let spoofed = |override_| advertisement_flags(PEER6, PEER6, evil, false, override_);
    assert!(net.send(&spoofed(false)).is_empty());
    assert_eq!(syn_to(&mut net), PEER_MAC);
    assert!(net.send(&spoofed(true)).is_empty());
    assert_eq!(syn_to(&mut net), evil);
}
