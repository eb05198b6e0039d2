//! One TAP queue: a non-blocking `/dev/net/tun` file attached to the device, its buffer
//! pools and counters, and its [`PacketIo`] implementation.
//!
//! Receive buffers come from a free list the queue shares with the frames it hands out:
//! a frame puts its buffer back when the stack drops it. Frames may outlive a loop turn
//! on another thread in principle (the queue is `Send`), so the list sits behind a
//! mutex; it is uncontended (frames are dropped on the worker's own thread), one
//! lock per frame against the `read` system call each frame costs anyway. Transmit
//! buffers come back through [`PacketIo::transmit`] and need no sharing. In steady state
//! no frame allocates.

use std::fs::File;
use std::io::{self, Read, Write};
use std::ops::{Deref, DerefMut};
use std::os::fd::AsFd;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rusty_stack::io::{
    Capabilities, Doorbell, PacketIo, RxFrame, RxMeta, TxFrame, TxMeta, ETHERNET_HEADER_LEN,
};

use crate::vnet::{VnetHdr, VNET_HDR_LEN};

/// Receive buffer size: the virtio-net header plus the largest frame the kernel can hand
/// over (a 64 KiB GSO super-frame: 14-byte Ethernet header, a 4-byte VLAN tag the kernel
/// may insert, and an IPv4 datagram of up to 65535 bytes).
pub const RX_BUF_LEN: usize = VNET_HDR_LEN + ETHERNET_HEADER_LEN + 4 + 65535;

/// Idle buffers each of a queue's lists keeps unless configured otherwise
/// ([`TapConfig::pool_buffers`](crate::TapConfig)): two receive bursts (the engine takes
/// 32 frames a turn) and one transmit burst (it hands over 64).
pub const DEFAULT_POOL_BUFFERS: usize = 64;

/// Receive buffers the stack gave back (a frame is dropped wherever the stack is done
/// with it, which may be a sibling worker's thread), at most `cap` of them.
struct RxPool {
    list: Mutex<Vec<Box<[u8]>>>,
    cap: usize,
}

type Pool = Arc<RxPool>;

/// Counters of one queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct TapStats {
    /// Frames handed to the stack.
    pub rx_frames: u64,
    /// Ethernet bytes of the frames handed to the stack (virtio header excluded).
    pub rx_bytes: u64,
    /// Of those, GSO super-frames (several segments coalesced by the kernel).
    pub rx_gso_frames: u64,
    /// Frames read but not handed over (bad virtio header, truncated), and failed reads.
    pub rx_errors: u64,
    /// Frames the kernel accepted (a TSO super-frame counts once).
    pub tx_frames: u64,
    /// Ethernet bytes of the frames the kernel accepted (virtio header excluded).
    pub tx_bytes: u64,
    /// Frames the kernel refused (or a write failed): dropped, as a full ring would.
    pub tx_drops: u64,
}

/// One queue of a TAP device; see the [crate docs](crate).
pub struct TapQueue {
    file: File,
    name: String,
    caps: Capabilities,
    /// Buffers returned by dropped frames.
    rx_pool: Pool,
    /// Buffers taken from `rx_pool`, used before locking it again.
    rx_spare: Vec<Box<[u8]>>,
    tx_free: Vec<Vec<u8>>,
    /// Capacity of a transmit buffer: the virtio header plus the largest frame.
    tx_buf_len: usize,
    /// Most idle buffers each list keeps.
    pool_cap: usize,
    stats: TapStats,
    /// Rung by siblings that hand this queue's worker frames; ends a `wait` too.
    doorbell: Option<Doorbell>,
}

impl TapQueue {
    pub(crate) fn new(file: File, name: String, caps: Capabilities, pool_cap: usize) -> TapQueue {
        let tx_buf_len = VNET_HDR_LEN + caps.max_tx_frame();
        TapQueue {
            file,
            name,
            caps,
            rx_pool: Arc::new(RxPool {
                list: Mutex::new(Vec::new()),
                cap: pool_cap,
            }),
            rx_spare: Vec::new(),
            tx_free: Vec::new(),
            tx_buf_len,
            pool_cap,
            stats: TapStats::default(),
            doorbell: None,
        }
    }

    /// The device's name (as the kernel reports it).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Whether the kernel steers the device's frames to this queue: a process that
    /// holds a queue but wants no traffic for now (it neither listens nor has
    /// connections) detaches it, so that its share of new flows goes to the other
    /// queues, and attaches it again when it needs it. Queues start attached.
    pub fn set_attached(&self, attached: bool) -> std::io::Result<()> {
        crate::sys::set_queue_attached(&self.file, attached)
    }

    /// The queue's counters since it was opened.
    pub fn stats(&self) -> TapStats {
        self.stats
    }

    fn rx_buffer(&mut self) -> Box<[u8]> {
        if self.rx_spare.is_empty() {
            let mut pool = lock(&self.rx_pool.list);
            std::mem::swap(&mut *pool, &mut self.rx_spare);
        }
        self.rx_spare
            .pop()
            .unwrap_or_else(|| vec![0u8; RX_BUF_LEN].into_boxed_slice())
    }

    fn recycle_rx(&mut self, buf: Box<[u8]>) {
        if self.rx_spare.len() < self.pool_cap {
            self.rx_spare.push(buf);
        }
    }

    /// Read one frame.
    fn read_one(&mut self) -> io::Result<ReadOutcome> {
        let mut buf = self.rx_buffer();
        // One retry covers a signal landing mid-read; a second in a row ends the burst.
        let mut read = (&self.file).read(&mut buf);
        if matches!(&read, Err(e) if e.kind() == io::ErrorKind::Interrupted) {
            read = (&self.file).read(&mut buf);
        }
        let n = match read {
            Ok(n) => n,
            Err(e) => {
                self.recycle_rx(buf);
                return if e.kind() == io::ErrorKind::WouldBlock {
                    Ok(ReadOutcome::Empty)
                } else {
                    Err(e)
                };
            }
        };
        // A read that fills the buffer may have been cut short.
        let meta = if n >= buf.len() {
            None
        } else {
            VnetHdr::decode(&buf[..n]).and_then(|h| h.rx_meta()).ok()
        };
        let Some(meta) = meta else {
            self.recycle_rx(buf);
            return Ok(ReadOutcome::Refused);
        };
        Ok(ReadOutcome::Frame(TapRx {
            buf,
            len: n - VNET_HDR_LEN,
            meta,
            pool: self.rx_pool.clone(),
        }))
    }
}

enum ReadOutcome {
    Frame(TapRx),
    /// A frame with a header we cannot take, or cut short: counted and dropped.
    Refused,
    /// Nothing waiting.
    Empty,
}

fn lock(pool: &Mutex<Vec<Box<[u8]>>>) -> std::sync::MutexGuard<'_, Vec<Box<[u8]>>> {
    // A panic while holding the lock cannot leave the list inconsistent (push and swap
    // either happen or not), so a poisoned lock is still good to use.
    pool.lock().unwrap_or_else(|p| p.into_inner())
}

/// The queue's descriptor, readable when frames wait: for a caller that sleeps on it
/// among descriptors of its own (`PacketIo::wait` sleeps on this queue alone).
impl AsFd for TapQueue {
    fn as_fd(&self) -> std::os::fd::BorrowedFd<'_> {
        self.file.as_fd()
    }
}

impl PacketIo for TapQueue {
    type Rx = TapRx;
    type Tx = TapTx;

    fn capabilities(&self) -> &Capabilities {
        &self.caps
    }

    fn receive(&mut self, out: &mut Vec<TapRx>, max: usize) -> usize {
        let mut n = 0;
        // Refused frames count against a second budget of `max`, so a flood of garbage
        // cannot hold the loop turn.
        let mut reads = 0;
        while n < max && reads < max.saturating_mul(2) {
            reads += 1;
            match self.read_one() {
                Ok(ReadOutcome::Frame(frame)) => {
                    self.stats.rx_frames += 1;
                    self.stats.rx_bytes += frame.len as u64;
                    if frame.meta.gso_size.is_some() {
                        self.stats.rx_gso_frames += 1;
                    }
                    out.push(frame);
                    n += 1;
                }
                Ok(ReadOutcome::Refused) => self.stats.rx_errors += 1,
                Ok(ReadOutcome::Empty) => break,
                Err(_) => {
                    self.stats.rx_errors += 1;
                    break;
                }
            }
        }
        n
    }

    fn alloc_tx(&mut self, len: usize) -> Option<TapTx> {
        if len > self.caps.max_tx_frame() {
            return None;
        }
        let mut buf = self
            .tx_free
            .pop()
            .unwrap_or_else(|| Vec::with_capacity(self.tx_buf_len));
        buf.clear();
        buf.resize(VNET_HDR_LEN + len, 0);
        Some(TapTx {
            buf,
            meta: TxMeta::default(),
        })
    }

    fn transmit(&mut self, frames: &mut Vec<TapTx>) {
        for mut frame in frames.drain(..) {
            // Every buffer starts with the header's room; `truncate` keeps it.
            if let Some((hdr, eth)) = frame.buf.split_first_chunk_mut::<VNET_HDR_LEN>() {
                VnetHdr::for_tx(&frame.meta, eth).encode(hdr);
            }
            let mut written = (&self.file).write(&frame.buf);
            if matches!(&written, Err(e) if e.kind() == io::ErrorKind::Interrupted) {
                written = (&self.file).write(&frame.buf);
            }
            match written {
                Ok(n) if n == frame.buf.len() => {
                    self.stats.tx_frames += 1;
                    self.stats.tx_bytes += (n - VNET_HDR_LEN) as u64;
                }
                // EAGAIN (the device's queue is full), a refused frame (EINVAL: a bad
                // offload request), or the device going away: dropped, as a full ring
                // would drop it. TCP retransmits.
                _ => self.stats.tx_drops += 1,
            }
            if self.tx_free.len() < self.pool_cap {
                self.tx_free.push(frame.buf);
            }
        }
    }

    fn wait(&mut self, timeout: Duration) {
        let bell = self.doorbell.as_ref();
        if rusty_netdev::wait_readable_or(self.file.as_fd(), bell.map(|b| b.as_fd()), timeout) {
            if let Some(bell) = bell {
                bell.drain();
            }
        }
    }

    fn set_doorbell(&mut self, bell: Doorbell) {
        self.doorbell = Some(bell);
    }

    fn pooled_bytes(&self) -> usize {
        let rx = (self.rx_spare.len() + lock(&self.rx_pool.list).len()) * RX_BUF_LEN;
        rx + self.tx_free.iter().map(Vec::capacity).sum::<usize>()
    }
}

/// A received frame: a pooled buffer, lent to the stack until dropped.
pub struct TapRx {
    /// The virtio-net header, then the frame.
    buf: Box<[u8]>,
    len: usize,
    meta: RxMeta,
    pool: Pool,
}

impl Deref for TapRx {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.buf[VNET_HDR_LEN..VNET_HDR_LEN + self.len]
    }
}

impl RxFrame for TapRx {
    fn meta(&self) -> RxMeta {
        self.meta
    }
}

impl Drop for TapRx {
    fn drop(&mut self) {
        let buf = std::mem::take(&mut self.buf);
        let mut list = lock(&self.pool.list);
        if list.len() < self.pool.cap {
            list.push(buf);
        }
    }
}

/// A transmit buffer: room for the virtio-net header, then the frame.
pub struct TapTx {
    buf: Vec<u8>,
    meta: TxMeta,
}

impl Deref for TapTx {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.buf[VNET_HDR_LEN..]
    }
}

impl DerefMut for TapTx {
    fn deref_mut(&mut self) -> &mut [u8] {
        &mut self.buf[VNET_HDR_LEN..]
    }
}

impl TxFrame for TapTx {
    fn set_meta(&mut self, meta: TxMeta) {
        self.meta = meta;
    }
    fn truncate(&mut self, len: usize) {
        self.buf.truncate(VNET_HDR_LEN + len);
    }
}

#[cfg(test)]
mod tests;
