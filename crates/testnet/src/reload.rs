//! The certificate-reload check the TLS servers' tests share (httpd, ws-echo, echo):
//! SIGHUP makes a server reread its `--tls-cert`/`--tls-key` files. A new connection
//! must then get the new certificate while a connection opened before the reload goes
//! on with the old one, and files that cannot be used must leave the certificate in use
//! as it is. The client is Python's `ssl` in the test's namespace.

use std::fs;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::{Proc, TestNet};

/// What the reload client says over TLS, for the server under test.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Speak {
    /// httpd: `GET /hello.txt`, expecting `200` and `Hello from Rusty.\n` (ALPN
    /// `http/1.1` offered).
    Http,
    /// ws-echo: the WebSocket upgrade of `/` on connecting, then a masked text message
    /// that must come back.
    WebSocket,
    /// echo: bytes that must come back.
    Echo,
}

impl Speak {
    fn arg(self) -> &'static str {
        match self {
            Speak::Http => "http",
            Speak::WebSocket => "ws",
            Speak::Echo => "echo",
        }
    }
}

/// The client. `get SPEAK HOST PORT CA NAME`: one exchange on a fresh connection
/// (verifying the certificate for NAME against CA); prints `GET ok=True fp=<sha256 of
/// the server's certificate> version=TLSv1.3 alpn=...`. `hold SPEAK HOST PORT CA NAME
/// GO`: one exchange, prints `FIRST ...`, waits (up to 30 s) for the file GO, then
/// another exchange on the same connection: `SECOND ...`.
pub const RELOAD_PY: &str = r#"
import base64, hashlib, os, socket, ssl, sys, time

mode, speak, host, port, ca, name = sys.argv[1:7]
ctx = ssl.create_default_context(cafile=ca)
if speak == "http":
    ctx.set_alpn_protocols(["http/1.1"])

def recv_exact(s, n):
    got = b""
    while len(got) < n:
        b = s.recv(n - len(got))
        if not b:
            raise SystemExit(f"closed after {len(got)} of {n} bytes")
        got += b
    return got

def connect():
    raw = socket.create_connection((host, int(port)), timeout=10)
    s = ctx.wrap_socket(raw, server_hostname=name)
    if speak == "ws":
        key = base64.b64encode(os.urandom(16)).decode()
        s.sendall((f"GET / HTTP/1.1\r\nHost: {name}\r\nUpgrade: websocket\r\n"
                   f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\n"
                   "Sec-WebSocket-Version: 13\r\n\r\n").encode())
        head = b""
        while not head.endswith(b"\r\n\r\n"):
            head += recv_exact(s, 1)
        if not head.startswith(b"HTTP/1.1 101 "):
            raise SystemExit(f"upgrade refused: {head!r}")
    return s

def exchange(s, n):
    if speak == "http":
        s.sendall(b"GET /hello.txt HTTP/1.1\r\nHost: " + name.encode() + b"\r\n\r\n")
        got = b""
        while not got.endswith(b"Hello from Rusty.\n"):
            b = s.recv(4096)
            if not b:
                break
            got += b
        return got.startswith(b"HTTP/1.1 200 OK\r\n") and got.endswith(b"\r\n\r\nHello from Rusty.\n")
    if speak == "ws":
        payload = f"hello {n} from the reload test".encode()
        mask = os.urandom(4)
        masked = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
        s.sendall(bytes([0x81, 0x80 | len(payload)]) + mask + masked)
        head = recv_exact(s, 2)
        return head == bytes([0x81, len(payload)]) and recv_exact(s, len(payload)) == payload
    payload = os.urandom(20000)
    s.sendall(payload)
    return recv_exact(s, len(payload)) == payload

def describe(s, ok):
    fp = hashlib.sha256(s.getpeercert(binary_form=True)).hexdigest()
    return f"ok={ok} fp={fp} version={s.version()} alpn={s.selected_alpn_protocol()}"

if mode == "get":
    s = connect()
    print("GET", describe(s, exchange(s, 1)), flush=True)
elif mode == "hold":
    s = connect()
    print("FIRST", describe(s, exchange(s, 1)), flush=True)
    deadline = time.monotonic() + 30
    while not os.path.exists(sys.argv[7]) and time.monotonic() < deadline:
        time.sleep(0.05)
    print("SECOND", describe(s, exchange(s, 2)), flush=True)
"#;

/// One server's reload check: where it listens, what its clients trust, the files it
/// reads, and the certificates in them before and after.
#[derive(Debug, Clone)]
pub struct Reload<'a> {
    /// A Python 3 (`ssl` of the standard library is all the client needs).
    pub python: &'a Path,
    /// What the client says.
    pub speak: Speak,
    /// The server's address and TLS port, inside the test's namespace.
    pub host: &'a str,
    /// The server's TLS port.
    pub port: &'a str,
    /// The authority the client trusts.
    pub ca: &'a Path,
    /// The name the client sends (SNI) and verifies.
    pub name: &'a str,
    /// The `--tls-cert` and `--tls-key` files the server was started with.
    pub live: (&'a Path, &'a Path),
    /// SHA-256 (hex) of the certificate in `live` when the server started.
    pub old: &'a str,
    /// The chain and key to swap in, and the SHA-256 (hex) of the chain's leaf.
    pub new: (&'a Path, &'a Path, &'a str),
}

/// The log line of a reload that took the new files (`src/cli/tls.rs`).
pub const RELOADED: &str = "reloaded the TLS certificates";
/// The log line of a reload whose files could not be used.
pub const KEPT: &str = "keeping the TLS certificates in use";

impl TestNet {
    /// Run the reload check against `server`, which must already be serving `r.live`:
    /// a connection opened first; the files swapped for `r.new` and SIGHUP (to the
    /// server's pid): a new connection gets the new certificate; the key spoiled and
    /// SIGHUP again: logged, and a new connection still gets the new certificate; and
    /// the first connection, still open, has gone on with the old one throughout.
    pub fn check_sighup_reload(&mut self, server: Proc, r: &Reload<'_>) {
        let script = self.write("reload.py", RELOAD_PY);
        let go = self.dir.join("reload-go");
        let _ = fs::remove_file(&go);
        let args = |mode: &str| -> Vec<String> {
            let mut a = vec![script.display().to_string(), mode.to_string()];
            a.extend([r.speak.arg(), r.host, r.port].map(String::from));
            a.extend([r.ca.display().to_string(), r.name.to_string()]);
            a
        };
        let mut hold_args = args("hold");
        hold_args.push(go.display().to_string());
        let held = self.spawn_in_ns("reload.py hold", r.python, &hold_args);
        self.wait_for_log(held, "FIRST ok=", Duration::from_secs(20));
        let first = self.log(held);
        self.expect(
            "the connection opened before the reload",
            &first,
            &format!("FIRST ok=True fp={}", r.old),
        );

        for (from, to) in [(r.new.0, r.live.0), (r.new.1, r.live.1)] {
            fs::copy(from, to)
                .unwrap_or_else(|e| self.fail(&format!("copy {}: {e}", from.display())));
        }
        self.reload_and_get(server, RELOADED, r, &args("get"));
        fs::write(r.live.1, "not a key\n")
            .unwrap_or_else(|e| self.fail(&format!("spoil the key: {e}")));
        self.reload_and_get(server, KEPT, r, &args("get"));

        fs::write(&go, "").unwrap_or_else(|e| self.fail(&format!("go file: {e}")));
        let status = self.wait_ok(held, Duration::from_secs(30));
        if !status.success() {
            self.fail(&format!("reload.py hold exited with {status}"));
        }
        let out = self.log(held);
        self.expect(
            "the connection opened before the reload, after it",
            &out,
            &format!("SECOND ok=True fp={}", r.old),
        );
    }

    /// SIGHUP to `server`, once it logged `logged` (as often as it has been sent), a
    /// new connection (the client run with `get`) must get `r.new`'s certificate.
    fn reload_and_get(&mut self, server: Proc, logged: &str, r: &Reload<'_>, get: &[String]) {
        let before = self.log(server).matches(logged).count();
        self.sighup(server);
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while self.log(server).matches(logged).count() == before {
            if !self.running(server) || std::time::Instant::now() > deadline {
                self.fail(&format!(
                    "{} did not log {logged:?} after SIGHUP",
                    self.label(server)
                ));
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let args: Vec<&str> = get.iter().map(String::as_str).collect();
        let (ok, out) = self.ns_quick(r.python, &args);
        if !ok {
            self.fail(&format!("reload.py get after {logged:?}: {out}"));
        }
        self.expect(
            &format!("after {logged:?}"),
            &out,
            &format!("GET ok=True fp={}", r.new.2),
        );
    }

    /// Fail unless `text` contains `want`.
    fn expect(&self, what: &str, text: &str, want: &str) {
        if !text.contains(want) {
            self.fail(&format!("{what}: no {want:?} in:\n{text}"));
        }
    }
}

/// Copies of `chain` and `key` in `dir` (`live.pem`, `live.key`), for a server to be
/// started with and a reload to overwrite.
pub fn live_copies(dir: &Path, chain: &Path, key: &Path) -> (PathBuf, PathBuf) {
    let (c, k) = (dir.join("live.pem"), dir.join("live.key"));
    fs::copy(chain, &c).expect("copy the certificate");
    fs::copy(key, &k).expect("copy the key");
    (c, k)
}
