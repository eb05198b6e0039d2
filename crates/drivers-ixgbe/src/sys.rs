//! Every system call the real-device path makes that std does not wrap: `mmap` of BAR0
//! and of DMA memory, volatile 32-bit access to a mapped BAR, and the VFIO `ioctl`s
//! (constants and structures from the kernel's `include/uapi/linux/vfio.h`). Each
//! function is safe to call and states above its `unsafe` block why the call is sound.
//! Memory shared with the device is handed out as [`DmaRegion`]s, whose own accesses
//! are in [`crate::dma`].

#![allow(unsafe_code)]

use std::ffi::{c_int, c_void, CString};
use std::io;
use std::mem::size_of;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::ptr::NonNull;
use std::sync::Arc;

use crate::dma::DmaRegion;
use crate::hw::DmaBacking;

fn cvt(rc: c_int) -> io::Result<c_int> {
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(rc)
    }
}

/// The size of a base page (what `/proc/self/pagemap` has one entry for).
pub(crate) fn page_size() -> usize {
    // SAFETY: sysconf takes no pointers.
    let n = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if n > 0 {
        n as usize
    } else {
        4096
    }
}

// ---- mappings -------------------------------------------------------------------------

/// A memory mapping this process owns: a BAR, or DMA memory. Unmapped on drop.
pub(crate) struct Mapping {
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: the mapping is plain memory (or device memory) that every thread may access;
// the accessors below are bounds-checked whole-word volatile accesses.
unsafe impl Send for Mapping {}
// SAFETY: as above.
unsafe impl Sync for Mapping {}

impl std::fmt::Debug for Mapping {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Mapping({} bytes at {:p})", self.len, self.ptr)
    }
}

impl Mapping {
    fn map(fd: c_int, offset: u64, len: usize, flags: c_int) -> io::Result<Mapping> {
        if len == 0 {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "empty mapping"));
        }
        let offset = libc::off_t::try_from(offset)
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "offset too large"))?;
        // SAFETY: a fresh mapping at an address the kernel picks; no existing memory is
        // touched. The result is checked before use.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                flags,
                fd,
                offset,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let ptr = NonNull::new(p.cast::<u8>()).ok_or_else(io::Error::last_os_error)?;
        Ok(Mapping { ptr, len })
    }

    /// `len` bytes of `fd` from `offset`, shared (a BAR: sysfs `resource0` or a VFIO
    /// region).
    pub(crate) fn shared(fd: BorrowedFd<'_>, offset: u64, len: usize) -> io::Result<Mapping> {
        Self::map(fd.as_raw_fd(), offset, len, libc::MAP_SHARED)
    }

    /// `len` bytes (a multiple of 2 MiB) of 2 MiB hugepages, faulted in now (so a
    /// short pool fails here, not later), locked when `lock`. Anonymous memory is
    /// zeroed.
    pub(crate) fn hugepages(len: usize, lock: bool) -> io::Result<Mapping> {
        let mut flags = libc::MAP_PRIVATE
            | libc::MAP_ANONYMOUS
            | libc::MAP_HUGETLB
            | libc::MAP_HUGE_2MB
            | libc::MAP_POPULATE;
        if lock {
            flags |= libc::MAP_LOCKED;
        }
        Self::map(-1, 0, len, flags)
    }

    /// `len` bytes of ordinary anonymous memory, zeroed and faulted in (VFIO pins it
    /// when it is mapped into the IOMMU).
    pub(crate) fn anonymous(len: usize) -> io::Result<Mapping> {
        Self::map(
            -1,
            0,
            len,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_POPULATE,
        )
    }

    /// Bytes mapped.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// The virtual address of the first byte (for `/proc/self/pagemap` and VFIO).
    pub(crate) fn addr(&self) -> usize {
        self.ptr.as_ptr() as usize
    }

    fn check(&self, off: usize) {
        assert!(
            off.is_multiple_of(4) && off.checked_add(4).is_some_and(|end| end <= self.len),
            "register {off:#x} outside a {:#x}-byte BAR or unaligned",
            self.len
        );
    }

    /// The 32-bit little-endian register at `off`, read once.
    pub(crate) fn read_u32(&self, off: usize) -> u32 {
        self.check(off);
        // SAFETY: in bounds and 4-aligned (checked; the mapping is page-aligned). MMIO
        // must be one volatile access of the register's width.
        u32::from_le(unsafe { std::ptr::read_volatile(self.ptr.as_ptr().add(off).cast::<u32>()) })
    }

    /// Write the 32-bit little-endian register at `off` once.
    pub(crate) fn write_u32(&self, off: usize, value: u32) {
        self.check(off);
        // SAFETY: as for `read_u32`.
        unsafe { std::ptr::write_volatile(self.ptr.as_ptr().add(off).cast::<u32>(), value.to_le()) }
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: `ptr..ptr + len` is a mapping this value made and owns; nothing
        // borrows it any more (DMA regions keep the `Arc<Mapping>` alive).
        unsafe { libc::munmap(self.ptr.as_ptr().cast::<c_void>(), self.len) };
    }
}

/// A [`DmaRegion`] over `len` bytes of `map` from `off`, which the device sees at
/// `bus`. The region keeps `map` mapped, and `keep` alive (the opened device, whose
/// drop stops its DMA before the memory goes).
pub(crate) fn dma_region(
    map: &Arc<Mapping>,
    off: usize,
    len: usize,
    bus: u64,
    keep: Arc<dyn DmaBacking>,
) -> DmaRegion {
    assert!(
        off.checked_add(len).is_some_and(|end| end <= map.len) && off.is_multiple_of(8),
        "a DMA region of {len} bytes at {off} outside a {}-byte mapping",
        map.len
    );
    let ptr = NonNull::new(map.ptr.as_ptr().wrapping_add(off)).expect("inside a mapping");
    // SAFETY: in bounds and 8-aligned (checked; mappings are page-aligned); the backing
    // holds the `Arc<Mapping>`, so the memory stays mapped, readable and writable while
    // the region lives. The caller gives the bus address the device uses for it.
    unsafe { DmaRegion::from_raw(ptr, len, bus, Arc::new((Arc::clone(map), keep))) }
}

// ---- VFIO (include/uapi/linux/vfio.h) -------------------------------------------------

/// `_IO(';', 100 + n)`: VFIO's ioctls carry no size in the request number.
const fn vfio_io(n: u32) -> u32 {
    ((b';' as u32) << 8) | (100 + n)
}

const VFIO_GET_API_VERSION: u32 = vfio_io(0);
const VFIO_CHECK_EXTENSION: u32 = vfio_io(1);
const VFIO_SET_IOMMU: u32 = vfio_io(2);
const VFIO_GROUP_GET_STATUS: u32 = vfio_io(3);
const VFIO_GROUP_SET_CONTAINER: u32 = vfio_io(4);
const VFIO_GROUP_GET_DEVICE_FD: u32 = vfio_io(6);
const VFIO_DEVICE_GET_REGION_INFO: u32 = vfio_io(8);
const VFIO_IOMMU_MAP_DMA: u32 = vfio_io(13);
const VFIO_IOMMU_UNMAP_DMA: u32 = vfio_io(14);

/// `VFIO_API_VERSION`.
pub(crate) const VFIO_API_VERSION: c_int = 0;
/// `VFIO_TYPE1_IOMMU`: the x86 IOMMUs (VT-d, AMD-Vi).
pub(crate) const VFIO_TYPE1_IOMMU: u32 = 1;
/// `VFIO_GROUP_FLAGS_VIABLE`: every device in the group is bound to a VFIO driver
/// (or to none).
pub(crate) const VFIO_GROUP_FLAGS_VIABLE: u32 = 1 << 0;
/// `VFIO_REGION_INFO_FLAG_MMAP`.
pub(crate) const VFIO_REGION_INFO_FLAG_MMAP: u32 = 1 << 2;
/// `VFIO_PCI_BAR0_REGION_INDEX`.
pub(crate) const VFIO_PCI_BAR0_REGION_INDEX: u32 = 0;
/// `VFIO_PCI_CONFIG_REGION_INDEX`.
pub(crate) const VFIO_PCI_CONFIG_REGION_INDEX: u32 = 7;
const VFIO_DMA_MAP_FLAG_READ: u32 = 1 << 0;
const VFIO_DMA_MAP_FLAG_WRITE: u32 = 1 << 1;

/// `struct vfio_group_status`.
#[repr(C)]
struct VfioGroupStatus {
    argsz: u32,
    flags: u32,
}

/// `struct vfio_region_info` (without capabilities).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct VfioRegionInfo {
    argsz: u32,
    /// `VFIO_REGION_INFO_FLAG_*`.
    pub(crate) flags: u32,
    index: u32,
    cap_offset: u32,
    /// Bytes in the region.
    pub(crate) size: u64,
    /// Where the region starts in the device fd (for `mmap`, `pread`, `pwrite`).
    pub(crate) offset: u64,
}

/// `struct vfio_iommu_type1_dma_map`.
#[repr(C)]
struct VfioDmaMap {
    argsz: u32,
    flags: u32,
    vaddr: u64,
    iova: u64,
    size: u64,
}

/// `struct vfio_iommu_type1_dma_unmap` (without the dirty bitmap).
#[repr(C)]
struct VfioDmaUnmap {
    argsz: u32,
    flags: u32,
    iova: u64,
    size: u64,
}

/// An ioctl whose argument is an integer (or nothing).
fn ioctl_value(fd: BorrowedFd<'_>, request: u32, arg: libc::c_ulong) -> io::Result<c_int> {
    // SAFETY: the VFIO requests passed here take an integer argument, no pointer.
    cvt(unsafe { libc::ioctl(fd.as_raw_fd(), request as libc::Ioctl, arg) })
}

/// An ioctl whose argument is a pointer to `T`, which the kernel reads and may write.
fn ioctl_ptr<T>(fd: BorrowedFd<'_>, request: u32, arg: &mut T) -> io::Result<c_int> {
    // SAFETY: `arg` is a valid, exclusive `T` for the call; every `T` passed here is
    // the `repr(C)` structure the request reads and writes, with `argsz` set to its
    // size so the kernel touches no more.
    cvt(unsafe { libc::ioctl(fd.as_raw_fd(), request as libc::Ioctl, arg as *mut T) })
}

/// `VFIO_GET_API_VERSION` on a container.
pub(crate) fn vfio_api_version(container: BorrowedFd<'_>) -> io::Result<c_int> {
    ioctl_value(container, VFIO_GET_API_VERSION, 0)
}

/// `VFIO_CHECK_EXTENSION`: whether the container supports `ext`.
pub(crate) fn vfio_check_extension(container: BorrowedFd<'_>, ext: u32) -> io::Result<bool> {
    ioctl_value(container, VFIO_CHECK_EXTENSION, ext.into()).map(|r| r > 0)
}

/// `VFIO_SET_IOMMU`.
pub(crate) fn vfio_set_iommu(container: BorrowedFd<'_>, kind: u32) -> io::Result<()> {
    ioctl_value(container, VFIO_SET_IOMMU, kind.into()).map(drop)
}

/// `VFIO_GROUP_GET_STATUS`: the group's flags.
pub(crate) fn vfio_group_flags(group: BorrowedFd<'_>) -> io::Result<u32> {
    let mut status = VfioGroupStatus {
        argsz: size_of::<VfioGroupStatus>() as u32,
        flags: 0,
    };
    ioctl_ptr(group, VFIO_GROUP_GET_STATUS, &mut status)?;
    Ok(status.flags)
}

/// `VFIO_GROUP_SET_CONTAINER`.
pub(crate) fn vfio_group_set_container(
    group: BorrowedFd<'_>,
    container: BorrowedFd<'_>,
) -> io::Result<()> {
    let mut fd: c_int = container.as_raw_fd();
    ioctl_ptr(group, VFIO_GROUP_SET_CONTAINER, &mut fd).map(drop)
}

/// `VFIO_GROUP_GET_DEVICE_FD` for the device named `name` (its PCI address).
pub(crate) fn vfio_device_fd(group: BorrowedFd<'_>, name: &str) -> io::Result<OwnedFd> {
    let name = CString::new(name)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "a NUL in a device name"))?;
    // SAFETY: the kernel reads a NUL-terminated string that lives for the call.
    let fd = cvt(unsafe {
        libc::ioctl(
            group.as_raw_fd(),
            VFIO_GROUP_GET_DEVICE_FD as libc::Ioctl,
            name.as_ptr(),
        )
    })?;
    // SAFETY: `fd` was just returned by the kernel and nothing else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// `VFIO_DEVICE_GET_REGION_INFO` for region `index`.
pub(crate) fn vfio_region_info(device: BorrowedFd<'_>, index: u32) -> io::Result<VfioRegionInfo> {
    let mut info = VfioRegionInfo {
        argsz: size_of::<VfioRegionInfo>() as u32,
        index,
        ..VfioRegionInfo::default()
    };
    ioctl_ptr(device, VFIO_DEVICE_GET_REGION_INFO, &mut info)?;
    Ok(info)
}

/// `VFIO_IOMMU_MAP_DMA`: let the device read and write `size` bytes at `vaddr` of
/// this process through bus addresses `iova..`. The kernel pins the pages.
pub(crate) fn vfio_map_dma(container: BorrowedFd<'_>, map: &Mapping, iova: u64) -> io::Result<()> {
    let mut m = VfioDmaMap {
        argsz: size_of::<VfioDmaMap>() as u32,
        flags: VFIO_DMA_MAP_FLAG_READ | VFIO_DMA_MAP_FLAG_WRITE,
        vaddr: map.addr() as u64,
        iova,
        size: map.len() as u64,
    };
    ioctl_ptr(container, VFIO_IOMMU_MAP_DMA, &mut m).map(drop)
}

/// `VFIO_IOMMU_UNMAP_DMA` of `iova..iova + size`.
pub(crate) fn vfio_unmap_dma(container: BorrowedFd<'_>, iova: u64, size: u64) -> io::Result<()> {
    let mut m = VfioDmaUnmap {
        argsz: size_of::<VfioDmaUnmap>() as u32,
        flags: 0,
        iova,
        size,
    };
    ioctl_ptr(container, VFIO_IOMMU_UNMAP_DMA, &mut m).map(drop)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vfio_request_numbers_match_the_uapi_header() {
        // _IO(';', 100) and _IO(';', 113), as `VFIO_GET_API_VERSION` and
        // `VFIO_IOMMU_MAP_DMA` expand to.
        assert_eq!(VFIO_GET_API_VERSION, 0x3B64);
        assert_eq!(VFIO_IOMMU_MAP_DMA, 0x3B71);
        assert_eq!(size_of::<VfioRegionInfo>(), 32);
        assert_eq!(size_of::<VfioDmaMap>(), 32);
        assert_eq!(size_of::<VfioDmaUnmap>(), 24);
    }

    #[test]
    fn a_mapping_reads_and_writes_words_and_refuses_out_of_bounds() {
        let m = Mapping::anonymous(4096).expect("4 KiB of anonymous memory");
        assert_eq!(m.read_u32(4092), 0, "zeroed");
        m.write_u32(8, 0xdead_beef);
        assert_eq!(m.read_u32(8), 0xdead_beef);
        let r = std::panic::catch_unwind(|| m.read_u32(4096));
        assert!(r.is_err(), "past the end is refused");
    }
}
