//! One AF_XDP socket: its UMEM, its four rings, its counters, and its [`PacketIo`]
//! implementation.
//!
//! Chunks circulate: free → fill ring → (kernel receives) → RX ring → a frame lent to
//! the stack → returned when dropped → free; and free → a transmit buffer → TX ring →
//! (kernel sends) → completion ring → free. The fill ring is kept at
//! [`XdpConfig::ring_size`](crate::XdpConfig::ring_size) chunks (or half the UMEM, if
//! smaller); the rest is for sending. Nothing allocates in steady state.

use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::sync::Arc;
use std::time::Duration;

use rusty_stack::io::{Capabilities, Doorbell, PacketIo, RxFrame, RxMeta, TxFrame};

use crate::mem::{Chunk, CompRing, FillRing, Frame, RxRing, TxRing, Umem};
use crate::sys;
use crate::Attachment;

/// Chunks the fill ring may be short of its target before it is topped up.
const REFILL_BATCH: u32 = 32;
/// Free chunks below which sent and dropped ones are taken back at the end of a turn.
const LOW_WATER: usize = 64;

/// Counters of one queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct XdpStats {
    /// Frames handed to the stack.
    pub rx_frames: u64,
    /// Ethernet bytes of the frames handed to the stack.
    pub rx_bytes: u64,
    /// Descriptors the kernel returned that did not fit their chunk (never expected).
    pub rx_errors: u64,
    /// Frames put on the TX ring.
    pub tx_frames: u64,
    /// Ethernet bytes of the frames put on the TX ring.
    pub tx_bytes: u64,
    /// Frames dropped because the TX ring was full.
    pub tx_drops: u64,
    /// `alloc_tx` calls refused: every chunk was in use.
    pub tx_alloc_failures: u64,
    /// `sendto` calls made to wake the kernel to send what is on the TX ring.
    pub tx_wakeups: u64,
    /// `recvfrom` calls made to wake the kernel to take chunks from the fill ring.
    pub rx_wakeups: u64,
}

/// What the kernel counts for one socket (`XDP_STATISTICS`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct KernelStats {
    /// Frames dropped for lack of room (other than below).
    pub rx_dropped: u64,
    /// Frames dropped because the RX ring was full.
    pub rx_ring_full: u64,
    /// Times the kernel found the fill ring empty.
    pub rx_fill_ring_empty: u64,
    /// Invalid descriptors the kernel found on the receive side (never expected).
    pub rx_invalid_descs: u64,
    /// Invalid descriptors we put on the TX ring (never expected).
    pub tx_invalid_descs: u64,
}

/// How a queue is attached: where the XDP program runs, and whether frames are copied.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct QueueMode {
    /// The program runs in the driver (native XDP) rather than on socket buffers
    /// (generic XDP).
    pub native: bool,
    /// The NIC reads and writes the UMEM directly (no copy between kernel buffers and
    /// the UMEM).
    pub zero_copy: bool,
}

impl std::fmt::Display for QueueMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let attach = if self.native { "native" } else { "generic" };
        let copy = if self.zero_copy { "zero-copy" } else { "copy" };
        write!(f, "{attach} XDP, {copy} mode")
    }
}

/// One AF_XDP socket on one queue of the interface; see the [crate docs](crate).
pub struct XdpQueue {
    // Field order is drop order: the rings are unmapped before the socket closes, the
    // socket before the UMEM it registered goes, and the program stays attached until
    // the last queue is gone.
    rx: RxRing,
    tx: TxRing,
    fill: FillRing,
    comp: CompRing,
    fd: OwnedFd,
    umem: Arc<Umem>,
    /// Chunks not in a ring and not lent out.
    free: Vec<Chunk>,
    /// Chunks to keep in the fill ring.
    fill_target: u32,
    caps: Capabilities,
    name: String,
    mode: QueueMode,
    stats: XdpStats,
    /// Rung by sibling workers that hand this one frames (see `PacketIo::set_doorbell`).
    doorbell: Option<Doorbell>,
    _attachment: Arc<Attachment>,
}

/// The parts [`crate::open`] builds a queue from.
pub(crate) struct Parts {
    pub(crate) fd: OwnedFd,
    pub(crate) umem: Arc<Umem>,
    pub(crate) chunks: Vec<Chunk>,
    pub(crate) rx: RxRing,
    pub(crate) tx: TxRing,
    pub(crate) fill: FillRing,
    pub(crate) comp: CompRing,
    pub(crate) fill_target: u32,
    pub(crate) caps: Capabilities,
    pub(crate) name: String,
    pub(crate) zero_copy: bool,
    /// The program runs in the driver (native XDP).
    pub(crate) native: bool,
}

impl std::fmt::Debug for XdpQueue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("XdpQueue")
            .field("name", &self.name)
            .field("queue", &self.caps.queue)
            .field("mode", &self.mode)
            .field("stats", &self.stats)
            .finish_non_exhaustive()
    }
}

impl XdpQueue {
    pub(crate) fn new(p: Parts, attachment: Arc<Attachment>) -> XdpQueue {
        let mut q = XdpQueue {
            rx: p.rx,
            tx: p.tx,
            fill: p.fill,
            comp: p.comp,
            fd: p.fd,
            umem: p.umem,
            free: p.chunks,
            fill_target: p.fill_target,
            caps: p.caps,
            name: p.name,
            mode: QueueMode {
                native: p.native,
                zero_copy: p.zero_copy,
            },
            stats: XdpStats::default(),
            doorbell: None,
            _attachment: attachment,
        };
        q.refill();
        q
    }

    /// The interface's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Where the program runs and whether frames are copied, for this queue.
    pub fn mode(&self) -> QueueMode {
        self.mode
    }

    /// This queue's counters.
    pub fn stats(&self) -> XdpStats {
        self.stats
    }

    /// The kernel's counters for this socket.
    pub fn kernel_stats(&self) -> std::io::Result<KernelStats> {
        let (s, _) = sys::get_xdp_opt::<libc::xdp_statistics>(&self.fd, libc::XDP_STATISTICS)?;
        Ok(KernelStats {
            rx_dropped: s.rx_dropped,
            rx_ring_full: s.rx_ring_full,
            rx_fill_ring_empty: s.rx_fill_ring_empty_descs,
            rx_invalid_descs: s.rx_invalid_descs,
            tx_invalid_descs: s.tx_invalid_descs,
        })
    }

    /// Top the fill ring up to its target from the free chunks, waking the kernel if
    /// it asked to be told.
    fn refill(&mut self) {
        // In batches: a ring a little short of its target still has plenty to receive
        // into, and each top-up costs a look at the kernel's index and a barrier.
        let pending = self.fill.pending();
        if pending + REFILL_BATCH > self.fill_target {
            return;
        }
        if self.free.len() < REFILL_BATCH as usize {
            self.umem.take_returned(&mut self.free);
        }
        self.fill.fill(&mut self.free, self.fill_target - pending);
        if self.fill.needs_wakeup() {
            self.stats.rx_wakeups += 1;
            sys::kick_rx(self.fd.as_raw_fd());
        }
    }

    /// Take back sent and dropped chunks.
    fn reclaim(&mut self) {
        self.comp.reap(&self.umem, &mut self.free);
        self.umem.take_returned(&mut self.free);
    }
}

/// The XDP socket, readable when frames wait: for a caller that sleeps on it among
/// descriptors of its own.
impl AsFd for XdpQueue {
    fn as_fd(&self) -> std::os::fd::BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

impl PacketIo for XdpQueue {
    type Rx = XdpRx;
    type Tx = XdpTx;

    fn capabilities(&self) -> &Capabilities {
        &self.caps
    }

    fn receive(&mut self, out: &mut Vec<XdpRx>, max: usize) -> usize {
        let before = out.len();
        let (stats, free) = (&mut self.stats, &mut self.free);
        self.rx.take(&self.umem, max, |r| match r {
            Ok(frame) => {
                stats.rx_frames += 1;
                stats.rx_bytes += frame.len() as u64;
                out.push(XdpRx(frame));
            }
            Err(chunk) => {
                stats.rx_errors += 1;
                free.extend(chunk);
            }
        });
        self.refill();
        out.len() - before
    }

    fn alloc_tx(&mut self, len: usize) -> Option<XdpTx> {
        if len > self.caps.max_tx_frame() {
            return None;
        }
        if self.free.is_empty() {
            self.reclaim();
        }
        if self.free.is_empty() && self.tx.pending() > 0 {
            // Every chunk is lent out, some of them to frames already on the TX ring
            // that the kernel has not been asked to send (that happens at `flush`). In
            // a large burst (hundreds of connections answering in one turn) dropping
            // here would cost each dropped segment a loss-probe timeout; sending what
            // is queued now frees chunks (in copy mode at once).
            self.flush();
            self.reclaim();
        }
        match self.free.pop() {
            Some(chunk) => Some(XdpTx(Frame::new(&self.umem, chunk, len as u32))),
            None => {
                self.stats.tx_alloc_failures += 1;
                None
            }
        }
    }

    fn transmit(&mut self, frames: &mut Vec<XdpTx>) {
        for XdpTx(frame) in frames.drain(..) {
            let len = frame.len() as u64;
            match self.tx.push(frame) {
                Ok(()) => {
                    self.stats.tx_frames += 1;
                    self.stats.tx_bytes += len;
                }
                // Dropping the frame returns its chunk.
                Err(_) => self.stats.tx_drops += 1,
            }
        }
        self.tx.publish();
    }

    fn flush(&mut self) {
        // In copy mode the kernel sends a bounded batch per call (32 frames) and says
        // EAGAIN while more wait; a busy or down device ends the attempt until the
        // next turn.
        let mut budget = self.tx.pending() / 32 + 2;
        while self.tx.pending() > 0 && budget > 0 && self.tx.needs_wakeup() {
            budget -= 1;
            self.stats.tx_wakeups += 1;
            match sys::kick_tx(self.fd.as_raw_fd()) {
                Ok(()) => {}
                Err(e) if e.raw_os_error() == Some(libc::EAGAIN) => {}
                Err(_) => break,
            }
        }
        // Completions are taken back when chunks run low, not every turn.
        if self.free.len() < LOW_WATER {
            self.reclaim();
        }
    }

    fn wait(&mut self, timeout: Duration) {
        // poll() on an XDP socket also kicks the kernel when a ring asked for a wake-up.
        let bell = self.doorbell.as_ref();
        if rusty_netdev::wait_readable_or(self.fd.as_fd(), bell.map(|b| b.as_fd()), timeout) {
            if let Some(bell) = bell {
                bell.drain();
            }
        }
    }

    fn set_doorbell(&mut self, bell: Doorbell) {
        self.doorbell = Some(bell);
    }
}

/// A received frame: a chunk of the UMEM, lent to the stack until dropped.
pub struct XdpRx(Frame);

impl std::ops::Deref for XdpRx {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.0
    }
}

impl RxFrame for XdpRx {
    fn meta(&self) -> RxMeta {
        // AF_XDP carries no checksum or GSO state (without RX metadata, which needs
        // driver support): the stack verifies every checksum.
        RxMeta::default()
    }
}

/// A transmit buffer: a chunk of the UMEM the stack writes the frame into.
pub struct XdpTx(Frame);

impl std::ops::Deref for XdpTx {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.0
    }
}

impl std::ops::DerefMut for XdpTx {
    fn deref_mut(&mut self) -> &mut [u8] {
        &mut self.0
    }
}

impl TxFrame for XdpTx {
    fn truncate(&mut self, len: usize) {
        self.0.truncate(len);
    }
}
