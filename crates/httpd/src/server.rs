//! The HTTP handler: one [`HttpServer`] per worker over the shared [`Cache`].
//!
//! Requests are read straight from the slices the stack offers: each complete head is
//! answered and its bytes consumed; a partial head is left in the stack's receive
//! buffer (consumed nothing), which offers it again, contiguous, with the bytes that
//! complete it. Pipelined requests are therefore answered in order without any
//! buffering of ours, and what a connection may leave pending is bounded by
//! `max_header_bytes`.
//!
//! Bodies go out with `send_summed`: by reference to the cached bytes, with their
//! precomputed checksum prefix sums (used where the device cannot checksum); heads are
//! the file's prebuilt constant part plus `Date` (reformatted once per second) and
//! `Connection`, assembled in one per-worker buffer and copied into the send buffer.
//!
//! Timers (one per connection, re-armed on each change of phase):
//! - header timeout: from accept, or from the first byte of a later request, until the
//!   head is complete. When it fires with part of a head received, the client gets a
//!   408 and the connection closes; with nothing received it just closes.
//! - keep-alive timeout: from the moment a response is queued with nothing more
//!   pending, extended by the time the bodies still queued would take at
//!   [`DRAIN_RATE`] (the stack does not tell us when a queued body has been
//!   delivered, so a long download is not cut off by a short idle timeout). When it
//!   fires the connection closes gracefully: what is queued is still delivered.
//! - either timer, when it fires with response bytes still unacknowledged, looks again
//!   one keep-alive timeout later; if the client acknowledged nothing in between, the
//!   connection is reset rather than closed (a client that stopped reading would hold
//!   a graceful close open). The stack bounds the rest: every connection gets the
//!   configured send timeout as its user timeout (RFC 5482), and closed connections
//!   are orphans the stack bounds in number and time.
//!
//! Backpressure: heads are copied into the bounded send buffer; when it has less than
//! [`HEAD_ROOM`] free, the handler stops taking requests (the stack keeps them and
//! closes the window) until `writable`. Bodies are queued by reference and do not count.

use std::fmt;
use std::fmt::Write as _;
use std::io::Write as _;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use rusty_stack::{CloseReason, Conn, Handler, Opener};

use crate::cache::{Cache, FileEntry, Node};
use crate::date::{parse_http_date, DateCache};
use crate::path::{normalise, percent_encode_path, PathError};
use crate::range::{parse_range, RangeRequest};
use crate::request::{parse_request, Limits, Method, Parsed, Request};

/// Free send-buffer space below which no further request is answered until the
/// peer has read some of what we queued.
pub(crate) const HEAD_ROOM: usize = 4096;

/// Slowest delivery rate (bytes/s) a queued body is allowed before the keep-alive
/// timer may close its connection; bodies up to [`DRAIN_FREE`] bytes add nothing.
pub(crate) const DRAIN_RATE: f64 = 256.0 * 1024.0;
/// Bytes of a queued body that need no extra time at [`DRAIN_RATE`]: a body this size
/// or smaller leaves the keep-alive timeout as it is.
pub(crate) const DRAIN_FREE: usize = 256 * 1024;

/// Server settings shared by all workers.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct HttpConfig {
    /// Bounds on a request head; by default 8 KiB for the head and 2 KiB for the target.
    pub limits: Limits,
    /// How long a client may take to send a whole request head, from accept or from
    /// the first byte of a later request; then it gets a 408 (or, if nothing of the head
    /// arrived, just a close). Default 10 s.
    pub header_timeout: Duration,
    /// How long a keep-alive connection may stay idle after its last response was
    /// queued (longer while bodies over 256 KiB drain, at an allowance of 256 KiB/s);
    /// then it is closed gracefully. Default 15 s.
    pub keepalive_timeout: Duration,
    /// Connections one worker serves at once; more are refused (reset). Default 10 000.
    pub max_connections: usize,
    /// The user timeout set on every connection (RFC 5482, as nginx's `send_timeout`):
    /// a client that acknowledges nothing we sent for this long, by silence or by a
    /// window it keeps shut, is reset, even after we closed. `None`: the stack's default.
    pub send_timeout: Option<Duration>,
}

impl Default for HttpConfig {
    fn default() -> Self {
        HttpConfig {
            limits: Limits::default(),
            header_timeout: Duration::from_secs(10),
            keepalive_timeout: Duration::from_secs(15),
            max_connections: 10_000,
            send_timeout: Some(Duration::from_secs(60)),
        }
    }
}

/// Per-worker counters.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct HttpStats {
    /// Connections accepted (not counting those refused at `max_connections`).
    pub connections: u64,
    /// Request heads answered, errors included.
    pub requests: u64,
    /// Whole files sent (200).
    pub status_200: u64,
    /// Byte ranges sent (206).
    pub status_206: u64,
    /// Redirects of a directory to its URL with a trailing slash (301).
    pub status_301: u64,
    /// Conditional requests answered with 304 Not Modified.
    pub status_304: u64,
    /// Targets that name no cached file (404).
    pub status_404: u64,
    /// Methods other than `GET` and `HEAD` (405).
    pub status_405: u64,
    /// Ranges no byte of the file lies in (416).
    pub status_416: u64,
    /// Malformed requests (400).
    pub bad_requests: u64,
    /// Targets over the limit (414).
    pub long_targets: u64,
    /// Heads over the limit (431).
    pub oversized_headers: u64,
    /// Transfer codings we do not implement (501).
    pub not_implemented: u64,
    /// Versions other than 1.0/1.1 (505).
    pub bad_versions: u64,
    /// Connections refused at `max_connections`.
    pub refused_connections: u64,
    /// Heads not complete within the header timeout (408 or silent close).
    pub header_timeouts: u64,
    /// Keep-alive connections closed for idleness.
    pub idle_timeouts: u64,
    /// Connections reset when a timeout found response bytes still unacknowledged and
    /// no progress since the previous one (a client that stopped reading).
    pub stalled_aborts: u64,
    /// Times a connection stopped taking requests for lack of send-buffer space.
    pub backpressure_pauses: u64,
    /// Body bytes queued (by reference).
    pub body_bytes: u64,
}

impl HttpStats {
    /// Add `other` into `self`.
    pub fn add(&mut self, o: &HttpStats) {
        self.connections += o.connections;
        self.requests += o.requests;
        self.status_200 += o.status_200;
        self.status_206 += o.status_206;
        self.status_301 += o.status_301;
        self.status_304 += o.status_304;
        self.status_404 += o.status_404;
        self.status_405 += o.status_405;
        self.status_416 += o.status_416;
        self.bad_requests += o.bad_requests;
        self.long_targets += o.long_targets;
        self.oversized_headers += o.oversized_headers;
        self.not_implemented += o.not_implemented;
        self.bad_versions += o.bad_versions;
        self.refused_connections += o.refused_connections;
        self.header_timeouts += o.header_timeouts;
        self.idle_timeouts += o.idle_timeouts;
        self.stalled_aborts += o.stalled_aborts;
        self.backpressure_pauses += o.backpressure_pauses;
        self.body_bytes += o.body_bytes;
    }
}

impl fmt::Display for HttpStats {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "connections={} requests={} 200={} 206={} 301={} 304={} 404={} 405={} 416={} \
             400={} 414={} 431={} 501={} 505={} refused_connections={} header_timeouts={} \
             idle_timeouts={} stalled_aborts={} backpressure_pauses={} body_bytes={}",
            self.connections,
            self.requests,
            self.status_200,
            self.status_206,
            self.status_301,
            self.status_304,
            self.status_404,
            self.status_405,
            self.status_416,
            self.bad_requests,
            self.long_targets,
            self.oversized_headers,
            self.not_implemented,
            self.bad_versions,
            self.refused_connections,
            self.header_timeouts,
            self.idle_timeouts,
            self.stalled_aborts,
            self.backpressure_pauses,
            self.body_bytes
        )
    }
}

/// Where workers leave their counters when they end: (worker index, counters).
pub type StatsSink = Arc<Mutex<Vec<(usize, HttpStats)>>>;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
enum Phase {
    /// Waiting for (the rest of) a request head: header timer armed.
    #[default]
    Reading,
    /// Everything received was answered: keep-alive timer armed.
    Idle,
    /// Requests wait for send-buffer space: keep-alive timer armed.
    Blocked,
}

/// Per-connection state.
#[derive(Debug, Default)]
pub struct HttpConn {
    phase: Phase,
    /// Part of a request head is pending in the stack.
    partial: bool,
    peer_closed: bool,
    /// We closed (or are closing): discard whatever still arrives.
    closing: bool,
    /// When the large bodies queued so far should have been delivered, at
    /// [`DRAIN_RATE`].
    drain_until: Option<Instant>,
    /// Response bytes still unacknowledged when a timeout last found some.
    unacked_at_timeout: Option<usize>,
}

/// The handler of one worker.
pub struct HttpServer {
    cache: Arc<Cache>,
    cfg: HttpConfig,
    date: DateCache,
    /// Response heads are assembled here.
    head: Vec<u8>,
    path: String,
    scratch: Vec<u8>,
    active: usize,
    stats: HttpStats,
    worker: usize,
    sink: Option<StatsSink>,
}

/// How a response leaves the connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum After {
    KeepAlive,
    Close,
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        206 => "Partial Content",
        301 => "Moved Permanently",
        304 => "Not Modified",
        400 => "Bad Request",
        404 => "Not Found",
        405 => "Method Not Allowed",
        408 => "Request Timeout",
        414 => "URI Too Long",
        416 => "Range Not Satisfiable",
        431 => "Request Header Fields Too Large",
        501 => "Not Implemented",
        505 => "HTTP Version Not Supported",
        _ => "Error",
    }
}

/// Weak comparison of an `If-None-Match` list with our entity tag (RFC 9110 §13.1.2).
pub(crate) fn etag_matches(list: &str, etag: &str) -> bool {
    let ours = etag.strip_prefix("W/").unwrap_or(etag);
    list.split(',')
        .map(str::trim)
        .any(|t| t == "*" || t.strip_prefix("W/").unwrap_or(t) == ours)
}

/// Whether the request's validators let us answer 304 (RFC 9110 §13.1.2–13.1.3,
/// evaluated in the order of §13.2.2: If-None-Match wins over If-Modified-Since).
pub(crate) fn not_modified(req: &Request<'_>, file: &FileEntry) -> bool {
    if let Some(inm) = req.if_none_match {
        return etag_matches(inm, &file.etag);
    }
    if let Some(ims) = req.if_modified_since.and_then(parse_http_date) {
        return file.last_modified <= ims;
    }
    false
}

/// Whether `If-Range` (if any) allows the range (RFC 9110 §13.1.5): a strong entity
/// tag match, or exactly the file's modification date.
pub(crate) fn if_range_holds(req: &Request<'_>, file: &FileEntry) -> bool {
    match req.if_range {
        None => true,
        Some(v) if v.starts_with('"') => v == file.etag,
        Some(v) if v.starts_with("W/") => false,
        Some(v) => parse_http_date(v) == Some(file.last_modified),
    }
}

/// What a `GET`/`HEAD` for `file` gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FileAnswer {
    NotModified,
    Full,
    Partial(u64, u64),
    Unsatisfiable,
}

/// The conditional and range logic, pure.
pub(crate) fn answer_for(req: &Request<'_>, file: &FileEntry) -> FileAnswer {
    if not_modified(req, file) {
        return FileAnswer::NotModified;
    }
    match req.range {
        Some(r) if if_range_holds(req, file) => match parse_range(r, file.body.len() as u64) {
            RangeRequest::Full => FileAnswer::Full,
            RangeRequest::Partial { start, end } => FileAnswer::Partial(start, end),
            RangeRequest::Unsatisfiable => FileAnswer::Unsatisfiable,
        },
        _ => FileAnswer::Full,
    }
}

/// Queue all of `bytes`: copied while the send buffer has room, by reference (a
/// fresh allocation) for the rest, so a head is never cut short.
fn send_all<S>(conn: &mut Conn<'_, S>, bytes: &[u8]) {
    match conn.send(bytes) {
        Ok(n) if n < bytes.len() => {
            let _ = conn.send_shared(Bytes::copy_from_slice(&bytes[n..]));
        }
        _ => {}
    }
}

impl HttpServer {
    /// One worker's handler, serving `cache` as `cfg` says.
    pub fn new(cache: Arc<Cache>, cfg: HttpConfig) -> HttpServer {
        HttpServer {
            cache,
            cfg,
            date: DateCache::new(),
            head: Vec::with_capacity(1024),
            path: String::with_capacity(256),
            scratch: Vec::with_capacity(256),
            active: 0,
            stats: HttpStats::default(),
            worker: 0,
            sink: None,
        }
    }

    /// Leave this worker's counters in `sink` (as worker `index`) when it is dropped.
    pub fn with_sink(mut self, index: usize, sink: StatsSink) -> HttpServer {
        self.worker = index;
        self.sink = Some(sink);
        self
    }

    /// This worker's counters so far.
    pub fn stats(&self) -> &HttpStats {
        &self.stats
    }

    /// Connections this worker serves now.
    pub fn open_connections(&self) -> usize {
        self.active
    }

    /// Append `Date`, `Connection` (when it says something) and the blank line.
    fn finish_head(&mut self, minor: u8, after: After) {
        self.head.extend_from_slice(b"Date: ");
        self.head.extend_from_slice(self.date.now().as_bytes());
        self.head.extend_from_slice(b"\r\n");
        match after {
            After::Close => self.head.extend_from_slice(b"Connection: close\r\n"),
            After::KeepAlive if minor == 0 => {
                self.head.extend_from_slice(b"Connection: keep-alive\r\n")
            }
            After::KeepAlive => {}
        }
        self.head.extend_from_slice(b"\r\n");
    }

    /// A complete error (or redirect) response with a small HTML body; `extra` are
    /// more header lines, each ending in CRLF.
    fn send_error<S>(
        &mut self,
        conn: &mut Conn<'_, S>,
        status: u16,
        extra: &[u8],
        head_only: bool,
        minor: u8,
        after: After,
    ) {
        let mut body = String::with_capacity(160);
        let _ = write!(
            body,
            "<!DOCTYPE html>\n<html><head><title>{status} {r}</title></head>\
             <body><h1>{status} {r}</h1></body></html>\n",
            r = reason(status)
        );
        self.head.clear();
        let _ = write!(
            self.head,
            "HTTP/1.1 {status} {}\r\nServer: rusty\r\nContent-Type: text/html; charset=utf-8\r\n\
             Content-Length: {}\r\n",
            reason(status),
            body.len()
        );
        self.head.extend_from_slice(extra);
        self.finish_head(minor, after);
        if !head_only {
            self.head.extend_from_slice(body.as_bytes());
        }
        let head = std::mem::take(&mut self.head);
        send_all(conn, &head);
        self.head = head;
        match status {
            301 => self.stats.status_301 += 1,
            400 => self.stats.bad_requests += 1,
            404 => self.stats.status_404 += 1,
            405 => self.stats.status_405 += 1,
            414 => self.stats.long_targets += 1,
            416 => self.stats.status_416 += 1,
            431 => self.stats.oversized_headers += 1,
            501 => self.stats.not_implemented += 1,
            505 => self.stats.bad_versions += 1,
            _ => {}
        }
    }

    /// Answer one parsed request; returns whether the connection stays open.
    fn respond(&mut self, conn: &mut Conn<'_, HttpConn>, req: &Request<'_>) -> After {
        self.stats.requests += 1;
        let after = if req.persistent() {
            After::KeepAlive
        } else {
            After::Close
        };
        let head_only = req.method == Method::Head;
        if req.method == Method::Other {
            self.send_error(conn, 405, b"Allow: GET, HEAD\r\n", false, req.minor, after);
            return after;
        }
        let mut path = std::mem::take(&mut self.path);
        let mut scratch = std::mem::take(&mut self.scratch);
        let result = normalise(req.target, &mut path, &mut scratch);
        let after = match result {
            Err(PathError::BadRequest) => {
                self.send_error(conn, 400, b"", head_only, req.minor, After::Close);
                After::Close
            }
            Err(PathError::NotFound) => {
                self.send_error(conn, 404, b"", head_only, req.minor, after);
                after
            }
            Ok(target) => {
                let cache = self.cache.clone();
                match cache.get(&path) {
                    Some(Node::File(f)) if !target.trailing_slash => {
                        self.send_file(conn, req, f, after);
                    }
                    Some(Node::Dir(Some(f))) if target.trailing_slash => {
                        self.send_file(conn, req, f, after);
                    }
                    Some(Node::Dir(_)) if !target.trailing_slash => {
                        // RFC 9110 §15.4.2: the directory lives at the slash-terminated URL.
                        scratch.clear();
                        scratch.extend_from_slice(b"Location: ");
                        percent_encode_path(&path, &mut scratch);
                        scratch.push(b'/');
                        if let Some(q) = target.query {
                            scratch.push(b'?');
                            scratch.extend_from_slice(q.as_bytes());
                        }
                        scratch.extend_from_slice(b"\r\n");
                        self.send_error(conn, 301, &scratch, head_only, req.minor, after);
                    }
                    _ => self.send_error(conn, 404, b"", head_only, req.minor, after),
                }
                after
            }
        };
        self.path = path;
        self.scratch = scratch;
        after
    }

    fn send_file(
        &mut self,
        conn: &mut Conn<'_, HttpConn>,
        req: &Request<'_>,
        f: &Arc<FileEntry>,
        after: After,
    ) {
        let head_only = req.method == Method::Head;
        let len = f.body.len() as u64;
        let body = match answer_for(req, f) {
            FileAnswer::NotModified => {
                self.stats.status_304 += 1;
                self.head.clear();
                self.head.extend_from_slice(&f.head_304);
                None
            }
            FileAnswer::Full => {
                self.stats.status_200 += 1;
                self.head.clear();
                self.head.extend_from_slice(&f.head_200);
                Some(0..f.body.len())
            }
            FileAnswer::Partial(start, end) => {
                self.stats.status_206 += 1;
                self.head.clear();
                self.head
                    .extend_from_slice(b"HTTP/1.1 206 Partial Content\r\n");
                self.head.extend_from_slice(&f.fields);
                let _ = write!(
                    self.head,
                    "Content-Length: {}\r\nContent-Range: bytes {start}-{}/{len}\r\n",
                    end - start,
                    end - 1
                );
                Some(start as usize..end as usize)
            }
            FileAnswer::Unsatisfiable => {
                let extra = format!("Content-Range: bytes */{len}\r\n");
                self.send_error(conn, 416, extra.as_bytes(), head_only, req.minor, after);
                return;
            }
        };
        self.finish_head(req.minor, after);
        let head = std::mem::take(&mut self.head);
        send_all(conn, &head);
        self.head = head;
        if let Some(body) = body.filter(|b| !head_only && !b.is_empty()) {
            self.stats.body_bytes += body.len() as u64;
            if body.len() > DRAIN_FREE {
                let now = Instant::now();
                let st = conn.state();
                let from = st.drain_until.filter(|&t| t > now).unwrap_or(now);
                st.drain_until =
                    Some(from + Duration::from_secs_f64(body.len() as f64 / DRAIN_RATE));
            }
            // By reference, with the file's precomputed checksums.
            let _ = conn.send_summed(&f.summed, body);
        }
    }

    fn close(&mut self, conn: &mut Conn<'_, HttpConn>) {
        let st = conn.state();
        st.closing = true;
        conn.set_timer(None);
        conn.close();
    }

    fn enter(&self, conn: &mut Conn<'_, HttpConn>, phase: Phase) {
        let timeout = match phase {
            Phase::Reading => self.cfg.header_timeout,
            Phase::Idle | Phase::Blocked => {
                let draining = conn.state().drain_until.map_or(Duration::ZERO, |t| {
                    t.saturating_duration_since(Instant::now())
                });
                self.cfg.keepalive_timeout + draining
            }
        };
        conn.state().phase = phase;
        conn.set_timer(Some(timeout));
    }
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        if let Some(sink) = &self.sink {
            if let Ok(mut v) = sink.lock() {
                v.push((self.worker, self.stats.clone()));
            }
        }
    }
}

impl Handler for HttpServer {
    type Conn = HttpConn;

    fn accept(
        &mut self,
        _local: std::net::SocketAddr,
        _remote: std::net::SocketAddr,
    ) -> Option<HttpConn> {
        if self.active >= self.cfg.max_connections {
            self.stats.refused_connections += 1;
            return None;
        }
        self.active += 1;
        self.stats.connections += 1;
        Some(HttpConn::default())
    }

    fn connected(&mut self, conn: &mut Conn<'_, HttpConn>) {
        if self.cfg.send_timeout.is_some() {
            conn.set_user_timeout(self.cfg.send_timeout);
        }
        self.enter(conn, Phase::Reading);
    }

    fn data(&mut self, conn: &mut Conn<'_, HttpConn>, data: &[u8]) -> usize {
        if conn.state().closing {
            return data.len();
        }
        let limits = self.cfg.limits;
        let mut consumed = 0;
        while consumed < data.len() {
            if conn.send_space() < HEAD_ROOM {
                // Answer the rest once the peer has read some of what is queued.
                conn.notify_writable();
                if conn.state().phase != Phase::Blocked {
                    self.stats.backpressure_pauses += 1;
                    self.enter(conn, Phase::Blocked);
                }
                return consumed;
            }
            match parse_request(&data[consumed..], &limits) {
                Parsed::Complete(req) => {
                    consumed += req.len;
                    conn.state().partial = false;
                    if self.respond(conn, &req) == After::Close {
                        self.close(conn);
                        return data.len();
                    }
                }
                Parsed::Partial => {
                    conn.state().partial = true;
                    if conn.state().phase != Phase::Reading {
                        self.enter(conn, Phase::Reading);
                    }
                    return consumed;
                }
                Parsed::Error(e) => {
                    self.stats.requests += 1;
                    let minor = 1;
                    self.send_error(conn, e.status(), b"", false, minor, After::Close);
                    self.close(conn);
                    return data.len();
                }
            }
        }
        conn.state().partial = false;
        if conn.state().peer_closed {
            self.close(conn);
        } else {
            self.enter(conn, Phase::Idle);
        }
        consumed
    }

    fn peer_closed(&mut self, conn: &mut Conn<'_, HttpConn>) {
        let st = conn.state();
        st.peer_closed = true;
        // Blocked: complete requests still wait for send space; close after them.
        // Otherwise nothing more can complete.
        if !st.closing && st.phase != Phase::Blocked {
            self.close(conn);
        }
    }

    fn timer(&mut self, conn: &mut Conn<'_, HttpConn>) {
        if conn.state().closing {
            return;
        }
        // Response bytes still unacknowledged: a graceful close would wait on a client
        // that may never read them. Give it one more period if it made progress since
        // the last look; otherwise reset it, so its slot comes back now.
        let unacked = conn.unacked_len();
        if unacked > 0 {
            let before = conn.state().unacked_at_timeout.replace(unacked);
            if before.is_none_or(|b| unacked < b) {
                conn.set_timer(Some(self.cfg.keepalive_timeout));
                return;
            }
            self.stats.stalled_aborts += 1;
            conn.state().closing = true;
            conn.abort();
            return;
        }
        let st = conn.state();
        match st.phase {
            Phase::Reading if st.partial => {
                self.stats.header_timeouts += 1;
                self.send_error(conn, 408, b"", false, 1, After::Close);
            }
            Phase::Reading => self.stats.header_timeouts += 1,
            Phase::Idle | Phase::Blocked => self.stats.idle_timeouts += 1,
        }
        self.close(conn);
    }

    fn closed(&mut self, _opener: &mut Opener<'_, HttpConn>, _state: HttpConn, _r: CloseReason) {
        self.active = self.active.saturating_sub(1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::date::format_imf_fixdate;

    fn file() -> FileEntry {
        FileEntry::new(
            "/f.txt".into(),
            Bytes::from_static(b"0123456789"),
            1_000_000,
        )
    }

    fn req<'a>() -> Request<'a> {
        Request {
            method: Method::Get,
            target: "/f.txt",
            minor: 1,
            has_host: true,
            close: false,
            keep_alive: false,
            if_none_match: None,
            if_modified_since: None,
            range: None,
            if_range: None,
            has_body: false,
            len: 0,
        }
    }

    #[test]
    fn entity_tags_compare_weakly() {
        let f = file();
        assert!(etag_matches(&f.etag, &f.etag));
        assert!(etag_matches(&format!("\"x\", W/{}", f.etag), &f.etag));
        assert!(etag_matches("*", &f.etag));
        assert!(!etag_matches("\"other\"", &f.etag));
        assert!(!etag_matches("", &f.etag));
    }

    #[test]
    fn conditional_requests() {
        let f = file();
        let same = format_imf_fixdate(f.last_modified);
        let later = format_imf_fixdate(f.last_modified + 10);
        let earlier = format_imf_fixdate(f.last_modified - 10);
        let etag = f.etag.clone();
        let mut r = req();
        assert_eq!(answer_for(&r, &f), FileAnswer::Full);
        r.if_none_match = Some(&etag);
        assert_eq!(answer_for(&r, &f), FileAnswer::NotModified);
        r.if_none_match = Some("\"nope\"");
        // If-None-Match present and failing: If-Modified-Since is not consulted.
        r.if_modified_since = Some(&later);
        assert_eq!(answer_for(&r, &f), FileAnswer::Full);
        r.if_none_match = None;
        assert_eq!(answer_for(&r, &f), FileAnswer::NotModified);
        r.if_modified_since = Some(&same);
        assert_eq!(answer_for(&r, &f), FileAnswer::NotModified);
        r.if_modified_since = Some(&earlier);
        assert_eq!(answer_for(&r, &f), FileAnswer::Full);
        r.if_modified_since = Some("garbage");
        assert_eq!(answer_for(&r, &f), FileAnswer::Full);
    }

    #[test]
    fn ranges_and_if_range() {
        let f = file();
        let etag = f.etag.clone();
        let date = format_imf_fixdate(f.last_modified);
        let mut r = req();
        r.range = Some("bytes=2-4");
        assert_eq!(answer_for(&r, &f), FileAnswer::Partial(2, 5));
        r.range = Some("bytes=10-");
        assert_eq!(answer_for(&r, &f), FileAnswer::Unsatisfiable);
        r.range = Some("bytes=-3");
        r.if_range = Some(&etag);
        assert_eq!(answer_for(&r, &f), FileAnswer::Partial(7, 10));
        r.if_range = Some(&date);
        assert_eq!(answer_for(&r, &f), FileAnswer::Partial(7, 10));
        r.if_range = Some("\"stale\"");
        assert_eq!(answer_for(&r, &f), FileAnswer::Full);
        let weak = format!("W/{etag}");
        r.if_range = Some(&weak);
        assert_eq!(answer_for(&r, &f), FileAnswer::Full);
    }
}
