//! One worker's queue: its own NotifRing (through an [`Iqueue`]) and its own eDMA ring
//! (through an [`Equeue`]) with its own transmit buffers. Nothing here is shared with
//! another worker except the hardware's buffer stacks, which every tile pushes to with
//! one MMIO write (Linux's tilegx driver, by contrast, shares one egress queue between
//! its CPUs behind gxio's lock-free reservation).
//!
//! Receive: each idesc the hardware wrote is checked (error bits, chaining, its buffer
//! inside a stack the driver set up) and its buffer lent to the stack as an [`MpipeRx`];
//! dropping that pushes the buffer back to its stack. Transmit: frames are written into
//! the queue's own buffers, one edesc each (`bound`, `hwb` clear), and a buffer is free
//! again once its completion slot is complete.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rusty_stack::io::{Capabilities, PacketIo, RxFrame, RxMeta, TxFrame, TxMeta};

use crate::desc::{Edesc, Idesc, C_CHAINED, C_UNCHAINED};
use crate::equeue::Equeue;
use crate::gxio::{BufferSize, Gxio};
use crate::iqueue::Iqueue;
use crate::mem::{Home, Lease, Region};

/// A queue's counters since it opened.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct QueueStats {
    /// Frames received and lent to the stack.
    pub rx_frames: u64,
    /// Their bytes.
    pub rx_bytes: u64,
    /// Idescs dropped: error bits (`be`, `me`, `tr`, `ce`), cut through, chained,
    /// not for delivery, or a buffer the driver does not know.
    pub rx_bad: u64,
    /// Of those, idescs with `be`: the buffer stack was empty.
    pub rx_no_buffer: u64,
    /// Frames put on the eDMA ring.
    pub tx_frames: u64,
    /// Their bytes.
    pub tx_bytes: u64,
    /// Transmit buffers asked for while every one was in flight (back-pressure).
    pub tx_busy: u64,
    /// Transmit buffers refused: longer than a buffer.
    pub tx_too_long: u64,
    /// Frames dropped because the eDMA ring had no slot (never, while the ring has a
    /// slot for every transmit buffer).
    pub tx_ring_full: u64,
}

/// A buffer stack the driver set up: its index, its size class, and the memory its
/// buffers are carved from.
#[derive(Debug, Clone)]
pub(crate) struct Stack {
    pub(crate) index: u32,
    pub(crate) size: BufferSize,
    pub(crate) buffers: Region,
}

/// A received buffer goes back to its stack (`gxio_mpipe_push_buffer`).
struct StackHome {
    gxio: Arc<dyn Gxio>,
    stack: u32,
}

impl Home for StackHome {
    fn give_back(&self, va: u64) {
        self.gxio.push_buffer(self.stack, va);
    }
}

/// A transmit buffer dropped unsent goes back to its queue's free list.
#[derive(Default)]
struct TxHome {
    returned: Mutex<Vec<u64>>,
}

impl Home for TxHome {
    fn give_back(&self, va: u64) {
        self.returned
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(va);
    }
}

/// A received frame: a buffer of a buffer stack, lent to the stack until dropped.
pub struct MpipeRx {
    buf: Lease,
    meta: RxMeta,
}

impl std::ops::Deref for MpipeRx {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.buf
    }
}

impl RxFrame for MpipeRx {
    fn meta(&self) -> RxMeta {
        self.meta
    }
}

/// A transmit buffer the stack fills.
pub struct MpipeTx {
    buf: Lease,
    meta: TxMeta,
}

impl std::ops::Deref for MpipeTx {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.buf
    }
}

impl std::ops::DerefMut for MpipeTx {
    fn deref_mut(&mut self) -> &mut [u8] {
        &mut self.buf
    }
}

impl TxFrame for MpipeTx {
    fn set_meta(&mut self, meta: TxMeta) {
        self.meta = meta;
    }
    fn truncate(&mut self, len: usize) {
        self.buf.truncate(len);
    }
}

/// What one queue is made of (built by [`crate::open`]).
pub(crate) struct QueueParts {
    pub(crate) gxio: Arc<dyn Gxio>,
    pub(crate) iqueue: Iqueue,
    pub(crate) equeue: Equeue,
    pub(crate) stacks: Arc<[Stack]>,
    /// The queue's transmit buffers, `tx_buf` bytes each.
    pub(crate) tx_bufs: Region,
    pub(crate) tx_buf: usize,
    /// The stack whose IOTLB maps `tx_bufs` (an edesc's `stack_idx` selects it).
    pub(crate) tx_stack: u32,
    pub(crate) caps: Capabilities,
}

/// One worker's NotifRing and eDMA ring, as a [`PacketIo`].
pub struct MpipeQueue {
    p: QueueParts,
    homes: Vec<Arc<dyn Home>>,
    tx_home: Arc<TxHome>,
    tx_free: Vec<u64>,
    /// Completion slot and buffer of every frame handed to the eDMA ring, oldest first.
    in_flight: VecDeque<(u64, u64)>,
    unflushed: bool,
    stats: QueueStats,
    /// Whatever else must live as long as the device's queues (the model's wire bridge).
    keep: Option<Arc<dyn std::any::Any + Send + Sync>>,
}

impl MpipeQueue {
    /// Keep `thing` alive as long as this queue (every queue of a link given the same
    /// `Arc` keeps it until the last one goes): the model's wire bridge.
    pub fn keep_alive(&mut self, thing: Arc<dyn std::any::Any + Send + Sync>) {
        self.keep = Some(thing);
    }

    pub(crate) fn new(p: QueueParts) -> MpipeQueue {
        let homes = p
            .stacks
            .iter()
            .map(|s| {
                Arc::new(StackHome {
                    gxio: Arc::clone(&p.gxio),
                    stack: s.index,
                }) as Arc<dyn Home>
            })
            .collect();
        let count = p.tx_bufs.len() / p.tx_buf;
        let tx_free = (0..count)
            .rev()
            .map(|i| p.tx_bufs.va(i * p.tx_buf))
            .collect();
        MpipeQueue {
            p,
            homes,
            tx_home: Arc::new(TxHome::default()),
            tx_free,
            in_flight: VecDeque::new(),
            unflushed: false,
            stats: QueueStats::default(),
            keep: None,
        }
    }

    /// This queue's counters.
    pub fn stats(&self) -> QueueStats {
        self.stats
    }

    /// The worker (and NotifRing position) this queue serves.
    pub fn index(&self) -> u16 {
        self.p.caps.queue
    }

    /// The NotifRing this queue reads.
    pub fn notif_ring(&self) -> u32 {
        self.p.iqueue.ring()
    }

    /// The idesc's buffer as a frame, or why not (the buffer's stack position, when the
    /// buffer is one the driver can push back).
    fn accept(&self, d: &Idesc) -> Result<MpipeRx, Option<usize>> {
        let pos = self
            .p
            .stacks
            .iter()
            .position(|s| s.index == u32::from(d.stack_idx));
        let owned = pos.and_then(|i| {
            let s = &self.p.stacks[i];
            let off = s.buffers.offset_of(d.va)?;
            (off % s.size.bytes() == 0 && off + s.size.bytes() <= s.buffers.len())
                .then_some((i, off))
        });
        // A buffer was consumed when `c` says so, whatever else went wrong.
        let valid = matches!(d.c, C_UNCHAINED | C_CHAINED);
        let give_back = owned.filter(|_| valid).map(|(i, _)| i);
        if d.has_error() || d.ct || d.c != C_UNCHAINED || d.dest != 1 {
            return Err(give_back);
        }
        let Some((i, off)) = owned else {
            return Err(None);
        };
        let s = &self.p.stacks[i];
        let len = usize::from(d.l2_size);
        if len > s.size.bytes() {
            return Err(give_back);
        }
        Ok(MpipeRx {
            buf: Lease::new(&s.buffers, off, len, Arc::clone(&self.homes[i])),
            meta: RxMeta {
                checksum_verified: d.checksum_good(),
                gso_size: None,
            },
        })
    }

    /// Free the buffers of every frame the hardware has sent, oldest first.
    fn reclaim(&mut self) {
        self.tx_home
            .returned
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .drain(..)
            .for_each(|va| self.tx_free.push(va));
        while let Some(&(slot, va)) = self.in_flight.front() {
            if !self.p.equeue.is_complete(slot) {
                break;
            }
            self.in_flight.pop_front();
            self.tx_free.push(va);
        }
    }

    fn edesc_for(&self, frame: &mut [u8], va: u64, meta: &TxMeta) -> Edesc {
        let mut e = Edesc {
            bound: true,
            xfer_size: frame.len() as u16,
            va,
            stack_idx: self.p.tx_stack as u8,
            ..Edesc::default()
        };
        if let Some(req) = meta.checksum {
            let start = usize::from(req.start);
            let dest = start + usize::from(req.offset);
            if dest <= 255 && dest + 2 <= frame.len() {
                // The stack seeded the checksum field with the pseudo-header sum (Linux's
                // CHECKSUM_PARTIAL, which tilegx.c hands over the same way): no seed.
                e.csum = true;
                e.csum_start = start as u8;
                e.csum_dest = dest as u8;
            } else if dest + 2 <= frame.len() {
                // Past what the 8-bit fields reach (never for Ethernet + IPv4 + TCP).
                let sum = rusty_stack::checksum::sum(&frame[start..]);
                let c = rusty_stack::checksum::finish(sum);
                frame[dest..dest + 2].copy_from_slice(&c.to_be_bytes());
            }
        }
        e
    }
}

impl PacketIo for MpipeQueue {
    type Rx = MpipeRx;
    type Tx = MpipeTx;

    fn capabilities(&self) -> &Capabilities {
        &self.p.caps
    }

    fn receive(&mut self, out: &mut Vec<MpipeRx>, max: usize) -> usize {
        let mut n = 0;
        while n < max {
            let ready = self.p.iqueue.try_peek();
            if ready == 0 {
                break;
            }
            for _ in 0..ready.min(max - n) {
                let d = self.p.iqueue.idesc(0);
                match self.accept(&d) {
                    Ok(frame) => {
                        self.stats.rx_frames += 1;
                        self.stats.rx_bytes += frame.len() as u64;
                        out.push(frame);
                        n += 1;
                    }
                    Err(give_back) => {
                        self.stats.rx_bad += 1;
                        self.stats.rx_no_buffer += u64::from(d.be);
                        // A chained packet's further buffers are not walked: the rules
                        // pick a stack that holds the whole packet, so none is chained.
                        if let Some(i) = give_back {
                            self.p.gxio.push_buffer(self.p.stacks[i].index, d.va);
                        }
                    }
                }
                self.p.iqueue.consume(&d);
            }
        }
        n
    }

    fn alloc_tx(&mut self, len: usize) -> Option<MpipeTx> {
        if len > self.p.tx_buf {
            self.stats.tx_too_long += 1;
            return None;
        }
        if self.tx_free.is_empty() {
            self.reclaim();
        }
        let Some(va) = self.tx_free.pop() else {
            self.stats.tx_busy += 1;
            return None;
        };
        let off = self.p.tx_bufs.offset_of(va)?;
        let home: Arc<dyn Home> = Arc::clone(&self.tx_home) as Arc<dyn Home>;
        Some(MpipeTx {
            buf: Lease::new(&self.p.tx_bufs, off, len, home),
            meta: TxMeta::default(),
        })
    }

    fn transmit(&mut self, frames: &mut Vec<MpipeTx>) {
        for mut frame in frames.drain(..) {
            let Some(slot) = self.p.equeue.try_reserve(1) else {
                self.stats.tx_ring_full += 1;
                continue; // the lease drops: the buffer goes back to the free list
            };
            let meta = frame.meta;
            let va = frame.buf.va();
            let e = self.edesc_for(&mut frame.buf, va, &meta);
            let (va, len) = frame.buf.into_parts();
            self.p.equeue.put_at(&e, slot);
            self.in_flight.push_back((slot, va));
            self.unflushed = true;
            self.stats.tx_frames += 1;
            self.stats.tx_bytes += len as u64;
        }
    }

    fn flush(&mut self) {
        if self.unflushed {
            self.p.equeue.flush();
            self.unflushed = false;
        }
        if self.in_flight.len() > self.p.equeue.entries() / 2 {
            self.reclaim();
        }
    }

    fn wait(&mut self, timeout: Duration) {
        // No interrupts (gxio_mpipe_request_notif_ring_interrupt is not used): look at
        // the tail word now and then.
        let end = Instant::now() + timeout.min(Duration::from_millis(1));
        while self.p.iqueue.try_peek() == 0 && Instant::now() < end {
            std::thread::sleep(Duration::from_micros(20));
        }
    }
}
