//! An ingress queue over one NotifRing: what gxio's `gxio_mpipe_iqueue_t` and its
//! `static inline` functions do (`gxio/mpipe.h`), in Rust, for one worker.
//!
//! The ring is `entries` idescs of 64 bytes. Its first 8 bytes are not a descriptor but
//! the tail: the index after the last idesc the hardware wrote, which
//! `gxio_mpipe_iqueue_init` seeds with 1 and the hardware keeps up to date. The head
//! starts at 1, and advancing wraps past the end to 1, never 0
//! (`gxio_mpipe_iqueue_advance`: `(head & mask) + (head >> log2)`), so entry 0 holds
//! no descriptor. Peeking counts the idescs from the head up to the tail, or up to the
//! ring's end when the tail has wrapped (`gxio_mpipe_iqueue_try_peek`). Consuming an
//! idesc advances the head and returns a credit to the ring and to the idesc's bucket
//! (`gxio_mpipe_iqueue_consume`), which lets the hardware deliver another.

use std::sync::Arc;

use crate::desc::{Idesc, IDESC_LEN};
use crate::gxio::{Gxio, GxioError};
use crate::mem::{acquire, Region};

/// NotifRing sizes the hardware takes, in idescs.
pub const RING_ENTRIES: [usize; 4] = [128, 512, 2048, 65536];

/// One NotifRing, read by one worker.
pub struct Iqueue {
    gxio: Arc<dyn Gxio>,
    mem: Region,
    ring: u32,
    entries: usize,
    head: usize,
}

impl Iqueue {
    /// `gxio_mpipe_iqueue_init`: seed the tail word, then hand `mem` to NotifRing
    /// `ring`.
    pub fn init(gxio: Arc<dyn Gxio>, ring: u32, mem: Region) -> Result<Iqueue, GxioError> {
        let entries = mem.len() / IDESC_LEN;
        if !RING_ENTRIES.contains(&entries) || !mem.len().is_multiple_of(IDESC_LEN) {
            return Err(GxioError::new(
                "gxio_mpipe_iqueue_init",
                0,
                format!("{} bytes is no NotifRing size", mem.len()),
            ));
        }
        mem.store(0, 1);
        gxio.init_notif_ring(ring, &mem)?;
        Ok(Iqueue {
            gxio,
            mem,
            ring,
            entries,
            head: 1,
        })
    }

    /// The NotifRing's index.
    pub fn ring(&self) -> u32 {
        self.ring
    }

    /// `gxio_mpipe_iqueue_try_peek`: how many idescs from the head are ready
    /// (contiguous in the ring; 0 when none).
    pub fn try_peek(&self) -> usize {
        let tail = self.mem.load(0) as usize;
        let avail = if tail >= self.head {
            tail - self.head
        } else {
            self.entries - self.head
        };
        if avail > 0 {
            acquire();
        }
        avail.min(self.entries - self.head)
    }

    /// The idesc `k` places after the head (`k` below what [`Iqueue::try_peek`] said).
    pub fn idesc(&self, k: usize) -> Idesc {
        let off = (self.head + k) * IDESC_LEN;
        Idesc::decode(
            self.mem.load(off),
            self.mem.load(off + 8),
            self.mem.load(off + 56),
        )
    }

    /// `gxio_mpipe_iqueue_consume`: step over the head idesc (`d`) and return its ring
    /// and bucket credit.
    pub fn consume(&mut self, d: &Idesc) {
        let head = self.head + 1;
        let log2 = self.entries.trailing_zeros();
        self.head = (head & (self.entries - 1)) + (head >> log2);
        self.gxio
            .credit(Some(self.ring), Some(u32::from(d.bucket_id)), 1);
    }
}
