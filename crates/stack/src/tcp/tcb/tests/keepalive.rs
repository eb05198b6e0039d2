//! Keepalive probes (RFC 1122 §4.2.3.6).

use super::*;

// ----- Keepalive -----

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

#[test]
fn a_connections_own_keepalive_replaces_the_configurations() {
    // Configured off, turned on for this connection: probes from the idle time after
    // it was set.
    let mut tcb = passive(&cfg());
    assert_eq!(tcb.next_deadline(), None);
    tick(&mut tcb, ms(5_000));
    tcb.set_keepalive(Some(Keepalive {
        idle: Duration::from_secs(2),
        interval: Duration::from_secs(1),
        probes: 1,
    }));
    assert_eq!(tcb.next_deadline(), Some(ms(7_000)));
    assert_eq!(tick(&mut tcb, ms(7_000)), vec![exp_ack(ISS, IRS + 1, W)]);
    assert!(tick(&mut tcb, ms(8_000)).is_empty());
    assert_eq!(events(&mut tcb), closed(CloseReason::TimedOut));

    // Configured on, turned off for this connection: no probe.
    let mut tcb = passive(&keepalive_cfg());
    tcb.set_keepalive(None);
    assert_eq!(tcb.next_deadline(), None);
    assert!(tick(&mut tcb, ms(60_000)).is_empty());
    assert_eq!(tcb.state(), State::Established);
}

#[test]
fn a_connections_own_keepalive_leaves_the_shared_limits() {
    // The engine's connections share their limits; one that sets a keepalive of its
    // own takes a copy, and the others keep the configuration's.
    let mut tcb = passive(&keepalive_cfg());
    let shared = Rc::clone(&tcb.cfg);
    tcb.set_keepalive(shared.keepalive);
    assert!(Rc::ptr_eq(&tcb.cfg, &shared));
    tcb.set_keepalive(None);
    assert!(!Rc::ptr_eq(&tcb.cfg, &shared));
    assert_eq!(shared.keepalive, keepalive_cfg().keepalive);
}
