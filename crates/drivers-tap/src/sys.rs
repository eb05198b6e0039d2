//! Every system call the driver makes that neither std nor `rusty-netdev` (interface
//! ioctls, waiting on descriptors) wraps: the TUN ioctls. This is the
//! crate's only `unsafe`; each function is safe to call and states above its block why
//! the call is sound.

use std::ffi::{c_int, c_uint};
use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::OpenOptionsExt;

/// Open `/dev/net/tun` non-blocking and attach it, as one queue, to the TAP `name`
/// (created if missing) with `flags` (`IFF_*`). Returns the file and the device's name.
pub(crate) fn open_tap_queue(
    name: &str,
    flags: c_int,
) -> Result<(File, String), (&'static str, io::Error)> {
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open("/dev/net/tun")
        .map_err(|e| ("opening /dev/net/tun", e))?;
    let mut req = rusty_netdev::ifreq(name);
    req.ifr_ifru.ifru_flags = flags as libc::c_short;
    // SAFETY: TUNSETIFF takes one ifreq.
    unsafe { rusty_netdev::ioctl_ifreq(&file, libc::TUNSETIFF as libc::c_ulong, &mut req) }
        .map_err(|e| ("TUNSETIFF", e))?;
    Ok((file, rusty_netdev::ifreq_name(&req)))
}

/// Let the kernel steer frames to this queue of a multi-queue TAP (`IFF_ATTACH_QUEUE`)
/// or stop it (`IFF_DETACH_QUEUE`); a detached queue keeps its descriptor.
pub(crate) fn set_queue_attached(file: &File, attached: bool) -> io::Result<()> {
    let mut req = rusty_netdev::ifreq("");
    let flag = if attached {
        libc::IFF_ATTACH_QUEUE
    } else {
        libc::IFF_DETACH_QUEUE
    };
    req.ifr_ifru.ifru_flags = flag as libc::c_short;
    // SAFETY: TUNSETQUEUE takes one ifreq, of which it reads the flags.
    unsafe { rusty_netdev::ioctl_ifreq(file, libc::TUNSETQUEUE as libc::c_ulong, &mut req) }
}

/// `TUNSETVNETHDRSZ`: the length of the virtio-net header on this queue.
#[allow(clippy::unnecessary_cast)]
pub(crate) fn set_vnet_hdr_len(file: &File, len: usize) -> io::Result<()> {
    let len = c_int::try_from(len).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    // SAFETY: TUNSETVNETHDRSZ reads one `int` through its argument pointer, which points
    // at `len`, alive for the call.
    let rc = unsafe {
        libc::ioctl(
            file.as_raw_fd(),
            libc::TUNSETVNETHDRSZ as libc::Ioctl,
            &len as *const c_int,
        )
    };
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// `TUNSETOFFLOAD`: which offloads (`TUN_F_*`) the kernel may use on frames it hands us.
#[allow(clippy::unnecessary_cast)]
pub(crate) fn set_offload(file: &File, flags: c_uint) -> io::Result<()> {
    // SAFETY: TUNSETOFFLOAD takes its argument by value (an unsigned long); no memory
    // is read or written through it.
    let rc = unsafe {
        libc::ioctl(
            file.as_raw_fd(),
            libc::TUNSETOFFLOAD as libc::Ioctl,
            flags as libc::c_ulong,
        )
    };
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}
