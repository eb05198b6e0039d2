//! One queue pair (RX and TX rings of one queue index) driven by one worker: bursts of
//! advanced descriptors (§7.1.6, §7.2.3.2), buffers recycled without allocation, TX
//! completions reclaimed in bulk, per-queue counters.

use std::sync::Arc;
use std::time::{Duration, Instant};

use rusty_stack::io::{Capabilities, PacketIo, RxFrame, RxMeta, TxFrame, TxMeta};

use crate::desc::{self, RxWriteBack, TxContext, DESC_LEN};
use crate::dma::{acquire, release, BufToken, Buffer, Buffers, DmaRegion};
use crate::hw::Registers;
use crate::regs::*;

/// A queue's counters since it opened.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct QueueStats {
    /// Frames received and handed to the stack.
    pub rx_frames: u64,
    /// Their bytes.
    pub rx_bytes: u64,
    /// Received descriptors dropped: errors the device flagged, frames spread over
    /// several buffers, lengths past the buffer, descriptors written back that the
    /// driver had not handed over.
    pub rx_bad: u64,
    /// Frames put on the transmit ring.
    pub tx_frames: u64,
    /// Their bytes.
    pub tx_bytes: u64,
    /// Transmit buffers asked for while every one was in flight (back-pressure).
    pub tx_busy: u64,
    /// Transmit frames refused: longer than a buffer.
    pub tx_too_long: u64,
}

/// A received frame: a packet buffer lent to the stack until dropped.
pub struct IxgbeRx {
    buf: Buffer,
    meta: RxMeta,
}

impl std::ops::Deref for IxgbeRx {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.buf
    }
}

impl RxFrame for IxgbeRx {
    fn meta(&self) -> RxMeta {
        self.meta
    }
}

/// A transmit buffer the stack fills.
pub struct IxgbeTx {
    buf: Buffer,
    meta: TxMeta,
    pool: usize,
}

impl std::ops::Deref for IxgbeTx {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.buf
    }
}

impl std::ops::DerefMut for IxgbeTx {
    fn deref_mut(&mut self) -> &mut [u8] {
        &mut self.buf
    }
}

impl TxFrame for IxgbeTx {
    fn set_meta(&mut self, meta: TxMeta) {
        self.meta = meta;
    }
    fn truncate(&mut self, len: usize) {
        self.buf.truncate(len);
    }
}

/// The receive ring. Descriptors `[next, tail)` (mod `size`) belong to the device;
/// `[tail, next)` wait for a buffer. One always stays empty: head == tail means empty
/// to the device (§7.1.9).
struct RxRing {
    ring: DmaRegion,
    size: usize,
    bufs: Arc<Buffers>,
    free: Vec<BufToken>,
    slots: Vec<Option<BufToken>>,
    next: usize,
    tail: usize,
    /// Inside a frame spread over several descriptors, which is being dropped.
    discarding: bool,
}

/// Transmit buffers of one size.
struct TxPool {
    bufs: Arc<Buffers>,
    free: Vec<BufToken>,
}

/// The transmit pool for MTU-sized frames, and the one for TSO super-frames.
const SMALL: usize = 0;
const LARGE: usize = 1;

/// The transmit ring. Descriptors `[clean, tail)` are the device's until done.
struct TxRing {
    ring: DmaRegion,
    size: usize,
    /// [`SMALL`] and [`LARGE`] buffers.
    pools: [TxPool; 2],
    /// The buffer (and its pool) of each data descriptor in flight (`None`: a context
    /// descriptor).
    slots: Vec<Option<(BufToken, usize)>>,
    tail: usize,
    clean: usize,
    in_flight: usize,
    /// TDT lags `tail` until the next flush.
    unflushed: bool,
    /// The offload context last loaded (context slot 0).
    context: Option<TxContext>,
}

/// One queue pair of an 82599, as a [`PacketIo`].
pub struct IxgbeQueue {
    regs: Arc<dyn Registers>,
    index: u32,
    caps: Capabilities,
    rx: RxRing,
    tx: TxRing,
    stats: QueueStats,
    /// Whatever else must live as long as the device's queues (the model's wire bridge).
    _keep: Option<Arc<dyn std::any::Any + Send + Sync>>,
}

/// Sizes of one queue pair.
pub(crate) struct QueueSetup {
    pub(crate) index: u32,
    pub(crate) ring_size: usize,
    pub(crate) buf_size: usize,
    pub(crate) rx_ring: DmaRegion,
    pub(crate) rx_bufs: DmaRegion,
    pub(crate) tx_ring: DmaRegion,
    pub(crate) tx_bufs: DmaRegion,
    /// Buffers for TSO super-frames, and their size.
    pub(crate) tx_large: DmaRegion,
    pub(crate) large_size: usize,
}

impl IxgbeQueue {
    /// Program queue `s.index` (§4.6.7 per-queue receive steps, §4.6.8 per-queue
    /// transmit steps), enable it and wait for the device to say so, and give the
    /// receive ring its buffers.
    pub(crate) fn open(
        regs: Arc<dyn Registers>,
        s: QueueSetup,
        caps: Capabilities,
    ) -> Result<IxgbeQueue, crate::init::InitError> {
        let q = s.index;
        let (rx_bufs, rx_free) = Buffers::new(s.rx_bufs, s.buf_size);
        let (tx_bufs, tx_free) = Buffers::new(s.tx_bufs, s.buf_size);
        let (tx_large, large_free) = Buffers::new(s.tx_large, s.large_size);
        // Receive: ring base and length, head and tail at 0, advanced one-buffer
        // descriptors of `buf_size` bytes, dropped when the ring is empty.
        regs.write(rdbal(q), s.rx_ring.bus(0) as u32);
        regs.write(rdbah(q), (s.rx_ring.bus(0) >> 32) as u32);
        regs.write(rdlen(q), (s.ring_size * DESC_LEN) as u32);
        regs.write(rdh(q), 0);
        regs.write(rdt(q), 0);
        let split = regs.read(srrctl(q)) & !(SRRCTL_BSIZEPACKET_MASK | SRRCTL_DESCTYPE_MASK);
        regs.write(
            srrctl(q),
            split
                | SRRCTL_DESCTYPE_ADV_ONEBUF
                | SRRCTL_DROP_EN
                | ((s.buf_size / 1024) as u32 & SRRCTL_BSIZEPACKET_MASK),
        );
        regs.write(rxdctl(q), regs.read(rxdctl(q)) | RXDCTL_ENABLE);
        crate::init::wait_for(
            &regs,
            rxdctl(q),
            RXDCTL_ENABLE,
            RXDCTL_ENABLE,
            "RXDCTL.ENABLE",
            crate::init::STEP_TIMEOUT,
        )?;
        // Transmit: the same, with the write-back thresholds ixgbe uses.
        regs.write(tdbal(q), s.tx_ring.bus(0) as u32);
        regs.write(tdbah(q), (s.tx_ring.bus(0) >> 32) as u32);
        regs.write(tdlen(q), (s.ring_size * DESC_LEN) as u32);
        regs.write(tdh(q), 0);
        regs.write(tdt(q), 0);
        regs.write(txdctl(q), txdctl_thresholds(36, 8, 4) | TXDCTL_ENABLE);
        crate::init::wait_for(
            &regs,
            txdctl(q),
            TXDCTL_ENABLE,
            TXDCTL_ENABLE,
            "TXDCTL.ENABLE",
            crate::init::STEP_TIMEOUT,
        )?;
        let mut queue = IxgbeQueue {
            regs,
            index: q,
            caps,
            rx: RxRing {
                ring: s.rx_ring,
                size: s.ring_size,
                bufs: rx_bufs,
                free: rx_free,
                slots: (0..s.ring_size).map(|_| None).collect(),
                next: 0,
                tail: 0,
                discarding: false,
            },
            tx: TxRing {
                ring: s.tx_ring,
                size: s.ring_size,
                pools: [
                    TxPool {
                        bufs: tx_bufs,
                        free: tx_free,
                    },
                    TxPool {
                        bufs: tx_large,
                        free: large_free,
                    },
                ],
                slots: (0..s.ring_size).map(|_| None).collect(),
                tail: 0,
                clean: 0,
                in_flight: 0,
                unflushed: false,
                context: None,
            },
            stats: QueueStats::default(),
            _keep: None,
        };
        queue.refill_rx();
        Ok(queue)
    }

    /// Keep `thing` alive as long as this queue (every queue of a device given the same
    /// `Arc` keeps it until the last one goes): the model's wire bridge.
    pub fn keep_alive(&mut self, thing: Arc<dyn std::any::Any + Send + Sync>) {
        self._keep = Some(thing);
    }

    /// This queue's counters.
    pub fn stats(&self) -> QueueStats {
        self.stats
    }

    /// The queue index on the device.
    pub fn index(&self) -> u32 {
        self.index
    }

    fn read_desc(ring: &DmaRegion, i: usize) -> [u64; 2] {
        // The status word first: the device writes it last (§7.1.6.2).
        let hi = ring.read_u64(i * DESC_LEN + 8);
        acquire();
        [ring.read_u64(i * DESC_LEN), hi]
    }

    fn write_desc(ring: &DmaRegion, i: usize, words: [u64; 2]) {
        ring.write_u64(i * DESC_LEN, words[0]);
        ring.write_u64(i * DESC_LEN + 8, words[1]);
    }

    /// Give the device a buffer for every empty descriptor, then move the tail.
    fn refill_rx(&mut self) {
        let rx = &mut self.rx;
        rx.bufs.take_returned(&mut rx.free);
        let mut moved = false;
        while (rx.tail + 1) % rx.size != rx.next {
            let Some(token) = rx.free.pop() else { break };
            Self::write_desc(&rx.ring, rx.tail, desc::rx_read(rx.bufs.bus(&token)));
            rx.slots[rx.tail] = Some(token);
            rx.tail = (rx.tail + 1) % rx.size;
            moved = true;
        }
        if moved {
            release();
            self.regs.write(rdt(self.index), rx.tail as u32);
        }
    }

    /// Take back the buffers of transmitted frames (DD written back), oldest first.
    fn reclaim_tx(&mut self) {
        let tx = &mut self.tx;
        for p in &mut tx.pools {
            p.bufs.take_returned(&mut p.free);
        }
        while tx.in_flight > 0 {
            // A context descriptor is done when the data descriptor after it is.
            let data = if tx.slots[tx.clean].is_none() {
                (tx.clean + 1) % tx.size
            } else {
                tx.clean
            };
            if !desc::tx_done(Self::read_desc(&tx.ring, data)) {
                break;
            }
            let span = if data == tx.clean { 1 } else { 2 };
            if let Some((token, pool)) = tx.slots[data].take() {
                tx.pools[pool].free.push(token);
            }
            tx.clean = (data + 1) % tx.size;
            tx.in_flight -= span;
        }
    }

    fn rx_ready(&self) -> bool {
        let i = self.rx.next;
        self.rx.slots[i].is_some() && RxWriteBack::decode(Self::read_desc(&self.rx.ring, i)).done()
    }
}

/// What the 82599 expects of a TSO super-frame's headers (§7.2.4.2): the IPv4 header
/// checksum zero (the device inserts one per segment), and the TCP checksum field
/// seeded with the pseudo-header sum *without* the length (the device adds each
/// segment's). The stack seeded it with the length, as for a plain offloaded checksum.
fn prepare_tso(frame: &mut [u8], c: TxContext) {
    let ip = usize::from(c.mac_len);
    let tcp = ip + usize::from(c.ip_len);
    if frame.len() < tcp + 18 {
        return;
    }
    frame[ip + 10..ip + 12].copy_from_slice(&[0, 0]);
    let word = |b: &[u8], i: usize| u32::from(u16::from_be_bytes([b[i], b[i + 1]]));
    let mut sum = 6u32; // protocol TCP, zero-padded
    for i in (ip + 12..ip + 20).step_by(2) {
        sum += word(frame, i);
    }
    while sum > 0xFFFF {
        sum = (sum & 0xFFFF) + (sum >> 16);
    }
    frame[tcp + 16..tcp + 18].copy_from_slice(&(sum as u16).to_be_bytes());
}

/// The offload context a frame needs: Ethernet + IPv4 header lengths, and for TSO the
/// TCP header length and the MSS.
fn context_for(frame: &[u8], meta: &TxMeta) -> Option<TxContext> {
    meta.checksum?;
    let ip_len = u16::from(frame.get(14)? & 0x0F) * 4;
    let tcp = 14 + usize::from(ip_len);
    let l4_len = meta
        .tso_mss
        .map_or(Some(0), |_| Some((frame.get(tcp + 12)? >> 4) * 4))?;
    Some(TxContext {
        mac_len: 14,
        ip_len,
        l4_len,
        mss: meta.tso_mss.unwrap_or(0),
    })
}

impl PacketIo for IxgbeQueue {
    type Rx = IxgbeRx;
    type Tx = IxgbeTx;

    fn capabilities(&self) -> &Capabilities {
        &self.caps
    }

    fn receive(&mut self, out: &mut Vec<IxgbeRx>, max: usize) -> usize {
        let mut n = 0;
        while n < max {
            let rx = &mut self.rx;
            let i = rx.next;
            let Some(token) = rx.slots[i].take() else {
                break;
            };
            let wb = RxWriteBack::decode(Self::read_desc(&rx.ring, i));
            if !wb.done() {
                rx.slots[i] = Some(token);
                break;
            }
            rx.next = (i + 1) % rx.size;
            let len = usize::from(wb.len);
            let whole = wb.end_of_packet() && !rx.discarding;
            rx.discarding = !wb.end_of_packet();
            if !whole || wb.frame_error() || len > rx.bufs.size() {
                // Frames spread over several buffers are not expected (buffers hold an
                // MTU-sized frame) and are dropped whole.
                rx.free.push(token);
                self.stats.rx_bad += 1;
                continue;
            }
            self.stats.rx_frames += 1;
            self.stats.rx_bytes += len as u64;
            out.push(IxgbeRx {
                buf: Buffer::new(&rx.bufs, token, len),
                meta: RxMeta {
                    checksum_verified: wb.checksums_good(),
                    gso_size: None,
                },
            });
            n += 1;
        }
        self.refill_rx();
        n
    }

    fn alloc_tx(&mut self, len: usize) -> Option<IxgbeTx> {
        let pool = if len <= self.tx.pools[SMALL].bufs.size() {
            SMALL
        } else if len <= self.tx.pools[LARGE].bufs.size().min(crate::MAX_DTALEN) {
            LARGE
        } else {
            self.stats.tx_too_long += 1;
            return None;
        };
        if self.tx.pools[pool].free.is_empty() {
            self.reclaim_tx();
        }
        let p = &mut self.tx.pools[pool];
        let Some(token) = p.free.pop() else {
            self.stats.tx_busy += 1;
            return None;
        };
        Some(IxgbeTx {
            buf: Buffer::new(&p.bufs, token, len),
            meta: TxMeta::default(),
            pool,
        })
    }

    fn transmit(&mut self, frames: &mut Vec<IxgbeTx>) {
        for mut frame in frames.drain(..) {
            let context = context_for(&frame.buf, &frame.meta);
            let tso = context.filter(|c| c.mss > 0);
            let headers = tso.map_or(0, |c| {
                prepare_tso(&mut frame.buf, c);
                usize::from(c.mac_len) + usize::from(c.ip_len) + usize::from(c.l4_len)
            });
            let pool = frame.pool;
            let (token, bus, len) = frame.buf.into_token();
            let tx = &mut self.tx;
            // Buffers are at most half the ring less one, so a context and a data
            // descriptor for each always fit.
            debug_assert!(tx.in_flight + 2 < tx.size);
            let mut popts = 0;
            if let Some(c) = context {
                if tx.context != Some(c) {
                    Self::write_desc(&tx.ring, tx.tail, desc::tx_context(c));
                    tx.slots[tx.tail] = None;
                    tx.tail = (tx.tail + 1) % tx.size;
                    tx.in_flight += 1;
                    tx.context = Some(c);
                }
                popts = desc::TX_POPTS_TXSM;
            }
            let mut cmd = desc::TX_CMD_EOP | desc::TX_CMD_RS;
            if tso.is_some() {
                // §7.2.4: the device cuts the payload after the headers into MSS-sized
                // segments, fixing up each one's IPv4 header (IXSM) and TCP checksum.
                cmd |= desc::TX_CMD_TSE;
                popts |= desc::TX_POPTS_IXSM;
            }
            Self::write_desc(
                &tx.ring,
                tx.tail,
                desc::tx_data(bus, len as u16, cmd, popts, (len - headers) as u32),
            );
            tx.slots[tx.tail] = Some((token, pool));
            tx.tail = (tx.tail + 1) % tx.size;
            tx.in_flight += 1;
            tx.unflushed = true;
            self.stats.tx_frames += 1;
            self.stats.tx_bytes += len as u64;
        }
    }

    fn flush(&mut self) {
        if self.tx.unflushed {
            release();
            self.regs.write(tdt(self.index), self.tx.tail as u32);
            self.tx.unflushed = false;
        }
        if self.tx.in_flight > self.tx.size / 2 {
            self.reclaim_tx();
        }
    }

    fn wait(&mut self, timeout: Duration) {
        // No interrupts: look at the next receive descriptor now and then.
        let end = Instant::now() + timeout.min(Duration::from_millis(1));
        while !self.rx_ready() && Instant::now() < end {
            std::thread::sleep(Duration::from_micros(20));
        }
    }
}
