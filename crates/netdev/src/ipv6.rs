//! Giving an interface an IPv6 address, through rtnetlink (`RTM_NEWADDR`): the one
//! setting the ioctls cannot make, since only netlink carries `IFA_F_NODAD`, which
//! makes the address usable at once instead of after the kernel's duplicate address
//! detection (`ip addr add ... nodad`).

use std::io;
use std::net::Ipv6Addr;
use std::time::Duration;

use rustix::net::netlink::SocketAddrNetlink;
use rustix::net::sockopt::{self, Timeout};
use rustix::net::{AddressFamily, RecvFlags, SendFlags, SocketFlags, SocketType};

/// `struct nlmsghdr`: length, type, flags, sequence number, port id.
const NLMSG_HDR_LEN: usize = 16;
/// `struct ifaddrmsg`: family, prefix length, flags, scope, interface index.
const IFADDRMSG_LEN: usize = 8;
/// An `rtattr` header and an IPv6 address (a multiple of 4, so no padding follows).
const ADDR_ATTR_LEN: usize = 4 + 16;
/// `IFA_FLAGS`: an `rtattr` header and a `u32`.
const FLAGS_ATTR_LEN: usize = 4 + 4;

/// `IFA_F_NODAD` (linux/if_addr.h): skip duplicate address detection.
const IFA_F_NODAD: u32 = 0x02;
/// `IFA_ADDRESS`, `IFA_LOCAL` and `IFA_FLAGS` (linux/if_addr.h).
const IFA_ADDRESS: u16 = 1;
const IFA_LOCAL: u16 = 2;
const IFA_FLAGS: u16 = 8;

/// The `RTM_NEWADDR` request that gives interface `index` the address `ip/prefix`
/// (replacing it if it is there), marked `nodad` when asked.
fn new_addr_request(index: u32, ip: Ipv6Addr, prefix: u8, nodad: bool, seq: u32) -> Vec<u8> {
    let len = NLMSG_HDR_LEN + IFADDRMSG_LEN + 2 * ADDR_ATTR_LEN + FLAGS_ATTR_LEN;
    let flags = libc::NLM_F_REQUEST | libc::NLM_F_ACK | libc::NLM_F_CREATE | libc::NLM_F_REPLACE;
    let ifa_flags = if nodad { IFA_F_NODAD } else { 0 };
    let mut m = Vec::with_capacity(len);
    m.extend_from_slice(&(len as u32).to_ne_bytes());
    m.extend_from_slice(&libc::RTM_NEWADDR.to_ne_bytes());
    m.extend_from_slice(&(flags as u16).to_ne_bytes());
    m.extend_from_slice(&seq.to_ne_bytes());
    m.extend_from_slice(&0u32.to_ne_bytes());
    // ifaddrmsg: universe scope; the 8-bit flags field takes NODAD too, for kernels
    // older than IFA_FLAGS.
    m.extend_from_slice(&[libc::AF_INET6 as u8, prefix, ifa_flags as u8, 0]);
    m.extend_from_slice(&index.to_ne_bytes());
    for kind in [IFA_LOCAL, IFA_ADDRESS] {
        m.extend_from_slice(&(ADDR_ATTR_LEN as u16).to_ne_bytes());
        m.extend_from_slice(&kind.to_ne_bytes());
        m.extend_from_slice(&ip.octets());
    }
    m.extend_from_slice(&(FLAGS_ATTR_LEN as u16).to_ne_bytes());
    m.extend_from_slice(&IFA_FLAGS.to_ne_bytes());
    m.extend_from_slice(&ifa_flags.to_ne_bytes());
    debug_assert_eq!(m.len(), len);
    m
}

/// The error code of the kernel's answer to request `seq`: 0 for success, a negative
/// errno otherwise; `None` if `answer` is not that acknowledgement.
fn ack_error(answer: &[u8], seq: u32) -> Option<i32> {
    let word = |at: usize| -> Option<[u8; 4]> { answer.get(at..at + 4)?.try_into().ok() };
    let kind = u16::from_ne_bytes(answer.get(4..6)?.try_into().ok()?);
    if i32::from(kind) != libc::NLMSG_ERROR || u32::from_ne_bytes(word(8)?) != seq {
        return None;
    }
    Some(i32::from_ne_bytes(word(NLMSG_HDR_LEN)?))
}

/// Give interface `name` the address `ip/prefix` (replacing it if it has it); with
/// `nodad`, usable at once, without duplicate address detection. In the calling
/// thread's network namespace; needs CAP_NET_ADMIN.
pub fn add_ipv6_address(name: &str, ip: Ipv6Addr, prefix: u8, nodad: bool) -> io::Result<()> {
    if prefix > 128 {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("prefix length /{prefix} is over 128"),
        ));
    }
    // The name goes into a fixed-size, NUL-terminated field.
    if name.contains('\0') {
        return Err(io::Error::from(io::ErrorKind::InvalidInput));
    }
    let sock = rustix::net::socket_with(
        AddressFamily::NETLINK,
        SocketType::RAW,
        SocketFlags::CLOEXEC,
        None, // NETLINK_ROUTE, protocol 0
    )?;
    // SIOCGIFINDEX, which any socket answers (as if_nametoindex(3) asks it): ENODEV for
    // a name no interface has.
    let index = rustix::net::netdevice::name_to_index(&sock, name)?;
    // The kernel answers at once; the timeout only bounds a wait that should not be.
    sockopt::set_socket_timeout(&sock, Timeout::Recv, Some(Duration::from_secs(5)))?;
    let seq = 1;
    let request = new_addr_request(index, ip, prefix, nodad, seq);
    let kernel = SocketAddrNetlink::new(0, 0);
    rustix::net::sendto(&sock, &request, SendFlags::empty(), &kernel)?;
    let mut answer = [0u8; 1024];
    let (got, _) = rustix::net::recv(&sock, &mut answer, RecvFlags::empty())?;
    match ack_error(&answer[..got], seq) {
        Some(0) => Ok(()),
        Some(e) => Err(io::Error::from_raw_os_error(-e)),
        None => Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "rtnetlink: no acknowledgement",
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_request_is_laid_out_as_rtnetlink_reads_it() {
        let ip: Ipv6Addr = "fd00::1".parse().unwrap();
        let m = new_addr_request(7, ip, 64, true, 9);
        assert_eq!(m.len(), 72);
        assert_eq!(u32::from_ne_bytes(m[0..4].try_into().unwrap()), 72);
        assert_eq!(u16::from_ne_bytes(m[4..6].try_into().unwrap()), 20);
        assert_eq!(u32::from_ne_bytes(m[8..12].try_into().unwrap()), 9);
        assert_eq!(m[16..20], [10, 64, 2, 0]);
        assert_eq!(u32::from_ne_bytes(m[20..24].try_into().unwrap()), 7);
        assert_eq!(u16::from_ne_bytes(m[24..26].try_into().unwrap()), 20);
        assert_eq!(m[28..44], ip.octets());
        assert_eq!(u32::from_ne_bytes(m[68..72].try_into().unwrap()), 2);
        assert_eq!(new_addr_request(7, ip, 64, false, 9)[18], 0);
    }

    #[test]
    fn acknowledgements_are_read_and_strangers_refused() {
        let mut ack = vec![0u8; 36];
        ack[0..4].copy_from_slice(&36u32.to_ne_bytes());
        ack[4..6].copy_from_slice(&2u16.to_ne_bytes());
        ack[8..12].copy_from_slice(&5u32.to_ne_bytes());
        ack[16..20].copy_from_slice(&(-17i32).to_ne_bytes());
        assert_eq!(ack_error(&ack, 5), Some(-17));
        assert_eq!(ack_error(&ack, 6), None);
        assert_eq!(ack_error(&ack[..10], 5), None);
        assert_eq!(ack_error(&[], 5), None);
    }

    #[test]
    fn bad_requests_are_refused() {
        let ip = Ipv6Addr::LOCALHOST;
        assert!(add_ipv6_address("lo", ip, 129, true).is_err());
        assert!(add_ipv6_address("rustynosuch0", ip, 64, true).is_err());
        let nul = add_ipv6_address("lo\0", ip, 64, true).unwrap_err();
        assert_eq!(nul.kind(), io::ErrorKind::InvalidInput);
        let long = add_ipv6_address("averyveryverylongname", ip, 64, true).unwrap_err();
        assert_eq!(long.raw_os_error(), Some(libc::ENODEV));
    }
}
