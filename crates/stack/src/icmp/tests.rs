//! Echo requests against smoltcp's wire types: the replies, what is rejected or ignored,
//! truncation to the output buffer, and random input that never panics.

use super::*;
use proptest::prelude::*;

const US: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
const THEM: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);
const US_MAC: MacAddr = MacAddr([0x02, 0, 0, 0, 0, 1]);
const THEM_MAC: MacAddr = MacAddr([0x02, 0, 0, 0, 0, 2]);
const MTU: usize = 1500;

fn emit(repr: &Icmpv4Repr) -> Vec<u8> {
    let mut buf = vec![0u8; repr.buffer_len()];
    repr.emit(
        &mut Icmpv4Packet::new_unchecked(&mut buf[..]),
        &ChecksumCapabilities::default(),
    );
    buf
}

fn echo_request(data: &[u8]) -> Vec<u8> {
    emit(&Icmpv4Repr::EchoRequest {
        ident: 0x1234,
        seq_no: 7,
        data,
    })
}

#[test]
fn replies_to_a_smoltcp_echo_request() {
    let data: Vec<u8> = (0..56u8).collect();
    let req = echo_request(&data);
    let mut out = [0u8; 128];
    let len = echo_reply(&req, &mut out, MTU).unwrap().unwrap();
    assert_eq!(len, req.len());
    let p = Icmpv4Packet::new_checked(&out[..len]).unwrap();
    assert!(p.verify_checksum());
    let repr = Icmpv4Repr::parse(&p, &ChecksumCapabilities::default()).unwrap();
    assert_eq!(
        repr,
        Icmpv4Repr::EchoReply {
            ident: 0x1234,
            seq_no: 7,
            data: &data,
        }
    );
}

#[test]
fn replies_to_an_empty_echo_request() {
    let req = echo_request(&[]);
    let mut out = [0u8; 8];
    assert_eq!(echo_reply(&req, &mut out, MTU), Ok(Some(8)));
    assert_eq!(out[0], 0, "type 0 is Echo Reply");
}

#[test]
fn bad_checksum_is_rejected() {
    let mut req = echo_request(b"ping");
    req[9] ^= 1;
    let mut out = [0u8; 64];
    assert_eq!(
        echo_reply(&req, &mut out, MTU),
        Err(DropReason::BadIcmpChecksum)
    );
}

#[test]
fn truncated_messages_are_rejected() {
    let req = echo_request(b"");
    let mut out = [0u8; 64];
    for len in 0..HEADER_LEN {
        assert_eq!(
            echo_reply(&req[..len], &mut out, MTU),
            Err(DropReason::Truncated)
        );
    }
    // Cutting data off a request breaks its checksum.
    let req = echo_request(b"abcdefgh");
    assert_eq!(
        echo_reply(&req[..12], &mut out, MTU),
        Err(DropReason::BadIcmpChecksum)
    );
}

#[test]
fn nonzero_code_is_malformed() {
    let mut req = echo_request(b"x");
    let mut p = Icmpv4Packet::new_unchecked(&mut req[..]);
    p.set_msg_code(1);
    p.fill_checksum();
    let mut out = [0u8; 64];
    assert_eq!(echo_reply(&req, &mut out, MTU), Err(DropReason::BadIcmp));
}

#[test]
fn other_messages_are_ignored() {
    let reply = emit(&Icmpv4Repr::EchoReply {
        ident: 1,
        seq_no: 2,
        data: b"abc",
    });
    let mut out = [0u8; 64];
    assert_eq!(echo_reply(&reply, &mut out, MTU), Ok(None));
    // Timestamp request (type 13): well formed, not implemented.
    let mut ts = vec![13u8, 0, 0, 0, 0, 1, 0, 1, 0, 0, 0, 0];
    Icmpv4Packet::new_unchecked(&mut ts[..]).fill_checksum();
    assert_eq!(echo_reply(&ts, &mut out, MTU), Ok(None));
}

#[test]
fn small_output_buffer() {
    let req = echo_request(b"0123456789");
    let mut out = [0u8; 17];
    assert_eq!(echo_reply(&req, &mut out, MTU), Err(DropReason::NoTxBuffer));
}

/// RFC 1122 §3.2.2.6: a reply that would not fit is cut to fit and sent.
#[test]
fn long_requests_get_truncated_replies() {
    let data: Vec<u8> = (0..200u8).collect();
    let req = echo_request(&data);
    let mut out = [0u8; 256];
    assert_eq!(echo_reply(&req, &mut out, 100), Ok(Some(100)));
    let p = Icmpv4Packet::new_checked(&out[..100]).unwrap();
    assert!(p.verify_checksum());
    assert_eq!(p.msg_type(), Icmpv4Message::EchoReply);
    assert_eq!(p.data(), &data[..100 - HEADER_LEN]);
    assert_eq!(echo_reply(&req, &mut out, HEADER_LEN), Ok(Some(HEADER_LEN)));
    assert_eq!(
        echo_reply(&req, &mut out, HEADER_LEN - 1),
        Err(DropReason::OverMtu)
    );
    // Over an Ethernet frame: the datagram is exactly the MTU.
    let ip = request_ip(US, req.len());
    let len = echo_reply_frame(&mut out, US_MAC, US, THEM_MAC, &ip, &req, 0, 128)
        .unwrap()
        .unwrap();
    assert_eq!(len, ethernet::HEADER_LEN + 128);
    let (_, ip_bytes) = ethernet::parse(&out[..len]).unwrap();
    let (h, icmp) = ipv4::parse(ip_bytes, ipv4::Local::new(THEM, 24), false).unwrap();
    assert_eq!(usize::from(h.total_len), 128);
    assert!(Icmpv4Packet::new_checked(icmp).unwrap().verify_checksum());
}

fn request_ip(dst: Ipv4Addr, icmp_len: usize) -> Ipv4Header {
    Ipv4Header {
        src: THEM,
        dst,
        protocol: IpProtocol::Icmp,
        ttl: 64,
        ident: 99,
        total_len: (ipv4::HEADER_LEN + icmp_len) as u16,
        header_len: 20,
    }
}

#[test]
fn full_reply_frame_parses_back() {
    let req = echo_request(b"payload!");
    let ip = request_ip(US, req.len());
    let mut out = [0u8; 128];
    let len = echo_reply_frame(&mut out, US_MAC, US, THEM_MAC, &ip, &req, 5, MTU)
        .unwrap()
        .unwrap();
    assert_eq!(len, 14 + 20 + req.len());
    let (eth, ip_bytes) = ethernet::parse(&out[..len]).unwrap();
    assert_eq!((eth.src, eth.dst), (US_MAC, THEM_MAC));
    assert_eq!(eth.ethertype, EthernetProtocol::Ipv4);
    let (h, icmp) = ipv4::parse(ip_bytes, ipv4::Local::new(THEM, 24), false).unwrap();
    assert_eq!(
        (h.src, h.dst, h.protocol, h.ident),
        (US, THEM, IpProtocol::Icmp, 5)
    );
    let p = Icmpv4Packet::new_checked(icmp).unwrap();
    assert!(p.verify_checksum());
    assert_eq!(p.msg_type(), Icmpv4Message::EchoReply);
    assert_eq!(p.data(), b"payload!");
}

#[test]
fn broadcast_ping_is_ignored_and_small_frame_buffer_reported() {
    let req = echo_request(b"x");
    let mut out = [0u8; 128];
    for dst in [
        Ipv4Addr::BROADCAST,
        Ipv4Addr::new(10, 0, 0, 255),
        Ipv4Addr::new(224, 0, 0, 1),
    ] {
        let ip = request_ip(dst, req.len());
        assert_eq!(
            echo_reply_frame(&mut out, US_MAC, US, THEM_MAC, &ip, &req, 0, MTU),
            Ok(None)
        );
    }
    let ip = request_ip(US, req.len());
    for group in [MacAddr::BROADCAST, MacAddr([0x01, 0, 0x5e, 0, 0, 1])] {
        assert_eq!(
            echo_reply_frame(&mut out, US_MAC, US, group, &ip, &req, 0, MTU),
            Err(DropReason::SendToGroupMac)
        );
    }
    for short in [0usize, 20, 34, 34 + req.len() - 1] {
        assert_eq!(
            echo_reply_frame(&mut out[..short], US_MAC, US, THEM_MAC, &ip, &req, 0, MTU),
            Err(DropReason::NoTxBuffer)
        );
    }
}

proptest! {
    #[test]
    fn echo_reply_never_panics(
        bytes in proptest::collection::vec(any::<u8>(), 0..96),
        out_len in 0usize..128,
    ) {
        let mut out = vec![0u8; out_len];
        if let Ok(Some(len)) = echo_reply(&bytes, &mut out, MTU) {
            prop_assert_eq!(len, bytes.len());
            prop_assert!(Icmpv4Packet::new_unchecked(&out[..len]).verify_checksum());
        }
    }

    #[test]
    fn any_valid_request_gets_a_matching_reply(
        ident in any::<u16>(),
        seq_no in any::<u16>(),
        data in proptest::collection::vec(any::<u8>(), 0..200),
        max_len in HEADER_LEN..300,
    ) {
        let req = emit(&Icmpv4Repr::EchoRequest { ident, seq_no, data: &data });
        let mut out = vec![0u8; req.len()];
        let len = echo_reply(&req, &mut out, max_len).unwrap().unwrap();
        prop_assert_eq!(len, req.len().min(max_len));
        let p = Icmpv4Packet::new_checked(&out[..len]).unwrap();
        let repr = Icmpv4Repr::parse(&p, &ChecksumCapabilities::default()).unwrap();
        let data = &data[..len - HEADER_LEN];
        prop_assert_eq!(repr, Icmpv4Repr::EchoReply { ident, seq_no, data });
    }
}
