//! Helpers shared by the kernel-backend tests: a runtime of kernel workers on loopback,
//! patient clients, a shared event log, random bytes.

#![allow(dead_code)]

use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use rusty_kernel::{kernel_worker, KernelConfig};
use rusty_runtime::{run, RuntimeConfig, StopHandle, Worker, WorkerContext};
use rusty_stack::{Handler, Stats};

/// A loopback port nobody listens on right now.
pub(crate) fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

pub(crate) fn loopback(port: u16) -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], port))
}

/// A running runtime of kernel workers.
pub(crate) struct Server {
    pub addr: SocketAddr,
    pub stop: StopHandle,
    pub thread: JoinHandle<Vec<Stats>>,
}

impl Server {
    /// Stop gracefully and return the summed counters and how long stopping took.
    pub(crate) fn stop(self) -> (Stats, Duration) {
        let t = Instant::now();
        self.stop.stop();
        let per_worker = self.thread.join().unwrap();
        let mut total = Stats::default();
        for s in &per_worker {
            total.accumulate(s);
        }
        (total, t.elapsed())
    }
}

/// Start `workers` kernel workers listening on a fresh loopback port (unless `listen` is
/// false), each with a handler from `make`.
pub(crate) fn start<H, F>(
    workers: usize,
    grace: Duration,
    listen: bool,
    cfg: KernelConfig,
    make: F,
) -> Server
where
    H: Handler + rusty_runtime::metrics::AppMetrics + 'static,
    F: Fn(&WorkerContext) -> H + Clone + Send + 'static,
{
    let rcfg = {
        let mut c = RuntimeConfig::default();
        c.oversubscribe = true;
        c.handle_signals = false;
        c.grace = grace;
        c
    };
    start_with(workers, rcfg, listen, cfg, make)
}

/// [`start`] with a runtime configuration of the caller's.
pub(crate) fn start_with<H, F>(
    workers: usize,
    rcfg: RuntimeConfig,
    listen: bool,
    cfg: KernelConfig,
    make: F,
) -> Server
where
    H: Handler + rusty_runtime::metrics::AppMetrics + 'static,
    F: Fn(&WorkerContext) -> H + Clone + Send + 'static,
{
    let addr = loopback(free_port());
    let mut cfg = cfg;
    if listen {
        cfg.listen = vec![(addr, 1024)];
        cfg.check_listen().unwrap();
    }
    let stop = StopHandle::new();
    let ws: Vec<Worker> = (0..workers)
        .map(|i| {
            let make = make.clone();
            Worker::new(
                format!("kernel{i}"),
                0,
                Box::new(kernel_worker(cfg.clone(), move |ctx: &WorkerContext| {
                    make(ctx)
                })),
            )
        })
        .collect();
    let s = stop.clone();
    let thread = thread::spawn(move || run(ws, &rcfg, &s).unwrap());
    Server { addr, stop, thread }
}

/// Connect, retrying while the workers are still starting.
pub(crate) fn connect(addr: SocketAddr) -> TcpStream {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        match TcpStream::connect(addr) {
            Ok(s) => {
                s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
                s.set_write_timeout(Some(Duration::from_secs(30))).unwrap();
                return s;
            }
            Err(e) if Instant::now() < deadline => {
                let _ = e;
                thread::sleep(Duration::from_millis(10));
            }
            Err(e) => panic!("cannot connect to {addr}: {e}"),
        }
    }
}

/// Send `data` from a second thread while reading everything back until EOF, starting
/// to read after `read_delay` (so the echo backs up into the server).
pub(crate) fn echo_round(
    stream: TcpStream,
    data: Vec<u8>,
    read_delay: Duration,
) -> io::Result<Vec<u8>> {
    let mut writer = stream.try_clone()?;
    let w = thread::spawn(move || -> io::Result<()> {
        writer.write_all(&data)?;
        writer.shutdown(Shutdown::Write)
    });
    let mut reader = stream;
    thread::sleep(read_delay);
    let mut out = Vec::new();
    reader.read_to_end(&mut out)?;
    w.join().unwrap()?;
    Ok(out)
}

/// A log the handlers on all workers append to.
#[derive(Clone, Default)]
pub(crate) struct Log(pub Arc<Mutex<Vec<String>>>);

impl Log {
    pub(crate) fn push(&self, s: impl Into<String>) {
        self.0.lock().unwrap().push(s.into());
    }
    pub(crate) fn snapshot(&self) -> Vec<String> {
        self.0.lock().unwrap().clone()
    }
    /// Wait until `pred` holds for the log (at most 10 s).
    pub(crate) fn wait_for(&self, what: &str, pred: impl Fn(&[String]) -> bool) -> Vec<String> {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let snap = self.snapshot();
            if pred(&snap) {
                return snap;
            }
            assert!(
                Instant::now() < deadline,
                "timed out waiting for {what}: {snap:?}"
            );
            thread::sleep(Duration::from_millis(5));
        }
    }
}

/// Deterministic pseudo-random bytes (xorshift64*).
pub(crate) struct Rng(pub u64);

impl Rng {
    pub(crate) fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    pub(crate) fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }
    pub(crate) fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.next_u64() as u8).collect()
    }
}
