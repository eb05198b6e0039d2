//! [`Region`]: memory the mPIPE reads and writes by address (notif rings, eDMA rings,
//! buffer-stack storage, packet buffers). This module holds the crate's `unsafe` code;
//! what it offers is a small safe API.
//!
//! The mPIPE addresses memory by virtual address (the `va` fields of the idesc and
//! edesc are 42-bit, sign-extended, translated by the shim's IOTLB). On a TILE-Gx a
//! region's device address is its own pointer; the host model hands out regions at
//! made-up addresses inside 42 bits, so that the driver never confuses the two.
//!
//! Descriptor words the device may be writing are read and written whole and volatile;
//! packet bytes are copied, or viewed by the one owner of a buffer (see
//! [`crate::queue`]) that the device will not touch until it is pushed back.

#![allow(unsafe_code)]

use std::alloc::{self, Layout};
use std::ptr::NonNull;
use std::sync::atomic::{fence, Ordering};
use std::sync::Arc;

/// A contiguous piece of memory the device reaches at [`Region::va`]. Clones are
/// further handles on the same memory (device and driver each hold one: that aliasing is
/// what DMA is).
#[derive(Clone)]
pub struct Region {
    base: NonNull<u8>,
    len: usize,
    va: u64,
    _owner: Arc<dyn Send + Sync>,
}

// SAFETY: plain memory; every access is bounds-checked and the crate's ownership rules
// (one owner per packet buffer, whole volatile descriptor words) keep concurrent use to
// what DMA hardware does anyway.
unsafe impl Send for Region {}
// SAFETY: as above.
unsafe impl Sync for Region {}

impl std::fmt::Debug for Region {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Region({} bytes at va {:#x})", self.len, self.va)
    }
}

/// Zeroed heap memory, freed when the last handle goes.
struct Heap {
    ptr: NonNull<u8>,
    layout: Layout,
}

// SAFETY: owned heap memory, freed once.
unsafe impl Send for Heap {}
// SAFETY: as above.
unsafe impl Sync for Heap {}

impl Drop for Heap {
    fn drop(&mut self) {
        // SAFETY: allocated with this layout in `Region::heap`.
        unsafe { alloc::dealloc(self.ptr.as_ptr(), self.layout) }
    }
}

impl Region {
    /// `len` zeroed bytes of heap memory aligned to `align` (at least 8), which the
    /// device addresses at `va`.
    pub fn heap(len: usize, align: usize, va: u64) -> Region {
        let layout = match Layout::from_size_align(len.max(1), align.max(8)) {
            Ok(l) => l,
            Err(e) => panic!("region of {len} bytes aligned to {align}: {e}"),
        };
        // SAFETY: the layout's size is not zero.
        let raw = unsafe { alloc::alloc_zeroed(layout) };
        let ptr = NonNull::new(raw).unwrap_or_else(|| alloc::handle_alloc_error(layout));
        Region {
            base: ptr,
            len,
            va,
            _owner: Arc::new(Heap { ptr, layout }),
        }
    }

    /// A region over memory mapped by someone else (hugepages on a TILE-Gx).
    ///
    /// # Safety
    ///
    /// `ptr..ptr + len` must be mapped, readable, writable and 8-aligned while `owner`
    /// lives, and the device must see it at `va..va + len`.
    #[cfg_attr(not(target_arch = "tilegx"), allow(dead_code))]
    pub(crate) unsafe fn mapped(
        ptr: NonNull<u8>,
        len: usize,
        va: u64,
        owner: Arc<dyn Send + Sync>,
    ) -> Region {
        Region {
            base: ptr,
            len,
            va,
            _owner: owner,
        }
    }

    /// Bytes in the region.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether it is empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The device address of byte `off`.
    pub fn va(&self, off: usize) -> u64 {
        assert!(off <= self.len, "offset {off} past {} bytes", self.len);
        self.va + off as u64
    }

    /// Whether the device address `va` falls inside the region; its offset if so.
    pub fn offset_of(&self, va: u64) -> Option<usize> {
        va.checked_sub(self.va)
            .filter(|&o| o < self.len as u64)
            .map(|o| o as usize)
    }

    /// Another handle on `len` bytes from `off`.
    pub fn sub(&self, off: usize, len: usize) -> Region {
        self.bounds(off, len, 1);
        Region {
            // SAFETY: in bounds (checked).
            base: unsafe { NonNull::new_unchecked(self.base.as_ptr().add(off)) },
            len,
            va: self.va + off as u64,
            _owner: Arc::clone(&self._owner),
        }
    }

    fn bounds(&self, off: usize, len: usize, align: usize) {
        let end = off.checked_add(len);
        assert!(
            end.is_some_and(|e| e <= self.len),
            "{len} bytes at {off} past {} bytes",
            self.len
        );
        assert!(
            (self.base.as_ptr() as usize + off).is_multiple_of(align),
            "unaligned word at {off}"
        );
    }

    /// The 64-bit little-endian word at `off` (8-aligned), read once.
    pub fn load(&self, off: usize) -> u64 {
        self.bounds(off, 8, 8);
        // SAFETY: in bounds and aligned (checked); one volatile read of a word the
        // device may write.
        u64::from_le(unsafe { self.base.as_ptr().add(off).cast::<u64>().read_volatile() })
    }

    /// Write the 64-bit little-endian word at `off` (8-aligned) once.
    pub fn store(&self, off: usize, v: u64) {
        self.bounds(off, 8, 8);
        // SAFETY: in bounds and aligned (checked).
        unsafe {
            self.base
                .as_ptr()
                .add(off)
                .cast::<u64>()
                .write_volatile(v.to_le())
        }
    }

    /// Copy `src` in at `off`.
    pub fn write(&self, off: usize, src: &[u8]) {
        self.bounds(off, src.len(), 1);
        // SAFETY: in bounds (checked); `src` is other memory.
        unsafe {
            std::ptr::copy_nonoverlapping(src.as_ptr(), self.base.as_ptr().add(off), src.len())
        }
    }

    /// Copy `dst.len()` bytes out from `off`.
    pub fn read(&self, off: usize, dst: &mut [u8]) {
        self.bounds(off, dst.len(), 1);
        // SAFETY: in bounds (checked).
        unsafe {
            std::ptr::copy_nonoverlapping(self.base.as_ptr().add(off), dst.as_mut_ptr(), dst.len())
        }
    }

    /// `len` bytes at `off`, viewed in place.
    ///
    /// # Safety
    ///
    /// Nothing (the device, another handle) may write them while the view lives.
    unsafe fn bytes(&self, off: usize, len: usize) -> &[u8] {
        self.bounds(off, len, 1);
        std::slice::from_raw_parts(self.base.as_ptr().add(off), len)
    }

    /// `len` bytes at `off`, viewed in place for writing.
    ///
    /// # Safety
    ///
    /// Nothing else may read or write them while the view lives.
    #[allow(clippy::mut_from_ref)]
    unsafe fn bytes_mut(&self, off: usize, len: usize) -> &mut [u8] {
        self.bounds(off, len, 1);
        std::slice::from_raw_parts_mut(self.base.as_ptr().add(off), len)
    }
}

/// Where a [`Lease`]'s buffer goes when the lease is dropped: back to a buffer stack
/// (received buffers) or to a queue's free transmit buffers.
pub(crate) trait Home: Send + Sync {
    /// The buffer at `va` is free again.
    fn give_back(&self, va: u64);
}

/// The right to one buffer of a [`Region`]: the only handle through which its bytes are
/// read or written, made for a buffer the device has handed over (an idesc) or never
/// had (a transmit buffer), and given back to its `Home` when dropped or, through
/// [`Lease::into_parts`], handed to the device in an edesc. Because a lease is not
/// `Clone` and the device does not touch a leased buffer, its `&[u8]`/`&mut [u8]` views
/// are sound.
pub struct Lease {
    region: Region,
    off: usize,
    len: usize,
    home: Option<Arc<dyn Home>>,
}

impl Lease {
    /// The first `len` bytes of the buffer at `off` in `region`, going back to `home`.
    /// Crate-internal: the caller owns that buffer (see above).
    pub(crate) fn new(region: &Region, off: usize, len: usize, home: Arc<dyn Home>) -> Lease {
        region.bounds(off, len, 1);
        Lease {
            region: region.clone(),
            off,
            len,
            home: Some(home),
        }
    }

    /// Shorten to `len` bytes.
    pub fn truncate(&mut self, len: usize) {
        self.len = self.len.min(len);
    }

    /// The buffer's device address.
    pub fn va(&self) -> u64 {
        self.region.va(self.off)
    }

    /// The buffer's address and the lease's length; nothing goes home (the buffer is
    /// the device's now, or the caller's to account for).
    pub fn into_parts(mut self) -> (u64, usize) {
        self.home = None;
        (self.va(), self.len)
    }
}

impl std::ops::Deref for Lease {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        // SAFETY: the lease is the buffer's only handle and the device leaves it alone
        // (see `Lease`).
        unsafe { self.region.bytes(self.off, self.len) }
    }
}

impl std::ops::DerefMut for Lease {
    fn deref_mut(&mut self) -> &mut [u8] {
        // SAFETY: as for `deref`, and the borrow is exclusive.
        unsafe { self.region.bytes_mut(self.off, self.len) }
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        if let Some(home) = self.home.take() {
            home.give_back(self.region.va(self.off));
        }
    }
}

/// Order the reads of a descriptor after the read that says it is there (the notif
/// ring's tail word).
pub(crate) fn acquire() {
    fence(Ordering::Acquire);
}

/// Order descriptor and buffer writes before the write that hands them over.
pub(crate) fn release() {
    fence(Ordering::Release);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_bytes_and_addresses() {
        let r = Region::heap(256, 128, 0x40_0000);
        r.store(8, 0x1122_3344_5566_7788);
        assert_eq!(r.load(8), 0x1122_3344_5566_7788);
        r.write(20, b"mpipe");
        let s = r.sub(16, 64);
        assert_eq!(s.va(4), 0x40_0014);
        let mut out = [0; 5];
        s.read(4, &mut out);
        assert_eq!(&out, b"mpipe");
        assert_eq!(r.offset_of(0x40_00ff), Some(255));
        assert_eq!(r.offset_of(0x40_0100), None);
    }
}
