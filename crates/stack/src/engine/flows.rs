//! The flow table: the 4-tuple (less our own address) of every live connection and
//! every TIME-WAIT entry, to the connection block's slot or the TIME-WAIT entry's
//! ([`Flow`]), counting per remote endpoint the ephemeral ports it holds ([`PortUse`])
//! so that active opens know at once when a destination is out of ports.
//!
//! One table for both, not a TIME-WAIT table beside it: a connection entering TIME-WAIT
//! changes its bucket's value instead of leaving one table and entering the other, and
//! a segment for no live connection (every SYN) is looked up once, not in each
//! (`scripts/callgrind-conn.sh`).

use std::collections::HashMap;
use std::hash::{BuildHasher, Hasher};

use super::flow_key::{TableKey, V4Key, V6Key};
use super::ports::{InUse, PortUse, Remote};
use super::FlowKey;

/// What a flow maps to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flow {
    /// A live connection: its block's slot in the connection table.
    Conn(u32),
    /// A TIME-WAIT entry: its slot in the TIME-WAIT table (see `timewait`).
    TimeWait(u32),
}

/// The bit of a bucket's value that says [`Flow::TimeWait`]: the value is one `u32`, so
/// that a bucket stays 12 bytes. Slots of either kind are far fewer than 2³¹.
const TIME_WAIT_BIT: u32 = 1 << 31;

impl Flow {
    #[inline]
    fn from_value(value: u32) -> Flow {
        if value & TIME_WAIT_BIT == 0 {
            Flow::Conn(value)
        } else {
            Flow::TimeWait(value & !TIME_WAIT_BIT)
        }
    }

    #[inline]
    fn value(self) -> u32 {
        match self {
            Flow::Conn(slot) => {
                debug_assert!(slot < TIME_WAIT_BIT);
                slot
            }
            Flow::TimeWait(slot) => {
                debug_assert!(slot < TIME_WAIT_BIT);
                slot | TIME_WAIT_BIT
            }
        }
    }
}

/// Live connections and TIME-WAIT entries by flow. Inserts and removals keep the
/// ephemeral-port counts in step; a flow going from a live connection to TIME-WAIT
/// (or back, reopened) stays in the table and keeps its port.
pub struct Flows {
    /// IPv4 flows, each key one word (see [`FlowKey::table_key`]).
    v4: HashMap<V4Key, u32, FlowHash>,
    /// IPv6 flows. A table apart, so that the IPv4 one keeps its 12-byte buckets and
    /// its one-word compares, which the compiler inlines on the receive path.
    v6: HashMap<V6Key, u32, FlowHash>,
    ports: PortUse,
}

impl Flows {
    /// Bytes the tables take with room for `capacity` flows of IPv4 and, if `ipv6`,
    /// as many of IPv6: the hash tables' buckets (one flow and one control byte each;
    /// at most 7/8 of them in use, a power of two).
    pub(super) fn reserved_bytes(capacity: usize, ipv6: bool) -> usize {
        let buckets = (capacity.saturating_mul(8) / 7).next_power_of_two();
        let v6 = if ipv6 {
            size_of::<(V6Key, u32)>() + 1
        } else {
            0
        };
        buckets * (size_of::<(V4Key, u32)>() + 1 + v6)
    }

    /// Tables with room for `capacity` IPv4 flows and `capacity_v6` IPv6 ones before
    /// they grow, counting local ports in `ephemeral`.
    pub fn new(
        capacity: usize,
        capacity_v6: usize,
        ephemeral: std::ops::RangeInclusive<u16>,
    ) -> Flows {
        Flows {
            v4: HashMap::with_capacity_and_hasher(capacity, FlowHash::new()),
            v6: HashMap::with_capacity_and_hasher(capacity_v6, FlowHash::new()),
            ports: PortUse::new(ephemeral),
        }
    }

    /// What `key` maps to, if anything.
    #[inline]
    pub fn get(&self, key: &FlowKey) -> Option<Flow> {
        match key.table_key() {
            TableKey::V4(k) => self.v4.get(&k).map(|&v| Flow::from_value(v)),
            TableKey::V6(k) => self.get_v6(&k),
        }
    }

    /// [`Flows::get`] of an IPv6 flow, out of line: inlined beside the IPv4 lookup, it
    /// makes the compiler keep both out of the receive path.
    #[inline(never)]
    fn get_v6(&self, key: &V6Key) -> Option<Flow> {
        self.v6.get(key).map(|&v| Flow::from_value(v))
    }

    /// The slot of the live connection on `key`, if any: for the rare paths that look
    /// a connection up (ICMPv6 errors), apart from [`Flows::get`], the receive path's
    /// lookup, which the compiler then inlines there as its only caller.
    pub(super) fn conn(&self, key: &FlowKey) -> Option<usize> {
        let value = match key.table_key() {
            TableKey::V4(k) => self.v4.get_key_value(&k).map(|(_, v)| v),
            TableKey::V6(k) => self.v6.get_key_value(&k).map(|(_, v)| v),
        };
        match value.map(|&v| Flow::from_value(v)) {
            Some(Flow::Conn(slot)) => Some(slot as usize),
            _ => None,
        }
    }

    /// Whether a live connection or a TIME-WAIT entry holds `key`.
    pub fn contains_key(&self, key: &FlowKey) -> bool {
        match key.table_key() {
            TableKey::V4(k) => self.v4.contains_key(&k),
            TableKey::V6(k) => self.v6.contains_key(&k),
        }
    }

    /// Map `key` to `flow`; what `key` mapped to before, if anything.
    pub fn insert(&mut self, key: FlowKey, flow: Flow) -> Option<Flow> {
        let old = match key.table_key() {
            TableKey::V4(k) => self.v4.insert(k, flow.value()),
            TableKey::V6(k) => self.v6.insert(k, flow.value()),
        };
        if old.is_none() {
            self.ports.added(&key);
        }
        old.map(Flow::from_value)
    }

    /// Map `key`, which the table holds, to `flow` instead (a connection entering
    /// TIME-WAIT): one lookup, and the port stays counted.
    pub(super) fn replace(&mut self, key: &FlowKey, flow: Flow) {
        let value = match key.table_key() {
            TableKey::V4(k) => self.v4.get_mut(&k),
            TableKey::V6(k) => self.v6.get_mut(&k),
        };
        match value {
            Some(value) => *value = flow.value(),
            None => debug_assert!(false, "replacing a flow the table does not hold"),
        }
    }

    pub(super) fn remove(&mut self, key: &FlowKey) -> Option<Flow> {
        let old = match key.table_key() {
            TableKey::V4(k) => self.v4.remove(&k),
            TableKey::V6(k) => self.v6.remove(&k),
        };
        if old.is_some() {
            self.ports.removed(key);
        }
        old.map(Flow::from_value)
    }

    /// Ephemeral ports the table holds towards `remote`, live and in TIME-WAIT.
    pub(super) fn ports_in_use(&self, remote: Remote) -> InUse {
        self.ports.get(remote)
    }
}

/// The flow tables' hash: an IPv4 flow is one 64-bit word (an IPv6 one three, see
/// [`FlowKey::table_key`]), each mixed with a keyed folded
/// multiply (the word, xored with a secret, times a secret odd constant as a 128-bit
/// product, whose halves are xored; the core step of foldhash and ahash's fallback). One
/// multiplication per lookup (the write's; `finish` adds none) instead of ahash's rounds
/// over three writes. The keys are
/// drawn from the process's `RandomState` per table, so a peer choosing addresses and
/// ports cannot aim at a bucket without learning them.
#[derive(Clone)]
pub(crate) struct FlowHash {
    xor: u64,
    mul: u64,
}

impl FlowHash {
    pub(crate) fn new() -> FlowHash {
        let seed = std::collections::hash_map::RandomState::new();
        FlowHash {
            xor: seed.hash_one(0x6a09_e667_f3bc_c908u64),
            mul: seed.hash_one(0xbb67_ae85_84ca_a73bu64) | 1,
        }
    }
}

impl BuildHasher for FlowHash {
    type Hasher = FlowHasher;
    #[inline]
    fn build_hasher(&self) -> FlowHasher {
        FlowHasher {
            xor: self.xor,
            mul: self.mul,
            word: 0,
        }
    }
}

/// See [`FlowHash`].
pub(crate) struct FlowHasher {
    xor: u64,
    mul: u64,
    word: u64,
}

impl Hasher for FlowHasher {
    #[inline]
    fn write_u64(&mut self, word: u64) {
        // Folded in with the secret at each write, so that several writes (none from
        // `FlowKey`) still all count and the one write of a key is the whole hash.
        self.word = fold(self.word ^ word ^ self.xor, self.mul);
    }

    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut word = [0u8; 8];
            word[..chunk.len()].copy_from_slice(chunk);
            self.write_u64(u64::from_le_bytes(word));
        }
    }

    #[inline]
    fn write_u128(&mut self, word: u128) {
        self.write_u64(word as u64);
        self.write_u64((word >> 64) as u64);
    }

    #[inline]
    fn finish(&self) -> u64 {
        self.word
    }
}

/// The folded multiply: both halves of the 128-bit product, xored.
#[inline]
fn fold(a: u64, b: u64) -> u64 {
    let p = u128::from(a) * u128::from(b);
    (p as u64) ^ ((p >> 64) as u64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;

    fn key(ip: u32, remote_port: u16, local_port: u16) -> FlowKey {
        FlowKey::new(Ipv4Addr::from(ip).into(), remote_port, local_port, 0)
    }

    #[test]
    fn flows_that_differ_in_one_field_spread_over_buckets() {
        // 65,536 flows from one client differing only in the port (the common case),
        // and as many from one port over many addresses: the low bits hashbrown picks a
        // bucket with and the top seven it tags entries with must both vary.
        let h = FlowHash::new();
        for keys in [
            (0..65_536u32)
                .map(|p| key(0x0a00_0001, p as u16, 80))
                .collect::<Vec<_>>(),
            (0..65_536u32)
                .map(|i| key(0x0a00_0000 + i, 40_000, 80))
                .collect(),
        ] {
            let mut low = vec![0u32; 1 << 12];
            let mut top = [0u32; 128];
            for k in &keys {
                let x = h.hash_one(k);
                low[(x & 0xfff) as usize] += 1;
                top[(x >> 57) as usize] += 1;
            }
            // 16 per bucket on average; a poor hash piles them up.
            assert!(
                low.iter().all(|&n| n < 48),
                "low bits: max {:?}",
                low.iter().max()
            );
            assert!(
                top.iter().all(|&n| n < 1024),
                "top bits: max {:?}",
                top.iter().max()
            );
        }
    }

    #[test]
    fn tables_are_keyed_apart() {
        let (a, b) = (FlowHash::new(), FlowHash::new());
        let k = key(0x0a00_0001, 1234, 80);
        assert_ne!(a.hash_one(k), b.hash_one(k));
    }
}
