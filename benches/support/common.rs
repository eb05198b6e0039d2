//! What the workloads in this folder share: the in-memory link they run over, the loop
//! that turns both ends until something is done (or nothing moves), and the counting of
//! 64-byte messages in a byte stream.
//!
//! Each binary that runs a workload includes this file as its module `common`, next to
//! the workload's own file (`rr.rs`, `conn.rs`).

use rusty::io::memory::{self, MemoryLink, DEFAULT_IN_FLIGHT_LIMIT};
use rusty::io::Capabilities;
use rusty::sim::{CLIENT_MAC, SERVER_MAC};

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
