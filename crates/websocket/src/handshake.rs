//! The opening handshake (RFC 6455 §4): reading an HTTP/1.1 head that arrives in
//! pieces, the server's checks of the upgrade request (§4.2.1) and its answers (§4.2.2),
//! and the client's request (§4.1) and checks of the response.

use std::fmt::Write as _;

use sha1::{Digest, Sha1};

use crate::base64;
use crate::deflate::{self, DeflateConfig, Negotiated};

/// The GUID RFC 6455 §1.3 appends to the key before hashing.
const GUID: &str = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";

/// The most header lines a head may have.
const MAX_HEADERS: usize = 64;

/// `Sec-WebSocket-Accept` for a `Sec-WebSocket-Key` (§4.2.2 item 5.4): base64 of the
/// SHA-1 of the key followed by the GUID.
pub fn accept_key(key: &str) -> String {
    let mut h = Sha1::new();
    h.update(key.as_bytes());
    h.update(GUID.as_bytes());
    base64::encode(&h.finalize())
}

/// Accumulates an HTTP head (request or status line plus headers) from pieces of any
/// size, up to a limit.
#[derive(Debug, Default)]
pub struct HeadBuffer {
    buf: Vec<u8>,
}

/// What [`HeadBuffer::push`] made of the input.
// Exhaustive: a head is incomplete, complete or over the limit; there is no fourth outcome.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HeadProgress {
    /// All input was taken; the head is not complete yet.
    Partial,
    /// The head is complete; this many bytes of the input belonged to it (the rest is
    /// what follows the head, e.g. the first frames).
    Complete(usize),
    /// The head grew beyond the limit without ending.
    TooLarge,
}

impl HeadBuffer {
    /// Take the next `data`, holding at most `max` bytes of head.
    pub fn push(&mut self, data: &[u8], max: usize) -> HeadProgress {
        let old = self.buf.len();
        let take = data.len().min((max + 1).saturating_sub(old));
        self.buf.extend_from_slice(&data[..take]);
        // The blank line may straddle the previous piece: look back three bytes.
        let from = old.saturating_sub(3);
        if let Some(end) = find_head_end(&self.buf, from) {
            if end <= max {
                self.buf.truncate(end);
                return HeadProgress::Complete(end - old);
            }
        }
        if self.buf.len() > max {
            HeadProgress::TooLarge
        } else {
            HeadProgress::Partial
        }
    }

    /// The head so far.
    pub fn bytes(&self) -> &[u8] {
        &self.buf
    }

    /// Free the buffer.
    pub fn clear(&mut self) {
        self.buf = Vec::new();
    }
}

/// The end of the head (just past the blank line) at or after `from`, accepting bare
/// LF line ends as RFC 9112 §2.2 allows.
fn find_head_end(buf: &[u8], from: usize) -> Option<usize> {
    let mut i = from;
    while let Some(p) = buf[i..].iter().position(|&b| b == b'\n') {
        let nl = i + p;
        match buf.get(nl + 1) {
            Some(b'\n') => return Some(nl + 2),
            Some(b'\r') if buf.get(nl + 2) == Some(&b'\n') => return Some(nl + 3),
            _ => i = nl + 1,
        }
    }
    None
}

/// Why a head could not be parsed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum HeadError {
    /// Not HTTP/1.x syntax.
    Malformed,
    /// More than 64 header lines.
    TooManyHeaders,
}

fn head_error(e: httparse::Error) -> HeadError {
    match e {
        httparse::Error::TooManyHeaders => HeadError::TooManyHeaders,
        _ => HeadError::Malformed,
    }
}

fn owned_headers(headers: &[httparse::Header<'_>]) -> Result<Vec<(String, String)>, HeadError> {
    headers
        .iter()
        .map(|h| {
            let v = std::str::from_utf8(h.value).map_err(|_| HeadError::Malformed)?;
            Ok((h.name.to_string(), v.trim().to_string()))
        })
        .collect()
}

/// Header lookup shared by requests and responses.
fn header_values<'a>(
    headers: &'a [(String, String)],
    name: &'static str,
) -> impl Iterator<Item = &'a str> + 'a {
    headers
        .iter()
        .filter(move |(n, _)| n.eq_ignore_ascii_case(name))
        .map(|(_, v)| v.as_str())
}

/// The comma-separated tokens of every `name` header, trimmed, empty ones skipped
/// (RFC 9110 §5.6.1 lists).
fn header_tokens<'a>(
    headers: &'a [(String, String)],
    name: &'static str,
) -> impl Iterator<Item = &'a str> + 'a {
    header_values(headers, name)
        .flat_map(|v| v.split(','))
        .map(str::trim)
        .filter(|t| !t.is_empty())
}

fn has_token(headers: &[(String, String)], name: &'static str, token: &str) -> bool {
    header_tokens(headers, name).any(|t| t.eq_ignore_ascii_case(token))
}

/// A client's opening handshake as the application sees it in
/// [`WsServerApp::open`](crate::WsServerApp::open).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    method: String,
    path: String,
    minor_version: u8,
    headers: Vec<(String, String)>,
}

impl Request {
    /// Parse a complete head (as [`HeadBuffer`] collected it).
    pub fn parse(head: &[u8]) -> Result<Request, HeadError> {
        let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
        let mut req = httparse::Request::new(&mut headers);
        match req.parse(head).map_err(head_error)? {
            httparse::Status::Complete(_) => {}
            httparse::Status::Partial => return Err(HeadError::Malformed),
        }
        Ok(Request {
            method: req.method.unwrap_or_default().to_string(),
            path: req.path.unwrap_or_default().to_string(),
            minor_version: req.version.unwrap_or(0),
            headers: owned_headers(req.headers)?,
        })
    }

    /// The method (`GET` for a valid upgrade).
    pub fn method(&self) -> &str {
        &self.method
    }

    /// The request target: the resource name of §4.1 (path and query).
    pub fn path(&self) -> &str {
        &self.path
    }

    /// Every header, in order, names as sent.
    pub fn headers(&self) -> &[(String, String)] {
        &self.headers
    }

    /// The first value of header `name` (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// `Host`.
    pub fn host(&self) -> Option<&str> {
        self.header("Host")
    }

    /// `Origin`, sent by browsers (§4.1 item 8; §10.2 on checking it).
    pub fn origin(&self) -> Option<&str> {
        self.header("Origin")
    }

    /// The subprotocols the client offers (`Sec-WebSocket-Protocol`), in its order of
    /// preference; the application may choose one in its
    /// [`Accept`](crate::Accept).
    pub fn protocols(&self) -> impl Iterator<Item = &str> + '_ {
        header_tokens(&self.headers, "Sec-WebSocket-Protocol")
    }

    /// The raw values of every `Sec-WebSocket-Extensions` header, for extension
    /// negotiation (see [`extension`](crate::extension)).
    pub fn extensions(&self) -> impl Iterator<Item = &str> + '_ {
        header_values(&self.headers, "Sec-WebSocket-Extensions")
    }

    /// `Sec-WebSocket-Key`.
    pub fn key(&self) -> Option<&str> {
        self.header("Sec-WebSocket-Key")
    }

    /// Check the request is a WebSocket upgrade RFC 6455 §4.2.1 accepts; returns the
    /// `Sec-WebSocket-Accept` value for the response, or the error response to send.
    pub fn validate(&self) -> Result<String, Reject> {
        if self.method != "GET" {
            return Err(Reject::new(405)
                .header("Allow", "GET")
                .body("WebSocket upgrades use GET\n"));
        }
        if self.minor_version < 1 {
            return Err(Reject::new(400).body("WebSocket needs HTTP/1.1\n"));
        }
        if self.host().is_none() {
            return Err(Reject::new(400).body("missing Host\n"));
        }
        if !has_token(&self.headers, "Upgrade", "websocket") {
            return Err(Reject::new(400).body("not a WebSocket upgrade (Upgrade: websocket)\n"));
        }
        if !has_token(&self.headers, "Connection", "Upgrade") {
            return Err(Reject::new(400).body("not a WebSocket upgrade (Connection: Upgrade)\n"));
        }
        // §4.2.2: a version we do not speak gets 426 naming the ones we do.
        let versions: Vec<&str> = header_values(&self.headers, "Sec-WebSocket-Version").collect();
        if versions != ["13"] {
            return Err(Reject::new(426)
                .header("Sec-WebSocket-Version", "13")
                .body("WebSocket version 13 only\n"));
        }
        let mut keys = header_values(&self.headers, "Sec-WebSocket-Key");
        let key = match (keys.next(), keys.next()) {
            (Some(k), None) if base64::decode(k).is_some_and(|b| b.len() == 16) => k,
            _ => return Err(Reject::new(400).body("bad Sec-WebSocket-Key\n")),
        };
        Ok(accept_key(key))
    }
}

/// A refusal of the handshake: an HTTP error response, after which the connection
/// closes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reject {
    status: u16,
    headers: Vec<(String, String)>,
    body: String,
}

impl Reject {
    /// A refusal with HTTP status `status` (e.g. 403 for an origin the application does
    /// not serve, 404 for an unknown path).
    pub fn new(status: u16) -> Reject {
        Reject {
            status,
            headers: Vec::new(),
            body: String::new(),
        }
    }

    /// Add a response header.
    pub fn header(mut self, name: &str, value: &str) -> Reject {
        self.headers.push((name.to_string(), value.to_string()));
        self
    }

    /// Set the response body (plain text).
    pub fn body(mut self, body: &str) -> Reject {
        self.body = body.to_string();
        self
    }

    /// The HTTP status.
    pub fn status(&self) -> u16 {
        self.status
    }

    /// The whole response.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut s = format!(
            "HTTP/1.1 {} {}\r\n",
            self.status,
            reason_phrase(self.status)
        );
        for (n, v) in &self.headers {
            let _ = write!(s, "{n}: {v}\r\n");
        }
        let _ = write!(
            s,
            "Content-Type: text/plain; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{}",
            self.body.len(),
            self.body
        );
        s.into_bytes()
    }
}

fn reason_phrase(status: u16) -> &'static str {
    match status {
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        426 => "Upgrade Required",
        429 => "Too Many Requests",
        431 => "Request Header Fields Too Large",
        500 => "Internal Server Error",
        503 => "Service Unavailable",
        _ => "Error",
    }
}

/// The server's 101 response (§4.2.2 item 5).
pub fn switching_protocols(
    accept: &str,
    protocol: Option<&str>,
    extensions: Option<&str>,
    headers: &[(String, String)],
) -> Vec<u8> {
    let mut s = format!(
        "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: {accept}\r\n"
    );
    if let Some(p) = protocol {
        let _ = write!(s, "Sec-WebSocket-Protocol: {p}\r\n");
    }
    if let Some(e) = extensions {
        let _ = write!(s, "Sec-WebSocket-Extensions: {e}\r\n");
    }
    for (n, v) in headers {
        let _ = write!(s, "{n}: {v}\r\n");
    }
    s.push_str("\r\n");
    s.into_bytes()
}

/// What a client asks for in its opening handshake (§4.1).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ClientRequest {
    /// `Host` (e.g. `example.com:9001`).
    pub host: String,
    /// The resource name (e.g. `/chat?room=1`); `/` when empty.
    pub path: String,
    /// Subprotocols to offer, most preferred first.
    pub protocols: Vec<String>,
    /// `Origin`, if any.
    pub origin: Option<String>,
    /// Further headers.
    pub headers: Vec<(String, String)>,
}

impl ClientRequest {
    /// A request for `path` on `host`.
    pub fn new(host: &str, path: &str) -> ClientRequest {
        ClientRequest {
            host: host.to_string(),
            path: path.to_string(),
            ..ClientRequest::default()
        }
    }

    /// The request's bytes with `key` as `Sec-WebSocket-Key`.
    pub fn to_bytes(&self, key: &str) -> Vec<u8> {
        self.to_bytes_offering(key, None)
    }

    /// The request's bytes with `key` as `Sec-WebSocket-Key` and, if given, `extensions`
    /// as `Sec-WebSocket-Extensions` (the client's permessage-deflate offer).
    pub fn to_bytes_offering(&self, key: &str, extensions: Option<&str>) -> Vec<u8> {
        let path = if self.path.is_empty() {
            "/"
        } else {
            &self.path
        };
        let mut s = format!(
            "GET {path} HTTP/1.1\r\nHost: {}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n",
            self.host
        );
        if !self.protocols.is_empty() {
            let _ = write!(
                s,
                "Sec-WebSocket-Protocol: {}\r\n",
                self.protocols.join(", ")
            );
        }
        if let Some(o) = &self.origin {
            let _ = write!(s, "Origin: {o}\r\n");
        }
        if let Some(e) = extensions {
            let _ = write!(s, "Sec-WebSocket-Extensions: {e}\r\n");
        }
        for (n, v) in &self.headers {
            let _ = write!(s, "{n}: {v}\r\n");
        }
        s.push_str("\r\n");
        s.into_bytes()
    }
}

/// Why the server's handshake response was not acceptable (§4.1, client side).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ResponseError {
    /// Not an HTTP/1.1 response head, or too large.
    Malformed,
    /// A status other than 101.
    Status(u16),
    /// Missing `Upgrade: websocket` or `Connection: Upgrade`.
    NotUpgrade,
    /// `Sec-WebSocket-Accept` does not match our key.
    BadAccept,
    /// The server chose a subprotocol we did not offer.
    BadProtocol,
    /// The server answered with extensions we did not offer.
    BadExtension,
    /// The server's permessage-deflate answer does not fit our offer (RFC 7692 §5).
    BadDeflate(String),
}

/// What a server's acceptable handshake response chose.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ServerAnswer {
    /// The subprotocol the server chose, if any.
    pub protocol: Option<String>,
    /// The permessage-deflate parameters in force, if the server accepted our offer.
    pub deflate: Option<Negotiated>,
}

/// Check the server's response head to a request with `key` offering `offered`
/// subprotocols and, when `deflate` is enabled, permessage-deflate
/// ([`deflate::client_offer`]). An extension we did not offer, or a permessage-deflate
/// answer [`deflate::client_accept`] refuses, is an error (§4.1: the client fails the
/// connection).
pub fn check_response(
    head: &[u8],
    key: &str,
    offered: &[String],
    deflate: &DeflateConfig,
) -> Result<ServerAnswer, ResponseError> {
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut resp = httparse::Response::new(&mut headers);
    match resp.parse(head) {
        Ok(httparse::Status::Complete(_)) => {}
        _ => return Err(ResponseError::Malformed),
    }
    let code = resp.code.unwrap_or(0);
    let headers = owned_headers(resp.headers).map_err(|_| ResponseError::Malformed)?;
    if code != 101 {
        return Err(ResponseError::Status(code));
    }
    if !has_token(&headers, "Upgrade", "websocket") || !has_token(&headers, "Connection", "Upgrade")
    {
        return Err(ResponseError::NotUpgrade);
    }
    if header_values(&headers, "Sec-WebSocket-Accept").next() != Some(accept_key(key).as_str()) {
        return Err(ResponseError::BadAccept);
    }
    let extensions = header_values(&headers, "Sec-WebSocket-Extensions")
        .collect::<Vec<_>>()
        .join(", ");
    let deflate = if header_tokens(&headers, "Sec-WebSocket-Extensions")
        .next()
        .is_none()
    {
        None
    } else {
        // Only permessage-deflate can have been offered, and only when enabled.
        let names = deflate::extension_names(&extensions).ok_or(ResponseError::BadExtension)?;
        if !deflate.enabled || names.iter().any(|n| n != deflate::EXTENSION_NAME) {
            return Err(ResponseError::BadExtension);
        }
        let neg = deflate::client_accept(&extensions, deflate)
            .map_err(|e| ResponseError::BadDeflate(e.to_string()))?;
        Some(neg)
    };
    let chosen = header_values(&headers, "Sec-WebSocket-Protocol").next();
    let protocol = match chosen {
        None => None,
        Some(p) if offered.iter().any(|o| o == p) => Some(p.to_string()),
        Some(_) => return Err(ResponseError::BadProtocol),
    };
    Ok(ServerAnswer { protocol, deflate })
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = "GET /chat HTTP/1.1\r\nHost: server.example.com\r\nUpgrade: websocket\r\nConnection: keep-alive, Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nOrigin: http://example.com\r\nSec-WebSocket-Protocol: chat, superchat\r\nSec-WebSocket-Version: 13\r\n\r\n";

    #[test]
    fn rfc6455_accept_vector() {
        assert_eq!(
            accept_key("dGhlIHNhbXBsZSBub25jZQ=="),
            "s3pPLMBiTxaQ9kYGzzhZRbK+xOo="
        );
    }

    #[test]
    fn head_split_anywhere() {
        let mut bytes = GOOD.as_bytes().to_vec();
        bytes.extend_from_slice(&[0x81, 0x80, 1, 2, 3, 4]);
        for cut in 0..bytes.len() {
            let mut h = HeadBuffer::default();
            let mut used = match h.push(&bytes[..cut], 8192) {
                HeadProgress::Partial => cut,
                HeadProgress::Complete(n) => n,
                HeadProgress::TooLarge => panic!(),
            };
            if used == cut {
                match h.push(&bytes[cut..], 8192) {
                    HeadProgress::Complete(n) => used += n,
                    p => panic!("{p:?} at {cut}"),
                }
            }
            assert_eq!(used, GOOD.len(), "cut {cut}");
            assert_eq!(h.bytes(), GOOD.as_bytes());
        }
    }

    #[test]
    fn head_limit() {
        let mut h = HeadBuffer::default();
        let line = "X-Filler: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n";
        assert_eq!(h.push(b"GET / HTTP/1.1\r\n", 100), HeadProgress::Partial);
        assert_eq!(h.push(line.as_bytes(), 100), HeadProgress::Partial);
        assert_eq!(h.push(line.as_bytes(), 100), HeadProgress::TooLarge);
        // Exactly at the limit is fine.
        let mut h = HeadBuffer::default();
        assert_eq!(
            h.push(b"GET / HTTP/1.1\r\n\r\n", 18),
            HeadProgress::Complete(18)
        );
    }

    #[test]
    fn good_request() {
        let r = Request::parse(GOOD.as_bytes()).unwrap();
        assert_eq!(r.validate(), Ok("s3pPLMBiTxaQ9kYGzzhZRbK+xOo=".to_string()));
        assert_eq!(r.path(), "/chat");
        assert_eq!(r.origin(), Some("http://example.com"));
        assert_eq!(r.protocols().collect::<Vec<_>>(), ["chat", "superchat"]);
        // Tokens are case-insensitive, lists may be split over lines.
        let odd = GOOD
            .replace("Upgrade: websocket", "upgrade: WebSocket")
            .replace(
                "Connection: keep-alive, Upgrade",
                "Connection: keep-alive\r\nconnection: upgrade",
            );
        assert!(Request::parse(odd.as_bytes()).unwrap().validate().is_ok());
    }

    fn status_of(req: &str) -> u16 {
        match Request::parse(req.as_bytes()) {
            Ok(r) => r.validate().err().map_or(101, |e| e.status()),
            Err(_) => 400,
        }
    }

    #[test]
    fn bad_requests() {
        let cases = [
            (GOOD.replace("GET", "POST"), 405),
            (GOOD.replace("HTTP/1.1", "HTTP/1.0"), 400),
            (GOOD.replace("Host: server.example.com\r\n", ""), 400),
            (GOOD.replace("Upgrade: websocket\r\n", ""), 400),
            (GOOD.replace("Upgrade: websocket", "Upgrade: h2c"), 400),
            (GOOD.replace("keep-alive, Upgrade", "keep-alive"), 400),
            (
                GOOD.replace("Sec-WebSocket-Version: 13", "Sec-WebSocket-Version: 8"),
                426,
            ),
            (GOOD.replace("Sec-WebSocket-Version: 13\r\n", ""), 426),
            (
                GOOD.replace("dGhlIHNhbXBsZSBub25jZQ==", "dGhlIHNhbXBsZQ=="),
                400,
            ),
            (GOOD.replace("dGhlIHNhbXBsZSBub25jZQ==", "not base64!"), 400),
            (
                GOOD.replace("Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n", ""),
                400,
            ),
            ("GARBAGE\r\n\r\n".to_string(), 400),
        ];
        for (req, want) in cases {
            assert_eq!(status_of(&req), want, "{req}");
        }
        let r = Request::parse(GOOD.replace("13", "8").as_bytes()).unwrap();
        let resp = String::from_utf8(r.validate().unwrap_err().to_bytes()).unwrap();
        assert!(
            resp.starts_with("HTTP/1.1 426 Upgrade Required\r\n"),
            "{resp}"
        );
        assert!(resp.contains("\r\nSec-WebSocket-Version: 13\r\n"), "{resp}");
    }

    #[test]
    fn client_round_trip() {
        let mut req = ClientRequest::new("h:1", "/x");
        req.protocols = vec!["a".into(), "b".into()];
        let key = "dGhlIHNhbXBsZSBub25jZQ==";
        let off = DeflateConfig::default();
        let parsed = Request::parse(&req.to_bytes(key)).unwrap();
        let accept = parsed.validate().unwrap();
        let resp = switching_protocols(&accept, Some("b"), None, &[]);
        assert_eq!(
            check_response(&resp, key, &req.protocols, &off).map(|a| a.protocol),
            Ok(Some("b".into()))
        );
        let resp = switching_protocols(&accept, Some("c"), None, &[]);
        assert_eq!(
            check_response(&resp, key, &req.protocols, &off),
            Err(ResponseError::BadProtocol)
        );
        let other = switching_protocols(&accept_key("x"), None, None, &[]);
        assert_eq!(
            check_response(&other, key, &req.protocols, &off),
            Err(ResponseError::BadAccept)
        );
        let no = Reject::new(403).to_bytes();
        assert_eq!(
            check_response(&no, key, &[], &off),
            Err(ResponseError::Status(403))
        );
    }

    #[test]
    fn client_checks_the_extension_answer() {
        let key = "dGhlIHNhbXBsZSBub25jZQ==";
        let accept = accept_key(key);
        let on = DeflateConfig::enabled();
        let off = DeflateConfig::default();
        let check = |ext: Option<&str>, cfg: &DeflateConfig| {
            check_response(&switching_protocols(&accept, None, ext, &[]), key, &[], cfg)
                .map(|a| a.deflate)
        };
        // No answer: no extension, offered or not.
        assert_eq!(check(None, &on), Ok(None));
        assert_eq!(check(None, &off), Ok(None));
        // Not offered (disabled), or not ours: fail.
        assert_eq!(
            check(Some("permessage-deflate"), &off),
            Err(ResponseError::BadExtension)
        );
        assert_eq!(check(Some("x-foo"), &on), Err(ResponseError::BadExtension));
        assert_eq!(
            check(Some("permessage-deflate, x-foo"), &on),
            Err(ResponseError::BadExtension)
        );
        assert_eq!(
            check(Some("permessage-deflate; a=\"b"), &on),
            Err(ResponseError::BadExtension)
        );
        // A bad permessage-deflate answer: fail.
        for bad in [
            "permessage-deflate; client_max_window_bits",
            "permessage-deflate; server_max_window_bits=7",
            "permessage-deflate; foo",
            "permessage-deflate, permessage-deflate",
        ] {
            assert!(
                matches!(check(Some(bad), &on), Err(ResponseError::BadDeflate(_))),
                "{bad}"
            );
        }
        let neg = check(
            Some("permessage-deflate; server_no_context_takeover; client_max_window_bits=10"),
            &on,
        )
        .unwrap()
        .unwrap();
        assert!(neg.server_no_context_takeover);
        assert_eq!(neg.client_max_window_bits, 10);
    }
}
