//! Neighbour Unreachability Detection over ARP (RFC 4861 §7.3, run for IPv4 as Linux
//! runs it): a peer that stops answering is probed with unicast ARP requests, then
//! forgotten and resolved again by broadcast; a peer (or gateway) whose connection
//! makes progress is never probed; a neighbour nobody sends to is left alone.

use super::*;
use rusty_stack::internals::Nud;

const NEW_MAC: MacAddr = MacAddr([0x02, 0, 0, 0, 0, 0x77]);

/// An echo engine with a connection from the peer, one request answered and
/// acknowledged.
fn connected() -> (Net, PeerConn) {
    let mut net = Net::new(config(), echo());
    net.eng.listen(PORT, 16);
    let mut pc = connect_peer(&mut net, 40000, SeqNum(1000), FULL);
    let out = pc.data(&mut net, b"hello");
    assert_eq!(out[0].payload, b"hello");
    pc.ack(&mut net);
    (net, pc)
}

#[test]
fn a_peer_that_stops_answering_is_probed_then_forgotten_and_resolved_again() {
    let (mut net, mut pc) = connected();
    // The SYN-ACK went to the MAC the SYN came from; the handshake's ACK confirmed it.
    let out = net.run_for(Duration::from_secs(10), Duration::from_millis(100));
    assert!(arp_requests(&out).is_empty(), "{out:?}");
    assert_eq!(
        net.eng.internals().neighbour(PEER_IP),
        Some((Nud::Reachable, Some(PEER_MAC)))
    );

    // The peer's host goes away: the echo of its last request is never acknowledged.
    let out = pc.data(&mut net, b"ping");
    assert_eq!(out[0].payload, b"ping");
    let out = net.run_for(Duration::from_secs(150), Duration::from_millis(100));
    let requests = arp_requests(&out);
    // Once ReachableTime passed without progress, a retransmission finds the entry
    // STALE and makes it DELAY; five seconds on, three probes unicast to the cached
    // MAC, a second apart; then it is forgotten and resolved again, by broadcast.
    assert!(requests.len() > 3, "{requests:?}");
    assert_eq!(requests[..3], [(PEER_MAC, PEER_IP); 3]);
    assert!(requests[3..]
        .iter()
        .all(|&r| r == (MacAddr::BROADCAST, PEER_IP)));
    assert_eq!(net.stats().neighbour_probes_sent, 3);
    assert_eq!(net.stats().neighbours_unreachable, 1);
    // Retransmissions went to the cached MAC until then, and none since.
    let first_broadcast = out
        .iter()
        .position(|f| f.eth().dst == MacAddr::BROADCAST)
        .expect("a broadcast request");
    let retransmitted = tcp_of(&out[..first_broadcast]);
    assert!(!retransmitted.is_empty());
    assert!(retransmitted
        .iter()
        .all(|t| t.eth.dst == PEER_MAC && t.payload == b"ping"));
    assert!(tcp_of(&out[first_broadcast..]).is_empty());
    assert!(net.dropped(DropReason::ArpUnresolved) >= 1);
    assert_eq!(net.eng.connection_count(), 1);

    // The peer comes back behind a new NIC and answers the next request: the
    // retransmission waiting for it goes there, and its acknowledgement confirms it.
    let mut out = Vec::new();
    while arp_requests(&out).is_empty() {
        out = net.advance(Duration::from_millis(100));
    }
    let reply = arp_frame(
        HOST_MAC,
        ArpOperation::Reply,
        (NEW_MAC, PEER_IP),
        (HOST_MAC, HOST_IP),
    );
    let out = tcp_of(&net.send(&reply));
    assert!(!out.is_empty());
    assert!(out.iter().all(|t| t.eth.dst == NEW_MAC));
    pc.mac = NEW_MAC;
    pc.observe(&out);
    assert!(pc.ack(&mut net).is_empty());
    let out = pc.data(&mut net, b"back");
    assert_eq!(
        (out[0].eth.dst, &out[0].payload[..]),
        (NEW_MAC, &b"back"[..])
    );
    assert_eq!(
        net.eng.internals().neighbour(PEER_IP),
        Some((Nud::Reachable, Some(NEW_MAC)))
    );
    assert_eq!(net.stats().neighbours_unreachable, 1);
}

/// Requests answered and acknowledged for ten minutes: TCP's progress confirms the
/// neighbour each time its reachability runs out, so it is never probed; a connection
/// quiet for minutes lets it go STALE and sends nothing for it; traffic again makes it
/// DELAY, and the next acknowledgement REACHABLE without a probe.
#[test]
fn a_peer_whose_connection_makes_progress_is_never_probed() {
    let (mut net, mut pc) = connected();
    for _ in 0..600 {
        let out = pc.data(&mut net, b"req");
        assert_eq!(out[0].payload, b"req");
        pc.ack(&mut net);
        let out = net.advance(Duration::from_secs(1));
        assert!(arp_requests(&out).is_empty(), "{out:?}");
        // DELAY for the first seconds (the SYN-ACK went to a MAC only the SYN vouched
        // for), REACHABLE from then on.
        let state = net.eng.internals().neighbour(PEER_IP).map(|n| n.0);
        assert!(
            matches!(state, Some(Nud::Delay | Nud::Reachable)),
            "{state:?}"
        );
    }
    assert_eq!(
        net.eng.internals().neighbour(PEER_IP).map(|n| n.0),
        Some(Nud::Reachable)
    );
    let out = net.run_for(Duration::from_secs(120), Duration::from_secs(1));
    assert!(out.is_empty(), "{out:?}");
    assert_eq!(
        net.eng.internals().neighbour(PEER_IP),
        Some((Nud::Stale, Some(PEER_MAC)))
    );
    let out = pc.data(&mut net, b"again");
    assert_eq!(out[0].eth.dst, PEER_MAC);
    assert_eq!(
        net.eng.internals().neighbour(PEER_IP).map(|n| n.0),
        Some(Nud::Delay)
    );
    pc.ack(&mut net);
    let out = net.run_for(Duration::from_secs(10), Duration::from_millis(100));
    assert!(out.is_empty(), "{out:?}");
    assert_eq!(
        net.eng.internals().neighbour(PEER_IP).map(|n| n.0),
        Some(Nud::Reachable)
    );
    assert_eq!(net.stats().neighbour_probes_sent, 0);
    assert_eq!(net.stats().arp_requests_sent, 0);
}

/// The neighbour toward an off-link peer is the gateway: the connection's progress
/// confirms it.
#[test]
fn progress_through_a_gateway_confirms_the_gateway() {
    let (gateway, gateway_mac, far) = (GATEWAY, GATEWAY_MAC, FAR);
    let mut net = gateway_net();
    net.eng.listen(PORT, 16);
    let syn = syn_seg(&net, SeqNum(1000), FULL);
    let out = tcp_of(&net.send(&tcp_frame_from(gateway_mac, far, 40000, PORT, &syn, &[])));
    assert!(out[0].is_syn_ack());
    assert_eq!(out[0].eth.dst, gateway_mac);
    let mut pc = PeerConn::after_syn_ack(40000, SeqNum(1000), FULL, &out[0]);
    (pc.mac, pc.ip) = (gateway_mac, far);
    assert!(pc.ack(&mut net).is_empty());
    for _ in 0..200 {
        assert_eq!(pc.data(&mut net, b"req")[0].eth.dst, gateway_mac);
        pc.ack(&mut net);
        let out = net.advance(Duration::from_secs(1));
        assert!(arp_requests(&out).is_empty(), "{out:?}");
    }
    assert_eq!(
        net.eng.internals().neighbour(gateway),
        Some((Nud::Reachable, Some(gateway_mac)))
    );
    assert_eq!(net.eng.internals().neighbour(far), None);
    assert_eq!(net.stats().neighbour_probes_sent, 0);
}

/// Every connection through a neighbour follows it to a new MAC, however many came and
/// went through it before (their slots taken again by new ones).
#[test]
fn every_connection_through_a_neighbour_follows_it() {
    let mut net = Net::new(config(), echo());
    net.eng.listen(PORT, 64);
    let mut peers: Vec<PeerConn> = (0..40)
        .map(|i| connect_peer(&mut net, 40000 + i, SeqNum(1000), FULL))
        .collect();
    for mut pc in peers.drain(..30) {
        let seq = pc.snd_nxt;
        assert!(pc.rst(&mut net, seq).is_empty());
    }
    peers.extend((0..40).map(|i| connect_peer(&mut net, 41000 + i, SeqNum(5000), FULL)));
    assert_eq!(net.eng.connection_count(), 50);
    // The neighbour's address moves to another NIC (a gratuitous ARP from it).
    net.send(&arp_frame(
        MacAddr::BROADCAST,
        ArpOperation::Request,
        (NEW_MAC, PEER_IP),
        (MacAddr([0; 6]), PEER_IP),
    ));
    for pc in &mut peers {
        pc.mac = NEW_MAC;
        let out = pc.data(&mut net, b"x");
        assert_eq!((out[0].eth.dst, &out[0].payload[..]), (NEW_MAC, &b"x"[..]));
    }
}
