//! A rig for testing a driver against a model of its device: Rusty's engines, echoing,
//! on the driver's queues over the model; a peer engine on an in-memory link whose
//! frames are carried to and from the model's wire ([`FrameWire`]); and what the
//! runtime's control channel does between workers (sharing ARP learned by one worker,
//! handing segments to their flow's owner) done by hand each step. The peer opens
//! connections that send a stream and check every byte that comes back; the workers
//! may open connections to the peer too, to prove their return traffic comes back to
//! them. Both the 82599 driver's tests and the mPIPE driver's use it.

use std::net::{Ipv4Addr, SocketAddr};
use std::time::Duration;

use rusty_stack::checksum;
use rusty_stack::io::FrameWire;
use rusty_stack::io::{Capabilities, MacAddr, PacketIo};
use rusty_stack::time::VirtualClock;
use rusty_stack::Engine;
use rusty_stack::{CloseReason, Conn, Handler, Opener};

use crate::memory::{self, MemoryLink};

/// Byte `i` of the stream of connection `c`.
pub fn stream_byte(c: usize, i: usize) -> u8 {
    (i.wrapping_mul(31) ^ c.wrapping_mul(131) ^ (i >> 9)) as u8
}

/// Where [`tcp_frame`] puts the TCP checksum (a test corrupts it there).
pub const TCP_CHECKSUM_AT: usize = 14 + 20 + 16;

/// An Ethernet frame from `macs.1` to `macs.0` carrying an IPv4 packet from `ips.0` to
/// `ips.1` with one TCP segment from port `ports.0` to `ports.1` (no options, ACK and
/// PSH, sequence number 1, window 65535) and `payload`, both checksums right: what a
/// test puts on a model device's wire.
pub fn tcp_frame(
    macs: (MacAddr, MacAddr),
    ips: (Ipv4Addr, Ipv4Addr),
    ports: (u16, u16),
    payload: &[u8],
) -> Vec<u8> {
    let total = (20 + 20 + payload.len()) as u16;
    let mut f = Vec::with_capacity(14 + usize::from(total));
    f.extend_from_slice(macs.0.as_bytes());
    f.extend_from_slice(macs.1.as_bytes());
    f.extend_from_slice(&[0x08, 0x00, 0x45, 0]);
    f.extend_from_slice(&total.to_be_bytes());
    f.extend_from_slice(&[0, 1, 0x40, 0, 64, 6, 0, 0]);
    f.extend_from_slice(&ips.0.octets());
    f.extend_from_slice(&ips.1.octets());
    let ip_sum = checksum::checksum(&f[14..34]);
    f[24..26].copy_from_slice(&ip_sum.to_be_bytes());
    f.extend_from_slice(&ports.0.to_be_bytes());
    f.extend_from_slice(&ports.1.to_be_bytes());
    f.extend_from_slice(&[0, 0, 0, 1, 0, 0, 0, 0, 0x50, 0x18, 0xff, 0xff, 0, 0, 0, 0]);
    f.extend_from_slice(payload);
    let pseudo = checksum::pseudo_header_v4(ips.0.octets(), ips.1.octets(), 6, total - 20);
    let c = checksum::finish(checksum::combine(pseudo, checksum::sum(&f[34..])));
    f[TCP_CHECKSUM_AT..TCP_CHECKSUM_AT + 2].copy_from_slice(&c.to_be_bytes());
    f
}

/// The port Rusty's workers echo on.
pub const ECHO_PORT: u16 = 7;
/// The port the peer accepts the workers' active opens on.
pub const PEER_PORT: u16 = 9000;

/// Rusty's side: echoes what it gets; notes the flows it accepted, and closes its own
/// active opens once they complete (counting them).
#[derive(Debug, Default)]
pub struct EchoWorker {
    /// Remote ends of the connections it accepted.
    pub accepted: Vec<std::net::SocketAddr>,
    /// Active opens that completed.
    pub opened: usize,
}

impl Handler for EchoWorker {
    type Conn = ();
    fn accept(&mut self, _local: std::net::SocketAddr, remote: std::net::SocketAddr) -> Option<()> {
        self.accepted.push(remote);
        Some(())
    }
    fn connected(&mut self, conn: &mut Conn<'_, ()>) {
        if conn.local_addr().port() != ECHO_PORT {
            self.opened += 1;
            conn.close();
        }
    }
    fn data(&mut self, conn: &mut Conn<'_, ()>, data: &[u8]) -> usize {
        conn.send(data).unwrap_or(0)
    }
    fn peer_closed(&mut self, conn: &mut Conn<'_, ()>) {
        conn.close();
    }
}

/// A connection the peer accepted (a worker's active open), not one of its own.
const ACCEPTED: usize = usize::MAX;

/// The peer: on each of its connections sends `len` bytes of [`stream_byte`] and checks
/// every byte that comes back; accepts (and drains) the workers' active opens.
#[derive(Debug)]
pub struct EchoClient {
    len: usize,
    /// Per connection: bytes sent, bytes back.
    progress: Vec<(usize, usize)>,
    /// What went wrong.
    pub errors: Vec<String>,
    /// Connections that ended.
    pub done: usize,
}

impl EchoClient {
    /// `conns` connections of `len` bytes each way.
    pub fn new(conns: usize, len: usize) -> EchoClient {
        EchoClient {
            len,
            progress: vec![(0, 0); conns],
            errors: Vec::new(),
            done: 0,
        }
    }

    fn send_more(&mut self, conn: &mut Conn<'_, usize>) {
        let c = *conn.state();
        if c == ACCEPTED {
            return;
        }
        let mut buf = [0u8; 4096];
        while self.progress[c].0 < self.len {
            let sent = self.progress[c].0;
            let n = (self.len - sent).min(buf.len());
            for (k, b) in buf[..n].iter_mut().enumerate() {
                *b = stream_byte(c, sent + k);
            }
            let took = conn.send(&buf[..n]).unwrap_or(0);
            self.progress[c].0 += took;
            if took < n {
                conn.notify_writable();
                return;
            }
        }
    }
}

impl Handler for EchoClient {
    type Conn = usize;
    fn accept(
        &mut self,
        _local: std::net::SocketAddr,
        _remote: std::net::SocketAddr,
    ) -> Option<usize> {
        Some(ACCEPTED)
    }
    fn connected(&mut self, conn: &mut Conn<'_, usize>) {
        self.send_more(conn);
    }
    fn writable(&mut self, conn: &mut Conn<'_, usize>) {
        self.send_more(conn);
    }
    fn data(&mut self, conn: &mut Conn<'_, usize>, data: &[u8]) -> usize {
        let c = *conn.state();
        if c == ACCEPTED {
            return data.len();
        }
        let back = self.progress[c].1;
        if let Some(k) = (0..data.len()).find(|&k| data[k] != stream_byte(c, back + k)) {
            self.errors
                .push(format!("conn {c}: byte {} differs", back + k));
            conn.abort();
            return 0;
        }
        self.progress[c].1 += data.len();
        if self.progress[c].1 == self.len {
            conn.close();
        }
        data.len()
    }
    fn peer_closed(&mut self, conn: &mut Conn<'_, usize>) {
        conn.close();
    }
    fn closed(&mut self, _: &mut Opener<'_, usize>, c: usize, reason: CloseReason) {
        if c == ACCEPTED {
            return;
        }
        if reason != CloseReason::Normal || self.progress[c].1 != self.len {
            self.errors
                .push(format!("conn {c}: {reason:?} at {:?}", self.progress[c]));
        }
        self.done += 1;
    }
}

/// Workers on a driver's queues `D` over a model whose wire is `W`, and the peer.
pub struct Rig<D: PacketIo, W: FrameWire> {
    /// The clock every engine reads; each [`Rig::step`] moves it 1 ms.
    pub clock: VirtualClock,
    /// Rusty's workers, worker `i` on queue `i`.
    pub workers: Vec<Engine<D, EchoWorker, VirtualClock>>,
    /// The peer.
    pub peer: Engine<MemoryLink, EchoClient, VirtualClock>,
    link: MemoryLink,
    wire: W,
    /// Frames the model put on its wire.
    pub wire_frames: u64,
    /// Segments a worker handed to their flow's owner.
    pub handed_over: u64,
}

impl<D: PacketIo, W: FrameWire> Rig<D, W> {
    /// Workers on `queues` at `rusty_ip` (the model answering to `rusty_mac`) listening
    /// on [`ECHO_PORT`], and `client` at `peer_ip` listening on [`PEER_PORT`].
    pub fn new(
        queues: Vec<D>,
        wire: W,
        rusty: (Ipv4Addr, MacAddr),
        peer_ip: Ipv4Addr,
        client: EchoClient,
    ) -> Rig<D, W> {
        let clock = VirtualClock::new();
        let workers = queues
            .into_iter()
            .enumerate()
            .map(|(i, q)| {
                let mut cfg = crate::sim::engine_config(rusty.0, i as u64);
                cfg.prefix_len = 24;
                let mut e = Engine::new(q, EchoWorker::default(), clock.clone(), cfg);
                e.listen(ECHO_PORT, 1024);
                e
            })
            .collect();
        let peer_mac = MacAddr([0x02, 0, 0, 0, 0x99, 1]);
        let (link, dev) = memory::pair(
            Capabilities::new(rusty.1, 1500),
            Capabilities::new(peer_mac, 1500),
        );
        let mut peer = Engine::new(
            dev,
            client,
            clock.clone(),
            crate::sim::engine_config(peer_ip, 99),
        );
        peer.listen(PEER_PORT, 1024);
        Rig {
            clock,
            workers,
            peer,
            link,
            wire,
            wire_frames: 0,
            handed_over: 0,
        }
    }

    /// One round: the peer's loop turn and its frames to the model, every worker's
    /// turn, the runtime's hand-overs, the model's frames to the peer, 1 ms of time.
    pub fn step(&mut self) {
        self.peer.poll();
        let mut frames = Vec::new();
        self.link.receive(&mut frames, usize::MAX);
        for f in &frames {
            self.wire.deliver(f);
        }
        for w in &mut self.workers {
            w.poll();
        }
        // What the runtime's control channel carries: ARP learned by one worker (ARP
        // is not hashed to a queue), and segments that landed on a worker other than
        // their flow's owner (on devices whose steering the stack cannot predict).
        let mut learned = Vec::new();
        let mut misdirected = Vec::new();
        for w in &mut self.workers {
            w.drain_learned_arp(&mut learned);
            w.take_misdirected(&mut misdirected);
        }
        for (ip, mac) in learned {
            self.workers.iter_mut().for_each(|w| w.import_arp(ip, mac));
        }
        self.handed_over += misdirected.len() as u64;
        for (owner, data) in misdirected {
            self.workers[usize::from(owner)].inject_frames([data]);
        }
        let mut sent = Vec::new();
        self.wire.take_transmitted(&mut sent);
        self.wire_frames += sent.len() as u64;
        for f in sent {
            if let Some(mut b) = self.link.alloc_tx(f.len()) {
                b.copy_from_slice(&f);
                self.link.transmit(&mut vec![b]);
            }
        }
        self.clock.advance(Duration::from_millis(1));
    }

    /// The peer opens `conns` connections to the workers' echo port (the client was
    /// made for that many), each worker opens `active` connections to the peer, and the
    /// rig steps until all are done or `max_steps` have passed.
    pub fn run_echo(&mut self, conns: usize, active: usize, max_steps: usize) {
        let rusty = self.workers[0].config().ip;
        for c in 0..conns {
            assert!(self
                .peer
                .connect(SocketAddr::from((rusty, ECHO_PORT)), c)
                .is_ok());
        }
        let peer_ip = self.peer.config().ip;
        for w in &mut self.workers {
            for _ in 0..active {
                assert!(w
                    .connect(SocketAddr::from((peer_ip, PEER_PORT)), ())
                    .is_ok());
            }
        }
        for _ in 0..max_steps {
            self.step();
            if self.peer.handler().done == conns
                && self.workers.iter().all(|w| w.handler().opened == active)
            {
                break;
            }
        }
    }
}
