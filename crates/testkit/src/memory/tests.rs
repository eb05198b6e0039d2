//! The in-memory link's tests.

use super::*;
use smoltcp::wire::{ArpOperation, ArpPacket, ArpRepr, EthernetAddress, EthernetRepr, Ipv4Address};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use crate::sim::{syn_frame as tcp_frame, CLIENT_MAC as MAC_A, SERVER_MAC as MAC_B};

/// Two ends with plain capabilities (1500-byte MTU, no offloads).
fn plain_pair() -> (MemoryLink, MemoryLink) {
    pair(
        Capabilities::new(MAC_A, 1500),
        Capabilities::new(MAC_B, 1500),
    )
}

fn send(link: &mut MemoryLink, payload: &[u8]) {
    let mut f = link.alloc_tx(payload.len()).unwrap();
    f.copy_from_slice(payload);
    link.transmit(&mut vec![f]);
}

fn recv_all(link: &mut MemoryLink) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    link.receive(&mut out, usize::MAX);
    out.iter().map(|f| f.to_vec()).collect()
}

fn arp_frame() -> Vec<u8> {
    let arp = ArpRepr::EthernetIpv4 {
        operation: ArpOperation::Request,
        source_hardware_addr: EthernetAddress(MAC_A.0),
        source_protocol_addr: Ipv4Address::new(10, 0, 0, 1),
        target_hardware_addr: EthernetAddress([0; 6]),
        target_protocol_addr: Ipv4Address::new(10, 0, 0, 2),
    };
    let eth = EthernetRepr {
        src_addr: EthernetAddress(MAC_A.0),
        dst_addr: EthernetAddress(MacAddr::BROADCAST.0),
        ethertype: EthernetProtocol::Arp,
    };
    let mut buf = vec![0u8; eth.buffer_len() + arp.buffer_len()];
    let mut f = EthernetFrame::new_unchecked(&mut buf[..]);
    eth.emit(&mut f);
    arp.emit(&mut ArpPacket::new_unchecked(f.payload_mut()));
    buf
}

#[test]
fn frames_cross_both_ways_and_count() {
    let (mut a, mut b) = plain_pair();
    send(&mut a, b"hello");
    send(&mut a, b"world!");
    send(&mut b, b"back");
    assert_eq!(b.pending(), 2);
    assert_eq!(a.pending(), 1);
    assert_eq!(
        recv_all(&mut b),
        vec![b"hello".to_vec(), b"world!".to_vec()]
    );
    assert_eq!(recv_all(&mut a), vec![b"back".to_vec()]);
    assert_eq!(b.pending(), 0);
    assert_eq!(a.stats().sent, 2);
    assert_eq!(b.stats().received, 2);
    assert_eq!(b.stats().sent, 1);
    assert_eq!(a.stats().received, 1);
}

#[test]
fn receive_respects_max() {
    let (mut a, mut b) = plain_pair();
    for i in 0..5u8 {
        send(&mut a, &[i; 60]);
    }
    let mut out = Vec::new();
    assert_eq!(b.receive(&mut out, 3), 3);
    assert_eq!(out.len(), 3);
    assert_eq!(out[2][0], 2);
    assert_eq!(b.pending(), 2);
}

#[test]
fn partial_takes_keep_order_and_recycle() {
    let (mut a, mut b) = plain_pair();
    // The receiver takes fewer than arrive, so the queue's front is taken while its
    // back fills: order, counts and buffers must all hold.
    let (mut sent, mut got) = (0u32, 0u32);
    for round in 0..200u32 {
        for _ in 0..(round % 5) {
            send(&mut a, &sent.to_be_bytes());
            sent += 1;
        }
        // A non-empty `out` is appended to, not replaced.
        let mut out = Vec::new();
        b.receive(&mut out, 1);
        b.receive(&mut out, (round % 3) as usize);
        for f in &out {
            assert_eq!(&f[..], &got.to_be_bytes());
            got += 1;
        }
        drop(out);
        assert_eq!(b.pending() as u32, sent - got);
        assert_eq!(a.in_flight() as u32, sent - got);
    }
    assert_eq!(recv_all(&mut b).len() as u32, sent - got);
    assert_eq!(a.in_flight(), 0);
    assert_eq!(b.stats().received, u64::from(sent));
}

#[test]
fn a_burst_with_a_foreign_frame_delivers_the_rest_in_order() {
    let (mut a, mut b) = plain_pair();
    let (mut c, _d) = plain_pair();
    send(&mut a, b"first");
    let mut burst = vec![
        a.alloc_tx(1).unwrap(),
        c.alloc_tx(1).unwrap(),
        a.alloc_tx(1).unwrap(),
    ];
    for (i, f) in burst.iter_mut().enumerate() {
        f[0] = i as u8;
    }
    a.transmit(&mut burst);
    assert!(burst.is_empty());
    assert_eq!(a.stats().sent, 3);
    assert_eq!(a.stats().dropped, 1);
    assert_eq!(c.in_flight(), 0);
    assert_eq!(recv_all(&mut b), vec![b"first".to_vec(), vec![0], vec![2]]);
}

#[test]
fn a_burst_to_a_dropped_end_is_counted_and_recycled() {
    let (mut a, b) = plain_pair();
    drop(b);
    let mut burst: Vec<_> = (0..3).map(|_| a.alloc_tx(60).unwrap()).collect();
    a.transmit(&mut burst);
    assert!(burst.is_empty());
    assert_eq!(a.stats().dropped, 3);
    assert_eq!(a.stats().sent, 0);
    assert_eq!(a.in_flight(), 0);
    assert_eq!(a.free_buffers(), 3);
}

#[test]
fn alloc_rejects_oversize_and_respects_in_flight_bound() {
    let (mut a, mut b) = plain_pair();
    assert!(a.alloc_tx(1514).is_some());
    assert!(a.alloc_tx(1515).is_none());
    a.set_in_flight_limit(2);
    let f1 = a.alloc_tx(60).unwrap();
    let f2 = a.alloc_tx(60).unwrap();
    assert!(a.alloc_tx(60).is_none());
    assert_eq!(a.stats().alloc_failures, 1);
    // Dropping an unsent buffer gives it back.
    drop(f1);
    assert_eq!(a.in_flight(), 1);
    a.transmit(&mut vec![f2]);
    // Still out: queued at the peer.
    assert_eq!(a.in_flight(), 1);
    let f3 = a.alloc_tx(60).unwrap();
    assert!(a.alloc_tx(60).is_none());
    let mut out = Vec::new();
    b.receive(&mut out, 8);
    assert_eq!(a.in_flight(), 2);
    drop(out);
    assert_eq!(a.in_flight(), 1);
    drop(f3);
    assert_eq!(a.in_flight(), 0);
}

#[test]
fn buffers_are_recycled_not_reallocated() {
    let (mut a, mut b) = plain_pair();
    send(&mut a, &[7; 100]);
    let mut out = Vec::new();
    b.receive(&mut out, 1);
    let ptr = out[0].as_ptr();
    out.clear();
    let f = a.alloc_tx(200).unwrap();
    assert_eq!(f.as_ptr(), ptr);
    assert_eq!(f.len(), 200);
    assert_eq!(b.free_buffers(), 0);
}

#[test]
fn truncate_shortens_the_sent_frame() {
    let (mut a, mut b) = plain_pair();
    let mut f = a.alloc_tx(100).unwrap();
    f[..3].copy_from_slice(b"abc");
    f.truncate(3);
    a.transmit(&mut vec![f]);
    assert_eq!(recv_all(&mut b), vec![b"abc".to_vec()]);
}

#[test]
fn frames_to_a_dropped_end_are_counted_and_recycled() {
    let (mut a, b) = plain_pair();
    send(&mut a, &[1; 60]);
    drop(b);
    assert_eq!(a.in_flight(), 0);
    send(&mut a, &[1; 60]);
    assert_eq!(a.stats().dropped, 1);
    assert_eq!(a.stats().sent, 1);
    assert_eq!(a.in_flight(), 0);
}

#[test]
fn foreign_frames_are_dropped() {
    let (mut a, mut b) = plain_pair();
    let (mut c, _d) = plain_pair();
    let f = c.alloc_tx(60).unwrap();
    a.transmit(&mut vec![f]);
    assert_eq!(a.stats().dropped, 1);
    assert_eq!(b.pending(), 0);
    assert_eq!(c.in_flight(), 0);
    assert!(recv_all(&mut b).is_empty());
}

#[test]
fn frames_outlive_both_ends() {
    let (mut a, mut b) = plain_pair();
    send(&mut a, b"received");
    send(&mut a, b"queued");
    let mut unsent = a.alloc_tx(6).unwrap();
    unsent.copy_from_slice(b"unsent");
    let mut received = Vec::new();
    b.receive(&mut received, 1);
    drop(a);
    drop(b);
    // The last frames keep the link's state alive; their bytes are intact and writable.
    assert_eq!(&received[0][..], b"received");
    unsent[0] = b'U';
    assert_eq!(&unsent[..], b"Unsent");
    drop(unsent);
    drop(received);
}

#[test]
fn a_received_frame_outlives_its_sender() {
    let (mut a, mut b) = plain_pair();
    send(&mut a, b"from a");
    let mut out = Vec::new();
    b.receive(&mut out, 1);
    drop(a);
    assert_eq!(&out[0][..], b"from a");
    // The sender is gone: what the receiver sends is dropped, its buffers recycled.
    send(&mut b, b"to nobody");
    assert_eq!(b.stats().dropped, 1);
    assert_eq!(b.in_flight(), 0);
    drop(out);
    let f = b.alloc_tx(10).unwrap();
    assert_eq!(b.in_flight(), 1);
    drop(f);
    assert_eq!(b.in_flight(), 0);
}

#[test]
fn a_foreign_frame_outliving_its_link_is_dropped() {
    let (mut a, b) = plain_pair();
    let (mut c, d) = plain_pair();
    let f = c.alloc_tx(60).unwrap();
    drop(c);
    drop(d);
    // The frame is the last hold on its link; dropping it here frees that link.
    a.transmit(&mut vec![f]);
    assert_eq!(a.stats().dropped, 1);
    assert_eq!(a.stats().sent, 0);
    assert_eq!(b.pending(), 0);
}

#[test]
fn frames_steered_to_a_dropped_queue_are_recycled() {
    let (mut a, mut b) =
        multi_queue_pair(1, 3, RssConfig::symmetric_default(3), MAC_A, MAC_B, 1500);
    let mut next = 0;
    b[0].steer_with(move |_| {
        next += 1;
        next
    });
    // Queues 1, 2, 0, 1, 2 in turn; queue 2 then goes with two frames waiting.
    for _ in 0..5 {
        send(&mut a[0], &[0; 60]);
    }
    assert_eq!(a[0].in_flight(), 5);
    let q2 = b.remove(2);
    assert_eq!(q2.pending(), 2);
    drop(q2);
    assert_eq!(a[0].in_flight(), 3);
    // Queues 0, 1, then 2, which is gone: that frame is dropped.
    for _ in 0..3 {
        send(&mut a[0], &[0; 60]);
    }
    assert_eq!(a[0].stats().sent, 7);
    assert_eq!(a[0].stats().dropped, 1);
    assert_eq!(a[0].in_flight(), 5);
    drop(b);
    assert_eq!(a[0].in_flight(), 0);
}

#[test]
fn a_steering_rule_holding_frames_gives_them_back_when_replaced() {
    let (mut a, b) = multi_queue_pair(1, 2, RssConfig::symmetric_default(2), MAC_A, MAC_B, 1500);
    let held = a[0].alloc_tx(60).unwrap();
    b[0].steer_with(move |frame| frame.len() + held.len());
    assert_eq!(a[0].in_flight(), 1);
    send(&mut a[0], &[0; 61]);
    assert_eq!(b[1].pending(), 1);
    b[0].steer_with(|_| 0);
    assert_eq!(a[0].in_flight(), 1);
}

#[test]
fn a_buffer_too_small_for_the_other_side_is_replaced() {
    let mut caps_b = Capabilities::new(MAC_B, 9000);
    caps_b.tso_max = Some(65_000);
    let (mut a, mut b) = pair(Capabilities::new(MAC_A, 1500), caps_b);
    send(&mut a, &[1; 100]);
    let mut out = Vec::new();
    a.receive(&mut out, 1);
    b.receive(&mut out, 1);
    drop(out);
    // The only free buffer has 1,514 bytes: a TSO frame of B needs a new one.
    let big = b.max_tx_len();
    let mut f = b.alloc_tx(big).unwrap();
    assert_eq!(f.len(), big);
    f.fill(0xab);
    b.transmit(&mut vec![f]);
    let got = recv_all(&mut a);
    assert_eq!(got, vec![vec![0xab; big]]);
    assert_eq!(a.free_buffers(), 1);
}

impl MemoryLink {
    fn max_tx_len(&self) -> usize {
        self.caps.max_tx_frame()
    }

    /// Buffers given back and not yet handed out again.
    fn free_buffers(&self) -> usize {
        self.shared.state.borrow().spare.len()
    }
}

#[test]
fn tx_checksum_offload_is_performed() {
    let mut caps = Capabilities::new(MAC_A, 1500);
    caps.tx_checksum = rusty_stack::io::ChecksumOffload::ALL;
    let (mut a, mut b) = pair(caps, Capabilities::new(MAC_B, 1500));
    // Data 0x0001 0x0002, checksum field at offset 4 pre-filled with 0x0010.
    let mut f = a.alloc_tx(6).unwrap();
    f.copy_from_slice(&[0, 1, 0, 2, 0, 0x10]);
    f.set_meta(TxMeta {
        checksum: Some(rusty_stack::io::ChecksumRequest {
            start: 0,
            offset: 4,
        }),
        tso_mss: None,
    });
    a.transmit(&mut vec![f]);
    let got = recv_all(&mut b).pop().unwrap();
    // !(1 + 2 + 0x10) = !0x13
    assert_eq!(&got[4..], &(!0x13u16).to_be_bytes());
    // A receiver adds the pseudo-header sum (0x10) back and must get all ones.
    let with_pseudo = [&got[..4], &[0x00, 0x10], &got[4..]].concat();
    assert_eq!(ones_complement_sum(&with_pseudo), 0xffff);
}

#[test]
fn a_burst_mixing_offloads_gets_each_once() {
    let mut caps = Capabilities::new(MAC_A, 1500);
    caps.tx_checksum = rusty_stack::io::ChecksumOffload::ALL;
    caps.tso_max = Some(9000);
    let (mut a, mut b) = pair(caps, Capabilities::new(MAC_B, 1500));
    let mut tso = a.alloc_tx(4).unwrap();
    tso.copy_from_slice(&[9; 4]);
    tso.set_meta(TxMeta {
        checksum: None,
        tso_mss: Some(1000),
    });
    let mut summed = a.alloc_tx(6).unwrap();
    summed.copy_from_slice(&[0, 1, 0, 2, 0, 0x10]);
    summed.set_meta(TxMeta {
        checksum: Some(rusty_stack::io::ChecksumRequest {
            start: 0,
            offset: 4,
        }),
        tso_mss: None,
    });
    a.transmit(&mut vec![tso, summed]);
    let mut out = Vec::new();
    assert_eq!(b.receive(&mut out, 8), 2);
    assert_eq!(RxFrame::meta(&out[0]).gso_size, Some(1000));
    assert_eq!(&out[0][..], &[9; 4]);
    assert_eq!(RxFrame::meta(&out[1]).gso_size, None);
    // Filled once: !(1 + 2 + 0x10).
    assert_eq!(&out[1][4..], &(!0x13u16).to_be_bytes());
}

#[test]
fn multi_queue_steers_tcp_by_toeplitz_and_the_rest_to_queue_0() {
    let rss = RssConfig::symmetric_default(4);
    let (mut a, mut b) = multi_queue_pair(2, 4, rss.clone(), MAC_A, MAC_B, 1500);
    assert_eq!(b.len(), 4);
    assert_eq!(b[3].capabilities().queue, 3);
    assert_eq!(b[3].capabilities().queue_count, 4);
    assert_eq!(b[3].capabilities().rss.as_ref(), Some(&rss));
    let src: Ipv4Addr = "10.0.0.1".parse().unwrap();
    let dst: Ipv4Addr = "10.0.0.2".parse().unwrap();
    let mut hit = [false; 4];
    for sport in 40000..40064u16 {
        let frame = tcp_frame(src, dst, sport, 80);
        send(&mut a[1], &frame);
        let want = usize::from(rss.queue_for_rx_flow(src, dst, sport, 80));
        hit[want] = true;
        for (q, link) in b.iter_mut().enumerate() {
            let got = recv_all(link);
            if q == want {
                assert_eq!(got, vec![frame.clone()]);
            } else {
                assert!(got.is_empty());
            }
        }
    }
    assert_eq!(hit, [true; 4], "64 flows should cover all 4 queues");
    // ARP and malformed frames land on queue 0.
    send(&mut a[0], &arp_frame());
    let mut truncated = tcp_frame(src, dst, 1, 2);
    truncated.truncate(40);
    send(&mut a[0], &truncated);
    send(&mut a[0], &[0xff; 3]);
    assert_eq!(b[0].pending(), 3);
    // Replies from B reach A's queues by the same rule, whichever queue sends them.
    let reply = tcp_frame(dst, src, 80, 40000);
    send(&mut b[2], &reply);
    let want = usize::from(rss.queue_for_rx_flow(dst, src, 80, 40000)) % 2;
    assert_eq!(a[want].pending(), 1);
}

#[test]
fn syn_frames_of_both_families_carry_valid_checksums() {
    use smoltcp::wire::IpAddress;
    let pairs: [(IpAddr, IpAddr); 2] = [
        ("10.0.0.1".parse().unwrap(), "10.0.0.2".parse().unwrap()),
        ("fd00::1".parse().unwrap(), "fd00::2".parse().unwrap()),
    ];
    for (src, dst) in pairs {
        let frame = tcp_frame(src, dst, 40000, 80);
        let header = if src.is_ipv4() { 20 } else { 40 };
        assert_eq!(frame.len(), 14 + header + 20, "{src}");
        let tcp = TcpPacket::new_checked(&frame[14 + header..]).unwrap();
        let (s, d): (IpAddress, IpAddress) = (src.into(), dst.into());
        assert!(tcp.verify_checksum(&s, &d), "{src}");
    }
}

#[test]
fn multi_queue_steers_tcp_over_ipv6_by_toeplitz_and_ndp_to_queue_0() {
    use rusty_stack::rss::ipv6_tcp_input;
    let rss = RssConfig::symmetric_default(4);
    let (mut a, mut b) = multi_queue_pair(1, 4, rss.clone(), MAC_A, MAC_B, 1500);
    let src: Ipv6Addr = "fd00::1".parse().unwrap();
    let dst: Ipv6Addr = "fd00::2".parse().unwrap();
    let mut hit = [false; 4];
    for sport in 40000..40064u16 {
        let frame = tcp_frame(src, dst, sport, 80);
        send(&mut a[0], &frame);
        let input = ipv6_tcp_input(src, dst, sport, 80);
        let want = usize::from(rss.queue_for(rss.hasher().hash(&input)));
        hit[want] = true;
        let pending: Vec<usize> = b.iter().map(|q| q.pending()).collect();
        let mut expected = vec![0; 4];
        expected[want] = 1;
        assert_eq!(pending, expected, "port {sport}");
        assert_eq!(recv_all(&mut b[want]), vec![frame]);
    }
    assert_eq!(hit, [true; 4], "64 flows should cover all 4 queues");
    // An IPv6 packet that is not TCP right after the fixed header (here the SYN of a
    // flow hashed away from queue 0, its next header rewritten to ICMPv6, which Neighbor
    // Discovery is) lands on queue 0.
    let sport = (40000..40064u16)
        .find(|&p| rss.queue_for(rss.hasher().hash(&ipv6_tcp_input(src, dst, p, 80))) != 0)
        .unwrap();
    let mut other = tcp_frame(src, dst, sport, 80);
    other[14 + 6] = 58;
    send(&mut a[0], &other);
    assert_eq!(b[0].pending(), 1);
}

#[test]
fn a_custom_rule_steers_every_frame() {
    let (mut a, mut b) =
        multi_queue_pair(1, 3, RssConfig::symmetric_default(3), MAC_A, MAC_B, 1500);
    let mut next = 0;
    b[1].steer_with(move |_| {
        next += 1;
        next
    });
    let src: Ipv4Addr = "10.0.0.1".parse().unwrap();
    let dst: Ipv4Addr = "10.0.0.2".parse().unwrap();
    // One flow, then ARP: round-robin from queue 1, wrapping past the last queue.
    for _ in 0..3 {
        send(&mut a[0], &tcp_frame(src, dst, 40000, 80));
    }
    send(&mut a[0], &arp_frame());
    let pending: Vec<usize> = b.iter().map(|q| q.pending()).collect();
    assert_eq!(pending, vec![1, 2, 1]);
    assert_eq!(recv_all(&mut b[1])[1], arp_frame());
}

#[test]
fn parser_never_panics_on_garbage() {
    for len in 0..80 {
        let junk: Vec<u8> = (0..len).map(|i| (i * 37 + 11) as u8).collect();
        let hasher = RssConfig::symmetric_default(4).hasher();
        let _ = tcp_flow_hash(&hasher, &junk);
        let mut eth_ip = junk.clone();
        if eth_ip.len() > 14 {
            for ethertype in [[0x08, 0x00], [0x86, 0xdd]] {
                eth_ip[12..14].copy_from_slice(&ethertype);
                let _ = tcp_flow_hash(&hasher, &eth_ip);
            }
        }
    }
}
