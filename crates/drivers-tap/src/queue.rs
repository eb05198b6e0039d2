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
mod tests {
    //! The queue logic over a Unix datagram socket pair, which keeps frame boundaries
    //! just as a TAP file does, so no privileges are needed.

    use std::os::fd::OwnedFd;
    use std::os::unix::net::UnixDatagram;

    use rusty_stack::io::{ChecksumRequest, MacAddr};

    use super::*;
    use crate::vnet::{F_NEEDS_CSUM, GSO_TCPV4};

    fn pair() -> (TapQueue, UnixDatagram) {
        let (ours, theirs) = UnixDatagram::pair().unwrap();
        ours.set_nonblocking(true).unwrap();
        theirs
            .set_read_timeout(Some(Duration::from_secs(1)))
            .unwrap();
        let file = File::from(OwnedFd::from(ours));
        let mut caps = Capabilities::new(MacAddr::from_bytes(&[2, 0, 0, 0, 0, 1]), 1500);
        caps.tso_max = Some(crate::TSO_MAX);
        (
            TapQueue::new(file, "test".into(), caps, DEFAULT_POOL_BUFFERS),
            theirs,
        )
    }

    fn with_hdr(h: VnetHdr, frame: &[u8]) -> Vec<u8> {
        let mut b = [0u8; VNET_HDR_LEN];
        h.encode(&mut b);
        [&b[..], frame].concat()
    }

    #[test]
    fn tap_queue_is_send() {
        fn send<T: Send>() {}
        send::<TapQueue>();
    }

    /// A burst larger than the pools leaves at most `pool_buffers` idle buffers in each
    /// list, and `pooled_bytes` says how much they hold.
    #[test]
    fn idle_buffers_stay_within_the_configured_bound() {
        let (mut q, peer) = pair();
        let burst = 3 * DEFAULT_POOL_BUFFERS;
        // All held by the stack at once, then all given back (a few at a time: the
        // socket pair queues only a few datagrams).
        let mut held = Vec::new();
        while held.len() < burst {
            for _ in 0..4 {
                peer.send(&with_hdr(VnetHdr::default(), &[5u8; 60]))
                    .unwrap();
            }
            assert_eq!(q.receive(&mut held, 4), 4);
        }
        assert_eq!(q.pooled_bytes(), 0);
        held.clear();
        // Given back to the shared list; the next reads take from it.
        assert_eq!(q.pooled_bytes(), DEFAULT_POOL_BUFFERS * RX_BUF_LEN);
        let mut frames: Vec<TapTx> = (0..burst).map(|_| q.alloc_tx(1000).unwrap()).collect();
        // The pair takes a few; the rest are dropped as a full device queue would.
        q.transmit(&mut frames);
        let tx = q.tx_free.iter().map(Vec::capacity).sum::<usize>();
        assert_eq!(q.tx_free.len(), DEFAULT_POOL_BUFFERS);
        assert_eq!(q.pooled_bytes(), DEFAULT_POOL_BUFFERS * RX_BUF_LEN + tx);
    }

    #[test]
    fn receives_bursts_with_metadata_and_reuses_buffers() {
        let (mut q, peer) = pair();
        let gso = VnetHdr {
            flags: F_NEEDS_CSUM,
            gso_type: GSO_TCPV4,
            gso_size: 1448,
            ..VnetHdr::default()
        };
        peer.send(&with_hdr(gso, &[1u8; 3000])).unwrap();
        peer.send(&with_hdr(VnetHdr::default(), &[2u8; 60]))
            .unwrap();
        // Unknown GSO type, and a datagram shorter than the header: counted, skipped.
        let udp = VnetHdr {
            gso_type: crate::vnet::GSO_UDP,
            ..VnetHdr::default()
        };
        peer.send(&with_hdr(udp, &[3u8; 60])).unwrap();
        peer.send(&[0u8; 4]).unwrap();
        peer.send(&with_hdr(VnetHdr::default(), &[4u8; 70]))
            .unwrap();

        let mut out = Vec::new();
        assert_eq!(q.receive(&mut out, 2), 2, "stops at max");
        assert_eq!(out[0].len(), 3000);
        assert!(out[0].iter().all(|&b| b == 1));
        assert_eq!(
            out[0].meta(),
            RxMeta {
                checksum_verified: true,
                gso_size: Some(1448)
            }
        );
        assert_eq!(&out[1][..], &[2u8; 60][..]);
        assert_eq!(out[1].meta(), RxMeta::default());
        let first = [out[0].as_ptr(), out[1].as_ptr()];
        out.clear();

        assert_eq!(q.receive(&mut out, 32), 1, "stops when nothing waits");
        assert_eq!(&out[0][..], &[4u8; 70][..]);
        assert!(
            first.contains(&out[0].as_ptr()),
            "a dropped frame's buffer is reused"
        );
        let s = q.stats();
        assert_eq!((s.rx_frames, s.rx_gso_frames, s.rx_errors), (3, 1, 2));
        assert_eq!(s.rx_bytes, 3000 + 60 + 70);
    }

    #[test]
    fn transmits_with_the_offload_header_and_counts_drops() {
        let (mut q, peer) = pair();
        let mut f = q.alloc_tx(100).unwrap();
        assert_eq!(f.len(), 100);
        f.fill(7);
        f.truncate(80);
        f.set_meta(TxMeta {
            checksum: Some(ChecksumRequest {
                start: 34,
                offset: 16,
            }),
            tso_mss: None,
        });
        let mut burst = vec![f];
        q.transmit(&mut burst);
        assert!(burst.is_empty());
        let mut buf = [0u8; 200];
        let n = peer.recv(&mut buf).unwrap();
        assert_eq!(n, VNET_HDR_LEN + 80);
        let h = VnetHdr::decode(&buf).unwrap();
        assert_eq!(
            (h.flags, h.csum_start, h.csum_offset),
            (F_NEEDS_CSUM, 34, 16)
        );
        assert!(buf[VNET_HDR_LEN..n].iter().all(|&b| b == 7));

        // The transmit buffer comes back and is handed out again, zeroed.
        let f = q.alloc_tx(50).unwrap();
        assert!(f.iter().all(|&b| b == 0));
        assert!(q.alloc_tx(q.capabilities().max_tx_frame() + 1).is_none());
        drop(f);

        // Nobody reads `peer`: the socket fills up and the rest is dropped and counted.
        let total = 5000u64;
        for _ in 0..total {
            let mut burst = vec![q.alloc_tx(1000).unwrap()];
            q.transmit(&mut burst);
        }
        let s = q.stats();
        assert_eq!(s.tx_frames + s.tx_drops, total + 1);
        assert!(s.tx_drops > 0, "{s:?}");
        assert_eq!(s.tx_bytes, s.tx_frames * 1000 - 1000 + 80);
    }

    #[test]
    fn wait_returns_when_the_doorbell_rings_and_drains_it() {
        let (mut q, _peer) = pair();
        let bell = Doorbell::new().unwrap();
        let ringer = bell.ringer();
        q.set_doorbell(bell);
        let t = std::time::Instant::now();
        let ring = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(50));
            ringer.ring();
            ringer
        });
        q.wait(Duration::from_secs(5));
        let waited = t.elapsed();
        let ringer = ring.join().unwrap();
        assert!(
            waited >= Duration::from_millis(40),
            "woke early: {waited:?}"
        );
        assert!(
            waited < Duration::from_secs(1),
            "slept through the bell: {waited:?}"
        );
        // Drained: the next wait lasts its timeout, and a new ring ends one again.
        let t = std::time::Instant::now();
        q.wait(Duration::from_millis(30));
        assert!(t.elapsed() >= Duration::from_millis(25));
        ringer.ring();
        let t = std::time::Instant::now();
        q.wait(Duration::from_secs(5));
        assert!(t.elapsed() < Duration::from_secs(1));
    }

    #[test]
    fn wait_returns_when_a_frame_arrives_or_the_timeout_passes() {
        let (mut q, peer) = pair();
        let t = std::time::Instant::now();
        q.wait(Duration::from_millis(30));
        assert!(t.elapsed() >= Duration::from_millis(25));
        peer.send(&with_hdr(VnetHdr::default(), &[0u8; 60]))
            .unwrap();
        let t = std::time::Instant::now();
        q.wait(Duration::from_secs(5));
        assert!(t.elapsed() < Duration::from_secs(1));
    }
}
