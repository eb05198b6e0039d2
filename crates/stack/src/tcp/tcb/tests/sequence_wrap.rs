//! Sequence numbers across the wrap (RFC 9293 §3.4) and over transfers of gigabytes.

use super::*;

// ----- Sequence-number wrap -----

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

// ----- Transfers of gigabytes -----

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
