//! The in-memory link: two connected ends (or two sets of queues) that move Ethernet
//! frames between engines running on one thread, for tests, the deterministic simulator
//! and benchmarks.
//!
//! A frame transmitted on one side is received on the other. With several queues per
//! side, TCP frames over IPv4 and IPv6 land on the receiving queue the RSS indirection
//! table picks for the Toeplitz hash of their 4-tuple ([`RssConfig::queue_for_rx_flow`]),
//! exactly as a NIC would steer them; everything else (ARP, ICMP and ICMPv6 with Neighbor
//! Discovery, fragments, IPv6 packets with extension headers, malformed frames) lands on
//! queue 0, like a NIC that does not hash those types. A test may steer a side by its
//! own rule instead ([`MemoryLink::steer_with`]).
//!
//! A frame's bytes are a plain `Vec<u8>`. Transmitting moves the vector into the peer's
//! receive queue (the bytes are not copied), and dropping a frame gives the vector back
//! to the link, which hands it out again, so steady traffic does not allocate. The number
//! of frames one side has out (allocated and not yet dropped by whoever holds them) is
//! bounded, which is the link's back-pressure: [`PacketIo::alloc_tx`] returns `None` at
//! the bound, like a full transmit ring.
//!
//! The ends and the frames share the link's state through an `Rc`, so a frame may
//! outlive both ends; ends and frames are therefore `!Send`: a link lives on one thread
//! (the simulator and the benchmarks run both engines on that thread). The link is a test
//! double: it is written to be obviously right, not fast, and the callgrind scripts
//! count it apart from the engine.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::fmt;
use std::mem;
use std::ops::{Deref, DerefMut};
use std::rc::Rc;
use std::sync::Arc;

use smoltcp::wire::{
    EthernetFrame, EthernetProtocol, IpProtocol, Ipv4Packet, Ipv6Packet, TcpPacket,
};

use rusty_stack::io::{
    Capabilities, ChecksumRequest, MacAddr, PacketIo, RxFrame, RxMeta, TxFrame, TxMeta,
};
use rusty_stack::rss::{ipv4_tcp_input, ipv6_tcp_input, RssConfig, Toeplitz};

/// Default bound on buffers one side may have out at once (per direction).
pub const DEFAULT_IN_FLIGHT_LIMIT: usize = 4096;

/// Counters of one end (one queue of one side).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct LinkStats {
    /// Frames handed to the peer.
    pub sent: u64,
    /// Frames handed to the stack by [`PacketIo::receive`].
    pub received: u64,
    /// Frames transmitted but not delivered: the receiving end was gone, or the frame was
    /// not allocated by this link.
    pub dropped: u64,
    /// [`PacketIo::alloc_tx`] calls refused because the in-flight bound was reached.
    pub alloc_failures: u64,
}

/// A test's steering rule: the receive queue of a frame.
type SteerFn = Box<dyn FnMut(&[u8]) -> usize>;

/// Receive-side steering of one side.
enum Steering {
    /// Toeplitz over the 4-tuple plus the indirection table.
    Rss {
        hasher: Arc<Toeplitz>,
        rss: RssConfig,
    },
    /// A test's own rule ([`MemoryLink::steer_with`]).
    Custom(SteerFn),
}

/// The RSS hash of an unfragmented TCP frame over IPv4 or IPv6 (TCP right after the
/// fixed header), `None` for anything else.
fn tcp_flow_hash(hasher: &Toeplitz, frame: &[u8]) -> Option<u32> {
    let eth = EthernetFrame::new_checked(frame).ok()?;
    match eth.ethertype() {
        EthernetProtocol::Ipv4 => {
            let ip = Ipv4Packet::new_checked(eth.payload()).ok()?;
            // A NIC only parses TCP ports out of the first fragment of an unfragmented
            // packet.
            if ip.version() != 4
                || ip.next_header() != IpProtocol::Tcp
                || ip.more_frags()
                || ip.frag_offset() != 0
            {
                return None;
            }
            let tcp = TcpPacket::new_checked(ip.payload()).ok()?;
            let input =
                ipv4_tcp_input(ip.src_addr(), ip.dst_addr(), tcp.src_port(), tcp.dst_port());
            Some(hasher.hash(&input))
        }
        EthernetProtocol::Ipv6 => {
            let ip = Ipv6Packet::new_checked(eth.payload()).ok()?;
            // TCP right after the fixed header: like the simplest NICs, this link does
            // not walk extension headers (a fragment header among them) for the ports.
            if ip.version() != 6 || ip.next_header() != IpProtocol::Tcp {
                return None;
            }
            let tcp = TcpPacket::new_checked(ip.payload()).ok()?;
            let input =
                ipv6_tcp_input(ip.src_addr(), ip.dst_addr(), tcp.src_port(), tcp.dst_port());
            Some(hasher.hash(&input))
        }
        _ => None,
    }
}

/// A frame on its way: in a receive queue, between the sender's `transmit` and the
/// receiver's `receive`.
struct Queued {
    bytes: Vec<u8>,
    tx: TxMeta,
    /// The side that allocated it, whose in-flight count it holds.
    owner: usize,
}

/// One receive queue.
#[derive(Default)]
struct RxQueue {
    frames: VecDeque<Queued>,
    /// False once its end is dropped: frames for it go back to the link.
    closed: bool,
}

/// What one side's frames count against.
struct Side {
    /// Buffers of this side out: allocated and not yet dropped by whoever holds them.
    in_flight: usize,
    in_flight_limit: usize,
}

/// The state ends and frames share. No frame is ever dropped while it is borrowed
/// (dropping one borrows it), and no user code runs under the borrow.
struct State {
    /// The receive queues, side 0's first (see [`Shared::rx_index`]).
    rx: Vec<RxQueue>,
    sides: [Side; 2],
    /// Buffers given back, handed out again by `alloc_tx`.
    spare: Vec<Vec<u8>>,
}

impl State {
    /// A buffer of `side` is back: count it and keep its allocation.
    fn release(&mut self, side: usize, bytes: Vec<u8>) {
        self.sides[side].in_flight -= 1;
        self.spare.push(bytes);
    }
}

/// What the ends and frames of one link share.
struct Shared {
    state: RefCell<State>,
    /// Queue count of each side.
    queues: [usize; 2],
    /// Receive steering of each side (consulted only with more than one queue). Out of
    /// `state` because a test's rule is user code.
    steering: [RefCell<Option<Steering>>; 2],
}

impl Shared {
    /// The index in `State::rx` of `side`'s receive queue `queue`.
    fn rx_index(&self, side: usize, queue: usize) -> usize {
        if side == 0 {
            queue
        } else {
            self.queues[0] + queue
        }
    }

    /// The receive queue a frame arriving on `side` lands on.
    fn steer(&self, side: usize, frame: &[u8]) -> usize {
        let queues = self.queues[side];
        let q = match &mut *self.steering[side].borrow_mut() {
            // A custom rule sees every frame, also on a side of one queue.
            Some(Steering::Custom(steer)) => steer(frame),
            _ if queues == 1 => 0,
            Some(Steering::Rss { hasher, rss }) => {
                tcp_flow_hash(hasher, frame).map_or(0, |hash| usize::from(rss.queue_for(hash)))
            }
            None => 0,
        };
        // A table naming more queues than exist wraps rather than losing frames.
        q % queues
    }
}

/// The receive and transmit buffer of the in-memory link: exactly the frame's length.
///
/// A freshly allocated transmit buffer holds unspecified bytes (left over from an
/// earlier frame), like a NIC ring slot; the stack writes every byte it sends.
pub struct MemFrame {
    bytes: Vec<u8>,
    tx: TxMeta,
    /// The link and the side whose in-flight count this frame holds; taken when the
    /// frame moves into a receive queue.
    home: Option<(Rc<Shared>, usize)>,
}

impl MemFrame {
    /// Whether the frame was allocated by the link `shared`.
    fn of(&self, shared: &Rc<Shared>) -> bool {
        self.home
            .as_ref()
            .is_some_and(|(s, _)| Rc::ptr_eq(s, shared))
    }

    /// The frame as it waits in a receive queue, still counted against its side.
    fn into_queued(mut self) -> Queued {
        let (_, owner) = self.home.take().expect("a frame of this link");
        Queued {
            bytes: mem::take(&mut self.bytes),
            tx: self.tx,
            owner,
        }
    }

    /// Apply the transmit offloads the stack asked for, as a device would.
    fn apply_tx_offloads(&mut self) {
        if let Some(req) = self.tx.checksum {
            fill_checksum(&mut self.bytes, req);
        }
    }
}

impl Drop for MemFrame {
    fn drop(&mut self) {
        if let Some((shared, side)) = self.home.take() {
            shared
                .state
                .borrow_mut()
                .release(side, mem::take(&mut self.bytes));
        }
    }
}

impl Deref for MemFrame {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.bytes
    }
}

impl DerefMut for MemFrame {
    fn deref_mut(&mut self) -> &mut [u8] {
        &mut self.bytes
    }
}

impl RxFrame for MemFrame {
    fn meta(&self) -> RxMeta {
        RxMeta {
            checksum_verified: false,
            gso_size: self.tx.tso_mss,
        }
    }
}

impl TxFrame for MemFrame {
    fn set_meta(&mut self, meta: TxMeta) {
        self.tx = meta;
    }
    fn truncate(&mut self, len: usize) {
        self.bytes.truncate(len);
    }
}

impl fmt::Debug for MemFrame {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MemFrame")
            .field("len", &self.bytes.len())
            .field("owner_side", &self.home.as_ref().map(|(_, side)| *side))
            .finish()
    }
}

/// Compute the checksum `req` asks for into `data`, as a device would.
fn fill_checksum(data: &mut [u8], req: ChecksumRequest) {
    let start = usize::from(req.start);
    let at = start + usize::from(req.offset);
    // A request outside the frame is the stack's bug; a device would send garbage, we
    // leave the frame alone rather than panic.
    if at + 2 <= data.len() {
        let sum = !ones_complement_sum(&data[start..]);
        data[at..at + 2].copy_from_slice(&sum.to_be_bytes());
    }
}

/// The folded 16-bit ones'-complement sum of `data` (RFC 1071), big-endian words, an odd
/// last byte padded with zero.
fn ones_complement_sum(data: &[u8]) -> u16 {
    let mut sum: u64 = 0;
    let mut chunks = data.chunks_exact(2);
    for c in &mut chunks {
        sum += u64::from(u16::from_be_bytes([c[0], c[1]]));
    }
    if let [last] = chunks.remainder() {
        sum += u64::from(*last) << 8;
    }
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    sum as u16
}

/// One queue of one side of an in-memory link. See the module docs.
pub struct MemoryLink {
    shared: Rc<Shared>,
    side: usize,
    queue: usize,
    caps: Capabilities,
    stats: LinkStats,
}

impl fmt::Debug for MemoryLink {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MemoryLink")
            .field("side", &self.side)
            .field("queue", &self.queue)
            .field("stats", &self.stats)
            .finish()
    }
}

/// A new link with `queues` queues per side (at least one each): its shared state.
fn create(queues: [usize; 2], steering: [Option<Steering>; 2]) -> Rc<Shared> {
    let side = || Side {
        in_flight: 0,
        in_flight_limit: DEFAULT_IN_FLIGHT_LIMIT,
    };
    Rc::new(Shared {
        state: RefCell::new(State {
            rx: (0..queues[0] + queues[1])
                .map(|_| RxQueue::default())
                .collect(),
            sides: [side(), side()],
            spare: Vec::new(),
        }),
        queues,
        steering: steering.map(RefCell::new),
    })
}

/// Two connected single-queue ends with the given capabilities.
///
/// `queue`, `queue_count` and `rss` of the capabilities are reported as given, but each
/// side has exactly one queue.
pub fn pair(a: Capabilities, b: Capabilities) -> (MemoryLink, MemoryLink) {
    let shared = create([1, 1], [None, None]);
    let end = |side, caps| MemoryLink {
        shared: shared.clone(),
        side,
        queue: 0,
        caps,
        stats: LinkStats::default(),
    };
    (end(0, a), end(1, b))
}

/// Two connected sides with `queues_a` and `queues_b` queues (zero is taken as one), both
/// steering received TCP frames of either family with `rss`. Each queue's capabilities carry its index,
/// the side's queue count and `rss`.
pub fn multi_queue_pair(
    queues_a: u16,
    queues_b: u16,
    rss: RssConfig,
    mac_a: MacAddr,
    mac_b: MacAddr,
    mtu: usize,
) -> (Vec<MemoryLink>, Vec<MemoryLink>) {
    let queues = [queues_a.max(1), queues_b.max(1)];
    let steering = || Steering::Rss {
        hasher: rss.hasher(),
        rss: rss.clone(),
    };
    let shared = create(
        queues.map(usize::from),
        [Some(steering()), Some(steering())],
    );
    let side_links = |side: usize, mac| {
        (0..queues[side])
            .map(|q| {
                let mut caps = Capabilities::new(mac, mtu);
                caps.queue = q;
                caps.queue_count = queues[side];
                caps.rss = Some(rss.clone());
                MemoryLink {
                    shared: shared.clone(),
                    side,
                    queue: usize::from(q),
                    caps,
                    stats: LinkStats::default(),
                }
            })
            .collect::<Vec<_>>()
    };
    (side_links(0, mac_a), side_links(1, mac_b))
}

impl MemoryLink {
    /// This end's counters.
    pub fn stats(&self) -> LinkStats {
        self.stats
    }

    /// Change what this end reports about itself: tests use it to model a link whose
    /// steering the stack is not told about (as with TAP).
    pub fn capabilities_mut(&mut self) -> &mut Capabilities {
        &mut self.caps
    }

    /// Steer the frames that arrive at this end's side (on every queue of it) with
    /// `steer` instead: it names the receive queue of each frame, wrapped to the side's
    /// queue count. Tests model links whose steering the stack cannot predict with it
    /// (TAP's flow table, a veth whose peer kernel picks the queue), adversarial ones
    /// included. The rule sees every frame, on a side of one queue too, so a test can
    /// also watch the traffic through it.
    pub fn steer_with(&self, steer: impl FnMut(&[u8]) -> usize + 'static) {
        let rule = Some(Steering::Custom(Box::new(steer)));
        // The old rule (and whatever it captured) drops once the cell is no longer borrowed.
        drop(self.shared.steering[self.side].replace(rule));
    }

    /// Frames waiting to be received on this end.
    pub fn pending(&self) -> usize {
        self.shared.state.borrow().rx[self.rx()].frames.len()
    }

    /// Bound the buffers this end's side may have out at once (default
    /// [`DEFAULT_IN_FLIGHT_LIMIT`]). Shared by all queues of the side.
    pub fn set_in_flight_limit(&self, limit: usize) {
        self.shared.state.borrow_mut().sides[self.side].in_flight_limit = limit;
    }

    /// Buffers this end's side has out now (allocated, queued or being read).
    pub fn in_flight(&self) -> usize {
        self.shared.state.borrow().sides[self.side].in_flight
    }

    /// This end's receive queue: its index in `State::rx`.
    fn rx(&self) -> usize {
        self.shared.rx_index(self.side, self.queue)
    }

    /// Queue `frame` (of this link) on the peer side's receive queue `queue`, or give its
    /// buffer back to the link if that end is gone.
    fn deliver(&mut self, queue: usize, frame: MemFrame) {
        let rx = self.shared.rx_index(1 - self.side, queue);
        let frame = frame.into_queued();
        let mut state = self.shared.state.borrow_mut();
        if state.rx[rx].closed {
            state.release(frame.owner, frame.bytes);
            self.stats.dropped += 1;
        } else {
            state.rx[rx].frames.push_back(frame);
            self.stats.sent += 1;
        }
    }
}

impl PacketIo for MemoryLink {
    type Rx = MemFrame;
    type Tx = MemFrame;

    fn capabilities(&self) -> &Capabilities {
        &self.caps
    }

    fn receive(&mut self, out: &mut Vec<MemFrame>, max: usize) -> usize {
        let rx = self.rx();
        let mut state = self.shared.state.borrow_mut();
        let queue = &mut state.rx[rx].frames;
        let n = max.min(queue.len());
        out.extend(queue.drain(..n).map(|q| MemFrame {
            bytes: q.bytes,
            tx: q.tx,
            home: Some((self.shared.clone(), q.owner)),
        }));
        self.stats.received += n as u64;
        n
    }

    fn alloc_tx(&mut self, len: usize) -> Option<MemFrame> {
        let cap = self.caps.max_tx_frame();
        if len > cap {
            return None;
        }
        let mut state = self.shared.state.borrow_mut();
        let side = &mut state.sides[self.side];
        if side.in_flight >= side.in_flight_limit {
            self.stats.alloc_failures += 1;
            return None;
        }
        side.in_flight += 1;
        let mut bytes = state.spare.pop().unwrap_or_else(|| Vec::with_capacity(cap));
        bytes.resize(len, 0);
        Some(MemFrame {
            bytes,
            tx: TxMeta::default(),
            home: Some((self.shared.clone(), self.side)),
        })
    }

    fn transmit(&mut self, frames: &mut Vec<MemFrame>) {
        let peer = 1 - self.side;
        for mut frame in frames.drain(..) {
            if !frame.of(&self.shared) {
                // Not ours: its buffer goes back to its own link as `frame` drops here.
                self.stats.dropped += 1;
                continue;
            }
            frame.apply_tx_offloads();
            let queue = self.shared.steer(peer, &frame);
            self.deliver(queue, frame);
        }
    }
}

impl Drop for MemoryLink {
    fn drop(&mut self) {
        // Frames nobody will receive go back to the link.
        let rx = self.rx();
        let mut state = self.shared.state.borrow_mut();
        state.rx[rx].closed = true;
        let orphans = mem::take(&mut state.rx[rx].frames);
        for frame in orphans {
            state.release(frame.owner, frame.bytes);
        }
    }
}

#[cfg(test)]
mod tests;
