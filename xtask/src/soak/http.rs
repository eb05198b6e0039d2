//! The soak clients' side of HTTP/1.1: the requests they send, reading one response
//! (head through `httparse`, body by its `Content-Length`) within a deadline, at full
//! speed or a few bytes at a time, and the checks a response must pass: a whole page
//! byte for byte, or a byte range of it with the right `Content-Range`.

use std::io::{self, Read};
use std::thread;
use std::time::{Duration, Instant};

/// Largest response head read.
const MAX_HEAD: usize = 16 * 1024;

/// Why a request that should have succeeded did not.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Failure {
    /// The connection could not be opened.
    Connect,
    /// No answer, or not all of it, within the time allowed.
    Timeout,
    /// The server reset or aborted the connection.
    Reset,
    /// Another socket error.
    Io,
    /// A response head that does not parse, or lacks `Content-Length`.
    BadHead,
    /// Another status than the one expected.
    Status,
    /// The connection ended before the whole body came.
    Short,
    /// Body bytes other than the file's (or bytes after the body).
    WrongBody,
    /// A `Content-Range` other than the one the request asked for.
    WrongRange,
}

impl Failure {
    pub(crate) const ALL: [Failure; 9] = [
        Failure::Connect,
        Failure::Timeout,
        Failure::Reset,
        Failure::Io,
        Failure::BadHead,
        Failure::Status,
        Failure::Short,
        Failure::WrongBody,
        Failure::WrongRange,
    ];

    pub(crate) fn name(self) -> &'static str {
        match self {
            Failure::Connect => "connect",
            Failure::Timeout => "timeout",
            Failure::Reset => "reset",
            Failure::Io => "socket error",
            Failure::BadHead => "bad head",
            Failure::Status => "wrong status",
            Failure::Short => "short body",
            Failure::WrongBody => "wrong body",
            Failure::WrongRange => "wrong range",
        }
    }

    pub(crate) fn index(self) -> usize {
        Failure::ALL.iter().position(|&f| f == self).unwrap_or(0)
    }
}

/// A failure and what was seen, for the report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Fail {
    pub kind: Failure,
    pub detail: String,
}

pub(crate) fn fail(kind: Failure, detail: impl Into<String>) -> Fail {
    Fail {
        kind,
        detail: detail.into(),
    }
}

/// What a socket error says about the connection.
pub(crate) fn io_fail(e: &io::Error, doing: &str) -> Fail {
    let kind = match e.kind() {
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut => {
            // A read or write timeout: the error's own text ("Resource temporarily
            // unavailable") would not say so.
            return fail(Failure::Timeout, format!("{doing}: timed out"));
        }
        io::ErrorKind::ConnectionReset
        | io::ErrorKind::ConnectionAborted
        | io::ErrorKind::BrokenPipe => Failure::Reset,
        io::ErrorKind::UnexpectedEof => Failure::Short,
        _ => Failure::Io,
    };
    fail(kind, format!("{doing}: {e}"))
}

/// `GET path` on `host`, with `Connection: close` when `close`, plus `extra` header
/// lines (each ending in CRLF).
pub(crate) fn get(host: &str, path: &str, close: bool, extra: &str) -> String {
    let connection = if close { "Connection: close\r\n" } else { "" };
    format!("GET {path} HTTP/1.1\r\nHost: {host}\r\n{connection}{extra}\r\n")
}

/// One response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Response {
    pub status: u16,
    headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    /// The longest a read waited for bytes (the first ones included).
    pub longest_wait: Duration,
}

impl Response {
    /// The first header field `name` (any case).
    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// How a client reads: `chunk` bytes at most per read, `pause` after each.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Pace {
    pub chunk: usize,
    pub pause: Duration,
}

impl Pace {
    /// As fast as the socket gives.
    pub(crate) const FULL: Pace = Pace {
        chunk: 64 * 1024,
        pause: Duration::ZERO,
    };
}

/// Reads one response from `r` by `deadline`, `pace.chunk` bytes at a time. The
/// socket's own read timeout bounds each read; a response still incomplete at
/// `deadline` is a timeout.
pub(crate) fn read_response(
    r: &mut impl Read,
    deadline: Instant,
    pace: Pace,
) -> Result<Response, Fail> {
    let mut reader = Reader {
        r,
        chunk: vec![0; pace.chunk.max(1)],
        deadline,
        pause: pace.pause,
        longest_wait: Duration::ZERO,
    };
    let mut buf = Vec::new();
    let (status, headers, head_len) = loop {
        if let Some(head) = parse_head(&buf)? {
            break head;
        }
        if buf.len() > MAX_HEAD {
            return Err(fail(
                Failure::BadHead,
                format!("no end of head in {MAX_HEAD} bytes"),
            ));
        }
        reader.read_some(&mut buf, "reading the head")?;
    };
    let length = headers
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case("content-length"))
        .and_then(|(_, v)| v.trim().parse::<usize>().ok())
        .ok_or_else(|| fail(Failure::BadHead, format!("{status} without Content-Length")))?;
    let mut body = buf.split_off(head_len);
    while body.len() < length {
        reader
            .read_some(&mut body, "reading the body")
            .map_err(|f| Fail {
                detail: format!("{} ({} of {length} body bytes)", f.detail, body.len()),
                ..f
            })?;
    }
    if body.len() > length {
        return Err(fail(
            Failure::WrongBody,
            format!("{} bytes after a {length}-byte body", body.len() - length),
        ));
    }
    Ok(Response {
        status,
        headers,
        body,
        longest_wait: reader.longest_wait,
    })
}

type Head = (u16, Vec<(String, String)>, usize);

fn parse_head(buf: &[u8]) -> Result<Option<Head>, Fail> {
    let mut fields = [httparse::EMPTY_HEADER; 32];
    let mut resp = httparse::Response::new(&mut fields);
    match resp.parse(buf) {
        Ok(httparse::Status::Complete(len)) => {
            let status = resp.code.unwrap_or(0);
            let headers = resp
                .headers
                .iter()
                .map(|h| {
                    let value = String::from_utf8_lossy(h.value).into_owned();
                    (h.name.to_string(), value)
                })
                .collect();
            Ok(Some((status, headers, len)))
        }
        Ok(httparse::Status::Partial) => Ok(None),
        Err(e) => Err(fail(Failure::BadHead, format!("unreadable head: {e}"))),
    }
}

/// A response being read: the source, its pace and deadline, and the longest wait.
struct Reader<'a, R> {
    r: &'a mut R,
    chunk: Vec<u8>,
    deadline: Instant,
    pause: Duration,
    longest_wait: Duration,
}

impl<R: Read> Reader<'_, R> {
    /// One read, appended to `out`, then the pause. End of stream is a short body;
    /// past the deadline, a timeout.
    fn read_some(&mut self, out: &mut Vec<u8>, doing: &str) -> Result<(), Fail> {
        let start = Instant::now();
        if start >= self.deadline {
            return Err(fail(Failure::Timeout, format!("{doing}: out of time")));
        }
        let n = loop {
            match self.r.read(&mut self.chunk) {
                Ok(n) => break n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(io_fail(&e, doing)),
            }
        };
        self.longest_wait = self.longest_wait.max(start.elapsed());
        if n == 0 {
            return Err(fail(Failure::Short, format!("{doing}: connection closed")));
        }
        out.extend_from_slice(&self.chunk[..n]);
        if !self.pause.is_zero() {
            thread::sleep(self.pause);
        }
        Ok(())
    }
}

/// A whole page: 200 and exactly the file's bytes.
pub(crate) fn check_page(resp: &Response, file: &[u8]) -> Result<(), Fail> {
    if resp.status != 200 {
        return Err(fail(Failure::Status, format!("status {}", resp.status)));
    }
    same_bytes(&resp.body, file)
}

/// The range `first`-`last` of a page (`last` may run past its end: RFC 9110 §14.1.2
/// then means the last byte): 206, `Content-Range: bytes first-end/len` and exactly
/// those bytes of the file.
pub(crate) fn check_range(
    resp: &Response,
    file: &[u8],
    first: usize,
    last: usize,
) -> Result<(), Fail> {
    if first >= file.len() || last < first {
        return Err(fail(
            Failure::WrongRange,
            format!(
                "bytes={first}-{last} is not a satisfiable range of {} bytes",
                file.len()
            ),
        ));
    }
    if resp.status != 206 {
        return Err(fail(
            Failure::Status,
            format!("status {} for bytes={first}-{last}", resp.status),
        ));
    }
    let end = last.min(file.len() - 1);
    let want = format!("bytes {first}-{end}/{}", file.len());
    match resp.header("content-range") {
        Some(got) if got.trim() == want => same_bytes(&resp.body, &file[first..=end]),
        got => Err(fail(
            Failure::WrongRange,
            format!("Content-Range {got:?}, wanted {want:?}"),
        )),
    }
}

fn same_bytes(got: &[u8], want: &[u8]) -> Result<(), Fail> {
    if got.len() < want.len() {
        return Err(fail(
            Failure::Short,
            format!("{} of {} bytes", got.len(), want.len()),
        ));
    }
    if got.len() > want.len() {
        return Err(fail(
            Failure::WrongBody,
            format!("{} bytes where the file has {}", got.len(), want.len()),
        ));
    }
    if got == want {
        return Ok(());
    }
    let at = got.iter().zip(want).position(|(a, b)| a != b).unwrap_or(0);
    Err(fail(
        Failure::WrongBody,
        format!("differs from the file at byte {at} of {}", want.len()),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn page() -> Vec<u8> {
        crate::pages::page_body(3, 2_000)
    }

    fn response(status: &str, extra: &str, body: &[u8]) -> Vec<u8> {
        let mut r = format!(
            "HTTP/1.1 {status}\r\nServer: rusty\r\n{extra}Content-Length: {}\r\n\r\n",
            body.len()
        )
        .into_bytes();
        r.extend_from_slice(body);
        r
    }

    fn read(bytes: &[u8], pace: Pace) -> Result<Response, Fail> {
        read_response(
            &mut &bytes[..],
            Instant::now() + Duration::from_secs(5),
            pace,
        )
    }

    #[test]
    fn reads_a_page_whole_and_slowly() {
        let file = page();
        let wire = response("200 OK", "", &file);
        let slow = Pace {
            chunk: 7,
            pause: Duration::ZERO,
        };
        for pace in [Pace::FULL, slow] {
            let r = read(&wire, pace).unwrap();
            assert_eq!(r.status, 200);
            assert_eq!(r.header("content-length"), Some("2000"));
            assert_eq!(r.header("SERVER"), Some("rusty"));
            assert_eq!(check_page(&r, &file), Ok(()));
        }
    }

    #[test]
    fn a_wrong_or_short_page_fails() {
        let file = page();
        let mut other = file.clone();
        other[1_234] ^= 1;
        let r = read(&response("200 OK", "", &other), Pace::FULL).unwrap();
        let err = check_page(&r, &file).unwrap_err();
        assert_eq!(err.kind, Failure::WrongBody);
        assert!(err.detail.contains("byte 1234"), "{}", err.detail);
        let r = read(&response("200 OK", "", &file[..1_999]), Pace::FULL).unwrap();
        assert_eq!(check_page(&r, &file).unwrap_err().kind, Failure::Short);
        let r = read(&response("404 Not Found", "", b"nope"), Pace::FULL).unwrap();
        assert_eq!(check_page(&r, &file).unwrap_err().kind, Failure::Status);
    }

    #[test]
    fn a_connection_that_ends_early_or_never_answers_fails() {
        let file = page();
        let wire = response("200 OK", "", &file);
        let err = read(&wire[..wire.len() - 10], Pace::FULL).unwrap_err();
        assert_eq!(err.kind, Failure::Short);
        assert!(err.detail.contains("1990 of 2000"), "{}", err.detail);
        assert_eq!(read(b"", Pace::FULL).unwrap_err().kind, Failure::Short);
        let late = read_response(&mut &wire[..], Instant::now(), Pace::FULL).unwrap_err();
        assert_eq!(late.kind, Failure::Timeout);
        let mut extra = wire.clone();
        extra.extend_from_slice(b"HTTP/1.1 200 OK\r\n");
        assert_eq!(
            read(&extra, Pace::FULL).unwrap_err().kind,
            Failure::WrongBody
        );
    }

    #[test]
    fn bad_heads_fail() {
        let no_length = b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nabc";
        assert_eq!(
            read(no_length, Pace::FULL).unwrap_err().kind,
            Failure::BadHead
        );
        assert_eq!(
            read(b"HTTP/1.1 2x0 OK\r\n\r\n", Pace::FULL)
                .unwrap_err()
                .kind,
            Failure::BadHead
        );
        let endless = [b'a'; MAX_HEAD + 100];
        let mut wire = b"HTTP/1.1 200 OK\r\nX: ".to_vec();
        wire.extend_from_slice(&endless);
        assert_eq!(read(&wire, Pace::FULL).unwrap_err().kind, Failure::BadHead);
    }

    #[test]
    fn a_range_must_match_the_file() {
        let file = page();
        let part = |first: usize, end: usize, body: &[u8]| {
            let header = format!("Content-Range: bytes {first}-{end}/2000\r\n");
            read(&response("206 Partial Content", &header, body), Pace::FULL).unwrap()
        };
        let r = part(100, 199, &file[100..200]);
        assert_eq!(check_range(&r, &file, 100, 199), Ok(()));
        // A last byte past the end means the end.
        let r = part(1_990, 1_999, &file[1_990..]);
        assert_eq!(check_range(&r, &file, 1_990, 5_000), Ok(()));
        // Off by one byte of content.
        let r = part(100, 199, &file[101..201]);
        assert_eq!(
            check_range(&r, &file, 100, 199).unwrap_err().kind,
            Failure::WrongBody
        );
        // Right bytes, wrong Content-Range.
        let r = part(100, 198, &file[100..200]);
        assert_eq!(
            check_range(&r, &file, 100, 199).unwrap_err().kind,
            Failure::WrongRange
        );
        // Short.
        let r = part(100, 199, &file[100..150]);
        assert_eq!(
            check_range(&r, &file, 100, 199).unwrap_err().kind,
            Failure::Short
        );
        // The whole page where a part was asked for.
        let r = read(&response("200 OK", "", &file), Pace::FULL).unwrap();
        assert_eq!(
            check_range(&r, &file, 0, 9).unwrap_err().kind,
            Failure::Status
        );
        // A range the client should never have asked for.
        assert_eq!(
            check_range(&r, &file, 2_000, 2_001).unwrap_err().kind,
            Failure::WrongRange
        );
    }

    #[test]
    fn requests_and_failure_names() {
        assert_eq!(
            get("10.0.0.2", "/1.html", true, "Range: bytes=0-9\r\n"),
            "GET /1.html HTTP/1.1\r\nHost: 10.0.0.2\r\nConnection: close\r\n\
             Range: bytes=0-9\r\n\r\n"
        );
        for (i, f) in Failure::ALL.iter().enumerate() {
            assert_eq!(f.index(), i);
        }
        let e = io::Error::from(io::ErrorKind::WouldBlock);
        assert_eq!(io_fail(&e, "x"), fail(Failure::Timeout, "x: timed out"));
        let e = io::Error::from(io::ErrorKind::ConnectionReset);
        assert_eq!(io_fail(&e, "x").kind, Failure::Reset);
    }
}
