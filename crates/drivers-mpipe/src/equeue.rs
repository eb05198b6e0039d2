//! An egress queue over one eDMA ring: what gxio's `gxio_mpipe_equeue_t` and its
//! `static inline` functions do (`gxio/mpipe.h`, `gxio/dma_queue.h`), in Rust, for one
//! worker (so without gxio's lock-free sharing between threads).
//!
//! Slots are numbered from 0 without wrapping (gxio's 63-bit "completion slots");
//! slot `s` is ring entry `s mod entries`. A slot may be reserved while fewer than
//! `entries` reserved slots are not completed (65535 for a 65536-entry ring: the
//! completion count is 16 bits, `__gxio_dma_queue_init`). Writing an edesc writes word
//! 1, then word 0 carrying the generation bit, which is 1 on the first pass over the
//! ring and flips on every wrap (`gxio_mpipe_equeue_put_at`): the hardware takes an
//! entry whose `gen` is the one it expects, so it never reads a half-written edesc.

use std::sync::Arc;

use crate::desc::{Edesc, EDESC_LEN};
use crate::gxio::{Gxio, GxioError};
use crate::mem::{release, Region};

/// eDMA ring sizes the hardware takes, in edescs.
pub const RING_ENTRIES: [usize; 4] = [512, 2048, 8192, 65536];

/// One eDMA ring, written by one worker.
pub struct Equeue {
    gxio: Arc<dyn Gxio>,
    mem: Region,
    ering: u32,
    entries: usize,
    credits: u64,
    /// The next slot to reserve.
    next: u64,
    /// Completed slots, as last read.
    completed: u64,
}

impl Equeue {
    /// `gxio_mpipe_equeue_init`: hand `mem` to eDMA ring `ering`, sending on `channel`.
    pub fn init(
        gxio: Arc<dyn Gxio>,
        ering: u32,
        channel: u32,
        mem: Region,
    ) -> Result<Equeue, GxioError> {
        let entries = mem.len() / EDESC_LEN;
        if !RING_ENTRIES.contains(&entries) || !mem.len().is_multiple_of(EDESC_LEN) {
            return Err(GxioError::new(
                "gxio_mpipe_equeue_init",
                0,
                format!("{} bytes is no eDMA ring size", mem.len()),
            ));
        }
        gxio.init_edma_ring(ering, channel, &mem)?;
        Ok(Equeue {
            gxio,
            mem,
            ering,
            entries,
            credits: entries.min(65535) as u64,
            next: 0,
            completed: 0,
        })
    }

    /// Edescs the ring holds.
    pub fn entries(&self) -> usize {
        self.entries
    }

    /// `gxio_mpipe_equeue_try_reserve`: `n` consecutive slots, the first one's number,
    /// or `None` while the ring is full.
    pub fn try_reserve(&mut self, n: u64) -> Option<u64> {
        if self.next + n - self.completed > self.credits {
            self.completed = self.gxio.edma_completed(self.ering);
            if self.next + n - self.completed > self.credits {
                return None;
            }
        }
        let slot = self.next;
        self.next += n;
        Some(slot)
    }

    /// `gxio_mpipe_equeue_put_at`: write `e` into reserved slot `slot`.
    pub fn put_at(&mut self, e: &Edesc, slot: u64) {
        let [w0, w1] = e.encode();
        let entries = self.entries as u64;
        let gen = u64::from((slot / entries).is_multiple_of(2));
        let off = (slot % entries) as usize * EDESC_LEN;
        self.mem.store(off + 8, w1);
        release();
        self.mem.store(off, w0 | gen);
    }

    /// `gxio_mpipe_equeue_is_complete`: whether the hardware is done with `slot` (its
    /// buffer may be reused).
    pub fn is_complete(&mut self, slot: u64) -> bool {
        if slot < self.completed {
            return true;
        }
        self.completed = self.gxio.edma_completed(self.ering);
        slot < self.completed
    }

    /// `gxio_mpipe_equeue_flush`: make the writes visible and wake the ring.
    pub fn flush(&mut self) {
        release();
        self.gxio.edma_post(self.ering);
    }
}
