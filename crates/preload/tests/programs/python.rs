//! Python's standard servers and clients through rusty-run: http.server with threads,
//! an asyncio echo server and a selectors client.

use super::*;

/// 4. Python's http.server (a ThreadingHTTPServer) serving three files to 200 curl
///    requests: 100 one after another, 100 from eight curls at a time.
#[test]
fn python_threaded_http_server() {
    let test = "python_threaded_http_server";
    let Some(mut scene) = Scene::new(test, &["curl", "python3", "xargs", "env"]) else {
        return;
    };
    let www = scene.path("www");
    let files: Vec<(String, Vec<u8>)> = vec![
        ("a.txt".into(), text(1000, 4)),
        ("b.bin".into(), pattern(200 << 10, 5)),
        ("c.bin".into(), pattern(2 << 20, 6)),
    ];
    for (name, contents) in &files {
        write_file(&www.join(name), contents);
    }
    let port = 8000;
    let ip = scene.own_ip();
    let python = scene.python();
    // SIGINT stops http.server cleanly (exit 0), but Python leaves SIGINT alone when it
    // starts ignored (as under a shell that ran the tests in the background); env
    // gives it back its default first.
    let argv = strings(&[
        &scene.tool("env"),
        "--default-signal=INT",
        &python,
        "-m",
        "http.server",
        &port.to_string(),
        "--bind",
        &ip,
        "--directory",
        &www.display().to_string(),
    ]);
    let server = scene.under_test("http.server", None, &argv);
    scene.wait_http(&format!("http://{ip}:{port}/a.txt"), server);

    let requests = 200;
    let out_dir = scene.path("got");
    fs::create_dir_all(&out_dir).expect("output directory");
    let plan: Vec<(usize, String, PathBuf)> = (0..requests)
        .map(|i| {
            let f = i % files.len();
            let url = format!("http://{ip}:{port}/{}", files[f].0);
            (f, url, out_dir.join(format!("{i}")))
        })
        .collect();
    let (sequential, parallel) = plan.split_at(requests / 2);
    let urls: Vec<(String, PathBuf)> = sequential
        .iter()
        .map(|(_, url, out)| (url.clone(), out.clone()))
        .collect();
    let got = curl_many(&mut scene, "curl-sequential", &urls, false, None);
    let list: String = parallel
        .iter()
        .map(|(_, url, out)| format!("{url} {}\n", out.display()))
        .collect();
    let list_path = scene.path("parallel.list");
    write_file(&list_path, list.as_bytes());
    scene.sh(
        "curl-parallel",
        r#"curl=$1; xargs -P 8 -n 2 sh -c '"$0" -sS --max-time 20 -o "$2" "$1"' "$curl" <"$2""#,
        &[&scene.tool("curl"), &list_path.display().to_string()],
        Duration::from_secs(120),
    );
    let mut bytes = 0;
    for (f, url, out) in &plan {
        let have = fs::read(out).unwrap_or_default();
        if have != files[*f].1 {
            scene.fail(&format!(
                "{url} into {}: {}",
                out.display(),
                describe_difference(&files[*f].1, &have)
            ));
        }
        bytes += have.len();
    }
    scene.expect_running(server, "after the requests");
    let stopped = scene.stop(server, "INT");
    eprintln!(
        "{test}: {requests} requests ({} sequential over {} connections, {} by 8 curls at \
         a time), {bytes} bytes checked, SIGINT stop in {:.2} s, {:.1} s",
        got.len(),
        got.iter().map(|g| g.1).sum::<u64>(),
        parallel.len(),
        stopped.as_secs_f64(),
        scene.seconds()
    );
}

/// The asyncio echo server: echoes each connection until its peer half-closes, then
/// closes; SIGTERM stops it (exit 0).
const ASYNCIO_ECHO: &str = r#"import asyncio, signal, sys

async def handle(reader, writer):
    try:
        while True:
            data = await reader.read(65536)
            if not data:
                break
            writer.write(data)
            await writer.drain()
    finally:
        writer.close()

async def main():
    server = await asyncio.start_server(handle, sys.argv[1], int(sys.argv[2]))
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    print("listening", flush=True)
    async with server:
        await stop.wait()
    print("stopped", flush=True)

asyncio.run(main())
"#;

/// The echo client: CONNS connections at once, half of them in lock step (a payload,
/// then its echo, ROUNDS times), half streaming (ROUNDS payloads sent back to back by
/// one thread while another reads the echo); every byte compared; each connection ends
/// with a half-close and waits for the server's EOF. Exit 0 only when all matched.
const ECHO_CLIENT: &str = r#"import random, socket, sys, threading

host, port = sys.argv[1], int(sys.argv[2])
conns, rounds, seed = int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
errors, totals, payloads = [], [0] * conns, [0] * conns

def sizes(rng):
    return [rng.choice([1, rng.randint(2, 1500), rng.randint(1500, 65536),
                        rng.randint(65536, 262144)]) for _ in range(rounds)]

def recv_exact(s, n):
    parts, got = [], 0
    while got < n:
        b = s.recv(min(n - got, 1 << 20))
        if not b:
            raise RuntimeError(f"EOF after {got} of {n} bytes")
        parts.append(b)
        got += len(b)
    return b"".join(parts)

def check(i, k, want, have):
    if want != have:
        at = next((j for j in range(min(len(want), len(have))) if want[j] != have[j]),
                  min(len(want), len(have)))
        raise RuntimeError(f"payload {k} ({len(want)} bytes) differs at byte {at}")
    totals[i] += len(want)
    payloads[i] += 1

def finish(s):
    s.shutdown(socket.SHUT_WR)
    if s.recv(1) != b"":
        raise RuntimeError("data after the echo instead of EOF")

def lockstep(i, rng):
    with socket.create_connection((host, port), timeout=20) as s:
        for k, n in enumerate(sizes(rng)):
            p = rng.randbytes(n)
            s.sendall(p)
            check(i, k, p, recv_exact(s, n))
        finish(s)

def streamed(i, rng):
    ps = [rng.randbytes(n) for n in sizes(rng)]
    with socket.create_connection((host, port), timeout=20) as s:
        t = threading.Thread(target=lambda: [s.sendall(p) for p in ps])
        t.start()
        for k, p in enumerate(ps):
            check(i, k, p, recv_exact(s, len(p)))
        t.join()
        finish(s)

def run(i):
    rng = random.Random(seed * 1000 + i)
    try:
        (lockstep if i % 2 == 0 else streamed)(i, rng)
    except Exception as e:
        errors.append(f"connection {i}: {e!r} after {payloads[i]} payloads")

threads = [threading.Thread(target=run, args=(i,)) for i in range(conns)]
for t in threads:
    t.start()
for t in threads:
    t.join()
for e in errors:
    print(e, file=sys.stderr)
print(f"echoed {sum(totals)} bytes in {sum(payloads)} payloads over {conns} connections")
sys.exit(1 if errors else 0)
"#;

/// The number in `out`'s line that starts with `prefix` (`echoed 123 bytes ...`).
fn echoed_bytes(scene: &Scene, out: &str, prefix: &str) -> u64 {
    out.lines()
        .find_map(|l| l.strip_prefix(prefix))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| scene.fail(&format!("no `{prefix}N` line in:\n{out}")))
}

/// 5. An asyncio echo server; eight connections at once from a client on the kernel,
///    each payload compared.
#[test]
fn python_asyncio_echo() {
    let test = "python_asyncio_echo";
    let Some(mut scene) = Scene::new(test, &["python3"]) else {
        return;
    };
    let server_py = scene.net.write("echo_server.py", ASYNCIO_ECHO);
    let client_py = scene.net.write("echo_client.py", ECHO_CLIENT);
    let python = scene.python();
    let ip = scene.own_ip();
    let port = "7000";
    let argv = strings(&[&python, &server_py.display().to_string(), &ip, port]);
    let server = scene.under_test("asyncio-echo", None, &argv);
    scene.wait_for_log(server, "listening");
    let (conns, rounds) = (8, 40);
    let argv = strings(&[
        &python,
        &client_py.display().to_string(),
        &ip,
        port,
        &conns.to_string(),
        &rounds.to_string(),
        "7",
    ]);
    let out = scene.run("echo-client", &argv, Duration::from_secs(120));
    let bytes = echoed_bytes(&scene, &out, "echoed ");
    let stopped = scene.stop(server, "TERM");
    eprintln!(
        "{test}: {} payloads over {conns} connections, {bytes} bytes echoed and checked, \
         SIGTERM stop in {:.2} s, {:.1} s",
        conns * rounds,
        stopped.as_secs_f64(),
        scene.seconds()
    );
}

/// The kernel's echo server for the selectors client: a thread per connection, echoing
/// until the peer half-closes.
const THREADED_ECHO: &str = r#"import socketserver, sys

class Echo(socketserver.BaseRequestHandler):
    def handle(self):
        while True:
            data = self.request.recv(65536)
            if not data:
                return
            self.request.sendall(data)

socketserver.ThreadingTCPServer.allow_reuse_address = True
socketserver.ThreadingTCPServer.daemon_threads = True
with socketserver.ThreadingTCPServer((sys.argv[1], int(sys.argv[2])), Echo) as server:
    print("listening", flush=True)
    server.serve_forever()
"#;

/// The client under test: CONNS non-blocking connections driven by one selectors loop
/// (epoll), each connecting with EINPROGRESS, sending ROUNDS payloads one at a time and
/// reading each echo before the next, then half-closing and waiting for EOF. Exit 0
/// only when every byte matched, within 60 s.
const SELECTORS_CLIENT: &str = r#"import errno, random, selectors, socket, sys, time

host, port = sys.argv[1], int(sys.argv[2])
conns, rounds, seed = int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
sel = selectors.DefaultSelector()
print(f"selector {type(sel).__name__}", flush=True)

class Conn:
    def __init__(self, i):
        self.i, self.rng, self.round = i, random.Random(seed * 1000 + i), 0
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setblocking(False)
        err = self.sock.connect_ex((host, port))
        if err != errno.EINPROGRESS:
            raise RuntimeError(f"connection {i}: connect_ex gave {errno.errorcode.get(err, err)}")
        self.state, self.bytes = "connecting", 0
        sel.register(self.sock, selectors.EVENT_WRITE, self)

    def next_payload(self):
        n = self.rng.choice([1, self.rng.randint(2, 1500), self.rng.randint(1500, 200000)])
        self.payload = self.rng.randbytes(n)
        self.out, self.got = memoryview(self.payload), bytearray()
        sel.modify(self.sock, selectors.EVENT_READ | selectors.EVENT_WRITE, self)

    def ready(self, events):
        if self.state == "connecting":
            err = self.sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
            if err:
                raise RuntimeError(f"connection {self.i}: SO_ERROR {errno.errorcode.get(err, err)}")
            self.state = "echoing"
            self.next_payload()
            return
        if events & selectors.EVENT_WRITE and self.out:
            sent = self.sock.send(self.out)
            self.out = self.out[sent:]
            if not self.out:
                sel.modify(self.sock, selectors.EVENT_READ, self)
        if events & selectors.EVENT_READ:
            data = self.sock.recv(1 << 20)
            if self.state == "closing":
                if data:
                    raise RuntimeError(f"connection {self.i}: data instead of EOF")
                sel.unregister(self.sock)
                self.sock.close()
                self.state = "done"
                return
            if not data:
                raise RuntimeError(f"connection {self.i}: EOF in round {self.round}")
            self.got += data
            if len(self.got) > len(self.payload) or self.payload[:len(self.got)] != self.got:
                raise RuntimeError(f"connection {self.i}: round {self.round}: echo differs "
                                   f"within its first {len(self.got)} bytes")
            if len(self.got) == len(self.payload):
                self.bytes += len(self.payload)
                self.round += 1
                if self.round == rounds:
                    self.sock.shutdown(socket.SHUT_WR)
                    self.state = "closing"
                    sel.modify(self.sock, selectors.EVENT_READ, self)
                else:
                    self.next_payload()

all_conns = [Conn(i) for i in range(conns)]
deadline = time.monotonic() + 60
while any(c.state != "done" for c in all_conns):
    if time.monotonic() > deadline:
        states = [(c.i, c.state, c.round) for c in all_conns]
        sys.exit(f"not done within 60 s: {states}")
    for key, events in sel.select(timeout=1):
        key.data.ready(events)
print(f"echoed {sum(c.bytes for c in all_conns)} bytes in {conns * rounds} payloads "
      f"over {conns} connections")
"#;

/// 6. A selectors (epoll) client of non-blocking connections, against a kernel echo
///    server on the namespace's `.1`.
#[test]
fn python_selectors_client() {
    let test = "python_selectors_client";
    let Some(mut scene) = Scene::new(test, &["python3"]) else {
        return;
    };
    let server_py = scene.net.write("echo_server.py", THREADED_ECHO);
    let client_py = scene.net.write("selectors_client.py", SELECTORS_CLIENT);
    let python = scene.python();
    let kernel = scene.kernel_ip();
    let port = 7000;
    let argv = strings(&[
        &python,
        &server_py.display().to_string(),
        &kernel,
        &port.to_string(),
    ]);
    let server = scene.spawn("kernel-echo", &argv);
    scene.net.wait_listening(port, server);
    let (conns, rounds) = (6, 30);
    let argv = strings(&[
        &python,
        &client_py.display().to_string(),
        &kernel,
        &port.to_string(),
        &conns.to_string(),
        &rounds.to_string(),
        "11",
    ]);
    let client = scene.under_test("selectors-client", None, &argv);
    scene.expect_exit_0(client, Duration::from_secs(90));
    let out = scene.net.log(client);
    let bytes = echoed_bytes(&scene, &out, "echoed ");
    scene.expect_tap_carried(bytes);
    eprintln!(
        "{test}: {} payloads over {conns} connections, {bytes} bytes echoed and checked, \
         {:.1} s",
        conns * rounds,
        scene.seconds()
    );
}
