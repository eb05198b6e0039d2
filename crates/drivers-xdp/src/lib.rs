//! # rusty-drivers-xdp
//!
//! The Linux AF_XDP driver: Rusty on a real NIC's queues, with no system call per frame.
//! Each worker owns one AF_XDP socket bound to (interface, queue = worker index); frames
//! move through rings shared with the kernel, in bursts, and the worker makes a system
//! call only when the kernel asks for one (`XDP_USE_NEED_WAKEUP`).
//!
//! ## What it sets up
//!
//! [`open`] finds the interface, its MAC, MTU and queue count (`ETHTOOL_GCHANNELS`), and,
//! where the NIC hashes with Toeplitz, its RSS key and indirection table
//! (`ETHTOOL_GRSSH`). It then:
//!
//! 1. creates an XSKMAP (queue index → socket) and, with IPv6 addresses, the hash map of
//!    Rusty's IPv6 destinations and the memberships of their multicast groups, loads the
//!    XDP program of [`program`](crate#the-xdp-program) with `bpf(2)` and attaches it
//!    through a BPF link: native (driver) XDP where the interface supports it, generic
//!    otherwise (or as [`XdpConfig::attach`] says);
//! 2. per worker: maps a UMEM ([`XdpConfig::frames`] chunks of 2 KiB, 4 KiB for MTUs
//!    above 1,774 bytes), registers it, sizes and maps the fill, completion, RX and TX
//!    rings ([`XdpConfig::ring_size`] entries each), binds the socket to its queue with
//!    `XDP_USE_NEED_WAKEUP` (zero-copy where the driver supports it, copy otherwise, or
//!    as [`XdpConfig::copy`] says), enters it in the map and fills the fill ring.
//!
//! The link belongs to the process: when the last queue is dropped, or the process exits
//! or is killed, the kernel detaches the program and the interface is as it was.
//!
//! ## The XDP program
//!
//! Hand-assembled (see `src/program.rs` for the listing), so building Rusty needs no C or
//! BPF compiler. It redirects to the receiving queue's socket IPv4 frames for Rusty's
//! address ([`XdpConfig::ip`]), ARP frames whose target is Rusty's address, and IPv6
//! frames for one of Rusty's addresses ([`XdpConfig::ipv6`]), one of their
//! solicited-node groups or all-nodes; it passes everything else to the kernel: the host
//! keeps using the interface for its own addresses, NDP included. A frame for Rusty on a
//! queue no worker serves also goes to the kernel (which would answer TCP with a reset),
//! which is why [`open`] insists that every receive queue has a worker.
//!
//! The IPv6 destinations are the keys of a BPF hash map filled at setup. So that the NIC
//! delivers the multicast ones at all, [`open`] also joins their Ethernet groups
//! (`PACKET_ADD_MEMBERSHIP` on a packet socket that receives nothing); they are left,
//! like the program detached, when the last queue is dropped or the process ends.
//!
//! ## Flow steering
//!
//! On a NIC that steers by Toeplitz RSS, [`Capabilities::rss`] carries the key and table
//! read from the NIC, so active opens pick local ports whose return flow the NIC steers to
//! the opening worker. Elsewhere (veth, whose receive queue is the sender's transmit
//! queue) it is `None`, and the stack hands a segment that lands on the wrong worker to
//! the flow's owner.
//!
//! ## Offloads
//!
//! None: AF_XDP carries no checksum or segmentation state, so the stack computes and
//! verifies every checksum and sends MTU-sized frames. A peer on a veth pair must
//! therefore put complete checksums on what it sends (`ethtool -K PEER tx off`), as a
//! real NIC delivers them; frames carrying the partial checksum of an offload
//! fail Rusty's check and are dropped (counted as `bad_checksum`).
//!
//! ## Permissions
//!
//! Root, or `CAP_NET_ADMIN`, `CAP_NET_RAW` and `CAP_BPF` (plus `CAP_IPC_LOCK` or a large
//! enough `ulimit -l` for the UMEM).

#![warn(missing_docs)]

use std::fmt;
use std::io;
use std::net::{Ipv4Addr, Ipv6Addr};
use std::os::fd::OwnedFd;
use std::sync::Arc;

use rusty_stack::io::{Capabilities, ChecksumOffload, MacAddr, ETHERNET_HEADER_LEN};
use rusty_stack::rss::RssConfig;

mod ipv6;
#[allow(unsafe_code)]
mod mem;
mod program;
mod queue;
// The crate's system calls: with `mem`, its only unsafe code.
#[allow(unsafe_code)]
mod sys;

pub use queue::{KernelStats, QueueMode, XdpQueue, XdpRx, XdpStats, XdpTx};

use mem::{CompRing, FillRing, RingOffsets, RxRing, TxRing, Umem, Which};

/// Bytes the kernel keeps in front of a received frame in its chunk (`XDP_PACKET_HEADROOM`).
const XDP_HEADROOM: usize = 256;
/// `XDP_FLAGS_SKB_MODE`, `XDP_FLAGS_DRV_MODE`.
const XDP_FLAGS_SKB_MODE: u32 = 1 << 1;
const XDP_FLAGS_DRV_MODE: u32 = 1 << 2;
/// `ETH_RSS_HASH_TOP`: the Toeplitz bit of `ethtool_rxfh.hfunc`.
const ETH_RSS_HASH_TOP: u8 = 1;

/// Where the XDP program runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum AttachMode {
    /// Native if the driver supports it, generic otherwise.
    #[default]
    Auto,
    /// In the driver (`XDP_FLAGS_DRV_MODE`); fail if it cannot.
    Native,
    /// On socket buffers after the driver (`XDP_FLAGS_SKB_MODE`): any interface, slower.
    Generic,
}

/// Whether frames are copied between the kernel and the UMEM.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum CopyMode {
    /// Zero-copy if the driver supports it, copy otherwise.
    #[default]
    Auto,
    /// `XDP_ZEROCOPY`; fail if the driver cannot.
    ZeroCopy,
    /// `XDP_COPY`.
    Copy,
}

/// How to open the AF_XDP queues of an interface.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct XdpConfig {
    /// The interface (it must exist; the host keeps using it).
    pub ifname: String,
    /// Rusty's IPv4 address on it: the IPv4 and ARP frames the program redirects to
    /// Rusty. `0.0.0.0` when Rusty has no IPv4 address there: no IPv4 or ARP frame is
    /// redirected.
    pub ip: Ipv4Addr,
    /// Rusty's IPv6 unicast addresses on it, its link-local address among them: the
    /// program redirects IPv6 frames to these, to their solicited-node groups and (if
    /// the list is not empty) to all-nodes. Empty by default: no IPv6 frame is
    /// redirected.
    pub ipv6: Vec<Ipv6Addr>,
    /// Workers: one socket each, on queues 0..queues.
    pub queues: u16,
    /// Entries of each ring (a power of two).
    pub ring_size: u32,
    /// UMEM chunks per queue (frames that can be in flight at once, both ways).
    pub frames: u32,
    /// Where the XDP program runs; by default natively where the driver supports it.
    pub attach: AttachMode,
    /// Whether frames are copied into the UMEM; by default zero-copy where the driver
    /// supports it.
    pub copy: CopyMode,
    /// Map each queue's UMEM shared rather than private, so that a process forked
    /// after [`open`] can take over a queue it inherited (its rings are shared
    /// mappings of the socket anyway). The process that gives a queue away must then
    /// drop its copy without touching it again. Off by default.
    pub fork_shared: bool,
}

impl XdpConfig {
    /// `queues` queues on `ifname` for `ip` (`0.0.0.0`: IPv4 off) and no IPv6 address:
    /// 2,048-entry rings, 4,096 frames per queue (8 MiB at 2 KiB a frame), native and
    /// zero-copy where possible.
    pub fn new(ifname: impl Into<String>, ip: Ipv4Addr, queues: u16) -> XdpConfig {
        XdpConfig {
            ifname: ifname.into(),
            ip,
            ipv6: Vec::new(),
            queues,
            ring_size: 2048,
            frames: 4096,
            attach: AttachMode::Auto,
            copy: CopyMode::Auto,
            fork_shared: false,
        }
    }
}

/// Why the queues could not be opened.
#[derive(Debug)]
#[non_exhaustive]
pub enum XdpError {
    /// The configuration itself is wrong.
    Config(String),
    /// No interface of that name (in this network namespace).
    NoSuchInterface(String),
    /// The interface's receive or transmit queues and the workers do not match: every
    /// receive queue needs a worker, and every worker a transmit queue.
    Queues {
        /// The interface.
        ifname: String,
        /// Its receive queues (`ETHTOOL_GCHANNELS`, combined ones included).
        rx: u32,
        /// Its transmit queues (combined ones included).
        tx: u32,
        /// The workers asked for ([`XdpConfig::queues`]).
        workers: u16,
    },
    /// The RSS indirection table steers flows to queues no worker serves.
    Steering {
        /// The interface.
        ifname: String,
        /// The highest queue the table steers to.
        max_queue: u16,
        /// The workers asked for, serving queues `0..workers`.
        workers: u16,
    },
    /// The kernel has no AF_XDP sockets (`CONFIG_XDP_SOCKETS`).
    NoAfXdp(io::Error),
    /// Not permitted: needs root or the capabilities named.
    NotPermitted {
        /// The step that was refused (the system call and what it was for).
        step: String,
        /// The error the system call returned (`EPERM` or `EACCES`).
        source: io::Error,
    },
    /// Another XDP program is attached to the interface already.
    AlreadyAttached {
        /// The interface.
        ifname: String,
        /// The error the attach returned (`EBUSY` or `EEXIST`).
        source: io::Error,
    },
    /// Another AF_XDP socket is bound to the queue already.
    QueueInUse {
        /// The interface.
        ifname: String,
        /// The queue whose socket could not be bound.
        queue: u16,
        /// The error `bind` returned (`EBUSY`).
        source: io::Error,
    },
    /// The verifier refused the program (a bug here): its log.
    Verifier {
        /// The error `bpf(BPF_PROG_LOAD)` returned.
        source: io::Error,
        /// The verifier's log, which says which instruction it refused and why.
        log: String,
    },
    /// Another system call failed; `context` says which step.
    Os {
        /// The step that failed (the system call and what it was for).
        context: String,
        /// The error the system call returned.
        source: io::Error,
    },
}

impl XdpError {
    fn os(context: impl Into<String>, source: io::Error) -> XdpError {
        let context = context.into();
        match source.raw_os_error() {
            Some(libc::EPERM) | Some(libc::EACCES) => XdpError::NotPermitted {
                step: context,
                source,
            },
            _ => XdpError::Os { context, source },
        }
    }
}

impl fmt::Display for XdpError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            XdpError::Config(s) => write!(f, "bad AF_XDP configuration: {s}"),
            XdpError::NoSuchInterface(n) => write!(
                f,
                "no interface '{n}' in this network namespace (see `ip link`)"
            ),
            XdpError::Queues {
                ifname,
                rx,
                tx,
                workers,
            } => write!(
                f,
                "'{ifname}' has {rx} receive and {tx} transmit queues but {workers} workers were asked for; \
                 every receive queue needs a worker (frames on a queue without one would reach the kernel, \
                 not Rusty): run {rx} workers, or set the queues to {workers} with \
                 `ethtool -L {ifname} combined {workers}` (veth: `ethtool -L {ifname} rx {workers} tx {workers}`)"
            ),
            XdpError::Steering {
                ifname,
                max_queue,
                workers,
            } => write!(
                f,
                "the RSS table of '{ifname}' steers flows to queue {max_queue} but only queues 0..{} have workers: \
                 spread it over the workers with `ethtool -X {ifname} equal {workers}`",
                workers.saturating_sub(1)
            ),
            XdpError::NoAfXdp(e) => write!(
                f,
                "this kernel has no AF_XDP sockets (CONFIG_XDP_SOCKETS): {e}"
            ),
            XdpError::NotPermitted { step, source } => write!(
                f,
                "{step}: {source} (AF_XDP needs root, or CAP_NET_ADMIN, CAP_NET_RAW and CAP_BPF, \
                 and CAP_IPC_LOCK or a large enough `ulimit -l` for the UMEM)"
            ),
            XdpError::AlreadyAttached { ifname, source } => write!(
                f,
                "another XDP program is attached to '{ifname}' ({source}); see `ip link show {ifname}` \
                 and detach it (`ip link set dev {ifname} xdp off`) if it is not in use"
            ),
            XdpError::QueueInUse {
                ifname,
                queue,
                source,
            } => write!(
                f,
                "queue {queue} of '{ifname}' already has an AF_XDP socket ({source}): is another \
                 Rusty, or another AF_XDP program, running on this interface?"
            ),
            XdpError::Verifier { source, log } => {
                write!(f, "the kernel refused Rusty's XDP program: {source}\n{log}")
            }
            XdpError::Os { context, source } => write!(f, "{context}: {source}"),
        }
    }
}

impl std::error::Error for XdpError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            XdpError::NoAfXdp(e)
            | XdpError::NotPermitted { source: e, .. }
            | XdpError::AlreadyAttached { source: e, .. }
            | XdpError::QueueInUse { source: e, .. }
            | XdpError::Verifier { source: e, .. }
            | XdpError::Os { source: e, .. } => Some(e),
            _ => None,
        }
    }
}

/// The program, its map and the link that attaches it: shared by the queues, released
/// (and the program detached) when the last one goes.
pub(crate) struct Attachment {
    _link: OwnedFd,
    _prog: OwnedFd,
    _map: OwnedFd,
    _ipv6: Option<ipv6::Ipv6Filter>,
}

fn check(cfg: &XdpConfig) -> Result<(), XdpError> {
    if let Some(why) = rusty_netdev::bad_ifname(&cfg.ifname) {
        return Err(XdpError::Config(why));
    }
    if cfg.queues == 0 {
        return Err(XdpError::Config("0 queues".into()));
    }
    if cfg.ip.is_unspecified() && cfg.ipv6.is_empty() {
        return Err(XdpError::Config(
            "no address: neither an IPv4 address nor any IPv6 address".into(),
        ));
    }
    if let Some(a) = cfg
        .ipv6
        .iter()
        .find(|a| a.is_unspecified() || a.is_loopback() || a.is_multicast())
    {
        return Err(XdpError::Config(format!(
            "IPv6 address {a} (a unicast address of the interface, not ::, ::1 or a group)"
        )));
    }
    if !cfg.ring_size.is_power_of_two() || !(64..=65536).contains(&cfg.ring_size) {
        return Err(XdpError::Config(format!(
            "ring size {} (a power of two from 64 to 65536)",
            cfg.ring_size
        )));
    }
    if cfg.frames < 2 * 64 || cfg.frames > 1 << 20 {
        return Err(XdpError::Config(format!(
            "{} frames per queue (128 to 1048576)",
            cfg.frames
        )));
    }
    Ok(())
}

/// Chunk size for an MTU: the frame plus the kernel's headroom must fit (aligned chunks
/// are 2 KiB or 4 KiB).
fn chunk_size(mtu: usize) -> Option<u32> {
    let need = XDP_HEADROOM + ETHERNET_HEADER_LEN + 4 + mtu;
    [2048, 4096].into_iter().find(|&c| need <= c as usize)
}

/// The interface's (rx, tx) queue counts.
fn queue_counts(ifname: &str) -> (u32, u32) {
    match sys::channels(ifname) {
        Ok((rx, tx, combined)) if rx + combined > 0 => (rx + combined, tx + combined),
        // No channel information (some virtual devices): count the queues sysfs lists.
        _ => {
            let count = |prefix: &str| {
                std::fs::read_dir(format!("/sys/class/net/{ifname}/queues"))
                    .map(|d| {
                        d.filter_map(Result::ok)
                            .filter(|e| e.file_name().to_string_lossy().starts_with(prefix))
                            .count() as u32
                    })
                    .unwrap_or(0)
                    .max(1)
            };
            (count("rx-"), count("tx-"))
        }
    }
}

/// The NIC's Toeplitz key and table, if it steers by Toeplitz.
fn toeplitz(ifname: &str, workers: u16) -> Result<Option<RssConfig>, XdpError> {
    steering(sys::rss(ifname), ifname, workers)
}

/// What `ETHTOOL_GRSSH` answered, as the stack's RSS configuration: `None` when the
/// device has no RSS (veth: not supported) or hashes otherwise than by Toeplitz; an
/// error when its table steers to a queue without a worker.
fn steering(
    answer: io::Result<(u8, Vec<u8>, Vec<u32>)>,
    ifname: &str,
    workers: u16,
) -> Result<Option<RssConfig>, XdpError> {
    let Ok((hfunc, key, table)) = answer else {
        return Ok(None);
    };
    if hfunc & ETH_RSS_HASH_TOP == 0 || key.is_empty() || table.is_empty() {
        return Ok(None);
    }
    let max = table.iter().copied().max().unwrap_or(0);
    if max >= u32::from(workers) {
        return Err(XdpError::Steering {
            ifname: ifname.to_string(),
            max_queue: max.min(u32::from(u16::MAX)) as u16,
            workers,
        });
    }
    Ok(Some(RssConfig::new(
        key,
        table.into_iter().map(|q| q as u16).collect(),
    )))
}

fn offsets(o: &libc::xdp_ring_offset) -> RingOffsets {
    RingOffsets {
        producer: o.producer,
        consumer: o.consumer,
        desc: o.desc,
        flags: o.flags,
    }
}

/// One socket, its UMEM and rings, bound to `queue`.
fn open_socket(
    cfg: &XdpConfig,
    ifindex: u32,
    queue: u16,
    chunk: u32,
    caps: Capabilities,
    native: bool,
) -> Result<queue::Parts, XdpError> {
    let step = |what: &str| format!("AF_XDP on '{}' queue {queue}: {what}", cfg.ifname);
    let fd = sys::xsk_socket().map_err(|e| match e.raw_os_error() {
        Some(libc::EAFNOSUPPORT) => XdpError::NoAfXdp(e),
        _ => XdpError::os(step("socket(AF_XDP)"), e),
    })?;
    let (umem, chunks) = Umem::new(cfg.frames, chunk, cfg.fork_shared)
        .map_err(|e| XdpError::os(step("mapping the UMEM"), e))?;
    let (addr, len) = umem.region();
    let reg = libc::xdp_umem_reg {
        addr,
        len,
        chunk_size: chunk,
        headroom: 0,
        flags: 0,
        tx_metadata_len: 0,
    };
    sys::set_xdp_opt(&fd, libc::XDP_UMEM_REG, &reg).map_err(|e| {
        XdpError::os(
            step("XDP_UMEM_REG (registering the UMEM; ENOBUFS/ENOMEM: raise `ulimit -l`)"),
            e,
        )
    })?;
    let size = cfg.ring_size;
    for (opt, what) in [
        (libc::XDP_UMEM_FILL_RING, "XDP_UMEM_FILL_RING"),
        (libc::XDP_UMEM_COMPLETION_RING, "XDP_UMEM_COMPLETION_RING"),
        (libc::XDP_RX_RING, "XDP_RX_RING"),
        (libc::XDP_TX_RING, "XDP_TX_RING"),
    ] {
        sys::set_xdp_opt(&fd, opt, &size).map_err(|e| XdpError::os(step(what), e))?;
    }
    let (off, got) = sys::get_xdp_opt::<libc::xdp_mmap_offsets>(&fd, libc::XDP_MMAP_OFFSETS)
        .map_err(|e| XdpError::os(step("XDP_MMAP_OFFSETS"), e))?;
    if got < std::mem::size_of::<libc::xdp_mmap_offsets>() {
        return Err(XdpError::Os {
            context: step("XDP_MMAP_OFFSETS"),
            source: io::Error::other("kernel too old (no ring flags: Linux 5.4 or later needed)"),
        });
    }
    let map = |what: &str, e| XdpError::os(step(&format!("mapping the {what} ring")), e);
    let fill =
        FillRing::new(&fd, Which::Fill, offsets(&off.fr), size).map_err(|e| map("fill", e))?;
    let comp = CompRing::new(&fd, Which::Completion, offsets(&off.cr), size)
        .map_err(|e| map("completion", e))?;
    let rx = RxRing::new(&fd, Which::Rx, offsets(&off.rx), size).map_err(|e| map("RX", e))?;
    let tx = TxRing::new(&fd, Which::Tx, offsets(&off.tx), size).map_err(|e| map("TX", e))?;
    let copy_flag = match cfg.copy {
        CopyMode::Auto => 0,
        CopyMode::ZeroCopy => libc::XDP_ZEROCOPY,
        CopyMode::Copy => libc::XDP_COPY,
    };
    sys::bind_xsk(
        &fd,
        ifindex,
        u32::from(queue),
        libc::XDP_USE_NEED_WAKEUP | copy_flag,
    )
    .map_err(|e| match e.raw_os_error() {
        Some(libc::EBUSY) => XdpError::QueueInUse {
            ifname: cfg.ifname.clone(),
            queue,
            source: e,
        },
        _ => XdpError::os(step("bind"), e),
    })?;
    let (opts, _) = sys::get_xdp_opt::<libc::xdp_options>(&fd, libc::XDP_OPTIONS)
        .map_err(|e| XdpError::os(step("XDP_OPTIONS"), e))?;
    Ok(queue::Parts {
        fd,
        umem,
        chunks,
        rx,
        tx,
        fill,
        comp,
        fill_target: size.min(cfg.frames / 2),
        caps,
        name: cfg.ifname.clone(),
        zero_copy: opts.flags & libc::XDP_OPTIONS_ZEROCOPY != 0,
        native,
    })
}

/// Attach the program: native first (unless told otherwise), then generic.
fn attach(cfg: &XdpConfig, prog: &OwnedFd, ifindex: u32) -> Result<(OwnedFd, bool), XdpError> {
    let busy = |e: io::Error| match e.raw_os_error() {
        Some(libc::EBUSY) | Some(libc::EEXIST) => XdpError::AlreadyAttached {
            ifname: cfg.ifname.clone(),
            source: e,
        },
        _ => XdpError::os(format!("attaching XDP to '{}'", cfg.ifname), e),
    };
    let generic = || sys::link_xdp(prog, ifindex, XDP_FLAGS_SKB_MODE).map_err(busy);
    match cfg.attach {
        AttachMode::Generic => generic().map(|l| (l, false)),
        AttachMode::Native => sys::link_xdp(prog, ifindex, XDP_FLAGS_DRV_MODE)
            .map(|l| (l, true))
            .map_err(busy),
        AttachMode::Auto => match sys::link_xdp(prog, ifindex, XDP_FLAGS_DRV_MODE) {
            Ok(l) => Ok((l, true)),
            Err(e) if matches!(e.raw_os_error(), Some(libc::EBUSY) | Some(libc::EEXIST)) => {
                Err(busy(e))
            }
            Err(_) => generic().map(|l| (l, false)),
        },
    }
}

/// Open `cfg.queues` AF_XDP sockets on `cfg.ifname` and attach the program; returns the
/// queues in index order. See the [crate docs](crate).
pub fn open(cfg: &XdpConfig) -> Result<Vec<XdpQueue>, XdpError> {
    check(cfg)?;
    let ifindex =
        sys::if_index(&cfg.ifname).ok_or_else(|| XdpError::NoSuchInterface(cfg.ifname.clone()))?;
    let ctx = |what: &str| format!("interface '{}': {what}", cfg.ifname);
    let iface = rusty_netdev::Interface::new(&cfg.ifname)
        .map_err(|e| XdpError::os(ctx("AF_INET socket"), e))?;
    let mtu = iface
        .mtu()
        .map_err(|e| XdpError::os(ctx("SIOCGIFMTU"), e))?;
    let mac = iface
        .hw_addr()
        .map_err(|e| XdpError::os(ctx("SIOCGIFHWADDR"), e))?;
    let chunk = chunk_size(mtu).ok_or_else(|| {
        XdpError::Config(format!(
            "MTU {mtu} of '{}' is too large for AF_XDP frames of 4 KiB (at most {})",
            cfg.ifname,
            4096 - XDP_HEADROOM - ETHERNET_HEADER_LEN - 4
        ))
    })?;
    let (rx, tx) = queue_counts(&cfg.ifname);
    if rx != u32::from(cfg.queues) || tx < u32::from(cfg.queues) {
        return Err(XdpError::Queues {
            ifname: cfg.ifname.clone(),
            rx,
            tx,
            workers: cfg.queues,
        });
    }
    let rss = toeplitz(&cfg.ifname, cfg.queues)?;

    let map = sys::create_xskmap(rx, "rusty_xsks").map_err(|e| match e.raw_os_error() {
        Some(libc::EINVAL) => XdpError::NoAfXdp(e),
        _ => XdpError::os("bpf(BPF_MAP_CREATE, XSKMAP)", e),
    })?;
    let ipv6 = ipv6::install(&cfg.ipv6, &cfg.ifname, ifindex)?;
    let insns = program::assemble(
        cfg.ip,
        std::os::fd::AsRawFd::as_raw_fd(&map),
        ipv6.as_ref().map(ipv6::Ipv6Filter::map_fd),
    );
    let prog = sys::load_xdp_program(&insns, "Dual MIT/GPL", "rusty_xdp").map_err(|(e, log)| {
        match e.raw_os_error() {
            Some(libc::EPERM) | Some(libc::EACCES) if log.is_empty() => {
                XdpError::os("bpf(BPF_PROG_LOAD)", e)
            }
            _ => XdpError::Verifier { source: e, log },
        }
    })?;

    // Attach first: a conflict with another XDP program is the likeliest failure, and
    // says more than the busy queue a second Rusty would otherwise meet. Until the
    // sockets are in the map, the program passes Rusty's frames to the kernel, which
    // does not own Rusty's address and drops them. If a socket then fails, dropping the
    // link on the way out detaches the program again.
    let (link, native) = attach(cfg, &prog, ifindex)?;
    let mut parts = Vec::with_capacity(usize::from(cfg.queues));
    for q in 0..cfg.queues {
        let caps = Capabilities {
            mac: MacAddr(mac),
            mtu,
            rx_checksum: ChecksumOffload::NONE,
            tx_checksum: ChecksumOffload::NONE,
            tso_max: None,
            lro: false,
            queue: q,
            queue_count: cfg.queues,
            rss: rss.clone(),
        };
        let p = open_socket(cfg, ifindex, q, chunk, caps, native)?;
        sys::xskmap_set(&map, u32::from(q), &p.fd)
            .map_err(|e| XdpError::os(format!("XSKMAP entry for queue {q}"), e))?;
        parts.push(p);
    }
    let attachment = Arc::new(Attachment {
        _link: link,
        _prog: prog,
        _map: map,
        _ipv6: ipv6,
    });
    Ok(parts
        .into_iter()
        .map(|p| XdpQueue::new(p, Arc::clone(&attachment)))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_configurations_are_refused_before_any_system_call() {
        let ip = Ipv4Addr::new(10, 0, 0, 2);
        let bad = |cfg: XdpConfig| matches!(open(&cfg), Err(XdpError::Config(_)));
        assert!(bad(XdpConfig::new("averyveryverylongname", ip, 1)));
        assert!(bad(XdpConfig::new("", ip, 1)));
        assert!(bad(XdpConfig::new("a b", ip, 1)));
        assert!(bad(XdpConfig::new("eth0", ip, 0)));
        assert!(bad(XdpConfig {
            ring_size: 1000,
            ..XdpConfig::new("eth0", ip, 1)
        }));
        assert!(bad(XdpConfig {
            frames: 10,
            ..XdpConfig::new("eth0", ip, 1)
        }));
        // No address at all, and IPv6 addresses that are not an interface's.
        assert!(bad(XdpConfig::new("eth0", Ipv4Addr::UNSPECIFIED, 1)));
        for a in ["::", "::1", "ff02::1", "ff02::1:ff00:2"] {
            assert!(bad(XdpConfig {
                ipv6: vec!["fe80::2".parse().unwrap(), a.parse().unwrap()],
                ..XdpConfig::new("eth0", ip, 1)
            }));
        }
    }

    #[test]
    fn ipv4_ipv6_or_both_are_configurations() {
        let v6: Vec<Ipv6Addr> = vec!["fd00::2".parse().unwrap(), "fe80::2".parse().unwrap()];
        let ip = Ipv4Addr::new(10, 0, 0, 2);
        assert!(XdpConfig::new("eth0", ip, 1).ipv6.is_empty());
        assert!(check(&XdpConfig::new("eth0", ip, 1)).is_ok());
        for ip in [ip, Ipv4Addr::UNSPECIFIED] {
            let cfg = XdpConfig {
                ipv6: v6.clone(),
                ..XdpConfig::new("eth0", ip, 1)
            };
            assert!(check(&cfg).is_ok(), "{cfg:?}");
        }
    }

    #[test]
    fn a_missing_interface_is_named() {
        let e = open(&XdpConfig::new(
            "rustynosuch0",
            Ipv4Addr::new(10, 0, 0, 2),
            1,
        ))
        .unwrap_err();
        assert!(matches!(e, XdpError::NoSuchInterface(_)), "{e}");
        assert!(e.to_string().contains("no interface 'rustynosuch0'"), "{e}");
    }

    #[test]
    fn chunks_fit_the_mtu_and_its_headroom() {
        assert_eq!(chunk_size(1500), Some(2048));
        assert_eq!(chunk_size(2048 - 256 - 18), Some(2048));
        assert_eq!(chunk_size(2048 - 256 - 17), Some(4096));
        assert_eq!(chunk_size(9000), None);
    }

    #[test]
    fn a_toeplitz_nic_steers_by_its_own_key_and_table() {
        let key = vec![0x6d; 40];
        let table: Vec<u32> = (0..128).map(|i| i % 2).collect();
        let rss = steering(Ok((ETH_RSS_HASH_TOP, key.clone(), table)), "eth1", 2)
            .unwrap()
            .expect("Toeplitz");
        assert_eq!(rss.key, key);
        assert_eq!(rss.indirection.len(), 128);
        assert_eq!(rss.indirection[..4], [0, 1, 0, 1]);
        // Another hash function, or no RSS at all (veth): the stack cannot predict.
        let xor = 1 << 1;
        let t = vec![0, 1];
        assert!(steering(Ok((xor, key.clone(), t.clone())), "eth1", 2)
            .unwrap()
            .is_none());
        let unsupported = io::Error::from_raw_os_error(libc::EOPNOTSUPP);
        assert!(steering(Err(unsupported), "veth0", 2).unwrap().is_none());
        // A table that steers to queue 3 with two workers is refused, with the fix.
        let e = steering(Ok((ETH_RSS_HASH_TOP, key, vec![0, 1, 3])), "eth1", 2).unwrap_err();
        assert!(e.to_string().contains("ethtool -X eth1 equal 2"), "{e}");
    }

    #[test]
    fn errors_say_what_to_do() {
        let q = XdpError::Queues {
            ifname: "eth1".into(),
            rx: 8,
            tx: 8,
            workers: 2,
        }
        .to_string();
        assert!(q.contains("ethtool -L eth1 combined 2"), "{q}");
        let p = XdpError::os("bind", io::Error::from_raw_os_error(libc::EPERM));
        assert!(matches!(p, XdpError::NotPermitted { .. }));
        assert!(p.to_string().contains("CAP_BPF"), "{p}");
        let a = XdpError::AlreadyAttached {
            ifname: "eth1".into(),
            source: io::Error::from_raw_os_error(libc::EBUSY),
        }
        .to_string();
        assert!(a.contains("another XDP program"), "{a}");
    }
}
