//! Tests of the connection state machine ([`Tcb`]). Most are scripted segment tests:
//! each feeds exact segments and asserts the exact replies of `poll_transmit`, the
//! state and the events, one RFC rule per test, grouped by topic in the files below.
//! Time is virtual: tests advance an [`Instant`] by hand. `prediction.rs` instead runs
//! random conversations with header prediction on and off and compares them.
//!
//! This file holds what the topics share: the addresses and sequence numbers of the
//! scripted connection, segment construction, driving a [`Tcb`], and the opens most
//! tests start from.

use std::net::{Ipv4Addr, SocketAddr};
use std::rc::Rc;
use std::time::Duration;

use super::{Events, Opening, RxOutcome, State, SynOptions, Tcb, TcbLimits};
use crate::app::CloseReason;
use crate::tcp::config::{Keepalive, TcpConfig};
use crate::tcp::pool::RingPool;
use crate::tcp::segment::{Segment, TxSegment};
use crate::tcp::seq::SeqNum;
use crate::time::Instant;

const LOCAL: SocketAddr =
    SocketAddr::V4(std::net::SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 1), 80));
const REMOTE: SocketAddr = SocketAddr::V4(std::net::SocketAddrV4::new(
    Ipv4Addr::new(10, 0, 0, 2),
    40000,
));
/// Our initial sequence number.
const ISS: u32 = 1000;
/// The peer's initial sequence number.
const IRS: u32 = 5000;
const MSS: u16 = 1460;
/// A receive buffer small enough that window scaling is not needed (window field = buffer).
const RBUF: usize = 64000;

fn ms(n: u64) -> Instant {
    Instant::from_millis(n)
}

/// What a connection between [`LOCAL`] and [`REMOTE`] is created with.
fn open(iss: SeqNum, ts_offset: u32, our_mss: u16, now: Instant, cfg: &TcpConfig) -> Opening<'_> {
    Opening {
        iss,
        ts_offset,
        our_mss,
        now,
        cfg,
        limits: Rc::new(TcbLimits::new(cfg)),
    }
}

fn cfg() -> TcpConfig {
    TcpConfig {
        recv_buffer: RBUF,
        ..TcpConfig::default()
    }
}

// ----- Segment construction -----

/// A bare segment from the peer.
fn seg(seq: u32) -> Segment {
    Segment {
        src_port: REMOTE.port(),
        dst_port: LOCAL.port(),
        seq: SeqNum(seq),
        window: 65535,
        ..Segment::default()
    }
}

fn syn(seq: u32) -> Segment {
    let mut s = seg(seq);
    s.flags.syn = true;
    s.mss = Some(MSS);
    s
}

/// SYN with every option: MSS, window scale, SACK-permitted, timestamps.
fn syn_full(seq: u32, mss: u16, ws: u8, tsval: u32) -> Segment {
    let mut s = syn(seq);
    s.mss = Some(mss);
    s.wscale = Some(ws);
    s.sack_permitted = true;
    s.timestamp = Some((tsval, 0));
    s
}

fn ack(seq: u32, ack: u32, window: u16) -> Segment {
    let mut s = seg(seq);
    s.flags.ack = true;
    s.ack = SeqNum(ack);
    s.window = window;
    s
}

fn data(seq: u32, ack_no: u32, len: usize) -> Segment {
    let mut s = ack(seq, ack_no, 65535);
    s.flags.psh = true;
    s.payload_len = len;
    s
}

fn fin(mut s: Segment) -> Segment {
    s.flags.fin = true;
    s
}

fn rst(seq: u32) -> Segment {
    let mut s = seg(seq);
    s.flags.rst = true;
    s.window = 0;
    s
}

fn with_ts(mut s: Segment, tsval: u32, tsecr: u32) -> Segment {
    s.timestamp = Some((tsval, tsecr));
    s
}

fn payload(len: usize) -> Vec<u8> {
    (0..len).map(|i| i as u8).collect()
}

// ----- Driving a Tcb -----

/// A pool for one call: buffer storage comes from the allocator and goes back to it.
fn pool() -> RingPool {
    RingPool::default()
}

/// Feed a segment; its payload is `seg.payload_len` pattern bytes.
fn rx(tcb: &mut Tcb, now: Instant, seg: &Segment) -> RxOutcome {
    let p = payload(seg.payload_len);
    tcb.on_segment(now, seg, &p, &mut pool())
}

fn tx(tcb: &mut Tcb, now: Instant) -> Vec<TxSegment> {
    let mut out = Vec::new();
    tcb.poll_transmit(now, &mut out, &mut pool());
    out
}

/// Fire due timers, then collect what is sent.
fn tick(tcb: &mut Tcb, now: Instant) -> Vec<TxSegment> {
    tcb.on_timer(now);
    tx(tcb, now)
}

/// The pure ACK we expect: no options (no timestamps, no SACK).
fn exp_ack(seq: u32, ack: u32, window: u16) -> TxSegment {
    TxSegment {
        seq: SeqNum(seq),
        ack: Some(SeqNum(ack)),
        window,
        ..TxSegment::default()
    }
}

/// The data segment we expect (payload offset counted from SND.UNA's byte).
fn exp_data(seq: u32, ack: u32, window: u16, offset: usize, len: usize, psh: bool) -> TxSegment {
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

fn exp_fin(seq: u32, ack: u32, window: u16) -> TxSegment {
    TxSegment {
        fin: true,
        psh: true,
        ..exp_ack(seq, ack, window)
    }
}

fn events(tcb: &mut Tcb) -> Events {
    tcb.take_events()
}

fn closed(reason: CloseReason) -> Events {
    Events {
        closed: Some(reason),
        ..Events::default()
    }
}

/// Passive open with a plain SYN (MSS only), completed at time 0: ESTABLISHED, no
/// timestamps, no SACK, no window scaling. The peer's window is 65535.
fn passive(cfg: &TcpConfig) -> Tcb {
    passive_at(cfg, ISS, IRS)
}

fn passive_at(cfg: &TcpConfig, iss: u32, irs: u32) -> Tcb {
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
fn passive_sack(cfg: &TcpConfig) -> Tcb {
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
fn active(cfg: &TcpConfig) -> Tcb {
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
fn cookie(cfg: &TcpConfig) -> Tcb {
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
fn fin_wait_1(cfg: &TcpConfig) -> Tcb {
    let mut tcb = passive(cfg);
    tcb.close();
    assert_eq!(tcb.state(), State::FinWait1);
    assert_eq!(
        tx(&mut tcb, ms(0)),
        vec![exp_fin(ISS + 1, IRS + 1, RBUF as u16)]
    );
    tcb
}

const W: u16 = RBUF as u16;

/// The inline size of each part of a [`Tcb`], for the memory-per-connection test
/// (`engine/tests.rs`) and the table in docs/memory.md it backs.
pub(crate) fn part_sizes() -> Vec<(&'static str, usize)> {
    use super::recovery::ColdRecovery;
    use super::{
        Cc, Flight, PendingOutput, RackKeep, RareState, Recovery, RecvBuffer, RecvSeq,
        RttEstimator, SendBuffer, SendSeq, TimerTable, Timestamps,
    };
    use crate::tcp::scoreboard::Scoreboard;
    use std::mem::size_of;
    vec![
        ("SendSeq (incl. SendBuffer)", size_of::<SendSeq>()),
        ("  SendBuffer", size_of::<SendBuffer>()),
        ("RecvSeq (incl. RecvBuffer)", size_of::<RecvSeq>()),
        ("  RecvBuffer", size_of::<RecvBuffer>()),
        ("Recovery", size_of::<Recovery>()),
        ("PendingOutput", size_of::<PendingOutput>()),
        ("TimerTable", size_of::<TimerTable<RareState>>()),
        (
            "  rare timers, state (in use)",
            TimerTable::<RareState>::RARE_BYTES,
        ),
        ("RttEstimator", size_of::<RttEstimator>()),
        ("Cc", size_of::<Cc>()),
        ("Scoreboard (in the flight block)", size_of::<Scoreboard>()),
        ("Flight (while sending)", size_of::<Flight>()),
        ("RackKeep", size_of::<RackKeep>()),
        ("  ColdRecovery (while in use)", size_of::<ColdRecovery>()),
        ("Option<Timestamps>", size_of::<Option<Timestamps>>()),
        ("TcbLimits (shared)", size_of::<TcbLimits>()),
        ("Tcb", size_of::<Tcb>()),
    ]
}

mod acceptance;
mod close;
mod handshake;
mod keepalive;
mod options;
mod orphan;
mod prediction;
mod receive;
mod recovery;
mod retransmission;
mod sequence_wrap;
mod zero_window;
