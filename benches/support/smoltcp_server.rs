//! A smoltcp server for the request/response workload (`rr.rs`): one
//! [`Interface`] and one [`SocketSet`] holding a TCP socket per connection, on an end
//! of the same in-memory link the Rusty client engine uses, so that a comparison with
//! Rusty's server changes only the server.
//!
//! smoltcp takes one listening socket per connection: all K are created up front,
//! listening on the same port, and a SYN goes to the first that is still listening.
//!
//! A loop turn ([`smoltcp_server_turn`]) mirrors one of Rusty's engine: take a burst of
//! frames from the link (as many as Rusty's engines take, `rx_burst`) and process them, let the
//! application answer every complete request, send what the sockets have to say, and
//! hand the burst of frames to the link. smoltcp has no readiness events, so the
//! application walks all the sockets each turn, as smoltcp's own examples do, and
//! `Interface::poll_egress` walks them all too.

use std::cell::Cell;

use rusty::io::{PacketIo, TxFrame};
use rusty::time::VirtualClock;
use rusty::Clock;
use rusty_testkit::memory::MemoryLink;
use rusty_testkit::sim::{SERVER_IP, SERVER_MAC};
use smoltcp::iface::{
    Config, Interface, PollIngressSingleResult, PollResult, SocketHandle, SocketSet,
};
use smoltcp::phy::{self, Checksum, ChecksumCapabilities, DeviceCapabilities, Medium};
use smoltcp::socket::tcp::{self, CongestionControl};
use smoltcp::time::{Duration, Instant};
use smoltcp::wire::{EthernetAddress, HardwareAddress, IpAddress, IpCidr};

use crate::common::{Messages, OutOfLine, OutOfLineRx, OutOfLineTx, MESSAGE_LEN};
use crate::rr::{RrServerSide, RESPONSE};

/// Largest Ethernet frame on the link (MTU 1500).
const MAX_FRAME: usize = 1514;
/// Receive and send buffer of each socket: Rusty's default `recv_buffer` and
/// `send_buffer`. smoltcp derives the window scale it offers from the receive buffer,
/// which then matches Rusty's (shift 3).
const SOCKET_BUFFER: usize = 256 * 1024;
/// Delayed-ACK timeout: Rusty's default (smoltcp's own is 10 ms).
const ACK_DELAY: Duration = Duration::from_millis(40);

/// An end of the in-memory link as a smoltcp device. Frames are taken a burst at a
/// time ([`LinkDevice::take_burst`]) and handed to the interface one by one; frames
/// to send are queued and handed to the link once per turn ([`LinkDevice::flush`]),
/// both as Rusty's engine does with its device. The link is [`OutOfLine`], as the Rusty
/// server's is, so that profiles of both servers leave out the same link functions.
pub(crate) struct LinkDevice {
    link: OutOfLine<MemoryLink>,
    /// Frames taken from the link per turn.
    burst: usize,
    /// The burst taken this turn, last frame first.
    rx: Vec<Rx>,
    tx: Vec<Tx>,
    /// Where a frame is written when the link has no buffer free (it is then dropped,
    /// as a full transmit ring drops it), counted in `tx_dropped`.
    scratch: Vec<u8>,
    tx_dropped: u64,
}

impl LinkDevice {
    fn new(link: MemoryLink, burst: usize) -> LinkDevice {
        LinkDevice {
            link: OutOfLine::new(link),
            burst,
            rx: Vec::with_capacity(burst),
            tx: Vec::new(),
            scratch: vec![0; MAX_FRAME],
            tx_dropped: 0,
        }
    }

    /// Take up to a burst of frames from the link; returns how many.
    fn take_burst(&mut self) -> usize {
        let n = self.link.receive(&mut self.rx, self.burst);
        self.rx.reverse();
        n
    }

    /// Hand the frames written this turn to the link.
    fn flush(&mut self) {
        if !self.tx.is_empty() {
            self.link.transmit(&mut self.tx);
        }
    }
}

type Rx = OutOfLineRx<<MemoryLink as PacketIo>::Rx>;
type Tx = OutOfLineTx<<MemoryLink as PacketIo>::Tx>;

/// A received frame, handed to smoltcp.
pub(crate) struct RxToken(Rx);

impl phy::RxToken for RxToken {
    fn consume<R, F: FnOnce(&[u8]) -> R>(self, f: F) -> R {
        f(&self.0)
    }
}

/// The right to send one frame: the link buffer is taken when smoltcp writes it.
pub(crate) struct TxToken<'a> {
    link: &'a mut OutOfLine<MemoryLink>,
    tx: &'a mut Vec<Tx>,
    scratch: &'a mut Vec<u8>,
    tx_dropped: &'a mut u64,
}

impl phy::TxToken for TxToken<'_> {
    fn consume<R, F: FnOnce(&mut [u8]) -> R>(self, len: usize, f: F) -> R {
        match self.link.alloc_tx(len) {
            Some(mut frame) => {
                let r = f(&mut frame);
                frame.truncate(len);
                self.tx.push(frame);
                r
            }
            None => {
                *self.tx_dropped += 1;
                self.scratch.resize(len.max(self.scratch.len()), 0);
                f(&mut self.scratch[..len])
            }
        }
    }
}

impl phy::Device for LinkDevice {
    type RxToken<'a> = RxToken;
    type TxToken<'a> = TxToken<'a>;

    fn receive(&mut self, _: Instant) -> Option<(RxToken, TxToken<'_>)> {
        let frame = self.rx.pop()?;
        Some((
            RxToken(frame),
            TxToken {
                link: &mut self.link,
                tx: &mut self.tx,
                scratch: &mut self.scratch,
                tx_dropped: &mut self.tx_dropped,
            },
        ))
    }

    fn transmit(&mut self, _: Instant) -> Option<TxToken<'_>> {
        Some(TxToken {
            link: &mut self.link,
            tx: &mut self.tx,
            scratch: &mut self.scratch,
            tx_dropped: &mut self.tx_dropped,
        })
    }

    fn capabilities(&self) -> DeviceCapabilities {
        let mut caps = DeviceCapabilities::default();
        caps.medium = Medium::Ethernet;
        caps.max_transmission_unit = MAX_FRAME;
        // No offloads, as on Rusty's side: smoltcp computes and verifies every checksum.
        let mut checksum = ChecksumCapabilities::default();
        checksum.ipv4 = Checksum::Both;
        checksum.tcp = Checksum::Both;
        caps.checksum = checksum;
        caps
    }
}

thread_local! {
    /// The virtual clock in milliseconds, for smoltcp's TSval generator (a plain `fn`,
    /// so it cannot capture the clock). Set at the start of every server turn.
    static TS_MILLIS: Cell<u32> = const { Cell::new(0) };
}

/// TSvals tick in milliseconds of virtual time, as Rusty's do (RFC 7323 §5.4). Rusty
/// adds a per-connection offset (§7.1); this does not.
fn tsval() -> u32 {
    TS_MILLIS.with(Cell::get)
}

/// Socket buffers for `connections` sockets, owned by the caller so the socket set can
/// borrow them: one allocation, of which only the pages a socket writes are touched.
pub(crate) struct Buffers(Vec<u8>);

impl Buffers {
    pub(crate) fn new(connections: usize) -> Buffers {
        Buffers(vec![0; connections * 2 * SOCKET_BUFFER])
    }
}

/// The smoltcp server: interface, sockets, and per socket the request bytes received.
pub(crate) struct SmoltcpServer<'a> {
    clock: VirtualClock,
    dev: LinkDevice,
    iface: Interface,
    sockets: SocketSet<'a>,
    /// Buffers not yet given to a socket.
    spare: std::slice::ChunksExactMut<'a, u8>,
    conns: Vec<(SocketHandle, Messages)>,
    pub served: u64,
    pub send_failures: u64,
}

impl<'a> SmoltcpServer<'a> {
    /// A server at [`SERVER_IP`] on `link`, with sockets for as many connections as
    /// `buffers` holds, taking up to `burst` frames from the link per turn.
    pub(crate) fn new(
        link: MemoryLink,
        clock: VirtualClock,
        buffers: &'a mut Buffers,
        burst: usize,
    ) -> Self {
        let mut dev = LinkDevice::new(link, burst);
        let mut config = Config::new(HardwareAddress::Ethernet(EthernetAddress(SERVER_MAC.0)));
        config.random_seed = 1;
        let mut iface = Interface::new(config, &mut dev, now(&clock));
        iface.update_ip_addrs(|addrs| {
            addrs
                .push(IpCidr::new(IpAddress::Ipv4(SERVER_IP), 24))
                .expect("the interface's first address");
        });
        SmoltcpServer {
            clock,
            dev,
            iface,
            sockets: SocketSet::new(Vec::new()),
            spare: buffers.0.chunks_exact_mut(SOCKET_BUFFER),
            conns: Vec::new(),
            served: 0,
            send_failures: 0,
        }
    }

    /// Answer every complete request received, on every socket.
    fn serve(&mut self) {
        for (handle, messages) in &mut self.conns {
            let socket = self.sockets.get_mut::<tcp::Socket>(*handle);
            let mut requests = 0;
            while let Ok(n @ 1..) = socket.recv(|data| (data.len(), data.len())) {
                requests += messages.add(n);
            }
            for _ in 0..requests {
                self.served += 1;
                if socket.send_slice(&RESPONSE) != Ok(MESSAGE_LEN) {
                    self.send_failures += 1;
                }
            }
        }
    }
}

/// The virtual clock as smoltcp's time.
fn now(clock: &VirtualClock) -> Instant {
    Instant::from_micros(clock.now().as_micros() as i64)
}

/// One loop turn of the smoltcp server (a separate symbol for profilers): a burst of
/// frames in, the application, the sockets' segments out.
#[inline(never)]
pub(crate) fn smoltcp_server_turn(s: &mut SmoltcpServer<'_>) -> usize {
    let now = now(&s.clock);
    TS_MILLIS.with(|ms| ms.set(now.total_millis() as u32));
    let received = s.dev.take_burst();
    s.iface.poll_maintenance(now);
    while s.iface.poll_ingress_single(now, &mut s.dev, &mut s.sockets)
        != PollIngressSingleResult::None
    {}
    s.serve();
    while s.iface.poll_egress(now, &mut s.dev, &mut s.sockets) != PollResult::None {}
    s.dev.flush();
    received
}

impl RrServerSide for SmoltcpServer<'_> {
    fn listen(&mut self, port: u16, connections: usize) {
        for _ in 0..connections {
            let (Some(rx), Some(tx)) = (self.spare.next(), self.spare.next()) else {
                panic!("socket buffers for {} connections only", self.conns.len());
            };
            let mut socket =
                tcp::Socket::new(tcp::SocketBuffer::new(rx), tcp::SocketBuffer::new(tx));
            socket.set_nagle_enabled(false);
            socket.set_ack_delay(Some(ACK_DELAY));
            socket.set_tsval_generator(Some(tsval));
            socket.set_congestion_control(CongestionControl::Cubic);
            socket.listen(port).expect("a fresh socket listens");
            let handle = self.sockets.add(socket);
            self.conns.push((handle, Messages::default()));
        }
    }

    fn turn(&mut self) -> usize {
        smoltcp_server_turn(self)
    }

    fn served(&self) -> u64 {
        self.served
    }

    fn describe(&self) -> String {
        format!(
            "smoltcp served {} send failures {} sockets {} transmit drops {} link {:?}",
            self.served,
            self.send_failures,
            self.conns.len(),
            self.dev.tx_dropped,
            self.dev.link.inner().stats()
        )
    }

    fn retransmissions(&self) -> u64 {
        // smoltcp does not count them; the Rusty client's count shows the data it lost.
        0
    }
}
