//! # rusty-drivers-tap
//!
//! The Linux TAP driver: the [`PacketIo`](rusty_stack::io::PacketIo) queue anyone can
//! run on a laptop. The stack sits behind a TAP device; the host kernel sees an ordinary
//! Ethernet interface whose far end is Rusty, so the host's own programs (curl, Python,
//! `std::net::TcpStream`) talk to the stack through it.
//!
//! ## What it sets up
//!
//! [`open`] opens `/dev/net/tun` once per queue and attaches each file to the same device
//! with `TUNSETIFF` and `IFF_TAP | IFF_NO_PI | IFF_VNET_HDR | IFF_MULTI_QUEUE` (the first
//! call creates the device if it does not exist; later ones add queues). Every file is
//! non-blocking and carries a 10-byte `struct virtio_net_hdr` in front of each frame
//! (`TUNSETVNETHDRSZ`). It then sets the interface MTU and brings the link up, and — when
//! [`TapConfig::host`] asks — gives the host side an IPv4 address, all through interface
//! ioctls on an `AF_INET` socket (no `ip` command), and the IPv6 addresses of
//! [`TapConfig::host_ipv6`] through rtnetlink, without duplicate address detection. The device disappears when the last
//! queue is dropped (it is not made persistent). Creating a device needs `CAP_NET_ADMIN`;
//! a non-root user can attach to a persistent TAP an administrator made for them
//! (`ip tuntap add mode tap multi_queue vnet_hdr user $USER`) and configured.
//!
//! ## Offloads
//!
//! With [`TapConfig::offloads`] on (the default) the driver enables `TUN_F_CSUM |
//! TUN_F_TSO4 | TUN_F_TSO6` (`TUNSETOFFLOAD`), and the virtio-net header carries offload
//! state both ways ([`vnet`]):
//!
//! - **Receive.** The kernel may hand over TCP frames whose checksum is only partial
//!   (`VIRTIO_NET_HDR_F_NEEDS_CSUM`: they were built by the local kernel and never crossed
//!   a wire) and coalesced TCP super-frames up to 64 KiB (GSO, reported as
//!   [`RxMeta::gso_size`](rusty_stack::io::RxMeta::gso_size); such frames exceed the MTU).
//!   Partial and `DATA_VALID` frames are reported as `checksum_verified`; anything else
//!   (say, a frame bridged in from a real NIC) is verified by the stack.
//! - **Transmit.** The stack may leave the TCP checksum to the kernel (it writes the
//!   pseudo-header sum and asks through `TxMeta::checksum`, which becomes `NEEDS_CSUM`,
//!   `csum_start`, `csum_offset`) and may hand over TCP super-frames for the kernel to
//!   segment (`TxMeta::tso_mss` becomes `GSO_TCPV4` or `GSO_TCPV6` with `gso_size` and
//!   `hdr_len`). The IPv4 header checksum is never offloaded by virtio, so
//!   `tx_checksum.ipv4` is false.
//!
//! With offloads off, every frame carries full checksums both ways and none exceeds the
//! MTU (plus the Ethernet header).
//!
//! ## Queues and flow steering
//!
//! A TAP does not steer by Toeplitz RSS, so [`Capabilities::rss`] is `None`: the stack
//! cannot predict where a flow lands. The kernel instead uses tun's *automatic flow
//! steering*: it remembers, per flow hash, the queue that flow was last **transmitted**
//! on by us (a `write` on a queue records the flow for it), and sends that flow's packets
//! to that queue; a flow it has not seen yet goes to a queue picked from its hash.
//!
//! The stack does not rely on that. On a link like this every flow has an owner that
//! all its workers compute alike: an active open is owned by its local port modulo the
//! queue count (a worker opens from ports it owns), and every other flow — a passive
//! open — by a hash of the peer's address and port. A segment that lands on a worker
//! that has no connection for it and does not own its flow is handed to the owner
//! through the runtime's control channel, SYNs included, so every connection is
//! accepted and served by its owner. As the owner answers from its own queue, the
//! kernel's flow table soon steers the rest of the flow there, and hand-overs stay rare
//! (typically a passive open's SYN, when the kernel's first pick was another queue).
//! Frames that carry no flow (ARP) may land on any queue; the runtime shares ARP
//! mappings between the workers of a link.
//!
//! A parked worker sleeps in [`PacketIo::wait`](rusty_stack::io::PacketIo::wait); the
//! queue also watches the [`Doorbell`](rusty_stack::io::Doorbell) the worker hands it
//! ([`PacketIo::set_doorbell`](rusty_stack::io::PacketIo::set_doorbell)), so a sibling
//! that hands it a segment wakes it at once.
//!
//! ## Use
//!
//! ```no_run
//! use std::net::{Ipv4Addr, Ipv6Addr};
//! use rusty_drivers_tap::{open, TapConfig};
//! use rusty_stack::io::PacketIo;
//!
//! // Two queues on `rusty0`; the host gets 10.9.0.1/24 and fd00:9::1/64, the stack
//! // would use 10.9.0.2 and fd00:9::2.
//! let mut cfg = TapConfig::new("rusty0", 2);
//! cfg.host = Some((Ipv4Addr::new(10, 9, 0, 1), 24));
//! cfg.host_ipv6 = vec![(Ipv6Addr::new(0xfd00, 9, 0, 0, 0, 0, 0, 1), 64)];
//! let queues = open(&cfg).expect("open the TAP");
//! for q in &queues {
//!     println!("{} queue {}: {:?}", q.name(), q.capabilities().queue, q.capabilities().mac);
//! }
//! // Give each queue to a worker: `rusty_runtime::engine_worker(queue, ...)`.
//! ```

#![warn(missing_docs)]

use std::fmt;
use std::io;
use std::net::{Ipv4Addr, Ipv6Addr};

use rusty_stack::io::{Capabilities, ChecksumOffload, MacAddr, ETHERNET_HEADER_LEN};

mod queue;
// The crate's only unsafe code (the TUN ioctls, on libc): each system call behind a
// safe function, with a SAFETY note on every block.
#[allow(unsafe_code)]
mod sys;
pub mod vnet;

pub use queue::{TapQueue, TapRx, TapStats, TapTx, DEFAULT_POOL_BUFFERS, RX_BUF_LEN};

/// Largest TSO frame the stack may hand over, counted as
/// [`Capabilities::tso_max`] counts it (the IPv4 datagram): the whole Ethernet frame
/// then stays within 64 KiB - 1, the limit of the IPv4 total length and of the kernel's
/// GSO size.
pub const TSO_MAX: usize = 65535 - ETHERNET_HEADER_LEN;

/// Most queues a TAP may have (the kernel's `MAX_TAP_QUEUES`).
pub const MAX_QUEUES: u16 = 256;

/// Smallest IPv4 MTU (RFC 791 §3.2: every host must take 68-byte datagrams).
pub const MIN_MTU: usize = 68;

/// Smallest IPv6 MTU (RFC 8200 §5); Linux turns IPv6 off on a link below it.
pub const IPV6_MIN_MTU: usize = 1280;

/// How to open a TAP device.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct TapConfig {
    /// Interface name (at most 15 bytes). Created if missing, joined if it exists (it
    /// must then be a multi-queue TAP with virtio-net headers). A name with `%d`, or an
    /// empty one, lets the kernel pick; [`TapQueue::name`] tells which.
    pub name: String,
    /// Queues to open: one per worker.
    pub queues: u16,
    /// The IP MTU, set on the interface too.
    pub mtu: usize,
    /// The stack's MAC address (the host side has its own). `None`: a random locally
    /// administered unicast address.
    pub mac: Option<MacAddr>,
    /// Enable checksum and TCP segmentation offloads through the virtio-net header.
    pub offloads: bool,
    /// Give the host side this address and prefix length (which also installs the
    /// connected route through the TAP).
    pub host: Option<(Ipv4Addr, u8)>,
    /// Give the host side these IPv6 addresses, each with its prefix length, usable at
    /// once (no duplicate address detection: the link is the host's and Rusty's alone).
    pub host_ipv6: Vec<(Ipv6Addr, u8)>,
    /// Most idle buffers a queue keeps for reuse in each of its three lists (receive
    /// buffers of its own, receive buffers the stack gave back, transmit buffers); each
    /// is up to [`RX_BUF_LEN`] bytes (a GSO super-frame). Beyond it, buffers go back to
    /// the allocator. What is kept is reported by [`PacketIo::pooled_bytes`].
    ///
    /// [`PacketIo::pooled_bytes`]: rusty_stack::io::PacketIo::pooled_bytes
    pub pool_buffers: usize,
}

impl TapConfig {
    /// `queues` queues on `name`, MTU 1500, random MAC, offloads on, host side untouched
    /// apart from MTU and link state.
    pub fn new(name: impl Into<String>, queues: u16) -> TapConfig {
        TapConfig {
            name: name.into(),
            queues,
            mtu: 1500,
            mac: None,
            offloads: true,
            host: None,
            host_ipv6: Vec::new(),
            pool_buffers: DEFAULT_POOL_BUFFERS,
        }
    }
}

impl Default for TapConfig {
    /// One queue on `tap0`.
    fn default() -> TapConfig {
        TapConfig::new("tap0", 1)
    }
}

/// Why a TAP could not be opened.
#[derive(Debug)]
#[non_exhaustive]
pub enum TapError {
    /// The configuration itself is wrong.
    Config(String),
    /// A system call failed; `context` says which step.
    Os {
        /// The step that failed: the device, the queue and the call (e.g. `TAP 'tap0'
        /// queue 1: TUNSETOFFLOAD`).
        context: String,
        /// The error the system call returned.
        source: io::Error,
    },
}

impl TapError {
    fn os(context: impl Into<String>, source: io::Error) -> TapError {
        TapError::Os {
            context: context.into(),
            source,
        }
    }
}

impl fmt::Display for TapError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TapError::Config(s) => write!(f, "bad TAP configuration: {s}"),
            TapError::Os { context, source } => {
                write!(f, "{context}: {source}")?;
                let hint = match source.raw_os_error() {
                    Some(libc::EPERM) | Some(libc::EACCES) => {
                        " (are you root? creating a TAP needs CAP_NET_ADMIN)"
                    }
                    Some(libc::ENOENT) if context.contains("/dev/net/tun") => {
                        " (is the tun module loaded? try `modprobe tun`)"
                    }
                    Some(libc::EINVAL) | Some(libc::EBUSY) if context.contains("TUNSETIFF") => {
                        " (does an interface of that name exist that is not a multi-queue TAP with vnet headers?)"
                    }
                    _ => "",
                };
                f.write_str(hint)
            }
        }
    }
}

impl std::error::Error for TapError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            TapError::Config(_) => None,
            TapError::Os { source, .. } => Some(source),
        }
    }
}

/// A random locally administered unicast MAC (IEEE 802: bit 1 of the first octet set
/// means locally administered, bit 0 clear means unicast).
pub fn random_mac() -> Result<MacAddr, TapError> {
    let mut b = [0u8; 6];
    getrandom::fill(&mut b).map_err(|e| TapError::os("getrandom for a MAC address", e.into()))?;
    Ok(local_unicast_mac(b))
}

/// `bytes` made into a locally administered unicast MAC.
pub fn local_unicast_mac(mut bytes: [u8; 6]) -> MacAddr {
    bytes[0] = (bytes[0] | 0x02) & !0x01;
    MacAddr(bytes)
}

fn check(cfg: &TapConfig) -> Result<(), TapError> {
    // An empty name lets the kernel pick one.
    if let Some(why) = rusty_netdev::bad_ifname(&cfg.name).filter(|_| !cfg.name.is_empty()) {
        return Err(TapError::Config(why));
    }
    if cfg.queues == 0 || cfg.queues > MAX_QUEUES {
        return Err(TapError::Config(format!(
            "{} queues (a TAP has 1 to {MAX_QUEUES})",
            cfg.queues
        )));
    }
    if !(MIN_MTU..=TSO_MAX).contains(&cfg.mtu) {
        return Err(TapError::Config(format!(
            "MTU {} (must be {MIN_MTU} to {TSO_MAX})",
            cfg.mtu
        )));
    }
    if let Some((_, prefix)) = cfg.host {
        if prefix > 32 {
            return Err(TapError::Config(format!("prefix length /{prefix}")));
        }
    }
    if let Some((ip, prefix)) = cfg.host_ipv6.iter().find(|(_, p)| *p > 128) {
        return Err(TapError::Config(format!("prefix length {ip}/{prefix}")));
    }
    if !cfg.host_ipv6.is_empty() && cfg.mtu < IPV6_MIN_MTU {
        return Err(TapError::Config(format!(
            "MTU {} is below IPv6's {IPV6_MIN_MTU}, and the host side has IPv6 addresses",
            cfg.mtu
        )));
    }
    Ok(())
}

/// Open (creating if needed) the TAP device `cfg.name` with `cfg.queues` queues,
/// configure its host side, and return the queues in index order.
pub fn open(cfg: &TapConfig) -> Result<Vec<TapQueue>, TapError> {
    check(cfg)?;
    let mac = match cfg.mac {
        Some(m) => m,
        None => random_mac()?,
    };
    let flags = libc::IFF_TAP | libc::IFF_NO_PI | libc::IFF_VNET_HDR | libc::IFF_MULTI_QUEUE;
    let offload = if cfg.offloads {
        libc::TUN_F_CSUM | libc::TUN_F_TSO4 | libc::TUN_F_TSO6
    } else {
        0
    };
    let mut name = cfg.name.clone();
    let mut queues = Vec::with_capacity(usize::from(cfg.queues));
    for index in 0..cfg.queues {
        let step = |what: &str| format!("TAP '{name}' queue {index}: {what}");
        let (file, actual) = sys::open_tap_queue(&name, flags).map_err(|(what, e)| {
            let ctx = if what == "TUNSETIFF" {
                step("TUNSETIFF (attach)")
            } else {
                what.to_string()
            };
            TapError::os(ctx, e)
        })?;
        sys::set_vnet_hdr_len(&file, vnet::VNET_HDR_LEN)
            .map_err(|e| TapError::os(step("TUNSETVNETHDRSZ"), e))?;
        sys::set_offload(&file, offload).map_err(|e| TapError::os(step("TUNSETOFFLOAD"), e))?;
        // Later queues attach to the device the kernel actually made ("tap%d" expands).
        name = actual;
        let caps = Capabilities {
            mac,
            mtu: cfg.mtu,
            rx_checksum: if cfg.offloads {
                ChecksumOffload::ALL
            } else {
                ChecksumOffload::NONE
            },
            tx_checksum: ChecksumOffload {
                ipv4: false,
                tcp: cfg.offloads,
            },
            tso_max: cfg.offloads.then_some(TSO_MAX),
            lro: cfg.offloads,
            queue: index,
            queue_count: cfg.queues,
            rss: None,
        };
        queues.push(TapQueue::new(file, name.clone(), caps, cfg.pool_buffers));
    }
    configure_host(&name, cfg)?;
    Ok(queues)
}

/// MTU, addresses and link state of the host side. Without `cfg.host` and
/// `cfg.host_ipv6`, a user who may not configure interfaces (attaching to a TAP an
/// administrator set up) is let through.
fn configure_host(name: &str, cfg: &TapConfig) -> Result<(), TapError> {
    let ctx = |what: &str| format!("configuring interface '{name}': {what}");
    let iface =
        rusty_netdev::Interface::new(name).map_err(|e| TapError::os(ctx("AF_INET socket"), e))?;
    let configuring = cfg.host.is_some() || !cfg.host_ipv6.is_empty();
    let tolerate = |r: io::Result<()>, what: &str| match r {
        Err(e) if configuring || e.kind() != io::ErrorKind::PermissionDenied => {
            Err(TapError::os(ctx(what), e))
        }
        _ => Ok(()),
    };
    tolerate(iface.set_mtu(cfg.mtu), "SIOCSIFMTU")?;
    if let Some((ip, prefix)) = cfg.host {
        let mask = Ipv4Addr::from(u32::MAX.checked_shl(32 - u32::from(prefix)).unwrap_or(0));
        iface
            .set_addr(ip)
            .map_err(|e| TapError::os(ctx("SIOCSIFADDR"), e))?;
        iface
            .set_netmask(mask)
            .map_err(|e| TapError::os(ctx("SIOCSIFNETMASK"), e))?;
    }
    for &(ip, prefix) in &cfg.host_ipv6 {
        rusty_netdev::add_ipv6_address(name, ip, prefix, true)
            .map_err(|e| TapError::os(ctx(&format!("RTM_NEWADDR {ip}/{prefix} nodad")), e))?;
    }
    tolerate(iface.bring_up(), "SIOCSIFFLAGS (up)")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn macs_are_local_unicast_and_random() {
        let m = local_unicast_mac([0xff; 6]);
        assert_eq!(m.0, [0xfe, 0xff, 0xff, 0xff, 0xff, 0xff]);
        assert!(m.is_unicast() && m.is_local());
        let m = local_unicast_mac([0; 6]);
        assert_eq!(m.0[0], 0x02);
        let a = random_mac().unwrap();
        let b = random_mac().unwrap();
        assert!(a.is_unicast() && a.is_local());
        assert_ne!(a, b, "48 random bits twice in a row");
    }

    #[test]
    fn bad_configurations_are_refused_before_any_system_call() {
        let bad = |cfg: TapConfig| matches!(open(&cfg), Err(TapError::Config(_)));
        assert!(bad(TapConfig::new("averyveryverylongname", 1)));
        assert!(bad(TapConfig::new("a/b", 1)));
        assert!(bad(TapConfig::new("tap0", 0)));
        assert!(bad(TapConfig::new("tap0", 257)));
        assert!(bad(TapConfig {
            mtu: 40,
            ..TapConfig::new("tap0", 1)
        }));
        assert!(bad(TapConfig {
            host: Some((Ipv4Addr::new(10, 0, 0, 1), 33)),
            ..TapConfig::new("tap0", 1)
        }));
        let fd00 = Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 1);
        assert!(bad(TapConfig {
            host_ipv6: vec![(fd00, 129)],
            ..TapConfig::new("tap0", 1)
        }));
        assert!(bad(TapConfig {
            host_ipv6: vec![(fd00, 64)],
            mtu: 1000,
            ..TapConfig::new("tap0", 1)
        }));
    }

    #[test]
    fn errors_carry_context_and_a_hint() {
        let e = TapError::os(
            "opening /dev/net/tun",
            io::Error::from_raw_os_error(libc::EACCES),
        );
        let s = e.to_string();
        assert!(
            s.starts_with("opening /dev/net/tun: Permission denied"),
            "{s}"
        );
        assert!(s.contains("are you root?"), "{s}");
        let e = TapError::os(
            "opening /dev/net/tun",
            io::Error::from_raw_os_error(libc::ENOENT),
        );
        assert!(e.to_string().contains("modprobe tun"));
    }
}
