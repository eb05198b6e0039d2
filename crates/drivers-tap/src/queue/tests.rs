//! The queue logic over a Unix datagram socket pair, which keeps frame boundaries
//! just as a TAP file does, so no privileges are needed.

use std::os::fd::OwnedFd;
use std::os::unix::net::UnixDatagram;

use rusty_stack::io::{ChecksumRequest, MacAddr};

use super::*;
use crate::vnet::{F_NEEDS_CSUM, GSO_TCPV4};

fn pair() -> (TapQueue, UnixDatagram) {
    let (ours, theirs) = UnixDatagram::pair().unwrap();
    ours.set_nonblocking(true).unwrap();
    theirs
        .set_read_timeout(Some(Duration::from_secs(1)))
        .unwrap();
    let file = File::from(OwnedFd::from(ours));
    let mut caps = Capabilities::new(MacAddr([2, 0, 0, 0, 0, 1]), 1500);
    caps.tso_max = Some(crate::TSO_MAX);
    (
        TapQueue::new(file, "test".into(), caps, DEFAULT_POOL_BUFFERS),
        theirs,
    )
}

fn with_hdr(h: VnetHdr, frame: &[u8]) -> Vec<u8> {
    let mut b = [0u8; VNET_HDR_LEN];
    h.encode(&mut b);
    [&b[..], frame].concat()
}

#[test]
fn tap_queue_is_send() {
    fn send<T: Send>() {}
    send::<TapQueue>();
}

/// A burst larger than the pools leaves at most `pool_buffers` idle buffers in each
/// list, and `pooled_bytes` says how much they hold.
#[test]
fn idle_buffers_stay_within_the_configured_bound() {
    let (mut q, peer) = pair();
    let burst = 3 * DEFAULT_POOL_BUFFERS;
    // All held by the stack at once, then all given back (a few at a time: the
    // socket pair queues only a few datagrams).
    let mut held = Vec::new();
    while held.len() < burst {
        for _ in 0..4 {
            peer.send(&with_hdr(VnetHdr::default(), &[5u8; 60]))
                .unwrap();
        }
        assert_eq!(q.receive(&mut held, 4), 4);
    }
    assert_eq!(q.pooled_bytes(), 0);
    held.clear();
    // Given back to the shared list; the next reads take from it.
    assert_eq!(q.pooled_bytes(), DEFAULT_POOL_BUFFERS * RX_BUF_LEN);
    let mut frames: Vec<TapTx> = (0..burst).map(|_| q.alloc_tx(1000).unwrap()).collect();
    // The pair takes a few; the rest are dropped as a full device queue would.
    q.transmit(&mut frames);
    let tx = q.tx_free.iter().map(Vec::capacity).sum::<usize>();
    assert_eq!(q.tx_free.len(), DEFAULT_POOL_BUFFERS);
    assert_eq!(q.pooled_bytes(), DEFAULT_POOL_BUFFERS * RX_BUF_LEN + tx);
}

#[test]
fn receives_bursts_with_metadata_and_reuses_buffers() {
    let (mut q, peer) = pair();
    let gso = VnetHdr {
        flags: F_NEEDS_CSUM,
        gso_type: GSO_TCPV4,
        gso_size: 1448,
        ..VnetHdr::default()
    };
    peer.send(&with_hdr(gso, &[1u8; 3000])).unwrap();
    peer.send(&with_hdr(VnetHdr::default(), &[2u8; 60]))
        .unwrap();
    // Unknown GSO type, and a datagram shorter than the header: counted, skipped.
    let udp = VnetHdr {
        gso_type: crate::vnet::GSO_UDP,
        ..VnetHdr::default()
    };
    peer.send(&with_hdr(udp, &[3u8; 60])).unwrap();
    peer.send(&[0u8; 4]).unwrap();
    peer.send(&with_hdr(VnetHdr::default(), &[4u8; 70]))
        .unwrap();

    let mut out = Vec::new();
    assert_eq!(q.receive(&mut out, 2), 2, "stops at max");
    assert_eq!(out[0].len(), 3000);
    assert!(out[0].iter().all(|&b| b == 1));
    assert_eq!(
        out[0].meta(),
        RxMeta {
            checksum_verified: true,
            gso_size: Some(1448)
        }
    );
    assert_eq!(&out[1][..], &[2u8; 60][..]);
    assert_eq!(out[1].meta(), RxMeta::default());
    let first = [out[0].as_ptr(), out[1].as_ptr()];
    out.clear();

    assert_eq!(q.receive(&mut out, 32), 1, "stops when nothing waits");
    assert_eq!(&out[0][..], &[4u8; 70][..]);
    assert!(
        first.contains(&out[0].as_ptr()),
        "a dropped frame's buffer is reused"
    );
    let s = q.stats();
    assert_eq!((s.rx_frames, s.rx_gso_frames, s.rx_errors), (3, 1, 2));
    assert_eq!(s.rx_bytes, 3000 + 60 + 70);
}

#[test]
fn transmits_with_the_offload_header_and_counts_drops() {
    let (mut q, peer) = pair();
    let mut f = q.alloc_tx(100).unwrap();
    assert_eq!(f.len(), 100);
    f.fill(7);
    f.truncate(80);
    f.set_meta(TxMeta {
        checksum: Some(ChecksumRequest {
            start: 34,
            offset: 16,
        }),
        tso_mss: None,
    });
    let mut burst = vec![f];
    q.transmit(&mut burst);
    assert!(burst.is_empty());
    let mut buf = [0u8; 200];
    let n = peer.recv(&mut buf).unwrap();
    assert_eq!(n, VNET_HDR_LEN + 80);
    let h = VnetHdr::decode(&buf).unwrap();
    assert_eq!(
        (h.flags, h.csum_start, h.csum_offset),
        (F_NEEDS_CSUM, 34, 16)
    );
    assert!(buf[VNET_HDR_LEN..n].iter().all(|&b| b == 7));

    // The transmit buffer comes back and is handed out again, zeroed.
    let f = q.alloc_tx(50).unwrap();
    assert!(f.iter().all(|&b| b == 0));
    assert!(q.alloc_tx(q.capabilities().max_tx_frame() + 1).is_none());
    drop(f);

    // Nobody reads `peer`: the socket fills up and the rest is dropped and counted.
    let total = 5000u64;
    for _ in 0..total {
        let mut burst = vec![q.alloc_tx(1000).unwrap()];
        q.transmit(&mut burst);
    }
    let s = q.stats();
    assert_eq!(s.tx_frames + s.tx_drops, total + 1);
    assert!(s.tx_drops > 0, "{s:?}");
    assert_eq!(s.tx_bytes, s.tx_frames * 1000 - 1000 + 80);
}

#[test]
fn wait_returns_when_the_doorbell_rings_and_drains_it() {
    let (mut q, _peer) = pair();
    let bell = Doorbell::new().unwrap();
    let ringer = bell.ringer();
    q.set_doorbell(bell);
    let t = std::time::Instant::now();
    let ring = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(50));
        ringer.ring();
        ringer
    });
    q.wait(Duration::from_secs(5));
    let waited = t.elapsed();
    let ringer = ring.join().unwrap();
    assert!(
        waited >= Duration::from_millis(40),
        "woke early: {waited:?}"
    );
    assert!(
        waited < Duration::from_secs(1),
        "slept through the bell: {waited:?}"
    );
    // Drained: the next wait lasts its timeout, and a new ring ends one again.
    let t = std::time::Instant::now();
    q.wait(Duration::from_millis(30));
    assert!(t.elapsed() >= Duration::from_millis(25));
    ringer.ring();
    let t = std::time::Instant::now();
    q.wait(Duration::from_secs(5));
    assert!(t.elapsed() < Duration::from_secs(1));
}

#[test]
fn wait_returns_when_a_frame_arrives_or_the_timeout_passes() {
    let (mut q, peer) = pair();
    let t = std::time::Instant::now();
    q.wait(Duration::from_millis(30));
    assert!(t.elapsed() >= Duration::from_millis(25));
    peer.send(&with_hdr(VnetHdr::default(), &[0u8; 60]))
        .unwrap();
    let t = std::time::Instant::now();
    q.wait(Duration::from_secs(5));
    assert!(t.elapsed() < Duration::from_secs(1));
}
