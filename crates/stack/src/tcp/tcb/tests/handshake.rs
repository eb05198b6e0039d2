//! The three-way handshake (§3.5): passive and active open, option negotiation, and
//! simultaneous open and close.

use super::*;

// ----- Three-way handshake -----

#[test]
fn handshake_passive_plain_syn_gets_only_mss() {
    let cfg = cfg();
    let mut tcb = Tcb::accept_syn(&open(SeqNum(ISS), 0, MSS, ms(0), &cfg), &syn(IRS));
    assert_eq!(tcb.state(), State::SynReceived);
    let out = tx(&mut tcb, ms(0));
    // RFC 7323 §2.2/§3.2, RFC 2018 §2: no WS, SACK-permitted or TS unless offered.
    assert_eq!(
        out,
        vec![TxSegment {
            seq: SeqNum(ISS),
            ack: Some(SeqNum(IRS + 1)),
            syn: true,
            mss: Some(MSS),
            window: W,
            ..TxSegment::default()
        }]
    );
    assert!(events(&mut tcb).is_empty());
    rx(&mut tcb, ms(5), &ack(IRS + 1, ISS + 1, 65535));
    assert_eq!(tcb.state(), State::Established);
    assert_eq!(
        events(&mut tcb),
        Events {
            connected: true,
            ..Events::default()
        }
    );
    assert!(tx(&mut tcb, ms(5)).is_empty());
    assert_eq!(tcb.snd_una(), SeqNum(ISS + 1));
    assert_eq!(tcb.rcv_nxt(), SeqNum(IRS + 1));
    assert_eq!(tcb.snd_mss(), MSS as usize);
    assert_eq!(tcb.window_scales(), (0, 0));
    assert!(!tcb.timestamps_enabled());
    assert!(!tcb.sack_enabled());
    assert_eq!(tcb.snd_wnd(), 65535);
}

#[test]
fn handshake_passive_with_all_options() {
    let cfg = TcpConfig::default(); // 256 KiB receive buffer: shift 3
    let s = syn_full(IRS, 1400, 7, 100);
    let mut tcb = Tcb::accept_syn(&open(SeqNum(ISS), 5000, MSS, ms(20), &cfg), &s);
    let out = tx(&mut tcb, ms(20));
    assert_eq!(
        out,
        vec![TxSegment {
            seq: SeqNum(ISS),
            ack: Some(SeqNum(IRS + 1)),
            syn: true,
            mss: Some(MSS),
            wscale: Some(3),
            sack_permitted: true,
            // SYN windows are never scaled (RFC 7323 §2.2).
            window: 65535,
            timestamp: Some((20 + 5000, 100)),
            ..TxSegment::default()
        }]
    );
    // Final ACK: its window field is scaled by the peer's shift 7.
    let a = with_ts(ack(IRS + 1, ISS + 1, 100), 110, 5020);
    rx(&mut tcb, ms(50), &a);
    assert_eq!(tcb.state(), State::Established);
    assert!(events(&mut tcb).connected);
    assert_eq!(tcb.window_scales(), (7, 3));
    assert!(tcb.timestamps_enabled());
    assert!(tcb.sack_enabled());
    assert_eq!(tcb.snd_mss(), 1400 - 12);
    assert_eq!(tcb.snd_wnd(), 100 << 7);
    assert_eq!(tcb.timestamp_state(), Some((110, 5000)));
    // RTT sample from the echoed timestamp: 30 ms.
    assert_eq!(tcb.srtt(), Some(Duration::from_millis(30)));
}

#[test]
fn handshake_active_options_negotiated() {
    let cfg = TcpConfig::default();
    let mut tcb = Tcb::connect(&open(SeqNum(ISS), 7, MSS, ms(10), &cfg));
    assert_eq!(tcb.state(), State::SynSent);
    let out = tx(&mut tcb, ms(10));
    assert_eq!(
        out,
        vec![TxSegment {
            seq: SeqNum(ISS),
            ack: None,
            syn: true,
            mss: Some(MSS),
            wscale: Some(3),
            sack_permitted: true,
            window: 65535,
            timestamp: Some((17, 0)),
            ..TxSegment::default()
        }]
    );
    assert_eq!(tcb.next_deadline(), Some(ms(1010)));
    let mut sa = with_ts(syn_full(IRS, 1400, 2, 500), 500, 17);
    sa.flags.ack = true;
    sa.ack = SeqNum(ISS + 1);
    sa.window = 30000;
    rx(&mut tcb, ms(30), &sa);
    assert_eq!(tcb.state(), State::Established);
    assert!(events(&mut tcb).connected);
    assert_eq!(
        tx(&mut tcb, ms(30)),
        vec![TxSegment {
            seq: SeqNum(ISS + 1),
            ack: Some(SeqNum(IRS + 1)),
            window: (262144 >> 3) as u16,
            timestamp: Some((37, 500)),
            ..TxSegment::default()
        }]
    );
    assert_eq!(tcb.window_scales(), (2, 3));
    assert!(tcb.timestamps_enabled());
    assert!(tcb.sack_enabled());
    assert_eq!(tcb.snd_mss(), 1400 - 12);
    // RFC 7323 §2.2: the window of a SYN-ACK is not scaled.
    assert_eq!(tcb.snd_wnd(), 30000);
    assert_eq!(tcb.srtt(), Some(Duration::from_millis(20)));
    assert_eq!(tcb.next_deadline(), None);
}

#[test]
fn handshake_active_peer_without_options() {
    let cfg = TcpConfig::default();
    let mut tcb = Tcb::connect(&open(SeqNum(ISS), 7, MSS, ms(0), &cfg));
    tx(&mut tcb, ms(0));
    let mut sa = seg(IRS);
    sa.flags.syn = true;
    sa.flags.ack = true;
    sa.ack = SeqNum(ISS + 1);
    sa.window = 8000;
    rx(&mut tcb, ms(1), &sa);
    assert_eq!(tcb.state(), State::Established);
    assert_eq!(tcb.window_scales(), (0, 0));
    assert!(!tcb.timestamps_enabled());
    assert!(!tcb.sack_enabled());
    // No MSS option: 536 (RFC 9293 §3.7.1).
    assert_eq!(tcb.snd_mss(), 536);
    // Without scaling, the window field is capped at 65535.
    assert_eq!(tx(&mut tcb, ms(1)), vec![exp_ack(ISS + 1, IRS + 1, 65535)]);
}

#[test]
fn syn_sent_unacceptable_ack_gets_rst() {
    let cfg = cfg();
    let mut tcb = Tcb::connect(&open(SeqNum(ISS), 0, MSS, ms(0), &cfg));
    tx(&mut tcb, ms(0));
    // §3.10.7.3: SEG.ACK =< ISS or > SND.NXT: <SEQ=SEG.ACK><CTL=RST>.
    let mut sa = syn(IRS);
    sa.flags.ack = true;
    sa.ack = SeqNum(ISS + 5);
    rx(&mut tcb, ms(1), &sa);
    assert_eq!(tcb.state(), State::SynSent);
    assert_eq!(
        tx(&mut tcb, ms(1)),
        vec![TxSegment {
            seq: SeqNum(ISS + 5),
            rst: true,
            ..TxSegment::default()
        }]
    );
}

#[test]
fn active_open_then_data_both_ways() {
    let mut tcb = active(&cfg());
    assert_eq!(tcb.snd_wnd(), 65535);
    tcb.send(&payload(300), &mut pool()).unwrap();
    assert_eq!(
        tx(&mut tcb, ms(1)),
        vec![exp_data(ISS + 1, IRS + 1, W, 0, 300, true)]
    );
    // The reply acknowledges our data and carries 200 bytes.
    let out = rx(&mut tcb, ms(20), &data(IRS + 1, ISS + 301, 200));
    assert_eq!(out.deliver, Some((0, 200)));
    assert_eq!(tcb.snd_una(), SeqNum(ISS + 301));
    assert_eq!(tcb.flight_size(), 0);
    // One segment: its ACK is delayed (the output after it arms the timer).
    assert_eq!(tx(&mut tcb, ms(20)), vec![]);
    assert_eq!(
        tick(&mut tcb, ms(60)),
        vec![exp_ack(ISS + 301, IRS + 201, W - 200)]
    );
}

#[test]
fn writable_event_after_send_space_frees() {
    let cfg = TcpConfig {
        send_buffer: 4096,
        ..cfg()
    };
    let mut tcb = passive(&cfg);
    assert_eq!(tcb.send(&payload(5000), &mut pool()), Ok(4096));
    assert_eq!(tcb.send_space(), 0);
    assert_eq!(tx(&mut tcb, ms(0)).len(), 3);
    rx(&mut tcb, ms(10), &ack(IRS + 1, ISS + 1 + MSS as u32, 65535));
    assert_eq!(
        events(&mut tcb),
        Events {
            writable: true,
            ..Events::default()
        }
    );
    assert_eq!(tcb.send_space(), MSS as usize);
    // Only once per refusal.
    rx(
        &mut tcb,
        ms(11),
        &ack(IRS + 1, ISS + 1 + 2 * MSS as u32, 65535),
    );
    assert!(events(&mut tcb).is_empty());
}

// ----- Simultaneous open and close -----

#[test]
fn simultaneous_open_syn_then_ack() {
    let cfg = cfg();
    let mut tcb = Tcb::connect(&open(SeqNum(ISS), 0, MSS, ms(0), &cfg));
    tx(&mut tcb, ms(0));
    // §3.5 figure 7: a SYN without ACK in SYN-SENT.
    rx(&mut tcb, ms(1), &syn(IRS));
    assert_eq!(tcb.state(), State::SynReceived);
    assert_eq!(
        tx(&mut tcb, ms(1)),
        vec![TxSegment {
            seq: SeqNum(ISS),
            ack: Some(SeqNum(IRS + 1)),
            syn: true,
            mss: Some(MSS),
            window: W,
            ..TxSegment::default()
        }]
    );
    rx(&mut tcb, ms(2), &ack(IRS + 1, ISS + 1, 65535));
    assert_eq!(tcb.state(), State::Established);
    assert!(events(&mut tcb).connected);
    assert!(tx(&mut tcb, ms(2)).is_empty());
}

#[test]
fn simultaneous_open_syn_ack_establishes() {
    let cfg = cfg();
    let mut tcb = Tcb::connect(&open(SeqNum(ISS), 0, MSS, ms(0), &cfg));
    tx(&mut tcb, ms(0));
    rx(&mut tcb, ms(1), &syn(IRS));
    tx(&mut tcb, ms(1));
    // Figure 7 line 6: the peer's SYN-ACK <SEQ=IRS><ACK=ISS+1> completes the open.
    let mut sa = syn(IRS);
    sa.flags.ack = true;
    sa.ack = SeqNum(ISS + 1);
    rx(&mut tcb, ms(2), &sa);
    assert_eq!(tcb.state(), State::Established);
    assert!(events(&mut tcb).connected);
    assert_eq!(tx(&mut tcb, ms(2)), vec![exp_ack(ISS + 1, IRS + 1, W)]);
}

#[test]
fn simultaneous_close() {
    let cfg = cfg();
    let mut tcb = fin_wait_1(&cfg);
    // The peer's FIN crosses ours: it does not acknowledge our FIN.
    rx(&mut tcb, ms(1), &fin(ack(IRS + 1, ISS + 1, 65535)));
    assert_eq!(tcb.state(), State::Closing);
    assert!(events(&mut tcb).peer_closed);
    assert_eq!(tx(&mut tcb, ms(1)), vec![exp_ack(ISS + 2, IRS + 2, W - 1)]);
    rx(&mut tcb, ms(2), &ack(IRS + 2, ISS + 2, 65535));
    assert_eq!(tcb.state(), State::TimeWait);
    assert_eq!(tcb.linger_deadline(), Some(ms(2) + cfg.time_wait));
    assert!(tx(&mut tcb, ms(2)).is_empty());
}
