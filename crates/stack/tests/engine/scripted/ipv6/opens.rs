//! Active opens on an IPv6 link while its addresses are still being checked for
//! duplicates: they wait for the address they would leave from, and fail at once when
//! the engine has no address of the peer's family at all.

use super::*;

/// A program that connects as soon as it starts: its open waits while the address it
/// would leave from is tentative, and goes out (resolving the neighbour first) once
/// duplicate detection has passed; the direct API still says why it cannot start.
#[test]
fn an_active_open_waits_for_its_tentative_source_address() {
    let mut net = Net::new(config6(1), echo());
    assert_eq!(
        net.eng.connect((PEER6, 9).into(), ()).err().map(|e| e.0),
        Some(ConnectError::NoSourceAddress)
    );
    net.eng.handler_mut().dial.push((PEER6, 9).into());
    let out = ipv6_of(&net.poll());
    assert!(out.iter().all(|p| p.tcp().is_none()), "no SYN yet");
    assert!(
        solicited_targets(&out).is_empty(),
        "no neighbour resolved from a tentative address"
    );
    let out = ipv6_of(&net.advance(Duration::from_millis(500)));
    assert!(out.is_empty(), "still waiting: {}", out.len());
    // Duplicate detection passes: the neighbour is resolved from our address, then the
    // SYN goes.
    let out = ipv6_of(&net.advance(Duration::from_millis(500)));
    assert_eq!(solicited_targets(&out), vec![PEER6]);
    let solicitation = out.iter().find(|p| {
        matches!(
            p.icmp(),
            Some(Icmpv6Repr::Ndisc(NdiscRepr::NeighborSolicit { .. }))
        )
    });
    assert_eq!(solicitation.map(|p| p.src), Some(HOST6));
    let out = tcp6_of(&net.send(&advertisement(PEER6, PEER_MAC, true)));
    assert!(out.len() == 1 && out[0].0.flags.syn, "{}", out.len());
    assert!(net.handler().connect_failures.is_empty());
    assert_eq!(net.stats().conns_opened_active, 1);
}

/// An open to a family the engine has no address of at all fails at once, and one left
/// waiting fails when the engine stops accepting.
#[test]
fn an_active_open_without_any_source_address_fails_at_once() {
    let mut net = Net::new(config(), echo());
    net.eng.handler_mut().dial.push((PEER6, 9).into());
    net.poll();
    assert_eq!(
        net.handler().connect_failures,
        vec![ConnectError::NoSourceAddress]
    );
    let mut net = Net::new(config6(1), echo());
    net.eng.handler_mut().dial.push((PEER6, 9).into());
    net.poll();
    assert!(net.handler().connect_failures.is_empty(), "waiting");
    net.eng.stop_accepting();
    net.poll();
    assert_eq!(
        net.handler().connect_failures,
        vec![ConnectError::NoSourceAddress]
    );
}
