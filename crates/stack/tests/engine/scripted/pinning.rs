//! Scripted tests of the memory a peer can make the engine hold (out-of-order pinning
//! and readers that stop reading). Memory held follows the bytes held, and the
//! engine's budget ([`MemoryBudget`](rusty_stack::MemoryBudget)) holds under many such peers:
//! out-of-order data is pruned, windows stop opening, and everything is given back when
//! the connections go.

use super::*;
use rusty_stack::internals::MIN_RING;
use rusty_stack::MemoryBudget;

/// Eight one-byte segments spread over the window the engine offered, each beyond a gap.
fn pin(pc: &mut PeerConn, net: &mut Net, window: usize) {
    for i in 1..=8 {
        let mut seg = pc.seg(net);
        seg.seq = pc.snd_nxt + i * (window / 9);
        let frame = tcp_frame_from(pc.mac, pc.ip, pc.port, pc.host_port, &seg, b"x");
        let out = tcp_of(&net.send(&frame));
        pc.observe(&out);
    }
}

#[test]
fn out_of_order_bytes_spread_over_the_window_cost_what_they_hold() {
    let mut net = Net::new(config(), Recorder::default());
    net.eng.listen(PORT, 1024);
    let window = config().tcp.recv_buffer;
    let mut peers = Vec::new();
    for i in 0..200u16 {
        let mut pc = connect_peer(&mut net, 20000 + i, SeqNum(1000), FULL);
        pin(&mut pc, &mut net, window);
        peers.push(pc);
    }
    let held = net.stats().buffer_memory;
    // 1,600 bytes held out of order: each costs its byte, a range record and the
    // allocator's rounding, not a ring spanning the window (200 × 256 KiB = 50 MiB).
    assert!(held <= 200 * 8 * 80, "{held} bytes of buffer memory");
    assert!(held >= 1600);
    // Filling the gaps delivers everything; then nothing is held.
    let span = 8 * (window / 9) + 1;
    for pc in &mut peers {
        let mut left = span;
        while left > 0 {
            let n = left.min(1400);
            pc.data(&mut net, &vec![b'y'; n]);
            left -= n;
        }
    }
    assert_eq!(net.handler().received.len(), 200 * span);
    assert_eq!(net.stats().buffer_memory, 0);
}

#[test]
fn under_memory_pressure_out_of_order_data_is_pruned_and_windows_stop_opening() {
    let mut cfg = config();
    cfg.memory = MemoryBudget::new(64 << 10, 128 << 10, 256 << 10);
    let window = cfg.tcp.recv_buffer;
    let mut net = Net::new(
        cfg,
        Recorder {
            pause: true,
            ..Default::default()
        },
    );
    net.eng.listen(PORT, 1024);
    // Readers that stop reading: the application consumes nothing, so their data is
    // held. Eight peers open their windows with a first segment before the engine is
    // under pressure, then send 64 KiB each in order.
    let mut peers = Vec::new();
    for i in 0..8u16 {
        let mut pc = connect_peer(&mut net, 21000 + i, SeqNum(5000), FULL);
        pc.data(&mut net, &[b'z'; 1024]);
        peers.push((pc, SeqNum(5001)));
    }
    for (pc, acked) in &mut peers {
        for _ in 0..(64 << 10) / 1024 {
            for s in pc.data(&mut net, &[b'z'; 1024]) {
                if s.seg.flags.ack && s.seg.ack > *acked {
                    *acked = s.seg.ack;
                }
            }
        }
    }
    // Delayed ACKs go out.
    for s in tcp_of(&net.advance(Duration::from_millis(100))) {
        for (pc, acked) in &mut peers {
            if s.seg.dst_port == pc.port && s.seg.ack > *acked {
                *acked = s.seg.ack;
            }
        }
    }
    let s = net.stats().clone();
    // Everything acknowledged is held.
    let acknowledged: usize = peers.iter().map(|(_, a)| a.since(SeqNum(5001))).sum();
    assert!(
        acknowledged >= 128 << 10,
        "{acknowledged} bytes acknowledged"
    );
    assert!(s.buffer_memory as usize >= acknowledged);
    assert!(s.memory.pressure_entered >= 1, "{s}");
    assert!(
        s.buffer_memory_peak as usize <= (256 << 10) + 8 * MIN_RING,
        "the limit held: {s}"
    );
    assert!(
        s.memory.rcv_dropped > 0,
        "in-order data beyond the limit dropped: {s}"
    );
    // What a pressed engine acknowledged, it holds; the window it offers a new
    // connection stops at a first ring.
    let mut pc = connect_peer(&mut net, 22000, SeqNum(9000), FULL);
    let mut out = pc.data(&mut net, &[b'w'; 100]);
    out.extend(pc.data(&mut net, &[b'w'; 100]));
    let ack = out.iter().find(|s| s.seg.flags.ack).expect("an ACK");
    let offered = (ack.seg.window as usize) << 7;
    assert!(offered < window, "window {offered} under pressure");
    // Out-of-order data is refused under pressure.
    let before = net.stats().memory.ooo_refused;
    pin(&mut pc, &mut net, 4 * MIN_RING);
    assert!(net.stats().memory.ooo_refused > before);
    // Every byte goes back when the connections do.
    for (peer, acked) in &mut peers {
        peer.rst(&mut net, *acked);
    }
    let seq = pc.snd_nxt;
    pc.rst(&mut net, seq);
    assert_eq!(net.eng.connection_count(), 0);
    assert_eq!(net.stats().buffer_memory, 0);
}
