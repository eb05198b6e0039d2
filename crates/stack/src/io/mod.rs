//! The packet-IO seam: one value per (link, queue), owned by one worker.
//!
//! Everything that moves Ethernet frames implements [`PacketIo`]: the TAP, AF_XDP,
//! ixgbe and mPIPE drivers, the in-memory link of the tests (in `rusty-testkit`), and
//! decorators that wrap another
//! queue ([`fault`] for fault injection; `rusty-runtime` has pcap capture). A
//! [`Doorbell`] lets a worker wake a sibling parked on its queue. A device model's wire
//! side is a [`FrameWire`]. The trait is burst-oriented: the engine receives up to a
//! burst of frames at once, allocates transmit buffers from the driver, fills them in
//! place, and submits the whole burst once per loop turn.
//!
//! Buffers belong to the driver. A received frame is handed to the stack by value and
//! goes back to the driver when it is dropped, so the stack never copies a received frame;
//! a transmit buffer is handed out empty, written once by the stack, and given back on
//! submit (or on drop, if the stack changes its mind).

use std::ops::{Deref, DerefMut};
use std::time::Duration;

use crate::rss::RssConfig;

mod doorbell;
pub mod fault;
mod mac;

/// IPv6 groups as a driver that filters by destination meets them: the solicited-node
/// group of an address (RFC 4291 §2.7.1) and the Ethernet address of a group (RFC 2464
/// §7).
pub use crate::icmpv6::{group_mac as ipv6_group_mac, solicited_node};
pub use doorbell::{Doorbell, Ringer};
pub use mac::MacAddr;

/// What a queue can do for the stack. Reported once, when the engine is built.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Capabilities {
    /// The link's MAC address.
    pub mac: MacAddr,
    /// The IP MTU: the largest IPv4 packet (header included) the link carries.
    pub mtu: usize,
    /// Checksums the device verifies on receive (a frame it passes had a good checksum).
    pub rx_checksum: ChecksumOffload,
    /// Checksums the device computes on transmit when asked through [`TxMeta`].
    pub tx_checksum: ChecksumOffload,
    /// Largest TCP segmentation-offload frame the device accepts, if it does TSO.
    pub tso_max: Option<usize>,
    /// Whether the device may hand over coalesced (LRO/GRO) frames larger than the MTU.
    pub lro: bool,
    /// This queue's index on its link, and how many queues the link has.
    pub queue: u16,
    /// How many queues the link has (workers on it).
    pub queue_count: u16,
    /// The RSS hash key and indirection table the hardware steers flows with, when it
    /// steers by Toeplitz. With this the stack can predict which queue a flow lands on.
    pub rss: Option<RssConfig>,
}

impl Capabilities {
    /// A plain single-queue Ethernet link with no offloads.
    pub fn new(mac: MacAddr, mtu: usize) -> Capabilities {
        Capabilities {
            mac,
            mtu,
            rx_checksum: ChecksumOffload::NONE,
            tx_checksum: ChecksumOffload::NONE,
            tso_max: None,
            lro: false,
            queue: 0,
            queue_count: 1,
            rss: None,
        }
    }

    /// Whether the link has several queues and steers flows among them in a way the
    /// stack cannot compute (no [`Capabilities::rss`]: TAP, a veth under AF_XDP). Its
    /// workers then hand segments to the worker that owns their flow.
    pub fn unpredictable_steering(&self) -> bool {
        self.rss.is_none() && self.queue_count > 1
    }

    /// The largest Ethernet frame (header included) the stack may ask [`PacketIo::alloc_tx`] for.
    pub fn max_tx_frame(&self) -> usize {
        ETHERNET_HEADER_LEN + self.tso_max.unwrap_or(self.mtu).max(self.mtu)
    }
}

/// Length of an Ethernet II header (no VLAN tag).
pub const ETHERNET_HEADER_LEN: usize = 14;

/// Per-protocol checksum offload flags.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ChecksumOffload {
    /// The device fills in IPv4 header checksums.
    pub ipv4: bool,
    /// The device computes TCP checksums (from the partial sum the stack writes).
    pub tcp: bool,
}

impl ChecksumOffload {
    /// No offload: the stack computes every checksum.
    pub const NONE: ChecksumOffload = ChecksumOffload {
        ipv4: false,
        tcp: false,
    };
    /// Every offload this seam knows.
    pub const ALL: ChecksumOffload = ChecksumOffload {
        ipv4: true,
        tcp: true,
    };
}

/// What the driver knows about a received frame beyond its bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RxMeta {
    /// The device verified the IPv4 and TCP checksums of this frame.
    pub checksum_verified: bool,
    /// The frame is a coalesced (GRO/LRO) super-frame built from segments of this size.
    pub gso_size: Option<u16>,
}

/// Offload work the stack asks of the device for one transmitted frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TxMeta {
    /// Fill in the transport checksum: the device sums from `start` (offset in the frame)
    /// to the end and stores the folded result at `start + offset`. The stack has put the
    /// pseudo-header sum there already (the virtio-net / Linux `CHECKSUM_PARTIAL` contract).
    pub checksum: Option<ChecksumRequest>,
    /// Segment this super-frame into TCP segments of `mss` payload bytes.
    pub tso_mss: Option<u16>,
}

/// See [`TxMeta::checksum`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChecksumRequest {
    /// Offset in the frame where checksumming starts (the transport header).
    pub start: u16,
    /// Offset from `start` where the folded checksum goes.
    pub offset: u16,
}

/// A received frame, owned by the driver, lent to the stack until dropped.
pub trait RxFrame: Deref<Target = [u8]> {
    /// What the device knows about this frame (checksum verified, GSO size).
    fn meta(&self) -> RxMeta {
        RxMeta::default()
    }
}

/// A transmit buffer of exactly the length asked for, owned by the driver.
pub trait TxFrame: DerefMut<Target = [u8]> {
    /// Ask the device for offload work on this frame. Only called for offloads the
    /// queue's [`Capabilities`] announce.
    fn set_meta(&mut self, meta: TxMeta) {
        let _ = meta;
    }
    /// Shorten the frame to `len` bytes (the stack asked for more than it wrote).
    fn truncate(&mut self, len: usize);
}

/// One (link, queue) pair: the only way the stack moves frames.
pub trait PacketIo {
    /// Received frames: the driver's own buffers, lent to the stack.
    type Rx: RxFrame;
    /// Transmit buffers: the driver's own, filled by the stack.
    type Tx: TxFrame;

    /// What this queue is and offers.
    fn capabilities(&self) -> &Capabilities;

    /// Append up to `max` received frames to `out`; returns how many were appended.
    fn receive(&mut self, out: &mut Vec<Self::Rx>, max: usize) -> usize;

    /// A transmit buffer of exactly `len` bytes (at most
    /// [`Capabilities::max_tx_frame`]), or `None` when the driver has none free right now.
    fn alloc_tx(&mut self, len: usize) -> Option<Self::Tx>;

    /// Queue a burst of filled buffers for transmission, draining `frames`. Frames the
    /// device cannot take are dropped and counted by the driver.
    fn transmit(&mut self, frames: &mut Vec<Self::Tx>);

    /// Push everything queued so far to the device (doorbell). Called once per loop turn.
    fn flush(&mut self) {}

    /// Block until a frame may be waiting, the [doorbell](PacketIo::set_doorbell) rang,
    /// or `timeout` has passed (an idle worker parks here instead of spinning). Spurious
    /// wake-ups are fine. The default sleeps, at most a millisecond, for queues that
    /// cannot signal readiness.
    fn wait(&mut self, timeout: Duration) {
        std::thread::sleep(timeout.min(Duration::from_millis(1)));
    }

    /// Keep `bell`, which siblings ring when they hand this queue's worker work through
    /// the runtime, and let it end [`PacketIo::wait`] too: a queue that waits on file
    /// descriptors polls [`Doorbell::as_fd`](std::os::fd::AsFd::as_fd) with its own and
    /// calls [`Doorbell::drain`] when it became readable. The engine worker hands one
    /// over before its first turn, on links whose steering the stack cannot predict.
    ///
    /// The default drops it: a queue that cannot watch it still works, its parked
    /// worker sees the handed-over work when its wait ends (the default `wait` sleeps a
    /// millisecond at most). Decorators pass it to the queue they wrap.
    fn set_doorbell(&mut self, bell: Doorbell) {
        let _ = bell;
    }

    /// Bytes of idle buffers this queue keeps for reuse that it allocated as it went
    /// (not a fixed area set up at start, such as a NIC's ring or a UMEM), bounded by
    /// its configuration; the engine reports them with its counters
    /// ([`Stats::driver_pool_idle`](crate::Stats)). Read about once a second, off the
    /// data path. The default: none. Decorators report the queue they wrap.
    fn pooled_bytes(&self) -> usize {
        0
    }
}

/// A plain owned frame: the buffer type of the in-memory link and of copies made by
/// decorators.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct OwnedFrame {
    /// The frame's bytes.
    pub data: Vec<u8>,
    /// What the device reported about it.
    pub meta: RxMeta,
}

impl Deref for OwnedFrame {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.data
    }
}

impl DerefMut for OwnedFrame {
    fn deref_mut(&mut self) -> &mut [u8] {
        &mut self.data
    }
}

impl RxFrame for OwnedFrame {
    fn meta(&self) -> RxMeta {
        self.meta
    }
}

impl TxFrame for OwnedFrame {
    fn truncate(&mut self, len: usize) {
        self.data.truncate(len);
    }
}

/// The wire side of a model device: frames arrive from the network through
/// [`FrameWire::deliver`], and what the device transmitted is taken with
/// [`FrameWire::take_transmitted`]. Frames are whole Ethernet frames without FCS.
pub trait FrameWire: Send + 'static {
    /// A frame arrives from the network; the device's receive path runs.
    fn deliver(&self, frame: &[u8]);
    /// Move the frames the device has sent, oldest first, into `out`.
    fn take_transmitted(&self, out: &mut Vec<Vec<u8>>);
}
