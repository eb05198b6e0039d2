//! TCP to the engine's link-local address, beside its configured one: a flow names the
//! address it came to, and its segments leave from that address.

use super::*;

/// A peer reaches the engine at its link-local address and at its configured one from
/// the same port: two connections, each answered from the address it came to.
#[test]
fn syns_to_each_of_our_addresses_are_answered_from_it() {
    let mut net = listening6();
    let link_local = net
        .eng
        .internals()
        .ipv6_addresses()
        .find(|(ip, usable)| ip.is_unicast_link_local() && *usable)
        .map(|(ip, _)| ip)
        .expect("a usable link-local address");
    let peer_ll = Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0, 0, 1);
    for (peer, ours) in [(peer_ll, link_local), (PEER6, HOST6)] {
        let syn = syn_seg(&net, SeqNum(1000), FULL);
        let tcp = tcp_bytes_to(peer, ours, 40000, PORT, &syn, &[]);
        let frame = ipv6_frame((PEER_MAC, HOST_MAC), peer, ours, 6, 64, &tcp);
        let out = ipv6_of(&net.send(&frame));
        let replies: Vec<_> = out.iter().filter(|p| p.tcp().is_some()).collect();
        assert_eq!(replies.len(), 1, "to {ours}");
        assert_eq!((replies[0].src, replies[0].dst), (ours, peer));
        let (syn_ack, _) = replies[0].tcp().expect("a segment");
        assert!(syn_ack.flags.syn && syn_ack.flags.ack);
        assert_eq!(syn_ack.ack, SeqNum(1001));
    }
    assert_eq!(net.eng.connection_count(), 2);
}
