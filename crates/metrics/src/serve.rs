//! The scrape endpoint: `GET /metrics` over HTTP/1.x on a kernel socket, served by one
//! thread of its own, off the workers' path.
//!
//! It is built to outlast hostile clients without the workers noticing: one thread
//! with non-blocking sockets serves every connection, so no client can hold a thread;
//! a request head larger than [`Limits::max_request`] gets 431; a connection that has
//! not finished its exchange within [`Limits::deadline`] is dropped (slowloris); at
//! most [`Limits::max_connections`] are open, and when one more arrives the oldest goes.
//! Other paths get 404, other methods 405; every response closes its connection.

use std::io::{self, ErrorKind, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use crate::board::Board;
use crate::render::render_as;
use crate::text::Format;

/// What the endpoint allows a client.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Largest request head, in bytes.
    pub max_request: usize,
    /// How long a connection may take from accept to the end of its response.
    pub deadline: Duration,
    /// Connections open at once.
    pub max_connections: usize,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            max_request: 8192,
            deadline: Duration::from_secs(5),
            max_connections: 16,
        }
    }
}

/// How long the thread sleeps when nothing moved: with connections open, and idle.
const BUSY_TICK: Duration = Duration::from_millis(5);
const IDLE_TICK: Duration = Duration::from_millis(50);

/// The running endpoint; dropping it stops the thread.
pub struct Endpoint {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Endpoint {
    /// Listen on `addr` and serve `board`'s snapshots.
    pub fn start(addr: SocketAddr, board: Arc<Board>, limits: Limits) -> io::Result<Endpoint> {
        let listener = TcpListener::bind(addr)?;
        listener.set_nonblocking(true)?;
        let addr = listener.local_addr()?;
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = thread::Builder::new()
            .name("metrics".into())
            .spawn(move || Server::new(listener, board, limits).run(&flag))?;
        Ok(Endpoint {
            addr,
            stop,
            thread: Some(thread),
        })
    }

    /// The address it listens on (with the port the kernel chose for port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }
}

impl Drop for Endpoint {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// One client connection: reading its head, then writing the response.
struct Client {
    stream: TcpStream,
    since: Instant,
    head: Vec<u8>,
    /// The response and how much of it is written.
    out: Option<(Vec<u8>, usize)>,
}

struct Server {
    listener: TcpListener,
    board: Arc<Board>,
    limits: Limits,
    clients: Vec<Client>,
}

impl Server {
    fn new(listener: TcpListener, board: Arc<Board>, limits: Limits) -> Server {
        Server {
            listener,
            board,
            limits,
            clients: Vec::new(),
        }
    }

    fn run(mut self, stop: &AtomicBool) {
        while !stop.load(Ordering::Relaxed) {
            let mut moved = self.accept();
            let now = Instant::now();
            let mut i = 0;
            while i < self.clients.len() {
                match self.step(i, now) {
                    Step::Wait => i += 1,
                    Step::Moved => {
                        moved = true;
                        i += 1;
                    }
                    Step::Done => {
                        let c = self.clients.swap_remove(i);
                        let _ = c.stream.shutdown(Shutdown::Both);
                        moved = true;
                    }
                }
            }
            if !moved {
                let tick = if self.clients.is_empty() {
                    IDLE_TICK
                } else {
                    BUSY_TICK
                };
                thread::sleep(tick);
            }
        }
    }

    /// Take the connections waiting; past the limit, drop the oldest for each.
    fn accept(&mut self) -> bool {
        let mut moved = false;
        loop {
            match self.listener.accept() {
                Ok((stream, _)) => {
                    moved = true;
                    if stream.set_nonblocking(true).is_err() {
                        continue;
                    }
                    if self.clients.len() >= self.limits.max_connections.max(1) {
                        let oldest = (0..self.clients.len())
                            .min_by_key(|&i| self.clients[i].since)
                            .unwrap_or(0);
                        let c = self.clients.swap_remove(oldest);
                        let _ = c.stream.shutdown(Shutdown::Both);
                    }
                    self.clients.push(Client {
                        stream,
                        since: Instant::now(),
                        head: Vec::new(),
                        out: None,
                    });
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => return moved,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => {
                    // Out of descriptors, a connection reset before accept: try again on
                    // the next tick rather than spin.
                    log::debug!("metrics: accept: {e}");
                    return moved;
                }
            }
        }
    }

    fn step(&mut self, i: usize, now: Instant) -> Step {
        let limits = self.limits;
        let c = &mut self.clients[i];
        if now.saturating_duration_since(c.since) >= limits.deadline {
            return Step::Done;
        }
        if c.out.is_none() {
            match read_head(c, limits.max_request) {
                Head::Waiting(moved) => return if moved { Step::Moved } else { Step::Wait },
                Head::Closed => return Step::Done,
                Head::Complete => {
                    let response = respond(&c.head, &self.board, now);
                    c.out = Some((response, 0));
                }
                Head::TooLarge => {
                    let body = "request head too large\n";
                    c.out = Some((
                        response(431, "Request Header Fields Too Large", &[], body, true),
                        0,
                    ));
                }
            }
        }
        let Some((out, written)) = &mut c.out else {
            return Step::Wait;
        };
        match c.stream.write(&out[*written..]) {
            Ok(0) => Step::Done,
            Ok(n) => {
                *written += n;
                if *written == out.len() {
                    Step::Done
                } else {
                    Step::Moved
                }
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock || e.kind() == ErrorKind::Interrupted => {
                Step::Wait
            }
            Err(_) => Step::Done,
        }
    }
}

enum Step {
    Wait,
    Moved,
    Done,
}

enum Head {
    /// Not complete yet; whether bytes arrived.
    Waiting(bool),
    Complete,
    TooLarge,
    Closed,
}

fn read_head(c: &mut Client, max: usize) -> Head {
    let mut buf = [0u8; 2048];
    let mut moved = false;
    loop {
        match c.stream.read(&mut buf) {
            Ok(0) => return Head::Closed,
            Ok(n) => {
                moved = true;
                let room = max.saturating_sub(c.head.len());
                c.head.extend_from_slice(&buf[..n.min(room)]);
                if head_end(&c.head) {
                    return Head::Complete;
                }
                if n > room || c.head.len() >= max {
                    return Head::TooLarge;
                }
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock => return Head::Waiting(moved),
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(_) => return Head::Closed,
        }
    }
}

/// Whether `head` holds a whole request head (ended by an empty line; bare LF
/// tolerated, RFC 9112 §2.2).
fn head_end(head: &[u8]) -> bool {
    head.windows(4).any(|w| w == b"\r\n\r\n") || head.windows(2).any(|w| w == b"\n\n")
}

/// The response to a complete request head.
fn respond(head: &[u8], board: &Board, now: Instant) -> Vec<u8> {
    let line = head.split(|&b| b == b'\n').next().unwrap_or_default();
    let line = String::from_utf8_lossy(line);
    let mut parts = line.trim_end_matches('\r').split(' ');
    let (Some(method), Some(target), Some(version), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return response(400, "Bad Request", &[], "bad request line\n", true);
    };
    if !version.starts_with("HTTP/1.") {
        return response(
            505,
            "HTTP Version Not Supported",
            &[],
            "HTTP/1.x only\n",
            true,
        );
    }
    let path = target.split('?').next().unwrap_or_default();
    if path != "/metrics" {
        return response(
            404,
            "Not Found",
            &[],
            "not found; try /metrics\n",
            method != "HEAD",
        );
    }
    let with_body = match method {
        "GET" => true,
        "HEAD" => false,
        _ => {
            let allow = [("Allow", "GET, HEAD")];
            return response(
                405,
                "Method Not Allowed",
                &allow,
                "GET or HEAD only\n",
                true,
            );
        }
    };
    let format = match accepts_openmetrics(head) {
        true => Format::OpenMetrics,
        false => Format::Prometheus,
    };
    let text = render_as(board, now, format);
    let headers = [("Content-Type", format.content_type())];
    response(200, "OK", &headers, &text, with_body)
}

/// Whether the head's `Accept` names OpenMetrics (as Prometheus's own scrapes do).
fn accepts_openmetrics(head: &[u8]) -> bool {
    String::from_utf8_lossy(head).lines().skip(1).any(|line| {
        line.split_once(':').is_some_and(|(name, value)| {
            name.trim().eq_ignore_ascii_case("accept")
                && value.contains("application/openmetrics-text")
        })
    })
}

fn response(
    status: u16,
    reason: &str,
    headers: &[(&str, &str)],
    body: &str,
    with_body: bool,
) -> Vec<u8> {
    let mut out = format!("HTTP/1.1 {status} {reason}\r\nConnection: close\r\n");
    if !headers.iter().any(|(n, _)| *n == "Content-Type") {
        out.push_str("Content-Type: text/plain; charset=utf-8\r\n");
    }
    for (n, v) in headers {
        out.push_str(&format!("{n}: {v}\r\n"));
    }
    out.push_str(&format!("Content-Length: {}\r\n\r\n", body.len()));
    if with_body {
        out.push_str(body);
    }
    out.into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::board::Gauges;
    use crate::report::AppMetrics;
    use rusty_stack::Stats;

    struct Nothing;
    impl AppMetrics for Nothing {}

    fn endpoint(limits: Limits) -> Endpoint {
        let board = Board::new(vec!["w".into()], Duration::from_secs(1));
        let mut p = board.publisher(0);
        p.publish(
            Instant::now(),
            &Stats::default(),
            Gauges::default(),
            &Nothing,
        );
        Endpoint::start("127.0.0.1:0".parse().unwrap(), board, limits).unwrap()
    }

    fn exchange(addr: SocketAddr, request: &[u8]) -> String {
        let mut s = TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        s.write_all(request).unwrap();
        let mut out = String::new();
        let _ = s.read_to_string(&mut out);
        out
    }

    #[test]
    fn serves_metrics_and_refuses_other_paths_and_methods() {
        let e = endpoint(Limits::default());
        let a = e.local_addr();
        let ok = exchange(a, b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
        assert!(ok.starts_with("HTTP/1.1 200 OK\r\n"), "{ok}");
        assert!(
            ok.contains("Content-Type: text/plain; version=0.0.4"),
            "{ok}"
        );
        assert!(ok.contains("\r\n\r\n# HELP rusty_worker_info"), "{ok}");
        let om = exchange(
            a,
            b"GET /metrics HTTP/1.1\r\naccept: application/openmetrics-text;version=1.0.0,\
              text/plain;q=0.5\r\n\r\n",
        );
        assert!(om.contains("Content-Type: application/openmetrics-text; version=1.0.0"));
        assert!(
            om.contains("\n# TYPE rusty_frames_received counter\n"),
            "{om}"
        );
        assert!(om.ends_with("# EOF\n"), "{om}");
        let head = exchange(a, b"HEAD /metrics?x=1 HTTP/1.0\n\n");
        assert!(head.starts_with("HTTP/1.1 200 OK\r\n") && head.ends_with("\r\n\r\n"));
        let missing = exchange(a, b"GET / HTTP/1.1\r\n\r\n");
        assert!(missing.starts_with("HTTP/1.1 404 "), "{missing}");
        let post = exchange(a, b"POST /metrics HTTP/1.1\r\n\r\n");
        assert!(post.starts_with("HTTP/1.1 405 ") && post.contains("Allow: GET, HEAD"));
        for bad in [
            &b"GARBAGE\r\n\r\n"[..],
            b"GET /metrics SPDY/3\r\n\r\n",
            b"\xff\xfe\r\n\r\n",
        ] {
            let r = exchange(a, bad);
            assert!(
                r.starts_with("HTTP/1.1 400 ") || r.starts_with("HTTP/1.1 505 "),
                "{r}"
            );
        }
    }

    #[test]
    fn oversized_slow_and_excess_clients_do_not_stop_it() {
        let limits = Limits {
            max_request: 256,
            deadline: Duration::from_millis(500),
            max_connections: 4,
        };
        let e = endpoint(limits);
        let a = e.local_addr();
        let big = format!("GET /metrics HTTP/1.1\r\nX: {}\r\n\r\n", "a".repeat(1000));
        assert!(exchange(a, big.as_bytes()).starts_with("HTTP/1.1 431 "));
        // Slow clients that never finish: more than the limit, so the oldest go, and
        // the rest are dropped at the deadline.
        let slow: Vec<TcpStream> = (0..10)
            .map(|_| {
                let mut s = TcpStream::connect(a).unwrap();
                s.write_all(b"GET /met").unwrap();
                s
            })
            .collect();
        let ok = exchange(a, b"GET /metrics HTTP/1.1\r\n\r\n");
        assert!(ok.starts_with("HTTP/1.1 200 "), "{ok}");
        for mut s in slow {
            s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
            let mut rest = Vec::new();
            let started = Instant::now();
            let _ = s.read_to_end(&mut rest);
            assert!(
                started.elapsed() < Duration::from_secs(5),
                "held past the deadline"
            );
        }
    }
}
