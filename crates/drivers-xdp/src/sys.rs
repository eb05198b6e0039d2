//! Every system call the driver makes that neither std nor `rusty-netdev` wraps: the
//! AF_XDP socket and its options, `mmap`, `bpf(2)`, the ethtool queries, the multicast
//! memberships and the wake-up calls. Each function is safe to call and states above its
//! block why the call is sound. The memory the rings and the UMEM live in is handled in
//! [`crate::mem`].

use std::ffi::{c_int, c_void, CString};
use std::io;
use std::mem::{size_of, MaybeUninit};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

use rusty_netdev::Interface;
use std::ptr::NonNull;

fn cvt(rc: c_int) -> io::Result<c_int> {
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(rc)
    }
}

/// Take ownership of a descriptor a system call just returned.
fn owned(fd: c_int) -> io::Result<OwnedFd> {
    let fd = cvt(fd)?;
    // SAFETY: `fd` was just returned by the kernel and nothing else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

// ---- the AF_XDP socket ----------------------------------------------------------------

/// `socket(AF_XDP, SOCK_RAW)`.
pub(crate) fn xsk_socket() -> io::Result<OwnedFd> {
    // SAFETY: socket() takes no pointers.
    owned(unsafe { libc::socket(libc::AF_XDP, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0) })
}

/// Plain-old-data option values: every bit pattern is a valid value.
///
/// # Safety
/// Implement only for `repr(C)` integer-only types without padding the kernel reads.
pub(crate) unsafe trait Pod: Copy {}
// SAFETY: integers.
unsafe impl Pod for u32 {}
// SAFETY: repr(C) structs of u64/u32 fields.
unsafe impl Pod for libc::xdp_umem_reg {}
// SAFETY: as above.
unsafe impl Pod for libc::xdp_mmap_offsets {}
// SAFETY: as above.
unsafe impl Pod for libc::xdp_statistics {}
// SAFETY: as above.
unsafe impl Pod for libc::xdp_options {}

/// `setsockopt(fd, SOL_XDP, opt, value)`.
pub(crate) fn set_xdp_opt<T: Pod>(fd: &OwnedFd, opt: c_int, value: &T) -> io::Result<()> {
    // SAFETY: the kernel reads `size_of::<T>()` bytes from `value`, which is valid for
    // the call.
    cvt(unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            libc::SOL_XDP,
            opt,
            (value as *const T).cast::<c_void>(),
            size_of::<T>() as libc::socklen_t,
        )
    })
    .map(drop)
}

/// `getsockopt(fd, SOL_XDP, opt)`: the value and the length the kernel wrote.
pub(crate) fn get_xdp_opt<T: Pod>(fd: &OwnedFd, opt: c_int) -> io::Result<(T, usize)> {
    let mut value = MaybeUninit::<T>::zeroed();
    let mut len = size_of::<T>() as libc::socklen_t;
    // SAFETY: the kernel writes at most `len` bytes into `value`, valid for the call.
    cvt(unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            libc::SOL_XDP,
            opt,
            value.as_mut_ptr().cast::<c_void>(),
            &mut len,
        )
    })?;
    // SAFETY: zero-initialised, and all-zero bytes (or whatever the kernel wrote over
    // them) are a valid `T` (`Pod`).
    Ok((unsafe { value.assume_init() }, len as usize))
}

/// `bind` the socket to (`ifindex`, `queue`) with `XDP_*` `flags`.
pub(crate) fn bind_xsk(fd: &OwnedFd, ifindex: u32, queue: u32, flags: u16) -> io::Result<()> {
    let addr = libc::sockaddr_xdp {
        sxdp_family: libc::AF_XDP as u16,
        sxdp_flags: flags,
        sxdp_ifindex: ifindex,
        sxdp_queue_id: queue,
        sxdp_shared_umem_fd: 0,
    };
    // SAFETY: the kernel reads one sockaddr_xdp of the given length.
    cvt(unsafe {
        libc::bind(
            fd.as_raw_fd(),
            (&addr as *const libc::sockaddr_xdp).cast::<libc::sockaddr>(),
            size_of::<libc::sockaddr_xdp>() as libc::socklen_t,
        )
    })
    .map(drop)
}

/// Ask the kernel to process the TX ring (`sendto` with no data): the wake-up copy mode
/// and `XDP_USE_NEED_WAKEUP` require.
pub(crate) fn kick_tx(fd: RawFd) -> io::Result<()> {
    // SAFETY: a zero-length send with null buffer and address reads no memory.
    let rc = unsafe {
        libc::sendto(
            fd,
            std::ptr::null(),
            0,
            libc::MSG_DONTWAIT,
            std::ptr::null(),
            0,
        )
    };
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// Ask the kernel to process the fill ring (`recvfrom` with no buffer).
pub(crate) fn kick_rx(fd: RawFd) {
    // SAFETY: a zero-length receive with null buffer and address writes no memory.
    unsafe {
        libc::recvfrom(
            fd,
            std::ptr::null_mut(),
            0,
            libc::MSG_DONTWAIT,
            std::ptr::null_mut(),
            std::ptr::null_mut(),
        );
    }
}

// ---- memory ---------------------------------------------------------------------------

/// A mapping made by [`mmap`], unmapped by [`munmap`].
pub(crate) struct Mapping {
    pub(crate) ptr: NonNull<u8>,
    pub(crate) len: usize,
}

/// What [`mmap`] maps.
pub(crate) enum Source<'a> {
    /// Anonymous memory (the UMEM): private, or shared with processes forked later.
    Anonymous { shared: bool },
    /// A ring of an XDP socket, at a page offset.
    Ring(&'a OwnedFd, u64),
}

/// Map `len` bytes of `source`. Pages are populated up front.
pub(crate) fn mmap(len: usize, source: Source<'_>) -> io::Result<Mapping> {
    let (flags, raw, offset) = match source {
        Source::Anonymous { shared: false } => (libc::MAP_PRIVATE | libc::MAP_ANONYMOUS, -1, 0),
        Source::Anonymous { shared: true } => (libc::MAP_SHARED | libc::MAP_ANONYMOUS, -1, 0),
        Source::Ring(fd, offset) => (libc::MAP_SHARED, fd.as_raw_fd(), offset),
    };
    // SAFETY: a fresh mapping chosen by the kernel (null hint) overlaps nothing we own.
    let ptr = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            flags | libc::MAP_POPULATE,
            raw,
            offset as libc::off_t,
        )
    };
    if ptr == libc::MAP_FAILED {
        return Err(io::Error::last_os_error());
    }
    NonNull::new(ptr.cast::<u8>())
        .map(|ptr| Mapping { ptr, len })
        .ok_or_else(|| io::Error::from(io::ErrorKind::OutOfMemory))
}

/// Undo [`mmap`].
///
/// # Safety
/// `m` came from [`mmap`] and nothing refers into it any more.
pub(crate) unsafe fn munmap(m: &Mapping) {
    // SAFETY: by the contract, the range is a live mapping nobody uses.
    unsafe {
        libc::munmap(m.ptr.as_ptr().cast::<c_void>(), m.len);
    }
}

// ---- bpf(2) ---------------------------------------------------------------------------

const BPF_MAP_CREATE: c_int = 0;
const BPF_MAP_UPDATE_ELEM: c_int = 2;
const BPF_PROG_LOAD: c_int = 5;
const BPF_LINK_CREATE: c_int = 28;
const BPF_MAP_TYPE_HASH: u32 = 1;
const BPF_MAP_TYPE_XSKMAP: u32 = 17;
/// The program may read the map but not write it.
const BPF_F_RDONLY_PROG: u32 = 1 << 7;
const BPF_PROG_TYPE_XDP: u32 = 6;
/// `enum bpf_attach_type`: BPF_XDP.
const BPF_XDP: u32 = 37;

/// `union bpf_attr`, as bytes: each command fills the fields it uses at their offsets
/// and leaves the rest zero, which the kernel requires.
struct BpfAttr([u8; 128]);

impl BpfAttr {
    fn new() -> BpfAttr {
        BpfAttr([0; 128])
    }
    fn u32(&mut self, off: usize, v: u32) -> &mut Self {
        self.0[off..off + 4].copy_from_slice(&v.to_ne_bytes());
        self
    }
    fn u64(&mut self, off: usize, v: u64) -> &mut Self {
        self.0[off..off + 8].copy_from_slice(&v.to_ne_bytes());
        self
    }
    fn name(&mut self, off: usize, name: &str) -> &mut Self {
        let n = name.len().min(15);
        self.0[off..off + n].copy_from_slice(&name.as_bytes()[..n]);
        self
    }
}

fn bpf(cmd: c_int, attr: &mut BpfAttr) -> c_int {
    // SAFETY: the kernel reads (and for some commands writes) at most `size_of` bytes of
    // the attribute union, all inside `attr`. Pointers stored in it by the callers point
    // to memory that outlives this call.
    unsafe {
        libc::syscall(
            libc::SYS_bpf,
            cmd,
            attr.0.as_mut_ptr(),
            attr.0.len() as libc::c_uint,
        ) as c_int
    }
}

/// A map of `entries` entries of the given sizes.
fn create_map(
    kind: u32,
    key_size: u32,
    value_size: u32,
    entries: u32,
    flags: u32,
    name: &str,
) -> io::Result<OwnedFd> {
    let mut a = BpfAttr::new();
    a.u32(0, kind)
        .u32(4, key_size)
        .u32(8, value_size)
        .u32(12, entries)
        .u32(16, flags)
        .name(28, name);
    owned(bpf(BPF_MAP_CREATE, &mut a))
}

/// `map[key] = value`. The kernel reads the map's key and value sizes from the two
/// pointers: `K` and `V` must be exactly those sizes.
fn map_update<K, V>(map: &OwnedFd, key: &K, value: &V) -> io::Result<()> {
    let mut a = BpfAttr::new();
    a.u32(0, map.as_raw_fd() as u32)
        .u64(8, key as *const K as u64)
        .u64(16, value as *const V as u64)
        .u64(24, 0);
    cvt(bpf(BPF_MAP_UPDATE_ELEM, &mut a)).map(drop)
}

/// An XSKMAP (queue index → XDP socket) of `entries` entries.
pub(crate) fn create_xskmap(entries: u32, name: &str) -> io::Result<OwnedFd> {
    create_map(BPF_MAP_TYPE_XSKMAP, 4, 4, entries, 0, name)
}

/// `map[key] = fd` in an XSKMAP.
pub(crate) fn xskmap_set(map: &OwnedFd, key: u32, fd: &OwnedFd) -> io::Result<()> {
    map_update(map, &key, &(fd.as_raw_fd() as u32))
}

/// A set of `entries` 16-byte keys (IPv6 addresses): a hash map with one-byte values
/// that the program may only read.
pub(crate) fn create_addr_set(entries: u32, name: &str) -> io::Result<OwnedFd> {
    create_map(BPF_MAP_TYPE_HASH, 16, 1, entries, BPF_F_RDONLY_PROG, name)
}

/// Put `key` in a set made by [`create_addr_set`].
pub(crate) fn addr_set_insert(set: &OwnedFd, key: &[u8; 16]) -> io::Result<()> {
    map_update(set, key, &1u8)
}

/// Load an XDP program. On failure the verifier's log comes with the error.
pub(crate) fn load_xdp_program(
    insns: &[u64],
    license: &str,
    name: &str,
) -> Result<OwnedFd, (io::Error, String)> {
    let license = CString::new(license).expect("license has no NUL");
    let mut log = vec![0u8; 64 * 1024];
    let load = |log_level: u32, log: &mut [u8]| {
        let mut a = BpfAttr::new();
        a.u32(0, BPF_PROG_TYPE_XDP)
            .u32(4, insns.len() as u32)
            .u64(8, insns.as_ptr() as u64)
            .u64(16, license.as_ptr() as u64)
            .u32(24, log_level)
            .u32(28, if log_level > 0 { log.len() as u32 } else { 0 })
            .u64(
                32,
                if log_level > 0 {
                    log.as_mut_ptr() as u64
                } else {
                    0
                },
            )
            .name(48, name)
            .u32(68, BPF_XDP);
        owned(bpf(BPF_PROG_LOAD, &mut a))
    };
    load(0, &mut log).or_else(|_| {
        // Load again with the verifier's log on, to say why.
        load(1, &mut log).map_err(|e| {
            let end = log.iter().position(|&b| b == 0).unwrap_or(log.len());
            (e, String::from_utf8_lossy(&log[..end]).trim().to_string())
        })
    })
}

/// Attach `prog` to `ifindex` through a BPF link with `XDP_FLAGS_*` `flags`; the
/// program stays attached exactly as long as the returned descriptor is open.
pub(crate) fn link_xdp(prog: &OwnedFd, ifindex: u32, flags: u32) -> io::Result<OwnedFd> {
    let mut a = BpfAttr::new();
    a.u32(0, prog.as_raw_fd() as u32)
        .u32(4, ifindex)
        .u32(8, BPF_XDP)
        .u32(12, flags);
    owned(bpf(BPF_LINK_CREATE, &mut a))
}

// ---- interfaces -------------------------------------------------------------------------

/// A packet socket that receives nothing (protocol 0), to hold link-layer multicast
/// memberships: they last as long as it is open.
pub(crate) fn membership_socket() -> io::Result<OwnedFd> {
    // SAFETY: socket() takes no pointers.
    owned(unsafe { libc::socket(libc::AF_PACKET, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0) })
}

/// Have interface `ifindex` accept frames for the Ethernet multicast address `mac`
/// while `fd` (a [`membership_socket`]) is open (`PACKET_ADD_MEMBERSHIP`).
pub(crate) fn add_multicast(fd: &OwnedFd, ifindex: u32, mac: [u8; 6]) -> io::Result<()> {
    let mut mr_address = [0u8; 8];
    mr_address[..6].copy_from_slice(&mac);
    let mreq = libc::packet_mreq {
        mr_ifindex: ifindex as c_int,
        mr_type: libc::PACKET_MR_MULTICAST as libc::c_ushort,
        mr_alen: 6,
        mr_address,
    };
    // SAFETY: the kernel reads one packet_mreq of the given length from `mreq`, valid
    // for the call.
    cvt(unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            libc::SOL_PACKET,
            libc::PACKET_ADD_MEMBERSHIP,
            (&mreq as *const libc::packet_mreq).cast::<c_void>(),
            size_of::<libc::packet_mreq>() as libc::socklen_t,
        )
    })
    .map(drop)
}

/// The interface index of `name`, or `None` if there is no such interface.
pub(crate) fn if_index(name: &str) -> Option<u32> {
    let c = CString::new(name).ok()?;
    // SAFETY: `c` is a valid NUL-terminated string for the call.
    let i = unsafe { libc::if_nametoindex(c.as_ptr()) };
    (i != 0).then_some(i)
}

const ETHTOOL_GCHANNELS: u32 = 0x3c;
const ETHTOOL_GRSSH: u32 = 0x46;

/// `ETHTOOL_GCHANNELS`: the current (rx, tx, combined) channel counts.
pub(crate) fn channels(name: &str) -> io::Result<(u32, u32, u32)> {
    // struct ethtool_channels: cmd, max_rx, max_tx, max_other, max_combined, rx_count,
    // tx_count, other_count, combined_count.
    let mut buf = [0u32; 9];
    buf[0] = ETHTOOL_GCHANNELS;
    // SAFETY: ETHTOOL_GCHANNELS reads and writes one ethtool_channels: nine u32s.
    unsafe { Interface::new(name)?.ethtool(&mut buf) }?;
    Ok((buf[5], buf[6], buf[8]))
}

/// `ETHTOOL_GRSSH` on the default context: (hash function bits, key, indirection table).
pub(crate) fn rss(name: &str) -> io::Result<(u8, Vec<u8>, Vec<u32>)> {
    // struct ethtool_rxfh: cmd, rss_context, indir_size, key_size, then hfunc (u8),
    // input_xfrm (u8), 2 reserved bytes, one reserved u32, then the table and the key.
    const HEAD: usize = 6;
    let iface = Interface::new(name)?;
    let mut head = [0u32; HEAD];
    head[0] = ETHTOOL_GRSSH;
    // SAFETY: with both sizes zero, ETHTOOL_GRSSH writes only the fixed header (six
    // u32s), reporting the sizes.
    unsafe { iface.ethtool(&mut head) }?;
    let (indir, key) = (head[2] as usize, head[3] as usize);
    if indir > 65536 || key > 1024 {
        return Err(io::Error::from(io::ErrorKind::InvalidData));
    }
    let mut buf = vec![0u32; HEAD + indir + key.div_ceil(4)];
    buf[0] = ETHTOOL_GRSSH;
    buf[2] = indir as u32;
    buf[3] = key as u32;
    // SAFETY: the kernel writes the header, `indir` table entries and `key` key bytes
    // after it, which is exactly what `buf` was sized for.
    unsafe { iface.ethtool(&mut buf) }?;
    let hfunc = buf[4].to_ne_bytes()[0];
    let table = buf[HEAD..HEAD + indir].to_vec();
    let key_bytes: Vec<u8> = buf[HEAD + indir..]
        .iter()
        .flat_map(|w| w.to_ne_bytes())
        .take(key)
        .collect();
    Ok((hfunc, key_bytes, table))
}
