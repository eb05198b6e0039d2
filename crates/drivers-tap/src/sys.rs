//! Every system call the driver makes that std does not wrap: the TUN and interface
//! ioctls, `ppoll` and `getrandom`. This is the crate's only `unsafe`; each function is
//! safe to call and states above its block why the call is sound.

use std::ffi::{c_int, c_uint};
use std::fs::{File, OpenOptions};
use std::io;
use std::net::Ipv4Addr;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::os::unix::fs::OpenOptionsExt;
use std::time::Duration;

/// Longest interface name, NUL excluded (`IFNAMSIZ - 1`).
pub(crate) const MAX_IFNAME: usize = libc::IFNAMSIZ - 1;

/// An all-zero `struct ifreq` naming `name` (which must be at most [`MAX_IFNAME`] bytes
/// and hold no NUL; callers check).
fn ifreq(name: &str) -> libc::ifreq {
    // SAFETY: `ifreq` is plain old data (a byte array and a union of integers, sockaddrs
    // and a pointer); all-zero bytes are a valid value of each.
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    for (dst, &b) in req
        .ifr_name
        .iter_mut()
        .zip(name.as_bytes().iter().take(MAX_IFNAME))
    {
        *dst = b as libc::c_char;
    }
    req
}

/// The NUL-terminated name in `req`.
fn ifreq_name(req: &libc::ifreq) -> String {
    let bytes: Vec<u8> = req
        .ifr_name
        .iter()
        .take_while(|&&c| c != 0)
        .map(|&c| c as u8)
        .collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

/// `ioctl(fd, req, &mut ifreq)`.
///
/// # Safety
/// `req` is a request that reads and/or writes one `struct ifreq` at its argument (such
/// as TUNSETIFF and SIOC[SG]IF*), and nothing beyond it.
#[allow(clippy::unnecessary_cast)] // the request type is c_ulong on glibc, c_int on musl
unsafe fn ioctl_ifreq(
    fd: &impl AsRawFd,
    req: libc::c_ulong,
    arg: &mut libc::ifreq,
) -> io::Result<()> {
    // SAFETY: by this function's contract the request touches one `struct ifreq`, and
    // `arg` is a valid, exclusive one for the call.
    let rc = unsafe { libc::ioctl(fd.as_raw_fd(), req as libc::Ioctl, arg as *mut libc::ifreq) };
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

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
    let mut req = ifreq(name);
    req.ifr_ifru.ifru_flags = flags as libc::c_short;
    // SAFETY: TUNSETIFF takes one ifreq.
    unsafe { ioctl_ifreq(&file, libc::TUNSETIFF as libc::c_ulong, &mut req) }
        .map_err(|e| ("TUNSETIFF", e))?;
    Ok((file, ifreq_name(&req)))
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

/// Block until one of `fds` is readable (or has an error or hang-up to report) or
/// `timeout` passes (`ppoll`, nanosecond timeout); returns which of them were ready.
/// Interruptions and errors simply end the wait with none ready: callers poll their
/// queue next anyway.
pub(crate) fn wait_readable<const N: usize>(
    fds: [BorrowedFd<'_>; N],
    timeout: Duration,
) -> [bool; N] {
    let mut pfds = fds.map(|fd| libc::pollfd {
        fd: fd.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    });
    let ts = libc::timespec {
        tv_sec: timeout.as_secs().min(i32::MAX as u64) as libc::time_t,
        tv_nsec: timeout.subsec_nanos() as libc::c_long,
    };
    // SAFETY: `pfds` is an array of N valid pollfds and N is the count passed; `ts` is a
    // valid timespec, and a null signal mask means "leave the mask alone"; all outlive
    // the call. The descriptors are borrowed, so they stay open during it.
    let ready = unsafe { libc::ppoll(pfds.as_mut_ptr(), N as libc::nfds_t, &ts, std::ptr::null()) };
    if ready <= 0 {
        return [false; N];
    }
    pfds.map(|p| p.revents != 0)
}

/// An `AF_INET` datagram socket: the handle interface ioctls go through.
fn inet_socket() -> io::Result<OwnedFd> {
    // SAFETY: socket() takes no pointers.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` was just returned by socket() and nothing else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

fn sockaddr_in(ip: Ipv4Addr) -> libc::sockaddr {
    let sin = libc::sockaddr_in {
        sin_family: libc::AF_INET as libc::sa_family_t,
        sin_port: 0,
        sin_addr: libc::in_addr {
            s_addr: u32::from_ne_bytes(ip.octets()),
        },
        sin_zero: [0; 8],
    };
    // SAFETY: sockaddr_in and sockaddr are both 16-byte POD C structs; the kernel reads
    // this sockaddr as a sockaddr_in because its family is AF_INET.
    unsafe { std::mem::transmute::<libc::sockaddr_in, libc::sockaddr>(sin) }
}

/// Host-side interface settings, made through `SIOCSIF*` ioctls.
pub(crate) struct Interface {
    sock: OwnedFd,
    name: String,
}

impl Interface {
    pub(crate) fn new(name: &str) -> io::Result<Interface> {
        Ok(Interface {
            sock: inet_socket()?,
            name: name.to_string(),
        })
    }

    pub(crate) fn set_mtu(&self, mtu: usize) -> io::Result<()> {
        let mut req = ifreq(&self.name);
        req.ifr_ifru.ifru_mtu =
            c_int::try_from(mtu).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
        // SAFETY: SIOCSIFMTU takes one ifreq.
        unsafe { ioctl_ifreq(&self.sock, libc::SIOCSIFMTU, &mut req) }
    }

    pub(crate) fn set_addr(&self, ip: Ipv4Addr) -> io::Result<()> {
        let mut req = ifreq(&self.name);
        req.ifr_ifru.ifru_addr = sockaddr_in(ip);
        // SAFETY: SIOCSIFADDR takes one ifreq.
        unsafe { ioctl_ifreq(&self.sock, libc::SIOCSIFADDR, &mut req) }
    }

    pub(crate) fn set_netmask(&self, mask: Ipv4Addr) -> io::Result<()> {
        let mut req = ifreq(&self.name);
        req.ifr_ifru.ifru_netmask = sockaddr_in(mask);
        // SAFETY: SIOCSIFNETMASK takes one ifreq.
        unsafe { ioctl_ifreq(&self.sock, libc::SIOCSIFNETMASK, &mut req) }
    }

    /// Set `IFF_UP`, keeping the other flags.
    pub(crate) fn bring_up(&self) -> io::Result<()> {
        let mut req = ifreq(&self.name);
        // SAFETY: SIOCGIFFLAGS takes one ifreq.
        unsafe { ioctl_ifreq(&self.sock, libc::SIOCGIFFLAGS, &mut req) }?;
        // SAFETY: SIOCGIFFLAGS just filled `ifru_flags`, the union member read here.
        let flags = unsafe { req.ifr_ifru.ifru_flags };
        req.ifr_ifru.ifru_flags = flags | libc::IFF_UP as libc::c_short;
        // SAFETY: SIOCSIFFLAGS takes one ifreq.
        unsafe { ioctl_ifreq(&self.sock, libc::SIOCSIFFLAGS, &mut req) }
    }
}

/// `buf.len()` random bytes from the kernel's CSPRNG.
pub(crate) fn random_bytes(buf: &mut [u8]) -> io::Result<()> {
    let mut filled = 0;
    // getrandom() returns at most 32 MiB per call and may be interrupted; a few calls
    // always suffice for the handful of bytes asked here.
    for _ in 0..16 {
        if filled == buf.len() {
            return Ok(());
        }
        let rest = &mut buf[filled..];
        // SAFETY: the kernel writes at most `rest.len()` bytes into `rest`, which is
        // valid and exclusively borrowed for the call.
        let n = unsafe { libc::getrandom(rest.as_mut_ptr().cast(), rest.len(), 0) };
        if n < 0 {
            let e = io::Error::last_os_error();
            if e.kind() != io::ErrorKind::Interrupted {
                return Err(e);
            }
        } else {
            filled += n as usize;
        }
    }
    if filled == buf.len() {
        Ok(())
    } else {
        Err(io::Error::from(io::ErrorKind::Interrupted))
    }
}
