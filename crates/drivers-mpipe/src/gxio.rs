//! The seam: the gxio mPIPE API as the driver uses it (Linux ≤ 4.16,
//! `arch/tile/include/gxio/mpipe.h`; the user-space libgxio of the Tilera MDE has the
//! same calls). The driver is written against [`Gxio`] only: on a TILE-Gx it is
//! libgxio (`crate::sys`, `extern "C"` plus the C shim `shim/gxio_shim.c` for the
//! `static inline` calls), on any host it is the model in [`crate::model`].
//!
//! The hot path that gxio implements as `static inline` functions over shared memory
//! (reading idescs from a NotifRing, advancing its head; reserving eDMA slots, writing
//! edescs with the generation bit) is Rust in [`crate::iqueue`] and [`crate::equeue`],
//! against the layouts in [`crate::desc`]. What those functions do through MMIO (return
//! credits, push a buffer, read the eDMA completion count, wake the eDMA ring) is
//! here, one method each.

use std::fmt;

use crate::mem::Region;

/// A gxio error: the negative code libgxio returned, or what the model refused.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct GxioError {
    /// The call that failed (`gxio_mpipe_init_notif_ring`, ...).
    pub call: &'static str,
    /// libgxio's code (`GXIO_MPIPE_ERR_*`, negative), or 0 from the model.
    pub code: i32,
    /// Why, in words.
    pub why: String,
}

impl GxioError {
    /// An error of `call`, for `why`.
    pub fn new(call: &'static str, code: i32, why: impl Into<String>) -> GxioError {
        GxioError {
            call,
            code,
            why: why.into(),
        }
    }
}

impl fmt::Display for GxioError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} failed ({}): {}", self.call, self.code, self.why)
    }
}

impl std::error::Error for GxioError {}

/// The mPIPE's buffer size classes (`gxio_mpipe_buffer_size_enum_t`; the `size` field
/// of a buffer descriptor, `arch/mpipe_shm.h`). A buffer stack holds buffers of one class.
// Exhaustive: the eight size classes of the hardware's 3-bit code.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[repr(u8)]
pub enum BufferSize {
    /// 128 bytes (code 0).
    B128 = 0,
    /// 256 bytes (code 1).
    B256 = 1,
    /// 512 bytes (code 2).
    B512 = 2,
    /// 1024 bytes (code 3).
    B1024 = 3,
    /// 1664 bytes (code 4).
    B1664 = 4,
    /// 4096 bytes (code 5).
    B4096 = 5,
    /// 10368 bytes (code 6).
    B10368 = 6,
    /// 16384 bytes (code 7).
    B16384 = 7,
}

impl BufferSize {
    /// Every class, smallest first.
    pub const ALL: [BufferSize; 8] = [
        BufferSize::B128,
        BufferSize::B256,
        BufferSize::B512,
        BufferSize::B1024,
        BufferSize::B1664,
        BufferSize::B4096,
        BufferSize::B10368,
        BufferSize::B16384,
    ];

    /// Bytes per buffer.
    pub fn bytes(self) -> usize {
        [128, 256, 512, 1024, 1664, 4096, 10368, 16384][self as usize]
    }

    /// The class of the 3-bit `size` code.
    pub fn from_code(code: u64) -> BufferSize {
        BufferSize::ALL[(code & 7) as usize]
    }

    /// The smallest class that holds `bytes` (`None` past 16384).
    pub fn at_least(bytes: usize) -> Option<BufferSize> {
        BufferSize::ALL.into_iter().find(|s| s.bytes() >= bytes)
    }
}

/// How a load-balancer bucket picks its NotifRing (`gxio_mpipe_bucket_mode_t`).
// Exhaustive: the modes of `gxio_mpipe_bucket_mode_t`, fixed by the hardware.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BucketMode {
    /// The bucket's ring stays while packets of it are outstanding, else may move.
    DynamicFlowAffinity,
    /// The bucket always delivers to the ring it was given: what Rusty uses, so that a
    /// flow stays on one worker.
    StaticFlowAffinity,
    /// Each packet goes to the least full ring of the group.
    RoundRobin,
    /// The bucket's ring until it fills, then the least full.
    StickyFlowLocality,
}

/// An opened link (`gxio_mpipe_link_t` and what `gxio_mpipe_link_enumerate_mac` says
/// of it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Link {
    /// Its name (`xgbe0`, `gbe1`, `loop0`).
    pub name: String,
    /// Its channel: where its packets come from, where eDMA rings send.
    pub channel: u32,
    /// Its MAC address.
    pub mac: [u8; 6],
}

/// One classifier rule (`gxio_mpipe_rules_begin` ... `gxio_mpipe_rules_commit`):
/// packets from `channels` go to `num_buckets` buckets from `bucket` by the low bits of
/// their flow hash, into the smallest initialized buffer stack of `stacks` that holds
/// them without chaining (larger ones are dropped).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rule {
    /// First bucket.
    pub bucket: u32,
    /// Buckets (a power of two).
    pub num_buckets: u32,
    /// Buffer stacks the packet may go to.
    pub stacks: Vec<u32>,
    /// Channels the rule matches (empty: every channel of the context's links).
    pub channels: Vec<u32>,
    /// Bytes left free before the packet in its buffer.
    pub headroom: u8,
}

/// The gxio mPIPE calls the driver makes, on one mPIPE context
/// (`gxio_mpipe_context_t`, shared by every worker: its hot-path calls are single MMIO
/// accesses, safe from any tile).
pub trait Gxio: Send + Sync {
    /// What to call the instance in messages (`mpipe0`, `model`).
    fn name(&self) -> String;

    /// `len` bytes of memory the mPIPE can reach, aligned to `align` (a power of two up
    /// to 64 KiB): hugepages registered with the IOTLB on a TILE-Gx.
    fn alloc_memory(&self, len: usize, align: usize) -> Result<Region, GxioError>;

    /// `gxio_mpipe_link_open` (data permission) and the link's MAC from
    /// `gxio_mpipe_link_enumerate_mac`.
    fn link_open(&self, name: &str) -> Result<Link, GxioError>;

    /// `gxio_mpipe_alloc_buffer_stacks`: `count` stacks, the first one's index.
    fn alloc_buffer_stacks(&self, count: u32) -> Result<u32, GxioError>;

    /// `gxio_mpipe_calc_buffer_stack_bytes`: memory a stack needs to hold `buffers`.
    fn calc_buffer_stack_bytes(&self, buffers: usize) -> usize;

    /// `gxio_mpipe_init_buffer_stack`: stack `stack` holds buffers of `size`, in `mem`
    /// (64 KiB aligned; software must not touch it afterwards).
    fn init_buffer_stack(
        &self,
        stack: u32,
        size: BufferSize,
        mem: &Region,
    ) -> Result<(), GxioError>;

    /// `gxio_mpipe_register_page`: buffers of `stack` may live in `page`.
    fn register_page(&self, stack: u32, page: &Region) -> Result<(), GxioError>;

    /// `gxio_mpipe_push_buffer` (`static inline`, one MMIO write): give the buffer at
    /// `va` (128-byte aligned) to `stack`.
    fn push_buffer(&self, stack: u32, va: u64);

    /// `gxio_mpipe_alloc_notif_rings`.
    fn alloc_notif_rings(&self, count: u32) -> Result<u32, GxioError>;

    /// `gxio_mpipe_init_notif_ring`: ring `ring` writes idescs into `mem` (128, 512,
    /// 2048 or 65536 idescs of 64 bytes). [`crate::iqueue::Iqueue::init`] sets the tail
    /// word first, as `gxio_mpipe_iqueue_init` does.
    fn init_notif_ring(&self, ring: u32, mem: &Region) -> Result<(), GxioError>;

    /// `gxio_mpipe_alloc_notif_groups`.
    fn alloc_notif_groups(&self, count: u32) -> Result<u32, GxioError>;

    /// `gxio_mpipe_alloc_buckets`.
    fn alloc_buckets(&self, count: u32) -> Result<u32, GxioError>;

    /// `gxio_mpipe_init_notif_group_and_buckets`: group `group` holds rings
    /// `ring..ring + num_rings`; buckets `bucket..bucket + num_buckets` get `mode` and a
    /// ring each, round-robin (bucket `bucket + i` → ring `ring + i % num_rings`).
    #[allow(clippy::too_many_arguments)]
    fn init_notif_group_and_buckets(
        &self,
        group: u32,
        ring: u32,
        num_rings: u32,
        bucket: u32,
        num_buckets: u32,
        mode: BucketMode,
    ) -> Result<(), GxioError>;

    /// `gxio_mpipe_rules_init`, then per rule `_begin`, `_set_headroom`,
    /// `_add_channel`, then `gxio_mpipe_rules_commit`.
    fn commit_rules(&self, rules: &[Rule]) -> Result<(), GxioError>;

    /// `gxio_mpipe_credit` (`static inline`, one MMIO write): `count` idescs of
    /// `ring` and `bucket` were handled.
    fn credit(&self, ring: Option<u32>, bucket: Option<u32>, count: u32);

    /// `gxio_mpipe_alloc_edma_rings`.
    fn alloc_edma_rings(&self, count: u32) -> Result<u32, GxioError>;

    /// `gxio_mpipe_init_edma_ring` (what `gxio_mpipe_equeue_init` calls): eDMA ring
    /// `ering` sends on `channel` from edescs in `mem` (512, 2048, 8192 or 65536
    /// edescs of 16 bytes).
    fn init_edma_ring(&self, ering: u32, channel: u32, mem: &Region) -> Result<(), GxioError>;

    /// How many edescs of `ering` the hardware has completed since it was initialized
    /// (the 16-bit count of the eDMA post region, widened as
    /// `__gxio_dma_queue_update_credits` keeps it in `hw_complete_count`).
    fn edma_completed(&self, ering: u32) -> u64;

    /// `gxio_mpipe_equeue_flush`: wake `ering` to look at what was written.
    fn edma_post(&self, ering: u32);
}
