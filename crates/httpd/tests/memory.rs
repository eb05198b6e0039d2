//! httpd's memory under steady load: an HTTP client engine and httpd's handler on
//! Rusty's engine, joined by the simulated link, on virtual time. The clients ask for
//! pages of many sizes over keep-alive connections, some with a range, some on short
//! connections that close after a few requests, each pausing a little between
//! requests as browsers do. The heap the test process holds is sampled every
//! simulated ten seconds (a counting global allocator) and must stop growing once the
//! load has warmed up.
//!
//! Five simulated minutes: long enough for every far bucket of the engine's timer
//! wheel (262 s) and TIME-WAIT (60 s) to have filled, so a store that grows with the
//! number of requests served shows as growth, while bounded pools do not.

use std::alloc::System;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use rusty_httpd::{Cache, HttpConfig, HttpServer};
use rusty_stack::{CloseReason, Conn, Handler, Opener};
use rusty_testkit::sim::{SimPair, SERVER_IP};
use stats_alloc::{StatsAlloc, INSTRUMENTED_SYSTEM};

#[global_allocator]
static HEAP: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

mod common;

/// Bytes the process holds on the heap now (the counter books a reallocation's change
/// in size as allocated or deallocated bytes).
fn live_bytes() -> i64 {
    let s = HEAP.stats();
    s.bytes_allocated as i64 - s.bytes_deallocated as i64
}

const PAGES: usize = 60;
const PORT: u16 = 80;
/// Keep-alive connections open all the time, plus short ones.
const KEEP_ALIVE: usize = 16;
const SHORT: usize = 4;

/// Page sizes from 1 byte to 300 KB, spread over the orders of magnitude (log-uniform).
fn page_size(i: usize) -> usize {
    let exp = 5.5 * i as f64 / (PAGES - 1) as f64;
    (10f64.powf(exp) as usize).clamp(1, 300_000)
}

/// A small xorshift generator: the client's choices, the same every run.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

/// One client connection: what it still expects of the response in progress.
#[derive(Default)]
struct Exchange {
    /// Requests left before it closes; `None` keeps it alive.
    left: Option<u32>,
    /// The response head read so far (until its blank line).
    head: Vec<u8>,
    /// Body bytes still to come; `None` while the head is being read.
    body_left: Option<usize>,
    /// The status the current request must get.
    expect: u16,
}

/// Keeps `KEEP_ALIVE` keep-alive and `SHORT` short connections busy.
struct Browsers {
    rng: Rng,
    responses: u64,
    wrong: Vec<String>,
}

impl Browsers {
    fn ask(&mut self, conn: &mut Conn<'_, Exchange>) {
        let page = self.rng.below(PAGES as u64);
        let ranged = self.rng.below(8) == 0 && page_size(page as usize) > 10;
        let ex = conn.state();
        let last = ex.left.is_some_and(|n| n <= 1);
        if let Some(n) = ex.left.as_mut() {
            *n = n.saturating_sub(1);
        }
        ex.expect = if ranged { 206 } else { 200 };
        let request = format!(
            "GET /p{page}.html HTTP/1.1\r\nHost: sim\r\n{}{}\r\n",
            if ranged { "Range: bytes=3-9\r\n" } else { "" },
            if last { "Connection: close\r\n" } else { "" },
        );
        if conn.send(request.as_bytes()) != Ok(request.len()) {
            self.wrong
                .push("a request did not fit the send buffer".into());
        }
    }

    fn open(opener: &mut Opener<'_, Exchange>, short: bool) {
        let left = short.then_some(3);
        let ex = Exchange {
            left,
            ..Exchange::default()
        };
        opener.connect(SocketAddr::from((SERVER_IP, PORT)), ex);
    }

    /// Reads `data` into the response in progress; true when it is complete.
    fn read(&mut self, ex: &mut Exchange, mut data: &[u8]) -> bool {
        if ex.body_left.is_none() {
            let before = ex.head.len();
            ex.head.extend_from_slice(&data[..data.len().min(4096)]);
            let Some(end) = ex.head.windows(4).position(|w| w == b"\r\n\r\n") else {
                return false;
            };
            let head = String::from_utf8_lossy(&ex.head[..end]).into_owned();
            // What follows the head in `data` is body.
            data = &data[end + 4 - before..];
            ex.head.clear();
            let status: u16 = head
                .get(9..12)
                .and_then(|s| s.parse().ok())
                .unwrap_or_default();
            if status != ex.expect {
                self.wrong
                    .push(format!("expected {}, got: {head}", ex.expect));
            }
            let len = head
                .lines()
                .find_map(|l| l.strip_prefix("Content-Length: "))
                .and_then(|v| v.trim().parse().ok())
                .unwrap_or(0);
            ex.body_left = Some(len);
        }
        let left = ex.body_left.as_mut().expect("the head was read");
        *left = left.saturating_sub(data.len());
        if *left > 0 {
            return false;
        }
        ex.body_left = None;
        self.responses += 1;
        true
    }
}

impl Handler for Browsers {
    type Conn = Exchange;

    fn accept(&mut self, _: std::net::SocketAddr, _: std::net::SocketAddr) -> Option<Exchange> {
        None
    }

    fn connected(&mut self, conn: &mut Conn<'_, Exchange>) {
        self.ask(conn);
    }

    fn data(&mut self, conn: &mut Conn<'_, Exchange>, data: &[u8]) -> usize {
        let mut ex = std::mem::take(conn.state());
        let complete = self.read(&mut ex, data);
        let done = ex.left == Some(0);
        *conn.state() = ex;
        if complete && !done {
            // A pause between requests, up to 20 ms; none a third of the time.
            match self.rng.below(30) {
                0..=9 => self.ask(conn),
                ms => conn.set_timer(Some(Duration::from_millis(ms - 9))),
            }
        }
        data.len()
    }

    fn timer(&mut self, conn: &mut Conn<'_, Exchange>) {
        self.ask(conn);
    }

    fn peer_closed(&mut self, conn: &mut Conn<'_, Exchange>) {
        conn.close();
    }

    fn closed(&mut self, opener: &mut Opener<'_, Exchange>, ex: Exchange, reason: CloseReason) {
        if ex.left != Some(0) || reason != CloseReason::Normal {
            self.wrong.push(format!(
                "a connection ended early: {reason:?}, {:?} left",
                ex.left
            ));
        }
        // Another in its place.
        Browsers::open(opener, ex.left.is_some());
    }
}

#[test]
fn httpd_heap_stays_flat_under_steady_keep_alive_load() {
    let scratch = common::Scratch::new("memory");
    for i in 0..PAGES {
        let body = common::noise(page_size(i), i as u64 + 1);
        std::fs::write(scratch.0.join(format!("p{i}.html")), body).expect("page");
    }
    let cache = Arc::new(Cache::load(&scratch.0).expect("site"));
    let server = HttpServer::new(cache, HttpConfig::default());
    let browsers = Browsers {
        rng: Rng(0x9e37_79b9_7f4a_7c15),
        responses: 0,
        wrong: Vec::new(),
    };
    let mut net = SimPair::with_delay(browsers, server, Duration::from_micros(500), 3);
    net.server.listen(PORT, 128);
    for i in 0..KEEP_ALIVE + SHORT {
        let ex = Exchange {
            left: (i >= KEEP_ALIVE).then_some(3),
            ..Exchange::default()
        };
        net.client
            .connect(SocketAddr::from((SERVER_IP, PORT)), ex)
            .map_err(|(e, _)| e)
            .expect("connect");
    }

    let trend = rusty_testkit::heap_trend(&mut net, Duration::from_secs(10), 30, live_bytes);
    let client = net.client.handler();
    assert!(
        client.wrong.is_empty(),
        "{:?}",
        &client.wrong[..client.wrong.len().min(5)]
    );
    println!("{} responses\n{}", client.responses, trend.table());
    assert!(client.responses > 100_000, "{} responses", client.responses);
    // After TIME-WAIT and the wheel's far buckets have all been used once.
    if let Err(why) = trend.check_flat(Duration::from_secs(90), 256 * 1024) {
        panic!("{why}");
    }
}
