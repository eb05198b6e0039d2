use super::*;

const OWN: Ipv6Addr = Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 2);
const PEER: Ipv6Addr = Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 1);
const OWN_MAC: MacAddr = MacAddr([0x02, 0, 0, 0, 0, 0x02]);
const PEER_MAC: MacAddr = MacAddr([0x02, 0, 0, 0, 0, 0x01]);

/// An Echo Request from the peer, sealed.
fn echo_request(data: &[u8]) -> Vec<u8> {
    let mut icmp = vec![ECHO_REQUEST, 0, 0, 0, 0x12, 0x34, 0, 7];
    icmp.extend_from_slice(data);
    seal(&mut icmp, PEER, OWN);
    icmp
}

#[test]
fn an_echo_request_is_answered_with_its_data_cut_to_fit() {
    let request = echo_request(b"ping data");
    let Ok(Message::EchoRequest { ident, seq, data }) = parse(&request, PEER, OWN, 64) else {
        panic!("not an echo request");
    };
    assert_eq!((ident, seq, data), (0x1234, 7, &b"ping data"[..]));
    let reply = echo_reply(ident, seq, data, OWN, PEER, 1452);
    assert_eq!(reply[0], ECHO_REPLY);
    assert_eq!(&reply[8..], b"ping data");
    assert_eq!(parse(&reply, OWN, PEER, 64), Ok(Message::Other(ECHO_REPLY)));
    let cut = echo_reply(ident, seq, data, OWN, PEER, 12);
    assert_eq!(&cut[8..], b"ping");
    assert!(matches!(parse(&cut, OWN, PEER, 64), Ok(Message::Other(_))));
}

#[test]
fn a_wrong_checksum_or_address_is_refused() {
    let mut request = echo_request(b"x");
    assert_eq!(parse(&request, PEER, PEER, 64), Err(Icmpv6Error::Checksum));
    request[8] ^= 1;
    assert_eq!(parse(&request, PEER, OWN, 64), Err(Icmpv6Error::Checksum));
    assert_eq!(
        parse(&request[..7], PEER, OWN, 64),
        Err(Icmpv6Error::Truncated)
    );
}

#[test]
fn solicitations_and_advertisements_round_trip() {
    let group = solicited_node(OWN);
    assert_eq!(group, "ff02::1:ff00:2".parse::<Ipv6Addr>().unwrap());
    assert_eq!(group_mac(group), MacAddr([0x33, 0x33, 0xff, 0, 0, 2]));
    let ns = neighbor_solicitation(PEER, group, OWN, Some(PEER_MAC));
    assert_eq!(
        parse(&ns, PEER, group, ND_HOP_LIMIT),
        Ok(Message::NeighborSolicitation {
            target: OWN,
            source_mac: Some(PEER_MAC)
        })
    );
    let na = neighbor_advertisement(OWN, PEER, OWN, OWN_MAC, true);
    assert_eq!(
        parse(&na, OWN, PEER, ND_HOP_LIMIT),
        Ok(Message::NeighborAdvertisement {
            target: OWN,
            router: false,
            solicited: true,
            override_: true,
            target_mac: Some(OWN_MAC)
        })
    );
}

#[test]
fn neighbor_discovery_that_may_be_forged_is_refused() {
    let group = solicited_node(OWN);
    let bad = Err(Icmpv6Error::BadNeighborDiscovery);
    let ns = neighbor_solicitation(PEER, group, OWN, Some(PEER_MAC));
    assert_eq!(parse(&ns, PEER, group, 254), bad, "routed");
    let mut coded = ns.clone();
    coded[1] = 1;
    seal(&mut coded, PEER, group);
    assert_eq!(parse(&coded, PEER, group, ND_HOP_LIMIT), bad, "code");
    let to_group = neighbor_solicitation(PEER, group, group, Some(PEER_MAC));
    assert_eq!(
        parse(&to_group, PEER, group, ND_HOP_LIMIT),
        bad,
        "group target"
    );
    // Duplicate address detection: no link-layer address, to the solicited-node group.
    let any = Ipv6Addr::UNSPECIFIED;
    let dad = neighbor_solicitation(any, group, OWN, None);
    assert!(parse(&dad, any, group, ND_HOP_LIMIT).is_ok());
    let dad_with_mac = neighbor_solicitation(any, group, OWN, Some(PEER_MAC));
    assert_eq!(parse(&dad_with_mac, any, group, ND_HOP_LIMIT), bad);
    let dad_unicast = neighbor_solicitation(any, OWN, OWN, None);
    assert_eq!(parse(&dad_unicast, any, OWN, ND_HOP_LIMIT), bad);
    // A solicited advertisement to all nodes.
    let all_nodes: Ipv6Addr = "ff02::1".parse().unwrap();
    let na = neighbor_advertisement(PEER, all_nodes, PEER, PEER_MAC, true);
    assert_eq!(parse(&na, PEER, all_nodes, ND_HOP_LIMIT), bad);
    // An option of length zero, which would make a reader loop.
    let mut looping = neighbor_solicitation(PEER, group, OWN, Some(PEER_MAC));
    looping[25] = 0;
    seal(&mut looping, PEER, group);
    assert_eq!(parse(&looping, PEER, group, ND_HOP_LIMIT), bad);
    // A link-layer address no neighbour owns: a group, broadcast, all zeros.
    for mac in [[0x33, 0x33, 0, 0, 0, 1], [0xff; 6], [0; 6]] {
        let ns = neighbor_solicitation(PEER, group, OWN, Some(MacAddr(mac)));
        assert_eq!(parse(&ns, PEER, group, ND_HOP_LIMIT), bad, "{mac:x?}");
        let na = neighbor_advertisement(PEER, OWN, PEER, MacAddr(mac), true);
        assert_eq!(parse(&na, PEER, OWN, ND_HOP_LIMIT), bad, "{mac:x?}");
    }
    // An unknown option is skipped.
    let mut extra = neighbor_solicitation(PEER, group, OWN, Some(PEER_MAC));
    extra.extend_from_slice(&[99, 1, 0, 0, 0, 0, 0, 0]);
    seal(&mut extra, PEER, group);
    assert!(parse(&extra, PEER, group, ND_HOP_LIMIT).is_ok());
}

#[test]
fn errors_carry_their_kind_and_the_invoking_packet() {
    let invoking = [0x60u8; 48];
    for (kind, code, word, want) in [
        (1, 4, 0, ErrorKind::Unreachable(4)),
        (2, 0, 1280, ErrorKind::TooBig(1280)),
        (3, 0, 0, ErrorKind::TimeExceeded(0)),
        (4, 1, 40, ErrorKind::ParameterProblem(1, 40)),
    ] {
        let mut icmp = vec![kind, code, 0, 0];
        icmp.extend_from_slice(&u32::to_be_bytes(word));
        icmp.extend_from_slice(&invoking);
        seal(&mut icmp, PEER, OWN);
        assert_eq!(
            parse(&icmp, PEER, OWN, 64),
            Ok(Message::Error {
                kind: want,
                invoking: &invoking
            })
        );
    }
}

#[test]
fn an_mld_report_joins_the_groups_and_parses_as_a_whole_packet() {
    let own = crate::ipv6::address::link_local(0x1234);
    let groups = [solicited_node(OWN), solicited_node(own)];
    let report = mld_report(own, &groups);
    assert_eq!(report.len(), 8 + 2 * 20);
    assert_eq!(u16::from_be_bytes([report[6], report[7]]), 2, "records");
    assert_eq!(&report[8..12], &[CHANGE_TO_EXCLUDE, 0, 0, 0]);
    assert_eq!(&report[12..28], &groups[0].octets());
    // The whole packet: fixed header, Hop-by-Hop with Router Alert, the report.
    let payload = MLD_HOP_BY_HOP.len() + report.len();
    let fixed = crate::ipv6::header(own, MLD_ROUTERS, 0, payload, 1).unwrap();
    let packet = [&fixed[..], &MLD_HOP_BY_HOP, &report].concat();
    let h = crate::ipv6::parse(&packet).unwrap();
    assert_eq!(
        (h.protocol, h.upper_offset, h.hop_limit()),
        (NEXT_HEADER, 48, 1)
    );
    assert_eq!(
        parse(&packet[h.upper_offset..], own, MLD_ROUTERS, 1),
        Ok(Message::Other(MLD_REPORT)),
        "checksum over the pseudo-header"
    );
    assert_eq!(crate::ipv6::header(own, MLD_ROUTERS, 0, 70_000, 1), None);
}
