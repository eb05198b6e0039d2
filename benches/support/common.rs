//! What the workloads in this folder share: the in-memory link they run over (and
//! [`OutOfLine`], which lets a profile tell the link's cost from an engine's), the loop
//! that turns both ends until something is done (or nothing moves), and the counting of
//! 64-byte messages in a byte stream.
//!
//! Each binary that runs a workload includes this file as its module `common`, next to
//! the workload's own file (`rr.rs`, `conn.rs`).

use std::ops::{Deref, DerefMut};
use std::time::Duration;

use rusty::io::{Capabilities, PacketIo, RxFrame, RxMeta, TxFrame, TxMeta};
use rusty_testkit::memory::{self, MemoryLink, DEFAULT_IN_FLIGHT_LIMIT};
use rusty_testkit::sim::{CLIENT_MAC, SERVER_MAC};

/// Size of a request and of a response.
pub(crate) const MESSAGE_LEN: usize = 64;
/// Loop turns in a row with no frame moving after which a run is declared stuck.
const STALL_TURNS: u32 = 1000;

/// The two ends of a fresh in-memory link, without checksum or segmentation offloads,
/// on which each side may have `frames` frames out at once (beyond the default bound).
///
/// The link's in-flight bound is its queue depth: a frame counts from the sender's
/// `alloc_tx` until the receiver drops it, and a receiver takes only a burst of frames
/// per loop turn. With K connections that each keep a message on the wire, up to K
/// frames wait in one direction, so a side's bound must grow with K. At the default
/// (4,096) the frames past it find no transmit buffer and are dropped: a SYN waits for
/// its retransmission timer (1 s, a million turns of virtual time), while the
/// connections already open keep the link busy, so a run of more than about 4,000
/// connections crawls on instead of being reported stuck.
pub(crate) fn link(frames: usize) -> (MemoryLink, MemoryLink) {
    let (a, b) = memory::pair(
        Capabilities::new(CLIENT_MAC, 1500),
        Capabilities::new(SERVER_MAC, 1500),
    );
    // The bound is per side, shared by both ends' handles: one call per side.
    a.set_in_flight_limit(DEFAULT_IN_FLIGHT_LIMIT + frames);
    b.set_in_flight_limit(DEFAULT_IN_FLIGHT_LIMIT + frames);
    (a, b)
}

/// Run `turn` (one loop turn of every party, clock included; it returns the frames
/// received) until `done` holds (true) or no frame has moved for a while (false).
pub(crate) fn turn_until<P>(
    parties: &mut P,
    mut turn: impl FnMut(&mut P) -> usize,
    mut done: impl FnMut(&P) -> bool,
) -> bool {
    let mut idle = 0;
    while !done(parties) {
        if turn(parties) == 0 {
            idle += 1;
            if idle >= STALL_TURNS {
                return false;
            }
        } else {
            idle = 0;
        }
    }
    true
}

/// Counts complete messages in a byte stream cut anywhere.
#[derive(Debug, Default)]
pub(crate) struct Messages {
    received: usize,
}

impl Messages {
    /// Take `len` more bytes; returns how many messages they completed.
    pub(crate) fn add(&mut self, len: usize) -> usize {
        self.received += len;
        let done = self.received / MESSAGE_LEN;
        self.received %= MESSAGE_LEN;
        done
    }
}

/// The link `D` behind calls that are never inlined, so that a profile of an engine's
/// loop turn shows what the link costs in functions of their own (`OutOfLine`'s
/// `PacketIo` methods, and the drop of its received frames), apart from the engine's
/// own work. The callgrind scripts subtract those functions from the server's turn.
#[derive(Debug)]
pub(crate) struct OutOfLine<D: PacketIo> {
    link: D,
    rx: Vec<D::Rx>,
    tx: Vec<D::Tx>,
}

impl<D: PacketIo> OutOfLine<D> {
    pub(crate) fn new(link: D) -> OutOfLine<D> {
        OutOfLine {
            link,
            rx: Vec::new(),
            tx: Vec::new(),
        }
    }

    /// The link itself.
    #[allow(dead_code)] // only the smoltcp server reads its link's counters
    pub(crate) fn inner(&self) -> &D {
        &self.link
    }
}

/// A received frame of an [`OutOfLine`] link; it goes back to the link in a function of
/// its own. (The frame is only ever `None` while that function drops it.)
#[derive(Debug)]
pub(crate) struct OutOfLineRx<F>(Option<F>);

impl<F> Drop for OutOfLineRx<F> {
    #[inline(never)]
    fn drop(&mut self) {
        drop(self.0.take());
    }
}

impl<F: RxFrame> Deref for OutOfLineRx<F> {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        self.0.as_deref().unwrap_or_default()
    }
}

impl<F: RxFrame> RxFrame for OutOfLineRx<F> {
    fn meta(&self) -> RxMeta {
        self.0.as_ref().map(|f| f.meta()).unwrap_or_default()
    }
}

/// A transmit buffer of an [`OutOfLine`] link.
#[derive(Debug)]
pub(crate) struct OutOfLineTx<F>(F);

impl<F: TxFrame> Deref for OutOfLineTx<F> {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.0
    }
}

impl<F: TxFrame> DerefMut for OutOfLineTx<F> {
    fn deref_mut(&mut self) -> &mut [u8] {
        &mut self.0
    }
}

impl<F: TxFrame> TxFrame for OutOfLineTx<F> {
    #[inline(never)]
    fn set_meta(&mut self, meta: TxMeta) {
        self.0.set_meta(meta);
    }
    #[inline(never)]
    fn truncate(&mut self, len: usize) {
        self.0.truncate(len);
    }
}

impl<D: PacketIo> PacketIo for OutOfLine<D> {
    type Rx = OutOfLineRx<D::Rx>;
    type Tx = OutOfLineTx<D::Tx>;

    fn capabilities(&self) -> &Capabilities {
        self.link.capabilities()
    }

    #[inline(never)]
    fn receive(&mut self, out: &mut Vec<Self::Rx>, max: usize) -> usize {
        let n = self.link.receive(&mut self.rx, max);
        out.extend(self.rx.drain(..).map(|f| OutOfLineRx(Some(f))));
        n
    }

    #[inline(never)]
    fn alloc_tx(&mut self, len: usize) -> Option<Self::Tx> {
        self.link.alloc_tx(len).map(OutOfLineTx)
    }

    #[inline(never)]
    fn transmit(&mut self, frames: &mut Vec<Self::Tx>) {
        self.tx.extend(frames.drain(..).map(|f| f.0));
        self.link.transmit(&mut self.tx);
    }

    #[inline(never)]
    fn flush(&mut self) {
        self.link.flush();
    }

    fn wait(&mut self, timeout: Duration) {
        self.link.wait(timeout);
    }

    fn pooled_bytes(&self) -> usize {
        self.link.pooled_bytes()
    }
}
