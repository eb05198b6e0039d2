//! Rusty's driver for the TILE-Gx mPIPE, through the gxio API, and a host model of that
//! API written from the public headers (Linux ≤ 4.16: `arch/tile/include/gxio/mpipe.h`,
//! `arch/tile/include/arch/mpipe_shm.h`, `arch/tile/include/arch/mpipe.h`, and the
//! user of them in `drivers/net/ethernet/tile/tilegx.c`).
//!
//! - [`gxio`]: the seam, the gxio calls the driver makes, as the [`gxio::Gxio`] trait.
//! - [`iqueue`], [`equeue`], [`desc`]: gxio's `static inline` hot path (NotifRing
//!   head and tail, eDMA slots and the generation bit) in Rust, against the idesc and
//!   edesc layouts.
//! - [`queue`]: one [`MpipeQueue`] per worker, a [`rusty_stack::io::PacketIo`].
//! - [`model`]: the gxio API on the host: buffer stacks, the classifier, the load
//!   balancer, NotifRings and eDMA rings, with a [`model::Wire`] that tests (or a TAP
//!   bridge) put frames on and take frames off.
//!
//! On a TILE-Gx the seam is libgxio (`sys`, compiled only for `target_arch =
//! "tilegx"`, which no Rust toolchain targets today); everywhere else [`open_tilegx`]
//! says so and the model stands in. All `unsafe` code is in `mem` (memory shared with
//! the device) and `sys`.
//!
//! # Steering and flow owners
//!
//! The classifier hashes a packet's addresses and ports into a flow hash; its low bits
//! pick one of [`MpipeConfig::buckets`] buckets; bucket `i` always delivers to worker
//! `i % workers` (static flow affinity). So every packet of a flow lands on one worker,
//! but not on the one the stack would pick: the flow hash is not Toeplitz
//! ([`Capabilities::rss`] is `None`), and the stack's owner rule
//! (`rusty_stack::engine::owner`: an active open is owned by `local port % queues`, a
//! passive one by a hash of the remote address and port) is not what the classifier
//! computes. With `queue_count` = workers the link reports
//! [`Capabilities::unpredictable_steering`], and the stack hands each segment that
//! lands on a worker other than its flow's owner to the owner, as it does for TAP:
//! correct, at the cost of one hand-over per such segment (about `(n - 1) / n` of them).
//! Removing the hand-overs needs the classifier and the stack to agree: a custom
//! classifier (`tile-mpipe-cc`) computing the stack's owner rule, or a way for the
//! stack to be told the classifier's hash.

#![warn(missing_docs)]

pub mod desc;
pub mod equeue;
pub mod gxio;
pub mod iqueue;
mod mem;
pub mod model;
pub mod queue;
mod sys;

use std::fmt;
use std::sync::Arc;

use rusty_stack::io::{Capabilities, ChecksumOffload, MacAddr};

use gxio::{BucketMode, BufferSize, Gxio, GxioError, Rule};
use queue::{QueueParts, Stack};

pub use equeue::Equeue;
pub use iqueue::Iqueue;
pub use mem::{Lease, Region};
pub use queue::{MpipeQueue, MpipeRx, MpipeTx, QueueStats};

/// How to set the mPIPE up.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct MpipeConfig {
    /// Workers, each with its own NotifRing and eDMA ring.
    pub workers: usize,
    /// Load-balancer buckets (a power of two, at least `workers`); bucket `i` delivers
    /// to worker `i % workers`.
    pub buckets: u32,
    /// Idescs per NotifRing (128, 512, 2048 or 65536).
    pub notif_entries: usize,
    /// Edescs per eDMA ring (512, 2048, 8192 or 65536); each worker has as many
    /// transmit buffers, so the ring never refuses a frame the driver has a buffer for.
    pub edma_entries: usize,
    /// Buffer stacks, smallest class first: the classifier puts a packet into the
    /// smallest that holds it, and drops what none holds.
    pub stacks: Vec<(BufferSize, usize)>,
    /// The IP MTU the stack is told.
    pub mtu: usize,
}

impl MpipeConfig {
    /// `workers` workers, 1024 buckets, rings of 512, and buffer stacks of 1664-byte
    /// (an MTU-sized frame) and 16384-byte buffers (jumbo frames).
    pub fn new(workers: usize) -> MpipeConfig {
        MpipeConfig {
            workers,
            buckets: 1024,
            notif_entries: 512,
            edma_entries: 512,
            stacks: vec![
                (BufferSize::B1664, 512 * workers.max(1) + 256),
                (BufferSize::B16384, 64),
            ],
            mtu: 1500,
        }
    }
}

/// Why the mPIPE could not be set up.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum MpipeError {
    /// This is no TILE-Gx.
    NotTileGx,
    /// A configuration the hardware cannot take.
    Config(String),
    /// A gxio call failed.
    Gxio(GxioError),
}

impl fmt::Display for MpipeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MpipeError::NotTileGx => {
                write!(f, "mPIPE needs a TILE-Gx; on this host use mpipe-model:TAP")
            }
            MpipeError::Config(why) => write!(f, "mPIPE configuration: {why}"),
            MpipeError::Gxio(e) => write!(f, "mPIPE: {e}"),
        }
    }
}

impl std::error::Error for MpipeError {}

impl From<GxioError> for MpipeError {
    fn from(e: GxioError) -> MpipeError {
        MpipeError::Gxio(e)
    }
}

/// Open the link `link` (`xgbe0`) of the real mPIPE with `workers` workers. Only a
/// TILE-Gx build has one; anywhere else this is [`MpipeError::NotTileGx`].
pub fn open_tilegx(link: &str, workers: usize) -> Result<Vec<MpipeQueue>, MpipeError> {
    let gxio = sys::context_for(link)?;
    open(gxio, link, &MpipeConfig::new(workers))
}

/// Set up link `link` of the mPIPE behind `gxio` and return one queue per worker,
/// queue `i` for worker `i`: buffer stacks filled with buffers, a NotifRing and an
/// eDMA ring per worker, a notif group whose buckets spread round-robin over the rings
/// with static flow affinity, and one classifier rule for the link's channel.
pub fn open(
    gxio: Arc<dyn Gxio>,
    link: &str,
    cfg: &MpipeConfig,
) -> Result<Vec<MpipeQueue>, MpipeError> {
    check(cfg)?;
    let workers = cfg.workers as u32;
    let port = gxio.link_open(link)?;
    // Buffer stacks: storage for the stack itself (64 KiB aligned), the buffers in
    // registered memory, every buffer pushed.
    let first = gxio.alloc_buffer_stacks(cfg.stacks.len() as u32)?;
    let mut stacks = Vec::with_capacity(cfg.stacks.len());
    for (k, &(size, count)) in cfg.stacks.iter().enumerate() {
        let index = first + k as u32;
        let storage = gxio.alloc_memory(gxio.calc_buffer_stack_bytes(count), 64 << 10)?;
        gxio.init_buffer_stack(index, size, &storage)?;
        let buffers = gxio.alloc_memory(count * size.bytes(), 64 << 10)?;
        gxio.register_page(index, &buffers)?;
        for i in 0..count {
            gxio.push_buffer(index, buffers.va(i * size.bytes()));
        }
        stacks.push(Stack {
            index,
            size,
            buffers,
        });
    }
    let stacks: Arc<[Stack]> = stacks.into();
    // Ingress: a NotifRing per worker, the buckets over them, the rule.
    let ring = gxio.alloc_notif_rings(workers)?;
    let mut iqueues = Vec::with_capacity(cfg.workers);
    for w in 0..workers {
        let mem = gxio.alloc_memory(cfg.notif_entries * desc::IDESC_LEN, 64 << 10)?;
        iqueues.push(Iqueue::init(Arc::clone(&gxio), ring + w, mem)?);
    }
    let group = gxio.alloc_notif_groups(1)?;
    let bucket = gxio.alloc_buckets(cfg.buckets)?;
    gxio.init_notif_group_and_buckets(
        group,
        ring,
        workers,
        bucket,
        cfg.buckets,
        BucketMode::StaticFlowAffinity,
    )?;
    gxio.commit_rules(&[Rule {
        bucket,
        num_buckets: cfg.buckets,
        stacks: stacks.iter().map(|s| s.index).collect(),
        channels: vec![port.channel],
        headroom: 0,
    }])?;
    // Egress: an eDMA ring and transmit buffers per worker.
    let ering = gxio.alloc_edma_rings(workers)?;
    let tx_buf = (cfg.mtu + 14).next_multiple_of(128);
    let mut caps = Capabilities::new(MacAddr(port.mac), cfg.mtu);
    caps.rx_checksum = ChecksumOffload::ALL;
    caps.tx_checksum = ChecksumOffload {
        ipv4: false,
        tcp: true,
    };
    caps.queue_count = workers as u16;
    caps.rss = None;
    let mut queues = Vec::with_capacity(cfg.workers);
    for (w, iqueue) in iqueues.into_iter().enumerate() {
        let mem = gxio.alloc_memory(cfg.edma_entries * desc::EDESC_LEN, 64 << 10)?;
        let equeue = Equeue::init(Arc::clone(&gxio), ering + w as u32, port.channel, mem)?;
        let tx_bufs = gxio.alloc_memory(cfg.edma_entries * tx_buf, 64 << 10)?;
        // An edesc's stack_idx selects the IOTLB its buffer is translated through.
        gxio.register_page(stacks[0].index, &tx_bufs)?;
        let mut c = caps.clone();
        c.queue = w as u16;
        queues.push(MpipeQueue::new(QueueParts {
            gxio: Arc::clone(&gxio),
            iqueue,
            equeue,
            stacks: Arc::clone(&stacks),
            tx_bufs,
            tx_buf,
            tx_stack: stacks[0].index,
            caps: c,
        }));
    }
    log::info!(
        "mPIPE {} link {} (channel {}): {} workers, {} buckets, MAC {}",
        gxio.name(),
        port.name,
        port.channel,
        cfg.workers,
        cfg.buckets,
        MacAddr(port.mac)
    );
    Ok(queues)
}

fn check(cfg: &MpipeConfig) -> Result<(), MpipeError> {
    let bad = |why: String| Err(MpipeError::Config(why));
    if cfg.workers == 0 || cfg.workers > 256 {
        return bad(format!("{} workers (1 to 256 NotifRings)", cfg.workers));
    }
    if !cfg.buckets.is_power_of_two() || (cfg.buckets as usize) < cfg.workers {
        return bad(format!(
            "{} buckets (a power of two, at least one per worker)",
            cfg.buckets
        ));
    }
    if !iqueue::RING_ENTRIES.contains(&cfg.notif_entries) {
        return bad(format!("NotifRings of {} idescs", cfg.notif_entries));
    }
    if !equeue::RING_ENTRIES.contains(&cfg.edma_entries) {
        return bad(format!("eDMA rings of {} edescs", cfg.edma_entries));
    }
    let Some(&(largest, _)) = cfg.stacks.last() else {
        return bad("no buffer stack".into());
    };
    if cfg.stacks.windows(2).any(|w| w[0].0 >= w[1].0) || cfg.stacks.len() > 32 {
        return bad("buffer stacks must grow in size, at most 32".into());
    }
    if cfg.mtu + 14 > largest.bytes() || cfg.mtu + 14 > 16383 || cfg.mtu < 576 {
        return bad(format!("an MTU of {}", cfg.mtu));
    }
    Ok(())
}
