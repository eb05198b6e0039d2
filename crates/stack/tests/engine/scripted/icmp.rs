//! ICMP echo: answered, cut to the MTU, dropped on a bad checksum; and frames over the
//! MTU counted, never sent.

use super::*;

#[test]
fn icmp_echo_is_answered_and_bad_checksums_dropped() {
    let mut net = Net::new(config(), Recorder::default());
    let data = b"rusty ping, odd length!";
    let out = net.send(&echo_request(0x1234, 7, data));
    assert_eq!(out.len(), 1, "{out:?}");
    assert_eq!((out[0].eth().src, out[0].eth().dst), (HOST_MAC, PEER_MAC));
    let (ip, ident, seq_no, echoed) = out[0].echo_reply().expect("an echo reply");
    assert_eq!((ip.src, ip.dst), (HOST_IP, PEER_IP));
    assert_eq!(ip.ttl, ipv4::DEFAULT_TTL);
    assert_eq!((ident, seq_no), (0x1234, 7));
    assert_eq!(echoed, data);
    assert_eq!(net.stats().icmp_echo_replies, 1);

    let mut bad = echo_request(0x1234, 8, data);
    bad[14 + 20 + 2] ^= 0x5a; // the ICMP checksum
    assert!(net.send(&bad).is_empty());
    assert_eq!(net.dropped(DropReason::BadIcmpChecksum), 1);
    assert_eq!(net.stats().icmp_echo_replies, 1);

    // An empty echo works too.
    let out = net.send(&echo_request(1, 2, &[]));
    assert_eq!(out[0].echo_reply().map(|r| r.3), Some(Vec::new()));
}

/// The engine's end of a link of IP MTU `mtu` that checksums and segments (TSO).
fn tso_caps(mtu: usize) -> Capabilities {
    let mut caps = Capabilities::new(HOST_MAC, mtu);
    caps.tx_checksum = ChecksumOffload::ALL;
    caps.tso_max = Some(65535);
    caps
}

/// A device that hands over a frame above its MTU (the peer's MTU is larger) must not
/// make the engine send one: the reply is cut to the MTU (RFC 1122 §3.2.2.6), with TSO
/// on the device or not, and counted; a request that fits is answered whole.
#[test]
fn icmp_echo_over_the_mtu_gets_a_reply_cut_to_it() {
    const MTU: usize = 576;
    for dev in [Capabilities::new(HOST_MAC, MTU), tso_caps(MTU)] {
        let wire = Capabilities::new(PEER_MAC, 9000);
        let mut net = Net::with_caps(config(), Recorder::default(), wire, dev);
        let fits = pattern(MTU - 20 - 8, 1);
        let out = net.send(&echo_request(1, 1, &fits));
        assert_eq!(out.len(), 1, "{out:?}");
        assert_eq!(out[0].0.len(), ETHERNET_HEADER_LEN + MTU);
        assert_eq!(out[0].echo_reply().map(|r| r.3), Some(fits.clone()));
        assert_eq!(net.stats().icmp_echo_truncated, 0);

        let long = pattern(4000, 2);
        let out = net.send(&echo_request(1, 2, &long));
        assert_eq!(out.len(), 1, "{out:?}");
        assert_eq!(out[0].0.len(), ETHERNET_HEADER_LEN + MTU);
        let (ip, ident, seq_no, echoed) = out[0].echo_reply().expect("an echo reply");
        assert_eq!((usize::from(ip.total_len), ident, seq_no), (MTU, 1, 2));
        assert_eq!(echoed, long[..MTU - 20 - 8]);
        assert_eq!(net.stats().icmp_echo_replies, 2);
        assert_eq!(net.stats().icmp_echo_truncated, 1);
        assert_eq!(net.stats().total_drops(), 0);
    }
}

/// The transmit path's one size guard: a frame above the MTU that is no TSO
/// super-frame is dropped and counted, never handed to the device.
#[test]
fn frames_over_the_mtu_are_counted_not_sent() {
    let wire = Capabilities::new(PEER_MAC, 9000);
    let mut net = Net::with_caps(config(), Recorder::default(), wire, tso_caps(576));
    let frames_out = net.stats().frames_out;
    for (len, tso) in [(577, false), (576, false), (8000, true)] {
        let buf = net.eng.device_mut().alloc_tx(ETHERNET_HEADER_LEN + len);
        net.eng.push_tx_internal(buf.expect("buffer"), tso);
    }
    net.eng.submit_internal();
    let out = net.poll();
    let lens: Vec<usize> = out.iter().map(|f| f.0.len()).collect();
    assert_eq!(
        lens,
        [ETHERNET_HEADER_LEN + 576, ETHERNET_HEADER_LEN + 8000]
    );
    assert_eq!(net.dropped(DropReason::OverMtu), 1);
    assert_eq!(net.stats().frames_out - frames_out, 2);
}
