//! What the program's processes share: how many stacks run on the link, and the
//! neighbours they learned.
//!
//! Each process runs its own engine on its own queue. The kernel steers a frame to one
//! queue by its own rules, which a process cannot predict: an ARP reply may reach
//! another process than the one that asked, and a segment of one process's connection
//! may reach another's queue. So engines publish what they learn to a small table, and
//! take in what the others published when the table's generation moves; and while
//! more than one stack runs, an engine drops a segment for a connection it does not
//! know instead of resetting it (`EngineConfig::shared_link`), since it may be
//! another's. The processes also count, per port, how many of them listen on it, so
//! that an engine still refuses a SYN for a port no process listens on, as a link of
//! its own would (`Engine::set_link_listeners`). The table lives in memory the library
//! maps shared as it is loaded, before the program can fork, so every process of the
//! program inherits the same one.
//!
//! The table is a fixed array of slots, found by the address's hash (a newer mapping
//! for another address in the same slot replaces the older: the table is a cache, and
//! a process that misses asks again); it holds ARP's IPv4 neighbours and Neighbor
//! Discovery's IPv6 ones alike. Each slot is guarded by a sequence number, odd while a
//! writer is in it, which readers check before and after reading.
//!
//! The mapping starts with a number that names its layout ([`LAYOUT`]): a process
//! whose library lays the table out otherwise (another build, exec'd by this one)
//! finds it wrong and keeps a table of its own rather than misread this one.

use std::net::IpAddr;
use std::sync::atomic::{AtomicU16, AtomicU32, AtomicU64, Ordering};
use std::sync::OnceLock;

use rusty_stack::io::MacAddr;

use crate::heirs::{self, Heirloom, Me};
use crate::snapshots::{self, Publisher};
use crate::sys;

/// Slots in the table.
const SLOTS: usize = 256;

/// One mapping, guarded by `seq`.
#[derive(Default)]
#[repr(C)]
pub(crate) struct Slot {
    seq: AtomicU32,
    /// The address's 128 bits, the high half first (an IPv4 one IPv4-mapped).
    ip: [AtomicU64; 2],
    /// The MAC address in the low 48 bits; 0: empty.
    mac: AtomicU64,
}

/// The shared part: the number of stacks on the link, a generation that moves with
/// every publication, and the slots.
#[repr(C)]
pub(crate) struct Shared {
    stacks: AtomicU32,
    generation: AtomicU64,
    slots: [Slot; SLOTS],
}

impl Default for Shared {
    fn default() -> Shared {
        Shared {
            stacks: AtomicU32::new(0),
            generation: AtomicU64::new(0),
            slots: std::array::from_fn(|_| Slot::default()),
        }
    }
}

/// Per local port, how many of the program's processes listen on it.
#[repr(C)]
pub(crate) struct PortCounts([AtomicU16; 1 << 16]);

impl Default for PortCounts {
    fn default() -> PortCounts {
        PortCounts(std::array::from_fn(|_| AtomicU16::new(0)))
    }
}

/// Everything the program's processes share, in one mapping: the neighbour table and
/// stack count, the listening ports, the listening sockets that outlive `exec`, and
/// the counters each process publishes for `rusty-run --metrics`.
#[repr(C)]
#[derive(Default)]
pub(crate) struct Mapped {
    /// [`LAYOUT`] once a process has taken the table up (0 before).
    layout: AtomicU64,
    shared: Shared,
    ports: PortCounts,
    heirs: heirs::Table,
    snapshots: snapshots::Table,
}

// SAFETY: atomics only, all-zero bytes valid (counts, generations and slots of zero,
// free entries); no pointers.
#[allow(unsafe_code)]
unsafe impl sys::SharedPlain for Mapped {}

/// The layout of [`Mapped`] this library reads and writes: "rusty" and a version,
/// which a change to the layout moves.
const LAYOUT: u64 = u64::from_be_bytes(*b"rusty\0\0\x03");

impl Mapped {
    /// Take the table up: whether it is laid out as this library lays it out (a fresh
    /// one is, from now on).
    fn claim(&self) -> bool {
        match self
            .layout
            .compare_exchange(0, LAYOUT, Ordering::AcqRel, Ordering::Acquire)
        {
            Ok(_) => true,
            Err(found) => found == LAYOUT,
        }
    }
}

/// A process's handle on the shared table.
pub(crate) struct Siblings {
    shared: &'static Shared,
    ports: &'static [AtomicU16; 1 << 16],
    heirs: &'static heirs::Table,
    snapshots: &'static snapshots::Table,
    /// This process, as `heirs` knows it.
    me: Me,
    /// The generation this process last took in.
    seen: u64,
    /// The ports this process counts itself as listening on.
    mine: Vec<u16>,
}

impl Siblings {
    /// A handle on the program's table ([`prepare`]).
    pub(crate) fn new() -> Siblings {
        Siblings::over(prepare())
    }

    /// A handle on the table `mapped` (the program's is [`prepare`]'s).
    fn over(mapped: &'static Mapped) -> Siblings {
        Siblings {
            shared: &mapped.shared,
            ports: &mapped.ports.0,
            heirs: &mapped.heirs,
            snapshots: &mapped.snapshots,
            me: Me::current(),
            seen: 0,
            mine: Vec::new(),
        }
    }

    /// Record listening socket `h`, for the program this process may exec (see
    /// `heirs`); false when the table is full.
    pub(crate) fn bequeath(&self, h: Heirloom) -> bool {
        self.heirs.record(self.me, h)
    }

    /// The listening socket on `fd` is closed.
    pub(crate) fn disinherit(&self, fd: std::os::fd::RawFd) {
        self.heirs.forget(self.me, fd);
    }

    /// Where this process publishes its counters, when `rusty-run` reads them (see
    /// `snapshots`).
    pub(crate) fn publisher(&self) -> Option<Publisher> {
        self.snapshots.publisher(self.me)
    }

    /// The listening sockets the image before this one's `exec` recorded.
    pub(crate) fn inheritance(&self) -> Vec<Heirloom> {
        self.heirs.of(self.me)
    }

    /// The handle a forked child inherited: the parent's ports are the parent's to
    /// count, so the child counts its own from scratch, and takes everything in anew.
    pub(crate) fn forked(&mut self) {
        self.mine.clear();
        self.seen = 0;
        self.me = Me::current();
    }

    /// This process now listens on `ports` (in order, no repeats).
    pub(crate) fn set_listening(&mut self, ports: &[u16]) {
        if ports == self.mine {
            return;
        }
        for &p in ports {
            if self.mine.binary_search(&p).is_err() {
                let _ = self.ports[usize::from(p)].fetch_update(
                    Ordering::AcqRel,
                    Ordering::Acquire,
                    |n| n.checked_add(1),
                );
            }
        }
        for &p in &self.mine {
            if ports.binary_search(&p).is_err() {
                self.uncount(p);
            }
        }
        self.mine = ports.to_vec();
        self.shared.generation.fetch_add(1, Ordering::Release);
    }

    fn uncount(&self, port: u16) {
        let _ =
            self.ports[usize::from(port)]
                .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| n.checked_sub(1));
    }

    /// The ports some process of the program listens on, in order.
    pub(crate) fn listened(&self) -> Vec<u16> {
        (0..=u16::MAX)
            .filter(|&p| self.ports[usize::from(p)].load(Ordering::Acquire) > 0)
            .collect()
    }

    /// This process runs a stack on the link (once, when it opens its queue).
    pub(crate) fn join(&self) {
        self.shared.stacks.fetch_add(1, Ordering::AcqRel);
    }

    /// This process's stack is gone (once, as it exits): it no longer listens either.
    pub(crate) fn leave(&mut self) {
        for p in std::mem::take(&mut self.mine) {
            self.uncount(p);
        }
        self.heirs.forget_all(self.me);
        self.shared.generation.fetch_add(1, Ordering::Release);
        let _ = self
            .shared
            .stacks
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| n.checked_sub(1));
    }

    /// Whether other processes run stacks on the link now.
    pub(crate) fn crowded(&self) -> bool {
        self.shared.stacks.load(Ordering::Acquire) > 1
    }

    /// Publish mappings this process's engine learned.
    pub(crate) fn publish(&mut self, learned: &[(IpAddr, MacAddr)]) {
        for &(ip, mac) in learned {
            let bits = bits_of(ip);
            let slot = &self.shared.slots[slot_of(bits)];
            let seq = slot.seq.fetch_add(1, Ordering::Acquire);
            if seq % 2 == 1 {
                // Another process is writing this slot: let its mapping stand.
                slot.seq.fetch_sub(1, Ordering::Release);
                continue;
            }
            slot.ip[0].store((bits >> 64) as u64, Ordering::Relaxed);
            slot.ip[1].store(bits as u64, Ordering::Relaxed);
            slot.mac.store(pack(mac), Ordering::Relaxed);
            slot.seq.fetch_add(1, Ordering::Release);
        }
        if !learned.is_empty() {
            self.shared.generation.fetch_add(1, Ordering::Release);
        }
    }

    /// The mappings in the table, if anyone published (mappings or ports) since the
    /// last call; whether anyone did.
    pub(crate) fn take_new(&mut self, out: &mut Vec<(IpAddr, MacAddr)>) -> bool {
        let generation = self.shared.generation.load(Ordering::Acquire);
        if generation == self.seen {
            return false;
        }
        self.seen = generation;
        for slot in &self.shared.slots {
            let before = slot.seq.load(Ordering::Acquire);
            if before % 2 == 1 {
                continue;
            }
            let bits = (u128::from(slot.ip[0].load(Ordering::Relaxed)) << 64)
                | u128::from(slot.ip[1].load(Ordering::Relaxed));
            let mac = slot.mac.load(Ordering::Relaxed);
            if slot.seq.load(Ordering::Acquire) != before || mac == 0 {
                continue;
            }
            out.push((ip_of(bits), unpack(mac)));
        }
        true
    }
}

/// Whether some process of the program runs a stack on the link already (one this
/// process forked from, or its own image before an `exec`).
pub(crate) fn stacks_running() -> bool {
    prepare().shared.stacks.load(Ordering::Acquire) > 0
}

/// The environment variable naming the descriptor of the memory file that holds the
/// table (`rusty-run` makes it, [`table_file`]).
pub const SHARED_VAR: &str = "RUSTY_PRELOAD_SHARED";

/// A memory file for the program's table, which its processes inherit across `fork`
/// and `exec`; `rusty-run` makes it and names it in [`SHARED_VAR`].
pub fn table_file() -> Result<std::os::fd::OwnedFd, String> {
    sys::memfd_for::<Mapped>(c"rusty-preload")
        .map_err(|e| format!("memfd_create: {}", std::io::Error::from_raw_os_error(e)))
}

/// The slots the program's processes publish their counters to, in the table in
/// memory file `fd` ([`table_file`]'s), which is taken up (its layout claimed) if no
/// process has yet.
pub(crate) fn snapshots_in(fd: std::os::fd::RawFd) -> Result<&'static snapshots::Table, String> {
    let mapped =
        sys::map_file::<Mapped>(fd).ok_or("the shared table's memory file does not map")?;
    if !mapped.claim() {
        return Err("the shared table is laid out by another build".into());
    }
    Ok(&mapped.snapshots)
}

/// The program's table: mapped on first use, which the library makes as it is loaded
/// (before the program can fork). From the memory file [`SHARED_VAR`] names, which
/// programs this one execs inherit too; else in anonymous memory that only the
/// processes forked from this one share; else in this process's memory alone.
pub(crate) fn prepare() -> &'static Mapped {
    static TABLE: OnceLock<&'static Mapped> = OnceLock::new();
    TABLE.get_or_init(|| {
        std::env::var(SHARED_VAR)
            .ok()
            .and_then(|v| v.parse().ok())
            .and_then(sys::map_file::<Mapped>)
            .filter(|m| {
                let ours = m.claim();
                if !ours {
                    log::warn!("{SHARED_VAR}: a table of another layout; not shared");
                }
                ours
            })
            .or_else(sys::shared_zeroed::<Mapped>)
            .unwrap_or_else(|| Box::leak(Box::default()))
    })
}

/// An address as a slot holds it: 128 bits, an IPv4 one IPv4-mapped.
fn bits_of(ip: IpAddr) -> u128 {
    match ip {
        IpAddr::V4(v4) => v4.to_ipv6_mapped().to_bits(),
        IpAddr::V6(v6) => v6.to_bits(),
    }
}

fn ip_of(bits: u128) -> IpAddr {
    std::net::Ipv6Addr::from_bits(bits).to_canonical()
}

fn slot_of(bits: u128) -> usize {
    let folded = (bits ^ (bits >> 64)) as u64;
    (folded.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 56) as usize % SLOTS
}

fn pack(mac: MacAddr) -> u64 {
    mac.0.iter().fold(0u64, |acc, &b| (acc << 8) | u64::from(b))
}

fn unpack(v: u64) -> MacAddr {
    let mut mac = [0u8; 6];
    for (i, b) in mac.iter_mut().enumerate() {
        *b = (v >> (8 * (5 - i))) as u8;
    }
    MacAddr(mac)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_one_handle_publishes_another_takes_in_once() {
        // A table of its own: the process's is shared with the other tests, whose
        // publishing would move its generation meanwhile.
        let table: &'static Mapped = Box::leak(Box::default());
        let mut a = Siblings::over(table);
        let mut b = Siblings::over(table);
        b.seen = a.shared.generation.load(Ordering::Acquire);
        let ip = IpAddr::from([10, 0, 0, 1]);
        let ip6: IpAddr = "fd00::9".parse().unwrap();
        let mac = MacAddr([2, 0, 0, 0, 0, 9]);
        a.publish(&[(ip, mac), (ip6, mac)]);
        let mut got = Vec::new();
        b.take_new(&mut got);
        got.sort();
        assert_eq!(got, [(ip, mac), (ip6, mac)]);
        got.clear();
        b.take_new(&mut got);
        assert!(got.is_empty(), "nothing new");
        assert_eq!(unpack(pack(mac)), mac);
    }

    #[test]
    fn processes_count_the_ports_they_listen_on() {
        // The table is the process's: use ports no other test does.
        let mut a = Siblings::new();
        let mut b = Siblings::new();
        let listened = |s: &Siblings| {
            s.listened()
                .into_iter()
                .filter(|p| (61000..61010).contains(p))
                .collect::<Vec<_>>()
        };
        a.set_listening(&[61001, 61002]);
        b.set_listening(&[61002, 61003]);
        assert!(b.take_new(&mut Vec::new()), "ports moved the generation");
        assert_eq!(listened(&b), [61001, 61002, 61003]);
        a.set_listening(&[61002]);
        assert_eq!(listened(&a), [61002, 61003]);
        // A forked child counts itself; the parent's count stays the parent's.
        let mut child = Siblings::new();
        child.mine = b.mine.clone();
        child.forked();
        child.set_listening(&[61003]);
        b.leave();
        assert_eq!(listened(&a), [61002, 61003]);
        child.leave();
        a.leave();
        assert!(listened(&a).is_empty());
    }
}
