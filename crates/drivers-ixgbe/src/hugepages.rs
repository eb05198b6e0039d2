//! DMA memory for a real 82599: 2 MiB hugepages (or, behind an IOMMU, ordinary pages)
//! carved into the rings and buffer blocks [`crate::open`] asks for, each with the
//! address the device uses for it.
//!
//! - Behind an IOMMU (VFIO), the bus address is an IOVA this allocator assigns and maps
//!   with `VFIO_IOMMU_MAP_DMA`; a chunk of any number of pages is contiguous in IOVA
//!   space, so any request size works.
//! - Without one, the bus address is the physical address, read from
//!   `/proc/self/pagemap` (Documentation/admin-guide/mm/pagemap.rst: bits 0–54 the page
//!   frame number, bit 63 present; since Linux 4.2 the frame number reads as zero
//!   without `CAP_SYS_ADMIN`). Only a single hugepage is known to be physically
//!   contiguous, so no region may be larger than 2 MiB or cross one.
//!
//! Memory is never reused: regions are carved first-fit out of chunks and chunks are
//! freed only when the device is closed (after its DMA has been stopped), so fresh
//! anonymous memory is all the zeroing needed.

use std::fs::File;
use std::os::fd::AsFd;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::Arc;

use crate::dma::DmaRegion;
use crate::hw::{DmaAllocator, DmaError};
use crate::pci::Session;
use crate::sys::{self, Mapping};

/// Bytes in one hugepage (x86-64's 2 MiB pages).
pub(crate) const HUGEPAGE: usize = 2 << 20;

/// Where the sysfs counters of 2 MiB hugepages live, under the sysfs root.
pub(crate) const HUGEPAGE_SYSFS: &str = "kernel/mm/hugepages/hugepages-2048kB";

/// The first IOVA handed out: above 4 GiB, clear of the MSI window at 0xFEE0_0000 and
/// of the low reserved ranges some platforms have (the 82599 does 64-bit DMA).
pub(crate) const IOVA_BASE: u64 = 1 << 32;

/// What one `/proc/self/pagemap` entry says about a page.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PageFrame {
    /// In memory at this page frame number.
    Present(u64),
    /// In memory, but the frame number is hidden (zero): the process lacks
    /// `CAP_SYS_ADMIN`.
    Hidden,
    /// Not in memory (never touched, or swapped out).
    NotPresent,
}

/// Decode a pagemap entry (bit 63 present, bits 0–54 the page frame number).
pub(crate) fn page_frame(entry: u64) -> PageFrame {
    const PRESENT: u64 = 1 << 63;
    const PFN_MASK: u64 = (1 << 55) - 1;
    if entry & PRESENT == 0 {
        PageFrame::NotPresent
    } else if entry & PFN_MASK == 0 {
        PageFrame::Hidden
    } else {
        PageFrame::Present(entry & PFN_MASK)
    }
}

/// Why a virtual address could not be turned into a physical one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum TranslateError {
    /// The kernel hides frame numbers from this process.
    NotPermitted,
    /// The page is not in memory.
    NotPresent,
    /// Reading the pagemap failed.
    Io(String),
}

/// The physical address of `vaddr` in this process, from `pagemap`
/// (`/proc/self/pagemap`, opened by the caller).
pub(crate) fn physical_address(
    pagemap: &File,
    vaddr: usize,
    page_size: usize,
) -> Result<u64, TranslateError> {
    let mut entry = [0u8; 8];
    pagemap
        .read_exact_at(&mut entry, (vaddr / page_size) as u64 * 8)
        .map_err(|e| TranslateError::Io(e.to_string()))?;
    match page_frame(u64::from_le_bytes(entry)) {
        PageFrame::Present(pfn) => Ok(pfn * page_size as u64 + (vaddr % page_size) as u64),
        PageFrame::Hidden => Err(TranslateError::NotPermitted),
        PageFrame::NotPresent => Err(TranslateError::NotPresent),
    }
}

/// Free 2 MiB hugepages according to the sysfs tree at `sys`; `None` when the kernel
/// has no 2 MiB hugepage pool at all.
pub(crate) fn free_hugepages(sys: &Path) -> Option<u64> {
    let s = std::fs::read_to_string(sys.join(HUGEPAGE_SYSFS).join("free_hugepages")).ok()?;
    s.trim().parse().ok()
}

/// First-fit placement of regions in chunks: which chunk, at which offset. Pure, so
/// the rule (aligned, never across a chunk's end, never reused) is tested on its own.
#[derive(Debug, Default)]
pub(crate) struct Carver {
    /// Per chunk: its length and the bytes used from its start.
    chunks: Vec<(usize, usize)>,
}

impl Carver {
    /// Add a chunk of `len` bytes; its index.
    pub(crate) fn add(&mut self, len: usize) -> usize {
        self.chunks.push((len, 0));
        self.chunks.len() - 1
    }

    /// Take `size` bytes aligned to `align` (a power of two) from the first chunk with
    /// room: its index and the offset in it.
    pub(crate) fn place(&mut self, size: usize, align: usize) -> Option<(usize, usize)> {
        let align = align.max(8);
        for (i, (len, used)) in self.chunks.iter_mut().enumerate() {
            let off = used.next_multiple_of(align);
            if off.checked_add(size).is_some_and(|end| end <= *len) {
                *used = off + size;
                return Some((i, off));
            }
        }
        None
    }
}

/// How the device addresses the memory.
pub(crate) enum BusAddresses {
    /// Through the IOMMU of this VFIO container, at IOVAs assigned from `next`.
    Iommu {
        /// The next free IOVA.
        next: u64,
    },
    /// By physical address, read from this process's pagemap.
    Physical {
        /// `/proc/self/pagemap`.
        pagemap: File,
    },
}

/// The [`DmaAllocator`] of a real device; see the module docs.
pub(crate) struct HugepageAllocator {
    session: Arc<Session>,
    bus: BusAddresses,
    carver: Carver,
    /// Per chunk of `carver`: the memory and its bus address.
    chunks: Vec<(Arc<Mapping>, u64)>,
    /// Whether hugepages are still worth trying (behind an IOMMU ordinary pages do).
    hugepages: bool,
}

impl HugepageAllocator {
    pub(crate) fn new(session: Arc<Session>, bus: BusAddresses) -> HugepageAllocator {
        HugepageAllocator {
            session,
            bus,
            carver: Carver::default(),
            chunks: Vec::new(),
            hugepages: true,
        }
    }

    /// A new chunk that holds at least `size` bytes, mapped for the device.
    fn grow(&mut self, size: usize) -> Result<(), DmaError> {
        let len = size.next_multiple_of(HUGEPAGE);
        let (map, bus) = match &mut self.bus {
            BusAddresses::Iommu { next } => {
                let huge = if self.hugepages {
                    Mapping::hugepages(len, false).ok()
                } else {
                    None
                };
                let map = match huge {
                    Some(m) => m,
                    None => {
                        // Behind an IOMMU ordinary pages work as well (the IOMMU makes
                        // them contiguous); only the TLB misses more.
                        if self.hugepages {
                            log::info!("ixgbe: no free hugepages, using ordinary pages for DMA behind the IOMMU");
                            self.hugepages = false;
                        }
                        Mapping::anonymous(len).map_err(|e| {
                            DmaError::System(format!("mapping {len} bytes of memory: {e}"))
                        })?
                    }
                };
                let iova = *next;
                let container = self.session.container().ok_or_else(|| {
                    DmaError::System("no VFIO container to map DMA memory into".into())
                })?;
                sys::vfio_map_dma(container.as_fd(), &map, iova).map_err(|e| {
                    DmaError::System(format!(
                        "VFIO_IOMMU_MAP_DMA of {len} bytes at IOVA {iova:#x}: {e} \
                         (the pinned memory counts against the locked-memory limit: \
                         run as root or raise `ulimit -l`)"
                    ))
                })?;
                // A guard page of IOVA space between chunks turns an overrun into an
                // IOMMU fault instead of a write into the next chunk.
                *next = iova + len as u64 + HUGEPAGE as u64;
                (map, iova)
            }
            BusAddresses::Physical { pagemap } => {
                if size > HUGEPAGE {
                    return Err(DmaError::System(format!(
                        "{size} bytes of physically contiguous memory: without an IOMMU a \
                         region is at most one 2 MiB hugepage (use rings of at most 512 \
                         descriptors, or bind the device to vfio-pci with the IOMMU on)"
                    )));
                }
                let map = Mapping::hugepages(HUGEPAGE, true).map_err(|e| {
                    DmaError::System(format!(
                        "a 2 MiB hugepage: {e} (reserve more: echo 512 > \
                         /sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages)"
                    ))
                })?;
                let phys =
                    physical_address(pagemap, map.addr(), sys::page_size()).map_err(|e| {
                        DmaError::System(format!("the physical address of a hugepage: {e:?}"))
                    })?;
                if !phys.is_multiple_of(HUGEPAGE as u64) {
                    return Err(DmaError::System(format!(
                        "a hugepage at physical {phys:#x}, not 2 MiB aligned"
                    )));
                }
                (map, phys)
            }
        };
        let map = Arc::new(map);
        let iova = match self.bus {
            BusAddresses::Iommu { .. } => Some(bus),
            BusAddresses::Physical { .. } => None,
        };
        self.session.adopt(Arc::clone(&map), iova);
        self.carver.add(len);
        self.chunks.push((map, bus));
        Ok(())
    }
}

impl DmaAllocator for HugepageAllocator {
    fn alloc(&mut self, size: usize, align: usize) -> Result<DmaRegion, DmaError> {
        let placed = match self.carver.place(size, align) {
            Some(p) => p,
            None => {
                self.grow(size)?;
                self.carver
                    .place(size, align)
                    .ok_or(DmaError::Exhausted { size })?
            }
        };
        let (i, off) = placed;
        let (map, bus) = &self.chunks[i];
        let keep: Arc<dyn crate::hw::DmaBacking> = self.session.clone();
        Ok(sys::dma_region(map, off, size, bus + off as u64, keep))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pagemap_entries_decode() {
        let present = 1u64 << 63;
        assert_eq!(page_frame(present | 0x1234), PageFrame::Present(0x1234));
        // Soft-dirty (55) and exclusive (56) bits are not part of the frame number.
        assert_eq!(
            page_frame(present | (1 << 55) | (1 << 56) | 0x42),
            PageFrame::Present(0x42)
        );
        assert_eq!(
            page_frame(present),
            PageFrame::Hidden,
            "zero PFN: not permitted"
        );
        assert_eq!(page_frame(0x1234), PageFrame::NotPresent);
        assert_eq!(page_frame(1 << 62), PageFrame::NotPresent, "swapped");
    }

    #[test]
    fn own_pagemap_translates_or_says_not_permitted() {
        let Ok(pagemap) = File::open("/proc/self/pagemap") else {
            return;
        };
        let m = Mapping::anonymous(4096).expect("a page");
        m.write_u32(0, 1);
        match physical_address(&pagemap, m.addr() + 12, sys::page_size()) {
            Ok(phys) => assert_eq!(phys % sys::page_size() as u64, 12),
            Err(e) => assert_eq!(e, TranslateError::NotPermitted),
        }
    }

    #[test]
    fn regions_are_aligned_first_fit_and_never_cross_a_chunk() {
        let mut c = Carver::default();
        assert_eq!(c.place(64, 128), None, "no chunk yet");
        c.add(HUGEPAGE);
        assert_eq!(c.place(8192, 128), Some((0, 0)));
        // A full hugepage of buffers does not fit behind the ring: a new chunk.
        assert_eq!(c.place(HUGEPAGE, 4096), None);
        c.add(HUGEPAGE);
        assert_eq!(c.place(HUGEPAGE, 4096), Some((1, 0)));
        // The next ring goes back into the first chunk's room, aligned.
        assert_eq!(c.place(100, 128), Some((0, 8192)));
        assert_eq!(c.place(16, 4096), Some((0, 12288)));
    }

    #[test]
    fn free_hugepages_reads_the_pool() {
        let dir = std::env::temp_dir().join(format!("rusty-hp-{}", std::process::id()));
        let pool = dir.join(HUGEPAGE_SYSFS);
        std::fs::create_dir_all(&pool).expect("temp dir");
        assert_eq!(free_hugepages(&dir.join("nowhere")), None);
        std::fs::write(pool.join("free_hugepages"), "7\n").expect("write");
        assert_eq!(free_hugepages(&dir), Some(7));
        std::fs::remove_dir_all(&dir).ok();
    }
}
