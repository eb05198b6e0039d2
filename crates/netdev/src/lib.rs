//! # rusty-netdev
//!
//! The system calls Rusty's Linux drivers (TAP, AF_XDP) share: interface ioctls on an
//! `AF_INET` socket (MTU, MAC, address, netmask, flags, `SIOCETHTOOL`), an IPv6 address
//! through rtnetlink ([`add_ipv6_address`]) and a wait on several descriptors. This
//! crate is nothing but those calls. The sockets, the netlink exchange, the interface
//! index and the wait go through rustix; the `struct ifreq` ioctls, which rustix does
//! not wrap, stay on libc. Each function is safe to call and states above its `unsafe`
//! block why the call is sound.

// The crate's purpose is wrapping system calls.
#![allow(unsafe_code)]
#![warn(missing_docs)]

use std::ffi::c_int;
use std::io;
use std::net::Ipv4Addr;
use std::os::fd::{AsRawFd, BorrowedFd, OwnedFd};
use std::time::Duration;

use rustix::event::{PollFd, PollFlags, Timespec};
use rustix::net::{AddressFamily, SocketFlags, SocketType};

mod ipv6;

pub use ipv6::add_ipv6_address;

/// Longest interface name, NUL excluded (`IFNAMSIZ - 1`).
pub const MAX_IFNAME: usize = libc::IFNAMSIZ - 1;

/// Why `name` cannot name an interface, if it cannot: empty, longer than
/// [`MAX_IFNAME`], or holding '/', NUL or whitespace.
pub fn bad_ifname(name: &str) -> Option<String> {
    let ok = !name.is_empty()
        && name.len() <= MAX_IFNAME
        && !name.contains(['/', '\0'])
        && !name.contains(char::is_whitespace);
    (!ok).then(|| {
        format!("'{name}' is not a valid interface name (1 to {MAX_IFNAME} bytes, no '/', NUL or spaces)")
    })
}

/// An all-zero `struct ifreq` naming `name` (cut at [`MAX_IFNAME`] bytes).
pub fn ifreq(name: &str) -> libc::ifreq {
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
pub fn ifreq_name(req: &libc::ifreq) -> String {
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
/// as `TUNSETIFF` and `SIOC[SG]IF*`), and nothing beyond it, except through pointers the
/// caller stored in `arg` and keeps valid for the call.
#[allow(clippy::unnecessary_cast)] // the request type is c_ulong on glibc, c_int on musl
pub unsafe fn ioctl_ifreq(
    fd: &impl AsRawFd,
    req: libc::c_ulong,
    arg: &mut libc::ifreq,
) -> io::Result<()> {
    // SAFETY: by this function's contract the request touches one `struct ifreq` (and
    // what the caller made it point to), and `arg` is a valid, exclusive one.
    let rc = unsafe { libc::ioctl(fd.as_raw_fd(), req as libc::Ioctl, arg as *mut libc::ifreq) };
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// Block until one of `fds` is readable or `timeout` passes (`ppoll`, nanosecond
/// timeout); which were. Interruptions and errors end the wait with none ready: callers
/// poll their queues next anyway.
pub fn wait_readable<const N: usize>(fds: [BorrowedFd<'_>; N], timeout: Duration) -> [bool; N] {
    let mut pfds = fds.map(|fd| PollFd::from_borrowed_fd(fd, PollFlags::IN));
    let ts = Timespec {
        tv_sec: timeout.as_secs().min(i32::MAX as u64) as _,
        tv_nsec: timeout.subsec_nanos() as _,
    };
    match rustix::event::poll(&mut pfds, Some(&ts)) {
        Ok(ready) if ready > 0 => pfds.map(|p| !p.revents().is_empty()),
        _ => [false; N],
    }
}

/// [`wait_readable`] on `fd` and, when given, a second descriptor `bell` (a queue's
/// doorbell); returns whether `bell` was readable, so the caller can drain it.
pub fn wait_readable_or(
    fd: BorrowedFd<'_>,
    bell: Option<BorrowedFd<'_>>,
    timeout: Duration,
) -> bool {
    match bell {
        None => {
            wait_readable([fd], timeout);
            false
        }
        Some(bell) => wait_readable([fd, bell], timeout)[1],
    }
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

/// One interface's settings, read and made through ioctls on an `AF_INET` socket (in
/// the calling thread's network namespace).
pub struct Interface {
    sock: OwnedFd,
    name: String,
}

impl Interface {
    /// A handle for `name` (checked by the kernel on each call, not here).
    pub fn new(name: &str) -> io::Result<Interface> {
        let sock = rustix::net::socket_with(
            AddressFamily::INET,
            SocketType::DGRAM,
            SocketFlags::CLOEXEC,
            None,
        )?;
        Ok(Interface {
            sock,
            name: name.to_string(),
        })
    }

    fn call(&self, req: libc::c_ulong, arg: &mut libc::ifreq) -> io::Result<()> {
        // SAFETY: every caller passes a request that takes one ifreq (SIOC[SG]IF*), or
        // SIOCETHTOOL with `ifr_data` pointing at a buffer whose size `ethtool`'s
        // caller vouches for.
        unsafe { ioctl_ifreq(&self.sock, req, arg) }
    }

    /// `SIOCGIFMTU`.
    pub fn mtu(&self) -> io::Result<usize> {
        let mut req = ifreq(&self.name);
        self.call(libc::SIOCGIFMTU, &mut req)?;
        // SAFETY: SIOCGIFMTU filled `ifru_mtu`, the member read here.
        Ok(unsafe { req.ifr_ifru.ifru_mtu }.max(0) as usize)
    }

    /// `SIOCSIFMTU`.
    pub fn set_mtu(&self, mtu: usize) -> io::Result<()> {
        let mut req = ifreq(&self.name);
        req.ifr_ifru.ifru_mtu =
            c_int::try_from(mtu).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
        self.call(libc::SIOCSIFMTU, &mut req)
    }

    /// `SIOCGIFHWADDR`: the MAC address.
    pub fn hw_addr(&self) -> io::Result<[u8; 6]> {
        let mut req = ifreq(&self.name);
        self.call(libc::SIOCGIFHWADDR, &mut req)?;
        // SAFETY: SIOCGIFHWADDR filled `ifru_hwaddr`, the member read here.
        let sa = unsafe { req.ifr_ifru.ifru_hwaddr };
        let mut mac = [0u8; 6];
        for (m, &b) in mac.iter_mut().zip(sa.sa_data.iter()) {
            *m = b as u8;
        }
        Ok(mac)
    }

    /// `SIOCSIFADDR`.
    pub fn set_addr(&self, ip: Ipv4Addr) -> io::Result<()> {
        let mut req = ifreq(&self.name);
        req.ifr_ifru.ifru_addr = sockaddr_in(ip);
        self.call(libc::SIOCSIFADDR, &mut req)
    }

    /// `SIOCSIFNETMASK`.
    pub fn set_netmask(&self, mask: Ipv4Addr) -> io::Result<()> {
        let mut req = ifreq(&self.name);
        req.ifr_ifru.ifru_netmask = sockaddr_in(mask);
        self.call(libc::SIOCSIFNETMASK, &mut req)
    }

    /// Set `IFF_UP`, keeping the other flags.
    pub fn bring_up(&self) -> io::Result<()> {
        let mut req = ifreq(&self.name);
        self.call(libc::SIOCGIFFLAGS, &mut req)?;
        // SAFETY: SIOCGIFFLAGS just filled `ifru_flags`, the union member read here.
        let flags = unsafe { req.ifr_ifru.ifru_flags };
        req.ifr_ifru.ifru_flags = flags | libc::IFF_UP as libc::c_short;
        self.call(libc::SIOCSIFFLAGS, &mut req)
    }

    /// `SIOCETHTOOL` with `buf` as the command structure (it starts with the command
    /// word).
    ///
    /// # Safety
    /// The command in `buf[0]`, with the sizes `buf` states for it, makes the kernel
    /// read and write only within `buf`.
    pub unsafe fn ethtool(&self, buf: &mut [u32]) -> io::Result<()> {
        let mut req = ifreq(&self.name);
        req.ifr_ifru.ifru_data = buf.as_mut_ptr().cast::<libc::c_char>();
        self.call(libc::SIOCETHTOOL, &mut req)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_checked_and_carried() {
        assert!(bad_ifname("eth0").is_none());
        for bad in ["", "averyveryverylongname", "a/b", "a b", "a\0"] {
            assert!(bad_ifname(bad).is_some(), "{bad:?}");
        }
        assert_eq!(ifreq_name(&ifreq("veth9")), "veth9");
    }

    #[test]
    fn loopback_answers_the_read_ioctls() {
        let lo = Interface::new("lo").unwrap();
        assert!(lo.mtu().unwrap() >= 1500);
        assert_eq!(lo.hw_addr().unwrap(), [0; 6]);
        let none = Interface::new("rustynosuch0").unwrap();
        assert!(none.mtu().is_err());
    }
}
