//! Request heads: parsing, persistence by version and `Connection`, the framing rules for
//! `Content-Length` and `Transfer-Encoding`, the status each error maps to, and pipelined
//! requests on split input.

use super::*;

fn complete(buf: &[u8]) -> Request<'_> {
    match parse_request(buf, &Limits::default()) {
        Parsed::Complete(r) => r,
        other => panic!("{other:?} for {:?}", String::from_utf8_lossy(buf)),
    }
}

fn error(buf: &[u8]) -> ParseError {
    match parse_request(buf, &Limits::default()) {
        Parsed::Error(e) => e,
        other => panic!("{other:?} for {:?}", String::from_utf8_lossy(buf)),
    }
}

#[test]
fn parses_a_request_head() {
    let buf =
        b"GET /a?b HTTP/1.1\r\nHost: x\r\nRange: bytes=0-1\r\nIf-None-Match: \"e\"\r\n\r\nrest";
    let r = complete(buf);
    assert_eq!(r.method, Method::Get);
    assert_eq!(r.target, "/a?b");
    assert_eq!((r.minor, r.has_host, r.close), (1, true, false));
    assert_eq!(r.range, Some("bytes=0-1"));
    assert_eq!(r.if_none_match, Some("\"e\""));
    assert_eq!(r.len, buf.len() - 4);
    assert!(r.persistent());
}

#[test]
fn persistence_by_version_and_connection() {
    let p = |b: &[u8]| complete(b).persistent();
    assert!(p(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n"));
    assert!(!p(
        b"GET / HTTP/1.1\r\nHost: x\r\nConnection: Close\r\n\r\n"
    ));
    assert!(!p(
        b"GET / HTTP/1.1\r\nHost: x\r\nConnection: foo, close\r\n\r\n"
    ));
    assert!(!p(b"GET / HTTP/1.0\r\n\r\n"));
    assert!(p(b"GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n"));
    assert!(!p(
        b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc"
    ));
    assert!(p(b"GET / HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n"));
}

#[test]
fn errors_map_to_statuses() {
    assert_eq!(error(b"GET / HTTP/2.0\r\n\r\n").status(), 505);
    assert_eq!(error(b"GET / HTTP/1.2\r\nHost: x\r\n\r\n").status(), 505);
    assert_eq!(error(b"GET / HTTP/1.1\r\n\r\n").status(), 400);
    assert_eq!(
        error(b"GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n").status(),
        400
    );
    assert_eq!(error(b"GET /a b HTTP/1.1\r\nHost: x\r\n\r\n").status(), 400);
    assert_eq!(error(b"\x01\x02garbage\r\n\r\n").status(), 400);
    assert_eq!(
        error(b"GET / HTTP/1.1\r\nHost: x\r\nContent-Length: x\r\n\r\n").status(),
        400
    );
    let long = format!("GET /{} HTTP/1.1\r\nHost: x\r\n\r\n", "a".repeat(3000));
    assert_eq!(error(long.as_bytes()).status(), 414);
    // Over the limit before the line is even complete.
    let partial = format!("GET /{}", "a".repeat(3000));
    assert_eq!(error(partial.as_bytes()).status(), 414);
    let big = format!(
        "GET / HTTP/1.1\r\nHost: x\r\nX: {}\r\n\r\n",
        "a".repeat(9000)
    );
    assert_eq!(error(big.as_bytes()).status(), 431);
    let big_partial = format!("GET / HTTP/1.1\r\nHost: x\r\nX: {}", "a".repeat(9000));
    assert_eq!(error(big_partial.as_bytes()).status(), 431);
    let many: String = (0..100).map(|i| format!("X{i}: y\r\n")).collect();
    let many = format!("GET / HTTP/1.1\r\nHost: x\r\n{many}\r\n");
    assert_eq!(error(many.as_bytes()).status(), 431);
}

fn with_fields(version: &str, fields: &[&[u8]]) -> Vec<u8> {
    let mut head = format!("POST / HTTP/{version}\r\nHost: x\r\n").into_bytes();
    for f in fields {
        head.extend_from_slice(f);
        head.extend_from_slice(b"\r\n");
    }
    head.extend_from_slice(b"\r\n");
    head
}

fn framing_status(version: &str, fields: &[&[u8]]) -> Option<u16> {
    match parse_request(&with_fields(version, fields), &Limits::default()) {
        Parsed::Complete(_) => None,
        Parsed::Error(e) => Some(e.status()),
        Parsed::Partial => panic!("partial head for {fields:?}"),
    }
}

/// RFC 9112 §6.3 item 5: differing lengths are unrecoverable; like nginx we also
/// refuse repeated identical ones, and a value must be `1*DIGIT`.
#[test]
fn content_length_must_be_one_plain_number() {
    let st = |f: &[&[u8]]| framing_status("1.1", f);
    assert_eq!(st(&[b"Content-Length: 5", b"Content-Length: 6"]), Some(400));
    assert_eq!(st(&[b"Content-Length: 5", b"Content-Length: 5"]), Some(400));
    assert_eq!(st(&[b"Content-Length: 0", b"content-length: 0"]), Some(400));
    for bad in [
        &b"Content-Length: 5, 6"[..],
        b"Content-Length: 5,5",
        b"Content-Length: +5",
        b"Content-Length: -1",
        b"Content-Length: 0x10",
        b"Content-Length: 1 2",
        b"Content-Length: 99999999999999999999999",
        b"Content-Length: \xff5",
        b"Content-Length:",
    ] {
        assert_eq!(st(&[bad]), Some(400), "{}", String::from_utf8_lossy(bad));
    }
    let buf = with_fields("1.1", &[b"Content-Length: \t17 "]);
    let r = complete(&buf);
    assert!(r.has_body && !r.persistent());
}

/// RFC 9112 §6.1: only `chunked` (never decoded: the connection closes after the
/// response); other codings 501; TE with CL, twice, or in 1.0 is 400.
#[test]
fn transfer_encoding_is_chunked_or_refused() {
    let st = |f: &[&[u8]]| framing_status("1.1", f);
    for unknown in [
        &b"Transfer-Encoding: gzip"[..],
        b"Transfer-Encoding: gzip, chunked",
        b"Transfer-Encoding: chunked, gzip",
        b"Transfer-Encoding: chunked, chunked",
        b"Transfer-Encoding: identity",
        b"Transfer-Encoding: chunked;x=1",
        b"Transfer-Encoding: \xffchunked",
        b"Transfer-Encoding:",
    ] {
        assert_eq!(
            st(&[unknown]),
            Some(501),
            "{}",
            String::from_utf8_lossy(unknown)
        );
    }
    let te = b"Transfer-Encoding: chunked";
    for (fields, want) in [
        (
            &[&b"Transfer-Encoding: gzip"[..], b"Content-Length: 3"][..],
            501,
        ),
        (&[te, te], 400),
        (&[te, b"Content-Length: 3"], 400),
        (&[b"Content-Length: 0", te], 400),
    ] {
        assert_eq!(st(fields), Some(want), "{fields:?}");
    }
    let one_o = |f: &[&[u8]]| framing_status("1.0", f);
    assert_eq!(one_o(&[b"Transfer-Encoding: chunked"]), Some(400));
    assert_eq!(one_o(&[b"Transfer-Encoding: gzip"]), Some(400));
    for fine in [
        &b"Transfer-Encoding: chunked"[..],
        b"transfer-encoding:  Chunked\t",
    ] {
        let buf = with_fields("1.1", &[fine]);
        let r = complete(&buf);
        assert!(r.has_body && !r.persistent());
    }
}

/// The smuggling shape: a body that holds a second request is never parsed as
/// one; the head is an error, and the server closes after answering it.
#[test]
fn conflicting_framing_hides_no_request() {
    let body = b"0\r\n\r\nGET /secret HTTP/1.1\r\nHost: x\r\n\r\n";
    for fields in [
        &[&b"Transfer-Encoding: chunked"[..], b"Content-Length: 38"][..],
        &[b"Content-Length: 38", b"Content-Length: 0"],
        &[b"Transfer-Encoding: xchunked"],
    ] {
        let mut buf = with_fields("1.1", fields);
        buf.extend_from_slice(body);
        assert!(
            matches!(
                parse_request(&buf, &Limits::default()),
                Parsed::Error(ParseError::Malformed | ParseError::NotImplemented)
            ),
            "{fields:?}"
        );
    }
}

/// Pipelined requests split at every byte boundary: consuming `len` per complete
/// head and waiting on `Partial` yields every request, in order.
#[test]
fn pipelined_requests_on_split_input() {
    let stream = b"GET /1 HTTP/1.1\r\nHost: x\r\n\r\nHEAD /2 HTTP/1.1\r\nHost: x\r\n\r\nGET /3 HTTP/1.0\r\n\r\n";
    for split in 0..=stream.len() {
        let mut pending: Vec<u8> = Vec::new();
        let mut seen = Vec::new();
        for chunk in [&stream[..split], &stream[split..]] {
            pending.extend_from_slice(chunk);
            loop {
                match parse_request(&pending, &Limits::default()) {
                    Parsed::Complete(r) => {
                        seen.push((r.method, r.target.to_string()));
                        let n = r.len;
                        pending.drain(..n);
                    }
                    Parsed::Partial => break,
                    Parsed::Error(e) => panic!("{e:?} at split {split}"),
                }
            }
        }
        assert!(pending.is_empty());
        assert_eq!(
            seen,
            vec![
                (Method::Get, "/1".to_string()),
                (Method::Head, "/2".to_string()),
                (Method::Get, "/3".to_string())
            ],
            "split {split}"
        );
    }
}
