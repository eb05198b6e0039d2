//! The target reaches what it is meant to: synchronized connections over either
//! family and both IPv6 addresses, Neighbor Discovery answered, duplicate address
//! detection's conflicts, and the path-MTU path.

use super::*;
use crate::wire6::sel;
use rusty_stack::TcpState as State;

fn established(bench: &Bench) -> bool {
    bench
        .eng
        .connection_states()
        .any(|(r, s)| r.port() == PEER_PORT && s == State::Established)
}

/// The handshakes the target builds itself work over IPv4, IPv6 to the engine's
/// global address and to its link-local one, and after duplicate address detection,
/// so fuzzed segments reach a synchronized connection; in-order data is echoed and
/// acknowledged, over IPv6 through extension headers too.
#[test]
fn handshakes_reach_established_and_data_is_echoed() {
    for family in [0, V6, V6 | LINK_LOCAL, V6 | DAD] {
        for how in [
            OPEN,
            OPEN | FULL_OPTIONS,
            OPEN | ACTIVE,
            OPEN | ACTIVE | FULL_OPTIONS,
        ] {
            let header = family | how;
            let mut bench = run(&Script::new(header, u32::MAX).finish());
            assert!(established(&bench), "header {header:#x}");
            let peer = bench.peer.expect("tracked");
            assert_eq!(peer.ip.is_ipv6(), family & V6 != 0);
            for (tag, sent) in [(0, 100), (2, 200)] {
                let before = bench.peer.expect("tracked").rcv_nxt;
                let script = Script::new(0, 0).segment(tag, 16, 0, 0, 65535, 100, 0, &[]);
                let script = script.finish();
                bench.segment(script[1], &mut Input::new(&script[2..]));
                let peer = bench.peer.expect("tracked");
                assert_eq!(peer.rcv_nxt, before + 100, "echo, header {header:#x}");
                assert_eq!(peer.snd_nxt, SeqNum(sent), "{header:#x}");
            }
            bench.check_alive();
        }
    }
}

/// A packet record carries the tracked connection's next segment over IPv6, through
/// a chain the engine accepts.
#[test]
fn packet_records_reach_the_tracked_connection() {
    let tcp = Script::tcp6_fields(16, 0, 0, 0, 4);
    let chain = [0, 1, 3];
    let input = Script::new(OPEN | V6 | FULL_OPTIONS, 7)
        .packet6(packet6::TCP, 0, (sel::PEER6, sel::HOST6, 64), &chain, &tcp)
        .finish();
    let bench = run(&input);
    let peer = bench.peer.expect("tracked");
    assert_eq!(peer.snd_nxt, SeqNum(8 + 32), "32 bytes taken");
    assert!(established(&bench));
}

/// The engine's first link-local address is the one its configuration names.
#[test]
fn the_link_local_address_is_the_engines() {
    let mut cfg = rusty_stack::EngineConfig::new(HOST_IP);
    cfg.ipv6 = vec![(HOST6, 64)];
    cfg.stable_secret = wire6::STABLE_SECRET;
    assert_eq!(cfg.link_local(HOST_MAC), Some(host_link_local(0)));
}

/// Solicitations for our addresses are answered; a Packet Too Big quoting a segment
/// in flight lowers the connection's segment size.
#[test]
fn neighbor_discovery_and_packet_too_big_are_reached() {
    let input = Script::new(OPEN | V6 | FULL_OPTIONS, 1)
        .solicit(sel::PEER6, sel::HOST6, 1, 1)
        .solicit(sel::PEER_LL, sel::HOST_LL, 1, 1)
        .data(16, 1400)
        .error6(sel::ROUTER_LL, 0, 1280, 0xff, 0)
        .finish();
    let bench = run(&input);
    let s = bench.eng.stats();
    assert_eq!(s.neighbor_advertisements_sent, 2);
    assert_eq!(s.path_mtu_lowered, 1);
}

/// Another node probing for, or holding, a tentative address of ours makes it a
/// duplicate; the link-local address is drawn again, and usable once probed.
#[test]
fn duplicate_address_detection_is_reached() {
    let dad = |sel: u8, how: u8| [Record::Icmp6 as u8 | icmp6::DAD << 3, sel, how];
    let input = [
        &[V6 | DAD][..],
        &dad(0, 0),
        &dad(1, 1),
        &[Record::Advance as u8, 0x82],
    ]
    .concat();
    let mut bench = run(&input);
    assert_eq!(bench.eng.stats().duplicate_addresses, 2);
    let ping = wire6::echo_request(PEER_LL, host_link_local(1), b"second draw");
    bench.send(&ping);
    assert_eq!(bench.echoes, [b"second draw".to_vec()]);
    bench.send(&wire6::echo_request(PEER6, HOST6, b"duplicate"));
    assert!(bench.echoes.is_empty(), "a duplicate address answered");
}
