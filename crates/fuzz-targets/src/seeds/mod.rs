//! The seed corpus: valid inputs for each target, the same kinds of input the property
//! tests generate (TCP headers with every option, traffic on and around a live
//! connection, ARP requests and replies, cache operations) plus hand-made requests and
//! command lines. `tests/smoke.rs` has an ignored test that writes them to
//! `fuzz/corpus/<target>/`:
//! `cargo test -p rusty-fuzz-targets --test smoke -- --ignored write_seed_corpus`.

use std::net::Ipv6Addr;

use rusty_stack::checksum;
use rusty_stack::internals::icmpv6;
use rusty_stack::internals::SeqNum;
use rusty_stack::internals::TxSegment;
use rusty_stack::io::MacAddr;
use smoltcp::wire::IpProtocol;

use crate::engine_frame::{
    Script, ACTIVE, FULL_OPTIONS, OPEN, PEER_PORT, PORT, SMALL_MTU, TIGHT_LIMITS,
};
use crate::wire::{
    arp_frame, echo_request, ipv4_frame, tcp_bytes, tcp_frame, HOST_IP, PEER_IP, PEER_MAC,
};

mod tls;
mod v6;

/// One seed: its target, a file name, the bytes.
pub struct Seed {
    /// The target's name (see [`TARGETS`](crate::TARGETS)).
    pub target: &'static str,
    /// A file name saying what the input is.
    pub name: String,
    /// The input.
    pub data: Vec<u8>,
}

/// Every seed of every target.
pub fn all() -> Vec<Seed> {
    let mut out = Vec::new();
    let mut add = |target, list: Vec<(String, Vec<u8>)>| {
        out.extend(
            list.into_iter()
                .map(|(name, data)| Seed { target, name, data }),
        );
    };
    add("engine_frame", engine_frame());
    add("engine_frame", v6::engine_frame());
    add("tcp_segment", tcp_segment());
    add("arp", arp());
    add("http_request", http_request());
    add("link_spec_cli", link_spec_cli());
    add("ipv6_header", ipv6_header());
    add("icmpv6", v6::icmpv6());
    add("tls_record", tls::tls_record());
    out
}

/// A deterministic stream of numbers (splitmix64), standing in for proptest's.
struct Mix(u64);

impl Mix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut x = self.0;
        x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        x ^ (x >> 31)
    }
    fn u32(&mut self) -> u32 {
        self.next() as u32
    }
    fn chance(&mut self) -> bool {
        self.next() & 1 == 1
    }
}

fn named(name: &str, data: Vec<u8>) -> (String, Vec<u8>) {
    (name.to_string(), data)
}

fn engine_frame() -> Vec<(String, Vec<u8>)> {
    let syn = TxSegment {
        seq: SeqNum(99),
        syn: true,
        window: 65535,
        mss: Some(1460),
        wscale: Some(7),
        sack_permitted: true,
        timestamp: Some((1_000_000, 0)),
        ..Default::default()
    };
    let bare_syn = TxSegment {
        seq: SeqNum(5),
        syn: true,
        window: 65535,
        ..Default::default()
    };
    let arp_request = arp_frame(true, (PEER_MAC, PEER_IP), HOST_IP);
    // A data segment whose sequence number is far off: it only parses.
    let stray = TxSegment {
        seq: SeqNum(7),
        ack: Some(SeqNum(9)),
        psh: true,
        window: 1000,
        ..Default::default()
    };
    let full = OPEN | FULL_OPTIONS;
    vec![
        named("idle", Script::new(0, 0).finish()),
        named(
            "syn-full",
            Script::new(0, 0)
                .raw(0, &tcp_frame(PEER_PORT, PORT, &syn, &[]))
                .advance(0)
                .finish(),
        ),
        named(
            "syn-bare-closed-port",
            Script::new(0, 0)
                .raw(0, &tcp_frame(50000, 81, &bare_syn, &[]))
                .finish(),
        ),
        named(
            "syn-trusted-checksum",
            Script::new(0, 0)
                .raw(2, &tcp_frame(PEER_PORT, PORT, &syn, &[]))
                .finish(),
        ),
        named(
            "stray-data-fixed-checksum",
            Script::new(0, 0)
                .raw(1, &tcp_frame(PEER_PORT, PORT, &stray, b"fuzzing data"))
                .finish(),
        ),
        named(
            "ping-arp",
            Script::new(0, 0)
                .raw(0, &echo_request(3, 4, b"ping"))
                .raw(0, &arp_request)
                .ping(100)
                .arp(0, 2, 1, 2)
                .arp(3, 4, 7, 2)
                .finish(),
        ),
        named(
            "udp-ignored",
            Script::new(0, 0)
                .raw(0, &ipv4_frame(PEER_IP, IpProtocol::Udp, &[0; 16]))
                .finish(),
        ),
        named(
            "passive-full-echo-fin",
            Script::new(full, 1)
                .data(16, 12)
                .advance(5)
                .data(0, 0)
                .data(4, 0)
                .advance(0)
                .data(0, 0)
                .finish(),
        ),
        named(
            "passive-bare-ooo-sack",
            Script::new(OPEN, 1000)
                .data(16, 100)
                .segment(0, 16, 1000, 0, 65535, 100, 0, &[])
                .segment(0, 0, 0, 0, 65535, 0, 8, &[0, 0, 10])
                .advance(70)
                .advance(0)
                .finish(),
        ),
        named(
            "passive-full-sack-loss",
            Script::new(full, 7)
                .data(16, 1400)
                .segment(0, 0, 0, -100, 65535, 0, 8, &[10, 0, 4])
                .data(0, 0)
                .data(0, 0)
                .data(0, 0)
                .advance(0)
                .advance(0)
                .finish(),
        ),
        named(
            "active-full-reply-close",
            Script::new(full | ACTIVE, 77)
                .mode(3)
                .data(16, 2)
                .data(0, 0)
                .data(4, 0)
                .advance(0xc1)
                .finish(),
        ),
        named(
            "active-bare-pause-resume",
            Script::new(OPEN | ACTIVE, u32::MAX)
                .mode(1)
                .data(16, 3000)
                .segment(0, 0, 0, 0, 0, 0, 0, &[])
                .advance(0x44)
                .app(1)
                .mode(0)
                .app(1)
                .finish(),
        ),
        named(
            "passive-rst-and-challenge",
            Script::new(full, 5)
                .segment(0, 8, 10, 0, 0, 0, 0, &[])
                .segment(0, 2, 0, 0, 65535, 0, 0, &[])
                .segment(0, 8, 0, 0, 0, 0, 0, &[])
                .finish(),
        ),
        named(
            "passive-abort-timer-modes",
            Script::new(full, 9)
                .mode(6)
                .data(16, 10)
                .advance(0x41)
                .mode(4)
                .segment(1, 2, 0, 0, 65535, 0, 7, &[])
                .data(16, 1)
                .mode(7)
                .app(2)
                .app(7)
                .app(4)
                .finish(),
        ),
        named(
            "tight-limits-syn-flood",
            Script::new(OPEN | TIGHT_LIMITS, 3)
                .segment(1, 3, 0, 0, 65535, 0, 0, &[])
                .segment(1, 3, 100, 0, 65535, 0, 1, &[])
                .mode(5)
                .segment(1, 3, 200, 0, 65535, 0, 0, &[])
                .data(16, 5000)
                .advance(0xff)
                .finish(),
        ),
        named(
            "small-mtu-window-probe",
            Script::new(full | SMALL_MTU, 11)
                .data(16, 1500)
                .segment(0, 0, 0, 0, 0, 0, 0, &[])
                .advance(0x82)
                .advance(0x82)
                .segment(0, 0, 0, 0, 65535, 0, 0, &[])
                .ping(1000)
                .finish(),
        ),
        named(
            "time-wait-reuse",
            Script::new(full, 21)
                .mode(3)
                .data(16, 2)
                .data(0, 0)
                .data(4, 0)
                .segment(0, 35, 1000, 0, 65535, 0, 7, &[])
                .advance(0xc2)
                .finish(),
        ),
    ]
}

/// TCP headers with every option the state machine reads: the same field ranges as the
/// segment module's round-trip property, sampled deterministically.
fn tcp_segment() -> Vec<(String, Vec<u8>)> {
    let mut mix = Mix(0x5e6_u64);
    (0..24)
        .map(|i| {
            let syn = i % 4 == 0;
            let mut tx = TxSegment {
                seq: SeqNum(mix.u32()),
                ack: (i % 3 != 0).then(|| SeqNum(mix.u32())),
                syn,
                fin: !syn && i % 5 == 1,
                rst: i == 7,
                psh: mix.chance(),
                window: mix.u32() as u16,
                timestamp: mix.chance().then(|| (mix.u32(), mix.u32())),
                ..Default::default()
            };
            if syn {
                tx.mss = mix.chance().then(|| 64 + mix.u32() as u16 % 9000);
                tx.wscale = mix.chance().then(|| (mix.u32() % 15) as u8);
                tx.sack_permitted = mix.chance();
            } else if tx.ack.is_some() {
                let blocks = if tx.timestamp.is_some() { 3 } else { 4 };
                for slot in tx.sack.iter_mut().take(i % blocks) {
                    let left = mix.u32();
                    *slot = Some((left, left.wrapping_add(mix.u32() % 5000)));
                }
            }
            let payload = vec![i as u8; i % 7 * 10];
            let tcp = tcp_bytes(PEER_IP, HOST_IP, (40000 + i as u16, 80), &tx, &payload);
            // Flags 0: the checksum is checked (and right); every fourth seed has it
            // vouched for by the device instead.
            let mut data = vec![u8::from(i % 4 == 3)];
            data.extend_from_slice(&tcp);
            (format!("segment-{i:02}"), data)
        })
        .collect()
}

fn arp() -> Vec<(String, Vec<u8>)> {
    // A packet operation: `op` 0 (broadcast) or 8 (to our MAC), then the ARP packet.
    let packet = |op: u8, request, sender: (MacAddr, [u8; 4]), target: [u8; 4]| {
        let frame = arp_frame(request, (sender.0, sender.1.into()), target.into());
        let mut out = vec![op, 28];
        out.extend_from_slice(&frame[14..42]);
        out
    };
    let peer = MacAddr([2, 0, 0, 0, 1, 9]);
    let request = packet(0, true, (peer, [10, 0, 0, 11]), [10, 0, 0, 2]);
    let reply = packet(8, false, (peer, [10, 0, 0, 12]), [10, 0, 0, 2]);
    let probe = packet(0, true, (peer, [0, 0, 0, 0]), [10, 0, 0, 2]);
    let conflict = packet(0, true, (peer, [10, 0, 0, 2]), [10, 0, 0, 2]);
    let other = packet(0, true, (peer, [10, 0, 0, 13]), [10, 0, 0, 14]);
    let cat = |parts: &[&[u8]]| parts.concat();
    // Limits: 0x5b: lifetime 50 s, 2 retries, 6 entries; 0x52: 1 s between
    // solicitations, 2 probes, 4 frames per address, 16 in all.
    let limits: &[u8] = &[0x5b, 0x52];
    // Operations (see `arp::State::step`): 0x09 and 0x11 a connection sends to
    // 10.0.0.11 and .12, 0x21 to .14; 0x27 a connection to .14 starts (then its SYN's
    // MAC byte), 0xa7 it ends; 0x04 take what is ready; 0x05 poll (then how long ago,
    // in tenths of a second, connections made progress; 0: never); 0x86 a step of
    // seconds (then how many), 0xc6 of minutes.
    let seconds = |n: u8| [0x86, n];
    let poll = |ago: u8| [0x05, ago];
    vec![
        named("request", cat(&[limits, &[0], &request])),
        named("reply", cat(&[limits, &[1], &reply])),
        named("probe", cat(&[limits, &[2], &probe])),
        named("conflict", cat(&[limits, &[3], &conflict])),
        named("not-for-us", cat(&[limits, &[4], &other])),
        named(
            // Frames queue for 10.0.0.11 and 10.0.0.12, retries go out, a reply
            // resolves one and the other gives up.
            "queue-resolve-expire",
            cat(&[
                limits,
                &[5, 0x09, 0x09, 0x11],
                &reply,
                &[0x04],
                &seconds(2),
                &poll(0),
                &seconds(2),
                &poll(0),
                &seconds(2),
                &poll(0),
                &[0x04],
            ]),
        ),
        named(
            // A connection's entry starts STALE at its SYN's MAC; a frame makes it
            // DELAY; unconfirmed, it is probed, forgotten, resolved again.
            "probe-and-forget",
            cat(&[
                limits,
                &[6, 0x27, 0x09, 0x21],
                &seconds(6),
                &poll(0),
                &seconds(1),
                &poll(0),
                &seconds(1),
                &poll(0),
                &[0x21, 0x04],
                &seconds(1),
                &poll(0),
                &[0xa7, 0x09],
            ]),
        ),
        named(
            // The same entry, confirmed by the connection's progress, stays REACHABLE.
            "confirmed-by-progress",
            cat(&[
                limits,
                &[6, 0x27, 0x09, 0x21],
                &seconds(6),
                &poll(5),
                &[0xc6, 1],
                &poll(1),
                &[0xc6, 1],
                &poll(1),
                &[0x21, 0x04],
            ]),
        ),
        named(
            // Advertisements of every kind about a resolving and a resolved entry.
            "advertisements",
            cat(&[
                limits,
                &[
                    7, 0x09, 0x0a, 0x05, 0x01, 0x0a, 0x05, 0x03, 0x0a, 0x06, 0x01,
                ],
                &[0x0a, 0x06, 0x05, 0x0a, 0x06, 0x07, 0x0a, 0x05, 0x10, 0x04],
            ]),
        ),
        named(
            "import-evict",
            cat(&[
                &[0x01, 0x52],
                &[
                    6, 0x0b, 1, 0x13, 2, 0x1b, 3, 0x27, 4, 0x23, 5, 0x04, 0x0f, 0x07,
                ],
            ]),
        ),
        named(
            "lifetime-expiry",
            cat(&[
                limits,
                &[7, 0x0b, 1, 0xc6, 1, 0x07, 0x05],
                &request,
                &[0x07, 0x01],
            ]),
        ),
    ]
}

fn http_request() -> Vec<(String, Vec<u8>)> {
    let requests: &[(&str, &str)] = &[
        ("get", "GET / HTTP/1.1\r\nHost: x\r\n\r\n"),
        (
            "get-conditional-range",
            "GET /a/b.html?q=1 HTTP/1.1\r\nHost: x\r\nRange: bytes=0-99\r\nIf-None-Match: \"e\"\r\nIf-Modified-Since: Sun, 06 Nov 1994 08:49:37 GMT\r\nIf-Range: Sunday, 06-Nov-94 08:49:37 GMT\r\n\r\n",
        ),
        (
            "head-1.0-keep-alive",
            "HEAD /index.html HTTP/1.0\r\nConnection: keep-alive\r\n\r\n",
        ),
        (
            "pipelined",
            "GET /1 HTTP/1.1\r\nHost: x\r\n\r\nGET /2 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\nGET /3",
        ),
        (
            "suffix-range-asctime",
            "GET /f HTTP/1.1\r\nHost: x\r\nRange: bytes=-5\r\nIf-Modified-Since: Sun Nov  6 08:49:37 1994\r\n\r\n",
        ),
        (
            "chunked-body",
            "POST /upload HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
        ),
        (
            "content-length-twice",
            "GET / HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nContent-Length: 3\r\n\r\nabc",
        ),
        (
            "te-and-cl",
            "GET / HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nTransfer-Encoding: gzip, chunked\r\n\r\n",
        ),
        (
            "absolute-form-percent",
            "GET http://x/a%20b/./c/../d%2Fe HTTP/1.1\r\nHost: x\r\n\r\n",
        ),
        ("traversal", "GET /../../etc/passwd HTTP/1.1\r\nHost: x\r\n\r\n"),
        ("version-2", "GET / HTTP/2.0\r\nHost: x\r\n\r\n"),
        ("no-host", "GET / HTTP/1.1\r\n\r\n"),
        ("partial", "GET /slow HTTP/1.1\r\nHost: x\r\nUser-Agent: slo"),
        ("bare-lf", "GET / HTTP/1.1\nHost: x\n\n"),
    ];
    let mut out: Vec<_> = requests
        .iter()
        .enumerate()
        .map(|(i, (name, r))| {
            // Vary the tiny limits and the representation length across seeds.
            let sel = (i as u8).wrapping_mul(0x35) | 0x44;
            let mut data = vec![sel];
            data.extend_from_slice(r.as_bytes());
            (name.to_string(), data)
        })
        .collect();
    let mut many = b"\xffGET / HTTP/1.1\r\nHost: x\r\n".to_vec();
    for i in 0..70 {
        many.extend_from_slice(format!("X-{i}: y\r\n").as_bytes());
    }
    many.extend_from_slice(b"\r\n");
    out.push(("too-many-headers".to_string(), many));
    out
}

fn link_spec_cli() -> Vec<(String, Vec<u8>)> {
    let lines: &[(&str, &str)] = &[
        (
            "tap-one-link",
            "80 1 tap0 10.0.2.2/24 2 --tap-host 10.0.2.1/24 --oversubscribe",
        ),
        (
            "two-links",
            "7 2 kernel 0.0.0.0 1 xdp:eth1 192.168.7.20/24 2 --cpus 0,2-3 --cc newreno",
        ),
        (
            "faults",
            "7 1 tap:rusty0 10.0.0.2 1 --fault-loss 0.1 --fault-duplicate 0.05 --fault-reorder 0.2 --fault-seed 9",
        ),
        (
            "xdp-tuning",
            "80 1 xdp:veth0 10.1.0.2/16 2 --xdp-attach generic --xdp-copy zero-copy --xdp-ring 512 --xdp-frames 1024",
        ),
        (
            "misc-flags",
            "80 --stats 5 --spin-us 0 --grace 1 --log-level debug --backlog 16 --no-tso --pcap /tmp/x.pcap",
        ),
        ("future-drivers", "80 2 ixgbe:0000:03:00.0 10.0.0.2/24 1 mpipe:xgbe1 10.0.1.2 4"),
        ("bad-count", "80 2 tap0 10.0.0.2 1"),
        ("bad-prefix", "80 1 tap0 10.0.0.2/40 1"),
        ("help", "--help"),
    ];
    let mut out: Vec<_> = lines
        .iter()
        .map(|(name, l)| {
            let mut data = vec![0u8];
            data.extend_from_slice(l.as_bytes());
            (name.to_string(), data)
        })
        .collect();
    // NUL-separated, so arguments may hold spaces.
    out.push((
        "nul-separated".to_string(),
        b"\x0180\x001\x00tap:my tap\x0010.0.0.2/24\x001\x00--cpus\x000-1".to_vec(),
    ));
    out
}

/// IPv6 packets with TCP after chains of extension headers: ones a host accepts
/// (options, a finished route, an atomic fragment) and ones it refuses (Type 0
/// routing, a fragment, a chain one header too long); and ICMPv6 messages: a ping,
/// Neighbor Discovery both ways, a Packet Too Big.
fn ipv6_header() -> Vec<(String, Vec<u8>)> {
    /// An extension header in the common format: `next`, its length in 8-octet units,
    /// then `body`, padded with zeros (Pad1 options) to a multiple of eight bytes.
    fn ext(next: u8, body: &[u8]) -> Vec<u8> {
        let mut h = vec![next, 0];
        h.extend_from_slice(body);
        h.resize(h.len().div_ceil(8) * 8, 0);
        h[1] = (h.len() / 8 - 1) as u8;
        h
    }
    let tcp = tcp_bytes(
        PEER_IP,
        HOST_IP,
        (PEER_PORT, PORT),
        &TxSegment::default(),
        b"hello",
    );
    let (peer, host) = (
        Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 1),
        Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 2),
    );
    let packet_to =
        |dst: Ipv6Addr, hop_limit: u8, first: u8, headers: Vec<Vec<u8>>, upper: &[u8]| {
            let mut rest: Vec<u8> = headers.concat();
            rest.extend_from_slice(upper);
            let mut p = vec![0x60, 0, 0, 0];
            p.extend_from_slice(&(rest.len() as u16).to_be_bytes());
            p.extend_from_slice(&[first, hop_limit]);
            p.extend_from_slice(&peer.octets());
            p.extend_from_slice(&dst.octets());
            p.extend_from_slice(&rest);
            p
        };
    let packet = |first: u8, headers: Vec<Vec<u8>>| packet_to(host, 64, first, headers, &tcp);
    let icmp = |dst: Ipv6Addr, message: Vec<u8>| {
        packet_to(
            dst,
            icmpv6::ND_HOP_LIMIT,
            icmpv6::NEXT_HEADER,
            vec![],
            &message,
        )
    };
    let group = icmpv6::solicited_node(host);
    // A message from the peer to us with its checksum written in.
    let sealed = |mut m: Vec<u8>| {
        m[2..4].fill(0);
        let len = m.len() as u32;
        let pseudo =
            checksum::pseudo_header_v6(peer.octets(), host.octets(), icmpv6::NEXT_HEADER, len);
        let c = checksum::finish(checksum::combine(pseudo, checksum::sum(&m)));
        m[2..4].copy_from_slice(&c.to_be_bytes());
        m
    };
    // Packet Too Big (type 2) with an MTU of 1,280 and the start of a segment of ours.
    let mut too_big = vec![2, 0, 0, 0, 0, 0, 5, 0];
    too_big.extend_from_slice(&packet_to(peer, 64, 6, vec![], &tcp)[..48]);
    let mut echo = vec![128, 0, 0, 0, 0, 1, 0, 1];
    echo.extend_from_slice(b"ping");
    let (hop, routing, fragment, dest, tcp_next) = (0, 43, 44, 60, 6);
    let fragment_header = |next: u8, offset: u16, more: u16| {
        let mut h = vec![next, 0];
        h.extend_from_slice(&((offset << 3) | more).to_be_bytes());
        h.extend_from_slice(&[0, 0, 0, 1]);
        h
    };
    let chain = |n: usize| {
        (0..n)
            .map(|i| {
                ext(
                    if i + 1 == n { tcp_next } else { dest },
                    &[1, 4, 0, 0, 0, 0],
                )
            })
            .collect::<Vec<_>>()
    };
    vec![
        ("plain".into(), packet(tcp_next, vec![])),
        (
            "hop-by-hop-and-destination".into(),
            packet(
                hop,
                vec![ext(dest, &[5, 2, 0, 0]), ext(tcp_next, &[0x1e, 1, 0])],
            ),
        ),
        (
            "routing-type-2-done".into(),
            packet(routing, vec![ext(tcp_next, &[2, 0, 0, 0, 0, 0])]),
        ),
        (
            "routing-type-0".into(),
            packet(routing, vec![ext(tcp_next, &[0, 1, 0, 0, 0, 0])]),
        ),
        (
            "atomic-fragment".into(),
            packet(fragment, vec![fragment_header(tcp_next, 0, 0)]),
        ),
        (
            "first-fragment".into(),
            packet(fragment, vec![fragment_header(tcp_next, 0, 1)]),
        ),
        ("chain-of-8".into(), packet(dest, chain(8))),
        ("chain-of-9".into(), packet(dest, chain(9))),
        ("icmpv6-echo-request".into(), icmp(host, sealed(echo))),
        (
            "ndp-solicitation".into(),
            icmp(
                group,
                icmpv6::neighbor_solicitation(peer, group, host, Some(PEER_MAC)),
            ),
        ),
        (
            "ndp-advertisement".into(),
            icmp(
                host,
                icmpv6::neighbor_advertisement(peer, host, peer, PEER_MAC, true),
            ),
        ),
        ("icmpv6-packet-too-big".into(), icmp(host, sealed(too_big))),
    ]
}
