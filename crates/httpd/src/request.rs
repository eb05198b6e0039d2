//! Reading one request head off the front of the received bytes (`httparse`), with the
//! limits that keep a connection's pending bytes bounded. Pure: the server calls
//! [`parse_request`] on whatever the stack offers and consumes exactly
//! [`Request::len`] bytes per complete request, so pipelined and split requests need no
//! buffering of our own.
//!
//! Message framing (RFC 9112 §6) is decided the way nginx decides it, since that is
//! what users of a static file server expect, and every error closes the connection:
//! - `Content-Length` must be `1*DIGIT` (RFC 9110 §8.6); anything else, a comma list
//!   included, is 400. Two or more `Content-Length` fields are 400 even when their
//!   values agree: RFC 9112 §6.3 item 5 makes differing values unrecoverable and lets a
//!   recipient merge identical ones, nginx rejects every duplicate, and so do we.
//! - `Transfer-Encoding`: the only coding we take is `chunked` alone, which we never
//!   decode: the body is not read and the connection closes after the response (RFC
//!   9112 §9.6). Any other coding or list of codings is 501 (RFC 9112 §6.1: a server
//!   SHOULD answer 501 to a transfer coding it does not understand). A second
//!   `Transfer-Encoding` field, one in an HTTP/1.0 request (§6.1: its framing is
//!   faulty) and one together with `Content-Length` (§6.1: a smuggling attempt; the
//!   server MUST close after responding) are 400.
//! - Both fields are read as bytes before anything else, so a value that is not UTF-8
//!   is an error rather than a field we skip, whose body would then be parsed as the
//!   next request.

/// Headers parsed per request; more is answered with 431.
pub const MAX_HEADERS: usize = 64;

/// The request method, as far as a static file server tells methods apart.
// Exhaustive: `Other` already stands for every method but the two a static server serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    /// `GET`.
    Get,
    /// `HEAD`: the `GET` response's head, without its body.
    Head,
    /// Any other method; answered with 405.
    Other,
}

/// Limits applied while parsing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Limits {
    /// The whole head (request line and header fields) may be at most this long.
    pub max_header_bytes: usize,
    /// The request target may be at most this long.
    pub max_target: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_header_bytes: 8192,
            max_target: 2048,
        }
    }
}

/// What the server needs of one request head; borrowed from the received bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Request<'a> {
    /// `GET`, `HEAD` or another method.
    pub method: Method,
    /// The request target as sent (path and query, still percent-encoded); at most
    /// [`Limits::max_target`] bytes.
    pub target: &'a str,
    /// Minor version: `0` for HTTP/1.0, `1` for HTTP/1.1.
    pub minor: u8,
    /// The head has a `Host` field (exactly one: a second is an error, as is none in an
    /// HTTP/1.1 request).
    pub has_host: bool,
    /// `Connection: close` was asked for.
    pub close: bool,
    /// `Connection: keep-alive` was asked for (HTTP/1.0 persistence).
    pub keep_alive: bool,
    /// The `If-None-Match` value (entity tags, or `*`), trimmed; the last one if the
    /// field repeats, as for the fields below.
    pub if_none_match: Option<&'a str>,
    /// The `If-Modified-Since` value (an HTTP date), trimmed.
    pub if_modified_since: Option<&'a str>,
    /// The `Range` value, trimmed; evaluated by
    /// [`parse_range`](crate::range::parse_range).
    pub range: Option<&'a str>,
    /// The `If-Range` value (an entity tag or an HTTP date), trimmed.
    pub if_range: Option<&'a str>,
    /// The request announces a body (`Content-Length` > 0 or `Transfer-Encoding:
    /// chunked`): we never read bodies, so the connection closes after the response.
    pub has_body: bool,
    /// Bytes of the head, including the blank line.
    pub len: usize,
}

impl Request<'_> {
    /// Whether the connection may stay open after this request's response
    /// (RFC 9112 §9.3).
    pub fn persistent(&self) -> bool {
        let wanted = if self.minor >= 1 {
            !self.close
        } else {
            self.keep_alive && !self.close
        };
        wanted && !self.has_body
    }
}

/// A request that cannot be answered normally; the status to answer with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ParseError {
    /// 400: not HTTP/1.x syntax, a bad header value, or framing we refuse (see the
    /// [module docs](self)).
    Malformed,
    /// 414: the target is over [`Limits::max_target`].
    TargetTooLong,
    /// 431: the head is over [`Limits::max_header_bytes`] or has too many fields.
    HeadersTooLarge,
    /// 501: a transfer coding other than `chunked` (RFC 9112 §6.1).
    NotImplemented,
    /// 505: a version other than 1.0 or 1.1.
    Version,
}

impl ParseError {
    /// The response status code for this error (400, 414, 431, 501 or 505).
    pub fn status(self) -> u16 {
        match self {
            ParseError::Malformed => 400,
            ParseError::TargetTooLong => 414,
            ParseError::HeadersTooLarge => 431,
            ParseError::NotImplemented => 501,
            ParseError::Version => 505,
        }
    }
}

/// What [`parse_request`] found at the front of the received bytes.
// Exhaustive: a head is complete, incomplete or refused; there is no fourth outcome.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Parsed<'a> {
    /// A whole request head, [`Request::len`] bytes long.
    Complete(Request<'a>),
    /// More bytes are needed; those so far are within the limits.
    Partial,
    /// A head that cannot be answered normally: answer with its status and close.
    Error(ParseError),
}

/// `Connection` tokens (comma-separated, case-insensitive).
fn connection_tokens(value: &str, close: &mut bool, keep_alive: &mut bool) {
    for t in value.split(',') {
        let t = t.trim();
        if t.eq_ignore_ascii_case("close") {
            *close = true;
        } else if t.eq_ignore_ascii_case("keep-alive") {
            *keep_alive = true;
        }
    }
}

/// A `Content-Length` value: `1*DIGIT` (RFC 9110 §8.6), so no sign, no list, no
/// overflow.
fn content_length(value: &[u8]) -> Option<u64> {
    let digits = value.trim_ascii();
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(digits).ok()?.parse().ok()
}

/// What the framing fields of one head said.
#[derive(Default)]
struct Framing {
    content_lengths: usize,
    transfer_encodings: usize,
    /// The (last) `Transfer-Encoding` is exactly `chunked`.
    chunked: bool,
}

impl Framing {
    /// The verdict on a head of version 1.`minor` (see the [module docs](self)):
    /// whether it announces a body, or the error it gets.
    fn check(&self, minor: u8) -> Result<bool, ParseError> {
        if self.content_lengths > 1 {
            return Err(ParseError::Malformed);
        }
        if self.transfer_encodings == 0 {
            return Ok(false);
        }
        if self.transfer_encodings > 1 || minor == 0 {
            return Err(ParseError::Malformed);
        }
        if !self.chunked {
            return Err(ParseError::NotImplemented);
        }
        if self.content_lengths > 0 {
            return Err(ParseError::Malformed);
        }
        Ok(true)
    }
}

/// `HTTP/` followed by something other than `1.0`/`1.1` on the first line, so the
/// answer is 505 rather than 400 (httparse reports both as a syntax error).
fn other_http_version(buf: &[u8]) -> bool {
    let line = buf.split(|&c| c == b'\n').next().unwrap_or(buf);
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    let Some(sp) = line.iter().rposition(|&c| c == b' ') else {
        return false;
    };
    let v = &line[sp + 1..];
    v.len() >= 8
        && v.starts_with(b"HTTP/")
        && v[5].is_ascii_digit()
        && v[6] == b'.'
        && v[7].is_ascii_digit()
        && v != b"HTTP/1.0"
        && v != b"HTTP/1.1"
}

/// Parse the request head at the front of `buf`.
pub fn parse_request<'a>(buf: &'a [u8], limits: &Limits) -> Parsed<'a> {
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut req = httparse::Request::new(&mut headers);
    let len = match req.parse(buf) {
        Ok(httparse::Status::Complete(n)) => n,
        Ok(httparse::Status::Partial) => {
            // The request line alone is over the target limit (plus room for the
            // method and version): 414 before waiting any longer.
            if !buf.contains(&b'\n') && buf.len() > limits.max_target + 32 {
                return Parsed::Error(ParseError::TargetTooLong);
            }
            if buf.len() > limits.max_header_bytes {
                return Parsed::Error(ParseError::HeadersTooLarge);
            }
            return Parsed::Partial;
        }
        Err(httparse::Error::TooManyHeaders) => return Parsed::Error(ParseError::HeadersTooLarge),
        // httparse also says "version" for a target with a space in it: 505 only
        // when the line really ends in another HTTP version.
        Err(_) if other_http_version(buf) => return Parsed::Error(ParseError::Version),
        Err(_) => return Parsed::Error(ParseError::Malformed),
    };
    let (Some(method), Some(target), Some(minor)) = (req.method, req.path, req.version) else {
        return Parsed::Error(ParseError::Malformed);
    };
    if target.len() > limits.max_target {
        return Parsed::Error(ParseError::TargetTooLong);
    }
    if len > limits.max_header_bytes {
        return Parsed::Error(ParseError::HeadersTooLarge);
    }
    let mut r = Request {
        method: match method {
            "GET" => Method::Get,
            "HEAD" => Method::Head,
            _ => Method::Other,
        },
        target,
        minor,
        has_host: false,
        close: false,
        keep_alive: false,
        if_none_match: None,
        if_modified_since: None,
        range: None,
        if_range: None,
        has_body: false,
        len,
    };
    let mut hosts = 0;
    let mut framing = Framing::default();
    for h in req.headers.iter() {
        let name = h.name;
        // Framing fields on their raw bytes, before the UTF-8 filter below.
        if name.eq_ignore_ascii_case("content-length") {
            framing.content_lengths += 1;
            match content_length(h.value) {
                Some(n) => r.has_body |= n > 0,
                // RFC 9112 §6.3: an invalid Content-Length is unrecoverable.
                None => return Parsed::Error(ParseError::Malformed),
            }
            continue;
        }
        if name.eq_ignore_ascii_case("transfer-encoding") {
            framing.transfer_encodings += 1;
            framing.chunked = h.value.trim_ascii().eq_ignore_ascii_case(b"chunked");
            continue;
        }
        let value = match std::str::from_utf8(h.value) {
            Ok(v) => v.trim(),
            // Only a few fields matter to us; an opaque one we ignore may be anything.
            Err(_) => continue,
        };
        if name.eq_ignore_ascii_case("host") {
            hosts += 1;
            r.has_host = true;
        } else if name.eq_ignore_ascii_case("connection") {
            connection_tokens(value, &mut r.close, &mut r.keep_alive);
        } else if name.eq_ignore_ascii_case("if-none-match") {
            r.if_none_match = Some(value);
        } else if name.eq_ignore_ascii_case("if-modified-since") {
            r.if_modified_since = Some(value);
        } else if name.eq_ignore_ascii_case("range") {
            r.range = Some(value);
        } else if name.eq_ignore_ascii_case("if-range") {
            r.if_range = Some(value);
        }
    }
    // RFC 9112 §3.2: a 1.1 request without Host, or with several, gets 400.
    if hosts > 1 || (minor >= 1 && hosts == 0) {
        return Parsed::Error(ParseError::Malformed);
    }
    match framing.check(minor) {
        Ok(chunked) => r.has_body |= chunked,
        Err(e) => return Parsed::Error(e),
    }
    Parsed::Complete(r)
}

#[cfg(test)]
mod tests;
