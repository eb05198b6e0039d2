//! What httpd's integration tests share: a generated site, the server process (on
//! kernel sockets, unprivileged), the curl checks and the Python checks
//! (`tests/checks.py`), written once and run against either backend.

#![allow(dead_code)]

use std::fs;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};

/// Path of the `httpd` binary under test.
pub(crate) const HTTPD: &str = env!("CARGO_BIN_EXE_httpd");

/// The Python client checks.
pub(crate) fn checks_py() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/checks.py")
}

static COUNTER: AtomicU32 = AtomicU32::new(0);

/// A scratch directory, removed on drop.
pub(crate) struct Scratch(pub PathBuf);

impl Scratch {
    pub(crate) fn new(name: &str) -> Scratch {
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let d = std::env::temp_dir().join(format!("rusty-httpd-{}-{n}-{name}", std::process::id()));
        let _ = fs::remove_dir_all(&d);
        fs::create_dir_all(&d).expect("scratch directory");
        Scratch(d)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        if std::env::var_os("RUSTY_KEEP_TEST_DIR").is_none() {
            let _ = fs::remove_dir_all(&self.0);
        }
    }
}

/// Deterministic pseudo-random bytes (xorshift64*).
pub(crate) fn noise(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed | 1;
    let mut out = Vec::with_capacity(len + 8);
    while out.len() < len {
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        out.extend_from_slice(&x.wrapping_mul(0x2545_f491_4f6c_dd1d).to_le_bytes());
    }
    out.truncate(len);
    out
}

/// Write the test site under `dir/root` (and a secret outside it, for the symlink
/// that must not be followed); with `big`, also `/big.bin` of that many bytes.
/// Returns the root.
pub(crate) fn make_site(dir: &Path, big: Option<usize>) -> PathBuf {
    let root = dir.join("root");
    fs::create_dir_all(root.join("sub")).unwrap();
    fs::create_dir_all(root.join("nosub")).unwrap();
    let w = |p: &str, data: &[u8]| fs::write(root.join(p), data).unwrap();
    w(
        "index.html",
        b"<!DOCTYPE html><html><head><link rel=stylesheet href=/style.css></head><body>home</body></html>\n",
    );
    w("style.css", b"body { color: #b7410e }\n");
    w("hello.txt", b"Hello from Rusty.\n");
    w("app.js", b"console.log('rusty');\n");
    w("data.bin", &noise(65_536 + 17, 1));
    w("image.png", &noise(20_000, 2));
    w("empty.txt", b"");
    w(
        "sub/index.html",
        b"<!DOCTYPE html><html><body>sub</body></html>\n",
    );
    w("sub/page.txt", b"a page in a subdirectory\n");
    w("sub/with space.txt", b"spaces are percent-encoded\n");
    w("sub/large.bin", &noise(300_000, 3));
    w("nosub/x.txt", b"x\n");
    fs::write(dir.join("secret.txt"), b"SECRET outside the root\n").unwrap();
    std::os::unix::fs::symlink(root.join("hello.txt"), root.join("link-in")).unwrap();
    std::os::unix::fs::symlink(dir.join("secret.txt"), root.join("link-out")).unwrap();
    if let Some(n) = big {
        let mut f = fs::File::create(root.join("big.bin")).unwrap();
        let chunk = 1 << 20;
        let mut left = n;
        let mut seed = 7;
        while left > 0 {
            let k = left.min(chunk);
            f.write_all(&noise(k, seed)).unwrap();
            seed += 1;
            left -= k;
        }
    }
    root
}

/// SHA-256 of a file, hex.
pub(crate) fn sha256_file(path: &Path) -> String {
    let data = fs::read(path).unwrap();
    let d = Sha256::digest(&data);
    d.iter().map(|b| format!("{b:02x}")).collect()
}

/// A port nothing listens on right now.
pub(crate) fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("bind an ephemeral port")
}

/// `httpd` on kernel sockets on 127.0.0.1 (no privileges needed); killed on drop.
pub(crate) struct Server {
    pub port: u16,
    child: Child,
    log: PathBuf,
    status: Option<ExitStatus>,
}

impl Server {
    /// Start `httpd PORT ROOT 1 kernel 127.0.0.1 WORKERS extra...` on a free port and
    /// wait until it accepts connections (another port if that one was taken meanwhile).
    pub(crate) fn start(root: &Path, log_dir: &Path, workers: usize, extra: &[&str]) -> Server {
        for _ in 0..4 {
            if let Some(s) = Server::try_start(root, log_dir, workers, extra) {
                return s;
            }
        }
        panic!("httpd could not bind a free port in 4 tries");
    }

    fn try_start(root: &Path, log_dir: &Path, workers: usize, extra: &[&str]) -> Option<Server> {
        let port = free_port();
        let log = log_dir.join(format!("httpd-{port}.log"));
        let file = fs::File::create(&log).unwrap();
        let child = Command::new(HTTPD)
            .arg(port.to_string())
            .arg(root)
            .args(["1", "kernel", "127.0.0.1", &workers.to_string()])
            .args(["--oversubscribe", "--grace", "1", "--spin-us", "0"])
            .args(extra)
            .stdin(Stdio::null())
            .stdout(file.try_clone().unwrap())
            .stderr(file)
            .spawn()
            .expect("spawn httpd");
        let mut s = Server {
            port,
            child,
            log,
            status: None,
        };
        let deadline = Instant::now() + Duration::from_secs(20);
        let addr: SocketAddr = ([127, 0, 0, 1], port).into();
        loop {
            if let Ok(Some(st)) = s.child.try_wait() {
                s.status = Some(st);
                let log = s.log();
                if log.contains("in use") {
                    return None;
                }
                panic!("httpd exited with {st} before listening:\n{log}");
            }
            if TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok() {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "httpd not listening on {port} after 20 s:\n{}",
                s.log()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        Some(s)
    }

    pub(crate) fn base(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    pub(crate) fn log(&self) -> String {
        fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// SIGTERM, wait (bounded) for a clean exit, and return the log.
    pub(crate) fn stop(mut self) -> String {
        rusty_testnet::sys::terminate(&mut self.child).expect("SIGTERM to httpd");
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Ok(Some(st)) = self.child.try_wait() {
                self.status = Some(st);
                break;
            }
            assert!(
                Instant::now() < deadline,
                "httpd still running 10 s after SIGTERM:\n{}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        let log = self.log();
        assert!(
            self.status.is_some_and(|s| s.success()),
            "httpd exited with {:?}:\n{log}",
            self.status
        );
        log
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if self.status.is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// A counter from the `httpd total:` line httpd prints when it stops.
pub(crate) fn total_counter(log: &str, name: &str) -> u64 {
    counter(log, "httpd", name)
}

/// A counter from the `<label> total:` line httpd prints when it stops (`httpd`, or
/// `tls` for its TLS counters).
pub(crate) fn counter(log: &str, label: &str, name: &str) -> u64 {
    let start = format!("{label} total: ");
    let line = log
        .lines()
        .find(|l| l.starts_with(&start))
        .unwrap_or_else(|| panic!("no '{label} total:' line in:\n{log}"));
    line.split_whitespace()
        .find_map(|kv| kv.strip_prefix(&format!("{name}=")))
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no counter {name} in {line}"))
}

/// A response as `curl -i` prints it: status, header lines, body.
#[derive(Debug)]
pub(crate) struct CurlResponse {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl CurlResponse {
    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// Parse the last response of `curl -i` output (earlier ones: redirects followed).
pub(crate) fn parse_curl_i(out: &[u8]) -> CurlResponse {
    let mut rest = out;
    loop {
        let split = rest
            .windows(4)
            .position(|w| w == b"\r\n\r\n")
            .unwrap_or_else(|| panic!("no header end in {:?}", String::from_utf8_lossy(out)));
        let head = String::from_utf8_lossy(&rest[..split]).into_owned();
        let body = &rest[split + 4..];
        let mut lines = head.split("\r\n");
        let status: u16 = lines
            .next()
            .and_then(|l| l.split(' ').nth(1))
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| panic!("bad status line in {head:?}"));
        let headers: Vec<(String, String)> = lines
            .filter_map(|l| l.split_once(':'))
            .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
            .collect();
        // `curl -L -i` prints every hop; go on to the next when this one redirected.
        if (300..400).contains(&status) && body.starts_with(b"HTTP/") {
            rest = body;
            continue;
        }
        return CurlResponse {
            status,
            headers,
            body: body.to_vec(),
        };
    }
}

/// Runs curl with some arguments and returns (success, stdout, stderr): directly, or
/// inside a test namespace.
pub(crate) type CurlRunner<'a> = dyn Fn(&[&str]) -> (bool, Vec<u8>, String) + 'a;

/// Run the local curl, bounded by `--max-time`.
pub(crate) fn local_curl(curl: &Path) -> impl Fn(&[&str]) -> (bool, Vec<u8>, String) + '_ {
    move |args: &[&str]| {
        let out = Command::new(curl)
            .args(["--max-time", "60", "-sS"])
            .args(args)
            .stdin(Stdio::null())
            .output()
            .expect("run curl");
        (
            out.status.success(),
            out.stdout,
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }
}

/// The curl checks: GET, HEAD, Range, conditional GET, keep-alive reuse over several
/// URLs in one invocation, HTTP/1.0, redirects, errors and traversal. `base` is
/// `http://host:port`, `root` the served directory.
pub(crate) fn curl_checks(curl: &CurlRunner<'_>, base: &str, root: &Path) {
    let file = |p: &str| fs::read(root.join(p)).unwrap();
    let get = |args: &[&str]| {
        let (ok, out, err) = curl(args);
        assert!(ok, "curl {args:?} failed: {err}");
        parse_curl_i(&out)
    };
    let url = |p: &str| format!("{base}{p}");

    // GET: body, length, validators.
    let r = get(&["-i", &url("/")]);
    assert_eq!(r.status, 200);
    assert_eq!(r.body, file("index.html"));
    assert_eq!(r.header("Content-Type"), Some("text/html; charset=utf-8"));
    assert_eq!(
        r.header("Content-Length"),
        Some(file("index.html").len().to_string().as_str())
    );
    assert_eq!(r.header("Server"), Some("rusty"));
    assert_eq!(r.header("Accept-Ranges"), Some("bytes"));
    let date = r.header("Date").expect("Date");
    assert!(date.ends_with(" GMT") && date.len() == 29, "{date}");
    let etag = r.header("ETag").expect("ETag").to_string();
    let last_modified = r
        .header("Last-Modified")
        .expect("Last-Modified")
        .to_string();

    // Binary body, byte-exact.
    let r = get(&["-i", &url("/image.png")]);
    assert_eq!(
        (r.status, r.header("Content-Type")),
        (200, Some("image/png"))
    );
    assert!(r.body == file("image.png"), "image.png differs");

    // HEAD: headers only.
    let r = get(&["-i", "-I", &url("/style.css")]);
    assert_eq!(r.status, 200);
    assert!(r.body.is_empty());
    assert_eq!(
        r.header("Content-Length"),
        Some(file("style.css").len().to_string().as_str())
    );
    assert_eq!(r.header("Content-Type"), Some("text/css; charset=utf-8"));

    // Range.
    let data = file("data.bin");
    let r = get(&["-i", "-r", "100-199", &url("/data.bin")]);
    assert_eq!(r.status, 206);
    assert_eq!(r.body, &data[100..200]);
    assert_eq!(
        r.header("Content-Range"),
        Some(format!("bytes 100-199/{}", data.len()).as_str())
    );
    let r = get(&["-i", "-r", "-10", &url("/data.bin")]);
    assert_eq!((r.status, &r.body[..]), (206, &data[data.len() - 10..]));
    let r = get(&["-i", "-r", &format!("{}-", data.len()), &url("/data.bin")]);
    assert_eq!(r.status, 416);
    assert_eq!(
        r.header("Content-Range"),
        Some(format!("bytes */{}", data.len()).as_str())
    );

    // Conditional GET.
    let r = get(&["-i", "-H", &format!("If-None-Match: {etag}"), &url("/")]);
    assert_eq!(r.status, 304);
    assert!(r.body.is_empty());
    assert_eq!(r.header("ETag"), Some(etag.as_str()));
    let r = get(&[
        "-i",
        "-H",
        &format!("If-Modified-Since: {last_modified}"),
        &url("/"),
    ]);
    assert_eq!(r.status, 304);
    let r = get(&["-i", "-H", "If-None-Match: \"other\"", &url("/")]);
    assert_eq!(r.status, 200);

    // Keep-alive: several URLs in one invocation share one connection.
    let (ok, out, err) = curl(&[
        "-v",
        "-o",
        "/dev/null",
        "-o",
        "/dev/null",
        "-o",
        "/dev/null",
        &url("/"),
        &url("/style.css"),
        &url("/sub/"),
    ]);
    assert!(ok, "curl keep-alive run failed: {err}");
    let _ = out;
    let reuses = err.matches("Re-using existing connection").count();
    assert_eq!(reuses, 2, "curl did not reuse its connection:\n{err}");

    // HTTP/1.0: the response closes the connection.
    let r = get(&["-i", "-0", &url("/hello.txt")]);
    assert_eq!((r.status, &r.body[..]), (200, &file("hello.txt")[..]));
    assert_eq!(r.header("Connection"), Some("close"));

    // Directory without a slash: redirect, followed to the index.
    let r = get(&["-i", &url("/sub")]);
    assert_eq!((r.status, r.header("Location")), (301, Some("/sub/")));
    let r = get(&["-i", "-L", &url("/sub")]);
    assert_eq!((r.status, &r.body[..]), (200, &file("sub/index.html")[..]));
    let r = get(&["-i", &url("/sub/with%20space.txt")]);
    assert_eq!(
        (r.status, &r.body[..]),
        (200, &file("sub/with space.txt")[..])
    );

    // Errors.
    assert_eq!(get(&["-i", &url("/missing")]).status, 404);
    let r = get(&["-i", "-X", "POST", &url("/")]);
    assert_eq!((r.status, r.header("Allow")), (405, Some("GET, HEAD")));
    let long = url(&format!("/{}", "a".repeat(3000)));
    assert_eq!(get(&["-i", &long]).status, 414);
    let big_header = format!("X-Big: {}", "b".repeat(10_000));
    assert_eq!(get(&["-i", "-H", &big_header, &url("/")]).status, 431);

    // Traversal: curl sends the path as is with --path-as-is.
    for (p, want) in [
        ("/../etc/passwd", 400),
        ("/%2e%2e/%2e%2e/etc/passwd", 400),
        ("/sub/../../etc/passwd", 400),
        ("/..%2f..%2fetc%2fpasswd", 404),
        ("/hello.txt%00", 400),
        ("/link-out", 404),
        ("/sub/../hello.txt", 200),
    ] {
        let r = get(&["-i", "--path-as-is", &url(p)]);
        assert_eq!(r.status, want, "{p}");
        let body = String::from_utf8_lossy(&r.body);
        assert!(
            !body.contains("root:") && !body.contains("SECRET"),
            "{p}: {body}"
        );
    }
}

/// Run `checks.py` with `python3` (via `run`, which returns its exit status and
/// output); fail with the output unless every check passed.
pub(crate) fn assert_checks_passed(what: &str, ok: bool, output: &str) {
    let passed = output
        .lines()
        .any(|l| l.starts_with("SUMMARY ") && l.ends_with(" failed=0"));
    assert!(ok && passed, "{what}: checks failed:\n{output}");
    for l in output.lines().filter(|l| !l.starts_with("OK ")) {
        eprintln!("{what}: {l}");
    }
}

/// Run checks.py locally against 127.0.0.1.
pub(crate) fn local_checks(python: &Path, port: u16, root: &Path, checks: &[&str], extra: &[&str]) {
    let out = Command::new(python)
        .arg("-u")
        .arg(checks_py())
        .args(["127.0.0.1", &port.to_string(), "--root"])
        .arg(root)
        .args(extra)
        .args(checks)
        .stdin(Stdio::null())
        .output()
        .expect("run python3");
    let mut text = String::from_utf8_lossy(&out.stdout).into_owned();
    text.push_str(&String::from_utf8_lossy(&out.stderr));
    assert_checks_passed(&checks.join(","), out.status.success(), &text);
}

/// The address a log's `metrics: serving http://ADDR/metrics` line names.
pub(crate) fn metrics_addr_in(log: &str) -> Option<SocketAddr> {
    let rest = log.split("metrics: serving http://").nth(1)?;
    rest.split('/').next()?.parse().ok()
}

/// One request on its own connection, bounded in time; the status code (0 when none
/// arrived) and the whole response.
pub(crate) fn exchange(addr: SocketAddr, request: &[u8]) -> (u16, String) {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(5)).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.set_write_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(request).expect("send the request");
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    let text = String::from_utf8_lossy(&out).into_owned();
    let code = text
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    (code, text)
}

/// The body of a successful scrape of the metrics endpoint at `addr`.
pub(crate) fn scrape(addr: SocketAddr) -> String {
    let (code, text) = exchange(addr, b"GET /metrics HTTP/1.1\r\nHost: t\r\n\r\n");
    assert_eq!(code, 200, "{text}");
    assert!(
        text.contains("\r\nContent-Type: text/plain; version=0.0.4"),
        "{text}"
    );
    text.split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default()
}

/// The sum over workers of `rusty_http_requests_total` for `code` in a scrape.
pub(crate) fn requests(text: &str, code: &str) -> u64 {
    let label = format!("code=\"{code}\"}}");
    text.lines()
        .filter(|l| l.starts_with("rusty_http_requests_total{") && l.contains(&label))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
        .sum()
}
