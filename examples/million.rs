//! A million idle connections on one server engine: its limits are configuration, not
//! walls.
//!
//! One client engine and one server engine on one thread, joined by the in-memory link,
//! on virtual time. The server listens on enough ports for one client address to reach
//! N connections (one 4-tuple per client port and server port: 64,512 client ports per
//! server port with the range widened to 1024..=65535), and the client opens N
//! connections spread over them, in batches, turning both engines in between. Then it
//! reports how many were established, the wall time, and the heap the connections
//! hold, counted by a global allocator that tracks live bytes.
//!
//! Heap is reported three ways: the whole process per connection (both engines), the
//! server's share (bytes allocated, less bytes freed, while the server engine was being
//! built or was taking a turn: its tables and its connections; the few frame buffers
//! that cross the link are counted where they were allocated), and what the second half
//! of the connections added to the server (no start-up cost in it).
//!
//! Usage: `cargo run --release --example million [N=1000000] [reserve|grow]`.
//! `reserve` (the default) sets `reserved_connections` to N so the tables never move;
//! `grow` leaves the default and lets them double.

use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use rusty::io::Capabilities;
use rusty::time::VirtualClock;
use rusty::{Conn, Engine, EngineConfig, Handler};
use rusty_testkit::memory::{self, MemoryLink};
use rusty_testkit::sim::{self, CLIENT_IP, CLIENT_MAC, SERVER_IP, SERVER_MAC};

/// The heap counters: a global allocator that passes every call to the system's and
/// keeps the live byte count, for the whole process and for the server's share.
/// Implementing `GlobalAlloc` takes `unsafe`; it is fenced in here (the workspace denies
/// it elsewhere outside the drivers' `sys` modules).
#[allow(unsafe_code)]
mod counting {
    use std::alloc::{GlobalAlloc, Layout, System};
    use std::sync::atomic::{AtomicBool, AtomicIsize, Ordering};

    /// Live heap bytes of the whole process.
    pub(crate) static LIVE: AtomicIsize = AtomicIsize::new(0);
    /// Live heap bytes allocated (less freed) while `IN_SERVER` was set.
    pub(crate) static SERVER: AtomicIsize = AtomicIsize::new(0);
    pub(crate) static IN_SERVER: AtomicBool = AtomicBool::new(false);

    /// The system allocator, counting live bytes.
    struct Counting;

    fn add(bytes: usize, sign: isize) {
        let delta = sign * bytes as isize;
        LIVE.fetch_add(delta, Ordering::Relaxed);
        if IN_SERVER.load(Ordering::Relaxed) {
            SERVER.fetch_add(delta, Ordering::Relaxed);
        }
    }

    // SAFETY: every call is passed straight to `System`, which upholds the contract; the
    // counters only observe sizes.
    unsafe impl GlobalAlloc for Counting {
        unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
            // SAFETY: the caller's layout, passed on unchanged.
            let p = unsafe { System.alloc(layout) };
            if !p.is_null() {
                add(layout.size(), 1);
            }
            p
        }
        unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
            // SAFETY: as for `alloc`.
            let p = unsafe { System.alloc_zeroed(layout) };
            if !p.is_null() {
                add(layout.size(), 1);
            }
            p
        }
        unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
            add(layout.size(), -1);
            // SAFETY: `ptr` came from this allocator with `layout`.
            unsafe { System.dealloc(ptr, layout) }
        }
        unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
            // SAFETY: `ptr` came from this allocator with `layout`; `new_size` is the
            // caller's.
            let p = unsafe { System.realloc(ptr, layout, new_size) };
            if !p.is_null() {
                add(layout.size(), -1);
                add(new_size, 1);
            }
            p
        }
    }

    #[global_allocator]
    static ALLOC: Counting = Counting;
}

use counting::{IN_SERVER, LIVE, SERVER};

/// Run `f` with the server's allocations counted as such.
fn as_server<R>(f: impl FnOnce() -> R) -> R {
    IN_SERVER.store(true, Ordering::Relaxed);
    let r = f();
    IN_SERVER.store(false, Ordering::Relaxed);
    r
}

/// Client ports per server port: the range 1024..=65535.
const CLIENT_PORTS: std::ops::RangeInclusive<u16> = 1024..=65535;
/// The first listening port; the others follow it.
const FIRST_SERVER_PORT: u16 = 10000;
/// Connects started between two runs of the engines.
const BATCH: usize = 8192;
/// Loop turns in a row with no frame moving after which the run is declared stuck.
const STALL_TURNS: u32 = 1000;

/// The client: counts its established connections; they stay idle.
#[derive(Default)]
struct Client {
    connected: usize,
    failed: usize,
}

impl Handler for Client {
    type Conn = ();
    fn accept(&mut self, _: std::net::SocketAddr, _: std::net::SocketAddr) -> Option<()> {
        None
    }
    fn connected(&mut self, _: &mut Conn<'_, ()>) {
        self.connected += 1;
    }
    fn data(&mut self, _: &mut Conn<'_, ()>, data: &[u8]) -> usize {
        data.len()
    }
    fn closed(&mut self, _: &mut rusty::Opener<'_, ()>, _: (), _: rusty::CloseReason) {
        self.failed += 1;
    }
}

/// The server: accepts everything and keeps no state of its own.
struct Server;

impl Handler for Server {
    type Conn = ();
    fn accept(&mut self, _: std::net::SocketAddr, _: std::net::SocketAddr) -> Option<()> {
        Some(())
    }
    fn data(&mut self, _: &mut Conn<'_, ()>, data: &[u8]) -> usize {
        data.len()
    }
}

struct Pair {
    clock: VirtualClock,
    client: Engine<MemoryLink, Client, VirtualClock>,
    server: Engine<MemoryLink, Server, VirtualClock>,
}

impl Pair {
    /// Loop turns, 1 µs of virtual time each, until `done` or nothing moves for a while.
    fn turn_until(&mut self, mut done: impl FnMut(&Pair) -> bool) -> bool {
        let mut idle = 0;
        while !done(self) {
            let moved = self.client.poll() + as_server(|| self.server.poll());
            self.clock.advance(Duration::from_micros(1));
            idle = if moved == 0 { idle + 1 } else { 0 };
            if idle >= STALL_TURNS {
                return false;
            }
        }
        true
    }

    /// Let a few seconds of virtual time pass, so that the handshake's timers (now
    /// stale) fire and leave the wheels: what is left is what idle connections hold.
    fn settle(&mut self) {
        for _ in 0..5 {
            self.clock.advance(Duration::from_secs(1));
            self.client.poll();
            as_server(|| self.server.poll());
        }
    }

    fn describe(&self) -> String {
        format!(
            "client {} connected {} failed; {}\nserver {} connections; {}",
            self.client.handler().connected,
            self.client.handler().failed,
            self.client.stats(),
            self.server.connection_count(),
            self.server.stats()
        )
    }
}

/// Both engines' configuration for `n` connections.
fn config(ip: std::net::Ipv4Addr, n: usize, reserve: bool) -> EngineConfig {
    let mut cfg = sim::engine_config(ip, 1);
    cfg.max_connections = n;
    if reserve {
        cfg.reserved_connections = n;
    }
    cfg.max_time_wait = n;
    cfg.ephemeral_ports = CLIENT_PORTS;
    cfg
}

fn arg(index: usize) -> Option<String> {
    std::env::args().nth(index)
}

fn mib(bytes: isize) -> f64 {
    bytes as f64 / f64::from(1 << 20)
}

fn run() -> Result<(), String> {
    let n: usize = match arg(1) {
        None => 1_000_000,
        Some(s) => s
            .replace('_', "")
            .parse()
            .map_err(|e| format!("N ({s:?}): {e}"))?,
    };
    let reserve = match arg(2).as_deref() {
        None | Some("reserve") => true,
        Some("grow") => false,
        Some(other) => return Err(format!("unknown mode {other:?} (reserve or grow)")),
    };
    if n < 2 {
        return Err("N must be at least 2".into());
    }
    let per_server_port = usize::from(CLIENT_PORTS.end() - CLIENT_PORTS.start()) + 1;
    let server_ports = n.div_ceil(per_server_port);
    let before = LIVE.load(Ordering::Relaxed);

    let start = Instant::now();
    let clock = VirtualClock::new();
    let (a, b) = memory::pair(
        Capabilities::new(CLIENT_MAC, 1500),
        Capabilities::new(SERVER_MAC, 1500),
    );
    // A batch of SYNs, SYN-ACKs and ACKs crosses the link in one turn of each engine.
    a.set_in_flight_limit(4 * BATCH);
    b.set_in_flight_limit(4 * BATCH);
    let client = Engine::new(
        a,
        Client::default(),
        clock.clone(),
        config(CLIENT_IP, n, reserve),
    );
    let server = as_server(|| {
        let mut server = Engine::new(b, Server, clock.clone(), config(SERVER_IP, n, reserve));
        for i in 0..server_ports {
            server.listen(FIRST_SERVER_PORT + i as u16, BATCH);
        }
        server
    });
    let mut pair = Pair {
        clock,
        client,
        server,
    };
    let empty = (LIVE.load(Ordering::Relaxed), SERVER.load(Ordering::Relaxed));

    let mut opened = 0;
    let mut half = None;
    while opened < n {
        let batch = if opened == 0 {
            1
        } else {
            BATCH.min(n - opened)
        };
        for _ in 0..batch {
            let port = FIRST_SERVER_PORT + (opened % server_ports) as u16;
            pair.client
                .connect(SocketAddr::from((SERVER_IP, port)), ())
                .map_err(|(e, _)| format!("connect {opened}: {e}\n{}", pair.describe()))?;
            opened += 1;
        }
        if !pair.turn_until(|p| p.client.handler().connected + p.client.handler().failed == opened)
        {
            return Err(format!("stuck at {opened} opened\n{}", pair.describe()));
        }
        if half.is_none() && opened >= n / 2 {
            pair.settle();
            half = Some((
                opened,
                LIVE.load(Ordering::Relaxed),
                SERVER.load(Ordering::Relaxed),
            ));
        }
    }
    if !pair.turn_until(|p| p.server.connection_count() == p.client.handler().connected) {
        return Err(format!("server behind\n{}", pair.describe()));
    }
    let elapsed = start.elapsed();
    pair.settle();
    let (live, server) = (LIVE.load(Ordering::Relaxed), SERVER.load(Ordering::Relaxed));
    let established = pair.server.connection_count();
    let (half_n, half_live, half_server) = half.expect("passed N/2");

    let per = |bytes: isize, conns: usize| bytes as f64 / conns.max(1) as f64;
    println!(
        "connections {established} of {n} (client failures {}) over {server_ports} server ports, \
         reserved tables {reserve}",
        pair.client.handler().failed
    );
    println!(
        "wall time {:.2} s ({:.0} connections/s, both engines on one thread)",
        elapsed.as_secs_f64(),
        established as f64 / elapsed.as_secs_f64()
    );
    println!(
        "heap, both engines: {:.1} MiB = {:.0} bytes per connection ({:.1} MiB of it before \
         the first connection)",
        mib(live - before),
        per(live - before, established),
        mib(empty.0 - before)
    );
    println!(
        "heap, server engine: {:.1} MiB = {:.0} bytes per idle connection ({:.1} MiB of it \
         before the first connection)",
        mib(server),
        per(server, established),
        mib(empty.1)
    );
    println!(
        "heap the second {} connections added: server {:.0} bytes each, both engines {:.0}",
        established - half_n,
        per(server - half_server, established - half_n),
        per(live - half_live, established - half_n)
    );
    if established != n {
        return Err(format!("only {established} of {n}\n{}", pair.describe()));
    }
    Ok(())
}

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("million: {e}");
            ExitCode::FAILURE
        }
    }
}
