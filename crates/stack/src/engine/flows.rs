//! The flow table: the 4-tuple (less our own address) of every live connection, to its
//! block's slot, counting per remote endpoint the ephemeral ports it holds
//! ([`PortUse`]) so that active opens know at once when a destination is out of ports.

use std::collections::HashMap;

use ahash::RandomState;

use super::ports::{InUse, PortUse, Remote};
use super::FlowKey;

/// Live connections by flow. Its lookups have the `HashMap` signatures the receive path
/// uses; inserts and removals keep the ephemeral-port counts in step. Slots are `u32`
/// (an engine's are far fewer): a bucket is 12 bytes, not 16.
pub(crate) struct Flows {
    map: HashMap<FlowKey, u32, RandomState>,
    ports: PortUse,
}

impl Flows {
    /// A table with room for `capacity` flows before it grows, counting local ports in
    /// `ephemeral`.
    pub(super) fn new(capacity: usize, ephemeral: std::ops::RangeInclusive<u16>) -> Flows {
        Flows {
            map: HashMap::with_capacity_and_hasher(capacity, RandomState::new()),
            ports: PortUse::new(ephemeral),
        }
    }

    #[inline]
    pub(super) fn get(&self, key: &FlowKey) -> Option<&u32> {
        self.map.get(key)
    }

    pub(super) fn contains_key(&self, key: &FlowKey) -> bool {
        self.map.contains_key(key)
    }

    /// Map `key` to `index`; the previous slot, if `key` had one.
    pub(super) fn insert(&mut self, key: FlowKey, index: u32) -> Option<u32> {
        let old = self.map.insert(key, index);
        if old.is_none() {
            self.ports.added(&key);
        }
        old
    }

    pub(super) fn remove(&mut self, key: &FlowKey) -> Option<u32> {
        let old = self.map.remove(key);
        if old.is_some() {
            self.ports.removed(key);
        }
        old
    }

    /// Ephemeral ports the table holds towards `remote`.
    pub(super) fn ports_in_use(&self, remote: Remote) -> InUse {
        self.ports.get(remote)
    }
}
