//! RFC 5961 challenge ACKs, per connection and under the shared budget, and PAWS
//! (RFC 7323 §5) against old duplicates.

use super::*;

#[test]
fn challenge_acks_are_limited_per_connection() {
    let mut net = Net::new(config(), echo());
    net.eng.listen(PORT, 16);
    let mut pc = connect_peer(&mut net, 40000, SeqNum(1000), FULL);

    // In-window but not exact RSTs (RFC 5961 §3.2): one challenge ACK per 500 ms per
    // connection, as Linux's tcp_invalid_ratelimit.
    let mut acks = Vec::new();
    for i in 0..20 {
        acks.extend(pc.rst(&mut net, pc.snd_nxt + 1 + i));
    }
    assert_eq!(acks.len(), 1, "{acks:?}");
    assert!(acks[0].is_pure_ack());
    assert_eq!((acks[0].seg.seq, acks[0].seg.ack), (pc.rcv_nxt, pc.snd_nxt));
    assert_eq!(net.stats().challenge_acks, 1);
    assert_eq!(net.stats().invalid_acks_suppressed, 19);
    assert!(net.handler().closed.is_empty());
    // A SYN on the connection (§4.2) shares the connection's limit.
    let syn = syn_seg(&net, pc.snd_nxt + 5, FULL);
    assert!(pc.send(&mut net, &syn, &[]).is_empty());
    assert_eq!(net.stats().invalid_acks_suppressed, 20);
    // Another connection is not affected by this one's limit.
    let mut other = connect_peer(&mut net, 40001, SeqNum(7000), FULL);
    assert_eq!(other.rst(&mut net, other.snd_nxt + 1).len(), 1);
    // Half a second later the first connection is answered again.
    net.advance(Duration::from_millis(500));
    let out = pc.rst(&mut net, pc.snd_nxt + 3);
    assert_eq!(out.len(), 1, "{out:?}");
    assert!(out[0].is_pure_ack());
    assert_eq!(net.stats().challenge_acks, 3);

    // The data path is unharmed.
    let out = pc.data(&mut net, b"still here");
    assert_eq!(out[0].payload, b"still here");

    // An exact RST resets, silently.
    assert!(pc.rst(&mut net, pc.snd_nxt).is_empty());
    assert_eq!(net.handler().closed, vec![CloseReason::Reset]);
    assert_eq!(net.stats().conns_reset, 1);
    assert_eq!(net.eng.connection_count(), 1);
}

#[test]
fn the_shared_challenge_budget_is_random_each_second() {
    // With the per-connection limit off, the engine's budget shows: between half and
    // one and a half times the configured limit each second (CVE-2016-5696), drawn
    // afresh each second and differing between engines.
    let mut budgets = Vec::new();
    for seed in 0..8u8 {
        let mut cfg = config();
        cfg.tcp.challenge_ack_limit = 20;
        cfg.tcp.invalid_ack_interval = Duration::ZERO;
        cfg.secret = Some([seed.wrapping_mul(37).wrapping_add(1); 32]);
        let mut net = Net::new(cfg, echo());
        net.eng.listen(PORT, 16);
        let mut pc = connect_peer(&mut net, 40000, SeqNum(1000), FULL);
        for second in 0..2 {
            let mut acks = 0;
            for i in 0..100 {
                acks += pc.rst(&mut net, pc.snd_nxt + 1 + i).len();
            }
            assert!((10..30).contains(&acks), "budget {acks} (second {second})");
            budgets.push(acks);
            net.advance(Duration::from_secs(1));
        }
        let s = net.stats();
        assert_eq!(s.challenge_acks + s.challenge_acks_suppressed, 200);
    }
    budgets.sort_unstable();
    budgets.dedup();
    assert!(budgets.len() > 3, "budgets barely vary: {budgets:?}");
}

#[test]
fn out_of_window_syn_gets_a_rate_limited_challenge_ack() {
    let mut net = Net::new(config(), echo());
    net.eng.listen(PORT, 16);
    let mut pc = connect_peer(&mut net, 40000, SeqNum(1000), FULL);
    // RFC 5961 §4.2: a SYN in a synchronized state, whatever its sequence number, gets a
    // challenge ACK, and those are rate limited (§7): here by the connection's limit.
    let mut acks = Vec::new();
    for i in 0..4u32 {
        let syn = syn_seg(&net, SeqNum(2_000_000_000 + i), FULL);
        acks.extend(pc.send(&mut net, &syn, &[]));
    }
    assert_eq!(acks.len(), 1, "{acks:?}");
    assert!(acks
        .iter()
        .all(|a| a.is_pure_ack() && a.seg.ack == pc.snd_nxt));
    assert_eq!(net.stats().challenge_acks, 1);
    assert_eq!(net.stats().invalid_acks_suppressed, 3);
    assert_eq!(net.eng.connection_count(), 1);
}

#[test]
fn paws_drops_old_duplicates_and_out_of_window_rsts_are_ignored() {
    let mut net = Net::new(config(), echo());
    net.eng.listen(PORT, 16);
    let mut pc = connect_peer(&mut net, 40000, SeqNum(1000), FULL);
    net.advance(Duration::from_millis(100));
    let out = pc.data(&mut net, b"one");
    assert_eq!(out[0].payload, b"one");

    // RFC 7323 §5.3: a segment whose TSval is older than TS.Recent is dropped, and
    // answered with an ACK.
    let mut old = pc.seg(&net);
    old.timestamp = Some((net.peer_tsval() - 50, pc.ts_recent));
    let out = pc.send(&mut net, &old, b"stale");
    assert_eq!(out.len(), 1, "{out:?}");
    assert!(out[0].is_pure_ack());
    assert_eq!(out[0].seg.ack, pc.snd_nxt);
    assert_eq!(net.handler().received, b"one");

    // The same bytes with a current timestamp are taken.
    let out = pc.data(&mut net, b"fresh");
    assert_eq!(out[0].payload, b"fresh");
    assert_eq!(net.handler().received, b"onefresh");

    // A RST outside the window is dropped without a word (RFC 5961 §3.2).
    assert!(pc.rst(&mut net, pc.snd_nxt + 10_000_000).is_empty());
    assert!(pc.rst(&mut net, pc.snd_nxt - 1).is_empty());
    assert_eq!(net.stats().challenge_acks, 0);
    assert_eq!(net.eng.connection_count(), 1);
}
