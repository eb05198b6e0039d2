//! The soak's own clients, which run beside wrk's keep-alive load: threads of this
//! process, each moved into the run's network namespace (`setns` on the thread, see
//! [`crate::sys::enter_netns`]) before it opens a socket, so that they reach httpd
//! where wrk does and report to the same process that samples and judges the run.
//!
//! - short: one request per connection (`Connection: close`), a random page, its body
//!   checked and the server's close awaited;
//! - range: `Range: bytes=a-b` on random pages over keep-alive connections (50
//!   requests each), the 206's `Content-Range` and body checked against the file;
//! - slow: a page of 100 KB or more read 512 bytes at a time with pauses of 5 to 15 ms,
//!   through a 4 KiB receive buffer, checked whole;
//! - vanish: connect and go, never reading: in turn close at once, send half a request
//!   and close (FIN) or reset (RST: `SO_LINGER` 0), send a whole request for a large
//!   page and close at once or reset 2 ms later.
//!
//! Every loop stops by itself at the end of the run, after at most [`Plan::max_count`]
//! rounds, or when told to stop. Every request has a deadline ([`REQUEST_DEADLINE`],
//! [`SLOW_DEADLINE`]), and no single read or write may block longer than it either. A
//! request that does not succeed in time is counted under its [`Failure`]; one that
//! does, with the longest any of its reads waited for bytes, so that a stall within
//! the deadline still shows.

use std::fs;
use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use super::http::{self, fail, io_fail, Fail, Failure, Pace};
use crate::common::Result;
use crate::pages::Rng;

const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// Longest a request may take from connect to its last byte.
const REQUEST_DEADLINE: Duration = Duration::from_secs(20);
/// The same for a slow reader.
const SLOW_DEADLINE: Duration = Duration::from_secs(60);
/// Requests a range client sends on one connection before opening another.
const RANGE_REQUESTS_PER_CONNECTION: u32 = 50;
/// Smallest page a slow reader asks for.
const SLOW_MIN_BYTES: usize = 100_000;
/// The receive buffer a slow reader asks the kernel for.
const SLOW_RECV_BUFFER: usize = 4096;
/// Failure messages kept per kind, for the report.
const EXAMPLES: usize = 5;

/// A kind of client.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Short,
    Range,
    Slow,
    Vanish,
}

impl Kind {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Kind::Short => "short connections",
            Kind::Range => "range requests",
            Kind::Slow => "slow readers",
            Kind::Vanish => "vanishing clients",
        }
    }
}

/// How many threads of a kind run, and how often each starts a round.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Plan {
    pub kind: Kind,
    pub threads: usize,
    /// Rounds per second per thread; `None`: back to back.
    pub per_second: Option<u32>,
}

impl Plan {
    /// The most rounds one thread runs in `run_for`: its pace, or for back-to-back
    /// rounds two a second (a slow reader's round takes longer).
    pub(crate) fn max_count(&self, run_for: Duration) -> u64 {
        let secs = run_for.as_secs() + 1;
        secs * u64::from(self.per_second.unwrap_or(2))
    }

    fn interval(&self) -> Option<Duration> {
        self.per_second
            .filter(|&n| n > 0)
            .map(|n| Duration::from_secs(1) / n)
    }
}

/// The mix: up to 200 short connections, 200 range requests and 50 vanishing clients
/// a second, and four slow readers at all times.
pub(crate) const MIX: [Plan; 4] = [
    Plan {
        kind: Kind::Short,
        threads: 2,
        per_second: Some(100),
    },
    Plan {
        kind: Kind::Range,
        threads: 2,
        per_second: Some(100),
    },
    Plan {
        kind: Kind::Slow,
        threads: 4,
        per_second: None,
    },
    Plan {
        kind: Kind::Vanish,
        threads: 2,
        per_second: Some(25),
    },
];

/// The mix in words: "up to 200 short connections/s, …, 4 slow readers, …" (a
/// thread paced at N rounds a second runs fewer when a round takes longer than 1/N s).
pub(crate) fn describe_mix() -> String {
    MIX.iter()
        .map(|p| match p.per_second {
            Some(n) => format!(
                "up to {} {}/s",
                p.threads as u64 * u64::from(n),
                p.kind.name()
            ),
            None => format!("{} {}", p.threads, p.kind.name()),
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// The pages the clients ask for, as served, by number (`/N.html`).
#[derive(Debug, Clone, Default)]
pub(crate) struct Pages {
    files: Vec<Vec<u8>>,
    /// Numbers of the pages slow readers ask for.
    large: Vec<usize>,
}

impl Pages {
    /// Pages `0.html` … `count - 1.html` of `dir`.
    pub(crate) fn read(dir: &Path, count: usize) -> Result<Pages> {
        let files = (0..count)
            .map(|i| {
                let p = dir.join(format!("{i}.html"));
                fs::read(&p).map_err(|e| format!("reading {}: {e}", p.display()))
            })
            .collect::<Result<Vec<_>>>()?;
        Pages::new(files)
    }

    fn new(files: Vec<Vec<u8>>) -> Result<Pages> {
        let large: Vec<usize> = (0..files.len())
            .filter(|&i| files[i].len() >= SLOW_MIN_BYTES)
            .collect();
        if large.is_empty() || files.iter().any(Vec::is_empty) {
            return Err(format!(
                "the page set needs pages of {SLOW_MIN_BYTES} bytes or more and no empty one"
            ));
        }
        Ok(Pages { files, large })
    }

    fn pick(&self, rng: &mut Rng) -> (usize, &[u8]) {
        let i = rng.below(self.files.len());
        (i, &self.files[i])
    }

    fn pick_large(&self, rng: &mut Rng) -> (usize, &[u8]) {
        let i = self.large[rng.below(self.large.len())];
        (i, &self.files[i])
    }
}

/// Where the clients go.
#[derive(Debug, Clone)]
pub(crate) struct Target {
    /// The network namespace they run in (`/run/netns/NAME`).
    pub netns: String,
    pub addr: SocketAddr,
}

/// What one kind of client did, counted as it runs.
#[derive(Debug, Default)]
struct Tally {
    ok: AtomicU64,
    failed: [AtomicU64; Failure::ALL.len()],
    examples: Mutex<Vec<String>>,
    /// The longest wait for bytes of a request that succeeded, in microseconds.
    longest_wait_us: AtomicU64,
}

impl Tally {
    /// A round: done, with the longest it waited for bytes, or failed.
    fn record(&self, r: Round) {
        match r {
            Ok(waited) => {
                self.ok.fetch_add(1, Ordering::Relaxed);
                let us = u64::try_from(waited.as_micros()).unwrap_or(u64::MAX);
                self.longest_wait_us.fetch_max(us, Ordering::Relaxed);
            }
            Err(f) => {
                self.failed[f.kind.index()].fetch_add(1, Ordering::Relaxed);
                if let Ok(mut ex) = self.examples.lock() {
                    if ex.len() < EXAMPLES {
                        ex.push(format!("{}: {}", f.kind.name(), f.detail));
                    }
                }
            }
        }
    }

    fn failures(&self) -> u64 {
        self.failed.iter().map(|f| f.load(Ordering::Relaxed)).sum()
    }

    fn totals(&self, kind: Kind) -> Totals {
        Totals {
            kind,
            ok: self.ok.load(Ordering::Relaxed),
            failed: std::array::from_fn(|i| self.failed[i].load(Ordering::Relaxed)),
            examples: self.examples.lock().map(|e| e.clone()).unwrap_or_default(),
            longest_wait: Duration::from_micros(self.longest_wait_us.load(Ordering::Relaxed)),
        }
    }
}

/// What a round came to: the longest its reads waited for bytes, or why it failed.
type Round = std::result::Result<Duration, Fail>;

/// What one kind of client did over the run.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Totals {
    pub kind: Kind,
    /// Rounds that went as they should.
    pub ok: u64,
    /// Rounds that failed, by [`Failure::index`].
    pub failed: [u64; Failure::ALL.len()],
    /// The first few failures, described.
    pub examples: Vec<String>,
    /// The longest a request that succeeded waited for bytes.
    pub longest_wait: Duration,
}

impl Totals {
    pub(crate) fn failures(&self) -> u64 {
        self.failed.iter().sum()
    }

    /// "3 timeout, 1 wrong body", or "none".
    pub(crate) fn failure_list(&self) -> String {
        let parts: Vec<String> = Failure::ALL
            .iter()
            .zip(self.failed)
            .filter(|&(_, n)| n > 0)
            .map(|(f, n)| format!("{n} {}", f.name()))
            .collect();
        if parts.is_empty() {
            "none".into()
        } else {
            parts.join(", ")
        }
    }
}

/// What every client thread shares.
struct Shared {
    target: Target,
    host: String,
    pages: Pages,
    run_for: Duration,
    stop: AtomicBool,
    interrupted: Arc<AtomicBool>,
    tallies: [Tally; MIX.len()],
}

impl Shared {
    fn stopped(&self) -> bool {
        self.stop.load(Ordering::Relaxed) || self.interrupted.load(Ordering::Relaxed)
    }
}

/// The running clients; dropping them stops and joins every thread.
pub(crate) struct Clients {
    shared: Arc<Shared>,
    threads: Vec<JoinHandle<()>>,
}

impl Clients {
    /// Starts every thread of [`MIX`] against `target` for `run_for`.
    pub(crate) fn start(
        target: Target,
        pages: Pages,
        run_for: Duration,
        interrupted: Arc<AtomicBool>,
    ) -> Result<Clients> {
        let shared = Arc::new(Shared {
            host: target.addr.ip().to_string(),
            target,
            pages,
            run_for,
            stop: AtomicBool::new(false),
            interrupted,
            tallies: Default::default(),
        });
        let mut clients = Clients {
            shared,
            threads: Vec::new(),
        };
        for (k, plan) in MIX.iter().enumerate() {
            for t in 0..plan.threads {
                let shared = Arc::clone(&clients.shared);
                let plan = *plan;
                let seed = 0x536f_616b ^ ((k as u64) << 16) ^ t as u64;
                let handle = thread::Builder::new()
                    .name(format!("soak-{k}-{t}"))
                    .spawn(move || client_thread(&shared, k, plan, seed))
                    .map_err(|e| format!("starting a client thread: {e}"))?;
                clients.threads.push(handle);
            }
        }
        Ok(clients)
    }

    /// Failed rounds so far, every kind together.
    pub(crate) fn failures(&self) -> u64 {
        self.shared.tallies.iter().map(Tally::failures).sum()
    }

    /// Whether every thread has ended.
    pub(crate) fn finished(&self) -> bool {
        self.threads.iter().all(JoinHandle::is_finished)
    }

    /// Stops the threads (at once if `now`, else when their time is up), waits for
    /// them and returns what each kind did.
    pub(crate) fn finish(mut self, now: bool) -> Vec<Totals> {
        if now {
            self.shared.stop.store(true, Ordering::Relaxed);
        }
        self.join();
        MIX.iter()
            .zip(&self.shared.tallies)
            .map(|(plan, t)| t.totals(plan.kind))
            .collect()
    }

    fn join(&mut self) {
        for t in self.threads.drain(..) {
            if t.join().is_err() {
                eprintln!("soak: a client thread panicked");
            }
        }
    }
}

impl Drop for Clients {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Relaxed);
        self.join();
    }
}

fn client_thread(shared: &Shared, k: usize, plan: Plan, seed: u64) {
    let tally = &shared.tallies[k];
    if let Err(e) = enter(&shared.target.netns) {
        tally.record(Err(fail(Failure::Io, e)));
        return;
    }
    let mut rng = Rng::new(seed);
    let mut keep_alive: Option<(TcpStream, u32)> = None;
    let started = Instant::now();
    let end = started + shared.run_for;
    for n in 0..plan.max_count(shared.run_for) {
        if shared.stopped() || Instant::now() >= end {
            break;
        }
        let r = match plan.kind {
            Kind::Short => short(shared, &mut rng),
            Kind::Range => range(shared, &mut rng, &mut keep_alive),
            Kind::Slow => slow(shared, &mut rng),
            Kind::Vanish => vanish(shared, &mut rng, n),
        };
        tally.record(r);
        if let Some(every) = plan.interval() {
            let next = started + every * u32::try_from(n + 1).unwrap_or(u32::MAX);
            pause_until(shared, next.min(end));
        }
    }
}

/// Moves this thread into network namespace `name`.
pub(super) fn enter(name: &str) -> std::result::Result<(), String> {
    let path = format!("/run/netns/{name}");
    let ns = fs::File::open(&path).map_err(|e| format!("opening {path}: {e}"))?;
    crate::sys::enter_netns(&ns).map_err(|e| format!("entering network namespace {name}: {e}"))
}

fn pause_until(shared: &Shared, t: Instant) {
    while !shared.stopped() {
        let now = Instant::now();
        if now >= t {
            return;
        }
        thread::sleep((t - now).min(Duration::from_millis(100)));
    }
}

fn connect(shared: &Shared, budget: Duration) -> std::result::Result<TcpStream, Fail> {
    open(shared.target.addr, budget)
}

/// A connection to `addr` on which no read or write blocks longer than `budget`,
/// `TCP_NODELAY` on.
pub(super) fn open(addr: SocketAddr, budget: Duration) -> std::result::Result<TcpStream, Fail> {
    let s = TcpStream::connect_timeout(&addr, CONNECT_TIMEOUT)
        .map_err(|e| fail(Failure::Connect, e.to_string()))?;
    s.set_read_timeout(Some(budget))
        .and_then(|()| s.set_write_timeout(Some(budget)))
        .and_then(|()| s.set_nodelay(true))
        .map_err(|e| io_fail(&e, "setting socket options"))?;
    Ok(s)
}

fn send(s: &mut TcpStream, request: &str) -> std::result::Result<(), Fail> {
    s.write_all(request.as_bytes())
        .map_err(|e| io_fail(&e, "sending the request"))
}

/// After a `Connection: close` response, the server must close.
fn expect_close(s: &mut TcpStream) -> std::result::Result<(), Fail> {
    match s.read(&mut [0; 1]) {
        Ok(0) => Ok(()),
        Ok(_) => Err(fail(Failure::WrongBody, "bytes after the response")),
        Err(e) => Err(io_fail(&e, "waiting for the server's close")),
    }
}

fn short(shared: &Shared, rng: &mut Rng) -> Round {
    let deadline = Instant::now() + REQUEST_DEADLINE;
    let (i, file) = shared.pages.pick(rng);
    let mut s = connect(shared, REQUEST_DEADLINE)?;
    let request = http::get(&shared.host, &format!("/{i}.html"), true, "");
    send(&mut s, &request)?;
    let resp = http::read_response(&mut s, deadline, Pace::FULL)?;
    http::check_page(&resp, file)?;
    expect_close(&mut s)?;
    Ok(resp.longest_wait)
}

fn range(shared: &Shared, rng: &mut Rng, conn: &mut Option<(TcpStream, u32)>) -> Round {
    let deadline = Instant::now() + REQUEST_DEADLINE;
    let (i, file) = shared.pages.pick(rng);
    let first = rng.below(file.len());
    // Now and then past the end, which means up to the end.
    let last = first + rng.below(file.len() - first + 64);
    let (mut s, used) = match conn.take() {
        Some(c) => c,
        None => (connect(shared, REQUEST_DEADLINE)?, 0),
    };
    let range = format!("Range: bytes={first}-{last}\r\n");
    let request = http::get(&shared.host, &format!("/{i}.html"), false, &range);
    send(&mut s, &request)?;
    let resp = http::read_response(&mut s, deadline, Pace::FULL)?;
    http::check_range(&resp, file, first, last)?;
    if used + 1 < RANGE_REQUESTS_PER_CONNECTION {
        *conn = Some((s, used + 1));
    }
    Ok(resp.longest_wait)
}

fn slow(shared: &Shared, rng: &mut Rng) -> Round {
    let deadline = Instant::now() + SLOW_DEADLINE;
    let (i, file) = shared.pages.pick_large(rng);
    let mut s = connect(shared, SLOW_DEADLINE)?;
    crate::sys::set_recv_buffer(&s, SLOW_RECV_BUFFER)
        .map_err(|e| io_fail(&e, "setting SO_RCVBUF"))?;
    let request = http::get(&shared.host, &format!("/{i}.html"), true, "");
    send(&mut s, &request)?;
    let pace = Pace {
        chunk: 512,
        pause: Duration::from_millis(5 + rng.below(11) as u64),
    };
    let resp = http::read_response(&mut s, deadline, pace)?;
    http::check_page(&resp, file)?;
    expect_close(&mut s)?;
    Ok(resp.longest_wait)
}

/// Round `n` of a vanishing client: one of five ways to leave, in turn.
fn vanish(shared: &Shared, rng: &mut Rng, n: u64) -> Round {
    let mut s = connect(shared, REQUEST_DEADLINE)?;
    let (i, _) = shared.pages.pick_large(rng);
    let whole = http::get(&shared.host, &format!("/{i}.html"), false, "");
    let half = &whole[..whole.len() / 2];
    let reset = |s: &TcpStream| {
        crate::sys::set_linger_zero(s).map_err(|e| io_fail(&e, "setting SO_LINGER"))
    };
    match n % 5 {
        0 => {}
        1 => {
            send(&mut s, half)?;
            let _ = s.shutdown(Shutdown::Write);
        }
        2 => {
            send(&mut s, half)?;
            reset(&s)?;
        }
        3 => send(&mut s, &whole)?,
        _ => {
            send(&mut s, &whole)?;
            thread::sleep(Duration::from_millis(2));
            reset(&s)?;
        }
    }
    Ok(Duration::ZERO)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_loop_is_bounded() {
        let half_hour = Duration::from_secs(1800);
        for plan in MIX {
            let max = plan.max_count(half_hour);
            assert!(max > 0 && max <= 1801 * 100, "{plan:?}: {max}");
        }
        assert_eq!(MIX[0].interval(), Some(Duration::from_millis(10)));
        assert_eq!(MIX[2].interval(), None);
        let none = Plan {
            per_second: Some(0),
            ..MIX[0]
        };
        assert_eq!(none.interval(), None);
        assert_eq!(none.max_count(half_hour), 0);
        assert_eq!(
            describe_mix(),
            "up to 200 short connections/s, up to 200 range requests/s, 4 slow readers, up to \
             50 vanishing clients/s"
        );
    }

    #[test]
    fn tallies_count_by_failure() {
        let t = Tally::default();
        t.record(Ok(Duration::from_millis(30)));
        t.record(Ok(Duration::from_millis(1_200)));
        for _ in 0..7 {
            t.record(Err(fail(Failure::WrongBody, "differs at byte 3")));
        }
        t.record(Err(fail(Failure::Timeout, "reading the body: out of time")));
        let totals = t.totals(Kind::Range);
        assert_eq!(totals.ok, 2);
        assert_eq!(totals.failures(), 8);
        assert_eq!(totals.failed[Failure::WrongBody.index()], 7);
        assert_eq!(totals.failure_list(), "1 timeout, 7 wrong body");
        assert_eq!(totals.examples.len(), EXAMPLES);
        assert_eq!(totals.examples[0], "wrong body: differs at byte 3");
        assert_eq!(totals.longest_wait, Duration::from_millis(1_200));
        assert_eq!(Tally::default().totals(Kind::Slow).failure_list(), "none");
    }

    #[test]
    fn pages_need_large_ones() {
        assert!(Pages::new(vec![vec![1; 10]]).is_err());
        assert!(Pages::new(vec![vec![1; SLOW_MIN_BYTES], vec![]]).is_err());
        let p = Pages::new(vec![vec![1; 10], vec![2; SLOW_MIN_BYTES]]).unwrap();
        let mut rng = Rng::new(1);
        for _ in 0..20 {
            assert_eq!(p.pick_large(&mut rng).0, 1);
            assert!(p.pick(&mut rng).0 < 2);
        }
    }

    /// The clients against a little server on loopback that answers right, then one
    /// that answers wrong: the first run has no failure, the second nothing else.
    #[test]
    fn clients_count_what_a_server_gets_wrong() {
        let file = crate::pages::page_body(0, SLOW_MIN_BYTES);
        let pages = Pages::new(vec![file.clone()]).unwrap();
        for corrupt in [false, true] {
            let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            let addr = listener.local_addr().unwrap();
            let shared = Shared {
                target: Target {
                    netns: String::new(),
                    addr,
                },
                host: "127.0.0.1".into(),
                pages: pages.clone(),
                run_for: Duration::from_secs(5),
                stop: AtomicBool::new(false),
                interrupted: Arc::new(AtomicBool::new(false)),
                tallies: Default::default(),
            };
            let body = file.clone();
            let server = thread::spawn(move || serve_some(&listener, &body, corrupt, 3));
            let mut rng = Rng::new(5);
            let mut conn = None;
            let results = [
                short(&shared, &mut rng),
                range(&shared, &mut rng, &mut conn),
                slow(&shared, &mut rng),
            ];
            server.join().unwrap();
            for r in results {
                if corrupt {
                    assert_eq!(r.unwrap_err().kind, Failure::WrongBody);
                } else {
                    assert!(r.is_ok(), "{r:?}");
                }
            }
        }
    }

    /// Answers `n` connections' first request: the page (or the asked range of it),
    /// with one byte flipped when `corrupt`, then closes.
    fn serve_some(listener: &std::net::TcpListener, file: &[u8], corrupt: bool, n: usize) {
        for _ in 0..n {
            let (mut s, _) = listener.accept().unwrap();
            let mut head = Vec::new();
            let mut b = [0; 1];
            while !head.ends_with(b"\r\n\r\n") {
                s.read_exact(&mut b).unwrap();
                head.push(b[0]);
            }
            let head = String::from_utf8(head).unwrap();
            let range = head
                .lines()
                .find_map(|l| l.strip_prefix("Range: bytes="))
                .map(|r| {
                    let (a, b) = r.split_once('-').unwrap();
                    let a: usize = a.parse().unwrap();
                    let b: usize = b.parse::<usize>().unwrap().min(file.len() - 1);
                    (a, b)
                });
            let (status, extra, mut body) = match range {
                Some((a, b)) => (
                    "206 Partial Content",
                    format!("Content-Range: bytes {a}-{b}/{}\r\n", file.len()),
                    file[a..=b].to_vec(),
                ),
                None => ("200 OK", String::new(), file.to_vec()),
            };
            if corrupt {
                let last = body.len() - 1;
                body[last] ^= 0x20;
            }
            let mut out = format!(
                "HTTP/1.1 {status}\r\n{extra}Content-Length: {}\r\n\r\n",
                body.len()
            )
            .into_bytes();
            out.extend_from_slice(&body);
            s.write_all(&out).unwrap();
        }
    }
}
