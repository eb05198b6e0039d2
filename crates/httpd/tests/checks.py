"""Client-side checks of httpd, run against a live server (kernel sockets on loopback,
or Rusty on a TAP inside a test namespace). Every body is compared with the file under
--root; every check prints `OK name` or `FAIL name: why`, and the exit status is the
number of failures (0: all passed).

usage: checks.py HOST PORT --root DIR CHECK...
checks: basic pipeline errors traversal timeouts big concurrent refused
"""

import argparse
import hashlib
import http.client
import os
import random
import socket
import sys
import threading
import time

p = argparse.ArgumentParser()
p.add_argument("host")
p.add_argument("port", type=int)
p.add_argument("--root", required=True)
p.add_argument("--header-timeout", type=float, default=1.0)
p.add_argument("--keepalive-timeout", type=float, default=2.0)
p.add_argument("--clients", type=int, default=50)
p.add_argument("--rounds", type=int, default=20)
p.add_argument("--big", default="/big.bin")
p.add_argument("--timeout", type=float, default=30.0)
p.add_argument("checks", nargs="+")
args = p.parse_args()

failures = 0


class Failed(Exception):
    pass


def check(cond, why):
    if not cond:
        raise Failed(why)


def site_files():
    """URL path -> file path of every regular file under the root (no symlinks)."""
    out = {}
    for d, dirs, files in os.walk(args.root):
        dirs[:] = [x for x in dirs if not os.path.islink(os.path.join(d, x))]
        for f in files:
            full = os.path.join(d, f)
            if os.path.islink(full) or f == os.path.basename(args.big):
                continue
            rel = os.path.relpath(full, args.root).replace(os.sep, "/")
            out["/" + rel] = full
    return out


def content(url_path):
    with open(os.path.join(args.root, url_path.lstrip("/")), "rb") as f:
        return f.read()


def quote(path):
    from urllib.parse import quote as q
    return q(path, safe="/")


def connect():
    s = socket.create_connection((args.host, args.port), timeout=args.timeout)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return s


class Reader:
    """Reads HTTP/1.1 responses off a raw socket."""

    def __init__(self, sock):
        self.sock = sock
        self.buf = b""

    def fill(self):
        d = self.sock.recv(65536)
        if not d:
            raise EOFError("connection closed")
        self.buf += d

    def response(self, head_only=False):
        while b"\r\n\r\n" not in self.buf:
            self.fill()
        head, self.buf = self.buf.split(b"\r\n\r\n", 1)
        lines = head.decode("latin-1").split("\r\n")
        parts = lines[0].split(" ", 2)
        status = int(parts[1])
        headers = {}
        for line in lines[1:]:
            k, v = line.split(":", 1)
            headers[k.strip().lower()] = v.strip()
        n = 0 if head_only or status == 304 else int(headers.get("content-length", "0"))
        while len(self.buf) < n:
            self.fill()
        body, self.buf = self.buf[:n], self.buf[n:]
        return status, headers, body

    def closed(self, wait=5.0):
        """True if the peer closes (EOF or reset) within `wait` with nothing more sent."""
        self.sock.settimeout(wait)
        try:
            d = self.sock.recv(1)
        except (ConnectionResetError, BrokenPipeError):
            return True
        except socket.timeout:
            return False
        finally:
            self.sock.settimeout(args.timeout)
        return d == b"" and not self.buf


def req(path, method="GET", extra="", version="1.1"):
    host = "Host: x\r\n" if version == "1.1" else ""
    return f"{method} {path} HTTP/{version}\r\n{host}{extra}\r\n".encode()


def one(raw, head_only=False):
    s = connect()
    s.sendall(raw)
    r = Reader(s)
    status, headers, body = r.response(head_only)
    return s, r, status, headers, body


def check_basic():
    files = site_files()
    check(len(files) >= 5, f"site too small: {files}")
    c = http.client.HTTPConnection(args.host, args.port, timeout=args.timeout)
    first_sock = None
    for url, path in sorted(files.items()):
        c.request("GET", quote(url))
        r = c.getresponse()
        body = r.read()
        check(r.status == 200, f"GET {url}: {r.status}")
        with open(path, "rb") as f:
            check(body == f.read(), f"GET {url}: body differs")
        check(r.getheader("Content-Length") == str(len(body)), f"{url}: Content-Length")
        for h in ("Date", "ETag", "Last-Modified", "Content-Type"):
            check(r.getheader(h), f"{url}: no {h}")
        check(r.getheader("Server") == "rusty", f"{url}: Server")
        check(r.getheader("Accept-Ranges") == "bytes", f"{url}: Accept-Ranges")
        if first_sock is None:
            first_sock = c.sock
        check(c.sock is first_sock, "http.client had to reconnect: no keep-alive")
        c.request("HEAD", quote(url))
        r = c.getresponse()
        check(r.read() == b"", "HEAD has a body")
        check(r.getheader("Content-Length") == str(len(body)), f"HEAD {url}: Content-Length")
    # Types, index and redirect.
    c.request("GET", "/style.css")
    r = c.getresponse()
    r.read()
    check(r.getheader("Content-Type").startswith("text/css"), "css type")
    c.request("GET", "/sub/")
    r = c.getresponse()
    check(r.status == 200 and r.read() == content("/sub/index.html"), "directory index")
    c.request("GET", "/sub?x=1")
    r = c.getresponse()
    r.read()
    check(r.status == 301 and r.getheader("Location") == "/sub/?x=1", f"redirect {r.status}")
    # Conditionals and ranges.
    c.request("GET", "/hello.txt")
    r = c.getresponse()
    r.read()
    etag, lm = r.getheader("ETag"), r.getheader("Last-Modified")
    c.request("GET", "/hello.txt", headers={"If-None-Match": etag})
    r = c.getresponse()
    check(r.status == 304 and r.read() == b"", f"If-None-Match: {r.status}")
    c.request("GET", "/hello.txt", headers={"If-Modified-Since": lm})
    r = c.getresponse()
    check(r.status == 304 and r.read() == b"", f"If-Modified-Since: {r.status}")
    c.request("GET", "/hello.txt", headers={"If-Modified-Since": "Thu, 01 Jan 1970 00:00:00 GMT"})
    r = c.getresponse()
    check(r.status == 200 and r.read() == content("/hello.txt"), "old If-Modified-Since")
    data = content("/data.bin")
    for rng, lo, hi in [("bytes=10-19", 10, 20), ("bytes=-5", len(data) - 5, len(data)),
                        ("bytes=100-", 100, len(data))]:
        c.request("GET", "/data.bin", headers={"Range": rng})
        r = c.getresponse()
        body = r.read()
        check(r.status == 206, f"{rng}: {r.status}")
        check(body == data[lo:hi], f"{rng}: wrong bytes")
        check(r.getheader("Content-Range") == f"bytes {lo}-{hi - 1}/{len(data)}", f"{rng}: Content-Range")
    c.request("GET", "/data.bin", headers={"Range": "bytes=0-1,5-6"})
    r = c.getresponse()
    check(r.status == 200 and r.read() == data, "multiple ranges serve 200")
    c.request("GET", "/data.bin", headers={"Range": f"bytes={len(data)}-"})
    r = c.getresponse()
    r.read()
    check(r.status == 416 and r.getheader("Content-Range") == f"bytes */{len(data)}", "416")
    check(c.sock is first_sock, "reconnected during the conditional/range checks")
    c.close()
    # HTTP/1.0: closes unless keep-alive is asked for.
    s, rd, status, h, body = one(req("/hello.txt", version="1.0"))
    check(status == 200 and body == content("/hello.txt"), "1.0 GET")
    check(h.get("connection", "").lower() == "close" and rd.closed(), "1.0 closes")
    s.close()
    s, rd, status, h, body = one(req("/hello.txt", version="1.0", extra="Connection: keep-alive\r\n"))
    check(h.get("connection", "").lower() == "keep-alive", "1.0 keep-alive header")
    s.sendall(req("/style.css", version="1.0"))
    status, h, body = rd.response()
    check(status == 200 and body == content("/style.css"), "1.0 keep-alive second request")
    s.close()
    s, rd, status, h, body = one(req("/hello.txt", extra="Connection: close\r\n"))
    check(status == 200 and rd.closed(), "Connection: close honoured")
    s.close()


def check_pipeline():
    s = connect()
    rd = Reader(s)
    paths = ["/index.html", "/style.css", "/sub/page.txt", "/nope", "/data.bin", "/hello.txt"]
    batch = b"".join(req(p, "HEAD" if p == "/style.css" else "GET") for p in paths)
    s.sendall(batch)
    for pth in paths:
        head_only = pth == "/style.css"
        status, h, body = rd.response(head_only)
        if pth == "/nope":
            check(status == 404, "pipelined 404")
            continue
        check(status == 200, f"pipelined {pth}: {status}")
        if not head_only:
            check(body == content(pth), f"pipelined {pth}: body")
    # The same requests cut into pieces at random places, with pauses between.
    rnd = random.Random(7)
    i = 0
    while i < len(batch):
        n = rnd.randint(1, 40)
        s.sendall(batch[i:i + n])
        i += n
        time.sleep(0.002)
    for pth in paths:
        status, h, body = rd.response(pth == "/style.css")
        check(status == (404 if pth == "/nope" else 200), f"split {pth}: {status}")
        if pth not in ("/nope", "/style.css"):
            check(body == content(pth), f"split {pth}: body")
    # Many small requests in one write.
    s.sendall(req("/hello.txt") * 200)
    for _ in range(200):
        status, h, body = rd.response()
        check(status == 200 and body == content("/hello.txt"), "200 pipelined")
    s.close()
    # More pipelined requests than the server's send buffer holds answers for, read
    # only after a pause: it must stop taking requests, then resume in order.
    s = connect()
    rd = Reader(s)
    n = 6000
    batch = b"".join(req(p) for p in ["/hello.txt", "/style.css", "/nope"] * (n // 3))
    sent = []
    writer = threading.Thread(target=lambda: (s.sendall(batch), sent.append(1)))
    writer.start()
    time.sleep(1.0)
    for i in range(n):
        pth = ["/hello.txt", "/style.css", "/nope"][i % 3]
        status, h, body = rd.response()
        if pth == "/nope":
            check(status == 404, f"backpressure {i}: {status}")
        else:
            check(status == 200 and body == content(pth), f"backpressure {i}: {pth}")
    writer.join()
    check(sent, "the writer did not finish")
    s.close()


def error_case(raw, status, closes, headers=None):
    s, rd, st, h, body = one(raw)
    check(st == status, f"{raw[:60]!r}: {st}, wanted {status}")
    check(h.get("content-length") == str(len(body)) and len(body) > 0, f"{status}: no body")
    for k, v in (headers or {}).items():
        check(h.get(k) == v, f"{status}: {k}: {h.get(k)!r}")
    if closes:
        check(rd.closed(), f"{status}: connection not closed")
    else:
        s.sendall(req("/hello.txt"))
        st, h, body = rd.response()
        check(st == 200 and body == content("/hello.txt"), f"no keep-alive after {status}")
    s.close()


def check_errors():
    error_case(b"GARBAGE\r\n\r\n", 400, True)
    error_case(b"GET / HTTP/1.1\r\n\r\n", 400, True)  # no Host
    error_case(req("/nope.html"), 404, False)
    error_case(req("/nosub/"), 404, False)  # a directory without index.html
    error_case(req("/hello.txt/"), 404, False)
    error_case(req("/", "POST", "Content-Length: 0\r\n"), 405, False, {"allow": "GET, HEAD"})
    error_case(req("/", "DELETE"), 405, False, {"allow": "GET, HEAD"})
    error_case(req("/" + "a" * 3000), 414, True)
    error_case(req("/", extra="X-Big: " + "b" * 10000 + "\r\n"), 431, True)
    error_case(b"GET / HTTP/2.0\r\n\r\n", 505, True)
    # Framing (RFC 9112 §6): a request hidden in the body is never answered.
    hidden = b"0\r\n\r\n" + req("/hello.txt")
    error_case(req("/", extra="Content-Length: 5\r\nContent-Length: 6\r\n") + hidden, 400, True)
    error_case(req("/", extra="Transfer-Encoding: gzip\r\n") + hidden, 501, True)
    error_case(req("/", extra="Transfer-Encoding: chunked\r\nContent-Length: 5\r\n") + hidden,
               400, True)
    error_case(req("/data.bin", extra="Range: bytes=99999999-\r\n"), 416, False)


def check_traversal():
    cases = [
        ("/../etc/passwd", 400),
        ("/../../../../etc/passwd", 400),
        ("/sub/../../etc/passwd", 400),
        ("/%2e%2e/%2e%2e/etc/passwd", 400),
        ("/sub/%2E%2E/%2E%2E/etc/passwd", 400),
        ("/..%2f..%2fetc%2fpasswd", 404),
        ("/%2fetc%2fpasswd", 404),
        ("/sub%2fpage.txt", 404),
        ("/hello.txt%00.html", 400),
        ("/bad%zzescape", 400),
        ("/link-out", 404),
        ("/sub/../hello.txt", 200),
        ("/sub/./page.txt", 200),
        ("/link-in", 200),
    ]
    for path, want in cases:
        s, rd, st, h, body = one(req(path))
        check(st == want, f"{path}: {st}, wanted {want}")
        check(b"root:" not in body and b"SECRET" not in body, f"{path}: leaked a file")
        s.close()
    # A raw NUL in the target.
    s, rd, st, h, body = one(b"GET /hello.txt\x00 HTTP/1.1\r\nHost: x\r\n\r\n")
    check(st == 400, f"raw NUL: {st}")
    s.close()


def check_timeouts():
    # Slowloris: part of a head, then silence: 408 and close.
    s = connect()
    s.sendall(b"GET /hello.txt HTTP/1.1\r\nHo")
    rd = Reader(s)
    t = time.time()
    status, h, body = rd.response()
    took = time.time() - t
    check(status == 408, f"slow head: {status}")
    check(rd.closed(), "408 without close")
    check(took < args.header_timeout + 2.0, f"408 after {took:.1f}s")
    s.close()
    # A connection that never sends anything is closed without a word.
    s = connect()
    rd = Reader(s)
    check(rd.closed(args.header_timeout + 3.0), "silent connection kept open")
    s.close()
    # Idle keep-alive connection: closed after the keep-alive timeout.
    s, rd, st, h, body = one(req("/hello.txt"))
    check(st == 200, "idle: first request")
    check(rd.closed(args.keepalive_timeout + 3.0), "idle connection kept open")
    s.close()
    # Keep-alive survives a pause shorter than the timeout.
    s, rd, st, h, body = one(req("/hello.txt"))
    time.sleep(args.keepalive_timeout / 3)
    s.sendall(req("/style.css"))
    st, h, body = rd.response()
    check(st == 200 and body == content("/style.css"), "request after a short pause")
    s.close()


def check_big():
    path = os.path.join(args.root, args.big.lstrip("/"))
    want = hashlib.sha256()
    with open(path, "rb") as f:
        while True:
            chunk = f.read(1 << 20)
            if not chunk:
                break
            want.update(chunk)
    size = os.path.getsize(path)
    c = http.client.HTTPConnection(args.host, args.port, timeout=args.timeout)
    t = time.time()
    c.request("GET", args.big)
    r = c.getresponse()
    check(r.status == 200 and int(r.getheader("Content-Length")) == size, f"big: {r.status}")
    got = hashlib.sha256()
    n = 0
    while True:
        chunk = r.read(1 << 20)
        if not chunk:
            break
        got.update(chunk)
        n += len(chunk)
    check(n == size, f"big: {n} of {size} bytes")
    check(got.hexdigest() == want.hexdigest(), "big: SHA-256 differs")
    secs = time.time() - t
    # A range from the middle, on the same connection.
    lo = size // 2 + 12345
    c.request("GET", args.big, headers={"Range": f"bytes={lo}-{lo + 999999}"})
    r = c.getresponse()
    body = r.read()
    with open(path, "rb") as f:
        f.seek(lo)
        check(r.status == 206 and body == f.read(1000000), "big: range")
    c.close()
    print(f"big: {size} bytes in {secs:.2f}s ({size / secs / 1e6:.0f} MB/s)", flush=True)


def check_concurrent():
    files = sorted(site_files().items())
    bodies = {u: open(p, "rb").read() for u, p in files}
    errors = []
    done = [0]
    lock = threading.Lock()
    start = threading.Barrier(args.clients)

    def client(i):
        rnd = random.Random(i)
        try:
            start.wait()
            c = http.client.HTTPConnection(args.host, args.port, timeout=args.timeout)
            for _ in range(args.rounds):
                url = rnd.choice(files)[0]
                c.request("GET", quote(url))
                r = c.getresponse()
                body = r.read()
                if r.status != 200 or body != bodies[url]:
                    raise Failed(f"client {i}: {url}: {r.status}, {len(body)} bytes")
            c.close()
            with lock:
                done[0] += 1
        except Exception as e:  # noqa: BLE001 - any failure is reported
            with lock:
                errors.append(f"client {i}: {type(e).__name__}: {e}")

    t = time.time()
    threads = [threading.Thread(target=client, args=(i,)) for i in range(args.clients)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    secs = time.time() - t
    check(not errors, f"{len(errors)} clients failed: {errors[:5]}")
    check(done[0] == args.clients, f"{done[0]} of {args.clients} clients done")
    print(f"concurrent: {args.clients} clients x {args.rounds} requests in {secs:.2f}s", flush=True)


def check_refused():
    """Against a server with --max-connections 2 and one worker."""
    held = []
    for _ in range(2):
        s, rd, st, h, body = one(req("/hello.txt"))
        check(st == 200, "held connection")
        held.append(s)
    s = None
    refused = False
    try:
        # The refusal is a reset, which may already hit the handshake.
        s = connect()
        s.sendall(req("/hello.txt"))
        s.settimeout(5)
        refused = s.recv(1) == b""
    except (ConnectionResetError, BrokenPipeError):
        refused = True
    except socket.timeout:
        refused = False
    check(refused, "third connection was served")
    if s:
        s.close()
    for h in held:
        h.close()
    # Once they are gone, new connections are served again.
    time.sleep(0.5)
    s, rd, st, h, body = one(req("/hello.txt"))
    check(st == 200, "served after the others closed")
    s.close()


CHECKS = {
    "basic": check_basic,
    "pipeline": check_pipeline,
    "errors": check_errors,
    "traversal": check_traversal,
    "timeouts": check_timeouts,
    "big": check_big,
    "concurrent": check_concurrent,
    "refused": check_refused,
}

for name in args.checks:
    try:
        CHECKS[name]()
        print(f"OK {name}", flush=True)
    except Exception as e:  # noqa: BLE001 - any failure is reported
        failures += 1
        print(f"FAIL {name}: {type(e).__name__}: {e}", flush=True)

print(f"SUMMARY ok={len(args.checks) - failures} failed={failures}", flush=True)
sys.exit(min(failures, 100))
