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
//! Buffers come from a free list shared by the whole link: a transmitted buffer *becomes*
//! the peer's received frame (moved, never copied) and goes back to the free list when the
//! receiver drops it. In steady state no frame allocates. The number of buffers one side
//! has out (allocated and not yet dropped by whoever holds them) is bounded, which is the
//! link's back-pressure: [`PacketIo::alloc_tx`] returns `None` at the bound, like a full
//! transmit ring.
//!
//! Both ends share `Rc`/`RefCell` state, so they are `!Send` and live on one thread:
//! the simulator and the benchmarks run both engines on that thread.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::fmt;
use std::ops::{Deref, DerefMut};
use std::rc::Rc;
use std::sync::Arc;

use smoltcp::wire::{EthernetFrame, EthernetProtocol, IpProtocol, Ipv4Packet, TcpPacket};

use super::{Capabilities, MacAddr, PacketIo, RxFrame, RxMeta, TxFrame, TxMeta};
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

struct Side {
    /// One receive queue per queue index: the transmitted frames themselves, moved
    /// whole (their receive metadata set by `transmit`).
    rx: Vec<VecDeque<MemFrame>>,
    /// Whether the [`MemoryLink`] of each queue index still exists.
    alive: Vec<bool>,
    /// Buffers allocated by this side and not yet back in the pool.
    in_flight: usize,
    in_flight_limit: usize,
    steering: Option<Steering>,
}

impl Side {
    fn new(queues: usize, steering: Option<Steering>) -> Side {
        Side {
            rx: (0..queues).map(|_| VecDeque::new()).collect(),
            alive: vec![true; queues],
            in_flight: 0,
            in_flight_limit: DEFAULT_IN_FLIGHT_LIMIT,
            steering,
        }
    }

    /// The receive queue a frame arriving on this side lands on.
    fn steer(&mut self, frame: &[u8]) -> usize {
        let queues = self.rx.len();
        if queues == 1 {
            return 0;
        }
        let q = match &mut self.steering {
            Some(Steering::Rss { hasher, rss }) if queues > 1 => tcp_4tuple_input(frame)
                .map_or(0, |input| usize::from(rss.queue_for(hasher.hash(&input)))),
            Some(Steering::Custom(steer)) if queues > 1 => steer(frame),
            _ => 0,
        };
        // A table naming more queues than exist wraps rather than losing frames.
        q % queues
    }
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

struct Shared {
    /// Free buffers, reused for every frame of either side.
    pool: Vec<Vec<u8>>,
    sides: [Side; 2],
}

impl Shared {
    fn release(&mut self, buf: Vec<u8>, owner_side: usize) {
        let side = &mut self.sides[owner_side];
        side.in_flight = side.in_flight.saturating_sub(1);
        self.pool.push(buf);
    }
}

/// One queue of one side of an in-memory link. See the module docs.
pub struct MemoryLink {
    shared: Rc<RefCell<Shared>>,
    side: usize,
    queue: usize,
    caps: Capabilities,
    stats: LinkStats,
}

/// The receive and transmit buffer of the in-memory link: exactly the frame's length.
///
/// A freshly allocated transmit buffer holds unspecified bytes (left over from an earlier
/// frame), like a NIC ring slot; the stack writes every byte it sends.
pub struct MemFrame {
    /// `None` only after the buffer moved on (transmitted or returned).
    data: Option<Vec<u8>>,
    shared: Rc<RefCell<Shared>>,
    owner_side: usize,
    rx_meta: RxMeta,
    tx_meta: TxMeta,
}

impl MemFrame {
    /// Apply the transmit offloads the stack asked for, as a device would.
    fn apply_tx_offloads(&mut self) {
        if let (Some(req), Some(data)) = (self.tx_meta.checksum, self.data.as_mut()) {
            let start = usize::from(req.start);
            let at = start + usize::from(req.offset);
            // A request outside the frame is the stack's bug; a device would send garbage,
            // we leave the frame alone rather than panic.
            if at + 2 <= data.len() {
                let sum = !ones_complement_sum(&data[start..]);
                data[at..at + 2].copy_from_slice(&sum.to_be_bytes());
            }
        }
        // A TSO super-frame is delivered whole, announced to the receiver as coalesced
        // (what a GRO/LRO receiver would hand up).
        self.rx_meta = RxMeta {
            checksum_verified: false,
            gso_size: self.tx_meta.tso_mss,
        };
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

impl Deref for MemFrame {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        self.data.as_deref().unwrap_or(&[])
    }
}

impl DerefMut for MemFrame {
    fn deref_mut(&mut self) -> &mut [u8] {
        self.data.as_deref_mut().unwrap_or(&mut [])
    }
}

impl RxFrame for MemFrame {
    fn meta(&self) -> RxMeta {
        self.rx_meta
    }
}

impl TxFrame for MemFrame {
    fn set_meta(&mut self, meta: TxMeta) {
        self.tx_meta = meta;
    }
    fn truncate(&mut self, len: usize) {
        if let Some(d) = self.data.as_mut() {
            d.truncate(len);
        }
    }
}

impl Drop for MemFrame {
    fn drop(&mut self) {
        if let Some(buf) = self.data.take() {
            // The link never drops a frame while it holds the borrow; if that invariant
            // were broken the buffer is freed instead of recycled (no panic in drop).
            if let Ok(mut shared) = self.shared.try_borrow_mut() {
                shared.release(buf, self.owner_side);
            }
        }
    }
}

impl fmt::Debug for MemFrame {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MemFrame")
            .field("len", &self.len())
            .field("owner_side", &self.owner_side)
            .finish()
    }
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

/// Two connected single-queue ends with the given capabilities.
///
/// `queue`, `queue_count` and `rss` of the capabilities are reported as given, but each
/// side has exactly one queue.
pub fn pair(a: Capabilities, b: Capabilities) -> (MemoryLink, MemoryLink) {
    let shared = Rc::new(RefCell::new(Shared {
        pool: Vec::new(),
        sides: [Side::new(1, None), Side::new(1, None)],
    }));
    let end = |side, caps| MemoryLink {
        shared: Rc::clone(&shared),
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
    let queues_a = queues_a.max(1);
    let queues_b = queues_b.max(1);
    let steering = || Steering::Rss {
        hasher: rss.hasher(),
        rss: rss.clone(),
    };
    let shared = Rc::new(RefCell::new(Shared {
        pool: Vec::new(),
        sides: [
            Side::new(usize::from(queues_a), Some(steering())),
            Side::new(usize::from(queues_b), Some(steering())),
        ],
    }));
    let side_links = |side, queues: u16, mac| {
        (0..queues)
            .map(|q| {
                let mut caps = Capabilities::new(mac, mtu);
                caps.queue = q;
                caps.queue_count = queues;
                caps.rss = Some(rss.clone());
                MemoryLink {
                    shared: Rc::clone(&shared),
                    side,
                    queue: usize::from(q),
                    caps,
                    stats: LinkStats::default(),
                }
            })
            .collect::<Vec<_>>()
    };
    let a = side_links(0, queues_a, mac_a);
    let b = side_links(1, queues_b, mac_b);
    (a, b)
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
        self.shared.borrow_mut().sides[self.side].steering =
            Some(Steering::Custom(Box::new(steer)));
    }

    /// Frames waiting to be received on this end.
    pub fn pending(&self) -> usize {
        self.shared.borrow().sides[self.side].rx[self.queue].len()
    }

    /// Bound the buffers this end's side may have out at once (default
    /// [`DEFAULT_IN_FLIGHT_LIMIT`]). Shared by all queues of the side.
    pub fn set_in_flight_limit(&self, limit: usize) {
        self.shared.borrow_mut().sides[self.side].in_flight_limit = limit;
    }

    /// Buffers this end's side has out now (allocated, queued or being read).
    pub fn in_flight(&self) -> usize {
        self.shared.borrow().sides[self.side].in_flight
    }

    fn peer(&self) -> usize {
        1 - self.side
    }
}

impl PacketIo for MemoryLink {
    type Rx = MemFrame;
    type Tx = MemFrame;

    fn capabilities(&self) -> &Capabilities {
        &self.caps
    }

    fn receive(&mut self, out: &mut Vec<MemFrame>, max: usize) -> usize {
        let mut shared = self.shared.borrow_mut();
        let rx = &mut shared.sides[self.side].rx[self.queue];
        let n = max.min(rx.len());
        // Frame by frame from the front (cheaper than a draining iterator for the one
        // or few frames a turn usually takes).
        for _ in 0..n {
            let Some(frame) = rx.pop_front() else { break };
            out.push(frame);
        }
        self.stats.received += n as u64;
        n
    }

    fn alloc_tx(&mut self, len: usize) -> Option<MemFrame> {
        if len > self.caps.max_tx_frame() {
            return None;
        }
        let mut shared = self.shared.borrow_mut();
        let side = &mut shared.sides[self.side];
        if side.in_flight >= side.in_flight_limit {
            self.stats.alloc_failures += 1;
            return None;
        }
        side.in_flight += 1;
        let mut buf = shared
            .pool
            .pop()
            .unwrap_or_else(|| Vec::with_capacity(self.caps.max_tx_frame()));
        // Reuse the old bytes rather than zero them: a NIC slot is not cleared either.
        if buf.len() >= len {
            buf.truncate(len);
        } else {
            buf.resize(len, 0);
        }
        Some(MemFrame {
            data: Some(buf),
            shared: Rc::clone(&self.shared),
            owner_side: self.side,
            rx_meta: RxMeta::default(),
            tx_meta: TxMeta::default(),
        })
    }

    fn transmit(&mut self, frames: &mut Vec<MemFrame>) {
        let peer_side = self.peer();
        // One borrow for the burst. A frame moves whole into the peer's queue; one that
        // cannot be delivered gives its buffer back here, so that its drop finds it
        // taken and does not touch the shared state while it is borrowed.
        let mut shared = self.shared.borrow_mut();
        for mut frame in frames.drain(..) {
            if !Rc::ptr_eq(&frame.shared, &self.shared) {
                // Not ours: its buffer goes back to its own link as `frame` drops here
                // (that borrows the other link's state, not this one's).
                self.stats.dropped += 1;
                continue;
            }
            frame.apply_tx_offloads();
            let peer = &mut shared.sides[peer_side];
            let q = peer.steer(&frame);
            if peer.alive[q] {
                peer.rx[q].push_back(frame);
                self.stats.sent += 1;
            } else {
                if let Some(data) = frame.data.take() {
                    shared.release(data, frame.owner_side);
                }
                self.stats.dropped += 1;
            }
        }
    }
}

impl Drop for MemoryLink {
    fn drop(&mut self) {
        if let Ok(mut shared) = self.shared.try_borrow_mut() {
            shared.sides[self.side].alive[self.queue] = false;
            // Frames nobody will receive go back to the pool.
            while let Some(mut frame) = shared.sides[self.side].rx[self.queue].pop_front() {
                if let Some(data) = frame.data.take() {
                    shared.release(data, frame.owner_side);
                }
            }
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use smoltcp::phy::ChecksumCapabilities;
    use smoltcp::wire::{
        ArpOperation, ArpPacket, ArpRepr, EthernetRepr, IpAddress, Ipv4Address, Ipv4Repr,
        TcpControl, TcpRepr, TcpSeqNumber,
    };
    use std::net::Ipv4Addr;

    const MAC_A: MacAddr = smoltcp::wire::EthernetAddress([2, 0, 0, 0, 0, 1]);
    pub(crate) const MAC_B: MacAddr = smoltcp::wire::EthernetAddress([2, 0, 0, 0, 0, 2]);

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

    /// An Ethernet/IPv4/TCP SYN frame built with smoltcp's emitters, from `MAC_A` to
    /// `MAC_B`.
    pub(crate) fn tcp_frame(src: Ipv4Addr, dst: Ipv4Addr, sport: u16, dport: u16) -> Vec<u8> {
        let tcp = TcpRepr {
            src_port: sport,
            dst_port: dport,
            control: TcpControl::Syn,
            seq_number: TcpSeqNumber(1),
            ack_number: None,
            window_len: 1000,
            window_scale: None,
            max_seg_size: None,
            sack_permitted: false,
            sack_ranges: [None; 3],
            timestamp: None,
            payload: &[],
        };
        let ip = Ipv4Repr {
            src_addr: src,
            dst_addr: dst,
            next_header: IpProtocol::Tcp,
            payload_len: tcp.buffer_len(),
            hop_limit: 64,
        };
        let eth = EthernetRepr {
            src_addr: MAC_A,
            dst_addr: MAC_B,
            ethertype: EthernetProtocol::Ipv4,
        };
        let mut buf = vec![0u8; eth.buffer_len() + ip.buffer_len() + tcp.buffer_len()];
        let caps = ChecksumCapabilities::default();
        let mut f = EthernetFrame::new_unchecked(&mut buf[..]);
        eth.emit(&mut f);
        let mut p = Ipv4Packet::new_unchecked(f.payload_mut());
        ip.emit(&mut p, &caps);
        let mut t = TcpPacket::new_unchecked(p.payload_mut());
        tcp.emit(&mut t, &IpAddress::Ipv4(src), &IpAddress::Ipv4(dst), &caps);
        buf
    }

    fn arp_frame() -> Vec<u8> {
        let arp = ArpRepr::EthernetIpv4 {
            operation: ArpOperation::Request,
            source_hardware_addr: MAC_A,
            source_protocol_addr: Ipv4Address::new(10, 0, 0, 1),
            target_hardware_addr: smoltcp::wire::EthernetAddress([0; 6]),
            target_protocol_addr: Ipv4Address::new(10, 0, 0, 2),
        };
        let eth = EthernetRepr {
            src_addr: MAC_A,
            dst_addr: MacAddr::BROADCAST,
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
        let (mut a, mut b) = pair(
            Capabilities::new(MAC_A, 1500),
            Capabilities::new(MAC_B, 1500),
        );
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
        let (mut a, mut b) = pair(
            Capabilities::new(MAC_A, 1500),
            Capabilities::new(MAC_B, 1500),
        );
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
    fn alloc_rejects_oversize_and_respects_in_flight_bound() {
        let (mut a, mut b) = pair(
            Capabilities::new(MAC_A, 1500),
            Capabilities::new(MAC_B, 1500),
        );
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
        let (mut a, mut b) = pair(
            Capabilities::new(MAC_A, 1500),
            Capabilities::new(MAC_B, 1500),
        );
        send(&mut a, &[7; 100]);
        let mut out = Vec::new();
        b.receive(&mut out, 1);
        let ptr = out[0].as_ptr();
        out.clear();
        let f = a.alloc_tx(200).unwrap();
        assert_eq!(f.as_ptr(), ptr);
        assert_eq!(f.len(), 200);
        assert_eq!(b.shared.borrow().pool.len(), 0);
    }

    #[test]
    fn truncate_shortens_the_sent_frame() {
        let (mut a, mut b) = pair(
            Capabilities::new(MAC_A, 1500),
            Capabilities::new(MAC_B, 1500),
        );
        let mut f = a.alloc_tx(100).unwrap();
        f[..3].copy_from_slice(b"abc");
        f.truncate(3);
        a.transmit(&mut vec![f]);
        assert_eq!(recv_all(&mut b), vec![b"abc".to_vec()]);
    }

    #[test]
    fn frames_to_a_dropped_end_are_counted_and_recycled() {
        let (mut a, b) = pair(
            Capabilities::new(MAC_A, 1500),
            Capabilities::new(MAC_B, 1500),
        );
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
        let (mut a, mut b) = pair(
            Capabilities::new(MAC_A, 1500),
            Capabilities::new(MAC_B, 1500),
        );
        let (mut c, _d) = pair(
            Capabilities::new(MAC_A, 1500),
            Capabilities::new(MAC_B, 1500),
        );
        let f = c.alloc_tx(60).unwrap();
        a.transmit(&mut vec![f]);
        assert_eq!(a.stats().dropped, 1);
        assert_eq!(b.pending(), 0);
        assert_eq!(c.in_flight(), 0);
        assert!(recv_all(&mut b).is_empty());
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
