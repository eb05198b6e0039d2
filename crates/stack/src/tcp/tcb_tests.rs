//! Scripted segment tests for the connection state machine ([`super::tcb::Tcb`]): each
//! test feeds exact segments and asserts the exact replies of `poll_transmit`, the state
//! and the events, one RFC rule per test. Time is virtual: tests advance an
//! [`Instant`] by hand.

use std::net::{Ipv4Addr, SocketAddrV4};
use std::rc::Rc;
use std::time::Duration;

use super::config::{Keepalive, TcpConfig};
use super::pool::RingPool;
use super::segment::{Segment, TxSegment};
use super::seq::SeqNum;
use super::tcb::{Events, Opening, RxOutcome, State, SynOptions, Tcb, TcbLimits};
use crate::app::CloseReason;
use crate::time::Instant;

pub(super) const LOCAL: SocketAddrV4 = SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 1), 80);
pub(super) const REMOTE: SocketAddrV4 = SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 2), 40000);
/// Our initial sequence number.
pub(super) const ISS: u32 = 1000;
/// The peer's initial sequence number.
pub(super) const IRS: u32 = 5000;
pub(super) const MSS: u16 = 1460;
/// A receive buffer small enough that window scaling is not needed (window field = buffer).
pub(super) const RBUF: usize = 64000;

pub(super) fn ms(n: u64) -> Instant {
    Instant::from_millis(n)
}

/// What a connection between [`LOCAL`] and [`REMOTE`] is created with.
pub(super) fn open(
    iss: SeqNum,
    ts_offset: u32,
    our_mss: u16,
    now: Instant,
    cfg: &TcpConfig,
) -> Opening<'_> {
    Opening {
        local: LOCAL,
        remote: REMOTE,
        iss,
        ts_offset,
        our_mss,
        now,
        cfg,
        limits: Rc::new(TcbLimits::new(cfg)),
    }
}

pub(super) fn cfg() -> TcpConfig {
    TcpConfig {
        recv_buffer: RBUF,
        ..TcpConfig::default()
    }
}

// ----- Segment construction -----

/// A bare segment from the peer.
pub(super) fn seg(seq: u32) -> Segment {
    Segment {
        src_port: REMOTE.port(),
        dst_port: LOCAL.port(),
        seq: SeqNum(seq),
        window: 65535,
        ..Segment::default()
    }
}

pub(super) fn syn(seq: u32) -> Segment {
    let mut s = seg(seq);
    s.flags.syn = true;
    s.mss = Some(MSS);
    s
}

/// SYN with every option: MSS, window scale, SACK-permitted, timestamps.
pub(super) fn syn_full(seq: u32, mss: u16, ws: u8, tsval: u32) -> Segment {
    let mut s = syn(seq);
    s.mss = Some(mss);
    s.wscale = Some(ws);
    s.sack_permitted = true;
    s.timestamp = Some((tsval, 0));
    s
}

pub(super) fn ack(seq: u32, ack: u32, window: u16) -> Segment {
    let mut s = seg(seq);
    s.flags.ack = true;
    s.ack = SeqNum(ack);
    s.window = window;
    s
}

pub(super) fn data(seq: u32, ack_no: u32, len: usize) -> Segment {
    let mut s = ack(seq, ack_no, 65535);
    s.flags.psh = true;
    s.payload_len = len;
    s
}

pub(super) fn fin(mut s: Segment) -> Segment {
    s.flags.fin = true;
    s
}

pub(super) fn rst(seq: u32) -> Segment {
    let mut s = seg(seq);
    s.flags.rst = true;
    s.window = 0;
    s
}

pub(super) fn with_ts(mut s: Segment, tsval: u32, tsecr: u32) -> Segment {
    s.timestamp = Some((tsval, tsecr));
    s
}

pub(super) fn payload(len: usize) -> Vec<u8> {
    (0..len).map(|i| i as u8).collect()
}

// ----- Driving a Tcb -----

/// A pool for one call: buffer storage comes from the allocator and goes back to it.
pub(super) fn pool() -> RingPool {
    RingPool::default()
}

/// Feed a segment; its payload is `seg.payload_len` pattern bytes.
pub(super) fn rx(tcb: &mut Tcb, now: Instant, seg: &Segment) -> RxOutcome {
    let p = payload(seg.payload_len);
    tcb.on_segment(now, seg, &p, &mut pool())
}

pub(super) fn tx(tcb: &mut Tcb, now: Instant) -> Vec<TxSegment> {
    let mut out = Vec::new();
    tcb.poll_transmit(now, &mut out, &mut pool());
    out
}

/// Fire due timers, then collect what is sent.
pub(super) fn tick(tcb: &mut Tcb, now: Instant) -> Vec<TxSegment> {
    tcb.on_timer(now);
    tx(tcb, now)
}

/// The pure ACK we expect: no options (no timestamps, no SACK).
pub(super) fn exp_ack(seq: u32, ack: u32, window: u16) -> TxSegment {
    TxSegment {
        seq: SeqNum(seq),
        ack: Some(SeqNum(ack)),
        window,
        ..TxSegment::default()
    }
}

/// The data segment we expect (payload offset counted from SND.UNA's byte).
pub(super) fn exp_data(
    seq: u32,
    ack: u32,
    window: u16,
    offset: usize,
    len: usize,
    psh: bool,
) -> TxSegment {
    TxSegment {
        seq: SeqNum(seq),
        ack: Some(SeqNum(ack)),
        window,
        psh,
        payload_offset: offset,
        payload_len: len,
        ..TxSegment::default()
    }
}

pub(super) fn exp_fin(seq: u32, ack: u32, window: u16) -> TxSegment {
    TxSegment {
        fin: true,
        psh: true,
        ..exp_ack(seq, ack, window)
    }
}

pub(super) fn events(tcb: &mut Tcb) -> Events {
    tcb.take_events()
}

pub(super) fn closed(reason: CloseReason) -> Events {
    Events {
        closed: Some(reason),
        ..Events::default()
    }
}

/// Passive open with a plain SYN (MSS only), completed at time 0: ESTABLISHED, no
/// timestamps, no SACK, no window scaling. The peer's window is 65535.
pub(super) fn passive(cfg: &TcpConfig) -> Tcb {
    passive_at(cfg, ISS, IRS)
}

pub(super) fn passive_at(cfg: &TcpConfig, iss: u32, irs: u32) -> Tcb {
    let mut tcb = Tcb::accept_syn(&open(SeqNum(iss), 0, MSS, ms(0), cfg), &syn(irs));
    let out = tx(&mut tcb, ms(0));
    assert_eq!(out.len(), 1);
    assert!(out[0].syn);
    rx(
        &mut tcb,
        ms(0),
        &ack(irs.wrapping_add(1), iss.wrapping_add(1), 65535),
    );
    assert_eq!(tcb.state(), State::Established);
    assert!(tx(&mut tcb, ms(0)).is_empty());
    assert!(events(&mut tcb).connected);
    tcb
}

/// Passive open where the peer offered SACK (no timestamps, no window scaling).
pub(super) fn passive_sack(cfg: &TcpConfig) -> Tcb {
    let mut s = syn(IRS);
    s.sack_permitted = true;
    let mut tcb = Tcb::accept_syn(&open(SeqNum(ISS), 0, MSS, ms(0), cfg), &s);
    tx(&mut tcb, ms(0));
    rx(&mut tcb, ms(0), &ack(IRS + 1, ISS + 1, 65535));
    assert_eq!(tcb.state(), State::Established);
    assert!(tcb.sack_enabled());
    events(&mut tcb);
    tcb
}

/// Active open against a peer that sends a plain SYN-ACK (MSS only).
pub(super) fn active(cfg: &TcpConfig) -> Tcb {
    let mut tcb = Tcb::connect(&open(SeqNum(ISS), 0, MSS, ms(0), cfg));
    let out = tx(&mut tcb, ms(0));
    assert_eq!(out.len(), 1);
    let mut sa = syn(IRS);
    sa.flags.ack = true;
    sa.ack = SeqNum(ISS + 1);
    rx(&mut tcb, ms(0), &sa);
    assert_eq!(tcb.state(), State::Established);
    assert_eq!(
        tx(&mut tcb, ms(0)),
        vec![exp_ack(ISS + 1, IRS + 1, RBUF as u16)]
    );
    assert!(events(&mut tcb).connected);
    tcb
}

/// ESTABLISHED straight from a SYN-cookie ACK: no handshake RTT sample, so the RTO is
/// still the initial 1 s (RFC 6298 §2.1). No options; the peer's window is 65535.
pub(super) fn cookie(cfg: &TcpConfig) -> Tcb {
    let opts = SynOptions {
        mss: Some(MSS),
        ..SynOptions::default()
    };
    let a = ack(IRS + 1, ISS + 1, 65535);
    let mut tcb = Tcb::from_cookie(&open(SeqNum(ISS), 0, MSS, ms(0), cfg), &a, opts);
    assert_eq!(tcb.state(), State::Established);
    assert!(events(&mut tcb).connected);
    assert!(tx(&mut tcb, ms(0)).is_empty());
    assert_eq!(tcb.rto(), Duration::from_secs(1));
    tcb
}

/// Established, then our FIN sent: FIN-WAIT-1 with nothing else outstanding.
pub(super) fn fin_wait_1(cfg: &TcpConfig) -> Tcb {
    let mut tcb = passive(cfg);
    tcb.close();
    assert_eq!(tcb.state(), State::FinWait1);
    assert_eq!(
        tx(&mut tcb, ms(0)),
        vec![exp_fin(ISS + 1, IRS + 1, RBUF as u16)]
    );
    tcb
}

pub(super) const W: u16 = RBUF as u16;

// ----- 1. Three-way handshake -----

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

// ----- 2. Simultaneous open and close -----

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

// ----- 3. RST handling (RFC 5961 §3.2) -----

#[test]
fn rst_exact_seq_resets() {
    let mut tcb = passive(&cfg());
    rx(&mut tcb, ms(1), &rst(IRS + 1));
    assert_eq!(tcb.state(), State::Closed);
    assert_eq!(events(&mut tcb), closed(CloseReason::Reset));
    assert!(tx(&mut tcb, ms(1)).is_empty());
    assert_eq!(tcb.next_deadline(), None);
}

#[test]
fn rst_after_unacknowledged_data_leaves_no_timer() {
    // Data owed a delayed ACK, then the peer's RST before the poll: the poll after it
    // arms nothing (the delayed-ACK timer is armed by `poll_transmit`).
    let mut tcb = passive(&cfg());
    rx(&mut tcb, ms(1), &data(IRS + 1, ISS + 1, 100));
    rx(&mut tcb, ms(1), &rst(IRS + 101));
    assert_eq!(tcb.state(), State::Closed);
    assert!(tx(&mut tcb, ms(1)).is_empty());
    assert_eq!(tcb.next_deadline(), None);
}

#[test]
fn abort_after_unacknowledged_data_leaves_no_timer() {
    let mut tcb = passive(&cfg());
    rx(&mut tcb, ms(1), &data(IRS + 1, ISS + 1, 100));
    tcb.abort();
    tx(&mut tcb, ms(1));
    assert_eq!(tcb.next_deadline(), None);
    assert!(tick(&mut tcb, ms(100)).is_empty());
}

#[test]
fn rst_in_window_not_exact_is_challenged() {
    let mut tcb = passive(&cfg());
    let out = rx(&mut tcb, ms(1), &rst(IRS + 100));
    assert!(out.challenge_ack);
    assert_eq!(tcb.state(), State::Established);
    assert!(events(&mut tcb).is_empty());
    // The engine's rate limiter decides; nothing is sent until it allows.
    assert!(tx(&mut tcb, ms(1)).is_empty());
    tcb.send_challenge_ack();
    assert_eq!(tx(&mut tcb, ms(1)), vec![exp_ack(ISS + 1, IRS + 1, W)]);
}

/// A bare ACK exactly at the right edge of our window carries ACK information we must
/// not discard (as Linux and BSD accept it): a peer that sent up to our edge, and whose
/// tail we did not keep, sends its ACKs from there.
#[test]
fn a_bare_ack_at_the_right_edge_is_taken() {
    let mut tcb = passive(&cfg());
    assert_eq!(tcb.send(&[7; 100], &mut pool()), Ok(100));
    assert_eq!(tx(&mut tcb, ms(1)).len(), 1);
    assert_eq!(tcb.flight_size(), 100);
    let edge = IRS + 1 + RBUF as u32;
    let out = rx(&mut tcb, ms(2), &ack(edge, ISS + 1 + 100, 65535));
    assert!(!out.invalid_ack_suppressed);
    assert_eq!(tcb.flight_size(), 0, "the ACK was taken");
    // One past the edge is still out of window.
    assert_eq!(tcb.send(&[8; 10], &mut pool()), Ok(10));
    tx(&mut tcb, ms(3));
    rx(&mut tcb, ms(4), &ack(edge + 1, ISS + 1 + 110, 65535));
    assert_eq!(tcb.flight_size(), 10);
}

#[test]
fn rst_out_of_window_ignored() {
    let mut tcb = passive(&cfg());
    for seq in [IRS, IRS + 1 + RBUF as u32, IRS + 1 + RBUF as u32 + 1000] {
        let out = rx(&mut tcb, ms(1), &rst(seq));
        assert_eq!(out, RxOutcome::default());
        assert_eq!(tcb.state(), State::Established);
        assert!(tx(&mut tcb, ms(1)).is_empty());
    }
}

#[test]
fn rst_in_syn_sent() {
    let cfg = cfg();
    let mut tcb = Tcb::connect(&open(SeqNum(ISS), 0, MSS, ms(0), &cfg));
    tx(&mut tcb, ms(0));
    // Without ACK: ignored (§3.10.7.3).
    rx(&mut tcb, ms(1), &rst(0));
    assert_eq!(tcb.state(), State::SynSent);
    assert!(tx(&mut tcb, ms(1)).is_empty());
    // With an unacceptable ACK: ignored, and never answered with a RST.
    let mut r = rst(0);
    r.flags.ack = true;
    r.ack = SeqNum(ISS + 7);
    rx(&mut tcb, ms(1), &r);
    assert_eq!(tcb.state(), State::SynSent);
    assert!(tx(&mut tcb, ms(1)).is_empty());
    // With an acceptable ACK: connection refused.
    r.ack = SeqNum(ISS + 1);
    rx(&mut tcb, ms(2), &r);
    assert_eq!(tcb.state(), State::Closed);
    assert_eq!(events(&mut tcb), closed(CloseReason::Refused));
    assert!(tx(&mut tcb, ms(2)).is_empty());
}

#[test]
fn rst_in_syn_received_after_active_open_is_refused() {
    let cfg = cfg();
    let mut tcb = Tcb::connect(&open(SeqNum(ISS), 0, MSS, ms(0), &cfg));
    tx(&mut tcb, ms(0));
    rx(&mut tcb, ms(1), &syn(IRS));
    tx(&mut tcb, ms(1));
    // §3.10.7.4 SYN-RECEIVED, second check: an active open was refused.
    rx(&mut tcb, ms(2), &rst(IRS + 1));
    assert_eq!(events(&mut tcb), closed(CloseReason::Refused));

    let mut tcb = Tcb::accept_syn(&open(SeqNum(ISS), 0, MSS, ms(0), &cfg), &syn(IRS));
    tx(&mut tcb, ms(0));
    rx(&mut tcb, ms(2), &rst(IRS + 1));
    assert_eq!(tcb.state(), State::Closed);
    assert_eq!(events(&mut tcb), closed(CloseReason::Reset));
}

// ----- 4. SYN in a synchronized state (RFC 5961 §4) -----

#[test]
fn syn_in_established_is_challenged() {
    let mut tcb = passive(&cfg());
    // In window, and far outside it: "irrespective of the sequence number" (§4.2). Each
    // one more than the per-connection interval (500 ms) after the last.
    for (i, seq) in [IRS + 1, IRS + 500, IRS + 2_000_000_000]
        .into_iter()
        .enumerate()
    {
        let out = rx(&mut tcb, ms(1 + 600 * i as u64), &syn(seq));
        assert!(out.challenge_ack);
        assert_eq!(tcb.state(), State::Established);
        assert_eq!(tcb.rcv_nxt(), SeqNum(IRS + 1));
        assert!(events(&mut tcb).is_empty());
        assert!(tx(&mut tcb, ms(1 + 600 * i as u64)).is_empty());
    }
}

#[test]
fn invalid_segments_are_answered_once_per_interval_unless_they_carry_data() {
    let mut tcb = passive(&cfg());
    // A SYN, an inexact RST and a pure ACK beyond the window within 500 ms: only the
    // first is answered (challenged); the others are held back and say so.
    let out = rx(&mut tcb, ms(10), &syn(IRS + 1));
    assert!(out.challenge_ack && !out.invalid_ack_suppressed);
    let out = rx(&mut tcb, ms(20), &rst(IRS + 5));
    assert!(!out.challenge_ack && out.invalid_ack_suppressed);
    let out = rx(&mut tcb, ms(30), &ack(IRS + 1_000_000, ISS + 1, 1000));
    assert!(out.invalid_ack_suppressed);
    assert!(
        tx(&mut tcb, ms(30)).is_empty(),
        "no ACK for the out-of-window ACK"
    );
    // Duplicate data is always answered, whatever the limit says: the sender needs the
    // ACK (and its D-SACK), and data cannot ping-pong between two stacks.
    rx(&mut tcb, ms(40), &data(IRS + 1, ISS + 1, 10));
    tx(&mut tcb, ms(40));
    let out = rx(&mut tcb, ms(50), &data(IRS + 1, ISS + 1, 10));
    assert!(!out.invalid_ack_suppressed);
    let sent = tx(&mut tcb, ms(50));
    assert_eq!(sent.len(), 1, "{sent:?}");
    assert_eq!(sent[0].ack, Some(SeqNum(IRS + 11)));
    // Past the interval, a pure out-of-window ACK is answered again.
    let out = rx(&mut tcb, ms(600), &ack(IRS + 1_000_000, ISS + 1, 1000));
    assert!(!out.invalid_ack_suppressed);
    assert_eq!(tx(&mut tcb, ms(600)).len(), 1);
}

// ----- 5. ACK range checks -----

#[test]
fn ack_of_unsent_data_is_answered_and_dropped() {
    let mut tcb = passive(&cfg());
    assert_eq!(tcb.send(&payload(100), &mut pool()), Ok(100));
    assert_eq!(
        tx(&mut tcb, ms(0)),
        vec![exp_data(ISS + 1, IRS + 1, W, 0, 100, true)]
    );
    // §3.10.7.4 fifth check: SEG.ACK > SND.NXT: send an ACK, drop the segment. RFC 5961
    // §5.2 makes that ACK a challenge ACK, under the engine's budget (as Linux does).
    let out = rx(&mut tcb, ms(1), &data(IRS + 1, ISS + 201, 10));
    assert_eq!(
        out,
        RxOutcome {
            challenge_ack: true,
            ..RxOutcome::default()
        }
    );
    assert_eq!(tcb.rcv_nxt(), SeqNum(IRS + 1));
    assert_eq!(tcb.snd_una(), SeqNum(ISS + 1));
    assert!(
        tx(&mut tcb, ms(1)).is_empty(),
        "not before the engine allows it"
    );
    tcb.send_challenge_ack();
    assert_eq!(tx(&mut tcb, ms(1)), vec![exp_ack(ISS + 101, IRS + 1, W)]);
}

#[test]
fn ack_too_old_is_challenged() {
    let mut tcb = passive(&cfg());
    // RFC 5961 §5.2: SEG.ACK < SND.UNA - MAX.SND.WND (65535 here) is challenged.
    let out = rx(
        &mut tcb,
        ms(1),
        &data(IRS + 1, (ISS + 1).wrapping_sub(70000), 10),
    );
    assert!(out.challenge_ack);
    assert_eq!(out.deliver, None);
    assert_eq!(tcb.rcv_nxt(), SeqNum(IRS + 1));
    assert!(tx(&mut tcb, ms(1)).is_empty());
    // An old ACK inside MAX.SND.WND is acceptable: its data is taken.
    let out = rx(&mut tcb, ms(1), &data(IRS + 1, ISS + 1 - 100, 10));
    assert!(!out.challenge_ack);
    assert_eq!(out.deliver, Some((0, 10)));
    assert_eq!(tcb.rcv_nxt(), SeqNum(IRS + 11));
    // ...but it must not update the send window (§3.10.7.4: only SND.UNA =< SEG.ACK).
    assert_eq!(tcb.snd_wnd(), 65535);
}

#[test]
fn old_ack_does_not_update_window() {
    let mut tcb = passive(&cfg());
    tcb.send(&payload(100), &mut pool()).unwrap();
    tx(&mut tcb, ms(0));
    rx(&mut tcb, ms(1), &data(IRS + 1, ISS + 101, 10));
    assert_eq!(tcb.snd_una(), SeqNum(ISS + 101));
    // A newer sequence number but an ACK below SND.UNA: window unchanged.
    let mut s = data(IRS + 11, ISS + 51, 10);
    s.window = 10;
    rx(&mut tcb, ms(2), &s);
    assert_eq!(tcb.snd_wnd(), 65535);
}

// ----- 6. Window trimming -----

#[test]
fn data_beyond_window_is_trimmed() {
    let cfg = TcpConfig {
        recv_buffer: 1000,
        ..TcpConfig::default()
    };
    let mut tcb = passive(&cfg);
    // 1400 bytes at RCV.NXT with a 1000-byte window: the first 1000 are taken.
    let out = rx(&mut tcb, ms(1), &data(IRS + 1, ISS + 1, 1400));
    assert_eq!(out.deliver, Some((0, 1000)));
    assert_eq!(tcb.rcv_nxt(), SeqNum(IRS + 1001));
    // The application keeps all of it: the window closes.
    tcb.keep_unconsumed(&payload(1000), &mut pool());
    // One segment: the ACK is delayed.
    assert!(tx(&mut tcb, ms(1)).is_empty());
    assert_eq!(
        tick(&mut tcb, ms(41)),
        vec![exp_ack(ISS + 1, IRS + 1001, 0)]
    );
}

#[test]
fn segment_entirely_outside_window_gets_duplicate_ack() {
    let cfg = TcpConfig {
        recv_buffer: 1000,
        ..TcpConfig::default()
    };
    let mut tcb = passive(&cfg);
    // Beyond the right edge.
    let out = rx(&mut tcb, ms(1), &data(IRS + 1 + 1000, ISS + 1, 100));
    assert_eq!(out, RxOutcome::default());
    assert_eq!(tx(&mut tcb, ms(1)), vec![exp_ack(ISS + 1, IRS + 1, 1000)]);
    // Entirely old (a retransmission of something already received).
    let out = rx(&mut tcb, ms(2), &data(IRS + 1, ISS + 1, 100));
    assert_eq!(out.deliver, Some((0, 100)));
    tick(&mut tcb, ms(100));
    let out = rx(&mut tcb, ms(101), &data(IRS + 1, ISS + 1, 100));
    assert_eq!(out, RxOutcome::default());
    assert_eq!(tcb.rcv_nxt(), SeqNum(IRS + 101));
    assert_eq!(
        tx(&mut tcb, ms(101)),
        vec![exp_ack(ISS + 1, IRS + 101, 900)]
    );
}

#[test]
fn partially_old_segment_delivers_only_new_bytes() {
    let mut tcb = passive(&cfg());
    rx(&mut tcb, ms(1), &data(IRS + 1, ISS + 1, 100));
    let out = rx(&mut tcb, ms(2), &data(IRS + 51, ISS + 1, 100));
    assert_eq!(out.deliver, Some((50, 100)));
    assert_eq!(tcb.rcv_nxt(), SeqNum(IRS + 151));
}

// ----- 7. Receiving data, ACK policy, SACK -----

#[test]
fn in_order_data_fast_path_and_delayed_ack() {
    let cfg = cfg();
    let mut tcb = passive(&cfg);
    let out = rx(&mut tcb, ms(100), &data(IRS + 1, ISS + 1, 100));
    assert_eq!(
        out,
        RxOutcome {
            deliver: Some((0, 100)),
            ..RxOutcome::default()
        }
    );
    assert_eq!(tcb.readable_len(), 0);
    // RFC 9293 §3.8.6.3: one segment waits for the delayed-ACK timer (40 ms).
    assert!(tx(&mut tcb, ms(100)).is_empty());
    assert_eq!(tcb.next_deadline(), Some(ms(140)));
    assert!(tick(&mut tcb, ms(139)).is_empty());
    assert_eq!(
        tick(&mut tcb, ms(140)),
        vec![exp_ack(ISS + 1, IRS + 101, W - 100)]
    );
    assert_eq!(tcb.next_deadline(), None);
}

#[test]
fn two_full_segments_acked_at_once() {
    let mut tcb = passive(&cfg());
    let m = MSS as u32;
    rx(&mut tcb, ms(1), &data(IRS + 1, ISS + 1, MSS as usize));
    assert!(tx(&mut tcb, ms(1)).is_empty());
    rx(&mut tcb, ms(2), &data(IRS + 1 + m, ISS + 1, MSS as usize));
    assert_eq!(
        tx(&mut tcb, ms(2)),
        vec![exp_ack(ISS + 1, IRS + 1 + 2 * m, W)]
    );
    assert_eq!(tcb.next_deadline(), None);
}

#[test]
fn out_of_order_data_acked_at_once_with_sack_then_gap_fill() {
    let mut tcb = passive_sack(&cfg());
    let out = rx(&mut tcb, ms(1), &data(IRS + 101, ISS + 1, 100));
    assert_eq!(out, RxOutcome::default());
    assert_eq!(tcb.rcv_nxt(), SeqNum(IRS + 1));
    // RFC 5681 §4.2: immediate duplicate ACK; RFC 2018 §4: with the SACK block.
    assert_eq!(
        tx(&mut tcb, ms(1)),
        vec![TxSegment {
            sack: [Some((IRS + 101, IRS + 201)), None, None],
            ..exp_ack(ISS + 1, IRS + 1, W)
        }]
    );
    // A second hole-separated block: most recent first.
    rx(&mut tcb, ms(2), &data(IRS + 301, ISS + 1, 50));
    assert_eq!(
        tx(&mut tcb, ms(2)),
        vec![TxSegment {
            sack: [
                Some((IRS + 301, IRS + 351)),
                Some((IRS + 101, IRS + 201)),
                None
            ],
            ..exp_ack(ISS + 1, IRS + 1, W)
        }]
    );
    // Fill the first gap: readable, immediate ACK.
    let out = rx(&mut tcb, ms(3), &data(IRS + 1, ISS + 1, 100));
    assert_eq!(
        out,
        RxOutcome {
            readable: true,
            ..RxOutcome::default()
        }
    );
    assert_eq!(tcb.rcv_nxt(), SeqNum(IRS + 201));
    assert_eq!(tcb.readable_len(), 200);
    // Both pieces are readable, in order.
    assert_eq!(tcb.readable(), &[payload(100), payload(100)].concat()[..]);
    assert_eq!(
        tx(&mut tcb, ms(3)),
        vec![TxSegment {
            sack: [Some((IRS + 301, IRS + 351)), None, None],
            ..exp_ack(ISS + 1, IRS + 201, W - 200)
        }]
    );
    // Fill the last gap.
    rx(&mut tcb, ms(4), &data(IRS + 201, ISS + 1, 100));
    assert_eq!(tcb.rcv_nxt(), SeqNum(IRS + 351));
    assert_eq!(
        tx(&mut tcb, ms(4)),
        vec![exp_ack(ISS + 1, IRS + 351, W - 350)]
    );
}

#[test]
fn out_of_order_without_sack_has_no_blocks() {
    let mut tcb = passive(&cfg());
    rx(&mut tcb, ms(1), &data(IRS + 101, ISS + 1, 100));
    assert_eq!(tx(&mut tcb, ms(1)), vec![exp_ack(ISS + 1, IRS + 1, W)]);
}

// ----- 8. Zero window -----

#[test]
fn receiver_zero_window_probe_and_window_update() {
    let cfg = TcpConfig {
        recv_buffer: 4096,
        ..TcpConfig::default()
    };
    let mut tcb = passive(&cfg);
    let m = MSS as usize;
    let out = rx(&mut tcb, ms(1), &data(IRS + 1, ISS + 1, m));
    assert_eq!(out.deliver, Some((0, m)));
    tcb.keep_unconsumed(&payload(m), &mut pool());
    assert!(tx(&mut tcb, ms(1)).is_empty());
    let out = rx(&mut tcb, ms(2), &data(IRS + 1 + m as u32, ISS + 1, m));
    assert!(out.readable);
    assert_eq!(
        tx(&mut tcb, ms(2)),
        vec![exp_ack(
            ISS + 1,
            IRS + 1 + 2 * m as u32,
            (4096 - 2 * m) as u16
        )]
    );
    let rest = 4096 - 2 * m;
    rx(
        &mut tcb,
        ms(3),
        &data(IRS + 1 + 2 * m as u32, ISS + 1, rest),
    );
    assert_eq!(tcb.readable_len(), 4096);
    assert_eq!(tx(&mut tcb, ms(3)), vec![]);
    let edge = IRS + 1 + 4096;
    assert_eq!(tick(&mut tcb, ms(43)), vec![exp_ack(ISS + 1, edge, 0)]);

    // Zero-window probe: one byte at RCV.NXT. ACKed with window 0, not accepted.
    let out = rx(&mut tcb, ms(100), &data(edge, ISS + 1, 1));
    assert_eq!(out, RxOutcome::default());
    assert_eq!(tcb.rcv_nxt(), SeqNum(edge));
    assert_eq!(tcb.readable_len(), 4096);
    assert_eq!(tx(&mut tcb, ms(100)), vec![exp_ack(ISS + 1, edge, 0)]);

    // Receiver SWS avoidance (§3.8.6.2.2): 1000 freed bytes < min(4096/2, MSS) stay
    // unannounced, even in the reply to a probe.
    tcb.consume(1000, &mut pool());
    assert!(tx(&mut tcb, ms(101)).is_empty());
    rx(&mut tcb, ms(102), &data(edge, ISS + 1, 1));
    assert_eq!(tx(&mut tcb, ms(102)), vec![exp_ack(ISS + 1, edge, 0)]);
    assert_eq!(tcb.rcv_nxt(), SeqNum(edge));
    // 2000 freed: announce it at once.
    tcb.consume(1000, &mut pool());
    assert_eq!(tx(&mut tcb, ms(103)), vec![exp_ack(ISS + 1, edge, 2000)]);
}

#[test]
fn sender_zero_window_persist_probes_with_backoff() {
    let mut tcb = cookie(&cfg());
    // The peer closes its window.
    rx(&mut tcb, ms(0), &ack(IRS + 1, ISS + 1, 0));
    assert_eq!(tcb.snd_wnd(), 0);
    tcb.send(&payload(100), &mut pool()).unwrap();
    assert!(tx(&mut tcb, ms(0)).is_empty());
    // Persist timer armed at the RTO (1 s).
    assert_eq!(tcb.next_deadline(), Some(ms(1000)));
    assert_eq!(
        tick(&mut tcb, ms(1000)),
        vec![exp_data(ISS + 1, IRS + 1, W, 0, 1, false)]
    );
    // The probe's ACK: window still 0, byte not accepted.
    rx(&mut tcb, ms(1010), &ack(IRS + 1, ISS + 1, 0));
    assert!(tx(&mut tcb, ms(1010)).is_empty());
    // Backoff: next probe 2 s later, then 4 s.
    assert_eq!(tcb.next_deadline(), Some(ms(3000)));
    assert_eq!(
        tick(&mut tcb, ms(3000)),
        vec![exp_data(ISS + 1, IRS + 1, W, 0, 1, false)]
    );
    rx(&mut tcb, ms(3010), &ack(IRS + 1, ISS + 1, 0));
    assert_eq!(tcb.next_deadline(), Some(ms(7000)));
    assert_eq!(
        tick(&mut tcb, ms(7000)),
        vec![exp_data(ISS + 1, IRS + 1, W, 0, 1, false)]
    );
    rx(&mut tcb, ms(7010), &ack(IRS + 1, ISS + 1, 0));
    // Probe ACKs are not duplicate ACKs: nothing was fast-retransmitted.
    assert!(tx(&mut tcb, ms(7010)).is_empty());
    assert_eq!(tcb.next_deadline(), Some(ms(15000)));
    // The window opens: everything goes, starting at SND.UNA.
    rx(&mut tcb, ms(8000), &ack(IRS + 1, ISS + 1, 65535));
    assert_eq!(
        tx(&mut tcb, ms(8000)),
        vec![exp_data(ISS + 1, IRS + 1, W, 0, 100, true)]
    );
    assert_eq!(tcb.next_deadline(), Some(ms(9000)));
    rx(&mut tcb, ms(8050), &ack(IRS + 1, ISS + 101, 65535));
    assert_eq!(tcb.next_deadline(), None);
}

#[test]
fn sender_zero_window_probe_accepted() {
    let mut tcb = cookie(&cfg());
    rx(&mut tcb, ms(0), &ack(IRS + 1, ISS + 1, 0));
    tcb.send(&payload(100), &mut pool()).unwrap();
    assert!(tx(&mut tcb, ms(0)).is_empty());
    assert_eq!(tick(&mut tcb, ms(1000)).len(), 1);
    // The peer took the probe byte and opened its window.
    rx(&mut tcb, ms(1010), &ack(IRS + 1, ISS + 2, 1000));
    assert_eq!(
        tx(&mut tcb, ms(1010)),
        vec![exp_data(ISS + 2, IRS + 1, W, 0, 99, true)]
    );
}

// ----- 9. FIN in each state -----

#[test]
fn fin_in_established_then_last_ack() {
    let mut tcb = passive(&cfg());
    rx(&mut tcb, ms(1), &fin(ack(IRS + 1, ISS + 1, 65535)));
    assert_eq!(tcb.state(), State::CloseWait);
    assert_eq!(
        events(&mut tcb),
        Events {
            peer_closed: true,
            ..Events::default()
        }
    );
    // A FIN is acknowledged at once.
    assert_eq!(tx(&mut tcb, ms(1)), vec![exp_ack(ISS + 1, IRS + 2, W - 1)]);
    // Data can still be sent in CLOSE-WAIT.
    tcb.send(&payload(10), &mut pool()).unwrap();
    assert_eq!(
        tx(&mut tcb, ms(2)),
        vec![exp_data(ISS + 1, IRS + 2, W - 1, 0, 10, true)]
    );
    tcb.close();
    assert_eq!(tcb.state(), State::LastAck);
    // The FIN follows the 10 unacknowledged bytes in the send buffer.
    assert_eq!(
        tx(&mut tcb, ms(3)),
        vec![TxSegment {
            payload_offset: 10,
            ..exp_fin(ISS + 11, IRS + 2, W - 1)
        }]
    );
    // ACK of the data only: still LAST-ACK.
    rx(&mut tcb, ms(4), &ack(IRS + 2, ISS + 11, 65535));
    assert_eq!(tcb.state(), State::LastAck);
    rx(&mut tcb, ms(5), &ack(IRS + 2, ISS + 12, 65535));
    assert_eq!(tcb.state(), State::Closed);
    assert_eq!(events(&mut tcb), closed(CloseReason::Normal));
    assert!(tx(&mut tcb, ms(5)).is_empty());
}

#[test]
fn fin_wait_1_fin_goes_closing() {
    let mut tcb = fin_wait_1(&cfg());
    rx(&mut tcb, ms(1), &fin(ack(IRS + 1, ISS + 1, 65535)));
    assert_eq!(tcb.state(), State::Closing);
}

#[test]
fn fin_wait_1_ack_then_fin_wait_2_fin() {
    let cfg = cfg();
    let mut tcb = fin_wait_1(&cfg);
    rx(&mut tcb, ms(1), &ack(IRS + 1, ISS + 2, 65535));
    assert_eq!(tcb.state(), State::FinWait2);
    assert!(tx(&mut tcb, ms(1)).is_empty());
    rx(&mut tcb, ms(2), &fin(ack(IRS + 1, ISS + 2, 65535)));
    assert_eq!(tcb.state(), State::TimeWait);
    assert!(events(&mut tcb).peer_closed);
    assert_eq!(tx(&mut tcb, ms(2)), vec![exp_ack(ISS + 2, IRS + 2, W - 1)]);
    assert_eq!(tcb.next_deadline(), Some(ms(2) + cfg.time_wait));
}

#[test]
fn fin_wait_1_fin_with_ack_of_our_fin_goes_time_wait() {
    let mut tcb = fin_wait_1(&cfg());
    rx(&mut tcb, ms(1), &fin(ack(IRS + 1, ISS + 2, 65535)));
    assert_eq!(tcb.state(), State::TimeWait);
    assert_eq!(tx(&mut tcb, ms(1)), vec![exp_ack(ISS + 2, IRS + 2, W - 1)]);
}

#[test]
fn fin_wait_2_times_out_after_close() {
    let cfg = cfg();
    let mut tcb = fin_wait_1(&cfg);
    rx(&mut tcb, ms(1), &ack(IRS + 1, ISS + 2, 65535));
    assert_eq!(tcb.state(), State::FinWait2);
    assert_eq!(tcb.next_deadline(), Some(ms(1) + cfg.fin_wait2_timeout));
    tick(&mut tcb, ms(1) + cfg.fin_wait2_timeout);
    assert_eq!(events(&mut tcb), closed(CloseReason::TimedOut));
}

#[test]
fn out_of_order_fin_waits_for_the_gap() {
    let mut tcb = passive(&cfg());
    rx(&mut tcb, ms(1), &fin(data(IRS + 101, ISS + 1, 100)));
    assert_eq!(tcb.state(), State::Established);
    assert!(events(&mut tcb).is_empty());
    assert_eq!(tx(&mut tcb, ms(1)), vec![exp_ack(ISS + 1, IRS + 1, W)]);
    let out = rx(&mut tcb, ms(2), &data(IRS + 1, ISS + 1, 100));
    assert!(out.readable);
    assert_eq!(tcb.state(), State::CloseWait);
    assert!(events(&mut tcb).peer_closed);
    assert_eq!(tcb.rcv_nxt(), SeqNum(IRS + 202));
    assert_eq!(
        tx(&mut tcb, ms(2)),
        vec![exp_ack(ISS + 1, IRS + 202, W - 201)]
    );
}

// ----- 10. TIME-WAIT -----

#[test]
fn time_wait_lasts_and_restarts_on_retransmitted_fin() {
    let cfg = cfg();
    let mut tcb = fin_wait_1(&cfg);
    rx(&mut tcb, ms(1), &fin(ack(IRS + 1, ISS + 2, 65535)));
    assert_eq!(tcb.state(), State::TimeWait);
    assert!(events(&mut tcb).peer_closed);
    tx(&mut tcb, ms(1));
    let tw = cfg.time_wait;
    assert_eq!(tcb.next_deadline(), Some(ms(1) + tw));
    // The peer lost our ACK and resends its FIN: ACK again, restart 2·MSL (§3.10.7.4).
    let t = ms(30_000);
    rx(&mut tcb, t, &fin(ack(IRS + 1, ISS + 2, 65535)));
    assert_eq!(tcb.state(), State::TimeWait);
    assert_eq!(tx(&mut tcb, t), vec![exp_ack(ISS + 2, IRS + 2, W - 1)]);
    assert_eq!(tcb.next_deadline(), Some(t + tw));
    tick(&mut tcb, ms(1) + tw);
    assert_eq!(tcb.state(), State::TimeWait);
    assert!(tick(&mut tcb, t + tw).is_empty());
    assert_eq!(tcb.state(), State::Closed);
    assert_eq!(events(&mut tcb), closed(CloseReason::Normal));
}

// ----- 11. Retransmission timeout -----

#[test]
fn rto_backoff_and_give_up() {
    let cfg = TcpConfig {
        max_retries: 3,
        ..cfg()
    };
    let mut tcb = cookie(&cfg);
    tcb.send(&payload(100), &mut pool()).unwrap();
    let seg = exp_data(ISS + 1, IRS + 1, W, 0, 100, true);
    assert_eq!(tx(&mut tcb, ms(0)), vec![seg]);
    // RFC 6298 §2.1: initial RTO 1 s; §5.5: doubled per timeout.
    let mut t = 0;
    for (i, rto) in [1000u64, 2000, 4000].into_iter().enumerate() {
        assert_eq!(tcb.next_deadline(), Some(ms(t + rto)));
        assert!(tick(&mut tcb, ms(t + rto - 1)).is_empty());
        t += rto;
        assert_eq!(tick(&mut tcb, ms(t)), vec![seg], "retransmission {}", i + 1);
        assert_eq!(tcb.retries(), i as u32 + 1);
    }
    assert_eq!(tcb.next_deadline(), Some(ms(t + 8000)));
    assert!(tick(&mut tcb, ms(t + 8000)).is_empty());
    assert_eq!(tcb.state(), State::Closed);
    assert_eq!(events(&mut tcb), closed(CloseReason::TimedOut));
}

#[test]
fn rto_retransmits_from_snd_una_and_collapses_cwnd() {
    let mut tcb = passive(&cfg());
    let m = MSS as usize;
    tcb.send(&payload(3 * m), &mut pool()).unwrap();
    assert_eq!(tx(&mut tcb, ms(0)).len(), 3);
    // First segment acknowledged, the others lost.
    rx(&mut tcb, ms(100), &ack(IRS + 1, ISS + 1 + m as u32, 65535));
    // RFC 5681 §3.1: loss window of one segment; go back to SND.UNA.
    let out = tick(&mut tcb, ms(1100));
    assert_eq!(
        out,
        vec![exp_data(ISS + 1 + m as u32, IRS + 1, W, 0, m, false)]
    );
    assert_eq!(tcb.cwnd(), m);
    rx(
        &mut tcb,
        ms(1200),
        &ack(IRS + 1, ISS + 1 + 2 * m as u32, 65535),
    );
    assert_eq!(
        tx(&mut tcb, ms(1200)),
        vec![exp_data(ISS + 1 + 2 * m as u32, IRS + 1, W, 0, m, true)]
    );
}

#[test]
fn syn_retransmission_and_give_up() {
    let cfg = TcpConfig {
        max_syn_retries: 2,
        timestamps: false,
        ..cfg()
    };
    let mut tcb = Tcb::connect(&open(SeqNum(ISS), 0, MSS, ms(0), &cfg));
    let first = tx(&mut tcb, ms(0));
    assert_eq!(first.len(), 1);
    assert!(first[0].syn);
    let mut t = 0;
    for rto in [1000u64, 2000] {
        t += rto;
        assert_eq!(tcb.next_deadline(), Some(ms(t)));
        let again = tick(&mut tcb, ms(t));
        assert_eq!(again, first);
    }
    assert_eq!(tcb.next_deadline(), Some(ms(t + 4000)));
    assert!(tick(&mut tcb, ms(t + 4000)).is_empty());
    assert_eq!(tcb.state(), State::Closed);
    assert_eq!(events(&mut tcb), closed(CloseReason::TimedOut));
}

#[test]
fn synack_retransmission() {
    let cfg = cfg();
    let mut tcb = Tcb::accept_syn(&open(SeqNum(ISS), 0, MSS, ms(0), &cfg), &syn(IRS));
    let first = tx(&mut tcb, ms(0));
    assert_eq!(tick(&mut tcb, ms(1000)), first);
    // A retransmitted SYN from the peer gets the SYN-ACK again.
    rx(&mut tcb, ms(1500), &syn(IRS));
    assert_eq!(tx(&mut tcb, ms(1500)), first);
    assert_eq!(tcb.state(), State::SynReceived);
}

// ----- 12. Fast retransmit and NewReno -----

#[test]
fn fast_retransmit_and_newreno_recovery_without_sack() {
    let cfg = TcpConfig {
        congestion_control: super::config::CongestionAlgorithm::NewReno,
        ..cfg()
    };
    let mut tcb = passive(&cfg);
    let m = MSS as usize;
    let mu = MSS as u32;
    tcb.send(&payload(10 * m), &mut pool()).unwrap();
    let out = tx(&mut tcb, ms(0));
    // RFC 6928 initial window: 10 segments.
    assert_eq!(out.len(), 10);
    for (i, s) in out.iter().enumerate() {
        assert_eq!(s.seq, SeqNum(ISS + 1 + i as u32 * mu));
        assert_eq!(s.payload_len, m);
    }
    // Segment 2 lost: the peer acks segment 1, then three duplicates.
    rx(&mut tcb, ms(50), &ack(IRS + 1, ISS + 1 + mu, 65535));
    let cwnd = tcb.cwnd();
    assert_eq!(cwnd, 11 * m);
    for _ in 0..2 {
        rx(&mut tcb, ms(51), &ack(IRS + 1, ISS + 1 + mu, 65535));
        assert!(tx(&mut tcb, ms(51)).is_empty());
    }
    rx(&mut tcb, ms(52), &ack(IRS + 1, ISS + 1 + mu, 65535));
    assert_eq!(
        tx(&mut tcb, ms(52)),
        vec![exp_data(ISS + 1 + mu, IRS + 1, W, 0, m, false)]
    );
    // RFC 6582 §3.2 step 2 / RFC 5681 eq. 4: ssthresh = FlightSize/2; PRR (RFC 6937)
    // paces the recovery, so cwnd is the target from the start.
    let flight = 9 * m;
    assert_eq!(tcb.ssthresh(), flight / 2);
    assert_eq!(tcb.cwnd(), flight / 2);
    // Partial ACK (segments 2 and 3): retransmit the next hole, segment 4 (RFC 6582
    // §3.2 step 5), as PRR allows: 3 segments delivered × ssthresh / RecoverFS = 1.5,
    // less the one already sent.
    rx(&mut tcb, ms(100), &ack(IRS + 1, ISS + 1 + 3 * mu, 65535));
    assert_eq!(
        tx(&mut tcb, ms(100)),
        vec![exp_data(ISS + 1 + 3 * mu, IRS + 1, W, 0, m, false)]
    );
    // Full ACK: leave recovery with cwnd = ssthresh (RFC 6937 §3).
    rx(&mut tcb, ms(150), &ack(IRS + 1, ISS + 1 + 10 * mu, 65535));
    assert_eq!(tcb.cwnd(), flight / 2);
    assert_eq!(tcb.take_counters().fast_retransmits, 1);
    assert_eq!(tcb.next_deadline(), None);
    assert!(tx(&mut tcb, ms(150)).is_empty());
}

// ----- 13. Timestamps and PAWS -----

/// Passive open with timestamps (TS offset 1000), final ACK at 20 ms echoing our TSval.
fn passive_ts() -> Tcb {
    let cfg = cfg();
    let s = with_ts(syn(IRS), 100, 0);
    let mut tcb = Tcb::accept_syn(&open(SeqNum(ISS), 1000, MSS, ms(0), &cfg), &s);
    let out = tx(&mut tcb, ms(0));
    assert_eq!(out[0].timestamp, Some((1000, 100)));
    rx(
        &mut tcb,
        ms(20),
        &with_ts(ack(IRS + 1, ISS + 1, 65535), 120, 1000),
    );
    assert_eq!(tcb.state(), State::Established);
    assert!(tcb.timestamps_enabled());
    events(&mut tcb);
    tcb
}

#[test]
fn paws_drops_old_timestamps() {
    let mut tcb = passive_ts();
    assert_eq!(tcb.timestamp_state(), Some((120, 1000)));
    // RFC 7323 §5.3 R1: TSval < TS.Recent: not acceptable, ACK and drop.
    let old = with_ts(data(IRS + 1, ISS + 1, 100), 110, 1000);
    let out = rx(&mut tcb, ms(30), &old);
    assert_eq!(out, RxOutcome::default());
    assert_eq!(tcb.rcv_nxt(), SeqNum(IRS + 1));
    assert_eq!(
        tx(&mut tcb, ms(30)),
        vec![TxSegment {
            timestamp: Some((1030, 120)),
            ..exp_ack(ISS + 1, IRS + 1, W)
        }]
    );
    // Newer: accepted, TS.Recent updated (§4.3) and echoed.
    let new = with_ts(data(IRS + 1, ISS + 1, 100), 130, 1000);
    let out = rx(&mut tcb, ms(40), &new);
    assert_eq!(out.deliver, Some((0, 100)));
    assert_eq!(tcb.timestamp_state(), Some((130, 1000)));
    assert_eq!(tx(&mut tcb, ms(40)), vec![]);
    assert_eq!(
        tick(&mut tcb, ms(80)),
        vec![TxSegment {
            timestamp: Some((1080, 130)),
            ..exp_ack(ISS + 1, IRS + 101, W - 100)
        }]
    );
    // An RST is not subject to PAWS (RFC 7323 §5.3, R1 note).
    rx(&mut tcb, ms(90), &with_ts(rst(IRS + 101), 1, 0));
    assert_eq!(events(&mut tcb), closed(CloseReason::Reset));
}

#[test]
fn rtt_sample_from_timestamps_survives_retransmission() {
    let mut tcb = passive_ts();
    // Handshake sample: 20 ms; RTO = max(min_rto 200 ms, 20 + 4·10).
    assert_eq!(tcb.srtt(), Some(Duration::from_millis(20)));
    assert_eq!(tcb.rto(), Duration::from_millis(200));
    tcb.send(&payload(100), &mut pool()).unwrap();
    let first = tx(&mut tcb, ms(100));
    assert_eq!(first[0].timestamp, Some((1100, 120)));
    let again = tick(&mut tcb, ms(300));
    assert_eq!(again.len(), 1);
    assert_eq!(again[0].timestamp, Some((1300, 120)));
    // The ACK echoes the retransmission's TSval: a valid 40 ms sample (RFC 7323 §4.1),
    // where Karn's rule alone would give none.
    rx(
        &mut tcb,
        ms(340),
        &with_ts(ack(IRS + 1, ISS + 101, 65535), 200, 1300),
    );
    // SRTT = 7/8·20 + 1/8·40.
    assert_eq!(tcb.srtt(), Some(Duration::from_micros(22_500)));
}

// ----- 14. Half-close -----

#[test]
fn half_close_sends_fin_after_data_and_keeps_receiving() {
    let mut tcb = passive(&cfg());
    tcb.send(&payload(100), &mut pool()).unwrap();
    tcb.shutdown_write();
    assert_eq!(tcb.state(), State::FinWait1);
    assert_eq!(
        tcb.send(b"x", &mut pool()),
        Err(crate::app::SendError::Closed)
    );
    assert_eq!(
        tx(&mut tcb, ms(0)),
        vec![TxSegment {
            fin: true,
            ..exp_data(ISS + 1, IRS + 1, W, 0, 100, true)
        }]
    );
    // Data from the peer acknowledging our data and FIN.
    let out = rx(&mut tcb, ms(10), &data(IRS + 1, ISS + 102, 50));
    assert_eq!(tcb.state(), State::FinWait2);
    assert_eq!(out.deliver, Some((0, 50)));
    let out = rx(&mut tcb, ms(11), &data(IRS + 51, ISS + 102, 50));
    assert_eq!(out.deliver, Some((0, 50)));
    assert_eq!(
        tx(&mut tcb, ms(11)),
        vec![exp_ack(ISS + 102, IRS + 101, W - 100)]
    );
    // No FIN-WAIT-2 timeout while the application still reads.
    assert_eq!(tcb.next_deadline(), None);
}

#[test]
fn data_after_close_is_acked_and_discarded_while_lingering() {
    let mut tcb = fin_wait_1(&cfg());
    let out = rx(&mut tcb, ms(1), &data(IRS + 1, ISS + 1, 100));
    assert_eq!(out, RxOutcome::default());
    assert_eq!(tcb.readable_len(), 0);
    assert_eq!(tcb.rcv_nxt(), SeqNum(IRS + 101));
    assert_eq!(
        tx(&mut tcb, ms(1)),
        vec![exp_ack(ISS + 2, IRS + 101, W - 100)]
    );
}

#[test]
fn data_after_the_close_linger_is_answered_with_rst() {
    // RFC 1122 §4.2.2.13, as Linux does: nobody will read it, so the peer is told.
    let mut tcb = fin_wait_1(&cfg());
    events(&mut tcb);
    let late = ms(0) + cfg().close_linger;
    let out = rx(&mut tcb, late, &data(IRS + 1, ISS + 1, 100));
    assert_eq!(out, RxOutcome::default());
    assert_eq!(tcb.state(), State::Closed);
    assert_eq!(events(&mut tcb), closed(CloseReason::Aborted));
    assert_eq!(
        tx(&mut tcb, late),
        vec![TxSegment {
            seq: SeqNum(ISS + 1),
            rst: true,
            ..TxSegment::default()
        }]
    );
}

#[test]
fn a_bare_fin_after_close_is_accepted() {
    let mut tcb = fin_wait_1(&cfg());
    rx(&mut tcb, ms(1), &fin(ack(IRS + 1, ISS + 2, 65535)));
    assert_eq!(tcb.state(), State::TimeWait);
    assert_eq!(tcb.rcv_nxt(), SeqNum(IRS + 2));
}

// ----- 15. Abort -----

#[test]
fn abort_sends_rst_at_snd_nxt() {
    let mut tcb = passive(&cfg());
    tcb.send(&payload(100), &mut pool()).unwrap();
    tx(&mut tcb, ms(0));
    tcb.abort();
    assert_eq!(tcb.state(), State::Closed);
    assert_eq!(events(&mut tcb), closed(CloseReason::Aborted));
    assert_eq!(
        tx(&mut tcb, ms(1)),
        vec![TxSegment {
            seq: SeqNum(ISS + 101),
            rst: true,
            ..TxSegment::default()
        }]
    );
    assert!(tx(&mut tcb, ms(2)).is_empty());
    assert_eq!(tcb.next_deadline(), None);
}

#[test]
fn abort_after_rto_uses_highest_sent_sequence() {
    let mut tcb = passive(&cfg());
    let m = MSS as usize;
    tcb.send(&payload(3 * m), &mut pool()).unwrap();
    tx(&mut tcb, ms(0));
    tick(&mut tcb, ms(1000));
    tcb.abort();
    let out = tx(&mut tcb, ms(1001));
    assert_eq!(out[0].seq, SeqNum(ISS + 1 + 3 * m as u32));
    assert!(out[0].rst);
}

// ----- 16. Keepalive -----

fn keepalive_cfg() -> TcpConfig {
    TcpConfig {
        keepalive: Some(Keepalive {
            idle: Duration::from_secs(10),
            interval: Duration::from_secs(1),
            probes: 3,
        }),
        ..cfg()
    }
}

#[test]
fn keepalive_probes_then_times_out() {
    let mut tcb = passive(&keepalive_cfg());
    assert_eq!(tcb.next_deadline(), Some(ms(10_000)));
    // RFC 1122 §4.2.3.6: SEG.SEQ = SND.UNA - 1, no data.
    let probe = exp_ack(ISS, IRS + 1, W);
    assert_eq!(tick(&mut tcb, ms(10_000)), vec![probe]);
    assert_eq!(tick(&mut tcb, ms(11_000)), vec![probe]);
    assert_eq!(tick(&mut tcb, ms(12_000)), vec![probe]);
    assert_eq!(tcb.state(), State::Established);
    assert!(tick(&mut tcb, ms(13_000)).is_empty());
    assert_eq!(tcb.state(), State::Closed);
    assert_eq!(events(&mut tcb), closed(CloseReason::TimedOut));
}

#[test]
fn keepalive_answer_resets_the_count() {
    let mut tcb = passive(&keepalive_cfg());
    assert_eq!(tick(&mut tcb, ms(10_000)).len(), 1);
    assert_eq!(tick(&mut tcb, ms(11_000)).len(), 1);
    // The peer answers the probe with an ACK.
    rx(&mut tcb, ms(11_010), &ack(IRS + 1, ISS + 1, 65535));
    assert_eq!(tcb.next_deadline(), Some(ms(21_010)));
    assert!(tick(&mut tcb, ms(13_000)).is_empty());
    assert_eq!(tcb.state(), State::Established);
}

// ----- 17. Window scaling -----

#[test]
fn window_scaling_applies_both_ways() {
    let cfg = TcpConfig {
        timestamps: false,
        ..TcpConfig::default()
    };
    let mut s = syn(IRS);
    s.wscale = Some(2);
    let mut tcb = Tcb::accept_syn(&open(SeqNum(ISS), 0, MSS, ms(0), &cfg), &s);
    let out = tx(&mut tcb, ms(0));
    assert_eq!(out[0].wscale, Some(3));
    assert_eq!(out[0].window, 65535);
    rx(&mut tcb, ms(1), &ack(IRS + 1, ISS + 1, 1000));
    assert_eq!(tcb.window_scales(), (2, 3));
    // RFC 7323 §2.3: SND.WND = SEG.WND << Snd.Wind.Shift.
    assert_eq!(tcb.snd_wnd(), 4000);
    // Our window field = RCV.WND >> Rcv.Wind.Shift.
    rx(&mut tcb, ms(2), &data(IRS + 1, ISS + 1, 1000));
    tcb.keep_unconsumed(&payload(1000), &mut pool());
    rx(&mut tcb, ms(3), &data(IRS + 1001, ISS + 1, 1000));
    assert_eq!(
        tx(&mut tcb, ms(3)),
        vec![exp_ack(ISS + 1, IRS + 2001, ((262144 - 2000) >> 3) as u16)]
    );
    // A window update from the peer is scaled too.
    rx(&mut tcb, ms(4), &ack(IRS + 2001, ISS + 1, 3));
    assert_eq!(tcb.snd_wnd(), 12);
}

// ----- 18. Sequence-number wrap -----

#[test]
fn exchange_across_sequence_wrap() {
    let iss = u32::MAX - 10;
    let irs = u32::MAX - 5;
    let cfg = cfg();
    let mut tcb = passive_at(&cfg, iss, irs);
    let s = iss.wrapping_add(1);
    let r = irs.wrapping_add(1);
    tcb.send(&payload(100), &mut pool()).unwrap();
    assert_eq!(tx(&mut tcb, ms(0)), vec![exp_data(s, r, W, 0, 100, true)]);
    let out = rx(&mut tcb, ms(10), &data(r, s.wrapping_add(100), 100));
    assert_eq!(out.deliver, Some((0, 100)));
    assert_eq!(tcb.snd_una(), SeqNum(s.wrapping_add(100)));
    assert_eq!(tcb.rcv_nxt(), SeqNum(r.wrapping_add(100)));
    assert_eq!(tx(&mut tcb, ms(10)), vec![]);
    assert_eq!(tcb.next_deadline(), Some(ms(50)));
    // Out-of-order across the wrap, then the gap.
    rx(
        &mut tcb,
        ms(20),
        &data(r.wrapping_add(200), s.wrapping_add(100), 50),
    );
    assert_eq!(
        tx(&mut tcb, ms(20)),
        vec![exp_ack(s.wrapping_add(100), r.wrapping_add(100), W - 100)]
    );
    rx(
        &mut tcb,
        ms(21),
        &data(r.wrapping_add(100), s.wrapping_add(100), 100),
    );
    assert_eq!(tcb.rcv_nxt(), SeqNum(r.wrapping_add(250)));
    tx(&mut tcb, ms(21));
    tcb.close();
    assert_eq!(
        tx(&mut tcb, ms(22)),
        vec![exp_fin(s.wrapping_add(100), r.wrapping_add(250), W - 250)]
    );
    rx(
        &mut tcb,
        ms(30),
        &fin(ack(r.wrapping_add(250), s.wrapping_add(101), 65535)),
    );
    assert_eq!(tcb.state(), State::TimeWait);
    assert_eq!(
        tx(&mut tcb, ms(30)),
        vec![exp_ack(s.wrapping_add(101), r.wrapping_add(251), W - 251)]
    );
}

// ----- 19. Regressions: long transfers, zero windows, close -----

/// Payload bytes per segment in the long-transfer tests: large, so that gigabytes take
/// few segments.
const BIG_MSS: u16 = 65000;

/// Passive open with a 65000-byte MSS both ways (no options otherwise).
fn passive_big_mss() -> Tcb {
    let cfg = cfg();
    let mut s = syn(IRS);
    s.mss = Some(BIG_MSS);
    let mut tcb = Tcb::accept_syn(&open(SeqNum(ISS), 0, BIG_MSS, ms(0), &cfg), &s);
    tx(&mut tcb, ms(0));
    rx(&mut tcb, ms(0), &ack(IRS + 1, ISS + 1, 65535));
    assert_eq!(tcb.state(), State::Established);
    assert_eq!(tcb.snd_mss(), BIG_MSS as usize);
    events(&mut tcb);
    tcb
}

/// Send `total` bytes one full segment at a time (shared, so nothing is copied), each
/// acknowledged at once by the peer. Checks every segment's position on the way.
fn stream(tcb: &mut Tcb, total: u64) {
    let chunk = bytes::Bytes::from(vec![0x5a; BIG_MSS as usize]);
    let mut left = total;
    let now = ms(10);
    while left > 0 {
        let n = left.min(BIG_MSS as u64) as usize;
        let una = tcb.snd_una();
        tcb.send_shared(chunk.slice(..n)).unwrap();
        let out = tx(tcb, now);
        assert_eq!(out.len(), 1, "{left} bytes left");
        assert_eq!((out[0].seq, out[0].payload_offset), (una, 0));
        assert_eq!(out[0].payload_len, n);
        rx(tcb, now, &ack(IRS + 1, (una + n).0, 65535));
        assert_eq!(tcb.send_buffer().len(), 0);
        left -= n as u64;
    }
}

/// After exactly 2^32 - 1 acknowledged bytes SND.UNA equals ISS again. The send buffer
/// must still start at SND.UNA: our SYN was acknowledged long ago, and treating ISS as
/// "SYN outstanding" would leave one stale byte at the front of the stream.
#[test]
fn snd_una_back_at_iss_after_four_gib_keeps_the_stream_aligned() {
    let mut tcb = passive_big_mss();
    stream(&mut tcb, (1u64 << 32) - 1);
    assert_eq!(tcb.snd_una(), SeqNum(ISS));
    tcb.send(&payload(100), &mut pool()).unwrap();
    assert_eq!(
        tx(&mut tcb, ms(20)),
        vec![exp_data(ISS, IRS + 1, W, 0, 100, true)]
    );
    rx(&mut tcb, ms(30), &ack(IRS + 1, ISS + 100, 65535));
    assert_eq!(tcb.send_buffer().len(), 0, "all 100 bytes acknowledged");
    assert_eq!(tcb.flight_size(), 0);
    tcb.send(&payload(50), &mut pool()).unwrap();
    assert_eq!(
        tx(&mut tcb, ms(40)),
        vec![exp_data(ISS + 100, IRS + 1, W, 0, 50, true)]
    );
    // The FIN goes right after the last byte.
    rx(&mut tcb, ms(50), &ack(IRS + 1, ISS + 150, 65535));
    tcb.close();
    assert_eq!(tx(&mut tcb, ms(60)), vec![exp_fin(ISS + 150, IRS + 1, W)]);
}

/// RFC 6582 §3.2 step 2 compares SND.UNA with "recover". Past 2 GiB from where
/// "recover" was last set, a stale value would read as ahead of SND.UNA and disable
/// fast retransmit for the next 2 GiB.
#[test]
fn fast_retransmit_works_after_two_gib() {
    let mut tcb = passive_big_mss();
    stream(&mut tcb, (1u64 << 31) + 10 * BIG_MSS as u64);
    let una = tcb.snd_una();
    tcb.send(&payload(BIG_MSS as usize), &mut pool()).unwrap();
    assert_eq!(tx(&mut tcb, ms(20)).len(), 1);
    for _ in 0..3 {
        rx(&mut tcb, ms(30), &ack(IRS + 1, una.0, 65535));
    }
    assert_eq!(
        tx(&mut tcb, ms(30)),
        vec![exp_data(una.0, IRS + 1, W, 0, BIG_MSS as usize, true)],
        "three duplicate ACKs trigger a fast retransmit"
    );
}

fn few_retries_cfg() -> TcpConfig {
    TcpConfig {
        max_retries: 3,
        ..cfg()
    }
}

/// Zero-window probes nobody answers count as retries: after `max_retries` of them the
/// connection times out (RFC 1122 §4.2.2.17 keeps it only while probes are answered).
#[test]
fn unanswered_zero_window_probes_time_out() {
    let mut tcb = cookie(&few_retries_cfg());
    rx(&mut tcb, ms(0), &ack(IRS + 1, ISS + 1, 0));
    tcb.send(&payload(100), &mut pool()).unwrap();
    assert!(tx(&mut tcb, ms(0)).is_empty());
    for i in 0..3 {
        let t = tcb.next_deadline().expect("persist timer");
        assert_eq!(
            tick(&mut tcb, t),
            vec![exp_data(ISS + 1, IRS + 1, W, 0, 1, false)],
            "probe {i}"
        );
    }
    let t = tcb.next_deadline().expect("persist timer");
    assert!(tick(&mut tcb, t).is_empty());
    assert_eq!(tcb.state(), State::Closed);
    assert_eq!(events(&mut tcb), closed(CloseReason::TimedOut));
}

/// Answered probes reset the count: a live peer may keep its window shut indefinitely.
#[test]
fn answered_zero_window_probes_keep_the_connection() {
    let mut tcb = cookie(&few_retries_cfg());
    rx(&mut tcb, ms(0), &ack(IRS + 1, ISS + 1, 0));
    tcb.send(&payload(100), &mut pool()).unwrap();
    tx(&mut tcb, ms(0));
    for i in 0..10 {
        let t = tcb.next_deadline().expect("persist timer");
        assert_eq!(tick(&mut tcb, t).len(), 1, "probe {i}");
        rx(
            &mut tcb,
            t + Duration::from_millis(10),
            &ack(IRS + 1, ISS + 1, 0),
        );
    }
    assert_eq!(tcb.state(), State::Established);
    assert!(events(&mut tcb).is_empty());
}

/// A FIN into a zero window waits for the persist timer and goes as a probe, not under
/// the retransmission timer: a peer that keeps answering with a zero window must not
/// see the connection time out, and one that answers nothing must.
#[test]
fn fin_into_zero_window_is_probed_not_retransmitted() {
    let cfg = cfg();
    let mut tcb = passive(&cfg);
    rx(&mut tcb, ms(0), &ack(IRS + 1, ISS + 1, 0));
    // A half-close: the application still holds the connection, so answered probes
    // keep it open (an orphan's are bounded: `orphan_tests.rs`).
    tcb.shutdown_write();
    assert_eq!(tcb.state(), State::FinWait1);
    assert!(tx(&mut tcb, ms(0)).is_empty(), "no FIN into a zero window");
    // Persist timer (one RTO), not retransmission: probes carry the FIN at SND.UNA.
    assert_eq!(tcb.next_deadline(), Some(ms(0) + tcb.rto()));
    for i in 0..(cfg.max_retries + 5) {
        let t = tcb.next_deadline().expect("persist timer");
        assert_eq!(
            tick(&mut tcb, t),
            vec![exp_fin(ISS + 1, IRS + 1, W)],
            "probe {i}"
        );
        rx(
            &mut tcb,
            t + Duration::from_millis(10),
            &ack(IRS + 1, ISS + 1, 0),
        );
    }
    assert_eq!(tcb.state(), State::FinWait1);
    assert!(events(&mut tcb).is_empty());
    // The window opens: the FIN goes as ordinary output and is acknowledged.
    let t = tcb.next_deadline().unwrap() - Duration::from_millis(1);
    rx(&mut tcb, t, &ack(IRS + 1, ISS + 1, 65535));
    assert_eq!(tx(&mut tcb, t), vec![exp_fin(ISS + 1, IRS + 1, W)]);
    rx(&mut tcb, t, &ack(IRS + 1, ISS + 2, 65535));
    assert_eq!(tcb.state(), State::FinWait2);
}

/// Same in FIN-WAIT-1 with nobody answering: the probes run out.
#[test]
fn fin_wait_1_probes_run_out_without_answers() {
    let mut tcb = passive(&few_retries_cfg());
    rx(&mut tcb, ms(0), &ack(IRS + 1, ISS + 1, 0));
    tcb.close();
    assert!(tx(&mut tcb, ms(0)).is_empty());
    for _ in 0..3 {
        let t = tcb.next_deadline().expect("persist timer");
        assert_eq!(tick(&mut tcb, t), vec![exp_fin(ISS + 1, IRS + 1, W)]);
    }
    let t = tcb.next_deadline().expect("persist timer");
    assert!(tick(&mut tcb, t).is_empty());
    assert_eq!(events(&mut tcb), closed(CloseReason::TimedOut));
}

/// After close(), data is still ACKed and dropped, but through the receive buffer: an
/// out-of-order range held from before the close joins up when the gap fills, the SACK
/// blocks stay true, and the peer's FIN behind it is accepted.
#[test]
fn fin_after_out_of_order_data_is_accepted_after_close() {
    let mut tcb = passive_sack(&cfg());
    rx(&mut tcb, ms(1), &data(IRS + 101, ISS + 1, 100));
    let out = tx(&mut tcb, ms(1));
    assert_eq!(out[0].sack[0], Some((IRS + 101, IRS + 201)));
    tcb.close();
    let out = tx(&mut tcb, ms(2));
    assert_eq!(out.len(), 1);
    assert!(out[0].fin && out[0].seq == SeqNum(ISS + 1));
    // The gap, acknowledging our FIN, while the close lingers.
    rx(&mut tcb, ms(3), &data(IRS + 1, ISS + 2, 100));
    assert_eq!(tcb.state(), State::FinWait2);
    assert_eq!(tcb.rcv_nxt(), SeqNum(IRS + 201));
    assert_eq!(tcb.readable_len(), 0);
    let out = tx(&mut tcb, ms(3));
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].ack, Some(SeqNum(IRS + 201)));
    assert_eq!(out[0].sack, [None; 3], "no hole left to report");
    rx(&mut tcb, ms(4), &fin(ack(IRS + 201, ISS + 2, 65535)));
    assert_eq!(tcb.state(), State::TimeWait);
    assert_eq!(tcb.rcv_nxt(), SeqNum(IRS + 202));
}
