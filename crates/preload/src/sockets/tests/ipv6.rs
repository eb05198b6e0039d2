//! AF_INET6 sockets: IPv6 connections, dual-stack listeners that show IPv4 peers
//! IPv4-mapped, `IPV6_V6ONLY`, binds across the two families, link-local scopes, and
//! the socket addresses a program passes in and gets back, each against what Linux
//! does.

use super::*;
use rusty_stack::time::Clock;
use std::net::{SocketAddrV4, SocketAddrV6};

fn v6(ip: Ipv6Addr, port: u16) -> SocketAddr {
    SocketAddr::V6(SocketAddrV6::new(ip, port, 0, 0))
}

fn mapped(ip: Ipv4Addr, port: u16) -> SocketAddr {
    v6(ip.to_ipv6_mapped(), port)
}

fn any6(port: u16) -> SocketAddr {
    v6(Ipv6Addr::UNSPECIFIED, port)
}

fn any4(port: u16) -> SocketAddr {
    SocketAddr::from((Ipv4Addr::UNSPECIFIED, port))
}

/// A socket of `family` on `stack`, `IPV6_V6ONLY` as `v6only`.
fn socket(stack: &mut Stack, family: Family, v6only: bool) -> SockId {
    let s = stack.socket(family);
    let mut opts = stack.opts(s).unwrap();
    opts.v6only = v6only;
    stack.set_opts(s, opts).unwrap();
    s
}

/// A listening socket of `family` on the server, bound to `addr`.
fn listener(net: &mut Net, family: Family, addr: SocketAddr, v6only: bool) -> SockId {
    let l = socket(&mut net.server, family, v6only);
    net.server.bind(l, addr).unwrap();
    net.server.listen(l, 16, true).unwrap();
    l
}

/// A client socket of `family` connected to `to`.
fn connect(net: &mut Net, family: Family, to: SocketAddr) -> SockId {
    let c = net.client.socket(family);
    assert_eq!(net.client.connect(c, to), Err(Errno(libc::EINPROGRESS)));
    assert!(net.run_until(|n| n.client.connect_result(c) == Ok(true)));
    c
}

/// What a connect from a fresh client socket of `family` to `to` ends with.
fn connect_result(net: &mut Net, family: Family, to: SocketAddr) -> Result<bool, Errno> {
    let c = net.client.socket(family);
    if let Err(e) = net.client.connect(c, to) {
        if e.0 != libc::EINPROGRESS {
            return Err(e);
        }
    }
    let mut result = Ok(false);
    net.run_until(|n| {
        result = n.client.connect_result(c);
        result != Ok(false)
    });
    result
}

/// The next connection `l` accepts.
fn accept(net: &mut Net, l: SockId) -> SockId {
    assert!(net.run_until(|n| n.server.readiness(l) & ready::IN != 0));
    net.server.accept(l).unwrap()
}

#[test]
fn an_ipv6_connection_carries_bytes_and_names_both_ends() {
    let mut net = Net::dual();
    let l = listener(&mut net, Family::V6, v6(SERVER6, 80), false);
    assert!(
        net.server.opts(l).unwrap().v6only,
        "a specific IPv6 address makes the socket IPv6-only"
    );
    let c = connect(&mut net, Family::V6, v6(SERVER6, 80));
    let s = accept(&mut net, l);
    let client_end = net.client.local_addr(c).unwrap();
    assert_eq!(client_end.ip(), IpAddr::V6(CLIENT6));
    assert_eq!(net.client.peer_addr(c), Ok(v6(SERVER6, 80)));
    assert_eq!(net.server.peer_addr(s), Ok(client_end));
    assert_eq!(net.server.local_addr(s), Ok(v6(SERVER6, 80)));
    assert_eq!(net.server.family(s), Ok(Family::V6));
    assert_eq!(net.client.send(c, b"over IPv6"), Ok(9));
    net.client.shutdown(c, Shut::Write).unwrap();
    assert_eq!(net.read_all(s, true), b"over IPv6");
}

#[test]
fn a_dual_stack_listener_takes_both_families_and_shows_ipv4_peers_mapped() {
    let mut net = Net::dual();
    let l = listener(&mut net, Family::V6, any6(80), false);
    assert_eq!(net.server.local_addr(l), Ok(any6(80)));
    let c4 = connect(&mut net, Family::V4, SocketAddr::from((SERVER_IP, 80)));
    let s4 = accept(&mut net, l);
    let c6 = connect(&mut net, Family::V6, v6(SERVER6, 80));
    let s6 = accept(&mut net, l);
    let client4 = net.client.local_addr(c4).unwrap();
    assert_eq!(client4.ip(), IpAddr::V4(CLIENT_IP));
    assert_eq!(
        net.server.peer_addr(s4),
        Ok(mapped(CLIENT_IP, client4.port()))
    );
    assert_eq!(net.server.local_addr(s4), Ok(mapped(SERVER_IP, 80)));
    assert_eq!(
        net.server.peer_addr(s6),
        Ok(net.client.local_addr(c6).unwrap())
    );
    // Accepted sockets are the listener's family, with its IPV6_V6ONLY.
    for s in [s4, s6] {
        assert_eq!(net.server.family(s), Ok(Family::V6));
        assert!(!net.server.opts(s).unwrap().v6only);
    }
    assert_eq!(net.client.send(c4, b"four"), Ok(4));
    assert!(net.run_until(|n| n.server.unread(s4) == Ok(4)));
}

#[test]
fn an_ipv6_only_listener_refuses_ipv4_and_an_af_inet_one_may_share_its_port() {
    let mut net = Net::dual();
    let l6 = listener(&mut net, Family::V6, any6(80), true);
    assert_eq!(
        connect_result(&mut net, Family::V4, SocketAddr::from((SERVER_IP, 80))),
        Err(Errno(libc::ECONNREFUSED)),
        "refused at the SYN, as on Linux"
    );
    let l4 = listener(&mut net, Family::V4, any4(80), false);
    connect(&mut net, Family::V4, SocketAddr::from((SERVER_IP, 80)));
    connect(&mut net, Family::V6, v6(SERVER6, 80));
    let s4 = accept(&mut net, l4);
    let s6 = accept(&mut net, l6);
    assert_eq!(net.server.family(s4), Ok(Family::V4));
    assert_eq!(
        net.server.peer_addr(s4).unwrap().ip(),
        IpAddr::V4(CLIENT_IP)
    );
    assert_eq!(net.server.peer_addr(s6).unwrap().ip(), IpAddr::V6(CLIENT6));
    assert_eq!(net.server.accept(l4), Err(Errno(libc::EAGAIN)));
    assert_eq!(net.server.accept(l6), Err(Errno(libc::EAGAIN)));
    // With the IPv6 listener gone, IPv6 is refused and IPv4 still taken.
    net.server.release(l6).unwrap();
    assert_eq!(
        connect_result(&mut net, Family::V6, v6(SERVER6, 80)),
        Err(Errno(libc::ECONNREFUSED))
    );
    connect(&mut net, Family::V4, SocketAddr::from((SERVER_IP, 80)));
}

#[test]
fn a_socket_bound_to_a_mapped_address_is_an_ipv4_one() {
    let mut net = Net::dual();
    let l = listener(&mut net, Family::V6, mapped(SERVER_IP, 80), false);
    assert_eq!(net.server.local_addr(l), Ok(mapped(SERVER_IP, 80)));
    assert_eq!(
        connect_result(&mut net, Family::V6, v6(SERVER6, 80)),
        Err(Errno(libc::ECONNREFUSED))
    );
    let c = connect(&mut net, Family::V4, SocketAddr::from((SERVER_IP, 80)));
    let s = accept(&mut net, l);
    let port = net.client.local_addr(c).unwrap().port();
    assert_eq!(net.server.peer_addr(s), Ok(mapped(CLIENT_IP, port)));
    // The IPv4 wildcard, mapped, reads back as such.
    let w = socket(&mut net.server, Family::V6, false);
    net.server
        .bind(w, mapped(Ipv4Addr::UNSPECIFIED, 81))
        .unwrap();
    assert_eq!(
        net.server.local_addr(w),
        Ok(mapped(Ipv4Addr::UNSPECIFIED, 81))
    );
}

#[test]
fn binds_across_the_families_conflict_as_linux_decides() {
    let mut net = Net::dual();
    let link_local = net.server.engine.ipv6_addresses()[0];
    let scoped = SocketAddr::V6(SocketAddrV6::new(link_local, 0, 0, LINK_INDEX));
    let at = |a: SocketAddr, port| {
        let mut a = a;
        a.set_port(port);
        a
    };
    type Bind = (Family, SocketAddr, bool);
    let v4_any: Bind = (Family::V4, any4(0), false);
    let v4_own: Bind = (Family::V4, SocketAddr::from((SERVER_IP, 0)), false);
    let dual: Bind = (Family::V6, any6(0), false);
    let v6only: Bind = (Family::V6, any6(0), true);
    let own6: Bind = (Family::V6, v6(SERVER6, 0), false);
    let ll: Bind = (Family::V6, scoped, false);
    let own_mapped: Bind = (Family::V6, mapped(SERVER_IP, 0), false);
    let in_use = Err(Errno(libc::EADDRINUSE));
    // (first, second, what the second bind gets), as Linux answers each (checked on
    // Linux 6.18 with the same addresses on a veth).
    let cases: [(Bind, Bind, Result<(), Errno>); 17] = [
        (v4_any, dual, in_use),
        (v4_any, v6only, Ok(())),
        (v4_any, own6, Ok(())),
        (v4_any, own_mapped, in_use),
        (dual, v4_any, in_use),
        (dual, v4_own, in_use),
        (dual, own6, in_use),
        (dual, v6only, in_use),
        (v6only, v4_any, Ok(())),
        (v6only, own_mapped, Ok(())),
        (v6only, own6, in_use),
        (own6, ll, Ok(())),
        (own6, dual, in_use),
        (own6, v4_any, Ok(())),
        (own_mapped, v4_own, in_use),
        (own_mapped, dual, in_use),
        (own_mapped, v6only, Ok(())),
    ];
    for (i, ((f1, a1, o1), (f2, a2, o2), want)) in cases.into_iter().enumerate() {
        let port = 9000 + i as u16;
        let first = socket(&mut net.server, f1, o1);
        net.server.bind(first, at(a1, port)).unwrap();
        let second = socket(&mut net.server, f2, o2);
        let got = net.server.bind(second, at(a2, port));
        assert_eq!(got, want, "case {i}: {a1} then {a2}");
        // Two that both set SO_REUSEPORT share any port.
        let third = socket(&mut net.server, f2, o2);
        let mut opts = net.server.opts(third).unwrap();
        opts.reuse_port = true;
        net.server.set_opts(third, opts).unwrap();
        let mut first_opts = net.server.opts(first).unwrap();
        first_opts.reuse_port = true;
        net.server.set_opts(first, first_opts).unwrap();
        if got.is_ok() {
            net.server.release(second).unwrap();
        }
        assert_eq!(net.server.bind(third, at(a2, port)), Ok(()), "case {i}");
    }
}

#[test]
fn bind_takes_the_wildcard_and_own_addresses_with_linuxs_errors() {
    let mut net = Net::dual();
    let link_local = net.server.engine.ipv6_addresses()[0];
    let scoped = |scope| SocketAddr::V6(SocketAddrV6::new(link_local, 80, 0, scope));
    let server = &mut net.server;
    assert_eq!(server.binds(any6(80)), Ok(true));
    assert_eq!(server.binds(v6(SERVER6, 80)), Ok(true));
    assert_eq!(server.binds(mapped(SERVER_IP, 80)), Ok(true));
    assert_eq!(server.binds(mapped(Ipv4Addr::UNSPECIFIED, 80)), Ok(true));
    assert_eq!(server.binds(scoped(LINK_INDEX)), Ok(true));
    // The kernel's: loopback, another interface's scope, addresses Rusty lacks.
    assert_eq!(server.binds(v6(Ipv6Addr::LOCALHOST, 80)), Ok(false));
    assert_eq!(server.binds(scoped(LINK_INDEX + 1)), Ok(false));
    assert_eq!(server.binds(v6(CLIENT6, 80)), Ok(false));
    assert_eq!(server.binds(mapped(Ipv4Addr::LOCALHOST, 80)), Ok(false));
    // Never a TCP socket's: a group, a link-local address without its scope.
    assert_eq!(
        server.binds(v6("ff02::1".parse().unwrap(), 80)),
        Err(Errno(libc::EINVAL))
    );
    assert_eq!(server.binds(scoped(0)), Err(Errno(libc::EINVAL)));

    let s = socket(server, Family::V6, true);
    assert_eq!(
        server.bind(s, mapped(SERVER_IP, 80)),
        Err(Errno(libc::EINVAL)),
        "an IPv4-mapped address on an IPv6-only socket"
    );
    assert_eq!(
        server.bind(s, SocketAddr::from((SERVER_IP, 80))),
        Err(Errno(libc::EAFNOSUPPORT))
    );
    server.bind(s, scoped(LINK_INDEX)).unwrap();
    assert_eq!(server.local_addr(s), Ok(scoped(LINK_INDEX)));
    assert_eq!(server.bind(s, any6(81)), Err(Errno(libc::EINVAL)), "bound");
    let s4 = server.socket(Family::V4);
    assert_eq!(server.bind(s4, any6(82)), Err(Errno(libc::EAFNOSUPPORT)));
    // Port 0 on an AF_INET6 socket: a port of its own, the wildcard kept.
    let z = socket(server, Family::V6, false);
    server.bind(z, any6(0)).unwrap();
    let got = server.local_addr(z).unwrap();
    assert!(got.ip().is_unspecified() && got.is_ipv6() && got.port() >= 32768);
    // listen without bind: the family's wildcard.
    let u = socket(server, Family::V6, false);
    assert_eq!(server.local_addr(u), Ok(any6(0)));
    server.listen(u, 4, true).unwrap();
    assert!(server.local_addr(u).unwrap().is_ipv6());
}

#[test]
fn what_a_connect_goes_to_and_the_errors_linux_gives() {
    let mut net = Net::dual();
    let scoped =
        |scope| SocketAddr::V6(SocketAddrV6::new("fe80::9".parse().unwrap(), 80, 0, scope));
    let client = &mut net.client;
    assert_eq!(client.carries(v6(SERVER6, 80)), Ok(true));
    assert_eq!(client.carries(mapped(SERVER_IP, 80)), Ok(true));
    assert_eq!(client.carries(scoped(LINK_INDEX)), Ok(true));
    assert_eq!(client.carries(scoped(LINK_INDEX + 1)), Ok(false));
    assert_eq!(client.carries(scoped(0)), Err(Errno(libc::EINVAL)));
    for kernels in ["::1", "::", "ff02::1", "2001:db8::1", "::ffff:127.0.0.1"] {
        let a = v6(kernels.parse().unwrap(), 80);
        assert_eq!(client.carries(a), Ok(false), "{a}");
    }
    let v6only = socket(client, Family::V6, true);
    assert_eq!(
        client.connect(v6only, mapped(SERVER_IP, 80)),
        Err(Errno(libc::ENETUNREACH))
    );
    let bound_mapped = socket(client, Family::V6, false);
    client.bind(bound_mapped, mapped(CLIENT_IP, 0)).unwrap();
    assert_eq!(
        client.connect(bound_mapped, v6(SERVER6, 80)),
        Err(Errno(libc::EAFNOSUPPORT))
    );
    let bound6 = socket(client, Family::V6, false);
    client.bind(bound6, v6(CLIENT6, 0)).unwrap();
    assert_eq!(
        client.connect(bound6, mapped(SERVER_IP, 80)),
        Err(Errno(libc::ENETUNREACH))
    );
    let s4 = client.socket(Family::V4);
    assert_eq!(
        client.connect(s4, v6(SERVER6, 80)),
        Err(Errno(libc::EAFNOSUPPORT))
    );
    // None of those started anything; the sockets may still connect as they should.
    let l = listener(&mut net, Family::V6, any6(80), false);
    assert_eq!(
        net.client.connect(bound6, v6(SERVER6, 80)),
        Err(Errno(libc::EINPROGRESS))
    );
    assert!(net.run_until(|n| n.client.connect_result(bound6) == Ok(true)));
    accept(&mut net, l);
}

#[test]
fn a_connect_while_our_addresses_are_tentative_waits_for_them() {
    let mut net = Net::build(Some(1));
    let c = net.client.socket(Family::V6);
    let start = net.clock.now();
    assert_eq!(
        net.client.connect(c, v6(SERVER6, 80)),
        Err(Errno(libc::EINPROGRESS))
    );
    assert_eq!(net.client.readiness(c), 0, "connecting");
    // The server's addresses are tentative too: its listener waits for them as well.
    let l = listener(&mut net, Family::V6, any6(80), false);
    assert!(net.run_until(|n| n.client.connect_result(c) == Ok(true)));
    assert!(net.clock.now() - start >= Duration::from_secs(1));
    accept(&mut net, l);
    // A socket closed while it waits goes at once; one never started has no
    // connection to wait for either.
    let mut net = Net::build(Some(1));
    let c = net.client.socket(Family::V6);
    let _ = net.client.connect(c, v6(SERVER6, 80));
    net.client.release(c).unwrap();
    assert_eq!(net.client.sockets(), 0);
    assert!(net.run_until(|n| !n.client.engine.detecting_duplicates()));
    // With no address that fits the peer and no detection running, EADDRNOTAVAIL at
    // once (the library gives such a peer to the kernel; the stack still answers).
    let mut net = Net::new();
    let c = net.client.socket(Family::V6);
    assert_eq!(
        net.client.connect(c, v6(SERVER6, 80)),
        Err(Errno(libc::EADDRNOTAVAIL))
    );
}

#[test]
fn a_dual_stack_socket_on_a_link_without_ipv6_speaks_ipv4_mapped() {
    let mut net = Net::new();
    assert!(net.client.engine.ipv6_addresses().is_empty());
    assert!(net.client.speaks(Family::V6) && net.client.speaks(Family::V4));
    // Native IPv6 is not the link's (the caller leaves it to the kernel).
    assert_eq!(net.client.carries(v6(SERVER6, 80)), Ok(false));
    assert_eq!(net.client.binds(v6(CLIENT6, 80)), Ok(false));
    assert_eq!(net.client.binds(any6(80)), Ok(true));
    let l = listener(&mut net, Family::V6, any6(80), false);
    let c = connect(&mut net, Family::V6, mapped(SERVER_IP, 80));
    let s = accept(&mut net, l);
    let local = net.client.local_addr(c).unwrap();
    assert_eq!(local, mapped(CLIENT_IP, local.port()));
    assert_eq!(net.client.peer_addr(c), Ok(mapped(SERVER_IP, 80)));
    assert_eq!(net.server.peer_addr(s), Ok(local));
}

#[test]
fn link_local_peers_carry_the_links_scope() {
    let mut net = Net::dual();
    let server_ll = net.server.engine.ipv6_addresses()[0];
    assert!(server_ll.is_unicast_link_local());
    let l = listener(&mut net, Family::V6, any6(80), false);
    let to = SocketAddr::V6(SocketAddrV6::new(server_ll, 80, 0, LINK_INDEX));
    let c = connect(&mut net, Family::V6, to);
    let s = accept(&mut net, l);
    assert_eq!(net.client.peer_addr(c), Ok(to));
    let SocketAddr::V6(local) = net.client.local_addr(c).unwrap() else {
        panic!("an AF_INET6 socket's name is IPv6");
    };
    assert!(local.ip().is_unicast_link_local());
    assert_eq!(local.scope_id(), LINK_INDEX);
    assert_eq!(net.server.peer_addr(s), Ok(SocketAddr::V6(local)));
    assert_eq!(net.server.local_addr(s), Ok(to));
}

#[test]
fn a_forked_stack_adopts_sockets_with_their_family() {
    let mut net = Net::dual();
    let l = listener(&mut net, Family::V6, any6(80), true);
    let map = net.client.adopt(&net.server);
    let adopted = map[&l];
    assert_eq!(net.client.family(adopted), Ok(Family::V6));
    assert!(net.client.opts(adopted).unwrap().v6only);
    assert_eq!(net.client.local_addr(adopted), Ok(any6(80)));
}

#[test]
fn socket_addresses_from_the_program_are_read_as_linux_reads_them() {
    let sin6 = |family: u16, ip: Ipv6Addr, port: u16, scope: u32| {
        let mut raw = vec![0u8; 28];
        raw[..2].copy_from_slice(&family.to_ne_bytes());
        raw[2..4].copy_from_slice(&port.to_be_bytes());
        raw[8..24].copy_from_slice(&ip.octets());
        raw[24..].copy_from_slice(&scope.to_ne_bytes());
        raw
    };
    let sin = |family: u16, ip: Ipv4Addr, port: u16| {
        let mut raw = vec![0u8; 16];
        raw[..2].copy_from_slice(&family.to_ne_bytes());
        raw[2..4].copy_from_slice(&port.to_be_bytes());
        raw[4..8].copy_from_slice(&ip.octets());
        raw
    };
    let (inet, inet6, unspec) = (
        libc::AF_INET as u16,
        libc::AF_INET6 as u16,
        libc::AF_UNSPEC as u16,
    );
    let full = sin6(inet6, SERVER6, 80, 3);
    let want = SocketAddr::V6(SocketAddrV6::new(SERVER6, 80, 0, 3));
    assert_eq!(bind_address(&full, Family::V6), Ok(want));
    assert_eq!(connect_address(&full, Family::V6), Ok(Some(want)));
    // RFC 2133's 24 bytes: no scope.
    assert_eq!(bind_address(&full[..24], Family::V6), Ok(v6(SERVER6, 80)));
    const EINVAL: Errno = Errno(libc::EINVAL);
    const EAFNOSUPPORT: Errno = Errno(libc::EAFNOSUPPORT);
    assert_eq!(bind_address(&full[..23], Family::V6), Err(EINVAL));
    assert_eq!(connect_address(&full[..23], Family::V6), Err(EINVAL));
    // A sockaddr_in to an AF_INET6 socket is too short; AF_INET in a long one, the
    // wrong family.
    let four = sin(inet, SERVER_IP, 80);
    assert_eq!(bind_address(&four, Family::V6), Err(EINVAL));
    assert_eq!(connect_address(&four, Family::V6), Err(EINVAL));
    let mut long_four = four.clone();
    long_four.resize(28, 0);
    assert_eq!(bind_address(&long_four, Family::V6), Err(EAFNOSUPPORT));
    assert_eq!(connect_address(&long_four, Family::V6), Err(EAFNOSUPPORT));
    assert_eq!(bind_address(&full, Family::V4), Err(EAFNOSUPPORT));
    assert_eq!(connect_address(&full, Family::V4), Err(EAFNOSUPPORT));
    assert_eq!(bind_address(&four[..15], Family::V4), Err(EINVAL));
    assert_eq!(
        bind_address(&four, Family::V4),
        Ok(SocketAddr::from((SERVER_IP, 80)))
    );
    // AF_UNSPEC: the wildcard for an AF_INET bind only; a connect's "dissolve".
    assert_eq!(
        bind_address(&sin(unspec, Ipv4Addr::UNSPECIFIED, 80), Family::V4),
        Ok(any4(80))
    );
    assert_eq!(
        bind_address(&sin(unspec, SERVER_IP, 80), Family::V4),
        Err(EAFNOSUPPORT)
    );
    assert_eq!(
        bind_address(&sin6(unspec, Ipv6Addr::UNSPECIFIED, 80, 0), Family::V6),
        Err(EAFNOSUPPORT)
    );
    assert_eq!(connect_address(&full[..0], Family::V6), Err(EINVAL));
    assert_eq!(connect_address(&unspec.to_ne_bytes(), Family::V6), Ok(None));
    assert_eq!(connect_address(&unspec.to_ne_bytes(), Family::V4), Ok(None));
    // And out: the bytes of a sockaddr_in6 or sockaddr_in.
    assert_eq!(sockaddr_of(want), (full.clone().try_into().unwrap(), 28));
    let (bytes, len) = sockaddr_of(SocketAddr::V4(SocketAddrV4::new(SERVER_IP, 80)));
    assert_eq!((&bytes[..len], len), (&four[..], 16));
}
