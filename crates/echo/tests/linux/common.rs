//! The echo tests' share of the harness: the binaries under test and the Python
//! clients they run inside the namespace; the namespace/TAP harness itself is
//! `rusty-testnet`, shared with httpd's tests.

#![allow(dead_code)]

pub(crate) use rusty_testnet::*;

/// Path of the `echo` binary under test.
pub(crate) const ECHO: &str = env!("CARGO_BIN_EXE_echo");
/// Path of the `echo-load` binary under test.
pub(crate) const ECHO_LOAD: &str = env!("CARGO_BIN_EXE_echo-load");

/// Outcome of a run of [`CLIENT_PY`], parsed from its `SUMMARY` line.
#[derive(Debug, Clone, Default)]
pub(crate) struct ClientSummary {
    pub conns: u64,
    pub complete: u64,
    pub prefix_bad: u64,
    pub errors: u64,
    pub bytes_sent: u64,
    pub bytes_echoed: u64,
    pub secs: f64,
}

impl ClientSummary {
    pub(crate) fn parse(log: &str) -> Option<ClientSummary> {
        let line = log.lines().rev().find(|l| l.starts_with("SUMMARY "))?;
        let mut s = ClientSummary::default();
        for kv in line.split_whitespace().skip(1) {
            let (k, v) = kv.split_once('=')?;
            match k {
                "conns" => s.conns = v.parse().ok()?,
                "complete" => s.complete = v.parse().ok()?,
                "prefix_bad" => s.prefix_bad = v.parse().ok()?,
                "errors" => s.errors = v.parse().ok()?,
                "bytes_sent" => s.bytes_sent = v.parse().ok()?,
                "bytes_echoed" => s.bytes_echoed = v.parse().ok()?,
                "secs" => s.secs = v.parse().ok()?,
                _ => {}
            }
        }
        Some(s)
    }
}

/// Echo client: `--conns` concurrent connections, each sending its own random bytes
/// (`--big` of them `--max` bytes, the rest log-uniform in 1..=`--small-max`) while a
/// second thread reads the echo; each checks that what came back is a prefix of what
/// was sent (byte by byte, as it arrives) and, at EOF, that the SHA-256 of the echo
/// equals that of the data. Exits 0 iff every connection got its whole echo back.
pub(crate) const CLIENT_PY: &str = r#"
import argparse, hashlib, math, os, random, socket, sys, threading, time

p = argparse.ArgumentParser()
p.add_argument("host")
p.add_argument("port", type=int)
p.add_argument("--conns", type=int, default=100)
p.add_argument("--max", type=int, default=10_000_000)
p.add_argument("--big", type=int, default=2)
p.add_argument("--small-max", type=int, default=1_000_000)
p.add_argument("--seed", type=int, default=1)
p.add_argument("--chunk", type=int, default=65536)
p.add_argument("--chunk-delay", type=float, default=0.0)
p.add_argument("--deadline", type=float, default=90.0)
p.add_argument("--io-timeout", type=float, default=30.0)
p.add_argument("--wait-ready", type=float, default=15.0)
p.add_argument("--ready-after", type=int, default=0)
a = p.parse_args()
start = time.monotonic()

# Wait until the server answers (its workers may still be starting).
err = None
while True:
    try:
        s = socket.create_connection((a.host, a.port), timeout=1.0)
        s.sendall(b"?")
        if s.recv(1) == b"?":
            s.close()
            break
        s.close()
        err = "probe echo differs"
    except OSError as e:
        err = e
    if time.monotonic() - start > a.wait_ready:
        print(f"SUMMARY conns={a.conns} complete=0 prefix_bad=0 errors={a.conns} bytes_sent=0 bytes_echoed=0 secs=0 (server not ready: {err!r})", flush=True)
        sys.exit(2)
    time.sleep(0.05)
print(f"PROBE ok after {time.monotonic() - start:.2f} s", flush=True)

rng = random.Random(a.seed)
nbig = min(a.big, a.conns)
sizes = [a.max] * nbig + [max(1, int(math.exp(rng.uniform(0, math.log(a.small_max))))) for _ in range(a.conns - nbig)]
lock = threading.Lock()
connected = [0]
echoed_total = [0]
results = [dict(i=i, size=sizes[i], received=0, complete=False, prefix_ok=True, error=None) for i in range(a.conns)]

def run(i):
    r = results[i]
    data = random.Random(a.seed * 1_000_003 + i).randbytes(sizes[i])
    want = hashlib.sha256(data).hexdigest()
    try:
        s = socket.create_connection((a.host, a.port), timeout=a.io_timeout)
    except OSError as e:
        r["error"] = f"connect:{e!r}"
        return
    with lock:
        connected[0] += 1
    send_err = [None]
    def sender():
        try:
            mv = memoryview(data)
            for off in range(0, len(mv), a.chunk):
                s.sendall(mv[off:off + a.chunk])
                if a.chunk_delay:
                    time.sleep(a.chunk_delay)
            s.shutdown(socket.SHUT_WR)
        except OSError as e:
            send_err[0] = f"send:{e!r}"
    t = threading.Thread(target=sender, daemon=True)
    t.start()
    h = hashlib.sha256()
    got = 0
    try:
        while True:
            b = s.recv(262144)
            if not b:
                break
            if data[got:got + len(b)] != b:
                r["prefix_ok"] = False
            h.update(b)
            got += len(b)
            with lock:
                echoed_total[0] += len(b)
    except OSError as e:
        r["error"] = f"recv:{e!r}"
    t.join(a.io_timeout)
    s.close()
    r["received"] = got
    r["complete"] = got == len(data) and h.hexdigest() == want and r["prefix_ok"]
    if send_err[0] and not r["error"]:
        r["error"] = send_err[0]
    if not r["complete"] and not r["error"]:
        r["error"] = "short-echo" if got < len(data) else "sha256-mismatch"

threads = [threading.Thread(target=run, args=(i,), daemon=True) for i in range(a.conns)]
for t in threads:
    t.start()
ready = a.ready_after <= 0
deadline = start + a.deadline
while any(t.is_alive() for t in threads) and time.monotonic() < deadline:
    if not ready:
        with lock:
            ready = connected[0] == a.conns and echoed_total[0] >= a.ready_after
        if ready:
            print(f"READY connected={connected[0]} echoed={echoed_total[0]}", flush=True)
    time.sleep(0.005)
timed_out = any(t.is_alive() for t in threads)
for r in results:
    print("CONN {i} size={size} received={received} complete={c} prefix_ok={p} error={e}".format(
        c=int(r["complete"]), p=int(r["prefix_ok"]), e=r["error"], **{k: r[k] for k in ("i", "size", "received")}))
complete = sum(r["complete"] for r in results)
prefix_bad = sum(not r["prefix_ok"] for r in results)
errors = sum(r["error"] is not None for r in results)
print(f"SUMMARY conns={a.conns} complete={complete} prefix_bad={prefix_bad} errors={errors} "
      f"bytes_sent={sum(sizes)} bytes_echoed={sum(r['received'] for r in results)} "
      f"secs={time.monotonic() - start:.2f}" + (" TIMEOUT" if timed_out else ""), flush=True)
os._exit(0 if complete == a.conns and not timed_out else 1)
"#;

/// What the raw-socket scripts ([`ICMP_PY`], [`MARTIANS_PY`], [`SYNFLOOD_PY`]) share, as a string literal
/// they are `concat!`ed after: the Internet checksum (RFC 1071) and a receive loop with a
/// deadline.
macro_rules! raw_socket_helpers {
    () => {
        r#"
import socket, struct, sys, time

def csum(b):
    if len(b) % 2:
        b += b"\0"
    s = sum(struct.unpack(f"!{len(b) // 2}H", b))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return ~s & 0xFFFF

def receive(sock, until):
    """(bytes, address) of everything `sock` receives until the monotonic time `until`."""
    while True:
        left = until - time.monotonic()
        if left <= 0:
            return
        sock.settimeout(left)
        try:
            yield sock.recvfrom(65535)
        except socket.timeout:
            return
"#
    };
}

/// What the scripts that build frames by hand ([`MARTIANS_PY`], [`SYNFLOOD_PY`]) share,
/// `concat!`ed after [`raw_socket_helpers`]: Ethernet, IPv4, TCP SYN and ARP headers
/// packed with `struct` (checksums computed here), an AF_PACKET socket on an interface,
/// what it hears from others, and a MAC learnt with ARP requests of our own.
macro_rules! raw_frame_helpers {
    () => {
        r#"
ETH_P_ALL, ETH_P_IP, ETH_P_ARP, PACKET_OUTGOING = 0x0003, 0x0800, 0x0806, 4
BCAST = b"\xff" * 6

def mac(s):
    return bytes.fromhex(s.replace(":", ""))

def ip(s):
    return socket.inet_aton(s)

def eth(dst, src, ethertype, payload):
    f = dst + src + struct.pack("!H", ethertype) + payload
    return f + b"\0" * max(0, 60 - len(f))

def ipv4(src, dst, proto, payload):
    ipv4.ident = (getattr(ipv4, "ident", 0) + 1) & 0xFFFF
    h = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(payload), ipv4.ident, 0x4000, 64,
                    proto, 0, ip(src), ip(dst))
    return h[:10] + struct.pack("!H", csum(h)) + h[12:] + payload

def tcp(src, dst, sport, dport, seq, ack, flags, window, payload=b"", opts=b""):
    """An IPv4 datagram carrying one TCP segment (`opts` padded to whole words)."""
    opts += b"\0" * (-len(opts) % 4)
    h = struct.pack("!HHIIBBHHH", sport, dport, seq & 0xFFFFFFFF, ack & 0xFFFFFFFF,
                    (5 + len(opts) // 4) << 4, flags, window, 0, 0) + opts
    c = csum(ip(src) + ip(dst) + struct.pack("!BBH", 0, 6, len(h) + len(payload)) + h + payload)
    return ipv4(src, dst, 6, h[:16] + struct.pack("!H", c) + h[18:] + payload)

def syn(src, dst, sport, dport, seq):
    # One MSS option.
    return tcp(src, dst, sport, dport, seq, 0, 0x02, 64240, opts=struct.pack("!BBH", 2, 4, 1460))

def ping(src, dst, seq):
    h = struct.pack("!BBHHH", 8, 0, 0, 0x4242, seq) + b"amplify me" * 4
    return ipv4(src, dst, 1, h[:2] + struct.pack("!H", csum(h)) + h[4:])

def arp(op, sender_mac, sender_ip, target_ip):
    return struct.pack("!HHBBH6s4s6s4s", 1, ETH_P_IP, 6, 4, op, sender_mac, ip(sender_ip),
                       b"\0" * 6, ip(target_ip))

def packet_socket(iface):
    """An AF_PACKET socket bound to `iface` that hears every frame, and `iface`'s MAC."""
    sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
    sock.bind((iface, 0))
    return sock, sock.getsockname()[4]

def incoming(sock, until, stop=None):
    """The frames others send (not our own outgoing ones) until `until`, or until `stop` holds."""
    got = []
    for f, addr in receive(sock, until):
        if addr[2] == PACKET_OUTGOING:
            continue
        got.append(f)
        if stop and stop(f):
            break
    return got

def arp_resolve(sock, ours, our_ip, target_ip, wait):
    """`target_ip`'s MAC from our ARP requests (one each 0.5 s, for `wait` s), or None."""
    start = time.monotonic()
    while time.monotonic() - start < wait:
        sock.send(eth(BCAST, ours, ETH_P_ARP, arp(1, ours, our_ip, target_ip)))
        for f in incoming(sock, time.monotonic() + 0.5):
            a = f[14:42]
            if f[12:14] == b"\x08\x06" and a[6:8] == b"\0\x02" and a[14:18] == ip(target_ip):
                return a[8:14]
    return None
"#
    };
}

/// ICMP echo with a raw socket: `icmp.py HOST COUNT WAIT`: first wait up to WAIT
/// seconds for any reply (ARP, workers starting), then send COUNT echo requests with
/// random payloads and require each reply to carry our id, sequence and payload and a
/// valid checksum. Exits 0 iff all COUNT came back.
pub(crate) const ICMP_PY: &str = concat!(
    raw_socket_helpers!(),
    r#"
import os
host, count, wait = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])

sock = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)
ident = os.getpid() & 0xFFFF

def ping(seq, timeout):
    payload = os.urandom(56)
    hdr = struct.pack("!BBHHH", 8, 0, 0, ident, seq)
    pkt = struct.pack("!BBHHH", 8, 0, csum(hdr + payload), ident, seq) + payload
    sock.sendto(pkt, (host, 0))
    for buf, addr in receive(sock, time.monotonic() + timeout):
        icmp = buf[(buf[0] & 15) * 4:]
        if addr[0] != host or len(icmp) < 8 or icmp[0] != 0:
            continue
        if struct.unpack("!HH", icmp[4:8]) != (ident, seq):
            continue
        if icmp[8:] != payload or csum(icmp) != 0:
            print(f"seq {seq}: corrupt reply", flush=True)
            return False
        return True
    return False

start = time.monotonic()
seq = 0
while not ping(seq, 0.3):
    seq += 1
    if time.monotonic() - start > wait:
        print(f"ICMP no reply from {host} within {wait} s", flush=True)
        sys.exit(1)
ok = 0
for k in range(count):
    seq += 1
    ok += ping(seq, 1.0)
print(f"ICMP {ok}/{count} replies from {host}", flush=True)
sys.exit(0 if ok == count else 1)
"#
);

/// Discard client: `discard.py HOST PORT CONNS BYTES DEADLINE`: first wait (up to 15 s)
/// until a connection to the server opens, then `CONNS` connections at once each send
/// `BYTES` random bytes, half-close and read to EOF, which a discard server sends once it
/// has taken everything. Prints `SUMMARY ok=N sent=S back=B secs=T`; exits 0 iff every
/// connection got its EOF with nothing before it, within `DEADLINE` seconds.
pub(crate) const DISCARD_PY: &str = r#"
import os, socket, sys, threading, time
host, port, conns, size, deadline = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5])
start = time.monotonic()
while True:
    try:
        socket.create_connection((host, port), timeout=10).close()
        break
    except OSError as e:
        if time.monotonic() - start > 15:
            print(f"SUMMARY ok=0 sent=0 back=0 secs=0 (server not ready: {e!r})", flush=True)
            os._exit(2)
        time.sleep(0.05)
end = time.monotonic() + deadline
res = [dict(ok=False, sent=0, back=0, error=None) for _ in range(conns)]

def run(i):
    r = res[i]
    data = os.urandom(size)
    try:
        s = socket.create_connection((host, port), timeout=30)
        s.sendall(data)
        r["sent"] = size
        s.shutdown(socket.SHUT_WR)
        while True:
            b = s.recv(65536)
            if not b:
                break
            r["back"] += len(b)
        s.close()
        r["ok"] = r["back"] == 0
    except OSError as e:
        r["error"] = repr(e)

threads = [threading.Thread(target=run, args=(i,), daemon=True) for i in range(conns)]
for t in threads:
    t.start()
for t in threads:
    t.join(max(end - time.monotonic(), 0.01))
for i, r in enumerate(res):
    if not r["ok"]:
        print(f"CONN {i} {r}", flush=True)
ok = sum(r["ok"] for r in res)
print(f"SUMMARY ok={ok} sent={sum(r['sent'] for r in res)} back={sum(r['back'] for r in res)} "
      f"secs={time.monotonic() - start:.2f}", flush=True)
os._exit(0 if ok == conns else 1)
"#;

/// Hostile addressing against Rusty from the namespace's side of its TAP:
/// `martians.py IFACE RUSTY_IP PEER_IP PORT CLOSED_PORT`. Frames are built by hand
/// (Ethernet, ARP, IPv4, TCP and ICMP headers with `struct`, checksums computed here)
/// and sent on an AF_PACKET socket bound to IFACE, which also hears everything Rusty
/// sends back. First it learns Rusty's MAC with an ARP request of its own; then it sends
/// SYNs (to PORT, where Rusty listens, and to CLOSED_PORT, which would earn a RST) and
/// pings from martian sources (0/8, 127/8, multicast, class E, the limited and the
/// subnet's directed broadcast, Rusty's own address, the LAND attack), to broadcast and
/// multicast destinations, in frames to broadcast and multicast MACs, and from group
/// source MACs (ARP too), and listens 1.5 s past the last: any frame from Rusty is a
/// failure (a SYN-ACK retransmission would come after 1 s). Last, the control: a
/// well-formed SYN from PEER_IP must get its SYN-ACK and a ping its reply. Prints one
/// `EXPECT reason=n ...` line (Rusty's drop counters should reach these) and a SUMMARY;
/// exits 0 iff nothing answered an attack and the control was answered.
pub(crate) const MARTIANS_PY: &str = concat!(
    raw_socket_helpers!(),
    raw_frame_helpers!(),
    r#"
iface, rusty_ip, peer_ip = sys.argv[1], sys.argv[2], sys.argv[3]
port, closed = int(sys.argv[4]), int(sys.argv[5])

sock, ours = packet_socket(iface)

def frames_from_rusty(until, stop=None):
    """What Rusty sends (not our own outgoing frames) until `until`, or until `stop` holds."""
    return incoming(sock, until, stop)

def describe(f):
    dst, src, t = f[:6].hex(":"), f[6:12].hex(":"), struct.unpack("!H", f[12:14])[0]
    if t != ETH_P_IP:
        return f"{src} > {dst} type {t:#06x}"
    p = f[14:]
    s, d = socket.inet_ntoa(p[12:16]), socket.inet_ntoa(p[16:20])
    l4 = p[(p[0] & 15) * 4:]
    if p[9] == 6:
        sp, dp, flags = struct.unpack("!HH", l4[:4]) + (l4[13],)
        return f"{src} > {dst} TCP {s}:{sp} > {d}:{dp} flags {flags:#04x}"
    return f"{src} > {dst} IPv4 proto {p[9]} {s} > {d}"

# Rusty's MAC, from an ARP request of our own (its workers may still be starting).
rusty = arp_resolve(sock, ours, peer_ip, rusty_ip, 15)
if rusty is None:
    print(f"no ARP reply from {rusty_ip}", flush=True)
    sys.exit(2)
print(f"ARP {rusty_ip} is at {rusty.hex(':')}", flush=True)
frames_from_rusty(time.monotonic() + 0.3)  # answers to repeated requests

net = rusty_ip.rsplit(".", 1)[0]
subnet_broadcast = net + ".255"
attacks = []  # (label, frame, drop reason Rusty should count)
sport = [20000]

def tcp_and_ping(label, macs, src, dst, reason):
    for dport in (port, closed):
        sport[0] += 1
        attacks.append((f"{label}: SYN {src}:{sport[0]} > {dst}:{dport}",
                        eth(macs[1], macs[0], ETH_P_IP, syn(src, dst, sport[0], dport, 1000)), reason))
    attacks.append((f"{label}: ping {src} > {dst}", eth(macs[1], macs[0], ETH_P_IP, ping(src, dst, sport[0])), reason))

to_rusty = (ours, rusty)
for src in ["0.0.0.0", "0.1.2.3", "127.0.0.1", "224.0.0.1", "239.255.255.250", "240.0.0.1",
            "255.255.255.255", subnet_broadcast]:
    tcp_and_ping("martian source", to_rusty, src, rusty_ip, "martian_source")
tcp_and_ping("own source", to_rusty, rusty_ip, rusty_ip, "own_source_address")
attacks.append(("LAND", eth(rusty, ours, ETH_P_IP, syn(rusty_ip, rusty_ip, port, port, 1000)),
                "own_source_address"))
for dst in ["255.255.255.255", subnet_broadcast, "224.0.0.1"]:
    tcp_and_ping("broadcast destination", to_rusty, peer_ip, dst, "not_our_address")
for group in ["ff:ff:ff:ff:ff:ff", "01:00:5e:00:00:01", "33:33:00:00:00:01"]:
    tcp_and_ping(f"frame to {group}", (ours, mac(group)), peer_ip, rusty_ip, "group_destination_mac")
for group in ["ff:ff:ff:ff:ff:ff", "01:00:5e:00:00:fb", "03:00:00:00:00:01"]:
    g = mac(group)
    tcp_and_ping(f"frame from {group}", (g, rusty), peer_ip, rusty_ip, "group_source_mac")
    for sender in (g, mac("02:00:00:00:00:99")):
        attacks.append((f"ARP from {group}", eth(BCAST, g, ETH_P_ARP, arp(1, sender, peer_ip, rusty_ip)),
                        "group_source_mac"))

replies = []
for label, frame, _ in attacks:
    sock.send(frame)
    replies += frames_from_rusty(time.monotonic() + 0.01)
replies += frames_from_rusty(time.monotonic() + 1.5)
for f in replies:
    print(f"ANSWERED {describe(f)}", flush=True)
bad = len(replies)

# The control: the peer's own address, MAC and a real SYN get a SYN-ACK; a ping, a reply.
def syn_ack_for(sp):
    def match(f):
        if f[12:14] != b"\x08\x00" or f[23] != 6:
            return False
        l4 = f[14 + (f[14] & 15) * 4:]
        return struct.unpack("!H", l4[2:4])[0] == sp and l4[13] & 0x12 == 0x12
    return match

def echo_reply(f):
    return f[12:14] == b"\x08\x00" and f[23] == 1 and f[14 + (f[14] & 15) * 4] == 0

control = True
for what, frame, want in [
    ("SYN", eth(rusty, ours, ETH_P_IP, syn(peer_ip, rusty_ip, 30000, port, 5000)), syn_ack_for(30000)),
    ("ping", eth(rusty, ours, ETH_P_IP, ping(peer_ip, rusty_ip, 1)), echo_reply),
]:
    for _ in range(3):
        sock.send(frame)
        if any(want(f) for f in frames_from_rusty(time.monotonic() + 1.0, want)):
            print(f"CONTROL {what} answered", flush=True)
            break
    else:
        control = False
        print(f"CONTROL {what} from {peer_ip} NOT answered", flush=True)

counts = {}
for _, _, reason in attacks:
    counts[reason] = counts.get(reason, 0) + 1
print("EXPECT " + " ".join(f"{r}={n}" for r, n in sorted(counts.items())), flush=True)
print(f"SUMMARY attacks={len(attacks)} answered={bad} control={'ok' if control else 'failed'}", flush=True)
sys.exit(0 if bad == 0 and control else 1)
"#
);

/// SYN flood from spoofed sources: `synflood.py IFACE RUSTY_IP OUR_IP PORT SECS MAX`.
/// Learns Rusty's MAC with an ARP request from OUR_IP, prints `FLOODING`, then sends
/// hand-built SYNs to RUSTY_IP:PORT on an AF_PACKET socket bound to IFACE, each from a
/// random address in .100–.250 of RUSTY_IP's /24 (nobody owns these, so nothing ever
/// answers Rusty's SYN-ACKs), a random port and a random ISN, as fast as it can, until
/// SECS seconds have passed or MAX SYNs are out. Prints `SUMMARY sent=N secs=T`.
pub(crate) const SYNFLOOD_PY: &str = concat!(
    raw_socket_helpers!(),
    raw_frame_helpers!(),
    r#"
import errno, random
iface, rusty_ip, our_ip = sys.argv[1], sys.argv[2], sys.argv[3]
port, secs, most = int(sys.argv[4]), float(sys.argv[5]), int(sys.argv[6])

sock, ours = packet_socket(iface)
rusty = arp_resolve(sock, ours, our_ip, rusty_ip, 15)
if rusty is None:
    print(f"no ARP reply from {rusty_ip}", flush=True)
    sys.exit(2)
# Only sending from here on: hear as little as the kernel lets us.
sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
net = rusty_ip.rsplit(".", 1)[0]
spoofed = [f"{net}.{h}" for h in range(100, 251)]
print(f"ARP {rusty_ip} is at {rusty.hex(':')}", flush=True)
print("FLOODING", flush=True)
rng = random.Random()
start = time.monotonic()
end = start + secs
sent = dropped = 0
while sent + dropped < most and time.monotonic() < end:
    for _ in range(64):
        src = rng.choice(spoofed)
        frame = eth(rusty, ours, ETH_P_IP, syn(src, rusty_ip, rng.randrange(1024, 65536), port,
                                               rng.getrandbits(32)))
        try:
            sock.send(frame)
            sent += 1
        except OSError as e:
            if e.errno not in (errno.ENOBUFS, errno.EAGAIN):
                raise
            dropped += 1
secs = time.monotonic() - start
print(f"SUMMARY sent={sent} dropped={dropped} secs={secs:.2f} rate={sent / secs:.0f}/s", flush=True)
"#
);

/// Out-of-order pinning: `pinning.py IFACE RUSTY_IP OUR_IP PORT CONNS SPOOF_IP`. Learns
/// Rusty's MAC, then opens CONNS connections to RUSTY_IP:PORT by hand from SPOOF_IP
/// (an address nobody in the namespace owns, so the kernel stays out of it; the script
/// answers Rusty's ARP requests for it), each with a SYN offering no window scaling, so
/// Rusty's window is at most 65,535 bytes. On every SYN-ACK it completes the handshake
/// and sends eight one-byte segments spread over that window, each beyond a gap that
/// never fills. Prints `PINNED n` and a SUMMARY, then holds the connections (sends
/// nothing more) for HOLD seconds, the last argument; exits 0 iff every connection was
/// pinned.
pub(crate) const PINNING_PY: &str = concat!(
    raw_socket_helpers!(),
    raw_frame_helpers!(),
    r#"
import random
iface, rusty_ip, our_ip, port = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
conns, spoof, hold = int(sys.argv[5]), sys.argv[6], float(sys.argv[7])

sock, ours = packet_socket(iface)
rusty = arp_resolve(sock, ours, our_ip, rusty_ip, 15)
if rusty is None:
    print(f"no ARP reply from {rusty_ip}", flush=True)
    sys.exit(2)
rng = random.Random(7)
isn = {30000 + i: rng.getrandbits(31) for i in range(conns)}
pinned = set()

def serve(until):
    """Answer Rusty: ARP requests for the spoofed address, SYN-ACKs with the pinning."""
    for f in incoming(sock, until):
        if f[12:14] == b"\x08\x06" and f[20:22] == b"\0\x01" and f[38:42] == ip(spoof):
            sock.send(eth(rusty, ours, ETH_P_ARP, arp(2, ours, spoof, rusty_ip)[:18] + rusty + ip(rusty_ip)))
            continue
        if f[12:14] != b"\x08\x00" or f[23] != 6:
            continue
        l4 = f[14 + (f[14] & 15) * 4:]
        sp, dp, seq, ack = struct.unpack("!HHII", l4[:12])
        if dp not in isn or l4[13] & 0x12 != 0x12 or dp in pinned:
            continue
        mine = isn[dp] + 1
        sock.send(eth(rusty, ours, ETH_P_IP, tcp(spoof, rusty_ip, dp, port, mine, seq + 1, 0x10, 65535)))
        for k in range(1, 9):
            sock.send(eth(rusty, ours, ETH_P_IP,
                          tcp(spoof, rusty_ip, dp, port, mine + k * 7000, seq + 1, 0x18, 65535, b"x")))
        pinned.add(dp)

start = time.monotonic()
ports = sorted(isn)
for i in range(0, len(ports), 25):
    for p in ports[i:i + 25]:
        sock.send(eth(rusty, ours, ETH_P_IP, syn(spoof, rusty_ip, p, port, isn[p])))
    serve(time.monotonic() + 0.05)
deadline = time.monotonic() + 10
while len(pinned) < conns and time.monotonic() < deadline:
    for p in ports:
        if p not in pinned:
            sock.send(eth(rusty, ours, ETH_P_IP, syn(spoof, rusty_ip, p, port, isn[p])))
    serve(time.monotonic() + 0.5)
print(f"PINNED {len(pinned)}", flush=True)
print(f"SUMMARY pinned={len(pinned)} conns={conns} secs={time.monotonic() - start:.1f}", flush=True)
serve(time.monotonic() + hold)
sys.exit(0 if len(pinned) == conns else 1)
"#
);

/// Readers that stop reading: `stalled_readers.py HOST PORT CONNS SECS`: CONNS kernel
/// connections to an echo server, each writing as much as the kernel takes (non-blocking,
/// up to 4 MiB each) and reading nothing, so the echo server's send buffer and then its
/// receive buffer fill and stay full. Prints `STALLED bytes=N` once nobody can write any
/// more (or after SECS), holds the connections for SECS more, and prints a SUMMARY.
pub(crate) const STALLED_READERS_PY: &str = r#"
import socket, sys, time
host, port, conns, secs = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
socks = []
for _ in range(conns):
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.connect((host, port))
    s.setblocking(False)
    socks.append(s)
chunk = b"s" * 65536
sent = [0] * conns
start = time.monotonic()
idle_since = time.monotonic()
while time.monotonic() - start < secs and time.monotonic() - idle_since < 1.0:
    for i, s in enumerate(socks):
        if sent[i] >= 4 << 20:
            continue
        try:
            n = s.send(chunk)
            sent[i] += n
            idle_since = time.monotonic()
        except BlockingIOError:
            pass
    time.sleep(0.01)
print(f"STALLED bytes={sum(sent)}", flush=True)
time.sleep(secs)
print(f"SUMMARY conns={conns} bytes={sum(sent)}", flush=True)
for s in socks:
    s.close()
"#;

/// Short connections: `short_conns.py HOST PORT CONNS PARALLEL SPREAD DEADLINE`: CONNS
/// connections, connection i starting no earlier than i * SPREAD / CONNS seconds in and at
/// most PARALLEL at a time; each connects, sends 32 random bytes, reads until they are
/// back, compares and closes (5 s timeouts). None starts after DEADLINE seconds. Prints
/// the first failures as `FAIL i error` and `SUMMARY ok=K conns=N secs=T`; exits 0.
pub(crate) const SHORT_CONNS_PY: &str = r#"
import os, socket, sys, threading, time
host, port, conns, parallel = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
spread, deadline = float(sys.argv[5]), float(sys.argv[6])
start = time.monotonic()
lock = threading.Lock()
next_conn = [0]
results = [None] * conns  # True, or what went wrong

def one():
    data = os.urandom(32)
    s = socket.create_connection((host, port), timeout=5)
    try:
        s.sendall(data)
        got = b""
        while len(got) < len(data):
            b = s.recv(len(data) - len(got))
            if not b:
                return f"EOF after {len(got)} bytes"
            got += b
        return True if got == data else "echo differs"
    finally:
        s.close()

def worker():
    while True:
        with lock:
            i = next_conn[0]
            next_conn[0] += 1
        if i >= conns:
            return
        wait = start + i * spread / conns - time.monotonic()
        if wait > 0:
            time.sleep(wait)
        if time.monotonic() - start > deadline:
            results[i] = "not started before the deadline"
            continue
        try:
            results[i] = one()
        except OSError as e:
            results[i] = repr(e)

threads = [threading.Thread(target=worker, daemon=True) for _ in range(parallel)]
for t in threads:
    t.start()
for t in threads:
    t.join(max(start + deadline + 10 - time.monotonic(), 0.01))
failed = [(i, r) for i, r in enumerate(results) if r is not True]
for i, r in failed[:20]:
    print(f"FAIL {i} {r}", flush=True)
print(f"SUMMARY ok={conns - len(failed)} conns={conns} secs={time.monotonic() - start:.2f}", flush=True)
os._exit(0)
"#;
