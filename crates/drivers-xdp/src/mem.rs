//! Memory shared with the kernel: the UMEM (the frames) and the four rings. This module
//! and [`crate::sys`] hold the crate's `unsafe` code; everything here is a small safe API.
//!
//! ## Who owns a frame
//!
//! The UMEM is cut into fixed-size chunks. Each chunk is represented by exactly one
//! [`Chunk`] token, made once when the UMEM is created; a token is not `Clone`. Putting
//! a chunk on the fill or TX ring consumes its token; reading the RX or completion ring
//! gives a token back for the address the kernel returned. A [`Frame`] (a received frame
//! or a transmit buffer) is made from a token, so only one frame can ever view a chunk,
//! and the kernel does not touch a chunk between handing it back and being given it
//! again. That is what makes the `&[u8]`/`&mut [u8]` views sound.
//!
//! The kernel is trusted to return only addresses it was given (it does); an address
//! outside the UMEM, or a length past its chunk, is refused (counted by the caller).

use std::ops::{Deref, DerefMut};
use std::os::fd::OwnedFd;
use std::sync::atomic::{fence, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

use crate::sys::{self, Mapping};

/// One chunk of the UMEM, owned: see the [module docs](self).
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Chunk(u64);

impl Chunk {
    #[cfg(test)]
    pub(crate) fn addr(&self) -> u64 {
        self.0
    }
}

/// The UMEM mapping and the chunks dropped frames give back. Shared (`Arc`) by the
/// queue and every frame it lends, so the memory outlives them all.
pub(crate) struct Umem {
    map: Mapping,
    chunk_size: u32,
    /// Chunks of dropped frames, waiting for the queue to take them back.
    returned: Mutex<Vec<Chunk>>,
}

// SAFETY: the mapping is plain memory; which chunk a thread may touch is decided by the
// `Chunk` tokens (see the module docs), and `returned` is behind a mutex.
unsafe impl Send for Umem {}
// SAFETY: as above: shared access only reads the base pointer and length.
unsafe impl Sync for Umem {}

impl Drop for Umem {
    fn drop(&mut self) {
        // SAFETY: the last `Arc` is gone, so no frame views the memory; the sockets that
        // registered it keep their own reference to the pages.
        unsafe { sys::munmap(&self.map) }
    }
}

impl Umem {
    /// A UMEM of `chunks` chunks of `chunk_size` bytes, and the token of each chunk;
    /// `shared`: in memory shared with processes forked afterwards.
    pub(crate) fn new(
        chunks: u32,
        chunk_size: u32,
        shared: bool,
    ) -> std::io::Result<(Arc<Umem>, Vec<Chunk>)> {
        let len = chunks as usize * chunk_size as usize;
        let map = sys::mmap(len, sys::Source::Anonymous { shared })?;
        let umem = Arc::new(Umem {
            map,
            chunk_size,
            returned: Mutex::new(Vec::new()),
        });
        let tokens = (0..u64::from(chunks))
            .map(|i| Chunk(i * u64::from(chunk_size)))
            .collect();
        Ok((umem, tokens))
    }

    /// Start address and length, for `XDP_UMEM_REG`.
    pub(crate) fn region(&self) -> (u64, u64) {
        (self.map.ptr.as_ptr() as u64, self.map.len as u64)
    }

    /// The token for the chunk holding `addr` with `len` bytes from `addr`, if that lies
    /// inside one chunk of this UMEM. Only for addresses the kernel handed back.
    fn reclaim(&self, addr: u64, len: u32) -> Option<(Chunk, u32)> {
        let size = u64::from(self.chunk_size);
        let base = addr - addr % size;
        let off = (addr - base) as u32;
        let inside = base + size <= self.map.len as u64
            && addr
                .checked_add(u64::from(len))
                .is_some_and(|end| end <= base + size);
        inside.then_some((Chunk(base), off))
    }

    /// Take back every chunk dropped frames returned.
    pub(crate) fn take_returned(&self, into: &mut Vec<Chunk>) {
        let mut r = self.returned.lock().unwrap_or_else(|p| p.into_inner());
        into.append(&mut r);
    }
}

/// A view of `len` bytes at `off` in one chunk, owning the chunk until dropped (back to
/// [`Umem::take_returned`]) or [`Frame::into_chunk`].
pub(crate) struct Frame {
    umem: Arc<Umem>,
    chunk: Option<Chunk>,
    off: u32,
    len: u32,
}

impl Frame {
    /// `len` bytes from the start of `chunk` (`len` at most the chunk size).
    pub(crate) fn new(umem: &Arc<Umem>, chunk: Chunk, len: u32) -> Frame {
        Frame {
            umem: Arc::clone(umem),
            chunk: Some(chunk),
            off: 0,
            len: len.min(umem.chunk_size),
        }
    }

    /// Shorten to `len` bytes.
    pub(crate) fn truncate(&mut self, len: usize) {
        self.len = self.len.min(len as u32);
    }

    /// (chunk, offset, length): give the chunk to a ring.
    pub(crate) fn into_chunk(mut self) -> (Chunk, u32, u32) {
        let chunk = self
            .chunk
            .take()
            .expect("a frame holds its chunk until consumed");
        (chunk, self.off, self.len)
    }

    fn ptr(&self) -> *mut u8 {
        let chunk = self.chunk.as_ref().expect("a frame holds its chunk");
        // SAFETY: chunk address + offset + length lie inside the mapping (checked when
        // the frame was made: `Frame::new` and `Umem::reclaim`).
        unsafe {
            self.umem
                .map
                .ptr
                .as_ptr()
                .add((chunk.0 + u64::from(self.off)) as usize)
        }
    }
}

impl Deref for Frame {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        // SAFETY: the frame owns its chunk (the token), so nothing else reads or writes
        // these bytes while the borrow lives; the range is inside the mapping.
        unsafe { std::slice::from_raw_parts(self.ptr(), self.len as usize) }
    }
}

impl DerefMut for Frame {
    fn deref_mut(&mut self) -> &mut [u8] {
        // SAFETY: as for `deref`, and the borrow is exclusive.
        unsafe { std::slice::from_raw_parts_mut(self.ptr(), self.len as usize) }
    }
}

impl Drop for Frame {
    fn drop(&mut self) {
        if let Some(chunk) = self.chunk.take() {
            let mut r = self.umem.returned.lock().unwrap_or_else(|p| p.into_inner());
            r.push(chunk);
        }
    }
}

/// Where a ring's fields are in its mapping (`struct xdp_ring_offset`).
#[derive(Debug, Clone, Copy)]
pub(crate) struct RingOffsets {
    pub(crate) producer: u64,
    pub(crate) consumer: u64,
    pub(crate) desc: u64,
    pub(crate) flags: u64,
}

/// A mapped ring of `size` entries of `E`.
struct RingMap {
    map: Mapping,
    producer: *const AtomicU32,
    consumer: *const AtomicU32,
    flags: *const AtomicU32,
    desc: *mut u8,
    mask: u32,
    size: u32,
}

// SAFETY: the pointers point into `map`, owned by this value; the kernel is the only
// other party, and it synchronises through the producer/consumer atomics.
unsafe impl Send for RingMap {}

impl RingMap {
    fn new(
        fd: &OwnedFd,
        pgoff: u64,
        off: RingOffsets,
        size: u32,
        entry: usize,
    ) -> std::io::Result<RingMap> {
        assert!(size.is_power_of_two());
        let len = off.desc as usize + size as usize * entry;
        let map = sys::mmap(len, sys::Source::Ring(fd, pgoff))?;
        let base = map.ptr.as_ptr();
        let check = |o: u64, n: usize| {
            if o as usize + n > len {
                Err(std::io::Error::from(std::io::ErrorKind::InvalidData))
            } else {
                Ok(())
            }
        };
        check(off.producer, 4)?;
        check(off.consumer, 4)?;
        check(off.flags, 4)?;
        // SAFETY: each offset was just checked to lie inside the mapping; the kernel
        // aligns these fields for 32-bit atomic access.
        unsafe {
            Ok(RingMap {
                producer: base.add(off.producer as usize).cast(),
                consumer: base.add(off.consumer as usize).cast(),
                flags: base.add(off.flags as usize).cast(),
                desc: base.add(off.desc as usize),
                map,
                mask: size - 1,
                size,
            })
        }
    }
    fn producer(&self) -> &AtomicU32 {
        // SAFETY: points into our live mapping (see `new`).
        unsafe { &*self.producer }
    }
    fn consumer(&self) -> &AtomicU32 {
        // SAFETY: as above.
        unsafe { &*self.consumer }
    }
    fn needs_wakeup(&self) -> bool {
        // The kernel sets the flag and then re-checks the ring; this fence orders our
        // producer update before reading the flag (libxdp uses a full barrier too).
        fence(Ordering::SeqCst);
        // SAFETY: as above.
        unsafe { &*self.flags }.load(Ordering::Relaxed) & libc::XDP_RING_NEED_WAKEUP != 0
    }
}

impl Drop for RingMap {
    fn drop(&mut self) {
        // SAFETY: the pointers into the mapping die with this value.
        unsafe { sys::munmap(&self.map) }
    }
}

/// Ring entries: chunk addresses (fill, completion) or descriptors (RX, TX).
pub(crate) trait Entry: Copy {}
impl Entry for u64 {}
impl Entry for libc::xdp_desc {}

/// One of a socket's rings, of entries `E`, seen from our side `R`: [`Producer`] (the
/// fill ring: chunks for the kernel to receive into; the TX ring: frames to send) or
/// [`Consumer`] (the RX ring: received frames; the completion ring: sent frames).
pub(crate) struct Ring<E, R> {
    ring: RingMap,
    /// Our index (producer or consumer), and the kernel's as last read.
    mine: u32,
    theirs: u32,
    _kind: std::marker::PhantomData<(E, R)>,
}

/// We produce into the ring.
pub(crate) struct Producer;
/// The kernel produces into the ring.
pub(crate) struct Consumer;

impl<E: Entry, R> Ring<E, R> {
    pub(crate) fn new(
        fd: &OwnedFd,
        which: Which,
        off: RingOffsets,
        size: u32,
    ) -> std::io::Result<Self> {
        let ring = RingMap::new(fd, which.pgoff(), off, size, std::mem::size_of::<E>())?;
        Ok(Ring {
            ring,
            mine: 0,
            theirs: 0,
            _kind: std::marker::PhantomData,
        })
    }
}

pub(crate) type FillRing = Ring<u64, Producer>;
pub(crate) type TxRing = Ring<libc::xdp_desc, Producer>;
pub(crate) type RxRing = Ring<libc::xdp_desc, Consumer>;
pub(crate) type CompRing = Ring<u64, Consumer>;

/// Which ring of a socket, for its mapping offset.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Which {
    Fill,
    Completion,
    Rx,
    Tx,
}

impl Which {
    fn pgoff(self) -> u64 {
        match self {
            Which::Fill => libc::XDP_UMEM_PGOFF_FILL_RING,
            Which::Completion => libc::XDP_UMEM_PGOFF_COMPLETION_RING,
            Which::Rx => libc::XDP_PGOFF_RX_RING as u64,
            Which::Tx => libc::XDP_PGOFF_TX_RING as u64,
        }
    }
}

impl<E: Entry> Ring<E, Producer> {
    /// Slots free for us to write, re-reading the kernel's consumer index when the
    /// cached one shows fewer than `want`.
    fn room(&mut self, want: u32) -> u32 {
        let free = self.ring.size - self.mine.wrapping_sub(self.theirs);
        if free >= want {
            return free;
        }
        self.theirs = self.ring.consumer().load(Ordering::Acquire);
        self.ring.size - self.mine.wrapping_sub(self.theirs)
    }

    /// Write `e` at the next slot (callers checked [`Self::room`]); published by
    /// [`Self::publish`].
    fn put(&mut self, e: E) {
        let slot = (self.mine & self.ring.mask) as usize;
        // SAFETY: `slot` < size, and entries of type `E` make up the descriptor array;
        // the kernel reads no slot between its consumer index and our producer index,
        // and the caller made sure this slot is in that span (`room`).
        unsafe { self.ring.desc.cast::<E>().add(slot).write(e) };
        self.mine = self.mine.wrapping_add(1);
    }

    /// Publish everything written so far.
    pub(crate) fn publish(&mut self) {
        self.ring.producer().store(self.mine, Ordering::Release);
    }

    /// Entries the kernel has not taken yet.
    pub(crate) fn pending(&self) -> u32 {
        self.mine
            .wrapping_sub(self.ring.consumer().load(Ordering::Acquire))
    }

    pub(crate) fn needs_wakeup(&self) -> bool {
        self.ring.needs_wakeup()
    }
}

impl FillRing {
    /// Give the kernel up to `max` chunks from the end of `chunks`, as many as fit;
    /// returns how many.
    pub(crate) fn fill(&mut self, chunks: &mut Vec<Chunk>, max: u32) -> u32 {
        let want = max.min(chunks.len() as u32);
        let n = self.room(want).min(want);
        for _ in 0..n {
            let chunk = chunks.pop().expect("counted above");
            self.put(chunk.0);
        }
        if n > 0 {
            self.publish();
        }
        n
    }
}

impl TxRing {
    /// Queue `frame` for sending (published by [`Ring::publish`]), or give it back
    /// when the ring is full.
    pub(crate) fn push(&mut self, frame: Frame) -> Result<(), Frame> {
        if self.room(1) == 0 {
            return Err(frame);
        }
        let (chunk, off, len) = frame.into_chunk();
        self.put(libc::xdp_desc {
            addr: chunk.0 + u64::from(off),
            len,
            options: 0,
        });
        Ok(())
    }
}

impl<E: Entry> Ring<E, Consumer> {
    /// Call `each` on up to `max` published entries and release them to the kernel;
    /// returns how many.
    fn consume(&mut self, max: usize, mut each: impl FnMut(E)) -> usize {
        if self.theirs.wrapping_sub(self.mine) < max as u32 {
            self.theirs = self.ring.producer().load(Ordering::Acquire);
        }
        let n = self.theirs.wrapping_sub(self.mine).min(max as u32);
        for i in 0..n {
            let slot = (self.mine.wrapping_add(i) & self.ring.mask) as usize;
            // SAFETY: `slot` < size, and the kernel published this slot (the Acquire
            // load of its producer index above, now or on an earlier call).
            each(unsafe { self.ring.desc.cast::<E>().add(slot).read() });
        }
        if n > 0 {
            self.mine = self.mine.wrapping_add(n);
            self.ring.consumer().store(self.mine, Ordering::Release);
        }
        n as usize
    }
}

impl RxRing {
    /// Take up to `max` received frames: `Ok(frame)` for good descriptors; `Err` with
    /// the chunk, when it can be identified, for a descriptor whose length does not fit.
    pub(crate) fn take(
        &mut self,
        umem: &Arc<Umem>,
        max: usize,
        mut each: impl FnMut(Result<Frame, Option<Chunk>>),
    ) -> usize {
        self.consume(max, |d| match umem.reclaim(d.addr, d.len) {
            Some((chunk, off)) => each(Ok(Frame {
                umem: Arc::clone(umem),
                chunk: Some(chunk),
                off,
                len: d.len,
            })),
            None => each(Err(umem.reclaim(d.addr, 0).map(|(c, _)| c))),
        })
    }
}

impl CompRing {
    /// Move every completed chunk into `into`; returns how many (addresses outside the
    /// UMEM, which the kernel never returns, are skipped).
    pub(crate) fn reap(&mut self, umem: &Umem, into: &mut Vec<Chunk>) -> usize {
        self.consume(usize::MAX, |addr| {
            into.extend(umem.reclaim(addr, 0).map(|(chunk, _)| chunk));
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_cover_the_umem_and_frames_return_their_chunk() {
        let (umem, mut chunks) = Umem::new(4, 2048, false).unwrap();
        assert_eq!(
            chunks.iter().map(Chunk::addr).collect::<Vec<_>>(),
            vec![0, 2048, 4096, 6144]
        );
        let mut f = Frame::new(&umem, chunks.pop().unwrap(), 100);
        f.fill(9);
        f.truncate(60);
        assert_eq!(f.len(), 60);
        assert!(f.iter().all(|&b| b == 9));
        drop(f);
        let mut back = Vec::new();
        umem.take_returned(&mut back);
        assert_eq!(back, vec![Chunk(6144)]);
        // Reclaiming checks bounds.
        assert_eq!(umem.reclaim(2048 + 256, 1500), Some((Chunk(2048), 256)));
        assert_eq!(umem.reclaim(2048 + 256, 1900), None, "past the chunk");
        assert_eq!(umem.reclaim(4 * 2048, 0), None, "past the UMEM");
    }
}
