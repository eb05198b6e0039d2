//! Fault injection: a decorator around any [`PacketIo`] queue that loses, duplicates,
//! corrupts, delays and reorders frames on their way out, driven by a seeded PRNG and the
//! clock it is given, so a simulation with the same seed and inputs replays exactly.
//!
//! Faults apply on the transmit path only; received frames pass through untouched. Frames
//! held back (delay, jitter, reorder) are released from inside the next `transmit`,
//! `flush` or `receive` call made at or after their release time; [`FaultInjector::next_release`]
//! tells a simulator when that is, so it can advance virtual time to it.
//!
//! Corruption models the errors that slip past the Ethernet FCS and must be caught by the
//! IPv4, TCP, ICMP and ICMPv6 checksums: one bit is flipped inside the IPv4 or IPv6
//! packet (its header or payload, never the Ethernet header or padding). IPv6's header
//! has no checksum: a flip in its addresses or lengths is caught by the upper layer's
//! (its pseudo-header covers them), one in its traffic class, flow label or hop limit
//! goes unnoticed, as it would on a real link (Neighbor Discovery checks its hop limit).
//! Frames that are neither (ARP, which has no checksum of its own) and frames whose
//! checksum the device is asked to compute (the flip would happen before the device
//! sums, and go unnoticed) are never corrupted.

use crate::rng::Rng;
use std::cmp::Ordering;
use std::collections::BinaryHeap;
use std::ops::{Deref, DerefMut};
use std::time::Duration;

use smoltcp::wire::{EthernetProtocol, Ipv4Packet, Ipv6Packet};

use super::{Capabilities, Doorbell, PacketIo, TxFrame, TxMeta, ETHERNET_HEADER_LEN};
use crate::time::{Clock, Instant};

/// What to do to transmitted frames. Probabilities are per frame, in `0.0..=1.0`.
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub struct FaultConfig {
    /// Drop the frame.
    pub loss: f64,
    /// After a dropped frame, drop the next one too with this probability instead of
    /// `loss`, if it comes within [`BURST_SPAN`] (a two-state Gilbert model in time:
    /// losses come in bursts of mean length 1 / (1 − burst) frames, as when a queue
    /// overflows, and a sender that backs off for longer meets the base loss again).
    pub burst: f64,
    /// Drop exactly the frame with this number (counting from 0, in the order frames
    /// reach the injector), for tests that need one known loss.
    pub drop_frame: Option<u64>,
    /// Also send a copy of the frame.
    pub duplicate: f64,
    /// Hold the frame an extra `reorder_delay`, so later frames overtake it.
    pub reorder: f64,
    /// Flip one bit of the frame's IPv4 or IPv6 packet.
    pub corrupt: f64,
    /// Hold every frame this long.
    pub delay: Duration,
    /// Plus a uniformly random extra in `0..jitter` (frames may overtake each other).
    pub jitter: Duration,
    /// Extra hold for reordered frames.
    pub reorder_delay: Duration,
}

impl FaultConfig {
    /// No faults: every frame passes at once.
    pub fn none() -> FaultConfig {
        FaultConfig {
            loss: 0.0,
            burst: 0.0,
            drop_frame: None,
            duplicate: 0.0,
            reorder: 0.0,
            corrupt: 0.0,
            delay: Duration::ZERO,
            jitter: Duration::ZERO,
            reorder_delay: Duration::ZERO,
        }
    }

    /// The frame loss probability: `self` with [`FaultConfig::loss`] set.
    #[must_use]
    pub fn with_loss(mut self, loss: f64) -> FaultConfig {
        self.loss = loss;
        self
    }

    /// The probability of a loss right after a loss (see [`FaultConfig::burst`]): `self` with [`FaultConfig::burst`] set.
    #[must_use]
    pub fn with_burst(mut self, burst: f64) -> FaultConfig {
        self.burst = burst;
        self
    }

    /// The duplication probability: `self` with [`FaultConfig::duplicate`] set.
    #[must_use]
    pub fn with_duplicate(mut self, duplicate: f64) -> FaultConfig {
        self.duplicate = duplicate;
        self
    }

    /// The reordering probability: `self` with [`FaultConfig::reorder`] set.
    #[must_use]
    pub fn with_reorder(mut self, reorder: f64) -> FaultConfig {
        self.reorder = reorder;
        self
    }

    /// The corruption probability: `self` with [`FaultConfig::corrupt`] set.
    #[must_use]
    pub fn with_corrupt(mut self, corrupt: f64) -> FaultConfig {
        self.corrupt = corrupt;
        self
    }

    /// The hold every frame gets: `self` with [`FaultConfig::delay`] set.
    #[must_use]
    pub fn with_delay(mut self, delay: Duration) -> FaultConfig {
        self.delay = delay;
        self
    }

    /// The bound of the random extra hold: `self` with [`FaultConfig::jitter`] set.
    #[must_use]
    pub fn with_jitter(mut self, jitter: Duration) -> FaultConfig {
        self.jitter = jitter;
        self
    }

    /// The extra hold of reordered frames: `self` with [`FaultConfig::reorder_delay`] set.
    #[must_use]
    pub fn with_reorder_delay(mut self, reorder_delay: Duration) -> FaultConfig {
        self.reorder_delay = reorder_delay;
        self
    }

    /// `self`, dropping exactly frame number `n` (see [`FaultConfig::drop_frame`]).
    #[must_use]
    pub fn with_drop_frame(mut self, n: u64) -> FaultConfig {
        self.drop_frame = Some(n);
        self
    }
}

impl Default for FaultConfig {
    fn default() -> FaultConfig {
        FaultConfig::none()
    }
}

/// How long after a dropped frame the next one may still fall in the same burst.
pub const BURST_SPAN: Duration = Duration::from_millis(10);

/// How many of each fault were applied.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct FaultStats {
    /// Frames handed to the wrapped queue (duplicates included).
    pub forwarded: u64,
    /// Frames dropped.
    pub lost: u64,
    /// Frames sent twice.
    pub duplicated: u64,
    /// Frames with a bit flipped.
    pub corrupted: u64,
    /// Frames held back by `delay`/`jitter` (reordered frames are counted separately).
    pub delayed: u64,
    /// Frames held back so later ones overtook them.
    pub reordered: u64,
    /// Duplicates not sent because the wrapped queue had no buffer.
    pub duplicate_alloc_failures: u64,
}

/// The transmit buffer of a [`FaultInjector`]: the wrapped queue's buffer, plus the offload
/// request the stack made, so a duplicate can carry the same request.
#[derive(Debug)]
pub struct FaultTx<T> {
    frame: T,
    meta: Option<TxMeta>,
}

impl<T: TxFrame> Deref for FaultTx<T> {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.frame
    }
}

impl<T: TxFrame> DerefMut for FaultTx<T> {
    fn deref_mut(&mut self) -> &mut [u8] {
        &mut self.frame
    }
}

impl<T: TxFrame> TxFrame for FaultTx<T> {
    fn set_meta(&mut self, meta: TxMeta) {
        self.meta = Some(meta);
        self.frame.set_meta(meta);
    }
    fn truncate(&mut self, len: usize) {
        self.frame.truncate(len);
    }
}

/// A frame waiting for its release time; the heap pops the earliest, ties in send order.
struct Held<T> {
    release: Instant,
    seq: u64,
    frame: T,
}

impl<T> Held<T> {
    fn key(&self) -> (Instant, u64) {
        (self.release, self.seq)
    }
}

impl<T> PartialEq for Held<T> {
    fn eq(&self, other: &Self) -> bool {
        self.key() == other.key()
    }
}

impl<T> Eq for Held<T> {}

impl<T> PartialOrd for Held<T> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl<T> Ord for Held<T> {
    fn cmp(&self, other: &Self) -> Ordering {
        // Reversed: `BinaryHeap` is a max-heap and we want the earliest first.
        other.key().cmp(&self.key())
    }
}

/// Fault-injecting decorator. See the module docs.
pub struct FaultInjector<D: PacketIo, C: Clock> {
    inner: D,
    clock: C,
    config: FaultConfig,
    rng: Rng,
    held: BinaryHeap<Held<D::Tx>>,
    seq: u64,
    /// Burst handed to the wrapped queue; kept to reuse its allocation.
    out: Vec<D::Tx>,
    /// Frames that reached the injector.
    frames: u64,
    /// A burst of losses is on until then (see [`FaultConfig::burst`]).
    burst_until: Option<Instant>,
    stats: FaultStats,
}

impl<D: PacketIo, C: Clock> FaultInjector<D, C> {
    /// Faults on `inner`'s transmit path per `config`, drawn from a generator seeded with
    /// `seed` (the same seed replays the same faults).
    pub fn new(inner: D, clock: C, config: FaultConfig, seed: u64) -> FaultInjector<D, C> {
        FaultInjector {
            inner,
            clock,
            config,
            rng: Rng::new(seed),
            held: BinaryHeap::new(),
            seq: 0,
            out: Vec::new(),
            frames: 0,
            burst_until: None,
            stats: FaultStats::default(),
        }
    }

    /// The faults this injector applies.
    pub fn config(&self) -> &FaultConfig {
        &self.config
    }

    /// Change the faults from now on; frames already held keep their release times.
    pub fn set_config(&mut self, config: FaultConfig) {
        self.config = config;
    }

    /// What it did so far.
    pub fn stats(&self) -> FaultStats {
        self.stats
    }

    /// When the earliest held frame is due, if any is held.
    pub fn next_release(&self) -> Option<Instant> {
        self.held.peek().map(|h| h.release)
    }

    /// Frames held back now.
    pub fn held(&self) -> usize {
        self.held.len()
    }

    /// The decorated queue.
    pub fn inner(&self) -> &D {
        &self.inner
    }

    /// The decorated queue.
    pub fn inner_mut(&mut self) -> &mut D {
        &mut self.inner
    }

    /// Move due held frames to the outgoing burst; true if there were any.
    fn release_due(&mut self, now: Instant) -> bool {
        let mut any = false;
        while self.held.peek().is_some_and(|h| h.release <= now) {
            if let Some(h) = self.held.pop() {
                self.out.push(h.frame);
                any = true;
            }
        }
        any
    }

    fn send_out(&mut self) {
        if !self.out.is_empty() {
            self.stats.forwarded += self.out.len() as u64;
            self.inner.transmit(&mut self.out);
            // The contract says `transmit` drains; make sure nothing is sent twice if not.
            self.out.clear();
        }
    }

    /// Send `frame` now or hold it, per the delay, jitter and reorder settings.
    fn schedule(&mut self, frame: D::Tx, now: Instant, reorder: bool) {
        let mut hold = self.config.delay;
        if !self.config.jitter.is_zero() {
            hold += self.config.jitter.mul_f64(self.rng.unit());
        }
        if reorder {
            hold += self.config.reorder_delay;
            self.stats.reordered += 1;
        } else if !hold.is_zero() {
            self.stats.delayed += 1;
        }
        if hold.is_zero() {
            self.out.push(frame);
        } else {
            self.seq += 1;
            self.held.push(Held {
                release: now + hold,
                seq: self.seq,
                frame,
            });
        }
    }

    fn process(&mut self, tx: FaultTx<D::Tx>, now: Instant) {
        let FaultTx { mut frame, meta } = tx;
        let number = self.frames;
        self.frames += 1;
        let p = if self.burst_until.is_some_and(|t| now < t) {
            self.config.burst
        } else {
            self.config.loss
        };
        if self.config.drop_frame == Some(number) || self.rng.chance(p) {
            self.stats.lost += 1;
            self.burst_until = (self.config.burst > 0.0).then(|| now + BURST_SPAN);
            return;
        }
        self.burst_until = None;
        if self.rng.chance(self.config.duplicate) {
            match self.inner.alloc_tx(frame.len()) {
                Some(mut copy) => {
                    copy.copy_from_slice(&frame);
                    if let Some(m) = meta {
                        copy.set_meta(m);
                    }
                    self.stats.duplicated += 1;
                    self.schedule(copy, now, false);
                }
                None => self.stats.duplicate_alloc_failures += 1,
            }
        }
        let offloaded = meta.is_some_and(|m| m.checksum.is_some());
        if self.rng.chance(self.config.corrupt)
            && !offloaded
            && flip_ip_bit(&mut frame, &mut self.rng)
        {
            self.stats.corrupted += 1;
        }
        let reorder = self.rng.chance(self.config.reorder);
        self.schedule(frame, now, reorder);
    }
}

/// Flip one random bit of the IPv4 or IPv6 packet in `frame`; false if it is neither.
fn flip_ip_bit(frame: &mut [u8], rng: &mut Rng) -> bool {
    let ethertype = match crate::ethernet::parse(frame) {
        Ok((eth, payload)) if !payload.is_empty() => eth.ethertype,
        _ => return false,
    };
    // Stay inside the packet proper when its length is readable: bits flipped in the
    // Ethernet padding would be harmless and undetected, which teaches nothing.
    let ip = &frame[ETHERNET_HEADER_LEN..];
    let len = match ethertype {
        EthernetProtocol::Ipv4 => Ipv4Packet::new_checked(ip).map(|p| usize::from(p.total_len())),
        EthernetProtocol::Ipv6 => Ipv6Packet::new_checked(ip).map(|p| p.total_len()),
        _ => return false,
    };
    let end = len.map_or(frame.len(), |len| ETHERNET_HEADER_LEN + len);
    let bits = (end - ETHERNET_HEADER_LEN) as u64 * 8;
    let bit = rng.below(bits) as usize;
    frame[ETHERNET_HEADER_LEN + bit / 8] ^= 1 << (bit % 8);
    true
}

impl<D: PacketIo, C: Clock> PacketIo for FaultInjector<D, C> {
    type Rx = D::Rx;
    type Tx = FaultTx<D::Tx>;

    fn capabilities(&self) -> &Capabilities {
        self.inner.capabilities()
    }

    fn receive(&mut self, out: &mut Vec<D::Rx>, max: usize) -> usize {
        if self.release_due(self.clock.now()) {
            self.send_out();
            self.inner.flush();
        }
        self.inner.receive(out, max)
    }

    fn alloc_tx(&mut self, len: usize) -> Option<Self::Tx> {
        self.inner
            .alloc_tx(len)
            .map(|frame| FaultTx { frame, meta: None })
    }

    fn transmit(&mut self, frames: &mut Vec<Self::Tx>) {
        let now = self.clock.now();
        self.release_due(now);
        for tx in frames.drain(..) {
            self.process(tx, now);
        }
        self.send_out();
    }

    fn flush(&mut self) {
        self.release_due(self.clock.now());
        self.send_out();
        self.inner.flush();
    }

    fn set_doorbell(&mut self, bell: Doorbell) {
        self.inner.set_doorbell(bell);
    }

    fn pooled_bytes(&self) -> usize {
        self.inner.pooled_bytes()
    }

    fn wait(&mut self, timeout: std::time::Duration) {
        // Wake in time to release held frames.
        let timeout = match self.next_release() {
            Some(t) => timeout.min(t.saturating_duration_since(self.clock.now())),
            None => timeout,
        };
        self.inner.wait(timeout);
    }
}
