//! The driver against the model of the 82599 (`rusty_drivers_ixgbe::model`): bring-up,
//! rings, back-pressure, and whole TCP conversations between Rusty's engines on the
//! driver's queues and a peer engine on the model's wire.

use rusty_drivers_ixgbe::model::{Model, ModelConfig, RxVerdict};
use rusty_drivers_ixgbe::{open, regs, IxgbeConfig};
use rusty_stack::io::{PacketIo, RxFrame};

const MAC: [u8; 6] = [0x02, 0x1b, 0x21, 0x00, 0x00, 0x01];

fn model() -> Model {
    Model::new(ModelConfig::new(MAC, 64 << 20))
}

fn small(queues: usize) -> IxgbeConfig {
    let mut c = IxgbeConfig::new(queues);
    c.ring_size = 64;
    c
}

#[test]
fn bring_up_follows_the_datasheet_and_programs_rss() {
    let m = model();
    let queues = open(m.device(), &small(4)).expect("the model comes up");
    assert!(m.misuse().is_empty(), "{:?}", m.misuse());
    assert_eq!(queues.len(), 4);
    let caps = queues[2].capabilities();
    assert_eq!(caps.mac.0, MAC, "the MAC comes from RAL/RAH 0");
    assert_eq!((caps.queue, caps.queue_count), (2, 4));
    let rss = caps.rss.as_ref().expect("RSS announced");
    // What the stack is told is what the device holds.
    for n in 0..32u32 {
        let word = m.peek(regs::reta(n)).to_le_bytes();
        for (k, b) in word.iter().enumerate() {
            assert_eq!(
                u16::from(*b),
                rss.queue_for(n * 4 + k as u32),
                "RETA entry {}",
                n * 4 + k as u32
            );
        }
    }
    for (n, k) in rss.key.chunks(4).enumerate() {
        assert_eq!(
            m.peek(regs::rssrk(n as u32)).to_le_bytes(),
            [k[0], k[1], k[2], k[3]]
        );
    }
    assert_ne!(m.peek(regs::RXCTRL) & regs::RXCTRL_RXEN, 0);
    for q in 0..4 {
        assert_ne!(m.peek(regs::rxdctl(q)) & regs::RXDCTL_ENABLE, 0);
        assert_ne!(m.peek(regs::txdctl(q)) & regs::TXDCTL_ENABLE, 0);
        // Every receive descriptor but one holds a buffer.
        assert_eq!(m.peek(regs::rdt(q)), 63);
    }
}

// ----- Whole conversations: Rusty on the driver's queues, a peer on the model's wire -----

use std::net::Ipv4Addr;
use std::time::Duration;

use rusty_stack::io::MacAddr;
use rusty_testkit::rig::{self, EchoClient, Rig, ECHO_PORT};

const RUSTY_IP: Ipv4Addr = Ipv4Addr::new(10, 0, 9, 2);
const PEER_IP: Ipv4Addr = Ipv4Addr::new(10, 0, 9, 1);

#[test]
fn echo_over_four_queues_lands_every_flow_where_rss_said() {
    const CONNS: usize = 100;
    let m = model();
    let queues = open(m.device(), &small(4)).expect("the model comes up");
    let rss = queues[0].capabilities().rss.clone().expect("rss");
    let client = EchoClient::new(CONNS, 20_000);
    let mut rig = Rig::new(queues, m.wire(), (RUSTY_IP, MacAddr(MAC)), PEER_IP, client);
    // Rusty's own active opens too: each worker's return traffic must come back to it.
    rig.run_echo(CONNS, 5, 20_000);
    let p = rig.peer.handler();
    assert!(p.errors.is_empty(), "{:?}", p.errors);
    assert_eq!(p.done, CONNS, "every echo finished");
    assert!(m.misuse().is_empty(), "{:?}", m.misuse());
    assert_eq!(
        rig.handed_over, 0,
        "RSS is predictable: nothing to hand over"
    );
    let mut per_queue = [0usize; 4];
    for (q, w) in rig.workers.iter().enumerate() {
        for remote in &w.handler().accepted {
            let std::net::IpAddr::V4(remote_ip) = remote.ip() else {
                panic!("an IPv4 peer")
            };
            let want = rss.queue_for_rx_flow(remote_ip, RUSTY_IP, remote.port(), ECHO_PORT);
            assert_eq!(
                usize::from(want),
                q,
                "flow from {remote} landed on queue {q}"
            );
            per_queue[q] += 1;
        }
        assert_eq!(
            w.handler().opened,
            5,
            "worker {q}'s active opens all completed"
        );
    }
    assert_eq!(per_queue.iter().sum::<usize>(), CONNS);
    assert!(per_queue.iter().all(|&n| n > 0), "{per_queue:?}");
    eprintln!("flows per queue: {per_queue:?}");
    // Bulk echoes went out as TSO super-frames, which the model cut into segments (the
    // peer checked every byte and every checksum of them).
    let handed: u64 = rig
        .workers
        .iter()
        .map(|w| w.device().stats().tx_frames)
        .sum();
    assert!(
        rig.wire_frames > handed,
        "{} frames on the wire from {handed} handed over",
        rig.wire_frames
    );
    eprintln!(
        "{} frames on the wire from {handed} handed to the device",
        rig.wire_frames
    );
}

/// An IPv4/TCP frame from the peer's port `src_port` to Rusty's echo port, checksums
/// right unless `break_tcp`.
fn tcp_frame(src_port: u16, payload: &[u8], break_tcp: bool) -> Vec<u8> {
    let macs = (MacAddr(MAC), MacAddr([0x02, 0, 0, 0, 0x99, 1]));
    let mut f = rig::tcp_frame(macs, (PEER_IP, RUSTY_IP), (src_port, ECHO_PORT), payload);
    f[rig::TCP_CHECKSUM_AT + 1] ^= u8::from(break_tcp);
    f
}

#[test]
fn rings_wrap_at_full_occupancy_and_transmit_pushes_back() {
    let m = model();
    let wire = m.wire();
    let mut q = open(m.device(), &small(1)).expect("up").remove(0);
    let mut out = Vec::new();
    let mut got = Vec::new();
    for round in 0..5u16 {
        // Receive: the ring holds 63 frames; the 64th finds no descriptor.
        for i in 0..63u16 {
            let v = wire.deliver(&tcp_frame(1000 + i, &round.to_be_bytes(), false));
            assert!(matches!(v, RxVerdict::Delivered { .. }), "{v:?}");
        }
        let v = wire.deliver(&tcp_frame(2000, b"x", false));
        assert!(matches!(v, RxVerdict::NoDescriptor { .. }), "{v:?}");
        got.clear();
        assert_eq!(q.receive(&mut got, 256), 63);
        for (i, f) in got.iter().enumerate() {
            assert_eq!(&f[14 + 20..14 + 22], &(1000 + i as u16).to_be_bytes());
            assert_eq!(&f[54..56], &round.to_be_bytes());
            assert!(f.meta().checksum_verified);
        }
        got.clear(); // the buffers go back and the ring is refilled on the next call
                     // Transmit: 23 buffers (half the ring less one, less the 8 kept for TSO
                     // super-frames) and then back-pressure.
        let mut frames = Vec::new();
        let frame = tcp_frame(3000, &[0; 6], false);
        while let Some(mut b) = q.alloc_tx(frame.len()) {
            b.copy_from_slice(&frame);
            frames.push(b);
        }
        assert_eq!(frames.len(), 23);
        q.transmit(&mut frames);
        q.flush();
        out.clear();
        wire.take_transmitted(&mut out);
        assert_eq!(out.len(), 23, "round {round}");
    }
    let s = q.stats();
    assert_eq!((s.rx_frames, s.tx_frames), (5 * 63, 5 * 23));
    assert_eq!(s.tx_busy, 5);
    assert!(m.misuse().is_empty(), "{:?}", m.misuse());
}

#[test]
fn bad_checksums_are_reported_and_oversize_frames_never_reach_the_ring() {
    let m = model();
    let wire = m.wire();
    let mut q = open(m.device(), &small(1)).expect("up").remove(0);
    assert!(matches!(
        wire.deliver(&tcp_frame(1, b"ok", false)),
        RxVerdict::Delivered { .. }
    ));
    assert!(matches!(
        wire.deliver(&tcp_frame(2, b"bad", true)),
        RxVerdict::Delivered { .. }
    ));
    let v = wire.deliver(&tcp_frame(3, &[0; 1600], false));
    assert!(!matches!(v, RxVerdict::Delivered { .. }), "{v:?}");
    let mut got = Vec::new();
    assert_eq!(q.receive(&mut got, 8), 2);
    assert!(got[0].meta().checksum_verified);
    assert!(
        !got[1].meta().checksum_verified,
        "the stack checks it itself and drops it"
    );
}

#[test]
fn clear_errors_for_a_dead_link_small_memory_and_bad_sizes() {
    use rusty_drivers_ixgbe::model::LinkMode;
    use rusty_drivers_ixgbe::InitError;
    let mut cfg = ModelConfig::new(MAC, 64 << 20);
    cfg.link = LinkMode::Down;
    let mut c = small(2);
    c.link_wait = Duration::from_millis(50);
    let e = open(Model::new(cfg).device(), &c).err().expect("no link");
    assert!(matches!(e, InitError::LinkDown { .. }), "{e}");
    assert!(e.to_string().contains("link is down"), "{e}");
    let e = open(
        Model::new(ModelConfig::new(MAC, 64 << 10)).device(),
        &small(2),
    )
    .err()
    .expect("64 KiB of DMA memory is too little");
    assert!(matches!(e, InitError::Dma(_)), "{e}");
    for (queues, ring) in [(0, 64), (17, 64), (1, 60), (1, 8192)] {
        let mut c = small(queues);
        c.ring_size = ring;
        assert!(
            open(model().device(), &c).is_err(),
            "{queues} queues of {ring}"
        );
    }
}

/// A frame spread over several descriptors (possible only if jumbo frames were turned
/// on behind the driver's back: its buffers hold one MTU-sized frame) is dropped whole
/// and counted, and the ring carries on with the next frame.
#[test]
fn a_frame_spread_over_several_descriptors_is_dropped_whole_and_counted() {
    let m = model();
    let wire = m.wire();
    let mut q = open(m.device(), &small(1)).expect("up").remove(0);
    // HLREG0.JUMBOEN (bit 2) and MAXFRS.MFS = 9018, written as a misbehaving agent would.
    let regs = m.device().regs;
    regs.write(regs::HLREG0, regs.read(regs::HLREG0) | 1 << 2);
    regs.write(0x04268, 9018 << 16);
    let v = wire.deliver(&tcp_frame(1, &[7; 5000], false));
    assert!(
        matches!(v, RxVerdict::Delivered { descriptors: 3, .. }),
        "{v:?}"
    );
    assert!(matches!(
        wire.deliver(&tcp_frame(2, b"next", false)),
        RxVerdict::Delivered { .. }
    ));
    let mut got = Vec::new();
    assert_eq!(q.receive(&mut got, 8), 1, "only the whole frame");
    assert_eq!(&got[0][54..], b"next");
    assert_eq!(q.stats().rx_bad, 3, "each descriptor of the spread frame");
}
