//! The in-memory link: two connected ends (or two sets of queues) that move Ethernet
//! frames between engines running on one thread, for tests, the deterministic simulator
//! and benchmarks.
//!
//! A frame transmitted on one side is received on the other. With several queues per
//! side, IPv4/TCP frames land on the receiving queue the RSS indirection table picks for
//! the Toeplitz hash of their 4-tuple ([`RssConfig::queue_for_rx_flow`]), exactly as a
//! NIC would steer them; everything else (ARP, ICMP, fragments, malformed frames) lands on
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

use smoltcp::wire::{EthernetFrame, EthernetProtocol, IpProtocol, Ipv4Packet, TcpPacket};

use super::{Capabilities, ChecksumRequest, MacAddr, PacketIo, RxFrame, RxMeta, TxFrame, TxMeta};
use crate::rss::{ipv4_tcp_input, RssConfig, Toeplitz};

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

/// The RSS hash input of an unfragmented IPv4/TCP frame, `None` for anything else.
fn tcp_4tuple_input(frame: &[u8]) -> Option<[u8; 12]> {
    let eth = EthernetFrame::new_checked(frame).ok()?;
    if eth.ethertype() != EthernetProtocol::Ipv4 {
        return None;
    }
    let ip = Ipv4Packet::new_checked(eth.payload()).ok()?;
    // A NIC only parses TCP ports out of the first fragment of an unfragmented packet.
    if ip.version() != 4
        || ip.next_header() != IpProtocol::Tcp
        || ip.more_frags()
        || ip.frag_offset() != 0
    {
        return None;
    }
    let tcp = TcpPacket::new_checked(ip.payload()).ok()?;
    Some(ipv4_tcp_input(
        ip.src_addr(),
        ip.dst_addr(),
        tcp.src_port(),
        tcp.dst_port(),
    ))
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
        if queues == 1 {
            return 0;
        }
        let q = match &mut *self.steering[side].borrow_mut() {
            Some(Steering::Rss { hasher, rss }) => tcp_4tuple_input(frame)
                .map_or(0, |input| usize::from(rss.queue_for(hasher.hash(&input)))),
            Some(Steering::Custom(steer)) => steer(frame),
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
/// steering received IPv4/TCP frames with `rss`. Each queue's capabilities carry its index,
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
    /// included.
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
mod tests {
    use super::*;
    use smoltcp::wire::{ArpOperation, ArpPacket, ArpRepr, EthernetRepr, Ipv4Address};
    use std::net::Ipv4Addr;

    use crate::sim::{syn_frame as tcp_frame, CLIENT_MAC as MAC_A, SERVER_MAC as MAC_B};

    /// Two ends with plain capabilities (1500-byte MTU, no offloads).
    fn plain_pair() -> (MemoryLink, MemoryLink) {
        pair(
            Capabilities::new(MAC_A, 1500),
            Capabilities::new(MAC_B, 1500),
        )
    }

    fn send(link: &mut MemoryLink, payload: &[u8]) {
        let mut f = link.alloc_tx(payload.len()).unwrap();
        f.copy_from_slice(payload);
        link.transmit(&mut vec![f]);
    }

    fn recv_all(link: &mut MemoryLink) -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        link.receive(&mut out, usize::MAX);
        out.iter().map(|f| f.to_vec()).collect()
    }

    fn arp_frame() -> Vec<u8> {
        let arp = ArpRepr::EthernetIpv4 {
            operation: ArpOperation::Request,
            source_hardware_addr: MAC_A.wire(),
            source_protocol_addr: Ipv4Address::new(10, 0, 0, 1),
            target_hardware_addr: MacAddr([0; 6]).wire(),
            target_protocol_addr: Ipv4Address::new(10, 0, 0, 2),
        };
        let eth = EthernetRepr {
            src_addr: MAC_A.wire(),
            dst_addr: MacAddr::BROADCAST.wire(),
            ethertype: EthernetProtocol::Arp,
        };
        let mut buf = vec![0u8; eth.buffer_len() + arp.buffer_len()];
        let mut f = EthernetFrame::new_unchecked(&mut buf[..]);
        eth.emit(&mut f);
        arp.emit(&mut ArpPacket::new_unchecked(f.payload_mut()));
        buf
    }

    #[test]
    fn frames_cross_both_ways_and_count() {
        let (mut a, mut b) = plain_pair();
        send(&mut a, b"hello");
        send(&mut a, b"world!");
        send(&mut b, b"back");
        assert_eq!(b.pending(), 2);
        assert_eq!(a.pending(), 1);
        assert_eq!(
            recv_all(&mut b),
            vec![b"hello".to_vec(), b"world!".to_vec()]
        );
        assert_eq!(recv_all(&mut a), vec![b"back".to_vec()]);
        assert_eq!(b.pending(), 0);
        assert_eq!(a.stats().sent, 2);
        assert_eq!(b.stats().received, 2);
        assert_eq!(b.stats().sent, 1);
        assert_eq!(a.stats().received, 1);
    }

    #[test]
    fn receive_respects_max() {
        let (mut a, mut b) = plain_pair();
        for i in 0..5u8 {
            send(&mut a, &[i; 60]);
        }
        let mut out = Vec::new();
        assert_eq!(b.receive(&mut out, 3), 3);
        assert_eq!(out.len(), 3);
        assert_eq!(out[2][0], 2);
        assert_eq!(b.pending(), 2);
    }

    #[test]
    fn partial_takes_keep_order_and_recycle() {
        let (mut a, mut b) = plain_pair();
        // The receiver takes fewer than arrive, so the queue's front is taken while its
        // back fills: order, counts and buffers must all hold.
        let (mut sent, mut got) = (0u32, 0u32);
        for round in 0..200u32 {
            for _ in 0..(round % 5) {
                send(&mut a, &sent.to_be_bytes());
                sent += 1;
            }
            // A non-empty `out` is appended to, not replaced.
            let mut out = Vec::new();
            b.receive(&mut out, 1);
            b.receive(&mut out, (round % 3) as usize);
            for f in &out {
                assert_eq!(&f[..], &got.to_be_bytes());
                got += 1;
            }
            drop(out);
            assert_eq!(b.pending() as u32, sent - got);
            assert_eq!(a.in_flight() as u32, sent - got);
        }
        assert_eq!(recv_all(&mut b).len() as u32, sent - got);
        assert_eq!(a.in_flight(), 0);
        assert_eq!(b.stats().received, u64::from(sent));
    }

    #[test]
    fn a_burst_with_a_foreign_frame_delivers_the_rest_in_order() {
        let (mut a, mut b) = plain_pair();
        let (mut c, _d) = plain_pair();
        send(&mut a, b"first");
        let mut burst = vec![
            a.alloc_tx(1).unwrap(),
            c.alloc_tx(1).unwrap(),
            a.alloc_tx(1).unwrap(),
        ];
        for (i, f) in burst.iter_mut().enumerate() {
            f[0] = i as u8;
        }
        a.transmit(&mut burst);
        assert!(burst.is_empty());
        assert_eq!(a.stats().sent, 3);
        assert_eq!(a.stats().dropped, 1);
        assert_eq!(c.in_flight(), 0);
        assert_eq!(recv_all(&mut b), vec![b"first".to_vec(), vec![0], vec![2]]);
    }

    #[test]
    fn a_burst_to_a_dropped_end_is_counted_and_recycled() {
        let (mut a, b) = plain_pair();
        drop(b);
        let mut burst: Vec<_> = (0..3).map(|_| a.alloc_tx(60).unwrap()).collect();
        a.transmit(&mut burst);
        assert!(burst.is_empty());
        assert_eq!(a.stats().dropped, 3);
        assert_eq!(a.stats().sent, 0);
        assert_eq!(a.in_flight(), 0);
        assert_eq!(a.free_buffers(), 3);
    }

    #[test]
    fn alloc_rejects_oversize_and_respects_in_flight_bound() {
        let (mut a, mut b) = plain_pair();
        assert!(a.alloc_tx(1514).is_some());
        assert!(a.alloc_tx(1515).is_none());
        a.set_in_flight_limit(2);
        let f1 = a.alloc_tx(60).unwrap();
        let f2 = a.alloc_tx(60).unwrap();
        assert!(a.alloc_tx(60).is_none());
        assert_eq!(a.stats().alloc_failures, 1);
        // Dropping an unsent buffer gives it back.
        drop(f1);
        assert_eq!(a.in_flight(), 1);
        a.transmit(&mut vec![f2]);
        // Still out: queued at the peer.
        assert_eq!(a.in_flight(), 1);
        let f3 = a.alloc_tx(60).unwrap();
        assert!(a.alloc_tx(60).is_none());
        let mut out = Vec::new();
        b.receive(&mut out, 8);
        assert_eq!(a.in_flight(), 2);
        drop(out);
        assert_eq!(a.in_flight(), 1);
        drop(f3);
        assert_eq!(a.in_flight(), 0);
    }

    #[test]
    fn buffers_are_recycled_not_reallocated() {
        let (mut a, mut b) = plain_pair();
        send(&mut a, &[7; 100]);
        let mut out = Vec::new();
        b.receive(&mut out, 1);
        let ptr = out[0].as_ptr();
        out.clear();
        let f = a.alloc_tx(200).unwrap();
        assert_eq!(f.as_ptr(), ptr);
        assert_eq!(f.len(), 200);
        assert_eq!(b.free_buffers(), 0);
    }

    #[test]
    fn truncate_shortens_the_sent_frame() {
        let (mut a, mut b) = plain_pair();
        let mut f = a.alloc_tx(100).unwrap();
        f[..3].copy_from_slice(b"abc");
        f.truncate(3);
        a.transmit(&mut vec![f]);
        assert_eq!(recv_all(&mut b), vec![b"abc".to_vec()]);
    }

    #[test]
    fn frames_to_a_dropped_end_are_counted_and_recycled() {
        let (mut a, b) = plain_pair();
        send(&mut a, &[1; 60]);
        drop(b);
        assert_eq!(a.in_flight(), 0);
        send(&mut a, &[1; 60]);
        assert_eq!(a.stats().dropped, 1);
        assert_eq!(a.stats().sent, 1);
        assert_eq!(a.in_flight(), 0);
    }

    #[test]
    fn foreign_frames_are_dropped() {
        let (mut a, mut b) = plain_pair();
        let (mut c, _d) = plain_pair();
        let f = c.alloc_tx(60).unwrap();
        a.transmit(&mut vec![f]);
        assert_eq!(a.stats().dropped, 1);
        assert_eq!(b.pending(), 0);
        assert_eq!(c.in_flight(), 0);
        assert!(recv_all(&mut b).is_empty());
    }

    #[test]
    fn frames_outlive_both_ends() {
        let (mut a, mut b) = plain_pair();
        send(&mut a, b"received");
        send(&mut a, b"queued");
        let mut unsent = a.alloc_tx(6).unwrap();
        unsent.copy_from_slice(b"unsent");
        let mut received = Vec::new();
        b.receive(&mut received, 1);
        drop(a);
        drop(b);
        // The last frames keep the link's state alive; their bytes are intact and writable.
        assert_eq!(&received[0][..], b"received");
        unsent[0] = b'U';
        assert_eq!(&unsent[..], b"Unsent");
        drop(unsent);
        drop(received);
    }

    #[test]
    fn a_received_frame_outlives_its_sender() {
        let (mut a, mut b) = plain_pair();
        send(&mut a, b"from a");
        let mut out = Vec::new();
        b.receive(&mut out, 1);
        drop(a);
        assert_eq!(&out[0][..], b"from a");
        // The sender is gone: what the receiver sends is dropped, its buffers recycled.
        send(&mut b, b"to nobody");
        assert_eq!(b.stats().dropped, 1);
        assert_eq!(b.in_flight(), 0);
        drop(out);
        let f = b.alloc_tx(10).unwrap();
        assert_eq!(b.in_flight(), 1);
        drop(f);
        assert_eq!(b.in_flight(), 0);
    }

    #[test]
    fn a_foreign_frame_outliving_its_link_is_dropped() {
        let (mut a, b) = plain_pair();
        let (mut c, d) = plain_pair();
        let f = c.alloc_tx(60).unwrap();
        drop(c);
        drop(d);
        // The frame is the last hold on its link; dropping it here frees that link.
        a.transmit(&mut vec![f]);
        assert_eq!(a.stats().dropped, 1);
        assert_eq!(a.stats().sent, 0);
        assert_eq!(b.pending(), 0);
    }

    #[test]
    fn frames_steered_to_a_dropped_queue_are_recycled() {
        let (mut a, mut b) =
            multi_queue_pair(1, 3, RssConfig::symmetric_default(3), MAC_A, MAC_B, 1500);
        let mut next = 0;
        b[0].steer_with(move |_| {
            next += 1;
            next
        });
        // Queues 1, 2, 0, 1, 2 in turn; queue 2 then goes with two frames waiting.
        for _ in 0..5 {
            send(&mut a[0], &[0; 60]);
        }
        assert_eq!(a[0].in_flight(), 5);
        let q2 = b.remove(2);
        assert_eq!(q2.pending(), 2);
        drop(q2);
        assert_eq!(a[0].in_flight(), 3);
        // Queues 0, 1, then 2, which is gone: that frame is dropped.
        for _ in 0..3 {
            send(&mut a[0], &[0; 60]);
        }
        assert_eq!(a[0].stats().sent, 7);
        assert_eq!(a[0].stats().dropped, 1);
        assert_eq!(a[0].in_flight(), 5);
        drop(b);
        assert_eq!(a[0].in_flight(), 0);
    }

    #[test]
    fn a_steering_rule_holding_frames_gives_them_back_when_replaced() {
        let (mut a, b) =
            multi_queue_pair(1, 2, RssConfig::symmetric_default(2), MAC_A, MAC_B, 1500);
        let held = a[0].alloc_tx(60).unwrap();
        b[0].steer_with(move |frame| frame.len() + held.len());
        assert_eq!(a[0].in_flight(), 1);
        send(&mut a[0], &[0; 61]);
        assert_eq!(b[1].pending(), 1);
        b[0].steer_with(|_| 0);
        assert_eq!(a[0].in_flight(), 1);
    }

    #[test]
    fn a_buffer_too_small_for_the_other_side_is_replaced() {
        let mut caps_b = Capabilities::new(MAC_B, 9000);
        caps_b.tso_max = Some(65_000);
        let (mut a, mut b) = pair(Capabilities::new(MAC_A, 1500), caps_b);
        send(&mut a, &[1; 100]);
        let mut out = Vec::new();
        a.receive(&mut out, 1);
        b.receive(&mut out, 1);
        drop(out);
        // The only free buffer has 1,514 bytes: a TSO frame of B needs a new one.
        let big = b.max_tx_len();
        let mut f = b.alloc_tx(big).unwrap();
        assert_eq!(f.len(), big);
        f.fill(0xab);
        b.transmit(&mut vec![f]);
        let got = recv_all(&mut a);
        assert_eq!(got, vec![vec![0xab; big]]);
        assert_eq!(a.free_buffers(), 1);
    }

    impl MemoryLink {
        fn max_tx_len(&self) -> usize {
            self.caps.max_tx_frame()
        }

        /// Buffers given back and not yet handed out again.
        fn free_buffers(&self) -> usize {
            self.shared.state.borrow().spare.len()
        }
    }

    #[test]
    fn tx_checksum_offload_is_performed() {
        let mut caps = Capabilities::new(MAC_A, 1500);
        caps.tx_checksum = crate::io::ChecksumOffload::ALL;
        let (mut a, mut b) = pair(caps, Capabilities::new(MAC_B, 1500));
        // Data 0x0001 0x0002, checksum field at offset 4 pre-filled with 0x0010.
        let mut f = a.alloc_tx(6).unwrap();
        f.copy_from_slice(&[0, 1, 0, 2, 0, 0x10]);
        f.set_meta(TxMeta {
            checksum: Some(crate::io::ChecksumRequest {
                start: 0,
                offset: 4,
            }),
            tso_mss: None,
        });
        a.transmit(&mut vec![f]);
        let got = recv_all(&mut b).pop().unwrap();
        // !(1 + 2 + 0x10) = !0x13
        assert_eq!(&got[4..], &(!0x13u16).to_be_bytes());
        // A receiver adds the pseudo-header sum (0x10) back and must get all ones.
        let with_pseudo = [&got[..4], &[0x00, 0x10], &got[4..]].concat();
        assert_eq!(ones_complement_sum(&with_pseudo), 0xffff);
    }

    #[test]
    fn a_burst_mixing_offloads_gets_each_once() {
        let mut caps = Capabilities::new(MAC_A, 1500);
        caps.tx_checksum = crate::io::ChecksumOffload::ALL;
        caps.tso_max = Some(9000);
        let (mut a, mut b) = pair(caps, Capabilities::new(MAC_B, 1500));
        let mut tso = a.alloc_tx(4).unwrap();
        tso.copy_from_slice(&[9; 4]);
        tso.set_meta(TxMeta {
            checksum: None,
            tso_mss: Some(1000),
        });
        let mut summed = a.alloc_tx(6).unwrap();
        summed.copy_from_slice(&[0, 1, 0, 2, 0, 0x10]);
        summed.set_meta(TxMeta {
            checksum: Some(crate::io::ChecksumRequest {
                start: 0,
                offset: 4,
            }),
            tso_mss: None,
        });
        a.transmit(&mut vec![tso, summed]);
        let mut out = Vec::new();
        assert_eq!(b.receive(&mut out, 8), 2);
        assert_eq!(RxFrame::meta(&out[0]).gso_size, Some(1000));
        assert_eq!(&out[0][..], &[9; 4]);
        assert_eq!(RxFrame::meta(&out[1]).gso_size, None);
        // Filled once: !(1 + 2 + 0x10).
        assert_eq!(&out[1][4..], &(!0x13u16).to_be_bytes());
    }

    #[test]
    fn multi_queue_steers_tcp_by_toeplitz_and_the_rest_to_queue_0() {
        let rss = RssConfig::symmetric_default(4);
        let (mut a, mut b) = multi_queue_pair(2, 4, rss.clone(), MAC_A, MAC_B, 1500);
        assert_eq!(b.len(), 4);
        assert_eq!(b[3].capabilities().queue, 3);
        assert_eq!(b[3].capabilities().queue_count, 4);
        assert_eq!(b[3].capabilities().rss.as_ref(), Some(&rss));
        let src: Ipv4Addr = "10.0.0.1".parse().unwrap();
        let dst: Ipv4Addr = "10.0.0.2".parse().unwrap();
        let mut hit = [false; 4];
        for sport in 40000..40064u16 {
            let frame = tcp_frame(src, dst, sport, 80);
            send(&mut a[1], &frame);
            let want = usize::from(rss.queue_for_rx_flow(src, dst, sport, 80));
            hit[want] = true;
            for (q, link) in b.iter_mut().enumerate() {
                let got = recv_all(link);
                if q == want {
                    assert_eq!(got, vec![frame.clone()]);
                } else {
                    assert!(got.is_empty());
                }
            }
        }
        assert_eq!(hit, [true; 4], "64 flows should cover all 4 queues");
        // ARP and malformed frames land on queue 0.
        send(&mut a[0], &arp_frame());
        let mut truncated = tcp_frame(src, dst, 1, 2);
        truncated.truncate(40);
        send(&mut a[0], &truncated);
        send(&mut a[0], &[0xff; 3]);
        assert_eq!(b[0].pending(), 3);
        // Replies from B reach A's queues by the same rule, whichever queue sends them.
        let reply = tcp_frame(dst, src, 80, 40000);
        send(&mut b[2], &reply);
        let want = usize::from(rss.queue_for_rx_flow(dst, src, 80, 40000)) % 2;
        assert_eq!(a[want].pending(), 1);
    }

    #[test]
    fn a_custom_rule_steers_every_frame() {
        let (mut a, mut b) =
            multi_queue_pair(1, 3, RssConfig::symmetric_default(3), MAC_A, MAC_B, 1500);
        let mut next = 0;
        b[1].steer_with(move |_| {
            next += 1;
            next
        });
        let src: Ipv4Addr = "10.0.0.1".parse().unwrap();
        let dst: Ipv4Addr = "10.0.0.2".parse().unwrap();
        // One flow, then ARP: round-robin from queue 1, wrapping past the last queue.
        for _ in 0..3 {
            send(&mut a[0], &tcp_frame(src, dst, 40000, 80));
        }
        send(&mut a[0], &arp_frame());
        let pending: Vec<usize> = b.iter().map(|q| q.pending()).collect();
        assert_eq!(pending, vec![1, 2, 1]);
        assert_eq!(recv_all(&mut b[1])[1], arp_frame());
    }

    #[test]
    fn parser_never_panics_on_garbage() {
        for len in 0..80 {
            let junk: Vec<u8> = (0..len).map(|i| (i * 37 + 11) as u8).collect();
            let _ = tcp_4tuple_input(&junk);
            let mut eth_ip = junk.clone();
            if eth_ip.len() > 14 {
                eth_ip[12] = 0x08;
                eth_ip[13] = 0x00;
                let _ = tcp_4tuple_input(&eth_ip);
            }
        }
    }
}
