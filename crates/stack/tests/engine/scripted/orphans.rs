//! Orphans: past the limit, the oldest one is reset and its slot freed.

use super::*;

#[test]
fn past_max_orphans_the_oldest_orphan_is_reset_and_its_slot_freed() {
    let mut cfg = config();
    cfg.max_orphans = 2;
    let mut net = bye_net(cfg);
    // Each peer asks, gets "bye" and our FIN, and acknowledges neither: an orphan.
    let mut peers: Vec<PeerConn> = Vec::new();
    for (i, port) in [40000u16, 40001, 40002].into_iter().enumerate() {
        let mut pc = connect_peer(&mut net, port, SeqNum(1000 * (i as u32 + 1)), FULL);
        let out = pc.data(&mut net, b"hi");
        assert!(out
            .iter()
            .any(|o| o.seg.dst_port == port && o.seg.flags.fin));
        if i < 2 {
            assert!(out.iter().all(|o| !o.is_rst()), "{out:?}");
        } else {
            // The third orphan is one too many: the oldest, the first peer's, is reset
            // at the sequence number it expects.
            let rst: Vec<_> = out.iter().filter(|o| o.is_rst()).collect();
            assert_eq!(rst.len(), 1, "{out:?}");
            assert_eq!(rst[0].seg.dst_port, 40000);
            assert_eq!(rst[0].seg.seq, peers[0].rcv_nxt);
        }
        peers.push(pc);
    }
    assert_eq!(net.stats().orphans_reset, 1);
    assert_eq!(net.handler().closed, vec![CloseReason::Aborted]);
    assert_eq!(net.eng.connection_count(), 2);
    assert_eq!(net.eng.orphan_count(), 2);
    // The second peer finishes properly: its slot comes back through TIME-WAIT, and
    // the orphan count with it.
    let pb = &mut peers[1];
    assert!(pb.ack(&mut net).is_empty());
    assert_eq!(pb.fin(&mut net).len(), 1);
    assert_eq!(net.eng.connection_count(), 1);
    assert_eq!(net.eng.orphan_count(), 1);
    assert_eq!(net.stats().orphans_reset, 1);
}
