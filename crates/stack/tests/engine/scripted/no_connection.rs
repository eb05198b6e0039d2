//! Segments for no connection get the RST RFC 9293 §3.10.7.1 prescribes, and RSTs get
//! nothing.

use super::*;

#[test]
fn closed_port_answers_with_rst() {
    let mut net = Net::new(config(), Recorder::default());
    net.eng.listen(PORT, 16);
    let closed = 81u16;

    // SYN: RST+ACK, SEQ 0, ACK = SEG.SEQ + SEG.LEN (RFC 9293 §3.10.7.1).
    let syn = syn_seg(&net, SeqNum(1000), FULL);
    let out = tcp_of(&net.send(&tcp_frame_from(PEER_MAC, PEER_IP, 40000, closed, &syn, &[])));
    assert_eq!(out.len(), 1, "{out:?}");
    let r = &out[0];
    assert!(r.is_rst() && r.seg.flags.ack && !r.seg.flags.syn);
    assert_eq!(r.seg.seq, SeqNum(0));
    assert_eq!(r.seg.ack, SeqNum(1001));
    assert_eq!((r.seg.src_port, r.seg.dst_port), (closed, 40000));
    assert_eq!((r.ip.src, r.ip.dst), (HOST_IP, PEER_IP));
    assert_eq!((r.eth.src, r.eth.dst), (HOST_MAC, PEER_MAC));
    assert!(r.payload.is_empty());
    assert_eq!(r.seg.mss, None);
    assert_eq!(r.seg.timestamp, None);
    assert_eq!(net.dropped(DropReason::NoListener), 1);
    assert_eq!(net.stats().rsts_sent, 1);

    // ACK: RST with SEQ = SEG.ACK and no ACK bit.
    let ack = TxSegment {
        seq: SeqNum(5),
        ack: Some(SeqNum(7777)),
        window: 100,
        ..Default::default()
    };
    let out = tcp_of(&net.send(&tcp_frame_from(
        PEER_MAC, PEER_IP, 40001, closed, &ack, b"xyz",
    )));
    assert_eq!(out.len(), 1, "{out:?}");
    assert!(out[0].is_rst() && !out[0].seg.flags.ack);
    assert_eq!(out[0].seg.seq, SeqNum(7777));
    assert_eq!(net.dropped(DropReason::NoConnection), 1);

    // FIN with data, no ACK bit: SEG.LEN counts the data and the FIN.
    let fin = TxSegment {
        seq: SeqNum(300),
        fin: true,
        ..Default::default()
    };
    let out = tcp_of(&net.send(&tcp_frame_from(
        PEER_MAC, PEER_IP, 40002, closed, &fin, b"abc",
    )));
    assert_eq!(out.len(), 1, "{out:?}");
    assert!(out[0].is_rst() && out[0].seg.flags.ack);
    assert_eq!(out[0].seg.ack, SeqNum(304));
    assert_eq!(net.dropped(DropReason::NoConnection), 2);

    // RST: never answered.
    let rst = TxSegment {
        seq: SeqNum(9),
        rst: true,
        ..Default::default()
    };
    assert!(net
        .send(&tcp_frame_from(PEER_MAC, PEER_IP, 40003, closed, &rst, &[]))
        .is_empty());
    let rst_ack = TxSegment {
        seq: SeqNum(9),
        ack: Some(SeqNum(10)),
        rst: true,
        ..Default::default()
    };
    assert!(net
        .send(&tcp_frame_from(
            PEER_MAC,
            PEER_IP,
            40003,
            closed,
            &rst_ack,
            &[]
        ))
        .is_empty());
    assert_eq!(net.dropped(DropReason::NoConnection), 4);
    assert_eq!(net.stats().rsts_sent, 3);

    // On the listening port, a stray ACK (no cookie matches) is also reset, a stray RST
    // is ignored.
    let out = tcp_of(&net.send(&tcp_frame(40004, &ack, &[])));
    assert_eq!(out.len(), 1);
    assert!(out[0].is_rst());
    assert_eq!(out[0].seg.seq, SeqNum(7777));
    assert!(net.send(&tcp_frame(40004, &rst, &[])).is_empty());
    assert_eq!(net.eng.connection_count(), 0);
}

#[test]
fn on_a_shared_link_segments_for_no_connection_are_dropped_unanswered() {
    // Another engine on the link may own the flow: a reset would end its connection.
    let mut cfg = config();
    cfg.shared_link = true;
    let mut net = Net::new(cfg, Recorder::default());
    net.eng.listen(PORT, 16);
    let closed = 81u16;
    let syn = syn_seg(&net, SeqNum(1000), FULL);
    let out = net.send(&tcp_frame_from(PEER_MAC, PEER_IP, 40000, closed, &syn, &[]));
    assert!(tcp_of(&out).is_empty(), "{out:?}");
    assert_eq!(net.dropped(DropReason::NoListener), 1);
    // An ACK to the listening port that no cookie explains: another engine's
    // connection, its handshake done there.
    let ack = TxSegment {
        seq: SeqNum(5),
        ack: Some(SeqNum(7777)),
        window: 100,
        ..Default::default()
    };
    let out = net.send(&tcp_frame_from(
        PEER_MAC, PEER_IP, 40001, PORT, &ack, b"xyz",
    ));
    assert!(tcp_of(&out).is_empty(), "{out:?}");
    assert_eq!(net.dropped(DropReason::NoConnection), 1);
    assert_eq!(net.stats().rsts_sent, 0);
    // Told which ports the link's engines listen on, the engine refuses a SYN for
    // another port, drops one for a port another engine listens on, and still
    // leaves other segments for no connection unanswered.
    net.eng.set_link_listeners(vec![83, PORT]);
    let out = tcp_of(&net.send(&tcp_frame_from(PEER_MAC, PEER_IP, 40003, closed, &syn, &[])));
    assert!(out.len() == 1 && out[0].is_rst(), "{out:?}");
    let out = net.send(&tcp_frame_from(PEER_MAC, PEER_IP, 40004, 83, &syn, &[]));
    assert!(tcp_of(&out).is_empty(), "{out:?}");
    let out = net.send(&tcp_frame_from(
        PEER_MAC, PEER_IP, 40005, closed, &ack, b"xyz",
    ));
    assert!(tcp_of(&out).is_empty(), "{out:?}");
    assert_eq!(net.stats().rsts_sent, 1);
    // Turned off again, the stack answers as RFC 9293 says.
    net.eng.set_shared_link(false);
    let out = tcp_of(&net.send(&tcp_frame_from(PEER_MAC, PEER_IP, 40002, closed, &syn, &[])));
    assert!(out.len() == 1 && out[0].is_rst(), "{out:?}");
}
