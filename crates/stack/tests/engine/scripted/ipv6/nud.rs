//! Neighbour Unreachability Detection over IPv6 (RFC 4861 §7.3): a peer that stops
//! answering is probed with solicitations unicast to it, then forgotten and resolved
//! again through its solicited-node group; a peer whose connection makes progress is
//! never probed; advertisements and solicitations from a neighbour move its entry as
//! RFC 4861 §7.2.3 and §7.2.5 say, and the connection follows.

use super::*;
use rusty_stack::internals::Nud;

const NEW_MAC: MacAddr = MacAddr([0x02, 0, 0, 0, 0, 0x77]);

/// The peer's side of an IPv6 connection to the engine's port.
struct Peer6 {
    /// The MAC its frames come from.
    mac: MacAddr,
    port: u16,
    snd_nxt: SeqNum,
    rcv_nxt: SeqNum,
    ts_recent: u32,
}

impl Peer6 {
    /// Send `payload` (maybe none) acknowledging all it has seen; returns the segments
    /// the engine sent back, with their Ethernet destinations.
    fn send(&mut self, net: &mut Net, payload: &[u8]) -> Vec<(MacAddr, Segment, Vec<u8>)> {
        let seg = TxSegment {
            seq: self.snd_nxt,
            ack: Some(self.rcv_nxt),
            window: 65535,
            psh: !payload.is_empty(),
            timestamp: Some((net.peer_tsval(), self.ts_recent)),
            ..Default::default()
        };
        self.snd_nxt += payload.len();
        let tcp = tcp_bytes_to(PEER6, HOST6, self.port, PORT, &seg, payload);
        let frame = ipv6_frame((self.mac, HOST_MAC), PEER6, HOST6, 6, 64, &tcp);
        let out = segments(&net.send(&frame));
        self.observe(&out);
        out
    }

    /// Follow the engine's sequence space and timestamps in `out`.
    fn observe(&mut self, out: &[(MacAddr, Segment, Vec<u8>)]) {
        for (_, s, _) in out {
            if let Some((tsval, _)) = s.timestamp {
                self.ts_recent = tsval;
            }
            if s.seq + s.seg_len() > self.rcv_nxt {
                self.rcv_nxt = s.seq + s.seg_len();
            }
        }
    }
}

/// The TCP segments among `frames`, with their Ethernet destinations.
fn segments(frames: &[Frame]) -> Vec<(MacAddr, Segment, Vec<u8>)> {
    ipv6_of(frames)
        .iter()
        .filter_map(|p| p.tcp().map(|(s, d)| (p.eth.dst, s, d)))
        .collect()
}

/// The Neighbor Solicitations among `frames`: (Ethernet destination, IPv6 destination,
/// target), each checked to carry our MAC.
fn solicitations(frames: &[Frame]) -> Vec<(MacAddr, Ipv6Addr, Ipv6Addr)> {
    let packets = ipv6_of(frames);
    solicitations_in(&packets)
        .into_iter()
        .map(|(p, target, lladdr)| {
            assert_eq!(lladdr, Some(RawHardwareAddress::from_bytes(&HOST_MAC.0)));
            (p.eth.dst, p.dst, target)
        })
        .collect()
}

/// An advertisement of the peer at `mac`, with the flags given.
fn advertisement_of_peer(mac: MacAddr, solicited: bool, override_: bool) -> Vec<u8> {
    advertisement_flags(PEER6, PEER6, mac, solicited, override_)
}

/// A listening engine with a connection from the peer over IPv6, one request answered
/// and acknowledged.
fn connected6() -> (Net, Peer6) {
    let mut net = listening6();
    let syn = syn_seg(&net, SeqNum(1000), FULL);
    let out = segments(&net.send(&tcp6_frame(40000, &syn, &[])));
    assert!(out[0].1.flags.syn && out[0].0 == PEER_MAC);
    let mut peer = Peer6 {
        mac: PEER_MAC,
        port: 40000,
        snd_nxt: SeqNum(1001),
        rcv_nxt: out[0].1.seq + 1,
        ts_recent: 0,
    };
    peer.observe(&out);
    assert!(peer.send(&mut net, &[]).is_empty());
    assert_eq!(peer.send(&mut net, b"hello")[0].2, b"hello");
    peer.send(&mut net, &[]);
    (net, peer)
}

fn state(net: &Net) -> Option<(Nud, Option<MacAddr>)> {
    net.eng.internals().neighbour(PEER6)
}

#[test]
fn a_peer_that_stops_answering_is_probed_then_forgotten_and_resolved_again() {
    let (mut net, mut peer) = connected6();
    let out = net.run_for(Duration::from_secs(10), Duration::from_millis(100));
    assert!(solicitations(&out).is_empty());
    assert_eq!(state(&net), Some((Nud::Reachable, Some(PEER_MAC))));

    // Its last request's echo is never acknowledged.
    assert_eq!(peer.send(&mut net, b"ping")[0].2, b"ping");
    let out = net.run_for(Duration::from_secs(150), Duration::from_millis(100));
    let asked = solicitations(&out);
    // Three probes to the peer itself at its cached MAC, then resolution through its
    // solicited-node group.
    assert!(asked.len() > 3, "{asked:?}");
    assert_eq!(asked[..3], [(PEER_MAC, PEER6, PEER6); 3]);
    let group = solicited_node(PEER6);
    assert!(asked[3..]
        .iter()
        .all(|&s| s == (group_mac(group), group, PEER6)));
    assert_eq!(net.stats().neighbour_probes_sent, 3);
    assert_eq!(net.stats().neighbours_unreachable, 1);
    let first_group = out
        .iter()
        .position(|f| f.eth().dst == group_mac(group))
        .expect("a solicitation to the group");
    let retransmitted = segments(&out[..first_group]);
    assert!(!retransmitted.is_empty());
    assert!(retransmitted
        .iter()
        .all(|(mac, _, d)| *mac == PEER_MAC && d == b"ping"));
    assert!(segments(&out[first_group..]).is_empty());

    // It answers from a new NIC: the retransmission waiting goes there.
    let mut out = Vec::new();
    while solicitations(&out).is_empty() {
        out = net.advance(Duration::from_millis(100));
    }
    let out = segments(&net.send(&advertisement(PEER6, NEW_MAC, true)));
    assert!(!out.is_empty() && out.iter().all(|(mac, _, _)| *mac == NEW_MAC));
    peer.observe(&out);
    peer.mac = NEW_MAC;
    assert!(peer.send(&mut net, &[]).is_empty());
    assert_eq!(peer.send(&mut net, b"back")[0].0, NEW_MAC);
    assert_eq!(state(&net), Some((Nud::Reachable, Some(NEW_MAC))));
}

#[test]
fn a_peer_whose_connection_makes_progress_is_never_probed() {
    let (mut net, mut peer) = connected6();
    for _ in 0..600 {
        assert_eq!(peer.send(&mut net, b"req")[0].2, b"req");
        peer.send(&mut net, &[]);
        let out = net.advance(Duration::from_secs(1));
        assert!(solicitations(&out).is_empty());
    }
    assert_eq!(state(&net), Some((Nud::Reachable, Some(PEER_MAC))));
    assert_eq!(net.stats().neighbour_probes_sent, 0);
    assert_eq!(net.stats().neighbor_solicitations_sent, 0);
}

/// RFC 4861 §7.2.5 and §7.2.3 on the wire: what the neighbour says moves its entry,
/// and the connection sends where the entry says.
#[test]
fn what_the_neighbour_says_moves_the_connection() {
    let (mut net, mut peer) = connected6();
    net.run_for(Duration::from_secs(10), Duration::from_millis(100));
    assert_eq!(state(&net), Some((Nud::Reachable, Some(PEER_MAC))));
    // Another address without Override only makes a REACHABLE entry STALE.
    assert!(net
        .send(&advertisement_of_peer(NEW_MAC, false, false))
        .is_empty());
    assert_eq!(state(&net), Some((Nud::Stale, Some(PEER_MAC))));
    let out = peer.send(&mut net, b"one");
    assert_eq!(out[0].0, PEER_MAC);
    assert_eq!(state(&net).map(|s| s.0), Some(Nud::Delay));
    peer.send(&mut net, &[]);
    // With Override, the new address, STALE; the next segment goes there (DELAY).
    net.send(&advertisement_of_peer(NEW_MAC, false, true));
    assert_eq!(state(&net), Some((Nud::Stale, Some(NEW_MAC))));
    peer.mac = NEW_MAC;
    assert_eq!(peer.send(&mut net, b"two")[0].0, NEW_MAC);
    assert_eq!(state(&net).map(|s| s.0), Some(Nud::Delay));
    peer.send(&mut net, &[]);
    // A solicitation from it with its old address: STALE there, and answered.
    let ns = Icmpv6Repr::Ndisc(NdiscRepr::NeighborSolicit {
        target_addr: HOST6,
        lladdr: Some(RawHardwareAddress::from_bytes(&PEER_MAC.0)),
    });
    let icmp = icmpv6(PEER6, HOST6, &ns);
    let out = ipv6_of(&net.send(&ipv6_frame(
        (PEER_MAC, HOST_MAC),
        PEER6,
        HOST6,
        58,
        255,
        &icmp,
    )));
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].eth.dst, PEER_MAC);
    assert_eq!(state(&net), Some((Nud::Stale, Some(PEER_MAC))));
    peer.mac = PEER_MAC;
    assert_eq!(peer.send(&mut net, b"three")[0].0, PEER_MAC);
    // A solicited advertisement confirms it.
    net.send(&advertisement_of_peer(PEER_MAC, true, false));
    assert_eq!(state(&net), Some((Nud::Reachable, Some(PEER_MAC))));
    assert_eq!(net.stats().neighbour_probes_sent, 0);
}
