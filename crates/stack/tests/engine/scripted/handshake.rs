//! The handshake: a refused accept, the connection limit, SYN-ACK retransmission and the
//! half-open backlog, an active open through SYN-SENT, and ISNs that do not reveal the
//! clock.

use super::*;

#[test]
fn refused_accept_resets_the_peer() {
    let mut net = Net::new(
        config(),
        Recorder {
            refuse: true,
            ..Default::default()
        },
    );
    net.eng.listen(PORT, 1);
    let out = send_syn(&mut net, 40000, SeqNum(1000), FULL);
    assert_eq!(out.len(), 1);
    let sa = out[0].clone();
    assert!(sa.is_syn_ack());
    let mut pc = PeerConn::after_syn_ack(40000, SeqNum(1000), FULL, &sa);
    let out = pc.ack(&mut net);
    assert_eq!(out.len(), 1, "{out:?}");
    assert!(out[0].is_rst());
    assert_eq!(out[0].seg.seq, sa.seg.seq + 1);
    assert_eq!(
        net.handler().accepted,
        vec![SocketAddr::from((PEER_IP, 40000))]
    );
    assert!(net.handler().connected.is_empty());
    assert!(net.handler().closed.is_empty(), "no state was handed out");
    assert_eq!(net.stats().conns_refused, 1);
    assert_eq!(net.stats().conns_aborted, 1);
    assert_eq!(
        net.stats().rsts_sent,
        1,
        "counted as the kernel backend counts it"
    );
    assert_eq!(net.stats().conns_opened_passive, 0);
    assert_eq!(net.eng.connection_count(), 0);

    // The refused connection no longer counts against the backlog of 1: the next SYN
    // gets a real SYN-ACK, not a cookie.
    let out = send_syn(&mut net, 40001, SeqNum(5), FULL);
    assert!(out[0].is_syn_ack());
    assert_eq!(net.stats().syn_cookies_sent, 0);
    assert_eq!(net.eng.connection_count(), 1);
}

#[test]
fn syns_beyond_max_connections_are_dropped() {
    let mut cfg = config();
    cfg.max_connections = 2;
    let mut net = Net::new(cfg, echo());
    net.eng.listen(PORT, 16);
    let a = send_syn(&mut net, 40000, SeqNum(100), FULL);
    let b = send_syn(&mut net, 40001, SeqNum(200), FULL);
    assert!(a[0].is_syn_ack() && b[0].is_syn_ack());
    assert!(send_syn(&mut net, 40002, SeqNum(300), FULL).is_empty());
    assert_eq!(net.stats().syns_dropped_overload, 1);
    assert_eq!(net.eng.connection_count(), 2);
    // Active opens are refused too.
    let err = net
        .eng
        .connect(SocketAddr::from((PEER_IP, 9)), ())
        .map_err(|(e, _)| e);
    assert_eq!(err, Err(ConnectError::TooManyConnections));

    // The peer resets one half-open connection; room for one more.
    let mut pa = PeerConn::after_syn_ack(40000, SeqNum(100), FULL, &a[0]);
    assert!(pa.rst(&mut net, SeqNum(101)).is_empty());
    assert_eq!(net.eng.connection_count(), 1);
    let out = send_syn(&mut net, 40002, SeqNum(300), FULL);
    assert!(out[0].is_syn_ack());
    assert_eq!(net.eng.connection_count(), 2);
    assert_eq!(net.stats().syns_dropped_overload, 1);
}

#[test]
fn syn_ack_is_retransmitted_then_half_open_expires_and_frees_backlog() {
    let cfg = config();
    let tcp = cfg.tcp.clone();
    let mut net = Net::new(cfg, echo());
    net.eng.listen(PORT, 1);
    let first = send_syn(&mut net, 40000, SeqNum(1000), FULL);
    assert!(first[0].is_syn_ack());
    // A retransmitted SYN gets the same SYN-ACK again (same ISS).
    let again = send_syn(&mut net, 40000, SeqNum(1000), FULL);
    assert_eq!(again.len(), 1, "{again:?}");
    assert!(again[0].is_syn_ack());
    assert_eq!(again[0].seg.seq, first[0].seg.seq);
    assert_eq!(again[0].seg.ack, SeqNum(1001));
    assert_eq!(net.eng.connection_count(), 1);

    // Unanswered, the SYN-ACK is retransmitted with backoff, then the half-open
    // connection is dropped without the application hearing of it. (The peer's host
    // answers ARP: it is on the link.)
    let out =
        tcp_of(&net.run_for_answering_arp(Duration::from_secs(120), Duration::from_millis(50)));
    let syn_acks: Vec<&TcpOut> = out.iter().filter(|t| t.is_syn_ack()).collect();
    assert_eq!(syn_acks.len() as u32, tcp.max_synack_retries, "{out:?}");
    assert!(syn_acks.iter().all(|t| t.seg.seq == first[0].seg.seq));
    assert_eq!(net.eng.connection_count(), 0);
    assert!(net.handler().accepted.is_empty() && net.handler().closed.is_empty());
    assert_eq!(net.stats().conns_timed_out, 1);

    // The backlog slot is free again: a new SYN gets a real SYN-ACK, not a cookie.
    let out = send_syn(&mut net, 40001, SeqNum(7), FULL);
    assert!(out[0].is_syn_ack());
    assert_eq!(net.stats().syn_cookies_sent, 0);
    assert_eq!(net.eng.connection_count(), 1);
}

/// Calling `listen` again on a listening port keeps the count of half-open connections.
#[test]
fn listen_again_keeps_the_half_open_count() {
    let mut net = Net::new(config(), echo());
    net.eng.listen(PORT, 1);
    let out = send_syn(&mut net, 40001, SeqNum(1000), BARE);
    assert!(out[0].is_syn_ack());
    assert_eq!(net.eng.connection_count(), 1);
    net.eng.listen(PORT, 1);
    // The backlog is still full: a cookie answers, no second block.
    let out = send_syn(&mut net, 40002, SeqNum(2000), BARE);
    assert!(out[0].is_syn_ack());
    assert_eq!(net.eng.connection_count(), 1);
    assert_eq!(net.stats().syn_cookies_sent, 1);
}

#[test]
fn active_open_follows_syn_sent_rules() {
    let mut net = Net::new(config(), echo());
    // Teach the engine the peer's MAC the ordinary way: the peer ARPs for it.
    let who_has = arp_frame(
        MacAddr::BROADCAST,
        ArpOperation::Request,
        (PEER_MAC, PEER_IP),
        (MacAddr([0; 6]), HOST_IP),
    );
    assert_eq!(net.send(&who_has).len(), 1);

    let connect = |net: &mut Net, port| {
        net.eng
            .connect(SocketAddr::from((PEER_IP, port)), ())
            .map_err(|(e, _)| e)
            .expect("connect");
        let out = tcp_of(&net.poll());
        assert_eq!(out.len(), 1, "{out:?}");
        assert!(out[0].seg.flags.syn && !out[0].seg.flags.ack);
        out[0].clone()
    };
    let syn = connect(&mut net, 443);
    let local = syn.seg.src_port;
    let to_engine = |seg: &TxSegment| tcp_frame_from(PEER_MAC, PEER_IP, 443, local, seg, &[]);

    // §3.10.7.3: an ACK that does not acknowledge our SYN gets a RST with SEQ = SEG.ACK.
    let bad_ack = TxSegment {
        seq: SeqNum(42),
        ack: Some(syn.seg.seq + 1000),
        window: 100,
        ..Default::default()
    };
    let out = tcp_of(&net.send(&to_engine(&bad_ack)));
    assert_eq!(out.len(), 1, "{out:?}");
    assert!(out[0].is_rst() && !out[0].seg.flags.ack);
    assert_eq!(out[0].seg.seq, syn.seg.seq + 1000);
    // A RST without an acceptable ACK is ignored.
    let rst = TxSegment {
        seq: SeqNum(42),
        rst: true,
        ..Default::default()
    };
    assert!(net.send(&to_engine(&rst)).is_empty());
    assert!(net.handler().closed.is_empty());

    // The SYN-ACK completes it; the options are settled from it.
    let syn_ack = TxSegment {
        seq: SeqNum(70_000),
        ack: Some(syn.seg.seq + 1),
        syn: true,
        window: 1000,
        mss: Some(1000),
        wscale: Some(2),
        sack_permitted: true,
        timestamp: Some((555, syn.tsval())),
        ..Default::default()
    };
    let out = tcp_of(&net.send(&to_engine(&syn_ack)));
    assert_eq!(out.len(), 1, "{out:?}");
    assert!(out[0].is_pure_ack());
    assert_eq!(out[0].seg.ack, SeqNum(70_001));
    assert_eq!(out[0].seg.timestamp.map(|t| t.1), Some(555));
    assert_eq!(
        net.handler().connected,
        vec![SocketAddr::from((PEER_IP, 443))]
    );

    // Simultaneous open (§3.5 figure 7): a bare SYN in SYN-SENT is answered with a
    // SYN-ACK on our ISS.
    let syn2 = connect(&mut net, 444);
    let bare = TxSegment {
        seq: SeqNum(123),
        syn: true,
        window: 65535,
        mss: Some(1460),
        ..Default::default()
    };
    let frame = tcp_frame_from(PEER_MAC, PEER_IP, 444, syn2.seg.src_port, &bare, &[]);
    let out = tcp_of(&net.send(&frame));
    assert_eq!(out.len(), 1, "{out:?}");
    assert!(out[0].is_syn_ack());
    assert_eq!(out[0].seg.seq, syn2.seg.seq);
    assert_eq!(out[0].seg.ack, SeqNum(124));
}

/// RFC 7323 §7.1: ISN - TSval must not be the same for every connection opened at one
/// instant (it would be the engine's clock if both used the same hash).
#[test]
fn isn_minus_tsval_does_not_reveal_the_clock() {
    let mut net = Net::new(config(), echo());
    net.eng.listen(PORT, 16);
    let mut diffs = Vec::new();
    for port in 40001..40005 {
        let out = send_syn(&mut net, port, SeqNum(7000), FULL);
        assert!(out[0].is_syn_ack());
        diffs.push(out[0].seg.seq.0.wrapping_sub(out[0].tsval()));
    }
    diffs.sort_unstable();
    diffs.dedup();
    assert_eq!(diffs.len(), 4, "ISN - TSval is the same for all tuples");
}
