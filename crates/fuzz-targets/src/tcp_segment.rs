//! TCP segment parsing with options ([`Segment::parse`]).
//!
//! The input is a flags byte (bit 0: the device verified the checksum; bit 1: repair the
//! checksum first, so parsing gets past it) and the TCP header and payload. Checked for
//! whatever parses: the payload is the tail of the input and as long as the segment
//! says, the checksum really matches unless the device vouched for it, at most one of
//! SYN/FIN/RST is set, and the header [`TxSegment`] builds from the parsed fields parses
//! back to the same segment.

use rusty_stack::checksum;
use rusty_stack::internals::{pseudo_header_sum, Segment, TxSegment};

use crate::input::Input;
use crate::wire::{set_tcp_checksum, HOST_IP, PEER_IP};

/// Parse `data` as a TCP segment from the peer to the engine. Panics on a bug.
pub fn tcp_segment(data: &[u8]) {
    let mut input = Input::new(data);
    let flags = input.u8();
    let verified = flags & 1 != 0;
    let mut tcp = input.rest().to_vec();
    if flags & 2 != 0 {
        set_tcp_checksum(&mut tcp, PEER_IP, HOST_IP);
    }
    let Ok((seg, payload)) = Segment::parse(&tcp, PEER_IP, HOST_IP, verified) else {
        return;
    };
    assert_eq!(payload.len(), seg.payload_len);
    assert!(tcp.ends_with(payload), "payload is not the segment's tail");
    assert!(tcp.len() - payload.len() >= 20, "header under 20 bytes");
    if !verified {
        let pseudo = pseudo_header_sum(PEER_IP, HOST_IP, tcp.len() as u16);
        assert!(checksum::verify_with(pseudo, &tcp), "bad checksum accepted");
        assert_eq!(
            Segment::parse(&tcp, PEER_IP, HOST_IP, true).map(|(s, _)| s),
            Ok(seg),
            "a verified checksum changes the parse"
        );
    }
    let f = seg.flags;
    assert!(
        usize::from(f.syn) + usize::from(f.fin) + usize::from(f.rst) <= 1,
        "{seg:?}"
    );
    assert_eq!(
        seg.seg_len(),
        payload.len() + usize::from(f.syn) + usize::from(f.fin)
    );
    round_trip(&seg, payload);
}

/// Emit `seg` through [`TxSegment`] and parse it back: every field and option must
/// survive.
fn round_trip(seg: &Segment, payload: &[u8]) {
    let f = seg.flags;
    let tx = TxSegment {
        seq: seg.seq,
        ack: f.ack.then_some(seg.ack),
        syn: f.syn,
        fin: f.fin,
        rst: f.rst,
        psh: f.psh,
        window: seg.window,
        mss: seg.mss,
        wscale: seg.wscale,
        sack_permitted: seg.sack_permitted,
        timestamp: seg.timestamp,
        sack: seg.sack,
        payload_len: payload.len(),
        ..Default::default()
    };
    let hl = tx.header_len();
    assert!(
        hl <= 60,
        "parsed options do not fit a header again: {seg:?}"
    );
    let mut buf = vec![0u8; hl + payload.len()];
    tx.write_header(&mut buf[..hl], seg.src_port, seg.dst_port);
    buf[hl..].copy_from_slice(payload);
    set_tcp_checksum(&mut buf, PEER_IP, HOST_IP);
    let (mut again, p) = Segment::parse(&buf, PEER_IP, HOST_IP, false)
        .unwrap_or_else(|e| panic!("{e:?} re-parsing {seg:?}"));
    assert_eq!(p, payload);
    // The builder writes what the engine sends: PSH only with data or FIN (SYN or RST
    // with PSH comes back without it), SACK blocks only with an ACK and without
    // SACK-permitted, which only SYNs carry (a segment without ACK is dropped before its
    // SACK blocks are read, RFC 9293 §3.10.7.4).
    if f.syn || f.rst {
        again.flags.psh = f.psh;
    }
    if !f.ack || seg.sack_permitted {
        again.sack = seg.sack;
    }
    assert_eq!(&again, seg);
}
