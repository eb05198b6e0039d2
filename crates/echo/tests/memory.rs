//! The echo server's memory under steady load: a ping-pong client engine and the echo
//! handler on Rusty's engine, joined by the simulated link, on virtual time. Each
//! client connection sends a message of a random size (1 byte to 8 KiB), waits for
//! all of it to come back, pauses up to 20 ms and sends the next; a few connections
//! close after some messages and are replaced. The heap the test process holds is
//! sampled every simulated ten seconds (a counting global allocator) and must stop
//! growing once the load has warmed up.

use std::alloc::System;
use std::net::SocketAddr;
use std::time::Duration;

use rusty_echo::server::EchoServer;
use rusty_stack::{CloseReason, Conn, Handler, Opener};
use rusty_testkit::sim::{SimPair, SERVER_IP};
use stats_alloc::{StatsAlloc, INSTRUMENTED_SYSTEM};

#[global_allocator]
static HEAP: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

/// Bytes the process holds on the heap now (the counter books a reallocation's change
/// in size as allocated or deallocated bytes).
fn live_bytes() -> i64 {
    let s = HEAP.stats();
    s.bytes_allocated as i64 - s.bytes_deallocated as i64
}

const PORT: u16 = 7;
const KEEP_ALIVE: usize = 16;
const SHORT: usize = 4;
const MAX_MESSAGE: usize = 8 * 1024;

/// One client connection.
#[derive(Default)]
struct PingPong {
    /// Messages left before it closes; `None` keeps it open.
    left: Option<u32>,
    /// Bytes of the current message not yet queued, and not yet echoed back.
    to_send: usize,
    to_receive: usize,
}

struct Clients {
    rng: u64,
    message: Vec<u8>,
    echoed: u64,
    wrong: Vec<String>,
}

impl Clients {
    fn below(&mut self, n: u64) -> u64 {
        self.rng ^= self.rng << 13;
        self.rng ^= self.rng >> 7;
        self.rng ^= self.rng << 17;
        self.rng % n
    }

    fn start_message(&mut self, conn: &mut Conn<'_, PingPong>) {
        let len = 1 + self.below(MAX_MESSAGE as u64) as usize;
        let p = conn.state();
        p.to_send = len;
        p.to_receive = len;
        if let Some(n) = p.left.as_mut() {
            *n -= 1;
        }
        self.pump(conn);
    }

    fn pump(&mut self, conn: &mut Conn<'_, PingPong>) {
        let n = conn.state().to_send.min(self.message.len());
        let sent = conn.send(&self.message[..n]).unwrap_or(0);
        conn.state().to_send -= sent;
    }
}

impl Handler for Clients {
    type Conn = PingPong;

    fn accept(&mut self, _: std::net::SocketAddr, _: std::net::SocketAddr) -> Option<PingPong> {
        None
    }

    fn connected(&mut self, conn: &mut Conn<'_, PingPong>) {
        self.start_message(conn);
    }

    fn writable(&mut self, conn: &mut Conn<'_, PingPong>) {
        self.pump(conn);
    }

    fn data(&mut self, conn: &mut Conn<'_, PingPong>, data: &[u8]) -> usize {
        let p = conn.state();
        if data.len() > p.to_receive {
            self.wrong.push(format!(
                "{} bytes more than sent",
                data.len() - p.to_receive
            ));
        }
        p.to_receive = p.to_receive.saturating_sub(data.len());
        self.echoed += data.len() as u64;
        if p.to_receive == 0 {
            if p.left == Some(0) {
                conn.close();
            } else {
                match self.below(30) {
                    0..=9 => self.start_message(conn),
                    ms => conn.set_timer(Some(Duration::from_millis(ms - 9))),
                }
            }
        }
        data.len()
    }

    fn timer(&mut self, conn: &mut Conn<'_, PingPong>) {
        self.start_message(conn);
    }

    fn closed(&mut self, opener: &mut Opener<'_, PingPong>, p: PingPong, reason: CloseReason) {
        if p.left != Some(0) || reason != CloseReason::Normal {
            self.wrong.push(format!(
                "a connection ended early: {reason:?}, {:?} left",
                p.left
            ));
        }
        let next = PingPong {
            left: Some(5),
            ..PingPong::default()
        };
        opener.connect(SocketAddr::from((SERVER_IP, PORT)), next);
    }
}

#[test]
fn echo_heap_stays_flat_under_steady_ping_pong_load() {
    let clients = Clients {
        rng: 0x2545_f491_4f6c_dd1d,
        message: vec![b'e'; MAX_MESSAGE],
        echoed: 0,
        wrong: Vec::new(),
    };
    let mut net = SimPair::with_delay(
        clients,
        EchoServer::default(),
        Duration::from_micros(500),
        4,
    );
    net.server.listen(PORT, 128);
    for i in 0..KEEP_ALIVE + SHORT {
        let p = PingPong {
            left: (i >= KEEP_ALIVE).then_some(5),
            ..PingPong::default()
        };
        net.client
            .connect(SocketAddr::from((SERVER_IP, PORT)), p)
            .map_err(|(e, _)| e)
            .expect("connect");
    }

    let trend = rusty_testkit::heap_trend(&mut net, Duration::from_secs(10), 30, live_bytes);
    let clients = net.client.handler();
    assert!(
        clients.wrong.is_empty(),
        "{:?}",
        &clients.wrong[..clients.wrong.len().min(5)]
    );
    println!("{} bytes echoed\n{}", clients.echoed, trend.table());
    assert!(clients.echoed > 1 << 28, "{} bytes echoed", clients.echoed);
    // After TIME-WAIT and the wheel's far buckets have all been used once.
    if let Err(why) = trend.check_flat(Duration::from_secs(90), 256 * 1024) {
        panic!("{why}");
    }
}
