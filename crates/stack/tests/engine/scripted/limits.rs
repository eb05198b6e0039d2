//! Scripted tests of the counts kept instead of scans: TIME-WAIT entries a RST
//! closed leave [`Engine::time_wait_count`] once, and leave the table without being
//! counted twice.

use super::*;

#[test]
fn time_wait_count_follows_resets_and_reopens_without_a_scan() {
    let mut net = time_wait_net();
    let mut a = close_into_time_wait(&mut net, 40000, SeqNum(1000), FULL);
    let _b = close_into_time_wait(&mut net, 40001, SeqNum(5000), FULL);
    assert_eq!(net.eng.time_wait_count(), 2);
    // A RST at RCV.NXT closes a's entry (it stays, inert, for our own active opens).
    let seq = a.snd_nxt;
    assert!(a.rst(&mut net, seq).is_empty());
    assert_eq!(net.eng.time_wait_count(), 1);
    // Once closed, it is not closed again.
    assert!(a.rst(&mut net, seq).is_empty());
    assert_eq!(net.eng.time_wait_count(), 1);
    // A SYN reopens the pair: the inert entry goes, b's stays.
    let out = send_syn(&mut net, 40000, a.snd_nxt + 100_000, FULL);
    assert!(out[0].is_syn_ack(), "{out:?}");
    assert_eq!(net.eng.time_wait_count(), 1);
    net.advance(Duration::from_secs(11));
    assert_eq!(net.eng.time_wait_count(), 0);
}
