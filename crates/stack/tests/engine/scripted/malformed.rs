//! Malformed input is counted and dropped, random bytes and mutated valid frames never
//! upset the engine, and IP options and Ethernet padding are handled.

use super::*;

/// Recompute the IPv4 header checksum of an Ethernet frame in place.
fn fix_ip_checksum(frame: &mut [u8]) {
    if let Some(ip) = frame.get_mut(14..) {
        if let Ok(mut p) = Ipv4Packet::new_checked(ip) {
            p.fill_checksum();
        }
    }
}

/// Recompute the TCP checksum of an Ethernet + IPv4 + TCP frame in place, as far as the
/// headers allow.
fn fix_tcp_checksum(frame: &mut [u8]) {
    let Some(ip) = frame.get_mut(14..) else {
        return;
    };
    let Ok(p) = Ipv4Packet::new_checked(&*ip) else {
        return;
    };
    if p.next_header() != IpProtocol::Tcp {
        return;
    }
    let (src, dst) = (p.src_addr(), p.dst_addr());
    let hl = usize::from(p.header_len());
    let total = usize::from(p.total_len());
    let Some(tcp) = ip.get_mut(hl..total) else {
        return;
    };
    if tcp.len() < 20 {
        return;
    }
    tcp[16] = 0;
    tcp[17] = 0;
    let pseudo = checksum::pseudo_header_v4(src.octets(), dst.octets(), 6, tcp.len() as u16);
    let c = checksum::finish(checksum::combine(pseudo, checksum::sum(tcp)));
    tcp[16..18].copy_from_slice(&c.to_be_bytes());
}

#[test]
fn malformed_frames_are_counted_and_dropped() {
    let mut net = Net::new(config(), echo());
    net.eng.listen(PORT, 16);
    let good = tcp_frame(40000, &syn_seg(&net, SeqNum(1), FULL), &[]);
    let tcp_at = 14 + 20;
    let mut expect = [0u64; DropReason::COUNT];

    let mut check = |net: &mut Net, frame: Vec<u8>, reason: DropReason| {
        let out = net.send(&frame);
        assert!(out.is_empty(), "{reason:?}: answered with {out:?}");
        expect[reason.index()] += 1;
        assert_eq!(net.stats().drops, expect, "after a {reason:?} frame");
    };

    // Ethernet.
    check(&mut net, good[..10].to_vec(), DropReason::Truncated);
    check(&mut net, Vec::new(), DropReason::Truncated);
    let mut other = good.clone();
    other[..6].copy_from_slice(&[0x02, 0, 0, 0, 0, 0x99]);
    check(&mut net, other, DropReason::NotForUs);
    let mut multicast = good.clone();
    multicast[..6].copy_from_slice(&[0x01, 0, 0x5e, 0, 0, 1]);
    check(&mut net, multicast, DropReason::GroupDestinationMac);
    check(
        &mut net,
        eth_frame(PEER_MAC, HOST_MAC, EthernetProtocol::Ipv6, &[0x60; 40]),
        DropReason::UnknownEtherType,
    );

    // IPv4.
    check(&mut net, good[..14 + 12].to_vec(), DropReason::Truncated);
    let mut v6 = good.clone();
    v6[14] = 0x65;
    check(&mut net, v6, DropReason::BadIpHeader);
    let mut ihl = good.clone();
    ihl[14] = 0x44;
    fix_ip_checksum(&mut ihl);
    check(&mut net, ihl, DropReason::BadIpHeader);
    let mut long = good.clone();
    long[14 + 2..14 + 4].copy_from_slice(&1400u16.to_be_bytes());
    fix_ip_checksum(&mut long);
    check(&mut net, long, DropReason::BadIpLength);
    let mut bad_ip = good.clone();
    bad_ip[14 + 10] ^= 0xff;
    check(&mut net, bad_ip, DropReason::BadIpChecksum);
    let mut mf = good.clone();
    mf[14 + 6] |= 0x20; // More Fragments
    fix_ip_checksum(&mut mf);
    check(&mut net, mf, DropReason::Fragment);
    let mut offset = good.clone();
    offset[14 + 6..14 + 8].copy_from_slice(&[0x00, 0x10]);
    fix_ip_checksum(&mut offset);
    check(&mut net, offset, DropReason::Fragment);
    let mut not_ours = good.clone();
    not_ours[14 + 16..14 + 20].copy_from_slice(&[10, 0, 0, 3]);
    fix_ip_checksum(&mut not_ours);
    check(&mut net, not_ours, DropReason::NotOurAddress);
    let mut loopback = good.clone();
    loopback[14 + 12..14 + 16].copy_from_slice(&[127, 0, 0, 1]);
    fix_ip_checksum(&mut loopback);
    check(&mut net, loopback, DropReason::MartianSource);
    check(
        &mut net,
        ipv4_frame(PEER_MAC, PEER_IP, IpProtocol::Udp, &[0; 12]),
        DropReason::UnknownProtocol,
    );
    // TCP to the limited broadcast address (in a unicast frame).
    let mut broadcast = good.clone();
    broadcast[14 + 16..14 + 20].copy_from_slice(&[255; 4]);
    fix_ip_checksum(&mut broadcast);
    fix_tcp_checksum(&mut broadcast);
    check(&mut net, broadcast, DropReason::NotOurAddress);

    // TCP.
    check(
        &mut net,
        ipv4_frame(
            PEER_MAC,
            PEER_IP,
            IpProtocol::Tcp,
            &good[tcp_at..tcp_at + 10],
        ),
        DropReason::BadTcpHeader,
    );
    let mut offset_too_big = good.clone();
    offset_too_big[tcp_at + 12] = 0xf0;
    fix_tcp_checksum(&mut offset_too_big);
    check(&mut net, offset_too_big, DropReason::BadTcpHeader);
    let mut bad_tcp = good.clone();
    bad_tcp[tcp_at + 16] ^= 0x01;
    check(&mut net, bad_tcp, DropReason::BadTcpChecksum);
    let mut bad_payload = tcp_frame(40000, &syn_seg(&net, SeqNum(1), FULL), b"data");
    let len = bad_payload.len();
    bad_payload[len - 1] ^= 0x80;
    check(&mut net, bad_payload, DropReason::BadTcpChecksum);

    // ARP.
    let mut bad_arp = arp_frame(
        MacAddr::BROADCAST,
        ArpOperation::Request,
        (PEER_MAC, PEER_IP),
        (MacAddr([0; 6]), HOST_IP),
    );
    bad_arp[14 + 4] = 8; // hardware length
    check(&mut net, bad_arp, DropReason::BadArp);
    check(
        &mut net,
        eth_frame(
            PEER_MAC,
            MacAddr::BROADCAST,
            EthernetProtocol::Arp,
            &[0, 1, 8],
        )[..17]
            .to_vec(),
        DropReason::Truncated,
    );

    assert_eq!(net.stats().segments_in, 0);
    assert_eq!(net.eng.connection_count(), 0);
    // Still alive: the good SYN is answered.
    let out = tcp_of(&net.send(&good));
    assert_eq!(out.len(), 1);
    assert!(out[0].is_syn_ack());
}

/// Base frames for the fuzzer: valid traffic on and around a live connection.
fn fuzz_bases(net: &Net, pc: &PeerConn) -> Vec<Vec<u8>> {
    let mut data = pc.seg(net);
    data.psh = true;
    let mut fin = pc.seg(net);
    fin.fin = true;
    let mut ooo = pc.seg(net);
    ooo.seq = pc.snd_nxt + 1000;
    let mut sack = pc.seg(net);
    sack.sack = [Some((pc.rcv_nxt.0, pc.rcv_nxt.0 + 10)), None, None];
    let rst = TxSegment {
        seq: pc.snd_nxt,
        rst: true,
        ..Default::default()
    };
    vec![
        tcp_frame(pc.port, &data, b"fuzzing data"),
        tcp_frame(pc.port, &pc.seg(net), &[]),
        tcp_frame(pc.port, &fin, &[]),
        tcp_frame(pc.port, &ooo, &[7; 100]),
        tcp_frame(pc.port, &sack, &[]),
        tcp_frame(pc.port, &rst, &[]),
        tcp_frame(pc.port + 1, &syn_seg(net, SeqNum(99), FULL), &[]),
        tcp_frame_from(
            PEER_MAC,
            PEER_IP,
            50000,
            81,
            &syn_seg(net, SeqNum(5), BARE),
            &[],
        ),
        echo_request(3, 4, b"ping"),
        arp_frame(
            MacAddr::BROADCAST,
            ArpOperation::Request,
            (PEER_MAC, PEER_IP),
            (MacAddr([0; 6]), HOST_IP),
        ),
    ]
}

#[derive(Debug, Clone)]
enum Fuzz {
    Random(Vec<u8>),
    Mutated {
        base: usize,
        flips: Vec<(usize, u8)>,
        cut: Option<usize>,
        fix_checksums: bool,
    },
}

fn fuzz_input() -> impl Strategy<Value = Fuzz> {
    prop_oneof![
        proptest::collection::vec(any::<u8>(), 0..200).prop_map(Fuzz::Random),
        (
            0..10usize,
            proptest::collection::vec((0..200usize, 1..=255u8), 1..6),
            proptest::option::of(0..200usize),
            any::<bool>(),
        )
            .prop_map(|(base, flips, cut, fix_checksums)| Fuzz::Mutated {
                base,
                flips,
                cut,
                fix_checksums,
            }),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    /// Whatever arrives, the engine counts it and carries on: no panic, and it still
    /// answers a ping and serves its live connection afterwards.
    #[test]
    fn hostile_frames_never_panic(
        inputs in proptest::collection::vec((fuzz_input(), 0..300u64), 1..12)
    ) {
        let mut net = Net::new(config(), echo());
        net.eng.listen(PORT, 4);
        let mut pc = connect_peer(&mut net, 40000, SeqNum(1), FULL);
        let _ = pc.data(&mut net, b"warm-up");
        let bases = fuzz_bases(&net, &pc);
        let frames_before = net.stats().frames_in;
        for (input, delay_ms) in &inputs {
            let frame = match input {
                Fuzz::Random(bytes) => bytes.clone(),
                Fuzz::Mutated { base, flips, cut, fix_checksums } => {
                    let mut f = bases[*base % bases.len()].clone();
                    for &(at, x) in flips {
                        if !f.is_empty() {
                            let i = at % f.len();
                            f[i] ^= x;
                        }
                    }
                    if let Some(cut) = cut {
                        f.truncate(*cut);
                    }
                    if *fix_checksums {
                        fix_ip_checksum(&mut f);
                        fix_tcp_checksum(&mut f);
                    }
                    f
                }
            };
            net.send(&frame);
            net.advance(Duration::from_millis(*delay_ms));
        }
        prop_assert_eq!(net.stats().frames_in - frames_before, inputs.len() as u64);
        let out = net.send(&echo_request(9, 9, b"alive?"));
        prop_assert!(out.iter().any(|f| f.echo_reply().is_some()), "{:?}", out);
    }
}

#[test]
fn ip_options_and_ethernet_padding_are_handled() {
    let mut net = Net::new(config(), echo());
    net.eng.listen(PORT, 16);
    // A SYN in an IPv4 header with 4 bytes of options (NOP, NOP, NOP, EOL).
    let syn = tcp_bytes(PEER_IP, 40000, PORT, &syn_seg(&net, SeqNum(1), BARE), &[]);
    let mut ip = vec![0u8; 24 + syn.len()];
    {
        let mut p = Ipv4Packet::new_unchecked(&mut ip[..]);
        p.set_version(4);
        p.set_header_len(24);
        p.set_total_len((24 + syn.len()) as u16);
        p.set_dont_frag(true);
        p.set_hop_limit(64);
        p.set_next_header(IpProtocol::Tcp);
        p.set_src_addr(PEER_IP);
        p.set_dst_addr(HOST_IP);
    }
    ip[20..24].copy_from_slice(&[1, 1, 1, 0]);
    ip[24..].copy_from_slice(&syn);
    Ipv4Packet::new_unchecked(&mut ip[..]).fill_checksum();
    // Trailing junk after the IP datagram (Ethernet padding) must be ignored.
    ip.extend_from_slice(&[0xee; 6]);
    let frame = eth_frame(PEER_MAC, HOST_MAC, EthernetProtocol::Ipv4, &ip);
    let out = tcp_of(&net.send(&frame));
    assert_eq!(out.len(), 1, "{out:?}");
    assert!(out[0].is_syn_ack());
    assert_eq!(out[0].seg.ack, SeqNum(2));
    // Without an MSS option the peer is assumed to take 536 (RFC 9293 §3.7.1).
    let mut pc = PeerConn::after_syn_ack(40000, SeqNum(1), BARE, &out[0]);
    assert!(pc.ack(&mut net).is_empty());
    let out = pc.data(&mut net, &pattern(600, 4));
    let lens: Vec<usize> = out.iter().map(|s| s.payload.len()).collect();
    assert_eq!(lens, vec![536, 64]);
}
