//! Rusty's driver for Intel 82599 (ixgbe) NICs in user space, and a model of the NIC
//! written from the datasheet ("Intel 82599 10 GbE Controller Datasheet", rev. 3.3;
//! sections are cited as §x.y).
//!
//! - [`hw`]: the seam. The driver talks to a device only through [`hw::Registers`]
//!   (BAR0) and [`hw::DmaAllocator`] (memory the device reaches by bus address).
//! - [`model`]: an 82599 in software behind the same seam: register file, descriptor
//!   rings in DMA memory, RSS, checksums, with a wire side that tests (or a TAP bridge)
//!   put frames on and take frames off.
//!
//! All `unsafe` code is in [`dma`] (memory shared with the device) and `sys` (the
//! system calls, mappings and MMIO of a real device).

#![warn(missing_docs)]

mod desc;
pub mod dma;
mod hugepages;
pub mod hw;
mod init;
pub mod model;
pub mod pci;
mod queue;
pub mod regs;
mod sys;
mod vfio;

use std::time::Duration;

use rusty_stack::io::{Capabilities, ChecksumOffload};
use rusty_stack::rss::{RssConfig, MICROSOFT_RSS_KEY};

pub use init::InitError;
pub use pci::PciError;
pub use queue::{IxgbeQueue, IxgbeRx, IxgbeTx, QueueStats};

/// How to bring the device up.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct IxgbeConfig {
    /// Queue pairs, one per worker (at most 16: RSS spreads over 16 queues).
    pub queues: usize,
    /// Descriptors per ring (a multiple of 8, 32..=4096).
    pub ring_size: usize,
    /// The RSS key (40 bytes); the redirection table spreads its 128 entries
    /// round-robin over the queues.
    pub rss_key: [u8; 40],
    /// How long to wait for the link at start.
    pub link_wait: Duration,
    /// The IP MTU the stack is told (buffers hold 2 KiB, so at most 2,030).
    pub mtu: usize,
}

impl IxgbeConfig {
    /// `queues` queue pairs of 512 descriptors, Microsoft's RSS key, 10 s for the link.
    pub fn new(queues: usize) -> IxgbeConfig {
        IxgbeConfig {
            queues,
            ring_size: 512,
            rss_key: MICROSOFT_RSS_KEY,
            link_wait: Duration::from_secs(10),
            mtu: 1500,
        }
    }
}

/// Bytes per packet buffer: an MTU-sized frame fits one (SRRCTL.BSIZEPACKET = 2 KiB).
pub const BUF_SIZE: usize = 2048;

/// Bytes per transmit buffer for TSO super-frames.
pub const LARGE_BUF_SIZE: usize = 64 << 10;

/// The most bytes one data descriptor carries (DTALEN is 16 bits, §7.2.3.2.4).
pub const MAX_DTALEN: usize = 65_535;

/// The largest TSO super-frame the stack may build, as an IP packet: what one data
/// descriptor carries, less the Ethernet header.
pub const TSO_MAX: usize = MAX_DTALEN - 14;

/// Bring `device` up (§4.6.3 reset, §4.6.4 link, §4.6.7 receive, §4.6.8 transmit, RSS
/// per §7.1.2.8) and return one queue pair per worker, queue `i` for worker `i`. Each
/// queue's [`Capabilities::rss`] is exactly what was programmed, so the stack predicts
/// where the return traffic of its active opens lands.
pub fn open(mut device: hw::Device, cfg: &IxgbeConfig) -> Result<Vec<IxgbeQueue>, InitError> {
    if cfg.queues == 0 || cfg.queues > 16 {
        return Err(InitError::TooManyQueues(cfg.queues));
    }
    if !cfg.ring_size.is_multiple_of(8) || !(32..=4096).contains(&cfg.ring_size) {
        return Err(InitError::RingSize(cfg.ring_size));
    }
    let regs = device.regs.clone();
    init::reset(&regs)?;
    init::start_link(&regs);
    let rss = RssConfig::new(
        cfg.rss_key.to_vec(),
        (0..regs::RETA_ENTRIES)
            .map(|i| (i % cfg.queues) as u16)
            .collect(),
    );
    init::receive_global(&regs, &rss);
    init::transmit_global(&regs);
    let mac = init::mac_address(&regs);
    let mut caps = Capabilities::new(smoltcp_mac(mac), cfg.mtu.min(BUF_SIZE - 18));
    caps.rx_checksum = ChecksumOffload::ALL;
    caps.tx_checksum = ChecksumOffload {
        ipv4: false,
        tcp: true,
    };
    caps.queue_count = cfg.queues as u16;
    caps.rss = Some(rss);
    caps.tso_max = Some(TSO_MAX);
    let mut queues = Vec::with_capacity(cfg.queues);
    // Transmit buffers, MTU-sized and for TSO super-frames: together half the ring less
    // one, so a context and a data descriptor for every buffer in flight always fit.
    let large = (cfg.ring_size / 8).min(16);
    let small = cfg.ring_size / 2 - 1 - large;
    for q in 0..cfg.queues {
        let ring_bytes = cfg.ring_size * desc::DESC_LEN;
        let setup = queue::QueueSetup {
            index: q as u32,
            ring_size: cfg.ring_size,
            buf_size: BUF_SIZE,
            rx_ring: device.dma.alloc(ring_bytes, 128)?,
            rx_bufs: device.dma.alloc(2 * cfg.ring_size * BUF_SIZE, 4096)?,
            tx_ring: device.dma.alloc(ring_bytes, 128)?,
            tx_bufs: device.dma.alloc(small * BUF_SIZE, 4096)?,
            tx_large: device.dma.alloc(large * LARGE_BUF_SIZE, 4096)?,
            large_size: LARGE_BUF_SIZE,
        };
        let mut c = caps.clone();
        c.queue = q as u16;
        queues.push(IxgbeQueue::open(regs.clone(), setup, c)?);
    }
    init::enable_receive(&regs);
    let speed = init::wait_link(&regs, cfg.link_wait)?;
    log::info!(
        "ixgbe {}: {} queues, link up at {} Mb/s, MAC {}",
        device.name,
        cfg.queues,
        speed,
        smoltcp_mac(mac)
    );
    Ok(queues)
}

/// Open the real 82599 at PCI address `addr` (`0000:03:00.0`) and bring it up as
/// [`open`] does: through VFIO when it is bound to `vfio-pci`, else through sysfs with
/// hugepages (see [`pci`]). Every refusal says what to do about it.
pub fn open_pci(addr: &str, cfg: &IxgbeConfig) -> Result<Vec<IxgbeQueue>, PciError> {
    let device = pci::PciHost::system().device(addr, cfg)?;
    Ok(open(device, cfg)?)
}

fn smoltcp_mac(b: [u8; 6]) -> rusty_stack::io::MacAddr {
    rusty_stack::io::MacAddr(b)
}
