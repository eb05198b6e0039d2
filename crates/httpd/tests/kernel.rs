//! httpd on the kernel backend on 127.0.0.1 (no privileges needed), driven by curl,
//! Python's `http.client` and raw sockets. Tools that are missing skip a test with a
//! printed reason, or fail it under `RUSTY_REQUIRE_PRIVILEGED=1` (CI installs them).

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::time::Duration;

use common::{curl_checks, local_checks, local_curl, make_site, total_counter, Scratch, Server};

/// curl: GET, HEAD, Range, conditional GET, keep-alive reuse, HTTP/1.0, redirects,
/// error codes and traversal attempts.
#[test]
fn curl_against_kernel_backend() {
    let Some(tools) = rusty_testnet::tools("curl_against_kernel_backend", &["curl"]) else {
        return;
    };
    let dir = Scratch::new("curl");
    let root = make_site(&dir.0, None);
    let server = Server::start(&root, &dir.0, 2, &[]);
    let curl = local_curl(tools.get("curl"));
    curl_checks(&curl, &server.base(), &root);
    let log = server.stop();
    assert!(total_counter(&log, "requests") > 20, "{log}");
    assert!(
        total_counter(&log, "414") >= 1 && total_counter(&log, "431") >= 1,
        "{log}"
    );
}

/// Python's http.client and raw sockets: every file, HEAD, conditionals, ranges,
/// HTTP/1.0, pipelining (batched, split at random places, 200 in one write), every
/// error status and whether the connection survives it, traversal attempts.
#[test]
fn python_checks_against_kernel_backend() {
    let Some(tools) = rusty_testnet::tools("python_checks_against_kernel_backend", &["python3"])
    else {
        return;
    };
    let dir = Scratch::new("python");
    let root = make_site(&dir.0, None);
    let server = Server::start(&root, &dir.0, 2, &[]);
    local_checks(
        tools.get("python3"),
        server.port,
        &root,
        &["basic", "pipeline", "errors", "traversal"],
        &[],
    );
    let log = server.stop();
    for (counter, at_least) in [
        ("400", 8),
        ("404", 8),
        ("405", 2),
        ("414", 1),
        ("431", 1),
        ("501", 1),
        ("505", 1),
        ("416", 2),
        ("304", 2),
        ("206", 3),
        ("301", 1),
    ] {
        let n = total_counter(&log, counter);
        assert!(n >= at_least, "{counter}: {n} < {at_least}\n{log}");
    }
}

/// Header timeout (slowloris → 408 and close; silent connection closed), keep-alive
/// idle timeout, counted.
#[test]
fn timeouts_on_kernel_backend() {
    let Some(tools) = rusty_testnet::tools("timeouts_on_kernel_backend", &["python3"]) else {
        return;
    };
    let dir = Scratch::new("timeouts");
    let root = make_site(&dir.0, None);
    let server = Server::start(
        &root,
        &dir.0,
        1,
        &["--header-timeout", "1", "--keepalive-timeout", "1.5"],
    );
    local_checks(
        tools.get("python3"),
        server.port,
        &root,
        &["timeouts"],
        &["--header-timeout", "1", "--keepalive-timeout", "1.5"],
    );
    let log = server.stop();
    assert!(total_counter(&log, "header_timeouts") >= 2, "{log}");
    assert!(total_counter(&log, "idle_timeouts") >= 1, "{log}");
}

/// A 100 MB file arrives intact (SHA-256), and a range from its middle.
#[test]
fn hundred_megabytes_intact_on_kernel_backend() {
    let Some(tools) =
        rusty_testnet::tools("hundred_megabytes_intact_on_kernel_backend", &["python3"])
    else {
        return;
    };
    let dir = Scratch::new("big");
    let root = make_site(&dir.0, Some(100 << 20));
    let server = Server::start(&root, &dir.0, 1, &[]);
    local_checks(tools.get("python3"), server.port, &root, &["big"], &[]);
    let log = server.stop();
    assert!(total_counter(&log, "body_bytes") >= 100 << 20, "{log}");
}

/// 100 concurrent keep-alive clients, 20 requests each, every body compared.
#[test]
fn concurrent_clients_on_kernel_backend() {
    let Some(tools) = rusty_testnet::tools("concurrent_clients_on_kernel_backend", &["python3"])
    else {
        return;
    };
    let dir = Scratch::new("concurrent");
    let root = make_site(&dir.0, None);
    let server = Server::start(&root, &dir.0, 2, &[]);
    local_checks(
        tools.get("python3"),
        server.port,
        &root,
        &["concurrent"],
        &["--clients", "100", "--rounds", "20"],
    );
    let log = server.stop();
    assert!(total_counter(&log, "200") >= 2000, "{log}");
}

/// At `--max-connections`, a worker refuses new connections, and counts them.
#[test]
fn connection_limit_on_kernel_backend() {
    let Some(tools) = rusty_testnet::tools("connection_limit_on_kernel_backend", &["python3"])
    else {
        return;
    };
    let dir = Scratch::new("limit");
    let root = make_site(&dir.0, None);
    let server = Server::start(&root, &dir.0, 1, &["--max-connections", "2"]);
    local_checks(tools.get("python3"), server.port, &root, &["refused"], &[]);
    let log = server.stop();
    assert!(total_counter(&log, "refused_connections") >= 1, "{log}");
}

/// Raw socket, no external tool: pipelined requests in one write, then one request
/// fed a byte at a time, answered in order.
#[test]
fn pipelining_over_a_raw_socket() {
    let dir = Scratch::new("raw");
    let root = make_site(&dir.0, None);
    let server = Server::start(&root, &dir.0, 1, &[]);
    let mut s = TcpStream::connect(("127.0.0.1", server.port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let req = |p: &str| format!("GET {p} HTTP/1.1\r\nHost: x\r\n\r\n");
    let batch = [req("/hello.txt"), req("/missing"), req("/style.css")].concat();
    s.write_all(batch.as_bytes()).unwrap();
    for b in req("/sub/page.txt").bytes() {
        s.write_all(&[b]).unwrap();
        std::thread::sleep(Duration::from_millis(1));
    }
    s.write_all(b"GET /hello.txt HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .unwrap();
    let mut all = Vec::new();
    s.read_to_end(&mut all).unwrap();
    let text = String::from_utf8_lossy(&all);
    let statuses: Vec<&str> = text
        .match_indices("HTTP/1.1 ")
        .map(|(i, _)| &text[i + 9..i + 12])
        .collect();
    assert_eq!(statuses, ["200", "404", "200", "200", "200"], "{text}");
    let order = [
        "Hello from Rusty.",
        "404 Not Found",
        "color: #b7410e",
        "a page in a sub",
        "Hello from Rusty.",
    ];
    let mut at = 0;
    for needle in order {
        let i = text[at..]
            .find(needle)
            .unwrap_or_else(|| panic!("{needle} out of order:\n{text}"));
        at += i + needle.len();
    }
    server.stop();
}

/// Raw socket, no external tool: requests whose framing we refuse (two
/// `Content-Length`s, an unknown transfer coding, `Transfer-Encoding` with
/// `Content-Length`) get 400/501 and a close, and a request hidden in the body is never
/// answered; `Transfer-Encoding: chunked` alone is answered, then the connection closes
/// without reading the body.
#[test]
fn framing_errors_close_without_reading_the_body() {
    let dir = Scratch::new("framing");
    let root = make_site(&dir.0, None);
    let server = Server::start(&root, &dir.0, 1, &[]);
    let smuggled = "GET /hello.txt HTTP/1.1\r\nHost: x\r\n\r\n";
    let cases = [
        ("Content-Length: 5\r\nContent-Length: 40\r\n", "400"),
        ("Content-Length: 40\r\nContent-Length: 40\r\n", "400"),
        ("Content-Length: 40, 40\r\n", "400"),
        ("Transfer-Encoding: gzip, chunked\r\n", "501"),
        ("Transfer-Encoding: chunked\r\nContent-Length: 5\r\n", "400"),
        ("Transfer-Encoding: chunked\r\n", "200"),
    ];
    for (fields, want) in cases {
        let mut s = TcpStream::connect(("127.0.0.1", server.port)).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let req = format!("GET /style.css HTTP/1.1\r\nHost: x\r\n{fields}\r\n0\r\n\r\n{smuggled}");
        s.write_all(req.as_bytes()).unwrap();
        let mut all = Vec::new();
        // The server closes: EOF, or a reset once the response is in.
        let _ = s.read_to_end(&mut all);
        let text = String::from_utf8_lossy(&all);
        let statuses: Vec<&str> = text
            .match_indices("HTTP/1.1 ")
            .map(|(i, _)| &text[i + 9..i + 12])
            .collect();
        assert_eq!(statuses, [want], "{fields:?}:\n{text}");
        assert!(
            text.contains("Connection: close\r\n"),
            "{fields:?}:\n{text}"
        );
        assert!(!text.contains("Hello from Rusty."), "{fields:?}:\n{text}");
    }
    let log = server.stop();
    assert_eq!(total_counter(&log, "400"), 4, "{log}");
    assert_eq!(total_counter(&log, "501"), 1, "{log}");
    assert_eq!(total_counter(&log, "200"), 1, "{log}");
}

/// Bad command lines: usage and exit 2; a missing root: a clear error and exit 1.
#[test]
fn command_line_errors() {
    let run = |args: &[&str]| {
        let out = Command::new(common::HTTPD)
            .args(args)
            .stdin(Stdio::null())
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (code, err) = run(&[]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("Usage"), "{err}");
    assert_eq!(run(&["notaport", "site"]).0, Some(2));
    assert_eq!(run(&["8080", "site", "1", "tap0"]).0, Some(2));
    assert_eq!(
        run(&["8080", "site", "--keepalive-timeout", "-1"]).0,
        Some(2)
    );
    let (code, err) = run(&["8080", "/nonexistent/rusty-root"]);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("/nonexistent/rusty-root"), "{err}");
}
