//! The Linux end of every transfer: a small Python program run inside the client
//! namespace on the client core, and reading its report.
//!
//! - `peer.py get HOST PORT --path P --conns N --bytes B`: N connections at once, each
//!   `GET P` with `Connection: close`, read to EOF; a connection is good when the status
//!   is 200 and the body is exactly B bytes (its `Content-Length` too).
//! - `peer.py send HOST PORT --conns N --bytes B`: N connections at once, each sends B
//!   bytes, half-closes, and reads to EOF (a discard server closes after our FIN, once
//!   it has taken everything); good when nothing came back.
//!
//! Time runs from before the first connect to the end of the last connection. Past
//! `--deadline` seconds it reports what it has and exits 3; other failures exit 1. The
//! report is one line: `RESULT conns=N ok=K stream_bytes=S payload_bytes=P secs=T
//! timeout=0|1`, where `stream_bytes` counts every byte the receiving application read
//! (for `get`, response heads too) and `payload_bytes` the file bytes or sent bytes.

/// The program (run as `python3 -u peer.py …`).
pub(super) const PEER_PY: &str = r#"
import argparse, os, socket, sys, threading, time

p = argparse.ArgumentParser()
p.add_argument("mode", choices=["get", "send"])
p.add_argument("host")
p.add_argument("port", type=int)
p.add_argument("--conns", type=int, default=1)
p.add_argument("--bytes", type=int, required=True)
p.add_argument("--path", default="/")
p.add_argument("--deadline", type=float, default=120.0)
a = p.parse_args()

block = os.urandom(1 << 20)
start = time.monotonic()
end = start + a.deadline
res = [dict(ok=False, stream=0, payload=0, finish=None, error=None) for _ in range(a.conns)]

def left():
    return max(end - time.monotonic(), 0.001)

def get(r, s):
    s.sendall(f"GET {a.path} HTTP/1.1\r\nHost: {a.host}\r\nConnection: close\r\n\r\n".encode())
    buf = bytearray(1 << 18)
    head = b""
    head_len = None
    status = None
    length = None
    while True:
        s.settimeout(left())
        n = s.recv_into(buf)
        if n == 0:
            break
        r["stream"] += n
        if head_len is None:
            head += bytes(buf[:n])
            k = head.find(b"\r\n\r\n")
            if k >= 0:
                head_len = k + 4
                lines = head[:k].decode("latin-1").split("\r\n")
                status = int(lines[0].split()[1])
                for line in lines[1:]:
                    name, _, value = line.partition(":")
                    if name.strip().lower() == "content-length":
                        length = int(value.strip())
        if head_len is not None:
            r["payload"] = r["stream"] - head_len
    if status != 200 or length != a.bytes or r["payload"] != a.bytes:
        raise RuntimeError(f"status {status}, content-length {length}, body {r['payload']} of {a.bytes}")

def send(r, s):
    mv = memoryview(block)
    while r["payload"] < a.bytes:
        n = min(len(block), a.bytes - r["payload"])
        s.settimeout(left())
        s.sendall(mv[:n])
        r["payload"] += n
        r["stream"] = r["payload"]
    s.shutdown(socket.SHUT_WR)
    back = 0
    while True:
        s.settimeout(left())
        b = s.recv(65536)
        if not b:
            break
        back += len(b)
    if back:
        raise RuntimeError(f"{back} bytes came back from a discard server")

def run(i):
    r = res[i]
    try:
        s = socket.create_connection((a.host, a.port), timeout=left())
        try:
            (get if a.mode == "get" else send)(r, s)
        finally:
            s.close()
        r["ok"] = True
    except Exception as e:
        r["error"] = repr(e)
    r["finish"] = time.monotonic()

threads = [threading.Thread(target=run, args=(i,), daemon=True) for i in range(a.conns)]
for t in threads:
    t.start()
for t in threads:
    t.join(left())
timed_out = any(t.is_alive() for t in threads) or time.monotonic() >= end
last = max((r["finish"] or time.monotonic()) for r in res)
for i, r in enumerate(res):
    if not r["ok"]:
        print(f"CONN {i} stream={r['stream']} payload={r['payload']} error={r['error']}", flush=True)
ok = sum(r["ok"] for r in res)
print(f"RESULT conns={a.conns} ok={ok} stream_bytes={sum(r['stream'] for r in res)} "
      f"payload_bytes={sum(r['payload'] for r in res)} secs={last - start:.4f} "
      f"timeout={int(timed_out)}", flush=True)
os._exit(0 if ok == a.conns else 3 if timed_out else 1)
"#;

/// The `RESULT` line of a run.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(super) struct PeerResult {
    pub conns: u64,
    pub ok: u64,
    pub stream_bytes: u64,
    pub payload_bytes: u64,
    pub secs: f64,
    pub timed_out: bool,
}

/// The last `RESULT` line of `out`.
pub(super) fn parse_result(out: &str) -> Option<PeerResult> {
    let line = out.lines().rev().find(|l| l.starts_with("RESULT "))?;
    let mut r = PeerResult::default();
    let mut seen = 0;
    for kv in line.split_whitespace().skip(1) {
        let (k, v) = kv.split_once('=')?;
        match k {
            "conns" => r.conns = v.parse().ok()?,
            "ok" => r.ok = v.parse().ok()?,
            "stream_bytes" => r.stream_bytes = v.parse().ok()?,
            "payload_bytes" => r.payload_bytes = v.parse().ok()?,
            "secs" => r.secs = v.parse().ok()?,
            "timeout" => r.timed_out = v == "1",
            _ => continue,
        }
        seen += 1;
    }
    (seen == 6).then_some(r)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_result_line() {
        let out = "CONN 3 stream=10 payload=0 error=TimeoutError('timed out')\n\
                   RESULT conns=16 ok=15 stream_bytes=64003456 payload_bytes=64000000 \
                   secs=2.5000 timeout=1\n";
        assert_eq!(
            parse_result(out),
            Some(PeerResult {
                conns: 16,
                ok: 15,
                stream_bytes: 64_003_456,
                payload_bytes: 64_000_000,
                secs: 2.5,
                timed_out: true,
            })
        );
        assert!(parse_result("RESULT conns=1 ok=1\n").is_none());
        assert!(parse_result("Traceback (most recent call last):\n").is_none());
    }
}
