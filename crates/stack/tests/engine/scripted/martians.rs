//! Scripted tests of hostile addressing: martian IPv4 sources (RFC 1122 §3.2.1.3, and
//! our own address: the LAND attack), broadcast and multicast IPv4 destinations, IPv4 in
//! frames sent to an Ethernet group address (RFC 1122 §3.3.6), and frames whose source
//! MAC is a group address. Each gets nothing back, not even later (no SYN-ACK
//! retransmission), and one count under its drop reason; a well-formed SYN from the
//! peer is still answered, so the tests could fail. Last, the guard on the transmit
//! side: no TCP frame is ever sent to a group MAC.

use super::*;

/// Group addresses: broadcast, an IPv4 multicast MAC, an IPv6 one.
const GROUP_MACS: [MacAddr; 3] = [
    MacAddr::BROADCAST,
    MacAddr([0x01, 0x00, 0x5e, 0x00, 0x00, 0x01]),
    MacAddr([0x33, 0x33, 0x00, 0x00, 0x00, 0x01]),
];

/// A SYN from `src:40000` to `dst:PORT` in a frame from `src_mac` to `dst_mac`.
fn syn_from(net: &Net, macs: (MacAddr, MacAddr), src: Ipv4Addr, dst: Ipv4Addr) -> Vec<u8> {
    let syn = syn_seg(net, SeqNum(1000), FULL);
    let tcp = tcp_bytes_to(src, dst, 40000, PORT, &syn, &[]);
    ipv4_frame_to(macs.0, macs.1, src, dst, IpProtocol::Tcp, &tcp)
}

/// An ICMP Echo Request from `src` to `dst` in a frame from `src_mac` to `dst_mac`.
fn ping_from(macs: (MacAddr, MacAddr), src: Ipv4Addr, dst: Ipv4Addr) -> Vec<u8> {
    let icmp = icmp_echo(7, 1, b"amplify me");
    ipv4_frame_to(macs.0, macs.1, src, dst, IpProtocol::Icmp, &icmp)
}

/// Send `frame`: nothing comes back, neither now nor over the next 5 s (the SYN-ACK
/// timer would have fired twice), one more drop counts under `reason` and nothing else,
/// and no connection was made.
fn assert_ignored(net: &mut Net, frame: &[u8], reason: DropReason, what: &str) {
    let mut want = net.stats().drops;
    want[reason.index()] += 1;
    let conns = net.eng.connection_count();
    let out = net.send(frame);
    assert!(out.is_empty(), "{what}: answered with {out:?}");
    let out = net.run_for(Duration::from_secs(5), Duration::from_millis(250));
    assert!(out.is_empty(), "{what}: later sent {out:?}");
    assert_eq!(net.stats().drops, want, "{what}: not one {reason:?} drop");
    assert_eq!(
        net.eng.connection_count(),
        conns,
        "{what}: made a connection"
    );
}

/// A well-formed SYN from the peer, from `port`, still gets its SYN-ACK, to the peer.
fn assert_peer_answered(net: &mut Net, port: u16) {
    let out = send_syn(net, port, SeqNum(5000), FULL);
    assert_eq!(out.len(), 1, "the peer's SYN answered by {out:?}");
    assert!(out[0].is_syn_ack(), "{:?}", out[0]);
    assert_eq!((out[0].eth.dst, out[0].ip.dst), (PEER_MAC, PEER_IP));
}

fn listening() -> Net {
    let mut net = Net::new(config(), echo());
    net.eng.listen(PORT, 16);
    net
}

const TO_US: (MacAddr, MacAddr) = (PEER_MAC, HOST_MAC);

#[test]
fn syns_and_pings_from_martian_sources_get_no_answer() {
    let mut net = listening();
    let martians = [
        Ipv4Addr::UNSPECIFIED,
        Ipv4Addr::new(0, 1, 2, 3),
        Ipv4Addr::new(127, 0, 0, 1),
        Ipv4Addr::new(127, 9, 9, 9),
        Ipv4Addr::new(224, 0, 0, 1),
        Ipv4Addr::new(239, 255, 255, 250),
        Ipv4Addr::new(240, 0, 0, 1),
        Ipv4Addr::new(254, 1, 2, 3),
        Ipv4Addr::BROADCAST,
        // The directed broadcast of the engine's 10.0.0.0/24.
        Ipv4Addr::new(10, 0, 0, 255),
    ];
    for src in martians {
        let syn = syn_from(&net, TO_US, src, HOST_IP);
        assert_ignored(
            &mut net,
            &syn,
            DropReason::MartianSource,
            &format!("SYN from {src}"),
        );
        let ping = ping_from(TO_US, src, HOST_IP);
        assert_ignored(
            &mut net,
            &ping,
            DropReason::MartianSource,
            &format!("ping from {src}"),
        );
    }
    let own = DropReason::OwnSourceAddress;
    let syn = syn_from(&net, TO_US, HOST_IP, HOST_IP);
    assert_ignored(&mut net, &syn, own, "SYN from our own address");
    // The LAND attack proper: from our own address and the listening port to themselves.
    let land = tcp_bytes_to(
        HOST_IP,
        HOST_IP,
        PORT,
        PORT,
        &syn_seg(&net, SeqNum(1), BARE),
        &[],
    );
    let land = ipv4_frame_to(PEER_MAC, HOST_MAC, HOST_IP, HOST_IP, IpProtocol::Tcp, &land);
    assert_ignored(&mut net, &land, own, "LAND");
    let ping = ping_from(TO_US, HOST_IP, HOST_IP);
    assert_ignored(&mut net, &ping, own, "ping from our own address");
    assert_peer_answered(&mut net, 40001);
}

/// The directed broadcast comes from the link's prefix: on a /16, x.x.0.255 is a host.
#[test]
fn the_directed_broadcast_follows_the_prefix() {
    let mut cfg = config();
    cfg.prefix_len = 16;
    let mut net = Net::new(cfg, echo());
    net.eng.listen(PORT, 16);
    let syn = syn_from(&net, TO_US, Ipv4Addr::new(10, 0, 255, 255), HOST_IP);
    assert_ignored(
        &mut net,
        &syn,
        DropReason::MartianSource,
        "SYN from 10.0.255.255",
    );
    let host = Ipv4Addr::new(10, 0, 0, 255);
    let out = tcp_of(&net.send(&syn_from(&net, TO_US, host, HOST_IP)));
    assert_eq!(out.len(), 1, "{out:?}");
    assert!(out[0].is_syn_ack() && out[0].ip.dst == host, "{:?}", out[0]);
}

#[test]
fn syns_and_pings_to_broadcast_or_multicast_addresses_get_no_answer() {
    let mut net = listening();
    for dst in [
        Ipv4Addr::BROADCAST,
        Ipv4Addr::new(10, 0, 0, 255),
        Ipv4Addr::new(224, 0, 0, 1),
        Ipv4Addr::new(239, 255, 255, 250),
    ] {
        let reason = DropReason::NotOurAddress;
        let syn = syn_from(&net, TO_US, PEER_IP, dst);
        assert_ignored(&mut net, &syn, reason, &format!("SYN to {dst}"));
        let ping = ping_from(TO_US, PEER_IP, dst);
        assert_ignored(&mut net, &ping, reason, &format!("ping to {dst}"));
    }
    assert_peer_answered(&mut net, 40001);
}

#[test]
fn ipv4_in_broadcast_or_multicast_frames_gets_no_answer() {
    let mut net = listening();
    for group in GROUP_MACS {
        for dst in [HOST_IP, Ipv4Addr::BROADCAST] {
            let what = |kind| format!("{kind} to {dst} in a frame to {group}");
            let reason = DropReason::GroupDestinationMac;
            let syn = syn_from(&net, (PEER_MAC, group), PEER_IP, dst);
            assert_ignored(&mut net, &syn, reason, &what("SYN"));
            let ping = ping_from((PEER_MAC, group), PEER_IP, dst);
            assert_ignored(&mut net, &ping, reason, &what("ping"));
        }
    }
    // ARP is broadcast by nature and still answered.
    let who_has = arp_frame(
        MacAddr::BROADCAST,
        ArpOperation::Request,
        (PEER_MAC, PEER_IP),
        (MacAddr([0; 6]), HOST_IP),
    );
    let out = net.send(&who_has);
    assert_eq!(out.len(), 1, "{out:?}");
    assert_eq!(out[0].eth().dst, PEER_MAC);
    assert!(matches!(
        out[0].arp(),
        Some(ArpRepr::EthernetIpv4 {
            operation: ArpOperation::Reply,
            ..
        })
    ));
    assert_peer_answered(&mut net, 40001);
}

#[test]
fn frames_from_a_group_source_mac_are_dropped_arp_included() {
    let mut net = listening();
    let neighbour = Ipv4Addr::new(10, 0, 0, 9);
    let reason = DropReason::GroupSourceMac;
    for group in GROUP_MACS
        .into_iter()
        .chain([MacAddr([0x03, 0, 0, 0, 0, 0x09])])
    {
        let what = |kind| format!("{kind} from {group}");
        let syn = syn_from(&net, (group, HOST_MAC), PEER_IP, HOST_IP);
        assert_ignored(&mut net, &syn, reason, &what("SYN"));
        let ping = ping_from((group, HOST_MAC), PEER_IP, HOST_IP);
        assert_ignored(&mut net, &ping, reason, &what("ping"));
        // ARP with a group Ethernet source, whether its sender hardware address is a
        // group one too (an "is-at ff:ff:…" poisoning) or a plausible individual one.
        for sender_mac in [group, MacAddr([0x02, 0, 0, 0, 0, 0x09])] {
            for (eth_dst, op) in [
                (MacAddr::BROADCAST, ArpOperation::Request),
                (HOST_MAC, ArpOperation::Reply),
            ] {
                let mut arp = arp_frame(
                    eth_dst,
                    op,
                    (sender_mac, neighbour),
                    (MacAddr([0; 6]), HOST_IP),
                );
                arp[6..12].copy_from_slice(group.as_bytes());
                assert_ignored(&mut net, &arp, reason, &what("ARP"));
            }
        }
    }
    // ARP from an individual source announcing a group MAC: bad ARP, not learned either.
    let poison = arp_frame(
        MacAddr::BROADCAST,
        ArpOperation::Request,
        (MacAddr::BROADCAST, neighbour),
        (MacAddr([0; 6]), HOST_IP),
    );
    let mut poison = poison;
    poison[6..12].copy_from_slice(PEER_MAC.as_bytes());
    assert_ignored(&mut net, &poison, DropReason::BadArp, "ARP is-at broadcast");

    // Nothing was learned for the neighbour: an active open to it asks ARP first.
    net.eng
        .connect(SocketAddr::from((neighbour, 80)), ())
        .map_err(|(e, _)| e)
        .expect("connect");
    let out = net.poll();
    assert_eq!(out.len(), 1, "{out:?}");
    assert!(
        matches!(out[0].arp(), Some(ArpRepr::EthernetIpv4 { operation: ArpOperation::Request, target_protocol_addr, .. }) if target_protocol_addr == neighbour),
        "{out:?}"
    );
    assert_peer_answered(&mut net, 40001);
}

/// Defence in depth behind the input checks: where replies take the MAC of the frame
/// they answer, a group MAC is refused however one got there: replies outside a
/// connection are not sent, and a SYN makes no connection (whose every frame would go
/// there).
#[test]
fn no_tcp_frame_is_sent_to_a_group_mac() {
    let mut net = listening();
    let key = FlowKey::new(PEER_IP.into(), 40000, PORT, 0);
    let rst = TxSegment {
        seq: SeqNum(1),
        rst: true,
        ..Default::default()
    };
    let syn = syn_from(&net, TO_US, PEER_IP, HOST_IP);
    let (_, packet) = ethernet::parse(&syn).expect("Ethernet");
    let (_, l4) = ipv4::parse(packet, ipv4::Local::new(HOST_IP, 24), false).expect("IPv4");
    let (seg, payload) = Segment::parse(l4, PEER_IP, HOST_IP, false).expect("TCP");
    for (n, group) in (1..).zip(GROUP_MACS) {
        net.eng.send_raw_internal(group, key, &rst);
        net.eng.listen_input_internal(group, key, &seg, payload);
        let out = net.run_for(Duration::from_secs(5), Duration::from_millis(250));
        assert!(out.is_empty(), "to {group}: {out:?}");
        assert_eq!(net.dropped(DropReason::SendToGroupMac), 2 * n);
        assert_eq!(net.eng.connection_count(), 0);
    }
    // The same SYN from the peer's own MAC makes the connection.
    net.eng.listen_input_internal(PEER_MAC, key, &seg, payload);
    let out = tcp_of(&net.poll());
    assert_eq!(out.len(), 1, "{out:?}");
    assert!(
        out[0].is_syn_ack() && out[0].eth.dst == PEER_MAC,
        "{:?}",
        out[0]
    );
}

#[test]
fn arp_from_martian_senders_is_neither_answered_nor_learned() {
    let mut net = listening();
    for sender in [
        Ipv4Addr::new(0, 1, 2, 3),
        Ipv4Addr::new(240, 0, 0, 9),
        Ipv4Addr::new(10, 0, 0, 255), // the /24's directed broadcast
    ] {
        let who_has = arp_frame(
            MacAddr::BROADCAST,
            ArpOperation::Request,
            (PEER_MAC, sender),
            (MacAddr([0; 6]), HOST_IP),
        );
        let what = format!("ARP request from {sender}");
        assert_ignored(&mut net, &who_has, DropReason::MartianSource, &what);
    }
    // An RFC 5227 probe (sender 0.0.0.0) for our address is still answered.
    let probe = arp_frame(
        MacAddr::BROADCAST,
        ArpOperation::Request,
        (PEER_MAC, Ipv4Addr::UNSPECIFIED),
        (MacAddr([0; 6]), HOST_IP),
    );
    assert_eq!(net.send(&probe).len(), 1, "the probe is answered");
    assert_peer_answered(&mut net, 40001);
}

#[test]
fn active_opens_to_addresses_no_peer_can_have_are_refused() {
    let mut net = listening();
    for ip in [
        Ipv4Addr::new(0, 0, 0, 0),
        Ipv4Addr::new(127, 0, 0, 1),
        Ipv4Addr::new(224, 0, 0, 1),
        Ipv4Addr::new(255, 255, 255, 255),
        Ipv4Addr::new(10, 0, 0, 255),
        HOST_IP,
    ] {
        let err = net
            .eng
            .connect(SocketAddr::from((ip, 80)), ())
            .map_err(|(e, _)| e);
        assert_eq!(err.err(), Some(ConnectError::InvalidAddress), "{ip}");
    }
    let err = net
        .eng
        .connect(SocketAddr::from((PEER_IP, 0)), ())
        .map_err(|(e, _)| e);
    assert_eq!(err.err(), Some(ConnectError::InvalidAddress), "port 0");
    assert!(net.poll().is_empty(), "nothing sent");
    assert!(net.eng.connect(SocketAddr::from((PEER_IP, 80)), ()).is_ok());
}
