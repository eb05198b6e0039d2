//! ARP: the announcement, answers, resolution and giving up on a silent neighbour; the
//! gateway for off-link destinations; a neighbour that moves to another MAC.

use super::*;

#[test]
fn arp_announce_answer_resolve_and_give_up() {
    let mut net = Net::new(config(), Recorder::default());

    // A gratuitous ARP at start (RFC 5227 §2.3).
    assert_eq!(net.boot.len(), 1, "{:?}", net.boot);
    assert_eq!(net.boot[0].eth().dst, MacAddr::BROADCAST);
    assert_eq!(net.boot[0].eth().src, HOST_MAC);
    assert_eq!(
        net.boot[0].arp(),
        Some(ArpRepr::EthernetIpv4 {
            operation: ArpOperation::Request,
            source_hardware_addr: EthernetAddress(HOST_MAC.0),
            source_protocol_addr: HOST_IP,
            target_hardware_addr: EthernetAddress([0; 6]),
            target_protocol_addr: HOST_IP,
        })
    );
    // Only once.
    assert!(net.advance(Duration::from_secs(1)).is_empty());

    // A request for our address is answered, unicast.
    let who_has = |target| {
        arp_frame(
            MacAddr::BROADCAST,
            ArpOperation::Request,
            (PEER_MAC, PEER_IP),
            (MacAddr([0; 6]), target),
        )
    };
    let out = net.send(&who_has(HOST_IP));
    assert_eq!(out.len(), 1, "{out:?}");
    assert_eq!(out[0].eth().dst, PEER_MAC);
    assert_eq!(
        out[0].arp(),
        Some(ArpRepr::EthernetIpv4 {
            operation: ArpOperation::Reply,
            source_hardware_addr: EthernetAddress(HOST_MAC.0),
            source_protocol_addr: HOST_IP,
            target_hardware_addr: EthernetAddress(PEER_MAC.0),
            target_protocol_addr: PEER_IP,
        })
    );
    assert_eq!(net.stats().arp_replies_sent, 1);
    // ... and not for anyone else's.
    assert!(net.send(&who_has(Ipv4Addr::new(10, 0, 0, 99))).is_empty());
    assert_eq!(net.stats().arp_replies_sent, 1);

    // The request taught us the peer's MAC (RFC 826 merge): an active open to it sends
    // its SYN at once.
    net.eng
        .connect(SocketAddr::from((PEER_IP, 8080)), ())
        .map_err(|(e, _)| e)
        .expect("connect");
    let out = net.poll();
    assert_eq!(out.len(), 1, "{out:?}");
    let syn = out[0].tcp().expect("a SYN");
    assert!(syn.seg.flags.syn && !syn.seg.flags.ack);
    assert_eq!(syn.eth.dst, PEER_MAC);
    // Nobody listens there: the peer refuses.
    let refuse = TxSegment {
        seq: SeqNum(0),
        ack: Some(syn.seg.seq + 1),
        rst: true,
        ..Default::default()
    };
    let out = net.send(&tcp_frame_from(
        PEER_MAC,
        PEER_IP,
        8080,
        syn.seg.src_port,
        &refuse,
        &[],
    ));
    assert!(out.is_empty(), "{out:?}");
    assert_eq!(net.handler().closed, vec![CloseReason::Refused]);

    // An unknown neighbour: ARP first, the SYN after the reply, to the right MAC.
    let remote = Ipv4Addr::new(10, 0, 0, 7);
    let remote_mac = MacAddr([0x02, 0, 0, 0, 0, 0x07]);
    let requests = net.stats().arp_requests_sent;
    net.eng
        .connect(SocketAddr::from((remote, 80)), ())
        .map_err(|(e, _)| e)
        .expect("connect");
    let out = net.poll();
    assert_eq!(out.len(), 1, "{out:?}");
    assert_eq!(out[0].eth().dst, MacAddr::BROADCAST);
    assert_eq!(
        out[0].arp(),
        Some(ArpRepr::EthernetIpv4 {
            operation: ArpOperation::Request,
            source_hardware_addr: EthernetAddress(HOST_MAC.0),
            source_protocol_addr: HOST_IP,
            target_hardware_addr: EthernetAddress([0; 6]),
            target_protocol_addr: remote,
        })
    );
    assert_eq!(net.stats().arp_requests_sent, requests + 1);

    let reply = arp_frame(
        HOST_MAC,
        ArpOperation::Reply,
        (remote_mac, remote),
        (HOST_MAC, HOST_IP),
    );
    let out = net.send(&reply);
    assert_eq!(out.len(), 1, "{out:?}");
    let syn = out[0].tcp().expect("the parked SYN");
    assert_eq!((syn.eth.src, syn.eth.dst), (HOST_MAC, remote_mac));
    assert_eq!((syn.ip.src, syn.ip.dst), (HOST_IP, remote));
    assert_eq!(syn.seg.dst_port, 80);
    assert!(syn.seg.flags.syn && !syn.seg.flags.ack);
    assert_eq!(syn.seg.mss, Some(1460));
    assert!(syn.seg.wscale.is_some() && syn.seg.sack_permitted && syn.seg.timestamp.is_some());

    // The remote answers; the handshake completes and the handler hears of it.
    let syn_ack = TxSegment {
        seq: SeqNum(9000),
        ack: Some(syn.seg.seq + 1),
        syn: true,
        window: 65535,
        mss: Some(1460),
        timestamp: Some((1, syn.tsval())),
        ..Default::default()
    };
    let out = tcp_of(&net.send(&tcp_frame_from(
        remote_mac,
        remote,
        80,
        syn.seg.src_port,
        &syn_ack,
        &[],
    )));
    assert_eq!(out.len(), 1, "{out:?}");
    assert!(out[0].is_pure_ack());
    assert_eq!(out[0].seg.seq, syn.seg.seq + 1);
    assert_eq!(out[0].seg.ack, SeqNum(9001));
    assert_eq!(out[0].eth.dst, remote_mac);
    assert_eq!(
        net.handler().connected,
        vec![SocketAddr::from((remote, 80))]
    );

    // Nobody answers for 10.0.0.8: requests are retried, the SYN never leaves, and the
    // active open eventually times out.
    let silent = Ipv4Addr::new(10, 0, 0, 8);
    let before = net.stats().arp_requests_sent;
    net.eng
        .connect(SocketAddr::from((silent, 80)), ())
        .map_err(|(e, _)| e)
        .expect("connect");
    let out = net.run_for(Duration::from_secs(300), Duration::from_millis(100));
    let requests = arp_requests(&out);
    let asked = requests.iter().filter(|r| r.1 == silent).count();
    assert!(asked >= 4, "only {asked} ARP requests");
    assert!(requests
        .iter()
        .all(|r| r.0 == MacAddr::BROADCAST || r.1 != silent));
    // Besides, the refused SYN had made the peer's entry DELAY, and nothing confirmed
    // it since: it was probed, unicast (RFC 4861 §7.3.3, as Linux runs it for ARP).
    assert_eq!(
        requests
            .iter()
            .filter(|r| r.1 != silent)
            .collect::<Vec<_>>(),
        vec![&(PEER_MAC, PEER_IP); 3]
    );
    assert_eq!(net.stats().neighbour_probes_sent, 3);
    assert_eq!(net.stats().neighbours_unreachable, 1);
    assert_eq!(
        net.stats().arp_requests_sent - before,
        requests.len() as u64
    );
    let to_silent = tcp_of(&out)
        .into_iter()
        .filter(|t| t.ip.dst == silent)
        .count();
    assert_eq!(to_silent, 0);
    assert!(net.dropped(DropReason::ArpUnresolved) >= 1);
    assert_eq!(
        net.handler().closed,
        vec![CloseReason::Refused, CloseReason::TimedOut]
    );
    assert_eq!(net.stats().conns_timed_out, 1);
    assert!(net.eng.connection_states().all(|(r, _)| r.ip() != silent));
}

#[test]
fn off_link_destinations_go_through_the_gateway() {
    let (gateway, gateway_mac, far) = (GATEWAY, GATEWAY_MAC, FAR);
    let mut net = gateway_net();
    net.eng
        .connect(SocketAddr::from((far, 80)), ())
        .map_err(|(e, _)| e)
        .expect("connect");
    let out = net.poll();
    assert_eq!(out.len(), 1, "{out:?}");
    match out[0].arp() {
        Some(ArpRepr::EthernetIpv4 {
            operation: ArpOperation::Request,
            target_protocol_addr,
            ..
        }) => assert_eq!(target_protocol_addr, gateway),
        other => panic!("expected an ARP request for the gateway, got {other:?}"),
    }
    let reply = arp_frame(
        HOST_MAC,
        ArpOperation::Reply,
        (gateway_mac, gateway),
        (HOST_MAC, HOST_IP),
    );
    let out = tcp_of(&net.send(&reply));
    assert_eq!(out.len(), 1, "{out:?}");
    assert_eq!(out[0].eth.dst, gateway_mac);
    assert_eq!(out[0].ip.dst, far);
    assert!(out[0].seg.flags.syn);
}

/// When ARP learns that a neighbour's address moved to another MAC, connections that
/// cached the old one follow.
#[test]
fn changed_arp_mapping_updates_cached_next_hop() {
    const NEW_MAC: MacAddr = MacAddr([0x02, 0, 0, 0, 0, 0x77]);
    let mut net = Net::new(config(), echo());
    net.eng.listen(PORT, 16);
    let mut pc = connect_peer(&mut net, 40000, SeqNum(1000), BARE);
    let out = tcp_of(&net.send(&arp_frame(
        MacAddr::BROADCAST,
        ArpOperation::Request,
        (PEER_MAC, PEER_IP),
        (MacAddr([0; 6]), HOST_IP),
    )));
    assert!(out.is_empty());
    let out = pc.data(&mut net, b"one");
    assert_eq!(out[0].eth.dst, PEER_MAC);
    // The peer's address moves (gratuitous ARP from the new NIC).
    net.send(&arp_frame(
        MacAddr::BROADCAST,
        ArpOperation::Request,
        (NEW_MAC, PEER_IP),
        (MacAddr([0; 6]), PEER_IP),
    ));
    pc.mac = NEW_MAC;
    let out = pc.data(&mut net, b"two");
    assert_eq!(out[0].payload, b"two");
    assert_eq!(out[0].eth.dst, NEW_MAC);
}
