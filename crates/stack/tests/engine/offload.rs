//! Bodies with precomputed checksums on a link without checksum offload, and TSO
//! super-frames on a link with it.

use super::*;

/// A body with precomputed checksums (`send_summed`), sliced at odd offsets and sent
/// over a link without checksum offload, under loss (retransmissions re-cut the body at
/// new offsets): the receiver verifies every segment's checksum, so a wrong sum from the
/// prefix tables would show as drops and lost data.
#[test]
fn summed_bodies_carry_correct_checksums() {
    use rusty_stack::checksum::SummedBytes;

    struct Server {
        body: SummedBytes,
    }
    impl Handler for Server {
        type Conn = ();
        fn accept(&mut self, _: std::net::SocketAddr, _: std::net::SocketAddr) -> Option<()> {
            Some(())
        }
        fn connected(&mut self, conn: &mut Conn<'_, ()>) {
            // Odd-length, odd-offset pieces mixed with copied bytes.
            conn.send_summed(&self.body, 1..70_001).unwrap();
            conn.send(b"+").unwrap();
            conn.send_summed(&self.body, 70_001..self.body.len())
                .unwrap();
            conn.shutdown_write();
        }
        fn data(&mut self, _: &mut Conn<'_, ()>, data: &[u8]) -> usize {
            data.len()
        }
    }

    let body: Vec<u8> = (0..250_001u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    let mut want = body[1..70_001].to_vec();
    want.push(b'+');
    want.extend_from_slice(&body[70_001..]);
    let faults = FaultConfig::none().with_loss(0.03);
    let receiver = Sender::new(Vec::new());
    let mut net = SimPair::new(
        receiver,
        sim::engine_config(sim::CLIENT_IP, 9),
        Server {
            body: SummedBytes::new(bytes::Bytes::from(body), 1024),
        },
        sim::engine_config(SERVER_IP, 9),
        faults,
        faults,
        9,
    );
    net.server.listen(80, 16);
    net.client
        .connect(SocketAddr::from((SERVER_IP, 80)), ())
        .map_err(|(e, _)| e)
        .unwrap();
    assert!(net.run_until(Duration::from_secs(120), |n| n.client.handler().peer_closed));
    assert!(net.client.handler().received == want, "body differs");
    assert_eq!(net.client.stats().dropped(DropReason::BadTcpChecksum), 0);
    assert!(
        net.server.stats().retransmissions > 0,
        "loss exercised retransmission"
    );
}

/// With a device that does TSO (and transmit checksums), new data leaves as super-frames
/// of many full segments; the in-memory link hands them over whole, as GRO would, and
/// the stream arrives intact. Retransmissions stay single segments.
#[test]
fn tso_super_frames_carry_bulk_data() {
    use rusty_stack::io::{Capabilities, ChecksumOffload};
    use rusty_testkit::memory;

    let mut caps_a = Capabilities::new(sim::CLIENT_MAC, 1500);
    let mut caps_b = Capabilities::new(sim::SERVER_MAC, 1500);
    for caps in [&mut caps_a, &mut caps_b] {
        caps.tso_max = Some(65521);
        caps.tx_checksum = ChecksumOffload {
            ipv4: false,
            tcp: true,
        };
    }
    let (a, b) = memory::pair(caps_a, caps_b);
    let clock = VirtualClock::new();
    let payload = pattern(3 << 20, 7);
    let sender = Sender::new(payload.clone());
    let mut client = Engine::new(
        a,
        sender,
        clock.clone(),
        sim::engine_config(sim::CLIENT_IP, 11),
    );
    let mut server = Engine::new(
        b,
        Echo::default(),
        clock.clone(),
        sim::engine_config(SERVER_IP, 11),
    );
    server.listen(7, 16);
    client
        .connect(SocketAddr::from((SERVER_IP, 7)), ())
        .map_err(|(e, _)| e)
        .unwrap();
    for _ in 0..1_000_000 {
        let n = client.poll() + server.poll();
        if !client.handler().closed.is_empty() {
            break;
        }
        if n == 0 {
            clock.advance(Duration::from_millis(1));
        }
    }
    let h = client.handler();
    assert_eq!(h.closed, vec![CloseReason::Normal], "{}", client.stats());
    assert!(h.received == payload, "echo differs");
    // 3 MiB each way in far fewer frames than 1448-byte segments would need.
    let full_segments = (3 << 20) / 1448;
    assert!(
        client.stats().frames_out < full_segments as u64 / 4,
        "TSO not used: {} frames",
        client.stats().frames_out
    );
}
