//! The TAP driver against the real Linux kernel: Rusty's engine serves an echo port on a
//! TAP device this test creates, and the kernel's own TCP (`std::net::TcpStream`) talks
//! to it through the device.
//!
//! Needs root (creating a TAP needs CAP_NET_ADMIN): skipped with a message otherwise,
//! failed instead when `RUSTY_REQUIRE_PRIVILEGED=1`. Traffic only ever goes to the
//! private /30 (or the unique-local /64) this test puts on its own TAP; the device
//! vanishes when its queues close.

use std::io::{self, Read, Write};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, Shutdown, SocketAddr, TcpStream, UdpSocket};
use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use rusty_drivers_tap::{open, TapConfig, TapQueue, TapStats};
use rusty_runtime::metrics::AppMetrics;
use rusty_runtime::{engine_worker, run, RuntimeConfig, StopHandle, Worker};
use rusty_stack::io::{Capabilities, Doorbell, PacketIo};
use rusty_stack::{Conn, EngineConfig, Handler, Stats};

const ECHO_PORT: u16 = 7;
const IO_TIMEOUT: Duration = Duration::from_secs(10);

/// Whether this test may run; panics instead of skipping under RUSTY_REQUIRE_PRIVILEGED=1.
fn privileged(test: &str) -> bool {
    let euid = rusty_testnet::euid().unwrap_or(u32::MAX);
    let reason = if euid != 0 {
        Some("not root (creating a TAP needs CAP_NET_ADMIN)")
    } else if !Path::new("/dev/net/tun").exists() {
        Some("/dev/net/tun is missing")
    } else {
        None
    };
    match reason {
        None => true,
        Some(r) => {
            if std::env::var("RUSTY_REQUIRE_PRIVILEGED").as_deref() == Ok("1") {
                panic!("{test}: {r}, and RUSTY_REQUIRE_PRIVILEGED=1");
            }
            eprintln!("skipping {test}: {r}");
            false
        }
    }
}

/// Tests in this process pick different names and subnets.
static NEXT: AtomicU32 = AtomicU32::new(0);

/// Whether `ip` falls inside any route the host already has (other than the default):
/// then that subnet is in use and the test must not claim it.
fn routed(ip: Ipv4Addr) -> bool {
    let Ok(table) = std::fs::read_to_string("/proc/net/route") else {
        return false;
    };
    let ip = u32::from_ne_bytes(ip.octets());
    table.lines().skip(1).any(|line| {
        let f: Vec<&str> = line.split_whitespace().collect();
        let hex = |s: &str| u32::from_str_radix(s, 16).ok();
        match (f.get(1).and_then(|s| hex(s)), f.get(7).and_then(|s| hex(s))) {
            (Some(dest), Some(mask)) => mask != 0 && ip & mask == dest,
            _ => false,
        }
    })
}

/// Whether `ip` is already an address of this host.
fn local(ip: Ipv4Addr) -> bool {
    UdpSocket::bind((ip, 0)).is_ok()
}

/// A unique interface name and a free private /30 in 10.213.0.0/16:
/// (name, host side .1, stack .2).
fn pick_link() -> (String, Ipv4Addr, Ipv4Addr) {
    let pid = std::process::id();
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let name = format!("rtap{}x{}", pid % 100_000, n);
    for k in 0..256u32 {
        let slot = pid.wrapping_mul(7).wrapping_add(n * 131 + k) % (1 << 14);
        let base = u32::from(Ipv4Addr::new(10, 213, 0, 0)) + slot * 4;
        let host = Ipv4Addr::from(base + 1);
        let stack = Ipv4Addr::from(base + 2);
        if !routed(host) && !local(host) && !local(stack) {
            return (name, host, stack);
        }
    }
    panic!("no free /30 in 10.213.0.0/16");
}

/// Sends back whatever arrives; closes when the peer has.
struct Echo;

impl AppMetrics for Echo {}

impl Handler for Echo {
    type Conn = ();
    fn accept(&mut self, _: std::net::SocketAddr, _: std::net::SocketAddr) -> Option<()> {
        Some(())
    }
    fn data(&mut self, conn: &mut Conn<'_, ()>, data: &[u8]) -> usize {
        conn.send(data).unwrap_or(0)
    }
    fn peer_closed(&mut self, conn: &mut Conn<'_, ()>) {
        conn.close();
    }
}

/// A TAP queue that hands its driver counters over when the engine drops it.
struct Reporting {
    q: TapQueue,
    out: Arc<Mutex<Vec<TapStats>>>,
}

impl PacketIo for Reporting {
    type Rx = <TapQueue as PacketIo>::Rx;
    type Tx = <TapQueue as PacketIo>::Tx;
    fn capabilities(&self) -> &Capabilities {
        self.q.capabilities()
    }
    fn receive(&mut self, out: &mut Vec<Self::Rx>, max: usize) -> usize {
        self.q.receive(out, max)
    }
    fn alloc_tx(&mut self, len: usize) -> Option<Self::Tx> {
        self.q.alloc_tx(len)
    }
    fn transmit(&mut self, frames: &mut Vec<Self::Tx>) {
        self.q.transmit(frames)
    }
    fn wait(&mut self, timeout: Duration) {
        self.q.wait(timeout)
    }
    fn set_doorbell(&mut self, bell: Doorbell) {
        self.q.set_doorbell(bell)
    }
}

impl Drop for Reporting {
    fn drop(&mut self) {
        self.out
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(self.q.stats());
    }
}

/// The stack running on its own threads; stopped (and its TAP closed) on drop, also
/// when the test fails half-way.
struct Stack {
    stop: StopHandle,
    thread: Option<JoinHandle<Vec<Stats>>>,
    tap_stats: Arc<Mutex<Vec<TapStats>>>,
}

impl Stack {
    fn start(queues: Vec<TapQueue>, ip: Ipv4Addr, prefix_len: u8) -> Stack {
        Stack::start_dual(queues, ip, prefix_len, None)
    }

    /// [`Stack::start`] with an IPv6 address (and its /64) beside the IPv4 one.
    fn start_dual(
        queues: Vec<TapQueue>,
        ip: Ipv4Addr,
        prefix_len: u8,
        ipv6: Option<Ipv6Addr>,
    ) -> Stack {
        let tap_stats = Arc::new(Mutex::new(Vec::new()));
        let workers = queues
            .into_iter()
            .enumerate()
            .map(|(i, q)| {
                let mut cfg = EngineConfig::new(ip);
                cfg.prefix_len = prefix_len;
                cfg.ipv6.extend(ipv6.map(|a| (a, 64)));
                cfg.dad_transmits = 0;
                let dev = Reporting {
                    q,
                    out: tap_stats.clone(),
                };
                Worker::new(
                    format!("tap-test-{i}"),
                    0,
                    Box::new(engine_worker(dev, cfg, vec![(ECHO_PORT, 128)], |_| Echo)),
                )
            })
            .collect();
        let rt = {
            let mut c = RuntimeConfig::default();
            c.oversubscribe = true;
            c.handle_signals = false;
            c.grace = Duration::from_millis(300);
            c
        };
        let stop = StopHandle::new();
        let s = stop.clone();
        let thread = thread::spawn(move || run(workers, &rt, &s).expect("runtime"));
        Stack {
            stop,
            thread: Some(thread),
            tap_stats,
        }
    }

    /// Stop the workers; their engine counters and the driver's, per queue.
    fn finish(mut self) -> (Vec<Stats>, Vec<TapStats>) {
        self.stop.stop();
        let stats = self.thread.take().map(|t| t.join().expect("stack thread"));
        let tap = self.tap_stats.lock().unwrap().clone();
        (stats.unwrap_or_default(), tap)
    }
}

impl Drop for Stack {
    fn drop(&mut self) {
        self.stop.stop();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Connect to the stack's echo port (retrying while the link comes up), send `len`
/// bytes, half-close, and check that exactly those bytes come back.
fn echo_through(stack_ip: impl Into<IpAddr>, len: usize, seed: u8) -> io::Result<()> {
    let addr = SocketAddr::from((stack_ip.into(), ECHO_PORT));
    let deadline = Instant::now() + IO_TIMEOUT;
    let stream = loop {
        match TcpStream::connect_timeout(&addr, Duration::from_secs(2)) {
            Ok(s) => break s,
            Err(e) if Instant::now() >= deadline => return Err(e),
            Err(_) => thread::sleep(Duration::from_millis(100)),
        }
    };
    stream.set_read_timeout(Some(IO_TIMEOUT))?;
    stream.set_write_timeout(Some(IO_TIMEOUT))?;
    let data: Vec<u8> = (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect();
    let mut writer = stream.try_clone()?;
    let sent = data.clone();
    let w = thread::spawn(move || -> io::Result<()> {
        writer.write_all(&sent)?;
        writer.shutdown(Shutdown::Write)
    });
    let mut back = Vec::with_capacity(len);
    (&stream).read_to_end(&mut back)?;
    w.join().expect("writer thread")?;
    assert_eq!(back.len(), len, "echoed length");
    assert!(back == data, "echoed bytes differ");
    Ok(())
}

/// `ping -c 1` the stack; without iputils, one ICMP echo over a raw socket instead.
fn ping(stack_ip: Ipv4Addr) {
    match Command::new("ping")
        .args(["-c", "1", "-W", "2", &stack_ip.to_string()])
        .output()
    {
        Ok(out) => assert!(
            out.status.success(),
            "ping {stack_ip}: {}",
            String::from_utf8_lossy(&out.stdout)
        ),
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            eprintln!("ping not installed: sending the ICMP echo from a raw socket");
            raw_ping(stack_ip).expect("ICMP echo through the TAP");
        }
        Err(e) => panic!("running ping: {e}"),
    }
}

/// RFC 1071 Internet checksum.
fn inet_checksum(data: &[u8]) -> u16 {
    let mut sum: u32 = data
        .chunks(2)
        .map(|c| u32::from(u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)])))
        .sum();
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

/// One ICMP echo request (RFC 792) to `ip` from a raw socket; waits for the reply.
fn raw_ping(ip: Ipv4Addr) -> io::Result<()> {
    let sock = rusty_testnet::sys::raw_icmp_socket()?;
    sock.set_read_timeout(Some(Duration::from_millis(500)))?;
    let id = (std::process::id() as u16).to_be_bytes();
    let mut req = vec![8, 0, 0, 0, id[0], id[1], 0, 1];
    req.extend_from_slice(b"rusty tap ping");
    let c = inet_checksum(&req).to_be_bytes();
    req[2..4].copy_from_slice(&c);
    sock.send_to(&req, (ip, 0))?;
    let deadline = Instant::now() + Duration::from_secs(3);
    let mut buf = [0u8; 1500];
    while Instant::now() < deadline {
        let Ok((n, from)) = sock.recv_from(&mut buf) else {
            continue;
        };
        // A raw IPv4 socket delivers the IP header too.
        let ihl = usize::from(buf[0] & 0x0f) * 4;
        let icmp = &buf[ihl.min(n)..n];
        if from.ip() == ip && icmp.len() == req.len() && icmp[0] == 0 && icmp[4..] == req[4..] {
            assert_eq!(inet_checksum(icmp), 0, "reply checksum");
            return Ok(());
        }
    }
    Err(io::Error::new(
        io::ErrorKind::TimedOut,
        "no ICMP echo reply",
    ))
}

fn sysfs(name: &str, attr: &str) -> Option<String> {
    std::fs::read_to_string(format!("/sys/class/net/{name}/{attr}"))
        .ok()
        .map(|s| s.trim().to_string())
}

#[test]
fn kernel_tcp_talks_to_the_stack_over_two_offloading_queues() {
    if !privileged("kernel_tcp_talks_to_the_stack_over_two_offloading_queues") {
        return;
    }
    let (name, host_ip, stack_ip) = pick_link();
    let cfg = {
        let mut c = TapConfig::new(name.clone(), 2);
        c.host = Some((host_ip, 30));
        c
    };
    let queues = open(&cfg).unwrap_or_else(|e| panic!("opening {name}: {e}"));
    assert_eq!(queues.len(), 2);
    for (i, q) in queues.iter().enumerate() {
        let c = q.capabilities();
        assert_eq!(q.name(), name);
        assert_eq!((c.queue, c.queue_count), (i as u16, 2));
        assert!(c.tx_checksum.tcp && !c.tx_checksum.ipv4);
        assert!(c.tso_max.is_some() && c.lro && c.rss.is_none());
        assert!(c.mac.is_unicast() && c.mac.is_local());
    }
    assert_eq!(queues[0].capabilities().mac, queues[1].capabilities().mac);
    assert_eq!(sysfs(&name, "mtu").as_deref(), Some("1500"));

    let stack = Stack::start(queues, stack_ip, 30);
    // Several flows at once, so both queues carry some (the kernel spreads new flows by
    // a random per-connection hash: all 16 on one queue has odds of 2^-15), with enough
    // data per flow for the kernel to build TSO super-frames.
    const FLOWS: u8 = 16;
    let clients: Vec<_> = (0..FLOWS)
        .map(|i| thread::spawn(move || echo_through(stack_ip, 200_000, i)))
        .collect();
    for c in clients {
        c.join()
            .expect("client thread")
            .expect("echo through the TAP");
    }
    ping(stack_ip);
    let (stats, tap) = stack.finish();

    let mut total = Stats::default();
    for s in &stats {
        total.accumulate(s);
    }
    assert_eq!(total.conns_opened_passive, u64::from(FLOWS));
    assert!(total.icmp_echo_replies >= 1);
    assert_eq!(tap.len(), 2, "both queues reported");
    let rx_gso: u64 = tap.iter().map(|t| t.rx_gso_frames).sum();
    let tx_drops: u64 = tap.iter().map(|t| t.tx_drops).sum();
    let rx_errors: u64 = tap.iter().map(|t| t.rx_errors).sum();
    eprintln!("engine: {total}\ndriver: {tap:?}");
    assert!(rx_gso > 0, "the kernel sent TSO super-frames: {tap:?}");
    assert_eq!((tx_drops, rx_errors), (0, 0), "{tap:?}");
    assert!(
        tap.iter().all(|t| t.rx_frames > 0 && t.tx_frames > 0),
        "both queues carried traffic: {tap:?}"
    );
    assert!(
        sysfs(&name, "mtu").is_none(),
        "the TAP vanished with its queues"
    );
}

/// The kernel coalesces TCP over IPv6 into super-frames for the stack as it does over
/// IPv4 (`TUN_F_TSO6`), and the stack takes them whole.
#[test]
fn kernel_tcp_over_ipv6_arrives_in_super_frames() {
    if !privileged("kernel_tcp_over_ipv6_arrives_in_super_frames") {
        return;
    }
    let (name, host_ip, stack_ip) = pick_link();
    // A unique-local /64 named after the /30, so that tests at once never share one.
    let [_, _, a, b] = host_ip.octets();
    let prefix = |last| Ipv6Addr::new(0xfd00, 0x213, u16::from_be_bytes([a, b]), 0, 0, 0, 0, last);
    let (host6, stack6) = (prefix(1), prefix(2));
    let cfg = {
        let mut c = TapConfig::new(name.clone(), 1);
        c.host = Some((host_ip, 30));
        c.host_ipv6 = vec![(host6, 64)];
        c
    };
    let queues = open(&cfg).unwrap_or_else(|e| panic!("opening {name}: {e}"));
    let stack = Stack::start_dual(queues, stack_ip, 30, Some(stack6));
    const FLOWS: u8 = 4;
    let clients: Vec<_> = (0..FLOWS)
        .map(|i| thread::spawn(move || echo_through(stack6, 200_000, i)))
        .collect();
    for c in clients {
        c.join()
            .expect("client thread")
            .expect("echo over IPv6 through the TAP");
    }
    let (stats, tap) = stack.finish();
    eprintln!("engine: {}\ndriver: {tap:?}", stats[0]);
    assert_eq!(stats[0].conns_opened_passive, u64::from(FLOWS));
    assert!(
        tap[0].rx_gso_frames > 0,
        "the kernel sent TSO super-frames over IPv6: {tap:?}"
    );
    assert_eq!((tap[0].tx_drops, tap[0].rx_errors), (0, 0), "{tap:?}");
}

#[test]
fn one_queue_without_offloads_with_a_smaller_mtu() {
    if !privileged("one_queue_without_offloads_with_a_smaller_mtu") {
        return;
    }
    let (name, host_ip, stack_ip) = pick_link();
    let cfg = {
        let mut c = TapConfig::new(name.clone(), 1);
        c.mtu = 1280;
        c.offloads = false;
        c.host = Some((host_ip, 30));
        c
    };
    let queues = open(&cfg).unwrap_or_else(|e| panic!("opening {name}: {e}"));
    let c = queues[0].capabilities().clone();
    assert_eq!(c.mtu, 1280);
    assert_eq!(c.tx_checksum, rusty_stack::io::ChecksumOffload::NONE);
    assert_eq!((c.tso_max, c.lro), (None, false));
    assert_eq!(sysfs(&name, "mtu").as_deref(), Some("1280"));
    let flags = sysfs(&name, "flags").expect("interface exists");
    let flags = u32::from_str_radix(flags.trim_start_matches("0x"), 16).unwrap();
    assert_ne!(flags & libc::IFF_UP as u32, 0, "link is up");
    assert!(local(host_ip), "host side has {host_ip}");

    let stack = Stack::start(queues, stack_ip, 30);
    echo_through(stack_ip, 100_000, 42).expect("echo through the TAP");
    let (stats, tap) = stack.finish();
    assert_eq!(stats[0].conns_opened_passive, 1);
    assert_eq!(tap[0].rx_gso_frames, 0, "no GSO without offloads");
    assert!(tap[0].rx_frames > 0 && tap[0].tx_frames > 0);
    assert_eq!((tap[0].tx_drops, tap[0].rx_errors), (0, 0));
}

#[test]
fn a_second_open_attaches_more_queues_to_the_same_device() {
    if !privileged("a_second_open_attaches_more_queues_to_the_same_device") {
        return;
    }
    let (name, _, _) = pick_link();
    let queues = open(&TapConfig::new(name.clone(), 1)).expect("open");
    // The device exists; a second open with more queues attaches to it.
    let more = open(&TapConfig::new(name.clone(), 2)).expect("attach two more queues");
    assert_eq!(more.len(), 2);
    drop(more);
    drop(queues);
    // A name longer than IFNAMSIZ never reaches the kernel.
    let e = open(&TapConfig::new("x".repeat(16), 1))
        .err()
        .expect("refused");
    assert!(e.to_string().contains("not a valid interface name"), "{e}");
}
