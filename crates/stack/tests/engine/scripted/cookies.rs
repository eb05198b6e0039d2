//! SYN cookies (RFC 4987 §3.6): sent when the backlog overflows, checked on the ACK,
//! with the options a cookie can carry, and data on the cookie's ACK delivered.

use super::*;

#[test]
fn syn_cookies_when_backlog_overflows() {
    let cfg = config();
    let tcp = cfg.tcp.clone();
    let mut net = Net::new(cfg, echo());
    net.eng.listen(PORT, 1);

    // One half-open connection fills the backlog.
    let out = send_syn(&mut net, 40000, SeqNum(1000), FULL);
    assert_eq!(out.len(), 1);
    assert!(out[0].is_syn_ack());
    assert_eq!(net.eng.connection_count(), 1);
    assert_eq!(net.stats().syn_cookies_sent, 0);

    // Further SYNs are answered statelessly.
    let mut cookies = Vec::new();
    for (i, port) in (40001..40005u16).enumerate() {
        let isn = SeqNum(5000 + 1000 * i as u32);
        let sent_ts = net.peer_tsval();
        let out = send_syn(&mut net, port, isn, FULL);
        assert_eq!(out.len(), 1, "{out:?}");
        let sa = out[0].clone();
        assert!(sa.is_syn_ack(), "{sa:?}");
        assert_eq!(sa.seg.dst_port, port);
        assert_eq!(sa.ip.dst, PEER_IP);
        assert_eq!(sa.eth.dst, PEER_MAC);
        assert_eq!(sa.seg.ack, isn + 1);
        assert_eq!(sa.seg.mss, Some(1460));
        assert_eq!(sa.seg.wscale, Some(tcp.rcv_wscale()));
        assert!(sa.seg.sack_permitted);
        let (tsval, tsecr) = sa.seg.timestamp.expect("timestamps echoed");
        assert_eq!(tsecr, sent_ts);
        // Window scale 7 and SACK-permitted ride in the low bits of the TSval.
        assert_eq!(decode_ts_options(tsval), (Some(7), true));
        cookies.push((port, isn, sa));
    }
    assert_eq!(net.stats().syn_cookies_sent, 4);
    assert_eq!(
        net.eng.connection_count(),
        1,
        "cookies must not create blocks"
    );

    // The right ACK (SEG.ACK = cookie + 1) rebuilds the connection. The peer advertises a
    // window field of 4, i.e. 512 bytes with its window scale of 7.
    let (port, isn, sa) = cookies[0].clone();
    let mut pc = PeerConn::after_syn_ack(port, isn, FULL, &sa);
    pc.window = 4;
    let out = pc.ack(&mut net);
    assert!(out.is_empty(), "{out:?}");
    assert_eq!(net.stats().syn_cookies_accepted, 1);
    assert_eq!(net.eng.connection_count(), 2);
    assert_eq!(
        net.handler().accepted,
        vec![SocketAddr::from((PEER_IP, port))]
    );
    assert_eq!(
        net.handler().connected,
        vec![SocketAddr::from((PEER_IP, port))]
    );

    // Data both ways. The echo is bounded by the peer's scaled window: 4 << 7 = 512 bytes
    // (without the scale surviving the cookie it would be 4 bytes).
    let data = pattern(1000, 1);
    let out = pc.data(&mut net, &data);
    assert_eq!(net.handler().received, data);
    assert_eq!(out.len(), 1, "{out:?}");
    assert_eq!(out[0].seg.seq, sa.seg.seq + 1);
    assert_eq!(out[0].seg.ack, isn + 1 + 1000);
    assert_eq!(out[0].payload, data[..512]);
    // Our window scale survived too: the full 256 KiB buffer, scaled down.
    assert_eq!(
        usize::from(out[0].seg.window),
        tcp.recv_buffer >> tcp.rcv_wscale()
    );
    assert!(out[0].seg.timestamp.is_some());

    // Opening the window releases the rest.
    pc.window = 1000;
    let out = pc.ack(&mut net);
    assert_eq!(out.len(), 1, "{out:?}");
    assert_eq!(out[0].seg.seq, sa.seg.seq + 1 + 512);
    assert_eq!(out[0].payload, data[512..]);

    // SACK-permitted survived: out-of-order data is answered at once with a SACK block.
    let mut ooo = pc.seg(&net);
    ooo.seq = pc.snd_nxt + 100;
    let out = pc.send(&mut net, &ooo, &pattern(50, 2));
    assert_eq!(out.len(), 1, "{out:?}");
    assert!(out[0].is_pure_ack());
    assert_eq!(out[0].seg.ack, pc.snd_nxt);
    let left = pc.snd_nxt + 100;
    let right = pc.snd_nxt + 150;
    assert_eq!(out[0].sack, vec![(left.0, right.0)]);
    // Filling the gap delivers all 150 bytes in order.
    let gap = pattern(100, 3);
    let out = pc.data(&mut net, &gap);
    pc.snd_nxt += 50;
    let mut expect = gap.clone();
    expect.extend(pattern(50, 2));
    assert!(net.handler().received.ends_with(&expect));
    let echoed: Vec<u8> = out.iter().flat_map(|s| s.payload.clone()).collect();
    assert_eq!(echoed, expect);
    assert_eq!(out.last().map(|s| s.seg.ack), Some(pc.snd_nxt));
    assert!(out.iter().all(|s| s.sack.is_empty()));

    // A forged ACK (wrong cookie) gets a RST and no connection.
    let (port2, isn2, sa2) = cookies[1].clone();
    let mut forged = PeerConn::after_syn_ack(port2, isn2, FULL, &sa2);
    forged.rcv_nxt = sa2.seg.seq + 2;
    let out = forged.ack(&mut net);
    assert_eq!(out.len(), 1, "{out:?}");
    assert!(out[0].is_rst());
    assert!(!out[0].seg.flags.ack);
    assert_eq!(out[0].seg.seq, sa2.seg.seq + 2);
    assert_eq!(net.stats().syn_cookies_rejected, 1);
    assert_eq!(net.eng.connection_count(), 2);
    assert_eq!(net.handler().accepted.len(), 1);

    // The genuine ACK for that cookie still works.
    let mut pc2 = PeerConn::after_syn_ack(port2, isn2, FULL, &sa2);
    assert!(pc2.ack(&mut net).is_empty());
    assert_eq!(net.stats().syn_cookies_accepted, 2);
    assert_eq!(net.eng.connection_count(), 3);
}

#[test]
fn syn_cookie_without_timestamps_drops_window_scale_and_sack() {
    let mut net = Net::new(config(), echo());
    net.eng.listen(PORT, 1);
    let _half_open = send_syn(&mut net, 40000, SeqNum(1), FULL);
    let opts = SynOpts {
        mss: Some(1000),
        wscale: Some(7),
        sack: true,
        ts: false,
    };
    let out = send_syn(&mut net, 41000, SeqNum(777), opts);
    assert_eq!(out.len(), 1);
    let sa = out[0].clone();
    assert!(sa.is_syn_ack());
    assert_eq!(net.stats().syn_cookies_sent, 1);
    // Nothing to carry window scale or SACK in: neither is offered.
    assert_eq!(sa.seg.wscale, None);
    assert!(!sa.seg.sack_permitted);
    assert_eq!(sa.seg.timestamp, None);

    let mut pc = PeerConn::after_syn_ack(41000, SeqNum(777), opts, &sa);
    assert!(pc.ack(&mut net).is_empty());
    assert_eq!(net.stats().syn_cookies_accepted, 1);
    // The cookie rounded MSS 1000 down to 536; the unscaled window field is 65535.
    let data = pattern(1200, 9);
    let out = pc.data(&mut net, &data);
    let lens: Vec<usize> = out.iter().map(|s| s.payload.len()).collect();
    assert_eq!(lens, vec![536, 536, 128]);
    for s in &out {
        assert_eq!(s.seg.window, 65535);
        assert_eq!(s.seg.timestamp, None);
    }
}

#[test]
fn cookie_ack_carrying_data_is_delivered() {
    let mut net = Net::new(config(), echo());
    net.eng.listen(PORT, 1);
    let _half_open = send_syn(&mut net, 40000, SeqNum(1), FULL);
    let out = send_syn(&mut net, 40001, SeqNum(500), FULL);
    assert_eq!(net.stats().syn_cookies_sent, 1);
    let mut pc = PeerConn::after_syn_ack(40001, SeqNum(500), FULL, &out[0]);
    // The third segment of the handshake already carries a request.
    let out = pc.data(&mut net, b"GET / HTTP/1.0\r\n\r\n");
    assert_eq!(net.stats().syn_cookies_accepted, 1);
    assert_eq!(net.handler().received, b"GET / HTTP/1.0\r\n\r\n");
    assert_eq!(out.len(), 1, "{out:?}");
    assert_eq!(out[0].payload, b"GET / HTTP/1.0\r\n\r\n");
    assert_eq!(out[0].seg.ack, pc.snd_nxt);
}

#[test]
fn an_ack_for_no_connection_is_a_cookie_only_while_cookies_are_out() {
    let mut net = Net::new(config(), echo());
    net.eng.listen(PORT, 1);
    let stray = |net: &mut Net, port: u16| {
        let ack = TxSegment {
            seq: SeqNum(5),
            ack: Some(SeqNum(7777)),
            window: 100,
            ..Default::default()
        };
        tcp_of(&net.send(&tcp_frame_from(PEER_MAC, PEER_IP, port, PORT, &ack, &[])))
    };

    // No cookie sent yet: a late ACK of a connection that has gone is answered with a
    // RST and counted as a segment for no connection, not as a rejected cookie.
    let out = stray(&mut net, 41000);
    assert!(out.len() == 1 && out[0].is_rst(), "{out:?}");
    assert_eq!(net.dropped(DropReason::NoConnection), 1);
    assert_eq!(net.stats().syn_cookies_rejected, 0);

    // The backlog overflows and a cookie goes out: the same ACK is now checked as one.
    assert!(send_syn(&mut net, 40000, SeqNum(1000), FULL)[0].is_syn_ack());
    assert!(send_syn(&mut net, 40001, SeqNum(2000), FULL)[0].is_syn_ack());
    assert_eq!(net.stats().syn_cookies_sent, 1);
    let out = stray(&mut net, 41001);
    assert!(out.len() == 1 && out[0].is_rst(), "{out:?}");
    assert_eq!(net.stats().syn_cookies_rejected, 1);
    assert_eq!(net.dropped(DropReason::NoConnection), 2);

    // Once no cookie sent could still be valid (at most 192 s), it is not checked again.
    net.advance(Duration::from_secs(193));
    stray(&mut net, 41002);
    assert_eq!(net.stats().syn_cookies_rejected, 1);
    assert_eq!(net.dropped(DropReason::NoConnection), 3);
}
