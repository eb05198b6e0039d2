//! [`DmaRegion`]: memory a device reads and writes by bus address. This module holds
//! the crate's `unsafe` memory access; everything it offers is a small safe API.
//!
//! The device writes descriptors and received frames while the driver runs, so every
//! access the driver makes to memory the device may be writing is a volatile read or
//! write of a whole word, ordered with fences where the datasheet's protocol needs it
//! (read a descriptor's DD bit, then its other fields; write a descriptor, then the tail
//! register). Frame bytes are copied in and out, or viewed by the one owner of a buffer
//! the device has handed back and will not touch until it is given the buffer again.

#![allow(unsafe_code)]

use std::alloc::{self, Layout};
use std::ptr::NonNull;
use std::sync::atomic::{fence, Ordering};
use std::sync::Arc;

use crate::hw::DmaBacking;

/// A contiguous piece of DMA memory: where the CPU sees it and where the device does.
/// Cloning makes another handle on the same memory (the device and the driver both
/// hold one; that aliasing is what DMA is).
#[derive(Clone)]
pub struct DmaRegion {
    ptr: NonNull<u8>,
    len: usize,
    bus: u64,
    _backing: Arc<dyn DmaBacking>,
}

// SAFETY: the region is plain memory; every access below is bounds-checked, and the
// crate's ownership rules (one owner per packet buffer, descriptors accessed as whole
// volatile words) keep concurrent use to what DMA hardware does anyway.
unsafe impl Send for DmaRegion {}
// SAFETY: as above.
unsafe impl Sync for DmaRegion {}

impl std::fmt::Debug for DmaRegion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "DmaRegion({} bytes at bus {:#x})", self.len, self.bus)
    }
}

/// Heap memory standing in for DMA memory (the model's arena, tests).
struct HeapBacking {
    ptr: NonNull<u8>,
    layout: Layout,
}

// SAFETY: owned heap memory, freed once, when the last region handle goes.
unsafe impl Send for HeapBacking {}
// SAFETY: as above.
unsafe impl Sync for HeapBacking {}

impl Drop for HeapBacking {
    fn drop(&mut self) {
        // SAFETY: allocated with exactly this layout in `DmaRegion::heap`.
        unsafe { alloc::dealloc(self.ptr.as_ptr(), self.layout) }
    }
}

impl DmaRegion {
    /// A region over memory someone else mapped.
    ///
    /// # Safety
    ///
    /// `ptr..ptr + len` must be mapped, readable and writable, aligned to 8 bytes, and
    /// stay so while `backing` lives; the device must see it at `bus..bus + len`.
    pub unsafe fn from_raw(
        ptr: NonNull<u8>,
        len: usize,
        bus: u64,
        backing: Arc<dyn DmaBacking>,
    ) -> DmaRegion {
        DmaRegion {
            ptr,
            len,
            bus,
            _backing: backing,
        }
    }

    /// `len` zeroed bytes of heap memory aligned to `align` (at least 8), which a model
    /// device addresses at `bus`.
    pub fn heap(len: usize, align: usize, bus: u64) -> DmaRegion {
        let layout = Layout::from_size_align(len.max(1), align.max(8))
            .expect("a DMA region size and a power-of-two alignment");
        // SAFETY: the layout has a non-zero size.
        let raw = unsafe { alloc::alloc_zeroed(layout) };
        let ptr = NonNull::new(raw).unwrap_or_else(|| alloc::handle_alloc_error(layout));
        DmaRegion {
            ptr,
            len,
            bus,
            _backing: Arc::new(HeapBacking { ptr, layout }),
        }
    }

    /// Bytes in the region.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the region is empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The bus address of byte `off`.
    pub fn bus(&self, off: usize) -> u64 {
        assert!(
            off <= self.len,
            "offset {off} past a {}-byte region",
            self.len
        );
        self.bus + off as u64
    }

    /// A handle on `len` bytes from `off`, sharing the memory.
    pub fn sub(&self, off: usize, len: usize) -> DmaRegion {
        self.check(off, len, 1);
        DmaRegion {
            // SAFETY: in bounds (checked).
            ptr: unsafe { NonNull::new_unchecked(self.ptr.as_ptr().add(off)) },
            len,
            bus: self.bus + off as u64,
            _backing: Arc::clone(&self._backing),
        }
    }

    fn check(&self, off: usize, len: usize, align: usize) {
        assert!(
            off.checked_add(len).is_some_and(|end| end <= self.len),
            "{len} bytes at {off} past a {}-byte region",
            self.len
        );
        assert!(
            (self.ptr.as_ptr() as usize + off).is_multiple_of(align),
            "unaligned access at {off}"
        );
    }

    /// The 32-bit word at `off` (4-aligned), read once (volatile).
    pub fn read_u32(&self, off: usize) -> u32 {
        self.check(off, 4, 4);
        // SAFETY: in bounds and aligned (checked); memory the device may write is read
        // with one volatile access.
        u32::from_le(unsafe { std::ptr::read_volatile(self.ptr.as_ptr().add(off).cast::<u32>()) })
    }

    /// The 64-bit word at `off` (8-aligned), read once (volatile).
    pub fn read_u64(&self, off: usize) -> u64 {
        self.check(off, 8, 8);
        // SAFETY: as for `read_u32`.
        u64::from_le(unsafe { std::ptr::read_volatile(self.ptr.as_ptr().add(off).cast::<u64>()) })
    }

    /// Write the 32-bit word at `off` (4-aligned) once (volatile).
    pub fn write_u32(&self, off: usize, value: u32) {
        self.check(off, 4, 4);
        // SAFETY: in bounds and aligned (checked).
        unsafe { std::ptr::write_volatile(self.ptr.as_ptr().add(off).cast::<u32>(), value.to_le()) }
    }

    /// Write the 64-bit word at `off` (8-aligned) once (volatile).
    pub fn write_u64(&self, off: usize, value: u64) {
        self.check(off, 8, 8);
        // SAFETY: in bounds and aligned (checked).
        unsafe { std::ptr::write_volatile(self.ptr.as_ptr().add(off).cast::<u64>(), value.to_le()) }
    }

    /// Copy `src` into the region at `off`.
    pub fn copy_from(&self, off: usize, src: &[u8]) {
        self.check(off, src.len(), 1);
        // SAFETY: in bounds (checked); `src` is ordinary memory, not this region.
        unsafe {
            std::ptr::copy_nonoverlapping(src.as_ptr(), self.ptr.as_ptr().add(off), src.len())
        }
    }

    /// Copy `dst.len()` bytes from the region at `off` into `dst`.
    pub fn copy_to(&self, off: usize, dst: &mut [u8]) {
        self.check(off, dst.len(), 1);
        // SAFETY: in bounds (checked).
        unsafe {
            std::ptr::copy_nonoverlapping(self.ptr.as_ptr().add(off), dst.as_mut_ptr(), dst.len())
        }
    }

    /// A view of `len` bytes at `off`.
    ///
    /// # Safety
    ///
    /// Nothing (the device, another handle) may write those bytes while the view lives.
    pub unsafe fn slice(&self, off: usize, len: usize) -> &[u8] {
        self.check(off, len, 1);
        std::slice::from_raw_parts(self.ptr.as_ptr().add(off), len)
    }

    /// A mutable view of `len` bytes at `off`.
    ///
    /// # Safety
    ///
    /// Nothing else (the device, another handle) may read or write those bytes while
    /// the view lives.
    #[allow(clippy::mut_from_ref)]
    pub unsafe fn slice_mut(&self, off: usize, len: usize) -> &mut [u8] {
        self.check(off, len, 1);
        std::slice::from_raw_parts_mut(self.ptr.as_ptr().add(off), len)
    }
}

/// Packet buffers: one region cut into equal buffers, each represented by exactly one
/// [`BufToken`], which is not `Clone`. Handing a buffer to the device (in a descriptor)
/// takes its token; the device handing it back (DD) gives the token back. A [`Buffer`]
/// view is made from a token, so only one view of a buffer exists, and never while
/// the device owns it: that is what makes its `&[u8]`/`&mut [u8]` sound.
pub struct Buffers {
    region: DmaRegion,
    size: usize,
    /// Tokens of dropped views, waiting for the queue to take them back.
    returned: std::sync::Mutex<Vec<BufToken>>,
}

/// The right to one buffer of a [`Buffers`]; see there.
#[derive(Debug, PartialEq, Eq)]
pub struct BufToken(u32);

impl Buffers {
    /// `region` cut into `region.len() / size` buffers, and their tokens.
    pub fn new(region: DmaRegion, size: usize) -> (Arc<Buffers>, Vec<BufToken>) {
        let count = (region.len() / size) as u32;
        let bufs = Arc::new(Buffers {
            region,
            size,
            returned: std::sync::Mutex::new(Vec::new()),
        });
        (bufs, (0..count).map(BufToken).collect())
    }

    /// Bytes per buffer.
    pub fn size(&self) -> usize {
        self.size
    }

    /// The bus address of the buffer `token` stands for.
    pub fn bus(&self, token: &BufToken) -> u64 {
        self.region.bus(token.0 as usize * self.size)
    }

    /// Take back the tokens of every dropped view.
    pub fn take_returned(&self, into: &mut Vec<BufToken>) {
        let mut r = self.returned.lock().unwrap_or_else(|p| p.into_inner());
        into.append(&mut r);
    }
}

/// A view of the first `len` bytes of one buffer, owning it until dropped (its token
/// goes back to [`Buffers::take_returned`]) or [`Buffer::into_token`].
pub struct Buffer {
    bufs: Arc<Buffers>,
    token: Option<BufToken>,
    len: usize,
}

impl Buffer {
    /// The first `len` bytes (at most the buffer size) of `token`'s buffer.
    pub fn new(bufs: &Arc<Buffers>, token: BufToken, len: usize) -> Buffer {
        Buffer {
            len: len.min(bufs.size),
            bufs: Arc::clone(bufs),
            token: Some(token),
        }
    }

    /// Shorten to `len` bytes.
    pub fn truncate(&mut self, len: usize) {
        self.len = self.len.min(len);
    }

    /// The buffer's bus address and the view's length; the token goes with it (to a
    /// descriptor).
    pub fn into_token(mut self) -> (BufToken, u64, usize) {
        let token = self.token.take().expect("a view holds its token");
        let bus = self.bufs.bus(&token);
        (token, bus, self.len)
    }

    fn offset(&self) -> usize {
        self.token.as_ref().expect("a view holds its token").0 as usize * self.bufs.size
    }
}

impl std::ops::Deref for Buffer {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        // SAFETY: the view owns the buffer's token, so neither the device nor another
        // view touches these bytes while it lives (see `Buffers`).
        unsafe { self.bufs.region.slice(self.offset(), self.len) }
    }
}

impl std::ops::DerefMut for Buffer {
    fn deref_mut(&mut self) -> &mut [u8] {
        // SAFETY: as for `deref`, and the borrow is exclusive.
        unsafe { self.bufs.region.slice_mut(self.offset(), self.len) }
    }
}

impl Drop for Buffer {
    fn drop(&mut self) {
        if let Some(token) = self.token.take() {
            let mut r = self.bufs.returned.lock().unwrap_or_else(|p| p.into_inner());
            r.push(token);
        }
    }
}

/// Order the reads of a descriptor after the read of its DD bit (the device writes the
/// other fields first, datasheet §7.1.6.2).
pub fn acquire() {
    fence(Ordering::Acquire);
}

/// Order descriptor writes before the tail register write that hands them over.
pub fn release() {
    fence(Ordering::Release);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_bytes_and_sub_regions() {
        let r = DmaRegion::heap(4096, 4096, 0x10_0000);
        assert_eq!(r.read_u64(0), 0, "zeroed");
        r.write_u64(8, 0x0102_0304_0506_0708);
        assert_eq!(r.read_u32(8), 0x0506_0708, "little-endian");
        r.copy_from(100, b"hello");
        let s = r.sub(96, 16);
        assert_eq!(s.bus(4), 0x10_0000 + 100);
        let mut out = [0u8; 5];
        s.copy_to(4, &mut out);
        assert_eq!(&out, b"hello");
    }

    #[test]
    fn buffers_go_back_when_their_view_drops() {
        let (bufs, mut tokens) = Buffers::new(DmaRegion::heap(8192, 4096, 0x2000), 2048);
        assert_eq!(tokens.len(), 4);
        let t = tokens.pop().expect("four tokens");
        assert_eq!(bufs.bus(&t), 0x2000 + 3 * 2048);
        let mut b = Buffer::new(&bufs, t, 100);
        b[..3].copy_from_slice(b"abc");
        b.truncate(3);
        assert_eq!(&b[..], b"abc");
        drop(b);
        let mut back = Vec::new();
        bufs.take_returned(&mut back);
        assert_eq!(back, vec![BufToken(3)]);
    }

    #[test]
    #[should_panic(expected = "past a")]
    fn out_of_bounds_is_refused() {
        DmaRegion::heap(64, 64, 0).read_u64(64);
    }
}
