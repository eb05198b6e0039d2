//! TIME-WAIT: the compact entry, its answers, its expiry, the pair reopened by a SYN
//! (RFC 6191), simultaneous close through CLOSING, and a full table.

use super::*;

#[test]
fn time_wait_is_compact_reacks_fin_expires_and_reopens() {
    let mut net = time_wait_net();
    let mut pc = close_into_time_wait(&mut net, 40000, SeqNum(1000), FULL);
    assert_eq!(net.eng.time_wait_count(), 1);
    assert_eq!(net.eng.connection_count(), 0);
    assert_eq!(net.stats().time_wait_entered, 1);
    assert_eq!(net.handler().closed, vec![CloseReason::Normal]);
    assert_eq!(net.handler().peer_closed, 1);

    // A retransmitted FIN (our ACK was lost) is ACKed again from the compact entry. It
    // lies below RCV.NXT, so TS.Recent stays the TSval of the original FIN and is what
    // the ACK echoes (RFC 7323 §4.3).
    let fin_tsval = net.peer_tsval();
    net.advance(Duration::from_secs(5));
    let mut again = pc.seg(&net);
    again.seq = pc.snd_nxt - 1;
    again.fin = true;
    let last_ts = pc.ts_recent;
    let out = pc.send(&mut net, &again, &[]);
    assert_eq!(out.len(), 1, "{out:?}");
    assert!(out[0].is_pure_ack());
    assert_eq!(out[0].seg.seq, pc.rcv_nxt);
    assert_eq!(out[0].seg.ack, pc.snd_nxt);
    let (tsval, tsecr) = out[0].seg.timestamp.expect("timestamps kept in TIME-WAIT");
    assert_eq!(tsecr, fin_tsval);
    assert!(
        tsval.wrapping_sub(last_ts) as i32 >= 5000,
        "TSval kept ticking"
    );

    // That restarted the 2·MSL wait: 10 s from the retransmission, not from the close.
    net.advance(Duration::from_millis(9_900));
    assert_eq!(net.eng.time_wait_count(), 1);
    net.advance(Duration::from_millis(200));
    assert_eq!(net.eng.time_wait_count(), 0);

    // Once more into TIME-WAIT on the same 4-tuple (a new incarnation).
    let pc = close_into_time_wait(&mut net, 40000, SeqNum(50_000), FULL);
    assert_eq!(net.eng.time_wait_count(), 1);
    net.advance(Duration::from_secs(1));
    // A SYN with a higher sequence number but an old timestamp could be a duplicate of
    // the old connection: it only gets the TIME-WAIT ACK.
    let mut old = syn_seg(&net, pc.snd_nxt + 100_000, FULL);
    old.timestamp = Some((pc.seg(&net).timestamp.unwrap().0 - 5000, 0));
    let out = tcp_of(&net.send(&tcp_frame(40000, &old, &[])));
    assert_eq!(out.len(), 1, "{out:?}");
    assert!(out[0].is_pure_ack());
    assert_eq!(out[0].seg.ack, pc.snd_nxt);
    assert_eq!(net.eng.time_wait_count(), 1);
    // A newer timestamp reopens the pair (RFC 6191).
    let isn = pc.snd_nxt + 100_000;
    let out = send_syn(&mut net, 40000, isn, FULL);
    assert_eq!(out.len(), 1, "{out:?}");
    assert!(out[0].is_syn_ack());
    assert_eq!(out[0].seg.ack, isn + 1);
    assert_eq!(net.eng.time_wait_count(), 0);
    assert_eq!(net.stats().time_wait_reused, 1);
    let mut pc = PeerConn::after_syn_ack(40000, isn, FULL, &out[0]);
    assert!(pc.ack(&mut net).is_empty());
    assert_eq!(net.eng.connection_count(), 1);
    let out = pc.data(&mut net, b"third");
    assert_eq!(out[0].payload, b"bye");
    assert_eq!(net.handler().accepted.len(), 3);
}

#[test]
fn a_cookie_ack_on_a_pair_whose_entry_a_rst_closed_takes_the_flow_over() {
    let mut net = time_wait_net();
    let pc = close_into_time_wait(&mut net, 40000, SeqNum(1000), FULL);
    let key = FlowKey::new(PEER_IP.into(), 40000, PORT, 0);
    // The peer's RST at RCV.NXT closes the entry, which stays, inert, in the flow table.
    let mut rst = pc.seg(&net);
    rst.rst = true;
    rst.ack = None;
    let mut peer = pc;
    assert!(peer.send(&mut net, &rst, &[]).is_empty());
    assert_eq!(net.eng.time_wait_count(), 0);
    assert!(matches!(
        net.eng.internals().flow(&key),
        Some(Flow::TimeWait(_))
    ));
    // Other peers' SYNs fill the backlog, and the listener answers with cookies.
    net.eng.listen(PORT, 1);
    assert!(send_syn(&mut net, 40001, SeqNum(7), FULL)[0].is_syn_ack());
    assert!(send_syn(&mut net, 40002, SeqNum(7), FULL)[0].is_syn_ack());
    assert_eq!(net.stats().syn_cookies_sent, 1);
    // An ACK carrying a valid SYN cookie for the pair (no SYN went through the entry,
    // which a SYN would have removed) opens a connection on it.
    let isn = pc.snd_nxt + 100_000;
    let cookie = net.eng.internals().syn_cookie(&key, isn, 1460);
    let ack = TxSegment {
        seq: isn + 1,
        ack: Some(cookie + 1),
        window: 65535,
        ..Default::default()
    };
    let out = tcp_of(&net.send(&tcp_frame(40000, &ack, &[])));
    assert!(out.is_empty(), "{out:?}");
    assert_eq!(net.stats().syn_cookies_accepted, 1);
    assert_eq!(net.eng.connection_count(), 2);
    assert!(matches!(
        net.eng.internals().flow(&key),
        Some(Flow::Conn(_))
    ));
    // The entry went: its timer, when it comes due, leaves the connection's flow alone.
    net.advance(Duration::from_secs(11));
    assert_eq!(net.eng.connection_count(), 2);
    assert!(matches!(
        net.eng.internals().flow(&key),
        Some(Flow::Conn(_))
    ));
}

#[test]
fn time_wait_without_timestamps_reopens_on_higher_sequence() {
    let mut net = bye_net(config());
    let pc = close_into_time_wait(&mut net, 40000, SeqNum(1000), BARE);
    assert_eq!(net.eng.time_wait_count(), 1);

    // An old SYN (below RCV.NXT) gets the ACK; the entry stays.
    let out = send_syn(&mut net, 40000, SeqNum(900), BARE);
    assert_eq!(out.len(), 1, "{out:?}");
    assert!(out[0].is_pure_ack());
    assert_eq!(out[0].seg.ack, pc.snd_nxt);
    assert_eq!(out[0].seg.timestamp, None);
    assert_eq!(net.eng.time_wait_count(), 1);

    // A higher one reopens.
    let out = send_syn(&mut net, 40000, pc.snd_nxt + 10, BARE);
    assert_eq!(out.len(), 1, "{out:?}");
    assert!(out[0].is_syn_ack());
    assert_eq!(out[0].seg.ack, pc.snd_nxt + 11);
    assert_eq!(net.eng.time_wait_count(), 0);
    assert_eq!(net.eng.connection_count(), 1);
}

#[test]
fn simultaneous_close_passes_through_closing() {
    let mut net = bye_net(config());
    let mut pc = connect_peer(&mut net, 40000, SeqNum(1000), FULL);
    let out = pc.data(&mut net, b"hi");
    assert!(out[0].seg.flags.fin);
    let our_fin_end = pc.rcv_nxt;
    // The peer's FIN crosses ours: it does not acknowledge our FIN.
    let mut fin = pc.seg(&net);
    fin.ack = Some(our_fin_end - 1);
    fin.fin = true;
    pc.snd_nxt += 1;
    let out = pc.send(&mut net, &fin, &[]);
    assert_eq!(out.len(), 1, "{out:?}");
    assert!(out[0].is_pure_ack());
    assert_eq!(out[0].seg.ack, pc.snd_nxt);
    assert!(net
        .eng
        .connection_states()
        .all(|(_, s)| s == State::Closing));
    // Its ACK of our FIN: TIME-WAIT.
    assert!(pc.ack(&mut net).is_empty());
    assert_eq!(net.eng.connection_count(), 0);
    assert_eq!(net.eng.time_wait_count(), 1);
    assert_eq!(net.handler().closed, vec![CloseReason::Normal]);
}

#[test]
fn time_wait_table_full_skips_time_wait() {
    let mut cfg = config();
    cfg.max_time_wait = 0;
    let mut net = bye_net(cfg);
    let _pc = close_into_time_wait(&mut net, 40000, SeqNum(1000), FULL);
    assert_eq!(net.eng.time_wait_count(), 0);
    assert_eq!(net.eng.connection_count(), 0);
    assert_eq!(net.stats().time_wait_entered, 0, "no entry was made");
    assert_eq!(net.handler().closed, vec![CloseReason::Normal]);
    assert_eq!(net.stats().conns_closed, 1);
}

#[test]
fn time_wait_entry_answers_only_what_needs_an_answer() {
    let mut net = bye_net(config());
    let mut pc = close_into_time_wait(&mut net, 40000, SeqNum(1000), FULL);
    assert_eq!(net.eng.time_wait_count(), 1);

    // A bare ACK at RCV.NXT is acceptable and needs nothing (RFC 9293 §3.10.7.4): were
    // it answered, two TIME-WAIT ends would ACK each other until both expire.
    assert!(pc.ack(&mut net).is_empty());
    // Anything unacceptable gets an ACK.
    let mut stray = pc.seg(&net);
    stray.seq = pc.snd_nxt + 5000;
    let out = pc.send(&mut net, &stray, b"late data");
    assert_eq!(out.len(), 1, "{out:?}");
    assert!(out[0].is_pure_ack());
    assert_eq!(out[0].seg.ack, pc.snd_nxt);

    // A RST that is not at RCV.NXT is ignored; one at RCV.NXT ends TIME-WAIT.
    assert!(pc.rst(&mut net, pc.snd_nxt + 1).is_empty());
    assert_eq!(net.eng.time_wait_count(), 1);
    assert!(pc.rst(&mut net, pc.snd_nxt).is_empty());
    assert_eq!(net.eng.time_wait_count(), 0);
    // Closed now: a stray segment is answered as for no connection.
    let mut stray = pc.seg(&net);
    stray.seq = pc.snd_nxt + 5000;
    let out = pc.send(&mut net, &stray, b"late data");
    assert_eq!(out.len(), 1, "{out:?}");
    assert!(out[0].seg.flags.rst);
}

/// A flood of retransmitted FINs (or other segments that get the TIME-WAIT ACK) must not
/// pile up timer items: the entry keeps one timer, which catches up with a restarted
/// 2·MSL wait when it fires.
#[test]
fn time_wait_flood_keeps_one_timer() {
    let mut net = time_wait_net();
    let mut pc = close_into_time_wait(&mut net, 40000, SeqNum(1000), FULL);
    assert_eq!(net.eng.connection_count(), 0);
    // The entry's timer, plus stale items of the closed connection block.
    let timers = net.eng.internals().pending_timers();
    let mut out_of_window_answered = 0;
    for i in 0..300 {
        net.clock.advance(Duration::from_millis(10));
        let mut again = pc.seg(&net);
        let fin = i % 2 == 0;
        if fin {
            again.seq = pc.snd_nxt - 1;
            again.fin = true;
        } else {
            again.seq = pc.snd_nxt + 5000;
        }
        let out = pc.send(&mut net, &again, &[]);
        // Every retransmitted FIN is answered; out-of-window segments at most once per
        // invalid_ack_interval (500 ms), as on a live connection.
        if fin {
            assert_eq!(out.len(), 1, "{out:?}");
        } else {
            assert!(out.len() <= 1, "{out:?}");
            out_of_window_answered += out.len();
        }
        assert!(out.iter().all(TcpOut::is_pure_ack));
        assert!(
            net.eng.internals().pending_timers() <= timers,
            "timer items piled up at {i}"
        );
    }
    // 150 out-of-window segments over 3 s: one answer per 500 ms.
    assert_eq!(out_of_window_answered, 6);
    assert_eq!(net.stats().invalid_acks_suppressed, 144);
    // The last FIN (at 2.99 s) restarted the wait: 10 s from it, not from the close.
    let last_fin = net.clock.now() - Duration::from_millis(10);
    net.advance(last_fin + Duration::from_millis(9_990) - net.clock.now());
    assert_eq!(net.eng.time_wait_count(), 1);
    net.advance(Duration::from_millis(20));
    assert_eq!(net.eng.time_wait_count(), 0);
    assert!((net.eng.internals().pending_timers() == 0));
}

/// A SYN reopening a pair from TIME-WAIT gets an ISS beyond anything the old
/// incarnation sent (RFC 1122 §4.2.2.13), even when the clock-driven ISN has hardly
/// moved and no timestamps tell the incarnations apart.
#[test]
fn reopened_pair_starts_beyond_old_sequence_space() {
    let mut net = bye_net(config());
    let old = close_into_time_wait(&mut net, 40000, SeqNum(1000), BARE);
    let isn = old.snd_nxt + 10;
    let out = send_syn(&mut net, 40000, isn, BARE);
    assert_eq!(out.len(), 1, "{out:?}");
    assert!(out[0].is_syn_ack());
    let gap = out[0].seg.seq - old.rcv_nxt;
    assert!(gap >= 65537, "new ISS only {gap} past the old SND.NXT");
    // The new incarnation works.
    let mut pc = PeerConn::after_syn_ack(40000, isn, BARE, &out[0]);
    assert!(pc.ack(&mut net).is_empty());
    let out = pc.data(&mut net, b"again");
    assert_eq!(out[0].payload, b"bye");
}

/// Simulation seed 119439: a client that closed second (so it kept no TIME-WAIT) reused
/// its port at once, and its clock-driven ISN had moved one less than the old incarnation
/// consumed, so its SYN carried the sequence number of its old FIN, RCV.NXT - 1 here.
/// Refused, that SYN got the TIME-WAIT ACK, whose ACK = RCV.NXT = ISS + 1 is acceptable in
/// SYN-SENT (RFC 9293 §3.10.7.3): the client dropped it without the RST that would have
/// ended TIME-WAIT (RFC 5961 §4.2), and its SYNs bounced until it gave up. A SYN at or past
/// the old FIN opens a receive space (from SEG.SEQ + 1 >= RCV.NXT) no old segment reaches:
/// it reopens the pair (RFC 6191: greater than the last sequence number seen, the FIN's,
/// or at it where refusing cannot work), without timestamps or with an equal TSval.
#[test]
fn time_wait_reopens_on_syn_at_the_old_fin() {
    let mut net = bye_net(config());
    let old = close_into_time_wait(&mut net, 40000, SeqNum(1000), BARE);
    let fin_seq = old.snd_nxt - 1;

    // Below the old FIN: refused, and the ACK acknowledges more than that SYN, so a
    // SYN-SENT peer answers it with the RST that ends TIME-WAIT.
    let out = send_syn(&mut net, 40000, fin_seq - 1, BARE);
    assert_eq!(out.len(), 1, "{out:?}");
    assert!(out[0].is_pure_ack());
    assert!(out[0].seg.ack > fin_seq, "SYN-SENT would accept {out:?}");
    assert_eq!(net.eng.time_wait_count(), 1);

    // At the old FIN's sequence number: reopened, our ISS beyond the old sequence space.
    let out = send_syn(&mut net, 40000, fin_seq, BARE);
    assert_eq!(out.len(), 1, "{out:?}");
    assert!(out[0].is_syn_ack(), "refused with {out:?}");
    assert_eq!(out[0].seg.ack, old.snd_nxt);
    assert!(out[0].seg.seq - old.rcv_nxt >= 65537);
    assert_eq!(net.eng.time_wait_count(), 0);
    assert_eq!(net.stats().time_wait_reused, 1);
    let mut pc = PeerConn::after_syn_ack(40000, fin_seq, BARE, &out[0]);
    assert!(pc.ack(&mut net).is_empty());
    // A duplicate of the old FIN lies below the new RCV.NXT: only a duplicate ACK.
    let mut dup = pc.seg(&net);
    dup.seq = fin_seq;
    dup.ack = Some(old.rcv_nxt);
    dup.fin = true;
    let out = pc.send(&mut net, &dup, &[]);
    assert_eq!(out.len(), 1, "{out:?}");
    assert!(out[0].is_pure_ack());
    assert_eq!(out[0].seg.ack, old.snd_nxt);
    assert_eq!(net.handler().peer_closed, 1);
    let out = pc.data(&mut net, b"again");
    assert_eq!(out[0].payload, b"bye");

    // Just past the old FIN (RCV.NXT itself) reopens too.
    let old = close_into_time_wait(&mut net, 40001, SeqNum(5000), BARE);
    let out = send_syn(&mut net, 40001, old.snd_nxt, BARE);
    assert!(out.len() == 1 && out[0].is_syn_ack(), "{out:?}");

    // With timestamps, an equal TSval leaves it to the sequence number (RFC 6191).
    let old = close_into_time_wait(&mut net, 40002, SeqNum(9000), FULL);
    let out = send_syn(&mut net, 40002, old.snd_nxt - 2, FULL);
    assert!(out.len() == 1 && out[0].is_pure_ack(), "{out:?}");
    assert_eq!(net.eng.time_wait_count(), 1);
    let out = send_syn(&mut net, 40002, old.snd_nxt - 1, FULL);
    assert!(out.len() == 1 && out[0].is_syn_ack(), "{out:?}");
    assert_eq!(net.eng.time_wait_count(), 0);
    assert_eq!(net.stats().time_wait_reused, 3);
}
