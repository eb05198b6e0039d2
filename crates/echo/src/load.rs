//! The load client's handler: N connections per worker against an echo server, in one
//! of the two standard modes, verifying every echoed byte.
//!
//! - **Ping-pong**: each connection sends one message and waits for its whole echo
//!   before sending the next; every round trip is a latency sample.
//! - **Streaming**: each connection sends as fast as the send buffer allows and reads
//!   the echo independently; messages are counted as `bytes / size`.
//!
//! Every connection's stream is a window onto one fixed pseudo-random block, at an
//! offset of its own, so verification is a slice comparison.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use rusty_stack::{CloseReason, Conn, ConnectError, Handler, Opener};

/// Length of the shared pattern block: a prime, so connections' windows do not line up.
pub const PATTERN_LEN: usize = 65_521;

/// How each connection loads the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Mode {
    /// One message in flight at a time: the next goes out once the whole echo of the
    /// last came back, and each round trip is a latency sample.
    PingPong,
    /// Send as fast as the send buffer allows, at most 1 MiB ahead of the echo, and
    /// read the echo independently; no latency samples.
    Stream,
}

/// What one worker's [`LoadClient`] does.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct LoadConfig {
    /// The echo server's address.
    pub target: SocketAddr,
    /// Ping-pong or streaming.
    pub mode: Mode,
    /// Connections for this worker.
    pub connections: usize,
    /// Message size in bytes: what one ping-pong round trip carries, and the unit in
    /// which streamed bytes are counted as messages.
    pub size: usize,
    /// How long connections keep sending, by the wall clock from the worker's first
    /// poll; then each waits for the rest of its echo and closes.
    pub duration: Duration,
}

impl LoadConfig {
    /// Load of kind `mode` on the echo server at `target`: what `echo-load` does by
    /// default, 100 connections of 64-byte messages for 10 seconds.
    pub fn new(target: SocketAddr, mode: Mode) -> LoadConfig {
        LoadConfig {
            target,
            mode,
            connections: 100,
            size: 64,
            duration: Duration::from_secs(10),
        }
    }
}

/// What one worker measured.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Report {
    /// Messages whose whole echo came back.
    pub messages: u64,
    /// Echoed bytes received and verified.
    pub bytes: u64,
    /// Round-trip time of each ping-pong message, in microseconds (1 µs to 60 s);
    /// empty when streaming.
    pub latency_us: Histogram<u64>,
    /// Connections that ended other than normally, or never started.
    pub failed: u64,
    /// Echoed bytes that differed from what was sent.
    pub mismatches: u64,
    /// From the start of the run until its last connection ended; a merged report
    /// keeps the longest.
    pub elapsed: Duration,
}

impl Report {
    fn new() -> Report {
        Report {
            messages: 0,
            bytes: 0,
            latency_us: Histogram::new_with_bounds(1, 60_000_000, 3).expect("valid bounds"),
            failed: 0,
            mismatches: 0,
            elapsed: Duration::ZERO,
        }
    }

    /// Add another worker's report.
    pub fn merge(&mut self, other: &Report) {
        self.messages += other.messages;
        self.bytes += other.bytes;
        self.failed += other.failed;
        self.mismatches += other.mismatches;
        self.elapsed = self.elapsed.max(other.elapsed);
        let _ = self.latency_us.add(&other.latency_us);
    }

    /// A report with nothing counted yet, to merge workers' reports into.
    pub fn empty() -> Report {
        Report::new()
    }
}

/// Where workers leave their reports, and how the last one to finish says so.
#[derive(Clone, Default)]
pub struct Collector {
    reports: Arc<Mutex<Vec<Report>>>,
    finished: Arc<AtomicUsize>,
}

impl Collector {
    /// A collector with no reports; give each worker a clone.
    pub fn new() -> Collector {
        Collector::default()
    }
    /// Workers that have finished their run.
    pub fn finished(&self) -> usize {
        self.finished.load(Ordering::Acquire)
    }
    /// A worker's final report: counted as finished.
    pub fn report(&self, report: Report) {
        self.reports
            .lock()
            .expect("no poisoned collector")
            .push(report);
        self.finished.fetch_add(1, Ordering::AcqRel);
    }
    /// All reports merged.
    pub fn total(&self) -> Report {
        let mut total = Report::new();
        for r in self.reports.lock().expect("no poisoned collector").iter() {
            total.merge(r);
        }
        total
    }
}

/// A load run's bookkeeping, shared by the load clients (`echo-load`'s and the
/// WebSocket crate's): when it started, the connections still open, the report and
/// where it goes when the run is over.
pub struct Run {
    /// What this worker measured so far.
    pub report: Report,
    duration: Duration,
    started: Option<Instant>,
    open: usize,
    done: bool,
    collector: Collector,
}

impl Run {
    /// A run of `duration` whose report goes to `collector`; the clock starts at
    /// [`Run::start`].
    pub fn new(duration: Duration, collector: Collector) -> Run {
        Run {
            report: Report::new(),
            duration,
            started: None,
            open: 0,
            done: false,
            collector,
        }
    }

    /// Starts the clock; true on the first call only (the caller then opens its
    /// connections, counting each with [`Run::opened`]).
    pub fn start(&mut self) -> bool {
        let first = self.started.is_none();
        if first {
            self.started = Some(Instant::now());
        }
        first
    }

    /// A connection was opened.
    pub fn opened(&mut self) {
        self.open += 1;
    }

    /// The run's duration is over: connections stop sending.
    pub fn expired(&self) -> bool {
        self.started.is_some_and(|t| t.elapsed() >= self.duration)
    }

    /// A connection ended (`failed`: other than by a clean close).
    pub fn closed(&mut self, failed: bool) {
        self.open -= 1;
        if failed {
            self.report.failed += 1;
        }
        self.finish_if_done();
    }

    /// Reports once every connection has ended: after the duration, or earlier when
    /// they all failed (nothing more would happen).
    pub fn finish_if_done(&mut self) {
        if self.open == 0 && !self.done {
            if let Some(t) = self.started {
                self.done = true;
                self.report.elapsed = t.elapsed();
                self.collector.report(self.report.clone());
            }
        }
    }
}

/// The block every connection's stream is a window onto: [`PATTERN_LEN`] fixed
/// pseudo-random bytes.
pub fn pattern() -> Arc<Vec<u8>> {
    let mut x: u64 = 0x243f_6a88_85a3_08d3;
    Arc::new(
        (0..PATTERN_LEN)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                (x >> 24) as u8
            })
            .collect(),
    )
}

/// Per-connection state.
#[derive(Debug)]
pub struct LoadConn {
    /// Stream position where this connection's pattern window starts.
    base: usize,
    sent: u64,
    received: u64,
    /// Ping-pong: when the outstanding message went out.
    sent_at: Option<Instant>,
    stopping: bool,
}

/// The load client's handler for one worker: on its first poll it opens its
/// connections to the target, loads them as [`LoadConfig::mode`] says for the run's
/// duration, verifies every echoed byte, and reports to the [`Collector`] once they
/// have all ended.
pub struct LoadClient {
    cfg: LoadConfig,
    pattern: Arc<Vec<u8>>,
    /// Index of this worker's first connection among all workers'.
    first: usize,
    run: Run,
}

impl LoadClient {
    /// The handler of worker `worker` (its index, which gives its connections their
    /// own windows onto the pattern) for `cfg`, reporting into `collector`.
    pub fn new(cfg: LoadConfig, worker: usize, collector: Collector) -> LoadClient {
        LoadClient {
            first: worker * cfg.connections,
            run: Run::new(cfg.duration, collector),
            cfg,
            pattern: pattern(),
        }
    }

    /// The pattern bytes at stream positions `[from, from + len)` of a connection.
    fn chunk(&self, base: usize, from: u64, len: usize) -> &[u8] {
        let start = (base + (from % PATTERN_LEN as u64) as usize) % PATTERN_LEN;
        let len = len.min(PATTERN_LEN - start);
        &self.pattern[start..start + len]
    }

    fn send_more(&mut self, conn: &mut Conn<'_, LoadConn>) {
        let size = self.cfg.size as u64;
        loop {
            let (base, sent, received) = {
                let st = conn.state();
                (st.base, st.sent, st.received)
            };
            let limit = match self.cfg.mode {
                // One message in flight at a time.
                Mode::PingPong => received + size,
                // Keep the pipe full, but never run more than a window ahead of the echo.
                Mode::Stream => received + (1 << 20),
            };
            if sent >= limit {
                return;
            }
            let want = (limit - sent).min(size - sent % size) as usize;
            let n = match conn.send(self.chunk(base, sent, want)) {
                Ok(n) => n,
                Err(_) => return,
            };
            let st = conn.state();
            if sent % size == 0 && n > 0 && self.cfg.mode == Mode::PingPong {
                st.sent_at = Some(Instant::now());
            }
            st.sent += n as u64;
            if n < want {
                return;
            }
        }
    }
}

impl Handler for LoadClient {
    type Conn = LoadConn;

    fn accept(&mut self, _: std::net::SocketAddr, _: std::net::SocketAddr) -> Option<LoadConn> {
        None
    }

    fn poll(&mut self, opener: &mut Opener<'_, LoadConn>) {
        if self.run.start() {
            for i in 0..self.cfg.connections {
                let id = self.first + i;
                opener.connect(
                    self.cfg.target,
                    LoadConn {
                        base: id.wrapping_mul(7919) % PATTERN_LEN,
                        sent: 0,
                        received: 0,
                        sent_at: None,
                        stopping: false,
                    },
                );
                self.run.opened();
            }
        }
        self.run.finish_if_done();
    }

    fn connected(&mut self, conn: &mut Conn<'_, LoadConn>) {
        self.send_more(conn);
    }

    fn writable(&mut self, conn: &mut Conn<'_, LoadConn>) {
        if !conn.state().stopping {
            self.send_more(conn);
        }
    }

    fn data(&mut self, conn: &mut Conn<'_, LoadConn>, data: &[u8]) -> usize {
        let size = self.cfg.size as u64;
        let (base, received) = {
            let st = conn.state();
            (st.base, st.received)
        };
        // Verify against the pattern, piece by piece (the window may wrap).
        let mut off = 0;
        while off < data.len() {
            let expect = self.chunk(base, received + off as u64, data.len() - off);
            let got = &data[off..off + expect.len()];
            if got != expect {
                self.run.report.mismatches += 1;
                conn.abort();
                return data.len();
            }
            off += expect.len();
        }
        let before = received;
        let after = received + data.len() as u64;
        conn.state().received = after;
        self.run.report.bytes += data.len() as u64;
        let completed = after / size - before / size;
        self.run.report.messages += completed;
        if completed > 0 && self.cfg.mode == Mode::PingPong {
            if let Some(t) = conn.state().sent_at.take() {
                let us = t.elapsed().as_micros().max(1) as u64;
                let _ = self.run.report.latency_us.record(us.min(60_000_000));
            }
        }
        let expired = self.run.expired();
        let st = conn.state();
        if expired && !st.stopping {
            st.stopping = true;
        }
        if st.stopping {
            if st.received >= st.sent {
                // Everything we sent came back: finish with a graceful close.
                conn.close();
            }
        } else {
            self.send_more(conn);
        }
        data.len()
    }

    fn peer_closed(&mut self, conn: &mut Conn<'_, LoadConn>) {
        let st = conn.state();
        if st.received < st.sent {
            // The server closed before echoing everything.
            self.run.report.mismatches += 1;
        }
        conn.close();
    }

    fn closed(&mut self, _: &mut Opener<'_, LoadConn>, _: LoadConn, reason: CloseReason) {
        self.run.closed(reason != CloseReason::Normal);
    }

    fn connect_failed(
        &mut self,
        _: &mut Opener<'_, LoadConn>,
        _: SocketAddr,
        _: LoadConn,
        _: ConnectError,
    ) {
        self.run.closed(true);
    }
}
