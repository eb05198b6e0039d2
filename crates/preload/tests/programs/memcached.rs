//! memcached through rusty-run: its listener thread accepts every connection and hands
//! it to one of its worker threads (through a pipe), whose libevent loops (epoll) serve
//! it from then on.

use super::*;

/// memcached's worker threads (`-t`).
const THREADS: usize = 4;

/// The client: `probe` connects once and asks for the version (exit 0 when it
/// answers); `run` opens CONNS connections at once (one thread each), waits until
/// memcached counts them all, then each does OPS rounds of `set` and `get` of distinct
/// keys with values of 1 byte to 500 KB (binary, flags random), `incr` of a counter of
/// its own and of one they share, `delete` of the large values, and now and then a
/// multi-key `get` of values it holds plus one never set; then CHURN short connections
/// of its own. Every value read is compared with what was set; `stats` must show
/// THREADS threads, the connections coming and going, and exactly the commands sent.
/// Any mismatch ends it with a description and exit 1.
const CLIENT: &str = r#"import random, socket, sys, threading, time

host, port, mode = sys.argv[1], int(sys.argv[2]), sys.argv[3]
TIMEOUT = 30


class Conn:
    def __init__(self, timeout=TIMEOUT):
        self.s = socket.create_connection((host, port), timeout=timeout)
        self.buf = bytearray()

    def close(self):
        self.s.close()

    def fill(self):
        b = self.s.recv(1 << 20)
        if not b:
            raise RuntimeError(f"EOF from memcached with {len(self.buf)} bytes unread")
        self.buf += b

    def line(self):
        for _ in range(100000):
            i = self.buf.find(b"\r\n")
            if i >= 0:
                l = bytes(self.buf[:i])
                del self.buf[:i + 2]
                return l
            if len(self.buf) > 4096:
                raise RuntimeError(f"no end of line in {bytes(self.buf[:64])!r}...")
            self.fill()
        raise RuntimeError("no end of line after 100000 reads")

    def exact(self, n):
        while len(self.buf) < n:
            self.fill()
        d = bytes(self.buf[:n])
        del self.buf[:n]
        return d

    def cmd(self, text):
        self.s.sendall(text + b"\r\n")
        return self.line()

    def expect(self, text, want):
        got = self.cmd(text)
        if got != want:
            raise RuntimeError(f"{text[:60]!r}: want {want!r}, got {got[:200]!r}")

    def set(self, key, flags, value):
        self.s.sendall(b"set %s %d 0 %d\r\n%s\r\n" % (key, flags, len(value), value))
        got = self.line()
        if got != b"STORED":
            raise RuntimeError(f"set {key!r} ({len(value)} bytes): {got[:200]!r}")

    def get(self, keys):
        self.s.sendall(b"get " + b" ".join(keys) + b"\r\n")
        out = {}
        for _ in range(len(keys) + 1):
            l = self.line()
            if l == b"END":
                return out
            w = l.split()
            if len(w) != 4 or w[0] != b"VALUE" or w[1] in out:
                raise RuntimeError(f"get: unexpected {l[:200]!r}")
            data = self.exact(int(w[3]) + 2)
            if data[-2:] != b"\r\n":
                raise RuntimeError(f"get {w[1]!r}: value not followed by CRLF")
            out[w[1]] = (int(w[2]), data[:-2])
        raise RuntimeError(f"get of {len(keys)} keys: more values than keys")

    def stats(self):
        self.s.sendall(b"stats\r\n")
        out = {}
        for _ in range(1000):
            l = self.line()
            if l == b"END":
                return out
            w = l.decode().split(" ", 2)
            if len(w) != 3 or w[0] != "STAT":
                raise RuntimeError(f"stats: unexpected {l[:200]!r}")
            out[w[1]] = w[2]
        raise RuntimeError("stats: no END after 1000 lines")


def first_difference(want, have):
    n = min(len(want), len(have))
    at = next((i for i in range(n) if want[i] != have[i]), n)
    return f"{len(want)} bytes set, {len(have)} read, first difference at byte {at}"


if mode == "probe":
    c = Conn(timeout=2)
    v = c.cmd(b"version")
    if not v.startswith(b"VERSION "):
        sys.exit(f"version: {v!r}")
    print(v.decode())
    sys.exit(0)

conns, ops, churn, seed, threads = (int(a) for a in sys.argv[4:9])
lock = threading.Lock()
errors = []
# What the client did, to compare with memcached's own counts.
tally = dict(cmd_set=0, get_hits=0, get_misses=0, delete_hits=0, delete_misses=0,
             incr_hits=0, incr_misses=0, connections=0, bytes_set=0, bytes_checked=0,
             multi_gets=0)


def count(**kw):
    with lock:
        for k, v in kw.items():
            tally[k] += v


def size(rng):
    bucket = rng.choices(range(4), weights=[3, 4, 2, 1])[0]
    lo, hi = [(1, 16), (17, 2000), (2001, 65536), (65537, 500000)][bucket]
    return rng.randint(lo, hi)


def check(what, key, want, got):
    if key not in got:
        raise RuntimeError(f"{what}: {key!r} missing ({len(want[1])} bytes set)")
    if got[key][0] != want[0]:
        raise RuntimeError(f"{what}: {key!r} flags {got[key][0]}, want {want[0]}")
    if got[key][1] != want[1]:
        raise RuntimeError(f"{what}: {key!r}: {first_difference(want[1], got[key][1])}")
    count(bytes_checked=len(want[1]))


connected = threading.Barrier(conns + 1, timeout=TIMEOUT)
counted = threading.Barrier(conns + 1, timeout=TIMEOUT)


def work(i, progress):
    rng = random.Random(seed * 1000 + i)
    c = Conn()
    count(connections=1)
    connected.wait()
    counted.wait()
    live = {}
    ctr, ctr_value = b"t%d:counter" % i, rng.randrange(1 << 32)
    c.set(ctr, 0, str(ctr_value).encode())
    count(cmd_set=1)
    for k in range(ops):
        progress[i] = k
        key = b"t%d:key%d" % (i, k)
        item = (rng.randrange(1 << 16), rng.randbytes(size(rng)))
        c.set(key, item[0], item[1])
        got = c.get([key])
        count(cmd_set=1, get_hits=1, bytes_set=len(item[1]))
        check("get", key, item, got)
        if k % 25 == 24:
            picked = rng.sample(sorted(live), min(8, len(live)))
            missing = b"t%d:never%d" % (i, k)
            keys = picked + [key, missing]
            rng.shuffle(keys)
            got = c.get(keys)
            count(get_hits=len(keys) - 1, get_misses=1, multi_gets=1)
            for p in picked + [key]:
                check("multi-key get", p, live.get(p, item), got)
            if missing in got:
                raise RuntimeError(f"multi-key get: {missing!r}, never set, was found")
            if len(got) != len(keys) - 1:
                raise RuntimeError(f"multi-key get: {len(got)} values for {len(keys) - 1}")
        if len(item[1]) > 2000:
            # Only the small values stay, so that memcached's 64 MB never evicts one.
            c.expect(b"delete " + key, b"DELETED")
            if c.get([key]):
                raise RuntimeError(f"{key!r} still there after delete")
            c.expect(b"delete " + key, b"NOT_FOUND")
            count(delete_hits=1, delete_misses=1, get_misses=1)
        else:
            live[key] = item
        by = rng.randint(1, 1000)
        ctr_value = (ctr_value + by) % (1 << 64)
        c.expect(b"incr %s %d" % (ctr, by), str(ctr_value).encode())
        v = c.cmd(b"incr shared 1")
        if not v.isdigit():
            raise RuntimeError(f"incr shared: {v!r}")
        c.expect(b"incr t%d:never 1" % i, b"NOT_FOUND")
        count(incr_hits=2, incr_misses=1)
    progress[i] = ops
    c.close()
    picked = sorted(live)
    for n in range(churn):
        s = Conn()
        count(connections=1)
        if picked:
            key = picked[n % len(picked)]
            check("get on a short connection", key, live[key], s.get([key]))
            count(get_hits=1)
        if n % 2:
            s.s.sendall(b"quit\r\n")
            if s.s.recv(1) != b"":
                raise RuntimeError("data instead of EOF after quit")
        s.close()


def run(i, progress):
    try:
        work(i, progress)
    except Exception as e:
        errors.append(f"connection {i}: {e!r} in round {progress[i]}")
        connected.abort()
        counted.abort()


def wait_stats(c, ok, limit=10):
    deadline = time.monotonic() + limit
    for _ in range(10000):
        st = c.stats()
        if ok(st) or time.monotonic() > deadline:
            return st
        time.sleep(0.02)
    return st


def fail(msg):
    for e in errors:
        print(e, file=sys.stderr)
    sys.exit(msg)


start = time.monotonic()
admin = Conn()
count(connections=1)
s0 = admin.stats()
if int(s0["threads"]) != threads:
    fail(f"stats: threads {s0['threads']}, want {threads}")
admin.set(b"shared", 0, b"0")
count(cmd_set=1)
curr0, total0 = int(s0["curr_connections"]), int(s0["total_connections"])
progress = [-1] * conns
workers = [threading.Thread(target=run, args=(i, progress), daemon=True)
           for i in range(conns)]
for t in workers:
    t.start()
try:
    connected.wait()
except threading.BrokenBarrierError:
    fail("the connections did not all open")
# memcached counts a connection once a worker thread has taken it from the listener.
st = wait_stats(admin, lambda st: int(st["curr_connections"]) == curr0 + conns)
held = int(st["curr_connections"])
if held != curr0 + conns:
    counted.abort()
    fail(f"stats: curr_connections {held} with {conns} more open, want {curr0 + conns}")
try:
    counted.wait()
except threading.BrokenBarrierError:
    fail("a connection failed before the rounds")
deadline = time.monotonic() + 300
for t in workers:
    t.join(timeout=max(0, deadline - time.monotonic()))
if any(t.is_alive() for t in workers):
    fail(f"connections still busy after 300 s: rounds {progress}")
if errors:
    fail(f"{len(errors)} of {conns} connections failed")
v = admin.get([b"shared"]).get(b"shared", (0, b""))[1]
if v != str(conns * ops).encode():
    fail(f"the shared counter is {v!r}, want {conns * ops} ({conns} x {ops} incr)")
count(get_hits=1)
st = wait_stats(admin, lambda st: int(st["curr_connections"]) == curr0)
problems = []
if int(st["curr_connections"]) != curr0:
    problems.append(f"curr_connections {st['curr_connections']} after the others closed, "
                    f"want {curr0}")
total = int(st["total_connections"])
if total - total0 != tally["connections"] - 1:
    problems.append(f"total_connections went from {total0} to {total}, want "
                    f"{tally['connections'] - 1} more")
for k in ["cmd_set", "get_hits", "get_misses", "delete_hits", "delete_misses",
          "incr_hits", "incr_misses"]:
    if int(st[k]) - int(s0[k]) != tally[k]:
        problems.append(f"stats {k} went from {s0[k]} to {st[k]}, the client sent {tally[k]}")
if int(st["evictions"]) != 0:
    problems.append(f"stats: {st['evictions']} evictions")
if problems:
    fail("; ".join(problems))
admin.close()
print(f"checked: {conns} connections at once (curr_connections {held}) and "
      f"{conns * churn} short ones; {tally['cmd_set']} sets, {tally['get_hits']} hits, "
      f"{tally['get_misses']} misses, {tally['multi_gets']} multi-key gets, "
      f"{tally['incr_hits']} incr, {tally['delete_hits']} deletes; set "
      f"{tally['bytes_set']} bytes, checked {tally['bytes_checked']}; threads "
      f"{st['threads']}, total_connections {total}; {time.monotonic() - start:.1f} s")
"#;

/// 8. memcached with four worker threads: sixteen connections at once, each handed by
///    the listener thread to a worker, doing hundreds of `set`/`get` (1 byte to 500 KB,
///    every value compared), `incr`, `delete` and multi-key `get`s, then short
///    connections; `stats` must count the connections and commands; then SIGTERM.
#[test]
fn memcached() {
    let test = "memcached";
    let Some(mut scene) = Scene::new(test, &["memcached", "python3"]) else {
        return;
    };
    let ip = scene.own_ip();
    let port = "11211";
    let threads = THREADS.to_string();
    let argv = strings(&[
        &scene.tool("memcached"),
        "-l",
        &ip,
        "-p",
        port,
        "-U",
        "0",
        "-t",
        &threads,
        "-m",
        "64",
        "-u",
        "nobody",
        "-v",
    ]);
    let server = scene.under_test("memcached", None, &argv);
    let python = scene.python();
    let client = scene
        .net
        .write("memcached_client.py", CLIENT)
        .display()
        .to_string();
    let deadline = Instant::now() + STARTUP;
    loop {
        scene.expect_running(server, "before answering");
        let (ok, out) = scene.net.ns_quick(
            Path::new(&python),
            &[client.as_str(), ip.as_str(), port, "probe"],
        );
        if ok {
            break;
        }
        if Instant::now() > deadline {
            scene.fail(&format!(
                "memcached did not answer within {STARTUP:?}; last probe: {out}"
            ));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    // memcached runs as root only with `-u root`; given `-u nobody`, it gives up root
    // before it makes its first socket, so the library must open its queue of the TAP
    // (which takes root) before then.
    let status_path = format!("/proc/{}/status", scene.net.pid(server));
    let status = fs::read_to_string(&status_path).unwrap_or_default();
    let euid = status
        .lines()
        .find_map(|l| l.strip_prefix("Uid:"))
        .and_then(|ids| ids.split_whitespace().nth(1))
        .unwrap_or_else(|| scene.fail(&format!("no Uid line in {status_path}:\n{status}")));
    if euid == "0" {
        scene.fail(&format!(
            "memcached still runs as root: {status_path} says Uid:{euid}"
        ));
    }
    let (conns, ops, churn) = (16, 250, 20);
    let argv = strings(&[
        &python,
        &client,
        &ip,
        port,
        "run",
        &conns.to_string(),
        &ops.to_string(),
        &churn.to_string(),
        "13",
        &threads,
    ]);
    let out = scene.run("memcached-client", &argv, Duration::from_secs(360));
    let summary = out
        .lines()
        .find_map(|l| l.strip_prefix("checked: "))
        .unwrap_or_else(|| scene.fail(&format!("no summary from the client:\n{out}")))
        .to_string();
    let set: u64 = summary
        .split("; set ")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| scene.fail(&format!("no byte count in {summary:?}")));
    scene.expect_tap_carried(set);
    let stopped = scene.stop(server, "TERM");
    eprintln!(
        "{test}: {summary}; SIGTERM stop in {:.2} s; {:.1} s",
        stopped.as_secs_f64(),
        scene.seconds()
    );
}
