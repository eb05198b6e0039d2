//! The gxio mPIPE API on the host, from the public headers (see the crate docs): the
//! same [`Gxio`] the driver uses on a TILE-Gx, with the hardware behind it in software.
//! It keeps its own descriptor bit positions (in `hw`), not the driver's
//! [`crate::desc`], so a wrong field on either side fails a test instead of agreeing
//! with itself.
//!
//! [`Model::gxio`] is the context the driver opens; [`Model::wire`] the other side of
//! the link: [`Wire::deliver`] runs ingress at once, [`Wire::take_transmitted`] takes
//! what egress sent. Nothing runs by itself: an eDMA ring is processed when the driver
//! wakes it (`gxio_mpipe_equeue_flush`), unless a test stalls egress
//! ([`Wire::stall_egress`]), which is how a full ring is made.
//!
//! Modelled: resource allocation (stacks, NotifRings, groups, buckets, eDMA rings);
//! buffer stacks as LIFOs of 128-byte-aligned addresses (an empty stack makes an idesc
//! with `be` set, counted); the classifier's rules (channel, the smallest stack that
//! holds the packet without chaining, the bucket by the low bits of the flow hash), IPv4
//! header checks, the flow hash (see `classify`), the L4 checksum status (`cs`,
//! `csum_seed_val`); the load balancer with static flow affinity (bucket → its ring;
//! the other modes behave the same here); NotifRings with the real idesc layout, the
//! tail word and ring credits; eDMA rings with the edesc layout, the generation bit,
//! gathering over several edescs to `bound`, `ns`, checksum insertion
//! (`csum_start`/`csum_dest`/`csum_seed`), `hwb` buffer return, and the completion
//! count. Not modelled: chaining (packets larger than every stack are dropped), VLANs,
//! IPv6, custom headers and headroom past 0, timestamps, interrupts, dynamic load
//! balancing, multiple mPIPE instances and links, the snf size, TSO (the driver does not
//! use it).

mod classify;
mod hw;

use std::sync::{Arc, Mutex, MutexGuard};

use crate::gxio::{BucketMode, BufferSize, Gxio, GxioError, Link, Rule};
use crate::mem::Region;

/// How the model is built.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ModelConfig {
    /// The one link's name (what `gxio_mpipe_link_open` takes).
    pub link: String,
    /// Its MAC address.
    pub mac: [u8; 6],
    /// Bytes of memory the model hands out.
    pub memory: usize,
}

impl ModelConfig {
    /// Link `xgbe0` with `mac` and 64 MiB of memory.
    pub fn new(mac: [u8; 6]) -> ModelConfig {
        ModelConfig {
            link: "xgbe0".into(),
            mac,
            memory: 64 << 20,
        }
    }
}

/// What became of a frame put on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum RxVerdict {
    /// An idesc for it was written to `ring`, chosen through `bucket`.
    Delivered {
        /// The NotifRing.
        ring: u32,
        /// The bucket.
        bucket: u32,
        /// The buffer stack.
        stack: u32,
    },
    /// The stack was empty: an idesc with `be` set was written to `ring`.
    NoBuffer {
        /// The NotifRing.
        ring: u32,
    },
    /// Shorter than an Ethernet header.
    Runt,
    /// An IPv4 header with a wrong checksum (the default classifier drops these).
    BadIpChecksum,
    /// No committed rule covers the link.
    NoRule,
    /// Larger than every buffer stack of the rule.
    TooBig,
    /// The bucket's NotifRing has no credit left.
    RingFull {
        /// The NotifRing.
        ring: u32,
    },
    /// The rule or bucket is set up wrong (a misuse was logged).
    Misconfigured,
}

/// The model's counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ModelStats {
    /// Idescs written for whole packets.
    pub delivered: u64,
    /// Packets dropped: their stack was empty (each also written as a `be` idesc).
    pub no_buffer: u64,
    /// Packets dropped by the classifier or for a full ring (every other verdict).
    pub dropped: u64,
    /// Packets egress put on the wire.
    pub sent: u64,
    /// Edescs egress completed.
    pub edescs: u64,
}

struct StackState {
    size: BufferSize,
    capacity: usize,
    buffers: Vec<u64>,
    pages: Vec<Region>,
}

struct NotifRing {
    mem: Region,
    entries: usize,
    /// Where the next idesc goes (1..entries).
    write: usize,
    credits: usize,
    written: u64,
}

#[derive(Clone, Copy)]
struct Bucket {
    ring: u32,
    #[allow(dead_code)]
    mode: BucketMode,
}

struct EdmaRing {
    mem: Region,
    entries: usize,
    /// The next slot egress looks at.
    read: u64,
    completed: u64,
    /// The packet being gathered, and its checksum request (start, dest, seed).
    partial: Vec<u8>,
    csum: Option<(usize, usize, u16)>,
    drop_partial: bool,
}

/// Upper bounds of the resources (the idesc's `notif_ring` and `bucket_id`, the
/// edesc's `stack_idx` widths; eDMA rings as the snf note in `gxio/mpipe.h` counts them).
const STACKS: u32 = 32;
const NOTIF_RINGS: u32 = 256;
const GROUPS: u32 = 32;
const BUCKETS: u32 = 8192;
const EDMA_RINGS: u32 = 24;
/// Where the model's addresses start (inside the 42-bit `va`, positive).
const VA_BASE: u64 = 0x10_0000_0000;
const CHANNEL: u32 = 0;

struct State {
    cfg: ModelConfig,
    regions: Vec<Region>,
    next_va: u64,
    used: usize,
    link_open: bool,
    next: [u32; 5],
    stacks: Vec<Option<StackState>>,
    rings: Vec<Option<NotifRing>>,
    buckets: Vec<Option<Bucket>>,
    rules: Vec<Rule>,
    erings: Vec<Option<EdmaRing>>,
    wire: Vec<Vec<u8>>,
    stalled: bool,
    stats: ModelStats,
    misuse: Vec<String>,
    packet_sqn: u64,
}

/// A host mPIPE: hand [`Model::gxio`] to [`crate::open`], drive [`Model::wire`], check
/// [`Model::misuse`].
pub struct Model {
    state: Arc<Mutex<State>>,
}

fn lock(s: &Mutex<State>) -> MutexGuard<'_, State> {
    s.lock().unwrap_or_else(|p| p.into_inner())
}

impl Model {
    /// An mPIPE with one link, as after boot.
    pub fn new(cfg: ModelConfig) -> Model {
        Model {
            state: Arc::new(Mutex::new(State {
                cfg,
                regions: Vec::new(),
                next_va: VA_BASE,
                used: 0,
                link_open: false,
                next: [0; 5],
                stacks: (0..STACKS).map(|_| None).collect(),
                rings: (0..NOTIF_RINGS).map(|_| None).collect(),
                buckets: vec![None; BUCKETS as usize],
                rules: Vec::new(),
                erings: (0..EDMA_RINGS).map(|_| None).collect(),
                wire: Vec::new(),
                stalled: false,
                stats: ModelStats::default(),
                misuse: Vec::new(),
                packet_sqn: 0,
            })),
        }
    }

    /// The mPIPE context, as the driver opens it.
    pub fn gxio(&self) -> Arc<dyn Gxio> {
        Arc::new(ModelGxio {
            state: Arc::clone(&self.state),
        })
    }

    /// The network side of the link.
    pub fn wire(&self) -> Wire {
        Wire {
            state: Arc::clone(&self.state),
        }
    }

    /// The counters.
    pub fn stats(&self) -> ModelStats {
        lock(&self.state).stats
    }

    /// What the driver did that real hardware would misbehave on, in order.
    pub fn misuse(&self) -> Vec<String> {
        lock(&self.state).misuse.clone()
    }

    /// Every initialized buffer stack: its index, size class, buffers it holds now,
    /// and buffers it held at most.
    pub fn stacks(&self) -> Vec<(u32, BufferSize, usize, usize)> {
        let s = lock(&self.state);
        s.stacks
            .iter()
            .enumerate()
            .filter_map(|(i, st)| {
                st.as_ref()
                    .map(|st| (i as u32, st.size, st.buffers.len(), st.capacity))
            })
            .collect()
    }

    /// Idescs written to NotifRing `ring` so far.
    pub fn idescs_written(&self, ring: u32) -> u64 {
        let s = lock(&self.state);
        s.rings
            .get(ring as usize)
            .and_then(|r| r.as_ref())
            .map_or(0, |r| r.written)
    }
}

/// The link's wire side. Cheap to clone.
#[derive(Clone)]
pub struct Wire {
    state: Arc<Mutex<State>>,
}

impl Wire {
    /// A frame (Ethernet header to payload, no FCS) arrives; ingress runs now.
    pub fn deliver(&self, frame: &[u8]) -> RxVerdict {
        let mut s = lock(&self.state);
        let v = s.ingress(frame, Faults::default());
        s.count(v);
        v
    }

    /// As [`Wire::deliver`], with the MAC flagging an error the way the hardware
    /// writes it into the idesc (`me`, `tr`, `ce`), for tests of the driver's checks.
    pub fn deliver_flawed(&self, frame: &[u8], faults: Faults) -> RxVerdict {
        let mut s = lock(&self.state);
        let v = s.ingress(frame, faults);
        s.count(v);
        v
    }

    /// Move the frames egress sent (no FCS), oldest first, into `out`.
    pub fn take_transmitted(&self, out: &mut Vec<Vec<u8>>) {
        out.append(&mut lock(&self.state).wire);
    }

    /// Hold egress (as a link that cannot send would): eDMA rings fill and complete
    /// nothing until released, when everything written is processed at once.
    pub fn stall_egress(&self, stalled: bool) {
        let mut s = lock(&self.state);
        s.stalled = stalled;
        if !stalled {
            for e in 0..EDMA_RINGS {
                if s.erings[e as usize].is_some() {
                    s.egress(e);
                }
            }
        }
    }
}

impl rusty_stack::io::FrameWire for Wire {
    fn deliver(&self, frame: &[u8]) {
        // Dropped frames are the model's business (its counters and misuse log).
        let _ = Wire::deliver(self, frame);
    }
    fn take_transmitted(&self, out: &mut Vec<Vec<u8>>) {
        Wire::take_transmitted(self, out);
    }
}

/// Errors the MAC reports in an idesc (see [`Wire::deliver_flawed`]).
// Exhaustive: the three MAC error bits of an idesc, fixed by the hardware.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Faults {
    /// MAC error (`me`).
    pub mac: bool,
    /// Truncation (`tr`).
    pub truncated: bool,
    /// CRC error (`ce`).
    pub crc: bool,
}

impl State {
    fn misuse(&mut self, what: String) {
        log::warn!("mPIPE model: {what}");
        self.misuse.push(what);
    }

    fn count(&mut self, v: RxVerdict) {
        match v {
            RxVerdict::Delivered { .. } => self.stats.delivered += 1,
            RxVerdict::NoBuffer { .. } => self.stats.no_buffer += 1,
            _ => self.stats.dropped += 1,
        }
    }

    /// The region holding `len` bytes at `va`, and the offset there.
    fn find(&self, va: u64, len: usize) -> Option<(Region, usize)> {
        self.regions.iter().find_map(|r| {
            let off = r.offset_of(va)?;
            (off + len <= r.len()).then(|| (r.clone(), off))
        })
    }

    fn ingress(&mut self, frame: &[u8], faults: Faults) -> RxVerdict {
        let class = match classify::classify(frame) {
            Ok(c) => c,
            Err(classify::Drop::Runt) => return RxVerdict::Runt,
            Err(classify::Drop::BadIpChecksum) => return RxVerdict::BadIpChecksum,
        };
        let Some(rule) = self
            .rules
            .iter()
            .find(|r| r.channels.is_empty() || r.channels.contains(&CHANNEL))
            .cloned()
        else {
            return RxVerdict::NoRule;
        };
        // The smallest of the rule's stacks that holds the packet unchained.
        let need = frame.len() + usize::from(rule.headroom);
        let stack = rule
            .stacks
            .iter()
            .filter_map(|&i| {
                let st = self.stacks.get(i as usize)?.as_ref()?;
                (st.size.bytes() >= need).then_some((st.size, i))
            })
            .min();
        let Some((size, stack)) = stack else {
            return RxVerdict::TooBig;
        };
        let bucket = rule.bucket + (class.hash & (rule.num_buckets - 1));
        let Some(b) = self.buckets.get(bucket as usize).copied().flatten() else {
            self.misuse(format!("rule sends to bucket {bucket}, never initialized"));
            return RxVerdict::Misconfigured;
        };
        let ring = b.ring;
        match self.rings.get(ring as usize).and_then(|r| r.as_ref()) {
            None => {
                self.misuse(format!(
                    "bucket {bucket} names NotifRing {ring}, not initialized"
                ));
                return RxVerdict::Misconfigured;
            }
            Some(r) if r.credits == 0 => return RxVerdict::RingFull { ring },
            Some(_) => {}
        }
        let popped = self.stacks[stack as usize]
            .as_mut()
            .and_then(|st| st.buffers.pop());
        let mut d = hw::IdescFields {
            notif_ring: ring,
            channel: CHANNEL,
            bucket,
            flow_hash: class.hash,
            ethertype: class.ethertype,
            l3: class.l3,
            packet_sqn: self.packet_sqn,
            me: faults.mac,
            tr: faults.truncated,
            ce: faults.crc,
            ..hw::IdescFields::default()
        };
        self.packet_sqn += 1;
        let verdict = match popped {
            None => {
                d.be = true;
                d.c = hw::C_INVALID;
                RxVerdict::NoBuffer { ring }
            }
            Some(va) => {
                let Some((mem, off)) = self.find(va, size.bytes()) else {
                    self.misuse(format!(
                        "stack {stack} held {va:#x}, not in memory the model handed out"
                    ));
                    return RxVerdict::Misconfigured;
                };
                let at = off + usize::from(rule.headroom);
                mem.write(at, frame);
                if let Some((start, seed)) = class.l4_csum {
                    let end = 14 + usize::from(u16::from_be_bytes([frame[16], frame[17]]));
                    let result = classify::l4_result(frame, start, end, seed);
                    d.cs = true;
                    d.csum_start = start as u8;
                    // Packet byte order: bits 7:0 carry the earlier byte.
                    d.csum_seed_val = result.swap_bytes();
                }
                d.l2_size = frame.len();
                d.va = va;
                d.stack = stack;
                d.size = size as u8;
                d.c = hw::C_UNCHAINED;
                RxVerdict::Delivered {
                    ring,
                    bucket,
                    stack,
                }
            }
        };
        let Some(r) = self.rings[ring as usize].as_mut() else {
            return RxVerdict::Misconfigured;
        };
        hw::write_idesc(&r.mem, r.write, &d);
        r.write = if r.write + 1 == r.entries {
            1
        } else {
            r.write + 1
        };
        crate::mem::release();
        r.mem.store(0, r.write as u64);
        r.credits -= 1;
        r.written += 1;
        verdict
    }

    /// Process ring `e` from its read slot while the generation bits say the edescs are
    /// new.
    fn egress(&mut self, e: u32) {
        if self.stalled {
            return;
        }
        loop {
            let Some(ring) = self.erings[e as usize].as_mut() else {
                return;
            };
            let n = ring.entries as u64;
            let off = (ring.read % n) as usize * hw::EDESC_LEN;
            let gen = u64::from((ring.read / n).is_multiple_of(2));
            let w0 = ring.mem.load(off);
            if w0 & 1 != gen {
                return;
            }
            crate::mem::acquire();
            let d = hw::read_edesc(w0, ring.mem.load(off + 8));
            ring.read += 1;
            let (partial_len, dropping) = (ring.partial.len(), ring.drop_partial);
            let mut bytes = vec![0u8; usize::from(d.xfer_size)];
            let mut fault = None;
            if d.xfer_size > 0 && !d.ns && !dropping {
                match self.find(d.va, bytes.len()) {
                    Some((mem, o)) => mem.read(o, &mut bytes),
                    None => {
                        fault = Some(format!(
                            "eDMA ring {e}: {} bytes at {:#x}, not in memory handed out",
                            d.xfer_size, d.va
                        ))
                    }
                }
            }
            let faulted = fault.is_some();
            if let Some(f) = fault {
                self.misuse(f);
            }
            let Some(ring) = self.erings[e as usize].as_mut() else {
                return;
            };
            ring.drop_partial |= d.ns || faulted;
            if d.csum {
                ring.csum = Some((
                    partial_len + usize::from(d.csum_start),
                    partial_len + usize::from(d.csum_dest),
                    d.csum_seed,
                ));
            }
            ring.partial.extend_from_slice(&bytes);
            ring.completed += 1;
            self.stats.edescs += 1;
            if d.hwb {
                let va = d.va & !127;
                match self
                    .stacks
                    .get_mut(d.stack as usize)
                    .and_then(|s| s.as_mut())
                {
                    Some(st) => st.buffers.push(va),
                    None => self.misuse(format!("hwb to stack {}, not initialized", d.stack)),
                }
            }
            if d.bound {
                let Some(ring) = self.erings[e as usize].as_mut() else {
                    return;
                };
                let mut packet = std::mem::take(&mut ring.partial);
                let csum = ring.csum.take();
                let drop = std::mem::take(&mut ring.drop_partial);
                if drop {
                    continue;
                }
                if let Some((start, dest, seed)) = csum {
                    if start > packet.len() || dest + 2 > packet.len() {
                        self.misuse(format!(
                            "eDMA ring {e}: checksum from {start} into {dest} of a {}-byte packet",
                            packet.len()
                        ));
                        continue;
                    }
                    let seed = u32::from(seed.swap_bytes());
                    let sum = classify::l4_result(&packet, start, packet.len(), seed);
                    packet[dest..dest + 2].copy_from_slice(&(!sum).to_be_bytes());
                }
                self.stats.sent += 1;
                self.wire.push(packet);
            }
        }
    }
}

/// The model as the driver's [`Gxio`].
struct ModelGxio {
    state: Arc<Mutex<State>>,
}

fn refuse<T>(call: &'static str, why: impl Into<String>) -> Result<T, GxioError> {
    Err(GxioError::new(call, 0, why))
}

impl ModelGxio {
    fn alloc(
        &self,
        kind: usize,
        count: u32,
        limit: u32,
        call: &'static str,
    ) -> Result<u32, GxioError> {
        let mut s = lock(&self.state);
        let first = s.next[kind];
        if count == 0 || first + count > limit {
            return refuse(call, format!("{count} more; {first} of {limit} taken"));
        }
        s.next[kind] += count;
        Ok(first)
    }

    fn owned(&self, s: &State, mem: &Region, call: &'static str) -> Result<(), GxioError> {
        if s.find(mem.va(0), mem.len()).is_none() {
            return refuse(call, format!("{mem:?} is not memory the model handed out"));
        }
        Ok(())
    }
}

impl Gxio for ModelGxio {
    fn name(&self) -> String {
        "model".into()
    }

    fn alloc_memory(&self, len: usize, align: usize) -> Result<Region, GxioError> {
        let mut s = lock(&self.state);
        if s.used + len > s.cfg.memory {
            return refuse(
                "alloc_memory",
                format!("{len} bytes; {} of {} used", s.used, s.cfg.memory),
            );
        }
        let align = align.clamp(128, 64 << 10) as u64;
        let va = s.next_va.next_multiple_of(align);
        let r = Region::heap(len, 128, va);
        s.next_va = va + (len as u64).next_multiple_of(128);
        s.used += len;
        s.regions.push(r.clone());
        Ok(r)
    }

    fn link_open(&self, name: &str) -> Result<Link, GxioError> {
        let mut s = lock(&self.state);
        if name != s.cfg.link {
            return refuse("gxio_mpipe_link_open", format!("no link {name}"));
        }
        s.link_open = true;
        Ok(Link {
            name: name.to_string(),
            channel: CHANNEL,
            mac: s.cfg.mac,
        })
    }

    fn alloc_buffer_stacks(&self, count: u32) -> Result<u32, GxioError> {
        self.alloc(0, count, STACKS, "gxio_mpipe_alloc_buffer_stacks")
    }

    fn calc_buffer_stack_bytes(&self, buffers: usize) -> usize {
        // The hardware keeps buffer descriptors of 8 bytes, with room to spare.
        (buffers * 8 + 4096).next_multiple_of(64 << 10)
    }

    fn init_buffer_stack(
        &self,
        stack: u32,
        size: BufferSize,
        mem: &Region,
    ) -> Result<(), GxioError> {
        let call = "gxio_mpipe_init_buffer_stack";
        let mut s = lock(&self.state);
        self.owned(&s, mem, call)?;
        if stack >= s.next[0] {
            return refuse(call, format!("stack {stack} not allocated"));
        }
        if !mem.va(0).is_multiple_of(64 << 10) {
            return refuse(call, "memory not 64 KiB aligned");
        }
        s.stacks[stack as usize] = Some(StackState {
            size,
            capacity: (mem.len().saturating_sub(4096)) / 8,
            buffers: Vec::new(),
            pages: Vec::new(),
        });
        Ok(())
    }

    fn register_page(&self, stack: u32, page: &Region) -> Result<(), GxioError> {
        let call = "gxio_mpipe_register_page";
        let mut s = lock(&self.state);
        self.owned(&s, page, call)?;
        match s.stacks.get_mut(stack as usize).and_then(|st| st.as_mut()) {
            Some(st) if st.pages.len() < 16 => {
                st.pages.push(page.clone());
                Ok(())
            }
            Some(_) => refuse(call, "16 pages per stack"),
            None => refuse(call, format!("stack {stack} not initialized")),
        }
    }

    fn push_buffer(&self, stack: u32, va: u64) {
        let mut s = lock(&self.state);
        let va = va & !127;
        let Some(st) = s.stacks.get_mut(stack as usize).and_then(|st| st.as_mut()) else {
            s.misuse(format!("push of {va:#x} to stack {stack}, not initialized"));
            return;
        };
        let bytes = st.size.bytes() as u64;
        let mapped = st.pages.iter().any(|p| {
            p.offset_of(va)
                .is_some_and(|o| o as u64 + bytes <= p.len() as u64)
        });
        if !mapped {
            s.misuse(format!(
                "push of {va:#x} to stack {stack}: not in its pages"
            ));
        } else if st.buffers.len() >= st.capacity {
            s.misuse(format!("push to stack {stack} past its capacity"));
        } else if cfg!(debug_assertions) && st.buffers.contains(&va) {
            s.misuse(format!("{va:#x} pushed to stack {stack} twice"));
        } else {
            st.buffers.push(va);
        }
    }

    fn alloc_notif_rings(&self, count: u32) -> Result<u32, GxioError> {
        self.alloc(1, count, NOTIF_RINGS, "gxio_mpipe_alloc_notif_rings")
    }

    fn init_notif_ring(&self, ring: u32, mem: &Region) -> Result<(), GxioError> {
        let call = "gxio_mpipe_init_notif_ring";
        let mut s = lock(&self.state);
        self.owned(&s, mem, call)?;
        let entries = mem.len() / hw::IDESC_LEN;
        if ring >= s.next[1] {
            return refuse(call, format!("NotifRing {ring} not allocated"));
        }
        if ![128, 512, 2048, 65536].contains(&entries) || !mem.len().is_multiple_of(hw::IDESC_LEN) {
            return refuse(call, format!("{} bytes", mem.len()));
        }
        let write = mem.load(0) as usize;
        if write != 1 {
            s.misuse(format!("NotifRing {ring}: tail word {write}, not 1"));
        }
        s.rings[ring as usize] = Some(NotifRing {
            mem: mem.clone(),
            entries,
            write: 1,
            // The tail must not catch the head: it would read as an empty ring.
            credits: entries - 2,
            written: 0,
        });
        Ok(())
    }

    fn alloc_notif_groups(&self, count: u32) -> Result<u32, GxioError> {
        self.alloc(2, count, GROUPS, "gxio_mpipe_alloc_notif_groups")
    }

    fn alloc_buckets(&self, count: u32) -> Result<u32, GxioError> {
        self.alloc(3, count, BUCKETS, "gxio_mpipe_alloc_buckets")
    }

    fn init_notif_group_and_buckets(
        &self,
        group: u32,
        ring: u32,
        num_rings: u32,
        bucket: u32,
        num_buckets: u32,
        mode: BucketMode,
    ) -> Result<(), GxioError> {
        let call = "gxio_mpipe_init_notif_group_and_buckets";
        let mut s = lock(&self.state);
        if group >= s.next[2] {
            return refuse(call, format!("group {group} not allocated"));
        }
        if num_rings == 0 || ring + num_rings > s.next[1] {
            return refuse(call, format!("NotifRings {ring}+{num_rings} not allocated"));
        }
        if num_buckets == 0 || bucket + num_buckets > s.next[3] {
            return refuse(
                call,
                format!("buckets {bucket}+{num_buckets} not allocated"),
            );
        }
        for i in 0..num_buckets {
            s.buckets[(bucket + i) as usize] = Some(Bucket {
                ring: ring + i % num_rings,
                mode,
            });
        }
        Ok(())
    }

    fn commit_rules(&self, rules: &[Rule]) -> Result<(), GxioError> {
        let call = "gxio_mpipe_rules_commit";
        let mut s = lock(&self.state);
        if !s.link_open {
            return refuse(call, "no link open");
        }
        for r in rules {
            if !r.num_buckets.is_power_of_two() || r.bucket + r.num_buckets > s.next[3] {
                return refuse(call, format!("buckets {}+{}", r.bucket, r.num_buckets));
            }
            if r.stacks
                .iter()
                .any(|&i| s.stacks.get(i as usize).is_none_or(|x| x.is_none()))
            {
                return refuse(call, "a stack not initialized");
            }
            if r.channels.iter().any(|&c| c != CHANNEL) {
                return refuse(call, "a channel of no open link");
            }
        }
        s.rules = rules.to_vec();
        Ok(())
    }

    fn credit(&self, ring: Option<u32>, bucket: Option<u32>, count: u32) {
        let _ = bucket; // static flow affinity keeps no bucket reference counts
        let Some(ring) = ring else { return };
        let mut s = lock(&self.state);
        let over = match s.rings.get_mut(ring as usize).and_then(|r| r.as_mut()) {
            Some(r) => {
                r.credits += count as usize;
                (r.credits > r.entries - 2).then_some(r.entries)
            }
            None => Some(0),
        };
        if let Some(entries) = over {
            s.misuse(format!(
                "credit to NotifRing {ring} past its {entries} entries"
            ));
        }
    }

    fn alloc_edma_rings(&self, count: u32) -> Result<u32, GxioError> {
        self.alloc(4, count, EDMA_RINGS, "gxio_mpipe_alloc_edma_rings")
    }

    fn init_edma_ring(&self, ering: u32, channel: u32, mem: &Region) -> Result<(), GxioError> {
        let call = "gxio_mpipe_init_edma_ring";
        let mut s = lock(&self.state);
        self.owned(&s, mem, call)?;
        let entries = mem.len() / hw::EDESC_LEN;
        if ering >= s.next[4] {
            return refuse(call, format!("eDMA ring {ering} not allocated"));
        }
        if channel != CHANNEL || !s.link_open {
            return refuse(call, format!("channel {channel} is no open link's"));
        }
        if ![512, 2048, 8192, 65536].contains(&entries) || !mem.len().is_multiple_of(hw::EDESC_LEN)
        {
            return refuse(call, format!("{} bytes", mem.len()));
        }
        s.erings[ering as usize] = Some(EdmaRing {
            mem: mem.clone(),
            entries,
            read: 0,
            completed: 0,
            partial: Vec::new(),
            csum: None,
            drop_partial: false,
        });
        Ok(())
    }

    fn edma_completed(&self, ering: u32) -> u64 {
        let s = lock(&self.state);
        s.erings
            .get(ering as usize)
            .and_then(|r| r.as_ref())
            .map_or(0, |r| r.completed)
    }

    fn edma_post(&self, ering: u32) {
        let mut s = lock(&self.state);
        if s.erings.get(ering as usize).is_none_or(|r| r.is_none()) {
            s.misuse(format!("post to eDMA ring {ering}, not initialized"));
            return;
        }
        s.egress(ering);
    }
}
